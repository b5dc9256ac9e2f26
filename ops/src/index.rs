//! Indexing by integer tensors: `take` (gather along one axis) and its
//! transpose `scatter_add`.
//!
//! `take(x, idx, axis)` follows `numpy.take`: the result has shape
//! `x.shape[..axis] ++ idx.shape ++ x.shape[axis+1..]`; negative indices count
//! from the end. Indexing by a list of integers and by a single integer are
//! `take` with a constant index of rank 1 and rank 0 (see
//! [`crate::VarExt::index`] and [`crate::VarExt::index_axis`]). Indices are data, so an
//! index out of bounds is found when the kernel runs and reported as an error
//! naming the op, the index and the axis.
//!
//! Both ops carry `batch_dims` (XLA's batch dimensions of a gather): the
//! first `batch_dims` axes of the operand and of the indices are paired, so
//! element `b` of the batch is indexed only by indices of element `b`. That
//! is what `vmap` needs when both the operand and the indices are batched;
//! it keeps each batch element's bounds check exact (no flattened offsets
//! that would let a bad index read a neighbour's data).

use crate::batching::{at_front, move_axis};
use anvil_core::{
    op::expect_arity, register_rule, Batched, DType, Error, Op, Result, TensorType, Var,
};

fn check_indices(op: &str, arg: &str, t: &TensorType) -> Result<()> {
    if t.dtype() == DType::I64 {
        Ok(())
    } else {
        Err(Error::dtype(op, arg, t.dtype(), "i64"))
    }
}

/// The operand's and the indices' leading `batch_dims` axes must agree.
fn check_batch(op: &str, batch_dims: usize, a: &TensorType, idx: &TensorType) -> Result<()> {
    let ok = a.rank() >= batch_dims
        && idx.rank() >= batch_dims
        && a.shape()[..batch_dims] == idx.shape()[..batch_dims];
    if ok {
        Ok(())
    } else {
        Err(Error::shape(
            op,
            &[a.shape(), idx.shape()],
            format!("the first {batch_dims} axes (batch_dims) of argument 0 and of the indices (argument 1) must agree"),
        ))
    }
}

/// `numpy.take(x, indices, axis)`, with optional leading batch axes shared
/// by `x` and `indices`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Take {
    /// The indexed axis of the operand (non-negative, at least `batch_dims`).
    pub axis: usize,
    /// Leading axes shared by the operand and the indices (0 for `numpy.take`).
    pub batch_dims: usize,
}

impl Take {
    /// `numpy.take` along `axis` (no batch axes).
    pub fn new(axis: usize) -> Take {
        Take { axis, batch_dims: 0 }
    }
}

impl Op for Take {
    fn name(&self) -> &'static str {
        "take"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (x, idx) = (&inputs[0], &inputs[1]);
        if self.axis >= x.rank() || self.axis < self.batch_dims {
            return Err(Error::AxisOutOfRange {
                op: "take".into(),
                axis: self.axis as i64,
                shape: x.shape().to_vec(),
                arg: "0".into(),
            });
        }
        check_indices("take", "1 (indices)", idx)?;
        check_batch("take", self.batch_dims, x, idx)?;
        let mut shape = x.shape()[..self.axis].to_vec();
        shape.extend_from_slice(&idx.shape()[self.batch_dims..]);
        shape.extend_from_slice(&x.shape()[self.axis + 1..]);
        Ok(x.with_shape(shape))
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
    fn params(&self) -> String {
        if self.batch_dims == 0 {
            format!("axis={}", self.axis)
        } else {
            format!("axis={}, batch_dims={}", self.axis, self.batch_dims)
        }
    }
}

/// The transpose of [`Take`]: a zero tensor whose `axis` has `size` entries,
/// into which `updates` are added at `indices` (repeated indices accumulate).
/// `updates` has the shape `take` would give:
/// `out[..axis] ++ idx[batch_dims..] ++ out[axis+1..]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScatterAdd {
    /// The scattered axis of the result.
    pub axis: usize,
    /// The size of that axis in the result.
    pub size: usize,
    /// Leading axes shared by the updates, the indices and the result.
    pub batch_dims: usize,
    /// Built as the transpose of a [`Take`] (in `grad`, `vjp`, `jacrev`):
    /// a bad index is then reported as the user wrote it, an error of `take`.
    pub of_take: bool,
}

impl ScatterAdd {
    /// `scatter_add` into an axis of `size` entries (no batch axes).
    pub fn new(axis: usize, size: usize) -> ScatterAdd {
        ScatterAdd { axis, size, batch_dims: 0, of_take: false }
    }

    /// The result shape for `updates` scattered by indices of rank `idx_rank`.
    fn out_shape(&self, updates: &[usize], idx_rank: usize) -> Option<Vec<usize>> {
        let idx_rank = idx_rank.checked_sub(self.batch_dims)?;
        if updates.len() < self.axis + idx_rank || self.axis < self.batch_dims {
            return None;
        }
        let mut s = updates[..self.axis].to_vec();
        s.push(self.size);
        s.extend_from_slice(&updates[self.axis + idx_rank..]);
        Some(s)
    }
}

