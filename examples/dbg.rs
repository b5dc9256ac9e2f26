use anvil::prelude::*;
fn pde_residual(u: &Var) -> Var {
    let n = u.shape()[0];
    let up = u.pad(&[(1, 1)], 0.0);
    let left = up.slice_axis(0, None, Some(-2), 1);
    let right = up.slice_axis(0, Some(2), None, 1);
    (left - u * 2.0 + right) * (n as f64).powi(2) + u.powf(3.0) - u.sin()
}
fn w3(x: &Var) -> Var {
    x.softmax(-1) * x.sin().square().sum_all() + (-x.square()).exp() * x
}
fn main() -> anvil::Result<()> {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(6);
    let x = Tensor::linspace(0.0, 1.0, n);
    for (name, f) in [("w4", &pde_residual as &dyn Fn(&Var) -> Var), ("w3", &w3)] {
        let t = std::time::Instant::now();
        let g = anvil::lower(&jacfwd(f), &x)?;
        let lower = t.elapsed();
        let p = anvil::cpu::compile(&g)?;
        println!("{name}: lower {lower:?}, total {:?}\n{}", t.elapsed(), p.graph());
        let j = jit(jacfwd(f));
        let t = std::time::Instant::now();
        j.call(&x)?;
        let first = t.elapsed();
        let t = std::time::Instant::now();
        for _ in 0..20 {
            j.call(&x)?;
        }
        println!("{name}: first call {first:?}, call {:?}", t.elapsed() / 20);
    }
    Ok(())
}
