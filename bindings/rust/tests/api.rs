//! Behaviour tests that need libfmha.so but neither a GPU nor libcuda.

use fmha::*;

/// A descriptor from the library's defaults with `set` applied, then
/// contiguous BSHD strides (computed last, from the shape `set` gave).
fn bshd(set: impl FnOnce(Descriptor) -> Descriptor) -> Descriptor {
    set(Descriptor::new().expect("fmha_descriptor_init"))
        .contiguous(Layout::Bshd)
        .expect("BSHD strides")
}

/// Runs `f` only where no CUDA driver is installed: the NoDriver paths
/// cannot be reached on a machine that has one.
fn without_driver(f: impl FnOnce()) {
    match driver_version() {
        Err(e) if e.status == Status::NoDriver => f(),
        other => println!("skip: a CUDA driver is present ({other:?}); NoDriver path not testable"),
    }
}

/// A small valid GQA problem with contiguous BSHD tensors.
fn valid() -> Descriptor {
    bshd(|d| {
        d.dtype(DType::Bf16)
            .batch(2)
            .heads(8, 2)
            .seqlens(128, 256)
            .head_dim(128)
            .mask(Mask::CausalBottomRight)
    })
}

#[test]
fn version_matches_header() {
    assert_eq!(version(), sys::FMHA_VERSION_NUMBER);
    let expected = format!(
        "{}.{}.{}",
        sys::FMHA_VERSION_MAJOR,
        sys::FMHA_VERSION_MINOR,
        sys::FMHA_VERSION_PATCH
    );
    assert_eq!(version_string(), expected);
}

#[test]
fn descriptor_defaults() {
    let d = Descriptor::new().unwrap();
    let r = d.as_raw();
    assert_eq!(r.version, sys::FMHA_DESCRIPTOR_VERSION);
    assert_eq!(r.dtype, sys::FMHA_DTYPE_BF16);
    assert_eq!(r.kernel, sys::FMHA_KERNEL_AUTO);
    assert_eq!(r.mask, sys::FMHA_MASK_NONE);
    assert_eq!(r.device, 0);
    assert_eq!(r.reserved0, 0);
    assert_eq!(r.head_dim_v, 0);
    assert_eq!(r.softmax_scale, 0.0);
    for s in [r.q_strides, r.k_strides, r.v_strides, r.o_strides] {
        assert_eq!(s, Strides { batch: 0, seq: 0, head: 0, dim: 1 });
    }
}

#[test]
fn strides_helpers() {
    let s = strides(Layout::Bshd, 128, 8, 64).unwrap();
    assert_eq!(s, Strides { batch: 128 * 8 * 64, seq: 8 * 64, head: 64, dim: 1 });
    let s = strides(Layout::Bhsd, 128, 8, 64).unwrap();
    assert_eq!(s, Strides { batch: 8 * 128 * 64, seq: 64, head: 128 * 64, dim: 1 });
}

#[test]
fn valid_problem_is_supported_for_any_sm() {
    check_support(&valid(), SM_ANY).expect("valid problem must be supported with FMHA_SM_ANY");
    check_support(&valid().dtype(DType::Fp16).mask(Mask::None), SM_ANY).unwrap();
}

/// Valid in every respect except head_dim 80, which no kernel handles.
fn head_dim_80() -> Descriptor {
    bshd(|d| d.batch(1).heads(4, 4).seqlens(64, 64).head_dim(80))
}

#[test]
fn head_dim_80_is_not_supported() {
    let err = check_support(&head_dim_80(), SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::NotSupported, "{err}");
    assert!(err.message.contains("head_dim"), "message should name head_dim: {err}");
}

