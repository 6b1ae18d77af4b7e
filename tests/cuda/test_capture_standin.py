"""How a node kind is captured on CUDA (eagle/cuda/capture.py), against the CPU stand-in of
the CUDA driver (tests/doubles/fake_libcuda.c, a TEST DOUBLE).

A node kind defined here, ``AddOne`` (adds 1 to ``a[:n]`` with the stand-in's ``add_one``
or ``add_one_sp`` kernel), is captured by its own ``Lowering``, registered here, through
the ``CaptureContext`` the backend hands it: the backend knows nothing of it, yet it is
captured at the top level and in bodies, retuned by ``set_logical_size`` from the
``SizedKernel`` records it adds, and its failures are named like any node's.
"""
import ctypes

import numpy as np
import pytest

import eagle
from eagle.record.control import subgraph, while_loop
from eagle.record.node import Node, RunsAs
from fake_cuda import DeviceArray, kernel


@pytest.fixture
def capture_mod(cuda_mod):
    import eagle.cuda.backend  # noqa: F401  (binds the backend to the stand-in)
    from eagle.cuda import capture
    return capture


class AddOne(Node):
    """A node kind of this test: ``a[:n] += 1`` for the graph's logical size ``n``."""

    kind = "add_one"
    runs_as = RunsAs.CUDA_KERNEL
    sized = True

    def __init__(self, a, func, *, block=4, per_block=None, via_ptr=False, fail=False):
        super().__init__(None, None, updates={"a": a})
        self.a, self.func, self.block = a, func, block
        self.per_block = per_block or block
        self.via_ptr, self.fail = via_ptr, fail


