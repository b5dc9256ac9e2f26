//! Softmax-family programs whose reductions end fused chains (issue 22,
//! item 5), timed as cached calls of the `jit`-compiled function, f64,
//! 512 rows of 1024:
//!
//! - `softmax`: softmax over the last axis;
//! - `logsumexp_vg`: value and gradient of `sum(logsumexp(x, -1))`;
//! - `softmax_vg`: value and gradient of `sum(w * softmax(x, -1))`;
//! - `log_softmax_vg`: value and gradient of `sum(w * log_softmax(x, -1))`;
//! - `chain_sum`: `sum(tanh(x) * x + 1, -1)`.
//!
//! ```sh
//! cargo bench --bench fused_reductions
//! ```

use anvil::prelude::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

fn input(shape: &[usize], seed: f64, scale: f64) -> Tensor {
    let n = shape.iter().product::<usize>();
    let v = (0..n).map(|i| (i as f64 * 0.37 + seed).sin() * scale).collect();
    Tensor::from_vec(v, shape).expect("shape matches")
}

fn lse(x: &Var) -> Var {
    x.logsumexp(&[-1], false).sum_all()
}

fn weighted_softmax(x: &Var, w: &Var) -> Var {
    (w * &x.softmax(-1)).sum_all()
}

fn weighted_log_softmax(x: &Var, w: &Var) -> Var {
    (w * &x.log_softmax(-1)).sum_all()
}

fn fused_reductions(c: &mut Criterion) {
    let mut group = c.benchmark_group("fused_reductions");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    let shape = [512, 1024];
    let (x, w) = (input(&shape, 0.1, 3.0), input(&shape, 0.2, 1.0));

    let f = jit(|x: &Var| x.softmax(-1));
    group
        .bench_function("softmax/512x1024", |b| b.iter(|| black_box(f.eval(&x).expect("softmax"))));
    let f = jit(value_and_grad(lse));
    group.bench_function("logsumexp_vg/512x1024", |b| {
        b.iter(|| black_box(f.eval(&x).expect("logsumexp")))
    });
    let f = jit(value_and_grad(weighted_softmax));
    group.bench_function("softmax_vg/512x1024", |b| {
        b.iter(|| black_box(f.eval((&x, &w)).expect("softmax_vg")))
    });
    let f = jit(value_and_grad(weighted_log_softmax));
    group.bench_function("log_softmax_vg/512x1024", |b| {
        b.iter(|| black_box(f.eval((&x, &w)).expect("log_softmax")))
    });
    let f = jit(|x: &Var| ((x.tanh() * x) + 1.0).sum(&[-1]));
    group.bench_function("chain_sum/512x1024", |b| {
        b.iter(|| black_box(f.eval(&x).expect("chain_sum")))
    });
    group.finish();
}

criterion_group!(benches, fused_reductions);
criterion_main!(benches);
