"""The Cython face of the C executor (csrc/cpu/executor.c): the threads a team uses, and
``CpuPlan``, the cpu backend's compiled launch path (an ``eagle._core.CompiledLaunch``:
``eagle.Graph``'s compiled core runs it without a Python call)."""
import operator
import os

from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memset

from eagle._core cimport CompiledLaunch
from eagle.native cimport Kernel, kernel_t, team_kernel_t
from eagle.record.memory import data_pointer

cdef extern from "Python.h":
    ctypedef void *vectorcallfunc
    vectorcallfunc PyVectorcall_Function(object callable)

cdef extern from "<stdlib.h>" nogil:
    void *aligned_alloc(size_t alignment, size_t size)

cdef extern from "executor.h" nogil:
    enum:
        EAGLE_NODE_OPAQUE
        EAGLE_NODE_NATIVE
        EAGLE_NODE_TEAM
        EAGLE_NODE_CONTROL
        EAGLE_CONTROL_WHILE
        EAGLE_CONTROL_IF_ELSE
        EAGLE_CONTROL_SUBGRAPH
        EAGLE_CONTROL_OK
        EAGLE_CONTROL_RAISED
        EAGLE_CONTROL_LIMIT
        EAGLE_CONTROL_INTERRUPTED
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

    enum:
        EAGLE_VERDICT_NONE
        EAGLE_VERDICT_TEAM
        EAGLE_VERDICT_SERIAL
        EAGLE_MAX_THREADS
        EAGLE_FUSED_MAX_NODES

    ctypedef struct eagle_stage:
        int32_t first, count
        int32_t policy
        int32_t team
        int32_t n_phases
        double cost_ns
        int64_t tile

    ctypedef struct eagle_stage_report:
        int32_t team
        int32_t candidate
        double cost_ns
        int32_t verdict
        double team_ns, serial_ns
        int32_t verdict_team
        int64_t verdict_size
        int32_t verdict_current

    ctypedef struct eagle_span:
        int32_t node
        int32_t phase
        int64_t replay
        int64_t t0_ns, t1_ns

    ctypedef struct eagle_profile_lane:
        eagle_span *spans
        int64_t capacity
        int64_t count
        int64_t dropped
        int64_t replay
        int64_t os_thread

    ctypedef struct eagle_profile:
        eagle_profile_lane *lanes
        int32_t n_lanes

    ctypedef struct eagle_group:
        void (*all_max)(void *ctx, int64_t *vals, int32_t count, int32_t at_launch) noexcept nogil
        void (*arm)(void *ctx, int64_t n, int32_t until_empty, int32_t compare) noexcept nogil
        void *ctx

    ctypedef struct eagle_plan:
        eagle_node *nodes
        int32_t n_nodes
        eagle_stage *stages
        int32_t n_stages
        int64_t logical_size
        int32_t num_threads
        int32_t has_opaque
        int32_t has_control
        int64_t *size_source
        int64_t capacity
        int32_t until_empty
        int64_t replays_done
        eagle_profile *profile
        PyObject *progress
        double progress_next_ns
        eagle_group *groups
        int32_t n_groups
        int32_t live_anywhere
        int32_t has_fused
        uint64_t replay_base

    ctypedef struct eagle_control:
        int32_t control
        const void *cond
        int32_t cond_size
        eagle_plan *bodies[2]
        int32_t n_bodies
        int32_t has_opaque
        int64_t max_iterations
        int32_t span_base[2]
        const char *name
        int32_t failed_why, failed_body, failed_node
        int64_t failed_iteration

    ctypedef struct eagle_failure:
        int32_t node
        int64_t replay

    void eagle_choice_init(eagle_plan *plan)
    void eagle_groups_max(eagle_plan *plan, int64_t *vals, int32_t count, int32_t at_launch)
    int32_t eagle_choice_checks(const eagle_plan *plan)
    void eagle_choose_teams(eagle_plan *plan)
    void eagle_report_teams(const eagle_plan *plan, int num_threads, int64_t logical_size,
                            eagle_stage_report *out)
    int eagle_launch_encloses(const void *owner)
    int eagle_max_threads()
    int eagle_ticker_running()
    int eagle_have_openmp()
    double eagle_barrier_cost_ns(int n_threads)
    double eagle_parallel_threshold_ns(int n_threads)
    void eagle_pin_parallel_threshold_ns(int n_threads, double ns)
    double eagle_threshold_from_barriers(const double *ns, int n)
    void eagle_choice_pin_clock_ns(double now_ns)
    void eagle_choice_feed_barrier_costs(const double *ns, int n)
    int eagle_choice_simulate_launch(eagle_plan *plan, const double *node_ns, const double *team_ns,
                                     double now_ns)
    void eagle_mark_forked_child()
    int eagle_is_forked_child()

