/* Profile spans and progress calls; see observe.h. */
#include "observe.h"

#ifndef _WIN32
#include <pthread.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include <stdlib.h>

#include "clock.h"
#include "launch.h"

static int64_t os_thread_id(void)
{
#if defined(__linux__)
    return (int64_t)syscall(SYS_gettid);
#elif !defined(_WIN32)
    return (int64_t)(uintptr_t)pthread_self();
#else
    return 1;
#endif
}

/* Room for one more span: the lane doubled (at least 1024 spans) up to its limit.
 * 0, or -1 when full or out of memory. */
static int lane_grow(eagle_profile_lane *lane, int64_t limit)
{
    if (lane->count >= limit)
        return -1;
    int64_t n = lane->allocated < 512 ? 1024 : 2 * lane->allocated;
    if (n > limit)
        n = limit;
    eagle_span *sp = realloc(lane->spans, (size_t)n * sizeof(eagle_span));
    if (sp == NULL)
        return -1;
    lane->spans = sp;
    lane->allocated = n;
    return 0;
}

void eagle_record_span(eagle_profile_lane *lane, int32_t node, int32_t phase, int64_t t0, int64_t t1,
                       int control)
{
    if (lane->os_thread == 0)
        lane->os_thread = os_thread_id();
    const int64_t limit = control ? 2 * lane->capacity : lane->capacity;
    if (lane->count < limit && (lane->count < lane->allocated || lane_grow(lane, limit) == 0)) {
        eagle_span *sp = &lane->spans[lane->count++];
        sp->node = node;
        sp->phase = phase;
        sp->replay = lane->replay;
        sp->t0_ns = t0;
        sp->t1_ns = t1;
    } else {
        lane->dropped++;
    }
}

int eagle_report_progress(eagle_plan *plan, int64_t done)
{
    double t = eagle_coarse_now_ns();
    if (t < plan->progress_next_ns)
        return 0;
    plan->progress_next_ns = t + EAGLE_PROGRESS_EVERY_NS;
    /* inside a long loop the replays move slowly: its iterations say how far it is */
    const int64_t iterations = eagle_this_thread()->iterations;
    PyObject *res = iterations > 0
        ? PyObject_CallFunction(plan->progress, "LL", (long long)done, (long long)iterations)
        : PyObject_CallFunction(plan->progress, "L", (long long)done);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}
