//! The benchmark workloads W1–W8 and W12 of `shared/bench/README.md`, written with
//! anvil's public API as a user would, with the same functions, sizes,
//! inputs (NumPy's `default_rng(0)`, re-implemented in [`npy_random`]) and
//! dtype (f64) as `jax_reference.py`.
//!
//! Each [`Workload`] owns its inputs and its `jit`-compiled transform; its
//! `call` is the timed part (the cached call, like JAX's jitted call). Shared
//! by the criterion bench (`benches/workloads.rs`) and the comparison runner
//! (`benches/runner.rs`, used by `bench/compare`).
#![allow(dead_code)] // each bench binary uses a different part

pub mod npy_random;

use anvil::prelude::*;
use anvil::Parallelism;
use npy_random::NpRng;

/// A result of one call: every output leaf, in JAX's order.
pub type Outs = Vec<Tensor>;

/// One workload at one size, ready to call.
pub struct Workload {
    /// `W1_mlp_jacfwd`, ... as printed by `jax_reference.py`.
    pub name: &'static str,
    /// `n=64`, ... as printed by `jax_reference.py`.
    pub size: String,
    /// W7 is timed call by call (latency); the others by batches of calls.
    pub latency: bool,
    call: Box<dyn FnMut() -> anvil::Result<Outs>>,
}

impl Workload {
    fn new(
        name: &'static str,
        size: impl Into<String>,
        call: impl FnMut() -> anvil::Result<Outs> + 'static,
    ) -> Workload {
        Workload { name, size: size.into(), latency: false, call: Box::new(call) }
    }

    /// The timed part: one call of the compiled transform on its inputs.
    pub fn call(&mut self) -> anvil::Result<Outs> {
        (self.call)()
    }

    /// `name/size`, for criterion.
    pub fn id(&self) -> String {
        format!("{}/{}", self.name, self.size)
    }
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Workload({} {})", self.name, self.size)
    }
}

fn tensor(data: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(data, shape).expect("shape matches the data")
}

fn scaled(rng: &mut NpRng, shape: &[usize], s: f64) -> Tensor {
    let n = shape.iter().product();
    tensor(rng.normals(n).into_iter().map(|v| v * s).collect(), shape)
}

/// Every workload whose name starts with one of `prefixes` (all if empty),
/// in `jax_reference.py`'s order; as there, a prefix ending in a digit
/// does not select a longer number (`W1` is not `W12`).
pub fn select(prefixes: &[String]) -> Vec<Workload> {
    // A group id selects that group only (`W1` is not `W10`); a longer
    // prefix selects within its group (`W8a`, `W9_scan_ode_grad`).
    let want = |group: &str| {
        prefixes.is_empty()
            || prefixes.iter().any(|p| {
                p == group
                    || (p.starts_with(group)
                        && !p[group.len()..].starts_with(|c: char| c.is_ascii_digit()))
            })
    };
    let mut out = Vec::new();
    if want("W1") {
        out.extend([64, 256, 512].map(|n| mlp("W1_mlp_jacfwd", true, n)));
    }
    if want("W2") {
        out.extend([256, 512].map(|n| mlp("W2_mlp_jacrev", false, n)));
    }
    if want("W3") {
        out.push(w3(1000));
    }
    if want("W4") {
        out.push(w4(2000));
    }
    if want("W5") {
        out.push(w5(256, 64, 256, 1));
    }
    if want("W6") {
        out.push(w6(512, 256));
    }
    if want("W7") {
        out.push(w7());
    }
    if want("W8") {
        out.extend(w8(200, 10));
    }
    if want("W9") {
        out.extend([8, 128].map(w9));
    }
    if want("W10") {
        out.extend([256, 1024].map(w10));
    }
    if want("W11") {
        out.push(w11(4096, 8));
    }
    if want("W12") {
        out.extend([2000, 1_000_000].map(w12));
    }
    if want("W13") {
        out.push(w13(100_000));
    }
    out
}

// ------------------------------------------------------------------ W1 / W2

