//! The activation functions and helpers of `jax.nn`, under JAX's names:
//! `anvil::nn::softplus(&x)` is `jax.nn.softplus(x)`.
//!
//! Every function here is a composite (plain arithmetic over primitives,
//! no rules of its own), written as JAX writes it so that values agree to
//! the last bit where the primitives do, with two habits for derivatives:
//!
//! - Where JAX gives a function a `custom_jvp` to fix the derivative at a
//!   kink (`relu`'s 0 at 0, `relu6`'s 0 at 0 and 6, `log1mexp`, and
//!   `softplus` through `logaddexp`), the function is written with
//!   `select`s whose ordinary derivative is that one, so that it stays
//!   differentiable again (`hessian` works) and needs no custom rule.
//! - A branch that is not taken is computed on a safe input (the
//!   "double where" of JAX's `elu`): `select` sends a zero cotangent to the
//!   other branch, and zero times the infinite derivative of `expm1(800)`
//!   would be NaN.
//!
//! Integer and `bool` inputs are computed in `f64` (as `x.sigmoid()` is),
//! except by [`relu`] and [`hard_tanh`], which keep an integer dtype, as
//! JAX's do. A mistake in an argument (an axis out of range, an odd size
//! given to [`glu`]) is recorded in the trace and returned by the call that
//! runs it, naming the function, the argument and the shape.

use crate::api::{counted, fail, floated, where_, VarExt};
use crate::composite::SelectFinite;
use crate::constant::Iota;
use crate::lax::LaxExt;
use anvil_core::shape::{is_symbolic, normalize_axes, normalize_axis};
use anvil_core::trace::as_op;
use anvil_core::{DType, Error, Var};

/// `on_true` where `cond`, else `on_false` (JAX's `jnp.where`; all three broadcast).
fn pick(cond: &Var, on_true: &Var, on_false: &Var) -> Var {
    cond.select(on_true, on_false)
}

/// The rectified linear unit `max(x, 0)`, with derivative 0 at 0 (JAX's
/// `custom_jvp`) and at NaN, which stays NaN. An integer stays an integer
/// (a `bool` becomes `i64`, as in JAX).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-1.0, 0.0, 2.0], &[3])?;
/// assert_eq!((|x: &Var| nn::relu(x)).eval(&x)?.to_vec::<f64>()?, [0.0, 0.0, 2.0]);
/// let d = grad(|x: &Var| nn::relu(x).sum_all()).eval(&x)?;
/// assert_eq!(d.to_vec::<f64>()?, [0.0, 0.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn relu(x: &Var) -> Var {
    as_op("relu", || {
        let x = &counted(x);
        let zero = x.scalar_like(0.0);
        // Neither `x > 0` nor `x <= 0`: NaN, kept, with no derivative.
        let rest = pick(&x.le(&zero), &zero, &x.stop_gradient());
        pick(&x.gt(&zero), x, &rest)
    })
}

/// `min(max(x, 0), 6)`, with derivative 1 on `(0, 6)` and 0 elsewhere,
/// at 0 and 6 too (JAX's `custom_jvp`); NaN stays NaN with derivative 0.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-1.0, 0.0, 3.0, 6.0, 7.0], &[5])?;
/// assert_eq!((|x: &Var| nn::relu6(x)).eval(&x)?.to_vec::<f64>()?, [0.0, 0.0, 3.0, 6.0, 6.0]);
/// let d = grad(|x: &Var| nn::relu6(x).sum_all()).eval(&x)?;
/// assert_eq!(d.to_vec::<f64>()?, [0.0, 0.0, 1.0, 0.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn relu6(x: &Var) -> Var {
    as_op("relu6", || {
        let x = &floated(x);
        let (zero, six) = (x.scalar_like(0.0), x.scalar_like(6.0));
        let inside = pick(&x.lt(&six), x, &six);
        // Neither `x > 0` nor `x <= 0`: NaN, kept, with no derivative.
        let outside = pick(&x.le(&zero), &zero, &x.stop_gradient());
        pick(&x.gt(&zero), &inside, &outside)
    })
}

/// The logistic sigmoid `1 / (1 + e^-x)` (`jax.nn.sigmoid`, `lax.logistic`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![0.0], &[1])?;
/// assert_eq!((|x: &Var| nn::sigmoid(x)).eval(&x)?.to_vec::<f64>()?, [0.5]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn sigmoid(x: &Var) -> Var {
    x.sigmoid()
}

