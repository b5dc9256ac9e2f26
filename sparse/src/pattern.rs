//! Sparsity patterns: which entries of an `m × n` matrix may be nonzero.
//!
//! A [`SparsityPattern`] is stored compressed by column (CSC): `col_ptr` of
//! length `ncols + 1` and, for each column `j`, the strictly increasing row
//! indices `row_idx[col_ptr[j]..col_ptr[j + 1]]`. For a Jacobian `J` of
//! `f: R^n → R^m` the orientation is `(row, col) = (output, input)`, so the
//! pattern is `m × n`, and column `j` lists the outputs that depend on input
//! `j`.
//!
//! # Index type
//!
//! Indices are [`Idx`] = `u32`, and every dimension and the number of
//! nonzeros are limited to [`MAX_DIM`] = `i32::MAX` (about 2.1·10^9). Why:
//!
//! * memory: at `n = 10^6` unknowns with `5·10^6` nonzeros (a 2-D 5-point
//!   stencil) the row indices take 20 MB instead of 40 MB, and the colorings'
//!   per-edge work arrays halve likewise;
//! * faer is generic over its index type and accepts `u32`, so
//!   [`SparsityPattern::as_faer`] is a zero-copy `SymbolicSparseColMatRef<'_, u32>`
//!   (faer requires dimensions `≤ I::Signed::MAX`, which is where the
//!   `i32::MAX` limit comes from); code that wants faer's default `usize`
//!   indices gets a copy from [`SparsityPattern::to_faer_usize`].
//!
//! Problems beyond 2·10^9 rows, columns or nonzeros are far outside what the
//! colorings here are meant for; constructors return
//! [`SparseError::TooLarge`] for them instead of truncating.

use core::fmt;

use faer::sparse::{SymbolicSparseColMat, SymbolicSparseColMatRef};

use crate::error::{Result, SparseError};

/// The index type of patterns and colorings (see the [module docs](self)).
pub type Idx = u32;

/// The largest number of rows, columns or nonzeros a pattern may have.
pub const MAX_DIM: usize = i32::MAX as usize;

/// Patterns up to this many rows and columns are drawn as a grid by
/// `Display` and `Debug`; larger ones are summarised.
const DRAW_LIMIT: usize = 64;

/// The sparsity pattern of an `nrows × ncols` matrix, compressed by column.
///
/// Invariants (upheld by every constructor): `col_ptr.len() == ncols + 1`,
/// `col_ptr[0] == 0`, `col_ptr` non-decreasing, `col_ptr[ncols] == nnz ==
/// row_idx.len()`, row indices strictly increasing within a column and
/// `< nrows`, and all of `nrows`, `ncols`, `nnz` at most [`MAX_DIM`].
///
/// ```
/// use anvil_sparse::SparsityPattern;
/// // J of f(x) = (x0 * x1, x1 + x2): 2 outputs, 3 inputs.
/// let p = SparsityPattern::from_entries(2, 3, [(0, 0), (0, 1), (1, 1), (1, 2), (0, 1)])?;
/// assert_eq!((p.shape(), p.nnz()), ((2, 3), 4)); // the duplicate (0, 1) is merged
/// assert_eq!(p.col(1), &[0, 1]);
/// assert_eq!(p.to_string(), "xx.\n.xx\n");
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SparsityPattern {
    nrows: usize,
    ncols: usize,
    col_ptr: Vec<Idx>,
    row_idx: Vec<Idx>,
}

fn check_dim(what: &'static str, value: usize) -> Result<()> {
    if value > MAX_DIM {
        return Err(SparseError::TooLarge { what, value, max: MAX_DIM });
    }
    Ok(())
}

/// Converts an index known to be `≤ MAX_DIM` (checked by the caller).
#[inline]
pub(crate) fn idx(i: usize) -> Idx {
    debug_assert!(i <= MAX_DIM);
    i as Idx
}

