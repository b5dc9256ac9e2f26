//! The singular value decomposition `A = U·diag(s)·Vᵀ` (`jnp.linalg.svd`).
//!
//! Derivatives (JAX's `svd_jvp_rule`, real case) are defined for the
//! reduced decomposition (`full_matrices = false`, or square matrices) and
//! for the singular values alone; the full decomposition of a rectangular
//! matrix has no derivative (JAX raises too) and says so in an error. With
//! `dS = Uᵀ dA V`: `ds = diag(dS)`, `dU = U (F ∘ (dS S + S dSᵀ))`, `dV = V
//! (F ∘ (S dS + dSᵀ S))`, `F_ij = 1/(s_j² − s_i²)`, plus the components
//! outside the range of `U` (tall) or `V` (wide) divided by `s`. Entries of
//! `F` where two singular values meet and `1/s` at a zero singular value
//! are taken as 0 (below `16·ε·max s`; see [`super`]).

use super::eigh::{gap, safe_reciprocal};
use super::{matrix, Diagonal};
use crate::api::VarExt;
use crate::batching::at_front;
use anvil_core::{op::expect_arity, register_rule, Batched, Error, Op, Result, TensorType, Var};

/// Singular value decomposition of `[..., m, n]` matrices, `k = min(m, n)`.
///
/// With `compute_uv`, three results: `U` `[..., m, k]` (`[..., m, m]` with
/// `full_matrices`), `s` `[..., k]` (descending, non-negative) and `Vᵀ`
/// `[..., k, n]` (`[..., n, n]`); without, `s` alone. For `j < k` the
/// component of largest magnitude of column `j` of `U` is positive, and
/// row `j` of `Vᵀ` follows it. Never fails on finite input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Svd {
    /// `U` and `Vᵀ` square (else reduced to `k` columns and rows).
    pub full_matrices: bool,
    /// Compute `U` and `Vᵀ` (else only `s`).
    pub compute_uv: bool,
}

impl Default for Svd {
    fn default() -> Self {
        Svd { full_matrices: false, compute_uv: true }
    }
}

impl Op for Svd {
    fn name(&self) -> &'static str {
        "svd"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, 1)?;
        let a = &inputs[0];
        let (m, n) = matrix("svd", a, 0)?;
        let k = anvil_core::shape::dim_min("svd", m, n)?;
        let batch = super::batch_of(a);
        let with = |dims: &[usize]| {
            let mut s = batch.to_vec();
            s.extend_from_slice(dims);
            a.with_shape(s)
        };
        if !self.compute_uv {
            return Ok(vec![with(&[k])]);
        }
        let (uc, vr) = if self.full_matrices { (m, n) } else { (k, k) };
        Ok(vec![with(&[m, uc]), with(&[k]), with(&[vr, n])])
    }
    fn params(&self) -> String {
        format!("full_matrices={}, compute_uv={}", self.full_matrices, self.compute_uv)
    }
}

/// Batching: one decomposition per matrix, the batch axis first.
fn vmap_svd(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let a = at_front(&args[0], size);
    let n = if op.try_downcast::<Svd>()?.compute_uv { 3 } else { 1 };
    let r = Var::apply_op_n(op.boxed(), &[&a], n);
    Ok(r.into_iter().map(|v| Batched::new(v, Some(0))).collect())
}

fn jvp_svd(op: &dyn Op, p: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let svd = op.try_downcast::<Svd>()?;
    let Some(da) = &t[0] else { return Ok(vec![None; outs.len()]) };
    let [.., m, n] = *p[0].shape() else {
        return Err(Error::invalid("svd", "jvp", "matrices were expected"));
    };
    if svd.compute_uv && svd.full_matrices && m != n {
        return Err(Error::invalid(
            "svd",
            "full_matrices",
            format!("the derivative of the full SVD of a {m} × {n} matrix is not defined (JAX raises too); use full_matrices=false"),
        ));
    }
    let reduced = Svd { full_matrices: false, compute_uv: true };
    let r = if svd.compute_uv {
        outs.to_vec()
    } else {
        Var::apply_op_n(Box::new(reduced), &[&p[0]], 3)
    };
    let (u, s, vt) = (&r[0], &r[1], &r[2]);
    let v = vt.transpose();
    let ds_mat = u.transpose().matmul(da).matmul(&v);
    let ds = ds_mat.apply(Diagonal { offset: 0 }, &[]);
    if !svd.compute_uv {
        return Ok(vec![Some(ds)]);
    }
    let s_row = s.unsqueeze(-2);
    let s_col = s.unsqueeze(-1);
    let smax = s.max(&[-1], true).unsqueeze(-1);
    let tol = smax.square() * gap(s.dtype());
    let f = safe_reciprocal(&(s_row.square() - s_col.square()), &tol);
    let dss = &ds_mat * &s_row;
    let sds = &s_col * &ds_mat;
    let mut du = u.matmul(&(&f * &(&dss + &dss.transpose())));
    let mut dv = v.matmul(&(&f * &(&sds + &sds.transpose())));
    let s_inv = safe_reciprocal(&s_row, &(smax * gap(s.dtype())));
    if m > n {
        let dav = da.matmul(&v);
        du = du + (&dav - &u.matmul(&u.transpose().matmul(&dav))) * &s_inv;
    }
    if n > m {
        let dau = da.transpose().matmul(u);
        dv = dv + (&dau - &v.matmul(&vt.matmul(&dau))) * &s_inv;
    }
    Ok(vec![Some(du), Some(ds), Some(dv.transpose())])
}

register_rule!(VmapRule, Svd, many: vmap_svd);
register_rule!(JvpRule, Svd, many: jvp_svd);

// -------------------------------------------------------------- sparsity

use super::sparsity::{per_matrix, wholes, Mats};
use anvil_core::sparsity::{Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// Every factor's entry depends on the whole matrix.
fn sparsity_svd(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let whole = wholes(&Mats::of(op, &args[0])?, |_, _| true);
    outs.iter().map(|t| per_matrix(op, &whole, t, cx)).collect()
}

register_rule!(SparsityRule, Svd, many: sparsity_svd);
