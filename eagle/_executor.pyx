"""The Cython face of the C executor (csrc/executor.c): a CPU plan and thread control."""
import operator
import os

from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uintptr_t
from libc.stdlib cimport calloc, free

from eagle.native cimport Kernel, kernel_t, team_kernel_t

cdef extern from "Python.h":
    ctypedef void *vectorcallfunc
    vectorcallfunc PyVectorcall_Function(object callable)

cdef extern from "executor.h" nogil:
    enum:
        EAGLE_NODE_OPAQUE
        EAGLE_NODE_NATIVE
        EAGLE_NODE_TEAM
        EAGLE_TEAM_AUTO
        EAGLE_TEAM_SERIAL
        EAGLE_TEAM_ALL

    ctypedef struct eagle_node:
        int kind
        int split
        PyObject *callable
        vectorcallfunc vectorcall
        kernel_t kernel
        team_kernel_t team_kernel
        int32_t n_phases
        char **data
        const int64_t *strides
        void *user_data
        double cost_ns

    ctypedef struct eagle_stage:
        int32_t first, count
        int32_t policy
        int32_t team
        int32_t n_phases
        double cost_ns

    ctypedef struct eagle_plan:
        eagle_node *nodes
        int32_t n_nodes
        eagle_stage *stages
        int32_t n_stages
        int64_t logical_size
        int32_t num_threads
        int32_t has_opaque
        const int64_t *size_source
        int64_t capacity
        int32_t until_empty
        int64_t replays_done

    ctypedef struct eagle_failure:
        int32_t node
        int64_t replay

    void eagle_choose_teams(eagle_plan *plan)
    int eagle_have_openmp()
    double eagle_barrier_cost_ns(int n_threads)
    double eagle_parallel_threshold_ns(int n_threads)
    void eagle_mark_forked_child()
    int eagle_is_forked_child()

cdef extern from "executor.h":
    # called with the GIL; releases it inside where it can
    int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure) except -1

cdef extern from "openmp_helpers.h" nogil:
    int eagle_omp_max_threads()
    void eagle_omp_set_num_threads(int n)


# ---- threads --------------------------------------------------------------

cdef bint _explicit_threads = False


def have_openmp():
    """Whether eagle's executor was built with OpenMP (else it runs serially)."""
    return bool(eagle_have_openmp())


