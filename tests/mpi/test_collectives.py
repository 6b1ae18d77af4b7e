"""Collective nodes in this one process (a one-rank COMM_WORLD): what they compute, how they
are recorded and drawn, and every bad input refused with a clear error that changes nothing."""
import numpy as np
import pytest

import eagle
from eagle.graph import GroupConflictError, allgather, allreduce, bcast, opaque, sendrecv
from eagle.mpi import CollectiveNode, get_failure_mode, set_failure_mode

MPI = pytest.importorskip("mpi4py.MPI")
COMM = MPI.COMM_WORLD


def test_one_rank_allreduce_allgather_bcast_sendrecv():
    assert COMM.Get_size() == 1
    x = np.arange(6, dtype=np.float64)
    total, gathered = np.zeros(6), np.zeros(6)
    counts = np.array([3, 1], dtype=np.int64)
    ring_in = np.zeros(2, dtype=np.int64)
    g = eagle.Graph()
    g.add_node(allreduce(x, total, op="prod"))
    g.add_node(allgather(x, gathered))
    g.add_node(bcast(counts, root=0))
    g.add_node(sendrecv(counts, ring_in, dest=0, source=0))
    g.build()
    g.launch(2)
    np.testing.assert_array_equal(total, x)
    np.testing.assert_array_equal(gathered, x)
    np.testing.assert_array_equal(ring_in, counts)


def test_in_place_and_2d_buffers():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    g = eagle.Graph()
    g.add_node(allreduce(a, a, op="max"), name="peak")
    node = allreduce(a, a[...])          # the same memory through another view is in place too
    assert list(node.reads) == [] and "buf" in node.writes
    g.build().launch(3)
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4))


def test_buffers_are_arrays_or_named_arrays_as_every_array_argument():
    tally, total, halo = np.ones(3), np.zeros(3), np.zeros(3)
    node = allreduce({"tally": tally}, {"total": total})
    assert list(node.reads) == ["tally"] and "total" in node.writes
    assert list(allreduce(tally, total).reads) == ["send"]              # the default names
    assert "tally" in allreduce({"tally": tally}, tally).writes            # in place: the name given
    assert "halo" in sendrecv(tally, {"halo": halo}, dest=0, source=0).writes
    assert "params" in bcast({"params": halo}).writes
    assert "all" in allgather(tally, {"all": total}).writes
    with pytest.raises(TypeError, match=r"allreduce\(\): recv is an array or a one-entry dict"):
        allreduce(tally, {"a": total, "b": halo})
    g = eagle.Graph()
    g.add_node(node, name="combine")
    g.build().launch(1)
    np.testing.assert_array_equal(total, tally)


def test_collectives_run_whatever_the_logical_size():
    # a rank whose logical size is 0 must still take part, or the others would hang
    per_sample = np.zeros(10)
    send, recv = np.ones(2), np.zeros(2)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"s": per_sample}), name="samples")
    g.add_node(allreduce(send, recv))
    g.build()
    assert g.capacity == 10      # the buffers of a collective do not bound it
    g.set_logical_size(0)
    g.launch(1)
    np.testing.assert_array_equal(recv, send)


@pytest.mark.parametrize("teams", ["serial", "parallel"])
def test_threads_in_the_team(teams, threads):
    threads(2)
    xs = [np.full(3, float(k)) for k in range(4)]
    outs = [np.zeros(3) for _ in range(4)]
    g = eagle.Graph()
    g.add_group([opaque(lambda: None, writes={"x": x}) for x in xs], names=[f"fill{k}" for k in range(4)])
    for k in range(4):
        g.add_node(allreduce(xs[k], outs[k]), name=f"sum{k}")
    g.build(cpu=eagle.CpuOptions(teams=teams)).launch(5)
    for x, o in zip(xs, outs):
        np.testing.assert_array_equal(o, x)


def test_collectives_run_in_recording_order_one_stage_each():
    a, b, c = np.zeros(2), np.zeros(2), np.zeros(2)
    g = eagle.Graph()
    g.add_node(allreduce(a, a), name="first")
    g.add_node(allreduce(b, b), name="second")     # disjoint memory, yet after "first"
    g.add_node(bcast(c), name="third")
    assert g.stages == [["first"], ["second"], ["third"]]
    assert ("first", "second", None) in g.dependencies
    with pytest.raises(GroupConflictError, match="collective order"):
        g.add_group([allreduce(a, a), allreduce(b, b)], names=["x", "y"])
    assert g.nodes == ["first", "second", "third"]


