// The launch floor of a deployment, without dcp4j: what one call costs when every call is one launch per rank whose
// blocks only meet their peers (block (rank, peer) stores a counter into peer's flag line for rank and waits for
// peer's; the op's readiness handoff with no payload), for ranks in one launch of one process (as dcp4j's loopback)
// and for one process per rank over CUDA IPC on one GPU (as `launch --nproc N -- bench --ranks processes`; only under
// MPS: without it the processes take turns in time slices).
//
// Launch modes (one call = one launch per rank):
//   plain            <<<>>>
//   cooperative-pdl  cudaLaunchKernelEx, cooperative + programmatic stream serialization
//   pdl              cudaLaunchKernelEx, programmatic stream serialization (dcp4j's launch)
//   graph            the pdl launch captured in a graph, one graph launch per call
//   graph-50         50 pdl launches captured in one graph, one graph launch per 50 calls
// With pdl a block waits for the stream's previous kernel at entry and lets the next one start at once, as dcp4j's
// kernel does where its grid fits twice.
//
//   launch-floor [--ranks N] [--calls N] [--samples N]       prints µs per call, the max over ranks of their medians
#include <cuda_runtime.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "launch-floor: %s failed: %s\n", #call, cudaGetErrorString(e_));      \
            std::exit(1);                                                                             \
        }                                                                                             \
    } while (0)

constexpr int kMaxRanks = 16;
constexpr int kLineWords = 32;                         // one 128-byte flag line per source rank
constexpr int kGraphCalls = 50;
constexpr int kLeadInCalls = 20;                       // untimed, absorbs the skew between processes
constexpr int kWarmupCalls = 200;
constexpr unsigned long long kTimeoutNs = 2000000000;  // a wait gives up after 2 s and marks the mode timed out,
                                                       // after which the process's calls of that mode wait no more
constexpr int kMeetingTimeoutSeconds = 120;            // a process that waits longer for a peer's file gives up
const char* const kModes[] = {"plain", "cooperative-pdl", "pdl", "graph", "graph-50"};

// The ranks of one launch: every rank's flag lines as mapped in this process, and this launch's own state.
struct Group {
    unsigned* flags[kMaxRanks];  // flags[r] + s * kLineWords: rank r's line for source s
    unsigned* counters;          // one line per block of this launch: the calls it has made
    unsigned* timed_out;         // set by a wait that gave up
    int first_rank;              // the launch's blocks are ranks first_rank .. first_rank + gridDim.x / ranks - 1
    int ranks;
};

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <bool kPdl>
__global__ void meet(const Group g) {
    if (kPdl) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
    if (threadIdx.x != 0) {
        return;
    }
    const int rank = g.first_rank + (int)blockIdx.x / g.ranks;
    const int peer = (int)blockIdx.x % g.ranks;
    volatile unsigned* counter = g.counters + blockIdx.x * kLineWords;
    const unsigned call = *counter + 1;
    *counter = call;
    if (*(volatile unsigned*)g.timed_out) {
        return;
    }
    *(volatile unsigned*)(g.flags[peer] + rank * kLineWords) = call;
    const volatile unsigned* mine = g.flags[rank] + peer * kLineWords;
    const unsigned long long start = now_ns();
    while (*mine < call) {
        if (now_ns() - start > kTimeoutNs) {
            *(volatile unsigned*)g.timed_out = 1;
            break;
        }
        __nanosleep(32);
    }
}

// Files in a private directory: IPC handles and barriers between the processes.
struct Meeting {
    std::string dir;
    int rank;  // -1: the one-launch deployment (no other process)
    int ranks;

    std::string path(const std::string& what, int r) const { return dir + "/" + what + "-" + std::to_string(r); }

