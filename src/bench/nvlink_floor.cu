// The physical floors between two GPUs, measured in the same job as the benchmark:
//   - one-way flag latency: a kernel on GPU a stores a counter into GPU b's memory and polls its own flag, a kernel on
//     GPU b polls for it and stores it back; one round trip = two one-way handoffs (the op's readiness handoff);
//   - per-direction bandwidth: cudaMemcpyPeerAsync a -> b and b -> a, and SM stores of 16 bytes per lane from a into
//     b's memory (how the op's send writes lines), each timed alone with CUDA events.
// With a == b both kernels run on one GPU (a test of this program on a one-GPU machine, not a link figure).
//
//   nvlink-floor [--gpus a,b] [--bytes N] [--round-trips N] [--samples N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "nvlink-floor: %s failed: %s\n", #call, cudaGetErrorString(e_));      \
            std::exit(1);                                                                             \
        }                                                                                             \
    } while (0)

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned int load_volatile(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_volatile(unsigned int* p, unsigned int v) {
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Thread 0 of GPU a: n round trips; writes the elapsed nanoseconds to *elapsed. Gives up after 10 s.
__global__ void ping(unsigned int* remote_flag, const unsigned int* own_flag, int n, unsigned long long* elapsed) {
    const unsigned long long start = now_ns();
    for (int i = 1; i <= n; ++i) {
        store_volatile(remote_flag, (unsigned int)i);
        while (load_volatile(own_flag) != (unsigned int)i) {
            if (now_ns() - start > 10000000000ull) {
                *elapsed = 0;
                return;
            }
        }
    }
    *elapsed = now_ns() - start;
}

__global__ void pong(const unsigned int* own_flag, unsigned int* remote_flag, int n) {
    const unsigned long long start = now_ns();
    for (int i = 1; i <= n; ++i) {
        while (load_volatile(own_flag) != (unsigned int)i) {
            if (now_ns() - start > 10000000000ull) {
                return;
            }
        }
        store_volatile(remote_flag, (unsigned int)i);
    }
}

// Every thread writes 16-byte words into dst (another GPU's memory) in a grid-stride loop.
__global__ void store16(uint4* dst, size_t words) {
    const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 1u, 2u);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = v;
    }
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median milliseconds of `work` queued on `stream` of the current device.
template <typename Work>
static double time_ms(cudaStream_t stream, int samples, Work work) {
    cudaEvent_t s, e;
    CHECK(cudaEventCreate(&s));
    CHECK(cudaEventCreate(&e));
    work();
    CHECK(cudaStreamSynchronize(stream));
    std::vector<double> ms;
    for (int i = 0; i < samples; ++i) {
        CHECK(cudaEventRecord(s, stream));
        work();
        CHECK(cudaEventRecord(e, stream));
        CHECK(cudaEventSynchronize(e));
        float t;
        CHECK(cudaEventElapsedTime(&t, s, e));
        ms.push_back(t);
    }
    CHECK(cudaEventDestroy(s));
    CHECK(cudaEventDestroy(e));
    return median(ms);
}

static void enable_peer(int from, int to) {
    if (from == to) {
        return;
    }
    int can = 0;
    CHECK(cudaDeviceCanAccessPeer(&can, from, to));
    if (!can) {
        std::fprintf(stderr, "nvlink-floor: GPU %d cannot access GPU %d (no peer access)\n", from, to);
        std::exit(1);
    }
    CHECK(cudaSetDevice(from));
    cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
    } else {
        CHECK(e);
    }
}

