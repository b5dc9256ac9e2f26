//! Movement ops: they rearrange elements without arithmetic.
//!
//! The primitives are `reshape`, `permute`, `broadcast_to`, `pad`, `slice`
//! (start/stop/step per axis; a negative step reverses) and `concatenate`.
//! `flip`, `squeeze`, `unsqueeze`, `transpose` and `stack` are composites over
//! them (see [`crate::VarExt`]): `flip` is a slice with step -1, `squeeze`
//! and `unsqueeze` are reshapes, `stack` is unsqueeze then concatenate. Fewer
//! primitives means fewer rules to get right under every transform.
//!
//! Parameters are stored resolved (non-negative axes, concrete sizes), so
//! two ops that do the same thing compare equal.

use anvil_core::shape::{
    add_dims, broadcasts_to, dim_numel, fmt_dim, fmt_dims, is_symbolic, is_symbolic_shape, numel,
    require_equal,
};
use anvil_core::{op::expect_arity, Error, Movement, Op, Result, Scalar, SliceSpec, TensorType};

/// Same elements, new shape of the same size (row-major order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reshape {
    /// The new shape.
    pub shape: Vec<usize>,
}

impl Op for Reshape {
    fn name(&self) -> &'static str {
        "reshape"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic_shape(&self.shape) {
            return Ok(None);
        }
        Ok(Some(Box::new(Reshape { shape: binding.shape(&self.shape)? })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        if inputs[0].is_symbolic() || is_symbolic_shape(&self.shape) {
            let (from, to) = (dim_numel(inputs[0].shape())?, dim_numel(&self.shape)?);
            require_equal("reshape", from, to, "shape").map_err(|_| {
                Error::shape(
                    "reshape",
                    &[inputs[0].shape()],
                    format!("cannot reshape argument 0 into {}", fmt_dims(&self.shape)),
                )
            })?;
            return Ok(inputs[0].with_shape(self.shape.clone()));
        }
        if inputs[0].numel() != numel(&self.shape) {
            return Err(Error::shape(
                "reshape",
                &[inputs[0].shape()],
                format!("cannot reshape argument 0 into {:?}", self.shape),
            ));
        }
        Ok(inputs[0].with_shape(self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}", self.shape)
    }
    fn is_relayout(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::Reshape)
    }
}

/// Reorders axes: output axis `i` is input axis `perm[i]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Permute {
    /// A permutation of `0..rank`.
    pub perm: Vec<usize>,
}

impl Op for Permute {
    fn name(&self) -> &'static str {
        "permute"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let s = inputs[0].shape();
        let perm: Vec<i64> = self.perm.iter().map(|&p| p as i64).collect();
        let p = anvil_core::shape::normalize_perm("permute", &perm, s)?;
        Ok(inputs[0].with_shape(p.iter().map(|&a| s[a]).collect::<Vec<_>>()))
    }
    fn params(&self) -> String {
        format!("perm={:?}", self.perm)
    }
    fn is_relayout(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::Permute(&self.perm))
    }
}

/// Broadcasts to a larger shape by NumPy rules (new leading axes, size-1 axes repeated).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BroadcastTo {
    /// The target shape.
    pub shape: Vec<usize>,
}