/// `W3 tanh(W2 tanh(W1 x + b1) + b2) + b3`; args `x, W1, b1, W2, b2, W3, b3`.
fn mlp_fn(a: &[Var]) -> Vec<Var> {
    let (x, w1, b1, w2, b2, w3, b3) = (&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6]);
    let h1 = (w1.matmul(x) + b1).tanh();
    let h2 = (w2.matmul(&h1) + b2).tanh();
    vec![w3.matmul(&h2) + b3]
}

fn mlp(name: &'static str, forward: bool, n: usize) -> Workload {
    let args = mlp_args(n);
    let size = format!("n={n}");
    if forward {
        let f = jit(jacfwd(mlp_fn));
        Workload::new(name, size, move || f.eval(&args))
    } else {
        let f = jit(jacrev(mlp_fn));
        Workload::new(name, size, move || f.eval(&args))
    }
}

/// W1's and W2's arguments at width `n`.
fn mlp_args(n: usize) -> Vec<Tensor> {
    // Draw order: W1, b1, W2, b2, W3, b3, x.
    let mut rng = NpRng::new(0);
    let s = 1.0 / (n as f64).sqrt();
    let w1 = scaled(&mut rng, &[n, n], s);
    let b1 = scaled(&mut rng, &[n], 0.1);
    let w2 = scaled(&mut rng, &[n, n], s);
    let b2 = scaled(&mut rng, &[n], 0.1);
    let w3 = scaled(&mut rng, &[n, n], s);
    let b3 = scaled(&mut rng, &[n], 0.1);
    let x = scaled(&mut rng, &[n], 1.0);
    vec![x, w1, b1, w2, b2, w3, b3]
}

// ------------------------------------------------------------------ W3

/// `softmax(x) * sum(sin(x)^2) + exp(-x^2) * x`.
fn elementwise_f(x: &Var) -> Var {
    x.softmax(-1) * x.sin().square().sum_all() + (-x.square()).exp() * x
}

fn w3(n: usize) -> Workload {
    let x = scaled(&mut NpRng::new(0), &[n], 1.0);
    let f = jit(jacfwd(elementwise_f));
    Workload::new("W3_elementwise_jacfwd", format!("n={n}"), move || Ok(vec![f.eval(&x)?]))
}

// ------------------------------------------------------------------ W4

/// `(u[i-1] - 2 u[i] + u[i+1]) n^2 + u[i]^3 - sin(u[i])`, zero boundaries.
fn pde_residual(u: &Var) -> Var {
    let n = u.shape()[0];
    let up = u.pad(&[(1, 1)], 0.0);
    let left = up.slice_axis(0, None, Some(-2), 1);
    let right = up.slice_axis(0, Some(2), None, 1);
    (left - u * 2.0 + right) * (n as f64).powi(2) + u.powf(3.0) - u.sin()
}

fn w4(n: usize) -> Workload {
    let u = scaled(&mut NpRng::new(0), &[n], 1.0);
    let f = jit(jacfwd(pde_residual));
    Workload::new("W4_pde_residual_jacfwd", format!("n={n}"), move || Ok(vec![f.eval(&u)?]))
}

// ------------------------------------------------------------------ W5

/// `mean((W2 tanh(W1 x + b1) + b2 - y)^2)`; params `[W1, b1, W2, b2]`.
fn w5_loss([w1, b1, w2, b2]: &[Var; 4], x: &Var, y: &Var) -> Var {
    let pred = w2.matmul(&(w1.matmul(x) + b1).tanh()) + b2;
    (pred - y).square().mean()
}

fn w5(batch: usize, din: usize, hidden: usize, dout: usize) -> Workload {
    let (params, xs, ys) = w5_args(batch, din, hidden, dout);
    // vmap(grad(loss), in_axes=(None, 0, 0)) with params = (W1, b1, W2, b2).
    let f = jit(vmap(grad(w5_loss)).in_axes([None, Some(0), Some(0)]));
    Workload::new(
        "W5_per_example_grads",
        format!("batch={batch},in={din},hidden={hidden},out={dout}"),
        move || Ok(f.eval((&params, &xs, &ys))?.to_vec()),
    )
}