    void publish(const std::string& what, const void* bytes, size_t n) const {
        std::string tmp = path(what, rank) + ".tmp";
        FILE* f = std::fopen(tmp.c_str(), "wb");
        if (f == nullptr) {
            std::perror(("launch-floor: " + tmp).c_str());
            std::exit(1);
        }
        std::fwrite(bytes, 1, n, f);
        std::fclose(f);
        std::rename(tmp.c_str(), path(what, rank).c_str());  // appears whole
    }

    void read(const std::string& what, int r, void* bytes, size_t n) const {
        struct stat st;
        const time_t deadline = time(nullptr) + kMeetingTimeoutSeconds;
        while (stat(path(what, r).c_str(), &st) != 0) {
            if (time(nullptr) > deadline) {
                std::fprintf(stderr, "launch-floor: rank %d gave up after %d s waiting for rank %d's %s\n", rank,
                             kMeetingTimeoutSeconds, r, what.c_str());
                std::exit(1);
            }
            usleep(100);
        }
        FILE* f = std::fopen(path(what, r).c_str(), "rb");
        if (f == nullptr || std::fread(bytes, 1, n, f) != n) {
            std::fprintf(stderr, "launch-floor: short file %s\n", path(what, r).c_str());
            std::exit(1);
        }
        std::fclose(f);
    }

    void barrier(const std::string& what) const {
        if (rank < 0) {
            return;
        }
        char none = 0;
        publish(what, &none, 1);
        for (int r = 0; r < ranks; r++) {
            read(what, r, &none, 1);
        }
    }
};

struct Launcher {
    Group group;
    int grid;
    cudaStream_t stream;

    void launch(bool pdl, bool cooperative) const {
        if (!pdl) {
            meet<false><<<grid, 32, 0, stream>>>(group);
            CHECK(cudaGetLastError());
            return;
        }
        cudaLaunchAttribute attrs[2] = {};
        attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attrs[0].val.programmaticStreamSerializationAllowed = 1;
        attrs[1].id = cudaLaunchAttributeCooperative;
        attrs[1].val.cooperative = 1;
        cudaLaunchConfig_t config = {};
        config.gridDim = dim3(grid);
        config.blockDim = dim3(32);
        config.stream = stream;
        config.attrs = attrs;
        config.numAttrs = cooperative ? 2 : 1;
        CHECK(cudaLaunchKernelEx(&config, meet<true>, group));
    }
};

// µs per call of one mode on this process's stream, the median of the samples; NaN when a wait timed out.
double measure(const Launcher& l, const std::string& mode, int calls, int samples, const Meeting& m) {
    const bool graph = mode == "graph" || mode == "graph-50";
    const int per_launch = mode == "graph-50" ? kGraphCalls : 1;
    cudaGraphExec_t exec = nullptr;
    if (graph) {
        cudaGraph_t g;
        CHECK(cudaStreamBeginCapture(l.stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < per_launch; i++) {
            l.launch(true, false);
        }
        CHECK(cudaStreamEndCapture(l.stream, &g));
        CHECK(cudaGraphInstantiate(&exec, g, 0));
        CHECK(cudaGraphDestroy(g));
    }
    auto queue = [&](int n) {
        for (int i = 0; i < n / per_launch; i++) {
            if (graph) {
                CHECK(cudaGraphLaunch(exec, l.stream));
            } else {
                l.launch(mode != "plain", mode == "cooperative-pdl");
            }
        }
    };
    CHECK(cudaMemset(l.group.timed_out, 0, sizeof(unsigned)));
    CHECK(cudaDeviceSynchronize());
    m.barrier(mode + "-start");
    queue(kWarmupCalls);
    CHECK(cudaStreamSynchronize(l.stream));
    m.barrier(mode + "-warm");
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int s = 0; s < samples; s++) {
        queue(kLeadInCalls * per_launch);
        CHECK(cudaEventRecord(e0, l.stream));
        queue(calls);
        CHECK(cudaEventRecord(e1, l.stream));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        us.push_back(ms * 1e3 / (calls / per_launch * per_launch));
    }
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    if (exec != nullptr) {
        CHECK(cudaGraphExecDestroy(exec));
    }
    unsigned timed_out;
    CHECK(cudaMemcpy(&timed_out, l.group.timed_out, sizeof timed_out, cudaMemcpyDeviceToHost));
    std::sort(us.begin(), us.end());
    return timed_out ? NAN : us[us.size() / 2];
}

