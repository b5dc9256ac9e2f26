//! Acyclic coloring (symmetric matrices, decompression by substitution),
//! after Gebremedhin, Tarafdar, Manne, Pothen 2007, "New acyclic and star
//! coloring algorithms with application to computing Hessians", algorithm
//! 3.1 (the coloring, with a disjoint-set forest of the two-colored trees)
//! and section 4 (substitution along those trees).
//!
//! An acyclic coloring is a distance-1 coloring in which every cycle uses
//! at least three colors: the edges whose ends have colors `a` and `b` form
//! a forest, for every pair `a, b`. Every star coloring is acyclic, so the
//! fewest colors of an acyclic coloring are never more and often fewer
//! (greedily here: 4 instead of 5 on the 5-point Laplacian, `k + 1` instead
//! of `2k + 1` on a band, 2 instead of 3 on a tridiagonal pattern),
//! but its decompression is not a copy: in a two-colored tree, row `v` of
//! `H·S` at the other color sums `H[v, w]` over all tree neighbours `w` of
//! `v`, so the entries are recovered from the leaves inwards, each by
//! subtracting the ones already known.

use std::ops::Sub;
use std::sync::Arc;

use faer::MatRef;

use super::graph::AdjGraph;
use super::order::{Graph, Visit, NONE};
use super::star::check_symmetric;
use super::{check_shape, first_allowed, renumber, Coloring, Order, Seeds};
use crate::error::{Result, SparseError};
use crate::pattern::{idx, Idx, SparsityPattern};

/// A disjoint-set forest over edge indices (union by rank, path halving).
struct Forest {
    parent: Vec<Idx>,
    rank: Vec<u8>,
}

impl Forest {
    fn new(n: usize) -> Self {
        Self { parent: (0..n).map(idx).collect(), rank: vec![0; n] }
    }

    fn find(&mut self, mut e: usize) -> usize {
        while self.parent[e] as usize != e {
            let grand = self.parent[self.parent[e] as usize];
            self.parent[e] = grand;
            e = grand as usize;
        }
        e
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return;
        }
        let (hi, lo) = if self.rank[a] >= self.rank[b] { (a, b) } else { (b, a) };
        self.parent[lo] = idx(hi);
        if self.rank[hi] == self.rank[lo] {
            self.rank[hi] += 1;
        }
    }
}

/// Greedy acyclic coloring of `g` in the given order (GTMP 2007, alg. 3.1):
/// the colors, and the forest grouping the edges into two-colored trees.
fn acyclic_coloring(g: &mut AdjGraph, order: Order) -> (Vec<Idx>, Forest) {
    let n = g.num_vertices();
    let mut visit = Visit::new(g, order);
    let mut color = vec![NONE; n];
    let mut forbidden: Vec<Idx> = Vec::new();
    // Per color: the first neighbour of the current vertex met with that
    // color, as `(current vertex, edge to it)`.
    let mut first_neighbor: Vec<(Idx, Idx)> = Vec::new();
    // Per tree (indexed by its root edge): the first `(vertex being colored,
    // its neighbour in the tree)` that reached it.
    let mut first_visit = vec![(NONE, NONE); g.num_edges()];
    let mut forest = Forest::new(g.num_edges());
    while let Some(vi) = visit.next() {
        let v = idx(vi);
        for (w, _) in g.neighbors(vi) {
            if color[w] != NONE {
                forbidden[color[w] as usize] = v;
            }
        }
        // v next to w, which lies in a two-colored tree with x: taking x's
        // color would add v to that tree, closing a cycle if v also has
        // another neighbour in it.
        for (w, _) in g.neighbors(vi) {
            if color[w] == NONE {
                continue;
            }
            for (x, e_wx) in g.neighbors(w) {
                let cx = color[x];
                if cx == NONE || forbidden[cx as usize] == v {
                    continue;
                }
                let root = forest.find(e_wx);
                let (p, q) = first_visit[root];
                if p != v {
                    first_visit[root] = (v, idx(w));
                } else if q != idx(w) {
                    forbidden[cx as usize] = v;
                }
            }
        }
        let c = first_allowed(&mut forbidden, v);
        if first_neighbor.len() < forbidden.len() {
            first_neighbor.resize(forbidden.len(), (NONE, NONE));
        }
        color[vi] = c;
        // The trees v joins: the edges from v to two neighbours of one color
        // are in one tree (v's star), and so are v - w and w - x when x has
        // v's color.
        for (w, e_vw) in g.neighbors(vi) {
            let cw = color[w];
            if cw == NONE || w == vi {
                continue;
            }
            let (p, e) = first_neighbor[cw as usize];
            if p != v {
                first_neighbor[cw as usize] = (v, idx(e_vw));
            } else {
                forest.union(e_vw, e as usize);
            }
        }
        for (w, e_vw) in g.neighbors(vi) {
            if color[w] == NONE || w == vi {
                continue;
            }
            for (x, e_wx) in g.neighbors(w) {
                if x != vi && color[x] == c {
                    forest.union(e_vw, e_wx);
                }
            }
        }
        // Saturation counts the neighbours' colors. (Counting those within
        // distance 2, as star coloring does, gave 3 % fewer colors on random
        // patterns but 5 instead of 4 on the Laplacian from k = 100 on.)
        if let Some(sat) = visit.saturation() {
            for (w, _) in g.neighbors(vi) {
                sat.saw(w, c);
            }
        }
    }
    (color, forest)
}