impl SparsityPattern {
    /// The pattern with no nonzero entry.
    ///
    /// # Errors
    /// [`SparseError::TooLarge`] if a dimension exceeds [`MAX_DIM`].
    pub fn empty(nrows: usize, ncols: usize) -> Result<Self> {
        check_dim("nrows", nrows)?;
        check_dim("ncols", ncols)?;
        Ok(Self { nrows, ncols, col_ptr: vec![0; ncols + 1], row_idx: Vec::new() })
    }

    /// Builds a pattern from `(row, col)` pairs in any order; duplicates are
    /// merged.
    ///
    /// # Errors
    /// [`SparseError::OutOfBounds`] for an entry outside the matrix,
    /// [`SparseError::TooLarge`] for dimensions or (deduplicated) nonzero
    /// counts beyond [`MAX_DIM`].
    pub fn from_entries(
        nrows: usize,
        ncols: usize,
        entries: impl IntoIterator<Item = (usize, usize)>,
    ) -> Result<Self> {
        check_dim("nrows", nrows)?;
        check_dim("ncols", ncols)?;
        let mut pairs = Vec::new();
        for (row, col) in entries {
            if row >= nrows || col >= ncols {
                return Err(SparseError::OutOfBounds { row, col, nrows, ncols });
            }
            pairs.push((idx(col), idx(row)));
        }
        // Sorting by (col, row) gives CSC order directly; dedup merges repeats.
        pairs.sort_unstable();
        pairs.dedup();
        check_dim("nnz", pairs.len())?;
        let mut col_ptr = vec![0 as Idx; ncols + 1];
        for &(col, _) in &pairs {
            col_ptr[col as usize + 1] += 1;
        }
        prefix_sum(&mut col_ptr);
        let row_idx = pairs.into_iter().map(|(_, row)| row).collect();
        Ok(Self { nrows, ncols, col_ptr, row_idx })
    }

