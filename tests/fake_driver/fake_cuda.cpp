// A fake CUDA driver for CPU tests of plan creation and fmha_run: libfmha
// opens it through FMHA_LIBCUDA and fetches every entry point with
// cuGetProcAddress_v2, as it would from libcuda.so.1. Nothing runs; each call
// is checked the way a real driver would check it, and recorded.
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_cuda.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Ctx {
    int device;
    unsigned long long id;
};

struct Module {
    const unsigned char *image;
    size_t size;
    bool ptx;
    Ctx *ctx;
};

struct Function {
    Module *module;
    std::string name;
    int max_dynamic_smem = 0;
};

struct State {
    std::mutex mu;
    std::condition_variable loads_changed;  // with mu: loads_in_progress moved
    int sm = 80, devices = 1, sms = 132, smem_optin = 227 * 1024, driver_version = 12080;
    int smem_per_sm = 0;  // 0: the attribute reads 0, as for one the driver does not know
    int load_rendezvous = 0, loads_in_progress = 0;
    std::string fail_entry;
    CUresult fail_result = CUDA_SUCCESS;
    fake_cuda_stats stats{};
    fake_cuda_launch last{};
    bool has_last = false;
    fake_cuda_launch previous{};  // the launch before `last`
    bool has_previous = false;
    Ctx primary[8] = {{0, 101}, {1, 102}, {2, 103}, {3, 104},
                      {4, 105}, {5, 106}, {6, 107}, {7, 108}};
    std::atomic<int> in_run{0};
    // What the driver owns (a real one frees it with its context): kept
    // here, so a leak checker sees it reachable rather than lost.
    std::vector<std::unique_ptr<Module>> modules;
    std::vector<std::unique_ptr<Function>> functions;
    std::vector<std::unique_ptr<Ctx>> contexts;
};

// Hands `object` to the state that owns it and returns it.
template <typename T>
T *owned(std::vector<std::unique_ptr<T>> &owner, std::unique_ptr<T> object) {
    owner.push_back(std::move(object));
    return owner.back().get();
}

State &st() {
    static State *s = new State;  // never destroyed: calls may come at exit
    return *s;
}

thread_local std::vector<Ctx *> t_stack;

// Returns the configured failure for this entry point, or CUDA_SUCCESS; also
// notes calls that fmha_run must not make.
CUresult enter(const char *name, bool allowed_in_run) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!allowed_in_run && s.in_run.load()) {
        ++s.stats.calls_in_run_not_allowed;
        std::snprintf(s.stats.last_not_allowed, sizeof s.stats.last_not_allowed, "%s", name);
    }
    if (!s.fail_entry.empty() && s.fail_entry == name) return s.fail_result;
    return CUDA_SUCCESS;
}

#define ENTER(name, allowed)                          \
    do {                                              \
        CUresult fake_r_ = enter(name, allowed);      \
        if (fake_r_ != CUDA_SUCCESS) return fake_r_;  \
    } while (0)

