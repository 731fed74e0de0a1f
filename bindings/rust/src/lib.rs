//! Safe Rust bindings for libfmha, fused multi-head attention for NVIDIA GPUs
//! behind a stable C ABI (`libfmha.so`, header `fmha/fmha.h`).
//!
//! Everything except [`Plan::run`] is safe. Functions that need the CUDA
//! driver return [`Status::NoDriver`] on machines without one instead of
//! failing to load.
//!
//! The crate mirrors the struct layouts of one header version
//! ([`sys::FMHA_VERSION_MAJOR`], [`sys::FMHA_VERSION_MINOR`]) but links
//! libfmha dynamically, so before the first call that hands the library a
//! struct it checks the loaded library's [`version`] once
//! ([`check_library_version`]); a library it cannot use makes those calls
//! fail with [`Status::VersionMismatch`], naming both versions.
//!
//! ```no_run
//! use fmha::{check_support, DType, Descriptor, Mask, Plan, SM_ANY};
//!
//! # fn main() -> fmha::Result<()> {
//! let desc = Descriptor::new()?
//!     .dtype(DType::Bf16)
//!     .batch(2)
//!     .heads(16, 4)
//!     .seqlens(1024, 1024)
//!     .head_dim(128)
//!     .mask(Mask::CausalBottomRight)
//!     .contiguous(fmha::Layout::Bshd)?;
//! check_support(&desc, SM_ANY)?;
//! let plan = Plan::new(&desc)?;
//! println!("{} needs {} workspace bytes", plan.info()?.kernel_name, plan.workspace_size()?);
//! # Ok(())
//! # }
//! ```

#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::{c_char, c_void, CStr};
use core::fmt;
use core::ptr::{self, NonNull};
use std::sync::OnceLock;

pub mod sys;

// Compiles the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Pass as `sm` to [`check_support`] to skip every device-dependent check.
pub const SM_ANY: i32 = sys::FMHA_SM_ANY;
/// Pass as `sm` to [`check_support`] to check against the device a plan
/// would use now (needs the driver).
pub const SM_CURRENT_DEVICE: i32 = sys::FMHA_SM_CURRENT_DEVICE;

// ====================================================================== errors

/// Every status code of `fmha_status`. Values are those of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Success,
    InvalidArgument,
    NotSupported,
    VersionMismatch,
    NoDriver,
    NoDevice,
    DriverError,
    Misaligned,
    WorkspaceTooSmall,
    OutOfMemory,
    NoKernelImage,
    ContextMismatch,
    InternalError,
    /// A value this binding does not know (from a newer library).
    Unknown(i32),
}

impl Status {
    /// Every known status, in numeric order.
    pub const ALL: [Status; 13] = [
        Status::Success,
        Status::InvalidArgument,
        Status::NotSupported,
        Status::VersionMismatch,
        Status::NoDriver,
        Status::NoDevice,
        Status::DriverError,
        Status::Misaligned,
        Status::WorkspaceTooSmall,
        Status::OutOfMemory,
        Status::NoKernelImage,
        Status::ContextMismatch,
        Status::InternalError,
    ];

    /// Maps a raw `fmha_status` value.
    pub fn from_raw(raw: sys::fmha_status) -> Status {
        match raw {
            sys::FMHA_STATUS_SUCCESS => Status::Success,
            sys::FMHA_STATUS_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::FMHA_STATUS_NOT_SUPPORTED => Status::NotSupported,
            sys::FMHA_STATUS_VERSION_MISMATCH => Status::VersionMismatch,
            sys::FMHA_STATUS_NO_DRIVER => Status::NoDriver,
            sys::FMHA_STATUS_NO_DEVICE => Status::NoDevice,
            sys::FMHA_STATUS_DRIVER_ERROR => Status::DriverError,
            sys::FMHA_STATUS_MISALIGNED => Status::Misaligned,
            sys::FMHA_STATUS_WORKSPACE_TOO_SMALL => Status::WorkspaceTooSmall,
            sys::FMHA_STATUS_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::FMHA_STATUS_NO_KERNEL_IMAGE => Status::NoKernelImage,
            sys::FMHA_STATUS_CONTEXT_MISMATCH => Status::ContextMismatch,
            sys::FMHA_STATUS_INTERNAL_ERROR => Status::InternalError,
            other => Status::Unknown(other),
        }
    }

    /// The raw `fmha_status` value.
    pub fn raw(self) -> sys::fmha_status {
        match self {
            Status::Success => sys::FMHA_STATUS_SUCCESS,
            Status::InvalidArgument => sys::FMHA_STATUS_INVALID_ARGUMENT,
            Status::NotSupported => sys::FMHA_STATUS_NOT_SUPPORTED,
            Status::VersionMismatch => sys::FMHA_STATUS_VERSION_MISMATCH,
            Status::NoDriver => sys::FMHA_STATUS_NO_DRIVER,
            Status::NoDevice => sys::FMHA_STATUS_NO_DEVICE,
            Status::DriverError => sys::FMHA_STATUS_DRIVER_ERROR,
            Status::Misaligned => sys::FMHA_STATUS_MISALIGNED,
            Status::WorkspaceTooSmall => sys::FMHA_STATUS_WORKSPACE_TOO_SMALL,
            Status::OutOfMemory => sys::FMHA_STATUS_OUT_OF_MEMORY,
            Status::NoKernelImage => sys::FMHA_STATUS_NO_KERNEL_IMAGE,
            Status::ContextMismatch => sys::FMHA_STATUS_CONTEXT_MISMATCH,
            Status::InternalError => sys::FMHA_STATUS_INTERNAL_ERROR,
            Status::Unknown(raw) => raw,
        }
    }

