//! The methods users call on concrete tensors: `t.exp()?`, `a.matmul(&b)?`,
//! `t.sum(&[0])?`, `t.norm()?` — eager operations outside any traced
//! function.
//!
//! [`TensorExt`] is an extension trait (the prelude brings it in) because
//! `Tensor` lives in `anvil-core`, which knows no concrete op. Each method
//! is the [`VarExt`] method of the same name, traced as a one-op function
//! and run by [`anvil_core::eager`]: one implementation for traced and
//! eager code (same shape checks, broadcasting and kernels), a compiled
//! plan cached per operation and operand types. Methods return `Err`
//! where a traced function's call would (a shape mismatch, an axis out of
//! range). The arithmetic operators and `add`/`sub`/`mul`/`div`/`neg`
//! are `Tensor`'s own (in `anvil-core`); `reshape` and `cast` too.

use crate::api::VarExt;
use anvil_core::eager::run1;
use anvil_core::{Result, Tensor, Var};

fn unary(
    x: &Tensor,
    op: &'static str,
    params: &[i64],
    f: impl FnOnce(&Var) -> Var,
) -> Result<Tensor> {
    run1(op, params, &[x], |v| f(&v[0]))
}

fn binary(
    x: &Tensor,
    y: &Tensor,
    op: &'static str,
    f: impl FnOnce(&Var, &Var) -> Var,
) -> Result<Tensor> {
    run1(op, &[], &[x, y], |v| f(&v[0], &v[1]))
}

/// `keepdims` and axes as the parameters of a cached plan.
fn with_flag(flag: bool, axes: &[i64]) -> Vec<i64> {
    std::iter::once(i64::from(flag)).chain(axes.iter().copied()).collect()
}

