//! The public functions of `anvil::linalg`, under JAX's names: thin
//! wrappers that build the ops, and the composites (`trace`, `eigvalsh`,
//! `svdvals`, `pinv`, `lstsq`, norms) written with them.
//!
//! Every function takes `[..., m, n]` arrays (leading axes are batch axes)
//! and records a shape error in the trace like any op (the call that runs
//! the trace returns it).

use super::cholesky::{CholSolve, Cholesky};
use super::eigh::Eigh;
use super::lu::{lu_factors, Det, Inv, LuPivotsToPermutation, LuSolve, Slogdet, Solve};
use super::qr::{Qr, QrMode};
use super::svd::Svd;
use super::triangle::{Diagonal, Triangle};
use super::triangular::TriangularSolve;
use super::OnFailure;
use crate::api::{fail, floated, VarExt};
use crate::batching::move_axis;
use anvil_core::shape::{is_symbolic, normalize_axis};
use anvil_core::Error;
use anvil_core::{DType, Var};

/// The results of an op with `n` results.
fn results(op: impl anvil_core::Op, args: &[&Var], n: usize) -> Vec<Var> {
    Var::apply_op_n(Box::new(op), args, n)
}

/// `b` as columns: a vector per matrix (`[..., n]` against `[..., n, n]`)
/// gets a trailing axis; the second value says whether to remove it again.
fn as_columns(a: &Var, b: &Var) -> (Var, bool) {
    if b.rank() + 1 == a.rank() {
        (b.unsqueeze(-1), true)
    } else {
        (b.clone(), false)
    }
}

fn from_columns(x: Var, vector: bool) -> Var {
    if vector {
        x.squeeze(&[-1])
    } else {
        x
    }
}

/// The Cholesky factor `L` (lower triangular, `A = L·Lᵀ`) of the
/// symmetric positive definite `(A + Aᵀ)/2` (`jnp.linalg.cholesky`).
///
/// # Errors
/// At run time, a matrix that is not positive definite: an error naming
/// `cholesky` and the batch element (see [`cholesky_with`] for NaN
/// instead).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![4.0, 2.0, 2.0, 3.0], &[2, 2])?;
/// let l = jit(|a: &Var| linalg::cholesky(a)).eval(&a)?;
/// assert_eq!(l.to_vec::<f64>()?, vec![2.0, 0.0, 1.0, 2f64.sqrt()]);
/// let bad = Tensor::from_vec(vec![1.0, 0.0, 0.0, -1.0], &[2, 2])?;
/// let err = jit(|a: &Var| linalg::cholesky(a)).eval(&bad).unwrap_err();
/// assert!(err.to_string().starts_with("cholesky: the matrix is not positive definite"));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn cholesky(a: &Var) -> Var {
    a.apply(Cholesky::default(), &[])
}

/// [`cholesky()`] choosing what a matrix that is not positive definite gives:
/// with [`OnFailure::Nan`], an all-NaN factor for that batch element only.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg::{self, OnFailure};
///
/// // A sweep over a scale: the matrix with a negative eigenvalue gives NaN,
/// // the others their factor.
/// let scales = Tensor::from_vec(vec![-1.0, 0.25, 4.0], &[3])?;
/// let f = vmap(|s: &Var| {
///     let a = linalg::eye_of(2, s) * s;
///     linalg::cholesky_with(&a, OnFailure::Nan).index_axis(0, 0).index_axis(0, 0)
/// });
/// let l00 = f.eval(&scales)?.to_vec::<f64>()?;
/// assert!(l00[0].is_nan() && l00[1] == 0.5 && l00[2] == 2.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn cholesky_with(a: &Var, on_failure: OnFailure) -> Var {
    a.apply(Cholesky { symmetrize_input: true, on_failure }, &[])
}

/// The `n × n` identity in the trace and dtype of `like` (a seed op: it is
/// computed inside the pass that reads it, never stored).
pub fn eye_of(n: usize, like: &Var) -> Var {
    super::eye_like(like, n)
}

