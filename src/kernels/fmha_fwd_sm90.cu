// Hopper (sm_90a) forward attention: TMA loads, wgmma, warp specialization.
//
// Warpgroup 0 is the producer: one thread issues TMA copies of Q once and of
// K and V tiles into a ring of `stages` buffers, each guarded by a "full"
// mbarrier (TMA bytes landed) and an "empty" one (consumers are done). The
// producer gives most of its registers back (setmaxnreg) to the consumer
// warpgroups, each of which owns 64 query rows: S = Q·Kᵀ on wgmma from
// shared memory, online softmax in registers (base 2, scale folded into one
// FFMA), then O += P·V on wgmma with P taken straight from registers. The
// epilogue stages O in the consumer's (now dead) rows of Q with the TMA
// 128-byte swizzle and writes it with a TMA store clipped at the tensor edge.
// For short queries the host may pack the query heads of one KV head into the
// M tile (Sm90Params::group_shift): Q and O boxes then take those heads'
// rows together (padded to a power of two), and K/V are read once per KV head
// instead of once per head. Sliding windows skip the key tiles no row of a
// block sees and mask the edges; a softcap caps each score with tanh before
// the softmax, and a sink logit joins the denominator in the epilogue (all
// three on their own entry points). A paged KV cache is read in TMA boxes of
// whole page chunks, one per lane of the producer warp (block table looked up
// by the lanes); over 16-row chunks the `_paged16` entry points stage V
// chunk-major and K group-major, so one box loads all of a chunk's V columns
// and one its K (config.cuh). Under a causal mask hd64's three consumers each
// stop at their own rows' last key tile; the producer releases the later
// stages for them.
// head_dim 512 splits D instead of rows: both consumers take
// the same 64 rows, each owning half of O's columns, and compute the whole S
// (or, with shared S, each half of it, summed through shared memory).
//
// This file holds the consumer main loop and the entry points; the pieces
// live in kernels/sm90/: config (tile constants, shared-memory layout),
// schedule (tiles, heads, key ranges), producer (TMA loads), mma (wgmma
// issues), softmax (masks, softcap, online softmax), epilogue (sinks,
// partials, O and LSE stores).
#include <math_constants.h>

#include "kernels/params.h"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/ptx/warpgroup.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/sequence.cuh"
#include "kernels/sm90/config.cuh"
#include "kernels/sm90/epilogue.cuh"
#include "kernels/sm90/mma.cuh"
#include "kernels/sm90/producer.cuh"
#include "kernels/sm90/schedule.cuh"
#include "kernels/sm90/softmax.cuh"
#include "kernels/tile_traits.h"

namespace fmha::sm90 {

#ifndef FMHA_SM90_PING_PONG
#define FMHA_SM90_PING_PONG 1  // build-time switch, kept to measure its worth
#endif
constexpr bool kPingPong = FMHA_SM90_PING_PONG != 0;


// Zeroes key rows [first_row, BN) of a V stage, split over the `count`
// consumer warpgroups that read it (this one is number `rank` of them), which
// then meet at a barrier. A sequence's last key tile may extend past its keys
// into rows the caller never wrote (a cache slot past seqused_k, padding after
// the packed keys): their P is 0, but 0 x NaN is NaN.
template <typename Cfg>
__device__ __forceinline__ void zero_v_tail(uint8_t *v_stage, int first_row, int rank, int count,
                                            int tid) {
    constexpr int BN = Cfg::BN;
    const int rows = BN - first_row;
    const int chunks = rows * 8 * Cfg::kBoxes;  // 16-byte chunks: 8 per 128-byte box row
    for (int i = rank * 128 + tid; i < chunks; i += 128 * count) {
        const int box = i / (rows * 8), rem = i % (rows * 8);
        *reinterpret_cast<uint4 *>(v_stage + box * Cfg::kVBoxStride +
                                   v_row_offset<Cfg>(first_row + rem / 8) + (rem % 8) * 16) =
            make_uint4(0, 0, 0, 0);
    }
    ptx::fence_proxy_async_shared();  // generic writes, then wgmma reads
    ptx::named_barrier_sync(kConsumersBarrier, 128 * count);
}

// Ping-pong: the consumer warpgroups take turns issuing their GEMMs (named
// barriers 8.., one per warpgroup), so one's softmax runs under another's
// GEMMs. The last warpgroup opens the ring once; warpgroup 0 closes it.
// Consumers sharing S meet at every tile's exchange anyway, so neither's
// softmax can run under the other's GEMMs: no turns (4% faster, h10).
template <typename Cfg>
struct Turns {
    int consumer;
    bool started = false;

