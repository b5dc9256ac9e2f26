//! The functions of `jax.numpy` that are not methods of [`VarExt`] or
//! [`LaxExt`], under NumPy's names:
//!
//! - array manipulation: [`roll`], [`tile`], [`repeat`], [`split`],
//!   [`array_split`], [`diff`], [`meshgrid`], [`moveaxis`], [`rot90`],
//!   [`diag`], [`hstack`], [`vstack`], [`take_along_axis`];
//! - products: [`einsum`], [`dot_general`], [`tensordot`], [`outer`],
//!   [`inner`], [`dot`], [`vdot`], [`kron`], [`cross`];
//! - elementwise functions: [`hypot`], [`logaddexp`], [`nan_to_num`],
//!   [`sinc`], [`floor_divide`], [`remainder`], [`isnan`], [`isclose`],
//!   [`clip`], [`select`];
//! - statistics: [`var`] and [`std()`] with `ddof`, [`median`],
//!   [`quantile`], [`percentile`], [`average`], [`cov`], [`corrcoef`],
//!   [`nansum`], [`nanmean`], [`bincount`], [`histogram`];
//! - selections of a static `size`, as JAX requires them under `jit`:
//!   [`nonzero`], [`argwhere`], [`flatnonzero`], [`unique`];
//! - searching: [`searchsorted`], [`digitize`], [`interp`];
//! - polynomials and signals: [`polyval`], [`convolve`], [`correlate`],
//!   [`trapezoid`].
//!
//! Every one is a composite over the primitives, so every transform
//! handles it through what it is made of.
//!
//! Errors in the arguments (an axis out of range, sizes that do not
//! match, an einsum subscript that does not fit its operand) are recorded
//! in the trace under the function's name, as for every op, and the call
//! that runs the function returns them.
//!
//! ```
//! use anvil::prelude::*;
//! use anvil::numpy as jnp;
//! let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
//! let y = (|x: &Var| jnp::roll(x, 1, None)).eval(&x)?;
//! assert_eq!(y.to_vec::<f64>()?, vec![4.0, 1.0, 2.0, 3.0]);
//! // The einsum of an outer product and a contraction: sum_i x_i x_i.
//! let d = (|x: &Var| jnp::einsum("i,i->", &[x, x])).eval(&x)?;
//! assert_eq!(d.item()?, 30.0);
//! # Ok::<(), anvil::Error>(())
//! ```

use crate::api::{concatenate, dim_value, fail, floated, iota, iota_dtype, stack, where_, VarExt};
use crate::lax::LaxExt;
use anvil_core::shape::{dim_mul, is_symbolic, normalize_axis};
use anvil_core::trace::as_op;
use anvil_core::{DType, Error, Result, Tensor, Var};

/// Runs `body` as the user-facing function `name` (errors of the ops it
/// applies name it); an error it returns is recorded on `x`'s trace.
fn run(name: &'static str, x: &Var, body: impl FnOnce() -> Result<Var>) -> Var {
    as_op(name, || body().unwrap_or_else(|e| fail(x, e)))
}

/// Like [`run`] for functions returning `count` values (all poisoned on an
/// error, so a caller indexing the result does not panic).
fn run_many(
    name: &'static str,
    x: &Var,
    count: usize,
    body: impl FnOnce() -> Result<Vec<Var>>,
) -> Vec<Var> {
    as_op(name, || {
        body().unwrap_or_else(|e| {
            let bad = fail(x, e);
            vec![bad; count.max(1)]
        })
    })
}

/// The size of `axis` of `x`, which `name` needs as a number.
fn concrete(name: &str, x: &Var, axis: usize) -> Result<usize> {
    let n = x.shape()[axis];
    if is_symbolic(n) {
        Err(Error::invalid(
            name,
            "x",
            format!("needs the size of axis {axis} as a number; it is symbolic"),
        ))
    } else {
        Ok(n)
    }
}

fn as_i64(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

fn product(dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |n, &d| dim_mul(n, d))
}

// ------------------------------------------------------------ manipulation

/// `jnp.roll`: shifts elements along `axis` by `shift` (negative: the
/// other way), those leaving one end entering at the other; `None` rolls
/// the flattened array and restores its shape. Slices and a concatenation,
/// so it differentiates and batches as those do.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::roll;
/// let x = Tensor::from_vec((0..6).map(f64::from).collect(), &[2, 3])?;
/// let y = (|x: &Var| roll(x, -1, Some(1))).eval(&x)?;
/// assert_eq!(y.to_vec::<f64>()?, vec![1.0, 2.0, 0.0, 4.0, 5.0, 3.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn roll(x: &Var, shift: i64, axis: Option<i64>) -> Var {
    run("roll", x, || match axis {
        Some(a) => roll_axis(x, shift, a),
        None => Ok(roll_axis(&x.flatten(), shift, 0)?.reshape(&as_i64(x.shape()))),
    })
}

/// `jnp.roll` with several axes: `shifts[k]` along `axes[k]` (one shift
/// for every axis when `shifts` has one entry; an axis named twice rolls by
/// the sum, as NumPy).
pub fn roll_axes(x: &Var, shifts: &[i64], axes: &[i64]) -> Var {
    run("roll", x, || {
        if shifts.len() != axes.len() && shifts.len() != 1 {
            return Err(Error::invalid(
                "roll",
                "shift",
                format!("{} shifts for {} axes", shifts.len(), axes.len()),
            ));
        }
        let mut y = x.clone();
        for (k, &a) in axes.iter().enumerate() {
            y = roll_axis(&y, shifts[if shifts.len() == 1 { 0 } else { k }], a)?;
        }
        Ok(y)
    })
}

fn roll_axis(x: &Var, shift: i64, axis: i64) -> Result<Var> {
    let ax = normalize_axis("roll", axis, x.shape(), "axis")?;
    let n = x.shape()[ax];
    if is_symbolic(n) {
        // Each position reads `(i - shift) mod n`: one gather.
        let len = dim_value(n);
        let src = iota(&[n], 0) - shift as f64;
        let src = &src - &((&src / &len).floor() * &len);
        return Ok(x.take(&src.cast(DType::I64), ax as i64));
    }
    let n = n as i64;
    let s = if n == 0 { 0 } else { shift.rem_euclid(n) };
    if s == 0 {
        return Ok(x.clone());
    }
    let head = x.slice_axis(ax as i64, Some(n - s), None, 1);
    let tail = x.slice_axis(ax as i64, None, Some(n - s), 1);
    Ok(concatenate(&[&head, &tail], ax as i64))
}

/// `jnp.tile`: `x` repeated `reps[k]` times along axis `k` (the shorter of
/// `x`'s shape and `reps` is padded with leading ones, as NumPy).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::tile;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let y = (|x: &Var| tile(x, &[2, 2])).eval(&x)?;
/// assert_eq!(y.shape(), &[2, 4]);
/// assert_eq!(y.to_vec::<f64>()?, vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn tile(x: &Var, reps: &[usize]) -> Var {
    run("tile", x, || {
        let d = reps.len().max(x.rank());
        let shape: Vec<usize> =
            std::iter::repeat_n(1, d - x.rank()).chain(x.shape().iter().copied()).collect();
        let reps: Vec<usize> =
            std::iter::repeat_n(1, d - reps.len()).chain(reps.iter().copied()).collect();
        // [1, s0, 1, s1, ...] broadcast to [r0, s0, r1, s1, ...], then merged.
        let spread: Vec<i64> = shape.iter().flat_map(|&s| [1, s as i64]).collect();
        let wide: Vec<usize> = reps.iter().zip(&shape).flat_map(|(&r, &s)| [r, s]).collect();
        let merged = reps.iter().zip(&shape).map(|(&r, &s)| dim_mul(r, s).map(|m| m as i64));
        let merged = merged.collect::<Result<Vec<i64>>>()?;
        Ok(x.reshape(&spread).broadcast_to(&wide).reshape(&merged))
    })
}

/// `jnp.repeat` with one count: each element repeated `repeats` times
/// along `axis` (`None`: of the flattened array).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::repeat;
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let y = (|x: &Var| repeat(x, 2, Some(0))).eval(&x)?;
/// assert_eq!(y.to_vec::<f64>()?, vec![1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn repeat(x: &Var, repeats: usize, axis: Option<i64>) -> Var {
    run("repeat", x, || {
        let (x, axis) = match axis {
            Some(a) => (x.clone(), a),
            None => (x.flatten(), 0),
        };
        let ax = normalize_axis("repeat", axis, x.shape(), "axis")?;
        let mut wide = x.shape().to_vec();
        wide.insert(ax + 1, repeats);
        let mut merged = as_i64(x.shape());
        merged[ax] = dim_mul(x.shape()[ax], repeats)? as i64;
        Ok(x.unsqueeze(ax as i64 + 1).broadcast_to(&wide).reshape(&merged))
    })
}

/// `jnp.repeat` with one count per element: element `i` of `axis` repeated
/// `repeats[i]` times (`None`: of the flattened array). A gather by a
/// constant index, so its derivative adds the copies back.
pub fn repeat_each(x: &Var, repeats: &[usize], axis: Option<i64>) -> Var {
    run("repeat", x, || {
        let (x, axis) = match axis {
            Some(a) => (x.clone(), a),
            None => (x.flatten(), 0),
        };
        let ax = normalize_axis("repeat", axis, x.shape(), "axis")?;
        let n = concrete("repeat", &x, ax)?;
        if repeats.len() != n {
            return Err(Error::invalid(
                "repeat",
                "repeats",
                format!(
                    "{} counts for axis {ax} of size {n} (shape {:?})",
                    repeats.len(),
                    x.shape()
                ),
            ));
        }
        let idx: Vec<i64> =
            (0..n as i64).zip(repeats).flat_map(|(i, &r)| std::iter::repeat_n(i, r)).collect();
        let len = idx.len();
        Ok(x.take(&x.constant_like(Tensor::from_vec(idx, &[len])?), ax as i64))
    })
}

/// `jnp.split` into `sections` equal parts along `axis` (an error when the
/// axis does not divide evenly; see [`array_split`]).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::split;
/// let x = Tensor::from_vec((0..6).map(f64::from).collect(), &[6])?;
/// let parts = (|x: &Var| split(x, 3, 0)).eval(&x)?;
/// assert_eq!(parts[2].to_vec::<f64>()?, vec![4.0, 5.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn split(x: &Var, sections: usize, axis: i64) -> Vec<Var> {
    run_many("split", x, sections, || {
        let ax = normalize_axis("split", axis, x.shape(), "axis")?;
        let n = concrete("split", x, ax)?;
        if sections == 0 || n % sections != 0 {
            return Err(Error::invalid(
                "split",
                "sections",
                format!(
                    "{sections} sections do not divide axis {ax} of size {n} (shape {:?}) equally",
                    x.shape()
                ),
            ));
        }
        let w = n / sections;
        Ok(split_at_sorted(x, ax, &(1..sections).map(|k| k * w).collect::<Vec<_>>()))
    })
}

