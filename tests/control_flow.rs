//! cond, switch, scan, fori_loop and while_loop under every transform,
//! each checked against an independent computation: the same program
//! unrolled by a Rust loop (the graph then has no control-flow op), run one
//! element at a time, or finite differences.

use anvil::prelude::*;

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes");
    assert!(got.allclose(want, tol, tol), "{what}:\n got {got}\nwant {want}");
}

/// Central differences of a scalar function of one tensor, along each element.
fn finite_grad(f: &dyn Fn(&Tensor) -> f64, x: &Tensor) -> Tensor {
    let v = x.to_vec::<f64>().unwrap();
    let h = 1e-6;
    let g: Vec<f64> = (0..v.len())
        .map(|i| {
            let mut p = v.clone();
            let mut m = v.clone();
            p[i] += h;
            m[i] -= h;
            (f(&t(&p, x.shape())) - f(&t(&m, x.shape()))) / (2.0 * h)
        })
        .collect();
    t(&g, x.shape())
}

fn positive(x: &Var) -> Var {
    x.sum_all().gt(&x.sum_all().zeros_like())
}

// ------------------------------------------------------------------ cond

fn piecewise(x: &Var, w: &Var) -> anvil::Result<Var> {
    cond(&positive(x), |x: &Var, w: &Var| (x * w).sin(), |x: &Var, w: &Var| x.square() * w, (x, w))
}

fn piecewise_unrolled(x: &Var, w: &Var) -> Var {
    where_(&positive(x), &(x * w).sin(), &(x.square() * w))
}

#[test]
fn cond_takes_one_branch_under_every_transform() {
    let w = t(&[0.5, -1.5, 2.0], &[3]);
    for x in [t(&[0.3, 0.2, 0.9], &[3]), t(&[-0.3, 0.2, -0.9], &[3])] {
        let (got, want) = (
            jit(piecewise).eval((&x, &w)).unwrap(),
            jit(piecewise_unrolled).eval((&x, &w)).unwrap(),
        );
        close("value", &got, &want, 1e-15);
        let f = |x: &Var, w: &Var| Ok::<_, anvil::Error>(piecewise(x, w)?.sum_all());
        let g = |x: &Var, w: &Var| piecewise_unrolled(x, w).sum_all();
        close("grad", &grad(f).eval((&x, &w)).unwrap(), &grad(g).eval((&x, &w)).unwrap(), 1e-14);
        close(
            "grad w",
            &grad(f).argnum::<1>().eval((&x, &w)).unwrap(),
            &grad(g).argnum::<1>().eval((&x, &w)).unwrap(),
            1e-14,
        );
        close(
            "jacfwd",
            &jacfwd(piecewise).eval((&x, &w)).unwrap(),
            &jacfwd(piecewise_unrolled).eval((&x, &w)).unwrap(),
            1e-14,
        );
        close(
            "jacrev",
            &jacrev(piecewise).eval((&x, &w)).unwrap(),
            &jacfwd(piecewise_unrolled).eval((&x, &w)).unwrap(),
            1e-14,
        );
        close(
            "hessian",
            &hessian(f).eval((&x, &w)).unwrap(),
            &hessian(g).eval((&x, &w)).unwrap(),
            1e-13,
        );
    }
}

