//! Kernels of the reductions. Each output element folds its reduced
//! sub-space, walked with the same strided runs as the movement kernels;
//! outputs are split across threads when there are many of them.

use super::{arity, unsupported};
use crate::buffers::Pooled;
use crate::strided::{contiguous_strides, fill_in_tasks, for_each_run};
use crate::{register_kernel, Parallelism};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::reduce::*;

/// The kept and reduced parts of a shape, with the input strides of each.
struct Split {
    kept: Vec<usize>,
    kept_strides: Vec<isize>,
    red: Vec<usize>,
    red_strides: Vec<isize>,
}

fn split(shape: &[usize], axes: &[usize]) -> Split {
    let s = contiguous_strides(shape);
    let mut sp = Split { kept: vec![], kept_strides: vec![], red: vec![], red_strides: vec![] };
    for (d, (&n, &st)) in shape.iter().zip(&s).enumerate() {
        if axes.contains(&d) {
            sp.red.push(n);
            sp.red_strides.push(st);
        } else {
            sp.kept.push(n);
            sp.kept_strides.push(st);
        }
    }
    sp
}

/// For each output element (in row-major order of the kept axes), folds
/// `fold(acc, run)` over its reduced runs, starting from `init`, and maps the
/// result with `finish`.
fn reduce_with<T: Copy + Sync, A: Copy + Send + Sync, R: crate::buffers::Pooled>(
    x: &[T],
    sp: &Split,
    ctx: &Parallelism,
    init: A,
    fold: impl Fn(A, &[T], isize, isize, usize, usize) -> A + Sync,
    finish: impl Fn(A) -> R + Sync,
) -> Vec<R> {
    let n_out = anvil_core::shape::numel(&sp.kept);
    let n_red = anvil_core::shape::numel(&sp.red);
    let mut out = crate::buffers::take(n_out);
    let par_ctx = if ctx.parallel(n_out * n_red.max(1)) { *ctx } else { Parallelism::sequential() };
    let per = |chunk: &mut [R], start: usize| {
        for_each_run(
            &sp.kept,
            [&sp.kept_strides],
            [0],
            start,
            start + chunk.len(),
            |pos, [o], [s], len| {
                for j in 0..len {
                    let base = o + j as isize * s;
                    let mut acc = init;
                    let mut k = 0usize;
                    for_each_run(
                        &sp.red,
                        [&sp.red_strides],
                        [base],
                        0,
                        n_red,
                        |_, [ro], [rs], rlen| {
                            acc = fold(acc, x, ro, rs, rlen, k);
                            k += rlen;
                        },
                    );
                    chunk[pos - start + j] = finish(acc);
                }
            },
        );
    };
    if par_ctx.thread_count() > 1 {
        // Parallel over outputs; each task gets at least a few thousand inputs' work.
        let min = (par_ctx.parallel_elems() / n_red.max(1)).max(1);
        let ctx2 = par_ctx.min_parallel_elems(min);
        fill_in_tasks(&mut out, &ctx2, per);
    } else {
        per(&mut out, 0);
    }
    out
}

fn fold_typed<T: Copy + Sync, A: Pooled>(
    x: &[T],
    sp: &Split,
    ctx: &Parallelism,
    id: A,
    f: impl Fn(A, T) -> A + Copy + Sync,
) -> Vec<A> {
    reduce_with(
        x,
        sp,
        ctx,
        id,
        |mut acc, x, o, s, len, _| {
            if s == 1 {
                for &v in &x[o as usize..][..len] {
                    acc = f(acc, v);
                }
            } else {
                for j in 0..len {
                    acc = f(acc, x[(o + j as isize * s) as usize]);
                }
            }
            acc
        },
        |a| a,
    )
}

/// The operand as `[outer, reduced, inner]` when the reduced axes are
/// consecutive and followed by kept ones (a column sum, or `sum(axis=0)` of
/// a Jacobian): then whole rows are folded into the output at once, reading
/// memory in order, instead of walking each output's column with a stride.
fn rows_layout(shape: &[usize], axes: &[usize]) -> Option<(usize, usize, usize)> {
    let (&first, &last) = (axes.first()?, axes.last()?);
    let consecutive = axes.windows(2).all(|w| w[1] == w[0] + 1);
    let p = |s: &[usize]| s.iter().product::<usize>();
    let inner = p(&shape[last + 1..]);
    (consecutive && inner >= 8).then(|| (p(&shape[..first]), p(&shape[first..=last]), inner))
}

