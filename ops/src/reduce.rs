//! Reductions over a set of axes: `sum`, `max`, `min`, `prod`, and the index
//! reductions `argmax`, `argmin` (one axis, to `i64`).
//!
//! One struct per reduction, all sharing [`reduce_rule`] (the `defreducer`
//! of this crate). Axes are stored normalised and sorted; an empty axis list
//! is the identity, as in NumPy. `mean`, `var`, `std`, `logsumexp`,
//! `softmax` and `norm` are composites (see [`crate::composite`]).

use anvil_core::shape::reduce_shape;
use anvil_core::{op::expect_arity, DType, Error, Op, Result, TensorType};

/// The shape rule of the reductions.
///
/// # Errors
/// An axis out of range, a bool operand.
pub fn reduce_rule(
    op: &dyn Op,
    axes: &[usize],
    keepdims: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    expect_arity(op, inputs, 1)?;
    let t = &inputs[0];
    // max and min of bools are `any` and `all`, as in NumPy.
    let logical =
        t.dtype() == anvil_core::DType::Bool && (op.is::<ReduceMax>() || op.is::<ReduceMin>());
    if !logical {
        crate::elementwise::Domain::Numeric.check(op.name(), 0, t.dtype())?;
    }
    if let Some(&a) = axes.iter().find(|&&a| a >= t.rank()) {
        return Err(Error::AxisOutOfRange {
            op: op.name().into(),
            axis: a as i64,
            shape: t.shape().to_vec(),
            arg: "0".into(),
        });
    }
    Ok(t.with_shape(reduce_shape(t.shape(), axes, keepdims)))
}

pub use anvil_core::ReductionMath;

/// A reduction op with its math ([`ReductionMath`]: axes, identity and
/// combining function per dtype), which can be rebuilt over other axes.
pub trait ReduceMath: Op + ReductionMath {
    /// The same reduction over other axes.
    fn with_axes(&self, axes: Vec<usize>) -> Self
    where
        Self: Sized;
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident = $s:literal, linear: $linear:expr, sum: $sum:expr, float: ($fid:expr, $ff:expr), int: ($iid:expr, $if_:expr), bool: $bool:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub struct $name {
            /// Reduced axes, sorted and non-negative.
            pub axes: Vec<usize>,
            /// Keep reduced axes with size 1.
            pub keepdims: bool,
        }

        impl Op for $name {
            fn name(&self) -> &'static str {
                $s
            }
            fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
                reduce_rule(self, &self.axes, self.keepdims, inputs)
            }
            fn params(&self) -> String {
                format!("axes={:?}, keepdims={}", self.axes, self.keepdims)
            }
            fn linear_in(&self, k: usize) -> bool {
                k == 0 && $linear
            }
            fn reduction_math(&self) -> Option<&dyn ReductionMath> {
                Some(self)
            }
        }

        impl ReduceMath for $name {
            fn with_axes(&self, axes: Vec<usize>) -> Self {
                $name { axes, keepdims: self.keepdims }
            }
        }

        impl ReductionMath for $name {
            fn axes(&self) -> &[usize] {
                &self.axes
            }
            fn keepdims(&self) -> bool {
                self.keepdims
            }
            fn f64(&self) -> (f64, fn(f64, f64) -> f64) {
                ($fid, $ff)
            }
            fn f32(&self) -> (f32, fn(f32, f32) -> f32) {
                ($fid, $ff)
            }
            fn i64(&self) -> (i64, fn(i64, i64) -> i64) {
                ($iid, $if_)
            }
            fn bool(&self) -> Option<anvil_core::op::Combine<bool>> {
                $bool
            }
            fn is_sum(&self) -> bool {
                $sum
            }
        }
    )*};
}

reductions! {
    /// Sum over axes.
    ReduceSum = "sum", linear: true, sum: true, float: (0.0, |a, b| a + b), int: (0, |a: i64, b| a.wrapping_add(b)), bool: None;
    /// Maximum over axes (NaN propagates; `-inf` for an empty reduction).
    ReduceMax = "reduce_max", linear: false, sum: false, float: (-1.0 / 0.0, |a, b| if b > a || b.is_nan() { b } else { a }), int: (i64::MIN, |a: i64, b| a.max(b)), bool: Some((false, |a, b| a | b));
    /// Minimum over axes (NaN propagates; `+inf` for an empty reduction).
    ReduceMin = "reduce_min", linear: false, sum: false, float: (1.0 / 0.0, |a, b| if b < a || b.is_nan() { b } else { a }), int: (i64::MAX, |a: i64, b| a.min(b)), bool: Some((true, |a, b| a & b));
    /// Product over axes.
    ReduceProd = "prod", linear: false, sum: false, float: (1.0, |a, b| a * b), int: (1, |a: i64, b| a.wrapping_mul(b)), bool: None;
}

