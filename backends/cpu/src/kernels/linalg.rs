//! The kernels of the linear-algebra ops (`anvil_ops::linalg`): thin
//! adapters from tensors to the batched functions of [`crate::linalg`]
//! (faer underneath, the batch split across rayon's threads), plus the few
//! ops made of several of them (`cho_solve`, the adjugate).
//!
//! Tensors are contiguous row-major, which is the layout [`crate::linalg`]
//! takes, so operands are read in place. The kernels map
//! [`LinalgError`]s to [`Error::Linalg`], naming the function the user
//! called and the failing matrix's index in the batch shape.

use super::{arity, unsupported};
use crate::linalg::{self as la, ABatch, FactorLayout, FailMode, LinalgError, Real};
use crate::{buffers, register_kernel, Parallelism};
use anvil_core::{DType, Element, Error, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::linalg::{
    Adjugate, CholSolve, Cholesky, CholeskyCotangent, CholeskyTangent, Det, Diagonal, Eigh, Inv,
    Lu, LuAdjugate, LuPivotsToPermutation, LuSolve, LuTransposed, OnFailure, Qr, QrMode, Slogdet,
    Solve, Svd, TriangularSolve,
};
use anvil_ops::linalg::{EighCotangent, EighTangent};
use faer::Par;
use rayon::prelude::*;

/// faer's parallelism for the batched functions: they split the batch
/// across at most this many threads themselves.
fn par(ctx: &Parallelism) -> Par {
    match ctx.thread_count() {
        0 | 1 => Par::Seq,
        t => Par::rayon(t),
    }
}

fn mode(on_failure: OnFailure) -> FailMode {
    match on_failure {
        OnFailure::Error => FailMode::Error,
        OnFailure::Nan => FailMode::Nan,
    }
}

/// The batch shape and matrix size `(batch, rows, cols)` of a tensor of
/// matrices.
fn dims(t: &TensorType) -> (Vec<usize>, usize, usize, usize) {
    let s = t.shape();
    let r = s.len();
    let (m, n) = if r >= 2 { (s[r - 2], s[r - 1]) } else { (1, s.last().copied().unwrap_or(1)) };
    let batch_shape = s[..r.saturating_sub(2)].to_vec();
    (batch_shape.clone(), batch_shape.iter().product(), m, n)
}

/// The multi-index of flat batch element `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
}

/// A [`LinalgError`] as the error of the function `op`.
fn linalg_error(op: &str, e: LinalgError, batch_shape: &[usize]) -> Error {
    let at = |i: usize, msg: String| Error::Linalg {
        op: op.into(),
        batch_index: unravel(i, batch_shape),
        batch_shape: batch_shape.to_vec(),
        msg,
    };
    match e {
        LinalgError::NotPositiveDefinite { batch_index, pivot } => at(
            batch_index,
            format!("is not positive definite (its leading minor of size {} is not)", pivot + 1),
        ),
        LinalgError::Singular { batch_index, pivot } => {
            at(batch_index, format!("is singular (zero pivot {pivot})"))
        }
        LinalgError::NoConvergence { batch_index } => {
            at(batch_index, "did not converge (the iteration failed)".into())
        }
        LinalgError::InvalidPermutation { batch_index, value } => {
            at(batch_index, format!("has a pivot or permutation entry {value} out of range"))
        }
        other => Error::invalid(op, "buffers", other.to_string()),
    }
}

/// Runs `$f::<T>` for the float dtype of `$t`.
macro_rules! by_float {
    ($op:expr, $t:expr, $f:ident($($arg:expr),*)) => {
        match $t.dtype() {
            DType::F64 => $f::<f64>($($arg),*),
            DType::F32 => $f::<f32>($($arg),*),
            d => Err(unsupported($op, 0, d)),
        }
    };
}

/// An output buffer of zeros, from the running plan's pool when it has one
/// (see [`crate::buffers`]: a fresh multi-megabyte buffer pays a page fault
/// per 4 KiB on every call). For kernels that may leave elements unwritten.
fn zeros<T: Real>(len: usize) -> Vec<T> {
    buffers::filled(len, T::ZERO)
}

fn tensor<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
    Tensor::from_vec(data, shape)
}

