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
