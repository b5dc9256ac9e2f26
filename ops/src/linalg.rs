//! Linear algebra: `solve`, the solution of `A x = b` for square `A` (as
//! `jnp.linalg.solve`). Leading axes are batch axes and must agree between
//! `A` and `b`. `b` is a vector per matrix (rank of `A` minus one) or a
//! matrix of right-hand sides (rank of `A`). The CPU kernel factors each
//! matrix with faer's partially pivoted LU; a singular matrix gives
//! infinities or NaN, as in JAX.
//!
//! Derivatives: `x = A⁻¹ b` gives `dx = A⁻¹ (db - dA x)`, linear in the
//! tangents; `solve` is linear in `b`, with transpose `Aᵀ⁻¹ ct`, so reverse
//! mode needs nothing more.

use anvil_core::{op::expect_arity, Error, Op, Result, TensorType};

/// `A⁻¹ b` for square matrices `A` (with batch axes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Solve;

impl Solve {
    /// Whether `b` holds one vector per matrix (rather than columns).
    pub fn vector_rhs(a: &TensorType, b: &TensorType) -> bool {
        b.rank() + 1 == a.rank()
    }
}

impl Op for Solve {
    fn name(&self) -> &'static str {
        "solve"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        crate::elementwise::Domain::Float.check("solve", 0, a.dtype())?;
        if a.dtype() != b.dtype() {
            return Err(Error::dtype(
                "solve",
                "1",
                b.dtype(),
                format!("the dtype of argument 0 ({})", a.dtype()),
            ));
        }
        let (sa, sb) = (a.shape(), b.shape());
        let r = a.rank();
        if r < 2 || sa[r - 1] != sa[r - 2] {
            return Err(Error::shape(
                "solve",
                &[sa],
                "argument 0 must be square matrices [..., n, n]",
            ));
        }
        let n = sa[r - 1];
        let batch = &sa[..r - 2];
        let fits = if Solve::vector_rhs(a, b) {
            sb[..r - 2] == *batch && sb[r - 2] == n
        } else {
            b.rank() == r && sb[..r - 2] == *batch && sb[r - 2] == n
        };
        if !fits {
            return Err(Error::shape(
                "solve",
                &[sa, sb],
                format!("argument 1 must be [..., {n}] or [..., {n}, k] with the batch axes {batch:?} of argument 0"),
            ));
        }
        Ok(b.clone())
    }
}

// ---------------------------------------------------------------- rules

use crate::api::VarExt;
use crate::batching::at_front;
use anvil_core::{register_rule, Batched, LinearArg, Var};

/// Batching `solve`: both operands batch-first (one LU per matrix either way).
fn vmap_solve(_: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let (a, b) = (at_front(&args[0], size), at_front(&args[1], size));
    Ok(Batched::new(a.apply(Solve, &[&b]), Some(0)))
}

/// `A x` with `x` a vector or columns, as `solve`'s `b` is.
fn apply_to(a: &Var, x: &Var, vector: bool) -> Var {
    if vector {
        a.matmul(&x.unsqueeze(-1)).squeeze(&[-1])
    } else {
        a.matmul(x)
    }
}

fn jvp_solve(_: &dyn Op, p: &[Var], t: &[Option<Var>], x: &Var) -> Result<Option<Var>> {
    let vector = Solve::vector_rhs(p[0].ty(), p[1].ty());
    let rhs = match (&t[0], &t[1]) {
        (None, None) => return Ok(None),
        (None, Some(db)) => db.clone(),
        (Some(da), None) => -apply_to(da, x, vector),
        (Some(da), Some(db)) => db - &apply_to(da, x, vector),
    };
    Ok(Some(p[0].apply(Solve, &[&rhs])))
}

/// `solve(A, b)` is linear in `b` for a known `A`: the cotangent is `Aᵀ⁻¹ ct`.
fn transpose_solve(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    match (args[0].known(), args[1].is_linear()) {
        (Some(a), true) => Ok(vec![None, Some(a.swap_axes(-1, -2).apply(Solve, &[ct]))]),
        _ => {
            Err(Error::invalid(op.name(), "transpose", "solve is linear in b only, for a known A"))
        }
    }
}

register_rule!(VmapRule, Solve, vmap_solve);
register_rule!(JvpRule, Solve, jvp_solve);
register_rule!(TransposeRule, Solve, transpose_solve);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// `solve`: `x = A⁻¹ b`, and `A⁻¹` is generically dense, so each column
/// of `x` depends on all of its matrix `A` and on its column of `b`.
fn sparsity_solve(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let (a, b) = (&args[0], &args[1]);
    let r = a.ty.rank();
    let n = a.ty.shape()[r - 1];
    let batch: usize = a.ty.shape()[..r - 2].iter().product();
    let cols = if Solve::vector_rhs(a.ty, b.ty) { 1 } else { b.ty.shape()[r - 1] };
    let mut u = Union::default();
    let mut sets = Builder::new(out.numel(), a.sets.nnz() + b.sets.nnz());
    for k in 0..batch {
        let mut whole = Builder::new(1, 0);
        whole.push_union(&mut u, (0..n * n).map(|e| a.sets.row(k * n * n + e)));
        let whole = whole.finish();
        let mut per_col = Builder::new(cols, 0);
        for c in 0..cols {
            per_col.push_union(&mut u, (0..n).map(|i| b.sets.row((k * n + i) * cols + c)));
        }
        let per_col = per_col.finish();
        for _ in 0..n {
            for c in 0..cols {
                sets.push_merge(whole.row(0), per_col.row(c));
            }
        }
    }
    let sets = sets.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(SparsityRule, Solve, sparsity_solve);
