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
// - the blocks of a launch run concurrently, as on a GPU: the stand-in loads
//   the module once per concurrent block slot (FAKE_CUDA_CONCURRENT_BLOCKS
//   copies, default 4, each a dlopen of a file of its own, so each has its own
//   statics) and runs block b (linear index) in slot b % slots, each slot on a
//   host thread of its own; a kernel that assumes blocks run one after
//   another, or in order, races here as on hardware. A copy runs one block at
//   a time (a lock per copy), so a slot's statics are its running block's;
// - each block runs blockDim host threads at once (one per CUDA thread, from a
//   pool of its copy, reused across blocks), each with its own threadIdx,
//   blockIdx, blockDim, gridDim;
// - __syncthreads() is a barrier of the block's threads;
// - __shared__ variables are per block: statics of the slot's copy, shared by
//   the threads of the block it runs and by no other running block (declare
//   them in the __global__ function, as eagle's kernels do: a static of an
//   inline function is a GNU unique symbol, one in the whole process);
// - atomicAdd/Sub/Exch/Min/Max/CAS/And/Or/Xor are atomic (sequentially
//   consistent) across every host thread, __threadfence() is a full fence and
//   __nanosleep() sleeps;
// - parameters are read from the argument array with the kernel's own types
//   (their sizes are what cuFuncGetParamInfo reports);
// - EAGLE_EMU_KERNEL_USING(k, static_shared_bytes, registers) declares what a
//   GPU compiler reports for k (ptxas --resource-usage), so the stand-in
//   checks a launch against the device's limits as the driver does;
// - cudaGraphSetConditional calls back into the stand-in driver.
// Not emulated: warps (no warp-synchronous code), dynamic shared memory
// (extern __shared__), cooperative groups.
#ifndef EAGLE_CUDA_EMULATION_H
#define EAGLE_CUDA_EMULATION_H

#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

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

