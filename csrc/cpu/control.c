/* Control-flow nodes, serially and on the team; see control.h and plan.h. */
#include "control.h"

#include "launch.h"
#include "node_run.h"
#include "observe.h"
#include "relaxed.h"
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

/* Signals (and progress) inside a long while loop, as between replays: -1 with the
 * error set. Without the GIL, it is taken for the check only. */
static int control_poll(eagle_plan *plan, eagle_signal_clock *clk, int gil_held)
{
    if (!eagle_signal_clock_due(clk))
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

static void limit_error(const eagle_control *c)
{
    PyErr_Format(PyExc_RuntimeError,
                 "while_loop node '%s' reached max_iterations=%lld with its condition "
                 "still true", c->name, (long long)c->max_iterations);
}

/* ---- on one thread --------------------------------------------------------- */

/* One pass over a body's stages on this thread, every node whole (a fused run's
 * stage tile by tile, as at top level). */
static int run_body(eagle_plan *body, int32_t base, int gil_held, eagle_profile_lane *lane,
                    int32_t *failed_node)
{
    const eagle_site site = {.plan = body, .lane = lane, .span_base = base, .where = EAGLE_SITE_SERIAL,
                             .tid = 0, .nt = 1, .gil_held = gil_held};
    int32_t s = 0;
    for (int32_t i = 0; i < body->n_nodes; ++i) {
        while (s + 1 < body->n_stages && body->stages[s + 1].first <= i)
            ++s;
        if (body->stages[s].tile > 0 && body->stages[s].first == i) {
            eagle_run_tiles(body, &body->stages[s], 0, body->logical_size, 1, lane, NULL, base);
            i += body->stages[s].count - 1;
            continue;
        }
        if (eagle_run_node_whole(&site, i) < 0) {   /* opaque: gil_held (has_opaque) */
            *failed_node = i;
            return -1;
        }
    }
    return 0;
}

int eagle_run_control(eagle_plan *plan, const eagle_node *node, int gil_held, eagle_profile_lane *lane)
{
    eagle_control *c = (eagle_control *)node->user_data;
    control_prepare(plan, c);
    int32_t b = 0;
    int64_t it = 0;
    int32_t failed = -1;
    if (c->control == EAGLE_CONTROL_WHILE) {
        eagle_signal_clock clk;
        eagle_signal_clock_init(&clk);
        while (control_cond(c)) {
            if (c->max_iterations >= 0 && it >= c->max_iterations) {
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
            if (run_body(c->bodies[0], c->span_base[0], gil_held, lane, &failed) < 0)
                break;
            ++it;
            if (control_poll(plan, &clk, gil_held) < 0) {
                c->failed_why = EAGLE_CONTROL_INTERRUPTED;
                c->failed_iteration = it;
                return -1;
            }
        }
        if (failed < 0)
            return 0;
    } else {
        if (c->control == EAGLE_CONTROL_IF_ELSE && !control_cond(c)) {
            if (c->n_bodies < 2)
                return 0;
            b = 1;
        }
        if (run_body(c->bodies[b], c->span_base[b], gil_held, lane, &failed) == 0)
            return 0;
    }
    c->failed_why = EAGLE_CONTROL_RAISED;
    c->failed_body = b;
    c->failed_node = failed;
    c->failed_iteration = it;
    return -1;
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

/* Thread 0, before each iteration: 1 + the body to run, 0 (done) or -1 (a failure kept
 * in c: a body node's in the last pass, the iteration limit, a signal, progress). */
static int32_t control_team_decide(eagle_plan *plan, eagle_control *c, int64_t it, int64_t at,
                                   eagle_signal_clock *clk, eagle_gil_slot *gil)
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
    if (it > 0 && eagle_signal_clock_due(clk)) {
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
    }
    if (!control_cond(c))
        return 0;
    if (c->max_iterations >= 0 && it >= c->max_iterations) {
        eagle_gil_take(gil);
        limit_error(c);
        control_team_keep(c, EAGLE_CONTROL_LIMIT, 0, -1, it, at);
        eagle_gil_drop(gil);
        return -1;
    }
    return 1;
}

/* A barrier of a team run of a control node: 1 when every thread is to leave after
 * it (a failure was kept before it), 0 to go on. */
static inline int control_barrier(const eagle_control *c, int64_t *barriers)
{
    #pragma omp barrier
    ++*barriers;
    return eagle_load_i64(&c->team_failed_at) < *barriers;
}

/* One pass of every thread of the team over body b's stages (plan.h): 0, or -1 on
 * every thread together when a failure was kept (in c). */
static int run_body_team(eagle_team_run *team, eagle_control *c, int32_t b, int64_t it, int tid,
                         int nt, eagle_gil_slot *gil, eagle_profile_lane *lane, int64_t *barriers)
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
        if (s > 0 && !(alone && body_stage_alone(body, &body->stages[s - 1]))
            && control_barrier(c, barriers))
            return -1;
        for (int32_t p = 0; p < st->n_phases; ++p) {
            if (p > 0) {
                #pragma omp barrier
                ++*barriers;
            }
            if ((failed_stage >= 0 && failed_stage < s) || (alone && tid != 0))
                continue;
            int32_t failed = -1;
            if (eagle_run_stage_share(team, body, base, st, p, tid, alone ? 1 : nt, gil, lane, &failed) < 0) {
                control_team_keep(c, EAGLE_CONTROL_RAISED, b, failed, it, *barriers);
                eagle_gil_drop(gil);
                failed_stage = s;
            }
        }
    }
    /* the next decision reads what the body wrote; thread 0 alone ran the last stage */
    if (body->n_stages > 0 && !body_stage_alone(body, &body->stages[body->n_stages - 1])
        && control_barrier(c, barriers))
        return -1;
    return 0;
}

int eagle_run_control_team(eagle_team_run *team, eagle_plan *plan, const eagle_node *node, int tid,
                           int nt, eagle_gil_slot *gil, eagle_profile_lane *lane, int abandon)
{
    eagle_control *c = (eagle_control *)node->user_data;
    eagle_signal_clock clk;
    int64_t barriers = 0, it = 0;
    if (tid == 0) {
        control_prepare(plan, c);
        c->team_failed_at = INT64_MAX;
        eagle_signal_clock_init(&clk);
    }
    int32_t d;
    for (;;) {
        /* two slots, by iteration parity: after a last body stage thread 0 ran alone (no
         * barrier after it) thread 0 writes the next decision while another thread may
         * not have read this one yet */
        if (tid == 0)
            c->team_decision[it & 1] = abandon ? 0 : control_team_decide(plan, c, it, barriers, &clk, gil);
        #pragma omp barrier
        ++barriers;
        d = c->team_decision[it & 1];
        if (d <= 0)
            break;
        if (run_body_team(team, c, d - 1, it, tid, nt, gil, lane, &barriers) < 0) {
            d = -1;
            break;
        }
        ++it;
    }
    /* every thread has read the decision, or left at the same barrier: the struct is
     * thread 0's again */
    if (d == 0 || tid != 0)
        return 0;
    eagle_gil_take(gil);
    PyErr_Restore(c->team_exc[0], c->team_exc[1], c->team_exc[2]);
    c->team_exc[0] = c->team_exc[1] = c->team_exc[2] = NULL;
    return -1;
}
