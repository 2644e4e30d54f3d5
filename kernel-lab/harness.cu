// Lab harness: loads row-kernel cubins, runs the layer shape (cp 8, 16 heads/rank, head_dim 512, bf16, base 2,
// inputs strided [T, H, cp, D] views of [T, cp*H, D]) in loopback, checks every output against the first cubin's
// bit for bit and against an fp64 reference, and times graphs of `calls` launches (median of samples); for a timeline
// build (kernel-lab/timeline.patch) it prints the stamps of one more replay's last call.
//   harness --kernel NAME [--batches 1,2,..] [--calls 60] [--samples 30] [--step S] [--profile B] cubin...
// --step S: the row kernel's step rows where a block has several (the tree's kernel takes 1-4);
// --profile B: one batch, three eager calls, no timing (for Nsight Compute).
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ll128_layout.h"

#define CK(x)                                                                                   \
    do {                                                                                        \
        CUresult e_ = (x);                                                                      \
        if (e_ != CUDA_SUCCESS) {                                                               \
            const char* s_;                                                                     \
            cuGetErrorString(e_, &s_);                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);                     \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

using dcp4j::LaunchArgs;
using dcp4j::RankArgs;

constexpr int CP = 8, H = 16, D = 512, W = D * 2 / 8, L = (W + 14) / 15, G = (L + 3) / 4;
constexpr long ROWB = 128L * L + 16L * G;

static long long magic(int d) {
    if (d == 1) return 0;
    int log2 = 32 - __builtin_clz(d - 1);
    int p = 31 + log2;
    long long m = ((1LL << p) + d - 1) / d;
    return m | (long long)(p - 32) << 32;
}

static float bf(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t tobf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return u >> 16;
}

struct Kernel {
    std::string path;
    CUmodule mod;
    CUfunction fn;
    int per_sm;
    CUdeviceptr stamps;  // a timeline build's dcp4j_stamps[blocks][kStamps] (%globaltimer ns), else 0
    size_t stamp_bytes;
};

// A timeline build's stamps of the last call: per stamp, the median over blocks (that wrote it) of its time after the
// earliest block's entry (stamp 0) and after the block's own entry, in ns; stamps 34-41 are poll rounds, not times.
static void print_timeline(const Kernel& k, int blocks) {
    constexpr int kStamps = 64;  // timeline.patch's stamps per block
    const size_t n = std::min(k.stamp_bytes / (kStamps * 8), (size_t)blocks);
    std::vector<unsigned long long> st(k.stamp_bytes / 8);
    CK(cuMemcpyDtoH(st.data(), k.stamps, k.stamp_bytes));
    unsigned long long first = ~0ull;
    for (size_t b = 0; b < n; ++b) first = std::min(first, st[b * kStamps]);
    printf("# timeline %s, %zu blocks: stamp median_after_first median_after_own_entry max_after_first count\n",
           k.path.c_str(), n);
    for (int i = 0; i < kStamps; ++i) {
        std::vector<double> a, o;
        for (size_t b = 0; b < n; ++b) {
            const unsigned long long v = st[b * kStamps + i];
            if (v == 0) continue;
            if (i >= 34 && i < 42) { a.push_back((double)v); o.push_back((double)v); continue; }
            if (v < first) continue;
            a.push_back((double)(v - first));
            o.push_back((double)v - (double)st[b * kStamps]);
        }
        if (a.empty()) continue;
        std::sort(a.begin(), a.end());
        std::sort(o.begin(), o.end());
        printf("#   %2d %9.0f %9.0f %9.0f %5zu\n", i, a[a.size() / 2], o[o.size() / 2], a.back(), a.size());
    }
}

int main(int argc, char** argv) {
    std::string name = "dcp4j_ll128row_bf16_base2_r8";
    std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    int calls = 60, samples = 30, step_override = 0, profile = 0;
    std::vector<std::string> cubins;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--kernel") name = argv[++i];
        else if (a == "--calls") calls = atoi(argv[++i]);
        else if (a == "--samples") samples = atoi(argv[++i]);
        else if (a == "--step") step_override = atoi(argv[++i]);
        else if (a == "--profile") profile = atoi(argv[++i]);
        else if (a == "--batches") {
            batches.clear();
            std::string s = argv[++i];
            size_t p = 0;
            while (p < s.size()) {
                size_t q = s.find(',', p);
                if (q == std::string::npos) q = s.size();
                batches.push_back(atoi(s.substr(p, q - p).c_str()));
                p = q + 1;
            }
        } else cubins.push_back(a);
    }
    if (profile) {
        batches = {profile};
        calls = 1;
        samples = 1;
    }
    setvbuf(stdout, nullptr, _IONBF, 0);
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    int sms;
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    std::vector<Kernel> ks;
    for (auto& c : cubins) {
        Kernel k;
        k.path = c;
        CK(cuModuleLoad(&k.mod, c.c_str()));
        CK(cuModuleGetFunction(&k.fn, k.mod, name.c_str()));
        // one team per block, with the team's dynamic shared memory (Ll128.ROW_SHARED_BYTES), as KernelCall
        // launches loopback
        CK(cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dcp4j::kRowSharedBytes));
        CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&k.per_sm, k.fn, dcp4j::kBlockThreads,
                                                       dcp4j::kRowSharedBytes));
        size_t stamp_bytes = 0;
        if (cuModuleGetGlobal(&k.stamps, &stamp_bytes, k.mod, "_ZN5dcp4j12dcp4j_stampsE") != CUDA_SUCCESS) {
            k.stamps = 0;  // dcp4j::dcp4j_stamps, defined by timeline builds alone
        }
        k.stamp_bytes = stamp_bytes;
        int regs, smem;
        CK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k.fn));
        CK(cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k.fn));
        printf("# %s: %d regs, %d B smem, %d blocks/SM\n", c.c_str(), regs, smem, k.per_sm);
        ks.push_back(k);
    }
    unsigned int* status_host;
    CK(cuMemHostAlloc((void**)&status_host, 4, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr status_dev;
    CK(cuMemHostGetDevicePointer(&status_dev, status_host, 0));
    CUstream stream;
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1;
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    std::mt19937_64 rng(2026);
    std::normal_distribution<float> nd(0.f, 1.f);

    printf("%-28s %6s %10s %6s %4s %5s %10s %8s\n", "cubin", "batch", "us/call", "blocks", "step", "same", "relerr", "status");
    for (int T : batches) {
        const int rows = T * H;
        const long inElems = (long)T * CP * H * D;
        std::vector<std::vector<uint16_t>> hin(CP, std::vector<uint16_t>(inElems));
        std::vector<std::vector<float>> hlse(CP, std::vector<float>((long)T * CP * H));
        for (int r = 0; r < CP; ++r) {
            for (auto& x : hin[r]) x = tobf(nd(rng));
            for (auto& x : hlse[r]) x = 3.f * nd(rng);
        }
        // fp64 reference: rank p's row (t, h) merges src s's out_s[t, p*H + h, :] with lse_s[t, p*H + h] (base 2)
        std::vector<std::vector<double>> ref(CP, std::vector<double>((long)rows * D));
        for (int p = 0; p < CP; ++p)
            for (int t = 0; t < T; ++t)
                for (int h = 0; h < H; ++h) {
                    double l[CP], m = -INFINITY, den = 0;
                    for (int s = 0; s < CP; ++s) {
                        l[s] = hlse[s][(long)t * CP * H + p * H + h];
                        m = std::max(m, l[s]);
                    }
                    for (int s = 0; s < CP; ++s) den += exp2(l[s] - m);
                    double* o = &ref[p][((long)t * H + h) * D];
                    for (int d = 0; d < D; ++d) {
                        double acc = 0;
                        for (int s = 0; s < CP; ++s)
                            acc += exp2(l[s] - m) / den * bf(hin[s][((long)t * CP * H + p * H + h) * D + d]);
                        o[d] = acc;
                    }
                }
        CUdeviceptr din[CP], dlse[CP], dout[CP], dws[CP];
        const long maxRows = rows;
        const long wsBytes = 128 + 2L * CP * maxRows * ROWB;
        for (int r = 0; r < CP; ++r) {
            CK(cuMemAlloc(&din[r], inElems * 2));
            CK(cuMemcpyHtoD(din[r], hin[r].data(), inElems * 2));
            CK(cuMemAlloc(&dlse[r], (long)T * CP * H * 4));
            CK(cuMemcpyHtoD(dlse[r], hlse[r].data(), (long)T * CP * H * 4));
            CK(cuMemAlloc(&dout[r], (long)rows * D * 2));
            CK(cuMemAlloc(&dws[r], wsBytes));
        }
        std::vector<std::vector<uint16_t>> first(CP);
        for (size_t ki = 0; ki < ks.size(); ++ki) {
            Kernel& k = ks[ki];
            const int budget = k.per_sm * sms / CP;
            // GridPlan: a block per row while they fit, else steps of 2 rows over the whole budget
            int step = rows > budget ? 2 : 1;
            if (step_override) step = step_override;
            step = std::max(1, std::min(step, (rows + budget - 1) / budget));
            const int blocks = std::max(1, std::min((rows + step - 1) / step, budget));
            LaunchArgs<8> a;
            memset(&a, 0, sizeof a);
            a.status = (unsigned int*)status_dev;
            a.ranks_in_launch = CP;
            a.blocks_per_rank = blocks;
            a.cp = CP;
            a.rows = rows;
            a.heads = H;
            a.heads_magic = magic(H);
            a.max_rows = maxRows;
            a.data_words = W;
            a.data_lines = L;
            a.line_groups = G;
            a.groups_magic = magic(G);
            a.peers_magic = magic(CP - 1);
            a.data_slot_bytes = (long long)CP * maxRows * L * 128;
            a.lse_region_offset = 128 + 2 * a.data_slot_bytes;
            a.lse_slot_bytes = (long long)CP * maxRows * G * 16;
            a.timeout_ns = 2000000000LL;
            a.early_dependents = 2 * blocks * CP <= k.per_sm * sms;
            a.tile_rows = step;
            a.send_window = 2;
            a.reload_lines = 1;
            a.stream_inputs = 0;
            a.vector16 = 1;
            a.flag_key = (long long)0x9E3779B97F4A7C15ULL;  // any key with bit 63 set (Ll128.flagKey)
            for (int r = 0; r < CP; ++r) {
                a.workspaces[r] = (unsigned char*)dws[r];
                RankArgs& ra = a.ranks[r];
                ra.partial_o = (const void*)din[r];
                ra.partial_lse = (const float*)dlse[r];
                ra.out = (void*)dout[r];
                ra.o_stride_token = (long long)CP * H * D;
                ra.o_stride_head = D;
                ra.o_stride_peer = (long long)H * D;
                ra.lse_stride_token = CP * H;
                ra.lse_stride_head = 1;
                ra.lse_stride_peer = H;
                ra.rank = r;
            }
            for (int r = 0; r < CP; ++r) {
                CK(cuMemsetD8(dws[r], 0, wsBytes));
                CK(cuMemsetD8(dout[r], 0xff, (long)rows * D * 2));
            }
            *status_host = 0;
            CUlaunchAttribute attr;
            attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            CUlaunchConfig cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.gridDimX = blocks * CP;
            cfg.gridDimY = cfg.gridDimZ = 1;
            cfg.blockDimX = dcp4j::kBlockThreads;
            cfg.sharedMemBytes = dcp4j::kRowSharedBytes;
            cfg.blockDimY = cfg.blockDimZ = 1;
            cfg.hStream = stream;
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
            void* params[] = {&a};
            auto launch = [&]() { CK(cuLaunchKernelEx(&cfg, k.fn, params, nullptr)); };
            // three eager calls (slots 0, 1, 0), each checked
            bool same = true;
            double relerr = 0;
            for (int c = 0; c < 3; ++c) {
                for (int r = 0; r < CP; ++r) CK(cuMemsetD8(dout[r], 0xff, (long)rows * D * 2));
                launch();
                CK(cuStreamSynchronize(stream));
                double num = 0, den = 0;
                for (int r = 0; r < CP; ++r) {
                    std::vector<uint16_t> o((long)rows * D);
                    CK(cuMemcpyDtoH(o.data(), dout[r], o.size() * 2));
                    if (ki == 0 && c == 0) first[r] = o;
                    else if (o != first[r]) same = false;
                    for (long i = 0; i < (long)o.size(); ++i) {
                        double d = bf(o[i]) - ref[r][i];
                        num += d * d;
                        den += ref[r][i] * ref[r][i];
                        if (std::isnan(bf(o[i]))) num = INFINITY;
                    }
                }
                relerr = std::max(relerr, sqrt(num / den));
            }
            if (profile) {
                printf("%-28s %6d profiled relerr %.2e status %u\n", k.path.c_str(), T, relerr, *status_host);
                continue;
            }
            CUgraph g;
            CUgraphExec ge;
            CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
            for (int c = 0; c < calls; ++c) launch();
            CK(cuStreamEndCapture(stream, &g));
            CK(cuGraphInstantiate(&ge, g, 0));
            for (int w = 0; w < 3; ++w) CK(cuGraphLaunch(ge, stream));
            std::vector<float> ts;
            for (int sidx = 0; sidx < samples; ++sidx) {
                CK(cuGraphLaunch(ge, stream));
                CK(cuEventRecord(e0, stream));
                CK(cuGraphLaunch(ge, stream));
                CK(cuEventRecord(e1, stream));
                CK(cuEventSynchronize(e1));
                float ms;
                CK(cuEventElapsedTime(&ms, e0, e1));
                ts.push_back(ms * 1000.f / calls);
            }
            std::sort(ts.begin(), ts.end());
            if (k.stamps) {
                // one more replay, the stamps cleared before it: they are its last call's
                CK(cuMemsetD8(k.stamps, 0, k.stamp_bytes));
                CK(cuGraphLaunch(ge, stream));
                CK(cuStreamSynchronize(stream));
                print_timeline(k, blocks * CP);
            }
            // the outputs after all replays are the same call's again
            bool same_after = true;
            for (int r = 0; r < CP; ++r) {
                std::vector<uint16_t> o((long)rows * D);
                CK(cuMemcpyDtoH(o.data(), dout[r], o.size() * 2));
                if (o != first[r]) same_after = false;
            }
            printf("%-28s %6d %10.2f %6d %4d %5s %10.2e %8u\n", k.path.c_str(), T, ts[ts.size() / 2], blocks, step,
                   same && same_after ? "yes" : "NO", relerr, *status_host);
            fflush(stdout);
            CK(cuGraphExecDestroy(ge));
            CK(cuGraphDestroy(g));
        }
        for (int r = 0; r < CP; ++r) {
            cuMemFree(din[r]);
            cuMemFree(dlse[r]);
            cuMemFree(dout[r]);
            cuMemFree(dws[r]);
        }
    }
    return 0;
}
