/* A replay's bookkeeping, shared by the serial and the team run: the replay
 * index a thread draws for, the logical size a compaction hands the next
 * replay, until_done, and the process groups (MPI) that stop together.
 *
 * Ownership: the plan's fields named. Thread-safety: the launching thread
 * (OpenMP thread 0 in a region), but eagle_set_thread_replay: every thread.
 */
#ifndef EAGLE_REPLAY_H
#define EAGLE_REPLAY_H

#include "plan.h"   /* Python.h first */
#include "launch.h"
#include "relaxed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* vals[0..count) := their maximum over every process the plan's groups join: over each
 * group in turn, n_groups rounds (one round for one group: the common case), so that a
 * maximum crosses chains of up to n_groups communicators. Every process calls its groups
 * in recording order, as the graph's collectives. */
void eagle_groups_max(eagle_plan *plan, int64_t *vals, int32_t count, int32_t at_launch);

/* The replay each thread is running, counted over the graph's launches
 * (plan->replay_base + the launch's replay index): set on every thread before it
 * runs a replay's nodes, read by the random nodes' kernels through
 * eagle_thread_replay(). Per thread, so team stages of consecutive replays that
 * overlap on different threads each see their own. me: eagle_this_thread(), taken
 * once before the replay loop (not once a replay). */
static inline void eagle_set_thread_replay(eagle_thread_state *me, const eagle_plan *plan, int64_t r)
{
    me->replay = plan->replay_base + (uint64_t)r;
}

/* The size source holds the logical size until the compaction writes its live count:
 * a replay that does not run the compaction (in a branch not taken, a loop that ran zero
 * times) leaves the size as it was; one that runs it several times (a loop) ends at its
 * last run's count. Seeded when a launch starts (a set_logical_size before it, or a
 * launch of another graph sharing the node, wrote something else) and after every
 * replay, on the thread that runs the compaction's last phase (thread 0). */
static inline void eagle_seed_size_source(eagle_plan *plan)
{
    if (plan->size_source != NULL)
        *plan->size_source = plan->logical_size;
}

/* After replay `replay`: take the next logical size from the plan's size source.
 * Returns 1 when the launch should stop (until_done and no sample left). */
static inline int eagle_end_of_replay(eagle_plan *plan, int64_t replay)
{
    plan->replays_done = replay + 1;
    if (plan->size_source != NULL) {
        int64_t n = *plan->size_source;
        /* plan() may read the size on another thread meanwhile (relaxed.h) */
        eagle_store_i64(&plan->logical_size, n < 0 ? 0 : (n > plan->capacity ? plan->capacity : n));
        eagle_seed_size_source(plan);
        if (plan->logical_size > 0 && plan->logical_size < plan->segment_floor)
            plan->resized = 1;
    }
    if (!plan->until_done)
        return plan->resized;
    int64_t live = plan->logical_size > 0;
    if (plan->n_groups > 0) {
        /* ranks replaying together stop together: a rank out of samples replays at
         * logical size 0 (its collectives still run) until every rank is out. One
         * small allreduce per replay, from the launching thread (thread 0). */
        eagle_groups_max(plan, &live, 1, 0);
    }
    plan->emptied = live == 0;
    return plan->emptied || plan->resized;
}

#ifdef __cplusplus
}
#endif

#endif
