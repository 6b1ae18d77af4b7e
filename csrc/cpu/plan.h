/* The CPU executor's plan: the types a launch runs (nodes, stages, control-flow
 * nodes, the observers' lanes, process groups). Types only; who does what with
 * them: executor.h (the entry and the contract of a launch).
 *
 * Ownership: every array a plan points to (nodes, stages, data pointers,
 * callables, the choice's arrays) is owned by the caller (eagle/cpu/_executor.pyx)
 * and must outlive the launches. Thread-safety: as executor.h.
 */
#ifndef EAGLE_PLAN_H
#define EAGLE_PLAN_H

#include <Python.h>
#include <stdint.h>

#include "eagle/kernel.h"
#include "team_choice.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { EAGLE_NODE_OPAQUE = 0, EAGLE_NODE_NATIVE = 1, EAGLE_NODE_TEAM = 2, EAGLE_NODE_CONTROL = 3 };

typedef struct eagle_node {
    int kind;
    int split;              /* native: divide [0, logical_size) among the team */
    PyObject *callable;     /* opaque: borrowed */
    vectorcallfunc vectorcall;  /* opaque: the callable's vectorcall slot, or NULL */
    eagle_kernel kernel;    /* native */
    eagle_team_kernel team_kernel;  /* team: run in n_phases phases by the whole team */
    int32_t n_phases;       /* team: its phases; every other node: 1 */
    char **data;
    const int64_t *strides;
    void *user_data;        /* control: its eagle_control */
    /* native, team with `bounded` set: the node's own sample extent (the shortest axis 0
     * of its per-sample arrays): it runs over [0, min(logical_size, extent)); bounded 0
     * (a node zeroed whole): over [0, logical_size) */
    int64_t extent;
    int32_t bounded;
    /* split native: each thread's share starts at a multiple of align samples (>= 1) */
    int64_t align;
    /* native: NULL, or run once per run of the node, after all its shares are done, by
     * the thread that finishes last, as finish(0, n, data, strides, finish_data) with
     * n = min(logical_size, extent) (a reduction combines its partials; a node on arrays
     * that are not per-sample runs whole); `arrivals` counts the shares done */
    eagle_kernel finish;
    void *finish_data;
    int32_t arrivals;
} eagle_node;

typedef struct eagle_stage {
    int32_t first, count;   /* nodes[first .. first + count) */
    int32_t n_phases;       /* most phases of a node in the stage (1 if no team node) */
    /* > 0: a fused run: the stage's nodes (all split native, sample-local, at most
     * EAGLE_FUSED_MAX_NODES) run over tiles of this many samples, each tile through
     * every node before the next; the team choice sees it as the one stage it is.
     * 0: node after node over the thread's whole share. */
    int64_t tile;
    /* a fused run: each thread's share starts at a multiple of align samples (>= 1;
     * tile is a multiple of it), the largest align of its nodes */
    int64_t align;
    /* a fused run: NULL, or n_compiled groups of its nodes, in order, each run as one
     * generated function (eagle/cpu/codegen.py) in place of the group's node calls */
    const struct eagle_compiled *compiled;
    int32_t n_compiled;
} eagle_stage;

/* Nodes [first, first + count) of a fused run (offsets in the stage) run as one
 * generated C function over each tile: fn(a, b, data, params, NULL) does what the
 * group's node calls over [a, b) do, each node clamped to its extent, bit for bit. */
typedef struct eagle_compiled {
    int32_t first, count;
    eagle_kernel fn;
    char **data;
    const int64_t *params;
} eagle_compiled;

#define EAGLE_FUSED_MAX_NODES 64

/* ---- observing a launch (eagle.profile, progress=) -------------------------
 * Both are off (NULL) unless the Python layer asks for them for one launch.
 * Profile: one lane per thread of the launch (lane 0 the calling thread, lane t
 * OpenMP thread t); every node call is timed into its thread's lane, in C, with
 * no Python call. A lane grows as it fills (a loop's calls are not known before it
 * runs); a full lane counts what it could not keep in `dropped`.
 * In a fused run a node is called once per tile: its span is the sum of its
 * calls' times, the run's nodes' spans laid end to end from the run's start. */
typedef struct eagle_span {
    int32_t node;           /* plan node index */
    int32_t phase;          /* team nodes: the phase; 0 otherwise */
    int64_t replay;
    int64_t t0_ns, t1_ns;   /* CLOCK_MONOTONIC */
} eagle_span;

