//! End-to-end tests of the binding on an NVIDIA GPU: each case builds its
//! problem with the binding's API (`Descriptor`, `Plan`, `Tensors`,
//! `MergePlan`, `check_block_table`), runs it on device buffers and checks
//! every output element against a float64 CPU reference computed from the
//! same bf16 inputs.
//!
//! The GPU tests are `#[ignore]`d, so a plain `cargo test` (CI, no GPU) lists
//! them as ignored; `cargo test --test gpu -- --ignored` runs them, and fails
//! them, naming what is missing, where there is no driver or no device. The
//! CUDA driver is reached through dlopen("libcuda.so.1"), so the crate keeps
//! no dependency and this file builds on machines without CUDA.
//!
//! Every run: inputs random from a fresh seed (each failure prints it;
//! `FMHA_TEST_SEED=<seed>` repeats a run), never zero; key and query rows a
//! run must not read hold NaN; outputs are filled with NaN before each of
//! two runs, which must agree bitwise; every device buffer (inputs, outputs,
//! index arrays, workspace) sits between two NaN guard bands that must come
//! back unchanged; every O element and LSE entry of a computed row must be
//! finite and within its tolerance (see "Tolerances"), rows that see no key
//! exactly O = 0 and LSE = -inf (or the head's sink), and output elements
//! outside the computed rows must still hold the NaN fill.

use core::ffi::c_void;
use std::fmt::Display;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use cuda::DeviceBuffer;
use fmha::{
    check_block_table, strides, DType, Descriptor, KernelFamily, Layout, Mask, MergeDescriptor, MergePlan, Plan,
    PlanInfo, Tensors,
};

// ====================================================================== CUDA driver

/// The few CUDA driver calls these tests make, loaded with dlopen.
mod cuda {
    use core::ffi::{c_char, c_int, c_void, CStr};
    use std::sync::OnceLock;

    pub type DevicePtr = u64;
    type CuResult = c_int;
    type Context = *mut c_void;
    type RawStream = *mut c_void;

    const RTLD_NOW: c_int = 2;

    extern "C" {
        fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
        fn dlerror() -> *mut c_char;
    }

    /// Entry points, by the names cuda.h maps its API names to (the `_v2`
    /// ones take 64-bit device pointers and sizes).
    struct Api {
        init: unsafe extern "C" fn(u32) -> CuResult,
        device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
        primary_ctx_retain: unsafe extern "C" fn(*mut Context, c_int) -> CuResult,
        ctx_set_current: unsafe extern "C" fn(Context) -> CuResult,
        mem_alloc: unsafe extern "C" fn(*mut DevicePtr, usize) -> CuResult,
        mem_free: unsafe extern "C" fn(DevicePtr) -> CuResult,
        memcpy_htod: unsafe extern "C" fn(DevicePtr, *const c_void, usize) -> CuResult,
        memcpy_dtoh: unsafe extern "C" fn(*mut c_void, DevicePtr, usize) -> CuResult,
        stream_create: unsafe extern "C" fn(*mut RawStream, u32) -> CuResult,
        stream_synchronize: unsafe extern "C" fn(RawStream) -> CuResult,
        stream_destroy: unsafe extern "C" fn(RawStream) -> CuResult,
        get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    }

    fn last_dl_error() -> String {
        // SAFETY: dlerror returns NULL or a NUL-terminated string.
        let e = unsafe { dlerror() };
        if e.is_null() {
            "no reason given".into()
        } else {
            // SAFETY: non-null, NUL-terminated, valid until the next dl call.
            unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
        }
    }

