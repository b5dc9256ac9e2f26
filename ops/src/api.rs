//! The methods users call on [`Var`]: `x.sin()`, `x.sum(&[0])`, `a.matmul(&b)`.
//!
//! [`VarExt`] is an extension trait (the prelude brings it in) because `Var`
//! lives in `anvil-core`, which knows no concrete op. Methods resolve
//! negative axes and user-friendly arguments into an op's stored parameters;
//! a mistake (an axis out of range) is recorded in the trace like any shape
//! error, and the call that ran the trace returns it.

use crate::constant::{Full, Iota};
use crate::elementwise::*;
use crate::index::{ScatterAdd, Take};
use crate::lax::IntegerPow;
use crate::matmul::Matmul;
use crate::movement::*;
use crate::reduce::{ArgReduce, ReduceMax, ReduceMin, ReduceProd, ReduceSum};
use crate::subscript::{At, IndexExpr};
use anvil_core::shape::{
    normalize_axes, normalize_axis, normalize_axis_rank, normalize_perm, reshape_target,
};
use anvil_core::trace::{as_op, current_or_detached};
use anvil_core::{
    promote_types, DType, Error, Op, Operand, Result, Scalar, SliceSpec, Tensor, Var,
};

/// Applies the op built by `make` to `args`, or records the error `make` returned.
/// A `bool` value as `i64` (`true` is 1), as JAX counts: `sum`, `prod`,
/// `mean` and the arg-reductions of a mask work on its 0/1 values.
pub(crate) fn counted(x: &Var) -> Var {
    if x.dtype() == DType::Bool {
        x.cast(DType::I64)
    } else {
        x.clone()
    }
}

fn build(args: &[&Var], make: impl FnOnce() -> Result<Box<dyn Op>>) -> Var {
    match make() {
        Ok(op) => Var::apply_op(op, args),
        Err(e) => {
            let tracer =
                args.first().map(|a| a.tracer().clone()).unwrap_or_else(current_or_detached);
            tracer.record(e);
            tracer.poisoned()
        }
    }
}

fn axes_of(op: &str, x: &Var, axes: &[i64]) -> Result<Vec<usize>> {
    normalize_axes(op, axes, x.shape(), "0")
}

fn all_axes(x: &Var) -> Vec<i64> {
    (0..x.rank() as i64).collect()
}