/// The method of each unary op, declared and defined once.
macro_rules! unary_methods {
    ($($(#[$doc:meta])* $m:ident;)*) => {
        $( $(#[$doc])* fn $m(&self) -> Result<Tensor> {
            unary(self.as_tensor(), stringify!($m), &[], |x| x.$m())
        } )*
    };
}

/// The method of each binary op, declared and defined once.
macro_rules! binary_methods {
    ($($(#[$doc:meta])* $m:ident;)*) => {
        $( $(#[$doc])* fn $m(&self, other: &Tensor) -> Result<Tensor> {
            binary(self.as_tensor(), other, stringify!($m), |x, y| x.$m(y))
        } )*
    };
}

/// Eager tensor operations: the methods of [`VarExt`] on concrete
/// tensors, each returning a `Result`. Brought in by `anvil::prelude::*`.
///
/// ```
/// use anvil::prelude::*;
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = Tensor::eye(2)?;
/// assert_eq!(a.matmul(&b)?, a);
/// assert_eq!(a.sum(&[0])?.to_vec::<f64>()?, vec![4.0, 6.0]);
/// assert_eq!(a.max_all()?.item()?, 4.0);
/// assert!((a.norm()?.item()? - 30f64.sqrt()).abs() < 1e-15);
/// let y = (&a.exp()? * 2.0).log()?; // log(2 e^a) = a + log 2
/// assert!(y.allclose(&(&a + 2f64.ln()), 1e-15, 0.0));
/// assert!(a.sum(&[2]).is_err()); // axis out of range: an error, as when traced
/// # Ok::<(), anvil::Error>(())
/// ```
pub trait TensorExt {
    /// The tensor itself (the methods' default bodies use it).
    #[doc(hidden)]
    fn as_tensor(&self) -> &Tensor;

    unary_methods! {
        /// `sin(x)`.
        sin;
        /// `cos(x)`.
        cos;
        /// `tan(x)`.
        tan;
        /// `e^x`.
        exp;
        /// Natural logarithm.
        log;
        /// `log(1 + x)`.
        log1p;
        /// `e^x - 1`.
        expm1;
        /// Square root.
        sqrt;
        /// `1 / sqrt(x)`.
        rsqrt;
        /// `1 / x`.
        recip;
        /// Hyperbolic tangent.
        tanh;
        /// Logistic sigmoid.
        sigmoid;
        /// `max(x, 0)`.
        relu;
        /// `|x|`.
        abs;
        /// Sign: -1, 0 or 1.
        sign;
        /// Round down.
        floor;
        /// Round up.
        ceil;
        /// Round to nearest, ties to even.
        round;
        /// Error function.
        erf;
        /// `x * x`.
        square;
        /// The sum of all elements (rank 0).
        sum_all;
        /// The mean of all elements (rank 0).
        mean;
        /// The Euclidean norm of all elements (rank 0).
        norm;
        /// The last two axes swapped.
        transpose;
        /// The elements as a vector.
        flatten;
        /// The determinant of square matrices (batch axes allowed).
        det;
        /// The inverse of square matrices.
        inv;
        /// The Cholesky factor of a symmetric positive definite matrix.
        cholesky;
    }

    binary_methods! {
        /// Matrix product with `numpy.matmul` semantics.
        matmul;
        /// `A⁻¹ b` for square `A = self`, as `jnp.linalg.solve`.
        solve;
        /// `self ^ other`, elementwise with broadcasting.
        pow;
        /// Elementwise maximum with broadcasting.
        maximum;
        /// Elementwise minimum with broadcasting.
        minimum;
        /// `atan2(self, other)`.
        atan2;
        /// `self < other` (`bool`).
        lt;
        /// `self <= other` (`bool`).
        le;
        /// `self > other` (`bool`).
        gt;
        /// `self >= other` (`bool`).
        ge;
        /// `self == other` elementwise (`bool`).
        equal;
        /// `self != other` elementwise (`bool`).
        not_equal;
    }

    /// `self ^ p` for a scalar exponent (of `self`'s dtype).
    ///
    /// # Errors
    /// A dtype `pow` does not accept; no backend linked.
    fn powf(&self, p: f64) -> Result<Tensor> {
        let x = self.as_tensor();
        let p = Tensor::scalar(p).cast(x.dtype());
        run1("powf", &[], &[x, &p], |v| v[0].pow(&v[1]))
    }

    /// The sum over `axes` (negative axes count from the end).
    ///
    /// # Errors
    /// An axis out of range or repeated.
    fn sum(&self, axes: &[i64]) -> Result<Tensor> {
        unary(self.as_tensor(), "sum", axes, |x| x.sum(axes))
    }
    /// The sum over `axes`, keeping them with size 1.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn sum_keepdims(&self, axes: &[i64]) -> Result<Tensor> {
        unary(self.as_tensor(), "sum_keepdims", axes, |x| x.sum_keepdims(axes))
    }
    /// The maximum over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn max(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        unary(self.as_tensor(), "max", &with_flag(keepdims, axes), |x| x.max(axes, keepdims))
    }
    /// The minimum over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn min(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        unary(self.as_tensor(), "min", &with_flag(keepdims, axes), |x| x.min(axes, keepdims))
    }
    /// The product over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn prod(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        unary(self.as_tensor(), "prod", &with_flag(keepdims, axes), |x| x.prod(axes, keepdims))
    }
    /// The largest element (rank 0).
    ///
    /// # Errors
    /// An empty tensor.
    fn max_all(&self) -> Result<Tensor> {
        let all = all_axes(self.as_tensor());
        unary(self.as_tensor(), "max_all", &[], |x| x.max(&all, false))
    }
    /// The smallest element (rank 0).
    ///
    /// # Errors
    /// An empty tensor.
    fn min_all(&self) -> Result<Tensor> {
        let all = all_axes(self.as_tensor());
        unary(self.as_tensor(), "min_all", &[], |x| x.min(&all, false))
    }
    /// The product of all elements (rank 0).
    ///
    /// # Errors
    /// A dtype the product does not accept.
    fn prod_all(&self) -> Result<Tensor> {
        let all = all_axes(self.as_tensor());
        unary(self.as_tensor(), "prod_all", &[], |x| x.prod(&all, false))
    }
    /// The mean over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn mean_axes(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        let params = with_flag(keepdims, axes);
        unary(self.as_tensor(), "mean_axes", &params, |x| x.mean_axes(axes, keepdims))
    }
    /// The (population) variance over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn var(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        unary(self.as_tensor(), "var", &with_flag(keepdims, axes), |x| x.var(axes, keepdims))
    }
    /// The standard deviation over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn std(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        unary(self.as_tensor(), "std", &with_flag(keepdims, axes), |x| x.std(axes, keepdims))
    }
    /// `log(sum(exp(x)))` over `axes`, computed stably.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn logsumexp(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        let params = with_flag(keepdims, axes);
        unary(self.as_tensor(), "logsumexp", &params, |x| x.logsumexp(axes, keepdims))
    }
    /// The Euclidean norm over `axes`.
    ///
    /// # Errors
    /// As [`TensorExt::sum`].
    fn norm_axes(&self, axes: &[i64], keepdims: bool) -> Result<Tensor> {
        let params = with_flag(keepdims, axes);
        unary(self.as_tensor(), "norm_axes", &params, |x| x.norm_axes(axes, keepdims))
    }
    /// Softmax along `axis`.
    ///
    /// # Errors
    /// An axis out of range.
    fn softmax(&self, axis: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "softmax", &[axis], |x| x.softmax(axis))
    }
    /// Log-softmax along `axis`.
    ///
    /// # Errors
    /// An axis out of range.
    fn log_softmax(&self, axis: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "log_softmax", &[axis], |x| x.log_softmax(axis))
    }
    /// The index of the largest element along `axis` (`i64`).
    ///
    /// # Errors
    /// An axis out of range.
    fn argmax(&self, axis: i64, keepdims: bool) -> Result<Tensor> {
        let params = [axis, i64::from(keepdims)];
        unary(self.as_tensor(), "argmax", &params, |x| x.argmax(axis, keepdims))
    }
    /// The index of the smallest element along `axis` (`i64`).
    ///
    /// # Errors
    /// An axis out of range.
    fn argmin(&self, axis: i64, keepdims: bool) -> Result<Tensor> {
        let params = [axis, i64::from(keepdims)];
        unary(self.as_tensor(), "argmin", &params, |x| x.argmin(axis, keepdims))
    }
    /// The axes reordered: axis `i` of the result is axis `perm[i]`.
    ///
    /// # Errors
    /// `perm` not a permutation of the axes.
    fn permute(&self, perm: &[i64]) -> Result<Tensor> {
        unary(self.as_tensor(), "permute", perm, |x| x.permute(perm))
    }
    /// Axes `a` and `b` swapped.
    ///
    /// # Errors
    /// An axis out of range.
    fn swap_axes(&self, a: i64, b: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "swap_axes", &[a, b], |x| x.swap_axes(a, b))
    }
    /// Size-1 `axes` removed.
    ///
    /// # Errors
    /// An axis out of range or not of size 1.
    fn squeeze(&self, axes: &[i64]) -> Result<Tensor> {
        unary(self.as_tensor(), "squeeze", axes, |x| x.squeeze(axes))
    }
    /// A size-1 axis inserted at `axis`.
    ///
    /// # Errors
    /// An axis out of range.
    fn unsqueeze(&self, axis: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "unsqueeze", &[axis], |x| x.unsqueeze(axis))
    }
    /// Broadcast to `shape` (NumPy rules).
    ///
    /// # Errors
    /// A shape the tensor does not broadcast to.
    fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let params: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        unary(self.as_tensor(), "broadcast_to", &params, |x| x.broadcast_to(shape))
    }
    /// The diagonal at `offset` of the last two axes.
    ///
    /// # Errors
    /// A tensor of rank below 2.
    fn diagonal(&self, offset: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "diagonal", &[offset], |x| x.diagonal(offset))
    }
    /// The lower triangle (below diagonal `k`) of the last two axes.
    ///
    /// # Errors
    /// A tensor of rank below 2.
    fn tril(&self, k: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "tril", &[k], |x| x.tril(k))
    }
    /// The upper triangle (above diagonal `k`) of the last two axes.
    ///
    /// # Errors
    /// A tensor of rank below 2.
    fn triu(&self, k: i64) -> Result<Tensor> {
        unary(self.as_tensor(), "triu", &[k], |x| x.triu(k))
    }
}

fn all_axes(x: &Tensor) -> Vec<i64> {
    (0..x.rank() as i64).collect()
}

impl TensorExt for Tensor {
    fn as_tensor(&self) -> &Tensor {
        self
    }
}