    /// Builds the pattern of the entries `(i, j)` for which `is_nonzero(i, j)`
    /// holds, visiting all `nrows · ncols` positions (meant for small and
    /// structured test matrices).
    ///
    /// # Errors
    /// [`SparseError::TooLarge`] as for [`SparsityPattern::from_entries`].
    pub fn from_fn(
        nrows: usize,
        ncols: usize,
        mut is_nonzero: impl FnMut(usize, usize) -> bool,
    ) -> Result<Self> {
        check_dim("nrows", nrows)?;
        check_dim("ncols", ncols)?;
        let mut col_ptr = Vec::with_capacity(ncols + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for j in 0..ncols {
            row_idx.extend((0..nrows).filter(|&i| is_nonzero(i, j)).map(idx));
            check_dim("nnz", row_idx.len())?;
            col_ptr.push(idx(row_idx.len()));
        }
        Ok(Self { nrows, ncols, col_ptr, row_idx })
    }

    /// Builds a pattern from a dense boolean matrix given row by row
    /// (`dense[i][j]` is entry `(i, j)`). Zero rows give a `0 × 0` pattern.
    ///
    /// # Errors
    /// [`SparseError::RaggedDense`] if the rows differ in length.
    pub fn from_dense<R: AsRef<[bool]>>(dense: &[R]) -> Result<Self> {
        let ncols = dense.first().map_or(0, |r| r.as_ref().len());
        for (row, r) in dense.iter().enumerate() {
            let found = r.as_ref().len();
            if found != ncols {
                return Err(SparseError::RaggedDense { row, found, expected: ncols });
            }
        }
        Self::from_fn(dense.len(), ncols, |i, j| dense[i].as_ref()[j])
    }

    /// Builds a pattern from compressed-row (CSR) arrays: the column indices
    /// of row `i` are `col_idx[row_ptr[i]..row_ptr[i + 1]]`, in any order and
    /// possibly repeated (repeats are merged).
    ///
    /// # Errors
    /// [`SparseError::InvalidStorage`] if `row_ptr` has the wrong length, does
    /// not start at 0, decreases or points past `col_idx`;
    /// [`SparseError::OutOfBounds`] for a column index `≥ ncols`;
    /// [`SparseError::TooLarge`] for oversized dimensions.
    pub fn from_csr(
        nrows: usize,
        ncols: usize,
        row_ptr: &[usize],
        col_idx: &[usize],
    ) -> Result<Self> {
        check_dim("nrows", nrows)?;
        check_dim("ncols", ncols)?;
        check_ptr("row_ptr", row_ptr, nrows, col_idx.len())?;
        let nnz = row_ptr[nrows];
        check_dim("nnz", nnz)?;
        // A counting-sort transpose: scattering rows in increasing order
        // leaves each column's row indices sorted, so only repeats remain.
        let mut col_ptr = vec![0 as Idx; ncols + 1];
        for (row, w) in row_ptr.windows(2).enumerate() {
            for &col in &col_idx[w[0]..w[1]] {
                if col >= ncols {
                    return Err(SparseError::OutOfBounds { row, col, nrows, ncols });
                }
                col_ptr[col + 1] += 1;
            }
        }
        prefix_sum(&mut col_ptr);
        let mut next: Vec<Idx> = col_ptr[..ncols].to_vec();
        let mut row_idx = vec![0 as Idx; nnz];
        for (row, w) in row_ptr.windows(2).enumerate() {
            for &col in &col_idx[w[0]..w[1]] {
                row_idx[next[col] as usize] = idx(row);
                next[col] += 1;
            }
        }
        let mut p = Self { nrows, ncols, col_ptr, row_idx };
        p.dedup_sorted_columns();
        Ok(p)
    }

    /// Takes compressed-column (CSC) arrays as they are, after checking the
    /// invariants listed on [`SparsityPattern`] (sorted, repeat-free rows).
    /// This is the cheapest constructor for code that already produces CSC.
    ///
    /// # Errors
    /// [`SparseError::InvalidStorage`] naming the first violated invariant,
    /// [`SparseError::TooLarge`] for oversized dimensions.
    pub fn from_csc(
        nrows: usize,
        ncols: usize,
        col_ptr: Vec<Idx>,
        row_idx: Vec<Idx>,
    ) -> Result<Self> {
        check_dim("nrows", nrows)?;
        check_dim("ncols", ncols)?;
        check_dim("nnz", row_idx.len())?;
        let ptr: Vec<usize> = col_ptr.iter().map(|&p| p as usize).collect();
        check_ptr("col_ptr", &ptr, ncols, row_idx.len())?;
        if ptr[ncols] != row_idx.len() {
            return Err(SparseError::InvalidStorage(format!(
                "col_ptr ends at {} but row_idx has {} entries",
                ptr[ncols],
                row_idx.len()
            )));
        }
        for (j, w) in ptr.windows(2).enumerate() {
            let rows = &row_idx[w[0]..w[1]];
            if rows.windows(2).any(|r| r[0] >= r[1]) {
                return Err(SparseError::InvalidStorage(format!(
                    "row indices of column {j} are not strictly increasing"
                )));
            }
            if let Some(&last) = rows.last() {
                if last as usize >= nrows {
                    return Err(SparseError::OutOfBounds {
                        row: last as usize,
                        col: j,
                        nrows,
                        ncols,
                    });
                }
            }
        }
        Ok(Self { nrows, ncols, col_ptr, row_idx })
    }

    /// Copies the structure of any faer symbolic CSC matrix (sorted or not,
    /// with or without a `col_nnz` array).
    ///
    /// # Errors
    /// [`SparseError::TooLarge`] for oversized dimensions.
    pub fn from_faer<I: faer::Index>(m: SymbolicSparseColMatRef<'_, I>) -> Result<Self> {
        let entries = (0..m.ncols())
            .flat_map(|j| m.row_idx_of_col(j).map(move |i| (i, j)))
            .collect::<Vec<_>>();
        Self::from_entries(m.nrows(), m.ncols(), entries)
    }

    /// Number of rows (`m`, the outputs of a Jacobian).
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns (`n`, the inputs of a Jacobian).
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// `(nrows, ncols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.nrows, self.ncols)
    }