/// A triangular solve with the options of `jax.lax.linalg.triangular_solve`
/// (see [`TriangularSolve`]; its default, as JAX's, solves `X·A = B` with
/// `A` upper triangular). `a` is `[..., s, s]`, `b` `[..., m, k]`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg::{self, TriangularSolve};
///
/// let l = Tensor::from_vec(vec![2.0, 0.0, 1.0, 1.0], &[2, 2])?;
/// let b = Tensor::from_vec(vec![2.0, 3.0], &[2, 1])?;
/// let opts = TriangularSolve { left_side: true, lower: true, ..Default::default() };
/// let x = jit(move |l: &Var, b: &Var| linalg::triangular_solve(l, b, opts)).eval((&l, &b))?;
/// assert_eq!(x.to_vec::<f64>()?, vec![1.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn triangular_solve(a: &Var, b: &Var, options: TriangularSolve) -> Var {
    a.apply(options, &[b])
}

/// `scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal)`:
/// solves `a x = b` (`aᵀ x = b` with `trans`) for triangular `a`
/// `[..., n, n]`; `b` is `[..., n]` or `[..., n, k]`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let u = Tensor::from_vec(vec![2.0, 1.0, 0.0, 4.0], &[2, 2])?;
/// let b = Tensor::from_vec(vec![4.0, 8.0], &[2])?;
/// let x = jit(|u: &Var, b: &Var| linalg::solve_triangular(u, b, false, false, false))
///     .eval((&u, &b))?;
/// assert_eq!(x.to_vec::<f64>()?, vec![1.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn solve_triangular(a: &Var, b: &Var, trans: bool, lower: bool, unit_diagonal: bool) -> Var {
    let (cols, vector) = as_columns(a, b);
    let opts = TriangularSolve { left_side: true, lower, transpose_a: trans, unit_diagonal };
    from_columns(a.apply(opts, &[&cols]), vector)
}

/// `jax.scipy.linalg.cho_solve((l, True), b)`: `(L·Lᵀ)⁻¹ b` from the
/// lower Cholesky factor `l` `[..., n, n]`; `b` is `[..., n]` or
/// `[..., n, k]`.
///
/// # Errors
/// At run time, a zero on `l`'s diagonal: an error naming `cho_solve` and
/// the batch element.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![4.0, 2.0, 2.0, 3.0], &[2, 2])?;
/// let b = Tensor::from_vec(vec![6.0, 5.0], &[2])?;
/// let x = jit(|a: &Var, b: &Var| linalg::cho_solve(&linalg::cholesky(a), b)).eval((&a, &b))?;
/// x.assert_allclose(&Tensor::from_vec(vec![1.0, 1.0], &[2])?, 1e-15, 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn cho_solve(l: &Var, b: &Var) -> Var {
    cho_solve_with(l, b, OnFailure::Error)
}

/// [`cho_solve`] choosing what a singular factor gives.
pub fn cho_solve_with(l: &Var, b: &Var, on_failure: OnFailure) -> Var {
    let (cols, vector) = as_columns(l, b);
    from_columns(l.apply(CholSolve { on_failure }, &[&cols]), vector)
}

/// `jax.scipy.linalg.lu(a)`: `(P, L, U)` with `A = P·L·U`, for `[..., m, n]`
/// matrices: `P` `[..., m, m]`, `L` `[..., m, k]` unit lower triangular,
/// `U` `[..., k, n]` upper triangular, `k = min(m, n)`. Never fails.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let (p, l, u) = jit(|a: &Var| linalg::lu(a)).eval(&a)?;
/// assert_eq!(p.to_vec::<f64>()?, vec![0.0, 1.0, 1.0, 0.0]);
/// let plu = jit(|p: &Var, l: &Var, u: &Var| p.matmul(&l.matmul(u))).eval((&p, &l, &u))?;
/// plu.assert_allclose(&a, 1e-15, 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn lu(a: &Var) -> (Var, Var, Var) {
    let (packed, _, perm) = lu_factors(a);
    let [.., m, n] = *a.shape() else {
        let bad = not_matrices(a, "lu");
        return (bad.clone(), bad.clone(), bad);
    };
    let k = match anvil_core::shape::dim_min("lu", m, n) {
        Ok(k) => k,
        Err(e) => {
            let bad = fail(a, e);
            return (bad.clone(), bad.clone(), bad);
        }
    };
    let l = packed.slice_axis(-1, Some(0), Some(k as i64), 1).apply(Triangle::lower(-1), &[]);
    let l = &l + &eye_of(m, a).slice_axis(-1, Some(0), Some(k as i64), 1);
    let u = packed.slice_axis(-2, Some(0), Some(k as i64), 1).apply(Triangle::upper(0), &[]);
    // P[perm[i], i] = 1: the rows of the identity, scattered.
    let p = eye_of(m, a).broadcast_to(&[super::batch_of(a.ty()), &[m, m]].concat());
    let p = crate::linalg::lu::permute_rows(&p, &perm).transpose();
    (p, l, u)
}

