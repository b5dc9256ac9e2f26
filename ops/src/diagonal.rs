//! `diagonals`: a sum of scaled diagonals of the basis seed, and the seed
//! algebra that produces it.
//!
//! A `jacfwd` seed is the identity ([`Basis`]); the tangents an
//! elementwise or stencil function makes of it are the identity times
//! vectors, shifted, summed: banded matrices. Rewrite rules registered on
//! `mul`, `add`, `sub` and `neg` (in [`crate::elementwise`], calling
//! [`product`], [`combine`] and [`negate`] here) turn `I * v` into one
//! [`Diagonals`] node whose operands are the vectors, and merge such nodes,
//! so a Jacobian like W4's tridiagonal one is one generator: zeros, then
//! its diagonals, never three seeds multiplied and added element by
//! element over `n × n`.
//!
//! Values: exactly those of the products and sums they replace at every
//! entry a diagonal covers; an entry no diagonal covers is 0 where the
//! dense product `0 · v` would be NaN when `v` is infinite or NaN — a
//! derivative that is not finite shows in its own entry only, as in the
//! seed-sum rewrite of [`crate::reduce`].

use crate::api::VarExt;
use crate::constant::{as_basis, basis_ones, Basis};
use anvil_core::{
    op::expect_arity, register_rule, Batched, Block, BlockAt, BlockMut, ElementwiseMath, Error,
    LinearArg, Op, Result, TensorType, Var,
};

/// `Σ_d [position == basis index + offsets[d]] · values_d[basis index]`
/// over `shape`, with the basis index along `axis` and the position the
/// row-major index over the other axes (as for [`Basis`]): diagonal `d`
/// of the basis seed, scaled entry by entry by its operand `d`.
///
/// Operand `d` has the shape of the result with every axis but `axis` of
/// size 1 (one value per basis vector), and the result's dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagonals {
    /// The result's shape.
    pub shape: Vec<usize>,
    /// The axis that enumerates the basis vectors.
    pub axis: usize,
    /// One offset per diagonal (and per operand).
    pub offsets: Vec<i64>,
}

impl Diagonals {
    /// The shape of each operand: one value per basis vector, at `axis`.
    pub fn value_shape(&self) -> Vec<usize> {
        value_shape(&self.shape, self.axis)
    }
}

/// The shape with every axis but `axis` of size 1.
fn value_shape(shape: &[usize], axis: usize) -> Vec<usize> {
    shape.iter().enumerate().map(|(i, &d)| if i == axis { d } else { 1 }).collect()
}

