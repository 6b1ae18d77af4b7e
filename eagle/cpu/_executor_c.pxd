# The C executor's declarations (csrc/cpu/*.h), for eagle/cpu/_executor.pyx; one extern
# block per header.
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t

from eagle.native cimport kernel_t, team_kernel_t

cdef extern from "Python.h":
    ctypedef void *vectorcallfunc

cdef extern from "runtime.h" nogil:
    enum:
        EAGLE_MAX_THREADS
    int eagle_max_threads()
    int eagle_have_openmp()
    double eagle_barrier_cost_ns(int n_threads)
    void eagle_mark_forked_child()
    int eagle_is_forked_child()
    int eagle_team_size()
    void eagle_configure_team_size(int usable_cpus, int omp_env_set)
    int eagle_set_team_size(int n)

cdef extern from "ticker.h" nogil:
    int eagle_ticker_running()

cdef extern from "relaxed.h" nogil:
    # the fields a launch writes that another thread may read meanwhile (plan())
    double eagle_load_f64(const double *p)
    int64_t eagle_load_i64(const int64_t *p)
    void eagle_store_i64(int64_t *p, int64_t v)

cdef extern from "team_choice.h" nogil:
    enum:
        EAGLE_TEAM_AUTO
        EAGLE_TEAM_SERIAL
        EAGLE_TEAM_ALL
        EAGLE_VERDICT_NONE
        EAGLE_VERDICT_TEAM
        EAGLE_VERDICT_SERIAL

    ctypedef struct eagle_choice_node:
        double cost_ns
        int32_t sized
        int32_t splits
        int32_t iterates

    ctypedef struct eagle_choice_stage:
        int32_t first, count
        int32_t policy
        int32_t team
        double cost_ns

    ctypedef struct eagle_choice_env:
        pass

    ctypedef struct eagle_choice:
        eagle_choice_node *nodes
        int32_t n_nodes
        eagle_choice_stage *stages
        int32_t n_stages
        eagle_choice_env *env

    ctypedef struct eagle_stage_report:
        int32_t team
        int32_t candidate
        double cost_ns
        int32_t verdict
        double team_ns, serial_ns
        int32_t verdict_team
        int64_t verdict_size
        int32_t verdict_current

    void eagle_choice_env_init(eagle_choice_env *env, double (*now_ns)(void *ctx) noexcept nogil,
                               double (*barrier_ns)(void *ctx, int n_threads) noexcept nogil, void *ctx)
    eagle_choice_env *eagle_choice_process_env()
    void eagle_choice_init(eagle_choice *ch, eagle_choice_node *nodes, int32_t n_nodes,
                           eagle_choice_stage *stages, int32_t n_stages, eagle_choice_env *env)
    void eagle_report_teams(const eagle_choice *ch, int num_threads, int64_t logical_size,
                            eagle_stage_report *out)
    int32_t eagle_choice_checks(const eagle_choice *ch)
    double eagle_parallel_threshold_ns(eagle_choice_env *env, int n_threads)
    void eagle_pin_parallel_threshold_ns(eagle_choice_env *env, int n_threads, double ns)
    double eagle_threshold_from_barriers(const double *ns, int n)
    int eagle_choice_simulate_launch(eagle_choice *ch, int num_threads, int64_t logical_size,
                                     const double *node_ns, const double *team_ns)

cdef extern from "plan.h" nogil:
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
        EAGLE_FUSED_MAX_NODES

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
        int64_t extent
        int32_t bounded
        int64_t align
        kernel_t finish
        void *finish_data
        int32_t arrivals

    ctypedef struct eagle_compiled:
        int32_t first, count
        kernel_t fn
        char **data
        const int64_t *params

    ctypedef struct eagle_stage:
        int32_t first, count
        int32_t n_phases
        int64_t tile
        int64_t align
        const eagle_compiled *compiled
        int32_t n_compiled

    ctypedef struct eagle_span:
        int32_t node
        int32_t phase
        int64_t replay
        int64_t t0_ns, t1_ns

    ctypedef struct eagle_profile_lane:
        eagle_span *spans
        int64_t allocated
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
        void (*arm)(void *ctx, int64_t n, int32_t until_done, int32_t compare) noexcept nogil
        void *ctx

    ctypedef struct eagle_plan:
        eagle_node *nodes
        int32_t n_nodes
        eagle_stage *stages
        int32_t n_stages
        int64_t logical_size
        int64_t launch_size
        int32_t num_threads
        int32_t has_opaque
        int32_t has_control
        int64_t *size_source
        int64_t capacity
        int32_t until_done
        int64_t replays_done
        eagle_choice choice
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
        int32_t on_max_stop
        int64_t iterations
        int32_t at_limit
        int32_t span_base[2]
        const char *name
        int32_t failed_why, failed_body, failed_node
        int64_t failed_iteration

    ctypedef struct eagle_failure:
        int32_t node
        int64_t replay

cdef extern from "replay.h" nogil:
    void eagle_groups_max(eagle_plan *plan, int64_t *vals, int32_t count, int32_t at_launch)

cdef extern from "launch.h" nogil:
    int eagle_launch_encloses(const void *owner)
    uint64_t eagle_thread_replay()

cdef extern from "executor.h":
    # called with the GIL; releases it inside where it can
    # -1 with the exception set and *failure saying where
    int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure)
    int eagle_execute_raising "eagle_execute"(eagle_plan *plan, int64_t n_replays,
                                              eagle_failure *failure) except -1
    # eagle_execute inside a launch context of owner (the re-entry guard's)
    int eagle_launch(eagle_plan *plan, int64_t n_replays, const void *owner, eagle_failure *failure)
    int eagle_launch_raising "eagle_launch"(eagle_plan *plan, int64_t n_replays, const void *owner,
                                            eagle_failure *failure) except -1
