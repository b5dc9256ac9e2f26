//! Greedy colorings of sparsity patterns and the exact decompression of the
//! compressed derivatives they allow.
//!
//! | type | colors | one derivative pass per color | compressed input to decompress |
//! | --- | --- | --- | --- |
//! | [`ColumnColoring`] | columns (inputs) | JVP `J·s_c` | `B = J·S`, `m × colors` |
//! | [`RowColoring`] | rows (outputs) | VJP `s_cᵀ·J` | `C = Sᵀ·J`, `colors × n` |
//! | [`StarColoring`] | columns of a symmetric `H` | HVP `H·s_c` | `H·S`, `n × colors` |
//! | [`BiColoring`] | some columns and some rows | JVPs and VJPs | both `B` and `C` |
//! | [`AcyclicColoring`] | columns of a symmetric `H` | HVP `H·s_c` | `H·S`, by substitution |
//!
//! The seed `s_c` of color `c` is the 0/1 vector with ones at the vertices of
//! color `c`; [`Coloring::seeds`] lists them as index lists. Every
//! decompression here but the acyclic one is *direct*: each nonzero is
//! copied from one entry of the compressed matrix, with no arithmetic, so
//! the result is exact. [`AcyclicColoring`] needs fewer colors on many
//! Hessian patterns and recovers entries by substitution (subtractions),
//! exact only up to rounding.
//!
//! Compressed matrices are taken as faer [`MatRef`]s, so any
//! layout works: one JVP result per color laid end to end is
//! `MatRef::from_column_major_slice(&buf, m, colors)`, one VJP result per
//! color is `MatRef::from_row_major_slice(&buf, colors, n)`.

mod acyclic;
mod bicoloring;
mod column;
mod graph;
mod order;
mod star;

pub use acyclic::AcyclicColoring;
pub use bicoloring::BiColoring;
pub use column::{ColumnColoring, RowColoring};
pub use order::Order;
pub use star::StarColoring;

use faer::MatRef;

use crate::error::{Result, SparseError};
use crate::pattern::{idx, Idx, SparsityPattern};

/// A color for each vertex (column or row) and the number of colors.
///
/// Colors are `0..num_colors`; a vertex may instead have the neutral color
/// [`Coloring::NEUTRAL`], meaning it belongs to no seed (an empty column, or
/// a vertex a star or bidirectional decompression never reads through).
///
/// ```
/// use anvil_sparse::{gallery, ColumnColoring, Order};
/// let c = ColumnColoring::new(gallery::tridiagonal(5)?, Order::Natural);
/// assert_eq!(c.coloring().colors(), &[0, 1, 2, 0, 1]);
/// let seeds = c.coloring().seeds();
/// assert_eq!(seeds.get(0), &[0, 3]); // one JVP with tangent e0 + e3
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coloring {
    colors: Vec<Idx>,
    num_colors: usize,
}

impl Coloring {
    /// The color of vertices that belong to no seed.
    pub const NEUTRAL: Idx = Idx::MAX;

    /// Wraps colors in `0..num_colors` or [`NEUTRAL`](Self::NEUTRAL); the
    /// count is derived.
    pub(crate) fn from_colors(colors: Vec<Idx>) -> Self {
        let num_colors =
            colors.iter().filter(|&&c| c != Self::NEUTRAL).map(|&c| c as usize + 1).max();
        Self { colors, num_colors: num_colors.unwrap_or(0) }
    }

    /// The color of each vertex, [`NEUTRAL`](Self::NEUTRAL) for none.
    pub fn colors(&self) -> &[Idx] {
        &self.colors
    }

    /// The number of colors, i.e. of derivative passes.
    pub fn num_colors(&self) -> usize {
        self.num_colors
    }

    /// The number of vertices colored (columns or rows).
    pub fn num_vertices(&self) -> usize {
        self.colors.len()
    }

    /// The color of vertex `v`, `None` if it is neutral or out of range.
    pub fn color(&self, v: usize) -> Option<usize> {
        self.colors.get(v).filter(|&&c| c != Self::NEUTRAL).map(|&c| c as usize)
    }