def test_picture_box_names_the_communicator_size():
    send, recv = np.zeros(4), np.zeros(4)
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, writes={"send": send}), name="step")
    g.add_node(allreduce(send, recv))
    text = str(g)
    assert "{allreduce ×1}" in text and "<step>" in text
    assert g.nodes == ["step", "allreduce"]
    node = allgather(send, np.zeros(4))
    assert isinstance(node, CollectiveNode) and node.default_name() == "allgather"
    assert "allgather" in repr(node) and "comm size 1" in repr(node)
    dot = g.to_dot()   # a collective is a hexagon in DOT, though the cpu backend runs it as native
    assert "label=\"allreduce\", shape=hexagon" in dot and "label=\"step\", shape=ellipse" in dot


def test_a_node_that_raises_on_one_rank_of_one_raises_normally():
    x = np.zeros(2)

    def boom():
        raise ZeroDivisionError("here")

    g = eagle.Graph()
    g.add_node(opaque(boom, writes={"x": x}), name="boom")
    g.add_node(allreduce(x, x))
    g.build()
    with pytest.raises(ZeroDivisionError) as info:
        g.launch(4)
    assert "raised by node 'boom' (stage 0) in replay 0 of launch(4)" in "\n".join(info.value.__notes__)
    g.launch(0)   # still usable


def test_failure_mode():
    assert get_failure_mode() == "abort"
    with pytest.raises(ValueError, match="'abort' or 'raise'"):
        set_failure_mode("ignore")
    set_failure_mode("raise")
    try:
        assert get_failure_mode() == "raise"
    finally:
        set_failure_mode("abort")


def test_dup_and_split_communicators():
    dup = COMM.Dup()
    half = COMM.Split(color=0, key=0)
    try:
        x, y, z = np.arange(3.0), np.zeros(3), np.zeros(3)
        g = eagle.Graph()
        g.add_node(allreduce(x, y, comm=dup))
        g.add_node(allreduce(y, z, comm=half))
        g.build().launch(1)
        np.testing.assert_array_equal(z, x)
    finally:
        dup.Free()
        half.Free()


def test_a_freed_communicator_is_refused_at_build():
    dup = COMM.Dup()
    x = np.zeros(2)
    g = eagle.Graph()
    g.add_node(allreduce(x, x, comm=dup), name="tally")
    dup.Free()
    with pytest.raises(ValueError, match="communicator of node 'tally' was freed"):
        g.build()
    assert g.backend is None


def test_cartesian_neighbour_exchange():
    cart = COMM.Create_cart([1], periods=[False])
    try:
        source, dest = cart.Shift(0, 1)
        assert source == dest == MPI.PROC_NULL
        send, recv = np.ones(3), np.full(3, 7.0)
        g = eagle.Graph()
        g.add_node(sendrecv(send, recv, dest=dest, source=source, comm=cart), name="halo")
        g.build().launch(2)
        np.testing.assert_array_equal(recv, 7.0)   # no neighbour on a non-periodic edge
    finally:
        cart.Free()


