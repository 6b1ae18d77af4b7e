"""A step given CUDA arrays is recorded into the nodes it gets on the cpu, made by the cuda
backend (its generated elementwise and reduction kernels), on the driver's stand-in and on
a GPU; what has no such kernel is refused at its line."""
import ctypes

import numpy as np
import pytest

import eagle


def step(x, y, z, m, total):
    t = x * 2.0 + 1.0                      # temporaries, in device memory the graph owns
    # sqrt is correctly rounded in every loop: exp is not (NumPy's AVX-512 exp and the
    # stand-in's libm differ by an ulp), and the stand-in's results are compared bit for bit
    np.sqrt(t * 0.01, out=y)
    y -= x
    y[1:] += y[:-1]                        # overlapping views: NumPy's buffer, a temporary
    np.add(z, 1.0, out=z, where=x < 1.0)
    z[...] = np.where(x > 2.0, y, 0.5)
    total[...] = y.sum() + np.max(z)
    m *= 3.0                               # a whole 2-d array: one kernel over its elements
    return z.min() < 0.0


def start():
    r = np.random.default_rng(4)
    return [r.random(37) * 4.0, np.zeros(37), np.zeros(37), r.random((5, 6)), np.zeros(())]


def read(b, a):
    """A device array (an argument, or the graph's result) as NumPy."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "host") or b.name == "gpu":
        return b.asnumpy(a)
    cai = a.__cuda_array_interface__     # the stand-in's device memory is the host's
    dtype = np.dtype(cai["typestr"])
    raw = (ctypes.c_char * max(dtype.itemsize, 1)).from_address(cai["data"][0])
    return np.frombuffer(raw, dtype, count=1).reshape(cai["shape"]).copy()


def test_a_step_on_device_arrays_is_the_nodes_it_is_on_the_cpu(backend):
    b = backend
    host = start()
    mine = [b.asarray(a) for a in host]
    g = b.capture(step, *mine)
    on_cpu = eagle.capture(step, *[a.copy() for a in host])
    assert g.nodes == on_cpu.nodes and len(g.nodes) >= 10
    if b.name != "cpu":
        assert not any(type(n).__name__ == "OpaqueNode" for n in g.recording().nodes)
    cpu_arrays = [a.copy() for a in host]
    g_cpu = eagle.capture(step, *cpu_arrays).build()
    g.build()
    g.launch(3)
    g_cpu.launch(3)
    b.sync()
    for a, c in zip(mine, cpu_arrays):
        got = read(b, a)
        if b.exact_math:
            assert got.tobytes() == c.tobytes()
        else:
            np.testing.assert_allclose(got, c, rtol=1e-12, atol=1e-12)
    assert bool(read(b, g.result)) == bool(g_cpu.result)


def test_a_dying_temporary_gives_its_device_memory_to_the_product(cuda_backend):
    # the slab's x += mu * d over device arrays: the product in d's device memory, the
    # buffer it would have had let go
    b = cuda_backend

    def step(x, mu):
        d = mu * 2.0 + 0.5
        x += mu * d
    x, mu = np.random.default_rng(6).standard_normal((2, 20_000))      # 160 kB a temporary
    mine = [b.asarray(a) for a in (x, mu)]
    g = b.capture(step, *mine)
    assert len(g.temporaries) == 2 and len({t.buffer for t in g.temporaries}) == 1
    assert g.temporary_bytes < 2 * x.nbytes
    g.build()
    g.launch(2)
    b.sync()
    want = x.copy()
    for _ in range(2):
        step(want, mu)
    got = read(b, mine[0])
    if b.exact_math:
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_what_has_no_device_kernel_is_refused_at_its_line(cuda_backend):
    b = cuda_backend
    if b.name == "gpu":
        pytest.skip("with CuPy arrays, CuPy's own ufunc is recorded where eagle generates no kernel")
    m, x = b.asarray(np.ones((5, 6))), b.asarray(np.ones(6))

    def inner(m):
        m[1:, 1:] += 1.0

    line = inner.__code__.co_firstlineno + 1
    with pytest.raises(eagle.CaptureError, match=rf"inner, line {line} .*np.add runs over \(4, 5\) views that are "
                       r"not whole contiguous arrays: on CUDA arrays"):
        b.capture(inner, m)

    def hyp(x):
        np.hypot(x, 2.0, out=x)
    with pytest.raises(eagle.CaptureError, match=r"hyp, line .* np.hypot has no generated kernel"):
        b.capture(hyp, x)

    def rows(m, x):
        x[...] = m.max(axis=0)
    with pytest.raises(eagle.CaptureError, match=r"reduces \(5, 6\) into \(6,\)"):
        b.capture(rows, m, x)

    def draws(x):
        eagle.graph.normal(x, key=1)
    with pytest.raises(eagle.CaptureError, match="would run on the host stand-ins"):
        b.capture(draws, x)


def test_numpy_and_cuda_arrays_in_one_step_are_refused(cuda_backend):
    with pytest.raises(TypeError, match="mix NumPy and CUDA arrays"):
        eagle.capture(lambda x, y: None, cuda_backend.asarray(np.zeros(3)), np.zeros(3))


def test_the_pool_of_a_step_on_device_arrays_touches_no_host_memory(cuda_backend, monkeypatch):
    # its host buffers only stand for the device's (zeroed there): np.empty, pages never touched
    import eagle.stepcapture.pool as pool_module

    class NoZeros:
        def __getattr__(self, name):
            assert name != "zeros", "a host buffer of the pool was zeroed"
            return getattr(np, name)

    monkeypatch.setattr(pool_module, "np", NoZeros())
    x = cuda_backend.asarray(np.arange(8.0))
    g = cuda_backend.capture(lambda x: x * 2.0 + 1.0, x)
    assert len(g.temporaries) == 1
