// Device buffers with NaN guard bands on both sides, through the CUDA runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace fmha_test {

// Throws std::runtime_error naming the call when a CUDA runtime call fails.
void cuda_check(int error, const char *what);
#define FMHA_TEST_CUDA(call) ::fmha_test::cuda_check(static_cast<int>(call), #call)

// `elems` elements of `elem_bytes` (2 or 4) bytes, with kGuardElems elements
// before and after, filled with a guard pattern. data() is 256-byte aligned
// plus the guard (1 KiB or 2 KiB), so 16-byte aligned.
class DeviceBuffer {
public:
    static constexpr size_t kGuardElems = 512;

    DeviceBuffer() = default;
    DeviceBuffer(size_t elems, size_t elem_bytes, uint32_t guard_pattern);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer &&other) noexcept;
    DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;

    void *data() const { return static_cast<char *>(base_) + kGuardElems * elem_bytes_; }
    size_t elems() const { return elems_; }
    size_t bytes() const { return elems_ * elem_bytes_; }

    // Synchronous copies of the payload (not the guards).
    void upload(const void *host);
    void download(void *host) const;
    // Fills the payload with a repeated 16- or 32-bit pattern (synchronous).
    void fill(uint32_t pattern);

    // True when both guard bands still hold the pattern; otherwise `why`
    // says where the first changed element is.
    bool guards_intact(std::string *why) const;

private:
    void release();
    void *base_ = nullptr;
    size_t elems_ = 0, elem_bytes_ = 2;
    uint32_t guard_ = 0;
};

// An int32 array (lengths, a block table) copied into a new buffer whose
// guard bands hold `guard_pattern`.
DeviceBuffer int32_buffer(const std::vector<int32_t> &host, uint32_t guard_pattern);

// A buffer with the name a failure message uses.
struct NamedBuffer {
    const char *name;
    const DeviceBuffer *buf;
};

// True when every non-empty buffer's guard bands hold; otherwise `why`
// names the first buffer that changed and where.
bool all_guards_intact(std::initializer_list<NamedBuffer> buffers, std::string *why);

// Host vector of `n` copies of a 16-/32-bit pattern as raw bytes.
std::vector<unsigned char> pattern_bytes(size_t elems, size_t elem_bytes, uint32_t pattern);

}  // namespace fmha_test
