//! Batched Cholesky factorisation.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::transpose::{lower_to_upper_transposed, upper_to_lower_in_place};
use super::{small, FailMode, LinalgError, Real, SMALL_DIM};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::{MatMut, Par};

/// Cholesky factors of a batch of symmetric positive definite matrices:
/// `A = L·Lᵀ` with `L` lower triangular with a positive diagonal.
///
/// `a` and `out` are `[batch, n, n]` row-major. Only the lower triangle of
/// each `A` (diagonal included) is read, as LAPACK's `potrf` with `'L'`
/// does; the strict upper triangle of each output is zeroed.
///
/// Matrices with `n ≤` [`SMALL_DIM`] use an unblocked
/// in-place loop; larger ones faer's blocked factorisation on the output
/// buffer read column-major (see the module documentation on layout).
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
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("out", out.len(), &[batch, n, n])?;
    let plan = plan(par, batch, n, (n * n * n) as f64 / 3.0);
    let scratch = || {
        let req = if n <= SMALL_DIM {
            faer::dyn_stack::StackReq::EMPTY
        } else {
            cholesky_in_place_scratch::<T>(n, plan.inner, Default::default())
        };
        MemBuffer::new(req)
    };
    run(batch, plan, Per(out, per), scratch, |i, Per(o, _), mem| {
        let ai = &a[i * per..(i + 1) * per];
        let result = if n <= SMALL_DIM {
            o.copy_from_slice(ai);
            small::cholesky_in_place(o, n)
        } else {
            cholesky_faer(ai, o, n, plan.inner, mem)
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
    par: Par,
    mem: &mut MemBuffer,
) -> Result<(), usize> {
    lower_to_upper_transposed(a, n, o);
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
