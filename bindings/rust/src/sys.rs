//! Raw FFI declarations mirroring `include/fmha/fmha.h` one to one.
//!
//! Every struct is `#[repr(C)]` with the header's field order and types; the
//! `abi` integration test compiles a C program against the header and checks
//! sizes, offsets and constant values against these declarations.
//!
//! C enums are passed as `c_int` (the header's enums are all small,
//! non-negative and explicitly numbered, so every ABI we target represents
//! them as a 32-bit int).

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

// ---------------------------------------------------------------- versions

pub const FMHA_VERSION_MAJOR: u32 = 0;
pub const FMHA_VERSION_MINOR: u32 = 1;
pub const FMHA_VERSION_PATCH: u32 = 0;
pub const FMHA_VERSION_NUMBER: u32 =
    FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH;

// ---------------------------------------------------------------- status

pub type fmha_status = c_int;
pub const FMHA_STATUS_SUCCESS: fmha_status = 0;
pub const FMHA_STATUS_INVALID_ARGUMENT: fmha_status = 1;
pub const FMHA_STATUS_NOT_SUPPORTED: fmha_status = 2;
pub const FMHA_STATUS_VERSION_MISMATCH: fmha_status = 3;
pub const FMHA_STATUS_NO_DRIVER: fmha_status = 4;
pub const FMHA_STATUS_NO_DEVICE: fmha_status = 5;
pub const FMHA_STATUS_DRIVER_ERROR: fmha_status = 6;
pub const FMHA_STATUS_MISALIGNED: fmha_status = 7;
pub const FMHA_STATUS_WORKSPACE_TOO_SMALL: fmha_status = 8;
pub const FMHA_STATUS_OUT_OF_MEMORY: fmha_status = 9;
pub const FMHA_STATUS_NO_KERNEL_IMAGE: fmha_status = 10;
pub const FMHA_STATUS_CONTEXT_MISMATCH: fmha_status = 11;
pub const FMHA_STATUS_INTERNAL_ERROR: fmha_status = 12;

// ---------------------------------------------------------------- problem

pub type fmha_dtype = c_int;
pub const FMHA_DTYPE_BF16: fmha_dtype = 1;
pub const FMHA_DTYPE_FP16: fmha_dtype = 2;

pub type fmha_mask = c_int;
pub const FMHA_MASK_NONE: fmha_mask = 0;
pub const FMHA_MASK_CAUSAL_TOP_LEFT: fmha_mask = 1;
pub const FMHA_MASK_CAUSAL_BOTTOM_RIGHT: fmha_mask = 2;

pub type fmha_kernel_family = c_int;
pub const FMHA_KERNEL_AUTO: fmha_kernel_family = 0;
pub const FMHA_KERNEL_PORTABLE: fmha_kernel_family = 1;
pub const FMHA_KERNEL_HOPPER: fmha_kernel_family = 2;
pub const FMHA_KERNEL_DECODE: fmha_kernel_family = 3;

pub const FMHA_FLAG_WRITE_LSE: u32 = 0x1;
pub const FMHA_FLAG_SINKS: u32 = 0x2;
pub const FMHA_FLAG_VARLEN_Q: u32 = 0x4;
pub const FMHA_FLAG_VARLEN_K: u32 = 0x8;
pub const FMHA_FLAG_SEQUSED_K: u32 = 0x10;
pub const FMHA_FLAG_PAGED_KV: u32 = 0x20;

pub const FMHA_DESCRIPTOR_VERSION: u32 = 3;
pub const FMHA_PLAN_INFO_VERSION: u32 = 2;
pub const FMHA_TENSORS_VERSION: u32 = 3;
pub const FMHA_MERGE_DESCRIPTOR_VERSION: u32 = 1;
pub const FMHA_MERGE_MAX_PARTS: i32 = 64;