    /// The library's static name, e.g. `"FMHA_STATUS_NOT_SUPPORTED"`.
    pub fn name(self) -> &'static str {
        // SAFETY: fmha_status_string never returns NULL and its result is a
        // static string; unknown values give "FMHA_STATUS_UNKNOWN".
        unsafe { static_str(sys::fmha_status_string(self.raw())) }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed libfmha call: its status and the library's message, which names
/// the field, the value and the rule broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    /// An error with an explicit message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// Builds the error for a failed call that just returned `raw`, taking
    /// the message from this thread's `fmha_last_error_message()`. Must be
    /// called right after the failing call, before any other libfmha call.
    fn from_last(raw: sys::fmha_status) -> Error {
        // SAFETY: never NULL; valid until the next libfmha call on this
        // thread, and we copy it at once.
        let message = unsafe { owned_string(sys::fmha_last_error_message()) };
        Error { status: Status::from_raw(raw), message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with libfmha's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a raw status into `Ok(())` or an [`Error`] carrying this thread's
/// last error message. Call it immediately after the libfmha call that
/// returned `raw`.
pub fn check(raw: sys::fmha_status) -> Result<()> {
    if raw == sys::FMHA_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::from_last(raw))
    }
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn owned_string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string that lives forever.
unsafe fn static_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        ""
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
    }
}

// ====================================================================== builders

/// Writes builder setters that store their arguments in fields of
/// `self.raw` and return `self`, one line each:
/// `pub fn name(arg: Type) => field = value, ...;`. Doc comments pass
/// through, so the generated methods read in rustdoc as hand-written ones.
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) => $($field:ident = $value:expr),+;
    )*) => {
        $(
            $(#[$attr])*
            $vis fn $name(mut self, $($arg: $ty),*) -> Self {
                $(self.raw.$field = $value;)+
                self
            }
        )*
    };
}

/// Sets or clears `flag` in a descriptor's `flags`.
fn set_flag(flags: &mut u32, flag: u32, on: bool) {
    if on {
        *flags |= flag;
    } else {
        *flags &= !flag;
    }
}

// ====================================================================== library info

/// Run-time library version as `MAJOR*10000 + MINOR*100 + PATCH`.
/// Compare with [`sys::FMHA_VERSION_NUMBER`] to detect a header mismatch.
pub fn version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::fmha_version() }
}

/// Says whether a library whose [`version`] is `found` can be used by
/// bindings that mirror the header of version
/// `mirrored_major.mirrored_minor`: the major version must be the same, and
/// before 1.0 the minor version too, since a 0.x minor release may change
/// the struct layouts. Pure; the `Err` message names both versions.
pub fn version_compatible(found: u32, mirrored_major: u32, mirrored_minor: u32) -> std::result::Result<(), String> {
    let (major, minor, patch) = (found / 10000, found / 100 % 100, found % 100);
    let loaded = format!(
        "the loaded libfmha is {major}.{minor}.{patch}, but this crate mirrors the header of libfmha \
         {mirrored_major}.{mirrored_minor}"
    );
    if major != mirrored_major {
        return Err(format!("{loaded} and needs libfmha {mirrored_major}.x"));
    }
    if major == 0 && minor != mirrored_minor {
        return Err(format!(
            "{loaded} and needs libfmha {mirrored_major}.{mirrored_minor}.x \
             (before 1.0 a minor release may change the struct layouts)"
        ));
    }
    Ok(())
}

/// Checks that the loaded library can be used with the struct layouts this
/// crate mirrors ([`version_compatible`] against [`sys::FMHA_VERSION_MAJOR`]
/// and [`sys::FMHA_VERSION_MINOR`]): [`Status::VersionMismatch`] otherwise.
/// Asks the library once per process; every entry point that passes the
/// library a struct calls this first, so calling it yourself is optional.
pub fn check_library_version() -> Result<()> {
    static VERDICT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let verdict = VERDICT
        .get_or_init(|| version_compatible(version(), sys::FMHA_VERSION_MAJOR, sys::FMHA_VERSION_MINOR));
    match verdict {
        Ok(()) => Ok(()),
        Err(message) => Err(Error::new(Status::VersionMismatch, message.clone())),
    }
}

/// Run-time library version as a string such as `"0.1.0"`.
pub fn version_string() -> &'static str {
    // SAFETY: documented as a static string, never NULL.
    unsafe { static_str(sys::fmha_version_string()) }
}

/// Version of the CUDA driver (e.g. 13000). Loads it if needed; returns
/// [`Status::NoDriver`] when libcuda.so.1 is missing.
pub fn driver_version() -> Result<i32> {
    let mut v = 0i32;
    // SAFETY: `v` is a valid out pointer.
    check(unsafe { sys::fmha_driver_version(&mut v) })?;
    Ok(v)
}

/// Architectures (major*10+minor) this build embeds machine code for, in
/// ascending order.
pub fn embedded_archs() -> Vec<i32> {
    // SAFETY: NULL with capacity 0 is allowed and returns the count.
    let n = unsafe { sys::fmha_embedded_archs(ptr::null_mut(), 0) };
    if n <= 0 {
        return Vec::new();
    }
    let mut archs = vec![0i32; n as usize];
    // SAFETY: `archs` has room for `n` values.
    let m = unsafe { sys::fmha_embedded_archs(archs.as_mut_ptr(), n) };
    archs.truncate(m.clamp(0, n) as usize);
    archs
}