/// The lower triangle of `(A + Aᵀ)/2` for a batch of `n × n` matrices
/// (what the kernels read; the strict upper triangle is left zero), in
/// tiles so that the transposed reads stay in cache.
fn symmetrized<T: Real>(a: &[T], n: usize) -> buffers::Scratch<T> {
    const TILE: usize = 32;
    let half = T::ONE / (T::ONE + T::ONE);
    let mut s = buffers::scratch(a.len());
    s.fill(T::ZERO);
    let nn = (n * n).max(1);
    for (out, a) in s.chunks_mut(nn).zip(a.chunks(nn)) {
        for ib in (0..n).step_by(TILE) {
            for jb in (0..=ib).step_by(TILE) {
                for i in ib..(ib + TILE).min(n) {
                    for j in jb..(jb + TILE).min(i + 1) {
                        out[i * n + j] = (a[i * n + j] + a[j * n + i]) * half;
                    }
                }
            }
        }
    }
    s
}

// ---------------------------------------------------------------- cholesky

fn cholesky_k<T: Real + Element>(op: &dyn Op, x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let c = op.try_downcast::<Cholesky>()?;
    let (bs, batch, n, _) = dims(&x[0].ty());
    let a = x[0].as_slice::<T>()?;
    let mut out = zeros(a.len());
    // The symmetrisation happens in the copy the factorisation makes.
    let f = if c.symmetrize_input { la::cholesky_symmetrized } else { la::cholesky };
    f(a, &mut out, batch, n, mode(c.on_failure), par(ctx))
        .map_err(|e| linalg_error("cholesky", e, &bs))?;
    tensor(out, x[0].shape())
}

/// The kernel of [`Cholesky`].
pub fn cholesky(op: &dyn Op, x: &[&Tensor], _: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 1)?;
    by_float!(op, x[0], cholesky_k(op, x, ctx))
}

// ------------------------------------------------------- triangular solve

fn opts(t: &TriangularSolve) -> la::TriangularSolve {
    la::TriangularSolve {
        left_side: t.left_side,
        lower: t.lower,
        transpose_a: t.transpose_a,
        unit_diagonal: t.unit_diagonal,
    }
}

fn triangular_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    ctx: &Parallelism,
) -> Result<Tensor> {
    let t = op.try_downcast::<TriangularSolve>()?;
    let (bs, batch, m, k) = dims(&x[1].ty());
    let (a, b) = (x[0].as_slice::<T>()?, x[1].as_slice::<T>()?);
    let mut out = zeros(b.len());
    la::triangular_solve(a, b, &mut out, batch, m, k, ABatch::PerMatrix, opts(t), par(ctx))
        .map_err(|e| linalg_error("triangular_solve", e, &bs))?;
    tensor(out, x[1].shape())
}

/// The kernel of [`TriangularSolve`].
pub fn triangular_solve(
    op: &dyn Op,
    x: &[&Tensor],
    _: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, x, 2)?;
    by_float!(op, x[0], triangular_k(op, x, ctx))
}

// ------------------------------------------------------------- cho_solve

/// The first batch element whose `n × n` factor has an exact zero on its
/// diagonal, and where.
fn zero_pivot<T: Real>(f: &[T], n: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
    f.chunks((n * n).max(1))
        .enumerate()
        .filter_map(move |(b, m)| (0..n).find(|&i| m[i * n + i] == T::ZERO).map(|i| (b, i)))
}

/// Applies the failure mode to the solutions `out` (`per` elements each)
/// of factors with a zero pivot: an error for the first, or NaN.
fn singular<T: Real>(
    f: &[T],
    n: usize,
    out: &mut [T],
    per: usize,
    on: OnFailure,
    name: &str,
    bs: &[usize],
) -> Result<()> {
    for (b, pivot) in zero_pivot(f, n) {
        if on == OnFailure::Error {
            let e = LinalgError::Singular { batch_index: b, pivot };
            return Err(linalg_error(name, e, bs));
        }
        out[b * per..(b + 1) * per].fill(T::NAN);
    }
    Ok(())
}

fn solve_lower<T: Real>(
    l: &[T],
    b: &[T],
    batch: usize,
    n: usize,
    k: usize,
    transpose: bool,
    p: Par,
) -> std::result::Result<Vec<T>, LinalgError> {
    let o = la::TriangularSolve {
        left_side: true,
        lower: true,
        transpose_a: transpose,
        unit_diagonal: false,
    };
    let mut out = zeros(b.len());
    la::triangular_solve(l, b, &mut out, batch, n, k, ABatch::PerMatrix, o, p)?;
    Ok(out)
}