#[test]
fn vmap_of_cond_with_a_shared_and_a_batched_predicate() {
    let xs = t(&[0.3, 0.2, 0.9, -0.3, 0.2, -0.9], &[2, 3]);
    let w = t(&[0.5, -1.5, 2.0], &[3]);
    let want = |x: &Tensor| jit(piecewise_unrolled).eval((x, &w)).unwrap();
    let rows = [xs.select_axis(0, 0).unwrap(), xs.select_axis(0, 1).unwrap()];
    let stacked = Tensor::stack(&[want(&rows[0]), want(&rows[1])], 0).unwrap();
    // The predicate depends on the batch: both branches, selected per row.
    let batched = vmap(piecewise).in_axes([Some(0), None]).eval((&xs, &w)).unwrap();
    close("batched pred", &batched, &stacked, 1e-15);
    // The predicate does not depend on the batch: a real branch.
    let shared = |x: &Var, w: &Var| {
        cond(&positive(w), |x: &Var, w: &Var| x * w, |x: &Var, w: &Var| x - w, (x, w))
    };
    let got = vmap(shared).in_axes([Some(0), None]).eval((&xs, &w)).unwrap();
    let g = anvil::lower(&vmap(shared).in_axes([Some(0), None]), (&xs, &w)).unwrap();
    assert!(g.to_string().contains("cond"), "a shared predicate keeps the cond:\n{g}");
    close("shared pred", &got, &jit(|x: &Var, w: &Var| x * w).eval((&xs, &w)).unwrap(), 0.0);
    // Per-example gradients through a batched predicate.
    let loss = |x: &Var, w: &Var| Ok::<_, anvil::Error>(piecewise(x, w)?.sum_all());
    let per = vmap(grad(loss).argnum::<1>()).in_axes([Some(0), None]).eval((&xs, &w)).unwrap();
    for (i, r) in rows.iter().enumerate() {
        let one = grad(|x: &Var, w: &Var| piecewise_unrolled(x, w).sum_all())
            .argnum::<1>()
            .eval((r, &w))
            .unwrap();
        close("per-example", &per.select_axis(0, i).unwrap(), &one, 1e-14);
    }
}

#[test]
fn switch_clamps_its_index_and_batches_it() {
    let f =
        |i: &Var, x: &Var| switch(i, (|x: &Var| x.sin(), |x: &Var| x.cos(), |x: &Var| x * 3.0), x);
    let x = t(&[0.5, -1.0], &[2]);
    for (i, want) in [
        (-4i64, x.to_vec::<f64>().unwrap().iter().map(|v| v.sin()).collect::<Vec<_>>()),
        (1, vec![0.5f64.cos(), 1f64.cos()]),
        (9, vec![1.5, -3.0]),
    ] {
        let got = jit(f).eval((&Tensor::scalar(i), &x)).unwrap();
        close(&format!("index {i}"), &got, &t(&want, &[2]), 1e-15);
    }
    let idx = Tensor::from_vec(vec![0i64, 2, 1, 5], &[4]).unwrap();
    let got = vmap(f).in_axes([Some(0), None]).eval((&idx, &x)).unwrap();
    let want: Vec<Tensor> =
        [0i64, 2, 1, 5].iter().map(|&i| jit(f).eval((&Tensor::scalar(i), &x)).unwrap()).collect();
    close("batched index", &got, &Tensor::stack(&want, 0).unwrap(), 1e-15);
    let g = grad(|x: &Var| {
        Ok::<_, anvil::Error>(f(&x.sum_all().cast(DType::I64).full_like(1.0), x)?.sum_all())
    })
    .eval(&x)
    .unwrap();
    close("grad of the taken branch", &g, &t(&[-(0.5f64.sin()), 1f64.sin()], &[2]), 1e-15);
}

#[test]
fn switch_branches_may_borrow_outer_values() {
    // Closures that borrow `w` (not 'static), as cond's branches may.
    let f = |i: &Var, x: &Var, w: &Var| switch(i, (|x: &Var| x * w, |x: &Var| x + w), x);
    let (x, w) = (t(&[1.0, 2.0], &[2]), t(&[3.0, 4.0], &[2]));
    let at = |i: i64| jit(f).eval((&Tensor::scalar(i), &x, &w)).unwrap();
    assert_eq!(at(0).to_vec::<f64>().unwrap(), vec![3.0, 8.0]);
    assert_eq!(at(1).to_vec::<f64>().unwrap(), vec![4.0, 6.0]);
    let loss = |w: &Var, x: &Var| {
        let first = x.sum_all().cast(DType::I64).zeros_like();
        Ok::<_, anvil::Error>(f(&first, x, w)?.sum_all())
    };
    let dw = grad(loss).eval((&w, &x)).unwrap();
    close("d/dw of the taken branch x * w", &dw, &x, 0.0);
}

