/* The serial run: replays on the calling thread, no parallel region, holding the
 * GIL (the plan has opaque nodes, or one tiny replay) or without it (every node is
 * native). Measured replays time every node for the team choice.
 *
 * Ownership: writes the plan's per-launch outputs (replays_done, paused, the
 * logical size) and, measuring, the team choice's node costs. Thread-safety: the
 * launching thread, holding the GIL on entry and on return.
 */
#ifndef EAGLE_SERIAL_H
#define EAGLE_SERIAL_H

#include "plan.h"   /* Python.h first */
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replays [r0, r1) holding the GIL throughout (but hand-offs every few ms), every
 * node timed for the team choice when `measure`. me: eagle_this_thread(), which the
 * launch took once (a thread-local's address costs a call in a shared object). 0, or
 * -1 with the error set and *failure saying where. */
int eagle_replay_serial_gil(eagle_plan *plan, eagle_thread_state *me, int64_t r0, int64_t r1,
                            int measure, eagle_failure *failure);

/* The same without the GIL (the plan has no opaque node), taken at signal checks. */
int eagle_replay_serial_nogil(eagle_plan *plan, eagle_thread_state *me, int64_t r0, int64_t r1,
                              int measure, eagle_failure *failure);

#ifdef __cplusplus
}
#endif

#endif