fn cho_solve_k<T: Real + Element>(op: &dyn Op, x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let c = op.try_downcast::<CholSolve>()?;
    let (bs, batch, n, k) = dims(&x[1].ty());
    let (l, b) = (x[0].as_slice::<T>()?, x[1].as_slice::<T>()?);
    let err = |e| linalg_error("cho_solve", e, &bs);
    let y = solve_lower(l, b, batch, n, k, false, par(ctx)).map_err(err)?;
    let mut out = solve_lower(l, &y, batch, n, k, true, par(ctx)).map_err(err)?;
    buffers::give_back(y);
    singular(l, n, &mut out, n * k, c.on_failure, "cho_solve", &bs)?;
    tensor(out, x[1].shape())
}

/// The kernel of [`CholSolve`]: two triangular solves.
pub fn cho_solve(op: &dyn Op, x: &[&Tensor], _: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 2)?;
    by_float!(op, x[0], cho_solve_k(op, x, ctx))
}

// ------------------------------------------------- Cholesky's tangent pair

/// The batched tangent and cotangent functions of [`crate::linalg`].
type CholeskyPairFn<T> =
    fn(&[T], &[T], &mut [T], usize, usize, bool, Par) -> std::result::Result<(), LinalgError>;

/// Runs the batched tangent (or cotangent) function `f` of
/// [`crate::linalg`] on a factor and a tangent of one shape.
fn cholesky_pair_k<T: Real + Element>(
    x: &[&Tensor],
    ctx: &Parallelism,
    f: CholeskyPairFn<T>,
    symmetrize: bool,
    name: &str,
) -> Result<Tensor> {
    let (bs, batch, n, _) = dims(&x[0].ty());
    let (l, s) = (x[0].as_slice::<T>()?, x[1].as_slice::<T>()?);
    // Every element is written (the strict upper triangles zeroed, or
    // mirrored for a symmetrised cotangent).
    let mut out = buffers::take(s.len());
    f(l, s, &mut out, batch, n, symmetrize, par(ctx)).map_err(|e| linalg_error(name, e, &bs))?;
    tensor(out, x[1].shape())
}

fn cholesky_tangent_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    ctx: &Parallelism,
) -> Result<Tensor> {
    let sym = op.try_downcast::<CholeskyTangent>()?.symmetrize;
    cholesky_pair_k(x, ctx, la::cholesky_tangent::<T>, sym, "cholesky_tangent")
}

fn cholesky_cotangent_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    ctx: &Parallelism,
) -> Result<Tensor> {
    let sym = op.try_downcast::<CholeskyCotangent>()?.symmetrize;
    cholesky_pair_k(x, ctx, la::cholesky_cotangent::<T>, sym, "cholesky_cotangent")
}

/// The kernel of [`CholeskyTangent`].
pub fn cholesky_tangent(
    op: &dyn Op,
    x: &[&Tensor],
    _: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, x, 2)?;
    by_float!(op, x[0], cholesky_tangent_k(op, x, ctx))
}

/// The kernel of [`CholeskyCotangent`].
pub fn cholesky_cotangent(
    op: &dyn Op,
    x: &[&Tensor],
    _: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, x, 2)?;
    by_float!(op, x[0], cholesky_cotangent_k(op, x, ctx))
}

// ---------------------------------------------------------------------- lu

fn lu_k<T: Real + Element>(
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
    layout: FactorLayout,
) -> Result<Vec<Tensor>> {
    let (bs, batch, m, n) = dims(&x[0].ty());
    let a = x[0].as_slice::<T>()?;
    // Every element of the factor and the pivots is written.
    let mut f = buffers::take(a.len());
    let mut piv = buffers::take(batch * m.min(n));
    let mut perm = buffers::take(batch * m);
    la::lu_with_layout(a, &mut f, &mut piv, &mut perm, batch, m, n, par(ctx), layout)
        .map_err(|e| linalg_error("lu", e, &bs))?;
    Ok(vec![
        tensor(f, outs[0].shape())?,
        tensor(piv, outs[1].shape())?,
        tensor(perm, outs[2].shape())?,
    ])
}

