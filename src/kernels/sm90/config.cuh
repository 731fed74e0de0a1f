// Hopper forward kernel: compile-time configuration per (head dim, key tile,
// score modifiers) and the shared-memory layout of its tiles and barriers.
#pragma once
#include <stdint.h>

#include "kernels/tile_traits.h"

namespace fmha::sm90 {

// Named barriers: 1 + consumer (one warpgroup's 128 threads), 6 (every
// consumer: V tail zeroing, and under split D the end of Q's reads before O
// is staged over it), 8 + consumer (ping-pong turns).
constexpr int kConsumersBarrier = 6;

template <int kHeadDim, int kShape, bool kWithScoreMods, Sm90Variant kVariant = Sm90Variant::kPlain>
struct Config {
    static constexpr int D = kHeadDim;
    // kShape: a Sm90Shape (tile_traits.h).
    // Sliding windows, softcap and sinks: their own entry points, so the
    // plain kernels keep their code (the extra mask spills hd128's wide tile).
    static constexpr bool kScoreMods = kWithScoreMods;
    static constexpr bool kCompactWalk = kVariant == Sm90Variant::kCompactWalk;
    static constexpr bool kChunkMajorV = kVariant == Sm90Variant::kPagedChunks16;
    // `_gather`: K/V rows copied by the producer warpgroup with cp.async
    // (sm90/gather.cuh); their full barriers count its 128 threads.
    static constexpr bool kGatherKV = kVariant == Sm90Variant::kPagedGather;
    // Masked tiles take per-row column bounds (softmax.cuh), except in the
    // plain wide tile, whose register budget they exceed (38-byte spill), and
    // the plain hd64 kernel, where they measured -2 to -3% at 4k-8k keys
    // (+4 to +7% at 512-1024; kernel-notes h7, h15): its short causal
    // problems take the kSm90RowMasks entry point instead.
    static constexpr bool kRowMaskBounds =
        kWithScoreMods || kShape == kSm90RowMasks || (kShape != kSm90WideKeys && D != 64);
    static constexpr Sm90Tile kTile = sm90_tile(D, kShape);
    static constexpr int BM = kTile.block_m;
    static constexpr int BN = kTile.block_n;
    static constexpr int kConsumers = kTile.consumers;
    static constexpr int kStages = kTile.stages;
    static constexpr int Dp = kTile.padded_dim;
    static constexpr int kBoxes = Dp / 64;           // 64-column TMA boxes per row
    static constexpr int kQBytes = BM * Dp * 2;
    static constexpr int kKVBytes = BN * Dp * 2;     // one K or V stage
    // V stage layout. Plain: box b (64 columns) of every row, then box b + 1;
    // row r of a box at r * 128 bytes. Chunk-major (`_paged16`): the stage is
    // BN / 16 chunks of 16 rows, each holding its kBoxes boxes of 16 rows.
    // Either way 8-row groups are 1024 bytes apart within a box, as the
    // 128-byte swizzle and the P·V descriptors want.
    static constexpr int kVChunkRows = 16;
    static constexpr int kVBoxStride = kChunkMajorV ? kVChunkRows * 128 : BN * 128;  // box b to b + 1
    static constexpr int kVKeyStep = kChunkMajorV ? kVChunkRows * Dp * 2 : 16 * 128;  // 16 keys on
    // K stage layout. Plain: box b of every row, then box b + 1 (8-row groups
    // 1024 bytes apart). Group-major (`_paged16`): each 8-row group holds its
    // kBoxes boxes of 8 rows, so a 16-row chunk is one contiguous block that
    // one TMA box fills; the S descriptors then step 8-row groups by
    // kKGroupStride and boxes by 1024 (h31).
    static constexpr bool kGroupMajorK = kChunkMajorV;
    static constexpr int kKBoxStride = kGroupMajorK ? 1024 : BN * 128;     // box b to b + 1
    static constexpr int kKGroupStride = kGroupMajorK ? kBoxes * 1024 : 1024;  // 8 rows on
    static constexpr int kSRegs = BN / 2;            // S accumulator per thread
    // Split D (hd512): every consumer computes the block's whole S (or, with
    // shared S, half of it, summed; the same softmax in each, bit for bit)
    // and owns kDv of O's columns.
    static constexpr bool kSplitD = sm90_split_d(kTile);
    static constexpr int kDv = kSplitD ? Dp / kConsumers : Dp;  // O columns per consumer
    static constexpr int kConsumerRows = kSplitD ? 0 : 64;      // row offset per consumer
    static constexpr int kMaxGroup = sm90_max_packed_group(D);
    // Each consumer stops at its own rows' last key tile (consumer_tile_count)
    // where the first consumer's rows end at least a key tile before the
    // block's last: hd64's 192 rows over 128-key tiles, where causal prefill
    // measured 2-13% faster. hd256's 128 rows over 80-key tiles gained 0-5% on
    // causal rows and lost 1% on full ones; hd128's consumers almost always
    // end on the same tile (kernel-notes h13).
    static constexpr bool kConsumerKeyRanges = !kSplitD && BM - kConsumerRows >= BN;
    // Tiles decoded at each block boundary by multiply-shift reciprocals
    // (TileDivisors) instead of integer divisions: hd64 +1-5% at 512-2048
    // keys, windows +2-8%. The plain 128-key-tile hd96/hd128 kernels and hd512
    // keep the divisions: there the change reorders the softmax's SASS
    // schedule in the key loop and cost 1-1.5% at 1k-4k keys (kernel-notes h20).
    static constexpr bool kFastTileDecode =
        kWithScoreMods || D == 64 || D == 256 || kShape == kSm90WideKeys;
    // kSm90SharedS: each consumer computes S over its half of the head dim.
    static constexpr bool kSharedS = kTile.smem_shared_s_bytes > 0;
    static constexpr int kSSteps = Dp / 16 / (kSharedS ? kConsumers : 1);  // S k-steps per consumer
    // The first kQRegSteps of them take Q from registers (RS wgmma).
    static constexpr int kQRegSteps = kTile.q_reg_steps;
    static constexpr int kQRegArray = kQRegSteps > 0 ? kQRegSteps : 1;  // no zero-length arrays
    static constexpr int kOChunkN = Dp >= 128 ? 128 : 64;
    static constexpr int kOChunks = kDv / kOChunkN;  // wgmma issues per k-step of P·V
    static constexpr int kORegs = kOChunkN / 2;
    // Register split after setmaxnreg (64K registers, 128 producer threads).
    // Gathering producers (`_gather`) compute addresses: at hd96/hd128 they
    // take 40 (24 spilled 28 bytes; the consumers fit 232 without spilling),
    // and at hd512 (24: 180 bytes spilled in the copy loop; the split-D
    // consumers fit 232), while hd256's consumers need their 240 and hd64's
    // split is full.
    static constexpr bool kGatherRegs = kGatherKV && kConsumers == 2 && (Dp == 128 || Dp == 512);
    static constexpr int kProducerRegs = kGatherRegs ? 40 : kConsumers == 3 ? 32 : 24;
    static constexpr int kConsumerRegs = kGatherRegs ? 232 : kConsumers == 3 ? 160 : 240;
    // setmaxnreg.inc waits forever if the CTA's registers can't cover the
    // split: they are what the launch granted (per-thread cap, 8-aligned).
    static constexpr int kThreads = 128 * (1 + kConsumers);
    static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <=
                      (65536 / kThreads / 8 * 8) * kThreads,
                  "register split exceeds the CTA's allocation");
    // O gets its own buffer where shared memory allows, so the next tile's Q
    // can load while this tile's O is stored.
    static constexpr bool kSeparateO = kTile.separate_o;
    static_assert(BM == (kSplitD ? 64 : 64 * kConsumers),
                  "one consumer warpgroup per 64 rows, or all on 64 rows (split D)");
    static_assert(kDv % kOChunkN == 0 && kDv % 64 == 0, "O chunks tile a consumer's columns");
    static_assert(!kSharedS || (kSplitD && kConsumers == 2 &&
                                kTile.smem_shared_s_bytes == 2 * kConsumers * BM * BN * 4),
                  "shared S: two split-D consumers, two tiles of fp32 S each");
    static_assert(kTile.smem_o_bytes == (kSeparateO ? kQBytes : 0), "traits agree");
    static_assert(kQRegSteps >= 0 && kQRegSteps <= kSSteps && (kQRegSteps == 0 || (kSharedS && BN == 32)),
                  "Q in registers: shared S only (the m64n32k16 RS wrapper), at most a consumer's k-steps");
    static_assert(BN == 32 || BN == 64 || BN == 80 || BN == 128 || BN == 176 || BN == 192,
                  "S = Q·Kᵀ wgmma wrappers exist for these key tile widths");
    static_assert(sm90_threads(D, kShape) == kThreads, "launch and kernel agree on the CTA size");
    static_assert(sm90_smem_bytes(kTile) <= 227 * 1024, "fits one CTA's shared memory");
    static_assert(!kChunkMajorV || (BN % kVChunkRows == 0 && !kSplitD && kBoxes > 1),
                  "chunk-major V: whole 16-row chunks, one O column range, several boxes");
    static_assert(!kGroupMajorK || !kSplitD, "group-major K: the unsplit S descriptors only");
    static_assert(!kGatherKV || (BN % 4 == 0 && BN / 4 <= 32 && Dp % 64 == 0),
                  "gathered K/V: each producer warp copies a quarter of the key tile, a row per lane");
};

