/* The team run; see team.h. */
#include "team.h"

#include "clock.h"
#include "node_run.h"
#include "observe.h"
#include "openmp_helpers.h"
#include "replay.h"
#include "runtime.h"
#include "ticker.h"
#include "tiles.h"

/* Keep the first failure (earliest barrier, then earliest node, whichever thread
 * got there first); the caller holds the GIL and the Python error indicator is set. */
static void record_failure(eagle_team_run *ts, int64_t barriers, int32_t node, int64_t replay)
{
    int keep = 0;
    #pragma omp critical(eagle_failure)
    {
        int64_t cur = atomic_load(&ts->failed_at);
        if (barriers < cur || (barriers == cur && (ts->exc_type == NULL ||
                                                   eagle_failure_rank(node) < eagle_failure_rank(ts->failed_node)))) {
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

/* until_done ran out of samples (or a re-check is due): everyone leaves at the next barrier. */
static void record_stop(eagle_team_run *ts, int64_t barriers, int64_t replays_done)
{
    #pragma omp critical(eagle_failure)
    {
        if (barriers < atomic_load(&ts->failed_at))
            atomic_store(&ts->failed_at, barriers);
        ts->stopped_after = replays_done;
    }
}

/* Every thread of the team passes the same barriers: 1 when all are to leave after
 * this one (a failure or stop was recorded before it), 0 to go on. */
static inline int team_barrier(eagle_team_run *ts, int64_t *barriers)
{
    #pragma omp barrier
    ++*barriers;
    return atomic_load(&ts->failed_at) < *barriers;
}

/* Keep the error of a failed node in exc (the first of the stage's), dropping the GIL
 * it was returned with. */
static inline void keep_stage_failure(eagle_gil_slot *gil, int32_t *failed, int32_t i, PyObject *exc[3])
{
    *failed = i;
    PyErr_Fetch(&exc[0], &exc[1], &exc[2]);
    eagle_gil_drop(gil);
}

/* The end of a stage's part: -1 holding the GIL with the kept error restored. */
static inline int stage_result(eagle_gil_slot *gil, int32_t failed, PyObject *exc[3], int32_t *failed_node)
{
    if (failed < 0)
        return 0;
    eagle_gil_take(gil);
    PyErr_Restore(exc[0], exc[1], exc[2]);
    *failed_node = failed;
    return -1;
}

int eagle_run_stage_share(eagle_team_run *team, eagle_plan *plan, int32_t span_base,
                          const eagle_stage *st, int32_t phase, int tid, int nt, eagle_gil_slot *gil,
                          eagle_profile_lane *lane, int32_t *failed_node)
{
    if (st->tile > 0) {
        const int64_t n = plan->logical_size;
        eagle_run_tiles(plan, st, eagle_split_bound_aligned(n, tid, nt, st->align),
                        eagle_split_bound_aligned(n, tid + 1, nt, st->align), nt, lane,
                        NULL, span_base);
        return 0;
    }
    eagle_site site = {.plan = plan, .lane = lane, .span_base = span_base, .where = EAGLE_SITE_TEAM,
                       .tid = tid, .nt = nt, .gil = gil, .team = team,
                       .caller_context = team->caller_context};
    int32_t unsplit = 0, failed = -1;
    PyObject *exc[3] = {NULL, NULL, NULL};
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_node *node = &plan->nodes[i];
        if (phase >= node->n_phases)
            continue;
        if (!eagle_node_entered_by_all(node) && unsplit++ % nt != tid)
            continue;   /* dealt out: another thread's */
        /* a control node is entered by every thread even after a failure (its barriers) */
        if (failed >= 0 && node->kind == EAGLE_NODE_OPAQUE)
            continue;
        site.abandon = failed >= 0;
        if (eagle_run_node(&site, i, phase) < 0)   /* control: thread 0 only */
            keep_stage_failure(gil, &failed, i, exc);
    }
    return stage_result(gil, failed, exc, failed_node);
}

int eagle_run_stage_alone(eagle_plan *plan, int32_t span_base, const eagle_stage *st, int32_t phase,
                          eagle_gil_slot *gil, eagle_profile_lane *lane, int32_t *failed_node)
{
    if (st->tile > 0) {
        eagle_run_tiles(plan, st, 0, plan->logical_size, 1, lane, NULL, span_base);
        return 0;
    }
    const eagle_site site = {.plan = plan, .lane = lane, .span_base = span_base, .where = EAGLE_SITE_ALONE,
                             .tid = 0, .nt = 1, .gil = gil};
    int32_t failed = -1;
    PyObject *exc[3] = {NULL, NULL, NULL};
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_node *node = &plan->nodes[i];
        if (phase >= node->n_phases || (failed >= 0 && eagle_node_is_python(node)))
            continue;
        if (eagle_run_node(&site, i, phase) < 0)   /* -1 holding the GIL */
            keep_stage_failure(gil, &failed, i, exc);
    }
    return stage_result(gil, failed, exc, failed_node);
}

/* A barrier is needed between two consecutive stages unless both run on the
 * calling thread alone. */
static inline int needs_barrier(int32_t team_a, int32_t team_b)
{
    return team_a > 1 || team_b > 1;
}

/* The timing of team stages for a verification (thread 0, `timing` set). */
typedef struct {
    double t_stage;     /* when the stage under way began */
    int32_t pending;    /* the team stage under way, or -1 */
} stage_timer;

static inline void stage_timer_end(eagle_plan *plan, stage_timer *tm, double t)
{
    if (tm->pending >= 0)
        eagle_choice_team_sample(&plan->choice.stages[tm->pending].state, t - tm->t_stage,
                                 plan->logical_size);
    tm->pending = -1;
    tm->t_stage = t;
}

/* One thread's replays [r0, r1) inside the region; returns when it is done or all
 * threads leave together at a barrier (a failure, a stop). *paused: thread 0 stopped
 * for a re-check of the teams. */
static void team_replays(eagle_team_run *ts, int64_t r0, int64_t r1, int timing, double t_region,
                         int tid, int nt, eagle_gil_slot *gil, int *paused)
{
    eagle_plan *plan = ts->plan;
    const eagle_choice *ch = &plan->choice;
    const int32_t ns = plan->n_stages;
    eagle_thread_state *me = eagle_this_thread();
    int64_t barriers = 0;
    int stopping = 0;                 /* this thread failed: skip work until the exit barrier */
    eagle_signal_clock clock = {0};   /* read by thread 0 only, which sets it */
    if (tid == 0)
        eagle_signal_clock_init(&clock);
    stage_timer tm = {.t_stage = t_region, .pending = -1};
    eagle_profile_lane *lane = eagle_profile_lane_of(plan, tid);
    if (timing == EAGLE_TIME_AFTER_START) {
        /* the team is awake and here: the first stage's time is its own */
        #pragma omp barrier
        if (tid == 0)
            tm.t_stage = eagle_now_ns();
    }

    for (int64_t r = r0; r < r1; ++r) {
        eagle_set_thread_replay(me, plan, r);
        if (lane != NULL)
            lane->replay = r;
        for (int32_t s = 0; s < ns; ++s) {
            const eagle_stage *st = &plan->stages[s];
            const int32_t team = eagle_choice_team(ch, s);
            if (!(r == r0 && s == 0) && needs_barrier(eagle_choice_team(ch, s == 0 ? ns - 1 : s - 1), team)) {
                if (team_barrier(ts, &barriers))
                    return;
                if (timing && tid == 0)
                    stage_timer_end(plan, &tm, eagle_now_ns());
            }
            /* a team stage always has a barrier just before it, but the region's first */
            if (timing && tid == 0 && team > 1)
                tm.pending = s;
            /* a failure in this stage: its later phases still run (a team node is
             * not left between phases); everyone leaves at the next stage barrier */
            int failed_here = 0;
            for (int32_t p = 0; p < st->n_phases; ++p) {
                if (p > 0 && team > 1) {
                    #pragma omp barrier
                    ++barriers;
                }
                if (stopping && !failed_here)
                    continue;
                int32_t failed_node = -1;
                int rc;
                if (team > 1)
                    rc = eagle_run_stage_share(ts, plan, 0, st, p, tid, nt, gil, lane, &failed_node);
                else
                    rc = tid == 0 ? eagle_run_stage_alone(plan, 0, st, p, gil, lane, &failed_node) : 0;
                if (rc < 0) {
                    record_failure(ts, barriers, failed_node, r);
                    eagle_gil_drop(gil);
                    stopping = failed_here = 1;
                }
            }
        }
        if (plan->size_source != NULL) {
            /* the next logical size is read once every thread's part is done */
            if (team_barrier(ts, &barriers))
                return;
            if (timing && tid == 0 && tm.pending >= 0)   /* the last stage ends here, before the size update */
                stage_timer_end(plan, &tm, eagle_now_ns());
            if (tid == 0 && !stopping && eagle_end_of_replay(plan, r)) {
                record_stop(ts, barriers, r + 1);
                stopping = 1;
            }
        }
        if (tid == 0 && !stopping && eagle_signal_clock_due(&clock)) {
            eagle_gil_take(gil);
            if (PyErr_CheckSignals() < 0
                || (plan->progress != NULL && eagle_report_progress(plan, r + 1) < 0)) {
                record_failure(ts, barriers, -1, r);
                stopping = 1;
            }
            eagle_gil_drop(gil);
            if (!stopping && !timing && r + 1 < r1 && eagle_choice_check_due(ch)) {
                /* leave after this replay for a re-check of the teams */
                *paused = 1;
                record_stop(ts, barriers, r + 1);
                stopping = 1;
            }
        }
    }
    if (timing && plan->size_source == NULL && eagle_choice_team(ch, ns - 1) > 1) {
        if (team_barrier(ts, &barriers))
            return;
        if (tid == 0 && tm.pending >= 0)
            stage_timer_end(plan, &tm, eagle_now_ns());
    }
}

int eagle_replay_team(eagle_plan *plan, int64_t r0, int64_t r1, int timing,
                      const eagle_launch_ctx *lctx, eagle_failure *failure)
{
    eagle_team_run ts = {.plan = plan, .failed_node = -1, .failed_replay = -1, .stopped_after = -1};
    atomic_store(&ts.failed_at, INT64_MAX);
    if (plan->has_opaque) {
        /* the context the team's other threads run opaque nodes in (gil.h);
         * a copy costs one small allocation (the values are shared, not copied) */
        ts.caller_context = PyContext_CopyCurrent();
        if (ts.caller_context == NULL) {
            failure->node = -1;
            failure->replay = r0;
            plan->replays_done = r0;
            return -1;
        }
    }
    eagle_note_parallel_region();
    int paused = 0;
    const double t_region = timing ? eagle_now_ns() : 0;

    PyThreadState *save = PyEval_SaveThread();
    #pragma omp parallel num_threads(plan->num_threads)
    {
        /* the team OpenMP gave (it may be smaller than asked: OMP_THREAD_LIMIT,
         * OMP_DYNAMIC, nesting); every split is by it */
        const int tid = eagle_omp_thread_num(), nt = eagle_omp_num_threads();
        eagle_thread_state *me = eagle_this_thread();
        const eagle_launch_ctx *saved_ctx = me->launch;
        me->launch = lctx;
        eagle_gil_slot gil = {0};
        team_replays(&ts, r0, r1, timing, t_region, tid, nt, &gil, &paused);
        eagle_gil_finish(&gil);
        me->launch = saved_ctx;
    }
    PyEval_RestoreThread(save);
    Py_XDECREF(ts.caller_context);

    if (ts.exc_type != NULL) {
        failure->node = ts.failed_node;
        failure->replay = ts.failed_replay;
        /* an interrupt (or the progress callback's error; node -1) is seen after its
         * replay ran whole: it counts, as in a serial run */
        plan->replays_done = ts.failed_replay + (ts.failed_node < 0);
        PyErr_Restore(ts.exc_type, ts.exc_value, ts.exc_tb);
        return -1;
    }
    plan->replays_done = ts.stopped_after >= 0 ? ts.stopped_after : r1;
    plan->paused = paused;
    return 0;
}
