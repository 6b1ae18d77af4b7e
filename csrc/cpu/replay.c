/* A replay's bookkeeping; see replay.h. */
#include "replay.h"

void eagle_groups_max(eagle_plan *plan, int64_t *vals, int32_t count, int32_t at_launch)
{
    for (int32_t round = 0; round < plan->n_groups; round++)
        for (int32_t g = 0; g < plan->n_groups; g++)
            plan->groups[g].all_max(plan->groups[g].ctx, vals, count, at_launch);
}
