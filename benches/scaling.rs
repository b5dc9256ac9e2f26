//! Scaling, floors and the thread choice under load (issue 22, items 2, 7
//! and 8). Three modes, each printing a Markdown table:
//!
//! ```sh
//! cargo bench --bench scaling --no-run        # build first (niced, while others build)
//! target/release/deps/scaling-* threads       # item 7: 1 thread, 2 threads, adaptive; idle, then beside a busy process
//! target/release/deps/scaling-* threads idle  # the same, idle phase only
//! target/release/deps/scaling-* sizes         # items 2 and 8: W1, W3, W5 over sizes, 1 and 2 threads, with floors
//! target/release/deps/scaling-* floors        # the machine's rates alone: faer GEMM, memory, page faults
//! target/release/deps/scaling-* workloads W1 W9   # item 2: W1–W13 (or the groups named) beside their floors
//! ```
//!
//! (`cargo bench --bench scaling -- threads` works too.) Each mode takes
//! one to three minutes; run it with the machine otherwise quiet.
//!
//! **threads**: the MLP Jacobians of W1 (`jacfwd`) and W2 (`jacrev`) at
//! n = 256 and 512, each called with `Parallelism::default().threads(1)`,
//! `.threads(2).adaptive(false)` (the fixed rule: every product of at least
//! 200³ multiply-adds and every loop of at least 2¹⁵ elements on both
//! threads) and the default (adaptive), in
//! interleaved rounds, first on the idle machine, then beside one and two
//! CPU-bound busy processes (`sh -c 'while :; do :; done'`, nice 0, not
//! pinned: equal competitors for the cores), which are killed at the end
//! of their phase (also if this program panics). The last column counts
//! the adaptive calls' eligible steps (matrix products, fused loops) by
//! path (`Parallelism::adaptive_counts`).
//!
//! **sizes**: W1 at n = 64…1024, W3 at n = 10³…10⁴, W5 at batch 64…4096,
//! each with one thread and with two (the default parallelism), and each
//! row's floor on this machine measured in the same run: W1's two n³
//! GEMMs at faer's rate for that shape (on two threads: the better of faer
//! on one and on two), W3's and W5's output bytes at the write bandwidth
//! measured for a buffer of that size already mapped (the output is the
//! only large array either must write; a buffer that fits the last-level
//! cache writes faster than one that does not).
//!
//! **workloads**: every workload of the runner (W1–W13 as `bench/compare`
//! runs them, default parallelism) beside its floor, measured in the same
//! run: the larger of a compute floor (multiply-adds at faer's rate for that
//! GEMM shape on the better of one and two threads; W9's matrix–vector
//! products and W11's 8×8 products at the rate of plain loops, where faer's
//! per-call cost would dominate) and a memory floor (inputs read once and
//! outputs written once, each at the bandwidth measured on a mapped buffer
//! of that size, so a working set that fits a cache gets the cache's rate).
//! W12's compute floor is its n cosines by `vmath` on two threads; W13
//! also shows a hand-written Rust loop (each problem's Newton iteration,
//! scalar, two threads), a practical reference beside the memory floor. `workload_floor` says what each floor counts.
//!
//! Times are medians over calls (at least 5 calls and 0.3 s per cell).

mod common;

