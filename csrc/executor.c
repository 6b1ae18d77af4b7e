/* eagle's CPU executor; see executor.h for the contract. */
#include "executor.h"

#include <stdatomic.h>
#include <time.h>

#include "openmp_helpers.h"

/* How often (at least) the calling thread takes the GIL during a nogil launch
 * to run signal handlers: Ctrl-C must stop a long launch promptly. */
#define SIGNAL_CHECK_NS 5e6
/* Replays measured serially, on this thread, before an auto stage may use the
 * team: the cheapest of them counts, so one cold first replay (page faults,
 * first calls) cannot put a cheap stage on the team for good. They may be
 * spread over several launches. */
#define MEASURED_REPLAYS 3

static int forked_child = 0;
static int parallel_region_ran = 0;

void eagle_mark_forked_child(void) { if (parallel_region_ran) forked_child = 1; }
int eagle_is_forked_child(void) { return forked_child; }
int eagle_have_openmp(void) { return EAGLE_HAVE_OPENMP; }

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---- running one node ------------------------------------------------- */

/* Call an opaque node; the caller holds the GIL. */
static inline int call_opaque(const eagle_node *node)
{
    /* the callable's vectorcall slot, looked up once at plan time, skips the
     * generic call protocol's dispatch on every replay */
    PyObject *res = node->vectorcall != NULL
        ? node->vectorcall(node->callable, NULL, 0, NULL)
        : PyObject_CallNoArgs(node->callable);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

static inline void call_native(const eagle_node *node, int64_t start, int64_t stop)
{
    if (stop > start)
        node->kernel(start, stop, node->data, node->strides, node->user_data);
}

static inline void call_team(const eagle_node *node, int32_t phase, int tid, int nt, int64_t size)
{
    if (phase < node->n_phases)
        node->team_kernel(phase, tid, nt, size, node->data, node->strides, node->user_data);
}

/* Whether a node's cost grows with the logical size (measured per sample). */
static inline int is_sized(const eagle_node *n)
{
    return n->kind == EAGLE_NODE_TEAM || (n->kind == EAGLE_NODE_NATIVE && n->split);
}

/* After a replay: take the next logical size from the plan's size source.
 * Returns 1 when the launch should stop (until_empty and no sample left). */
static inline int end_of_replay(eagle_plan *plan, int64_t replay)
{
    plan->replays_done = replay + 1;
    if (plan->size_source != NULL) {
        int64_t n = *plan->size_source;
        plan->logical_size = n < 0 ? 0 : (n > plan->capacity ? plan->capacity : n);
    }
    return plan->until_empty && plan->logical_size == 0;
}

/* ---- team choice --------------------------------------------------------- */

static double node_cost(const eagle_node *n, int64_t logical_size)
{
    if (n->cost_ns < 0)
        return -1;
    return is_sized(n) ? n->cost_ns * (double)logical_size : n->cost_ns;
}

/* A stage cheaper than this runs on one thread whatever a barrier costs: a GIL
 * hand-off and waking the team cost microseconds. */
#define PARALLEL_MIN_NS 20e3
/* ... and a stage must cost this many barriers to be worth splitting. */
#define PARALLEL_MIN_BARRIERS 50

double eagle_parallel_threshold_ns(int n_threads)
{
    /* Measured once per team size, and only when a stage is expensive enough
     * to ask: a measurement starts the OpenMP pool, whose idle threads spin. */
    static double cache[256];
    if (n_threads < 2)
        return PARALLEL_MIN_NS;
    double *c = n_threads < 256 ? &cache[n_threads] : NULL;
    if (c && *c > 0)
        return *c;
    double best = -1;
    for (int k = 0; k < 3; ++k) {
        double b = eagle_barrier_cost_ns(n_threads);
        if (best < 0 || b < best)
            best = b;
    }
    double t = best * PARALLEL_MIN_BARRIERS;
    if (t < PARALLEL_MIN_NS)
        t = PARALLEL_MIN_NS;
    if (c)
        *c = t;
    return t;
}

void eagle_choose_teams(eagle_plan *plan)
{
    int parallel_ok = plan->num_threads > 1 && !forked_child && EAGLE_HAVE_OPENMP;
    for (int32_t s = 0; s < plan->n_stages; ++s) {
        eagle_stage *st = &plan->stages[s];
        double cost = 0;
        int splittable = 0;
        for (int32_t i = st->first; i < st->first + st->count; ++i) {
            const eagle_node *n = &plan->nodes[i];
            double c = node_cost(n, plan->logical_size);
            cost = (c < 0 || cost < 0) ? -1 : cost + c;
            splittable |= is_sized(n) && plan->logical_size > 1;
        }
        st->cost_ns = cost;
        int parallel;
        if (st->policy == EAGLE_TEAM_SERIAL)
            parallel = 0;
        else if (st->policy == EAGLE_TEAM_ALL)
            parallel = 1;
        else  /* auto: only a measured stage whose cost pays for a barrier and a hand-off */
            parallel = parallel_ok && plan->measured_replays >= MEASURED_REPLAYS
                       && (st->count > 1 || splittable) && cost >= PARALLEL_MIN_NS
                       && cost >= eagle_parallel_threshold_ns(plan->num_threads);
        st->team = (parallel && parallel_ok) ? plan->num_threads : 1;
    }
}

/* ---- serial execution on the calling thread ------------------------------ */

/* Run one replay on this thread, every node whole, timing each node when
 * measure is set. Opaque nodes are called directly: the caller holds the GIL
 * when the plan has any. */
static int run_replay_serial(eagle_plan *plan, int measure, int32_t *failed_node)
{
    for (int32_t s = 0; s < plan->n_stages; ++s) {
        const eagle_stage *st = &plan->stages[s];
        for (int32_t i = st->first; i < st->first + st->count; ++i) {
            eagle_node *n = &plan->nodes[i];
            double t0 = measure ? now_ns() : 0;
            if (n->kind == EAGLE_NODE_OPAQUE) {
                if (call_opaque(n) < 0) {
                    *failed_node = i;
                    return -1;
                }
            } else if (n->kind == EAGLE_NODE_TEAM) {
                for (int32_t p = 0; p < n->n_phases; ++p)
                    call_team(n, p, 0, 1, plan->logical_size);
            } else {
                call_native(n, 0, plan->logical_size);
            }
            if (measure) {
                double c = now_ns() - t0;
                if (is_sized(n))
                    c = plan->logical_size > 0 ? c / (double)plan->logical_size : -1;
                if (c >= 0 && (n->cost_ns < 0 || c < n->cost_ns))
                    n->cost_ns = c;
            }
        }
    }
    return 0;
}

/* A cheap "every few milliseconds": the clock is read only every `stride`
 * replays, and the stride adapts so a check falls about every SIGNAL_CHECK_NS. */
typedef struct {
    double last_ns;
    int64_t stride, countdown;
} signal_clock;

static void signal_clock_init(signal_clock *c)
{
    c->last_ns = now_ns();
    c->stride = c->countdown = 1;
}

/* Called when the countdown ran out: whether SIGNAL_CHECK_NS went by. */
static int signal_clock_due(signal_clock *c)
{
    double t = now_ns();
    int due = t - c->last_ns >= SIGNAL_CHECK_NS;
    if (due) {
        c->last_ns = t;
        c->stride = c->stride > 1 ? c->stride / 2 : 1;
    } else if (c->stride < (1 << 20)) {
        c->stride *= 2;
    }
    c->countdown = c->stride;
    return due;
}

/* Without the GIL: take it to run signal handlers when a check is due.
 * Returns -1 if a handler raised (the exception is set, the GIL released again). */
static int signal_clock_tick(signal_clock *c, PyThreadState **save)
{
    if (--c->countdown > 0 || !signal_clock_due(c))
        return 0;
    PyEval_RestoreThread(*save);
    int rc = PyErr_CheckSignals();
    *save = PyEval_SaveThread();
    return rc;
}

/* Serial replays holding the GIL (the plan has opaque nodes). The nodes are
 * stored in stage order, so a flat walk over them is the recording-order
 * program; this is the hot loop of a graph of small Python nodes. */
static int replay_serial_gil(eagle_plan *plan, int64_t r0, int64_t r1, int measure,
                             eagle_failure *failure)
{
    if (measure) {
        for (int64_t r = r0; r < r1; ++r) {
            if (run_replay_serial(plan, 1, &failure->node) < 0) {
                failure->replay = r;
                return -1;
            }
            if (end_of_replay(plan, r))
                break;
        }
        return 0;
    }
    const eagle_node *nodes = plan->nodes;
    const int32_t n = plan->n_nodes;
    signal_clock clock;
    signal_clock_init(&clock);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t size = plan->logical_size;
        for (int32_t i = 0; i < n; ++i) {
            const eagle_node *node = &nodes[i];
            if (node->kind == EAGLE_NODE_OPAQUE) {
                if (call_opaque(node) < 0) {
                    failure->node = i;
                    failure->replay = r;
                    return -1;
                }
            } else if (node->kind == EAGLE_NODE_NATIVE) {
                call_native(node, 0, size);
            } else {
                for (int32_t p = 0; p < node->n_phases; ++p)
                    call_team(node, p, 0, 1, size);
            }
        }
        if (end_of_replay(plan, r))
            break;
        if (PyErr_CheckSignals() < 0) {
            failure->node = -1;
            failure->replay = r;
            return -1;
        }
        /* nodes that are C callables never let other Python threads run:
         * hand the GIL over every few milliseconds, as the interpreter does */
        if (--clock.countdown <= 0 && signal_clock_due(&clock)) {
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
    }
    return 0;
}

/* Serial replays without the GIL (every node is native). */
static int replay_serial_nogil(eagle_plan *plan, int64_t r0, int64_t r1, int measure,
                               eagle_failure *failure)
{
    signal_clock clock;
    signal_clock_init(&clock);
    int32_t unused;
    int rc = 0;
    PyThreadState *save = PyEval_SaveThread();
    for (int64_t r = r0; r < r1; ++r) {
        run_replay_serial(plan, measure, &unused);
        if (end_of_replay(plan, r))
            break;
        if (signal_clock_tick(&clock, &save) < 0) {
            failure->node = -1;
            failure->replay = r;
            rc = -1;
            break;
        }
    }
    PyEval_RestoreThread(save);
    return rc;
}

/* ---- parallel execution ---------------------------------------------------- */

#if EAGLE_HAVE_OPENMP

/* A worker's hold on the GIL for the length of one parallel region: the first
 * opaque call makes (or finds) the thread's Python state, later ones reuse it. */
typedef struct {
    int have_state;
    PyGILState_STATE gstate;
    PyThreadState *tstate;
} gil_slot;

static inline void gil_take(gil_slot *g)
{
    if (!g->have_state) {
        g->gstate = PyGILState_Ensure();
        g->have_state = 1;
    } else {
        PyEval_RestoreThread(g->tstate);
    }
}

static inline void gil_drop(gil_slot *g) { g->tstate = PyEval_SaveThread(); }

static inline void gil_finish(gil_slot *g)
{
    if (g->have_state) {
        PyEval_RestoreThread(g->tstate);
        PyGILState_Release(g->gstate);
    }
}

/* State shared by the team during one launch. */
typedef struct {
    eagle_plan *plan;
    /* Number of barriers passed when the first failure (or stop) happened;
     * threads leave at the first barrier after it, so all of them pass the
     * same barriers. */
    _Atomic int64_t failed_at;
    int32_t failed_node;
    int64_t failed_replay;
    int64_t stopped_after;                     /* replays done when until_empty stopped, or -1 */
    PyObject *exc_type, *exc_value, *exc_tb;   /* the failure's exception, owned */
} team_state;

/* Keep the first failure (earliest barrier); the caller holds the GIL and the
 * Python error indicator is set. */
static void record_failure(team_state *ts, int64_t barriers, int32_t node, int64_t replay)
{
    int keep = 0;
    #pragma omp critical(eagle_failure)
    {
        int64_t cur = atomic_load(&ts->failed_at);
        if (barriers < cur || (ts->exc_type == NULL && barriers == cur)) {
            atomic_store(&ts->failed_at, barriers);
            keep = 1;
            Py_CLEAR(ts->exc_type);
            Py_CLEAR(ts->exc_value);
            Py_CLEAR(ts->exc_tb);
            PyErr_Fetch(&ts->exc_type, &ts->exc_value, &ts->exc_tb);
            ts->failed_node = node;
            ts->failed_replay = replay;
        }
    }
    if (!keep)
        PyErr_Clear();
}

/* until_empty ran out of samples: everyone leaves at the next barrier. */
static void record_stop(team_state *ts, int64_t barriers, int64_t replays_done)
{
    #pragma omp critical(eagle_failure)
    {
        if (barriers < atomic_load(&ts->failed_at))
            atomic_store(&ts->failed_at, barriers);
        ts->stopped_after = replays_done;
    }
}

/* This thread's part of phase `phase` of a stage run by a team of nt threads.
 * Phase 0 holds every node: split native nodes take their slice of
 * [0, logical_size), unsplit and opaque nodes are dealt out round-robin, team
 * nodes run their phase 0. Later phases belong to team nodes only. */
static int run_stage_share(team_state *ts, const eagle_stage *st, int32_t phase, int tid, int nt,
                           gil_slot *gil, int32_t *failed_node)
{
    eagle_plan *plan = ts->plan;
    int64_t n = plan->logical_size;
    int32_t unsplit = 0;
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_node *node = &plan->nodes[i];
        if (node->kind == EAGLE_NODE_TEAM) {
            call_team(node, phase, tid, nt, n);
            continue;
        }
        if (phase > 0)
            continue;
        if (node->kind == EAGLE_NODE_NATIVE && node->split) {
            call_native(node, n * tid / nt, n * (tid + 1) / nt);
            continue;
        }
        if (unsplit++ % nt != tid)
            continue;
        if (node->kind == EAGLE_NODE_NATIVE) {
            call_native(node, 0, n);
        } else {
            gil_take(gil);
            if (call_opaque(node) < 0) {
                *failed_node = i;
                return -1;   /* returns holding the GIL, the error set */
            }
            gil_drop(gil);
        }
    }
    return 0;
}

