//! Release timings of the colorings at `10^6` unknowns, one run each (the
//! criterion bench `benches/coloring.rs` gives the distributions).
//!
//! `cargo run --release -p anvil-sparse --example timing`

use std::sync::Arc;
use std::time::Instant;

use anvil_sparse::{gallery, BiColoring, ColumnColoring, Order, RowColoring, StarColoring};

fn main() -> Result<(), anvil_sparse::SparseError> {
    let cases = [
        ("tridiagonal 10^6", Arc::new(gallery::tridiagonal(1_000_000)?)),
        ("laplacian 1000x1000", Arc::new(gallery::laplacian_2d(1000)?)),
    ];
    for (name, p) in &cases {
        for order in Order::ALL {
            let t = Instant::now();
            let c = ColumnColoring::new(p.clone(), order);
            let col = t.elapsed();
            let t = Instant::now();
            let r = RowColoring::new(p.clone(), order);
            let row = t.elapsed();
            let t = Instant::now();
            let s = StarColoring::new(p.clone(), order)?;
            let star = t.elapsed();
            println!(
                "{name} {order:?}: column {} in {col:.1?}, row {} in {row:.1?}, star {} in {star:.1?}",
                c.num_colors(),
                r.num_colors(),
                s.num_colors()
            );
        }
        let t = Instant::now();
        let b = BiColoring::new(p.clone(), Order::default());
        println!("{name} bidirectional (default order): {} in {:.1?}", b.num_colors(), t.elapsed());
    }
    Ok(())
}
