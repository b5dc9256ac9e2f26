//! Tests of vmath: special values, bit-identity of every code path, and
//! accuracy (sampled here; exhaustive / 10^8 points behind `#[ignore]`).
//!
//! Heavy runs (release build; a few minutes each on 2 cores):
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-helpers cargo test --release -p anvil-ad-cpu --lib \
//!     vmath::tests::exhaustive_f32 -- --ignored --nocapture
//! CARGO_TARGET_DIR=/work/target-helpers cargo test --release -p anvil-ad-cpu --lib \
//!     vmath::tests::many_f64 -- --ignored --nocapture
//! ```
//!
//! `VMATH_ONLY=logistic` (a comma-separated list of names) restricts both
//! heavy runs to those functions.
//!
//! Ulp distance: both values mapped to integers monotonically (so ±0 are one
//! point, and inf is one ulp above f64::MAX); NaN vs NaN is 0, NaN vs a
//! number is "infinite". References: f64 functions of `std` (glibc here) and
//! `libm::erf`; logistic's reference is 1/(1+e) with e = std exp(-|x|),
//! evaluated in double-double. They are themselves within about one ulp, so
//! the f64 figures are "vs libm".

use super::*;

/// splitmix64: a small deterministic generator (no dev-dependency needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A finite f64 of random sign whose binade (subnormals included) is
    /// uniform over all 2047: log-uniform over the whole range.
    fn log_uniform_f64(&mut self) -> f64 {
        let r = self.next();
        let exp = (r >> 53) % 2047;
        f64::from_bits((r & (1 << 63)) | (exp << 52) | (self.next() & 0x000f_ffff_ffff_ffff))
    }

    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 * (1.0 / 9007199254740992.0))
    }
}

fn ordered64(x: f64) -> i128 {
    let b = x.to_bits() as i64;
    i128::from(if b < 0 { i64::MIN.wrapping_sub(b) } else { b })
}

fn ulps64(a: f64, b: f64) -> u64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0,
        (false, false) => (ordered64(a) - ordered64(b)).unsigned_abs() as u64,
        _ => u64::MAX,
    }
}

fn ulps32(a: f32, b: f32) -> u64 {
    fn ord(x: f32) -> i64 {
        let b = x.to_bits() as i32;
        i64::from(if b < 0 { i32::MIN.wrapping_sub(b) } else { b })
    }
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0,
        (false, false) => (ord(a) - ord(b)).unsigned_abs(),
        _ => u64::MAX,
    }
}

/// sin (shift 0) or cos (shift 1) of x: glibc's, applied to the argument
/// reduced exactly by `reduce::rem_pio2_huge` (glibc's own reduction loses
/// relative accuracy where the result is tiny, e.g. 8 ulp for cos(5.3e255)).
/// The reduction itself is checked against mpmath in `huge_trig_exact`.
fn trig_ref(x: f64, shift: u64) -> f64 {
    if x.abs() < 1e-3 || !x.is_finite() {
        return if shift == 0 { x.sin() } else { x.cos() };
    }
    let (q, rh, rl) = reduce::rem_pio2_huge(x);
    let q = q + shift;
    let v = if q & 1 == 0 { rh.sin() + rl * rh.cos() } else { rh.cos() - rl * rh.sin() };
    if q & 2 == 0 {
        v
    } else {
        -v
    }
}

fn sin_ref(x: f64) -> f64 {
    trig_ref(x, 0)
}

fn cos_ref(x: f64) -> f64 {
    trig_ref(x, 1)
}

/// 1 / (1 + e^-x) in double-double from std's exp (a reference only).
fn logistic_ref(x: f64) -> f64 {
    let e = (-x.abs()).exp();
    let num = if x < 0.0 { e } else { 1.0 };
    let (dh, dl) = (1.0 + e, e - ((1.0 + e) - 1.0));
    let q = num / dh;
    let rem = q.mul_add(-dh, num) - q * dl;
    q + rem / dh
}

