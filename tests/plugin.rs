//! The example plugin crates (`examples/special`, `examples/special-cpu`)
//! linked into a program: their ops are registered with every rule, pass
//! the conformance kit, and give the right Jacobians, per-example gradients
//! and Hessians against closed forms.

use anvil::prelude::*;
use anvil_special::{BesselJ0, BesselJ1, CumSum, SinCos, SpecialExt};
use anvil_special_cpu as _;
use anvil_testing::{check_op, rule_report, InputKind, OpSample};

fn j0(x: f64) -> f64 {
    series::j0(x)
}
fn j1(x: f64) -> f64 {
    series::j1(x)
}

/// Independent reference values: the power series of J0 and J1 (converge
/// fast for |x| < 5), not the plugin's kernel.
mod series {
    pub fn j0(x: f64) -> f64 {
        series(x, 0)
    }
    pub fn j1(x: f64) -> f64 {
        series(x, 1)
    }
    fn series(x: f64, n: i32) -> f64 {
        let mut term = (x / 2.0).powi(n); // k = 0: (x/2)^n / n!, n <= 1
        let mut sum = term;
        for k in 1..60 {
            term *= -(x * x / 4.0) / (k as f64 * (k + n) as f64);
            sum += term;
        }
        sum
    }
}

fn xs() -> Tensor {
    Tensor::from_vec(vec![0.3, 1.1, 2.5, -0.7], &[4]).unwrap()
}

#[test]
fn the_plugin_ops_are_registered_with_every_rule() {
    use anvil::core::{jvp_rules, transpose_rules, vmap_rules};
    let kernels = anvil::cpu::kernels();
    let ops: Vec<Box<dyn anvil::Op>> = vec![
        Box::new(BesselJ0),
        Box::new(BesselJ1),
        Box::new(CumSum { axis: 0, reverse: false }),
        Box::new(SinCos),
    ];
    for op in &ops {
        // Elementwise ops need no kernel: the backend runs their block math.
        let runs =
            kernels.lookup(op.as_ref()).unwrap().is_some() || op.elementwise_math().is_some();
        assert!(runs, "{} kernel", op.name());
        assert!(vmap_rules().lookup(op.as_ref()).unwrap().is_some(), "{} vmap", op.name());
        assert!(jvp_rules().lookup(op.as_ref()).unwrap().is_some(), "{} jvp", op.name());
    }
    assert!(
        transpose_rules().lookup(ops[2].as_ref()).unwrap().is_some(),
        "cumsum is linear: transpose rule"
    );
    assert!(transpose_rules().lookup(ops[0].as_ref()).unwrap().is_none(), "j0 is not linear");
}

fn plugin_samples() -> Vec<OpSample> {
    let u = InputKind::Uniform { lo: -3.0, hi: 3.0 };
    vec![
        OpSample::new(BesselJ0).input(u.clone(), &[2, 3]),
        OpSample::new(BesselJ1).input(u.clone(), &[3]),
        OpSample::new(CumSum { axis: 0, reverse: false }).input(u.clone(), &[4]),
        OpSample::new(CumSum { axis: 1, reverse: false }).input(u.clone(), &[2, 3, 2]),
        OpSample::new(CumSum { axis: 0, reverse: true }).input(u.clone(), &[3, 2]),
        OpSample::new(SinCos).input(u, &[2, 3]),
    ]
}

/// Every check of the kit: vmap against loops (every batch position,
/// nested), jvp against finite differences, the dot-product test of the
/// transpose, vmap of jvp.
#[test]
fn the_plugin_ops_pass_the_conformance_kit() {
    for s in plugin_samples() {
        let report = check_op(&s);
        assert!(report.is_ok(), "{report}");
    }
    // Registry introspection lists them with their rules.
    let report = rule_report();
    let row = |name: &str| {
        report.iter().find(|r| r.op == name).unwrap_or_else(|| panic!("{name} not listed"))
    };
    let cumsum = row("CumSum");
    assert!(
        cumsum.kernel && cumsum.vmap && cumsum.jvp && cumsum.transpose,
        "{:?}",
        cumsum.location
    );
    let j0 = row("BesselJ0");
    assert!(!j0.kernel && j0.vmap && j0.jvp && !j0.transpose);
    let sincos = row("SinCos");
    assert!(sincos.kernel && sincos.vmap && sincos.jvp && !sincos.transpose);
}