impl Op for Diagonals {
    fn name(&self) -> &'static str {
        "diagonals"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic_shape(&self.shape) {
            return Ok(None);
        }
        Ok(Some(Box::new(Diagonals { shape: binding.shape(&self.shape)?, ..self.clone() })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, self.offsets.len())?;
        if self.axis >= self.shape.len() {
            return Err(Error::AxisOutOfRange {
                op: "diagonals".into(),
                axis: self.axis as i64,
                shape: self.shape.clone(),
                arg: "axis".into(),
            });
        }
        let want = self.value_shape();
        let Some(first) = inputs.first() else {
            return Err(Error::invalid("diagonals", "operands", "needs at least one diagonal"));
        };
        crate::elementwise::Domain::Float.check("diagonals", 0, first.dtype())?;
        for (i, t) in inputs.iter().enumerate() {
            if t.shape() != want || t.dtype() != first.dtype() {
                return Err(Error::shape(
                    "diagonals",
                    &[t.shape(), &want],
                    format!("operand {i} is {t}, expected {} of shape {want:?}", first.dtype()),
                ));
            }
        }
        Ok(first.with_shape(self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, axis={}, offsets={:?}", self.shape, self.axis, self.offsets)
    }
    fn linear_in(&self, _: usize) -> bool {
        true
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ElementwiseMath for Diagonals {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()> {
        expect_arity(self, args, self.offsets.len())?;
        let k = self.shape.get(self.axis).copied().unwrap_or(0);
        macro_rules! fill {
            ($y:expr, $variant:ident) => {{
                $y.fill(0.0);
                for (&offset, arg) in self.offsets.iter().zip(args) {
                    let Block::$variant(v) = arg else {
                        return Err(crate::elementwise::block_error(self, args, &out_kind($y)));
                    };
                    basis_ones(&self.shape, self.axis, k, offset, at.start, $y.len(), |j| {
                        $y[j] += v[j]
                    });
                }
            }};
        }
        match out {
            BlockMut::F64(y) => fill!(y, F64),
            BlockMut::F32(y) => fill!(y, F32),
            out => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// An empty result block of the same dtype (for an error message).
fn out_kind<T: BlockKind>(_: &mut [T]) -> BlockMut<'static> {
    T::empty()
}

trait BlockKind {
    fn empty() -> BlockMut<'static>;
}
impl BlockKind for f64 {
    fn empty() -> BlockMut<'static> {
        BlockMut::F64(&mut [])
    }
}
impl BlockKind for f32 {
    fn empty() -> BlockMut<'static> {
        BlockMut::F32(&mut [])
    }
}

// ------------------------------------------------------------------ rules

/// Batching: the seeds do not depend on the batch, so the batched result is
/// the sum over diagonals of the batched values where the seed is 1 and 0
/// elsewhere (a select, not a product: an entry no diagonal covers stays 0
/// when a value is NaN or infinite, as in the op itself).
fn vmap_diagonals(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let d = op.try_downcast::<Diagonals>()?;
    let mut sum: Option<Batched> = None;
    for (&offset, v) in d.offsets.iter().zip(args) {
        let seed = Basis { shape: d.shape.clone(), axis: d.axis, offset, dtype: v.var.dtype() };
        let seed = Var::apply_op(Box::new(seed), &[]);
        let zero = seed.scalar_like(0.0);
        let covered = Batched::new(seed.not_equal(&zero), None);
        let term = crate::batching::vmap_elementwise(
            &crate::elementwise::Select,
            &[covered, v.clone(), Batched::new(zero, None)],
            size,
        )?;
        sum = Some(match sum {
            Some(s) => {
                crate::batching::vmap_elementwise(&crate::elementwise::Add, &[s, term], size)?
            }
            None => term,
        });
    }
    sum.ok_or_else(|| Error::invalid("diagonals", "operands", "needs at least one diagonal"))
}

/// Linear in its values: the tangent is the same diagonals of the tangents.
fn jvp_diagonals(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    if t.iter().all(Option::is_none) {
        return Ok(None);
    }
    let dense: Vec<Var> = p.iter().zip(t).map(|(p, t)| crate::ad::dense(t, p)).collect();
    let refs: Vec<&Var> = dense.iter().collect();
    Ok(Some(Var::apply_op(op.boxed(), &refs)))
}

/// The cotangent of diagonal `d`'s values: the cotangent read along that
/// diagonal, `sum(ct * seed_d)` over every axis but the basis axis.
fn transpose_diagonals(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let d = op.try_downcast::<Diagonals>()?;
    let others: Vec<i64> = (0..d.shape.len()).filter(|&i| i != d.axis).map(|i| i as i64).collect();
    Ok(d.offsets
        .iter()
        .zip(args)
        .map(|(&offset, a)| {
            a.is_linear().then(|| {
                let seed =
                    Basis { shape: d.shape.clone(), axis: d.axis, offset, dtype: ct.dtype() };
                (ct * &Var::apply_op(Box::new(seed), &[])).sum_keepdims(&others)
            })
        })
        .collect())
}

register_rule!(VmapRule, Diagonals, vmap_diagonals);
register_rule!(JvpRule, Diagonals, jvp_diagonals);
register_rule!(TransposeRule, Diagonals, transpose_diagonals);

// ---------------------------------------------------------- seed algebra

/// A value seen as diagonals: its layout, offsets and values.
#[derive(Clone, Debug)]
struct Diag {
    shape: Vec<usize>,
    axis: usize,
    offsets: Vec<i64>,
    values: Vec<Var>,
}

impl Diag {
    fn of(v: &Var) -> Option<Diag> {
        if let Some(b) = as_basis(v) {
            let shape = value_shape(&b.shape, b.axis);
            let one = anvil_core::Scalar::F64(1.0).cast(b.dtype);
            let ones = v.tracer().apply(Box::new(crate::constant::Full { shape, value: one }), &[]);
            return Some(Diag {
                shape: b.shape,
                axis: b.axis,
                offsets: vec![b.offset],
                values: vec![ones],
            });
        }
        let p = v.producer()?;
        let d = p.op_as::<Diagonals>()?;
        Some(Diag {
            shape: d.shape.clone(),
            axis: d.axis,
            offsets: d.offsets.clone(),
            values: p.inputs.clone(),
        })
    }

    fn build(self, out: &TensorType) -> Option<Var> {
        if self.shape != out.shape() {
            return None;
        }
        let op = Diagonals { shape: self.shape, axis: self.axis, offsets: self.offsets };
        let refs: Vec<&Var> = self.values.iter().collect();
        Some(Var::apply_op(Box::new(op), &refs)).filter(|v| v.ty() == out)
    }
}

/// The values along diagonal `offset` of a value `v` that broadcasts to
/// `shape` and varies along one axis only: one value per basis vector (of
/// the value shape), or `None` when `v` varies along both the basis axis
/// and the space, or along a space of more than one axis.
fn along(v: &Var, shape: &[usize], axis: usize, offset: i64) -> Option<Var> {
    let rank = shape.len();
    if v.rank() > rank {
        return None;
    }
    let lead = rank - v.rank();
    let dim = |i: usize| if i < lead { 1 } else { v.shape()[i - lead] };
    let k = shape[axis];
    let vshape = value_shape(shape, axis);
    let varies: Vec<usize> = (0..rank).filter(|&i| dim(i) != 1).collect();
    let as_i64 = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    match varies[..] {
        // A scalar, or values per basis vector: as they are.
        [] => Some(v.reshape(&[]).broadcast_to(&vshape)),
        [a] if a == axis => Some(v.reshape(&as_i64(&vshape))),
        // Values over a one-dimensional space: the entry on the diagonal
        // for basis vector b is v[b + offset] (0 where the diagonal leaves
        // the space: no entry there).
        [a] if (0..rank).filter(|&i| i != axis && shape[i] != 1).eq([a]) => {
            let n = shape[a] as i64;
            let flat = v.reshape(&[n]);
            let (lo, hi) = ((-offset).max(0), (offset + k as i64 - n).max(0));
            let padded =
                if lo > 0 || hi > 0 { flat.pad(&[(lo as usize, hi as usize)], 0.0) } else { flat };
            let from = offset + lo;
            let part = padded.slice_axis(0, Some(from), Some(from + k as i64), 1);
            Some(part.reshape(&as_i64(&vshape)))
        }
        _ => None,
    }
}

/// `diagonals * v` (either order), or `diagonals / v` with `quotient`, as
/// diagonals: each diagonal's values times (divided by) `v` along it.
/// `None` when no operand is diagonals (the numerator, for a quotient) or
/// `v` is not a function of one coordinate.
pub fn product(a: &Var, b: &Var, quotient: bool, out: &TensorType) -> Option<Var> {
    let (mut d, v) = match (Diag::of(a), Diag::of(b)) {
        (Some(d), None) => (d, b),
        (None, Some(d)) if !quotient => (d, a),
        _ => return None,
    };
    if v.dtype() != out.dtype() || v.numel() >= out.numel().max(2) {
        return None;
    }
    for (offset, values) in d.offsets.iter().zip(d.values.iter_mut()) {
        let w = along(v, &d.shape, d.axis, *offset)?;
        *values = if quotient { &*values / &w } else { &*values * &w };
    }
    d.build(out)
}

/// `a ± b` of two diagonals of one layout: the union of their diagonals,
/// values of equal offsets added.
pub fn combine(a: &Var, b: &Var, subtract: bool, out: &TensorType) -> Option<Var> {
    let (mut x, y) = (Diag::of(a)?, Diag::of(b)?);
    if x.shape != y.shape || x.axis != y.axis {
        return None;
    }
    for (offset, values) in y.offsets.into_iter().zip(y.values) {
        match x.offsets.iter().position(|&o| o == offset) {
            Some(i) => {
                x.values[i] =
                    if subtract { &x.values[i] - &values } else { &x.values[i] + &values };
            }
            None => {
                x.offsets.push(offset);
                x.values.push(if subtract { -values } else { values });
            }
        }
    }
    x.build(out)
}

/// `-d` of diagonals: the values negated.
pub fn negate(a: &Var, out: &TensorType) -> Option<Var> {
    let p = a.producer()?;
    p.op_as::<Diagonals>()?;
    let mut d = Diag::of(a)?;
    d.values = d.values.iter().map(|v| -v).collect();
    d.build(out)
}

/// A sum of diagonals over every axis but the basis axis, when every
/// diagonal's entries all lie inside the space (offset 0 of a square seed):
/// the sum of the values, one rounding per diagonal.
pub fn sum_over_space(x: &Var, axes: &[usize], out: &TensorType) -> Option<Var> {
    let d = Diag::of(x)?;
    let k = d.shape[d.axis];
    let space: usize =
        d.shape.iter().enumerate().filter(|&(i, _)| i != d.axis).map(|(_, &s)| s).product();
    let all_space = axes.len() + 1 == d.shape.len() && !axes.contains(&d.axis);
    if !all_space || d.offsets.iter().any(|&o| o < 0 || o as usize + k > space) {
        return None;
    }
    let mut sum = d.values.first()?.clone();
    for v in &d.values[1..] {
        sum = sum + v;
    }
    let shape: Vec<i64> = out.shape().iter().map(|&s| s as i64).collect();
    Some(sum.reshape(&shape)).filter(|v| v.ty() == out)
}

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// Entry `(position p, basis vector b)` depends on the values of the
/// diagonals that pass through it (`p == b + offset`), at `b`.
fn sparsity_diagonals(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let d = op.try_downcast::<Diagonals>()?;
    let k = d.shape[d.axis];
    let inner: usize = d.shape[d.axis + 1..].iter().product();
    let mut b = Builder::new(out.numel(), args.iter().map(|a| a.sets.nnz()).sum());
    let mut u = Union::default();
    for e in 0..out.numel() {
        let (outer, rest) = (e / (k * inner).max(1), e % (k * inner).max(1));
        let (basis, i) = (rest / inner.max(1), rest % inner.max(1));
        let p = (outer * inner + i) as i64;
        let hits = d.offsets.iter().zip(args).filter(|(&o, _)| p == basis as i64 + o);
        b.push_union(&mut u, hits.map(|(_, a)| a.sets.row(basis)));
    }
    let sets = b.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(SparsityRule, Diagonals, sparsity_diagonals);
