/* The team run: replays in one OpenMP parallel region, the stages on the team
 * shared by its threads and the others run by the launching thread alone, with a
 * barrier between two stages when one of them uses the team (executor.h).
 *
 * Ownership: the team's shared state (eagle_team_run) lives on the launching
 * thread's stack for one region. Thread-safety: every thread of the region; the
 * shared state's failure fields are written in an omp critical section.
 */
#ifndef EAGLE_TEAM_H
#define EAGLE_TEAM_H

#include "plan.h"   /* Python.h first */

#include <stdatomic.h>

#include "gil.h"
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* State shared by the team during one launch. */
typedef struct eagle_team_run {
    eagle_plan *plan;
    /* Number of barriers passed when the first failure (or stop) happened;
     * threads leave at the first barrier after it, so all of them pass the
     * same barriers. */
    _Atomic int64_t failed_at;
    int32_t failed_node;
    int64_t failed_replay;
    int64_t stopped_after;                     /* replays done when until_done stopped, or -1 */
    PyObject *exc_type, *exc_value, *exc_tb;   /* the failure's exception, owned */
    PyObject *caller_context;   /* a copy of the launching thread's context, owned; or NULL */
} eagle_team_run;

/* Where a failure ranks among those between the same two barriers: the sequential
 * oracle raises the earliest node's exception (plan order is recording order within
 * a stage); an interrupt (node -1) comes after every node. */
static inline int32_t eagle_failure_rank(int32_t node)
{
    return node < 0 ? INT32_MAX : node;
}

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
int eagle_run_stage_share(eagle_team_run *team, eagle_plan *plan, int32_t span_base,
                          const eagle_stage *st, int32_t phase, int tid, int nt, eagle_gil_slot *gil,
                          eagle_profile_lane *lane, int32_t *failed_node);

/* Phase `phase` of a stage of `plan` (span indexes from span_base) that the calling
 * thread runs alone inside the team's region. As in a team stage
 * (eagle_run_stage_share), a failure skips only the stage's Python work not yet
 * started (opaque and control nodes): its native and team nodes complete, so a team
 * node is never left between its phases. (The serial run, one thread and no region,
 * stops at the failing node: the recording-order state.) Returns -1 at the end,
 * holding the GIL with the first failure's error set. */
int eagle_run_stage_alone(eagle_plan *plan, int32_t span_base, const eagle_stage *st, int32_t phase,
                          eagle_gil_slot *gil, eagle_profile_lane *lane, int32_t *failed_node);

/* How eagle_replay_team times its team stages for a verification: not at all; the
 * first stage of the region from before the region, so waking the team counts (a short
 * launch pays it on every replay); or from a barrier at the region's start (a long
 * launch pays it once). */
enum { EAGLE_TIME_NONE = 0, EAGLE_TIME_FROM_START = 1, EAGLE_TIME_AFTER_START = 2 };

/* Replays [r0, r1) in one parallel region (or serially, without OpenMP). With
 * `timing` (EAGLE_TIME_*), the calling thread times every stage that runs on the team,
 * from the barrier before it to the barrier after it, for the team's verification. The
 * launching thread's context (`lctx`) is carried by every team thread, so a node
 * that calls back into the graph from a worker is refused as on the caller.
 * Called holding the GIL; 0, or -1 with the error set and *failure saying where. */
int eagle_replay_team(eagle_plan *plan, int64_t r0, int64_t r1, int timing,
                      const eagle_launch_ctx *lctx, eagle_failure *failure);

#ifdef __cplusplus
}
#endif

#endif
