// Per-head-dim tile shapes of every kernel family, in one place. Included by
// the host (to size launches) and by the kernels (to compile them).
#pragma once

#if defined(__CUDACC__)
#define FMHA_HOST_DEVICE __host__ __device__
#else
#define FMHA_HOST_DEVICE
#endif

namespace fmha {

struct TileShape {
    int block_m;  // query rows per CTA
    int block_n;  // keys per inner-loop step
    int threads;  // per CTA
};

// Portable mma.sync kernel: 4 warps with one or two 16-row MMA tiles each.
// Two (a 128-row query block) let every K and V fragment a warp reads from
// shared memory feed two MMAs; problems of at most kPortableShortRows query
// rows per sequence (multi-token decode) take one, which wastes no more than
// half a block. hd256 always takes one (two tiles' accumulators do not fit in
// registers), and over pages a 32-key tile: at 64 keys a thread holds 16
// block-table entries and spills (kernel notes p11). Q + K + V stay within
// sm_86/89/120's 99 KB of shared memory (contiguous hd256: 64 + 2 x 64 rows
// of 528 bytes, exactly 99 KB).
constexpr int kPortableShortRows = 64;

FMHA_HOST_DEVICE constexpr TileShape portable_tile(int head_dim, bool short_queries, bool paged) {
    return head_dim == 256   ? TileShape{64, paged ? 32 : 64, 128}
           : short_queries ? TileShape{64, 64, 128}
                           : TileShape{128, 64, 128};
}

// Barriers per key tile. Two (V_j loads during S = Q·K_jᵀ, K_{j+1} during
// softmax and P·V_j; each barrier publishes one tile and frees the other
// buffer) for the 128-row hd128 block: 1.06-1.13x on prefill and ptxas
// spills half as much. Four (V_{j+1} also loads during the next tile's S and
// softmax) elsewhere: with two, hd256 and the short blocks ran 0.87-1.04x,
// hd64 and hd96 0.97-1.03x (kernel notes p12).
FMHA_HOST_DEVICE constexpr bool portable_two_barriers(int head_dim, bool short_queries) {
    return head_dim == 128 && !short_queries;
}

// CTAs per SM the register budget is set for (__launch_bounds__): 256
// threads an SM, so each thread may use up to 255 registers.
FMHA_HOST_DEVICE constexpr int portable_min_ctas(int head_dim, bool short_queries, bool paged) {
    return 256 / portable_tile(head_dim, short_queries, paged).threads;
}

// Rows are padded by 8 elements (16 bytes) so ldmatrix reads of 8 rows hit
// 8 distinct 16-byte bank groups.
FMHA_HOST_DEVICE constexpr int portable_smem_row(int head_dim) { return head_dim + 8; }

FMHA_HOST_DEVICE constexpr int portable_smem_bytes(int head_dim, bool short_queries, bool paged) {
    return (portable_tile(head_dim, short_queries, paged).block_m +
            2 * portable_tile(head_dim, short_queries, paged).block_n) *
           portable_smem_row(head_dim) * 2;
}

}  // namespace fmha