/// `log(1 + e^x)`, as JAX's `logaddexp(x, 0)`: `x + log1p(e^-x)` for
/// `x > 0`, `log1p(e^x)` otherwise, so nothing overflows. Its derivative
/// is the sigmoid (1/2 at 0), finite at ±∞.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-800.0, 0.0, 800.0], &[3])?;
/// let y = (|x: &Var| nn::softplus(x)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [0.0, std::f64::consts::LN_2, 800.0]);
/// let d = grad(|x: &Var| nn::softplus(x).sum_all()).eval(&x)?;
/// assert_eq!(d.to_vec::<f64>()?, [0.0, 0.5, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn softplus(x: &Var) -> Var {
    as_op("softplus", || {
        let x = &floated(x);
        let zero = x.scalar_like(0.0);
        let pos = x.gt(&zero);
        // Each branch on a safe input: e^800 of the untaken branch would
        // make its derivative inf / inf.
        let (xp, xn) = (pick(&pos, x, &zero), pick(&pos, &zero, x));
        pick(&pos, &(&xp + &(-&xp).exp().log1p()), &xn.exp().log1p())
    })
}

/// `log(sigmoid(x))`, computed as JAX's `-softplus(-x)`: no overflow, and
/// no `log(0)` for large negative `x`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-800.0, 0.0], &[2])?;
/// let y = (|x: &Var| nn::log_sigmoid(x)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [-800.0, -std::f64::consts::LN_2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn log_sigmoid(x: &Var) -> Var {
    as_op("log_sigmoid", || -softplus(&-&floated(x)))
}

/// `x / (|x| + 1)`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-3.0, 1.0], &[2])?;
/// assert_eq!((|x: &Var| nn::soft_sign(x)).eval(&x)?.to_vec::<f64>()?, [-0.75, 0.5]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn soft_sign(x: &Var) -> Var {
    as_op("soft_sign", || {
        let x = &floated(x);
        x / &(x.abs() + 1.0)
    })
}

/// The sigmoid linear unit `x * sigmoid(x)`; also exported as `swish`,
/// as in JAX.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![0.0, 2.0], &[2])?;
/// let y = (|x: &Var| nn::swish(x)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [0.0, 2.0 / (1.0 + (-2.0f64).exp())]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn silu(x: &Var) -> Var {
    as_op("silu", || {
        let x = &floated(x);
        x * &x.sigmoid()
    })
}

pub use self::silu as swish;

/// `x * tanh(softplus(x))`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-800.0, 0.0, 800.0], &[3])?;
/// assert_eq!((|x: &Var| nn::mish(x)).eval(&x)?.to_vec::<f64>()?, [-0.0, 0.0, 800.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn mish(x: &Var) -> Var {
    as_op("mish", || {
        let x = &floated(x);
        x * &softplus(x).tanh()
    })
}

/// The exponential linear unit: `x` for `x > 0`, `alpha * (e^x - 1)`
/// otherwise (`jax.nn.elu`; JAX's default `alpha` is 1). The exponential
/// is taken of `min(x, 0)`, so a large positive `x` gives no infinite
/// derivative.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-800.0, 0.0, 800.0], &[3])?;
/// assert_eq!((|x: &Var| nn::elu(x, 2.0)).eval(&x)?.to_vec::<f64>()?, [-2.0, 0.0, 800.0]);
/// let d = grad(|x: &Var| nn::elu(x, 2.0).sum_all()).eval(&x)?;
/// assert_eq!(d.to_vec::<f64>()?, [0.0, 2.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn elu(x: &Var, alpha: f64) -> Var {
    as_op("elu", || {
        let x = &floated(x);
        let zero = x.scalar_like(0.0);
        let pos = x.gt(&zero);
        pick(&pos, x, &(pick(&pos, &zero, x).expm1() * alpha))
    })
}

/// The continuously differentiable exponential linear unit
/// `max(x, 0) + alpha * expm1(min(x, 0) / alpha)` (JAX's default `alpha`
/// is 1).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-800.0, 0.0, 3.0], &[3])?;
/// assert_eq!((|x: &Var| nn::celu(x, 0.5)).eval(&x)?.to_vec::<f64>()?, [-0.5, 0.0, 3.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn celu(x: &Var, alpha: f64) -> Var {
    as_op("celu", || {
        let x = &floated(x);
        let zero = x.scalar_like(0.0);
        x.maximum(&zero) + (x.minimum(&zero) / alpha).expm1() * alpha
    })
}

