"""eagle's CUDA shim against the real driver header's prototypes (no GPU needed).

The shim declares the driver's function types and structs itself (it never includes
cuda.h) and asks cuGetProcAddress for each entry point at the CUDA version whose ABI its
type has (the table's ``abi``). A C++ program compiled against the real cuda.h and
cudaTypedefs.h static-asserts, for every entry of the shim's table, that the form the
driver hands out at that version (``PFN_<name>_v<version>``, the newest at or below it)
has exactly the shim's type, each argument compared after a mapping of the driver's
types onto eagle's: opaque handles (CUstream, CUgraph, ...) and ``void *`` alike, enums
and integers by size and signedness, const dropped (it changes no ABI), the driver's
structs onto eagle's copies; and that each eagle struct has the real one's size and
field offsets. A ``void *`` where the driver takes a ``CUgraph *``, a
``CUDA_KERNEL_NODE_PARAMS`` of the old form, an ``int`` for a ``size_t`` or one argument
too few all fail to compile, naming the entry point.
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cuda_headers
import shim_table

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "csrc" / "include"
SHIM_IMPL = INCLUDE / "eagle" / "detail" / "cuda_shim_impl.h"
HEADERS = cuda_headers.include_dir()

pytestmark = pytest.mark.skipif(HEADERS is None, reason=cuda_headers.SKIP_REASON)

# the driver's opaque handle structs (CUstream == CUstream_st *, ...)
OPAQUE = ["CUctx_st", "CUstream_st", "CUevent_st", "CUgraph_st", "CUgraphNode_st",
          "CUgraphExec_st", "CUfunc_st", "CUkern_st", "CUmod_st", "CUlib_st"]

# (eagle struct, driver struct, fields compared by offset)
STRUCTS = [
    ("eagle_CUDA_KERNEL_NODE_PARAMS_v2", "CUDA_KERNEL_NODE_PARAMS_v2",
     ["func", "gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ",
      "sharedMemBytes", "kernelParams", "extra", "kern", "ctx"]),
    ("eagle_CUDA_GRAPH_INSTANTIATE_PARAMS", "CUDA_GRAPH_INSTANTIATE_PARAMS",
     ["flags", "hUploadStream", "hErrNode_out", "result_out"]),
    ("eagle_CUgraphExecUpdateResultInfo", "CUgraphExecUpdateResultInfo",
     ["result", "errorNode", "errorFromNode"]),
    ("eagle_CUgraphEdgeData", "CUgraphEdgeData", ["from_port", "to_port", "type", "reserved"]),
    ("eagle_CUDA_CONDITIONAL_NODE_PARAMS", "CUDA_CONDITIONAL_NODE_PARAMS",
     ["handle", "type", "size", "phGraph_out", "ctx"]),
    ("eagle_CUgraphNodeParams", "CUgraphNodeParams", ["type", "reserved0", "reserved2"]),
]

PRELUDE = r"""
#include <stddef.h>
#include <type_traits>
#include <cuda.h>
#include <cudaTypedefs.h>
#include "eagle/detail/cuda_shim_impl.h"

struct Handle {};                                   /* any opaque handle, or void * */
template <size_t Size, bool Signed> struct Int {};  /* integers and enums */
template <class R, class... A> struct Fn {};

template <class T, class = void> struct NN { using type = T; };
template <class T> struct N { using type = typename NN<typename std::remove_cv<T>::type>::type; };
template <class T>
struct NN<T, typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, char>::value &&
                                     !std::is_same<T, bool>::value>::type> {
    using type = Int<sizeof(T), std::is_signed<T>::value>;
};
template <class T> struct NN<T, typename std::enable_if<std::is_enum<T>::value>::type> {
    using type = Int<sizeof(T), true>;
};
template <class T> struct NN<T *> { using type = typename N<T>::type *; };
template <> struct NN<void *> { using type = Handle; };
template <> struct NN<const void *> { using type = Handle; };
template <class R, class... A> struct NN<R (*)(A...)> {
    using type = Fn<typename N<R>::type, typename N<A>::type...>;
};
#define OPAQUE(s) template <> struct NN<struct s *> { using type = Handle; };
#define SAME_STRUCT(e, d) template <> struct NN<d> { using type = e; };
#define SAME_TYPE(pfn, ours, what) \
    static_assert(std::is_same<N<pfn>::type, N<ours>::type>::value, what);
