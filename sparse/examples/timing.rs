//! Release timings of the colorings at `10^6` unknowns, the fastest of 5
//! runs each (the criterion bench `benches/coloring.rs` gives the
//! distributions), with the machine's load average before and after: on a
//! shared machine the load decides how far these are from idle times.
//!
//! `cargo run --release -p anvil-sparse --example timing`

use std::sync::Arc;
use std::time::{Duration, Instant};

use anvil_sparse::{gallery, BiColoring, ColumnColoring, Order, RowColoring, StarColoring};

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
    }
    println!("load average: {}", load());
    Ok(())
}
