/* eagle's team choice: which stages of a CPU plan run on the OpenMP team.
 *
 * Each stage (eagle_choice_stage) has a policy: EAGLE_TEAM_SERIAL (the calling
 * thread alone), EAGLE_TEAM_ALL (the whole team) or EAGLE_TEAM_AUTO, which this
 * file decides, in three steps:
 *
 * 1. measure: the plan's first replays run on the calling thread with every
 *    node timed (the cheapest time counts), so one cold replay cannot put a
 *    cheap stage on the team for good;
 * 2. the cost rule: an auto stage goes on the team when its estimated cost
 *    (the nodes' costs at the logical size) pays for a barrier and a GIL
 *    hand-off (eagle_parallel_threshold_ns: 20 barriers, the cheapest of
 *    several timings, kept within [5 µs, 500 µs] and timed again after a
 *    second while it keeps a stage off the team);
 * 3. verify: a stage the cost rule puts on the team is timed there on four
 *    replays, each after one timed on the calling thread (interleaved, so a
 *    load that comes and goes hits both), and the stages timed together stay on
 *    the team only if their typical times there (the mean of each one's team
 *    replays without the slowest, eagle_choice_team_sample) add up to less than
 *    their best on one thread (one noisy timing on either side cannot decide;
 *    together, since a replay that switches from one thread to the team wakes
 *    the team, a cost no stage's own timing sees); the verdict is re-checked on a clock (0.25 s
 *    after it, the interval doubling to at most 1 s while re-checks agree, never
 *    more often than every 100 replays' worth of time on the slower side, as the
 *    verification timed it, so a re-check costs a few percent at most), so a stage
 *    of short replays demoted under load is back on the team about a second after
 *    the load leaves.
 *
 * A shrinking population (a compaction's: its first replays are its costliest):
 * one measured replay once the size has fallen by a quarter, a verification's
 * team replays first (against the serial costs measured), verdicts that hold
 * across sizes as far as their times say the same (a team verdict at any larger
 * size and down to the size its times predict the team no longer faster, a
 * one-thread verdict at any smaller size), and a run segment on the team ended
 * once the population has halved (eagle_choice_size_floor), so the teams are
 * chosen again for what is left.
 *
 * The unit a verdict is about is a stage: a run loop that runs several stages as
 * one unit (a fused run of stages, no barrier between them) must time it as one,
 * i.e. hand the choice the run as one stage.
 *
 * Inputs: the choice sees its own types only, not the executor's plan: per node
 * its measured cost and whether it is sized or can use a team
 * (eagle_choice_node), per stage its nodes and policy (eagle_choice_stage), and
 * per call the logical size and the team size. Its clock and barrier timer come
 * from an eagle_choice_env (the process's: the real ones; tests: fakes), which
 * also caches the parallel threshold per team size. It depends on runtime.h
 * (whether teams are possible) and nothing else of the executor, and includes
 * no Python header: tests/cpu/team_choice_fake.c drives it from C.
 *
 * The run loop (eagle_execute, executor.c) asks eagle_choice_next_segment
 * what to run next, runs it, and reports it with eagle_choice_segment_done;
 * the replay loops time team stages with eagle_choice_team_sample, look at
 * eagle_choice_check_due at their signal checks, and read and clear
 * eagle_choice_replace_costs when they measure nodes.
 *
 * State: one eagle_choice per plan (eagle_plan.choice), pointing at arrays of
 * nodes and stages its owner allocates; written only through the functions
 * here (the stages' `team` and `cost_ns` and the nodes' `cost_ns` are this
 * file's outputs, the nodes' costs its inputs too).
 *
 * Thread-safety: every function that writes the state runs on the launching
 * thread, one launch of a plan at a time (the Python layer serializes the
 * launches of one graph); the OpenMP team threads never touch it.
 * eagle_report_teams only reads the choice and may run on another thread during
 * a launch: every field it reads that a launch writes (the nodes' cost_ns, the
 * counters measured_replays, checks and check_epoch, the stages' verdict
 * fields) is read and written with relaxed atomics (relaxed.h), so it sees each
 * value whole, if not all of one moment. An env's threshold cache is unlocked:
 * the process env is used holding the GIL (eagle_execute calls the run loop's
 * functions here with the GIL held), a test's by one thread.
 */