/// Virtual architecture of the embedded PTX (e.g. 80), or `None`.
pub fn embedded_ptx_arch() -> Option<i32> {
    // SAFETY: no arguments.
    match unsafe { sys::fmha_embedded_ptx_arch() } {
        0 => None,
        a => Some(a),
    }
}

// ====================================================================== descriptor

/// Element type of Q, K, V and O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Bf16,
    Fp16,
}

impl DType {
    pub fn raw(self) -> sys::fmha_dtype {
        match self {
            DType::Bf16 => sys::FMHA_DTYPE_BF16,
            DType::Fp16 => sys::FMHA_DTYPE_FP16,
        }
    }
    pub fn from_raw(raw: sys::fmha_dtype) -> Option<DType> {
        match raw {
            sys::FMHA_DTYPE_BF16 => Some(DType::Bf16),
            sys::FMHA_DTYPE_FP16 => Some(DType::Fp16),
            _ => None,
        }
    }
}

/// Which keys a query may see (see `fmha_mask` in the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mask {
    None,
    CausalTopLeft,
    CausalBottomRight,
}

impl Mask {
    pub fn raw(self) -> sys::fmha_mask {
        match self {
            Mask::None => sys::FMHA_MASK_NONE,
            Mask::CausalTopLeft => sys::FMHA_MASK_CAUSAL_TOP_LEFT,
            Mask::CausalBottomRight => sys::FMHA_MASK_CAUSAL_BOTTOM_RIGHT,
        }
    }
    pub fn from_raw(raw: sys::fmha_mask) -> Option<Mask> {
        match raw {
            sys::FMHA_MASK_NONE => Some(Mask::None),
            sys::FMHA_MASK_CAUSAL_TOP_LEFT => Some(Mask::CausalTopLeft),
            sys::FMHA_MASK_CAUSAL_BOTTOM_RIGHT => Some(Mask::CausalBottomRight),
            _ => None,
        }
    }
}

/// Which kernel family a plan may pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelFamily {
    Auto,
    Portable,
    /// sm_90 only (TMA, wgmma); head dims up to 512.
    Hopper,
    /// Few query rows per sequence, GQA heads packed in one tile, split-KV;
    /// also head_dim 512 (on devices other than sm_90).
    Decode,
}

impl KernelFamily {
    pub fn raw(self) -> sys::fmha_kernel_family {
        match self {
            KernelFamily::Auto => sys::FMHA_KERNEL_AUTO,
            KernelFamily::Portable => sys::FMHA_KERNEL_PORTABLE,
            KernelFamily::Hopper => sys::FMHA_KERNEL_HOPPER,
            KernelFamily::Decode => sys::FMHA_KERNEL_DECODE,
        }
    }
    pub fn from_raw(raw: sys::fmha_kernel_family) -> Option<KernelFamily> {
        match raw {
            sys::FMHA_KERNEL_AUTO => Some(KernelFamily::Auto),
            sys::FMHA_KERNEL_PORTABLE => Some(KernelFamily::Portable),
            sys::FMHA_KERNEL_HOPPER => Some(KernelFamily::Hopper),
            sys::FMHA_KERNEL_DECODE => Some(KernelFamily::Decode),
            _ => None,
        }
    }
}

/// Element strides of one 4-D tensor whose head_dim dimension is contiguous.
pub type Strides = sys::fmha_strides;

/// Memory layout for [`Descriptor::contiguous`] and [`strides`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `[batch, seq, heads, dim]`, contiguous.
    Bshd,
    /// `[batch, heads, seq, dim]`, contiguous.
    Bhsd,
}

/// Strides of a contiguous tensor in `layout`, computed by the library.
pub fn strides(layout: Layout, seqlen: i64, num_heads: i64, head_dim: i64) -> Result<Strides> {
    check_library_version()?;
    let mut s = Strides::default();
    // SAFETY: `s` is a valid out pointer.
    let raw = unsafe {
        match layout {
            Layout::Bshd => sys::fmha_strides_bshd(&mut s, seqlen, num_heads, head_dim),
            Layout::Bhsd => sys::fmha_strides_bhsd(&mut s, seqlen, num_heads, head_dim),
        }
    };
    check(raw)?;
    Ok(s)
}

/// The attention problem: a builder over `fmha_descriptor`, initialised by
/// `fmha_descriptor_init` so unset fields carry the library's defaults.
///
/// Shapes (logical order; strides give the memory order):
/// Q `[batch, seqlen_q, num_q_heads, head_dim]`,
/// K `[batch, seqlen_k, num_kv_heads, head_dim]`,
/// V `[batch, seqlen_k, num_kv_heads, head_dim_v]`,
/// O `[batch, seqlen_q, num_q_heads, head_dim_v]`.
///
/// Serving forms (descriptor version 3): [`Descriptor::varlen_q`] packs Q
/// and O as `[total_q, heads, dim]` (rows located by `cu_seqlens_q`),
/// [`Descriptor::varlen_k`] takes key counts (and, unpaged, packed K/V rows)
/// from `cu_seqlens_k`, [`Descriptor::seqused_k`] key counts from
/// `seqused_k`, and [`Descriptor::paged_kv`] reads K/V from
/// `[num_pages, page_size, kv_heads, dim]` caches through a block table.
/// `seqlen_q` / `seqlen_k` are then maxima. The index arrays go in
/// [`Tensors`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Descriptor {
    raw: sys::fmha_descriptor,
}

