//! custom_jvp and custom_vjp under every transform.

use anvil::prelude::*;

fn softplus_naive(x: &Var) -> Var {
    x.exp().log1p()
}

/// The jvp rule, JAX style: `(primals, tangents) -> (output, output tangent)`.
fn softplus_jvp((x,): &(Var,), (t,): &(Var,)) -> (Var, Var) {
    (softplus_naive(x), t * &x.logistic())
}

fn xs() -> Tensor {
    Tensor::from_vec(vec![-3.0, 0.0, 2.0, 800.0], &[4]).unwrap()
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// The naive gradient of log1p(exp(x)) is NaN at x = 800 (inf / inf);
/// the custom jvp gives the logistic function, in forward and reverse mode,
/// under vmap, and to second order.
#[test]
fn custom_jvp_is_used_by_every_transform() {
    let sp = custom_jvp(softplus_naive, softplus_jvp);
    let loss = move |x: &Var| sp.invoke([x]).sum_all();
    let want: Vec<f64> = xs().to_vec::<f64>().unwrap().iter().map(|&v| sigmoid(v)).collect();
    let naive = grad(|x: &Var| softplus_naive(x).sum_all()).eval(xs()).unwrap();
    assert!(naive.to_vec::<f64>().unwrap()[3].is_nan(), "the naive gradient should overflow");
    // reverse mode transposes the custom jvp
    let g = grad(loss.clone()).eval(xs()).unwrap();
    g.assert_allclose(&Tensor::from_vec(want.clone(), &[4]).unwrap(), 1e-15, 0.0);
    // forward mode
    let ones = Tensor::ones(&[4]).unwrap();
    let t = jvp(loss.clone()).eval((&xs(), &ones)).unwrap();
    assert!((t.1.item().unwrap() - want.iter().sum::<f64>()).abs() < 1e-14);
    // Jacobians of the elementwise function: diagonal
    let sp2 = custom_jvp(softplus_naive, softplus_jvp);
    let j = jacfwd(sp2).eval(xs()).unwrap();
    let jr = jacrev(custom_jvp(softplus_naive, softplus_jvp)).eval(xs()).unwrap();
    j.assert_allclose(&jr, 0.0, 0.0);
    let jv = j.to_vec::<f64>().unwrap();
    for (i, w) in want.iter().enumerate() {
        assert!((jv[i * 4 + i] - w).abs() < 1e-15);
    }
    // vmap of grad and grad of vmap
    let batch =
        Tensor::from_vec(vec![-3.0, 0.0, 2.0, 800.0, 1.0, -1.0, 5.0, 700.0], &[2, 4]).unwrap();
    let vg = vmap(grad(loss.clone())).eval(&batch).unwrap();
    let want_b: Vec<f64> = batch.to_vec::<f64>().unwrap().iter().map(|&v| sigmoid(v)).collect();
    vg.assert_allclose(&Tensor::from_vec(want_b.clone(), &[2, 4]).unwrap(), 1e-15, 0.0);
    let sp3 = custom_jvp(softplus_naive, softplus_jvp);
    let batched_loss = move |x: &Var| vmap(sp3.clone()).invoke([x]).sum_all();
    let gv = grad(batched_loss).eval(&batch).unwrap();
    gv.assert_allclose(&Tensor::from_vec(want_b, &[2, 4]).unwrap(), 1e-15, 0.0);
    // second derivative: sigmoid' = s (1 - s), finite at 800 (0)
    let h = grad(grad(move |x: &Var| custom_jvp(softplus_naive, softplus_jvp).invoke([x])))
        .eval(Tensor::scalar(0.5))
        .unwrap();
    let s = sigmoid(0.5);
    assert!((h.item().unwrap() - s * (1.0 - s)).abs() < 1e-15);
}

#[test]
fn custom_vjp_in_reverse_mode_and_vmap() {
    let clip = || {
        custom_vjp(
            |x: &Var| x.sin(),
            |x: &Var| (x.sin(), x.cos()),
            |cos: &Var, ct: &Var| {
                let g = ct * cos;
                (g.maximum(&g.full_like(-0.5)).minimum(&g.full_like(0.5)),)
            },
        )
    };
    let c = clip();
    let f = move |x: &Var| (c.invoke([x]) * 3.0).sum_all();
    let x = Tensor::from_vec(vec![0.0, 1.0, 1.5, -0.2], &[4]).unwrap();
    let want: Vec<f64> =
        x.to_vec::<f64>().unwrap().iter().map(|&v| (3.0 * v.cos()).clamp(-0.5, 0.5)).collect();
    let g = grad(f.clone()).eval(&x).unwrap();
    g.assert_allclose(&Tensor::from_vec(want.clone(), &[4]).unwrap(), 1e-15, 0.0);
    // the primal value is the function's
    let v = value_and_grad(f.clone()).eval(&x).unwrap();
    let sum: f64 = x.to_vec::<f64>().unwrap().iter().map(|v| 3.0 * v.sin()).sum();
    assert!((v.0.item().unwrap() - sum).abs() < 1e-14);
    // per-example gradients
    let batch = Tensor::stack(&[x.clone(), x.clone()], 0).unwrap();
    let vg = vmap(grad(f.clone())).eval(&batch).unwrap();
    vg.select_axis(0, 1).unwrap().assert_allclose(&g, 0.0, 0.0);
    // grad of a vmapped custom_vjp (runs as a loop)
    let c2 = clip();
    let fv = move |x: &Var| (vmap(c2.clone()).invoke([x]) * 3.0).sum_all();
    let gv = grad(fv).eval(&batch).unwrap();
    gv.select_axis(0, 0).unwrap().assert_allclose(&g, 1e-15, 0.0);
    // jacrev works; forward mode is an error naming the function
    let j = jacrev(clip()).eval(&x).unwrap();
    assert_eq!(j.shape(), &[4, 4]);
    let e = jacfwd(clip()).eval(&x).unwrap_err().to_string();
    assert!(e.contains("custom_vjp") && e.contains("forward"), "{e}");
}

#[test]
fn custom_rules_with_wrong_types_are_errors() {
    // The rules' structures are checked by the compiler; their shapes here.
    let bad = custom_jvp(|x: &Var| x.sin(), |(x,): &(Var,), _: &(Var,)| (x.sin(), x.sum_all()));
    let e = jit(bad).eval(Tensor::zeros(&[2]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("custom_jvp") && e.contains("outputs"), "{e}");
    let bad =
        custom_vjp(|x: &Var| x.sin(), |x: &Var| (x.sin(), ()), |_: &(), ct: &Var| (ct.sum_all(),));
    let e = jit(bad).eval(Tensor::zeros(&[2]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("bwd"), "{e}");
}
