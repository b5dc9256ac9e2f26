//! Shapes and all shape arithmetic.
//!
//! Every computation on dimensions — broadcasting, axis normalisation,
//! reshape inference, slicing, reduction shapes, matmul shapes — lives here
//! and nowhere else, so that symbolic dimensions (a dimension that is a
//! variable bound at call time) can later be introduced by changing this one
//! module. Ops call these helpers from their shape rules; the CPU backend
//! calls them to walk memory.

use crate::dtype::DType;
use crate::error::{Error, Result};
use std::fmt;

mod dim;
pub use dim::{
    collect_constraints, dim_add, dim_exact_div, dim_floordiv, dim_min, dim_mod, dim_mul,
    dim_numel, dim_of_number, dim_provably_at_least, dim_sub, dim_var, dim_vars, fmt_dim, fmt_dims,
    is_symbolic, is_symbolic_shape, is_valid_dim, require_at_least, require_equal, Binding,
    Constraint, DimTable, SYMBOLIC_BASE,
};

/// The static type of a graph value: element type and shape.
///
/// The fields are private: ops and plugins read a type through its methods,
/// so the representation of dimensions can grow (symbolic dimensions)
/// without touching every shape rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    dtype: DType,
    shape: Vec<usize>,
}

impl TensorType {
    /// A type from a dtype and a shape. The element count is checked where
    /// a type enters a graph ([`crate::Graph::push`]), not here.
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> Self {
        TensorType { dtype, shape: shape.into() }
    }

    /// A rank-0 type.
    pub fn scalar(dtype: DType) -> Self {
        TensorType { dtype, shape: Vec::new() }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions, outermost first (row-major).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The size of dimension `axis`, `None` past the rank.
    pub fn dim(&self, axis: usize) -> Option<usize> {
        self.shape.get(axis).copied()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (saturating: a type inside a graph never
    /// overflows, see [`checked_numel`]; `usize::MAX` for a symbolic shape,
    /// whose count is [`dim_numel`]).
    pub fn numel(&self) -> usize {
        checked_numel(&self.shape).unwrap_or(usize::MAX)
    }

    /// Size of the values of this type in bytes, `None` when it overflows
    /// or the shape is symbolic.
    pub fn bytes(&self) -> Option<usize> {
        checked_numel(&self.shape)?.checked_mul(self.dtype.size_of())
    }

    /// Whether a dimension is symbolic (see [`dim_var`]).
    pub fn is_symbolic(&self) -> bool {
        is_symbolic_shape(&self.shape)
    }

    /// The type with every symbolic dimension evaluated under `binding`.
    ///
    /// # Errors
    /// An unbound variable; a dimension that evaluates to a negative size.
    pub fn bind(&self, binding: &Binding) -> Result<TensorType> {
        if !self.is_symbolic() {
            return Ok(self.clone());
        }
        Ok(TensorType { dtype: self.dtype, shape: binding.shape(&self.shape)? })
    }

    /// The same shape with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType { dtype, shape: self.shape.clone() }
    }

    /// The same dtype with another shape.
    pub fn with_shape(&self, shape: impl Into<Vec<usize>>) -> TensorType {
        TensorType { dtype: self.dtype, shape: shape.into() }
    }

    /// Checks that values of this type are addressable: the element count
    /// and the byte size fit in `isize`, as every buffer must.
    ///
    /// # Errors
    /// [`Error::Shape`] naming `op` and the shape.
    pub fn check_size(&self, op: &str) -> Result<()> {
        if self.is_symbolic() {
            // Sizes are known when a call binds the variables; what can be
            // checked now is that every dimension is one.
            return match self.shape.iter().find(|&&d| !is_valid_dim(d)) {
                None => Ok(()),
                Some(&d) => Err(Error::shape(
                    op,
                    &[&self.shape],
                    format!(
                        "the dimension {d} is neither a size (sizes are below 2^62) nor a \
                         symbolic dimension: a shape rule that made it from a symbolic \
                         dimension by arithmetic outside anvil_core::shape only understands \
                         concrete sizes (use shape::dim_add, dim_mul, ...)"
                    ),
                )),
            };
        }
        match self.bytes() {
            Some(b) if isize::try_from(b).is_ok() => Ok(()),
            _ => Err(Error::shape(
                op,
                &[&self.shape],
                format!(
                    "a {} value of shape {:?} has more elements than memory can address",
                    self.dtype, self.shape
                ),
            )),
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, &d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if is_symbolic(d) {
                f.write_str(&fmt_dim(d))?;
            } else {
                write!(f, "{d}")?;
            }
        }
        f.write_str("]")
    }
}

// ------------------------------------------------------- dimension arithmetic

/// Number of elements of a shape (1 for a scalar), `None` on overflow or
/// for a symbolic shape (whose count is [`dim_numel`]).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    if is_symbolic_shape(shape) {
        return None;
    }
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Number of elements of a shape (1 for a scalar), saturating at
/// `usize::MAX` (use [`checked_numel`] where the count is not known to fit).
pub fn numel(shape: &[usize]) -> usize {
    checked_numel(shape).unwrap_or(usize::MAX)
}

/// `a + b` for a dimension of `op`, or an error naming the op and the shape.
///
/// # Errors
/// [`Error::Shape`] on overflow.
pub fn add_dims(op: &str, a: usize, b: usize, shape: &[usize]) -> Result<usize> {
    dim_add(a, b).map_err(|_| {
        Error::shape(
            op,
            &[shape],
            format!("the dimension {} + {} overflows", fmt_dim(a), fmt_dim(b)),
        )
    })
}

/// `a * b` for a dimension of `op`, or an error naming the op and the shape.
///
/// # Errors
/// [`Error::Shape`] on overflow.
pub fn mul_dims(op: &str, a: usize, b: usize, shape: &[usize]) -> Result<usize> {
    dim_mul(a, b).map_err(|_| {
        Error::shape(
            op,
            &[shape],
            format!("the dimension {} * {} overflows", fmt_dim(a), fmt_dim(b)),
        )
    })
}

/// Row-major contiguous strides, in elements.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(shape[i + 1]);
    }
    s
}

