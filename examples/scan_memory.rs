//! The memory and time of reverse mode through a long `scan`, with and
//! without checkpoints: the gradient of a loss on the final state of
//! `steps` steps of `x ← x + 0.001 tanh(W x)` (x of `n` elements, W an
//! `n × n` loop-invariant matrix) with respect to `W` and `x0`.
//!
//! Run each policy in its own process, so the peak RSS is its own
//! (arguments: steps, n, checkpoint interval or nothing):
//!
//! ```sh
//! cargo run --release --example scan_memory -- 10000 200        # every step's carry kept
//! cargo run --release --example scan_memory -- 10000 200 100    # every 100th (sqrt of 10,000)
//! ```

#![deny(warnings)]
use anvil::prelude::*;
use std::time::Instant;

fn loss(w: &Var, x0: &Var, steps: usize, checkpoint: Option<usize>) -> anvil::Result<Var> {
    let step = |x: &Var, _: &()| (x + &(w.matmul(x).tanh() * 0.001), ());
    let options = ScanOptions { length: Some(steps), checkpoint, ..ScanOptions::default() };
    let (x, ()) = scan_with(step, x0, (), options)?;
    Ok(x.square().sum_all())
}

#[path = "common/rss.rs"]
mod rss;
use rss::peak_rss_mib;

fn main() -> anvil::Result<()> {
    let arg = |i: usize| std::env::args().nth(i).and_then(|a| a.parse::<usize>().ok());
    let (steps, n, checkpoint) = (arg(1).unwrap_or(10_000), arg(2).unwrap_or(200), arg(3));
    let w = Tensor::from_vec(
        (0..n * n).map(|k| ((k % 997) as f64 * 0.37).sin() / (n as f64).sqrt()).collect(),
        &[n, n],
    )?;
    let x0 = Tensor::from_vec((0..n).map(|i| (0.7 * i as f64).sin()).collect(), &[n])?;
    let before = peak_rss_mib();
    let f = jit(grad(move |w: &Var, x0: &Var| loss(w, x0, steps, checkpoint)).argnums(&[0, 1]));
    let start = Instant::now();
    let g = f.eval((&w, &x0))?;
    let first = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let g2 = f.eval((&w, &x0))?;
    let second = start.elapsed().as_secs_f64();
    assert_eq!(g[0].to_vec::<f64>()?, g2[0].to_vec::<f64>()?);
    let norm: f64 = g[0].to_vec::<f64>()?.iter().map(|v| v * v).sum::<f64>().sqrt();
    println!(
        "{steps} steps, n = {n}, checkpoint {:>5}: peak RSS {:7.1} MiB (inputs {:.1} MiB before), first call {:.2} s, second {:.2} s, |dW| = {norm:.12e}",
        checkpoint.map_or("none".into(), |k| k.to_string()),
        peak_rss_mib(),
        before,
        first,
        second
    );
    Ok(())
}
