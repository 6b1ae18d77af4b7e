"""eagle's CUDA runtime shim, exercised against a CPU stand-in of the runtime.

No GPU needed: tests/cuda_standin/fake_cudart.c (a test double) executes
"kernels" that are host functions of a test-only convention (see its header
comment). Also checked here: the shim's struct declarations against the real
CUDA headers (when installed), the C++ face against the stand-in, and that
the seed page's C++ example compiles with nvcc (running it needs a GPU).
"""
import ctypes
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_python(code, env_extra, timeout=60):
    """Run code in a fresh interpreter (the shim binds a runtime once per process)."""
    env = dict(os.environ)
    env.pop("EAGLE_CUDA_RUNTIME", None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))

INCLUDE = ROOT / "csrc" / "include"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
CUDA_HEADER = CUDA_HOME / "include" / "cuda_runtime_api.h"


def kernel(fake, name):
    return ctypes.cast(getattr(fake, name), ctypes.c_void_p).value


def ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def capture_add_one(c, fake, stream, a, n=None, block=4):
    n = a.size if n is None else n
    grid = (n + block - 1) // block
    with stream.capture() as cap:
        c.launch_kernel(kernel(fake, "fake_kernel_add_one"), grid, block,
                        [ptr(a), ctypes.c_int64(n)], stream=stream)
        node = stream.last_node()
    return cap.graph, node


# ---- loading and errors ------------------------------------------------------------

def test_binds_the_standin(cuda_mod, fake_cudart_path):
    assert cuda_mod.is_loaded()
    assert cuda_mod.library() == fake_cudart_path
    assert cuda_mod.runtime_version() == 13000
    assert cuda_mod.device_count() == 1
    assert "libfake_cudart" in cuda_mod.runtime_status()


def test_error_names_and_text(cuda_mod):
    c = cuda_mod
    assert c.status_name(0) == "cudaSuccess"
    assert c.status_name(1) == "cudaErrorInvalidValue"
    assert c.status_text(1) == "invalid argument"
    assert c.status_name(c.ERROR_NOT_LOADED) == "eagleCudaErrorNotLoaded"
    assert c.status_name(c.ERROR_UNSUPPORTED_NODE) == "eagleCudaErrorUnsupportedNode"
    assert c.check_status(0) is None
    with pytest.raises(c.CudaError) as info:
        c.check_status(98, "launching")
    e = info.value
    assert isinstance(e, RuntimeError)
    assert (e.status, e.name, e.text) == (98, "cudaErrorInvalidDeviceFunction", "invalid device function")
    assert str(e) == "launching: cudaErrorInvalidDeviceFunction: invalid device function"
    import eagle
    if hasattr(eagle, "CudaError"):
        assert eagle.CudaError is c.CudaError


def test_unknown_function_pointer_is_invalid_device_function(cuda_mod, fake):
    s = cuda_mod.Stream()
    with pytest.raises(cuda_mod.CudaError, match="cudaErrorInvalidDeviceFunction"):
        cuda_mod.launch_kernel(kernel(fake, "fake_cudart_reset"), 1, 1, [], stream=s)


# ---- capture and replay -------------------------------------------------------------

def test_capture_records_instead_of_running_then_replays(cuda_mod, fake):
    c = cuda_mod
    a = np.zeros(8)
    s = c.Stream()
    g, node = capture_add_one(c, fake, s, a)
    assert not a.any(), "captured work must not run during capture"
    assert g.nodes() == [node]
    assert c.kernel_node_params(node)["grid"] == (2, 1, 1)
    e = g.instantiate()
    assert e.launch(s, 5) == 5
    s.synchronize()
    assert fake.fake_cudart_launch_count() == 5
    assert fake.fake_cudart_counter(b"kernel_runs") == 5
    np.testing.assert_array_equal(a, 5.0)
    assert e.launch(s, 0) == 0
    with pytest.raises(ValueError):
        e.launch(s, -1)


def test_eager_launch_outside_capture_runs(cuda_mod, fake):
    a = np.zeros(4)
    cuda_mod.launch_kernel(kernel(fake, "fake_kernel_add_one"), 1, 4, [ptr(a), ctypes.c_int64(4)])
    np.testing.assert_array_equal(a, 1.0)


