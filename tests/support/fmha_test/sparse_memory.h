// A device address range of which only some pieces have memory behind them
// (the driver's virtual memory management: cuMemAddressReserve, cuMemCreate,
// cuMemMap). It lets a test place tensor elements hundreds of GiB apart at
// the cost of the pieces alone, and an access anywhere else in the range
// faults, so a kernel that forms a wrong address (a 32-bit offset that
// wrapped, say) is caught even where the address lands in no buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fmha_test {

class SparseDeviceRange {
public:
    struct Piece {
        uint64_t offset, bytes;  // from base()
    };

    // Reserves `bytes` of device address space and backs the union of
    // `wanted`, each widened to the allocation granularity (2 MiB on current
    // GPUs), with memory of the current device, readable and writable.
    // Throws std::runtime_error naming the driver call that failed.
    SparseDeviceRange(uint64_t bytes, const std::vector<Piece> &wanted);
    ~SparseDeviceRange();
    SparseDeviceRange(const SparseDeviceRange &) = delete;
    SparseDeviceRange &operator=(const SparseDeviceRange &) = delete;

    char *base() const { return base_; }
    uint64_t size() const { return size_; }
    // The backed pieces, widened and merged, in address order.
    const std::vector<Piece> &pieces() const { return pieces_; }

    // Fills every backed piece with a 16-bit pattern (synchronous).
    void fill16(uint16_t pattern);
    // Synchronous copies; the range [offset, offset + bytes) must be backed.
    void upload(uint64_t offset, const void *host, size_t bytes);
    void download(uint64_t offset, void *host, size_t bytes) const;

private:
    void release();
    char *base_ = nullptr;
    uint64_t size_ = 0;
    std::vector<Piece> pieces_;
    std::vector<unsigned long long> handles_;  // one allocation per piece
    size_t mapped_ = 0;                        // pieces mapped so far
};

}  // namespace fmha_test
