//! Indexing by traced integers: `dynamic_slice`, `dynamic_update_slice`,
//! the general `gather` and `scatter` of `jax.lax` (XLA's dimension
//! numbers, so NumPy-style advanced indexing lowers to them), and
//! `lax.pad` with interior and negative padding.
//!
//! All are composites. A gather computes, for every result element, the
//! flat position of the operand element it reads — integer arithmetic on
//! the traced start indices, `iota`s and clamps — and reads them with one
//! `take` from the flattened operand; a scatter adds its updates with one
//! `scatter_add` at positions computed the same way. Both inherit `take`'s
//! and `scatter_add`'s batching (batched indices, batched operand, both),
//! their linearity and their transposes (a gather transposes to a
//! scatter-add and back), with no rules of their own. Index clamping is
//! JAX's: a start index is clamped so that the whole slice fits (`Clip`),
//! or, in `FillOrDrop` mode, a slice that would not fit reads the fill
//! value (a gather) or is dropped (a scatter).

use anvil_core::shape::{
    dim_add, dim_mul, dim_sub, fmt_dim, fmt_dims, is_symbolic, require_at_least, require_equal,
};
use anvil_core::{DType, DimSize, Error, Scalar, Tensor, Var};

use crate::api::{fail, VarExt};
use crate::constant::{Full, Iota};

/// `0, 1, ...` along axis `axis` of a rank-`rank` `i64` value with size 1
/// on every other axis.
fn iota_along(like: &Var, rank: usize, axis: usize, n: usize) -> Var {
    let mut shape = vec![1; rank];
    shape[axis] = n;
    like.tracer().apply(Box::new(Iota { shape, axis, dtype: DType::I64 }), &[])
}

/// An `i64` scalar of `like`'s trace: a size, or a symbolic dimension's
/// value at the call.
pub(crate) fn int(like: &Var, v: usize) -> Var {
    if is_symbolic(v) {
        return like.tracer().apply(Box::new(DimSize { dim: v, dtype: DType::I64 }), &[]);
    }
    let value = Scalar::I64(i64::try_from(v).unwrap_or(i64::MAX));
    like.tracer().apply(Box::new(Full { shape: vec![], value }), &[])
}

/// `a & b` for bools.
fn and(a: &Var, b: &Var) -> Var {
    a.select(b, &a.full_like(0.0))
}

/// The start indices of a dynamic slice: one `i64` scalar per axis.
fn check_starts(op: &str, x: &Var, starts: &[&Var]) -> Result<(), Error> {
    if starts.len() != x.rank() {
        return Err(Error::invalid(
            op,
            "start_indices",
            format!("{} start indices for an operand of shape {:?}", starts.len(), x.shape()),
        ));
    }
    for (i, s) in starts.iter().enumerate() {
        if s.rank() != 0 || s.dtype() != DType::I64 {
            return Err(Error::invalid(
                op,
                format!("start_indices[{i}]"),
                format!("must be an i64 scalar, not {}", s.ty()),
            ));
        }
    }
    Ok(())
}

/// A dynamic slice's start as JAX takes it: a negative one counts from
/// the end (`start + n`), then it is clamped so that the slice fits.
fn dynamic_start(start: &Var, n: usize, size: usize) -> Result<Var, Error> {
    let wrapped = start.lt(&int(start, 0)).select(&(start + int(start, n)), start);
    clamp_start(&wrapped, n, size)
}

/// `start` clamped to `[0, n - size]` (XLA's clamping: the slice fits).
fn clamp_start(start: &Var, n: usize, size: usize) -> Result<Var, Error> {
    Ok(start.maximum(&int(start, 0)).minimum(&int(start, dim_sub(n, size)?)))
}

/// Checks that a slice of `sizes` fits in `x` (for a symbolic axis, a
/// constraint checked when a call binds it).
fn check_fits(op: &str, x: &Var, sizes: &[usize], what: &str) -> Result<(), Error> {
    let misfit = || {
        let msg = format!("{what} must fit in the operand's shape {}", fmt_dims(x.shape()));
        Error::shape(op, &[x.shape(), sizes], msg)
    };
    if sizes.len() != x.rank() {
        return Err(misfit());
    }
    for (&s, &n) in sizes.iter().zip(x.shape()) {
        require_at_least(op, n, s, "shape").map_err(|_| misfit())?;
    }
    Ok(())
}

