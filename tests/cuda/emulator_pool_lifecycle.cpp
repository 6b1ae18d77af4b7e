// Run by tests/cuda/test_shim_standin.py: the CUDA C emulator's pool of host threads
// (tests/doubles/cuda_emulation.h, a test double) over its life. A block of 64 threads
// runs; the pool's threads stay for the next block, then leave after a second idle
// (counted in /proc/self/task); a fork while they are alive leaves a child whose
// first block must start threads of its own (the parent's are not in the child) instead
// of waiting forever for them. Prints "ok" when every step holds.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "cuda_emulation.h"

__global__ void mark(int *ran) { ran[threadIdx.x] += 1; }

static void call_mark(void **args) { mark(*static_cast<int **>(args[0])); }

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
    if (!one_block()) return std::puts("first block"), 1;
    if (threads_now() != 65) return std::printf("after a block: %d threads, not 65\n", threads_now()), 1;
    const pid_t child = fork();
    if (child == 0) {
        alarm(20);   // a child waiting on threads it does not have dies here, not in the test's timeout
        _exit(one_block() && one_block() ? 0 : 3);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) return std::puts("waitpid"), 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return std::printf("the forked child's blocks failed (status %d)\n", status), 1;
    if (!one_block()) return std::puts("block after fork"), 1;
    for (int i = 0; i < 100 && threads_now() > 1; ++i) usleep(50 * 1000);   // a second idle, then some
    if (threads_now() != 1) return std::printf("after 5 s idle: %d threads, not 1\n", threads_now()), 1;
    if (!one_block()) return std::puts("block after the pool emptied"), 1;
    std::puts("ok");
    return 0;
}
