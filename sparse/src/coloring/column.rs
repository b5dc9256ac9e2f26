//! Column coloring (forward mode) and row coloring (reverse mode): partial
//! distance-2 colorings of the bipartite row/column graph (Gebremedhin,
//! Manne, Pothen 2005, "What color is your Jacobian?", algorithm 3.2).

use std::sync::Arc;

use faer::MatRef;

use super::order::{ColumnIntersection, Visit, NONE};
use super::{check_shape, first_allowed, gather, gather_into, Coloring, Order, Seeds};
use crate::error::Result;
use crate::pattern::{idx, Idx, SparsityPattern};

/// Colors the columns of `cols` (`rows` is its transpose) so that columns
/// sharing a row get different colors; empty columns are neutral.
pub(crate) fn distance2_coloring(
    cols: &SparsityPattern,
    rows: &SparsityPattern,
    order: Order,
) -> Coloring {
    let mut visit = Visit::new(&mut ColumnIntersection::new(cols, rows), order);
    let mut color = vec![Coloring::NEUTRAL; cols.ncols()];
    // Indexed by color: `forbidden[c] == v` while `v` has a neighbour of
    // color `c`. Always as long as the number of colors so far.
    let mut forbidden: Vec<Idx> = Vec::new();
    while let Some(v) = visit.next() {
        let col = cols.col(v);
        if col.is_empty() {
            continue;
        }
        let c = match visit.free_color() {
            Some(c) => {
                if forbidden.len() <= c as usize {
                    forbidden.resize(c as usize + 1, NONE);
                }
                c
            }
            None => {
                for &r in col {
                    for &w in rows.col(r as usize) {
                        if color[w as usize] != Coloring::NEUTRAL {
                            forbidden[color[w as usize] as usize] = idx(v);
                        }
                    }
                }
                first_allowed(&mut forbidden, idx(v))
            }
        };
        color[v] = c;
        if let Some(s) = visit.saturation() {
            for &r in col {
                for &w in rows.col(r as usize) {
                    s.saw(w as usize, c);
                }
            }
        }
    }
    Coloring::from_colors(color)
}

/// A column coloring of a Jacobian pattern, for forward mode: one JVP per
/// color, then [`decompress`](Self::decompress).
///
/// Columns of one color are structurally orthogonal (no row has a nonzero
/// in two of them), so in `B = J·S` entry `B[i, color(j)]` is exactly
/// `J[i, j]` for every nonzero `(i, j)`.
///
/// ```
/// use anvil_sparse::{gallery, ColumnColoring, Order};
/// use faer::Mat;
/// // J = tridiagonal, 6 × 6; 3 JVPs instead of 6.
/// let coloring = ColumnColoring::new(gallery::tridiagonal(6)?, Order::default());
/// assert_eq!(coloring.num_colors(), 3);
/// // Pretend J[i][j] = 10 i + j and compute B = J·S column by column, as
/// // the JVPs with the seeds as tangents would.
/// let p = coloring.pattern();
/// let mut b = Mat::<f64>::zeros(6, coloring.num_colors());
/// for (c, seed) in coloring.seeds().iter().enumerate() {
///     for &j in seed {
///         for &i in p.col(j as usize) {
///             b[(i as usize, c)] += (10 * i + j) as f64;
///         }
///     }
/// }
/// let values = coloring.decompress(b.as_ref())?;
/// let expected: Vec<f64> = p.entries().map(|(i, j)| (10 * i + j) as f64).collect();
/// assert_eq!(values, expected);
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ColumnColoring {
    pattern: Arc<SparsityPattern>,
    coloring: Coloring,
}

impl ColumnColoring {
    /// Colors the columns of `pattern` greedily in the given order (the
    /// default, [`Order::Saturation`], finds the optimal 5 colors on the
    /// 5-point Laplacian).
    pub fn new(pattern: impl Into<Arc<SparsityPattern>>, order: Order) -> Self {
        let pattern = pattern.into();
        let coloring = distance2_coloring(&pattern, &pattern.transpose(), order);
        Self { pattern, coloring }
    }

    /// The Jacobian pattern (`m × n`).
    pub fn pattern(&self) -> &SparsityPattern {
        &self.pattern
    }

    /// The color of each column.
    pub fn coloring(&self) -> &Coloring {
        &self.coloring
    }

    /// The number of colors, i.e. of JVPs.
    pub fn num_colors(&self) -> usize {
        self.coloring.num_colors()
    }

    /// The tangent seeds: for each color, the input indices set to one.
    pub fn seeds(&self) -> Seeds {
        self.coloring.seeds()
    }

