"""The driver stand-in (tests/doubles/fake_libcuda.c, a TEST DOUBLE) refuses what the
CUDA 13 driver documents it refuses (cuda.h's doc comments), for the calls eagle's shim
makes: so a shim that passes a documented-invalid combination fails here, without a GPU,
as it would on one. The codes are CUDA_ERROR_INVALID_VALUE (1) throughout: the one the
calls' return lists name for an invalid argument.
"""
import ctypes

import pytest

INVALID_VALUE = 1
u64 = ctypes.c_uint64
vp = ctypes.c_void_p


class CondParams(ctypes.Structure):      # CUDA_CONDITIONAL_NODE_PARAMS
    _fields_ = [("handle", u64), ("type", ctypes.c_int), ("size", ctypes.c_uint),
                ("phGraph_out", ctypes.POINTER(vp)), ("ctx", vp)]


class NodeParams(ctypes.Structure):      # CUgraphNodeParams (256 bytes)
    _fields_ = [("type", ctypes.c_int), ("reserved0", ctypes.c_int * 3),
                ("u", ctypes.c_byte * 232), ("reserved2", ctypes.c_longlong)]


class KernelParams(ctypes.Structure):    # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", vp), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shmem", ctypes.c_uint), ("params", ctypes.POINTER(vp)), ("extra", ctypes.POINTER(vp)),
                ("kern", vp), ("ctx", vp)]


@pytest.fixture
def drv(fake):
    """The stand-in's entry points at CUDA 13.0, with this thread's context current."""
    getproc = fake.cuGetProcAddress_v2
    getproc.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp), ctypes.c_int, u64, ctypes.POINTER(ctypes.c_int)]

    def fn(name, *argtypes):
        p, st = vp(), ctypes.c_int()
        assert getproc(name.encode(), ctypes.byref(p), 13000, 0, ctypes.byref(st)) == 0, name
        return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(p.value)

    ctx = vp()
    assert fn("cuDevicePrimaryCtxRetain", ctypes.POINTER(vp), ctypes.c_int)(ctypes.byref(ctx), 0) == 0
    assert fn("cuCtxSetCurrent", vp)(ctx) == 0
    fn.ctx = ctx
    g = vp()
    assert fn("cuGraphCreate", ctypes.POINTER(vp), ctypes.c_uint)(ctypes.byref(g), 0) == 0
    fn.graph = g
    yield fn
    fn("cuGraphDestroy", vp)(g)


def kernel_node(drv, fake, deps, extra=None):
    params = KernelParams(func=fake.fake_cuda_kernel(b"add_one"), extra=extra)
    params.grid[:] = params.block[:] = (1, 1, 1)
    arr = (vp * len(deps))(*deps)
    node = vp()
    add = drv("cuGraphAddKernelNode", ctypes.POINTER(vp), vp, ctypes.POINTER(vp), ctypes.c_size_t,
              ctypes.POINTER(KernelParams))
    args = (vp * 2)(ctypes.addressof(ctypes.c_uint64(0)), ctypes.addressof(ctypes.c_int64(0)))
    params.params = args
    return add(ctypes.byref(node), drv.graph, arr, len(deps), ctypes.byref(params)), node


def test_conditional_handle_flags_are_assign_default_or_zero(drv):
    create = drv("cuGraphConditionalHandleCreate", ctypes.POINTER(u64), vp, vp, ctypes.c_uint, ctypes.c_uint)
    h = u64()
    assert create(ctypes.byref(h), drv.graph, drv.ctx, 0, 1) == 0
    assert create(ctypes.byref(h), drv.graph, drv.ctx, 0, 0) == 0
    assert create(ctypes.byref(h), drv.graph, drv.ctx, 0, 2) == INVALID_VALUE


