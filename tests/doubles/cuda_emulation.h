// cuda_emulation.h — TEST DOUBLE. NOT CUDA.
//
// Runs CUDA C kernel source on the CPU with CUDA's execution model, so the
// tests check the device code eagle ships (eagle/cuda/kernels/*.cu) without a
// GPU. Include it, then the .cu file, then list the kernels:
//
//   #include "cuda_emulation.h"
//   #include "partition.cu"
//   EAGLE_EMU_MODULE(EAGLE_EMU_KERNEL(eagle_part_count), EAGLE_EMU_KERNEL(eagle_commit))
//
// and build a shared object (c++ -std=c++17 -shared -fPIC ... -lpthread) that
// fake_libcuda's fake_cuda_load_module() loads. Semantics:
// - a launch runs its blocks one after another; each block runs blockDim
//   host threads at once (one per CUDA thread, from a pool reused across
//   blocks), each with its own threadIdx, blockIdx, blockDim, gridDim;
// - __syncthreads() is a barrier of the block's threads;
// - __shared__ variables are shared by the threads of the running block (one
//   block of one emulated kernel runs at a time in the process: a module-wide
//   lock, so blocks of concurrent graph branches do not share them);
// - parameters are read from the argument array with the kernel's own types
//   (their sizes are what cuFuncGetParamInfo reports);
// - cudaGraphSetConditional calls back into the stand-in driver.
// Not emulated: warps (no warp-synchronous code), atomics, dynamic shared
// memory, cooperative groups.
#ifndef EAGLE_CUDA_EMULATION_H
#define EAGLE_CUDA_EMULATION_H

#include <pthread.h>
#include <semaphore.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#define EAGLE_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct eagle_emu_dim3 {
    unsigned int x, y, z;
};
typedef eagle_emu_dim3 dim3;

static thread_local eagle_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
static thread_local pthread_barrier_t *eagle_emu_barrier;

static inline void __syncthreads() { pthread_barrier_wait(eagle_emu_barrier); }

typedef unsigned long long cudaGraphConditionalHandle;
extern "C" {
// set by the stand-in driver when it loads the module
__attribute__((visibility("default"))) void (*fake_cuda_emulation_set_conditional)(
    unsigned long long, unsigned) = nullptr;
}
static inline void cudaGraphSetConditional(cudaGraphConditionalHandle h, unsigned int value) {
    if (fake_cuda_emulation_set_conditional) fake_cuda_emulation_set_conditional(h, value);
}

namespace eagle_emu {

struct Launch {
    void **args;
    eagle_emu_dim3 grid, block, block_idx, thread_idx;
    pthread_barrier_t *barrier;
    void (*call)(void **);
};

// A pool of host threads, one per CUDA thread of a block (grown to the largest
// block seen, at most 1024), reused across blocks and launches: pool thread t
// runs CUDA thread t of the current block, woken by its own semaphore, so a
// block of n threads wakes n host threads. (Creating threads per block costs
// more than the kernels the tests run.)
struct Pool {
    std::vector<sem_t *> go;
    sem_t done;
    Launch job{};
    Pool() { sem_init(&done, 0, 0); }
};

inline Pool &pool() {
    static Pool p;
    return p;
}

inline void *pool_thread(void *arg) {
    const unsigned me = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(arg));
    Pool &p = pool();
    sem_t *go = p.go[me];
    for (;;) {
        while (sem_wait(go) != 0) {
        }
        const Launch &l = p.job;
        const eagle_emu_dim3 b = l.block;
        threadIdx = {me % b.x, (me / b.x) % b.y, me / (b.x * b.y)};
        blockIdx = l.block_idx;
        blockDim = l.block;
        gridDim = l.grid;
        eagle_emu_barrier = l.barrier;
        l.call(l.args);
        sem_post(&p.done);
    }
    return nullptr;
}

inline pthread_mutex_t &module_lock() {
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    return m;
}

// blocks in order; the threads of a block at once
inline void run(void (*call)(void **), void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block) {
    const unsigned nthreads = block.x * block.y * block.z;
    Pool &p = pool();
    pthread_mutex_lock(&module_lock());
    while (p.go.size() < nthreads) {
        sem_t *s = new sem_t;
        sem_init(s, 0, 0);
        p.go.push_back(s);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        pthread_t t;
        pthread_create(&t, &attr, pool_thread,
                       reinterpret_cast<void *>(static_cast<std::uintptr_t>(p.go.size() - 1)));
        pthread_attr_destroy(&attr);
        pthread_detach(t);
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, nullptr, nthreads);
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                p.job = Launch{args, grid, block, {bx, by, bz}, {0, 0, 0}, &barrier, call};
                for (unsigned t = 0; t < nthreads; ++t) sem_post(p.go[t]);
                for (unsigned t = 0; t < nthreads; ++t)
                    while (sem_wait(&p.done) != 0) {
                    }
            }
    pthread_barrier_destroy(&barrier);
    pthread_mutex_unlock(&module_lock());
}

template <class... A, std::size_t... I>
void call_with(void (*f)(A...), void **args, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_reference<A>::type *>(args[I])...);
}

template <class... A>
struct Signature {
    static constexpr unsigned count = sizeof...(A);
    static const unsigned *sizes() {
        static const unsigned s[sizeof...(A) + 1] = {static_cast<unsigned>(sizeof(A))..., 0};
        return s;
    }
    static unsigned pointer_mask() {
        const bool p[sizeof...(A) + 1] = {std::is_pointer<A>::value..., false};
        unsigned m = 0;
        for (unsigned i = 0; i < sizeof...(A); ++i)
            if (p[i]) m |= 1u << i;
        return m;
    }
};
template <class... A>
Signature<A...> signature_of(void (*)(A...)) {
    return {};
}

// the layout fake_libcuda.c reads (fake_module_entry)
struct Entry {
    const char *name;
    unsigned nparams;
    const unsigned *sizes;
    unsigned pointer_mask;
    void (*entry)(void **, eagle_emu_dim3, eagle_emu_dim3, unsigned);
};

}  // namespace eagle_emu

#define EAGLE_EMU_KERNEL(k)                                                                  \
    eagle_emu::Entry {                                                                       \
        #k, decltype(eagle_emu::signature_of(&k))::count,                                    \
            decltype(eagle_emu::signature_of(&k))::sizes(),                                  \
            decltype(eagle_emu::signature_of(&k))::pointer_mask(),                           \
            [](void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block, unsigned) {           \
                eagle_emu::run(                                                              \
                    [](void **a) {                                                           \
                        eagle_emu::call_with(                                                \
                            &k, a,                                                           \
                            std::make_index_sequence<decltype(eagle_emu::signature_of(       \
                                &k))::count>());                                             \
                    },                                                                       \
                    args, grid, block);                                                      \
            }                                                                                \
    }

#define EAGLE_EMU_MODULE(...)                                                                \
    extern "C" __attribute__((visibility("default"))) const eagle_emu::Entry *               \
    fake_cuda_module_table(int *n) {                                                         \
        static const eagle_emu::Entry table[] = {__VA_ARGS__};                               \
        *n = static_cast<int>(sizeof table / sizeof table[0]);                               \
        return table;                                                                        \
    }

#endif  // EAGLE_CUDA_EMULATION_H