#[test]
fn cond_errors_name_the_problem() {
    let x = t(&[1.0, 2.0], &[2]);
    let bad = |x: &Var| cond(&positive(x), |x: &Var| x.sum_all(), |x: &Var| x.clone(), x);
    let e = jit(bad).eval(&x).unwrap_err().to_string();
    let named = e.contains("output 0 of true_fn") && e.contains("false_fn returns f64[2]");
    assert!(named, "the branches by their names: {e}");
    let not_bool = |x: &Var| cond(&x.sum_all(), |x: &Var| x.clone(), |x: &Var| x.clone(), x);
    let e = jit(not_bool).eval(&x).unwrap_err().to_string();
    assert!(e.contains("pred") && e.contains("bool"), "{e}");
    // A bool predicate that is not a scalar: its shape, not its dtype.
    let not_scalar =
        |x: &Var| cond(&x.gt(&x.zeros_like()), |x: &Var| x.clone(), |x: &Var| x.clone(), x);
    let e = jit(not_scalar).eval(&x).unwrap_err().to_string();
    assert!(e.contains("pred") && e.contains("bool[2]") && !e.contains("dtype"), "{e}");
}

#[test]
fn loop_bounds_must_be_integer_scalars() {
    let x = t(&[1.0, 2.0], &[2]);
    let run = |n: &Var, x: &Var| fori_loop(0, n, |_: &Var, c: &Var| c * 2.0, x);
    for (bound, what) in [
        (Tensor::scalar(true), "bool"),
        (Tensor::scalar(3.0), "f64"),
        (Tensor::from_vec(vec![1i64, 2], &[2]).unwrap(), "i64[2]"),
    ] {
        let e = jit(run).eval((&bound, &x)).unwrap_err().to_string();
        assert!(e.contains("fori_loop") && e.contains("upper") && e.contains(what), "{e}");
    }
    let three = jit(run).eval((&Tensor::scalar(3i64), &x)).unwrap();
    close("three steps", &three, &t(&[8.0, 16.0], &[2]), 0.0);
}

// ------------------------------------------------------------------ scan

/// An RK2 step of dx/dt = -a x + sin(b t x), carries (x, t).
fn rk2(a: &Var, b: &Var, x: &Var, tm: &Var, dt: f64) -> (Var, Var) {
    let f = |x: &Var, tm: &Var| -(a * x) + (b * tm * x).sin();
    let k1 = f(x, tm);
    let k2 = f(&(x + &(&k1 * dt)), &(tm + dt));
    (x + &((k1 + k2) * (dt / 2.0)), tm + dt)
}

fn integrate(a: &Var, b: &Var, x0: &Var) -> anvil::Result<(Var, Var)> {
    let step = |(x, tm): &(Var, Var), _: &()| {
        let (x1, t1) = rk2(a, b, x, tm, 0.05);
        ((x1.clone(), t1), x1.sum_all())
    };
    let ((x, _), ys) = scan_n(step, (x0, &x0.sum_all().zeros_like()), 20)?;
    Ok((x, ys))
}

fn integrate_unrolled(a: &Var, b: &Var, x0: &Var) -> (Var, Var) {
    let (mut x, mut tm) = (x0.clone(), x0.sum_all().zeros_like());
    let mut ys = Vec::new();
    for _ in 0..20 {
        (x, tm) = rk2(a, b, &x, &tm, 0.05);
        ys.push(x.sum_all());
    }
    let refs: Vec<&Var> = ys.iter().collect();
    (x, stack(&refs, 0))
}