/// `jnp.array_split`: `sections` parts along `axis`, the first `n %
/// sections` one element longer.
pub fn array_split(x: &Var, sections: usize, axis: i64) -> Vec<Var> {
    run_many("array_split", x, sections, || {
        let ax = normalize_axis("array_split", axis, x.shape(), "axis")?;
        let n = concrete("array_split", x, ax)?;
        if sections == 0 {
            return Err(Error::invalid("array_split", "sections", "needs at least one section"));
        }
        let (w, extra) = (n / sections, n % sections);
        let cuts: Vec<usize> = (1..sections).map(|k| k * w + k.min(extra)).collect();
        Ok(split_at_sorted(x, ax, &cuts))
    })
}

/// `jnp.split` at `indices` along `axis`: the parts `[..i0]`, `[i0..i1]`,
/// ..., `[ik..]` (negative indices count from the end; indices past the end
/// or out of order give empty parts, as NumPy).
pub fn split_at(x: &Var, indices: &[i64], axis: i64) -> Vec<Var> {
    run_many("split", x, indices.len() + 1, || {
        let ax = normalize_axis("split", axis, x.shape(), "axis")?;
        let n = concrete("split", x, ax)? as i64;
        let clamp = |i: i64| (if i < 0 { i + n } else { i }).clamp(0, n);
        let mut parts = Vec::with_capacity(indices.len() + 1);
        let mut start = 0;
        for &i in indices.iter().chain(std::iter::once(&n)) {
            let stop = clamp(i).max(start);
            parts.push(x.slice_axis(ax as i64, Some(start.min(n)), Some(stop), 1));
            start = clamp(i);
        }
        Ok(parts)
    })
}

fn split_at_sorted(x: &Var, ax: usize, cuts: &[usize]) -> Vec<Var> {
    let n = x.shape()[ax];
    let bounds: Vec<usize> = std::iter::once(0).chain(cuts.iter().copied()).chain([n]).collect();
    bounds
        .windows(2)
        .map(|w| x.slice_axis(ax as i64, Some(w[0] as i64), Some(w[1] as i64), 1))
        .collect()
}

/// `jnp.diff`: the `n`-th forward difference along `axis`, `x[1:] - x[:-1]`
/// applied `n` times (of `bool`: `x[1:] != x[:-1]`, as NumPy).
pub fn diff(x: &Var, n: usize, axis: i64) -> Var {
    run("diff", x, || {
        let ax = normalize_axis("diff", axis, x.shape(), "axis")? as i64;
        let mut y = x.clone();
        for _ in 0..n {
            let (hi, lo) =
                (y.slice_axis(ax, Some(1), None, 1), y.slice_axis(ax, None, Some(-1), 1));
            y = if y.dtype() == DType::Bool { hi.not_equal(&lo) } else { &hi - &lo };
        }
        Ok(y)
    })
}

/// The index order of [`meshgrid`]'s outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Cartesian (NumPy's default): the first two output axes are swapped,
    /// so output `k` of two inputs of lengths `n0, n1` is `[n1, n0]`.
    Xy,
    /// Matrix: output shape `[n0, n1, ...]`.
    Ij,
}

/// `jnp.meshgrid` of 1-D values: one array per input, each varying along
/// its own axis of the common shape.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::{meshgrid, Indexing};
/// let (x, y) = (Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?, Tensor::from_vec(vec![10.0, 20.0], &[2])?);
/// let g = (|x: &Var, y: &Var| meshgrid(&[x, y], Indexing::Xy)).eval((&x, &y))?;
/// assert_eq!(g[0].shape(), &[2, 3]);
/// assert_eq!(g[1].to_vec::<f64>()?, vec![10.0, 10.0, 10.0, 20.0, 20.0, 20.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn meshgrid(xs: &[&Var], indexing: Indexing) -> Vec<Var> {
    let Some(first) = xs.first() else { return Vec::new() };
    run_many("meshgrid", first, xs.len(), || {
        if let Some((k, x)) = xs.iter().enumerate().find(|(_, x)| x.rank() != 1) {
            return Err(Error::invalid(
                "meshgrid",
                format!("argument {k}"),
                format!("has shape {:?}; meshgrid takes 1-D arrays", x.shape()),
            ));
        }
        let mut shape: Vec<usize> = xs.iter().map(|x| x.shape()[0]).collect();
        let mut axis_of: Vec<usize> = (0..xs.len()).collect();
        if indexing == Indexing::Xy && xs.len() >= 2 {
            shape.swap(0, 1);
            axis_of.swap(0, 1);
        }
        Ok(xs
            .iter()
            .zip(&axis_of)
            .map(|(x, &ax)| {
                let mut along = vec![1i64; shape.len()];
                along[ax] = -1;
                x.reshape(&along).broadcast_to(&shape)
            })
            .collect())
    })
}

/// `jnp.moveaxis`: `x` with axis `source` moved to position `destination`,
/// the others in order.
pub fn moveaxis(x: &Var, source: i64, destination: i64) -> Var {
    run("moveaxis", x, || {
        let src = normalize_axis("moveaxis", source, x.shape(), "source")?;
        let dst = normalize_axis("moveaxis", destination, x.shape(), "destination")?;
        let mut perm: Vec<i64> = (0..x.rank() as i64).filter(|&a| a != src as i64).collect();
        perm.insert(dst, src as i64);
        Ok(x.permute(&perm))
    })
}

/// `jnp.expand_dims`: a size-1 axis inserted at `axis`.
pub fn expand_dims(x: &Var, axis: i64) -> Var {
    x.unsqueeze(axis)
}

/// `jnp.ravel`: the values in row-major order, rank 1.
pub fn ravel(x: &Var) -> Var {
    x.flatten()
}

/// `jnp.hstack`: concatenation along axis 1 (axis 0 for 1-D values).
pub fn hstack(xs: &[&Var]) -> Var {
    let axis = if xs.first().is_some_and(|x| x.rank() == 1) { 0 } else { 1 };
    as_op("hstack", || concatenate(xs, axis))
}

/// `jnp.vstack`: concatenation along axis 0, 1-D values as rows.
pub fn vstack(xs: &[&Var]) -> Var {
    as_op("vstack", || {
        let rows: Vec<Var> = xs
            .iter()
            .map(|x| if x.rank() < 2 { x.reshape(&[1, -1]) } else { (*x).clone() })
            .collect();
        concatenate(&rows.iter().collect::<Vec<_>>(), 0)
    })
}

/// `jnp.column_stack`: 1-D values as columns, concatenated along axis 1.
pub fn column_stack(xs: &[&Var]) -> Var {
    as_op("column_stack", || {
        let cols: Vec<Var> = xs
            .iter()
            .map(|x| if x.rank() < 2 { x.reshape(&[-1, 1]) } else { (*x).clone() })
            .collect();
        concatenate(&cols.iter().collect::<Vec<_>>(), 1)
    })
}

/// `jnp.rot90`: `k` quarter turns in the plane of `axes`, from the first
/// axis towards the second.
pub fn rot90(x: &Var, k: i64, axes: (i64, i64)) -> Var {
    run("rot90", x, || {
        let a = normalize_axis("rot90", axes.0, x.shape(), "axes")? as i64;
        let b = normalize_axis("rot90", axes.1, x.shape(), "axes")? as i64;
        if a == b {
            return Err(Error::invalid("rot90", "axes", format!("names axis {a} twice")));
        }
        Ok(match k.rem_euclid(4) {
            0 => x.clone(),
            1 => x.flip(&[b]).swap_axes(a, b),
            2 => x.flip(&[a, b]),
            _ => x.swap_axes(a, b).flip(&[b]),
        })
    })
}

/// `jnp.fliplr`: reverses axis 1.
pub fn fliplr(x: &Var) -> Var {
    x.flip(&[1])
}

/// `jnp.flipud`: reverses axis 0.
pub fn flipud(x: &Var) -> Var {
    x.flip(&[0])
}

/// `jnp.diag`: of a 1-D value, the square matrix with it on diagonal `k`;
/// of a 2-D value, its diagonal `k`.
pub fn diag(v: &Var, k: i64) -> Var {
    run("diag", v, || match v.rank() {
        1 => {
            let n = concrete("diag", v, 0)? + k.unsigned_abs() as usize;
            Ok(crate::linalg::diag_embed(v, n, n, k))
        }
        2 => Ok(v.diagonal(k)),
        r => Err(Error::invalid(
            "diag",
            "v",
            format!("has rank {r} (shape {:?}); diag takes 1-D or 2-D values", v.shape()),
        )),
    })
}

// ---------------------------------------------------------------- products

/// `jax.lax.dot_general`: contracts axes `contract.0` of `a` with
/// `contract.1` of `b`, batching over `batch.0` of `a` with `batch.1` of
/// `b`. The result's axes are the batch axes, then `a`'s free axes, then
/// `b`'s, each in order. One (batched) matrix product: the operands are
/// permuted and reshaped to `[batch, m, k]` and `[batch, k, n]`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::dot_general;
/// // A batch of 2 matrix-vector products: [2, 3, 4] with [2, 4].
/// let (a, b) = (Tensor::ones(&[2, 3, 4])?, Tensor::ones(&[2, 4])?);
/// let y = (|a: &Var, b: &Var| dot_general(a, b, (&[2], &[1]), (&[0], &[0]))).eval((&a, &b))?;
/// assert_eq!(y.shape(), &[2, 3]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn dot_general(a: &Var, b: &Var, contract: (&[i64], &[i64]), batch: (&[i64], &[i64])) -> Var {
    run("dot_general", a, || {
        let axes = |x: &Var, list: &[i64], arg: &str| {
            list.iter()
                .map(|&i| normalize_axis("dot_general", i, x.shape(), arg))
                .collect::<Result<Vec<_>>>()
        };
        let (ca, cb) =
            (axes(a, contract.0, "lhs_contracting")?, axes(b, contract.1, "rhs_contracting")?);
        let (ba, bb) = (axes(a, batch.0, "lhs_batch")?, axes(b, batch.1, "rhs_batch")?);
        contract_axes(a, b, (&ca, &cb), (&ba, &bb))
    })
}

