//! Batched triangular solves with the options of
//! `jax.lax.linalg.triangular_solve`.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::small::Tri;
use super::{LinalgError, Real, SMALL_DIM};
use faer::linalg::triangular_solve as ts;
use faer::{MatMut, MatRef, Par};
use rayon::prelude::*;

/// The options of a triangular solve, named and defaulted as in
/// `jax.lax.linalg.triangular_solve` (all `false` by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriangularSolve {
    /// Solve `op(A)·X = B` if true, `X·op(A) = B` if false.
    pub left_side: bool,
    /// Use the lower triangle of `A` if true, the upper one if false (the
    /// other triangle is never read).
    pub lower: bool,
    /// `op(A) = Aᵀ` if true, `A` if false. The triangle named by `lower` is
    /// the one of `A`, before transposition.
    pub transpose_a: bool,
    /// Take the diagonal of `A` as ones (it is never read).
    pub unit_diagonal: bool,
}

/// Whether each right-hand side has its own triangular matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ABatch {
    /// `a` is `[batch, s, s]`: one matrix per batch element.
    #[default]
    PerMatrix,
    /// `a` is `[s, s]`, shared by every batch element of `b` (the common
    /// case of a vmap over `b` only).
    Shared,
}

/// Solves triangular systems for a batch of right-hand sides.
///
/// `b` and `out` are `[batch, m, k]` row-major; `a` is `[batch, s, s]`
/// ([`ABatch::PerMatrix`]) or `[s, s]` ([`ABatch::Shared`]), with `s = m`
/// when `opts.left_side` (solve `op(A)·X = B`, `k` right-hand sides) and
/// `s = k` otherwise (solve `X·op(A) = B`). See [`TriangularSolve`] for
/// `op`, the triangle read and the unit diagonal. `b` and `out` may not
/// alias; the solve runs in place in `out`.
///
/// A zero on the diagonal gives infinities or NaN, as in LAPACK's `trsm`;
/// there is no singularity check.
///
/// Small triangles (`s ≤` [`SMALL_DIM`]) use substitution
/// loops; larger ones faer's blocked solves on strided views of the
/// row-major buffers (no copies). With a shared `a`, a right-side solve is
/// one call on all `batch·m` rows stacked, and so is a left-side solve with
/// `k = 1` (as the right-side solve `xᵀ·op(A)ᵀ = bᵀ`); a left-side shared
/// solve with `k > 1` runs per batch element.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{triangular_solve, ABatch, TriangularSolve};
/// use faer::Par;
///
/// // L = [[2, 0], [1, 1]]; solve L·x = [2, 3].
/// let l = [2.0, 0.0, 1.0, 1.0_f64];
/// let b = [2.0, 3.0];
/// let mut x = [0.0; 2];
/// let opts = TriangularSolve { left_side: true, lower: true, ..Default::default() };
/// triangular_solve(&l, &b, &mut x, 1, 2, 1, ABatch::PerMatrix, opts, Par::Seq).unwrap();
/// assert_eq!(x, [1.0, 2.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn triangular_solve<T: Real>(
    a: &[T],
    b: &[T],
    out: &mut [T],
    batch: usize,
    m: usize,
    k: usize,
    a_batch: ABatch,
    opts: TriangularSolve,
    par: Par,
) -> Result<(), LinalgError> {
    let s = if opts.left_side { m } else { k };
    let per_a = match a_batch {
        ABatch::PerMatrix => check_len("a", a.len(), &[batch, s, s])?,
        ABatch::Shared => check_len("a", a.len(), &[1, s, s])?,
    };
    let per_b = check_len("b", b.len(), &[batch, m, k])?;
    check_len("out", out.len(), &[batch, m, k])?;
    out.copy_from_slice(b);
    solve_in_place(a, per_a, out, per_b, batch, m, k, a_batch, opts, par);
    Ok(())
}

