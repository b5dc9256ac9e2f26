//! The elementwise ops of `jax.lax` beyond the core set of
//! [`crate::elementwise`]: hyperbolic and inverse trigonometric functions,
//! `exp2`/`log2`/`log10`, `erfc`, `erf_inv`, `cbrt`, `rem`, `nextafter`,
//! `clamp`, `is_finite` and `integer_pow`.
//!
//! The unary and binary ones are declared with the same macros as the core
//! ops ([`unary_elementwise_op!`](crate::unary_elementwise_op),
//! [`binary_elementwise_op!`](crate::binary_elementwise_op)), so the CPU
//! backend runs and fuses them with no kernel of their own. The irregular
//! ones — `clamp` (three operands), `is_finite` (a bool result) and
//! `integer_pow` (a parameter) — are written by hand with the same block
//! math and batching rule. Derivatives follow JAX's rules, including its
//! choices at the edges: `clamp` passes no tangent at its bounds,
//! `integer_pow(x, 0)` has a zero derivative, and `d integer_pow(x, n) =
//! n integer_pow(x, n - 1) dx` is finite at 0.

use anvil_core::shape::broadcast_shapes;
use anvil_core::{
    op::expect_arity, register_rule, Block, BlockAt, BlockMut, DType, ElementwiseMath, Error, Op,
    Result, TensorType, Var,
};

use super::LaxExt;
use crate::ad::{add_tangents, scale};
use crate::api::VarExt;
use crate::elementwise::{block_error, unary_block, unary_rule, Domain, UnaryMath};
use crate::{binary_elementwise_op, unary_elementwise_op};

use std::f64::consts::{FRAC_2_SQRT_PI, LN_10, LN_2, PI};

/// Float functions the standard library does not have, for `f64` and `f32`
/// (the unary bodies are written once for both).
trait Special: Copy {
    fn erfc(self) -> Self;
    fn erf_inv(self) -> Self;
    fn next_after(self, toward: Self) -> Self;
}

impl Special for f64 {
    fn erfc(self) -> Self {
        libm::erfc(self)
    }
    fn erf_inv(self) -> Self {
        erf_inv_f64(self)
    }
    fn next_after(self, toward: Self) -> Self {
        libm::nextafter(self, toward)
    }
}

impl Special for f32 {
    fn erfc(self) -> Self {
        libm::erfcf(self)
    }
    fn erf_inv(self) -> Self {
        erf_inv_f64(f64::from(self)) as f32
    }
    fn next_after(self, toward: Self) -> Self {
        libm::nextafterf(self, toward)
    }
}

/// The inverse error function: Giles' single-precision approximation
/// ("Approximating the erfinv function", GPU Computing Gems, 2011) where it
/// holds (`w = −ln(1 − y²) < 16`, `|y| < 1 − 5·10⁻⁸`), beyond it the
/// asymptotic `x² ≈ w − ln(x √π / 2)`; then Halley steps on `erf` (on
/// `erfc` in the tails, where `erf(x) − y` would cancel) until a step no
/// longer moves `x`, at most [`ERF_INV_STEPS`]: two or three from Giles'
/// start, a few more from the asymptotic one. `±1` give `±inf`, arguments
/// outside `[-1, 1]` and NaN give NaN.
/// The most Halley steps [`erf_inv_f64`] takes (it stops earlier when a
/// step no longer moves `x`).
const ERF_INV_STEPS: usize = 12;