#ifndef EAGLE_TEAM_CHOICE_H
#define EAGLE_TEAM_CHOICE_H

#include <stdint.h>

#include "clock.h"
#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a stage's team is chosen (eagle_stage.policy). */
enum { EAGLE_TEAM_AUTO = 0, EAGLE_TEAM_SERIAL = 1, EAGLE_TEAM_ALL = 2 };

/* A verification's outcome for a stage (eagle_stage_choice.verdict). */
enum { EAGLE_VERDICT_NONE = 0, EAGLE_VERDICT_TEAM = 1, EAGLE_VERDICT_SERIAL = 2 };

/* One stage's verdict state: the last verification's outcome and the one under
 * way. Owned by its stage (eagle_choice_stage.state). */
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
 * and the last choice. Owned by its eagle_choice (.state). */
typedef struct eagle_plan_choice {
    int32_t measured_replays;       /* replays timed so far to learn the nodes' costs */
    int32_t sized_cost_unknown;     /* a sized node was timed at logical size 0 only */
    int32_t fresh_measure;          /* the next measured replay replaces the nodes' costs */
    int32_t verify_replays;         /* replays timed on the team in the verification under way */
    int32_t verify_serial;          /* ... and on one thread, each before a team replay */
    int32_t check_epoch;            /* bumped by every re-check of the teams */
    int32_t checks;                 /* re-checks done */
    double next_check_ns;           /* the env clock's time of the next re-check; 0: none due */
    double check_interval_ns;       /* grows while re-checks agree with the last verdicts */
    int32_t threshold_bound;        /* an auto stage is kept off the team by the threshold alone */
    /* the last team choice, kept while its inputs stay the same */
    int32_t teams_fresh;            /* 0: choose again (measurements or verdicts changed) */
    int32_t teams_threads;
    int64_t teams_size;
    int32_t teams_verifying, teams_candidates;
    double replay_ns;               /* one replay on one thread, from the nodes' costs; < 0: unknown */
    /* a shrinking population (a compaction's): the logical size the last segment began
     * at, and whether measuring ended early because the population shrank */
    int64_t last_size;
    int32_t measure_cut;
} eagle_plan_choice;

/* ---- the choice's inputs and outputs ---------------------------------------- */

/* A node as the choice sees it. */
typedef struct eagle_choice_node {
    double cost_ns;         /* measured (eagle_choice_node_timed): the whole node, or per
                             * sample when sized; < 0: not yet. In and out; relaxed */
    int32_t sized;          /* its cost grows with the logical size (split native, team node) */
    int32_t splits;         /* it can use a team: sized, or a control node whose bodies hold
                             * sized work (its cost is measured whole) */
    int32_t iterates;       /* a control node whose bodies' own team choice decides their
                             * teams (their passes, a loop's iterations): an auto stage
                             * holding it runs on one thread */
} eagle_choice_node;

/* A stage as the choice sees it: the unit it puts on the team or not. */
typedef struct eagle_choice_stage {
    int32_t first, count;   /* in: its nodes, nodes[first .. first + count) */
    int32_t policy;         /* in: EAGLE_TEAM_* */
    int32_t team;           /* out: for the current segment, 1 or the team size */
    double cost_ns;         /* out: estimate at the logical size; < 0: unknown */
    eagle_stage_choice state;
} eagle_choice_stage;

/* The parallel threshold for one team size, cached (0: not measured). */
typedef struct eagle_threshold_entry {
    double value_ns;
    double at_ns;           /* the env clock's time it was measured */
} eagle_threshold_entry;

#define EAGLE_THRESHOLD_TEAMS 256   /* teams of 2 .. 255 threads have a cached threshold */

/* What the choice measures with: a clock for its schedules (re-checks, the
 * threshold's age; in ns, monotonic) and a barrier timer (one timing of a barrier
 * of a team of n, in ns), each called with ctx; and the threshold cache that the
 * barrier timings fill (all plans of one env share it). Ownership: the caller's;
 * it must outlive every choice using it. */
