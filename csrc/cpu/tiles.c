/* Fused runs; see tiles.h. */
#include "tiles.h"

#include "node_run.h"
#include "observe.h"

/* A node of the run over samples [a, b) of the run's tile: the part inside its extent. */
static inline void call_clamped(const eagle_node *node, int64_t a, int64_t b)
{
    if (!node->bounded) {
        eagle_call_native(node, a, b);
        return;
    }
    const int64_t e = node->extent;
    eagle_call_native(node, a < e ? a : e, b < e ? b : e);
}

/* This thread's share of the run is done: the nodes with a finish arrive (node_run.h). */
static inline void arrive_all(const eagle_plan *plan, const eagle_node *nodes, int32_t count, int nt)
{
    for (int32_t k = 0; k < count; ++k)
        eagle_node_arrive(&nodes[k], nt, eagle_node_extent(&nodes[k], plan->logical_size));
}

/* The run's nodes over one tile [a, b): node k, or the compiled group that starts at k
 * (plan.h, eagle_compiled; it clamps its nodes to their extents itself). Returns the
 * node after what ran; *c is the next compiled group. */
static inline int32_t run_one(const eagle_stage *st, const eagle_node *nodes, int32_t k, int32_t *c,
                              int64_t a, int64_t b)
{
    if (*c < st->n_compiled && st->compiled[*c].first == k) {
        const eagle_compiled *g = &st->compiled[(*c)++];
        g->fn(a, b, g->data, g->params, NULL);
        return k + g->count;
    }
    call_clamped(&nodes[k], a, b);
    return k + 1;
}

void eagle_run_tiles(const eagle_plan *plan, const eagle_stage *st, int64_t lo, int64_t hi, int nt,
                     eagle_profile_lane *lane, double *sum_ns, int32_t span_base)
{
    const eagle_node *nodes = plan->nodes + st->first;
    const int32_t count = st->count;
    const int64_t tile = st->tile;
    int64_t a = lo;
    if (lane == NULL && sum_ns == NULL) {
        do {
            const int64_t b = hi - a > tile ? a + tile : hi;
            int32_t c = 0;
            for (int32_t k = 0; k < count;)
                k = run_one(st, nodes, k, &c, a, b);
            a = b;
        } while (a < hi);
        arrive_all(plan, nodes, count, nt);
        return;
    }
    /* a compiled group's time is its first node's; its other nodes take none */
    int64_t sums[EAGLE_FUSED_MAX_NODES] = {0};
    const int64_t t_start = eagle_span_clock_ns();
    int64_t t = t_start;
    do {
        const int64_t b = hi - a > tile ? a + tile : hi;
        int32_t c = 0;
        for (int32_t k = 0; k < count;) {
            const int32_t next = run_one(st, nodes, k, &c, a, b);
            const int64_t t1 = eagle_span_clock_ns();
            sums[k] += t1 - t;
            t = t1;
            k = next;
        }
        a = b;
    } while (a < hi);
    arrive_all(plan, nodes, count, nt);
    int64_t t0 = t_start;
    for (int32_t k = 0; k < count; ++k) {
        if (lane != NULL)
            eagle_record_span(lane, span_base + st->first + k, 0, t0, t0 + sums[k], 0);
        t0 += sums[k];
        if (sum_ns != NULL)
            sum_ns[k] = (double)sums[k];
    }
}