/// The kernel of [`Lu`].
pub fn lu(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 1)?;
    by_float!(op, x[0], lu_k(x, outs, ctx, FactorLayout::RowMajor))
}

/// The kernel of [`LuTransposed`]: faer's column-major factor as it is.
pub fn lu_transposed(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 1)?;
    by_float!(op, x[0], lu_k(x, outs, ctx, FactorLayout::ColumnMajor))
}

/// The kernel of [`LuPivotsToPermutation`].
pub fn pivots_to_permutation(
    op: &dyn Op,
    x: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    arity(op, x, 1)?;
    let size = op.try_downcast::<LuPivotsToPermutation>()?.permutation_size;
    let piv = x[0].as_slice::<i64>()?;
    let k = x[0].shape().last().copied().unwrap_or(0);
    let batch = out.numel() / size.max(1);
    let mut perm: Vec<i64> = Vec::with_capacity(out.numel());
    for b in 0..batch {
        let start = perm.len();
        perm.extend(0..size as i64);
        let p = &mut perm[start..];
        for (i, &j) in piv[b * k..(b + 1) * k].iter().enumerate() {
            if j < 0 || j as usize >= size {
                let bs = &out.shape()[..out.rank() - 1];
                let e = LinalgError::InvalidPermutation { batch_index: b, value: j };
                return Err(linalg_error("lu_pivots_to_permutation", e, bs));
            }
            p.swap(i, j as usize);
        }
    }
    tensor(perm, out.shape())
}

fn lu_solve_k<T: Real + Element>(op: &dyn Op, x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let s = op.try_downcast::<LuSolve>()?;
    let name = s.caller.name();
    let (bs, batch, n, k) = dims(&x[2].ty());
    let (f, perm, b) = (x[0].as_slice::<T>()?, x[1].as_slice::<i64>()?, x[2].as_slice::<T>()?);
    // Every element written: the right-hand side is copied in first.
    let mut out = buffers::take(b.len());
    let layout =
        if s.factor_transposed { FactorLayout::ColumnMajor } else { FactorLayout::RowMajor };
    let each = ABatch::PerMatrix;
    la::lu_solve_with_layout(
        f,
        perm,
        b,
        &mut out,
        batch,
        n,
        k,
        each,
        s.transpose,
        layout,
        par(ctx),
    )
    .map_err(|e| linalg_error(name, e, &bs))?;
    singular(f, n, &mut out, n * k, s.on_failure, name, &bs)?;
    tensor(out, x[2].shape())
}

/// The kernel of [`LuSolve`].
pub fn lu_solve(op: &dyn Op, x: &[&Tensor], _: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 3)?;
    by_float!(op, x[0], lu_solve_k(op, x, ctx))
}

fn solve_k<T: Real + Element>(op: &dyn Op, x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let s = op.try_downcast::<Solve>()?;
    let (bs, batch, n, _) = dims(&x[0].ty());
    let k = if Solve::vector_rhs(&x[0].ty(), &x[1].ty()) { 1 } else { dims(&x[1].ty()).3 };
    let a = x[0].as_slice::<T>()?;
    let b = x[1].as_slice::<T>()?;
    let err = |e| linalg_error("solve", e, &bs);
    // The factorisation is scratch; every element of it and of the
    // solution (the right-hand side copied in first) is written.
    let mut f = buffers::scratch::<T>(a.len());
    let mut piv = buffers::scratch::<i64>(batch * n);
    let mut perm = buffers::scratch::<i64>(batch * n);
    // Column-major, as faer writes it: no transposed copy of the factor.
    let (each, col) = (ABatch::PerMatrix, FactorLayout::ColumnMajor);
    la::lu_with_layout(a, &mut f, &mut piv, &mut perm, batch, n, n, par(ctx), col).map_err(err)?;
    let mut out = buffers::take(b.len());
    la::lu_solve_with_layout(&f, &perm, b, &mut out, batch, n, k, each, s.transpose, col, par(ctx))
        .map_err(err)?;
    singular(&f, n, &mut out, n * k, s.on_failure, "solve", &bs)?;
    tensor(out, x[1].shape())
}

