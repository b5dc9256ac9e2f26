//! Products over a loop's steps, summed while the loop runs: the gradient
//! of a loop with a parameter matrix (`dA = Σ_t g_t z_tᵀ`), and a user's
//! `Zᵀ Y` of a scan's stacked results. The compiled plan sums them chunk
//! by chunk (a `placed_scan` with `contracted=`); the values agree with
//! independent computations, and one thread and two give the same bits.

use anvil::prelude::*;

fn rand(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| ((i as f64 + 1.0) * 0.37 + seed as f64).sin() * 0.3).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// RK4 steps of `x' = tanh(A x + b) - x / 2` (W9's program).
fn rk4_loss(a: &Var, b: &Var, x0: &Var, steps: usize) -> anvil::Result<Var> {
    let rhs = |x: &Var| (a.matmul(x) + b).tanh() - x * 0.5;
    let dt = 0.05;
    let step = |x: &Var, _: &()| {
        let k1 = rhs(x);
        let k2 = rhs(&(x + &(&k1 * (dt / 2.0))));
        let k3 = rhs(&(x + &(&k2 * (dt / 2.0))));
        let k4 = rhs(&(x + &(&k3 * dt)));
        (x + &((k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6.0)), ())
    };
    let (x, ()) = scan_n(step, x0, steps)?;
    Ok(x.square().sum_all())
}

/// The plan's text, and its outputs on one thread and on two.
fn run_both(g: &anvil::Graph, args: &[Tensor]) -> (String, Vec<Tensor>, Vec<Tensor>) {
    let plan = anvil::cpu::compile(g).unwrap();
    let one = anvil::cpu::Parallelism::sequential();
    let two = anvil::cpu::Parallelism::default().threads(2).adaptive(false);
    if two.thread_count() < 2 {
        // A one-thread pool: both runs sum in the loop (still compared).
        eprintln!("one thread only: the background sums are not exercised");
    }
    let a = plan.run(args, &one).unwrap();
    let b = plan.run(args, &two).unwrap();
    // Again: the same bits from call to call.
    let c = plan.run(args, &two).unwrap();
    for ((x, y), z) in a.iter().zip(&b).zip(&c) {
        assert_eq!(x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap(), "one thread vs two");
        assert_eq!(y.to_vec::<f64>().unwrap(), z.to_vec::<f64>().unwrap(), "call to call");
    }
    (format!("{}", plan.graph()), a, b)
}

#[test]
fn a_loop_gradient_sums_its_parameter_product_as_it_runs() {
    // 48² · 203 multiply-adds a product: summed in the loop; 203 steps are
    // seven chunks of 26 and one of 21.
    let (d, steps) = (48, 203);
    let (a, b, x0) = (rand(&[d, d], 1), rand(&[d], 2), rand(&[d], 3));
    let loss = move |a: &Var, b: &Var, x0: &Var| rk4_loss(a, b, x0, steps);
    let f = value_and_grad(loss).argnums(&[0, 1]);
    let g = anvil::lower(&f, (&a, &b, &x0)).unwrap();
    let args = [a.clone(), b.clone(), x0.clone()];
    let (text, out, _) = run_both(&g, &args);
    assert!(text.contains("contracted=["), "the product is not summed in the loop:\n{text}");
    let (value, da, db) = (&out[0], &out[1], &out[2]);
    assert_eq!(da.shape(), &[d, d]);
    value.assert_allclose(&loss.eval((&a, &b, &x0)).unwrap(), 1e-14, 0.0);
    // Forward mode takes another path (no reverse loop, no product over
    // the steps): <dA, V> + <db, w> is the derivative along (V, w).
    let dot = |g: &Tensor, v: &Tensor| -> f64 {
        let (g, v) = (g.to_vec::<f64>().unwrap(), v.to_vec::<f64>().unwrap());
        g.iter().zip(v).map(|(g, v)| g * v).sum()
    };
    for seed in [4, 5] {
        let (v, w) = (rand(&[d, d], seed), rand(&[d], seed + 10));
        let (_, tangent) =
            jvp(loss).eval(((&a, &b, &x0), (Some(&v), Some(&w), None::<&Tensor>))).unwrap();
        let along = dot(da, &v) + dot(db, &w);
        let want = tangent.item().unwrap();
        assert!((along - want).abs() <= 1e-11 * want.abs().max(1.0), "{along} vs {want}");
    }
}

