#include "fmha_test/sparse_memory.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "fmha_test/buffers.h"

namespace fmha_test {
namespace {

// The driver calls, through the runtime's entry-point query: the test
// programs link only the (static) runtime, which opens libcuda itself.
struct VmmCalls {
    CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *,
                            CUmemAllocationGranularity_flags);
    CUresult (*memset_d16)(CUdeviceptr, unsigned short, size_t);
    CUresult (*error_name)(CUresult, const char **);
};

template <typename Fn>
void load(Fn *fn, const char *symbol) {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    FMHA_TEST_CUDA(cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found));
    if (p == nullptr || found != cudaDriverEntryPointSuccess)
        throw std::runtime_error(std::string("driver entry point ") + symbol + " not found");
    *fn = reinterpret_cast<Fn>(p);
}

const VmmCalls &vmm() {
    static const VmmCalls calls = [] {
        VmmCalls c{};
        load(&c.address_reserve, "cuMemAddressReserve");
        load(&c.address_free, "cuMemAddressFree");
        load(&c.create, "cuMemCreate");
        load(&c.release, "cuMemRelease");
        load(&c.map, "cuMemMap");
        load(&c.unmap, "cuMemUnmap");
        load(&c.set_access, "cuMemSetAccess");
        load(&c.granularity, "cuMemGetAllocationGranularity");
        load(&c.memset_d16, "cuMemsetD16");
        load(&c.error_name, "cuGetErrorName");
        return c;
    }();
    return calls;
}

void check(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS) return;
    const char *name = "?";
    vmm().error_name(r, &name);
    throw std::runtime_error(std::string(what) + " failed: " + name);
}

CUmemAllocationProp device_memory() {
    int dev = 0;
    FMHA_TEST_CUDA(cudaGetDevice(&dev));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

}  // namespace

SparseDeviceRange::SparseDeviceRange(uint64_t bytes, const std::vector<Piece> &wanted) {
    FMHA_TEST_CUDA(cudaFree(nullptr));  // the primary context the driver calls act in
    const VmmCalls &v = vmm();
    const CUmemAllocationProp prop = device_memory();
    size_t gran = 0;
    check(v.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity");
    size_ = (bytes + gran - 1) / gran * gran;
    // Widen each piece to the granularity, then merge overlapping and adjacent ones.
    std::vector<Piece> w;
    for (const Piece &p : wanted) {
        if (p.bytes == 0) continue;
        if (p.offset + p.bytes > size_ || p.offset + p.bytes < p.offset)
            throw std::invalid_argument("SparseDeviceRange: piece past the range");
        const uint64_t lo = p.offset / gran * gran;
        const uint64_t hi = (p.offset + p.bytes + gran - 1) / gran * gran;
        w.push_back({lo, hi - lo});
    }
    std::sort(w.begin(), w.end(),
              [](const Piece &a, const Piece &b) { return a.offset < b.offset; });
    for (const Piece &p : w) {
        if (!pieces_.empty() && p.offset <= pieces_.back().offset + pieces_.back().bytes) {
            Piece &last = pieces_.back();
            last.bytes = std::max(last.offset + last.bytes, p.offset + p.bytes) - last.offset;
        } else {
            pieces_.push_back(p);
        }
    }
    CUdeviceptr base = 0;
    check(v.address_reserve(&base, size_, 0, 0, 0), "cuMemAddressReserve");
    base_ = reinterpret_cast<char *>(base);
    try {
        CUmemAccessDesc access{};
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        for (const Piece &p : pieces_) {
            CUmemGenericAllocationHandle h = 0;
            check(v.create(&h, p.bytes, &prop, 0), "cuMemCreate");
            handles_.push_back(h);
            check(v.map(base + p.offset, p.bytes, 0, h, 0), "cuMemMap");
            ++mapped_;
            check(v.set_access(base + p.offset, p.bytes, &access, 1), "cuMemSetAccess");
        }
    } catch (...) {
        release();
        throw;
    }
}

SparseDeviceRange::~SparseDeviceRange() { release(); }

void SparseDeviceRange::release() {
    if (base_ == nullptr) return;
    const VmmCalls &v = vmm();
    // Unmapping waits for no work: finish what may still use the memory.
    cudaDeviceSynchronize();
    const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(base_);
    for (size_t i = 0; i < mapped_; ++i) v.unmap(base + pieces_[i].offset, pieces_[i].bytes);
    for (unsigned long long h : handles_) v.release(h);
    v.address_free(base, size_);
    base_ = nullptr;
    handles_.clear();
    mapped_ = 0;
}

void SparseDeviceRange::fill16(uint16_t pattern) {
    for (const Piece &p : pieces_)
        check(vmm().memset_d16(reinterpret_cast<CUdeviceptr>(base_ + p.offset), pattern,
                               p.bytes / 2),
              "cuMemsetD16");
    FMHA_TEST_CUDA(cudaDeviceSynchronize());
}

// Complete when they return (as DeviceBuffer's copies): a cudaMemcpy from
// pageable memory may return before its DMA lands.
void SparseDeviceRange::upload(uint64_t offset, const void *host, size_t bytes) {
    FMHA_TEST_CUDA(cudaMemcpyAsync(base_ + offset, host, bytes, cudaMemcpyHostToDevice,
                                   cudaStreamPerThread));
    FMHA_TEST_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
}

void SparseDeviceRange::download(uint64_t offset, void *host, size_t bytes) const {
    FMHA_TEST_CUDA(cudaMemcpyAsync(host, base_ + offset, bytes, cudaMemcpyDeviceToHost,
                                   cudaStreamPerThread));
    FMHA_TEST_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
}

}  // namespace fmha_test
