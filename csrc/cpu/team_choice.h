/* eagle's team choice: which stages of a CPU plan run on the OpenMP team.
 *
 * Each stage of a plan (executor.h) has a policy: EAGLE_TEAM_SERIAL (the
 * calling thread alone), EAGLE_TEAM_ALL (the whole team) or EAGLE_TEAM_AUTO,
 * which this file decides, in three steps:
 *
 * 1. measure: the plan's first replays run on the calling thread with every
 *    node timed (the cheapest time counts), so one cold replay cannot put a
 *    cheap stage on the team for good;
 * 2. the cost rule: an auto stage goes on the team when its estimated cost
 *    (the nodes' costs at the logical size) pays for a barrier and a GIL
 *    hand-off (eagle_parallel_threshold_ns: 50 barriers, the cheapest of
 *    several timings, kept within [20 µs, 500 µs] and timed again after a
 *    second while it keeps a stage off the team);
 * 3. verify: a stage the cost rule puts on the team is timed there on four
 *    replays, each after one timed on the calling thread (interleaved, so a
 *    load that comes and goes hits both), and stays on the team only if its
 *    best time there beat its best on one thread (one noisy timing on either
 *    side cannot decide); the verdict is re-checked on a clock (0.25 s after
 *    it, the interval doubling to at most 1 s while re-checks agree, never
 *    more often than every 100 serial replays' worth of time), so a stage
 *    demoted under load is back on the team about a second after the load
 *    leaves.
 *
 * The unit a verdict is about is a stage (eagle_stage): a run loop that runs
 * several stages as one unit (a fused run of stages, no barrier between them)
 * must time it as one, i.e. report its team time on the run's first stage and
 * give the other stages no sample. The decision logic runs without the executor
 * under eagle_choice_simulate_launch (tests: synthetic timings, a pinned clock).
 *
 * The run loop (eagle_execute, executor.c) asks eagle_choice_next_segment
 * what to run next, runs it, and reports it with eagle_choice_segment_done;
 * the replay loops time team stages with eagle_choice_team_sample, look at
 * eagle_choice_check_due at their signal checks, and read and clear
 * eagle_choice_replace_costs when they measure nodes.
 *
 * State: one eagle_plan_choice per plan (eagle_plan.choice) and one
 * eagle_stage_choice per stage (eagle_stage.choice), both owned by the plan
 * and written only through the functions here (the plan's `team`, `cost_ns`
 * of each stage and `cost_ns` of each node are this file's outputs, and the
 * nodes' costs its inputs).
 *
 * Thread-safety: like eagle_execute, every function that writes the state
 * runs on the launching thread, one launch of a plan at a time (the Python
 * layer serializes the launches of one graph); the OpenMP team threads never
 * touch it. eagle_report_teams only reads the plan and may run on another
 * thread during a launch: every field it reads that a launch writes (the
 * nodes' cost_ns, the counters measured_replays, checks and check_epoch, the
 * stages' verdict fields) is read and written with relaxed atomics
 * (relaxed.h), so it sees each value whole, if not all of one moment. The parallel threshold's cache is shared by all
 * plans, unlocked: every function that reads or writes it runs holding the GIL
 * (eagle_execute calls the run loop's functions here with the GIL held).
 */
#ifndef EAGLE_TEAM_CHOICE_H
#define EAGLE_TEAM_CHOICE_H

#include <stdint.h>

#include "clock.h"

