//! Benchmarks of `anvil_cpu::linalg`: the batched small `eigh` of workload
//! W11 (4096 symmetric 8×8), Cholesky at n = 256 and 1024 against faer
//! called directly (on a column-major and on a row-major view, the layout
//! question of the module docs), LU likewise, a triangular solve at
//! n = 1024 with 1024 right-hand sides, and solves of one vector at
//! n = 64, 200 and 500 against faer's on the same row-major triangle.

use anvil_cpu::linalg::{
    cholesky, eigh, eigvalsh, lu, triangular_solve, ABatch, FailMode, TriangularSolve,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::{MatMut, MatRef, Par};
use std::hint::black_box;

/// Deterministic numbers in [-1, 1).
fn numbers(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// `batch` symmetric `n × n` matrices.
fn symmetric(batch: usize, n: usize) -> Vec<f64> {
    let mut a = numbers(batch * n * n, 1);
    for m in a.chunks_exact_mut(n * n) {
        for i in 0..n {
            for j in 0..i {
                m[j * n + i] = m[i * n + j];
            }
        }
    }
    a
}

/// A symmetric positive definite `n × n` matrix: B·Bᵀ/n + I.
fn spd(n: usize) -> Vec<f64> {
    let b = MatRef::from_row_major_slice(&numbers(n * n, 2)[..], n, n).to_owned();
    let mut a = &b * b.transpose() * faer::Scale(1.0 / n as f64);
    for i in 0..n {
        a[(i, i)] += 1.0;
    }
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = a[(i, j)];
        }
    }
    out
}

fn bench_eigh(c: &mut Criterion) {
    let (batch, n) = (4096, 8);
    let a = symmetric(batch, n);
    let mut w = vec![0.0; batch * n];
    let mut v = vec![0.0; batch * n * n];
    let mut g = c.benchmark_group("eigh_4096x8x8");
    for (name, par) in [("seq", Par::Seq), ("rayon2", Par::rayon(2))] {
        g.bench_function(BenchmarkId::new("eigh", name), |bch| {
            bch.iter(|| eigh(black_box(&a), &mut w, &mut v, batch, n, par).unwrap())
        });
        g.bench_function(BenchmarkId::new("eigvalsh", name), |bch| {
            bch.iter(|| eigvalsh(black_box(&a), &mut w, batch, n, par).unwrap())
        });
    }
    let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
    let (mut w32, mut v32) = (vec![0.0f32; batch * n], vec![0.0f32; batch * n * n]);
    g.bench_function("eigh_f32/seq", |bch| {
        bch.iter(|| eigh(black_box(&a32), &mut w32, &mut v32, batch, n, Par::Seq).unwrap())
    });
    g.finish();
}

fn bench_cholesky(c: &mut Criterion) {
    let mut g = c.benchmark_group("cholesky");
    g.sample_size(20);
    for n in [256, 1024] {
        let a = spd(n);
        let mut out = vec![0.0; n * n];
        g.bench_function(BenchmarkId::new("anvil", n), |bch| {
            bch.iter(|| cholesky(black_box(&a), &mut out, 1, n, FailMode::Error, Par::Seq).unwrap())
        });
        let mut mem =
            MemBuffer::new(cholesky_in_place_scratch::<f64>(n, Par::Seq, Default::default()));
        // faer on its preferred layout: a copy, then the factorisation.
        g.bench_function(BenchmarkId::new("faer_col_major", n), |bch| {
            bch.iter(|| {
                out.copy_from_slice(black_box(&a));
                let m = MatMut::from_column_major_slice_mut(&mut out, n, n);
                let st = MemStack::new(&mut mem);
                cholesky_in_place(m, Default::default(), Par::Seq, st, Default::default()).unwrap();
            })
        });
        g.bench_function(BenchmarkId::new("faer_row_major_view", n), |bch| {
            bch.iter(|| {
                out.copy_from_slice(black_box(&a));
                let m = MatMut::from_row_major_slice_mut(&mut out, n, n);
                let st = MemStack::new(&mut mem);
                cholesky_in_place(m, Default::default(), Par::Seq, st, Default::default()).unwrap();
            })
        });
        g.bench_function(BenchmarkId::new("anvil_rayon2", n), |bch| {
            bch.iter(|| {
                cholesky(black_box(&a), &mut out, 1, n, FailMode::Error, Par::rayon(2)).unwrap()
            })
        });
    }
    g.finish();
}

