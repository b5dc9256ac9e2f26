//! Symbolic dimensions (issue 17): what a call costs at a length the plan
//! has not run before, against a cached call, and against the first call
//! of the concrete path (trace, transform, optimise, compile, run).
//!
//! ```sh
//! cargo bench --bench symbolic
//! ```
//!
//! `new_length` alternates between two lengths, so every call binds the
//! dimension variables afresh (the plan keeps the step types of the last
//! binding only): it is the cost of a first call at a new length — a
//! binding, the plan's types evaluated, the kernels run — with no trace and
//! no compile. `cached` repeats one length; `concrete_first_call` builds a
//! fresh `jit` per call at a concrete shape.

use anvil::prelude::*;
use anvil::{dim, TensorType};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use std::time::Duration;

/// A function over one traced value, as the cases below hold them.
type Traced = dyn Fn(&Var) -> Var;

fn data(rows: usize, cols: usize) -> Tensor {
    let v = (0..rows * cols).map(|i| (i as f64 * 0.37).sin()).collect();
    Tensor::from_vec(v, &[rows, cols]).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("symbolic");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let w1 = data(8, 16);
    let w2 = data(16, 1);
    let loss = move |x: &Var| x.matmul(&w1).tanh().matmul(&w2).square().mean();
    let mean = |x: &Var| x.mean_axes(&[0], false);
    let n = dim("n", 1..).unwrap();
    let spec = TensorType::new(DType::F64, [n, 8]);
    let cases: [(&str, Box<Traced>); 2] = [
        ("mean", Box::new(mean)),
        ("grad_mlp_loss", Box::new(move |x: &Var| grad(&loss).invoke(x))),
    ];
    for (name, f) in cases {
        let f = &f;
        let sym = jit(|x: &Var| f(x)).symbolic(&spec).unwrap();
        let (a, b) = (data(64, 8), data(65, 8));
        group.bench_function(format!("{name}/cached"), |bch| {
            bch.iter(|| black_box(sym.eval(&a).unwrap()))
        });
        let mut flip = false;
        group.bench_function(format!("{name}/new_length"), |bch| {
            bch.iter(|| {
                flip = !flip;
                black_box(sym.eval(if flip { &a } else { &b }).unwrap())
            })
        });
        group.bench_function(format!("{name}/concrete_first_call"), |bch| {
            bch.iter_batched(
                || jit(|x: &Var| f(x)),
                |j| black_box(j.eval(&a).unwrap()),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
