//! The symmetric eigendecomposition `A = V·diag(w)·Vᵀ` (`jnp.linalg.eigh`).
//!
//! Derivatives (JAX's): with `X = Vᵀ Ȧ V`, `ẇ = diag(X)` and
//! `V̇ = V (F ∘ X)`, `F_ij = 1/(w_j − w_i)` off the diagonal. Where two
//! eigenvalues are closer than `16·ε·max|w|` their `F` entry is 0 (see the
//! module documentation of [`super`] for what that means): derivatives
//! stay finite at repeated eigenvalues.

use super::{square, symmetrize, Diagonal, Triangle};
use crate::api::VarExt;
use crate::batching::at_front;
use anvil_core::{op::expect_arity, register_rule, Batched, DType, Op, Result, TensorType, Var};

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

/// `ẇ = diag(Vᵀ Ȧ V)`, `V̇ = V (F ∘ Vᵀ Ȧ V)`.
fn jvp_eigh(op: &dyn Op, _: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let e = op.try_downcast::<Eigh>()?;
    let Some(da) = &t[0] else { return Ok(vec![None, None]) };
    let (w, v) = (&outs[0], &outs[1]);
    let da = if e.symmetrize_input {
        symmetrize(da)
    } else {
        let p = da.apply(Triangle::phi(), &[]);
        &p + &p.transpose()
    };
    let x = v.transpose().matmul(&da).matmul(v);
    let dw = x.apply(Diagonal { offset: 0 }, &[]);
    let diff = w.unsqueeze(-2) - w.unsqueeze(-1);
    let scale = w.abs().max(&[-1], true).unsqueeze(-1);
    let f = safe_reciprocal(&diff, &(scale * gap(w.dtype())));
    let dv = v.matmul(&(f * x));
    Ok(vec![Some(dw), Some(dv)])
}

register_rule!(VmapRule, Eigh, many: vmap_eigh);
register_rule!(JvpRule, Eigh, many: jvp_eigh);

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
