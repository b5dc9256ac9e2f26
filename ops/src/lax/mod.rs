//! The ops of `jax.lax` and `jax.numpy` that a ported program meets beyond
//! the core set: more elementwise math ([`unary`]), cumulative reductions
//! and the associative scan ([`cumulative`]), sorting ([`sort`]), dynamic
//! indexing, general gathers and scatters and `lax.pad` ([`indexing`]).
//!
//! Users reach them through [`LaxExt`] (`x.sinh()`, `x.cumsum(0, false)`,
//! `x.sort(-1, false)`; the prelude brings it in, beside `VarExt`) and the
//! free functions of this module under JAX's names ([`clamp`],
//! [`dynamic_slice`], [`gather`], [`pad`]...).
//!
//! What is a primitive and what is a composite follows the style guide:
//! the elementwise functions, the cumulative reductions and the sort are
//! primitives (speed, and the sort's permutation); dynamic slices, gathers,
//! scatters and padding with interior or negative widths are functions
//! over `take`, `scatter_add`, `pad`, `slice` and `select`, whose rules
//! they inherit, so every transform handles them with no rule of their
//! own.

pub mod cumulative;
pub mod indexing;
pub mod sort;
pub mod unary;

pub use cumulative::{associative_scan, Combine, Cumulative, CumulativeKind};
pub use indexing::{
    dynamic_slice, dynamic_update_slice, gather, pad, scatter, scatter_add, GatherDimensionNumbers,
    GatherMode, ScatterDimensionNumbers,
};
pub use sort::{take_along_axis, Sort};
pub use unary::*;

use crate::api::{counted, floated, VarExt};
use anvil_core::{shape::normalize_axis, DType, Op, Result, Var};

/// Applies the op `make` builds to `args`, or records its error in the
/// trace and returns a poisoned value.
fn build(args: &[&Var], make: impl FnOnce() -> Result<Box<dyn Op>>) -> Var {
    match make() {
        Ok(op) => Var::apply_op(op, args),
        Err(e) => {
            let tracer = args
                .first()
                .map(|a| a.tracer().clone())
                .unwrap_or_else(anvil_core::trace::current_or_detached);
            tracer.record(e);
            tracer.poisoned()
        }
    }
}

/// `clamp(lo, x, hi)`: `min(max(x, lo), hi)`, the three broadcasting
/// (`jax.lax.clamp`, its operand order; see [`Clamp`] for the derivative).
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// use anvil_ops::VarExt;
/// // [-2, 0.5, 3] clamped to [-1, 1]: [-1, 0.5, 1].
/// let f = |x: &Var| anvil_ops::lax::clamp(&x.full_like(-1.0), x, &x.full_like(1.0));
/// assert_eq!(trace(&f, &Tensor::zeros(&[3])?)?.output_types()[0].shape(), &[3]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
pub fn clamp(lo: &Var, x: &Var, hi: &Var) -> Var {
    Var::apply_op(Box::new(Clamp), &[lo, x, hi])
}

/// `jax.lax.div`: `a / b` rounding towards zero for integers (C's
/// division; the `/` operator divides integers as `f64`, as `jnp`'s `/`
/// does), the two promoted to one dtype first.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![7i64, -7], &[2])?;
/// let f = |x: &Var| vec![anvil::lax::div(x, &x.full_like(2.0)), x / &x.full_like(2.0)];
/// let out = f.eval(&x)?;
/// assert_eq!(out[0].to_vec::<i64>()?, vec![3, -3]);
/// assert_eq!(out[1].to_vec::<f64>()?, vec![3.5, -3.5]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn div(a: &Var, b: &Var) -> Var {
    crate::api::promoted_apply(a, crate::elementwise::Div, b)
}

/// A cumulative reduction along `axis` (negative counts from the end).
fn cumulative(x: &Var, kind: CumulativeKind, axis: i64, reverse: bool) -> Var {
    build(&[x], || {
        let op =
            Cumulative { kind, axis: normalize_axis("cumulative", axis, x.shape(), "0")?, reverse };
        Ok(Box::new(op))
    })
}