/// Index of the largest (`ArgMax`) or smallest (`ArgMin`) element along one axis.
/// Ties give the first index; a NaN counts as the extreme, as in NumPy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArgReduce {
    /// The axis (non-negative).
    pub axis: usize,
    /// Keep the axis with size 1.
    pub keepdims: bool,
    /// `true` for argmax, `false` for argmin.
    pub max: bool,
}

impl Op for ArgReduce {
    fn name(&self) -> &'static str {
        if self.max {
            "argmax"
        } else {
            "argmin"
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let t = reduce_rule(self, &[self.axis], self.keepdims, inputs)?;
        // On a symbolic axis, a constraint checked when a call binds it.
        let n = inputs[0].shape()[self.axis];
        if anvil_core::shape::require_at_least(self.name(), n, 1, "operand").is_err() {
            return Err(Error::shape(
                self.name(),
                &[inputs[0].shape()],
                format!("argument 0 is empty along axis {}", self.axis),
            ));
        }
        Ok(t.with_dtype(DType::I64))
    }
    fn params(&self) -> String {
        format!("axis={}, keepdims={}", self.axis, self.keepdims)
    }
}

// ---------------------------------------------------------------- rules

use crate::batching::{physical_axis, single_batched, vmap_reduce};
use anvil_core::{register_rule, Batched, Var};

/// Batching `argmax`/`argmin`: the same axis, shifted past the batch axis.
fn vmap_arg_reduce(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let o = op.try_downcast::<ArgReduce>()?;
    let (x, k) = single_batched(op, args)?;
    let axis = physical_axis(o.axis, k);
    let out_axis = if o.keepdims || axis > k { k } else { k - 1 };
    Ok(Batched::new(
        Var::apply_op(Box::new(ArgReduce { axis, ..o.clone() }), &[&x]),
        Some(out_axis),
    ))
}

register_rule!(VmapRule, ReduceSum, vmap_reduce::<ReduceSum>);
register_rule!(VmapRule, ReduceMax, vmap_reduce::<ReduceMax>);
register_rule!(VmapRule, ReduceMin, vmap_reduce::<ReduceMin>);
register_rule!(VmapRule, ReduceProd, vmap_reduce::<ReduceProd>);
register_rule!(VmapRule, ArgReduce, vmap_arg_reduce);

// ---------------------------------------------------------- derivatives

use crate::api::VarExt;
use crate::lax::LaxExt;
use anvil_core::LinearArg;

/// `v` with the reduced axes of `o` restored as size-1 axes (a no-op with keepdims).
fn keep_reduced_axes<O: ReduceMath>(o: &O, v: &Var, input_shape: &[usize]) -> Var {
    if o.keepdims() {
        return v.clone();
    }
    let shape: Vec<i64> = input_shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if o.axes().contains(&i) { 1 } else { d as i64 })
        .collect();
    v.reshape(&shape)
}

fn jvp_sum(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}

/// The transpose of a sum broadcasts the cotangent back over the reduced axes.
fn transpose_sum(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let o = op.try_downcast::<ReduceSum>()?;
    let shape = args[0].shape();
    Ok(vec![args[0].is_linear().then(|| keep_reduced_axes(o, ct, shape).broadcast_to(shape))])
}

/// `max`/`min`: the tangent at the extreme, averaged over ties (as JAX).
fn jvp_extreme<O: ReduceMath>(
    op: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    out: &Var,
) -> Result<Option<Var>> {
    let o = op.try_downcast::<O>()?;
    let Some(t) = &t[0] else { return Ok(None) };
    let x = &p[0];
    let at = x.equal(&keep_reduced_axes(o, out, x.shape())).cast(x.dtype());
    let axes: Vec<i64> = o.axes().iter().map(|&a| a as i64).collect();
    let (num, count) = if o.keepdims() {
        ((t * &at).sum_keepdims(&axes), at.sum_keepdims(&axes))
    } else {
        ((t * &at).sum(&axes), at.sum(&axes))
    };
    Ok(Some(num / count))
}

