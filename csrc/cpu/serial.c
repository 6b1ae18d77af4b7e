/* The serial run; see serial.h. */
#include "serial.h"

#include "clock.h"
#include "launch.h"
#include "node_run.h"
#include "observe.h"
#include "replay.h"
#include "ticker.h"
#include "tiles.h"

/* Run one replay on this thread, stage by stage, every node whole (a fused run tile by
 * tile), timing each node when measure is set (the cheapest time is kept; when the
 * team choice asks for it, eagle_choice_replace_costs, this replay's time replaces the
 * old one). Opaque nodes are called directly: the caller holds the GIL when the plan
 * has any. */
static EAGLE_ALWAYS_INLINE int run_replay_staged(eagle_plan *plan, int measure, int gil_held,
                                                 eagle_profile_lane *lane, int32_t *failed_node)
{
    eagle_choice *ch = &plan->choice;
    const eagle_site site = {.plan = plan, .lane = lane, .where = EAGLE_SITE_SERIAL, .tid = 0, .nt = 1,
                             .gil_held = gil_held};
    const int fresh = measure && eagle_choice_replace_costs(ch);
    for (int32_t s = 0; s < plan->n_stages; ++s) {
        const eagle_stage *st = &plan->stages[s];
        if (st->tile > 0) {
            double sums[EAGLE_FUSED_MAX_NODES];
            eagle_run_tiles(plan, st, 0, plan->logical_size, 1, lane, measure ? sums : NULL, 0);
            if (measure)
                for (int32_t k = 0; k < st->count; ++k)
                    eagle_choice_node_timed(ch, st->first + k, plan->logical_size, sums[k], fresh);
            continue;
        }
        for (int32_t i = st->first; i < st->first + st->count; ++i) {
            const double t0 = measure ? eagle_now_ns() : 0;
            if (eagle_run_node_whole(&site, i) < 0) {
                *failed_node = i;
                return -1;
            }
            if (measure)
                eagle_choice_node_timed(ch, i, plan->logical_size, eagle_now_ns() - t0, fresh);
        }
    }
    if (fresh)
        eagle_choice_costs_replaced(ch);
    return 0;
}

/* Serial replays holding the GIL (the plan has opaque nodes). The nodes are
 * stored in stage order, so a flat walk over them is the recording-order
 * program; this is the hot loop of a graph of small Python nodes. It is
 * inlined twice, with and without a profile lane, so a launch with no profile
 * pays one test per launch for it. */
static EAGLE_ALWAYS_INLINE int serial_gil_loop(eagle_plan *plan, eagle_thread_state *me, int64_t r0,
                                               int64_t r1, eagle_failure *failure, eagle_profile_lane *lane)
{
    const eagle_site site = {.plan = plan, .lane = lane, .where = EAGLE_SITE_SERIAL, .tid = 0, .nt = 1,
                             .gil_held = 1};
    /* a plan with a fused run walks its stages (run_replay_staged) instead */
    const int32_t n_walk = plan->has_fused ? 0 : plan->n_nodes;
    /* the clock times the hand-offs between replays: a launch(1) has none (and no clock read) */
    eagle_signal_clock clock = {0};
    if (r1 - r0 > 1)
        eagle_signal_clock_init(&clock);
    for (int64_t r = r0; r < r1; ++r) {
        eagle_set_thread_replay(me, plan, r);
        if (lane != NULL)
            lane->replay = r;
        if (plan->has_fused) {
            int32_t failed;
            if (run_replay_staged(plan, 0, 1, lane, &failed) < 0) {
                failure->node = failed;
                failure->replay = r;
                return -1;
            }
        }
        for (int32_t i = 0; i < n_walk; ++i) {
            if (eagle_run_node_whole(&site, i) < 0) {
                failure->node = i;
                failure->replay = r;
                return -1;
            }
        }
        if (eagle_end_of_replay(plan, r))
            break;
        if (PyErr_CheckSignals() < 0) {
            failure->node = -1;
            failure->replay = r;
            return -1;
        }
        /* nodes that are C callables never let other Python threads run:
         * hand the GIL over every few milliseconds, as the interpreter does (not
         * after the last replay: the launch returns to the interpreter then) */
        if (r + 1 < r1 && eagle_signal_clock_due(&clock)) {
            if (plan->progress != NULL && eagle_report_progress(plan, r + 1) < 0) {
                failure->node = -1;
                failure->replay = r;
                return -1;
            }
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
            if (eagle_choice_check_due(&plan->choice)) {
                plan->paused = 1;
                break;
            }
        }
    }
    return 0;
}

int eagle_replay_serial_gil(eagle_plan *plan, eagle_thread_state *me, int64_t r0, int64_t r1,
                            int measure, eagle_failure *failure)
{
    eagle_profile_lane *lane = eagle_profile_lane_of(plan, 0);
    if (measure) {
        for (int64_t r = r0; r < r1; ++r) {
            eagle_set_thread_replay(me, plan, r);
            if (lane != NULL)
                lane->replay = r;
            if (run_replay_staged(plan, 1, 1, lane, &failure->node) < 0) {
                failure->replay = r;
                return -1;
            }
            if (eagle_end_of_replay(plan, r))
                break;
            if (PyErr_CheckSignals() < 0) {
                failure->node = -1;
                failure->replay = r;
                return -1;
            }
        }
        return 0;
    }
    return lane == NULL ? serial_gil_loop(plan, me, r0, r1, failure, NULL)
                        : serial_gil_loop(plan, me, r0, r1, failure, lane);
}

/* Serial replays without the GIL (every node is native); inlined with and
 * without a profile lane, as serial_gil_loop. */
static EAGLE_ALWAYS_INLINE int serial_nogil_loop(eagle_plan *plan, eagle_thread_state *me, int64_t r0,
                                                 int64_t r1, int measure, eagle_failure *failure,
                                                 eagle_profile_lane *lane)
{
    eagle_signal_clock clock;
    eagle_signal_clock_init(&clock);
    int32_t failed;
    int rc = 0;
    PyThreadState *save = PyEval_SaveThread();
    for (int64_t r = r0; r < r1; ++r) {
        eagle_set_thread_replay(me, plan, r);
        if (lane != NULL)
            lane->replay = r;
        /* fails only in a control node (an iteration limit, Ctrl-C inside a loop) */
        if (run_replay_staged(plan, measure, 0, lane, &failed) < 0) {
            failure->node = failed;
            failure->replay = r;
            rc = -1;
            break;
        }
        if (eagle_end_of_replay(plan, r))
            break;
        if (eagle_signal_clock_due(&clock)) {
            PyEval_RestoreThread(save);
            rc = PyErr_CheckSignals();
            if (rc == 0 && plan->progress != NULL)
                rc = eagle_report_progress(plan, r + 1);
            save = PyEval_SaveThread();
            if (rc < 0) {
                failure->node = -1;
                failure->replay = r;
                break;
            }
            if (!measure && eagle_choice_check_due(&plan->choice) && r + 1 < r1) {
                plan->paused = 1;
                break;
            }
        }
    }
    PyEval_RestoreThread(save);
    return rc;
}

int eagle_replay_serial_nogil(eagle_plan *plan, eagle_thread_state *me, int64_t r0, int64_t r1,
                              int measure, eagle_failure *failure)
{
    eagle_profile_lane *lane = eagle_profile_lane_of(plan, 0);
    return lane == NULL ? serial_nogil_loop(plan, me, r0, r1, measure, failure, NULL)
                        : serial_nogil_loop(plan, me, r0, r1, measure, failure, lane);
}