#[test]
fn scan_with_tuple_carries_closing_over_parameters() {
    let (a, b, x0) = (t(&[0.7, 1.1], &[2]), t(&[2.0, -0.5], &[2]), t(&[1.0, 0.5], &[2]));
    let got = jit(integrate).eval((&a, &b, &x0)).unwrap();
    let want =
        jit(|a: &Var, b: &Var, x: &Var| integrate_unrolled(a, b, x)).eval((&a, &b, &x0)).unwrap();
    close("final", &got.0, &want.0, 1e-14);
    close("ys", &got.1, &want.1, 1e-14);
    let loss =
        |a: &Var, b: &Var, x: &Var| Ok::<_, anvil::Error>(integrate(a, b, x)?.0.square().sum_all());
    let loss_u = |a: &Var, b: &Var, x: &Var| integrate_unrolled(a, b, x).0.square().sum_all();
    for (what, got, want) in [
        (
            "d/da",
            grad(loss).eval((&a, &b, &x0)).unwrap(),
            grad(loss_u).eval((&a, &b, &x0)).unwrap(),
        ),
        (
            "d/db",
            grad(loss).argnum::<1>().eval((&a, &b, &x0)).unwrap(),
            grad(loss_u).argnum::<1>().eval((&a, &b, &x0)).unwrap(),
        ),
        (
            "d/dx0",
            grad(loss).argnum::<2>().eval((&a, &b, &x0)).unwrap(),
            grad(loss_u).argnum::<2>().eval((&a, &b, &x0)).unwrap(),
        ),
    ] {
        close(what, &got, &want, 1e-12);
    }
    // Against finite differences too.
    let fd = finite_grad(&|a: &Tensor| jit(loss_u).eval((a, &b, &x0)).unwrap().item().unwrap(), &a);
    close("fd", &grad(loss).eval((&a, &b, &x0)).unwrap(), &fd, 1e-7);
    // Forward and reverse Jacobians of the final state agree.
    let fin = |a: &Var, b: &Var, x: &Var| Ok::<_, anvil::Error>(integrate(a, b, x)?.0);
    close(
        "jacfwd = jacrev",
        &jacfwd(fin).eval((&a, &b, &x0)).unwrap(),
        &jacrev(fin).eval((&a, &b, &x0)).unwrap(),
        1e-12,
    );
    // A Hessian through the scan.
    let h = hessian(loss).eval((&a, &b, &x0)).unwrap();
    close("hessian", &h, &hessian(loss_u).eval((&a, &b, &x0)).unwrap(), 1e-10);
}

#[test]
fn scan_reverse_and_several_scanned_inputs() {
    // ys[t] = c_t where c runs from the last element down: a suffix sum.
    let f = |xs: &Var, ws: &Var| {
        let step = |c: &Var, (x, w): &(Var, Var)| {
            let c1 = c + &(x * w);
            (c1.clone(), c1)
        };
        scan_with(
            step,
            xs.index_axis(0, 0).zeros_like(),
            (xs, ws),
            ScanOptions { reverse: true, ..Default::default() },
        )
    };
    let (xs, ws) = (t(&[1.0, 2.0, 3.0, 4.0], &[4]), t(&[1.0, 0.5, -1.0, 2.0], &[4]));
    let (total, suffix) = jit(f).eval((&xs, &ws)).unwrap();
    assert_eq!(total.item().unwrap(), 1.0 + 1.0 - 3.0 + 8.0);
    assert_eq!(suffix.to_vec::<f64>().unwrap(), vec![7.0, 6.0, 5.0, 8.0]);
    let g = grad(|xs: &Var, ws: &Var| Ok::<_, anvil::Error>(f(xs, ws)?.1.square().sum_all()))
        .eval((&xs, &ws))
        .unwrap();
    let sq = |x: &Tensor| -> f64 {
        let s = jit(f).eval((x, &ws)).unwrap().1;
        s.to_vec::<f64>().unwrap().iter().map(|v| v * v).sum()
    };
    let fd = finite_grad(&sq, &xs);
    close("grad of a reverse scan", &g, &fd, 1e-6);
}

