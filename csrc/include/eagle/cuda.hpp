// eagle/cuda.hpp — the C++ face of eagle's CUDA graphs, header-only over the C
// shim (eagle/cuda_shim.h).
//
//   eagle::cuda::Stream stream;
//   eagle::cuda::Graph graph;
//   graph.stream(stream.cuda());
//   eagle::cuda::StreamCapturer capturer(stream.cuda());
//   capturer.begin();
//   addOne<<<1, N, 0, stream.cuda()>>>(dBuf, N);
//   graph.addNode(eagle::cuda::CapturedGraph{ capturer.end() });
//   eagle::cuda::Launcher launcher = graph.launcher();
//   for (int r = 0; r < REPLAYS; ++r) launcher.launch();
//   launcher.synchronize();
//
// Build: define EAGLE_CUDA_SHIM_IMPLEMENTATION in exactly one translation unit
// before including this header (it compiles the shim there); link -ldl on old
// glibc. Nothing links against CUDA through this header: the shim opens the
// driver (libcuda.so.1, the one the program's CUDA runtime uses too, static or
// shared cudart, nvcc 12.x or 13.x) and works on the device's primary context,
// the runtime's. Compiled by nvcc (CUDART_VERSION defined by the real headers)
// the classes speak the runtime's types (cudaStream_t == CUstream,
// cudaGraph_t == CUgraph ...), and sizedKernel() asks the program's own
// runtime for the kernel's CUfunction (cudaGetFuncBySymbol) to check its
// parameters against the driver (cuFuncGetParamInfo, 12.4+ drivers).
// Elsewhere the handles are the shim's eagle_cuda*_t types (ABI-identical).
//
// Errors: every failing call throws eagle::cuda::Error (status, CUDA error
// name and text). Destructors never throw.
//
// Ownership and thread-safety, in the style of Taskflow's docs, are stated on
// each class. In general: objects are move-only RAII owners; one object must
// not be used from two threads at once; distinct objects may be used from
// different threads concurrently (CUDA's own rules for streams and graphs).
#ifndef EAGLE_CUDA_HPP
#define EAGLE_CUDA_HPP

#include "eagle/cuda_shim.h"
#ifdef EAGLE_CUDA_SHIM_IMPLEMENTATION
#include "eagle/detail/cuda_shim_impl.h"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace eagle {
namespace cuda {

#if defined(CUDART_VERSION)
using stream_t = ::cudaStream_t;
using graph_t = ::cudaGraph_t;
using graph_node_t = ::cudaGraphNode_t;
using graph_exec_t = ::cudaGraphExec_t;
#else
using stream_t = eagle_cudaStream_t;
using graph_t = eagle_cudaGraph_t;
using graph_node_t = eagle_cudaGraphNode_t;
using graph_exec_t = eagle_cudaGraphExec_t;
#endif

namespace detail {
// handle -> the shim's void* handle (identical ABI)
template <class H>
inline void* raw(H h) noexcept { return reinterpret_cast<void*>(h); }
}  // namespace detail

/// A failed CUDA driver call. status(): the CUresult the driver returned (or a
/// negative eagle shim code); name(), text(): the driver's name and sentence
/// for it (cuGetErrorName, cuGetErrorString).
/// Thread-safety: an immutable value; safe to share.
class Error : public std::runtime_error {
public:
    Error(int status, const std::string& doing)
        : std::runtime_error(compose(status, doing)), status_(status) {
        const char *n = nullptr, *t = nullptr;
        eagle_cuda_status_text(status, &n, &t);
        name_ = n;
        text_ = t;
    }
    int status() const noexcept { return status_; }
    const std::string& name() const noexcept { return name_; }
    const std::string& text() const noexcept { return text_; }

private:
    static std::string compose(int status, const std::string& doing) {
        const char *n = nullptr, *t = nullptr;
        eagle_cuda_status_text(status, &n, &t);
        return doing + ": " + n + ": " + t;
    }
    int status_;
    std::string name_, text_;
};

namespace detail {

inline void check(int status, const char* doing) {
    if (status != 0) throw Error(status, doing);
}

/// Bind the shim once (thread-safe); throws Error saying why it cannot.
inline void ensureLoaded() {
    if (eagle_cuda_is_loaded()) return;
    char buf[1024] = {0};
    int st = eagle_cuda_load(buf, sizeof buf);
    if (st != 0) throw Error(st, buf[0] ? buf : "loading the CUDA driver");
}

}  // namespace detail

/// A CUDA stream (non-blocking) that this object owns and destroys.
/// Ownership: move-only; cuda() lends the handle, which stays valid while the
/// Stream lives. Thread-safety: cuda() may be called from any thread; enqueue
/// work from several threads only as CUDA allows for one stream.
class Stream {
public:
    Stream() {
        detail::ensureLoaded();
        eagle_cudaStream_t s = nullptr;
        detail::check(eagle_cuda_stream_create(&s, EAGLE_CUDA_STREAM_NON_BLOCKING),
                      "cuStreamCreateWithFlags");
        s_ = s;
    }
    ~Stream() { reset(); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Stream& operator=(Stream&& o) noexcept {
        if (this != &o) {
            reset();
            s_ = std::exchange(o.s_, nullptr);
        }
        return *this;
    }
    /// The cudaStream_t (borrowed).
    stream_t cuda() const noexcept { return reinterpret_cast<stream_t>(s_); }
    /// Wait for all work on the stream. Throws Error.
    void synchronize() const { detail::check(eagle_cuda_stream_synchronize(s_), "cuStreamSynchronize"); }

private:
    void reset() noexcept {
        if (s_) eagle_cuda_stream_destroy(s_);
        s_ = nullptr;
    }
    eagle_cudaStream_t s_ = nullptr;
};

/// A captured CUDA graph on its way into a Graph. A plain aggregate holding
/// the handle: Graph::addNode takes ownership; a CapturedGraph never handed
/// to a Graph must be destroyed by its holder (cudaGraphDestroy).
struct CapturedGraph {
    graph_t graph;
};

/// Records the work launched on one stream between begin() and end() into a
/// cudaGraph_t instead of running it (relaxed capture mode, so memory pools
/// may allocate during capture).
/// Ownership: borrows the stream (it must outlive the capturer); end() hands
/// the captured graph to the caller. If a capture is still open when the
/// capturer is destroyed (an exception left the scope), the destructor ends it
/// and destroys the graph, so the stream is never left capturing.
/// Thread-safety: not thread-safe; begin/end on the thread that launches
/// the work.
class StreamCapturer {
public:
    explicit StreamCapturer(stream_t stream) : s_(detail::raw(stream)) { detail::ensureLoaded(); }
    ~StreamCapturer() {
        if (open_) {
            eagle_cudaGraph_t g = nullptr;
            eagle_cuda_stream_end_capture(s_, &g);
            if (g) eagle_cuda_graph_destroy(g);
        }
    }
    StreamCapturer(const StreamCapturer&) = delete;
    StreamCapturer& operator=(const StreamCapturer&) = delete;
    StreamCapturer(StreamCapturer&& o) noexcept : s_(o.s_), open_(std::exchange(o.open_, false)) {}

    /// Start capturing. Throws Error (e.g. the stream is already capturing).
    void begin(int mode = EAGLE_CUDA_CAPTURE_MODE_RELAXED) {
        detail::check(eagle_cuda_stream_begin_capture(s_, mode), "cuStreamBeginCapture");
        open_ = true;
    }
    /// The node the last captured launch added (to register a sized kernel).
    graph_node_t lastNode() const {
        eagle_cudaGraphNode_t n = nullptr;
        detail::check(eagle_cuda_stream_last_node(s_, &n), "the node just captured");
        return reinterpret_cast<graph_node_t>(n);
    }
    /// End the capture; the caller owns the returned graph (wrap it in a
    /// CapturedGraph for Graph::addNode). Throws Error if the capture failed
    /// (the capture is ended either way).
    graph_t end() {
        eagle_cudaGraph_t g = nullptr;
        open_ = false;
        detail::check(eagle_cuda_stream_end_capture(s_, &g), "cuStreamEndCapture");
        return reinterpret_cast<graph_t>(g);
    }

private:
    eagle_cudaStream_t s_;
    bool open_ = false;
};

class Launcher;

/// An ordered list of captured graphs replayed as one: node i runs after
/// node i-1. Ownership: owns every CapturedGraph added; move-only; must
/// outlive the Launchers it makes (they refer to its kernel nodes).
/// Thread-safety: not thread-safe; build it from one thread.
class Graph {
public:
    Graph() { detail::ensureLoaded(); }
    ~Graph() {
        for (auto g : graphs_) eagle_cuda_graph_destroy(g);
    }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    Graph(Graph&& o) noexcept
        : stream_(o.stream_), graphs_(std::move(o.graphs_)), sized_(std::move(o.sized_)) {
        o.graphs_.clear();
    }

    /// The stream Launchers replay on (borrowed; must outlive them).
    void stream(stream_t s) noexcept { stream_ = detail::raw(s); }
    stream_t stream() const noexcept { return reinterpret_cast<stream_t>(stream_); }

    /// Append a captured graph (ownership moves here). Returns its index.
    std::size_t addNode(CapturedGraph captured) {
        if (!captured.graph) throw Error(EAGLE_CUDA_ERROR_BAD_ARGUMENT, "Graph::addNode: empty graph");
        graphs_.push_back(detail::raw(captured.graph));
        return graphs_.size() - 1;
    }
    std::size_t size() const noexcept { return graphs_.size(); }

