/* Runs the executor's measuring replays on this thread while another thread reads the
 * plan's report (eagle_report_teams), as plan() may during a launch. Built with
 * -fsanitize=thread by tests/cpu/test_team_choice.py: every field the report reads
 * during a launch must be read and written without a data race. */
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "executor.h"
#include "team_choice.h"

#define N 4096
static double x[N];
static atomic_int stop_reading;

static void add_one(int64_t start, int64_t stop, char **data, const int64_t *strides, void *user_data)
{
    (void)strides; (void)user_data;
    double *a = (double *)data[0];
    for (int64_t i = start; i < stop; i++)
        a[i] += 1.0;
}

static eagle_plan plan;

static void *read_reports(void *arg)
{
    (void)arg;
    eagle_stage_report rep[1];
    while (!atomic_load(&stop_reading))
        eagle_report_teams(&plan.choice, 1, N, rep);
    return NULL;
}

int main(void)
{
    Py_Initialize();
    char *data[1] = {(char *)x};
    int64_t strides[1] = {sizeof(double)};
    for (int round = 0; round < 200; round++) {
        eagle_node node;
        eagle_stage stage;
        eagle_choice_node cnode;
        eagle_choice_stage cstage;
        memset(&node, 0, sizeof node);
        memset(&stage, 0, sizeof stage);
        memset(&cnode, 0, sizeof cnode);
        memset(&cstage, 0, sizeof cstage);
        memset(&plan, 0, sizeof plan);
        node.kind = EAGLE_NODE_NATIVE;
        node.split = 1;
        node.kernel = add_one;
        node.data = data;
        node.strides = strides;
        node.n_phases = 1;
        cnode.cost_ns = -1;
        cnode.sized = cnode.splits = 1;
        stage.first = 0;
        stage.count = 1;
        stage.n_phases = 1;
        cstage.first = 0;
        cstage.count = 1;
        cstage.policy = EAGLE_TEAM_AUTO;
        plan.nodes = &node;
        plan.n_nodes = 1;
        plan.stages = &stage;
        plan.n_stages = 1;
        plan.logical_size = N;
        plan.capacity = N;
        plan.num_threads = 1;
        eagle_choice_init(&plan.choice, &cnode, 1, &cstage, 1, eagle_choice_process_env());
        atomic_store(&stop_reading, 0);
        pthread_t reader;
        pthread_create(&reader, NULL, read_reports, NULL);
        eagle_failure failure;
        if (eagle_execute(&plan, 8, &failure) != 0) {
            PyErr_Print();
            return 2;
        }
        atomic_store(&stop_reading, 1);
        pthread_join(reader, NULL);
    }
    printf("ok %g\n", x[0]);
    return 0;
}