// Byte offset of key row r of box 0 in a V stage (see kVBoxStride).
template <typename Cfg>
__device__ __forceinline__ constexpr int v_row_offset(int r) {
    return Cfg::kChunkMajorV
               ? (r / Cfg::kVChunkRows) * Cfg::kVKeyStep + (r % Cfg::kVChunkRows) * 128
               : r * 128;
}

template <typename Cfg>
struct Smem {
    uint8_t *q, *k, *v, *o;  // o aliases q when there is no room for both
    float *shared_s;          // the consumers' S halves (kSharedS)
    uint64_t *full_q, *empty_q, *full_k, *full_v, *empty_k, *empty_v;

    __device__ __forceinline__ explicit Smem(uint8_t *raw) {
        // The 128-byte swizzle repeats every 1024 bytes: align every tile to it.
        uint8_t *base = reinterpret_cast<uint8_t *>(
            (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
        q = base;
        k = q + Cfg::kQBytes;
        v = k + Cfg::kStages * Cfg::kKVBytes;
        uint8_t *end = v + Cfg::kStages * Cfg::kKVBytes;
        o = Cfg::kSeparateO ? end : q;
        uint8_t *after_o = end + (Cfg::kSeparateO ? Cfg::kQBytes : 0);
        shared_s = reinterpret_cast<float *>(after_o);
        auto *bars = reinterpret_cast<uint64_t *>(after_o + Cfg::kTile.smem_shared_s_bytes);
        full_q = bars;
        empty_q = bars + 1;
        full_k = bars + 2;
        full_v = full_k + Cfg::kStages;
        empty_k = full_v + Cfg::kStages;
        empty_v = empty_k + Cfg::kStages;
    }
};

}  // namespace fmha::sm90
