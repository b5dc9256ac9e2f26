//! Star coloring (symmetric matrices, direct decompression), after
//! Gebremedhin, Tarafdar, Manne, Pothen 2007, "New acyclic and star coloring
//! algorithms with application to computing Hessians", algorithm 4.1.
//!
//! A star coloring is a distance-1 coloring in which every path on four
//! vertices uses at least three colors; equivalently every two-colored
//! connected subgraph is a star. For each edge the algorithm records the
//! two-colored star it belongs to and that star's hub (its center). An entry
//! `H[i, j]` whose star has hub `j` is read from `(H·S)[i, color(j)]`: `i` is
//! a spoke, and its only neighbour of the hub's color is the hub.

use std::sync::Arc;

use faer::MatRef;

use super::column::distance2_coloring;
use super::graph::AdjGraph;
use super::order::{Graph, Visit, NONE};
use super::{check_shape, first_allowed, gather, gather_into, renumber, Coloring, Order, Seeds};
use crate::error::{Result, SparseError};
use crate::pattern::{idx, Idx, SparsityPattern};

/// The outcome of the greedy star coloring: a color per vertex, and for each
/// edge its two-colored star, for each star its hub (`NONE` while the star
/// is a single edge, whose hub is either end).
pub(crate) struct Stars {
    pub(crate) color: Vec<Idx>,
    pub(crate) star: Vec<Idx>,
    pub(crate) hub: Vec<Idx>,
}

/// Per-color memory of the first neighbour of the current vertex seen with
/// that color: `(vertex being colored, neighbour, edge between them)`.
type FirstNeighbor = (Idx, Idx, Idx);

/// Greedy star coloring of `g` in the given order (GTMP 2007, alg. 4.1).
pub(crate) fn star_coloring(g: &mut AdjGraph, order: Order) -> Stars {
    let n = g.num_vertices();
    let mut visit = Visit::new(g, order);
    let mut s = Stars { color: vec![NONE; n], star: vec![NONE; g.num_edges()], hub: Vec::new() };
    let mut forbidden: Vec<Idx> = Vec::new();
    let mut first: Vec<FirstNeighbor> = Vec::new();
    let mut treated = vec![NONE; n];
    while let Some(vi) = visit.next() {
        let v = idx(vi);
        for (w, e_vw) in g.neighbors(vi) {
            let cw = s.color[w];
            if cw == NONE {
                continue;
            }
            forbidden[cw as usize] = v;
            let (p, q, _) = first[cw as usize];
            if p == v {
                // Two neighbours q, w of one color: v will be the hub of their
                // star, so no neighbour of q or w may share v's color.
                if treated[q as usize] != v {
                    forbid_neighbors(g, &s.color, &mut forbidden, &mut treated, v, q as usize);
                }
                forbid_neighbors(g, &s.color, &mut forbidden, &mut treated, v, w);
            } else {
                first[cw as usize] = (v, idx(w), idx(e_vw));
                // w is a spoke of a star centered at x: taking x's color would
                // make v - w - x - (another spoke) a two-colored path.
                for (x, e_wx) in g.neighbors(w) {
                    let cx = s.color[x];
                    if x != vi && cx != NONE && s.hub[s.star[e_wx] as usize] == idx(x) {
                        forbidden[cx as usize] = v;
                    }
                }
            }
        }
        let c = first_allowed(&mut forbidden, v);
        if first.len() < forbidden.len() {
            first.resize(forbidden.len(), (NONE, NONE, NONE));
        }
        s.color[vi] = c;
        update_stars(g, &mut s, &first, vi);
        if let Some(sat) = visit.saturation() {
            for (w, _) in g.neighbors(vi) {
                sat.saw(w, c);
                g.neighbors(w).for_each(|(x, _)| sat.saw(x, c));
            }
        }
    }
    s
}

fn forbid_neighbors(
    g: &AdjGraph,
    color: &[Idx],
    forbidden: &mut [Idx],
    treated: &mut [Idx],
    v: Idx,
    w: usize,
) {
    for (x, _) in g.neighbors(w) {
        if color[x] != NONE {
            forbidden[color[x] as usize] = v;
        }
    }
    treated[w] = v;
}

/// Puts each edge from the just-colored `v` into its two-colored star.
fn update_stars(g: &AdjGraph, s: &mut Stars, first: &[FirstNeighbor], v: usize) {
    let cv = s.color[v];
    for (w, e_vw) in g.neighbors(v) {
        let cw = s.color[w];
        if cw == NONE {
            continue;
        }
        // v - w - x with color(x) = color(v): w is the hub of x's star.
        let spoke = g.neighbors(w).find(|&(x, _)| x != v && s.color[x] == cv);
        if let Some((_, e_wx)) = spoke {
            let st = s.star[e_wx];
            s.hub[st as usize] = idx(w);
            s.star[e_vw] = st;
            continue;
        }
        let (p, q, e_vq) = first[cw as usize];
        if p as usize == v && q as usize != w {
            // v has two neighbours q, w of color(w): v is the hub.
            let st = s.star[e_vq as usize];
            s.hub[st as usize] = idx(v);
            s.star[e_vw] = st;
        } else {
            s.star[e_vw] = idx(s.hub.len());
            s.hub.push(NONE);
        }
    }
}