#[test]
fn q_heads_not_multiple_of_kv_heads_is_invalid() {
    let d = bshd(|d| d.batch(1).heads(6, 4).seqlens(64, 64).head_dim(64));
    let err = check_support(&d, SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(!err.message.is_empty());
}

#[test]
fn zero_batch_is_invalid() {
    let err = check_support(&valid().batch(0), SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
}

#[test]
fn plan_without_driver_is_no_driver() {
    without_driver(|| {
        let err = Plan::new(&valid()).expect_err("plan creation cannot succeed without a driver");
        assert_eq!(err.status, Status::NoDriver, "{err}");
        let err = check_support(&valid(), SM_CURRENT_DEVICE).unwrap_err();
        assert_eq!(err.status, Status::NoDriver, "{err}");
    });
}

#[test]
fn every_status_maps_both_ways() {
    let names = [
        "FMHA_STATUS_SUCCESS",
        "FMHA_STATUS_INVALID_ARGUMENT",
        "FMHA_STATUS_NOT_SUPPORTED",
        "FMHA_STATUS_VERSION_MISMATCH",
        "FMHA_STATUS_NO_DRIVER",
        "FMHA_STATUS_NO_DEVICE",
        "FMHA_STATUS_DRIVER_ERROR",
        "FMHA_STATUS_MISALIGNED",
        "FMHA_STATUS_WORKSPACE_TOO_SMALL",
        "FMHA_STATUS_OUT_OF_MEMORY",
        "FMHA_STATUS_NO_KERNEL_IMAGE",
        "FMHA_STATUS_CONTEXT_MISMATCH",
        "FMHA_STATUS_INTERNAL_ERROR",
    ];
    for (raw, name) in names.iter().enumerate() {
        let raw = raw as i32;
        let s = Status::from_raw(raw);
        assert_eq!(s, Status::ALL[raw as usize]);
        assert_eq!(s.raw(), raw);
        assert_eq!(s.name(), *name, "fmha_status_string({raw})");
        assert_eq!(s.to_string(), *name);
        if raw == 0 {
            assert!(check(raw).is_ok());
        } else {
            let err = check(raw).unwrap_err();
            assert_eq!(err.status, s);
            let dynerr: &dyn std::error::Error = &err;
            assert!(dynerr.to_string().starts_with(name));
        }
    }
    assert_eq!(Status::from_raw(1000), Status::Unknown(1000));
    assert_eq!(Status::Unknown(1000).name(), "FMHA_STATUS_UNKNOWN");
}

#[test]
fn error_message_is_thread_local_and_copied() {
    let err = check_support(&head_dim_80(), SM_ANY).unwrap_err();
    // A later successful call must not alter the copied message.
    check_support(&valid(), SM_ANY).unwrap();
    assert!(err.message.contains("head_dim"));
    // Another thread sees its own last error.
    std::thread::spawn(|| {
        let err = check_support(&valid().batch(-1), SM_ANY).unwrap_err();
        assert_eq!(err.status, Status::InvalidArgument);
    })
    .join()
    .unwrap();
}

#[test]
fn tensors_init() {
    let t = Tensors::new(8 as _, 16 as _, 32 as _, 48 as _).unwrap().lse(64 as _);
    let r = t.as_raw();
    assert_eq!(r.version, sys::FMHA_TENSORS_VERSION);
    assert_eq!(r.reserved0, 0);
    assert_eq!(r.q as usize, 8);
    assert_eq!(r.o as usize, 48);
    assert_eq!(r.lse as usize, 64);
}

#[test]
fn embedded_archs_are_sorted() {
    let archs = embedded_archs();
    println!("embedded archs: {archs:?}, ptx: {:?}", embedded_ptx_arch());
    assert!(archs.windows(2).all(|w| w[0] < w[1]));
    assert!(archs.iter().all(|&a| a >= 80));
}

#[test]
fn plan_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Plan>();
    assert_send_sync::<Error>();
}

#[test]
fn windows_softcap_and_sinks() {
    let d = valid().window(128, -1).softcap(30.0).sinks(true);
    let r = d.as_raw();
    assert_eq!((r.window_left, r.window_right), (128, -1));
    assert_eq!(r.softcap, 30.0);
    assert_ne!(r.flags & sys::FMHA_FLAG_SINKS, 0);
    check_support(&d, SM_ANY).unwrap();
    // The portable kernel takes them everywhere, the Hopper one on sm_90.
    check_support(&d, 90).unwrap();
    let hopper = check_support(&d.kernel(KernelFamily::Hopper), 90);
    if embedded_archs().contains(&90) {
        hopper.unwrap();
    } else {
        // A build without sm_90a cubins has no Hopper kernel to ask.
        assert_eq!(hopper.unwrap_err().status, Status::NoKernelImage);
    }
    let err = check_support(&valid().window(-2, -1), SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("window_left"), "{}", err.message);
    let d = Descriptor::new().unwrap();
    assert_eq!((d.as_raw().window_left, d.as_raw().window_right), (-1, -1));
}

/// A decode problem over a paged cache: 3 sequences of up to 16 pages of 16
/// keys, one query row each, GQA 32/8.
fn paged_decode() -> Descriptor {
    bshd(|d| {
        d.dtype(DType::Bf16)
            .batch(3)
            .heads(32, 8)
            .seqlens(1, 256)
            .head_dim(128)
            .mask(Mask::CausalBottomRight)
            .paged_kv(40, 16, 16)
            .seqused_k(true)
    })
}

#[test]
fn version_3_defaults_and_decode_kernel() {
    let r = *Descriptor::new().unwrap().as_raw();
    assert_eq!(r.version, 3);
    assert_eq!((r.total_q, r.total_k, r.num_pages, r.max_pages_per_seq), (0, 0, 0, 0));
    assert_eq!((r.page_size, r.num_splits), (0, 0));
    assert_eq!(KernelFamily::from_raw(3), Some(KernelFamily::Decode));
    assert_eq!(KernelFamily::Decode.raw(), sys::FMHA_KERNEL_DECODE);
    check_support(&valid().kernel(KernelFamily::Decode).num_splits(8), SM_ANY).unwrap();
    check_support(&valid().head_dim(512).contiguous(Layout::Bshd).unwrap(), SM_ANY).unwrap();
}

#[test]
fn paged_and_varlen_setters() {
    let d = paged_decode();
    let r = d.as_raw();
    assert_eq!(d.flags(), sys::FMHA_FLAG_PAGED_KV | sys::FMHA_FLAG_SEQUSED_K);
    assert_eq!((r.num_pages, r.page_size, r.max_pages_per_seq), (40, 16, 16));
    // contiguous() counts paged K/V rows per page: the batch stride is the page stride.
    assert_eq!(r.k_strides, Strides { batch: 16 * 8 * 128, seq: 8 * 128, head: 128, dim: 1 });
    check_support(&d, SM_ANY).unwrap();
    check_support(&d.num_splits(4), 80).unwrap();

    let v = bshd(|d| {
        d.batch(4)
            .heads(8, 2)
            .seqlens(300, 513)
            .head_dim(64)
            .varlen_q(1000)
            .varlen_k(2000)
            .mask(Mask::CausalTopLeft)
            .write_lse(true)
    });
    assert_eq!(v.flags(), sys::FMHA_FLAG_VARLEN_Q | sys::FMHA_FLAG_VARLEN_K | sys::FMHA_FLAG_WRITE_LSE);
    assert_eq!(v.as_raw().q_strides, Strides { batch: 1000 * 8 * 64, seq: 8 * 64, head: 64, dim: 1 });
    assert_eq!((v.as_raw().total_q, v.as_raw().total_k), (1000, 2000));
    check_support(&v, SM_ANY).unwrap();
    check_support(&v.seqused_k(true).seqused_k(false), SM_ANY).unwrap();
}

#[test]
fn version_3_rules_name_the_field() {
    let err = check_support(&valid().as_raw_mut_copy(|r| r.total_q = 5), SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("total_q"), "{err}");
    let err = check_support(&valid().num_splits(129), SM_ANY).unwrap_err();
    assert!(err.message.contains("num_splits"), "{err}");
    let err = check_support(&paged_decode().paged_kv(40, 16, 8), SM_ANY).unwrap_err();
    assert!(err.message.contains("max_pages_per_seq"), "{err}");
}

trait CopyWith {
    fn as_raw_mut_copy(self, f: impl FnOnce(&mut sys::fmha_descriptor)) -> Self;
}
impl CopyWith for Descriptor {
    fn as_raw_mut_copy(mut self, f: impl FnOnce(&mut sys::fmha_descriptor)) -> Self {
        f(self.as_raw_mut());
        self
    }
}

#[test]
fn tensors_index_arrays() {
    let t = Tensors::new(16 as _, 32 as _, 48 as _, 64 as _)
        .unwrap()
        .cu_seqlens_q(4 as _)
        .cu_seqlens_k(8 as _)
        .seqused_k(12 as _)
        .block_table(20 as _);
    let r = t.as_raw();
    assert_eq!(r.version, 3);
    assert_eq!(
        (r.cu_seqlens_q as usize, r.cu_seqlens_k as usize, r.seqused_k as usize, r.block_table as usize),
        (4, 8, 12, 20)
    );
    let t = Tensors::new(16 as _, 32 as _, 48 as _, 64 as _).unwrap();
    assert!(t.as_raw().cu_seqlens_q.is_null() && t.as_raw().block_table.is_null());
}

#[test]
fn block_table_check() {
    let d = paged_decode();
    let mut table: Vec<i32> = (0..48).map(|i| i % 40).collect();
    check_block_table(&d, &table, None).unwrap();
    check_block_table(&d, &table, Some(&[256, 0, 17])).unwrap();
    table[16 + 3] = 40; // sequence 1, page 3: keys 48..63
    let err = check_block_table(&d, &table, None).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("block_table[1][3]"), "{err}");
    check_block_table(&d, &table, Some(&[256, 48, 17])).unwrap(); // page 3 unused
    let err = check_block_table(&d, &table, Some(&[256, 49, 17])).unwrap_err();
    assert!(err.message.contains("block_table[1][3]"), "{err}");
    let err = check_block_table(&d, &table, Some(&[257, 0, 0])).unwrap_err();
    assert!(err.message.contains("seqlens_k"), "{err}");
    // Short slices are refused before the library reads them.
    let err = check_block_table(&d, &table[..47], None).unwrap_err();
    assert!(err.message.contains("48"), "{err}");
    let err = check_block_table(&d, &table, Some(&[1, 2])).unwrap_err();
    assert!(err.message.contains("batch is 3"), "{err}");
    // Not a paged descriptor.
    let err = check_block_table(&valid(), &[], None).unwrap_err();
    assert!(err.message.contains("FMHA_FLAG_PAGED_KV"), "{err}");
}

