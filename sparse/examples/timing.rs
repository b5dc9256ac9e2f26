//! Release timings of the colorings at `10^6` unknowns, the fastest of 5
//! runs each (the criterion bench `benches/coloring.rs` gives the
//! distributions), with the machine's load average before and after: on a
//! shared machine the load decides how far these are from idle times.
//!
//! `cargo run --release -p anvil-sparse --example timing`

#![deny(warnings)]
use std::sync::Arc;
use std::time::{Duration, Instant};

use anvil_sparse::{gallery, AcyclicColoring, BiColoring, ColumnColoring, Order, RowColoring};
use anvil_sparse::{Coloring, SparsityPattern, StarColoring};
use faer::Mat;

/// The fastest of `runs` calls of `f`, and its last result.
fn fastest<T>(runs: usize, mut f: impl FnMut() -> T) -> (T, Duration) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        out = Some(f());
        best = best.min(t.elapsed());
    }
    (out.expect("at least one run"), best)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string()
}

/// Acyclic coloring in the default order, its decompression, and the
/// largest error of the substitution on pseudo-random symmetric values in
/// `[1, 2)`.
fn acyclic(name: &str, p: &Arc<SparsityPattern>) -> Result<(), anvil_sparse::SparseError> {
    let (a, time) = fastest(5, || AcyclicColoring::new(p.clone(), Order::default()));
    let a = a?;
    let value = |i: usize, j: usize| {
        let h = ((i.min(j) as u64) << 32 | i.max(j) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        1.0 + (h >> 11) as f64 / (1u64 << 53) as f64
    };
    let hs = product(p, a.coloring(), value);
    let mut out = vec![0.0; p.nnz()];
    let ((), decompress) = fastest(5, || a.decompress_into(hs.as_ref(), &mut out).unwrap());
    let error =
        p.entries().zip(&out).map(|((i, j), x)| (x - value(i, j)).abs()).fold(0.0, f64::max);
    println!(
        "{name} acyclic (default order): {} colors in {time:.1?}, decompression in {decompress:.1?}, \
         depth {}, largest error {error:.1e}",
        a.num_colors(),
        a.max_substitution_depth()
    );
    Ok(())
}

/// `H·S` as the Hessian-vector products would compute it.
fn product(p: &SparsityPattern, c: &Coloring, value: impl Fn(usize, usize) -> f64) -> Mat<f64> {
    let mut hs = Mat::<f64>::zeros(p.nrows(), c.num_colors());
    for (i, j) in p.entries() {
        hs[(i, c.colors()[j] as usize)] += value(i, j);
    }
    hs
}

fn main() -> Result<(), anvil_sparse::SparseError> {
    println!("load average: {}", load());
    let cases = [
        ("tridiagonal 10^6", Arc::new(gallery::tridiagonal(1_000_000)?)),
        ("laplacian 1000x1000", Arc::new(gallery::laplacian_2d(1000)?)),
    ];
    for (name, p) in &cases {
        for order in Order::ALL {
            let (c, col) = fastest(5, || ColumnColoring::new(p.clone(), order).num_colors());
            let (r, row) = fastest(5, || RowColoring::new(p.clone(), order).num_colors());
            let (s, star) =
                fastest(5, || StarColoring::new(p.clone(), order).map(|s| s.num_colors()));
            println!(
                "{name} {order:?}: column {c} in {col:.1?}, row {r} in {row:.1?}, star {} in {star:.1?}",
                s?
            );
        }
        let (b, bi) = fastest(2, || BiColoring::new(p.clone(), Order::default()).num_colors());
        println!("{name} bidirectional (default order, fastest of 2): {b} in {bi:.1?}");
        acyclic(name, p)?;
    }
    println!("load average: {}", load());
    Ok(())
}
