//! Criterion benches for the workloads W1–W8 (`shared/bench/README.md`):
//! the same functions, sizes, inputs and dtype as `jax_reference.py`; the
//! timed part is the cached call of the `jit`-compiled transform.
//!
//! ```sh
//! cargo bench --bench workloads              # all
//! cargo bench --bench workloads -- W1_       # a filter on the id
//! ```
//!
//! For the side-by-side comparison with JAX, use `bench/compare`.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

fn workloads(c: &mut Criterion) {
    let mut group = c.benchmark_group("anvil");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for mut w in common::select(&[]) {
        let id = w.id();
        // The first call (trace + compile) happens in criterion's warm-up,
        // which is not measured: the samples time cached calls only.
        group.bench_function(id.as_str(), |b| {
            b.iter(|| black_box(w.call().unwrap_or_else(|e| panic!("{id}: {e}"))))
        });
    }
    group.finish();
}

criterion_group!(benches, workloads);
criterion_main!(benches);
