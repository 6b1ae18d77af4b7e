"""A node kind on the cpu is one class plus one lowering (eagle.cpu.lowering): a kind
defined here, outside eagle, runs once its lowering is registered, as eagle's own do."""
import numpy as np
import pytest

import eagle
from eagle import kernels
from eagle.cpu.lowering import cpu_lowering
from eagle.cpu.spec import NativeSpec, OpaqueSpec
from eagle.graph import opaque, while_loop
from eagle.record.node import Node, RunsAs


class Scaled(Node):
    """out = alpha * x over the replay's samples: a sized node kind of this test's own."""

    kind = "scaled"
    runs_as = RunsAs.NATIVE
    sized = True
    box = ("{", "}")

    def __init__(self, alpha, x, out):
        super().__init__({"x": x}, {"out": out})
        self.kernel = kernels.scale(alpha)


class Doubled(Scaled):
    """A subclass with no lowering of its own: it takes Scaled's."""

    kind = "doubled"

    def __init__(self, x, out):
        super().__init__(2.0, x, out)


class Unlowered(Node):
    kind = "unlowered"
    runs_as = RunsAs.NATIVE
    sized = True

    def __init__(self, x):
        super().__init__({"x": x}, None)


lowered = []


@cpu_lowering(Scaled)
def _lower_scaled(node, index, ctx):
    lowered.append(type(node).__name__)
    return NativeSpec(index, node.kernel, (node.reads["x"], node.writes["out"]), True)


@pytest.mark.parametrize("teams", ["serial", "parallel", "auto"])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_a_kind_defined_outside_eagle_runs_split_and_retunes(threads, teams, n_threads):
    threads(n_threads)
    x = np.arange(10_001, dtype=np.float64)
    y, z = np.full_like(x, -1.0), np.full_like(x, -1.0)
    g = eagle.Graph()
    g.add_node(Scaled(3.0, x, y), name="s")
    g.add_node(Doubled(y, z), name="d")
    lowered.clear()
    g.build(cpu=eagle.CpuOptions(teams=teams))
    assert lowered == ["Scaled", "Doubled"]   # one lowering, found along the class's bases
    g.launch(2)
    np.testing.assert_array_equal(y, 3.0 * x)
    np.testing.assert_array_equal(z, 6.0 * x)
    g.set_logical_size(17)
    y[:], z[:] = -1.0, -1.0
    g.launch(1)
    np.testing.assert_array_equal(y[:17], 3.0 * x[:17])
    np.testing.assert_array_equal(z[:17], 6.0 * x[:17])
    assert (y[17:] == -1.0).all() and (z[17:] == -1.0).all()
    assert "{s}" in str(g) and "{d}" in str(g)


def test_a_kind_in_a_loop_body_is_lowered_there_too(threads):
    threads(2)
    x = np.ones(1000)
    count = np.array([3], dtype=np.int64)
    body = eagle.Graph()
    body.add_node(Scaled(2.0, x, x), name="twice")

    def tick():
        count[0] -= 1

    body.add_node(opaque(tick, updates={"count": count}), name="tick")
    g = eagle.Graph()
    g.add_node(while_loop({"count": count}, body, max_iterations=10), name="loop")
    lowered.clear()
    g.build()
    g.launch(1)
    assert lowered == ["Scaled"]
    np.testing.assert_array_equal(x, np.full(1000, 8.0))


def test_a_kind_without_a_cpu_lowering_is_refused_naming_the_node():
    g = eagle.Graph()
    g.add_node(Unlowered(np.zeros(4)), name="lonely")
    with pytest.raises(TypeError, match="'lonely'.*an unlowered node, which has no cpu lowering"):
        g.build()
    assert g.backend is None


def test_an_opaque_lowering_hands_the_executor_the_nodes_callable():
    from eagle.cpu.lowering import lower

    calls = []
    node = opaque(lambda: calls.append(1))

    class Ctx:
        logical_size = staticmethod(lambda: 0)

        def where(self, i):
            return f"node {i}"

    spec = lower(node, 7, Ctx())
    assert isinstance(spec, OpaqueSpec) and spec.index == 7
    spec.call()
    assert calls == [1]


class Loose(Node):
    """A kind whose lowering (below) returns what the test asks for: every way a lowering can
    hand the executor memory its kernel does not declare, or something that is no spec."""

    kind = "loose"
    runs_as = RunsAs.NATIVE
    sized = True

    def __init__(self, x, out, spec):
        super().__init__({"x": x}, {"out": out})
        self.kernel = kernels.scale(2.0)
        self.spec = spec