/// Converts a possibly negative axis into `0..rank`.
///
/// # Errors
/// [`Error::AxisOutOfRange`] naming `op`, the axis, the shape and `arg`.
pub fn normalize_axis(op: &str, axis: i64, shape: &[usize], arg: &str) -> Result<usize> {
    normalize_axis_rank(op, axis, shape.len(), shape, arg)
}

/// Like [`normalize_axis`] for an axis into a rank other than `shape.len()`
/// (`unsqueeze` inserts into `rank + 1` positions).
pub fn normalize_axis_rank(
    op: &str,
    axis: i64,
    rank: usize,
    shape: &[usize],
    arg: &str,
) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(Error::AxisOutOfRange { op: op.into(), axis, shape: shape.to_vec(), arg: arg.into() })
    }
}

/// Normalises a list of axes; the result is sorted. Repeated axes are an error.
pub fn normalize_axes(op: &str, axes: &[i64], shape: &[usize], arg: &str) -> Result<Vec<usize>> {
    let mut out =
        axes.iter().map(|&a| normalize_axis(op, a, shape, arg)).collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::invalid(op, "axes", format!("axis repeated in {axes:?}")));
    }
    Ok(out)
}

/// The NumPy broadcast of two shapes.
///
/// # Errors
/// [`Error::Broadcast`] when a pair of aligned dimensions differ and neither is 1.
pub fn broadcast_shapes(op: &str, lhs: &[usize], rhs: &[usize], arg: &str) -> Result<Vec<usize>> {
    let rank = lhs.len().max(rhs.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() < rank {
            1
        } else {
            s[i + s.len() - rank]
        }
    };
    (0..rank)
        .map(|i| match (dim(lhs, i), dim(rhs, i)) {
            (a, b) if a == b => Ok(a),
            (1, b) => Ok(b),
            (a, 1) => Ok(a),
            // A symbolic dimension never broadcasts as 1: the two must be
            // equal when the call binds them (a recorded constraint).
            (a, b)
                if (is_symbolic(a) || is_symbolic(b)) && require_equal(op, a, b, arg).is_ok() =>
            {
                Ok(if is_symbolic(a) { b } else { a })
            }
            _ => Err(Error::Broadcast {
                op: op.into(),
                lhs: lhs.to_vec(),
                rhs: rhs.to_vec(),
                arg: arg.into(),
            }),
        })
        .collect()
}

