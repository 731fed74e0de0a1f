package fmha

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// valid is a small valid GQA problem with contiguous BSHD tensors.
func valid(t *testing.T) *Descriptor {
	t.Helper()
	d, err := NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	d.DType = BF16
	d.Batch = 2
	d.NumQHeads, d.NumKVHeads = 8, 2
	d.SeqlenQ, d.SeqlenK = 128, 256
	d.HeadDim = 128
	d.Mask = MaskCausalBottomRight
	if err := d.SetContiguous(LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	return d
}

// headDim80 is valid except for head_dim 80, which no kernel handles.
func headDim80(t *testing.T) *Descriptor {
	t.Helper()
	d, err := NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	d.Batch, d.NumQHeads, d.NumKVHeads, d.SeqlenQ, d.SeqlenK, d.HeadDim = 1, 4, 4, 64, 64, 80
	if err := d.SetContiguous(LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestVersionMatchesHeader(t *testing.T) {
	if Version() != VersionNumber {
		t.Fatalf("fmha_version() = %d, header says %d", Version(), VersionNumber)
	}
	want := fmt.Sprintf("%d.%d.%d", VersionMajor, VersionMinor, VersionPatch)
	if VersionString() != want {
		t.Fatalf("fmha_version_string() = %q, want %q", VersionString(), want)
	}
}

func TestDescriptorDefaults(t *testing.T) {
	d, err := NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != DescriptorVersion || d.DType != BF16 || d.Kernel != KernelAuto ||
		d.Mask != MaskNone || d.Device != 0 || d.Reserved0 != 0 || d.HeadDimV != 0 || d.SoftmaxScale != 0 {
		t.Fatalf("unexpected defaults: %+v", *d)
	}
	for _, s := range []Strides{d.QStrides, d.KStrides, d.VStrides, d.OStrides} {
		if s != (Strides{Dim: 1}) {
			t.Fatalf("default strides %+v, want {0 0 0 1}", s)
		}
	}
}

func TestContiguousStrides(t *testing.T) {
	s, err := ContiguousStrides(LayoutBSHD, 128, 8, 64)
	if err != nil || s != (Strides{Batch: 128 * 8 * 64, Seq: 8 * 64, Head: 64, Dim: 1}) {
		t.Fatalf("BSHD: %+v %v", s, err)
	}
	s, err = ContiguousStrides(LayoutBHSD, 128, 8, 64)
	if err != nil || s != (Strides{Batch: 8 * 128 * 64, Seq: 64, Head: 128 * 64, Dim: 1}) {
		t.Fatalf("BHSD: %+v %v", s, err)
	}
}

func TestValidProblemSupportedForAnySM(t *testing.T) {
	if err := CheckSupport(valid(t), SMAny); err != nil {
		t.Fatalf("valid problem rejected: %v", err)
	}
	d := valid(t)
	d.DType, d.Mask = FP16, MaskNone
	if err := CheckSupport(d, SMAny); err != nil {
		t.Fatalf("valid fp16 problem rejected: %v", err)
	}
}

func TestHeadDim80NotSupported(t *testing.T) {
	err := CheckSupport(headDim80(t), SMAny)
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("want ErrNotSupported, got %v", err)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.Status != StatusNotSupported {
		t.Fatalf("errors.As failed: %v", err)
	}
	if !strings.Contains(fe.Message, "head_dim") {
		t.Fatalf("message should name head_dim: %q", fe.Message)
	}
	if errors.Is(err, ErrInvalidArgument) {
		t.Fatal("NotSupported error must not match ErrInvalidArgument")
	}
}

func TestQHeadsNotMultipleOfKVHeadsInvalid(t *testing.T) {
	d, err := NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	d.Batch, d.NumQHeads, d.NumKVHeads, d.SeqlenQ, d.SeqlenK, d.HeadDim = 1, 6, 4, 64, 64, 64
	if err := d.SetContiguous(LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	err = CheckSupport(d, SMAny)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument, got %v", err)
	}
	if err.(*Error).Message == "" {
		t.Fatal("empty message")
	}
}

func TestZeroBatchInvalid(t *testing.T) {
	d := valid(t)
	d.Batch = 0
	if err := CheckSupport(d, SMAny); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument, got %v", err)
	}
}

func TestPlanWithoutDriverIsNoDriver(t *testing.T) {
	v, err := DriverVersion()
	if !errors.Is(err, ErrNoDriver) {
		t.Skipf("a CUDA driver is present (version %d, err %v): NoDriver path not testable", v, err)
	}
	p, err := NewPlan(valid(t))
	if p != nil || !errors.Is(err, ErrNoDriver) {
		t.Fatalf("want nil plan and ErrNoDriver, got %v, %v", p, err)
	}
	if err := CheckSupport(valid(t), SMCurrentDevice); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("SMCurrentDevice without driver: want ErrNoDriver, got %v", err)
	}
}

func TestEveryStatusMapping(t *testing.T) {
	names := []string{
		"FMHA_STATUS_SUCCESS", "FMHA_STATUS_INVALID_ARGUMENT", "FMHA_STATUS_NOT_SUPPORTED",
		"FMHA_STATUS_VERSION_MISMATCH", "FMHA_STATUS_NO_DRIVER", "FMHA_STATUS_NO_DEVICE",
		"FMHA_STATUS_DRIVER_ERROR", "FMHA_STATUS_MISALIGNED", "FMHA_STATUS_WORKSPACE_TOO_SMALL",
		"FMHA_STATUS_OUT_OF_MEMORY", "FMHA_STATUS_NO_KERNEL_IMAGE", "FMHA_STATUS_CONTEXT_MISMATCH",
		"FMHA_STATUS_INTERNAL_ERROR",
	}
	sentinels := []error{nil, ErrInvalidArgument, ErrNotSupported, ErrVersionMismatch, ErrNoDriver,
		ErrNoDevice, ErrDriverError, ErrMisaligned, ErrWorkspaceTooSmall, ErrOutOfMemory,
		ErrNoKernelImage, ErrContextMismatch, ErrInternalError}
	for i, name := range names {
		s := Status(i)
		if s.String() != name {
			t.Errorf("Status(%d).String() = %q, want %q", i, s.String(), name)
		}
		err := statusError(s, "msg")
		if i == 0 {
			if err != nil {
				t.Errorf("success maps to %v", err)
			}
			continue
		}
		if !errors.Is(err, sentinels[i]) {
			t.Errorf("%s does not match its sentinel", name)
		}
		for j := 1; j < len(sentinels); j++ {
			if j != i && errors.Is(err, sentinels[j]) {
				t.Errorf("%s matches sentinel of %s", name, names[j])
			}
		}
		if got := err.Error(); got != name+": msg" {
			t.Errorf("Error() = %q", got)
		}
		if got := sentinels[i].Error(); got != name {
			t.Errorf("sentinel Error() = %q", got)
		}
	}
	if Status(1000).String() != "FMHA_STATUS_UNKNOWN" {
		t.Errorf("unknown status: %q", Status(1000).String())
	}
	wrapped := fmt.Errorf("context: %w", statusError(StatusMisaligned, "q"))
	if !errors.Is(wrapped, ErrMisaligned) {
		t.Error("wrapped error lost its status")
	}
}

func TestErrorMessagesPerGoroutine(t *testing.T) {
	// libfmha keeps the last error per OS thread; goroutines migrate between
	// threads, so this checks each error carries the message of its own call.
	hd80 := headDim80(t)
	badHeads := valid(t)
	badHeads.NumQHeads = 7
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if i%2 == 0 {
					err := CheckSupport(hd80, SMAny)
					if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "head_dim") {
						errs <- fmt.Errorf("goroutine %d: %v", i, err)
						return
					}
				} else {
					err := CheckSupport(badHeads, SMAny)
					if !errors.Is(err, ErrInvalidArgument) || strings.Contains(err.Error(), "head_dim 80") {
						errs <- fmt.Errorf("goroutine %d: %v", i, err)
						return
					}
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestEmbeddedArchs(t *testing.T) {
	archs := EmbeddedArchs()
	t.Logf("embedded archs %v, ptx %d", archs, EmbeddedPTXArch())
	for i, a := range archs {
		if a < 80 || (i > 0 && archs[i-1] >= a) {
			t.Fatalf("bad arch list %v", archs)
		}
	}
}

func TestClosedPlan(t *testing.T) {
	p := &Plan{}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WorkspaceSize(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed plan: %v", err)
	}
	if err := p.Run(Tensors{}, 0, 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed plan: %v", err)
	}
	if _, err := p.Info(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed plan: %v", err)
	}
}

func TestDescriptorHasNoGoPointers(t *testing.T) {
	// Descriptor is passed to C by address; cgo's rules require it to hold
	// no Go pointers. Guard against someone adding a string or slice field.
	var check func(reflect.Type)
	check = func(ty reflect.Type) {
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			switch f.Type.Kind() {
			case reflect.Struct:
				check(f.Type)
			case reflect.Int32, reflect.Uint32, reflect.Int64, reflect.Float32:
			default:
				t.Errorf("%s.%s has kind %s", ty.Name(), f.Name, f.Type.Kind())
			}
		}
	}
	check(reflect.TypeOf(Descriptor{}))
}

func TestWindowSoftcapSinks(t *testing.T) {
	d := valid(t)
	d.WindowLeft, d.WindowRight = 128, -1
	d.Softcap = 30
	d.Flags |= FlagSinks
	if err := CheckSupport(d, SMAny); err != nil {
		t.Fatalf("window/softcap/sinks rejected: %v", err)
	}
	d.Kernel = KernelHopper
	if err := CheckSupport(d, 90); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("the Hopper kernel should decline them, got %v", err)
	}
	d.Kernel = KernelAuto
	d.WindowLeft = -2
	err := CheckSupport(d, SMAny)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "window_left") {
		t.Fatalf("window_left -2: got %v", err)
	}
}