impl Op for ScatterAdd {
    fn name(&self) -> &'static str {
        "scatter_add"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic(self.size) {
            return Ok(None);
        }
        Ok(Some(Box::new(ScatterAdd { size: binding.eval(self.size)?, ..*self })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (u, idx) = (&inputs[0], &inputs[1]);
        check_indices("scatter_add", "1 (indices)", idx)?;
        check_batch("scatter_add", self.batch_dims, u, idx)?;
        let fits = self.out_shape(u.shape(), idx.rank());
        let free = &idx.shape()[self.batch_dims.min(idx.rank())..];
        let idx_matches = u.rank() >= self.axis + free.len()
            && u.shape()[self.axis..self.axis + free.len()] == *free;
        match fits {
            Some(s) if idx_matches => Ok(u.with_shape(s)),
            _ => Err(Error::shape(
                "scatter_add",
                &[u.shape(), idx.shape()],
                format!("updates (argument 0) must have the indices' shape at axis {}", self.axis),
            )),
        }
    }
    fn params(&self) -> String {
        if self.batch_dims == 0 {
            format!("axis={}, size={}", self.axis, self.size)
        } else {
            format!("axis={}, size={}, batch_dims={}", self.axis, self.size, self.batch_dims)
        }
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

// ------------------------------------------------------------------ batching

/// Both operands with their batch axis in front (broadcasting an unbatched
/// one), for the general case: one more batch dimension.
fn both_front(args: &[Batched], size: usize) -> (Var, Var) {
    (at_front(&args[0], size), at_front(&args[1], size))
}

fn vmap_take(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let t = op.try_downcast::<Take>()?;
    expect_arity(op, args, 2)?;
    let (x, idx) = (&args[0], &args[1]);
    let idx_free = idx.logical_rank() - t.batch_dims;
    let apply = |x: &Var, idx: &Var, axis: usize, batch_dims: usize| {
        Var::apply_op(Box::new(Take { axis, batch_dims }), &[x, idx])
    };
    match (x.axis, idx.axis) {
        // Only the operand is batched: index the same axis, shifted past the
        // batch axis. The batch axis ends up before or after the indices' axes.
        (Some(k), None) if t.batch_dims == 0 => {
            if k <= t.axis {
                Ok(Batched::new(apply(&x.var, &idx.var, t.axis + 1, 0), Some(k)))
            } else {
                let out = apply(&x.var, &idx.var, t.axis, 0);
                Ok(Batched::new(out, Some(k - 1 + idx_free)))
            }
        }
        // Only the indices are batched: their batch axis lands among the
        // indices' axes of the result.
        (None, Some(j)) if t.batch_dims == 0 => {
            Ok(Batched::new(apply(&x.var, &idx.var, t.axis, 0), Some(t.axis + j)))
        }
        _ => {
            let (xf, idf) = both_front(args, size);
            Ok(Batched::new(apply(&xf, &idf, t.axis + 1, t.batch_dims + 1), Some(0)))
        }
    }
}

fn vmap_scatter_add(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let s = op.try_downcast::<ScatterAdd>()?;
    expect_arity(op, args, 2)?;
    let (u, idx) = (&args[0], &args[1]);
    match (u.axis, idx.axis) {
        (Some(k), None) if s.batch_dims == 0 => {
            let (u, k) =
                if k <= s.axis { (u.var.clone(), k) } else { (move_axis(&u.var, k, 0), 0) };
            let op = ScatterAdd { axis: s.axis + 1, ..*s };
            Ok(Batched::new(Var::apply_op(Box::new(op), &[&u, &idx.var]), Some(k)))
        }
        _ => {
            let (uf, idf) = both_front(args, size);
            let op = ScatterAdd { axis: s.axis + 1, batch_dims: s.batch_dims + 1, ..*s };
            Ok(Batched::new(Var::apply_op(Box::new(op), &[&uf, &idf]), Some(0)))
        }
    }
}

register_rule!(VmapRule, Take, vmap_take);
register_rule!(VmapRule, ScatterAdd, vmap_scatter_add);

// ---------------------------------------------------------- derivatives

use anvil_core::LinearArg;

/// `take` and `scatter_add` are linear in their first operand; the indices
/// carry no tangent.
fn jvp_first_operand(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t, &p[1]])))
}

fn known_indices<'a>(op: &dyn Op, args: &'a [LinearArg]) -> Result<&'a Var> {
    args[1].known().ok_or_else(|| {
        Error::invalid(op.name(), "transpose", "the indices (argument 1) must be known, not linear")
    })
}

