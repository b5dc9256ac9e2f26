//! Bidirectional coloring: star bicoloring (Coleman & Verma 1998;
//! Gebremedhin, Manne, Pothen 2005, section 3.5) computed as a star coloring
//! of the bipartite row/column graph, as in SparseMatrixColorings.jl
//! (Montoison, Dalle, Gebremedhin 2025, arXiv 2505.07308).
//!
//! In the bipartite graph, the star of entry `(i, j)` has its hub at column
//! `j` or at row `i`. A column hub means no other column of `j`'s color
//! meets row `i`, so `J[i, j] = B[i, color(j)]` from the forward product; a
//! row hub means `J[i, j] = C[color(i), j]` from the reverse product. After
//! the vertices that are never hubs are made neutral, the colors left on
//! columns and the colors left on rows are numbered separately: the forward
//! and the reverse passes.

use std::sync::Arc;

use faer::MatRef;

use super::column::distance2_coloring;
use super::graph::AdjGraph;
use super::star::{finish, star_coloring};
use super::{check_shape, gather, gather_into, Coloring, Order, Seeds};
use crate::error::Result;
use crate::pattern::{Idx, SparsityPattern};

/// A bidirectional coloring of a Jacobian pattern: some columns get colors
/// (one JVP each), some rows get colors (one VJP each), and every entry is
/// copied out of one of the two compressed products.
///
/// On an arrowhead (dense first row and column plus the diagonal) one-sided
/// colorings need `n` passes; this needs 3 (see the crate's README table).
///
/// ```
/// use anvil_sparse::{gallery, BiColoring, Order};
/// use faer::Mat;
/// let n = 50;
/// let coloring = BiColoring::new(gallery::arrowhead(n)?, Order::default());
/// assert!(coloring.num_colors() <= 4);
/// // J[i][j] = 1 + i + 100 j; B = J·S_cols (JVPs) and C = S_rowsᵀ·J (VJPs).
/// let p = coloring.pattern();
/// let (cols, rows) = (coloring.column_coloring().colors(), coloring.row_coloring().colors());
/// let mut b = Mat::<f64>::zeros(n, coloring.column_coloring().num_colors());
/// let mut c = Mat::<f64>::zeros(coloring.row_coloring().num_colors(), n);
/// for (i, j) in p.entries() {
///     let v = (1 + i + 100 * j) as f64;
///     if cols[j] != anvil_sparse::Coloring::NEUTRAL { b[(i, cols[j] as usize)] += v; }
///     if rows[i] != anvil_sparse::Coloring::NEUTRAL { c[(rows[i] as usize, j)] += v; }
/// }
/// let values = coloring.decompress(b.as_ref(), c.as_ref())?;
/// assert!(p.entries().zip(values).all(|((i, j), v)| v == (1 + i + 100 * j) as f64));
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BiColoring {
    pattern: Arc<SparsityPattern>,
    columns: Coloring,
    rows: Coloring,
    /// Per entry: read from the forward product `B` (`true`) or from the
    /// reverse product `C`.
    forward: Vec<bool>,
}

