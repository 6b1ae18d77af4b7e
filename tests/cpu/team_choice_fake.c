/* The team choice driven from C alone (no Python, no executor): a fake clock and a
 * fake barrier timer in an eagle_choice_env, synthetic node and team times through
 * eagle_choice_simulate_launch. Built and run by tests/cpu/test_team_choice.py
 * (test_the_team_choice_runs_from_c_with_a_fake_clock_and_barrier); prints one line
 * per check and exits 1 at the first that fails. */
#include <stdio.h>
#include <string.h>

#include "team_choice.h"

#define MS 1e6

typedef struct {
    double now_ns;
    double barrier_ns;
    int barrier_calls;
} fake;

static double fake_now(void *ctx) { return ((fake *)ctx)->now_ns; }
static double fake_barrier(void *ctx, int n_threads)
{
    (void)n_threads;
    fake *f = ctx;
    f->barrier_calls++;
    return f->barrier_ns;
}

static int failures = 0;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

/* One auto stage of one sized node (1M samples), launched once a 5 ms tick. */
typedef struct {
    fake f;
    eagle_choice_env env;
    eagle_choice_node node;
    eagle_choice_stage stage;
    eagle_choice ch;
} rig;

static void rig_init(rig *r, double barrier_ns)
{
    memset(r, 0, sizeof *r);
    r->f.now_ns = 1e12;
    r->f.barrier_ns = barrier_ns;
    eagle_choice_env_init(&r->env, fake_now, fake_barrier, &r->f);
    r->node.cost_ns = -1;
    r->node.sized = r->node.splits = 1;
    r->stage.first = 0;
    r->stage.count = 1;
    r->stage.policy = EAGLE_TEAM_AUTO;
    eagle_choice_init(&r->ch, &r->node, 1, &r->stage, 1, &r->env);
}

static int launch(rig *r, double serial_ns, double team_ns)
{
    r->f.now_ns += 5 * MS;
    return eagle_choice_simulate_launch(&r->ch, 2, 1000000, &serial_ns, &team_ns);
}

static int launch_at(rig *r, int64_t size, double serial_per_sample_ns, double team_ratio)
{
    r->f.now_ns += 5 * MS;
    double serial_ns = serial_per_sample_ns * (double)size, team_ns = team_ratio * serial_ns;
    return eagle_choice_simulate_launch(&r->ch, 2, size, &serial_ns, &team_ns);
}

/* A shrinking population (a compaction's, 1M samples, 40% finishing each replay): the
 * share of its work (samples x replays) run on one thread; *paired: replays timed on
 * one thread by a verification; *on_team: replays run (not verifying) on the team. */
static double shrinking_serial_share(rig *r, double team_ratio, int *paired, int *on_team)
{
    double total = 0, serial = 0;
    *paired = *on_team = 0;
    int64_t size = 1000000;
    for (int k = 0; k < 21; ++k, size = size * 6 / 10) {
        const int kind = launch_at(r, size, 50, team_ratio);
        total += (double)size;
        if (kind == EAGLE_SEGMENT_MEASURE || kind == EAGLE_SEGMENT_PAIRED
            || (kind == EAGLE_SEGMENT_RUN && r->stage.team == 1))
            serial += (double)size;
        *paired += kind == EAGLE_SEGMENT_PAIRED;
        *on_team += kind == EAGLE_SEGMENT_RUN && r->stage.team > 1;
    }
    return serial / total;
}