/// The method of each unary op, declared and defined once.
macro_rules! unary_methods {
    ($($(#[$doc:meta])* $m:ident => $op:ident;)*) => {
        $( $(#[$doc])* fn $m(&self) -> Var { self.as_var().apply($op, &[]) } )*
    };
}

/// Methods of float functions: an integer or `bool` operand is computed in
/// `f64`, as `jnp.sqrt(jnp.array([4]))` is `[2.]`.
macro_rules! float_methods {
    ($($(#[$doc:meta])* $m:ident => $op:ident;)*) => {
        $( $(#[$doc])* fn $m(&self) -> Var {
            $crate::api::floated(self.as_var()).apply($op, &[])
        } )*
    };
}
pub(crate) use float_methods;

/// Methods of rounding functions: an integer operand is its own result,
/// as `jnp.floor(jnp.array([3]))` is `[3]`.
macro_rules! integer_identity_methods {
    ($($(#[$doc:meta])* $m:ident => $op:ident;)*) => {
        $( $(#[$doc])* fn $m(&self) -> Var {
            let x = self.as_var();
            if x.dtype() == DType::I64 { x.clone() } else { x.apply($op, &[]) }
        } )*
    };
}

/// `x` itself if it is a float, else `x` as `f64` (integers and `bool`s
/// given to a float function, as JAX promotes them).
/// `a` and `b` cast to the dtype they combine to ([`promote_types`]: JAX's
/// lattice), as every binary function does before applying its op.
pub fn promoted(a: &Var, b: &Var) -> (Var, Var) {
    let d = promote_types(a.dtype(), b.dtype());
    let up = |x: &Var| if x.dtype() == d { x.clone() } else { x.cast(d) };
    (up(a), up(b))
}

/// `a + b` (of two `bool`s: `or`, as JAX's) and `a * b` (`and`) on the
/// promoted operands.
pub(crate) fn promoted_add(a: &Var, b: &Var) -> Var {
    let (a, b) = promoted(a, b);
    if a.dtype() == DType::Bool {
        return crate::lax::LaxExt::logical_or(&a, &b);
    }
    a.apply(Add, &[&b])
}

/// See [`promoted_add`].
pub(crate) fn promoted_mul(a: &Var, b: &Var) -> Var {
    let (a, b) = promoted(a, b);
    if a.dtype() == DType::Bool {
        return crate::lax::LaxExt::logical_and(&a, &b);
    }
    a.apply(Mul, &[&b])
}

/// `op(a, b)` on the promoted operands.
pub(crate) fn promoted_apply(a: &Var, op: impl Op, b: &Var) -> Var {
    let (a, b) = promoted(a, b);
    a.apply(op, &[&b])
}

/// `a ^ b` of integers as `jnp.power` computes it (`_pow_int_int`): binary
/// exponentiation over the six low bits of the exponent (more would
/// overflow for any base but 0 and ±1), products wrapping as XLA's; `0 ^
/// b` is 0 for `b != 0`. A negative exponent reads its two's-complement
/// bits, as JAX's logical shift does.
fn integer_power(a: &Var, b: &Var) -> Var {
    use crate::lax::LaxExt;
    let dtype = a.dtype();
    let (mut x, e) = (a.cast(DType::I64), b.cast(DType::I64));
    let (zero, one) = (e.zeros_like(), e.ones_like());
    let mut acc = x.equal(&x.zeros_like()).logical_and(&e.not_equal(&zero)).select(&zero, &one);
    // The six low bits: e mod 64, then each bit by halving.
    let wide = e.full_like(64.0);
    let mut bits = e.rem(&wide);
    bits = bits.lt(&zero).select(&(&bits + &wide), &bits);
    let two = e.full_like(2.0);
    for _ in 0..6 {
        let set = bits.rem(&two).equal(&one);
        acc = set.select(&(&acc * &x), &acc);
        x = &x * &x;
        bits = crate::lax::div(&bits, &two);
    }
    if dtype == DType::I64 {
        acc
    } else {
        acc.cast(dtype)
    }
}

/// `a / b` as the operator computes it: true division, so integers and
/// `bool`s divide as `f64` (JAX's and torch's `/`; [`crate::lax::div`]
/// truncates integers, as `jax.lax.div`).
pub(crate) fn true_divide(a: &Var, b: &Var) -> Var {
    let (a, b) = promoted(a, b);
    if a.dtype().is_float() {
        a.apply(Div, &[&b])
    } else {
        a.cast(DType::F64).apply(Div, &[&b.cast(DType::F64)])
    }
}

/// Records `e` on `x`'s trace and returns a poisoned value: how a
/// function returning `Var` reports bad input (the call's `eval` returns
/// `e`).
pub(crate) fn fail(x: &Var, e: Error) -> Var {
    x.tracer().record(e);
    x.tracer().poisoned()
}

pub(crate) fn floated(x: &Var) -> Var {
    if x.dtype().is_float() {
        x.clone()
    } else {
        x.cast(DType::F64)
    }
}

/// Tensor operations on traced values. Brought in by `anvil::prelude::*`.
pub trait VarExt {
    /// The value itself (the methods with a default body apply ops to it).
    #[doc(hidden)]
    fn as_var(&self) -> &Var;

    unary_methods! {
        /// `-x` (also the `-` operator).
        neg => Neg;
        /// `|x|`.
        abs => Abs;
        /// Sign: -1, 0 or 1.
        sign => Sign;
        /// The same value, seen as a constant by differentiation
        /// (`jax.lax.stop_gradient`).
        stop_gradient => StopGradient;
    }

    integer_identity_methods! {
        /// Round down (an integer is its own floor, as in JAX).
        floor => Floor;
        /// Round up.
        ceil => Ceil;
        /// Round to nearest, ties to even.
        round => Round;
    }

    float_methods! {
        /// `1 / x` (of an integer or `bool`: in `f64`, as `jnp.reciprocal`
        /// and every function of this group).
        recip => Recip;
        /// `sin(x)`.
        sin => Sin;
        /// `cos(x)`.
        cos => Cos;
        /// `tan(x)`.
        tan => Tan;
        /// `e^x`.
        exp => Exp;
        /// Natural logarithm.
        log => Log;
        /// `log(1 + x)`.
        log1p => Log1p;
        /// `e^x - 1`.
        expm1 => Expm1;
        /// Square root.
        sqrt => Sqrt;
        /// `1 / sqrt(x)`.
        rsqrt => Rsqrt;
        /// Hyperbolic tangent.
        tanh => Tanh;
        /// Logistic sigmoid.
        logistic => Logistic;
        /// Error function.
        erf => Erf;
    }

    /// `x * x`.
    fn square(&self) -> Var;
    /// Logistic sigmoid (alias of [`VarExt::logistic`]).
    fn sigmoid(&self) -> Var;
    /// `max(x, 0)`.
    fn relu(&self) -> Var;
    /// `self ^ other`, elementwise with broadcasting (the two promoted; of
    /// integers exact and wrapping on overflow, as `jnp.power`).
    fn pow(&self, other: &impl Operand) -> Var;
    /// `self ^ p` for a scalar exponent.
    fn powf(&self, p: f64) -> Var;
    /// `self ^ n` for a fixed integer `n` (`jax.lax.integer_pow`): repeated
    /// multiplication, exact for integers, defined at `x = 0` and for
    /// negative `x` (where `powf` is NaN); a negative `n` needs a float.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec(vec![-2.0, 0.5], &[2])?;
    /// let y = (|x: &Var| x.powi(3)).eval(&x)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![-8.0, 0.125]);
    /// let dy = grad(|x: &Var| x.powi(-1).sum_all()).eval(&x)?; // -1 / x²
    /// assert_eq!(dy.to_vec::<f64>()?, vec![-0.25, -4.0]);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn powi(&self, n: i32) -> Var;
    /// Elementwise maximum with broadcasting.
    fn maximum(&self, other: &impl Operand) -> Var;
    /// Elementwise minimum with broadcasting.
    fn minimum(&self, other: &impl Operand) -> Var;
    /// `atan2(self, other)`.
    fn atan2(&self, other: &impl Operand) -> Var;
    /// `self < other` (bool).
    fn lt(&self, other: &impl Operand) -> Var;
    /// `self <= other` (bool).
    fn le(&self, other: &impl Operand) -> Var;
    /// `self > other` (bool).
    fn gt(&self, other: &impl Operand) -> Var;
    /// `self >= other` (bool).
    fn ge(&self, other: &impl Operand) -> Var;
    /// `self == other` (bool).
    fn equal(&self, other: &impl Operand) -> Var;
    /// `self != other` (bool).
    fn not_equal(&self, other: &impl Operand) -> Var;
    /// With `self` a bool condition: `on_true` where true, else `on_false` (broadcasting).
    fn select(&self, on_true: &impl Operand, on_false: &impl Operand) -> Var;
    /// Converts to another dtype.
    fn cast(&self, dtype: DType) -> Var;

    /// New shape of the same size; one `-1` is inferred.
    fn reshape(&self, shape: &[i64]) -> Var;
    /// Flattens to rank 1.
    fn flatten(&self) -> Var;
    /// Reorders axes; negative entries count from the end.
    fn permute(&self, perm: &[i64]) -> Var;
    /// Swaps the last two axes (rank ≥ 2), or returns rank-0/1 values unchanged.
    fn transpose(&self) -> Var;
    /// Swaps two axes.
    fn swap_axes(&self, a: i64, b: i64) -> Var;
    /// Broadcasts to `shape` by NumPy rules.
    fn broadcast_to(&self, shape: &[usize]) -> Var;
    /// Alias of [`VarExt::broadcast_to`].
    fn expand(&self, shape: &[usize]) -> Var;
    /// Pads each axis with `(before, after)` copies of `value`.
    fn pad(&self, widths: &[(usize, usize)], value: f64) -> Var;
    /// A strided slice; axes past `specs.len()` are taken whole.
    fn slice(&self, specs: &[SliceSpec]) -> Var;
    /// A strided slice of one axis.
    fn slice_axis(&self, axis: i64, start: Option<i64>, stop: Option<i64>, step: i64) -> Var;
    /// Reverses the given axes.
    fn flip(&self, axes: &[i64]) -> Var;
    /// Removes the given size-1 axes (all size-1 axes for an empty list).
    fn squeeze(&self, axes: &[i64]) -> Var;
    /// Inserts a size-1 axis at `axis` (in `-(rank+1)..=rank`).
    fn unsqueeze(&self, axis: i64) -> Var;

    /// Sum over `axes` (none: unchanged, as NumPy's `axis=()`). A `bool`
    /// value sums as `i64` (a count), as in JAX; so do `prod` and the
    /// cumulative sum and product, `mean`/`var`/`std` are `f64`, and
    /// `argmax`/`argmin`/`sort` order `false` before `true`.
    fn sum(&self, axes: &[i64]) -> Var;
    /// Sum over `axes`, keeping them with size 1.
    fn sum_keepdims(&self, axes: &[i64]) -> Var;
    /// Sum of all elements (rank 0).
    fn sum_all(&self) -> Var;
    /// Maximum over `axes`. Over an empty axis it is the identity, `-inf`
    /// (the smallest `i64`, `false`), as `lax.reduce_max`; `jnp.max` raises
    /// there instead. NaN propagates.
    fn max(&self, axes: &[i64], keepdims: bool) -> Var;
    /// Minimum over `axes` (`+inf`, the largest `i64`, `true` over an empty
    /// axis, as `lax.reduce_min`).
    fn min(&self, axes: &[i64], keepdims: bool) -> Var;
    /// Product over `axes`.
    fn prod(&self, axes: &[i64], keepdims: bool) -> Var;
    /// Index of the maximum along `axis` (`i64`).
    fn argmax(&self, axis: i64, keepdims: bool) -> Var;
    /// Index of the minimum along `axis` (`i64`).
    fn argmin(&self, axis: i64, keepdims: bool) -> Var;
    /// Mean of all elements (rank 0).
    fn mean(&self) -> Var;
    /// Mean of all elements (rank 0; the same as [`VarExt::mean`], named
    /// like the other all-axes reductions).
    fn mean_all(&self) -> Var;
    /// Mean over `axes`.
    fn mean_axes(&self, axes: &[i64], keepdims: bool) -> Var;
    /// The size of `axis` as a rank-0 value (of `self`'s dtype when it is
    /// floating point, else `f64`): a constant for a concrete axis, the
    /// size bound by the call for a symbolic one, so that `x.sum(&[0]) /
    /// x.dim_size(0)` is the mean for every length (see
    /// [`anvil_core::shape::dim_var`]).
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let f = |x: &Var| x.sum(&[0]) / x.dim_size(0);
    /// let m = f.eval(&Tensor::from_vec(vec![1.0, 2.0, 6.0], &[3])?)?;
    /// assert_eq!(m.item()?, 3.0);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn dim_size(&self, axis: i64) -> Var;
    /// Population variance over `axes` (`ddof = 0`).
    fn var(&self, axes: &[i64], keepdims: bool) -> Var;
    /// Population standard deviation over `axes`.
    fn std(&self, axes: &[i64], keepdims: bool) -> Var;
    /// `log(sum(exp(x)))` over `axes`, computed stably.
    fn logsumexp(&self, axes: &[i64], keepdims: bool) -> Var;
    /// Softmax along `axis`.
    fn softmax(&self, axis: i64) -> Var;
    /// Log-softmax along `axis`.
    fn log_softmax(&self, axis: i64) -> Var;
    /// Euclidean norm of all elements.
    fn norm(&self) -> Var;

    /// Maximum of all elements (rank 0).
    ///
    /// The all-axes forms of the reductions, in one example:
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec(vec![3.0, -1.0, 2.0, 4.0], &[2, 2])?;
    /// let f = |x: &Var| {
    ///     vec![
    ///         x.max_all(), x.min_all(), x.prod_all(), x.mean_all(), x.var_all(),
    ///         x.std_all(), x.logsumexp_all(), x.argmax_all(), x.argmin_all(),
    ///     ]
    /// };
    /// let r: Vec<f64> = f.eval(&x)?.iter().map(|t| t.cast(DType::F64).item().unwrap()).collect();
    /// let lse = [3.0f64, -1.0, 2.0, 4.0].iter().map(|v| v.exp()).sum::<f64>().ln();
    /// assert_eq!(&r[..4], &[4.0, -1.0, -24.0, 2.0]);
    /// assert_eq!(r[4], 3.5); // mean of squares 7.5 minus 2²
    /// assert_eq!(r[5], 3.5f64.sqrt());
    /// assert!((r[6] - lse).abs() < 1e-14);
    /// assert_eq!(&r[7..], &[3.0, 1.0]); // flat indices, as numpy.argmax
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn max_all(&self) -> Var;
    /// Minimum of all elements (rank 0).
    fn min_all(&self) -> Var;
    /// Product of all elements (rank 0).
    fn prod_all(&self) -> Var;
    /// Population variance of all elements (rank 0).
    fn var_all(&self) -> Var;
    /// Population standard deviation of all elements (rank 0).
    fn std_all(&self) -> Var;
    /// `log(sum(exp(x)))` over all elements (rank 0), computed stably.
    fn logsumexp_all(&self) -> Var;
    /// The flat index of the maximum (`i64`, rank 0; the first of ties), as
    /// `numpy.argmax` without an axis.
    fn argmax_all(&self) -> Var;
    /// The flat index of the minimum (`i64`, rank 0; the first of ties).
    fn argmin_all(&self) -> Var;
    /// Euclidean norm over `axes`.
    fn norm_axes(&self, axes: &[i64], keepdims: bool) -> Var;

    /// Matrix product with `numpy.matmul` semantics. `other` is a value
    /// of the trace or a tensor (a closure's capture, see
    /// [`anvil_core::Operand`]), as for every method with an operand.
    /// Floats of one dtype, or `i64` (wrapping on overflow, as XLA's
    /// integer products).
    fn matmul(&self, other: &impl Operand) -> Var;
    /// `A⁻¹ b` for square `A = self` (batch axes allowed): `b` is one
    /// vector `[n]` or matrices `[..., n, k]`, batch axes broadcasting, as
    /// `jnp.linalg.solve` ([`linalg::solve`](crate::linalg::solve)).
    fn solve(&self, b: &impl Operand) -> Var;
    /// The Cholesky factor of `(A + Aᵀ)/2` ([`linalg::cholesky`](crate::linalg::cholesky())).
    fn cholesky(&self) -> Var;
    /// The inverse of square matrices ([`linalg::inv`](crate::linalg::inv)).
    fn inv(&self) -> Var;
    /// Determinants of square matrices ([`linalg::det`](crate::linalg::det)).
    fn det(&self) -> Var;
    /// Diagonal `offset` of the last two axes ([`linalg::diagonal`](crate::linalg::diagonal)).
    fn diagonal(&self, offset: i64) -> Var;
    /// The trace of the last two axes ([`linalg::trace`](crate::linalg::trace)).
    fn trace(&self) -> Var;
    /// The lower triangle `j - i <= k` of the last two axes ([`linalg::tril`](crate::linalg::tril)).
    fn tril(&self, k: i64) -> Var;
    /// The upper triangle `j - i >= k` of the last two axes ([`linalg::triu`](crate::linalg::triu)).
    fn triu(&self, k: i64) -> Var;
    /// Gathers along `axis` by an `i64` index tensor (`numpy.take`).
    fn take(&self, indices: &Var, axis: i64) -> Var;
    /// Indexes `axis` by a list of integers (negative count from the end).
    fn index(&self, axis: i64, indices: &[i64]) -> Var;
    /// Indexes `axis` by one integer, removing the axis (`ndarray`'s
    /// `index_axis`; a negative index counts from the end). With a fixed
    /// axis, [`VarExt::i`] reads better: `x.index_axis(1, -1)` is
    /// `x.i(ix![.., -1])`.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let y = (|x: &Var| x.index_axis(1, -1)).eval(&x)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![2.0, 4.0]);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn index_axis(&self, axis: i64, index: i64) -> Var;
    /// `x[index]` with NumPy's semantics: ranges with steps, integers
    /// (negative from the end), new axes, an ellipsis, traced `i64` arrays
    /// (advanced indexing) — see [`ix!`](crate::ix) for the grammar and
    /// [`subscript`](crate::subscript) for the rules. A static integer out
    /// of range is an error (recorded in the trace) naming the axis, the
    /// index and the size; a traced index is clamped into the axis, as in
    /// JAX.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec((0..12).map(f64::from).collect(), &[3, 4])?;
    /// let f = |x: &Var| {
    ///     let rows = x.constant_like(Tensor::from_vec(vec![2i64, -3], &[2])?);
    ///     Ok(vec![x.i(ix![1..;2, -1]), x.i(ix![&rows, 1..3]), x.i(ix![NewAxis, .., 0])])
    /// };
    /// let out = f.eval(&x)?;
    /// assert_eq!(out[0].to_vec::<f64>()?, vec![7.0]);                  // x[1::2, -1]
    /// assert_eq!(out[1].to_vec::<f64>()?, vec![9.0, 10.0, 1.0, 2.0]); // x[[2, -3], 1:3]
    /// assert_eq!(out[2].shape(), &[1, 3]);                             // x[None, :, 0]
    /// // x[3] is out of range for an axis of size 3.
    /// assert!((|x: &Var| x.i(ix![3])).eval(&x).is_err());
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn i(&self, index: IndexExpr) -> Var;
    /// Functional updates of `x[index]` (JAX's `x.at[index]`):
    /// `x.at(ix![0, ..]).set(&v)`, `.add`, `.mul`, `.min`, `.max`, `.get`;
    /// see [`At`].
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
    /// let y = (|x: &Var| x.at(ix![1..]).add(x.i(ix![..2]))).eval(&x)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![1.0, 3.0, 5.0]);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    fn at(&self, index: IndexExpr) -> At;
    /// With `self` as updates: adds them into zeros whose `axis` has `size` entries.
    fn scatter_add(&self, indices: &Var, axis: i64, size: usize) -> Var;

    /// A tensor of `self`'s type filled with `value`.
    fn full_like(&self, value: f64) -> Var;
    /// Zeros of `self`'s type.
    fn zeros_like(&self) -> Var;
    /// Ones of `self`'s type.
    fn ones_like(&self) -> Var;
}

impl VarExt for Var {
    fn as_var(&self) -> &Var {
        self
    }

    fn square(&self) -> Var {
        self * self
    }
    fn sigmoid(&self) -> Var {
        self.logistic()
    }
    fn relu(&self) -> Var {
        // Not `maximum(x, 0)`, whose derivative at 0 is 1/2: `jax.nn.relu`
        // and `torch.relu` have 0 there. NaN stays NaN with derivative 0
        // (as `jax.nn.relu`'s), -inf gives 0.
        let zero = self.zeros_like();
        let kept = self.gt(&zero).select(self, &self.stop_gradient());
        self.le(&zero).select(&zero, &kept)
    }
    fn pow(&self, other: &impl Operand) -> Var {
        let (a, b) = promoted(self, &other.to_var_like(self));
        if a.dtype().is_float() {
            a.apply(Pow, &[&b])
        } else {
            integer_power(&a, &b)
        }
    }
    fn powf(&self, p: f64) -> Var {
        let x = floated(self);
        x.pow(&x.scalar_like(p))
    }
    fn powi(&self, n: i32) -> Var {
        self.apply(IntegerPow { y: n }, &[])
    }
    fn maximum(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Max, &other.to_var_like(self))
    }
    fn minimum(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Min, &other.to_var_like(self))
    }
    fn atan2(&self, other: &impl Operand) -> Var {
        promoted_apply(&floated(self), Atan2, &floated(&other.to_var_like(self)))
    }
    fn lt(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Lt, &other.to_var_like(self))
    }
    fn le(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Le, &other.to_var_like(self))
    }
    fn gt(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Gt, &other.to_var_like(self))
    }
    fn ge(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Ge, &other.to_var_like(self))
    }
    fn equal(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Eq, &other.to_var_like(self))
    }
    fn not_equal(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Ne, &other.to_var_like(self))
    }
    fn select(&self, on_true: &impl Operand, on_false: &impl Operand) -> Var {
        {
            let (t, f) = promoted(&on_true.to_var_like(self), &on_false.to_var_like(self));
            self.apply(Select, &[&t, &f])
        }
    }
    fn cast(&self, dtype: DType) -> Var {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.apply(Cast { dtype }, &[])
    }

    fn reshape(&self, shape: &[i64]) -> Var {
        build(&[self], || {
            Ok(Box::new(Reshape { shape: reshape_target("reshape", self.shape(), shape)? }))
        })
    }
    fn flatten(&self) -> Var {
        self.reshape(&[-1])
    }
    fn permute(&self, perm: &[i64]) -> Var {
        build(&[self], || {
            Ok(Box::new(Permute { perm: normalize_perm("permute", perm, self.shape())? }))
        })
    }
    fn transpose(&self) -> Var {
        if self.rank() < 2 {
            return self.clone();
        }
        self.swap_axes(-1, -2)
    }
    fn swap_axes(&self, a: i64, b: i64) -> Var {
        build(&[self], || {
            let a = normalize_axis("swap_axes", a, self.shape(), "0")?;
            let b = normalize_axis("swap_axes", b, self.shape(), "0")?;
            let mut perm: Vec<usize> = (0..self.rank()).collect();
            perm.swap(a, b);
            Ok(Box::new(Permute { perm }))
        })
    }
    fn broadcast_to(&self, shape: &[usize]) -> Var {
        if self.shape() == shape {
            return self.clone();
        }
        self.apply(BroadcastTo { shape: shape.to_vec() }, &[])
    }
    fn expand(&self, shape: &[usize]) -> Var {
        self.broadcast_to(shape)
    }
    fn pad(&self, widths: &[(usize, usize)], value: f64) -> Var {
        let value = Scalar::F64(value).cast(self.dtype());
        self.apply(Pad { widths: widths.to_vec(), value }, &[])
    }
    fn slice(&self, specs: &[SliceSpec]) -> Var {
        build(&[self], || {
            if specs.len() > self.rank() {
                return Err(Error::shape(
                    "slice",
                    &[self.shape()],
                    format!("{} slice specs for rank {}", specs.len(), self.rank()),
                ));
            }
            let mut all = specs.to_vec();
            all.resize(self.rank(), SliceSpec::FULL);
            Ok(Box::new(Slice { specs: all }))
        })
    }
    fn slice_axis(&self, axis: i64, start: Option<i64>, stop: Option<i64>, step: i64) -> Var {
        build(&[self], || {
            let a = normalize_axis("slice", axis, self.shape(), "0")?;
            let mut specs = vec![SliceSpec::FULL; self.rank()];
            specs[a] = SliceSpec { start, stop, step };
            Ok(Box::new(Slice { specs }))
        })
    }
    fn flip(&self, axes: &[i64]) -> Var {
        build(&[self], || {
            let mut specs = vec![SliceSpec::FULL; self.rank()];
            for a in axes_of("flip", self, axes)? {
                specs[a].step = -1;
            }
            Ok(Box::new(Slice { specs }))
        })
    }
    fn squeeze(&self, axes: &[i64]) -> Var {
        build(&[self], || {
            let axes = if axes.is_empty() {
                (0..self.rank()).filter(|&i| self.shape()[i] == 1).collect()
            } else {
                axes_of("squeeze", self, axes)?
            };
            if let Some(&a) = axes.iter().find(|&&a| self.shape()[a] != 1) {
                return Err(Error::shape(
                    "squeeze",
                    &[self.shape()],
                    format!("axis {a} of argument 0 has size {}, not 1", self.shape()[a]),
                ));
            }
            let shape =
                (0..self.rank()).filter(|i| !axes.contains(i)).map(|i| self.shape()[i]).collect();
            Ok(Box::new(Reshape { shape }))
        })
    }
    fn unsqueeze(&self, axis: i64) -> Var {
        build(&[self], || {
            let a = normalize_axis_rank("unsqueeze", axis, self.rank() + 1, self.shape(), "0")?;
            let mut shape = self.shape().to_vec();
            shape.insert(a, 1);
            Ok(Box::new(Reshape { shape }))
        })
    }

    fn sum(&self, axes: &[i64]) -> Var {
        let x = &counted(self);
        build(&[x], || Ok(Box::new(ReduceSum { axes: axes_of("sum", x, axes)?, keepdims: false })))
    }
    fn sum_keepdims(&self, axes: &[i64]) -> Var {
        let x = &counted(self);
        build(&[x], || Ok(Box::new(ReduceSum { axes: axes_of("sum", x, axes)?, keepdims: true })))
    }
    fn sum_all(&self) -> Var {
        self.sum(&all_axes(self))
    }
    fn max(&self, axes: &[i64], keepdims: bool) -> Var {
        build(&[self], || {
            Ok(Box::new(ReduceMax { axes: axes_of("reduce_max", self, axes)?, keepdims }))
        })
    }
    fn min(&self, axes: &[i64], keepdims: bool) -> Var {
        build(&[self], || {
            Ok(Box::new(ReduceMin { axes: axes_of("reduce_min", self, axes)?, keepdims }))
        })
    }
    fn prod(&self, axes: &[i64], keepdims: bool) -> Var {
        let x = &counted(self);
        build(&[x], || Ok(Box::new(ReduceProd { axes: axes_of("prod", x, axes)?, keepdims })))
    }
    fn argmax(&self, axis: i64, keepdims: bool) -> Var {
        let x = &counted(self);
        build(&[x], || {
            Ok(Box::new(ArgReduce {
                axis: normalize_axis("argmax", axis, x.shape(), "0")?,
                keepdims,
                max: true,
            }))
        })
    }
    fn argmin(&self, axis: i64, keepdims: bool) -> Var {
        let x = &counted(self);
        build(&[x], || {
            Ok(Box::new(ArgReduce {
                axis: normalize_axis("argmin", axis, x.shape(), "0")?,
                keepdims,
                max: false,
            }))
        })
    }
    fn mean(&self) -> Var {
        self.mean_axes(&all_axes(self), false)
    }
    fn mean_all(&self) -> Var {
        self.mean()
    }
    fn mean_axes(&self, axes: &[i64], keepdims: bool) -> Var {
        as_op("mean", || crate::composite::mean(&counted(self), axes, keepdims))
    }
    fn dim_size(&self, axis: i64) -> Var {
        let dtype = if self.dtype().is_float() { self.dtype() } else { DType::F64 };
        build(&[], || {
            let a = normalize_axis("dim_size", axis, self.shape(), "axis")?;
            let d = self.shape()[a];
            Ok(if anvil_core::shape::is_symbolic(d) {
                Box::new(anvil_core::DimSize { dim: d, dtype })
            } else {
                Box::new(Full { shape: vec![], value: Scalar::F64(d as f64).cast(dtype) })
            })
        })
    }
    fn var(&self, axes: &[i64], keepdims: bool) -> Var {
        as_op("var", || crate::composite::var(&counted(self), axes, keepdims))
    }
    fn std(&self, axes: &[i64], keepdims: bool) -> Var {
        as_op("std", || self.var(axes, keepdims).sqrt())
    }
    fn logsumexp(&self, axes: &[i64], keepdims: bool) -> Var {
        as_op("logsumexp", || crate::composite::logsumexp(&floated(self), axes, keepdims))
    }
    fn softmax(&self, axis: i64) -> Var {
        as_op("softmax", || crate::composite::softmax(&floated(self), axis))
    }
    fn log_softmax(&self, axis: i64) -> Var {
        as_op("log_softmax", || crate::composite::log_softmax(&floated(self), axis))
    }
    fn norm(&self) -> Var {
        self.square().sum_all().sqrt()
    }
    fn max_all(&self) -> Var {
        self.max(&all_axes(self), false)
    }
    fn min_all(&self) -> Var {
        self.min(&all_axes(self), false)
    }
    fn prod_all(&self) -> Var {
        self.prod(&all_axes(self), false)
    }
    fn var_all(&self) -> Var {
        self.var(&all_axes(self), false)
    }
    fn std_all(&self) -> Var {
        self.std(&all_axes(self), false)
    }
    fn logsumexp_all(&self) -> Var {
        self.logsumexp(&all_axes(self), false)
    }
    fn argmax_all(&self) -> Var {
        self.flatten().argmax(0, false)
    }
    fn argmin_all(&self) -> Var {
        self.flatten().argmin(0, false)
    }
    fn norm_axes(&self, axes: &[i64], keepdims: bool) -> Var {
        as_op("norm", || {
            let s =
                if keepdims { self.square().sum_keepdims(axes) } else { self.square().sum(axes) };
            s.sqrt()
        })
    }

    fn matmul(&self, other: &impl Operand) -> Var {
        promoted_apply(self, Matmul, &other.to_var_like(self))
    }
    fn solve(&self, b: &impl Operand) -> Var {
        crate::linalg::solve(self, &b.to_var_like(self))
    }
    fn cholesky(&self) -> Var {
        crate::linalg::cholesky(self)
    }
    fn inv(&self) -> Var {
        crate::linalg::inv(self)
    }
    fn det(&self) -> Var {
        crate::linalg::det(self)
    }
    fn diagonal(&self, offset: i64) -> Var {
        crate::linalg::diagonal(self, offset)
    }
    fn trace(&self) -> Var {
        crate::linalg::trace(self, 0)
    }
    fn tril(&self, k: i64) -> Var {
        crate::linalg::tril(self, k)
    }
    fn triu(&self, k: i64) -> Var {
        crate::linalg::triu(self, k)
    }
    fn take(&self, indices: &Var, axis: i64) -> Var {
        build(&[self, indices], || {
            Ok(Box::new(Take::new(normalize_axis("take", axis, self.shape(), "0")?)))
        })
    }
    fn index(&self, axis: i64, indices: &[i64]) -> Var {
        match Tensor::from_vec(indices.to_vec(), &[indices.len()]) {
            Ok(idx) => self.take(&self.constant_like(idx), axis),
            Err(e) => {
                self.tracer().record(e);
                self.tracer().poisoned()
            }
        }
    }
    fn index_axis(&self, axis: i64, index: i64) -> Var {
        self.take(&self.constant_like(Tensor::scalar(index)), axis)
    }
    fn i(&self, index: IndexExpr) -> Var {
        crate::subscript::index(self, &index)
    }
    fn at(&self, index: IndexExpr) -> At {
        At::new(self, index)
    }
    fn scatter_add(&self, indices: &Var, axis: i64, size: usize) -> Var {
        build(&[self, indices], || {
            // `axis` is an axis of the result, whose rank is the updates' rank
            // minus the indices' plus one (not the updates' rank).
            let rank = (self.rank() + 1).saturating_sub(indices.rank());
            let axis = normalize_axis_rank("scatter_add", axis, rank, self.shape(), "0")?;
            Ok(Box::new(ScatterAdd::new(axis, size)))
        })
    }

    fn full_like(&self, value: f64) -> Var {
        let value = Scalar::F64(value).cast(self.dtype());
        self.tracer().apply(Box::new(Full { shape: self.shape().to_vec(), value }), &[])
    }
    fn zeros_like(&self) -> Var {
        self.full_like(0.0)
    }
    fn ones_like(&self) -> Var {
        self.full_like(1.0)
    }
}

