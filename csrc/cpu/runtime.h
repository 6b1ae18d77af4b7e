/* The CPU executor's runtime leaf: OpenMP (through openmp_helpers.h), the thread
 * limits, the team size, fork bookkeeping and the barrier's measured cost. It
 * includes no Python header and depends on no other unit of csrc/cpu (headers
 * only: openmp_helpers.h, clock.h, relaxed.h); the team choice and the run loops
 * build on it.
 *
 * Ownership: process-wide state: two fork flags (a parallel region ran; this
 * process is a child forked after one) and the team size's inputs (the usable
 * CPUs, whether OMP_NUM_THREADS was set, whether eagle_set_team_size was called).
 * Thread-safety: eagle_note_parallel_region is written by the launching thread;
 * the readers run between launches (fork handlers, thread policy), as each
 * function says.
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

/* How many threads a team has, the count every launch reads: OpenMP's setting of
 * the calling thread (omp_get_max_threads) when it was given explicitly
 * (eagle_set_team_size), OMP_NUM_THREADS was set, or it differs from OpenMP's setting
 * when eagle was configured (a threadpoolctl limit: the same rule from the start of
 * the process), else that setting capped to the usable CPUs (which OpenMP alone does not see: affinity, cgroup quota); never
 * more than eagle_max_threads() (a larger OMP_NUM_THREADS or threadpoolctl value is
 * capped to it); 1 without OpenMP or in a child forked after a parallel region.
 * Thread-safety: any thread (the inputs are read relaxed, each whole). */
int eagle_team_size(void);

/* The team size's inputs, read once by whoever loads the executor (eagle.cpu.threads,
 * at import): the CPUs this process may use (< 1: none known, no cap) and whether
 * OMP_NUM_THREADS was set (libgomp reads it once, at load). Also reads
 * eagle_max_threads() and the calling thread's OpenMP setting (its default) once. Until it is called eagle_team_size caps by
 * eagle_max_threads() only. Thread-safety: any thread, before the launches that
 * should see it. */
void eagle_configure_team_size(int usable_cpus, int omp_env_set);

/* Set the calling thread's team size (omp_set_num_threads) and mark it explicit,
 * for every thread, so the cap to the usable CPUs no longer applies: 0, or -1 with
 * nothing changed when n is outside [1, eagle_max_threads()] (the caller checks and
 * says why). Thread-safety: any thread; a launch in flight keeps its team. */
int eagle_set_team_size(int n);

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