// ---- atomics: genuinely atomic across the host threads that run CUDA threads
static inline void __nanosleep(unsigned ns) {
    struct timespec t = {0, static_cast<long>(ns)};
    nanosleep(&t, nullptr);
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
namespace eagle_emu {
// a floating-point read-modify-write: compare-and-swap of the value's bits
template <class T, class F>
T atomic_rmw_float(T *p, F f) {
    using U = typename std::conditional<sizeof(T) == 8, unsigned long long, unsigned int>::type;
    U *u = reinterpret_cast<U *>(p);
    U old = __atomic_load_n(u, __ATOMIC_SEQ_CST), want;
    T o;
    do {
        std::memcpy(&o, &old, sizeof o);
        const T n = f(o);
        std::memcpy(&want, &n, sizeof want);
    } while (!__atomic_compare_exchange_n(u, &old, want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return o;
}
template <class T>
T atomic_minmax(T *p, T v, bool max) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while ((max ? v > old : v < old) &&
           !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
}  // namespace eagle_emu
template <class T>
static inline T atomicAdd(T *p, T v) {
    if constexpr (std::is_floating_point<T>::value)
        return eagle_emu::atomic_rmw_float(p, [v](T o) { return o + v; });
    else
        return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <class T>
static inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <class T>
static inline T atomicExch(T *p, T v) {
    if constexpr (std::is_floating_point<T>::value)
        return eagle_emu::atomic_rmw_float(p, [v](T) { return v; });
    else
        return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
template <class T>
static inline T atomicMax(T *p, T v) { return eagle_emu::atomic_minmax(p, v, true); }
template <class T>
static inline T atomicMin(T *p, T v) { return eagle_emu::atomic_minmax(p, v, false); }
template <class T>
static inline T atomicCAS(T *p, T compare, T v) {
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;  // the old value, swapped or not
}
template <class T>
static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <class T>
static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T>
static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }

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
    std::vector<char> alive;   // pool thread t is running (under module_lock)
    sem_t done;
    Launch job{};
    Pool() { sem_init(&done, 0, 0); }
};

static pthread_mutex_t &module_lock() {
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    return m;
}

static Pool &pool();

// A forked child has none of the parent's pool threads: it starts with an empty pool
// (else its first block posts to threads that do not exist and waits forever). The
// lock is taken around fork, so no launch is half done in the child.
static void pool_before_fork() { pthread_mutex_lock(&module_lock()); }
static void pool_after_fork_parent() { pthread_mutex_unlock(&module_lock()); }
static void pool_after_fork_child() {
    Pool &p = pool();
    for (char &a : p.alive) a = 0;
    for (sem_t *s : p.go) sem_init(s, 0, 0);
    sem_init(&p.done, 0, 0);
    pthread_mutex_init(&module_lock(), nullptr);
}

// static, not inline: an inline function's static is a GNU unique symbol, one for the
// whole process, and each block slot's copy of the module needs a pool and lock of its own
static Pool &pool() {
    static Pool &p = *[] {
        pthread_atfork(pool_before_fork, pool_after_fork_parent, pool_after_fork_child);
        return new Pool;   // never destroyed: a pool thread may still time out at exit
    }();
    return p;
}

// What a pool thread is started with: its index and its semaphore, handed over whole.
// (Reading p.go[me] from the new thread raced with the next push_back growing the vector
// in run_block: a reallocation freed the buffer it read, and the thread waited on garbage.)
struct PoolSlot {
    unsigned me;
    sem_t *go;
};

inline void *pool_thread(void *arg) {
    const PoolSlot slot = *static_cast<PoolSlot *>(arg);
    delete static_cast<PoolSlot *>(arg);
    const unsigned me = slot.me;
    sem_t *go = slot.go;
    Pool &p = pool();
    for (;;) {
        // A thread idle for a second leaves (a module's kernels are seldom launched again
        // once its test ended, and thousands of idle threads stalled whole-suite runs);
        // run_block starts it again when needed. It leaves only while no launch holds
        // the lock, so no post to `go` can be pending then.
        timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 1;
        if (sem_timedwait(go, &deadline) != 0) {
            if (errno != ETIMEDOUT || pthread_mutex_trylock(&module_lock()) != 0) continue;
            p.alive[me] = 0;
            pthread_mutex_unlock(&module_lock());
            return nullptr;
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

// One block (block_idx) of a launch: its threads at once, on this copy's pool. The
// stand-in calls it from one host thread per concurrent block slot; a copy runs one
// block at a time, so its __shared__ statics belong to that block.
inline void run_block(void (*call)(void **), void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block,
                      eagle_emu_dim3 block_idx) {
    const unsigned nthreads = block.x * block.y * block.z;
    Pool &p = pool();
    pthread_mutex_lock(&module_lock());
    while (p.go.size() < nthreads) {
        sem_t *s = new sem_t;
        sem_init(s, 0, 0);
        p.go.push_back(s);
        p.alive.push_back(0);
    }
    for (unsigned i = 0; i < nthreads; ++i) {
        if (p.alive[i]) continue;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        pthread_t t;
        const int rc = pthread_create(&t, &attr, pool_thread, new PoolSlot{i, p.go[i]});
        pthread_attr_destroy(&attr);
        if (rc != 0) {   // the block would wait forever for a thread that never started
            fprintf(stderr, "cuda_emulation: cannot start a pool thread (%s)\n", strerror(rc));
            abort();
        }
        pthread_detach(t);
        p.alive[i] = 1;
    }
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, nullptr, nthreads);
    p.job = Launch{args, grid, block, block_idx, {0, 0, 0}, &barrier, call};
    for (unsigned t = 0; t < nthreads; ++t) sem_post(p.go[t]);
    for (unsigned t = 0; t < nthreads; ++t)
        while (sem_wait(&p.done) != 0) {
        }
    pthread_barrier_destroy(&barrier);
    pthread_mutex_unlock(&module_lock());
}

// the whole grid, blocks in order (what the stand-in runs with one slot)
inline void run(void (*call)(void **), void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block) {
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) run_block(call, args, grid, block, {bx, by, bz});
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
    void (*block_entry)(void **, eagle_emu_dim3, eagle_emu_dim3, eagle_emu_dim3);
    unsigned static_shared;  // bytes of __shared__ a GPU compiler reports (0: not declared)
    unsigned registers;      // registers a thread (0: not declared)
};

}  // namespace eagle_emu

#define EAGLE_EMU_CALL(k)                                                                    \
    [](void **a) {                                                                           \
        eagle_emu::call_with(                                                                \
            &k, a, std::make_index_sequence<decltype(eagle_emu::signature_of(&k))::count>()); \
    }

#define EAGLE_EMU_KERNEL_USING(k, static_shared_bytes, regs)                                 \
    eagle_emu::Entry {                                                                       \
        #k, decltype(eagle_emu::signature_of(&k))::count,                                    \
            decltype(eagle_emu::signature_of(&k))::sizes(),                                  \
            decltype(eagle_emu::signature_of(&k))::pointer_mask(),                           \
            [](void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block, unsigned) {           \
                eagle_emu::run(EAGLE_EMU_CALL(k), args, grid, block);                        \
            },                                                                               \
            [](void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block, eagle_emu_dim3 b) {   \
                eagle_emu::run_block(EAGLE_EMU_CALL(k), args, grid, block, b);               \
            },                                                                               \
            static_shared_bytes, regs                                                        \
    }

#define EAGLE_EMU_KERNEL(k) EAGLE_EMU_KERNEL_USING(k, 0u, 0u)

#define EAGLE_EMU_MODULE(...)                                                                \
    extern "C" __attribute__((visibility("default"))) const eagle_emu::Entry *               \
    fake_cuda_module_table(int *n) {                                                         \
        static const eagle_emu::Entry table[] = {__VA_ARGS__};                               \
        *n = static_cast<int>(sizeof table / sizeof table[0]);                               \
        return table;                                                                        \
    }

// ---- -ftz=true (CuPy appends it to every NVRTC compile): with EAGLE_EMU_FTZ defined, float
// is a type whose arithmetic, comparisons and conversions flush subnormal operands and
// results to (signed) zero, as the .ftz instructions the compiler then picks; double is
// untouched, as on a GPU. Float work a kernel writes as explicit PTX (not flushed on a GPU)
// takes EAGLE_EMU_F32_EXACT(a, op, b) / EAGLE_EMU_F32_RAW(x) here (csrc/include/eagle/philox.h).
#ifdef EAGLE_EMU_FTZ
#include <cmath>
#include <math.h>
#include <string.h>
namespace eagle_emu {
inline float flush(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
struct f32 {
    float v;
    f32() = default;
    template <class T, typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0>
    f32(T x) : v(flush(static_cast<float>(x))) {}
    operator float() const { return flush(v); }
    static f32 raw(float x) { f32 r; r.v = x; return r; }
    static f32 rounded(double x) { return raw(static_cast<float>(x)); }
};
static_assert(sizeof(f32) == sizeof(float), "f32 is laid out as a float");
template <class T> struct ftz_result { typedef T type; static T make(T x) { return x; } };
template <> struct ftz_result<float> { typedef f32 type; static f32 make(float x) { return f32(x); } };
template <class T>
using if_arith = typename std::enable_if<std::is_arithmetic<T>::value, int>::type;
#define EAGLE_EMU_FTZ_ARITH(op)                                                                   \
    inline f32 operator op(f32 a, f32 b) { return f32(float(a) op float(b)); }                   \
    template <class T, if_arith<T> = 0>                                                          \
    inline typename ftz_result<decltype(0.0f op T())>::type operator op(f32 a, T b) {           \
        return ftz_result<decltype(0.0f op T())>::make(float(a) op b);                          \
    }                                                                                            \
    template <class T, if_arith<T> = 0>                                                          \
    inline typename ftz_result<decltype(T() op 0.0f)>::type operator op(T a, f32 b) {           \
        return ftz_result<decltype(T() op 0.0f)>::make(a op float(b));                          \
    }                                                                                            \
    inline f32 &operator op##=(f32 &a, f32 b) { return a = a op b; }
#define EAGLE_EMU_FTZ_COMPARE(op)                                                                 \
    inline bool operator op(f32 a, f32 b) { return float(a) op float(b); }                       \
    template <class T, if_arith<T> = 0>                                                          \
    inline bool operator op(f32 a, T b) { return float(a) op b; }                                \
    template <class T, if_arith<T> = 0>                                                          \
    inline bool operator op(T a, f32 b) { return a op float(b); }
EAGLE_EMU_FTZ_ARITH(+)
EAGLE_EMU_FTZ_ARITH(-)
EAGLE_EMU_FTZ_ARITH(*)
EAGLE_EMU_FTZ_ARITH(/)
EAGLE_EMU_FTZ_COMPARE(<)
EAGLE_EMU_FTZ_COMPARE(>)
EAGLE_EMU_FTZ_COMPARE(<=)
EAGLE_EMU_FTZ_COMPARE(>=)
EAGLE_EMU_FTZ_COMPARE(==)
EAGLE_EMU_FTZ_COMPARE(!=)
inline f32 operator-(f32 a) { return f32(-float(a)); }
inline f32 operator+(f32 a) { return a; }
}  // namespace eagle_emu
// explicit PTX (mul.rn.f32, add.rn.f32, cvt.rn.f32.f64 with no .ftz): IEEE, not flushed
#define EAGLE_EMU_F32_EXACT(a, op, b) eagle_emu::f32::raw((a).v op (b).v)
#define EAGLE_EMU_F32_RAW(x) eagle_emu::f32::rounded(x)
#define EAGLE_EMU_F32_GT(a, b) ((a).v > (b).v)
#define float eagle_emu::f32
#endif

#endif  // EAGLE_CUDA_EMULATION_H