    /// The values of `J`, aligned with the pattern's entries, from the
    /// compressed `B = J·S` (`m × num_colors`, column `c` = the JVP of seed
    /// `c`).
    ///
    /// # Errors
    /// [`SparseError::ShapeMismatch`](crate::SparseError::ShapeMismatch) if
    /// `b` is not `m × num_colors`.
    pub fn decompress<T: Copy>(&self, b: MatRef<'_, T>) -> Result<Vec<T>> {
        self.check(b)?;
        let colors = self.coloring.colors();
        Ok(gather(&self.pattern, |i, j, _| b[(i, colors[j] as usize)]))
    }

    /// [`decompress`](Self::decompress) into an existing buffer of `nnz`
    /// values.
    ///
    /// # Errors
    /// As for `decompress`, and if `values.len() != nnz`.
    pub fn decompress_into<T: Copy>(&self, b: MatRef<'_, T>, values: &mut [T]) -> Result<()> {
        self.check(b)?;
        let colors = self.coloring.colors();
        gather_into(&self.pattern, values, |i, j, _| b[(i, colors[j] as usize)])
    }

    fn check<T>(&self, b: MatRef<'_, T>) -> Result<()> {
        check_shape("compressed B = J·S", b, (self.pattern.nrows(), self.num_colors()))
    }
}

/// A row coloring of a Jacobian pattern, for reverse mode: one VJP per
/// color, then [`decompress`](Self::decompress).
///
/// Rows of one color are structurally orthogonal, so in `C = Sᵀ·J` entry
/// `C[color(i), j]` is exactly `J[i, j]`.
///
/// ```
/// use anvil_sparse::{gallery, Order, RowColoring};
/// use faer::Mat;
/// let coloring = RowColoring::new(gallery::banded(8, 5, 1, 0)?, Order::Natural);
/// assert_eq!(coloring.num_colors(), 2); // rows 2 apart never share a column
/// let p = coloring.pattern();
/// let colors = coloring.coloring().colors();
/// let mut c = Mat::<f64>::zeros(coloring.num_colors(), 5);
/// for (i, j) in p.entries() {
///     c[(colors[i] as usize, j)] += 1.0 + i as f64; // the VJPs of the seeds
/// }
/// let values = coloring.decompress(c.as_ref())?;
/// assert!(p.entries().zip(values).all(|((i, _), v)| v == 1.0 + i as f64));
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RowColoring {
    pattern: Arc<SparsityPattern>,
    coloring: Coloring,
}

impl RowColoring {
    /// Colors the rows of `pattern` greedily in the given order.
    pub fn new(pattern: impl Into<Arc<SparsityPattern>>, order: Order) -> Self {
        let pattern = pattern.into();
        let coloring = distance2_coloring(&pattern.transpose(), &pattern, order);
        Self { pattern, coloring }
    }

    /// The Jacobian pattern (`m × n`).
    pub fn pattern(&self) -> &SparsityPattern {
        &self.pattern
    }

    /// The color of each row.
    pub fn coloring(&self) -> &Coloring {
        &self.coloring
    }

    /// The number of colors, i.e. of VJPs.
    pub fn num_colors(&self) -> usize {
        self.coloring.num_colors()
    }

    /// The cotangent seeds: for each color, the output indices set to one.
    pub fn seeds(&self) -> Seeds {
        self.coloring.seeds()
    }

    /// The values of `J`, aligned with the pattern's entries, from the
    /// compressed `C = Sᵀ·J` (`num_colors × n`, row `c` = the VJP of seed
    /// `c`).
    ///
    /// # Errors
    /// [`SparseError::ShapeMismatch`](crate::SparseError::ShapeMismatch) if
    /// `c` is not `num_colors × n`.
    pub fn decompress<T: Copy>(&self, c: MatRef<'_, T>) -> Result<Vec<T>> {
        self.check(c)?;
        let colors = self.coloring.colors();
        Ok(gather(&self.pattern, |i, j, _| c[(colors[i] as usize, j)]))
    }

    /// [`decompress`](Self::decompress) into an existing buffer of `nnz`
    /// values.
    ///
    /// # Errors
    /// As for `decompress`, and if `values.len() != nnz`.
    pub fn decompress_into<T: Copy>(&self, c: MatRef<'_, T>, values: &mut [T]) -> Result<()> {
        self.check(c)?;
        let colors = self.coloring.colors();
        gather_into(&self.pattern, values, |i, j, _| c[(colors[i] as usize, j)])
    }

    fn check<T>(&self, c: MatRef<'_, T>) -> Result<()> {
        check_shape("compressed C = Sᵀ·J", c, (self.num_colors(), self.pattern.ncols()))
    }
}
