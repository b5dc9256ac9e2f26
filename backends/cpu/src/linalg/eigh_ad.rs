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
use super::{LinalgError, Real, SMALL_DIM};
use faer::Par;

/// `c = a·b` for row-major `n × n` matrices, row updates (the inner loop
/// runs along rows of `b` and `c`: it vectorises).
#[inline(always)]
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
#[inline(always)]
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
#[inline(always)]
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
        let one = Tangent { w: wb, v: vb, da: ab, dw: dwb, dv: dvb, s, symmetrize };
        tangent_at(one, n);
        Ok(())
    })
}

/// One matrix of [`eigh_tangent`]: its inputs, outputs and `3n²` scratch.
struct Tangent<'a, T> {
    w: &'a [T],
    v: &'a [T],
    da: &'a [T],
    dw: &'a mut [T],
    dv: &'a mut [T],
    s: &'a mut [T],
    symmetrize: bool,
}

/// One matrix of [`eigh_tangent`] (inlined into each size's instance).
#[inline(always)]
fn tangent_one<T: Real>(m: Tangent<'_, T>, n: usize) {
    let Tangent { w, v, da, dw, dv, s, symmetrize } = m;
    let per = n * n;
    let (sym, rest) = s.split_at_mut(per);
    let (t, x) = rest.split_at_mut(per);
    let half = T::ONE / (T::ONE + T::ONE);
    for i in 0..n {
        for j in 0..n {
            sym[i * n + j] = if symmetrize {
                (da[i * n + j] + da[j * n + i]) * half
            } else {
                da[i.max(j) * n + i.min(j)]
            };
        }
    }
    // X = Vᵀ·(S·V): t = S·V, then sym = Vᵀ, x = Vᵀ·t.
    mul(sym, v, t, n);
    transpose_into(v, sym, n);
    mul(sym, t, x, n);
    for i in 0..n {
        dw[i] = x[i * n + i];
    }
    // V̇ = V·(F ∘ X), F in t.
    gaps(w, t, n);
    for (xi, fi) in x.iter_mut().zip(t.iter()) {
        *xi *= *fi;
    }
    mul(v, x, dv, n);
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
        let one = Cotangent { w: wb, v: vb, wbar: cw, vbar: cv, out: ob, s, symmetrize };
        cotangent_at(one, n);
        Ok(())
    })
}

/// One matrix of [`eigh_cotangent`]: its inputs, output and `3n²` scratch.
struct Cotangent<'a, T> {
    w: &'a [T],
    v: &'a [T],
    wbar: &'a [T],
    vbar: &'a [T],
    out: &'a mut [T],
    s: &'a mut [T],
    symmetrize: bool,
}

/// One matrix of [`eigh_cotangent`] (inlined into each size's instance).
#[inline(always)]
fn cotangent_one<T: Real>(m: Cotangent<'_, T>, n: usize) {
    let Cotangent { w, v, wbar, vbar, out, s, symmetrize } = m;
    let per = n * n;
    let (vt, rest) = s.split_at_mut(per);
    let (y, f) = rest.split_at_mut(per);
    // Y = diag(w̄) + F ∘ (Vᵀ·V̄).
    transpose_into(v, vt, n);
    mul(vt, vbar, y, n);
    gaps(w, f, n);
    for (yi, fi) in y.iter_mut().zip(f.iter()) {
        *yi *= *fi;
    }
    for i in 0..n {
        y[i * n + i] += wbar[i];
    }
    // G = (V·Y)·Vᵀ into out, through f.
    mul(v, y, f, n);
    mul(f, vt, out, n);
    let half = T::ONE / (T::ONE + T::ONE);
    for i in 0..n {
        for j in 0..i {
            let s = out[i * n + j] + out[j * n + i];
            if symmetrize {
                out[i * n + j] = s * half;
                out[j * n + i] = s * half;
            } else {
                out[i * n + j] = s;
                out[j * n + i] = T::ZERO;
            }
        }
    }
}

/// Generates the per-size dispatch of one matrix's function: `$at(m, n)`
/// runs `$one(m, n)` through an instance for the constant `n` compiled for
/// AVX2 (`$avx2`) when `n ≤ SMALL_DIM` and the CPU has AVX2 (constant loop
/// bounds: unrolled and vectorised; a product and a sum stay two roundings,
/// no FMA, so both give identical results), else the generic loop.
macro_rules! sized {
    ($at:ident, $avx2:ident, $one:ident, $m:ident) => {
        /// The AVX2 instance for size `N`.
        ///
        /// # Safety
        ///
        /// The CPU must support AVX2.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $avx2<T: Real, const N: usize>(m: $m<'_, T>) {
            $one(m, N);
        }

        fn $at<T: Real>(m: $m<'_, T>, n: usize) {
            #[cfg(target_arch = "x86_64")]
            if n <= SMALL_DIM && std::arch::is_x86_feature_detected!("avx2") {
                const _: () = assert!(SMALL_DIM == 16, "the sizes below must cover SMALL_DIM");
                // SAFETY: the only requirement of calling a function
                // compiled with `target_feature(enable = "avx2")` is that
                // the CPU supports AVX2, detected just above.
                match n {
                    1 => unsafe { $avx2::<T, 1>(m) },
                    2 => unsafe { $avx2::<T, 2>(m) },
                    3 => unsafe { $avx2::<T, 3>(m) },
                    4 => unsafe { $avx2::<T, 4>(m) },
                    5 => unsafe { $avx2::<T, 5>(m) },
                    6 => unsafe { $avx2::<T, 6>(m) },
                    7 => unsafe { $avx2::<T, 7>(m) },
                    8 => unsafe { $avx2::<T, 8>(m) },
                    9 => unsafe { $avx2::<T, 9>(m) },
                    10 => unsafe { $avx2::<T, 10>(m) },
                    11 => unsafe { $avx2::<T, 11>(m) },
                    12 => unsafe { $avx2::<T, 12>(m) },
                    13 => unsafe { $avx2::<T, 13>(m) },
                    14 => unsafe { $avx2::<T, 14>(m) },
                    15 => unsafe { $avx2::<T, 15>(m) },
                    16 => unsafe { $avx2::<T, 16>(m) },
                    _ => $one(m, n),
                }
                return;
            }
            $one(m, n);
        }
    };
}

sized!(tangent_at, tangent_avx2, tangent_one, Tangent);
sized!(cotangent_at, cotangent_avx2, cotangent_one, Cotangent);
