/* The kernels a scenario written once runs on either cuda backend (tests/helpers/backends.py):
 * compiled by CuPy's NVRTC on a GPU, and by the CUDA C emulator (tests/doubles/cuda_emulation.h)
 * for the driver stand-in. `n` is the logical size by value (SIZE), `size` the device's
 * logical size (SIZE_PTR: what a compaction set for this replay). */
typedef long long i64;

/* x[i] += v for i < n */
extern "C" __global__ void b_add(double *x, double v, i64 n) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}

/* one thread: k[0] -= 1 */
extern "C" __global__ void b_dec(i64 *k, i64 n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) k[0] -= 1;
}

/* a live sample i < *size moves by 1 + life / 2 and ages; it finishes when its life runs out */
extern "C" __global__ void b_life_step(unsigned char *alive, i64 *life, double *x, const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= *size || !alive[i]) return;
    x[i] += 1.0 + 0.5 * (double)life[i];
    if (--life[i] <= 0) alive[i] = 0;
}

/* t[i] += 1 for i < *size: counts the replays whose size exceeded i */
extern "C" __global__ void b_touch(double *t, const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *size) t[i] += 1.0;
}