/// The product of [`dot_general`] on normalized axes.
fn contract_axes(
    a: &Var,
    b: &Var,
    contract: (&[usize], &[usize]),
    batch: (&[usize], &[usize]),
) -> Result<Var> {
    let name = "dot_general";
    for (what, (la, lb)) in [("contracting", contract), ("batch", batch)] {
        if la.len() != lb.len() {
            return Err(Error::invalid(
                name,
                what,
                format!("{} axes of lhs against {} of rhs", la.len(), lb.len()),
            ));
        }
        for (&i, &j) in la.iter().zip(lb) {
            if a.shape()[i] != b.shape()[j] {
                return Err(Error::shape(
                    name,
                    &[a.shape(), b.shape()],
                    format!(
                        "{what} axis {i} of lhs {:?} has size {}, axis {j} of rhs {:?} has {}",
                        a.shape(),
                        a.shape()[i],
                        b.shape(),
                        b.shape()[j]
                    ),
                ));
            }
        }
    }
    let named = |x: &Var, used: &[&[usize]]| -> Result<()> {
        let mut seen = vec![false; x.rank()];
        for &i in used.iter().flat_map(|l| l.iter()) {
            if std::mem::replace(&mut seen[i], true) {
                return Err(Error::invalid(
                    name,
                    "axes",
                    format!("axis {i} of shape {:?} is named twice", x.shape()),
                ));
            }
        }
        Ok(())
    };
    named(a, &[contract.0, batch.0])?;
    named(b, &[contract.1, batch.1])?;
    let free = |x: &Var, c: &[usize], bt: &[usize]| -> Vec<usize> {
        (0..x.rank()).filter(|i| !c.contains(i) && !bt.contains(i)).collect()
    };
    let (fa, fb) = (free(a, contract.0, batch.0), free(b, contract.1, batch.1));
    let sizes = |x: &Var, l: &[usize]| l.iter().map(|&i| x.shape()[i]).collect::<Vec<_>>();
    let (bs, ms, ns, ks) = (sizes(a, batch.0), sizes(a, &fa), sizes(b, &fb), sizes(a, contract.0));
    let (bt, m, n, k) =
        (product(&bs)? as i64, product(&ms)? as i64, product(&ns)? as i64, product(&ks)? as i64);
    let perm =
        |l: &[&[usize]]| l.iter().flat_map(|x| x.iter()).map(|&i| i as i64).collect::<Vec<_>>();
    let lhs = a.permute(&perm(&[batch.0, &fa, contract.0]));
    let rhs = b.permute(&perm(&[batch.1, contract.1, &fb]));
    let prod = if batch.0.is_empty() {
        lhs.reshape(&[m, k]).matmul(&rhs.reshape(&[k, n]))
    } else {
        lhs.reshape(&[bt, m, k]).matmul(&rhs.reshape(&[bt, k, n]))
    };
    let out: Vec<i64> = as_i64(&[bs, ms, ns].concat());
    Ok(prod.reshape(&out))
}

/// `jnp.tensordot` with `n` axes: the last `n` of `a` contracted with the
/// first `n` of `b`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::tensordot;
/// let (a, b) = (Tensor::ones(&[2, 3, 4])?, Tensor::ones(&[3, 4, 5])?);
/// let y = (|a: &Var, b: &Var| tensordot(a, b, 2)).eval((&a, &b))?;
/// assert_eq!(y.shape(), &[2, 5]);
/// assert_eq!(y.to_vec::<f64>()?[0], 12.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn tensordot(a: &Var, b: &Var, n: usize) -> Var {
    run("tensordot", a, || {
        if n > a.rank() || n > b.rank() {
            return Err(Error::invalid(
                "tensordot",
                "axes",
                format!("{n} axes, but the shapes are {:?} and {:?}", a.shape(), b.shape()),
            ));
        }
        let ca: Vec<usize> = (a.rank() - n..a.rank()).collect();
        let cb: Vec<usize> = (0..n).collect();
        contract_axes(a, b, (&ca, &cb), (&[], &[]))
    })
}

/// `jnp.tensordot` with explicit axes: `a_axes[k]` of `a` contracted with
/// `b_axes[k]` of `b`; the result has `a`'s other axes, then `b`'s.
pub fn tensordot_axes(a: &Var, b: &Var, a_axes: &[i64], b_axes: &[i64]) -> Var {
    as_op("tensordot", || dot_general(a, b, (a_axes, b_axes), (&[], &[])))
}

/// `jnp.outer`: `a[i] * b[j]` of the flattened values.
pub fn outer(a: &Var, b: &Var) -> Var {
    as_op("outer", || a.flatten().unsqueeze(1) * b.flatten().unsqueeze(0))
}

/// `jnp.inner`: the sum over the last axes of `a` and `b` (a product with
/// a scalar).
pub fn inner(a: &Var, b: &Var) -> Var {
    run("inner", a, || {
        if a.rank() == 0 || b.rank() == 0 {
            return Ok(a * b);
        }
        contract_axes(a, b, (&[a.rank() - 1], &[b.rank() - 1]), (&[], &[]))
    })
}

/// `jnp.dot`: a product with a scalar, the inner product of vectors,
/// `matmul` of matrices, and otherwise the last axis of `a` contracted
/// with the second-to-last of `b` (the last for a vector `b`), the result
/// holding `a`'s other axes then `b`'s.
pub fn dot(a: &Var, b: &Var) -> Var {
    run("dot", a, || match (a.rank(), b.rank()) {
        (0, _) | (_, 0) => Ok(a * b),
        (ra, rb) if ra <= 2 && rb <= 2 => Ok(a.matmul(b)),
        (ra, 1) => contract_axes(a, b, (&[ra - 1], &[0]), (&[], &[])),
        (ra, rb) => contract_axes(a, b, (&[ra - 1], &[rb - 2]), (&[], &[])),
    })
}

/// `jnp.vdot`: the inner product of the flattened values.
pub fn vdot(a: &Var, b: &Var) -> Var {
    as_op("vdot", || a.flatten().matmul(&b.flatten()))
}

/// `jnp.kron`: the Kronecker product, `out[i·m + j] = a[i] · b[j]` along
/// every axis (the lower rank padded with leading ones).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::kron;
/// let (a, b) = (Tensor::eye(2)?, Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?);
/// let y = (|a: &Var, b: &Var| kron(a, b)).eval((&a, &b))?;
/// assert_eq!(y.shape(), &[4, 4]);
/// assert_eq!(y.to_vec::<f64>()?[..4], [1.0, 2.0, 0.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn kron(a: &Var, b: &Var) -> Var {
    run("kron", a, || {
        let d = a.rank().max(b.rank());
        let pad = |x: &Var| -> Vec<usize> {
            std::iter::repeat_n(1, d - x.rank()).chain(x.shape().iter().copied()).collect()
        };
        let (sa, sb) = (pad(a), pad(b));
        let ia: Vec<i64> = sa.iter().flat_map(|&s| [s as i64, 1]).collect();
        let ib: Vec<i64> = sb.iter().flat_map(|&s| [1, s as i64]).collect();
        let merged = sa.iter().zip(&sb).map(|(&p, &q)| dim_mul(p, q).map(|m| m as i64));
        Ok((a.reshape(&ia) * b.reshape(&ib)).reshape(&merged.collect::<Result<Vec<_>>>()?))
    })
}

/// `jnp.cross` along `axis` of `a`, `b` and the result: vectors of 3
/// components give 3; of 2, the scalar `a0 b1 - a1 b0` (the axis removed).
/// The other axes broadcast.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::cross;
/// let (x, y) = (Tensor::from_vec(vec![1.0, 0.0, 0.0], &[3])?, Tensor::from_vec(vec![0.0, 1.0, 0.0], &[3])?);
/// let z = (|x: &Var, y: &Var| cross(x, y, -1)).eval((&x, &y))?;
/// assert_eq!(z.to_vec::<f64>()?, vec![0.0, 0.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn cross(a: &Var, b: &Var, axis: i64) -> Var {
    run("cross", a, || {
        let ia = normalize_axis("cross", axis, a.shape(), "axis")? as i64;
        let ib = normalize_axis("cross", axis, b.shape(), "axis")? as i64;
        let (na, nb) = (a.shape()[ia as usize], b.shape()[ib as usize]);
        let at = |x: &Var, ax: i64, i: i64| x.index_axis(ax, i);
        match (na, nb) {
            (3, 3) => {
                let (a0, a1, a2) = (at(a, ia, 0), at(a, ia, 1), at(a, ia, 2));
                let (b0, b1, b2) = (at(b, ib, 0), at(b, ib, 1), at(b, ib, 2));
                let c = [&a1 * &b2 - &a2 * &b1, &a2 * &b0 - &a0 * &b2, &a0 * &b1 - &a1 * &b0];
                let c = stack(&c.iter().collect::<Vec<_>>(), -1);
                let dst = normalize_axis("cross", axis, c.shape(), "axis")?;
                Ok(moveaxis(&c, -1, dst as i64))
            }
            (2, 2) => Ok(at(a, ia, 0) * at(b, ib, 1) - at(a, ia, 1) * at(b, ib, 0)),
            _ => Err(Error::shape(
                "cross",
                &[a.shape(), b.shape()],
                format!(
                    "axis {axis} has {na} and {nb} components; cross takes 3 and 3, or 2 and 2"
                ),
            )),
        }
    })
}

/// `jnp.einsum`: Einstein summation over the subscripts of `spec`
/// (`"ij,jk->ik"`; without `->`, the output is the labels used once, in
/// alphabetical order; `...` stands for broadcast leading axes). A label
/// repeated in one operand takes its diagonal (`"ii->i"`); a label in no
/// other operand and not in the output is summed first; the operands are
/// then contracted left to right, each pair as one (batched) matrix
/// product ([`dot_general`]). Sizes of one label must agree, or be 1 and
/// broadcast.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::einsum;
/// let a = Tensor::from_vec((0..6).map(f64::from).collect(), &[2, 3])?;
/// let b = Tensor::from_vec((0..12).map(f64::from).collect(), &[3, 4])?;
/// let f = |a: &Var, b: &Var| vec![einsum("ij,jk->ik", &[a, b]), einsum("ij->ji", &[a]), einsum("ij,ij", &[a, a])];
/// let out = f.eval((&a, &b))?;
/// assert_eq!(out[0].shape(), &[2, 4]);
/// assert_eq!(out[1].shape(), &[3, 2]);
/// assert_eq!(out[2].item()?, 55.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn einsum(spec: &str, operands: &[&Var]) -> Var {
    let Some(first) = operands.first() else {
        let tracer = anvil_core::trace::current_or_detached();
        tracer.record(Error::invalid("einsum", "operands", "needs at least one operand"));
        return tracer.poisoned();
    };
    run("einsum", first, || {
        let parsed = parse_einsum(spec, operands)?;
        let mut terms = Vec::with_capacity(operands.len());
        for (x, labels) in operands.iter().zip(&parsed.inputs) {
            let x = broadcast_labels(x, labels, &parsed.sizes)?;
            terms.push(diagonals(&x, labels.clone()));
        }
        // Contract left to right, summing each label once nothing later uses it.
        let needed_after = |k: usize| -> Vec<u32> {
            let later =
                terms[k + 1..].iter().flat_map(|(_, l): &(Var, Vec<u32>)| l.iter().copied());
            parsed.output.iter().copied().chain(later).collect()
        };
        let (x, labels) = terms[0].clone();
        let (mut cur, mut cur_labels) = sum_unused(&x, &labels, &needed_after(0));
        for (k, (x, labels)) in terms.iter().enumerate().skip(1) {
            let keep = needed_after(k);
            let (rhs, rhs_labels) =
                sum_unused(x, labels, &[keep.clone(), cur_labels.clone()].concat());
            let (lhs, lhs_labels) =
                sum_unused(&cur, &cur_labels, &[keep.clone(), rhs_labels.clone()].concat());
            let shared: Vec<u32> =
                lhs_labels.iter().copied().filter(|l| rhs_labels.contains(l)).collect();
            let (batch, contract): (Vec<u32>, Vec<u32>) =
                shared.iter().partition(|l| keep.contains(l));
            let pos = |ls: &[u32], of: &[u32]| -> Vec<usize> {
                of.iter().map(|l| ls.iter().position(|m| m == l).unwrap_or_default()).collect()
            };
            let prod = contract_axes(
                &lhs,
                &rhs,
                (&pos(&lhs_labels, &contract), &pos(&rhs_labels, &contract)),
                (&pos(&lhs_labels, &batch), &pos(&rhs_labels, &batch)),
            )?;
            let free =
                |ls: &[u32]| ls.iter().copied().filter(|l| !shared.contains(l)).collect::<Vec<_>>();
            cur_labels = [batch.clone(), free(&lhs_labels), free(&rhs_labels)].concat();
            cur = prod;
        }
        let (cur, cur_labels) = sum_unused(&cur, &cur_labels, &parsed.output);
        let perm: Vec<i64> = parsed
            .output
            .iter()
            .map(|l| cur_labels.iter().position(|m| m == l).unwrap_or_default() as i64)
            .collect();
        Ok(if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
            cur
        } else {
            cur.permute(&perm)
        })
    })
}

