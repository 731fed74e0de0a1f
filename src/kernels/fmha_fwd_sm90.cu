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
#include <math_constants.h>

#include "kernels/numeric.cuh"
#include "kernels/params.h"
#include "kernels/ptx/math.cuh"
#include "kernels/ptx/mbarrier.cuh"
#include "kernels/ptx/tma.cuh"
#include "kernels/ptx/warpgroup.cuh"
#include "kernels/ptx/wgmma.cuh"
#include "kernels/tile_traits.h"

namespace fmha::sm90 {

template <int D>
struct Config {
    static constexpr Sm90Tile kTile = sm90_tile(D);
    static constexpr int BM = kTile.block_m;
    static constexpr int BN = kTile.block_n;
    static constexpr int kConsumers = kTile.consumers;
    static constexpr int kStages = kTile.stages;
    static constexpr int Dp = kTile.padded_dim;
    static constexpr int kBoxes = Dp / 64;           // 64-column TMA boxes per row
    static constexpr int kQBytes = BM * Dp * 2;
    static constexpr int kKVBytes = BN * Dp * 2;     // one K or V stage
    static constexpr int kSRegs = BN / 2;            // S accumulator per thread
    static constexpr int kOChunkN = Dp >= 128 ? 128 : 64;
    static constexpr int kOChunks = Dp / kOChunkN;   // wgmma issues per k-step of P·V
    static constexpr int kORegs = kOChunkN / 2;
    static constexpr int kProducerRegs = 24;
    static constexpr int kConsumerRegs = 240;
    static_assert(BM == 64 * kConsumers, "one consumer warpgroup per 64 rows");
    static_assert(BN == 64 || BN == 128, "wgmma wrappers exist for N = 64 and 128");
};

template <int N>
struct SGemm;
template <>
struct SGemm<64> {
    template <bool kBf16>
    __device__ __forceinline__ static void run(float (&d)[32], uint64_t a, uint64_t b, int acc) {
        ptx::wgmma_m64n64k16_ss<kBf16, 0>(d, a, b, acc);
    }
};
template <>
struct SGemm<128> {
    template <bool kBf16>
    __device__ __forceinline__ static void run(float (&d)[64], uint64_t a, uint64_t b, int acc) {
        ptx::wgmma_m64n128k16_ss<kBf16, 0>(d, a, b, acc);
    }
};

#ifndef FMHA_SM90_PING_PONG
#define FMHA_SM90_PING_PONG 1  // build-time switch, kept to measure its worth
#endif
constexpr bool kPingPong = FMHA_SM90_PING_PONG != 0;

// O chunk += P (registers) · V chunk (MN-major in shared memory).
template <bool kBf16, int N>
__device__ __forceinline__ void pv_gemm(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
    if constexpr (N == 64) ptx::wgmma_m64n64k16_rs<kBf16, 1>(d, a, b, 1);
    else ptx::wgmma_m64n128k16_rs<kBf16, 1>(d, a, b, 1);
}

// Issues S = Q·Kᵀ for one K tile (one commit group). Both operands are
// K-major: 8-row groups 1024 bytes apart; a k-step of 16 columns is 32 bytes
// inside the swizzled 128-byte row, and every 4 k-steps move to the next box.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void issue_s_gemm(float (&sacc)[Cfg::kSRegs], const uint8_t *q_rows,
                                             const uint8_t *k_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::Dp / 16; ++kk) {
        const int box = kk / 4, koff = (kk % 4) * 32;
        const uint64_t a = ptx::smem_desc_sw128(q_rows + box * Cfg::BM * 128 + koff, 16, 1024);
        const uint64_t b = ptx::smem_desc_sw128(k_tile + box * Cfg::BN * 128 + koff, 16, 1024);
        SGemm<Cfg::BN>::template run<kBf16>(sacc, a, b, kk > 0);
    }
    ptx::wgmma_commit();
}

