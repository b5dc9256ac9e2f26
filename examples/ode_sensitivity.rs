//! Sensitivities of an ODE solution, through a `scan`.
//!
//! A damped, driven pendulum with parameters θ = (damping, stiffness,
//! drive), `x'' = -c x' - k sin x + a cos t`, is integrated with RK4 by a
//! `scan` over 2,000 steps (the step's closure reads θ: the body closes
//! over the parameters being differentiated). Then:
//!
//! - the gradient of a loss on the final state with respect to θ, by
//!   reverse mode through the scan, against central finite differences;
//! - the Jacobian of the final state with respect to θ by forward mode
//!   (`jacfwd`) and by reverse mode (`jacrev`), which agree;
//! - the same gradient with the reverse pass checkpointed every 50 steps
//!   (`ScanOptions::checkpoint`): the same numbers, with the memory of
//!   40 carries instead of 2,000.
//!
//! Run: `cargo run --release --example ode_sensitivity`

#![deny(warnings)]
use anvil::prelude::*;

const STEPS: usize = 2000;
const DT: f64 = 0.005;

/// The right-hand side of `(x, v)' = (v, -c v - k sin x + a cos t)`.
fn rhs(theta: &Var, s: &Var, t: &Var) -> Var {
    let (c, k, a) = (theta.i(ix![0]), theta.i(ix![1]), theta.i(ix![2]));
    let (x, v) = (s.i(ix![0]), s.i(ix![1]));
    let acc = -(&c * &v) - &k * &x.sin() + &a * &t.cos();
    stack(&[&v, &acc], 0)
}

/// The state after `STEPS` RK4 steps from `s0`, and the trajectory of `x`.
fn integrate(theta: &Var, s0: &Var) -> anvil::Result<(Var, Var)> {
    integrate_with(theta, s0, None)
}

/// [`integrate`], its reverse pass checkpointed every `checkpoint` steps.
fn integrate_with(theta: &Var, s0: &Var, checkpoint: Option<usize>) -> anvil::Result<(Var, Var)> {
    let step = |(s, t): &(Var, Var), _: &()| {
        let h = DT;
        let k1 = rhs(theta, s, t);
        let k2 = rhs(theta, &(s + &(&k1 * (h / 2.0))), &(t + h / 2.0));
        let k3 = rhs(theta, &(s + &(&k2 * (h / 2.0))), &(t + h / 2.0));
        let k4 = rhs(theta, &(s + &(&k3 * h)), &(t + h));
        let next = s + &((k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6.0));
        let x = next.i(ix![0]);
        ((next, t + h), x)
    };
    let options = ScanOptions { length: Some(STEPS), checkpoint, ..ScanOptions::default() };
    let ((s, _), xs) = scan_with(step, (s0, &s0.i(ix![0]).zeros_like()), (), options)?;
    Ok((s, xs))
}

/// A loss on the final state: distance to a target.
fn loss(theta: &Var, s0: &Var) -> anvil::Result<Var> {
    loss_with(theta, s0, None)
}

fn loss_with(theta: &Var, s0: &Var, checkpoint: Option<usize>) -> anvil::Result<Var> {
    let (s, _) = integrate_with(theta, s0, checkpoint)?;
    let target = s.zeros_like().at(ix![0]).set(1.0); // [1, 0]
    Ok((s - target).square().sum_all())
}

fn main() -> anvil::Result<()> {
    let theta = Tensor::from_vec(vec![0.3, 2.0, 0.8], &[3])?;
    let s0 = Tensor::from_vec(vec![0.5, 0.0], &[2])?;

    let (s, xs) = jit(integrate).eval((&theta, &s0))?;
    println!("pendulum, θ = (c, k, a) = {theta}, {STEPS} RK4 steps of {DT}");
    println!(
        "  final state (x, v) = {s}; x over the run: min {:.4}, max {:.4}",
        xs.to_vec::<f64>()?.iter().copied().fold(f64::INFINITY, f64::min),
        xs.to_vec::<f64>()?.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    );

    // Reverse mode through the scan, against finite differences.
    let (value, g) = jit(value_and_grad(loss)).eval((&theta, &s0))?;
    let l = |th: &[f64]| -> anvil::Result<f64> {
        jit(loss).eval((&Tensor::from_vec(th.to_vec(), &[3])?, &s0))?.item()
    };
    let th = theta.to_vec::<f64>()?;
    let h = 1e-6;
    let mut fd = Vec::new();
    for i in 0..3 {
        let (mut p, mut m) = (th.clone(), th.clone());
        p[i] += h;
        m[i] -= h;
        fd.push((l(&p)? - l(&m)?) / (2.0 * h));
    }
    println!("\nloss = {:.10}", value.item()?);
    println!("  dloss/dθ (reverse mode)      = {g}");
    println!(
        "  dloss/dθ (finite differences) = {:?}",
        fd.iter().map(|v| format!("{v:.8}")).collect::<Vec<_>>()
    );
    let err = g.to_vec::<f64>()?.iter().zip(&fd).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    println!("  max difference {err:.1e}");

    // The same gradient, the reverse pass keeping every 50th carry only.
    let checkpointed = |theta: &Var, s0: &Var| loss_with(theta, s0, Some(50));
    let gc = jit(grad(checkpointed)).eval((&theta, &s0))?;
    let same = gc
        .to_vec::<f64>()?
        .iter()
        .zip(g.to_vec::<f64>()?)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("  checkpointed every 50 steps: the same to {same:.1e}");

    // Forward and reverse Jacobians of the final state with respect to θ.
    let final_state = |theta: &Var, s0: &Var| -> anvil::Result<Var> { Ok(integrate(theta, s0)?.0) };
    let jf = jit(jacfwd(final_state)).eval((&theta, &s0))?;
    let jr = jit(jacrev(final_state)).eval((&theta, &s0))?;
    println!("\nd(final state)/dθ by jacfwd:\n{jf}");
    let diff = jf
        .to_vec::<f64>()?
        .iter()
        .zip(jr.to_vec::<f64>()?)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("  jacrev agrees to {diff:.1e}");

    // Per-parameter-set gradients: vmap over several θ.
    let thetas = Tensor::from_vec(vec![0.3, 2.0, 0.8, 0.1, 1.0, 0.0, 0.5, 3.0, 1.5], &[3, 3])?;
    let per = jit(vmap(grad(loss)).in_axes([Some(0), None])).eval((&thetas, &s0))?;
    println!("\nvmap(grad(loss)) over three θ:\n{per}");
    Ok(())
}