#[test]
fn products_the_loop_cannot_sum_stay_after_it() {
    let (len, m) = (40, 90);
    let (c0, xs, z) = (rand(&[m], 1), rand(&[len, m], 2), rand(&[len, m], 3));
    let body = |c: &Var, x: &Var| {
        let next = (c * 0.9 + x).sin();
        (next.clone(), (next.clone(), next.cos()))
    };
    let text = |g: anvil::Graph| format!("{}", anvil::cpu::compile(&g).unwrap().graph());
    // Z made by the same loop.
    let same = |c0: &Var, xs: &Var| {
        let (_, (y, z)): (Var, (Var, Var)) = scan(body, c0, xs)?;
        Ok::<_, anvil::Error>(z.transpose().matmul(&y))
    };
    let t = text(anvil::lower(&same, (&c0, &xs)).unwrap());
    assert!(!t.contains("contracted"), "{t}");
    // The stacked result is also returned.
    let returned = |c0: &Var, xs: &Var, z: &Var| {
        let (_, (y, _)): (Var, (Var, Var)) = scan(body, c0, xs)?;
        Ok::<_, anvil::Error>((z.transpose().matmul(&y), y))
    };
    let t = text(anvil::lower(&returned, (&c0, &xs, &z)).unwrap());
    assert!(!t.contains("contracted"), "{t}");
    // Read by two products: neither is summed in the loop.
    let twice = |c0: &Var, xs: &Var, z: &Var| {
        let (_, (y, _)): (Var, (Var, Var)) = scan(body, c0, xs)?;
        Ok::<_, anvil::Error>(z.transpose().matmul(&y) + y.transpose().matmul(z))
    };
    let t = text(anvil::lower(&twice, (&c0, &xs, &z)).unwrap());
    assert!(!t.contains("contracted"), "{t}");
}

#[test]
fn a_product_of_stacked_results_is_summed_in_either_direction() {
    // Zᵀ Y of a scan's stacked results Y ([37, 90]) and an input Z: 37
    // steps are chunks of 16, 16 and 5.
    let (len, m, n) = (37, 90, 90);
    let (c0, xs, z) = (rand(&[m], 1), rand(&[len, m], 2), rand(&[len, n], 3));
    for reverse in [false, true] {
        let ys_of = move |c0: &Var, xs: &Var| {
            let options = ScanOptions { reverse, ..ScanOptions::default() };
            let body = |c: &Var, x: &Var| {
                let next = (c * 0.9 + x).sin();
                (next.clone(), next * 2.0)
            };
            let (_, ys): (Var, Var) = scan_with(body, c0, xs, options)?;
            Ok::<_, anvil::Error>(ys)
        };
        let product = move |c0: &Var, xs: &Var, z: &Var| {
            Ok::<_, anvil::Error>(z.transpose().matmul(&ys_of(c0, xs)?))
        };
        let g = anvil::lower(&product, (&c0, &xs, &z)).unwrap();
        let (text, out, _) = run_both(&g, &[c0.clone(), xs.clone(), z.clone()]);
        assert!(text.contains("contracted=["), "reverse {reverse}:\n{text}");
        // The stacked results themselves, and their product by definition.
        let ys = ys_of.eval((&c0, &xs)).unwrap().to_vec::<f64>().unwrap();
        let zv = z.to_vec::<f64>().unwrap();
        let want: Vec<f64> = (0..n * m)
            .map(|q| (0..len).map(|t| zv[t * n + q / m] * ys[t * m + q % m]).sum())
            .collect();
        let want = Tensor::from_vec(want, &[n, m]).unwrap();
        out[0].assert_allclose(&want, 1e-13, 1e-13);
    }
}

#[test]
fn a_small_product_stays_after_the_loop() {
    // 8² · 200 multiply-adds: one GEMM after the loop costs less.
    let (a, b, x0) = (rand(&[8, 8], 1), rand(&[8], 2), rand(&[8], 3));
    let f = value_and_grad(|a: &Var, b: &Var, x0: &Var| rk4_loss(a, b, x0, 200)).argnums(&[0, 1]);
    let g = anvil::lower(&f, (&a, &b, &x0)).unwrap();
    let plan = anvil::cpu::compile(&g).unwrap();
    assert!(!format!("{}", plan.graph()).contains("contracted"));
}
