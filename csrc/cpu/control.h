/* Control-flow nodes (plan.h's eagle_control): a node whose bodies' plans run in
 * place: on the thread that runs the node, its body's passes cut into segments by
 * the body's own team choice (outside a parallel region: passes with a team stage
 * run in a region of their own), or on the team when its stage is on the team
 * (plan.h says how). Called through run_node (node_run.h).
 *
 * Ownership: writes the control struct's failure, team and iteration fields, the
 * bodies' per-launch fields (logical size, team size, observers, replay base) and
 * the bodies' team choices. Thread-safety: as the stage the node is in.
 */
#ifndef EAGLE_CONTROL_H
#define EAGLE_CONTROL_H

#include "plan.h"   /* Python.h first */
#include "gil.h"

#ifdef __cplusplus
extern "C" {
#endif

struct eagle_team_run;

/* Run control node `node` of `plan` on this thread: 0, or -1 with the Python error set
 * on this thread and the node's failed_* fields saying where. gil_held: whether the
 * caller holds the GIL (always, when the bodies hold an opaque node). Outside a
 * parallel region the body's team choice decides its passes' teams (it may open a
 * region of its own, from the launching thread). */
int eagle_run_control(eagle_plan *plan, const eagle_node *node, int gil_held, eagle_profile_lane *lane);

/* The same on the launching thread inside a parallel region, the stage on it alone:
 * the GIL (through gil) for the whole node when its bodies hold opaque nodes. On
 * failure -1 holding the GIL, the error set (as an opaque node's failure there). */
int eagle_run_control_alone(eagle_plan *plan, const eagle_node *node, eagle_gil_slot *gil,
                            eagle_profile_lane *lane);

/* Control node `node` of `plan`, entered by every thread of the team (its stage is on
 * the team). Returns 0, or -1 on thread 0 only, holding the GIL with the error set (as
 * an opaque node's failure), the node's failed_* fields saying where; the other
 * threads return 0 and leave at the launch's next barrier. abandon: thread 0 failed
 * earlier in this stage, so the node does not start (every thread still meets the
 * decision barrier). */
int eagle_run_control_team(struct eagle_team_run *team, eagle_plan *plan, const eagle_node *node,
                           int tid, int nt, eagle_gil_slot *gil, eagle_profile_lane *lane, int abandon);

#ifdef __cplusplus
}
#endif

#endif