/// The kernel of [`Solve`] (when it was not rewritten into `lu` and
/// `lu_solve`): one factorisation and one solve per matrix.
pub fn solve(op: &dyn Op, x: &[&Tensor], _: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 2)?;
    by_float!(op, x[0], solve_k(op, x, ctx))
}

fn inv_k<T: Real + Element>(op: &dyn Op, x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let on = op.try_downcast::<Inv>()?.on_failure;
    let (bs, batch, n, _) = dims(&x[0].ty());
    let a = x[0].as_slice::<T>()?;
    let mut out = zeros(a.len());
    la::inv(a, &mut out, batch, n, mode(on), par(ctx)).map_err(|e| linalg_error("inv", e, &bs))?;
    tensor(out, x[0].shape())
}

/// The kernel of [`Inv`].
pub fn inv(op: &dyn Op, x: &[&Tensor], _: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 1)?;
    by_float!(op, x[0], inv_k(op, x, ctx))
}

fn det_k<T: Real + Element>(x: &[&Tensor], out: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    let (bs, batch, n, _) = dims(&x[0].ty());
    let mut d = vec![T::ZERO; batch];
    la::det(x[0].as_slice::<T>()?, &mut d, batch, n, par(ctx))
        .map_err(|e| linalg_error("det", e, &bs))?;
    tensor(d, out.shape())
}

/// The kernel of [`Det`].
pub fn det(op: &dyn Op, x: &[&Tensor], out: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 1)?;
    by_float!(op, x[0], det_k(x, out, ctx))
}

fn slogdet_k<T: Real + Element>(
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let (bs, batch, n, _) = dims(&x[0].ty());
    let (mut sign, mut logabs) = (vec![T::ZERO; batch], vec![T::ZERO; batch]);
    la::slogdet(x[0].as_slice::<T>()?, &mut sign, &mut logabs, batch, n, par(ctx))
        .map_err(|e| linalg_error("slogdet", e, &bs))?;
    Ok(vec![tensor(sign, outs[0].shape())?, tensor(logabs, outs[1].shape())?])
}

/// The kernel of [`Slogdet`].
pub fn slogdet(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 1)?;
    by_float!(op, x[0], slogdet_k(x, outs, ctx))
}

// ---------------------------------------------------------------- adjugate

/// The sign of a permutation (by its cycles).
fn permutation_sign(perm: &[i64]) -> bool {
    let mut seen = vec![false; perm.len()];
    let mut even = true;
    for s in 0..perm.len() {
        let mut i = s;
        let mut len = 0;
        while !seen[i] {
            seen[i] = true;
            i = perm[i].clamp(0, perm.len() as i64 - 1) as usize;
            len += 1;
        }
        if len > 0 && len % 2 == 0 {
            even = !even;
        }
    }
    even
}

/// `adj(U)` of an upper triangular `U` (row-major `n × n`).
///
/// No zero on the diagonal: `det(U)·U⁻¹`. One zero, at `p`: `U` has rank
/// `n − 1` and `adj(U) = c·x·yᵀ` with `U x = 0`, `yᵀ U = 0` (`x_p = y_p =
/// 1`) and `c` the product of the other diagonal entries. Two or more:
/// cofactors computed one by one (`O(n⁵)`, only met at matrices of rank
/// `n − 2` or less, where most of them are zero).
fn adjugate_upper<T: Real>(u: &[T], n: usize) -> Vec<T> {
    let zeros: Vec<usize> = (0..n).filter(|&i| u[i * n + i] == T::ZERO).collect();
    let at = |i: usize, j: usize| if j >= i { u[i * n + j] } else { T::ZERO };
    match zeros.len() {
        0 => {
            let det = (0..n).fold(T::ONE, |d, i| d * u[i * n + i]);
            // Columns of det·U⁻¹ by back substitution.
            let mut out = vec![T::ZERO; n * n];
            for c in 0..n {
                for i in (0..=c).rev() {
                    let mut s = if i == c { det } else { T::ZERO };
                    for k in i + 1..=c {
                        s -= at(i, k) * out[k * n + c];
                    }
                    out[i * n + c] = s / u[i * n + i];
                }
            }
            out
        }
        1 => {
            let p = zeros[0];
            let c = (0..n).filter(|&i| i != p).fold(T::ONE, |d, i| d * u[i * n + i]);
            let mut x = vec![T::ZERO; n];
            x[p] = T::ONE;
            for i in (0..p).rev() {
                let s = (i + 1..=p).fold(T::ZERO, |s, k| s - at(i, k) * x[k]);
                x[i] = s / u[i * n + i];
            }
            let mut y = vec![T::ZERO; n];
            y[p] = T::ONE;
            for j in p + 1..n {
                let s = (p..j).fold(T::ZERO, |s, k| s - y[k] * at(k, j));
                y[j] = s / u[j * n + j];
            }
            let mut out = vec![T::ZERO; n * n];
            for i in 0..n {
                for j in 0..n {
                    out[i * n + j] = c * x[i] * y[j];
                }
            }
            out
        }
        _ => cofactors(u, n),
    }
}

