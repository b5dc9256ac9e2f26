//! The crate's error type.

use thiserror::Error;

/// What can go wrong when building a pattern, coloring it or decompressing.
///
/// Every public function of this crate reports bad input with one of these
/// variants instead of panicking.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SparseError {
    /// A dimension or the number of nonzeros does not fit the index type
    /// ([`MAX_DIM`](crate::pattern::MAX_DIM)).
    #[error("{what} = {value} exceeds the largest supported value {max}")]
    TooLarge {
        /// Which quantity overflowed (`"nrows"`, `"ncols"`, `"nnz"`).
        what: &'static str,
        /// The offending value.
        value: usize,
        /// The largest allowed value.
        max: usize,
    },
    /// A `(row, col)` entry lies outside an `nrows × ncols` matrix.
    #[error("entry ({row}, {col}) is out of bounds for a {nrows}×{ncols} pattern")]
    OutOfBounds {
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        col: usize,
        /// Rows of the pattern.
        nrows: usize,
        /// Columns of the pattern.
        ncols: usize,
    },
    /// Compressed-storage arrays that do not describe a valid matrix.
    #[error("invalid compressed storage: {0}")]
    InvalidStorage(String),
    /// A dense boolean matrix whose rows have different lengths.
    #[error("row {row} of the dense matrix has {found} entries, expected {expected}")]
    RaggedDense {
        /// The first row with the wrong length.
        row: usize,
        /// Its length.
        found: usize,
        /// The length of row 0.
        expected: usize,
    },
    /// A coloring that needs a symmetric pattern (star coloring) got one that
    /// is not square or not symmetric.
    #[error("a symmetric coloring needs a square, structurally symmetric pattern; got a {nrows}×{ncols} pattern{detail}")]
    NotSymmetric {
        /// Rows of the pattern.
        nrows: usize,
        /// Columns of the pattern.
        ncols: usize,
        /// Where the asymmetry is, when the shape is square.
        detail: String,
    },
    /// A compressed matrix (or an output buffer) of the wrong shape was given
    /// to a decompression.
    #[error("{what} has shape {found:?}, expected {expected:?}")]
    ShapeMismatch {
        /// Which argument is wrong (e.g. `"compressed B = J·S"`).
        what: &'static str,
        /// The shape that was expected, `(rows, cols)`; output buffers are
        /// reported as `(nnz, 1)`.
        expected: (usize, usize),
        /// The shape that was given.
        found: (usize, usize),
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = SparseError> = core::result::Result<T, E>;