/// An einsum's subscripts as labels: letters are their code points; the
/// axes of an ellipsis are `ELLIPSIS + k`, right-aligned across operands.
struct Einsum {
    inputs: Vec<Vec<u32>>,
    output: Vec<u32>,
    sizes: std::collections::BTreeMap<u32, usize>,
}

const ELLIPSIS: u32 = 1 << 20;

fn parse_einsum(spec: &str, operands: &[&Var]) -> Result<Einsum> {
    let bad = |msg: String| Error::invalid("einsum", "subscripts", format!("{spec:?}: {msg}"));
    let spec_clean: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match spec_clean.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (spec_clean.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        return Err(bad(format!("{} terms for {} operands", terms.len(), operands.len())));
    }
    // Letters and at most one ellipsis per term.
    let letters = |t: &str| -> Result<(Vec<u32>, Option<usize>)> {
        let mut out = Vec::new();
        let mut dots = None;
        let mut rest = t;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("...") {
                if dots.replace(out.len()).is_some() {
                    return Err(bad(format!("term {t:?} has two ellipses")));
                }
                rest = r;
            } else {
                let c = rest.chars().next().unwrap_or_default();
                if !c.is_ascii_alphabetic() {
                    return Err(bad(format!("{c:?} is not a subscript letter")));
                }
                out.push(c as u32);
                rest = &rest[c.len_utf8()..];
            }
        }
        Ok((out, dots))
    };
    let mut inputs = Vec::new();
    let mut ellipsis_rank = 0;
    let mut parsed = Vec::new();
    for (k, (t, x)) in terms.iter().zip(operands).enumerate() {
        let (ls, dots) = letters(t)?;
        let e = match dots {
            Some(_) if ls.len() <= x.rank() => x.rank() - ls.len(),
            None if ls.len() == x.rank() => 0,
            _ => {
                return Err(bad(format!(
                    "term {k} ({t:?}) has {} subscripts for operand {k} of shape {:?}",
                    ls.len(),
                    x.shape()
                )))
            }
        };
        ellipsis_rank = ellipsis_rank.max(e);
        parsed.push((ls, dots, e));
    }
    for (ls, dots, e) in &parsed {
        let mut full = ls.clone();
        if let Some(at) = dots {
            let axes = (0..*e).map(|j| ELLIPSIS + (ellipsis_rank - e + j) as u32);
            full.splice(at..at, axes);
        }
        inputs.push(full);
    }
    let all_ellipsis: Vec<u32> = (0..ellipsis_rank as u32).map(|j| ELLIPSIS + j).collect();
    let output = match rhs {
        Some(r) => {
            let (ls, dots) = letters(&r)?;
            let mut full = ls;
            if let Some(at) = dots {
                full.splice(at..at, all_ellipsis.iter().copied());
            }
            for (i, l) in full.iter().enumerate() {
                if full[..i].contains(l) {
                    return Err(bad(format!(
                        "output subscript {:?} appears twice",
                        char::from_u32(*l).unwrap_or('?')
                    )));
                }
                if !inputs.iter().any(|ls| ls.contains(l)) {
                    return Err(bad(format!(
                        "output subscript {:?} is in no input",
                        char::from_u32(*l).unwrap_or('?')
                    )));
                }
            }
            full
        }
        None => {
            let mut once: Vec<u32> = inputs
                .iter()
                .flatten()
                .copied()
                .filter(|&l| {
                    l < ELLIPSIS && inputs.iter().flatten().filter(|&&m| m == l).count() == 1
                })
                .collect();
            once.sort_unstable();
            [all_ellipsis, once].concat()
        }
    };
    // One size per label: equal, or 1 broadcast to the others.
    let mut sizes = std::collections::BTreeMap::new();
    for (k, (ls, x)) in inputs.iter().zip(operands).enumerate() {
        for (&l, &d) in ls.iter().zip(x.shape()) {
            let s = sizes.entry(l).or_insert(d);
            if *s == 1 {
                *s = d;
            } else if d != 1 && d != *s {
                let name = if l >= ELLIPSIS {
                    "...".to_string()
                } else {
                    char::from_u32(l).unwrap_or('?').to_string()
                };
                return Err(Error::shape(
                    "einsum",
                    &operands.iter().map(|x| x.shape()).collect::<Vec<_>>(),
                    format!(
                        "{spec:?}: subscript {name} has size {d} in operand {k} and {s} elsewhere"
                    ),
                ));
            }
        }
    }
    Ok(Einsum { inputs, output, sizes })
}

/// `x` with its size-1 axes broadcast to their label's size.
fn broadcast_labels(
    x: &Var,
    labels: &[u32],
    sizes: &std::collections::BTreeMap<u32, usize>,
) -> Result<Var> {
    let want: Vec<usize> = labels.iter().map(|l| sizes[l]).collect();
    Ok(if want == x.shape() { x.clone() } else { x.broadcast_to(&want) })
}

/// Takes the diagonal of every label repeated in one operand.
fn diagonals(x: &Var, mut labels: Vec<u32>) -> (Var, Vec<u32>) {
    let mut x = x.clone();
    while let Some(j) = (0..labels.len()).find(|&j| labels[..j].contains(&labels[j])) {
        let i = labels.iter().position(|&l| l == labels[j]).unwrap_or_default();
        let l = labels[j];
        let mut perm: Vec<i64> =
            (0..labels.len() as i64).filter(|&a| a != i as i64 && a != j as i64).collect();
        perm.extend([i as i64, j as i64]);
        x = x.permute(&perm).diagonal(0);
        labels = perm[..perm.len() - 2].iter().map(|&a| labels[a as usize]).collect();
        labels.push(l);
    }
    (x, labels)
}

/// Sums the axes whose labels are not in `keep`.
fn sum_unused(x: &Var, labels: &[u32], keep: &[u32]) -> (Var, Vec<u32>) {
    let drop: Vec<i64> =
        (0..labels.len()).filter(|&i| !keep.contains(&labels[i])).map(|i| i as i64).collect();
    if drop.is_empty() {
        return (x.clone(), labels.to_vec());
    }
    let kept = labels.iter().copied().filter(|l| keep.contains(l)).collect();
    (x.sum(&drop), kept)
}

// ------------------------------------------------------------- elementwise

/// `jnp.isnan` (`bool`; `false` for integers).
pub fn isnan(x: &Var) -> Var {
    as_op("isnan", || x.not_equal(x))
}

/// `jnp.isinf`: `±inf` (`bool`).
pub fn isinf(x: &Var) -> Var {
    as_op("isinf", || x.abs().equal(&x.scalar_like(f64::INFINITY)))
}

/// `jnp.isposinf` (`bool`).
pub fn isposinf(x: &Var) -> Var {
    as_op("isposinf", || x.equal(&x.scalar_like(f64::INFINITY)))
}

/// `jnp.isneginf` (`bool`).
pub fn isneginf(x: &Var) -> Var {
    as_op("isneginf", || x.equal(&x.scalar_like(f64::NEG_INFINITY)))
}

/// `jnp.isclose`: `|a - b| <= atol + rtol |b|` of finite values,
/// elementwise (`bool`; NaNs are not close, infinities only to the same
/// infinity).
pub fn isclose(a: &Var, b: &Var, rtol: f64, atol: f64) -> Var {
    as_op("isclose", || {
        let (a, b) = (floated(a), floated(b));
        let near = (&a - &b).abs().le(&(b.abs() * rtol + atol));
        let finite = a.is_finite().logical_and(&b.is_finite());
        near.logical_and(&finite).logical_or(&a.equal(&b))
    })
}

/// `jnp.hypot`: `sqrt(a² + b²)` without overflow or underflow, JAX's
/// formulation (so its derivative is JAX's, `0` at the origin).
pub fn hypot(a: &Var, b: &Var) -> Var {
    as_op("hypot", || {
        let (a, b) = (floated(a).abs(), floated(b).abs());
        let inf = isposinf(&a).logical_or(&isposinf(&b));
        let (hi, lo) = (a.maximum(&b), a.minimum(&b));
        let zero = hi.equal(&hi.zeros_like());
        let safe = where_(&zero, &hi.ones_like(), &hi);
        let r = &hi * ((&lo / &safe).square() + 1.0).sqrt();
        let r = where_(&zero, &hi, &r);
        where_(&inf, &r.full_like(f64::INFINITY), &r)
    })
}

/// `jnp.logaddexp`: `log(e^a + e^b)` without overflow, as
/// `max + log1p(e^(min - max))`; its derivative is `e^(a - out)`, half
/// each at ties, and two infinities of one sign give that infinity.
pub fn logaddexp(a: &Var, b: &Var) -> Var {
    as_op("logaddexp", || {
        let (a, b) = (floated(a), floated(b));
        let (hi, lo) = (a.maximum(&b), a.minimum(&b));
        let delta = &lo - &hi;
        let out = &hi + delta.exp().log1p();
        where_(&isnan(&delta), &(&a + &b), &out)
    })
}

/// `jnp.logaddexp2`: `log2(2^a + 2^b)`.
pub fn logaddexp2(a: &Var, b: &Var) -> Var {
    as_op("logaddexp2", || {
        let ln2 = std::f64::consts::LN_2;
        logaddexp(&(floated(a) * ln2), &(floated(b) * ln2)) / ln2
    })
}

