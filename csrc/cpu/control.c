/* Control-flow nodes, serially and on the team; see control.h and plan.h. */
#include "control.h"

#include "clock.h"
#include "launch.h"
#include "node_run.h"
#include "observe.h"
#include "openmp_helpers.h"
#include "relaxed.h"
#include "runtime.h"
#include "team.h"
#include "ticker.h"
#include "tiles.h"

static inline int control_cond(const eagle_control *c)
{
    switch (c->cond_size) {
    case 1: return *(const volatile uint8_t *)c->cond != 0;
    case 2: return *(const volatile uint16_t *)c->cond != 0;
    case 4: return *(const volatile uint32_t *)c->cond != 0;
    default: return *(const volatile uint64_t *)c->cond != 0;
    }
}

/* Holding the GIL, at a signal check inside a while loop of `plan`'s: the launch's
 * progress callback, told the replays completed so far (the loop is inside the next).
 * -1 if it raised. */
static int control_progress(eagle_plan *plan)
{
    if (plan->progress == NULL)
        return 0;
    return eagle_report_progress(plan, (int64_t)(eagle_this_thread()->replay - plan->replay_base));
}

/* A signal check inside a long while loop, as between replays: -1 with the error set.
 * Without the GIL, it is taken for the check only. */
static int control_check(eagle_plan *plan, int gil_held)
{
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
 * retune or a compaction; its team size, profile, progress callback and replay count). */
static void control_prepare(const eagle_plan *plan, eagle_control *c)
{
    c->failed_why = EAGLE_CONTROL_OK;
    c->at_limit = 0;
    for (int32_t b = 0; b < c->n_bodies; ++b) {
        eagle_plan *body = c->bodies[b];
        body->logical_size = plan->logical_size;
        body->num_threads = plan->num_threads;
        body->profile = plan->profile;
        body->progress = plan->progress;
        body->replay_base = plan->replay_base;
    }
}

static void limit_error(const eagle_control *c)
{
    PyErr_Format(PyExc_RuntimeError,
                 "while_loop node '%s' reached max_iterations=%lld with its condition "
                 "still true (on_max=\"stop\" ends the loop there instead)", c->name,
                 (long long)c->max_iterations);
}

/* Whether control node c runs pass `it` of its body: 1, 0 (done: a loop's condition is
 * false, or it stops at max_iterations with on_max_stop, at_limit set; a node that is
 * not a loop after its one pass), or -1: max_iterations reached, to be raised. Reads
 * the condition: the thread that decides, after the body's last writes. */
static int pass_wanted(eagle_control *c, int64_t it)
{
    if (c->control != EAGLE_CONTROL_WHILE)
        return it == 0;
    if (!control_cond(c))
        return 0;
    if (c->max_iterations >= 0 && it >= c->max_iterations) {
        if (c->on_max_stop) {
            c->at_limit = 1;
            return 0;
        }
        return -1;
    }
    return 1;
}

/* ---- on one thread --------------------------------------------------------- */

/* One pass over a body's stages on this thread, every node whole (a fused run's stage
 * tile by tile, as at top level); with measure, each node timed into the body's team
 * choice, as a measured replay times a launch's nodes. */