fn erf_inv_f64(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return y * f64::INFINITY;
    }
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let p = if w >= 16.0 {
        // Past Giles' range (his polynomial would start far off).
        let r = w.sqrt();
        (w - (r * 0.5 * PI.sqrt()).ln()).sqrt() / y.abs()
    } else if w < 5.0 {
        let w = w - 2.5;
        [
            2.810_226_36e-08,
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ]
        .iter()
        .fold(0.0, |p, &c| p * w + c)
    } else {
        let w = w.sqrt() - 3.0;
        [
            -0.000_200_214_257,
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ]
        .iter()
        .fold(0.0, |p, &c| p * w + c)
    };
    let mut x = p * y;
    // Halley on f(x) = erf(x) - y (f'' = -2x f'): x -= f / (f' + x f).
    let (a, tail) = (y.abs(), y.abs() > 0.5);
    let s = y.signum();
    for _ in 0..ERF_INV_STEPS {
        let d = FRAC_2_SQRT_PI * (-x * x).exp();
        if d == 0.0 || !x.is_finite() {
            break;
        }
        // In the tails, f = s (1 - a - erfc(|x|)) computed without cancellation.
        let f = if tail { s * ((1.0 - a) - libm::erfc(x.abs())) } else { libm::erf(x) - y };
        let step = f / (d + x * f);
        x -= step;
        if step.abs() <= f64::EPSILON * x.abs() {
            break;
        }
    }
    x
}

unary_elementwise_op! {
    /// Hyperbolic sine. `d sinh(x) = cosh(x) dx`.
    pub struct Sinh = "sinh";
    float: |x| x.sinh();
    derivative: |x, y| x.cosh();
}
unary_elementwise_op! {
    /// Hyperbolic cosine. `d cosh(x) = sinh(x) dx`.
    pub struct Cosh = "cosh";
    float: |x| x.cosh();
    derivative: |x, y| x.sinh();
}
unary_elementwise_op! {
    /// Inverse sine. `d asin(x) = dx / sqrt(1 - x²)`.
    pub struct Asin = "asin";
    float: |x| x.asin();
    derivative: |x, y| (1.0 - x.square()).rsqrt();
}
unary_elementwise_op! {
    /// Inverse cosine. `d acos(x) = -dx / sqrt(1 - x²)`.
    pub struct Acos = "acos";
    float: |x| x.acos();
    derivative: |x, y| -(1.0 - x.square()).rsqrt();
}
unary_elementwise_op! {
    /// Inverse tangent. `d atan(x) = dx / (1 + x²)`.
    pub struct Atan = "atan";
    float: |x| x.atan();
    derivative: |x, y| (x.square() + 1.0).recip();
}
unary_elementwise_op! {
    /// Inverse hyperbolic sine. `d asinh(x) = dx / sqrt(x² + 1)`.
    pub struct Asinh = "asinh";
    float: |x| x.asinh();
    derivative: |x, y| (x.square() + 1.0).rsqrt();
}
unary_elementwise_op! {
    /// Inverse hyperbolic cosine (`x >= 1`). `d acosh(x) = dx / sqrt(x² - 1)`,
    /// as `rsqrt(x - 1) rsqrt(x + 1)` (JAX's form, no cancellation near 1).
    pub struct Acosh = "acosh";
    float: |x| x.acosh();
    derivative: |x, y| (x - 1.0).rsqrt() * (x + 1.0).rsqrt();
}
unary_elementwise_op! {
    /// Inverse hyperbolic tangent (`|x| < 1`). `d atanh(x) = dx / (1 - x²)`.
    pub struct Atanh = "atanh";
    float: |x| x.atanh();
    derivative: |x, y| (1.0 - x.square()).recip();
}
unary_elementwise_op! {
    /// `2^x`. `d 2^x = 2^x ln 2 dx`.
    pub struct Exp2 = "exp2";
    float: |x| x.exp2();
    derivative: |x, y| y * LN_2;
}
unary_elementwise_op! {
    /// Base-2 logarithm. `d log2(x) = dx / (x ln 2)`.
    pub struct Log2 = "log2";
    float: |x| x.log2();
    derivative: |x, y| x.recip() * (1.0 / LN_2);
}
unary_elementwise_op! {
    /// Base-10 logarithm. `d log10(x) = dx / (x ln 10)`.
    pub struct Log10 = "log10";
    float: |x| x.log10();
    derivative: |x, y| x.recip() * (1.0 / LN_10);
}
unary_elementwise_op! {
    /// The complementary error function `1 - erf(x)`, accurate where it is
    /// small. `d erfc(x) = -2/sqrt(π) e^(-x²) dx`.
    pub struct Erfc = "erfc";
    float: |x| Special::erfc(x);
    derivative: |x, y| (-x.square()).exp() * -FRAC_2_SQRT_PI;
}
unary_elementwise_op! {
    /// The inverse error function on `[-1, 1]` (`±inf` at `±1`, NaN
    /// outside). `d erf_inv(x) = sqrt(π)/2 e^(y²) dx`.
    pub struct ErfInv = "erf_inv";
    float: |x| Special::erf_inv(x);
    derivative: |x, y| y.square().exp() * (1.0 / FRAC_2_SQRT_PI);
}
unary_elementwise_op! {
    /// Cube root, of either sign. `d cbrt(x) = dx / (3 y²)`.
    pub struct Cbrt = "cbrt";
    float: |x| x.cbrt();
    derivative: |x, y| y.square().recip() * (1.0 / 3.0);
}