/// The slice of `operand` of shape `sizes` starting at traced indices
/// `starts` (one `i64` scalar per axis, a negative one counting from the
/// end), each clamped so that the slice fits (`jax.lax.dynamic_slice`).
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// // x[i:i+2] of a [5] vector: i = 4 is clamped to 3, i = -1 means 4 (then 3).
/// let f = |x: &Var, i: &Var| anvil_ops::lax::dynamic_slice(x, &[i], &[2]);
/// let g = trace(&f, (&Tensor::zeros(&[5])?, &Tensor::scalar(4i64)))?;
/// assert_eq!(g.output_types()[0].shape(), &[2]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// Errors (recorded in the trace): a start index that is not an `i64`
/// scalar, a count of indices or sizes other than the rank, a size larger
/// than its axis.
pub fn dynamic_slice(operand: &Var, starts: &[&Var], sizes: &[usize]) -> Var {
    let op = "dynamic_slice";
    let checked = check_starts(op, operand, starts)
        .and_then(|()| check_fits(op, operand, sizes, &format!("slice_sizes {}", fmt_dims(sizes))));
    if let Err(e) = checked {
        return fail(operand, e);
    }
    let mut x = operand.clone();
    for (axis, (&size, start)) in sizes.iter().zip(starts).enumerate() {
        let n = operand.shape()[axis];
        if size == n {
            continue;
        }
        match dynamic_start(start, n, size) {
            Ok(s) => x = x.take(&(iota_along(start, 1, 0, size) + s), axis as i64),
            Err(e) => return fail(operand, e),
        }
    }
    x
}

/// `operand` with `update` written at traced indices `starts` (negative
/// ones counting from the end), each clamped so that the update fits (`jax.lax.dynamic_update_slice`).
/// Differentiable in both; the update is placed by `scatter_add`s, the
/// rest kept by a `select`.
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// // [0, 0, 0, 0] with [1, 2] written at -7 (-7 + 4 = -3, clamped to 0): [1, 2, 0, 0].
/// let f = |x: &Var, u: &Var, i: &Var| anvil_ops::lax::dynamic_update_slice(x, u, &[i]);
/// let args = (&Tensor::zeros(&[4])?, &Tensor::zeros(&[2])?, &Tensor::scalar(-7i64));
/// assert_eq!(trace(&f, args)?.output_types()[0].shape(), &[4]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// Errors (recorded in the trace): as [`dynamic_slice`], an update of
/// another dtype or rank, or larger than the operand.
pub fn dynamic_update_slice(operand: &Var, update: &Var, starts: &[&Var]) -> Var {
    let op = "dynamic_update_slice";
    let what = format!("the update ({})", update.ty());
    let checked = check_starts(op, operand, starts).and_then(|()| {
        if update.dtype() == operand.dtype() {
            check_fits(op, operand, update.shape(), &what)
        } else {
            let msg = format!("{what} must have the operand's dtype {}", operand.dtype());
            Err(Error::shape(op, &[operand.shape(), update.shape()], msg))
        }
    });
    if let Err(e) = checked {
        return fail(operand, e);
    }
    let rank = operand.rank();
    let mut placed = update.clone();
    let mut inside: Option<Var> = None;
    for (axis, start) in starts.iter().enumerate() {
        let (n, u) = (operand.shape()[axis], update.shape()[axis]);
        if u == n {
            continue;
        }
        let s = match dynamic_start(start, n, u) {
            Ok(s) => s,
            Err(e) => return fail(operand, e),
        };
        placed = placed.scatter_add(&(iota_along(start, 1, 0, u) + &s), axis as i64, n);
        let pos = iota_along(start, rank, axis, n);
        let here = and(&pos.ge(&s), &pos.lt(&(&s + int(start, u))));
        inside = Some(match inside {
            Some(m) => and(&m, &here),
            None => here,
        });
    }
    match inside {
        Some(m) => m.select(&placed, operand),
        None => update.clone(),
    }
}

/// How a gather or scatter treats start indices whose slice would not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GatherMode {
    /// Clamp the start so that the slice fits (JAX's `"clip"`; also what
    /// `"promise_in_bounds"` does here).
    Clip,
    /// A gather reads the fill value for the whole slice; a scatter drops
    /// the whole update window (JAX's `"fill"`/`"drop"`, its default).
    FillOrDrop,
}