@pytest.mark.parametrize("make, error, match", [
    (lambda: allreduce(np.zeros(3), np.zeros(3), op="mean"), ValueError, "op must be one of sum"),
    (lambda: allreduce(np.zeros(3), np.zeros(3), op=None), ValueError, "op must be one of"),
    (lambda: allreduce(np.zeros(3), np.zeros(4)), ValueError, "one dtype and one size"),
    (lambda: allreduce(np.zeros(3), np.zeros(3, np.float32)), ValueError, "one dtype and one size"),
    (lambda: allreduce(np.zeros(3, complex), np.zeros(3, complex), op="max"), TypeError, "does not apply"),
    (lambda: allreduce(np.zeros(3), np.zeros(3), op="bxor"), TypeError, "does not apply"),
    (lambda: allreduce(np.zeros(3, bool), np.zeros(3, bool)), TypeError, "does not apply"),
    (lambda: allreduce(np.zeros(3, np.float16), np.zeros(3, np.float16)), TypeError, "MPI cannot carry"),
    (lambda: allreduce(np.zeros(3, ">f8"), np.zeros(3, ">f8")), TypeError, "MPI cannot carry"),
    (lambda: allreduce(np.zeros(3, object), np.zeros(3, object)), TypeError, "MPI cannot carry"),
    (lambda: allreduce(np.zeros(6)[::2], np.zeros(3)), ValueError, "C-contiguous"),
    (lambda: allreduce([1.0, 2.0], np.zeros(2)), TypeError, "must be a NumPy array"),
    (lambda: allreduce(np.zeros(3), np.zeros(0)), ValueError, "one dtype and one size"),
    (lambda: allgather(np.zeros(3), np.zeros(4)), ValueError, "comm size"),
    (lambda: allgather(np.zeros(3), np.zeros(3, np.int64)), ValueError, "one dtype"),
    (lambda: bcast(np.zeros(3), root=1), ValueError, "root must be a rank"),
    (lambda: bcast(np.zeros(3), root=-1), ValueError, "root must be a rank"),
    (lambda: bcast(np.zeros(3), root=True), TypeError, "got a bool"),
    (lambda: bcast(np.zeros(3), root=0.0), TypeError, "must be an integer"),
    (lambda: sendrecv(np.zeros(3), np.zeros(3), dest=1, source=0), ValueError, "dest must be a rank"),
    (lambda: sendrecv(np.zeros(3), np.zeros(3), dest=0, source=5), ValueError, "source must be a rank"),
    (lambda: sendrecv(np.zeros(3), np.zeros(3), dest=0, source=0, tag=-1), ValueError, "tag must be"),
    (lambda: sendrecv(np.zeros(3), np.zeros(3, np.int32), dest=0, source=0), ValueError, "one dtype"),
    (lambda: allreduce(np.zeros(3), np.zeros(3), comm=42), TypeError, "intracommunicator"),
    (lambda: allreduce(np.zeros(3), np.zeros(3), comm=MPI.COMM_NULL), (TypeError, ValueError), "COMM_NULL|intra"),
])
def test_bad_input_is_refused_clearly(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_overlapping_and_read_only_buffers():
    buf = np.zeros(8)
    with pytest.raises(ValueError, match="overlap"):
        allreduce(buf[:4], buf[2:6])
    with pytest.raises(ValueError, match="overlap"):
        sendrecv(buf[:4], buf[3:7], dest=0, source=0)
    with pytest.raises(ValueError, match="overlap"):
        allgather(buf[:4], buf[:4])
    allreduce(buf[:4], buf[4:])     # disjoint halves are fine
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        allreduce(np.zeros(3), ro)
    with pytest.raises(ValueError, match="read-only"):
        bcast(ro)
    allreduce(ro, np.zeros(3))      # a read-only send is fine


def test_refused_node_changes_nothing():
    g = eagle.Graph()
    x = np.zeros(3)
    g.add_node(allreduce(x, x), name="a")
    before = str(g)
    with pytest.raises(ValueError):
        g.add_node(allreduce(x, x), name="a")   # duplicate name
    assert str(g) == before and g.nodes == ["a"]


def test_zero_d_and_reshaped_in_place():
    scalar = np.array(2.5)
    out = np.zeros(())
    flat = np.arange(6.0)
    g = eagle.Graph()
    g.add_node(allreduce(scalar, out), name="scalar")
    g.add_node(allreduce(flat, flat.reshape(2, 3)), name="reshaped")   # the same memory: in place
    g.build().launch(2)
    assert out == 2.5
    np.testing.assert_array_equal(flat, np.arange(6.0))


def test_zero_size_buffers():
    e = np.zeros(0)
    g = eagle.Graph()
    g.add_node(allreduce(e, np.zeros(0)))
    g.add_node(allgather(e, np.zeros(0)))
    g.add_node(bcast(np.zeros((0, 3))))
    g.build().launch(3)


def test_the_rank_check_names_collectives_for_mpi_errors():
    x = np.zeros(2)
    g = eagle.Graph()
    node = allreduce(x, x)
    g.add_node(node, name="my tally")
    g.build()   # one rank: nothing to compare, but the node learns its graph name
    from eagle.mpi._check import describe
    assert describe(node, "my tally").startswith("'my tally': allreduce comm size 1 op=sum [w buf <f8(2,)]")