    /// # Safety
    /// `F` must be a function pointer type with the C signature of `name`.
    unsafe fn symbol<F: Copy>(lib: *mut c_void, name: &CStr) -> Result<F, String> {
        assert_eq!(core::mem::size_of::<F>(), core::mem::size_of::<*mut c_void>());
        // SAFETY: `lib` is a dlopen handle and `name` NUL-terminated.
        let p = unsafe { dlsym(lib, name.as_ptr()) };
        if p.is_null() {
            return Err(format!(
                "libcuda.so.1 lacks {}: {}",
                name.to_string_lossy(),
                last_dl_error()
            ));
        }
        // SAFETY: same size, and the caller vouches for the signature.
        Ok(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) })
    }

    impl Api {
        /// # Safety
        /// `lib` must be a dlopen handle of libcuda.so.1.
        unsafe fn load(lib: *mut c_void) -> Result<Api, String> {
            // SAFETY: each type is the signature cuda.h gives the symbol.
            unsafe {
                Ok(Api {
                    init: symbol(lib, c"cuInit")?,
                    device_get: symbol(lib, c"cuDeviceGet")?,
                    primary_ctx_retain: symbol(lib, c"cuDevicePrimaryCtxRetain")?,
                    ctx_set_current: symbol(lib, c"cuCtxSetCurrent")?,
                    mem_alloc: symbol(lib, c"cuMemAlloc_v2")?,
                    mem_free: symbol(lib, c"cuMemFree_v2")?,
                    memcpy_htod: symbol(lib, c"cuMemcpyHtoD_v2")?,
                    memcpy_dtoh: symbol(lib, c"cuMemcpyDtoH_v2")?,
                    stream_create: symbol(lib, c"cuStreamCreate")?,
                    stream_synchronize: symbol(lib, c"cuStreamSynchronize")?,
                    stream_destroy: symbol(lib, c"cuStreamDestroy_v2")?,
                    get_error_string: symbol(lib, c"cuGetErrorString")?,
                })
            }
        }
    }

    /// The driver and device 0's primary context, retained for the whole
    /// process (never released: the tests share it until exit).
    pub struct Gpu {
        api: Api,
        context: Context,
    }

    // SAFETY: driver entry points and a primary context may be used from any
    // thread; gpu() makes the context current on each thread that asks.
    unsafe impl Send for Gpu {}
    unsafe impl Sync for Gpu {}

    /// The driver, with device 0's primary context current on this thread.
    /// Panics, saying what is missing, without a driver or a device: a GPU
    /// test run on such a machine must fail, not pass.
    pub fn gpu() -> &'static Gpu {
        static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
        let gpu = match GPU.get_or_init(Gpu::open) {
            Ok(gpu) => gpu,
            Err(why) => panic!("{why}"),
        };
        // SAFETY: a context Gpu::open retained and nobody releases.
        gpu.check(unsafe { (gpu.api.ctx_set_current)(gpu.context) }, "cuCtxSetCurrent");
        gpu
    }

    impl Gpu {
        fn open() -> Result<Gpu, String> {
            // SAFETY: a NUL-terminated name.
            let lib = unsafe { dlopen(c"libcuda.so.1".as_ptr(), RTLD_NOW) };
            if lib.is_null() {
                return Err(format!(
                    "no CUDA driver: dlopen(\"libcuda.so.1\") failed ({}). These tests need an NVIDIA GPU \
                     and its driver; without them run plain `cargo test`, which skips them",
                    last_dl_error()
                ));
            }
            // SAFETY: `lib` is libcuda.so.1.
            let api = unsafe { Api::load(lib) }?;
            let mut gpu = Gpu {
                api,
                context: core::ptr::null_mut(),
            };
            let no_device = |e: String| format!("no usable CUDA device: {e}");
            // SAFETY: valid out pointers throughout.
            gpu.result(unsafe { (gpu.api.init)(0) }, "cuInit(0)")
                .map_err(no_device)?;
            let mut device = 0;
            gpu.result(unsafe { (gpu.api.device_get)(&mut device, 0) }, "cuDeviceGet(0)")
                .map_err(no_device)?;
            let mut context = core::ptr::null_mut();
            gpu.result(
                unsafe { (gpu.api.primary_ctx_retain)(&mut context, device) },
                "cuDevicePrimaryCtxRetain(device 0)",
            )
            .map_err(no_device)?;
            gpu.context = context;
            Ok(gpu)
        }

        fn describe(&self, r: CuResult) -> String {
            let mut s: *const c_char = core::ptr::null();
            // SAFETY: valid out pointer; the string is static when returned.
            if unsafe { (self.api.get_error_string)(r, &mut s) } == 0 && !s.is_null() {
                format!("CUresult {r}: {}", unsafe { CStr::from_ptr(s) }.to_string_lossy())
            } else {
                format!("CUresult {r} (cuGetErrorString does not know it)")
            }
        }

        fn result(&self, r: CuResult, call: &str) -> Result<(), String> {
            if r == 0 {
                Ok(())
            } else {
                Err(format!("{call} failed: {}", self.describe(r)))
            }
        }

        fn check(&self, r: CuResult, call: &str) {
            if let Err(e) = self.result(r, call) {
                panic!("{e}");
            }
        }
    }

    /// Plain element types: every bit pattern valid, no padding.
    ///
    /// # Safety
    /// Only for such types.
    pub unsafe trait Element: Copy + Default {}
    // SAFETY: plain numbers.
    unsafe impl Element for u8 {}
    unsafe impl Element for u16 {}
    unsafe impl Element for i32 {}
    unsafe impl Element for f32 {}

    fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
        // SAFETY: Element types have no padding.
        unsafe { core::slice::from_raw_parts(s.as_ptr().cast(), core::mem::size_of_val(s)) }
    }

    /// Bytes of guard band on each side of a buffer; a multiple of 256 so
    /// the payload keeps cuMemAlloc's alignment.
    const GUARD_BYTES: usize = 4096;

    fn repeated(pattern: &[u8], bytes: usize) -> Vec<u8> {
        pattern.iter().copied().cycle().take(bytes).collect()
    }

    /// Device memory between two guard bands. Guards and payload start out
    /// filled with a NaN pattern; check_guards says whether a band changed.
    pub struct DeviceBuffer {
        gpu: &'static Gpu,
        name: String,
        base: DevicePtr,
        payload_bytes: usize,
        guard: Vec<u8>,
    }

    impl DeviceBuffer {
        pub fn new(name: &str, payload_bytes: usize, pattern: &[u8]) -> DeviceBuffer {
            let gpu = gpu();
            let total = payload_bytes + 2 * GUARD_BYTES;
            let mut base = 0;
            // SAFETY: valid out pointer.
            gpu.check(
                unsafe { (gpu.api.mem_alloc)(&mut base, total) },
                &format!("cuMemAlloc_v2({total} B, {name})"),
            );
            let buf = DeviceBuffer {
                gpu,
                name: name.into(),
                base,
                payload_bytes,
                guard: repeated(pattern, GUARD_BYTES),
            };
            buf.write(0, &repeated(pattern, total));
            buf
        }

        pub fn ptr(&self) -> DevicePtr {
            self.base + GUARD_BYTES as u64
        }

        pub fn as_ptr<T>(&self) -> *mut T {
            self.ptr() as usize as *mut T
        }

        fn write(&self, offset: usize, bytes: &[u8]) {
            assert!(offset + bytes.len() <= self.payload_bytes + 2 * GUARD_BYTES);
            // SAFETY: the range lies inside this allocation; copying from
            // pageable memory returns once the source is consumed.
            self.gpu.check(
                unsafe { (self.gpu.api.memcpy_htod)(self.base + offset as u64, bytes.as_ptr().cast(), bytes.len()) },
                &format!("cuMemcpyHtoD_v2 into {}", self.name),
            );
        }

        fn read(&self, offset: usize, bytes: &mut [u8]) {
            assert!(offset + bytes.len() <= self.payload_bytes + 2 * GUARD_BYTES);
            // SAFETY: the range lies inside this allocation.
            self.gpu.check(
                unsafe {
                    (self.gpu.api.memcpy_dtoh)(bytes.as_mut_ptr().cast(), self.base + offset as u64, bytes.len())
                },
                &format!("cuMemcpyDtoH_v2 from {}", self.name),
            );
        }

        /// Copies `host` into the payload, which it must fill exactly.
        pub fn upload<T: Element>(&self, host: &[T]) {
            assert_eq!(
                core::mem::size_of_val(host),
                self.payload_bytes,
                "upload size of {}",
                self.name
            );
            self.write(GUARD_BYTES, as_bytes(host));
        }

        /// Fills the payload with `pattern` repeated.
        pub fn fill(&self, pattern: &[u8]) {
            self.write(GUARD_BYTES, &repeated(pattern, self.payload_bytes));
        }

        pub fn download<T: Element>(&self) -> Vec<T> {
            let mut host = vec![T::default(); self.payload_bytes / core::mem::size_of::<T>()];
            // SAFETY: Element types accept any bytes.
            let bytes = unsafe {
                core::slice::from_raw_parts_mut(host.as_mut_ptr().cast::<u8>(), core::mem::size_of_val(&host[..]))
            };
            self.read(GUARD_BYTES, bytes);
            host
        }

        pub fn check_guards(&self) -> Result<(), String> {
            let mut band = vec![0u8; GUARD_BYTES];
            for (side, offset) in [("before", 0), ("after", GUARD_BYTES + self.payload_bytes)] {
                self.read(offset, &mut band);
                if let Some(at) = band.iter().zip(&self.guard).position(|(a, b)| a != b) {
                    return Err(format!(
                        "{}: the guard band {side} the payload was overwritten (byte {at} of {GUARD_BYTES})",
                        self.name
                    ));
                }
            }
            Ok(())
        }
    }

    impl Drop for DeviceBuffer {
        fn drop(&mut self) {
            // SAFETY: allocated by cuMemAlloc_v2 and freed once.
            let r = unsafe { (self.gpu.api.mem_free)(self.base) };
            if !std::thread::panicking() {
                self.gpu.check(r, &format!("cuMemFree_v2({})", self.name));
            }
        }
    }

    /// A blocking stream of the primary context (ordered after the
    /// synchronous copies, which run on the legacy default stream).
    pub struct Stream {
        gpu: &'static Gpu,
        raw: RawStream,
    }

    impl Stream {
        pub fn new() -> Stream {
            let gpu = gpu();
            let mut raw = core::ptr::null_mut();
            // SAFETY: valid out pointer; flags 0 = CU_STREAM_DEFAULT.
            gpu.check(unsafe { (gpu.api.stream_create)(&mut raw, 0) }, "cuStreamCreate");
            Stream { gpu, raw }
        }

        pub fn raw(&self) -> *mut c_void {
            self.raw
        }

        pub fn synchronize(&self) {
            // SAFETY: a live stream.
            self.gpu.check(
                unsafe { (self.gpu.api.stream_synchronize)(self.raw) },
                "cuStreamSynchronize",
            );
        }
    }

    impl Drop for Stream {
        fn drop(&mut self) {
            // SAFETY: created by cuStreamCreate and destroyed once.
            let r = unsafe { (self.gpu.api.stream_destroy)(self.raw) };
            if !std::thread::panicking() {
                self.gpu.check(r, "cuStreamDestroy_v2");
            }
        }
    }
}

// ====================================================================== seeds, random numbers, bf16

/// splitmix64: small, fast, and plenty for test inputs.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1), never 0, so its logarithm is finite.
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        (-2.0 * self.uniform().ln()).sqrt() * (std::f64::consts::TAU * self.uniform()).cos()
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, (self.next_u64() % (i as u64 + 1)) as usize);
        }
    }
}

/// The run's seed: FMHA_TEST_SEED (decimal or 0x-hex) or a fresh one.
fn base_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| match std::env::var("FMHA_TEST_SEED") {
        Ok(s) if !s.trim().is_empty() => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("FMHA_TEST_SEED={s:?} is not a decimal or 0x-hex u64"))
        }
        _ => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            Rng(nanos ^ (u64::from(std::process::id()) << 32)).next_u64()
        }
    })
}

/// bf16 bits of `x`, rounded to nearest, ties to even; NaN stays a quiet NaN.
fn bf16_from_f32(x: f32) -> u16 {
    let u = x.to_bits();
    if x.is_nan() {
        return (u >> 16) as u16 | 0x0040;
    }
    // Adding 0x7FFF plus the lowest kept bit rounds half to even; a carry
    // into the exponent is the right result (up to infinity).
    ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) as u16
}

fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

fn bf16_to_f64(b: u16) -> f64 {
    f64::from(bf16_to_f32(b))
}

/// A unit-normal bf16 input, never zero.
fn random_bf16(rng: &mut Rng) -> u16 {
    loop {
        let b = bf16_from_f32(rng.normal() as f32);
        if b & 0x7FFF != 0 {
            return b;
        }
    }
}

/// Outputs before each run: a quiet NaN, so an element never written cannot
/// pass for a value.
const POISON_BF16: u16 = 0x7FC0;
/// LSE before each run: a NaN with a payload kernels do not produce.
const POISON_F32: u32 = 0x7FC0_F00D;
/// Guard bands, workspace contents and input rows no run may read: NaN
/// patterns unlike the output poison, so a kernel that reads them yields NaN.
const NAN_BF16: u16 = 0x7FAB;
const NAN_32: u32 = 0x7FC0_BAAD;

fn bf16_buffer(name: &str, host: &[u16]) -> DeviceBuffer {
    let b = DeviceBuffer::new(name, std::mem::size_of_val(host), &NAN_BF16.to_le_bytes());
    b.upload(host);
    b
}

fn i32_buffer(name: &str, host: &[i32]) -> DeviceBuffer {
    let b = DeviceBuffer::new(name, std::mem::size_of_val(host), &NAN_32.to_le_bytes());
    b.upload(host);
    b
}

fn f32_buffer(name: &str, host: &[f32]) -> DeviceBuffer {
    let b = DeviceBuffer::new(name, std::mem::size_of_val(host), &NAN_32.to_le_bytes());
    b.upload(host);
    b
}

fn o_buffer(name: &str, elems: usize) -> DeviceBuffer {
    DeviceBuffer::new(name, elems * 2, &NAN_BF16.to_le_bytes())
}