cdef extern from "executor.h":
    # called with the GIL; releases it inside where it can
    # -1 with the exception set and *failure saying where
    int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure)
    uint64_t eagle_thread_replay()
    int eagle_execute_raising "eagle_execute"(eagle_plan *plan, int64_t n_replays,
                                              eagle_failure *failure) except -1
    # eagle_execute inside a launch context of owner (the re-entry guard's)
    int eagle_launch(eagle_plan *plan, int64_t n_replays, const void *owner, eagle_failure *failure)
    int eagle_launch_raising "eagle_launch"(eagle_plan *plan, int64_t n_replays, const void *owner,
                                            eagle_failure *failure) except -1

cdef extern from "relaxed.h" nogil:
    # the fields a launch writes that another thread may read meanwhile (plan())
    double eagle_load_f64(const double *p)
    int64_t eagle_load_i64(const int64_t *p)
    void eagle_store_i64(int64_t *p, int64_t v)

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
cdef int _max_threads = eagle_max_threads()


cpdef int get_num_threads():
    """Threads a parallel stage uses.

    OpenMP's own setting (``OMP_NUM_THREADS``, ``set_num_threads``, a
    threadpoolctl limit) when one was given; otherwise the CPUs the process may
    use (affinity and cgroup quota, read at import), which OpenMP alone does
    not see. Never more than ``max_threads()`` (a larger ``OMP_NUM_THREADS``
    or threadpoolctl value is capped to it). Always 1 when eagle was built
    without OpenMP or runs in a child forked after a parallel region (libgomp
    is not fork-safe).
    """
    if not eagle_have_openmp() or eagle_is_forked_child():
        return 1
    cdef int n = eagle_omp_max_threads()
    if not _explicit_threads and not _omp_env_set and n > _usable_cpus:
        n = _usable_cpus
    if n > _max_threads:
        n = _max_threads
    return n if n > 1 else 1


def max_threads():
    """The most threads a team may have: 8 per CPU of the machine (at least 64,
    at most 1024) and no more than OpenMP's thread limit (``OMP_THREAD_LIMIT``).
    More threads than CPUs never speed a stage up, and the OpenMP runtime ends
    the process when it cannot create a thread, so eagle refuses (in
    ``set_num_threads``) or caps (``OMP_NUM_THREADS``, threadpoolctl) beyond it."""
    return eagle_max_threads() if eagle_have_openmp() else 1


