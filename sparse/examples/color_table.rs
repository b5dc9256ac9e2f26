//! Prints the number of colors each coloring and each order gives on the
//! gallery's structured patterns (the table in the crate's README).
//!
//! `cargo run --release -p anvil-sparse --example color_table`

#![deny(warnings)]
use anvil_sparse::{gallery, BiColoring, ColumnColoring, Order, RowColoring, SparsityPattern};
use anvil_sparse::{AcyclicColoring, SparseError, StarColoring};

fn main() -> Result<(), SparseError> {
    let cases: Vec<(&str, SparsityPattern)> = vec![
        ("diagonal 100", gallery::diagonal(100)?),
        ("tridiagonal 1000", gallery::tridiagonal(1000)?),
        ("band k=2, 500", gallery::banded(500, 500, 2, 2)?),
        ("band k=5, 500", gallery::banded(500, 500, 5, 5)?),
        ("laplacian 30x30", gallery::laplacian_2d(30)?),
        ("arrowhead 100", gallery::arrowhead(100)?),
        ("dense 20x20", gallery::dense(20, 20)?),
    ];
    println!("| pattern | order | column | row | star | acyclic | bidirectional (fwd+rev) |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, p) in &cases {
        for order in Order::ALL {
            let col = ColumnColoring::new(p.clone(), order).num_colors();
            let row = RowColoring::new(p.clone(), order).num_colors();
            let star = StarColoring::new(p.clone(), order)?.num_colors();
            let acyclic = AcyclicColoring::new(p.clone(), order)?.num_colors();
            let bi = BiColoring::new(p.clone(), order);
            println!(
                "| {name} | {order:?} | {col} | {row} | {star} | {acyclic} | {} ({}+{}) |",
                bi.num_colors(),
                bi.column_coloring().num_colors(),
                bi.row_coloring().num_colors()
            );
        }
    }
    random_totals()
}

/// A small deterministic generator (64-bit LCG), so the table needs no
/// dependency.
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// Total colors over 50 random patterns (`m × n` with about `per_col`
/// nonzeros per column), per order and coloring.
pub fn random_totals() -> Result<(), SparseError> {
    println!("\n| random patterns (sum over 50) | column | row | star | acyclic | bidirectional |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for order in Order::ALL {
        let mut rng = Lcg(7);
        let (mut col, mut row, mut star, mut acyclic, mut bi) = (0, 0, 0, 0, 0);
        for _ in 0..50 {
            let (m, n) = (50 + rng.below(150), 50 + rng.below(150));
            let per_col = 1 + rng.below(6);
            let entries: Vec<_> = (0..n * per_col).map(|k| (rng.below(m), k % n)).collect();
            let p = SparsityPattern::from_entries(m, n, entries.iter().copied())?;
            let sym = SparsityPattern::from_entries(
                n,
                n,
                entries.iter().map(|&(i, j)| (i % n, j)).flat_map(|(i, j)| [(i, j), (j, i)]),
            )?;
            col += ColumnColoring::new(p.clone(), order).num_colors();
            row += RowColoring::new(p.clone(), order).num_colors();
            star += StarColoring::new(sym.clone(), order)?.num_colors();
            acyclic += AcyclicColoring::new(sym, order)?.num_colors();
            bi += BiColoring::new(p, order).num_colors();
        }
        println!("| {order:?} | {col} | {row} | {star} | {acyclic} | {bi} |");
    }
    Ok(())
}
