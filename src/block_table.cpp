// fmha_check_block_table: the paged-KV block table's contract, checked on a
// host copy. Pure host code: it needs no driver and reads no environment
// (read_descriptor leaves FMHA_FORCE_KERNEL to plans and support queries).
#include "errors.h"
#include "problem.h"
#include "validate.h"

extern "C" FMHA_API fmha_status fmha_check_block_table(const fmha_descriptor *desc,
                                                       const int32_t *host_block_table,
                                                       const int32_t *host_seqlens_k) {
    fmha::clear_error();
    fmha::Problem p;
    FMHA_TRY(fmha::read_descriptor(desc, &p));
    if (!p.paged_kv)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                          "descriptor.flags is 0x%x: fmha_check_block_table needs "
                          "FMHA_FLAG_PAGED_KV",
                          desc->flags);
    if (host_block_table == nullptr)
        return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT, "host_block_table is NULL");
    for (int64_t b = 0; b < p.batch; ++b) {
        const int64_t len = host_seqlens_k != nullptr ? host_seqlens_k[b] : p.seqlen_k;
        if (len < 0 || len > p.seqlen_k)
            return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                              "host_seqlens_k[%lld] is %lld: must be in [0, seqlen_k = %lld]",
                              (long long)b, (long long)len, (long long)p.seqlen_k);
        const int64_t pages = (len + p.page_size - 1) / p.page_size;
        const int32_t *row = host_block_table + b * p.max_pages_per_seq;
        for (int64_t i = 0; i < pages; ++i) {
            if (row[i] < 0 || row[i] >= p.num_pages)
                return fmha::fail(FMHA_STATUS_INVALID_ARGUMENT,
                                  "block_table[%lld][%lld] is %d: must be in [0, num_pages = "
                                  "%lld) (sequence %lld has %lld keys)",
                                  (long long)b, (long long)i, row[i], (long long)p.num_pages,
                                  (long long)b, (long long)len);
        }
    }
    return FMHA_STATUS_SUCCESS;
}
