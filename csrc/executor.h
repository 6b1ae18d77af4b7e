/* eagle's CPU executor: replays a staged plan n times.
 *
 * A plan is a list of stages; each stage is a run of nodes that may execute
 * side by side. Each stage runs either on the calling thread alone (team 1)
 * or on the whole OpenMP team (team > 1), where split native nodes have their
 * [0, logical_size) range divided among the threads and the other nodes are
 * dealt out one per thread. One parallel region serves a whole launch; a
 * barrier separates two stages only when one of them uses the team.
 *
 * Team nodes (eagle_team_kernel) run in phases, with a barrier between
 * phases when the stage uses the team. A plan with a size source (a
 * compaction node) takes its logical size from it after every replay, and
 * with until_empty stops once that size is 0.
 *
 * GIL: eagle_execute is called with the GIL held and returns with it held.
 * A plan with no opaque node runs without the GIL; opaque nodes take it
 * (worker threads through PyGILState_Ensure). The calling thread takes it
 * every few milliseconds to run signal handlers, so Ctrl-C stops a launch.
 *
 * Ownership: the plan's arrays (nodes, stages, data pointers, callables) are
 * owned by the caller (eagle/_executor.pyx) and must outlive the call.
 * Thread-safety: one plan must not be executed by two threads at once; the
 * Python layer serializes launches of one graph.
 */
#ifndef EAGLE_EXECUTOR_H
#define EAGLE_EXECUTOR_H

#include <Python.h>
#include <stdint.h>

#include "eagle/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { EAGLE_NODE_OPAQUE = 0, EAGLE_NODE_NATIVE = 1, EAGLE_NODE_TEAM = 2 };

typedef struct eagle_node {
    int kind;
    int split;              /* native: divide [0, logical_size) among the team */
    PyObject *callable;     /* opaque: borrowed */
    vectorcallfunc vectorcall;  /* opaque: the callable's vectorcall slot, or NULL */
    eagle_kernel kernel;    /* native */
    eagle_team_kernel team_kernel;  /* team: run in n_phases phases by the whole team */
    int32_t n_phases;
    char **data;
    const int64_t *strides;
    void *user_data;
    double cost_ns;         /* measured; per sample for split nodes; < 0: not yet */
} eagle_node;

enum { EAGLE_TEAM_AUTO = 0, EAGLE_TEAM_SERIAL = 1, EAGLE_TEAM_ALL = 2 };

typedef struct eagle_stage {
    int32_t first, count;   /* nodes[first .. first + count) */
    int32_t policy;         /* EAGLE_TEAM_*: how the team is chosen */
    int32_t team;           /* chosen for the current launch: 1 or the team size */
    int32_t n_phases;       /* most phases of a team node in the stage (1 if none) */
    double cost_ns;         /* estimate for the current logical size; < 0: unknown */
} eagle_stage;

typedef struct eagle_plan {
    eagle_node *nodes;
    int32_t n_nodes;
    eagle_stage *stages;
    int32_t n_stages;
    int64_t logical_size;
    int32_t num_threads;            /* team size for parallel stages */
    int32_t has_opaque;
    /* Where a node (compaction) writes the next replay's logical size, or NULL.
     * Read at the end of every replay, clamped to [0, capacity]. */
    const int64_t *size_source;
    int64_t capacity;
    int32_t until_empty;            /* stop the launch once the logical size is 0 */
    int64_t replays_done;           /* out: replays completed by the last launch */
    int32_t measured_replays;       /* replays timed so far to learn the nodes' costs */
} eagle_plan;

typedef struct eagle_failure {
    int32_t node;           /* index of the node that raised, -1 for an interrupt */
    int64_t replay;
} eagle_failure;

/* Replay the plan n_replays times. Returns 0, or -1 with a Python exception
 * set and *failure saying where it happened. */
int eagle_execute(eagle_plan *plan, int64_t n_replays, eagle_failure *failure);

/* Choose each stage's team from the measured costs and the logical size. */
void eagle_choose_teams(eagle_plan *plan);

/* Whether the executor was built with OpenMP. */
int eagle_have_openmp(void);

/* Cost in ns below which an auto stage runs on one thread, for a team of n
 * (measured from the barrier cost on first use, then cached). */
double eagle_parallel_threshold_ns(int n_threads);

/* Measured cost in ns of one barrier of a team of n threads. */
double eagle_barrier_cost_ns(int n_threads);

/* Set after fork() in a child whose parent ran a parallel region: libgomp's pool
 * is not fork-safe, so the child runs serially. */
void eagle_mark_forked_child(void);
int eagle_is_forked_child(void);

#ifdef __cplusplus
}
#endif

#endif
