/* What a thread's launches keep per thread: the re-entry guard's launch contexts,
 * and the replay the thread runs (what a random node's kernel draws for).
 *
 * Re-entry guard: every launch pushes a context on its thread, and the team
 * threads of a parallel region carry the launching thread's context, so a node
 * asking for a graph its own launch (or an enclosing one) holds is seen on
 * whichever thread it runs.
 *
 * Ownership: a context is its launch's (on its stack); the per-thread state is
 * each thread's own. Thread-safety: each thread reads and writes its own.
 */
#ifndef EAGLE_LAUNCH_H
#define EAGLE_LAUNCH_H

#include <stdint.h>

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eagle_launch_ctx {
    const void *owner;                      /* the graph whose launch this is */
    const struct eagle_launch_ctx *parent;  /* the launch this one runs inside, or NULL */
} eagle_launch_ctx;

/* Whether owner's launch encloses the current thread's work (eagle_launch,
 * executor.h, pushes each launch's context on its thread). */
int eagle_launch_encloses(const void *owner);

/* The replay (counted over the graph's launches) the calling thread is running,
 * or the last one it ran; what a random node's kernel draws for. */
uint64_t eagle_thread_replay(void);

/* One thread-local, not two: in a shared object each thread-local's address is a
 * __tls_get_addr call, so a run loop takes eagle_this_thread() once and reaches
 * both through it. */
typedef struct eagle_thread_state {
    const eagle_launch_ctx *launch;   /* the innermost launch context */
    uint64_t replay;                  /* the replay it runs (eagle_thread_replay) */
    int64_t iterations;               /* while-loop iterations its launch ran so far, at any
                                       * depth (progress), counted by the launching thread */
} eagle_thread_state;

extern EAGLE_THREAD_LOCAL eagle_thread_state eagle_thread;

static inline eagle_thread_state *eagle_this_thread(void) { return &eagle_thread; }

#ifdef __cplusplus
}
#endif

#endif
