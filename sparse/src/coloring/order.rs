//! Vertex orders for the greedy colorings.
//!
//! Every coloring here is greedy: vertices are colored one after the other
//! with the smallest color their already-colored neighbourhood allows, so the
//! order decides the number of colors. The orders are the classic ones of
//! ColPack (Gebremedhin, Nguyen, Patwary, Pothen 2013, section 5), computed
//! on the graph the coloring works on: the column intersection graph
//! (distance 2 in the bipartite graph) for column and row coloring, the
//! adjacency graph for star and bidirectional coloring.

use crate::pattern::{idx, Idx, SparsityPattern};

/// The order in which a greedy coloring visits vertices.
///
/// Ties are broken by vertex index. [`Natural`](Order::Natural) and
/// [`LargestFirst`](Order::LargestFirst) are static (one pass over the
/// graph); the three dynamic orders update a degree per vertex as vertices
/// are ordered, and on the column intersection graph of a `10^6`-unknown
/// 2-D stencil cost 2-5 times the coloring itself (see `benches/coloring.rs`).
///
/// What they give (the crate's README has the table): on banded patterns
/// all but `DynamicLargestFirst` are optimal (`2k + 1`); on the 5-point
/// Laplacian column coloring takes 7 colors in every order but
/// `DynamicLargestFirst` (8), against an optimum of 5, and star coloring 5
/// with `Natural`, `LargestFirst` and `IncidenceDegree` (6 with
/// `SmallestLast`); summed over 50 random patterns `SmallestLast` needs the
/// fewest colors (column 562, row 359, star 678), `LargestFirst` 559, 364
/// and 749.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// Vertices in index order `0, 1, …`.
    Natural,
    /// By decreasing degree (Welsh–Powell). The default: optimal on every
    /// structured pattern of the tests where any order is, within 2 % of the
    /// best order on random column and row colorings (10 % on random star
    /// colorings, where `SmallestLast` is better), and static, hence about
    /// twice as fast as the dynamic orders at `10^6` unknowns.
    #[default]
    LargestFirst,
    /// Reverse of the order in which repeatedly removing a vertex of smallest
    /// remaining degree empties the graph (Matula–Beck); distance-1
    /// colorings then use at most `degeneracy + 1` colors.
    SmallestLast,
    /// Next is the vertex with the most already-ordered neighbours.
    IncidenceDegree,
    /// Next is the vertex with the most not-yet-ordered neighbours.
    DynamicLargestFirst,
}

impl Order {
    /// Every order, for trying them all and keeping the best coloring.
    pub const ALL: [Order; 5] = [
        Order::Natural,
        Order::LargestFirst,
        Order::SmallestLast,
        Order::IncidenceDegree,
        Order::DynamicLargestFirst,
    ];
}

/// Marks a vertex as absent from lists and stamps as unused.
pub(crate) const NONE: Idx = Idx::MAX;

/// A graph whose neighbourhoods the orders can enumerate.
pub(crate) trait Graph {
    fn num_vertices(&self) -> usize;
    /// Calls `f` once for each neighbour of `v` other than `v`.
    fn for_each_neighbor(&mut self, v: usize, f: impl FnMut(usize));
}

/// The column intersection graph of a pattern: columns are adjacent when
/// they share a row (distance 2 in the bipartite row/column graph).
pub(crate) struct ColumnIntersection<'a> {
    cols: &'a SparsityPattern,
    rows: &'a SparsityPattern,
    /// `seen[w] == stamp` once `w` has been reported in the current call. A
    /// fresh stamp per call (not the vertex: one vertex is asked about more
    /// than once) keeps earlier calls from hiding neighbours.
    seen: Vec<u32>,
    stamp: u32,
}

impl<'a> ColumnIntersection<'a> {
    /// `rows` must be `cols.transpose()`.
    pub(crate) fn new(cols: &'a SparsityPattern, rows: &'a SparsityPattern) -> Self {
        Self { cols, rows, seen: vec![0; cols.ncols()], stamp: 0 }
    }
}