@pytest.mark.parametrize("dirty", [None, "reserved0", "past_member", "reserved2"])
def test_add_node_wants_every_unused_byte_zero(drv, dirty):
    """cuGraphAddNode: "All unused bytes - that is, reserved0 and all bytes past the
    utilized union member - must be set to zero"."""
    create = drv("cuGraphConditionalHandleCreate", ctypes.POINTER(u64), vp, vp, ctypes.c_uint, ctypes.c_uint)
    h = u64()
    assert create(ctypes.byref(h), drv.graph, drv.ctx, 0, 1) == 0
    p = NodeParams(type=13)   # CU_GRAPH_NODE_TYPE_CONDITIONAL
    cond = CondParams.from_buffer(p.u)
    cond.handle, cond.type, cond.size, cond.ctx = h.value, 1, 1, drv.ctx
    if dirty == "reserved0":
        p.reserved0[1] = 1
    elif dirty == "past_member":
        p.u[ctypes.sizeof(CondParams) + 3] = 1
    elif dirty == "reserved2":
        p.reserved2 = 1
    add = drv("cuGraphAddNode", ctypes.POINTER(vp), vp, ctypes.POINTER(vp), vp, ctypes.c_size_t,
              ctypes.POINTER(NodeParams))
    node = vp()
    assert add(ctypes.byref(node), drv.graph, None, None, 0, ctypes.byref(p)) == \
        (0 if dirty is None else INVALID_VALUE)


def test_a_new_nodes_dependencies_have_no_duplicates(drv, fake):
    st, a = kernel_node(drv, fake, [])
    assert st == 0
    assert kernel_node(drv, fake, [a.value])[0] == 0
    assert kernel_node(drv, fake, [a.value, a.value])[0] == INVALID_VALUE


def test_an_existing_dependency_is_not_added_again(drv, fake):
    a = kernel_node(drv, fake, [])[1]
    b = kernel_node(drv, fake, [])[1]
    add = drv("cuGraphAddDependencies", vp, ctypes.POINTER(vp), ctypes.POINTER(vp), vp, ctypes.c_size_t)
    src, dst = (vp * 1)(a), (vp * 1)(b)
    assert add(drv.graph, src, dst, None, 1) == 0
    assert add(drv.graph, src, dst, None, 1) == INVALID_VALUE


def test_kernel_params_and_extra_together_are_refused(drv, fake):
    launch = drv("cuLaunchKernel", vp, *[ctypes.c_uint] * 7, vp, ctypes.POINTER(vp), ctypes.POINTER(vp))
    dummy = (vp * 1)(None)
    assert launch(fake.fake_cuda_kernel(b"add_one"), 1, 1, 1, 1, 1, 1, 0, None, dummy, dummy) == INVALID_VALUE
    assert kernel_node(drv, fake, [], extra=dummy)[0] == INVALID_VALUE   # cuGraphAddKernelNode


def test_an_external_event_wait_only_during_capture(drv):
    create = drv("cuEventCreate", ctypes.POINTER(vp), ctypes.c_uint)
    wait = drv("cuStreamWaitEvent", vp, vp, ctypes.c_uint)
    destroy = drv("cuEventDestroy", vp)
    e = vp()
    assert create(ctypes.byref(e), 2) == 0
    try:
        assert wait(None, e, 0) == 0
        assert wait(None, e, 1) == INVALID_VALUE   # CU_EVENT_WAIT_EXTERNAL outside capture
    finally:
        destroy(e)


def test_edge_data_only_beside_dependencies(drv):
    """cuStreamGetCaptureInfo (13.0 form): "If edgeData_out is non-NULL then
    dependencies_out must be as well" (what the first GPU run hit)."""
    info = drv("cuStreamGetCaptureInfo", vp, ctypes.POINTER(ctypes.c_int), vp, vp,
               ctypes.POINTER(vp), ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_size_t))
    status, deps, edges, n = ctypes.c_int(), vp(), vp(), ctypes.c_size_t()
    assert info(None, ctypes.byref(status), None, None, None, ctypes.byref(edges), None) == INVALID_VALUE
    assert info(None, ctypes.byref(status), None, None, ctypes.byref(deps), ctypes.byref(edges),
                ctypes.byref(n)) == 0
    assert info(None, None, None, None, None, None, None) == INVALID_VALUE   # captureStatus_out: required


def test_get_nodes_clears_the_entries_past_the_graphs_nodes(drv, fake):
    """cuGraphGetNodes: "If numNodes is higher than the actual number of nodes, the
    remaining entries in nodes will be set to NULL"."""
    a = kernel_node(drv, fake, [])[1]
    get = drv("cuGraphGetNodes", vp, ctypes.POINTER(vp), ctypes.POINTER(ctypes.c_size_t))
    nodes, n = (vp * 3)(0x1234, 0x1234, 0x1234), ctypes.c_size_t(3)
    assert get(drv.graph, nodes, ctypes.byref(n)) == 0
    assert n.value == 1 and nodes[0] == a.value and nodes[1] is None and nodes[2] is None
