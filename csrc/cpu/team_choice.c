/* eagle's team choice; see team_choice.h for the contract. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* clock_gettime under -std=c11 (clock.h) */
#endif
#include "team_choice.h"

#include "relaxed.h"
#include "runtime.h"

/* Replays measured serially, on this thread, before an auto stage may use the
 * team: the cheapest of them counts, so one cold first replay (page faults,
 * first calls) cannot put a cheap stage on the team for good. They may be
 * spread over several launches. */
#define MEASURED_REPLAYS 3
/* A verification times an auto stage on the team in VERIFY_REPLAYS replays,
 * each just after one timed on this thread (so a neighbour that comes and goes
 * hits both sides alike), and compares the team's typical time (the mean without
 * its slowest replay, eagle_choice_team_sample) with one thread's best: one slow
 * replay on either side (a transient load, a page fault) cannot decide the verdict. */
#define VERIFY_REPLAYS 4
/* Re-checks of the verdicts: the first this long after a verification, the
 * interval doubling while re-checks agree, up to CHECK_MAX_NS, so a stage timed
 * under load goes back on the team about a second after the load leaves (and
 * one on the team beside a new neighbour comes off as soon); never more often
 * than every CHECK_REPLAYS_APART replays' worth of time, counted on the slower
 * side as the verification measured it (a team replay beside a busy neighbour was
 * 100x a serial one: a re-check's VERIFY_REPLAYS team replays cost 40% of the
 * time when re-checks were apart by serial replays), so re-checks cost a few
 * percent at most. A re-check does not measure the nodes again on their
 * own replays: its paired serial replays do (their costs replaced). */
#define CHECK_FIRST_NS 0.25e9
#define CHECK_MAX_NS 1e9
#define CHECK_REPLAYS_APART 100

/* A stage cheaper than this runs on one thread whatever a barrier costs: a GIL
 * hand-off and waking the team cost microseconds. (20 µs kept the 8-10 µs stages of a
 * 1-D Jacobi sweep off a team that ran them 1.8x faster; the verification decides.) */
#define PARALLEL_MIN_NS 5e3
/* ... and a stage must cost this many barriers to be worth splitting, ... */
#define PARALLEL_MIN_BARRIERS 20
/* ... but the threshold never exceeds PARALLEL_MAX_NS: a barrier timed beside a
 * busy neighbour (a loop of barriers only, each waiting for a descheduled
 * thread) came out 1000x its quiet cost, and trusted it kept every stage under
 * 13 ms off the team. Above this bound the verification decides (a stage the
 * team does not speed up is timed slower there and stays on one thread). */
#define PARALLEL_MAX_NS 500e3

/* The barrier cost behind the threshold is the cheapest of BARRIER_SAMPLES
 * measurements (load only ever makes a barrier slower), kept as the lowest
 * measured so far, and measured again when older than THRESHOLD_REFRESH_NS if
 * it keeps a stage of some plan off the team (eagle_plan_choice.threshold_bound). */
#define BARRIER_SAMPLES 5
#define THRESHOLD_REFRESH_NS 1e9

/* ---- the env: the clock and the barrier timer ------------------------------ */

void eagle_choice_env_init(eagle_choice_env *env, double (*now_ns)(void *ctx),
                           double (*barrier_ns)(void *ctx, int n_threads), void *ctx)
{
    *env = (eagle_choice_env){.now_ns = now_ns, .barrier_ns = barrier_ns, .ctx = ctx};
}

static double process_now_ns(void *ctx) { (void)ctx; return eagle_coarse_now_ns(); }
static double process_barrier_ns(void *ctx, int n_threads) { (void)ctx; return eagle_barrier_cost_ns(n_threads); }

static eagle_choice_env process_env = {.now_ns = process_now_ns, .barrier_ns = process_barrier_ns};

eagle_choice_env *eagle_choice_process_env(void) { return &process_env; }

