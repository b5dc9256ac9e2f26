//! The triangles and the diagonal of matrices: `tril`, `triu` and `Φ` (the
//! lower triangle with its diagonal halved, which Cholesky's derivative
//! uses) as one masking op, [`Triangle`]; and [`Diagonal`], with its
//! embedding ([`diag_embed`]) as its transpose.
//!
//! [`Triangle`] is computed element by element from each element's
//! position, so the CPU backend fuses it into the elementwise chain around
//! it, like the `jacfwd` seed: a mask never exists as an array. It is a
//! diagonal linear operator, hence its own transpose.

use crate::api::VarExt;
use crate::constant::Basis;
use anvil_core::{
    op::expect_arity, register_rule, Batched, Block, BlockAt, BlockMut, ElementwiseMath, Error,
    LinearArg, Op, Result, TensorType, Var,
};

/// Keeps one triangle of matrices `[..., m, n]` and zeroes the rest:
/// `lower` keeps `j - i <= offset` (`tril(x, offset)`), otherwise
/// `j - i >= offset` (`triu(x, offset)`). With `halve_diagonal`, the
/// entries on the diagonal `j - i == offset` are halved (`Φ` for
/// `lower`, `offset` 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Triangle {
    /// Keep the lower triangle (else the upper one).
    pub lower: bool,
    /// The diagonal that bounds the triangle (0: the main one; positive:
    /// above it).
    pub offset: i64,
    /// Halve the bounding diagonal.
    pub halve_diagonal: bool,
}

impl Triangle {
    /// `tril(x, offset)`.
    pub fn lower(offset: i64) -> Triangle {
        Triangle { lower: true, offset, halve_diagonal: false }
    }

    /// `triu(x, offset)`.
    pub fn upper(offset: i64) -> Triangle {
        Triangle { lower: false, offset, halve_diagonal: false }
    }

    /// `Φ(x)`: the lower triangle with the diagonal halved.
    pub fn phi() -> Triangle {
        Triangle { lower: true, offset: 0, halve_diagonal: true }
    }

