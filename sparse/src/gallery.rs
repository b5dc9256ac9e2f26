//! Structured patterns with known optimal color counts, for tests,
//! benchmarks and examples.
//!
//! All of them are built directly in compressed form (no dense pass), so
//! they are cheap at `10^6` unknowns.

use crate::error::Result;
use crate::pattern::{idx, SparsityPattern};

/// Builds a pattern column by column from a function listing each column's
/// rows in increasing order.
fn by_columns<I: Iterator<Item = usize>>(
    nrows: usize,
    ncols: usize,
    mut rows_of: impl FnMut(usize) -> I,
) -> Result<SparsityPattern> {
    let mut col_ptr = Vec::with_capacity(ncols + 1);
    let mut row_idx = Vec::new();
    col_ptr.push(0);
    for j in 0..ncols {
        row_idx.extend(rows_of(j).map(idx));
        col_ptr.push(idx(row_idx.len()));
    }
    SparsityPattern::from_csc(nrows, ncols, col_ptr, row_idx)
}

/// The `m × n` band `{(i, j) : j ≤ i + upper, i ≤ j + lower}`: `lower`
/// subdiagonals and `upper` superdiagonals. A square band with `lower =
/// upper = k` needs `2k + 1` colors for column, row and star coloring.
///
/// # Errors
/// [`SparseError::TooLarge`](crate::SparseError::TooLarge) beyond
/// [`MAX_DIM`](crate::pattern::MAX_DIM).
pub fn banded(m: usize, n: usize, lower: usize, upper: usize) -> Result<SparsityPattern> {
    by_columns(m, n, |j| j.saturating_sub(upper)..(j.saturating_add(lower) + 1).min(m))
}

/// The `n × n` tridiagonal pattern (3 colors for every coloring here).
///
/// # Errors
/// As for [`banded`].
pub fn tridiagonal(n: usize) -> Result<SparsityPattern> {
    banded(n, n, 1, 1)
}

/// The `n × n` diagonal pattern (1 color).
///
/// # Errors
/// As for [`banded`].
pub fn diagonal(n: usize) -> Result<SparsityPattern> {
    banded(n, n, 0, 0)
}

/// The fully dense `m × n` pattern.
///
/// # Errors
/// As for [`banded`], also when `m · n` nonzeros are too many.
pub fn dense(m: usize, n: usize) -> Result<SparsityPattern> {
    by_columns(m, n, |_| 0..m)
}

/// The 5-point Laplacian on a `k × k` grid, `k² × k²`: unknown `p = i·k + j`
/// couples to itself and to its grid neighbours `p ± 1` (same grid row) and
/// `p ± k`. Column coloring needs 5 colors (`(i + 2j) mod 5` is optimal).
///
/// # Errors
/// As for [`banded`].
pub fn laplacian_2d(k: usize) -> Result<SparsityPattern> {
    let n = k * k;
    by_columns(n, n, |p| {
        let (i, j) = (p / k, p % k);
        let up = (i > 0).then(|| p - k);
        let left = (j > 0).then(|| p - 1);
        let right = (j + 1 < k).then_some(p + 1);
        let down = (i + 1 < k).then_some(p + k);
        [up, left, Some(p), right, down].into_iter().flatten()
    })
}

/// The `n × n` arrowhead: dense first row, dense first column and the
/// diagonal. One-sided colorings need `n` colors; bidirectional coloring
/// needs 3 (one reverse sweep for row 0, two forward sweeps).
///
/// # Errors
/// As for [`banded`].
pub fn arrowhead(n: usize) -> Result<SparsityPattern> {
    // Column 0 is dense; column j > 0 holds rows 0 and j.
    by_columns(n, n, |j| {
        let first = if j == 0 { n } else { 1 };
        (0..first).chain((j > 0).then_some(j))
    })
}