// ------------------------------------------------------------ binary ops

binary_elementwise_op! {
    /// The remainder of `a / b` truncated toward zero, with the sign of `a`
    /// (C's `fmod`, `jax.lax.rem`). For integers, `a rem 0` is `a` (XLA's
    /// convention). `d rem(a, b) = da - trunc(a / b) db`.
    pub struct Rem = "rem";
    domain: Numeric;
    float: |a, b| a % b;
    i64: |a, b| if b == 0 { a } else { a.wrapping_rem(b) };
    jvp: jvp_rem;
}
binary_elementwise_op! {
    /// The next representable float after `a` in the direction of `b`
    /// (`jax.lax.nextafter`). Its derivative is taken as `da`: the result
    /// is `a` moved by one unit in the last place, which no finite
    /// difference can tell from `a` (JAX defines none and raises).
    pub struct Nextafter = "nextafter";
    domain: Float;
    float: |a, b| Special::next_after(a, b);
    jvp: jvp_nextafter;
}

/// `d rem(a, b) = da - trunc(a / b) db` (JAX: `-g sign(a/b) floor(|a/b|)`).
fn jvp_rem(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    if !out.dtype().is_float() {
        return Ok(None);
    }
    let q = || {
        let q = &p[0] / &p[1];
        -(q.sign() * q.abs().floor())
    };
    Ok(add_tangents(t[0].clone(), scale(&t[1], q), out.shape()))
}

fn jvp_nextafter(_: &dyn Op, _: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    Ok(add_tangents(t[0].clone(), None, out.shape()))
}

// ------------------------------------------------------------------ clamp

/// `clamp(lo, x, hi) = min(max(x, lo), hi)`, elementwise with NumPy
/// broadcasting of the three operands (`jax.lax.clamp`, operands in its
/// order). Tangents as JAX: `x`'s passes where `lo < x < hi`, `lo`'s where
/// `x < lo < hi`, `hi`'s where `hi < x`; none at a tie, where the result is
/// no function of one operand alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Clamp;