/// W5's parameters, inputs and targets.
fn w5_args(batch: usize, din: usize, hidden: usize, dout: usize) -> ([Tensor; 4], Tensor, Tensor) {
    // Draw order: W1, b1, W2, b2, X, Y.
    let mut rng = NpRng::new(0);
    let w1 = scaled(&mut rng, &[hidden, din], 1.0 / (din as f64).sqrt());
    let b1 = scaled(&mut rng, &[hidden], 0.1);
    let w2 = scaled(&mut rng, &[dout, hidden], 1.0 / (hidden as f64).sqrt());
    let b2 = scaled(&mut rng, &[dout], 0.1);
    let xs = scaled(&mut rng, &[batch, din], 1.0);
    let ys = scaled(&mut rng, &[batch, dout], 1.0);
    ([w1, b1, w2, b2], xs, ys)
}

// ------------------------------------------------------------------ W6

/// `logsumexp(A x)`.
fn w6_f(x: &Var, a: &Var) -> Var {
    a.matmul(x).logsumexp(&[0], false)
}

fn w6(m: usize, n: usize) -> Workload {
    // Draw order: A, x.
    let mut rng = NpRng::new(0);
    let a = scaled(&mut rng, &[m, n], 1.0 / (n as f64).sqrt());
    let x = scaled(&mut rng, &[n], 1.0);
    let f = jit(hessian(w6_f));
    Workload::new("W6_hessian_logsumexp", format!("A={m}x{n}"), move || Ok(vec![f.eval((&x, &a))?]))
}

// ------------------------------------------------------------------ W7

/// `sin(x) * x[::-1]`.
fn w7_f(x: &Var) -> Var {
    x.sin() * x.flip(&[0])
}

fn w7() -> Workload {
    let x = tensor(vec![0.1, 0.2, 0.3], &[3]);
    let f = jit(jacfwd(w7_f));
    let mut w = Workload::new("W7_tiny_call_overhead", "n=3", move || Ok(vec![f.eval(&x)?]));
    w.latency = true;
    w
}

// ------------------------------------------------------------------ W8

/// `F(x) = x + 0.1 tanh(M x) - b`.
fn w8_f(x: &Var, m: &Var, b: &Var) -> Var {
    x + m.matmul(x).tanh() * 0.1 - b
}

/// One Newton step: `x - solve(jacfwd(F)(x), F(x))`.
fn w8_step(x: &Var, m: &Var, b: &Var) -> anvil::Result<Var> {
    let jac = jacfwd(w8_f).apply((x, m, b))?;
    Ok(x - jac.solve(&w8_f(x, m, b)))
}

/// W8a: all iterations in one jit, as a `fori_loop` (JAX's `lax.fori_loop`).
/// W8b: a loop of calls to a jitted step.
fn w8(n: usize, iters: usize) -> Vec<Workload> {
    // Draw order: M, b.
    let mut rng = NpRng::new(0);
    let m = scaled(&mut rng, &[n, n], 1.0 / (n as f64).sqrt());
    let b = scaled(&mut rng, &[n], 1.0);
    let x0 = Tensor::zeros(&[n]).unwrap();
    let size = format!("n={n},iters={iters}");

    let (ma, ba, xa) = (m.clone(), b.clone(), x0.clone());
    let solve_unrolled = jit(move |x0: &Var, m: &Var, b: &Var| {
        fori_loop(0, iters, |_: &Var, x: &Var| w8_step(x, m, b), x0)
    });
    let a = Workload::new("W8a_newton_fori_jit", size.clone(), move || {
        Ok(vec![solve_unrolled.eval((&xa, &ma, &ba))?])
    });

    let step = jit(w8_step);
    let b_ = Workload::new("W8b_newton_pyloop_jit_step", size, move || {
        let mut x = x0.clone();
        for _ in 0..iters {
            x = step.eval((&x, &m, &b))?;
        }
        Ok(vec![x])
    });
    vec![a, b_]
}

