"""A NumPy ufunc's own compiled inner loop, called as an eagle native kernel.

At record time ``resolve_loop`` asks NumPy which loop it would run for the
operands' dtypes under ``casting='same_kind'`` (the ArrayMethod API NumPy
exposes as ``ufunc._resolve_dtypes_and_context`` / ``ufunc._get_strided_loop``,
NumPy >= 1.24) and refuses loops that need the GIL. ``UfuncLoop`` then holds
that loop, the operands' layout and the node's constants; its kernel runs the
loop over samples [start, stop) without the GIL, as any split native node.

Errors a loop reports (NumPy's integer power of a negative exponent raises
``ValueError``) are kept by the ``UfuncLoop`` and raised by the launch when the
executor has finished (``take_error``); the replays of that launch run on.

Floating-point status: the inner loop may raise floating-point flags (a
division by zero, an overflow); eagle does not read them and does not consult
``np.errstate``, so a ufunc node behaves like NumPy under
``np.errstate(all="ignore")``: the results are NumPy's, no warning is given.
"""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from cpython.exc cimport PyErr_Occurred
from cpython.ref cimport PyObject, Py_INCREF
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy
from libc.stdlib cimport calloc, free

cimport numpy as cnp

from eagle.native cimport Kernel, wrap_kernel
from eagle.record.memory import data_pointer

import numpy as np

cnp.import_array()

ctypedef Py_ssize_t npy_intp

cdef extern from "Python.h":
    ctypedef struct PyThreadState:
        pass
    PyThreadState *PyGILState_GetThisThreadState() nogil
    ctypedef int PyGILState_STATE
    PyGILState_STATE PyGILState_Ensure() nogil
    PyThreadState *PyEval_SaveThread() nogil
    void PyErr_Fetch(PyObject **t, PyObject **v, PyObject **tb)
    void PyErr_NormalizeException(PyObject **t, PyObject **v, PyObject **tb)
    int PyException_SetTraceback(PyObject *ex, PyObject *tb)
    void Py_XDECREF(PyObject *o)
    void PyErr_Clear()

cdef extern from *:
    """
    /* Whether the thread state has an exception set: read by its own thread without
     * the GIL (no other thread writes it). NumPy's loops report some errors (integer
     * power of a negative exponent) by setting one and returning 0. */
    static inline int eagle_error_pending(PyThreadState *ts)
    {
    #if PY_VERSION_HEX >= 0x030C0000
        return ts != NULL && ts->current_exception != NULL;
    #else
        return ts != NULL && ts->curexc_type != NULL;
    #endif
    }
    """
    int eagle_error_pending(PyThreadState *ts) nogil

cdef extern from *:
    """
    #include <pthread.h>
    /* An OpenMP worker's Python thread state, made by _thread_state, is released when the
     * worker thread ends: libgomp ends the workers of a team whose launching thread has
     * ended, and a state left behind would stay in the interpreter's list for good (one
     * per worker that ever ran a ufunc loop). The key's destructor runs on the ending
     * thread, which takes the GIL back with its state, clears and deletes it (what
     * PyGILState_Release does for the PyGILState_Ensure that made it). At
     * interpreter exit the interpreter frees every state itself: nothing is done then. */
    static pthread_key_t eagle_worker_state_key;
    static int eagle_worker_state_key_made = 0;

    static void eagle_worker_state_drop(void *p)
    {
        if (p == NULL || !Py_IsInitialized())
            return;
    #if PY_VERSION_HEX >= 0x030D0000
        if (Py_IsFinalizing())
            return;
    #else
        if (_Py_IsFinalizing())
            return;
    #endif
        /* not PyGILState_Release: by now the thread's own keys may have been cleared
         * (glibc clears each before running the destructors), Python's among them */
        PyEval_RestoreThread((PyThreadState *)p);
        PyThreadState_Clear((PyThreadState *)p);
        PyThreadState_DeleteCurrent();
    }

    static int eagle_worker_state_init(void)
    {
        if (!eagle_worker_state_key_made &&
                pthread_key_create(&eagle_worker_state_key, eagle_worker_state_drop) == 0)
            eagle_worker_state_key_made = 1;
        return eagle_worker_state_key_made;
    }

    /* Make this thread's state released when the thread ends (see above). */
    static void eagle_worker_state_note(PyThreadState *ts)
    {
        if (eagle_worker_state_key_made)
            pthread_setspecific(eagle_worker_state_key, ts);
    }
    """
    int eagle_worker_state_init()
    void eagle_worker_state_note(PyThreadState *ts) nogil

eagle_worker_state_init()

cdef enum:
    MAX_ARGS = 32
    MAX_CORE = 32
    # outer dimensions of a per-sample row (its innermost one is the loop's)
    MAX_OUTER = 32
    # elements per buffer of a cast operand (NumPy's own default buffer size)
    CAST_BUFFER = 8192
    # bytes of a masked loop's scratch (see _masked_run), on the stack: the outputs of
    # one block of at most MASK_BLOCK elements. 512 elements: a block's operands and its
    # scratch keep in L1; measured (1e6 doubles, one thread, random half, Zen 4): exp
    # 1.37-1.39x its unmasked node at 512 against 1.65-1.93x at 2048. Asking for the next
    # block's lines ahead (software prefetch) was tried and dropped: with the mask's
    # counts by AVX-512 it made exp 1.38-1.59x against 1.22-1.34x without it (the burst of
    # prefetches stalled the core before each block's loop)
    MASK_SCRATCH = 16384
    MASK_SCRATCH_LD = 1024   # MASK_SCRATCH in long doubles (16-byte aligned for any loop)
    MASK_BLOCK = 512
    # bytes of the widest element a loop writes (clongdouble)
    MAX_ITEM = 32
    # a block calls the loop once per run of set elements where the elements it skips
    # (and half the block: the copy-out's cost) outweigh RUNS_CALL elements a run (a
    # loop call costs about that many elements of a cheap loop); otherwise the loop
    # runs over the whole block into the scratch and the set elements are copied out
    RUNS_CALL = 128

