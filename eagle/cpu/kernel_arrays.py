"""Whether arrays are what a native kernel declares it takes: one check, made when a native
node is recorded and again on every ``NativeSpec`` a cpu lowering returns (a kernel given
too few arrays, or arrays of another dtype, reads and writes memory it was never given)."""
from __future__ import annotations


def check_kernel_arrays(kernel, named, n_reads=None) -> None:
    """Raise unless ``named`` ((name, array) pairs in the order the kernel gets them: reads,
    then writes) is what ``kernel`` (an ``eagle.native.Kernel``) declares: as many reads and
    writes (``n_reads``: how many of ``named`` are reads; None: only the total is checked),
    no dtype holding Python objects, its dtype, ``dtypes`` and ``ndim``. TypeError for a
    count or a type, ValueError for a misaligned array; the messages name the kernel and
    the array. (A written array is writable: ``eagle.record.arrays`` refused it otherwise.)"""
    k = kernel
    if n_reads is not None:
        if k.n_reads is not None and n_reads != k.n_reads:
            raise TypeError(f"kernel {k.name!r} reads {k.n_reads} array(s), the node declares {n_reads}")
        if k.n_writes is not None and len(named) - n_reads != k.n_writes:
            raise TypeError(f"kernel {k.name!r} writes {k.n_writes} array(s), the node declares "
                            f"{len(named) - n_reads}")
    elif k.n_reads is not None and k.n_writes is not None:
        if len(named) != k.n_reads + k.n_writes:
            raise TypeError(f"kernel {k.name!r} takes {k.n_reads + k.n_writes} arrays ({k.n_reads} read, "
                            f"{k.n_writes} written), got {len(named)}")
    for name, a in named:
        dtype = getattr(a, "dtype", None)
        if dtype is not None and dtype.hasobject:
            raise TypeError(f"kernel {k.name!r}: {name!r} has dtype {dtype}, which holds Python objects; a "
                            "native kernel cannot take it (use a numeric or plain structured dtype, or an "
                            "opaque node)")
    if k.dtype is not None:
        for name, a in named:
            if a.dtype != k.dtype or a.ndim != 1:
                raise TypeError(f"kernel {k.name!r} takes 1-d {k.dtype} arrays; {name!r} is "
                                f"{a.ndim}-d {a.dtype}")
    k.check_arrays(list(named))
