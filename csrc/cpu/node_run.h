/* Running one node: the one dispatch on a node's kind (run_node), used by every
 * run loop (serial with the GIL and without, control bodies serially and on the
 * team, the team region), with the profile's timing done once around it.
 *
 * A loop says where it runs its nodes with an eagle_site: serially on the calling
 * thread (holding the GIL or not), on a team stage's share inside the parallel
 * region (thread tid of nt), or on the launching thread alone inside the region.
 * The site decides how each kind is called; the loop decides which nodes this
 * thread runs (a team stage deals unsplit nodes out, skips Python work after a
 * failure) and what a failure means for the others.
 *
 * The observer hook: with no profile open (site->lane NULL, the usual case) a node
 * call costs one test more than the bare call; with one, its span is timed into the
 * thread's lane (an opaque node's span on the team includes its wait for the GIL).
 *
 * Ownership: reads the node; the kernels write the plan's arrays. Thread-safety:
 * each thread its own site.
 */
#ifndef EAGLE_NODE_RUN_H
#define EAGLE_NODE_RUN_H

#include "plan.h"   /* Python.h first */
#include "control.h"
#include "gil.h"
#include "observe.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    EAGLE_SITE_SERIAL,  /* the calling thread, no parallel region */
    EAGLE_SITE_TEAM,    /* thread tid of a team of nt, its share of a team stage */
    EAGLE_SITE_ALONE    /* the launching thread alone inside the parallel region */
};

typedef struct eagle_site {
    eagle_plan *plan;           /* the plan whose nodes run (a control node's body, or the launch's) */
    eagle_profile_lane *lane;   /* the observer: this thread's profile lane, or NULL */
    int32_t span_base;          /* the profile's span index of the plan's node 0 */
    int where;                  /* EAGLE_SITE_* */
    int tid, nt;                /* this thread's share (serial and alone: 0 of 1) */
    int gil_held;               /* serial: this thread holds the GIL */
    eagle_gil_slot *gil;        /* team, alone: this thread's hold on the GIL */
    struct eagle_team_run *team;  /* team: the team's shared state (control nodes' bodies) */
    PyObject *caller_context;   /* team: the context workers run opaque nodes in, or NULL */
    int abandon;                /* team: this thread failed earlier in the stage: a control
                                 * node does not start (its barriers are still met) */
} eagle_site;

