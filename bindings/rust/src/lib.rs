//! Safe Rust bindings for libfmha, fused multi-head attention for NVIDIA GPUs
//! behind a stable C ABI (`libfmha.so`, header `fmha/fmha.h`).
//!
//! Everything except [`Plan::run`] is safe. Functions that need the CUDA
//! driver return [`Status::NoDriver`] on machines without one instead of
//! failing to load.
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

// ====================================================================== library info

/// Run-time library version as `MAJOR*10000 + MINOR*100 + PATCH`.
/// Compare with [`sys::FMHA_VERSION_NUMBER`] to detect a header mismatch.
pub fn version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::fmha_version() }
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
    Hopper,
}

impl KernelFamily {
    pub fn raw(self) -> sys::fmha_kernel_family {
        match self {
            KernelFamily::Auto => sys::FMHA_KERNEL_AUTO,
            KernelFamily::Portable => sys::FMHA_KERNEL_PORTABLE,
            KernelFamily::Hopper => sys::FMHA_KERNEL_HOPPER,
        }
    }
    pub fn from_raw(raw: sys::fmha_kernel_family) -> Option<KernelFamily> {
        match raw {
            sys::FMHA_KERNEL_AUTO => Some(KernelFamily::Auto),
            sys::FMHA_KERNEL_PORTABLE => Some(KernelFamily::Portable),
            sys::FMHA_KERNEL_HOPPER => Some(KernelFamily::Hopper),
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Descriptor {
    raw: sys::fmha_descriptor,
}

impl Descriptor {
    /// Defaults from `fmha_descriptor_init(FMHA_DESCRIPTOR_VERSION)`.
    /// Fails with [`Status::VersionMismatch`] if the loaded library is older
    /// than the header this crate mirrors.
    pub fn new() -> Result<Descriptor> {
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

    pub fn dtype(mut self, dtype: DType) -> Self {
        self.raw.dtype = dtype.raw();
        self
    }
    pub fn batch(mut self, batch: i64) -> Self {
        self.raw.batch = batch;
        self
    }
    /// Query heads and key/value heads (equal: MHA, kv 1: MQA, else GQA).
    pub fn heads(mut self, num_q_heads: i64, num_kv_heads: i64) -> Self {
        self.raw.num_q_heads = num_q_heads;
        self.raw.num_kv_heads = num_kv_heads;
        self
    }
    pub fn seqlens(mut self, seqlen_q: i64, seqlen_k: i64) -> Self {
        self.raw.seqlen_q = seqlen_q;
        self.raw.seqlen_k = seqlen_k;
        self
    }
    /// Head dim of Q and K.
    pub fn head_dim(mut self, head_dim: i64) -> Self {
        self.raw.head_dim = head_dim;
        self
    }
    /// Head dim of V and O; 0 means head_dim.
    pub fn head_dim_v(mut self, head_dim_v: i64) -> Self {
        self.raw.head_dim_v = head_dim_v;
        self
    }
    pub fn q_strides(mut self, s: Strides) -> Self {
        self.raw.q_strides = s;
        self
    }
    pub fn k_strides(mut self, s: Strides) -> Self {
        self.raw.k_strides = s;
        self
    }
    pub fn v_strides(mut self, s: Strides) -> Self {
        self.raw.v_strides = s;
        self
    }
    pub fn o_strides(mut self, s: Strides) -> Self {
        self.raw.o_strides = s;
        self
    }
    /// Sets all four tensors' strides for contiguous tensors in `layout`,
    /// from the sequence lengths, head counts and head dims set so far.
    pub fn contiguous(mut self, layout: Layout) -> Result<Self> {
        let r = &self.raw;
        let dv = if r.head_dim_v == 0 { r.head_dim } else { r.head_dim_v };
        let q = strides(layout, r.seqlen_q, r.num_q_heads, r.head_dim)?;
        let k = strides(layout, r.seqlen_k, r.num_kv_heads, r.head_dim)?;
        let v = strides(layout, r.seqlen_k, r.num_kv_heads, dv)?;
        let o = strides(layout, r.seqlen_q, r.num_q_heads, dv)?;
        self.raw.q_strides = q;
        self.raw.k_strides = k;
        self.raw.v_strides = v;
        self.raw.o_strides = o;
        Ok(self)
    }
    /// Multiplies QK^T; 0 means 1/sqrt(head_dim).
    pub fn softmax_scale(mut self, scale: f32) -> Self {
        self.raw.softmax_scale = scale;
        self
    }
    pub fn mask(mut self, mask: Mask) -> Self {
        self.raw.mask = mask.raw();
        self
    }
    /// Whether runs write the log-sum-exp tensor ([`Tensors::lse`]).
    pub fn write_lse(mut self, on: bool) -> Self {
        if on {
            self.raw.flags |= sys::FMHA_FLAG_WRITE_LSE;
        } else {
            self.raw.flags &= !sys::FMHA_FLAG_WRITE_LSE;
        }
        self
    }
    pub fn kernel(mut self, kernel: KernelFamily) -> Self {
        self.raw.kernel = kernel.raw();
        self
    }
    /// CUDA device ordinal used when no context is current on the thread.
    pub fn device(mut self, device: i32) -> Self {
        self.raw.device = device;
        self
    }
    /// Sliding window around each row's diagonal: keys more than `left`
    /// before or `right` after it are masked; -1 leaves a side unbounded.
    pub fn window(mut self, left: i32, right: i32) -> Self {
        self.raw.window_left = left;
        self.raw.window_right = right;
        self
    }
    /// Logit soft-capping: scores become `cap * tanh(s / cap)`; 0 turns it off.
    pub fn softcap(mut self, cap: f32) -> Self {
        self.raw.softcap = cap;
        self
    }
    /// Attention sinks: runs then need [`Tensors::sinks`] (one float32
    /// logit per query head, joining every row's softmax denominator).
    pub fn sinks(mut self, on: bool) -> Self {
        if on {
            self.raw.flags |= sys::FMHA_FLAG_SINKS;
        } else {
            self.raw.flags &= !sys::FMHA_FLAG_SINKS;
        }
        self
    }
}

/// Says whether `desc` is valid and supported, without creating anything.
/// `sm` is a compute capability as major*10+minor, [`SM_ANY`] or
/// [`SM_CURRENT_DEVICE`].
pub fn check_support(desc: &Descriptor, sm: i32) -> Result<()> {
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
        // SAFETY: fmha_plan_info is plain data; all-zero is a valid value.
        let mut raw: sys::fmha_plan_info = unsafe { core::mem::zeroed() };
        // SAFETY: valid out pointers, live plan.
        check(unsafe { sys::fmha_plan_info_init(&mut raw, sys::FMHA_PLAN_INFO_VERSION) })?;
        check(unsafe { sys::fmha_plan_get_info(self.raw.as_ptr(), &mut raw) })?;
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
        })
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

// ====================================================================== tensors

/// Device pointers for one run, initialised through `fmha_tensors_init`.
#[derive(Debug, Clone, Copy)]
pub struct Tensors {
    raw: sys::fmha_tensors,
}

impl Tensors {
    /// Q, K, V (read) and O (written) device pointers. LSE is unset.
    pub fn new(q: *const c_void, k: *const c_void, v: *const c_void, o: *mut c_void) -> Result<Tensors> {
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

    /// float32 `[batch, num_q_heads, seqlen_q]` log-sum-exp output, required
    /// when the descriptor has [`Descriptor::write_lse`].
    pub fn lse(mut self, lse: *mut f32) -> Self {
        self.raw.lse = lse;
        self
    }

    /// float32 `[num_q_heads]` sink logits, required when the descriptor
    /// has [`Descriptor::sinks`].
    pub fn sinks(mut self, sinks: *const f32) -> Self {
        self.raw.sinks = sinks;
        self
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
    fn error_display() {
        let e = Error::new(Status::NotSupported, "head_dim 80");
        assert_eq!(e.to_string(), "FMHA_STATUS_NOT_SUPPORTED: head_dim 80");
        let e = Error::new(Status::NoDriver, "");
        assert_eq!(e.to_string(), "FMHA_STATUS_NO_DRIVER");
    }
}
