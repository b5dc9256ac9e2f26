//! A Jacobian split across MPI processes, per-example gradients sharded by
//! example, and a data-parallel gradient, each checked against the
//! single-process result.
//!
//! ```text
//! cargo build --release -p anvil-ad-mpi --features mpi --example distributed_jacobian
//! mpirun --allow-run-as-root --oversubscribe -n 2 target/release/examples/distributed_jacobian [n] [batch] [reps]
//! ```
//!
//! - W1 of the benchmarks (`f(x) = W3 tanh(W2 tanh(W1 x + b1) + b2) + b3`,
//!   square width `n`, default 64): `jacfwd_sharded`, each rank pushing its
//!   `n / p` basis directions (counted), against `jacfwd` on one process.
//! - W5 (`loss = mean((W2 tanh(W1 x + b1) + b2 - y)^2)`, in 64, hidden 256,
//!   out 1, default batch 256): per-example gradients under `shard_map`
//!   (each rank its `batch / p` examples), and the gradient of the loss
//!   summed over all ranks' examples (`data_parallel`), against one process.
//!
//! The inputs are closed-form (sines of the index), not the benchmark's
//! random draws. Rank 0 prints the checks and the median wall time of each
//! call over `reps` calls (default 5); the program exits non-zero when a
//! check fails.
use anvil::prelude::*;
use anvil_mpi::{data_parallel, jacfwd_sharded, pvary, shard_map};
use std::time::Instant;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn closed_form(shape: &[usize], salt: f64, scale: f64) -> Res<Tensor> {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| scale * ((i as f64 + 1.0) * 0.537 + salt).sin()).collect();
    Ok(Tensor::from_vec(v, shape)?)
}

fn max_rel_diff(a: &Tensor, b: &Tensor) -> Res<f64> {
    let (a, b) = (a.to_vec::<f64>()?, b.to_vec::<f64>()?);
    let scale = b.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-300);
    Ok(a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f64, f64::max) / scale)
}

