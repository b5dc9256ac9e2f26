//! Ops from a plugin crate under every transform.
//!
//! `examples/special` defines Bessel functions and a cumulative sum with
//! their rules; `examples/special-cpu` registers their CPU kernels. Nothing in
//! anvil knows about them, yet `jacfwd`, `jacrev`, `vmap(grad(..))` and
//! `hessian` all work.
//!
//! Run: `cargo run --release --example special_functions`

#![deny(warnings)]
use anvil::prelude::*;
use anvil_special::SpecialExt;
use anvil_special_cpu as _; // links the kernels

fn main() -> anvil::Result<()> {
    let x = Tensor::from_vec(vec![0.5, 1.0, 2.0], &[3])?;
    println!("x         = {x}");
    println!("J0(x)     = {}", jit(|x: &Var| x.j0()).eval(&x)?);
    println!("cumsum(x) = {}", jit(|x: &Var| x.special_cumsum(0)).eval(&x)?);

    // A model mixing both: f(x) = cumsum(J0(x)) * x.
    let f = |x: &Var| x.j0().special_cumsum(0) * x;
    println!("\njacfwd(f)(x) =\n{}", jacfwd(f).eval(&x)?);
    println!("jacrev(f)(x) =\n{}", jacrev(f).eval(&x)?);

    // Per-example gradients of a loss in w.
    let loss = |w: &Var, x: &Var| (w * x).j0().special_cumsum(0).square().sum_all();
    let batch = Tensor::from_vec(vec![0.5, 1.0, 2.0, -1.0, 0.0, 1.5], &[2, 3])?;
    let w = Tensor::from_vec(vec![1.0, 0.5, -0.25], &[3])?;
    let per_example = vmap(grad(loss)).in_axes([None, Some(0)]).eval((&w, &batch))?;
    println!("\nvmap(grad(loss)) over 2 examples =\n{per_example}");

    // The Hessian of sum(J0(x)): diagonal, -(J0 - J1/x).
    let h = hessian(|x: &Var| x.j0().sum_all()).eval(&x)?;
    println!("\nhessian(sum(J0))(x) =\n{h}");
    Ok(())
}