/// `jax.scipy.linalg.lu_factor(a)`: the packed factors `[..., m, n]` and
/// the pivots `[..., min(m, n)]` (`i64`, 0-based LAPACK row swaps).
pub fn lu_factor(a: &Var) -> (Var, Var) {
    let (packed, piv, _) = lu_factors(a);
    (packed, piv)
}

/// `jax.scipy.linalg.lu_solve((lu, piv), b, trans)`: `A⁻¹ b` (`A⁻ᵀ b` with
/// `trans`) from [`lu_factor`]'s results; `b` is `[..., n]` or
/// `[..., n, k]`.
///
/// # Errors
/// Pivots that are not `[..., n]` (one per row of the factor); at run
/// time, an exactly singular factorisation: an error naming `lu_solve` and
/// the batch element.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![0.0, 2.0, 1.0, 1.0], &[2, 2])?;
/// let b = Tensor::from_vec(vec![4.0, 3.0], &[2])?;
/// let x = jit(|a: &Var, b: &Var| {
///     let (lu, piv) = linalg::lu_factor(a);
///     linalg::lu_solve(&lu, &piv, b, false)
/// })
/// .eval((&a, &b))?;
/// assert_eq!(x.to_vec::<f64>()?, vec![1.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn lu_solve(lu: &Var, piv: &Var, b: &Var, trans: bool) -> Var {
    lu_solve_with(lu, piv, b, trans, OnFailure::Error)
}

/// [`lu_solve`] choosing what a singular factorisation gives.
pub fn lu_solve_with(lu: &Var, piv: &Var, b: &Var, trans: bool, on_failure: OnFailure) -> Var {
    let n = lu.shape().last().copied().unwrap_or(0);
    // The factor is square (checked by `LuSolve`): one pivot per row. (The
    // conversion to a permutation alone accepts fewer, as for a wide LU.)
    if piv.shape().last() != Some(&n) {
        return fail(
            lu,
            Error::shape(
                "lu_solve",
                &[lu.shape(), piv.shape(), b.shape()],
                format!(
                    "argument 1 must be the factor's {n} pivots [..., {n}] (it is {})",
                    piv.ty()
                ),
            ),
        );
    }
    let perm = piv.apply(LuPivotsToPermutation { permutation_size: n }, &[]);
    let (cols, vector) = as_columns(lu, b);
    let op = LuSolve { transpose: trans, on_failure, ..Default::default() };
    from_columns(lu.apply(op, &[&perm, &cols]), vector)
}

/// `jnp.linalg.solve(a, b)`: `A⁻¹ b` for square `a` `[..., n, n]`. As in
/// JAX (since 0.5) and NumPy 2, `b` is one vector only when it is 1-D
/// (`[n]`, solved against every matrix); otherwise it is `[..., n, k]`,
/// and the batch axes of `a` and `b` broadcast. A matrix without batch
/// axes against a batch of right-hand sides is factored once.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
/// // Two 2 × 2 systems and one right-hand side matrix (the identity):
/// // the inverses, [2, 2, 2].
/// let a = Tensor::from_vec(vec![2.0, 0.0, 0.0, 4.0, 1.0, 1.0, 0.0, 1.0], &[2, 2, 2])?;
/// let inv = jit(|a: &Var| linalg::solve(a, &eye(2))).eval(&a)?;
/// assert_eq!(inv.shape(), [2, 2, 2]);
/// assert_eq!(inv.to_vec::<f64>()?, vec![0.5, 0.0, 0.0, 0.25, 1.0, -1.0, 0.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// Non-square `a`, a `b` whose `n` differs from `a`'s (naming the rule
/// above), batch axes that do not broadcast, different dtypes; at run
/// time, an exactly singular matrix: an error naming `solve` and the
/// batch element.
pub fn solve(a: &Var, b: &Var) -> Var {
    solve_with(a, b, OnFailure::Error)
}