/// `out[o, i] = fold over r of x[o, r, i]`, row by row (see [`rows_layout`]).
fn fold_rows<T: Copy + Sync, A: Pooled>(
    x: &[T],
    (outer, red, inner): (usize, usize, usize),
    ctx: &Parallelism,
    id: A,
    f: impl Fn(A, T) -> A + Copy + Sync,
) -> Vec<A> {
    let mut out = crate::buffers::filled(outer * inner, id);
    // Columns `c0..c0 + dst.len()` of outer index `o`.
    let fold = |o: usize, c0: usize, dst: &mut [A]| {
        for r in 0..red {
            let row = &x[(o * red + r) * inner + c0..][..dst.len()];
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = f(*d, v);
            }
        }
    };
    if ctx.parallel(x.len()) && !out.is_empty() {
        use rayon::prelude::*;
        // About four pieces per thread, each at least a few cache lines wide.
        let width = (outer * inner).div_ceil(4 * ctx.thread_count()).max(64).min(inner);
        out.par_chunks_mut(inner).enumerate().for_each(|(o, row)| {
            row.par_chunks_mut(width).enumerate().for_each(|(p, dst)| fold(o, p * width, dst))
        });
    } else {
        for (o, row) in out.chunks_mut(inner.max(1)).enumerate() {
            fold(o, 0, row);
        }
    }
    out
}

/// Folds `x` with `f` into accumulators from `id` (of `x`'s type, or
/// wider), row by row when the layout allows.
fn fold_any<T: Copy + Sync, A: Pooled>(
    x: &[T],
    shape: &[usize],
    axes: &[usize],
    ctx: &Parallelism,
    id: A,
    f: impl Fn(A, T) -> A + Copy + Sync,
) -> Vec<A> {
    match rows_layout(shape, axes) {
        Some(dims) => fold_rows(x, dims, ctx, id, f),
        None => fold_typed(x, &split(shape, axes), ctx, id, f),
    }
}

/// [`fold_any`] of `f32` values in `f64` accumulators, each result rounded
/// to `f32` once: summed in `f32`, a million values lose about six digits
/// and ones stop counting at 2²⁴, where JAX's sums stay exact. A maximum,
/// minimum or product in `f64` then rounded is the `f32` one or closer.
/// The fused reductions fold `f32` chains the same way (same bits).
fn fold_wide(
    x: &[f32],
    shape: &[usize],
    axes: &[usize],
    ctx: &Parallelism,
    id: f64,
    f: impl Fn(f64, f64) -> f64 + Copy + Sync,
) -> Vec<f32> {
    let wide = fold_any(x, shape, axes, ctx, id, |a, v: f32| f(a, f64::from(v)));
    let mut out: Vec<f32> = crate::buffers::take(wide.len());
    for (o, w) in out.iter_mut().zip(&wide) {
        *o = *w as f32;
    }
    out
}

/// A boolean fold, told apart by its truth table (which determines a
/// function of two booleans), so that `or` and `and` inline.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BoolFold {
    /// `a | b` from `false` (`any`).
    Or,
    /// `a & b` from `true` (`all`).
    And,
    /// Any other fold, called through its pointer.
    Other(bool, fn(bool, bool) -> bool),
}

impl BoolFold {
    pub(crate) fn of((id, f): anvil_core::op::Combine<bool>) -> BoolFold {
        let table = [f(false, false), f(false, true), f(true, false), f(true, true)];
        match (id, table) {
            (false, [false, true, true, true]) => BoolFold::Or,
            (true, [false, false, false, true]) => BoolFold::And,
            _ => BoolFold::Other(id, f),
        }
    }
}

