/* The condition kernel of eagle's control-flow nodes on CUDA (eagle/cuda/control.py):
 * while_loop and if_else become conditional nodes (CUDA 12.4+ drivers) whose handles
 * this one-thread kernel sets from the condition array, read on the device. Like
 * until_done.cu it calls cudaGraphSetConditional, so it is a module of its own (a
 * driver without conditional nodes still loads the others).
 *
 * cond: the condition's one element, `width` bytes (1, 2, 4 or 8; nonzero is true).
 * state: a WHILE loop's four int64: iterations run in this visit of the node, the
 *   iteration-limit flag the backend reads after a launch, whether the stop flag ended
 *   the loop, and the iterations that visit had run when it did (kept from the first
 *   stop: the replays drained after it see the flag before their first iteration).
 * stop: eagle's stop flag (an int in host-mapped pinned memory the host sets on Ctrl-C,
 *   read volatile: the host writes it while this graph runs), or NULL (an IF).
 * mode 0 (before the node): handle = cond, handle2 (if nonzero) = !cond (the IF node
 *   of `otherwise`: one read decides both branches), state[0] = 0; with the stop flag
 *   set a loop runs no iteration.
 * mode 1 (a WHILE body's last node): state[0] += 1; handle = cond, except when the
 *   loop ran |limit| iterations (limit != 0) with cond still true: handle = 0 and,
 *   limit > 0, state[1] = 1 (the launch then raises, naming the node; limit < 0:
 *   on_max="stop", the loop just ends), or when the stop flag is set: handle = 0 (the
 *   loop ends here; the launch raises KeyboardInterrupt). state[0] is left at the
 *   iterations of the last visit (g.iterations reads it after a launch).
 */
typedef long long i64;

#ifndef EAGLE_EMULATION
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
#endif

extern "C" __global__ void eagle_control_condition(unsigned long long handle,
                                                   unsigned long long handle2, const void *cond,
                                                   i64 width, i64 *state, i64 limit, i64 mode,
                                                   const volatile int *stop) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned char *c = (const unsigned char *)cond;
    int v;
    if (width == 1) v = *c != 0;
    else if (width == 2) v = *(const unsigned short *)c != 0;
    else if (width == 4) v = *(const unsigned int *)c != 0;
    else v = *(const unsigned long long *)c != 0;
    int stopped = stop && *stop;
    if (stopped && state) {
        if (!state[2]) state[3] = mode == 0 ? 0 : state[0] + 1;
        state[2] = 1;
        v = 0;
    }
    if (mode == 0) {
        if (state) state[0] = 0;
        cudaGraphSetConditional(handle, v ? 1u : 0u);
        if (handle2) cudaGraphSetConditional(handle2, v ? 0u : 1u);
        return;
    }
    if (stopped) {
        cudaGraphSetConditional(handle, 0u);
        return;
    }
    i64 ran = state ? ++state[0] : 0;
    if (v && limit != 0 && ran >= (limit < 0 ? -limit : limit)) {
        if (limit > 0)
            state[1] = 1;
        v = 0;
    }
    cudaGraphSetConditional(handle, v ? 1u : 0u);
}