/// [`solve`] choosing what a singular matrix gives.
pub fn solve_with(a: &Var, b: &Var, on_failure: OnFailure) -> Var {
    // Integers are solved in f64, as JAX promotes them.
    let (a, b) = (&floated(a), &floated(b));
    let op = Solve { transpose: false, on_failure };
    let (ra, rb) = (a.rank(), b.rank());
    if ra < 2 || rb == 0 {
        return a.apply(op, &[b]); // the op names what is wrong
    }
    let n = a.shape()[ra - 1];
    let a_batch = &a.shape()[..ra - 2];
    if rb == 1 {
        // One vector for every matrix.
        let mut shape = a_batch.to_vec();
        shape.push(b.shape()[0]);
        let b = if a_batch.is_empty() { b.clone() } else { b.broadcast_to(&shape) };
        return a.apply(op, &[&b]);
    }
    let (m, b_batch) = (b.shape()[rb - 2], &b.shape()[..rb - 2]);
    if m != n && !is_symbolic(m) && !is_symbolic(n) {
        let msg = format!(
            "argument 1 is read as [..., n, k] with n = {m}, but argument 0 has n = {n} (a vector \
             right-hand side must be 1-D, as in jnp.linalg.solve since JAX 0.5 and NumPy 2)"
        );
        return fail(a, Error::shape("solve", &[a.shape(), b.shape()], msg));
    }
    let batch = match anvil_core::shape::broadcast_shapes("solve", a_batch, b_batch, "1") {
        Ok(batch) => batch,
        Err(e) => return fail(a, e),
    };
    let concrete = !b.shape().iter().any(|&d| is_symbolic(d));
    if a_batch.is_empty() && !b_batch.is_empty() && concrete {
        // [B..., n, k] -> [n, B·k]: one factorisation for every column.
        let k = b.shape()[rb - 1];
        let cols = move_axis(b, rb - 2, 0).reshape(&[n as i64, -1]);
        let x = a.apply(op, &[&cols]);
        let mut shape = vec![n as i64];
        shape.extend(b_batch.iter().map(|&d| d as i64));
        shape.push(k as i64);
        return move_axis(&x.reshape(&shape), 0, rb - 2);
    }
    let widen = |x: &Var, rows: usize, cols: usize| {
        let mut shape = batch.clone();
        shape.extend([rows, cols]);
        if x.shape() == shape.as_slice() {
            x.clone()
        } else {
            x.broadcast_to(&shape)
        }
    };
    let k = b.shape()[rb - 1];
    widen(a, n, n).apply(op, &[&widen(b, m, k)])
}

/// `jnp.linalg.inv(a)`: the inverses of square matrices `[..., n, n]`.
///
/// # Errors
/// At run time, an exactly singular matrix: an error naming `inv` and the
/// batch element.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![2.0, 0.0, 0.0, 4.0], &[2, 2])?;
/// assert_eq!(jit(|a: &Var| linalg::inv(a)).eval(&a)?.to_vec::<f64>()?, vec![0.5, 0.0, 0.0, 0.25]);
/// let singular = Tensor::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[2, 2])?;
/// let err = jit(|a: &Var| linalg::inv(a)).eval(&singular).unwrap_err();
/// assert!(err.to_string().starts_with("inv: the matrix is singular"));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn inv(a: &Var) -> Var {
    inv_with(a, OnFailure::Error)
}

/// [`inv`] choosing what a singular matrix gives.
pub fn inv_with(a: &Var, on_failure: OnFailure) -> Var {
    floated(a).apply(Inv { on_failure }, &[])
}

/// `jnp.linalg.det(a)`: determinants `[...]` of `[..., n, n]` matrices
/// (of integers: in `f64`, as JAX; so do `slogdet`, `inv` and `solve`).
/// Never fails (0 for a singular matrix, where its gradient is the
/// transposed adjugate).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[2, 2])?; // singular
/// assert_eq!(jit(|a: &Var| linalg::det(a)).eval(&a)?.item()?, 0.0);
/// // d det / dA = adj(A)ᵀ = [[4, -2], [-2, 1]]
/// let g = grad(|a: &Var| linalg::det(a)).eval(&a)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![4.0, -2.0, -2.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn det(a: &Var) -> Var {
    floated(a).apply(Det, &[])
}