typedef struct eagle_profile_lane {
    eagle_span *spans;      /* allocated spans (malloc), grown by the lane's thread as it
                             * fills; NULL at first. The caller frees it after the launch */
    int64_t allocated;
    int64_t capacity;       /* spans kept at most (max_spans); a control node's own span is
                             * kept past it, up to twice it, so a loop keeps its row */
    int64_t count;          /* out: spans kept */
    int64_t dropped;        /* out: spans not kept (lane full) */
    int64_t replay;         /* the replay under way on this thread */
    int64_t os_thread;      /* out: the thread's id (gettid), 0 if it ran no node */
    char pad[16];           /* one cache line per lane: the threads write their own */
} eagle_profile_lane;

typedef struct eagle_profile {
    eagle_profile_lane *lanes;
    int32_t n_lanes;        /* at least the launch's num_threads */
} eagle_profile;

/* Processes that replay one graph together: the ranks of an MPI communicator a
 * collective node of the graph uses (eagle/mpi/_collectives.pyx provides it). They
 * must launch the graph with the same count, and launch_until_done must stop on
 * all of them at one replay. */
typedef struct eagle_group {
    /* vals[0..count) := their maximum over the group's processes. at_launch: the
     * call at a launch's start, which waits a bounded time (then it ends the job
     * itself, saying which rank and node waited: it does not return). */
    void (*all_max)(void *ctx, int64_t *vals, int32_t count, int32_t at_launch);
    /* At every launch's start: the launch's count and mode, for the group's own check
     * (compare = 1: its first collective compares them over the ranks on replay 0;
     * 0: they were compared already, with all_max) */
    void (*arm)(void *ctx, int64_t n, int32_t until_done, int32_t compare);
    void *ctx;
} eagle_group;

typedef struct eagle_plan {
    eagle_node *nodes;
    int32_t n_nodes;
    eagle_stage *stages;
    int32_t n_stages;
    int64_t logical_size;
    /* the logical size the last launch that had samples started at (plan() shows the
     * costs there once the live count is 0); relaxed: plan() may read it meanwhile */
    int64_t launch_size;
    int32_t num_threads;            /* team size for parallel stages */
    int32_t has_opaque;
    /* Where a node (compaction) writes the next replay's logical size, or NULL.
     * Read at the end of every replay, clamped to [0, capacity]; the executor seeds it
     * with the logical size before every replay, so that a replay that does not run the
     * node (it sits in a branch not taken, a loop run zero times) keeps the size. */
    int64_t *size_source;
    int64_t capacity;
    int32_t until_done;             /* stop the launch once the logical size is 0 */
    int64_t replays_done;           /* out: replays completed by the last launch */
    /* the team choice (team_choice.h): its view of the nodes and stages (arrays of
     * n_nodes and n_stages, in the same order, owned by the caller), its state, and
     * each stage's team for the segment under way (eagle_choice_team) */
    eagle_choice choice;
    int32_t paused;                 /* out: a segment stopped early for a re-check */
    /* a run segment whose teams hold down to this logical size (0: any): a compaction
     * that shrinks the size below it ends the segment after that replay (resized), so
     * the teams are chosen again for the smaller population */
    int64_t segment_floor;
    int32_t resized;                /* out: a segment stopped early for a smaller size */
    /* observing (NULL: off, the default; set by the caller for one launch) */
    eagle_profile *profile;         /* time every node call into per-thread lanes */
    PyObject *progress;             /* called as progress(replays_done) by the calling thread,
                                     * holding the GIL, at signal checks, at most every
                                     * EAGLE_PROGRESS_EVERY_NS; borrowed. If it raises, the
                                     * launch stops as on Ctrl-C. */
    double progress_next_ns;        /* CLOCK_MONOTONIC time of the next call (0: at the first check) */
    /* the groups of processes that replay this graph together (NULL, 0: this process alone) */
    eagle_group *groups;
    int32_t n_groups;
    /* with groups and until_done: whether a process of them had samples left when the
     * launch began (set by the caller from eagle_groups_max, which also compared the counts) */
    int32_t live_anywhere;
    int32_t emptied;                /* out: the launch stopped because no sample was left */
    int32_t has_fused;              /* a stage has tile > 0 (the serial loop then walks stages) */
    /* the graph's replays before this launch (g.replays); eagle_execute adds the
     * replays it completed. Random nodes draw replay replay_base + r at replay r. */
    uint64_t replay_base;
    /* a node is a control node: a launch of one replay starts the signal ticker too (a
     * loop inside it checks signals at its ticks) */
    int32_t has_control;
} eagle_plan;

#define EAGLE_PROGRESS_EVERY_NS 100e6