use anvil::Parallelism;
use common::{sized_mlp, sized_w3, sized_w5, Sized};
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The median of the times of repeated calls of `f`, at least `min_calls`
/// calls and `min_time` in all.
fn median_time(min_calls: usize, min_time: Duration, mut f: impl FnMut()) -> f64 {
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < min_calls || start.elapsed() < min_time {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn fmt(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn call(w: &mut Sized, p: &Parallelism) {
    black_box(w.call(p).expect("the workload runs"));
}

// ------------------------------------------------------------------ rates

/// faer's rate on one `[m, k] @ [k, n]` GEMM with `par`, in multiply-adds
/// per second: the better of row-major and column-major operands (at
/// n = 1024 on one thread, faer was 13–27% faster column-major here; a floor
/// from the slower layout would not be a lower bound).
fn gemm_rate(m: usize, k: usize, n: usize, par: Par) -> f64 {
    let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
    let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut c = vec![0.0; m * n];
    let row = median_time(5, Duration::from_millis(200), || {
        matmul(
            MatMut::from_row_major_slice_mut(&mut c, m, n),
            Accum::Replace,
            MatRef::from_row_major_slice(&a, m, k),
            MatRef::from_row_major_slice(&b, k, n),
            1.0,
            par,
        );
        black_box(&c);
    });
    let col = median_time(5, Duration::from_millis(200), || {
        matmul(
            MatMut::from_column_major_slice_mut(&mut c, m, n),
            Accum::Replace,
            MatRef::from_column_major_slice(&a, m, k),
            MatRef::from_column_major_slice(&b, k, n),
            1.0,
            par,
        );
        black_box(&c);
    });
    (m * k * n) as f64 / row.min(col)
}

/// Bytes per second written into `bytes` of memory already mapped, on
/// `threads` threads (a fill, as a kernel writing its output).
fn write_bandwidth(bytes: usize, threads: usize) -> f64 {
    let mut v = vec![1.0f64; bytes / 8];
    let chunk = v.len().div_ceil(threads);
    let mut x = 0.0;
    let t = median_time(5, Duration::from_millis(300), || {
        x += 1.0;
        if threads == 1 {
            v.fill(x);
        } else {
            v.par_chunks_mut(chunk).for_each(|c| c.fill(x));
        }
        black_box(&v);
    });
    bytes as f64 / t
}

/// Seconds per 4 KiB page of a fresh `bytes` buffer written once (the
/// allocator maps large buffers fresh: each page faults on first write).
fn page_fault_cost(bytes: usize) -> f64 {
    let t = median_time(5, Duration::from_millis(300), || {
        let mut v: Vec<f64> = Vec::with_capacity(bytes / 8);
        // Written element by element (not calloc's pre-zeroed pages).
        v.extend((0..bytes / 8).map(|i| i as f64));
        black_box(&v);
    });
    let filled = {
        let mut v = vec![0.0f64; bytes / 8];
        median_time(5, Duration::from_millis(300), || {
            for (i, x) in v.iter_mut().enumerate() {
                *x = i as f64;
            }
            black_box(&v);
        })
    };
    (t - filled).max(0.0) / (bytes / 4096) as f64
}

fn floors() {
    println!("## Machine rates (this run)\n");
    println!("| quantity | 1 thread | 2 threads |");
    println!("|---|---|---|");
    for n in [64, 128, 256, 512, 1024] {
        let (r1, r2) = (gemm_rate(n, n, n, Par::Seq), gemm_rate(n, n, n, Par::rayon(2)));
        println!(
            "| faer GEMM {n}³ (f64) | {:.1} GFLOP/s | {:.1} GFLOP/s |",
            2.0 * r1 / 1e9,
            2.0 * r2 / 1e9
        );
    }
    let (w1, w2) = (write_bandwidth(256 << 20, 1), write_bandwidth(256 << 20, 2));
    println!("| write bandwidth, 256 MiB mapped | {:.1} GB/s | {:.1} GB/s |", w1 / 1e9, w2 / 1e9);
    println!(
        "| first write of a fresh page (64 MiB) | {:.2} µs | |",
        page_fault_cost(64 << 20) * 1e6
    );
    println!();
}

// ------------------------------------------------------------------ sizes

fn sizes() {
    let one = Parallelism::default().threads(1);
    let two = Parallelism::default().threads(2);
    // Writing `bytes` into mapped memory on 1 and on up to 2 threads.
    let write = |bytes: usize| {
        let t1 = bytes as f64 / write_bandwidth(bytes, 1);
        [t1, t1.min(bytes as f64 / write_bandwidth(bytes, 2))]
    };
    println!("## Scaling (this run; floors from rates measured in the same run)\n");
    println!(
        "| workload | size | 1 thread | floor | anvil/floor | 2 threads | floor | anvil/floor | 1 → 2 threads |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let row = |mut w: Sized, floor: [f64; 2]| {
        call(&mut w, &two); // compile, first call
        let t1 = median_time(5, Duration::from_millis(300), || call(&mut w, &one));
        let t2 = median_time(5, Duration::from_millis(300), || call(&mut w, &two));
        println!(
            "| {} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {:.2}× |",
            w.name,
            w.size,
            fmt(t1),
            fmt(floor[0]),
            t1 / floor[0],
            fmt(t2),
            fmt(floor[1]),
            t2 / floor[1],
            t1 / t2
        );
    };
    for n in [64, 128, 256, 512, 1024] {
        // Two n³ GEMMs (the seed's `W1 @ I` is folded).
        // (The floor on two threads is the better of faer on one and on two.)
        let r1 = gemm_rate(n, n, n, Par::Seq);
        let r2 = gemm_rate(n, n, n, Par::rayon(2)).max(r1);
        let work = 2.0 * (n * n * n) as f64;
        row(sized_mlp(true, n), [work / r1, work / r2]);
    }
    for n in [1000, 2000, 4000, 10_000] {
        row(sized_w3(n), write(n * n * 8));
    }
    for batch in [64, 256, 1024, 4096] {
        // Per example: W1 256×64, b1 256, W2 1×256, b2 1.
        row(sized_w5(batch), write(batch * (256 * 64 + 256 + 256 + 1) * 8));
    }
    println!();
}

// ------------------------------------------------------------------ floors of W1–W13

/// The better of faer on one and on two threads for `[m, k] @ [k, n]`, in
/// multiply-adds per second.
fn best_gemm_rate(m: usize, k: usize, n: usize) -> f64 {
    gemm_rate(m, k, n, Par::Seq).max(gemm_rate(m, k, n, Par::rayon(2)))
}

/// Bytes per second read from `bytes` of memory already mapped (a sum),
/// the better of one and two threads.
fn read_bandwidth(bytes: usize) -> f64 {
    // An integer sum of the bits: it vectorises (a float sum would be bound
    // by the latency of its one chain of additions, not by memory).
    let v: Vec<u64> = (0..bytes / 8).map(|i| (i as f64).to_bits()).collect();
    let sum = |c: &[u64]| c.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let one = median_time(5, Duration::from_millis(200), || {
        black_box(sum(black_box(&v)));
    });
    let chunk = v.len().div_ceil(2);
    let two = median_time(5, Duration::from_millis(200), || {
        black_box(
            v.par_chunks(chunk).map(sum).fold(|| 0u64, |a, b| a.wrapping_add(b)).sum::<u64>(),
        );
    });
    bytes as f64 / one.min(two)
}

/// The memory floor of reading `read` bytes and writing `write` bytes, each
/// at the bandwidth measured for a buffer of its own size (a working set
/// that fits a cache level gets that level's rate): the larger of the two
/// times, a lower bound whether or not reads and writes overlap.
fn memory_floor(read: usize, write: usize) -> (f64, String) {
    let tr = if read >= 4096 { read as f64 / read_bandwidth(read) } else { 0.0 };
    let tw = if write >= 4096 {
        write as f64 / write_bandwidth(write, 1).max(write_bandwidth(write, 2))
    } else {
        0.0
    };
    let mb = |b: usize| b as f64 / 1e6;
    let how = if tw >= tr {
        format!("write {:.2} MB at {:.1} GB/s", mb(write), write as f64 / tw / 1e9)
    } else {
        format!("read {:.2} MB at {:.1} GB/s", mb(read), read as f64 / tr / 1e9)
    };
    (tr.max(tw), how)
}

/// The compute floor of `macs` multiply-adds at `rate` (multiply-adds per second).
fn compute_floor(macs: f64, rate: f64, what: &str) -> (f64, String) {
    (macs / rate, format!("{what}: {:.3} G mul-add at {:.1} GFLOP/s", macs / 1e9, 2.0 * rate / 1e9))
}

/// Multiply-adds per second of `y = A x` (`A` d×d, one thread): the better
/// of faer and of a plain loop over the columns (`y += A[:, j] x[j]`, which
/// vectorises), for W9's matrix–vector products, where faer's per-call
/// cost dominates at d = 8.
fn matvec_rate(d: usize) -> f64 {
    let a: Vec<f64> = (0..d * d).map(|i| (i as f64 * 0.37).sin()).collect();
    let x: Vec<f64> = (0..d).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut y = vec![0.0; d];
    let reps = (1 << 20) / (d * d) + 1;
    let t = median_time(5, Duration::from_millis(200), || {
        for _ in 0..reps {
            y.fill(0.0);
            // `a` read as column-major: column j is a[j*d..(j+1)*d].
            for (col, &xj) in a.chunks_exact(d).zip(black_box(&x)) {
                for (yi, &aij) in y.iter_mut().zip(col) {
                    *yi += aij * xj;
                }
            }
            black_box(&y);
        }
    });
    ((reps * d * d) as f64 / t).max(gemm_rate(d, d, 1, Par::Seq))
}

/// Seconds for `n` cosines by `anvil_cpu::vmath` on two threads (W12's
/// `cos u`, the one transcendental function its Jacobian needs).
fn vmath_cos_time(n: usize) -> f64 {
    let u: Vec<f64> = (0..n).map(|i| (0.37 * (i + 1) as f64).sin()).collect();
    let mut out = vec![0.0; n];
    let chunk = n.div_ceil(2);
    median_time(5, Duration::from_millis(200), || {
        out.par_chunks_mut(chunk)
            .zip(u.par_chunks(chunk))
            .for_each(|(o, u)| anvil::cpu::vmath::cos_f64(u, o));
        black_box(&out);
    })
}

/// Multiply-adds per second of plain-loop `m × m` products over a batch of
/// 4096 matrices on two threads (W11's 8×8 matrices).
fn small_gemm_rate(m: usize) -> f64 {
    let batch = 4096;
    let a: Vec<f64> = (0..batch * m * m).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut c = vec![0.0; batch * m * m];
    let t = median_time(5, Duration::from_millis(200), || {
        c.par_chunks_mut(m * m).zip(a.par_chunks(m * m)).for_each(|(c, a)| {
            for i in 0..m {
                for j in 0..m {
                    c[i * m + j] = (0..m).map(|k| a[i * m + k] * a[j * m + k]).sum();
                }
            }
        });
        black_box(&c);
    });
    (batch * m * m * m) as f64 / t
}

/// W13's Newton iterations by a hand-written loop (two threads), each
/// problem stopping on its own.
fn w13_hand_loop(batch: usize) -> f64 {
    let a: Vec<f64> = (0..batch).map(|k| 1.25 + 0.75 * (0.7 * (k + 1) as f64).sin()).collect();
    let b: Vec<f64> = (0..batch).map(|k| 3.0 * (1.3 * (k + 1) as f64).cos()).collect();
    let mut x = vec![0.0; batch];
    let chunk = batch.div_ceil(2);
    median_time(5, Duration::from_millis(200), || {
        x.par_chunks_mut(chunk).zip(a.par_chunks(chunk).zip(b.par_chunks(chunk))).for_each(
            |(x, (a, b))| {
                for ((x, &a), &b) in x.iter_mut().zip(a).zip(b) {
                    let mut v = 0.0f64;
                    for _ in 0..50 {
                        let f = v * v * v + a * v - b;
                        if f.abs() < 1e-12 {
                            break;
                        }
                        v -= f / (3.0 * v * v + a);
                    }
                    *x = v;
                }
            },
        );
        black_box(&x);
    })
}

/// The floor of one W1–W13 workload, with how it was computed: the larger
/// of its compute floor (multiply-adds at the rate measured for its shape)
/// and its memory floor (inputs read once, outputs written once).
fn workload_floor(name: &str, size: &str) -> (f64, String) {
    let num = |key: &str| -> usize {
        size.split(',')
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {size}"))
    };
    let max = |a: (f64, String), b: (f64, String)| if a.0 >= b.0 { a } else { b };
    let f = 8; // bytes per f64
    match name {
        "W1_mlp_jacfwd" | "W2_mlp_jacrev" => {
            // Two n³ products (the identity seed's product folded); read the
            // weights, write the n×n Jacobian.
            let n = num("n");
            max(
                compute_floor(2.0 * (n * n * n) as f64, best_gemm_rate(n, n, n), "2 n³ GEMM"),
                memory_floor(3 * n * n * f, n * n * f),
            )
        }
        "W3_elementwise_jacfwd" | "W4_pde_residual_jacfwd" => {
            let n = num("n");
            memory_floor(n * f, n * n * f)
        }
        "W5_per_example_grads" => {
            // Write every example's gradient (W1 256×64, b1 256, W2 1×256, b2 1).
            let b = num("batch");
            let per = 256 * 64 + 256 + 256 + 1;
            max(
                compute_floor(
                    (b * 256 * 64 * 2) as f64,
                    best_gemm_rate(b, 64, 256),
                    "fwd + bwd x·W1",
                ),
                memory_floor((b * 65 + per) * f, b * per * f),
            )
        }
        "W6_hessian_logsumexp" => {
            // Aᵀ diag(p) A: one 256×512×256 product.
            max(
                compute_floor((256 * 512 * 256) as f64, best_gemm_rate(256, 512, 256), "Aᵀ D A"),
                memory_floor(512 * 256 * f, 256 * 256 * f),
            )
        }
        "W8a_newton_fori_jit" | "W8b_newton_pyloop_jit_step" => {
            // 10 LU factorisations of n×n (n³/3 multiply-adds each), at GEMM rate.
            let (n, iters) = (num("n"), num("iters"));
            compute_floor(
                (iters * n * n * n) as f64 / 3.0,
                best_gemm_rate(n, n, n),
                "10 LU, n³/3 each",
            )
        }
        "W9_scan_ode_grad" => {
            // 200 RK4 steps: 4 products A·x forward, 4 Aᵀ·λ and 4 rank-1
            // updates of dA backward, d² each.
            // The 8 products per step are sequential; the 800 rank-1
            // updates of dA can be one [d, 800] @ [800, d] product.
            let d = num("d");
            let (t1, how1) =
                compute_floor((200 * 8 * d * d) as f64, matvec_rate(d), "1600 d² matvec");
            let (t2, how2) =
                compute_floor((800 * d * d) as f64, best_gemm_rate(d, 800, d), "dA as one GEMM");
            (t1 + t2, format!("{how1} + {how2}"))
        }
        "W10_gp_nll_grad" => {
            // Cholesky (n³/3) and K⁻¹ from it (n³/3) for the trace terms.
            let n = num("n");
            max(
                compute_floor(
                    2.0 * (n * n * n) as f64 / 3.0,
                    best_gemm_rate(n, n, n),
                    "chol + K⁻¹, 2n³/3",
                ),
                memory_floor(n * n * f, n * n * f),
            )
        }
        "W11_batched_eigh_grad" => {
            // Per 8×8 matrix: 9m³ flops for eigh with vectors (Golub–Van
            // Loan) and two m³ products for the gradient.
            let (b, m) = (num("B"), num("m"));
            max(
                compute_floor(
                    (b * (9 * m * m * m / 2 + 2 * m * m * m)) as f64,
                    small_gemm_rate(m),
                    "eigh 9m³/2 + 2m³",
                ),
                memory_floor(b * m * m * f, b * m * m * f),
            )
        }
        "W12_sparse_pde_jacobian" => {
            // Read u, write three diagonals; n cosines (vmath, 2 threads).
            let n = num("n");
            let cos = vmath_cos_time(n);
            max(memory_floor(n * f, 3 * n * f), (cos, format!("{n} cos by vmath on 2 threads")))
        }
        "W13_batched_while_newton" => {
            let b = num("B");
            let (t, how) = memory_floor(2 * b * f, b * f);
            let hand = w13_hand_loop(b);
            (t, format!("{how}; hand loop {}", fmt(hand)))
        }
        _ => (f64::NAN, "—".into()),
    }
}

/// Every W1–W13 workload (anvil's runner's, default parallelism) beside its
/// floor measured in the same run.
fn workloads(groups: &[String]) {
    println!("## W1–W13 against their floors (this run)\n");
    println!("| workload | size | anvil | floor | anvil/floor | floor: how |");
    println!("|---|---|---|---|---|---|");
    for mut w in common::select(groups) {
        black_box(w.call().expect("the workload runs")); // compile, first call
        let t = median_time(5, Duration::from_millis(300), || {
            black_box(w.call().expect("the workload runs"));
        });
        let (floor, how) = workload_floor(w.name, &w.size);
        let ratio = if floor.is_nan() { "—".to_string() } else { format!("{:.2}", t / floor) };
        let floor = if floor.is_nan() { "—".to_string() } else { fmt(floor) };
        println!("| {} | {} | {} | {floor} | {ratio} | {how} |", w.name, w.size, fmt(t));
    }
    println!();
}

// ------------------------------------------------------------------ threads

/// A CPU-bound process, killed when dropped.
struct Busy(std::process::Child);

impl Busy {
    fn start() -> Busy {
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("start a busy process");
        Busy(child)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `idle_only`: the idle phase alone (no busy processes).
fn threads(idle_only: bool) {
    let modes = [
        ("1 thread", Parallelism::default().threads(1)),
        ("2 threads", Parallelism::default().threads(2).adaptive(false)),
        ("adaptive", Parallelism::default()),
    ];
    let mut workloads = vec![
        sized_mlp(true, 256),
        sized_mlp(true, 512),
        sized_mlp(false, 256),
        sized_mlp(false, 512),
    ];
    for w in &mut workloads {
        call(w, &modes[2].1);
    }
    println!("## Thread choice, idle and beside busy processes (this run)\n");
    println!(
        "| workload | size | busy processes | 1 thread | 2 threads | adaptive | adaptive / best fixed | adaptive steps on 2 threads |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    const ROUNDS: usize = 5;
    let phases: &[usize] = if idle_only { &[0] } else { &[0, 1, 2] };
    for &busy in phases {
        let _busy: Vec<Busy> = (0..busy).map(|_| Busy::start()).collect();
        if busy > 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
        for w in &mut workloads {
            let [one0, two0] = Parallelism::adaptive_counts();
            let mut times = vec![Vec::new(); modes.len()];
            for round in 0..ROUNDS {
                // Rotate the order of the modes from round to round.
                for i in 0..modes.len() {
                    let m = (i + round) % modes.len();
                    let p = modes[m].1;
                    // Warm up: the adaptive mode settles on its choice.
                    median_time(3, Duration::from_millis(50), || call(w, &p));
                    times[m].push(median_time(5, Duration::from_millis(200), || call(w, &p)));
                }
            }
            let t: Vec<f64> = times.into_iter().map(median).collect();
            let [one1, two1] = Parallelism::adaptive_counts();
            let (one, two) = (one1 - one0, two1 - two0);
            println!(
                "| {} | {} | {busy} | {} | {} | {} | {:.2} | {:.0} % of {} |",
                w.name,
                w.size,
                fmt(t[0]),
                fmt(t[1]),
                fmt(t[2]),
                t[2] / t[0].min(t[1]),
                100.0 * two as f64 / (one + two).max(1) as f64,
                one + two
            );
        }
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let mode = args.first().cloned().unwrap_or_default();
    match mode.as_str() {
        "workloads" => workloads(&args[1..]),
        "threads" => threads(args.get(1).is_some_and(|a| a == "idle")),
        "sizes" => sizes(),
        "floors" => floors(),
        _ => {
            eprintln!(
                "usage: scaling workloads [W1 W5 ...]|threads [idle]|sizes|floors   (see the module doc of benches/scaling.rs)"
            );
        }
    }
}
