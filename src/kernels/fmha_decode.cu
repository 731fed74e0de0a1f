// Decode attention: a few query rows per sequence against a long, possibly
// paged, KV cache; mma.sync, every architecture from sm_80 on.
//
// One CTA takes 16 packed query rows of one (sequence, KV head): query
// positions x the query heads that share the KV head (GQA packing), so K
// and V are read once for all of them. With split-KV it takes one of
// `num_splits` slices of the keys and writes a partial (O, LSE) that the
// combine kernel (fmha_combine.cu) joins exactly. Four warps work on
// different 16-key slices of every key tile (contiguous hd64: eight, on
// 128-key tiles; paged hd64's wide tile: four, two slices each in turn;
// hd512: pairs of warps share a slice and split O's columns); K and V
// stream through a multi-stage
// cp.async pipeline (stage rows: see decode_kv_offset in tile_traits.h).
// At the end the warps' softmax states are merged in shared memory.
// CTAs of at most 8 query rows (the `_r8` entry points) run the MMAs
// transposed, the 16 keys of a slice on M and the rows on N = 8: half the
// MMAs of 16 rows (keys_on_m_slice).
// With two splits on sm_90 those run as clusters of two CTAs (the
// `_r8_cluster` entry points; `_r8_cluster_lone` on the 8-warp tile for
// grids of at most one CTA per SM) that merge their states through
// distributed shared memory instead of writing partials for the combine
// kernel.
//
// Paired heads (the `_paired` hd64 and hd96 entry points): two KV heads whose
// rows lie side by side in memory ([.., head, dim] with head stride = dim)
// are read as one head of twice the columns, so a CTA streams rows of whole
// 128-byte lines (256 / 384 bytes). The host doubles the K/V head stride and
// the group; Q is placed in the half of a row that holds its KV head (the
// other half zero), so S = Q K^T sees only that head's keys, and each row
// keeps the half of P V that is its own head's output.
#include <math_constants.h>

#include "kernels/numeric.cuh"
#include "kernels/params.h"
#include "kernels/ptx/cluster.cuh"
#include "kernels/ptx/grid_dependency.cuh"
#include "kernels/ptx/math.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/mma_sync.cuh"
#include "kernels/sequence.cuh"
#include "kernels/tile_traits.h"

namespace fmha::decode {

template <int D, DecodeKv kKv>
struct Config {
    static constexpr DecodeTile kTile = decode_tile(D, kKv);
    static constexpr int BM = kDecodeRows;
    static constexpr int BN = kTile.block_n;
    static constexpr int kStages = kTile.stages;
    static constexpr int kDSplit = kTile.d_split;
    static constexpr int kThreads = decode_threads(D, kKv);
    static constexpr int kWarps = kThreads / 32;
    static constexpr int kKeyGroups = kWarps / kDSplit;  // warps on distinct keys
    static constexpr int kSlices = BN / (16 * kKeyGroups);  // 16-key slices per warp and tile
    static constexpr int kDv = D / kDSplit;              // O columns per warp
    static constexpr int kRow = decode_smem_row(D);           // Q row, elements
    static constexpr int kChunks = D / 8;                     // 16-byte chunks per row
    static constexpr int kOTiles = kDv / 8;
    static_assert(BN == 16 * kKeyGroups * kSlices, "whole 16-key slices per key group");
    static_assert(kOTiles % 2 == 0, "ldmatrix.x4.trans loads two O tiles");
};

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Query row r of the tile: position and head.
struct PackedRow {
    int pos;   // query position in the sequence
    int head;  // query head
};

__device__ __forceinline__ PackedRow packed_row(int m_tile, int r, int kv_head, int group) {
    const int pr = m_tile * kDecodeRows + r;
    return {pr / group, kv_head * group + pr % group};
}

// Paired heads: which half of the 128 columns query row `head` uses.
__device__ __forceinline__ int paired_half(int head, int group) { return head % group >= group / 2; }

template <bool kBf16, int D, DecodeKv kKv, bool kPaired = false, bool kKeysOnM = false,
          bool kClusterMerge = false>
__device__ __forceinline__ void decode(const DecodeParams &dp) {
    using Cfg = Config<D, kKv>;
    static_assert(!kKeysOnM || decode_hoist_lane_offsets(D),
                  "keys on M uses the hoisted lane offsets (head_dim <= 128)");
    static_assert(!kPaired || (D == 128 && kKv == DecodeKv::kDense) ||
                      (D == 192 && (kKv == DecodeKv::kDense || kKv == DecodeKv::kDenseShallow)),
                  "paired hd64 / hd96 heads read as hd128 / hd192");
    // Columns of a Q/O row in memory: D, or one KV head's D / 2 when paired.
    constexpr int kOutDim = kPaired ? D / 2 : D;
    constexpr bool kPaged = decode_paged(kKv);
    using T = typename Elem<kBf16>::T;
    constexpr int BN = Cfg::BN, kRow = Cfg::kRow, kStages = Cfg::kStages;
    constexpr bool kRefillAfterCompute = decode_refill_after_compute(D, kKv, kClusterMerge);
    const FwdParams &p = dp.fwd;

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);
    T *sKV = sQ + Cfg::BM * kRow;  // stage s: K at s*2*BN K/V rows, V right after

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int key_group = warp / Cfg::kDSplit;
    const int d_part = warp % Cfg::kDSplit;

    const int split = blockIdx.x;
    const int m_tile = blockIdx.y % dp.num_m_tiles;
    const int kv_head = blockIdx.y / dp.num_m_tiles;
    const int batch = blockIdx.z;
    const int group = dp.q_heads_per_kv;

    // Launched dependent: nothing global is touched before the previous
    // kernel in the stream has finished and its memory is visible.
    ptx::wait_for_predecessor();
    // The combine kernel may be scheduled now; it waits for this grid's
    // memory before reading the partials.
    ptx::launch_dependents();

    // K/V copies: a thread copies one 16-byte column chunk of every
    // kRowsPerPass-th row of a tile.
    constexpr int kRowsPerPass = Cfg::kThreads / Cfg::kChunks;
    constexpr int kRowsPerThread = (BN + kRowsPerPass - 1) / kRowsPerPass;
    const int chunk = threadIdx.x % Cfg::kChunks;
    const int row_in_pass = threadIdx.x / Cfg::kChunks;
    const bool copies = row_in_pass < kRowsPerPass;
    // f(K destination, V destination, tile row r, pass k) for each row
    // r = row_in_pass + k * kRowsPerPass this thread copies into `stage`.
    auto for_my_rows = [&](int stage, auto &&f) {
        T *sK = sKV + stage * 2 * BN * D;
        T *sV = sK + BN * D;
#pragma unroll
        for (int k = 0; k < kRowsPerThread; ++k) {
            const int r = row_in_pass + k * kRowsPerPass;
            if (kRowsPerPass * kRowsPerThread > BN && r >= BN) break;
            const int offset = decode_kv_offset<D>(r, chunk);
            f(sK + offset, sV + offset, r, k);
        }
    };

