//! Vectorised transcendental functions over slices, for `f64` and `f32`.
//!
//! `exp`, `expm1`, `ln`, `ln_1p`, `tanh`, `logistic` (1/(1+e^-x), without
//! overflow), `sin`, `cos` and `erf`, each in four forms per dtype, e.g. for
//! `exp` on f64:
//!
//! - [`exp_f64`]`(x, out)`: `out[i] = exp(x[i])` for `i < min(x.len(), out.len())`
//!   (the rest of `out` is left as it is; nothing panics on a length mismatch),
//! - [`exp_f64_inplace`]`(x)`: the same, overwriting `x`,
//! - [`exp_f64_scalar`]`(x)`: one value,
//!
//! and `exp_f32`, `exp_f32_inplace`, `exp_f32_scalar` likewise. Pure functions
//! of their inputs: no allocation, no global state beyond the CPU-feature
//! cache of `std`, no alignment or length requirement.
//!
//! # How: one scalar source, compiled several times
//!
//! The element kernels (`kernels.rs`) are ordinary scalar Rust, written
//! without branches (choices are value selects) and with only IEEE-754
//! operations, FMAs (`mul_add`: one rounding on every target), bit casts and
//! integer ops. The slice loop (`map_body`) runs a kernel over blocks of
//! 16 or 32 elements and then over the remainder. It is compiled three times:
//! for the baseline target, in a `#[target_feature(enable = "avx2,fma")]`
//! function and in an AVX-512 (F/DQ/VL) one, where LLVM vectorises the blocks
//! (4 or 8 f64 lanes, several independent vectors per block so that the FMA
//! chains overlap). The copy is chosen at run time with
//! `is_x86_feature_detected!` (cached by `std`).
//!
//! # Same result everywhere
//!
//! IEEE arithmetic is deterministic and Rust never fuses `a * b + c` by
//! itself, so every copy, every lane and the scalar remainder compute the same
//! bits: a value never depends on the slice length, on where a block starts,
//! on the thread count or on the CPU (x86 or not). The `_scalar` entries run
//! the same kernels, so they agree bit for bit with the slice forms.
//! `all_paths_bit_identical` in `tests.rs` checks it for every copy this CPU
//! can run, at every offset and many lengths. (The baseline copy is slow on a
//! CPU without FMA, where `mul_add` is a libm call, but exact.)
//!
//! Why not `pulp`: its explicit SIMD types would give about the same speed,
//! but the scalar fallback and the tail would then be separate code whose
//! equality with the vector lanes is something to test, not a property of
//! the language, and it adds a dependency. Why `rustversion`: the `avx512*`
//! target features are stable from Rust 1.89 and the workspace's MSRV is
//! 1.84; with an older compiler the AVX-512 level runs the AVX2 copy.
//!
//! `sin`/`cos` have one branchy part: |x| >= 2^26 (and inf/NaN) goes through
//! an exact Payne-Hanek reduction (`reduce.rs`, about 50 ns). The slice forms
//! run the vector loop over everything and then patch those elements in a
//! second scalar pass, so ordinary inputs pay only a compare for it.
//!
//! # Accuracy
//!
//! Max error in ulp, measured as described in `tests.rs` (f32: all 2^32
//! inputs against the f64 function of `std` rounded to f32; f64: 10^8
//! log-uniform points over every binade of both signs plus special and
//! boundary values, against glibc's `std` functions, "vs libm", whose own
//! error is below one ulp; erf against the `libm` crate):
//!
//! | function | f64: max ulp vs libm | f64: points off by 1+ | f32: max ulp, all 2^32 | f32: inputs off |
//! |----------|-----|------------|-----|---|
//! | exp      | 1   | 62 031     | 0   | 0 |
//! | expm1    | 1   | 29 441     | 0   | 0 |
//! | ln       | 1   | 9 982      | 0   | 0 |
//! | ln_1p    | 1   | 30 805     | 0   | 0 |
//! | tanh     | 2   | 696 239    | 0   | 0 |
//! | logistic | 3   | 288 936    | 1   | 11 |
//! | sin      | 1   | 7 592 186  | 0   | 0 |
//! | cos      | 1   | 7 598 533  | 1   | 2 |
//! | erf      | 1   | 3 696 030  | 0   | 0 |
//!
//! ("points off" counts differences from the reference of one ulp or more
//! out of 10^8; logistic is the plain 1/(1+e) with one division, 3 ulp at
//! worst (at x = -2.03; see `kernels::logistic` for why it is not
//! corrected); for the others most are the reference's own rounding: glibc's tanh is
//! documented at 2 ulp. Checked with mpmath at each worst point: tanh(0.4797),
//! erf(0.75) and the f32 cos ones (and the f32 logistic ones of the
//! earlier, corrected kernel; the 11 of the present one are not checked)
//! are correctly rounded here and the reference is the one off; exp(1) and ln(1544.09) are 1 ulp off here.) sin/cos are compared with glibc's
//! sin/cos of the argument reduced by our exact Payne-Hanek (glibc's own
//! reduction is 8 ulp off at cos(5.3e255)); `huge_trig_exact` checks that
//! reduction against mpmath at the hardest case.
//!
//! f32 functions evaluate the f64 kernel and round once, so they are within
//! one ulp everywhere (correctly rounded except where the exact value lies
//! within ~2^-24 ulp of a rounding boundary); they run at f64 lane width.
//! Special values follow C99 Annex F: ±0 keep their sign where the function
//! is odd, exp(±inf) = inf/0, exp(x) = inf from x > 709.78 and 0 below
//! -745.13 (subnormal results are gradual), ln(0) = -inf, ln(x < 0) = NaN,
//! ln_1p(-1) = -inf, sin/cos(±inf) = NaN, tanh/erf/logistic saturate to
//! exactly ±1 (0 and 1 for logistic), NaN in gives NaN out.
//!
//! # Safety
//!
//! The only `unsafe` is the call into a `#[target_feature]` copy, made only
//! after `level()` detected its features (the tests call each copy the same
//! way). Under Miri, `std` reports only the compile-time target features,
//! so to run the AVX2 copies (and the `unsafe` calls into them) under Miri,
//! enable those features at compile time:
//!
//! ```text
//! rustup component add --toolchain nightly miri rust-src
//! RUSTFLAGS="-Ctarget-feature=+avx2,+fma" \
//!     cargo +nightly miri test -p anvil-cpu --lib vmath -- --skip sampled --skip many
//! ```
//!
//! (the sampled-accuracy tests are skipped: tens of thousands of points
//! take hours under Miri, and they contain no `unsafe` of their own). The
//! tests compare NaNs by being NaN, not by payload, which Miri randomises.

