/* The signal ticker; see ticker.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* nanosleep, clock_gettime under -std=c11 */
#endif
#include "ticker.h"

#include <time.h>
#ifndef _WIN32
#include <pthread.h>
#endif

_Atomic uint64_t eagle_ticks = 0;
static _Atomic int ticker_users = 0;

#ifndef _WIN32
#define TICKER_IDLE_TICKS 40          /* ~200 ms without a launch, then sleep */
static pthread_mutex_t ticker_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ticker_cv = PTHREAD_COND_INITIALIZER;
static _Atomic int ticker_state = 0;  /* 0: no thread, 1: ticking, 2: asleep, -1: could not start */
static int ticker_atfork_set = 0;

static void *ticker_main(void *arg)
{
    (void)arg;
    struct timespec pause = {0, (long)EAGLE_SIGNAL_CHECK_NS};
    int idle = 0;
    for (;;) {
        nanosleep(&pause, NULL);
        atomic_fetch_add_explicit(&eagle_ticks, 1, memory_order_relaxed);
        if (atomic_load(&ticker_users) > 0) {
            idle = 0;
            continue;
        }
        if (++idle < TICKER_IDLE_TICKS)
            continue;
        pthread_mutex_lock(&ticker_mu);
        atomic_store(&ticker_state, 2);
        while (atomic_load(&ticker_users) == 0)
            pthread_cond_wait(&ticker_cv, &ticker_mu);
        atomic_store(&ticker_state, 1);
        pthread_mutex_unlock(&ticker_mu);
        idle = 0;
    }
    return NULL;
}

static void ticker_after_fork_child(void)
{
    /* the thread does not exist in the child */
    pthread_mutex_init(&ticker_mu, NULL);
    pthread_cond_init(&ticker_cv, NULL);
    atomic_store(&ticker_state, 0);
    atomic_store(&ticker_users, 0);
}
static void ticker_before_fork(void) { pthread_mutex_lock(&ticker_mu); }
static void ticker_after_fork_parent(void) { pthread_mutex_unlock(&ticker_mu); }

void eagle_ticker_enter(void)
{
    atomic_fetch_add(&ticker_users, 1);
    int st = atomic_load(&ticker_state);
    if (st == 1 || st == -1)
        return;
    if (st == 2) {
        pthread_mutex_lock(&ticker_mu);
        pthread_cond_signal(&ticker_cv);
        pthread_mutex_unlock(&ticker_mu);
        return;
    }
    if (!ticker_atfork_set) {
        pthread_atfork(ticker_before_fork, ticker_after_fork_parent, ticker_after_fork_child);
        ticker_atfork_set = 1;
    }
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    atomic_store(&ticker_state, pthread_create(&th, &attr, ticker_main, NULL) == 0 ? 1 : -1);
    pthread_attr_destroy(&attr);
}

void eagle_ticker_leave(void) { atomic_fetch_sub(&ticker_users, 1); }
int eagle_ticker_running(void) { return atomic_load(&ticker_state) > 0; }
#else
void eagle_ticker_enter(void) {}
void eagle_ticker_leave(void) {}
int eagle_ticker_running(void) { return 0; }
#endif
