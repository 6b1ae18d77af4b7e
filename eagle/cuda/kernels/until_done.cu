/* The condition kernel of launch_until_done's conditional WHILE node (CUDA 12.4+
 * drivers). It calls cudaGraphSetConditional, an external function the driver
 * resolves when it loads the module (it is not in libcudadevrt: the cubin keeps
 * it undefined, like vprintf), so this file is a module of its own: a driver
 * without conditional nodes still loads partition.cu. The CPU emulator of the
 * tests compiles it too.
 * g is the graph's device block (see partition.cu): continue while samples are
 * live (g[0] > 0) and fewer than the allowed replays ran (g[2] < g[4]), and eagle's
 * stop flag (host-mapped memory the host sets on Ctrl-C; NULL: none) is clear.
 */
typedef long long i64;

#ifndef EAGLE_EMULATION
/* the device runtime's (cuda_device_runtime_api.h), declared here for NVRTC */
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);
#endif

/* The body's last node of a launch_until_done WHILE node: continue while
 * samples are live and fewer than the allowed replays ran. One thread. */
extern "C" __global__ void eagle_until_done_condition(unsigned long long handle, const i64 *g,
                                                      const volatile int *stop) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        cudaGraphSetConditional(handle, (g[0] > 0 && g[2] < g[4] && !(stop && *stop)) ? 1u : 0u);
}