/* Phase `phase` of a stage run by the calling thread alone. */
static int run_stage_alone(team_state *ts, const eagle_stage *st, int32_t phase, gil_slot *gil,
                           int32_t *failed_node)
{
    eagle_plan *plan = ts->plan;
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_node *node = &plan->nodes[i];
        if (node->kind == EAGLE_NODE_TEAM) {
            call_team(node, phase, 0, 1, plan->logical_size);
        } else if (phase > 0) {
            continue;
        } else if (node->kind == EAGLE_NODE_NATIVE) {
            call_native(node, 0, plan->logical_size);
        } else {
            gil_take(gil);
            if (call_opaque(node) < 0) {
                *failed_node = i;
                return -1;
            }
            gil_drop(gil);
        }
    }
    return 0;
}

/* A barrier is needed between two consecutive stages unless both run on the
 * calling thread alone. */
static inline int needs_barrier(const eagle_stage *a, const eagle_stage *b)
{
    return a->team > 1 || b->team > 1;
}

/* Every thread of the team passes the same barriers; after each, all leave
 * together if a failure or stop was recorded before it. */
#define BARRIER_OR_LEAVE()                                   \
    do {                                                     \
        _Pragma("omp barrier")                               \
        ++barriers;                                          \
        if (atomic_load(&ts.failed_at) < barriers)           \
            goto leave;                                      \
    } while (0)