// ------------------------------------------------------------------ W9

/// `loss = sum(x_T^2)` after 200 RK4 steps of `dx/dt = tanh(A x + b) - 0.5 x`.
fn w9_loss(a: &Var, b: &Var, x0: &Var) -> anvil::Result<Var> {
    let rhs = |x: &Var| (a.matmul(x) + b).tanh() - x * 0.5;
    let dt = 0.01;
    let step = |x: &Var, _: &()| {
        let k1 = rhs(x);
        let k2 = rhs(&(x + &(&k1 * (dt / 2.0))));
        let k3 = rhs(&(x + &(&k2 * (dt / 2.0))));
        let k4 = rhs(&(x + &(&k3 * dt)));
        (x + &((k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0)), ())
    };
    let (x, ()) = scan_n(step, x0, 200)?;
    Ok(x.square().sum_all())
}

fn w9(d: usize) -> Workload {
    let sd = (d as f64).sqrt();
    let a: Vec<f64> = (0..d * d)
        .map(|k| {
            let (i, j) = ((k / d) as f64 + 1.0, (k % d) as f64 + 1.0);
            (2f64.sqrt() * (i * j) + 0.1 * (j * j)).sin() / sd
        })
        .collect();
    let b: Vec<f64> = (0..d).map(|i| 0.2 * (0.9 * (i as f64 + 1.0)).cos()).collect();
    let x0: Vec<f64> = (0..d).map(|i| (0.7 * (i as f64 + 1.0)).sin()).collect();
    let (a, b, x0) = (tensor(a, &[d, d]), tensor(b, &[d]), tensor(x0, &[d]));
    let f = jit(value_and_grad(w9_loss).argnums(&[0, 1]));
    Workload::new("W9_scan_ode_grad", format!("d={d},steps=200"), move || {
        let (loss, g) = f.eval((&a, &b, &x0))?;
        Ok(vec![loss, g[0].clone(), g[1].clone()])
    })
}

// ------------------------------------------------------------------ W10

/// The GP negative log marginal likelihood (RBF kernel) through a Cholesky
/// factor, as `w10_nll` in `jax_reference.py`.
fn w10_nll(theta: &Var, x: &Var, y: &Var) -> Var {
    use anvil::linalg;
    let n = x.shape()[0];
    let p = theta.exp();
    let (ell, s2, noise) = (p.i(ix![0]), p.i(ix![1]), p.i(ix![2]));
    // |xi - xj|² = |xi|² + |xj|² - 2 xi·xj: one GEMM, no [n, n, 3] array.
    let sq = x.square().sum(&[-1]);
    let d2 = sq.unsqueeze(1) + sq.unsqueeze(0) - x.matmul(&x.transpose()) * 2.0;
    let k = (d2 / (ell.square() * -2.0)).exp() * s2 + linalg::eye_of(n, x) * noise;
    let l = linalg::cholesky(&k);
    let alpha = linalg::cho_solve(&l, y);
    (y * &alpha).sum_all() * 0.5
        + linalg::diagonal(&l, 0).log().sum_all()
        + 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln()
}

fn w10(n: usize) -> Workload {
    let x: Vec<f64> = (0..n * 3)
        .map(|k| (((k % 3) as f64 + 2.0).sqrt() * ((k / 3) as f64 + 1.0)).sin())
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| {
            let r = &x[i * 3..i * 3 + 3];
            (3.0 * r[0]).sin() + r[1] * r[2] + 0.1 * (7.0 * (i as f64 + 1.0)).cos()
        })
        .collect();
    let theta = tensor(vec![0.5f64.ln(), 0.0, 0.1f64.ln()], &[3]);
    let (x, y) = (tensor(x, &[n, 3]), tensor(y, &[n]));
    let f = jit(value_and_grad(w10_nll));
    Workload::new("W10_gp_nll_grad", format!("n={n}"), move || {
        let (nll, g) = f.eval((&theta, &x, &y))?;
        Ok(vec![nll, g])
    })
}

