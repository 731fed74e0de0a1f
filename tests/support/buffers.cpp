#include "fmha_test/buffers.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <utility>

namespace fmha_test {

void cuda_check(int error, const char *what) {
    if (error == cudaSuccess) return;
    auto e = static_cast<cudaError_t>(error);
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

namespace {

// A copy that has completed when it returns. A plain cudaMemcpy from pageable
// memory may return before the DMA lands, which would race with a kernel
// launched right after on a non-blocking stream.
void copy_complete(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    FMHA_TEST_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamPerThread));
    FMHA_TEST_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
}

}  // namespace

std::vector<unsigned char> pattern_bytes(size_t elems, size_t elem_bytes, uint32_t pattern) {
    std::vector<unsigned char> v(elems * elem_bytes);
    if (elem_bytes == 2) {
        uint16_t p = uint16_t(pattern);
        for (size_t i = 0; i < elems; ++i) std::memcpy(&v[i * 2], &p, 2);
    } else {
        for (size_t i = 0; i < elems; ++i) std::memcpy(&v[i * 4], &pattern, 4);
    }
    return v;
}

DeviceBuffer::DeviceBuffer(size_t elems, size_t elem_bytes, uint32_t guard_pattern)
    : elems_(elems), elem_bytes_(elem_bytes), guard_(guard_pattern) {
    if (elem_bytes != 2 && elem_bytes != 4)
        throw std::invalid_argument("DeviceBuffer: element size must be 2 or 4 bytes");
    const size_t total = elems + 2 * kGuardElems;
    FMHA_TEST_CUDA(cudaMalloc(&base_, total * elem_bytes));
    std::vector<unsigned char> host = pattern_bytes(total, elem_bytes, guard_pattern);
    copy_complete(base_, host.data(), host.size(), cudaMemcpyHostToDevice);
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() {
    if (base_ != nullptr) cudaFree(base_);
    base_ = nullptr;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&o) noexcept
    : base_(std::exchange(o.base_, nullptr)), elems_(o.elems_), elem_bytes_(o.elem_bytes_),
      guard_(o.guard_) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
    if (this != &o) {
        release();
        base_ = std::exchange(o.base_, nullptr);
        elems_ = o.elems_;
        elem_bytes_ = o.elem_bytes_;
        guard_ = o.guard_;
    }
    return *this;
}

void DeviceBuffer::upload(const void *host) {
    copy_complete(data(), host, bytes(), cudaMemcpyHostToDevice);
}

void DeviceBuffer::download(void *host) const {
    copy_complete(host, data(), bytes(), cudaMemcpyDeviceToHost);
}

void DeviceBuffer::fill(uint32_t pattern) {
    std::vector<unsigned char> host = pattern_bytes(elems_, elem_bytes_, pattern);
    upload(host.data());
}

bool DeviceBuffer::guards_intact(std::string *why) const {
    const size_t guard_bytes = kGuardElems * elem_bytes_;
    std::vector<unsigned char> expect = pattern_bytes(kGuardElems, elem_bytes_, guard_);
    std::vector<unsigned char> got(guard_bytes);
    const struct {
        const char *side;
        const char *ptr;
    } bands[] = {{"before", static_cast<const char *>(base_)},
                 {"after", static_cast<const char *>(data()) + bytes()}};
    for (const auto &band : bands) {
        copy_complete(got.data(), band.ptr, guard_bytes, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < guard_bytes; i += elem_bytes_) {
            if (std::memcmp(&got[i], &expect[i], elem_bytes_) != 0) {
                if (why) {
                    size_t e = i / elem_bytes_;
                    *why = std::string("guard element ") +
                           std::to_string(band.side[0] == 'b' ? kGuardElems - e : e + 1) + " " +
                           band.side + " the buffer was overwritten";
                }
                return false;
            }
        }
    }
    return true;
}

bool all_guards_intact(std::initializer_list<NamedBuffer> buffers, std::string *why) {
    for (const NamedBuffer &b : buffers) {
        if (b.buf->elems() == 0) continue;
        std::string w;
        if (!b.buf->guards_intact(&w)) {
            if (why) *why = std::string(b.name) + ": " + w;
            return false;
        }
    }
    return true;
}

DeviceBuffer int32_buffer(const std::vector<int32_t> &host, uint32_t guard_pattern) {
    DeviceBuffer buf(host.size(), 4, guard_pattern);
    if (!host.empty()) buf.upload(host.data());
    return buf;
}

}  // namespace fmha_test