/* Call an opaque node; the caller holds the GIL. */
static inline int eagle_call_opaque(const eagle_node *node)
{
    /* the callable's vectorcall slot, looked up once at plan time, skips the
     * generic call protocol's dispatch on every replay */
    PyObject *res = node->vectorcall != NULL
        ? node->vectorcall(node->callable, NULL, 0, NULL)
        : PyObject_CallNoArgs(node->callable);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

static inline void eagle_call_native(const eagle_node *node, int64_t start, int64_t stop)
{
    if (stop > start)
        node->kernel(start, stop, node->data, node->strides, node->user_data);
}

/* The samples node runs at logical size n: [0, min(n, its extent)). */
static inline int64_t eagle_node_extent(const eagle_node *node, int64_t n)
{
    return node->bounded && node->extent < n ? node->extent : n;
}

/* floor(n * tid / nt) without forming n * tid, which overflows for a logical size
 * above 2**63 / nt (a zero-stride array can be that long): with n = q * nt + r,
 * it is q * tid + floor(r * tid / nt), and r * tid < nt * nt. */
static inline int64_t eagle_split_bound(int64_t n, int tid, int nt)
{
    const int64_t q = n / nt, r = n % nt;
    return q * tid + r * tid / nt;
}

/* eagle_split_bound over whole blocks of `align` samples (the last one may be short):
 * every share but the last starts and ends at a multiple of align. */
static inline int64_t eagle_split_bound_aligned(int64_t n, int tid, int nt, int64_t align)
{
    if (align <= 1)
        return eagle_split_bound(n, tid, nt);
    const int64_t blocks = n / align + (n % align != 0);
    const int64_t b = eagle_split_bound(blocks, tid, nt);
    return b == blocks ? n : b * align;
}

/* One of the `expected` shares of a node's run is done: the last one to arrive runs
 * the node's finish (plan.h). The atomic orders every share's writes before it. */
static inline void eagle_node_arrive(const eagle_node *node, int expected, int64_t n)
{
    if (node->finish == NULL)
        return;
    eagle_node *m = (eagle_node *)node;
    if (expected > 1) {
        if (__atomic_add_fetch(&m->arrivals, 1, __ATOMIC_ACQ_REL) != expected)
            return;
        __atomic_store_n(&m->arrivals, 0, __ATOMIC_RELAXED);
    }
    node->finish(0, n, node->data, node->strides, node->finish_data);
}

/* Whether every thread of a team stage enters the node (a split native node's
 * share, a team node's phase, a control node's bodies); else one thread runs it. */
static inline int eagle_node_entered_by_all(const eagle_node *n)
{
    return n->kind == EAGLE_NODE_TEAM || n->kind == EAGLE_NODE_CONTROL
           || (n->kind == EAGLE_NODE_NATIVE && n->split);
}

/* Whether the node runs Python (opaque) or decides what runs (control): the work a
 * failure earlier in the stage skips. Native and team nodes always complete. */
static inline int eagle_node_is_python(const eagle_node *n)
{
    return n->kind == EAGLE_NODE_OPAQUE || n->kind == EAGLE_NODE_CONTROL;
}

/* An opaque node inside the parallel region: take the GIL (a worker also enters the
 * caller's context), call, drop it. -1 holding the GIL with the error set. */
static inline int eagle_call_opaque_in_region(const eagle_site *s, const eagle_node *node)
{
    eagle_gil_take(s->gil);
    /* tid 0 is the launching thread, in the caller's context already */
    int rc = (s->where == EAGLE_SITE_TEAM && s->tid != 0)
        ? eagle_gil_enter_context(s->gil, s->caller_context) : 0;
    if (rc == 0)
        rc = eagle_call_opaque(node);
    if (rc == 0)
        eagle_gil_drop(s->gil);
    return rc;
}

/* Phase `phase` of node `node` (0 for every node but a team node's later phases) as
 * the site runs it: 0, or -1 with the Python error set (inside the region: holding
 * the GIL). The one switch on a node's kind. */
static EAGLE_ALWAYS_INLINE int eagle_node_call(const eagle_site *s, const eagle_node *node,
                                               int32_t phase)
{
    const int64_t size = s->plan->logical_size;
    switch (node->kind) {
    case EAGLE_NODE_NATIVE: {
        const int64_t n = eagle_node_extent(node, size);
        if (node->split && s->nt > 1) {
            eagle_call_native(node, eagle_split_bound_aligned(n, s->tid, s->nt, node->align),
                              eagle_split_bound_aligned(n, s->tid + 1, s->nt, node->align));
            eagle_node_arrive(node, s->nt, n);
        } else {
            eagle_call_native(node, 0, n);
            eagle_node_arrive(node, 1, n);
        }
        return 0;
    }
    case EAGLE_NODE_TEAM:
        node->team_kernel(phase, s->tid, s->nt, eagle_node_extent(node, size), node->data, node->strides,
                          node->user_data);
        return 0;
    case EAGLE_NODE_OPAQUE:
        return s->where == EAGLE_SITE_SERIAL ? eagle_call_opaque(node)
                                             : eagle_call_opaque_in_region(s, node);
    default:   /* EAGLE_NODE_CONTROL */
        if (s->where == EAGLE_SITE_SERIAL)
            return eagle_run_control(s->plan, node, s->gil_held, s->lane);
        if (s->where == EAGLE_SITE_ALONE)
            return eagle_run_control_alone(s->plan, node, s->gil, s->lane);
        return eagle_run_control_team(s->team, s->plan, node, s->tid, s->nt, s->gil, s->lane,
                                      s->abandon);
    }
}

/* Run phase `phase` of plan node i (phase < its n_phases), timed into the site's
 * profile lane when there is one: the observer hook. */
static EAGLE_ALWAYS_INLINE int eagle_run_node(const eagle_site *s, int32_t i, int32_t phase)
{
    const eagle_node *node = &s->plan->nodes[i];
    eagle_profile_lane *lane = s->lane;
    if (lane == NULL)
        return eagle_node_call(s, node, phase);
    const int64_t t0 = eagle_span_clock_ns();
    const int rc = eagle_node_call(s, node, phase);
    eagle_record_span(lane, s->span_base + i, phase, t0, eagle_span_clock_ns(),
                      node->kind == EAGLE_NODE_CONTROL);
    return rc;
}

/* Every phase of plan node i, in order, stopping at a failure (serial sites). */
static EAGLE_ALWAYS_INLINE int eagle_run_node_whole(const eagle_site *s, int32_t i)
{
    const int32_t n_phases = s->plan->nodes[i].n_phases;
    for (int32_t p = 0; p < n_phases; ++p)
        if (eagle_run_node(s, i, p) < 0)
            return -1;
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif
