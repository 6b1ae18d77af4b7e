// seed_add_one.cu — the C++ example of "How eagle records and replays a
// graph": capture one kernel launch into a CUDA graph with eagle's C++ face,
// replay it REPLAYS times with one cudaGraphLaunch each, retune it, check.
//
// Build (the include path is `python -c "import eagle; print(eagle.get_include())"`
// or csrc/include in a source checkout):
//   nvcc -std=c++17 -I csrc/include csrc/examples/seed_add_one.cu -o seed_add_one
// Run on a machine with an NVIDIA GPU: ./seed_add_one   (prints "ok ...", exits 0)
#define EAGLE_CUDA_SHIM_IMPLEMENTATION  // compile the shim into this program
#include <eagle/cuda.hpp>

#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

__global__ void addOne(float* buf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] += 1.0f;
}

int main() {
    constexpr int N = 256;
    constexpr int REPLAYS = 10;
    constexpr int RETUNED = 100;  // samples processed after setLogicalSize

    try {
        float* dBuf = nullptr;
        if (cudaMalloc(&dBuf, N * sizeof(float)) != cudaSuccess ||
            cudaMemset(dBuf, 0, N * sizeof(float)) != cudaSuccess) {
            std::fprintf(stderr, "cudaMalloc/cudaMemset failed: %s\n",
                         cudaGetErrorString(cudaGetLastError()));
            return 2;
        }

        // A stream to record on, and a Graph that will own the captured work.
        eagle::cuda::Stream stream;
        eagle::cuda::Graph graph;
        graph.stream(stream.cuda());

        // Everything launched on the stream between begin() and end() is
        // recorded into a cudaGraph_t instead of executing eagerly.
        eagle::cuda::StreamCapturer capturer(stream.cuda());
        capturer.begin();
        addOne<<<1, N, 0, stream.cuda()>>>(dBuf, N);
        cudaGraphNode_t addOneNode = capturer.lastNode();
        graph.addNode(eagle::cuda::CapturedGraph{ capturer.end() });
        // Register the launch as sized: setLogicalSize patches its grid and `n`.
        graph.sizedKernel(addOneNode, addOne, /*sizeArg=*/1, /*perBlock=*/N);

        // Instantiate the graph once, then replay it REPLAYS times. Each
        // launch() is a single cudaGraphLaunch — no kernel-config marshalling.
        eagle::cuda::Launcher launcher = graph.launcher();
        for (int r = 0; r < REPLAYS; ++r)
            launcher.launch();
        launcher.synchronize();

        // Retune: the next replay touches only the first RETUNED samples.
        launcher.setLogicalSize(RETUNED);
        launcher.launch();
        launcher.synchronize();

        std::vector<float> host(N);
        if (cudaMemcpy(host.data(), dBuf, N * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
            std::fprintf(stderr, "cudaMemcpy failed\n");
            return 2;
        }
        cudaFree(dBuf);
        int bad = 0;
        for (int i = 0; i < N; ++i) {
            float want = static_cast<float>(REPLAYS + (i < RETUNED ? 1 : 0));
            if (host[i] != want) {
                if (bad++ < 5) std::fprintf(stderr, "buf[%d] = %g, expected %g\n", i, host[i], want);
            }
        }
        if (bad) {
            std::fprintf(stderr, "FAILED: %d wrong values\n", bad);
            return 1;
        }
        std::printf("ok: %d replays of addOne<<<1, %d>>>, then 1 retuned to %d samples\n",
                    REPLAYS, N, RETUNED);
        return 0;
    } catch (const eagle::cuda::Error& e) {
        std::fprintf(stderr, "eagle::cuda::Error: %s\n", e.what());
        return 3;
    }
}
