//! The derivative of the symmetric eigendecomposition and its adjoint, one
//! pass per matrix.
//!
//! With `A = V·diag(w)·Vᵀ`, `X = Vᵀ·S(Ȧ)·V` and `F_ij = 1/(w_j − w_i)` off
//! the diagonal (0 where `|w_j − w_i| ≤ 16·ε·max|w|`, and on the diagonal),
//! the tangent is `ẇ = diag(X)`, `V̇ = V·(F ∘ X)` (JAX's rule). `S` turns
//! the tangent into the symmetric matrix the decomposition sees:
//! `(Ȧ + Ȧᵀ)/2` when the input is symmetrised, else the symmetric matrix
//! whose lower triangle is `Ȧ`'s. The adjoint takes `(w̄, V̄)` to
//! `S*(V·(diag(w̄) + F ∘ (Vᵀ V̄))·Vᵀ)`.
//!
//! Composed from batched ops, each of these is a dozen passes over the
//! batch (the gaps, the mask, the reciprocals, three products, the
//! transposes); here each matrix is read once and its products run on
//! scratch made once per chunk of the batch (no allocation per matrix).

// Index loops mirror the formulas (row i, column j).
#![allow(clippy::needless_range_loop)]

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::{LinalgError, Real};
use faer::Par;

/// `c = a·b` for row-major `n × n` matrices, row updates (the inner loop
/// runs along rows of `b` and `c`: it vectorises).
#[inline]
fn mul<T: Real>(a: &[T], b: &[T], c: &mut [T], n: usize) {
    for (ci, ai) in c.chunks_exact_mut(n).zip(a.chunks_exact(n)) {
        ci.fill(T::ZERO);
        for (&x, bk) in ai.iter().zip(b.chunks_exact(n)) {
            for (d, &y) in ci.iter_mut().zip(bk) {
                *d += x * y;
            }
        }
    }
}

/// `t = mᵀ` for a row-major `n × n` matrix.
#[inline]
fn transpose_into<T: Real>(m: &[T], t: &mut [T], n: usize) {
    for i in 0..n {
        for j in 0..n {
            t[j * n + i] = m[i * n + j];
        }
    }
}

/// `F` of the eigenvalues `w` (length `n`) into `f` (`n × n`): `1/(w_j −
/// w_i)` where the gap exceeds `16·ε·max|w|`, else 0. The same values as
/// the op's composite definition (`safe_reciprocal` in anvil's ops).
#[inline]
fn gaps<T: Real>(w: &[T], f: &mut [T], n: usize) {
    let mut scale = T::ZERO;
    for &x in w {
        // The composite's `reduce_max` of `|w|` (NaN propagates there too).
        if x.abs_() > scale || x.is_nan_() {
            scale = x.abs_();
        }
    }
    let sixteen = T::from_usize(16);
    let tol = scale * (sixteen * T::EPS);
    for i in 0..n {
        for j in 0..n {
            let d = w[j] - w[i];
            f[i * n + j] = if d.abs_() > tol { T::ONE / d } else { T::ZERO };
        }
    }
}