impl Graph for ColumnIntersection<'_> {
    fn num_vertices(&self) -> usize {
        self.cols.ncols()
    }

    fn for_each_neighbor(&mut self, v: usize, mut f: impl FnMut(usize)) {
        if self.stamp == u32::MAX {
            self.seen.fill(0);
            self.stamp = 0;
        }
        self.stamp += 1;
        let stamp = self.stamp;
        self.seen[v] = stamp;
        for &r in self.cols.col(v) {
            for &w in self.rows.col(r as usize) {
                if self.seen[w as usize] != stamp {
                    self.seen[w as usize] = stamp;
                    f(w as usize);
                }
            }
        }
    }
}

/// The vertices of `g` in the given order.
pub(crate) fn vertex_order(g: &mut impl Graph, order: Order) -> Vec<Idx> {
    match order {
        Order::Natural => (0..g.num_vertices()).map(idx).collect(),
        Order::LargestFirst => largest_first(g),
        Order::SmallestLast => dynamic(g, Rule::SmallestLast),
        Order::IncidenceDegree => dynamic(g, Rule::IncidenceDegree),
        Order::DynamicLargestFirst => dynamic(g, Rule::DynamicLargestFirst),
    }
}

fn degrees(g: &mut impl Graph) -> Vec<Idx> {
    (0..g.num_vertices())
        .map(|v| {
            let mut d = 0;
            g.for_each_neighbor(v, |_| d += 1);
            d
        })
        .collect()
}

