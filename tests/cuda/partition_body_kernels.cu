/* Test kernels of the compaction / reorder cases inside control-flow bodies in
 * tests/cuda/test_control_standin.py (compiled by the CUDA C emulator,
 * tests/doubles/cuda_emulation.h, and loaded into the driver stand-in). `size` is the
 * graph's device logical size (SIZE_PTR): the replay's size, which a compaction in a
 * body changes only for the next replay. */
typedef long long i64;

/* one thread per sample i < *size: a live sample ages by one and moves by 0.5, and
 * finishes once its age reaches life[ids[i]] */
extern "C" __global__ void t_absorb(unsigned char *alive, i64 *age, double *x, const i64 *ids,
                                    const i64 *life, const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= *size || !alive[i]) return;
    age[i] += 1;
    x[i] += 0.5;
    if (age[i] >= life[ids[i]]) alive[i] = 0;
}

/* one thread: it = reset ? 0 : it + 1; more = it < limit and (alive NULL or a sample of
 * [0, *size) live); odd (if not NULL) = it is odd; log[1 + log[0]++] = *size */
extern "C" __global__ void t_tick(i64 *it, unsigned char *more, unsigned char *odd, i64 limit,
                                  const unsigned char *alive, i64 *log, i64 reset,
                                  const i64 *size) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    i64 n = *size;
    it[0] = reset ? 0 : it[0] + 1;
    int any = alive == 0;
    for (i64 i = 0; i < n && !any; ++i) any = alive[i] != 0;
    more[0] = it[0] < limit && any;
    if (odd) odd[0] = it[0] % 2 == 1;
    log[1 + log[0]] = n;
    log[0] += 1;
}

/* one thread per sample i < *size: x += v where alive (alive NULL: every sample) */
extern "C" __global__ void t_add_where(double *x, const unsigned char *alive, double v,
                                       const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *size && (alive == 0 || alive[i])) x[i] += v;
}

/* one thread per sample i < *size: x *= v */
extern "C" __global__ void t_scale_all(double *x, double v, const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *size) x[i] *= v;
}

/* one thread per sample i < *size: key = (key + 1) % m */
extern "C" __global__ void t_next_key(i64 *key, i64 m, const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *size) key[i] = (key[i] + 1) % m;
}

/* one thread per sample i < *size: alive = 0 */
extern "C" __global__ void t_kill_all(unsigned char *alive, const i64 *size) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < *size) alive[i] = 0;
}
