//! The f64 kernels, one element at a time.
//!
//! Every function here is `#[inline(always)]`, branch-free (choices are value
//! selects that LLVM turns into blends) and built only from IEEE-754 basic
//! operations, `mul_add` (a fused multiply-add, exactly rounded on every
//! target), bit casts and integer adds/shifts on the bits. That is what lets
//! the same source be vectorised inside the `#[target_feature]` loops of
//! `mod.rs` and still give bit-identical results in the scalar entries and
//! the scalar tails: IEEE arithmetic does not depend on the lane it runs in,
//! and Rust never contracts `a * b + c` into an FMA on its own.
//!
//! Methods (all classical; coefficients are our own, from `gen_coeffs.py`):
//! - exp/expm1: Cody-Waite reduction x = k ln2 + r with a 32-bit ln2_hi (so
//!   `k * LN2_HI` and `x - k * LN2_HI` are exact), then e^r - 1 = r + r^2 Q(r)
//!   (as in fdlibm / Tang's method without the table), scaled by 2^k in two
//!   steps so that 2^k never has to be representable on its own.
//! - log/log1p: fdlibm's reduction x = 2^k (1+f), sqrt(2)/2 <= 1+f < sqrt(2),
//!   and log(1+f) = f - f^2/2 + s (f^2/2 + z G(z)), s = f/(2+f), z = s^2;
//!   log1p adds fdlibm's correction c = (rounding error of 1+x)/(1+x).
//! - sin/cos: k = round(x 2/pi), r = x - k pi/2 as a double-double with pi/2
//!   in three parts and an exact `k * PIO2_1` (Dekker's two-product through
//!   FMA); valid for |x| < 2^26, beyond which `reduce::rem_pio2_huge`
//!   (Payne-Hanek) takes over. The two minimax-like polynomials are fdlibm's
//!   forms, with the low word of r folded in.
//! - tanh = -t/(t+2) with t = expm1(-2|x|) (one formula for all |x|);
//!   logistic = (1 or e)/(1+e) with e = exp(-|x|), so nothing overflows
//!   (one division, no correction step: see `logistic`).
//! - erf: x (2/sqrt(pi) + x^2 E1(x^2)) below 0.75; above, 1 - erfc with
//!   erfc(a) = exp(-a^2) Q((a-4)/(a+4)), the variable change of Schonfelder
//!   (1978) that makes one polynomial cover [0.75, 6].

use super::coeffs::*;

/// 1.5 * 2^52: adding it rounds a float of magnitude < 2^51 to an integer,
/// which then sits in the low mantissa bits (two's complement).
const SHIFT: f64 = 6755399441055744.0;
/// `SHIFT.to_bits()`, so that `bits(SHIFT + k) - SHIFT_BITS == k`.
const SHIFT_BITS: u64 = 0x4338_0000_0000_0000;

/// Below this |x| sin and cos use the fast reduction (see module doc).
pub(super) const TRIG_FAST_MAX: f64 = 67108864.0; // 2^26