// Issues O += P·V for one V tile (one commit group). V is MN-major (head dim
// contiguous): 64-column boxes are BN*128 bytes apart (lbo), 8-key groups
// 1024 bytes apart (sbo); a k-step of 16 keys is 2048 bytes.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void issue_pv_gemm(float (&o)[Cfg::kOChunks][Cfg::kORegs],
                                              const uint32_t (&pa)[Cfg::BN / 16][4],
                                              const uint8_t *v_tile) {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c) {
            const uint8_t *tile = v_tile + (c * Cfg::kOChunkN / 64) * Cfg::BN * 128 + kk * 2048;
            pv_gemm<kBf16, Cfg::kOChunkN>(o[c], pa[kk],
                                          ptx::smem_desc_sw128(tile, Cfg::BN * 128, 1024));
        }
    }
    ptx::wgmma_commit();
}

// The S accumulator of two 8-column tiles is the A fragment of one k-step.
template <bool kBf16, typename Cfg>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[Cfg::BN / 16][4],
                                       const float (&sacc)[Cfg::kSRegs]) {
#pragma unroll
    for (int kk = 0; kk < Cfg::BN / 16; ++kk) {
        pa[kk][0] = Elem<kBf16>::pack(sacc[8 * kk + 0], sacc[8 * kk + 1]);
        pa[kk][1] = Elem<kBf16>::pack(sacc[8 * kk + 2], sacc[8 * kk + 3]);
        pa[kk][2] = Elem<kBf16>::pack(sacc[8 * kk + 4], sacc[8 * kk + 5]);
        pa[kk][3] = Elem<kBf16>::pack(sacc[8 * kk + 6], sacc[8 * kk + 7]);
    }
}

// Online softmax state of the two rows a thread holds (g and g + 8 of its
// warp's 16); a row is shared by the 4 lanes of a quad.
template <typename Cfg>
struct Softmax {
    float row_max[2] = {-CUDART_INF_F, -CUDART_INF_F};  // raw score maximum
    float row_sum[2] = {0.f, 0.f};                      // this lane's partial sum
    float alpha[2] = {1.f, 1.f};                        // last update's rescale factor