/// Element `i` of the last axis: the product of the others, `Π_{j≠i} x_j`,
/// as the exclusive products from both ends (no division: a polynomial
/// in `x`, exact at zeros to every order).
pub(crate) fn others_product(x: &Var) -> Var {
    let (r, k) = (x.rank(), x.shape().last().copied().unwrap_or(0));
    let mut widths = vec![(0, 0); r];
    widths[r - 1] = (1, 0);
    let before = x.cumprod(-1, false).pad(&widths, 1.0).slice_axis(-1, Some(0), Some(k as i64), 1);
    widths[r - 1] = (0, 1);
    let after = x.cumprod(-1, true).pad(&widths, 1.0).slice_axis(-1, Some(1), None, 1);
    before * after
}

/// `prod`: `sum(t_i * prod_{j != i} x_j)`. The product of the others is
/// the product of the elements before `i` times the product of those
/// after (exclusive products from both ends, over the reduced axes
/// flattened into one): a polynomial in `x`, so its own derivatives are
/// exact at zeros too (JAX's rule is a product tree, alike in that). On
/// symbolic shapes (no scans of a symbolic length yet) it is `prod / x_i`
/// with exact zeros handled for the first derivative only (`others_by_division`).
fn jvp_prod(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    let o = op.try_downcast::<ReduceProd>()?;
    let Some(t) = &t[0] else { return Ok(None) };
    let x = &p[0];
    let axes = o.axes();
    let symbolic = x.shape().iter().any(|&d| anvil_core::shape::is_symbolic(d));
    let scaled = if symbolic || axes.is_empty() {
        t * &others_by_division(x, axes)
    } else {
        // The reduced axes last, flattened into one of length k.
        let r = x.rank();
        let kept: Vec<usize> = (0..r).filter(|a| !axes.contains(a)).collect();
        let order: Vec<i64> = kept.iter().chain(axes).map(|&a| a as i64).collect();
        let k: usize = axes.iter().map(|&a| x.shape()[a]).product();
        let mut flat: Vec<i64> = kept.iter().map(|&a| x.shape()[a] as i64).collect();
        flat.push(k as i64);
        let xf = x.permute(&order).reshape(&flat);
        let scaled = t.permute(&order).reshape(&flat) * others_product(&xf);
        // Back to x's layout, so that the sums below reduce `axes`.
        let mut moved: Vec<i64> = kept.iter().map(|&a| x.shape()[a] as i64).collect();
        moved.extend(axes.iter().map(|&a| x.shape()[a] as i64));
        let mut inverse = vec![0i64; r];
        for (i, &a) in order.iter().enumerate() {
            inverse[a as usize] = i as i64;
        }
        scaled.reshape(&moved).permute(&inverse)
    };
    let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    Ok(Some(if o.keepdims() { scaled.sum_keepdims(&axes) } else { scaled.sum(&axes) }))
}

/// `prod_{j != i} x_j` over `axes` as `prod / x_i` where no element is
/// zero; with exactly one zero, the product of the nonzero elements at the
/// zero and 0 elsewhere; with two or more, 0 everywhere. Exact as a value;
/// its derivative at an exact zero misses the terms through the other
/// zeros' positions.
fn others_by_division(x: &Var, axes: &[usize]) -> Var {
    let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let is_zero = x.equal(&x.zeros_like());
    let nonzero = is_zero.select(&x.ones_like(), x);
    let prod_nonzero = nonzero.prod(&axes, true);
    let zeros = is_zero.cast(x.dtype()).sum_keepdims(&axes);
    let none = zeros.equal(&zeros.zeros_like());
    let one = zeros.equal(&zeros.ones_like());
    let at_single_zero =
        one.select(&is_zero.select(&prod_nonzero, &x.zeros_like()), &x.zeros_like());
    none.select(&(&prod_nonzero / &nonzero), &at_single_zero)
}

fn jvp_arg(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(None)
}

register_rule!(JvpRule, ReduceSum, jvp_sum);
register_rule!(TransposeRule, ReduceSum, transpose_sum);
register_rule!(JvpRule, ReduceMax, jvp_extreme::<ReduceMax>);
register_rule!(JvpRule, ReduceMin, jvp_extreme::<ReduceMin>);
register_rule!(JvpRule, ReduceProd, jvp_prod);
register_rule!(JvpRule, ArgReduce, jvp_arg);