    __device__ __forceinline__ void mine() {
        if constexpr (!kPingPong || Cfg::kConsumers < 2 || Cfg::kSharedS) return;
        if (!started) {
            started = true;
            if (consumer == Cfg::kConsumers - 1) ptx::named_barrier_arrive(8, 256);
        }
        ptx::named_barrier_sync(8 + consumer, 256);
    }
    __device__ __forceinline__ void yours() {
        if constexpr (!kPingPong || Cfg::kConsumers < 2 || Cfg::kSharedS) return;
        ptx::named_barrier_arrive(8 + (consumer + 1) % Cfg::kConsumers, 256);
    }
    __device__ __forceinline__ void finish() {
        if constexpr (!kPingPong || Cfg::kConsumers < 2 || Cfg::kSharedS) return;
        if (started && consumer == 0) ptx::named_barrier_sync(8, 256);
    }
};

// Waits for a K or V stage. Gathered stages were written by cp.async, outside
// the async proxy that wgmma reads through: fence before reading them.
template <typename Cfg>
__device__ __forceinline__ void wait_stage(uint64_t *full, uint32_t phase) {
    ptx::mbarrier_wait(full, phase);
    if constexpr (Cfg::kGatherKV) ptx::fence_proxy_async_shared();
}

template <bool kBf16, typename Cfg>
__device__ __forceinline__ void consume(const Sm90Params &params, const Smem<Cfg> &sm,
                                        int consumer, int tid) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, kStages = Cfg::kStages;
    const FwdParams &p = params.fwd;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    // This warpgroup's rows in each Q (and O) box; under split D every
    // consumer reads all rows and P·V reads the V boxes of its O columns.
    const int row_offset = consumer * Cfg::kConsumerRows;
    const uint8_t *q_mine = sm.q + row_offset * 128;
    uint8_t *o_mine = sm.o + row_offset * 128;
    const int col0 = Cfg::kSplitD ? consumer * Cfg::kDv : 0;  // first O column owned
    const int v_cols = col0 / 64 * Cfg::kVBoxStride;
    // S over this half of D. Broadcast from lane 0 so the compiler knows it is
    // warp-uniform and keeps the S descriptors in uniform registers (else 4
    // R2UR per wgmma: 683 against 483 instructions per key tile).
    const int kk0 = Cfg::kSharedS ? __shfl_sync(0xffffffffu, consumer, 0) * Cfg::kSSteps : 0;
    Turns<Cfg> turns{consumer};
    const int shift = params.group_shift;