    // Split 0 of a batch-strided contiguous cache without a left window
    // starts at key 0 whatever the sequence's length, so its first tiles are
    // requested before the length is read from global memory: the stream
    // starts one memory latency sooner. Rows up to the cache's capacity are
    // read (inside the tensor); those past the length are zeroed once known.
    const bool early = !kPaged && p.cu_seqlens_k == nullptr && p.window_left < 0 && split == 0;
    const int early_keys = min((kStages - 1) * BN, p.seqlen_k);
    if (early && copies) {
        const T *k_first = dense_head_base<T>(p.k, p.k_stride, batch, kv_head) + chunk * 8;
        const T *v_first = dense_head_base<T>(p.v, p.v_stride, batch, kv_head) + chunk * 8;
#pragma unroll
        for (int st = 0; st < kStages - 1; ++st)
            for_my_rows(st, [&](T *dst_k, T *dst_v, int r, int) {
                const int j = st * BN + r;
                const int64_t jj = min(j, early_keys - 1);
                ptx::cp_async_16(ptx::smem_addr(dst_k), k_first + jj * p.k_stride.seq,
                                 j < early_keys);
                ptx::cp_async_16(ptx::smem_addr(dst_v), v_first + jj * p.v_stride.seq,
                                 j < early_keys);
            });
    }

    const Sequence seq = sequence_of(p, batch);
    const int pos_first = m_tile * Cfg::BM / group;
    if (pos_first >= seq.len_q) {  // rows past this sequence's queries
        if (early) {  // no copy may land in shared memory after the CTA exits
            ptx::cp_async_commit();
            ptx::cp_async_wait<0>();
        }
        return;
    }
    const int pos_last = min((m_tile * Cfg::BM + Cfg::BM - 1) / group, seq.len_q - 1);

    // Q: 16 rows gathered from (position, head) pairs; padding rows are zero
    // (paired: so is the half of the row that belongs to the other head).
    for (int idx = threadIdx.x; idx < Cfg::BM * Cfg::kChunks; idx += Cfg::kThreads) {
        const int r = idx / Cfg::kChunks, c = idx % Cfg::kChunks;
        const PackedRow pr = packed_row(m_tile, r, kv_head, group);
        const bool in_half = !kPaired || c / (Cfg::kChunks / 2) == paired_half(pr.head, group);
        const bool valid = pr.pos < seq.len_q && in_half;
        const int src_chunk = kPaired ? c % (Cfg::kChunks / 2) : c;
        const T *src = static_cast<const T *>(p.q) + int64_t(batch) * p.q_stride.batch +
                       (seq.q_row0 + (valid ? pr.pos : 0)) * p.q_stride.seq +
                       int64_t(valid ? pr.head : 0) * p.q_stride.head + src_chunk * 8;
        ptx::cp_async_16(ptx::smem_addr(sQ + r * kRow + c * 8), src, valid);
    }

    // This split's share of the keys any of the tile's rows can see.
    int n_begin, n_end;
    visible_key_range(seq, pos_first, pos_last, &n_begin, &n_end);
    const int tiles_total = n_end > n_begin ? (n_end - n_begin + BN - 1) / BN : 0;
    const int tiles_per_split = (tiles_total + dp.num_splits - 1) / dp.num_splits;
    const int tile_begin = min(split * tiles_per_split, tiles_total);
    const int num_tiles = min(tile_begin + tiles_per_split, tiles_total) - tile_begin;
    const int key0 = n_begin + tile_begin * BN;