/// `jnp.linalg.slogdet(a)`: `(sign, log|det|)`, each `[...]`; `(0, −∞)`
/// for a singular matrix. Never fails.
pub fn slogdet(a: &Var) -> (Var, Var) {
    let a = &floated(a);
    let mut r = results(Slogdet, &[a], 2).into_iter();
    let mut next = || r.next().unwrap_or_else(|| a.tracer().poisoned());
    (next(), next())
}

/// `jnp.linalg.qr(a, mode)`: `(Q, R)` (see [`Qr`] for the shapes and the
/// sign convention). Derivatives exist for the reduced mode and for square
/// and wide matrices in either mode (not for the complete mode of a tall
/// matrix, which JAX differentiates with LAPACK's signs).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg::{self, QrMode};
///
/// let a = Tensor::from_vec(vec![3.0, 4.0], &[2, 1])?;
/// let (q, r) = jit(|a: &Var| linalg::qr(a, QrMode::Reduced)).eval(&a)?;
/// assert!((r.item()? - 5.0).abs() < 1e-15 && (q.to_vec::<f64>()?[1] - 0.8).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn qr(a: &Var, mode: QrMode) -> (Var, Var) {
    let mut r = results(Qr { mode }, &[a], 2).into_iter();
    let mut next = || r.next().unwrap_or_else(|| a.tracer().poisoned());
    (next(), next())
}

/// `jnp.linalg.eigh(a)`: eigenvalues `w` `[..., n]` (ascending) and
/// eigenvectors `V` (columns) of the symmetrised `(A + Aᵀ)/2`. Each
/// eigenvector's largest component is positive; write functions of `V`
/// that should not depend on that choice sign-invariant (`V ∘ V`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![2.0, 1.0, 1.0, 2.0], &[2, 2])?;
/// let (w, v) = jit(|a: &Var| linalg::eigh(a)).eval(&a)?;
/// w.assert_allclose(&Tensor::from_vec(vec![1.0, 3.0], &[2])?, 1e-15, 1e-15);
/// // dλ_max/dA = v vᵀ for the top eigenvector v = (1, 1)/√2
/// let g = grad(|a: &Var| linalg::eigh(a).0.index_axis(0, 1)).eval(&a)?;
/// g.assert_allclose(&Tensor::full(&[2, 2], 0.5)?, 1e-15, 1e-15);
/// # let _ = v;
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn eigh(a: &Var) -> (Var, Var) {
    eigh_with(a, true)
}

/// [`eigh()`], decomposing `(A + Aᵀ)/2` with `symmetrize_input` (the
/// default) or else the symmetric matrix `A`'s lower triangle stands for
/// (`jnp.linalg.eigh(a, symmetrize_input=False)` reads one triangle too).
pub fn eigh_with(a: &Var, symmetrize_input: bool) -> (Var, Var) {
    let mut r = results(Eigh { symmetrize_input }, &[a], 2).into_iter();
    let mut next = || r.next().unwrap_or_else(|| a.tracer().poisoned());
    (next(), next())
}

/// `jnp.linalg.eigvalsh(a)`: the eigenvalues of [`eigh()`].
pub fn eigvalsh(a: &Var) -> Var {
    eigh(a).0
}

/// `jnp.linalg.svd(a, full_matrices)`: `(U, s, Vᵀ)` (see [`Svd`]).
/// Derivatives exist for `full_matrices = false` (and square matrices).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![0.0, 2.0, 0.0, 0.0, 0.0, -3.0], &[2, 3])?;
/// let s = jit(|a: &Var| linalg::svd(a, false).1).eval(&a)?;
/// assert_eq!(s.to_vec::<f64>()?, vec![3.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn svd(a: &Var, full_matrices: bool) -> (Var, Var, Var) {
    let mut r = results(Svd { full_matrices, compute_uv: true }, &[a], 3).into_iter();
    let mut next = || r.next().unwrap_or_else(|| a.tracer().poisoned());
    (next(), next(), next())
}

/// `jnp.linalg.svdvals(a)`: the singular values `[..., min(m, n)]`,
/// descending.
pub fn svdvals(a: &Var) -> Var {
    let op = Svd { full_matrices: false, compute_uv: false };
    results(op, &[a], 1).into_iter().next().unwrap_or_else(|| a.tracer().poisoned())
}