fn merge3() -> MergeDescriptor {
    MergeDescriptor::new()
        .unwrap()
        .dtype(DType::Fp16)
        .shape(2, 5, 8, 64)
        .num_parts(3)
        .write_lse(true)
        .contiguous(Layout::Bshd)
        .unwrap()
}

#[test]
fn merge_descriptor_builder() {
    let raw = *MergeDescriptor::new().unwrap().as_raw();
    assert_eq!((raw.version, raw.dtype, raw.flags, raw.device), (1, sys::FMHA_DTYPE_BF16, 0, 0));
    assert_eq!(raw.part_strides, Strides { batch: 0, seq: 0, head: 0, dim: 1 });
    let r = *merge3().device(1).as_raw();
    assert_eq!((r.batch, r.seqlen_q, r.num_heads, r.head_dim, r.num_parts), (2, 5, 8, 64, 3));
    assert_eq!(r.dtype, sys::FMHA_DTYPE_FP16);
    assert_eq!(r.flags, sys::FMHA_FLAG_WRITE_LSE);
    assert_eq!(r.o_strides, Strides { batch: 5 * 8 * 64, seq: 8 * 64, head: 64, dim: 1 });
    assert_eq!(r.device, 1);
    assert_eq!(MERGE_MAX_PARTS, 64);
}

#[test]
fn merge_plan_validation_and_driver() {
    // Descriptor errors come before the driver is needed.
    for (d, word) in [
        (merge3().num_parts(0), "num_parts"),
        (merge3().num_parts(65), "num_parts"),
        (merge3().shape(2, 5, 8, 12), "head_dim"),
        (merge3().shape(0, 5, 8, 64), "batch"),
    ] {
        let err = MergePlan::new(&d).unwrap_err();
        assert!(err.message.contains(word), "{word}: {err}");
    }
    without_driver(|| {
        let err = MergePlan::new(&merge3()).unwrap_err();
        assert_eq!(err.status, Status::NoDriver, "{err}");
    });
}

#[test]
fn merge_plan_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MergePlan>();
}
