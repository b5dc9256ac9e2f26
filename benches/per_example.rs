//! Per-example programs (`vmap(grad(loss))`, issue 22 item 6), timed as
//! cached calls of the `jit`-compiled transform:
//!
//! - `linear`: `sum((W x - y)^2)`, W 10×64 — per-example outer products;
//! - `ce_mlp`: softmax cross-entropy of a tanh MLP (in 64, hidden 256,
//!   10 classes) — a matrix-vector product through W2, outer products,
//!   a log-softmax and its gradient per example;
//! - `design`: `sum((A w - y)^2)` with a per-example 64×64 design matrix —
//!   a batched matrix-vector product, both operands batched;
//!
//! all at batch 256, f64, with inputs in closed form (`sin(0.37 i + s)`),
//! the same as `bench/per_example_jax.py`, which times JAX on the same
//! programs; both print each program's output sum once, to compare. W5 is
//! in `benches/workloads.rs` and `bench/compare`.
//!
//! ```sh
//! cargo bench --bench per_example
//! ```

use anvil::prelude::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

const BATCH: usize = 256;

fn input(shape: &[usize], seed: f64, scale: f64) -> Tensor {
    let n = shape.iter().product::<usize>();
    let v = (0..n).map(|i| (i as f64 * 0.37 + seed).sin() * scale).collect();
    Tensor::from_vec(v, shape).expect("shape matches")
}

fn onehot(batch: usize, classes: usize) -> Tensor {
    let v =
        (0..batch * classes).map(|i| f64::from(u8::from(i % classes == (i / classes) % classes)));
    Tensor::from_vec(v.collect(), &[batch, classes]).expect("shape matches")
}

fn linear_loss(w: &Var, x: &Var, y: &Var) -> Var {
    (w.matmul(x) - y).square().sum_all()
}

fn ce_mlp_loss([w1, b1, w2, b2]: &[Var; 4], x: &Var, onehot: &Var) -> Var {
    let logits = w2.matmul(&(w1.matmul(x) + b1).tanh()) + b2;
    -(onehot * &logits.log_softmax(-1)).sum_all()
}

fn design_loss(w: &Var, a: &Var, y: &Var) -> Var {
    (a.matmul(w) - y).square().sum_all()
}

fn total(ts: &[Tensor]) -> f64 {
    ts.iter().map(|t| t.to_vec::<f64>().expect("f64").iter().sum::<f64>()).sum()
}

fn per_example(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_example");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    let (din, dout) = (64, 10);
    let (w, x, y) = (
        input(&[dout, din], 0.1, 0.125),
        input(&[BATCH, din], 0.2, 1.0),
        input(&[BATCH, dout], 0.3, 1.0),
    );
    let f = jit(vmap(grad(linear_loss)).in_axes([None, Some(0), Some(0)]));
    let run = || f.eval((&w, &x, &y)).expect("linear");
    println!("linear sum = {:.12e}", total(&[run()]));
    group.bench_function("linear/batch=256,in=64,out=10", |b| b.iter(|| black_box(run())));

    let (hidden, classes) = (256, 10);
    let params = [
        input(&[hidden, din], 0.4, 0.125),
        input(&[hidden], 0.5, 0.1),
        input(&[classes, hidden], 0.6, 0.0625),
        input(&[classes], 0.7, 0.1),
    ];
    let oh = onehot(BATCH, classes);
    let f = jit(vmap(grad(ce_mlp_loss)).in_axes([None, Some(0), Some(0)]));
    let run = || f.eval((&params, &x, &oh)).expect("ce_mlp");
    println!("ce_mlp sum = {:.12e}", total(&run()));
    group.bench_function("ce_mlp/batch=256,in=64,hidden=256,classes=10", |b| {
        b.iter(|| black_box(run()))
    });

    let (m, k) = (64, 64);
    let (w, a, y) =
        (input(&[k], 0.8, 0.125), input(&[BATCH, m, k], 0.9, 1.0), input(&[BATCH, m], 1.0, 1.0));
    let f = jit(vmap(grad(design_loss)).in_axes([None, Some(0), Some(0)]));
    let run = || f.eval((&w, &a, &y)).expect("design");
    println!("design sum = {:.12e}", total(&[run()]));
    group.bench_function("design/batch=256,m=64,k=64", |b| b.iter(|| black_box(run())));
    group.finish();
}

criterion_group!(benches, per_example);
criterion_main!(benches);
