/* eagle's CPU executor, the entry: a launch cut into segments by the team choice,
 * each run serially or on the team; see executor.h for the contract. */
#include "executor.h"

#include "replay.h"
#include "runtime.h"
#include "serial.h"
#include "team.h"
#include "team_choice.h"
#include "ticker.h"

/* A launch of one replay this cheap (nodes' measured costs) keeps the GIL. */
#define SHORT_LAUNCH_NS 2e3
/* A verification inside a launch with at least this many replays left times the team
 * from after the region's start (EAGLE_TIME_AFTER_START): such a launch's run pays for
 * waking the team once, not per replay, while each verifying replay is a region of its
 * own (in a VM, waking the team cost 10-40 µs: more than a Jacobi step's stages). */
#define LONG_LAUNCH_REPLAYS 16

static int any_team_in(const eagle_plan *plan)
{
    for (int32_t s = 0; s < plan->n_stages; ++s)
        if (eagle_choice_team(&plan->choice, s) > 1)
            return 1;
    return 0;
}

static int replay_serial(eagle_plan *plan, eagle_thread_state *me, int64_t r0, int64_t r1, int measure,
                         eagle_failure *failure)
{
    return plan->has_opaque ? eagle_replay_serial_gil(plan, me, r0, r1, measure, failure)
                            : eagle_replay_serial_nogil(plan, me, r0, r1, measure, failure);
}

static int run_segment(eagle_plan *plan, eagle_thread_state *me, int64_t r0, int64_t r1, int kind,
                       int64_t n_replays, eagle_failure *failure)
{
    plan->paused = 0;
    if (kind == EAGLE_SEGMENT_MEASURE || kind == EAGLE_SEGMENT_PAIRED)
        return replay_serial(plan, me, r0, r1, 1, failure);
    /* without OpenMP every stage has team 1 */
    if (EAGLE_HAVE_OPENMP && any_team_in(plan))
        return eagle_replay_team(plan, r0, r1,
                                 kind != EAGLE_SEGMENT_VERIFY ? EAGLE_TIME_NONE
                                 : n_replays - r0 >= LONG_LAUNCH_REPLAYS ? EAGLE_TIME_AFTER_START
                                                                         : EAGLE_TIME_FROM_START,
                                 me->launch, failure);
    return replay_serial(plan, me, r0, r1, 0, failure);
}

/* me: the launching thread's state (its launch context is the team's) */
static int execute_replays(eagle_plan *plan, int64_t n_replays, eagle_thread_state *me,
                           eagle_failure *failure)
{
    plan->paused = 0;
    plan->emptied = 0;
    plan->resized = 0;
    plan->segment_floor = 0;
    if (n_replays <= 0 || plan->n_stages == 0
        || (plan->until_done && (plan->n_groups > 0 ? !plan->live_anywhere : plan->logical_size == 0)))
        return 0;
    eagle_choice *ch = &plan->choice;
    if (plan->logical_size > 0)
        eagle_store_i64(&plan->launch_size, plan->logical_size);
    eagle_seed_size_source(plan);
    eagle_choice_launch_begin(ch, plan->num_threads);

    int ticking = 0;
    int rc = 0;
    int64_t r = 0;
    while (r < n_replays) {
        /* the team choice cuts the launch into segments: measuring, verifying
         * the team, then running with the teams it chose */
        int64_t stop;
        const int kind = eagle_choice_next_segment(ch, plan->num_threads, plan->logical_size, r,
                                                   n_replays, &stop);
        /* a loop may run long inside one replay: its signal checks read the ticks too */
        if (!ticking && (stop - r > 1 || plan->has_control)) {
            eagle_ticker_enter();
            ticking = 1;
        }
        /* a run segment with a stage on the team ends once the population has halved:
         * the teams are chosen again for what is left (eagle_choice_size_floor) */
        plan->resized = 0;
        plan->segment_floor = kind == EAGLE_SEGMENT_RUN && plan->size_source != NULL
                                  ? eagle_choice_size_floor(ch, plan->logical_size) : 0;
        const double replay_ns = eagle_choice_replay_ns(ch);
        if (kind == EAGLE_SEGMENT_RUN && stop - r == 1 && !plan->has_opaque && replay_ns >= 0
            && replay_ns < SHORT_LAUNCH_NS && !any_team_in(plan)) {
            /* one tiny replay: releasing and retaking the GIL would cost more than it */
            plan->paused = 0;
            rc = eagle_replay_serial_gil(plan, me, r, stop, 0, failure);
        } else {
            rc = run_segment(plan, me, r, stop, kind, n_replays, failure);
        }
        int64_t done = plan->replays_done;
        eagle_choice_segment_done(ch, plan->num_threads, plan->logical_size, kind, r, stop, done, rc);
        plan->segment_floor = 0;
        if (rc < 0 || plan->emptied)
            break;
        if (done < stop && !plan->paused && !plan->resized)
            break;
        if (plan->paused)
            eagle_choice_recheck(ch);
        r = done;
    }
    if (ticking)
        eagle_ticker_leave();
    plan->paused = 0;
    return rc;
}

static inline int execute_on(eagle_thread_state *me, eagle_plan *plan, int64_t n_replays,
                             eagle_failure *failure)
{
    failure->node = -1;
    failure->replay = -1;
    plan->replays_done = 0;
    const uint64_t outer_replay = me->replay;   /* a launch from inside a node of another */
    const int64_t outer_iterations = me->iterations;
    me->iterations = 0;
    int rc = execute_replays(plan, n_replays, me, failure);
    plan->replay_base += (uint64_t)plan->replays_done;   /* replays completed, also on failure */
    me->replay = outer_replay;
    me->iterations = outer_iterations;
    return rc;
}

int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure)
{
    return execute_on(eagle_this_thread(), plan, n_replays, failure);
}

int eagle_launch(eagle_plan *plan, int64_t n_replays, const void *owner, eagle_failure *failure)
{
    eagle_thread_state *me = eagle_this_thread();
    eagle_launch_ctx ctx = {.owner = owner, .parent = me->launch};
    me->launch = &ctx;
    int rc = execute_on(me, plan, n_replays, failure);
    me->launch = ctx.parent;
    return rc;
}
