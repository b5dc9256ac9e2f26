//! Gaussian-process regression: fit the hyperparameters of an RBF kernel by
//! gradient descent on the negative log marginal likelihood.
//!
//! For inputs `X` (`n × d`) and targets `y`, the kernel matrix is
//! `K = s² exp(−|xᵢ − xⱼ|² / (2ℓ²)) + σ² I`, and
//!
//! ```text
//! NLL(θ) = ½ yᵀ K⁻¹ y + ½ log det K + ½ n log 2π,   θ = (log ℓ, log s², log σ²)
//! ```
//!
//! computed through a Cholesky factor `K = L Lᵀ`: `log det K = 2 Σ log Lᵢᵢ`
//! and `K⁻¹ y = cho_solve(L, y)`. `value_and_grad` differentiates it in
//! reverse mode through `cholesky` and `cho_solve`; each step is one
//! compiled call. The data are synthetic (a smooth function plus noise);
//! the fit recovers a length scale and a noise level close to the ones the
//! data were made with, then predicts at new points with the posterior
//! mean `K*ᵀ K⁻¹ y`.
//!
//! Run: `cargo run --release --example gaussian_process`

#![deny(warnings)]
use anvil::linalg;
use anvil::prelude::*;

/// Squared distances `|xᵢ − zⱼ|²` between the rows of `x` and `z`.
fn sq_dist(x: &Var, z: &Var) -> Var {
    let xx = x.square().sum(&[1]).unsqueeze(1);
    let zz = z.square().sum(&[1]).unsqueeze(0);
    xx + zz - x.matmul(&z.transpose()) * 2.0
}

/// The RBF kernel `s² exp(−d² / (2ℓ²))` between the rows of `x` and `z`.
fn rbf(theta: &Var, x: &Var, z: &Var) -> Var {
    let p = theta.exp();
    let (ell, s2) = (p.i(ix![0]), p.i(ix![1]));
    (sq_dist(x, z) / (ell.square() * -2.0)).exp() * s2
}

/// The negative log marginal likelihood of `y` at hyperparameters `theta`.
fn nll(theta: &Var, x: &Var, y: &Var) -> Var {
    let n = x.shape()[0];
    let noise = theta.exp().i(ix![2]);
    let k = rbf(theta, x, x) + linalg::eye_of(n, x) * noise;
    let l = linalg::cholesky(&k);
    let alpha = linalg::cho_solve(&l, y);
    let log_det = linalg::diagonal(&l, 0).log().sum_all() * 2.0;
    (y * &alpha).sum_all() * 0.5
        + log_det * 0.5
        + 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln()
}

/// The posterior mean at the rows of `xs`.
fn predict(theta: &Var, x: &Var, y: &Var, xs: &Var) -> Var {
    let n = x.shape()[0];
    let noise = theta.exp().i(ix![2]);
    let k = rbf(theta, x, x) + linalg::eye_of(n, x) * noise;
    let alpha = linalg::cho_solve(&linalg::cholesky(&k), y);
    rbf(theta, xs, x).matmul(&alpha.unsqueeze(1)).squeeze(&[1])
}

/// The function the data come from.
fn truth(t: f64) -> f64 {
    (3.0 * t).sin() + 0.5 * t
}

fn main() -> anvil::Result<()> {
    let n = 80;
    // Inputs in [-2, 2], targets with noise of standard deviation 0.1
    // (a fixed pseudo-random sequence, so the run is reproducible).
    let ts: Vec<f64> = (0..n).map(|i| -2.0 + 4.0 * (i as f64 + 0.5) / n as f64).collect();
    let noise: Vec<f64> = (0..n)
        .map(|i| {
            let u = ((i as f64 * 12.9898).sin() * 43758.5453).rem_euclid(1.0);
            0.1 * 3f64.sqrt() * (2.0 * u - 1.0) // uniform, standard deviation 0.1
        })
        .collect();
    let x = Tensor::from_vec(ts.clone(), &[n, 1])?;
    let y = Tensor::from_vec(ts.iter().zip(&noise).map(|(&t, e)| truth(t) + e).collect(), &[n])?;

    let step = jit(value_and_grad(nll));
    let mut theta = Tensor::from_vec(vec![0.0, 0.0, 0.0], &[3])?; // ℓ = s² = σ² = 1
    let lr = 0.01;
    println!("step        NLL      ell       s2    noise");
    for k in 0..=150 {
        let (value, g) = step.eval((&theta, &x, &y))?;
        if k % 10 == 0 {
            let p: Vec<f64> = theta.to_vec::<f64>()?.iter().map(|v| v.exp()).collect();
            println!("{k:4} {:10.4} {:8.4} {:8.4} {:8.4}", value.item()?, p[0], p[1], p[2]);
        }
        // Gradient descent on θ with a step bounded per coordinate.
        let th: Vec<f64> = theta
            .to_vec::<f64>()?
            .iter()
            .zip(g.to_vec::<f64>()?)
            .map(|(t, d)| t - (lr * d).clamp(-0.2, 0.2))
            .collect();
        theta = Tensor::from_vec(th, &[3])?;
    }
    let p: Vec<f64> = theta.to_vec::<f64>()?.iter().map(|v| v.exp()).collect();
    println!(
        "fitted: length scale {:.3}, signal variance {:.3}, noise std {:.3}",
        p[0],
        p[1],
        p[2].sqrt()
    );

    let probe = [-1.5, -0.5, 0.25, 1.0, 1.75];
    let xs = Tensor::from_vec(probe.to_vec(), &[probe.len(), 1])?;
    let mean = jit(predict).eval((&theta, &x, &y, &xs))?.to_vec::<f64>()?;
    println!("     t   posterior mean   truth");
    for (t, m) in probe.iter().zip(mean) {
        println!("{t:6.2} {m:16.4} {:7.4}", truth(*t));
    }
    Ok(())
}
