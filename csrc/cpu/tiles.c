/* Fused runs; see tiles.h. */
#include "tiles.h"

#include "node_run.h"
#include "observe.h"

void eagle_run_tiles(const eagle_plan *plan, const eagle_stage *st, int64_t lo, int64_t hi,
                     eagle_profile_lane *lane, double *sum_ns, int32_t span_base)
{
    const eagle_node *nodes = plan->nodes + st->first;
    const int32_t count = st->count;
    const int64_t tile = st->tile;
    int64_t a = lo;
    if (lane == NULL && sum_ns == NULL) {
        do {
            const int64_t b = hi - a > tile ? a + tile : hi;
            for (int32_t k = 0; k < count; ++k)
                eagle_call_native(&nodes[k], a, b);
            a = b;
        } while (a < hi);
        return;
    }
    int64_t sums[EAGLE_FUSED_MAX_NODES] = {0};
    const int64_t t_start = eagle_span_clock_ns();
    int64_t t = t_start;
    do {
        const int64_t b = hi - a > tile ? a + tile : hi;
        for (int32_t k = 0; k < count; ++k) {
            eagle_call_native(&nodes[k], a, b);
            const int64_t t1 = eagle_span_clock_ns();
            sums[k] += t1 - t;
            t = t1;
        }
        a = b;
    } while (a < hi);
    int64_t t0 = t_start;
    for (int32_t k = 0; k < count; ++k) {
        if (lane != NULL)
            eagle_record_span(lane, span_base + st->first + k, 0, t0, t0 + sums[k], 0);
        t0 += sums[k];
        if (sum_ns != NULL)
            sum_ns[k] = (double)sums[k];
    }
}
