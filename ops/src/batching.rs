//! Batching rules (the `vmap` rule of every standard op) and the helpers
//! they share.
//!
//! A rule receives its arguments as [`Batched`] values — a `Var` and the
//! position of its batch axis, or `None` for a value shared by the whole
//! batch — and returns the batched result. Rules move a batch axis only when
//! they must: elementwise ops keep it in place when every operand agrees,
//! reductions and slices shift their axes around it, and an unbatched
//! operand is never broadcast where the op broadcasts by itself. Family
//! helpers give every elementwise op and every reduction its rule; the
//! irregular ops (reshape, permute, matmul, indexing) have their own.

use crate::api::VarExt;
use crate::reduce::ReduceMath;
use anvil_core::{Batched, Error, Op, Result, SliceSpec, Var};

/// Moves axis `from` of `x` to position `to`. Out-of-range axes (only
/// possible on a poisoned value, whose error is already recorded) leave `x`
/// as it is.
pub fn move_axis(x: &Var, from: usize, to: usize) -> Var {
    if from == to || from >= x.rank() || to >= x.rank() {
        return x.clone();
    }
    let mut perm: Vec<i64> = (0..x.rank() as i64).filter(|&i| i != from as i64).collect();
    perm.insert(to, from as i64);
    x.permute(&perm)
}

/// The value with its batch axis first; an unbatched value is broadcast to
/// the batch (only for the few rules that need every operand batched).
pub fn at_front(b: &Batched, size: usize) -> Var {
    match b.axis {
        Some(k) => move_axis(&b.var, k, 0),
        None => {
            let mut shape = vec![size];
            shape.extend_from_slice(b.var.shape());
            b.var.unsqueeze(0).broadcast_to(&shape)
        }
    }
}

/// Inserts `n` size-1 axes right after the leading batch axis of `x`, so
/// that NumPy's right-aligned broadcasting pairs element axes with element
/// axes.
pub fn pad_after_batch(x: &Var, n: usize) -> Var {
    if n == 0 || x.rank() == 0 {
        return x.clone();
    }
    let mut shape: Vec<i64> = vec![x.shape()[0] as i64];
    shape.extend(std::iter::repeat_n(1, n));
    shape.extend(x.shape()[1..].iter().map(|&d| d as i64));
    x.reshape(&shape)
}

/// A batched value's element as rank `rank`, with the batch first.
fn front_with_rank(b: &Batched, rank: usize) -> Var {
    match b.axis {
        Some(k) => pad_after_batch(&move_axis(&b.var, k, 0), rank - b.logical_rank()),
        None => b.var.clone(),
    }
}

/// The rule of every broadcasting elementwise op (unary, binary, `select`,
/// `cast`). The result takes its batch axis from the largest batched
/// operand, which is used as it is; smaller operands are brought to that
/// layout: a batched one has its batch axis moved to the matching place (a
/// copy of the small operand only), an unbatched one is used as it is
/// where NumPy's right-aligned broadcasting already lines it up, or gets a
/// size-1 axis at the batch position (a reshape, no copy). No broadcast is
/// materialised, and the large operand is never copied.
pub fn vmap_elementwise(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let rank = args.iter().map(Batched::logical_rank).max().unwrap_or(0);
    let largest = args
        .iter()
        .filter(|a| a.axis.is_some() && a.logical_rank() == rank)
        .max_by_key(|a| a.var.numel());
    // Without a full-rank batched operand (a batched scalar times a shared
    // vector), batch axes that are all last stay last.
    let all_last = args.iter().all(|a| a.axis.is_none_or(|j| j + 1 == a.var.rank()));
    let k = largest.and_then(|a| a.axis).or(all_last.then_some(rank));
    let (vars, axis): (Vec<Var>, usize) = match k {
        Some(k) => (args.iter().map(|a| aligned_at(a, k, rank)).collect(), k),
        None => (args.iter().map(|a| front_with_rank(a, rank)).collect(), 0),
    };
    let refs: Vec<&Var> = vars.iter().collect();
    Ok(Batched::new(Var::apply_op(op.boxed(), &refs), Some(axis)))
}

/// An operand of an elementwise op whose result has the batch axis at `k`
/// and `rank` element axes, in a layout that broadcasts to it.
///
/// A batched operand with `r` element axes lines up with the result's last
/// `r` element axes; its batch axis moves to where `k` falls among them, or,
/// when `k` falls among the axes it lacks, it goes in front with size-1 axes
/// up to `k`. An unbatched operand is used as it is when right-aligned
/// broadcasting puts its axes after `k`, else reshaped to the full rank
/// with a size-1 axis at `k`.
fn aligned_at(a: &Batched, k: usize, rank: usize) -> Var {
    let r = a.logical_rank();
    let lead = rank - r;
    match a.axis {
        Some(j) if k >= lead => move_axis(&a.var, j, k - lead),
        Some(j) => {
            let front = move_axis(&a.var, j, 0);
            let mut shape: Vec<i64> = vec![1; lead + 1 + r];
            shape[k] = front.shape()[0] as i64;
            for (i, &d) in front.shape()[1..].iter().enumerate() {
                shape[lead + 1 + i] = d as i64;
            }
            front.reshape(&shape)
        }
        None if k < rank + 1 - r => a.var.clone(),
        None => {
            let mut shape: Vec<i64> = std::iter::repeat_n(1, lead).collect();
            shape.extend(a.var.shape().iter().map(|&d| d as i64));
            shape.insert(k, 1);
            a.var.reshape(&shape)
        }
    }
}

/// Maps a logical axis to its physical position next to batch axis `k`.
pub fn physical_axis(axis: usize, k: usize) -> usize {
    if axis >= k {
        axis + 1
    } else {
        axis
    }
}

/// The rule of every reduction: reduce the same axes, shifted past the batch axis.
pub fn vmap_reduce<O: ReduceMath + Clone>(
    op: &dyn Op,
    args: &[Batched],
    _size: usize,
) -> Result<Batched> {
    let o = op.try_downcast::<O>()?;
    let (x, k) = single_batched(op, args)?;
    let axes: Vec<usize> = o.axes().iter().map(|&a| physical_axis(a, k)).collect();
    let out_axis = if o.keepdims() { k } else { k - axes.iter().filter(|&&a| a < k).count() };
    let var = Var::apply_op(Box::new(o.with_axes(axes)), &[&x]);
    Ok(Batched::new(var, Some(out_axis)))
}

/// The one argument of a unary op, which a rule only sees batched.
pub(crate) fn single_batched(op: &dyn Op, args: &[Batched]) -> Result<(Var, usize)> {
    match args {
        [Batched { var, axis: Some(k) }] => Ok((var.clone(), *k)),
        _ => Err(Error::Arity {
            what: format!("vmap rule of {}", op.name()),
            kind: "batched inputs".into(),
            expected: 1,
            got: args.len(),
        }),
    }
}

/// Inserts `spec` at the batch axis of a per-axis parameter list.
pub(crate) fn with_full_at<T: Clone>(v: &[T], k: usize, fill: T) -> Vec<T> {
    let mut out = v.to_vec();
    out.insert(k, fill);
    out
}

/// Slice specs with the batch axis taken whole.
pub(crate) fn slice_specs_at(specs: &[SliceSpec], k: usize) -> Vec<SliceSpec> {
    with_full_at(specs, k, SliceSpec::FULL)
}
