//! Throughput of `anvil_cpu::vmath` against the scalar `std` function (glibc;
//! `libm::erf` for erf, which `std` lacks) on 4096- and 1M-element slices.
//!
//! ```text
//! cargo bench -p anvil-ad-cpu --bench vmath                  # all: 4096 and 1M elements
//! cargo bench -p anvil-ad-cpu --bench vmath -- /4096 \
//!     --warm-up-time 0.5 --measurement-time 2 --sample-size 30  # BENCHMARKS.md's table (issue 22)
//! ```
//!
//! Each group is one function, dtype and length, with a `vmath` and a `scalar`
//! entry: the ratio of their times is the speed-up.

use anvil_cpu::vmath;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// Deterministic inputs spread over the range where the function is not
/// trivially saturated.
fn inputs(n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            lo + (hi - lo) * ((state >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

type Slice64 = fn(&[f64], &mut [f64]);
type Slice32 = fn(&[f32], &mut [f32]);

struct Func {
    name: &'static str,
    lo: f64,
    hi: f64,
    v64: Slice64,
    s64: fn(f64) -> f64,
    v32: Slice32,
    s32: fn(f32) -> f32,
}

fn logistic64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn logistic32(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn funcs() -> Vec<Func> {
    macro_rules! f {
        ($name:literal, $lo:expr, $hi:expr, $v64:path, $s64:expr, $v32:path, $s32:expr) => {
            Func { name: $name, lo: $lo, hi: $hi, v64: $v64, s64: $s64, v32: $v32, s32: $s32 }
        };
    }
    vec![
        f!("exp", -50.0, 50.0, vmath::exp_f64, f64::exp, vmath::exp_f32, f32::exp),
        f!("expm1", -5.0, 5.0, vmath::expm1_f64, f64::exp_m1, vmath::expm1_f32, f32::exp_m1),
        f!("ln", 1e-3, 1e3, vmath::ln_f64, f64::ln, vmath::ln_f32, f32::ln),
        f!("ln_1p", -0.9, 10.0, vmath::ln_1p_f64, f64::ln_1p, vmath::ln_1p_f32, f32::ln_1p),
        f!("tanh", -5.0, 5.0, vmath::tanh_f64, f64::tanh, vmath::tanh_f32, f32::tanh),
        f!(
            "logistic",
            -20.0,
            20.0,
            vmath::logistic_f64,
            logistic64,
            vmath::logistic_f32,
            logistic32
        ),
        f!("sin", -100.0, 100.0, vmath::sin_f64, f64::sin, vmath::sin_f32, f32::sin),
        f!("cos", -100.0, 100.0, vmath::cos_f64, f64::cos, vmath::cos_f32, f32::cos),
        f!("erf", -4.0, 4.0, vmath::erf_f64, libm::erf, vmath::erf_f32, libm::erff),
    ]
}

fn bench(c: &mut Criterion) {
    for f in funcs() {
        for n in [4096usize, 1 << 20] {
            let x64 = inputs(n, f.lo, f.hi);
            let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
            let mut o64 = vec![0.0f64; n];
            let mut o32 = vec![0.0f32; n];
            let mut g = c.benchmark_group(format!("{}_f64", f.name));
            g.throughput(Throughput::Elements(n as u64));
            g.bench_function(BenchmarkId::new("vmath", n), |b| {
                b.iter(|| (f.v64)(black_box(&x64), black_box(&mut o64)))
            });
            g.bench_function(BenchmarkId::new("scalar", n), |b| {
                b.iter(|| {
                    for (o, &v) in o64.iter_mut().zip(black_box(&x64)) {
                        *o = (f.s64)(v);
                    }
                })
            });
            g.finish();
            let mut g = c.benchmark_group(format!("{}_f32", f.name));
            g.throughput(Throughput::Elements(n as u64));
            g.bench_function(BenchmarkId::new("vmath", n), |b| {
                b.iter(|| (f.v32)(black_box(&x32), black_box(&mut o32)))
            });
            g.bench_function(BenchmarkId::new("scalar", n), |b| {
                b.iter(|| {
                    for (o, &v) in o32.iter_mut().zip(black_box(&x32)) {
                        *o = (f.s32)(v);
                    }
                })
            });
            g.finish();
        }
    }
}

criterion_group! {
    name = benches;
    // Short runs: 36 groups on a shared 2-core machine.
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_millis(800));
    targets = bench
}
criterion_main!(benches);
