//! Vertex orders for the greedy colorings.
//!
//! Every coloring here is greedy: vertices are colored one after the other
//! with the smallest color their already-colored neighbourhood allows, so the
//! order decides the number of colors. The static and degree-based orders
//! are the classic ones of ColPack (Gebremedhin, Nguyen, Patwary, Pothen
//! 2013, section 5), computed on the graph the coloring works on: the column
//! intersection graph (distance 2 in the bipartite graph) for column and row
//! coloring, the adjacency graph for star and bidirectional coloring. The
//! default, [`Order::Saturation`] (DSATUR), picks each next vertex from the
//! colors given so far.

use crate::pattern::{idx, Idx, SparsityPattern};

/// The order in which a greedy coloring visits vertices.
///
/// [`Natural`](Order::Natural) and [`LargestFirst`](Order::LargestFirst)
/// are static (one pass over the graph); the three dynamic-degree orders
/// update a degree per vertex as vertices are ordered; [`Saturation`]
/// (the default) chooses each vertex as the coloring goes. Ties are broken
/// by vertex index.
///
/// What they give (the crate's README has the tables): on banded patterns
/// all but `DynamicLargestFirst` are optimal (`2k + 1`). On the 5-point
/// Laplacian column and row coloring take 7 colors in every static or
/// dynamic-degree order (8 with `DynamicLargestFirst`) and the optimal 5
/// with `Saturation`; star coloring takes 5 with `Saturation`, and with
/// `Natural`, `LargestFirst` or `IncidenceDegree` 5 on even and 6 on odd
/// grid sizes. Summed over 50 random patterns `Saturation` needs the fewest
/// colors (column 537, row 337, star 655, bidirectional 336), against 559,
/// 364, 749 and 363 for `LargestFirst` and 562, 359, 678 and 359 for
/// `SmallestLast`.
///
/// [`Saturation`]: Order::Saturation
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// Vertices in index order `0, 1, …`.
    Natural,
    /// By decreasing degree (Welsh–Powell).
    LargestFirst,
    /// Reverse of the order in which repeatedly removing a vertex of smallest
    /// remaining degree empties the graph (Matula–Beck); distance-1
    /// colorings then use at most `degeneracy + 1` colors.
    SmallestLast,
    /// Next is the vertex with the most already-ordered neighbours.
    IncidenceDegree,
    /// Next is the vertex with the most not-yet-ordered neighbours.
    DynamicLargestFirst,
    /// DSATUR (Brélaz 1979), the default: next is an uncolored vertex whose
    /// colored neighbours show the most distinct colors (its *saturation*),
    /// ties broken by the larger degree, then by the smaller index.
    ///
    /// Coloring first the vertices whose choice is most constrained (often
    /// forced) and, among those, interior vertices of a mesh before its
    /// boundary, whose few constraints would otherwise let the smallest free
    /// color start a pattern the interior cannot continue, finds the optimal
    /// 5 colors of the 5-point Laplacian, where every static order takes 7:
    /// checked for every `k × k` grid with `5 ≤ k ≤ 90`, in the natural
    /// numbering and three random renumberings each, and at `k = 100, 316,
    /// 1000` (see `tests/known_patterns.rs`). The index tie-break makes the
    /// coloring sweep a mesh in its numbering, which keeps it fast (see
    /// below).
    ///
    /// Details:
    /// * the "degree" of a column in column coloring is `Σ (|row| − 1)`
    ///   over its rows, an upper bound counting shared columns with
    ///   multiplicity that costs one pass over the pattern; in star and
    ///   bidirectional coloring, whose constraints reach distance 2, the
    ///   saturation counts the colors within distance 2 and the degree is
    ///   the number of walks of length 1 or 2; acyclic coloring counts the
    ///   neighbours' colors (4 colors instead of 5 on large grids);
    /// * colors from 64 on are not counted in the saturation, which only
    ///   changes the order, never the validity;
    /// * star coloring in this order also tries a distance-2 coloring (also
    ///   a star coloring) and keeps whichever has fewer colors.
    ///
    /// Cost at `10^6` unknowns (release, fastest of 5 on the shared 2-core
    /// machine at a load of 0.9; see the README): column coloring of the
    /// 1000 × 1000 Laplacian 72 ms (`Natural` 39 ms, `LargestFirst` 65 ms),
    /// star coloring 0.37 s (`LargestFirst` 0.11 s).
    #[default]
    Saturation,
}

