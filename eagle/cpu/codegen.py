"""Generated fused loops: a fused run's elementwise ufunc nodes as one C function.

A fused run (``eagle.cpu.fusion``) runs every node over a tile before the next tile;
each ufunc node is then one pass of NumPy's inner loop over the tile. Here, at build(),
each *group* of two or more consecutive nodes of a run whose loops are in the compiled
set becomes ONE generated C function, called once per tile in place of the group's
node calls (csrc/cpu/plan.h, ``eagle_compiled``; csrc/cpu/tiles.c).

The compiled set: ufunc nodes of ``add``, ``subtract``, ``multiply``, ``true_divide``,
``negative``, ``positive``, ``absolute``, ``square``, ``minimum`` and ``maximum``, over
float64, float32 or integer loops, split over samples, with no ``where=`` and no cast
(every array operand of the loop's dtype; scalars are the loop's constants; no NaN
scalar in ``add``/``multiply``, where NumPy's own loops return either NaN). Each C
operation is NumPy's for that loop, element for element: the same IEEE operation in the
loop's type (``float`` arithmetic stays ``float``: constants are typed bit patterns),
``minimum``/``maximum`` as NumPy's loops (a NaN first operand is returned, else
``a < b ? a : b``), ``add``/``multiply`` of two NaNs the first one's (the C compiler
may swap a commutative operation's operands), ``negative``/``absolute`` as sign-bit
operations and float constants read at run time (else the compiler folds ``-x * -y``,
``fabs(x * x)``, ``x / -1.0``, changing a NaN's sign), integers wrapping; compiled with ``-ffp-contract=off`` and no
fast-math (``eagle.cpu.c_compiler``). So the results are NumPy's bit for bit.

Inside a group the nodes are cut into *segments*: consecutive nodes of one shape whose
written arrays every node of the segment touches only through that very view (the same
data pointer, shape and strides), so that element ``e`` of a node meets only element
``e`` of another. A segment is one loop nest: per element, its nodes in order, a value
a node wrote passed in a register to the nodes that read it (each written view stored
once, its last value). A node joins the segment under way ahead of nodes it commutes with
(no byte in common that either writes). Segments run one after another over the tile, as
the nodes they replace would (legal by the fused run's own rule). A segment's loop runs along the innermost dimension of its rows, over
samples and rows as one loop where every view steps alike (``a[1:]``, ``a[:-1]``).
A view's store is skipped where a later node of the replay overwrites that very view
whole without reading it, and nothing in between may read it (``dead_stores``).

When: ``CpuOptions(codegen=...)``: ``False`` never; ``True`` every group; ``None``
(the default) the ``EAGLE_CODEGEN`` environment variable (``0`` never, ``1`` every
group), else the groups whose nodes write at least ``MIN_ELEMENTS`` elements a replay
(below that the per-node passes over an in-cache tile cost microseconds, and a first
compile about a quarter of a second). No compiler or a failed compile (a warning, once
per process, with the compiler's message) leaves the nodes to run one by one: the same
results. ``plan()`` says which runs are compiled.
"""
from __future__ import annotations

import ctypes
import os
import struct
import warnings

import numpy as np

from eagle.cpu import c_compiler
from eagle.cpu.ufunc_node import UfuncNode, _merged_row
from eagle.record.memory import data_pointer, overlap

__all__ = ["CompiledGroup", "compile_run", "codegen_mode", "MIN_ELEMENTS"]

#: elements written a replay by a group's nodes from which the default compiles it
MIN_ELEMENTS = 1 << 16

_FLOAT = {  # add and multiply commute in C: the compiler may swap their operands, so where both
          # are NaNs the first one's payload is kept explicitly (as NumPy's loops return it)
          # (a select of operands, not of results: an FP operation in a branch is not
          # if-converted under -ftrapping-math, and the loop would not vectorize)
          "add": "({0} + (({0} != {0}) ? {0} : {1}))", "subtract": "({0} - {1})",
          "multiply": "({0} * (({0} != {0}) ? {0} : {1}))",
          "true_divide": "({0} / {1})", "negative": "(-{0})", "positive": "{0}",
          "square": "({0} * {0})",
          # NumPy's loops: a NaN first operand is returned, else the comparison's pick
          "maximum": "(({0} != {0} || {0} > {1}) ? {0} : {1})",
          "minimum": "(({0} != {0} || {0} < {1}) ? {0} : {1})"}
