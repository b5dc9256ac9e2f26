//! The peak memory of a dense Jacobian, whole or in chunks: `jacfwd` and
//! `jacrev` of `f(x) = sin(x) · cumsum(x) + tanh(x) · sum(x²)` (every output
//! depends on every input: a dense `n × n` result), with `chunk_size(k)` a
//! loop whose body computes `k` columns (rows) and writes them into the
//! preallocated result.
//!
//! Run each configuration in its own process, so the peak RSS is its own
//! (arguments: n, `fwd` or `rev`, chunk size or nothing):
//!
//! ```sh
//! cargo run --release --example jacobian_memory -- 3000 fwd        # unchunked
//! cargo run --release --example jacobian_memory -- 3000 fwd 100    # 30 chunks of 100
//! cargo run --release --example jacobian_memory -- 3000 rev 100
//! ```

#![deny(warnings)]
use anvil::prelude::*;
use std::time::Instant;

fn f(x: &Var) -> Var {
    x.sin() * x.cumsum(0, false) + x.tanh() * x.square().sum_all()
}

#[path = "common/rss.rs"]
mod rss;
use rss::peak_rss_mib;

fn main() -> anvil::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n = args.get(1).and_then(|a| a.parse::<usize>().ok()).unwrap_or(3000);
    let forward = args.get(2).is_none_or(|a| a != "rev");
    let chunk = args.get(3).and_then(|a| a.parse::<usize>().ok());
    let x = Tensor::from_vec((0..n).map(|i| (0.7 * i as f64).sin()).collect(), &[n])?;
    let before = peak_rss_mib();
    let start = Instant::now();
    let j = match (forward, chunk) {
        (true, None) => jit(jacfwd(f)).eval(&x)?,
        (true, Some(k)) => jit(jacfwd(f).chunk_size(k)).eval(&x)?,
        (false, None) => jit(jacrev(f)).eval(&x)?,
        (false, Some(k)) => jit(jacrev(f).chunk_size(k)).eval(&x)?,
    };
    let time = start.elapsed().as_secs_f64();
    // Read before anything else copies the result.
    let peak = peak_rss_mib();
    let result_mib = (n * n * 8) as f64 / (1024.0 * 1024.0);
    let checksum: f64 = j.to_vec::<f64>()?.iter().sum();
    println!(
        "n = {n}, {}, chunk {:>5}: peak RSS {:7.1} MiB ({:.1} before; the result is {result_mib:.1} MiB), first call {time:.2} s, sum {checksum:.12e}",
        if forward { "jacfwd" } else { "jacrev" },
        chunk.map_or("none".into(), |k| k.to_string()),
        peak,
        before,
    );
    Ok(())
}
