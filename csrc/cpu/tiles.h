/* Fused runs (eagle_stage.tile > 0, plan.h): a stage of split native nodes run
 * tile by tile, so the arrays they pass between them stay in cache.
 *
 * Ownership: reads the plan; the kernels write its arrays. Thread-safety: each
 * thread its own range.
 */
#ifndef EAGLE_TILES_H
#define EAGLE_TILES_H

#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Samples [lo, hi) of the fused run `st`, tile by tile: every node over one tile,
 * in plan order, then the next tile. Each node is called at least once (an empty
 * range too, as a stage that is not fused calls it). Untimed unless a profile lane
 * or sum_ns (the measuring replays' per-node times, st->count of them) is given:
 * then each node's calls are summed, and the lane gets one span per node, the sums
 * laid end to end from the run's start (span indexes from span_base). nt: the
 * threads that share the run (each node's finish runs once all of them are done);
 * every node is clamped to its extent. A compiled group of the run's nodes
 * (eagle_stage.compiled) is one call per tile in place of its nodes' calls. */
void eagle_run_tiles(const eagle_plan *plan, const eagle_stage *st, int64_t lo, int64_t hi, int nt,
                     eagle_profile_lane *lane, double *sum_ns, int32_t span_base);

#ifdef __cplusplus
}
#endif

#endif