/// The cut-off below which singular values count as zero in [`pinv`] and
/// [`lstsq`]: `factor · max(m, n) · ε · s_max`, per matrix `[..., 1]`.
fn cutoff(s: &Var, m: usize, n: usize, factor: f64) -> Var {
    let eps = if s.dtype() == DType::F32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
    if is_symbolic(m) || is_symbolic(n) {
        // The larger size as a value, from the call's binding.
        let size = crate::api::dim_value(m).maximum(&crate::api::dim_value(n)).cast(s.dtype());
        return s.max(&[-1], true) * size * (factor * eps);
    }
    s.max(&[-1], true) * (factor * m.max(n) as f64 * eps)
}

/// `1/s` where `s > cut`, else 0 (the reciprocal never sees a zero).
fn reciprocal_above(s: &Var, cut: &Var) -> Var {
    let keep = s.gt(cut);
    keep.select(&keep.select(s, &s.scalar_like(1.0)).recip(), &s.scalar_like(0.0))
}

/// `jnp.linalg.pinv(a)`: the Moore–Penrose pseudo-inverse `[..., n, m]`
/// through the SVD, singular values below `10·max(m, n)·ε·s_max` treated
/// as zero (JAX's default `rtol`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![1.0, 0.0, 0.0, 2.0, 0.0, 0.0], &[3, 2])?;
/// let p = jit(|a: &Var| linalg::pinv(a)).eval(&a)?;
/// p.assert_allclose(&Tensor::from_vec(vec![1.0, 0.0, 0.0, 0.0, 0.5, 0.0], &[2, 3])?, 1e-15, 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn pinv(a: &Var) -> Var {
    let [.., m, n] = *a.shape() else { return not_matrices(a, "pinv") };
    let (u, s, vt) = svd(a, false);
    let sinv = reciprocal_above(&s, &cutoff(&s, m, n, 10.0));
    (vt.transpose() * sinv.unsqueeze(-2)).matmul(&u.transpose())
}

/// `jnp.linalg.lstsq(a, b)`: the least-squares solution of `a x ≈ b`
/// through the SVD, as `(x, residuals, rank, s)`: `x` `[..., n]` or
/// `[..., n, k]` (as `b` is `[..., m]` or `[..., m, k]`), the squared
/// residual norms per column (`[..., 1]` or `[..., k]`, as JAX's), the numerical rank
/// (`i64`, singular values above `max(m, n)·ε·s_max`, JAX's default
/// `rcond`) and the singular values.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// // Fit y = c0 + c1 t through three points.
/// let a = Tensor::from_vec(vec![1.0, 0.0, 1.0, 1.0, 1.0, 2.0], &[3, 2])?;
/// let y = Tensor::from_vec(vec![1.0, 3.0, 5.0], &[3])?;
/// let (x, res, rank, _) = jit(|a: &Var, y: &Var| linalg::lstsq(a, y)).eval((&a, &y))?;
/// x.assert_allclose(&Tensor::from_vec(vec![1.0, 2.0], &[2])?, 1e-14, 1e-14);
/// assert!(res.item()? < 1e-25 && rank.to_vec::<i64>()? == vec![2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn lstsq(a: &Var, b: &Var) -> (Var, Var, Var, Var) {
    let [.., m, n] = *a.shape() else {
        let bad = not_matrices(a, "lstsq");
        return (bad.clone(), bad.clone(), bad.clone(), bad);
    };
    let (cols, vector) = as_columns(a, b);
    if cols.rank() < 2 || cols.shape()[cols.rank() - 2] != m {
        let bad = fail(
            a,
            Error::shape(
                "lstsq",
                &[a.shape(), b.shape()],
                format!(
                    "argument 1 must be [..., {m}] or [..., {m}, k], as argument 0 has {m} rows"
                ),
            ),
        );
        return (bad.clone(), bad.clone(), bad.clone(), bad);
    }
    let (u, s, vt) = svd(a, false);
    let cut = cutoff(&s, m, n, 1.0);
    let sinv = reciprocal_above(&s, &cut);
    let x = vt.transpose().matmul(&(u.transpose().matmul(&cols) * sinv.unsqueeze(-1)));
    let residuals = (&cols - &a.matmul(&x)).square().sum(&[-2]);
    let rank = s.gt(&cut).cast(DType::I64).sum(&[-1]);
    // `[..., 1]` for a vector `b`, as JAX's and NumPy's.
    (from_columns(x, vector), residuals, rank, s)
}