/// Turns a star coloring into what direct decompression needs.
///
/// Only hubs are ever read through, plus the vertices in `needed` (those
/// with a diagonal entry, read through themselves); single-edge stars get
/// the end whose color is already needed as hub, when there is one. Every
/// other vertex becomes neutral, colors are renumbered `0..k` by first
/// appearance, and the hub of each edge is returned.
pub(crate) fn finish(
    s: &mut Stars,
    mut needed: Vec<bool>,
    edges: impl Iterator<Item = (usize, usize, usize)>,
) -> (Coloring, Vec<Idx>) {
    let ncolors = s.color.iter().filter(|&&c| c != NONE).map(|&c| c as usize + 1).max();
    let mut used = vec![false; ncolors.unwrap_or(0)];
    for &h in s.hub.iter().filter(|&&h| h != NONE) {
        needed[h as usize] = true;
    }
    for (v, _) in needed.iter().enumerate().filter(|(_, &b)| b) {
        used[s.color[v] as usize] = true;
    }
    for (e, u, w) in edges {
        let st = s.star[e] as usize;
        if s.hub[st] == NONE {
            let h = if used[s.color[u] as usize] || !used[s.color[w] as usize] { u } else { w };
            s.hub[st] = idx(h);
            needed[h] = true;
            used[s.color[h] as usize] = true;
        }
    }
    let mut renumber = vec![NONE; used.len()];
    let mut next = 0;
    let colors = s
        .color
        .iter()
        .zip(&needed)
        .map(|(&c, &keep)| {
            if !keep {
                return Coloring::NEUTRAL;
            }
            if renumber[c as usize] == NONE {
                renumber[c as usize] = next;
                next += 1;
            }
            renumber[c as usize]
        })
        .collect();
    let hub_of_edge = s.star.iter().map(|&st| s.hub[st as usize]).collect();
    (Coloring::from_colors(colors), hub_of_edge)
}

/// A star coloring of a symmetric (Hessian) pattern: one Hessian-vector
/// product per color, then [`decompress`](Self::decompress), which copies
/// every entry of `H` out of `H·S` with no arithmetic.
///
/// ```
/// use anvil_sparse::{gallery, Order, StarColoring};
/// use faer::Mat;
/// let coloring = StarColoring::new(gallery::tridiagonal(7)?, Order::default())?;
/// assert_eq!(coloring.num_colors(), 3);
/// // H[i][j] = 1 + i + j (symmetric); H·S as the HVPs would compute it.
/// let p = coloring.pattern();
/// let mut hs = Mat::<f64>::zeros(7, coloring.num_colors());
/// for (c, seed) in coloring.seeds().iter().enumerate() {
///     for &j in seed {
///         for &i in p.col(j as usize) {
///             hs[(i as usize, c)] += (1 + i + j) as f64;
///         }
///     }
/// }
/// let values = coloring.decompress(hs.as_ref())?;
/// assert!(p.entries().zip(values).all(|((i, j), v)| v == (1 + i + j) as f64));
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct StarColoring {
    pattern: Arc<SparsityPattern>,
    coloring: Coloring,
    /// Per entry `(i, j)`: whether it is read as `(H·S)[i, color(j)]`
    /// (`true`) or, by symmetry, as `(H·S)[j, color(i)]`.
    read_in_row: Vec<bool>,
}

impl StarColoring {
    /// Star-colors a structurally symmetric pattern greedily in the given
    /// order. Vertices that no decompression reads through (no diagonal
    /// entry, hub of no star) are neutral.
    ///
    /// With [`Order::Saturation`] (the default) this also computes a
    /// distance-2 coloring (the column coloring of the pattern with its
    /// diagonal, which is a star coloring too) and keeps whichever has
    /// fewer colors: on the 5-point Laplacian the greedy star coloring
    /// takes 6 colors on most grid sizes and numberings in every order,
    /// the distance-2 coloring the optimal 5; on random patterns the star
    /// coloring is the smaller one.
    ///
    /// # Errors
    /// [`SparseError::NotSymmetric`] if the pattern is not square or not
    /// symmetric ([`SparsityPattern::symmetrize`] fixes a one-triangle
    /// pattern).
    pub fn new(pattern: impl Into<Arc<SparsityPattern>>, order: Order) -> Result<Self> {
        let pattern: Arc<SparsityPattern> = pattern.into();
        check_symmetric(&pattern)?;
        let (mut g, edge_of) = AdjGraph::symmetric(&pattern);
        let mut stars = star_coloring(&mut g, order);
        let diagonal: Vec<bool> = (0..pattern.ncols()).map(|v| pattern.contains(v, v)).collect();
        let full_diagonal = diagonal.iter().all(|&d| d);
        let edges = pattern
            .entries()
            .zip(&edge_of)
            .filter(|((i, j), _)| i > j)
            .map(|((i, j), &e)| (e as usize, i, j));
        let (coloring, hub_of_edge) = finish(&mut stars, diagonal, edges);
        let read_in_row = pattern
            .entries()
            .zip(&edge_of)
            .map(|((i, j), &e)| i == j || hub_of_edge[e as usize] as usize == j)
            .collect();
        let star = Self { pattern, coloring, read_in_row };
        if order == Order::Saturation {
            if let Some(d2) = Self::distance2(&star.pattern, full_diagonal) {
                if d2.num_colors() < star.num_colors() {
                    return Ok(d2);
                }
            }
        }
        Ok(star)
    }

