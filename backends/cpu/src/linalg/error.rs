//! The module's error type and the failure mode of the functions that can
//! meet a matrix they cannot factor.

use std::fmt;

/// What to do with a batch element that cannot be computed (a matrix that is
/// not positive definite for [`cholesky`](super::cholesky()), an exactly
/// singular one for [`inv`](super::inv)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Stop and return an error naming the first failing batch element.
    #[default]
    Error,
    /// Fill that element's output with NaN and compute the others: the mode
    /// for vmapped sweeps, where one bad element must not abort the batch.
    Nan,
}

/// An error of the linear-algebra functions.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinalgError {
    /// A buffer's length does not match the sizes given.
    BufferLength {
        /// Which argument (`"a"`, `"b"`, `"out"`, …).
        buffer: &'static str,
        /// The length the sizes imply.
        expected: usize,
        /// The length passed.
        actual: usize,
    },
    /// The sizes given overflow `usize` when multiplied.
    SizeOverflow {
        /// Which argument.
        buffer: &'static str,
    },
    /// Cholesky met a pivot that is not positive (or is NaN).
    NotPositiveDefinite {
        /// The batch element.
        batch_index: usize,
        /// The 0-based index of the failing pivot (the leading minor of size
        /// `pivot + 1` is not positive definite).
        pivot: usize,
    },
    /// An exactly singular matrix where an inverse was asked for.
    Singular {
        /// The batch element.
        batch_index: usize,
        /// The 0-based index of the first zero pivot of its LU factorisation.
        pivot: usize,
    },
    /// A permutation entry outside `0..m`.
    InvalidPermutation {
        /// The batch element.
        batch_index: usize,
        /// The offending entry.
        value: i64,
    },
    /// faer's iterative eigen- or singular-value solver did not converge.
    NoConvergence {
        /// The batch element.
        batch_index: usize,
    },
}

impl fmt::Display for LinalgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinalgError::BufferLength { buffer, expected, actual } => write!(
                f,
                "buffer `{buffer}` has {actual} elements, the sizes given need {expected}"
            ),
            LinalgError::SizeOverflow { buffer } => {
                write!(f, "the sizes of buffer `{buffer}` overflow usize")
            }
            LinalgError::NotPositiveDefinite { batch_index, pivot } => write!(
                f,
                "matrix {batch_index} of the batch is not positive definite (pivot {pivot})"
            ),
            LinalgError::Singular { batch_index, pivot } => {
                write!(f, "matrix {batch_index} of the batch is singular (zero pivot {pivot})")
            }
            LinalgError::InvalidPermutation { batch_index, value } => write!(
                f,
                "permutation {batch_index} of the batch has an entry {value} out of range"
            ),
            LinalgError::NoConvergence { batch_index } => {
                write!(f, "the iteration did not converge for matrix {batch_index} of the batch")
            }
        }
    }
}

impl std::error::Error for LinalgError {}

/// `dims` multiplied, or [`LinalgError::SizeOverflow`].
pub(crate) fn size_of(buffer: &'static str, dims: &[usize]) -> Result<usize, LinalgError> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or(LinalgError::SizeOverflow { buffer })
}

/// Checks that `len` is the product of `dims`; returns the per-batch-element
/// size (the product of `dims[1..]`).
pub(crate) fn check_len(
    buffer: &'static str,
    len: usize,
    dims: &[usize],
) -> Result<usize, LinalgError> {
    let expected = size_of(buffer, dims)?;
    if len != expected {
        return Err(LinalgError::BufferLength { buffer, expected, actual: len });
    }
    size_of(buffer, &dims[1..])
}