    /// Register `node` (from StreamCapturer::lastNode(), in the most recently
    /// added graph) as a sized kernel: Launcher::setLogicalSize(n) sets its
    /// argument `sizeArg` to n and its grid.x to ceil(n / perBlock) (at least
    /// 1: the kernel must do nothing for n = 0). The kernel's parameter types
    /// come from `kernel`. perBlock = 0 means the node's block.x.
    template <class... Args>
    void sizedKernel(graph_node_t node, void (*kernel)(Args...), unsigned sizeArg,
                     unsigned perBlock = 0) {
        if (graphs_.empty()) throw Error(EAGLE_CUDA_ERROR_BAD_ARGUMENT, "sizedKernel before addNode");
        const std::size_t sizes[sizeof...(Args) + 1] = {sizeof(Args)..., 0};
        const unsigned nargs = static_cast<unsigned>(sizeof...(Args));
        if (sizeArg >= nargs || (sizes[sizeArg] != 4 && sizes[sizeArg] != 8))
            throw Error(EAGLE_CUDA_ERROR_BAD_ARGUMENT, "sizedKernel: sizeArg must name a 4- or 8-byte integer parameter");
#if defined(CUDART_VERSION)
        // the kernel's CUfunction from the program's own runtime, to check its parameters
        if (kernel) {
            cudaFunction_t f = nullptr;
            if (cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(kernel)) == cudaSuccess && f) {
                unsigned count = 0;
                std::size_t real[64];
                if (eagle_cuda_kernel_param_sizes(f, &count, real, 64) == 0) {
                    bool same = count == nargs;
                    for (unsigned i = 0; same && i < nargs && i < 64; ++i) same = real[i] == sizes[i];
                    if (!same)
                        throw Error(EAGLE_CUDA_ERROR_BAD_ARGUMENT,
                                    "sizedKernel: the kernel's parameters (cuFuncGetParamInfo) differ "
                                    "from the signature given");
                }
            }
        }
#else
        (void)kernel;
#endif
        auto k = std::unique_ptr<Sized>(new Sized());
        k->graphIndex = graphs_.size() - 1;
        detail::check(eagle_cuda_sized_init(&k->copy, reinterpret_cast<eagle_cudaGraphNode_t>(node),
                                            nargs, sizes, sizeArg,
                                            static_cast<unsigned>(sizes[sizeArg])),
                      "sizedKernel: copying the node's arguments");
        k->perBlock = perBlock ? perBlock : k->copy.params.blockDimX;
        sized_.push_back(std::move(k));
    }

    /// Instantiate (once) into a Launcher. One captured graph is instantiated
    /// as is; several become child-graph nodes of a root graph, chained in
    /// order. Throws Error naming the failing node's index on failure.
    inline Launcher launcher() const;

private:
    friend class Launcher;
    // eagle's own copy of a sized node's launch and arguments (eagle_cuda_sized)
    struct Sized {
        std::size_t graphIndex = 0;
        unsigned perBlock = 1;
        eagle_cuda_sized copy{};
        Sized() = default;
        Sized(const Sized&) = delete;
        Sized& operator=(const Sized&) = delete;
        ~Sized() { eagle_cuda_sized_free(&copy); }
    };
    eagle_cudaStream_t stream_ = nullptr;
    std::vector<eagle_cudaGraph_t> graphs_;
    std::vector<std::unique_ptr<Sized>> sized_;
};

/// An instantiated Graph: launch() replays it with one cudaGraphLaunch.
/// Ownership: owns the executable graph (and, for several captured graphs,
/// the root graph); move-only; the Graph it came from must outlive it.
/// Thread-safety: launch(), setLogicalSize() and synchronize() may be called
/// from several threads; they are serialized by an internal mutex.
class Launcher {
public:
    ~Launcher() { reset(); }
    Launcher(const Launcher&) = delete;
    Launcher& operator=(const Launcher&) = delete;
    Launcher(Launcher&& o) noexcept
        : exec_(std::exchange(o.exec_, nullptr)), root_(std::exchange(o.root_, nullptr)),
          stream_(o.stream_), graph_(o.graph_), children_(std::move(o.children_)),
          sized_(std::move(o.sized_)), mutex_(std::move(o.mutex_)) {}

    /// One replay (cudaGraphLaunch on the Graph's stream). Throws Error.
    void launch() {
        std::lock_guard<std::mutex> lock(*mutex_);
        detail::check(eagle_cuda_graph_launch(exec_, stream_), "cuGraphLaunch");
    }
    /// n replays in a row. Throws Error.
    void launch(long long n) {
        std::lock_guard<std::mutex> lock(*mutex_);
        long long done = 0;
        detail::check(eagle_cuda_graph_launch_n(exec_, stream_, n, &done), "cuGraphLaunch");
    }
    /// Upload the executable graph to the device ahead of the first launch.
    void upload() { detail::check(eagle_cuda_graph_upload(exec_, stream_), "cuGraphUpload"); }
    /// Wait for the replays issued so far. Throws Error (also for failures of
    /// earlier replays, which CUDA reports here).
    void synchronize() { detail::check(eagle_cuda_stream_synchronize(stream_), "cuStreamSynchronize"); }

