//! The small symmetric eigensolver: [`LANES`] matrices at once, one per
//! SIMD lane, through Householder tridiagonalisation and the implicit
//! symmetric QR algorithm with Wilkinson shifts.
//!
//! Every loop runs over the lanes innermost with the same bounds for all
//! of them, so the compiler turns it into vector instructions: the
//! long-latency square roots and divisions of one rotation are computed for
//! eight matrices at once instead of stalling one matrix's chain. Where
//! lanes would diverge (a lane whose off-diagonal has already converged, or
//! whose unreduced block starts further down), the lane is masked: its
//! values on the tridiagonal band are selected unchanged, and its rows of
//! eigenvectors get the identity rotation `(c, s) = (1, 0)`, which leaves
//! every entry unchanged except possibly the sign of an exact zero (a
//! select there made the compiler give up vectorising over the lanes).
//! Each matrix therefore gets the operations it would get alone, whatever
//! the other matrices of its group: results do not depend on batching (up
//! to the sign of zero eigenvector entries, which compare equal).
//!
//! This replaced a cyclic Jacobi solver on the same lanes: Jacobi needs
//! about 7 sweeps of 28 rotations for an 8 × 8 matrix, each rotating two
//! full rows and columns; the QR algorithm about 100 Givens rotations per
//! group of 8 (each lane deflating on its own), each touching a few band
//! entries and two rows of the eigenvector matrix. On W11's forward batch
//! (4096 matrices 8 × 8, f64, one thread, on a loaded two-core machine):
//! scalar Jacobi 24 ms, Jacobi in lanes 12–15 ms, this 6–7 ms of CPU time
//! (eigenvalues only: about 4 ms).

// Index loops mirror the formulas (row i, column j, lane l).
#![allow(clippy::needless_range_loop)]

use super::Real;

/// Matrices processed together, one per lane: two AVX2 registers of f64.
pub(crate) const LANES: usize = 8;

/// One value per lane.
type Lanes<T> = [T; LANES];

/// QR iterations allowed per eigenvalue before it is deflated anyway. The
/// Wilkinson-shifted iteration converges globally, typically in 2–3
/// iterations; the cap only bounds the work on pathological rounding.
const MAX_ITERATIONS: usize = 40;

/// Eigendecomposition of `count ≤ LANES` symmetric `N × N` matrices (the
/// lower triangles of the row-major `a`): eigenvalues ascending into `w`
/// (`[count, N]`) and, when `V`, eigenvectors as the columns of `v`
/// (`[count, N, N]`), sign-normalised. Non-finite input gives NaN output.
///
/// Each matrix is first scaled by a power of two (exact) so that its
/// largest entry is near 1: squares then neither overflow nor underflow.
/// Off-diagonal entries of the tridiagonal matrix at most `ε·max|a_ij|`
/// are deflated to zero, so eigenvalues are accurate to a few ulp × N of
/// the matrix's norm.
#[inline(always)]
pub(crate) fn eigh_group<T: Real, const N: usize, const V: bool>(
    a: &[T],
    count: usize,
    w: &mut [T],
    v: &mut [T],
) {
    let mut m = [[[T::ZERO; LANES]; N]; N];
    let (tol, unscale, bad) = load(a, count, &mut m);
    let mut d = [[T::ZERO; LANES]; N];
    let mut e = [[T::ZERO; LANES]; N];
    let mut vt = [[[T::ZERO; LANES]; N]; N];
    tridiagonalise::<T, N, V>(&mut m, &mut d, &mut e, &mut vt);
    implicit_qr::<T, N, V>(&mut d, &mut e, &mut vt, &tol);
    if V {
        fix_signs(&mut vt);
    }
    for l in 0..count {
        let wl = &mut w[l * N..(l + 1) * N];
        let vl = if V { &mut v[l * N * N..(l + 1) * N * N] } else { &mut [][..] };
        if bad[l] {
            wl.fill(T::NAN);
            vl.fill(T::NAN);
        } else {
            sorted_output::<T, N, V>(&d, &vt, l, unscale[l], wl, vl);
        }
    }
}