    /// The factor of entry `(i, j)`: 1, 0 or ½.
    fn keeps(&self, i: usize, j: usize) -> Keep {
        let d = j as i64 - i as i64;
        let inside = if self.lower { d <= self.offset } else { d >= self.offset };
        match (inside, self.halve_diagonal && d == self.offset) {
            (false, _) => Keep::Zero,
            (true, true) => Keep::Half,
            (true, false) => Keep::One,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Zero,
    Half,
    One,
}

impl Op for Triangle {
    fn name(&self) -> &'static str {
        match (self.lower, self.halve_diagonal) {
            (_, true) => "phi",
            (true, false) => "tril",
            (false, false) => "triu",
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let t = &inputs[0];
        if t.rank() < 2 {
            return Err(Error::shape(
                self.name(),
                &[t.shape()],
                "argument 0 must be matrices [..., m, n] (rank at least 2)",
            ));
        }
        if self.halve_diagonal && !t.dtype().is_float() {
            return Err(Error::dtype(self.name(), "0", t.dtype(), "a float type (f64, f32)"));
        }
        Ok(t.clone())
    }
    fn params(&self) -> String {
        if self.halve_diagonal && self.offset == 0 {
            String::new()
        } else {
            format!("k={}", self.offset)
        }
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

/// Calls `f(k, keep)` for the elements `start..start + len` of matrices
/// `[..., m, n]` (row-major), walking rows: no division per element.
fn for_each_entry(
    shape: &[usize],
    start: usize,
    len: usize,
    t: &Triangle,
    mut f: impl FnMut(usize, Keep),
) {
    let (m, n) = match *shape {
        [.., m, n] if m > 0 && n > 0 => (m, n),
        _ => return,
    };
    let (mut i, mut j) = ((start / n) % m, start % n);
    for k in 0..len {
        f(k, t.keeps(i, j));
        j += 1;
        if j == n {
            j = 0;
            i = if i + 1 == m { 0 } else { i + 1 };
        }
    }
}

impl ElementwiseMath for Triangle {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()> {
        expect_arity(self, args, 1)?;
        macro_rules! masked {
            ($x:expr, $y:expr, $zero:expr, $half:expr) => {
                for_each_entry(at.shape, at.start, $y.len(), self, |k, keep| {
                    $y[k] = match keep {
                        Keep::One => $x[k],
                        Keep::Zero => $zero,
                        Keep::Half => $half($x[k]),
                    }
                })
            };
        }
        match (args[0], out) {
            (Block::F64(x), BlockMut::F64(y)) => masked!(x, y, 0.0, |v: f64| v * 0.5),
            (Block::F32(x), BlockMut::F32(y)) => masked!(x, y, 0.0, |v: f32| v * 0.5),
            (Block::I64(x), BlockMut::I64(y)) => masked!(x, y, 0, |v: i64| v),
            (Block::Bool(x), BlockMut::Bool(y)) => masked!(x, y, false, |v: bool| v),
            (_, out) => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// Batching: the same mask when the batch axis is not one of the two
/// matrix axes, else with the batch axis moved to the front.
fn vmap_triangle(op: &dyn Op, args: &[Batched], _: usize) -> Result<Batched> {
    let (x, k) = super::off_matrix_axes(&args[0]);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&x]), Some(k)))
}

/// Linear: `d mask(x) = mask(dx)`.
fn jvp_triangle(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}

/// A mask is diagonal, so self-adjoint: the cotangent is masked alike.
fn transpose_triangle(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(vec![args[0].is_linear().then(|| Var::apply_op(op.boxed(), &[ct]))])
}

/// Whether `p` always gives matrices whose strict upper triangle is zero:
/// a Cholesky factor (with [`super::OnFailure::Error`]: a failed element
/// in NaN mode is NaN throughout), its tangent, and its cotangent unless
/// symmetrised.
fn lower_triangular_result(p: &anvil_core::Producer) -> bool {
    use super::{Cholesky, CholeskyCotangent, CholeskyTangent, OnFailure};
    p.op_as::<Cholesky>().is_some_and(|c| c.on_failure == OnFailure::Error)
        || p.op_as::<CholeskyTangent>().is_some()
        || p.op_as::<CholeskyCotangent>().is_some_and(|c| !c.symmetrize)
}

/// A mask of a mask of the same kind, triangle and diagonal is the outer
/// mask alone (tril(tril(x)) = tril(x)); it saves a pass. So is the lower
/// triangle (`offset ≥ 0`) of a result that is lower triangular anyway
/// (the jvp of `cho_solve` takes `tril` of its factor).
fn rewrite_triangle(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let t = op.try_downcast::<Triangle>()?;
    let Some(p) = args[0].producer() else { return Ok(None) };
    if t.lower && t.offset >= 0 && !t.halve_diagonal && lower_triangular_result(&p) {
        return Ok(Some(args[0].clone()).filter(|v| v.ty() == out));
    }
    let inner = p.op_as::<Triangle>().filter(|u| u.lower == t.lower && u.offset == t.offset);
    Ok(inner
        .filter(|u| !u.halve_diagonal || !t.halve_diagonal)
        .map(|u| {
            let halve = u.halve_diagonal || t.halve_diagonal;
            p.inputs[0].apply(Triangle { halve_diagonal: halve, ..*t }, &[])
        })
        .filter(|v| v.ty() == out))
}

register_rule!(VmapRule, Triangle, vmap_triangle);
register_rule!(JvpRule, Triangle, jvp_triangle);
register_rule!(TransposeRule, Triangle, transpose_triangle);
register_rule!(RewriteRule, Triangle, rewrite_triangle);

// ---------------------------------------------------------------- diagonal

/// The diagonal `offset` of matrices `[..., m, n]`: `[..., len]` with
/// `out[..., i] = x[..., i, i + offset]` (`offset ≥ 0`) or
/// `x[..., i - offset, i]` (`offset < 0`), as `jnp.diagonal(x, offset,
/// -2, -1)`. A relayout (each element a copy of one input element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Diagonal {
    /// Which diagonal: 0 the main one, positive above it, negative below.
    pub offset: i64,
}

impl Diagonal {
    /// The length of the diagonal of an `m × n` matrix.
    pub fn len(&self, m: usize, n: usize) -> usize {
        let (m, n) = (m as i64, n as i64);
        let len = if self.offset >= 0 { m.min(n - self.offset) } else { n.min(m + self.offset) };
        len.max(0) as usize
    }

    /// [`Diagonal::len`] for dimensions that may be symbolic: `min(m, n -
    /// offset)` (or `min(n, m + offset)` below the main diagonal) when the
    /// order is decided for every binding.
    ///
    /// # Errors
    /// A length whose value depends on how the sizes compare at the call.
    pub fn symbolic_len(&self, m: usize, n: usize) -> Result<usize> {
        use anvil_core::shape::{dim_min, dim_provably_at_least, dim_sub, is_symbolic};
        if !is_symbolic(m) && !is_symbolic(n) {
            return Ok(self.len(m, n));
        }
        let (keep, cut) = if self.offset >= 0 { (m, n) } else { (n, m) };
        let shift = self.offset.unsigned_abs() as usize;
        if !dim_provably_at_least(cut, shift) {
            return Err(Error::invalid(
                "diagonal",
                "offset",
                format!(
                    "offset {} of a [{}, {}] matrix: whether the diagonal is empty depends \
                     on the sizes bound at the call",
                    self.offset,
                    anvil_core::shape::fmt_dim(m),
                    anvil_core::shape::fmt_dim(n)
                ),
            ));
        }
        dim_min("diagonal", keep, dim_sub(cut, shift)?)
    }

    /// The first element `(row, column)` of the diagonal.
    pub fn start(&self) -> (usize, usize) {
        if self.offset >= 0 {
            (0, self.offset as usize)
        } else {
            (self.offset.unsigned_abs() as usize, 0)
        }
    }
}

impl Op for Diagonal {
    fn name(&self) -> &'static str {
        "diagonal"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let t = &inputs[0];
        let [batch @ .., m, n] = t.shape() else {
            return Err(Error::shape(
                "diagonal",
                &[t.shape()],
                "argument 0 must be matrices [..., m, n] (rank at least 2)",
            ));
        };
        let mut shape = batch.to_vec();
        shape.push(self.symbolic_len(*m, *n)?);
        Ok(t.with_shape(shape))
    }
    fn params(&self) -> String {
        if self.offset == 0 {
            String::new()
        } else {
            format!("offset={}", self.offset)
        }
    }
    fn is_relayout(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Embeds `v` (`[..., len]`) as diagonal `offset` of zero matrices
/// `[..., m, n]`: the transpose of [`Diagonal`]. A product of the padded
/// values with a shifted identity ([`Basis`]), computed in one fused pass.
pub fn diag_embed(v: &Var, m: usize, n: usize, offset: i64) -> Var {
    let len = v.shape().last().copied().unwrap_or(0);
    let r = v.rank();
    let mut widths = vec![(0, 0); r];
    let (axis, room, shift) = if offset >= 0 { (0, m, offset) } else { (1, n, -offset) };
    // The room left after the diagonal (sizes may be symbolic: `len` is
    // `min(room, ...)`, so `room - len` is a dimension, never negative).
    let rest = anvil_core::shape::dim_sub(room, len).unwrap_or(0);
    widths[r - 1] = (0, rest);
    let padded = if rest != 0 { v.pad(&widths, 0.0) } else { v.clone() };
    let values = if axis == 0 { padded.unsqueeze(-1) } else { padded.unsqueeze(-2) };
    let seed = Basis { shape: vec![m, n], axis, offset: shift, dtype: v.dtype() };
    values * v.tracer().apply(Box::new(seed), &[])
}

/// Batching: as for [`Triangle`], off the two matrix axes.
fn vmap_diagonal(op: &dyn Op, args: &[Batched], _: usize) -> Result<Batched> {
    let (x, k) = super::off_matrix_axes(&args[0]);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&x]), Some(k)))
}