type F64Fn = fn(f64) -> f64;
type F32Fn = fn(f32) -> f32;
type SliceF64 = fn(&[f64], &mut [f64]);
type SliceF32 = fn(&[f32], &mut [f32]);

/// Every function: name, reference, slice and scalar forms for both dtypes.
struct Case {
    name: &'static str,
    reference: F64Fn,
    s64: SliceF64,
    o64: F64Fn,
    s32: SliceF32,
    o32: F32Fn,
    /// Bound asserted by the sampled tests, in ulp (f64, f32).
    bound: (u64, u64),
}

fn cases() -> Vec<Case> {
    macro_rules! case {
        ($name:literal, $r:expr, $s64:ident, $o64:ident, $s32:ident, $o32:ident, $b:expr) => {
            Case {
                name: $name,
                reference: $r,
                s64: $s64,
                o64: $o64,
                s32: $s32,
                o32: $o32,
                bound: $b,
            }
        };
    }
    vec![
        case!("exp", f64::exp, exp_f64, exp_f64_scalar, exp_f32, exp_f32_scalar, (1, 1)),
        case!(
            "expm1",
            f64::exp_m1,
            expm1_f64,
            expm1_f64_scalar,
            expm1_f32,
            expm1_f32_scalar,
            (1, 1)
        ),
        case!("ln", f64::ln, ln_f64, ln_f64_scalar, ln_f32, ln_f32_scalar, (1, 1)),
        case!(
            "ln_1p",
            f64::ln_1p,
            ln_1p_f64,
            ln_1p_f64_scalar,
            ln_1p_f32,
            ln_1p_f32_scalar,
            (1, 1)
        ),
        case!("tanh", f64::tanh, tanh_f64, tanh_f64_scalar, tanh_f32, tanh_f32_scalar, (2, 1)),
        case!(
            "logistic",
            logistic_ref,
            logistic_f64,
            logistic_f64_scalar,
            logistic_f32,
            logistic_f32_scalar,
            (3, 1)
        ),
        case!("sin", sin_ref, sin_f64, sin_f64_scalar, sin_f32, sin_f32_scalar, (1, 1)),
        case!("cos", cos_ref, cos_f64, cos_f64_scalar, cos_f32, cos_f32_scalar, (1, 1)),
        case!("erf", libm::erf, erf_f64, erf_f64_scalar, erf_f32, erf_f32_scalar, (2, 1)),
    ]
}

/// The cases of the heavy runs: all, or those named in `VMATH_ONLY`.
fn heavy_cases() -> Vec<Case> {
    let only = std::env::var("VMATH_ONLY").unwrap_or_default();
    let names: Vec<&str> = only.split(',').filter(|s| !s.is_empty()).collect();
    cases().into_iter().filter(|c| names.is_empty() || names.contains(&c.name)).collect()
}