_INT = {"add": "(T)((U){0} + (U){1})", "subtract": "(T)((U){0} - (U){1})",
        "multiply": "(T)((U){0} * (U){1})", "negative": "(T)((U)0 - (U){0})", "positive": "{0}",
        "square": "(T)((U){0} * (U){0})",
        "maximum": "({0} > {1} ? {0} : {1})", "minimum": "({0} < {1} ? {0} : {1})"}
_UFUNCS = {getattr(np, name): name for name in set(_FLOAT) | {"absolute"}}
# (dtype kind, itemsize) -> (C type, unsigned type of the arithmetic, kind)
_CTYPES = {("f", 8): ("double", None, "f"), ("f", 4): ("float", None, "f")}
for _bits in (8, 16, 32, 64):
    _CTYPES["i", _bits // 8] = (f"int{_bits}_t", "uint64_t" if _bits == 64 else "uint32_t", "i")
    _CTYPES["u", _bits // 8] = (f"uint{_bits}_t", "uint64_t" if _bits == 64 else "uint32_t", "u")

_warned = False


def codegen_mode(option) -> str:
    """"off", "on" or "auto" from ``CpuOptions(codegen=...)`` and ``EAGLE_CODEGEN``."""
    if option is True:
        return "on"
    if option is False:
        return "off"
    env = os.environ.get("EAGLE_CODEGEN", "").strip().lower()
    return {"0": "off", "false": "off", "off": "off", "1": "on", "true": "on", "on": "on"}.get(env, "auto")


def _ctype(dt):
    if not isinstance(dt, np.dtype) or not dt.isnative or dt.kind not in "iuf" or dt.fields is not None:
        return None
    return _CTYPES.get((dt.kind, dt.itemsize))


def why_not(node):
    """None if ``node`` is in the compiled set, else why not (a short phrase)."""
    if not isinstance(node, UfuncNode):
        return f"{node.kind} node"
    name = _UFUNCS.get(node.ufunc)
    if name is None:
        return f"{node.ufunc.__name__} is not compiled"
    if node.whole is not None or not node.split:
        return "not split"
    if node.where is not True:
        return "where="
    dts = node.loop_dtypes
    if len(set(dts)) != 1 or _ctype(dts[0]) is None:
        return f"{node.ufunc.__name__}'s loop {'/'.join(str(d) for d in dts)}"
    if _ctype(dts[0])[2] != "f" and name == "true_divide":
        return "integer true_divide"
    if name in ("add", "multiply") and _ctype(dts[0])[2] == "f" and any(
            a is None and np.isnan(c) for a, c in zip(node.operands, node.loop.constants)):
        # NumPy's own loops disagree on which NaN a NaN scalar meets (the scalar's in their
        # vector body, the array's in the remainder): left to NumPy's loop
        return "a NaN constant"
    for a, d in zip(node.operands, dts):
        if a is not None and a.dtype != d:
            return "a cast"
    return None


def _key(a):
    return data_pointer(a), a.shape, a.strides, a.dtype.str


def _shape(node):
    return next((a.shape for a in node.operands if a is not None and a.ndim), ())


def _outputs(node):
    return node.operands[node.ufunc.nin:]


def _legal(nodes) -> bool:
    """Whether element e of each node meets only element e of the others: every view
    that shares memory with a view some node writes is that very view."""
    written = {}
    for node in nodes:
        for w in _outputs(node):
            written.setdefault(_key(w), w)
    for node in nodes:
        for a in node.operands:
            if a is None:
                continue
            ka = _key(a)
            for kw, w in written.items():
                if ka != kw and overlap(a, w):
                    return False
    return True


def _conflicts(x, y) -> bool:
    """Whether nodes x and y touch a byte in common, one of them writing it."""
    for i, a in enumerate(x.operands):
        for j, b in enumerate(y.operands):
            if (a is not None and b is not None and (i >= x.ufunc.nin or j >= y.ufunc.nin)
                    and overlap(a, b)):
                return True
    return False


def segments(nodes) -> list:
    """``nodes`` (compiled-set, in run order) cut into segments (see the module's
    docstring). A node may move ahead of nodes it does not conflict with (they commute)
    to join the segment under way: the chains of a step interleaved stage by stage (a
    row's update beside a column's) then make a loop each."""
    n = len(nodes)
    before = [[j for j in range(i) if _conflicts(nodes[j], nodes[i])] for i in range(n)]
    done = [False] * n
    segs = []
    for _ in range(n):
        ready = [i for i in range(n) if not done[i] and all(done[j] for j in before[i])]
        pick = None
        if segs:
            cur = segs[-1]
            pick = next((i for i in ready if _shape(nodes[i]) == _shape(cur[0])
                         and _legal(cur + [nodes[i]])), None)
        if pick is None:
            pick = ready[0]
            segs.append([nodes[pick]])
        else:
            segs[-1].append(nodes[pick])
        done[pick] = True
    return segs


def _overwrites(node, w) -> bool:
    """Whether ``node`` writes every sample of view ``w`` the writer of ``w`` wrote, through
    that very view, reading none of its bytes: a node of the compiled set (split over
    samples, no ``where=``, a loop that reports no error and so never stops short) whose
    extent is ``w``'s whole axis 0 (it runs over [0, logical size))."""
    if why_not(node) is not None or not node.sized:
        return False
    if not any(o is not None and _key(o) == _key(w) for o in _outputs(node)):
        return False
    if w.ndim == 0 or node.extent() != w.shape[0]:
        return False
    return not any(a is not None and overlap(a, w) for a in node.operands[:node.ufunc.nin])


def dead_stores(seg, seq) -> frozenset:
    """The views segment ``seg`` writes whose store is dead: ``seq`` holds the nodes of
    the segment's fused run from the group's first on, then the plan's later nodes, in
    plan order; a view's store is dead when, after its last writer in ``seg``, the first
    node outside ``seg`` that touches its bytes overwrites it whole (``_overwrites``) and
    every node before that one is a ufunc node (its arrays known; a loop's error is raised
    when the launch ends, so the replay runs on to the overwrite). The later node runs
    in the same replay, over the same samples, before anything reads them, so the
    replay's results are the same; the last writer of a view in a replay always stores."""
    mine = {id(n) for n in seg}
    at = {id(n): i for i, n in enumerate(seq)}
    dead = set()
    for w in {_key(o): o for n in seg for o in _outputs(n) if o is not None}.values():
        last = max(at[id(n)] for n in seg if any(o is not None and _key(o) == _key(w) for o in _outputs(n)))
        for x in seq[last + 1:]:
            if id(x) in mine:
                continue
            if not isinstance(x, UfuncNode):
                break
            if not any(overlap(a, w) for _, a, _ in x.arrays()):   # its where= mask too
                continue
            if _overwrites(x, w):
                dead.add(_key(w))
            break
    return frozenset(dead)


def _constant(value, ctype, kind):
    """An integer constant as a C literal; a float one as its bit pattern (an int64 for
    the params), read at run time: a literal would let the compiler fold ``x * -1.0``
    into ``-x``, which flips a NaN's sign where NumPy's multiply keeps it."""
    v = np.asarray(value)
    if kind == "f":
        if ctype == "double":
            return struct.unpack('<q', struct.pack('<d', float(v)))[0]
        return struct.unpack('<i', struct.pack('<f', np.float32(v)))[0]
    bits = int(v) & ((1 << (8 * v.dtype.itemsize)) - 1)
    return f"(({ctype})(uint64_t)0x{bits:x}ULL)"


class _Segment:
    """One segment's C function and its part of the params."""

    def __init__(self, k, nodes, slots, params, dead=frozenset()):
        self.k, self.nodes, self.dead = k, nodes, dead
        shape = _shape(nodes[0])
        views = {}   # key -> (index, array)
        for node in nodes:
            for a in node.operands:
                if a is not None:
                    views.setdefault(_key(a), (len(views), a))
        order = sorted(views.values())
        written = {_key(w) for node in nodes for w in _outputs(node)}
        n = shape[0] if shape else 1
        extents = [node.extent() for node in nodes if node.sized]
        extent = min([e for e in extents if e is not None] or [n])
        row = shape[1:]
        s0 = [a.strides[0] if a.ndim else 0 for _, a in order]
        rs = [a.strides[1:] if a.ndim else (0,) * len(row) for _, a in order]
        dims, per = _merged_row(row, rs) if row else ([], [[] for _ in order])
        if not dims:
            flat, length, steps = True, 1, s0
        elif len(dims) == 1 and all(s == p[0] * dims[0] for s, p in zip(s0, per)):
            flat, length, steps = True, dims[0], [p[0] for p in per]
        else:
            flat = False
        base = len(params)
        params.append(extent)
        lines = [f"static void seg_{k}(int64_t lo, int64_t hi, char **data, const int64_t *P)", "{",
                 f"    if (hi > P[{base}]) hi = P[{base}];", "    if (lo >= hi) return;"]
        loads = []   # per view: how element j is read, how it is written (C expressions)
        formals, actuals = [], []   # the row function's parameters, the driver's arguments
        if flat:
            params.append(length)
            lines.append(f"    const int64_t n = (hi - lo) * P[{base + 1}];")
        else:
            params.extend(dims)
            for d in range(len(dims)):
                lines.append(f"    const int64_t D{d} = P[{base + 1 + d}];")
        for v, ((idx, a), sv) in enumerate(zip(order, s0)):
            key = _key(a)
            ctype = _ctype(a.dtype)[0]
            slot = slots.setdefault(key, len(slots))
            const = "" if key in written else "const "
            p_at = len(params)
            if flat:
                params.extend([sv, steps[v]])
                step, origin = steps[v], f"data[{slot}] + lo * P[{p_at}]"
                stride_at = p_at + 1
            else:
                params.extend([sv] + list(per[v]))
                step = per[v][-1]
                origin = f"data[{slot}] + i * P[{p_at}]" + "".join(
                    f" + o{d} * P[{p_at + 1 + d}]" for d in range(len(dims) - 1))
                stride_at = p_at + len(dims)
            if a.ndim == 0:
                # a 0-d array: read once a call
                lines.append(f"    const {ctype} c{v} = *(const {ctype} *)(data[{slot}]);")
                formals.append(f"const {ctype} c{v}")
                actuals.append(f"c{v}")
                loads.append((f"c{v}", None))
            elif step == a.dtype.itemsize:
                formals.append(f"{const}{ctype} *restrict v{v}")
                actuals.append(f"({const}{ctype} *)({origin})")
                loads.append((f"v{v}[j]", f"v{v}[j]"))
            else:
                formals += [f"{const}char *restrict v{v}", f"const int64_t st{v}"]
                actuals += [f"{origin}", f"P[{stride_at}]"]
                loads.append((f"*({const}{ctype} *)(v{v} + j * st{v})", f"*({ctype} *)(v{v} + j * st{v})"))
        consts = []   # (C type, bits) of each float constant: the row function's parameters
        body = self._body(order, loads, consts)
        for c, (ctype, bits) in enumerate(consts):
            formals.append(f"const {ctype} k{c}")
            actuals.append(f"eg_f64((uint64_t)P[{len(params)}])" if ctype == "double"
                           else f"eg_f32((uint32_t)P[{len(params)}])")
            params.append(bits)
        # the elements of a row (or of the tile, flat) in a function of their own: its
        # restrict parameters tell the compiler the views written do not alias the others
        row_fn = ([f"static __attribute__((noinline)) void row_{k}(const int64_t n, {', '.join(formals)})",
                   "{", "    for (int64_t j = 0; j < n; ++j) {"] + [f"        {b}" for b in body] + ["    }", "}"])
        call = f"row_{k}({{n}}, {', '.join(actuals)});"
        if flat:
            lines.append("    " + call.format(n="n"))
        else:
            ind = "    "
            lines.append(f"{ind}for (int64_t i = lo; i < hi; ++i) {{")
            for d in range(len(dims) - 1):
                ind += "    "
                lines.append(f"{ind}for (int64_t o{d} = 0; o{d} < D{d}; ++o{d}) {{")
            lines.append(f"{ind}    " + call.format(n=f"D{len(dims) - 1}"))
            for _ in range(len(dims)):
                lines.append(f"{ind}}}")
                ind = ind[:-4]
        lines.append("}")
        self.source = "\n".join(row_fn + lines)

    def _body(self, order, loads, consts):
        index = {_key(a): v for v, (_, a) in enumerate(order)}
        held = {}   # view -> the register holding what a node of the segment wrote there
        body = []
        r = 0
        for node in self.nodes:
            name = _UFUNCS[node.ufunc]
            ctype, utype, kind = _ctype(node.loop_dtypes[0])
            args = []
            for a, c in zip(node.operands[:node.ufunc.nin], node.loop.constants[:node.ufunc.nin]):
                if a is None:
                    c = _constant(c, ctype, kind)
                    if kind == "f":
                        consts.append((ctype, c))
                        c = f"k{len(consts) - 1}"
                    args.append(c)
                    continue
                v = index[_key(a)]
                args.append(held.get(v) or loads[v][0])
            names = []
            for a in args:
                body.append(f"const {ctype} x{r} = {a};")
                names.append(f"x{r}")
                r += 1
            width = "32" if ctype == "float" else "64"
            if kind == "f" and name in ("negative", "absolute"):
                # the sign bit flipped or cleared as integers: the compiler folds a float
                # negation or fabs away where a NaN's sign is all it changes
                expr = f"eg_{name[:3]}{width}({names[0]})"
            elif name == "absolute":
                expr = (names[0] if kind == "u" else
                        f"({names[0]} < 0 ? (T)((U)0 - (U){names[0]}) : {names[0]})")
            elif kind == "f" and name in ("add", "multiply") and (
                    args[0] == args[1] or any(a is None and not np.isnan(c) for a, c in
                                              zip(node.operands, node.loop.constants[:2]))):
                # at most one operand can be a NaN: its payload whatever the operands' order
                expr = f"({names[0]} {'+' if name == 'add' else '*'} {names[1]})"
            else:
                expr = (_FLOAT if kind == "f" else _INT)[name].format(*names)
            expr = expr.replace("(T)", f"({ctype})").replace("(U)", f"({utype})")
            body.append(f"const {ctype} x{r} = {expr};")
            held[index[_key(_outputs(node)[0])]] = f"x{r}"
            r += 1
        # each view written stored once, its last value (the others were passed in
        # registers), unless a later node of the replay overwrites it unread (dead_stores)
        body += [f"{loads[v][1]} = {x};" for v, x in held.items() if _key(order[v][1]) not in self.dead]
        return body


_HEADER = """#include <stdint.h>
#include <string.h>
static inline double eg_f64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
static inline float eg_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline double eg_neg64(double x) { uint64_t u; memcpy(&u, &x, 8); u ^= 1ULL << 63; memcpy(&x, &u, 8); return x; }
static inline double eg_abs64(double x) { uint64_t u; memcpy(&u, &x, 8); u &= ~(1ULL << 63); memcpy(&x, &u, 8); return x; }
static inline float eg_neg32(float x) { uint32_t u; memcpy(&u, &x, 4); u ^= 1U << 31; memcpy(&x, &u, 4); return x; }
static inline float eg_abs32(float x) { uint32_t u; memcpy(&u, &x, 4); u &= ~(1U << 31); memcpy(&x, &u, 4); return x; }
"""


class CompiledGroup:
    """Nodes [first, first + count) of a fused run (offsets in its stage) as one generated
    function: what ``CpuPlan(compiled=...)`` takes (csrc/cpu/plan.h, ``eagle_compiled``)."""

    def __init__(self, first, nodes, after=()):
        """``after``: the nodes that follow the group in plan order (the rest of its run,
        then the plan's later nodes), for ``dead_stores``."""
        self.first, self.count = first, len(nodes)
        self.segments = segments(nodes)
        slots, params = {}, []
        seq = list(nodes) + list(after)
        segs = [_Segment(k, seg, slots, params, dead_stores(seg, seq))
                for k, seg in enumerate(self.segments)]
        self.dead = sum(len(s.dead) for s in segs)
        self.source = _HEADER + "\n".join(s.source for s in segs) + (
            "\nvoid eagle_fused(int64_t lo, int64_t hi, char **data, const int64_t *P, void *ud)\n{\n"
            "    (void)ud;\n" + "".join(f"    seg_{k}(lo, hi, data, P);\n" for k in range(len(segs))) + "}\n")
        self._data = np.zeros(max(len(slots), 1), dtype=np.uintp)
        for key, slot in slots.items():
            self._data[slot] = key[0]
        self._params = np.array(params or [0], dtype=np.int64)
        self.data_address = self._data.ctypes.data
        self.params_address = self._params.ctypes.data
        self._lib = None
        self.fn_address = None

    def load(self):
        """Compile (or load from the cache); ``c_compiler.CompileError``."""
        self._lib = c_compiler.load(self.source, symbol="eagle_fused")
        self.fn_address = ctypes.cast(self._lib.eagle_fused, ctypes.c_void_p).value

    def __repr__(self):
        return f"CompiledGroup(nodes {self.first}-{self.first + self.count - 1}, {len(self.segments)} loops)"


def _work(nodes) -> int:
    return sum(w.size for node in nodes for w in _outputs(node))


def compile_run(nodes, mode, later=()):
    """(the compiled groups of a fused run's ``nodes`` (in plan order), a note for
    ``plan()``: "" when nothing was to be compiled). ``later``: the nodes of the plan
    after the run, in plan order (a store they overwrite unread is skipped)."""
    if mode == "off":
        return [], ""
    groups, current = [], []
    spans = []
    for k, node in enumerate(nodes + [None]):
        if node is not None and why_not(node) is None:
            current.append(k)
            continue
        if len(current) >= 2:
            spans.append(current)
        current = []
    if mode == "auto":
        spans = [s for s in spans if _work([nodes[k] for k in s]) >= MIN_ELEMENTS]
    if not spans:
        return [], ""
    failure = None
    for s in spans:
        grp = CompiledGroup(s[0], [nodes[k] for k in s], nodes[s[-1] + 1:] + list(later))
        try:
            grp.load()
        except c_compiler.CompileError as e:
            failure = str(e)
            _warn(failure)
            continue
        groups.append(grp)
    if not groups:
        return [], f"not compiled: {failure.splitlines()[0][:120]}"
    done = sum(g.count for g in groups)
    loops = sum(len(g.segments) for g in groups)
    dead = sum(g.dead for g in groups)
    return groups, (f"compiled: {done} of {len(nodes)} nodes in {loops} "
                    f"generated loop{'s' if loops > 1 else ''}"
                    + (f"; {dead} store{'s' if dead > 1 else ''} skipped (overwritten later in the replay)"
                       if dead else ""))


def _warn(message):
    global _warned
    if _warned or message.startswith("no C compiler"):
        return
    _warned = True
    warnings.warn(f"eagle: a fused run could not be compiled, its nodes run one by one "
                  f"(the same results): {message}", RuntimeWarning, stacklevel=4)