/// Whether `from` broadcasts to exactly `to` (NumPy rules, leading dims added).
pub fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from.iter().rev().zip(to.iter().rev()).all(|(&f, &t)| f == t || f == 1)
}

/// Resolves a reshape target with at most one `-1`.
///
/// # Errors
/// Two `-1`s, a negative size other than `-1`, or a different element count.
pub fn reshape_target(op: &str, from: &[usize], to: &[i64]) -> Result<Vec<usize>> {
    let handle = |&d: &i64| d >= 0 && is_symbolic(d as usize) && is_valid_dim(d as usize);
    if is_symbolic_shape(from) || to.iter().any(handle) {
        return reshape_target_symbolic(op, from, to).map_err(|_| reshape_error(op, from, to));
    }
    let n = numel(from);
    let inferred: Vec<usize> =
        to.iter().enumerate().filter(|(_, &d)| d == -1).map(|(i, _)| i).collect();
    if inferred.len() > 1 {
        return Err(Error::invalid(op, "shape", format!("{to:?} has more than one -1")));
    }
    if let Some(&d) = to.iter().find(|&&d| d < -1) {
        return Err(Error::invalid(op, "shape", format!("{to:?} has negative size {d}")));
    }
    let mut out: Vec<usize> = to.iter().map(|&d| d.max(0) as usize).collect();
    let known = to
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
        .ok_or_else(|| reshape_error(op, from, to))?;
    if let Some(&i) = inferred.first() {
        if known == 0 || n % known != 0 {
            return Err(reshape_error(op, from, to));
        }
        out[i] = n / known;
    }
    if checked_numel(&out) != Some(n) {
        return Err(reshape_error(op, from, to));
    }
    Ok(out)
}

/// [`reshape_target`] with symbolic dimensions: the inferred dimension is
/// the exact quotient of the element counts (`[n, 3] → [-1]` is `3*n`,
/// `[2*n] → [2, -1]` is `n`); counts that are equal only for some bindings
/// are a recorded constraint.
fn reshape_target_symbolic(op: &str, from: &[usize], to: &[i64]) -> Result<Vec<usize>> {
    let n = dim_numel(from)?;
    let inferred: Vec<usize> =
        to.iter().enumerate().filter(|(_, &d)| d == -1).map(|(i, _)| i).collect();
    if inferred.len() > 1 || to.iter().any(|&d| d < -1) {
        return Err(reshape_error(op, from, to));
    }
    let mut out: Vec<usize> = to.iter().map(|&d| d.max(0) as usize).collect();
    let known = to.iter().filter(|&&d| d >= 0).try_fold(1usize, |k, &d| dim_mul(k, d as usize))?;
    if let Some(&i) = inferred.first() {
        out[i] = match dim_exact_div(n, known) {
            Some(q) => q,
            // `n` into `[-1, 2]`: `floordiv(n, 2)`, with `n mod 2 == 0`
            // checked when a call binds `n` (an error outside a recording scope).
            None if is_symbolic(n) && known > 0 && !is_symbolic(known) => {
                let rem = dim_mod(n, known)?;
                require_equal(op, rem, 0, "shape").map_err(|_| reshape_error(op, from, to))?;
                dim_floordiv(n, known)?
            }
            None => return Err(reshape_error(op, from, to)),
        };
    } else {
        require_equal(op, n, known, "shape").map_err(|_| reshape_error(op, from, to))?;
    }
    Ok(out)
}

fn reshape_error(op: &str, from: &[usize], to: &[i64]) -> Error {
    Error::shape(
        op,
        &[from],
        format!(
            "cannot reshape argument 0 of {} elements into {}",
            dim_numel(from).map_or_else(|_| "?".into(), fmt_dim),
            {
                let dims: Vec<String> = to
                    .iter()
                    .map(|&d| usize::try_from(d).map_or_else(|_| d.to_string(), fmt_dim))
                    .collect();
                format!("[{}]", dims.join(", "))
            }
        ),
    )
}