def set_num_threads(n):
    """Set the threads parallel stages use (OpenMP's ``omp_set_num_threads``;
    threadpoolctl sees and can change it): 1 <= n <= ``max_threads()``.

    As in OpenMP, the setting belongs to the calling thread: launches from
    other threads keep their own (``OMP_NUM_THREADS`` or all usable CPUs), and
    a launch in flight keeps the team it started with.
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
    if n > _max_threads:
        raise ValueError(f"set_num_threads({n}): a team has at most {_max_threads} threads here "
                         "(eagle.max_threads(): 8 per CPU, at least 64, at most 1024, and at most "
                         "OMP_THREAD_LIMIT)")
    eagle_omp_set_num_threads(n)
    _explicit_threads = True


def barrier_cost_ns(int n_threads):
    """Measured cost of one OpenMP barrier for a team of n_threads."""
    return eagle_barrier_cost_ns(n_threads)


def parallel_threshold_ns(int n_threads):
    """An auto stage cheaper than this runs on one thread: 50 barriers (the cheapest
    of several timings), within [20 µs, 500 µs]."""
    return eagle_parallel_threshold_ns(n_threads)


def threshold_from_barriers(timings):
    """The threshold that these barrier timings (ns) give (the rule alone, nothing measured)."""
    cdef double buf[64]
    timings = list(timings)[:64]
    for i, t in enumerate(timings):
        buf[i] = t
    return eagle_threshold_from_barriers(buf, len(timings))


def _pin_choice_clock(double now_ns):
    """Tests: the team choice's schedule clock pinned at now_ns (< 0: the real clock again)."""
    eagle_choice_pin_clock_ns(now_ns)


def _feed_barrier_costs(timings):
    """Tests: the next barrier timings the threshold takes (at most 64; [] forgets them)."""
    cdef double buf[64]
    timings = list(timings)
    if len(timings) > 64:
        raise ValueError(f"at most 64 barrier timings, got {len(timings)}")
    for i, t in enumerate(timings):
        buf[i] = t
    eagle_choice_feed_barrier_costs(buf, len(timings))


def _pin_parallel_threshold(int n_threads, double ns):
    """Fix the auto threshold for teams of n_threads (ns <= 0: measure it again).
    For tests of the team choice on a machine whose barrier cost varies."""
    eagle_pin_parallel_threshold_ns(n_threads, ns)


def _after_fork_in_child():
    eagle_mark_forked_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- the plan -------------------------------------------------------------

_POLICIES = {"auto": EAGLE_TEAM_AUTO, "serial": EAGLE_TEAM_SERIAL, "parallel": EAGLE_TEAM_ALL}
_POLICY_NAMES = {v: k for k, v in _POLICIES.items()}