impl Order {
    /// Every order, for trying them all and keeping the best coloring.
    pub const ALL: [Order; 6] = [
        Order::Natural,
        Order::LargestFirst,
        Order::SmallestLast,
        Order::IncidenceDegree,
        Order::DynamicLargestFirst,
        Order::Saturation,
    ];
}

/// Marks a vertex as absent from lists and stamps as unused.
pub(crate) const NONE: Idx = Idx::MAX;

/// A graph whose neighbourhoods the orders can enumerate.
pub(crate) trait Graph {
    fn num_vertices(&self) -> usize;
    /// Calls `f` once for each neighbour of `v` other than `v`.
    fn for_each_neighbor(&mut self, v: usize, f: impl FnMut(usize));
    /// The degrees [`Order::Saturation`] breaks ties with: by default the
    /// degrees.
    fn saturation_degrees(&mut self) -> Vec<Idx>
    where
        Self: Sized,
    {
        degrees(self)
    }
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

    /// Column `v` meets `Σ (|row r| − 1)` other columns counted with
    /// multiplicity over its rows `r`: an upper bound on its degree
    /// (capped at `n − 1`, like the degree) that costs one pass over the
    /// pattern instead of an enumeration of every neighbourhood.
    fn saturation_degrees(&mut self) -> Vec<Idx> {
        let max = self.cols.ncols().saturating_sub(1);
        let row_len = |r: Idx| self.rows.col_range(r as usize).len() - 1;
        (0..self.cols.ncols())
            .map(|v| idx(self.cols.col(v).iter().map(|&r| row_len(r)).sum::<usize>().min(max)))
            .collect()
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

/// The vertices in the order a greedy coloring visits them: computed
/// beforehand for every order but [`Order::Saturation`], chosen vertex by
/// vertex from the colors given so far for that one.
pub(crate) enum Visit {
    Fixed(std::vec::IntoIter<Idx>),
    Saturation(Saturation),
}

impl Visit {
    pub(crate) fn new(g: &mut impl Graph, order: Order) -> Self {
        let fixed = match order {
            Order::Natural => (0..g.num_vertices()).map(idx).collect(),
            Order::LargestFirst => largest_first(g),
            Order::SmallestLast => dynamic(g, Rule::SmallestLast),
            Order::IncidenceDegree => dynamic(g, Rule::IncidenceDegree),
            Order::DynamicLargestFirst => dynamic(g, Rule::DynamicLargestFirst),
            Order::Saturation => return Self::Saturation(Saturation::new(&g.saturation_degrees())),
        };
        Self::Fixed(fixed.into_iter())
    }

    /// The next vertex to color; every vertex comes exactly once.
    #[inline]
    pub(crate) fn next(&mut self) -> Option<usize> {
        match self {
            Self::Fixed(it) => it.next().map(|v| v as usize),
            Self::Saturation(s) => s.pop(),
        }
    }

    /// The saturation queue, to be told each new color with
    /// [`Saturation::saw`]; `None` for the orders fixed beforehand.
    #[inline]
    pub(crate) fn saturation(&mut self) -> Option<&mut Saturation> {
        match self {
            Self::Fixed(_) => None,
            Self::Saturation(s) => Some(s),
        }
    }

    /// For the saturation order, the smallest color below 64 that no
    /// colored neighbour of the vertex just returned by `next` has, if there
    /// is one: in a distance-1 coloring of the graph the order was built
    /// on, the greedy color, found with no scan.
    #[inline]
    pub(crate) fn free_color(&self) -> Option<Idx> {
        match self {
            Self::Fixed(_) => None,
            Self::Saturation(s) => s.free,
        }
    }
}

/// The number of degree levels the saturation order tells apart; beyond it
/// degrees are merged into coarser levels. A graph needs about
/// `MAX_LEVELS² / 2` edges to have that many distinct degrees.
const MAX_LEVELS: usize = 1024;

/// Saturation levels: 0 to 64 colors seen.
const SATURATION_LEVELS: usize = 65;

/// A vertex's place in the saturation queue.
#[derive(Clone, Copy)]
struct Link {
    /// `saturation · levels + degree level`.
    key: Idx,
    next: Idx,
    prev: Idx,
}

/// How many places an insertion into a list looks for its place in index
/// order, from each end (beyond it, the list is left slightly out of order,
/// which only affects ties).
const INSERTION_WALK: usize = 8;

/// The DSATUR queue: vertices in doubly linked lists, one per key
/// `saturation · levels + degree level`, each kept in increasing vertex
/// order, so that the next vertex is the head of the highest nonempty list;
/// a new color seen moves a vertex up by `levels`.
///
/// Index order among equals matters for speed, not for the colors (see
/// `tests/known_patterns.rs`, which also renumbers grids at random): it makes
/// the coloring sweep a mesh in its numbering (the rows of a 2-D grid one
/// after the other) and read the pattern nearly sequentially. Taking the
/// most recently saturated vertex first, which needs no search, leads the
/// coloring of a 1000 × 1000 grid along strips across its rows, and made it
/// 1.6 times slower through cache misses. Inserting from both ends finds
/// the place in at most 4 steps for all but a handful of the `5 · 10^6`
/// insertions there.
pub(crate) struct Saturation {
    /// Per vertex, the colors below 64 seen on colored neighbours; all
    /// ones once the vertex is colored, so that updates skip it. Apart from
    /// the links: most updates read this only.
    seen: Vec<u64>,
    link: Vec<Link>,
    head: Vec<Idx>,
    tail: Vec<Idx>,
    levels: Idx,
    /// Bounds the largest nonempty key from above.
    cursor: usize,
    remaining: usize,
    /// What [`Visit::free_color`] returns for the vertex last popped.
    free: Option<Idx>,
}

impl Saturation {
    /// A queue over vertices of the given degrees, none colored.
    pub(crate) fn new(degree: &[Idx]) -> Self {
        // Degree levels: the rank of each distinct degree, coarsened to at
        // most MAX_LEVELS.
        let max = degree.iter().copied().max().unwrap_or(0) as usize;
        let mut rank = vec![0usize; max + 1];
        for &d in degree {
            rank[d as usize] = 1;
        }
        let mut distinct = 0;
        for r in rank.iter_mut() {
            let present = *r;
            *r = distinct;
            distinct += present;
        }
        let levels = distinct.clamp(1, MAX_LEVELS);
        let link = Link { key: 0, next: NONE, prev: NONE };
        let mut q = Self {
            seen: vec![0; degree.len()],
            link: vec![link; degree.len()],
            head: vec![NONE; SATURATION_LEVELS * levels],
            tail: vec![NONE; SATURATION_LEVELS * levels],
            levels: idx(levels),
            cursor: levels - 1,
            remaining: degree.len(),
            free: None,
        };
        for (v, &d) in degree.iter().enumerate() {
            q.link[v].key = idx(rank[d as usize] * levels / distinct.max(1));
            q.insert(v);
        }
        q
    }

    /// Links `v` into the list of its key at its place in index order,
    /// searched from both ends at once for at most [`INSERTION_WALK`] steps
    /// each (then `v` goes where the search from the tail stopped).
    #[inline]
    fn insert(&mut self, v: usize) {
        let k = self.link[v].key as usize;
        let vi = idx(v);
        // Insert between `after` and `before`: from the tail, `after`
        // steps back while it is larger than v; from the head, `before`
        // steps forward while it is smaller.
        let (mut after, mut before) = (self.tail[k], self.head[k]);
        let mut steps = 0usize;
        let (after, before) = loop {
            if after == NONE || after < vi {
                let next =
                    if after == NONE { self.head[k] } else { self.link[after as usize].next };
                break (after, next);
            }
            if before == NONE || before > vi {
                let prev =
                    if before == NONE { self.tail[k] } else { self.link[before as usize].prev };
                break (prev, before);
            }
            steps += 1;
            if steps == INSERTION_WALK {
                break (after, self.link[after as usize].next);
            }
            after = self.link[after as usize].prev;
            before = self.link[before as usize].next;
        };
        self.link[v].prev = after;
        self.link[v].next = before;
        if after == NONE {
            self.head[k] = vi;
        } else {
            self.link[after as usize].next = vi;
        }
        if before == NONE {
            self.tail[k] = vi;
        } else {
            self.link[before as usize].prev = vi;
        }
    }

    #[inline]
    fn unlink(&mut self, v: usize) {
        let Link { prev, next, key } = self.link[v];
        if prev == NONE {
            self.head[key as usize] = next;
        } else {
            self.link[prev as usize].next = next;
        }
        if next == NONE {
            self.tail[key as usize] = prev;
        } else {
            self.link[next as usize].prev = prev;
        }
    }

    fn pop(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        while self.head[self.cursor] == NONE {
            self.cursor -= 1;
        }
        let v = self.head[self.cursor] as usize;
        self.unlink(v);
        let free = !self.seen[v];
        self.free = (free != 0).then(|| free.trailing_zeros());
        self.seen[v] = u64::MAX;
        Some(v)
    }

    /// Records that a neighbour of `w` (any vertex; colored ones and
    /// repeats are ignored) got color `c`.
    #[inline(always)]
    pub(crate) fn saw(&mut self, w: usize, c: Idx) {
        let bit = 1u64.checked_shl(c).unwrap_or(0);
        if self.seen[w] & bit != bit {
            self.seen[w] |= bit;
            self.raise(w);
        }
    }

    /// Moves `w` one saturation level up.
    #[inline(never)]
    fn raise(&mut self, w: usize) {
        self.unlink(w);
        let key = self.link[w].key + self.levels;
        self.link[w].key = key;
        self.insert(w);
        self.cursor = self.cursor.max(key as usize);
    }
}

/// The vertices of `g` in a static order (tests of the orders).
#[cfg(test)]
pub(crate) fn vertex_order(g: &mut impl Graph, order: Order) -> Vec<Idx> {
    let mut visit = Visit::new(g, order);
    let mut out = Vec::new();
    let mut color = vec![NONE; g.num_vertices()];
    while let Some(v) = visit.next() {
        out.push(idx(v));
        // Distance-1 greedy colors, for the saturation order.
        let mut nb = Vec::new();
        g.for_each_neighbor(v, |w| nb.push(w));
        let c = (0..).find(|&c| nb.iter().all(|&w| color[w] != c)).unwrap_or(0);
        color[v] = c;
        if let Some(s) = visit.saturation() {
            nb.iter().for_each(|&w| s.saw(w, c));
        }
    }
    out
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
        // 1 (largest degree); its neighbours 0, 2, 5 are saturated, 2 has
        // the largest degree; then 0, 3, 5 (one color each, degree 1) by
        // index, the isolated 4 last.
        assert_eq!(vertex_order(&mut small(), Order::Saturation), [1, 2, 0, 3, 5, 4]);
    }

    /// The saturation queue against a brute-force model: every pop is a
    /// remaining vertex of largest saturation, then largest degree, each
    /// vertex comes once, and ties go to the smallest index while the lists
    /// stay short enough for the insertion walk.
    #[test]
    fn saturation_queue_pops_a_largest_key() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for round in 0..200 {
            let n = 1 + rand(40);
            let degree: Vec<Idx> = (0..n).map(|_| idx(rand(6))).collect();
            let mut q = Saturation::new(&degree);
            let mut seen = vec![0u64; n];
            let mut done = vec![false; n];
            let small = n <= INSERTION_WALK;
            for _ in 0..n {
                let v = q.pop().unwrap();
                assert!(!done[v], "round {round}: {v} popped twice");
                let key = |w: usize| (seen[w].count_ones(), degree[w]);
                let best = (0..n).filter(|&w| !done[w]).map(key).max().unwrap();
                assert_eq!(key(v), best, "round {round}");
                if small {
                    let first = (0..n).find(|&w| !done[w] && key(w) == best);
                    assert_eq!(Some(v), first, "round {round}");
                }
                done[v] = true;
                // Tell a few vertices (some colored, some repeated) about a
                // color, 70 of them past the 64 counted.
                let c = idx(rand(70));
                for _ in 0..rand(5) {
                    let w = rand(n);
                    q.saw(w, c);
                    if !done[w] && c < 64 {
                        seen[w] |= 1 << c;
                    }
                }
            }
            assert_eq!(q.pop(), None);
        }
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
