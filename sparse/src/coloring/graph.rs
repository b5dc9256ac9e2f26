//! Adjacency graphs with edge indices, for star coloring: the adjacency
//! graph of a symmetric pattern and the bipartite row/column graph of a
//! Jacobian pattern.

use super::order::{Graph, NONE};
use crate::pattern::{idx, Idx, SparsityPattern};

/// An undirected graph without self-loops, stored as adjacency lists in
/// which each neighbour carries the index of the (undirected) edge.
pub(crate) struct AdjGraph {
    ptr: Vec<usize>,
    nbr: Vec<Idx>,
    edge: Vec<Idx>,
    num_edges: usize,
}

impl AdjGraph {
    /// The adjacency graph of a structurally symmetric pattern: vertex `v`
    /// is row and column `v`, the diagonal is left out. Also returns, for
    /// each entry of the pattern, its edge index (`NONE` on the diagonal);
    /// `(i, j)` and `(j, i)` share one.
    pub(crate) fn symmetric(p: &SparsityPattern) -> (Self, Vec<Idx>) {
        let n = p.ncols();
        let rows = p.row_idx();
        let mut edge_of = vec![NONE; p.nnz()];
        // Column i's entries above the diagonal are the mirrors of the
        // entries below it, met in increasing column order: one cursor per
        // column finds each mirror without searching.
        let mut mirror: Vec<usize> = (0..n).map(|i| p.col_range(i).start).collect();
        let mut num_edges = 0;
        for j in 0..n {
            for q in p.col_range(j) {
                let i = rows[q] as usize;
                if i > j {
                    debug_assert_eq!(rows[mirror[i]] as usize, j);
                    edge_of[q] = idx(num_edges);
                    edge_of[mirror[i]] = idx(num_edges);
                    mirror[i] += 1;
                    num_edges += 1;
                }
            }
        }
        let mut g = Self::with_capacity(n, 2 * num_edges, num_edges);
        for j in 0..n {
            for q in p.col_range(j) {
                if rows[q] as usize != j {
                    g.nbr.push(rows[q]);
                    g.edge.push(edge_of[q]);
                }
            }
            g.ptr.push(g.nbr.len());
        }
        (g, edge_of)
    }

    /// The bipartite graph of an `m × n` pattern: vertices `0..n` are the
    /// columns, `n..n + m` the rows, and the edge of entry `(i, j)` joins
    /// `j` and `n + i`; its index is the entry's position in the pattern.
    pub(crate) fn bipartite(p: &SparsityPattern) -> Self {
        let n = p.ncols();
        let (t, position) = p.transpose_with_positions();
        let mut g = Self::with_capacity(n + p.nrows(), 2 * p.nnz(), p.nnz());
        for j in 0..n {
            for q in p.col_range(j) {
                g.nbr.push(idx(n + p.row_idx()[q] as usize));
                g.edge.push(idx(q));
            }
            g.ptr.push(g.nbr.len());
        }
        for i in 0..p.nrows() {
            for q in t.col_range(i) {
                g.nbr.push(t.row_idx()[q]);
                g.edge.push(position[q]);
            }
            g.ptr.push(g.nbr.len());
        }
        g
    }

    fn with_capacity(vertices: usize, adjacencies: usize, num_edges: usize) -> Self {
        let mut ptr = Vec::with_capacity(vertices + 1);
        ptr.push(0);
        Self {
            ptr,
            nbr: Vec::with_capacity(adjacencies),
            edge: Vec::with_capacity(adjacencies),
            num_edges,
        }
    }

    pub(crate) fn num_edges(&self) -> usize {
        self.num_edges
    }

    /// `(neighbour, edge index)` pairs of `v`.
    pub(crate) fn neighbors(&self, v: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let r = self.ptr[v]..self.ptr[v + 1];
        self.nbr[r.clone()].iter().zip(&self.edge[r]).map(|(&w, &e)| (w as usize, e as usize))
    }
}

impl Graph for AdjGraph {
    fn num_vertices(&self) -> usize {
        self.ptr.len() - 1
    }

    /// The number of walks of length 1 or 2 from each vertex, `deg(v) +
    /// Σ deg(w)` over its neighbours `w` (capped at `n − 1`): star coloring
    /// constrains vertices at distance 2, and this is the degree the column
    /// intersection graph of the pattern with its diagonal would give.
    fn saturation_degrees(&mut self) -> Vec<Idx> {
        let n = self.num_vertices();
        let deg = |v: usize| self.ptr[v + 1] - self.ptr[v];
        (0..n)
            .map(|v| {
                let two = self.neighbors(v).map(|(w, _)| deg(w)).sum::<usize>();
                idx((deg(v) + two).min(n.saturating_sub(1)))
            })
            .collect()
    }

    fn for_each_neighbor(&mut self, v: usize, f: impl FnMut(usize)) {
        self.nbr[self.ptr[v]..self.ptr[v + 1]].iter().map(|&w| w as usize).for_each(f);
    }
}