impl BiColoring {
    /// The best of several bidirectional colorings (fewest passes, then
    /// fewest VJPs: a JVP stores no residuals, and runs through loops that
    /// reverse mode cannot; greedy in `order` each):
    ///
    /// * the star bicoloring of [`BiColoring::star`];
    /// * dense rows in reverse: the rows with at least `t` nonzeros get a
    ///   row coloring among themselves, the other rows are read from a
    ///   column coloring of their own entries (Coleman & Verma 1998's
    ///   bipartition, also Hossain & Steihaug 1998); tried for the 4
    ///   largest row lengths `t`;
    /// * dense columns forward, the mirror image;
    ///
    /// and the one-sided column and row colorings, which are the splits
    /// with nothing (everything) on one side, so the result never needs more
    /// passes than [`ColumnColoring`](super::ColumnColoring) or
    /// [`RowColoring`](super::RowColoring) in the same order.
    pub fn new(pattern: impl Into<Arc<SparsityPattern>>, order: Order) -> Self {
        let pattern: Arc<SparsityPattern> = pattern.into();
        let t = pattern.transpose();
        let mut best = Self::star(pattern.clone(), order);
        let better = |c: &Self, best: &Self| {
            (c.num_colors(), c.rows.num_colors()) < (best.num_colors(), best.rows.num_colors())
        };
        let row_len: Vec<usize> = t.cols().map(<[Idx]>::len).collect();
        for threshold in split_thresholds(&row_len) {
            let reverse = |i: usize, _: usize| row_len[i] >= threshold;
            let candidate = Self::split(&pattern, order, reverse);
            if better(&candidate, &best) {
                best = candidate;
            }
        }
        let col_len: Vec<usize> = pattern.cols().map(<[Idx]>::len).collect();
        for threshold in split_thresholds(&col_len) {
            let reverse = |_: usize, j: usize| col_len[j] < threshold;
            let candidate = Self::split(&pattern, order, reverse);
            if better(&candidate, &best) {
                best = candidate;
            }
        }
        best
    }

    /// The star bicoloring alone: a star coloring of the bipartite
    /// row/column graph (vertices in `order`, columns `0..n` before rows),
    /// then neutral colors for vertices that are hubs of no two-colored star,
    /// and separate numberings of the colors left on columns and on rows.
    pub fn star(pattern: impl Into<Arc<SparsityPattern>>, order: Order) -> Self {
        let pattern: Arc<SparsityPattern> = pattern.into();
        let n = pattern.ncols();
        let mut g = AdjGraph::bipartite(&pattern);
        let mut stars = star_coloring(&mut g, order);
        let needed = vec![false; n + pattern.nrows()];
        // Single-edge stars are read from the row side unless only the
        // column's color is already needed.
        let edges = pattern.entries().enumerate().map(|(e, (i, j))| (e, n + i, j));
        let (both, hub_of_edge) = finish(&mut stars, needed, edges);
        let forward = pattern.entries().enumerate().map(|(e, (_, j))| hub_of_edge[e] as usize == j);
        let (columns, rows) = split_colors(both.colors(), n);
        Self { forward: forward.collect(), pattern, columns, rows }
    }

    /// Reads the entries with `reverse(i, j)` from a row coloring of those
    /// entries and the others from a column coloring of the others. Exact
    /// only when the reverse set is a union of whole rows or the forward
    /// set a union of whole columns, as for the two callers in `new`.
    fn split(
        pattern: &Arc<SparsityPattern>,
        order: Order,
        reverse: impl Fn(usize, usize) -> bool,
    ) -> Self {
        let forward: Vec<bool> = pattern.entries().map(|(i, j)| !reverse(i, j)).collect();
        let (fwd, rev) = (pattern.filter(|i, j| !reverse(i, j)), pattern.filter(&reverse));
        let columns = distance2_coloring(&fwd, &fwd.transpose(), order);
        let rows = distance2_coloring(&rev.transpose(), &rev, order);
        Self { pattern: pattern.clone(), columns, rows, forward }
    }

    /// The Jacobian pattern (`m × n`).
    pub fn pattern(&self) -> &SparsityPattern {
        &self.pattern
    }

    /// The colors of the columns (forward mode; neutral columns are in no
    /// tangent seed).
    pub fn column_coloring(&self) -> &Coloring {
        &self.columns
    }

    /// The colors of the rows (reverse mode; neutral rows are in no
    /// cotangent seed).
    pub fn row_coloring(&self) -> &Coloring {
        &self.rows
    }

    /// The total number of passes: JVPs plus VJPs.
    pub fn num_colors(&self) -> usize {
        self.columns.num_colors() + self.rows.num_colors()
    }

    /// The tangent seeds of the JVPs (input indices per color).
    pub fn column_seeds(&self) -> Seeds {
        self.columns.seeds()
    }

