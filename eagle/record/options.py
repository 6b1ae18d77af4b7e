"""What ``Graph.build()`` takes for each backend: ``CpuOptions`` and ``CudaOptions``.

    g.build(cpu=eagle.CpuOptions(teams="serial", fuse=False),
            cuda=eagle.CudaOptions(library_branches="branches"))

An options object is a value: checked when it is made (a bad value raises there, naming
the option), immutable, compared by value. ``build()`` hands the chosen backend its own
options; the other backend's are not used (one script can carry both).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from collections.abc import Mapping, Set
from typing import Sequence, Union

__all__ = ["CpuOptions", "CudaOptions", "TEAM_POLICIES"]

#: how a CPU stage's work is shared (``CpuOptions.teams``)
TEAM_POLICIES = ("auto", "serial", "parallel")


def _team_policy(p, what):
    if not isinstance(p, str) or p not in TEAM_POLICIES:
        raise ValueError(f"{what}: a team policy is 'auto', 'serial' or 'parallel', got {p!r}")
    return p


def _fuse(fuse):
    """True, False, or a tile size, any integer > 0 (a NumPy one too); a tile past int64
    is one tile over any capacity, so it is cut to 2**63 - 1."""
    if fuse is True or fuse is False:
        return fuse
    try:
        tile = operator.index(fuse)   # np.bool_ has no __index__: refused below
    except TypeError:
        tile = None
    if tile is not None and tile > 0:
        return min(tile, (1 << 63) - 1)
    raise ValueError(f"CpuOptions(fuse=...) is True, False or a tile size in samples (an int > 0), "
                     f"got {fuse!r}")


@dataclass(frozen=True, kw_only=True, eq=False)
class CpuOptions:
    """How the cpu backend runs a graph (``g.build(cpu=eagle.CpuOptions(...))``).

    Parameters
    ----------
    teams : {"auto", "serial", "parallel"} or sequence of them, default "auto"
        How each stage's work is shared: ``"auto"`` runs a stage on the whole team only
        when its measured cost pays for a barrier; ``"serial"`` on the launching thread;
        ``"parallel"`` always on the team. A sequence gives one policy per stage (its
        length is checked against the graph's stages at ``build()``).
    fuse : bool or int, default True
        ``True`` runs consecutive stages of sample-local nodes (ufunc nodes, eagle's
        kernels, native kernels declared ``sample_local``) that meet only through
        per-sample arrays tile by tile, each tile sized to stay in cache; ``False`` runs
        every stage whole; an int > 0 is the tile in samples. The results are the same,
        bit for bit; ``plan()`` and ``print(g)`` say which stages are fused.
    codegen : bool or None, default None
        Whether a fused run's elementwise ufunc nodes (add, subtract, multiply,
        true_divide, negative, positive, absolute, square, minimum, maximum) run as one
        generated C loop, compiled by the platform's C compiler and cached on disk
        (``eagle.cpu.codegen``): ``True`` always, ``False`` never, ``None`` as the
        ``EAGLE_CODEGEN`` environment variable says (``0``, ``1``), else where the nodes
        write at least 65,536 elements a replay. The results are the same, bit for bit;
        ``plan()`` says which runs are compiled.

    Raises
    ------
    TypeError
        An option given positionally (they are keywords); ``teams`` neither a policy nor a
        sequence of them (bytes, a dict or a set, which has no stage order, are refused).
    ValueError
        A policy or a ``fuse`` value outside those above.

    Examples
    --------
    >>> import eagle
    >>> eagle.CpuOptions(teams="serial", fuse=False)
    CpuOptions(teams='serial', fuse=False, codegen=None)
    """

    teams: Union[str, Sequence[str]] = "auto"
    fuse: Union[bool, int] = True
    codegen: Union[bool, None] = None

    def __post_init__(self):
        teams = self.teams
        if isinstance(teams, str):
            _team_policy(teams, "CpuOptions(teams=...)")
        elif isinstance(teams, (bytes, bytearray, Mapping, Set)):
            raise TypeError(f"CpuOptions(teams=...) is a policy ('auto', 'serial', 'parallel') or a "
                            f"sequence of them, one per stage; got {type(teams).__name__} {teams!r}, which "
                            "is no sequence of policies in stage order")
        else:
            try:
                teams = tuple(teams)
            except TypeError:
                raise TypeError(f"CpuOptions(teams=...) is a policy ('auto', 'serial', 'parallel') or "
                                f"a sequence of them, one per stage; got {type(self.teams).__name__}") from None
            for p in teams:
                _team_policy(p, "CpuOptions(teams=...)")
        object.__setattr__(self, "teams", teams)
        object.__setattr__(self, "fuse", _fuse(self.fuse))
        if self.codegen not in (True, False, None) or not isinstance(self.codegen, (bool, type(None))):
            raise ValueError(f"CpuOptions(codegen=...) is True, False or None (the EAGLE_CODEGEN "
                             f"environment variable, else where it pays), got {self.codegen!r}")

    # fuse=True (a tile sized for the cache) and fuse=1 (tiles of one sample) run
    # differently, though True == 1: equality and hash tell a bool from an int
    def _key(self):
        return self.teams, type(self.fuse) is bool, self.fuse, self.codegen

    def __eq__(self, other):
        if not isinstance(other, CpuOptions):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def policies(self, n_stages: int) -> list[str]:
        """One team policy per stage of a graph of ``n_stages`` stages."""
        if isinstance(self.teams, str):
            return [self.teams] * n_stages
        if len(self.teams) != n_stages:
            raise ValueError(f"CpuOptions(teams=...) needs one policy per stage ({n_stages}), "
                             f"got {len(self.teams)}")
        return list(self.teams)


@dataclass(frozen=True, kw_only=True)
class CudaOptions:
    """How the cuda backend captures a graph (``g.build(cuda=eagle.CudaOptions(...))``).

    Parameters
    ----------
    library_branches : {"serial", "branches"}, default "serial"
        What to do with a stage whose side-by-side opaque nodes both launch cuBLAS /
        cuFFT / cuSOLVER / cuSPARSE / cuDNN kernels: ``"serial"`` captures that stage
        again in order on one stream (such libraries keep one handle and workspace per
        thread, which the branches would share on replay); ``"branches"`` keeps the
        branches (you made sure each has its own handle and workspace).
    branches : bool, default True
        ``True`` captures the nodes of a stage of several as side-by-side branches of the
        CUDA graph, which the GPU may run at once; ``False`` captures them in order on one
        stream (``print(g)`` says ``stream`` for such a stage).

    Raises
    ------
    TypeError
        An option given positionally (they are keywords), ``branches`` not a bool.
    ValueError
        ``library_branches`` other than ``"serial"`` or ``"branches"``.

    Examples
    --------
    >>> import eagle
    >>> eagle.CudaOptions(library_branches="branches")
    CudaOptions(library_branches='branches', branches=True)
    """

    library_branches: str = "serial"
    branches: bool = True

    def __post_init__(self):
        if not isinstance(self.branches, bool):
            raise TypeError(f"CudaOptions(branches=...) is True or False, got {self.branches!r}")
        if not isinstance(self.library_branches, str) or self.library_branches not in ("serial", "branches"):
            raise ValueError(f"CudaOptions(library_branches=...) is 'serial' or 'branches', "
                             f"got {self.library_branches!r}")