    float o[Cfg::kOChunks][Cfg::kORegs];
    float sacc[Cfg::kSRegs];
    uint32_t qa[Cfg::kQRegArray][4];  // part of this consumer's Q, held (Cfg::kQRegSteps)
    uint32_t pa[BN / 16][4];
    int q_iter = 0, kv_iter = 0;
    const int stride = params.persistent ? gridDim.x : params.total_tiles;
    for (int idx = blockIdx.x; idx < params.total_tiles; idx += stride, ++q_iter) {
        if (past_walk<Cfg>(params, idx)) break;
        const Tile tile = walk_tile<Cfg>(params, idx);
        const Sequence seq = sequence_of(p, tile.batch);
        const int m0 = tile.m_block * BM;
        if (m0 >= tile_rows(seq, shift)) {  // as the producer: skipped without a barrier phase
            --q_iter;
            continue;
        }
        const int first_row = m0 + row_offset;
        const int row_base = first_row + warp * 16 + g;  // this thread's rows: +0, +8
        const int split = split_of<Cfg::kFastTileDecode>(params, idx);
        const KeyTiles keys = split_key_tiles(params, key_tiles<Cfg>(seq, m0, shift), split);
        // Loop bounds, warp-uniform by construction: with per-consumer key
        // ranges they are broadcast so the compiler knows it and keeps them in
        // uniform registers (those key loops have no others to spare).
        auto uniform = [](int x) {
            return Cfg::kConsumerKeyRanges ? __shfl_sync(0xffffffffu, x, 0) : x;
        };
        const int n_tiles = uniform(keys.count());
        const int n_mine = Cfg::kConsumerKeyRanges
                               ? uniform(consumer_tile_count<Cfg>(seq, keys, first_row, shift))
                               : n_tiles;
        const int n0 = uniform(keys.begin) * BN;  // first key of this split
        Softmax<Cfg> softmax;
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
            for (int i = 0; i < Cfg::kORegs; ++i) o[c][i] = 0.f;

        // With a separate O buffer, Q is free once the last S GEMM is done.
        auto release_q_early = [&](bool last_s_gemm) {
            if (Cfg::kSeparateO && last_s_gemm) ptx::mbarrier_arrive(sm.empty_q);
        };
        ptx::mbarrier_wait(sm.full_q, q_iter & 1);
        if constexpr (Cfg::kQRegSteps > 0) load_q_fragments<Cfg>(qa, q_mine, kk0, tid);
        if (n_mine > 0) {
            const int s0 = kv_iter % kStages;
            wait_stage<Cfg>(&sm.full_k[s0], (kv_iter / kStages) & 1);
            turns.mine();
            issue_s_gemm<kBf16, Cfg>(sacc, qa, q_mine, sm.k + s0 * Cfg::kKVBytes, kk0);
            turns.yours();
            ptx::wgmma_wait<0>();
            ptx::fence_registers(sacc);
            ptx::mbarrier_arrive(&sm.empty_k[s0]);
            if constexpr (Cfg::kSharedS) share_s<Cfg>(sacc, sm.shared_s, kv_iter & 1, consumer, tid);
            release_q_early(n_mine == 1);
            softmax.template update<true>(sacc, p, seq, n0, row_base, t, first_row, shift);
            pack_p<kBf16, Cfg>(pa, sacc);

            for (int j = 1; j < n_mine; ++j) {
                const int it = kv_iter + j;
                const int s = it % kStages, s_prev = (it - 1) % kStages;
                // Issue S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} back to back; the
                // softmax of S_j then runs while P·V is still on the tensor cores.
                wait_stage<Cfg>(&sm.full_k[s], (it / kStages) & 1);
                wait_stage<Cfg>(&sm.full_v[s_prev], ((it - 1) / kStages) & 1);
                turns.mine();
                issue_s_gemm<kBf16, Cfg>(sacc, qa, q_mine, sm.k + s * Cfg::kKVBytes, kk0);
                issue_pv_gemm<kBf16, Cfg>(o, pa, sm.v + s_prev * Cfg::kKVBytes + v_cols);
                turns.yours();
                ptx::wgmma_wait<1>();  // S_j is ready (groups retire in order)
                ptx::fence_registers(sacc);
                ptx::mbarrier_arrive(&sm.empty_k[s]);
                if constexpr (Cfg::kSharedS) share_s<Cfg>(sacc, sm.shared_s, it & 1, consumer, tid);
                release_q_early(j == n_mine - 1);
                softmax.template update<false>(sacc, p, seq, n0 + j * BN, row_base, t, first_row,
                                               shift);
                ptx::wgmma_wait<0>();  // P_{j-1}·V_{j-1} is done: O and P may change
#pragma unroll
                for (int c = 0; c < Cfg::kOChunks; ++c) ptx::fence_registers(o[c]);
                ptx::mbarrier_arrive(&sm.empty_v[s_prev]);
                softmax.rescale(o);
                pack_p<kBf16, Cfg>(pa, sacc);
            }

            const int it_last = kv_iter + n_mine - 1;
            const int s_last = it_last % kStages;
            wait_stage<Cfg>(&sm.full_v[s_last], (it_last / kStages) & 1);
            // Only lengths from cu_seqlens_k / seqused_k stop inside a tensor;
            // a page's rows past the sequence hold whatever the cache has.
            // Only the block's last tile can hold such rows, and the consumers
            // that compute it zero them.
            const int tail_keys = seq.len_k - (n0 + (n_mine - 1) * BN);
            if (tail_keys < BN && (p.cu_seqlens_k != nullptr || p.seqused_k != nullptr ||
                                   p.block_table != nullptr)) {
                const TileReaders readers =
                    last_tile_readers<Cfg>(seq, keys, n_tiles, m0, consumer, shift);
                zero_v_tail<Cfg>(sm.v + s_last * Cfg::kKVBytes, tail_keys, readers.rank,
                                 readers.count, tid);
            }
            turns.mine();
            issue_pv_gemm<kBf16, Cfg>(o, pa, sm.v + s_last * Cfg::kKVBytes + v_cols);
            turns.yours();
            ptx::wgmma_wait<0>();
#pragma unroll
            for (int c = 0; c < Cfg::kOChunks; ++c) ptx::fence_registers(o[c]);
            ptx::mbarrier_arrive(&sm.empty_v[s_last]);
        } else {
            release_q_early(true);
        }
        // The turns of the tiles this consumer skipped: the other consumers'
        // ping-pong goes on (n_tiles + 1 turns per block for each).
        if (n_tiles > 0)
            for (int k = n_mine > 0 ? n_mine + 1 : 0; k <= n_tiles; ++k) {
                turns.mine();
                turns.yours();
            }
        kv_iter += n_tiles;

        // Epilogue: normalize; the output (or this split's partials) and the LSE.
        float lse[2], inv[2], sums[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float sum = softmax.row_sum[r];
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            sums[r] = sum;
            inv[r] = sum > 0.f ? 1.f / sum : 0.f;  // a row that saw no key: O = 0
            lse[r] = sum > 0.f ? (softmax.row_max[r] * p.scale_log2 + __log2f(sum)) *
                                     0.6931471805599453f
                               : -CUDART_INF_F;
        }
        // Sinks join the whole answer's denominator; split partials leave them
        // to the combine kernel.
        if (Cfg::kScoreMods && p.sinks != nullptr && params.partial_o == nullptr)
            add_sinks(params, tile, softmax.row_max, sums, row_base, inv, lse);
        if (params.partial_o != nullptr) {
            store_partials<Cfg>(params, o, inv, lse, seq, tile, split, row_base, col0, t);
        } else {
            store_output<kBf16, Cfg>(params, o, inv, lse, seq, tile, o_mine, first_row,
                                     row_base, col0, consumer, tid);
        }
        if constexpr (!Cfg::kSeparateO) {
            // O was staged in Q's rows: Q is free once the store has read them.
            ptx::named_barrier_sync(1 + consumer, 128);
            ptx::mbarrier_arrive(sm.empty_q);
        }
    }
    turns.finish();
    if (tid == 0) ptx::tma_store_wait_read();  // shared memory must outlive the stores
}

