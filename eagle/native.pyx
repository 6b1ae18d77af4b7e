"""Native kernels: nogil C functions a node runs over samples [start, stop).

``Kernel`` is to eagle what scipy's ``LowLevelCallable`` is to scipy: one object
that accepts a kernel however it was made and checks its signature:

* a Cython ``cdef void f(int64_t, int64_t, char **, const int64_t *, void *) noexcept nogil``,
  through ``eagle.native.wrap_kernel`` (cimport it from ``eagle/native.pxd``),
* a ``PyCapsule`` named with the C signature (``eagle.native.SIGNATURE``),
* a ctypes function pointer with that signature (``eagle.native.CTYPES_KERNEL``),
* a cffi function pointer of the C type ``void(*)(int64_t, int64_t, char **, const int64_t *, void *)``,
* a numba ``cfunc`` with signature ``void(int64, int64, CPointer(voidptr), CPointer(int64), voidptr)``.
"""
import ctypes

from eagle._public import public_dir
from eagle._text import with_article

from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_CheckExact
from libc.stdint cimport uintptr_t

# what help()/pydoc show (not Cython's module internals such as __pyx_capi__)
__all__ = ["Kernel", "SIGNATURE", "CTYPES_KERNEL"]


def __dir__():
    # what eagle.native offers; __pyx_capi__ must stay (it is how `cimport eagle.native`
    # finds wrap_kernel), but pydoc lists every dunder dir() gives: kept out of help()
    return public_dir(globals())

#: the C signature of a kernel; a PyCapsule must carry exactly this name
SIGNATURE = "void (int64_t, int64_t, char **, const int64_t *, void *)"
#: the ctypes prototype of a kernel
CTYPES_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64,
                                 ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64),
                                 ctypes.c_void_p)
_CFFI_TYPES = (
    "void(*)(int64_t, int64_t, char * *, int64_t *, void *)",
    "void(*)(int64_t, int64_t, char * *, const int64_t *, void *)",
)
_CTYPES_ARGTYPES = {
    (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p),
     ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p),
    (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
     ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p),
}


