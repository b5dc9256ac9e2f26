//! The QR factorisation `A = Q·R` (`jnp.linalg.qr`).
//!
//! Derivative (JAX's `qr_jvp_rule`, Townsend's derivation), for `m ≥ n`
//! in the reduced mode: with `C = Qᵀ dA R⁻¹` and `Ω = tril(C, −1) −
//! tril(C, −1)ᵀ`, `dQ = Q (Ω − C) + dA R⁻¹` and `dR = (C − Ω) R`. For wide
//! matrices (`m < n`, where the two modes agree), `A = [X | Y]` with `X`
//! square: `Q`, `R_X` follow `X` by the formula above and `dR_Y = dQᵀ Y +
//! Qᵀ dY` (as JAX's). The complete mode of a tall matrix has no
//! derivative here (JAX's rule for it reads the Householder vectors from
//! `Q`, which the non-negative diagonal of `R` changes) and says so in an
//! error.

use super::{matrix, Triangle, TriangularSolve};
use crate::api::VarExt;
use crate::batching::at_front;
use anvil_core::{op::expect_arity, register_rule, Batched, Error, Op, Result, TensorType, Var};

/// The shapes of [`Qr`]'s factors, as `mode` of `jnp.linalg.qr`
/// (`k = min(m, n)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QrMode {
    /// `Q` `[..., m, k]`, `R` `[..., k, n]`.
    #[default]
    Reduced,
    /// `Q` `[..., m, m]`, `R` `[..., m, n]`.
    Complete,
}

/// Householder QR of `[..., m, n]` matrices, two results `Q`
/// (orthonormal columns) and `R` (upper triangular or trapezoidal), with
/// `R`'s diagonal non-negative (so the factors are unique for a matrix of
/// full column rank). Never fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Qr {
    /// The factors' shapes.
    pub mode: QrMode,
}

impl Op for Qr {
    fn name(&self) -> &'static str {
        "qr"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, 1)?;
        let a = &inputs[0];
        let (m, n) = matrix("qr", a, 0)?;
        let c = match self.mode {
            QrMode::Reduced => anvil_core::shape::dim_min("qr", m, n)?,
            QrMode::Complete => m,
        };
        let batch = super::batch_of(a);
        let with = |r: usize, c: usize| {
            let mut s = batch.to_vec();
            s.extend([r, c]);
            a.with_shape(s)
        };
        Ok(vec![with(m, c), with(c, n)])
    }
    fn params(&self) -> String {
        match self.mode {
            QrMode::Reduced => "mode=reduced".into(),
            QrMode::Complete => "mode=complete".into(),
        }
    }
}

/// Batching: one factorisation per matrix, the batch axis first.
fn vmap_qr(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let a = at_front(&args[0], size);
    let r = Var::apply_op_n(op.boxed(), &[&a], 2);
    Ok(r.into_iter().map(|v| Batched::new(v, Some(0))).collect())
}

/// The tangents of a square or tall reduced factorisation.
fn tall_tangents(q: &Var, r: &Var, da: &Var) -> (Var, Var) {
    let rinv = TriangularSolve { left_side: false, lower: false, ..Default::default() };
    let dx_rinv = r.apply(rinv, &[da]);
    let c = q.transpose().matmul(&dx_rinv);
    let low = c.apply(Triangle::lower(-1), &[]);
    let omega = &low - &low.transpose();
    let dq = q.matmul(&(&omega - &c)) + dx_rinv;
    let dr = (c - omega).matmul(r);
    (dq, dr)
}

