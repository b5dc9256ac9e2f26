//! Composite functions: plain functions over primitives, with no rules of
//! their own. Every transform handles them through the primitives they are
//! made of (tinygrad's `tanh` is one line; so are these).

use crate::api::{floated, VarExt};
use anvil_core::shape::{dim_mul, is_symbolic};
use anvil_core::{DType, DimSize, Var};

/// Number of elements in the reduced axes, as a dimension (symbolic when
/// an axis is).
fn count(x: &Var, axes: &[i64]) -> usize {
    let r = x.rank() as i64;
    let dims = axes.iter().map(|&a| {
        x.shape().get(if a < 0 { (a + r) as usize } else { a as usize }).copied().unwrap_or(1)
    });
    // A failure (an overflow) leaves a count the reduction has already
    // reported as an error on `x`.
    dims.collect::<Vec<_>>().iter().try_fold(1usize, |n, &d| dim_mul(n, d)).unwrap_or(1)
}

/// Mean over `axes` (of an integer or bool array: an `f64` mean, summed in
/// `f64` as JAX's, so large integers do not wrap). Over a symbolic axis it
/// divides by the size bound at run time.
pub fn mean(x: &Var, axes: &[i64], keepdims: bool) -> Var {
    let x = &floated(x);
    let s = if keepdims { x.sum_keepdims(axes) } else { x.sum(axes) };
    let n = count(x, axes);
    if is_symbolic(n) {
        let dtype = if s.dtype().is_float() { s.dtype() } else { DType::F64 };
        let s = if s.dtype() == dtype { s } else { s.cast(dtype) };
        &s / &Var::apply_op(Box::new(DimSize { dim: n, dtype }), &[])
    } else {
        s / n as f64
    }
}

/// Population variance over `axes`: `mean((x - mean(x))^2)`.
pub fn var(x: &Var, axes: &[i64], keepdims: bool) -> Var {
    let x = &floated(x);
    let centered = x - &mean(x, axes, true);
    mean(&centered.square(), axes, keepdims)
}

/// `log(sum(exp(x)))` over `axes`, shifted by the maximum so nothing overflows.
/// The shift is a constant for differentiation purposes in exact arithmetic,
/// so its gradient contributions cancel.
pub fn logsumexp(x: &Var, axes: &[i64], keepdims: bool) -> Var {
    let m = x.max(axes, true).stop_gradient();
    let m = m.select_finite();
    let s = (x - &m).exp().sum_keepdims(axes).log() + &m;
    if keepdims || axes.is_empty() {
        s
    } else {
        s.squeeze(axes)
    }
}

/// `exp(x) / sum(exp(x))` along `axis`, shifted by the maximum.
pub fn softmax(x: &Var, axis: i64) -> Var {
    let m = x.max(&[axis], true).stop_gradient();
    let e = (x - &m).exp();
    &e / &e.sum_keepdims(&[axis])
}

/// `x − logsumexp(x)` along `axis`, computed as JAX's: `y = x − max` first,
/// then `y − log Σ exp(y)`, so that large entries lose no digits (`x − lse`
/// of `1e10`s would subtract two numbers near `1e10`).
pub fn log_softmax(x: &Var, axis: i64) -> Var {
    let m = x.max(&[axis], true).stop_gradient().select_finite();
    let y = x - &m;
    &y - &y.exp().sum_keepdims(&[axis]).log()
}

/// Replaces infinite values by zero (keeps `logsumexp` of all `-inf` at `-inf`, not NaN).
pub(crate) trait SelectFinite {
    fn select_finite(&self) -> Var;
}
impl SelectFinite for Var {
    fn select_finite(&self) -> Var {
        let finite = self.abs().lt(&self.scalar_like(f64::INFINITY));
        finite.select(self, &self.zeros_like())
    }
}
