"""The Cython face of the C executor (csrc/cpu/, declared in _executor_c.pxd): ``CpuPlan``, the
cpu backend's compiled launch path (an ``eagle._core.CompiledLaunch``: ``eagle.Graph``'s compiled
core runs it without a Python call), and the runtime's primitives that eagle.cpu.threads, the
thread policy, is made of (the runtime's state lives once, in this extension)."""
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.string cimport memset

from eagle._core cimport CompiledLaunch
from eagle.native cimport Kernel, kernel_t, team_kernel_t
from eagle.record.memory import data_pointer
from eagle.cpu.spec import ControlSpec, NativeSpec, OpaqueSpec

from eagle.cpu._executor_c cimport *

cdef extern from "Python.h":
    vectorcallfunc PyVectorcall_Function(object callable)

cdef extern from "<stdlib.h>" nogil:
    void *aligned_alloc(size_t alignment, size_t size)


# ---- the runtime's primitives, for eagle.cpu.threads ---------------------------

def _have_openmp():
    return eagle_have_openmp() != 0


def _max_threads():
    return eagle_max_threads()


def _team_size():
    return eagle_team_size()


def _configure_team_size(int usable_cpus, bint omp_env_set):
    eagle_configure_team_size(usable_cpus, omp_env_set)


def _set_team_size(int n):
    if eagle_set_team_size(n) < 0:
        raise ValueError(f"a team of {n} threads: outside [1, {eagle_max_threads()}]")


def _mark_forked_child():
    eagle_mark_forked_child()


# ---- the team choice's env --------------------------------------------------

def barrier_cost_ns(int n_threads):
    """Measured cost of one OpenMP barrier for a team of n_threads."""
    return eagle_barrier_cost_ns(n_threads)


def parallel_threshold_ns(int n_threads):
    """An auto stage cheaper than this runs on one thread: 20 barriers (the cheapest
    of several timings), within [5 µs, 500 µs]."""
    return eagle_parallel_threshold_ns(eagle_choice_process_env(), n_threads)


def threshold_from_barriers(timings):
    """The threshold that these barrier timings (ns) give (the rule alone, nothing measured)."""
    cdef double buf[64]
    timings = list(timings)[:64]
    for i, t in enumerate(timings):
        buf[i] = t
    return eagle_threshold_from_barriers(buf, len(timings))


def _pin_parallel_threshold(int n_threads, double ns):
    """Fix the process's auto threshold for teams of n_threads (ns <= 0: measure it
    again). For tests of the team choice on a machine whose barrier cost varies."""
    eagle_pin_parallel_threshold_ns(eagle_choice_process_env(), n_threads, ns)


# A test's env (CpuPlan._simulate_launch): a clock that reads `now_ns` and barrier
# timings taken from `barriers` (then 0: a free barrier).
cdef struct fake_env:
    eagle_choice_env env
    double now_ns
    double barriers[64]
    int n_barriers, next_barrier


cdef double _fake_now(void *ctx) noexcept nogil:
    return (<fake_env *>ctx).now_ns


cdef double _fake_barrier(void *ctx, int n_threads) noexcept nogil:
    cdef fake_env *f = <fake_env *>ctx
    if f.next_barrier < f.n_barriers:
        f.next_barrier += 1
        return f.barriers[f.next_barrier - 1]
    return 0


# ---- the plan -------------------------------------------------------------

_POLICIES = {"auto": EAGLE_TEAM_AUTO, "serial": EAGLE_TEAM_SERIAL, "parallel": EAGLE_TEAM_ALL}
_POLICY_NAMES = {v: k for k, v in _POLICIES.items()}