// One process of a deployment: rank >= 0 is one rank of `ranks` processes, rank -1 all ranks in one launch.
// Writes "mode µs" lines to the meeting's result file.
void run_rank(const Meeting& m, int calls, int samples) {
    const bool one_launch = m.rank < 0;
    const int ranks_here = one_launch ? m.ranks : 1;
    CHECK(cudaSetDevice(0));
    Launcher l = {};
    l.grid = ranks_here * m.ranks;
    l.group.ranks = m.ranks;
    l.group.first_rank = one_launch ? 0 : m.rank;
    const size_t flag_bytes = (size_t)m.ranks * kLineWords * sizeof(unsigned);
    unsigned* flags;
    CHECK(cudaMalloc(&flags, flag_bytes * ranks_here));
    CHECK(cudaMemset(flags, 0, flag_bytes * ranks_here));
    CHECK(cudaMalloc(&l.group.counters, (size_t)l.grid * kLineWords * sizeof(unsigned)));
    CHECK(cudaMemset(l.group.counters, 0, (size_t)l.grid * kLineWords * sizeof(unsigned)));
    CHECK(cudaMalloc(&l.group.timed_out, sizeof(unsigned)));
    if (one_launch) {
        for (int r = 0; r < m.ranks; r++) {
            l.group.flags[r] = flags + r * m.ranks * kLineWords;
        }
    } else {
        cudaIpcMemHandle_t own;
        CHECK(cudaIpcGetMemHandle(&own, flags));
        m.publish("handle", &own, sizeof own);
        for (int r = 0; r < m.ranks; r++) {
            if (r == m.rank) {
                l.group.flags[r] = flags;
                continue;
            }
            cudaIpcMemHandle_t h;
            m.read("handle", r, &h, sizeof h);
            void* mapped;
            CHECK(cudaIpcOpenMemHandle(&mapped, h, cudaIpcMemLazyEnablePeerAccess));
            l.group.flags[r] = (unsigned*)mapped;
        }
    }
    CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    CHECK(cudaDeviceSynchronize());
    std::string results;
    for (const char* mode : kModes) {
        char line[64];
        std::snprintf(line, sizeof line, "%s %.3f\n", mode, measure(l, mode, calls, samples, m));
        results += line;
    }
    m.barrier("done");  // no process unmaps while a peer may still write into its buffer
    m.publish("result", results.data(), results.size());
}

// Whether the CUDA MPS daemon runs (its control pipe exists), as dcp4j's launch checks.
bool mps_running(std::string* pipe) {
    const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
    *pipe = std::string(dir != nullptr && *dir != 0 ? dir : "/tmp/nvidia-mps") + "/control";
    struct stat st;
    return stat(pipe->c_str(), &st) == 0;
}

struct Options {
    int ranks = 8;
    int calls = 2000;
    int samples = 7;
};

const char* const kUsage =
    "launch-floor [--ranks N] [--calls N] [--samples N]\n"
    "  µs per call of launches whose blocks only meet their peers, ranks in one launch and one process per rank over\n"
    "  CUDA IPC on GPU 0 (the latter only under MPS), per launch mode; defaults: 8 ranks, 2000 calls, 7 samples\n";