# NumPy's iterator, for the nodes that cast or take where=: the calls a kernel makes
# without the GIL (they take errmsg, so they set no Python error; NumPy's own ufunc
# calls iterate so without the GIL)
cdef extern from "numpy/arrayobject.h":
    ctypedef struct NpyIter:
        pass
    int iter_reset_range "NpyIter_ResetToIterIndexRange"(NpyIter *it, npy_intp istart, npy_intp iend,
                                                        char **errmsg) noexcept nogil
    cnp.PyArrayObject **iter_operand_array "NpyIter_GetOperandArray"(NpyIter *it)
    char **iter_data_ptrs "NpyIter_GetDataPtrArray"(NpyIter *it) noexcept nogil
    npy_intp *iter_strides "NpyIter_GetInnerStrideArray"(NpyIter *it) noexcept nogil
    npy_intp *iter_size_ptr "NpyIter_GetInnerLoopSizePtr"(NpyIter *it) noexcept nogil
    void *iter_next_fn "(void *)NpyIter_GetIterNext"(NpyIter *it, char **errmsg)
    int iter_free "NpyIter_Deallocate"(NpyIter *it)
    NpyIter *iter_new "NpyIter_AdvancedNew"(npy_intp nop, cnp.PyArrayObject **op, cnp.npy_uint32 flags,
                                            cnp.NPY_ORDER order, cnp.NPY_CASTING casting,
                                            cnp.npy_uint32 *op_flags, cnp.PyArray_Descr **op_dtypes,
                                            int oa_ndim, int **op_axes, npy_intp *itershape,
                                            npy_intp buffersize) except NULL
    # the same, for a thread's own iterator (made in _take_iter, which reports a failure itself)
    NpyIter *iter_new_for_thread "NpyIter_AdvancedNew"(npy_intp nop, cnp.PyArrayObject **op,
                                                       cnp.npy_uint32 flags, cnp.NPY_ORDER order,
                                                       cnp.NPY_CASTING casting, cnp.npy_uint32 *op_flags,
                                                       cnp.PyArray_Descr **op_dtypes, int oa_ndim,
                                                       int **op_axes, npy_intp *itershape,
                                                       npy_intp buffersize)

ctypedef int (*iternext_t)(NpyIter *it) noexcept nogil

cdef extern from *:
    """
    static inline int eagle_slot_take(int *busy)
    {
        int idle = 0;
        return __atomic_compare_exchange_n(busy, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    }
    static inline void eagle_slot_give(int *busy) { __atomic_store_n(busy, 0, __ATOMIC_RELEASE); }
    static inline int eagle_load_count(int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void eagle_store_count(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline void eagle_add_long(long *p, long v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
    static inline long eagle_load_long(long *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
    """
    int eagle_slot_take(int *busy) nogil
    void eagle_slot_give(int *busy) nogil
    int eagle_load_count(int *p) nogil
    void eagle_store_count(int *p, int v) nogil
    void eagle_add_long(long *p, long v) nogil
    long eagle_load_long(long *p) nogil

# NumPy's PyArrayMethod_StridedLoop
ctypedef int (*strided_loop_t)(void *context, char *const *data, const npy_intp *dimensions,
                               const npy_intp *strides, void *auxdata) noexcept nogil

# The capsule "numpy_1.24_ufunc_call_info" (see the docstring of ufunc._get_strided_loop).
cdef struct call_info:
    strided_loop_t strided_loop
    void *context
    void *auxdata
    unsigned char requires_pyapi
    unsigned char no_floatingpoint_errors

# a C string (a Python bytes global would be a value other code may rebind; Cython warns)
cdef const char *CALL_INFO_NAME = b"numpy_1.24_ufunc_call_info"


# One NumPy iterator over a node's operands (inputs, outputs, then the mask), used by one
# kernel call at a time: it casts operands to and from the loop's dtypes through its own
# buffers (CAST_BUFFER elements each), and writes an output back only where the mask is set.
cdef struct iter_slot:
    NpyIter *it
    iternext_t next
    char **ptrs
    npy_intp *strides
    npy_intp *size
    # the operands' memory the iterator runs over (the executor's data[] must match)
    char *base[MAX_ARGS + 1]
    int busy