def test_fork_join_side_by_side_nodes(cuda_mod, fake):
    """The seed graph's shape: l and r side by side, join after both."""
    c = cuda_mod
    x = np.arange(4.0)
    left, right, out = np.zeros(4), np.zeros(4), np.zeros(4)
    s0, s1, s2 = c.Stream(), c.Stream(), c.Stream()
    fork_ev, ev1, ev2 = c.Event(), c.Event(), c.Event()
    owners = c.NodeOwners(s0)
    n4 = ctypes.c_int64(4)
    with s0.capture() as cap:
        c.fork(s0, [s1, s2], fork_ev)
        c.launch_kernel(kernel(fake, "fake_kernel_scale"), 1, 4,
                        [ptr(left), ptr(x), ctypes.c_double(2.0), n4], stream=s1)
        l_node = s1.last_node()
        owners.mark(0)
        c.launch_kernel(kernel(fake, "fake_kernel_scale"), 1, 4,
                        [ptr(right), ptr(x), ctypes.c_double(3.0), n4], stream=s2)
        owners.mark(1)
        c.join(s0, [s1, s2], [ev1, ev2])
        status, _, _, deps = s0.capture_info()
        assert status == c.CAPTURE_STATUS_ACTIVE and len(deps) == 2
        c.launch_kernel(kernel(fake, "fake_kernel_add"), 1, 4,
                        [ptr(out), ptr(left), ptr(right), n4], stream=s0)
        j_node = s0.last_node()
        owners.mark(2)
    g = cap.graph
    assert len(g.nodes()) == 3 and len(owners) == 3
    assert owners.owner(l_node) == 0 and owners.owner(j_node) == 2
    assert not s1.is_capturing() and not s2.is_capturing()
    e = g.instantiate(upload_stream=s0)
    e.launch(s0, 3)
    np.testing.assert_array_equal(left, 2 * x)
    np.testing.assert_array_equal(out, 2 * x + 3 * x)
    assert fake.fake_cudart_counter(b"kernel_runs") == 9


def test_unjoined_fork_fails_and_stream_stays_usable(cuda_mod, fake):
    c = cuda_mod
    a, b = np.zeros(4), np.zeros(4)
    s0, s1 = c.Stream(), c.Stream()
    s0.begin_capture()
    c.fork(s0, [s1], c.Event())
    c.launch_kernel(kernel(fake, "fake_kernel_add_one"), 1, 4, [ptr(a), ctypes.c_int64(4)], stream=s1)
    with pytest.raises(c.CudaError) as info:
        s0.end_capture()
    assert info.value.name == "cudaErrorStreamCaptureUnjoined"
    assert not s0.is_capturing() and not s1.is_capturing()
    g, _ = capture_add_one(c, fake, s0, b)
    g.instantiate().launch(s0)
    np.testing.assert_array_equal(b, 1.0)
    assert not a.any()


def test_capture_context_always_ends(cuda_mod, fake):
    c = cuda_mod
    s = c.Stream()
    with pytest.raises(ZeroDivisionError):
        with s.capture():
            1 / 0
    assert s.capture_status() == c.CAPTURE_STATUS_NONE
    # an illegal operation during capture invalidates it: the error names why
    with pytest.raises(c.CudaError) as info:
        with s.capture():
            s.synchronize()
    assert info.value.name == "cudaErrorStreamCaptureUnsupported"
    assert s.capture_status() == c.CAPTURE_STATUS_NONE
    # a failed call inside a capture that is then ended: invalidated capture
    s.begin_capture()
    fake.fake_cudart_fail_next(b"cudaLaunchKernel", 1, 1)
    with pytest.raises(c.CudaError):
        c.launch_kernel(kernel(fake, "fake_kernel_add_one"), 1, 1,
                        [ctypes.c_void_p(0), ctypes.c_int64(0)], stream=s)
    with pytest.raises(c.CudaError) as info:
        s.end_capture()
    assert info.value.name == "cudaErrorStreamCaptureInvalidated"
    assert not s.is_capturing()


