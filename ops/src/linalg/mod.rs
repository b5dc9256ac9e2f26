//! Linear algebra with derivatives and batching, under JAX's names
//! (`jnp.linalg`, `jax.scipy.linalg`, `jax.lax.linalg`).
//!
//! Every function takes arrays `[..., m, n]` whose leading axes are batch
//! axes, in `f64` or `f32`. The public functions are at the top of this
//! module (re-exported by the facade as `anvil::linalg`); the ops they
//! build live in one file per family, each op beside its shape rule and its
//! batching, jvp and transpose rules and rewrites:
//!
//! | module | ops |
//! |---|---|
//! | [`triangle`] | `tril`/`triu` and `Φ` ([`Triangle`]), [`Diagonal`] |
//! | [`triangular`] | [`TriangularSolve`] |
//! | [`cholesky`](mod@cholesky) | [`Cholesky`], [`CholSolve`], and the linear pair [`CholeskyTangent`] / [`CholeskyCotangent`] its derivative is made of |
//! | [`lu`](mod@lu) | [`Lu`], [`LuTransposed`], [`LuPivotsToPermutation`], [`LuSolve`], [`Solve`], [`Inv`], [`Det`], [`Slogdet`], [`Adjugate`], [`LuAdjugate`] |
//! | [`qr`](mod@qr) | [`Qr`] |
//! | [`eigh`](mod@eigh) | [`Eigh`], and the linear pair [`EighTangent`] / [`EighCotangent`] its derivative is made of |
//! | [`svd`](mod@svd) | [`Svd`] |
//!
//! Composites (`trace`, `eigvalsh`, `svdvals`, `pinv`, `lstsq`, norms,
//! `cho_solve`'s vector form...) are plain functions in [`api`].
//!
//! # Design
//!
//! - **Batching** never loops over kernel launches: a batch axis becomes one
//!   more leading batch axis of the op. A matrix shared by the whole batch
//!   (an unbatched `A` under `vmap` with a batched right-hand side) is
//!   factored once: the batch is folded into the right-hand side's columns
//!   (or rows, for a right-side triangular solve).
//! - **Derivatives** are JAX's formulas. The jvp rules emit linear ops that
//!   carry transpose rules (triangular solves, `tril`/`triu`/`Φ`, the
//!   diagonal and its embedding, `cho_solve`/`lu_solve` in the right-hand
//!   side, row permutations), so reverse mode, `jacrev` and `hessian`
//!   follow. Cholesky's tangent and cotangent are two linear ops with
//!   kernels of their own, so that reverse mode through `cholesky` costs
//!   about 2.5 Cholesky factorisations' worth of multiply-adds, not six.
//! - **Factor once**: `solve`, `det` and `slogdet` are ops whose
//!   derivatives are written in terms of the matrix; after differentiation
//!   a rewrite rule replaces each by `lu` and a solve or a product on the
//!   factors, and common-subexpression elimination leaves one `lu` per
//!   matrix for the primal, the tangents and the transposes (a transposed
//!   solve is `lu_solve` with `transpose`, never a factorisation of `Aᵀ`).
//! - **Sparsity**: every op has a sparsity rule beside its other rules.
//!   Batch elements never mix, nor do independent right-hand-side
//!   columns; within a matrix a rule follows what an algorithm for the op
//!   reads (the triangles of a triangular solve and of Cholesky's
//!   recursion, the leading columns of `lu` and `qr`), so patterns are
//!   never too small and, where the derivative is generically nonzero,
//!   exact. `inv`, `det`, `eigh` and `svd` are dense within each matrix.
//! - **Failures** are run-time errors that name the function the user
//!   called and the batch element ([`anvil_core::Error::Linalg`]):
//!   Cholesky of a matrix that is not positive definite, `solve`, `inv`,
//!   `lu_solve`, `cho_solve` with an exactly singular matrix (a zero pivot,
//!   as LAPACK and NumPy report it; a nearly singular matrix is solved, as
//!   there). With [`OnFailure::Nan`] (the `*_with` functions) a failing
//!   element's result is NaN and the others are computed: the mode for
//!   `vmap`ped sweeps. `lu`, `det`, `slogdet`, `qr`, `eigh` and `svd` never
//!   fail.
//!
//! # Conventions
//!
//! - Eigenvectors (`eigh`) and singular vectors (`svd`) are normalised so
//!   that the component of largest magnitude of each vector is positive;
//!   `qr` makes the diagonal of `R` non-negative. Results are thus
//!   deterministic, but functions of a decomposition that should not depend
//!   on these choices are best written sign-invariant (`V ∘ V`, `V Vᵀ`).
//! - `eigh` symmetrises its input, `(A + Aᵀ)/2`, as JAX does by default, and
//!   so its tangent: the derivative is that of the symmetrised problem.
//!   `cholesky` does the same.
//! - Pivots are `i64`: `lu_factor`'s are LAPACK-style row swaps (0-based),
//!   `Lu`'s third result is the permutation they compose to.
//!
//! # Derivatives at repeated eigenvalues and singular values
//!
//! The eigenvector tangent `V (F ∘ Vᵀ Ȧ V)` has `F_ij = 1/(w_j − w_i)`,
//! unbounded where two eigenvalues meet; the singular-vector tangents have
//! `1/(s_j² − s_i²)` and `1/s_i`. anvil sets `F_ij = 0` where
//! `|w_j − w_i| ≤ gap`, with `gap = 16·ε·max|w|` (ε the dtype's machine
//! epsilon), and likewise for `s_j² − s_i²` and for `1/s_i` at `s_i ≤ gap`.
//! The derivatives are then finite everywhere, and
//!
//! - eigenvalue and singular-value tangents (`diag(Vᵀ Ȧ V)`) are exact
//!   wherever the eigenvalues are separated, and at a repeated eigenvalue
//!   are the derivative along the eigenbasis returned (so functions
//!   symmetric in the repeated eigenvalues, such as `sum(w)`, `trace`,
//!   `logdet`, differentiate exactly);
//! - an eigenvector's tangent has no component inside its own eigenspace:
//!   the part of the derivative that the problem leaves undetermined is
//!   taken as zero (JAX and NumPy give inf or NaN there).