/// Boundary and special inputs, used by several tests.
fn specials() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        5e-324,
        -5e-324,
        f64::from_bits(0x000f_ffff_ffff_ffff), // largest subnormal
        1.0,
        -1.0,
        0.5,
        2.0,
        709.782712893384,
        709.7827128933841,
        710.0,
        -708.3964185322641,
        -745.1332191019411,
        -745.1332191019412,
        -746.0,
        1e-300,
        -1e-300,
        0.75,
        0.7499999999999999,
        5.921,
        6.0,
        22.0,
        40.0,
        -37.0,
        1e22,
        67108864.0,
        67108863.99999999,
        1.0e300,
        std::f64::consts::FRAC_PI_4,
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::PI,
        6381956970095103.0 * 2f64.powi(797), // the hardest case for pi/2 reduction
        -0.9999999999999999,
        -0.5,
        std::f64::consts::SQRT_2,
        std::f64::consts::FRAC_1_SQRT_2,
    ];
    for k in -1080..=1030 {
        v.push(2f64.powi(k));
    }
    for k in (-1200..1200).step_by(7) {
        v.push(f64::from(k) * std::f64::consts::FRAC_PI_2);
    }
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// Where each function must give an exact value (checked bitwise).
#[test]
fn special_values_f64() {
    let inf = f64::INFINITY;
    let checks: &[(F64Fn, f64, f64)] = &[
        (exp_f64_scalar, 0.0, 1.0),
        (exp_f64_scalar, -0.0, 1.0),
        (exp_f64_scalar, inf, inf),
        (exp_f64_scalar, -inf, 0.0),
        (exp_f64_scalar, 710.0, inf),
        (exp_f64_scalar, 709.7827128933841, inf),
        (exp_f64_scalar, -746.0, 0.0),
        (exp_f64_scalar, -745.1332191019412, 0.0),
        (exp_f64_scalar, -745.1332191019411, 5e-324),
        (expm1_f64_scalar, -0.0, -0.0),
        (expm1_f64_scalar, 0.0, 0.0),
        (expm1_f64_scalar, -inf, -1.0),
        (expm1_f64_scalar, inf, inf),
        (expm1_f64_scalar, 710.0, inf),
        (expm1_f64_scalar, 5e-324, 5e-324),
        (ln_f64_scalar, 1.0, 0.0),
        (ln_f64_scalar, 0.0, -inf),
        (ln_f64_scalar, -0.0, -inf),
        (ln_f64_scalar, inf, inf),
        (ln_1p_f64_scalar, -0.0, -0.0),
        (ln_1p_f64_scalar, -1.0, -inf),
        (ln_1p_f64_scalar, inf, inf),
        (ln_1p_f64_scalar, 5e-324, 5e-324),
        (tanh_f64_scalar, -0.0, -0.0),
        (tanh_f64_scalar, 20.0, 1.0),
        (tanh_f64_scalar, -1e300, -1.0),
        (tanh_f64_scalar, inf, 1.0),
        (tanh_f64_scalar, -5e-324, -5e-324),
        (logistic_f64_scalar, 0.0, 0.5),
        (logistic_f64_scalar, inf, 1.0),
        (logistic_f64_scalar, -inf, 0.0),
        (logistic_f64_scalar, 40.0, 1.0),
        (logistic_f64_scalar, -800.0, 0.0),
        (logistic_f64_scalar, f64::MAX, 1.0),
        (logistic_f64_scalar, f64::MIN, 0.0),
        (sin_f64_scalar, -0.0, -0.0),
        (sin_f64_scalar, 5e-324, 5e-324),
        (sin_f64_scalar, -1e-300, -1e-300),
        (cos_f64_scalar, -0.0, 1.0),
        (cos_f64_scalar, 1e-300, 1.0),
        (erf_f64_scalar, -0.0, -0.0),
        (erf_f64_scalar, 6.0, 1.0),
        (erf_f64_scalar, -inf, -1.0),
        (erf_f64_scalar, 1e300, 1.0),
    ];
    for &(f, x, want) in checks {
        let got = f(x);
        assert_eq!(got.to_bits(), want.to_bits(), "f({x:e}) = {got:e}, want {want:e}");
    }
    let nan_at: &[(F64Fn, f64)] = &[
        (ln_f64_scalar, -1.0),
        (ln_f64_scalar, -5e-324),
        (ln_f64_scalar, -inf),
        (ln_1p_f64_scalar, -1.0000000000000002),
        (ln_1p_f64_scalar, -inf),
        (sin_f64_scalar, inf),
        (sin_f64_scalar, -inf),
        (cos_f64_scalar, inf),
        (cos_f64_scalar, -inf),
    ];
    for &(f, x) in nan_at {
        assert!(f(x).is_nan(), "f({x:e}) = {:e}, want NaN", f(x));
    }
    for c in cases() {
        assert!((c.o64)(f64::NAN).is_nan(), "{}(NaN)", c.name);
        assert!((c.o32)(f32::NAN).is_nan(), "{}(NaN) f32", c.name);
    }
}