mod coeffs;
mod kernels;
mod reduce;
#[cfg(test)]
mod tests;

/// One function: its branch-free kernel and, for sin/cos, the exact path.
trait Kernel {
    /// True if some inputs must go through [`Kernel::exact`].
    const HAS_EXACT: bool = false;
    /// The vectorisable kernel (wrong, but finite or NaN, where `needs_exact`).
    fn fast(x: f64) -> f64;
    /// Inputs the fast kernel does not cover.
    fn needs_exact(_x: f64) -> bool {
        false
    }
    /// The result for those inputs.
    fn exact(x: f64) -> f64 {
        Self::fast(x)
    }
}

/// Declares the kernel types of the functions without an exact path.
macro_rules! simple_kernels {
    ($($name:ident => $f:path;)*) => {$(
        #[derive(Debug)]
        struct $name;
        impl Kernel for $name {
            #[inline(always)]
            fn fast(x: f64) -> f64 {
                $f(x)
            }
        }
    )*};
}

simple_kernels! {
    Exp => kernels::exp;
    Expm1 => kernels::expm1;
    Ln => kernels::ln;
    Ln1p => kernels::ln_1p;
    Tanh => kernels::tanh;
    Logistic => kernels::logistic;
    Erf => kernels::erf;
}

/// sin: fast reduction below 2^26, Payne-Hanek above.
#[derive(Debug)]
struct Sin;
impl Kernel for Sin {
    const HAS_EXACT: bool = true;
    #[inline(always)]
    fn fast(x: f64) -> f64 {
        kernels::sin_fast(x)
    }
    #[inline(always)]
    fn needs_exact(x: f64) -> bool {
        // NaN too: the exact path returns it as NaN.
        x.is_nan() || x.abs() >= kernels::TRIG_FAST_MAX
    }
    fn exact(x: f64) -> f64 {
        let (q, rh, rl) = reduce::rem_pio2_huge(x);
        kernels::sin_quadrant(q, rh, rl)
    }
}

/// cos: as [`Sin`], one quadrant on.
#[derive(Debug)]
struct Cos;
impl Kernel for Cos {
    const HAS_EXACT: bool = true;
    #[inline(always)]
    fn fast(x: f64) -> f64 {
        kernels::cos_fast(x)
    }
    #[inline(always)]
    fn needs_exact(x: f64) -> bool {
        Sin::needs_exact(x)
    }
    fn exact(x: f64) -> f64 {
        let (q, rh, rl) = reduce::rem_pio2_huge(x);
        kernels::sin_quadrant(q.wrapping_add(1), rh, rl)
    }
}