cdef class CpuPlan(CompiledLaunch):
    """Nodes in stage order, ready for eagle_execute.

    Built from ``stages`` (lists of node specs) and one team policy per stage
    ("auto", "serial", "parallel"). Each spec is a tuple ``(graph index, kind,
    work, arrays, split)``: kind "opaque" (work: a callable) or "native"
    (work: an eagle.native.Kernel; arrays: the declared arrays in kernel
    order). The plan keeps every object it points into alive.

    ``groups``: the processes that replay this graph together (``Node.group`` of the
    graph's collectives, one per communicator, in recording order): each has
    ``all_max_address`` and ``context_address`` (an ``eagle_group``) and
    ``launch_mismatch(n, until_empty, counts, modes)``, which raises.

    A spec of kind "control" (a control-flow node, ``eagle.record.control``) has for work
    a tuple ``(control, cond, bodies, max_iterations, name, span_bases)``: control
    "while", "if_else" or "subgraph"; cond the one-element condition array (or None);
    bodies the CpuPlan of each body (run in place: on the thread that runs the node, or on
    the team when the node's stage is on it, csrc/cpu/executor.h); max_iterations an int or None;
    span_bases the profile's node index of each body's first node.

    ``tiles``: per stage, 0, or the tile (in samples) of a fused run: a stage whose
    specs are all split native nodes that touch per-sample arrays only at their own
    samples, run tile by tile (``eagle.cpu.fusion`` decides which; csrc/cpu/executor.h).
    """
    cdef eagle_plan plan
    cdef list keepalive
    cdef list groups
    cdef readonly list order      # graph node index of each plan node
    cdef readonly dict bodies     # plan node index of each control node -> its bodies' CpuPlans
    cdef readonly object last_failure  # (plan node or -1 for an interrupt, replay) of the last failed launch

    def __cinit__(self):
        self.keepalive = []
        self.bodies = {}

    def __init__(self, stages, policies, int64_t logical_size, int64_t capacity=0, size_source=None,
                 groups=(), tiles=None):
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
        eagle_choice_init(&self.plan)   # the team choice's state: nothing measured, no verdict
        self.plan.logical_size = logical_size
        self.plan.capacity = capacity
        if size_source is not None:
            # an object (a compaction's Partition) whose kernel writes the next logical size
            self.plan.size_source = <int64_t *><uintptr_t>size_source.size_source_address
            self.keepalive.append(size_source)
        self.groups = list(groups)
        if self.groups:
            self.plan.groups = <eagle_group *>calloc(len(self.groups), sizeof(eagle_group))
            if self.plan.groups == NULL:
                raise MemoryError()
            for k, group in enumerate(self.groups):
                self.plan.groups[k].all_max = <void (*)(void *, int64_t *, int32_t, int32_t) noexcept nogil> \
                    <uintptr_t>group.all_max_address
                self.plan.groups[k].arm = <void (*)(void *, int64_t, int32_t, int32_t) noexcept nogil> \
                    <uintptr_t>group.arm_address
                self.plan.groups[k].ctx = <void *><uintptr_t>group.context_address
            self.plan.n_groups = len(self.groups)
        self.order = []
        for s, specs in enumerate(stages):
            self.plan.stages[s].first = i
            self.plan.stages[s].count = len(specs)
            self.plan.stages[s].policy = _POLICIES[policies[s]]
            self.plan.stages[s].team = 1
            self.plan.stages[s].n_phases = 1
            self.plan.stages[s].cost_ns = -1
            if tiles is not None and tiles[s] > 0:
                if len(specs) > EAGLE_FUSED_MAX_NODES or any(
                        kind != "native" or not split or (<Kernel>work).phases for _, kind, work, _, split in specs):
                    raise ValueError(f"stage {s}: a fused run holds at most {EAGLE_FUSED_MAX_NODES} "
                                     "split native nodes")
                self.plan.stages[s].tile = tiles[s]
                self.plan.has_fused = 1
            for index, kind, work, arrays, split in specs:
                node = &self.plan.nodes[i]
                node.cost_ns = -1
                self.order.append(index)
                if kind == "control":
                    self._control_node(node, work)
                elif kind == "opaque":
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
                        node.data[k] = <char *><uintptr_t>data_pointer(a)   # the array's own, not what a subclass says
                        (<int64_t *>node.strides)[k] = a.strides[0] if a.ndim else 0
                self.keepalive.append((work, arrays))
                i += 1
        self.set_threads(get_num_threads())

    cdef int _control_node(self, eagle_node *node, work) except -1:
        """Fill plan node `node` from a control spec's work (see the class docstring)."""
        control, cond, bodies, max_iterations, name, span_bases = work
        cdef eagle_control *c = <eagle_control *>calloc(1, sizeof(eagle_control))
        cdef CpuPlan body
        cdef int32_t j
        if c == NULL:
            raise MemoryError()
        node.kind = EAGLE_NODE_CONTROL
        node.user_data = c
        self.plan.has_control = 1
        c.control = {"while": EAGLE_CONTROL_WHILE, "if_else": EAGLE_CONTROL_IF_ELSE,
                     "subgraph": EAGLE_CONTROL_SUBGRAPH}[control]
        if cond is not None:
            c.cond = <const void *><uintptr_t>data_pointer(cond)
            c.cond_size = cond.dtype.itemsize
        if not 1 <= len(bodies) <= 2:
            raise ValueError(f"a control node has one or two bodies, got {len(bodies)}")
        c.n_bodies = len(bodies)
        for k, b in enumerate(bodies):
            body = <CpuPlan?>b
            c.bodies[k] = &body.plan
            c.span_base[k] = span_bases[k]
            if body.plan.has_opaque:
                c.has_opaque = 1
                self.plan.has_opaque = 1
            for j in range(body.plan.n_nodes):
                # split work in a body: the team choice may put the control node's stage on the team
                if body.plan.nodes[j].split or body.plan.nodes[j].kind == EAGLE_NODE_TEAM:
                    node.split = 1
        c.max_iterations = -1 if max_iterations is None else max_iterations
        name_bytes = name.encode("utf-8", "backslashreplace").replace(b"\0", b"?")
        c.name = name_bytes
        self.keepalive.append((cond, name_bytes))
        self.bodies[node - self.plan.nodes] = tuple(bodies)
        return 0

    def control_failure(self, int32_t i):
        """(why, body, body plan node, iteration) of control plan node i's last failure:
        why is "raised" (a body node raised), "limit" (max_iterations), "interrupted"
        (Ctrl-C inside a loop), or None."""
        if not 0 <= i < self.plan.n_nodes or self.plan.nodes[i].kind != EAGLE_NODE_CONTROL:
            return None
        cdef eagle_control *c = <eagle_control *>self.plan.nodes[i].user_data
        why = {EAGLE_CONTROL_RAISED: "raised", EAGLE_CONTROL_LIMIT: "limit",
               EAGLE_CONTROL_INTERRUPTED: "interrupted"}.get(c.failed_why)
        if why is None:
            return None
        return why, c.failed_body, c.failed_node, c.failed_iteration

    def __dealloc__(self):
        cdef int32_t i
        if self.plan.nodes != NULL:
            for i in range(self.plan.n_nodes):
                if self.plan.nodes[i].kind == EAGLE_NODE_CONTROL:
                    free(self.plan.nodes[i].user_data)
                free(self.plan.nodes[i].data)
                free(<void *>self.plan.nodes[i].strides)
            free(self.plan.nodes)
        free(self.plan.stages)
        free(self.plan.groups)

    def set_threads(self, int n):
        self.plan.num_threads = n

    cdef int _agree(self, int64_t n, bint until_empty) except -1:
        """Ranks replaying together must make the same launch call. launch(n): each group's
        first collective compares the counts on replay 0 (a rank whose first node raises
        never gets there: nothing is exchanged). launch_until_done: compared here, with
        whether any rank has samples left (a rank without any must still replay while
        another has some); a mismatch raises on every rank before any replay."""
        cdef int64_t vals[5]
        cdef int32_t k, compare = 1
        if until_empty or n == 0:
            # compared now: launch_until_done needs the live count of every rank, and
            # launch(0) runs no replay, so no collective would carry the comparison.
            # Maxima of n and -n give the largest and smallest count; the same for the mode
            vals[0], vals[1] = n, -n
            vals[2], vals[3] = (1, -1) if until_empty else (0, 0)
            vals[4] = until_empty and self.plan.logical_size > 0
            with nogil:
                eagle_groups_max(&self.plan, vals, 5, 1)
            if vals[0] != -vals[1] or vals[2] != -vals[3]:
                self.groups[0].launch_mismatch(n, until_empty, (-vals[1], vals[0]), (-vals[3], vals[2]))
            self.plan.live_anywhere = vals[4] != 0
            compare = 0
        for k in range(self.plan.n_groups):
            self.plan.groups[k].arm(self.plan.groups[k].ctx, n, until_empty, compare)
        return 0

    cdef int64_t run(self, int64_t n, bint until_empty) except -1:
        cdef eagle_failure failure
        cdef int rc
        self.plan.num_threads = get_num_threads()
        self.plan.until_empty = until_empty
        if self.last_failure is not None:
            self.last_failure = None
        if self.plan.n_groups:
            self._agree(n, until_empty)
        rc = eagle_launch(&self.plan, n, <void *>self, &failure)
        if rc < 0:
            self.last_failure = (failure.node, failure.replay)
            return -1
        return self.plan.replays_done

    cdef bint encloses_current_thread(self) noexcept:
        return eagle_launch_encloses(<void *>self) != 0

    def run_observed(self, int64_t n, bint until_empty, object progress,
                     object record):
        """run(), calling ``progress(replays_done)`` at signal checks (or None) and
        timing every node call into ``record`` (an eagle.observe.profile.LaunchRecord, or None):
        ``record.lane_buffers(n_threads, spans_per_replay, n)`` gives one span array
        per thread, ``record.lanes_done(...)`` gets (os thread, kept, dropped) per lane."""
        cdef eagle_failure failure
        cdef eagle_profile prof
        cdef eagle_profile_lane *lanes = NULL
        cdef int n_threads = get_num_threads()
        cdef int t
        cdef int64_t done
        self.plan.num_threads = n_threads
        self.plan.until_empty = until_empty
        self.last_failure = None
        if self.plan.n_groups:
            self._agree(n, until_empty)
        if record is not None:
            buffers = record.lane_buffers(n_threads, self.spans_per_replay, n)
            # one cache line per lane (they are written by different threads)
            lanes = <eagle_profile_lane *>aligned_alloc(64, 64 * ((n_threads * sizeof(eagle_profile_lane) + 63) // 64))
            if lanes == NULL:
                raise MemoryError()
            memset(lanes, 0, n_threads * sizeof(eagle_profile_lane))
            for t in range(n_threads):
                lanes[t].spans = <eagle_span *><uintptr_t>buffers[t].ctypes.data
                lanes[t].capacity = len(buffers[t])
            prof.lanes = lanes
            prof.n_lanes = n_threads
        try:
            if lanes != NULL:
                self.plan.profile = &prof
            if progress is not None:
                self.plan.progress = <PyObject *>progress
                self.plan.progress_next_ns = 0
            eagle_launch_raising(&self.plan, n, <void *>self, &failure)
            done = self.plan.replays_done
        except BaseException:
            self.last_failure = (failure.node, failure.replay)
            raise
        finally:
            self.plan.profile = NULL
            self.plan.progress = NULL
            if lanes != NULL:
                try:
                    record.lanes_done([(lanes[t].os_thread, lanes[t].count, lanes[t].dropped)
                                       for t in range(n_threads)])
                finally:
                    free(lanes)
        return done

    @property
    def spans_per_replay(self):
        """Node calls of one replay on one thread, at most (team nodes: one per phase)."""
        cdef int32_t i
        cdef int64_t k = 0
        cdef eagle_control *c
        for i in range(self.plan.n_nodes):
            k += self.plan.nodes[i].n_phases if self.plan.nodes[i].kind == EAGLE_NODE_TEAM else 1
            if self.plan.nodes[i].kind == EAGLE_NODE_CONTROL:
                # a body's calls, as if a loop ran its body 16 times (a longer one may drop spans)
                c = <eagle_control *>self.plan.nodes[i].user_data
                for body in self.bodies[i]:
                    k += 16 * body.spans_per_replay
        return k

    def launch(self, int64_t n, bint until_empty=False):
        """Replay n times (with until_empty: until the logical size is 0, at most n);
        returns the replays done. If a node raises (or Ctrl-C), the exception
        propagates and ``last_failure`` says where: (plan node index or -1, replay)."""
        return self.run(n, until_empty)

    def forget_failure(self):
        """Clear ``last_failure`` (an error raised after the launch replaces its own)."""
        self.last_failure = None

    @property
    def replays(self):
        """The replays this plan ran over all its launches (``g.replays``; set between launches)."""
        return self.plan.replay_base

    @replays.setter
    def replays(self, uint64_t r):
        self.plan.replay_base = r

    @property
    def logical_size(self):
        """The logical size (a compaction node changes it during a launch: this may be read then)."""
        return eagle_load_i64(&self.plan.logical_size)

    @logical_size.setter
    def logical_size(self, int64_t n):
        eagle_store_i64(&self.plan.logical_size, n)

    @property
    def num_threads(self):
        return self.plan.num_threads

    def teams(self, int num_threads=-1, logical_size=None):
        """Per stage, for a launch with num_threads threads (default: this thread's
        count) at logical_size (default: the plan's): (policy, team, cost estimate
        in ns or None, verification) where verification is None or a dict with the
        team's and one thread's measured times and the verdict. Reads the plan
        only: safe during a launch on another thread."""
        cdef int64_t size = eagle_load_i64(&self.plan.logical_size) if logical_size is None else logical_size
        cdef eagle_stage_report *rep
        if num_threads < 0:
            num_threads = get_num_threads()
        rep = <eagle_stage_report *>calloc(max(self.plan.n_stages, 1), sizeof(eagle_stage_report))
        if rep == NULL:
            raise MemoryError()
        try:
            eagle_report_teams(&self.plan, num_threads, size, rep)
            out = []
            for s in range(self.plan.n_stages):
                r = rep[s]
                check = None
                if r.candidate or r.verdict != EAGLE_VERDICT_NONE:
                    check = {"candidate": bool(r.candidate),
                             "team_ns": r.team_ns if r.verdict != EAGLE_VERDICT_NONE else None,
                             "serial_ns": r.serial_ns if r.verdict != EAGLE_VERDICT_NONE and r.serial_ns >= 0 else None,
                             "verdict": {EAGLE_VERDICT_NONE: None, EAGLE_VERDICT_TEAM: "team",
                                         EAGLE_VERDICT_SERIAL: "serial"}[r.verdict],
                             "verdict_team": r.verdict_team, "verdict_size": r.verdict_size,
                             "current": bool(r.verdict_current)}
                out.append((_POLICY_NAMES[self.plan.stages[s].policy], r.team,
                            r.cost_ns if r.cost_ns >= 0 else None, check))
            return out
        finally:
            free(rep)

    def _simulate_launch(self, node_ns, team_ns, double now_ns, int n_threads=2):
        """Tests: one launch(1) as the run loop drives the team choice, no node run,
        the choice's clock pinned at now_ns (left pinned: unpin with _pin_choice_clock(-1)).
        node_ns[i]: plan node i's time on one thread (the whole node), taken if the
        replay is a measured one; team_ns[s]: stage s's time on the team, taken if
        the replay verifies it. Returns the segment's kind ("measure", "paired",
        "verify", "run") and the stages' teams it used."""
        cdef int32_t s
        cdef double *buf
        node_ns, team_ns = list(node_ns), list(team_ns)
        if len(node_ns) != self.plan.n_nodes or len(team_ns) != self.plan.n_stages:
            raise ValueError(f"need {self.plan.n_nodes} node times and {self.plan.n_stages} stage "
                             f"times, got {len(node_ns)} and {len(team_ns)}")
        buf = <double *>calloc(max(self.plan.n_nodes + self.plan.n_stages, 1), sizeof(double))
        if buf == NULL:
            raise MemoryError()
        try:
            for s, t in enumerate(node_ns + team_ns):
                buf[s] = t
            self.plan.num_threads = n_threads
            kind = eagle_choice_simulate_launch(&self.plan, buf, buf + self.plan.n_nodes, now_ns)
            teams = [self.plan.stages[s].team for s in range(self.plan.n_stages)]
        finally:
            free(buf)
        return ("measure", "paired", "verify", "run")[kind], teams

    @property
    def checks(self):
        """Re-checks of the teams' verdicts done so far."""
        return eagle_choice_checks(&self.plan)

    def node_costs(self):
        """Measured cost per plan node in ns (per sample for split native nodes), None if unknown."""
        costs = [eagle_load_f64(&self.plan.nodes[i].cost_ns) for i in range(self.plan.n_nodes)]
        return [c if c >= 0 else None for c in costs]


cdef extern from "Python.h":
    object PyCapsule_New(void *pointer, const char *name, void *destructor)

#: ``uint64_t eagle_thread_replay(void)``: the replay the calling thread runs (random nodes'
#: kernels read it, eagle/cpu/_random.pyx)
THREAD_REPLAY = PyCapsule_New(<void *>eagle_thread_replay, "eagle.cpu.thread_replay", NULL)