    /// Retune: the next replays process n samples. Patches grid.x and the size
    /// argument of every registered sized kernel into the executable graph;
    /// never re-captures or re-instantiates. Throws Error.
    void setLogicalSize(unsigned long long n) {
        std::lock_guard<std::mutex> lock(*mutex_);
        for (auto& k : sized_) {
            Graph::Sized& s = *graph_->sized_[k.index];
            unsigned long long blocks = (n + s.perBlock - 1) / s.perBlock;
            eagle_dim3 grid = {static_cast<unsigned>(blocks ? blocks : 1), s.copy.params.gridDimY,
                               s.copy.params.gridDimZ};
            std::int64_t v64 = static_cast<std::int64_t>(n);
            std::int32_t v32 = static_cast<std::int32_t>(n);
            const void* value = s.copy.size_bytes == 8 ? static_cast<const void*>(&v64)
                                                       : static_cast<const void*>(&v32);
            if (!root_) {  // top-level kernel node: patch exec from eagle's copy
                detail::check(eagle_cuda_sized_apply(exec_, &s.copy, value, grid),
                              "retuning a sized kernel node");
                continue;
            }
            // inside a child graph: set the recorded node from eagle's copy, then
            // push that child graph into exec
            std::memcpy(s.copy.argv[s.copy.size_index], value, s.copy.size_bytes);
            s.copy.params.gridDimX = grid.x;
            detail::check(eagle_cuda_kernel_node_set_params(s.copy.node, &s.copy.params),
                          "cuGraphKernelNodeSetParams");
            detail::check(eagle_cuda_graph_exec_child_graph_node_set_params(
                              exec_, children_[s.graphIndex], graph_->graphs_[s.graphIndex]),
                          "cuGraphExecChildGraphNodeSetParams");
        }
    }

    /// The executable graph (borrowed).
    graph_exec_t cuda() const noexcept { return reinterpret_cast<graph_exec_t>(exec_); }

private:
    friend class Graph;
    struct SizedRef { std::size_t index; };
    Launcher() : mutex_(new std::mutex) {}
    void reset() noexcept {
        if (exec_) eagle_cuda_graph_exec_destroy(exec_);
        if (root_) eagle_cuda_graph_destroy(root_);
        exec_ = nullptr;
        root_ = nullptr;
    }
    eagle_cudaGraphExec_t exec_ = nullptr;
    eagle_cudaGraph_t root_ = nullptr;
    eagle_cudaStream_t stream_ = nullptr;
    const Graph* graph_ = nullptr;
    std::vector<eagle_cudaGraphNode_t> children_;
    std::vector<SizedRef> sized_;
    std::unique_ptr<std::mutex> mutex_;
};

inline Launcher Graph::launcher() const {
    if (graphs_.empty()) throw Error(EAGLE_CUDA_ERROR_BAD_ARGUMENT, "Graph::launcher: no nodes added");
    Launcher l;
    l.stream_ = stream_;
    l.graph_ = this;
    eagle_cudaGraph_t target = graphs_[0];
    if (graphs_.size() > 1) {
        detail::check(eagle_cuda_graph_create(&l.root_, 0), "cuGraphCreate");
        eagle_cudaGraphNode_t prev = nullptr;
        for (auto g : graphs_) {
            eagle_cudaGraphNode_t n = nullptr;
            detail::check(eagle_cuda_graph_add_child_graph_node(&n, l.root_, prev ? &prev : nullptr,
                                                                prev ? 1 : 0, g),
                          "cuGraphAddChildGraphNode");
            l.children_.push_back(n);
            prev = n;
        }
        target = l.root_;
    }
    eagle_cudaGraphNode_t bad = nullptr;
    int result = 0;
    int st = eagle_cuda_graph_instantiate(&l.exec_, target, 0, nullptr, &bad, &result);
    if (st != 0) {
        std::string where = "cuGraphInstantiateWithParams";
        for (std::size_t i = 0; bad && i < l.children_.size(); ++i)
            if (l.children_[i] == bad) where += " (failing node: Graph node " + std::to_string(i) + ")";
        if (bad && l.children_.empty()) where += " (failing node: in Graph node 0)";
        throw Error(st, where);
    }
    for (std::size_t i = 0; i < sized_.size(); ++i) l.sized_.push_back({i});
    return l;
}

}  // namespace cuda
}  // namespace eagle

#endif  // EAGLE_CUDA_HPP