cdef struct layout:
    strided_loop_t loop
    void *context
    void *auxdata
    int nargs
    # 0: one loop call for the whole range; 1: one call per sample (rows not packed)
    int per_sample
    # elements per sample handed to the loop (1 for 1-d operands and for gufuncs)
    npy_intp row_len
    # slot[k]: which of the kernel's data[] operand k is, or -1 for a constant
    int slot[MAX_ARGS]
    char *fixed[MAX_ARGS]
    npy_intp sample_stride[MAX_ARGS]
    # stride of the loop's dimension 0, per operand
    npy_intp step[MAX_ARGS]
    # a gufunc's core dimensions and the core strides, operand after operand
    int n_core
    npy_intp core_dims[MAX_CORE]
    int n_core_steps
    npy_intp core_steps[MAX_ARGS * MAX_CORE]
    # per_sample rows of any strides: the loop runs over the row's innermost dimension
    # (inner_len elements, step[k] apart), once for each index of its n_outer outer
    # dimensions (outer_dims[d] long, outer_strides[k * MAX_OUTER + d] bytes apart)
    npy_intp inner_len
    # the loop runs each call's elements from the last to the first, step[k] (positive)
    # apart: every operand stepped backwards (<= 0, one < 0), which NumPy's iterator turns
    # around (a float64 exp or log loop takes another code path for a negative step)
    int backwards
    int n_outer
    npy_intp outer_dims[MAX_OUTER]
    npy_intp outer_strides[MAX_ARGS * MAX_OUTER]
    long failures
    # the first error the loop reported since it was last taken (owned), or NULL
    PyObject *error
    # a node that casts or takes where=: it runs through NumPy's iterator (see iter_slot),
    # one made per thread from the arguments `iter_template` was made with (never a copy:
    # NpyIter_Copy of a masked iterator leaves garbage for its free, see
    # docs/upstream/numpy_masked_transfer_clone.md); where_slot is the mask's data[] slot (-1 for
    # a mask that is always true), where_never a mask that is always false (nothing runs)
    int use_iter
    int nin
    int where_op
    int where_slot
    int where_never
    NpyIter *iter_template
    int iter_nop
    cnp.npy_uint32 iter_flags
    cnp.PyArrayObject *iter_ops[MAX_ARGS + 1]
    cnp.PyArray_Descr *iter_descrs[MAX_ARGS + 1]
    cnp.npy_uint32 iter_op_flags[MAX_ARGS + 1]
    # bytes of each output element in the loop's dtype (masked nodes), and the elements
    # of a block of the masked loop (its outputs fit MASK_SCRATCH)
    npy_intp out_item[MAX_ARGS]
    npy_intp mask_block
    # a masked node whose operands need no cast: it runs on the arrays without NumPy's
    # iterator, the mask read from data[where_slot] + start * mask_sample_stride, element
    # after element mask_step apart
    int mask_direct
    npy_intp mask_sample_stride
    npy_intp mask_step
    # a masked add, subtract, multiply or divide (eagle_masked_arith's op code): it runs
    # in one pass over chunks of the mask, not block by block through the loop
    int fused_op
    # blocks of the masked loop run whole and blended, and run by runs of set elements
    long blocks_blended
    long blocks_by_runs
    # chunks of a fused op skipped (all unset), computed whole (all set), selected
    # (scattered), computed run by run (few runs)
    long chunks_skipped
    long chunks_whole
    long chunks_mixed
    long chunks_runs
    iter_slot *iters
    int n_iters
    # room in iters: one per thread of the largest team eagle makes (eagle.max_threads())
    int max_iters


cdef PyThreadState *_thread_state() noexcept nogil:
    """This thread's Python state; an OpenMP worker that has none gets one that stays
    while the thread lives (so an error a loop sets on it is still there when the loop
    returns, and the next call finds it: no GIL taken per call), released when the
    thread ends (eagle_worker_state_drop)."""
    cdef PyThreadState *ts = PyGILState_GetThisThreadState()
    if ts == NULL:
        PyGILState_Ensure()
        ts = PyEval_SaveThread()
        eagle_worker_state_note(ts)
    return ts


cdef void _report_failure(layout *L) noexcept nogil:
    cdef PyObject *t = NULL
    cdef PyObject *v = NULL
    cdef PyObject *tb = NULL
    with gil:
        L.failures += 1
        if PyErr_Occurred():
            PyErr_Fetch(&t, &v, &tb)
            PyErr_NormalizeException(&t, &v, &tb)
            if tb != NULL and v != NULL:
                PyException_SetTraceback(v, tb)
            Py_XDECREF(t)
            Py_XDECREF(tb)
        else:
            fallback = RuntimeError("the inner loop reported an error without an exception")
            Py_INCREF(fallback)
            v = <PyObject *>fallback
        if L.error == NULL:
            L.error = v
        else:
            Py_XDECREF(v)


cdef void _keep_error(layout *L, object err) noexcept:
    """Count a failure and keep ``err`` if it is the first (the GIL held)."""
    L.failures += 1
    if L.error == NULL:
        Py_INCREF(err)
        L.error = <PyObject *>err


cdef void _report_message(layout *L, const char *msg) noexcept nogil:
    with gil:
        text = (<bytes>msg).decode(errors="replace") if msg != NULL else "no message"
        _keep_error(L, RuntimeError(f"ufunc node: NumPy's iterator failed: {text}"))