    /// The seeds: for each color, the increasing list of its vertices. Seed
    /// `c` is the 0/1 tangent (or cotangent) with ones at `seeds.get(c)`.
    pub fn seeds(&self) -> Seeds {
        let mut ptr = vec![0usize; self.num_colors + 1];
        for &c in self.colors.iter().filter(|&&c| c != Self::NEUTRAL) {
            ptr[c as usize + 1] += 1;
        }
        for k in 1..ptr.len() {
            ptr[k] += ptr[k - 1];
        }
        let mut next = ptr.clone();
        let mut members = vec![0; ptr[self.num_colors]];
        for (v, &c) in self.colors.iter().enumerate().filter(|(_, &c)| c != Self::NEUTRAL) {
            members[next[c as usize]] = idx(v);
            next[c as usize] += 1;
        }
        Seeds { ptr, members }
    }
}

/// The seeds of a [`Coloring`]: one index list per color.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeds {
    ptr: Vec<usize>,
    members: Vec<Idx>,
}

impl Seeds {
    /// The number of seeds (colors).
    pub fn len(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Whether there is no seed (nothing to differentiate).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vertices of color `c`, increasing.
    ///
    /// # Panics
    /// If `c >= self.len()`.
    pub fn get(&self, c: usize) -> &[Idx] {
        &self.members[self.ptr[c]..self.ptr[c + 1]]
    }

    /// The seeds in color order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[Idx]> + '_ {
        (0..self.len()).map(move |c| self.get(c))
    }
}

/// The smallest color not stamped with `stamp` in `forbidden` (indexed by
/// color), growing `forbidden` when every existing color is taken.
pub(crate) fn first_allowed(forbidden: &mut Vec<Idx>, stamp: Idx) -> Idx {
    match forbidden.iter().position(|&s| s != stamp) {
        Some(c) => idx(c),
        None => {
            forbidden.push(order::NONE);
            idx(forbidden.len() - 1)
        }
    }
}

/// Renumbers the colors in use to `0..k` by first appearance.
pub(crate) fn renumber(mut colors: Vec<Idx>) -> Coloring {
    let mut map: Vec<Idx> = Vec::new();
    let mut next = 0;
    for c in colors.iter_mut().filter(|c| **c != Coloring::NEUTRAL) {
        let c0 = *c as usize;
        if map.len() <= c0 {
            map.resize(c0 + 1, order::NONE);
        }
        if map[c0] == order::NONE {
            map[c0] = next;
            next += 1;
        }
        *c = map[c0];
    }
    Coloring::from_colors(colors)
}

/// Checks that a compressed matrix has the shape decompression expects.
pub(crate) fn check_shape<T>(
    what: &'static str,
    m: MatRef<'_, T>,
    expected: (usize, usize),
) -> Result<()> {
    let found = (m.nrows(), m.ncols());
    if found != expected {
        return Err(SparseError::ShapeMismatch { what, expected, found });
    }
    Ok(())
}

/// Fills `out` (one value per nonzero, in the pattern's order) with
/// `value(row, col, position)`.
pub(crate) fn gather_into<T>(
    pattern: &SparsityPattern,
    out: &mut [T],
    mut value: impl FnMut(usize, usize, usize) -> T,
) -> Result<()> {
    if out.len() != pattern.nnz() {
        return Err(SparseError::ShapeMismatch {
            what: "output values",
            expected: (pattern.nnz(), 1),
            found: (out.len(), 1),
        });
    }
    for j in 0..pattern.ncols() {
        for p in pattern.col_range(j) {
            out[p] = value(pattern.row_idx()[p] as usize, j, p);
        }
    }
    Ok(())
}

/// Like [`gather_into`], allocating the output.
pub(crate) fn gather<T>(
    pattern: &SparsityPattern,
    mut value: impl FnMut(usize, usize, usize) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(pattern.nnz());
    for j in 0..pattern.ncols() {
        for p in pattern.col_range(j) {
            out.push(value(pattern.row_idx()[p] as usize, j, p));
        }
    }
    out
}