/// An element type: f64, or f32 computed through the f64 kernel.
trait Elem: Copy + Default {
    fn to_f64(self) -> f64;
    fn from_f64(x: f64) -> Self;
}

impl Elem for f64 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(x: f64) -> f64 {
        x
    }
}

impl Elem for f32 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn from_f64(x: f64) -> f32 {
        // Round to nearest: the only rounding of the f32 result.
        x as f32
    }
}

/// One element, exactly as the slice loops compute it.
#[inline(always)]
fn eval<K: Kernel, T: Elem>(x: T) -> T {
    let v = x.to_f64();
    if K::HAS_EXACT && K::needs_exact(v) {
        T::from_f64(K::exact(v))
    } else {
        T::from_f64(K::fast(v))
    }
}

/// The slice loop: a branch-free pass LLVM vectorises, then (sin/cos only)
/// a scalar pass that redoes the elements the fast kernel does not cover.
#[inline(always)]
fn map_body<K: Kernel, T: Elem, const BLOCK: usize>(x: &[T], out: &mut [T]) {
    // Blocks of BLOCK elements as arrays: LLVM vectorises each block as
    // several independent vectors, whose long FMA chains then overlap (one
    // vector per iteration is latency-bound). Same kernel, so the remainder
    // loop gives the same bits.
    let mut xs = x.chunks_exact(BLOCK);
    let mut os = out.chunks_exact_mut(BLOCK);
    for (xc, oc) in (&mut xs).zip(&mut os) {
        if let (Ok(xa), Ok(oa)) = (<&[T; BLOCK]>::try_from(xc), <&mut [T; BLOCK]>::try_from(oc)) {
            for (o, &v) in oa.iter_mut().zip(xa) {
                *o = T::from_f64(K::fast(v.to_f64()));
            }
        }
    }
    for (o, &v) in os.into_remainder().iter_mut().zip(xs.remainder()) {
        *o = T::from_f64(K::fast(v.to_f64()));
    }
    if K::HAS_EXACT {
        for (o, &v) in out.iter_mut().zip(x) {
            if K::needs_exact(v.to_f64()) {
                *o = T::from_f64(K::exact(v.to_f64()));
            }
        }
    }
}

/// In place. The exact pass needs the inputs, so sin/cos go through a small
/// copy of each chunk.
#[inline(always)]
fn map_inplace_body<K: Kernel, T: Elem, const BLOCK: usize>(xs: &mut [T]) {
    if K::HAS_EXACT {
        const CHUNK: usize = 64;
        let mut buf = [T::default(); CHUNK];
        for chunk in xs.chunks_mut(CHUNK) {
            let copy = &mut buf[..chunk.len()];
            copy.copy_from_slice(chunk);
            map_body::<K, T, BLOCK>(copy, chunk);
        }
    } else {
        // Same blocking as `map_body`, through a copy of each block.
        for chunk in xs.chunks_mut(BLOCK) {
            let mut buf = [T::default(); BLOCK];
            let copy = &mut buf[..chunk.len()];
            copy.copy_from_slice(chunk);
            map_body::<K, T, BLOCK>(copy, chunk);
        }
    }
}

/// Which compiled copy of the loops this CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// The baseline target (any CPU; Miri).
    Generic,
    /// AVX2 + FMA (x86-64-v3 and later).
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
    /// AVX-512 F/DQ/VL as well (x86-64-v4). With a compiler older than 1.89
    /// this runs the AVX2 copy.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// The best copy for this CPU (`std` caches the detection).
#[inline]
fn level() -> Level {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        let v4 = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl");
        return if v4 { Level::Avx512 } else { Level::Avx2Fma };
    }
    Level::Generic
}

