package fmha

import (
	"sort"
	"testing"
	"unsafe"
)

// goABI is the Go side of the ABI: the layout of the mirror structs and the
// values of the Go constants, keyed like cABI.
func goABI() map[string]int64 {
	var d Descriptor
	var s Strides
	var st Status
	var dt DType
	var m Mask
	var k KernelFamily
	var md MergeDescriptor
	return map[string]int64{
		"sizeof fmha_status":          int64(unsafe.Sizeof(st)),
		"sizeof fmha_dtype":           int64(unsafe.Sizeof(dt)),
		"sizeof fmha_mask":            int64(unsafe.Sizeof(m)),
		"sizeof fmha_kernel":          int64(unsafe.Sizeof(k)),
		"sizeof fmha_strides":         int64(unsafe.Sizeof(s)),
		"alignof fmha_strides":        int64(unsafe.Alignof(s)),
		"offsetof fmha_strides.batch": int64(unsafe.Offsetof(s.Batch)),
		"offsetof fmha_strides.seq":   int64(unsafe.Offsetof(s.Seq)),
		"offsetof fmha_strides.head":  int64(unsafe.Offsetof(s.Head)),
		"offsetof fmha_strides.dim":   int64(unsafe.Offsetof(s.Dim)),

		"sizeof fmha_descriptor":                     int64(unsafe.Sizeof(d)),
		"alignof fmha_descriptor":                    int64(unsafe.Alignof(d)),
		"offsetof fmha_descriptor.version":           int64(unsafe.Offsetof(d.Version)),
		"offsetof fmha_descriptor.dtype":             int64(unsafe.Offsetof(d.DType)),
		"offsetof fmha_descriptor.batch":             int64(unsafe.Offsetof(d.Batch)),
		"offsetof fmha_descriptor.num_q_heads":       int64(unsafe.Offsetof(d.NumQHeads)),
		"offsetof fmha_descriptor.num_kv_heads":      int64(unsafe.Offsetof(d.NumKVHeads)),
		"offsetof fmha_descriptor.seqlen_q":          int64(unsafe.Offsetof(d.SeqlenQ)),
		"offsetof fmha_descriptor.seqlen_k":          int64(unsafe.Offsetof(d.SeqlenK)),
		"offsetof fmha_descriptor.head_dim":          int64(unsafe.Offsetof(d.HeadDim)),
		"offsetof fmha_descriptor.head_dim_v":        int64(unsafe.Offsetof(d.HeadDimV)),
		"offsetof fmha_descriptor.q_strides":         int64(unsafe.Offsetof(d.QStrides)),
		"offsetof fmha_descriptor.k_strides":         int64(unsafe.Offsetof(d.KStrides)),
		"offsetof fmha_descriptor.v_strides":         int64(unsafe.Offsetof(d.VStrides)),
		"offsetof fmha_descriptor.o_strides":         int64(unsafe.Offsetof(d.OStrides)),
		"offsetof fmha_descriptor.softmax_scale":     int64(unsafe.Offsetof(d.SoftmaxScale)),
		"offsetof fmha_descriptor.mask":              int64(unsafe.Offsetof(d.Mask)),
		"offsetof fmha_descriptor.flags":             int64(unsafe.Offsetof(d.Flags)),
		"offsetof fmha_descriptor.kernel":            int64(unsafe.Offsetof(d.Kernel)),
		"offsetof fmha_descriptor.device":            int64(unsafe.Offsetof(d.Device)),
		"offsetof fmha_descriptor.reserved0":         int64(unsafe.Offsetof(d.Reserved0)),
		"offsetof fmha_descriptor.window_left":       int64(unsafe.Offsetof(d.WindowLeft)),
		"offsetof fmha_descriptor.window_right":      int64(unsafe.Offsetof(d.WindowRight)),
		"offsetof fmha_descriptor.softcap":           int64(unsafe.Offsetof(d.Softcap)),
		"offsetof fmha_descriptor.reserved1":         int64(unsafe.Offsetof(d.Reserved1)),
		"offsetof fmha_descriptor.total_q":           int64(unsafe.Offsetof(d.TotalQ)),
		"offsetof fmha_descriptor.total_k":           int64(unsafe.Offsetof(d.TotalK)),
		"offsetof fmha_descriptor.num_pages":         int64(unsafe.Offsetof(d.NumPages)),
		"offsetof fmha_descriptor.max_pages_per_seq": int64(unsafe.Offsetof(d.MaxPagesPerSeq)),
		"offsetof fmha_descriptor.page_size":         int64(unsafe.Offsetof(d.PageSize)),
		"offsetof fmha_descriptor.num_splits":        int64(unsafe.Offsetof(d.NumSplits)),

		"sizeof fmha_merge_descriptor":                int64(unsafe.Sizeof(md)),
		"alignof fmha_merge_descriptor":               int64(unsafe.Alignof(md)),
		"offsetof fmha_merge_descriptor.version":      int64(unsafe.Offsetof(md.Version)),
		"offsetof fmha_merge_descriptor.dtype":        int64(unsafe.Offsetof(md.DType)),
		"offsetof fmha_merge_descriptor.batch":        int64(unsafe.Offsetof(md.Batch)),
		"offsetof fmha_merge_descriptor.seqlen_q":     int64(unsafe.Offsetof(md.SeqlenQ)),
		"offsetof fmha_merge_descriptor.num_heads":    int64(unsafe.Offsetof(md.NumHeads)),
		"offsetof fmha_merge_descriptor.head_dim":     int64(unsafe.Offsetof(md.HeadDim)),
		"offsetof fmha_merge_descriptor.part_strides": int64(unsafe.Offsetof(md.PartStrides)),
		"offsetof fmha_merge_descriptor.o_strides":    int64(unsafe.Offsetof(md.OStrides)),
		"offsetof fmha_merge_descriptor.num_parts":    int64(unsafe.Offsetof(md.NumParts)),
		"offsetof fmha_merge_descriptor.flags":        int64(unsafe.Offsetof(md.Flags)),
		"offsetof fmha_merge_descriptor.device":       int64(unsafe.Offsetof(md.Device)),
		"offsetof fmha_merge_descriptor.reserved0":    int64(unsafe.Offsetof(md.Reserved0)),

		// LP64 layout of the structs built on the C side (tensors v3,
		// plan_info v2): the C helpers in fmha.go fill them.
		"sizeof fmha_tensors":                     88,
		"offsetof fmha_tensors.lse":               40,
		"offsetof fmha_tensors.sinks":             48,
		"offsetof fmha_tensors.cu_seqlens_q":      56,
		"offsetof fmha_tensors.cu_seqlens_k":      64,
		"offsetof fmha_tensors.seqused_k":         72,
		"offsetof fmha_tensors.block_table":       80,
		"sizeof fmha_plan_info":                   64,
		"offsetof fmha_plan_info.workspace_bytes": 48,
		"offsetof fmha_plan_info.num_splits":      56,

		"value FMHA_VERSION_MAJOR":              VersionMajor,
		"value FMHA_VERSION_MINOR":              VersionMinor,
		"value FMHA_VERSION_PATCH":              VersionPatch,
		"value FMHA_VERSION_NUMBER":             VersionNumber,
		"value FMHA_STATUS_SUCCESS":             int64(StatusSuccess),
		"value FMHA_STATUS_INVALID_ARGUMENT":    int64(StatusInvalidArgument),
		"value FMHA_STATUS_NOT_SUPPORTED":       int64(StatusNotSupported),
		"value FMHA_STATUS_VERSION_MISMATCH":    int64(StatusVersionMismatch),
		"value FMHA_STATUS_NO_DRIVER":           int64(StatusNoDriver),
		"value FMHA_STATUS_NO_DEVICE":           int64(StatusNoDevice),
		"value FMHA_STATUS_DRIVER_ERROR":        int64(StatusDriverError),
		"value FMHA_STATUS_MISALIGNED":          int64(StatusMisaligned),
		"value FMHA_STATUS_WORKSPACE_TOO_SMALL": int64(StatusWorkspaceTooSmall),
		"value FMHA_STATUS_OUT_OF_MEMORY":       int64(StatusOutOfMemory),
		"value FMHA_STATUS_NO_KERNEL_IMAGE":     int64(StatusNoKernelImage),
		"value FMHA_STATUS_CONTEXT_MISMATCH":    int64(StatusContextMismatch),
		"value FMHA_STATUS_INTERNAL_ERROR":      int64(StatusInternalError),
		"value FMHA_DTYPE_BF16":                 int64(BF16),
		"value FMHA_DTYPE_FP16":                 int64(FP16),
		"value FMHA_MASK_NONE":                  int64(MaskNone),
		"value FMHA_MASK_CAUSAL_TOP_LEFT":       int64(MaskCausalTopLeft),
		"value FMHA_MASK_CAUSAL_BOTTOM_RIGHT":   int64(MaskCausalBottomRight),
		"value FMHA_KERNEL_AUTO":                int64(KernelAuto),
		"value FMHA_KERNEL_PORTABLE":            int64(KernelPortable),
		"value FMHA_KERNEL_HOPPER":              int64(KernelHopper),
		"value FMHA_KERNEL_DECODE":              int64(KernelDecode),
		"value FMHA_FLAG_WRITE_LSE":             int64(FlagWriteLSE),
		"value FMHA_FLAG_SINKS":                 int64(FlagSinks),
		"value FMHA_FLAG_VARLEN_Q":              int64(FlagVarlenQ),
		"value FMHA_FLAG_VARLEN_K":              int64(FlagVarlenK),
		"value FMHA_FLAG_SEQUSED_K":             int64(FlagSequsedK),
		"value FMHA_FLAG_PAGED_KV":              int64(FlagPagedKV),
		"value FMHA_DESCRIPTOR_VERSION":         DescriptorVersion,
		"value FMHA_PLAN_INFO_VERSION":          PlanInfoVersion,
		"value FMHA_TENSORS_VERSION":            TensorsVersion,
		"value FMHA_MERGE_DESCRIPTOR_VERSION":   MergeDescriptorVersion,
		"value FMHA_MERGE_MAX_PARTS":            MergeMaxParts,
		"value FMHA_SM_ANY":                     SMAny,
		"value FMHA_SM_CURRENT_DEVICE":          SMCurrentDevice,
	}
}

func TestABIMatchesHeader(t *testing.T) {
	c, g := cABI(), goABI()
	var keys []string
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		gv, ok := g[k]
		if !ok {
			t.Errorf("%s: in the C probe, missing on the Go side", k)
		} else if gv != c[k] {
			t.Errorf("%s: C says %d, Go says %d", k, c[k], gv)
		}
	}
	for k := range g {
		if _, ok := c[k]; !ok {
			t.Errorf("%s: on the Go side, missing in the C probe", k)
		}
	}
	t.Logf("%d ABI facts compared", len(c))
}
