// Hopper forward kernel, `_gather` entry points: K and V of a paged cache
// whose pages no TMA box fits (1-15 rows, or no 16-row divisor) copied row by
// row by the producer warpgroup with cp.async, into the same 128-byte-swizzled
// stage layout the TMA boxes fill, so the consumers run unchanged.
#pragma once
#include <stdint.h>

#include "kernels/fast_divide.h"
#include "kernels/params.h"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/mma_sync.cuh"
#include "kernels/sequence.cuh"
#include "kernels/tile_traits.h"

namespace fmha::sm90 {

// Where the rows of one key tile live. Producer warp w copies the tile's rows
// [w * BN/4, (w + 1) * BN/4); lane l of it holds the page and row in the page
// of the warp's row sm90_gather_held_row(l) (lanes past the warp's rows hold
// nothing). The table entry stays raw until the copies (clamped there), so
// its load is not waited for early.
struct GatherRows {
    int entry;    // block-table entry of the row's page
    int in_page;  // row within that page
};

// Looks up key tile j's rows. Keys past the sequence's last read that key:
// they are masked, and their V rows zeroed by the consumers (zero_v_tail).
template <typename Cfg>
__device__ __forceinline__ GatherRows look_up_rows(const FwdParams &p, int len_k, int batch,
                                                   int j, int tid) {
    constexpr int kRowsPerWarp = Cfg::BN / 4;
    const int lane = tid % 32;
    const int held = sm90_gather_held_row(Cfg::Dp, lane);
    GatherRows rows{0, 0};
    if (held < kRowsPerWarp) {
        const int key = min(j * Cfg::BN + (tid / 32) * kRowsPerWarp + held, len_k - 1);
        const int block = fast_divide(key, p.page_div);
        rows.in_page = key - block * p.page_size;
        rows.entry = __ldg(p.block_table + int64_t(batch) * p.max_pages_per_seq + block);
    }
    return rows;
}

// Copies this thread's part of one K or V tile into `stage`, laid out as the
// TMA boxes lay it (sm90_gather_first_copy in tile_traits.h), then arrives
// on `full` when its copies land. Columns past the head dim (hd96 in 128)
// are zero-filled.
template <typename Cfg, typename T>
__device__ __forceinline__ void gather_stage(const FwdParams &p, const GatherRows &rows,
                                             const T *pool, const TensorStrides &stride,
                                             int kv_head, uint8_t *stage, uint64_t *full, int tid) {
    constexpr int kRowsPerWarp = Cfg::BN / 4;
    constexpr int kLanesPerRow = sm90_gather_lanes_per_row(Cfg::Dp);
    constexpr int kRowsPerCopy = sm90_gather_rows_per_copy(Cfg::Dp);
    constexpr int kCopiesPerRow = Cfg::Dp / 8 / kLanesPerRow;
    static_assert(kRowsPerWarp % kRowsPerCopy == 0 && kRowsPerWarp % 4 == 0 && kRowsPerCopy <= 4,
                  "whole rows per warp instruction; a warp's first row is 0 or 4 mod 8");
    const int warp = tid / 32, lane = tid % 32;
    // This lane's row (lanes past kRowsPerWarp compute a harmless one): its
    // address, formed once per stage, so that a copy takes two shuffles and
    // an add (formed per copy, the products took 17 instructions a copy, h35).
    const int page = min(max(rows.entry, 0), p.num_pages - 1);  // a broken table never faults
    const uint8_t *row_addr = reinterpret_cast<const uint8_t *>(
        pool + int64_t(kv_head) * stride.head + int64_t(page) * stride.batch +
        int64_t(rows.in_page) * stride.seq);
    const uint32_t stage_addr = ptx::smem_addr(stage);
#pragma unroll
    for (int k = 0; k < kCopiesPerRow; ++k) {
        const int chunk = k * kLanesPerRow + lane % kLanesPerRow;
        const bool real = chunk * 8 < Cfg::D;
        const int lane_bytes = real ? chunk * 16 : 0;
        const uint32_t first_copy =
            sm90_gather_first_copy(stage_addr, Cfg::BN, Cfg::Dp, warp, lane, k);
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; i += kRowsPerCopy) {
            // Row i + lane / kLanesPerRow is held by lane i / kRowsPerCopy of
            // this lane's group of kLanesPerRow (sm90_gather_held_row): a
            // constant lane, so no lane index register per copy (h37).
            const auto *row = reinterpret_cast<const uint8_t *>(
                __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(row_addr), i / kRowsPerCopy,
                            kLanesPerRow));
            ptx::cp_async_16(sm90_gather_copy_offset(first_copy, i), row + lane_bytes, real);
        }
    }
    ptx::cp_async_mbarrier_arrive_noinc(full);
}

}  // namespace fmha::sm90