static inline double choice_now(const eagle_choice_env *env) { return env->now_ns(env->ctx); }

/* ---- the parallel threshold (cached in the env, shared by its plans) ------- */

double eagle_threshold_from_barriers(const double *ns, int n)
{
    double best = -1;
    for (int k = 0; k < n; ++k)
        if (ns[k] >= 0 && (best < 0 || ns[k] < best))
            best = ns[k];
    double t = best < 0 ? PARALLEL_MAX_NS : best * PARALLEL_MIN_BARRIERS;
    if (t > PARALLEL_MAX_NS)
        t = PARALLEL_MAX_NS;
    if (t < PARALLEL_MIN_NS)
        t = PARALLEL_MIN_NS;
    return t;
}

static int threshold_stale(const eagle_choice_env *env, int n_threads)
{
    if (n_threads < 2 || n_threads >= EAGLE_THRESHOLD_TEAMS)
        return 0;
    const eagle_threshold_entry *c = &env->thresholds[n_threads];
    /* at the floor it cannot go lower: nothing to learn */
    return c->value_ns > PARALLEL_MIN_NS && choice_now(env) - c->at_ns >= THRESHOLD_REFRESH_NS;
}

static double parallel_threshold(eagle_choice_env *env, int n_threads, int may_refresh)
{
    if (n_threads < 2)
        return PARALLEL_MIN_NS;
    eagle_threshold_entry *c = n_threads < EAGLE_THRESHOLD_TEAMS ? &env->thresholds[n_threads] : NULL;
    if (c && c->value_ns > 0 && !(may_refresh && threshold_stale(env, n_threads)))
        return c->value_ns;
    double samples[BARRIER_SAMPLES];
    for (int k = 0; k < BARRIER_SAMPLES; ++k)
        samples[k] = env->barrier_ns(env->ctx, n_threads);
    const double t = eagle_threshold_from_barriers(samples, BARRIER_SAMPLES);
    if (c) {
        if (c->value_ns <= 0 || t < c->value_ns)
            c->value_ns = t;
        c->at_ns = choice_now(env);
        return c->value_ns;
    }
    return t;
}

double eagle_parallel_threshold_ns(eagle_choice_env *env, int n_threads)
{
    return parallel_threshold(env, n_threads, 0);
}

void eagle_pin_parallel_threshold_ns(eagle_choice_env *env, int n_threads, double ns)
{
    if (n_threads < 2 || n_threads >= EAGLE_THRESHOLD_TEAMS)
        return;
    env->thresholds[n_threads].value_ns = ns > 0 ? ns : 0;
    env->thresholds[n_threads].at_ns = ns > 0 ? 1e300 : 0;   /* pinned: never measured again */
}

/* ---- costs and the cost rule ----------------------------------------------- */

/* The fields plan() may read during a launch on another thread are read and
 * written with relaxed atomics (relaxed.h): a node's cost (written by the
 * measuring replays, without the GIL), the counters and verdicts stage_team and
 * the report read. */
static double node_cost(const eagle_choice_node *n, int64_t logical_size)
{
    const double cost = eagle_load_f64(&n->cost_ns);
    if (cost < 0)
        return -1;
    return n->sized ? cost * (double)logical_size : cost;
}

/* Whether a sized node has no cost yet: it was only ever timed at logical size 0,
 * which says nothing of its cost per sample. */
static int sized_cost_unknown(const eagle_choice *ch)
{
    for (int32_t i = 0; i < ch->n_nodes; ++i)
        if (ch->nodes[i].sized && eagle_load_f64(&ch->nodes[i].cost_ns) < 0)
            return 1;
    return 0;
}

static double stage_cost(const eagle_choice *ch, const eagle_choice_stage *st, int64_t logical_size,
                         int *splittable)
{
    double cost = 0;
    *splittable = 0;
    for (int32_t i = st->first; i < st->first + st->count; ++i) {
        const eagle_choice_node *n = &ch->nodes[i];
        double c = node_cost(n, logical_size);
        cost = (c < 0 || cost < 0) ? -1 : cost + c;
        *splittable |= n->splits && logical_size > 1;
    }
    return cost;
}