impl Descriptor {
    /// Defaults from `fmha_descriptor_init(FMHA_DESCRIPTOR_VERSION)`.
    /// Fails with [`Status::VersionMismatch`] if the loaded library is older
    /// than the header this crate mirrors, or of another release series
    /// ([`check_library_version`]).
    pub fn new() -> Result<Descriptor> {
        check_library_version()?;
        let mut raw = sys::fmha_descriptor::default();
        // SAFETY: `raw` is a valid, writable fmha_descriptor.
        check(unsafe { sys::fmha_descriptor_init(&mut raw, sys::FMHA_DESCRIPTOR_VERSION) })?;
        Ok(Descriptor { raw })
    }

    /// Wraps a raw descriptor as is (no validation).
    pub fn from_raw(raw: sys::fmha_descriptor) -> Descriptor {
        Descriptor { raw }
    }
    pub fn as_raw(&self) -> &sys::fmha_descriptor {
        &self.raw
    }
    pub fn as_raw_mut(&mut self) -> &mut sys::fmha_descriptor {
        &mut self.raw
    }

    setters! {
        pub fn dtype(dtype: DType) => dtype = dtype.raw();
        pub fn batch(batch: i64) => batch = batch;
        /// Query heads and key/value heads (equal: MHA, kv 1: MQA, else GQA).
        pub fn heads(num_q_heads: i64, num_kv_heads: i64) =>
            num_q_heads = num_q_heads, num_kv_heads = num_kv_heads;
        pub fn seqlens(seqlen_q: i64, seqlen_k: i64) => seqlen_q = seqlen_q, seqlen_k = seqlen_k;
        /// Head dim of Q and K.
        pub fn head_dim(head_dim: i64) => head_dim = head_dim;
        /// Head dim of V and O; 0 means head_dim.
        pub fn head_dim_v(head_dim_v: i64) => head_dim_v = head_dim_v;
        pub fn q_strides(s: Strides) => q_strides = s;
        pub fn k_strides(s: Strides) => k_strides = s;
        pub fn v_strides(s: Strides) => v_strides = s;
        pub fn o_strides(s: Strides) => o_strides = s;
    }
    /// Sets all four tensors' strides for contiguous tensors in `layout`,
    /// from the sequence lengths, head counts and head dims set so far.
    /// Rows are counted as the library addresses them: `total_q` rows for
    /// packed Q/O ([`Descriptor::varlen_q`]), `page_size` rows per page for
    /// paged K/V, `total_k` rows for packed K/V; so set those first.
    pub fn contiguous(mut self, layout: Layout) -> Result<Self> {
        let r = &self.raw;
        let dv = if r.head_dim_v == 0 { r.head_dim } else { r.head_dim_v };
        let q_rows = if r.flags & sys::FMHA_FLAG_VARLEN_Q != 0 { r.total_q } else { r.seqlen_q };
        let k_rows = if r.flags & sys::FMHA_FLAG_PAGED_KV != 0 {
            i64::from(r.page_size)
        } else if r.flags & sys::FMHA_FLAG_VARLEN_K != 0 {
            r.total_k
        } else {
            r.seqlen_k
        };
        let q = strides(layout, q_rows, r.num_q_heads, r.head_dim)?;
        let k = strides(layout, k_rows, r.num_kv_heads, r.head_dim)?;
        let v = strides(layout, k_rows, r.num_kv_heads, dv)?;
        let o = strides(layout, q_rows, r.num_q_heads, dv)?;
        self.raw.q_strides = q;
        self.raw.k_strides = k;
        self.raw.v_strides = v;
        self.raw.o_strides = o;
        Ok(self)
    }
    setters! {
        /// Multiplies QK^T; 0 means 1/sqrt(head_dim).
        pub fn softmax_scale(scale: f32) => softmax_scale = scale;
        pub fn mask(mask: Mask) => mask = mask.raw();
    }
    /// Whether runs write the log-sum-exp tensor ([`Tensors::lse`]).
    pub fn write_lse(mut self, on: bool) -> Self {
        set_flag(&mut self.raw.flags, sys::FMHA_FLAG_WRITE_LSE, on);
        self
    }
    setters! {
        pub fn kernel(kernel: KernelFamily) => kernel = kernel.raw();
        /// CUDA device ordinal used when no context is current on the thread.
        pub fn device(device: i32) => device = device;
        /// Sliding window around each row's diagonal: keys more than `left`
        /// before or `right` after it are masked; -1 leaves a side unbounded.
        pub fn window(left: i32, right: i32) => window_left = left, window_right = right;
        /// Logit soft-capping: scores become `cap * tanh(s / cap)`; 0 turns it off.
        pub fn softcap(cap: f32) => softcap = cap;
    }
    /// Attention sinks: runs then need [`Tensors::sinks`] (one float32
    /// logit per query head, joining every row's softmax denominator).
    pub fn sinks(mut self, on: bool) -> Self {
        set_flag(&mut self.raw.flags, sys::FMHA_FLAG_SINKS, on);
        self
    }
    /// Variable-length queries: Q and O are packed `[total_q, heads, dim]`
    /// and runs need [`Tensors::cu_seqlens_q`] (`batch + 1` int32 offsets).
    /// `seqlen_q` is the longest sequence. With [`Descriptor::write_lse`]
    /// the LSE is `[num_q_heads, total_q]`.
    pub fn varlen_q(mut self, total_q: i64) -> Self {
        self.raw.flags |= sys::FMHA_FLAG_VARLEN_Q;
        self.raw.total_q = total_q;
        self
    }
    /// Variable-length keys: runs need [`Tensors::cu_seqlens_k`]; without
    /// [`Descriptor::paged_kv`], K and V are packed `[total_k, kv_heads,
    /// dim]` (pass `total_k` 0 with paged KV). `seqlen_k` is the longest.
    pub fn varlen_k(mut self, total_k: i64) -> Self {
        self.raw.flags |= sys::FMHA_FLAG_VARLEN_K;
        self.raw.total_k = total_k;
        self
    }
    /// Keys used per sequence from [`Tensors::seqused_k`] (`batch` int32).
    pub fn seqused_k(mut self, on: bool) -> Self {
        set_flag(&mut self.raw.flags, sys::FMHA_FLAG_SEQUSED_K, on);
        self
    }
    /// Paged KV cache: K and V are `[num_pages, page_size, kv_heads, dim]`
    /// (the batch stride of `k_strides` / `v_strides` is the page stride)
    /// and runs need [`Tensors::block_table`] (int32, row-major
    /// `[batch, max_pages_per_seq]`). `max_pages_per_seq * page_size` must
    /// cover `seqlen_k`; see [`check_block_table`] for the table's contract.
    pub fn paged_kv(mut self, num_pages: i64, page_size: i32, max_pages_per_seq: i64) -> Self {
        self.raw.flags |= sys::FMHA_FLAG_PAGED_KV;
        self.raw.num_pages = num_pages;
        self.raw.page_size = page_size;
        self.raw.max_pages_per_seq = max_pages_per_seq;
        self
    }
    setters! {
        /// Split-KV parts per (sequence, head): 0 automatic (the default), 1
        /// off, 2..128 exactly that many (AUTO then takes the decode kernel;
        /// a forced Hopper kernel splits too, on sm_90). The partial results
        /// live in the plan's workspace.
        pub fn num_splits(num_splits: i32) => num_splits = num_splits;
    }
    /// The `FMHA_FLAG_*` bits set so far.
    pub fn flags(&self) -> u32 {
        self.raw.flags
    }
}