#[inline(always)]
fn fma(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

/// Horner's rule, coefficients highest degree first.
#[inline(always)]
fn horner<const N: usize>(x: f64, c: &[f64; N]) -> f64 {
    let Some((&first, rest)) = c.split_first() else {
        return 0.0;
    };
    rest.iter().fold(first, |acc, &ci| fma(acc, x, ci))
}

/// Picks `a` where `cond`, else `b` (written out so the intent is visible).
#[inline(always)]
fn select(cond: bool, a: f64, b: f64) -> f64 {
    if cond {
        a
    } else {
        b
    }
}

/// x clamped to [lo, hi], NaN kept (one min/max instruction each, unlike
/// `f64::clamp`'s NaN-ignoring min/max).
#[inline(always)]
fn clamp(x: f64, lo: f64, hi: f64) -> f64 {
    select(x < lo, lo, select(x > hi, hi, x))
}

/// 2^k for -1022 <= k <= 1023, built from the exponent bits.
#[inline(always)]
fn pow2i(k: i64) -> f64 {
    f64::from_bits((k.wrapping_add(1023) as u64) << 52)
}

/// The integer k held by `SHIFT + k`, as i64 and as f64.
#[inline(always)]
fn round_to_int(t: f64) -> (i64, f64) {
    (t.to_bits().wrapping_sub(SHIFT_BITS) as i64, t - SHIFT)
}

/// y * 2^k for -1100 <= k <= 1100 with one rounding: two exact steps of
/// 2^(k/2) keep each factor representable (overflow and gradual underflow
/// happen in the second multiply only).
#[inline(always)]
fn scale2(y: f64, k: i64) -> f64 {
    // floor(k / 2) with a logical shift (AVX2 has no 64-bit arithmetic one).
    // Wrapping: k is garbage (but y NaN) when the input was NaN.
    let k1 = (((k.wrapping_add(2048) as u64) >> 1) as i64).wrapping_sub(1024);
    y * pow2i(k1) * pow2i(k.wrapping_sub(k1))
}

/// Splits x (|x| <= 746) into k and r with x = k ln2 + r, |r| <= 0.35.
#[inline(always)]
fn exp_reduce(x: f64) -> (i64, f64) {
    let (k, kf) = round_to_int(fma(x, LOG2_E, SHIFT));
    // Exact: k * LN2_HI has at most 43 bits and is within a factor 2 of x.
    let hi = fma(-kf, LN2_HI, x);
    (k, fma(-kf, LN2_LO, hi))
}

/// e^r - 1 for |r| <= 0.35, with a relative error of about 2^-54.
#[inline(always)]
fn expm1_reduced(r: f64) -> f64 {
    fma(r * r, horner(r, &EXP_Q), r)
}

/// e^x as the unevaluated sum hi + lo (before scaling) and k: e^x = 2^k (hi + lo).
/// The pair carries the rounding error of 1 + (e^r - 1).
#[inline(always)]
fn exp_parts(x: f64) -> (f64, f64, i64) {
    // e^-746 < 2^-1075 rounds to 0 and e^710 overflows, so clamping there keeps
    // k in range without changing any result. A NaN flows through.
    let (k, r) = exp_reduce(clamp(x, -746.0, 710.0));
    let p = expm1_reduced(r);
    let hi = 1.0 + p;
    // Fast two-sum: |1| >= |p|.
    (hi, p - (hi - 1.0), k)
}

/// e^x.
#[inline(always)]
pub(super) fn exp(x: f64) -> f64 {
    let (hi, _, k) = exp_parts(x);
    scale2(hi, k)
}

/// e^x - 1 as hi + lo (before scaling by 2^k), for x clamped to [-60, 710].
///
/// One formula for every k: e^x - 1 = 2^k (c + r + r^2 Q(r)) with c = 1 - 2^-k
/// (exact for -53 <= k <= 53; beyond, the rounding of c is far below an
/// ulp of the result). c + r is summed exactly (fast two-sum: |c| >= |r|
/// unless c = 0), which avoids the cancellation of c + (e^r - 1) for k = 1,
/// r < 0.
#[inline(always)]
fn expm1_parts(x: f64) -> (f64, f64, i64) {
    // expm1(-60) rounds to -1; expm1(710) overflows.
    let (k, r) = exp_reduce(clamp(x, -60.0, 710.0));
    let p2 = r * r * horner(r, &EXP_Q);
    let c = 1.0 - pow2i(k.min(64).wrapping_neg());
    let a = c + r;
    let small = p2 + (r - (a - c));
    let hi = a + small;
    // Fast two-sum again: |a| >= |small|.
    (hi, small - (hi - a), k)
}

/// e^x - 1, accurate near 0.
#[inline(always)]
pub(super) fn expm1(x: f64) -> f64 {
    let (hi, _, k) = expm1_parts(x);
    // Keeps -0 (the reduction loses its sign).
    select(x == 0.0, x, scale2(hi, k))
}

/// -t / (t + 2) for t = th + tl in [-1, 0], with the rounding errors of the
/// sum and of the quotient corrected (one Newton step on the quotient).
///
/// One division: the quotient is `-th` times the reciprocal `r` (about one
/// ulp off), and the step adds `rem · r`, the residual `rem` computed
/// exactly by FMA; `r`'s own error then only scales a correction of about
/// an ulp. With a second division in place of each product (the quotient
/// and the correction both divided by `den`) the divider was the bound of
/// the vector loop: it issues one 4-lane `f64` division every few cycles
/// on the CPUs measured.
#[inline(always)]
fn neg_ratio(th: f64, tl: f64) -> f64 {
    let den = th + 2.0;
    // Fast two-sum (|2| >= |th|): den + dl = t + 2.
    let dl = (th - (den - 2.0)) + tl;
    let r = 1.0 / den;
    let q = -th * r;
    let rem = fma(-q, den, -th) - fma(q, dl, tl);
    fma(rem, r, q)
}

/// The integer part k (as f64) and f of x = 2^k (1+f), sqrt(2)/2 <= 1+f < sqrt(2),
/// for a positive normal x.
#[inline(always)]
fn log_reduce(x: f64) -> (f64, f64) {
    // fdlibm's trick: adding OFFSET carries into the exponent field exactly
    // when the mantissa is >= sqrt(2)/2 of the next binade, so k and the
    // mantissa re-based at 0x3fe6a09e come out with no compare.
    const OFFSET: u64 = 0x3ff0_0000_0000_0000 - 0x3fe6_a09e_0000_0000;
    let ix = x.to_bits().wrapping_add(OFFSET);
    let k = ((ix >> 52) as i64).wrapping_sub(0x3ff);
    let m = f64::from_bits((ix & 0x000f_ffff_ffff_ffff).wrapping_add(0x3fe6_a09e_0000_0000));
    let kf = f64::from_bits(SHIFT_BITS.wrapping_add(k as u64)) - SHIFT;
    (kf, m - 1.0)
}

/// k ln2 + log(1+f) + c for |f| <= 0.42 and a small correction c.
#[inline(always)]
fn log_reduced(kf: f64, f: f64, c: f64) -> f64 {
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let r = z * horner(z, &LOG_G);
    // log(1+f) = f - hfsq + s (hfsq + R) (fdlibm); everything but f is small.
    let small = fma(s, hfsq + r, fma(kf, LN2_LO, c)) - hfsq;
    // k LN2_HI is exact; k LN2_HI + f by fast two-sum (|k ln2| > |f| unless
    // k = 0), so the only rounding at the scale of the result is the last.
    let kl = kf * LN2_HI;
    let hi = kl + f;
    hi + ((f - (hi - kl)) + small)
}

/// ln x.
#[inline(always)]
pub(super) fn ln(x: f64) -> f64 {
    // Subnormals: scale into the normal range first.
    let sub = x < f64::MIN_POSITIVE;
    let xs = select(sub, x * 18014398509481984.0, x); // 2^54
    let (kf, f) = log_reduce(xs);
    let y = log_reduced(kf - select(sub, 54.0, 0.0), f, 0.0);
    let y = select(x == f64::INFINITY, x, y);
    let y = select(x == 0.0, f64::NEG_INFINITY, y);
    select(x < 0.0, f64::NAN, select(x.is_nan(), x, y))
}

/// ln(1 + x), accurate near 0.
#[inline(always)]
pub(super) fn ln_1p(x: f64) -> f64 {
    // u = 1 + x is a positive normal for every x > -1 (u >= 2^-53).
    let u = 1.0 + x;
    let (kf, f) = log_reduce(u);
    // The rounding error of u, exactly (fdlibm): u - x is exact (Sterbenz)
    // once u >= 2, u - 1 below.
    let c = select(u >= 2.0, 1.0 - (u - x), x - (u - 1.0)) / u;
    let y = log_reduced(kf, f, c);
    let y = select(x == f64::INFINITY || x == 0.0, x, y);
    let y = select(x == -1.0, f64::NEG_INFINITY, y);
    select(x < -1.0, f64::NAN, select(x.is_nan(), x, y))
}

/// tanh x = -t / (t + 2) with t = expm1(-2|x|) in [-1, 0]: one formula for
/// every |x|, saturating to exactly ±1 once t rounds to -1. t is kept as a
/// double-double so that the sum and the division add only half an ulp.
#[inline(always)]
pub(super) fn tanh(x: f64) -> f64 {
    let (hi, lo, k) = expm1_parts(-2.0 * x.abs());
    // k <= 0 here, and 2^k is exact down to expm1's clamp (k >= -87).
    let s = pow2i(k);
    let y = neg_ratio(hi * s, lo * s);
    // copysign keeps -0 (tanh(-0) = -0); a NaN has flowed through.
    y.copysign(x)
}

/// 1 / (1 + e^-x) without overflow: e = e^-|x| <= 1, and the numerator is e
/// for x < 0 (e^x / (1 + e^x)). One exp, one add, one division: the same
/// formula as the scalar `1 / (1 + exp(-x))`, with its three roundings
/// (about 3 ulp at worst, see `mod.rs`). Correcting them (e as a
/// double-double, the quotient refined) brought the error to 1 ulp but cost
/// either a second division or a Newton reciprocal: the divide unit and the
/// FMA ports were then both busy for longer than the exp itself, and the
/// kernel ran at 2.9-3.5x the scalar libm rate instead of 4.5-5x.
#[inline(always)]
pub(super) fn logistic(x: f64) -> f64 {
    let e = exp(-x.abs());
    select(x < 0.0, e, 1.0) / (1.0 + e)
}

/// erf x.
#[inline(always)]
pub(super) fn erf(x: f64) -> f64 {
    let a = x.abs();
    // |x| < 0.75: x (c0 + z E1(z)), with the product by c0 = 2/sqrt(pi) done
    // by one FMA on its leading part so that it is rounded once.
    let z = a * a;
    let small = fma(a, FRAC_2_SQRT_PI_HI, a * fma(z, horner(z, &ERF_E1), FRAC_2_SQRT_PI_LO));
    // |x| >= 0.75: 1 - exp(-a^2) Q(t). a^2 = zh + zl exactly (two-product),
    // and e^-(zh+zl) = e^-zh (1 - zl) to far below an ulp. Past 6, erf
    // rounds to 1; the clamp also keeps inf out of the polynomial.
    let ac = select(a > 6.0, 6.0, a);
    let zh = ac * ac;
    let zl = fma(ac, ac, -zh);
    let e = exp(-zh);
    let q = horner((ac - ERFC_C) / (ac + ERFC_C), &ERFC_Q);
    let large = 1.0 - fma(-e, zl, e) * q;
    // A NaN takes the second branch, where it has flowed through.
    select(a < ERF_SMALL, small, large).copysign(x)
}

/// sin and cos of r = rh + rl (|r| <= pi/4 + tiny), rotated by quadrant q:
/// returns sin(r + q pi/2).
#[inline(always)]
pub(super) fn sin_quadrant(q: u64, rh: f64, rl: f64) -> f64 {
    let z = rh * rh;
    // sin(rh + rl) = rh + rh z S(z) + rl cos(rh), cos(rh) ~ 1 - z/2.
    let sin = rh + fma(rh * z, horner(z, &SIN_S), rl * fma(-0.5, z, 1.0));
    // cos(rh + rl) = 1 - rh^2/2 + rh^4 C - rh rl. rh^2 = z + zl exactly; w =
    // 1 - z/2 is rounded and its error ((1 - w) - hz) is exact (fdlibm).
    let zl = fma(rh, rh, -z);
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let tail = ((1.0 - w) - hz) + fma(z * z, horner(z, &COS_C), -fma(rh, rl, 0.5 * zl));
    let cos = w + tail;
    let v = select(q & 1 == 0, sin, cos);
    // Quadrants 2 and 3 negate.
    f64::from_bits(v.to_bits() ^ ((q & 2) << 62))
}

/// r = x - k pi/2 as a double-double, and k mod 4, for |x| < 2^26.
#[inline(always)]
pub(super) fn rem_pio2_fast(x: f64) -> (u64, f64, f64) {
    let t = fma(x, TWO_OVER_PI, SHIFT);
    let (k, kf) = round_to_int(t);
    // k PIO2_1 = p + pe exactly; x - p is exact (Sterbenz: p is within a factor
    // 2 of x whenever k != 0).
    let p = kf * PIO2_1;
    let pe = fma(kf, PIO2_1, -p);
    let ra = x - p;
    let t2 = fma(kf, PIO2_2, pe);
    // ra - t2 by two-sum (ra may be smaller than t2 near a multiple of pi/2),
    // then the third part of pi/2.
    let hi = ra - t2;
    let bb = hi - ra;
    let lo = ((ra - (hi - bb)) - (t2 + bb)) - kf * PIO2_3;
    let rh = hi + lo;
    (k as u64 & 3, rh, lo - (rh - hi))
}

/// sin x for |x| < 2^26 (the caller routes the rest to the exact path).
#[inline(always)]
pub(super) fn sin_fast(x: f64) -> f64 {
    let (q, rh, rl) = rem_pio2_fast(x);
    // -0 (the reduction turns it into +0).
    select(x == 0.0, x, sin_quadrant(q, rh, rl))
}

/// cos x for |x| < 2^26 (the caller routes the rest to the exact path).
#[inline(always)]
pub(super) fn cos_fast(x: f64) -> f64 {
    let (q, rh, rl) = rem_pio2_fast(x);
    sin_quadrant(q.wrapping_add(1), rh, rl)
}