namespace fmha {

// Hopper TMA + wgmma kernel: one producer warpgroup and `consumers`
// warpgroups of 64 query rows each. Head dims are padded to a multiple of 64
// (the 128-byte swizzle width): hd96 runs as 128 with TMA zero-filling the
// extra columns and clipping them on store.
struct Sm90Tile {
    int block_m;
    int block_n;
    int consumers;
    int stages;      // K and V pipeline depth
    int padded_dim;  // head dim rounded up to 64
    bool separate_o; // O staged in its own buffer (else in Q's)
    int smem_o_bytes;
    int smem_shared_s_bytes = 0;  // split D: the consumers' S halves, summed through shared memory
    int q_reg_steps = 0;  // shared S: k-steps of S = Q·Kᵀ whose Q a consumer holds in registers
};

// Key loops longer than this take hd128's wide key tile; up to it, the
// persistent grid's 128-key tile (h17: +4.2% full, +5.9% causal at 4096
// keys). FMHA_SM90_TUNE_WIDE_KEYS_ABOVE overrides it for tuning runs only.
#ifdef FMHA_SM90_TUNE_WIDE_KEYS_ABOVE
constexpr long long kSm90WideKeysAbove = FMHA_SM90_TUNE_WIDE_KEYS_ABOVE;
#else
constexpr long long kSm90WideKeysAbove = 4096;
#endif

// `wide_keys`: the problem's key loops exceed kSm90WideKeysAbove. Measured
// on the H200 (docs/kernel-notes.md, v6):
//  - hd64: 3 consumer warpgroups (192 rows) amortize softmax over more rows.
//  - hd128: 128 keys per tile; long key sequences take 192 (fewer softmax
//    rounds per FLOP, +3-7% from S = 4k, v6), which leaves no room for a
//    separate O buffer, so those of the persistent grid keep 128.
//  - hd256: 80 keys per tile, so S = Q·Kᵀ (m64n80, both operands from shared
//    memory) stays under the shared-memory bandwidth that m64n64 saturates.
// FMHA_SM90_TUNE_WIDE_{KEYS,STAGES} override hd128's wide tile for tuning runs only.
#if defined(FMHA_SM90_TUNE_WIDE_KEYS) && defined(FMHA_SM90_TUNE_WIDE_STAGES)
constexpr Sm90Tile kSm90WideTile{128, FMHA_SM90_TUNE_WIDE_KEYS, 2, FMHA_SM90_TUNE_WIDE_STAGES,
                                 128, false, 0};
#else
constexpr Sm90Tile kSm90WideTile{128, 192, 2, 2, 128, false, 0};
#endif

// Tile shapes besides a head dim's default: hd128's wide key tile (above),
// hd64's 128-row tile for narrow windows, where a 192-row block sees 64
// more keys per row than its rows can use (h8), hd512's shared S (below),
// and hd64's default tile compiled to mask with per-row column bounds
// (short causal prefill, h15).
enum Sm90Shape : int {
    kSm90Default = 0,
    kSm90WideKeys = 1,
    kSm90NarrowRows = 2,
    kSm90SharedS = 3,
    kSm90RowMasks = 4
};

// Entry-point families of one tile shape that walk the tiles or lay out V
// differently; each has its own entry points, so the plain ones keep their
// code (a runtime test in the tile loop cost the dense kernels 1-2%, h26).
// The kernel's Config takes one; launch_sm90.cpp names their entry points.
enum class Sm90Variant : int {
    kPlain = 0,
    // `_varlen`: packed Q walked without empty slots (Sm90Params::compact_batch, h26b).
    kCompactWalk = 1,
    // `_paged16`: a paged cache read in 16-row chunks whose V rows keep all
    // their 64-column boxes together (chunk-major V), so one TMA box loads a
    // chunk's V where the plain layout needs one per 64 columns (h28).
    kPagedChunks16 = 2,
    // `_gather`: a paged cache whose pages no TMA box fits (pages of 1-15
    // rows, or any size without a 16-row divisor): the producer warpgroup
    // copies K and V row by row with cp.async into the plain layout (h34).
    kPagedGather = 3,
};

// hd512: a warpgroup cannot hold 64 rows of O (64 x 512 fp32), so both
// consumers take the block's 64 rows and each owns 256 of O's columns
// ("split D"); Q (64 KB) and two stages of 32-key K and V tiles (32 KB
// each) fill the shared memory. Each consumer computes the whole S, or with
// kSm90SharedS half of it (its half of the head dim), the halves summed
// through 32 KB of shared memory: less Q read per tile, one more barrier
// (h9b: faster where all 64 rows are used, slower at 16). A shared-S consumer
// holds the first 10 of its 16 k-steps of Q as wgmma A fragments (40
// registers; 12 spill): the S GEMM reads less from shared memory (h12).
// FMHA_SM90_TUNE_Q_REG_STEPS overrides the count for tuning runs only.
#ifndef FMHA_SM90_TUNE_Q_REG_STEPS
#define FMHA_SM90_TUNE_Q_REG_STEPS 10
#endif
FMHA_HOST_DEVICE constexpr Sm90Tile sm90_tile(int head_dim, int shape) {
    return head_dim == 512 && shape == kSm90SharedS
               ? Sm90Tile{64, 32, 2, 2, 512, false, 0, 2 * 2 * 64 * 32 * 4, FMHA_SM90_TUNE_Q_REG_STEPS}
         : head_dim == 512 ? Sm90Tile{64, 32, 2, 2, 512, false, 0}
         : head_dim == 256 ? Sm90Tile{128, 80, 2, 2, 256, false, 0}
         : head_dim == 64 && shape == kSm90NarrowRows ? Sm90Tile{128, 128, 2, 2, 64, true, 128 * 64 * 2}
         : head_dim == 64  ? Sm90Tile{192, 128, 3, 2, 64, true, 192 * 64 * 2}
         : head_dim == 128 && shape == kSm90WideKeys ? kSm90WideTile
                                                     : Sm90Tile{128, 128, 2, 2, 128, true, 128 * 128 * 2};
}

// Paged KV on the Hopper kernel: rows per TMA box of a page, the largest of
// 64, 32 and 16 that divides both the page and the key tile (a box never
// straddles pages, and keeps the 1024-byte swizzle alignment), or 0 when
// none does (pages of 1 or 8 rows: gathered row by row, Sm90Variant::kPagedGather).
// FMHA_SM90_TUNE_PAGED_CHUNK_MAX caps the chunk for tuning runs only.
#ifndef FMHA_SM90_TUNE_PAGED_CHUNK_MAX
#define FMHA_SM90_TUNE_PAGED_CHUNK_MAX 64
#endif
FMHA_HOST_DEVICE constexpr int sm90_paged_chunk_rows(int page_size, int block_n) {
    for (int rows = FMHA_SM90_TUNE_PAGED_CHUNK_MAX; rows >= 16; rows /= 2)
        if (page_size % rows == 0 && block_n % rows == 0) return rows;
    return 0;
}

// Pages the Hopper kernel gathers row by row (`_gather` entry points): those
// no TMA box of 16 or more rows fits (1-15 rows, or no 16-row divisor), and
// at hd512 those without a 32-row divisor, whose 32-key tiles would take two
// 16-row boxes per stage (gathered 1.01-1.29x faster, h40).
FMHA_HOST_DEVICE constexpr bool sm90_pages_gathered(bool paged, int page_size, int head_dim) {
    return paged && (sm90_paged_chunk_rows(page_size, 16) == 0 ||
                     (head_dim == 512 && page_size % 32 != 0));
}

// `_gather` stages (sm90/gather.cuh): producer warp w of 4 copies rows
// [w * block_n / 4, (w + 1) * block_n / 4) of a key tile into the layout the
// TMA boxes fill (64-column box b of row r at b * block_n * 128 + r * 128,
// 16-byte chunk c of the box at (c ^ r % 8) * 16). A warp instruction moves
// 32 consecutive 16-byte chunks: whole rows (hd64: 4, hd96/hd128 in 128
// columns: 2), one row (hd256) or half of one (hd512).
FMHA_HOST_DEVICE constexpr int sm90_gather_lanes_per_row(int padded_dim) {
    return padded_dim / 8 >= 32 ? 32 : padded_dim / 8;
}
FMHA_HOST_DEVICE constexpr int sm90_gather_rows_per_copy(int padded_dim) {
    return 32 / sm90_gather_lanes_per_row(padded_dim);
}
// The warp's row whose page lane `lane` holds: copy i (a multiple of the
// rows per copy) of lane l takes row i + l / lanes per row, which lane i /
// rows per copy of l's group of lanes-per-row lanes holds, so a shuffle
// within the group reads it from a constant lane (no lane index register
// per copy, h37).
FMHA_HOST_DEVICE constexpr int sm90_gather_held_row(int padded_dim, int lane) {
    return (lane % sm90_gather_lanes_per_row(padded_dim)) * sm90_gather_rows_per_copy(padded_dim) +
           lane / sm90_gather_lanes_per_row(padded_dim);
}
// Address of lane `lane` of warp `warp`'s first copy (row step 0) of its
// chunk k * lanes per row + lane % lanes per row, in the stage at `stage`
// (1024-byte aligned): its row is the warp's first plus lane / lanes per row.
FMHA_HOST_DEVICE constexpr uint32_t sm90_gather_first_copy(uint32_t stage, int block_n,
                                                           int padded_dim, int warp, int lane,
                                                           int k) {
    const int lanes = sm90_gather_lanes_per_row(padded_dim);
    const int sub = lane / lanes;
    const int first = warp * (block_n / 4);
    const int chunk = k * lanes + lane % lanes;
    const uint32_t lane_row = stage + (first + sub) * 128;
    return lane_row + (chunk / 8) * block_n * 128 + (((chunk % 8) ^ (sub ^ (first % 8))) << 4);
}
// The same lane's copy i rows further (i a multiple of the rows per copy),
// from its first copy's address (bits 4-6 the swizzled chunk, bits 7-9 zero
// in the stage base): row first + i + sub is (i % 8) ^ (sub ^ first % 8)
// mod 8 while no carry reaches sub and first % 8 is 0 or 4 (a CPU test
// checks every tile against the box layout).
FMHA_HOST_DEVICE constexpr uint32_t sm90_gather_copy_offset(uint32_t first_copy, int i) {
    return (first_copy ^ uint32_t((i % 8) << 4)) + uint32_t(i * 128);
}

// Consumers share the block's rows and split O's columns (hd512).
FMHA_HOST_DEVICE constexpr bool sm90_split_d(Sm90Tile t) { return t.block_m < 64 * t.consumers; }

// Packed query heads per KV head, padded to a power of two: a tile's
// 64-row TMA boxes take 64 / P positions of P heads, or (hd512, whose
// MLA-style shapes have 128 query heads on one KV head) P / 64 boxes per
// position.
FMHA_HOST_DEVICE constexpr int sm90_max_packed_group(int head_dim) {
    return head_dim == 512 ? 128 : 64;
}

FMHA_HOST_DEVICE constexpr int sm90_threads(int head_dim, int shape) {
    return 128 * (1 + sm90_tile(head_dim, shape).consumers);
}

// Q, then `stages` K tiles, then `stages` V tiles, then O (if separate),
// then the shared S halves, then the mbarriers; plus 1 KB to align the base
// to the 1024-byte swizzle atom.
FMHA_HOST_DEVICE constexpr int sm90_smem_bytes(Sm90Tile t) {
    return 1024 + 2 * t.padded_dim * (t.block_m + 2 * t.stages * t.block_n) + t.smem_o_bytes +
           t.smem_shared_s_bytes + 8 * (2 + 4 * t.stages);
}

}  // namespace fmha