/// `jnp.diagonal(a, offset, -2, -1)`: diagonal `offset` of the last two
/// axes, `[..., len]`.
pub fn diagonal(a: &Var, offset: i64) -> Var {
    a.apply(Diagonal { offset }, &[])
}

/// `jnp.trace(a, offset, -2, -1)`: the sum of diagonal `offset`, `[...]`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// assert_eq!(jit(|a: &Var| linalg::trace(a, 0)).eval(&a)?.item()?, 5.0);
/// assert_eq!(grad(|a: &Var| linalg::trace(a, 1)).eval(&a)?.to_vec::<f64>()?, vec![0.0, 1.0, 0.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn trace(a: &Var, offset: i64) -> Var {
    if a.rank() < 2 {
        return not_matrices(a, "trace");
    }
    diagonal(a, offset).sum(&[-1])
}

/// `jnp.tril(a, k)`: the lower triangle `j − i ≤ k` of the last two axes.
pub fn tril(a: &Var, k: i64) -> Var {
    a.apply(Triangle::lower(k), &[])
}

/// `jnp.triu(a, k)`: the upper triangle `j − i ≥ k` of the last two axes.
pub fn triu(a: &Var, k: i64) -> Var {
    a.apply(Triangle::upper(k), &[])
}

/// `jnp.linalg.vector_norm(x, ord, axis, keepdims)`: the `ord`-norm over
/// `axes` (every axis when empty): `ord` = 2 (Euclidean), 1, any `p > 0`
/// (`(Σ |x|^p)^(1/p)`), `f64::INFINITY` (max `|x|`), `f64::NEG_INFINITY`
/// (min `|x|`), 0 (the number of non-zeros).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let x = Tensor::from_vec(vec![3.0, -4.0], &[2])?;
/// let n = |ord: f64| jit(move |x: &Var| linalg::vector_norm(x, ord, &[], false)).eval(&x);
/// assert_eq!(n(2.0)?.item()?, 5.0);
/// assert_eq!(n(1.0)?.item()?, 7.0);
/// assert_eq!(n(f64::INFINITY)?.item()?, 4.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn vector_norm(x: &Var, ord: f64, axes: &[i64], keepdims: bool) -> Var {
    let all: Vec<i64> = (0..x.rank() as i64).collect();
    let axes = if axes.is_empty() { &all[..] } else { axes };
    let sum = |v: &Var| if keepdims { v.sum_keepdims(axes) } else { v.sum(axes) };
    if ord == 2.0 {
        sum(&x.square()).sqrt()
    } else if ord == 1.0 {
        sum(&x.abs())
    } else if ord == f64::INFINITY {
        x.abs().max(axes, keepdims)
    } else if ord == f64::NEG_INFINITY {
        x.abs().min(axes, keepdims)
    } else if ord == 0.0 {
        sum(&x.not_equal(&x.scalar_like(0.0)).cast(x.dtype()))
    } else {
        sum(&x.abs().powf(ord)).powf(1.0 / ord)
    }
}

/// The `ord` of [`matrix_norm`], as `jnp.linalg.matrix_norm`'s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatrixNorm {
    /// `'fro'`: the Frobenius norm.
    #[default]
    Fro,
    /// `'nuc'`: the sum of the singular values.
    Nuc,
    /// `1`: the largest column sum of `|a|`.
    One,
    /// `-1`: the smallest column sum of `|a|`.
    NegOne,
    /// `2`: the largest singular value.
    Two,
    /// `-2`: the smallest singular value.
    NegTwo,
    /// `inf`: the largest row sum of `|a|`.
    Inf,
    /// `-inf`: the smallest row sum of `|a|`.
    NegInf,
}