/// The shape left after reducing `axes` (sorted, normalised).
pub fn reduce_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Checks that `perm` is a permutation of `0..rank` (negative entries allowed)
/// and returns it normalised.
pub fn normalize_perm(op: &str, perm: &[i64], shape: &[usize]) -> Result<Vec<usize>> {
    if perm.len() != shape.len() {
        return Err(Error::shape(
            op,
            &[shape],
            format!("permutation {perm:?} has {} entries for rank {}", perm.len(), shape.len()),
        ));
    }
    let p =
        perm.iter().map(|&a| normalize_axis(op, a, shape, "perm")).collect::<Result<Vec<_>>>()?;
    let mut seen = vec![false; p.len()];
    for &a in &p {
        if std::mem::replace(&mut seen[a], true) {
            return Err(Error::invalid(op, "perm", format!("{perm:?} is not a permutation")));
        }
    }
    Ok(p)
}

/// The inverse of a permutation.
pub fn inverse_perm(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

/// One axis of a strided slice, resolved against a dimension with Python
/// semantics: negative bounds count from the end, bounds are clamped, `None`
/// means the natural end for the step's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceSpec {
    /// First index (inclusive); `None` is the start (or the end for a negative step).
    pub start: Option<i64>,
    /// Last index (exclusive); `None` is the end (or before the start for a negative step).
    pub stop: Option<i64>,
    /// Step, not zero.
    pub step: i64,
}

impl SliceSpec {
    /// The whole axis.
    pub const FULL: SliceSpec = SliceSpec { start: None, stop: None, step: 1 };

    /// `start..stop` with step 1.
    pub fn range(start: i64, stop: i64) -> Self {
        SliceSpec { start: Some(start), stop: Some(stop), step: 1 }
    }

    /// Resolves to `(first index, step, length)` for a dimension of size `dim`.
    pub fn resolve(&self, op: &str, dim: usize) -> Result<(i64, i64, usize)> {
        if is_symbolic(dim) {
            return self.resolve_symbolic(op, dim);
        }
        if self.is_symbolic() {
            return Err(Error::invalid(
                op,
                "slice",
                format!("{self} has a symbolic bound on an axis of size {dim}: bind it first"),
            ));
        }
        let n = dim as i64;
        let step = self.step;
        if step == 0 {
            return Err(Error::invalid(op, "step", "slice step cannot be zero"));
        }
        let clamp = |v: i64, lo: i64, hi: i64| v.clamp(lo, hi);
        let norm = |v: i64| if v < 0 { v + n } else { v };
        let (start, stop) = if step > 0 {
            let s = self.start.map_or(0, |v| clamp(norm(v), 0, n));
            let e = self.stop.map_or(n, |v| clamp(norm(v), 0, n));
            (s, e)
        } else {
            let s = self.start.map_or(n - 1, |v| clamp(norm(v), -1, n - 1));
            let e = self.stop.map_or(-1, |v| clamp(norm(v), -1, n - 1));
            (s, e)
        };
        // In i128: `step` may be i64::MIN or i64::MAX.
        let (span, stride) = if step > 0 {
            (stop - start, i128::from(step))
        } else {
            (start - stop, -i128::from(step))
        };
        let len = if span > 0 { (i128::from(span) - 1) / stride + 1 } else { 0 };
        Ok((start, step, len as usize))
    }
}

impl SliceSpec {
    /// A bound that is a symbolic dimension (an index counted from the
    /// front), stored in a spec as its handle: see [`SliceSpec::at_dim`].
    fn symbolic_bound(v: Option<i64>) -> Option<usize> {
        v.and_then(|v| usize::try_from(v).ok()).filter(|&d| is_symbolic(d) && is_valid_dim(d))
    }

    /// The spec with bounds beyond every size (at least 2⁶² in magnitude,
    /// and no symbolic dimension's handle) clamped as NumPy clamps them:
    /// dropped when they mean an end of the axis, `None` when they leave
    /// the slice empty.
    fn without_far_bounds(&self) -> Option<SliceSpec> {
        let far = |v: Option<i64>| {
            v.filter(|&v| v.unsigned_abs() >= SYMBOLIC_BASE as u64)
                .filter(|&v| Self::symbolic_bound(Some(v)).is_none())
                .map(|v| v > 0)
        };
        let forward = self.step > 0;
        let (start, stop) = (far(self.start), far(self.stop));
        // Past the end going forward, before the start going back: nothing.
        if start == Some(forward) || stop == Some(!forward) {
            return None;
        }
        Some(SliceSpec {
            start: if start.is_some() { None } else { self.start },
            stop: if stop.is_some() { None } else { self.stop },
            step: self.step,
        })
    }