cdef iter_slot *_take_iter(layout *L) noexcept nogil:
    """An idle iterator of this node for this call: a free one, else a new one made as the
    template was (with the GIL) the first time this many threads run the node at once."""
    cdef int k, n = eagle_load_count(&L.n_iters)
    cdef iter_slot *S
    cdef cnp.PyArrayObject **ops
    for k in range(n):
        if eagle_slot_take(&L.iters[k].busy):
            return &L.iters[k]
    with gil:
        # slots are added with the GIL held: one thread adds at a time
        n = eagle_load_count(&L.n_iters)
        for k in range(n):
            if eagle_slot_take(&L.iters[k].busy):
                return &L.iters[k]
        if n >= L.max_iters:
            _keep_error(L, RuntimeError(f"a ufunc node runs in at most {L.max_iters} threads at once"))
            return NULL
        S = &L.iters[n]
        S.it = iter_new_for_thread(L.iter_nop, L.iter_ops, L.iter_flags, cnp.NPY_CORDER,
                                   cnp.NPY_UNSAFE_CASTING, L.iter_op_flags, L.iter_descrs,
                                   -1, NULL, NULL, CAST_BUFFER)
        if S.it == NULL:
            _report_failure(L)
            return NULL
        S.next = <iternext_t>iter_next_fn(S.it, NULL)
        if S.next == NULL:
            iter_free(S.it)
            S.it = NULL
            _report_failure(L)
            return NULL
        S.ptrs = iter_data_ptrs(S.it)
        S.strides = iter_strides(S.it)
        S.size = iter_size_ptr(S.it)
        ops = iter_operand_array(S.it)
        for k in range(L.nargs + (1 if L.where_slot >= 0 else 0)):
            S.base[k] = <char *>cnp.PyArray_DATA(<cnp.ndarray>ops[k])
        S.busy = 1
        eagle_store_count(&L.n_iters, n + 1)
        return S


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include "mask_scan.h"
    #include "mask_select.h"
    #include "masked_arith.h"
    """
    ctypedef struct eagle_mask_tally:
        Py_ssize_t skipped
        Py_ssize_t whole
        Py_ssize_t mixed
        Py_ssize_t runs
    int eagle_masked_arith(int op, char *d, const char *a, int sa, const char *b, int sb,
                           const unsigned char *m, Py_ssize_t n, eagle_mask_tally *t) nogil
    void eagle_mask_counts(const unsigned char *m, Py_ssize_t n, Py_ssize_t *count, Py_ssize_t *runs) nogil
    Py_ssize_t eagle_mask_find(const unsigned char *m, Py_ssize_t i, Py_ssize_t n, int set) nogil
    void eagle_select_8(void *d, const void *s, const unsigned char *m, Py_ssize_t n) nogil
    void eagle_select_4(void *d, const void *s, const unsigned char *m, Py_ssize_t n) nogil
    void eagle_select_2(void *d, const void *s, const unsigned char *m, Py_ssize_t n) nogil
    void eagle_select_1(void *d, const void *s, const unsigned char *m, Py_ssize_t n) nogil


cdef inline void _copy_set(char *dst, npy_intp dstride, const char *src, npy_intp item,
                           const char *mask, npy_intp mstride, npy_intp m) noexcept nogil:
    """dst[j] = src[j] where mask[j] is set, j in [0, m): src packed, dst strided. The
    common widths select without a branch (an element the mask leaves out is written
    back as it was: a random mask mispredicts half of the branches)."""
    cdef npy_intp j
    cdef const unsigned char *um = <const unsigned char *>mask
    if mstride == 1 and dstride == item and item == 8:
        eagle_select_8(dst, src, um, m)
    elif mstride == 1 and dstride == item and item == 4:
        eagle_select_4(dst, src, um, m)
    elif mstride == 1 and dstride == item and item == 2:
        eagle_select_2(dst, src, um, m)
    elif mstride == 1 and dstride == item and item == 1:
        eagle_select_1(dst, src, um, m)
    else:
        for j in range(m):
            if mask[j * mstride]:
                memcpy(dst + j * dstride, src + j * item, item)


cdef int _runs_loop(layout *L, char **ptrs, const npy_intp *strides, const char *mask, npy_intp mstride,
                    npy_intp n) noexcept nogil:
    """NumPy's masked loop: the loop over each run of set mask elements of [0, n) (a
    contiguous mask scanned eight bytes a step)."""
    cdef char *args[MAX_ARGS]
    cdef const unsigned char *um = <const unsigned char *>mask
    cdef npy_intp i = 0, j, n_run
    cdef int k, rc = 0
    while i < n and rc >= 0:
        if mstride == 1:
            i = eagle_mask_find(um, i, n, 1)
            j = eagle_mask_find(um, i, n, 0)
        else:
            while i < n and mask[i * mstride] == 0:
                i += 1
            j = i
            while j < n and mask[j * mstride] != 0:
                j += 1
        if j > i:
            for k in range(L.nargs):
                args[k] = ptrs[k] + i * strides[k]
            n_run = j - i
            rc = L.loop(L.context, args, &n_run, <npy_intp *>strides, L.auxdata)
        i = j
    return rc


cdef inline bint _fused_fits(layout *L, const npy_intp *strides, npy_intp mstride) noexcept nogil:
    """Whether eagle_masked_arith takes these strides: the mask and the output contiguous,
    each input contiguous or a scalar, not both scalars."""
    cdef npy_intp item = L.out_item[2]
    return (mstride == 1 and strides[2] == item and (strides[0] == item or strides[0] == 0)
            and (strides[1] == item or strides[1] == 0) and (strides[0] != 0 or strides[1] != 0))


cdef int _masked_run(layout *L, char **ptrs, const npy_intp *strides, const char *mask,
                     npy_intp mstride, npy_intp n, PyThreadState *ts) noexcept nogil:
    """The loop over elements [0, n) of the operands (``ptrs``, ``strides``) where the mask
    is set. A fused op (an add, subtract, multiply or divide on contiguous operands) runs
    in one pass, chunk by chunk (eagle_masked_arith). Any other loop runs block by block:
    a block all set runs the loop on the operands; a sparse block (few runs of set
    elements, RUNS_CALL) runs it once per run, as NumPy does; a denser or more fragmented
    one runs it over the whole block into a scratch, then copies the set elements to the
    outputs (every input is read before an output is written: exact in-place stays exact).
    Elements where the mask is not set keep their values. A loop that reports an error
    on a whole block (it may on an element the mask leaves out: an integer power's
    negative exponent) runs that block again by runs, so only set elements' errors count."""
    cdef long double scratch[MASK_SCRATCH_LD]
    cdef char *args[MAX_ARGS]
    cdef npy_intp bstrides[MAX_ARGS]
    cdef npy_intp b = 0, m, j, count, runs, off
    cdef int k, rc = 0
    cdef long blended = 0, by_runs = 0
    cdef const unsigned char *bm
    cdef eagle_mask_tally tally
    if L.fused_op and _fused_fits(L, strides, mstride):
        tally.skipped = tally.whole = tally.mixed = tally.runs = 0
        if eagle_masked_arith(L.fused_op, ptrs[2], ptrs[0], strides[0] != 0, ptrs[1], strides[1] != 0,
                              <const unsigned char *>mask, n, &tally) == 0:
            eagle_add_long(&L.chunks_skipped, tally.skipped)
            eagle_add_long(&L.chunks_whole, tally.whole)
            eagle_add_long(&L.chunks_mixed, tally.mixed)
            eagle_add_long(&L.chunks_runs, tally.runs)
            return 0
    while b < n and rc >= 0:
        m = min(L.mask_block, n - b)
        bm = <const unsigned char *>mask + b * mstride
        count = 0
        runs = 0
        if mstride == 0:
            count = m if bm[0] else 0
            runs = 1 if count else 0
        elif mstride == 1:
            eagle_mask_counts(bm, m, &count, &runs)
        else:
            runs = bm[0] != 0
            for j in range(m):
                count += bm[j * mstride] != 0
            for j in range(1, m):
                runs += (bm[j * mstride] != 0) & (bm[(j - 1) * mstride] == 0)
        if count:
            for k in range(L.nargs):
                args[k] = ptrs[k] + b * strides[k]
            if count == m:
                rc = L.loop(L.context, args, &m, <npy_intp *>strides, L.auxdata)
            elif runs * RUNS_CALL < (m - count) + m // 2 or eagle_error_pending(ts):
                by_runs += 1
                rc = _runs_loop(L, args, strides, <const char *>bm, mstride, m)
            else:
                blended += 1
                off = 0
                for k in range(L.nargs):
                    bstrides[k] = strides[k]
                for k in range(L.nin, L.nargs):
                    args[k] = <char *>scratch + off
                    bstrides[k] = L.out_item[k]
                    off += m * L.out_item[k]
                rc = L.loop(L.context, args, &m, bstrides, L.auxdata)
                if rc < 0 or eagle_error_pending(ts):
                    with gil:
                        PyErr_Clear()
                    for k in range(L.nin, L.nargs):
                        args[k] = ptrs[k] + b * strides[k]
                    rc = _runs_loop(L, args, strides, <const char *>bm, mstride, m)
                else:
                    for k in range(L.nin, L.nargs):
                        _copy_set(ptrs[k] + b * strides[k], strides[k], args[k], L.out_item[k],
                                  <const char *>bm, mstride, m)
        b += m
    if blended:
        eagle_add_long(&L.blocks_blended, blended)
    if by_runs:
        eagle_add_long(&L.blocks_by_runs, by_runs)
    return rc


