/* The signal ticker: "every few milliseconds", cheaply, for the run loops' signal
 * checks (Ctrl-C must stop a long launch promptly).
 *
 * Reading a clock on every replay costs ~20 ns, more than a tiny replay; reading
 * it every k replays cannot bound the time between checks when the replays become
 * slow in the middle of a launch. A helper thread advances a tick counter every
 * EAGLE_SIGNAL_CHECK_NS while launches run (and for a short while after, so a loop
 * of short launches does not wake it each time); a replay loop compares one
 * counter (eagle_signal_clock). Without the thread, every check reads the clock.
 *
 * Ownership: the ticker's thread and counters are process-wide (this file's).
 * Thread-safety: eagle_ticker_enter/leave on the launching thread holding the GIL
 * (which serializes the thread's start); a signal_clock belongs to one thread.
 */
#ifndef EAGLE_TICKER_H
#define EAGLE_TICKER_H

#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How often (at least) a long launch checks signals. */
#define EAGLE_SIGNAL_CHECK_NS 5e6

/* A launch that may run long (more than one replay, or a loop inside one) ticks
 * while it runs: enter before, leave after. */
void eagle_ticker_enter(void);
void eagle_ticker_leave(void);

/* 1 if the ticker's thread runs (else signal clocks read the clock). */
int eagle_ticker_running(void);

/* The ticks (advanced by the ticker's thread; read relaxed). */
extern _Atomic uint64_t eagle_ticks;

/* "Every few milliseconds" for one loop: a tick seen, or the clock. */
typedef struct eagle_signal_clock {
    uint64_t seen;
    int use_clock;
    double last_ns;
} eagle_signal_clock;

static inline void eagle_signal_clock_init(eagle_signal_clock *c)
{
    c->use_clock = !eagle_ticker_running();
    c->seen = atomic_load_explicit(&eagle_ticks, memory_order_relaxed);
    c->last_ns = c->use_clock ? eagle_now_ns() : 0;
}

/* Whether a check is due; call once per replay (or loop iteration). */
static inline int eagle_signal_clock_due(eagle_signal_clock *c)
{
    if (!c->use_clock) {
        uint64_t t = atomic_load_explicit(&eagle_ticks, memory_order_relaxed);
        if (t == c->seen)
            return 0;
        c->seen = t;
        return 1;
    }
    double t = eagle_now_ns();
    if (t - c->last_ns < EAGLE_SIGNAL_CHECK_NS)
        return 0;
    c->last_ns = t;
    return 1;
}

#ifdef __cplusplus
}
#endif

#endif