/// Checks the buffers of one call: `w`-like `[batch, n]`, the rest
/// `[batch, n, n]`.
fn check(
    vectors: &[(&'static str, usize)],
    matrices: &[(&'static str, usize)],
    batch: usize,
    n: usize,
) -> Result<(), LinalgError> {
    for &(name, len) in vectors {
        check_len(name, len, &[batch, n])?;
    }
    for &(name, len) in matrices {
        check_len(name, len, &[batch, n, n])?;
    }
    Ok(())
}

/// The tangent of [`eigh`](super::eigh()): `ẇ = diag(X)`, `V̇ = V·(F ∘ X)`
/// with `X = Vᵀ·S(Ȧ)·V`, for a batch.
///
/// `w` is `[batch, n]` (the eigenvalues), `v` and `da` `[batch, n, n]`
/// row-major (the eigenvectors as columns, the tangent of the input);
/// `dw` and `dv` get the tangents. With `symmetrize`, `S(Ȧ) = (Ȧ + Ȧᵀ)/2`;
/// without, `S(Ȧ)` is the symmetric matrix whose lower triangle is `Ȧ`'s.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::eigh_tangent;
/// use faer::Par;
///
/// // A = diag(1, 3), V = I: Ȧ's diagonal moves the eigenvalues, its
/// // off-diagonal entry turns the eigenvectors at rate Ȧ₀₁/(w₁ − w₀).
/// let (w, v, da) = ([1.0, 3.0], [1.0, 0.0, 0.0, 1.0], [0.5, 2.0, 2.0, -1.0_f64]);
/// let (mut dw, mut dv) = ([0.0; 2], [0.0; 4]);
/// eigh_tangent(&w, &v, &da, &mut dw, &mut dv, 1, 2, true, Par::Seq).unwrap();
/// assert_eq!(dw, [0.5, -1.0]);
/// assert_eq!(dv, [0.0, 1.0, -1.0, 0.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn eigh_tangent<T: Real>(
    w: &[T],
    v: &[T],
    da: &[T],
    dw: &mut [T],
    dv: &mut [T],
    batch: usize,
    n: usize,
    symmetrize: bool,
    par: Par,
) -> Result<(), LinalgError> {
    check(
        &[("w", w.len()), ("dw", dw.len())],
        &[("v", v.len()), ("da", da.len()), ("dv", dv.len())],
        batch,
        n,
    )?;
    let per = n * n;
    let plan = plan(par, batch, n, (3 * per * n) as f64);
    let scratch = || vec![T::ZERO; 3 * per];
    run(batch, plan, (Per(dw, n), Per(dv, per)), scratch, |b, (Per(dwb, _), Per(dvb, _)), s| {
        let (wb, vb, ab) = (&w[b * n..][..n], &v[b * per..][..per], &da[b * per..][..per]);
        let (sym, rest) = s.split_at_mut(per);
        let (t, x) = rest.split_at_mut(per);
        let half = T::ONE / (T::ONE + T::ONE);
        for i in 0..n {
            for j in 0..n {
                sym[i * n + j] = if symmetrize {
                    (ab[i * n + j] + ab[j * n + i]) * half
                } else {
                    ab[i.max(j) * n + i.min(j)]
                };
            }
        }
        // X = Vᵀ·(S·V): t = S·V, then sym = Vᵀ, x = Vᵀ·t.
        mul(sym, vb, t, n);
        transpose_into(vb, sym, n);
        mul(sym, t, x, n);
        for i in 0..n {
            dwb[i] = x[i * n + i];
        }
        // V̇ = V·(F ∘ X), F in t.
        gaps(wb, t, n);
        for (xi, fi) in x.iter_mut().zip(t.iter()) {
            *xi *= *fi;
        }
        mul(vb, x, dvb, n);
        Ok(())
    })
}

/// The adjoint of [`eigh_tangent`] in `Ȧ`: `Ā = S*(V·(diag(w̄) + F ∘
/// (Vᵀ·V̄))·Vᵀ)` for a batch, with `S*(G) = (G + Gᵀ)/2` when `symmetrize`,
/// else the lower triangle of `G + Gᵀ` with the diagonal halved (the upper
/// triangle zero).
///
/// `w` and `w̄` (`wbar`) are `[batch, n]`, `v`, `V̄` (`vbar`) and `out`
/// `[batch, n, n]` row-major.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::eigh_cotangent;
/// use faer::Par;
///
/// // V = I: the eigenvalues' cotangent lands on the diagonal.
/// let (w, v) = ([1.0, 3.0], [1.0, 0.0, 0.0, 1.0_f64]);
/// let mut out = [0.0; 4];
/// eigh_cotangent(&w, &v, &[2.0, 5.0], &[0.0; 4], &mut out, 1, 2, true, Par::Seq).unwrap();
/// assert_eq!(out, [2.0, 0.0, 0.0, 5.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn eigh_cotangent<T: Real>(
    w: &[T],
    v: &[T],
    wbar: &[T],
    vbar: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    symmetrize: bool,
    par: Par,
) -> Result<(), LinalgError> {
    let matrices = [("v", v.len()), ("vbar", vbar.len()), ("out", out.len())];
    check(&[("w", w.len()), ("wbar", wbar.len())], &matrices, batch, n)?;
    let per = n * n;
    let plan = plan(par, batch, n, (3 * per * n) as f64);
    let scratch = || vec![T::ZERO; 3 * per];
    run(batch, plan, Per(out, per), scratch, |b, Per(ob, _), s| {
        let (wb, vb) = (&w[b * n..][..n], &v[b * per..][..per]);
        let (cw, cv) = (&wbar[b * n..][..n], &vbar[b * per..][..per]);
        let (vt, rest) = s.split_at_mut(per);
        let (y, f) = rest.split_at_mut(per);
        // Y = diag(w̄) + F ∘ (Vᵀ·V̄).
        transpose_into(vb, vt, n);
        mul(vt, cv, y, n);
        gaps(wb, f, n);
        for (yi, fi) in y.iter_mut().zip(f.iter()) {
            *yi *= *fi;
        }
        for i in 0..n {
            y[i * n + i] += cw[i];
        }
        // G = (V·Y)·Vᵀ into ob, through f.
        mul(vb, y, f, n);
        mul(f, vt, ob, n);
        let half = T::ONE / (T::ONE + T::ONE);
        for i in 0..n {
            for j in 0..i {
                let s = ob[i * n + j] + ob[j * n + i];
                if symmetrize {
                    ob[i * n + j] = s * half;
                    ob[j * n + i] = s * half;
                } else {
                    ob[i * n + j] = s;
                    ob[j * n + i] = T::ZERO;
                }
            }
        }
        Ok(())
    })
}