CUresult init(unsigned int flags) {
    ENTER("cuInit", false);
    std::lock_guard<std::mutex> lock(st().mu);
    ++st().stats.init_calls;
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult driver_get_version(int *v) {
    ENTER("cuDriverGetVersion", false);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = st().driver_version;
    return CUDA_SUCCESS;
}

CUresult get_error_name(CUresult r, const char **out) {
    static const struct {
        CUresult r;
        const char *name;
    } names[] = {{CUDA_SUCCESS, "CUDA_SUCCESS"},
                 {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
                 {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
                 {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
                 {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
                 {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
                 {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
                 {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
                 {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
                 {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
                 {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
                 {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"}};
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (const auto &n : names)
        if (n.r == r) {
            *out = n.name;
            return CUDA_SUCCESS;
        }
    *out = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult get_error_string(CUresult r, const char **out) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    const char *name = nullptr;
    CUresult res = get_error_name(r, &name);
    *out = name ? "error reported by the fake CUDA driver" : nullptr;
    return res;
}

CUresult device_get_count(int *n) {
    ENTER("cuDeviceGetCount", false);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = st().devices;
    return CUDA_SUCCESS;
}

CUresult device_get(CUdevice *dev, int ordinal) {
    ENTER("cuDeviceGet", false);
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= st().devices) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult device_get_attribute(int *v, CUdevice_attribute attr, CUdevice dev) {
    ENTER("cuDeviceGetAttribute", false);
    State &s = st();
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = s.sm / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = s.sm % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = s.sms; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = s.smem_optin; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = s.smem_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult primary_ctx_retain(CUcontext *ctx, CUdevice dev) {
    ENTER("cuDevicePrimaryCtxRetain", false);
    State &s = st();
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= s.devices || dev >= 8) return CUDA_ERROR_INVALID_DEVICE;
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.primary_retained;
    *ctx = reinterpret_cast<CUcontext>(&s.primary[dev]);
    return CUDA_SUCCESS;
}

CUresult primary_ctx_release(CUdevice dev) {
    ENTER("cuDevicePrimaryCtxRelease", false);
    State &s = st();
    if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
    std::lock_guard<std::mutex> lock(s.mu);
    --s.stats.primary_retained;
    return CUDA_SUCCESS;
}

CUresult ctx_get_current(CUcontext *ctx) {
    ENTER("cuCtxGetCurrent", true);
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = t_stack.empty() ? nullptr : reinterpret_cast<CUcontext>(t_stack.back());
    return CUDA_SUCCESS;
}

CUresult ctx_push_current(CUcontext ctx) {
    ENTER("cuCtxPushCurrent", true);
    if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
    t_stack.push_back(reinterpret_cast<Ctx *>(ctx));
    std::lock_guard<std::mutex> lock(st().mu);
    ++st().stats.context_pushes;
    return CUDA_SUCCESS;
}

CUresult ctx_pop_current(CUcontext *ctx) {
    ENTER("cuCtxPopCurrent", true);
    if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx) *ctx = reinterpret_cast<CUcontext>(t_stack.back());
    t_stack.pop_back();
    std::lock_guard<std::mutex> lock(st().mu);
    ++st().stats.context_pops;
    return CUDA_SUCCESS;
}

CUresult ctx_get_device(CUdevice *dev) {
    ENTER("cuCtxGetDevice", true);
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    *dev = t_stack.back()->device;
    return CUDA_SUCCESS;
}

CUresult ctx_get_id(CUcontext ctx, unsigned long long *id) {
    ENTER("cuCtxGetId", true);
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    Ctx *c = ctx ? reinterpret_cast<Ctx *>(ctx) : (t_stack.empty() ? nullptr : t_stack.back());
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *id = c->id;
    return CUDA_SUCCESS;
}

// Size of an ELF image from its section table (cubins are ELF64).
size_t elf_size(const unsigned char *p) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    std::memcpy(&shoff, p + 0x28, 8);
    std::memcpy(&shentsize, p + 0x3A, 2);
    std::memcpy(&shnum, p + 0x3C, 2);
    size_t end = size_t(shoff) + size_t(shentsize) * shnum;
    for (uint16_t i = 0; i < shnum; ++i) {
        const unsigned char *sh = p + shoff + size_t(i) * shentsize;
        uint32_t type;
        uint64_t off, size;
        std::memcpy(&type, sh + 4, 4);
        std::memcpy(&off, sh + 0x18, 8);
        std::memcpy(&size, sh + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off + size > end) end = size_t(off + size);
    }
    return end;
}

CUresult module_load_data_ex(CUmodule *mod, const void *image, unsigned int, CUjit_option *,
                             void **) {
    ENTER("cuModuleLoadDataEx", false);
    if (!mod || !image) return CUDA_ERROR_INVALID_VALUE;
    if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    auto *p = static_cast<const unsigned char *>(image);
    auto m = std::make_unique<Module>(Module{p, 0, false, t_stack.back()});
    if (std::memcmp(p, "\x7f" "ELF", 4) == 0) {
        if (p[4] != 2) return CUDA_ERROR_INVALID_IMAGE;  // ELFCLASS64
        m->size = elf_size(p);
    } else {
        m->size = std::strlen(reinterpret_cast<const char *>(p));
        const std::string text(reinterpret_cast<const char *>(p), m->size);
        if (text.find(".version") == std::string::npos || text.find(".target") == std::string::npos)
            return CUDA_ERROR_INVALID_IMAGE;
        m->ptx = true;
    }
    State &s = st();
    std::unique_lock<std::mutex> lock(s.mu);
    ++s.loads_in_progress;
    if (s.loads_in_progress > s.stats.max_concurrent_loads)
        s.stats.max_concurrent_loads = s.loads_in_progress;
    s.loads_changed.notify_all();
    // A test of concurrent loads: wait for the others (a caller that
    // serializes loads makes this time out, and the maximum stays low).
    s.loads_changed.wait_for(lock, std::chrono::seconds(2),
                             [&] { return s.loads_in_progress >= s.load_rendezvous; });
    --s.loads_in_progress;
    ++s.stats.module_loads;
    if (m->ptx) ++s.stats.module_loads_ptx;
    *mod = reinterpret_cast<CUmodule>(owned(st().modules, std::move(m)));
    return CUDA_SUCCESS;
}

bool ident_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// True when `name` occurs in the image as a whole identifier.
bool image_has(const Module &m, const char *name) {
    const size_t n = std::strlen(name);
    if (n == 0 || n > m.size) return false;
    for (size_t i = 0; i + n <= m.size; ++i) {
        if (m.image[i] != static_cast<unsigned char>(name[0])) continue;
        if (std::memcmp(m.image + i, name, n) != 0) continue;
        const bool left = i == 0 || !ident_char(m.image[i - 1]);
        const bool right = i + n == m.size || !ident_char(m.image[i + n]);
        if (left && right) return true;
    }
    return false;
}

CUresult module_get_function(CUfunction *fn, CUmodule mod, const char *name) {
    ENTER("cuModuleGetFunction", false);
    if (!fn || !mod || !name) return CUDA_ERROR_INVALID_VALUE;
    auto *m = reinterpret_cast<Module *>(mod);
    if (!image_has(*m, name)) return CUDA_ERROR_NOT_FOUND;
    std::lock_guard<std::mutex> lock(st().mu);
    ++st().stats.function_lookups;
    *fn = reinterpret_cast<CUfunction>(
        owned(st().functions, std::make_unique<Function>(Function{m, name})));
    return CUDA_SUCCESS;
}

CUresult func_set_attribute(CUfunction fn, CUfunction_attribute attr, int value) {
    ENTER("cuFuncSetAttribute", false);
    if (!fn) return CUDA_ERROR_INVALID_HANDLE;
    auto *f = reinterpret_cast<Function *>(fn);
    if (attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (value < 0 || value > st().smem_optin) return CUDA_ERROR_INVALID_VALUE;
        f->max_dynamic_smem = value;
    }
    return CUDA_SUCCESS;
}

// Checks and records one launch (both entry points).
CUresult record_launch(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, CUstream stream, void **params,
                       void **extra, int programmatic, const unsigned (&cluster)[3]) {
    if (!fn) return CUDA_ERROR_INVALID_HANDLE;
    if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    auto *f = reinterpret_cast<Function *>(fn);
    if (f->module->ctx != t_stack.back()) return CUDA_ERROR_INVALID_HANDLE;  // other context
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return CUDA_ERROR_INVALID_VALUE;
    if (gx > 0x7FFFFFFFu || gy > 65535 || gz > 65535) return CUDA_ERROR_INVALID_VALUE;
    if (uint64_t(bx) * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
    if (smem > 48 * 1024 && int(smem) > f->max_dynamic_smem) return CUDA_ERROR_INVALID_VALUE;
    if (int(smem) > st().smem_optin) return CUDA_ERROR_INVALID_VALUE;
    if (!params && !extra) return CUDA_ERROR_INVALID_VALUE;
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    if (programmatic && s.sm < 90) return CUDA_ERROR_NOT_SUPPORTED;  // PDL is sm_90+
    const bool clustered = cluster[0] * cluster[1] * cluster[2] > 1;
    if (clustered && s.sm < 90) return CUDA_ERROR_NOT_SUPPORTED;  // clusters are sm_90+
    // A cluster tiles the grid; 8 CTAs is the portable maximum.
    if (gx % cluster[0] != 0 || gy % cluster[1] != 0 || gz % cluster[2] != 0 ||
        cluster[0] * cluster[1] * cluster[2] > 8)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    // Cluster instructions exist from sm_90 on: PTX of an older virtual arch
    // cannot hold them (a cubin's target is not visible here).
    if (clustered && f->module->ptx && !image_has(*f->module, "barrier.cluster"))
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    // Only PTX is text to look into; a cubin for sm_90+ is built from the
    // same source with the wait compiled in.
    if (programmatic && f->module->ptx && !image_has(*f->module, "griddepcontrol.wait"))
        ++s.stats.programmatic_without_wait;
    ++s.stats.launches;
    s.previous = s.last;
    s.has_previous = s.has_last;
    fake_cuda_launch &l = s.last;
    std::snprintf(l.kernel, sizeof l.kernel, "%s", f->name.c_str());
    l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
    l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
    l.shared_bytes = smem;
    l.stream = stream;
    l.context = t_stack.back();
    l.max_dynamic_smem = f->max_dynamic_smem;
    l.programmatic = programmatic;
    for (int i = 0; i < 3; ++i) l.cluster[i] = cluster[i];
    s.has_last = true;
    return CUDA_SUCCESS;
}

CUresult launch_kernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, CUstream stream, void **params,
                       void **extra) {
    ENTER("cuLaunchKernel", true);
    const unsigned no_cluster[3] = {1, 1, 1};
    return record_launch(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra, 0, no_cluster);
}

// The library sets programmatic stream serialization and a cluster dimension.
CUresult launch_kernel_ex(const CUlaunchConfig *config, CUfunction fn, void **params,
                          void **extra) {
    ENTER("cuLaunchKernelEx", true);
    if (!config || (config->numAttrs > 0 && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
    int programmatic = 0;
    unsigned cluster[3] = {1, 1, 1};
    for (unsigned i = 0; i < config->numAttrs; ++i) {
        const CUlaunchAttribute &a = config->attrs[i];
        if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
            programmatic = a.value.programmaticStreamSerializationAllowed ? 1 : 0;
        } else if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            cluster[0] = a.value.clusterDim.x, cluster[1] = a.value.clusterDim.y,
            cluster[2] = a.value.clusterDim.z;
            if (cluster[0] == 0 || cluster[1] == 0 || cluster[2] == 0) return CUDA_ERROR_INVALID_VALUE;
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return record_launch(fn, config->gridDimX, config->gridDimY, config->gridDimZ,
                         config->blockDimX, config->blockDimY, config->blockDimZ,
                         config->sharedMemBytes, config->hStream, params, extra, programmatic,
                         cluster);
}

// The documented constraints of cuTensorMapEncodeTiled.
CUresult tensor_map_encode_tiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                 void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                                 const cuuint32_t *box, const cuuint32_t *estrides,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
    ENTER("cuTensorMapEncodeTiled", true);
    auto bad = [] {
        std::lock_guard<std::mutex> lock(st().mu);
        ++st().stats.tensor_map_errors;
        return CUDA_ERROR_INVALID_VALUE;
    };
    if (!map || reinterpret_cast<uintptr_t>(map) % 64 != 0) return bad();
    if (rank < 1 || rank > 5 || !dims || !box || !estrides) return bad();
    if (rank > 1 && !strides) return bad();
    if (!addr || reinterpret_cast<uintptr_t>(addr) % 16 != 0) return bad();
    size_t elem = 0;
    switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16: elem = 2; break;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: elem = 4; break;
    default: return bad();
    }
    for (cuuint32_t i = 0; i < rank; ++i) {
        if (dims[i] == 0 || dims[i] > (cuuint64_t(1) << 32)) return bad();
        if (box[i] == 0 || box[i] > 256) return bad();
        if (estrides[i] == 0 || estrides[i] > 8) return bad();
    }
    for (cuuint32_t i = 0; i + 1 < rank; ++i)
        if (strides[i] % 16 != 0 || strides[i] >= (cuuint64_t(1) << 40)) return bad();
    if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE) {
        if ((box[0] * elem) % 16 != 0) return bad();
        const size_t inner = box[0] * elem;
        if (swizzle == CU_TENSOR_MAP_SWIZZLE_32B && inner > 32) return bad();
        if (swizzle == CU_TENSOR_MAP_SWIZZLE_64B && inner > 64) return bad();
        if (swizzle == CU_TENSOR_MAP_SWIZZLE_128B && inner > 128) return bad();
    }
    std::memset(map, 0, sizeof *map);
    std::lock_guard<std::mutex> lock(st().mu);
    fake_cuda_tensor_map &rec = st().stats.maps[st().stats.tensor_maps % FAKE_CUDA_MAP_RING];
    rec = fake_cuda_tensor_map{};
    rec.rank = rank;
    for (cuuint32_t i = 0; i < rank; ++i) {
        rec.dims[i] = dims[i];
        rec.box[i] = box[i];
        if (i + 1 < rank) rec.strides[i] = strides[i];
    }
    ++st().stats.tensor_maps;
    return CUDA_SUCCESS;
}

const struct {
    const char *name;
    void *fn;
} kEntryPoints[] = {
    {"cuInit", reinterpret_cast<void *>(&init)},
    {"cuDriverGetVersion", reinterpret_cast<void *>(&driver_get_version)},
    {"cuGetErrorName", reinterpret_cast<void *>(&get_error_name)},
    {"cuGetErrorString", reinterpret_cast<void *>(&get_error_string)},
    {"cuDeviceGetCount", reinterpret_cast<void *>(&device_get_count)},
    {"cuDeviceGet", reinterpret_cast<void *>(&device_get)},
    {"cuDeviceGetAttribute", reinterpret_cast<void *>(&device_get_attribute)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void *>(&primary_ctx_retain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void *>(&primary_ctx_release)},
    {"cuCtxGetCurrent", reinterpret_cast<void *>(&ctx_get_current)},
    {"cuCtxPushCurrent", reinterpret_cast<void *>(&ctx_push_current)},
    {"cuCtxPopCurrent", reinterpret_cast<void *>(&ctx_pop_current)},
    {"cuCtxGetDevice", reinterpret_cast<void *>(&ctx_get_device)},
    {"cuCtxGetId", reinterpret_cast<void *>(&ctx_get_id)},
    {"cuModuleLoadDataEx", reinterpret_cast<void *>(&module_load_data_ex)},
    {"cuModuleGetFunction", reinterpret_cast<void *>(&module_get_function)},
    {"cuFuncSetAttribute", reinterpret_cast<void *>(&func_set_attribute)},
    {"cuLaunchKernel", reinterpret_cast<void *>(&launch_kernel)},
    {"cuLaunchKernelEx", reinterpret_cast<void *>(&launch_kernel_ex)},
    {"cuTensorMapEncodeTiled", reinterpret_cast<void *>(&tensor_map_encode_tiled)},
};

}  // namespace

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult *status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    for (const auto &e : kEntryPoints)
        if (std::strcmp(e.name, symbol) == 0) {
            *pfn = e.fn;
            if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    *pfn = nullptr;
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT void fake_cuda_reset(void) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    s.sm = 80, s.devices = 1, s.sms = 132, s.smem_optin = 227 * 1024, s.smem_per_sm = 0;
    s.load_rendezvous = 0;
    s.fail_entry.clear();
    s.fail_result = CUDA_SUCCESS;
    const int retained = s.stats.primary_retained;  // a balance, not a counter
    s.stats = fake_cuda_stats{};
    s.stats.primary_retained = retained;
    s.has_last = false;
    s.has_previous = false;
    s.in_run = 0;
}

FAKE_EXPORT void fake_cuda_configure(const char *key, long long value) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    const std::string k = key ? key : "";
    if (k == "sm") s.sm = int(value);
    else if (k == "devices") s.devices = int(value);
    else if (k == "sms") s.sms = int(value);
    else if (k == "smem_optin") s.smem_optin = int(value);
    else if (k == "smem_per_sm") s.smem_per_sm = int(value);
    else if (k == "driver_version") s.driver_version = int(value);
    else if (k == "load_rendezvous") s.load_rendezvous = int(value);
}

FAKE_EXPORT void fake_cuda_fail(const char *entry, int result) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    s.fail_entry = entry ? entry : "";
    s.fail_result = static_cast<CUresult>(result);
}

FAKE_EXPORT void fake_cuda_get_stats(fake_cuda_stats *out) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    *out = s.stats;
}

FAKE_EXPORT int fake_cuda_last_launch(fake_cuda_launch *out) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.has_last) return 0;
    *out = s.last;
    return 1;
}

FAKE_EXPORT int fake_cuda_previous_launch(fake_cuda_launch *out) {
    State &s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.has_previous) return 0;
    *out = s.previous;
    return 1;
}

FAKE_EXPORT void fake_cuda_set_in_run(int in_run) { st().in_run = in_run; }

FAKE_EXPORT void *fake_cuda_context(int device, int id) {
    std::lock_guard<std::mutex> lock(st().mu);
    return owned(st().contexts,
                 std::make_unique<Ctx>(Ctx{device, static_cast<unsigned long long>(1000 + id)}));
}

FAKE_EXPORT void fake_cuda_push(void *ctx) { t_stack.push_back(static_cast<Ctx *>(ctx)); }

FAKE_EXPORT void fake_cuda_pop(void) {
    if (!t_stack.empty()) t_stack.pop_back();
}
