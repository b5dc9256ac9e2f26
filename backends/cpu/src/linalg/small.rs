//! Unblocked kernels on row-major matrices, in place, with no allocation:
//! the path for small matrices (and the reference the faer path is tested
//! against). Each is one textbook loop nest; they are longer than the rest
//! of the module's functions because splitting the loops would hide the
//! algorithm.

// Index loops mirror the textbook formulas (row i, column j, pivot k).
#![allow(clippy::needless_range_loop)]

use super::Real;

/// Cholesky in place of the `n × n` row-major `a`, reading its lower
/// triangle: on success the lower triangle holds `L` with `A = L·Lᵀ` and the
/// strict upper triangle is zeroed. On a pivot that is not positive (or is
/// NaN) returns its index; `a` is then partly overwritten.
pub(crate) fn cholesky_in_place<T: Real>(a: &mut [T], n: usize) -> Result<(), usize> {
    for j in 0..n {
        // Row j of L up to the diagonal is final once its diagonal is known;
        // the entries below use dot products of contiguous row prefixes.
        let row_j = &mut a[j * n..(j + 1) * n];
        let mut d = row_j[j];
        for k in 0..j {
            d -= row_j[k] * row_j[k];
        }
        if d.is_nan_() || d <= T::ZERO {
            return Err(j);
        }
        let d = d.sqrt_();
        row_j[j] = d;
        for x in &mut row_j[j + 1..] {
            *x = T::ZERO;
        }
        for i in j + 1..n {
            let (upper, lower) = a.split_at_mut(i * n);
            let row_j = &upper[j * n..j * n + j + 1];
            let row_i = &mut lower[..n];
            let mut s = row_i[j];
            for k in 0..j {
                s -= row_i[k] * row_j[k];
            }
            row_i[j] = s / row_j[j];
        }
    }
    Ok(())
}

/// LU with partial pivoting in place of the `m × n` row-major `a`: on return
/// the strict lower part holds the unit lower factor's multipliers and the
/// upper part `U`. `piv` (length `min(m, n)`) gets the row swaps, `perm`
/// (length `m`) the permutation (row `i` of `L·U` is row `perm[i]` of `A`).
///
/// Never fails: a zero pivot column is left as is (its multipliers are zero),
/// as LAPACK's `getrf` does. The pivot is the first entry of largest
/// magnitude, as LAPACK's `idamax` picks it.
pub(crate) fn lu_in_place<T: Real>(
    a: &mut [T],
    m: usize,
    n: usize,
    piv: &mut [i64],
    perm: &mut [i64],
) {
    for (i, p) in perm.iter_mut().enumerate() {
        *p = i as i64;
    }
    for k in 0..m.min(n) {
        let mut p = k;
        let mut best = a[k * n + k].abs_();
        for i in k + 1..m {
            let v = a[i * n + k].abs_();
            if v > best {
                best = v;
                p = i;
            }
        }
        piv[k] = p as i64;
        if p != k {
            let (top, bottom) = a.split_at_mut(p * n);
            top[k * n..(k + 1) * n].swap_with_slice(&mut bottom[..n]);
            perm.swap(k, p);
        }
        let pivot = a[k * n + k];
        if pivot == T::ZERO {
            continue;
        }
        let (top, bottom) = a.split_at_mut((k + 1) * n);
        let row_k = &top[k * n..];
        for row_i in bottom.chunks_exact_mut(n) {
            let l = row_i[k] / pivot;
            row_i[k] = l;
            for (x, &u) in row_i[k + 1..].iter_mut().zip(&row_k[k + 1..]) {
                *x -= l * u;
            }
        }
    }
}

/// The effective triangular matrix of a solve: `M(i, j)` is `a[i][j]`, or
/// `a[j][i]` when `trans`; `lower` says which triangle of `M` is used;
/// `unit` replaces its diagonal by ones.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tri<'a, T> {
    pub a: &'a [T],
    pub n: usize,
    pub lower: bool,
    pub trans: bool,
    pub unit: bool,
}

impl<T: Real> Tri<'_, T> {
    /// `M(i, j)`.
    #[inline(always)]
    pub(crate) fn at(&self, i: usize, j: usize) -> T {
        if self.trans {
            self.a[j * self.n + i]
        } else {
            self.a[i * self.n + j]
        }
    }

    /// Solves `M·X = B` in place, `x` row-major `n × k` holding `B`.
    /// Substitution row by row: each step is an axpy on contiguous rows.
    pub(crate) fn solve_left(&self, x: &mut [T], k: usize) {
        let n = self.n;
        for step in 0..n {
            let i = if self.lower { step } else { n - 1 - step };
            let (before, from_i) = x.split_at_mut(i * k);
            let (row_i, after) = from_i.split_at_mut(k);
            let (lo, hi) = if self.lower { (0, i) } else { (i + 1, n) };
            for j in lo..hi {
                let mij = self.at(i, j);
                let row_j = if j < i {
                    &before[j * k..(j + 1) * k]
                } else {
                    &after[(j - i - 1) * k..(j - i) * k]
                };
                for (xi, &xj) in row_i.iter_mut().zip(row_j) {
                    *xi -= mij * xj;
                }
            }
            if !self.unit {
                let d = self.at(i, i);
                for xi in row_i.iter_mut() {
                    *xi /= d;
                }
            }
        }
    }

    /// The transposed matrix `Mᵀ` (same storage).
    pub(crate) fn transposed(self) -> Self {
        Tri { lower: !self.lower, trans: !self.trans, ..self }
    }

    /// Solves `X·M = B` in place, `x` row-major `rows × n`: each row of `X`
    /// solves `Mᵀ·xᵀ = bᵀ` on its own.
    pub(crate) fn solve_right(&self, x: &mut [T], rows: usize) {
        let t = self.transposed();
        if self.n == 0 {
            return;
        }
        for row in x.chunks_exact_mut(self.n).take(rows) {
            t.solve_left(row, 1);
        }
    }
}
