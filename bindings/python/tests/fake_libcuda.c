/*
 * A fake CUDA driver for CPU-only tests of the Python bindings.
 *
 * libfmha opens the driver named by $FMHA_LIBCUDA and fetches every entry
 * point through cuGetProcAddress_v2. This file answers those calls with
 * plausible values and no GPU: devices, contexts, modules and functions are
 * tokens, and cuLaunchKernel only records its arguments. The bindings can
 * then create plans, query them and "run" them on a machine without a GPU.
 *
 * Knobs (read at each call): FAKE_CUDA_DEVICES (default 2), FAKE_CUDA_SM
 * (default 80), FAKE_CUDA_VERSION (default 12080).
 * Inspection: fake_cuda_launches(), fake_cuda_last_stream(),
 * fake_cuda_last_grid(int[3]), fake_cuda_set_current(ordinal or -1),
 * fake_cuda_stream_waits(int64 out[][2]): the (waiting stream, producer
 * stream) pairs of the event functions the Python binding calls directly
 * (exported by name, as libcuda.so.1 exports them), fake_cuda_live_events().
 *
 * Only the types' ABI matters here, so cuda.h is not needed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_INVALID_DEVICE 101

#define MAX_DEVICES 16
static char g_ctx_tokens[MAX_DEVICES];
static char g_module_token, g_function_token;
static __thread CUcontext g_stack[8];
static __thread int g_depth;
static long g_launches;
static void *g_last_stream;
static unsigned g_last_grid[3];

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}
static int device_count(void) {
    int n = env_int("FAKE_CUDA_DEVICES", 2);
    return n > MAX_DEVICES ? MAX_DEVICES : n;
}
static int ordinal_of_ctx(CUcontext c) {
    return (int)((char *)c - g_ctx_tokens);
}

static CUresult cuInit(unsigned flags) { (void)flags; return CUDA_SUCCESS; }
static CUresult cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_VERSION", 12080); return CUDA_SUCCESS; }
static CUresult cuGetErrorName(CUresult r, const char **s) { (void)r; *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }
static CUresult cuGetErrorString(CUresult r, const char **s) { (void)r; *s = "fake driver error"; return CUDA_SUCCESS; }
static CUresult cuDeviceGetCount(int *n) { *n = device_count(); return CUDA_SUCCESS; }
static CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
static CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    (void)d;
    int sm = env_int("FAKE_CUDA_SM", 80);
    switch (attr) {
    case 75: *v = sm / 10; break;       /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = sm % 10; break;       /* COMPUTE_CAPABILITY_MINOR */
    case 16: *v = 132; break;           /* MULTIPROCESSOR_COUNT */
    case 97: *v = 227 * 1024; break;    /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 8: *v = 48 * 1024; break;      /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 1: *v = 1024; break;           /* MAX_THREADS_PER_BLOCK */
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}
static CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    *c = &g_ctx_tokens[d];
    return CUDA_SUCCESS;
}
static CUresult cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
static CUresult cuCtxGetCurrent(CUcontext *c) { *c = g_depth ? g_stack[g_depth - 1] : NULL; return CUDA_SUCCESS; }
static CUresult cuCtxPushCurrent(CUcontext c) {
    if (g_depth == 8) return CUDA_ERROR_INVALID_VALUE;
    g_stack[g_depth++] = c;
    return CUDA_SUCCESS;
}
static CUresult cuCtxPopCurrent(CUcontext *c) {
    if (!g_depth) return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext top = g_stack[--g_depth];
    if (c) *c = top;
    return CUDA_SUCCESS;
}
static CUresult cuCtxGetDevice(CUdevice *d) {
    if (!g_depth) return CUDA_ERROR_INVALID_CONTEXT;
    *d = ordinal_of_ctx(g_stack[g_depth - 1]);
    return CUDA_SUCCESS;
}
static CUresult cuCtxGetId(CUcontext c, unsigned long long *id) { *id = (unsigned long long)ordinal_of_ctx(c) + 1; return CUDA_SUCCESS; }
static CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, void *opts, void **vals) {
    (void)image; (void)n; (void)opts; (void)vals;
    *m = &g_module_token;
    return CUDA_SUCCESS;
}
static CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    (void)m; (void)name;
    *f = &g_function_token;
    return CUDA_SUCCESS;
}
static CUresult cuFuncSetAttribute(CUfunction f, int attr, int value) { (void)f; (void)attr; (void)value; return CUDA_SUCCESS; }
static CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f) { (void)attr; (void)f; *v = 0; return CUDA_SUCCESS; }
static CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                               void **extra) {
    (void)f; (void)bx; (void)by; (void)bz; (void)smem; (void)params; (void)extra;
    __atomic_add_fetch(&g_launches, 1, __ATOMIC_SEQ_CST);
    g_last_stream = s;
    g_last_grid[0] = gx; g_last_grid[1] = gy; g_last_grid[2] = gz;
    return CUDA_SUCCESS;
}
static CUresult cuMemsetD32Async(uint64_t dst, unsigned v, size_t n, CUstream s) {
    (void)dst; (void)v; (void)n; (void)s;
    return CUDA_SUCCESS;
}
static CUresult cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *addr,
                                       const uint64_t *dims, const uint64_t *strides,
                                       const unsigned *box, const unsigned *estrides,
                                       int interleave, int swizzle, int l2, int oob) {
    (void)dtype; (void)rank; (void)addr; (void)dims; (void)strides; (void)box; (void)estrides;
    (void)interleave; (void)swizzle; (void)l2; (void)oob;
    memset(map, 0, 128);
    return CUDA_SUCCESS;
}