/// `jnp.nan_to_num`: NaN replaced by `nan`, `+inf` by `posinf` and `-inf`
/// by `neginf` (by default the largest finite values of the dtype).
pub fn nan_to_num(x: &Var, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Var {
    as_op("nan_to_num", || {
        if !x.dtype().is_float() {
            return x.clone();
        }
        let big = if x.dtype() == DType::F32 { f32::MAX as f64 } else { f64::MAX };
        let y = where_(&isnan(x), &x.full_like(nan), x);
        let y = where_(&isposinf(x), &x.full_like(posinf.unwrap_or(big)), &y);
        where_(&isneginf(x), &x.full_like(neginf.unwrap_or(-big)), &y)
    })
}

/// `jnp.sinc`: `sin(πx) / (πx)`, `1` at `0`, where its first and second
/// derivatives are JAX's (`0` and `-π²/3`, from the Taylor series).
pub fn sinc(x: &Var) -> Var {
    as_op("sinc", || {
        let x = floated(x);
        let zero = x.equal(&x.zeros_like());
        let px = where_(&zero, &x.ones_like(), &x) * std::f64::consts::PI;
        // Near 0 the series 1 - (πx)²/6 gives the derivatives JAX's rule gives.
        let small = &x * std::f64::consts::PI;
        let series = 1.0 - small.square() / 6.0;
        where_(&zero, &series, &(px.sin() / &px))
    })
}

/// `jnp.deg2rad` (`jnp.radians`).
pub fn deg2rad(x: &Var) -> Var {
    floated(x) * (std::f64::consts::PI / 180.0)
}

/// `jnp.rad2deg` (`jnp.degrees`).
pub fn rad2deg(x: &Var) -> Var {
    floated(x) * (180.0 / std::f64::consts::PI)
}

/// `jnp.heaviside`: `0` below zero, `h0` at zero, `1` above, NaN at NaN.
pub fn heaviside(x: &Var, h0: &Var) -> Var {
    as_op("heaviside", || {
        let x = floated(x);
        let step = x.gt(&x.zeros_like()).cast(x.dtype());
        let step = where_(&x.equal(&x.zeros_like()), &h0.cast(x.dtype()), &step);
        where_(&isnan(&x), &x, &step)
    })
}

/// `jnp.floor_divide`: `floor(a / b)` (of integers: rounding towards
/// negative infinity, as Python's `//`).
pub fn floor_divide(a: &Var, b: &Var) -> Var {
    as_op("floor_divide", || {
        let (a, b) = &crate::api::promoted(a, b);
        if a.dtype().is_float() {
            // JAX's `_float_divmod`: (a - fmod(a, b)) / b, one less where the
            // remainder's sign differs from b's (inf // 2 is NaN, 5 // -inf -1).
            let m = a.rem(b);
            let d = crate::lax::div(&(a - &m), b);
            let zero = m.zeros_like();
            let differ = m.not_equal(&zero).logical_and(&b.sign().not_equal(&m.sign()));
            return where_(&differ, &(&d - 1.0), &d).round();
        }
        // Truncating division, one less where the remainder's sign differs.
        let q = crate::lax::div(a, b);
        let r = a.rem(b);
        let zero = r.zeros_like();
        let adjust =
            r.not_equal(&zero).logical_and(&r.lt(&zero).logical_xor(&b.lt(&b.zeros_like())));
        &q - &adjust.cast(q.dtype())
    })
}

/// `jnp.remainder` (`jnp.mod`): `a - floor(a / b) b`, with the sign of
/// `b`, as Python's `%` (`LaxExt::rem` is C's `fmod`, with the sign of `a`).
pub fn remainder(a: &Var, b: &Var) -> Var {
    as_op("remainder", || {
        let r = a.rem(b);
        let zero = r.zeros_like();
        let differ =
            r.not_equal(&zero).logical_and(&r.lt(&zero).logical_xor(&b.lt(&b.zeros_like())));
        where_(&differ, &(&r + b), &r)
    })
}

/// `jnp.fmod`: the remainder with the sign of `a` (C's `fmod`).
pub fn fmod(a: &Var, b: &Var) -> Var {
    a.rem(b)
}

// -------------------------------------------------------------- statistics

/// The axes a reduction of NumPy's `axis=None` default covers: `None` is
/// every axis.
fn axes_or_all(x: &Var, axes: Option<&[i64]>) -> Vec<i64> {
    axes.map_or_else(|| (0..x.rank() as i64).collect(), <[i64]>::to_vec)
}

/// `jnp.var` with `ddof`: the sum of squared deviations over `axes`
/// (`None`: every axis) divided by `n - ddof` (`ddof = 1`: the unbiased
/// sample variance); NaN where `n - ddof <= 0`, as JAX's.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy as jnp;
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
/// let v = (|x: &Var| jnp::var(x, None, 1.0, false)).eval(&x)?;
/// assert!((v.item()? - 5.0 / 3.0).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn var(x: &Var, axes: Option<&[i64]>, ddof: f64, keepdims: bool) -> Var {
    run("var", x, || {
        let x = floated(x);
        let axes = axes_or_all(&x, axes);
        let mut n = 1usize;
        for &a in &axes {
            n = dim_mul(n, x.shape()[normalize_axis("var", a, x.shape(), "axes")?])?;
        }
        let ss = (&x - &x.mean_axes(&axes, true)).square();
        let ss = if keepdims { ss.sum_keepdims(&axes) } else { ss.sum(&axes) };
        Ok(divide_by_count(&ss, n, ddof))
    })
}

/// `x / (n - ddof)`, with `n` a dimension (bound at run time when
/// symbolic); NaN where `n - ddof <= 0`, as JAX's.
fn divide_by_count(x: &Var, n: usize, ddof: f64) -> Var {
    if is_symbolic(n) {
        let d = dim_value(n).cast(x.dtype()) - ddof;
        let q = x / &d;
        where_(&d.gt(&d.zeros_like()), &q, &q.full_like(f64::NAN))
    } else if n as f64 - ddof > 0.0 {
        x / (n as f64 - ddof)
    } else {
        x.full_like(f64::NAN)
    }
}

/// `jnp.std` with `ddof`: the square root of [`var`].
pub fn std(x: &Var, axes: Option<&[i64]>, ddof: f64, keepdims: bool) -> Var {
    as_op("std", || var(x, axes, ddof, keepdims).sqrt())
}

/// How [`quantile`] reads between two order statistics (NumPy's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantileMethod {
    /// Linear interpolation (the default of NumPy and JAX).
    Linear,
    /// The lower of the two.
    Lower,
    /// The higher of the two.
    Higher,
    /// Their mean.
    Midpoint,
    /// The nearer (ties to the even index, as NumPy).
    Nearest,
}

/// `jnp.quantile`: the `q`-quantile (`0 <= q <= 1`) along `axis` (`None`:
/// of all values), from a sort; any NaN along the axis gives NaN. Its
/// derivative reaches the one or two order statistics it reads.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::{quantile, QuantileMethod};
/// let x = Tensor::from_vec(vec![4.0, 1.0, 3.0, 2.0], &[4])?;
/// let q = (|x: &Var| quantile(x, 0.5, None, QuantileMethod::Linear, false)).eval(&x)?;
/// assert_eq!(q.item()?, 2.5);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn quantile(x: &Var, q: f64, axis: Option<i64>, method: QuantileMethod, keepdims: bool) -> Var {
    as_op("quantile", || quantiles(x, &[q], axis, method, keepdims).squeeze(&[0]))
}

/// `jnp.quantile` of several `qs` at once: the result has a leading axis
/// of `qs.len()`, one sort shared by all.
pub fn quantiles(
    x: &Var,
    qs: &[f64],
    axis: Option<i64>,
    method: QuantileMethod,
    keepdims: bool,
) -> Var {
    run("quantile", x, || {
        if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return Err(Error::invalid("quantile", "q", format!("{q} is not in [0, 1]")));
        }
        let x = floated(x);
        let (y, ax) = match axis {
            Some(a) => (x.clone(), normalize_axis("quantile", a, x.shape(), "axis")?),
            None => (x.flatten(), 0),
        };
        let n = y.shape()[ax];
        if n == 0 {
            return Err(Error::invalid(
                "quantile",
                "x",
                format!("axis {ax} of shape {:?} is empty", y.shape()),
            ));
        }
        let sorted = y.sort(ax as i64, false);
        let parts: Vec<Var> = if is_symbolic(n) {
            qs.iter().map(|&q| traced_quantile(&sorted, ax, n, q, method)).collect()
        } else {
            qs.iter().map(|&q| static_quantile(&sorted, ax, n, q, method)).collect()
        };
        let out = stack(&parts.iter().collect::<Vec<_>>(), 0);
        let nan = isnan(&y).any(&[ax as i64], false).unsqueeze(0);
        let out = where_(&nan, &out.full_like(f64::NAN), &out);
        Ok(if !keepdims {
            out
        } else if axis.is_some() {
            out.unsqueeze(ax as i64 + 1)
        } else {
            let ones: Vec<i64> =
                std::iter::once(qs.len() as i64).chain(std::iter::repeat_n(1, x.rank())).collect();
            out.reshape(&ones)
        })
    })
}

/// The `q`-quantile of `sorted` along `ax` of a known size `n`: one or
/// two order statistics read at fixed positions.
fn static_quantile(sorted: &Var, ax: usize, n: usize, q: f64, method: QuantileMethod) -> Var {
    let pick = |i: usize| sorted.index_axis(ax as i64, i as i64);
    let pos = q * (n - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, (pos.ceil() as usize).min(n - 1));
    let frac = pos - lo as f64;
    match method {
        QuantileMethod::Lower => pick(lo),
        QuantileMethod::Higher => pick(hi),
        QuantileMethod::Midpoint => (pick(lo) + pick(hi)) * 0.5,
        QuantileMethod::Nearest => {
            let near = if frac > 0.5 || (frac == 0.5 && lo % 2 == 1) { hi } else { lo };
            pick(near)
        }
        QuantileMethod::Linear if lo == hi || frac == 0.0 => pick(lo),
        QuantileMethod::Linear => pick(lo) * (1.0 - frac) + pick(hi) * frac,
    }
}

/// [`static_quantile`] on a symbolic axis: the positions are computed from
/// the size bound at run time and the order statistics gathered there.
fn traced_quantile(sorted: &Var, ax: usize, n: usize, q: f64, method: QuantileMethod) -> Var {
    let pos = (dim_value(n) - 1.0) * q;
    let (lo, hi) = (pos.floor(), pos.ceil());
    let frac = &pos - &lo;
    let pick =
        |i: &Var| sorted.take(&i.cast(DType::I64).reshape(&[1]), ax as i64).squeeze(&[ax as i64]);
    match method {
        QuantileMethod::Lower => pick(&lo),
        QuantileMethod::Higher => pick(&hi),
        QuantileMethod::Midpoint => (pick(&lo) + pick(&hi)) * 0.5,
        QuantileMethod::Nearest => {
            let half = frac.full_like(0.5);
            let odd = (&lo - &((&lo * 0.5).floor() * 2.0)).equal(&lo.ones_like());
            let up = frac.gt(&half).logical_or(&frac.equal(&half).logical_and(&odd));
            pick(&where_(&up, &hi, &lo))
        }
        QuantileMethod::Linear => {
            let w = frac.cast(sorted.dtype());
            pick(&lo) * (1.0 - &w) + pick(&hi) * &w
        }
    }
}

/// `jnp.percentile`: [`quantile`] with `p` in percent.
pub fn percentile(
    x: &Var,
    p: f64,
    axis: Option<i64>,
    method: QuantileMethod,
    keepdims: bool,
) -> Var {
    as_op("percentile", || quantile(x, p / 100.0, axis, method, keepdims))
}

