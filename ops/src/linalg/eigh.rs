//! The symmetric eigendecomposition `A = V·diag(w)·Vᵀ` (`jnp.linalg.eigh`).
//!
//! Derivatives (JAX's): with `X = Vᵀ Ȧ V`, `ẇ = diag(X)` and
//! `V̇ = V (F ∘ X)`, `F_ij = 1/(w_j − w_i)` off the diagonal. Where two
//! eigenvalues are closer than `16·ε·max|w|` their `F` entry is 0 (see the
//! module documentation of [`super`] for what that means): derivatives
//! stay finite at repeated eigenvalues.
//!
//! The tangent is one op, [`EighTangent`], and its transpose one op,
//! [`EighCotangent`] (reverse mode): the backend computes each in one pass
//! per matrix. Their own derivatives (for `hessian`) are written in
//! batched ops.

use super::{all_front, diag_embed, same_dtype, square, symmetrize, Diagonal, Triangle};
use crate::api::VarExt;
use crate::batching::at_front;
use anvil_core::{
    op::expect_arity, register_rule, Batched, DType, Error, LinearArg, Op, Result, TensorType, Var,
};

/// Eigenvalues `w` `[..., n]` (ascending) and eigenvectors `V`
/// `[..., n, n]` (columns, orthonormal) of symmetric matrices
/// `[..., n, n]`: two results.
///
/// With `symmetrize_input` (the default of [`super::eigh()`], as JAX) the
/// decomposed matrix is `(A + Aᵀ)/2`, and so is the tangent; without, it is
/// the symmetric matrix that `A`'s lower triangle stands for. Each
/// eigenvector's component of largest magnitude is positive (the first
/// one on exact ties). Never fails on finite input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Eigh {
    /// Decompose `(A + Aᵀ)/2` (else the lower triangle of `A`, as symmetric).
    pub symmetrize_input: bool,
}

impl Default for Eigh {
    fn default() -> Self {
        Eigh { symmetrize_input: true }
    }
}

impl Op for Eigh {
    fn name(&self) -> &'static str {
        "eigh"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, 1)?;
        let a = &inputs[0];
        square("eigh", a, 0)?;
        let w = a.with_shape(a.shape()[..a.rank() - 1].to_vec());
        Ok(vec![w, a.clone()])
    }
    fn params(&self) -> String {
        if self.symmetrize_input {
            String::new()
        } else {
            "symmetrize_input=false".into()
        }
    }
}

/// Batching: one decomposition per matrix, the batch axis first.
fn vmap_eigh(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let a = at_front(&args[0], size);
    let r = Var::apply_op_n(op.boxed(), &[&a], 2);
    Ok(r.into_iter().map(|v| Batched::new(v, Some(0))).collect())
}

/// The relative gap below which two eigenvalues (or squared singular
/// values) count as equal in the derivatives: `16·ε` of the dtype.
pub(crate) fn gap(dtype: DType) -> f64 {
    let eps = if dtype == DType::F32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
    16.0 * eps
}

/// `F_ij = 1/(d_ij)` where `|d_ij| > tol`, else 0, for differences `d`
/// `[..., n, n]` and tolerances `tol` `[..., 1, 1]`; the division never
/// sees a zero (so neither does its derivative).
pub(crate) fn safe_reciprocal(d: &Var, tol: &Var) -> Var {
    let big = d.abs().gt(tol);
    let one = d.scalar_like(1.0);
    let zero = d.scalar_like(0.0);
    big.select(&big.select(d, &one).recip(), &zero)
}

/// `ẇ = diag(Vᵀ Ȧ V)`, `V̇ = V (F ∘ Vᵀ Ȧ V)`: one [`EighTangent`].
fn jvp_eigh(op: &dyn Op, _: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let e = op.try_downcast::<Eigh>()?;
    let Some(da) = &t[0] else { return Ok(vec![None, None]) };
    let tangent = EighTangent { symmetrize_input: e.symmetrize_input };
    let r = Var::apply_op_n(Box::new(tangent), &[&outs[0], &outs[1], da], 2);
    Ok(r.into_iter().map(Some).collect())
}

register_rule!(VmapRule, Eigh, many: vmap_eigh);
register_rule!(JvpRule, Eigh, many: jvp_eigh);

// ------------------------------------------------------ the linear pair