#ifdef __cplusplus
extern "C" {
#endif

struct eagle_plan;

/* How a stage's team is chosen (eagle_stage.policy). */
enum { EAGLE_TEAM_AUTO = 0, EAGLE_TEAM_SERIAL = 1, EAGLE_TEAM_ALL = 2 };

/* A verification's outcome for a stage (eagle_stage_choice.verdict). */
enum { EAGLE_VERDICT_NONE = 0, EAGLE_VERDICT_TEAM = 1, EAGLE_VERDICT_SERIAL = 2 };

/* One stage's verdict state: the last verification's outcome and the one under
 * way. Owned by its stage (eagle_stage.choice). */
typedef struct eagle_stage_choice {
    int32_t verdict;        /* EAGLE_VERDICT_*: the last verification's outcome */
    int32_t verdict_team;   /* the team size it measured */
    int32_t verdict_epoch;  /* check_epoch of the plan's choice when it was reached */
    int64_t verdict_size;   /* the logical size it measured at */
    double team_ns;         /* the stage on the team at verdict_size (its typical replay:
                               eagle_choice_team_sample), < 0: none */
    double serial_ns;       /* the stage on one thread at verdict_size, from the nodes' costs */
    double window_ns;       /* team time of the verification under way (see
                               eagle_choice_team_sample), < 0: none yet */
    int64_t window_size;
    /* the verification's team replays: their sum, the slowest, and how many */
    double window_sum_ns, window_max_ns;
    int64_t window_size_sum, window_max_size;
    int32_t window_count;
} eagle_stage_choice;

/* One plan's team-choice state: measuring, verifying, the re-check schedule
 * and the last choice. Owned by its plan (eagle_plan.choice). */
typedef struct eagle_plan_choice {
    int32_t measured_replays;       /* replays timed so far to learn the nodes' costs */
    int32_t sized_cost_unknown;     /* a sized node was timed at logical size 0 only */
    int32_t fresh_measure;          /* the next measured replay replaces the nodes' costs */
    int32_t verify_replays;         /* replays timed on the team in the verification under way */
    int32_t verify_serial;          /* ... and on one thread, each before a team replay */
    int32_t check_epoch;            /* bumped by every re-check of the teams */
    int32_t checks;                 /* re-checks done */
    double next_check_ns;           /* CLOCK_MONOTONIC time of the next re-check; 0: none due */
    double check_interval_ns;       /* grows while re-checks agree with the last verdicts */
    int32_t threshold_bound;        /* an auto stage is kept off the team by the threshold alone */
    /* the last team choice, kept while its inputs stay the same */
    int32_t teams_fresh;            /* 0: choose again (measurements or verdicts changed) */
    int32_t teams_threads;
    int64_t teams_size;
    int32_t teams_verifying, teams_candidates;
    double replay_ns;               /* one replay on one thread, from the nodes' costs; < 0: unknown */
} eagle_plan_choice;

/* What plan() reports for a stage, computed without touching the plan. */
typedef struct eagle_stage_report {
    int32_t team;
    int32_t candidate;      /* auto stage the cost rule would put on the team */
    double cost_ns;
    int32_t verdict;
    double team_ns, serial_ns;
    int32_t verdict_team;
    int64_t verdict_size;
    int32_t verdict_current;  /* the verdict applies to this thread count and size */
} eagle_stage_report;

/* ---- set-up and the Python layer's questions ----------------------------- */

/* Give the plan's choice and every stage's choice their initial state: nothing
 * measured, no verdict, no times (the state a zeroed plan had, with -1 for the
 * stages' times). Call once, after plan->stages and n_stages
 * are set and before the plan's first launch or report.
 * Ownership: writes plan->choice and plan->stages[*].choice only.
 * Thread-safety: the caller owns the plan exclusively (no launch, no report). */
void eagle_choice_init(struct eagle_plan *plan);

/* Choose each stage's team (plan->stages[*].team, cost_ns) from the measured
 * costs, the verdicts and the logical size, for plan->num_threads threads.
 * Ownership: writes the stages' team and cost_ns and plan->choice's last
 * choice. Thread-safety: as eagle_execute: with the GIL held, not during a
 * launch of the same plan. */
void eagle_choose_teams(struct eagle_plan *plan);

/* Each stage's team for a launch with num_threads threads at logical_size, as
 * eagle_choose_teams would choose it, written to out[n_stages].
 * Ownership: out is the caller's, n_stages long; the plan is only read: plan() may run on another thread during a
 * launch (it may then see a verification half-way). It measures the barrier
 * cost when the threshold for num_threads is not known yet (the shared cache).
 * Thread-safety: call with the GIL held. */
void eagle_report_teams(const struct eagle_plan *plan, int num_threads, int64_t logical_size,
                        eagle_stage_report *out);

/* Re-checks of the verdicts done so far. Ownership: reads the plan only.
 * Thread-safety: a read of one int, any thread holding the GIL. */
int32_t eagle_choice_checks(const struct eagle_plan *plan);

/* Cost in ns below which an auto stage runs on one thread, for a team of n
 * (measured from the barrier cost on first use, then cached for all plans).
 * Ownership: the cache is this file's (static). Thread-safety: call with the
 * GIL held, outside eagle's parallel regions (the cache is not locked; a
 * measurement starts a parallel region). */
double eagle_parallel_threshold_ns(int n_threads);

/* Fix the threshold for a team of n threads (tests; ns <= 0: measure again).
 * Ownership and thread-safety: as eagle_parallel_threshold_ns. */
void eagle_pin_parallel_threshold_ns(int n_threads, double ns);

/* The threshold that n barrier timings (ns[], < 0: none) give: 50 times the
 * cheapest, within [20 µs, 500 µs]. Pure. */
double eagle_threshold_from_barriers(const double *ns, int n);

/* ---- for tests: the choice fed synthetic timings ------------------------------
 * Thread-safety: GIL held, no launch in flight anywhere (the clock and the fed
 * barrier timings are process-wide). */

/* The clock the choice schedules by (re-checks, the threshold's age): pinned to
 * now_ns, or the real one again for now_ns < 0. */
void eagle_choice_pin_clock_ns(double now_ns);
extern double eagle_choice_pinned_now_ns;

/* The next n barrier timings the threshold asks for are ns[] (n <= 64), then
 * the barrier is timed again. n = 0: forget those not used. */
void eagle_choice_feed_barrier_costs(const double *ns, int n);

/* One launch(1) of the plan as the run loop drives the choice, with the clock
 * pinned at now_ns and no node run: a measured or paired serial replay takes
 * node i's time as node_ns[i] (the whole node at the logical size), a verifying
 * replay stage s's team time as team_ns[s]. Returns the segment's kind
 * (EAGLE_SEGMENT_*); the stages' teams are then what the launch would have used. */
int eagle_choice_simulate_launch(struct eagle_plan *plan, const double *node_ns,
                                 const double *team_ns, double now_ns);

/* ---- the run loop's interface (executor.c) -------------------------------
 * Ownership: each reads and writes only the plan it is given (its choice
 * state, its stages' choice and team) and the shared threshold cache.
 * Thread-safety: all on the launching thread, during eagle_execute, one launch
 * of a plan at a time; the functions declared extern run with the GIL held
 * (between segments); the inline ones run inside a segment, on the launching
 * thread, with or without the GIL; none is called by the team threads. */

/* The kinds of segment a launch is cut into. */
enum {
    EAGLE_SEGMENT_MEASURE,  /* on this thread, every node timed: learning the costs */
    EAGLE_SEGMENT_PAIRED,   /* one replay on this thread, timed, before a team replay */
    EAGLE_SEGMENT_VERIFY,   /* one replay with the stages' teams, team stages timed */
    EAGLE_SEGMENT_RUN       /* the stages' teams, untimed, to the end of the launch */
};

/* At the start of a launch (n_replays > 0, something to run): start a re-check
 * that fell due between launches, and now and then choose again if the
 * parallel threshold is old enough to be measured again. Writes plan->choice;
 * GIL held. */
void eagle_choice_launch_begin(struct eagle_plan *plan);

/* The next segment of a launch now at replay r of n_replays: returns its kind
 * (EAGLE_SEGMENT_*), sets *stop (the caller's; the segment is replays
 * [r, *stop)), and chooses the stages' teams for it (plan->stages[*].team).
 * Writes plan->choice and the stages; GIL held (it may measure a barrier). */
int eagle_choice_next_segment(struct eagle_plan *plan, int64_t r, int64_t n_replays, int64_t *stop);

/* A segment of `kind` over [r, stop) ran, ending with `done` replays completed
 * (plan->replays_done) and status rc (0 or -1): count its measured or timed
 * replays, and end the verification when it has enough of them (the stages'
 * verdicts). Writes plan->choice and the stages' choice; GIL held. */
void eagle_choice_segment_done(struct eagle_plan *plan, int kind, int64_t r, int64_t stop,
                               int64_t done, int rc);

/* A re-check is due (eagle_choice_check_due) and the launch paused for it:
 * measure the nodes again on one thread (their costs replaced, not kept as the
 * best ever: a neighbour may have come or gone), then time the team again.
 * Writes plan->choice and the stages' choice; GIL held. */
void eagle_choice_recheck(struct eagle_plan *plan);

/* A re-check of the teams is due. Cheap (a coarse clock read): the replay
 * loops ask at their signal checks, so at most every few ms. Reads c only;
 * the launching thread, GIL or not. */
static inline int eagle_choice_check_due(const eagle_plan_choice *c)
{
    if (c->next_check_ns <= 0)
        return 0;
    const double now = eagle_choice_pinned_now_ns >= 0 ? eagle_choice_pinned_now_ns : eagle_coarse_now_ns();
    return now >= c->next_check_ns;
}

/* A team time dt for a stage, measured at logical size `size` by the
 * verification under way (a VERIFY segment). What counts is the team's typical
 * time, not its best: the mean of the replays without the slowest one (one slow
 * replay, a page fault, cannot decide). Beside a busy neighbour a team replay is
 * fast only when the neighbour happens to be off the team's core, and slow
 * (waiting a time slice at the barrier) most of the time: the best team replay
 * beat one thread's best there while the team ran 3x slower on median. One
 * thread's side stays the best of its replays (the nodes' cheapest costs): a
 * single thread can move to the free core, so its best is its typical time.
 * Writes the stage's c; the launching thread (OpenMP thread 0 of the region),
 * GIL or not. */
static inline void eagle_choice_team_sample(eagle_stage_choice *c, double dt, int64_t size)
{
    if (c->window_ns < 0) {
        c->window_sum_ns = 0;
        c->window_size_sum = 0;
        c->window_count = 0;
        c->window_max_ns = -1;
        c->window_max_size = 0;
    }
    c->window_sum_ns += dt;
    c->window_size_sum += size;
    c->window_count += 1;
    if (dt > c->window_max_ns) {
        c->window_max_ns = dt;
        c->window_max_size = size;
    }
    const int32_t k = c->window_count > 1 ? c->window_count - 1 : 1;
    const double sum = c->window_count > 1 ? c->window_sum_ns - c->window_max_ns : c->window_sum_ns;
    const int64_t sizes = c->window_count > 1 ? c->window_size_sum - c->window_max_size : c->window_size_sum;
    c->window_ns = sum / k;
    c->window_size = sizes / k;
}

/* Node n of a measured replay took dt ns (the whole node): keep it as its cost
 * (per sample for a sized node) if fresh or the cheapest yet. Writes the node's
 * cost_ns (relaxed); the launching thread, GIL or not. */
struct eagle_node;
void eagle_choice_node_timed(const struct eagle_plan *plan, struct eagle_node *n, double dt, int fresh);

/* Whether the next measured replay replaces the nodes' costs (else the
 * cheapest time is kept); a measured replay that completes calls
 * eagle_choice_costs_replaced. Read / write c only; the launching thread,
 * GIL or not. */
static inline int eagle_choice_replace_costs(const eagle_plan_choice *c) { return c->fresh_measure; }
static inline void eagle_choice_costs_replaced(eagle_plan_choice *c) { c->fresh_measure = 0; }

/* One replay on one thread, in ns, from the nodes' costs at the last choice;
 * < 0: unknown. Reads c only; the launching thread. */
static inline double eagle_choice_replay_ns(const eagle_plan_choice *c) { return c->replay_ns; }

#ifdef __cplusplus
}
#endif

#endif
