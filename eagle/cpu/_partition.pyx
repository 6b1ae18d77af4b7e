"""The team kernel behind compaction and reorder: a stable, parallel counting sort.

Samples [0, size) are sorted stably into buckets by a key: for compaction the
key is "dead" (0 for a live sample, 1 for a finished one), for reorder an
integer key in [0, n_keys). Every state array (the key array and the id map
among them) is permuted the same way, through a scratch copy.

The range is cut into a fixed number of chunks (independent of the team
size, so results never depend on the thread count); each thread owns a
contiguous run of chunks. Its phases, with the team's barriers between them:

0. thread 0 takes the policy decision (compact on this replay or not);
1. each thread counts its chunks' keys per bucket;
2. each thread computes where its chunks' samples go (an exclusive prefix sum
   over buckets, then chunks): a reorder each sample's destination, a
   compaction only where each chunk's live and finished samples start;
3, 4. for each permuted array in turn: each thread copies its chunks' samples
   to their places in the scratch, then (after a barrier) its slice of the
   scratch back into the array;
last: thread 0 writes the live count and the next logical size.

A compaction reads its destinations off the alive flags as it copies (two
cursors a chunk): no array of destinations is written, nor read once per
array moved. So the flags move last, after the state; bool flags are not
moved but written (true for the live count, false behind: what the move
would give), a pass less over them.

One scratch serves every array in turn (as wide as the widest sample), and it
and a reorder's destinations are allocated, not touched, when the node is made:
the node's memory is that of one array and its build costs no pass over it (the
first compaction touches the pages, spread over the team).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t
from libc.string cimport memcpy, memset

import numpy as np

from eagle.native cimport Kernel, wrap_team_kernel

cdef extern from "compact_scatter.h":
    int64_t eagle_compact_rows8(int64_t *dst, const int64_t *src, const unsigned char *flags,
                                int64_t *live_at, int64_t *dead_at, int64_t lo, int64_t hi) nogil

DEF COMPACT = 0
DEF REORDER = 1


cdef struct partition_state:
    int mode
    int32_t key_kind          # reorder: 0 for int32 keys, 1 for int64 keys
    bint key_bool             # compaction: the flags are bool (written, not moved)
    int64_t n_keys            # buckets
    int64_t n_chunks
    int64_t n_arrays          # arrays permuted: data[0] (the key) .. data[n_arrays - 1]
    int64_t *row_bytes        # bytes of one sample of each permuted array
    char *scratch             # capacity samples of the widest permuted array, one array at a time
    int64_t *counts           # per chunk and bucket (n_keys + 1 of them): samples counted in phase 1
    int64_t *cursor           # per chunk and bucket: where the next sample goes (phase 2)
    int64_t *dest             # per sample: its position after a reorder (phase 2)
    int64_t every             # act on every k-th replay ...
    double min_dead_fraction  # ... (compaction) and only once this fraction has finished
    int64_t replay
    bint due                  # phase 0's decision: this replay is one of every k-th
    int64_t next_size         # the plan's size source (compaction)
    int64_t *count_out        # where the live count goes (compaction), or NULL
    bint invalid_keys         # a reorder key was outside [0, n_keys): nothing was moved


cdef inline int64_t key_of(partition_state *st, char *key, int64_t stride, int64_t i) noexcept nogil:
    if st.mode == COMPACT:
        return 0 if (<uint8_t *>(key + i * stride))[0] else 1
    cdef int64_t k
    if st.key_kind == 0:
        k = (<int32_t *>(key + i * stride))[0]
    else:
        k = (<int64_t *>(key + i * stride))[0]
    # an out-of-range key lands in the extra bucket n_keys, which stops the reorder
    return k if 0 <= k < st.n_keys else st.n_keys


cdef inline void copy_row(char *dst, char *src, int64_t n) noexcept nogil:
    if n == 8:
        (<int64_t *>dst)[0] = (<int64_t *>src)[0]
    elif n == 1:
        dst[0] = src[0]
    else:
        memcpy(dst, src, n)


cdef void scatter(char *dst, char *src, int64_t stride, int64_t row, const int64_t *dest,
                  int64_t lo, int64_t hi) noexcept nogil:
    """dst row dest[i] = src row i, for i in [lo, hi)."""
    cdef int64_t i
    if row == 8:
        for i in range(lo, hi):
            (<int64_t *>(dst + dest[i] * 8))[0] = (<int64_t *>(src + i * stride))[0]
    elif row == 4:
        for i in range(lo, hi):
            (<int32_t *>(dst + dest[i] * 4))[0] = (<int32_t *>(src + i * stride))[0]
    elif row == 1:
        for i in range(lo, hi):
            dst[dest[i]] = src[i * stride]
    else:
        for i in range(lo, hi):
            memcpy(dst + dest[i] * row, src + i * stride, row)


cdef void scatter_by_flags(char *dst, char *src, int64_t stride, int64_t row, const char *flags,
                           int64_t fstride, int64_t live_at, int64_t dead_at, int64_t lo,
                           int64_t hi) noexcept nogil:
    """A compaction's copy of src rows [lo, hi) into dst: a live row (flag set) to the next
    of live_at, a finished one to the next of dead_at (without a branch: a random flag
    would mispredict every other one)."""
    cdef int64_t i, v, pos
    if row == 8 and stride == 8 and fstride == 1:
        # eight rows a step where the CPU has AVX-512 (csrc/cpu/compact_scatter.h)
        lo += eagle_compact_rows8(<int64_t *>dst, <const int64_t *>src, <const unsigned char *>flags,
                                  &live_at, &dead_at, lo, hi)
    if row == 8:
        for i in range(lo, hi):
            v = flags[i * fstride] != 0
            pos = dead_at + v * (live_at - dead_at)
            (<int64_t *>(dst + pos * 8))[0] = (<int64_t *>(src + i * stride))[0]
            live_at += v
            dead_at += 1 - v
    elif row == 4:
        for i in range(lo, hi):
            v = flags[i * fstride] != 0
            pos = dead_at + v * (live_at - dead_at)
            (<int32_t *>(dst + pos * 4))[0] = (<int32_t *>(src + i * stride))[0]
            live_at += v
            dead_at += 1 - v
    elif row == 1:
        for i in range(lo, hi):
            v = flags[i * fstride] != 0
            pos = dead_at + v * (live_at - dead_at)
            dst[pos] = src[i * stride]
            live_at += v
            dead_at += 1 - v
    else:
        for i in range(lo, hi):
            v = flags[i * fstride] != 0
            pos = dead_at + v * (live_at - dead_at)
            memcpy(dst + pos * row, src + i * stride, row)
            live_at += v
            dead_at += 1 - v


cdef inline int64_t live_count(partition_state *st) noexcept nogil:
    cdef int64_t c, live = 0
    for c in range(st.n_chunks):
        live += st.counts[c * (st.n_keys + 1)]
    return live


cdef inline int64_t invalid_count(partition_state *st) noexcept nogil:
    cdef int64_t c, bad = 0
    for c in range(st.n_chunks):
        bad += st.counts[c * (st.n_keys + 1) + st.n_keys]
    return bad


cdef inline bint acts(partition_state *st, int64_t size) noexcept nogil:
    """Whether this replay moves samples; every thread reaches the same answer."""
    if not st.due or size == 0:
        return False
    if st.mode == REORDER:
        if invalid_count(st):
            st.invalid_keys = True   # every thread writes the same value
            return False
        return True
    cdef int64_t live = live_count(st)
    if live == size:
        return False        # nothing finished: the permutation would be the identity
    return live == 0 or (size - live) >= st.min_dead_fraction * size


cdef void partition_phase(int32_t phase, int32_t thread, int32_t n_threads, int64_t size,
                          char **data, const int64_t *strides, void *user_data) noexcept nogil:
    cdef partition_state *st = <partition_state *>user_data
    cdef int64_t C = st.n_chunks, K = st.n_keys, KB = st.n_keys + 1
    cdef int64_t c0 = C * thread // n_threads, c1 = C * (thread + 1) // n_threads
    cdef int64_t c, k, i, a, lo, hi, pos, v, base, before, total, run
    cdef int64_t *cnt
    if phase == 0:
        if thread == 0:
            st.replay += 1
            st.due = st.replay % st.every == 0
        return
    cdef uint8_t *flags
    cdef int64_t live
    if phase == 1:
        for c in range(c0, c1):
            cnt = st.counts + c * KB
            for k in range(KB):
                cnt[k] = 0
            lo, hi = size * c // C, size * (c + 1) // C
            if st.mode == COMPACT and strides[0] == 1:
                # the common case, a plain count of nonzero bytes the compiler vectorizes
                flags = <uint8_t *>data[0]
                live = 0
                for i in range(lo, hi):
                    live += flags[i] != 0
                cnt[0], cnt[1] = live, (hi - lo) - live
                continue
            for i in range(lo, hi):
                cnt[key_of(st, data[0], strides[0], i)] += 1
        return
    if phase == 2:
        if not acts(st, size):
            return
        # where (bucket k, chunk c) starts: all of the smaller buckets, then
        # bucket k of the chunks before c
        base = 0
        for k in range(K):
            before = 0
            total = 0
            for c in range(C):
                v = st.counts[c * KB + k]
                if c < c0:
                    before += v
                total += v
            run = base + before
            for c in range(c0, c1):
                st.cursor[c * KB + k] = run
                run += st.counts[c * KB + k]
            base += total
        if st.mode == COMPACT:
            return          # the copies read the flags (scatter_by_flags)
        for c in range(c0, c1):
            cnt = st.cursor + c * KB
            lo, hi = size * c // C, size * (c + 1) // C
            for i in range(lo, hi):
                k = key_of(st, data[0], strides[0], i)
                st.dest[i] = cnt[k]
                cnt[k] += 1
        return
    cdef bint moved
    if phase < 3 + 2 * st.n_arrays:
        if not acts(st, size):
            return
        a = (phase - 3) // 2
        if st.mode == COMPACT:
            a = a + 1 if a + 1 < st.n_arrays else 0     # the flags (data[0]) last
        if st.mode == COMPACT and a == 0 and st.key_bool and strides[0] == 1:
            # no other phase reads the flags now: this thread's slice, written
            if (phase - 3) % 2 == 0:
                lo, hi = size * thread // n_threads, size * (thread + 1) // n_threads
                live = live_count(st)
                if lo < live:
                    memset(data[0] + lo, 1, (live if live < hi else hi) - lo)
                if hi > live:
                    memset(data[0] + (live if live > lo else lo), 0, hi - (live if live > lo else lo))
            return
        if (phase - 3) % 2 == 0:
            # array a into the scratch: this thread's chunks, one source streamed
            if st.mode == COMPACT:
                for c in range(c0, c1):
                    lo, hi = size * c // C, size * (c + 1) // C
                    scatter_by_flags(st.scratch, data[a], strides[a], st.row_bytes[a], data[0], strides[0],
                                     st.cursor[c * KB], st.cursor[c * KB + 1], lo, hi)
                return
            lo, hi = size * c0 // C, size * c1 // C
            scatter(st.scratch, data[a], strides[a], st.row_bytes[a], st.dest, lo, hi)
            return
        lo, hi = size * thread // n_threads, size * (thread + 1) // n_threads
        if strides[a] == st.row_bytes[a]:
            memcpy(data[a] + lo * strides[a], st.scratch + lo * st.row_bytes[a],
                   (hi - lo) * st.row_bytes[a])
        else:
            for i in range(lo, hi):
                copy_row(data[a] + i * strides[a], st.scratch + i * st.row_bytes[a], st.row_bytes[a])
        return
    # the last phase
    moved = acts(st, size)
    if thread == 0 and st.mode == COMPACT:
        c = live_count(st) if size > 0 else 0
        st.count_out[0] = c
        st.next_size = c if moved or c == 0 else size


cdef class Partition:
    """Owns a partition kernel's state and scratch; ``kernel`` is the eagle Kernel."""
    cdef partition_state st
    cdef object buffers           # numpy arrays behind row_bytes, scratch pointers, counts
    cdef readonly Kernel kernel

    def __init__(self, str mode, key, arrays, int64_t capacity, int64_t n_keys,
                 int64_t every, double min_dead_fraction, count_out, int64_t n_chunks):
        self.st.mode = COMPACT if mode == "compact" else REORDER
        self.st.key_kind = 1 if key.dtype.itemsize == 8 else 0
        self.st.key_bool = key.dtype == np.bool_
        self.st.n_keys = n_keys
        self.st.n_chunks = n_chunks
        self.st.n_arrays = len(arrays)
        self.st.every = every
        self.st.min_dead_fraction = min_dead_fraction
        self.st.next_size = capacity
        row_bytes = np.array([a.dtype.itemsize * int(np.prod(a.shape[1:])) for a in arrays], dtype=np.int64)
        # allocated, not touched (np.empty): the first compaction touches the pages
        scratch = np.empty(max(capacity * int(row_bytes.max(initial=0)), 1), dtype=np.uint8)
        counts = np.zeros(n_chunks * (n_keys + 1), dtype=np.int64)
        cursor = np.zeros(n_chunks * (n_keys + 1), dtype=np.int64)
        dest = np.empty(max(capacity, 1) if self.st.mode == REORDER else 1, dtype=np.int64)
        self.buffers = (row_bytes, scratch, counts, cursor, dest, count_out)
        self.st.dest = <int64_t *><uintptr_t>dest.ctypes.data
        self.st.row_bytes = <int64_t *><uintptr_t>row_bytes.ctypes.data
        self.st.scratch = <char *><uintptr_t>scratch.ctypes.data
        self.st.counts = <int64_t *><uintptr_t>counts.ctypes.data
        self.st.cursor = <int64_t *><uintptr_t>cursor.ctypes.data
        self.st.count_out = <int64_t *><uintptr_t>count_out.ctypes.data if count_out is not None else NULL
        self.kernel = wrap_team_kernel(partition_phase, 4 + 2 * len(arrays), mode, &self.st, self)

    @property
    def size_source_address(self):
        """Address of the next logical size this kernel computes (compaction)."""
        return <uintptr_t>&self.st.next_size

    @property
    def scratch_bytes(self):
        """Bytes the node allocates beside the arrays it moves: one scratch as wide as the
        widest sample, a reorder's destinations (8 bytes a sample), and the per-chunk counts."""
        return sum(b.nbytes for b in self.buffers[1:5])

    @property
    def replays_seen(self):
        return self.st.replay

    def restart(self):
        """As made: no replay seen (``every`` counts from 0), no invalid key met."""
        self.st.replay = 0
        self.st.due = False
        self.st.invalid_keys = False

    def take_invalid_keys(self):
        """Whether a reorder met a key outside [0, n_keys) since the last call."""
        bad = self.st.invalid_keys
        self.st.invalid_keys = False
        return bool(bad)