impl Op for Clamp {
    fn name(&self) -> &'static str {
        "clamp"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 3)?;
        let x = &inputs[1];
        Domain::Numeric.check("clamp", 1, x.dtype())?;
        let mut shape = x.shape().to_vec();
        for (i, what) in [(0, "0 (lo)"), (2, "2 (hi)")] {
            if inputs[i].dtype() != x.dtype() {
                return Err(Error::dtype(
                    "clamp",
                    what,
                    inputs[i].dtype(),
                    format!("the dtype of x ({})", x.dtype()),
                ));
            }
            shape = broadcast_shapes("clamp", &shape, inputs[i].shape(), what)?;
        }
        Ok(TensorType::new(x.dtype(), shape))
    }
    fn is_elementwise(&self) -> bool {
        true
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

fn clamp_block<T: Copy + PartialOrd>(lo: &[T], x: &[T], hi: &[T], out: &mut [T]) {
    for (((d, &l), &v), &h) in out.iter_mut().zip(lo).zip(x).zip(hi) {
        // max then min, each keeping a NaN operand (NaN != NaN).
        let m = if v < l { l } else { v };
        *d = if h < m { h } else { m };
    }
}

impl ElementwiseMath for Clamp {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        match (args, out) {
            ([Block::F64(l), Block::F64(x), Block::F64(h)], BlockMut::F64(y)) => {
                clamp_block(l, x, h, y)
            }
            ([Block::F32(l), Block::F32(x), Block::F32(h)], BlockMut::F32(y)) => {
                clamp_block(l, x, h, y)
            }
            ([Block::I64(l), Block::I64(x), Block::I64(h)], BlockMut::I64(y)) => {
                clamp_block(l, x, h, y)
            }
            (args, out) => return Err(block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// JAX's clamp jvp: each operand's tangent passes only where the result is
/// that operand strictly.
fn jvp_clamp(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    if !out.dtype().is_float() {
        return Ok(None);
    }
    let (lo, x, hi) = (&p[0], &p[1], &p[2]);
    let gate = |mask: Var, t: &Var| mask.select(t, &t.zeros_like());
    let and = |a: Var, b: Var| a.select(&b, &b.zeros_like());
    let dlo = t[0].as_ref().map(|t| gate(and(lo.gt(x), lo.lt(hi)), &t.broadcast_to(out.shape())));
    let dx = t[1].as_ref().map(|t| gate(and(x.gt(lo), x.lt(hi)), &t.broadcast_to(out.shape())));
    let dhi = t[2].as_ref().map(|t| gate(hi.lt(x), &t.broadcast_to(out.shape())));
    let sum = add_tangents(dlo, dx, out.shape());
    Ok(add_tangents(sum, dhi, out.shape()))
}

register_rule!(VmapRule, Clamp, crate::batching::vmap_elementwise);
register_rule!(JvpRule, Clamp, jvp_clamp);

// -------------------------------------------------------------- is_finite

/// Whether each element is neither infinite nor NaN (`jax.lax.is_finite`):
/// a float operand, a bool result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct IsFinite;

impl Op for IsFinite {
    fn name(&self) -> &'static str {
        "is_finite"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        Ok(unary_rule(self, Domain::Float, inputs)?.with_dtype(DType::Bool))
    }
    fn is_elementwise(&self) -> bool {
        true
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ElementwiseMath for IsFinite {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        match (args, out) {
            ([Block::F64(x)], BlockMut::Bool(y)) => {
                y.iter_mut().zip(*x).for_each(|(d, v)| *d = v.is_finite())
            }
            ([Block::F32(x)], BlockMut::Bool(y)) => {
                y.iter_mut().zip(*x).for_each(|(d, v)| *d = v.is_finite())
            }
            (args, out) => return Err(block_error(self, args, &out)),
        }
        Ok(())
    }
}

fn jvp_none(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(None)
}

register_rule!(VmapRule, IsFinite, crate::batching::vmap_elementwise);
register_rule!(JvpRule, IsFinite, jvp_none);

// ------------------------------------------------------------ integer_pow

/// `x^y` for a fixed integer `y` (`jax.lax.integer_pow`): `x^0` is 1
/// everywhere (NaN and 0 included), a negative `y` is `1 / x^|y|` (floats
/// only). `d x^y = y x^(y-1) dx`, itself an `integer_pow`, so it is finite
/// at 0 for `y >= 1` and zero for `y = 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntegerPow {
    /// The exponent.
    pub y: i32,
}

impl Op for IntegerPow {
    fn name(&self) -> &'static str {
        "integer_pow"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let t = unary_rule(self, Domain::Numeric, inputs)?;
        if t.dtype() == DType::I64 && self.y < 0 {
            return Err(Error::invalid(
                "integer_pow",
                "y",
                format!("a negative exponent ({}) needs a float operand, not i64", self.y),
            ));
        }
        Ok(t)
    }
    fn params(&self) -> String {
        format!("y={}", self.y)
    }
    fn is_elementwise(&self) -> bool {
        true
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl UnaryMath for IntegerPow {
    fn f64(&self, x: f64) -> f64 {
        x.powi(self.y)
    }
    fn f32(&self, x: f32) -> f32 {
        x.powi(self.y)
    }
    fn i64(&self, x: i64) -> i64 {
        x.wrapping_pow(self.y.unsigned_abs())
    }
}

impl ElementwiseMath for IntegerPow {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        unary_block(self, args, out)
    }
}

/// `d x^y = y x^(y-1) dx`; zero for `y = 0` (JAX's rule, safe at `x = 0`).
fn jvp_integer_pow(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    let y = op.try_downcast::<IntegerPow>()?.y;
    if y == 0 || !p[0].dtype().is_float() {
        return Ok(None);
    }
    Ok(scale(&t[0], || p[0].integer_pow(y - 1) * f64::from(y)))
}

register_rule!(VmapRule, IntegerPow, crate::batching::vmap_elementwise);
register_rule!(JvpRule, IntegerPow, jvp_integer_pow);
register_rule!(SparsityRule, IntegerPow, sparsity_integer_pow);
register_rule!(SparsityRule, Nextafter, sparsity_nextafter);

use anvil_core::sparsity::{elementwise, Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// Elementwise, except `x^0`: a constant.
fn sparsity_integer_pow(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    if op.try_downcast::<IntegerPow>()?.y == 0 {
        return Ok(Arc::new(IndexSets::empty(out.numel())));
    }
    elementwise(op, args, out, cx)
}

/// The derivative is `da` alone: `a` broadcast.
fn sparsity_nextafter(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    elementwise(op, &args[..1], out, cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_inv_inverts_erf_to_full_precision() {
        for &x in &[-5.5, -3.0, -1.2, -0.3, 0.0, 1e-9, 0.2, 0.7, 1.5, 2.9, 4.0, 5.2] {
            let y = libm::erf(x);
            let back = erf_inv_f64(y);
            // `y` carries a rounding error of half an ulp; erf_inv amplifies
            // it by 1 / erf'(x), which is large in the tails.
            let conditioning = f64::EPSILON * y.abs() / (FRAC_2_SQRT_PI * (-x * x).exp());
            let tol = 1e-14 * (1.0 + x.abs()) + 2.0 * conditioning;
            if y.abs() < 1.0 {
                assert!((back - x).abs() <= tol, "erf_inv(erf({x})) = {back}");
            }
        }
        // Near ±1 (past Giles' range): erfc of the result gives back 1 - |y|,
        // which is exact there, to a few ulp; and a value from mpmath.
        for delta in [1e-6, 1e-8, 5e-9, 1e-10, 1e-12, 1e-13, 1e-15, 1e-16] {
            for sign in [1.0, -1.0] {
                let y = sign * (1.0 - delta);
                let left = 1.0 - sign * y; // exact: y is within a factor 2 of 1
                let x = erf_inv_f64(y);
                let err = (libm::erfc(x.abs()) - left).abs() / left;
                assert!(x.signum() == sign && err < 1e-13, "erf_inv({y}) = {x}: {err:e}");
            }
        }
        assert!((erf_inv_f64(1.0 - 1e-13) - 5.261483331372676).abs() < 1e-14);
        assert_eq!(erf_inv_f64(1.0), f64::INFINITY);
        assert_eq!(erf_inv_f64(-1.0), f64::NEG_INFINITY);
        assert!(erf_inv_f64(1.5).is_nan() && erf_inv_f64(f64::NAN).is_nan());
    }
}