def test_begin_capture_twice_is_an_error(cuda_mod, fake):
    s = cuda_mod.Stream()
    s.begin_capture()
    with pytest.raises(cuda_mod.CudaError, match="cudaErrorIllegalState"):
        s.begin_capture()
    s.end_capture()


# ---- instantiate ----------------------------------------------------------------------

def test_failed_instantiate_names_the_eagle_node(cuda_mod, fake):
    c = cuda_mod
    arrays = [np.zeros(4) for _ in range(3)]
    s = c.Stream()
    owners = c.NodeOwners(s)
    with s.capture() as cap:
        for i, a in enumerate(arrays):
            c.launch_kernel(kernel(fake, "fake_kernel_add_one"), 1, 4, [ptr(a), ctypes.c_int64(4)], stream=s)
            owners.mark(i)
    fake.fake_cudart_fail_instantiate_at_node(1)
    with pytest.raises(c.CudaError) as info:
        cap.graph.instantiate(owners=owners, names=["l", "r", "join"])
    e = info.value
    assert (e.node_index, e.node_name) == (1, "r")
    assert e.name == "cudaErrorNotSupported"
    assert "'r'" in str(e) and "cudaGraphInstantiateError" in str(e)
    fake.fake_cudart_fail_instantiate_at_node(-1)
    cap.graph.instantiate(owners=owners).launch(s)  # the graph is still usable
    for a in arrays:
        np.testing.assert_array_equal(a, 1.0)


def test_failed_launch_reports_replay_and_exec_stays_usable(cuda_mod, fake):
    c = cuda_mod
    a = np.zeros(4)
    s = c.Stream()
    g, _ = capture_add_one(c, fake, s, a)
    e = g.instantiate()
    fake.fake_cudart_fail_next(b"cudaGraphLaunch", 3, 719)
    with pytest.raises(c.CudaError) as info:
        e.launch(s, 5)
    assert info.value.name == "cudaErrorLaunchFailure"
    assert "replay 2 of 5" in str(info.value)
    assert fake.fake_cudart_launch_count() == 2
    e.launch(s, 1)
    np.testing.assert_array_equal(a, 3.0)


def test_exec_update_rebinds_arguments(cuda_mod, fake):
    c = cuda_mod
    a, b = np.zeros(4), np.zeros(4)
    s = c.Stream()
    ga, _ = capture_add_one(c, fake, s, a)
    gb, _ = capture_add_one(c, fake, s, b)
    e = ga.instantiate()
    e.update(gb)
    e.launch(s, 2)
    assert not a.any()
    np.testing.assert_array_equal(b, 2.0)


# ---- retune -------------------------------------------------------------------------