    /// Whether a bound of this spec is a symbolic dimension.
    pub fn is_symbolic(&self) -> bool {
        Self::symbolic_bound(self.start).is_some() || Self::symbolic_bound(self.stop).is_some()
    }

    /// `start..stop` with step 1, where either bound may be a dimension
    /// (a size, or a symbolic dimension counted from the front, as rules
    /// that undo a pad build it).
    pub fn at_dim(start: usize, stop: usize) -> Self {
        let bound = |d: usize| i64::try_from(d).unwrap_or(i64::MAX);
        SliceSpec { start: Some(bound(start)), stop: Some(bound(stop)), step: 1 }
    }

    /// The spec with its symbolic bounds evaluated under `binding`.
    ///
    /// # Errors
    /// A bound that does not evaluate (an unbound variable).
    pub fn bind(&self, binding: &Binding) -> Result<SliceSpec> {
        let bind = |v: Option<i64>| -> Result<Option<i64>> {
            match Self::symbolic_bound(v) {
                Some(d) => Ok(Some(binding.eval(d)? as i64)),
                None => Ok(v),
            }
        };
        Ok(SliceSpec { start: bind(self.start)?, stop: bind(self.stop)?, step: self.step })
    }

    /// [`SliceSpec::resolve`] on a symbolic dimension `n`, with NumPy's
    /// meaning of negative bounds and steps but no clamping: every bound
    /// must lie on the axis (a recorded constraint, checked when a call
    /// binds `n`). The first index may be symbolic (`x[-3:]` starts at
    /// `n - 3`, `x[::-1]` at `n - 1`); it is returned as its handle.
    fn resolve_symbolic(&self, op: &str, n: usize) -> Result<(i64, i64, usize)> {
        let step = self.step;
        if step == 0 {
            return Err(Error::invalid(op, "step", "slice step cannot be zero"));
        }
        let Some(spec) = self.without_far_bounds() else { return Ok((0, step, 0)) };
        if spec != *self {
            return spec.resolve_symbolic(op, n);
        }
        // An index counted from the front, as a dimension.
        let index = |v: i64| -> Result<usize> {
            if v >= 0 {
                return Ok(v as usize);
            }
            let back = v.unsigned_abs() as usize;
            require_at_least(op, n, back, "slice")?;
            dim_sub(n, back)
        };
        let stride = step.unsigned_abs() as usize;
        let (from, span) = if step > 0 {
            let from = self.start.map_or(Ok(0), index)?;
            let stop = self.stop.map_or(Ok(n), index)?;
            require_at_least(op, n, stop, "slice")?;
            require_at_least(op, stop, from, "slice")?;
            (from, dim_sub(stop, from)?)
        } else {
            require_at_least(op, n, 1, "slice")?;
            let from = self.start.map_or_else(|| dim_sub(n, 1), index)?;
            require_at_least(op, dim_sub(n, 1)?, from, "slice")?;
            let span = match self.stop {
                None => dim_add(from, 1)?,
                Some(v) => {
                    let stop = index(v)?;
                    require_at_least(op, from, stop, "slice")?;
                    dim_sub(from, stop)?
                }
            };
            (from, span)
        };
        let len = dim_floordiv(dim_add(span, stride - 1)?, stride)?;
        Ok((i64::try_from(from).unwrap_or(i64::MAX), step, len))
    }
}

impl fmt::Display for SliceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bound = |v: i64| match Self::symbolic_bound(Some(v)) {
            Some(d) => fmt_dim(d),
            None => v.to_string(),
        };
        if let Some(s) = self.start {
            f.write_str(&bound(s))?;
        }
        f.write_str(":")?;
        if let Some(s) = self.stop {
            f.write_str(&bound(s))?;
        }
        if self.step != 1 {
            write!(f, ":{}", self.step)?;
        }
        Ok(())
    }
}