/// The transpose of a gather is a scatter-add into a zero axis of the operand's size.
fn transpose_take(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let t = op.try_downcast::<Take>()?;
    let idx = known_indices(op, args)?;
    let size = args[0].shape()[t.axis];
    let s = ScatterAdd { axis: t.axis, size, batch_dims: t.batch_dims, of_take: true };
    Ok(vec![args[0].is_linear().then(|| Var::apply_op(Box::new(s), &[ct, idx])), None])
}

/// The transpose of a scatter-add is a gather.
fn transpose_scatter_add(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<ScatterAdd>()?;
    let idx = known_indices(op, args)?;
    let t = Take { axis: s.axis, batch_dims: s.batch_dims };
    Ok(vec![args[0].is_linear().then(|| Var::apply_op(Box::new(t), &[ct, idx])), None])
}

register_rule!(JvpRule, Take, jvp_first_operand);
register_rule!(TransposeRule, Take, transpose_take);
register_rule!(JvpRule, ScatterAdd, jvp_first_operand);
register_rule!(TransposeRule, ScatterAdd, transpose_scatter_add);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// The operand viewed as `[batch, outer, dim, inner]` around `axis`.
fn dims(shape: &[usize], batch_dims: usize, axis: usize) -> [usize; 4] {
    let p = |s: &[usize]| s.iter().product::<usize>();
    [p(&shape[..batch_dims]), p(&shape[batch_dims..axis]), shape[axis], p(&shape[axis + 1..])]
}

/// Known indices resolved against `dim` (negative ones count from the end).
fn resolved_indices(
    op: &str,
    idx: &anvil_core::Tensor,
    dim: usize,
    axis: usize,
) -> Result<Vec<usize>> {
    idx.as_slice::<i64>()?
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + dim as i64 } else { i };
            usize::try_from(j).ok().filter(|&j| j < dim).ok_or_else(|| Error::IndexOutOfBounds {
                op: op.into(),
                index: i,
                axis,
                size: dim,
                arg: "1 (indices)".into(),
                shape: idx.shape().to_vec(),
            })
        })
        .collect()
}

/// `take`: with known indices, each result element depends on the element
/// it copies (exact); with computed indices, on the whole indexed axis.
fn sparsity_take(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let t = op.try_downcast::<Take>()?;
    let [batch, outer, dim, inner] = dims(args[0].ty.shape(), t.batch_dims, t.axis);
    let n = args[1].ty.numel().checked_div(batch).unwrap_or(0);
    let x = &args[0].sets;
    let sets = match args[1].value {
        Some(idx) => {
            let idx = resolved_indices("take", idx, dim, t.axis)?;
            let mut map = Vec::with_capacity(out.numel());
            for b in 0..batch {
                for o in 0..outer {
                    for &i in &idx[b * n..(b + 1) * n] {
                        let at = ((b * outer + o) * dim + i) * inner;
                        map.extend(at..at + inner);
                    }
                }
            }
            x.gather_map(&map)
        }
        None => {
            // Every element of the axis, per (batch, outer, inner).
            let mut groups = Vec::with_capacity(batch * outer * n * inner);
            let mut axis = vec![0usize; dim];
            for b in 0..batch {
                for o in 0..outer {
                    for _ in 0..n {
                        for k in 0..inner {
                            let base = (b * outer + o) * dim * inner + k;
                            axis.iter_mut().enumerate().for_each(|(i, a)| *a = base + i * inner);
                            groups.push(axis.clone());
                        }
                    }
                }
            }
            x.union_groups(groups.iter().map(Vec::as_slice))
        }
    };
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

/// `scatter_add`: with known indices, each result element depends on the
/// updates added into it (exact); with computed indices, on every update
/// of its (batch, outer, inner) line.
fn sparsity_scatter_add(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let s = op.try_downcast::<ScatterAdd>()?;
    let [batch, outer, size, inner] = dims(out.shape(), s.batch_dims, s.axis);
    let n = args[1].ty.numel().checked_div(batch).unwrap_or(0);
    let u = &args[0].sets;
    let known = match args[1].value {
        Some(idx) => Some(resolved_indices("scatter_add", idx, size, s.axis)?),
        None => None,
    };
    let mut b = Builder::new(out.numel(), u.nnz());
    let mut scratch = Union::default();
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); size];
    for bo in 0..batch * outer {
        rows.iter_mut().for_each(Vec::clear);
        for j in 0..n {
            match &known {
                Some(idx) => rows[idx[(bo / outer.max(1)) * n + j]].push(j),
                None => rows.iter_mut().for_each(|r| r.push(j)),
            }
        }
        for row in &rows {
            for k in 0..inner {
                let src = row.iter().map(|&j| u.row((bo * n + j) * inner + k));
                b.push_union(&mut scratch, src);
            }
        }
    }
    let sets = b.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(SparsityRule, Take, sparsity_take);
register_rule!(SparsityRule, ScatterAdd, sparsity_scatter_add);
