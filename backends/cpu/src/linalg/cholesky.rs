//! Batched Cholesky factorisation.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::transpose::{lower_to_upper_transposed, upper_to_lower_in_place};
use super::transpose::{symmetric_lower, symmetric_lower_to_upper_transposed};
use super::{small, FailMode, LinalgError, Real, SMALL_DIM};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, MatMut, Par};

/// A matrix of at least this size, alone in its batch, is factored by
/// [`cholesky_blocked`] (whose updates are GEMMs on all the threads
/// allowed) rather than by faer's factorisation on one thread.
const BLOCKED_DIM: usize = 512;

/// The column block of [`cholesky_blocked`].
const BLOCK: usize = 128;

/// Cholesky factors of a batch of symmetric positive definite matrices:
/// `A = L·Lᵀ` with `L` lower triangular with a positive diagonal.
///
/// `a` and `out` are `[batch, n, n]` row-major. Only the lower triangle of
/// each `A` (diagonal included) is read, as LAPACK's `potrf` with `'L'`
/// does; the strict upper triangle of each output is zeroed.
///
/// Matrices with `n ≤` [`SMALL_DIM`] use an unblocked
/// in-place loop; larger ones faer's blocked factorisation on the output
/// buffer read column-major (see the module documentation on layout),
/// except a single matrix of at least 512 rows: its blocked
/// factorisation runs its updates (GEMMs) on every thread `par` allows.
/// Results are identical from call to call; see the module documentation
/// on thread counts.
///
/// # Errors
///
/// * [`LinalgError::BufferLength`] if a buffer is not `batch·n·n` long.
/// * [`LinalgError::NotPositiveDefinite`] with the batch element and the
///   failing pivot (a pivot that is not positive, or is NaN), for the lowest
///   failing element, when `mode` is [`FailMode::Error`]. With
///   [`FailMode::Nan`] that element's output is filled with NaN instead and
///   the others are computed. After an error the outputs are unspecified.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{cholesky, FailMode, LinalgError};
/// use faer::Par;
///
/// let a = [1.0, 0.0, 0.0, -1.0_f64]; // not positive definite
/// let mut l = [0.0; 4];
/// let err = cholesky(&a, &mut l, 1, 2, FailMode::Error, Par::Seq).unwrap_err();
/// assert_eq!(err, LinalgError::NotPositiveDefinite { batch_index: 0, pivot: 1 });
/// cholesky(&a, &mut l, 1, 2, FailMode::Nan, Par::Seq).unwrap();
/// assert!(l.iter().all(|x| x.is_nan()));
/// ```
pub fn cholesky<T: Real>(
    a: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    mode: FailMode,
    par: Par,
) -> Result<(), LinalgError> {
    factor(a, out, batch, n, false, mode, par)
}

/// As [`cholesky`], of the symmetric parts `(A + Aᵀ)/2` (both triangles of
/// each `A` are read): what `jnp.linalg.cholesky` factors. The
/// symmetrisation is the copy of `A` into `out` that the factorisation
/// makes anyway, so it costs no pass and no buffer of its own; each entry
/// is `(a_ij + a_ji)·0.5`, the bits the same expression gives elsewhere.
///
/// # Errors
///
/// As [`cholesky`].
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{cholesky_symmetrized, FailMode};
/// use faer::Par;
///
/// // (A + Aᵀ)/2 = [[4, 2], [2, 5]] = L·Lᵀ with L = [[2, 0], [1, 2]].
/// let a = [4.0, 1.0, 3.0, 5.0_f64];
/// let mut l = [0.0; 4];
/// cholesky_symmetrized(&a, &mut l, 1, 2, FailMode::Error, Par::Seq).unwrap();
/// assert_eq!(l, [2.0, 0.0, 1.0, 2.0]);
/// ```
pub fn cholesky_symmetrized<T: Real>(
    a: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    mode: FailMode,
    par: Par,
) -> Result<(), LinalgError> {
    factor(a, out, batch, n, true, mode, par)
}