/// The shape of `numpy.matmul(a, b)`, with 1-D operands promoted and their
/// added dimension removed, and batch dimensions broadcast.
///
/// # Errors
/// A scalar operand, or inner dimensions that differ.
pub fn matmul_shape(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return Err(Error::shape(op, &[a, b], "matmul of a scalar (argument has rank 0)"));
    }
    let k_a = a[a.len() - 1];
    let k_b = if b.len() == 1 { b[0] } else { b[b.len() - 2] };
    if k_a != k_b && require_equal(op, k_a, k_b, "inner dimensions").is_err() {
        return Err(Error::shape(
            op,
            &[a, b],
            format!("inner dimensions differ: argument 0 has {k_a}, argument 1 has {k_b}"),
        ));
    }
    let batch_a = if a.len() > 2 { &a[..a.len() - 2] } else { &[][..] };
    let batch_b = if b.len() > 2 { &b[..b.len() - 2] } else { &[][..] };
    let mut out = broadcast_shapes(op, batch_a, batch_b, "batch dimensions")?;
    if a.len() >= 2 {
        out.push(a[a.len() - 2]);
    }
    if b.len() >= 2 {
        out.push(b[b.len() - 1]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_follows_numpy() {
        assert_eq!(broadcast_shapes("add", &[3, 1], &[4], "1").unwrap(), vec![3, 4]);
        assert_eq!(broadcast_shapes("add", &[], &[2, 3], "1").unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shapes("add", &[0, 1], &[1, 5], "1").unwrap(), vec![0, 5]);
        let e = broadcast_shapes("add", &[3], &[4], "1").unwrap_err().to_string();
        assert!(e.contains("add") && e.contains("[3]") && e.contains("[4]"), "{e}");
    }

    #[test]
    fn reshape_infers_one_dimension() {
        assert_eq!(reshape_target("reshape", &[2, 6], &[3, -1]).unwrap(), vec![3, 4]);
        assert_eq!(reshape_target("reshape", &[0, 3], &[-1, 3]).unwrap(), vec![0, 3]);
        assert!(reshape_target("reshape", &[2, 6], &[5, -1]).is_err());
        assert!(reshape_target("reshape", &[2, 6], &[-1, -1]).is_err());
        assert!(reshape_target("reshape", &[2, 6], &[7]).is_err());
    }

    #[test]
    fn slices_follow_python() {
        let r = |s: Option<i64>, e: Option<i64>, st: i64, n| {
            SliceSpec { start: s, stop: e, step: st }.resolve("slice", n).unwrap()
        };
        assert_eq!(r(None, None, 1, 5), (0, 1, 5));
        assert_eq!(r(None, None, -1, 5), (4, -1, 5));
        assert_eq!(r(Some(1), Some(-1), 2, 6), (1, 2, 2));
        assert_eq!(r(Some(-2), None, 1, 5), (3, 1, 2));
        assert_eq!(r(Some(10), None, 1, 5), (5, 1, 0));
        assert_eq!(r(Some(3), Some(0), -1, 5), (3, -1, 3));
        assert_eq!(r(None, None, 3, 0), (0, 3, 0));
        assert_eq!(r(None, None, i64::MAX, 5), (0, i64::MAX, 1));
        assert_eq!(r(None, None, i64::MIN, 5), (4, i64::MIN, 1));
    }

    #[test]
    fn matmul_shapes() {
        assert_eq!(matmul_shape("matmul", &[3, 4], &[4, 5]).unwrap(), vec![3, 5]);
        assert_eq!(matmul_shape("matmul", &[4], &[4, 5]).unwrap(), vec![5]);
        assert_eq!(matmul_shape("matmul", &[3, 4], &[4]).unwrap(), vec![3]);
        assert_eq!(matmul_shape("matmul", &[4], &[4]).unwrap(), Vec::<usize>::new());
        assert_eq!(matmul_shape("matmul", &[2, 1, 3, 4], &[5, 4, 6]).unwrap(), vec![2, 5, 3, 6]);
        assert!(matmul_shape("matmul", &[3, 4], &[5, 6]).is_err());
    }
}
