//! Checks of the colorings' defining properties, written independently of
//! the algorithms, and the compressed products the derivative passes would
//! compute.
#![allow(dead_code)] // each test file uses a different subset

use anvil_sparse::{AcyclicColoring, BiColoring, Coloring, SparsityPattern, StarColoring};
use faer::Mat;
use std::collections::HashMap;

/// A value in `[1, 2)` for entry `(i, j)` that looks random and depends on
/// `seed`; sums of two or more of them differ from each of them.
pub fn value(i: usize, j: usize, seed: u64) -> f64 {
    let mut h = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (j as u64).rotate_left(32);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    1.0 + (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Symmetric values: `H[i][j] = H[j][i]`.
pub fn sym_value(i: usize, j: usize, seed: u64) -> f64 {
    value(i.min(j), i.max(j), seed)
}

/// The exact values of `J` in the pattern's order.
pub fn values(p: &SparsityPattern, f: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    p.entries().map(|(i, j)| f(i, j)).collect()
}

/// `B = J·S` for a column coloring, computed from the seeds as the JVPs would.
pub fn forward_product(
    p: &SparsityPattern,
    c: &Coloring,
    f: impl Fn(usize, usize) -> f64,
) -> Mat<f64> {
    let mut b = Mat::zeros(p.nrows(), c.num_colors());
    for (k, seed) in c.seeds().iter().enumerate() {
        for &j in seed {
            for &i in p.col(j as usize) {
                b[(i as usize, k)] += f(i as usize, j as usize);
            }
        }
    }
    b
}

/// `C = Sᵀ·J` for a row coloring, computed from the seeds as the VJPs would.
pub fn reverse_product(
    p: &SparsityPattern,
    c: &Coloring,
    f: impl Fn(usize, usize) -> f64,
) -> Mat<f64> {
    let t = p.transpose();
    let mut out = Mat::zeros(c.num_colors(), p.ncols());
    for (k, seed) in c.seeds().iter().enumerate() {
        for &i in seed {
            for &j in t.col(i as usize) {
                out[(k, j as usize)] += f(i as usize, j as usize);
            }
        }
    }
    out
}

/// Colors are `0..num_colors`, each used, or neutral.
pub fn check_numbering(c: &Coloring) {
    let mut used = vec![false; c.num_colors()];
    for &k in c.colors() {
        if k != Coloring::NEUTRAL {
            used[k as usize] = true;
        }
    }
    assert!(used.iter().all(|&u| u), "a color in 0..{} is unused", c.num_colors());
}

/// Column coloring: nonempty columns are colored, and no row meets two
/// columns of one color (structural orthogonality).
pub fn check_column_coloring(p: &SparsityPattern, c: &Coloring) {
    assert_eq!(c.num_vertices(), p.ncols());
    check_numbering(c);
    for j in 0..p.ncols() {
        assert!(p.col(j).is_empty() || c.color(j).is_some(), "nonempty column {j} is neutral");
    }
    for (i, row) in p.transpose().cols().enumerate() {
        let mut seen = std::collections::HashSet::new();
        for &j in row {
            assert!(seen.insert(c.color(j as usize)), "row {i} meets two columns of one color");
        }
    }
}

/// Row coloring: the column property on the transpose.
pub fn check_row_coloring(p: &SparsityPattern, c: &Coloring) {
    check_column_coloring(&p.transpose(), c);
}

/// Whether `A[i][j]` can be read from `(A·S)[i, color(j)]`: `j` is colored
/// and no other `k` with `A[i][k] ≠ 0` has its color (`t` is `Aᵀ`, so row
/// `i` of `A` is `t.col(i)`).
fn readable(t: &SparsityPattern, c: &Coloring, i: usize, j: usize) -> bool {
    let Some(cj) = c.color(j) else { return false };
    t.col(i).iter().all(|&k| k as usize == j || c.color(k as usize) != Some(cj))
}

/// Star coloring: colored neighbours differ, every path on four colored
/// vertices uses at least three colors, and every entry is readable
/// directly from `H·S` through one of its ends.
pub fn check_star_coloring(p: &SparsityPattern, c: &Coloring) {
    assert!(p.is_symmetric());
    check_numbering(c);
    let color = |v: usize| c.color(v);
    for (i, j) in p.entries() {
        if i != j && color(i).is_some() {
            assert_ne!(color(i), color(j), "neighbours {i}, {j} share a color");
        }
    }
    // Paths a - b - x - d: with a proper coloring, two colors means
    // color(a) = color(x) and color(b) = color(d).
    for (b, x) in p.entries().filter(|&(b, x)| b != x) {
        for &a in p.col(b) {
            for &d in p.col(x) {
                let (a, d) = (a as usize, d as usize);
                if [a, d].iter().any(|&v| v == b || v == x) || a == d {
                    continue;
                }
                let all = [a, b, x, d].iter().all(|&v| color(v).is_some());
                if all && color(a) == color(x) && color(b) == color(d) {
                    panic!("path {a} - {b} - {x} - {d} uses two colors");
                }
            }
        }
    }
    for (i, j) in p.entries() {
        assert!(readable(p, c, i, j) || readable(p, c, j, i), "({i}, {j}) unreadable");
    }
}

/// Bidirectional coloring: every entry `(i, j)` is readable from the forward
/// product (no other column of `j`'s color meets row `i`) or from the
/// reverse product (no other row of `i`'s color meets column `j`).
pub fn check_bicoloring(p: &SparsityPattern, bc: &BiColoring) {
    let (cols, rows) = (bc.column_coloring(), bc.row_coloring());
    check_numbering(cols);
    check_numbering(rows);
    let t = p.transpose();
    for (i, j) in p.entries() {
        let fwd = readable(&t, cols, i, j);
        let rev = readable(p, rows, j, i);
        assert!(fwd || rev, "({i}, {j}) is readable from neither product");
    }
}

/// Star-colors `p`, checks the coloring, and checks that decompressing the
/// Hessian-vector products of random symmetric values gives them back.
pub fn star_roundtrip(p: &SparsityPattern, order: anvil_sparse::Order, seed: u64) -> usize {
    let s = StarColoring::new(p.clone(), order).unwrap();
    check_star_coloring(p, s.coloring());
    let f = |i, j| sym_value(i, j, seed);
    let hs = forward_product(p, s.coloring(), f);
    assert_eq!(s.decompress(hs.as_ref()).unwrap(), values(p, f));
    s.num_colors()
}

/// Acyclic coloring: nonempty vertices are colored, colored neighbours
/// differ, and for every pair of colors the edges between them form a
/// forest (union-find over each pair's edges finds no cycle).
pub fn check_acyclic_coloring(p: &SparsityPattern, c: &Coloring) {
    assert!(p.is_symmetric());
    check_numbering(c);
    for j in 0..p.ncols() {
        assert!(p.col(j).is_empty() || c.color(j).is_some(), "nonempty vertex {j} is neutral");
    }
    let mut forests: HashMap<(usize, usize), HashMap<usize, usize>> = HashMap::new();
    for (i, j) in p.entries().filter(|&(i, j)| i < j) {
        let (ci, cj) = (c.color(i).unwrap(), c.color(j).unwrap());
        assert_ne!(ci, cj, "neighbours {i}, {j} share a color");
        let parent = forests.entry((ci.min(cj), ci.max(cj))).or_default();
        fn find(parent: &mut HashMap<usize, usize>, mut v: usize) -> usize {
            while let Some(&u) = parent.get(&v) {
                v = u;
            }
            v
        }
        let (ri, rj) = (find(parent, i), find(parent, j));
        assert_ne!(ri, rj, "edge ({i}, {j}) closes a cycle in colors {ci}, {cj}");
        parent.insert(ri, rj);
    }
}

/// The bound on each decompressed entry's error that
/// [`AcyclicColoring::decompress`] documents: `depth · (1 + Δ) · ε ·
/// max_v Σ_k |H[v, k]|`.
pub fn substitution_tolerance(
    p: &SparsityPattern,
    a: &AcyclicColoring,
    f: impl Fn(usize, usize) -> f64,
) -> f64 {
    let degree = p.cols().map(<[u32]>::len).max().unwrap_or(0) as f64;
    let row_sum = (0..p.ncols())
        .map(|j| p.col(j).iter().map(|&i| f(i as usize, j).abs()).sum::<f64>())
        .fold(0.0, f64::max);
    a.max_substitution_depth().max(1) as f64 * (1.0 + degree) * f64::EPSILON * row_sum
}

/// Acyclic-colors `p`, checks the coloring, and checks that decompressing
/// the Hessian-vector products of random symmetric values gives them back:
/// the diagonal exactly, the rest within [`substitution_tolerance`].
/// Returns the number of colors and the largest error as a fraction of the
/// tolerance.
pub fn acyclic_roundtrip(
    p: &SparsityPattern,
    order: anvil_sparse::Order,
    seed: u64,
) -> (usize, f64) {
    let a = AcyclicColoring::new(p.clone(), order).unwrap();
    check_acyclic_coloring(p, a.coloring());
    let f = |i, j| sym_value(i, j, seed);
    let hs = forward_product(p, a.coloring(), f);
    let got = a.decompress(hs.as_ref()).unwrap();
    let tol = substitution_tolerance(p, &a, f);
    let mut worst: f64 = 0.0;
    for ((i, j), x) in p.entries().zip(got) {
        let err = (x - f(i, j)).abs();
        if i == j {
            assert_eq!(err, 0.0, "diagonal ({i}, {i})");
        }
        assert!(err <= tol, "({i}, {j}): error {err:e} above {tol:e}");
        worst = worst.max(err / tol);
    }
    let mut into = vec![0.0; p.nnz()];
    a.decompress_into(hs.as_ref(), &mut into).unwrap();
    assert_eq!(into, a.decompress(hs.as_ref()).unwrap());
    (a.num_colors(), worst)
}