// Parses the options; prints the usage and exits on --help, on an unknown option or on a value out of range.
Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        const std::string name = argv[i];
        if (name == "--help" || name == "-h") {
            std::printf("%s", kUsage);
            std::exit(0);
        }
        int* value = name == "--ranks" ? &o.ranks : name == "--calls" ? &o.calls : name == "--samples" ? &o.samples
                                                                                                      : nullptr;
        char* end = nullptr;
        if (value == nullptr || i + 1 == argc || (*value = (int)std::strtol(argv[i + 1], &end, 10), *end != 0)) {
            std::fprintf(stderr, "launch-floor: bad option or value at '%s'\n%s", name.c_str(), kUsage);
            std::exit(2);
        }
        i++;
    }
    if (o.ranks < 1 || o.ranks > kMaxRanks || o.calls < kGraphCalls || o.samples < 1) {
        std::fprintf(stderr, "launch-floor: --ranks must be 1..%d (got %d), --calls >= %d (got %d), --samples >= 1"
                     " (got %d)\n", kMaxRanks, o.ranks, kGraphCalls, o.calls, o.samples);
        std::exit(2);
    }
    return o;
}

// Per mode, the largest of the ranks' medians (a rank's result file: "mode µs" lines; "nan" where a wait timed out).
void print_worst(const char* dir, int ranks, bool one_launch) {
    const int files = one_launch ? 1 : ranks;
    for (const char* mode : kModes) {
        double worst = 0;
        for (int r = 0; r < files; r++) {
            std::string path = std::string(dir) + "/result-" + std::to_string(one_launch ? -1 : r);
            FILE* f = std::fopen(path.c_str(), "r");
            if (f == nullptr) {
                std::perror(("launch-floor: " + path).c_str());
                std::exit(1);
            }
            char m[32];
            double us;
            while (std::fscanf(f, "%31s %lf", m, &us) == 2) {
                if (std::strcmp(m, mode) == 0) {
                    worst = std::isnan(us) || std::isnan(worst) ? NAN : std::max(worst, us);
                }
            }
            std::fclose(f);
        }
        if (std::isnan(worst)) {
            std::printf("  %s timeout", mode);
        } else {
            std::printf("  %s %.2f", mode, worst);
        }
    }
    std::printf("\n");
}

// Forks one child per process of the deployment (CUDA is initialised only in the children) and prints the largest
// of the ranks' medians per mode; false where a process failed.
bool run_deployment(const char* name, int ranks, bool one_launch, int calls, int samples) {
    char dir[] = "/tmp/launch-floor-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        std::perror("launch-floor: mkdtemp");
        std::exit(1);
    }
    const int processes = one_launch ? 1 : ranks;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            run_rank(Meeting{dir, one_launch ? -1 : p, ranks}, calls, samples);
            std::exit(0);
        }
        children.push_back(pid);
    }
    bool failed = false;
    for (pid_t c : children) {
        int status;
        waitpid(c, &status, 0);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    std::printf("%-26s", name);
    if (failed) {
        std::printf(" a process failed (see above)\n");
    } else {
        print_worst(dir, ranks, one_launch);
    }
    std::fflush(stdout);
    std::string clean = std::string("rm -rf ") + dir;
    if (std::system(clean.c_str()) != 0) {
        std::fprintf(stderr, "launch-floor: could not remove %s\n", dir);
    }
    return !failed;
}

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    std::printf("launch-floor: %d ranks, %d calls per sample, %d samples; µs per call, max over ranks of each rank's"
                " median\n", o.ranks, o.calls, o.samples);
    std::fflush(stdout);
    bool ok = run_deployment(("one launch, " + std::to_string(o.ranks) + " ranks").c_str(), o.ranks, true, o.calls,
                             o.samples);
    const std::string processes = std::to_string(o.ranks) + " processes, CUDA IPC";
    std::string pipe;
    if (mps_running(&pipe)) {
        ok &= run_deployment(processes.c_str(), o.ranks, false, o.calls, o.samples);
    } else {
        std::printf("%-26s skipped: no MPS daemon (%s), so processes on one GPU take turns in time slices and a\n"
                    "%-26s handoff costs milliseconds\n", processes.c_str(), pipe.c_str(), "");
    }
    return ok ? 0 : 1;
}