/// Joins values along an existing axis.
pub fn concatenate(xs: &[&Var], axis: i64) -> Var {
    build(xs, || {
        let first = xs.first().ok_or_else(|| {
            Error::invalid("concatenate", "operands", "needs at least one operand")
        })?;
        Ok(Box::new(Concatenate { axis: normalize_axis("concatenate", axis, first.shape(), "0")? }))
    })
}

/// Stacks values of one shape along a new axis.
pub fn stack(xs: &[&Var], axis: i64) -> Var {
    as_op("stack", || {
        let Some(first) = xs.first() else {
            return build(&[], || Err(Error::invalid("stack", "operands", "needs at least one")));
        };
        if let Some((i, x)) = xs.iter().enumerate().find(|(_, x)| x.shape() != first.shape()) {
            return build(xs, || {
                Err(Error::shape(
                    "stack",
                    &[first.shape(), x.shape()],
                    format!(
                        "argument {i} has shape {:?} and argument 0 {:?}: stacked values must have one shape",
                        x.shape(),
                        first.shape()
                    ),
                ))
            });
        }
        let expanded: Vec<Var> = xs.iter().map(|x| x.unsqueeze(axis)).collect();
        concatenate(&expanded.iter().collect::<Vec<_>>(), axis)
    })
}

/// `where(cond, on_true, on_false)`.
pub fn where_(cond: &Var, on_true: &Var, on_false: &Var) -> Var {
    cond.select(on_true, on_false)
}