def _add_one_lowering(capture):
    """The lowering of ``AddOne`` (made once: registering is for the process)."""
    if capture.lowering_class(AddOne) is not None:
        return capture.lowering_class(AddOne)

    class AddOneCapture(capture.Lowering):
        #: every instance made (one per build), newest last
        made = []

        def __init__(self):
            self.allocated = []
            self.captured = []   # (ctx.index, ctx.name, ctx.in_body, ctx.size, ctx.size_ptr, record)
            AddOneCapture.made.append(self)

        def needs(self, node):
            return frozenset({capture.Need.DEVICE_SIZE}) if node.via_ptr else frozenset()

        def allocate(self, node, ctx):
            self.allocated.append(node)

        def capture(self, node, ctx):
            from eagle.cuda import _stream

            if node.fail:
                raise RuntimeError("this kind refuses to be captured")
            ptr = node.a.__cuda_array_interface__["data"][0]
            size_arg = ctypes.c_void_p(ctx.size_ptr) if node.via_ptr else ctypes.c_int64(ctx.size)
            grid = max(1, -(-ctx.size // node.per_block))
            _stream.launch_kernel(node.func, grid, node.block, [ctypes.c_void_p(ptr), size_arg], 0,
                                ctx.stream)
            record = ctx.add_sized_kernel(ctx.stream.last_node(), nargs=2,
                                          size_index=0 if node.via_ptr else 1,
                                          size_type="none" if node.via_ptr else "int64",
                                          per_block=node.per_block)
            self.captured.append((ctx.index, ctx.name, ctx.in_body, ctx.size, ctx.size_ptr, record))

    return capture.register(AddOne, AddOneCapture)


def test_a_kind_defined_here_captures_itself_and_is_retuned(fake, capture_mod):
    lowering = _add_one_lowering(capture_mod)
    a = DeviceArray(np.zeros(10))
    g = eagle.Graph()
    # blocks of 8 threads, 4 samples each: the grid follows per_block, not the block
    g.add_node(AddOne(a, kernel(fake, "add_one"), block=8, per_block=4), name="mine")
    g.build()
    made = lowering.made[-1]
    assert made.allocated == [g.recording().nodes[0]]
    (index, name, in_body, size, size_ptr, record), = made.captured
    assert (index, name, in_body, size, size_ptr) == (0, "mine", False, 10, 0)
    # the record, field by field, as Retune.add is given it
    assert isinstance(record, capture_mod.SizedKernel)
    assert record._fields == ("index", "name", "handle", "nargs", "size_index", "size_type",
                              "per_block", "arg_sizes", "in_body", "extent")
    assert record.handle != 0
    assert record[:2] == (0, "mine") and record[3:9] == (2, 1, "int64", 4, None, False)
    assert record.extent == 10      # the node's own samples: a retune gives it min(n, 10)
    assert g._backend.sized_kernels == 1
    # a retune patches what the record says: grid ceil(n / per_block), argument size_index = n
    g.set_logical_size(6)
    g.launch(1)
    assert fake.fake_cuda_last_grid_x() == 2
    np.testing.assert_array_equal(a.host, [1] * 6 + [0] * 4)
    g.set_logical_size(9)
    g.launch(1)
    assert fake.fake_cuda_last_grid_x() == 3
    np.testing.assert_array_equal(a.host, [2] * 6 + [1] * 3 + [0])
    assert fake.fake_cuda_counter(b"cuStreamBeginCapture") == 1


def test_a_kind_that_needs_the_device_size_gets_it(fake, capture_mod):
    """``Need.DEVICE_SIZE``: the graph keeps its logical size in device memory, the context
    hands its address, and a grid-only record (size_type "none") is patched by a retune."""
    lowering = _add_one_lowering(capture_mod)
    a = DeviceArray(np.zeros(10))
    g = eagle.Graph()
    g.add_node(AddOne(a, kernel(fake, "add_one_sp"), via_ptr=True), name="reads_n")
    g.build()
    (_, _, _, size, size_ptr, record), = lowering.made[-1].captured
    assert size == 10 and size_ptr == g._backend.size_ptr != 0
    assert (record.size_index, record.size_type, record.per_block) == (0, "none", 4)
    g.set_logical_size(5)
    g.launch(1)
    assert fake.fake_cuda_last_grid_x() == 2
    np.testing.assert_array_equal(a.host, [1] * 5 + [0] * 5)


def test_a_kind_in_a_body_used_twice(fake, capture_mod, emulated_kernels):
    """Inside a child graph used twice: allocated once (one node), captured twice, its records
    marked in_body and named by the body; a retune reaches both."""
    lowering = _add_one_lowering(capture_mod)
    a = DeviceArray(np.zeros(8))
    inner = eagle.Graph()
    inner.add_node(AddOne(a, kernel(fake, "add_one")), name="inc")
    g = eagle.Graph()
    g.add_node(subgraph(inner), name="first")
    g.add_node(subgraph(inner), name="second")
    g.build()
    made = lowering.made[-1]
    assert len(made.allocated) == 1
    assert [c[:3] for c in made.captured] == [(0, "inc", True), (0, "inc", True)]
    assert [c[5].in_body for c in made.captured] == [True, True]
    assert g._backend.sized_kernels == 2
    g.set_logical_size(3)
    g.launch(1)
    np.testing.assert_array_equal(a.host, [2] * 3 + [0] * 5)


def test_a_kind_in_a_loop_body_failing_is_named(fake, capture_mod, emulated_kernels):
    _add_one_lowering(capture_mod)
    a = DeviceArray(np.zeros(4))
    flag = DeviceArray(np.zeros(1, np.int32))
    body = eagle.Graph()
    body.add_node(AddOne(a, kernel(fake, "add_one"), fail=True), name="boom")
    g = eagle.Graph()
    g.add_node(while_loop({"more": flag}, body), name="loop")
    with pytest.raises(RuntimeError, match="refuses to be captured") as info:
        g.build()
    notes = "\n".join(info.value.__notes__)
    assert "node 'boom' of a control-flow body" in notes
    assert "node 'loop' (stage 0)" in notes
    assert g.backend is None
    g2 = eagle.Graph()
    g2.add_node(AddOne(a, kernel(fake, "add_one")), name="ok")
    g2.build().launch(1)   # the failed capture left the driver usable
    np.testing.assert_array_equal(a.host, [1, 1, 1, 1])


def test_lowerings_by_class_and_a_kind_with_none_is_refused_by_name(fake, capture_mod):
    class Inherits(AddOne):   # captured as its nearest registered base is...
        kind = "inherits"

    class Own(AddOne):        # ...unless it has its own lowering
        kind = "own"

    class OwnCapture(capture_mod.Lowering):
        pass

    assert capture_mod.register(Own, OwnCapture) is OwnCapture
    assert capture_mod.lowering_class(Inherits) is _add_one_lowering(capture_mod)
    assert capture_mod.lowering_class(Own) is OwnCapture

    class Stranger(Node):   # a kind nobody registered
        kind = "stranger"
        runs_as = RunsAs.CUDA_KERNEL

    a = DeviceArray(np.zeros(4))
    g = eagle.Graph()
    g.add_node(Stranger(None, {"a": a}), name="who")
    with pytest.raises(TypeError, match="'who' is a stranger node, which the cuda backend cannot capture"):
        g.build()
    with pytest.raises(TypeError, match="Lowering subclass"):
        capture_mod.register(Stranger, lambda node, ctx: None)
    with pytest.raises(TypeError, match="takes a node class"):
        capture_mod.register("stranger", OwnCapture)
    with pytest.raises(TypeError, match="takes a node class"):
        capture_mod.register(int, OwnCapture)
    # one lowering per class: a second registration is refused, unless it replaces on purpose
    with pytest.raises(ValueError, match="Own already has a CUDA lowering .*OwnCapture.*replace=True"):
        capture_mod.register(Own, _add_one_lowering(capture_mod))
    assert capture_mod.lowering_class(Own) is OwnCapture
    lowering = _add_one_lowering(capture_mod)
    assert capture_mod.register(Own, lowering, replace=True) is lowering
    assert capture_mod.lowering_class(Own) is lowering


def test_the_context_of_one_build(capture_mod):
    """What the context adds to the build, without a backend: buffers to the graph, sized
    records in order, each communicator once, eagle's kernels made once when first asked."""
    buffers, made, current = [], [], []

    class Comm:
        def __init__(self, handle):
            self.handle = handle

        def __eq__(self, other):
            return isinstance(other, Comm) and other.handle == self.handle

    def provider():
        made.append(object())
        return made[-1]

    class On:
        def __init__(self, stream):
            self.stream = stream

        def __enter__(self):
            current.append(self.stream)

        def __exit__(self, *exc):
            current.pop()

    c = capture_mod.Capture("eagle's stream", 7, on_stream=On, register_buffer=buffers.append,
                            kernel_provider=provider)
    root = c.context()
    assert (root.stream, root.size, root.size_ptr, root.replay_ptr, root.stop_ptr) == \
        ("eagle's stream", 7, 0, 0, 0)
    buf = object()
    assert root.register_buffer(buf) is buf and buffers == [buf]
    assert made == [] and root.kernels is root.kernels and len(made) == 1
    root.add_communicator(Comm(1))
    root.add_communicator(Comm(1))
    root.add_communicator(Comm(2))
    assert [x.handle for x in c.communicators] == [1, 2]

    class Probe(Node):
        kind = "probe"
        runs_as = RunsAs.OPAQUE

    seen = []

    class ProbeCapture(capture_mod.Lowering):
        def capture(self, node, ctx):
            seen.append((ctx.stream, ctx.index, ctx.name, ctx.in_body, list(current)))
            ctx.add_sized_kernel(11, nargs=3, size_index=2, size_type="int32", per_block=64,
                                 arg_sizes=[8, 8, 4])

    capture_mod.register(Probe, ProbeCapture)
    node = Probe(None, None)
    root.capture(node, 4, "p", "side stream")
    root.capture(node, 0, "q", "body stream", in_body=True)
    assert seen == [("side stream", 4, "p", False, ["side stream"]),
                    ("body stream", 0, "q", True, ["body stream"])]
    assert current == []
    assert c.sized == [capture_mod.SizedKernel(4, "p", 11, 3, 2, "int32", 64, (8, 8, 4), False),
                       capture_mod.SizedKernel(0, "q", 11, 3, 2, "int32", 64, (8, 8, 4), True)]
    # one lowering object per build and kind
    assert c.lowering(Probe) is c.lowering(Probe)
    assert capture_mod.Capture("s", 1, on_stream=On, register_buffer=buffers.append,
                               kernel_provider=provider).lowering(Probe) is not c.lowering(Probe)