/// `jnp.median`: the linear 0.5-quantile along `axis` (`None`: of all values).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::median;
/// let x = Tensor::from_vec(vec![3.0, 1.0, 2.0, 10.0, 30.0, 20.0], &[2, 3])?;
/// let m = (|x: &Var| median(x, Some(1), false)).eval(&x)?;
/// assert_eq!(m.to_vec::<f64>()?, vec![2.0, 20.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn median(x: &Var, axis: Option<i64>, keepdims: bool) -> Var {
    as_op("median", || quantile(x, 0.5, axis, QuantileMethod::Linear, keepdims))
}

/// `jnp.nansum`: the sum over `axes` (`None`: every axis) with NaNs
/// counted as zero.
pub fn nansum(x: &Var, axes: Option<&[i64]>, keepdims: bool) -> Var {
    as_op("nansum", || {
        let axes = axes_or_all(x, axes);
        let y = where_(&isnan(x), &x.zeros_like(), x);
        if keepdims {
            y.sum_keepdims(&axes)
        } else {
            y.sum(&axes)
        }
    })
}

/// `jnp.nanmean`: the mean over `axes` (`None`: every axis) of the values
/// that are not NaN.
pub fn nanmean(x: &Var, axes: Option<&[i64]>, keepdims: bool) -> Var {
    as_op("nanmean", || {
        let x = floated(x);
        let count = isnan(&x).logical_not().cast(x.dtype());
        nansum(&x, axes, keepdims) / nansum(&count, axes, keepdims)
    })
}

/// `jnp.average` with weights: `sum(w x) / sum(w)` over `axis` (`None`:
/// all values); `weights` has `x`'s shape, or is 1-D along `axis`.
pub fn average(x: &Var, weights: &Var, axis: Option<i64>) -> Var {
    run("average", x, || {
        let x = floated(x);
        let w = floated(weights);
        let (w, axes) = match axis {
            None => {
                same_shape_weights("average", &x, Some(&w))?;
                (w, (0..x.rank() as i64).collect::<Vec<_>>())
            }
            Some(a) => {
                let ax = normalize_axis("average", a, x.shape(), "axis")?;
                let w = if w.rank() == 1 && x.rank() > 1 {
                    let mut along = vec![1i64; x.rank()];
                    along[ax] = -1;
                    w.reshape(&along)
                } else {
                    w
                };
                (w, vec![ax as i64])
            }
        };
        Ok((&x * &w).sum(&axes) / w.broadcast_to(x.shape()).sum(&axes))
    })
}

/// An error naming `name` when `weights` are given with another shape
/// than the values `x` (JAX's check of `average`, `bincount`, `histogram`).
fn same_shape_weights(name: &str, x: &Var, weights: Option<&Var>) -> Result<()> {
    match weights {
        Some(w) if w.shape() != x.shape() => Err(Error::shape(
            name,
            &[x.shape(), w.shape()],
            format!(
                "weights of shape {:?} for values of shape {:?}: they must have one shape",
                w.shape(),
                x.shape()
            ),
        )),
        _ => Ok(()),
    }
}

/// `jnp.cov`: the covariance matrix of the variables in the rows of `m`
/// (`rowvar`; otherwise in the columns), observations in the other axis,
/// normalised by `n - ddof` (NumPy's default `ddof = 1`). One variable
/// (a 1-D `m`, or a single row) gives a 0-d result, as NumPy's.
pub fn cov(m: &Var, rowvar: bool, ddof: f64) -> Var {
    run("cov", m, || {
        let m = floated(m);
        let x = match m.rank() {
            1 => m.reshape(&[1, -1]),
            2 if rowvar => m.clone(),
            2 => m.transpose(),
            r => {
                return Err(Error::invalid(
                    "cov",
                    "m",
                    format!("has rank {r} (shape {:?}); cov takes 1-D or 2-D values", m.shape()),
                ))
            }
        };
        let centered = &x - &x.mean_axes(&[1], true);
        let c = divide_by_count(&centered.matmul(&centered.transpose()), x.shape()[1], ddof);
        // One variable (a vector, or a single row): a 0-d result, as NumPy's.
        Ok(if x.shape()[0] == 1 { c.reshape(&[]) } else { c })
    })
}

/// `jnp.corrcoef`: the correlation coefficients of the variables in the
/// rows of `m` (`rowvar`; otherwise the columns), clipped to `[-1, 1]`.
pub fn corrcoef(m: &Var, rowvar: bool) -> Var {
    as_op("corrcoef", || {
        let c = cov(m, rowvar, 1.0);
        if c.rank() == 0 {
            // 1 (NaN for a constant variable, as NumPy).
            let d = c.clone();
            return &c / &d;
        }
        let d = c.diagonal(0).sqrt();
        let r = &c / &d.unsqueeze(1) / &d.unsqueeze(0);
        r.clip(&r.full_like(-1.0), &r.full_like(1.0))
    })
}

/// `jnp.count_nonzero` over `axes` (`None`: every axis), as `i64`.
pub fn count_nonzero(x: &Var, axes: Option<&[i64]>, keepdims: bool) -> Var {
    as_op("count_nonzero", || {
        let nz = x.not_equal(&x.zeros_like()).cast(DType::I64);
        let axes = axes_or_all(x, axes);
        if keepdims {
            nz.sum_keepdims(&axes)
        } else {
            nz.sum(&axes)
        }
    })
}

/// `jnp.bincount` with a static `length`: how often each value
/// `0..length` occurs in the 1-D integer array `x`, or the sum of
/// `weights` there. As in JAX, negative values count in bin 0 and values
/// from `length` on are dropped.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::bincount;
/// let x = Tensor::from_vec(vec![-1i64, -1, 1, 3, 10], &[5])?;
/// let c = (|x: &Var| bincount(x, None, 5)).eval(&x)?;
/// assert_eq!(c.to_vec::<i64>()?, vec![2, 1, 0, 1, 0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn bincount(x: &Var, weights: Option<&Var>, length: usize) -> Var {
    run("bincount", x, || {
        if x.rank() != 1 || x.dtype().is_float() {
            return Err(Error::invalid(
                "bincount",
                "x",
                format!(
                    "is {:?} of shape {:?}; bincount takes a 1-D integer array",
                    x.dtype(),
                    x.shape()
                ),
            ));
        }
        same_shape_weights("bincount", x, weights)?;
        let x = x.cast(DType::I64);
        let w = match weights {
            Some(w) => w.clone(),
            None => x.ones_like(),
        };
        if length == 0 {
            return Ok(w.reshape(&[-1]).slice_axis(0, Some(0), Some(0), 1));
        }
        let kept = x.lt(&x.full_like(length as f64));
        let w = where_(&kept, &w, &w.zeros_like());
        let idx = x.clip(&x.zeros_like(), &x.full_like(length.saturating_sub(1) as f64));
        Ok(w.scatter_add(&idx, 0, length))
    })
}

// ------------------------------------------------- selections of static size

/// `x` with its values at `target` (`i64`, one per value) written into
/// `size` slots that start as `fill`; targets outside `0..size` are
/// dropped (JAX's `.at[...].set(..., mode="drop")`).
fn scatter_into(values: &Var, target: &Var, size: usize, fill: &Var) -> Var {
    fill.broadcast_to(&[size]).at(crate::ix![target]).set(values)
}

/// For each element of the flat mask `m` (`bool`), its slot among the
/// selected ones, or `size` (dropped) when it is not selected or past
/// `size`.
fn slots(m: &Var, size: usize) -> Var {
    let pos = m.cumsum(0, false) - m.ones_like().cast(DType::I64);
    let past = pos.lt(&pos.full_like(size as f64));
    where_(&m.logical_and(&past), &pos, &pos.full_like(size as f64))
}

/// `jnp.nonzero` with JAX's static `size`: for each axis of `x`, the
/// coordinates (`i64`) of the first `size` nonzero elements in row-major
/// order, padded with `fill_value` when there are fewer.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::nonzero;
/// let x = Tensor::from_vec(vec![0.0, 2.0, 0.0, 3.0, 4.0, 0.0], &[2, 3])?;
/// let ij = (|x: &Var| nonzero(x, 4, 0)).eval(&x)?;
/// assert_eq!(ij[0].to_vec::<i64>()?, vec![0, 1, 1, 0]);
/// assert_eq!(ij[1].to_vec::<i64>()?, vec![1, 0, 1, 0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn nonzero(x: &Var, size: usize, fill_value: i64) -> Vec<Var> {
    run_many("nonzero", x, x.rank().max(1), || {
        let m = x.not_equal(&x.zeros_like()).flatten();
        let target = slots(&m, size);
        let fill = x.constant_like(Tensor::from_vec(vec![fill_value], &[])?);
        let n = m.shape()[0];
        let flat = iota_dtype(&[n], 0, DType::I64);
        let mut stride = 1usize;
        let mut coords = Vec::with_capacity(x.rank());
        for &d in x.shape().iter().rev() {
            let c = crate::lax::div(&flat, &flat.full_like(stride as f64));
            let c = c.rem(&c.full_like(d as f64));
            coords.push(scatter_into(&c, &target, size, &fill));
            stride = dim_mul(stride, d)?;
        }
        coords.reverse();
        if coords.is_empty() {
            // A scalar: NumPy treats it as 1-D.
            coords.push(scatter_into(&flat, &target, size, &fill));
        }
        Ok(coords)
    })
}

/// `jnp.flatnonzero` with a static `size`: the flat indices of the first
/// `size` nonzero elements, padded with `fill_value`.
pub fn flatnonzero(x: &Var, size: usize, fill_value: i64) -> Var {
    as_op("flatnonzero", || nonzero(&x.flatten(), size, fill_value).swap_remove(0))
}

/// `jnp.argwhere` with a static `size`: the coordinates of the first
/// `size` nonzero elements as rows of `[size, rank]`, padded with
/// `fill_value`.
pub fn argwhere(x: &Var, size: usize, fill_value: i64) -> Var {
    as_op("argwhere", || {
        let x = if x.rank() == 0 { x.reshape(&[1]) } else { x.clone() };
        let coords = nonzero(&x, size, fill_value);
        stack(&coords.iter().collect::<Vec<_>>(), 1)
    })
}