/// The tangent of [`Eigh`] as one op: from the eigenvalues `w` `[..., n]`,
/// the eigenvectors `V` `[..., n, n]` (columns) and the input's tangent
/// `Ȧ` `[..., n, n]`, two results `ẇ = diag(X)` and `V̇ = V (F ∘ X)` with
/// `X = Vᵀ S(Ȧ) V` and `F_ij = 1/(w_j − w_i)`, 0 where `|w_j − w_i| ≤
/// 16·ε·max|w|` (ε of the dtype) and on the diagonal. `S(Ȧ)` is
/// `(Ȧ + Ȧᵀ)/2` with `symmetrize_input`, else the symmetric matrix whose
/// lower triangle is `Ȧ`'s (as [`Eigh`] reads its input). Linear in `Ȧ`;
/// its transpose is [`EighCotangent`]. The CPU kernel reads each matrix
/// once, where the same formula in batched ops makes a dozen passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EighTangent {
    /// As [`Eigh::symmetrize_input`].
    pub symmetrize_input: bool,
}

/// The transpose of [`EighTangent`] in `Ȧ`: from `w`, `V` and the
/// cotangents `w̄` `[..., n]` and `V̄` `[..., n, n]`,
/// `Ā = S*(V (diag(w̄) + F ∘ (Vᵀ V̄)) Vᵀ)` `[..., n, n]`, with `S*(G) =
/// (G + Gᵀ)/2` with `symmetrize_input`, else `Φ(G + Gᵀ)` (lower
/// triangular). Linear in `w̄` and `V̄` together; its transpose is
/// [`EighTangent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EighCotangent {
    /// As [`Eigh::symmetrize_input`].
    pub symmetrize_input: bool,
}

impl Default for EighTangent {
    fn default() -> Self {
        EighTangent { symmetrize_input: true }
    }
}

impl Default for EighCotangent {
    fn default() -> Self {
        EighCotangent { symmetrize_input: true }
    }
}

fn params_of(symmetrize_input: bool) -> String {
    if symmetrize_input {
        String::new()
    } else {
        "symmetrize_input=false".into()
    }
}

/// The shapes of the pair: eigenvalues `[..., n]` at `values` (`w`, and
/// `w̄` for the cotangent), matrices `[..., n, n]` everywhere else, one
/// dtype.
fn check_pair(op: &dyn Op, inputs: &[TensorType], values: &[usize]) -> Result<()> {
    let v = &inputs[1];
    let n = square(op.name(), v, 1)?;
    let mut vector = v.shape()[..v.rank() - 1].to_vec();
    vector[v.rank() - 2] = n;
    for (k, t) in inputs.iter().enumerate() {
        same_dtype(op.name(), v, t, k)?;
        let want = if values.contains(&k) { &vector[..] } else { v.shape() };
        if t.shape() != want {
            let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
            return Err(Error::shape(
                op.name(),
                &shapes,
                format!("argument {k} must be {want:?} (the eigenvectors are {:?})", v.shape()),
            ));
        }
    }
    Ok(())
}

impl Op for EighTangent {
    fn name(&self) -> &'static str {
        "eigh_tangent"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, 3)?;
        check_pair(self, inputs, &[0])?;
        Ok(vec![inputs[0].clone(), inputs[1].clone()])
    }
    fn params(&self) -> String {
        params_of(self.symmetrize_input)
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 2
    }
}

impl Op for EighCotangent {
    fn name(&self) -> &'static str {
        "eigh_cotangent"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 4)?;
        check_pair(self, inputs, &[0, 2])?;
        Ok(inputs[1].clone())
    }
    fn params(&self) -> String {
        params_of(self.symmetrize_input)
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 2 || k == 3
    }
}

/// `S(Ȧ)`: the symmetric matrix the decomposition sees.
fn sym_of(da: &Var, symmetrize_input: bool) -> Var {
    if symmetrize_input {
        symmetrize(da)
    } else {
        let p = da.apply(Triangle::phi(), &[]);
        &p + &p.transpose()
    }
}

/// `S*(G)`, the adjoint of [`sym_of`].
fn sym_adjoint(g: &Var, symmetrize_input: bool) -> Var {
    let s = g + &g.transpose();
    if symmetrize_input {
        s * 0.5
    } else {
        s.apply(Triangle::phi(), &[])
    }
}

/// `F` of the eigenvalues `w` `[..., n]`: `[..., n, n]`.
fn gaps(w: &Var) -> Var {
    let diff = w.unsqueeze(-2) - w.unsqueeze(-1);
    let scale = w.abs().max(&[-1], true).unsqueeze(-1);
    safe_reciprocal(&diff, &(scale * gap(w.dtype())))
}