#[test]
fn vmap_of_scan_batches_only_the_carries_the_batch_reaches() {
    // Carries: a counter (never batched) and x (batched through x0).
    let f = |x0: &Var, a: &Var| {
        let step = |(n, x): &(Var, Var), _: &()| ((n + 1.0, (x * a).tanh() + n), x.sum_all());
        scan_n(step, (&x0.sum_all().zeros_like(), x0), 5)
    };
    let (x0, a) = (t(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[3, 2]), t(&[1.5, -0.5], &[2]));
    let ((n, x), ys) = vmap(f).in_axes([Some(0), None]).eval((&x0, &a)).unwrap();
    assert_eq!(n.shape(), &[3]);
    assert_eq!((x.shape(), ys.shape()), (&[3, 2][..], &[3, 5][..]));
    for i in 0..3 {
        let ((_, xi), yi) = jit(f).eval((&x0.select_axis(0, i).unwrap(), &a)).unwrap();
        close("x", &x.select_axis(0, i).unwrap(), &xi, 1e-15);
        close("ys", &ys.select_axis(0, i).unwrap(), &yi, 1e-15);
    }
    // Batched parameter instead (a closed-over value under vmap).
    let ab = t(&[1.5, -0.5, 0.2, 0.1], &[2, 2]);
    let ((_, xa), _) =
        vmap(f).in_axes([None, Some(0)]).eval((&x0.select_axis(0, 0).unwrap(), &ab)).unwrap();
    for i in 0..2 {
        let ((_, xi), _) =
            jit(f).eval((&x0.select_axis(0, 0).unwrap(), &ab.select_axis(0, i).unwrap())).unwrap();
        close("batched a", &xa.select_axis(0, i).unwrap(), &xi, 1e-15);
    }
    // vmap of scan of vmap, and per-example gradients.
    let inner = |x0: &Var, a: &Var| {
        let step = |x: &Var, _: &()| {
            let y = vmap(|r: &Var| (r * a).sin()).invoke(x);
            (y.clone(), y.sum_all())
        };
        scan_n(step, x0, 3)
    };
    let xb = t(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2], &[2, 3, 2]);
    let (xs_out, _) = vmap(inner).in_axes([Some(0), None]).eval((&xb, &a)).unwrap();
    for i in 0..2 {
        let (xi, _) = jit(inner).eval((&xb.select_axis(0, i).unwrap(), &a)).unwrap();
        close("vmap of scan of vmap", &xs_out.select_axis(0, i).unwrap(), &xi, 1e-15);
    }
    let loss = |x0: &Var, a: &Var| Ok::<_, anvil::Error>(inner(x0, a)?.1.sum_all());
    let per = vmap(grad(loss).argnum::<1>()).in_axes([Some(0), None]).eval((&xb, &a)).unwrap();
    for i in 0..2 {
        let gi = grad(loss).argnum::<1>().eval((&xb.select_axis(0, i).unwrap(), &a)).unwrap();
        close("per-example", &per.select_axis(0, i).unwrap(), &gi, 1e-14);
    }
}

#[test]
fn cond_inside_scan_inside_vmap() {
    let f = |x0: &Var| {
        let step = |x: &Var, _: &()| {
            let y = cond(&positive(x), |x: &Var| x * 0.5 - 1.0, |x: &Var| x * -2.0 + 0.5, x)
                .unwrap_or_else(|_| x.clone());
            (y.clone(), y.sum_all())
        };
        scan_n(step, x0, 6)
    };
    let xs = t(&[3.0, -1.0, 0.25, 8.0], &[4, 1]);
    let (got, _) = vmap(f).eval(&xs).unwrap();
    for i in 0..4 {
        let mut v = xs.to_vec::<f64>().unwrap()[i];
        for _ in 0..6 {
            v = if v > 0.0 { v * 0.5 - 1.0 } else { v * -2.0 + 0.5 };
        }
        assert_eq!(got.to_vec::<f64>().unwrap()[i], v);
    }
    let g = vmap(grad(|x0: &Var| Ok::<_, anvil::Error>(f(x0)?.0.sum_all()))).eval(&xs).unwrap();
    assert_eq!(g.shape(), &[4, 1]);
}

#[test]
fn scan_errors_name_the_carry_and_the_lengths() {
    let x = t(&[1.0, 2.0], &[2]);
    let bad = |x: &Var| scan(|c: &Var, x: &Var| (c.unsqueeze(0), x.clone()), x.index_axis(0, 0), x);
    let e = jit(bad).eval(&x).unwrap_err().to_string();
    assert!(e.contains("carry 0") && e.contains("f64[]") && e.contains("f64[1]"), "{e}");
    let two = |x: &Var, y: &Var| {
        scan(|c: &Var, (a, b): &(Var, Var)| (c + a + b, c.clone()), x.index_axis(0, 0), (x, y))
    };
    let e = jit(two).eval((&x, &t(&[1.0, 2.0, 3.0], &[3]))).unwrap_err().to_string();
    assert!(e.contains("length 3") && e.contains("expected 2"), "{e}");
    // A checkpoint every 0 steps is no policy.
    let zero = |x: &Var| {
        let options = ScanOptions { checkpoint: Some(0), ..ScanOptions::default() };
        scan_with(|c: &Var, x: &Var| (c + x, c.clone()), x.index_axis(0, 0), x, options)
    };
    let e = jit(zero).eval(&x).unwrap_err().to_string();
    assert!(e.contains("scan") && e.contains("checkpoint"), "{e}");
    // A while_loop's carry that changes type is named as the while_loop's.
    let grows = |x: &Var| {
        while_loop(
            |c: &Var| c.sum_all().lt(&c.sum_all().full_like(9.0)),
            |c: &Var| c.slice_axis(0, Some(0), Some(1), 1),
            x,
        )
    };
    let e = jit(grows).eval(&x).unwrap_err().to_string();
    assert!(e.contains("while_loop") && e.contains("carry 0") && e.contains("f64[1]"), "{e}");
}