static int run_body(eagle_plan *body, int32_t base, int gil_held, eagle_profile_lane *lane, int measure,
                    int32_t *failed_node)
{
    eagle_choice *ch = &body->choice;
    const eagle_site site = {.plan = body, .lane = lane, .span_base = base, .where = EAGLE_SITE_SERIAL,
                             .tid = 0, .nt = 1, .gil_held = gil_held};
    const int fresh = measure && eagle_choice_replace_costs(ch);
    const int64_t size = body->logical_size;
    for (int32_t s = 0; s < body->n_stages; ++s) {
        const eagle_stage *st = &body->stages[s];
        if (st->tile > 0) {
            double sums[EAGLE_FUSED_MAX_NODES];
            eagle_run_tiles(body, st, 0, size, 1, lane, measure ? sums : NULL, base);
            if (measure)
                for (int32_t k = 0; k < st->count; ++k)
                    eagle_choice_node_timed(ch, st->first + k, size, sums[k], fresh);
            continue;
        }
        for (int32_t i = st->first; i < st->first + st->count; ++i) {
            const double t0 = measure ? eagle_now_ns() : 0;
            if (eagle_run_node_whole(&site, i) < 0) {   /* opaque: gil_held (has_opaque) */
                *failed_node = i;
                return -1;
            }
            if (measure)
                eagle_choice_node_timed(ch, i, size, eagle_now_ns() - t0, fresh);
        }
    }
    if (fresh)
        eagle_choice_costs_replaced(ch);
    return 0;
}

/* Where a run of passes stops short of its segment's end. */
typedef struct pass_run {
    int64_t stop;       /* the segment ends before this pass */
    int timing;         /* a verification: thread 0 times the body's team stages */
    int may_pause;      /* leave at a signal check when a re-check of the body's teams is due */
    int paused;         /* out: left for a re-check */
    int finished;       /* out: the node is done (pass_wanted said 0) */
} pass_run;

/* Holding the GIL or not as gil_held says: raise the iteration limit of c reached at
 * pass it (the error set, c's failure fields). */
static int limit_failure(eagle_control *c, int64_t it, int gil_held)
{
    PyGILState_STATE g = PyGILState_UNLOCKED;
    if (!gil_held)
        g = PyGILState_Ensure();
    limit_error(c);
    if (!gil_held)
        PyGILState_Release(g);
    c->failed_why = EAGLE_CONTROL_LIMIT;
    c->failed_iteration = it;
    return -1;
}

/* Passes of body b on this thread from *it until the run's stop, the node's end or a
 * pause; `measure`: each timed for the body's team choice. The first pass was decided
 * by the caller. 0, or -1 with the error set and c's failure fields saying where. */
static int passes_here(eagle_plan *plan, eagle_control *c, int32_t b, int64_t *it, pass_run *run,
                       int measure, int gil_held, eagle_profile_lane *lane, eagle_signal_clock *clk)
{
    eagle_plan *body = c->bodies[b];
    eagle_thread_state *me = eagle_this_thread();
    const int64_t first = *it;
    while (*it < run->stop) {
        if (*it > first) {
            const int w = pass_wanted(c, *it);
            if (w < 0)
                return limit_failure(c, *it, gil_held);
            if (w == 0) {
                run->finished = 1;
                return 0;
            }
        }
        int32_t failed = -1;
        if (run_body(body, c->span_base[b], gil_held, lane, measure, &failed) < 0) {
            c->failed_why = EAGLE_CONTROL_RAISED;
            c->failed_body = b;
            c->failed_node = failed;
            c->failed_iteration = *it;
            return -1;
        }
        ++*it;
        c->iterations = *it;
        if (c->control != EAGLE_CONTROL_WHILE) {
            run->finished = 1;
            return 0;
        }
        ++me->iterations;
        if (eagle_signal_clock_due(clk)) {
            if (control_check(plan, gil_held) < 0) {
                c->failed_why = EAGLE_CONTROL_INTERRUPTED;
                c->failed_iteration = *it;
                return -1;
            }
            if (run->may_pause && eagle_choice_check_due(&body->choice)) {
                run->paused = 1;
                return 0;
            }
        }
    }
    return 0;
}

static int passes_on_team(eagle_plan *plan, eagle_control *c, int32_t b, int64_t *it, pass_run *run,
                          int gil_held, eagle_profile_lane *lane);

static int any_team_in(const eagle_plan *body)
{
    for (int32_t s = 0; s < body->n_stages; ++s)
        if (eagle_choice_team(&body->choice, s) > 1)
            return 1;
    return 0;
}

