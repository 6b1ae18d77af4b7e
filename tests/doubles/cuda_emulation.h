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
// - a block's CUDA threads are fibers (ucontext, a stack each from a pool of
//   its copy, reused across blocks) on its slot's one host thread, each with its
//   own threadIdx, blockIdx, blockDim, gridDim (set before each fiber resumes);
//   a cooperative scheduler runs each live fiber in turn until it returns or
//   yields: at __syncthreads(), __nanosleep() or __threadfence(). A thread that
//   spins on what another thread of its block writes must sleep or fence in its
//   loop (as on a GPU it should); a bare spin never lets the writer run;
// - __syncthreads() is a barrier of the block's live threads: it opens when
//   every thread that has not returned waits at it (as on GPUs since Volta);
// - __shared__ variables are per block: statics of the slot's copy, shared by
//   the threads of the block it runs and by no other running block (declare
//   them in the __global__ function, as eagle's kernels do: a static of an
//   inline function is a GNU unique symbol, one in the whole process);
// - atomicAdd/Sub/Exch/Min/Max/CAS/And/Or/Xor are atomic (sequentially
//   consistent) across every host thread (so across blocks, which run on
//   host threads of their own), __threadfence() is a full fence and
//   __nanosleep() sleeps (once a round of the block's fibers only slept);
// - a forked child runs blocks (the emulator holds its locks around fork);
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
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EAGLE_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EAGLE_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define EAGLE_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EAGLE_EMU_TSAN 1
#endif
#endif
#if EAGLE_EMU_ASAN   // the fiber switches, told to the sanitizers (no false stack reports)
#include <dlfcn.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if EAGLE_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

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

namespace eagle_emu {

// A CUDA thread of the running block: a fiber on the block's host thread.
struct Fiber {
    ucontext_t ctx;
    char *stack;
    unsigned sleep_ns;   // it yielded in __nanosleep(sleep_ns); 0: not sleeping
    bool done, at_barrier;
    void *fake_stack;    // AddressSanitizer's save of this fiber's fake stack
    void *tsan;          // ThreadSanitizer's fiber
};

// The block this host thread runs now (one at a time: a copy's lock is held).
struct Block {
    ucontext_t sched;    // the scheduler, on the host thread's own stack
    Fiber *fibers;
    unsigned cur;        // the fiber running now
    void (*call)(void **);
    void **args;
    eagle_emu_dim3 grid, block, block_idx;
    const void *host_bottom;   // the host thread's stack, for AddressSanitizer
    size_t host_size;
    void *sched_fake, *sched_tsan;
};

static thread_local Block *current_block;

#if EAGLE_EMU_ASAN
// libc's swapcontext, not ASan's interceptor: that one warns once per process ("doesn't
// fully support makecontext/swapcontext", a report file under tests/sanitize.sh) and clears
// the shadow of the stack it enters, which the annotations below already keep right
typedef int (*swapcontext_fn)(ucontext_t *, const ucontext_t *);
static swapcontext_fn libc_swapcontext() {
    static const swapcontext_fn f = [] {
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        void *s = libc ? dlsym(libc, "swapcontext") : nullptr;
        return s ? reinterpret_cast<swapcontext_fn>(s) : &swapcontext;
    }();
    return f;
}
#define EAGLE_EMU_SWAPCONTEXT eagle_emu::libc_swapcontext()
#else
#define EAGLE_EMU_SWAPCONTEXT swapcontext
#endif

// A fiber's stack: its size, and a word at its far end that a fiber overflowing it clobbers
static const size_t stack_bytes = 128 * 1024;
static const uint64_t stack_canary = 0xeac1e5ac4ca2a7eeull;

// Back to the scheduler, from fiber f of block b (before resuming it, the scheduler sets
// threadIdx & co. again: the fiber may read them as thread-local variables after this).
static inline void switch_to_scheduler(Block *b, Fiber &f) {
#if EAGLE_EMU_ASAN
    __sanitizer_start_switch_fiber(&f.fake_stack, b->host_bottom, b->host_size);
#endif
#if EAGLE_EMU_TSAN
    __tsan_switch_to_fiber(b->sched_tsan, 0);
#endif
    EAGLE_EMU_SWAPCONTEXT(&f.ctx, &b->sched);
#if EAGLE_EMU_ASAN
    __sanitizer_finish_switch_fiber(f.fake_stack, &b->host_bottom, &b->host_size);
#endif
    asm volatile("" ::: "memory");   // threadIdx & co. are read again, not kept from before
}

// Yield: `barrier` marks the fiber waiting at __syncthreads(), sleep_ns a __nanosleep.
static inline void yield(bool barrier, unsigned sleep_ns) {
    Block *b = current_block;
    if (!b) {   // not in a block (host code): a plain sleep
        if (sleep_ns) {
            struct timespec t = {0, static_cast<long>(sleep_ns)};
            nanosleep(&t, nullptr);
        }
        return;
    }
    Fiber &f = b->fibers[b->cur];
    f.at_barrier = barrier;
    f.sleep_ns = sleep_ns;
    switch_to_scheduler(b, f);
}

}  // namespace eagle_emu