/// The scaled exponential linear unit `scale * elu(x, alpha)`, with JAX's
/// constants `alpha ≈ 1.6733` and `scale ≈ 1.0507`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![1.0], &[1])?;
/// assert_eq!((|x: &Var| nn::selu(x)).eval(&x)?.to_vec::<f64>()?, [1.0507009873554805]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn selu(x: &Var) -> Var {
    const ALPHA: f64 = 1.673_263_242_354_377_3;
    const SCALE: f64 = 1.050_700_987_355_480_5;
    as_op("selu", || elu(x, ALPHA) * SCALE)
}

/// The Gaussian error linear unit. `approximate: true` — JAX's default —
/// is the tanh form `x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`;
/// `false` is the exact `x/2 erfc(-x / sqrt(2))`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-40.0, 0.0, 40.0], &[3])?;
/// for approximate in [true, false] {
///     let y = (|x: &Var| nn::gelu(x, approximate)).eval(&x)?.to_vec::<f64>()?;
///     assert_eq!(y, [-0.0, 0.0, 40.0]);
/// }
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn gelu(x: &Var, approximate: bool) -> Var {
    as_op("gelu", || {
        let x = &floated(x);
        if approximate {
            let sqrt_2_over_pi = (2.0 / std::f64::consts::PI).sqrt();
            let inner = (x + &(x.powi(3) * 0.044_715)) * sqrt_2_over_pi;
            x * &((inner.tanh() + 1.0) * 0.5)
        } else {
            (x * 0.5) * (-x * std::f64::consts::FRAC_1_SQRT_2).erfc()
        }
    })
}

/// The leaky rectified linear unit: `x` for `x >= 0`, `negative_slope * x`
/// otherwise (JAX's default slope is `0.01`); the derivative at 0 is 1.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-2.0, 3.0], &[2])?;
/// assert_eq!((|x: &Var| nn::leaky_relu(x, 0.5)).eval(&x)?.to_vec::<f64>()?, [-1.0, 3.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn leaky_relu(x: &Var, negative_slope: f64) -> Var {
    as_op("leaky_relu", || {
        let x = &floated(x);
        pick(&x.ge(&x.scalar_like(0.0)), x, &(x * negative_slope))
    })
}

/// `x` clipped to `[-1, 1]`, with derivative 1 at ±1 (JAX's nested
/// `where`). An integer stays an integer.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-3.0, 0.5, 1.0, 2.0], &[4])?;
/// assert_eq!((|x: &Var| nn::hard_tanh(x)).eval(&x)?.to_vec::<f64>()?, [-1.0, 0.5, 1.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn hard_tanh(x: &Var) -> Var {
    as_op("hard_tanh", || {
        let x = &counted(x);
        let (one, minus_one) = (x.scalar_like(1.0), x.scalar_like(-1.0));
        pick(&x.gt(&one), &one, &pick(&x.lt(&minus_one), &minus_one, x))
    })
}

/// `relu6(x + 3) / 6`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-4.0, 0.0, 4.0], &[3])?;
/// assert_eq!((|x: &Var| nn::hard_sigmoid(x)).eval(&x)?.to_vec::<f64>()?, [0.0, 0.5, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn hard_sigmoid(x: &Var) -> Var {
    as_op("hard_sigmoid", || relu6(&(floated(x) + 3.0)) / 6.0)
}

/// `x * hard_sigmoid(x)`; also exported as `hard_swish`, as in JAX.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-4.0, 0.0, 4.0], &[3])?;
/// assert_eq!((|x: &Var| nn::hard_swish(x)).eval(&x)?.to_vec::<f64>()?, [-0.0, 0.0, 4.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn hard_silu(x: &Var) -> Var {
    as_op("hard_silu", || {
        let x = &floated(x);
        x * &hard_sigmoid(x)
    })
}

pub use self::hard_silu as hard_swish;