// ------------------------------------------------------------- rewrites

use crate::constant::as_basis;
use crate::elementwise::{Div, Mul, Neg};
use crate::movement::BroadcastTo;
use anvil_core::Arith;
use anvil_core::TensorType as Type;

/// Rewrites of a sum:
///
/// - over no axes, or over axes of size 1 with their axes kept, the
///   operand itself;
/// - over exactly the axes a `broadcast_to` copied along, the source times
///   the number of copies (the transpose of a broadcast meets the
///   broadcast of a cotangent in reverse mode): one rounding instead of
///   many, so the two can differ in the last bit (the product is the
///   closer one). Not for zero copies (the sum is zeros, not `x * 0`);
/// - over one axis of an `n × n` chain `((I * v) ∘ b) ∘ c …` — the identity
///   seed times broadcast operands, then products, quotients and negations
///   by broadcast operands — the chain replayed on the diagonal: the same
///   operations on the same values in the same order, so the diagonal
///   entries are exact. The chain's off-diagonal entries are zeros of the
///   seed, `(0 · v) ∘ b …`; the sum leaves them out, so where a derivative is
///   infinite or NaN the rewritten sum is that entry's value, not the NaN
///   the dense product `0 · ∞` would spread.
///
/// - of a product or quotient with factors that are constant along reduced
///   axes (broadcast along them), those factors taken out:
///   `Σ_j (e_ij / s_i) · x_ij = (Σ_j e_ij x_ij) / s_i`. Where a factor is
///   constant along only some of the reduced axes, the sum is split into a
///   sum over those axes first. The remaining factors are multiplied in a
///   canonical order, so that sums of the same factors written in another
///   order (the value and the gradient of a loss through `softmax` both sum
///   `e · x` per row) become one sum. Floats only: the factor multiplies the
///   sum once instead of each term, which rounds differently.
///
/// - of a product with a factor `a ± b` where `b` is constant along the
///   reduced axes (and `a` is not), distributed:
///   `Σ_j w_ij (x_ij − c_i) = Σ_j w_ij x_ij − c_i Σ_j w_ij`, and with no
///   other factor `Σ_j (x_ij − c_i) = Σ_j x_ij − n c_i`; the constant
///   side then leaves its sum by the rule above. Where `b` is constant
///   along some of the reduced axes only, the sum is split as above. The
///   sums left read the same values, so a backend computes them in one
///   pass (the CPU backend's fused reductions), and the one of the weights
///   alone is often the gradient's too (log-softmax's value and gradient
///   share `Σ_j w_ij`). Floats only, and it rounds differently: the terms
///   are summed before the difference is taken, so the error is relative to
///   `|Σ w a| + |b Σ w|` rather than to `Σ |w (a − b)|` (a few ulp of the
///   larger of the two when they nearly cancel).
///
/// Cost: each removes a pass over the large operand, or moves arithmetic
/// from the operand's size to the result's.
fn rewrite_sum(op: &dyn Op, args: &[Var], out: &Type) -> Result<Option<Var>> {
    let o = op.try_downcast::<ReduceSum>()?;
    let x = &args[0];
    if x.ty() == out && o.axes.iter().all(|&a| x.shape().get(a) == Some(&1)) {
        return Ok(Some(x.clone()));
    }
    if let Some(v) = sum_of_broadcast(o, x, out) {
        return Ok(Some(v));
    }
    if let Some(v) = crate::diagonal::sum_over_space(x, &o.axes, out) {
        return Ok(Some(v));
    }
    if let Some(v) = factors_out_of_sum(o, x, out) {
        return Ok(Some(v));
    }
    if let Some(v) = sum_distributes(o, x, out) {
        return Ok(Some(v));
    }
    if let ([n, k], [_]) = (x.shape(), &o.axes[..]) {
        if n == k {
            let shape: Vec<i64> = out.shape().iter().map(|&d| d as i64).collect();
            return Ok(diagonal_of_chain(x, *n)
                .map(|d| d.reshape(&shape))
                .filter(|d| d.ty() == out));
        }
    }
    Ok(None)
}