pub const FMHA_SM_ANY: i32 = 0;
pub const FMHA_SM_CURRENT_DEVICE: i32 = -1;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fmha_strides {
    pub batch: i64,
    pub seq: i64,
    pub head: i64,
    /// Must be 1 (the last dimension is contiguous).
    pub dim: i64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct fmha_descriptor {
    pub version: u32,
    pub dtype: i32,
    pub batch: i64,
    pub num_q_heads: i64,
    pub num_kv_heads: i64,
    pub seqlen_q: i64,
    pub seqlen_k: i64,
    pub head_dim: i64,
    pub head_dim_v: i64,
    pub q_strides: fmha_strides,
    pub k_strides: fmha_strides,
    pub v_strides: fmha_strides,
    pub o_strides: fmha_strides,
    pub softmax_scale: f32,
    pub mask: i32,
    pub flags: u32,
    pub kernel: i32,
    pub device: i32,
    pub reserved0: i32,
    // version 2
    pub window_left: i32,
    pub window_right: i32,
    pub softcap: f32,
    pub reserved1: i32,
    // version 3
    pub total_q: i64,
    pub total_k: i64,
    pub num_pages: i64,
    pub max_pages_per_seq: i64,
    pub page_size: i32,
    pub num_splits: i32,
}

/// Opaque plan handle. Only ever used behind a pointer.
#[repr(C)]
pub struct fmha_plan {
    _private: [u8; 0],
    // Not Send/Sync/Unpin by itself; the safe wrapper decides.
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fmha_plan_info {
    pub version: u32,
    pub kernel_family: i32,
    pub kernel_name: *const c_char,
    pub device: i32,
    pub device_sm: i32,
    pub image_sm: i32,
    pub image_is_ptx: i32,
    pub tile_m: i32,
    pub tile_n: i32,
    pub threads_per_cta: i32,
    pub shared_memory_bytes: i32,
    pub workspace_bytes: u64,
    // version 2
    pub num_splits: i32,
    pub reserved0: i32,
}

/// `struct CUstream_st *`: a CUstream or cudaStream_t, or null.
pub type fmha_stream = *mut c_void;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct fmha_tensors {
    pub version: u32,
    pub reserved0: u32,
    pub q: *const c_void,
    pub k: *const c_void,
    pub v: *const c_void,
    pub o: *mut c_void,
    pub lse: *mut f32,
    // version 2
    pub sinks: *const f32,
    // version 3: int32 device arrays
    pub cu_seqlens_q: *const i32,
    pub cu_seqlens_k: *const i32,
    pub seqused_k: *const i32,
    pub block_table: *const i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct fmha_merge_descriptor {
    pub version: u32,
    pub dtype: i32,
    pub batch: i64,
    pub seqlen_q: i64,
    pub num_heads: i64,
    pub head_dim: i64,
    pub part_strides: fmha_strides,
    pub o_strides: fmha_strides,
    pub num_parts: i32,
    pub flags: u32,
    pub device: i32,
    pub reserved0: i32,
}

#[link(name = "fmha")]
extern "C" {
    pub fn fmha_version() -> u32;
    pub fn fmha_version_string() -> *const c_char;

    pub fn fmha_status_string(status: fmha_status) -> *const c_char;
    pub fn fmha_last_error_message() -> *const c_char;
    pub fn fmha_last_error_status() -> fmha_status;
    pub fn fmha_clear_last_error();

    pub fn fmha_descriptor_init(desc: *mut fmha_descriptor, version: u32) -> fmha_status;
    pub fn fmha_strides_bshd(
        out: *mut fmha_strides,
        seqlen: i64,
        num_heads: i64,
        head_dim: i64,
    ) -> fmha_status;
    pub fn fmha_strides_bhsd(
        out: *mut fmha_strides,
        seqlen: i64,
        num_heads: i64,
        head_dim: i64,
    ) -> fmha_status;

    pub fn fmha_check_support(desc: *const fmha_descriptor, sm: i32) -> fmha_status;

    pub fn fmha_create_plan(plan: *mut *mut fmha_plan, desc: *const fmha_descriptor) -> fmha_status;
    pub fn fmha_destroy_plan(plan: *mut fmha_plan);
    pub fn fmha_plan_workspace_size(plan: *const fmha_plan, bytes: *mut usize) -> fmha_status;
    pub fn fmha_plan_get_info(plan: *const fmha_plan, info: *mut fmha_plan_info) -> fmha_status;
    pub fn fmha_plan_info_init(info: *mut fmha_plan_info, version: u32) -> fmha_status;

    pub fn fmha_tensors_init(t: *mut fmha_tensors, version: u32) -> fmha_status;
    pub fn fmha_run(
        plan: *const fmha_plan,
        tensors: *const fmha_tensors,
        workspace: *mut c_void,
        workspace_bytes: usize,
        stream: fmha_stream,
    ) -> fmha_status;

    pub fn fmha_check_block_table(
        desc: *const fmha_descriptor,
        host_block_table: *const i32,
        host_seqlens_k: *const i32,
    ) -> fmha_status;

    pub fn fmha_merge_descriptor_init(desc: *mut fmha_merge_descriptor, version: u32) -> fmha_status;
    pub fn fmha_create_merge_plan(
        plan: *mut *mut fmha_plan,
        desc: *const fmha_merge_descriptor,
    ) -> fmha_status;
    pub fn fmha_run_merge(
        plan: *const fmha_plan,
        o_parts: *const *const c_void,
        lse_parts: *const *const f32,
        o: *mut c_void,
        lse: *mut f32,
        stream: fmha_stream,
    ) -> fmha_status;

    pub fn fmha_embedded_archs(archs: *mut i32, capacity: i32) -> i32;
    pub fn fmha_embedded_ptx_arch() -> i32;
    pub fn fmha_driver_version(version: *mut i32) -> fmha_status;
}