/* The smallest size a team verdict reached at vsize answers for: read as the team's
 * share of the work scaling perfectly (serial_ns / nt) and the rest of its time fixed
 * (barriers, hand-offs), the measured times predict the team faster down to
 * vsize * (team - serial/nt) / (serial - serial/nt); never above vsize / 2. */
static int64_t team_verdict_floor(const eagle_stage_choice *v, int nt)
{
    const int64_t vsize = eagle_load_i64(&v->verdict_size);
    const double serial = eagle_load_f64(&v->serial_ns), team = eagle_load_f64(&v->team_ns);
    double f = 0.5;
    if (serial > 0 && team >= 0 && nt > 1) {
        const double work = serial / nt;
        f = (team - work) / (serial - work);
        if (f < 0)
            f = 0;
        if (f > 0.5)
            f = 0.5;
    }
    return (int64_t)(f * (double)vsize);
}

/* Whether a stage's verdict answers for a launch with nt threads at this size:
 * reached since the last re-check began, with this team, and at a size its times
 * say the same for (what the team saves grows with the size, what it costs does
 * not): a team verdict at any larger size and down to team_verdict_floor, a
 * one-thread verdict at any smaller size and up to 2x the size it measured. A
 * shrinking population keeps the verdicts its replays reached instead of timing
 * the team again at every halving, and one started again from its full size keeps
 * the team its smaller replays earned. */
static inline int verdict_current(const eagle_choice *ch, const eagle_choice_stage *st, int nt,
                                  int64_t size)
{
    const eagle_stage_choice *v = &st->state;
    const int64_t vsize = eagle_load_i64(&v->verdict_size);
    const int32_t verdict = eagle_load_i32(&v->verdict);
    if (verdict == EAGLE_VERDICT_NONE
        || eagle_load_i32(&v->verdict_epoch) != eagle_load_i32(&ch->state.check_epoch)
        || eagle_load_i32(&v->verdict_team) != nt)
        return 0;
    if (verdict == EAGLE_VERDICT_SERIAL)
        return size <= 2 * vsize;
    return size >= team_verdict_floor(v, nt);
}

/* Whether the population shrank by a quarter or more since the last segment (a
 * compaction's): its first replays are its costliest. */
static inline int shrinking(const eagle_plan_choice *c, int64_t size)
{
    return c->last_size > 0 && 4 * size < 3 * c->last_size;
}

/* Enough measured replays: MEASURED_REPLAYS, or one on a shrinking population. */
static inline int measured_enough(const eagle_plan_choice *c)
{
    return eagle_load_i32(&c->measured_replays) >= MEASURED_REPLAYS || c->measure_cut;
}

/* One stage's team; *candidate: auto and the cost rule wants the team;
 * *verify: the team must be timed first (no current verdict); *held: auto, the
 * cost rule keeps it off the team by the barrier threshold alone (it costs
 * more than PARALLEL_MIN_NS), so a lower threshold, measured again, may let it on. */