/// XLA's dimension numbers of a gather (`jax.lax.GatherDimensionNumbers`),
/// with the index vector in the last axis of the indices (as JAX).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GatherDimensionNumbers {
    /// The result axes that hold the slice's axes (sorted).
    pub offset_dims: Vec<usize>,
    /// Operand axes of slice size 1 that the result drops.
    pub collapsed_slice_dims: Vec<usize>,
    /// For each component of an index vector, the operand axis it starts.
    pub start_index_map: Vec<usize>,
    /// Operand axes paired with `start_indices_batching_dims` (slice size 1, dropped).
    pub operand_batching_dims: Vec<usize>,
    /// Axes of the indices paired with `operand_batching_dims`.
    pub start_indices_batching_dims: Vec<usize>,
}

/// XLA's dimension numbers of a scatter (`jax.lax.ScatterDimensionNumbers`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScatterDimensionNumbers {
    /// The update axes that hold the window's axes (sorted).
    pub update_window_dims: Vec<usize>,
    /// Operand axes of window size 1 that the updates lack.
    pub inserted_window_dims: Vec<usize>,
    /// For each component of an index vector, the operand axis it starts.
    pub scatter_dims_to_operand_dims: Vec<usize>,
    /// Operand axes paired with `scatter_indices_batching_dims`.
    pub operand_batching_dims: Vec<usize>,
    /// Axes of the indices paired with `operand_batching_dims`.
    pub scatter_indices_batching_dims: Vec<usize>,
}

/// The common description of a gather's result or a scatter's updates
/// against the operand: which of its axes are the window's (and which
/// operand axis each is), which are the indices' batch axes, and where
/// each start comes from.
struct Layout<'a> {
    op: &'static str,
    /// The result's (gather) or the updates' (scatter) shape.
    shape: Vec<usize>,
    /// Its window axes, in order.
    window: &'a [usize],
    /// Operand axes that have no window axis (size 1).
    dropped: &'a [usize],
    starts_map: &'a [usize],
    operand_batching: &'a [usize],
    indices_batching: &'a [usize],
    /// The window size on each operand axis.
    sizes: Vec<usize>,
}