fn sum_of_broadcast(o: &ReduceSum, x: &Var, out: &Type) -> Option<Var> {
    let p = x.producer().filter(|p| p.op_as::<BroadcastTo>().is_some())?;
    let src = &p.inputs[0];
    let (from, to) = (src.shape(), x.shape());
    let lead = to.len() - from.len();
    // The axes along which the broadcast copies.
    let copied: Vec<usize> =
        (0..to.len()).filter(|&d| d < lead || (from[d - lead] == 1 && to[d] != 1)).collect();
    let copies: usize = copied.iter().map(|&d| to[d]).product();
    // Reduced size-1 axes change nothing; every copied axis must be reduced.
    let reduced: Vec<usize> = o.axes.iter().copied().filter(|&d| to[d] != 1).collect();
    if reduced != copied || src.numel() != out.numel() || copies == 0 {
        return sum_of_part_broadcast(o, src, to, &copied, &reduced, out);
    }
    let scaled = if copies == 1 { src.clone() } else { src * &src.scalar_like(copies as f64) };
    let shape: Vec<i64> = out.shape().iter().map(|&d| d as i64).collect();
    Some(if scaled.shape() == out.shape() { scaled } else { scaled.reshape(&shape) })
}

/// A sum over some of the axes a broadcast copies along (`Σ_j 1` of a
/// ones matrix broadcast from a scalar): the source times the number of
/// copies summed, broadcast to the result (a value of the result's size).
fn sum_of_part_broadcast(
    o: &ReduceSum,
    src: &Var,
    to: &[usize],
    copied: &[usize],
    reduced: &[usize],
    out: &Type,
) -> Option<Var> {
    if reduced.is_empty()
        || reduced.iter().any(|&d| to[d] == 0)
        || !reduced.iter().all(|d| copied.contains(d))
        || !src.dtype().is_float()
    {
        return None;
    }
    let copies: usize = reduced.iter().map(|&d| to[d]).product();
    let scaled = if copies == 1 { src.clone() } else { src * &src.scalar_like(copies as f64) };
    let keep: Vec<usize> =
        (0..to.len()).map(|d| if o.axes.contains(&d) { 1 } else { to[d] }).collect();
    let mut v = to_rank(&scaled, to.len());
    if v.shape() != keep.as_slice() {
        v = v.broadcast_to(&keep);
    }
    if !o.keepdims {
        let shape: Vec<i64> = out.shape().iter().map(|&d| d as i64).collect();
        v = v.reshape(&shape);
    }
    (v.ty() == out).then_some(v)
}

/// The factors of a product tree (ops declaring [`Arith`] `Mul`, `Div`,
/// `Neg`, a plugin's included) of the reduced operand's shape: numerators,
/// divisors, and the sign.
struct Factors {
    num: Vec<Var>,
    den: Vec<Var>,
    negative: bool,
}

impl Factors {
    /// Flattens `x`'s product tree; only through nodes of `x`'s shape, so
    /// every factor broadcasts to it.
    fn of(x: &Var) -> Factors {
        let mut f = Factors { num: Vec::new(), den: Vec::new(), negative: false };
        let mut stack = vec![x.clone()];
        while let Some(v) = stack.pop() {
            let p = v.producer().filter(|_| v.shape() == x.shape() && v.dtype() == x.dtype());
            match p.as_ref().and_then(|p| Some((p, p.op.arith()?))) {
                Some((p, Arith::Mul)) => {
                    stack.extend([p.inputs[1].clone(), p.inputs[0].clone()]);
                }
                Some((p, Arith::Div)) => {
                    f.den.push(p.inputs[1].clone());
                    stack.push(p.inputs[0].clone());
                }
                Some((p, Arith::Neg)) => {
                    f.negative = !f.negative;
                    stack.push(p.inputs[0].clone());
                }
                _ => f.num.push(v),
            }
        }
        f
    }
}

/// The axes of `axes` along which `v`, broadcast (right-aligned) to `shape`,
/// is constant.
fn constant_along(v: &Var, shape: &[usize], axes: &[usize]) -> Vec<usize> {
    let lead = shape.len().saturating_sub(v.rank());
    axes.iter().copied().filter(|&d| d < lead || v.shape()[d - lead] == 1).collect()
}

/// `v` with size-1 axes in front up to rank `rank`.
fn to_rank(v: &Var, rank: usize) -> Var {
    if v.rank() >= rank {
        return v.clone();
    }
    let mut shape = vec![1_i64; rank - v.rank()];
    shape.extend(v.shape().iter().map(|&d| d as i64));
    v.reshape(&shape)
}