def test_set_logical_size_patches_grid_and_size_argument(cuda_mod, fake):
    c = cuda_mod
    a = np.zeros(10)
    s = c.Stream()
    g, node = capture_add_one(c, fake, s, a, block=4)
    e = g.instantiate()
    e.add_sized_kernel(node, nargs=2, size_index=1, size_type="int64")
    assert c.retune_uses_driver()
    e.set_logical_size(3)
    e.launch(s)
    assert fake.fake_cudart_last_grid_x() == 1
    np.testing.assert_array_equal(a, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    e.set_logical_size(10)
    e.launch(s)
    assert fake.fake_cudart_last_grid_x() == 3
    np.testing.assert_array_equal(a, [2, 2, 2, 1, 1, 1, 1, 1, 1, 1])
    e.set_logical_size(0)  # an empty grid cannot launch: one block that sees n = 0
    e.launch(s)
    assert fake.fake_cudart_last_grid_x() == 1
    np.testing.assert_array_equal(a, [2, 2, 2, 1, 1, 1, 1, 1, 1, 1])
    assert fake.fake_cudart_counter(b"driver_exec_set_params") == 3
    # the recording itself is untouched: retune always starts from it
    assert c.kernel_node_params(node)["grid"] == (3, 1, 1)
    with pytest.raises(ValueError):
        e.set_logical_size(-1)
    with pytest.raises(ValueError):
        e.add_sized_kernel(node, nargs=2, size_index=2)


def test_retune_failure_raises(cuda_mod, fake):
    c = cuda_mod
    a = np.zeros(4)
    s = c.Stream()
    g, node = capture_add_one(c, fake, s, a)
    e = g.instantiate()
    e.add_sized_kernel(node, 2, 1)
    fake.fake_cudart_fail_next(b"cuGraphExecKernelNodeSetParams", 1, 1)
    with pytest.raises(c.CudaError, match="retuning sized kernel node 0"):
        e.set_logical_size(2)


def test_one_off_retune_and_node_not_in_graph(cuda_mod, fake):
    c = cuda_mod
    a, b = np.zeros(8), np.zeros(8)
    s = c.Stream()
    ga, na = capture_add_one(c, fake, s, a)
    gb, nb = capture_add_one(c, fake, s, b)
    e = ga.instantiate()
    c.retune_kernel_node(e, na, 2, 1, ctypes.c_int64(2), (1,))
    e.launch(s)
    np.testing.assert_array_equal(a, [1, 1, 0, 0, 0, 0, 0, 0])
    with pytest.raises(c.CudaError, match="cudaErrorInvalidValue"):
        c.retune_kernel_node(e, nb, 2, 1, ctypes.c_int64(2), (1,))


RETUNE_SCRIPT = r"""
import ctypes, os, numpy as np
from eagle import _cuda as c
lib = ctypes.CDLL(os.environ["EAGLE_CUDA_RUNTIME"])
lib.fake_cudart_counter.argtypes = [ctypes.c_char_p]
f = ctypes.cast(lib.fake_kernel_add_one, ctypes.c_void_p).value
a = np.zeros(8)
s = c.Stream()
with s.capture() as cap:
    c.launch_kernel(f, 2, 4, [ctypes.c_void_p(a.ctypes.data), ctypes.c_int64(8)], stream=s)
    node = s.last_node()
e = cap.graph.instantiate()
e.add_sized_kernel(node, 2, 1)
e.set_logical_size(5)
e.launch(s)
print(c.retune_uses_driver(), a.tolist(),
      lib.fake_cudart_counter(b"cudaGraphExecKernelNodeSetParams"),
      lib.fake_cudart_counter(b"cudaStreamGetCaptureInfo_v2"))
"""


def test_retune_through_runtime_api_without_driver_entry_points(fake_cudart_path, cuda_mod):
    r = run_python(RETUNE_SCRIPT, {"EAGLE_CUDA_RUNTIME": fake_cudart_path,
                                   "FAKE_CUDART_NO_DRIVER_ENTRY": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("]")[0] + "]" == "False [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]"
    assert r.stdout.split()[-2] == "1"


def test_cuda12_capture_info_entry_point(fake_cudart_path, cuda_mod):
    """A CUDA 12.0-12.2 runtime: the shim must call cudaStreamGetCaptureInfo_v2."""
    r = run_python(RETUNE_SCRIPT, {"EAGLE_CUDA_RUNTIME": fake_cudart_path,
                                   "FAKE_CUDART_VERSION": "12020"})
    assert r.returncode == 0, r.stderr
    assert "[1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]" in r.stdout
    assert int(r.stdout.split()[-1]) >= 1


# ---- objects, threads -------------------------------------------------------------

def test_close_releases_everything(cuda_mod, fake):
    import gc
    c = cuda_mod
    gc.collect()  # objects left by earlier tests
    base = {k: fake.fake_cudart_live(k.encode()) for k in ("stream", "event", "graph", "exec")}
    a = np.zeros(4)
    s, ev = c.Stream(), c.Event()
    g, _ = capture_add_one(c, fake, s, a)
    e = g.instantiate()
    assert fake.fake_cudart_live(b"exec") == base["exec"] + 1
    for obj in (e, g, ev, s):
        obj.close()
        obj.close()  # idempotent
    assert {k: fake.fake_cudart_live(k.encode()) for k in base} == base
    with pytest.raises(ValueError):
        e.launch(None)
    # and collection without close() releases too
    s2 = c.Stream()
    g2, _ = capture_add_one(c, fake, s2, a)
    e2 = g2.instantiate()
    del e2, g2, s2
    gc.collect()
    assert {k: fake.fake_cudart_live(k.encode()) for k in base} == base


def test_borrowed_stream_is_not_destroyed(cuda_mod, fake):
    c = cuda_mod
    owner = c.Stream()
    borrowed = c.Stream.from_ptr(owner.ptr, owner)
    before = fake.fake_cudart_live(b"stream")
    borrowed.close()
    del borrowed
    assert fake.fake_cudart_live(b"stream") == before
    owner.synchronize()


def test_two_threads_launching_one_exec_are_serialized(cuda_mod, fake):
    c = cuda_mod
    a = np.zeros(4)
    s = c.Stream()
    g, _ = capture_add_one(c, fake, s, a)
    e = g.instantiate()
    errors = []

    def work():
        try:
            for _ in range(200):
                e.launch(s, 1)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    ts = [threading.Thread(target=work) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert fake.fake_cudart_launch_count() == 400
    np.testing.assert_array_equal(a, 400.0)


# ---- loading failures (fresh processes: the shim binds once per process) ------------

LOAD_SCRIPT = r"""
from eagle import _cuda as c
try:
    print("LOADED", c.load())
except c.CudaError as e:
    print("STATUS", e.status, e.name)
    print("DETAIL", e.detail)
"""


def test_missing_runtime_message(tmp_path, cuda_mod):
    missing = tmp_path / "libcudart.so.99"
    r = run_python(LOAD_SCRIPT, {"EAGLE_CUDA_RUNTIME": str(missing)})
    assert r.returncode == 0, r.stderr
    assert "STATUS -1 eagleCudaErrorNotLoaded" in r.stdout
    assert f"no CUDA runtime library found (tried EAGLE_CUDA_RUNTIME={missing}" in r.stdout


def test_runtime_without_device_message(fake_cudart_path, cuda_mod):
    r = run_python(LOAD_SCRIPT, {"EAGLE_CUDA_RUNTIME": fake_cudart_path, "FAKE_CUDART_DEVICES": "0"})
    assert "STATUS 100 cudaErrorNoDevice" in r.stdout, r.stdout + r.stderr
    assert (f"CUDA runtime {fake_cudart_path} found but no GPU/driver usable "
            "(cudaGetDeviceCount -> cudaErrorNoDevice: no CUDA-capable device is detected)") in r.stdout
    r = run_python(LOAD_SCRIPT, {"EAGLE_CUDA_RUNTIME": fake_cudart_path, "FAKE_CUDART_NO_DRIVER": "1"})
    assert "cudaGetDeviceCount -> cudaErrorInsufficientDriver" in r.stdout, r.stdout + r.stderr


def test_default_lookup_reports_what_happened(cuda_mod):
    """Without EAGLE_CUDA_RUNTIME: either a runtime is bound, or the message
    says which of the two failures happened (and what was tried)."""
    r = run_python(LOAD_SCRIPT, {})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    if out.startswith("LOADED"):
        return
    assert ("no CUDA runtime library found (tried already-loaded libcudart.so*, "
            "libcudart.so.13, libcudart.so.12, libcudart.so)" in out
            or "found but no GPU/driver usable (cudaGetDeviceCount -> " in out), out


@pytest.mark.skipif(not (CUDA_HOME / "lib64" / "libcudart.so.13").exists()
                    and not (CUDA_HOME / "lib64" / "libcudart.so.12").exists(),
                    reason="no real libcudart in CUDA_HOME/lib64")
def test_real_runtime_binds_every_symbol(cuda_mod):
    """The real runtime exports every symbol the shim needs (only the device
    check may fail on a machine without a GPU)."""
    lib = next(p for p in (CUDA_HOME / "lib64" / "libcudart.so.13", CUDA_HOME / "lib64" / "libcudart.so.12")
               if p.exists())
    r = run_python(LOAD_SCRIPT, {"EAGLE_CUDA_RUNTIME": str(lib)})
    assert r.returncode == 0, r.stderr
    assert "LOADED" in r.stdout or "found but no GPU/driver usable" in r.stdout, r.stdout


# ---- ABI of the shim's declarations against the real headers ----------------------

ABI_CHECK = r"""
#include <stddef.h>
#include <stdio.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include "eagle/cuda_shim.h"

#define SAME_SIZE(a, b) if (sizeof(a) != sizeof(b)) { printf("size %s %zu != %s %zu\n", #a, sizeof(a), #b, sizeof(b)); bad++; }
#define SAME_OFF(a, b, fa, fb) if (offsetof(a, fa) != offsetof(b, fb)) { printf("offset %s.%s\n", #a, #fa); bad++; }
#define SAME_VAL(a, b) if ((long long)(a) != (long long)(b)) { printf("value %s %lld != %s\n", #a, (long long)(a), #b); bad++; }

int main(void) {
    int bad = 0;
    SAME_SIZE(eagle_dim3, dim3);
    SAME_OFF(eagle_dim3, dim3, x, x); SAME_OFF(eagle_dim3, dim3, y, y); SAME_OFF(eagle_dim3, dim3, z, z);
    SAME_SIZE(eagle_cudaStream_t, cudaStream_t); SAME_SIZE(eagle_cudaEvent_t, cudaEvent_t);
    SAME_SIZE(eagle_cudaGraph_t, cudaGraph_t); SAME_SIZE(eagle_cudaGraphExec_t, cudaGraphExec_t);
    SAME_SIZE(eagle_cudaGraphNode_t, cudaGraphNode_t);
    SAME_SIZE(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams);
    SAME_OFF(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams, func, func);
    SAME_OFF(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams, gridDim, gridDim);
    SAME_OFF(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams, blockDim, blockDim);
    SAME_OFF(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams, sharedMemBytes, sharedMemBytes);
    SAME_OFF(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams, kernelParams, kernelParams);
    SAME_OFF(eagle_cudaKernelNodeParams, struct cudaKernelNodeParams, extra, extra);
    SAME_SIZE(eagle_cudaGraphInstantiateParams, cudaGraphInstantiateParams);
    SAME_OFF(eagle_cudaGraphInstantiateParams, cudaGraphInstantiateParams, flags, flags);
    SAME_OFF(eagle_cudaGraphInstantiateParams, cudaGraphInstantiateParams, uploadStream, uploadStream);
    SAME_OFF(eagle_cudaGraphInstantiateParams, cudaGraphInstantiateParams, errNode_out, errNode_out);
    SAME_OFF(eagle_cudaGraphInstantiateParams, cudaGraphInstantiateParams, result_out, result_out);
    SAME_SIZE(((eagle_cudaGraphInstantiateParams *)0)->result_out, cudaGraphInstantiateResult);
    SAME_SIZE(eagle_cudaGraphExecUpdateResultInfo, cudaGraphExecUpdateResultInfo);
    SAME_OFF(eagle_cudaGraphExecUpdateResultInfo, cudaGraphExecUpdateResultInfo, result, result);
    SAME_OFF(eagle_cudaGraphExecUpdateResultInfo, cudaGraphExecUpdateResultInfo, errorNode, errorNode);
    SAME_OFF(eagle_cudaGraphExecUpdateResultInfo, cudaGraphExecUpdateResultInfo, errorFromNode, errorFromNode);
    SAME_SIZE(eagle_cudaGraphEdgeData, cudaGraphEdgeData);
    SAME_OFF(eagle_cudaGraphEdgeData, cudaGraphEdgeData, from_port, from_port);
    SAME_OFF(eagle_cudaGraphEdgeData, cudaGraphEdgeData, to_port, to_port);
    SAME_OFF(eagle_cudaGraphEdgeData, cudaGraphEdgeData, type, type);
    SAME_SIZE(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, func, func);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, gridDimX, gridDimX);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, blockDimZ, blockDimZ);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes, sharedMemBytes);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, kernelParams, kernelParams);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, extra, extra);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, kern, kern);
    SAME_OFF(eagle_CUDA_KERNEL_NODE_PARAMS_v2, CUDA_KERNEL_NODE_PARAMS_v2, ctx, ctx);
    SAME_SIZE(int, enum cudaStreamCaptureMode); SAME_SIZE(int, enum cudaStreamCaptureStatus);
    SAME_SIZE(int, cudaError_t); SAME_SIZE(int, CUresult);
    SAME_VAL(EAGLE_CUDA_CAPTURE_MODE_GLOBAL, cudaStreamCaptureModeGlobal);
    SAME_VAL(EAGLE_CUDA_CAPTURE_MODE_THREAD_LOCAL, cudaStreamCaptureModeThreadLocal);
    SAME_VAL(EAGLE_CUDA_CAPTURE_MODE_RELAXED, cudaStreamCaptureModeRelaxed);
    SAME_VAL(EAGLE_CUDA_CAPTURE_STATUS_NONE, cudaStreamCaptureStatusNone);
    SAME_VAL(EAGLE_CUDA_CAPTURE_STATUS_ACTIVE, cudaStreamCaptureStatusActive);
    SAME_VAL(EAGLE_CUDA_CAPTURE_STATUS_INVALIDATED, cudaStreamCaptureStatusInvalidated);
    SAME_VAL(EAGLE_CUDA_STREAM_NON_BLOCKING, cudaStreamNonBlocking);
    SAME_VAL(EAGLE_CUDA_EVENT_DISABLE_TIMING, cudaEventDisableTiming);
    SAME_VAL(EAGLE_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, cudaGraphInstantiateFlagUpload);
    SAME_VAL(EAGLE_CUDA_ERR_INVALID_VALUE, cudaErrorInvalidValue);
    SAME_VAL(EAGLE_CUDA_ERR_INVALID_DEVICE_FUNCTION, cudaErrorInvalidDeviceFunction);
    SAME_VAL(EAGLE_CUDA_ERR_NO_DEVICE, cudaErrorNoDevice);
    SAME_VAL(EAGLE_CUDA_ERR_NOT_SUPPORTED, cudaErrorNotSupported);
    SAME_VAL(0, cudaDriverEntryPointSuccess);
    if (bad) return 1;
    printf("ABI OK\n");
    return 0;
}
"""


@pytest.mark.skipif(not CUDA_HEADER.exists(), reason=f"no CUDA headers at {CUDA_HEADER}")
@pytest.mark.parametrize("lang", ["c", "c++"])
def test_shim_declarations_match_real_cuda_headers(tmp_path, lang):
    cc = shutil.which("cc" if lang == "c" else "c++")
    if cc is None:
        pytest.skip(f"no {lang} compiler")
    src = tmp_path / ("abi.c" if lang == "c" else "abi.cpp")
    src.write_text(ABI_CHECK)
    exe = tmp_path / "abi"
    # both headers in one translation unit: the eagle_ names must not clash
    subprocess.run([cc, "-Wall", "-I", str(INCLUDE), "-I", str(CUDA_HOME / "include"),
                    str(src), "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and "ABI OK" in r.stdout, r.stdout


# ---- the C++ face against the stand-in ------------------------------------------------

CPP_FACE = r"""
#define EAGLE_CUDA_SHIM_IMPLEMENTATION
#include <eagle/cuda.hpp>
#include <cstdio>
#include <dlfcn.h>

typedef void (*Signature)(double*, long long);  // the stand-in kernel's parameter types

int main(int, char** argv) {
    void* lib = dlopen(argv[1], RTLD_NOW);
    void* addOne = dlsym(lib, "fake_kernel_add_one");
    long (*launches)(void) = (long (*)(void))dlsym(lib, "fake_cudart_launch_count");
    double buf[8] = {0}, buf2[8] = {0};
    double* p = buf; double* p2 = buf2;
    long long n = 8;
    void* args[] = {&p, &n};
    void* args2[] = {&p2, &n};
    eagle_dim3 grid = {2, 1, 1}, block = {4, 1, 1};
    try {
        eagle::cuda::Stream stream;
        eagle::cuda::Graph graph;
        graph.stream(stream.cuda());
        eagle::cuda::StreamCapturer capturer(stream.cuda());
        capturer.begin();
        eagle::cuda::detail::check(eagle_cuda_launch_kernel(addOne, grid, block, args, 0, stream.cuda()), "launch");
        auto node = capturer.lastNode();
        graph.addNode(eagle::cuda::CapturedGraph{ capturer.end() });
        graph.sizedKernel(node, (Signature) nullptr, 1);
        eagle::cuda::Launcher launcher = graph.launcher();
        for (int r = 0; r < 3; ++r) launcher.launch();
        launcher.synchronize();
        launcher.setLogicalSize(5);
        launcher.launch();
        launcher.synchronize();
        std::printf("single %g %g %g %ld\n", buf[0], buf[4], buf[7], launches());

        // two captured graphs: child-graph nodes, retuned through the child path
        eagle::cuda::Graph two;
        two.stream(stream.cuda());
        for (int k = 0; k < 2; ++k) {
            eagle::cuda::StreamCapturer c(stream.cuda());
            c.begin();
            eagle::cuda::detail::check(eagle_cuda_launch_kernel(addOne, grid, block, k ? args2 : args, 0, stream.cuda()), "launch");
            auto nd = c.lastNode();
            two.addNode(eagle::cuda::CapturedGraph{ c.end() });
            two.sizedKernel(nd, (Signature) nullptr, 1);
        }
        eagle::cuda::Launcher l2 = two.launcher();
        l2.setLogicalSize(2);
        l2.launch(2);
        l2.synchronize();
        std::printf("two %g %g %g %g\n", buf[0], buf[2], buf2[0], buf2[2]);

        // an exception inside a capture scope: the capture is ended
        try {
            eagle::cuda::StreamCapturer c(stream.cuda());
            c.begin();
            throw std::runtime_error("boom");
        } catch (const std::runtime_error&) {}
        int cs = -1;
        eagle_cuda_stream_is_capturing(stream.cuda(), &cs);
        std::printf("capturing-after-throw %d\n", cs);
        try {
            stream.synchronize();
            eagle::cuda::StreamCapturer c(stream.cuda());
            c.begin();
            c.begin();
        } catch (const eagle::cuda::Error& e) {
            std::printf("error %s\n", e.name().c_str());
        }
    } catch (const eagle::cuda::Error& e) {
        std::printf("unexpected %s\n", e.what());
        return 1;
    }
    return 0;
}
"""


def test_cpp_face_against_standin(tmp_path, fake_cudart_path, cuda_mod):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "face.cpp"
    src.write_text(CPP_FACE)
    exe = tmp_path / "face"
    subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-I", str(INCLUDE), str(src), "-o", str(exe), "-ldl",
                    "-lpthread"], check=True)
    env = dict(os.environ, EAGLE_CUDA_RUNTIME=fake_cudart_path)
    r = subprocess.run([str(exe), fake_cudart_path], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "single 4 4 3 4"       # 3 full replays, then 1 retuned to 5 samples
    assert lines[1] == "two 6 4 2 0"          # both graphs, 2 replays of 2 samples each
    assert lines[2] == "capturing-after-throw 0"
    assert lines[3] == "error cudaErrorIllegalState"


# ---- the seed page's C++ example --------------------------------------------------------

EXAMPLE = ROOT / "csrc" / "examples" / "seed_add_one.cu"


@pytest.fixture(scope="module")
def seed_example_binary(tmp_path_factory):
    nvcc = shutil.which("nvcc") or (str(CUDA_HOME / "bin" / "nvcc") if (CUDA_HOME / "bin" / "nvcc").exists() else None)
    if nvcc is None:
        pytest.skip("nvcc not found")
    exe = tmp_path_factory.mktemp("seed") / "seed_add_one"
    r = subprocess.run([nvcc, "-std=c++17", "-I", str(INCLUDE), str(EXAMPLE), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_seed_example_compiles_with_nvcc(seed_example_binary):
    assert seed_example_binary.exists()


@pytest.mark.gpu
def test_seed_example_runs_on_gpu(seed_example_binary):
    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
        pytest.skip("no NVIDIA GPU")
    r = subprocess.run([str(seed_example_binary)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok:")
