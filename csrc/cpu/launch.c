/* Launch contexts and the per-thread replay; see launch.h. */
#include "launch.h"

#include <stddef.h>

EAGLE_THREAD_LOCAL eagle_thread_state eagle_thread = {NULL, 0, 0};

int eagle_launch_encloses(const void *owner)
{
    for (const eagle_launch_ctx *c = eagle_thread.launch; c != NULL; c = c->parent)
        if (c->owner == owner)
            return 1;
    return 0;
}

uint64_t eagle_thread_replay(void) { return eagle_thread.replay; }