static inline void __syncthreads() { eagle_emu::yield(true, 0); }

// ---- atomics: genuinely atomic across the host threads that run blocks
static inline void __nanosleep(unsigned ns) { eagle_emu::yield(false, ns ? ns : 1); }
static inline void __threadfence() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    eagle_emu::yield(false, 0);
}
static inline void __threadfence_block() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    eagle_emu::yield(false, 0);
}
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

// The fibers' stacks of this copy: one mapping of `count` stacks (grown to the largest
// block seen, at most 1024; pages are committed as fibers touch them), reused across
// blocks and launches. (A host thread per CUDA thread, as before, made ~1,000 runnable
// threads for 4 blocks of 256 and starved every other process of the machine.)
struct Stacks {
    char *base = nullptr;
    unsigned count = 0;
    std::vector<Fiber> fibers;
};

static pthread_mutex_t &module_lock() {
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    return m;
}

// The lock is taken around fork, so no block is half run in the child (the copy's
// statics and fibers are the parent's, consistent); the child's first block runs as any.
static void stacks_before_fork() { pthread_mutex_lock(&module_lock()); }
static void stacks_after_fork_parent() { pthread_mutex_unlock(&module_lock()); }
static void stacks_after_fork_child() { pthread_mutex_init(&module_lock(), nullptr); }

// static, not inline: an inline function's static is a GNU unique symbol, one for the
// whole process, and each block slot's copy of the module needs stacks and a lock of its own
static Stacks &stacks() {
    static Stacks &s = *[] {
        pthread_atfork(stacks_before_fork, stacks_after_fork_parent, stacks_after_fork_child);
        return new Stacks;   // never destroyed: kept for the copy's next block
    }();
    return s;
}