/// Loads the lanes' lower triangles into full symmetric matrices scaled by
/// powers of two; returns the deflation tolerances, the factors undoing
/// the scaling, and which lanes had non-finite input (loaded as zeros).
#[inline(always)]
fn load<T: Real, const N: usize>(
    a: &[T],
    count: usize,
    m: &mut [[Lanes<T>; N]; N],
) -> (Lanes<T>, Lanes<T>, [bool; LANES]) {
    let mut tol = [T::ZERO; LANES];
    let mut unscale = [T::ONE; LANES];
    let mut bad = [false; LANES];
    for l in 0..count {
        let al = &a[l * N * N..(l + 1) * N * N];
        let mut max = T::ZERO;
        for i in 0..N {
            for &x in &al[i * N..i * N + i + 1] {
                if !x.is_finite_() {
                    bad[l] = true;
                } else if x.abs_() > max {
                    max = x.abs_();
                }
            }
        }
        if bad[l] {
            continue;
        }
        let (scale, inverse) = max.pow2_normaliser();
        unscale[l] = inverse;
        tol[l] = T::EPS * max * scale;
        for i in 0..N {
            for j in 0..=i {
                let x = al[i * N + j] * scale;
                m[i][j][l] = x;
                m[j][i][l] = x;
            }
        }
    }
    (tol, unscale, bad)
}

/// Householder tridiagonalisation `A = Q·T·Qᵀ` (Golub & Van Loan, Alg.
/// 8.3.1): `d` gets `T`'s diagonal, `e[k] = T[k+1][k]`, and when `V`, `vt`
/// gets `Qᵀ` (the starting point of the eigenvector rotations).
///
/// Step `k` reflects `x = A[k+1.., k]` onto `β·e₁` with `H = I − τ·u·uᵀ`,
/// `u₀ = 1`, `β = −sign(x₀)·‖x‖` (LAPACK's `dlarfg`), and updates the
/// trailing block as `A₂₂ − u·wᵀ − w·uᵀ` with `p = τ·A₂₂·u`,
/// `w = p − (τ/2)(uᵀp)·u`. A lane whose `x` is already `(x₀, 0, …)` gets
/// `τ = 0` (no reflection), selected so that no division by zero leaks.
#[inline(always)]
fn tridiagonalise<T: Real, const N: usize, const V: bool>(
    m: &mut [[Lanes<T>; N]; N],
    d: &mut [Lanes<T>; N],
    e: &mut [Lanes<T>; N],
    vt: &mut [[Lanes<T>; N]; N],
) {
    let half = T::ONE / (T::ONE + T::ONE);
    let mut us = [[[T::ZERO; LANES]; N]; N];
    let mut taus = [[T::ZERO; LANES]; N];
    for k in 0..N.saturating_sub(2) {
        // Lanes innermost everywhere, branch-free selects: vectorised.
        let mut sigma = [T::ZERO; LANES];
        for row in &m[k + 2..] {
            for l in 0..LANES {
                sigma[l] += row[k][l] * row[k][l];
            }
        }
        let (mut tau, mut beta, mut inv_head) =
            ([T::ZERO; LANES], [T::ZERO; LANES], [T::ZERO; LANES]);
        for l in 0..LANES {
            let alpha = m[k + 1][k][l];
            let norm = (alpha * alpha + sigma[l]).sqrt_();
            let b = if alpha < T::ZERO { norm } else { -norm };
            let reflect = sigma[l] > T::ZERO;
            let (t, h) = ((b - alpha) / b, T::ONE / (alpha - b));
            beta[l] = if reflect { b } else { alpha };
            tau[l] = if reflect { t } else { T::ZERO };
            inv_head[l] = if reflect { h } else { T::ZERO };
        }
        // u = (1, x₁/(x₀ − β), …) over indices k+1..N (zero where τ = 0).
        let u = &mut us[k];
        for l in 0..LANES {
            u[k + 1][l] = if tau[l] == T::ZERO { T::ZERO } else { T::ONE };
        }
        for i in k + 2..N {
            for l in 0..LANES {
                u[i][l] = m[i][k][l] * inv_head[l];
            }
        }
        taus[k] = tau;
        d[k] = m[k][k];
        e[k] = beta;
        // p = τ·A₂₂·u, then w = p − (τ/2)(uᵀp)·u, then the rank-2 update.
        let mut p = [[T::ZERO; LANES]; N];
        let mut upk = [T::ZERO; LANES];
        for i in k + 1..N {
            for j in k + 1..N {
                for l in 0..LANES {
                    p[i][l] += m[i][j][l] * u[j][l];
                }
            }
            for l in 0..LANES {
                p[i][l] *= tau[l];
                upk[l] += u[i][l] * p[i][l];
            }
        }
        for l in 0..LANES {
            upk[l] *= half * tau[l];
        }
        for i in k + 1..N {
            for l in 0..LANES {
                p[i][l] -= upk[l] * u[i][l];
            }
        }
        for i in k + 1..N {
            for j in k + 1..N {
                for l in 0..LANES {
                    m[i][j][l] -= u[i][l] * p[j][l] + p[i][l] * u[j][l];
                }
            }
        }
    }
    if N >= 2 {
        d[N - 2] = m[N - 2][N - 2];
        e[N - 2] = m[N - 1][N - 2];
    }
    if N >= 1 {
        d[N - 1] = m[N - 1][N - 1];
    }
    if V {
        accumulate_q::<T, N>(&us, &taus, vt);
    }
}