fn lse_buffer(name: &str, elems: usize) -> DeviceBuffer {
    DeviceBuffer::new(name, elems * 4, &NAN_32.to_le_bytes())
}

// ====================================================================== problems and the reference

/// One sequence's inputs in logical order, as bf16 bits: q [len_q][Hq][D],
/// k and v [len_k][Hkv][D]. Concatenated they are the BSHD and packed
/// (varlen) layouts.
#[derive(Clone)]
struct Sequence {
    len_q: usize,
    len_k: usize,
    q: Vec<u16>,
    k: Vec<u16>,
    v: Vec<u16>,
}

/// An attention problem as fmha.h defines it, sequence by sequence.
#[derive(Clone)]
struct Problem {
    hq: usize,
    hkv: usize,
    d: usize,
    mask: Mask,
    window: (i32, i32),
    /// 0: off.
    softcap: f32,
    /// 0: 1/sqrt(d), the library's default.
    softmax_scale: f32,
    /// One logit per query head.
    sinks: Option<Vec<f32>>,
    seqs: Vec<Sequence>,
}

impl Problem {
    /// Unit-normal bf16 inputs for sequences of (len_q, len_k); no mask.
    fn random(rng: &mut Rng, hq: usize, hkv: usize, d: usize, lens: &[(usize, usize)]) -> Problem {
        let mut tensor = |n: usize| -> Vec<u16> { (0..n).map(|_| random_bf16(rng)).collect() };
        let seqs = lens
            .iter()
            .map(|&(len_q, len_k)| Sequence {
                len_q,
                len_k,
                q: tensor(len_q * hq * d),
                k: tensor(len_k * hkv * d),
                v: tensor(len_k * hkv * d),
            })
            .collect();
        Problem {
            hq,
            hkv,
            d,
            mask: Mask::None,
            window: (-1, -1),
            softcap: 0.0,
            softmax_scale: 0.0,
            sinks: None,
            seqs,
        }
    }

    fn scale(&self) -> f64 {
        if self.softmax_scale != 0.0 {
            f64::from(self.softmax_scale)
        } else {
            1.0 / (self.d as f64).sqrt()
        }
    }

    /// Keys row `i` of a sequence of `len_q` queries and `len_k` keys sees,
    /// as fmha.h defines masks and windows: the diagonal is i under
    /// CAUSAL_TOP_LEFT, else i + len_k - len_q; a causal mask ends the row at
    /// the diagonal, a window keeps [diag - left, diag + right].
    fn visible_keys(&self, len_q: usize, len_k: usize, i: usize) -> Range<usize> {
        let (i, len_q, len_k) = (i as i64, len_q as i64, len_k as i64);
        let diag = if self.mask == Mask::CausalTopLeft {
            i
        } else {
            i + len_k - len_q
        };
        let (left, right) = (i64::from(self.window.0), i64::from(self.window.1));
        let mut last = len_k - 1;
        if self.mask != Mask::None {
            last = last.min(diag);
        } else if right >= 0 {
            last = last.min(diag + right);
        }
        let first = if left >= 0 { (diag - left).max(0) } else { 0 };
        if last < first {
            0..0
        } else {
            first as usize..last as usize + 1
        }
    }

    /// The same queries against keys `keys` of every sequence only.
    fn with_keys(&self, keys: Range<usize>, mask: Mask) -> Problem {
        let row = self.hkv * self.d;
        let mut part = self.clone();
        part.mask = mask;
        for s in &mut part.seqs {
            s.len_k = keys.len();
            s.k = s.k[keys.start * row..keys.end * row].to_vec();
            s.v = s.v[keys.start * row..keys.end * row].to_vec();
        }
        part
    }

    /// A descriptor with this problem's dtype, heads, head dim, mask,
    /// window, softcap, sinks and scale, writing the LSE; the caller sets
    /// the batch, lengths and layout.
    fn descriptor(&self) -> Descriptor {
        let mut d = Descriptor::new()
            .expect("Descriptor::new")
            .dtype(DType::Bf16)
            .heads(self.hq as i64, self.hkv as i64)
            .head_dim(self.d as i64)
            .mask(self.mask)
            .window(self.window.0, self.window.1)
            .softcap(self.softcap)
            .sinks(self.sinks.is_some())
            .write_lse(true);
        if self.softmax_scale != 0.0 {
            d = d.softmax_scale(self.softmax_scale);
        }
        d
    }

    /// Q of every sequence, one after another: BSHD when all have the same
    /// length, packed otherwise.
    fn all_q(&self) -> Vec<u16> {
        self.seqs.iter().flat_map(|s| s.q.iter().copied()).collect()
    }
    fn all_k(&self) -> Vec<u16> {
        self.seqs.iter().flat_map(|s| s.k.iter().copied()).collect()
    }
    fn all_v(&self) -> Vec<u16> {
        self.seqs.iter().flat_map(|s| s.v.iter().copied()).collect()
    }
}

// Tolerances.
//
// The C++ suites compare with a float32 reference that rounds like a bf16
// kernel and allow twice its error. Here each element gets an explicit
// bound instead, built from where a correct bf16 kernel rounds, with
// u = 2^-8 the unit roundoff of bf16:
//  * the probabilities P are rounded to bf16 for P.V, each with relative
//    error at most u, which moves O by at most u sum_j p_j |v_j|; a kernel
//    that divides by the sum of the rounded P moves it by as much again
//    (at most u |O|), so 2u sum_j p_j |v_j| is allowed. The roundings of
//    different keys are independent and add like a random walk, so the
//    sum is capped at 4 sqrt(sum_j p_j^2 v_j^2): exact while up to 16 keys
//    dominate, several standard deviations beyond;
//  * then O is rounded to bf16: half an ulp of a value already off by the
//    above, at most u (|O| + that);
//  * 1e-5 for float32 accumulation and the hardware exp2.
// For unit-scale values this is about 1e-2 (a row of one key: 3u |v|), and
// for long rows far tighter than a fixed 1e-2, which would let the O of a
// 1000-key row (|O| ~ 0.05) be off by 20%. On sm_90 the largest error seen
// over 16 seeds, in rows of 2 to 4 keys, was 0.89 of this bound without the
// doubling, and was reproduced exactly by the arithmetic above.
// Soft-capping runs tanh on the special-function unit (tanh.approx.f32,
// relative error about 2^-11), moving a capped score s by up to 2^-11 |s|:
// allowed for with 2^-10 max|s| on the LSE and twice that times
// sum_j p_j |v_j| on O.
// The LSE is held to 5e-5 (1 + |LSE|), as in the C++ suites (float32
// LSEs there stay within 5.3e-6 (1 + |LSE|)).
// Over a whole output, ||O - ref|| / ||ref|| must stay below 1e-2: bf16
// rounding alone gives about 2e-3, so widespread errors each within their
// bound still fail.
const BF16_UNIT_ROUNDOFF: f64 = 1.0 / 256.0;
const F32_ABS_TOL: f64 = 1e-5;
const TANH_REL_ERR: f64 = 1.0 / 1024.0;
const LSE_REL_TOL: f64 = 5e-5;
const REL_FROBENIUS_LIMIT: f64 = 1e-2;

/// The reference of one (sequence, query head): o and o_tol [len_q][D],
/// lse and lse_tol [len_q]. A row that sees no key has o = 0 and o_tol = 0
/// (it must be exactly 0) and lse = -inf, or the head's sink.
#[derive(Clone, Default)]
struct HeadRef {
    o: Vec<f64>,
    o_tol: Vec<f64>,
    lse: Vec<f64>,
    lse_tol: Vec<f64>,
}

/// refs[sequence][query head].
type Reference = Vec<Vec<HeadRef>>;

/// The bound on one O element's error: `o` the reference, `abs_sum` =
/// sum_j p_j |v_j|, `rms` = sqrt(sum_j p_j^2 v_j^2), `score_err` the bound
/// on each score's error.
fn o_tolerance(o: f64, abs_sum: f64, rms: f64, score_err: f64) -> f64 {
    // Before O's own rounding: P's rounding and the scores' error.
    let before = 2.0 * BF16_UNIT_ROUNDOFF * abs_sum.min(4.0 * rms) + 2.0 * score_err * abs_sum;
    // Then half an ulp of the value rounded, which is already off by `before`.
    before + BF16_UNIT_ROUNDOFF * (o.abs() + before) + F32_ABS_TOL
}

