/* The CPU executor's runtime leaf: OpenMP (through openmp_helpers.h), the thread
 * limits, fork bookkeeping and the barrier's measured cost. It includes no
 * Python header and depends on no other unit of csrc/cpu; the team choice and
 * the run loops build on it.
 *
 * Ownership: two process-wide flags (a parallel region ran; this process is a
 * child forked after one). Thread-safety: eagle_note_parallel_region is written
 * by the launching thread; the readers run between launches (fork handlers,
 * thread policy), as each function says.
 */
#ifndef EAGLE_RUNTIME_H
#define EAGLE_RUNTIME_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_MSC_VER)
#define EAGLE_THREAD_LOCAL __declspec(thread)
#else
#define EAGLE_THREAD_LOCAL _Thread_local
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EAGLE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define EAGLE_ALWAYS_INLINE inline
#endif

/* Whether the executor was built with OpenMP. */
int eagle_have_openmp(void);

/* Most threads a team may have: max(EAGLE_MIN_MAX_THREADS, 8 x the online
 * CPUs), at most EAGLE_MAX_THREADS, and at most OpenMP's thread limit
 * (OMP_THREAD_LIMIT). */
#define EAGLE_MAX_THREADS 1024
#define EAGLE_MIN_MAX_THREADS 64
int eagle_max_threads(void);

/* A parallel region ran in this process (called by whoever starts one): a child
 * forked after it must not start another. */
void eagle_note_parallel_region(void);

/* Set after fork() in a child whose parent ran a parallel region: libgomp's pool
 * is not fork-safe, so the child runs serially. */
void eagle_mark_forked_child(void);
int eagle_is_forked_child(void);

/* Whether a team of more than one thread may run here: built with OpenMP and not
 * a child forked after a parallel region. */
static inline int eagle_teams_possible(void)
{
    return eagle_have_openmp() && !eagle_is_forked_child();
}

/* Measured cost in ns of one barrier of a team of n threads, in a parallel
 * region of its own (the team choice's threshold is made of it; 0 for n < 2 or
 * without OpenMP). Thread-safety: any thread outside one of eagle's parallel
 * regions. */
double eagle_barrier_cost_ns(int n_threads);

#ifdef __cplusplus
}
#endif

#endif
