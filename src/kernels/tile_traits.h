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

// Portable mma.sync kernel: 4 warps of 16 query rows each. hd256 halves the
// key tile so Q + K + V stay under sm_120's 99 KB of shared memory.
FMHA_HOST_DEVICE constexpr TileShape portable_tile(int head_dim) {
    return head_dim == 256 ? TileShape{64, 32, 128} : TileShape{64, 64, 128};
}

// Rows are padded by 8 elements (16 bytes) so ldmatrix reads of 8 rows hit
// 8 distinct 16-byte bank groups.
FMHA_HOST_DEVICE constexpr int portable_smem_row(int head_dim) { return head_dim + 8; }

FMHA_HOST_DEVICE constexpr int portable_smem_bytes(int head_dim) {
    return (portable_tile(head_dim).block_m + 2 * portable_tile(head_dim).block_n) *
           portable_smem_row(head_dim) * 2;
}

}  // namespace fmha