#[test]
fn special_values_f32() {
    let inf = f32::INFINITY;
    let checks: &[(F32Fn, f32, f32)] = &[
        (exp_f32_scalar, 89.0, inf),
        (exp_f32_scalar, -104.0, 0.0),
        (exp_f32_scalar, -103.0, 1e-45),
        (exp_f32_scalar, -inf, 0.0),
        (expm1_f32_scalar, -0.0, -0.0),
        (ln_f32_scalar, 0.0, -inf),
        (ln_f32_scalar, 1.0, 0.0),
        (ln_1p_f32_scalar, -1.0, -inf),
        (tanh_f32_scalar, -0.0, -0.0),
        (tanh_f32_scalar, 10.0, 1.0),
        (logistic_f32_scalar, 0.0, 0.5),
        (logistic_f32_scalar, -200.0, 0.0),
        (sin_f32_scalar, -0.0, -0.0),
        (sin_f32_scalar, 1e-45, 1e-45),
        (erf_f32_scalar, -0.0, -0.0),
        (erf_f32_scalar, 4.0, 1.0),
    ];
    for &(f, x, want) in checks {
        let got = f(x);
        assert_eq!(got.to_bits(), want.to_bits(), "f({x:e}) = {got:e}, want {want:e}");
    }
    assert!(ln_f32_scalar(-1.0).is_nan());
    assert!(cos_f32_scalar(f32::INFINITY).is_nan());
}

/// The slice forms (every length, both copies of the loop, in place) agree
/// bit for bit with the scalar entries.
#[test]
fn all_paths_bit_identical() {
    let mut rng = Rng(7);
    let mut xs = specials();
    // Fewer points under Miri (an interpreter), which runs this test for the
    // `unsafe` calls into the AVX2 copies, not for accuracy.
    for _ in 0..if cfg!(miri) { 20 } else { 3000 } {
        xs.push(rng.log_uniform_f64());
        xs.push(rng.uniform(-30.0, 30.0));
    }
    let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
    for c in cases() {
        let want: Vec<u64> = xs.iter().map(|&x| (c.o64)(x).canonical_bits()).collect();
        let want32: Vec<u32> = xs32.iter().map(|&x| (c.o32)(x).canonical_bits()).collect();
        // The public slice form, then each copy of the loop explicitly.
        let mut out = vec![0.0; xs.len()];
        (c.s64)(&xs, &mut out);
        let got: Vec<u64> = out.iter().map(|y| y.canonical_bits()).collect();
        assert_eq!(got, want, "{}: slice vs scalar", c.name);
        let mut out32 = vec![0.0f32; xs.len()];
        (c.s32)(&xs32, &mut out32);
        let got32: Vec<u32> = out32.iter().map(|y| y.canonical_bits()).collect();
        assert_eq!(got32, want32, "{}: f32 slice vs scalar", c.name);
    }
    // Generic vs detected copies, every kernel, short slices at every offset.
    fn check<K: Kernel>(xs: &[f64], name: &str) {
        let scalar: Vec<u64> =
            xs.iter().map(|&x| one_with::<K, f64>(Level::Generic, x).canonical_bits()).collect();
        for level in levels() {
            let mut whole = vec![0.0; xs.len()];
            map_with::<K, f64>(level, xs, &mut whole);
            assert!(
                whole.iter().zip(&scalar).all(|(a, &b)| a.canonical_bits() == b),
                "{name} {level:?}"
            );
            let mut inplace = xs.to_vec();
            map_inplace_with::<K, f64>(level, &mut inplace);
            assert!(
                inplace.iter().zip(&scalar).all(|(a, &b)| a.canonical_bits() == b),
                "{name} inplace"
            );
            for start in 0..9 {
                for len in [0, 1, 3, 4, 5, 7, 8, 9, 15, 17, 33, 70] {
                    let end = (start + len).min(xs.len());
                    let mut out = vec![0.0; end - start];
                    map_with::<K, f64>(level, &xs[start..end], &mut out);
                    assert!(out
                        .iter()
                        .zip(&scalar[start..end])
                        .all(|(a, &b)| a.canonical_bits() == b));
                }
            }
            let one = one_with::<K, f64>(level, xs[3]);
            assert_eq!(one.canonical_bits(), scalar[3]);
        }
    }
    let short = &xs[..(if cfg!(miri) { 80 } else { 600 }).min(xs.len())];
    check::<Exp>(short, "exp");
    check::<Expm1>(short, "expm1");
    check::<Ln>(short, "ln");
    check::<Ln1p>(short, "ln_1p");
    check::<Tanh>(short, "tanh");
    check::<Logistic>(short, "logistic");
    check::<Sin>(short, "sin");
    check::<Cos>(short, "cos");
    check::<Erf>(short, "erf");
}

