/* Every OpenMP call eagle makes goes through here, with serial fallbacks for a
 * build without OpenMP (EAGLE_HAVE_OPENMP=0). */
#ifndef EAGLE_OPENMP_HELPERS_H
#define EAGLE_OPENMP_HELPERS_H

#if EAGLE_HAVE_OPENMP
#include <omp.h>
static inline int eagle_omp_max_threads(void) { return omp_get_max_threads(); }
static inline void eagle_omp_set_num_threads(int n) { omp_set_num_threads(n); }
static inline int eagle_omp_thread_num(void) { return omp_get_thread_num(); }
static inline int eagle_omp_num_threads(void) { return omp_get_num_threads(); }
static inline int eagle_omp_thread_limit(void) { return omp_get_thread_limit(); }
static inline int eagle_omp_level(void) { return omp_get_level(); }
#else
static inline int eagle_omp_max_threads(void) { return 1; }
static inline void eagle_omp_set_num_threads(int n) { (void)n; }
static inline int eagle_omp_thread_num(void) { return 0; }
static inline int eagle_omp_num_threads(void) { return 1; }
static inline int eagle_omp_thread_limit(void) { return 1; }
static inline int eagle_omp_level(void) { return 0; }
#endif

#endif
