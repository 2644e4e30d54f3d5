// A stand-in for the CUDA driver (the 43 functions TornadoVM's libtornado-ptx.so calls) for scripts/tornado-dry-run:
// device memory is host memory, copies copy, kernels do not run. With it TornadoVM's PTX backend starts on a machine
// without a GPU, JIT-compiles every Java task of a graph, loads every module (FAKE_CUDA_MODULE_DIR: each module's PTX
// is written there, for ptxas) and launches every task: cuModuleGetFunction fails unless the module holds the entry
// asked for, and cuLaunchKernel prints the entry and the grid on stderr. Outputs are never computed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { char* image; } Module;
typedef struct { Module* module; char name[512]; } Function;

CUresult cuInit(unsigned int f) { (void)f; return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice* d, int o) { *d = o; return 0; }
CUresult cuDeviceGetName(char* name, int len, CUdevice d) { (void)d; snprintf(name, len, "fake-cuda sm_90"); return 0; }
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
  (void)d;
  switch (attr) {
    case 1: *v = 1024; break;          // max threads per block
    case 2: case 3: *v = 1024; break;  // max block dim x, y
    case 4: *v = 64; break;
    case 5: *v = 2147483647; break;    // max grid x
    case 6: case 7: *v = 65535; break;
    case 8: *v = 49152; break;         // shared memory per block
    case 10: *v = 32; break;           // warp size
    case 13: *v = 1980000; break;      // clock kHz
    case 16: *v = 132; break;          // SMs
    case 39: *v = 2048; break;         // threads per SM
    case 75: *v = 9; break;            // compute capability
    case 76: *v = 0; break;
    default: *v = 1; break;
  }
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t* b, CUdevice d) { (void)d; *b = (size_t)80 << 30; return 0; }
CUresult cuCtxCreate_v4(void** ctx, void* p, unsigned f, CUdevice d) { (void)p; (void)f; (void)d; *ctx = malloc(8); return 0; }
CUresult cuCtxDestroy_v2(void* c) { (void)c; return 0; }
CUresult cuCtxSetCurrent(void* c) { (void)c; return 0; }
CUresult cuCtxGetStreamPriorityRange(int* l, int* g) { if (l) *l = 0; if (g) *g = -5; return 0; }
CUresult cuEventCreate(void** e, unsigned f) { (void)f; *e = malloc(8); return 0; }
CUresult cuEventDestroy_v2(void* e) { (void)e; return 0; }
CUresult cuEventElapsedTime_v2(float* ms, void* a, void* b) { (void)a; (void)b; *ms = 0.001f; return 0; }
CUresult cuEventQuery(void* e) { (void)e; return 0; }
CUresult cuEventRecord(void* e, void* s) { (void)e; (void)s; return 0; }
CUresult cuEventSynchronize(void* e) { (void)e; return 0; }
CUresult cuGraphDestroy(void* g) { (void)g; return 0; }
CUresult cuGraphExecDestroy(void* g) { (void)g; return 0; }
CUresult cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long f) { (void)g; (void)f; *e = malloc(8); return 0; }
CUresult cuGraphLaunch(void* e, void* s) { (void)e; (void)s; return 0; }
CUresult cuLaunchKernel(Function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shm, void* s, void** params, void** extra) {
  (void)s; (void)params; (void)extra; (void)shm;
  fprintf(stderr, "fake-cuda: launch %s grid %u,%u,%u block %u,%u,%u\n", f->name, gx, gy, gz, bx, by, bz);
  return 0;
}
CUresult cuMemAllocHost_v2(void** p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
CUresult cuMemFreeHost(void* p) { free(p); return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* m = aligned_alloc(256, ((n + 255) / 256) * 256);
  if (!m) return 2;
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { free((void*)(uintptr_t)p); return 0; }
CUresult cuMemGetInfo_v2(size_t* fr, size_t* t) { *fr = (size_t)70 << 30; *t = (size_t)80 << 30; return 0; }
CUresult cuMemHostRegister_v2(void* p, size_t n, unsigned f) { (void)p; (void)n; (void)f; return 0; }
CUresult cuMemHostUnregister(void* p) { (void)p; return 0; }
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* st) { (void)st; memcpy(d, (void*)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* st) { (void)st; memcpy((void*)(uintptr_t)d, s, n); return 0; }
CUresult cuModuleLoadData(Module** m, const void* image) {
  *m = malloc(sizeof(Module));
  (*m)->image = strdup((const char*)image);
  const char* dir = getenv("FAKE_CUDA_MODULE_DIR");
  if (dir) {
    static int n = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/module-%03d.ptx", dir, n++);
    FILE* f = fopen(path, "w");
    if (f) { fputs((*m)->image, f); fclose(f); }
  }
  return 0;
}
CUresult cuModuleLoadDataEx(Module** m, const void* image, unsigned n, void* o, void** v) {
  (void)n; (void)o; (void)v; return cuModuleLoadData(m, image);
}
CUresult cuModuleUnload(Module* m) { (void)m; return 0; }
CUresult cuModuleGetFunction(Function** f, Module* m, const char* name) {
  char entry[600];
  snprintf(entry, sizeof entry, ".entry %s(", name);
  if (!strstr(m->image, entry)) {
    fprintf(stderr, "fake-cuda: no entry %s in the module\n", name);
    return 500;  // CUDA_ERROR_NOT_FOUND
  }
  *f = malloc(sizeof(Function));
  (*f)->module = m;
  snprintf((*f)->name, sizeof (*f)->name, "%s", name);
  return 0;
}
CUresult cuOccupancyMaxPotentialBlockSize(int* minGrid, int* block, void* f, void* b2d, size_t smem, int limit) {
  (void)f; (void)b2d; (void)smem; (void)limit; *minGrid = 264; *block = 1024; return 0;
}
CUresult cuStreamBeginCapture_v2(void* s, int mode) { (void)s; (void)mode; return 0; }
CUresult cuStreamCreateWithPriority(void** s, unsigned f, int p) { (void)f; (void)p; *s = malloc(8); return 0; }
CUresult cuStreamDestroy_v2(void* s) { (void)s; return 0; }
CUresult cuStreamEndCapture(void* s, void** g) { (void)s; *g = malloc(8); return 0; }
CUresult cuStreamIsCapturing(void* s, int* st) { (void)s; *st = 0; return 0; }
CUresult cuStreamSynchronize(void* s) { (void)s; return 0; }
CUresult cuStreamWaitEvent(void* s, void* e, unsigned f) { (void)s; (void)e; (void)f; return 0; }