@cpu_lowering(Loose)
def _lower_loose(node, index, ctx):
    return node.spec(node, index)


_x_out = lambda n: (n.reads["x"], n.writes["out"])   # noqa: E731


@pytest.mark.parametrize("spec, error, match", [
    # the kernel reads one array and writes one: given one, it would read past the tuple
    (lambda n, i: NativeSpec(i, n.kernel, (n.reads["x"],), True), TypeError,
     "kernel 'scale' takes 2 arrays \\(1 read, 1 written\\), got 1"),
    # an array the node does not declare: shorter than the capacity, and unseen by staging
    (lambda n, i: NativeSpec(i, n.kernel, (np.zeros(2), n.writes["out"]), True), ValueError,
     "an array \\(array 0\\) the node does not declare"),
    # the read array in the written place: the node would write what it declared it reads
    (lambda n, i: NativeSpec(i, n.kernel, (n.reads["x"], n.reads["x"]), True), ValueError,
     "a written array \\(array 1\\) the node does not declare in writes"),
    (lambda n, i: NativeSpec(i, "scale", _x_out(n), True), TypeError, "not an eagle.native.Kernel"),
    (lambda n, i: OpaqueSpec(i, 42), TypeError, "an OpaqueSpec whose call is not callable"),
    (lambda n, i: None, TypeError, "returned None; a cpu lowering returns an OpaqueSpec"),
    (lambda n, i: (i, "opaque", lambda: None, (), False), TypeError, "returned a tuple"),
    (lambda n, i: NativeSpec(i + 5, n.kernel, _x_out(n), True), ValueError,
     "a spec for node index 5; it is node 0"),
])
def test_a_lowerings_spec_is_checked_at_build_naming_the_node(spec, error, match):
    x, y = np.arange(8.0), np.full(8, -1.0)
    g = eagle.Graph()
    g.add_node(Loose(x, y, spec), name="mine")
    with pytest.raises(error, match="node 'mine' \\(stage 0\\): its cpu lowering .*_lower_loose.* " + match):
        g.build()
    assert g.backend is None
    assert (y == -1.0).all()


def test_a_native_spec_of_another_dtype_than_its_kernels_is_refused():
    # the node declares float32 arrays; the kernel reads and writes float64
    g = eagle.Graph()
    g.add_node(Loose(np.zeros(8, np.float32), np.zeros(8, np.float32),
                     lambda n, i: NativeSpec(i, n.kernel, _x_out(n), True)), name="f32")
    with pytest.raises(TypeError, match="'f32'.*the kernel does not take: kernel 'scale' takes 1-d float64"):
        g.build()


def test_an_exception_a_lowering_raises_gets_a_note_naming_the_node():
    g = eagle.Graph()
    g.add_node(Loose(np.zeros(4), np.zeros(4), lambda n, i: 1 / 0), name="broken")
    with pytest.raises(ZeroDivisionError) as info:
        g.build()
    assert info.value.__notes__ == ["eagle: raised by the cpu lowering "
                                    f"{__name__}._lower_loose of node 'broken' (stage 0)"]


def test_cpu_lowering_takes_a_node_class_once_unless_replacing():
    with pytest.raises(TypeError, match="takes a node class"):
        cpu_lowering("not a class")
    with pytest.raises(TypeError, match="takes a node class"):
        cpu_lowering(int)
    with pytest.raises(TypeError, match="decorates a function"):
        cpu_lowering(Loose, replace=True)(5)
    with pytest.raises(ValueError, match="Loose already has a cpu lowering .*_lower_loose.*replace=True"):
        cpu_lowering(Loose)(lambda n, i, c: None)

    class Replaced(Loose):
        pass

    first = cpu_lowering(Replaced)(lambda n, i, c: OpaqueSpec(i, lambda: None))
    second = cpu_lowering(Replaced, replace=True)(lambda n, i, c: NativeSpec(i, n.kernel, _x_out(n), True))
    x, y = np.arange(4.0), np.zeros(4)
    g = eagle.Graph()
    g.add_node(Replaced(x, y, None), name="r")
    g.build().launch(1)
    np.testing.assert_array_equal(y, 2.0 * x)   # the second lowering ran, not the first
    assert first is not second