/// `vt = Qᵀ` for `Q = H₀·H₁·…`, accumulated backwards (each `H_k` only
/// touches the trailing block, where the product so far is not the
/// identity). Works on `Q` then transposes.
#[inline(always)]
fn accumulate_q<T: Real, const N: usize>(
    us: &[[Lanes<T>; N]; N],
    taus: &[Lanes<T>; N],
    vt: &mut [[Lanes<T>; N]; N],
) {
    let mut q = [[[T::ZERO; LANES]; N]; N];
    for (i, row) in q.iter_mut().enumerate() {
        row[i] = [T::ONE; LANES];
    }
    for k in (0..N.saturating_sub(2)).rev() {
        let (u, tau) = (&us[k], &taus[k]);
        for j in k + 1..N {
            let mut s = [T::ZERO; LANES];
            for i in k + 1..N {
                for l in 0..LANES {
                    s[l] += u[i][l] * q[i][j][l];
                }
            }
            for i in k + 1..N {
                for l in 0..LANES {
                    q[i][j][l] -= tau[l] * u[i][l] * s[l];
                }
            }
        }
    }
    for i in 0..N {
        for j in 0..N {
            vt[i][j] = q[j][i];
        }
    }
}

/// Implicit symmetric QR with Wilkinson shifts on the tridiagonal `(d, e)`
/// (Golub & Van Loan, Alg. 8.3.2 and 8.3.3), deflating from the bottom:
/// each lane has its own `hi`, lowered as soon as `|e[hi−1]| ≤ tol`, so a
/// lane does not wait for the others of its group to converge. A lane's
/// step starts at the top `lo` of its unreduced block (interior entries
/// within the tolerance are set to zero) and chases the bulge down to its
/// `hi`; the rotations are accumulated into the rows of `vt` (`Vᵀ`).
#[inline(always)]
fn implicit_qr<T: Real, const N: usize, const V: bool>(
    d: &mut [Lanes<T>; N],
    e: &mut [Lanes<T>; N],
    vt: &mut [[Lanes<T>; N]; N],
    tol: &Lanes<T>,
) {
    let mut hi = [N.saturating_sub(1); LANES];
    let mut iterations = [0usize; LANES];
    loop {
        let mut active = [false; LANES];
        let mut top = 0;
        for l in 0..LANES {
            while hi[l] > 0 && (e[hi[l] - 1][l].abs_() <= tol[l] || iterations[l] == MAX_ITERATIONS)
            {
                // The cap is not reached in practice; deflate rather than
                // loop on.
                if iterations[l] == MAX_ITERATIONS {
                    e[hi[l] - 1][l] = T::ZERO;
                }
                hi[l] -= 1;
                iterations[l] = 0;
            }
            active[l] = hi[l] > 0;
            top = top.max(hi[l]);
        }
        if top == 0 {
            return;
        }
        let lo = block_starts(e, &hi, tol, &active);
        let mu = wilkinson_shift(d, e, &hi);
        qr_step::<T, N, V>(d, e, vt, top, &hi, &lo, &mu, &active);
        for l in 0..LANES {
            iterations[l] += usize::from(active[l]);
        }
    }
}