/// [`triangular_solve`] in place on `x` (lengths already checked).
#[allow(clippy::too_many_arguments)]
pub(crate) fn solve_in_place<T: Real>(
    a: &[T],
    per_a: usize,
    x: &mut [T],
    per_x: usize,
    batch: usize,
    m: usize,
    k: usize,
    a_batch: ABatch,
    opts: TriangularSolve,
    par: Par,
) {
    let s = if opts.left_side { m } else { k };
    let flops = (s * s) as f64 * (m * k / s.max(1)) as f64;
    let plan = plan(par, batch, s, flops);
    if a_batch == ABatch::Shared && (!opts.left_side || k == 1) {
        // Every row of the stacked right-hand sides is an independent
        // right-side solve with the same matrix.
        let opts = if opts.left_side {
            TriangularSolve { left_side: false, transpose_a: !opts.transpose_a, ..opts }
        } else {
            opts
        };
        solve_rows(a, x, batch * m * k / s.max(1), s, opts, plan.chunks, plan.inner);
        return;
    }
    let result = run(
        batch,
        plan,
        Per(x, per_x),
        || (),
        |i, Per(xi, _), _| {
            let ai = match a_batch {
                ABatch::PerMatrix => &a[i * per_a..(i + 1) * per_a],
                ABatch::Shared => a,
            };
            solve_one(ai, xi, m, k, opts, plan.inner);
            Ok(())
        },
    );
    debug_assert!(result.is_ok(), "solves do not fail");
}

/// `rows` right-side solves `x_r·op(A) = b_r` (`x` row-major `rows × s`),
/// split into `chunks` parallel calls of contiguous rows.
fn solve_rows<T: Real>(
    a: &[T],
    x: &mut [T],
    rows: usize,
    s: usize,
    opts: TriangularSolve,
    chunks: usize,
    inner: Par,
) {
    if rows == 0 || s == 0 {
        return;
    }
    let per_chunk = rows.div_ceil(chunks.max(1));
    if chunks <= 1 {
        solve_one(a, x, rows, s, opts, inner);
        return;
    }
    x.par_chunks_mut(per_chunk * s).for_each(|xc| solve_one(a, xc, xc.len() / s, s, opts, inner));
}

/// One solve in place: `x` is the row-major `m × k` right-hand side, `a` the
/// `s × s` matrix (`s = m` on the left, `k` on the right).
pub(crate) fn solve_one<T: Real>(
    a: &[T],
    x: &mut [T],
    m: usize,
    k: usize,
    opts: TriangularSolve,
    par: Par,
) {
    let s = if opts.left_side { m } else { k };
    let tri = Tri {
        a,
        n: s,
        lower: opts.lower ^ opts.transpose_a,
        trans: opts.transpose_a,
        unit: opts.unit_diagonal,
    };
    let one_vector = if opts.left_side { k == 1 } else { m == 1 };
    if one_vector && s > VECTOR_BLOCK {
        // `x·op(A) = b` is `op(A)ᵀ·xᵀ = bᵀ`.
        let vector = if opts.left_side { tri } else { tri.transposed() };
        if solve_vector(&vector, x) {
            return;
        }
    }
    if s <= SMALL_DIM {
        if opts.left_side {
            tri.solve_left(x, k);
        } else {
            tri.solve_right(x, m);
        }
        return;
    }
    let av = MatRef::from_row_major_slice(a, s, s);
    let (mut tri, mut lower) =
        if opts.transpose_a { (av.transpose(), !opts.lower) } else { (av, opts.lower) };
    let rhs = if opts.left_side {
        MatMut::from_row_major_slice_mut(x, m, k)
    } else {
        // X·M = B is Mᵀ·Xᵀ = Bᵀ, and the row-major X read column-major is Xᵀ.
        tri = tri.transpose();
        lower = !lower;
        MatMut::from_column_major_slice_mut(x, k, m)
    };
    match (lower, opts.unit_diagonal) {
        (true, false) => ts::solve_lower_triangular_in_place(tri, rhs, par),
        (true, true) => ts::solve_unit_lower_triangular_in_place(tri, rhs, par),
        (false, false) => ts::solve_upper_triangular_in_place(tri, rhs, par),
        (false, true) => ts::solve_unit_upper_triangular_in_place(tri, rhs, par),
    }
}

/// Rows per block of [`solve_vector`]: a product of 16 columns keeps four
/// AVX2 chains of `gevm` (or two groups of eight rows of `gemv`) busy, and
/// the block's own substitution stays short.
const VECTOR_BLOCK: usize = 16;