    const KvRows<T> k_rows = kv_rows<T>(p, p.k, p.k_stride, seq, batch, kv_head);
    const KvRows<T> v_rows = kv_rows<T>(p, p.v, p.v_stride, seq, batch, kv_head);
    // K and V rows of tile i into stage s; keys at or past n_end are zero-filled.
    // A thread copies its chunk of every kRowsPerPass-th row (above), so a
    // row's (paged) address is computed once for its K and V. Paged
    // caches load their block-table entries one tile ahead (`pages`, raw
    // entries: nothing depends on them until the copies), so the lookup's
    // latency hides under a tile of work instead of delaying the copies.
    // Only the paged entry points carry the paged path (and only it):
    // kernel_name in launch_decode.cpp picks them exactly for paged problems,
    // whose block table fmha_run has checked is not NULL.
    int pages[kRowsPerThread];
    auto look_up_pages = [&](int i) {
        if (!kPaged || !copies) return;
        const int j0 = key0 + i * BN;
#pragma unroll
        for (int k = 0; k < kRowsPerThread; ++k) {
            const int j = min(j0 + row_in_pass + k * kRowsPerPass, n_end - 1);
            pages[k] = __ldg(k_rows.table + k_rows.block_of(j));
        }
    };
    // Contiguous caches: a tile wholly before n_end (all but the last)
    // takes the rows at a fixed step from one pointer, no clamp, no predicate.
    const int64_t k_pass_step = int64_t(kRowsPerPass) * k_rows.seq_stride;
    const int64_t v_pass_step = int64_t(kRowsPerPass) * v_rows.seq_stride;
    // Contiguous caches: tiles are loaded in order (from tile kStages - 1 on
    // when the early tiles went out first), so a copying thread's K and V
    // pointers advance one tile per load. Loop-carried, they stay in
    // registers; rebuilt from the tile index they cost ~25 dependent
    // instructions per tile (kernel notes d65).
    const int first_loaded = early ? kStages - 1 : 0;
    const T *k_next = k_rows.base +
                      int64_t(key0 + first_loaded * BN + row_in_pass) * k_rows.seq_stride + chunk * 8;
    const T *v_next = v_rows.base +
                      int64_t(key0 + first_loaded * BN + row_in_pass) * v_rows.seq_stride + chunk * 8;
    const int64_t k_tile_step = int64_t(BN) * k_rows.seq_stride;
    const int64_t v_tile_step = int64_t(BN) * v_rows.seq_stride;
    auto load_tile = [&](int i, int s) {
        const int j0 = key0 + i * BN;
        if (!copies) return;
        if constexpr (!kPaged) {
            if (j0 + BN <= n_end) {  // all but the last tile
                const T *ks = k_next;
                const T *vs = v_next;
                k_next += k_tile_step;
                v_next += v_tile_step;
                for_my_rows(s, [&](T *dst_k, T *dst_v, int, int k) {
                    ptx::cp_async_16(ptx::smem_addr(dst_k), ks + k * k_pass_step, true);
                    ptx::cp_async_16(ptx::smem_addr(dst_v), vs + k * v_pass_step, true);
                });
                return;
            }
        }
        for_my_rows(s, [&](T *dst_k, T *dst_v, int r, int k) {
            // Branch-free: a row past the keys reads nothing (zero-fill) but
            // still gets the address of the last key, inside the tensor.
            const bool valid = j0 + r < n_end;
            const int j = min(j0 + r, n_end - 1);
            const T *ks, *vs;
            if constexpr (kPaged) {
                const int2 slot = k_rows.slot_of(pages[k], j);
                ks = k_rows.at(slot) + chunk * 8;
                vs = v_rows.at(slot) + chunk * 8;
            } else {
                ks = k_rows.base + int64_t(j) * k_rows.seq_stride + chunk * 8;
                vs = v_rows.base + int64_t(j) * v_rows.seq_stride + chunk * 8;
            }
            ptx::cp_async_16(ptx::smem_addr(dst_k), ks, valid);
            ptx::cp_async_16(ptx::smem_addr(dst_v), vs, valid);
        });
    };
    // Tile i into stage s as one commit group, then the next tile's pages.
    auto refill = [&](int i, int s) {
        if (i < num_tiles) load_tile(i, s);
        ptx::cp_async_commit();
        if (i + 1 < num_tiles) look_up_pages(i + 1);  // used by the next refill
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (!early && s < num_tiles) {
            look_up_pages(s);
            load_tile(s, s);
        }
        ptx::cp_async_commit();  // Q (and the early tiles) ride in the first group
    }
    if (kStages - 1 < num_tiles) look_up_pages(kStages - 1);
    if constexpr (kRefillAfterCompute)  // every stage in flight from the start
        refill(kStages - 1, kStages - 1);
    if (early && n_end < early_keys && copies) {
        // A sequence shorter than the early tiles: its rows past the length
        // hold other data (maybe NaN) that P = 0 must not multiply.
        ptx::cp_async_wait<0>();
#pragma unroll
        for (int st = 0; st < kStages - 1; ++st)
            for_my_rows(st, [&](T *dst_k, T *dst_v, int r, int) {
                if (st * BN + r < n_end) return;
                *reinterpret_cast<uint4 *>(dst_k) = make_uint4(0, 0, 0, 0);
                *reinterpret_cast<uint4 *>(dst_v) = make_uint4(0, 0, 0, 0);
            });
    }

    // Keys on M (at most 8 query rows, kernel-notes d67): the MMAs run
    // transposed, S^T = K Q^T and O^T += V^T P^T, so a 16-key slice is the
    // M side and the query rows are N = 8 (instead of M = 16 with 8 keys on
    // N): half the MMAs and half of O's accumulators. Q's fragments (the B
    // operand of every k-step) are loaded once, after Q's copy group lands.
    uint32_t q_frag[kKeysOnM ? D / 16 : 1][2];
    if constexpr (kKeysOnM) {
        ptx::cp_async_wait<kRefillAfterCompute ? kStages - 1 : kStages - 2>();
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {  // rows 0-7, 32 columns per ldmatrix.x4
            uint32_t f[4];
            ptx::ldmatrix_x4(f, ptx::smem_addr(sQ + (lane % 8) * kRow + (kk * 2 + lane / 8) * 8));
            q_frag[kk][0] = f[0];
            q_frag[kk][1] = f[1];
            q_frag[kk + 1][0] = f[2];
            q_frag[kk + 1][1] = f[3];
        }
    }
    // Cluster merge (after the key loop): the inbox, past every other region
    // of shared memory and laid out as Q's rows, receives the peer's half of
    // the state; its mbarrier sits in row 0's padding, armed here for the
    // bytes the peer will push: half of each query row's O, and its max and
    // sum. Nothing else in the CTA reads or writes the inbox, so the peer's
    // pushes need no ordering against this CTA's accesses, only against the
    // mbarrier's initialisation (its fence, then the arrival at the last tile).
    T *sInbox = reinterpret_cast<T *>(smem_raw + decode_smem_bytes(D, kKv));
    uint64_t *inbox_bar = reinterpret_cast<uint64_t *>(sInbox + D);
    if constexpr (kClusterMerge) {
        static_assert(kKeysOnM && !kPaired && kRow * 2 >= D * 2 + 16,
                      "cluster merge: keys on M, unpaired heads, Q rows with 16 bytes of padding");
        static_assert(kRefillAfterCompute, "cluster merge: no copies in flight at the last tile");
        if (threadIdx.x == 0) {
            int rows = 0;
            for (int r = 0; r < Cfg::BM; ++r)
                rows += packed_row(m_tile, r, kv_head, group).pos < seq.len_q;
            ptx::mbarrier_init(inbox_bar, 1);
            ptx::fence_mbarrier_init();
            ptx::mbarrier_arrive_expect_tx(inbox_bar, uint32_t(rows * (D * 2 + 8)));
        }
    }

    // O's accumulators: 16x8 tiles of O (rows g, g + 8; columns 2t, 2t + 1),
    // or with keys on M of O^T (columns g, g + 8; rows 2t, 2t + 1).
    constexpr int kAccTiles = kKeysOnM ? Cfg::kDv / 16 : Cfg::kOTiles;
    float acc[kAccTiles][4];
#pragma unroll
    for (int i = 0; i < kAccTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    // The lane's two query rows: g and g + 8, or with keys on M 2t and 2t + 1.
    const int lane_row0 = kKeysOnM ? 2 * t : g;
    const int lane_row1 = kKeysOnM ? 2 * t + 1 : g + 8;
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};  // raw score maximum
    float row_sum[2] = {0.f, 0.f};
    const int row_pos[2] = {packed_row(m_tile, lane_row0, kv_head, group).pos,
                            packed_row(m_tile, lane_row1, kv_head, group).pos};