// ------------------------------------------------------------------ W11

/// `λ_min(S) + 0.1 Σ Wt ∘ V²` for `S = (M + Mᵀ)/2`, as `w11_g`.
fn w11_g(m: &Var, wt: &Var) -> Var {
    let s = (m + &m.transpose()) * 0.5;
    let (w, v) = anvil::linalg::eigh_with(&s, false);
    w.i(ix![0]) + (wt * &v.square()).sum_all() * 0.1
}

fn w11_f(ms: &Var, wt: &Var) -> anvil::Result<Var> {
    Ok(vmap(w11_g).in_axes([Some(0), None]).invoke([ms, wt]).sum_all())
}

fn w11(batch: usize, m: usize) -> Workload {
    let ms: Vec<f64> = (0..batch * m * m)
        .map(|k| {
            let (b, i, j) = ((k / (m * m)) as f64, ((k / m) % m) as f64, (k % m) as f64);
            let eye = if i == j { i + 1.0 } else { 0.0 };
            eye + 0.05 * (0.1 * ((b + 1.0) * (i + j + 1.0)) + 0.5 * ((i + 1.0) * (j + 1.0))).sin()
        })
        .collect();
    let wt: Vec<f64> = (0..m * m)
        .map(|k| (0.3 * (((k / m) as f64 + 1.0) * ((k % m) as f64 + 2.0))).cos())
        .collect();
    let (ms, wt) = (tensor(ms, &[batch, m, m]), tensor(wt, &[m, m]));
    let f = jit(grad(w11_f));
    Workload::new("W11_batched_eigh_grad", format!("B={batch},m={m}"), move || {
        Ok(vec![f.eval((&ms, &wt))?])
    })
}

// ------------------------------------------------------------------ W12

/// W4's residual's Jacobian by `sparse_jacfwd`: detection finds the
/// tridiagonal pattern, coloring 3 colors, a call runs the 3 colored JVPs
/// and the decompression (to CSC); the output is its three diagonals, as
/// `jax_reference.py`'s hand-colored version returns them.
fn w12(n: usize) -> Workload {
    use anvil::sparse::sparse_jacfwd;
    let u = tensor((0..n).map(|i| (0.37 * (i + 1) as f64).sin()).collect(), &[n]);
    let jac = sparse_jacfwd(pde_residual);
    Workload::new("W12_sparse_pde_jacobian", format!("n={n}"), move || {
        jac.eval(&u)?.diagonals(&[-1, 0, 1])
    })
}

// ------------------------------------------------------------------ W13

/// Newton on `x^3 + a x - b = 0` from 0, until `|f| < 1e-12` or 50 steps.
fn w13_root(a: &Var, b: &Var) -> anvil::Result<Var> {
    let f = |x: &Var| x * x * x + a * x - b;
    let (x, _) = while_loop(
        |(x, it): &(Var, Var)| {
            let not_done = f(x).abs().ge(&x.full_like(1e-12));
            let budget = it.lt(&it.full_like(50.0));
            not_done.select(&budget, &not_done)
        },
        |(x, it): &(Var, Var)| (x - &(f(x) / (x * x * 3.0 + a)), it + 1.0),
        (&a.zeros_like(), &a.zeros_like()),
    )?;
    Ok(x)
}

fn w13(batch: usize) -> Workload {
    let a: Vec<f64> = (0..batch).map(|k| 1.25 + 0.75 * (0.7 * (k as f64 + 1.0)).sin()).collect();
    let b: Vec<f64> = (0..batch).map(|k| 3.0 * (1.3 * (k as f64 + 1.0)).cos()).collect();
    let (a, b) = (tensor(a, &[batch]), tensor(b, &[batch]));
    let f = jit(vmap(w13_root));
    Workload::new("W13_batched_while_newton", format!("B={batch}"), move || {
        Ok(vec![f.eval((&a, &b))?])
    })
}