/// Per active lane, the first index of the unreduced block ending at its
/// `hi`; the negligible entry above it is set to zero.
#[inline(always)]
fn block_starts<T: Real, const N: usize>(
    e: &mut [Lanes<T>; N],
    hi: &[usize; LANES],
    tol: &Lanes<T>,
    active: &[bool; LANES],
) -> [usize; LANES] {
    let mut lo = [0usize; LANES];
    for l in 0..LANES {
        if !active[l] {
            continue;
        }
        for k in (1..hi[l]).rev() {
            if e[k - 1][l].abs_() <= tol[l] {
                e[k - 1][l] = T::ZERO;
                lo[l] = k;
                break;
            }
        }
    }
    lo
}

/// Per lane, the eigenvalue of the trailing 2 × 2 block of its unreduced
/// block closer to the last diagonal entry: `μ = d_hi − e²/(δ +
/// sign(δ)·√(δ² + e²))`, `δ = (d_{hi−1} − d_hi)/2` (garbage, unused, for
/// lanes with `hi = 0`).
#[inline(always)]
fn wilkinson_shift<T: Real, const N: usize>(
    d: &[Lanes<T>; N],
    e: &[Lanes<T>; N],
    hi: &[usize; LANES],
) -> Lanes<T> {
    let half = T::ONE / (T::ONE + T::ONE);
    let mut mu = [T::ZERO; LANES];
    for l in 0..LANES {
        let h = hi[l].max(1).min(N - 1);
        let delta = (d[h - 1][l] - d[h][l]) * half;
        let b = e[h - 1][l];
        let root = (delta * delta + b * b).sqrt_();
        let denominator = if delta < T::ZERO { delta - root } else { delta + root };
        mu[l] = d[h][l] - b * b / denominator;
    }
    mu
}