/// The methods of the ops of this module, under JAX's names. Brought in by
/// `anvil::prelude::*`.
///
/// ```
/// use anvil_core::{trace, DType, Tensor, Var};
/// use anvil_ops::lax::LaxExt;
/// // [3, 1, 2]: cumsum [3, 4, 6], sort [1, 2, 3], argsort [1, 2, 0].
/// let f = |x: &Var| vec![x.cumsum(0, false), x.sort(0, false), x.argsort(0, false)];
/// let g = trace(&f, &Tensor::zeros(&[3])?)?;
/// let dtypes: Vec<DType> = g.output_types().iter().map(|t| t.dtype()).collect();
/// assert_eq!(dtypes, [DType::F64, DType::F64, DType::I64]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
pub trait LaxExt: VarExt {
    crate::api::float_methods! {
        /// Hyperbolic sine (of an integer or `bool`: in `f64`, as JAX
        /// promotes it, as every function of this group).
        sinh => Sinh;
        /// Hyperbolic cosine.
        cosh => Cosh;
        /// Inverse sine.
        asin => Asin;
        /// Inverse cosine.
        acos => Acos;
        /// Inverse tangent.
        atan => Atan;
        /// Inverse hyperbolic sine.
        asinh => Asinh;
        /// Inverse hyperbolic cosine.
        acosh => Acosh;
        /// Inverse hyperbolic tangent.
        atanh => Atanh;
        /// `2^x`.
        exp2 => Exp2;
        /// Base-2 logarithm.
        log2 => Log2;
        /// Base-10 logarithm.
        log10 => Log10;
        /// Complementary error function.
        erfc => Erfc;
        /// Inverse error function.
        erf_inv => ErfInv;
        /// Cube root.
        cbrt => Cbrt;
        /// Whether each element is finite (bool).
        is_finite => IsFinite;
    }

    /// `x^y` for a fixed integer `y` (`jax.lax.integer_pow`).
    fn integer_pow(&self, y: i32) -> Var {
        self.as_var().apply(IntegerPow { y }, &[])
    }
    /// Remainder with the sign of `self` (`jax.lax.rem`, C's `fmod`).
    fn rem(&self, other: &Var) -> Var {
        crate::api::promoted_apply(self.as_var(), Rem, other)
    }
    /// The next float after `self` toward `other` (`jax.lax.nextafter`).
    fn nextafter(&self, other: &Var) -> Var {
        floated(self.as_var()).apply(Nextafter, &[&floated(other)])
    }
    /// `minimum(maximum(self, lo), hi)`, as `jnp.clip` computes it: the
    /// derivative is 1/2 where `self` equals a bound (ties of `maximum` and
    /// `minimum` split evenly), where [`clamp`] (`lax.clamp`) gives 0.
    fn clip(&self, lo: &Var, hi: &Var) -> Var {
        self.as_var().maximum(lo).minimum(hi)
    }
    /// `self & other` elementwise, each true where non-zero (`jnp.logical_and`;
    /// `bool`).
    fn logical_and(&self, other: &Var) -> Var {
        let (a, b) = (truth(self.as_var()), truth(other));
        a.select(&b, &a)
    }
    /// `self | other` elementwise (`jnp.logical_or`; `bool`).
    fn logical_or(&self, other: &Var) -> Var {
        let (a, b) = (truth(self.as_var()), truth(other));
        a.select(&a, &b)
    }
    /// `self ^ other` elementwise (`jnp.logical_xor`; `bool`).
    fn logical_xor(&self, other: &Var) -> Var {
        truth(self.as_var()).not_equal(&truth(other))
    }
    /// `!self` elementwise (`jnp.logical_not`; `bool`).
    fn logical_not(&self) -> Var {
        let a = truth(self.as_var());
        a.equal(&a.zeros_like())
    }
    /// Whether any element over `axes` is true (non-zero), as `jnp.any`.
    fn any(&self, axes: &[i64], keepdims: bool) -> Var {
        truth(self.as_var()).max(axes, keepdims)
    }
    /// Whether every element over `axes` is true (non-zero), as `jnp.all`.
    fn all(&self, axes: &[i64], keepdims: bool) -> Var {
        truth(self.as_var()).min(axes, keepdims)
    }
    /// Whether any element is true (non-zero): `jnp.any` over all axes
    /// (bool, rank 0).
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec(vec![0.0, 2.0, 0.0, 0.0], &[2, 2])?;
    /// let r = (|x: &Var| vec![x.any_all(), x.all_all()]).eval(&x)?;
    /// assert_eq!((r[0].to_vec::<bool>()?, r[1].to_vec::<bool>()?), (vec![true], vec![false]));
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn any_all(&self) -> Var {
        truth(self.as_var()).max_all()
    }
    /// Whether every element is true (non-zero): `jnp.all` over all axes
    /// (bool, rank 0).
    fn all_all(&self) -> Var {
        truth(self.as_var()).min_all()
    }

