//! Coloring and decompression at the scale, `10^6` unknowns: the
//! tridiagonal pattern and the 5-point Laplacian on a 1000 × 1000 grid.
//!
//! `cargo bench -p anvil-sparse --bench coloring`

use std::sync::Arc;
use std::time::Duration;

use anvil_sparse::{gallery, AcyclicColoring, BiColoring, ColumnColoring, Order};
use anvil_sparse::{SparsityPattern, StarColoring};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use faer::Mat;

fn patterns() -> [(&'static str, Arc<SparsityPattern>); 2] {
    [
        ("tridiagonal_1e6", Arc::new(gallery::tridiagonal(1_000_000).unwrap())),
        ("laplacian_1000x1000", Arc::new(gallery::laplacian_2d(1000).unwrap())),
    ]
}

fn column_coloring(c: &mut Criterion) {
    let mut group = c.benchmark_group("column_coloring");
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    for (name, p) in patterns() {
        for order in Order::ALL {
            let id = BenchmarkId::new(name, format!("{order:?}"));
            group.bench_function(id, |b| b.iter(|| ColumnColoring::new(p.clone(), order)));
        }
    }
    group.finish();
}

fn other_colorings(c: &mut Criterion) {
    let mut group = c.benchmark_group("other_colorings");
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    for (name, p) in patterns() {
        let order = Order::default();
        group.bench_function(BenchmarkId::new("star", name), |b| {
            b.iter(|| StarColoring::new(p.clone(), order).unwrap())
        });
        group.bench_function(BenchmarkId::new("acyclic", name), |b| {
            b.iter(|| AcyclicColoring::new(p.clone(), order).unwrap())
        });
        group.bench_function(BenchmarkId::new("bidirectional", name), |b| {
            b.iter(|| BiColoring::new(p.clone(), order))
        });
        group.bench_function(BenchmarkId::new("transpose", name), |b| b.iter(|| p.transpose()));
    }
    group.finish();
}

fn decompression(c: &mut Criterion) {
    let mut group = c.benchmark_group("decompression");
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    for (name, p) in patterns() {
        let coloring = ColumnColoring::new(p.clone(), Order::default());
        let b = Mat::<f64>::from_fn(p.nrows(), coloring.num_colors(), |i, j| (i + j) as f64);
        let mut values = vec![0.0; p.nnz()];
        group.bench_function(name, |bench| {
            bench.iter(|| coloring.decompress_into(b.as_ref(), &mut values).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, column_coloring, other_colorings, decompression);
criterion_main!(benches);