/// `M·y = b` in place on `x` (holding `b`) for one right-hand side, `M` the
/// `n × n` triangle `tri` reads (see [`Tri`]), in `f64` with the
/// matrix–vector kernels of `crate::matvec`; `false`, with `x` untouched,
/// for another type or a CPU those kernels do not run on (faer's blocked
/// solve then runs).
///
/// faer solves one vector by recursive halving, and at n = 200 (W8's
/// Newton steps) its two solves took about 14 µs a step. Here the rows go
/// in blocks of [`VECTOR_BLOCK`], in the order of substitution: each block
/// first subtracts the product of its rows of `M` with the part of `y`
/// already solved, one call of `gemv` (`M`'s rows are `a`'s rows) or of
/// `gevm` (`M` is `aᵀ`: the block's columns of `a`, read down the rows),
/// then solves its own triangle by column substitution. The first block
/// solved takes the `n mod 16` odd rows, so every product has 16 columns.
/// Only the triangle (and, unless `unit`, the diagonal) of `a` is read.
fn solve_vector<T: Real>(tri: &Tri<'_, T>, x: &mut [T]) -> bool {
    let n = tri.n;
    let Some((a, x)) = T::as_f64_pair(tri.a, x) else { return false };
    if n <= VECTOR_BLOCK
        || a.len() != n * n
        || x.len() != n
        || !crate::matvec::gevm_takes(n, VECTOR_BLOCK)
    {
        return false;
    }
    // The same triangle, typed `f64`.
    let m = Tri { a, n, lower: tri.lower, trans: tri.trans, unit: tri.unit };
    let first = match n % VECTOR_BLOCK {
        0 => VECTOR_BLOCK,
        r => r,
    };
    let mut product = [0.0; VECTOR_BLOCK];
    let mut solved = 0;
    while solved < n {
        let w = if solved == 0 { first } else { VECTOR_BLOCK };
        // Rows `i0..i1`; the solved ones are `done` (before them when
        // lower, after them when upper).
        let (i0, i1, done) = if tri.lower {
            (solved, solved + w, 0..solved)
        } else {
            (n - solved - w, n - solved, n - solved..n)
        };
        if !done.is_empty() {
            let y = &mut product[..w];
            let (lo, hi) = (done.start, done.end);
            let ran = if tri.trans {
                crate::matvec::gevm(&x[lo..hi], &a[lo * n + i0..], n, y)
            } else {
                crate::matvec::gemv(&a[i0 * n + lo..], n, &x[lo..hi], y)
            };
            if !ran {
                // Not expected (the shapes were checked): the same sums
                // in plain code.
                for (r, yr) in y.iter_mut().enumerate() {
                    *yr = (lo..hi).map(|j| m.at(i0 + r, j) * x[j]).sum();
                }
            }
            for (xi, p) in x[i0..i1].iter_mut().zip(y.iter()) {
                *xi -= p;
            }
        }
        // The block's own triangle, column by column.
        for step in 0..w {
            let j = if tri.lower { i0 + step } else { i1 - 1 - step };
            if !tri.unit {
                x[j] /= m.at(j, j);
            }
            let xj = x[j];
            let rest = if tri.lower { j + 1..i1 } else { i0..j };
            for i in rest {
                x[i] -= m.at(i, j) * xj;
            }
        }
        solved += w;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocked solve of one vector against the plain substitution of
    /// [`Tri::solve_left`], for every triangle and odd block, with NaN in
    /// the half of `a` it must not read.
    #[test]
    fn vector_solves_match_plain_substitution() {
        if !crate::matvec::gevm_takes(64, VECTOR_BLOCK) {
            return; // no kernels on this CPU: faer solves
        }
        for n in [17, 31, 32, 47, 200] {
            for bits in 0..8u8 {
                let (lower, trans, unit) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
                // `a`'s stored triangle is `lower ^ trans` (the one `M` reads).
                let stored_lower = lower ^ trans;
                let a: Vec<f64> = (0..n * n)
                    .map(|k| {
                        let (i, j) = (k / n, k % n);
                        let read = if stored_lower { j <= i } else { j >= i };
                        match () {
                            _ if !read || (i == j && unit) => f64::NAN,
                            _ if i == j => 2.0 + (k as f64 * 0.3).sin().abs(),
                            _ => (k as f64 * 0.7).cos() / n as f64,
                        }
                    })
                    .collect();
                let tri = Tri { a: &a, n, lower, trans, unit };
                let b: Vec<f64> = (0..n).map(|i| (i as f64 * 1.3).sin()).collect();
                let (mut x, mut reference) = (b.clone(), b.clone());
                assert!(solve_vector(&tri, &mut x), "n = {n}, bits {bits}");
                tri.solve_left(&mut reference, 1);
                for (i, (p, q)) in x.iter().zip(&reference).enumerate() {
                    assert!(
                        (p - q).abs() <= 1e-13 * (1.0 + q.abs()),
                        "n = {n}, lower {lower}, trans {trans}, unit {unit}: x[{i}] = {p}, {q}"
                    );
                }
            }
        }
    }
}