"""


def _entries():
    """[(field, symbol, abi, eagle type)] of the shim's entry table."""
    src = SHIM_IMPL.read_text()
    field_type = shim_table.field_types(src)
    rows = re.findall(r'EAGLE_E\((\w+), "(\w+)", \d+, \d+, (\d+), [01]\)', src)
    assert len(rows) > 40, "the shim's entry table was not found"
    assert len(rows) == len(re.findall(r"^\s*EAGLE_E\(", src, re.M)), "an entry the check cannot read"
    return [(f, name, int(abi), field_type[f]) for f, name, abi in rows]


def _forms():
    """{symbol: [versions]} of cudaTypedefs.h's PFN_<symbol>_v<version> typedefs."""
    forms = {}
    text = (HEADERS / "cudaTypedefs.h").read_text()
    for name, ver in re.findall(r"typedef CUresult \(CUDAAPI \*PFN_(\w+?)_v(\d+)\)", text):
        forms.setdefault(name, []).append(int(ver))
    return forms


def program(entries, forms):
    """The C++ check of ``entries`` against the header's ``forms``; raises if an entry
    point has no form at its abi version (the driver would refuse the request)."""
    lines = [PRELUDE]
    lines += [f"OPAQUE({s})" for s in OPAQUE]
    lines += [f"SAME_STRUCT({e}, {d})" for e, d, _ in STRUCTS]
    for e, d, fields in STRUCTS:
        lines.append(f'static_assert(sizeof({e}) == sizeof({d}), "sizeof {e}");')
        for f in fields:
            lines.append(f'static_assert(offsetof({e}, {f}) == offsetof({d}, {f}), "{e}.{f}");')
    lines.append('static_assert(offsetof(eagle_CUgraphNodeParams, u.conditional) == '
                 'offsetof(CUgraphNodeParams, conditional), "eagle_CUgraphNodeParams.conditional");')
    missing = []
    for field, name, abi, ours in entries:
        handed = max((v for v in forms.get(name, []) if v <= abi), default=None)
        if handed is None:
            missing.append(f"{name} has no form at or below {abi} in cudaTypedefs.h")
            continue
        what = (f"{name} ({field}): asked at {abi}, the driver hands out PFN_{name}_v{handed}, "
                f"whose prototype is not {ours}")
        lines.append(f'SAME_TYPE(PFN_{name}_v{handed}, {ours}, "{what}")')
    assert not missing, "\n".join(missing)
    lines.append("int main(void) { return 0; }")
    return "\n".join(lines) + "\n"


def _compile(tmp_path, source):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "prototypes.cpp"
    src.write_text(source)
    return subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-I", str(INCLUDE), "-I", str(HEADERS),
                           str(src)], capture_output=True, text=True, timeout=300)


def test_every_entry_point_has_the_prototype_of_eagles_type(tmp_path):
    r = _compile(tmp_path, program(_entries(), _forms()))
    assert r.returncode == 0, "\n".join(l for l in r.stderr.splitlines() if "static assertion" in l
                                        or "error" in l) or r.stderr


@pytest.mark.parametrize("entry,message", [
    # cuGraphKernelNodeGetParams asked at 10000: the CUDA 10 form takes CUDA_KERNEL_NODE_PARAMS_v1
    (("GraphKernelNodeGetParams", "cuGraphKernelNodeGetParams", 10000, "eagle_cu_kn_get"),
     "cuGraphKernelNodeGetParams (GraphKernelNodeGetParams): asked at 10000"),
    # the 12.3 cuStreamGetCaptureInfo (edge data) through the 12.0-12.2 type
    (("CaptureInfoV2", "cuStreamGetCaptureInfo", 12030, "eagle_cu_capture_info_v2"),
     "cuStreamGetCaptureInfo (CaptureInfoV2): asked at 12030"),
    # a CUgraph * out-parameter taken as a handle
    (("GraphChildGraphNodeGetGraph", "cuGraphChildGraphNodeGetGraph", 10000, "eagle_cu_hh"),
     "cuGraphChildGraphNodeGetGraph (GraphChildGraphNodeGetGraph)"),
    # cuGraphExecUpdate at its CUDA 10.2 form (CUgraphNode *, CUgraphExecUpdateResult *)
    (("GraphExecUpdate", "cuGraphExecUpdate", 10020, "eagle_cu_exec_update"),
     "cuGraphExecUpdate (GraphExecUpdate): asked at 10020"),
])
def test_a_wrong_type_or_version_fails_to_compile_naming_the_entry_point(tmp_path, entry, message):
    """The check itself: an entry whose type or version is wrong is refused, by name."""
    r = _compile(tmp_path, program([entry], _forms()))
    assert r.returncode != 0 and message in r.stderr, r.stderr