cdef int _iter_run(layout *L, int64_t start, int64_t stop, char **data, PyThreadState *ts) noexcept nogil:
    """Samples [start, stop) through NumPy's iterator: it fills its buffers with the inputs
    cast to the loop's dtypes, the loop runs over them (under the mask, _masked_run, where
    the node has one), and it casts the outputs back (where the mask is set).
    Returns the loop's status, or -2 after reporting an iterator failure itself."""
    cdef iter_slot *S = _take_iter(L)
    cdef char *base[MAX_ARGS + 1]
    cdef char *errmsg = NULL
    cdef npy_intp n
    cdef int k, nop = L.nargs + (1 if L.where_slot >= 0 else 0), rc = 0
    if S == NULL:
        return -2
    for k in range(L.nargs):
        base[k] = data[L.slot[k]] if L.slot[k] >= 0 else L.fixed[k]
    if L.where_slot >= 0:
        base[L.nargs] = data[L.where_slot]
    for k in range(nop):
        if base[k] != S.base[k]:
            # the executor hands a node its arrays' own memory: the iterator's operands
            eagle_slot_give(&S.busy)
            _report_message(L, "the node's arrays are not at the addresses it was made with")
            return -2
    if iter_reset_range(S.it, start * L.row_len, stop * L.row_len, &errmsg) < 0:
        eagle_slot_give(&S.busy)
        _report_message(L, errmsg)
        return -2
    while True:
        n = S.size[0]
        if L.where_slot < 0:
            rc = L.loop(L.context, S.ptrs, &n, S.strides, L.auxdata)
        else:
            rc = _masked_run(L, S.ptrs, S.strides, S.ptrs[L.nargs], S.strides[L.nargs], n, ts)
        if rc < 0:
            # run the iterator to its end: a reset would first write back the buffers
            # it holds now, into the range of this call (ranges of later calls differ)
            while S.next(S.it):
                pass
            break
        if not S.next(S.it):
            break
    eagle_slot_give(&S.busy)
    return rc


