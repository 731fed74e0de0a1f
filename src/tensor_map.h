// TMA tensor maps (CUtensorMap) over strided attention tensors, built on the
// host through the loaded driver. Pure host work: safe inside fmha_run.
// With `map` null (and `drv` and `base` unused) a call only checks TMA's
// limits on the map (extents up to 2^32, strides below 2^40 bytes): plans
// make that call, so a run never meets a map it cannot encode. Either way a
// map beyond them is NOT_SUPPORTED, naming the tensor's strides.
#pragma once
#include <cuda.h>

#include "driver.h"
#include "problem.h"

namespace fmha {

// Describes one tensor as dims (dim, seq, head, batch), innermost first,
// with a box of 64 elements (the 128-byte swizzle width) by `box_rows` rows
// of one (head, batch). Reads past the bounds give zeros; writes are clipped.
fmha_status encode_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                              const void *base, int64_t dim, int64_t seqlen, int64_t heads,
                              int64_t batch, const fmha_strides &strides, int box_rows,
                              const char *name);

// The same tensor as 5-D dims (64, seq, dim / 64, head, batch): a box of
// `box_rows` rows takes all dim / 64 of their 64-column pieces at once,
// staged as box_rows rows of piece 0, then of piece 1, ... (each piece a
// 128-byte-swizzled block of box_rows rows). dim is a multiple of 64.
fmha_status encode_column_boxed_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                                           const void *base, int64_t dim, int64_t seqlen,
                                           int64_t heads, int64_t batch,
                                           const fmha_strides &strides, int box_rows,
                                           const char *name);

// How the heads of a tensor fold into 5 dims with its rows in 8-row groups
// (encode_group_boxed_tensor_map): into the 64-column pieces when a row's
// heads are packed (head stride = dim, or one head), into the groups when
// each head's rows are packed ([batch, head, seq, dim]: head stride = seq x
// row stride), else not at all. dim is a multiple of 64 and seq of 8.
enum class HeadFold { kNone, kColumns, kGroups };
HeadFold group_boxed_head_fold(const fmha_strides &strides, int64_t dim, int64_t seqlen,
                               int64_t heads);

// The same tensor as 5-D dims (64, 8, pieces, groups, batch): rows in 8-row
// groups, 64-column pieces, the heads folded into the pieces (heads * dim /
// 64 of them, the box's piece coordinate head * dim / 64) or the groups (heads
// * seq / 8, group coordinate head * seq / 8 + row / 8) as `fold` says. A box
// of `box_rows` rows (a multiple of 8) of one head takes all dim / 64
// pieces, staged group by group: 8 rows of piece 0, of piece 1, ..., then
// the next group (each piece a 128-byte-swizzled block of 8 rows).
fmha_status encode_group_boxed_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                                          const void *base, int64_t dim, int64_t seqlen,
                                          int64_t heads, int64_t batch,
                                          const fmha_strides &strides, int box_rows,
                                          HeadFold fold, const char *name);

// The same tensor as 5-D dims (dim, group, seq, heads / group, batch): the
// heads come in groups of `group` (the query heads of one KV head), and a
// box of `box_rows` rows takes box_rows / box_group positions of one group
// with box_group >= group heads innermost, so box row r is position
// r / box_group, head r % box_group; heads past the group read as zeros and
// are not written. A group wider than the box (box_group > box_rows) is
// taken box_rows heads at a time at one position; the kernel then starts the
// box at a head inside the group. group == box_group == 1 describes the 4-D
// layout above with one more dimension.
fmha_status encode_grouped_tensor_map(const Driver *drv, CUtensorMap *map, fmha_dtype dtype,
                                      const void *base, int64_t dim, int64_t seqlen,
                                      int64_t heads, int64_t batch, const fmha_strides &strides,
                                      int64_t group, int64_t box_group, int box_rows,
                                      const char *name);

}  // namespace fmha