/// `adj(U)` of a triangular `U` with several zero pivots by its
/// cofactors: `adj(U)_ij = (−1)^(i+j) det(U without row j and column i)`.
fn cofactors<T: Real>(u: &[T], n: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; n * n];
    let mut minor = vec![T::ZERO; (n - 1) * (n - 1)];
    let (mut f, mut piv, mut perm) = (minor.clone(), vec![0i64; n - 1], vec![0i64; n - 1]);
    for i in 0..n {
        for j in 0..n {
            let mut k = 0;
            for r in (0..n).filter(|&r| r != j) {
                for c in (0..n).filter(|&c| c != i) {
                    minor[k] = if c >= r { u[r * n + c] } else { T::ZERO };
                    k += 1;
                }
            }
            let _ = la::lu(&minor, &mut f, &mut piv, &mut perm, 1, n - 1, n - 1, Par::Seq);
            let mut d = [T::ZERO];
            let _ = la::det_from_lu(&f, &piv, &mut d, 1, n - 1);
            out[i * n + j] = if (i + j) % 2 == 0 { d[0] } else { -d[0] };
        }
    }
    out
}

/// `adj(A)` from `A = Pᵀ L U`: `adj(A) = adj(U)·L⁻¹·adj(Pᵀ)`, `adj(Pᵀ) =
/// det(P)·P` (so the columns are permuted back), `L` unit lower.
fn adjugate_one<T: Real>(f: &[T], perm: &[i64], n: usize, out: &mut [T]) {
    let au = adjugate_upper(f, n);
    // W = adj(U) L⁻¹: solve W L = adj(U) column by column from the right.
    let mut w = au;
    for j in (0..n).rev() {
        for k in j + 1..n {
            let l = f[k * n + j];
            if l != T::ZERO {
                for i in 0..n {
                    let v = w[i * n + k];
                    w[i * n + j] -= v * l;
                }
            }
        }
    }
    let s = if permutation_sign(perm) { T::ONE } else { -T::ONE };
    // (W P)_{i, c}: P has P[r, perm[r]] = 1, so (W P)[i, perm[r]] = W[i, r].
    for i in 0..n {
        for r in 0..n {
            let c = perm[r].clamp(0, n as i64 - 1) as usize;
            out[i * n + c] = s * w[i * n + r];
        }
    }
}

/// The adjugates of `batch` matrices `n × n` from their packed LU factors
/// `f` and permutations `perm`, the batch split across threads.
fn adjugates<T: Real>(f: &[T], perm: &[i64], batch: usize, n: usize, ctx: &Parallelism) -> Vec<T> {
    let mut out = zeros(f.len());
    let nn = n * n;
    if nn > 0 {
        let work = out.chunks_mut(nn).zip(f.chunks(nn).zip(perm.chunks(n)));
        let one = |(o, (f, p)): (&mut [T], (&[T], &[i64]))| adjugate_one(f, p, n, o);
        if ctx.thread_count() > 1 && batch > 1 {
            work.par_bridge().for_each(one);
        } else {
            work.for_each(one);
        }
    }
    out
}

fn adjugate_k<T: Real + Element>(x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let (_, batch, n, _) = dims(&x[0].ty());
    let (f, perm) = (x[0].as_slice::<T>()?, x[1].as_slice::<i64>()?);
    tensor(adjugates(f, perm, batch, n, ctx), x[0].shape())
}

/// The kernel of [`LuAdjugate`].
pub fn adjugate(op: &dyn Op, x: &[&Tensor], _: &TensorType, ctx: &Parallelism) -> Result<Tensor> {
    arity(op, x, 2)?;
    by_float!(op, x[0], adjugate_k(x, ctx))
}

