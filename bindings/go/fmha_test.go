package fmha

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// newDescriptor returns NewDescriptor's defaults or fails the test.
func newDescriptor(t *testing.T) *Descriptor {
	t.Helper()
	d, err := NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bshd returns the defaults with set applied, then contiguous BSHD strides
// (computed last, from the shape set gave).
func bshd(t *testing.T, set func(d *Descriptor)) *Descriptor {
	t.Helper()
	d := newDescriptor(t)
	set(d)
	if err := d.SetContiguous(LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	return d
}

// skipWithDriver skips the rest of the test where a CUDA driver is
// installed: the NoDriver paths cannot be reached there.
func skipWithDriver(t *testing.T) {
	t.Helper()
	if v, err := DriverVersion(); !errors.Is(err, ErrNoDriver) {
		t.Skipf("a CUDA driver is present (version %d, err %v): NoDriver path not testable", v, err)
	}
}

// valid is a small valid GQA problem with contiguous BSHD tensors.
func valid(t *testing.T) *Descriptor {
	t.Helper()
	return bshd(t, func(d *Descriptor) {
		d.DType = BF16
		d.Batch = 2
		d.NumQHeads, d.NumKVHeads = 8, 2
		d.SeqlenQ, d.SeqlenK = 128, 256
		d.HeadDim = 128
		d.Mask = MaskCausalBottomRight
	})
}

// headDim80 is valid except for head_dim 80, which no kernel handles.
func headDim80(t *testing.T) *Descriptor {
	t.Helper()
	return bshd(t, func(d *Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads, d.SeqlenQ, d.SeqlenK, d.HeadDim = 1, 4, 4, 64, 64, 80
	})
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
	d := newDescriptor(t)
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

func TestCheckSupportSMBeyondInt32(t *testing.T) {
	// The C parameter is int32_t: 1<<32|90 must not be checked as sm 90 (nor
	// 1<<32 as FMHA_SM_ANY).
	for _, sm := range []int64{1<<32 | 90, 1 << 32, -1 << 40} {
		err := CheckSupport(valid(t), int(sm))
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "sm") {
			t.Errorf("sm %d: want ErrInvalidArgument naming sm, got %v", sm, err)
		}
	}
	if err := CheckSupport(valid(t), 90); err != nil {
		t.Fatalf("sm 90: %v", err)
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
	d := bshd(t, func(d *Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads, d.SeqlenQ, d.SeqlenK, d.HeadDim = 1, 6, 4, 64, 64, 64
	})
	err := CheckSupport(d, SMAny)
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
	skipWithDriver(t)
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
	check(reflect.TypeOf(MergeDescriptor{}))
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
	err := CheckSupport(d, 90)
	hasSM90 := false
	for _, a := range EmbeddedArchs() {
		hasSM90 = hasSM90 || a == 90
	}
	// The Hopper kernel takes them; a build without sm_90a cubins has no
	// Hopper kernel to ask.
	if hasSM90 && err != nil {
		t.Fatalf("the Hopper kernel should take them, got %v", err)
	}
	if !hasSM90 && !errors.Is(err, ErrNoKernelImage) {
		t.Fatalf("a build without sm_90 should say NO_KERNEL_IMAGE, got %v", err)
	}
	d.Kernel = KernelAuto
	d.WindowLeft = -2
	err = CheckSupport(d, SMAny)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "window_left") {
		t.Fatalf("window_left -2: got %v", err)
	}
}

// pagedDecode is a decode problem over a paged cache: 3 sequences of up to
// 16 pages of 16 keys, one query row each, GQA 32/8.
func pagedDecode(t *testing.T) *Descriptor {
	t.Helper()
	return bshd(t, func(d *Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads, d.SeqlenQ, d.SeqlenK, d.HeadDim = 3, 32, 8, 1, 256, 128
		d.Mask = MaskCausalBottomRight
		d.Flags |= FlagPagedKV | FlagSequsedK
		d.NumPages, d.PageSize, d.MaxPagesPerSeq = 40, 16, 16
	})
}

func TestVersion3DefaultsAndDecodeKernel(t *testing.T) {
	d := newDescriptor(t)
	if d.Version != 3 || d.TotalQ != 0 || d.TotalK != 0 || d.NumPages != 0 || d.MaxPagesPerSeq != 0 ||
		d.PageSize != 0 || d.NumSplits != 0 {
		t.Fatalf("version-3 defaults: %+v", *d)
	}
	v := valid(t)
	v.Kernel, v.NumSplits = KernelDecode, 8
	if err := CheckSupport(v, SMAny); err != nil {
		t.Fatalf("decode kernel with 8 splits: %v", err)
	}
	v = valid(t)
	v.HeadDim = 512
	if err := v.SetContiguous(LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	if err := CheckSupport(v, SMAny); err != nil {
		t.Fatalf("head_dim 512: %v", err)
	}
}

func TestPagedAndVarlenDescriptors(t *testing.T) {
	d := pagedDecode(t)
	if d.KStrides != (Strides{Batch: 16 * 8 * 128, Seq: 8 * 128, Head: 128, Dim: 1}) {
		t.Fatalf("paged K strides %+v: the batch stride must be the page stride", d.KStrides)
	}
	if err := CheckSupport(d, SMAny); err != nil {
		t.Fatalf("paged decode rejected: %v", err)
	}
	d.NumSplits = 4
	if err := CheckSupport(d, 80); err != nil {
		t.Fatalf("paged decode with 4 splits rejected: %v", err)
	}

	v := bshd(t, func(v *Descriptor) {
		v.Batch, v.NumQHeads, v.NumKVHeads, v.SeqlenQ, v.SeqlenK, v.HeadDim = 4, 8, 2, 300, 513, 64
		v.Flags |= FlagVarlenQ | FlagVarlenK | FlagWriteLSE
		v.TotalQ, v.TotalK = 1000, 2000
		v.Mask = MaskCausalTopLeft
	})
	if v.QStrides != (Strides{Batch: 1000 * 8 * 64, Seq: 8 * 64, Head: 64, Dim: 1}) {
		t.Fatalf("packed Q strides %+v", v.QStrides)
	}
	if err := CheckSupport(v, SMAny); err != nil {
		t.Fatalf("varlen rejected: %v", err)
	}
}

func TestVersion3RulesNameTheField(t *testing.T) {
	cases := []struct {
		field string
		set   func(d *Descriptor)
	}{
		{"total_q", func(d *Descriptor) { d.TotalQ = 5 }},
		{"num_splits", func(d *Descriptor) { d.NumSplits = 129 }},
		{"page_size", func(d *Descriptor) { d.PageSize = 16 }},
	}
	for _, c := range cases {
		d := valid(t)
		c.set(d)
		err := CheckSupport(d, SMAny)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v", c.field, err)
		}
	}
	d := pagedDecode(t)
	d.MaxPagesPerSeq = 8 // 128 keys < seqlen_k 256
	if err := CheckSupport(d, SMAny); !strings.Contains(fmt.Sprint(err), "max_pages_per_seq") {
		t.Errorf("max_pages_per_seq: got %v", err)
	}
}

func TestCheckBlockTable(t *testing.T) {
	d := pagedDecode(t)
	table := make([]int32, 48)
	for i := range table {
		table[i] = int32(i % 40)
	}
	if err := CheckBlockTable(d, table, nil); err != nil {
		t.Fatalf("valid table: %v", err)
	}
	if err := CheckBlockTable(d, table, []int32{256, 0, 17}); err != nil {
		t.Fatalf("valid table with lengths: %v", err)
	}
	table[16+3] = 40 // sequence 1, page 3: keys 48..63
	err := CheckBlockTable(d, table, nil)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "block_table[1][3]") {
		t.Fatalf("bad entry: got %v", err)
	}
	if err := CheckBlockTable(d, table, []int32{256, 48, 17}); err != nil {
		t.Fatalf("page 3 of sequence 1 is unused with 48 keys: %v", err)
	}
	if err := CheckBlockTable(d, table, []int32{257, 0, 0}); !strings.Contains(fmt.Sprint(err), "seqlens_k") {
		t.Fatalf("too many keys: got %v", err)
	}
	// Short slices are refused before the library reads them.
	if err := CheckBlockTable(d, table[:47], nil); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "47 entries") {
		t.Fatalf("short table: got %v", err)
	}
	if err := CheckBlockTable(d, table, []int32{1, 2}); !strings.Contains(fmt.Sprint(err), "batch is 3") {
		t.Fatalf("short lengths: got %v", err)
	}
	if err := CheckBlockTable(valid(t), nil, nil); !strings.Contains(fmt.Sprint(err), "FMHA_FLAG_PAGED_KV") {
		t.Fatalf("dense descriptor: got %v", err)
	}
}