/// Bits with every NaN the same: a NaN's payload is not specified (Miri
/// randomises it), its being NaN is.
trait CanonicalBits {
    type Bits: PartialEq + std::fmt::Debug;
    fn canonical_bits(self) -> Self::Bits;
}
impl CanonicalBits for f64 {
    type Bits = u64;
    fn canonical_bits(self) -> u64 {
        if self.is_nan() {
            f64::NAN.to_bits()
        } else {
            self.to_bits()
        }
    }
}
impl CanonicalBits for f32 {
    type Bits = u32;
    fn canonical_bits(self) -> u32 {
        if self.is_nan() {
            f32::NAN.to_bits()
        } else {
            self.to_bits()
        }
    }
}

/// Every copy of the loops this CPU can run.
fn levels() -> Vec<Level> {
    let mut v = vec![Level::Generic];
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        v.push(Level::Avx2Fma);
    }
    if level() != *v.last().unwrap_or(&Level::Generic) {
        v.push(level());
    }
    v
}

/// coeffs.rs names std's constants where they are the f64 gen_coeffs.py
/// computed; these are the bits of those values, from mpmath.
#[test]
fn std_constants_match() {
    assert_eq!(coeffs::LOG2_E.to_bits(), 0x3ff71547652b82fe);
    assert_eq!(coeffs::PIO2_1.to_bits(), 0x3ff921fb54442d18);
    assert_eq!(coeffs::TWO_OVER_PI.to_bits(), 0x3fe45f306dc9c883);
    assert_eq!(coeffs::FRAC_2_SQRT_PI_HI.to_bits(), 0x3ff20dd750429b6d);
}

#[test]
fn mismatched_lengths_write_the_common_prefix() {
    let x = [0.0, 1.0, 2.0];
    let mut out = [7.0; 5];
    exp_f64(&x, &mut out);
    assert_eq!(out[3..], [7.0, 7.0]);
    let mut short = [7.0; 2];
    sin_f64(&x, &mut short);
    assert_eq!(short[1], sin_f64_scalar(1.0));
    let mut none: [f32; 0] = [];
    cos_f32(&[1.0], &mut none);
    cos_f32_inplace(&mut none);
}

/// The fast reduction agrees with Payne-Hanek where both apply.
#[test]
fn fast_and_exact_reductions_agree() {
    let mut rng = Rng(11);
    for i in 0..20000 {
        let x = if i % 2 == 0 {
            rng.uniform(-67108864.0, 67108864.0)
        } else {
            2f64.powf(rng.uniform(-9.0, 26.0)) * if i % 4 == 1 { 1.0 } else { -1.0 }
        };
        let (qf, hf, lf) = kernels::rem_pio2_fast(x);
        let (qe, he, le) = reduce::rem_pio2_huge(x);
        // Ties at |r| = pi/4 may pick either neighbour.
        if (hf.abs() - std::f64::consts::FRAC_PI_4).abs() < 1e-9 {
            continue;
        }
        assert_eq!(qf, qe, "quadrant of {x:e}");
        let diff = ((hf - he) + (lf - le)).abs();
        assert!(diff <= hf.abs() * 5e-20, "r of {x:e}: {hf:e}+{lf:e} vs {he:e}+{le:e}");
    }
}