    /// Number of structurally nonzero entries.
    pub fn nnz(&self) -> usize {
        self.row_idx.len()
    }

    /// The column pointers (`ncols + 1` entries).
    pub fn col_ptr(&self) -> &[Idx] {
        &self.col_ptr
    }

    /// All row indices, column after column.
    pub fn row_idx(&self) -> &[Idx] {
        &self.row_idx
    }

    /// The positions of column `j`'s entries in [`row_idx`](Self::row_idx)
    /// (and in any value array aligned with this pattern).
    ///
    /// # Panics
    /// If `j >= ncols` (an indexing bug of the caller, like slice indexing).
    pub fn col_range(&self, j: usize) -> core::ops::Range<usize> {
        self.col_ptr[j] as usize..self.col_ptr[j + 1] as usize
    }

    /// The sorted row indices of column `j`.
    ///
    /// # Panics
    /// If `j >= ncols`.
    pub fn col(&self, j: usize) -> &[Idx] {
        &self.row_idx[self.col_range(j)]
    }

    /// The columns in order, each as its sorted row indices. Rows are
    /// iterated the same way on the [`transpose`](Self::transpose).
    pub fn cols(&self) -> impl ExactSizeIterator<Item = &[Idx]> + '_ {
        (0..self.ncols).map(move |j| self.col(j))
    }

    /// All entries as `(row, col)`, in storage (column-major) order.
    pub fn entries(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.cols().enumerate().flat_map(|(j, rows)| rows.iter().map(move |&i| (i as usize, j)))
    }

    /// Whether `(row, col)` is a structural nonzero (binary search; `false`
    /// outside the matrix).
    pub fn contains(&self, row: usize, col: usize) -> bool {
        col < self.ncols && row < self.nrows && self.col(col).binary_search(&idx(row)).is_ok()
    }

    /// The pattern of the transpose, `ncols × nrows`. Its column `i` is row
    /// `i` of `self`, so this is also the compressed-row (CSR) form of `self`.
    pub fn transpose(&self) -> Self {
        self.transpose_impl(false).0
    }

    /// The transpose, together with, for each of its entries, the position
    /// of the same entry in `self` (used to decompress row-wise data into
    /// `self`'s column-major value order).
    pub(crate) fn transpose_with_positions(&self) -> (Self, Vec<Idx>) {
        let (t, source) = self.transpose_impl(true);
        (t, source.unwrap_or_default())
    }

    /// A counting-sort transpose; scanning columns in order leaves each row
    /// sorted. `positions` also records where each entry came from.
    fn transpose_impl(&self, positions: bool) -> (Self, Option<Vec<Idx>>) {
        let mut col_ptr = vec![0 as Idx; self.nrows + 1];
        for &i in &self.row_idx {
            col_ptr[i as usize + 1] += 1;
        }
        prefix_sum(&mut col_ptr);
        let mut next: Vec<Idx> = col_ptr[..self.nrows].to_vec();
        let mut row_idx = vec![0 as Idx; self.nnz()];
        let mut source = if positions { vec![0 as Idx; self.nnz()] } else { Vec::new() };
        for (j, w) in self.col_ptr.windows(2).enumerate() {
            let (start, end) = (w[0] as usize, w[1] as usize);
            for (p, &i) in (start..end).zip(&self.row_idx[start..end]) {
                let q = next[i as usize] as usize;
                next[i as usize] += 1;
                row_idx[q] = j as Idx;
                if positions {
                    source[q] = p as Idx;
                }
            }
        }
        let t = Self { nrows: self.ncols, ncols: self.nrows, col_ptr, row_idx };
        (t, positions.then_some(source))
    }

    /// The entries `(i, j)` for which `keep(i, j)` holds, same shape.
    pub fn filter(&self, mut keep: impl FnMut(usize, usize) -> bool) -> Self {
        let mut col_ptr = Vec::with_capacity(self.ncols + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for j in 0..self.ncols {
            row_idx.extend(self.col(j).iter().filter(|&&i| keep(i as usize, j)));
            col_ptr.push(idx(row_idx.len()));
        }
        Self { nrows: self.nrows, ncols: self.ncols, col_ptr, row_idx }
    }

    /// Whether the pattern is square and equal to its transpose.
    pub fn is_symmetric(&self) -> bool {
        self.first_asymmetry().is_none() && self.nrows == self.ncols
    }

    /// For a square pattern, an entry `(i, j)` whose mirror `(j, i)` is
    /// missing, if any.
    pub(crate) fn first_asymmetry(&self) -> Option<(usize, usize)> {
        if self.nrows != self.ncols {
            return None;
        }
        self.entries().find(|&(i, j)| !self.contains(j, i))
    }

    /// The union of the pattern and its transpose (square patterns only),
    /// e.g. to star-color a Hessian pattern detected only in one triangle.
    ///
    /// # Errors
    /// [`SparseError::NotSymmetric`] if the pattern is not square.
    pub fn symmetrize(&self) -> Result<Self> {
        if self.nrows != self.ncols {
            return Err(SparseError::NotSymmetric {
                nrows: self.nrows,
                ncols: self.ncols,
                detail: String::new(),
            });
        }
        let both = self.entries().flat_map(|(i, j)| [(i, j), (j, i)]);
        Self::from_entries(self.nrows, self.ncols, both)
    }

    /// The pattern with every diagonal entry `(v, v)`, `v < min(m, n)`,
    /// added (a copy; one merge per column).
    ///
    /// # Errors
    /// [`SparseError::TooLarge`] if the added entries make too many.
    pub(crate) fn with_diagonal(&self) -> Result<Self> {
        let mut col_ptr = Vec::with_capacity(self.ncols + 1);
        let mut row_idx = Vec::with_capacity(self.nnz() + self.ncols.min(self.nrows));
        col_ptr.push(0);
        for j in 0..self.ncols {
            let col = self.col(j);
            let at = col.partition_point(|&i| (i as usize) < j);
            row_idx.extend_from_slice(&col[..at]);
            if j < self.nrows {
                row_idx.push(idx(j));
            }
            let rest = &col[at..];
            row_idx.extend_from_slice(rest.strip_prefix(&[idx(j)]).unwrap_or(rest));
            check_dim("nnz", row_idx.len())?;
            col_ptr.push(idx(row_idx.len()));
        }
        Ok(Self { nrows: self.nrows, ncols: self.ncols, col_ptr, row_idx })
    }

    /// A zero-copy faer view of the pattern, with faer's `u32` index type.
    ///
    /// Values decompressed by this crate are aligned with the pattern's
    /// entries, so `faer::sparse::SparseColMatRef::new(p.as_faer(), &values)`
    /// is the sparse Jacobian, again without copying. faer re-checks the
    /// structure here (linear time, no allocation).
    ///
    /// ```
    /// use anvil_sparse::SparsityPattern;
    /// let p = SparsityPattern::from_entries(2, 2, [(0, 0), (1, 0), (1, 1)])?;
    /// let values = [1.0, 2.0, 3.0];
    /// let j = faer::sparse::SparseColMatRef::new(p.as_faer(), &values);
    /// assert_eq!(j.to_dense()[(1, 0)], 2.0);
    /// # Ok::<(), anvil_sparse::SparseError>(())
    /// ```
    pub fn as_faer(&self) -> SymbolicSparseColMatRef<'_, Idx> {
        SymbolicSparseColMatRef::new_checked(
            self.nrows,
            self.ncols,
            &self.col_ptr,
            None,
            &self.row_idx,
        )
    }

    /// A copy of the pattern as faer's symbolic CSC with `usize` indices
    /// (faer's default index type, e.g. for `SparseColMat<usize, f64>`).
    pub fn to_faer_usize(&self) -> SymbolicSparseColMat<usize> {
        let widen = |v: &[Idx]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
        SymbolicSparseColMat::new_checked(
            self.nrows,
            self.ncols,
            widen(&self.col_ptr),
            None,
            widen(&self.row_idx),
        )
    }

    /// Removes repeated row indices from columns whose rows are sorted.
    fn dedup_sorted_columns(&mut self) {
        let mut write = 0usize;
        let mut start = 0usize;
        for j in 0..self.ncols {
            let end = self.col_ptr[j + 1] as usize;
            let mut last = None;
            for p in start..end {
                let i = self.row_idx[p];
                if last != Some(i) {
                    self.row_idx[write] = i;
                    write += 1;
                    last = Some(i);
                }
            }
            start = end;
            self.col_ptr[j + 1] = idx(write);
        }
        self.row_idx.truncate(write);
    }
}