/// `jnp.unique` with a static `size`: the sorted distinct values of `x`
/// (flattened; NaNs count as one value, as JAX's `equal_nan`), the first
/// `size` of them, padded with `fill_value` (by default the smallest
/// value, as JAX).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::unique;
/// let x = Tensor::from_vec(vec![3.0, 1.0, 3.0, 2.0, 1.0], &[5])?;
/// let u = (|x: &Var| unique(x, 5, None)).eval(&x)?;
/// assert_eq!(u.to_vec::<f64>()?, vec![1.0, 2.0, 3.0, 1.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn unique(x: &Var, size: usize, fill_value: Option<f64>) -> Var {
    if x.dtype() == DType::Bool {
        // In i64 (the scatter adds no bools), back to bool.
        return as_op("unique", || unique(&x.cast(DType::I64), size, fill_value).cast(DType::Bool));
    }
    run("unique", x, || {
        let s = x.flatten().sort(0, false);
        let n = s.shape()[0];
        if n == 0 {
            return Ok(x
                .full_like(fill_value.unwrap_or(0.0))
                .reshape(&[0])
                .pad(&[(0, size)], fill_value.unwrap_or(0.0)));
        }
        let (hi, lo) = (s.slice_axis(0, Some(1), None, 1), s.slice_axis(0, None, Some(-1), 1));
        let differ = hi.not_equal(&lo);
        let differ = if s.dtype().is_float() {
            differ.logical_and(&isnan(&hi).logical_and(&isnan(&lo)).logical_not())
        } else {
            differ
        };
        // The first value is always new (`v == v or v is NaN`: true).
        let head = s.slice_axis(0, Some(0), Some(1), 1);
        let new = concatenate(&[&head.equal(&head).logical_or(&isnan(&head)), &differ], 0);
        let smallest = head.reshape(&[]);
        let fill = fill_value.map_or_else(|| smallest.clone(), |v| smallest.full_like(v));
        Ok(scatter_into(&s, &slots(&new, size), size, &fill))
    })
}

/// `jnp.histogram` with `bins` equal bins over `range` (by default the
/// smallest and largest value; an empty range widened by `±0.5`): the
/// counts (or sums of `weights`, of `x`'s shape), `f64`, and the `bins +
/// 1` edges, JAX's `linspace` (the edges differentiate through the range,
/// as JAX's). The last bin includes its right edge; values outside the
/// range are not counted.
pub fn histogram(
    x: &Var,
    bins: usize,
    range: Option<(f64, f64)>,
    weights: Option<&Var>,
) -> (Var, Var) {
    let out = run_many("histogram", x, 2, || {
        if bins == 0 {
            return Err(Error::invalid("histogram", "bins", "needs at least one bin"));
        }
        same_shape_weights("histogram", x, weights)?;
        let x = floated(x).flatten();
        let (lo, hi) = match range {
            Some((lo, hi)) if lo <= hi => (x.scalar_like(lo), x.scalar_like(hi)),
            Some((lo, hi)) => {
                return Err(Error::invalid(
                    "histogram",
                    "range",
                    format!("({lo}, {hi}): the lower bound exceeds the upper"),
                ))
            }
            None => (x.min_all(), x.max_all()),
        };
        // An empty range is widened by 1/2 each way; the edges are JAX's
        // linspace, `lo (1 - t) + hi t` (no overflow of `hi - lo`) with
        // the last exactly `hi`.
        let same = lo.equal(&hi);
        let (lo, hi) = (where_(&same, &(&lo - 0.5), &lo), where_(&same, &(&hi + 0.5), &hi));
        // (`t = i · (1 / bins)`, as XLA computes `i / bins` and NumPy its
        // steps: 0.6000000000000001 for 3/5, the edge NumPy and JAX have.)
        let t = iota(&[bins], 0) * (1.0 / bins as f64);
        let inner = &lo * (1.0 - &t) + &hi * &t;
        let edges = concatenate(&[&inner, &hi.reshape(&[1])], 0);
        let w = match weights {
            Some(w) => floated(w).flatten(),
            None => x.ones_like(),
        };
        let idx = searchsorted(&edges, &x, Side::Right);
        let last = x.equal(&edges.slice_axis(0, Some(-1), None, 1).reshape(&[]));
        let idx = where_(&last, &idx.full_like(bins as f64), &idx);
        // Bin k + 1 of the search is histogram bin k; 0 and bins + 1 are outside.
        let inside = idx.ge(&idx.ones_like()).logical_and(&idx.le(&idx.full_like(bins as f64)));
        let w = where_(&inside, &w, &w.zeros_like());
        let k =
            (&idx - &idx.ones_like()).clip(&idx.zeros_like(), &idx.full_like(bins as f64 - 1.0));
        Ok(vec![w.scatter_add(&k, 0, bins), edges])
    });
    let mut out = out.into_iter();
    let counts = out.next().unwrap_or_else(|| x.clone());
    let edges = out.next().unwrap_or_else(|| counts.clone());
    (counts, edges)
}

/// `jnp.digitize`: the index of the bin of `bins` (1-D, increasing or
/// decreasing) each value of `x` falls in; `right` makes bins closed on
/// the right instead of the left.
pub fn digitize(x: &Var, bins: &Var, right: bool) -> Var {
    run("digitize", x, || {
        if bins.rank() != 1 {
            return Err(Error::invalid(
                "digitize",
                "bins",
                format!("has shape {:?}; bins must be 1-D", bins.shape()),
            ));
        }
        let n = concrete("digitize", bins, 0)?;
        let side = if right { Side::Left } else { Side::Right };
        if n == 0 {
            return Ok(x.zeros_like().cast(DType::I64));
        }
        let up = searchsorted(bins, x, side);
        let down = searchsorted(&bins.flip(&[0]), x, side);
        let down = &down.full_like(n as f64) - &down;
        let first = bins.slice_axis(0, Some(0), Some(1), 1).reshape(&[]);
        let last = bins.slice_axis(0, Some(-1), None, 1).reshape(&[]);
        Ok(where_(&last.ge(&first), &up, &down))
    })
}

/// `jnp.select`: where `conditions[k]` first holds, `choices[k]`;
/// `default` where none does (all broadcast together; a float default
/// makes integer choices `f64`, as in JAX).
pub fn select(conditions: &[&Var], choices: &[&Var], default: f64) -> Var {
    let Some(first) = choices.first() else {
        let tracer = anvil_core::trace::current_or_detached();
        tracer.record(Error::invalid("select", "choicelist", "needs at least one choice"));
        return tracer.poisoned();
    };
    run("select", first, || {
        if conditions.len() != choices.len() {
            return Err(Error::invalid(
                "select",
                "condlist",
                format!("{} conditions for {} choices", conditions.len(), choices.len()),
            ));
        }
        // The default is a float literal: with integer choices, f64 (JAX's
        // weak typing).
        let mut out = floated(first).scalar_like(default);
        for (c, v) in conditions.iter().zip(choices).rev() {
            out = where_(c, v, &out);
        }
        Ok(out)
    })
}

/// `jnp.clip` with scalar bounds (either may be absent):
/// `minimum(maximum(x, lo), hi)`, JAX's formulation and derivative. The
/// bounds are float literals, so an integer `x` with a bound is clipped
/// in `f64`, as JAX's `jnp.clip(x, 0.5, 3.0)` (clip integers by integer
/// bounds with [`LaxExt::clip`]).
pub fn clip(x: &Var, lo: Option<f64>, hi: Option<f64>) -> Var {
    as_op("clip", || {
        let x = if lo.is_some() || hi.is_some() { floated(x) } else { x.clone() };
        let y = lo.map_or_else(|| x.clone(), |lo| x.maximum(&x.scalar_like(lo)));
        hi.map_or(y.clone(), |hi| y.minimum(&y.scalar_like(hi)))
    })
}

/// `jnp.allclose`: whether every pair is [`isclose`] (a `bool` scalar).
pub fn allclose(a: &Var, b: &Var, rtol: f64, atol: f64) -> Var {
    as_op("allclose", || isclose(a, b, rtol, atol).all_all())
}

/// `jnp.array_equal`: whether `a` and `b` have one shape and equal values
/// (a `bool` scalar; `false` for different shapes).
pub fn array_equal(a: &Var, b: &Var) -> Var {
    as_op("array_equal", || {
        if a.shape() != b.shape() {
            return a.scalar_like(0.0).cast(DType::Bool);
        }
        a.equal(b).all_all()
    })
}

/// `jnp.take_along_axis`: `x` gathered along `axis` by `indices` (`i64`,
/// of `x`'s rank; its other axes broadcast against `x`'s). Negative
/// indices count from the end; indices out of range read JAX's fill
/// value (NaN for floats, `i64::MIN` for integers, `true` for `bool`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::take_along_axis;
/// let x = Tensor::from_vec(vec![10.0, 30.0, 20.0, 60.0, 40.0, 50.0], &[2, 3])?;
/// let i = Tensor::from_vec(vec![2i64, -1], &[2, 1])?;
/// let y = (|x: &Var, i: &Var| take_along_axis(x, i, 1)).eval((&x, &i))?;
/// assert_eq!(y.to_vec::<f64>()?, vec![20.0, 50.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn take_along_axis(x: &Var, indices: &Var, axis: i64) -> Var {
    run("take_along_axis", x, || {
        if indices.rank() != x.rank() || indices.dtype().is_float() {
            return Err(Error::shape(
                "take_along_axis",
                &[x.shape(), indices.shape()],
                format!(
                    "indices are {:?} of shape {:?}; they must be integers of x's rank ({})",
                    indices.dtype(),
                    indices.shape(),
                    x.rank()
                ),
            ));
        }
        let ax = normalize_axis("take_along_axis", axis, x.shape(), "axis")?;
        let idx = indices.cast(DType::I64);
        let n = x.shape()[ax];
        let len =
            if is_symbolic(n) { dim_value(n).cast(DType::I64) } else { idx.scalar_like(n as f64) };
        let idx = where_(&idx.lt(&idx.zeros_like()), &(&idx + &len), &idx);
        // Out of range (after counting negatives from the end): JAX's fill.
        let valid = idx.ge(&idx.zeros_like()).logical_and(&idx.lt(&len));
        let last = &len - &len.ones_like();
        let idx = idx.clip(&idx.zeros_like(), &last.maximum(&last.zeros_like()));
        // The other axes broadcast: x to the index's sizes and back.
        let mut xs = Vec::with_capacity(x.rank());
        let mut is = Vec::with_capacity(x.rank());
        for (k, (&a, &b)) in x.shape().iter().zip(indices.shape()).enumerate() {
            let d = if k == ax {
                (a, b)
            } else if a == b || b == 1 {
                (a, a)
            } else if a == 1 {
                (b, b)
            } else {
                return Err(Error::shape(
                    "take_along_axis",
                    &[x.shape(), indices.shape()],
                    format!("axis {k} has size {a} in x and {b} in the indices"),
                ));
            };
            xs.push(d.0);
            is.push(d.1);
        }
        let xb = if xs == x.shape() { x.clone() } else { x.broadcast_to(&xs) };
        let ib = if is == idx.shape() { idx } else { idx.broadcast_to(&is) };
        let vb = if valid.shape() == is { valid } else { valid.broadcast_to(&is) };
        let taken = crate::lax::take_along_axis(&xb, &ib, ax);
        let fill = match taken.dtype() {
            DType::Bool => taken.ones_like(),
            DType::I64 => taken
                .constant_like(Tensor::from_vec(vec![i64::MIN], &[])?)
                .broadcast_to(taken.shape()),
            _ => taken.full_like(f64::NAN),
        };
        Ok(where_(&vb, &taken, &fill))
    })
}

// --------------------------------------------------------------- searching

/// Which insertion point [`searchsorted`] returns among equal values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The first: `a[i-1] < v <= a[i]`.
    Left,
    /// The last: `a[i-1] <= v < a[i]`.
    Right,
}