/// An op with two results: each is its own value in the printed graph, and
/// both go through every transform.
#[test]
fn a_two_result_plugin_op_prints_and_differentiates() {
    let x = Tensor::from_vec(vec![0.3, 1.1, -0.7], &[3]).unwrap();
    let f = |x: &Var| {
        let (s, c) = x.sincos();
        vec![s, c]
    };
    let g = trace(&f, &x).unwrap();
    assert!(g.to_string().contains("%1: f64[3], %2: f64[3] = special.sincos %0"), "{g}");
    let out = jit(f).eval(&x).unwrap();
    let xv = x.to_vec::<f64>().unwrap();
    assert_eq!(out[0].to_vec::<f64>().unwrap(), xv.iter().map(|v| v.sin()).collect::<Vec<_>>());
    assert_eq!(out[1].to_vec::<f64>().unwrap(), xv.iter().map(|v| v.cos()).collect::<Vec<_>>());
    // d/dx (sin x · cos x) = cos 2x, through both results.
    let gr = grad(|x: &Var| {
        let (s, c) = x.sincos();
        (s * c).sum_all()
    })
    .eval(&x)
    .unwrap();
    for (g, v) in gr.to_vec::<f64>().unwrap().iter().zip(&xv) {
        assert!((g - (2.0 * v).cos()).abs() < 1e-15, "{g} {v}");
    }
    let h = hessian(|x: &Var| x.sincos().1.sum_all()).eval(&x).unwrap();
    let want: Vec<f64> = (0..9).map(|k| if k % 4 == 0 { -xv[k / 4].cos() } else { 0.0 }).collect();
    h.assert_allclose(&Tensor::from_vec(want, &[3, 3]).unwrap(), 1e-15, 1e-15);
}

/// The plugin's own rewrite rule fires in the optimised graph: a
/// cumulative sum along an axis of length 1 is gone.
#[test]
fn a_plugin_rewrite_rule_fires() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3, 1]).unwrap();
    let f = |x: &Var| x.special_cumsum(1).exp();
    let raw = trace(&f, &x).unwrap();
    assert_eq!(raw.count::<CumSum>(), 1);
    let g = anvil::lower(&f, &x).unwrap();
    assert_eq!(g.count::<CumSum>(), 0, "{g}");
    // Along the long axis it stays.
    assert_eq!(anvil::lower(&|x: &Var| x.special_cumsum(0), &x).unwrap().count::<CumSum>(), 1);
    let want: Vec<f64> = x.to_vec::<f64>().unwrap().iter().map(|v| v.exp()).collect();
    jit(f).eval(&x).unwrap().assert_allclose(&Tensor::from_vec(want, &[3, 1]).unwrap(), 1e-15, 0.0);
}

#[test]
fn values_match_the_series() {
    let got = jit(|x: &Var| x.j0()).eval(xs()).unwrap().to_vec::<f64>().unwrap();
    let got1 = jit(|x: &Var| x.j1()).eval(xs()).unwrap().to_vec::<f64>().unwrap();
    for (i, &x) in xs().to_vec::<f64>().unwrap().iter().enumerate() {
        assert!((got[i] - j0(x)).abs() < 1e-14 && (got1[i] - j1(x)).abs() < 1e-14, "{x}");
    }
    let c = jit(|x: &Var| x.special_cumsum(-1)).eval(xs()).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(c, vec![0.3, 0.3 + 1.1, 0.3 + 1.1 + 2.5, 0.3 + 1.1 + 2.5 - 0.7]);
}

#[test]
fn jacobians_against_closed_forms() {
    let x = xs();
    let xv = x.to_vec::<f64>().unwrap();
    // d J0(x) / dx = -J1(x), a diagonal Jacobian.
    let jf = jacfwd(|x: &Var| x.j0()).eval(&x).unwrap();
    let jr = jacrev(|x: &Var| x.j0()).eval(&x).unwrap();
    let mut want = vec![0.0; 16];
    for i in 0..4 {
        want[i * 4 + i] = -j1(xv[i]);
    }
    let want = Tensor::from_vec(want, &[4, 4]).unwrap();
    jf.assert_allclose(&want, 1e-13, 1e-14);
    jr.assert_allclose(&want, 1e-13, 1e-14);
    // The Jacobian of a cumulative sum is lower-triangular ones, both ways.
    let lower: Vec<f64> = (0..16).map(|k| if k % 4 <= k / 4 { 1.0 } else { 0.0 }).collect();
    let lower = Tensor::from_vec(lower, &[4, 4]).unwrap();
    jacrev(|x: &Var| x.special_cumsum(0)).eval(&x).unwrap().assert_allclose(&lower, 0.0, 0.0);
    jacfwd(|x: &Var| x.special_cumsum(0)).eval(&x).unwrap().assert_allclose(&lower, 0.0, 0.0);
}