int main(void)
{
    /* a shrinking population whose team is faster: its first replays, the costliest,
     * do not all run on one thread to measure and verify (three measured replays and
     * four pairs put 90% of the work on one thread); one measured replay, then the team */
    {
        rig s;
        int paired, on_team;
        rig_init(&s, 100);
        const double share = shrinking_serial_share(&s, 0.55, &paired, &on_team);
        printf("   shrinking, faster team: %.0f%% of the work on one thread\n", 100 * share);
        check(share <= 0.45 && paired == 0, "a shrinking population runs on the team after one measured replay");
        /* run again from the full size: the verdicts answer for it, from its first replay */
        const double again = shrinking_serial_share(&s, 0.55, &paired, &on_team);
        printf("   ... run again: %.1f%% of the work on one thread\n", 100 * again);
        check(again < 0.01 && paired == 0, "... and again from the full size, wholly on the team");
        /* a run segment on the team answers down to half its size: the run loop ends it
         * there (a compaction shrank the population) and the teams are chosen again */
        launch_at(&s, 1000000, 50, 0.55);
        check(s.stage.team == 2 && eagle_choice_size_floor(&s.ch, 1000000) == 500000,
              "a segment on the team is chosen again at half its size");
        /* a team slower than one thread: timed on a few replays, then one thread for the rest */
        rig_init(&s, 100);
        shrinking_serial_share(&s, 2.5, &paired, &on_team);
        check(on_team == 0 && paired == 0 && s.stage.team == 1, "a slower team is dropped for the rest of the population");
        check(eagle_choice_size_floor(&s.ch, 1000000) == 0, "... and a segment off the team is not cut");
    }

    rig r;

    /* measure, then each team replay after one on one thread, then the verdict */
    rig_init(&r, 100);
    int kinds[12];
    for (int k = 0; k < 12; ++k)
        kinds[k] = launch(&r, 1 * MS, 0.6 * MS);
    check(kinds[0] == EAGLE_SEGMENT_MEASURE && kinds[2] == EAGLE_SEGMENT_MEASURE, "three measured replays");
    int paired = 1;
    for (int k = 3; k < 11; ++k)
        paired &= kinds[k] == ((k - 3) % 2 == 0 ? EAGLE_SEGMENT_PAIRED : EAGLE_SEGMENT_VERIFY);
    check(paired, "paired and verifying replays interleaved");
    check(kinds[11] == EAGLE_SEGMENT_RUN && r.stage.team == 2, "a faster team is kept");
    check(r.f.barrier_calls == 5, "the threshold took five barrier timings from the fake timer");

    /* a team slower than one thread: the stage stays on one thread */
    rig_init(&r, 100);
    for (int k = 0; k < 11; ++k)
        launch(&r, 1 * MS, 2.5 * MS);
    check(launch(&r, 1 * MS, 2.5 * MS) == EAGLE_SEGMENT_RUN && r.stage.team == 1, "a slower team is dropped");

    /* the verdict is re-checked on the fake clock: a quarter second later the team is timed again */
    rig_init(&r, 100);
    for (int k = 0; k < 12; ++k)
        launch(&r, 1 * MS, 0.6 * MS);
    const int32_t checks = eagle_choice_checks(&r.ch);
    r.f.now_ns += 0.3e9;
    launch(&r, 1 * MS, 0.6 * MS);
    check(eagle_choice_checks(&r.ch) == checks + 1, "a re-check falls due on the fake clock");

    /* a barrier timed under load (262 µs: the threshold at its 500 µs bound) keeps a
     * 0.3 ms stage off the team until the threshold is timed again, a second later */
    rig_init(&r, 262e3);
    for (int k = 0; k < 10; ++k)
        launch(&r, 0.3 * MS, 0.2 * MS);
    check(r.stage.team == 1 && eagle_parallel_threshold_ns(&r.env, 2) == 500e3, "a costly barrier holds the stage");
    r.f.barrier_ns = 300;
    double waited = 0;
    while (r.stage.team != 2 && waited < 3e9) {
        launch(&r, 0.3 * MS, 0.2 * MS);
        waited += 5 * MS;
    }
    check(r.stage.team == 2 && waited >= 0.9e9 && waited <= 1.5e9, "the threshold is timed again after a second");
    check(eagle_parallel_threshold_ns(&r.env, 2) == 20 * 300.0, "... at 20 barriers now");

    /* beside a busy neighbour: a team replay 100x a serial one (a loop's barriers each
     * waiting a time slice). The verdict is one thread; the re-checks, each running
     * four team replays again, are bounded by what they measured on the team: over a
     * minute of the fake clock they take at most a few percent of the time */
    rig_init(&r, 100);
    double t_recheck = 0, t_total = 0;
    const double start = r.f.now_ns;
    while (r.f.now_ns - start < 60e9) {
        const int kind = launch(&r, 1 * MS, 100 * MS);
        r.f.now_ns -= 5 * MS;   /* the clock moves by what the launch took */
        const double dt = (kind == EAGLE_SEGMENT_VERIFY || (kind == EAGLE_SEGMENT_RUN && r.stage.team > 1))
                              ? 100 * MS : 1 * MS;
        r.f.now_ns += dt;
        t_total += dt;
        if (kind == EAGLE_SEGMENT_VERIFY && eagle_choice_checks(&r.ch) > 0)
            t_recheck += dt;
    }
    check(r.stage.team == 1 && eagle_choice_checks(&r.ch) >= 1, "a team 100x slower is dropped, and re-checked");
    check(t_recheck <= 0.05 * t_total, "re-checks of a slow team cost at most 5% of the time");

    /* a control node whose body chooses its own teams (its iterations are timed): its
     * auto stage stays on one thread, never timed on the team as a whole */
    rig_init(&r, 100);
    r.node.sized = 0;
    r.node.iterates = 1;
    int verified = 0;
    for (int k = 0; k < 20; ++k) {
        const int kind = launch(&r, 50 * MS, 1 * MS);
        verified |= kind == EAGLE_SEGMENT_VERIFY || kind == EAGLE_SEGMENT_PAIRED;
    }
    check(!verified && r.stage.team == 1, "a stage holding an iterating control node stays on one thread");

    /* two stages timed together get one verdict: a replay that goes from one thread to
     * the team wakes the team each time, which neither stage's own timing sees */
    {
        fake f = {.now_ns = 1e12, .barrier_ns = 100};
        eagle_choice_env env;
        eagle_choice_env_init(&env, fake_now, fake_barrier, &f);
        eagle_choice_node nodes[2];
        eagle_choice_stage stages[2];
        eagle_choice ch;
        const double serial[2] = {1 * MS, 1 * MS};
        const double faster_together[2] = {1.1 * MS, 0.4 * MS};   /* 1.5 ms against 2 */
        const double slower_together[2] = {1.5 * MS, 0.8 * MS};   /* 2.3 ms against 2 */
        const double *cases[2] = {faster_together, slower_together};
        for (int c = 0; c < 2; ++c) {
            memset(nodes, 0, sizeof nodes);
            memset(stages, 0, sizeof stages);
            for (int i = 0; i < 2; ++i) {
                nodes[i].cost_ns = -1;
                nodes[i].sized = nodes[i].splits = 1;
                stages[i].first = i;
                stages[i].count = 1;
                stages[i].policy = EAGLE_TEAM_AUTO;
            }
            eagle_choice_init(&ch, nodes, 2, stages, 2, &env);
            for (int k = 0; k < 12; ++k) {
                f.now_ns += 5 * MS;
                eagle_choice_simulate_launch(&ch, 2, 1000000, serial, cases[c]);
            }
            f.now_ns += 5 * MS;
            const int kind = eagle_choice_simulate_launch(&ch, 2, 1000000, serial, cases[c]);
            const int want = c == 0 ? 2 : 1;
            check(kind == EAGLE_SEGMENT_RUN && stages[0].team == want && stages[1].team == want,
                  c == 0 ? "two stages faster on the team together both take it, one slower alone"
                         : "two stages slower on the team together both stay on one thread, one faster alone");
        }
    }

    return failures ? 1 : 0;
}
