//! Behaviour tests that need libfmha.so but neither a GPU nor libcuda.

use fmha::*;

/// A small valid GQA problem with contiguous BSHD tensors.
fn valid() -> Descriptor {
    Descriptor::new()
        .expect("fmha_descriptor_init")
        .dtype(DType::Bf16)
        .batch(2)
        .heads(8, 2)
        .seqlens(128, 256)
        .head_dim(128)
        .mask(Mask::CausalBottomRight)
        .contiguous(Layout::Bshd)
        .expect("BSHD strides")
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
    Descriptor::new()
        .unwrap()
        .batch(1)
        .heads(4, 4)
        .seqlens(64, 64)
        .head_dim(80)
        .contiguous(Layout::Bshd)
        .unwrap()
}

#[test]
fn head_dim_80_is_not_supported() {
    let err = check_support(&head_dim_80(), SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::NotSupported, "{err}");
    assert!(err.message.contains("head_dim"), "message should name head_dim: {err}");
}

#[test]
fn q_heads_not_multiple_of_kv_heads_is_invalid() {
    let d = Descriptor::new()
        .unwrap()
        .batch(1)
        .heads(6, 4)
        .seqlens(64, 64)
        .head_dim(64)
        .contiguous(Layout::Bshd)
        .unwrap();
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
    match driver_version() {
        Err(e) if e.status == Status::NoDriver => {
            let err = Plan::new(&valid()).expect_err("plan creation cannot succeed without a driver");
            assert_eq!(err.status, Status::NoDriver, "{err}");
            let err = check_support(&valid(), SM_CURRENT_DEVICE).unwrap_err();
            assert_eq!(err.status, Status::NoDriver, "{err}");
        }
        other => println!("skip: a CUDA driver is present ({other:?}); NoDriver path not testable"),
    }
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
    // The portable kernel takes them everywhere; the Hopper one declines.
    check_support(&d, 90).unwrap();
    let err = check_support(&d.kernel(KernelFamily::Hopper), 90).unwrap_err();
    assert_eq!(err.status, Status::NotSupported);
    let err = check_support(&valid().window(-2, -1), SM_ANY).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("window_left"), "{}", err.message);
    let d = Descriptor::new().unwrap();
    assert_eq!((d.as_raw().window_left, d.as_raw().window_right), (-1, -1));
}