pub mod api;
pub mod cholesky;
pub mod eigh;
pub mod lu;
pub mod matfun;
pub mod qr;
mod sparsity;
pub mod svd;
pub mod triangle;
pub mod triangular;

pub use api::*;
pub use cholesky::{CholSolve, Cholesky, CholeskyCotangent, CholeskyTangent};
pub use eigh::{Eigh, EighCotangent, EighTangent};
pub use lu::{
    Adjugate, Caller, Det, Inv, Lu, LuAdjugate, LuPivotsToPermutation, LuSolve, LuTransposed,
    Slogdet, Solve,
};
pub use matfun::*;
pub use qr::{Qr, QrMode};
pub use svd::Svd;
pub use triangle::{diag_embed, Diagonal, Triangle};
pub use triangular::TriangularSolve;

use crate::elementwise::Domain;
use anvil_core::{Error, Result, TensorType};

/// What a kernel does with a matrix it cannot factor (Cholesky of a matrix
/// that is not positive definite) or solve with (a singular one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnFailure {
    /// A run-time error naming the function and the first failing batch
    /// element ([`Error::Linalg`]).
    #[default]
    Error,
    /// The failing element's result is all NaN; the other elements are
    /// computed. For sweeps under `vmap`, where one bad element must not
    /// abort the batch.
    Nan,
}

/// The matrix size `(m, n)` of `t` (its last two axes), checking that it
/// is a float array of rank at least 2 (argument `arg` of `op`).
pub(crate) fn matrix(op: &str, t: &TensorType, arg: usize) -> Result<(usize, usize)> {
    Domain::Float.check(op, arg, t.dtype())?;
    match *t.shape() {
        [.., m, n] => Ok((m, n)),
        _ => Err(Error::shape(
            op,
            &[t.shape()],
            format!("argument {arg} must be matrices [..., m, n] (rank at least 2)"),
        )),
    }
}

/// The size `n` of the square matrices `t` ([`matrix`] plus `m == n`).
pub(crate) fn square(op: &str, t: &TensorType, arg: usize) -> Result<usize> {
    match matrix(op, t, arg)? {
        (m, n) if m == n => Ok(n),
        _ => Err(Error::shape(
            op,
            &[t.shape()],
            format!("argument {arg} must be square matrices [..., n, n]"),
        )),
    }
}

/// The batch axes of matrices `t` (all but the last two).
pub(crate) fn batch_of(t: &TensorType) -> &[usize] {
    &t.shape()[..t.rank().saturating_sub(2)]
}

/// Checks that `b` has `a`'s dtype (argument `arg` of `op`).
pub(crate) fn same_dtype(op: &str, a: &TensorType, b: &TensorType, arg: usize) -> Result<()> {
    if a.dtype() == b.dtype() {
        return Ok(());
    }
    let expected = format!("the dtype of argument 0 ({})", a.dtype());
    Err(Error::dtype(op, arg.to_string(), b.dtype(), expected))
}

