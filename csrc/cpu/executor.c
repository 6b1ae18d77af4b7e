/* eagle's CPU executor, the run loop; see executor.h for the contract. The
 * team choice it consults is in team_choice.c. */
#include "executor.h"

#include <stdatomic.h>
#include <time.h>
#ifndef _WIN32
#include <pthread.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "clock.h"
#include "openmp_helpers.h"
#include "relaxed.h"
#include "team_choice.h"

/* How often (at least) the calling thread takes the GIL during a nogil launch
 * to run signal handlers: Ctrl-C must stop a long launch promptly. */
#define SIGNAL_CHECK_NS 5e6
/* A launch of one replay this cheap (nodes' measured costs) keeps the GIL. */
#define SHORT_LAUNCH_NS 2e3

#if defined(_MSC_VER)
#define EAGLE_THREAD_LOCAL __declspec(thread)
#else
#define EAGLE_THREAD_LOCAL _Thread_local
#endif

static int forked_child = 0;
static int parallel_region_ran = 0;

void eagle_mark_forked_child(void) { if (parallel_region_ran) forked_child = 1; }
int eagle_is_forked_child(void) { return forked_child; }
int eagle_have_openmp(void) { return EAGLE_HAVE_OPENMP; }

int eagle_max_threads(void)
{
    /* more threads than CPUs never speed a stage up, and libgomp aborts the
     * process when it cannot create one: allow modest oversubscription only */
    long cpus = 1;
#if defined(_SC_NPROCESSORS_ONLN)
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    long cap = 8 * (cpus > 0 ? cpus : 1);
    if (cap < EAGLE_MIN_MAX_THREADS)
        cap = EAGLE_MIN_MAX_THREADS;
    if (cap > EAGLE_MAX_THREADS)
        cap = EAGLE_MAX_THREADS;
    int limit = eagle_omp_thread_limit();
    return (limit >= 1 && limit < cap) ? limit : (int)cap;
}

/* ---- launch contexts (re-entry guard) --------------------------------- */

/* What a thread's launches keep per thread: the innermost launch context, and the
 * replay it runs (see set_thread_replay). One thread-local, not two: in a shared
 * object each thread-local's address is a __tls_get_addr call, so a function takes
 * `&this_thread` once and reaches both through it. */
typedef struct {
    const eagle_launch_ctx *launch;
    uint64_t replay;
} thread_state;

static EAGLE_THREAD_LOCAL thread_state this_thread = {NULL, 0};

void eagle_launch_push(eagle_launch_ctx *ctx, const void *owner)
{
    thread_state *me = &this_thread;
    ctx->owner = owner;
    ctx->parent = me->launch;
    me->launch = ctx;
}

void eagle_launch_pop(eagle_launch_ctx *ctx) { this_thread.launch = ctx->parent; }

int eagle_launch_encloses(const void *owner)
{
    for (const eagle_launch_ctx *c = this_thread.launch; c != NULL; c = c->parent)
        if (c->owner == owner)
            return 1;
    return 0;
}

/* ---- the signal ticker ---------------------------------------------------
 * Reading a clock on every replay costs ~20 ns, more than a tiny replay;
 * reading it every k replays cannot bound the time between checks when the
 * replays become slow in the middle of a launch. A helper thread advances
 * `ticks` every SIGNAL_CHECK_NS while launches run (and for a short while
 * after, so a loop of short launches does not wake it each time); a replay
 * loop compares one counter. Without the thread, every replay reads the clock. */

static _Atomic uint64_t ticks = 0;
static _Atomic int ticker_users = 0;
#ifndef _WIN32
#define TICKER_IDLE_TICKS 40          /* ~200 ms without a launch, then sleep */
static pthread_mutex_t ticker_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ticker_cv = PTHREAD_COND_INITIALIZER;
static _Atomic int ticker_state = 0;  /* 0: no thread, 1: ticking, 2: asleep, -1: could not start */
static int ticker_atfork_set = 0;

static void *ticker_main(void *arg)
{
    (void)arg;
    struct timespec pause = {0, (long)SIGNAL_CHECK_NS};
    int idle = 0;
    for (;;) {
        nanosleep(&pause, NULL);
        atomic_fetch_add_explicit(&ticks, 1, memory_order_relaxed);
        if (atomic_load(&ticker_users) > 0) {
            idle = 0;
            continue;
        }
        if (++idle < TICKER_IDLE_TICKS)
            continue;
        pthread_mutex_lock(&ticker_mu);
        atomic_store(&ticker_state, 2);
        while (atomic_load(&ticker_users) == 0)
            pthread_cond_wait(&ticker_cv, &ticker_mu);
        atomic_store(&ticker_state, 1);
        pthread_mutex_unlock(&ticker_mu);
        idle = 0;
    }
    return NULL;
}

static void ticker_after_fork_child(void)
{
    /* the thread does not exist in the child */
    pthread_mutex_init(&ticker_mu, NULL);
    pthread_cond_init(&ticker_cv, NULL);
    atomic_store(&ticker_state, 0);
    atomic_store(&ticker_users, 0);
}
static void ticker_before_fork(void) { pthread_mutex_lock(&ticker_mu); }
static void ticker_after_fork_parent(void) { pthread_mutex_unlock(&ticker_mu); }

/* Called with the GIL held (which serializes the start). */
static void ticker_enter(void)
{
    atomic_fetch_add(&ticker_users, 1);
    int st = atomic_load(&ticker_state);
    if (st == 1 || st == -1)
        return;
    if (st == 2) {
        pthread_mutex_lock(&ticker_mu);
        pthread_cond_signal(&ticker_cv);
        pthread_mutex_unlock(&ticker_mu);
        return;
    }
    if (!ticker_atfork_set) {
        pthread_atfork(ticker_before_fork, ticker_after_fork_parent, ticker_after_fork_child);
        ticker_atfork_set = 1;
    }
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    atomic_store(&ticker_state, pthread_create(&th, &attr, ticker_main, NULL) == 0 ? 1 : -1);
    pthread_attr_destroy(&attr);
}

static void ticker_leave(void) { atomic_fetch_sub(&ticker_users, 1); }
int eagle_ticker_running(void) { return atomic_load(&ticker_state) > 0; }
#else
static void ticker_enter(void) {}
static void ticker_leave(void) {}
int eagle_ticker_running(void) { return 0; }
#endif

/* "Every few milliseconds", cheaply: a tick of the ticker, or the clock. */
typedef struct {
    uint64_t seen;
    int use_clock;
    double last_ns;
} signal_clock;

static inline void signal_clock_init(signal_clock *c)
{
    c->use_clock = !eagle_ticker_running();
    c->seen = atomic_load_explicit(&ticks, memory_order_relaxed);
    c->last_ns = c->use_clock ? eagle_now_ns() : 0;
}