static int replay_parallel(eagle_plan *plan, int64_t r0, int64_t r1, eagle_failure *failure)
{
    team_state ts = {.plan = plan, .failed_node = -1, .failed_replay = -1, .stopped_after = -1};
    atomic_store(&ts.failed_at, INT64_MAX);
    parallel_region_ran = 1;
    const int32_t ns = plan->n_stages;

    PyThreadState *save = PyEval_SaveThread();
    #pragma omp parallel num_threads(plan->num_threads)
    {
        const int tid = eagle_omp_thread_num(), nt = eagle_omp_num_threads();
        gil_slot gil = {0};
        int64_t barriers = 0;
        int stopping = 0;            /* this thread failed: skip work until the exit barrier */
        signal_clock clock;
        signal_clock_init(&clock);

        for (int64_t r = r0; r < r1; ++r) {
            for (int32_t s = 0; s < ns; ++s) {
                const eagle_stage *st = &plan->stages[s];
                const eagle_stage *prev = &plan->stages[s == 0 ? ns - 1 : s - 1];
                if (!(r == r0 && s == 0) && needs_barrier(prev, st))
                    BARRIER_OR_LEAVE();
                for (int32_t p = 0; p < st->n_phases; ++p) {
                    if (p > 0 && st->team > 1)
                        BARRIER_OR_LEAVE();
                    if (stopping)
                        continue;
                    int32_t failed_node = -1;
                    int rc;
                    if (st->team > 1)
                        rc = run_stage_share(&ts, st, p, tid, nt, &gil, &failed_node);
                    else
                        rc = tid == 0 ? run_stage_alone(&ts, st, p, &gil, &failed_node) : 0;
                    if (rc < 0) {
                        record_failure(&ts, barriers, failed_node, r);
                        gil_drop(&gil);
                        stopping = 1;
                    }
                }
            }
            if (plan->size_source != NULL) {
                /* the next logical size is read once every thread's part is done */
                BARRIER_OR_LEAVE();
                if (tid == 0 && !stopping && end_of_replay(plan, r)) {
                    record_stop(&ts, barriers, r + 1);
                    stopping = 1;
                }
            }
            if (tid == 0 && !stopping && --clock.countdown <= 0 && signal_clock_due(&clock)) {
                gil_take(&gil);
                if (PyErr_CheckSignals() < 0) {
                    record_failure(&ts, barriers, -1, r);
                    stopping = 1;
                }
                gil_drop(&gil);
            }
        }
    leave:
        gil_finish(&gil);
    }
    PyEval_RestoreThread(save);

    if (ts.exc_type != NULL) {
        failure->node = ts.failed_node;
        failure->replay = ts.failed_replay;
        plan->replays_done = ts.failed_replay;
        PyErr_Restore(ts.exc_type, ts.exc_value, ts.exc_tb);
        return -1;
    }
    plan->replays_done = ts.stopped_after >= 0 ? ts.stopped_after : r1;
    return 0;
}

