// Package fmha is a cgo binding of libfmha, fused multi-head attention for
// NVIDIA GPUs behind a stable C ABI (libfmha.so, header fmha/fmha.h).
//
// The library is found with pkg-config (package "fmha"); set
// PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig for a non-system install and
// LD_LIBRARY_PATH=$PREFIX/lib at run time. Everything works on a machine
// without an NVIDIA driver: calls that need one return ErrNoDriver.
//
// libfmha keeps its last error message per OS thread, so every call that
// can fail runs with the goroutine locked to its thread until the message
// has been copied into the returned *Error.
//
// The Go structs mirror the header of one release (VersionMajor,
// VersionMinor), but the library is loaded at run time, so before the first
// call that hands it a struct the package checks the library's Version()
// once (CheckLibraryVersion); a library it cannot use makes those calls
// return ErrVersionMismatch with a message naming both versions.
package fmha

/*
#cgo pkg-config: fmha
#include <stdint.h>
#include <stdlib.h>
#include <fmha/fmha.h>

// Builds the tensors struct on the C side so Go never converts integers
// (device addresses) to unsafe.Pointer.
static fmha_status fmha_go_run(const fmha_plan *plan, uintptr_t q, uintptr_t k,
                               uintptr_t v, uintptr_t o, uintptr_t lse, uintptr_t sinks,
                               uintptr_t cu_seqlens_q, uintptr_t cu_seqlens_k,
                               uintptr_t seqused_k, uintptr_t block_table,
                               uintptr_t workspace, size_t workspace_bytes,
                               uintptr_t stream) {
    fmha_tensors t;
    fmha_status s = fmha_tensors_init(&t, FMHA_TENSORS_VERSION);
    if (s != FMHA_STATUS_SUCCESS) return s;
    t.q = (const void *)q;
    t.k = (const void *)k;
    t.v = (const void *)v;
    t.o = (void *)o;
    t.lse = (float *)lse;
    t.sinks = (const float *)sinks;
    t.cu_seqlens_q = (const int32_t *)cu_seqlens_q;
    t.cu_seqlens_k = (const int32_t *)cu_seqlens_k;
    t.seqused_k = (const int32_t *)seqused_k;
    t.block_table = (const int32_t *)block_table;
    return fmha_run(plan, &t, (void *)workspace, workspace_bytes,
                    (fmha_stream)stream);
}

// Converts the parts' device addresses to the pointer arrays of
// fmha_run_merge (n <= FMHA_MERGE_MAX_PARTS, checked by the caller).
static fmha_status fmha_go_run_merge(const fmha_plan *plan, const uintptr_t *o_parts,
                                     const uintptr_t *lse_parts, int n, uintptr_t o,
                                     uintptr_t lse, uintptr_t stream) {
    const void *op[FMHA_MERGE_MAX_PARTS];
    const float *lp[FMHA_MERGE_MAX_PARTS];
    for (int i = 0; i < n && i < FMHA_MERGE_MAX_PARTS; ++i) {
        op[i] = (const void *)o_parts[i];
        lp[i] = (const float *)lse_parts[i];
    }
    return fmha_run_merge(plan, op, lp, (void *)o, (float *)lse, (fmha_stream)stream);
}
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Header version this package mirrors.
const (
	VersionMajor  = 0
	VersionMinor  = 1
	VersionPatch  = 0
	VersionNumber = VersionMajor*10000 + VersionMinor*100 + VersionPatch
)

// Struct versions this package fills in.
const (
	DescriptorVersion      = 3
	PlanInfoVersion        = 2
	TensorsVersion         = 3
	MergeDescriptorVersion = 1
)

// MergeMaxParts is the most parts one merge combines (FMHA_MERGE_MAX_PARTS).
const MergeMaxParts = 64

// Special values of the sm argument of CheckSupport.
const (
	SMAny           = 0  // skip every device-dependent check
	SMCurrentDevice = -1 // check against the device a plan would use now
)

// FlagWriteLSE in Descriptor.Flags makes Run write Tensors.LSE.
const FlagWriteLSE uint32 = 0x1

// FlagSinks in Descriptor.Flags (descriptor version 2) adds a per-head sink
// logit to each row's softmax denominator; Run then needs Tensors.Sinks.
const FlagSinks uint32 = 0x2

// Descriptor version 3 flags (the serving forms). Each needs its index array
// in Tensors; seqlen_q / seqlen_k become maxima.
const (
	// FlagVarlenQ: Q and O are packed [TotalQ, heads, dim]; sequence b owns
	// rows CuSeqlensQ[b] to CuSeqlensQ[b+1]-1. LSE is [NumQHeads, TotalQ].
	FlagVarlenQ uint32 = 0x4
	// FlagVarlenK: key counts from Tensors.CuSeqlensK and, without
	// FlagPagedKV, K/V packed [TotalK, kv_heads, dim].
	FlagVarlenK uint32 = 0x8
	// FlagSequsedK: key counts from Tensors.SequsedK (one per sequence).
	FlagSequsedK uint32 = 0x10
	// FlagPagedKV: K/V are [NumPages, PageSize, kv_heads, dim] (the batch
	// stride is the page stride); key j of sequence b is row j%PageSize of
	// page BlockTable[b*MaxPagesPerSeq + j/PageSize]. See CheckBlockTable.
	FlagPagedKV uint32 = 0x20
)

// DType is the element type of Q, K, V and O (fmha_dtype).
type DType int32

const (
	BF16 DType = 1
	FP16 DType = 2
)

// Mask says which keys a query may see (fmha_mask).
type Mask int32

const (
	MaskNone              Mask = 0
	MaskCausalTopLeft     Mask = 1
	MaskCausalBottomRight Mask = 2
)

// KernelFamily says which kernel family a plan may pick (fmha_kernel_family).
type KernelFamily int32

const (
	KernelAuto     KernelFamily = 0
	KernelPortable KernelFamily = 1
	// KernelHopper: sm_90 only (TMA, wgmma); head dims up to 512.
	KernelHopper KernelFamily = 2
	// KernelDecode: few query rows per sequence, GQA heads packed in one
	// tile, split-KV; also head_dim 512 (on devices other than sm_90).
	KernelDecode KernelFamily = 3
)

// Strides mirrors fmha_strides: element strides of one 4-D tensor. Element
// (b, s, h, d) lives at base + b*Batch + s*Seq + h*Head + d*Dim; Dim must be 1.
type Strides struct {
	Batch int64
	Seq   int64
	Head  int64
	Dim   int64
}

// Descriptor mirrors fmha_descriptor field for field (the ABI test checks
// the layout), so it is passed to the library as is. Create it with
// NewDescriptor so Version and the defaults are filled by the library.
//
// Shapes (logical order; strides give the memory order):
// Q [Batch, SeqlenQ, NumQHeads, HeadDim], K [Batch, SeqlenK, NumKVHeads, HeadDim],
// V [Batch, SeqlenK, NumKVHeads, HeadDimV], O [Batch, SeqlenQ, NumQHeads, HeadDimV].
type Descriptor struct {
	Version      uint32
	DType        DType
	Batch        int64
	NumQHeads    int64 // a multiple of NumKVHeads
	NumKVHeads   int64
	SeqlenQ      int64
	SeqlenK      int64
	HeadDim      int64 // of Q and K: 64, 96, 128, 256 or 512
	HeadDimV     int64 // of V and O; 0 means HeadDim
	QStrides     Strides
	KStrides     Strides
	VStrides     Strides
	OStrides     Strides
	SoftmaxScale float32 // 0 means 1/sqrt(HeadDim)
	Mask         Mask
	Flags        uint32 // Flag* bits: FlagWriteLSE; FlagSinks (v2); FlagVarlenQ, FlagVarlenK, FlagSequsedK, FlagPagedKV (v3)
	Kernel       KernelFamily
	Device       int32 // CUDA ordinal used when no context is current
	Reserved0    int32 // must be 0
	// Version 2.
	WindowLeft  int32   // keys more than this before the diagonal are masked; -1: unbounded
	WindowRight int32   // keys more than this after the diagonal are masked; -1: unbounded
	Softcap     float32 // > 0: scores become Softcap*tanh(score/Softcap)
	Reserved1   int32   // must be 0
	// Version 3 (each must stay 0 without its flag).
	TotalQ         int64 // FlagVarlenQ: rows of the packed Q and O
	TotalK         int64 // FlagVarlenK without FlagPagedKV: rows of the packed K and V
	NumPages       int64 // FlagPagedKV: pages in the K and V caches
	MaxPagesPerSeq int64 // FlagPagedKV: columns of the block table
	PageSize       int32 // FlagPagedKV: key rows per page
	NumSplits      int32 // split-KV parts: 0 automatic, 1 off, 2..128 exactly
}

// Layout names a contiguous memory order for SetContiguous.
type Layout int

const (
	LayoutBSHD Layout = iota // [batch, seq, heads, dim]
	LayoutBHSD               // [batch, heads, seq, dim]
)

// call runs f with the goroutine locked to its OS thread and turns a failing
// status into an *Error carrying that thread's last error message.
func call(f func() C.fmha_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := f()
	if s == C.FMHA_STATUS_SUCCESS {
		return nil
	}
	return statusError(Status(s), C.GoString(C.fmha_last_error_message()))
}

func (d *Descriptor) c() *C.fmha_descriptor {
	// Descriptor has the layout of fmha_descriptor and holds no Go pointers.
	return (*C.fmha_descriptor)(unsafe.Pointer(d))
}

// NewDescriptor returns a descriptor filled by fmha_descriptor_init with
// the library's defaults (strides 0 except Dim 1, BF16, no mask, AUTO
// kernel, device 0). It fails with ErrVersionMismatch if the library is
// older than this package or of another release series
// (CheckLibraryVersion).
func NewDescriptor() (*Descriptor, error) {
	if err := CheckLibraryVersion(); err != nil {
		return nil, err
	}
	d := new(Descriptor)
	if err := call(func() C.fmha_status { return C.fmha_descriptor_init(d.c(), DescriptorVersion) }); err != nil {
		return nil, err
	}
	return d, nil
}

// ContiguousStrides returns the library's strides of a contiguous tensor
// of nheads heads of headDim elements in the given layout.
func ContiguousStrides(layout Layout, seqlen, nheads, headDim int64) (Strides, error) {
	if err := CheckLibraryVersion(); err != nil {
		return Strides{}, err
	}
	var s Strides
	p := (*C.fmha_strides)(unsafe.Pointer(&s))
	err := call(func() C.fmha_status {
		if layout == LayoutBHSD {
			return C.fmha_strides_bhsd(p, C.int64_t(seqlen), C.int64_t(nheads), C.int64_t(headDim))
		}
		return C.fmha_strides_bshd(p, C.int64_t(seqlen), C.int64_t(nheads), C.int64_t(headDim))
	})
	return s, err
}

// SetContiguous sets all four tensors' strides for contiguous tensors in
// layout, from the sequence lengths, head counts and head dims already set.
// Rows are counted as the library addresses them: TotalQ for packed Q/O
// (FlagVarlenQ), PageSize per page for paged K/V, TotalK for packed K/V;
// so set the flags and those fields first.
func (d *Descriptor) SetContiguous(layout Layout) error {
	dv := d.HeadDimV
	if dv == 0 {
		dv = d.HeadDim
	}
	qRows, kRows := d.SeqlenQ, d.SeqlenK
	if d.Flags&FlagVarlenQ != 0 {
		qRows = d.TotalQ
	}
	if d.Flags&FlagPagedKV != 0 {
		kRows = int64(d.PageSize)
	} else if d.Flags&FlagVarlenK != 0 {
		kRows = d.TotalK
	}
	q, err := ContiguousStrides(layout, qRows, d.NumQHeads, d.HeadDim)
	if err != nil {
		return err
	}
	k, err := ContiguousStrides(layout, kRows, d.NumKVHeads, d.HeadDim)
	if err != nil {
		return err
	}
	v, err := ContiguousStrides(layout, kRows, d.NumKVHeads, dv)
	if err != nil {
		return err
	}
	o, err := ContiguousStrides(layout, qRows, d.NumQHeads, dv)
	if err != nil {
		return err
	}
	d.QStrides, d.KStrides, d.VStrides, d.OStrides = q, k, v, o
	return nil
}

// CheckSupport says whether d is valid and supported, without creating
// anything. sm is a compute capability as major*10+minor (80, 90, ...),
// SMAny or SMCurrentDevice (which needs the driver).
func CheckSupport(d *Descriptor, sm int) error {
	if err := CheckLibraryVersion(); err != nil {
		return err
	}
	if sm < math.MinInt32 || sm > math.MaxInt32 {
		// C.int32_t(sm) would keep the low 32 bits: 1<<32|90 would check sm 90.
		return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf("fmha: sm %d does not fit in int32", sm)}
	}
	return call(func() C.fmha_status { return C.fmha_check_support(d.c(), C.int32_t(sm)) })
}

// Version returns the loaded library's version as
// major*10000 + minor*100 + patch; compare with VersionNumber.
func Version() uint32 { return uint32(C.fmha_version()) }

// VersionCompatible says whether a library whose Version() is found can be
// used by bindings that mirror the header of release
// mirroredMajor.mirroredMinor: the major version must be the same, and
// before 1.0 the minor version too, since a 0.x minor release may change the
// struct layouts. It returns nil, or an *Error of StatusVersionMismatch
// naming both versions. Pure: no library call.
func VersionCompatible(found, mirroredMajor, mirroredMinor uint32) error {
	major, minor, patch := found/10000, found/100%100, found%100
	loaded := fmt.Sprintf("fmha: the loaded libfmha is %d.%d.%d, but this package mirrors the header of libfmha %d.%d",
		major, minor, patch, mirroredMajor, mirroredMinor)
	if major != mirroredMajor {
		return &Error{Status: StatusVersionMismatch, Message: fmt.Sprintf("%s and needs libfmha %d.x",
			loaded, mirroredMajor)}
	}
	if major == 0 && minor != mirroredMinor {
		return &Error{Status: StatusVersionMismatch, Message: fmt.Sprintf(
			"%s and needs libfmha %d.%d.x (before 1.0 a minor release may change the struct layouts)",
			loaded, mirroredMajor, mirroredMinor)}
	}
	return nil
}

var libraryVersion struct {
	once sync.Once
	err  *Error // VersionCompatible's verdict; nil when compatible
}

// CheckLibraryVersion checks that the loaded library can be used with the
// struct layouts this package mirrors (VersionCompatible against
// VersionMajor and VersionMinor, which abi_test.go holds equal to the
// header's): nil, or ErrVersionMismatch naming both versions. It asks the
// library once per process; every function that passes the library a struct
// (NewDescriptor, ContiguousStrides, CheckSupport, NewPlan, CheckBlockTable,
// NewMergeDescriptor, NewMergePlan) calls it first.
func CheckLibraryVersion() error {
	libraryVersion.once.Do(func() {
		if err := VersionCompatible(Version(), VersionMajor, VersionMinor); err != nil {
			libraryVersion.err = err.(*Error)
		}
	})
	if libraryVersion.err == nil {
		return nil
	}
	copied := *libraryVersion.err // each caller owns its error
	return &copied
}

// VersionString returns the loaded library's version, e.g. "0.1.0".
func VersionString() string { return C.GoString(C.fmha_version_string()) }

// DriverVersion loads the CUDA driver if needed and returns its version
// (e.g. 13000), or ErrNoDriver when libcuda.so.1 is missing.
func DriverVersion() (int, error) {
	var v C.int32_t
	err := call(func() C.fmha_status { return C.fmha_driver_version(&v) })
	return int(v), err
}

// EmbeddedArchs returns the architectures (major*10+minor) this build of
// the library has machine code for, ascending.
func EmbeddedArchs() []int {
	n := C.fmha_embedded_archs(nil, 0)
	if n <= 0 {
		return nil
	}
	buf := make([]C.int32_t, int(n))
	m := C.fmha_embedded_archs(&buf[0], n)
	if m < n {
		n = m
	}
	out := make([]int, 0, int(n))
	for _, a := range buf[:int(n)] {
		out = append(out, int(a))
	}
	return out
}

// EmbeddedPTXArch returns the virtual architecture of the embedded PTX
// (e.g. 80), or 0 if there is none.
func EmbeddedPTXArch() int { return int(C.fmha_embedded_ptx_arch()) }

// DevicePtr is a CUDA device address (a CUdeviceptr).
type DevicePtr uintptr

// Stream is a CUstream or cudaStream_t handle; 0 is the legacy default stream.
type Stream uintptr

// Tensors holds the device pointers of one run. Q, K, V and O must be
// 16-byte aligned, the others 4-byte aligned. LSE (float32 [batch,
// num_q_heads, seqlen_q]; [num_q_heads, total_q] with FlagVarlenQ) is needed
// only with FlagWriteLSE.
type Tensors struct {
	Q, K, V, O, LSE DevicePtr
	// Sinks: float32 [NumQHeads] sink logits, required with FlagSinks.
	Sinks DevicePtr
	// Index arrays (int32, device), each required exactly with its flag:
	CuSeqlensQ DevicePtr // [batch+1] query offsets: FlagVarlenQ
	CuSeqlensK DevicePtr // [batch+1] key offsets: FlagVarlenK
	SequsedK   DevicePtr // [batch] keys used per sequence: FlagSequsedK
	BlockTable DevicePtr // [batch, MaxPagesPerSeq] row-major page indices: FlagPagedKV
}

// PlanInfo says what a plan chose (fmha_plan_info).
type PlanInfo struct {
	KernelFamily      KernelFamily
	KernelName        string
	Device            int
	DeviceSM          int
	ImageSM           int
	ImageIsPTX        bool
	TileM             int
	TileN             int
	ThreadsPerCTA     int
	SharedMemoryBytes int
	WorkspaceBytes    uint64
	// NumSplits: split-KV parts per (sequence, head), 1 = none; for a merge
	// plan, the number of parts.
	NumSplits int
}

// Plan is a validated problem bound to a CUDA context and a kernel. One
// plan may be run concurrently from several goroutines (the library allows
// concurrent fmha_run on one plan). Close releases it; a finalizer does so
// too if Close was forgotten.
type Plan struct {
	planHandle
}

// planHandle is what Plan and MergePlan share: the C plan, and the lock
// that runs hold shared and Close exclusive.
type planHandle struct {
	mu sync.RWMutex
	p  *C.fmha_plan
}

var errClosed = &Error{Status: StatusInvalidArgument, Message: "fmha: plan is closed"}

// createPlan runs create (the C function named name) and checks that it
// returned a plan.
func createPlan(name string, create func(p **C.fmha_plan) C.fmha_status) (*C.fmha_plan, error) {
	var p *C.fmha_plan
	if err := call(func() C.fmha_status { return create(&p) }); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, &Error{Status: StatusInternalError, Message: name + " succeeded but returned NULL"}
	}
	return p, nil
}

// release destroys the plan unless that was done already, and says whether
// it did: the owner then drops its finalizer.
func (h *planHandle) release() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		return false
	}
	C.fmha_destroy_plan(h.p)
	h.p = nil
	return true
}

func (h *planHandle) info() (PlanInfo, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.p == nil {
		return PlanInfo{}, errClosed
	}
	return planInfo(h.p)
}

// NewPlan validates d, picks the device and a kernel and loads it.
// Slow-ish: create plans ahead of time. Returns ErrNoDriver without a driver.
func NewPlan(d *Descriptor) (*Plan, error) {
	if err := CheckLibraryVersion(); err != nil {
		return nil, err
	}
	p, err := createPlan("fmha_create_plan", func(p **C.fmha_plan) C.fmha_status {
		return C.fmha_create_plan(p, d.c())
	})
	if err != nil {
		return nil, err
	}
	plan := &Plan{planHandle{p: p}}
	runtime.SetFinalizer(plan, (*Plan).Close)
	return plan, nil
}

// Close releases the plan. It is safe to call more than once and after all
// runs using the plan have been enqueued.
func (p *Plan) Close() error {
	if p.release() {
		runtime.SetFinalizer(p, nil)
	}
	return nil
}

// WorkspaceSize returns the bytes of device workspace Run needs (may be 0).
func (p *Plan) WorkspaceSize() (uint64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.p == nil {
		return 0, errClosed
	}
	var n C.size_t
	err := call(func() C.fmha_status { return C.fmha_plan_workspace_size(p.p, &n) })
	return uint64(n), err
}

// Info returns what the plan chose.
func (p *Plan) Info() (PlanInfo, error) { return p.info() }

func planInfo(p *C.fmha_plan) (PlanInfo, error) {
	var ci C.fmha_plan_info
	err := call(func() C.fmha_status {
		if s := C.fmha_plan_info_init(&ci, PlanInfoVersion); s != C.FMHA_STATUS_SUCCESS {
			return s
		}
		return C.fmha_plan_get_info(p, &ci)
	})
	if err != nil {
		return PlanInfo{}, err
	}
	return PlanInfo{
		KernelFamily:      KernelFamily(ci.kernel_family),
		KernelName:        C.GoString(ci.kernel_name),
		Device:            int(ci.device),
		DeviceSM:          int(ci.device_sm),
		ImageSM:           int(ci.image_sm),
		ImageIsPTX:        ci.image_is_ptx != 0,
		TileM:             int(ci.tile_m),
		TileN:             int(ci.tile_n),
		ThreadsPerCTA:     int(ci.threads_per_cta),
		SharedMemoryBytes: int(ci.shared_memory_bytes),
		WorkspaceBytes:    uint64(ci.workspace_bytes),
		NumSplits:         int(ci.num_splits),
	}, nil
}

// Run enqueues attention on stream; it never allocates or synchronizes.
// The pointers must be device memory of the plan's CUDA context, large
// enough for the descriptor's shapes and strides, and stay valid until the
// work on stream completes; workspace must hold workspaceBytes bytes, at
// least WorkspaceSize(). The library cannot check buffer sizes: wrong
// pointers corrupt device memory. Argument errors are returned before
// anything is enqueued.
func (p *Plan) Run(t Tensors, workspace DevicePtr, workspaceBytes uint64, stream Stream) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.p == nil {
		return errClosed
	}
	return call(func() C.fmha_status {
		return C.fmha_go_run(p.p, C.uintptr_t(t.Q), C.uintptr_t(t.K), C.uintptr_t(t.V),
			C.uintptr_t(t.O), C.uintptr_t(t.LSE), C.uintptr_t(t.Sinks),
			C.uintptr_t(t.CuSeqlensQ), C.uintptr_t(t.CuSeqlensK), C.uintptr_t(t.SequsedK),
			C.uintptr_t(t.BlockTable), C.uintptr_t(workspace),
			C.size_t(workspaceBytes), C.uintptr_t(stream))
	})
}

// CheckBlockTable checks a host copy of a paged-KV block table against d
// (which must set FlagPagedKV): every entry a sequence's keys use must lie in
// [0, NumPages); the kernels would clamp a bad entry (no fault, but a wrong
// result). seqlensK gives each sequence's key count (nil: SeqlenK for all).
// table is row-major [Batch, MaxPagesPerSeq]; short slices are refused with
// ErrInvalidArgument before the library reads them. Pure host code: no
// driver needed. The library's message names the first bad entry as
// block_table[b][i].
func CheckBlockTable(d *Descriptor, table []int32, seqlensK []int32) error {
	if err := CheckLibraryVersion(); err != nil {
		return err
	}
	if d.Flags&FlagPagedKV != 0 && d.Batch > 0 && d.MaxPagesPerSeq > 0 {
		if d.MaxPagesPerSeq > int64(len(table))/d.Batch { // i.e. len(table) < Batch*MaxPagesPerSeq, without overflow
			return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
				"block_table has %d entries: the descriptor needs batch x max_pages_per_seq = %d x %d",
				len(table), d.Batch, d.MaxPagesPerSeq)}
		}
		if seqlensK != nil && int64(len(seqlensK)) < d.Batch {
			return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
				"seqlens_k has %d entries: the descriptor's batch is %d", len(seqlensK), d.Batch)}
		}
	}
	var tp, lp *C.int32_t
	if len(table) > 0 {
		tp = (*C.int32_t)(unsafe.Pointer(&table[0]))
	}
	if len(seqlensK) > 0 {
		lp = (*C.int32_t)(unsafe.Pointer(&seqlensK[0]))
	}
	err := call(func() C.fmha_status { return C.fmha_check_block_table(d.c(), tp, lp) })
	runtime.KeepAlive(table)
	runtime.KeepAlive(seqlensK)
	return err
}

// MergeDescriptor mirrors fmha_merge_descriptor field for field. Create it
// with NewMergeDescriptor. NumParts partial results O [Batch, SeqlenQ,
// NumHeads, HeadDim] (strides PartStrides) over disjoint key sets, each with
// its float32 LSE [Batch, NumHeads, SeqlenQ] (contiguous, as Run writes it
// with FlagWriteLSE), combine into the exact attention over the union:
// O = sum_p exp(LSE_p - LSE) O_p, LSE = log sum_p exp(LSE_p). Packed
// (varlen) results are Batch 1, SeqlenQ = total_q.
type MergeDescriptor struct {
	Version     uint32
	DType       DType
	Batch       int64
	SeqlenQ     int64
	NumHeads    int64
	HeadDim     int64 // a multiple of 8, from 8 to 512
	PartStrides Strides
	OStrides    Strides
	NumParts    int32  // 1 to MergeMaxParts
	Flags       uint32 // FlagWriteLSE: also write the merged LSE
	Device      int32  // CUDA ordinal used when no context is current
	Reserved0   int32  // must be 0
}

func (d *MergeDescriptor) c() *C.fmha_merge_descriptor {
	return (*C.fmha_merge_descriptor)(unsafe.Pointer(d))
}

// NewMergeDescriptor returns a merge descriptor filled by
// fmha_merge_descriptor_init (BF16, strides 0 except Dim 1, device 0).
func NewMergeDescriptor() (*MergeDescriptor, error) {
	if err := CheckLibraryVersion(); err != nil {
		return nil, err
	}
	d := new(MergeDescriptor)
	if err := call(func() C.fmha_status {
		return C.fmha_merge_descriptor_init(d.c(), MergeDescriptorVersion)
	}); err != nil {
		return nil, err
	}
	return d, nil
}

// SetContiguous sets the parts' and the output's strides for contiguous
// tensors in layout.
func (d *MergeDescriptor) SetContiguous(layout Layout) error {
	s, err := ContiguousStrides(layout, d.SeqlenQ, d.NumHeads, d.HeadDim)
	if err != nil {
		return err
	}
	d.PartStrides, d.OStrides = s, s
	return nil
}

// MergePlan merges partial results (fmha_create_merge_plan). It needs no
// workspace, may be run from several goroutines at once, and is released by
// Close (or a finalizer).
type MergePlan struct {
	planHandle
	numParts int
}

// NewMergePlan validates d and loads the merge kernel (needs the driver:
// ErrNoDriver otherwise).
func NewMergePlan(d *MergeDescriptor) (*MergePlan, error) {
	if err := CheckLibraryVersion(); err != nil {
		return nil, err
	}
	p, err := createPlan("fmha_create_merge_plan", func(p **C.fmha_plan) C.fmha_status {
		return C.fmha_create_merge_plan(p, d.c())
	})
	if err != nil {
		return nil, err
	}
	mp := &MergePlan{planHandle: planHandle{p: p}, numParts: int(d.NumParts)}
	runtime.SetFinalizer(mp, (*MergePlan).Close)
	return mp, nil
}

// Close releases the plan; safe to call more than once.
func (m *MergePlan) Close() error {
	if m.release() {
		runtime.SetFinalizer(m, nil)
	}
	return nil
}

// NumParts returns how many parts each Run combines.
func (m *MergePlan) NumParts() int { return m.numParts }

// Info returns what the plan loaded (NumSplits is the part count).
func (m *MergePlan) Info() (PlanInfo, error) { return m.info() }

// Run enqueues the merge on stream; it never allocates or synchronizes.
// oParts and lseParts must hold exactly NumParts() device addresses (O
// 16-byte aligned, LSE 4-byte aligned); lse may be 0 unless the descriptor
// set FlagWriteLSE. The output may alias a part only if it is that same
// tensor with the same strides. The buffers must stay valid until the work
// on stream completes.
func (m *MergePlan) Run(oParts, lseParts []DevicePtr, o, lse DevicePtr, stream Stream) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.p == nil {
		return errClosed
	}
	if len(oParts) != m.numParts || len(lseParts) != m.numParts || m.numParts > MergeMaxParts {
		return &Error{Status: StatusInvalidArgument, Message: fmt.Sprintf(
			"fmha: this merge plan combines %d parts: got %d O parts and %d LSE parts",
			m.numParts, len(oParts), len(lseParts))}
	}
	op := make([]C.uintptr_t, m.numParts)
	lp := make([]C.uintptr_t, m.numParts)
	for i := range oParts {
		op[i], lp[i] = C.uintptr_t(oParts[i]), C.uintptr_t(lseParts[i])
	}
	return call(func() C.fmha_status {
		return C.fmha_go_run_merge(m.p, &op[0], &lp[0], C.int(m.numParts), C.uintptr_t(o),
			C.uintptr_t(lse), C.uintptr_t(stream))
	})
}
