//! Kernels of the cumulative reductions and the sort of `anvil_ops::lax`.
//!
//! Both see the operand as `[outer, n, inner]` around the scanned or
//! sorted axis. A cumulative reduction runs one sequential scan per lane,
//! combining whole contiguous `inner` rows step by step along the axis
//! (one vectorisable pass per step, no strided reads). When the tensor is
//! large, blocks of `outer` run in parallel, or, with fewer blocks than
//! threads and wide rows (a scan down the columns of one matrix), each
//! step's row is split across the threads. A sort gathers each lane, sorts
//! `(value, index)` pairs stably and writes both results; lanes run in
//! parallel when the tensor is large.

use super::{arity, unsupported};
use crate::{register_kernel, Parallelism};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::lax::{Cumulative, CumulativeKind, Sort};
use rayon::prelude::*;
use std::cmp::Ordering;

/// `(outer, n, inner)` around `axis`.
fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let p = |s: &[usize]| s.iter().product::<usize>();
    (p(&shape[..axis]), shape[axis], p(&shape[axis + 1..]))
}

/// Numbers a cumulative reduction combines.
trait Scan: Copy + Send + Sync + PartialOrd {
    fn add(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn is_nan(self) -> bool;
    fn logaddexp(self, b: Self) -> Self;
}

macro_rules! float_scan {
    ($t:ty) => {
        impl Scan for $t {
            fn add(self, b: Self) -> Self {
                self + b
            }
            fn mul(self, b: Self) -> Self {
                self * b
            }
            fn is_nan(self) -> bool {
                self.is_nan()
            }
            /// As `jnp.logaddexp`: `max + log1p(e^-|a - b|)`, `a + b` for a NaN difference.
            fn logaddexp(self, b: Self) -> Self {
                let d = self - b;
                if d.is_nan() {
                    self + b
                } else {
                    self.max(b) + (-d.abs()).exp().ln_1p()
                }
            }
        }
    };
}
float_scan!(f64);
float_scan!(f32);

impl Scan for i64 {
    fn add(self, b: Self) -> Self {
        self.wrapping_add(b)
    }
    fn mul(self, b: Self) -> Self {
        self.wrapping_mul(b)
    }
    fn is_nan(self) -> bool {
        false
    }
    fn logaddexp(self, b: Self) -> Self {
        self.max(b)
    }
}

/// The combining function of `kind` (`acc` first: NaN in either propagates).
fn combiner<T: Scan>(kind: CumulativeKind) -> fn(T, T) -> T {
    match kind {
        CumulativeKind::Sum => |a, b| a.add(b),
        CumulativeKind::Prod => |a, b| a.mul(b),
        CumulativeKind::Max => |a, b| if b > a || b.is_nan() { b } else { a },
        CumulativeKind::Min => |a, b| if b < a || b.is_nan() { b } else { a },
        CumulativeKind::LogSumExp => |a, b| a.logaddexp(b),
    }
}

/// One `[n, inner]` block scanned along `n` (backwards for `reverse`).
/// With `split` set, each step's row is combined in parallel chunks (for
/// a block too wide to leave the threads idle while one block runs).
fn scan_block<T: Scan>(
    x: &[T],
    out: &mut [T],
    inner: usize,
    reverse: bool,
    f: fn(T, T) -> T,
    split: bool,
) {
    let n = x.len() / inner.max(1);
    for step in 1..n {
        let (j, p) = if reverse { (n - 1 - step, n - step) } else { (step, step - 1) };
        // The previous row and the current one, borrowed apart.
        let (prev, cur) = if p < j {
            let (lo, hi) = out.split_at_mut(j * inner);
            (&lo[p * inner..], &mut hi[..inner])
        } else {
            let (lo, hi) = out.split_at_mut(p * inner);
            (&hi[..inner], &mut lo[j * inner..])
        };
        let row = &x[j * inner..(j + 1) * inner];
        let combine = |((c, &a), &b): ((&mut T, &T), &T)| *c = f(a, b);
        if split {
            const CHUNK: usize = 4096;
            cur.par_chunks_mut(CHUNK)
                .zip(prev.par_chunks(CHUNK))
                .zip(row.par_chunks(CHUNK))
                .for_each(|((c, a), b)| c.iter_mut().zip(a).zip(b).for_each(combine));
        } else {
            cur.iter_mut().zip(prev).zip(row).for_each(combine);
        }
    }
}

fn cumulative_typed<T: Scan>(
    x: &[T],
    shape: &[usize],
    c: &Cumulative,
    ctx: &Parallelism,
) -> Vec<T> {
    let (outer, n, inner) = split(shape, c.axis);
    let block = n * inner;
    // The first row of each block (the last for reverse) is the input's.
    let mut out = x.to_vec();
    if block == 0 {
        return out;
    }
    let f = combiner::<T>(c.kind);
    let parallel = ctx.parallel(x.len());
    // Few blocks and wide rows: parallel within each step's row instead.
    let split_rows = parallel && outer < ctx.thread_count() && ctx.parallel(inner);
    let run = |(xb, ob): (&[T], &mut [T])| scan_block(xb, ob, inner, c.reverse, f, split_rows);
    if parallel && !split_rows {
        x.par_chunks(block).zip(out.par_chunks_mut(block)).for_each(run);
    } else {
        x.chunks(block).zip(out.chunks_mut(block)).for_each(run);
    }
    out
}

/// The kernel of `cumsum`, `cumprod`, `cummax`, `cummin` and `cumlogsumexp`.
pub fn cumulative(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let c = op.try_downcast::<Cumulative>()?;
    let x = inputs[0];
    let s = x.shape();
    let storage = match x.storage() {
        Storage::F64(v) => f64::into_storage(cumulative_typed(v, s, c, ctx)),
        // In `f64`, each result rounded once, as the `f32` reductions: a
        // running sum in `f32` loses digits along the axis.
        Storage::F32(v) => {
            let wide: Vec<f64> = v.iter().map(|&a| f64::from(a)).collect();
            let scanned = cumulative_typed(&wide, s, c, ctx);
            f32::into_storage(scanned.iter().map(|&a| a as f32).collect())
        }
        Storage::I64(v) if c.kind != CumulativeKind::LogSumExp => {
            i64::into_storage(cumulative_typed(v, s, c, ctx))
        }
        _ => return Err(unsupported(op, 0, x.dtype())),
    };
    Tensor::from_storage(storage, out.shape())
}

// ------------------------------------------------------------------- sort

/// Numbers a sort orders: NaN after every number, `-0.0` equal to `0.0`.
trait SortKey: Copy + Send + Sync {
    fn order(a: Self, b: Self) -> Ordering;
}

macro_rules! float_key {
    ($t:ty) => {
        impl SortKey for $t {
            fn order(a: Self, b: Self) -> Ordering {
                match (a.is_nan(), b.is_nan()) {
                    (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
                    (a, b) => a.cmp(&b),
                }
            }
        }
    };
}
float_key!(f64);
float_key!(f32);

impl SortKey for i64 {
    fn order(a: Self, b: Self) -> Ordering {
        a.cmp(&b)
    }
}

/// Lane `l` of `[outer, n, inner]` sorted stably: its values and indices.
fn sort_lane<T: SortKey>(x: &[T], l: usize, n: usize, inner: usize, desc: bool) -> Vec<(T, i64)> {
    let (o, i) = (l / inner, l % inner);
    let mut lane: Vec<(T, i64)> = (0..n).map(|j| (x[(o * n + j) * inner + i], j as i64)).collect();
    if desc {
        lane.sort_by(|a, b| T::order(b.0, a.0));
    } else {
        lane.sort_by(|a, b| T::order(a.0, b.0));
    }
    lane
}

fn sort_typed<T: SortKey + Default>(
    x: &[T],
    shape: &[usize],
    s: &Sort,
    ctx: &Parallelism,
) -> (Vec<T>, Vec<i64>) {
    let (outer, n, inner) = split(shape, s.axis);
    let lanes = outer * inner;
    let sorted: Vec<Vec<(T, i64)>> = if ctx.parallel(x.len()) {
        (0..lanes).into_par_iter().map(|l| sort_lane(x, l, n, inner, s.descending)).collect()
    } else {
        (0..lanes).map(|l| sort_lane(x, l, n, inner, s.descending)).collect()
    };
    let mut vals = vec![T::default(); x.len()];
    let mut idx = vec![0i64; x.len()];
    for (l, lane) in sorted.iter().enumerate() {
        let (o, i) = (l / inner, l % inner);
        for (j, &(v, k)) in lane.iter().enumerate() {
            let at = (o * n + j) * inner + i;
            vals[at] = v;
            idx[at] = k;
        }
    }
    (vals, idx)
}

/// The kernel of `sort`: the sorted values and the sorting indices.
pub fn sort(
    op: &dyn Op,
    inputs: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, inputs, 1)?;
    let s = op.try_downcast::<Sort>()?;
    let x = inputs[0];
    let (vals, idx) = match x.storage() {
        Storage::F64(v) => {
            let (a, i) = sort_typed(v, x.shape(), s, ctx);
            (f64::into_storage(a), i)
        }
        Storage::F32(v) => {
            let (a, i) = sort_typed(v, x.shape(), s, ctx);
            (f32::into_storage(a), i)
        }
        Storage::I64(v) => {
            let (a, i) = sort_typed(v, x.shape(), s, ctx);
            (i64::into_storage(a), i)
        }
        Storage::Bool(_) => return Err(unsupported(op, 0, x.dtype())),
    };
    Ok(vec![
        Tensor::from_storage(vals, outs[0].shape())?,
        Tensor::from_storage(i64::into_storage(idx), outs[1].shape())?,
    ])
}

register_kernel!(Cumulative, cumulative);
register_kernel!(Sort, many: sort);
