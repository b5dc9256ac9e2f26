//! Triangular solves with the options of `jax.lax.linalg.triangular_solve`.
//!
//! `op(A)·X = B` (`left_side`) or `X·op(A) = B` (JAX's default,
//! `left_side = false`), with `op(A) = A` or `Aᵀ` (`transpose_a`), reading
//! the `lower` or upper triangle of `A` and optionally taking its diagonal
//! as ones (`unit_diagonal`). Linear in `B`; its transpose is the solve
//! with `op(A)ᵀ`, so reverse mode through it costs one more solve.
//!
//! No singularity check: a zero on the diagonal gives infinities or NaN,
//! as LAPACK's `trsm` (and JAX) do. `cho_solve`, `lu_solve` and `solve`
//! check their factors.

use super::{as_i64, fold_columns, matrix, same_batch, same_dtype, unfold_columns};
use crate::api::VarExt;
use crate::batching::at_front;
use anvil_core::{
    op::expect_arity, register_rule, Batched, Error, LinearArg, Op, Result, TensorType, Var,
};

/// A triangular solve (`jax.lax.linalg.triangular_solve`); every option is
/// `false` by default, as in JAX: `X·A = B` with `A` upper triangular.
///
/// `a` is `[..., s, s]` and `b` `[..., m, k]` with the same batch axes;
/// `s = m` when `left_side`, `s = k` otherwise. The result has `b`'s shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TriangularSolve {
    /// Solve `op(A)·X = B` (else `X·op(A) = B`).
    pub left_side: bool,
    /// Read the lower triangle of `A` (else the upper one).
    pub lower: bool,
    /// `op(A) = Aᵀ` (else `A`).
    pub transpose_a: bool,
    /// Take the diagonal of `A` as ones (it is not read).
    pub unit_diagonal: bool,
}

impl TriangularSolve {
    /// The mask of the part of `A` the solve reads: its triangle, without
    /// the diagonal when it is taken as ones.
    pub fn mask(&self) -> super::Triangle {
        let offset = match (self.unit_diagonal, self.lower) {
            (false, _) => 0,
            (true, true) => -1,
            (true, false) => 1,
        };
        super::Triangle { lower: self.lower, offset, halve_diagonal: false }
    }
}

impl Op for TriangularSolve {
    fn name(&self) -> &'static str {
        "triangular_solve"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        let s = super::square("triangular_solve", a, 0)?;
        let (m, k) = matrix("triangular_solve", b, 1)?;
        same_dtype("triangular_solve", a, b, 1)?;
        same_batch("triangular_solve", a, b, 1)?;
        let need = if self.left_side { m } else { k };
        if need != s {
            let side = if self.left_side { "rows" } else { "columns" };
            return Err(Error::shape(
                "triangular_solve",
                &[a.shape(), b.shape()],
                format!("argument 1 must have {s} {side} (the size of argument 0)"),
            ));
        }
        Ok(b.clone())
    }
    fn params(&self) -> String {
        format!(
            "left_side={}, lower={}, transpose_a={}, unit_diagonal={}",
            self.left_side, self.lower, self.transpose_a, self.unit_diagonal
        )
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 1
    }
}

/// Batching. A shared `A` against a batched `B` stays one solve: the batch
/// is folded into `B`'s columns (left side) or rows (right side, a
/// reshape). Otherwise both operands go batch-first.
fn vmap_triangular_solve(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let ts = op.try_downcast::<TriangularSolve>()?;
    let (a, b) = (&args[0], &args[1]);
    if a.axis.is_none() {
        return Ok(if ts.left_side {
            let (cols, k) = fold_columns(b);
            unfold_columns(&a.var.apply(*ts, &[&cols]), size, k)
        } else {
            let (rows, m) = fold_rows(b);
            let x = a.var.apply(*ts, &[&rows]);
            unfold_rows(&x, size, m)
        });
    }
    let (a, b) = (at_front(a, size), at_front(b, size));
    Ok(Batched::new(a.apply(*ts, &[&b]), Some(0)))
}

/// `[..., m, k]` batched at some axis as `[..., B·m, k]` (a reshape after
/// moving the batch axis before the rows), and `m`.
fn fold_rows(b: &Batched) -> (Var, usize) {
    let r = b.var.rank();
    if r < 3 {
        return (b.var.clone(), 0);
    }
    let moved = super::batch_at(b, r - 3);
    let (batch, m, k) = (moved.shape()[r - 3], moved.shape()[r - 2], moved.shape()[r - 1]);
    let mut shape = as_i64(&moved.shape()[..r - 3]);
    shape.extend([(batch * m) as i64, k as i64]);
    (moved.reshape(&shape), m)
}

/// The inverse of [`fold_rows`] on the solution.
fn unfold_rows(x: &Var, size: usize, m: usize) -> Batched {
    let r = x.rank();
    if r < 2 {
        return Batched::new(x.clone(), Some(0));
    }
    let mut shape = as_i64(&x.shape()[..r - 2]);
    shape.extend([size as i64, m as i64, x.shape()[r - 1] as i64]);
    Batched::new(x.reshape(&shape), Some(r - 2))
}