template <bool kBf16, int D, int kShape, bool kScoreMods, Sm90Variant kVariant>
__device__ __forceinline__ void forward(const Sm90Params &params) {
    using Cfg = Config<D, kShape, kScoreMods, kVariant>;
    extern __shared__ uint8_t smem_raw[];
    const Smem<Cfg> sm(smem_raw);
    if (threadIdx.x == 0) {
        ptx::mbarrier_init(sm.full_q, 1);
        ptx::mbarrier_init(sm.empty_q, Cfg::kConsumers * 128);
        // TMA stages: the leader's one arrival (and the bytes); gathered
        // ones: one per producer thread, when its copies land.
        constexpr uint32_t kFullCount = Cfg::kGatherKV ? 128 : 1;
        for (int s = 0; s < Cfg::kStages; ++s) {
            ptx::mbarrier_init(&sm.full_k[s], kFullCount);
            ptx::mbarrier_init(&sm.full_v[s], kFullCount);
            ptx::mbarrier_init(&sm.empty_k[s], Cfg::kConsumers * 128);
            ptx::mbarrier_init(&sm.empty_v[s], Cfg::kConsumers * 128);
        }
        ptx::fence_mbarrier_init();
    }
    if constexpr (Cfg::kCompactWalk) build_compact_walk<Cfg>(params);
    __syncthreads();

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
        if constexpr (Cfg::kGatherKV) {
            produce<Cfg, true>(params, sm, threadIdx.x);
        } else if (Cfg::kChunkMajorV || params.paged_chunks > 0) {  // `_paged16`: paged only
            if (threadIdx.x < 32) produce<Cfg, true>(params, sm, threadIdx.x);
        } else if (threadIdx.x == 0) {
            produce<Cfg, false>(params, sm, 0);
        }
    } else {
        ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
        consume<kBf16, Cfg>(params, sm, warpgroup - 1, threadIdx.x % 128);
    }
}

}  // namespace fmha::sm90