// ------------------------------------------------------------- loops

#[test]
fn fori_loop_with_static_and_traced_bounds() {
    let body = |i: &Var, x: &Var| x * 0.9 + &i.cast(DType::F64);
    let fixed = |x: &Var| fori_loop(0, 6, body, x);
    let traced = |x: &Var, n: &Var| fori_loop(0, n, body, x);
    let unrolled = |x: &Var| {
        let mut x = x.clone();
        for i in 0..6 {
            x = x * 0.9 + i as f64;
        }
        x
    };
    let x = t(&[1.0, -2.0], &[2]);
    let want = jit(unrolled).eval(&x).unwrap();
    close("static", &jit(fixed).eval(&x).unwrap(), &want, 1e-14);
    close("traced", &jit(traced).eval((&x, &Tensor::scalar(6i64))).unwrap(), &want, 1e-14);
    let loss = |x: &Var| Ok::<_, anvil::Error>(fixed(x)?.square().sum_all());
    close(
        "grad",
        &grad(loss).eval(&x).unwrap(),
        &grad(|x: &Var| unrolled(x).square().sum_all()).eval(&x).unwrap(),
        1e-13,
    );
    // Forward mode through the traced-bound (while) form.
    let (_, tangent) = jvp(traced)
        .eval(((&x, &Tensor::scalar(6i64)), (Some(&t(&[1.0, 0.0], &[2])), None::<&Tensor>)))
        .unwrap();
    close("jvp", &tangent, &t(&[0.9f64.powi(6), 0.0], &[2]), 1e-14);
}

/// Newton's iteration for sqrt(a), to a tolerance.
fn newton_sqrt(a: &Var) -> anvil::Result<Var> {
    let (x, _) = while_loop(
        |(x, _): &(Var, Var)| {
            (x * x - a).abs().flatten().max(&[0], false).gt(&a.sum_all().full_like(1e-12))
        },
        |(x, n): &(Var, Var)| ((x + &(a / x)) * 0.5, n + 1.0),
        (&a.ones_like(), &a.zeros_like()),
    )?;
    Ok(x)
}

#[test]
fn while_loop_runs_until_its_predicate_fails_per_element_under_vmap() {
    let a = Tensor::scalar(2.0);
    assert!((jit(newton_sqrt).eval(&a).unwrap().item().unwrap() - 2f64.sqrt()).abs() < 1e-12);
    // Batched predicate: elements converge after different numbers of steps.
    let counts = |a: &Var| {
        while_loop(
            |(x, _): &(Var, Var)| {
                (x * x - a).abs().flatten().max(&[0], false).gt(&a.sum_all().full_like(1e-12))
            },
            |(x, n): &(Var, Var)| ((x + &(a / x)) * 0.5, n + 1.0),
            (&a.ones_like(), &a.zeros_like()),
        )
    };
    let batch = t(&[2.0, 1.0, 100.0, 1e6], &[4]);
    let (roots, steps) = vmap(counts).eval(&batch).unwrap();
    for (i, v) in batch.to_vec::<f64>().unwrap().iter().enumerate() {
        let (r, n) = jit(counts).eval(Tensor::scalar(*v)).unwrap();
        assert_eq!(roots.to_vec::<f64>().unwrap()[i], r.item().unwrap(), "element {i}");
        assert_eq!(steps.to_vec::<f64>().unwrap()[i], n.item().unwrap(), "element {i} steps");
    }
    let s = steps.to_vec::<f64>().unwrap();
    assert!(s[1] < s[3], "the elements stopped at different steps: {s:?}");
    // Forward mode: d sqrt(a) / da = 1 / (2 sqrt(a)).
    let (_, da) = jvp(newton_sqrt).eval((&batch, &batch.ones_like_tensor())).unwrap();
    let want: Vec<f64> = batch.to_vec::<f64>().unwrap().iter().map(|v| 0.5 / v.sqrt()).collect();
    close("jvp", &da, &t(&want, &[4]), 1e-9);
    // Reverse mode needs a bound, and says so.
    let e = grad(|a: &Var| Ok::<_, anvil::Error>(newton_sqrt(a)?.sum_all()))
        .eval(&batch)
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_steps") || e.contains("bound"), "{e}");
}