/// Says whether `desc` is valid and supported, without creating anything.
/// `sm` is a compute capability as major*10+minor, [`SM_ANY`] or
/// [`SM_CURRENT_DEVICE`].
pub fn check_support(desc: &Descriptor, sm: i32) -> Result<()> {
    // A Descriptor may come from from_raw, without Descriptor::new's check.
    check_library_version()?;
    // SAFETY: `desc.raw` is a valid descriptor for the duration of the call.
    check(unsafe { sys::fmha_check_support(&desc.raw, sm) })
}

// ====================================================================== plans

/// What a plan chose, copied out of `fmha_plan_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanInfo {
    /// Raw `fmha_kernel_family`; see [`PlanInfo::kernel_family`].
    pub kernel_family_raw: i32,
    pub kernel_name: String,
    pub device: i32,
    pub device_sm: i32,
    pub image_sm: i32,
    pub image_is_ptx: bool,
    pub tile_m: i32,
    pub tile_n: i32,
    pub threads_per_cta: i32,
    pub shared_memory_bytes: i32,
    pub workspace_bytes: u64,
    /// Split-KV parts per (sequence, head); 1 means none. For a merge plan,
    /// the number of parts.
    pub num_splits: i32,
}

impl PlanInfo {
    pub fn kernel_family(&self) -> Option<KernelFamily> {
        KernelFamily::from_raw(self.kernel_family_raw)
    }
}

/// A validated problem bound to a CUDA context and a kernel. Dropping it
/// calls `fmha_destroy_plan`.
#[derive(Debug)]
pub struct Plan {
    raw: NonNull<sys::fmha_plan>,
}

// SAFETY: the header documents that "one plan may be run concurrently from
// several threads on several streams", and every function taking the plan
// other than fmha_destroy_plan takes it as `const fmha_plan *`: shared use
// from several threads (`Sync`) is allowed by the contract. Plans are bound
// to a CUDA context, not to the creating thread, so moving one to another
// thread and destroying it there (`Send`) is fine; Drop runs only once no
// `&Plan` is left, i.e. after every `run` has returned (enqueued).
unsafe impl Send for Plan {}
unsafe impl Sync for Plan {}

impl Plan {
    /// Validates `desc`, picks the device and a kernel and loads it. Slow-ish:
    /// create plans ahead of time. Needs the CUDA driver
    /// ([`Status::NoDriver`] otherwise).
    pub fn new(desc: &Descriptor) -> Result<Plan> {
        check_library_version()?;
        let mut p: *mut sys::fmha_plan = ptr::null_mut();
        // SAFETY: valid out pointer and descriptor.
        check(unsafe { sys::fmha_create_plan(&mut p, &desc.raw) })?;
        NonNull::new(p)
            .map(|raw| Plan { raw })
            .ok_or_else(|| Error::new(Status::InternalError, "fmha_create_plan succeeded but returned NULL"))
    }

    pub fn as_raw(&self) -> *const sys::fmha_plan {
        self.raw.as_ptr()
    }