// ------------------------------------------------------------------ checksums

/// `(sum, wsum)` as in `jax_reference.py`: the sum of all entries, and
/// `sum_k flat[k] cos(k)` over all leaves raveled and concatenated. Summed
/// with compensation (Neumaier): NumPy's pairwise sums are accurate to a
/// few units in the last place of the largest partial sums, a plain loop
/// is not (W12 at n = 10^6 sums ±10^12 entries to about -2·10^12).
pub fn checksum(outs: &[Tensor]) -> (f64, f64) {
    let (mut s, mut ws, mut k) = (Neumaier::default(), Neumaier::default(), 0usize);
    for t in outs {
        for v in t.to_f64_vec() {
            s.add(v);
            ws.add(v * (k as f64).cos());
            k += 1;
        }
    }
    (s.total(), ws.total())
}

/// A compensated sum.
#[derive(Default)]
struct Neumaier {
    sum: f64,
    c: f64,
}

impl Neumaier {
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        self.c += if self.sum.abs() >= x.abs() { (self.sum - t) + x } else { (x - t) + self.sum };
        self.sum = t;
    }
    fn total(&self) -> f64 {
        self.sum + self.c
    }
}

/// `(256,256,64)+(256,256)`, as `jax_reference.py` prints shapes.
pub fn shapes(outs: &[Tensor]) -> String {
    outs.iter()
        .map(|t| {
            let dims: Vec<String> = t.shape().iter().map(ToString::to_string).collect();
            format!("({})", dims.join(","))
        })
        .collect::<Vec<_>>()
        .join("+")
}

// ------------------------------------------------------------------ scaling

/// A workload at a size of the caller's choice, called with an explicit
/// [`Parallelism`] (`benches/scaling.rs`): W1, W2, W3 and W5 with the same
/// functions and inputs as above.
pub struct Sized {
    /// `W1_mlp_jacfwd`, ...
    pub name: &'static str,
    /// `n=1024`, ...
    pub size: String,
    call: SizedCall,
}

/// A [`Sized`] workload's call.
type SizedCall = Box<dyn FnMut(&Parallelism) -> anvil::Result<Outs>>;

impl Sized {
    /// One cached call with `par`.
    pub fn call(&mut self, par: &Parallelism) -> anvil::Result<Outs> {
        (self.call)(par)
    }
}

/// W1 (`forward`) or W2 at width `n`.
pub fn sized_mlp(forward: bool, n: usize) -> Sized {
    let args = mlp_args(n);
    let size = format!("n={n}");
    if forward {
        let f = jit(jacfwd(mlp_fn));
        let call = Box::new(move |p: &Parallelism| f.eval_with(&args, p));
        Sized { name: "W1_mlp_jacfwd", size, call }
    } else {
        let f = jit(jacrev(mlp_fn));
        let call = Box::new(move |p: &Parallelism| f.eval_with(&args, p));
        Sized { name: "W2_mlp_jacrev", size, call }
    }
}

/// W3 at length `n` (its Jacobian is `n × n`).
pub fn sized_w3(n: usize) -> Sized {
    let x = scaled(&mut NpRng::new(0), &[n], 1.0);
    let f = jit(jacfwd(elementwise_f));
    let call = Box::new(move |p: &Parallelism| Ok(vec![f.eval_with(&x, p)?]));
    Sized { name: "W3_elementwise_jacfwd", size: format!("n={n}"), call }
}

/// W5 at batch `batch` (in 64, hidden 256, out 1).
pub fn sized_w5(batch: usize) -> Sized {
    let (params, xs, ys) = w5_args(batch, 64, 256, 1);
    let f = jit(vmap(grad(w5_loss)).in_axes([None, Some(0), Some(0)]));
    let call = Box::new(move |p: &Parallelism| Ok(f.eval_with((&params, &xs, &ys), p)?.to_vec()));
    Sized { name: "W5_per_example_grads", size: format!("batch={batch}"), call }
}
