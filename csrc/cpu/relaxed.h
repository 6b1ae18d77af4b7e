/* Relaxed atomic loads and stores, for the plan's fields that another thread may
 * read while a launch writes them (eagle_report_teams, plan(), during a launch).
 *
 * The readers only need each value whole, not ordered with the others (a report
 * may see a measurement half-way, never a torn or invented number), so the
 * memory order is relaxed: on x86-64 and ARM64 these compile to plain aligned
 * loads and stores, the launch's hot loops pay nothing for them, and the
 * compiler may not split, merge or invent the accesses (no data race in C11's
 * sense, so none for ThreadSanitizer either).
 *
 * Ownership: none (the caller's fields). Thread-safety: any thread; the field
 * must be naturally aligned (every field of executor.h's structs is).
 */
#ifndef EAGLE_RELAXED_H
#define EAGLE_RELAXED_H

#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define EAGLE_RELAXED_LOAD_(T, name)                                         \
    static inline T name(const T *p) { T v; __atomic_load(p, &v, __ATOMIC_RELAXED); return v; }
#define EAGLE_RELAXED_STORE_(T, name)                                        \
    static inline void name(T *p, T v) { __atomic_store(p, &v, __ATOMIC_RELAXED); }
#else
/* elsewhere (MSVC): aligned accesses of these sizes are single instructions */
#define EAGLE_RELAXED_LOAD_(T, name) static inline T name(const T *p) { return *(const volatile T *)p; }
#define EAGLE_RELAXED_STORE_(T, name) static inline void name(T *p, T v) { *(volatile T *)p = v; }
#endif

EAGLE_RELAXED_LOAD_(double, eagle_load_f64)
EAGLE_RELAXED_STORE_(double, eagle_store_f64)
EAGLE_RELAXED_LOAD_(int64_t, eagle_load_i64)
EAGLE_RELAXED_STORE_(int64_t, eagle_store_i64)
EAGLE_RELAXED_LOAD_(int32_t, eagle_load_i32)
EAGLE_RELAXED_STORE_(int32_t, eagle_store_i32)

#endif