static int stage_team(const eagle_choice *ch, const eagle_choice_stage *st, int nt, int64_t size,
                      int may_refresh, double *cost_out, int *candidate, int *verify, int *held)
{
    int parallel_ok = nt > 1 && eagle_teams_possible();
    int splittable;
    double cost = stage_cost(ch, st, size, &splittable);
    *cost_out = cost;
    *candidate = *verify = *held = 0;
    if (!parallel_ok || st->policy == EAGLE_TEAM_SERIAL)
        return 1;
    if (st->policy == EAGLE_TEAM_ALL)
        return nt;
    /* a control node whose bodies choose their own teams, pass by pass: its stage stays
     * here (timing the whole of a loop on the team cost each re-check the loop's
     * barriers; its iterations are timed instead) */
    for (int32_t i = st->first; i < st->first + st->count; ++i)
        if (ch->nodes[i].iterates)
            return 1;
    /* auto: only a measured stage whose cost pays for a barrier and a hand-off */
    if (!((measured_enough(&ch->state) || eagle_load_i32(&ch->state.checks) > 0)
          && (st->count > 1 || splittable) && cost >= PARALLEL_MIN_NS))
        return 1;
    if (cost < parallel_threshold(ch->env, nt, may_refresh)) {
        *held = 1;
        return 1;
    }
    *candidate = 1;
    if (verdict_current(ch, st, nt, size))
        return eagle_load_i32(&st->state.verdict) == EAGLE_VERDICT_TEAM ? nt : 1;
    *verify = 1;
    return nt;
}

/* Returns whether some stage is to be verified on the team. */
static int choose_teams(eagle_choice *ch, int nt, int64_t size, int *any_candidate)
{
    eagle_plan_choice *c = &ch->state;
    if (c->teams_fresh && c->teams_threads == nt && c->teams_size == size) {
        *any_candidate = c->teams_candidates;
        return c->teams_verifying;
    }
    int verifying = 0, held_any = 0;
    double replay = 0;
    *any_candidate = 0;
    for (int32_t s = 0; s < ch->n_stages; ++s) {
        eagle_choice_stage *st = &ch->stages[s];
        int candidate, verify, held;
        st->team = stage_team(ch, st, nt, size, 1, &st->cost_ns, &candidate, &verify, &held);
        verifying |= verify;
        held_any |= held;
        *any_candidate |= candidate;
        replay = (st->cost_ns < 0 || replay < 0) ? -1 : replay + st->cost_ns;
    }
    c->replay_ns = replay;
    c->teams_fresh = 1;
    c->teams_threads = nt;
    c->teams_size = size;
    c->teams_verifying = verifying;
    c->teams_candidates = *any_candidate;
    c->threshold_bound = held_any;
    return verifying;
}

void eagle_report_teams(const eagle_choice *ch, int num_threads, int64_t logical_size,
                        eagle_stage_report *out)
{
    for (int32_t s = 0; s < ch->n_stages; ++s) {
        const eagle_choice_stage *st = &ch->stages[s];
        eagle_stage_report *o = &out[s];
        int candidate, verify, held;
        o->team = stage_team(ch, st, num_threads, logical_size, 0, &o->cost_ns, &candidate, &verify,
                             &held);
        o->candidate = candidate;
        o->verdict = eagle_load_i32(&st->state.verdict);
        o->team_ns = eagle_load_f64(&st->state.team_ns);
        o->serial_ns = eagle_load_f64(&st->state.serial_ns);
        o->verdict_team = eagle_load_i32(&st->state.verdict_team);
        o->verdict_size = eagle_load_i64(&st->state.verdict_size);
        o->verdict_current = verdict_current(ch, st, num_threads, logical_size);
    }
}

int32_t eagle_choice_checks(const eagle_choice *ch) { return eagle_load_i32(&ch->state.checks); }

void eagle_choice_init(eagle_choice *ch, eagle_choice_node *nodes, int32_t n_nodes,
                       eagle_choice_stage *stages, int32_t n_stages, eagle_choice_env *env)
{
    /* zero is "nothing yet" for every field but the stages' times (-1: none) */
    *ch = (eagle_choice){.nodes = nodes, .n_nodes = n_nodes, .stages = stages, .n_stages = n_stages,
                         .env = env};
    for (int32_t s = 0; s < n_stages; ++s) {
        eagle_choice_stage *st = &stages[s];
        st->team = 1;
        st->cost_ns = -1;
        st->state = (eagle_stage_choice){0};
        st->state.team_ns = -1;
        st->state.serial_ns = -1;
        st->state.window_ns = -1;
    }
}