/// The product-tree rewrite of [`rewrite_sum`]: factors constant along the
/// reduced axes moved out of the sum.
fn factors_out_of_sum(o: &ReduceSum, x: &Var, out: &Type) -> Option<Var> {
    let shape = x.shape().to_vec();
    if !x.dtype().is_float() || o.axes.iter().all(|&d| shape[d] == 1) {
        return None;
    }
    let f = Factors::of(x);
    if f.num.len() + f.den.len() < 2 {
        return None;
    }
    // Axes of size 1 add nothing to the sum: only the others count.
    let axes: Vec<usize> = o.axes.iter().copied().filter(|&d| shape[d] != 1).collect();
    let along = |v: &Var| constant_along(v, &shape, &axes);
    // (factor, whether it divides)
    let mut outside: Vec<(Var, bool)> = Vec::new();
    let mut inside: Vec<(Var, bool)> = Vec::new();
    for (v, divides) in f.num.iter().map(|v| (v, false)).chain(f.den.iter().map(|v| (v, true))) {
        let entry = (v.clone(), divides);
        if along(v).len() == axes.len() {
            outside.push(entry);
        } else {
            inside.push(entry);
        }
    }
    if inside.is_empty() {
        return None; // constant along every reduced axis: not a product's job
    }
    if outside.is_empty() {
        // Factors constant along some reduced axes only: sum over those axes
        // first (their size-1 axes kept), then over all of them; the inner
        // sum then has factors to take out.
        let split: Vec<usize> = inside.iter().map(|(v, _)| along(v)).max_by_key(Vec::len)?;
        if split.is_empty() || split.len() == axes.len() {
            return None;
        }
        let inner = sum_of(x, &split, true);
        let outer = sum_of(&inner, &o.axes, o.keepdims);
        return (outer.ty() == out).then_some(outer);
    }
    // The varying factors, in a canonical order, then the sum, then the
    // constant factors (all of the operand's rank, so the axes line up).
    inside.sort_by_key(|(v, divides)| (*divides, v.id().map(|i| i.index())));
    let mut prod: Option<Var> = None;
    for (v, divides) in &inside {
        let v = to_rank(v, shape.len());
        prod = Some(match (prod, divides) {
            (None, false) => v,
            (None, true) => &v.scalar_like(1.0) / &v,
            (Some(p), false) => &p * &v,
            (Some(p), true) => &p / &v,
        });
    }
    let mut r = sum_of(&prod?, &o.axes, true);
    outside.sort_by_key(|(v, divides)| (*divides, v.id().map(|i| i.index())));
    for (v, divides) in &outside {
        let v = to_rank(v, shape.len());
        r = if *divides { &r / &v } else { &r * &v };
    }
    if f.negative {
        r = -&r;
    }
    if !o.keepdims {
        let dims: Vec<i64> = out.shape().iter().map(|&d| d as i64).collect();
        r = r.reshape(&dims);
    }
    (r.ty() == out).then_some(r)
}