/// The AVX2+FMA copies. Each is the generic body, compiled with the features.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{eval, map_body, map_inplace_body, Elem, Kernel};

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn map<K: Kernel, T: Elem>(x: &[T], out: &mut [T]) {
        map_body::<K, T, 16>(x, out)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn map_inplace<K: Kernel, T: Elem>(xs: &mut [T]) {
        map_inplace_body::<K, T, 16>(xs)
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn one<K: Kernel, T: Elem>(x: T) -> T {
        eval::<K, T>(x)
    }
}

/// The AVX-512 copies (8 f64 lanes). The `avx512*` target features are
/// stable from Rust 1.89; below that (the workspace's MSRV is 1.84) this
/// module forwards to the AVX2 copies.
#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
mod avx512 {
    use super::{map_body, map_inplace_body, Elem, Kernel};

    /// # Safety
    /// The CPU must support AVX-512 F/DQ/VL, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    pub(super) unsafe fn map<K: Kernel, T: Elem>(x: &[T], out: &mut [T]) {
        map_body::<K, T, 32>(x, out)
    }

    /// # Safety
    /// The CPU must support AVX-512 F/DQ/VL, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,avx2,fma")]
    pub(super) unsafe fn map_inplace<K: Kernel, T: Elem>(xs: &mut [T]) {
        map_inplace_body::<K, T, 32>(xs)
    }
}

/// Compilers before 1.89: the AVX2 copies stand in.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
mod avx512 {
    pub(super) use super::avx2::{map, map_inplace};
}

fn map_with<K: Kernel, T: Elem>(level: Level, x: &[T], out: &mut [T]) {
    match level {
        Level::Generic => map_body::<K, T, 16>(x, out),
        // SAFETY: `level` is `Avx2Fma` only when `level()` detected AVX2 and FMA
        // (the tests pass `level()` or `Generic`).
        #[cfg(target_arch = "x86_64")]
        Level::Avx2Fma => unsafe { avx2::map::<K, T>(x, out) },
        // SAFETY: as above, with AVX-512 F/DQ/VL detected too.
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => unsafe { avx512::map::<K, T>(x, out) },
    }
}

fn map_inplace_with<K: Kernel, T: Elem>(level: Level, xs: &mut [T]) {
    match level {
        Level::Generic => map_inplace_body::<K, T, 16>(xs),
        // SAFETY: as in `map_with`.
        #[cfg(target_arch = "x86_64")]
        Level::Avx2Fma => unsafe { avx2::map_inplace::<K, T>(xs) },
        // SAFETY: as in `map_with`.
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => unsafe { avx512::map_inplace::<K, T>(xs) },
    }
}

fn one_with<K: Kernel, T: Elem>(level: Level, x: T) -> T {
    match level {
        Level::Generic => eval::<K, T>(x),
        // SAFETY: as in `map_with`.
        #[cfg(target_arch = "x86_64")]
        Level::Avx2Fma => unsafe { avx2::one::<K, T>(x) },
        // SAFETY: as in `map_with`.
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => unsafe { avx2::one::<K, T>(x) },
    }
}

/// The public entries of one function for one dtype.
macro_rules! entries {
    ($K:ty, $T:ty, $name:literal, $what:literal, $acc:literal, $slice:ident, $inplace:ident, $one:ident) => {
        #[doc = concat!("`out[i] = ", $what, "` for every `i < min(x.len(), out.len())` (", stringify!($T), ").")]
        ///
        #[doc = concat!("Accuracy: ", $acc, " Bit-identical to [`", stringify!($one), "`] on every element, whatever the slice length or CPU.")]
        ///
        /// ```
        /// use anvil_cpu::vmath;
        #[doc = concat!("let x: [", stringify!($T), "; 4] = [-1.5, 0.0, 0.25, 3.0];")]
        #[doc = concat!("let mut out = [0.0; 4];")]
        #[doc = concat!("vmath::", stringify!($slice), "(&x, &mut out);")]
        #[doc = concat!("assert_eq!(out[2], vmath::", stringify!($one), "(0.25));")]
        /// ```
        pub fn $slice(x: &[$T], out: &mut [$T]) {
            map_with::<$K, $T>(level(), x, out)
        }

        #[doc = concat!("`x[i] = ", $what, "` in place (", stringify!($T), "); same results as [`", stringify!($slice), "`] (see its example).")]
        pub fn $inplace(x: &mut [$T]) {
            map_inplace_with::<$K, $T>(level(), x)
        }

        #[doc = concat!("`", $what, "` for one ", stringify!($T), ", bit-identical to [`", stringify!($slice), "`].")]
        ///
        #[doc = concat!("Accuracy: ", $acc, " (See [`", stringify!($slice), "`] for an example.)")]
        pub fn $one(x: $T) -> $T {
            one_with::<$K, $T>(level(), x)
        }
    };
}

/// Both dtypes of one function.
macro_rules! function {
    ($K:ty, $name:literal, $what:literal, $acc64:literal, $acc32:literal,
     $s64:ident, $i64:ident, $o64:ident, $s32:ident, $i32:ident, $o32:ident) => {
        entries!($K, f64, $name, $what, $acc64, $s64, $i64, $o64);
        entries!($K, f32, $name, $what, $acc32, $s32, $i32, $o32);
    };
}