// Entry points per (dtype, head dim, tile shape), each plain and with score
// modifiers (`_scoremod`: sliding windows, softcap, sinks); named in
// launch_sm90.cpp. hd64's narrow-row tile serves windows only; its row-mask
// entry point, short causal problems without score modifiers.
#define FMHA_SM90_ENTRY_VARIANT(name, bf16, d, shape, mods, variant)                    \
    extern "C" __global__ void __launch_bounds__(fmha::sm90_threads(d, shape), 1)       \
        name(const __grid_constant__ fmha::Sm90Params params) {                         \
        fmha::sm90::forward<bf16, d, shape, mods, fmha::Sm90Variant::variant>(params);  \
    }
#define FMHA_SM90_ENTRY(name, bf16, d, shape, mods) \
    FMHA_SM90_ENTRY_VARIANT(name, bf16, d, shape, mods, kPlain)
#define FMHA_SM90_ENTRY_WALK(name, bf16, d) \
    FMHA_SM90_ENTRY_VARIANT(name, bf16, d, fmha::kSm90Default, false, kCompactWalk)
#define FMHA_SM90_ENTRY_PAGED16(name, bf16, d, shape) \
    FMHA_SM90_ENTRY_VARIANT(name, bf16, d, shape, false, kPagedChunks16)