/// The linearity rewrite of [`rewrite_sum`]: `Σ F·(y − c) = Σ F·y − c Σ F`
/// when `c` is constant along more reduced axes than `y` (the sum split
/// first when it is constant along some of them only), so that `c` then
/// leaves its sum — a log-softmax's value `Σ w·(y − lse)` computed beside
/// the sums of `lse` instead of in a pass of its own.
///
/// In floating point the two sides may differ by far more than rounding:
/// `Σ (x − mean)²` distributed is `Σ x² − …`, which cancels to 0 or below
/// when the mean is large against the spread. So the rewrite applies only
/// where it cannot cancel: `y = x − max(x)` along the reduced axes (every
/// `y ≤ 0`) and `c = log Σ exp(y)` (`0 ≤ c`, so `|y − c| ≥ c`: the terms
/// it splits off are never larger than the sum they come from).
fn sum_distributes(o: &ReduceSum, x: &Var, out: &Type) -> Option<Var> {
    let shape = x.shape().to_vec();
    let rank = shape.len();
    if !x.dtype().is_float() {
        return None;
    }
    let axes: Vec<usize> = o.axes.iter().copied().filter(|&d| shape[d] != 1).collect();
    if axes.is_empty() {
        return None;
    }
    let along = |v: &Var| constant_along(v, &shape, &axes);
    let f = Factors::of(x);
    // The first numerator `l ± r` with one side constant along more
    // reduced axes than the other: its index, sides, sign, and those axes.
    let (k, l, r, sub, constant) = f.num.iter().enumerate().find_map(|(k, t)| {
        let p = t.producer()?;
        let sub = match p.op.arith()? {
            Arith::Add => false,
            Arith::Sub => true,
            _ => return None,
        };
        let (l, r) = (&p.inputs[0], &p.inputs[1]);
        if [t, l, r].iter().any(|v| v.dtype() != x.dtype()) {
            return None;
        }
        let (cl, cr) = (along(l), along(r));
        let safe = sub && cr.len() > cl.len() && log_sum_exp_of_shifted(r, l);
        let c = if cl.len() > cr.len() { cl } else { cr };
        (safe && c.len() > along(t).len()).then(|| (k, l.clone(), r.clone(), sub, c))
    })?;
    if constant.len() < axes.len() {
        // Constant along some reduced axes only: sum over those first.
        let inner = sum_of(x, &constant, true);
        let outer = sum_of(&inner, &o.axes, o.keepdims);
        return (outer.ty() == out).then_some(outer);
    }
    // The other factors times `side`, of the operand's shape, summed.
    let sum_with = |side: &Var| -> Var {
        let mut p = to_rank(side, rank);
        for (j, v) in f.num.iter().enumerate() {
            if j != k {
                p = &p * &to_rank(v, rank);
            }
        }
        for v in &f.den {
            p = &p / &to_rank(v, rank);
        }
        if p.shape() != shape.as_slice() {
            p = p.broadcast_to(&shape);
        }
        sum_of(&p, &o.axes, o.keepdims)
    };
    let (sl, sr) = (sum_with(&l), sum_with(&r));
    let mut v = if sub { &sl - &sr } else { &sl + &sr };
    if f.negative {
        v = -&v;
    }
    (v.ty() == out).then_some(v)
}

/// Whether `c = log(Σ exp(y))` (kept axes, perhaps broadcast) and
/// `y = x − max(x)` (the maximum perhaps behind `stop_gradient` and a
/// select of its finite values): then `y ≤ 0 ≤ c`.
fn log_sum_exp_of_shifted(c: &Var, y: &Var) -> bool {
    // Through `stop_gradient` and `select(_, m, 0)` (the maximum where it
    // is finite, else 0: either way `y ≤ 0` keeps a 0 term, `c ≥ 0`). No
    // reshape or broadcast: the kept axes must line up as computed.
    let zero = |v: &Var| {
        v.producer().and_then(|p| p.op_as::<crate::constant::Full>().map(|f| f.value.to_f64()))
            == Some(0.0)
            || v.constant_value().is_some_and(|t| t.to_f64_vec().iter().all(|&e| e == 0.0))
    };
    let through = |v: &Var| -> Var {
        let mut v = v.clone();
        while let Some(p) = v.producer() {
            let next = if p.op_as::<crate::elementwise::StopGradient>().is_some() {
                p.inputs[0].clone()
            } else if p.op.is_select() && zero(&p.inputs[2]) {
                p.inputs[1].clone()
            } else {
                break;
            };
            v = next;
        }
        v
    };
    let op_of = |v: &Var| through(v).producer();
    let Some(log) = op_of(c).filter(|p| p.op_as::<crate::elementwise::Log>().is_some()) else {
        return false;
    };
    let Some(sum) = op_of(&log.inputs[0]) else { return false };
    let Some(summed) = sum.op_as::<ReduceSum>().filter(|s| s.keepdims).map(|s| s.axes.clone())
    else {
        return false;
    };
    let Some(exp) =
        op_of(&sum.inputs[0]).filter(|p| p.op_as::<crate::elementwise::Exp>().is_some())
    else {
        return false;
    };
    // `y = x − m`, `m` the maximum of `x` along axes the sum covers: each
    // sum has a term `exp(0) = 1`, so `c ≥ 0`.
    let Some(shift) = y.producer().filter(|p| p.op.arith() == Some(Arith::Sub)) else {
        return false;
    };
    let (x, m) = (&shift.inputs[0], &shift.inputs[1]);
    exp.inputs[0].is_same(y)
        && op_of(m).is_some_and(|p| {
            p.op_as::<ReduceMax>()
                .is_some_and(|r| r.keepdims && r.axes.iter().all(|a| summed.contains(a)))
                && p.inputs[0].is_same(x)
        })
}