/// sin/cos of huge arguments, correctly rounded values from mpmath (4000 bits).
#[test]
fn huge_trig_exact() {
    // An accuracy test, and the reduction of huge arguments relies on exact
    // fused multiply-adds, which Miri's float model does not promise.
    if cfg!(miri) {
        return;
    }
    let hard = 6381956970095103.0 * 2f64.powi(797);
    let cases: &[(F64Fn, f64, u64)] = &[
        (cos_f64_scalar, 5.319372648326541e255, 0xbc214ae72e6ba22f),
        (sin_f64_scalar, 1.026389656423596e91, 0xbfefffeeb56cdeb1),
        (sin_f64_scalar, 1e300, 0xbfea2c16b010e385),
        (sin_f64_scalar, hard, 0x3ff0000000000000),
        (cos_f64_scalar, hard, 0xbc214ae72e6ba22f),
        (cos_f64_scalar, f64::MAX, 0xbfefffe62ecfab75),
    ];
    for &(f, x, want) in cases {
        assert!(ulps64(f(x), f64::from_bits(want)) == 0, "{x:e}: {:x} vs {want:x}", f(x).to_bits());
    }
    // And glibc agrees to within its own reduction error everywhere.
    let mut rng = Rng(13);
    for _ in 0..20000 {
        let x = rng.log_uniform_f64();
        for (ours, std) in [(sin_f64_scalar(x), x.sin()), (cos_f64_scalar(x), x.cos())] {
            assert!((ours - std).abs() <= 1e-12 * std.abs(), "{x:e}: {ours:e} vs {std:e}");
        }
    }
}

