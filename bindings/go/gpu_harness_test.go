package fmha_test

// What the GPU tests (gpu_test.go) share: the switch that enables them, the
// seed, bf16 conversion, guard-banded device arrays, the CPU reference and
// the checks of a run's outputs against it.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"libfmha.dev/fmha"
	"libfmha.dev/fmha/internal/cudadrv"
)

// The GPU tests run only where this is "1": elsewhere they are reported as
// skipped, never as passed; with it set and no usable driver they fail.
const gpuTestsEnv = "FMHA_GPU_TESTS"

// Poison and guard patterns, all NaN. Outputs are poisoned before each run,
// so an element a run does not write stays NaN; guard bands and input memory
// no run should read hold other NaNs, so a stray copy of the poison into a
// guard is caught too.
const (
	poisonBF16 uint16 = 0x7FC0
	guardBF16  uint16 = 0x7FAB
	poisonF32  uint32 = 0x7FC00000
	guardF32   uint32 = 0x7FC0BAAD
	guardI32   int32  = 0x7FC0BAAD
	// Guard elements before and after every payload: 1 or 2 KiB, so a
	// payload stays 16-byte aligned in cuMemAlloc's 256-byte aligned memory.
	guardElems = 512
)

// ---- the device and the seed ------------------------------------------------

var gpuContext struct {
	once sync.Once
	ctx  *cudadrv.Context
	err  error
}

// gpuTest is one GPU test's device state: device 0's primary context (the
// one libfmha's plans use for descriptor device 0), a stream of its own, a
// random source and every array it allocated.
type gpuTest struct {
	t      *testing.T
	ctx    *cudadrv.Context
	stream uintptr
	rng    *rand.Rand
	arrays []guarded
}

// openGPU skips t unless FMHA_GPU_TESTS=1, and fails it when the driver or
// device 0 cannot be used.
func openGPU(t *testing.T) *cudadrv.Context {
	t.Helper()
	if os.Getenv(gpuTestsEnv) != "1" {
		t.Skipf("GPU test: set %s=1 to run it on a machine with an NVIDIA GPU and driver", gpuTestsEnv)
	}
	gpuContext.once.Do(func() { gpuContext.ctx, gpuContext.err = cudadrv.Open(0) })
	if err := gpuContext.err; err != nil {
		if errors.Is(err, cudadrv.ErrNoDriver) {
			t.Fatalf("%s=1 but %v", gpuTestsEnv, err)
		}
		t.Fatalf("%s=1 but CUDA device 0 cannot be used: %v", gpuTestsEnv, err)
	}
	if _, err := fmha.DriverVersion(); err != nil {
		t.Fatalf("%s=1 but libfmha cannot use the CUDA driver: %v", gpuTestsEnv, err)
	}
	return gpuContext.ctx
}

// requireGPU is openGPU, then the test's stream and random source.
func requireGPU(t *testing.T) *gpuTest {
	t.Helper()
	ctx := openGPU(t)
	stream, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	g := &gpuTest{t: t, ctx: ctx, stream: stream}
	t.Cleanup(g.release)
	version, _ := fmha.DriverVersion()
	t.Logf("libfmha %s, CUDA driver %d, embedded archs %v", fmha.VersionString(), version, fmha.EmbeddedArchs())
	g.rng = newRand(t)
	return g
}

func (g *gpuTest) release() {
	for _, a := range g.arrays {
		if err := a.free(); err != nil {
			g.t.Error(err)
		}
	}
	if err := g.ctx.DestroyStream(g.stream); err != nil {
		g.t.Error(err)
	}
}

var baseSeed struct {
	once sync.Once
	seed uint64
	err  error
}

// newRand returns a random source for t: from FMHA_TEST_SEED when set
// (decimal or 0x hex), else from the clock, so each run draws new inputs;
// the test's name is mixed in, so one test re-run alone gets its inputs back.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	baseSeed.once.Do(func() {
		if s := os.Getenv("FMHA_TEST_SEED"); s != "" {
			baseSeed.seed, baseSeed.err = strconv.ParseUint(s, 0, 64)
			return
		}
		baseSeed.seed = uint64(time.Now().UnixNano())
	})
	if baseSeed.err != nil {
		t.Fatalf("FMHA_TEST_SEED: %v", baseSeed.err)
	}
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	seed := mix64(baseSeed.seed ^ h.Sum64())
	t.Logf("inputs from seed %#x; FMHA_TEST_SEED=%#x repeats them", seed, baseSeed.seed)
	return rand.New(rand.NewSource(int64(seed)))
}