    // Shared-memory byte offsets of this lane's ldmatrix rows, computed once
    // where the tile traits allow: the XOR key of decode_kv_offset is the same
    // for every slice and stage (a function of lane % 8), so a tile only adds
    // its stage's address.
    constexpr bool kHoist = decode_hoist_lane_offsets(D);
    uint32_t q_addr =
        ptx::smem_addr(sQ + (lane % 8 + (lane / 8) % 2 * 8) * kRow + lane / 16 * 8);
    uint32_t k_off[kHoist ? D / 16 : 1];           // K, by k-step, slice 0
    uint32_t v_off[kHoist ? Cfg::kOTiles / 2 : 1];  // V, by pair of O tiles, slice 0
    if constexpr (kHoist) {
        const int row0 = key_group * Cfg::kSlices * 16;  // the warp's first slice row
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            k_off[kk] = 2 * decode_kv_offset<D>(row0 + lane % 8 + lane / 16 * 8,
                                                kk * 2 + (lane / 8) % 2);
#pragma unroll
        for (int np = 0; np < Cfg::kOTiles / 2; ++np)
            v_off[np] = 2 * (BN * D + decode_kv_offset<D>(row0 + lane % 8 + (lane / 8) % 2 * 8,
                                                          (d_part * Cfg::kDv + np * 16) / 8 +
                                                              lane / 16));
    }
    // ptxas rebuilds loop-invariant offsets from the thread index in every
    // iteration rather than keep them; made loop-carried (keep_in_register at
    // the top of each tile) they stay in registers.
    constexpr bool kKeepOffsets = decode_keep_lane_offsets(D, kKv);
    const uint32_t kv_addr0 = ptx::smem_addr(sKV);

    // The lane's scores of a 16-key slice: kScores values. Score i belongs to
    // the lane's row score_row(i) (0: lane_row0, 1: lane_row1) and to key
    // score_key(i) of the slice. Rows on M: S's two 16x8 tiles, i = n * 4 + e
    // (n: keys 0-7 or 8-15); keys on M: S^T's one 16x8 tile.
    constexpr int kScores = kKeysOnM ? 4 : 8;
    auto score_row = [](int i) { return kKeysOnM ? i % 2 : i % 4 / 2; };
    auto score_key = [&](int i) { return kKeysOnM ? g + 8 * (i / 2) : i / 4 * 8 + 2 * t + (i & 1); };
    // The lane's row that element e of an O accumulator tile belongs to.
    auto acc_row = [](int e) { return kKeysOnM ? e % 2 : e / 2; };
    // A row's maximum over the lanes holding its scores: the 4 of equal g,
    // or with keys on M the 8 of equal t.
    auto row_max_across_lanes = [](float x) {
#pragma unroll
        for (int m = kKeysOnM ? 4 : 1; m < (kKeysOnM ? 32 : 4); m *= 2)
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, m));
        return x;
    };

    // Softcap, mask and online softmax of one slice's scores (`score(i)`: a
    // reference to score i; `key_base`: the slice's first key). Leaves P in
    // the scores, O rescaled, and the rows' maxima and sums updated.
    auto softmax_slice = [&](auto &&score, int key_base) {
        if (p.softcap > 0.f) {
#pragma unroll
            for (int i = 0; i < kScores; ++i)
                score(i) = p.softcap * ptx::tanh_approx(score(i) * p.softcap_scale);
        }
        // Mask only slices that cross the key end, the diagonal or a window edge.
        const bool crosses_end = key_base + 16 > n_end;
        const bool crosses_hi = seq.has_hi && int64_t(key_base + 15) > pos_first + seq.hi;
        const bool crosses_lo = seq.has_lo && int64_t(key_base) < int64_t(pos_last) + seq.lo;
        if (crosses_end || crosses_hi || crosses_lo) {
#pragma unroll
            for (int i = 0; i < kScores; ++i) {
                const int col = key_base + score_key(i);
                if (col >= n_end || !seq.visible(row_pos[score_row(i)], col)) score(i) = -CUDART_INF_F;
            }
        }
        // O is rescaled only when some row of the warp has a new maximum
        // (alpha is then exactly 1 for the others: skipping is exact).
        float alpha[2], m_scaled[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float v[kScores / 2];  // the row's scores, reduced pairwise
            int n = 0;
#pragma unroll
            for (int i = 0; i < kScores; ++i)
                if (score_row(i) == r) v[n++] = score(i);
#pragma unroll
            for (int w = 1; w < kScores / 2; w *= 2)
#pragma unroll
                for (int j = 0; j + w < kScores / 2; j += 2 * w) v[j] = fmaxf(v[j], v[j + w]);
            const float mx = row_max_across_lanes(fmaxf(row_max[r], v[0]));
            m_scaled[r] = mx == -CUDART_INF_F ? 0.f : mx * p.scale_log2;
            alpha[r] =
                mx == row_max[r] ? 1.f : ptx::exp2_approx(row_max[r] * p.scale_log2 - m_scaled[r]);
            row_max[r] = mx;
            row_sum[r] *= alpha[r];
        }
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
            for (int nt = 0; nt < kAccTiles; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[nt][e] *= alpha[acc_row(e)];
        }
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int i = 0; i < kScores; ++i)
                if (score_row(i) == r) {
                    score(i) = ptx::exp2_approx(fmaf(score(i), p.scale_log2, -m_scaled[r]));
                    row_sum[r] += score(i);
                }
    };

    // One 16-key slice with keys on M. `slice_addr`: the slice's K rows in
    // the stage (V at the same offsets plus v_off's); `key_base`: its first key.
    auto keys_on_m_slice = [&](auto slice_addr, int key_base) {  // generic: only built if used
        // S^T, keys g and g + 8 (elements 0-1, 2-3) x query rows 2t, 2t + 1:
        // even and odd k-steps accumulate apart, halving the dependent chain.
        float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t f[4];  // (keys 0-7, 8-15) x (columns 0-7, 8-15) as ldmatrix lays them out
            ptx::ldmatrix_x4(f, slice_addr + k_off[kk]);
            const uint32_t a[4] = {f[0], f[2], f[1], f[3]};
            ptx::mma_16816<kBf16>(c[kk % 2], a, q_frag[kk][0], q_frag[kk][1]);
        }
        float s[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) s[e] = c[0][e] + c[1][e];
        softmax_slice([&](int i) -> float & { return s[i]; }, key_base);
        // P^T as the B operand (lane: keys 2t, 2t + 1 of row g): movmatrix
        // transposes the (key, row) fragments of S^T into it.
        const uint32_t b0 = ptx::movmatrix_trans(Elem<kBf16>::pack(s[0], s[1]));  // keys 0-7
        const uint32_t b1 = ptx::movmatrix_trans(Elem<kBf16>::pack(s[2], s[3]));  // keys 8-15
        // O^T += V^T P^T, 16 of the warp's columns per MMA.