#define FMHA_SM90_ENTRY_GATHER_SHAPE(name, bf16, d, shape)                      \
    FMHA_SM90_ENTRY_VARIANT(name, bf16, d, shape, false, kPagedGather)          \
    FMHA_SM90_ENTRY_VARIANT(name##_scoremod, bf16, d, shape, true, kPagedGather)
#define FMHA_SM90_ENTRY_GATHER(name, bf16, d) \
    FMHA_SM90_ENTRY_GATHER_SHAPE(name, bf16, d, fmha::kSm90Default)
#define FMHA_SM90_ENTRIES(dt, bf16, d, suffix, shape)                                   \
    FMHA_SM90_ENTRY(fmha_fwd_sm90_##dt##_hd##d##suffix, bf16, d, shape, false)          \
    FMHA_SM90_ENTRY(fmha_fwd_sm90_##dt##_hd##d##suffix##_scoremod, bf16, d, shape, true)

FMHA_SM90_ENTRIES(bf16, true, 64, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(bf16, true, 96, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(bf16, true, 128, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(bf16, true, 128, _wide, fmha::kSm90WideKeys)
FMHA_SM90_ENTRIES(bf16, true, 256, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(bf16, true, 512, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(bf16, true, 512, _shared_s, fmha::kSm90SharedS)
FMHA_SM90_ENTRY(fmha_fwd_sm90_bf16_hd64_narrow_scoremod, true, 64, fmha::kSm90NarrowRows, true)
FMHA_SM90_ENTRY(fmha_fwd_sm90_bf16_hd64_rowmask, true, 64, fmha::kSm90RowMasks, false)
FMHA_SM90_ENTRIES(fp16, false, 64, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(fp16, false, 96, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(fp16, false, 128, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(fp16, false, 128, _wide, fmha::kSm90WideKeys)
FMHA_SM90_ENTRIES(fp16, false, 256, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(fp16, false, 512, , fmha::kSm90Default)
FMHA_SM90_ENTRIES(fp16, false, 512, _shared_s, fmha::kSm90SharedS)
FMHA_SM90_ENTRY(fmha_fwd_sm90_fp16_hd64_narrow_scoremod, false, 64, fmha::kSm90NarrowRows, true)
FMHA_SM90_ENTRY(fmha_fwd_sm90_fp16_hd64_rowmask, false, 64, fmha::kSm90RowMasks, false)
// Packed (varlen) Q without causal head groups, on a persistent grid: the
// plain default tiles walking only the real query blocks (kernel-notes h26).
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_bf16_hd64_varlen, true, 64)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_bf16_hd96_varlen, true, 96)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_bf16_hd128_varlen, true, 128)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_bf16_hd256_varlen, true, 256)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_fp16_hd64_varlen, false, 64)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_fp16_hd96_varlen, false, 96)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_fp16_hd128_varlen, false, 128)
FMHA_SM90_ENTRY_WALK(fmha_fwd_sm90_fp16_hd256_varlen, false, 256)
// A paged cache read in 16-row chunks (pages of 16, or any size whose chunk
// is 16 rows), plain default and wide tiles with several 64-column boxes per
// row: V chunk-major and K group-major, one TMA box each per chunk
// (kernel-notes h28, h29, h31).
FMHA_SM90_ENTRY_PAGED16(fmha_fwd_sm90_bf16_hd128_paged16, true, 128, fmha::kSm90Default)
FMHA_SM90_ENTRY_PAGED16(fmha_fwd_sm90_bf16_hd256_paged16, true, 256, fmha::kSm90Default)
FMHA_SM90_ENTRY_PAGED16(fmha_fwd_sm90_fp16_hd128_paged16, false, 128, fmha::kSm90Default)
FMHA_SM90_ENTRY_PAGED16(fmha_fwd_sm90_fp16_hd256_paged16, false, 256, fmha::kSm90Default)
FMHA_SM90_ENTRY_PAGED16(fmha_fwd_sm90_bf16_hd128_wide_paged16, true, 128, fmha::kSm90WideKeys)
FMHA_SM90_ENTRY_PAGED16(fmha_fwd_sm90_fp16_hd128_wide_paged16, false, 128, fmha::kSm90WideKeys)
// A paged cache whose pages no TMA box fits (1-15 rows: SGLang's 1),
// default tiles, plain and with score modifiers: K/V rows gathered by the
// producer warpgroup with cp.async (kernel-notes h34).
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_bf16_hd64_gather, true, 64)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_bf16_hd96_gather, true, 96)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_bf16_hd128_gather, true, 128)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_bf16_hd256_gather, true, 256)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_fp16_hd64_gather, false, 64)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_fp16_hd96_gather, false, 96)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_fp16_hd128_gather, false, 128)
FMHA_SM90_ENTRY_GATHER(fmha_fwd_sm90_fp16_hd256_gather, false, 256)
// hd512 (MLA-style decode over one-row pages): both split-D tiles, plain
// and with score modifiers (kernel-notes h39, h41).
FMHA_SM90_ENTRY_GATHER_SHAPE(fmha_fwd_sm90_bf16_hd512_gather, true, 512, fmha::kSm90Default)
FMHA_SM90_ENTRY_GATHER_SHAPE(fmha_fwd_sm90_bf16_hd512_shared_s_gather, true, 512, fmha::kSm90SharedS)
FMHA_SM90_ENTRY_GATHER_SHAPE(fmha_fwd_sm90_fp16_hd512_gather, false, 512, fmha::kSm90Default)
FMHA_SM90_ENTRY_GATHER_SHAPE(fmha_fwd_sm90_fp16_hd512_shared_s_gather, false, 512, fmha::kSm90SharedS)