/// One two-colored tree: its `(vertex, edge)` incidences sorted by vertex,
/// where each vertex's start (`first`), and every edge's ends.
struct Tree<'a> {
    incidences: &'a [(Idx, Idx)],
    first: &'a [usize],
    ends: &'a [(Idx, Idx)],
}

impl Tree<'_> {
    /// The incidences of `v`.
    fn of(&self, v: Idx) -> std::ops::Range<usize> {
        let from = self.first[v as usize];
        let len = self.incidences[from..].iter().take_while(|&&(u, _)| u == v).count();
        from..from + len
    }

    /// The end of `e` that is not `v`.
    fn other(&self, e: Idx, v: Idx) -> Idx {
        let (a, b) = self.ends[e as usize];
        if a == v {
            b
        } else {
            a
        }
    }
}

fn tree_len(incidences: &[(Idx, Idx)]) -> usize {
    incidences.len() / 2
}

/// Breadth-first searches of trees, reusing their buffers.
struct Search {
    parent_edge: Vec<Idx>,
    /// `reached[v] == stamp` once the current search has reached `v`.
    reached: Vec<u32>,
    stamp: u32,
    queue: Vec<Idx>,
}

impl Search {
    /// Searches `tree` from `root`, leaving the vertices in order of
    /// discovery in `queue` and each one's edge to its parent in
    /// `parent_edge`; returns the last vertex discovered (a farthest one).
    fn run(&mut self, tree: &Tree<'_>, root: Idx) -> Idx {
        if self.stamp == u32::MAX {
            self.reached.fill(0);
            self.stamp = 0;
        }
        self.stamp += 1;
        self.queue.clear();
        self.queue.push(root);
        self.parent_edge[root as usize] = NONE;
        self.reached[root as usize] = self.stamp;
        let mut head = 0;
        while head < self.queue.len() {
            let u = self.queue[head];
            head += 1;
            for k in tree.of(u) {
                let e = tree.incidences[k].1;
                let w = tree.other(e, u);
                // (A tree never reaches a vertex twice; the check keeps the
                // search finite regardless.)
                if self.reached[w as usize] != self.stamp {
                    self.reached[w as usize] = self.stamp;
                    self.parent_edge[w as usize] = e;
                    self.queue.push(w);
                }
            }
        }
        self.queue[self.queue.len() - 1]
    }
}

/// One substitution: the entry of edge `edge` between `vertex` and its
/// parent in a two-colored tree is `(H·S)[vertex, color(parent)]` minus the
/// entries between `vertex` and its children, listed in
/// `children[child_ptr[k]..child_ptr[k + 1]]`.
#[derive(Debug, Clone, Copy)]
struct Step {
    vertex: Idx,
    parent: Idx,
    edge: Idx,
}

/// An acyclic coloring of a symmetric (Hessian) pattern: one Hessian-vector
/// product per color, then [`decompress`](Self::decompress), which reads
/// the diagonal directly and recovers every other entry by substitution
/// along the two-colored trees.
///
/// Fewer colors than [`StarColoring`](super::StarColoring) on many patterns
/// (the crate's README has the table), at the price of arithmetic in the
/// decompression: each off-diagonal entry is one entry of `H·S` minus
/// entries recovered before it, so rounding errors of `H·S` and of those
/// subtractions add up along the trees (see [`decompress`](Self::decompress)).
///
/// ```
/// use anvil_sparse::{gallery, AcyclicColoring, Order};
/// use faer::Mat;
/// // A tridiagonal Hessian in 2 HVPs (star coloring needs 3).
/// let coloring = AcyclicColoring::new(gallery::tridiagonal(7)?, Order::default())?;
/// assert_eq!(coloring.num_colors(), 2);
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
/// // Small integers: every sum and difference here is exact.
/// assert!(p.entries().zip(values).all(|((i, j), v)| v == (1 + i + j) as f64));
/// # Ok::<(), anvil_sparse::SparseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct AcyclicColoring {
    pattern: Arc<SparsityPattern>,
    coloring: Coloring,
    /// The two positions in the pattern of each edge's entries.
    edge_pos: Vec<[Idx; 2]>,
    /// `(position, vertex)` of each diagonal entry.
    diagonal: Vec<(Idx, Idx)>,
    /// The substitutions, children before parents in every tree.
    steps: Vec<Step>,
    child_ptr: Vec<usize>,
    /// Edges to each step's children.
    children: Vec<Idx>,
}