/// Linear: `d diag(x) = diag(dx)`.
fn jvp_diagonal(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}

/// The cotangent of the matrix: the diagonal's cotangent embedded.
fn transpose_diagonal(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let d = op.try_downcast::<Diagonal>()?;
    let [.., m, n] = *args[0].shape() else {
        return Err(Error::invalid("diagonal", "transpose", "a rank-2 operand was expected"));
    };
    Ok(vec![args[0].is_linear().then(|| diag_embed(ct, m, n, d.offset))])
}

register_rule!(VmapRule, Diagonal, vmap_diagonal);
register_rule!(JvpRule, Diagonal, jvp_diagonal);
register_rule!(TransposeRule, Diagonal, transpose_diagonal);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// Each kept entry depends on what it was; a zeroed one on nothing (exact).
fn sparsity_triangle(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let t = op.try_downcast::<Triangle>()?;
    let [.., m, n] = *out.shape() else {
        return Err(Error::invalid(t.name(), "sparsity", "a result of rank below 2"));
    };
    let kept = |e: usize| t.keeps(e / n % m, e % n) != Keep::Zero;
    Ok(Arc::new(args[0].sets.gather(out.numel(), |e| kept(e).then_some(e))))
}

/// A relayout: element `t` of a diagonal is one entry of its matrix (exact).
fn sparsity_diagonal(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let d = op.try_downcast::<Diagonal>()?;
    let [.., m, n] = *args[0].ty.shape() else {
        return Err(Error::invalid("diagonal", "sparsity", "an operand of rank below 2"));
    };
    let len = d.len(m, n).max(1);
    let (r0, c0) = d.start();
    Ok(Arc::new(args[0].sets.gather(out.numel(), |e| {
        let (b, t) = (e / len, e % len);
        Some((b * m + r0 + t) * n + c0 + t)
    })))
}

register_rule!(SparsityRule, Triangle, sparsity_triangle);
register_rule!(SparsityRule, Diagonal, sparsity_diagonal);
