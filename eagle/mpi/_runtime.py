"""The MPI that mpi4py loaded, as eagle's collectives see it.

``api()`` imports mpi4py (which initializes MPI), finds the MPI entry points in
the library behind it and tells the C side which handle ABI it speaks. It runs
once, when the first collective node is made; eagle itself never needs MPI.
"""
from __future__ import annotations

import numpy as np

_state = {}

#: MPI reduction ops by eagle's names, with the NumPy kinds each accepts
#: (b bool, i signed, u unsigned, f float, c complex), as the MPI standard allows them
OPS = {
    "sum": ("SUM", "iufc"), "prod": ("PROD", "iufc"),
    "max": ("MAX", "iuf"), "min": ("MIN", "iuf"),
    "land": ("LAND", "biu"), "lor": ("LOR", "biu"), "lxor": ("LXOR", "biu"),
    "band": ("BAND", "iu"), "bor": ("BOR", "iu"), "bxor": ("BXOR", "iu"),
}

# NumPy type codes eagle hands MPI (mpi4py's table maps them to MPI datatypes)
_CODES = "?bhilqBHILQfdFD"


def mpi():
    """mpi4py's MPI module, with a clear error when mpi4py is missing."""
    m = _state.get("MPI")
    if m is None:
        try:
            from mpi4py import MPI as m
        except ImportError as e:
            raise ImportError("eagle's collective nodes need mpi4py and an MPI library: "
                              "pip install 'eagle[mpi]' (mpi4py and the mpich wheel), or mpi4py "
                              f"built against your system MPI ({e})") from e
        _state["MPI"] = m
    return m


def api():
    """Resolve the MPI entry points once; returns mpi4py's MPI module."""
    MPI = mpi()
    if not _state.get("resolved"):
        from eagle.mpi import _collectives

        handle_bytes = MPI._sizeof(MPI.Comm)
        if handle_bytes not in (4, 8):
            raise ImportError(f"eagle.mpi: MPI handles of {handle_bytes} bytes are not supported")
        in_place = MPI.Get_address(MPI.IN_PLACE) & ((1 << 64) - 1)
        _collectives.resolve(MPI.__file__, handle_bytes == 8, in_place)
        _state["resolved"] = True
    return MPI


def default_comm(comm):
    MPI = api()
    if not MPI.Is_initialized() or MPI.Is_finalized():
        raise RuntimeError("MPI is not initialized (mpi4py.rc.initialize = False: call MPI.Init() first) "
                           "or already finalized; collective nodes call MPI on every replay")
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError(f"comm must be an mpi4py intracommunicator (e.g. MPI.COMM_WORLD), "
                        f"got {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    return comm


def handle(obj) -> int:
    """An mpi4py object's MPI handle as an unsigned 64-bit number."""
    return mpi()._handleof(obj) & ((1 << 64) - 1)


def datatype(a, what):
    """The MPI datatype of a NumPy array's elements, or a clear error."""
    MPI = mpi()
    dt = a.dtype
    if dt.char not in _CODES or not dt.isnative:
        raise TypeError(f"{what}: MPI cannot carry {dt} here; use a native-endian bool, integer, "
                        "float32/64 or complex64/128 array")
    return MPI._typedict[dt.char]


def buffer(a, what):
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{what} must be a NumPy array, got {type(a).__name__}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous: MPI reads and writes it as one block "
                         "(np.ascontiguousarray makes a copy, which the graph would then own)")
    if a.size > np.iinfo(np.int32).max:
        raise ValueError(f"{what} has {a.size} elements; an MPI count is at most {np.iinfo(np.int32).max}")
    return a