    /// A distance-2 coloring of the adjacency graph, i.e. a column coloring
    /// of the pattern with its diagonal, in the saturation order: also a
    /// star coloring (no path on three vertices has two colors), read
    /// entirely through columns. `None` if adding the diagonal makes too
    /// many nonzeros.
    fn distance2(pattern: &Arc<SparsityPattern>, full_diagonal: bool) -> Option<Self> {
        let added;
        let with_diagonal = if full_diagonal {
            pattern.as_ref()
        } else {
            added = pattern.with_diagonal().ok()?;
            &added
        };
        // Symmetric: the pattern is its own transpose.
        let colors = distance2_coloring(with_diagonal, with_diagonal, Order::Saturation);
        // Vertices without entries are read through by nothing.
        let mut colors = colors.colors().to_vec();
        for (v, c) in colors.iter_mut().enumerate() {
            if pattern.col(v).is_empty() {
                *c = Coloring::NEUTRAL;
            }
        }
        let (pattern, read_in_row) = (pattern.clone(), vec![true; pattern.nnz()]);
        Some(Self { pattern, coloring: renumber(colors), read_in_row })
    }

    /// The Hessian pattern (`n × n`, symmetric).
    pub fn pattern(&self) -> &SparsityPattern {
        &self.pattern
    }

    /// The color of each column (= row).
    pub fn coloring(&self) -> &Coloring {
        &self.coloring
    }

    /// The number of colors, i.e. of Hessian-vector products.
    pub fn num_colors(&self) -> usize {
        self.coloring.num_colors()
    }

    /// The seeds: for each color, the indices set to one in the vector the
    /// HVP multiplies.
    pub fn seeds(&self) -> Seeds {
        self.coloring.seeds()
    }

    /// The values of `H`, aligned with the pattern's entries (both
    /// triangles), from the compressed `H·S` (`n × num_colors`, column `c` =
    /// the HVP with seed `c`).
    ///
    /// # Errors
    /// [`SparseError::ShapeMismatch`] if `hs` is not `n × num_colors`.
    pub fn decompress<T: Copy>(&self, hs: MatRef<'_, T>) -> Result<Vec<T>> {
        self.check(hs)?;
        Ok(gather(&self.pattern, |i, j, p| self.read(hs, i, j, p)))
    }

    /// [`decompress`](Self::decompress) into an existing buffer of `nnz`
    /// values.
    ///
    /// # Errors
    /// As for `decompress`, and if `values.len() != nnz`.
    pub fn decompress_into<T: Copy>(&self, hs: MatRef<'_, T>, values: &mut [T]) -> Result<()> {
        self.check(hs)?;
        gather_into(&self.pattern, values, |i, j, p| self.read(hs, i, j, p))
    }

    #[inline]
    fn read<T: Copy>(&self, hs: MatRef<'_, T>, i: usize, j: usize, p: usize) -> T {
        let colors = self.coloring.colors();
        if self.read_in_row[p] {
            hs[(i, colors[j] as usize)]
        } else {
            hs[(j, colors[i] as usize)]
        }
    }

    fn check<T>(&self, hs: MatRef<'_, T>) -> Result<()> {
        check_shape("compressed H·S", hs, (self.pattern.nrows(), self.num_colors()))
    }
}

/// Errors unless the pattern is square and structurally symmetric.
pub(crate) fn check_symmetric(p: &SparsityPattern) -> Result<()> {
    let asym = p.first_asymmetry();
    if p.nrows() == p.ncols() && asym.is_none() {
        return Ok(());
    }
    let detail =
        asym.map(|(i, j)| format!(" with ({i}, {j}) but not ({j}, {i})")).unwrap_or_default();
    Err(SparseError::NotSymmetric { nrows: p.nrows(), ncols: p.ncols(), detail })
}