/// An `f64` tensor of `shape` filled with `value`, in the current trace.
pub fn full(shape: &[usize], value: f64) -> Var {
    full_scalar(shape, Scalar::F64(value))
}

/// A tensor of `shape` filled with `value` (of the value's dtype), in the current trace.
pub fn full_scalar(shape: &[usize], value: Scalar) -> Var {
    Var::apply_op(Box::new(Full { shape: shape.to_vec(), value }), &[])
}

/// A dimension as a rank-0 `f64` value in the current trace: a constant
/// for a size, the size bound by the call for a symbolic dimension or an
/// expression of them (`n * m`, `floordiv(n, 2)`; see
/// [`anvil_core::shape::dim_var`]). Use it — or [`VarExt::dim_size`] —
/// wherever a size enters arithmetic: `x.shape()[0] as f64` of a symbolic
/// dimension is the number of its handle, not its size.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::{dim, ops::dim_value, TensorType};
/// let n = dim("n", 1..)?;
/// let f = jit(|x: &Var| x.sum_all() / dim_value(x.shape()[0])).symbolic(TensorType::new(DType::F64, [n]))?;
/// assert_eq!(f.eval(&Tensor::from_vec(vec![1.0, 2.0, 6.0], &[3])?)?.item()?, 3.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn dim_value(d: usize) -> Var {
    build(&[], || {
        Ok(if anvil_core::shape::is_symbolic(d) {
            Box::new(anvil_core::DimSize { dim: d, dtype: DType::F64 })
        } else {
            Box::new(Full { shape: vec![], value: Scalar::F64(d as f64) })
        })
    })
}

/// `0, 1, 2, ...` along `axis` of `shape` (`f64`), in the current trace.
pub fn iota(shape: &[usize], axis: usize) -> Var {
    iota_dtype(shape, axis, DType::F64)
}

/// Like [`iota`] with a chosen dtype.
pub fn iota_dtype(shape: &[usize], axis: usize, dtype: DType) -> Var {
    Var::apply_op(Box::new(Iota { shape: shape.to_vec(), axis, dtype }), &[])
}

/// The `n × n` identity (`f64`) in the current trace: the same op as the
/// seed of `jacfwd` ([`Basis`](crate::constant::Basis)), so products with
/// it are rewritten like the seed's and it is computed inside the fused
/// pass that reads it, never stored.
pub fn eye(n: usize) -> Var {
    as_op("eye", || {
        let op =
            crate::constant::Basis { shape: vec![n, n], axis: 1, offset: 0, dtype: DType::F64 };
        Var::apply_op(Box::new(op), &[])
    })
}