/* ---- control-flow nodes (eagle/record/control.py) ------------------------
 * A control node (EAGLE_NODE_CONTROL, node->user_data an eagle_control) runs its
 * bodies' plans in place, at the outer plan's logical size and replay. while: while
 * cond is nonzero, body 0; if_else: body 0 if cond is nonzero, else body 1 (if any);
 * subgraph: body 0 once.
 *
 * Where the bodies run follows the control node's stage:
 * - stage on one thread, outside any parallel region: the body's own team choice
 *   (its plan's, its stages' policy the control stage's) decides, its passes (a
 *   loop's iterations, an if_else's runs) being its replays: measured on this
 *   thread, verified on the team, re-checked on the clock. A pass on one thread runs
 *   node after node; passes with a stage on the team run in a parallel region of
 *   their own, as below, each stage on the team or on thread 0 alone as the body's
 *   choice says. Under the auto policy such a control node's stage stays on one
 *   thread (eagle_choice_node.iterates): the team is the body's to choose;
 * - inside a parallel region, its stage on thread 0 alone: the bodies run on that
 *   thread, node after node (a fused run node after node too), holding the GIL for
 *   the whole node when a body holds an opaque node;
 * - stage on the team: every thread of the team enters the node together (as a team
 *   kernel's phase); thread 0 evaluates cond[0] (and the iteration limit, signals,
 *   progress) into `team_decision`, a barrier, then every thread runs the body's
 *   stages as the outer stages run on the team (split native nodes divided, fused
 *   runs tile by tile, other nodes dealt out, opaque nodes taking the GIL per call,
 *   nested control nodes entered by all), with a barrier between two body stages
 *   unless both are one unsplit node (thread 0 runs those), and one after the last
 *   unless it is such a node; then the next decision. A failure is kept in the node
 *   (`team_exc`, the earliest body node between two barriers) and every thread leaves
 *   at the next barrier; thread 0 then returns it.
 * A control node is `split` when a body (or a nested one) holds a split native or a
 * team node: the team choice treats it as splittable (its cost is measured whole).
 *
 * Signals are checked inside a while loop as between replays (Ctrl-C stops it
 * promptly, with or without the GIL), and the launch's progress callback is called
 * there too (as progress(replays completed), at most every EAGLE_PROGRESS_EVERY_NS
 * per plan level); max_iterations reached with cond still true raises RuntimeError,
 * or, with on_max_stop, ends the loop (at_limit set).
 * On a failure the node's `failed_*` fields say where (a body's failing node may
 * itself be a control node: its own struct says further where). */
enum { EAGLE_CONTROL_WHILE = 0, EAGLE_CONTROL_IF_ELSE = 1, EAGLE_CONTROL_SUBGRAPH = 2 };
enum { EAGLE_CONTROL_OK = 0, EAGLE_CONTROL_RAISED = 1, EAGLE_CONTROL_LIMIT = 2,
       EAGLE_CONTROL_INTERRUPTED = 3 };

typedef struct eagle_control {
    int32_t control;                /* EAGLE_CONTROL_* */
    const void *cond;               /* the one-element condition, or NULL (subgraph) */
    int32_t cond_size;              /* its item size in bytes: 1, 2, 4 or 8 */
    struct eagle_plan *bodies[2];
    int32_t n_bodies;
    int32_t has_opaque;             /* a body (or a nested one) holds an opaque node */
    int64_t max_iterations;         /* while: < 0 no limit */
    int32_t on_max_stop;            /* while: max_iterations reached stops the loop (else raises) */
    /* out: passes of the last run (a while loop's iterations), and whether it stopped at
     * max_iterations with its condition still true (on_max_stop) */
    int64_t iterations;
    int32_t at_limit;
    int32_t span_base[2];           /* profile: the span node index of each body's node 0 */
    const char *name;               /* the node's name, for the iteration-limit error */
    /* out, on a failure: why (EAGLE_CONTROL_*), the body and its plan node, the iteration */
    int32_t failed_why, failed_body, failed_node;
    int64_t failed_iteration;
    /* a run on the team (above): thread 0's decision (0 done, -1 failed, 1 + the body
     * to run; two slots, by iteration parity), the inner barrier count at the first
     * failure (INT64_MAX: none) and the kept exception (owned while set) */
    int32_t team_decision[2];
    int64_t team_failed_at;
    PyObject *team_exc[3];
} eagle_control;

typedef struct eagle_failure {
    int32_t node;           /* index of the node that raised, -1 for an interrupt */
    int64_t replay;
} eagle_failure;


#ifdef __cplusplus
}
#endif

#endif