/// The kernel of every [`ReduceMath`] op.
pub fn reduce<O: ReduceMath>(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let o = op.try_downcast::<O>()?;
    let x = inputs[0];
    let (shape, axes) = (x.shape(), o.axes());
    // A sum's `+` written out, so that the loops inline and vectorise it
    // (the op's combining function is a function pointer).
    let sum = o.is_sum();
    let storage = match x.storage() {
        Storage::F64(v) if sum => {
            Element::into_storage(fold_any(v, shape, axes, ctx, 0.0, |a, b| a + b))
        }
        // `f32` folds accumulate in `f64` and round once (see `fold_wide`).
        Storage::F32(v) if sum => {
            Element::into_storage(fold_wide(v, shape, axes, ctx, 0.0, |a, b| a + b))
        }
        Storage::F64(v) => {
            let (id, f) = o.f64();
            Element::into_storage(fold_any(v, shape, axes, ctx, id, f))
        }
        Storage::F32(v) => {
            let (id, f) = o.f64();
            Element::into_storage(fold_wide(v, shape, axes, ctx, id, f))
        }
        Storage::I64(v) if sum => {
            Element::into_storage(fold_any(v, shape, axes, ctx, 0, |a, b| a.wrapping_add(b)))
        }
        Storage::I64(v) => {
            let (id, f) = o.i64();
            Element::into_storage(fold_any(v, shape, axes, ctx, id, f))
        }
        // `any` and `all` (and any other boolean fold), inlined.
        Storage::Bool(v) => match o.bool().map(BoolFold::of) {
            Some(BoolFold::Or) => {
                Element::into_storage(fold_any(v, shape, axes, ctx, false, |a, b| a | b))
            }
            Some(BoolFold::And) => {
                Element::into_storage(fold_any(v, shape, axes, ctx, true, |a, b| a & b))
            }
            Some(BoolFold::Other(id, f)) => {
                Element::into_storage(fold_any(v, shape, axes, ctx, id, f))
            }
            None => return Err(unsupported(op, 0, x.dtype())),
        },
    };
    Tensor::from_storage(storage, out.shape())
}

fn arg_typed<T: Copy + Send + Sync + PartialOrd>(
    x: &[T],
    sp: &Split,
    ctx: &Parallelism,
    max: bool,
    is_nan: fn(T) -> bool,
) -> Vec<i64> {
    // Accumulator: (best value, its index, found a NaN).
    let init: Option<(T, usize, bool)> = None;
    reduce_with(
        x,
        sp,
        ctx,
        init,
        |mut acc, x, o, s, len, k0| {
            for j in 0..len {
                let v = x[(o + j as isize * s) as usize];
                let better = match acc {
                    None => true,
                    Some((_, _, true)) => false,
                    Some((b, _, false)) => is_nan(v) || if max { v > b } else { v < b },
                };
                if better {
                    acc = Some((v, k0 + j, is_nan(v)));
                }
            }
            acc
        },
        |a| a.map_or(0, |(_, i, _)| i as i64),
    )
}

/// The kernel of `argmax` / `argmin`.
pub fn arg_reduce(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let o = op.try_downcast::<ArgReduce>()?;
    let x = inputs[0];
    let sp = split(x.shape(), &[o.axis]);
    let v = match x.storage() {
        Storage::F64(v) => arg_typed(v, &sp, ctx, o.max, f64::is_nan),
        Storage::F32(v) => arg_typed(v, &sp, ctx, o.max, f32::is_nan),
        Storage::I64(v) => arg_typed(v, &sp, ctx, o.max, |_| false),
        Storage::Bool(_) => return Err(unsupported(op, 0, x.dtype())),
    };
    Tensor::from_vec(v, out.shape())
}

register_kernel!(ReduceSum, reduce::<ReduceSum>);
register_kernel!(ReduceMax, reduce::<ReduceMax>);
register_kernel!(ReduceMin, reduce::<ReduceMin>);
register_kernel!(ReduceProd, reduce::<ReduceProd>);
register_kernel!(ArgReduce, arg_reduce);

#[cfg(test)]
mod bool_fold_tests {
    use super::BoolFold;

    #[test]
    fn boolean_folds_are_told_apart_by_their_truth_table() {
        assert!(matches!(BoolFold::of((false, |a, b| a | b)), BoolFold::Or));
        assert!(matches!(BoolFold::of((true, |a, b| a & b)), BoolFold::And));
        assert!(matches!(BoolFold::of((false, |a, b| a ^ b)), BoolFold::Other(false, _)));
        // `or` from `true` is not `any`.
        assert!(matches!(BoolFold::of((true, |a, b| a | b)), BoolFold::Other(true, _)));
    }
}
