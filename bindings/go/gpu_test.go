package fmha_test

// End-to-end GPU tests of the binding: each builds a problem through the
// public API, runs it on device 0 and checks every output element against a
// float64 CPU reference computed from the same bf16 inputs (see
// gpu_harness_test.go for the rule). They run only with FMHA_GPU_TESTS=1:
//
//	FMHA_GPU_TESTS=1 go test -run GPU -v
//
// FMHA_TEST_SEED=<seed printed by a run> repeats that run's inputs.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"libfmha.dev/fmha"
)

// descriptor returns the library's defaults with set applied, then
// contiguous BSHD strides (from the shape set gave).
func descriptor(t *testing.T, set func(d *fmha.Descriptor)) *fmha.Descriptor {
	t.Helper()
	d, err := fmha.NewDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	d.DType = fmha.BF16
	set(d)
	if err := d.SetContiguous(fmha.LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	return d
}

// denseInputs draws random Q, K and V for dense tensors of d (every element
// a row may read) and returns them with each sequence's logical inputs.
func denseInputs(g *gpuTest, d *fmha.Descriptor) (q, k, v []uint16, seqs []*sequence) {
	B, Hq, Hkv, Sq, Sk, D := int(d.Batch), int(d.NumQHeads), int(d.NumKVHeads), int(d.SeqlenQ), int(d.SeqlenK), int(d.HeadDim)
	q = randomBF16s(g.rng, B*Sq*Hq*D)
	k = randomBF16s(g.rng, B*Sk*Hkv*D)
	v = randomBF16s(g.rng, B*Sk*Hkv*D)
	seqs = make([]*sequence, B)
	for b := range seqs {
		seqs[b] = &sequence{lenQ: Sq, lenK: Sk,
			q: gather(q, Sq, Hq, D, func(r, h int) int { return at(d.QStrides, b, r, h) }),
			k: gather(k, Sk, Hkv, D, func(r, h int) int { return at(d.KStrides, b, r, h) }),
			v: gather(v, Sk, Hkv, D, func(r, h int) int { return at(d.VStrides, b, r, h) }),
		}
	}
	return q, k, v, seqs
}

// runDense runs a dense problem (LSE written) with fresh inputs, and
// random sinks with FlagSinks, and checks it.
func runDense(g *gpuTest, label string, d *fmha.Descriptor) {
	q, k, v, seqs := denseInputs(g, d)
	o := newArray(g, "o", filled(int(d.Batch*d.SeqlenQ*d.NumQHeads*d.HeadDim), poisonBF16), guardBF16)
	lse := newArray(g, "lse", filled(int(d.Batch*d.NumQHeads*d.SeqlenQ), poisonF32), guardF32)
	tensors := fmha.Tensors{
		Q: newArray(g, "q", q, guardBF16).ptr(),
		K: newArray(g, "k", k, guardBF16).ptr(),
		V: newArray(g, "v", v, guardBF16).ptr(),
	}
	var sinks []float32
	if d.Flags&fmha.FlagSinks != 0 {
		// Comparable to the scores: above some rows' max, below others'.
		sinks = make([]float32, d.NumQHeads)
		bits := make([]uint32, d.NumQHeads)
		for h := range sinks {
			sinks[h] = float32(2 * g.rng.NormFloat64())
			bits[h] = math.Float32bits(sinks[h])
		}
		tensors.Sinks = newArray(g, "sinks", bits, guardF32).ptr()
	}
	plan, _ := g.plan(label, d)
	got := g.run(label, plan, tensors, o, lse)
	e := newExpectation(int(d.HeadDim), o.n, lse.n)
	e.placeDense(d, problemOf(d, sinks).references(seqs))
	e.check(g.t, label, got)
}

// 1. Dense causal prefill with grouped-query attention and the LSE.
func TestGPUDensePrefillGQA(t *testing.T) {
	g := requireGPU(t)
	d := descriptor(t, func(d *fmha.Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads = 2, 8, 2
		d.SeqlenQ, d.SeqlenK, d.HeadDim = 300, 300, 128
		d.Mask = fmha.MaskCausalBottomRight
		d.Flags = fmha.FlagWriteLSE
	})
	runDense(g, "dense prefill b2 Hq8/Hkv2 s300 d128 causal", d)
}

// 2. Decode over a paged KV cache: sequences of 0, 1, 17 and 1000 keys in
// shuffled pages of 16 rows, lengths from seqused_k, the block table on the
// device, 1 and 4 query tokens, split-KV off, automatic and 3.
func TestGPUPagedDecode(t *testing.T) {
	openGPU(t) // skips or fails here, not in each subtest
	for _, T := range []int{1, 4} {
		T := T
		t.Run(fmt.Sprintf("T=%d", T), func(t *testing.T) { pagedDecode(t, T) })
	}
}

func pagedDecode(t *testing.T, T int) {
	g := requireGPU(t)
	const Hq, Hkv, D, pageSize = 32, 8, 128, 16
	lens := []int32{0, 1, 17, 1000}
	B := len(lens)
	pagesOf := func(n int32) int { return (int(n) + pageSize - 1) / pageSize }
	maxPages, usedPages := 0, 0
	for _, n := range lens {
		usedPages += pagesOf(n)
		if pagesOf(n) > maxPages {
			maxPages = pagesOf(n)
		}
	}
	maxPages++                // a spare column of the table, never read
	numPages := usedPages + 3 // and pages no sequence uses
	d := descriptor(t, func(d *fmha.Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads, d.HeadDim = int64(B), Hq, Hkv, D
		d.SeqlenQ, d.SeqlenK = int64(T), 1000
		d.Mask = fmha.MaskCausalBottomRight
		d.Flags = fmha.FlagWriteLSE | fmha.FlagPagedKV | fmha.FlagSequsedK
		d.NumPages, d.PageSize, d.MaxPagesPerSeq = int64(numPages), pageSize, int64(maxPages)
	})

	// Pages in random order; table entries past a sequence's pages are
	// never read, so they hold indices no page has.
	perm := g.rng.Perm(numPages)
	junk := []int32{-1, int32(numPages), math.MinInt32, math.MaxInt32}
	table := make([]int32, B*maxPages)
	for b, n := range lens {
		for p := 0; p < maxPages; p++ {
			if p < pagesOf(n) {
				table[b*maxPages+p], perm = int32(perm[0]), perm[1:]
			} else {
				table[b*maxPages+p] = junk[(b+p)%len(junk)]
			}
		}
	}
	if err := fmha.CheckBlockTable(d, table, lens); err != nil {
		t.Fatalf("CheckBlockTable refuses a valid table: %v", err)
	}
	bad := append([]int32(nil), table...)
	bad[3*maxPages+5] = int32(numPages)
	if err := fmha.CheckBlockTable(d, bad, lens); !errors.Is(err, fmha.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "block_table[3][5]") {
		t.Errorf("CheckBlockTable with page %d at block_table[3][5]: %v, want ErrInvalidArgument naming the entry", numPages, err)
	}

	// The pool: NaN except at the keys the sequences use.
	pageStride := int(d.KStrides.Batch)
	kPool := filled(numPages*pageStride, guardBF16)
	vPool := filled(numPages*pageStride, guardBF16)
	keyAt := func(b, j, h int) int { return at(d.KStrides, int(table[b*maxPages+j/pageSize]), j%pageSize, h) }
	q := randomBF16s(g.rng, B*T*Hq*D)
	seqs := make([]*sequence, B)
	for b, n := range lens {
		for j := 0; j < int(n); j++ {
			for h := 0; h < Hkv; h++ {
				copy(kPool[keyAt(b, j, h):], randomBF16s(g.rng, D))
				copy(vPool[keyAt(b, j, h):], randomBF16s(g.rng, D))
			}
		}
		b := b
		seqs[b] = &sequence{lenQ: T, lenK: int(n),
			q: gather(q, T, Hq, D, func(r, h int) int { return at(d.QStrides, b, r, h) }),
			k: gather(kPool, int(n), Hkv, D, func(j, h int) int { return keyAt(b, j, h) }),
			v: gather(vPool, int(n), Hkv, D, func(j, h int) int { return keyAt(b, j, h) }),
		}
	}
	e := newExpectation(D, B*T*Hq*D, B*Hq*T)
	e.placeDense(d, problemOf(d, nil).references(seqs))

	o := newArray(g, "o", filled(B*T*Hq*D, poisonBF16), guardBF16)
	lse := newArray(g, "lse", filled(B*Hq*T, poisonF32), guardF32)
	tensors := fmha.Tensors{
		Q:          newArray(g, "q", q, guardBF16).ptr(),
		K:          newArray(g, "k pages", kPool, guardBF16).ptr(),
		V:          newArray(g, "v pages", vPool, guardBF16).ptr(),
		SequsedK:   newArray(g, "seqused_k", lens, guardI32).ptr(),
		BlockTable: newArray(g, "block_table", table, guardI32).ptr(),
	}
	for _, splits := range []int32{1, 0, 3} {
		label := fmt.Sprintf("paged decode T=%d lens %v splits=%d", T, lens, splits)
		ds := *d
		ds.NumSplits = splits
		plan, info := g.plan(label, &ds)
		if splits >= 1 && info.NumSplits != int(splits) {
			t.Errorf("%s: the plan splits the keys %d ways, asked for exactly %d", label, info.NumSplits, splits)
		}
		e.check(t, label, g.run(label, plan, tensors, o, lse))
	}
}

// 3. Varlen prefill: packed Q, K, V and O with lengths 0, 1, 2, 17 and 300,
// cu_seqlens_q == cu_seqlens_k, causal; rows past the last sequence belong
// to no sequence and must stay untouched.
func TestGPUVarlenPrefill(t *testing.T) {
	g := requireGPU(t)
	const Hq, Hkv, D, spare = 8, 2, 64, 3
	lens := []int{0, 1, 2, 17, 300}
	B := len(lens)
	cu := make([]int32, B+1)
	for b, n := range lens {
		cu[b+1] = cu[b] + int32(n)
	}
	total := int(cu[B]) + spare // a capacity: total_q and total_k may exceed the rows used
	d := descriptor(t, func(d *fmha.Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads, d.HeadDim = int64(B), Hq, Hkv, D
		d.SeqlenQ, d.SeqlenK = 300, 300
		d.Mask = fmha.MaskCausalTopLeft
		d.Flags = fmha.FlagWriteLSE | fmha.FlagVarlenQ | fmha.FlagVarlenK
		d.TotalQ, d.TotalK = int64(total), int64(total)
	})
	// Packed row r of head h is at r*Seq + h*Head; rows past the sequences are NaN.
	packed := func(heads int, st fmha.Strides) []uint16 {
		out := filled(total*heads*D, guardBF16)
		for r := 0; r < int(cu[B]); r++ {
			for h := 0; h < heads; h++ {
				copy(out[at(st, 0, r, h):][:D], randomBF16s(g.rng, D))
			}
		}
		return out
	}
	q, k, v := packed(Hq, d.QStrides), packed(Hkv, d.KStrides), packed(Hkv, d.VStrides)
	seqs := make([]*sequence, B)
	for b, n := range lens {
		row0 := int(cu[b])
		rowAt := func(st fmha.Strides) func(r, h int) int {
			return func(r, h int) int { return at(st, 0, row0+r, h) }
		}
		seqs[b] = &sequence{lenQ: n, lenK: n,
			q: gather(q, n, Hq, D, rowAt(d.QStrides)),
			k: gather(k, n, Hkv, D, rowAt(d.KStrides)),
			v: gather(v, n, Hkv, D, rowAt(d.VStrides)),
		}
	}
	e := newExpectation(D, total*Hq*D, Hq*total)
	e.place(Hq, problemOf(d, nil).references(seqs),
		func(b, i, h int) int { return at(d.OStrides, 0, int(cu[b])+i, h) },
		func(b, i, h int) int { return h*total + int(cu[b]) + i }) // LSE [num_q_heads, total_q]

	cuArray := newArray(g, "cu_seqlens", cu, guardI32)
	o := newArray(g, "o", filled(total*Hq*D, poisonBF16), guardBF16)
	lse := newArray(g, "lse", filled(Hq*total, poisonF32), guardF32)
	tensors := fmha.Tensors{
		Q:          newArray(g, "q", q, guardBF16).ptr(),
		K:          newArray(g, "k", k, guardBF16).ptr(),
		V:          newArray(g, "v", v, guardBF16).ptr(),
		CuSeqlensQ: cuArray.ptr(),
		CuSeqlensK: cuArray.ptr(),
	}
	label := fmt.Sprintf("varlen prefill lens %v Hq%d/Hkv%d d%d causal", lens, Hq, Hkv, D)
	plan, _ := g.plan(label, d)
	e.check(t, label, g.run(label, plan, tensors, o, lse))
}

// 4. Sliding window, logit softcap and attention sinks together, with a
// softmax scale of its own, on a dense problem with more queries than keys:
// the window clips at both ends of the keys and the first rows see no key
// (O = 0, LSE = their head's sink).
func TestGPUWindowSoftcapSinks(t *testing.T) {
	g := requireGPU(t)
	d := descriptor(t, func(d *fmha.Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads = 2, 4, 2
		d.SeqlenQ, d.SeqlenK, d.HeadDim = 120, 100, 128
		d.Mask = fmha.MaskNone // the windows' diagonal is bottom-right: row i's is i - 20
		d.WindowLeft, d.WindowRight = 16, 4
		// Scores of standard deviation sqrt(128)/4 = 2.8: a cap of 4 bends many.
		d.SoftmaxScale, d.Softcap = 0.25, 4
		d.Flags = fmha.FlagWriteLSE | fmha.FlagSinks
	})
	runDense(g, "window 16:4 softcap 4 scale 0.25 sinks", d)
}

// 5. Two partial results over the two halves of the keys (each a run over
// views of K and V, writing its LSE), merged by a MergePlan: the merge must
// match the float64 reference of attention over all keys.
func TestGPUMergeTwoHalves(t *testing.T) {
	g := requireGPU(t)
	const B, Hq, Hkv, Sq, Sk, D = 2, 8, 2, 48, 512, 128
	const half = Sk / 2
	full := descriptor(t, func(d *fmha.Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads = B, Hq, Hkv
		d.SeqlenQ, d.SeqlenK, d.HeadDim = Sq, Sk, D
		d.Flags = fmha.FlagWriteLSE
	})
	q, k, v, seqs := denseInputs(g, full)
	p := problemOf(full, nil)
	fullRefs := p.references(seqs)
	qArray, kArray, vArray := newArray(g, "q", q, guardBF16), newArray(g, "k", k, guardBF16), newArray(g, "v", v, guardBF16)

	// Each part: the same problem over keys [k0, k0+half), K and V read
	// through views of the whole tensors (their strides unchanged).
	partD := *full
	partD.SeqlenK = half
	plan, _ := g.plan("part", &partD)
	var partRefs [2][][]rowRef
	var oParts [2]*deviceArray[uint16]
	var lseArrays [2]*deviceArray[uint32]
	for part := range partRefs {
		k0 := part * half
		halves := make([]*sequence, B)
		for b, s := range seqs {
			halves[b] = &sequence{lenQ: Sq, lenK: half, q: s.q,
				k: s.k[k0*Hkv*D : (k0+half)*Hkv*D], v: s.v[k0*Hkv*D : (k0+half)*Hkv*D]}
		}
		partRefs[part] = p.references(halves)
		oParts[part] = newArray(g, fmt.Sprintf("o part %d", part), filled(B*Sq*Hq*D, poisonBF16), guardBF16)
		lseArrays[part] = newArray(g, fmt.Sprintf("lse part %d", part), filled(B*Hq*Sq, poisonF32), guardF32)
		tensors := fmha.Tensors{
			Q: qArray.ptr(),
			K: kArray.ptr() + fmha.DevicePtr(bf16Bytes*k0*int(full.KStrides.Seq)),
			V: vArray.ptr() + fmha.DevicePtr(bf16Bytes*k0*int(full.VStrides.Seq)),
		}
		label := fmt.Sprintf("part %d: keys [%d, %d)", part, k0, k0+half)
		// The arrays keep the outputs of the run's second pass, bitwise the first's.
		got := g.run(label, plan, tensors, oParts[part], lseArrays[part])
		e := newExpectation(D, oParts[part].n, lseArrays[part].n)
		e.placeDense(&partD, partRefs[part])
		e.check(t, label, got)
	}

	md, err := fmha.NewMergeDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	md.DType, md.Batch, md.SeqlenQ, md.NumHeads, md.HeadDim = fmha.BF16, B, Sq, Hq, D
	md.NumParts, md.Flags = 2, fmha.FlagWriteLSE
	if err := md.SetContiguous(fmha.LayoutBSHD); err != nil {
		t.Fatal(err)
	}
	if md.PartStrides != partD.OStrides {
		t.Fatalf("the merge reads parts of strides %+v, the runs wrote %+v", md.PartStrides, partD.OStrides)
	}
	mp, err := fmha.NewMergePlan(md)
	if err != nil {
		t.Fatalf("NewMergePlan: %v", err)
	}
	t.Cleanup(func() { mp.Close() })
	if info, err := mp.Info(); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("merge: kernel %s, %d parts", info.KernelName, info.NumSplits)
	}
	o := newArray(g, "merged o", filled(B*Sq*Hq*D, poisonBF16), guardBF16)
	lse := newArray(g, "merged lse", filled(B*Hq*Sq, poisonF32), guardF32)
	got := g.runTwice("merge", o, lse, func() error {
		return mp.Run([]fmha.DevicePtr{oParts[0].ptr(), oParts[1].ptr()},
			[]fmha.DevicePtr{lseArrays[0].ptr(), lseArrays[1].ptr()}, o.ptr(), lse.ptr(), fmha.Stream(g.stream))
	})

	// The truth is attention over all keys in float64; the same-precision
	// reference is the pipeline a bf16 kernel runs: the parts' own
	// same-precision results merged in float32, O rounded to bf16.
	merged := make([][]rowRef, B)
	for b := range merged {
		merged[b] = make([]rowRef, len(fullRefs[b]))
		for n, r := range fullRefs[b] {
			oLow, lseLow := mergeLow([]rowRef{partRefs[0][b][n], partRefs[1][b][n]})
			merged[b][n] = rowRef{o64: r.o64, lse64: r.lse64, noKey: r.noKey, oLow: oLow, lseLow: lseLow}
		}
	}
	e := newExpectation(D, o.n, lse.n)
	e.place(Hq, merged, func(b, i, h int) int { return at(md.OStrides, b, i, h) },
		func(b, i, h int) int { return (b*Hq+h)*Sq + i })
	e.check(t, "merge of the two halves vs attention over all keys", got)
}

// 6. Decode at head_dim 512 with one KV head for 16 query heads (MQA).
func TestGPUDecodeHeadDim512MQA(t *testing.T) {
	g := requireGPU(t)
	d := descriptor(t, func(d *fmha.Descriptor) {
		d.Batch, d.NumQHeads, d.NumKVHeads = 2, 16, 1
		d.SeqlenQ, d.SeqlenK, d.HeadDim = 1, 1000, 512
		d.Mask = fmha.MaskCausalBottomRight
		d.Flags = fmha.FlagWriteLSE
	})
	runDense(g, "decode hd512 b2 Hq16/Hkv1 s1000", d)
}