impl AcyclicColoring {
    /// Acyclic-colors a structurally symmetric pattern greedily in the
    /// given order, and lays out the substitutions along its two-colored
    /// trees. Vertices with no entry are neutral; every other vertex is
    /// colored (each is read through by its trees).
    ///
    /// # Errors
    /// [`SparseError::NotSymmetric`] if the pattern is not square or not
    /// symmetric ([`SparsityPattern::symmetrize`] fixes a one-triangle
    /// pattern).
    pub fn new(pattern: impl Into<Arc<SparsityPattern>>, order: Order) -> Result<Self> {
        let pattern: Arc<SparsityPattern> = pattern.into();
        check_symmetric(&pattern)?;
        let n = pattern.ncols();
        let (mut g, edge_of) = AdjGraph::symmetric(&pattern);
        let (mut color, mut forest) = acyclic_coloring(&mut g, order);
        for (v, c) in color.iter_mut().enumerate() {
            if pattern.col(v).is_empty() {
                *c = Coloring::NEUTRAL;
            }
        }
        let coloring = renumber(color);

        // Each edge's two positions and its ends; the diagonal.
        let num_edges = g.num_edges();
        let mut edge_pos = vec![[NONE; 2]; num_edges];
        let mut ends = vec![(NONE, NONE); num_edges];
        let mut diagonal = Vec::new();
        for (p, ((i, j), &e)) in pattern.entries().zip(&edge_of).enumerate() {
            if i == j {
                diagonal.push((idx(p), idx(i)));
            } else {
                let side = usize::from(i < j);
                edge_pos[e as usize][side] = idx(p);
                ends[e as usize] = (idx(i.min(j)), idx(i.max(j)));
            }
        }

        // Group the edges by tree (counting sort on the root edge).
        let root: Vec<usize> = (0..num_edges).map(|e| forest.find(e)).collect();
        let mut start = vec![0usize; num_edges + 1];
        for &r in &root {
            start[r + 1] += 1;
        }
        for k in 1..start.len() {
            start[k] += start[k - 1];
        }
        let mut next = start.clone();
        let mut by_tree = vec![0 as Idx; num_edges];
        for (e, &r) in root.iter().enumerate() {
            by_tree[next[r]] = idx(e);
            next[r] += 1;
        }

        // Per tree: its (vertex, edge) incidences sorted by vertex, then a
        // breadth-first search from its center (found by two searches: the
        // vertex farthest from any, the path to the vertex farthest from
        // that, its middle), which halves the longest substitution chain
        // compared with starting at a leaf; the steps are the vertices in
        // reverse order of discovery (children before parents).
        let mut steps = Vec::with_capacity(num_edges);
        let mut child_ptr = Vec::with_capacity(num_edges + 1);
        child_ptr.push(0);
        let mut children = Vec::with_capacity(num_edges);
        let mut incidences: Vec<(Idx, Idx)> = Vec::new();
        let mut first = vec![0usize; n]; // start of a vertex's incidences
        let mut search =
            Search { parent_edge: vec![NONE; n], reached: vec![0; n], stamp: 0, queue: Vec::new() };
        for t in 0..num_edges {
            let tree = &by_tree[start[t]..start[t + 1]];
            if tree.is_empty() {
                continue;
            }
            incidences.clear();
            for &e in tree {
                let (a, b) = ends[e as usize];
                incidences.push((a, e));
                incidences.push((b, e));
            }
            incidences.sort_unstable();
            for (k, &(v, _)) in incidences.iter().enumerate().rev() {
                first[v as usize] = k;
            }
            let tree = Tree { incidences: &incidences, first: &first, ends: &ends };
            let far = search.run(&tree, incidences[0].0);
            let other_end = search.run(&tree, far);
            let mut path = vec![other_end];
            while let Some(&v) = path.last() {
                match search.parent_edge[v as usize] {
                    NONE => break,
                    e => path.push(tree.other(e, v)),
                }
            }
            search.run(&tree, path[path.len() / 2]);
            debug_assert_eq!(search.queue.len(), tree_len(&incidences) + 1, "not a tree");
            let queue = &search.queue;
            for &v in queue[1..].iter().rev() {
                let edge = search.parent_edge[v as usize];
                steps.push(Step { vertex: v, parent: tree.other(edge, v), edge });
                for k in tree.of(v) {
                    let e = incidences[k].1;
                    if e != edge {
                        children.push(e);
                    }
                }
                child_ptr.push(children.len());
            }
        }
        Ok(Self { pattern, coloring, edge_pos, diagonal, steps, child_ptr, children })
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

    /// The number of entries recovered by substitution along the longest
    /// chain of a two-colored tree: an entry's rounding error collects the
    /// errors of up to this many levels below it.
    pub fn max_substitution_depth(&self) -> usize {
        // Steps come children first; a step's depth is one more than its
        // deepest child's.
        let mut depth_of_edge = vec![0usize; self.edge_pos.len()];
        let mut max = 0;
        for (k, s) in self.steps.iter().enumerate() {
            let kids = &self.children[self.child_ptr[k]..self.child_ptr[k + 1]];
            let d = 1 + kids.iter().map(|&e| depth_of_edge[e as usize]).max().unwrap_or(0);
            depth_of_edge[s.edge as usize] = d;
            max = max.max(d);
        }
        max
    }

    /// The values of `H`, aligned with the pattern's entries (both
    /// triangles), from the compressed `H·S` (`n × num_colors`, column `c` =
    /// the HVP with seed `c`).
    ///
    /// Diagonal entries are copied. An off-diagonal entry `H[v, p]`, `p`
    /// the parent of `v` in their two-colored tree, is `(H·S)[v, color(p)]`
    /// minus the entries between `v` and its children, recovered before it.
    /// In floating point its error is the rounding error of that entry of
    /// `H·S` plus the errors of the subtracted entries, so it grows with the
    /// tree's depth ([`max_substitution_depth`](Self::max_substitution_depth))
    /// and with cancellation; with `H·S` accurate to `ε · Σ_k |H[v, k]|` per
    /// entry, each entry is within `depth · (1 + Δ) · ε · max_v Σ_k |H[v, k]|`
    /// (`Δ` the maximal degree) of the exact value.
    ///
    /// # Errors
    /// [`SparseError::ShapeMismatch`] if `hs` is not `n × num_colors`.
    pub fn decompress<T: Copy + Sub<Output = T>>(&self, hs: MatRef<'_, T>) -> Result<Vec<T>> {
        self.check(hs)?;
        if hs.nrows() == 0 || hs.ncols() == 0 {
            return Ok(Vec::new()); // no colors: no entries either
        }
        let mut out = vec![hs[(0, 0)]; self.pattern.nnz()];
        self.fill(hs, &mut out);
        Ok(out)
    }

    /// [`decompress`](Self::decompress) into an existing buffer of `nnz`
    /// values; allocates nothing.
    ///
    /// # Errors
    /// As for `decompress`, and if `values.len() != nnz`.
    pub fn decompress_into<T: Copy + Sub<Output = T>>(
        &self,
        hs: MatRef<'_, T>,
        values: &mut [T],
    ) -> Result<()> {
        self.check(hs)?;
        if values.len() != self.pattern.nnz() {
            return Err(SparseError::ShapeMismatch {
                what: "output values",
                expected: (self.pattern.nnz(), 1),
                found: (values.len(), 1),
            });
        }
        self.fill(hs, values);
        Ok(())
    }

    fn fill<T: Copy + Sub<Output = T>>(&self, hs: MatRef<'_, T>, out: &mut [T]) {
        let colors = self.coloring.colors();
        for &(p, v) in &self.diagonal {
            out[p as usize] = hs[(v as usize, colors[v as usize] as usize)];
        }
        for (k, s) in self.steps.iter().enumerate() {
            let mut value = hs[(s.vertex as usize, colors[s.parent as usize] as usize)];
            for &e in &self.children[self.child_ptr[k]..self.child_ptr[k + 1]] {
                value = value - out[self.edge_pos[e as usize][0] as usize];
            }
            let [lower, upper] = self.edge_pos[s.edge as usize];
            out[lower as usize] = value;
            out[upper as usize] = value;
        }
    }

    fn check<T>(&self, hs: MatRef<'_, T>) -> Result<()> {
        check_shape("compressed H·S", hs, (self.pattern.nrows(), self.num_colors()))
    }
}