impl Layout<'_> {
    /// The batch axes (the non-window ones) of the result or the updates.
    fn batch_axes(&self) -> Vec<usize> {
        (0..self.shape.len()).filter(|a| !self.window.contains(a)).collect()
    }

    /// The operand axes that have a window axis, in order.
    fn window_operand_axes(&self, rank: usize) -> Vec<usize> {
        (0..rank)
            .filter(|d| !self.dropped.contains(d) && !self.operand_batching.contains(d))
            .collect()
    }

    /// Per element of `self.shape`: the flat operand position it reads or
    /// writes (clamped), and whether its start was in range (for `FillOrDrop`).
    fn positions(&self, operand: &[usize], indices: &Var) -> Result<(Var, Var), Error> {
        let rank = self.shape.len();
        let batch = self.batch_axes();
        let lift = |v: &Var| {
            // A value over the indices' batch axes, laid on the result's batch axes.
            let mut shape: Vec<i64> = vec![1; rank];
            for (b, &a) in batch.iter().enumerate() {
                shape[a] = v.shape()[b] as i64;
            }
            v.reshape(&shape)
        };
        let zero = int(indices, 0);
        let mut flat = zero.clone();
        let mut valid = zero.equal(&zero);
        let window_axes = self.window_operand_axes(operand.len());
        let mut stride = 1usize;
        for d in (0..operand.len()).rev() {
            let mut at = zero.clone();
            if let Some(k) = self.starts_map.iter().position(|&m| m == d) {
                let s = lift(&indices.index(-1, &[k as i64]).squeeze(&[-1]));
                let max = dim_sub(operand[d], self.sizes[d])?;
                valid = and(&valid, &and(&s.ge(&zero), &s.le(&int(indices, max))));
                at = clamp_start(&s, operand[d], self.sizes[d])?;
            }
            if let Some(i) = self.operand_batching.iter().position(|&m| m == d) {
                let b = batch[self.indices_batching[i]];
                at = at + iota_along(indices, rank, b, self.shape[b]);
            }
            if let Some(w) = window_axes.iter().position(|&m| m == d) {
                let a = self.window[w];
                at = at + iota_along(indices, rank, a, self.shape[a]);
            }
            flat = flat + at * int(indices, stride);
            stride = dim_mul(stride, operand[d])?;
        }
        Ok((flat.broadcast_to(&self.shape), valid))
    }

    /// Checks the dimension numbers against the operand and the indices.
    fn check(&self, operand: &[usize], indices: &[usize]) -> Result<(), Error> {
        let bad = |msg: String| Err(Error::shape(self.op, &[operand, indices], msg));
        let rank = operand.len();
        if indices.is_empty() || indices[indices.len() - 1] != self.starts_map.len() {
            return bad(format!(
                "the indices' last axis must hold {} start components",
                self.starts_map.len()
            ));
        }
        let all_in = |v: &[usize], r: usize| v.iter().all(|&a| a < r);
        if !all_in(self.starts_map, rank)
            || !all_in(self.dropped, rank)
            || !all_in(self.operand_batching, rank)
        {
            return bad("an axis of the dimension numbers is out of the operand's range".into());
        }
        if self.operand_batching.len() != self.indices_batching.len()
            || !all_in(self.indices_batching, indices.len() - 1)
        {
            return bad("operand and indices batching dims must pair up".into());
        }
        if self.window_operand_axes(rank).len() != self.window.len() {
            return bad("the window axes must be the operand axes not collapsed or batched".into());
        }
        let batch = self.batch_axes();
        if batch.len() != indices.len() - 1
            || batch
                .iter()
                .zip(indices)
                .any(|(&a, &n)| require_equal(self.op, self.shape[a], n, "indices").is_err())
        {
            return bad(format!(
                "the indices' batch axes {:?} do not match {:?}",
                &indices[..indices.len() - 1],
                self.shape
            ));
        }
        if self
            .sizes
            .iter()
            .zip(operand)
            .any(|(&s, &n)| require_at_least(self.op, n, s, "slice_sizes").is_err())
        {
            return bad(format!("window sizes {:?} larger than the operand", self.sizes));
        }
        Ok(())
    }
}

/// `jax.lax.gather`: slices of `operand` of `slice_sizes` at the start
/// indices in the last axis of `indices` (`i64`), laid out by the
/// dimension numbers. `fill` is the value of out-of-range slices in
/// `FillOrDrop` mode (`None`: NaN for floats, the smallest `i64` for
/// integers, as JAX).
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// use anvil_ops::lax::{gather, GatherDimensionNumbers, GatherMode};
/// // x[idx] for a vector x: collapse axis 0, start it from each index
/// // ([10, 11, 12] at [[2], [0], [5]], clipped: [12, 10, 12]).
/// let dn = GatherDimensionNumbers {
///     collapsed_slice_dims: vec![0],
///     start_index_map: vec![0],
///     ..Default::default()
/// };
/// let f = |x: &Var, i: &Var| gather(x, i, &dn, &[1], GatherMode::Clip, None);
/// let idx = Tensor::from_vec(vec![2i64, 0, 5], &[3, 1])?;
/// assert_eq!(trace(&f, (&Tensor::zeros(&[3])?, &idx))?.output_types()[0].shape(), &[3]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// Errors (recorded in the trace): indices that are not `i64`, dimension
/// numbers that do not fit the shapes, slice sizes larger than the operand.
pub fn gather(
    operand: &Var,
    indices: &Var,
    dn: &GatherDimensionNumbers,
    slice_sizes: &[usize],
    mode: GatherMode,
    fill: Option<f64>,
) -> Var {
    if indices.dtype() != DType::I64 {
        return fail(operand, Error::dtype("gather", "1 (indices)", indices.dtype(), "i64"));
    }
    if slice_sizes.len() != operand.rank() {
        let msg = format!("{} slice sizes for rank {}", slice_sizes.len(), operand.rank());
        return fail(operand, Error::shape("gather", &[operand.shape()], msg));
    }
    let batch_shape = &indices.shape()[..indices.rank().saturating_sub(1)];
    let window_sizes: Vec<usize> = (0..operand.rank())
        .filter(|d| !dn.collapsed_slice_dims.contains(d) && !dn.operand_batching_dims.contains(d))
        .map(|d| slice_sizes[d])
        .collect();
    let rank = batch_shape.len() + window_sizes.len();
    let mut shape = vec![0; rank];
    let (mut w, mut b) = (window_sizes.iter(), batch_shape.iter());
    for (a, s) in shape.iter_mut().enumerate() {
        let next = if dn.offset_dims.contains(&a) { w.next() } else { b.next() };
        *s = next.copied().unwrap_or(0);
    }
    let layout = Layout {
        op: "gather",
        shape,
        window: &dn.offset_dims,
        dropped: &dn.collapsed_slice_dims,
        starts_map: &dn.start_index_map,
        operand_batching: &dn.operand_batching_dims,
        indices_batching: &dn.start_indices_batching_dims,
        sizes: slice_sizes.to_vec(),
    };
    let collapsed_ok = dn
        .collapsed_slice_dims
        .iter()
        .chain(&dn.operand_batching_dims)
        .all(|&d| slice_sizes.get(d) == Some(&1));
    if !collapsed_ok || dn.offset_dims.iter().any(|&a| a >= rank) {
        let msg = "collapsed and batching axes need slice size 1; offset_dims must be result axes";
        return fail(operand, Error::shape("gather", &[operand.shape(), indices.shape()], msg));
    }
    let checked = layout.check(operand.shape(), indices.shape());
    let (flat, valid) = match checked.and_then(|()| layout.positions(operand.shape(), indices)) {
        Ok(p) => p,
        Err(e) => return fail(operand, e),
    };
    let got = operand.flatten().take(&flat, 0);
    match mode {
        GatherMode::Clip => got,
        GatherMode::FillOrDrop => {
            let fill = fill.map_or_else(
                || default_fill(operand.dtype()),
                |f| Scalar::F64(f).cast(operand.dtype()),
            );
            let fill = operand.constant_like(Tensor::from_scalar(fill));
            valid.select(&got, &fill)
        }
    }
}