fn bench_lu(c: &mut Criterion) {
    let mut g = c.benchmark_group("lu");
    g.sample_size(20);
    for n in [64, 128, 200, 256, 320, 1024] {
        let a = numbers(n * n, 3);
        let (mut f, mut piv, mut perm) = (vec![0.0; n * n], vec![0; n], vec![0; n]);
        g.bench_function(BenchmarkId::new("anvil", n), |bch| {
            bch.iter(|| lu(black_box(&a), &mut f, &mut piv, &mut perm, 1, n, n, Par::Seq).unwrap())
        });
        // faer directly on a copy, column-major (the LU of Aᵀ: pivots
        // columns of A, not rows; the layout anvil transposes into) and on
        // a row-major view.
        let (mut p, mut pinv) = (vec![0usize; n], vec![0usize; n]);
        let mut mem =
            MemBuffer::new(faer::linalg::lu::partial_pivoting::factor::lu_in_place_scratch::<
                usize,
                f64,
            >(n, n, Par::Seq, Default::default()));
        for (name, row_major) in [("faer_col_major", false), ("faer_row_major_view", true)] {
            g.bench_function(BenchmarkId::new(name, n), |bch| {
                bch.iter(|| {
                    f.copy_from_slice(black_box(&a));
                    let m = if row_major {
                        MatMut::from_row_major_slice_mut(&mut f, n, n)
                    } else {
                        MatMut::from_column_major_slice_mut(&mut f, n, n)
                    };
                    faer::linalg::lu::partial_pivoting::factor::lu_in_place(
                        m,
                        &mut p,
                        &mut pinv,
                        Par::Seq,
                        MemStack::new(&mut mem),
                        Default::default(),
                    );
                })
            });
        }
    }
    g.finish();
}

fn bench_triangular(c: &mut Criterion) {
    let n = 1024;
    let mut l = spd(n);
    cholesky(&spd(n), &mut l, 1, n, FailMode::Error, Par::Seq).unwrap();
    let b = numbers(n * n, 4);
    let mut x = vec![0.0; n * n];
    let mut g = c.benchmark_group("triangular_solve_1024x1024");
    g.sample_size(10);
    for (name, left_side, transpose_a) in
        [("left", true, false), ("left_transposed", true, true), ("right", false, false)]
    {
        let opts = TriangularSolve { left_side, lower: true, transpose_a, unit_diagonal: false };
        g.bench_function(BenchmarkId::new("anvil", name), |bch| {
            bch.iter(|| {
                triangular_solve(
                    &l,
                    black_box(&b),
                    &mut x,
                    1,
                    n,
                    n,
                    ABatch::PerMatrix,
                    opts,
                    Par::Seq,
                )
                .unwrap()
            })
        });
    }
    // faer directly, column-major triangle and right-hand side (a copy of b
    // per call, as the anvil version makes).
    let lc = MatRef::from_row_major_slice(&l, n, n).to_owned();
    g.bench_function("faer_col_major/left", |bch| {
        bch.iter(|| {
            x.copy_from_slice(black_box(&b));
            let rhs = MatMut::from_column_major_slice_mut(&mut x, n, n);
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                lc.as_ref(),
                rhs,
                Par::Seq,
            );
        })
    });
    g.finish();
}

fn bench_triangular_vector(c: &mut Criterion) {
    let mut g = c.benchmark_group("triangular_solve_vector");
    for n in [64, 200, 500] {
        let mut l = spd(n);
        cholesky(&spd(n), &mut l, 1, n, FailMode::Error, Par::Seq).unwrap();
        let b = numbers(n, 5);
        let mut x = vec![0.0; n];
        for (name, transpose_a) in [("left", false), ("left_transposed", true)] {
            let opts =
                TriangularSolve { left_side: true, lower: true, transpose_a, ..Default::default() };
            g.bench_function(BenchmarkId::new(format!("anvil/{name}"), n), |bch| {
                bch.iter(|| {
                    let (a, p) = (ABatch::PerMatrix, Par::Seq);
                    triangular_solve(&l, black_box(&b), &mut x, 1, n, 1, a, opts, p).unwrap()
                })
            });
            // faer's solve on the row-major triangle (transposed: a view),
            // as anvil called it for one vector before session 30.
            g.bench_function(BenchmarkId::new(format!("faer_row_major_view/{name}"), n), |bch| {
                bch.iter(|| {
                    x.copy_from_slice(black_box(&b));
                    let m = MatRef::from_row_major_slice(&l, n, n);
                    let rhs = MatMut::from_row_major_slice_mut(&mut x, n, 1);
                    if transpose_a {
                        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
                            m.transpose(),
                            rhs,
                            Par::Seq,
                        );
                    } else {
                        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                            m,
                            rhs,
                            Par::Seq,
                        );
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_eigh,
    bench_cholesky,
    bench_lu,
    bench_triangular,
    bench_triangular_vector
);
criterion_main!(benches);
