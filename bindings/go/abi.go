package fmha

/*
#include <fmha/fmha.h>
*/
import "C"

import "unsafe"

// cABI reports the C compiler's view of the header (through cgo, which
// compiles against the installed fmha/fmha.h): struct sizes, field offsets,
// enum values and macros. abi_test.go compares it with goABI so a header
// change that the Go mirror structs and constants miss fails the tests.
func cABI() map[string]int64 {
	var d C.fmha_descriptor
	var s C.fmha_strides
	var t C.fmha_tensors
	var i C.fmha_plan_info
	var m C.fmha_merge_descriptor
	return map[string]int64{
		"sizeof fmha_status":          int64(C.sizeof_fmha_status),
		"sizeof fmha_dtype":           int64(C.sizeof_fmha_dtype),
		"sizeof fmha_mask":            int64(C.sizeof_fmha_mask),
		"sizeof fmha_kernel":          int64(C.sizeof_fmha_kernel_family),
		"sizeof fmha_strides":         int64(C.sizeof_fmha_strides),
		"alignof fmha_strides":        int64(unsafe.Alignof(s)),
		"offsetof fmha_strides.batch": int64(unsafe.Offsetof(s.batch)),
		"offsetof fmha_strides.seq":   int64(unsafe.Offsetof(s.seq)),
		"offsetof fmha_strides.head":  int64(unsafe.Offsetof(s.head)),
		"offsetof fmha_strides.dim":   int64(unsafe.Offsetof(s.dim)),

		"sizeof fmha_descriptor":                     int64(C.sizeof_fmha_descriptor),
		"alignof fmha_descriptor":                    int64(unsafe.Alignof(d)),
		"offsetof fmha_descriptor.version":           int64(unsafe.Offsetof(d.version)),
		"offsetof fmha_descriptor.dtype":             int64(unsafe.Offsetof(d.dtype)),
		"offsetof fmha_descriptor.batch":             int64(unsafe.Offsetof(d.batch)),
		"offsetof fmha_descriptor.num_q_heads":       int64(unsafe.Offsetof(d.num_q_heads)),
		"offsetof fmha_descriptor.num_kv_heads":      int64(unsafe.Offsetof(d.num_kv_heads)),
		"offsetof fmha_descriptor.seqlen_q":          int64(unsafe.Offsetof(d.seqlen_q)),
		"offsetof fmha_descriptor.seqlen_k":          int64(unsafe.Offsetof(d.seqlen_k)),
		"offsetof fmha_descriptor.head_dim":          int64(unsafe.Offsetof(d.head_dim)),
		"offsetof fmha_descriptor.head_dim_v":        int64(unsafe.Offsetof(d.head_dim_v)),
		"offsetof fmha_descriptor.q_strides":         int64(unsafe.Offsetof(d.q_strides)),
		"offsetof fmha_descriptor.k_strides":         int64(unsafe.Offsetof(d.k_strides)),
		"offsetof fmha_descriptor.v_strides":         int64(unsafe.Offsetof(d.v_strides)),
		"offsetof fmha_descriptor.o_strides":         int64(unsafe.Offsetof(d.o_strides)),
		"offsetof fmha_descriptor.softmax_scale":     int64(unsafe.Offsetof(d.softmax_scale)),
		"offsetof fmha_descriptor.mask":              int64(unsafe.Offsetof(d.mask)),
		"offsetof fmha_descriptor.flags":             int64(unsafe.Offsetof(d.flags)),
		"offsetof fmha_descriptor.kernel":            int64(unsafe.Offsetof(d.kernel)),
		"offsetof fmha_descriptor.device":            int64(unsafe.Offsetof(d.device)),
		"offsetof fmha_descriptor.reserved0":         int64(unsafe.Offsetof(d.reserved0)),
		"offsetof fmha_descriptor.window_left":       int64(unsafe.Offsetof(d.window_left)),
		"offsetof fmha_descriptor.window_right":      int64(unsafe.Offsetof(d.window_right)),
		"offsetof fmha_descriptor.softcap":           int64(unsafe.Offsetof(d.softcap)),
		"offsetof fmha_descriptor.reserved1":         int64(unsafe.Offsetof(d.reserved1)),
		"offsetof fmha_descriptor.total_q":           int64(unsafe.Offsetof(d.total_q)),
		"offsetof fmha_descriptor.total_k":           int64(unsafe.Offsetof(d.total_k)),
		"offsetof fmha_descriptor.num_pages":         int64(unsafe.Offsetof(d.num_pages)),
		"offsetof fmha_descriptor.max_pages_per_seq": int64(unsafe.Offsetof(d.max_pages_per_seq)),
		"offsetof fmha_descriptor.page_size":         int64(unsafe.Offsetof(d.page_size)),
		"offsetof fmha_descriptor.num_splits":        int64(unsafe.Offsetof(d.num_splits)),

		"sizeof fmha_merge_descriptor":                int64(C.sizeof_fmha_merge_descriptor),
		"alignof fmha_merge_descriptor":               int64(unsafe.Alignof(m)),
		"offsetof fmha_merge_descriptor.version":      int64(unsafe.Offsetof(m.version)),
		"offsetof fmha_merge_descriptor.dtype":        int64(unsafe.Offsetof(m.dtype)),
		"offsetof fmha_merge_descriptor.batch":        int64(unsafe.Offsetof(m.batch)),
		"offsetof fmha_merge_descriptor.seqlen_q":     int64(unsafe.Offsetof(m.seqlen_q)),
		"offsetof fmha_merge_descriptor.num_heads":    int64(unsafe.Offsetof(m.num_heads)),
		"offsetof fmha_merge_descriptor.head_dim":     int64(unsafe.Offsetof(m.head_dim)),
		"offsetof fmha_merge_descriptor.part_strides": int64(unsafe.Offsetof(m.part_strides)),
		"offsetof fmha_merge_descriptor.o_strides":    int64(unsafe.Offsetof(m.o_strides)),
		"offsetof fmha_merge_descriptor.num_parts":    int64(unsafe.Offsetof(m.num_parts)),
		"offsetof fmha_merge_descriptor.flags":        int64(unsafe.Offsetof(m.flags)),
		"offsetof fmha_merge_descriptor.device":       int64(unsafe.Offsetof(m.device)),
		"offsetof fmha_merge_descriptor.reserved0":    int64(unsafe.Offsetof(m.reserved0)),

		// Not mirrored in Go (built on the C side), but checked so a change
		// to them is noticed and the C helpers reviewed.
		"sizeof fmha_tensors":                     int64(C.sizeof_fmha_tensors),
		"offsetof fmha_tensors.lse":               int64(unsafe.Offsetof(t.lse)),
		"offsetof fmha_tensors.sinks":             int64(unsafe.Offsetof(t.sinks)),
		"offsetof fmha_tensors.cu_seqlens_q":      int64(unsafe.Offsetof(t.cu_seqlens_q)),
		"offsetof fmha_tensors.cu_seqlens_k":      int64(unsafe.Offsetof(t.cu_seqlens_k)),
		"offsetof fmha_tensors.seqused_k":         int64(unsafe.Offsetof(t.seqused_k)),
		"offsetof fmha_tensors.block_table":       int64(unsafe.Offsetof(t.block_table)),
		"sizeof fmha_plan_info":                   int64(C.sizeof_fmha_plan_info),
		"offsetof fmha_plan_info.workspace_bytes": int64(unsafe.Offsetof(i.workspace_bytes)),
		"offsetof fmha_plan_info.num_splits":      int64(unsafe.Offsetof(i.num_splits)),

		"value FMHA_VERSION_MAJOR":              int64(C.FMHA_VERSION_MAJOR),
		"value FMHA_VERSION_MINOR":              int64(C.FMHA_VERSION_MINOR),
		"value FMHA_VERSION_PATCH":              int64(C.FMHA_VERSION_PATCH),
		"value FMHA_VERSION_NUMBER":             int64(C.FMHA_VERSION_NUMBER),
		"value FMHA_STATUS_SUCCESS":             int64(C.FMHA_STATUS_SUCCESS),
		"value FMHA_STATUS_INVALID_ARGUMENT":    int64(C.FMHA_STATUS_INVALID_ARGUMENT),
		"value FMHA_STATUS_NOT_SUPPORTED":       int64(C.FMHA_STATUS_NOT_SUPPORTED),
		"value FMHA_STATUS_VERSION_MISMATCH":    int64(C.FMHA_STATUS_VERSION_MISMATCH),
		"value FMHA_STATUS_NO_DRIVER":           int64(C.FMHA_STATUS_NO_DRIVER),
		"value FMHA_STATUS_NO_DEVICE":           int64(C.FMHA_STATUS_NO_DEVICE),
		"value FMHA_STATUS_DRIVER_ERROR":        int64(C.FMHA_STATUS_DRIVER_ERROR),
		"value FMHA_STATUS_MISALIGNED":          int64(C.FMHA_STATUS_MISALIGNED),
		"value FMHA_STATUS_WORKSPACE_TOO_SMALL": int64(C.FMHA_STATUS_WORKSPACE_TOO_SMALL),
		"value FMHA_STATUS_OUT_OF_MEMORY":       int64(C.FMHA_STATUS_OUT_OF_MEMORY),
		"value FMHA_STATUS_NO_KERNEL_IMAGE":     int64(C.FMHA_STATUS_NO_KERNEL_IMAGE),
		"value FMHA_STATUS_CONTEXT_MISMATCH":    int64(C.FMHA_STATUS_CONTEXT_MISMATCH),
		"value FMHA_STATUS_INTERNAL_ERROR":      int64(C.FMHA_STATUS_INTERNAL_ERROR),
		"value FMHA_DTYPE_BF16":                 int64(C.FMHA_DTYPE_BF16),
		"value FMHA_DTYPE_FP16":                 int64(C.FMHA_DTYPE_FP16),
		"value FMHA_MASK_NONE":                  int64(C.FMHA_MASK_NONE),
		"value FMHA_MASK_CAUSAL_TOP_LEFT":       int64(C.FMHA_MASK_CAUSAL_TOP_LEFT),
		"value FMHA_MASK_CAUSAL_BOTTOM_RIGHT":   int64(C.FMHA_MASK_CAUSAL_BOTTOM_RIGHT),
		"value FMHA_KERNEL_AUTO":                int64(C.FMHA_KERNEL_AUTO),
		"value FMHA_KERNEL_PORTABLE":            int64(C.FMHA_KERNEL_PORTABLE),
		"value FMHA_KERNEL_HOPPER":              int64(C.FMHA_KERNEL_HOPPER),
		"value FMHA_KERNEL_DECODE":              int64(C.FMHA_KERNEL_DECODE),
		"value FMHA_FLAG_WRITE_LSE":             int64(C.FMHA_FLAG_WRITE_LSE),
		"value FMHA_FLAG_SINKS":                 int64(C.FMHA_FLAG_SINKS),
		"value FMHA_FLAG_VARLEN_Q":              int64(C.FMHA_FLAG_VARLEN_Q),
		"value FMHA_FLAG_VARLEN_K":              int64(C.FMHA_FLAG_VARLEN_K),
		"value FMHA_FLAG_SEQUSED_K":             int64(C.FMHA_FLAG_SEQUSED_K),
		"value FMHA_FLAG_PAGED_KV":              int64(C.FMHA_FLAG_PAGED_KV),
		"value FMHA_DESCRIPTOR_VERSION":         int64(C.FMHA_DESCRIPTOR_VERSION),
		"value FMHA_PLAN_INFO_VERSION":          int64(C.FMHA_PLAN_INFO_VERSION),
		"value FMHA_TENSORS_VERSION":            int64(C.FMHA_TENSORS_VERSION),
		"value FMHA_MERGE_DESCRIPTOR_VERSION":   int64(C.FMHA_MERGE_DESCRIPTOR_VERSION),
		"value FMHA_MERGE_MAX_PARTS":            int64(C.FMHA_MERGE_MAX_PARTS),
		"value FMHA_SM_ANY":                     int64(C.FMHA_SM_ANY),
		"value FMHA_SM_CURRENT_DEVICE":          int64(C.FMHA_SM_CURRENT_DEVICE),
	}
}