typedef struct eagle_choice_env {
    double (*now_ns)(void *ctx);
    double (*barrier_ns)(void *ctx, int n_threads);
    void *ctx;
    eagle_threshold_entry thresholds[EAGLE_THRESHOLD_TEAMS];
} eagle_choice_env;

/* One plan's team choice: its nodes and stages (arrays the owner allocates, in
 * stage order), its env and its state. */
typedef struct eagle_choice {
    eagle_choice_node *nodes;
    int32_t n_nodes;
    eagle_choice_stage *stages;
    int32_t n_stages;
    eagle_choice_env *env;
    eagle_plan_choice state;
} eagle_choice;

/* What plan() reports for a stage, computed without touching the choice. */
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

/* An env measuring with now_ns and barrier_ns (each called with ctx), its
 * threshold cache empty. */
void eagle_choice_env_init(eagle_choice_env *env, double (*now_ns)(void *ctx),
                           double (*barrier_ns)(void *ctx, int n_threads), void *ctx);

/* The process's env: the coarse monotonic clock (clock.h) and
 * eagle_barrier_cost_ns (runtime.h). Thread-safety: use it holding the GIL. */
eagle_choice_env *eagle_choice_process_env(void);

/* Give a choice its nodes, stages and env, and its initial state: nothing
 * measured, no verdict, every stage on one thread (team 1, cost unknown). The
 * caller has filled the nodes (cost_ns -1, sized, splits) and the stages' first,
 * count and policy. Call once, before the plan's first launch or report.
 * Ownership: the arrays and env stay the caller's. Thread-safety: the caller owns
 * the choice exclusively. */
void eagle_choice_init(eagle_choice *ch, eagle_choice_node *nodes, int32_t n_nodes,
                       eagle_choice_stage *stages, int32_t n_stages, eagle_choice_env *env);

/* Each stage's team for a launch with num_threads threads at logical_size, as
 * the run loop would choose it, written to out[n_stages].
 * Ownership: out is the caller's, n_stages long; the choice is only read: plan() may
 * run on another thread during a launch (it may then see a verification half-way).
 * It measures the barrier cost when the threshold for num_threads is not known yet
 * (the env's cache). Thread-safety: as the env's (the process env: the GIL held). */
void eagle_report_teams(const eagle_choice *ch, int num_threads, int64_t logical_size,
                        eagle_stage_report *out);

/* Re-checks of the verdicts done so far. Ownership: reads the choice only.
 * Thread-safety: a read of one int, any thread. */
int32_t eagle_choice_checks(const eagle_choice *ch);

/* Cost in ns below which an auto stage runs on one thread, for a team of n
 * (measured from the env's barrier timer on first use, then cached in the env).
 * Thread-safety: as the env's (the cache is not locked; the process env's barrier
 * timer starts a parallel region). */
double eagle_parallel_threshold_ns(eagle_choice_env *env, int n_threads);

/* Fix the env's threshold for a team of n threads (ns <= 0: measure again).
 * Ownership and thread-safety: as eagle_parallel_threshold_ns. */
void eagle_pin_parallel_threshold_ns(eagle_choice_env *env, int n_threads, double ns);

/* The threshold that n barrier timings (ns[], < 0: none) give: 50 times the
 * cheapest, within [5 µs, 500 µs]. Pure. */
double eagle_threshold_from_barriers(const double *ns, int n);

/* One launch(1) as the run loop drives the choice, with no node run (tests: the
 * env's clock and barrier timer are the test's): a measured or paired serial
 * replay takes node i's time as node_ns[i] (the whole node at the logical size),
 * a verifying replay stage s's team time as team_ns[s]. Returns the segment's
 * kind (EAGLE_SEGMENT_*); the stages' teams are then what the launch would have
 * used. Thread-safety: the caller owns the choice and its env. */
int eagle_choice_simulate_launch(eagle_choice *ch, int num_threads, int64_t logical_size,
                                 const double *node_ns, const double *team_ns);