/// Checks that `b`'s batch axes are `a`'s (arguments 0 and `arg` of `op`).
pub(crate) fn same_batch(op: &str, a: &TensorType, b: &TensorType, arg: usize) -> Result<()> {
    let (ba, bb) = (batch_of(a), &b.shape()[..b.rank().saturating_sub(2)]);
    if ba == bb {
        return Ok(());
    }
    Err(Error::shape(
        op,
        &[a.shape(), b.shape()],
        format!("argument {arg} must have the batch axes {ba:?} of argument 0"),
    ))
}

// ---------------------------------------------------------------- batching

use crate::api::VarExt;
use crate::batching::{at_front, move_axis};
use anvil_core::{Batched, Var};

/// A batched matrix operand with its batch axis first, or as it is when
/// unbatched (`None`): the layout of the "shared matrix" rules.
pub(crate) fn front_or_shared(b: &Batched) -> Option<Var> {
    b.axis.map(|k| move_axis(&b.var, k, 0))
}

/// Every operand batch-first (unbatched ones broadcast), for rules whose op
/// needs all operands batched alike.
pub(crate) fn all_front(args: &[Batched], size: usize) -> Vec<Var> {
    args.iter().map(|a| at_front(a, size)).collect()
}

/// A right-hand side `[..., n, k]` batched at some axis, folded into its
/// columns `[..., n, B·k]` so that one solve against a shared matrix
/// serves the whole batch, and `k`; [`unfold_columns`] undoes it on the
/// solution. Sizes are explicit (no `-1`), so empty batches and matrices
/// fold too.
pub(crate) fn fold_columns(b: &Batched) -> (Var, usize) {
    let r = b.var.rank();
    if r < 3 {
        // Not a batch of matrices (a recorded error upstream): the op's
        // shape rule reports it.
        return (b.var.clone(), 0);
    }
    // [..., n, B, k] then merge the last two axes.
    let moved = move_axis(&b.var, b.axis.unwrap_or(0), r - 2);
    let (batch, k) = (moved.shape()[r - 2], moved.shape()[r - 1]);
    let mut shape = as_i64(&moved.shape()[..r - 2]);
    shape.push((batch * k) as i64);
    (moved.reshape(&shape), k)
}

/// The solution of a [`fold_columns`] solve, `[..., n, B·k]`, as a batched
/// value `[..., n, B, k]` with the batch axis before the last.
pub(crate) fn unfold_columns(x: &Var, size: usize, k: usize) -> Batched {
    let r = x.rank();
    if r < 2 {
        return Batched::new(x.clone(), Some(0));
    }
    let mut shape = as_i64(&x.shape()[..r - 1]);
    shape.extend([size as i64, k as i64]);
    Batched::new(x.reshape(&shape), Some(r - 1))
}

/// The batched value with its batch axis moved to the physical axis `to`.
pub(crate) fn batch_at(b: &Batched, to: usize) -> Var {
    move_axis(&b.var, b.axis.unwrap_or(to), to)
}

/// For an op acting on the last two axes: the value as it is when its
/// batch axis is not among them (the op applies unchanged), else moved to
/// the front; and where the batch axis then is.
pub(crate) fn off_matrix_axes(b: &Batched) -> (Var, usize) {
    let k = b.axis.unwrap_or(0);
    if k + 2 < b.var.rank() {
        (b.var.clone(), k)
    } else {
        (move_axis(&b.var, k, 0), 0)
    }
}

/// Symmetric part `(x + xᵀ)/2` of square matrices.
pub(crate) fn symmetrize(x: &Var) -> Var {
    (x + &x.transpose()) * 0.5
}

/// The shape as `i64`, for `reshape`.
pub(crate) fn as_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// The `n × n` identity in `like`'s trace and dtype (the seed op, computed
/// inside the fused pass that reads it).
pub(crate) fn eye_like(like: &Var, n: usize) -> Var {
    let seed =
        crate::constant::Basis { shape: vec![n, n], axis: 1, offset: 0, dtype: like.dtype() };
    like.tracer().apply(Box::new(seed), &[])
}

/// A constant of `shape` filled with `value`, in `like`'s trace and dtype.
pub(crate) fn full_like_shape(like: &Var, shape: &[usize], value: f64) -> Var {
    let value = anvil_core::Scalar::F64(value).cast(like.dtype());
    like.tracer().apply(Box::new(crate::constant::Full { shape: shape.to_vec(), value }), &[])
}