def usable_cpus():
    """CPUs this process may run on: the affinity mask, capped by a cgroup CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


# Read once: libgomp reads OMP_NUM_THREADS once, at load, and the CPUs a process
# may use rarely change; get_num_threads() is on the path of every launch.
cdef int _usable_cpus = usable_cpus()
cdef bint _omp_env_set = "OMP_NUM_THREADS" in os.environ


cpdef int get_num_threads():
    """Threads a parallel stage uses.

    OpenMP's own setting (``OMP_NUM_THREADS``, ``set_num_threads``, a
    threadpoolctl limit) when one was given; otherwise the CPUs the process may
    use (affinity and cgroup quota, read at import), which OpenMP alone does
    not see. Always 1 when eagle was built without OpenMP or runs in a child
    forked after a parallel region (libgomp is not fork-safe).
    """
    if not eagle_have_openmp() or eagle_is_forked_child():
        return 1
    cdef int n = eagle_omp_max_threads()
    if not _explicit_threads and not _omp_env_set and n > _usable_cpus:
        n = _usable_cpus
    return n if n > 1 else 1


def set_num_threads(n):
    """Set the threads parallel stages use (OpenMP's ``omp_set_num_threads``;
    threadpoolctl sees and can change it).

    As in OpenMP, the setting belongs to the calling thread: launches from
    other threads keep their own (``OMP_NUM_THREADS`` or all usable CPUs).
    """
    global _explicit_threads
    if isinstance(n, bool):
        raise TypeError("set_num_threads() needs an integer, got a bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"set_num_threads() needs an integer, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"set_num_threads needs n >= 1, got {n}")
    eagle_omp_set_num_threads(n)
    _explicit_threads = True


def barrier_cost_ns(int n_threads):
    """Measured cost of one OpenMP barrier for a team of n_threads."""
    return eagle_barrier_cost_ns(n_threads)


def parallel_threshold_ns(int n_threads):
    """An auto stage cheaper than this runs on one thread (max of 20 µs and 50 barriers)."""
    return eagle_parallel_threshold_ns(n_threads)


def _after_fork_in_child():
    eagle_mark_forked_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- the plan -------------------------------------------------------------

_POLICIES = {"auto": EAGLE_TEAM_AUTO, "serial": EAGLE_TEAM_SERIAL, "parallel": EAGLE_TEAM_ALL}
_POLICY_NAMES = {v: k for k, v in _POLICIES.items()}


cdef class CpuPlan:
    """Nodes in stage order, ready for eagle_execute.

    Built from ``stages`` (lists of node specs) and one team policy per stage
    ("auto", "serial", "parallel"). Each spec is a tuple ``(graph index, kind,
    work, arrays, split)``: kind "opaque" (work: a callable) or "native"
    (work: an eagle.native.Kernel; arrays: the declared arrays in kernel
    order). The plan keeps every object it points into alive.
    """
    cdef eagle_plan plan
    cdef list keepalive
    cdef readonly list order      # graph node index of each plan node
    cdef readonly object last_failure  # (plan node or -1 for an interrupt, replay) of the last failed launch

    def __cinit__(self):
        self.keepalive = []

    def __init__(self, stages, policies, int64_t logical_size, int64_t capacity=0, size_source=None):
        cdef int32_t n_nodes = sum(len(s) for s in stages)
        cdef int32_t i = 0, k, s
        cdef eagle_node *node
        cdef Kernel kern
        self.plan.nodes = <eagle_node *>calloc(max(n_nodes, 1), sizeof(eagle_node))
        self.plan.stages = <eagle_stage *>calloc(max(len(stages), 1), sizeof(eagle_stage))
        if self.plan.nodes == NULL or self.plan.stages == NULL:
            raise MemoryError()
        self.plan.n_nodes = n_nodes
        self.plan.n_stages = len(stages)
        self.plan.logical_size = logical_size
        self.plan.capacity = capacity
        if size_source is not None:
            # an object (a compaction's Partition) whose kernel writes the next logical size
            self.plan.size_source = <const int64_t *><uintptr_t>size_source.size_source_address
            self.keepalive.append(size_source)
        self.order = []
        for s, specs in enumerate(stages):
            self.plan.stages[s].first = i
            self.plan.stages[s].count = len(specs)
            self.plan.stages[s].policy = _POLICIES[policies[s]]
            self.plan.stages[s].team = 1
            self.plan.stages[s].n_phases = 1
            self.plan.stages[s].cost_ns = -1
            for index, kind, work, arrays, split in specs:
                node = &self.plan.nodes[i]
                node.cost_ns = -1
                self.order.append(index)
                if kind == "opaque":
                    node.kind = EAGLE_NODE_OPAQUE
                    node.callable = <PyObject *>work
                    node.vectorcall = PyVectorcall_Function(work)
                    self.plan.has_opaque = 1
                else:
                    kern = <Kernel>work
                    if kern.phases:
                        node.kind = EAGLE_NODE_TEAM
                        node.team_kernel = kern.team_fn
                        node.n_phases = kern.phases
                        if kern.phases > self.plan.stages[s].n_phases:
                            self.plan.stages[s].n_phases = kern.phases
                    else:
                        node.kind = EAGLE_NODE_NATIVE
                        node.split = 1 if split else 0
                        node.kernel = kern.fn
                    node.user_data = kern.user_data
                    node.data = <char **>calloc(max(len(arrays), 1), sizeof(char *))
                    node.strides = <int64_t *>calloc(max(len(arrays), 1), sizeof(int64_t))
                    if node.data == NULL or node.strides == NULL:
                        raise MemoryError()
                    for k, a in enumerate(arrays):
                        node.data[k] = <char *><uintptr_t>a.__array_interface__["data"][0]
                        (<int64_t *>node.strides)[k] = a.strides[0] if a.ndim else 0
                self.keepalive.append((work, arrays))
                i += 1
        self.set_threads(get_num_threads())

    def __dealloc__(self):
        cdef int32_t i
        if self.plan.nodes != NULL:
            for i in range(self.plan.n_nodes):
                free(self.plan.nodes[i].data)
                free(<void *>self.plan.nodes[i].strides)
            free(self.plan.nodes)
        free(self.plan.stages)

    def set_threads(self, int n):
        self.plan.num_threads = n

    def launch(self, int64_t n, bint until_empty=False):
        """Replay n times (with until_empty: until the logical size is 0, at most n);
        returns the replays done. If a node raises (or Ctrl-C), the exception
        propagates and ``last_failure`` says where: (plan node index or -1, replay)."""
        cdef eagle_failure failure
        cdef int n_threads = get_num_threads()
        if n_threads != self.plan.num_threads:
            self.set_threads(n_threads)
        self.plan.until_empty = until_empty
        self.last_failure = None
        try:
            eagle_execute(&self.plan, n, &failure)
        except BaseException:
            self.last_failure = (failure.node, failure.replay)
            raise
        return self.plan.replays_done

    @property
    def logical_size(self):
        return self.plan.logical_size

    @logical_size.setter
    def logical_size(self, int64_t n):
        self.plan.logical_size = n

    @property
    def num_threads(self):
        return self.plan.num_threads

    def teams(self):
        """Per stage: (policy, team size chosen for the current logical size, cost estimate in ns or None)."""
        eagle_choose_teams(&self.plan)
        out = []
        for s in range(self.plan.n_stages):
            st = self.plan.stages[s]
            out.append((_POLICY_NAMES[st.policy], st.team, st.cost_ns if st.cost_ns >= 0 else None))
        return out

    def node_costs(self):
        """Measured cost per plan node in ns (per sample for split native nodes), None if unknown."""
        return [self.plan.nodes[i].cost_ns if self.plan.nodes[i].cost_ns >= 0 else None
                for i in range(self.plan.n_nodes)]