trait OnesLike {
    fn ones_like_tensor(&self) -> Tensor;
}
impl OnesLike for Tensor {
    fn ones_like_tensor(&self) -> Tensor {
        Tensor::ones(self.shape()).unwrap()
    }
}

/// The bounded Newton iteration, differentiable in reverse mode.
fn newton_sqrt_bounded(a: &Var) -> anvil::Result<Var> {
    while_loop_bounded(
        |x: &Var| (x * x - a).abs().flatten().max(&[0], false).gt(&a.sum_all().full_like(1e-12)),
        |x: &Var| (x + &(a / x)) * 0.5,
        a.ones_like(),
        64,
    )
}

#[test]
fn grad_through_a_bounded_while_loop() {
    let batch = t(&[2.0, 1.0, 100.0, 1e6], &[4]);
    let loss = |a: &Var| Ok::<_, anvil::Error>(newton_sqrt_bounded(a)?.sum_all());
    let g = grad(loss).eval(&batch).unwrap();
    let want: Vec<f64> = batch.to_vec::<f64>().unwrap().iter().map(|v| 0.5 / v.sqrt()).collect();
    close("grad", &g, &t(&want, &[4]), 1e-9);
    // The same as the unrolled iteration's gradient (exactly the same steps).
    let steps = |a: f64| {
        let mut x: f64 = 1.0;
        let mut n = 0;
        while (x * x - a).abs() > 1e-12 && n < 64 {
            x = (x + a / x) * 0.5;
            n += 1;
        }
        n
    };
    let n = batch.to_vec::<f64>().unwrap().iter().map(|&v| steps(v)).max().unwrap();
    let unrolled = move |a: &Var| {
        let mut x = a.ones_like();
        for _ in 0..n {
            x = (&x + &(a / &x)) * 0.5;
        }
        x.sum_all()
    };
    close("grad = unrolled", &g, &grad(unrolled).eval(&batch).unwrap(), 1e-10);
    // Per-example gradients through the bounded loop (a batched predicate).
    let scalar_loss = |a: &Var| Ok::<_, anvil::Error>(newton_sqrt_bounded(a)?.sum_all());
    let per = vmap(grad(scalar_loss)).eval(batch.reshape(&[4, 1]).unwrap()).unwrap();
    // Each element as if alone: at a = 1 the loop takes no step (x0 = 1 is
    // the root), so that program's derivative is 0, not 1/(2 sqrt a).
    for (i, v) in batch.to_vec::<f64>().unwrap().iter().enumerate() {
        let alone = grad(scalar_loss).eval(t(&[*v], &[1])).unwrap();
        close("vmap(grad)", &per.select_axis(0, i).unwrap(), &alone, 1e-12);
    }
    assert_eq!(per.to_vec::<f64>().unwrap()[1], 0.0);
}

#[test]
fn second_order_reverse_mode_through_a_bounded_while_loop() {
    // x <- x * a from 1 while x < 10: at a = 1.5 six steps, x = a^6. The
    // gradient's forward pass (checkpoints by segments) is itself a bounded
    // loop, so reverse over reverse works as forward over reverse does.
    let f = |a: &Var| {
        while_loop_bounded(|x: &Var| x.lt(&x.full_like(10.0)), |x: &Var| x * a, a.ones_like(), 12)
    };
    let a = Tensor::scalar(1.5);
    let want = Tensor::scalar(30.0 * 1.5f64.powi(4));
    close("grad", &grad(f).eval(&a).unwrap(), &Tensor::scalar(6.0 * 1.5f64.powi(5)), 1e-12);
    close("hessian", &hessian(f).eval(&a).unwrap(), &want, 1e-10);
    close("jacrev(grad)", &jacrev(grad(f)).eval(&a).unwrap(), &want, 1e-10);
    close("jacrev(jacrev)", &jacrev(jacrev(f)).eval(&a).unwrap(), &want, 1e-10);
    let batch = t(&[1.5, 2.0, 1.1], &[3]);
    let per = vmap(jacrev(jacrev(f))).eval(&batch).unwrap();
    let fwd = vmap(jacfwd(jacrev(f))).eval(&batch).unwrap();
    close("vmap(jacrev(jacrev)) = vmap(jacfwd(jacrev))", &per, &fwd, 1e-10);
}