/// `jnp.searchsorted`: for each value of `v`, the index (`i64`) at which it
/// would be inserted into the sorted 1-D `a` to keep it sorted, NaNs
/// ordered last as in JAX's sort. A binary search of `ceil(log2(n + 1))`
/// steps, each one gather over all of `v`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::{searchsorted, Side};
/// let a = Tensor::from_vec(vec![1.0, 2.0, 2.0, 3.0], &[4])?;
/// let v = Tensor::from_vec(vec![0.0, 2.0, 2.5, 9.0], &[4])?;
/// let f = |a: &Var, v: &Var| vec![searchsorted(a, v, Side::Left), searchsorted(a, v, Side::Right)];
/// let out = f.eval((&a, &v))?;
/// assert_eq!(out[0].to_vec::<i64>()?, vec![0, 1, 3, 4]);
/// assert_eq!(out[1].to_vec::<i64>()?, vec![0, 3, 3, 4]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn searchsorted(a: &Var, v: &Var, side: Side) -> Var {
    run("searchsorted", a, || {
        if a.rank() != 1 {
            return Err(Error::invalid(
                "searchsorted",
                "a",
                format!("has shape {:?}; a must be 1-D", a.shape()),
            ));
        }
        let n = concrete("searchsorted", a, 0)?;
        let (a, v) =
            if a.dtype() == v.dtype() { (a.clone(), v.clone()) } else { (floated(a), floated(v)) };
        let a = a.stop_gradient();
        let v = v.stop_gradient();
        // `x < y` with NaN after everything (JAX's sort order).
        let less = |x: &Var, y: &Var| {
            if !x.dtype().is_float() {
                return x.lt(y);
            }
            x.lt(y).logical_or(&isnan(y).logical_and(&isnan(x).logical_not()))
        };
        let mut lo = v.zeros_like().cast(DType::I64);
        let mut hi = lo.full_like(n as f64);
        let steps = usize::BITS - n.leading_zeros();
        for _ in 0..steps {
            let active = lo.lt(&hi);
            let mid = (&lo + &hi).floor_halve();
            let at = a
                .take(
                    &mid.clip(&mid.zeros_like(), &mid.full_like(n.saturating_sub(1) as f64))
                        .flatten(),
                    0,
                )
                .reshape(&as_i64(v.shape()));
            // Left: go right while a[mid] < v; right: while a[mid] <= v.
            let right = match side {
                Side::Left => less(&at, &v),
                Side::Right => less(&v, &at).logical_not(),
            };
            let step_lo = active.logical_and(&right);
            let step_hi = active.logical_and(&right.logical_not());
            lo = where_(&step_lo, &(&mid + &mid.ones_like()), &lo);
            hi = where_(&step_hi, &mid, &hi);
        }
        Ok(lo)
    })
}

/// Integer halving for [`searchsorted`]'s midpoints (non-negative values).
trait FloorHalve {
    fn floor_halve(&self) -> Var;
}

impl FloorHalve for Var {
    fn floor_halve(&self) -> Var {
        crate::lax::div(self, &self.full_like(2.0))
    }
}

/// `jnp.interp`: the piecewise-linear interpolant through `(xp, fp)`
/// (`xp` increasing, 1-D) at `x`; outside `xp`'s range, `left` and `right`
/// (default `fp[0]` and `fp[-1]`). JAX's formulation, so its derivatives
/// (in `x`, `xp` and `fp`) are JAX's.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::interp;
/// let xp = Tensor::from_vec(vec![0.0, 1.0, 2.0], &[3])?;
/// let fp = Tensor::from_vec(vec![0.0, 10.0, 0.0], &[3])?;
/// let x = Tensor::from_vec(vec![-1.0, 0.5, 1.5, 3.0], &[4])?;
/// let y = (|x: &Var, xp: &Var, fp: &Var| interp(x, xp, fp, None, None)).eval((&x, &xp, &fp))?;
/// assert_eq!(y.to_vec::<f64>()?, vec![0.0, 5.0, 5.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn interp(x: &Var, xp: &Var, fp: &Var, left: Option<f64>, right: Option<f64>) -> Var {
    run("interp", x, || {
        if xp.rank() != 1 || xp.shape() != fp.shape() {
            return Err(Error::shape(
                "interp",
                &[xp.shape(), fp.shape()],
                format!("xp {:?} and fp {:?} must be 1-D of one size", xp.shape(), fp.shape()),
            ));
        }
        let n = concrete("interp", xp, 0)? as f64;
        let (x, xp, fp) = (floated(x), floated(xp), floated(fp));
        if n < 2.0 {
            // One knot (JAX: fp[0] everywhere); none is an error of `take`.
            let f0 = fp.index_axis(0, 0).broadcast_to(x.shape());
            let x0 = xp.index_axis(0, 0);
            let f = left.map_or(f0.clone(), |v| where_(&x.lt(&x0), &x.full_like(v), &f0));
            return Ok(right.map_or(f.clone(), |v| where_(&x.gt(&x0), &x.full_like(v), &f)));
        }
        let i = searchsorted(&xp, &x, Side::Right);
        let i = i.clip(&i.ones_like(), &i.full_like((n - 1.0).max(1.0))).flatten();
        let im = &i - &i.ones_like();
        let shape = as_i64(x.shape());
        let at = |t: &Var, idx: &Var| t.take(idx, 0).reshape(&shape);
        let (f0, f1, x0, x1) = (at(&fp, &im), at(&fp, &i), at(&xp, &im), at(&xp, &i));
        let (df, dx, delta) = (&f1 - &f0, &x1 - &x0, &x - &x0);
        let eps = f64::EPSILON * f64::EPSILON / 2.0;
        let dx0 = dx.abs().le(&dx.full_like(eps));
        let f = where_(&dx0, &f0, &(&f0 + &(&delta / &where_(&dx0, &dx.ones_like(), &dx)) * &df));
        let first = |t: &Var| t.slice_axis(0, Some(0), Some(1), 1).reshape(&[]);
        let last = |t: &Var| t.slice_axis(0, Some(-1), None, 1).reshape(&[]);
        let lv = left.map_or_else(|| first(&fp).broadcast_to(x.shape()), |v| x.full_like(v));
        let rv = right.map_or_else(|| last(&fp).broadcast_to(x.shape()), |v| x.full_like(v));
        let f = where_(&x.lt(&first(&xp)), &lv, &f);
        Ok(where_(&x.gt(&last(&xp)), &rv, &f))
    })
}

// ------------------------------------------------- polynomials and signals

/// `jnp.polyval`: the polynomial with coefficients `p` (1-D, highest power
/// first) at `x`, by Horner's rule (of integers: integer, as JAX's).
pub fn polyval(p: &Var, x: &Var) -> Var {
    run("polyval", x, || {
        if p.rank() != 1 {
            return Err(Error::invalid(
                "polyval",
                "p",
                format!("has shape {:?}; p must be 1-D", p.shape()),
            ));
        }
        let n = concrete("polyval", p, 0)?;
        let (p, x) = crate::api::promoted(p, x);
        let mut y = x.zeros_like();
        for k in 0..n {
            y = &y * &x + p.index_axis(0, k as i64);
        }
        Ok(y)
    })
}

/// How much of a full convolution [`convolve`] returns (NumPy's modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvolveMode {
    /// Every overlap: `n + m - 1` values.
    Full,
    /// The middle `max(n, m)` values.
    Same,
    /// Only complete overlaps: `max(n, m) - min(n, m) + 1` values.
    Valid,
}

/// `jnp.convolve` of two 1-D values: `out[k] = Σ_j a[k - j] v[j]`. A
/// gather of the windows of the zero-padded longer operand and one
/// matrix–vector product.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::numpy::{convolve, ConvolveMode};
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
/// let v = Tensor::from_vec(vec![0.0, 1.0, 0.5], &[3])?;
/// let y = (|a: &Var, v: &Var| convolve(a, v, ConvolveMode::Full)).eval((&a, &v))?;
/// assert_eq!(y.to_vec::<f64>()?, vec![0.0, 1.0, 2.5, 4.0, 1.5]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn convolve(a: &Var, v: &Var, mode: ConvolveMode) -> Var {
    run("convolve", a, || {
        if a.rank() != 1 || v.rank() != 1 {
            return Err(Error::shape(
                "convolve",
                &[a.shape(), v.shape()],
                "convolve takes two 1-D values".to_string(),
            ));
        }
        let (n, m) = (concrete("convolve", a, 0)?, concrete("convolve", v, 0)?);
        if n == 0 || m == 0 {
            return Err(Error::shape(
                "convolve",
                &[a.shape(), v.shape()],
                "an operand is empty".to_string(),
            ));
        }
        // Commutative: slide the shorter kernel over the longer signal.
        let (sig, ker, n, m) = if n >= m { (a, v, n, m) } else { (v, a, m, n) };
        let (start, len) = match mode {
            ConvolveMode::Full => (0, n + m - 1),
            ConvolveMode::Same => ((m - 1) / 2, n),
            ConvolveMode::Valid => (m - 1, n - m + 1),
        };
        // out[k] = Σ_j padded[k + start + m - 1 - j] ker[j], padded = [0; m-1] ++ sig ++ [0; m-1].
        let padded = floated(sig).pad(&[(m - 1, m - 1)], 0.0);
        let idx: Vec<i64> =
            (0..len).flat_map(|k| (0..m).map(move |j| (k + start + m - 1 - j) as i64)).collect();
        let idx = sig.constant_like(Tensor::from_vec(idx, &[len * m])?);
        let windows = padded.take(&idx, 0).reshape(&[len as i64, m as i64]);
        Ok(windows.matmul(&floated(ker)))
    })
}

/// `jnp.correlate` of two 1-D values: `out[k] = Σ_j a[k + j] v[j]` (in
/// the `Valid` mode; [`convolve`] of `a` with `v` reversed).
pub fn correlate(a: &Var, v: &Var, mode: ConvolveMode) -> Var {
    as_op("correlate", || convolve(a, &v.flip(&[0]), mode))
}

/// `jnp.trapezoid`: the integral of `y` along `axis` by the trapezoidal
/// rule, at sample points `x` (1-D along the axis, or `y`'s shape) or,
/// without them, spaced `dx` apart.
pub fn trapezoid(y: &Var, x: Option<&Var>, dx: f64, axis: i64) -> Var {
    run("trapezoid", y, || {
        let ax = normalize_axis("trapezoid", axis, y.shape(), "axis")? as i64;
        let y = floated(y);
        let mid = (y.slice_axis(ax, Some(1), None, 1) + y.slice_axis(ax, None, Some(-1), 1)) * 0.5;
        Ok(match x {
            None => mid.sum(&[ax]) * dx,
            Some(x) => {
                let x = floated(x);
                let x = if x.rank() == 1 && y.rank() > 1 {
                    let mut along = vec![1i64; y.rank()];
                    along[ax as usize] = -1;
                    x.reshape(&along)
                } else {
                    x
                };
                let d = diff(&x, 1, if x.rank() == 1 { 0 } else { ax });
                (&mid * &d).sum(&[ax])
            }
        })
    })
}
