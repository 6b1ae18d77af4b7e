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
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free

from eagle.native cimport Kernel, wrap_kernel
from eagle.record.memory import data_pointer

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

CALL_INFO_NAME = b"numpy_1.24_ufunc_call_info"


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
    long failures
    # the first error the loop reported since it was last taken (owned), or NULL
    PyObject *error


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


cdef void _ufunc_kernel(int64_t start, int64_t stop, char **data, const int64_t *strides,
                        void *user_data) noexcept nogil:
    cdef layout *L = <layout *>user_data
    cdef char *args[MAX_ARGS]
    cdef npy_intp dims[1 + MAX_CORE]
    cdef npy_intp steps[MAX_ARGS + MAX_ARGS * MAX_CORE]
    cdef int k, rc = 0
    cdef int64_t i
    cdef PyThreadState *ts
    if stop <= start:
        return
    ts = _thread_state()
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
        rc = L.loop(L.context, args, dims, steps, L.auxdata)
    else:
        dims[0] = L.row_len
        for i in range(stop - start):
            rc = L.loop(L.context, args, dims, steps, L.auxdata)
            if rc < 0:
                break
            for k in range(L.nargs):
                if L.slot[k] >= 0:
                    args[k] += L.sample_stride[k]
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

    def __cinit__(self):
        self.L = <layout *>calloc(1, sizeof(layout))
        if self.L == NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self.L != NULL:
            Py_XDECREF(self.L.error)
        free(self.L)

    def __init__(self, str name, capsule, list slots, list constants, list sample_strides,
                 list steps, bint per_sample, npy_intp row_len, list core_dims, list core_steps):
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
        self.L.n_core = len(core_dims)
        for k in range(len(core_dims)):
            self.L.core_dims[k] = core_dims[k]
        self.L.n_core_steps = len(core_steps)
        for k in range(len(core_steps)):
            self.L.core_steps[k] = core_steps[k]
        self.name = name

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
