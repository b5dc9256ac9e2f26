//! Helpers shared by the jvp and transpose rules of the standard ops.
//!
//! Tangents are `Option<Var>`: `None` is a symbolic zero that costs nothing
//! and is never materialised unless an op needs a dense operand (a
//! `concatenate` of a tangent with a zero one). Binary ops broadcast inside
//! the op, so a tangent may be smaller than the output; [`unbroadcast`] is
//! the transpose of that implicit broadcast.

use crate::api::VarExt;
use anvil_core::Var;

/// Sums `ct` down to `shape`, undoing NumPy broadcasting: leading axes that
/// `shape` lacks are summed away, and axes where `shape` has 1 are summed
/// with keepdims. Returns `ct` itself when the shapes already agree.
pub fn unbroadcast(ct: &Var, shape: &[usize]) -> Var {
    if ct.shape() == shape {
        return ct.clone();
    }
    let lead = ct.rank().saturating_sub(shape.len());
    let mut axes: Vec<i64> = (0..lead as i64).collect();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && ct.shape().get(lead + i) != Some(&1) {
            axes.push((lead + i) as i64);
        }
    }
    let summed = if axes.is_empty() { ct.clone() } else { ct.sum(&axes) };
    let target: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    if summed.shape() == shape {
        summed
    } else {
        summed.reshape(&target)
    }
}

/// `t` broadcast to `shape` if it is smaller (a tangent of a broadcast operand).
pub fn broadcast_like(t: &Var, shape: &[usize]) -> Var {
    if t.shape() == shape {
        t.clone()
    } else {
        t.broadcast_to(shape)
    }
}

/// The tangent, or a dense zero of `like`'s type when it is symbolic.
pub fn dense(t: &Option<Var>, like: &Var) -> Var {
    t.clone().unwrap_or_else(|| like.zeros_like())
}

/// The sum of two optional tangents, broadcast to `shape`.
pub fn add_tangents(a: Option<Var>, b: Option<Var>, shape: &[usize]) -> Option<Var> {
    match (a, b) {
        (Some(a), Some(b)) => Some(broadcast_like(&(a + b), shape)),
        (Some(t), None) | (None, Some(t)) => Some(broadcast_like(&t, shape)),
        (None, None) => None,
    }
}

/// `t * d`, the chain rule for an elementwise op with derivative `d`.
pub fn scale(t: &Option<Var>, d: impl FnOnce() -> Var) -> Option<Var> {
    t.as_ref().map(|t| t * &d())
}

/// Zeros of type `ty`, in the trace of `like` (a `full` node, never a
/// dense constant).
pub fn zeros(like: &Var, ty: &anvil_core::TensorType) -> Var {
    let value = anvil_core::Scalar::I64(0).cast(ty.dtype());
    like.tracer().apply(Box::new(crate::constant::Full { shape: ty.shape().to_vec(), value }), &[])
}