    /// Bytes of device workspace [`Plan::run`] needs (may be 0).
    pub fn workspace_size(&self) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: live plan, valid out pointer.
        check(unsafe { sys::fmha_plan_workspace_size(self.raw.as_ptr(), &mut bytes) })?;
        Ok(bytes)
    }

    /// What the plan chose.
    pub fn info(&self) -> Result<PlanInfo> {
        plan_info(self.raw)
    }

    /// Enqueues attention on `stream` (asynchronous; never allocates or
    /// synchronizes; safe inside CUDA graph capture). Argument errors are
    /// reported before anything is enqueued.
    ///
    /// # Safety
    /// * Every pointer in `tensors` and `workspace` must be a CUDA device
    ///   pointer (or one usable from the device, e.g. managed memory) of the
    ///   plan's context, 16-byte aligned, and address a buffer large enough
    ///   for the shapes and strides of the plan's descriptor; `lse` too when
    ///   the descriptor asked for it. The library cannot check sizes.
    /// * `workspace` must hold at least `workspace_bytes` bytes, and
    ///   `workspace_bytes` must be at least [`Plan::workspace_size`] (or
    ///   `workspace` may be null when that is 0).
    /// * `stream` must be null (legacy default stream) or a live `CUstream` /
    ///   `cudaStream_t` belonging to the plan's CUDA context.
    /// * The buffers must stay allocated, and Q/K/V unmodified and O/LSE not
    ///   otherwise accessed, until the work enqueued on `stream` completes;
    ///   no other work may use the same workspace concurrently.
    pub unsafe fn run(
        &self,
        tensors: &Tensors,
        workspace: *mut c_void,
        workspace_bytes: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller; the plan is live.
        check(unsafe {
            sys::fmha_run(self.raw.as_ptr(), &tensors.raw, workspace, workspace_bytes, stream)
        })
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: we own the plan and nobody can use it after this.
        unsafe { sys::fmha_destroy_plan(self.raw.as_ptr()) }
    }
}

fn plan_info(plan: NonNull<sys::fmha_plan>) -> Result<PlanInfo> {
    // SAFETY: fmha_plan_info is plain data; all-zero is a valid value.
    let mut raw: sys::fmha_plan_info = unsafe { core::mem::zeroed() };
    // SAFETY: valid out pointers, live plan.
    check(unsafe { sys::fmha_plan_info_init(&mut raw, sys::FMHA_PLAN_INFO_VERSION) })?;
    check(unsafe { sys::fmha_plan_get_info(plan.as_ptr(), &mut raw) })?;
    Ok(PlanInfo {
        kernel_family_raw: raw.kernel_family,
        // SAFETY: documented as a static string (or NULL).
        kernel_name: unsafe { owned_string(raw.kernel_name) },
        device: raw.device,
        device_sm: raw.device_sm,
        image_sm: raw.image_sm,
        image_is_ptx: raw.image_is_ptx != 0,
        tile_m: raw.tile_m,
        tile_n: raw.tile_n,
        threads_per_cta: raw.threads_per_cta,
        shared_memory_bytes: raw.shared_memory_bytes,
        workspace_bytes: raw.workspace_bytes,
        num_splits: raw.num_splits,
    })
}

/// Checks a host copy of a paged-KV block table against `desc` (which must
/// set [`Descriptor::paged_kv`]): every entry a sequence's keys use must lie
/// in `[0, num_pages)`; the kernels would clamp a bad entry (no fault, but a
/// wrong result). `seqlens_k` gives each sequence's key count (`None`:
/// `seqlen_k` for all). Pure host code: no driver needed.
///
/// The slices must hold at least `batch * max_pages_per_seq` and `batch`
/// entries (checked here: [`Status::InvalidArgument`] otherwise). The
/// library's error names the first bad entry as `block_table[b][i]`.
pub fn check_block_table(desc: &Descriptor, block_table: &[i32], seqlens_k: Option<&[i32]>) -> Result<()> {
    check_library_version()?;
    let r = &desc.raw;
    if r.flags & sys::FMHA_FLAG_PAGED_KV != 0 && r.batch > 0 && r.max_pages_per_seq > 0 {
        let needed = r.batch.saturating_mul(r.max_pages_per_seq);
        if (block_table.len() as i64) < needed {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "block_table has {} entries: the descriptor needs batch x max_pages_per_seq = {needed}",
                    block_table.len()
                ),
            ));
        }
        if let Some(lens) = seqlens_k {
            if (lens.len() as i64) < r.batch {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("seqlens_k has {} entries: the descriptor's batch is {}", lens.len(), r.batch),
                ));
            }
        }
    }
    let lens = seqlens_k.map_or(ptr::null(), <[i32]>::as_ptr);
    // SAFETY: the library reads batch x max_pages_per_seq table entries and
    // batch lengths, only for a valid paged descriptor (checked above to fit
    // the slices); otherwise it fails before reading.
    check(unsafe { sys::fmha_check_block_table(&desc.raw, block_table.as_ptr(), lens) })
}

// ====================================================================== merge

/// A merge of partial attention results: a builder over
/// `fmha_merge_descriptor`, initialised by `fmha_merge_descriptor_init`.
///
/// `num_parts` partial O `[batch, seqlen_q, num_heads, head_dim]` (all with
/// `part_strides`) over disjoint key sets, each with its float32 LSE
/// `[batch, num_heads, seqlen_q]` (contiguous, as [`Plan::run`] writes it),
/// combine into the exact attention over the union:
/// `O = sum_p exp(LSE_p - LSE) O_p`, `LSE = log sum_p exp(LSE_p)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeDescriptor {
    raw: sys::fmha_merge_descriptor,
}