cdef class Kernel:
    """A native kernel eagle can call without the GIL.

    ``Kernel(obj, user_data=None, name=None, dtypes=None, ndim=None)`` accepts a
    PyCapsule, a ctypes or cffi function pointer, a numba ``cfunc`` or another
    ``Kernel``; a wrong signature raises ``TypeError``. ``user_data`` is an
    integer address (or a ctypes object, whose address is taken and which is
    kept alive) handed to every call.

    An untyped kernel sees only pointers; ``dtypes`` and ``ndim`` declare what
    it takes, and every node made of it is checked when it is made: one dtype
    (or ndim) for every array, or a sequence with one per declared array,
    reads then writes, ``None`` for any. ``Kernel(k_ptr, dtypes=np.float64, ndim=1)``;
    ``Kernel(k_ptr, dtypes=(np.int64, None, np.float64))``. Given with another
    ``Kernel``, they replace what it declared.

    ``sample_local=True`` declares that the kernel touches its per-sample arrays
    only at its own samples ``[start, stop)`` and writes nothing else: the cpu
    executor may then fuse its node with its neighbours into sample tiles
    (``Graph.build(cpu=eagle.CpuOptions(fuse=...))``). ``None`` keeps what another ``Kernel`` declared
    (eagle's built-in kernels declare it), else ``False``.
    """

    def __init__(self, obj, user_data=None, name=None, dtypes=None, ndim=None, sample_local=None):
        cdef Kernel other
        owner = [obj]
        if isinstance(obj, Kernel):
            other = <Kernel>obj
            self.fn, self.user_data, owner = other.fn, other.user_data, [other.owner]
            self.team_fn, self.phases = other.team_fn, other.phases
            self.n_reads, self.n_writes, self.dtype = other.n_reads, other.n_writes, other.dtype
            self.dtypes, self.ndim = other.dtypes, other.ndim
            self.sample_local = other.sample_local
            name = name or other.name
        else:
            address, default_name = _function_address(obj)
            self.fn = <kernel_t><uintptr_t>address
            name = name or default_name
        if user_data is not None:
            if isinstance(user_data, int):
                self.user_data = <void *><uintptr_t>user_data
            elif isinstance(user_data, ctypes._SimpleCData) or isinstance(user_data, ctypes.Structure) \
                    or isinstance(user_data, ctypes.Array):
                self.user_data = <void *><uintptr_t>ctypes.addressof(user_data)
            else:
                raise TypeError("user_data must be an integer address or a ctypes object, "
                                f"got {type(user_data).__name__}")
            owner.append(user_data)
        self.name = name or "kernel"
        self.owner = tuple(owner)
        if dtypes is not None:
            self.dtypes = _dtype_spec(dtypes)
        if ndim is not None:
            self.ndim = _ndim_spec(ndim)
        if sample_local is not None:
            if not isinstance(sample_local, bool):
                raise TypeError(f"sample_local= is True or False, got {sample_local!r}")
            self.sample_local = sample_local

    def check_arrays(self, named):
        """Raise ``TypeError`` unless the (name, array) pairs (reads, then writes) are what
        the kernel declared it takes (``dtypes``, ``ndim``); ``ValueError`` for an array
        of a declared dtype that is not aligned for it.

        A kernel that declares a dtype (eagle's own kernels, ``dtypes=``) reads and writes
        its elements as that C type, and C requires them aligned: a misaligned ``double *``
        (a packed structured field, ``raw[4:].view(np.float64)``) is undefined behaviour,
        however the compiler of the day happens to cope. NumPy copies such an array
        through an aligned buffer; a kernel given its pointer cannot, so it is refused
        here, as a ufunc node refuses it."""
        n = len(named)
        for spec, what in ((self.dtypes, "dtypes"), (self.ndim, "ndim")):
            if isinstance(spec, tuple) and len(spec) != n:
                raise TypeError(f"kernel {self.name!r} declares {what} for {len(spec)} array(s), "
                                f"the node declares {n}")
        for k, (name, a) in enumerate(named):
            want = self.dtypes[k] if isinstance(self.dtypes, tuple) else self.dtypes
            if want is not None and a.dtype != want:
                raise TypeError(f"kernel {self.name!r} takes {want} for array {k} ({name!r}), "
                                f"got {a.dtype}")
            if (want is not None or self.dtype is not None) and not a.flags.aligned:
                raise ValueError(f"kernel {self.name!r}: array {k} ({name!r}) is not aligned for its dtype "
                                 f"{a.dtype}; the kernel reads it as that C type (pass an aligned array, "
                                 "e.g. a copy)")
            want = self.ndim[k] if isinstance(self.ndim, tuple) else self.ndim
            if want is not None and a.ndim != want:
                raise TypeError(f"kernel {self.name!r} takes {with_article(want)}-d array for array {k} ({name!r}), "
                                f"got {a.ndim}-d")

    @property
    def address(self):
        """The kernel's function address."""
        return <uintptr_t>self.fn

    @property
    def user_data_address(self):
        return <uintptr_t>self.user_data

    def __repr__(self):
        if self.phases:
            return f"eagle.native.Kernel({self.name!r}, team kernel of {self.phases} phases)"
        return f"eagle.native.Kernel({self.name!r} at 0x{<uintptr_t>self.fn:x})"


def _one_dtype(d):
    import numpy as np

    try:
        dt = np.dtype(d)
    except TypeError as e:
        raise TypeError(f"dtypes= takes NumPy dtypes (or None for any), got {d!r}") from e
    if dt.hasobject:
        raise TypeError(f"a native kernel cannot take dtype {dt}: it holds Python objects")
    return dt


def _dtype_spec(dtypes):
    if isinstance(dtypes, (list, tuple)):
        return tuple(None if d is None else _one_dtype(d) for d in dtypes)
    return _one_dtype(dtypes)