int main(int argc, char** argv) {
    int a = 0, b = 1, round_trips = 10000, samples = 20;
    size_t bytes = 256ull << 20;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--gpus") && i + 1 < argc) {
            if (std::sscanf(argv[++i], "%d,%d", &a, &b) != 2) {
                std::fprintf(stderr, "nvlink-floor: --gpus takes a,b\n");
                return 2;
            }
        } else if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc) {
            bytes = std::strtoull(argv[++i], nullptr, 10);
        } else if (!std::strcmp(argv[i], "--round-trips") && i + 1 < argc) {
            round_trips = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--samples") && i + 1 < argc) {
            samples = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: nvlink-floor [--gpus a,b] [--bytes N] [--round-trips N] [--samples N]\n");
            return 2;
        }
    }
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (a < 0 || b < 0 || a >= count || b >= count || round_trips < 1 || samples < 1 || bytes < 16) {
        std::fprintf(stderr, "nvlink-floor: GPUs must be in [0, %d); round trips, samples >= 1; bytes >= 16\n", count);
        return 2;
    }
    enable_peer(a, b);
    enable_peer(b, a);
    cudaDeviceProp pa, pb;
    CHECK(cudaGetDeviceProperties(&pa, a));
    CHECK(cudaGetDeviceProperties(&pb, b));
    std::printf("# nvlink-floor: GPU %d (%s) <-> GPU %d (%s)%s\n", a, pa.name, b, pb.name,
                a == b ? "  [same GPU: a test of the program, not a link figure]" : "");

    // flag latency
    unsigned int *flag_a, *flag_b;
    unsigned long long* elapsed;
    CHECK(cudaSetDevice(a));
    CHECK(cudaMalloc(&flag_a, 128));
    CHECK(cudaMemset(flag_a, 0, 128));
    CHECK(cudaMallocManaged(&elapsed, sizeof(unsigned long long)));
    CHECK(cudaSetDevice(b));
    CHECK(cudaMalloc(&flag_b, 128));
    CHECK(cudaMemset(flag_b, 0, 128));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t sa, sb;
    CHECK(cudaSetDevice(a));
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaSetDevice(b));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    // load both kernels before they run side by side: with lazy loading (the default since CUDA 12.2) the first
    // launch of ping would wait to load while pong spins, and the two would never meet
    cudaFuncAttributes attributes;
    for (int d : {a, b}) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaFuncGetAttributes(&attributes, ping));
        CHECK(cudaFuncGetAttributes(&attributes, pong));
        CHECK(cudaFuncGetAttributes(&attributes, store16));
    }
    std::vector<double> one_way;
    for (int s = 0; s < 5; ++s) {
        CHECK(cudaSetDevice(b));
        CHECK(cudaMemsetAsync(flag_b, 0, 128, sb));
        CHECK(cudaSetDevice(a));
        CHECK(cudaMemsetAsync(flag_a, 0, 128, sa));
        CHECK(cudaStreamSynchronize(sa));
        CHECK(cudaSetDevice(b));
        CHECK(cudaStreamSynchronize(sb));
        pong<<<1, 1, 0, sb>>>(flag_b, flag_a, round_trips);
        CHECK(cudaGetLastError());
        CHECK(cudaSetDevice(a));
        ping<<<1, 1, 0, sa>>>(flag_b, flag_a, round_trips, elapsed);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(sa));
        CHECK(cudaSetDevice(b));
        CHECK(cudaStreamSynchronize(sb));
        if (*elapsed == 0) {
            std::fprintf(stderr, "nvlink-floor: the ping-pong timed out (the two kernels did not run together)\n");
            return 1;
        }
        one_way.push_back(*elapsed / 2.0 / round_trips);
    }
    std::printf("flag_one_way_ns %.1f   (median of 5 runs of %d round trips, %d -> %d -> %d)\n", median(one_way),
                round_trips, a, b, a);

    // bandwidth per direction
    void *buf_a, *buf_b;
    CHECK(cudaSetDevice(a));
    CHECK(cudaMalloc(&buf_a, bytes));
    CHECK(cudaSetDevice(b));
    CHECK(cudaMalloc(&buf_b, bytes));
    CHECK(cudaSetDevice(a));
    double ab = time_ms(sa, samples, [&] { CHECK(cudaMemcpyPeerAsync(buf_b, b, buf_a, a, bytes, sa)); });
    int sms = pa.multiProcessorCount;
    double st = time_ms(sa, samples, [&] {
        store16<<<sms * 8, 256, 0, sa>>>(static_cast<uint4*>(buf_b), bytes / 16);
        CHECK(cudaGetLastError());
    });
    CHECK(cudaSetDevice(b));
    double ba = time_ms(sb, samples, [&] { CHECK(cudaMemcpyPeerAsync(buf_a, a, buf_b, b, bytes, sb)); });
    std::printf("copy_GBps %d->%d %.1f   %d->%d %.1f   (cudaMemcpyPeerAsync of %zu MiB, median of %d)\n", a, b,
                bytes / ab / 1e6, b, a, bytes / ba / 1e6, bytes >> 20, samples);
    std::printf("sm_store_GBps %d->%d %.1f   (16-byte stores from %d blocks x 256 threads into GPU %d)\n", a, b,
                bytes / st / 1e6, sms * 8, b);
    return 0;
}
