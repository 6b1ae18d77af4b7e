/* The CPU executor's clocks (CLOCK_MONOTONIC, in ns as a double).
 *
 * Include after Python.h (or with the POSIX feature macros defined), as every
 * file of csrc/cpu does: clock_gettime needs them under -std=c11.
 *
 * Ownership: none (no state). Thread-safety: safe from any thread.
 */
#ifndef EAGLE_CLOCK_H
#define EAGLE_CLOCK_H

#include <time.h>

/* The monotonic clock, for timing nodes and stages. */
static inline double eagle_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A cheap clock for schedules measured in seconds (a few ns a read). */
static inline double eagle_coarse_now_ns(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
#else
    return eagle_now_ns();
#endif
}

#endif
