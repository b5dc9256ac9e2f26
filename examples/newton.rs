//! Newton's method on a nonlinear system, with its Jacobian from `jacfwd`.
//!
//! The system is the 1-D Bratu problem discretised by finite differences:
//! find `u` on `n` interior points of (0, 1) with
//! `(2 u_i - u_{i-1} - u_{i+1}) / h² - λ e^{u_i} = 0` and `u = 0` at both ends.
//! Each Newton step `u ← u - J(u)⁻¹ F(u)` is one traced function: the
//! Jacobian comes from `jacfwd`, the linear solve from `solve` (LU), and
//! `jit` compiles it once. The whole solve is then one `while_loop` that
//! stops at a tolerance, and `vmap` of it solves for several `λ` at once:
//! the loop runs until every system has converged, each keeping its
//! solution from the step it converged on.
//!
//! Run: `cargo run --release --example newton`

#![deny(warnings)]
use anvil::prelude::*;

/// The residual `F(u; λ)`.
fn residual(u: &Var, lam: &Var) -> Var {
    let n = u.shape()[0];
    let h = 1.0 / (n as f64 + 1.0);
    let padded = u.pad(&[(1, 1)], 0.0); // u_0 = u_{n+1} = 0
    let left = padded.slice_axis(0, Some(0), Some(n as i64), 1);
    let right = padded.slice_axis(0, Some(2), None, 1);
    (u * 2.0 - left - right) / (h * h) - lam * &u.exp()
}

/// One Newton step.
fn newton_step(u: &Var, lam: &Var) -> Var {
    let jacobian = jacfwd(residual).invoke([u, lam]);
    u - &jacobian.solve(&residual(u, lam))
}

/// Newton from `u = 0` until `|F(u)| < 1e-10` (at most 50 steps): the
/// solution and the number of steps.
fn newton_solve(lam: &Var) -> anvil::Result<(Var, Var)> {
    let u0 = full(&[N], 0.0);
    while_loop(
        |(u, k): &(Var, Var)| {
            let go = residual(u, lam).norm().gt(&lam.full_like(1e-10));
            go.select(&k.lt(&k.full_like(50.0)), &go)
        },
        |(u, k): &(Var, Var)| (newton_step(u, lam), k + 1.0),
        (&u0, &lam.zeros_like()),
    )
}

const N: usize = 16;

fn main() -> anvil::Result<()> {
    let n = N;
    let lam = Tensor::scalar(1.0);
    let step = jit(newton_step);
    let norm = jit(|u: &Var, lam: &Var| residual(u, lam).norm());

    println!("Bratu problem, n = {n}, λ = 1: Newton from u = 0");
    let mut u = Tensor::zeros(&[n]).unwrap();
    for k in 0..6 {
        println!("  step {k}: |F(u)| = {:.3e}", norm.eval((&u, &lam))?.item()?);
        u = step.eval((&u, &lam))?;
    }
    println!("  final:  |F(u)| = {:.3e}", norm.eval((&u, &lam))?.item()?);
    println!("  u(1/2) ≈ {:.10}", u.to_vec::<f64>()?[n / 2]);

    // The Jacobian is tridiagonal: check one row against the stencil.
    let j = jit(jacfwd(residual)).eval((&u, &lam))?;
    let h2 = ((n + 1) * (n + 1)) as f64;
    let jv = j.to_vec::<f64>()?;
    let row = &jv[n..n + 3];
    let diag = 2.0 * h2 - u.to_vec::<f64>()?[1].exp();
    println!("  J[1, 0..3] = {row:.4?} (stencil: [{:.4}, {diag:.4}, {:.4}])", -h2, -h2);

    // The whole solve as one loop that stops at a tolerance.
    let solve = jit(newton_solve);
    let (u_loop, steps) = solve.eval(&lam)?;
    println!(
        "\nwhile_loop to |F| < 1e-10: {} steps, max |u - u_steps| = {:.1e}",
        steps.item()?,
        (&u_loop - &u).abs()?.max_all()?.item()? // eager ops on the results
    );

    // Several λ at once: vmap of the solve, a batched predicate.
    let lams = Tensor::from_vec(vec![0.5, 1.0, 2.0, 3.0], &[4])?;
    let (us, steps) = jit(vmap(newton_solve)).eval(&lams)?;
    let norms = jit(vmap(|u: &Var, lam: &Var| residual(u, lam).norm())).eval((&us, &lams))?;
    let norms: Vec<String> = norms.to_vec::<f64>()?.iter().map(|r| format!("{r:.1e}")).collect();
    println!("vmap over λ = {lams}: steps {steps}, |F(u)| = [{}]", norms.join(", "));
    let uv = us.to_vec::<f64>()?;
    for (i, l) in lams.to_vec::<f64>()?.iter().enumerate() {
        println!("  λ = {l}: u(1/2) ≈ {:.8}", uv[i * n + n / 2]);
    }
    Ok(())
}