cdef int _strided_rows(layout *L, char **args, int64_t n, npy_intp *steps) noexcept nogil:
    """``n`` samples from ``args`` whose rows have outer dimensions: the loop once per
    innermost run of each row, the outer indexes counted like an odometer."""
    cdef char *row[MAX_ARGS]
    cdef npy_intp idx[MAX_OUTER]
    cdef npy_intp dims[1]
    cdef int k, d, rc = 0
    cdef int64_t i
    cdef char *call[MAX_ARGS]
    dims[0] = L.inner_len
    for i in range(n):
        for k in range(L.nargs):
            row[k] = args[k]
        for d in range(L.n_outer):
            idx[d] = 0
        while True:
            rc = L.loop(L.context, _turned(L, row, call, L.inner_len, steps), dims, steps, L.auxdata)
            if rc < 0:
                return rc
            d = L.n_outer - 1
            while d >= 0:
                idx[d] += 1
                if idx[d] < L.outer_dims[d]:
                    for k in range(L.nargs):
                        row[k] += L.outer_strides[k * MAX_OUTER + d]
                    break
                idx[d] = 0
                for k in range(L.nargs):
                    row[k] -= L.outer_strides[k * MAX_OUTER + d] * (L.outer_dims[d] - 1)
                d -= 1
            if d < 0:
                break
        for k in range(L.nargs):
            if L.slot[k] >= 0:
                args[k] += L.sample_stride[k]
    return rc


cdef inline char **_turned(layout *L, char **args, char **call, npy_intp n, const npy_intp *steps) noexcept nogil:
    """``args`` as the loop takes them for ``n`` elements: as they are, or (``L.backwards``)
    at each operand's last element, from which the loop steps back to the first."""
    cdef int k
    if not L.backwards:
        return args
    for k in range(L.nargs):
        call[k] = args[k] - (n - 1) * steps[k] if n > 0 else args[k]
    return call


cdef void _ufunc_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                        void *user_data) noexcept nogil:
    cdef layout *L = <layout *>user_data
    cdef char *args[MAX_ARGS]
    cdef char *call[MAX_ARGS]
    cdef npy_intp dims[1 + MAX_CORE]
    cdef npy_intp steps[MAX_ARGS + MAX_ARGS * MAX_CORE]
    cdef int k, rc = 0
    cdef int64_t i
    cdef PyThreadState *ts
    if stop <= start or L.where_never:
        return
    ts = _thread_state()
    if L.mask_direct:
        for k in range(L.nargs):
            args[k] = data[L.slot[k]] + start * L.sample_stride[k] if L.slot[k] >= 0 else L.fixed[k]
        rc = _masked_run(L, args, L.step, data[L.where_slot] + start * L.mask_sample_stride, L.mask_step,
                         (stop - start) * L.row_len, ts)
        if rc < 0 or eagle_error_pending(ts):
            _report_failure(L)
        return
    if L.use_iter:
        rc = _iter_run(L, start, stop, data, ts)
        if rc != -2 and (rc < 0 or eagle_error_pending(ts)):
            _report_failure(L)
        return
    for k in range(L.nargs):
        if L.slot[k] >= 0:
            args[k] = data[L.slot[k]] + start * L.sample_stride[k]
        else:
            args[k] = L.fixed[k]
        steps[k] = L.step[k]
    for k in range(L.n_core):
        dims[1 + k] = L.core_dims[k]
    for k in range(L.n_core_steps):
        steps[L.nargs + k] = L.core_steps[k]
    if not L.per_sample:
        dims[0] = (stop - start) * L.row_len
        rc = L.loop(L.context, _turned(L, args, call, dims[0], steps), dims, steps, L.auxdata)
    elif L.n_outer == 0:
        dims[0] = L.inner_len
        for i in range(stop - start):
            rc = L.loop(L.context, _turned(L, args, call, dims[0], steps), dims, steps, L.auxdata)
            if rc < 0:
                break
            for k in range(L.nargs):
                if L.slot[k] >= 0:
                    args[k] += L.sample_stride[k]
    else:
        rc = _strided_rows(L, args, stop - start, steps)
    if rc < 0 or eagle_error_pending(ts):
        _report_failure(L)


def resolve_loop(uf, dtypes, fixed_strides):
    """(loop dtypes, call-info capsule) of the loop NumPy runs for ``dtypes``.

    ``dtypes`` has one entry per operand, inputs then outputs: a dtype, or
    ``int``/``float``/``complex`` for a Python scalar (NEP 50 weak scalars).
    Raises ``TypeError`` for a loop that needs the GIL.
    """
    loop_dtypes, capsule = uf._resolve_dtypes_and_context(tuple(dtypes), casting="same_kind")
    uf._get_strided_loop(capsule, fixed_strides=tuple(fixed_strides))
    if not PyCapsule_IsValid(capsule, CALL_INFO_NAME):
        raise RuntimeError("this NumPy's ufunc call-info capsule has an unknown layout; eagle "
                           "knows 'numpy_1.24_ufunc_call_info'")
    cdef call_info *info = <call_info *>PyCapsule_GetPointer(capsule, CALL_INFO_NAME)
    if info.strided_loop == NULL:
        raise RuntimeError(f"NumPy gave no inner loop for {uf.__name__} with dtypes {loop_dtypes}")
    if info.requires_pyapi:
        raise TypeError(f"the loop of {uf.__name__!r} for {tuple(str(d) for d in loop_dtypes)} needs "
                        "the GIL (an object loop); a ufunc node runs loops without the GIL")
    return loop_dtypes, capsule