/// `jnp.linalg.matrix_norm(a, ord, keepdims)` over the last two axes.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg::{self, MatrixNorm};
///
/// let a = Tensor::from_vec(vec![1.0, -2.0, 3.0, 4.0], &[2, 2])?;
/// let n = |ord| jit(move |a: &Var| linalg::matrix_norm(a, ord, false)).eval(&a);
/// assert_eq!(n(MatrixNorm::One)?.item()?, 6.0);
/// assert_eq!(n(MatrixNorm::Inf)?.item()?, 7.0);
/// assert!((n(MatrixNorm::Fro)?.item()? - 30f64.sqrt()).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn matrix_norm(a: &Var, ord: MatrixNorm, keepdims: bool) -> Var {
    if a.rank() < 2 {
        return not_matrices(a, "matrix_norm");
    }
    let keep = |v: Var| if keepdims { v.unsqueeze(-1).unsqueeze(-1) } else { v };
    match ord {
        MatrixNorm::Fro => keep(a.square().sum(&[-2, -1]).sqrt()),
        MatrixNorm::Nuc => keep(svdvals(a).sum(&[-1])),
        MatrixNorm::Two => keep(svdvals(a).max(&[-1], false)),
        MatrixNorm::NegTwo => keep(svdvals(a).min(&[-1], false)),
        MatrixNorm::One => keep(a.abs().sum(&[-2]).max(&[-1], false)),
        MatrixNorm::NegOne => keep(a.abs().sum(&[-2]).min(&[-1], false)),
        MatrixNorm::Inf => keep(a.abs().sum(&[-1]).max(&[-1], false)),
        MatrixNorm::NegInf => keep(a.abs().sum(&[-1]).min(&[-1], false)),
    }
}

/// The `ord` of [`norm`]: a vector norm's `p`, or a matrix norm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormOrd {
    /// A vector norm of this order (see [`vector_norm`]).
    Vector(f64),
    /// A matrix norm (see [`matrix_norm`]).
    Matrix(MatrixNorm),
}

/// `jnp.linalg.norm(x, ord, axis, keepdims)`: a vector norm over `axes`
/// (empty: every axis, flattened), or a matrix norm over the two `axes`
/// (rows, then columns; empty: the last two). With `keepdims`, the reduced
/// axes stay as axes of size 1.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg::{self, MatrixNorm, NormOrd};
///
/// // Two 2 x 2 matrices stacked on the last axis: x[i, j, b].
/// let x = Tensor::from_vec(vec![1.0, 0.0, -2.0, 0.0, 3.0, 0.0, 4.0, 5.0], &[2, 2, 2])?;
/// let one = jit(|x: &Var| linalg::norm(x, NormOrd::Matrix(MatrixNorm::One), &[0, 1], false));
/// assert_eq!(one.eval(&x)?.to_vec::<f64>()?, vec![6.0, 5.0]);
/// // One axis is not a matrix: an error, as in NumPy.
/// let bad = jit(|x: &Var| linalg::norm(x, NormOrd::Matrix(MatrixNorm::Fro), &[0], false));
/// assert!(bad.eval(&x).is_err());
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn norm(x: &Var, ord: NormOrd, axes: &[i64], keepdims: bool) -> Var {
    let m = match ord {
        NormOrd::Vector(p) => return vector_norm(x, p, axes, keepdims),
        NormOrd::Matrix(m) => m,
    };
    let r = x.rank();
    let axis = |a: i64| normalize_axis("norm", a, x.shape(), "axes");
    let (row, col) = match *axes {
        [] if r >= 2 => (r - 2, r - 1),
        [a, b] => match (axis(a), axis(b)) {
            (Ok(row), Ok(col)) if row != col => (row, col),
            (Err(e), _) | (_, Err(e)) => return fail(x, e),
            _ => {
                let e = format!("a matrix norm's two axes {axes:?} are one axis");
                return fail(x, Error::shape("norm", &[x.shape()], e));
            }
        },
        _ => {
            let e = format!(
                "a matrix norm takes two axes (none: the last two); it was given {axes:?} of {}",
                x.ty()
            );
            return fail(x, Error::shape("norm", &[x.shape()], e));
        }
    };
    if (row, col) == (r - 2, r - 1) {
        return matrix_norm(x, m, keepdims);
    }
    // The other axes in order, then the rows and the columns.
    let order: Vec<i64> =
        (0..r).filter(|&a| a != row && a != col).chain([row, col]).map(|a| a as i64).collect();
    let v = matrix_norm(&x.permute(&order), m, false);
    if keepdims {
        v.unsqueeze(row.min(col) as i64).unsqueeze(row.max(col) as i64)
    } else {
        v
    }
}

/// The error of `op` given `a` of rank below 2 (a poisoned value).
fn not_matrices(a: &Var, op: &str) -> Var {
    let e = format!("argument 0 must be matrices [..., m, n] (it is {})", a.ty());
    fail(a, Error::shape(op, &[a.shape()], e))
}