/// Turns per-slot counts stored at `ptr[k + 1]` into offsets.
fn prefix_sum(ptr: &mut [Idx]) {
    for k in 1..ptr.len() {
        ptr[k] += ptr[k - 1];
    }
}

/// Checks a compressed-storage pointer array for `len` slots over `nnz` indices.
fn check_ptr(name: &str, ptr: &[usize], len: usize, nnz: usize) -> Result<()> {
    let bad = |msg: String| Err(SparseError::InvalidStorage(format!("{name}: {msg}")));
    if ptr.len() != len + 1 {
        return bad(format!("has {} entries, expected {}", ptr.len(), len + 1));
    }
    if ptr[0] != 0 {
        return bad(format!("starts at {}, expected 0", ptr[0]));
    }
    if let Some(k) = ptr.windows(2).position(|w| w[0] > w[1]) {
        return bad(format!("decreases after slot {k}"));
    }
    if ptr[len] > nnz {
        return bad(format!("ends at {} but there are only {nnz} indices", ptr[len]));
    }
    Ok(())
}

impl fmt::Display for SparsityPattern {
    /// Small patterns (at most 64 × 64) as a grid of `x` (nonzero) and `.`,
    /// one line per row; larger ones as `m×n pattern, nnz nonzeros`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nrows > DRAW_LIMIT || self.ncols > DRAW_LIMIT {
            return write!(f, "{}×{} pattern, {} nonzeros", self.nrows, self.ncols, self.nnz());
        }
        let mut grid = vec![b'.'; self.nrows * self.ncols];
        for (i, j) in self.entries() {
            grid[i * self.ncols + j] = b'x';
        }
        for i in 0..self.nrows {
            let row = &grid[i * self.ncols..(i + 1) * self.ncols];
            writeln!(f, "{}", String::from_utf8_lossy(row))?;
        }
        Ok(())
    }
}