fn reference_head(p: &Problem, s: usize, h: usize) -> HeadRef {
    let seq = &p.seqs[s];
    let d = p.d;
    let hk = h / (p.hq / p.hkv);
    // This head's K and V rows in float64, [len_k][d].
    let rows = |t: &[u16]| -> Vec<f64> {
        let mut out = Vec::with_capacity(seq.len_k * d);
        for j in 0..seq.len_k {
            out.extend(t[(j * p.hkv + hk) * d..][..d].iter().map(|&b| bf16_to_f64(b)));
        }
        out
    };
    let (k, v) = (rows(&seq.k), rows(&seq.v));
    let scale = p.scale();
    let cap = f64::from(p.softcap);
    let sink = p.sinks.as_ref().map(|x| f64::from(x[h]));
    let mut r = HeadRef {
        o: vec![0.0; seq.len_q * d],
        o_tol: vec![0.0; seq.len_q * d],
        lse: vec![0.0; seq.len_q],
        lse_tol: vec![0.0; seq.len_q],
    };
    let mut weight = vec![0.0; seq.len_k];
    let (mut acc, mut abs_sum, mut sq_sum) = (vec![0.0; d], vec![0.0; d], vec![0.0; d]);
    let mut q = vec![0.0; d];
    for i in 0..seq.len_q {
        for (x, &b) in q.iter_mut().zip(&seq.q[(i * p.hq + h) * d..][..d]) {
            *x = bf16_to_f64(b);
        }
        let keys = p.visible_keys(seq.len_q, seq.len_k, i);
        if keys.is_empty() {
            r.lse[i] = sink.unwrap_or(f64::NEG_INFINITY);
            r.lse_tol[i] = sink.map_or(0.0, |x| LSE_REL_TOL * (1.0 + x.abs()));
            continue;
        }
        let mut max = sink.unwrap_or(f64::NEG_INFINITY);
        let mut max_abs_score: f64 = 0.0;
        for j in keys.clone() {
            let kj = &k[j * d..(j + 1) * d];
            let mut dot = 0.0;
            for t in 0..d {
                dot += q[t] * kj[t];
            }
            let mut score = dot * scale;
            if cap > 0.0 {
                score = cap * (score / cap).tanh();
            }
            weight[j] = score;
            max = max.max(score);
            max_abs_score = max_abs_score.max(score.abs());
        }
        let mut denom = sink.map_or(0.0, |x| (x - max).exp());
        for j in keys.clone() {
            weight[j] = (weight[j] - max).exp();
            denom += weight[j];
        }
        acc.fill(0.0);
        abs_sum.fill(0.0);
        sq_sum.fill(0.0);
        for j in keys {
            let w = weight[j] / denom;
            let vj = &v[j * d..(j + 1) * d];
            for t in 0..d {
                let x = w * vj[t];
                acc[t] += x;
                abs_sum[t] += x.abs();
                sq_sum[t] += x * x;
            }
        }
        let lse = max + denom.ln();
        let score_err = if cap > 0.0 { TANH_REL_ERR * max_abs_score } else { 0.0 };
        r.lse[i] = lse;
        r.lse_tol[i] = LSE_REL_TOL * (1.0 + lse.abs()) + score_err;
        for t in 0..d {
            r.o[i * d + t] = acc[t];
            r.o_tol[i * d + t] = o_tolerance(acc[t], abs_sum[t], sq_sum[t].sqrt(), score_err);
        }
    }
    r
}

/// The float64 reference of every (sequence, query head), on all cores.
fn reference(p: &Problem) -> Reference {
    let jobs: Vec<(usize, usize)> = (0..p.seqs.len()).flat_map(|s| (0..p.hq).map(move |h| (s, h))).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(jobs.len())
        .max(1);
    let done: Vec<(usize, usize, HeadRef)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let j = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(s, h)) = jobs.get(j) else { break };
                        out.push((s, h, reference_head(p, s, h)));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a reference thread panicked"))
            .collect()
    });
    let mut refs: Reference = p.seqs.iter().map(|_| vec![HeadRef::default(); p.hq]).collect();
    for (s, h, r) in done {
        refs[s][h] = r;
    }
    refs
}

// ====================================================================== checking outputs

/// Where a run's outputs lie in the downloaded buffers.
struct OutputLayout<'a> {
    /// Index in O of element (sequence, row, head, d = 0); d is contiguous.
    o_at: &'a dyn Fn(usize, usize, usize) -> usize,
    /// Index in the LSE of (sequence, head, row).
    lse_at: &'a dyn Fn(usize, usize, usize) -> usize,
}

/// Dense outputs: O [batch, len_q, hq, d] (BSHD), LSE [batch, hq, len_q].
fn dense_o_at(len_q: usize, hq: usize, d: usize) -> impl Fn(usize, usize, usize) -> usize {
    move |s, i, h| ((s * len_q + i) * hq + h) * d
}
fn dense_lse_at(len_q: usize, hq: usize) -> impl Fn(usize, usize, usize) -> usize {
    move |s, h, i| (s * hq + h) * len_q + i
}

/// How one run compares with the reference.
#[derive(Default)]
struct Verdict {
    elements: usize,
    max_abs_err: f64,
    err_sq: f64,
    ref_sq: f64,
    worst_ratio: f64,
    worst_at: String,
    max_lse_err: f64,
    no_key_rows: usize,
    failures: Vec<String>,
    failure_count: usize,
}

impl Verdict {
    fn fail(&mut self, what: String) {
        self.failure_count += 1;
        if self.failures.len() < 12 {
            self.failures.push(what);
        }
    }

    fn rel_frobenius(&self) -> f64 {
        if self.ref_sq > 0.0 {
            (self.err_sq / self.ref_sq).sqrt()
        } else {
            self.err_sq.sqrt()
        }
    }
}

/// `err <= tol`, false when either is NaN.
fn within(err: f64, tol: f64) -> bool {
    err <= tol
}

fn compare(p: &Problem, refs: &Reference, o: &[u16], lse: &[f32], at: &OutputLayout) -> Verdict {
    let mut v = Verdict::default();
    let d = p.d;
    let mut o_checked = vec![false; o.len()];
    let mut lse_checked = vec![false; lse.len()];
    for (s, seq) in p.seqs.iter().enumerate() {
        for i in 0..seq.len_q {
            let sees_no_key = p.visible_keys(seq.len_q, seq.len_k, i).is_empty();
            for (h, r) in refs[s].iter().enumerate() {
                let place = |t: Option<usize>| match t {
                    Some(t) => format!("sequence {s}, row {i}, head {h}, d {t}"),
                    None => format!("sequence {s}, row {i}, head {h}"),
                };
                v.no_key_rows += usize::from(sees_no_key);
                let base = (at.o_at)(s, i, h);
                for t in 0..d {
                    o_checked[base + t] = true;
                    v.elements += 1;
                    let bits = o[base + t];
                    let got = bf16_to_f64(bits);
                    let (want, tol) = (r.o[i * d + t], r.o_tol[i * d + t]);
                    if !got.is_finite() {
                        let never = if bits == POISON_BF16 {
                            " (the NaN fill: never written?)"
                        } else {
                            ""
                        };
                        v.fail(format!(
                            "O is not finite at {}: bits {bits:#06x}{never}",
                            place(Some(t))
                        ));
                        continue;
                    }
                    if sees_no_key && bits & 0x7FFF != 0 {
                        v.fail(format!(
                            "O = {got} at {}, a row that sees no key: must be 0",
                            place(Some(t))
                        ));
                        continue;
                    }
                    let err = (got - want).abs();
                    v.max_abs_err = v.max_abs_err.max(err);
                    v.err_sq += err * err;
                    v.ref_sq += want * want;
                    if tol > 0.0 && err / tol > v.worst_ratio {
                        v.worst_ratio = err / tol;
                        v.worst_at = place(Some(t));
                    }
                    if !within(err, tol) {
                        v.fail(format!(
                            "O = {got} at {}, reference {want:.6}: error {err:.3e} > tolerance {tol:.3e}",
                            place(Some(t))
                        ));
                    }
                }
                let li = (at.lse_at)(s, h, i);
                lse_checked[li] = true;
                let (got, want, tol) = (lse[li], r.lse[i], r.lse_tol[i]);
                if want == f64::NEG_INFINITY {
                    if got != f32::NEG_INFINITY {
                        v.fail(format!(
                            "LSE = {got} at {}, a row that sees no key: must be -inf",
                            place(None)
                        ));
                    }
                } else if !got.is_finite() {
                    let never = if got.to_bits() == POISON_F32 {
                        " (the NaN fill: never written?)"
                    } else {
                        ""
                    };
                    v.fail(format!("LSE = {got} at {}{never}, reference {want:.6}", place(None)));
                } else {
                    let err = (f64::from(got) - want).abs();
                    v.max_lse_err = v.max_lse_err.max(err);
                    if !within(err, tol) {
                        v.fail(format!(
                            "LSE = {got} at {}, reference {want:.6}: error {err:.3e} > tolerance {tol:.3e}",
                            place(None)
                        ));
                    }
                }
            }
        }
    }
    let o_stray = (0..o.len())
        .filter(|&x| !o_checked[x] && o[x] != POISON_BF16)
        .collect::<Vec<_>>();
    if let Some(first) = o_stray.first() {
        v.fail(format!(
            "O written outside the computed rows: {} elements, the first at index {first}",
            o_stray.len()
        ));
    }
    let lse_stray = (0..lse.len())
        .filter(|&x| !lse_checked[x] && lse[x].to_bits() != POISON_F32)
        .collect::<Vec<_>>();
    if let Some(first) = lse_stray.first() {
        v.fail(format!(
            "LSE written outside the computed rows: {} entries, the first at index {first}",
            lse_stray.len()
        ));
    }
    if !within(v.rel_frobenius(), REL_FROBENIUS_LIMIT) {
        v.fail(format!(
            "||O - ref|| / ||ref|| = {:.3e} > {REL_FROBENIUS_LIMIT:e}",
            v.rel_frobenius()
        ));
    }
    v
}

