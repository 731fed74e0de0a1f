// The decode kernel family: split-KV choice, workspace layout and the two
// launches (decode, then the combine when the keys are split).
#include <algorithm>
#include <climits>

#include "errors.h"
#include "fwd_params.h"
#include "images.h"
#include "kernel_select.h"
#include "kernels/params.h"
#include "kernels/tile_traits.h"
#include "plan.h"
#include "split_kv.h"

namespace fmha {
namespace {

// Where the Hopper kernel does not run, AUTO prefers the decode kernel to
// the portable one while its K/V reads (one per 16-row tile) are at most
// kDecodeReadsNum / kDecodeReadsDen times the portable kernel's (one per
// query head and 128 positions); see prefers_decode.
constexpr int64_t kDecodeReadsNum = 3, kDecodeReadsDen = 2;
// Beyond that, up to this many query positions over pages or at head_dim
// 64; see prefers_decode.
constexpr int64_t kDecodePreferredPositions = 32;

const char *paired_kernel_name(fmha_dtype dtype, int64_t head_dim, DecodeKv kv) {
    const bool bf16 = dtype == FMHA_DTYPE_BF16;
    if (head_dim == 96 && kv == DecodeKv::kDenseShallow)
        return bf16 ? "fmha_decode_paired_shallow_bf16_hd96" : "fmha_decode_paired_shallow_fp16_hd96";
    if (head_dim == 96) return bf16 ? "fmha_decode_paired_bf16_hd96" : "fmha_decode_paired_fp16_hd96";
    return bf16 ? "fmha_decode_paired_bf16_hd64" : "fmha_decode_paired_fp16_hd64";
}

// The entry points that put the keys on the MMA's M side (see keys_on_m):
// hd128 on the usual, narrow and paged tiles, and paired hd64 (read as hd128).
const char *keys_on_m_kernel_name(fmha_dtype dtype, DecodeKv kv, bool paired) {
    const bool bf16 = dtype == FMHA_DTYPE_BF16;
    if (paired)
        return kv == DecodeKv::kDense
                   ? (bf16 ? "fmha_decode_paired_r8_bf16_hd64" : "fmha_decode_paired_r8_fp16_hd64")
                   : nullptr;
    switch (kv) {
    case DecodeKv::kDense: return bf16 ? "fmha_decode_r8_bf16_hd128" : "fmha_decode_r8_fp16_hd128";
    case DecodeKv::kDenseNarrow:
        return bf16 ? "fmha_decode_narrow_r8_bf16_hd128" : "fmha_decode_narrow_r8_fp16_hd128";
    case DecodeKv::kPaged:
        return bf16 ? "fmha_decode_paged_r8_bf16_hd128" : "fmha_decode_paged_r8_fp16_hd128";
    default: return nullptr;
    }
}

const char *kernel_name(fmha_dtype dtype, int64_t head_dim, DecodeKv kv) {
    const bool bf16 = dtype == FMHA_DTYPE_BF16;
    if (kv == DecodeKv::kPagedWide)  // hd64 only (tile_traits.h)
        return bf16 ? "fmha_decode_paged_wide_bf16_hd64" : "fmha_decode_paged_wide_fp16_hd64";
    if (kv == DecodeKv::kDenseNarrow)  // hd128 only
        return bf16 ? "fmha_decode_narrow_bf16_hd128" : "fmha_decode_narrow_fp16_hd128";
    if (kv == DecodeKv::kDenseShallow)  // hd96 only
        return bf16 ? "fmha_decode_shallow_bf16_hd96" : "fmha_decode_shallow_fp16_hd96";
    if (kv == DecodeKv::kDenseCompact || kv == DecodeKv::kPagedCompact) {  // hd256, hd512
        static const char *const kCompact[2][2][2] = {
            {{"fmha_decode_compact_fp16_hd256", "fmha_decode_compact_fp16_hd512"},
             {"fmha_decode_paged_compact_fp16_hd256", "fmha_decode_paged_compact_fp16_hd512"}},
            {{"fmha_decode_compact_bf16_hd256", "fmha_decode_compact_bf16_hd512"},
             {"fmha_decode_paged_compact_bf16_hd256", "fmha_decode_paged_compact_bf16_hd512"}}};
        return kCompact[bf16][kv == DecodeKv::kPagedCompact][head_dim == 512];
    }
    static const char *const kNames[2][2][5] = {
        {{"fmha_decode_fp16_hd64", "fmha_decode_fp16_hd96", "fmha_decode_fp16_hd128",
          "fmha_decode_fp16_hd256", "fmha_decode_fp16_hd512"},
         {"fmha_decode_paged_fp16_hd64", "fmha_decode_paged_fp16_hd96",
          "fmha_decode_paged_fp16_hd128", "fmha_decode_paged_fp16_hd256",
          "fmha_decode_paged_fp16_hd512"}},
        {{"fmha_decode_bf16_hd64", "fmha_decode_bf16_hd96", "fmha_decode_bf16_hd128",
          "fmha_decode_bf16_hd256", "fmha_decode_bf16_hd512"},
         {"fmha_decode_paged_bf16_hd64", "fmha_decode_paged_bf16_hd96",
          "fmha_decode_paged_bf16_hd128", "fmha_decode_paged_bf16_hd256",
          "fmha_decode_paged_bf16_hd512"}}};
    int index = -1;
    switch (head_dim) {
    case 64: index = 0; break;
    case 96: index = 1; break;
    case 128: index = 2; break;
    case 256: index = 3; break;
    case 512: index = 4; break;
    }
    return index < 0 ? nullptr : kNames[bf16][kv == DecodeKv::kPaged][index];
}

int64_t group_size(const Problem &p) { return p.num_q_heads / p.num_kv_heads; }

// With at most this many query rows per KV head (query positions x the
// group), the hd128 tiles (paired hd64 too) run with the keys on the MMA's M
// side (16 keys x 8 rows per MMA instead of 16 rows x 8 keys): half the MMAs
// and half of O's accumulators of the 16-row form, whose rows past 8 would
// be padding. On the H200 0.0-1.6% faster on the serving benchmark's T=1
// rows (kernel-notes d67: the loop is bound by its softmax and barrier more
// than by its MMAs); measured there only, so other devices keep the 16-row
// form. The `_r8` kernels rely on the bound: they compute rows 0-7 of their
// 16-row tile only. `streamed`: the problem as the kernel streams it
// (paired: paired_view).
constexpr int64_t kKeysOnMRows = 8;

bool keys_on_m(const Problem &streamed, const DeviceLimits &dev, DecodeKv kv, bool paired) {
    return dev.sm == 90 && streamed.head_dim == 128 &&
           streamed.seqlen_q * group_size(streamed) <= kKeysOnMRows &&
           (kv == DecodeKv::kDense || (!paired && (kv == DecodeKv::kDenseNarrow || kv == DecodeKv::kPaged)));
}

// Two splits of a keys-on-M hd128 grid over a contiguous cache (the usual
// 64-key tile; the clusters then take cluster_tile's) run as clusters of two
// CTAs that merge their states in distributed shared memory: no partials in
// the workspace and no combine launch (kernel-notes d71). On the H200
// against the combine kernel, in three calls alternating both libraries
// (before d75's lone tile): B8 H32/8 S8192 75.6-76.5 -> 75.1-75.9 us, B8
// H64/8 S16384 132.8-135.4 -> 132.0-133.7 us (the decode kernel alone, no
// merge at all: 74.6 and 132.1). Needs cluster launches and a decode image
// compiled for sm_90+ (the cluster instructions); measured there only.
bool cluster_merge(const Problem &streamed, const DeviceLimits &dev, DecodeKv kv, bool paired,
                   int splits) {
    if (!keys_on_m(streamed, dev, kv, paired) || paired || kv != DecodeKv::kDense || splits != 2 ||
        !dev.cluster_launch)
        return false;
    // The merge's inbox comes on top of the tile: where only the plain tile
    // fits, the splits go to the combine kernel instead.
    if (dev.max_smem > 0 && decode_cluster_smem_bytes(128, DecodeKv::kDense) > dev.max_smem)
        return false;
    const EmbeddedImage *image = find_image("decode", dev.sm);
    return image != nullptr && image->sm >= 90;
}

int64_t m_tiles(const Problem &p) {
    return (p.seqlen_q * group_size(p) + kDecodeRows - 1) / kDecodeRows;
}

// CTAs of the decode grid: (splits, m_tiles x KV heads, batch).
int64_t grid_ctas(const Problem &p, int64_t splits) {
    return p.batch * p.num_kv_heads * m_tiles(p) * splits;
}

// The clusters' tile: the lone one (8 warps, 128-key tiles, 2 stages: one CTA
// per SM) where the grid fits one CTA per SM, else the usual 64-key tile (2
// CTAs per SM), so that no grid that ran in one wave needs two. On the H200
// (kernel-notes d75, two calls, alternated with the usual tile): B8 H32/8
// S8192 74.1-75.0 against 74.4-75.8 us, B8 H64/8 S16384 130.6-133.2 against
// 131.7-133.9. Measured there only.
DecodeKv cluster_tile(const Problem &streamed, const DeviceLimits &dev, int splits) {
    const bool lone_fits =
        dev.max_smem <= 0 || decode_cluster_smem_bytes(128, DecodeKv::kDenseLone) <= dev.max_smem;
    return lone_fits && grid_ctas(streamed, splits) <= dev.num_sms ? DecodeKv::kDenseLone
                                                                   : DecodeKv::kDense;
}

const char *cluster_kernel_name(fmha_dtype dtype, DecodeKv kv) {
    const bool bf16 = dtype == FMHA_DTYPE_BF16;
    if (kv == DecodeKv::kDenseLone)
        return bf16 ? "fmha_decode_r8_cluster_lone_bf16_hd128" : "fmha_decode_r8_cluster_lone_fp16_hd128";
    return bf16 ? "fmha_decode_r8_cluster_bf16_hd128" : "fmha_decode_r8_cluster_fp16_hd128";
}

// The split count with the least estimated time, from a bandwidth model
// fitted on the H200 (docs/kernel-notes.md, d21: within 4% of the best
// count on all 38 rows of the serving benchmark's decode, paged, decode-t
// and hd512 sections; the previous waves-of-CTAs model lost up to 19%).
// Times are in bytes streamed at one SM's share of DRAM bandwidth:
//  - DRAM: the most loaded SM streams its CTAs' keys; CTAs of one KV head's
//    other M tiles read the same keys from L2, so only 1/m_tiles of a CTA's
//    bytes count. The SMs left idle give their share to the busy ones.
//  - Latency: one CTA streams at most kCtaRate x an SM's share (3 stages
//    in flight); a paged CTA, 2 stages and a block-table lookup per row,
//    at most kPagedCtaRate. CTAs beyond the resident ones run in waves.
//  - A split covers whole key tiles (the longest split sets the time: 15
//    splits of 512 tiles cost 35 tiles, 16 cost 32). Every CTA pays a fixed
//    cost (Q, pipeline fill, epilogue) worth kCtaFixedBytes; every split
//    adds kCombineBytesPerSplit x head_dim / 128 to the combine.
// Without device information (support queries) no split.
constexpr double kCtaFixedBytes = 64 * 1024;
constexpr double kCtaRate = 1.15;       // 39 GB/s against 34 GB/s per SM on the H200
constexpr double kPagedCtaRate = 0.56;  // 19 GB/s
constexpr double kCombineBytesPerSplit = 1700;  // 0.05 us at 34 GB/s (head_dim 128)
constexpr double kMinSplitBytes = 128 * 1024;

// CTAs resident per SM, from shared memory (1 KB of it reserved per CTA),
// at most 4.
int64_t resident_ctas_per_sm(const DeviceLimits &dev, int smem_bytes) {
    return std::max(1, std::min(4, shared_memory_per_sm(dev) / (smem_bytes + 1024)));
}

int auto_splits(const Problem &p, const DeviceLimits &dev, DecodeKv kv) {
    if (dev.num_sms <= 0) return 1;
    const int d = static_cast<int>(p.head_dim);
    const int64_t per_sm = resident_ctas_per_sm(dev, decode_smem_bytes(d, kv));
    const int64_t sms = dev.num_sms;
    const int64_t tiles = m_tiles(p);
    const int64_t base = grid_ctas(p, 1);  // CTAs of one split
    const double key_bytes = 2.0 * 2 * p.head_dim;          // K and V, 16-bit
    const double cta_rate = p.paged_kv ? kPagedCtaRate : kCtaRate;
    // Every split streams at least 128 KB of K and V and two key tiles.
    const int64_t block_n = decode_tile(d, kv).block_n;
    const int64_t min_keys = std::max<int64_t>(2 * block_n, int64_t(kMinSplitBytes / key_bytes));
    const int64_t max_splits =
        std::min<int64_t>(kMaxSplits, std::max<int64_t>(1, p.seqlen_k / min_keys));
    const int64_t key_tiles = (p.seqlen_k + block_n - 1) / block_n;
    const double combine_bytes = kCombineBytesPerSplit * double(p.head_dim) / 128;
    auto cost = [&](int64_t s) {
        const int64_t ctas = base * s;
        const int64_t per_sm_ctas = (ctas + sms - 1) / sms;
        const double keys = double((key_tiles + s - 1) / s * block_n);  // the longest split
        const double busy = double(std::min(ctas, sms)) / double(sms);
        const double dram = per_sm_ctas * (kCtaFixedBytes + keys * key_bytes / tiles) * busy;
        const double waves = double((per_sm_ctas + per_sm - 1) / per_sm);
        const double latency = waves * (kCtaFixedBytes + keys * key_bytes) / cta_rate;
        return std::max(dram, latency) + (s > 1 ? combine_bytes * s : 0.0);
    };
    int64_t best = 1;
    double best_cost = cost(1);
    for (int64_t s = 2; s <= max_splits; ++s) {
        const double c = cost(s);
        if (c < best_cost) {
            best = s;
            best_cost = c;
        }
    }
    return static_cast<int>(best);
}

int splits_for(const Problem &p, const DeviceLimits &dev, DecodeKv kv) {
    return p.num_splits > 0 ? p.num_splits : auto_splits(p, dev, kv);
}

// Paged hd64: the 128-key tile, except where the 64-key tile, which fits more
// CTAs per SM, runs the grid in one wave and the wide tile would not: a
// second, partial wave of wide CTAs costs more than their faster stream
// gains. On the H200 the wide tile streamed 2-17% faster on 20 of 24
// problems (multi-wave grids too) and lost 18-19% on exactly those 4 (B64
// H32/8 S2048: 512 CTAs; kernel-notes d37). Only measured there: other
// devices (and support queries, with no device information) keep the 64-key
// tile, as before.
DecodeKv cache_kind(const Problem &p, const DeviceLimits &dev) {
    if (!p.paged_kv) return DecodeKv::kDense;
    if (p.head_dim != 64 || dev.sm != 90 || dev.num_sms <= 0) return DecodeKv::kPaged;
    auto one_wave = [&](DecodeKv kv) {
        return grid_ctas(p, splits_for(p, dev, kv)) <=
               resident_ctas_per_sm(dev, decode_smem_bytes(64, kv)) * dev.num_sms;
    };
    return one_wave(DecodeKv::kPaged) && !one_wave(DecodeKv::kPagedWide) ? DecodeKv::kPaged
                                                                         : DecodeKv::kPagedWide;
}

// A smaller tile where the device's shared memory per block cannot take the
// chosen one, the split count kept: hd128 over a contiguous cache the narrow
// tile (102,656 -> 53,504 bytes: sm_86/89/120 offer 99 KB), hd256 and hd512
// the compact one (205,056 -> 73,984 and 213,248 -> 147,712: sm_80/87 offer
// 163 KB). Before, AUTO sent these problems to the portable kernel, which
// reads K and V once per query head where the decode kernel reads them once
// per KV head (the reads rule of prefers_decode, d55, picks the decode kernel
// for them on the H200), or, at hd512, had no kernel at all. Not measured on
// such devices (none here); the tests run these tiles on the H200 with
// FMHA_SHARED_MEMORY_LIMIT (kernel-notes d80).
DecodeKv fitting_tile(const Problem &p, const DeviceLimits &dev, DecodeKv kv) {
    const int d = static_cast<int>(p.head_dim);
    if (dev.max_smem <= 0 || decode_smem_bytes(d, kv) <= dev.max_smem) return kv;
    if (d == 128 && kv == DecodeKv::kDense) return DecodeKv::kDenseNarrow;
    if (d == 256 || d == 512) {
        if (kv == DecodeKv::kDense) return DecodeKv::kDenseCompact;
        if (kv == DecodeKv::kPaged) return DecodeKv::kPagedCompact;
    }
    return kv;  // select_kernel reports what does not fit
}

// The tile for a dense cache's grid, from the grid's CTA count after the
// usual tile's split count (which stays). Measured on the H200 only: other
// devices keep the usual tile where it fits (fitting_tile).
// hd128, the narrow tile (32 keys a stage, half the bytes in flight per CTA,
// up to 4 CTAs per SM) where the grid is one wave of it and has more than
// ~1.45 CTAs per SM. With two 64-key CTAs per SM a fixed fifth of the SMs is
// served ~20% faster than the rest and the wave ends with the slow ones
// (kernel-notes, "one-wave timeline"). Against cuDNN over 18 hd128 T=1 grids
// (d43): 192-528 CTAs 0.996-1.054x the 64-key tile (B48 H32/8 S4096, 384
// CTAs: 202 -> 192 us); 128 lone CTAs 0.85x (one CTA per SM needs 64 KB in
// flight), 768 and 2048 CTAs (more waves) 0.96-0.98x.
// hd96, the shallow tile (64 keys, 2 stages, 4 CTAs per SM instead of 2)
// where the grid has more than 2 and at most 3 CTAs per SM: one wave of it,
// where the 3-stage tile runs a full wave and a partial one. Against the
// 3-stage tile (d44, one split forced, 272-384 CTAs): 1.11-1.30x; with the
// automatic split count (B48 H32/8 S4096, 1 split, 384 CTAs) 0.949 -> 1.055x
// cuDNN. Elsewhere it lost or tied: 128 lone CTAs 0.75x, 416-512 CTAs
// 0.83-0.89x, 256 CTAs and 896-1088 within 1%; the narrow tile (32 keys) lost
// at hd96 almost everywhere (its CTAs keep too few bytes in flight).
DecodeKv dense_tile(const Problem &p, const DeviceLimits &dev, int splits) {
    if (dev.sm != 90 || dev.num_sms <= 0 || p.paged_kv || p.head_dim_v != p.head_dim)
        return DecodeKv::kDense;
    const int64_t ctas = grid_ctas(p, splits);
    const int64_t sms = dev.num_sms;
    if (p.head_dim == 128) {
        const int64_t wave =
            resident_ctas_per_sm(dev, decode_smem_bytes(128, DecodeKv::kDenseNarrow)) * sms;
        return 100 * ctas >= 145 * sms && ctas <= wave ? DecodeKv::kDenseNarrow : DecodeKv::kDense;
    }
    if (p.head_dim == 96)
        return ctas > 2 * sms && ctas <= 3 * sms ? DecodeKv::kDenseShallow : DecodeKv::kDense;
    return DecodeKv::kDense;
}

// hd64 / hd96 KV heads read in pairs as one 128- / 192-column head
// (kernel-notes d39, d49): two adjacent heads' rows make one row of whole
// 128-byte lines (256 / 384 bytes). At hd96 a lone head's 192-byte rows split
// lines with the neighbouring head's, which both libraries pay for (d47, d49:
// 6-7% on the same kernel). Needs the heads side by side in memory (head
// stride = head_dim, as in [.., kv_heads, head_dim] caches; not paged) and an
// even count, and the pair's query rows (twice the group, times seqlen_q) in
// one 16-row tile, so that no K/V is read twice. Measured on the H200 only.
bool paired_heads(const Problem &p, const DeviceLimits &dev) {
    return dev.sm == 90 && (p.head_dim == 64 || p.head_dim == 96) && p.head_dim_v == p.head_dim &&
           !p.paged_kv && p.num_kv_heads % 2 == 0 && p.k.head == p.head_dim &&
           p.v.head == p.head_dim && p.k.dim == 1 && p.v.dim == 1 &&
           2 * group_size(p) * p.seqlen_q <= kDecodeRows;
}

// The problem a paired kernel streams: twice the head_dim over half the KV heads.
Problem paired_view(const Problem &p) {
    Problem v = p;
    v.head_dim = v.head_dim_v = 2 * p.head_dim;
    v.num_kv_heads /= 2;
    v.k.head *= 2;
    v.v.head *= 2;
    return v;
}

// The tile of a paired hd96 grid (192-column rows), or false where neither
// was measured to win (kernel-notes d49). At most one CTA per SM: 64 keys x 3
// stages (144 KB, one CTA per SM; B32 H32/8 S4096 114.4 -> 108.0 us, B8
// H64/8 S16384 +2%, B1 and B8 within 0.5%). Unsplit grids from 1.45 CTAs per
// SM: 64 keys x 2 stages (96 KB, two per SM; B64 H32/32 S2048 395.4 -> 374.0
// us, B48 H32/8 S4096 164.4 -> 153.0 on the shallow hd96 tile before). In
// between, the paired CTAs are too coarse to spread evenly over the SMs; split
// grids past one CTA per SM were not measured. Those stay unpaired.
bool paired_hd96_tile(const Problem &p, const DeviceLimits &dev, int splits, DecodeKv *kv) {
    const int64_t ctas = grid_ctas(paired_view(p), splits);
    const int64_t sms = dev.num_sms;
    if (ctas <= sms) {
        *kv = DecodeKv::kDense;
        return true;
    }
    if (splits == 1 && 100 * ctas >= 145 * sms) {
        *kv = DecodeKv::kDenseShallow;
        return true;
    }
    return false;
}

// Whether to pair, the split count, and the paired kernel's tile. A pair
// keeps the unpaired plan's grid: with s >= 2 splits, 2s splits over half the
// heads (the same CTAs, each reading the same bytes, in 256-byte rows: 1.3-2.2%
// faster on the H200 at hd64), up to 32 (B2 H16/2 S16384, 32 splits unpaired,
// was 1.8% slower with 64: each split adds a partial row to the combine);
// unsplit, only where half the heads still give nearly every SM a CTA
// (1.0-3.0% faster at hd64). The hd128 split model over half the heads was up
// to 7.7% slower (B16 H64/8 S4096: 2 splits and a combine where 1 unpaired ran
// faster).
// hd96 pairs stop at 16 splits: B1 H32/8 S32768 with 32 paired splits ran
// 42.6 us against 42.2-42.3 unpaired with 16 (d49).
constexpr int kMaxPairedSplits = 32;
constexpr int kMaxPairedSplitsHd96 = 16;

bool pair_and_split(const Problem &p, const DeviceLimits &dev, DecodeKv *kv, int *splits) {
    const int unpaired = splits_for(p, dev, *kv);
    *splits = unpaired;
    if (!paired_heads(p, dev)) return false;
    int paired_splits = unpaired;
    if (p.num_splits <= 0) {  // otherwise the caller's count, either way
        if (unpaired >= 2) {
            if (2 * unpaired > (p.head_dim == 96 ? kMaxPairedSplitsHd96 : kMaxPairedSplits))
                return false;
            paired_splits = 2 * unpaired;
        } else if (10 * grid_ctas(paired_view(p), 1) < 9 * int64_t(dev.num_sms)) {
            return false;
        }
    }
    DecodeKv paired_kv = DecodeKv::kDense;  // hd64: the hd128 tile
    if (p.head_dim == 96 && !paired_hd96_tile(p, dev, paired_splits, &paired_kv)) return false;
    // Only where the paired tile fits (FMHA_SHARED_MEMORY_LIMIT may lower the
    // limit below what sm_90 offers).
    if (dev.max_smem > 0 &&
        decode_smem_bytes(static_cast<int>(2 * p.head_dim), paired_kv) > dev.max_smem)
        return false;
    *splits = paired_splits;
    *kv = paired_kv;
    return true;
}

fmha_status decode_launch(const fmha_plan &plan, const fmha_tensors &t, void *workspace,
                          CUstream stream) {
    const Problem &p = plan.problem;
    const KernelChoice &c = plan.choice;
    if (p.q_rows() == 0) return FMHA_STATUS_SUCCESS;  // packed Q with no rows: nothing to do
    const DecodeSchedule &ds = c.decode;  // the grid the kernel sees (paired or not)
    DecodeParams dp{};
    dp.fwd = make_fwd_params(p, t, kDecodeRows);
    dp.fwd.k_stride.head = ds.k_head_stride;
    dp.fwd.v_stride.head = ds.v_head_stride;
    dp.q_rows = p.q_rows();
    dp.num_splits = c.num_splits;
    dp.q_heads_per_kv = ds.q_heads_per_kv;
    dp.num_m_tiles = ds.m_tiles;
    if (ds.cluster_merge)  // the two splits merge in shared memory: no partials, no combine
        return launch_in_clusters(*plan.drv, plan.function_dependent, 2, plan.function,
                                  c.num_splits, static_cast<unsigned>(ds.m_tiles * ds.kv_heads),
                                  static_cast<unsigned>(p.batch), c.threads, c.smem_bytes, stream,
                                  &dp, c.kernel_name);
    const SplitPartials parts = split_partials(p, c.num_splits, workspace);
    dp.partial_o = parts.o;
    dp.partial_lse = parts.lse;
    // Launched dependent: it may be scheduled while the previous kernel in
    // the stream drains (it waits for that kernel before touching memory).
    FMHA_TRY(launch_dependent(*plan.drv, plan.function_dependent, plan.function, c.num_splits,
                              static_cast<unsigned>(ds.m_tiles * ds.kv_heads),
                              static_cast<unsigned>(p.batch), c.threads, c.smem_bytes, stream,
                              &dp, c.kernel_name));
    if (c.num_splits <= 1) return FMHA_STATUS_SUCCESS;
    return launch_split_combine(plan, t, parts, c.num_splits, dp.fwd, stream);
}

}  // namespace

bool prefers_decode(const Problem &p, bool hopper_runs_it) {
    if (p.num_splits >= 2) return true;
    const int64_t rows_per_kv_head = p.seqlen_q * group_size(p);
    // hd512: the Hopper kernel (split D) reads K/V once per 64 rows of a KV
    // head, the decode kernel once per 16, and streams faster even at 16 rows
    // (h9: B32 H16/1 S16384 4.0 against 3.9 TB/s; 128 heads up to 4.4x);
    // over pages it gathers row by row, 16 rows of a KV head stream faster
    // on the decode kernel (h39: B8 H16/1 T=1 over pages of 1 88 against 98
    // µs; 64 rows and more 3-4.5x slower there; over pages of 16, gathered
    // since h40, the two are within 6% either way at 16 rows).
    if (p.head_dim == 512) {
        const bool gathered = sm90_pages_gathered(p.paged_kv, p.page_size, static_cast<int>(p.head_dim));
        return !hopper_runs_it || (gathered && rows_per_kv_head <= kDecodeRows);
    }
    // One 16-row tile per KV head: the decode kernel reads K/V once and
    // streams them 3-8% faster than the Hopper kernel (hd128 T=1 rows); at
    // hd96 and hd256 this choice was within 0.4% of the faster kernel
    // (geometric mean over 24 problems each, kernel-notes d34).
    if (rows_per_kv_head <= kDecodeRows) return true;
    // More rows: the decode kernel reads K/V again for every 16-row tile,
    // the Hopper kernel once per 64-192-row block (packing a short query's
    // heads) and splits the keys when its blocks are few. On the H200, at 17
    // to 64 rows, it was faster on 99 of 104 problems over hd64-hd256
    // (1.02-3.06x; the other 5 within 2-12%), and up to 3.7x beyond
    // (docs/kernel-notes.md d30).
    if (hopper_runs_it) return false;
    // Without the Hopper kernel: other devices, and pages of under 16 rows
    // on sm_90 (SGLang uses 1). Measured on the H200 with both kernels
    // forced (kernel-notes d55: contiguous caches and pages of 1 and 2;
    // B8-B32, H32/8 and H32/32, 4-128 query positions): the decode kernel
    // was 1.16-4.2x faster at up to the portable kernel's reads, the portable
    // kernel 1.6-2.2x faster at 4 times them and more, and at twice the
    // decode kernel took 0.94-1.16x the portable one's time. The bound, 1.5
    // times, lies between the measured ratios; no problem sat between them.
    const int64_t portable_reads = group_size(p) * ((p.seqlen_q + 127) / 128);
    if (kDecodeReadsDen * m_tiles(p) <= kDecodeReadsNum * portable_reads) return true;
    // At most 32 query positions, the portable kernel's 64-row block is half
    // empty; over pages (gathered row by row) and at head_dim 64 (little
    // compute per byte) the decode kernel's full 16-row tiles win there.
    // Measured with both kernels forced, the portable kernel splitting its
    // small grids (kernel notes p13: hd128 contiguous and over pages of 16,
    // hd64 contiguous; B1-B8, H16/2 to H32/32, 32-256 positions; 108
    // problems): the decode kernel 1.2-1.7x faster at 32 positions over pages
    // and at hd64, the portable kernel 1.03-2.9x faster everywhere else but
    // two problems (within 12%). Before the portable kernel split, small
    // grids went to the decode kernel (d56); against the splitting kernel
    // that rule chose the slower one on 44 of these 108 (up to 2.9x).
    return p.seqlen_q <= kDecodePreferredPositions && (p.paged_kv || p.head_dim <= 64);
}

fmha_status decode_configure(const Problem &p, const DeviceLimits &dev, KernelChoice *out) {
    // The grid is (splits, m_tiles x KV heads, batch): y and z stop at 65535.
    if (p.batch > 65535)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.batch is %lld: the decode kernel takes at most 65535 sequences",
                    (long long)p.batch);
    const int64_t tiles = m_tiles(p) * p.num_kv_heads;
    if (tiles > 65535)
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "descriptor.seqlen_q is %lld: the decode kernel needs m_tiles x num_kv_heads "
                    "<= 65535, here %lld x %lld = %lld (m_tiles = ceil(seqlen_q x %lld query "
                    "heads per KV head / %d))",
                    (long long)p.seqlen_q, (long long)m_tiles(p), (long long)p.num_kv_heads,
                    (long long)tiles, (long long)group_size(p), kDecodeRows);
    if (p.q_rows() > INT_MAX / p.num_q_heads)  // divided: the product may not fit 64 bits
        return fail(FMHA_STATUS_NOT_SUPPORTED,
                    "the decode kernel handles up to 2^31-1 query rows x num_q_heads (%lld "
                    "rows x %lld heads)",
                    (long long)p.q_rows(), (long long)p.num_q_heads);
    KernelChoice c;
    c.family = FMHA_KERNEL_DECODE;
    c.image_family = "decode";
    DecodeKv kv = cache_kind(p, dev);
    int splits = 1;
    const bool paired = pair_and_split(p, dev, &kv, &splits);
    if (!paired && kv == DecodeKv::kDense) kv = dense_tile(p, dev, splits);
    if (!paired) kv = fitting_tile(p, dev, kv);
    // What the kernel streams (paired: twice the head_dim over half the KV heads).
    const Problem streamed = paired ? paired_view(p) : p;
    c.decode.paired = paired;
    c.decode.q_heads_per_kv = static_cast<int32_t>(group_size(streamed));
    c.decode.m_tiles = static_cast<int32_t>(m_tiles(streamed));
    c.decode.kv_heads = streamed.num_kv_heads;
    c.decode.k_head_stride = streamed.k.head;
    c.decode.v_head_stride = streamed.v.head;
    const int sd = static_cast<int>(streamed.head_dim);
    c.decode.cluster_merge = cluster_merge(streamed, dev, kv, paired, splits);
    if (c.decode.cluster_merge) kv = cluster_tile(streamed, dev, splits);
    c.kernel_name = c.decode.cluster_merge                ? cluster_kernel_name(p.dtype, kv)
                    : keys_on_m(streamed, dev, kv, paired) ? keys_on_m_kernel_name(p.dtype, kv, paired)
                    : paired                               ? paired_kernel_name(p.dtype, p.head_dim, kv)
                                                           : kernel_name(p.dtype, p.head_dim, kv);
    c.tile_m = kDecodeRows;
    c.tile_n = decode_tile(sd, kv).block_n;
    c.threads = decode_threads(sd, kv);
    c.smem_bytes = c.decode.cluster_merge ? decode_cluster_smem_bytes(sd, kv)
                                          : decode_smem_bytes(sd, kv);  // checked by select_kernel
    FMHA_TRY(check_split_kv(p, splits));
    c.num_splits = splits;
    if (!c.decode.cluster_merge && c.num_splits > 1) {
        c.workspace_bytes = split_workspace(p, c.num_splits).total();  // partials per query head
        c.combine_team = combine_team(p.head_dim_v, c.num_splits);
        c.combine_kernel_name = split_combine_kernel_name(p.dtype, c.combine_team);
    }
    c.launch = decode_launch;
    *out = c;
    return FMHA_STATUS_SUCCESS;
}

}  // namespace fmha
