//! Scaling, floors and the thread choice under load (issue 22, items 2, 7
//! and 8). Three modes, each printing a Markdown table:
//!
//! ```sh
//! cargo bench --bench scaling --no-run        # build first (niced, while others build)
//! target/release/deps/scaling-* threads       # item 7: 1 thread, 2 threads, adaptive; idle, then beside a busy process
//! target/release/deps/scaling-* sizes         # items 2 and 8: W1, W3, W5 over sizes, 1 and 2 threads, with floors
//! target/release/deps/scaling-* floors        # the machine's rates alone: faer GEMM, memory, page faults
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

/// faer's rate on one `[n, k] @ [k, m]` GEMM with `par`, in multiply-adds per second.
fn gemm_rate(m: usize, k: usize, n: usize, par: Par) -> f64 {
    let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
    let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut c = vec![0.0; m * n];
    let t = median_time(5, Duration::from_millis(200), || {
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
    (m * k * n) as f64 / t
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

fn threads() {
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
    for busy in [0, 1, 2] {
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
    let mode = std::env::args().skip(1).find(|a| !a.starts_with("--")).unwrap_or_default();
    match mode.as_str() {
        "threads" => threads(),
        "sizes" => sizes(),
        "floors" => floors(),
        _ => {
            eprintln!(
                "usage: scaling threads|sizes|floors   (see the module doc of benches/scaling.rs)"
            );
        }
    }
}