/// `Ḟ = −F² ∘ (ẇ_j − ẇ_i)` (0 where `F` is).
fn gaps_tangent(f: &Var, dw: &Var) -> Var {
    let ddiff = dw.unsqueeze(-2) - dw.unsqueeze(-1);
    -(f.square() * ddiff)
}

/// Batching of the pair: every operand batch-first.
fn vmap_tangent(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let v = all_front(args, size);
    let r = Var::apply_op_n(op.boxed(), &[&v[0], &v[1], &v[2]], 2);
    Ok(r.into_iter().map(|x| Batched::new(x, Some(0))).collect())
}

fn vmap_cotangent(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let v = all_front(args, size);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&v[0], &v[1], &v[2], &v[3]]), Some(0)))
}

/// `X = Vᵀ S V`: `Ẋ = V̇ᵀ S V + Vᵀ S V̇`, then `d ẇ = diag(Ẋ)` and
/// `d V̇ = V̇ (F ∘ X) + V (Ḟ ∘ X + F ∘ Ẋ)`, plus the op itself on `d Ȧ`.
fn jvp_eigh_tangent(
    op: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    _: &[Var],
) -> Result<Vec<Option<Var>>> {
    let e = *op.try_downcast::<EighTangent>()?;
    let (w, v) = (&p[0], &p[1]);
    let linear = t[2].as_ref().map(|d| Var::apply_op_n(Box::new(e), &[w, v, d], 2));
    let (mut dw, mut dv) = match linear {
        Some(r) => (Some(r[0].clone()), Some(r[1].clone())),
        None => (None, None),
    };
    if t[0].is_some() || t[1].is_some() {
        let s = sym_of(&p[2], e.symmetrize_input);
        let x = v.transpose().matmul(&s).matmul(v);
        let f = gaps(w);
        let mut from_v = None;
        let mut inner = None;
        if let Some(vd) = &t[1] {
            let xd = vd.transpose().matmul(&s).matmul(v) + v.transpose().matmul(&s).matmul(vd);
            let dwx = xd.apply(Diagonal { offset: 0 }, &[]);
            dw = crate::ad::add_tangents(dw, Some(dwx), w.shape());
            from_v = Some(vd.matmul(&(&f * &x)));
            inner = Some(&f * &xd);
        }
        if let Some(wd) = &t[0] {
            inner = crate::ad::add_tangents(inner, Some(gaps_tangent(&f, wd) * &x), v.shape());
        }
        let from_inner = inner.map(|i| v.matmul(&i));
        dv = crate::ad::add_tangents(
            dv,
            crate::ad::add_tangents(from_v, from_inner, v.shape()),
            v.shape(),
        );
    }
    Ok(vec![dw, dv])
}

/// `Z = Vᵀ V̄`, `Y = diag(w̄) + F ∘ Z`, `G = V Y Vᵀ`: `Ż = V̇ᵀ V̄`,
/// `Ẏ = Ḟ ∘ Z + F ∘ Ż`, `Ġ = V̇ Y Vᵀ + V Ẏ Vᵀ + V Y V̇ᵀ`, `d Ā = S*(Ġ)`,
/// plus the op itself on `(d w̄, d V̄)`.
fn jvp_eigh_cotangent(op: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let e = *op.try_downcast::<EighCotangent>()?;
    let (w, v, wbar, vbar) = (&p[0], &p[1], &p[2], &p[3]);
    let linear = match (&t[2], &t[3]) {
        (None, None) => None,
        (a, b) => {
            let a = a.clone().unwrap_or_else(|| wbar.zeros_like());
            let b = b.clone().unwrap_or_else(|| vbar.zeros_like());
            Some(Var::apply_op(Box::new(e), &[w, v, &a, &b]))
        }
    };
    if t[0].is_none() && t[1].is_none() {
        return Ok(linear);
    }
    let n = v.shape()[v.rank() - 1];
    let f = gaps(w);
    let z = v.transpose().matmul(vbar);
    let y = diag_embed(wbar, n, n, 0) + &f * &z;
    let mut yd = t[0].as_ref().map(|wd| gaps_tangent(&f, wd) * &z);
    let mut gd = None;
    if let Some(vd) = &t[1] {
        yd = crate::ad::add_tangents(yd, Some(&f * &vd.transpose().matmul(vbar)), v.shape());
        let vt = v.transpose();
        gd = Some(vd.matmul(&y).matmul(&vt) + v.matmul(&y).matmul(&vd.transpose()));
    }
    let from_y = yd.map(|yd| v.matmul(&yd).matmul(&v.transpose()));
    let gd = crate::ad::add_tangents(gd, from_y, v.shape());
    let nonlinear = gd.map(|g| sym_adjoint(&g, e.symmetrize_input));
    Ok(crate::ad::add_tangents(linear, nonlinear, out.shape()))
}