/* Whether a check is due; call once per replay. */
static inline int signal_clock_due(signal_clock *c)
{
    if (!c->use_clock) {
        uint64_t t = atomic_load_explicit(&ticks, memory_order_relaxed);
        if (t == c->seen)
            return 0;
        c->seen = t;
        return 1;
    }
    double t = eagle_now_ns();
    if (t - c->last_ns < SIGNAL_CHECK_NS)
        return 0;
    c->last_ns = t;
    return 1;
}

/* A re-check of the teams is due (read at signal ticks, so at most every few ms). */
static inline int check_due(const eagle_plan *plan)
{
    return eagle_choice_check_due(&plan->choice);
}

/* ---- the replay index of random nodes ------------------------------------ */

/* The replay each thread is running, counted over the graph's launches
 * (plan->replay_base + the launch's replay index): set on every thread before it
 * runs a replay's nodes, read by the random nodes' kernels through
 * eagle_thread_replay(). Per thread, so team stages of consecutive replays that
 * overlap on different threads each see their own. */
uint64_t eagle_thread_replay(void) { return this_thread.replay; }

/* me: &this_thread, taken once before the replay loop (not once a replay) */
static inline void set_thread_replay(thread_state *me, const eagle_plan *plan, int64_t r)
{
    me->replay = plan->replay_base + (uint64_t)r;
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

/* floor(n * tid / nt) without forming n * tid, which overflows for a logical size
 * above 2**63 / nt (a zero-stride array can be that long): with n = q * nt + r,
 * it is q * tid + floor(r * tid / nt), and r * tid < nt * nt. */
static inline int64_t split_bound(int64_t n, int tid, int nt)
{
    const int64_t q = n / nt, r = n % nt;
    return q * tid + r * tid / nt;
}

static inline void call_team(const eagle_node *node, int32_t phase, int tid, int nt, int64_t size)
{
    if (phase < node->n_phases)
        node->team_kernel(phase, tid, nt, size, node->data, node->strides, node->user_data);
}

/* ---- observing: profile spans and progress (off unless asked for) -------- */

#if defined(__GNUC__) || defined(__clang__)
#define EAGLE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define EAGLE_ALWAYS_INLINE inline
#endif

/* This thread's profile lane, or NULL (no profile: the usual case). */
static inline eagle_profile_lane *profile_lane(const eagle_plan *plan, int tid)
{
    const eagle_profile *p = plan->profile;
    return (p != NULL && tid < p->n_lanes) ? &p->lanes[tid] : NULL;
}

static inline int64_t span_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

static void record_span_at(eagle_profile_lane *lane, int32_t node, int32_t phase, int64_t t0,
                           int64_t t1)
{
    if (lane->os_thread == 0)
        lane->os_thread = os_thread_id();
    if (lane->count < lane->capacity) {
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

static void record_span(eagle_profile_lane *lane, int32_t node, int32_t phase, int64_t t0)
{
    record_span_at(lane, node, phase, t0, span_clock_ns());
}

/* `call`, timed into `lane` when there is one (node i, phase p). */
#define TIMED(lane, i, p, call)                              \
    do {                                                     \
        if ((lane) == NULL) {                                \
            call;                                            \
        } else {                                             \
            int64_t t0_ = span_clock_ns();                   \
            call;                                            \
            record_span((lane), (i), (p), t0_);              \
        }                                                    \
    } while (0)

/* ---- control-flow nodes (eagle_control; executor.h) ---------------------- */

static inline int control_cond(const eagle_control *c)
{
    switch (c->cond_size) {
    case 1: return *(const volatile uint8_t *)c->cond != 0;
    case 2: return *(const volatile uint16_t *)c->cond != 0;
    case 4: return *(const volatile uint32_t *)c->cond != 0;
    default: return *(const volatile uint64_t *)c->cond != 0;
    }
}

static int report_progress(eagle_plan *plan, int64_t done);

/* Holding the GIL, at a signal check inside a while loop of `plan`'s: the launch's
 * progress callback, told the replays completed so far (the loop is inside the next).
 * -1 if it raised. */
static int control_progress(eagle_plan *plan)
{
    if (plan->progress == NULL)
        return 0;
    return report_progress(plan, (int64_t)(this_thread.replay - plan->replay_base));
}

/* Signals (and progress) inside a long while loop, as between replays: -1 with the
 * error set. Without the GIL, it is taken for the check only. */
static int control_poll(eagle_plan *plan, signal_clock *clk, int gil_held)
{
    if (!signal_clock_due(clk))
        return 0;
    int rc;
    if (gil_held) {
        rc = PyErr_CheckSignals();
        if (rc == 0)
            rc = control_progress(plan);
        if (rc == 0) {
            /* let other Python threads run, as the replay loops do */
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
    } else {
        PyGILState_STATE g = PyGILState_Ensure();
        rc = PyErr_CheckSignals();
        if (rc == 0)
            rc = control_progress(plan);
        PyGILState_Release(g);
    }
    return rc;
}

/* Before a control node runs: its bodies follow the outer plan (its logical size, a
 * retune or a compaction; its profile, progress callback and replay count). */
static void control_prepare(const eagle_plan *plan, eagle_control *c)
{
    c->failed_why = EAGLE_CONTROL_OK;
    for (int32_t b = 0; b < c->n_bodies; ++b) {
        eagle_plan *body = c->bodies[b];
        body->logical_size = plan->logical_size;
        body->profile = plan->profile;
        body->progress = plan->progress;
        body->replay_base = plan->replay_base;
    }
}

static int run_control(eagle_plan *plan, const eagle_node *node, int gil_held, eagle_profile_lane *lane);

static void run_tiles(const eagle_plan *plan, const eagle_stage *st, int64_t lo, int64_t hi,
                      eagle_profile_lane *lane, double *sum_ns, int32_t span_base);

/* One pass over a body's stages on this thread, every node whole (a fused run's
 * stage tile by tile, as at top level). */
static int run_body(eagle_plan *body, int32_t base, int gil_held, eagle_profile_lane *lane,
                    int32_t *failed_node)
{
    const int64_t size = body->logical_size;
    int32_t s = 0;
    for (int32_t i = 0; i < body->n_nodes; ++i) {
        while (s + 1 < body->n_stages && body->stages[s + 1].first <= i)
            ++s;
        if (body->stages[s].tile > 0 && body->stages[s].first == i) {
            run_tiles(body, &body->stages[s], 0, size, lane, NULL, base);
            i += body->stages[s].count - 1;
            continue;
        }
        const eagle_node *n = &body->nodes[i];
        if (n->kind == EAGLE_NODE_NATIVE) {
            TIMED(lane, base + i, 0, call_native(n, 0, size));
        } else if (n->kind == EAGLE_NODE_OPAQUE) {
            int rc;
            TIMED(lane, base + i, 0, rc = call_opaque(n));   /* gil_held: has_opaque */
            if (rc < 0) {
                *failed_node = i;
                return -1;
            }
        } else if (n->kind == EAGLE_NODE_TEAM) {
            for (int32_t p = 0; p < n->n_phases; ++p)
                TIMED(lane, base + i, p, call_team(n, p, 0, 1, size));
        } else {
            int rc;
            TIMED(lane, base + i, 0, rc = run_control(body, n, gil_held, lane));
            if (rc < 0) {
                *failed_node = i;
                return -1;
            }
        }
    }
    return 0;
}

/* Run control node `node` of `plan` on this thread: 0, or -1 with the Python error set
 * on this thread and the node's failed_* fields saying where. gil_held: whether the
 * caller holds the GIL (always, when the bodies hold an opaque node). */
static int run_control(eagle_plan *plan, const eagle_node *node, int gil_held, eagle_profile_lane *lane)
{
    eagle_control *c = (eagle_control *)node->user_data;
    control_prepare(plan, c);
    int32_t b = 0;
    int64_t it = 0;
    int32_t failed = -1;
    if (c->control == EAGLE_CONTROL_WHILE) {
        signal_clock clk;
        signal_clock_init(&clk);
        while (control_cond(c)) {
            if (c->max_iterations >= 0 && it >= c->max_iterations) {
                PyGILState_STATE g = PyGILState_UNLOCKED;
                if (!gil_held)
                    g = PyGILState_Ensure();
                PyErr_Format(PyExc_RuntimeError,
                             "while_loop node '%s' reached max_iterations=%lld with its condition "
                             "still true", c->name, (long long)c->max_iterations);
                if (!gil_held)
                    PyGILState_Release(g);
                c->failed_why = EAGLE_CONTROL_LIMIT;
                c->failed_iteration = it;
                return -1;
            }
            if (run_body(c->bodies[0], c->span_base[0], gil_held, lane, &failed) < 0)
                goto raised;
            ++it;
            if (control_poll(plan, &clk, gil_held) < 0) {
                c->failed_why = EAGLE_CONTROL_INTERRUPTED;
                c->failed_iteration = it;
                return -1;
            }
        }
        return 0;
    }
    if (c->control == EAGLE_CONTROL_IF_ELSE && !control_cond(c)) {
        if (c->n_bodies < 2)
            return 0;
        b = 1;
    }
    if (run_body(c->bodies[b], c->span_base[b], gil_held, lane, &failed) < 0)
        goto raised;
    return 0;
raised:
    c->failed_why = EAGLE_CONTROL_RAISED;
    c->failed_body = b;
    c->failed_node = failed;
    c->failed_iteration = it;
    return -1;
}

/* ---- fused runs (eagle_stage.tile > 0; executor.h) ----------------------- */

/* Samples [lo, hi) of the fused run `st`, tile by tile: every node over one tile,
 * in plan order, then the next tile. Each node is called at least once (an empty
 * range too, as a stage that is not fused calls it). Untimed unless a profile lane
 * or sum_ns (the measuring replays' per-node times, st->count of them) is given:
 * then each node's calls are summed, and the lane gets one span per node, the sums
 * laid end to end from the run's start. */
static void run_tiles(const eagle_plan *plan, const eagle_stage *st, int64_t lo, int64_t hi,
                      eagle_profile_lane *lane, double *sum_ns, int32_t span_base)
{
    const eagle_node *nodes = plan->nodes + st->first;
    const int32_t count = st->count;
    const int64_t tile = st->tile;
    int64_t a = lo;
    if (lane == NULL && sum_ns == NULL) {
        do {
            const int64_t b = hi - a > tile ? a + tile : hi;
            for (int32_t k = 0; k < count; ++k)
                call_native(&nodes[k], a, b);
            a = b;
        } while (a < hi);
        return;
    }
    int64_t sums[EAGLE_FUSED_MAX_NODES] = {0};
    const int64_t t_start = span_clock_ns();
    int64_t t = t_start;
    do {
        const int64_t b = hi - a > tile ? a + tile : hi;
        for (int32_t k = 0; k < count; ++k) {
            call_native(&nodes[k], a, b);
            const int64_t t1 = span_clock_ns();
            sums[k] += t1 - t;
            t = t1;
        }
        a = b;
    } while (a < hi);
    int64_t t0 = t_start;
    for (int32_t k = 0; k < count; ++k) {
        if (lane != NULL)
            record_span_at(lane, span_base + st->first + k, 0, t0, t0 + sums[k]);
        t0 += sums[k];
        if (sum_ns != NULL)
            sum_ns[k] = (double)sums[k];
    }
}

/* At a signal check, holding the GIL: call plan->progress if one is due.
 * Returns -1 if it raised. */
static int report_progress(eagle_plan *plan, int64_t done)
{
    double t = eagle_coarse_now_ns();
    if (t < plan->progress_next_ns)
        return 0;
    plan->progress_next_ns = t + EAGLE_PROGRESS_EVERY_NS;
    PyObject *res = PyObject_CallFunction(plan->progress, "L", (long long)done);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

void eagle_groups_max(eagle_plan *plan, int64_t *vals, int32_t count, int32_t at_launch)
{
    for (int32_t round = 0; round < plan->n_groups; round++)
        for (int32_t g = 0; g < plan->n_groups; g++)
            plan->groups[g].all_max(plan->groups[g].ctx, vals, count, at_launch);
}

/* The size source holds the logical size until the compaction writes its live count:
 * a replay that does not run the compaction (in a branch not taken, a loop that ran zero
 * times) leaves the size as it was; one that runs it several times (a loop) ends at its
 * last run's count. Seeded when a launch starts (a set_logical_size before it, or a
 * launch of another graph sharing the node, wrote something else) and after every
 * replay, on the thread that runs the compaction's last phase (thread 0). */
static inline void seed_size_source(eagle_plan *plan)
{
    if (plan->size_source != NULL)
        *plan->size_source = plan->logical_size;
}

/* After a replay: take the next logical size from the plan's size source.
 * Returns 1 when the launch should stop (until_empty and no sample left). */
static inline int end_of_replay(eagle_plan *plan, int64_t replay)
{
    plan->replays_done = replay + 1;
    if (plan->size_source != NULL) {
        int64_t n = *plan->size_source;
        /* plan() may read the size on another thread meanwhile (relaxed.h) */
        eagle_store_i64(&plan->logical_size, n < 0 ? 0 : (n > plan->capacity ? plan->capacity : n));
        seed_size_source(plan);
    }
    if (!plan->until_empty)
        return 0;
    int64_t live = plan->logical_size > 0;
    if (plan->n_groups > 0) {
        /* ranks replaying together stop together: a rank out of samples replays at
         * logical size 0 (its collectives still run) until every rank is out. One
         * small allreduce per replay, from the launching thread (thread 0). */
        eagle_groups_max(plan, &live, 1, 0);
    }
    plan->emptied = live == 0;
    return plan->emptied;
}

/* ---- serial execution on the calling thread ------------------------------ */

/* Run one replay on this thread, every node whole (a fused run tile by tile), timing each node when
 * measure is set (the cheapest time is kept; when the team choice asks for it,
 * eagle_choice_replace_costs, this replay's time replaces the old one). Opaque
 * nodes are called directly: the caller holds the GIL when the plan has any. */
static EAGLE_ALWAYS_INLINE int run_replay_serial(eagle_plan *plan, int measure, int gil_held,
                                                 eagle_profile_lane *lane, int32_t *failed_node)
{
    int fresh = measure && eagle_choice_replace_costs(&plan->choice);
    for (int32_t s = 0; s < plan->n_stages; ++s) {
        const eagle_stage *st = &plan->stages[s];
        if (st->tile > 0) {
            double sums[EAGLE_FUSED_MAX_NODES];
            run_tiles(plan, st, 0, plan->logical_size, lane, measure ? sums : NULL, 0);
            if (measure)
                for (int32_t k = 0; k < st->count; ++k)
                    eagle_choice_node_timed(plan, &plan->nodes[st->first + k], sums[k], fresh);
            continue;
        }
        for (int32_t i = st->first; i < st->first + st->count; ++i) {
            eagle_node *n = &plan->nodes[i];
            double t0 = measure ? eagle_now_ns() : 0;
            if (n->kind == EAGLE_NODE_OPAQUE) {
                int rc;
                TIMED(lane, i, 0, rc = call_opaque(n));
                if (rc < 0) {
                    *failed_node = i;
                    return -1;
                }
            } else if (n->kind == EAGLE_NODE_TEAM) {
                for (int32_t p = 0; p < n->n_phases; ++p)
                    TIMED(lane, i, p, call_team(n, p, 0, 1, plan->logical_size));
            } else if (n->kind == EAGLE_NODE_CONTROL) {
                int rc;
                TIMED(lane, i, 0, rc = run_control(plan, n, gil_held, lane));
                if (rc < 0) {
                    *failed_node = i;
                    return -1;
                }
            } else {
                TIMED(lane, i, 0, call_native(n, 0, plan->logical_size));
            }
            if (measure)
                eagle_choice_node_timed(plan, n, eagle_now_ns() - t0, fresh);
        }
    }
    if (fresh)
        eagle_choice_costs_replaced(&plan->choice);
    return 0;
}

/* Serial replays holding the GIL (the plan has opaque nodes). The nodes are
 * stored in stage order, so a flat walk over them is the recording-order
 * program; this is the hot loop of a graph of small Python nodes. It is
 * inlined twice, with and without a profile lane, so a launch with no profile
 * pays one test per launch for it. */
static EAGLE_ALWAYS_INLINE int serial_gil_loop(eagle_plan *plan, int64_t r0, int64_t r1,
                                               eagle_failure *failure, eagle_profile_lane *lane)
{
    const eagle_node *nodes = plan->nodes;
    const int32_t n = plan->n_nodes;
    /* a plan with a fused run walks its stages (run_replay_serial) instead */
    const int32_t n_walk = plan->has_fused ? 0 : n;
    thread_state *me = &this_thread;
    /* the clock times the hand-offs between replays: a launch(1) has none (and no clock read) */
    signal_clock clock = {0};
    if (r1 - r0 > 1)
        signal_clock_init(&clock);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t size = plan->logical_size;
        set_thread_replay(me, plan, r);
        if (lane != NULL)
            lane->replay = r;
        if (plan->has_fused) {
            int32_t failed;
            if (run_replay_serial(plan, 0, 1, lane, &failed) < 0) {
                failure->node = failed;
                failure->replay = r;
                return -1;
            }
        }
        for (int32_t i = 0; i < n_walk; ++i) {
            const eagle_node *node = &nodes[i];
            if (node->kind == EAGLE_NODE_OPAQUE) {
                int rc;
                TIMED(lane, i, 0, rc = call_opaque(node));
                if (rc < 0) {
                    failure->node = i;
                    failure->replay = r;
                    return -1;
                }
            } else if (node->kind == EAGLE_NODE_NATIVE) {
                TIMED(lane, i, 0, call_native(node, 0, size));
            } else if (node->kind == EAGLE_NODE_TEAM) {
                for (int32_t p = 0; p < node->n_phases; ++p)
                    TIMED(lane, i, p, call_team(node, p, 0, 1, size));
            } else {
                int rc;
                TIMED(lane, i, 0, rc = run_control(plan, node, 1, lane));
                if (rc < 0) {
                    failure->node = i;
                    failure->replay = r;
                    return -1;
                }
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
         * hand the GIL over every few milliseconds, as the interpreter does (not
         * after the last replay: the launch returns to the interpreter then) */
        if (r + 1 < r1 && signal_clock_due(&clock)) {
            if (plan->progress != NULL && report_progress(plan, r + 1) < 0) {
                failure->node = -1;
                failure->replay = r;
                return -1;
            }
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
            if (check_due(plan)) {
                plan->paused = 1;
                break;
            }
        }
    }
    return 0;
}

static int replay_serial_gil(eagle_plan *plan, int64_t r0, int64_t r1, int measure,
                             eagle_failure *failure)
{
    eagle_profile_lane *lane = profile_lane(plan, 0);
    if (measure) {
        thread_state *me = &this_thread;
        for (int64_t r = r0; r < r1; ++r) {
            set_thread_replay(me, plan, r);
            if (lane != NULL)
                lane->replay = r;
            if (run_replay_serial(plan, 1, 1, lane, &failure->node) < 0) {
                failure->replay = r;
                return -1;
            }
            if (end_of_replay(plan, r))
                break;
            if (PyErr_CheckSignals() < 0) {
                failure->node = -1;
                failure->replay = r;
                return -1;
            }
        }
        return 0;
    }
    return lane == NULL ? serial_gil_loop(plan, r0, r1, failure, NULL)
                        : serial_gil_loop(plan, r0, r1, failure, lane);
}

/* Serial replays without the GIL (every node is native); inlined with and
 * without a profile lane, as serial_gil_loop. */
static EAGLE_ALWAYS_INLINE int serial_nogil_loop(eagle_plan *plan, int64_t r0, int64_t r1,
                                                 int measure, eagle_failure *failure,
                                                 eagle_profile_lane *lane)
{
    signal_clock clock;
    signal_clock_init(&clock);
    int32_t failed;
    int rc = 0;
    PyThreadState *save = PyEval_SaveThread();
    thread_state *me = &this_thread;
    for (int64_t r = r0; r < r1; ++r) {
        set_thread_replay(me, plan, r);
        if (lane != NULL)
            lane->replay = r;
        /* fails only in a control node (an iteration limit, Ctrl-C inside a loop) */
        if (run_replay_serial(plan, measure, 0, lane, &failed) < 0) {
            failure->node = failed;
            failure->replay = r;
            rc = -1;
            break;
        }
        if (end_of_replay(plan, r))
            break;
        if (signal_clock_due(&clock)) {
            PyEval_RestoreThread(save);
            rc = PyErr_CheckSignals();
            if (rc == 0 && plan->progress != NULL)
                rc = report_progress(plan, r + 1);
            save = PyEval_SaveThread();
            if (rc < 0) {
                failure->node = -1;
                failure->replay = r;
                break;
            }
            if (!measure && check_due(plan) && r + 1 < r1) {
                plan->paused = 1;
                break;
            }
        }
    }
    PyEval_RestoreThread(save);
    return rc;
}

static int replay_serial_nogil(eagle_plan *plan, int64_t r0, int64_t r1, int measure,
                               eagle_failure *failure)
{
    eagle_profile_lane *lane = profile_lane(plan, 0);
    return lane == NULL ? serial_nogil_loop(plan, r0, r1, measure, failure, NULL)
                        : serial_nogil_loop(plan, r0, r1, measure, failure, lane);
}

/* ---- parallel execution ---------------------------------------------------- */

#if EAGLE_HAVE_OPENMP

/* A worker's hold on the GIL for the length of one parallel region: the first
 * opaque call makes (or finds) the thread's Python state, later ones reuse it.
 * A worker other than the launching thread also enters, at its first opaque
 * call, its own copy of the launching thread's context (caller_context):
 * np.errstate, decimal's context and every contextvars value are the caller's
 * there too, so a node sees the same whatever thread runs it. One copy per
 * worker, since a context is entered by one thread at a time. */
typedef struct {
    int have_state;
    PyGILState_STATE gstate;
    PyThreadState *tstate;
    PyObject *context;      /* this worker's copy of caller_context, entered; or NULL */
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

/* Holding the GIL, on a worker (not the launching thread): enter a copy of the
 * caller's context unless done. -1 with the Python error set. */
static inline int gil_enter_context(gil_slot *g, PyObject *caller_context)
{
    if (g->context != NULL || caller_context == NULL)
        return 0;
    PyObject *ctx = PyContext_Copy(caller_context);
    if (ctx == NULL)
        return -1;
    if (PyContext_Enter(ctx) < 0) {
        Py_DECREF(ctx);
        return -1;
    }
    g->context = ctx;
    return 0;
}

static inline void gil_finish(gil_slot *g)
{
    if (g->have_state) {
        PyEval_RestoreThread(g->tstate);
        if (g->context != NULL) {
            if (PyContext_Exit(g->context) < 0)
                PyErr_Clear();    /* a node left another context entered: nothing to restore */
            Py_DECREF(g->context);
        }
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
    PyObject *caller_context;   /* a copy of the launching thread's context, owned; or NULL */
} team_state;

/* Where a failure ranks among those between the same two barriers: the sequential
 * oracle raises the earliest node's exception (plan order is recording order within
 * a stage); an interrupt (node -1) comes after every node. */
static inline int32_t failure_rank(int32_t node)
{
    return node < 0 ? INT32_MAX : node;
}

/* Keep the first failure (earliest barrier, then earliest node, whichever thread
 * got there first); the caller holds the GIL and the Python error indicator is set. */
static void record_failure(team_state *ts, int64_t barriers, int32_t node, int64_t replay)
{
    int keep = 0;
    #pragma omp critical(eagle_failure)
    {
        int64_t cur = atomic_load(&ts->failed_at);
        if (barriers < cur || (barriers == cur && (ts->exc_type == NULL ||
                                                   failure_rank(node) < failure_rank(ts->failed_node)))) {
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

/* A control node on the launching thread inside the parallel region: with the GIL
 * for the whole node when its bodies hold opaque nodes. On failure returns -1
 * holding the GIL, the error set (as an opaque node's failure does). */
static int run_control_in_team(eagle_plan *plan, const eagle_node *node, gil_slot *gil,
                               eagle_profile_lane *lane)
{
    const eagle_control *c = (const eagle_control *)node->user_data;
    int rc;
    if (c->has_opaque)
        gil_take(gil);
    TIMED(lane, (int32_t)(node - plan->nodes), 0, rc = run_control(plan, node, c->has_opaque, lane));
    if (rc < 0) {
        if (!c->has_opaque)
            gil_take(gil);
        return -1;
    }
    if (c->has_opaque)
        gil_drop(gil);
    return 0;
}

static int run_control_team(team_state *ts, eagle_plan *plan, const eagle_node *node, int tid, int nt,
                            gil_slot *gil, eagle_profile_lane *lane, int abandon);

/* This thread's part of phase `phase` of a stage of `plan` (the launch's, or a body's
 * whose profile span indexes start at span_base) run by a team of nt threads.
 * Phase 0 holds every node: split native nodes take their slice of
 * [0, logical_size), unsplit and opaque nodes are dealt out round-robin, team
 * nodes run their phase 0, control nodes are entered by every thread (their bodies
 * run on the team). Later phases belong to team nodes only.
 *
 * A node that raises does not end this thread's part at once: the stage's other
 * threads are running their slices of the same native nodes and wait for this one at
 * control nodes' barriers, so leaving would leave those nodes half-written (or the
 * team at mismatched barriers). The rest of the stage's C work runs; only Python work
 * not yet started (opaque nodes, and control nodes this thread decides) is skipped.
 * Returns -1 at the end, holding the GIL with the first failure's error set. */
static int run_stage_share(team_state *ts, eagle_plan *plan, int32_t span_base, const eagle_stage *st,
                           int32_t phase, int tid, int nt, gil_slot *gil, eagle_profile_lane *lane,
                           int32_t *failed_node)
{
    int64_t n = plan->logical_size;
    int32_t unsplit = 0, failed = -1;
    PyObject *exc[3] = {NULL, NULL, NULL};
    if (st->tile > 0) {
        run_tiles(plan, st, split_bound(n, tid, nt), split_bound(n, tid + 1, nt), lane, NULL, span_base);
        return 0;
    }
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_node *node = &plan->nodes[i];
        if (node->kind == EAGLE_NODE_TEAM) {
            TIMED(lane, span_base + i, phase, call_team(node, phase, tid, nt, n));
            continue;
        }
        if (phase > 0)
            continue;
        if (node->kind == EAGLE_NODE_CONTROL) {
            int rc;
            TIMED(lane, span_base + i, 0,
                  rc = run_control_team(ts, plan, node, tid, nt, gil, lane, failed >= 0));
            if (rc < 0) {   /* thread 0 only, holding the GIL, the error set */
                failed = i;
                PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
                gil_drop(gil);
            }
            continue;
        }
        if (node->kind == EAGLE_NODE_NATIVE && node->split) {
            TIMED(lane, span_base + i, 0, call_native(node, split_bound(n, tid, nt), split_bound(n, tid + 1, nt)));
            continue;
        }
        if (unsplit++ % nt != tid)
            continue;
        if (node->kind == EAGLE_NODE_NATIVE) {
            TIMED(lane, span_base + i, 0, call_native(node, 0, n));
        } else if (failed < 0) {
            int rc;
            gil_take(gil);
            /* tid 0 is the launching thread, in the caller's context already */
            rc = tid != 0 ? gil_enter_context(gil, ts->caller_context) : 0;
            if (rc == 0)
                TIMED(lane, span_base + i, 0, rc = call_opaque(node));
            if (rc < 0) {
                failed = i;
                PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
            }
            gil_drop(gil);
        }
    }
    if (failed < 0)
        return 0;
    gil_take(gil);
    PyErr_Restore(exc[0], exc[1], exc[2]);
    *failed_node = failed;
    return -1;
}

/* ---- control nodes on the team (executor.h) ------------------------------- */

/* A body stage one thread (thread 0) runs while the others go on: one unsplit node
 * (opaque, or native and not split); two such stages in a row need no barrier. */
static inline int body_stage_alone(const eagle_plan *body, const eagle_stage *st)
{
    if (st->tile > 0 || st->count != 1 || st->n_phases > 1)
        return 0;
    const eagle_node *n = &body->nodes[st->first];
    return n->kind == EAGLE_NODE_OPAQUE || (n->kind == EAGLE_NODE_NATIVE && !n->split);
}

/* Holding the GIL with the error set: keep it in c as the team run's failure unless an
 * earlier body node's is kept (several threads may fail between the same two
 * barriers); the error is cleared. `at`: this thread's inner barrier count. */
static void control_team_keep(eagle_control *c, int32_t why, int32_t body, int32_t node, int64_t it,
                              int64_t at)
{
    #pragma omp critical(eagle_control_failure)
    {
        if (c->team_exc[0] == NULL || failure_rank(node) < failure_rank(c->failed_node)) {
            Py_CLEAR(c->team_exc[0]);
            Py_CLEAR(c->team_exc[1]);
            Py_CLEAR(c->team_exc[2]);
            PyErr_Fetch(&c->team_exc[0], &c->team_exc[1], &c->team_exc[2]);
            c->failed_why = why;
            c->failed_body = body;
            c->failed_node = node;
            c->failed_iteration = it;
        } else {
            PyErr_Clear();
        }
        if (at < c->team_failed_at)
            c->team_failed_at = at;
    }
}

/* Thread 0, before each iteration: 1 + the body to run, 0 (done) or -1 (a failure kept
 * in c: a body node's in the last pass, the iteration limit, a signal, progress). */
static int32_t control_team_decide(eagle_plan *plan, eagle_control *c, int64_t it, int64_t at,
                                   signal_clock *clk, gil_slot *gil)
{
    if (c->team_failed_at != INT64_MAX)
        return -1;   /* raised in the last body stage, which thread 0 ran alone */
    if (c->control != EAGLE_CONTROL_WHILE) {
        if (it > 0)
            return 0;
        if (c->control == EAGLE_CONTROL_IF_ELSE && !control_cond(c))
            return c->n_bodies > 1 ? 2 : 0;
        return 1;
    }
    if (it > 0 && signal_clock_due(clk)) {
        gil_take(gil);
        int rc = PyErr_CheckSignals();
        if (rc == 0)
            rc = control_progress(plan);
        if (rc < 0) {
            control_team_keep(c, EAGLE_CONTROL_INTERRUPTED, 0, -1, it, at);
            gil_drop(gil);
            return -1;
        }
        gil_drop(gil);
    }
    if (!control_cond(c))
        return 0;
    if (c->max_iterations >= 0 && it >= c->max_iterations) {
        gil_take(gil);
        PyErr_Format(PyExc_RuntimeError,
                     "while_loop node '%s' reached max_iterations=%lld with its condition "
                     "still true", c->name, (long long)c->max_iterations);
        control_team_keep(c, EAGLE_CONTROL_LIMIT, 0, -1, it, at);
        gil_drop(gil);
        return -1;
    }
    return 1;
}

/* The barrier of a team run of a control node; after it, every thread leaves together
 * if a failure was kept before it. */
#define CONTROL_BARRIER_OR_LEAVE()                                          \
    do {                                                                    \
        _Pragma("omp barrier")                                              \
        ++*barriers;                                                        \
        if (eagle_load_i64(&c->team_failed_at) < *barriers)                 \
            return -1;                                                      \
    } while (0)

/* One pass of every thread of the team over body b's stages (executor.h): 0, or -1 on
 * every thread together when a failure was kept (in c). */
static int run_body_team(team_state *ts, eagle_control *c, int32_t b, int64_t it, int tid, int nt,
                         gil_slot *gil, eagle_profile_lane *lane, int64_t *barriers)
{
    eagle_plan *body = c->bodies[b];
    const int32_t base = c->span_base[b];
    /* the stage this thread failed in: its later phases still run (a team node is not
     * left between phases), then everyone leaves at the next stage barrier; an "alone"
     * stage right after it has no barrier before it and is skipped */
    int32_t failed_stage = -1;
    for (int32_t s = 0; s < body->n_stages; ++s) {
        const eagle_stage *st = &body->stages[s];
        const int alone = body_stage_alone(body, st);
        if (s > 0 && !(alone && body_stage_alone(body, &body->stages[s - 1])))
            CONTROL_BARRIER_OR_LEAVE();
        for (int32_t p = 0; p < st->n_phases; ++p) {
            if (p > 0) {
                _Pragma("omp barrier")
                ++*barriers;
            }
            if ((failed_stage >= 0 && failed_stage < s) || (alone && tid != 0))
                continue;
            int32_t failed = -1;
            if (run_stage_share(ts, body, base, st, p, tid, alone ? 1 : nt, gil, lane, &failed) < 0) {
                control_team_keep(c, EAGLE_CONTROL_RAISED, b, failed, it, *barriers);
                gil_drop(gil);
                failed_stage = s;
            }
        }
    }
    /* the next decision reads what the body wrote; thread 0 alone ran the last stage */
    if (body->n_stages > 0 && !body_stage_alone(body, &body->stages[body->n_stages - 1]))
        CONTROL_BARRIER_OR_LEAVE();
    return 0;
}

/* Control node `node` of `plan`, entered by every thread of the team (executor.h).
 * Returns 0, or -1 on thread 0 only, holding the GIL with the error set (as an opaque
 * node's failure), the node's failed_* fields saying where; the other threads return
 * 0 and leave at the launch's next barrier. */
static int run_control_team(team_state *ts, eagle_plan *plan, const eagle_node *node, int tid, int nt,
                            gil_slot *gil, eagle_profile_lane *lane, int abandon)
{
    eagle_control *c = (eagle_control *)node->user_data;
    signal_clock clk;
    int64_t barriers = 0, it = 0;
    if (tid == 0) {
        control_prepare(plan, c);
        c->team_failed_at = INT64_MAX;
        signal_clock_init(&clk);
    }
    int32_t d;
    for (;;) {
        /* two slots, by iteration parity: after a last body stage thread 0 ran alone (no
         * barrier after it) thread 0 writes the next decision while another thread may
         * not have read this one yet */
        /* abandon: thread 0 failed earlier in this stage, so the node does not start
         * (every thread still meets the decision barrier) */
        if (tid == 0)
            c->team_decision[it & 1] = abandon ? 0 : control_team_decide(plan, c, it, barriers, &clk, gil);
        #pragma omp barrier
        ++barriers;
        d = c->team_decision[it & 1];
        if (d <= 0)
            break;
        if (run_body_team(ts, c, d - 1, it, tid, nt, gil, lane, &barriers) < 0) {
            d = -1;
            break;
        }
        ++it;
    }
    /* every thread has read the decision, or left at the same barrier: the struct is
     * thread 0's again */
    if (d == 0 || tid != 0)
        return 0;
    gil_take(gil);
    PyErr_Restore(c->team_exc[0], c->team_exc[1], c->team_exc[2]);
    c->team_exc[0] = c->team_exc[1] = c->team_exc[2] = NULL;
    return -1;
}

/* Phase `phase` of a stage the calling thread runs alone inside the team's region.
 * As in a team stage (run_stage_share), a failure skips only the stage's Python work
 * not yet started (opaque and control nodes): its native and team nodes complete, so
 * a team node is never left between its phases. (The serial path, one thread and no
 * region, stops at the failing node: the recording-order state.) */
static int run_stage_alone(team_state *ts, const eagle_stage *st, int32_t phase, gil_slot *gil,
                           eagle_profile_lane *lane, int32_t *failed_node)
{
    eagle_plan *plan = ts->plan;
    int32_t failed = -1;
    PyObject *exc[3] = {NULL, NULL, NULL};
    if (st->tile > 0) {
        run_tiles(plan, st, 0, plan->logical_size, lane, NULL, 0);
        return 0;
    }
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_node *node = &plan->nodes[i];
        int rc = 0;
        if (node->kind == EAGLE_NODE_TEAM) {
            TIMED(lane, i, phase, call_team(node, phase, 0, 1, plan->logical_size));
        } else if (phase > 0) {
            continue;
        } else if (node->kind == EAGLE_NODE_NATIVE) {
            TIMED(lane, i, 0, call_native(node, 0, plan->logical_size));
        } else if (failed >= 0) {
            continue;
        } else if (node->kind == EAGLE_NODE_CONTROL) {
            rc = run_control_in_team(plan, node, gil, lane);   /* -1 holding the GIL */
        } else {
            gil_take(gil);
            TIMED(lane, i, 0, rc = call_opaque(node));
            if (rc == 0)
                gil_drop(gil);
        }
        if (rc < 0) {
            failed = i;
            PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
            gil_drop(gil);
        }
    }
    if (failed < 0)
        return 0;
    gil_take(gil);
    PyErr_Restore(exc[0], exc[1], exc[2]);
    *failed_node = failed;
    return -1;
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

/* Replays [r0, r1) in one parallel region. With `timing`, the calling thread
 * times every stage that runs on the team, from the barrier before it to the
 * barrier after it (the first stage of the region from before the region, so
 * waking the team counts), for the team's verification. The launching
 * thread's context (`lctx`) is carried by every team thread, so a node that
 * calls back into the graph from a worker is refused as on the caller. */
static int replay_parallel(eagle_plan *plan, int64_t r0, int64_t r1, int timing,
                           const eagle_launch_ctx *lctx, eagle_failure *failure)
{
    team_state ts = {.plan = plan, .failed_node = -1, .failed_replay = -1, .stopped_after = -1};
    atomic_store(&ts.failed_at, INT64_MAX);
    if (plan->has_opaque) {
        /* the context the team's other threads run opaque nodes in (gil_slot);
         * a copy costs one small allocation (the values are shared, not copied) */
        ts.caller_context = PyContext_CopyCurrent();
        if (ts.caller_context == NULL) {
            failure->node = -1;
            failure->replay = r0;
            plan->replays_done = r0;
            return -1;
        }
    }
    parallel_region_ran = 1;
    const int32_t ns = plan->n_stages;
    int paused = 0;
    const double t_region = timing ? eagle_now_ns() : 0;

    PyThreadState *save = PyEval_SaveThread();
    #pragma omp parallel num_threads(plan->num_threads)
    {
        /* the team OpenMP gave (it may be smaller than asked: OMP_THREAD_LIMIT,
         * OMP_DYNAMIC, nesting); every split below is by it */
        const int tid = eagle_omp_thread_num(), nt = eagle_omp_num_threads();
        thread_state *me = &this_thread;
        const eagle_launch_ctx *saved_ctx = me->launch;
        me->launch = lctx;
        gil_slot gil = {0};
        int64_t barriers = 0;
        int stopping = 0;            /* this thread failed: skip work until the exit barrier */
        signal_clock clock = {0};   /* read by thread 0 only, which sets it */
        if (tid == 0)
            signal_clock_init(&clock);
        double t_stage = t_region;   /* timing: when the stage that runs began */
        int32_t pending = -1;        /* timing: the team stage under way, or -1 */
        eagle_profile_lane *lane = profile_lane(plan, tid);

        for (int64_t r = r0; r < r1; ++r) {
            set_thread_replay(me, plan, r);
            if (lane != NULL)
                lane->replay = r;
            for (int32_t s = 0; s < ns; ++s) {
                eagle_stage *st = &plan->stages[s];
                eagle_stage *prev = &plan->stages[s == 0 ? ns - 1 : s - 1];
                if (!(r == r0 && s == 0) && needs_barrier(prev, st)) {
                    BARRIER_OR_LEAVE();
                    if (timing && tid == 0) {
                        double t = eagle_now_ns();
                        if (pending >= 0)
                            eagle_choice_team_sample(&plan->stages[pending].choice, t - t_stage, plan->logical_size);
                        pending = -1;
                        t_stage = t;
                    }
                }
                /* a team stage always has a barrier just before it, but the region's first */
                if (timing && tid == 0 && st->team > 1)
                    pending = s;
                /* a failure in this stage: its later phases still run (a team node is
                 * not left between phases); everyone leaves at the next stage barrier */
                int failed_here = 0;
                for (int32_t p = 0; p < st->n_phases; ++p) {
                    if (p > 0 && st->team > 1) {
                        _Pragma("omp barrier")
                        ++barriers;
                    }
                    if (stopping && !failed_here)
                        continue;
                    int32_t failed_node = -1;
                    int rc;
                    if (st->team > 1)
                        rc = run_stage_share(&ts, plan, 0, st, p, tid, nt, &gil, lane, &failed_node);
                    else
                        rc = tid == 0 ? run_stage_alone(&ts, st, p, &gil, lane, &failed_node) : 0;
                    if (rc < 0) {
                        record_failure(&ts, barriers, failed_node, r);
                        gil_drop(&gil);
                        stopping = failed_here = 1;
                    }
                }
            }
            if (plan->size_source != NULL) {
                /* the next logical size is read once every thread's part is done */
                BARRIER_OR_LEAVE();
                if (timing && tid == 0 && pending >= 0) {
                    /* the last stage ends here, before the size update */
                    eagle_choice_team_sample(&plan->stages[pending].choice, eagle_now_ns() - t_stage, plan->logical_size);
                    pending = -1;
                }
                if (tid == 0 && !stopping && end_of_replay(plan, r)) {
                    record_stop(&ts, barriers, r + 1);
                    stopping = 1;
                }
            }
            if (tid == 0 && !stopping && signal_clock_due(&clock)) {
                gil_take(&gil);
                if (PyErr_CheckSignals() < 0
                    || (plan->progress != NULL && report_progress(plan, r + 1) < 0)) {
                    record_failure(&ts, barriers, -1, r);
                    stopping = 1;
                }
                gil_drop(&gil);
                if (!stopping && !timing && r + 1 < r1 && check_due(plan)) {
                    /* leave after this replay for a re-check of the teams */
                    paused = 1;
                    record_stop(&ts, barriers, r + 1);
                    stopping = 1;
                }
            }
        }
        if (timing && plan->size_source == NULL && plan->stages[ns - 1].team > 1) {
            BARRIER_OR_LEAVE();
            if (tid == 0 && pending >= 0)
                eagle_choice_team_sample(&plan->stages[pending].choice, eagle_now_ns() - t_stage, plan->logical_size);
        }
    leave:
        gil_finish(&gil);
        me->launch = saved_ctx;
    }
    PyEval_RestoreThread(save);
    Py_XDECREF(ts.caller_context);

    if (ts.exc_type != NULL) {
        failure->node = ts.failed_node;
        failure->replay = ts.failed_replay;
        plan->replays_done = ts.failed_replay;
        PyErr_Restore(ts.exc_type, ts.exc_value, ts.exc_tb);
        return -1;
    }
    plan->replays_done = ts.stopped_after >= 0 ? ts.stopped_after : r1;
    plan->paused = paused;
    return 0;
}

double eagle_barrier_cost_ns(int n_threads)
{
    /* up to 2000 barriers, or 2 ms of them: on a loaded machine a barrier can
     * cost hundreds of microseconds */
    if (n_threads < 2)
        return 0;
    const int max_rounds = 2000;
    double t0 = 0, t1 = 0;
    int rounds = 0, stop = 0;
    #pragma omp parallel num_threads(n_threads)
    {
        #pragma omp barrier
        #pragma omp master
        t0 = eagle_now_ns();
        for (;;) {
            #pragma omp barrier
            #pragma omp master
            {
                ++rounds;
                t1 = eagle_now_ns();
                stop = rounds >= max_rounds || t1 - t0 > 2e6;
            }
            #pragma omp barrier
            if (stop)
                break;
        }
    }
    parallel_region_ran = 1;
    return (t1 - t0) / (2.0 * rounds - 1);
}

#else  /* no OpenMP: every stage has team 1 and the parallel path is never taken */

static int replay_parallel(eagle_plan *plan, int64_t r0, int64_t r1, int timing,
                           const eagle_launch_ctx *lctx, eagle_failure *failure)
{
    (void)timing;
    (void)lctx;
    return plan->has_opaque ? replay_serial_gil(plan, r0, r1, 0, failure)
                            : replay_serial_nogil(plan, r0, r1, 0, failure);
}

double eagle_barrier_cost_ns(int n_threads) { (void)n_threads; return 0; }

#endif

/* ---- entry point ---------------------------------------------------------- */

static int any_team_in(const eagle_plan *plan)
{
    for (int32_t s = 0; s < plan->n_stages; ++s)
        if (plan->stages[s].team > 1)
            return 1;
    return 0;
}

static int run_segment(eagle_plan *plan, int64_t r0, int64_t r1, int kind,
                       const eagle_launch_ctx *lctx, eagle_failure *failure)
{
    plan->paused = 0;
    if (kind == EAGLE_SEGMENT_MEASURE || kind == EAGLE_SEGMENT_PAIRED)
        return plan->has_opaque ? replay_serial_gil(plan, r0, r1, 1, failure)
                                : replay_serial_nogil(plan, r0, r1, 1, failure);
    if (any_team_in(plan))
        return replay_parallel(plan, r0, r1, kind == EAGLE_SEGMENT_VERIFY, lctx, failure);
    return plan->has_opaque ? replay_serial_gil(plan, r0, r1, 0, failure)
                            : replay_serial_nogil(plan, r0, r1, 0, failure);
}

static int execute_replays(eagle_plan *plan, int64_t n_replays, const eagle_launch_ctx *lctx,
                           eagle_failure *failure);

static inline int execute_on(thread_state *me, eagle_plan *plan, int64_t n_replays,
                             eagle_failure *failure)
{
    failure->node = -1;
    failure->replay = -1;
    plan->replays_done = 0;
    const uint64_t outer_replay = me->replay;   /* a launch from inside a node of another */
    int rc = execute_replays(plan, n_replays, me->launch, failure);
    plan->replay_base += (uint64_t)plan->replays_done;   /* replays completed, also on failure */
    me->replay = outer_replay;
    return rc;
}

int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure)
{
    return execute_on(&this_thread, plan, n_replays, failure);
}

int eagle_launch(eagle_plan *plan, int64_t n_replays, const void *owner, eagle_failure *failure)
{
    thread_state *me = &this_thread;
    eagle_launch_ctx ctx = {.owner = owner, .parent = me->launch};
    me->launch = &ctx;
    int rc = execute_on(me, plan, n_replays, failure);
    me->launch = ctx.parent;
    return rc;
}

static int execute_replays(eagle_plan *plan, int64_t n_replays, const eagle_launch_ctx *lctx,
                           eagle_failure *failure)
{
    plan->paused = 0;
    plan->emptied = 0;
    if (n_replays <= 0 || plan->n_stages == 0
        || (plan->until_empty && (plan->n_groups > 0 ? !plan->live_anywhere : plan->logical_size == 0)))
        return 0;
    seed_size_source(plan);
    eagle_choice_launch_begin(plan);

    int ticking = 0;
    int rc = 0;
    int64_t r = 0;
    while (r < n_replays) {
        /* the team choice cuts the launch into segments: measuring, verifying
         * the team, then running with the teams it chose */
        int64_t stop;
        const int kind = eagle_choice_next_segment(plan, r, n_replays, &stop);
        /* a loop may run long inside one replay: its signal checks read the ticks too */
        if (!ticking && (stop - r > 1 || plan->has_control)) {
            ticker_enter();
            ticking = 1;
        }
        const double replay_ns = eagle_choice_replay_ns(&plan->choice);
        if (kind == EAGLE_SEGMENT_RUN && stop - r == 1 && !plan->has_opaque && replay_ns >= 0
            && replay_ns < SHORT_LAUNCH_NS && !any_team_in(plan)) {
            /* one tiny replay: releasing and retaking the GIL would cost more than it */
            plan->paused = 0;
            rc = replay_serial_gil(plan, r, stop, 0, failure);
        } else {
            rc = run_segment(plan, r, stop, kind, lctx, failure);
        }
        int64_t done = plan->replays_done;
        eagle_choice_segment_done(plan, kind, r, stop, done, rc);
        if (rc < 0 || plan->emptied)
            break;
        if (done < stop && !plan->paused)
            break;
        if (plan->paused)
            eagle_choice_recheck(plan);
        r = done;
    }
    if (ticking)
        ticker_leave();
    plan->paused = 0;
    return rc;
}