/// JAX's fill of out-of-range gathers: NaN, or the smallest integer.
fn default_fill(dtype: DType) -> Scalar {
    match dtype {
        DType::I64 => Scalar::I64(i64::MIN),
        DType::Bool => Scalar::Bool(true),
        d => Scalar::F64(f64::NAN).cast(d),
    }
}

/// The layout of a scatter's updates.
fn scatter_layout<'a>(
    op: &'static str,
    operand: &Var,
    updates: &Var,
    dn: &'a ScatterDimensionNumbers,
) -> Result<Layout<'a>, Error> {
    let mut sizes = vec![1; operand.rank()];
    let window_operand: Vec<usize> = (0..operand.rank())
        .filter(|d| !dn.inserted_window_dims.contains(d) && !dn.operand_batching_dims.contains(d))
        .collect();
    if window_operand.len() != dn.update_window_dims.len()
        || dn.update_window_dims.iter().any(|&a| a >= updates.rank())
    {
        let msg =
            "update_window_dims must name one update axis per operand axis not inserted or batched";
        return Err(Error::shape(op, &[operand.shape(), updates.shape()], msg));
    }
    for (&d, &a) in window_operand.iter().zip(&dn.update_window_dims) {
        sizes[d] = updates.shape()[a];
    }
    Ok(Layout {
        op,
        shape: updates.shape().to_vec(),
        window: &dn.update_window_dims,
        dropped: &dn.inserted_window_dims,
        starts_map: &dn.scatter_dims_to_operand_dims,
        operand_batching: &dn.operand_batching_dims,
        indices_batching: &dn.scatter_indices_batching_dims,
        sizes,
    })
}