static void grow_stacks(Stacks &s, unsigned n) {
    if (s.count >= n) return;
    if (s.base) munmap(s.base, s.count * stack_bytes);
    void *m = mmap(nullptr, n * stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {   // the block could not run at all
        fprintf(stderr, "cuda_emulation: cannot map %u fiber stacks (%s)\n", n, strerror(errno));
        abort();
    }
    s.base = static_cast<char *>(m);
    s.count = n;
    s.fibers.resize(n);
}

// The first code a fiber runs: its CUDA thread, then back to the scheduler for good.
static void fiber_main() {
    Block *b = current_block;
#if EAGLE_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &b->host_bottom, &b->host_size);
#endif
    b->call(b->args);
    b = current_block;
    Fiber &f = b->fibers[b->cur];
    f.done = true;
#if EAGLE_EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, b->host_bottom, b->host_size);   // this fiber ends
#endif
#if EAGLE_EMU_TSAN
    __tsan_switch_to_fiber(b->sched_tsan, 0);
#endif
    setcontext(&b->sched);
}

static void resume(Block &b, unsigned i) {
    Fiber &f = b.fibers[i];
    const eagle_emu_dim3 d = b.block;
    b.cur = i;
    threadIdx = {i % d.x, (i / d.x) % d.y, i / (d.x * d.y)};
    blockIdx = b.block_idx;
    blockDim = d;
    gridDim = b.grid;
#if EAGLE_EMU_ASAN
    __sanitizer_start_switch_fiber(&b.sched_fake, f.stack, stack_bytes);
#endif
#if EAGLE_EMU_TSAN
    __tsan_switch_to_fiber(f.tsan, 0);
#endif
    EAGLE_EMU_SWAPCONTEXT(&b.sched, &f.ctx);
#if EAGLE_EMU_ASAN
    __sanitizer_finish_switch_fiber(b.sched_fake, nullptr, nullptr);
#endif
}

// One block (block_idx) of a launch: its threads as fibers on this host thread. The
// stand-in calls it from one host thread per concurrent block slot; a copy runs one
// block at a time, so its __shared__ statics belong to that block.
inline void run_block(void (*call)(void **), void **args, eagle_emu_dim3 grid, eagle_emu_dim3 block,
                      eagle_emu_dim3 block_idx) {
    const unsigned n = block.x * block.y * block.z;
    Stacks &s = stacks();
    pthread_mutex_lock(&module_lock());
    grow_stacks(s, n);
    Block b{};
    b.fibers = s.fibers.data();
    b.call = call;
    b.args = args;
    b.grid = grid;
    b.block = block;
    b.block_idx = block_idx;
#if EAGLE_EMU_TSAN
    b.sched_tsan = __tsan_get_current_fiber();
#endif
    for (unsigned i = 0; i < n; ++i) {
        Fiber &f = b.fibers[i];
        f = Fiber{};
        f.stack = s.base + i * stack_bytes;
#if EAGLE_EMU_ASAN
        __asan_unpoison_memory_region(f.stack, stack_bytes);   // what an ended fiber left poisoned
#endif
        std::memcpy(f.stack, &stack_canary, sizeof stack_canary);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = stack_bytes;
        f.ctx.uc_link = &b.sched;
        makecontext(&f.ctx, fiber_main, 0);
#if EAGLE_EMU_TSAN
        f.tsan = __tsan_create_fiber(0);
#endif
    }
    Block *outer = current_block;
    current_block = &b;
    // Rounds: each live fiber not at the barrier runs until it returns or yields; the
    // barrier opens once every live fiber waits at it; a round in which every fiber that
    // ran only slept sleeps (the shortest request) before the next.
    unsigned live = n;
    while (live > 0) {
        bool progress = false;
        unsigned sleep_ns = 0, waiting = 0;
        for (unsigned i = 0; i < n; ++i) {
            Fiber &f = b.fibers[i];
            if (f.done) continue;
            if (!f.at_barrier) {
                resume(b, i);
                if (f.done) {
                    --live, progress = true;
                    continue;
                }
                if (f.sleep_ns)
                    sleep_ns = sleep_ns ? (f.sleep_ns < sleep_ns ? f.sleep_ns : sleep_ns) : f.sleep_ns;
                else
                    progress = true;
            }
            if (f.at_barrier) ++waiting;
        }
        if (live > 0 && waiting == live) {   // every live thread is at __syncthreads()
            for (unsigned i = 0; i < n; ++i) b.fibers[i].at_barrier = false;
        } else if (!progress && sleep_ns) {
            struct timespec t = {0, static_cast<long>(sleep_ns)};
            nanosleep(&t, nullptr);
        }
    }
    current_block = outer;
    for (unsigned i = 0; i < n; ++i) {
#if EAGLE_EMU_TSAN
        __tsan_destroy_fiber(b.fibers[i].tsan);
#endif
        if (std::memcmp(b.fibers[i].stack, &stack_canary, sizeof stack_canary) != 0) {
            fprintf(stderr, "cuda_emulation: CUDA thread %u overflowed its %zu-byte stack\n", i, stack_bytes);
            abort();
        }
    }
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