impl MergeDescriptor {
    /// Defaults from `fmha_merge_descriptor_init`: BF16, strides 0 except
    /// `dim` = 1, device 0, no flags.
    pub fn new() -> Result<MergeDescriptor> {
        check_library_version()?;
        let mut raw = sys::fmha_merge_descriptor::default();
        // SAFETY: valid, writable struct.
        check(unsafe { sys::fmha_merge_descriptor_init(&mut raw, sys::FMHA_MERGE_DESCRIPTOR_VERSION) })?;
        Ok(MergeDescriptor { raw })
    }
    pub fn from_raw(raw: sys::fmha_merge_descriptor) -> MergeDescriptor {
        MergeDescriptor { raw }
    }
    pub fn as_raw(&self) -> &sys::fmha_merge_descriptor {
        &self.raw
    }
    pub fn as_raw_mut(&mut self) -> &mut sys::fmha_merge_descriptor {
        &mut self.raw
    }
    setters! {
        /// Element type of the parts' O and of the output O.
        pub fn dtype(dtype: DType) => dtype = dtype.raw();
        /// `batch`, `seqlen_q`, `num_heads` and `head_dim` (a multiple of 8, up
        /// to 512) of every O. Packed (varlen) results are `batch` 1,
        /// `seqlen_q` = total_q.
        pub fn shape(batch: i64, seqlen_q: i64, num_heads: i64, head_dim: i64) =>
            batch = batch, seqlen_q = seqlen_q, num_heads = num_heads, head_dim = head_dim;
        /// 1 to [`MERGE_MAX_PARTS`].
        pub fn num_parts(num_parts: i32) => num_parts = num_parts;
        pub fn part_strides(s: Strides) => part_strides = s;
        pub fn o_strides(s: Strides) => o_strides = s;
    }
    /// Sets the parts' and the output's strides for contiguous tensors in `layout`.
    pub fn contiguous(mut self, layout: Layout) -> Result<Self> {
        let s = strides(layout, self.raw.seqlen_q, self.raw.num_heads, self.raw.head_dim)?;
        self.raw.part_strides = s;
        self.raw.o_strides = s;
        Ok(self)
    }
    /// Also write the merged LSE.
    pub fn write_lse(mut self, on: bool) -> Self {
        set_flag(&mut self.raw.flags, sys::FMHA_FLAG_WRITE_LSE, on);
        self
    }
    setters! {
        /// CUDA device ordinal used when no context is current on the thread.
        pub fn device(device: i32) => device = device;
    }
}

/// Most parts one merge combines (`FMHA_MERGE_MAX_PARTS`).
pub const MERGE_MAX_PARTS: usize = sys::FMHA_MERGE_MAX_PARTS as usize;

/// A plan that merges partial results (`fmha_create_merge_plan`). Dropping
/// it calls `fmha_destroy_plan`. Needs no workspace.
#[derive(Debug)]
pub struct MergePlan {
    raw: NonNull<sys::fmha_plan>,
    num_parts: usize,
    write_lse: bool,
}

// SAFETY: as for `Plan`: runs take the plan as `const fmha_plan *` and may
// be concurrent; the plan is bound to a CUDA context, not to a thread.
unsafe impl Send for MergePlan {}
unsafe impl Sync for MergePlan {}

impl MergePlan {
    /// Validates `desc` and loads the merge kernel (needs the driver).
    pub fn new(desc: &MergeDescriptor) -> Result<MergePlan> {
        check_library_version()?;
        let mut p: *mut sys::fmha_plan = ptr::null_mut();
        // SAFETY: valid out pointer and descriptor.
        check(unsafe { sys::fmha_create_merge_plan(&mut p, &desc.raw) })?;
        let raw = NonNull::new(p)
            .ok_or_else(|| Error::new(Status::InternalError, "fmha_create_merge_plan succeeded but returned NULL"))?;
        Ok(MergePlan {
            raw,
            num_parts: desc.raw.num_parts.max(0) as usize,
            write_lse: desc.raw.flags & sys::FMHA_FLAG_WRITE_LSE != 0,
        })
    }

    pub fn as_raw(&self) -> *const sys::fmha_plan {
        self.raw.as_ptr()
    }

    /// The number of parts each run combines.
    pub fn num_parts(&self) -> usize {
        self.num_parts
    }

    /// Whether runs write the merged LSE (then `lse` must not be null).
    pub fn writes_lse(&self) -> bool {
        self.write_lse
    }

    /// What the plan loaded ([`PlanInfo::num_splits`] is the part count).
    pub fn info(&self) -> Result<PlanInfo> {
        plan_info(self.raw)
    }

    /// Enqueues the merge on `stream` (asynchronous; never allocates or
    /// synchronizes; safe inside CUDA graph capture). `o_parts` and
    /// `lse_parts` must hold exactly [`MergePlan::num_parts`] pointers
    /// ([`Status::InvalidArgument`] otherwise); they are copied during the
    /// call. `lse` may be null unless the descriptor asked for it.
    ///
    /// # Safety
    /// * Every pointer is a device pointer of the plan's context addressing
    ///   a buffer large enough for the descriptor's shapes and strides; O
    ///   pointers 16-byte aligned, LSE pointers 4-byte aligned.
    /// * The output may alias a part only if it is that same tensor with
    ///   the same strides.
    /// * `stream` is null or a live stream of the plan's context, and the
    ///   buffers stay allocated (parts unmodified) until the merge completes.
    pub unsafe fn run(
        &self,
        o_parts: &[*const c_void],
        lse_parts: &[*const f32],
        o: *mut c_void,
        lse: *mut f32,
        stream: *mut c_void,
    ) -> Result<()> {
        if o_parts.len() != self.num_parts || lse_parts.len() != self.num_parts {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "this merge plan combines {} parts: got {} O parts and {} LSE parts",
                    self.num_parts,
                    o_parts.len(),
                    lse_parts.len()
                ),
            ));
        }
        // SAFETY: the slices hold num_parts pointers (checked); the rest is
        // forwarded from the caller.
        check(unsafe {
            sys::fmha_run_merge(self.raw.as_ptr(), o_parts.as_ptr(), lse_parts.as_ptr(), o, lse, stream)
        })
    }
}