/// The updates summed into zeros of the operand's type at their flat
/// positions, the updates out of range dropped (`FillOrDrop`), and how
/// many updates land on each element.
fn scattered(
    operand: &Var,
    indices: &Var,
    updates: &Var,
    dn: &ScatterDimensionNumbers,
    mode: GatherMode,
    op: &'static str,
    count: bool,
) -> Result<(Var, Option<Var>), Error> {
    if indices.dtype() != DType::I64 {
        return Err(Error::dtype(op, "1 (indices)", indices.dtype(), "i64"));
    }
    if updates.dtype() != operand.dtype() {
        return Err(Error::dtype(
            op,
            "2 (updates)",
            updates.dtype(),
            format!("the operand's dtype ({})", operand.dtype()),
        ));
    }
    let layout = scatter_layout(op, operand, updates, dn)?;
    layout.check(operand.shape(), indices.shape())?;
    let (flat, valid) = layout.positions(operand.shape(), indices)?;
    let (u, ones) = match mode {
        GatherMode::Clip => (updates.clone(), updates.ones_like()),
        GatherMode::FillOrDrop => {
            let zero = updates.zeros_like();
            (valid.select(updates, &zero), valid.select(&updates.ones_like(), &zero))
        }
    };
    let n = operand.numel();
    let target: Vec<i64> = operand.shape().iter().map(|&d| d as i64).collect();
    let add = |v: &Var| v.flatten().scatter_add(&flat.flatten(), 0, n).reshape(&target);
    Ok((add(&u), count.then(|| add(&ones))))
}

/// `jax.lax.scatter_add`: `operand` plus `updates` summed at the windows
/// the indices start (repeated positions accumulate). Linear in the
/// operand and the updates.
///
/// Errors (recorded in the trace): as [`gather`], and updates of another dtype.
pub fn scatter_add(
    operand: &Var,
    indices: &Var,
    updates: &Var,
    dn: &ScatterDimensionNumbers,
    mode: GatherMode,
) -> Var {
    match scattered(operand, indices, updates, dn, mode, "scatter_add", false) {
        Ok((s, _)) => operand + &s,
        Err(e) => fail(operand, e),
    }
}

/// `jax.lax.scatter`: `operand` with the elements the updates land on
/// replaced by them. Where several updates land on one element, XLA
/// leaves the choice to the implementation; here the element is their
/// mean (for integers, rounded toward zero), which is deterministic and
/// equal to the update when the indices are unique.
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// use anvil_ops::lax::{scatter, GatherMode, ScatterDimensionNumbers};
/// // x.at[idx].set(u) for a vector: [0, 0, 0, 0] with 5 at 3 and 6 at 9
/// // (out of range: dropped) is [0, 0, 0, 5].
/// let dn = ScatterDimensionNumbers {
///     inserted_window_dims: vec![0],
///     scatter_dims_to_operand_dims: vec![0],
///     ..Default::default()
/// };
/// let f = |x: &Var, i: &Var, u: &Var| scatter(x, i, u, &dn, GatherMode::FillOrDrop);
/// let idx = Tensor::from_vec(vec![3i64, 9], &[2, 1])?;
/// let g = trace(&f, (&Tensor::zeros(&[4])?, &idx, &Tensor::zeros(&[2])?))?;
/// assert_eq!(g.output_types()[0].shape(), &[4]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// Errors (recorded in the trace): as [`scatter_add`].
pub fn scatter(
    operand: &Var,
    indices: &Var,
    updates: &Var,
    dn: &ScatterDimensionNumbers,
    mode: GatherMode,
) -> Var {
    match scattered(operand, indices, updates, dn, mode, "scatter", true) {
        Ok((sum, Some(count))) => {
            let zero = count.zeros_like();
            let hit = count.gt(&zero);
            let safe = hit.select(&count, &count.ones_like());
            // The mean of repeated updates (integers rounded toward zero).
            hit.select(&crate::lax::div(&sum, &safe), operand)
        }
        Ok((_, None)) => operand.clone(),
        Err(e) => fail(operand, e),
    }
}