fn known<'a>(op: &dyn Op, args: &'a [LinearArg]) -> Result<(&'a Var, &'a Var)> {
    match (args[0].known(), args[1].known()) {
        (Some(w), Some(v)) => Ok((w, v)),
        _ => Err(Error::invalid(
            op.name(),
            "transpose",
            "linear in the tangents only, for known eigenvalues and eigenvectors",
        )),
    }
}

/// `EighTangent(w, V, ·)ᵀ = EighCotangent(w, V, ·, ·)`.
fn transpose_eigh_tangent(
    op: &dyn Op,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let e = op.try_downcast::<EighTangent>()?;
    let (w, v) = known(op, args)?;
    if !args[2].is_linear() {
        return Err(Error::invalid(op.name(), "transpose", "linear in its third operand only"));
    }
    let (cw, cv) = match (&cts[0], &cts[1]) {
        (None, None) => return Ok(vec![None, None, None]),
        (a, b) => (
            a.clone().unwrap_or_else(|| w.zeros_like()),
            b.clone().unwrap_or_else(|| v.zeros_like()),
        ),
    };
    let cot = EighCotangent { symmetrize_input: e.symmetrize_input };
    Ok(vec![None, None, Some(Var::apply_op(Box::new(cot), &[w, v, &cw, &cv]))])
}

/// `EighCotangent(w, V, ·, ·)ᵀ = EighTangent(w, V, ·)`: the cotangent of
/// each linear operand (a known third or fourth operand is taken as the
/// zero the rules above put there).
fn transpose_eigh_cotangent(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let e = op.try_downcast::<EighCotangent>()?;
    let (w, v) = known(op, args)?;
    let tangent = EighTangent { symmetrize_input: e.symmetrize_input };
    let r = Var::apply_op_n(Box::new(tangent), &[w, v, ct], 2);
    let pick = |k: usize| args[k].is_linear().then(|| r[k - 2].clone());
    Ok(vec![None, None, pick(2), pick(3)])
}

register_rule!(VmapRule, EighTangent, many: vmap_tangent);
register_rule!(VmapRule, EighCotangent, vmap_cotangent);
register_rule!(JvpRule, EighTangent, many: jvp_eigh_tangent);
register_rule!(JvpRule, EighCotangent, jvp_eigh_cotangent);
register_rule!(TransposeRule, EighTangent, many: transpose_eigh_tangent);
register_rule!(TransposeRule, EighCotangent, transpose_eigh_cotangent);

// -------------------------------------------------------------- sparsity

use super::sparsity::{per_matrix, wholes, Mats};
use anvil_core::sparsity::{Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// Every eigenvalue and eigenvector entry depends on the whole symmetric
/// matrix: all of `A` when symmetrised, else its lower triangle.
fn sparsity_eigh(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let e = op.try_downcast::<Eigh>()?;
    let a = Mats::of(op, &args[0])?;
    let whole = wholes(&a, |i, j| e.symmetrize_input || j <= i);
    outs.iter().map(|t| per_matrix(op, &whole, t, cx)).collect()
}

register_rule!(SparsityRule, Eigh, many: sparsity_eigh);

/// The tangent pair: every result entry of a matrix depends on all of that
/// matrix's operands (eigenvalues, eigenvectors, tangents). A bound: `ẇ`
/// does not depend on `w`, and `ẇ_i` only on column `i` of `V`.
fn pair_wholes(args: &[SparsityArg<'_>]) -> Vec<Vec<super::sparsity::Index>> {
    let v = args[1].ty;
    let batch: usize = v.shape()[..v.rank().saturating_sub(2)].iter().product();
    (0..batch)
        .map(|b| {
            let rows = args.iter().flat_map(|a| {
                let per = a.ty.numel() / batch.max(1);
                (b * per..(b + 1) * per).map(move |e| a.sets.row(e))
            });
            super::sparsity::union(rows)
        })
        .collect()
}

fn sparsity_eigh_tangent(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let whole = pair_wholes(args);
    outs.iter().map(|t| per_matrix(op, &whole, t, cx)).collect()
}

fn sparsity_eigh_cotangent(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    per_matrix(op, &pair_wholes(args), out, cx)
}

register_rule!(SparsityRule, EighTangent, many: sparsity_eigh_tangent);
register_rule!(SparsityRule, EighCotangent, sparsity_eigh_cotangent);