    /// Running sum along `axis` (`jnp.cumsum`; `reverse` as `lax.cumsum`).
    fn cumsum(&self, axis: i64, reverse: bool) -> Var {
        cumulative(&counted(self.as_var()), CumulativeKind::Sum, axis, reverse)
    }
    /// Running product along `axis` (of a `bool`, its 0/1 values as `i64`).
    fn cumprod(&self, axis: i64, reverse: bool) -> Var {
        cumulative(&counted(self.as_var()), CumulativeKind::Prod, axis, reverse)
    }
    /// Running maximum along `axis` (a `bool` stays `bool`).
    fn cummax(&self, axis: i64, reverse: bool) -> Var {
        as_bool_like(self.as_var(), |x| cumulative(x, CumulativeKind::Max, axis, reverse))
    }
    /// Running minimum along `axis` (a `bool` stays `bool`).
    fn cummin(&self, axis: i64, reverse: bool) -> Var {
        as_bool_like(self.as_var(), |x| cumulative(x, CumulativeKind::Min, axis, reverse))
    }
    /// Running `log(sum(exp(x)))` along `axis`.
    fn cumlogsumexp(&self, axis: i64, reverse: bool) -> Var {
        cumulative(self.as_var(), CumulativeKind::LogSumExp, axis, reverse)
    }

    /// Sorted along `axis` (stable; NaN last ascending), as `jnp.sort`:
    /// descending is the ascending sort reversed, so ties (and NaNs, and
    /// `-0.0` against `0.0`) come out in the reverse of their ascending
    /// order and their derivatives go where JAX's go.
    fn sort(&self, axis: i64, descending: bool) -> Var {
        let sorted = self.sort_with_indices(axis, false).0;
        if descending {
            sorted.flip(&[axis])
        } else {
            sorted
        }
    }
    /// The indices that sort along `axis` (stable: ties in index order), as
    /// `jnp.argsort(stable=True)`.
    fn argsort(&self, axis: i64, descending: bool) -> Var {
        self.sort_with_indices(axis, descending).1
    }
    /// The sorted values and the sorting indices, from one sort (a `bool`
    /// sorts as 0/1 and stays `bool`). Descending, ties keep their index
    /// order, as [`argsort`](LaxExt::argsort)'s.
    fn sort_with_indices(&self, axis: i64, descending: bool) -> (Var, Var) {
        let x = self.as_var();
        let (sorted, perm) = sort::sort_both(&counted(x), axis, descending);
        (if x.dtype() == DType::Bool { sorted.cast(DType::Bool) } else { sorted }, perm)
    }
    /// The `k` largest along the last axis and their indices (`jax.lax.top_k`).
    fn top_k(&self, k: usize) -> (Var, Var) {
        sort::top_k(self.as_var(), k)
    }
}

impl LaxExt for Var {}

/// `f` of a `bool` `x` computed on its 0/1 values and returned as `bool`;
/// `f(x)` for other dtypes.
fn as_bool_like(x: &Var, f: impl FnOnce(&Var) -> Var) -> Var {
    if x.dtype() == DType::Bool {
        f(&counted(x)).cast(DType::Bool)
    } else {
        f(x)
    }
}

/// `x != 0` for a numeric `x`; `x` itself for a bool.
fn truth(x: &Var) -> Var {
    if x.dtype() == anvil_core::DType::Bool {
        x.clone()
    } else {
        x.not_equal(&x.zeros_like())
    }
}
