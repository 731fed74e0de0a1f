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
    return fmha_run(plan, &t, (void *)workspace, workspace_bytes,
                    (fmha_stream)stream);
}
*/
import "C"

import (
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
	DescriptorVersion = 2
	PlanInfoVersion   = 1
	TensorsVersion    = 2
)

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
	KernelHopper   KernelFamily = 2
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
	HeadDim      int64 // of Q and K: 64, 96, 128 or 256
	HeadDimV     int64 // of V and O; 0 means HeadDim
	QStrides     Strides
	KStrides     Strides
	VStrides     Strides
	OStrides     Strides
	SoftmaxScale float32 // 0 means 1/sqrt(HeadDim)
	Mask         Mask
	Flags        uint32 // FlagWriteLSE
	Kernel       KernelFamily
	Device       int32 // CUDA ordinal used when no context is current
	Reserved0    int32 // must be 0
	// Version 2.
	WindowLeft  int32   // keys more than this before the diagonal are masked; -1: unbounded
	WindowRight int32   // keys more than this after the diagonal are masked; -1: unbounded
	Softcap     float32 // > 0: scores become Softcap*tanh(score/Softcap)
	Reserved1   int32   // must be 0
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
// older than this package.
func NewDescriptor() (*Descriptor, error) {
	d := new(Descriptor)
	if err := call(func() C.fmha_status { return C.fmha_descriptor_init(d.c(), DescriptorVersion) }); err != nil {
		return nil, err
	}
	return d, nil
}

// ContiguousStrides returns the library's strides of a contiguous tensor
// of nheads heads of headDim elements in the given layout.
func ContiguousStrides(layout Layout, seqlen, nheads, headDim int64) (Strides, error) {
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
func (d *Descriptor) SetContiguous(layout Layout) error {
	dv := d.HeadDimV
	if dv == 0 {
		dv = d.HeadDim
	}
	q, err := ContiguousStrides(layout, d.SeqlenQ, d.NumQHeads, d.HeadDim)
	if err != nil {
		return err
	}
	k, err := ContiguousStrides(layout, d.SeqlenK, d.NumKVHeads, d.HeadDim)
	if err != nil {
		return err
	}
	v, err := ContiguousStrides(layout, d.SeqlenK, d.NumKVHeads, dv)
	if err != nil {
		return err
	}
	o, err := ContiguousStrides(layout, d.SeqlenQ, d.NumQHeads, dv)
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
	return call(func() C.fmha_status { return C.fmha_check_support(d.c(), C.int32_t(sm)) })
}

// Version returns the loaded library's version as
// major*10000 + minor*100 + patch; compare with VersionNumber.
func Version() uint32 { return uint32(C.fmha_version()) }

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

// Tensors holds the device pointers of one run. All must be 16-byte aligned.
// LSE (float32 [batch, num_q_heads, seqlen_q]) is needed only with
// FlagWriteLSE.
type Tensors struct {
	Q, K, V, O, LSE DevicePtr
	// Sinks: float32 [NumQHeads] sink logits, required with FlagSinks.
	Sinks DevicePtr
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
}

// Plan is a validated problem bound to a CUDA context and a kernel. One
// plan may be run concurrently from several goroutines (the library allows
// concurrent fmha_run on one plan). Close releases it; a finalizer does so
// too if Close was forgotten.
type Plan struct {
	mu sync.RWMutex // Run holds it shared, Close exclusive
	p  *C.fmha_plan
}

var errClosed = &Error{Status: StatusInvalidArgument, Message: "fmha: plan is closed"}

// NewPlan validates d, picks the device and a kernel and loads it.
// Slow-ish: create plans ahead of time. Returns ErrNoDriver without a driver.
func NewPlan(d *Descriptor) (*Plan, error) {
	var p *C.fmha_plan
	if err := call(func() C.fmha_status { return C.fmha_create_plan(&p, d.c()) }); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, &Error{Status: StatusInternalError, Message: "fmha_create_plan succeeded but returned NULL"}
	}
	plan := &Plan{p: p}
	runtime.SetFinalizer(plan, (*Plan).Close)
	return plan, nil
}

// Close releases the plan. It is safe to call more than once and after all
// runs using the plan have been enqueued.
func (p *Plan) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p != nil {
		C.fmha_destroy_plan(p.p)
		p.p = nil
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
func (p *Plan) Info() (PlanInfo, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.p == nil {
		return PlanInfo{}, errClosed
	}
	var ci C.fmha_plan_info
	err := call(func() C.fmha_status {
		if s := C.fmha_plan_info_init(&ci, PlanInfoVersion); s != C.FMHA_STATUS_SUCCESS {
			return s
		}
		return C.fmha_plan_get_info(p.p, &ci)
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
			C.uintptr_t(t.O), C.uintptr_t(t.LSE), C.uintptr_t(t.Sinks), C.uintptr_t(workspace),
			C.size_t(workspaceBytes), C.uintptr_t(stream))
	})
}