#define ENTRY(name) {#name, (void *)name}
static const struct { const char *name; void *fn; } g_entries[] = {
    ENTRY(cuInit), ENTRY(cuDriverGetVersion), ENTRY(cuGetErrorName), ENTRY(cuGetErrorString),
    ENTRY(cuDeviceGetCount), ENTRY(cuDeviceGet), ENTRY(cuDeviceGetAttribute),
    ENTRY(cuDevicePrimaryCtxRetain), ENTRY(cuDevicePrimaryCtxRelease), ENTRY(cuCtxGetCurrent),
    ENTRY(cuCtxPushCurrent), ENTRY(cuCtxPopCurrent), ENTRY(cuCtxGetDevice), ENTRY(cuCtxGetId),
    ENTRY(cuModuleLoadDataEx), ENTRY(cuModuleGetFunction), ENTRY(cuFuncSetAttribute),
    ENTRY(cuFuncGetAttribute), ENTRY(cuLaunchKernel), ENTRY(cuMemsetD32Async),
    ENTRY(cuTensorMapEncodeTiled),
};

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char *symbol, void **fn,
                                                                    int version, uint64_t flags,
                                                                    int *status) {
    (void)version; (void)flags;
    for (size_t i = 0; i < sizeof g_entries / sizeof g_entries[0]; ++i) {
        if (strcmp(symbol, g_entries[i].name) == 0) {
            *fn = g_entries[i].fn;
            if (status) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
            return CUDA_SUCCESS;
        }
    }
    *fn = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 500;              /* CUDA_ERROR_NOT_FOUND */
}

/* The event functions the Python binding loads by name to order a
 * __cuda_array_interface__ producer's stream before the run's. An event
 * token remembers the stream it was recorded on. */
#define MAX_WAITS 64
static void *g_event_stream[MAX_WAITS];
static int g_event_used[MAX_WAITS];
static long long g_waits[MAX_WAITS][2];
static int g_wait_count;
static int g_live_events;

__attribute__((visibility("default"))) CUresult cuEventCreate(void **event, unsigned flags) {
    (void)flags;
    if (!g_depth) return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < MAX_WAITS; ++i) {
        if (!g_event_used[i]) {
            g_event_used[i] = 1;
            g_event_stream[i] = NULL;
            *event = &g_event_used[i];
            ++g_live_events;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}
static int event_index(void *event) {
    long i = (int *)event - g_event_used;
    return i >= 0 && i < MAX_WAITS && g_event_used[i] ? (int)i : -1;
}
__attribute__((visibility("default"))) CUresult cuEventRecord(void *event, CUstream s) {
    int i = event_index(event);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE;
    g_event_stream[i] = s;
    return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuStreamWaitEvent(CUstream s, void *event, unsigned flags) {
    int i = event_index(event);
    if (i < 0 || flags || g_wait_count == MAX_WAITS) return CUDA_ERROR_INVALID_VALUE;
    g_waits[g_wait_count][0] = (long long)(uintptr_t)s;
    g_waits[g_wait_count][1] = (long long)(uintptr_t)g_event_stream[i];
    ++g_wait_count;
    return CUDA_SUCCESS;
}
__attribute__((visibility("default"))) CUresult cuEventDestroy_v2(void *event) {
    int i = event_index(event);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE;
    g_event_used[i] = 0;
    --g_live_events;
    return CUDA_SUCCESS;
}

/* Inspection helpers for the tests. */
__attribute__((visibility("default"))) int fake_cuda_stream_waits(long long out[][2]) {
    memcpy(out, g_waits, sizeof g_waits[0] * (size_t)g_wait_count);
    return g_wait_count;
}
__attribute__((visibility("default"))) int fake_cuda_live_events(void) { return g_live_events; }
__attribute__((visibility("default"))) long fake_cuda_launches(void) {
    return __atomic_load_n(&g_launches, __ATOMIC_SEQ_CST);
}
__attribute__((visibility("default"))) void *fake_cuda_last_stream(void) { return g_last_stream; }
__attribute__((visibility("default"))) void fake_cuda_last_grid(unsigned out[3]) {
    memcpy(out, g_last_grid, sizeof g_last_grid);
}
/* Makes device `ordinal`'s context current on this thread (-1: none). */
__attribute__((visibility("default"))) int fake_cuda_set_current(int ordinal) {
    g_depth = 0;
    if (ordinal < 0) return 0;
    if (ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    g_stack[g_depth++] = &g_ctx_tokens[ordinal];
    return 0;
}