cdef class UfuncLoop:
    """A resolved inner loop plus its operands' layout: the user data of a ufunc kernel."""

    cdef layout *L
    cdef readonly object capsule
    cdef readonly object constants
    cdef readonly str name
    cdef object iter_operands

    def __cinit__(self):
        self.L = <layout *>calloc(1, sizeof(layout))
        if self.L == NULL:
            raise MemoryError()

    def __dealloc__(self):
        cdef int k
        if self.L != NULL:
            Py_XDECREF(self.L.error)
            if self.L.iters != NULL:
                for k in range(self.L.n_iters):
                    iter_free(self.L.iters[k].it)
                free(self.L.iters)
            if self.L.iter_template != NULL:
                iter_free(self.L.iter_template)
        free(self.L)

    def __init__(self, str name, capsule, list slots, list constants, list sample_strides,
                 list steps, bint per_sample, npy_intp row_len, list core_dims, list core_steps,
                 inner_len=None, list outer_dims=None, list outer_strides=None, bint backwards=False):
        """``per_sample`` rows run ``inner_len`` elements a call (``row_len`` if None), for
        each index of ``outer_dims`` (``outer_strides``: each operand's strides of them);
        ``backwards``: ``steps`` are the operands' steps turned around (see ``layout``)."""
        cdef call_info *info = <call_info *>PyCapsule_GetPointer(capsule, CALL_INFO_NAME)
        cdef int nargs = len(slots)
        cdef int k
        if nargs > MAX_ARGS:
            raise ValueError(f"a ufunc node takes at most {MAX_ARGS} operands, got {nargs}")
        if len(core_dims) > MAX_CORE or len(core_steps) > MAX_ARGS * MAX_CORE:
            raise ValueError(f"a ufunc node takes at most {MAX_CORE} core dimensions")
        self.capsule = capsule
        self.constants = constants
        self.L.loop = info.strided_loop
        self.L.context = info.context
        self.L.auxdata = info.auxdata
        self.L.nargs = nargs
        self.L.per_sample = per_sample
        self.L.row_len = row_len
        for k in range(nargs):
            self.L.slot[k] = slots[k]
            self.L.sample_stride[k] = sample_strides[k]
            self.L.step[k] = steps[k]
            if slots[k] < 0:
                self.L.fixed[k] = <char *><size_t>data_pointer(constants[k])
        outer_dims = outer_dims or []
        if len(outer_dims) > MAX_OUTER:
            raise ValueError(f"a ufunc node's rows have at most {MAX_OUTER + 1} dimensions that do "
                             f"not merge, got {len(outer_dims) + 1}")
        self.L.inner_len = row_len if inner_len is None else inner_len
        self.L.backwards = backwards
        self.L.n_outer = len(outer_dims)
        for d in range(len(outer_dims)):
            self.L.outer_dims[d] = outer_dims[d]
            for k in range(nargs):
                self.L.outer_strides[k * MAX_OUTER + d] = outer_strides[k][d]
        self.L.n_core = len(core_dims)
        for k in range(len(core_dims)):
            self.L.core_dims[k] = core_dims[k]
        self.L.n_core_steps = len(core_steps)
        for k in range(len(core_steps)):
            self.L.core_steps[k] = core_steps[k]
        self.name = name

    def run_through_iterator(self, list arrays, list dtypes, int nin, where, int where_slot):
        """Run the loop through NumPy's iterator: ``arrays`` are the operands as the
        iterator takes them (inputs, outputs: the node's arrays, a 0-d array per constant),
        ``dtypes`` the loop's; it casts each array of another dtype through its buffers,
        as NumPy's own ufunc call does. ``where``: None (always), False (never), or the
        mask's array (bool, broadcast to the operands' shape) read from data[where_slot]."""
        cdef bint masked = isinstance(where, np.ndarray)
        cdef int nop = len(arrays) + masked
        cdef int k
        cdef cnp.PyArrayObject *ops[MAX_ARGS + 1]
        cdef cnp.PyArray_Descr *descrs[MAX_ARGS + 1]
        cdef cnp.npy_uint32 op_flags[MAX_ARGS + 1]
        cdef cnp.npy_uint32 flags
        cdef char *errmsg = NULL
        keep = []
        if where is not True and where is not False and not masked:
            raise TypeError(f"where must be True, False or a bool ndarray, got {type(where).__name__}")
        if len(arrays) > MAX_ARGS:
            raise ValueError(f"a ufunc node takes at most {MAX_ARGS} operands")
        self.L.use_iter = 1
        self._set_outputs(nin, [np.dtype(d).itemsize for d in dtypes[nin:len(arrays)]])
        if where is False:
            self.L.where_never = 1
            return
        self.L.where_slot = -1
        for k in range(len(arrays)):
            a = arrays[k]
            d = np.dtype(dtypes[k])
            keep += [a, d]
            ops[k] = <cnp.PyArrayObject *>a
            descrs[k] = <cnp.PyArray_Descr *>d
            if k < nin:
                op_flags[k] = cnp.NPY_ITER_READONLY
            else:
                op_flags[k] = cnp.NPY_ITER_WRITEONLY | cnp.NPY_ITER_NO_BROADCAST
                if masked:
                    op_flags[k] |= cnp.NPY_ITER_WRITEMASKED
        if masked:
            d = np.dtype(bool)
            keep += [where, d]
            ops[len(arrays)] = <cnp.PyArrayObject *>where
            descrs[len(arrays)] = <cnp.PyArray_Descr *>d
            op_flags[len(arrays)] = cnp.NPY_ITER_READONLY | cnp.NPY_ITER_ARRAYMASK
            self.L.where_slot = where_slot
        # C order: iterator index i * row_len + j is element j of sample i; no copies of
        # operands (eagle resets the iterator to the arrays' memory on every call)
        # DELAY_BUFALLOC: a reset writes back the buffers an iterator holds; a thread's
        # iterator's first reset (its first call) then has none to write
        flags = (cnp.NPY_ITER_EXTERNAL_LOOP | cnp.NPY_ITER_BUFFERED | cnp.NPY_ITER_GROWINNER
                 | cnp.NPY_ITER_RANGED | cnp.NPY_ITER_ZEROSIZE_OK | cnp.NPY_ITER_DELAY_BUFALLOC)
        # unsafe casting here, as in NumPy's own ufunc call: resolve_loop already checked the
        # casts against the loop's own rule (logical_and's loop takes any input into bool,
        # which a 'same_kind' iterator refuses for a float or complex input)
        it = iter_new(nop, ops, flags, cnp.NPY_CORDER, cnp.NPY_UNSAFE_CASTING, op_flags, descrs,
                      -1, NULL, NULL, CAST_BUFFER)
        self.L.iter_template = it
        # the arguments, for each thread's own iterator (kept alive by iter_operands)
        self.L.iter_nop = nop
        self.L.iter_flags = flags
        for k in range(nop):
            self.L.iter_ops[k] = ops[k]
            self.L.iter_descrs[k] = descrs[k]
            self.L.iter_op_flags[k] = op_flags[k]
        if iter_next_fn(it, &errmsg) == NULL:
            raise RuntimeError(f"NumPy's iterator: {errmsg}")
        from eagle.cpu.threads import max_threads

        # every thread of a team may run the node at once: up to 1024 on a machine of
        # 128 CPUs or more (8 per CPU), so the room is the team cap, not a constant
        self.L.max_iters = max(1, max_threads())
        self.L.iters = <iter_slot *>calloc(self.L.max_iters, sizeof(iter_slot))
        if self.L.iters == NULL:
            raise MemoryError()
        self.iter_operands = keep

    @property
    def masked_blocks(self):
        """(blocks of the masked loop run whole and blended -- into a scratch, or in one
        pass for a fused op --, blocks run by runs of set elements) so far: which way the
        mask's density chose, block by block."""
        return eagle_load_long(&self.L.blocks_blended), eagle_load_long(&self.L.blocks_by_runs)

    @property
    def masked_chunks(self):
        """(chunks skipped, computed whole, selected element by element, computed run by
        run) so far by a fused op's one pass (see run_masked_direct): what the mask's
        chunks of 256 elements held (none set, all set, scattered, few runs)."""
        return (eagle_load_long(&self.L.chunks_skipped), eagle_load_long(&self.L.chunks_whole),
                eagle_load_long(&self.L.chunks_mixed), eagle_load_long(&self.L.chunks_runs))

    def run_masked_direct(self, int nin, list out_items, int where_slot, npy_intp mask_sample_stride,
                          npy_intp mask_step, int fused_op=0):
        """Run the loop under a mask on the arrays themselves (no operand needs a cast, the
        layout runs flat, see _masked_run): ``out_items`` the outputs' element bytes, the
        mask read from data[where_slot], ``mask_sample_stride`` bytes a sample, ``mask_step``
        bytes an element (0 for a 0-d mask). ``fused_op``: the loop is NumPy's add (1),
        subtract (2), multiply (3) or divide (4) of float64, + 4 of float32, + 8 of 64-bit
        integers, + 12 of 32-bit integers (no integer divide), which runs in one pass over
        the mask where the operands are contiguous (eagle_masked_arith)."""
        if not (0 <= fused_op <= 8 or (9 <= fused_op <= 15 and fused_op % 4 != 0)) or \
                (fused_op and (nin != 2 or self.L.nargs != 3)):
            raise ValueError(f"a fused masked loop is a binary add, subtract, multiply or divide, got {fused_op}")
        self.L.fused_op = fused_op
        self._set_outputs(nin, out_items)
        self.L.mask_direct = 1
        self.L.where_slot = where_slot
        self.L.mask_sample_stride = mask_sample_stride
        self.L.mask_step = mask_step

    def _set_outputs(self, int nin, list out_items):
        cdef int k
        cdef npy_intp total = 0
        self.L.nin = nin
        for k in range(nin, self.L.nargs):
            self.L.out_item[k] = out_items[k - nin]
            if self.L.out_item[k] > MAX_ITEM:
                raise ValueError(f"a ufunc node's masked outputs take elements of at most {MAX_ITEM} bytes")
            total += self.L.out_item[k]
        self.L.mask_block = max(1, min(<npy_intp>MASK_BLOCK, MASK_SCRATCH // max(total, 1)))

    @property
    def fused_op(self):
        """The fused masked op (see run_masked_direct), 0 for none."""
        return self.L.fused_op

    @property
    def through_iterator(self):
        """Whether the loop runs through NumPy's iterator (a cast or where=)."""
        return bool(self.L.use_iter)

    def kernel(self):
        """The eagle Kernel that runs this loop (it keeps this object alive)."""
        return wrap_kernel(_ufunc_kernel, self.name, <void *>self.L, self)

    @property
    def failures(self):
        """How many times the inner loop reported an error."""
        return self.L.failures

    def take_error(self):
        """The first exception the loop raised since the last call, or None (and forget it)."""
        cdef PyObject *e = self.L.error
        if e == NULL:
            return None
        self.L.error = NULL
        err = <object>e
        Py_XDECREF(e)
        return err

    @property
    def per_sample(self):
        return bool(self.L.per_sample)
