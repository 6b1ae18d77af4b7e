/* The runtime leaf; see runtime.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* clock_gettime and sysconf(_SC_NPROCESSORS_ONLN) under -std=c11 */
#endif
#include "runtime.h"

#ifndef _WIN32
#include <unistd.h>
#endif

#include "clock.h"
#include "openmp_helpers.h"
#include "relaxed.h"

static int forked_child = 0;
static int parallel_region_ran = 0;

void eagle_note_parallel_region(void) { parallel_region_ran = 1; }
void eagle_mark_forked_child(void) { if (parallel_region_ran) forked_child = 1; }
int eagle_is_forked_child(void) { return forked_child; }
int eagle_have_openmp(void) { return EAGLE_HAVE_OPENMP; }

int eagle_max_threads(void)
{
    /* more threads than CPUs never speed a stage up, and libgomp aborts the
     * process when it cannot create one: allow modest oversubscription only */
    long cpus = 1;
#if defined(_SC_NPROCESSORS_ONLN)
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    long cap = 8 * (cpus > 0 ? cpus : 1);
    if (cap < EAGLE_MIN_MAX_THREADS)
        cap = EAGLE_MIN_MAX_THREADS;
    if (cap > EAGLE_MAX_THREADS)
        cap = EAGLE_MAX_THREADS;
    int limit = eagle_omp_thread_limit();
    return (limit >= 1 && limit < cap) ? limit : (int)cap;
}

/* the team size's inputs (eagle_configure_team_size); 0: not configured */
static int32_t team_usable_cpus = 0;
static int32_t team_omp_env_set = 0;
static int32_t team_max_threads = 0;
static int32_t team_explicit = 0;
/* OpenMP's setting when eagle was configured (its default, unless something set it) */
static int32_t team_omp_default = 0;

void eagle_configure_team_size(int usable_cpus, int omp_env_set)
{
    eagle_store_i32(&team_usable_cpus, usable_cpus > 0 ? usable_cpus : 0);
    eagle_store_i32(&team_omp_env_set, omp_env_set != 0);
    eagle_store_i32(&team_omp_default, eagle_omp_max_threads());
    eagle_store_i32(&team_max_threads, eagle_max_threads());
}

int eagle_set_team_size(int n)
{
    int max = eagle_load_i32(&team_max_threads);
    if (n < 1 || n > (max > 0 ? max : eagle_max_threads()))
        return -1;
    eagle_omp_set_num_threads(n);
    eagle_store_i32(&team_explicit, 1);
    return 0;
}

int eagle_team_size(void)
{
    if (!eagle_teams_possible())
        return 1;
    int n = eagle_omp_max_threads();
    int usable = eagle_load_i32(&team_usable_cpus);
    /* one rule: OpenMP's default (all the machine's CPUs, which it counts without the
     * cgroup quota) is capped to the usable CPUs; a count someone gave is not
     * (OMP_NUM_THREADS, set_num_threads, or a value other than the default set behind
     * eagle's back: a threadpoolctl limit, another library's omp_set_num_threads) */
    int given = eagle_load_i32(&team_explicit) || eagle_load_i32(&team_omp_env_set)
                || n != eagle_load_i32(&team_omp_default);
    if (usable > 0 && n > usable && !given)
        n = usable;
    int max = eagle_load_i32(&team_max_threads);
    if (max < 1)
        max = eagle_max_threads();
    if (n > max)
        n = max;
    return n > 1 ? n : 1;
}

#if EAGLE_HAVE_OPENMP
double eagle_barrier_cost_ns(int n_threads)
{
    /* up to 2000 barriers, or 2 ms of them: on a loaded machine a barrier can
     * cost hundreds of microseconds */
    if (n_threads < 2)
        return 0;
    const int max_rounds = 2000;
    double t0 = 0, t1 = 0;
    int rounds = 0, stop = 0;
    #pragma omp parallel num_threads(n_threads)
    {
        #pragma omp barrier
        #pragma omp master
        t0 = eagle_now_ns();
        for (;;) {
            #pragma omp barrier
            #pragma omp master
            {
                ++rounds;
                t1 = eagle_now_ns();
                stop = rounds >= max_rounds || t1 - t0 > 2e6;
            }
            #pragma omp barrier
            if (stop)
                break;
        }
    }
    eagle_note_parallel_region();
    return (t1 - t0) / (2.0 * rounds - 1);
}
#else
double eagle_barrier_cost_ns(int n_threads) { (void)n_threads; return 0; }
#endif