// ====================================================================== running

/// A test's name and seed, for its messages.
struct Case {
    name: &'static str,
    seed: u64,
}

impl Case {
    /// Opens the GPU first, so a machine without one fails here with the
    /// driver's story rather than later with a plan's NO_DRIVER.
    fn on_gpu(name: &'static str) -> Case {
        cuda::gpu();
        let base = base_seed();
        // Each test's inputs depend on the run's seed and its name only, not
        // on which tests run or in what order.
        let seed = name.bytes().fold(base, |h, b| Rng(h ^ u64::from(b)).next_u64());
        println!("{name}: inputs from FMHA_TEST_SEED={base:#x}");
        Case { name, seed }
    }

    fn rng(&self) -> Rng {
        Rng(self.seed)
    }

    fn fail(&self, what: impl Display) -> ! {
        panic!(
            "{}: {what}\n(inputs from FMHA_TEST_SEED={:#x}; set it to repeat this run)",
            self.name,
            base_seed()
        )
    }

    fn ok<T>(&self, r: fmha::Result<T>, call: &str) -> T {
        r.unwrap_or_else(|e| self.fail(format_args!("{call}: {e}")))
    }

    /// Prints the verdict and fails the test on any defect.
    fn judge(&self, label: &str, kernel: &str, v: &Verdict) {
        let line = format!(
            "{label} [{kernel}]: {} elements, max |err| {:.3e}, ||err||/||ref|| {:.3e}, worst err/tol {:.3} ({}), \
             LSE max |err| {:.3e}, {} rows see no key",
            v.elements,
            v.max_abs_err,
            v.rel_frobenius(),
            v.worst_ratio,
            v.worst_at,
            v.max_lse_err,
            v.no_key_rows
        );
        println!("{}: {line}", self.name);
        if v.failure_count > 0 {
            self.fail(format_args!(
                "{line}\n{} checks failed; the first:\n  {}",
                v.failure_count,
                v.failures.join("\n  ")
            ));
        }
    }
}

/// Runs `launch` twice on `stream`, O and LSE filled with NaN before each
/// run; both runs must agree bitwise and every buffer in `guarded` keep its
/// guard bands. Returns the first run's O and LSE.
fn run_twice(
    case: &Case,
    label: &str,
    o: &DeviceBuffer,
    lse: &DeviceBuffer,
    guarded: &[&DeviceBuffer],
    stream: &cuda::Stream,
    mut launch: impl FnMut() -> fmha::Result<()>,
) -> (Vec<u16>, Vec<f32>) {
    let mut runs = Vec::new();
    for _ in 0..2 {
        o.fill(&POISON_BF16.to_le_bytes());
        lse.fill(&POISON_F32.to_le_bytes());
        case.ok(launch(), &format!("{label}: run"));
        stream.synchronize();
        runs.push((o.download::<u16>(), lse.download::<f32>()));
    }
    let (second_o, second_lse) = runs.pop().expect("two runs");
    let (first_o, first_lse) = runs.pop().expect("two runs");
    if let Some(x) = (0..first_o.len()).find(|&x| first_o[x] != second_o[x]) {
        case.fail(format_args!(
            "{label}: two runs differ in O at index {x}: {:#06x} then {:#06x}",
            first_o[x], second_o[x]
        ));
    }
    if let Some(x) = (0..first_lse.len()).find(|&x| first_lse[x].to_bits() != second_lse[x].to_bits()) {
        case.fail(format_args!(
            "{label}: two runs differ in the LSE at index {x}: {} then {}",
            first_lse[x], second_lse[x]
        ));
    }
    for b in guarded.iter().chain([&o, &lse]) {
        if let Err(e) = b.check_guards() {
            case.fail(format_args!("{label}: {e}"));
        }
    }
    (first_o, first_lse)
}

/// Creates a plan for `desc`, gives it a workspace of the size it asks for
/// (guard-banded, NaN-filled before each run) and runs it twice (run_twice).
#[allow(clippy::too_many_arguments)]
fn run_plan(
    case: &Case,
    label: &str,
    desc: &Descriptor,
    tensors: &Tensors,
    o: &DeviceBuffer,
    lse: &DeviceBuffer,
    inputs: &[&DeviceBuffer],
    stream: &cuda::Stream,
) -> (Vec<u16>, Vec<f32>, PlanInfo) {
    let plan = case.ok(Plan::new(desc), &format!("{label}: Plan::new"));
    let info = case.ok(plan.info(), "Plan::info");
    let ws_bytes = case.ok(plan.workspace_size(), "Plan::workspace_size");
    if info.workspace_bytes != ws_bytes as u64 {
        case.fail(format_args!(
            "{label}: PlanInfo::workspace_bytes {} != Plan::workspace_size {ws_bytes}",
            info.workspace_bytes
        ));
    }
    let workspace = (ws_bytes > 0).then(|| DeviceBuffer::new("workspace", ws_bytes, &NAN_BF16.to_le_bytes()));
    let ws_ptr = workspace
        .as_ref()
        .map_or(core::ptr::null_mut(), |w| w.as_ptr::<c_void>());
    let mut guarded = inputs.to_vec();
    guarded.extend(workspace.as_ref());
    let (o_host, lse_host) = run_twice(case, label, o, lse, &guarded, stream, || {
        // Garbage again before each run: a kernel must not rely on what the
        // previous run left in its workspace.
        if let Some(w) = &workspace {
            w.fill(&NAN_BF16.to_le_bytes());
        }
        // SAFETY: every pointer in `tensors` is a buffer of this context
        // sized for `desc` (both built from the same shapes), 256-byte
        // aligned; the workspace holds what the plan asked for; run_twice
        // synchronizes the stream before the buffers are read or freed.
        unsafe { plan.run(tensors, ws_ptr, ws_bytes, stream.raw()) }
    });
    (o_host, lse_host, info)
}

/// FMHA_FORCE_KERNEL (other than auto) replaces AUTO's choice, so the checks
/// of which family AUTO picks do not apply under it.
fn auto_is_overridden() -> bool {
    std::env::var("FMHA_FORCE_KERNEL").map_or(false, |v| !v.is_empty() && v != "auto")
}

fn kernel_label(info: &PlanInfo) -> String {
    format!(
        "{}, {} split(s), sm_{}",
        info.kernel_name, info.num_splits, info.device_sm
    )
}

/// Uploads a problem whose sequences all have the same lengths as dense BSHD
/// tensors, runs `desc` on it and checks the outputs. Returns the plan's info.
fn run_dense(case: &Case, label: &str, p: &Problem, desc: &Descriptor) -> PlanInfo {
    let (len_q, len_k) = (p.seqs[0].len_q, p.seqs[0].len_k);
    assert!(
        p.seqs.iter().all(|s| (s.len_q, s.len_k) == (len_q, len_k)),
        "dense problems have one shape"
    );
    let refs = reference(p);
    let stream = cuda::Stream::new();
    let (q, k, v) = (
        bf16_buffer("Q", &p.all_q()),
        bf16_buffer("K", &p.all_k()),
        bf16_buffer("V", &p.all_v()),
    );
    let sinks = p.sinks.as_ref().map(|s| f32_buffer("sinks", s));
    let batch = p.seqs.len();
    let o = o_buffer("O", batch * len_q * p.hq * p.d);
    let lse = lse_buffer("LSE", batch * p.hq * len_q);
    let mut tensors = case
        .ok(
            Tensors::new(q.as_ptr(), k.as_ptr(), v.as_ptr(), o.as_ptr()),
            "Tensors::new",
        )
        .lse(lse.as_ptr());
    if let Some(s) = &sinks {
        tensors = tensors.sinks(s.as_ptr());
    }
    let mut inputs = vec![&q, &k, &v];
    inputs.extend(sinks.as_ref());
    let (o_host, lse_host, info) = run_plan(case, label, desc, &tensors, &o, &lse, &inputs, &stream);
    let layout = OutputLayout {
        o_at: &dense_o_at(len_q, p.hq, p.d),
        lse_at: &dense_lse_at(len_q, p.hq),
    };
    case.judge(
        label,
        &kernel_label(&info),
        &compare(p, &refs, &o_host, &lse_host, &layout),
    );
    info
}

// ====================================================================== the GPU cases