/* ---- the run loop's interface (executor.c and the replay loops) ------------
 * Ownership: each reads and writes only the choice it is given and its env's
 * threshold cache. Thread-safety: all on the launching thread, during
 * eagle_execute, one launch of a plan at a time; the functions declared extern
 * run with the GIL held (between segments); the inline ones run inside a
 * segment, on the launching thread, with or without the GIL; none is called by
 * the team threads. num_threads and logical_size are the launch's. */

/* The kinds of segment a launch is cut into. */
enum {
    EAGLE_SEGMENT_MEASURE,  /* on this thread, every node timed: learning the costs */
    EAGLE_SEGMENT_PAIRED,   /* one replay on this thread, timed, before a team replay */
    EAGLE_SEGMENT_VERIFY,   /* one replay with the stages' teams, team stages timed */
    EAGLE_SEGMENT_RUN       /* the stages' teams, untimed, to the end of the launch */
};

/* At the start of a launch (n_replays > 0, something to run): start a re-check
 * that fell due between launches, and now and then choose again if the
 * parallel threshold is old enough to be measured again. */
void eagle_choice_launch_begin(eagle_choice *ch, int num_threads);

/* The next segment of a launch now at replay r of n_replays: returns its kind
 * (EAGLE_SEGMENT_*), sets *stop (the caller's; the segment is replays
 * [r, *stop)), and chooses the stages' teams for it (stages[*].team). It may
 * time a barrier (the threshold). */
int eagle_choice_next_segment(eagle_choice *ch, int num_threads, int64_t logical_size, int64_t r,
                              int64_t n_replays, int64_t *stop);

/* A segment of `kind` over [r, stop) ran, ending with `done` replays completed
 * and status rc (0 or -1), at logical_size (the size the next segment starts
 * at): count its measured or timed replays, and end the verification when it
 * has enough of them (the stages' verdicts). */
void eagle_choice_segment_done(eagle_choice *ch, int num_threads, int64_t logical_size, int kind,
                               int64_t r, int64_t stop, int64_t done, int rc);

/* The smallest logical size the teams of a run segment at `size` answer for: half
 * of it when an auto stage is on the team (the run loop ends the segment once a
 * compaction shrinks the population below it, and the teams are chosen again for
 * what is left: the first replays of a shrinking population do not decide for the
 * rest), else 0 (a stage off the team stays off as the size falls). */
int64_t eagle_choice_size_floor(const eagle_choice *ch, int64_t size);

/* A re-check is due (eagle_choice_check_due) and the launch paused for it:
 * measure the nodes again on one thread (their costs replaced, not kept as the
 * best ever: a neighbour may have come or gone), then time the team again. */
void eagle_choice_recheck(eagle_choice *ch);

/* A re-check of the teams is due. The replay loops ask at their signal checks,
 * so at most every few ms (one call of the env's clock). Reads the choice only;
 * the launching thread, GIL or not. */
static inline int eagle_choice_check_due(const eagle_choice *ch)
{
    const double next = ch->state.next_check_ns;
    return next > 0 && ch->env->now_ns(ch->env->ctx) >= next;
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

/* Node i of a measured replay took dt ns (the whole node, at logical_size): keep
 * it as its cost (per sample for a sized node) if fresh or the cheapest yet.
 * Writes the node's cost_ns (relaxed); the launching thread, GIL or not. */
void eagle_choice_node_timed(eagle_choice *ch, int32_t i, int64_t logical_size, double dt, int fresh);

/* Whether the next measured replay replaces the nodes' costs (else the
 * cheapest time is kept); a measured replay that completes calls
 * eagle_choice_costs_replaced. The launching thread, GIL or not. */
static inline int eagle_choice_replace_costs(const eagle_choice *ch) { return ch->state.fresh_measure; }
static inline void eagle_choice_costs_replaced(eagle_choice *ch) { ch->state.fresh_measure = 0; }

/* One replay on one thread, in ns, from the nodes' costs at the last choice;
 * < 0: unknown. The launching thread. */
static inline double eagle_choice_replay_ns(const eagle_choice *ch) { return ch->state.replay_ns; }

/* The team stage s runs on in the current segment (1: the calling thread alone). */
static inline int32_t eagle_choice_team(const eagle_choice *ch, int32_t s) { return ch->stages[s].team; }

#ifdef __cplusplus
}
#endif

#endif