function!(
    Exp,
    "0.5f64.exp()",
    "e^x[i]",
    "at most 1 ulp from glibc over 10^8 log-uniform points; overflow to inf above 709.78, gradual underflow, 0 below -745.13.", "all 2^32 inputs give exactly the f64 libm result rounded to f32.",
    exp_f64,
    exp_f64_inplace,
    exp_f64_scalar,
    exp_f32,
    exp_f32_inplace,
    exp_f32_scalar
);
function!(
    Expm1,
    "0.5f64.exp_m1()",
    "e^x[i] - 1",
    "at most 1 ulp from glibc over 10^8 log-uniform points; keeps -0, exactly -1 below ≈ -37.4.",
    "all 2^32 inputs give exactly the f64 libm result rounded to f32.",
    expm1_f64,
    expm1_f64_inplace,
    expm1_f64_scalar,
    expm1_f32,
    expm1_f32_inplace,
    expm1_f32_scalar
);
function!(
    Ln,
    "0.5f64.ln()",
    "ln x[i]",
    "at most 1 ulp from glibc over 10^8 log-uniform points (subnormals included); ln 0 = -inf, ln of a negative = NaN.", "all 2^32 inputs give exactly the f64 libm result rounded to f32.",
    ln_f64,
    ln_f64_inplace,
    ln_f64_scalar,
    ln_f32,
    ln_f32_inplace,
    ln_f32_scalar
);
function!(
    Ln1p,
    "0.5f64.ln_1p()",
    "ln(1 + x[i])",
    "at most 1 ulp from glibc over 10^8 log-uniform points; ln_1p(-1) = -inf, NaN below -1, keeps -0.", "all 2^32 inputs give exactly the f64 libm result rounded to f32.",
    ln_1p_f64,
    ln_1p_f64_inplace,
    ln_1p_f64_scalar,
    ln_1p_f32,
    ln_1p_f32_inplace,
    ln_1p_f32_scalar
);
function!(
    Tanh,
    "0.5f64.tanh()",
    "tanh x[i]",
    "at most 2 ulp from glibc (itself documented at 2 ulp) over 10^8 log-uniform points; exactly ±1 from |x| ≈ 19.06, keeps -0.", "all 2^32 inputs give exactly the f64 libm result rounded to f32.",
    tanh_f64,
    tanh_f64_inplace,
    tanh_f64_scalar,
    tanh_f32,
    tanh_f32_inplace,
    tanh_f32_scalar
);
function!(
    Logistic,
    "1.0 / (1.0 + (-0.5f64).exp())",
    "1 / (1 + e^-x[i])",
    "at most 3 ulp from a double-double reference over 10^8 log-uniform points (one exp and one division, as the scalar formula); never overflows, exactly 1 from x ≈ 37.4, gradual underflow to 0 below -745.", "at most 1 ulp over all 2^32 inputs (11 inputs off by one).",
    logistic_f64,
    logistic_f64_inplace,
    logistic_f64_scalar,
    logistic_f32,
    logistic_f32_inplace,
    logistic_f32_scalar
);
function!(
    Sin,
    "0.5f64.sin()",
    "sin x[i]",
    "at most 1 ulp over 10^8 log-uniform points, huge arguments included (exact Payne-Hanek reduction above 2^26).", "all 2^32 inputs give exactly the f64 result rounded to f32.",
    sin_f64,
    sin_f64_inplace,
    sin_f64_scalar,
    sin_f32,
    sin_f32_inplace,
    sin_f32_scalar
);
function!(
    Cos,
    "0.5f64.cos()",
    "cos x[i]",
    "at most 1 ulp over 10^8 log-uniform points, huge arguments included (exact Payne-Hanek reduction above 2^26).", "at most 1 ulp over all 2^32 inputs (2 inputs off by one).",
    cos_f64,
    cos_f64_inplace,
    cos_f64_scalar,
    cos_f32,
    cos_f32_inplace,
    cos_f32_scalar
);
function!(
    Erf,
    "0.5204998778130465",
    "erf x[i]",
    "at most 1 ulp from the libm crate over 10^8 log-uniform points; exactly ±1 from |x| > 5.93, keeps -0.", "all 2^32 inputs give exactly the f64 libm result rounded to f32.",
    erf_f64,
    erf_f64_inplace,
    erf_f64_scalar,
    erf_f32,
    erf_f32_inplace,
    erf_f32_scalar
);
