// Run by tests/cuda/test_shim_standin.py: the CUDA C emulator's fibers
// (tests/doubles/cuda_emulation.h, a test double). A block of 64 threads runs on the
// calling host thread alone (counted in /proc/self/task: no thread per CUDA thread);
// its fibers' stacks are reused by the next block; a thread spinning on a flag another
// thread of its block sets (with __nanosleep or __threadfence in the loop) progresses;
// threads that returned do not hold the others at __syncthreads(); __syncthreads()
// orders a block's writes; a forked child runs blocks. Prints "ok" when every step holds.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "cuda_emulation.h"

__global__ void mark(int *ran) { ran[threadIdx.x] += 1; }

// thread 0 spins until the block's last thread (a fiber resumed after it) sets the flag
__global__ void spin(volatile int *flag, int *out, int fence) {
    if (threadIdx.x == 0) {
        while (*flag == 0) {
            if (fence) __threadfence();
            else __nanosleep(100);
        }
        out[0] = *flag;
    } else if (threadIdx.x == blockDim.x - 1) {
        *flag = 7;
    }
}

// the first half returns at once; the rest meet at __syncthreads() twice and read
// what the others wrote before it
__global__ void half_exit(int *v, int *sum) {
    const unsigned t = threadIdx.x, n = blockDim.x;
    if (t < n / 2) return;
    v[t] = (int)t;
    __syncthreads();
    int s = 0;
    for (unsigned k = n / 2; k < n; ++k) s += v[k];
    sum[t] = s;
    __syncthreads();
}

static void call_mark(void **args) { mark(*static_cast<int **>(args[0])); }
static void call_spin(void **args) {
    spin(*static_cast<int **>(args[0]), *static_cast<int **>(args[1]), *static_cast<int *>(args[2]));
}
static void call_half(void **args) { half_exit(*static_cast<int **>(args[0]), *static_cast<int **>(args[1])); }

static int ran[64];

static bool one_block() {
    for (int &r : ran) r = 0;
    int *p = ran;
    void *args[] = {&p};
    eagle_emu::run(call_mark, args, {1, 1, 1}, {64, 1, 1});
    for (int r : ran)
        if (r != 1) return false;
    return true;
}

static bool spins(int fence) {
    int flag = 0, out = 0;
    int *f = &flag, *o = &out;
    void *args[] = {&f, &o, &fence};
    eagle_emu::run(call_spin, args, {2, 1, 1}, {32, 1, 1});
    return out == 7;
}

static bool half() {
    static int v[128], sum[128];
    int *a = v, *b = sum;
    void *args[] = {&a, &b};
    eagle_emu::run(call_half, args, {1, 1, 1}, {128, 1, 1});
    for (int t = 64; t < 128; ++t)
        if (sum[t] != (64 + 127) * 64 / 2) return false;
    return true;
}

static int threads_now() {
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n;
}

int main() {
    alarm(60);   // a block that never ends dies here, not in the test's timeout
    if (!one_block()) return std::puts("first block"), 1;
    if (threads_now() != 1) return std::printf("after a block: %d threads, not 1\n", threads_now()), 1;
    if (!one_block()) return std::puts("second block"), 1;
    if (!spins(0)) return std::puts("a spin with __nanosleep"), 1;
    if (!spins(1)) return std::puts("a spin with __threadfence"), 1;
    if (!half()) return std::puts("__syncthreads with returned threads"), 1;
    const pid_t child = fork();
    if (child == 0) {
        alarm(20);
        _exit(one_block() && one_block() && half() ? 0 : 3);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) return std::puts("waitpid"), 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return std::printf("the forked child's blocks failed (status %d)\n", status), 1;
    if (!one_block()) return std::puts("block after fork"), 1;
    if (threads_now() != 1) return std::printf("at the end: %d threads, not 1\n", threads_now()), 1;
    std::puts("ok");
    return 0;
}