/// `(x + sqrt(x² + b)) / 2`, a smooth `relu` (JAX's default `b` is 4).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![0.0, 1.5], &[2])?;
/// assert_eq!((|x: &Var| nn::squareplus(x, 4.0)).eval(&x)?.to_vec::<f64>()?, [1.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn squareplus(x: &Var, b: f64) -> Var {
    as_op("squareplus", || {
        let x = &floated(x);
        (x + &(x.square() + b).sqrt()) / 2.0
    })
}

/// 0 for `x <= -1`, `x` for `x >= 1`, `(x + 1)² / 4` between: a
/// piecewise-quadratic `relu`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-2.0, 0.0, 2.0], &[3])?;
/// assert_eq!((|x: &Var| nn::sparse_plus(x)).eval(&x)?.to_vec::<f64>()?, [0.0, 0.25, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn sparse_plus(x: &Var) -> Var {
    as_op("sparse_plus", || {
        let x = &floated(x);
        let quadratic = (x + 1.0).powi(2) / 4.0;
        let upper = pick(&x.ge(&x.scalar_like(1.0)), x, &quadratic);
        pick(&x.le(&x.scalar_like(-1.0)), &x.scalar_like(0.0), &upper)
    })
}

/// `clip(x + 1, 0, 2) / 2`, as JAX's `0.5 * jnp.clip(x + 1, 0, 2)`: the
/// derivative is 1/4 at ±1, where `clip`'s ties split evenly.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![-2.0, 0.0, 2.0], &[3])?;
/// assert_eq!((|x: &Var| nn::sparse_sigmoid(x)).eval(&x)?.to_vec::<f64>()?, [0.0, 0.5, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn sparse_sigmoid(x: &Var) -> Var {
    as_op("sparse_sigmoid", || {
        let y = floated(x) + 1.0;
        y.clip(&y.scalar_like(0.0), &y.scalar_like(2.0)) * 0.5
    })
}

/// `log(1 - e^-x)` for `x >= 0` (NaN below), accurate everywhere: through
/// `log(-expm1(-x))` below `log 2` and `log1p(-e^-x)` above, as JAX (after
/// Mächler). Its derivative is `1 / expm1(x)`, infinite at 0.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![0.0, std::f64::consts::LN_2], &[2])?;
/// let y = (|x: &Var| nn::log1mexp(x)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [f64::NEG_INFINITY, -std::f64::consts::LN_2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn log1mexp(x: &Var) -> Var {
    as_op("log1mexp", || {
        let x = &floated(x);
        let c = x.scalar_like(std::f64::consts::LN_2);
        let small = x.lt(&c);
        // Each branch on an input where it is finite (see `softplus`).
        let (xs, xl) = (pick(&small, x, &c), pick(&small, &c, x));
        let near = (-(-&xs).expm1()).log();
        let far = (-(-&xl).exp()).log1p();
        pick(&small, &near, &far)
    })
}

/// The gated linear unit: `x` split in two halves `a, b` along `axis`,
/// then `a * sigmoid(b)` (JAX's default axis is -1).
///
/// # Errors
/// Recorded in the trace: `axis` out of range, or an odd (or symbolic)
/// size along it.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![3.0, 4.0, 0.0, 800.0], &[2, 2])?;
/// assert_eq!((|x: &Var| nn::glu(x, 0)).eval(&x)?.to_vec::<f64>()?, [1.5, 4.0]);
/// assert!((|x: &Var| nn::glu(x, 2)).eval(&x).is_err());
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn glu(x: &Var, axis: i64) -> Var {
    as_op("glu", || {
        let x = &floated(x);
        let a = match normalize_axis("glu", axis, x.shape(), "axis") {
            Ok(a) => a,
            Err(e) => return fail(x, e),
        };
        let n = x.shape()[a];
        if is_symbolic(n) || n % 2 != 0 {
            let size = if is_symbolic(n) { "symbolic".to_string() } else { n.to_string() };
            let msg = format!("axis {axis} has size {size}: it must be even, to split in halves");
            return fail(x, Error::shape("glu", &[x.shape()], msg));
        }
        let h = (n / 2) as i64;
        let first = x.slice_axis(a as i64, Some(0), Some(h), 1);
        let second = x.slice_axis(a as i64, Some(h), None, 1);
        first * second.sigmoid()
    })
}