#pragma unroll
        for (int mt = 0; mt < kAccTiles; ++mt) {
            uint32_t f[4];  // (keys 0-7, 8-15) x (columns 0-7, 8-15), transposed
            ptx::ldmatrix_x4_trans(f, slice_addr + v_off[mt]);
            const uint32_t a[4] = {f[0], f[2], f[1], f[3]};
            ptx::mma_16816<kBf16>(acc[mt], a, b0, b1);
        }
    };

    int stage = 0;  // i % kStages, kept without a division
    for (int i = 0; i < num_tiles; ++i) {
        if constexpr (kKeepOffsets) {
            if constexpr (!kKeysOnM) ptx::keep_in_register(q_addr);
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) ptx::keep_in_register(k_off[kk]);
#pragma unroll
            for (int np = 0; np < Cfg::kOTiles / 2; ++np) ptx::keep_in_register(v_off[np]);
        }
        const int cur_stage = stage;  // tile i's
        const uint32_t stage_addr = kv_addr0 + cur_stage * (2 * BN * D * 2);
        const int refill_stage = stage == 0 ? kStages - 1 : stage - 1;  // (i + kStages - 1) % kStages
        stage = stage == kStages - 1 ? 0 : stage + 1;
        if constexpr (kRefillAfterCompute) {
            ptx::cp_async_wait<kStages - 1>();  // tile i has landed
            __syncthreads();
            // Cluster merge: the inbox armed; the peer may push once it has
            // ended its keys. Relaxed: a release arrival is a GPU-scope
            // membar, which waits for the thread's copies in flight (after
            // Q's fragments it cost B8 H32/8 S8192 1.3 us; kernel-notes d78).
            if (kClusterMerge && i == num_tiles - 1) ptx::cluster_arrive_relaxed();
        } else {
            ptx::cp_async_wait<kStages - 2>();  // tile i has landed
            __syncthreads();                    // and every warp is done with tile i - 1
            refill(i + kStages - 1, refill_stage);
        }

        const T *sK = sKV + cur_stage * 2 * BN * D;
        const T *sV = sK + BN * D;
        // The warp's slices of this tile, one after the other (online softmax
        // state carried across them).