#[test]
#[ignore = "needs an NVIDIA GPU and libcuda.so.1: cargo test -- --ignored"]
fn dense_prefill_gqa_causal() {
    let case = Case::on_gpu("dense_prefill_gqa_causal");
    // 300 rows: not a multiple of any tile, so every kernel has a ragged edge.
    let (batch, hq, hkv, s, d) = (2, 8, 2, 300, 128);
    let mut p = Problem::random(&mut case.rng(), hq, hkv, d, &vec![(s, s); batch]);
    p.mask = Mask::CausalBottomRight;
    let desc = p
        .descriptor()
        .batch(batch as i64)
        .seqlens(s as i64, s as i64)
        .contiguous(Layout::Bshd);
    let desc = case.ok(desc, "contiguous");
    run_dense(&case, "bf16 hd128 b2 Hq8/Hkv2 s300 causal BSHD", &p, &desc);
}

/// One decode step of `t` query tokens per sequence over a paged cache of
/// shuffled 16-row pages, lengths from seqused_k, with num_splits 1, AUTO
/// and 3.
fn paged_decode(case: &Case, rng: &mut Rng, t: usize) {
    let (hq, hkv, d, page) = (32, 8, 128, 16);
    // An empty sequence, one key, one key past a page, many pages.
    let lens = [0usize, 1, 17, 1000];
    let max_k = *lens.iter().max().unwrap();
    let batch = lens.len();
    let mut p = Problem::random(rng, hq, hkv, d, &lens.map(|k| (t, k)));
    p.mask = Mask::CausalBottomRight;

    // Each sequence's pages at random places in the pool, a few pages no
    // sequence uses, and a spare column; entries past a sequence's pages are
    // out of range, as they must never be read.
    let max_pages = max_k.div_ceil(page) + 1;
    let used: Vec<usize> = lens.iter().map(|k| k.div_ceil(page)).collect();
    let num_pages = used.iter().sum::<usize>() + 4;
    let mut pool_order: Vec<usize> = (0..num_pages).collect();
    rng.shuffle(&mut pool_order);
    let junk = [-1, num_pages as i32, i32::MAX, i32::MIN, -77];
    let mut table = vec![0i32; batch * max_pages];
    let mut next = pool_order.iter();
    for b in 0..batch {
        for c in 0..max_pages {
            table[b * max_pages + c] = if c < used[b] {
                *next.next().unwrap() as i32
            } else {
                junk[(b + c) % junk.len()]
            };
        }
    }
    // The pool, [num_pages][page][hkv][d]: NaN except the rows in use.
    let row = hkv * d;
    let (mut k_pool, mut v_pool) = (
        vec![NAN_BF16; num_pages * page * row],
        vec![NAN_BF16; num_pages * page * row],
    );
    for (b, seq) in p.seqs.iter().enumerate() {
        for j in 0..seq.len_k {
            let at = (table[b * max_pages + j / page] as usize * page + j % page) * row;
            k_pool[at..at + row].copy_from_slice(&seq.k[j * row..(j + 1) * row]);
            v_pool[at..at + row].copy_from_slice(&seq.v[j * row..(j + 1) * row]);
        }
    }
    let lens_i32: Vec<i32> = lens.iter().map(|&k| k as i32).collect();

    let refs = reference(&p);
    let stream = cuda::Stream::new();
    let q = bf16_buffer("Q", &p.all_q());
    let (k, v) = (bf16_buffer("K pages", &k_pool), bf16_buffer("V pages", &v_pool));
    let table_dev = i32_buffer("block_table", &table);
    let seqused = i32_buffer("seqused_k", &lens_i32);
    let o = o_buffer("O", batch * t * hq * d);
    let lse = lse_buffer("LSE", batch * hq * t);
    let tensors = case
        .ok(
            Tensors::new(q.as_ptr(), k.as_ptr(), v.as_ptr(), o.as_ptr()),
            "Tensors::new",
        )
        .lse(lse.as_ptr())
        .block_table(table_dev.as_ptr())
        .seqused_k(seqused.as_ptr());
    let layout = OutputLayout {
        o_at: &dense_o_at(t, hq, d),
        lse_at: &dense_lse_at(t, hq),
    };

    for splits in [1, 0, 3] {
        let label = format!("decode T={t} b4 lens {lens:?} Hq32/Hkv8 hd128 paged16 num_splits={splits}");
        let desc = p
            .descriptor()
            .batch(batch as i64)
            .seqlens(t as i64, max_k as i64)
            .paged_kv(num_pages as i64, page as i32, max_pages as i64)
            .seqused_k(true)
            .num_splits(splits)
            .contiguous(Layout::Bshd);
        let desc = case.ok(desc, "contiguous");
        case.ok(check_block_table(&desc, &table, Some(&lens_i32)), "check_block_table");
        let inputs = [&q, &k, &v, &table_dev, &seqused];
        let (o_host, lse_host, info) = run_plan(case, &label, &desc, &tensors, &o, &lse, &inputs, &stream);
        // fmha.h: 1 is no split and 2..128 exactly that many; AUTO answers a
        // forced split with the decode (or portable) kernel, not Hopper's.
        if splits >= 1 && info.num_splits != splits {
            case.fail(format_args!("{label}: the plan splits {} ways", info.num_splits));
        }
        if splits >= 2 && !auto_is_overridden() && info.kernel_family() == Some(KernelFamily::Hopper) {
            case.fail(format_args!(
                "{label}: AUTO chose the Hopper kernel for num_splits >= 2"
            ));
        }
        case.judge(
            &label,
            &kernel_label(&info),
            &compare(&p, &refs, &o_host, &lse_host, &layout),
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU and libcuda.so.1: cargo test -- --ignored"]
fn paged_decode_splits_agree() {
    let case = Case::on_gpu("paged_decode_splits_agree");
    let mut rng = case.rng();
    for t in [1, 4] {
        paged_decode(&case, &mut rng, t);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU and libcuda.so.1: cargo test -- --ignored"]
fn varlen_prefill_causal() {
    let case = Case::on_gpu("varlen_prefill_causal");
    let (hq, hkv, d) = (8, 2, 64);
    let lens = [0usize, 1, 2, 17, 300];
    let mut p = Problem::random(&mut case.rng(), hq, hkv, d, &lens.map(|n| (n, n)));
    p.mask = Mask::CausalBottomRight;
    let mut cu = vec![0i32];
    for n in lens {
        cu.push(cu.last().unwrap() + n as i32);
    }
    let total = *cu.last().unwrap() as usize;
    // total_q / total_k are capacities: rows past the last sequence must be
    // neither read (they hold NaN) nor written.
    let capacity = total + 3;
    let padded = |mut rows: Vec<u16>, width: usize| {
        rows.resize(capacity * width, NAN_BF16);
        rows
    };
    let q = bf16_buffer("Q", &padded(p.all_q(), hq * d));
    let k = bf16_buffer("K", &padded(p.all_k(), hkv * d));
    let v = bf16_buffer("V", &padded(p.all_v(), hkv * d));
    // Self-attention: one offsets array serves queries and keys.
    let cu_dev = i32_buffer("cu_seqlens", &cu);
    let o = o_buffer("O", capacity * hq * d);
    let lse = lse_buffer("LSE", hq * capacity);
    let max_len = *lens.iter().max().unwrap() as i64;
    let desc = p
        .descriptor()
        .batch(lens.len() as i64)
        .seqlens(max_len, max_len)
        .varlen_q(capacity as i64)
        .varlen_k(capacity as i64)
        .contiguous(Layout::Bshd);
    let desc = case.ok(desc, "contiguous");
    let tensors = case
        .ok(
            Tensors::new(q.as_ptr(), k.as_ptr(), v.as_ptr(), o.as_ptr()),
            "Tensors::new",
        )
        .lse(lse.as_ptr())
        .cu_seqlens_q(cu_dev.as_ptr())
        .cu_seqlens_k(cu_dev.as_ptr());
    let refs = reference(&p);
    let stream = cuda::Stream::new();
    let label = format!("varlen lens {lens:?} (+3 spare rows) Hq8/Hkv2 hd64 causal");
    let (o_host, lse_host, info) = run_plan(
        &case,
        &label,
        &desc,
        &tensors,
        &o,
        &lse,
        &[&q, &k, &v, &cu_dev],
        &stream,
    );
    // Packed outputs: O [capacity, hq, d], LSE [hq, capacity].
    let o_at = |s: usize, i: usize, h: usize| ((cu[s] as usize + i) * hq + h) * d;
    let lse_at = |s: usize, h: usize, i: usize| h * capacity + cu[s] as usize + i;
    let layout = OutputLayout {
        o_at: &o_at,
        lse_at: &lse_at,
    };
    case.judge(
        &label,
        &kernel_label(&info),
        &compare(&p, &refs, &o_host, &lse_host, &layout),
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU and libcuda.so.1: cargo test -- --ignored"]
fn window_softcap_sinks() {
    let case = Case::on_gpu("window_softcap_sinks");
    let mut rng = case.rng();
    let d = 128;
    // A scale of 0.25 (scores ~ N(0, 2.8^2)) with a cap of 10 makes the cap bite.
    let features = |p: &mut Problem, rng: &mut Rng, window: (i32, i32)| {
        p.window = window;
        p.softcap = 10.0;
        p.softmax_scale = 0.25;
        p.sinks = Some((0..p.hq).map(|_| (2.0 * rng.normal()) as f32).collect());
    };

    // Local causal attention: 48 keys back from the diagonal.
    let mut p = Problem::random(&mut rng, 8, 2, d, &[(200, 200); 2]);
    p.mask = Mask::CausalBottomRight;
    features(&mut p, &mut rng, (48, -1));
    let desc = case.ok(
        p.descriptor().batch(2).seqlens(200, 200).contiguous(Layout::Bshd),
        "contiguous",
    );
    run_dense(
        &case,
        "causal window (48, -1) softcap 10 scale 0.25 sinks, b2 Hq8/Hkv2 s200 hd128",
        &p,
        &desc,
    );

    // A two-sided window and more queries than keys: the diagonal is i - 64,
    // so rows 0..48 see no key (O = 0, LSE = the sink).
    let mut p = Problem::random(&mut rng, 4, 4, d, &[(160, 96)]);
    features(&mut p, &mut rng, (32, 16));
    let desc = case.ok(
        p.descriptor().batch(1).seqlens(160, 96).contiguous(Layout::Bshd),
        "contiguous",
    );
    run_dense(
        &case,
        "window (32, 16) softcap 10 scale 0.25 sinks, b1 Hq4/Hkv4 sq160 sk96 hd128",
        &p,
        &desc,
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU and libcuda.so.1: cargo test -- --ignored"]
fn merge_of_two_key_ranges() {
    let case = Case::on_gpu("merge_of_two_key_ranges");
    let (batch, hq, hkv, s, d) = (2, 8, 2, 300, 128);
    // Not a tile boundary.
    let split = 137;
    let mut full = Problem::random(&mut case.rng(), hq, hkv, d, &vec![(s, s); batch]);
    full.mask = Mask::CausalTopLeft;
    // Causal over all keys is the union of: keys [0, split) with the top-left
    // diagonal (j <= i), and keys [split, s) with the bottom-right one
    // (split + j <= i), where rows before `split` see no key (LSE -inf, which
    // the merge must ignore).
    let parts = [
        full.with_keys(0..split, Mask::CausalTopLeft),
        full.with_keys(split..s, Mask::CausalBottomRight),
    ];
    let stream = cuda::Stream::new();
    let (q, k, v) = (
        bf16_buffer("Q", &full.all_q()),
        bf16_buffer("K", &full.all_k()),
        bf16_buffer("V", &full.all_v()),
    );
    // Both parts read views of the same K and V.
    let kv_strides = case.ok(strides(Layout::Bshd, s as i64, hkv as i64, d as i64), "strides");
    let o_elems = batch * s * hq * d;
    let o_at = dense_o_at(s, hq, d);
    let lse_at = dense_lse_at(s, hq);
    let layout = OutputLayout {
        o_at: &o_at,
        lse_at: &lse_at,
    };
    let mut part_outputs = Vec::new();
    let mut part_refs = Vec::new();
    for (n, (part, first_key)) in parts.iter().zip([0, split]).enumerate() {
        let label = format!(
            "part {n}: keys {first_key}..{} of b2 Hq8/Hkv2 s300 hd128, {:?}",
            first_key + part.seqs[0].len_k,
            part.mask
        );
        let desc = part
            .descriptor()
            .batch(batch as i64)
            .seqlens(s as i64, part.seqs[0].len_k as i64)
            .contiguous(Layout::Bshd);
        let desc = case.ok(desc, "contiguous").k_strides(kv_strides).v_strides(kv_strides);
        let offset = (first_key * hkv * d * 2) as u64;
        let (o, lse) = (
            o_buffer(&format!("O part {n}"), o_elems),
            lse_buffer(&format!("LSE part {n}"), batch * hq * s),
        );
        let tensors = Tensors::new(
            q.as_ptr(),
            (k.ptr() + offset) as usize as *const c_void,
            (v.ptr() + offset) as usize as *const c_void,
            o.as_ptr(),
        );
        let tensors = case.ok(tensors, "Tensors::new").lse(lse.as_ptr());
        let (o_host, lse_host, info) = run_plan(&case, &label, &desc, &tensors, &o, &lse, &[&q, &k, &v], &stream);
        let refs = reference(part);
        case.judge(
            &label,
            &kernel_label(&info),
            &compare(part, &refs, &o_host, &lse_host, &layout),
        );
        part_outputs.push((o, lse));
        part_refs.push(refs);
    }

    let desc = MergeDescriptor::new().map(|m| {
        m.dtype(DType::Bf16)
            .shape(batch as i64, s as i64, hq as i64, d as i64)
            .num_parts(2)
            .write_lse(true)
    });
    let desc = case.ok(
        case.ok(desc, "MergeDescriptor::new").contiguous(Layout::Bshd),
        "contiguous",
    );
    let merge = case.ok(MergePlan::new(&desc), "MergePlan::new");
    let info = case.ok(merge.info(), "MergePlan::info");
    if info.num_splits != 2 {
        case.fail(format_args!(
            "a merge plan of 2 parts reports num_splits {}",
            info.num_splits
        ));
    }
    let (o, lse) = (o_buffer("merged O", o_elems), lse_buffer("merged LSE", batch * hq * s));
    let o_parts: Vec<*const c_void> = part_outputs
        .iter()
        .map(|(o, _)| o.as_ptr::<c_void>().cast_const())
        .collect();
    let lse_parts: Vec<*const f32> = part_outputs
        .iter()
        .map(|(_, l)| l.as_ptr::<f32>().cast_const())
        .collect();
    let mut guarded = vec![&q, &k, &v];
    guarded.extend(part_outputs.iter().flat_map(|(o, l)| [o, l]));
    let label = "merge of the two parts";
    let (o_host, lse_host) = run_twice(&case, label, &o, &lse, &guarded, &stream, || {
        // SAFETY: the parts and outputs are buffers of this context of the
        // merge descriptor's shape; run_twice synchronizes before reading.
        unsafe { merge.run(&o_parts, &lse_parts, o.as_ptr(), lse.as_ptr(), stream.raw()) }
    });

    // The merged O is checked against the reference over all keys, with room
    // for the parts' own rounding to bf16: each part's O enters with weight
    // w = exp(LSE_part - LSE), so 2^-7 sum_p w_p |O_p| (2x the rounding)
    // is added; the LSE takes the parts' LSE error on top of its own.
    let mut refs = reference(&full);
    for (sq, seq_refs) in refs.iter_mut().enumerate() {
        for (h, r) in seq_refs.iter_mut().enumerate() {
            for i in 0..s {
                for part in &part_refs {
                    let pr = &part[sq][h];
                    let w = (pr.lse[i] - r.lse[i]).exp();
                    if w > 0.0 {
                        for t in 0..d {
                            r.o_tol[i * d + t] += 2.0 * BF16_UNIT_ROUNDOFF * w * pr.o[i * d + t].abs();
                        }
                    }
                    r.lse_tol[i] += pr.lse_tol[i];
                }
            }
        }
    }
    case.judge(
        label,
        &info.kernel_name,
        &compare(&full, &refs, &o_host, &lse_host, &layout),
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU and libcuda.so.1: cargo test -- --ignored"]
fn hd512_mqa_decode() {
    let case = Case::on_gpu("hd512_mqa_decode");
    let (batch, hq, hkv, d, s) = (2, 16, 1, 512, 1000);
    let mut p = Problem::random(&mut case.rng(), hq, hkv, d, &vec![(1, s); batch]);
    p.mask = Mask::CausalBottomRight;
    let desc = case.ok(
        p.descriptor()
            .batch(batch as i64)
            .seqlens(1, s as i64)
            .contiguous(Layout::Bshd),
        "contiguous",
    );
    let info = run_dense(
        &case,
        "decode T=1 b2 Hq16/Hkv1 (MQA) hd512 s1000, contiguous cache",
        &p,
        &desc,
    );
    // fmha.h: the portable kernel has no head_dim 512.
    if !auto_is_overridden() && info.kernel_family() == Some(KernelFamily::Portable) {
        case.fail("AUTO chose the portable kernel for head_dim 512");
    }
}

// ====================================================================== the helpers themselves (no GPU)

#[test]
fn bf16_rounds_to_nearest_even() {
    let f = |bits: u32| f32::from_bits(bits);
    assert_eq!(bf16_from_f32(1.0), 0x3F80);
    assert_eq!(bf16_from_f32(-2.5), 0xC020);
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1.
    assert_eq!(bf16_from_f32(f(0x3F80_8000)), 0x3F80);
    // 1 + 3 * 2^-8: halfway again, now the even neighbour is above.
    assert_eq!(bf16_from_f32(f(0x3F81_8000)), 0x3F82);
    assert_eq!(bf16_from_f32(f(0x3F80_8001)), 0x3F81);
    assert_eq!(bf16_from_f32(f(0x3F80_7FFF)), 0x3F80);
    // The carry reaches the exponent, and past the largest bf16, infinity.
    assert_eq!(bf16_from_f32(f(0x3FFF_FFFF)), 0x4000);
    assert_eq!(bf16_from_f32(f32::MAX), 0x7F80);
    assert_eq!(bf16_from_f32(f(0x7F7F_0000)), 0x7F7F);
    assert_eq!(bf16_from_f32(f32::NEG_INFINITY), 0xFF80);
    // Subnormals round like everything else.
    assert_eq!(bf16_from_f32(f(0x0000_8000)), 0x0000);
    assert_eq!(bf16_from_f32(f(0x0001_8000)), 0x0002);
    let nan = bf16_from_f32(f32::NAN);
    assert!(bf16_to_f32(nan).is_nan() && nan & 0x0040 != 0);
    // Every bf16 value survives the round trip.
    for b in 0..=u16::MAX {
        if !bf16_to_f32(b).is_nan() {
            assert_eq!(bf16_from_f32(bf16_to_f32(b)), b, "{b:#06x}");
        }
    }
    for b in [POISON_BF16, NAN_BF16] {
        assert!(bf16_to_f32(b).is_nan());
    }
    assert!(f32::from_bits(POISON_F32).is_nan() && f32::from_bits(NAN_32).is_nan());
}

#[test]
fn random_inputs_repeat_from_a_seed_and_are_unit_normal() {
    let draw = |seed| {
        let mut rng = Rng(seed);
        (0..20000).map(|_| random_bf16(&mut rng)).collect::<Vec<_>>()
    };
    let a = draw(7);
    assert_eq!(a, draw(7));
    assert_ne!(a, draw(8));
    assert!(a.iter().all(|&b| b & 0x7FFF != 0 && bf16_to_f32(b).is_finite()));
    let n = a.len() as f64;
    let mean = a.iter().map(|&b| bf16_to_f64(b)).sum::<f64>() / n;
    let var = a.iter().map(|&b| (bf16_to_f64(b) - mean).powi(2)).sum::<f64>() / n;
    assert!(
        mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
        "mean {mean}, variance {var}"
    );
}

#[test]
fn visible_keys_follow_the_header() {
    let mut p = Problem::random(&mut Rng(1), 1, 1, 8, &[]);
    p.mask = Mask::CausalTopLeft;
    assert_eq!(p.visible_keys(5, 9, 2), 0..3);
    p.mask = Mask::CausalBottomRight;
    assert_eq!(p.visible_keys(5, 9, 2), 0..7);
    // Decode of 4 tokens over 1 key: only the last row sees it.
    assert_eq!(p.visible_keys(4, 1, 2), 0..0);
    assert_eq!(p.visible_keys(4, 1, 3), 0..1);
    assert_eq!(p.visible_keys(4, 0, 3), 0..0);
    p.window = (48, -1);
    assert_eq!(p.visible_keys(200, 200, 100), 52..101);
    assert_eq!(p.visible_keys(200, 200, 10), 0..11);
    // window_test's second problem: diagonal i - 64, keys [i - 96, i - 48].
    p.mask = Mask::None;
    p.window = (32, 16);
    assert_eq!(p.visible_keys(160, 96, 47), 0..0);
    assert_eq!(p.visible_keys(160, 96, 48), 0..1);
    assert_eq!(p.visible_keys(160, 96, 159), 63..96);
}

#[test]
fn reference_matches_closed_forms() {
    let bf = |x: f32| bf16_from_f32(x);
    // One head of dim 8, two queries, two keys; key 1 equals key 0, so row 1
    // weighs both values equally.
    let q: Vec<u16> = [0.5f32, -1.0, 2.0, 0.25, 1.0, -0.5, 0.75, 1.5]
        .repeat(2)
        .into_iter()
        .map(bf)
        .collect();
    let k: Vec<u16> = [1.0f32, 0.5, -0.25, 2.0, -1.0, 0.125, 0.5, 1.0]
        .repeat(2)
        .into_iter()
        .map(bf)
        .collect();
    let v: Vec<u16> = (0..16).map(|x| bf(x as f32 * 0.25 - 1.0)).collect();
    let seq = Sequence {
        len_q: 2,
        len_k: 2,
        q,
        k,
        v,
    };
    let mut p = Problem {
        hq: 1,
        hkv: 1,
        d: 8,
        mask: Mask::CausalTopLeft,
        window: (-1, -1),
        softcap: 0.0,
        softmax_scale: 0.0,
        sinks: None,
        seqs: vec![seq],
    };
    let dot: f64 = (0..8)
        .map(|t| bf16_to_f64(p.seqs[0].q[t]) * bf16_to_f64(p.seqs[0].k[t]))
        .sum();
    let score = dot / 8f64.sqrt();
    let r = &reference(&p)[0][0];
    // Row 0 sees key 0 alone: O = its value row, LSE = its score.
    for t in 0..8 {
        assert_eq!(r.o[t], bf16_to_f64(p.seqs[0].v[t]));
        assert!((r.o[8 + t] - (bf16_to_f64(p.seqs[0].v[t]) + bf16_to_f64(p.seqs[0].v[8 + t])) / 2.0).abs() < 1e-15);
    }
    assert!((r.lse[0] - score).abs() < 1e-12);
    assert!((r.lse[1] - (score + 2f64.ln())).abs() < 1e-12);
    // A sink joins the denominator; a row that sees nothing keeps O = 0 and
    // takes the sink as its LSE.
    p.sinks = Some(vec![1.5]);
    p.mask = Mask::CausalBottomRight;
    p.seqs[0].len_k = 1;
    p.seqs[0].k.truncate(8);
    p.seqs[0].v.truncate(8);
    let r = &reference(&p)[0][0];
    assert_eq!(r.lse[0], 1.5);
    assert!(r.o[..8].iter().all(|&x| x == 0.0) && r.o_tol[..8].iter().all(|&x| x == 0.0));
    let w = 1.0 / (1.0 + (1.5 - score).exp());
    assert!((r.lse[1] - (score.exp() + 1.5f64.exp()).ln()).abs() < 1e-12);
    for t in 0..8 {
        assert!((r.o[8 + t] - w * bf16_to_f64(p.seqs[0].v[t])).abs() < 1e-12);
    }
}

#[test]
fn compare_catches_each_defect() {
    // Two sequences of 3 queries, over 5 keys and over 1 key (rows 0 and 1
    // of the second see none), in a dense layout with one spare element.
    let mut p = Problem::random(&mut Rng(3), 2, 1, 8, &[(3, 5), (3, 1)]);
    p.mask = Mask::CausalBottomRight;
    let refs = reference(&p);
    let (o_at, lse_at) = (dense_o_at(3, 2, 8), dense_lse_at(3, 2));
    let layout = OutputLayout {
        o_at: &o_at,
        lse_at: &lse_at,
    };
    // What a correct kernel may write: the reference rounded.
    let mut good_o = vec![POISON_BF16; 2 * 3 * 2 * 8 + 1];
    let mut good_lse = vec![f32::from_bits(POISON_F32); 2 * 2 * 3 + 1];
    for (s, seq_refs) in refs.iter().enumerate() {
        for (h, r) in seq_refs.iter().enumerate() {
            for i in 0..3 {
                for t in 0..8 {
                    good_o[o_at(s, i, h) + t] = bf16_from_f32(r.o[i * 8 + t] as f32);
                }
                good_lse[lse_at(s, h, i)] = r.lse[i] as f32;
            }
        }
    }
    let failures = |o: &[u16], lse: &[f32]| compare(&p, &refs, o, lse, &layout).failures.join("\n");
    assert_eq!(failures(&good_o, &good_lse), "");

    let with_o = |at: usize, bits: u16| {
        let mut o = good_o.clone();
        o[at] = bits;
        failures(&o, &good_lse)
    };
    let with_lse = |at: usize, x: f32| {
        let mut lse = good_lse.clone();
        lse[at] = x;
        failures(&good_o, &lse)
    };
    let off = |bits: u16| bf16_from_f32(bf16_to_f32(bits) * 1.05 + 0.05);
    let at = o_at(0, 2, 1) + 3;
    assert!(with_o(at, off(good_o[at])).contains("> tolerance"));
    assert!(with_o(at, POISON_BF16).contains("never written"));
    assert!(with_o(o_at(1, 0, 0), bf16_from_f32(1e-3)).contains("must be 0"));
    assert!(with_o(good_o.len() - 1, 0).contains("outside the computed rows"));
    assert!(with_lse(lse_at(0, 1, 2), good_lse[lse_at(0, 1, 2)] + 0.01).contains("> tolerance"));
    assert!(with_lse(lse_at(1, 0, 1), 0.0).contains("must be -inf"));
    assert!(with_lse(good_lse.len() - 1, 1.0).contains("outside the computed rows"));
}
