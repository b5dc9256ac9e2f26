//! anvil's quick start: trace a function, run it, look at its graph, then
//! batch it and differentiate it.
//!
//! Run with `cargo run --release --example quickstart`.

#![deny(warnings)]
use anvil::prelude::*;

/// A layer's parameters as a struct of tensors (a pytree): `Layer<Var>`
/// while tracing, `Layer<Tensor>` as values; gradients are `Layer`s too.
#[derive(Clone, Debug, Tree)]
struct Layer<T> {
    w: T,
    b: T,
}

/// `sum(tanh(x @ w + b)^2)`.
fn loss(p: &Layer<Var>, x: &Var) -> Var {
    (x.matmul(&p.w) + &p.b).tanh().square().sum_all()
}

fn main() -> anvil::Result<()> {
    // A function written once over traced values...
    let f = jit(|x: &Var| (x.sin() * x).sum(&[0]));

    // ...runs on tensors: traced at their shape, compiled for the CPU, executed.
    // `jit` keeps the compiled plan, so a second call with the same shapes only runs kernels.
    let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3])?;
    let y = f.eval(&x)?;
    let by_hand: f64 = [0.1f64, 0.2, 0.3].iter().map(|v| v.sin() * v).sum();
    println!("f(x) = sum(sin(x) * x) at x = {x}");
    println!("  anvil:   {y}");
    println!("  by hand: {by_hand}");

    // The graph anvil ran, printed like a jaxpr.
    println!("\nthe traced graph:\n{}", trace(&f, &x)?);

    // A small MLP layer with broadcasting, reductions and a softmax, jit-cached.
    let layer = jit(|w: &Var, x: &Var| (x.matmul(w) + 1.0).tanh().softmax(-1));
    let w = Tensor::from_vec(vec![1.0, -1.0, 0.5, 2.0, 0.0, -0.5], &[3, 2])?;
    let xs = Tensor::from_vec(vec![0.1, 0.2, 0.3, -0.3, 0.0, 0.3], &[2, 3])?;
    let p = layer.eval((&w, &xs))?;
    println!("softmax(tanh(x @ w + 1)) for two rows (each row sums to 1):\n{p}");

    // Transforms: derivatives and batching, composed, on a struct of parameters.
    let params = Layer { w: w.clone(), b: Tensor::ones(&[2]).unwrap() };
    let g = grad(loss).eval((&params, &x))?;
    println!(
        "\ngrad of sum(tanh(x @ w + b)^2), a Layer: dw {:?}, db {:?}:\n{}\n{}",
        g.w.shape(),
        g.b.shape(),
        g.w,
        g.b
    );
    let per_example = vmap(grad(loss)).in_axes([None, Some(0)]).eval((&params, &xs))?;
    println!(
        "per-example gradients vmap(grad(loss)) over 2 rows: dw {:?}, db {:?}",
        per_example.w.shape(),
        per_example.b.shape()
    );
    let sin_jac = jacfwd(|x: &Var| x.sin()).eval(&x)?;
    println!("jacfwd(sin) at x is diag(cos x):\n{sin_jac}");
    let h = hessian(|x: &Var| x.sin().prod(&[0], false)).eval(&x)?;
    println!("hessian of prod(sin x):\n{h}");
    let jr = jacrev(|x: &Var| x.sin()).eval(&x)?;
    println!("jacrev agrees with jacfwd: {}", jr.allclose(&sin_jac, 1e-15, 0.0));

    // Mistakes are errors that name the op, the shapes and the argument.
    let bad = jit(|a: &Var, b: &Var| a + b);
    let err = bad.eval((&Tensor::zeros(&[3]).unwrap(), &Tensor::zeros(&[4]).unwrap())).unwrap_err();
    println!("\nadding shapes [3] and [4] gives an error, not a panic:\n  {err}");
    Ok(())
}