impl Op for BroadcastTo {
    fn name(&self) -> &'static str {
        "broadcast_to"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic_shape(&self.shape) {
            return Ok(None);
        }
        Ok(Some(Box::new(BroadcastTo { shape: binding.shape(&self.shape)? })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        if !broadcasts_to(inputs[0].shape(), &self.shape) {
            return Err(Error::Broadcast {
                op: "broadcast_to".into(),
                lhs: inputs[0].shape().to_vec(),
                rhs: self.shape.clone(),
                arg: "shape".into(),
            });
        }
        Ok(inputs[0].with_shape(self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}", self.shape)
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::BroadcastTo)
    }
    fn is_broadcast(&self) -> bool {
        true
    }
    fn is_relayout(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Pads every axis with `value`: `widths[i] = (before, after)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pad {
    /// `(before, after)` per axis.
    pub widths: Vec<(usize, usize)>,
    /// The fill value (of the operand's dtype).
    pub value: Scalar,
}

impl Op for Pad {
    fn name(&self) -> &'static str {
        "pad"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        let symbolic = |&(lo, hi): &(usize, usize)| is_symbolic(lo) || is_symbolic(hi);
        if !self.widths.iter().any(symbolic) {
            return Ok(None);
        }
        let widths = self
            .widths
            .iter()
            .map(|&(lo, hi)| Ok((binding.eval(lo)?, binding.eval(hi)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Box::new(Pad { widths, value: self.value })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let s = inputs[0].shape();
        if self.widths.len() != s.len() {
            return Err(Error::shape(
                "pad",
                &[s],
                format!("{} pad widths for argument 0 of rank {}", self.widths.len(), s.len()),
            ));
        }
        if self.value.dtype() != inputs[0].dtype() {
            return Err(Error::dtype("pad", "value", self.value.dtype(), inputs[0].dtype().name()));
        }
        let shape = s
            .iter()
            .zip(&self.widths)
            .map(|(&d, &(lo, hi))| {
                anvil_core::shape::dim_add(d, lo)
                    .and_then(|n| anvil_core::shape::dim_add(n, hi))
                    .ok()
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Error::invalid(
                    "pad",
                    "widths",
                    format!("{} overflow argument 0 of shape {}", self.params(), fmt_dims(s)),
                )
            })?;
        Ok(inputs[0].with_shape(shape))
    }
    fn params(&self) -> String {
        let widths: Vec<String> = self
            .widths
            .iter()
            .map(|&(lo, hi)| format!("({}, {})", fmt_dim(lo), fmt_dim(hi)))
            .collect();
        format!("widths=[{}], value={}", widths.join(", "), self.value)
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0 && self.value.to_f64() == 0.0
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::Pad { widths: &self.widths, value: self.value })
    }
}

/// A strided slice with one [`SliceSpec`] per axis (Python semantics).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    /// One spec per axis.
    pub specs: Vec<SliceSpec>,
}

impl Slice {
    /// `(first, step, len)` per axis, resolved against `shape`.
    ///
    /// # Errors
    /// A zero step.
    pub fn resolve(&self, shape: &[usize]) -> Result<Vec<(i64, i64, usize)>> {
        self.specs.iter().zip(shape).map(|(s, &d)| s.resolve("slice", d)).collect()
    }
}

impl Op for Slice {
    fn name(&self) -> &'static str {
        "slice"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !self.specs.iter().any(SliceSpec::is_symbolic) {
            return Ok(None);
        }
        let specs = self.specs.iter().map(|s| s.bind(binding)).collect::<Result<Vec<_>>>()?;
        Ok(Some(Box::new(Slice { specs })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let s = inputs[0].shape();
        if self.specs.len() != s.len() {
            return Err(Error::shape(
                "slice",
                &[s],
                format!("{} slice specs for argument 0 of rank {}", self.specs.len(), s.len()),
            ));
        }
        let shape = self.resolve(s)?.iter().map(|r| r.2).collect::<Vec<_>>();
        Ok(inputs[0].with_shape(shape))
    }
    fn params(&self) -> String {
        let specs: Vec<String> = self.specs.iter().map(ToString::to_string).collect();
        specs.join(", ")
    }
    fn is_relayout(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::Slice(&self.specs))
    }
}

/// Joins operands along an existing axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Concatenate {
    /// The axis (non-negative).
    pub axis: usize,
}

impl Op for Concatenate {
    fn name(&self) -> &'static str {
        "concatenate"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let Some(first) = inputs.first() else {
            return Err(Error::invalid("concatenate", "operands", "needs at least one operand"));
        };
        if self.axis >= first.rank() {
            return Err(Error::AxisOutOfRange {
                op: "concatenate".into(),
                axis: self.axis as i64,
                shape: first.shape().to_vec(),
                arg: "0".into(),
            });
        }
        let mut shape = first.shape().to_vec();
        shape[self.axis] = 0;
        for (i, t) in inputs.iter().enumerate() {
            let same_rest = t.rank() == first.rank()
                && t.shape()
                    .iter()
                    .zip(first.shape())
                    .enumerate()
                    .all(|(k, (a, b))| k == self.axis || a == b);
            if !same_rest {
                let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
                return Err(Error::shape(
                    "concatenate",
                    &shapes,
                    format!("argument {i} differs from argument 0 outside axis {}", self.axis),
                ));
            }
            if t.dtype() != first.dtype() {
                return Err(Error::dtype(
                    "concatenate",
                    i.to_string(),
                    t.dtype(),
                    first.dtype().name(),
                ));
            }
            shape[self.axis] =
                add_dims("concatenate", shape[self.axis], t.shape()[self.axis], first.shape())?;
        }
        Ok(first.with_shape(shape))
    }
    fn params(&self) -> String {
        format!("axis={}", self.axis)
    }
    fn linear_in(&self, _: usize) -> bool {
        true
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::Concatenate { axis: self.axis })
    }
}

// ---------------------------------------------------------------- rules

use crate::api::VarExt;
use crate::batching::{at_front, pad_after_batch, single_batched, slice_specs_at, with_full_at};
use anvil_core::{register_rule, Batched, Var};

/// Batching `reshape`: batch first, then the element's new shape.
fn vmap_reshape(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let r = op.try_downcast::<Reshape>()?;
    let x = at_front(&args[0], size);
    let shape: Vec<i64> =
        std::iter::once(size).chain(r.shape.iter().copied()).map(|d| d as i64).collect();
    Ok(Batched::new(x.reshape(&shape), Some(0)))
}

/// Batching `permute`: one permute that also brings the batch axis first.
fn vmap_permute(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let p = op.try_downcast::<Permute>()?;
    let (x, k) = single_batched(op, args)?;
    let perm: Vec<i64> = std::iter::once(k)
        .chain(p.perm.iter().map(|&a| crate::batching::physical_axis(a, k)))
        .map(|a| a as i64)
        .collect();
    Ok(Batched::new(x.permute(&perm), Some(0)))
}

/// Batching `broadcast_to`: batch first, size-1 axes for the new leading
/// axes, then broadcast behind the batch axis.
fn vmap_broadcast_to(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let b = op.try_downcast::<BroadcastTo>()?;
    let x = pad_after_batch(&at_front(&args[0], size), b.shape.len() - args[0].logical_rank());
    let target: Vec<usize> = std::iter::once(size).chain(b.shape.iter().copied()).collect();
    Ok(Batched::new(x.broadcast_to(&target), Some(0)))
}

/// Batching `pad`: no padding on the batch axis.
fn vmap_pad(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let p = op.try_downcast::<Pad>()?;
    let (x, k) = single_batched(op, args)?;
    let op = Pad { widths: with_full_at(&p.widths, k, (0, 0)), value: p.value };
    Ok(Batched::new(Var::apply_op(Box::new(op), &[&x]), Some(k)))
}

/// Batching `slice`: the batch axis is taken whole.
fn vmap_slice(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let s = op.try_downcast::<Slice>()?;
    let (x, k) = single_batched(op, args)?;
    Ok(Batched::new(
        Var::apply_op(Box::new(Slice { specs: slice_specs_at(&s.specs, k) }), &[&x]),
        Some(k),
    ))
}

/// Batching `concatenate`: every operand batch-first (unbatched ones
/// broadcast, since the result holds a copy per element anyway).
fn vmap_concatenate(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let c = op.try_downcast::<Concatenate>()?;
    let xs: Vec<Var> = args.iter().map(|a| at_front(a, size)).collect();
    let refs: Vec<&Var> = xs.iter().collect();
    Ok(Batched::new(Var::apply_op(Box::new(Concatenate { axis: c.axis + 1 }), &refs), Some(0)))
}

register_rule!(VmapRule, Reshape, vmap_reshape);
register_rule!(VmapRule, Permute, vmap_permute);
register_rule!(VmapRule, BroadcastTo, vmap_broadcast_to);
register_rule!(VmapRule, Pad, vmap_pad);
register_rule!(VmapRule, Slice, vmap_slice);
register_rule!(VmapRule, Concatenate, vmap_concatenate);

// ---------------------------------------------------------- derivatives

use crate::ad::dense;
use anvil_core::{DType, LinearArg};

/// The jvp of an op that is linear in its one operand: the op on the tangent.
pub fn jvp_linear_unary(
    op: &dyn Op,
    _: &[Var],
    tangents: &[Option<Var>],
    _: &Var,
) -> Result<Option<Var>> {
    Ok(tangents[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}

/// The cotangent of the one operand, when it is linear.
fn unary_ct(args: &[LinearArg], f: impl FnOnce(&[usize]) -> Var) -> Vec<Option<Var>> {
    vec![args[0].is_linear().then(|| f(args[0].shape()))]
}

fn transpose_reshape(_: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(unary_ct(args, |s| ct.reshape(&s.iter().map(|&d| d as i64).collect::<Vec<_>>())))
}

fn transpose_permute(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let p = op.try_downcast::<Permute>()?;
    let inv: Vec<i64> =
        anvil_core::shape::inverse_perm(&p.perm).iter().map(|&a| a as i64).collect();
    Ok(unary_ct(args, |_| ct.permute(&inv)))
}

fn transpose_broadcast_to(_: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(unary_ct(args, |s| crate::ad::unbroadcast(ct, s)))
}

/// A tangent is padded with zeros, whatever the primal's fill value.
fn jvp_pad(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    let p = op.try_downcast::<Pad>()?;
    Ok(t[0].as_ref().map(|t| {
        let zero = Pad { widths: p.widths.clone(), value: Scalar::I64(0).cast(t.dtype()) };
        Var::apply_op(Box::new(zero), &[t])
    }))
}

fn transpose_pad(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let p = op.try_downcast::<Pad>()?;
    if !args[0].is_linear() {
        return Ok(vec![None]);
    }
    let specs = p
        .widths
        .iter()
        .zip(args[0].shape())
        .map(|(&(lo, _), &d)| Ok(SliceSpec::at_dim(lo, anvil_core::shape::dim_add(lo, d)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![Some(Var::apply_op(Box::new(Slice { specs }), &[ct]))])
}

/// The transpose of a strided slice, one axis at a time: a unit-step slice
/// is undone by zero padding, any other by a `scatter_add` of the selected
/// positions (`first + step * i`) into a zero axis of the full size.
fn transpose_slice(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<Slice>()?;
    let shape = args[0].shape().to_vec();
    let resolved = s.resolve(&shape)?;
    let mut out = ct.clone();
    for (axis, (&(first, step, len), &d)) in resolved.iter().zip(&shape).enumerate() {
        if len == d && step == 1 {
            continue;
        }
        if is_symbolic(d) || is_symbolic(len) {
            out = undo_symbolic_slice(&out, axis, (first, step, len), d)?;
            continue;
        }
        out = if step == 1 {
            let mut widths = vec![(0, 0); shape.len()];
            widths[axis] = (first as usize, d - first as usize - len);
            out.pad(&widths, 0.0)
        } else {
            // The positions as a generator, not a constant built here: the
            // axis may be too large to materialise (the plan's memory
            // budget then refuses it, with an error, at run time).
            let idx = crate::iota_dtype(&[len], 0, DType::I64) * step + first;
            out.scatter_add(&idx, axis as i64, d)
        };
    }
    Ok(vec![args[0].is_linear().then_some(out)])
}

/// The transpose of one axis of a strided slice on a symbolic axis of size
/// `d`, from movement ops whose sizes are dimensions (no scatter, whose
/// positions would need the sizes): a negative step is a flip and a
/// positive one from the last position taken; step `s` interleaves `s - 1`
/// zeros after each element (a pad of a new axis and a reshape), and a pad
/// puts the result at its place on the axis.
fn undo_symbolic_slice(
    ct: &Var,
    axis: usize,
    (first, step, len): (i64, i64, usize),
    d: usize,
) -> Result<Var> {
    use anvil_core::shape::{dim_mul, dim_sub};
    let stride = step.unsigned_abs() as usize;
    let first = usize::try_from(first).map_err(|_| {
        Error::invalid("slice", "transpose", format!("a first index {first} below 0"))
    })?;
    // The lowest position taken, and the values in increasing position.
    let (lowest, ct) = if step > 0 {
        (first, ct.clone())
    } else {
        (dim_sub(first, dim_mul(dim_sub(len, 1)?, stride)?)?, ct.flip(&[axis as i64]))
    };
    // Each value followed by `stride - 1` zeros, the trailing zeros cut.
    let spread = if stride == 1 {
        ct
    } else {
        let r = ct.rank();
        let mut widths = vec![(0, 0); r + 1];
        widths[axis + 1] = (0, stride - 1);
        let mut shape: Vec<i64> = ct.shape().iter().map(|&x| x as i64).collect();
        shape[axis] = dim_mul(len, stride)? as i64;
        let long = ct.unsqueeze(axis as i64 + 1).pad(&widths, 0.0).reshape(&shape);
        let mut specs = vec![SliceSpec::FULL; r];
        specs[axis] = SliceSpec::at_dim(0, dim_sub(dim_mul(len, stride)?, stride - 1)?);
        Var::apply_op(Box::new(Slice { specs }), &[&long])
    };
    let covered = spread.shape()[axis];
    let mut widths = vec![(0, 0); spread.rank()];
    widths[axis] = (lowest, dim_sub(dim_sub(d, lowest)?, covered)?);
    Ok(spread.pad(&widths, 0.0))
}

/// Missing tangents of some operands are zeros of their shape.
fn jvp_concatenate(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    if t.iter().all(Option::is_none) {
        return Ok(None);
    }
    let dense: Vec<Var> = p.iter().zip(t).map(|(p, t)| dense(t, p)).collect();
    let refs: Vec<&Var> = dense.iter().collect();
    Ok(Some(Var::apply_op(op.boxed(), &refs)))
}

/// Each linear operand gets its slice of the cotangent.
fn transpose_concatenate(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Concatenate>()?;
    let mut start = 0;
    let mut pieces = Vec::with_capacity(args.len());
    for a in args {
        // Sizes may be symbolic: the bounds are dimensions.
        let stop = anvil_core::shape::dim_add(start, a.shape()[c.axis])?;
        pieces.push(a.is_linear().then(|| {
            let mut specs = vec![SliceSpec::FULL; ct.rank()];
            specs[c.axis] = SliceSpec::at_dim(start, stop);
            Var::apply_op(Box::new(Slice { specs }), &[ct])
        }));
        start = stop;
    }
    Ok(pieces)
}

register_rule!(JvpRule, Reshape, jvp_linear_unary);
register_rule!(TransposeRule, Reshape, transpose_reshape);
register_rule!(JvpRule, Permute, jvp_linear_unary);
register_rule!(TransposeRule, Permute, transpose_permute);
register_rule!(JvpRule, BroadcastTo, jvp_linear_unary);
register_rule!(TransposeRule, BroadcastTo, transpose_broadcast_to);
register_rule!(JvpRule, Pad, jvp_pad);
register_rule!(TransposeRule, Pad, transpose_pad);
register_rule!(JvpRule, Slice, jvp_linear_unary);
register_rule!(TransposeRule, Slice, transpose_slice);
register_rule!(JvpRule, Concatenate, jvp_concatenate);
register_rule!(TransposeRule, Concatenate, transpose_concatenate);

// ------------------------------------------------------------- rewrites

use crate::constant::{as_basis, Basis};
use crate::sparse::{as_color_seed, ColorSeed};
use anvil_core::Producer;

/// The one operand, when the op leaves it as it is. Cost: one node fewer.
fn same(args: &[Var], out: &TensorType) -> Option<Var> {
    (args[0].ty() == out).then(|| args[0].clone())
}

/// A seed op replacing a relayout of a seed (the relayout is not computed).
fn seed(b: Option<Basis>, out: &TensorType) -> Option<Var> {
    let b = b.filter(|b| b.shape == out.shape() && b.dtype == out.dtype())?;
    Some(Var::apply_op(Box::new(b), &[]))
}

/// A colored seed replacing a relayout of one (see [`ColorSeed`]).
fn color_seed(s: Option<ColorSeed>, out: &TensorType) -> Option<Var> {
    let s = s.filter(|s| s.shape == out.shape() && s.dtype == out.dtype())?;
    Some(Var::apply_op(Box::new(s), &[]))
}

/// A reshape to the operand's own shape is nothing; a reshape of a reshape
/// is one reshape; a reshape of a seed is a seed. Each removes a node.
fn rewrite_reshape(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    if let Some(v) = same(args, out) {
        return Ok(Some(v));
    }
    if let Some(b) = as_basis(&args[0]) {
        return Ok(seed(b.reshaped(out.shape()), out));
    }
    if let Some(c) = as_color_seed(&args[0]) {
        return Ok(color_seed(c.reshaped(out.shape()), out));
    }
    let Some(p) = args[0].producer().filter(|p| p.op_as::<Reshape>().is_some()) else {
        return Ok(None);
    };
    let inner = &p.inputs[0];
    Ok(Some(if inner.ty() == out { inner.clone() } else { inner.reshape(&as_i64(out.shape())) }))
}

/// Whether `perm` keeps the axes of `shape` longer than 1 in their order,
/// moving only size-1 axes: then the row-major elements are in the same
/// order before and after, and the permute is a reshape (no copy).
///
/// ```
/// use anvil_ops::movement::moves_only_unit_axes;
/// assert!(moves_only_unit_axes(&[0, 2, 1], &[5, 3, 1])); // [5, 3, 1] -> [5, 1, 3]
/// assert!(!moves_only_unit_axes(&[0, 2, 1], &[5, 3, 2])); // a transpose
/// ```
pub fn moves_only_unit_axes(perm: &[usize], shape: &[usize]) -> bool {
    let long: Vec<usize> =
        perm.iter().copied().filter(|&a| shape.get(a).is_some_and(|&d| d != 1)).collect();
    long.windows(2).all(|w| w[0] < w[1])
}

/// The identity permute is nothing; a permute of a permute is one permute;
/// a permute of a seed that keeps its space's axes in order is a seed; a
/// permute that moves only size-1 axes is a reshape (`[B, k, 1] -> [B, 1,
/// k]`, as `vmap(grad)` makes of a batched vector's transpose: the
/// per-example transposes are free); a permute of an elementwise op whose
/// operands it only reshapes is the op on the reshaped operands (see
/// [`permuted_operands`]). Each removes a node or a copy.
fn rewrite_permute(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let p = op.try_downcast::<Permute>()?;
    if p.perm.iter().enumerate().all(|(i, &a)| i == a) {
        return Ok(same(args, out));
    }
    if let Some(b) = as_basis(&args[0]) {
        return Ok(seed(b.permuted(&p.perm), out));
    }
    if let Some(c) = as_color_seed(&args[0]) {
        return Ok(color_seed(c.permuted(&p.perm), out));
    }
    if moves_only_unit_axes(&p.perm, args[0].shape()) {
        return Ok(Some(args[0].reshape(&as_i64(out.shape()))).filter(|v| v.ty() == out));
    }
    let Some(q) = args[0].producer() else { return Ok(None) };
    if let Some(v) = permuted_operands(&p.perm, &q, out) {
        return Ok(Some(v));
    }
    let Some(inner) = q.op_as::<Permute>() else { return Ok(None) };
    let perm: Vec<usize> = p.perm.iter().map(|&a| inner.perm[a]).collect();
    let x = &q.inputs[0];
    if perm.iter().enumerate().all(|(i, &a)| i == a) {
        return Ok(Some(x.clone()).filter(|x| x.ty() == out));
    }
    Ok(Some(Var::apply_op(Box::new(Permute { perm }), &[x])))
}

/// A permute of an elementwise op (one result) whose operands the
/// permutation only reshapes (it moves none of their axes longer than 1:
/// the column and the row of an outer product `u vᵀ`, scalars), directly or
/// through a few more elementwise ops: the ops on the reshaped operands, so
/// the transpose of `2 u vᵀ` is `2 v uᵀ` computed in place, not
/// materialised and copied. Each element is the same operations on the
/// same values.
fn permuted_operands(perm: &[usize], q: &Producer, out: &TensorType) -> Option<Var> {
    permuted_op(perm, q, PUSH_DEPTH).filter(|v| v.ty() == out)
}

/// How many elementwise ops deep a permute is pushed.
const PUSH_DEPTH: usize = 4;

fn permuted_op(perm: &[usize], q: &Producer, depth: usize) -> Option<Var> {
    if !q.op.is_elementwise() || q.index != 0 || q.inputs.is_empty() {
        return None;
    }
    let operands: Vec<Var> =
        q.inputs.iter().map(|v| permuted(perm, v, depth)).collect::<Option<_>>()?;
    let refs: Vec<&Var> = operands.iter().collect();
    Some(Var::apply_op(q.op.clone(), &refs))
}

/// `v` (right-aligned to the permutation's rank) permuted, when that is a
/// reshape, or an elementwise op of such values (`depth` ops deep at most).
fn permuted(perm: &[usize], v: &Var, depth: usize) -> Option<Var> {
    let rank = perm.len();
    if v.rank() > rank || v.ty().is_symbolic() {
        return None;
    }
    if v.numel() == 1 {
        return Some(v.clone());
    }
    let mut shape = vec![1; rank - v.rank()];
    shape.extend_from_slice(v.shape());
    if moves_only_unit_axes(perm, &shape) {
        let moved: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
        return Some(v.reshape(&as_i64(&moved)));
    }
    let q = v.producer().filter(|_| depth > 0 && v.rank() == rank)?;
    permuted_op(perm, &q, depth - 1)
}

/// A broadcast to the operand's own shape is nothing.
fn rewrite_broadcast_to(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    Ok(same(args, out))
}

/// A slice of everything is nothing; a unit-step slice of a seed is a seed
/// with a shifted offset (any slice of a colored seed that keeps its
/// colors, a colored seed). Each removes a node.
fn rewrite_slice(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let s = op.try_downcast::<Slice>()?;
    if args[0].ty().is_symbolic() || s.specs.iter().any(SliceSpec::is_symbolic) {
        // Seeds are sliced by concrete offsets only.
        return Ok(None);
    }
    let resolved = s.resolve(args[0].shape())?;
    let whole = resolved
        .iter()
        .zip(args[0].shape())
        .all(|(&(first, step, len), &d)| len == d && (d <= 1 || (first == 0 && step == 1)));
    if whole {
        return Ok(same(args, out));
    }
    if let Some(c) = as_color_seed(&args[0]) {
        return Ok(color_seed(c.sliced(&resolved, out.shape()), out));
    }
    let Some(b) = as_basis(&args[0]) else { return Ok(None) };
    if resolved.iter().any(|&(_, step, len)| step != 1 && len > 1) {
        return Ok(None);
    }
    let starts: Vec<usize> = resolved.iter().map(|&(first, _, _)| first.max(0) as usize).collect();
    Ok(seed(b.sliced(&starts, out.shape()), out))
}

/// Zero padding of a seed's space is a seed with a shifted offset (a
/// colored seed with colorless padding).
fn rewrite_pad(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let p = op.try_downcast::<Pad>()?;
    if p.value.to_f64() != 0.0 {
        return Ok(None);
    }
    if let Some(c) = as_color_seed(&args[0]) {
        return Ok(color_seed(c.padded(&p.widths, out.shape()), out));
    }
    let Some(b) = as_basis(&args[0]) else { return Ok(None) };
    Ok(seed(b.padded(&p.widths, out.shape()), out))
}

fn as_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

register_rule!(RewriteRule, Reshape, rewrite_reshape);
register_rule!(RewriteRule, Permute, rewrite_permute);
register_rule!(RewriteRule, BroadcastTo, rewrite_broadcast_to);
register_rule!(RewriteRule, Slice, rewrite_slice);
register_rule!(RewriteRule, Pad, rewrite_pad);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{
    broadcast_positions, strided_positions, strides_i64, Detector, IndexSets, SparsityArg,
    NO_SOURCE,
};
use std::sync::Arc;

/// `permute`: result element `i` is the operand's element at `i` permuted.
fn sparsity_permute(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let p = op.try_downcast::<Permute>()?;
    let s = strides_i64(args[0].ty.shape());
    let strides: Vec<i64> = p.perm.iter().map(|&a| s[a]).collect();
    let map = strided_positions(out.shape(), 0, &strides)?;
    Ok(Arc::new(args[0].sets.gather_map(&map)))
}

/// `broadcast_to`: repeated elements share their source's set.
fn sparsity_broadcast_to(
    _: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let map = broadcast_positions(args[0].ty.shape(), out.shape())?;
    Ok(Arc::new(args[0].sets.gather_map(&map)))
}

/// `slice`: a strided walk over the operand (negative steps too).
fn sparsity_slice(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let r = op.try_downcast::<Slice>()?.resolve(args[0].ty.shape())?;
    let s = strides_i64(args[0].ty.shape());
    let base =
        r.iter().zip(&s).map(|(&(first, _, len), &st)| if len > 0 { first * st } else { 0 }).sum();
    let strides: Vec<i64> = r.iter().zip(&s).map(|(&(_, step, _), &st)| step * st).collect();
    let map = strided_positions(out.shape(), base, &strides)?;
    Ok(Arc::new(args[0].sets.gather_map(&map)))
}

/// `pad`: the operand's elements where they land, nothing in the padding
/// (whatever the fill value: a constant).
fn sparsity_pad(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let p = op.try_downcast::<Pad>()?;
    let os = strides_i64(out.shape());
    let base = p.widths.iter().zip(&os).map(|(&(lo, _), &st)| lo as i64 * st).sum();
    let lands = strided_positions(args[0].ty.shape(), base, &os)?;
    let mut map = vec![NO_SOURCE; out.numel()];
    for (src, &at) in lands.iter().enumerate() {
        map[at] = src;
    }
    Ok(Arc::new(args[0].sets.gather_map(&map)))
}

/// `concatenate`: each operand's elements where they land.
fn sparsity_concatenate(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let axis = op.try_downcast::<Concatenate>()?.axis;
    let os = strides_i64(out.shape());
    let mut from = vec![(usize::MAX, 0usize); out.numel()];
    let mut offset = 0i64;
    for (k, a) in args.iter().enumerate() {
        let lands = strided_positions(a.ty.shape(), offset * os[axis], &os)?;
        for (src, &at) in lands.iter().enumerate() {
            from[at] = (k, src);
        }
        offset += a.ty.shape()[axis] as i64;
    }
    let nnz = args.iter().map(|a| a.sets.nnz()).sum();
    let mut b = anvil_core::sparsity::Builder::new(out.numel(), nnz);
    for &(k, src) in &from {
        b.push(args.get(k).map_or(&[][..], |a| a.sets.row(src)));
    }
    let sets = b.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(SparsityRule, Reshape, anvil_core::sparsity::same);
register_rule!(SparsityRule, Permute, sparsity_permute);
register_rule!(SparsityRule, BroadcastTo, sparsity_broadcast_to);
register_rule!(SparsityRule, Slice, sparsity_slice);
register_rule!(SparsityRule, Pad, sparsity_pad);
register_rule!(SparsityRule, Concatenate, sparsity_concatenate);