/// [`cholesky`] (`symmetrize`: [`cholesky_symmetrized`]).
fn factor<T: Real>(
    a: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    symmetrize: bool,
    mode: FailMode,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("out", out.len(), &[batch, n, n])?;
    let plan = plan(par, batch, n, (n * n * n) as f64 / 3.0);
    let blocked = batch == 1 && n >= BLOCKED_DIM;
    let scratch = || {
        let req = if n <= SMALL_DIM {
            faer::dyn_stack::StackReq::EMPTY
        } else if blocked {
            cholesky_in_place_scratch::<T>(BLOCK, Par::Seq, Default::default())
        } else {
            cholesky_in_place_scratch::<T>(n, plan.inner, Default::default())
        };
        MemBuffer::new(req)
    };
    run(batch, plan, Per(out, per), scratch, |i, Per(o, _), mem| {
        let ai = &a[i * per..(i + 1) * per];
        let result = if n <= SMALL_DIM {
            // The unblocked loop reads the lower triangle and zeroes the
            // upper one.
            if symmetrize {
                symmetric_lower(ai, n, o);
            } else {
                o.copy_from_slice(ai);
            }
            small::cholesky_in_place(o, n)
        } else if blocked {
            cholesky_blocked(ai, o, n, symmetrize, par, mem)
        } else {
            cholesky_faer(ai, o, n, symmetrize, plan.inner, mem)
        };
        match (result, mode) {
            (Ok(()), _) => Ok(()),
            (Err(pivot), FailMode::Error) => {
                Err(LinalgError::NotPositiveDefinite { batch_index: i, pivot })
            }
            (Err(_), FailMode::Nan) => {
                o.fill(T::NAN);
                Ok(())
            }
        }
    })
}

/// One matrix through faer: the lower triangle of `a` goes, transposed, to
/// the upper triangle of `o`, which read column-major is the lower triangle
/// faer factors in place (its preferred layout); the factor then moves back
/// to the lower triangle.
///
/// Measured against faer in place on a row-major view of `o` (no
/// transposes), interleaved runs, one thread, f64: n = 256, 0.22–0.31 ms
/// against 0.43–0.52 ms (faer alone on a column-major copy: 0.18–0.25 ms);
/// n = 1024, 11.7–17.1 ms against 11.8–19.6 ms (faer alone: 9.2–13.9 ms).
fn cholesky_faer<T: Real>(
    a: &[T],
    o: &mut [T],
    n: usize,
    symmetrize: bool,
    par: Par,
    mem: &mut MemBuffer,
) -> Result<(), usize> {
    if symmetrize {
        symmetric_lower_to_upper_transposed(a, n, o);
    } else {
        lower_to_upper_transposed(a, n, o);
    }
    let view = MatMut::from_column_major_slice_mut(o, n, n);
    let result =
        cholesky_in_place(view, Default::default(), par, MemStack::new(mem), Default::default());
    match result {
        Ok(_) => {
            upper_to_lower_in_place(o, n);
            Ok(())
        }
        Err(faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index }) => {
            Err(index)
        }
    }
}

/// One large matrix, right-looking with blocks of [`BLOCK`] columns, in
/// place on the row-major output: each diagonal block through faer (one
/// thread, small), the panel below it by a triangular solve, the trailing
/// lower triangle updated by a GEMM (`n³/6` multiply-adds in all, at
/// GEMM rate on `par`'s threads; faer's factorisation on two threads was
/// slower than on one at these sizes).
fn cholesky_blocked<T: Real>(
    a: &[T],
    o: &mut [T],
    n: usize,
    symmetrize: bool,
    par: Par,
    mem: &mut MemBuffer,
) -> Result<(), usize> {
    use super::cholesky_ad::{par_for, view_mut};
    if symmetrize {
        symmetric_lower(a, n, o);
    } else {
        for i in 0..n {
            o[i * n..i * n + i + 1].copy_from_slice(&a[i * n..i * n + i + 1]);
        }
    }
    let (lower, rect) = (BlockStructure::TriangularLower, BlockStructure::Rectangular);
    for j in (0..n).step_by(BLOCK) {
        let k = (j + BLOCK).min(n);
        let m = k - j;
        let block = view_mut(&mut o[j * n + j..], n, m);
        let stack = MemStack::new(mem);
        if let Err(e) =
            cholesky_in_place(block, Default::default(), Par::Seq, stack, Default::default())
        {
            let faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index } = e;
            return Err(j + index);
        }
        if k == n {
            break;
        }
        let (top, bottom) = view_mut(o, n, n).split_at_row_mut(k);
        let d = top.rb().submatrix(j, j, m, m);
        let (_, rest) = bottom.split_at_col_mut(j);
        let (mut c, trailing) = rest.split_at_col_mut(m);
        let trailing = trailing.submatrix_mut(0, 0, n - k, n - k);
        solve_lower_triangular_in_place(
            d,
            c.rb_mut().transpose_mut(),
            par_for(par, (n - k) * m * m),
        );
        let p = par_for(par, (n - k) * (n - k) * m / 2);
        tri_matmul(trailing, lower, Accum::Add, c.rb(), rect, c.rb().transpose(), rect, -T::ONE, p);
    }
    for i in 0..n {
        o[i * n + i + 1..(i + 1) * n].fill(T::ZERO);
    }
    Ok(())
}