/// Per-example gradients of `sum(J0(w * x))` in `w`: `-x J1(w x)`.
#[test]
fn per_example_gradients() {
    let w = Tensor::from_vec(vec![0.5, -1.5, 2.0], &[3]).unwrap();
    let batch = Tensor::from_vec(vec![0.1, 0.2, 0.3, 1.0, -1.0, 0.5], &[2, 3]).unwrap();
    let loss = |w: &Var, x: &Var| (w * x).j0().sum_all();
    let g = vmap(grad(loss)).in_axes([None, Some(0)]).eval((&w, &batch)).unwrap();
    let (wv, bv) = (w.to_vec::<f64>().unwrap(), batch.to_vec::<f64>().unwrap());
    let want: Vec<f64> = (0..6).map(|k| -bv[k] * j1(wv[k % 3] * bv[k])).collect();
    g.assert_allclose(&Tensor::from_vec(want, &[2, 3]).unwrap(), 1e-13, 1e-14);
}

/// Hessians: of `sum(J0(x))`, `diag(-(J0 - J1/x))`; of `|cumsum(x)|² / 2`,
/// `Cᵀ C` with `C` lower-triangular ones, i.e. `n - max(i, j)`.
#[test]
fn hessians_against_closed_forms() {
    let x = xs();
    let xv = x.to_vec::<f64>().unwrap();
    let h = hessian(|x: &Var| x.j0().sum_all()).eval(&x).unwrap();
    let mut want = vec![0.0; 16];
    for i in 0..4 {
        want[i * 4 + i] = -(j0(xv[i]) - j1(xv[i]) / xv[i]);
    }
    h.assert_allclose(&Tensor::from_vec(want, &[4, 4]).unwrap(), 1e-12, 1e-13);
    let h = hessian(|x: &Var| x.special_cumsum(0).square().sum_all() * 0.5).eval(&x).unwrap();
    let want: Vec<f64> = (0..16).map(|k| (4 - (k / 4).max(k % 4)) as f64).collect();
    h.assert_allclose(&Tensor::from_vec(want, &[4, 4]).unwrap(), 1e-14, 1e-14);
    // J1' at 0 is the limit 1/2, not NaN.
    let d =
        grad(|x: &Var| x.j1().sum_all()).eval(Tensor::from_vec(vec![0.0], &[1]).unwrap()).unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![0.5]);
}

#[test]
fn a_plugin_ops_sparsity_rule_is_used_and_an_op_without_one_is_dense_with_a_warning() {
    use anvil::sparse::{jacobian_sparsity, sparse_jacfwd};
    // cumsum's own rule: lower triangular per line, exact.
    let f = |x: &Var| x.special_cumsum(1).sin();
    let x = Tensor::from_vec(vec![0.3, 1.1, 2.5, -0.7, 0.2, 0.9], &[2, 3]).unwrap();
    let p = jacobian_sparsity(&f, &x).unwrap();
    assert_eq!(p.to_string(), "x.....\nxx....\nxxx...\n...x..\n...xx.\n...xxx\n");
    let j = sparse_jacfwd(f).eval(&x).unwrap();
    let dense = jacfwd(f).eval(&x).unwrap().reshape(&[6, 6]).unwrap();
    assert!(j.to_dense().unwrap().allclose(&dense, 1e-14, 1e-14));
    // sincos has no rule (two results, so not the elementwise fact either):
    // dense, correct, and named in the warning list.
    let g = |x: &Var| {
        let (s, c) = x.sincos();
        s + c
    };
    let p = jacobian_sparsity(&g, xs()).unwrap();
    assert_eq!(p.nnz(), 16);
    assert!(anvil::core::sparsity::dense_fallbacks().contains(&"special.sincos"));
}
