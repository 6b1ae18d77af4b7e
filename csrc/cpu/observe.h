/* Observing a launch: profile spans and progress calls (plan.h's eagle_profile
 * and eagle_plan.progress), off unless the Python layer asks for them.
 *
 * The run loops time node calls through run_node (node_run.h), whose observer
 * hook is one NULL test of the thread's lane when no profile is open.
 *
 * Ownership: the lanes and the progress callable are the caller's (plan.h).
 * Thread-safety: each thread writes its own lane; progress is called by the
 * launching thread holding the GIL.
 */
#ifndef EAGLE_OBSERVE_H
#define EAGLE_OBSERVE_H

#include "plan.h"   /* Python.h first */

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This thread's profile lane, or NULL (no profile: the usual case). */
static inline eagle_profile_lane *eagle_profile_lane_of(const eagle_plan *plan, int tid)
{
    const eagle_profile *p = plan->profile;
    return (p != NULL && tid < p->n_lanes) ? &p->lanes[tid] : NULL;
}

/* The spans' clock (CLOCK_MONOTONIC, integer ns). */
static inline int64_t eagle_span_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keep a span [t0, t1) of node `node`, phase `phase`, at the lane's replay, growing
 * the lane (or count it dropped when the lane is full: at its capacity, or twice it
 * for a control node's own span). */
void eagle_record_span(eagle_profile_lane *lane, int32_t node, int32_t phase, int64_t t0, int64_t t1,
                       int control);

/* Holding the GIL, at a signal check: call plan->progress(done) if a call is due
 * (at most every EAGLE_PROGRESS_EVERY_NS), progress(done, iterations) once the launch
 * has run while-loop iterations (eagle_thread_state.iterations). -1 if it raised. */
int eagle_report_progress(eagle_plan *plan, int64_t done);

#ifdef __cplusplus
}
#endif

#endif