impl Drop for MergePlan {
    fn drop(&mut self) {
        // SAFETY: we own the plan and nobody can use it after this.
        unsafe { sys::fmha_destroy_plan(self.raw.as_ptr()) }
    }
}

// ====================================================================== tensors

/// Device pointers for one run, initialised through `fmha_tensors_init`.
#[derive(Debug, Clone, Copy)]
pub struct Tensors {
    raw: sys::fmha_tensors,
}

impl Tensors {
    /// Q, K, V (read) and O (written) device pointers. LSE is unset.
    pub fn new(q: *const c_void, k: *const c_void, v: *const c_void, o: *mut c_void) -> Result<Tensors> {
        check_library_version()?;
        // SAFETY: plain data, all-zero is valid.
        let mut raw: sys::fmha_tensors = unsafe { core::mem::zeroed() };
        // SAFETY: valid out pointer.
        check(unsafe { sys::fmha_tensors_init(&mut raw, sys::FMHA_TENSORS_VERSION) })?;
        raw.q = q;
        raw.k = k;
        raw.v = v;
        raw.o = o;
        Ok(Tensors { raw })
    }

    setters! {
        /// float32 `[batch, num_q_heads, seqlen_q]` log-sum-exp output
        /// (`[num_q_heads, total_q]` with [`Descriptor::varlen_q`]), required
        /// when the descriptor has [`Descriptor::write_lse`].
        pub fn lse(lse: *mut f32) => lse = lse;

        /// float32 `[num_q_heads]` sink logits, required when the descriptor
        /// has [`Descriptor::sinks`].
        pub fn sinks(sinks: *const f32) => sinks = sinks;

        /// int32 `[batch + 1]` query offsets (device), required with
        /// [`Descriptor::varlen_q`]: sequence b owns rows `cu[b]..cu[b+1]`.
        pub fn cu_seqlens_q(cu: *const i32) => cu_seqlens_q = cu;

        /// int32 `[batch + 1]` key offsets (device), required with
        /// [`Descriptor::varlen_k`].
        pub fn cu_seqlens_k(cu: *const i32) => cu_seqlens_k = cu;

        /// int32 `[batch]` keys used per sequence (device), required with
        /// [`Descriptor::seqused_k`].
        pub fn seqused_k(used: *const i32) => seqused_k = used;

        /// int32 `[batch, max_pages_per_seq]` block table (device, row-major),
        /// required with [`Descriptor::paged_kv`].
        pub fn block_table(table: *const i32) => block_table = table;
    }

    pub fn as_raw(&self) -> &sys::fmha_tensors {
        &self.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_roundtrip() {
        for (i, s) in Status::ALL.iter().enumerate() {
            assert_eq!(s.raw(), i as i32);
            assert_eq!(Status::from_raw(i as i32), *s);
        }
        assert_eq!(Status::from_raw(99), Status::Unknown(99));
        assert_eq!(Status::Unknown(99).raw(), 99);
    }

    #[test]
    fn version_compatible_same_release_series() {
        assert_eq!(version_compatible(100, 0, 1), Ok(())); // 0.1.0 for the 0.1 header
        assert_eq!(version_compatible(107, 0, 1), Ok(())); // patch releases keep the layouts
        assert_eq!(version_compatible(10000, 1, 0), Ok(()));
        // From 1.0 on only the major version must match: structs are versioned.
        assert_eq!(version_compatible(10300, 1, 0), Ok(()));
        assert_eq!(version_compatible(10000, 1, 2), Ok(()));
    }

    #[test]
    fn version_compatible_rejects_another_minor_before_1_0() {
        for (found, name) in [(200, "0.2.0"), (3, "0.0.3"), (9999, "0.99.99")] {
            let message = version_compatible(found, 0, 1).unwrap_err();
            assert!(message.contains(&format!("libfmha is {name}")), "{message}");
            assert!(message.contains("libfmha 0.1 and needs libfmha 0.1.x"), "{message}");
            assert!(message.contains("before 1.0"), "{message}");
        }
    }

    #[test]
    fn version_compatible_rejects_another_major() {
        let message = version_compatible(10100, 0, 1).unwrap_err();
        assert!(message.contains("libfmha is 1.1.0"), "{message}");
        assert!(message.contains("libfmha 0.1 and needs libfmha 0.x"), "{message}");
        let message = version_compatible(20001, 1, 4).unwrap_err();
        assert!(message.contains("libfmha is 2.0.1"), "{message}");
        assert!(message.contains("libfmha 1.4 and needs libfmha 1.x"), "{message}");
        assert!(version_compatible(0, 1, 0).is_err());
    }

    #[test]
    fn error_display() {
        let e = Error::new(Status::NotSupported, "head_dim 80");
        assert_eq!(e.to_string(), "FMHA_STATUS_NOT_SUPPORTED: head_dim 80");
        let e = Error::new(Status::NoDriver, "");
        assert_eq!(e.to_string(), "FMHA_STATUS_NO_DRIVER");
    }
}
