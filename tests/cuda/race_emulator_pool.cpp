// Run under ThreadSanitizer by tests/cuda/test_shim_standin.py: one block of 1024 threads
// of the CUDA C emulator (tests/doubles/cuda_emulation.h, a test double): 1024 fibers on
// a fresh stack pool, their switches told to ThreadSanitizer.
// Prints "ok" when every CUDA thread of the block ran once.
#include <cstdio>

#include "cuda_emulation.h"

__global__ void mark(int *ran) { ran[threadIdx.x] += 1; }

static void call_mark(void **args) { mark(*static_cast<int **>(args[0])); }

int main() {
    static int ran[1024];
    int *p = ran;
    void *args[] = {&p};
    eagle_emu::run(call_mark, args, {1, 1, 1}, {1024, 1, 1});
    for (int t = 0; t < 1024; ++t)
        if (ran[t] != 1) {
            std::printf("thread %d ran %d times\n", t, ran[t]);
            return 1;
        }
    std::printf("ok\n");
    return 0;
}
