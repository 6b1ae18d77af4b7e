/* The shim's first load seen by threads that take its fast path: thread 0 loads the
 * driver (the stand-in, EAGLE_LIBCUDA) and then raises a flag with a RELAXED store (no
 * happens-before edge for ThreadSanitizer); the other threads, once they see the flag,
 * call into the shim, whose fast path reads the function table without the lock. Built
 * with -fsanitize=thread by tests/cuda/test_shim_standin.py: that read must be ordered
 * after the load's writes by the table's own publication (release/acquire on `loaded`),
 * else TSan reports a data race on the table. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "eagle/cuda_shim.h"

#define NTHREADS 6
static int go;

static void *after_load(void *arg) {
    int *out = (int *)arg;
    while (!__atomic_load_n(&go, __ATOMIC_RELAXED)) {
    }
    int count = 0, version = 0;
    out[0] = eagle_cuda_get_device_count(&count);
    out[1] = count;
    out[2] = eagle_cuda_api_version(&version);
    out[3] = strlen(eagle_cuda_library()) > 0;
    out[4] = eagle_cuda_has("param_info");
    return NULL;
}

int main(void) {
    pthread_t t[NTHREADS];
    int res[NTHREADS][5];
    memset(res, 0, sizeof res);
    for (int i = 0; i < NTHREADS; ++i) pthread_create(&t[i], NULL, after_load, res[i]);
    char err[512] = "";
    int st = eagle_cuda_load(err, sizeof err);
    __atomic_store_n(&go, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < NTHREADS; ++i) pthread_join(t[i], NULL);
    if (st) {
        printf("load failed %d %s\n", st, err);
        return 2;
    }
    for (int i = 0; i < NTHREADS; ++i)
        if (res[i][0] || res[i][1] != 1 || res[i][2] || !res[i][3] || !res[i][4]) {
            printf("thread %d: %d %d %d %d %d\n", i, res[i][0], res[i][1], res[i][2], res[i][3],
                   res[i][4]);
            return 3;
        }
    printf("ok %d\n", NTHREADS);
    return 0;
}