/// Newton's method as a while_loop whose body takes a Jacobian (jacfwd
/// inside the loop: the seed algebra's ops run in a loop body too).
#[test]
fn newton_with_a_jacobian_inside_a_while_loop() {
    let residual = |u: &Var, lam: &Var| {
        let n = u.shape()[0];
        let p = u.pad(&[(1, 1)], 0.0);
        let (l, r) =
            (p.slice_axis(0, Some(0), Some(n as i64), 1), p.slice_axis(0, Some(2), None, 1));
        (u * 2.0 - l - r) * ((n + 1) as f64).powi(2) - lam * &u.exp()
    };
    let step =
        move |u: &Var, lam: &Var| u - &jacfwd(residual).invoke((u, lam)).solve(&residual(u, lam));
    let solve = move |lam: &Var| {
        while_loop_bounded(
            |u: &Var| residual(u, lam).norm().gt(&lam.full_like(1e-10)),
            |u: &Var| step(u, lam),
            full(&[8], 0.0),
            20,
        )
    };
    let lam = Tensor::scalar(1.0);
    let u = jit(solve).eval(&lam).unwrap();
    let mut want = Tensor::zeros(&[8]).unwrap();
    for _ in 0..6 {
        want = jit(step).eval((&want, &lam)).unwrap();
    }
    close("newton", &u, &want, 1e-12);
    // d u / d lam through the loop (reverse mode, bounded), against jvp.
    let du = jacrev(solve).eval(&lam).unwrap();
    let (_, du_fwd) = jvp(solve).eval((&lam, &Tensor::scalar(1.0))).unwrap();
    close("du/dlam", &du, &du_fwd, 1e-9);
}

#[test]
fn printed_graphs_show_loop_bodies() {
    let f = |x: &Var| scan_n(|c: &Var, _: &()| (c.sin() * 2.0, c.cos()), x, 3);
    let g = trace(&f, Tensor::zeros(&[2]).unwrap()).unwrap();
    let text = g.to_string();
    assert!(
        text.contains("scan[length=3") && text.contains("sin") && text.contains("cos"),
        "{text}"
    );
    let dot = g.to_dot();
    assert!(dot.contains("subgraph cluster") && dot.contains("sin"), "{dot}");
    // Clusters say which body they are.
    let both = |x: &Var| -> anvil::Result<Var> {
        let y = while_loop(
            |c: &Var| c.sum_all().lt(&c.sum_all().full_like(9.0)),
            |c: &Var| c * 2.0,
            x,
        )?;
        piecewise(&y, x)
    };
    let dot = trace(&both, Tensor::ones(&[2]).unwrap()).unwrap().to_dot();
    for label in ["while: cond_fun", "while: body_fun", "cond: branch 0", "cond: branch 1"] {
        assert!(dot.contains(label), "{label}: {dot}");
    }
}

#[test]
fn carries_that_trade_places_keep_their_values() {
    // (a, b) -> (b, a + b): one carry is the other's input, one is computed
    // in the step (its buffer is swapped in, not copied): Fibonacci.
    let fib = jit(|a: &Var, b: &Var| {
        fori_loop(0, 30, |_: &Var, (a, b): &(Var, Var)| (b.clone(), a + b), (a.clone(), b.clone()))
    });
    let (a, b) = fib.eval((&Tensor::scalar(0.0), &Tensor::scalar(1.0))).unwrap();
    assert_eq!((a.item().unwrap(), b.item().unwrap()), (832040.0, 1346269.0));
    // Two carries returning the same value share a slot: both get it.
    let same = jit(|a: &Var| {
        fori_loop(0, 3, |_: &Var, (a, _): &(Var, Var)| (a * 2.0, a * 2.0), (a.clone(), a.clone()))
    });
    let (x, y) = same.eval(Tensor::scalar(1.0)).unwrap();
    assert_eq!((x.item().unwrap(), y.item().unwrap()), (8.0, 8.0));
}