double eagle_barrier_cost_ns(int n_threads)
{
    if (n_threads < 2)
        return 0;
    const int rounds = 2000;
    double t0 = 0, t1 = 0;
    #pragma omp parallel num_threads(n_threads)
    {
        #pragma omp barrier
        #pragma omp master
        t0 = now_ns();
        for (int i = 0; i < rounds; ++i) {
            #pragma omp barrier
        }
        #pragma omp master
        t1 = now_ns();
    }
    parallel_region_ran = 1;
    return (t1 - t0) / rounds;
}

#else  /* no OpenMP: every stage has team 1 and the parallel path is never taken */

static int replay_parallel(eagle_plan *plan, int64_t r0, int64_t r1, eagle_failure *failure)
{
    return plan->has_opaque ? replay_serial_gil(plan, r0, r1, 0, failure)
                            : replay_serial_nogil(plan, r0, r1, 0, failure);
}

double eagle_barrier_cost_ns(int n_threads) { (void)n_threads; return 0; }

#endif

/* ---- entry point ---------------------------------------------------------- */

static int plan_needs_measuring(const eagle_plan *plan)
{
    if (plan->measured_replays >= MEASURED_REPLAYS)
        return 0;
    for (int32_t s = 0; s < plan->n_stages; ++s)
        if (plan->stages[s].policy == EAGLE_TEAM_AUTO)
            return 1;
    return 0;
}