/// Max ulp of one function over `xs`, f64; returns (max, arg of max).
fn max_err64(c: &Case, xs: &[f64]) -> (u64, f64) {
    let mut out = vec![0.0; xs.len()];
    (c.s64)(xs, &mut out);
    let mut worst = (0, 0.0);
    for (&x, &y) in xs.iter().zip(&out) {
        let e = ulps64(y, (c.reference)(x));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    worst
}

/// Max ulp of one function over `xs`, f32, against the f64 reference rounded.
fn max_err32(c: &Case, xs: &[f32], out: &mut [f32]) -> (u64, f32) {
    (c.s32)(xs, out);
    let mut worst = (0, 0.0);
    for (&x, &y) in xs.iter().zip(out.iter()) {
        let e = ulps32(y, (c.reference)(f64::from(x)) as f32);
        if e > worst.0 {
            worst = (e, x);
        }
    }
    worst
}

/// Points that matter for each function: log-uniform over all binades, the
/// function's interesting range, and the special values.
fn sample_f64(rng: &mut Rng, n: usize) -> Vec<f64> {
    let mut xs = specials();
    for i in 0..n {
        xs.push(match i % 3 {
            0 => rng.log_uniform_f64(),
            1 => rng.uniform(-40.0, 40.0),
            _ => rng.uniform(-750.0, 750.0),
        });
    }
    xs
}

#[test]
fn sampled_accuracy_f64() {
    let mut rng = Rng(3);
    let n = std::env::var("VMATH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(20000);
    let xs = sample_f64(&mut rng, n);
    let errs: Vec<(u64, f64)> = cases().iter().map(|c| max_err64(c, &xs)).collect();
    for (c, (e, x)) in cases().iter().zip(&errs) {
        println!("{}: {e} ulp at {x:e}", c.name);
    }
    for (c, (e, x)) in cases().iter().zip(errs) {
        assert!(e <= c.bound.0, "{}: {e} ulp at {x:e}", c.name);
    }
}

#[test]
fn sampled_accuracy_f32() {
    let mut rng = Rng(5);
    let mut xs: Vec<f32> = specials().iter().map(|&x| x as f32).collect();
    for _ in 0..20000 {
        xs.push(f32::from_bits(rng.next() as u32));
        xs.push(rng.uniform(-20.0, 20.0) as f32);
    }
    let mut out = vec![0.0; xs.len()];
    for c in cases() {
        let (e, x) = max_err32(&c, &xs, &mut out);
        assert!(e <= c.bound.1, "{}: {e} ulp at {x:e}", c.name);
    }
}

/// All 2^32 f32 inputs for every function (about 5 minutes on 2 cores).
#[test]
#[ignore = "minutes; run with --release -- --ignored (see module doc)"]
fn exhaustive_f32() {
    const CHUNK: u64 = 1 << 16;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    println!("| function | max ulp | at x | inputs off by >= 1 ulp |");
    for c in heavy_cases() {
        let results: Vec<(u64, f32, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let c = &c;
                    s.spawn(move || {
                        let mut xs = vec![0.0f32; CHUNK as usize];
                        let mut out = vec![0.0f32; CHUNK as usize];
                        let (mut worst, mut at, mut off) = (0, 0.0, 0);
                        let mut start = t * CHUNK;
                        while start < 1 << 32 {
                            for (i, x) in xs.iter_mut().enumerate() {
                                *x = f32::from_bits((start + i as u64) as u32);
                            }
                            (c.s32)(&xs, &mut out);
                            for (&x, &y) in xs.iter().zip(&out) {
                                let e = ulps32(y, (c.reference)(f64::from(x)) as f32);
                                off += u64::from(e > 0);
                                if e > worst {
                                    (worst, at) = (e, x);
                                }
                            }
                            start += threads * CHUNK;
                        }
                        (worst, at, off)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or((u64::MAX, f32::NAN, 0))).collect()
        });
        let worst = results.iter().fold((0, 0.0, 0), |acc, r| {
            let (w, a) = if r.0 > acc.0 { (r.0, r.1) } else { (acc.0, acc.1) };
            (w, a, acc.2 + r.2)
        });
        println!("| {} | {} | {:e} | {} |", c.name, worst.0, worst.1, worst.2);
        assert!(worst.0 <= c.bound.1, "{}: {} ulp at {:e}", c.name, worst.0, worst.1);
    }
}

/// 10^8 log-uniform points over every binade of both signs per function,
/// plus the special values (about 2 minutes on 2 cores).
#[test]
#[ignore = "minutes; run with --release -- --ignored (see module doc)"]
fn many_f64() {
    const N: u64 = 100_000_000;
    const CHUNK: usize = 1 << 16;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    println!("| function | max ulp vs libm | at x | points off by >= 1 ulp |");
    for c in heavy_cases() {
        let results: Vec<(u64, f64, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let c = &c;
                    s.spawn(move || {
                        let mut rng = Rng(1000 + t);
                        let mut xs = vec![0.0; CHUNK];
                        let mut out = vec![0.0; CHUNK];
                        let (mut worst, mut at, mut off) = (0, 0.0, 0);
                        let mut done = 0;
                        let mut first = t == 0;
                        while done < N / threads {
                            if first {
                                // The special values go in with the first chunk.
                                xs = specials();
                                out = vec![0.0; xs.len()];
                                first = false;
                            } else {
                                xs.resize(CHUNK, 0.0);
                                out.resize(CHUNK, 0.0);
                                xs.iter_mut().for_each(|x| *x = rng.log_uniform_f64());
                                done += CHUNK as u64;
                            }
                            (c.s64)(&xs, &mut out);
                            for (&x, &y) in xs.iter().zip(&out) {
                                let e = ulps64(y, (c.reference)(x));
                                off += u64::from(e > 0);
                                if e > worst {
                                    (worst, at) = (e, x);
                                }
                            }
                        }
                        (worst, at, off)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or((u64::MAX, f64::NAN, 0))).collect()
        });
        let worst = results.iter().fold((0, 0.0, 0), |acc, r| {
            let (w, a) = if r.0 > acc.0 { (r.0, r.1) } else { (acc.0, acc.1) };
            (w, a, acc.2 + r.2)
        });
        println!("| {} | {} | {:e} | {} |", c.name, worst.0, worst.1, worst.2);
        assert!(worst.0 <= c.bound.0, "{}: {} ulp at {:e}", c.name, worst.0, worst.1);
    }
}