/* The node on one thread outside any parallel region: its body's passes cut into
 * segments by the body's team choice (plan.h), as a launch's replays are. */
static int run_driven(eagle_plan *plan, eagle_control *c, int32_t b, int gil_held, eagle_profile_lane *lane)
{
    eagle_plan *body = c->bodies[b];
    eagle_choice *ch = &body->choice;
    const int nt = plan->num_threads;
    const int64_t size = body->logical_size;
    const int64_t n = c->control != EAGLE_CONTROL_WHILE ? 1
                      : c->max_iterations >= 0 ? c->max_iterations : INT64_MAX;
    eagle_signal_clock clk;
    eagle_signal_clock_init(&clk);
    eagle_choice_launch_begin(ch, nt);
    int64_t it = 0;
    for (;;) {
        const int w = pass_wanted(c, it);
        if (w < 0)
            return limit_failure(c, it, gil_held);
        if (w == 0)
            return 0;
        pass_run run = {0};
        const int kind = eagle_choice_next_segment(ch, nt, size, it, n, &run.stop);
        const int64_t r = it;
        int rc;
        if (kind == EAGLE_SEGMENT_MEASURE || kind == EAGLE_SEGMENT_PAIRED) {
            rc = passes_here(plan, c, b, &it, &run, 1, gil_held, lane, &clk);
        } else if (EAGLE_HAVE_OPENMP && any_team_in(body)) {
            run.timing = kind == EAGLE_SEGMENT_VERIFY;
            run.may_pause = kind == EAGLE_SEGMENT_RUN;
            rc = passes_on_team(plan, c, b, &it, &run, gil_held, lane);
        } else {
            run.may_pause = 1;
            rc = passes_here(plan, c, b, &it, &run, 0, gil_held, lane, &clk);
        }
        eagle_choice_segment_done(ch, nt, size, kind, r, run.stop, it, rc);
        if (rc < 0 || run.finished)
            return rc;
        if (run.paused)
            eagle_choice_recheck(ch);
    }
}

/* The node on this thread, its bodies node after node (inside a parallel region). */
static int run_here(eagle_plan *plan, eagle_control *c, int32_t b, int gil_held, eagle_profile_lane *lane)
{
    eagle_signal_clock clk;
    eagle_signal_clock_init(&clk);
    int64_t it = 0;
    const int w = pass_wanted(c, 0);
    if (w < 0)
        return limit_failure(c, 0, gil_held);
    if (w == 0)
        return 0;
    pass_run run = {.stop = INT64_MAX};
    return passes_here(plan, c, b, &it, &run, 0, gil_held, lane, &clk);
}

int eagle_run_control(eagle_plan *plan, const eagle_node *node, int gil_held, eagle_profile_lane *lane)
{
    eagle_control *c = (eagle_control *)node->user_data;
    control_prepare(plan, c);
    c->iterations = 0;
    int32_t b = 0;
    if (c->control == EAGLE_CONTROL_IF_ELSE && !control_cond(c)) {
        if (c->n_bodies < 2)
            return 0;
        b = 1;
    }
    /* a parallel region around (a stage on thread 0 alone): no region of its own */
    if (eagle_omp_level() > 0)
        return run_here(plan, c, b, gil_held, lane);
    return run_driven(plan, c, b, gil_held, lane);
}

int eagle_run_control_alone(eagle_plan *plan, const eagle_node *node, eagle_gil_slot *gil,
                            eagle_profile_lane *lane)
{
    const eagle_control *c = (const eagle_control *)node->user_data;
    if (c->has_opaque)
        eagle_gil_take(gil);
    const int rc = eagle_run_control(plan, node, c->has_opaque, lane);
    if (rc < 0) {
        if (!c->has_opaque)
            eagle_gil_take(gil);
        return -1;
    }
    if (c->has_opaque)
        eagle_gil_drop(gil);
    return 0;
}