#pragma unroll
        for (int sl = 0; sl < Cfg::kSlices; ++sl) {
            const int slice_row = (key_group * Cfg::kSlices + sl) * 16;  // first row in the stage
            const int key_base = key0 + i * BN + slice_row;  // this slice's 16 keys
            if constexpr (kKeysOnM) {
                keys_on_m_slice(stage_addr + sl * 16 * D * 2, key_base);
            } else {
                float s[2][4];
#pragma unroll
                for (int n = 0; n < 2; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk) {
                    uint32_t a[4], b[4];
                    if constexpr (kHoist) {
                        ptx::ldmatrix_x4(a, q_addr + kk * 32);
                        ptx::ldmatrix_x4(b, stage_addr + k_off[kk] + sl * 16 * D * 2);
                    } else {
                        ptx::ldmatrix_x4(a, ptx::smem_addr(sQ + (lane % 8 + (lane / 8) % 2 * 8) * kRow +
                                                           kk * 16 + lane / 16 * 8));
                        const int k_row = slice_row + lane % 8 + lane / 16 * 8;
                        const int k_chunk = kk * 2 + (lane / 8) % 2;
                        ptx::ldmatrix_x4(b, ptx::smem_addr(sK + decode_kv_offset<D>(k_row, k_chunk)));
                    }
                    ptx::mma_16816<kBf16>(s[0], a, b[0], b[1]);
                    ptx::mma_16816<kBf16>(s[1], a, b[2], b[3]);
                }

                softmax_slice([&](int i) -> float & { return s[i / 4][i % 4]; }, key_base);

                // O += P V over the slice's 16 keys and the warp's columns of O.
                uint32_t a[4];
                a[0] = Elem<kBf16>::pack(s[0][0], s[0][1]);
                a[1] = Elem<kBf16>::pack(s[0][2], s[0][3]);
                a[2] = Elem<kBf16>::pack(s[1][0], s[1][1]);
                a[3] = Elem<kBf16>::pack(s[1][2], s[1][3]);
#pragma unroll
                for (int np = 0; np < Cfg::kOTiles / 2; ++np) {
                    uint32_t b[4];
                    if constexpr (kHoist) {
                        ptx::ldmatrix_x4_trans(b, stage_addr + v_off[np] + sl * 16 * D * 2);
                    } else {
                        const int v_row = slice_row + lane % 8 + (lane / 8) % 2 * 8;
                        const int v_chunk = (d_part * Cfg::kDv + np * 16) / 8 + lane / 16;
                        ptx::ldmatrix_x4_trans(b,
                                               ptx::smem_addr(sV + decode_kv_offset<D>(v_row, v_chunk)));
                    }
                    ptx::mma_16816<kBf16>(acc[2 * np], a, b[0], b[1]);
                    ptx::mma_16816<kBf16>(acc[2 * np + 1], a, b[2], b[3]);
                }
            }
        }
        if constexpr (kRefillAfterCompute) {
            __syncthreads();  // every warp is done with tile i's stage: refill it now
            refill(i + kStages, cur_stage);
        }
    }

    // Merge the key groups' states: each publishes (max in base-2 units, sum,
    // unnormalized O) in shared memory over the drained pipeline stages.
    ptx::cp_async_wait<0>();
    __syncthreads();
    float *red = reinterpret_cast<float *>(sKV);
    float *red_m = red;                                   // [group][16]
    float *red_l = red_m + Cfg::kKeyGroups * Cfg::BM;     // [group][16]
    float *red_o = red_l + Cfg::kKeyGroups * Cfg::BM;     // [group][16][kRedRow]
    constexpr int kRedRow = decode_reduce_row(D);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = row_sum[r];
        if constexpr (kKeysOnM) {  // the row's 8 lanes of equal t
            sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            sum += __shfl_xor_sync(0xffffffffu, sum, 8);
            sum += __shfl_xor_sync(0xffffffffu, sum, 16);
        } else {  // the row's 4 lanes of equal g
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        }
        // Keys on M leaves rows 8-15 unwritten: launch_decode.cpp gives those
        // entry points at most 8 rows per KV head, so they hold no query and
        // the loop below never reads them.
        const int row = r == 0 ? lane_row0 : lane_row1;
        if (d_part == 0 && (kKeysOnM ? g : t) == 0) {
            red_m[key_group * Cfg::BM + row] =
                sum > 0.f ? row_max[r] * p.scale_log2 : -CUDART_INF_F;
            red_l[key_group * Cfg::BM + row] = sum;
        }
        float *o_row = red_o + (key_group * Cfg::BM + row) * kRedRow + d_part * Cfg::kDv;
        if constexpr (kKeysOnM) {
#pragma unroll
            for (int mt = 0; mt < kAccTiles; ++mt) {
                o_row[mt * 16 + g] = acc[mt][r];
                o_row[mt * 16 + g + 8] = acc[mt][r + 2];
            }
        } else {
#pragma unroll
            for (int nt = 0; nt < Cfg::kOTiles; ++nt)
                *reinterpret_cast<float2 *>(o_row + nt * 8 + 2 * t) =
                    make_float2(acc[nt][2 * r], acc[nt][2 * r + 1]);
        }
    }
    __syncthreads();

    // The whole answer of a row chunk from its state (m in base-2 units, l
    // the sum at m, out unnormalized): a sink joins the denominator with no
    // value row.
    auto finish = [&](const PackedRow &pr, int oc, float m, float l, const float (&out)[8]) {
        const float sink = p.sinks != nullptr ? p.sinks[pr.head] * kLog2e : -CUDART_INF_F;
        const float row_m = l > 0.f ? m : -CUDART_INF_F;
        const float mm = fmaxf(row_m, sink);
        const float keep = mm == -CUDART_INF_F ? 0.f : ptx::exp2_approx(row_m - mm);
        const float total = l * keep + (mm == -CUDART_INF_F ? 0.f : ptx::exp2_approx(sink - mm));
        const float inv = total > 0.f ? keep / total : 0.f;
        uint4 packed;
        packed.x = Elem<kBf16>::pack(out[0] * inv, out[1] * inv);
        packed.y = Elem<kBf16>::pack(out[2] * inv, out[3] * inv);
        packed.z = Elem<kBf16>::pack(out[4] * inv, out[5] * inv);
        packed.w = Elem<kBf16>::pack(out[6] * inv, out[7] * inv);
        T *dst = static_cast<T *>(p.o) + int64_t(batch) * p.o_stride.batch +
                 (seq.q_row0 + pr.pos) * p.o_stride.seq + int64_t(pr.head) * p.o_stride.head + oc * 8;
        *reinterpret_cast<uint4 *>(dst) = packed;
        if (oc == 0 && p.lse != nullptr)
            p.lse[batch * p.lse_batch_stride + pr.head * p.lse_head_stride + seq.q_row0 + pr.pos] =
                total > 0.f ? (mm + __log2f(total)) * kLn2 : -CUDART_INF_F;
    };

    // The state of row `row`'s columns 8c..8c+7 over this CTA's keys: the
    // key groups' states merged (m in base-2 units, l the sum at m, out
    // unnormalized).
    auto merge_key_groups = [&](int row, int c, float &m_out, float &l_out, float (&out)[8]) {
        float m = -CUDART_INF_F;
#pragma unroll
        for (int kg = 0; kg < Cfg::kKeyGroups; ++kg) m = fmaxf(m, red_m[kg * Cfg::BM + row]);
        float weight[Cfg::kKeyGroups];
        float l = 0.f;
#pragma unroll
        for (int kg = 0; kg < Cfg::kKeyGroups; ++kg) {
            weight[kg] = m == -CUDART_INF_F ? 0.f : ptx::exp2_approx(red_m[kg * Cfg::BM + row] - m);
            l += red_l[kg * Cfg::BM + row] * weight[kg];
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) out[e] = 0.f;
#pragma unroll
        for (int kg = 0; kg < Cfg::kKeyGroups; ++kg) {
            const float4 *src =
                reinterpret_cast<const float4 *>(red_o + (kg * Cfg::BM + row) * kRedRow + c * 8);
            const float4 x = src[0], y = src[1];
            out[0] += weight[kg] * x.x; out[1] += weight[kg] * x.y;
            out[2] += weight[kg] * x.z; out[3] += weight[kg] * x.w;
            out[4] += weight[kg] * y.x; out[5] += weight[kg] * y.y;
            out[6] += weight[kg] * y.z; out[7] += weight[kg] * y.w;
        }
        m_out = m;
        l_out = l;
    };

    // Cluster merge: the two splits of this row block run as one cluster of
    // two CTAs, and each finishes half of the row chunks (rank r: chunks c
    // with c % 2 == r). Each CTA pushes the states of the chunks its peer
    // finishes into the peer's inbox with asynchronous remote stores that
    // complete on the peer's inbox mbarrier, waits on its own, and finishes
    // its chunks from both states. The later CTA of the pair waits for
    // nothing but its own key-group merge and one push; no cluster barrier
    // at the end: a CTA exits once its peer's stores into it have landed,
    // and it reads nothing of the peer's (kernel-notes d78: against a pull
    // behind two barriers, B8 H32/8 S8192 74.37 -> 74.06 us on one H200, a
    // tie on another). No partials in global memory, no combine launch.
    if constexpr (kClusterMerge) {
        const unsigned peer = ptx::cluster_rank() ^ 1u;
        const uint32_t inbox = ptx::smem_addr(sInbox);
        const uint32_t peer_inbox = ptx::peer_smem(inbox, peer);
        const uint32_t peer_bar = ptx::peer_smem(ptx::smem_addr(inbox_bar), peer);
        constexpr uint32_t kInboxRow = kRow * 2;  // bytes; m and l past O's D * 2 bytes
        constexpr int kPasses = Cfg::BM * Cfg::kChunks / Cfg::kThreads;
        static_assert(kPasses * Cfg::kThreads == Cfg::BM * Cfg::kChunks && Cfg::kChunks % 2 == 0,
                      "whole passes, chunks in pairs");
        float own_o[kPasses][8], own_m[kPasses], own_l[kPasses];
        bool finishes[kPasses];
        if (num_tiles == 0) ptx::cluster_arrive_relaxed();  // no keys: no arrival in the loop
        ptx::cluster_wait();  // the peer has armed its inbox
#pragma unroll
        for (int pass = 0; pass < kPasses; ++pass) {
            const int idx = threadIdx.x + pass * Cfg::kThreads;
            const int row = idx / Cfg::kChunks, c = idx % Cfg::kChunks;
            const bool valid = packed_row(m_tile, row, kv_head, group).pos < seq.len_q;
            finishes[pass] = valid && (c & 1) != int(peer);
            if (!valid) continue;
            merge_key_groups(row, c, own_m[pass], own_l[pass], own_o[pass]);
            if (finishes[pass]) continue;
            const float(&o)[8] = own_o[pass];
            const uint32_t at = peer_inbox + uint32_t(row) * kInboxRow + uint32_t(c / 2) * 32u;
            ptx::st_async_peer_f32x4(at, make_float4(o[0], o[1], o[2], o[3]), peer_bar);
            ptx::st_async_peer_f32x4(at + 16u, make_float4(o[4], o[5], o[6], o[7]), peer_bar);
            if (c / 2 == 0)  // the row's max and sum, with its first chunk the peer finishes
                ptx::st_async_peer_f32x2(peer_inbox + uint32_t(row) * kInboxRow + uint32_t(D * 2 + 8),
                                         own_m[pass], own_l[pass], peer_bar);
        }
        ptx::mbarrier_wait(inbox_bar, 0);  // the peer's states of this CTA's chunks
        const unsigned char *inbox_bytes = reinterpret_cast<const unsigned char *>(sInbox);
#pragma unroll
        for (int pass = 0; pass < kPasses; ++pass) {
            if (!finishes[pass]) continue;
            const int idx = threadIdx.x + pass * Cfg::kThreads;
            const int row = idx / Cfg::kChunks, c = idx % Cfg::kChunks;
            const unsigned char *inbox_row = inbox_bytes + row * kInboxRow;
            const float4 *pushed = reinterpret_cast<const float4 *>(inbox_row + (c / 2) * 32);
            const float2 ml = *reinterpret_cast<const float2 *>(inbox_row + D * 2 + 8);
            const float4 x1 = pushed[0], y1 = pushed[1];
            const float m0 = own_m[pass], l0 = own_l[pass], m1 = ml.x, l1 = ml.y;
            const float(&o0)[8] = own_o[pass];
            const float m = fmaxf(m0, m1);
            const float w0 = m == -CUDART_INF_F ? 0.f : ptx::exp2_approx(m0 - m);
            const float w1 = m == -CUDART_INF_F ? 0.f : ptx::exp2_approx(m1 - m);
            const float out[8] = {o0[0] * w0 + x1.x * w1, o0[1] * w0 + x1.y * w1,
                                  o0[2] * w0 + x1.z * w1, o0[3] * w0 + x1.w * w1,
                                  o0[4] * w0 + y1.x * w1, o0[5] * w0 + y1.y * w1,
                                  o0[6] * w0 + y1.z * w1, o0[7] * w0 + y1.w * w1};
            finish(packed_row(m_tile, row, kv_head, group), c, m, l0 * w0 + l1 * w1, out);
        }
        return;
    }

    // Each thread finishes 8 consecutive columns of one row.
    const bool to_workspace = dp.partial_o != nullptr;
    for (int idx = threadIdx.x; idx < Cfg::BM * Cfg::kChunks; idx += Cfg::kThreads) {
        const int row = idx / Cfg::kChunks, c = idx % Cfg::kChunks;
        const PackedRow pr = packed_row(m_tile, row, kv_head, group);
        if (pr.pos >= seq.len_q) continue;
        // Paired: only the row's own head's half of O; `oc` is its column chunk.
        const int half = kPaired ? paired_half(pr.head, group) : 0;
        if (kPaired && c / (Cfg::kChunks / 2) != half) continue;
        const int oc = kPaired ? c % (Cfg::kChunks / 2) : c;
        float m, l, out[8];
        merge_key_groups(row, c, m, l, out);
        const int64_t q_row = p.cu_seqlens_q != nullptr
                                  ? seq.q_row0 + pr.pos
                                  : int64_t(batch) * p.seqlen_q + pr.pos;  // row in q_rows
        if (to_workspace) {
            // Partial result of this split: normalized O and its LSE (-inf: no key).
            const float inv = l > 0.f ? 1.f / l : 0.f;
            float *dst = dp.partial_o +
                         ((int64_t(split) * dp.q_rows + q_row) * p.num_q_heads + pr.head) * kOutDim + oc * 8;
            reinterpret_cast<float4 *>(dst)[0] =
                make_float4(out[0] * inv, out[1] * inv, out[2] * inv, out[3] * inv);
            reinterpret_cast<float4 *>(dst)[1] =
                make_float4(out[4] * inv, out[5] * inv, out[6] * inv, out[7] * inv);
            if (oc == 0)
                dp.partial_lse[(int64_t(split) * p.num_q_heads + pr.head) * dp.q_rows + q_row] =
                    l > 0.f ? (m + __log2f(l)) * kLn2 : -CUDART_INF_F;
        } else {
            finish(pr, oc, m, l, out);
        }
    }
}

}  // namespace fmha::decode