fn adjugate_of_matrix_k<T: Real + Element>(x: &[&Tensor], ctx: &Parallelism) -> Result<Tensor> {
    let (bs, batch, n, _) = dims(&x[0].ty());
    let a = x[0].as_slice::<T>()?;
    let (mut f, mut piv, mut perm) = (zeros(a.len()), vec![0i64; batch * n], vec![0i64; batch * n]);
    // A singular matrix leaves a zero pivot, which the adjugate handles.
    la::lu(a, &mut f, &mut piv, &mut perm, batch, n, n, par(ctx))
        .map_err(|e| linalg_error("adjugate", e, &bs))?;
    tensor(adjugates(&f, &perm, batch, n, ctx), x[0].shape())
}

/// The kernel of [`Adjugate`] (which plans rewrite into `lu` and
/// [`LuAdjugate`]; this runs it where no rewrite did).
pub fn adjugate_of_matrix(
    op: &dyn Op,
    x: &[&Tensor],
    _: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, x, 1)?;
    by_float!(op, x[0], adjugate_of_matrix_k(x, ctx))
}

// ------------------------------------------------------ qr, eigh and svd

fn qr_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let q = op.try_downcast::<Qr>()?;
    let (bs, batch, m, n) = dims(&x[0].ty());
    let mode = match q.mode {
        QrMode::Reduced => la::QrMode::Reduced,
        QrMode::Complete => la::QrMode::Complete,
    };
    let (mut qo, mut ro) = (zeros(outs[0].numel()), zeros(outs[1].numel()));
    la::qr(x[0].as_slice::<T>()?, &mut qo, &mut ro, batch, m, n, mode, par(ctx))
        .map_err(|e| linalg_error("qr", e, &bs))?;
    Ok(vec![tensor(qo, outs[0].shape())?, tensor(ro, outs[1].shape())?])
}

/// The kernel of [`Qr`].
pub fn qr(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 1)?;
    by_float!(op, x[0], qr_k(op, x, outs, ctx))
}

fn eigh_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let e = op.try_downcast::<Eigh>()?;
    let (bs, batch, n, _) = dims(&x[0].ty());
    let a = x[0].as_slice::<T>()?;
    let sym;
    let a = if e.symmetrize_input {
        sym = symmetrized(a, n);
        &sym[..]
    } else {
        a
    };
    let (mut w, mut v) = (zeros(batch * n), zeros(a.len()));
    la::eigh(a, &mut w, &mut v, batch, n, par(ctx)).map_err(|e| linalg_error("eigh", e, &bs))?;
    Ok(vec![tensor(w, outs[0].shape())?, tensor(v, outs[1].shape())?])
}

/// The kernel of [`Eigh`].
pub fn eigh(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 1)?;
    by_float!(op, x[0], eigh_k(op, x, outs, ctx))
}

fn eigh_tangent_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let e = op.try_downcast::<EighTangent>()?;
    let (bs, batch, n, _) = dims(&x[1].ty());
    let (w, v, da) = (x[0].as_slice::<T>()?, x[1].as_slice::<T>()?, x[2].as_slice::<T>()?);
    // Every element of both results is written.
    let (mut dw, mut dv) = (buffers::take(w.len()), buffers::take(v.len()));
    la::eigh_tangent(w, v, da, &mut dw, &mut dv, batch, n, e.symmetrize_input, par(ctx))
        .map_err(|err| linalg_error("eigh_tangent", err, &bs))?;
    Ok(vec![tensor(dw, outs[0].shape())?, tensor(dv, outs[1].shape())?])
}

/// The kernel of [`EighTangent`].
pub fn eigh_tangent(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 3)?;
    by_float!(op, x[1], eigh_tangent_k(op, x, outs, ctx))
}

fn eigh_cotangent_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    let e = op.try_downcast::<EighCotangent>()?;
    let (bs, batch, n, _) = dims(&x[1].ty());
    let (w, v) = (x[0].as_slice::<T>()?, x[1].as_slice::<T>()?);
    let (wbar, vbar) = (x[2].as_slice::<T>()?, x[3].as_slice::<T>()?);
    // Every element is written.
    let mut a = buffers::take(v.len());
    la::eigh_cotangent(w, v, wbar, vbar, &mut a, batch, n, e.symmetrize_input, par(ctx))
        .map_err(|err| linalg_error("eigh_cotangent", err, &bs))?;
    tensor(a, out.shape())
}

