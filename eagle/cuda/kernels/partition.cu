/* eagle's compaction / reorder kernels and the run-until-done condition kernel.
 *
 * Compiled by CuPy (cupy.RawModule, NVRTC) on a GPU, and on the CPU by the
 * test emulator (tests/doubles/cuda_emulation.h: a fiber per CUDA thread
 * of a block, a barrier for __syncthreads), so the same source is
 * checked without a GPU. Every parameter is 8 bytes (pointer, long long,
 * double). g is a graph's device block: [0] logical size, [1] next size,
 * [2] replays that started with live samples, [3] bad reorder keys, [4] the
 * value of [2] at which launch_until_done stops (until_done.cu).
 */
typedef long long i64;

__device__ __forceinline__ i64 eagle_key(const char *key, i64 stride, i64 kind, i64 n_keys, i64 i) {
    if (kind == 0) return key[i * stride] ? 0 : 1;
    i64 k = kind == 1 ? (i64)*(const int *)(key + i * stride) : *(const i64 *)(key + i * stride);
    return (k >= 0 && k < n_keys) ? k : n_keys;
}

__device__ __forceinline__ void eagle_copy_row(char *dst, const char *src, i64 nb) {
    unsigned long long a = (unsigned long long)dst | (unsigned long long)src | (unsigned long long)nb;
    if ((a & 7) == 0) {
        for (i64 j = 0; j < nb / 8; ++j) ((i64 *)dst)[j] = ((const i64 *)src)[j];
    } else if ((a & 3) == 0) {
        for (i64 j = 0; j < nb / 4; ++j) ((int *)dst)[j] = ((const int *)src)[j];
    } else {
        for (i64 j = 0; j < nb; ++j) dst[j] = src[j];
    }
}

extern "C" __global__ void eagle_part_count(const char *key, i64 stride, i64 kind, i64 n_keys,
                                            i64 chunk, i64 c_cap, i64 *counts, const i64 *size) {
    i64 c = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    i64 n = *size;
    i64 used = (n + chunk - 1) / chunk;
    if (c >= used) return;
    for (i64 k = 0; k <= n_keys; ++k) counts[k * c_cap + c] = 0;
    i64 lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    for (i64 i = lo; i < hi; ++i) counts[eagle_key(key, stride, kind, n_keys, i) * c_cap + c] += 1;
}

/* one block of a power-of-two size <= 1024 */
extern "C" __global__ void eagle_part_scan(i64 *counts, i64 n_keys, i64 c_cap, i64 chunk,
                                           const i64 *size, i64 *g, i64 *st, i64 *count_out,
                                           i64 kind, i64 every, double frac) {
    __shared__ i64 sh[1024];
    __shared__ i64 carry;
    i64 n = *size;
    i64 used = (n + chunk - 1) / chunk;
    i64 total = (n_keys + 1) * used;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (i64 base = 0; base < total; base += blockDim.x) {
        i64 j = base + threadIdx.x;
        i64 e = j < total ? (j / used) * c_cap + (j % used) : 0;
        i64 v = j < total ? counts[e] : 0;
        sh[threadIdx.x] = v;
        __syncthreads();
        for (unsigned off = 1; off < blockDim.x; off <<= 1) {
            i64 t = threadIdx.x >= off ? sh[threadIdx.x - off] : 0;
            __syncthreads();
            sh[threadIdx.x] += t;
            __syncthreads();
        }
        if (j < total) counts[e] = carry + sh[threadIdx.x] - v;
        __syncthreads();
        if (threadIdx.x == blockDim.x - 1) carry += sh[threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    i64 r = st[0] + 1, acts = 0;
    st[0] = r;
    int due = every > 0 && r % every == 0;
    if (kind == 0) {
        i64 live = used ? counts[c_cap] : 0;
        if (due && n > 0 && live != n) acts = live == 0 || (double)(n - live) >= frac * (double)n;
        if (count_out) *count_out = live;
        g[1] = (acts || live == 0) ? live : n;
    } else {
        i64 bad = used ? carry - counts[n_keys * c_cap] : 0;
        if (due && n > 0) {
            if (bad) g[3] = 1;
            else acts = 1;
        }
    }
    st[1] = acts;
}

extern "C" __global__ void eagle_part_scatter(const char *key, i64 stride, i64 kind, i64 n_keys,
                                              i64 chunk, i64 c_cap, i64 *counts, const i64 *size,
                                              const i64 *st, const i64 *table, i64 n_arrays) {
    if (!st[1]) return;
    i64 c = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    i64 n = *size;
    i64 used = (n + chunk - 1) / chunk;
    if (c >= used) return;
    i64 lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    for (i64 i = lo; i < hi; ++i) {
        i64 pos = counts[eagle_key(key, stride, kind, n_keys, i) * c_cap + c]++;
        for (i64 a = 0; a < n_arrays; ++a) {
            const i64 *d = table + 4 * a;
            eagle_copy_row((char *)d[1] + pos * d[2], (const char *)d[0] + i * d[3], d[2]);
        }
    }
}

extern "C" __global__ void eagle_part_copyback(const i64 *size, const i64 *st, const i64 *table,
                                               i64 n_arrays) {
    if (!st[1]) return;
    i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i >= *size) return;
    for (i64 a = 0; a < n_arrays; ++a) {
        const i64 *d = table + 4 * a;
        eagle_copy_row((char *)d[0] + i * d[3], (const char *)d[1] + i * d[2], d[2]);
    }
}

/* The replay's last node: the next size becomes the size. Afterwards g[1] == g[0] (and
 * set_logical_size writes both), so a replay whose compaction did not run (it sits in a
 * control-flow body the replay skipped) commits the size it ran at. */
extern "C" __global__ void eagle_commit(i64 *g) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        g[2] += g[0] > 0;
        g[0] = g[1];
    }
}