/* ---- verification and re-checks ------------------------------------------- */

/* The verdict the verification reaches for its stages, together: the team when their
 * team times add up to less than their times on one thread (or a stage's serial time is
 * unknown). Together, not stage by stage: a replay that switches from one thread to the
 * team wakes the team each time, a cost none of the stages' own timings sees (a 1-D
 * Jacobi step whose one stage was kept on the team and the other not ran 58 µs a
 * replay, against 23 µs on one thread and 9 µs with both on the team). */
static int joint_verdict(const eagle_choice *ch)
{
    double team = 0, serial = 0;
    int known = 1;
    for (int32_t s = 0; s < ch->n_stages; ++s) {
        const eagle_choice_stage *st = &ch->stages[s];
        const eagle_stage_choice *v = &st->state;
        if (v->window_ns < 0 || st->policy != EAGLE_TEAM_AUTO)
            continue;
        int splittable;
        const double serial_ns = stage_cost(ch, st, v->window_size, &splittable);
        team += v->window_ns;
        if (serial_ns < 0)
            known = 0;
        else
            serial += serial_ns;
    }
    return (known && team >= serial) ? EAGLE_VERDICT_SERIAL : EAGLE_VERDICT_TEAM;
}

/* The verification's replays are done: keep the team where it was faster. */
static void finish_verification(eagle_choice *ch, int nt, int64_t size)
{
    eagle_plan_choice *c = &ch->state;
    int agree = 1;
    /* one replay on one thread, and one of this verification's team replays (its team
     * stages at their mean, the slowest replay included: what a re-check pays) */
    double serial_replay = 0, team_replay = 0;
    const int joint = joint_verdict(ch);
    for (int32_t s = 0; s < ch->n_stages; ++s) {
        eagle_choice_stage *st = &ch->stages[s];
        eagle_stage_choice *v = &st->state;
        int splittable;
        double cost = stage_cost(ch, st, size, &splittable);
        if (cost > 0)
            serial_replay += cost;
        if (v->window_ns >= 0 && v->window_count > 0)
            team_replay += v->window_sum_ns / v->window_count;
        else if (cost > 0)
            team_replay += cost;
        if (v->window_ns < 0 || st->policy != EAGLE_TEAM_AUTO) {
            v->window_ns = -1;
            continue;   /* not on the team in this verification, or its team is the user's */
        }
        int old = v->verdict;
        const double serial_ns = stage_cost(ch, st, v->window_size, &splittable);
        const int verdict = joint;
        eagle_store_f64(&v->serial_ns, serial_ns);
        eagle_store_f64(&v->team_ns, v->window_ns);
        eagle_store_i64(&v->verdict_size, v->window_size);
        eagle_store_i32(&v->verdict_team, nt);
        eagle_store_i32(&v->verdict_epoch, c->check_epoch);
        eagle_store_i32(&v->verdict, verdict);
        v->window_ns = -1;
        agree &= old == verdict;
    }
    c->verify_replays = 0;
    c->verify_serial = 0;
    c->teams_fresh = 0;
    if (c->check_interval_ns <= 0 || !agree)
        c->check_interval_ns = CHECK_FIRST_NS;
    else if (c->check_interval_ns < CHECK_MAX_NS)
        c->check_interval_ns *= 2;
    /* a re-check runs VERIFY_REPLAYS replays on each side: whichever side loses costs
     * its replays' worth against the verdict's, so the next one waits at least
     * CHECK_REPLAYS_APART of the slower side's replays */
    double wait = c->check_interval_ns;
    const double slower = team_replay > serial_replay ? team_replay : serial_replay;
    if (wait < CHECK_REPLAYS_APART * slower)
        wait = CHECK_REPLAYS_APART * slower;
    c->next_check_ns = choice_now(ch->env) + wait;
}