// Entry points, one per (dtype, head_dim, cache kind, form); named in
// launch_decode.cpp. `d` is the head_dim streamed (paired heads: twice theirs).
#define FMHA_DECODE_KERNEL_FORM(name, bf16, d, kv, paired, keys_on_m, cluster_merge)  \
    extern "C" __global__ void __launch_bounds__(fmha::decode_threads(d, kv))          \
        name(const fmha::DecodeParams p) {                                             \
        fmha::decode::decode<bf16, d, kv, paired, keys_on_m, cluster_merge>(p);        \
    }
#define FMHA_DECODE_KERNEL(name, bf16, d, kv, paired, keys_on_m)                       \
    FMHA_DECODE_KERNEL_FORM(name, bf16, d, kv, paired, keys_on_m, false)
#define FMHA_DECODE_ENTRY(name, bf16, d, kv) FMHA_DECODE_KERNEL(name, bf16, d, kv, false, false)

// The paged ones differ only in their tile traits.
#define FMHA_DECODE_ENTRIES(d)                                                         \
    FMHA_DECODE_ENTRY(fmha_decode_bf16_hd##d, true, d, fmha::DecodeKv::kDense)         \
    FMHA_DECODE_ENTRY(fmha_decode_fp16_hd##d, false, d, fmha::DecodeKv::kDense)        \
    FMHA_DECODE_ENTRY(fmha_decode_paged_bf16_hd##d, true, d, fmha::DecodeKv::kPaged)   \
    FMHA_DECODE_ENTRY(fmha_decode_paged_fp16_hd##d, false, d, fmha::DecodeKv::kPaged)

FMHA_DECODE_ENTRIES(64)
FMHA_DECODE_ENTRIES(96)
FMHA_DECODE_ENTRIES(128)
FMHA_DECODE_ENTRIES(256)
FMHA_DECODE_ENTRIES(512)
// hd64 / hd96 KV heads read two at a time as one 128- / 192-column head;
// paired hd96 on the 3-stage or the shallow tile (launch_decode.cpp chooses).
#define FMHA_DECODE_PAIRED_ENTRY(name, bf16, d, kv) FMHA_DECODE_KERNEL(name, bf16, 2 * d, kv, true, false)
FMHA_DECODE_PAIRED_ENTRY(fmha_decode_paired_bf16_hd64, true, 64, fmha::DecodeKv::kDense)
FMHA_DECODE_PAIRED_ENTRY(fmha_decode_paired_fp16_hd64, false, 64, fmha::DecodeKv::kDense)
FMHA_DECODE_PAIRED_ENTRY(fmha_decode_paired_bf16_hd96, true, 96, fmha::DecodeKv::kDense)
FMHA_DECODE_PAIRED_ENTRY(fmha_decode_paired_fp16_hd96, false, 96, fmha::DecodeKv::kDense)
FMHA_DECODE_PAIRED_ENTRY(fmha_decode_paired_shallow_bf16_hd96, true, 96, fmha::DecodeKv::kDenseShallow)
FMHA_DECODE_PAIRED_ENTRY(fmha_decode_paired_shallow_fp16_hd96, false, 96, fmha::DecodeKv::kDenseShallow)
// Dense hd128 on the narrow tile (tile_traits.h; launch_decode.cpp chooses).
FMHA_DECODE_ENTRY(fmha_decode_narrow_bf16_hd128, true, 128, fmha::DecodeKv::kDenseNarrow)
FMHA_DECODE_ENTRY(fmha_decode_narrow_fp16_hd128, false, 128, fmha::DecodeKv::kDenseNarrow)
// Dense hd96 on the shallow tile (tile_traits.h; launch_decode.cpp chooses).
FMHA_DECODE_ENTRY(fmha_decode_shallow_bf16_hd96, true, 96, fmha::DecodeKv::kDenseShallow)
FMHA_DECODE_ENTRY(fmha_decode_shallow_fp16_hd96, false, 96, fmha::DecodeKv::kDenseShallow)
// hd256 and hd512, dense and paged, on the compact tile where the device's
// shared memory per block cannot take the usual one (launch_decode.cpp).
FMHA_DECODE_ENTRY(fmha_decode_compact_bf16_hd256, true, 256, fmha::DecodeKv::kDenseCompact)
FMHA_DECODE_ENTRY(fmha_decode_compact_fp16_hd256, false, 256, fmha::DecodeKv::kDenseCompact)
FMHA_DECODE_ENTRY(fmha_decode_compact_bf16_hd512, true, 512, fmha::DecodeKv::kDenseCompact)
FMHA_DECODE_ENTRY(fmha_decode_compact_fp16_hd512, false, 512, fmha::DecodeKv::kDenseCompact)
FMHA_DECODE_ENTRY(fmha_decode_paged_compact_bf16_hd256, true, 256, fmha::DecodeKv::kPagedCompact)
FMHA_DECODE_ENTRY(fmha_decode_paged_compact_fp16_hd256, false, 256, fmha::DecodeKv::kPagedCompact)
FMHA_DECODE_ENTRY(fmha_decode_paged_compact_bf16_hd512, true, 512, fmha::DecodeKv::kPagedCompact)
FMHA_DECODE_ENTRY(fmha_decode_paged_compact_fp16_hd512, false, 512, fmha::DecodeKv::kPagedCompact)
// Paged hd64 on 128-key tiles (tile_traits.h).
FMHA_DECODE_ENTRY(fmha_decode_paged_wide_bf16_hd64, true, 64, fmha::DecodeKv::kPagedWide)
FMHA_DECODE_ENTRY(fmha_decode_paged_wide_fp16_hd64, false, 64, fmha::DecodeKv::kPagedWide)
// Keys on M for grids of at most 8 query rows per KV head (launch_decode.cpp
// chooses; kernel-notes d67): hd128's three dense-or-paged tiles and paired hd64.
#define FMHA_DECODE_KEYS_ON_M_ENTRY(name, bf16, d, kv) FMHA_DECODE_KERNEL(name, bf16, d, kv, false, true)
FMHA_DECODE_KEYS_ON_M_ENTRY(fmha_decode_r8_bf16_hd128, true, 128, fmha::DecodeKv::kDense)
FMHA_DECODE_KEYS_ON_M_ENTRY(fmha_decode_r8_fp16_hd128, false, 128, fmha::DecodeKv::kDense)
FMHA_DECODE_KEYS_ON_M_ENTRY(fmha_decode_narrow_r8_bf16_hd128, true, 128, fmha::DecodeKv::kDenseNarrow)
FMHA_DECODE_KEYS_ON_M_ENTRY(fmha_decode_narrow_r8_fp16_hd128, false, 128, fmha::DecodeKv::kDenseNarrow)
FMHA_DECODE_KEYS_ON_M_ENTRY(fmha_decode_paged_r8_bf16_hd128, true, 128, fmha::DecodeKv::kPaged)
FMHA_DECODE_KEYS_ON_M_ENTRY(fmha_decode_paged_r8_fp16_hd128, false, 128, fmha::DecodeKv::kPaged)
FMHA_DECODE_KERNEL(fmha_decode_paired_r8_bf16_hd64, true, 128, fmha::DecodeKv::kDense, true, true)
FMHA_DECODE_KERNEL(fmha_decode_paired_r8_fp16_hd64, false, 128, fmha::DecodeKv::kDense, true, true)
// Keys on M with two splits run as clusters of two CTAs that merge their
// states in shared memory (sm_90 images; launch_decode.cpp, cluster_merge).
#define FMHA_DECODE_CLUSTER_MERGE_ENTRY(name, bf16, d, kv) FMHA_DECODE_KERNEL_FORM(name, bf16, d, kv, false, true, true)
FMHA_DECODE_CLUSTER_MERGE_ENTRY(fmha_decode_r8_cluster_bf16_hd128, true, 128, fmha::DecodeKv::kDense)
FMHA_DECODE_CLUSTER_MERGE_ENTRY(fmha_decode_r8_cluster_fp16_hd128, false, 128, fmha::DecodeKv::kDense)
FMHA_DECODE_CLUSTER_MERGE_ENTRY(fmha_decode_r8_cluster_lone_bf16_hd128, true, 128, fmha::DecodeKv::kDenseLone)
FMHA_DECODE_CLUSTER_MERGE_ENTRY(fmha_decode_r8_cluster_lone_fp16_hd128, false, 128, fmha::DecodeKv::kDenseLone)