// mix64 is splitmix64's finalizer: nearby seeds give unrelated streams.
func mix64(z uint64) uint64 {
	z += 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// ---- bf16 -----------------------------------------------------------------------

const bf16Bytes = 2

// bf16 rounds f to bfloat16, to nearest with ties to even.
func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7FFFFFFF > 0x7F800000 { // NaN: keep it NaN (quiet), whatever mantissa bits are cut
		return uint16(u>>16) | 0x0040
	}
	// Adding 0x7FFF plus the lowest kept bit carries into the kept bits
	// exactly when the cut bits are above half, or at half with the kept
	// value odd; a carry out of the mantissa rightly bumps the exponent.
	u += 0x7FFF + (u>>16)&1
	return uint16(u >> 16)
}

func bf16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func roundBF16(f float32) float32 { return bf16Value(bf16(f)) }

// randomBF16s returns n standard normal values rounded to bf16.
func randomBF16s(rng *rand.Rand, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = bf16(float32(rng.NormFloat64()))
	}
	return out
}

func filled[T any](n int, x T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// ---- device arrays with guard bands -------------------------------------------

type element interface{ ~uint16 | ~uint32 | ~int32 }

type guarded interface {
	guardsIntact() error
	free() error
}

// deviceArray is a payload of n elements with guardElems guard elements on
// each side. Floats are kept as their bits, so that poison and guard NaNs
// compare equal to themselves.
type deviceArray[T element] struct {
	g     *gpuTest
	name  string
	base  uintptr // the allocation: guard, payload, guard
	n     int
	guard T
}

// newArray copies payload to a new device array whose guards hold guard.
func newArray[T element](g *gpuTest, name string, payload []T, guard T) *deviceArray[T] {
	g.t.Helper()
	a := &deviceArray[T]{g: g, name: name, n: len(payload), guard: guard}
	all := filled(len(payload)+2*guardElems, guard)
	copy(all[guardElems:], payload)
	base, err := g.ctx.Alloc(len(all) * int(unsafe.Sizeof(guard)))
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	a.base = base
	g.arrays = append(g.arrays, a)
	if err := cudadrv.CopyToDevice(g.ctx, base, all); err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	return a
}

func (a *deviceArray[T]) ptr() fmha.DevicePtr {
	return fmha.DevicePtr(a.base + guardElems*unsafe.Sizeof(a.guard))
}

// write replaces the payload (the guards are left as they are, so that a
// change to them is still seen by the next check).
func (a *deviceArray[T]) write(payload []T) {
	a.g.t.Helper()
	if len(payload) != a.n {
		a.g.t.Fatalf("%s: %d elements written to an array of %d", a.name, len(payload), a.n)
	}
	if err := cudadrv.CopyToDevice(a.g.ctx, uintptr(a.ptr()), payload); err != nil {
		a.g.t.Fatalf("%s: %v", a.name, err)
	}
}

func (a *deviceArray[T]) read() []T {
	a.g.t.Helper()
	out := make([]T, a.n)
	if err := cudadrv.CopyFromDevice(a.g.ctx, out, uintptr(a.ptr())); err != nil {
		a.g.t.Fatalf("%s: %v", a.name, err)
	}
	return out
}

func (a *deviceArray[T]) guardsIntact() error {
	all := make([]T, a.n+2*guardElems)
	if err := cudadrv.CopyFromDevice(a.g.ctx, all, a.base); err != nil {
		return fmt.Errorf("%s: %v", a.name, err)
	}
	for i := 0; i < guardElems; i++ {
		if all[i] != a.guard {
			return fmt.Errorf("%s: guard element %d before the payload is %#x, not %#x",
				a.name, guardElems-i, all[i], a.guard)
		}
		if x := all[guardElems+a.n+i]; x != a.guard {
			return fmt.Errorf("%s: guard element %d after the payload is %#x, not %#x",
				a.name, i, x, a.guard)
		}
	}
	return nil
}

func (a *deviceArray[T]) free() error { return a.g.ctx.Free(a.base) }

func (g *gpuTest) checkGuards(label string) {
	g.t.Helper()
	for _, a := range g.arrays {
		if err := a.guardsIntact(); err != nil {
			g.t.Errorf("%s: %v", label, err)
		}
	}
}

// ---- plans and runs -------------------------------------------------------------

// result is one run's outputs, as bits: O (bf16) and LSE (float32).
type result struct {
	o   []uint16
	lse []uint32
}

// plan creates a plan for d, closed when the test ends, and logs its choice.
func (g *gpuTest) plan(label string, d *fmha.Descriptor) (*fmha.Plan, fmha.PlanInfo) {
	g.t.Helper()
	plan, err := fmha.NewPlan(d)
	if err != nil {
		g.t.Fatalf("%s: NewPlan: %v", label, err)
	}
	g.t.Cleanup(func() { plan.Close() })
	info, err := plan.Info()
	if err != nil {
		g.t.Fatalf("%s: Info: %v", label, err)
	}
	g.t.Logf("%s: kernel %s (family %d) on sm_%d, image sm_%d (PTX %v), %d split(s), workspace %d B",
		label, info.KernelName, info.KernelFamily, info.DeviceSM, info.ImageSM, info.ImageIsPTX,
		info.NumSplits, info.WorkspaceBytes)
	return plan, info
}

// run runs plan with tensors (O and LSE taken from o and lse) and a
// workspace of the size the plan reports, whose payload is poisoned as well.
func (g *gpuTest) run(label string, plan *fmha.Plan, tensors fmha.Tensors,
	o *deviceArray[uint16], lse *deviceArray[uint32]) result {
	g.t.Helper()
	bytes, err := plan.WorkspaceSize()
	if err != nil {
		g.t.Fatalf("%s: WorkspaceSize: %v", label, err)
	}
	if info, err := plan.Info(); err != nil || info.WorkspaceBytes != bytes {
		g.t.Errorf("%s: Info().WorkspaceBytes %d (err %v) != WorkspaceSize() %d", label, info.WorkspaceBytes, err, bytes)
	}
	var ws *deviceArray[uint32]
	var wsPtr fmha.DevicePtr
	if bytes > 0 {
		ws = newArray(g, "workspace", filled(int((bytes+3)/4), guardF32), guardF32)
		wsPtr = ws.ptr()
	}
	tensors.O = o.ptr()
	if lse != nil {
		tensors.LSE = lse.ptr()
	}
	return g.runTwice(label, o, lse, func() error {
		if ws != nil { // garbage from the start: a kernel must not rely on its contents
			ws.write(filled(ws.n, guardF32))
		}
		return plan.Run(tensors, wsPtr, bytes, fmha.Stream(g.stream))
	})
}

// runTwice poisons o and lse, launches, waits for the stream and reads the
// outputs back, twice; the two runs must agree bit for bit and every guard
// band must be intact. It returns the first run's outputs.
func (g *gpuTest) runTwice(label string, o *deviceArray[uint16], lse *deviceArray[uint32], launch func() error) result {
	g.t.Helper()
	var runs [2]result
	for i := range runs {
		o.write(filled(o.n, poisonBF16))
		if lse != nil {
			lse.write(filled(lse.n, poisonF32))
		}
		if err := launch(); err != nil {
			g.t.Fatalf("%s: %v", label, err)
		}
		if err := g.ctx.Synchronize(g.stream); err != nil {
			g.t.Fatalf("%s: the run failed on the device: %v", label, err)
		}
		runs[i].o = o.read()
		if lse != nil {
			runs[i].lse = lse.read()
		}
	}
	for i := range runs[0].o {
		if runs[0].o[i] != runs[1].o[i] {
			g.t.Errorf("%s: a second run gave other bits: O element %d is %#04x, then %#04x",
				label, i, runs[0].o[i], runs[1].o[i])
			break
		}
	}
	for i := range runs[0].lse {
		if runs[0].lse[i] != runs[1].lse[i] {
			g.t.Errorf("%s: a second run gave other bits: LSE entry %d is %#08x, then %#08x",
				label, i, runs[0].lse[i], runs[1].lse[i])
			break
		}
	}
	g.checkGuards(label)
	return runs[0]
}

// ---- the CPU reference ------------------------------------------------------------

// problem is what the reference needs of a descriptor.
type problem struct {
	hq, hkv, headDim        int
	scale                   float32 // what the kernels multiply QK^T by
	softcap                 float32
	mask                    fmha.Mask
	windowLeft, windowRight int
	sinks                   []float32 // nil without FlagSinks
}

func problemOf(d *fmha.Descriptor, sinks []float32) problem {
	scale := d.SoftmaxScale
	if scale == 0 { // the library's default, in float32 as it computes it
		scale = 1 / float32(math.Sqrt(float64(d.HeadDim)))
	}
	return problem{
		hq: int(d.NumQHeads), hkv: int(d.NumKVHeads), headDim: int(d.HeadDim),
		scale: scale, softcap: d.Softcap, mask: d.Mask,
		windowLeft: int(d.WindowLeft), windowRight: int(d.WindowRight), sinks: sinks,
	}
}

// sequence holds one sequence's inputs, bf16 values as float32, in logical
// order: q[(i*hq+h)*D+x] for query row i, k and v [(j*hkv+h)*D+x] for key j.
type sequence struct {
	lenQ, lenK int
	q, k, v    []float32
}

// gather reads rows [0, n) of heads heads of D elements from a bf16 tensor,
// row r of head h starting at element at(r, h), into logical order.
func gather(t []uint16, n, heads, D int, at func(r, h int) int) []float32 {
	out := make([]float32, n*heads*D)
	for r := 0; r < n; r++ {
		for h := 0; h < heads; h++ {
			base := at(r, h)
			for x := 0; x < D; x++ {
				out[(r*heads+h)*D+x] = bf16Value(t[base+x])
			}
		}
	}
	return out
}

// at returns the offset of element (b, s, h, 0) of a tensor of strides st.
func at(st fmha.Strides, b, s, h int) int {
	return b*int(st.Batch) + s*int(st.Seq) + h*int(st.Head)
}

// rowRef holds one query row's references: o64 and lse64 in float64 (the
// truth), oLow and lseLow as a bf16 kernel may compute them (the
// same-precision reference that sets the tolerance).
type rowRef struct {
	o64, oLow     []float64
	lse64, lseLow float64
	noKey         bool // the row sees no key: O = 0, LSE = -inf (or the sink)
}

// visible returns the keys row i may see, first..last, as fmha.h defines
// them; the row sees none when last < first.
func (p problem) visible(i, lenQ, lenK int) (first, last int) {
	diag := i + lenK - lenQ // bottom-right, also the windows' diagonal without a mask
	if p.mask == fmha.MaskCausalTopLeft {
		diag = i
	}
	last = lenK - 1
	if p.mask != fmha.MaskNone && diag < last {
		last = diag
	}
	if p.windowRight >= 0 && diag+p.windowRight < last {
		last = diag + p.windowRight
	}
	if p.windowLeft >= 0 && diag-p.windowLeft > first {
		first = diag - p.windowLeft
	}
	return first, last
}

// row computes query row i of head h of sequence s.
func (p problem) row(s *sequence, i, h int) rowRef {
	D := p.headDim
	r := rowRef{o64: make([]float64, D), oLow: make([]float64, D)}
	hasSink := p.sinks != nil
	var sink float32
	if hasSink {
		sink = p.sinks[h]
	}
	first, last := p.visible(i, s.lenQ, s.lenK)
	if last < first {
		r.noKey = true
		r.lse64, r.lseLow = math.Inf(-1), math.Inf(-1)
		if hasSink {
			r.lse64, r.lseLow = float64(sink), float64(sink)
		}
		return r
	}
	kvHead := h / (p.hq / p.hkv)
	q := s.q[(i*p.hq+h)*D:][:D]
	key := func(j int) []float32 { return s.k[(j*p.hkv+kvHead)*D:][:D] }
	value := func(j int) []float32 { return s.v[(j*p.hkv+kvHead)*D:][:D] }
	n := last - first + 1

	// float64: scores, softcap, the running max, softmax with the sink in
	// the denominator only.
	scores := make([]float64, n)
	m := math.Inf(-1)
	if hasSink {
		m = float64(sink)
	}
	for j := first; j <= last; j++ {
		var dot float64
		for x, kx := range key(j) {
			dot += float64(q[x]) * float64(kx)
		}
		sc := dot * float64(p.scale)
		if p.softcap > 0 {
			c := float64(p.softcap)
			sc = c * math.Tanh(sc/c)
		}
		scores[j-first] = sc
		m = math.Max(m, sc)
	}
	l := 0.0
	if hasSink {
		l = math.Exp(float64(sink) - m)
	}
	for j := first; j <= last; j++ {
		w := math.Exp(scores[j-first] - m)
		l += w
		for x, vx := range value(j) {
			r.o64[x] += w * float64(vx)
		}
	}
	for x := range r.o64 {
		r.o64[x] /= l
	}
	r.lse64 = m + math.Log(l)

	// float32, rounding where a bf16 kernel does: the probabilities fed to
	// P.V are rounded to bf16 (the sum uses them unrounded), and so is O.
	scores32 := make([]float32, n)
	m32 := float32(math.Inf(-1))
	if hasSink {
		m32 = sink
	}
	for j := first; j <= last; j++ {
		var dot float32
		for x, kx := range key(j) {
			dot += q[x] * kx
		}
		sc := dot * p.scale
		if p.softcap > 0 {
			sc = p.softcap * float32(math.Tanh(float64(sc/p.softcap)))
		}
		scores32[j-first] = sc
		if sc > m32 {
			m32 = sc
		}
	}
	var l32 float32
	if hasSink {
		l32 = float32(math.Exp(float64(sink - m32)))
	}
	acc := make([]float32, D)
	for j := first; j <= last; j++ {
		w := float32(math.Exp(float64(scores32[j-first] - m32)))
		l32 += w
		wr := roundBF16(w)
		for x, vx := range value(j) {
			acc[x] += wr * vx
		}
	}
	for x := range acc {
		r.oLow[x] = float64(roundBF16(acc[x] / l32))
	}
	r.lseLow = float64(m32 + float32(math.Log(float64(l32))))
	return r
}

// references returns every row's references, refs[b][i*hq+h], computed on
// all CPUs.
func (p problem) references(seqs []*sequence) [][]rowRef {
	refs := make([][]rowRef, len(seqs))
	type job struct{ b, h int }
	var jobs []job
	for b, s := range seqs {
		refs[b] = make([]rowRef, s.lenQ*p.hq)
		for h := 0; h < p.hq; h++ {
			jobs = append(jobs, job{b, h})
		}
	}
	parallel(len(jobs), func(n int) {
		b, h := jobs[n].b, jobs[n].h
		for i := 0; i < seqs[b].lenQ; i++ {
			refs[b][i*p.hq+h] = p.row(seqs[b], i, h)
		}
	})
	return refs
}

// parallel runs f(0..n-1) on all CPUs.
func parallel(n int, f func(i int)) {
	var next int64 = -1
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(atomic.AddInt64(&next, 1)); i < n; i = int(atomic.AddInt64(&next, 1)) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// mergeLow merges partial rows as a bf16 kernel may: in float32 from the
// parts' same-precision O (bf16 values) and LSE (float32), O rounded to bf16.
func mergeLow(parts []rowRef) (o []float64, lse float64) {
	D := len(parts[0].oLow)
	o = make([]float64, D)
	m := float32(math.Inf(-1))
	for _, p := range parts {
		if l := float32(p.lseLow); l > m {
			m = l
		}
	}
	if math.IsInf(float64(m), -1) {
		return o, math.Inf(-1)
	}
	var sum float32
	acc := make([]float32, D)
	for _, p := range parts {
		if math.IsInf(p.lseLow, -1) {
			continue
		}
		w := float32(math.Exp(float64(float32(p.lseLow) - m)))
		sum += w
		for x := range acc {
			acc[x] += w * float32(p.oLow[x])
		}
	}
	for x := range acc {
		o[x] = float64(roundBF16(acc[x] / sum))
	}
	return o, float64(m + float32(math.Log(float64(sum))))
}

// ---- checking a run --------------------------------------------------------------

// expectation is what a correct run writes: per row of the O payload (D
// consecutive elements) the references of the query row it holds and that
// row's LSE entry, or nil for a row no sequence owns, which must keep the
// poison, as must every LSE entry no row names.
type expectation struct {
	headDim    int
	rows       []*expectedRow
	lseEntries int
}

type expectedRow struct {
	b, i, h int // the row, for messages
	lse     int // LSE payload entry, or -1
	ref     rowRef
}

func newExpectation(headDim, oElems, lseEntries int) *expectation {
	return &expectation{headDim: headDim, rows: make([]*expectedRow, oElems/headDim), lseEntries: lseEntries}
}

// place puts refs[b][i*hq+h] where the tensors hold them: the O row whose
// first element is at oAt(b, i, h), and LSE entry lseAt(b, i, h).
func (e *expectation) place(hq int, refs [][]rowRef, oAt, lseAt func(b, i, h int) int) {
	for b := range refs {
		for n := range refs[b] {
			i, h := n/hq, n%hq
			lse := -1
			if lseAt != nil {
				lse = lseAt(b, i, h)
			}
			e.rows[oAt(b, i, h)/e.headDim] = &expectedRow{b: b, i: i, h: h, lse: lse, ref: refs[b][n]}
		}
	}
}

// placeDense places the rows of dense Q/O at d's O strides, with the LSE
// [batch, num_q_heads, seqlen_q].
func (e *expectation) placeDense(d *fmha.Descriptor, refs [][]rowRef) {
	hq, sq := int(d.NumQHeads), int(d.SeqlenQ)
	e.place(hq, refs, func(b, i, h int) int { return at(d.OStrides, b, i, h) },
		func(b, i, h int) int { return (b*hq+h)*sq + i })
}

// The LSE check, as the C++ GPU suites make it: within 5e-5 (1 + |lse|) of
// float64 everywhere (a float32 LSE lands within about 5e-6 of it), or, failing
// that, no further from float64 than twice the same-precision reference.
const lseRelTol = 5e-5

// stats are the error measures of one run against the references.
type stats struct {
	maxErr, lowpErr      float64 // max |O - O64|: the run's, the same-precision reference's
	errSq, lowpSq, refSq float64 // sums of squares, for the relative Frobenius errors
	worst                string
	lseErr, lseLowpErr   float64
	lseRel               float64 // max |LSE - LSE64| / (1 + |LSE64|)
	rows, noKeyRows      int
	// Per magnitude class of rows (floor(log2(max |O64|))): the worst
	// errors, so a row of small values is not judged by the bound of large ones.
	classErr, classLowp map[int]float64
	classWorst          map[int]string
}

func (s *stats) relFrob() float64     { return math.Sqrt(s.errSq / s.refSq) }
func (s *stats) lowpRelFrob() float64 { return math.Sqrt(s.lowpSq / s.refSq) }

func (s *stats) String() string {
	return fmt.Sprintf("max|O-ref| %.3g (same-precision ref %.3g, ratio %.2f), rel. Frobenius %.3g "+
		"(same-precision %.3g), max|LSE-ref| %.3g (rel %.2g, same-precision %.3g), %d rows, %d see no key",
		s.maxErr, s.lowpErr, s.maxErr/math.Max(s.lowpErr, 5e-7), s.relFrob(), s.lowpRelFrob(),
		s.lseErr, s.lseRel, s.lseLowpErr, s.rows, s.noKeyRows)
}

// magnitudeClass returns floor(log2(max |x|)), and false for a row of zeros.
func magnitudeClass(x []float64) (int, bool) {
	mag := 0.0
	for _, v := range x {
		mag = math.Max(mag, math.Abs(v))
	}
	if mag == 0 {
		return 0, false
	}
	_, exp := math.Frexp(mag)
	return exp - 1, true
}

// verify compares a run's outputs with e and returns the error measures
// and every defect found (the first few named).
//
// Tolerance: the rule of the C++ GPU suites (tests/support). An output is
// judged against the float64 reference, and may be off by twice what the
// same-precision reference is (float32 arithmetic, bf16 probabilities in
// P.V, O rounded to bf16, as a bf16 kernel computes), plus 1e-6: over the
// whole run, and again per magnitude class of rows against the
// same-precision error of that class and its two neighbours, since rows
// over a few keys (O about one V row) carry errors tens of times those of
// rows averaging hundreds. A fixed tolerance would be too loose for one and
// too tight for the other; this one follows the problem's own rounding.
// The relative Frobenius error is held to the same 2x rule.
func (e *expectation) verify(got result) (*stats, []string) {
	D := e.headDim
	s := &stats{classErr: map[int]float64{}, classLowp: map[int]float64{}, classWorst: map[int]string{}}
	var defects []string
	more := 0
	defect := func(format string, args ...interface{}) {
		if len(defects) < 8 {
			defects = append(defects, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	lseNamed := make([]bool, e.lseEntries)
	lseWithinTol := true
	for r, row := range e.rows {
		bits := got.o[r*D:][:D]
		if row == nil {
			for x, b := range bits {
				if b != poisonBF16 {
					defect("O row %d belongs to no sequence but element %d was written (%#04x)", r, x, b)
					break
				}
			}
			continue
		}
		s.rows++
		name := func(x int) string { return fmt.Sprintf("(b=%d, i=%d, h=%d, d=%d)", row.b, row.i, row.h, x) }
		if row.ref.noKey {
			s.noKeyRows++
		}
		class, hasClass := magnitudeClass(row.ref.o64)
		for x, b := range bits {
			ref := row.ref.o64[x]
			lowp := math.Abs(row.ref.oLow[x] - ref)
			s.lowpErr = math.Max(s.lowpErr, lowp)
			s.lowpSq += lowp * lowp
			s.refSq += ref * ref
			if hasClass {
				s.classLowp[class] = math.Max(s.classLowp[class], lowp)
			}
			v := float64(bf16Value(b))
			switch {
			case b == poisonBF16:
				defect("O%s was not written (it holds the poison, %#04x, also the usual NaN)", name(x), b)
				continue
			case math.IsNaN(v) || math.IsInf(v, 0):
				defect("O%s is %v", name(x), v)
				continue
			case row.ref.noKey && b&0x7FFF != 0:
				defect("O%s is %g, but its row sees no key: O must be 0", name(x), v)
			}
			err := math.Abs(v - ref)
			s.errSq += err * err
			if err > s.maxErr {
				s.maxErr, s.worst = err, name(x)
			}
			if hasClass && err > s.classErr[class] {
				s.classErr[class], s.classWorst[class] = err, name(x)
			}
		}
		if row.lse < 0 {
			continue
		}
		lseNamed[row.lse] = true
		lse := float64(math.Float32frombits(got.lse[row.lse]))
		where := fmt.Sprintf("(b=%d, i=%d, h=%d)", row.b, row.i, row.h)
		switch {
		case math.IsNaN(lse):
			defect("LSE%s was not written, or is NaN (%#08x)", where, got.lse[row.lse])
		case math.IsInf(row.ref.lse64, -1):
			if !math.IsInf(lse, -1) {
				defect("LSE%s is %g, but its row sees no key: LSE must be -inf", where, lse)
			}
		case math.IsInf(lse, 0):
			defect("LSE%s is %g, want %g", where, lse, row.ref.lse64)
		default:
			err := math.Abs(lse - row.ref.lse64)
			s.lseErr = math.Max(s.lseErr, err)
			s.lseLowpErr = math.Max(s.lseLowpErr, math.Abs(row.ref.lseLow-row.ref.lse64))
			rel := err / (1 + math.Abs(row.ref.lse64))
			s.lseRel = math.Max(s.lseRel, rel)
			if rel > lseRelTol {
				lseWithinTol = false
			}
		}
	}
	for n, named := range lseNamed {
		if !named && got.lse[n] != poisonF32 {
			defect("LSE entry %d belongs to no row but was written (%#08x)", n, got.lse[n])
		}
	}

	if s.maxErr > 2*s.lowpErr+1e-6 {
		defect("max |O - ref| %.3g > 2 x %.3g, the same-precision reference's (worst at %s)", s.maxErr, s.lowpErr, s.worst)
	}
	for class, err := range s.classErr {
		lowp := math.Max(s.classLowp[class], math.Max(s.classLowp[class-1], s.classLowp[class+1]))
		if err > 2*lowp+1e-6 {
			defect("among rows of max |O| in [2^%d, 2^%d): |O - ref| %.3g > 2 x %.3g (at %s)",
				class, class+1, err, lowp, s.classWorst[class])
		}
	}
	if s.refSq > 0 && s.relFrob() > 2*s.lowpRelFrob()+1e-6 {
		defect("relative Frobenius error %.3g > 2 x %.3g, the same-precision reference's", s.relFrob(), s.lowpRelFrob())
	}
	if !lseWithinTol && s.lseErr > 2*s.lseLowpErr+1e-6 {
		defect("max |LSE - ref| %.3g: beyond %.0e (1 + |LSE|) and 2 x %.3g, the same-precision reference's",
			s.lseErr, lseRelTol, s.lseLowpErr)
	}
	if more > 0 {
		defects = append(defects, fmt.Sprintf("... and %d more", more))
	}
	return s, defects
}

// check verifies got against e, logs the error measures and fails the test
// on any defect.
func (e *expectation) check(t *testing.T, label string, got result) {
	t.Helper()
	s, defects := e.verify(got)
	t.Logf("%s: %v", label, s)
	if len(defects) > 0 {
		t.Errorf("%s:\n  %s", label, strings.Join(defects, "\n  "))
	}
}

// ---- checks of the harness itself (no GPU) --------------------------------

func TestBF16RoundsToNearestEven(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3F800000, 0x3F80}, // 1
		{0x3F808000, 0x3F80}, // halfway, kept value even: down
		{0x3F818000, 0x3F82}, // halfway, kept value odd: up
		{0x3F808001, 0x3F81}, // above halfway: up
		{0x3F80FFFF, 0x3F81},
		{0xBF818000, 0xBF82}, // the sign does not change the rounding
		{0x7F7FFFFF, 0x7F80}, // the largest float rounds to +inf
		{0x00008000, 0x0000}, // a subnormal tie to even
		{0x7F800000, 0x7F80}, // inf stays
		{0x7F800001, 0x7FC0}, // a NaN whose payload is cut stays NaN
	} {
		if got := bf16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("bf16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

// TestCheckCatchesDefects feeds verify outputs a correct kernel could give
// (the same-precision reference) and then each kind of defect.
func TestCheckCatchesDefects(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const B, Hq, Hkv, Sq, Sk, D = 2, 4, 2, 12, 9, 64 // Sq > Sk: bottom-right rows that see no key
	d, err := fmha.NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	d.Batch, d.NumQHeads, d.NumKVHeads, d.SeqlenQ, d.SeqlenK, d.HeadDim = B, Hq, Hkv, Sq, Sk, D
	d.Mask = fmha.MaskCausalBottomRight
	if err := d.SetContiguous(fmha.LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	seqs := make([]*sequence, B)
	for b := range seqs {
		seqs[b] = &sequence{lenQ: Sq, lenK: Sk,
			q: gather(randomBF16s(rng, Sq*Hq*D), Sq, Hq, D, func(r, h int) int { return (r*Hq + h) * D }),
			k: gather(randomBF16s(rng, Sk*Hkv*D), Sk, Hkv, D, func(r, h int) int { return (r*Hkv + h) * D }),
			v: gather(randomBF16s(rng, Sk*Hkv*D), Sk, Hkv, D, func(r, h int) int { return (r*Hkv + h) * D }),
		}
	}
	// One O row more than the problem has, owned by no sequence.
	e := newExpectation(D, B*Sq*Hq*D+D, B*Hq*Sq+1)
	e.placeDense(d, problemOf(d, nil).references(seqs))
	good := result{o: filled(B*Sq*Hq*D+D, poisonBF16), lse: filled(B*Hq*Sq+1, poisonF32)}
	noKey := 0
	for r, row := range e.rows {
		if row == nil {
			continue
		}
		for x, v := range row.ref.oLow {
			good.o[r*D+x] = bf16(float32(v))
		}
		good.lse[row.lse] = math.Float32bits(float32(row.ref.lseLow))
		if row.ref.noKey {
			noKey++
		}
	}
	if noKey != B*Hq*(Sq-Sk) {
		t.Fatalf("%d rows see no key, want %d", noKey, B*Hq*(Sq-Sk))
	}
	if s, defects := e.verify(good); len(defects) > 0 {
		t.Fatalf("the same-precision reference itself fails: %v\n%s", s, strings.Join(defects, "\n"))
	}
	firstSeen := Sq - Sk         // row (b=0, i, h=0), the first to see a key, is O row i*Hq
	lastRow := (Sq - 1) * Hq * D // (b=0, i=Sq-1, h=0): sees every key, so O is small
	for _, c := range []struct {
		what  string
		spoil func(r *result)
		want  string
	}{
		{"an element off by 0.05", func(r *result) { r.o[lastRow+3] = bf16(bf16Value(r.o[lastRow+3]) + 0.05) }, "max |O - ref|"},
		{"an element not written", func(r *result) { r.o[5] = poisonBF16 }, "was not written"},
		{"an element +inf", func(r *result) { r.o[firstSeen*Hq*D] = 0x7F80 }, "is +Inf"},
		{"a row that sees no key not 0", func(r *result) { r.o[0] = bf16(1e-3) }, "sees no key: O must be 0"},
		{"a row that sees no key with LSE 0", func(r *result) { r.lse[0] = 0 }, "LSE must be -inf"},
		{"an LSE off by 1e-3", func(r *result) { r.lse[firstSeen] = math.Float32bits(math.Float32frombits(r.lse[firstSeen]) + 1e-3) }, "max |LSE - ref|"},
		{"an LSE not written", func(r *result) { r.lse[firstSeen] = poisonF32 }, "LSE(b=0, i=3, h=0) was not written"},
		{"a row of no sequence written", func(r *result) { r.o[len(r.o)-1] = 0 }, "belongs to no sequence"},
		{"an LSE entry of no row written", func(r *result) { r.lse[len(r.lse)-1] = 0 }, "belongs to no row"},
	} {
		spoilt := result{o: append([]uint16(nil), good.o...), lse: append([]uint32(nil), good.lse...)}
		c.spoil(&spoilt)
		if _, defects := e.verify(spoilt); !strings.Contains(strings.Join(defects, "\n"), c.want) {
			t.Errorf("%s: want a defect naming %q, got %q", c.what, c.want, defects)
		}
	}
}