/// The kernel of [`EighCotangent`].
pub fn eigh_cotangent(
    op: &dyn Op,
    x: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, x, 4)?;
    by_float!(op, x[1], eigh_cotangent_k(op, x, out, ctx))
}

fn svd_k<T: Real + Element>(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let s = op.try_downcast::<Svd>()?;
    let (bs, batch, m, n) = dims(&x[0].ty());
    let a = x[0].as_slice::<T>()?;
    let err = |e| linalg_error("svd", e, &bs);
    if !s.compute_uv {
        let mut sv = zeros(outs[0].numel());
        la::svd(a, &mut sv, &mut [], &mut [], batch, m, n, la::SvdMode::ValuesOnly, par(ctx))
            .map_err(err)?;
        return Ok(vec![tensor(sv, outs[0].shape())?]);
    }
    let mode = if s.full_matrices { la::SvdMode::Full } else { la::SvdMode::Reduced };
    let mut u = zeros(outs[0].numel());
    let mut sv = zeros(outs[1].numel());
    let mut vt = zeros(outs[2].numel());
    la::svd(a, &mut sv, &mut u, &mut vt, batch, m, n, mode, par(ctx)).map_err(err)?;
    Ok(vec![
        tensor(u, outs[0].shape())?,
        tensor(sv, outs[1].shape())?,
        tensor(vt, outs[2].shape())?,
    ])
}

/// The kernel of [`Svd`].
pub fn svd(
    op: &dyn Op,
    x: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    arity(op, x, 1)?;
    by_float!(op, x[0], svd_k(op, x, outs, ctx))
}

// ---------------------------------------------------------------- diagonal

fn diagonal_k<T: Element>(d: &Diagonal, x: &Tensor, out: &TensorType) -> Result<Tensor> {
    let (_, batch, m, n) = dims(&x.ty());
    let len = d.len(m, n);
    let (r0, c0) = d.start();
    let src = x.as_slice::<T>()?;
    let mut v = Vec::with_capacity(batch * len);
    for b in 0..batch {
        let base = b * m * n;
        v.extend((0..len).map(|i| src[base + (r0 + i) * n + c0 + i]));
    }
    Tensor::from_vec(v, out.shape())
}

/// The kernel of [`Diagonal`], for every dtype (the relayout machinery
/// evaluates it on indices).
pub fn diagonal(op: &dyn Op, x: &[&Tensor], out: &TensorType, _: &Parallelism) -> Result<Tensor> {
    arity(op, x, 1)?;
    let d = op.try_downcast::<Diagonal>()?;
    match x[0].storage() {
        Storage::F64(_) => diagonal_k::<f64>(d, x[0], out),
        Storage::F32(_) => diagonal_k::<f32>(d, x[0], out),
        Storage::I64(_) => diagonal_k::<i64>(d, x[0], out),
        Storage::Bool(_) => diagonal_k::<bool>(d, x[0], out),
    }
}

register_kernel!(Cholesky, cholesky);
register_kernel!(TriangularSolve, triangular_solve);
register_kernel!(CholSolve, cho_solve);
register_kernel!(CholeskyTangent, cholesky_tangent);
register_kernel!(CholeskyCotangent, cholesky_cotangent);
register_kernel!(Lu, many: lu);
register_kernel!(LuTransposed, many: lu_transposed);
register_kernel!(LuPivotsToPermutation, pivots_to_permutation);
register_kernel!(LuSolve, lu_solve);
register_kernel!(Solve, solve);
register_kernel!(Inv, inv);
register_kernel!(Det, det);
register_kernel!(Slogdet, many: slogdet);
register_kernel!(LuAdjugate, adjugate);
register_kernel!(Adjugate, adjugate_of_matrix);
register_kernel!(Qr, many: qr);
register_kernel!(Eigh, many: eigh);
register_kernel!(EighTangent, many: eigh_tangent);
register_kernel!(EighCotangent, eigh_cotangent);
register_kernel!(Svd, many: svd);
register_kernel!(Diagonal, diagonal);