// newMergeDescriptor returns NewMergeDescriptor's defaults or fails the test.
func newMergeDescriptor(t *testing.T) *MergeDescriptor {
	t.Helper()
	m, err := NewMergeDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func merge3(t *testing.T) *MergeDescriptor {
	t.Helper()
	m := newMergeDescriptor(t)
	m.DType = FP16
	m.Batch, m.SeqlenQ, m.NumHeads, m.HeadDim, m.NumParts = 2, 5, 8, 64, 3
	m.Flags |= FlagWriteLSE
	if err := m.SetContiguous(LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMergeDescriptor(t *testing.T) {
	m := newMergeDescriptor(t)
	if m.Version != MergeDescriptorVersion || m.DType != BF16 || m.Flags != 0 || m.Device != 0 ||
		m.PartStrides != (Strides{Dim: 1}) || m.OStrides != (Strides{Dim: 1}) {
		t.Fatalf("merge defaults: %+v", *m)
	}
	m = merge3(t)
	if m.OStrides != (Strides{Batch: 5 * 8 * 64, Seq: 8 * 64, Head: 64, Dim: 1}) || m.PartStrides != m.OStrides {
		t.Fatalf("merge strides: %+v", *m)
	}
}

func TestMergePlanValidationAndDriver(t *testing.T) {
	cases := []struct {
		word string
		set  func(m *MergeDescriptor)
	}{
		{"num_parts", func(m *MergeDescriptor) { m.NumParts = 0 }},
		{"num_parts", func(m *MergeDescriptor) { m.NumParts = MergeMaxParts + 1 }},
		{"head_dim", func(m *MergeDescriptor) { m.HeadDim = 12 }},
		{"batch", func(m *MergeDescriptor) { m.Batch = 0 }},
	}
	for _, c := range cases {
		m := merge3(t)
		c.set(m)
		p, err := NewMergePlan(m)
		if p != nil || !strings.Contains(fmt.Sprint(err), c.word) {
			t.Errorf("%s: got %v, %v", c.word, p, err)
		}
	}
	skipWithDriver(t)
	if p, err := NewMergePlan(merge3(t)); p != nil || !errors.Is(err, ErrNoDriver) {
		t.Fatalf("want nil plan and ErrNoDriver, got %v, %v", p, err)
	}
}

func TestClosedMergePlan(t *testing.T) {
	m := &MergePlan{numParts: 2}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Run([]DevicePtr{16, 32}, []DevicePtr{4, 8}, 64, 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed merge plan: %v", err)
	}
	if _, err := m.Info(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed merge plan: %v", err)
	}
}