/// `log(mean(exp(x)))` over `axes`: `logsumexp` minus the log of the
/// number of elements reduced (`jax.nn.logmeanexp`; an empty `axes`
/// reduces nothing, as JAX's `axis=()`).
///
/// # Errors
/// Recorded in the trace: an axis out of range or repeated.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![1000.0, 1000.0, 0.0, 0.0], &[2, 2])?;
/// let y = (|x: &Var| nn::logmeanexp(x, &[1], false)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [1000.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn logmeanexp(x: &Var, axes: &[i64], keepdims: bool) -> Var {
    as_op("logmeanexp", || {
        let x = &floated(x);
        let axes = match normalize_axes("logmeanexp", axes, x.shape(), "axes") {
            Ok(a) => a.into_iter().map(|a| a as i64).collect::<Vec<_>>(),
            Err(e) => return fail(x, e),
        };
        let count = axes.iter().fold(x.scalar_like(1.0), |n, &a| n * x.dim_size(a));
        x.logsumexp(&axes, keepdims) - count.log()
    })
}

/// `(x - mean) / sqrt(var + epsilon)` over `axes` (JAX's default axis is
/// -1 and `epsilon` `1e-5`), computed as JAX's default (`algorithm="fast"`):
/// the variance is `max(mean(x²) - mean², 0)`, and the result `(x - mean)
/// * rsqrt(var + epsilon)`.
///
/// # Errors
/// Recorded in the trace: an axis out of range or repeated.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![1.0, 3.0], &[2])?;
/// let y = (|x: &Var| nn::standardize(x, &[-1], 0.0)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [-1.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn standardize(x: &Var, axes: &[i64], epsilon: f64) -> Var {
    as_op("standardize", || {
        let x = &floated(x);
        if let Err(e) = normalize_axes("standardize", axes, x.shape(), "axes") {
            return fail(x, e);
        }
        let mean = x.mean_axes(axes, true);
        let variance = x.square().mean_axes(axes, true) - mean.square();
        let variance = variance.maximum(&variance.scalar_like(0.0));
        (x - &mean) * (variance + epsilon).rsqrt()
    })
}

/// Integer class ids `x` as one-hot vectors of `dtype` along a new last
/// axis of size `num_classes`: `[.., c]` is 1 where `x == c`. An id out of
/// `0..num_classes` (a negative one too) gives a row of zeros, as in JAX.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let ids = Tensor::from_vec(vec![2i64, -1, 0], &[3])?;
/// let y = (|x: &Var| nn::one_hot(x, 3, DType::F64)).eval(&ids)?;
/// assert_eq!(y.shape(), &[3, 3]);
/// assert_eq!(y.to_vec::<f64>()?, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn one_hot(x: &Var, num_classes: usize, dtype: DType) -> Var {
    as_op("one_hot", || {
        let ids = &counted(x);
        let r = ids.rank();
        let mut shape = vec![1; r];
        shape.push(num_classes);
        let classes =
            ids.tracer().apply(Box::new(Iota { shape, axis: r, dtype: ids.dtype() }), &[]);
        ids.unsqueeze(-1).equal(&classes).cast(dtype)
    })
}

/// `exp(x) / sum(exp(x))` along `axis` (`jax.nn.softmax`; the same as
/// [`VarExt::softmax`]).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![5.0, 5.0], &[2])?;
/// assert_eq!((|x: &Var| nn::softmax(x, -1)).eval(&x)?.to_vec::<f64>()?, [0.5, 0.5]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn softmax(x: &Var, axis: i64) -> Var {
    x.softmax(axis)
}

/// `x - logsumexp(x)` along `axis` (`jax.nn.log_softmax`; the same as
/// [`VarExt::log_softmax`]).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![5.0, 5.0], &[2])?;
/// let y = (|x: &Var| nn::log_softmax(x, -1)).eval(&x)?.to_vec::<f64>()?;
/// assert_eq!(y, [-std::f64::consts::LN_2; 2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn log_softmax(x: &Var, axis: i64) -> Var {
    x.log_softmax(axis)
}

/// `log(sum(exp(x)))` over `axes`, shifted by the maximum so nothing
/// overflows (`jax.nn.logsumexp`; the same as [`VarExt::logsumexp`]).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![1000.0, 1000.0], &[2])?;
/// let y = (|x: &Var| nn::logsumexp(x, &[0], false)).eval(&x)?.item()?;
/// assert_eq!(y, 1000.0 + std::f64::consts::LN_2);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn logsumexp(x: &Var, axes: &[i64], keepdims: bool) -> Var {
    x.logsumexp(axes, keepdims)
}