/// `jax.lax.pad`: `config[i] = (low, high, interior)` for axis `i` —
/// `interior` copies of `padding_value` between neighbours, then `low`
/// before and `high` after (negative: that many elements removed).
/// `padding_value` is a scalar of the operand's dtype and is
/// differentiable like the operand.
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// use anvil_ops::VarExt;
/// // [1, 2, 3] with (-1, 2, 1) and value 0: [0, 2, 0, 3, 0, 0] (the first
/// // element removed, one 0 between neighbours, two after).
/// let f = |x: &Var| anvil_ops::lax::pad(x, &x.full_like(0.0).sum_all(), &[(-1, 2, 1)]);
/// assert_eq!(trace(&f, &Tensor::zeros(&[3])?)?.output_types()[0].shape(), &[6]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// Errors (recorded in the trace): a configuration per axis missing, a
/// padding value that is not a scalar of the operand's dtype, negative
/// padding that removes more than the axis has.
pub fn pad(operand: &Var, padding_value: &Var, config: &[(i64, i64, usize)]) -> Var {
    if config.len() != operand.rank() {
        let msg = format!("{} padding configs for rank {}", config.len(), operand.rank());
        return fail(operand, Error::shape("pad", &[operand.shape()], msg));
    }
    if padding_value.rank() != 0 || padding_value.dtype() != operand.dtype() {
        let msg = format!(
            "must be a scalar of the operand's dtype {}, not {}",
            operand.dtype(),
            padding_value.ty()
        );
        return fail(operand, Error::invalid("pad", "padding_value", msg));
    }
    for (axis, &(lo, hi, interior)) in config.iter().enumerate() {
        let n = operand.shape()[axis];
        let removed = lo.min(0).unsigned_abs().checked_add(hi.min(0).unsigned_abs());
        let fits = |d: usize| {
            let r = removed.and_then(|r| usize::try_from(r).ok()).filter(|&r| !is_symbolic(r));
            r.is_some_and(|r| require_at_least("pad", d, r, "padding_config").is_ok())
        };
        match dilated(n, interior) {
            Ok(d) if fits(d) => {}
            Ok(d) => {
                let msg = format!(
                    "padding ({lo}, {hi}, {interior}) of axis {axis} removes more than its {} elements",
                    fmt_dim(d)
                );
                return fail(operand, Error::shape("pad", &[operand.shape()], msg));
            }
            Err(e) => return fail(operand, e),
        }
    }
    let result = match padding_value.constant_value().and_then(|t| t.item().ok()) {
        Some(c) => padded(operand, config, c),
        None => padded(&operand.zeros_like(), config, 1.0)
            .and_then(|mask| Ok(padded(operand, config, 0.0)? + mask * padding_value)),
    };
    result.unwrap_or_else(|e| fail(operand, e))
}

/// The length of an axis of `n` elements with `interior` values between
/// neighbours: `n + (n - 1) interior` (a symbolic `n` must then be at
/// least 1, a recorded constraint).
fn dilated(n: usize, interior: usize) -> Result<usize, Error> {
    if n == 0 || interior == 0 {
        return Ok(n);
    }
    require_at_least("pad", n, 1, "operand")?;
    dim_add(n, dim_mul(dim_sub(n, 1)?, interior)?)
}

/// A dimension as a reshape or slice bound (a symbolic one as its handle).
pub(crate) fn bound(d: usize) -> i64 {
    i64::try_from(d).unwrap_or(i64::MAX)
}

/// `x` padded as [`pad`] with the constant `value`.
fn padded(x: &Var, config: &[(i64, i64, usize)], value: f64) -> Result<Var, Error> {
    let mut y = x.clone();
    for (axis, &(_, _, interior)) in config.iter().enumerate() {
        let n = y.shape()[axis];
        if interior == 0 || (!is_symbolic(n) && n < 2) {
            continue;
        }
        // [n] -> [n, 1 + interior] (value after each) -> [n (1 + interior)] -> cut the tail.
        let ax = axis as i64;
        let mut widths = vec![(0, 0); y.rank() + 1];
        widths[axis + 1] = (0, interior);
        let mut shape: Vec<i64> = y.shape().iter().map(|&d| bound(d)).collect();
        shape[axis] = bound(dim_mul(n, dim_add(interior, 1)?)?);
        let spread = y.unsqueeze(ax + 1).pad(&widths, value).reshape(&shape);
        y = spread.slice_axis(ax, Some(0), Some(bound(dilated(n, interior)?)), 1);
    }
    let widths: Vec<(usize, usize)> =
        config.iter().map(|&(lo, hi, _)| (lo.max(0) as usize, hi.max(0) as usize)).collect();
    if widths.iter().any(|&w| w != (0, 0)) {
        y = y.pad(&widths, value);
    }
    for (axis, &(lo, hi, _)) in config.iter().enumerate() {
        if lo < 0 || hi < 0 {
            // A negative stop counts from the end, on a symbolic axis too.
            let stop = (hi < 0).then_some(hi);
            y = y.slice_axis(axis as i64, Some(lo.saturating_neg().max(0)), stop, 1);
        }
    }
    Ok(y)
}