fn jvp_qr(op: &dyn Op, p: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let qr = op.try_downcast::<Qr>()?;
    let Some(da) = &t[0] else { return Ok(vec![None, None]) };
    let [.., m, n] = *p[0].shape() else {
        return Err(Error::invalid("qr", "jvp", "matrices were expected"));
    };
    let (q, r) = (&outs[0], &outs[1]);
    // Tall or square, or wide: decided for symbolic sizes by their ranges.
    use anvil_core::shape::{dim_add, dim_provably_at_least, fmt_dim};
    let tall = dim_provably_at_least(m, n);
    if !tall && !dim_provably_at_least(n, dim_add(m, 1)?) {
        return Err(Error::invalid(
            "qr",
            "jvp",
            format!(
                "whether the {} × {} matrices are tall or wide depends on the sizes bound at \
                 the call",
                fmt_dim(m),
                fmt_dim(n)
            ),
        ));
    }
    if qr.mode == QrMode::Complete && tall && m != n {
        return Err(Error::invalid(
            "qr",
            "mode",
            format!(
                "the derivative of the complete QR of a tall {m} × {n} matrix is not \
                 available: its last {} columns of Q are fixed only by the Householder \
                 construction, which the non-negative diagonal of R (a sign flip per column) \
                 hides from the rule; use the reduced mode, whose factors have the same \
                 derivatives (JAX differentiates the complete mode through LAPACK's signs)",
                m - n
            ),
        ));
    }
    if tall {
        let (dq, dr) = tall_tangents(q, r, da);
        return Ok(vec![Some(dq), Some(dr)]);
    }
    // Wide: the square block X = A[:, :m] determines Q.
    let cols =
        |x: &Var, lo: usize, hi: usize| x.slice_axis(-1, Some(lo as i64), Some(hi as i64), 1);
    let (dx, dy) = (cols(da, 0, m), cols(da, m, n));
    let (rx, y) = (cols(r, 0, m), cols(&p[0], m, n));
    let (dq, drx) = tall_tangents(q, &rx, &dx);
    let dry = dq.transpose().matmul(&y) + q.transpose().matmul(&dy);
    Ok(vec![Some(dq), Some(crate::api::concatenate(&[&drx, &dry], -1))])
}

register_rule!(VmapRule, Qr, many: vmap_qr);
register_rule!(JvpRule, Qr, many: jvp_qr);

// -------------------------------------------------------------- sparsity

use super::sparsity::{finish, running, Mats};
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// Householder: `Q[:, j] = H_0 ⋯ H_j e_j` for `j < k` (reflections after
/// `j` fix `e_j`) and `H_t` depends on columns `0..=t` of `A`, so column `j`
/// of `Q` depends on columns `0..=min(j, k−1)` (a complete `Q`'s extra
/// columns on all of them). A square `Q` (`m ≤ n`) is the exception: its
/// last column is the unit normal of the others, column `m − 1` of `A`
/// only choosing its sign (no derivative). `R[i, j] = Q[:, i]ᵀ A[:, j]`
/// (`i ≤ j`) depends on what `Q[:, i]` does and on column `j`; `R` below
/// its diagonal on nothing.
fn sparsity_qr(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let a = Mats::of(op, &args[0])?;
    let (m, n) = (a.m, a.n);
    let last = m.min(n).saturating_sub(1);
    let (&[.., q_cols], &[.., r_rows, _]) = (outs[0].shape(), outs[1].shape()) else {
        return Err(Error::invalid("qr", "sparsity", "factors of rank below 2"));
    };
    let (mut q, mut r) = (Builder::new(outs[0].numel(), 0), Builder::new(outs[1].numel(), 0));
    for b in 0..a.batch {
        let cols: Vec<_> = (0..n).map(|j| a.column(b, j)).collect();
        let leading = running(&cols, false);
        let none = Vec::new();
        let of_q = |j: usize| match j.checked_sub(1) {
            _ if m > n || j + 1 < m => &leading[j.min(last)],
            Some(before) => &leading[before],
            None => &none,
        };
        for _ in 0..m {
            for j in 0..q_cols {
                q.push(of_q(j));
            }
        }
        for i in 0..r_rows {
            for (j, col) in cols.iter().enumerate() {
                if i <= j {
                    r.push_merge(of_q(i), col);
                } else {
                    r.push(&[]);
                }
            }
        }
    }
    Ok(vec![finish(op, q, &outs[0], cx)?, finish(op, r, &outs[1], cx)?])
}

register_rule!(SparsityRule, Qr, many: sparsity_qr);
