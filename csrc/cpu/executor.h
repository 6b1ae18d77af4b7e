/* eagle's CPU executor: replays a staged plan n times.
 *
 * A plan is a list of stages; each stage is a run of nodes that may execute
 * side by side. Each stage runs either on the calling thread alone (team 1)
 * or on the whole OpenMP team (team > 1), where split native nodes have their
 * [0, logical_size) range divided among the threads and the other nodes are
 * dealt out one per thread. One parallel region serves a whole launch; a
 * barrier separates two stages only when one of them uses the team.
 *
 * A fused run (eagle_stage.tile > 0) is a stage made of several consecutive
 * stages of split native nodes that touch per-sample arrays only at their own
 * samples (the Python layer checks it, eagle/cpu/fusion.py): each thread runs
 * every node of it over one tile of its share of [0, logical_size), then the
 * next tile, so the arrays the run passes between its nodes stay in cache and
 * no barrier separates the stages it was made of. Plan order is recording
 * order within a tile, so every sample sees its nodes in recording order.
 *
 * Team nodes (eagle_team_kernel) run in phases, with a barrier between
 * phases when the stage uses the team. A plan with a size source (a
 * compaction node) takes its logical size from it after every replay, and
 * with until_done stops once that size is 0.
 *
 * GIL: eagle_execute is called with the GIL held and returns with it held.
 * A plan with no opaque node runs without the GIL; opaque nodes take it
 * (worker threads through PyGILState_Ensure). The calling thread takes it
 * every few milliseconds to run signal handlers, so Ctrl-C stops a launch.
 *
 * Which stages use the team (policy EAGLE_TEAM_AUTO) is decided by the team
 * choice (team_choice.h), whose state the plan holds (eagle_plan.choice).
 *
 * The executor's units, each depending only on those before it:
 *   runtime    OpenMP, thread limits, the team size, fork flags, the barrier's cost (no Python)
 *   ticker     the signal ticker: "every few ms" for Ctrl-C checks
 *   team_choice  which stages run on the team (runtime only; no Python)
 *   plan.h     the types a launch runs (nodes, stages, control, observers, groups)
 *   launch     the re-entry guard and the replay each thread runs
 *   observe    profile spans and progress calls
 *   replay     a replay's end: size source, until_done, process groups
 *   node_run.h run_node: the one dispatch on a node's kind, timed by the observer
 *   tiles      fused runs, tile by tile
 *   control    control-flow nodes, serially (their bodies' passes segmented by the
 *              bodies' own team choices) and on the team
 *   serial     replays on the calling thread, with the GIL or without
 *   team       replays in one parallel region
 *   executor   this entry: segments of a launch (the team choice's), the ticker
 * (control and run_node call each other: a control node's bodies are nodes.)
 *
 * Ownership: the plan's arrays (nodes, stages, data pointers, callables) are
 * owned by the caller (eagle/cpu/_executor.pyx) and must outlive the call.
 * Thread-safety: one plan must not be executed by two threads at once; the
 * Python layer serializes launches of one graph.
 */
#ifndef EAGLE_EXECUTOR_H
#define EAGLE_EXECUTOR_H

#include "plan.h"   /* Python.h first */
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replay the plan n_replays times. Returns 0, or -1 with a Python exception
 * set and *failure saying where it happened. */
int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure);

/* eagle_execute inside a launch context of owner (push, execute, pop in one call;
 * launch.h: the re-entry guard) */
int eagle_launch(eagle_plan *plan, int64_t n_replays, const void *owner, eagle_failure *failure);

#ifdef __cplusplus
}
#endif

#endif