namespace fmha {

// Decode kernel: 16 packed query rows (query positions x the query heads of
// one KV head) per CTA, 4 warps (contiguous hd64: 8, see below), each on its
// own 16-key slices of every key tile.
// hd512 pairs the warps: both of a pair see the same keys and each owns half
// of O's columns, so O fits in registers. Contiguous caches: stages as deep
// as shared memory allows while keeping 2 CTAs per SM up to hd128. Paged
// caches up to hd128: 2 stages and 3 CTAs per SM, whose independent CTAs
// hide the block-table lookups better (measured on the H200: paged 3.2-3.6
// TB/s against 2.9-3.3 with 3 stages; contiguous prefers 3 stages).
// Contiguous hd64 streams 128-key tiles with 8 warps: a 64-key tile carries
// half hd128's bytes for the same per-tile work, and one CTA per SM (the
// split rows) fell 3-8% behind cuDNN (docs/kernel-notes.md, d35).
// Paged hd64 has two tiles: on the H200 128 keys (2 slices per warp) stream
// 5-17% faster wherever the grid fits at 3 CTAs per SM; 64-key tiles fit more
// CTAs per SM and run grids that would need more waves on the wide tile
// (kernel-notes d37; launch_decode.cpp chooses, sm_90 only).
// Dense hd128 also has a narrow tile: 32 keys a stage, two warp pairs each
// sharing 16 keys and splitting O's columns (as hd512), 52 KB, so half the
// bytes in flight per CTA and up to 4 CTAs per SM. Where the grid is one wave
// of it with more than one CTA per SM on average, the memory system serves
// the SMs more evenly than with 64 KB in flight per CTA (kernel-notes d43).
// Dense hd96 has a shallow tile: the 64-key tile with 2 stages instead of 3,
// 52 KB, so 4 CTAs per SM instead of 2. Grids of 2 to 3 CTAs per SM then run
// as one wave instead of a full wave and a partial one (kernel-notes d44).
// hd96 KV heads read in pairs stream 192-column rows (head_dim 192 here): 3
// stages (144 KB, one CTA per SM) or the shallow 2 (96 KB, two per SM)
// (kernel-notes d49; launch_decode.cpp chooses).
// Dense hd128 has a lone tile for the keys-on-M grids whose two splits run as
// clusters of two CTAs and fit one CTA per SM: 8 warps on 128-key tiles, 2
// stages (128 KB). With one CTA per SM, two warps per scheduler overlap one
// another's per-tile path, which a lone 4-warp CTA runs alone (kernel-notes
// d75: B8 H32/8 S8192 0.5-0.9 us faster than on the 64-key tile; 3 stages of
// it, 4 warps on 128 keys, 4 stages of 64 keys, warp pairs on 64 keys, 6 or
// 16 warps: none faster).
struct DecodeTile {
    int warps;    // per CTA
    int block_n;  // keys per pipeline stage (whole 16-key slices per warp)
    int stages;   // K/V pipeline depth
    int d_split;  // warps sharing one key slice, each with head_dim/d_split columns of O
};

// How the kernel reads K and V: a dense cache, or pages through a block
// table on the usual tile or (hd64) the wide one; or a dense cache on the
// narrow tile (hd128) or the shallow one (hd96 and paired hd96), for grids of
// one wave at their occupancy, or on the lone tile (hd128 clusters of one
// CTA per SM); or, dense or paged, on the compact tile (hd256 and hd512)
// where the device's shared memory per block cannot take the usual one.
enum class DecodeKv : int {
    kDense = 0,
    kPaged = 1,
    kPagedWide = 2,
    kDenseNarrow = 3,
    kDenseShallow = 4,
    kDenseLone = 5,
    kDenseCompact = 6,
    kPagedCompact = 7
};

FMHA_HOST_DEVICE constexpr bool decode_paged(DecodeKv kv) {
    return kv == DecodeKv::kPaged || kv == DecodeKv::kPagedWide || kv == DecodeKv::kPagedCompact;
}

constexpr int kDecodeRows = 16;

// FMHA_DECODE_TUNE_{WARPS,STAGES} override the table for tuning runs only.
FMHA_HOST_DEVICE constexpr DecodeTile decode_tile(int head_dim, DecodeKv kv) {
#if defined(FMHA_DECODE_TUNE_WARPS) && defined(FMHA_DECODE_TUNE_STAGES)
    (void)kv;
    return head_dim == 512 ? DecodeTile{4, 32, 3, 2}
                           : DecodeTile{FMHA_DECODE_TUNE_WARPS, 16 * FMHA_DECODE_TUNE_WARPS,
                                        FMHA_DECODE_TUNE_STAGES, 1};
#else
    // The compact tile: 2 stages of 32 keys, two warps per key slice (73,984
    // bytes at hd256, 147,712 at hd512, against 205,056 and 213,248 on the
    // usual tiles): hd256 fits 99 KB devices, hd512 sm_80/87's 163 KB.
    return kv == DecodeKv::kDenseCompact || kv == DecodeKv::kPagedCompact
               ? DecodeTile{4, 32, 2, 2}
         : head_dim == 512                           ? DecodeTile{4, 32, 3, 2}
         : kv == DecodeKv::kDenseNarrow              ? DecodeTile{4, 32, 3, 2}
         : kv == DecodeKv::kDenseShallow             ? DecodeTile{4, 64, 2, 1}
         : kv == DecodeKv::kDenseLone                ? DecodeTile{8, 128, 2, 1}
         : kv == DecodeKv::kPagedWide                ? DecodeTile{4, 128, 2, 1}
         : kv == DecodeKv::kPaged && head_dim <= 128 ? DecodeTile{4, 64, 2, 1}
         : head_dim == 64                            ? DecodeTile{8, 128, 3, 1}
                                                     : DecodeTile{4, 64, 3, 1};
#endif
}

// When a stage is refilled. Usually at the top of the next iteration, once
// the tile after it has landed: one stage is then always kept for the tile
// being computed, so a 2-stage ring has a single tile in flight while it
// waits. The paged hd128 tile (64 keys, 2 stages, 3 CTAs per SM) instead
// refills a stage right after every warp has computed on it (a second
// barrier per tile), so both stages are in flight while a tile is awaited:
// paged B64 H32/32 S2048 ran 6% faster, the other paged rows 0-2%. The
// 3-stage dense tile lost 0.7% to the second barrier on B64; paged hd64 was
// mixed (-1 to +1%) and the other paged head dims are not measured, so they
// keep the usual order (kernel-notes d63). Every cluster entry point refills
// after compute too (their two splits run as a cluster of two CTAs): on the
// 3-stage dense tile B8 H32/8 S8192 went 75.1 -> 74.9 us (means of 7
// alternated runs; B8 H64/8 S16384 within 0.1%; kernel-notes d74), and the
// lone tile's 2 stages need it to keep a tile in flight while one is awaited.
FMHA_HOST_DEVICE constexpr bool decode_refill_after_compute(int head_dim, DecodeKv kv,
                                                            bool cluster_merge) {
    return (kv == DecodeKv::kPaged && head_dim == 128) || cluster_merge;
}

// Where the lane's ldmatrix byte offsets (Q, and K and V per k-step and O
// tile pair: 16 registers at head_dim 128) are computed once before the key
// loop instead of per tile: up to head_dim 128; larger head dims have no
// registers to spare (250-254 at hd256 and hd512) (kernel-notes d65).
FMHA_HOST_DEVICE constexpr bool decode_hoist_lane_offsets(int head_dim) { return head_dim <= 128; }

// Where those offsets are also pinned in registers across tiles (ptxas would
// otherwise rebuild them from the thread index every tile; kernel-notes d66).
// Not on the shallow tile: it runs 4 CTAs per SM at exactly 128 registers,
// and pinned offsets take 154.
FMHA_HOST_DEVICE constexpr bool decode_keep_lane_offsets(int head_dim, DecodeKv kv) {
    return decode_hoist_lane_offsets(head_dim) && kv != DecodeKv::kDenseShallow;
}

FMHA_HOST_DEVICE constexpr int decode_threads(int head_dim, DecodeKv kv) {
    return 32 * decode_tile(head_dim, kv).warps;
}

// Q rows are padded by 8 elements (conflict-free ldmatrix, read once).
FMHA_HOST_DEVICE constexpr int decode_smem_row(int head_dim) { return head_dim + 8; }

// K/V rows of the pipeline stages are unpadded (head_dim elements), and the
// 16-byte chunk index is XORed with a function of the row (decode_kv_offset)
// so that ldmatrix's 8 rows still hit 8 bank groups. With padded rows a warp's
// cp.async requests land across 128-byte lines of shared memory and the L1
// fetched 1.5x the sectors from L2 (ncu on the H200). Unpadded rows measured
// faster at every head_dim: hd64/hd128 2-9% (d9, d16), hd96 1-10%, hd256
// 4-31%, hd512 3-29% (d34; docs/kernel-notes.md).
// Element offset of 16-byte chunk `c` of K/V row `r` within a stage: every
// chunk stays in its row, and ldmatrix's 8 consecutive rows (from a multiple
// of 8) at one chunk hit 8 distinct 16-byte bank slots (a CPU test checks
// both for every head_dim).
template <int D>
FMHA_HOST_DEVICE constexpr int decode_kv_offset(int r, int c) {
    static_assert(D % 64 == 0 || D == 96, "no K/V swizzle for this head_dim");
    // 192-byte rows: even rows start on a bank line, odd rows half-way along
    // one; XOR with (r / 2) % 4 spreads each parity's 4 rows over the 4 slots
    // of its half (the XOR stays within a 64-byte group). Rows of whole
    // 128-byte lines (head_dim a multiple of 64): XOR with r % 8.
    return r * D + ((D == 96 ? c ^ ((r >> 1) & 3) : c ^ (r & 7)) << 3);
}

// Q tile, then the K/V stages; after the key loop the stages are reused for
// the warps' partial (max, sum, O) to be merged.
FMHA_HOST_DEVICE constexpr int decode_q_bytes(int head_dim) {
    return kDecodeRows * decode_smem_row(head_dim) * 2;
}
FMHA_HOST_DEVICE constexpr int decode_pipeline_bytes(int head_dim, DecodeKv kv) {
    return decode_tile(head_dim, kv).stages * 2 * decode_tile(head_dim, kv).block_n * head_dim *
           2;
}
// Floats per row of a warp's partial O in the merge: 4 past head_dim, so
// that the rows a warp stores at once (2 apart with keys on M, 1 apart
// otherwise) start in different banks instead of all in one (4-way and
// 8-way conflicts with rows of head_dim floats, every head_dim here being a
// multiple of 32).
FMHA_HOST_DEVICE constexpr int decode_reduce_row(int head_dim) { return head_dim + 4; }
FMHA_HOST_DEVICE constexpr int decode_reduce_bytes(int head_dim, DecodeKv kv) {
    return (decode_tile(head_dim, kv).warps / decode_tile(head_dim, kv).d_split) * kDecodeRows *
           (decode_reduce_row(head_dim) + 2) * 4;
}
#ifndef FMHA_DECODE_TUNE_SMEM_PAD
#define FMHA_DECODE_TUNE_SMEM_PAD 0  // tuning runs only: extra bytes to lower occupancy
#endif
FMHA_HOST_DEVICE constexpr int decode_smem_bytes(int head_dim, DecodeKv kv) {
    return FMHA_DECODE_TUNE_SMEM_PAD + decode_q_bytes(head_dim) +
           (decode_pipeline_bytes(head_dim, kv) > decode_reduce_bytes(head_dim, kv)
                ? decode_pipeline_bytes(head_dim, kv)
                : decode_reduce_bytes(head_dim, kv));
}
// Cluster merge entry points: past all of that, an inbox laid out as Q's rows
// for the peer's pushed states, which nothing else in the CTA touches.
FMHA_HOST_DEVICE constexpr int decode_cluster_smem_bytes(int head_dim, DecodeKv kv) {
    return decode_smem_bytes(head_dim, kv) + decode_q_bytes(head_dim);
}

}  // namespace fmha