def _one_ndim(n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TypeError(f"ndim= takes integers >= 0 (or None for any), got {n!r}")
    return n


def _ndim_spec(ndim):
    if isinstance(ndim, (list, tuple)):
        return tuple(None if n is None else _one_ndim(n) for n in ndim)
    return _one_ndim(ndim)


def _function_address(obj):
    """(address, name) of a kernel function given as a capsule, ctypes, cffi or numba object."""
    if PyCapsule_CheckExact(obj):
        name_ptr = PyCapsule_GetName(obj)
        name = (<bytes>name_ptr).decode() if name_ptr != NULL else None
        if name != SIGNATURE:
            raise TypeError(f"a kernel capsule must be named {SIGNATURE!r}, this one is named {name!r}")
        return <uintptr_t>PyCapsule_GetPointer(obj, name_ptr), "capsule"
    if hasattr(obj, "address") and hasattr(obj, "ctypes") and hasattr(obj, "native_name"):
        # numba cfunc: check through its ctypes view
        address, _ = _function_address(obj.ctypes)
        return address, getattr(obj, "__name__", "cfunc")
    if isinstance(obj, ctypes._CFuncPtr):
        argtypes = tuple(obj.argtypes or ())
        if argtypes not in _CTYPES_ARGTYPES or obj.restype is not None:
            raise TypeError(
                f"a ctypes kernel must have the prototype eagle.native.CTYPES_KERNEL "
                f"({SIGNATURE}); got argtypes={argtypes}, restype={obj.restype}")
        address = ctypes.cast(obj, ctypes.c_void_p).value
        return address, getattr(obj, "__name__", None) or _symbol_name(address) or "ctypes"
    ffi_type = _cffi_type(obj)
    if ffi_type is not None:
        ffi, ctype = ffi_type
        if ffi.getctype(ctype) not in _CFFI_TYPES:
            raise TypeError(f"a cffi kernel must have the C type "
                            f"void(*)(int64_t, int64_t, char **, const int64_t *, void *); got {ffi.getctype(ctype)}")
        return int(ffi.cast("uintptr_t", obj)), "cffi"
    raise TypeError(
        f"cannot make an eagle kernel of {type(obj).__name__}: give a PyCapsule named {SIGNATURE!r}, "
        "a ctypes or cffi function pointer, a numba cfunc, or a Cython function through "
        "eagle.native.wrap_kernel")


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _symbol_name(address):
    """The exported name of the function at ``address`` (``dladdr``), or None: a ctypes
    pointer made as ``CTYPES_KERNEL(("plus_c", lib))`` keeps no ``__name__``, and messages
    should name the kernel, not say ``'ctypes'``."""
    try:
        dladdr = ctypes.CDLL(None).dladdr   # glibc >= 2.34, musl, macOS: in the C library
    except (OSError, AttributeError, TypeError):
        try:
            from ctypes.util import find_library
            dladdr = ctypes.CDLL(find_library("dl")).dladdr
        except (OSError, AttributeError, TypeError):
            return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    if not address or not dladdr(address, ctypes.byref(info)) or not info.dli_sname:
        return None
    if info.dli_saddr != address:   # inside a function, not its start: not its name
        return None
    try:
        return info.dli_sname.decode()
    except UnicodeDecodeError:
        return None


def _cffi_type(obj):
    if type(obj).__module__ != "_cffi_backend":
        return None
    import cffi
    ffi = cffi.FFI()
    try:
        ctype = ffi.typeof(obj)
    except TypeError:
        return None
    if ctype.kind != "function":  # cffi's kind for a function-pointer type
        raise TypeError(f"a cffi kernel must be a function pointer, got {ffi.getctype(ctype)}")
    return ffi, ctype


cdef Kernel wrap_kernel(kernel_t fn, str name, void *user_data=NULL, object owner=None,
                        object n_reads=None, object n_writes=None, object dtype=None):
    """A Kernel of a Cython function: the way Cython code hands eagle a kernel."""
    cdef Kernel k = Kernel.__new__(Kernel)
    k.fn = fn
    k.user_data = user_data
    k.name = name
    k.owner = owner
    k.n_reads = n_reads
    k.n_writes = n_writes
    k.dtype = dtype
    return k


cdef Kernel wrap_team_kernel(team_kernel_t fn, int phases, str name, void *user_data=NULL,
                             object owner=None, object n_reads=None, object n_writes=None):
    """A Kernel of a Cython team kernel run in `phases` phases by the whole team."""
    if phases < 1:
        raise ValueError(f"a team kernel needs at least one phase, got {phases}")
    cdef Kernel k = wrap_kernel(<kernel_t>NULL, name, user_data, owner, n_reads, n_writes, None)
    k.team_fn = fn
    k.phases = phases
    return k