    /// The cotangent seeds of the VJPs (output indices per color).
    pub fn row_seeds(&self) -> Seeds {
        self.rows.seeds()
    }

    /// The values of `J`, aligned with the pattern's entries, from the
    /// forward product `B = J·S_c` (`m × column colors`) and the reverse
    /// product `C = S_rᵀ·J` (`row colors × n`).
    ///
    /// # Errors
    /// [`SparseError::ShapeMismatch`](crate::SparseError::ShapeMismatch)
    /// naming the misshapen argument.
    pub fn decompress<T: Copy>(&self, b: MatRef<'_, T>, c: MatRef<'_, T>) -> Result<Vec<T>> {
        self.check(b, c)?;
        Ok(gather(&self.pattern, |i, j, p| self.read(b, c, i, j, p)))
    }

    /// [`decompress`](Self::decompress) into an existing buffer of `nnz`
    /// values.
    ///
    /// # Errors
    /// As for `decompress`, and if `values.len() != nnz`.
    pub fn decompress_into<T: Copy>(
        &self,
        b: MatRef<'_, T>,
        c: MatRef<'_, T>,
        values: &mut [T],
    ) -> Result<()> {
        self.check(b, c)?;
        gather_into(&self.pattern, values, |i, j, p| self.read(b, c, i, j, p))
    }

    #[inline]
    fn read<T: Copy>(&self, b: MatRef<'_, T>, c: MatRef<'_, T>, i: usize, j: usize, p: usize) -> T {
        if self.forward[p] {
            b[(i, self.columns.colors()[j] as usize)]
        } else {
            c[(self.rows.colors()[i] as usize, j)]
        }
    }

    fn check<T>(&self, b: MatRef<'_, T>, c: MatRef<'_, T>) -> Result<()> {
        let (m, n) = self.pattern.shape();
        check_shape("forward product B = J·S", b, (m, self.columns.num_colors()))?;
        check_shape("reverse product C = Sᵀ·J", c, (self.rows.num_colors(), n))
    }
}

/// Splits the colors of the bipartite graph's vertices into the columns'
/// (`0..n`) and the rows' coloring, each renumbered `0..k` in order of its
/// smallest color.
fn split_colors(colors: &[Idx], n: usize) -> (Coloring, Coloring) {
    let renumber = |side: &[Idx]| {
        let max = side.iter().filter(|&&c| c != Coloring::NEUTRAL).max();
        let mut map = vec![Coloring::NEUTRAL; max.map_or(0, |&c| c as usize + 1)];
        for &c in side.iter().filter(|&&c| c != Coloring::NEUTRAL) {
            map[c as usize] = 0; // mark present
        }
        for (next, slot) in map.iter_mut().filter(|s| **s == 0).enumerate() {
            *slot = next as Idx;
        }
        let out = side
            .iter()
            .map(|&c| if c == Coloring::NEUTRAL { c } else { map[c as usize] })
            .collect();
        Coloring::from_colors(out)
    };
    (renumber(&colors[..n]), renumber(&colors[n..]))
}

/// How many row (column) length thresholds [`BiColoring::new`] tries.
const SPLIT_TRIES: usize = 4;

/// The thresholds `t` to try for "lines with at least `t` nonzeros go to the
/// other side": the largest distinct lengths, each leaving at least one
/// line on the first side, plus one beyond the maximum (nothing moves: the
/// one-sided coloring).
fn split_thresholds(len: &[usize]) -> Vec<usize> {
    let mut distinct: Vec<usize> = len.iter().copied().filter(|&l| l > 0).collect();
    distinct.sort_unstable_by(|a, b| b.cmp(a));
    distinct.dedup();
    let max = distinct.first().copied().unwrap_or(0);
    let mut out = vec![max + 1];
    out.extend(distinct.into_iter().take(SPLIT_TRIES));
    out
}