impl fmt::Debug for SparsityPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SparsityPattern({}×{}, nnz {})", self.nrows, self.ncols, self.nnz())?;
        if self.nrows <= DRAW_LIMIT && self.ncols <= DRAW_LIMIT && self.nrows > 0 {
            write!(f, "\n{self}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SparsityPattern {
        SparsityPattern::from_dense(&[
            [true, false, true],
            [false, false, true],
            [true, true, false],
            [false, false, false],
        ])
        .unwrap()
    }

    #[test]
    fn constructors_agree() {
        let p = sample();
        assert_eq!(p.shape(), (4, 3));
        assert_eq!(p.col_ptr(), &[0, 2, 3, 5]);
        assert_eq!(p.row_idx(), &[0, 2, 2, 0, 1]);
        let q =
            SparsityPattern::from_entries(4, 3, [(2, 1), (0, 2), (0, 0), (1, 2), (2, 0), (0, 0)])
                .unwrap();
        assert_eq!(p, q);
        // CSR, unsorted with a repeat in row 0.
        let r = SparsityPattern::from_csr(4, 3, &[0, 3, 4, 6, 6], &[2, 0, 2, 2, 1, 0]).unwrap();
        assert_eq!(p, r);
        let s =
            SparsityPattern::from_csc(4, 3, p.col_ptr().to_vec(), p.row_idx().to_vec()).unwrap();
        assert_eq!(p, s);
        assert_eq!(SparsityPattern::from_faer(p.as_faer()).unwrap(), p);
        assert_eq!(SparsityPattern::from_faer(p.to_faer_usize().as_ref()).unwrap(), p);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            SparsityPattern::from_entries(2, 2, [(2, 0)]),
            Err(SparseError::OutOfBounds { row: 2, col: 0, .. })
        ));
        assert!(matches!(
            SparsityPattern::from_dense(&[vec![true], vec![true, false]]),
            Err(SparseError::RaggedDense { row: 1, found: 2, expected: 1 })
        ));
        assert!(matches!(
            SparsityPattern::from_csr(2, 2, &[0, 1], &[0]),
            Err(SparseError::InvalidStorage(_))
        ));
        assert!(matches!(
            SparsityPattern::from_csr(2, 2, &[0, 1, 1], &[5]),
            Err(SparseError::OutOfBounds { row: 0, col: 5, .. })
        ));
        assert!(matches!(
            SparsityPattern::from_csc(2, 1, vec![0, 2], vec![1, 0]),
            Err(SparseError::InvalidStorage(_))
        ));
        assert!(matches!(
            SparsityPattern::from_csc(2, 1, vec![0, 1], vec![2]),
            Err(SparseError::OutOfBounds { .. })
        ));
        assert!(matches!(
            SparsityPattern::empty(MAX_DIM + 1, 1),
            Err(SparseError::TooLarge { what: "nrows", .. })
        ));
    }

    #[test]
    fn with_diagonal_merges_each_column() {
        let p = SparsityPattern::from_entries(3, 4, [(0, 0), (2, 1), (0, 2), (1, 3)]).unwrap();
        let d = p.with_diagonal().unwrap();
        let expected = [(0, 0), (1, 1), (2, 1), (0, 2), (2, 2), (1, 3)];
        assert_eq!(d, SparsityPattern::from_entries(3, 4, expected).unwrap());
        assert_eq!(d.with_diagonal().unwrap(), d);
        let empty = SparsityPattern::empty(0, 0).unwrap();
        assert_eq!(empty.with_diagonal().unwrap(), empty);
    }

    #[test]
    fn transpose_symmetry_and_lookup() {
        let p = sample();
        let t = p.transpose();
        assert_eq!(t.shape(), (3, 4));
        assert_eq!(t.transpose(), p);
        assert!(p.entries().all(|(i, j)| t.contains(j, i)));
        assert_eq!(p.entries().count(), p.nnz());
        assert!(!p.is_symmetric());
        let sym = SparsityPattern::from_entries(3, 3, [(0, 1), (1, 0), (2, 2)]).unwrap();
        assert!(sym.is_symmetric());
        let lower = SparsityPattern::from_entries(3, 3, [(1, 0), (2, 2)]).unwrap();
        assert!(!lower.is_symmetric());
        assert_eq!(lower.symmetrize().unwrap(), sym);
        assert!(!p.contains(9, 0));
    }

    #[test]
    fn display_and_debug() {
        let p = sample();
        assert_eq!(p.to_string(), "x.x\n..x\nxx.\n...\n");
        assert_eq!(format!("{p:?}"), "SparsityPattern(4×3, nnz 5)\nx.x\n..x\nxx.\n...\n");
        let big = SparsityPattern::empty(100, 2).unwrap();
        assert_eq!(big.to_string(), "100×2 pattern, 0 nonzeros");
        let zero = SparsityPattern::empty(0, 0).unwrap();
        assert_eq!(format!("{zero:?}"), "SparsityPattern(0×0, nnz 0)");
        assert_eq!(SparsityPattern::empty(2, 0).unwrap().to_string(), "\n\n");
    }
}