int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure)
{
    failure->node = -1;
    failure->replay = -1;
    plan->replays_done = 0;
    if (n_replays <= 0 || plan->n_stages == 0 || (plan->until_empty && plan->logical_size == 0))
        return 0;

    int64_t r = 0;
    if (plan_needs_measuring(plan) && plan->num_threads > 1) {
        /* Opaque and fresh native nodes have unknown costs until they run: run
         * the first replays on this thread, timing each node, then choose. */
        int64_t m = MEASURED_REPLAYS - plan->measured_replays;
        if (m > n_replays)
            m = n_replays;
        int rc = plan->has_opaque ? replay_serial_gil(plan, 0, m, 1, failure)
                                  : replay_serial_nogil(plan, 0, m, 1, failure);
        plan->measured_replays += (int32_t)plan->replays_done;
        if (rc < 0 || plan->replays_done < m || (plan->until_empty && plan->logical_size == 0))
            return rc;
        r = m;
    }
    eagle_choose_teams(plan);
    if (r == n_replays)
        return 0;

    int any_team = 0;
    for (int32_t s = 0; s < plan->n_stages; ++s)
        any_team |= plan->stages[s].team > 1;
    if (any_team)
        return replay_parallel(plan, r, n_replays, failure);
    return plan->has_opaque ? replay_serial_gil(plan, r, n_replays, 0, failure)
                            : replay_serial_nogil(plan, r, n_replays, 0, failure);
}