/// Counting sort by decreasing degree, stable in the vertex index.
fn largest_first(g: &mut impl Graph) -> Vec<Idx> {
    let deg = degrees(g);
    let max = deg.iter().copied().max().unwrap_or(0) as usize;
    let mut start = vec![0usize; max + 2];
    for &d in &deg {
        start[max - d as usize + 1] += 1;
    }
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut out = vec![0; deg.len()];
    for (v, &d) in deg.iter().enumerate() {
        let slot = &mut start[max - d as usize];
        out[*slot] = idx(v);
        *slot += 1;
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    SmallestLast,
    IncidenceDegree,
    DynamicLargestFirst,
}

/// The three dynamic-degree orders share one bucket queue: a vertex's key
/// changes by one each time a neighbour is ordered.
fn dynamic(g: &mut impl Graph, kind: Rule) -> Vec<Idx> {
    let n = g.num_vertices();
    // IncidenceDegree counts ordered neighbours (starts at 0, grows, so the
    // degrees are not needed); the others count unordered ones (start at the
    // degree, shrink).
    let (init, step): (Vec<Idx>, i64) = match kind {
        Rule::IncidenceDegree => (vec![0; n], 1),
        _ => (degrees(g), -1),
    };
    let max = init.iter().copied().max().unwrap_or(0) as usize;
    let pick_max = kind != Rule::SmallestLast;
    let mut q = BucketQueue::new(&init, max);
    let mut out = vec![0; n];
    // The cursor bounds the extreme key from the side it is scanned from.
    let mut cursor = if pick_max { init.iter().copied().max().unwrap_or(0) as usize } else { 0 };
    for k in 0..n {
        let v = q.pop_extreme(&mut cursor, pick_max);
        // Smallest-last fills the order from the back.
        let slot = if kind == Rule::SmallestLast { n - 1 - k } else { k };
        out[slot] = idx(v);
        g.for_each_neighbor(v, |w| {
            if q.contains(w) {
                let d = q.key[w] as i64 + step;
                q.move_to(w, d as usize);
                cursor = if pick_max { cursor.max(d as usize) } else { cursor.min(d as usize) };
            }
        });
    }
    out
}

/// Vertices in doubly linked lists, one list per key.
struct BucketQueue {
    key: Vec<Idx>,
    head: Vec<Idx>,
    next: Vec<Idx>,
    prev: Vec<Idx>,
    /// Removed vertices have `present[v] == false`.
    present: Vec<bool>,
}

impl BucketQueue {
    fn new(keys: &[Idx], max: usize) -> Self {
        let n = keys.len();
        let mut q = Self {
            key: keys.to_vec(),
            head: vec![NONE; max + 1],
            next: vec![NONE; n],
            prev: vec![NONE; n],
            present: vec![true; n],
        };
        // Pushing in reverse leaves each list in increasing vertex order.
        for v in (0..n).rev() {
            q.push_front(v);
        }
        q
    }

    fn contains(&self, v: usize) -> bool {
        self.present[v]
    }

    fn push_front(&mut self, v: usize) {
        let k = self.key[v] as usize;
        let h = self.head[k];
        self.next[v] = h;
        self.prev[v] = NONE;
        if h != NONE {
            self.prev[h as usize] = idx(v);
        }
        self.head[k] = idx(v);
    }

    fn unlink(&mut self, v: usize) {
        let (p, n) = (self.prev[v], self.next[v]);
        if p == NONE {
            self.head[self.key[v] as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
    }

    fn move_to(&mut self, v: usize, key: usize) {
        if key >= self.head.len() {
            self.head.resize(key + 1, NONE);
        }
        self.unlink(v);
        self.key[v] = idx(key);
        self.push_front(v);
    }

    /// Removes and returns a vertex with the largest (`pick_max`) or smallest
    /// key, scanning from `cursor`, which must bound the extreme key.
    fn pop_extreme(&mut self, cursor: &mut usize, pick_max: bool) -> usize {
        while self.head[*cursor] == NONE {
            if pick_max {
                *cursor -= 1;
            } else {
                *cursor += 1;
            }
        }
        let v = self.head[*cursor] as usize;
        self.unlink(v);
        self.present[v] = false;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path 0 - 1 - 2 - 3 plus an isolated vertex 4 and a pendant 5 on 1.
    struct Small(Vec<Vec<usize>>);
    impl Graph for Small {
        fn num_vertices(&self) -> usize {
            self.0.len()
        }
        fn for_each_neighbor(&mut self, v: usize, f: impl FnMut(usize)) {
            self.0[v].iter().copied().for_each(f);
        }
    }
    fn small() -> Small {
        Small(vec![vec![1], vec![0, 2, 5], vec![1, 3], vec![2], vec![], vec![1]])
    }

    #[test]
    fn orders_are_permutations() {
        for order in Order::ALL {
            let mut o = vertex_order(&mut small(), order);
            o.sort_unstable();
            assert_eq!(o, [0, 1, 2, 3, 4, 5], "{order:?}");
        }
    }

    #[test]
    fn orders_on_a_small_graph() {
        assert_eq!(vertex_order(&mut small(), Order::LargestFirst), [1, 2, 0, 3, 5, 4]);
        // Removal by smallest remaining degree: 4, 0, 3, 2, 1, 5; reversed.
        assert_eq!(vertex_order(&mut small(), Order::SmallestLast), [5, 1, 2, 3, 0, 4]);
        assert_eq!(vertex_order(&mut small(), Order::DynamicLargestFirst), [1, 2, 3, 5, 0, 4]);
        assert_eq!(vertex_order(&mut small(), Order::IncidenceDegree), [0, 1, 5, 2, 3, 4]);
    }

    #[test]
    fn column_intersection_neighbours() {
        // Columns 0 and 1 share row 0, columns 1 and 2 share row 1.
        let p = SparsityPattern::from_entries(2, 3, [(0, 0), (0, 1), (1, 1), (1, 2)]).unwrap();
        let t = p.transpose();
        let mut g = ColumnIntersection::new(&p, &t);
        let mut nb = Vec::new();
        g.for_each_neighbor(1, |w| nb.push(w));
        nb.sort_unstable();
        assert_eq!(nb, [0, 2]);
        assert_eq!(degrees(&mut g), [1, 2, 1]);
    }
}