cdef class CpuPlan(CompiledLaunch):
    """Nodes in stage order, ready for eagle_execute.

    Built from ``stages`` (lists of node specs, ``eagle.cpu.spec``: what each node's cpu
    lowering returned) and one team policy per stage ("auto", "serial", "parallel"). An
    ``OpaqueSpec`` runs its callable; a ``NativeSpec`` its kernel over the declared arrays
    (a kernel with phases: a team node). The plan keeps every object it points into alive.

    ``groups``: the processes that replay this graph together (``Node.group`` of the
    graph's collectives, one per communicator, in recording order): each has
    ``all_max_address`` and ``context_address`` (an ``eagle_group``) and
    ``launch_mismatch(n, until_done, counts, modes)``, which raises.

    A ``ControlSpec`` (a control-flow node, ``eagle.record.control``): its bodies are the
    CpuPlan of each body (run in place: on the thread that runs the node, or on the team
    when the node's stage is on it, csrc/cpu/plan.h).

    ``tiles``: per stage, 0, or the tile (in samples) of a fused run: a stage whose
    specs are all split native nodes that touch per-sample arrays only at their own
    samples, run tile by tile (``eagle.cpu.fusion`` decides which; csrc/cpu/tiles.h).

    ``compiled``: per stage, None or the compiled groups of a fused run's nodes, in
    order (``eagle.cpu.codegen``): each has ``first`` and ``count`` (its nodes, offsets in
    the stage) and ``fn_address``, ``data_address``, ``params_address`` (csrc/cpu/plan.h,
    ``eagle_compiled``); the plan keeps them alive.
    """
    cdef eagle_plan plan
    cdef fake_env *fake           # a test's env (_simulate_launch), or NULL
    cdef list keepalive
    cdef list groups
    cdef readonly list order      # graph node index of each plan node
    cdef readonly dict bodies     # plan node index of each control node -> its bodies' CpuPlans
    cdef readonly object last_failure  # (plan node or -1 for an interrupt, replay) of the last failed launch

    def __cinit__(self):
        self.keepalive = []
        self.bodies = {}

    def __init__(self, stages, policies, int64_t logical_size, int64_t capacity=0, size_source=None,
                 groups=(), tiles=None, compiled=None):
        cdef int32_t n_nodes = sum(len(s) for s in stages)
        cdef int32_t i = 0, k, s
        cdef eagle_node *node
        cdef Kernel kern
        cdef eagle_choice_node *cnodes = <eagle_choice_node *>calloc(max(n_nodes, 1), sizeof(eagle_choice_node))
        cdef eagle_choice_stage *cstages = <eagle_choice_stage *>calloc(max(len(stages), 1), sizeof(eagle_choice_stage))
        self.plan.choice.nodes = cnodes
        self.plan.choice.stages = cstages
        self.plan.nodes = <eagle_node *>calloc(max(n_nodes, 1), sizeof(eagle_node))
        self.plan.stages = <eagle_stage *>calloc(max(len(stages), 1), sizeof(eagle_stage))
        if self.plan.nodes == NULL or self.plan.stages == NULL or cnodes == NULL or cstages == NULL:
            raise MemoryError()
        self.plan.n_nodes = n_nodes
        self.plan.n_stages = len(stages)
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
            cstages[s].first = i
            cstages[s].count = len(specs)
            cstages[s].policy = _POLICIES[policies[s]]
            self.plan.stages[s].n_phases = 1
            self.plan.stages[s].align = 1
            if tiles is not None and tiles[s] > 0:
                if len(specs) > EAGLE_FUSED_MAX_NODES or any(
                        type(spec) is not NativeSpec or not spec.split or (<Kernel>spec.kernel).phases
                        for spec in specs):
                    raise ValueError(f"stage {s}: a fused run holds at most {EAGLE_FUSED_MAX_NODES} "
                                     "split native nodes")
                self.plan.stages[s].tile = tiles[s]
                self.plan.has_fused = 1
                if compiled is not None and compiled[s]:
                    self._compiled_groups(&self.plan.stages[s], compiled[s], len(specs))
            for spec in specs:
                node = &self.plan.nodes[i]
                node.n_phases = 1
                cnodes[i].cost_ns = -1
                self.order.append(spec.index)
                spec_type = type(spec)
                if spec_type is ControlSpec:
                    self._control_node(node, spec)
                elif spec_type is OpaqueSpec:
                    node.kind = EAGLE_NODE_OPAQUE
                    node.callable = <PyObject *>spec.call
                    node.vectorcall = PyVectorcall_Function(spec.call)
                    self.plan.has_opaque = 1
                elif spec_type is NativeSpec:
                    kern = <Kernel?>spec.kernel
                    arrays = spec.arrays
                    if kern.phases:
                        node.kind = EAGLE_NODE_TEAM
                        node.team_kernel = kern.team_fn
                        node.n_phases = kern.phases
                        if kern.phases > self.plan.stages[s].n_phases:
                            self.plan.stages[s].n_phases = kern.phases
                    else:
                        node.kind = EAGLE_NODE_NATIVE
                        node.split = 1 if spec.split else 0
                        node.kernel = kern.fn
                    # the team choice's view: a split native or team node costs per sample
                    cnodes[i].sized = cnodes[i].splits = kern.phases > 0 or node.split
                    node.user_data = kern.user_data
                    if spec.extent is not None:
                        node.extent = spec.extent
                        node.bounded = 1
                    node.align = spec.align
                    if spec.align > self.plan.stages[s].align:
                        self.plan.stages[s].align = spec.align
                    if spec.finish is not None:
                        node.finish = <kernel_t><uintptr_t>spec.finish.finish_address
                        node.finish_data = <void *><uintptr_t>spec.finish.finish_data_address
                    node.data = <char **>calloc(max(len(arrays), 1), sizeof(char *))
                    node.strides = <int64_t *>calloc(max(len(arrays), 1), sizeof(int64_t))
                    if node.data == NULL or node.strides == NULL:
                        raise MemoryError()
                    for k, a in enumerate(arrays):
                        node.data[k] = <char *><uintptr_t>data_pointer(a)   # the array's own, not what a subclass says
                        (<int64_t *>node.strides)[k] = a.strides[0] if a.ndim else 0
                else:
                    raise TypeError(f"a CpuPlan takes OpaqueSpec, NativeSpec and ControlSpec, got {spec!r}")
                self.keepalive.append(spec)
                i += 1
        # the team choice's state: nothing measured, no verdict; the process's clock and barrier
        eagle_choice_init(&self.plan.choice, cnodes, n_nodes, cstages, len(stages), eagle_choice_process_env())
        self.set_threads(eagle_team_size())

    cdef int _compiled_groups(self, eagle_stage *st, groups, int32_t count) except -1:
        cdef eagle_compiled *out = <eagle_compiled *>calloc(len(groups), sizeof(eagle_compiled))
        cdef int32_t k, end = 0
        if out == NULL:
            raise MemoryError()
        st.compiled = out
        st.n_compiled = len(groups)
        for k, grp in enumerate(groups):
            if grp.first < end or grp.count < 1 or grp.first + grp.count > count:
                raise ValueError(f"compiled group {k} (nodes {grp.first}..{grp.first + grp.count - 1}) "
                                 f"is not inside the run's {count} nodes after the previous group")
            end = grp.first + grp.count
            out[k].first = grp.first
            out[k].count = grp.count
            out[k].fn = <kernel_t><uintptr_t>grp.fn_address
            out[k].data = <char **><uintptr_t>grp.data_address
            out[k].params = <const int64_t *><uintptr_t>grp.params_address
            self.keepalive.append(grp)
        return 0

    cdef int _control_node(self, eagle_node *node, spec) except -1:
        """Fill plan node `node` from a ControlSpec (see the class docstring)."""
        control, cond, bodies, max_iterations, name, span_bases = (
            spec.control, spec.cond, spec.bodies, spec.max_iterations, spec.name, spec.span_bases)
        cdef eagle_choice_node *me = &self.plan.choice.nodes[node - self.plan.nodes]
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
            auto = False
            for j in range(body.plan.n_stages):
                auto = auto or body.plan.choice.stages[j].policy == EAGLE_TEAM_AUTO
            for j in range(body.plan.n_nodes):
                # split work in a body: the team choice may put the control node's stage on the
                # team, or, where the body's stages are auto, the body's own choice decides,
                # pass by pass (csrc/cpu/plan.h): the control node's stage stays on one thread
                if body.plan.choice.nodes[j].splits or body.plan.choice.nodes[j].iterates:
                    if auto:
                        me.iterates = 1
                    else:
                        me.splits = 1
        c.max_iterations = -1 if max_iterations is None else max_iterations
        c.on_max_stop = spec.on_max == "stop"
        name_bytes = name.encode("utf-8", "backslashreplace").replace(b"\0", b"?")
        c.name = name_bytes
        self.keepalive.append((cond, name_bytes))
        self.bodies[node - self.plan.nodes] = tuple(bodies)
        return 0

    def control_iterations(self, int32_t i):
        """(passes, at_limit) of control plan node i's last run: a while loop's iterations
        (an if_else's or subgraph's: 1, or 0 when no body ran), and whether it stopped at
        max_iterations with its condition still true (on_max="stop")."""
        if not 0 <= i < self.plan.n_nodes or self.plan.nodes[i].kind != EAGLE_NODE_CONTROL:
            raise ValueError(f"plan node {i} is not a control node")
        cdef eagle_control *c = <eagle_control *>self.plan.nodes[i].user_data
        return c.iterations, bool(c.at_limit)

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
        if self.plan.stages != NULL:
            for i in range(self.plan.n_stages):
                free(<void *>self.plan.stages[i].compiled)
        free(self.plan.stages)
        free(self.plan.groups)
        free(self.plan.choice.nodes)
        free(self.plan.choice.stages)
        free(self.fake)

    def set_threads(self, int n):
        self.plan.num_threads = n

    cdef int _agree(self, int64_t n, bint until_done) except -1:
        """Ranks replaying together must make the same launch call. launch(n): each group's
        first collective compares the counts on replay 0 (a rank whose first node raises
        never gets there: nothing is exchanged). launch_until_done: compared here, with
        whether any rank has samples left (a rank without any must still replay while
        another has some); a mismatch raises on every rank before any replay."""
        cdef int64_t vals[5]
        cdef int32_t k, compare = 1
        if until_done or n == 0:
            # compared now: launch_until_done needs the live count of every rank, and
            # launch(0) runs no replay, so no collective would carry the comparison.
            # Maxima of n and -n give the largest and smallest count; the same for the mode
            vals[0], vals[1] = n, -n
            vals[2], vals[3] = (1, -1) if until_done else (0, 0)
            vals[4] = until_done and self.plan.logical_size > 0
            with nogil:
                eagle_groups_max(&self.plan, vals, 5, 1)
            if vals[0] != -vals[1] or vals[2] != -vals[3]:
                self.groups[0].launch_mismatch(n, until_done, (-vals[1], vals[0]), (-vals[3], vals[2]))
            self.plan.live_anywhere = vals[4] != 0
            compare = 0
        for k in range(self.plan.n_groups):
            self.plan.groups[k].arm(self.plan.groups[k].ctx, n, until_done, compare)
        return 0

    cdef int64_t run(self, int64_t n, bint until_done) except -1:
        cdef eagle_failure failure
        cdef int rc
        self.plan.num_threads = eagle_team_size()
        self.plan.until_done = until_done
        if self.last_failure is not None:
            self.last_failure = None
        if self.plan.n_groups:
            self._agree(n, until_done)
        rc = eagle_launch(&self.plan, n, <void *>self, &failure)
        if rc < 0:
            self.last_failure = (failure.node, failure.replay)
            return -1
        return self.plan.replays_done

    cdef bint encloses_current_thread(self) noexcept:
        return eagle_launch_encloses(<void *>self) != 0

    def run_observed(self, int64_t n, bint until_done, object progress,
                     object record):
        """run(), calling ``progress(replays_done)`` at signal checks (or None) and
        timing every node call into ``record`` (an eagle.observe.profile.LaunchRecord, or None):
        each thread keeps at most ``record.max_spans`` calls (its lane grows as it fills: a
        loop's calls are not known before it runs), and ``record.lanes_done(...)`` gets
        (os thread, the spans as bytes, dropped) per lane."""
        cdef eagle_failure failure
        cdef eagle_profile prof
        cdef eagle_profile_lane *lanes = NULL
        cdef int n_threads = eagle_team_size()
        cdef int t
        cdef int64_t done, first
        self.plan.num_threads = n_threads
        self.plan.until_done = until_done
        self.last_failure = None
        if self.plan.n_groups:
            self._agree(n, until_done)
        if record is not None:
            # one cache line per lane (they are written by different threads)
            lanes = <eagle_profile_lane *>aligned_alloc(64, 64 * ((n_threads * sizeof(eagle_profile_lane) + 63) // 64))
            if lanes == NULL:
                raise MemoryError()
            memset(lanes, 0, n_threads * sizeof(eagle_profile_lane))
            # the launching thread's lane starts with room for the replays' calls outside
            # loops; the others (and loops) grow from nothing
            first = min(record.max_spans, max(n, 1) * self.spans_per_replay)
            lanes[0].spans = <eagle_span *>malloc(first * sizeof(eagle_span))
            if lanes[0].spans != NULL:
                lanes[0].allocated = first
            for t in range(n_threads):
                lanes[t].capacity = record.max_spans
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
                    record.lanes_done([(lanes[t].os_thread,
                                        PyBytes_FromStringAndSize(<char *>lanes[t].spans,
                                                                  lanes[t].count * sizeof(eagle_span)),
                                        lanes[t].dropped)
                                       for t in range(n_threads)])
                finally:
                    for t in range(n_threads):
                        free(lanes[t].spans)
                    free(lanes)
        return done

    @property
    def spans_per_replay(self):
        """Node calls of one replay on one thread outside loops' bodies (team nodes: one per
        phase; a body's calls counted once)."""
        cdef int32_t i
        cdef int64_t k = 0
        for i in range(self.plan.n_nodes):
            k += self.plan.nodes[i].n_phases if self.plan.nodes[i].kind == EAGLE_NODE_TEAM else 1
            if self.plan.nodes[i].kind == EAGLE_NODE_CONTROL:
                for body in self.bodies[i]:
                    k += body.spans_per_replay
        return k

    def launch(self, int64_t n, bint until_done=False):
        """Replay n times (with until_done: until the logical size is 0, at most n);
        returns the replays done. If a node raises (or Ctrl-C), the exception
        propagates and ``last_failure`` says where: (plan node index or -1, replay)."""
        return self.run(n, until_done)

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
    def launch_size(self):
        """The logical size the last launch with samples started at (0: none yet)."""
        return eagle_load_i64(&self.plan.launch_size)

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
            num_threads = eagle_team_size()
        rep = <eagle_stage_report *>calloc(max(self.plan.n_stages, 1), sizeof(eagle_stage_report))
        if rep == NULL:
            raise MemoryError()
        try:
            eagle_report_teams(&self.plan.choice, num_threads, size, rep)
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
                out.append((_POLICY_NAMES[self.plan.choice.stages[s].policy], r.team,
                            r.cost_ns if r.cost_ns >= 0 else None, check))
            return out
        finally:
            free(rep)

    def _fake_env(self, barriers=None, threshold=None):
        """Tests: from now on the team choice measures with a fake env of its own: a
        clock set by each _simulate_launch, barrier timings from ``barriers`` (at most
        64; then free: 0 ns), and a threshold cache of its own (``threshold``: a
        (n_threads, ns) pair to pin in it). Called again: new barrier timings, the
        cache and the clock kept."""
        cdef int k
        if self.fake == NULL:
            self.fake = <fake_env *>calloc(1, sizeof(fake_env))
            if self.fake == NULL:
                raise MemoryError()
            eagle_choice_env_init(&self.fake.env, _fake_now, _fake_barrier, self.fake)
            self.plan.choice.env = &self.fake.env
        if barriers is not None:
            barriers = list(barriers)
            if len(barriers) > 64:
                raise ValueError(f"at most 64 barrier timings, got {len(barriers)}")
            for k, t in enumerate(barriers):
                self.fake.barriers[k] = t
            self.fake.n_barriers = len(barriers)
            self.fake.next_barrier = 0
        if threshold is not None:
            eagle_pin_parallel_threshold_ns(&self.fake.env, threshold[0], threshold[1])

    def _fake_threshold_ns(self, int n_threads):
        """Tests: the threshold the fake env (_fake_env) gives for a team of n_threads."""
        if self.fake == NULL:
            raise RuntimeError("no fake env: call _fake_env() first")
        return eagle_parallel_threshold_ns(&self.fake.env, n_threads)

    def _simulate_launch(self, node_ns, team_ns, double now_ns, int n_threads=2):
        """Tests: one launch(1) as the run loop drives the team choice, no node run, on
        the fake env (_fake_env; made if none) with its clock at now_ns. node_ns[i]:
        plan node i's time on one thread (the whole node), taken if the replay is a
        measured one; team_ns[s]: stage s's time on the team, taken if the replay
        verifies it. Returns the segment's kind ("measure", "paired", "verify", "run")
        and the stages' teams it used."""
        cdef int32_t s
        cdef double *buf
        if self.fake == NULL:
            self._fake_env()
        self.fake.now_ns = now_ns
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
            kind = eagle_choice_simulate_launch(&self.plan.choice, n_threads, self.plan.logical_size,
                                                buf, buf + self.plan.n_nodes)
            self.plan.replays_done = 1
            teams = [self.plan.choice.stages[s].team for s in range(self.plan.n_stages)]
        finally:
            free(buf)
        return ("measure", "paired", "verify", "run")[kind], teams

    @property
    def checks(self):
        """Re-checks of the teams' verdicts done so far."""
        return eagle_choice_checks(&self.plan.choice)

    def node_costs(self):
        """Measured cost per plan node in ns (per sample for split native nodes), None if unknown."""
        costs = [eagle_load_f64(&self.plan.choice.nodes[i].cost_ns) for i in range(self.plan.n_nodes)]
        return [c if c >= 0 else None for c in costs]


cdef extern from "Python.h":
    object PyCapsule_New(void *pointer, const char *name, void *destructor)

#: ``uint64_t eagle_thread_replay(void)``: the replay the calling thread runs (random nodes'
#: kernels read it, eagle/cpu/_random.pyx)
THREAD_REPLAY = PyCapsule_New(<void *>eagle_thread_replay, "eagle.cpu.thread_replay", NULL)