/// `op(M)` for the solve's options.
fn op_of(ts: &TriangularSolve, m: &Var) -> Var {
    if ts.transpose_a {
        m.transpose()
    } else {
        m.clone()
    }
}

/// `op(A)·X = B` gives `op(A)·dX = dB − op(dA)·X` (`dA` masked to the
/// triangle the solve reads); the right side alike.
fn jvp_triangular_solve(op: &dyn Op, p: &[Var], t: &[Option<Var>], x: &Var) -> Result<Option<Var>> {
    let ts = op.try_downcast::<TriangularSolve>()?;
    let from_a = t[0].as_ref().map(|da| {
        let da = op_of(ts, &da.apply(ts.mask(), &[]));
        if ts.left_side {
            da.matmul(x)
        } else {
            x.matmul(&da)
        }
    });
    let rhs = match (&t[1], from_a) {
        (None, None) => return Ok(None),
        (Some(db), None) => db.clone(),
        (None, Some(f)) => -f,
        (Some(db), Some(f)) => db - &f,
    };
    Ok(Some(p[0].apply(*ts, &[&rhs])))
}

/// Linear in `B` for a known `A`: `X = op(A)⁻¹ B` transposes to
/// `op(A)⁻ᵀ X̄`, the same solve with `transpose_a` flipped (the right side
/// alike).
fn transpose_triangular_solve(
    op: &dyn Op,
    ct: &Var,
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let ts = op.try_downcast::<TriangularSolve>()?;
    match (args[0].known(), args[1].is_linear()) {
        (Some(a), true) => {
            let flipped = TriangularSolve { transpose_a: !ts.transpose_a, ..*ts };
            Ok(vec![None, Some(a.apply(flipped, &[ct]))])
        }
        _ => Err(Error::invalid(
            op.name(),
            "transpose",
            "triangular_solve is linear in b only, for a known a",
        )),
    }
}

register_rule!(VmapRule, TriangularSolve, vmap_triangular_solve);
register_rule!(JvpRule, TriangularSolve, jvp_triangular_solve);
register_rule!(TransposeRule, TriangularSolve, transpose_triangular_solve);

// -------------------------------------------------------------- sparsity

use super::sparsity::{finish, running, union, Mats};
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// Forward or back substitution. As a left-side solve `M X' = B'` (`M =
/// op(A)`, or `op(A)ᵀ` with `X' = Xᵀ` on the right side), `X'[i, c]`
/// depends on `B'[p, c]` and on `M`'s triangle in rows `p` for the `p`
/// substitution reaches before `i` (`p ≤ i` for a lower `M`, `p ≥ i` for an
/// upper one); `A`'s other triangle (and a unit diagonal) is not read.
/// Exact: `M⁻¹` is generically full in its triangle.
fn sparsity_triangular_solve(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let ts = *op.try_downcast::<TriangularSolve>()?;
    let (a, b) = (Mats::of(op, &args[0])?, Mats::of(op, &args[1])?);
    let s = a.m;
    let m_lower = (ts.lower != ts.transpose_a) == ts.left_side;
    // The entry of A that M[p, q] is.
    let of_a = |p: usize, q: usize| {
        let (x, y) = if ts.left_side { (p, q) } else { (q, p) };
        if ts.transpose_a {
            (y, x)
        } else {
            (x, y)
        }
    };
    let read = |p: usize, q: usize| if p == q { !ts.unit_diagonal } else { (q < p) == m_lower };
    let mut sets = Builder::new(out.numel(), 0);
    for k in 0..a.batch {
        let rows: Vec<_> = (0..s)
            .map(|p| {
                union((0..s).filter(|&q| read(p, q)).map(|q| {
                    let (x, y) = of_a(p, q);
                    a.at(k, x, y)
                }))
            })
            .collect();
        let reach = running(&rows, !m_lower);
        if ts.left_side {
            // X[i, c]: B's column c, running down (or up) to row i.
            let cols: Vec<Vec<Vec<_>>> = (0..b.n)
                .map(|c| {
                    let col: Vec<_> = (0..s).map(|p| b.at(k, p, c).to_vec()).collect();
                    running(&col, !m_lower)
                })
                .collect();
            for (i, r) in reach.iter().enumerate() {
                for col in &cols {
                    sets.push_merge(r, &col[i]);
                }
            }
        } else {
            // X[r, j]: B's row r, running along to column j.
            for r in 0..b.m {
                let row: Vec<_> = (0..s).map(|p| b.at(k, r, p).to_vec()).collect();
                for (j, part) in running(&row, !m_lower).iter().enumerate() {
                    sets.push_merge(&reach[j], part);
                }
            }
        }
    }
    finish(op, sets, out, cx)
}

register_rule!(SparsityRule, TriangularSolve, sparsity_triangular_solve);
