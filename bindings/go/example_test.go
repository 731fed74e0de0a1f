package fmha_test

import (
	"errors"
	"fmt"

	"libfmha.dev/fmha"
)

func Example() {
	d, err := fmha.NewDescriptor()
	if err != nil {
		panic(err)
	}
	d.DType = fmha.BF16
	d.Batch, d.NumQHeads, d.NumKVHeads = 2, 16, 4
	d.SeqlenQ, d.SeqlenK, d.HeadDim = 1024, 1024, 128
	d.Mask = fmha.MaskCausalBottomRight
	if err := d.SetContiguous(fmha.LayoutBSHD); err != nil {
		panic(err)
	}
	if err := fmha.CheckSupport(d, fmha.SMAny); err != nil {
		fmt.Println("unsupported:", err)
		return
	}
	plan, err := fmha.NewPlan(d)
	if errors.Is(err, fmha.ErrNoDriver) {
		fmt.Println("no GPU driver")
		return
	} else if err != nil {
		panic(err)
	}
	defer plan.Close()
	info, _ := plan.Info()
	ws, _ := plan.WorkspaceSize()
	fmt.Println(info.KernelName, ws)
	// With device buffers q, k, v, o (fmha.DevicePtr) and a stream:
	// err = plan.Run(fmha.Tensors{Q: q, K: k, V: v, O: o}, workspace, ws, stream)
}

// A decode step over a paged KV cache: one new token per sequence, keys in
// pages of 16 rows located through a block table, lengths per sequence on
// the device (seqused_k), split-KV chosen by the plan.
func Example_pagedDecode() {
	d, err := fmha.NewDescriptor()
	if err != nil {
		panic(err)
	}
	d.DType = fmha.BF16
	d.Batch, d.NumQHeads, d.NumKVHeads = 8, 32, 8
	d.SeqlenQ, d.SeqlenK, d.HeadDim = 1, 4096, 128 // SeqlenK: the capacity, 256 pages x 16
	d.Mask = fmha.MaskCausalBottomRight
	d.Flags |= fmha.FlagPagedKV | fmha.FlagSequsedK
	d.NumPages, d.PageSize, d.MaxPagesPerSeq = 2048, 16, 256
	d.NumSplits = 0 // automatic
	if err := d.SetContiguous(fmha.LayoutBSHD); err != nil {
		panic(err)
	}

	// The kernels clamp a bad page index (no fault, wrong result): check a host copy.
	table := make([]int32, 8*256)
	for i := range table {
		table[i] = int32(i % 2048)
	}
	if err := fmha.CheckBlockTable(d, table, []int32{4096, 17, 1, 0, 300, 4000, 16, 64}); err != nil {
		panic(err)
	}

	plan, err := fmha.NewPlan(d)
	if err != nil {
		fmt.Println("no plan:", err)
		return
	}
	defer plan.Close()
	// With device buffers q, kPages, vPages, o, seqused (int32 [8]) and
	// blockTable (int32 [8, 256]), and one workspace per run in flight:
	// ws, _ := plan.WorkspaceSize()
	// err = plan.Run(fmha.Tensors{Q: q, K: kPages, V: vPages, O: o,
	//	SequsedK: seqused, BlockTable: blockTable}, workspace, ws, stream)
}

// Merging two partial results (e.g. attention over a shared prefix and over
// each sequence's own suffix) through their LSE.
func Example_merge() {
	m, err := fmha.NewMergeDescriptor()
	if err != nil {
		panic(err)
	}
	m.DType = fmha.BF16
	m.Batch, m.SeqlenQ, m.NumHeads, m.HeadDim, m.NumParts = 8, 1, 32, 128, 2
	if err := m.SetContiguous(fmha.LayoutBSHD); err != nil {
		panic(err)
	}
	mp, err := fmha.NewMergePlan(m)
	if err != nil {
		fmt.Println("no merge plan:", err)
		return
	}
	defer mp.Close()
	// err = mp.Run([]fmha.DevicePtr{o1, o2}, []fmha.DevicePtr{lse1, lse2}, o, 0, stream)
}
