//! Sorting along one axis: [`Sort`], one node with two results — the
//! sorted values and the permutation that sorts them (`argsort`) — from
//! which `sort`, `argsort` and `top_k` are read.
//!
//! The sort is stable in both directions: equal elements keep their order
//! (so `argsort` and `top_k` give the lower index first among ties, as
//! JAX's stable `argsort` and `lax.top_k` do). NaN sorts after every
//! number ascending, before every number descending (JAX: descending is the
//! reverse of ascending), and `-0.0` ties with `0.0`. The derivative of the
//! sorted values is the tangent gathered by the permutation (`sort`'s jvp
//! in JAX), so reverse mode scatters the cotangent back.

use anvil_core::{
    op::expect_arity, register_rule, Batched, DType, Error, Op, Result, TensorType, Var,
};

use crate::api::VarExt;
use crate::batching::{move_axis, physical_axis, single_batched};
use crate::elementwise::Domain;
use crate::index::Take;
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// Sorts along `axis`; results: the sorted values, and the `i64` indices
/// of the operand's elements in sorted order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sort {
    /// The sorted axis (non-negative).
    pub axis: usize,
    /// Largest first.
    pub descending: bool,
}

impl Op for Sort {
    fn name(&self) -> &'static str {
        "sort"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, 1)?;
        let t = &inputs[0];
        Domain::Numeric.check("sort", 0, t.dtype())?;
        if self.axis >= t.rank() {
            return Err(Error::AxisOutOfRange {
                op: "sort".into(),
                axis: self.axis as i64,
                shape: t.shape().to_vec(),
                arg: "0".into(),
            });
        }
        Ok(vec![t.clone(), t.with_dtype(DType::I64)])
    }
    fn params(&self) -> String {
        format!("axis={}, descending={}", self.axis, self.descending)
    }
}

/// The same axis, shifted past the batch axis; both results keep it.
fn vmap_sort(op: &dyn Op, args: &[Batched], _: usize) -> Result<Vec<Batched>> {
    let s = op.try_downcast::<Sort>()?;
    let (x, k) = single_batched(op, args)?;
    let op = Sort { axis: physical_axis(s.axis, k), ..*s };
    let outs = Var::apply_op_n(Box::new(op), &[&x], 2);
    Ok(outs.into_iter().map(|v| Batched::new(v, Some(k))).collect())
}

/// `d sort(x) = take_along_axis(dx, perm)`; the indices carry no tangent.
fn jvp_sort(op: &dyn Op, _: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<Sort>()?;
    let tangent = t[0].as_ref().map(|t| take_along_axis(t, &outs[1], s.axis));
    Ok(vec![tangent, None])
}

register_rule!(VmapRule, Sort, many: vmap_sort);
register_rule!(JvpRule, Sort, many: jvp_sort);
register_rule!(SparsityRule, Sort, many: sparsity_sort);

/// Which element lands at each position depends on the values, so every
/// sorted value of a lane depends on the whole lane (the union over all
/// orders; at one point the derivative is a permutation). The indices are
/// integers.
fn sparsity_sort(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let s = op.try_downcast::<Sort>()?;
    let shape = outs[0].shape();
    let len = shape[s.axis];
    let inner: usize = shape[s.axis + 1..].iter().product();
    let x = args[0].sets;
    let mut u = Union::default();
    let mut lanes = Builder::new(outs[0].numel() / len.max(1), x.nnz());
    for lane in 0..outs[0].numel() / len.max(1) {
        let (o, k) = (lane / inner, lane % inner);
        lanes.push_union(&mut u, (0..len).map(|t| x.row((o * len + t) * inner + k)));
    }
    let lanes = lanes.finish();
    cx.check_entries(op, lanes.nnz().saturating_mul(len))?;
    let values = lanes.gather(outs[0].numel(), |e| Some(e / (len * inner) * inner + e % inner));
    Ok(vec![Arc::new(values), Arc::new(IndexSets::empty(outs[1].numel()))])
}

/// `x` gathered along `axis` by `idx` of `x`'s shape (`jnp.take_along_axis`
/// for indices of the operand's shape): a batched `take` with every other
/// axis as a batch axis, so it transposes to a `scatter_add`.
pub fn take_along_axis(x: &Var, idx: &Var, axis: usize) -> Var {
    let last = x.rank().saturating_sub(1);
    let (xl, il) = (move_axis(x, axis, last), move_axis(idx, axis, last));
    let taken = Var::apply_op(Box::new(Take { axis: last, batch_dims: last }), &[&xl, &il]);
    move_axis(&taken, last, axis)
}

/// Both results of a [`Sort`] of `x` along `axis` (negative counts from the end).
pub(super) fn sort_both(x: &Var, axis: i64, descending: bool) -> (Var, Var) {
    let axis = match anvil_core::shape::normalize_axis("sort", axis, x.shape(), "0") {
        Ok(a) => a,
        Err(e) => {
            x.tracer().record(e);
            return (x.tracer().poisoned(), x.tracer().poisoned());
        }
    };
    let mut outs = Var::apply_op_n(Box::new(Sort { axis, descending }), &[x], 2);
    let idx = outs.pop().unwrap_or_else(|| x.tracer().poisoned());
    let vals = outs.pop().unwrap_or_else(|| x.tracer().poisoned());
    (vals, idx)
}

/// The `k` largest elements along the last axis and their indices, largest
/// first, the lower index first among ties (`jax.lax.top_k`).
pub(super) fn top_k(x: &Var, k: usize) -> (Var, Var) {
    let n = x.shape().last().copied();
    if x.rank() == 0 || n.is_some_and(|n| k > n) {
        x.tracer().record(Error::invalid(
            "top_k",
            "k",
            format!("k = {k} must be at most the last axis of {:?} (rank at least 1)", x.shape()),
        ));
        return (x.tracer().poisoned(), x.tracer().poisoned());
    }
    let (v, i) = sort_both(x, -1, true);
    let first = |y: &Var| y.slice_axis(-1, Some(0), Some(k as i64), 1);
    (first(&v), first(&i))
}