void eagle_choice_recheck(eagle_choice *ch)
{
    eagle_plan_choice *c = &ch->state;
    c->next_check_ns = 0;
    /* the nodes are measured again by the verification's paired serial replays
     * (the first replaces their costs): no replays of its own for that */
    c->fresh_measure = 1;
    c->verify_replays = 0;
    c->verify_serial = 0;
    eagle_store_i32(&c->check_epoch, c->check_epoch + 1);
    eagle_store_i32(&c->checks, c->checks + 1);
    c->teams_fresh = 0;
    for (int32_t s = 0; s < ch->n_stages; ++s)
        ch->stages[s].state.window_ns = -1;
}

/* ---- the run loop's segments ----------------------------------------------- */

static int needs_measuring(const eagle_choice *ch, int64_t size)
{
    if (measured_enough(&ch->state))
        return 0;
    /* a sized node timed at logical size 0 only: measure once the size is > 0 */
    if (ch->state.sized_cost_unknown && size == 0)
        return 0;
    for (int32_t s = 0; s < ch->n_stages; ++s)
        if (ch->stages[s].policy == EAGLE_TEAM_AUTO)
            return 1;
    return 0;
}

void eagle_choice_launch_begin(eagle_choice *ch, int nt)
{
    eagle_plan_choice *c = &ch->state;
    if (nt > 1 && eagle_choice_check_due(ch))
        eagle_choice_recheck(ch);
    /* a stage held off the team by the barrier threshold alone: choose again once
     * the threshold is old enough to be measured again (one int test per launch
     * for the plans that have none, tiny graphs among them) */
    if (c->threshold_bound && nt > 1 && threshold_stale(ch->env, nt))
        c->teams_fresh = 0;
}

int eagle_choice_next_segment(eagle_choice *ch, int nt, int64_t size, int64_t r, int64_t n_replays,
                              int64_t *stop)
{
    eagle_plan_choice *c = &ch->state;
    int kind;
    *stop = n_replays;
    /* the cheapest of several replays guards a cheap stage against one cold replay; a
     * shrinking population's later replays are cheaper anyway, and its first are its
     * costliest: one measured replay, then the team is timed (verifying re-times it) */
    if (c->measured_replays > 0 && !c->measure_cut && shrinking(c, size))
        c->measure_cut = 1;
    if (needs_measuring(ch, size)) {
        /* Opaque and fresh native nodes have unknown costs until they run:
         * run the first replays on this thread, timing each node, then choose. */
        kind = EAGLE_SEGMENT_MEASURE;
        /* one replay a segment: a compaction may shrink the population after it (and
         * end the measuring, measure_cut) */
        *stop = r + 1;
    } else {
        int any_candidate;
        if (choose_teams(ch, nt, size, &any_candidate)) {
            /* A stage the cost rule puts on the team: time it there first,
             * each team replay after one on this thread, so both times are
             * taken under the same load (a neighbour comes and goes). */
            *stop = r + 1;
            /* a shrinking population: its team replays first, against the serial costs
             * measured so far (pairs would time its costliest replays on one thread) */
            if (c->verify_serial <= c->verify_replays && !shrinking(c, size)) {
                kind = EAGLE_SEGMENT_PAIRED;
                if (c->verify_serial == 0)
                    c->fresh_measure = 1;   /* this verification's own serial times */
            } else {
                kind = EAGLE_SEGMENT_VERIFY;
            }
        } else {
            kind = EAGLE_SEGMENT_RUN;
            if (!any_candidate) {
                /* nothing to re-check; but a launch on one thread says nothing of
                 * the team's verdicts: their schedule stays */
                if (nt > 1)
                    c->next_check_ns = 0;
            } else if (c->next_check_ns <= 0) {
                /* a verdict back in use (after launches on one thread, or at a size
                 * that had no candidate): re-checked on the clock again */
                c->next_check_ns = choice_now(ch->env)
                                   + (c->check_interval_ns > 0 ? c->check_interval_ns : CHECK_FIRST_NS);
            }
            if (c->threshold_bound) {
                /* a long launch pauses (as for a re-check) to measure the threshold again */
                const double due = choice_now(ch->env) + THRESHOLD_REFRESH_NS;
                if (c->next_check_ns <= 0 || c->next_check_ns > due)
                    c->next_check_ns = due;
            }
            if (c->verify_serial || c->verify_replays) {
                /* a verification left off (the cost rule changed its mind) */
                c->verify_serial = c->verify_replays = 0;
                for (int32_t s = 0; s < ch->n_stages; ++s)
                    ch->stages[s].state.window_ns = -1;
            }
        }
    }
    c->last_size = size;
    return kind;
}

