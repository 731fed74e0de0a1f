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
