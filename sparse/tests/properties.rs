//! Property tests: on random patterns every coloring, in every order, has
//! its defining property (checked independently of the algorithms in
//! `common`), and decompressing the compressed products of random values
//! gives the values back exactly.

mod common;

use anvil_sparse::{BiColoring, ColumnColoring, Order, RowColoring, SparsityPattern};
use common::*;
use proptest::prelude::*;

/// A random `m × n` pattern, `0 ≤ m, n < 25`, of any density.
fn pattern() -> impl Strategy<Value = SparsityPattern> {
    (0usize..25, 0usize..25)
        .prop_flat_map(|(m, n)| {
            let max = (m * n).min(120);
            let entries = prop::collection::vec((0..m.max(1), 0..n.max(1)), 0..=max);
            (Just(m), Just(n), entries)
        })
        .prop_map(|(m, n, entries)| {
            let entries = entries.into_iter().filter(|&(i, j)| i < m && j < n);
            SparsityPattern::from_entries(m, n, entries).unwrap()
        })
}

/// A random structurally symmetric pattern, diagonal entries optional.
fn symmetric_pattern() -> impl Strategy<Value = SparsityPattern> {
    pattern().prop_map(|p| {
        let n = p.nrows().max(p.ncols());
        let both = p.entries().flat_map(|(i, j)| [(i, j), (j, i)]);
        SparsityPattern::from_entries(n, n, both).unwrap()
    })
}

fn order() -> impl Strategy<Value = Order> {
    prop::sample::select(Order::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn column_coloring_is_valid_and_exact(p in pattern(), order in order(), seed: u64) {
        let c = ColumnColoring::new(p.clone(), order);
        check_column_coloring(&p, c.coloring());
        let f = |i, j| value(i, j, seed);
        let b = forward_product(&p, c.coloring(), f);
        prop_assert_eq!(c.decompress(b.as_ref()).unwrap(), values(&p, f));
        // At least as many colors as the densest row has entries.
        let densest = p.transpose().cols().map(<[u32]>::len).max().unwrap_or(0);
        prop_assert!(c.num_colors() >= densest);
    }

    #[test]
    fn row_coloring_is_valid_and_exact(p in pattern(), order in order(), seed: u64) {
        let c = RowColoring::new(p.clone(), order);
        check_row_coloring(&p, c.coloring());
        let f = |i, j| value(i, j, seed);
        let ct = reverse_product(&p, c.coloring(), f);
        prop_assert_eq!(c.decompress(ct.as_ref()).unwrap(), values(&p, f));
    }

    #[test]
    fn star_coloring_is_valid_and_exact(p in symmetric_pattern(), order in order(), seed: u64) {
        let colors = star_roundtrip(&p, order, seed);
        // Never worse than giving every vertex with an entry its own color.
        let busy = p.cols().filter(|c| !c.is_empty()).count();
        prop_assert!(colors <= busy);
    }

    #[test]
    fn acyclic_coloring_is_valid_and_accurate(p in symmetric_pattern(), order in order(), seed: u64) {
        let (colors, _) = acyclic_roundtrip(&p, order, seed);
        // Never more colors than the star coloring in the same order
        // (every star coloring is acyclic): not guaranteed for greedy
        // colorings, so only bounded by the vertices with entries.
        let busy = p.cols().filter(|c| !c.is_empty()).count();
        prop_assert!(colors <= busy);
    }

    #[test]
    fn bicoloring_is_valid_and_exact(p in pattern(), order in order(), seed: u64) {
        let f = |i, j| value(i, j, seed);
        for bc in [BiColoring::new(p.clone(), order), BiColoring::star(p.clone(), order)] {
            check_bicoloring(&p, &bc);
            let b = forward_product(&p, bc.column_coloring(), f);
            let c = reverse_product(&p, bc.row_coloring(), f);
            prop_assert_eq!(bc.decompress(b.as_ref(), c.as_ref()).unwrap(), values(&p, f));
        }
        // The best-of construction is never worse than one-sided coloring.
        let best = BiColoring::new(p.clone(), order).num_colors();
        let one_sided = ColumnColoring::new(p.clone(), order)
            .num_colors()
            .min(RowColoring::new(p.clone(), order).num_colors());
        prop_assert!(best <= one_sided);
    }

    #[test]
    fn pattern_roundtrips(p in pattern()) {
        prop_assert_eq!(p.transpose().transpose(), p.clone());
        let rows: Vec<usize> = p.transpose().col_ptr().iter().map(|&x| x as usize).collect();
        let cols: Vec<usize> = p.transpose().row_idx().iter().map(|&x| x as usize).collect();
        prop_assert_eq!(SparsityPattern::from_csr(p.nrows(), p.ncols(), &rows, &cols).unwrap(), p.clone());
        prop_assert_eq!(SparsityPattern::from_faer(p.as_faer()).unwrap(), p.clone());
        let dense: Vec<Vec<bool>> =
            (0..p.nrows()).map(|i| (0..p.ncols()).map(|j| p.contains(i, j)).collect()).collect();
        if p.nrows() > 0 {
            prop_assert_eq!(SparsityPattern::from_dense(&dense).unwrap(), p.clone());
        }
        prop_assert_eq!(p.is_symmetric(), p.nrows() == p.ncols() && p.transpose() == p);
    }
}
