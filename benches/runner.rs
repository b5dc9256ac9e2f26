//! The anvil side of `bench/compare`: runs the workloads and prints one line
//! per workload in `jax_reference.py`'s format (tab-separated: name, size,
//! `median_s`, `min_s`, `first_call_s`, `inner`, `cpu/wall`, `minflt/call`,
//! `out`, `sum`, `wsum`, then `first_minflt`: the first call's minor page
//! faults), with the same timing protocol: the first call
//! (trace + compile + run) timed apart, two warm-up calls, one call to size
//! `inner` so a sample lasts `--min-sample` seconds, then `--repeats` samples
//! of `inner` calls; W7 is timed call by call (the median over `--calls`
//! calls, repeated, the median of the run medians reported).
//!
//! ```sh
//! cargo bench --bench runner -- --quick --only W1,W7
//! ```
//!
//! Options: `--quick`, `--only W1,W7` (name prefixes), `--repeats k`,
//! `--min-sample s`, `--calls k`, `--list`.

mod common;

use common::{checksum, shapes, Workload};
use std::time::Instant;

struct Opts {
    quick: bool,
    only: Vec<String>,
    repeats: usize,
    min_sample: f64,
    calls: usize,
    list: bool,
}

fn parse() -> Result<Opts, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut o = Opts {
        quick,
        only: Vec::new(),
        repeats: if quick { 3 } else { 9 },
        min_sample: if quick { 0.0 } else { 0.05 },
        calls: if quick { 1000 } else { 10_000 },
        list: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--quick" | "--bench" => {}
            "--list" => o.list = true,
            "--only" => {
                o.only = value("--only")?
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
            }
            "--repeats" => o.repeats = value("--repeats")?.parse().map_err(|e| format!("{e}"))?,
            "--min-sample" => {
                o.min_sample = value("--min-sample")?.parse().map_err(|e| format!("{e}"))?;
            }
            "--calls" => o.calls = value("--calls")?.parse().map_err(|e| format!("{e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// The fields of `getrusage(RUSAGE_SELF)` used here (Linux, 64-bit).
#[repr(C)]
#[derive(Default)]
struct RUsage {
    utime: [i64; 2],
    stime: [i64; 2],
    maxrss: i64,
    ixrss: i64,
    idrss: i64,
    isrss: i64,
    minflt: i64,
    rest: [i64; 9],
}

extern "C" {
    fn getrusage(who: i32, usage: *mut RUsage) -> i32;
}

fn rusage() -> RUsage {
    let mut r = RUsage::default();
    // SAFETY: `RUsage` has the layout of Linux's `struct rusage` on 64-bit
    // targets; RUSAGE_SELF = 0.
    let rc = unsafe { getrusage(0, &mut r) };
    assert_eq!(rc, 0, "getrusage failed");
    r
}

/// Process CPU time (user + system) in seconds.
fn cpu_time(r: &RUsage) -> f64 {
    let t = |tv: [i64; 2]| tv[0] as f64 + tv[1] as f64 * 1e-6;
    t(r.utime) + t(r.stime)
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Python's `f"{x:.{prec}e}"`: `1.2345e-03`, not Rust's `1.2345e-3`.
fn py_e(x: f64, prec: usize) -> String {
    let s = format!("{x:.prec$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

struct Timing {
    first: f64,
    median: f64,
    min: f64,
    inner: usize,
    cpu_per_wall: f64,
    faults: f64,
    extra: String,
}

fn time_batches(w: &mut Workload, o: &Opts) -> anvil::Result<Timing> {
    for _ in 0..2 {
        w.call()?;
    }
    let t0 = Instant::now();
    w.call()?;
    let one = t0.elapsed().as_secs_f64().max(1e-9);
    let inner = if o.min_sample > 0.0 { ((o.min_sample / one) as usize).max(1) } else { 1 };
    let mut samples = Vec::with_capacity(o.repeats);
    let (r0, w0) = (rusage(), Instant::now());
    for _ in 0..o.repeats {
        let t0 = Instant::now();
        for _ in 0..inner {
            w.call()?;
        }
        samples.push(t0.elapsed().as_secs_f64() / inner as f64);
    }
    let wall = w0.elapsed().as_secs_f64();
    let r1 = rusage();
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(Timing {
        first: 0.0,
        median: median(&mut samples),
        min,
        inner,
        cpu_per_wall: (cpu_time(&r1) - cpu_time(&r0)) / wall,
        faults: (r1.minflt - r0.minflt) as f64 / (o.repeats * inner) as f64,
        extra: String::new(),
    })
}

fn time_latency(w: &mut Workload, o: &Opts) -> anvil::Result<Timing> {
    for _ in 0..200 {
        w.call()?;
    }
    let mut run_meds = Vec::new();
    let mut run_p90 = Vec::new();
    let mut ts = vec![0.0; o.calls];
    let (r0, w0) = (rusage(), Instant::now());
    for _ in 0..o.repeats {
        for t in ts.iter_mut() {
            let t0 = Instant::now();
            w.call()?;
            *t = t0.elapsed().as_secs_f64();
        }
        let mut sorted = ts.clone();
        sorted.sort_by(f64::total_cmp);
        // numpy.percentile's default (linear interpolation) at 90%.
        let pos = 0.9 * (sorted.len() - 1) as f64;
        let (lo, frac) = (pos.floor() as usize, pos - pos.floor());
        let hi = (lo + 1).min(sorted.len() - 1);
        run_p90.push(sorted[lo] + (sorted[hi] - sorted[lo]) * frac);
        run_meds.push(median(&mut sorted));
    }
    let wall = w0.elapsed().as_secs_f64();
    let r1 = rusage();
    let min = run_meds.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(Timing {
        first: 0.0,
        median: median(&mut run_meds),
        min,
        inner: 1,
        cpu_per_wall: (cpu_time(&r1) - cpu_time(&r0)) / wall,
        faults: (r1.minflt - r0.minflt) as f64 / (o.repeats * o.calls) as f64,
        extra: format!("\tcalls_per_run={}\tp90_s={}", o.calls, py_e(median(&mut run_p90), 4)),
    })
}

fn run(w: &mut Workload, o: &Opts) -> anvil::Result<()> {
    let (r0, t0) = (rusage(), Instant::now());
    let out = w.call()?;
    let first = t0.elapsed().as_secs_f64();
    // Minor page faults of the first call: its fresh pages (about 1.7 µs
    // each here) are part of `first_call_s`, apart from trace and compile.
    let first_faults = rusage().minflt - r0.minflt;
    let mut t = if w.latency { time_latency(w, o)? } else { time_batches(w, o)? };
    t.first = first;
    t.extra.push_str(&format!("\tfirst_minflt={first_faults}"));
    let (s, ws) = checksum(&out);
    println!(
        "{}\t{}\tmedian_s={}\tmin_s={}\tfirst_call_s={:.3}\tinner={}\tcpu/wall={:.2}\t\
         minflt/call={:.0}\tout={}\tsum={}\twsum={}{}",
        w.name,
        w.size,
        py_e(t.median, 4),
        py_e(t.min, 4),
        t.first,
        t.inner,
        t.cpu_per_wall,
        t.faults,
        shapes(&out),
        py_e(s, 12),
        py_e(ws, 12),
        t.extra
    );
    Ok(())
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("runner: {e}");
            std::process::exit(2);
        }
    };
    let mut workloads = common::select(&o.only);
    if o.list {
        for w in &workloads {
            println!("{}\t{}", w.name, w.size);
        }
        return;
    }
    println!(
        "# anvil {} threads={} repeats={} min_sample={} quick={}",
        env!("CARGO_PKG_VERSION"),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        o.repeats,
        o.min_sample,
        if o.quick { "True" } else { "False" }
    );
    let mut failed = false;
    for w in &mut workloads {
        if let Err(e) = run(w, &o) {
            println!("{}\t{}\terror={e}", w.name, w.size);
            failed = true;
        }
    }
    println!("# maxrss_kb={}", rusage().maxrss);
    if failed {
        std::process::exit(1);
    }
}