/// The median wall time of `reps` calls of `f`, in seconds.
fn median_time(reps: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> Res<()> {
    let mpi = anvil_mpi::init()?;
    let (rank, p) = (mpi.rank(), mpi.size());
    let arg = |i: usize, default: usize| -> usize {
        std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(default)
    };
    let (n, batch, reps) = (arg(1, 64), arg(2, 256), arg(3, 5).max(1));
    let say = |line: String| {
        if rank == 0 {
            println!("{line}");
        }
    };
    let mut ok = true;

    // W1: the MLP Jacobian, its basis split over the ranks.
    let s = 1.0 / (n as f64).sqrt();
    let (w1, w2, w3) = (
        closed_form(&[n, n], 0.1, s)?,
        closed_form(&[n, n], 0.2, s)?,
        closed_form(&[n, n], 0.3, s)?,
    );
    let (b1, b2, b3) =
        (closed_form(&[n], 0.4, 0.1)?, closed_form(&[n], 0.5, 0.1)?, closed_form(&[n], 0.6, 0.1)?);
    let x = closed_form(&[n], 0.7, 1.0)?;
    let mlp = move |x: &Var| {
        let h = (w1.matmul_var(x) + &b1).tanh();
        let h = (w2.matmul_var(&h) + &b2).tanh();
        w3.matmul_var(&h) + &b3
    };
    let sharded = jacfwd_sharded(mlp.clone(), "basis");
    let single = jit(jacfwd(mlp));
    let j = sharded.eval(&x)?;
    let want = single.eval(&x)?;
    let err = max_rel_diff(&j, &want)?;
    let directions = sharded.local_directions();
    ok &= err <= 1e-12 && directions * p == n;
    say(format!("W1 n={n}: jacfwd_sharded on {p} ranks = jacfwd on one (max rel diff {err:.1e})"));
    // Every rank reports its own count (the lines may interleave).
    println!("W1 n={n}: rank {rank} pushed {directions} of {n} basis directions");
    let t_sharded = median_time(reps, || Ok(sharded.eval(&x).map(drop)?))?;
    let t_single = median_time(reps, || Ok(single.eval(&x).map(drop)?))?;
    say(format!(
        "W1 n={n}: sharded {:.3} ms, one process {:.3} ms (median of {reps})",
        t_sharded * 1e3,
        t_single * 1e3
    ));

    // W5: per-example gradients sharded by example, and the data-parallel gradient.
    let (din, hidden) = (64, 256);
    let params = (
        closed_form(&[hidden, din], 1.1, 1.0 / (din as f64).sqrt())?,
        closed_form(&[hidden], 1.2, 0.1)?,
        closed_form(&[1, hidden], 1.3, 1.0 / (hidden as f64).sqrt())?,
        closed_form(&[1], 1.4, 0.1)?,
    );
    let xs = closed_form(&[batch, din], 1.5, 1.0)?;
    let ys = closed_form(&[batch, 1], 1.6, 1.0)?;
    let loss = |w: &(Var, Var, Var, Var), x: &Var, y: &Var| {
        let h = (w.0.matmul(x) + &w.1).tanh();
        (w.2.matmul(&h) + &w.3 - y).square().mean()
    };
    let per_example = vmap(grad(loss)).in_axes((None, Some(0), Some(0)));
    // The parameters are replicated; each rank keeps its own examples'
    // gradients only when they are marked varying first (JAX's `pvary`):
    // otherwise the gradient of a replicated value is summed over the
    // ranks, as in JAX's shard_map.
    let body = |w: &(Var, Var, Var, Var), x: &Var, y: &Var| {
        let v = |t: &Var| pvary(t, "batch");
        per_example.apply(((v(&w.0), v(&w.1), v(&w.2), v(&w.3)), x, y))
    };
    let sharded = shard_map(body, "batch").in_axes((None, Some(0), Some(0)));
    let single = jit(per_example.clone());
    let g = sharded.eval((&params, &xs, &ys))?;
    let want = single.eval((&params, &xs, &ys))?;
    let err = [
        max_rel_diff(&g.0, &want.0)?,
        max_rel_diff(&g.1, &want.1)?,
        max_rel_diff(&g.2, &want.2)?,
        max_rel_diff(&g.3, &want.3)?,
    ]
    .into_iter()
    .fold(0f64, f64::max);
    ok &= err <= 1e-12;
    say(format!(
        "W5 batch={batch}: per-example gradients, {} examples per rank, = one process (max rel diff {err:.1e})",
        batch / p
    ));
    let t_sharded = median_time(reps, || Ok(sharded.eval((&params, &xs, &ys)).map(drop)?))?;
    let t_single = median_time(reps, || Ok(single.eval((&params, &xs, &ys)).map(drop)?))?;
    say(format!(
        "W5 batch={batch}: sharded {:.3} ms, one process {:.3} ms (median of {reps})",
        t_sharded * 1e3,
        t_single * 1e3
    ));

    // The gradient of the loss summed over the examples of every rank.
    let summed = |w: &(Var, Var, Var, Var), xy: &(Var, Var)| {
        let h = (w.0.matmul(&xy.0.transpose()) + w.1.unsqueeze(1)).tanh();
        (w.2.matmul(&h) + w.3.unsqueeze(1) - xy.1.transpose()).square().sum_all()
    };
    let dp = grad(data_parallel(summed, "batch"));
    let g = dp.eval((&params, (&xs, &ys)))?;
    let want = grad(summed).eval((&params, (&xs, &ys)))?;
    let err = [
        max_rel_diff(&g.0, &want.0)?,
        max_rel_diff(&g.1, &want.1)?,
        max_rel_diff(&g.2, &want.2)?,
        max_rel_diff(&g.3, &want.3)?,
    ]
    .into_iter()
    .fold(0f64, f64::max);
    ok &= err <= 1e-12;
    say(format!("data-parallel gradient over {p} ranks = one process (max rel diff {err:.1e})"));

    // The latency of one checked collective: an all-reduce of one f64.
    let psum = anvil_mpi::spmd(|x: &Var| anvil_mpi::all_reduce_sum(x, "r"), "r");
    let one = Tensor::scalar(1.0);
    let t = median_time(reps.max(20), || Ok(psum.eval(&one).map(drop)?))?;
    say(format!("all_reduce_sum of one f64 on {p} ranks: {:.1} µs per call", t * 1e6));

    drop(mpi);
    if !ok {
        return Err("a sharded result differs from the single-process one".into());
    }
    Ok(())
}

/// `W x` for a weight tensor `W` and a traced vector `x`.
trait MatmulVar {
    fn matmul_var(&self, x: &Var) -> Var;
}

impl MatmulVar for Tensor {
    fn matmul_var(&self, x: &Var) -> Var {
        x.tracer().constant(self.clone()).matmul(x)
    }
}