/// `x` summed over `axes`.
fn sum_of(x: &Var, axes: &[usize], keepdims: bool) -> Var {
    Var::apply_op(Box::new(ReduceSum { axes: axes.to_vec(), keepdims }), &[x])
}

/// The diagonal, as an `[n]` vector, of an `n × n` chain (see [`rewrite_sum`]).
fn diagonal_of_chain(x: &Var, n: usize) -> Option<Var> {
    if x.shape() != [n, n] {
        return None;
    }
    let p = x.producer()?;
    if p.op_as::<Neg>().is_some() {
        return Some(-&diagonal_of_chain(&p.inputs[0], n)?);
    }
    // Diagonals of the identity's one diagonal: their values.
    if let Some(d) = p.op_as::<crate::diagonal::Diagonals>() {
        return (d.offsets == [0]).then(|| p.inputs[0].reshape(&[n as i64]));
    }
    let (is_mul, is_div) = (p.op_as::<Mul>().is_some(), p.op_as::<Div>().is_some());
    if !(is_mul || is_div) {
        return None;
    }
    let (a, b) = (&p.inputs[0], &p.inputs[1]);
    let small = |v: &Var| v.numel() <= n;
    let identity = |v: &Var| v.shape() == [n, n] && as_basis(v).is_some_and(|s| s.is_identity());
    // The chain's start: I * v or v * I.
    if is_mul && identity(a) && small(b) {
        return diagonal_of_small(b, n);
    }
    if is_mul && identity(b) && small(a) {
        return diagonal_of_small(a, n);
    }
    // A link: chain ∘ small, or small * chain (in the original order).
    let (chain, other, chain_first) = if small(b) {
        (a, b, true)
    } else if is_mul && small(a) {
        (b, a, false)
    } else {
        return None;
    };
    let d = diagonal_of_chain(chain, n)?;
    let o = diagonal_of_small(other, n)?;
    let (l, r) = if chain_first { (&d, &o) } else { (&o, &d) };
    Some(Var::apply_op(p.op.clone(), &[l, r]))
}

/// The diagonal of a broadcast operand of at most `n` elements: itself
/// (`[n]`, `[1, n]` or `[n, 1]`), or its one value everywhere.
fn diagonal_of_small(v: &Var, n: usize) -> Option<Var> {
    match v.numel() {
        1 => Some(v.reshape(&[]).broadcast_to(&[n])),
        m if m == n && v.rank() <= 2 && v.shape().iter().all(|&d| d == 1 || d == n) => {
            Some(v.reshape(&[n as i64]))
        }
        _ => None,
    }
}

register_rule!(RewriteRule, ReduceSum, rewrite_sum);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{strided_positions, strides_i64, Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// A reduction: each result element depends on the union of its group
/// (the operand elements reduced into it). Exact for `sum` and `prod`;
/// for `max` and `min` the union over all points (at one point the
/// derivative picks one element of the group).
fn sparsity_reduce<R: ReduceMath>(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let r = op.try_downcast::<R>()?;
    let shape = args[0].ty.shape();
    let s = strides_i64(shape);
    // Kept axes first (in order: the result's order), reduced axes last,
    // so each group is a contiguous run of the walk.
    let order: Vec<usize> = (0..shape.len())
        .filter(|a| !r.axes().contains(a))
        .chain(r.axes().iter().copied())
        .collect();
    let walk_shape: Vec<usize> = order.iter().map(|&a| shape[a]).collect();
    let walk_strides: Vec<i64> = order.iter().map(|&a| s[a]).collect();
    let walk = strided_positions(&walk_shape, 0, &walk_strides)?;
    let group: usize = r.axes().iter().map(|&a| shape[a]).product();
    let sets = if group == 0 {
        IndexSets::empty(out.numel())
    } else {
        args[0].sets.union_groups(walk.chunks(group))
    };
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(SparsityRule, ReduceSum, sparsity_reduce::<ReduceSum>);
register_rule!(SparsityRule, ReduceMax, sparsity_reduce::<ReduceMax>);
register_rule!(SparsityRule, ReduceMin, sparsity_reduce::<ReduceMin>);
register_rule!(SparsityRule, ReduceProd, sparsity_reduce::<ReduceProd>);