/// One shifted QR step on every active lane's block `lo..=hi` (`top`: the
/// largest `hi`): Givens
/// rotations `G(k, k+1)` with `c = x/r`, `s = −z/r`, `r = √(x² + z²)`,
/// applied as `T ← Gᵀ·T·G` to the band (the bulge `T[k+2][k]` moves down)
/// and as `Vᵀ ← Gᵀ·Vᵀ` to the eigenvectors. One function: the bulge chase
/// carries `x` and `z` from one rotation to the next.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn qr_step<T: Real, const N: usize, const V: bool>(
    d: &mut [Lanes<T>; N],
    e: &mut [Lanes<T>; N],
    vt: &mut [[Lanes<T>; N]; N],
    top: usize,
    hi: &[usize; LANES],
    lo: &[usize; LANES],
    mu: &Lanes<T>,
    active: &[bool; LANES],
) {
    let mut x = [T::ZERO; LANES];
    let mut z = [T::ZERO; LANES];
    // Lanes innermost, masks applied by selects after computing everything
    // unconditionally: the loops vectorise (square roots and divisions of
    // masked lanes are computed and thrown away).
    for k in 0..top {
        let (mut on, mut first) = ([false; LANES], [false; LANES]);
        let (mut xs, mut zs) = ([T::ZERO; LANES], [T::ZERO; LANES]);
        for l in 0..LANES {
            first[l] = k == lo[l];
            on[l] = active[l] & (k >= lo[l]) & (k < hi[l]);
            let shifted = d[k][l] - mu[l];
            xs[l] = if first[l] { shifted } else { x[l] };
            zs[l] = if first[l] { e[k][l] } else { z[l] };
        }
        let (mut r, mut c, mut s) = ([T::ZERO; LANES], [T::ONE; LANES], [T::ZERO; LANES]);
        for l in 0..LANES {
            r[l] = (xs[l] * xs[l] + zs[l] * zs[l]).sqrt_();
            let inv = T::ONE / r[l];
            on[l] &= r[l] > T::ZERO;
            c[l] = if on[l] { xs[l] * inv } else { T::ONE };
            s[l] = if on[l] { -zs[l] * inv } else { T::ZERO };
        }
        if k > 0 {
            // The entry the rotation zeroed the bulge into: r.
            for l in 0..LANES {
                let chase = on[l] & !first[l];
                e[k - 1][l] = if chase { r[l] } else { e[k - 1][l] };
            }
        }
        for l in 0..LANES {
            let (a, b, cc) = (d[k][l], e[k][l], d[k + 1][l]);
            let (cl, sl) = (c[l], s[l]);
            let cs = cl * sl;
            let two_bcs = (b + b) * cs;
            let dk = cl * cl * a - two_bcs + sl * sl * cc;
            let dk1 = sl * sl * a + two_bcs + cl * cl * cc;
            let ek = cs * (a - cc) + b * (cl * cl - sl * sl);
            d[k][l] = if on[l] { dk } else { a };
            d[k + 1][l] = if on[l] { dk1 } else { cc };
            e[k][l] = if on[l] { ek } else { b };
            x[l] = if on[l] { ek } else { x[l] };
        }
        if k + 1 < top {
            for l in 0..LANES {
                let inside = on[l] & (k + 1 < hi[l]);
                let below = e[k + 1][l];
                z[l] = if inside { -s[l] * below } else { z[l] };
                e[k + 1][l] = if inside { c[l] * below } else { below };
            }
        }
        if V && on.contains(&true) {
            // Masked lanes have (c, s) = (1, 0): the identity rotation,
            // exact up to the sign of a zero entry. Without a select the
            // loop vectorises over the lanes (with one, the compiler
            // vectorised over `j` with gathers: a third of the solver's
            // time).
            let (head, tail) = vt.split_at_mut(k + 1);
            let (rp, rq) = (&mut head[k], &mut tail[0]);
            for j in 0..N {
                for l in 0..LANES {
                    let (xp, xq) = (rp[j][l], rq[j][l]);
                    rp[j][l] = c[l] * xp - s[l] * xq;
                    rq[j][l] = s[l] * xp + c[l] * xq;
                }
            }
        }
    }
}

/// The sign convention on every row of `vt` in every lane: negate the row
/// if its component of largest magnitude (the first on ties) is negative.
/// The same rule as [`fix_sign`](super::eigh::fix_sign), across lanes.
#[inline(always)]
fn fix_signs<T: Real, const N: usize>(vt: &mut [[Lanes<T>; N]; N]) {
    for row in vt.iter_mut() {
        let mut best = [T::ZERO; LANES];
        let mut negative = [false; LANES];
        for x in row.iter() {
            for l in 0..LANES {
                let larger = x[l].abs_() > best[l];
                best[l] = if larger { x[l].abs_() } else { best[l] };
                negative[l] = if larger { x[l] < T::ZERO } else { negative[l] };
            }
        }
        for x in row.iter_mut() {
            for l in 0..LANES {
                x[l] = if negative[l] { -x[l] } else { x[l] };
            }
        }
    }
}

/// Writes lane `l`'s eigenvalues ascending (unscaled) into `w` and, when
/// `V`, its rows of `vt` in the same order (already sign-normalised) as the
/// columns of `v`.
#[inline(always)]
fn sorted_output<T: Real, const N: usize, const V: bool>(
    d: &[Lanes<T>; N],
    vt: &[[Lanes<T>; N]; N],
    l: usize,
    unscale: T,
    w: &mut [T],
    v: &mut [T],
) {
    // Insertion sort of indices (stable, total order: no panic on NaN).
    let mut order = [0usize; N];
    for i in 0..N {
        let mut j = i;
        while j > 0 && d[order[j - 1]][l].total_cmp_(&d[i][l]).is_gt() {
            order[j] = order[j - 1];
            j -= 1;
        }
        order[j] = i;
    }
    for (j, &o) in order.iter().enumerate() {
        w[j] = d[o][l] * unscale;
        if V {
            for i in 0..N {
                v[i * N + j] = vt[o][i][l];
            }
        }
    }
}