    // Masks (only tiles crossing the key end or the diagonal), updates the
    // running max and sum, and turns S into unnormalized probabilities.
    template <bool kFirst>
    __device__ __forceinline__ void update(float (&s)[Cfg::kSRegs], const FwdParams &p, int n0,
                                           int row_base, int t, int first_row) {
        const bool crosses_end = n0 + Cfg::BN > p.seqlen_k;
        const bool crosses_diagonal =
            p.causal && int64_t(n0 + Cfg::BN - 1) > int64_t(first_row) + p.causal_offset;
        if (crosses_end || crosses_diagonal) {
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; ++i) {
                const int col = n0 + (i / 4) * 8 + 2 * t + (i % 2);
                const int64_t row = row_base + 8 * ((i % 4) / 2);
                const bool visible = col < p.seqlen_k && (!p.causal || col <= row + p.causal_offset);
                if (!visible) s[i] = -CUDART_INF_F;
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = row_max[r];
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; i += 4) mx = fmaxf(mx, fmaxf(s[i + 2 * r], s[i + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            // A row with no visible key yet keeps max -inf: subtract 0 instead.
            const float m_scaled = mx == -CUDART_INF_F ? 0.f : mx * p.scale_log2;
            alpha[r] = kFirst ? 1.f : ptx::exp2_approx(row_max[r] * p.scale_log2 - m_scaled);
            row_max[r] = mx;
            float sum = 0.f;
#pragma unroll
            for (int i = 0; i < Cfg::kSRegs; i += 4) {
#pragma unroll
                for (int e = 2 * r; e < 2 * r + 2; ++e) {
                    s[i + e] = ptx::exp2_approx(fmaf(s[i + e], p.scale_log2, -m_scaled));
                    sum += s[i + e];
                }
            }
            row_sum[r] = row_sum[r] * alpha[r] + sum;
        }
    }

    __device__ __forceinline__ void rescale(float (&o)[Cfg::kOChunks][Cfg::kORegs]) const {
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
            for (int i = 0; i < Cfg::kORegs; i += 4) {
                o[c][i] *= alpha[0];
                o[c][i + 1] *= alpha[0];
                o[c][i + 2] *= alpha[1];
                o[c][i + 3] *= alpha[1];
            }
    }
};

template <bool kBf16, int D>
__device__ __forceinline__ void forward(const Sm90Params &params) {
    using Cfg = Config<D>;
    constexpr int BM = Cfg::BM, BN = Cfg::BN, kStages = Cfg::kStages;
    const FwdParams &p = params.fwd;

    extern __shared__ uint8_t smem_raw[];
    // The 128-byte swizzle repeats every 1024 bytes: align every tile to it.
    uint8_t *smem = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    uint8_t *sQ = smem;
    uint8_t *sK = sQ + Cfg::kQBytes;
    uint8_t *sV = sK + kStages * Cfg::kKVBytes;
    uint64_t *bars = reinterpret_cast<uint64_t *>(sV + kStages * Cfg::kKVBytes);
    uint64_t *full_q = bars;
    uint64_t *full_k = bars + 1;
    uint64_t *full_v = full_k + kStages;
    uint64_t *empty_k = full_v + kStages;
    uint64_t *empty_v = empty_k + kStages;

    const int warpgroup = threadIdx.x / 128;
    const int tid = threadIdx.x % 128;

    int bid = blockIdx.x;
    const int m_block = p.num_m_blocks - 1 - bid % p.num_m_blocks;
    bid /= p.num_m_blocks;
    const int head = bid % p.num_q_heads;
    const int batch = bid / p.num_q_heads;
    const int kv_head = head / p.q_heads_per_kv;
    const int m0 = m_block * BM;

    int n_end = p.seqlen_k;
    if (p.causal) {
        const int64_t last_row = min(m0 + BM, p.seqlen_q) - 1;
        const int64_t visible = last_row + p.causal_offset + 1;
        n_end = visible <= 0 ? 0 : visible < p.seqlen_k ? static_cast<int>(visible) : p.seqlen_k;
    }
    const int n_tiles = (n_end + BN - 1) / BN;

    if (threadIdx.x == 0) {
        ptx::mbarrier_init(full_q, 1);
        for (int s = 0; s < kStages; ++s) {
            ptx::mbarrier_init(&full_k[s], 1);
            ptx::mbarrier_init(&full_v[s], 1);
            ptx::mbarrier_init(&empty_k[s], Cfg::kConsumers * 128);
            ptx::mbarrier_init(&empty_v[s], Cfg::kConsumers * 128);
        }
        ptx::fence_mbarrier_init();
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---------------- producer ----------------
        ptx::setmaxnreg_dec<Cfg::kProducerRegs>();
        if (tid != 0) return;
        ptx::prefetch_tensor_map(&params.q);
        ptx::prefetch_tensor_map(&params.k);
        ptx::prefetch_tensor_map(&params.v);
        ptx::mbarrier_arrive_expect_tx(full_q, Cfg::kQBytes);
        for (int b = 0; b < Cfg::kBoxes; ++b)
            ptx::tma_load_4d(sQ + b * BM * 128, &params.q, full_q, b * 64, m0, head, batch);
        for (int j = 0; j < n_tiles; ++j) {
            const int s = j % kStages;
            const int use = j / kStages;
            if (use > 0) ptx::mbarrier_wait(&empty_k[s], (use - 1) & 1);
            ptx::mbarrier_arrive_expect_tx(&full_k[s], Cfg::kKVBytes);
            for (int b = 0; b < Cfg::kBoxes; ++b)
                ptx::tma_load_4d(sK + s * Cfg::kKVBytes + b * BN * 128, &params.k, &full_k[s],
                                 b * 64, j * BN, kv_head, batch);
            if (use > 0) ptx::mbarrier_wait(&empty_v[s], (use - 1) & 1);
            ptx::mbarrier_arrive_expect_tx(&full_v[s], Cfg::kKVBytes);
            for (int b = 0; b < Cfg::kBoxes; ++b)
                ptx::tma_load_4d(sV + s * Cfg::kKVBytes + b * BN * 128, &params.v, &full_v[s],
                                 b * 64, j * BN, kv_head, batch);
        }
        return;
    }

    // ---------------- consumers ----------------
    ptx::setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int consumer = warpgroup - 1;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int row_base = m0 + consumer * 64 + warp * 16 + g;  // this thread's rows: +0, +8
    uint8_t *sQ_mine = sQ + consumer * 64 * 128;              // offset inside every Q box

    Softmax<Cfg> softmax;
    float o[Cfg::kOChunks][Cfg::kORegs];
#pragma unroll
    for (int c = 0; c < Cfg::kOChunks; ++c)
#pragma unroll
        for (int i = 0; i < Cfg::kORegs; ++i) o[c][i] = 0.f;
    float sacc[Cfg::kSRegs];
    uint32_t pa[BN / 16][4];

    // Ping-pong: the two consumer warpgroups take turns issuing their GEMMs
    // (named barriers 3 and 4), so one's softmax runs under the other's GEMMs.
    const bool ping_pong = kPingPong && Cfg::kConsumers == 2 && n_tiles > 0;
    auto my_turn = [&] {
        if (ping_pong) ptx::named_barrier_sync(3 + consumer, 256);
    };
    auto your_turn = [&](bool last) {
        // The second warpgroup's last hand-over would have no taker.
        if (ping_pong && !(consumer == 1 && last)) ptx::named_barrier_arrive(4 - consumer, 256);
    };
    if (ping_pong && consumer == 1) ptx::named_barrier_arrive(3, 256);  // warpgroup 0 goes first

    ptx::mbarrier_wait(full_q, 0);
    if (n_tiles > 0) {
        // Prologue: S_0 and its softmax.
        ptx::mbarrier_wait(&full_k[0], 0);
        my_turn();
        issue_s_gemm<kBf16, Cfg>(sacc, sQ_mine, sK);
        your_turn(false);
        ptx::wgmma_wait<0>();
        ptx::fence_registers(sacc);
        ptx::mbarrier_arrive(&empty_k[0]);
        softmax.template update<true>(sacc, p, 0, row_base, t, m0 + consumer * 64);
        pack_p<kBf16, Cfg>(pa, sacc);

        for (int j = 1; j < n_tiles; ++j) {
            const int s = j % kStages, s_prev = (j - 1) % kStages;
            const uint32_t phase = (j / kStages) & 1, phase_prev = ((j - 1) / kStages) & 1;
            // Issue S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} back to back; the
            // softmax of S_j then runs while P·V is still on the tensor cores.
            ptx::mbarrier_wait(&full_k[s], phase);
            ptx::mbarrier_wait(&full_v[s_prev], phase_prev);
            my_turn();
            issue_s_gemm<kBf16, Cfg>(sacc, sQ_mine, sK + s * Cfg::kKVBytes);
            issue_pv_gemm<kBf16, Cfg>(o, pa, sV + s_prev * Cfg::kKVBytes);
            your_turn(false);
            ptx::wgmma_wait<1>();  // S_j is ready (groups retire in order)
            ptx::fence_registers(sacc);
            ptx::mbarrier_arrive(&empty_k[s]);
            softmax.template update<false>(sacc, p, j * BN, row_base, t, m0 + consumer * 64);
            ptx::wgmma_wait<0>();  // P_{j-1}·V_{j-1} is done: O and P may change
#pragma unroll
            for (int c = 0; c < Cfg::kOChunks; ++c) ptx::fence_registers(o[c]);
            ptx::mbarrier_arrive(&empty_v[s_prev]);
            softmax.rescale(o);
            pack_p<kBf16, Cfg>(pa, sacc);
        }

        // Tail: the last P·V.
        const int s_last = (n_tiles - 1) % kStages;
        ptx::mbarrier_wait(&full_v[s_last], ((n_tiles - 1) / kStages) & 1);
        my_turn();
        issue_pv_gemm<kBf16, Cfg>(o, pa, sV + s_last * Cfg::kKVBytes);
        your_turn(true);
        ptx::wgmma_wait<0>();
#pragma unroll
        for (int c = 0; c < Cfg::kOChunks; ++c) ptx::fence_registers(o[c]);
        ptx::mbarrier_arrive(&empty_v[s_last]);
    }
    float *row_max = softmax.row_max;
    float *row_sum = softmax.row_sum;

    // ---------------- epilogue ----------------
    float lse[2];
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float sum = row_sum[r];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        inv[r] = sum > 0.f ? 1.f / sum : 0.f;  // a row that saw no key: O = 0
        lse[r] = sum > 0.f ? (row_max[r] * p.scale_log2 + __log2f(sum)) * 0.6931471805599453f
                           : -CUDART_INF_F;
    }
    // Stage O where this warpgroup's Q rows were, in the TMA swizzled layout:
    // row r's 16-byte chunk c sits at chunk c ^ (r % 8).
#pragma unroll
    for (int c = 0; c < Cfg::kOChunks; ++c) {
#pragma unroll
        for (int i = 0; i < Cfg::kORegs; i += 2) {
            const int col = c * Cfg::kOChunkN + (i / 4) * 8 + 2 * t;
            const int r = warp * 16 + g + 8 * ((i % 4) / 2);
            const int half = (i % 4) / 2;
            uint8_t *dst = sQ_mine + (col / 64) * BM * 128 + r * 128 +
                           ((((col % 64) / 8) ^ (r % 8)) << 4) + 4 * t;
            *reinterpret_cast<uint32_t *>(dst) =
                Elem<kBf16>::pack(o[c][i] * inv[half], o[c][i + 1] * inv[half]);
        }
    }
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(1 + consumer, 128);
    if (tid == 0) {
        for (int b = 0; b < Cfg::kBoxes; ++b)
            ptx::tma_store_4d(&params.o, sQ_mine + b * BM * 128, b * 64, m0 + consumer * 64, head,
                              batch);
        ptx::tma_store_commit();
    }
    if (p.lse != nullptr && t == 0) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = row_base + 8 * r;
            if (row < p.seqlen_q)
                p.lse[(int64_t(batch) * p.num_q_heads + head) * p.seqlen_q + row] = lse[r];
        }
    }
    if (tid == 0) ptx::tma_store_wait_read();  // shared memory must outlive the store
}

}  // namespace fmha::sm90

#define FMHA_SM90_ENTRY(name, bf16, d)                                                  \
    extern "C" __global__ void __launch_bounds__(fmha::sm90_threads(d), 1)              \
        name(const __grid_constant__ fmha::Sm90Params params) {                         \
        fmha::sm90::forward<bf16, d>(params);                                           \
    }

FMHA_SM90_ENTRY(fmha_fwd_sm90_bf16_hd64, true, 64)
FMHA_SM90_ENTRY(fmha_fwd_sm90_bf16_hd96, true, 96)
FMHA_SM90_ENTRY(fmha_fwd_sm90_bf16_hd128, true, 128)
FMHA_SM90_ENTRY(fmha_fwd_sm90_bf16_hd256, true, 256)
FMHA_SM90_ENTRY(fmha_fwd_sm90_fp16_hd64, false, 64)
FMHA_SM90_ENTRY(fmha_fwd_sm90_fp16_hd96, false, 96)
FMHA_SM90_ENTRY(fmha_fwd_sm90_fp16_hd128, false, 128)
FMHA_SM90_ENTRY(fmha_fwd_sm90_fp16_hd256, false, 256)