/* ---- on the team ------------------------------------------------------------- */

/* A body stage thread 0 runs while the others go on. Classic (the control stage on the
 * team, every body stage on it): one unsplit node (opaque, or native and not split);
 * driven (the body's team choice): a stage it keeps on one thread. Two such stages in
 * a row need no barrier. */
static inline int body_stage_alone(const eagle_plan *body, int32_t s, int driven)
{
    const eagle_stage *st = &body->stages[s];
    if (driven)
        return eagle_choice_team(&body->choice, s) <= 1;
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
        if (c->team_exc[0] == NULL || eagle_failure_rank(node) < eagle_failure_rank(c->failed_node)) {
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

/* Thread 0, before pass `it` (the run began at pass it0): 1 + the body to run, 0 (done,
 * or the driven run's stop or pause: `run`) or -1 (a failure kept in c: a body node's in
 * the last pass, the iteration limit, a signal, progress). b: the driven run's body. */
static int32_t control_team_decide(eagle_plan *plan, eagle_control *c, int64_t it, int64_t it0, int64_t at,
                                   eagle_signal_clock *clk, eagle_gil_slot *gil, pass_run *run, int32_t b)
{
    if (c->team_failed_at != INT64_MAX)
        return -1;   /* raised in the last body stage, which thread 0 ran alone */
    if (run != NULL && it >= run->stop)
        return 0;
    if (c->control != EAGLE_CONTROL_WHILE) {
        if (it > 0) {
            if (run != NULL)
                run->finished = 1;
            return 0;
        }
        if (run != NULL)
            return 1 + b;
        if (c->control == EAGLE_CONTROL_IF_ELSE && !control_cond(c))
            return c->n_bodies > 1 ? 2 : 0;
        return 1;
    }
    if (it > it0 && eagle_signal_clock_due(clk)) {
        eagle_gil_take(gil);
        int rc = PyErr_CheckSignals();
        if (rc == 0)
            rc = control_progress(plan);
        if (rc < 0) {
            control_team_keep(c, EAGLE_CONTROL_INTERRUPTED, 0, -1, it, at);
            eagle_gil_drop(gil);
            return -1;
        }
        eagle_gil_drop(gil);
        if (run != NULL && run->may_pause && eagle_choice_check_due(&c->bodies[b]->choice)) {
            run->paused = 1;
            return 0;
        }
    }
    const int w = (it == it0 && run != NULL) ? 1 : pass_wanted(c, it);   /* a driven run's first: decided */
    if (w == 0) {
        if (run != NULL)
            run->finished = 1;
        return 0;
    }
    if (w < 0) {
        eagle_gil_take(gil);
        limit_error(c);
        control_team_keep(c, EAGLE_CONTROL_LIMIT, 0, -1, it, at);
        eagle_gil_drop(gil);
        return -1;
    }
    return 1 + b;
}

/* A barrier of a team run of a control node: 1 when every thread is to leave after
 * it (a failure was kept before it), 0 to go on. */
static inline int control_barrier(const eagle_control *c, int64_t *barriers)
{
    #pragma omp barrier
    ++*barriers;
    return eagle_load_i64(&c->team_failed_at) < *barriers;
}

/* Thread 0, timing a verification: the team stage under way ends at time t. */
static inline void pass_timer_end(eagle_plan *body, int32_t *pending, double *t_stage, double t)
{
    if (*pending >= 0)
        eagle_choice_team_sample(&body->choice.stages[*pending].state, t - *t_stage, body->logical_size);
    *pending = -1;
    *t_stage = t;
}

/* One pass of every thread of the team over body b's stages (plan.h): 0, or -1 on
 * every thread together when a failure was kept (in c). driven: the stages' teams are
 * the body's choice's; timing: thread 0 times its team stages (a verification). */
static int run_body_team(eagle_team_run *team, eagle_control *c, int32_t b, int64_t it, int tid,
                         int nt, eagle_gil_slot *gil, eagle_profile_lane *lane, int64_t *barriers,
                         int driven, int timing)
{
    eagle_plan *body = c->bodies[b];
    const int32_t base = c->span_base[b];
    timing = timing && tid == 0;
    int32_t pending = -1;
    double t_stage = timing ? eagle_now_ns() : 0;
    /* the stage this thread failed in: its later phases still run (a team node is not
     * left between phases), then everyone leaves at the next stage barrier; an "alone"
     * stage right after it has no barrier before it and is skipped */
    int32_t failed_stage = -1;
    for (int32_t s = 0; s < body->n_stages; ++s) {
        const eagle_stage *st = &body->stages[s];
        const int alone = body_stage_alone(body, s, driven);
        if (s > 0 && !(alone && body_stage_alone(body, s - 1, driven))) {
            if (control_barrier(c, barriers))
                return -1;
            if (timing)
                pass_timer_end(body, &pending, &t_stage, eagle_now_ns());
        }
        if (timing && !alone)
            pending = s;
        for (int32_t p = 0; p < st->n_phases; ++p) {
            if (p > 0 && !alone) {
                #pragma omp barrier
                ++*barriers;
            }
            if ((failed_stage >= 0 && failed_stage < s) || (alone && tid != 0))
                continue;
            int32_t failed = -1;
            const int rc = alone ? eagle_run_stage_alone(body, base, st, p, gil, lane, &failed)
                                 : eagle_run_stage_share(team, body, base, st, p, tid, nt, gil, lane, &failed);
            if (rc < 0) {
                control_team_keep(c, EAGLE_CONTROL_RAISED, b, failed, it, *barriers);
                eagle_gil_drop(gil);
                failed_stage = s;
            }
        }
    }
    /* the next decision reads what the body wrote; thread 0 alone ran the last stage */
    if (body->n_stages > 0 && !body_stage_alone(body, body->n_stages - 1, driven)) {
        if (control_barrier(c, barriers))
            return -1;
        if (timing)
            pass_timer_end(body, &pending, &t_stage, eagle_now_ns());
    }
    return 0;
}

/* Every thread of the team: passes from it0 (run: a driven run of body b; NULL: the
 * classic team run) until the decision says 0 or -1. Returns 0, or -1 on thread 0
 * holding the GIL with the error set; *it_end (thread 0): the passes done. */
static int control_team_passes(eagle_team_run *team, eagle_plan *plan, eagle_control *c, int tid, int nt,
                               eagle_gil_slot *gil, eagle_profile_lane *lane, int abandon, int64_t it0,
                               pass_run *run, int32_t b, int64_t *it_end)
{
    eagle_signal_clock clk = {0};   /* read by thread 0 only, which sets it */
    int64_t barriers = 0, it = it0;
    if (tid == 0) {
        c->team_failed_at = INT64_MAX;
        eagle_signal_clock_init(&clk);
    }
    int32_t d;
    for (;;) {
        /* two slots, by iteration parity: after a last body stage thread 0 ran alone (no
         * barrier after it) thread 0 writes the next decision while another thread may
         * not have read this one yet */
        if (tid == 0)
            c->team_decision[it & 1] = abandon ? 0 : control_team_decide(plan, c, it, it0, barriers, &clk,
                                                                         gil, run, b);
        #pragma omp barrier
        ++barriers;
        d = c->team_decision[it & 1];
        if (d <= 0)
            break;
        if (run_body_team(team, c, d - 1, it, tid, nt, gil, lane, &barriers, run != NULL,
                          run != NULL && run->timing) < 0) {
            d = -1;
            break;
        }
        ++it;
        if (tid == 0) {
            c->iterations = it;
            if (c->control == EAGLE_CONTROL_WHILE)
                ++eagle_this_thread()->iterations;
        }
    }
    if (tid == 0)
        *it_end = it;
    /* every thread has read the decision, or left at the same barrier: the struct is
     * thread 0's again */
    if (d == 0 || tid != 0)
        return 0;
    eagle_gil_take(gil);
    PyErr_Restore(c->team_exc[0], c->team_exc[1], c->team_exc[2]);
    c->team_exc[0] = c->team_exc[1] = c->team_exc[2] = NULL;
    return -1;
}

int eagle_run_control_team(eagle_team_run *team, eagle_plan *plan, const eagle_node *node, int tid,
                           int nt, eagle_gil_slot *gil, eagle_profile_lane *lane, int abandon)
{
    eagle_control *c = (eagle_control *)node->user_data;
    int64_t it_end = 0;
    if (tid == 0) {
        control_prepare(plan, c);
        c->iterations = 0;
    }
    return control_team_passes(team, plan, c, tid, nt, gil, lane, abandon, 0, NULL, 0, &it_end);
}

/* A driven run's passes of body b from *it on the team, in a parallel region of their
 * own (the node runs on one thread, outside any region): every thread carries the
 * launching thread's replay and launch context, as a launch's team does. Called holding
 * the GIL or not (gil_held); returns as it was called, 0 or -1 with the error set. */
static int passes_on_team(eagle_plan *plan, eagle_control *c, int32_t b, int64_t *it, pass_run *run,
                          int gil_held, eagle_profile_lane *lane0)
{
    eagle_plan *body = c->bodies[b];
    eagle_thread_state *me = eagle_this_thread();
    const uint64_t replay = me->replay;
    const eagle_launch_ctx *lctx = me->launch;
    const int64_t lane_replay = lane0 != NULL ? lane0->replay : 0;
    eagle_team_run ts = {.plan = body, .failed_node = -1, .failed_replay = -1, .stopped_after = -1};
    atomic_store(&ts.failed_at, INT64_MAX);
    PyGILState_STATE g = PyGILState_UNLOCKED;
    PyThreadState *save = NULL;
    if (!gil_held)
        g = PyGILState_Ensure();
    if (c->has_opaque) {
        /* the context the team's other threads run opaque nodes in (gil.h) */
        ts.caller_context = PyContext_CopyCurrent();
        if (ts.caller_context == NULL) {
            c->failed_why = EAGLE_CONTROL_INTERRUPTED;
            c->failed_iteration = *it;
            if (!gil_held)
                PyGILState_Release(g);
            return -1;
        }
    }
    save = PyEval_SaveThread();
    eagle_note_parallel_region();
    const int64_t it0 = *it;
    int64_t it_end = it0;
    int rc = 0;
    PyObject *exc[3] = {NULL, NULL, NULL};
    #pragma omp parallel num_threads(plan->num_threads)
    {
        const int tid = eagle_omp_thread_num(), nt = eagle_omp_num_threads();
        eagle_thread_state *t = eagle_this_thread();
        const eagle_launch_ctx *saved_ctx = t->launch;
        const uint64_t saved_replay = t->replay;
        t->launch = lctx;
        t->replay = replay;
        eagle_profile_lane *lane = eagle_profile_lane_of(body, tid);
        if (lane != NULL)
            lane->replay = lane_replay;
        eagle_gil_slot gil = {0};
        if (control_team_passes(&ts, body, c, tid, nt, &gil, lane, 0, it0, run, b, &it_end) < 0) {
            /* thread 0, holding the GIL with the error set: kept for after the region */
            PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
            rc = -1;
            eagle_gil_drop(&gil);
        }
        eagle_gil_finish(&gil);
        t->launch = saved_ctx;
        t->replay = saved_replay;
    }
    PyEval_RestoreThread(save);
    Py_XDECREF(ts.caller_context);
    *it = it_end;
    if (rc < 0)
        PyErr_Restore(exc[0], exc[1], exc[2]);
    if (!gil_held)
        PyGILState_Release(g);
    return rc;
}