void eagle_choice_segment_done(eagle_choice *ch, int nt, int64_t size, int kind, int64_t r,
                               int64_t stop, int64_t done, int rc)
{
    eagle_plan_choice *c = &ch->state;
    if (kind == EAGLE_SEGMENT_MEASURE || kind == EAGLE_SEGMENT_PAIRED) {
        if (kind == EAGLE_SEGMENT_MEASURE) {
            /* replays at logical size 0 teach nothing of a sized node's cost per
             * sample: they do not use up the measuring (the stage would never be
             * considered for the team), which starts again at the first replay at
             * a size > 0 (needs_measuring) */
            c->sized_cost_unknown = sized_cost_unknown(ch);
            if (!c->sized_cost_unknown)
                eagle_store_i32(&c->measured_replays, c->measured_replays + (int32_t)(done - r));
        } else
            c->verify_serial += (int32_t)(done - r);
        c->teams_fresh = 0;
    }
    else if (kind == EAGLE_SEGMENT_VERIFY && rc == 0) {
        c->verify_replays += (int32_t)(done - r);
        if (c->verify_replays >= VERIFY_REPLAYS || done < stop)
            finish_verification(ch, nt, size);
    }
}

int64_t eagle_choice_size_floor(const eagle_choice *ch, int64_t size)
{
    for (int32_t s = 0; s < ch->n_stages; ++s)
        if (ch->stages[s].policy == EAGLE_TEAM_AUTO && ch->stages[s].team > 1)
            return size / 2;
    return 0;
}

void eagle_choice_node_timed(eagle_choice *ch, int32_t i, int64_t logical_size, double dt, int fresh)
{
    eagle_choice_node *n = &ch->nodes[i];
    if (n->sized)
        dt = logical_size > 0 ? dt / (double)logical_size : -1;
    /* plan() may read the cost on another thread meanwhile (relaxed.h) */
    if (dt >= 0 && (fresh || n->cost_ns < 0 || dt < n->cost_ns))
        eagle_store_f64(&n->cost_ns, dt);
}

/* ---- the choice without the executor (tests) --------------------------------- */

int eagle_choice_simulate_launch(eagle_choice *ch, int nt, int64_t size, const double *node_ns,
                                 const double *team_ns)
{
    eagle_choice_launch_begin(ch, nt);
    int64_t stop;
    const int kind = eagle_choice_next_segment(ch, nt, size, 0, 1, &stop);
    if (kind == EAGLE_SEGMENT_MEASURE || kind == EAGLE_SEGMENT_PAIRED) {
        const int fresh = eagle_choice_replace_costs(ch);
        for (int32_t i = 0; i < ch->n_nodes; ++i)
            eagle_choice_node_timed(ch, i, size, node_ns[i], fresh);
        if (fresh)
            eagle_choice_costs_replaced(ch);
    } else if (kind == EAGLE_SEGMENT_VERIFY) {
        for (int32_t s = 0; s < ch->n_stages; ++s)
            if (ch->stages[s].team > 1)
                eagle_choice_team_sample(&ch->stages[s].state, team_ns[s], size);
    }
    eagle_choice_segment_done(ch, nt, size, kind, 0, 1, 1, 0);
    return kind;
}