/// `jax.nn.logsumexp(x, axes, b=b, where=mask)`: `log(Σ b·exp(x))` over
/// `axes` of the elements where `mask` is true, shifted by their maximum
/// so nothing overflows. `b` (weights) and `mask` (`bool`) broadcast
/// against `x`, and the axes count in the broadcast shape; `None` leaves
/// them out. As JAX's: an element whose `b` is 0 is left out (its `x`
/// does not set the maximum, and no `x` can make its term NaN); a
/// negative sum gives NaN (see [`logsumexp_sign`]); no element at all
/// gives `-inf`.
///
/// # Errors
/// Recorded in the trace: shapes that do not broadcast, an axis out of
/// range or repeated.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
/// let b = Tensor::from_vec(vec![2.0, 0.0, 1.0], &[3])?;
/// let f = |x: &Var, b: &Var| nn::logsumexp_with(x, &[0], false, Some(b), None);
/// let y = f.eval((&x, &b))?.item()?;
/// assert!((y - (2.0 * 1f64.exp() + 3f64.exp()).ln()).abs() < 1e-15);
/// // A mask leaves the last element out.
/// let m = Tensor::from_vec(vec![true, true, false], &[3])?;
/// let g = |x: &Var, m: &Var| nn::logsumexp_with(x, &[0], false, None, Some(m));
/// let y = g.eval((&x, &m))?.item()?;
/// assert!((y - (1f64.exp() + 2f64.exp()).ln()).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn logsumexp_with(
    x: &Var,
    axes: &[i64],
    keepdims: bool,
    b: Option<&Var>,
    mask: Option<&Var>,
) -> Var {
    as_op("logsumexp", || {
        let (out, sign) = logsumexp_sign(x, axes, keepdims, b, mask);
        if b.is_some() {
            where_(&sign.lt(&sign.zeros_like()), &out.full_like(f64::NAN), &out)
        } else {
            out
        }
    })
}

/// [`logsumexp_with`] with JAX's `return_sign=True`: `(log|Σ b·exp(x)|,
/// sign of the sum)`, the sign -1, 0 or 1 (0 with the log `-inf` when the
/// sum is 0), computed as JAX's `logsumexp` (and as [`logsumexp`], with
/// the weights and the mask).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::nn;
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let b = Tensor::from_vec(vec![1.0, -1.0], &[2])?;
/// let f = |x: &Var, b: &Var| {
///     let (y, s) = nn::logsumexp_sign(x, &[0], false, Some(b), None);
///     vec![y, s]
/// };
/// let r = f.eval((&x, &b))?;
/// // 1 - e < 0: the log of e - 1, and the sign -1.
/// assert!((r[0].item()? - (1f64.exp() - 1.0).ln()).abs() < 1e-15);
/// assert_eq!(r[1].item()?, -1.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn logsumexp_sign(
    x: &Var,
    axes: &[i64],
    keepdims: bool,
    b: Option<&Var>,
    mask: Option<&Var>,
) -> (Var, Var) {
    let mut a = floated(x);
    let mut weights = None;
    if let Some(b) = b {
        let (pa, pb) = crate::api::promoted(&a, &floated(b));
        a = where_(&pb.not_equal(&pb.zeros_like()), &pa, &pa.full_like(f64::NEG_INFINITY));
        weights = Some(pb);
    }
    if let Some(m) = mask {
        a = where_(m, &a, &a.full_like(f64::NEG_INFINITY));
    }
    let axes = match normalize_axes("logsumexp", axes, a.shape(), "axes") {
        Ok(v) => v.into_iter().map(|v| v as i64).collect::<Vec<_>>(),
        Err(e) => {
            let bad = fail(&a, e);
            return (bad.clone(), bad);
        }
    };
    let m = a.max(&axes, true).stop_gradient().select_finite();
    let mut e = (&a - &m).exp();
    if let Some(w) = &weights {
        e = e * w;
    }
    if let Some(mk) = mask {
        e = where_(mk, &e, &e.zeros_like());
    }
    let (mut sum, mut m) = (e.sum_keepdims(&axes), m);
    if !keepdims && !axes.is_empty() {
        sum = sum.squeeze(&axes);
        m = m.squeeze(&axes);
    }
    let sign = sum.sign();
    (sum.abs().log() + m, sign)
}
