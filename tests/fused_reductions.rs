//! A reduction at the end of a fused elementwise chain runs in the same
//! pass as the chain (issue 22, item 5): the compiled plan of softmax,
//! log-softmax, logsumexp and their value-and-gradient makes at most three
//! passes over the full-size data, and a chain ended by a sum is one node
//! that materialises nothing of the operand's size. Values match the same
//! math evaluated op by op (eagerly, unfused), for odd sizes, f32 and f64,
//! and with NaN and infinities.

use anvil::prelude::*;
use anvil::Graph;

/// Deterministic f64 inputs of `shape`.
fn input(shape: &[usize], seed: f64) -> Tensor {
    let n = shape.iter().product::<usize>();
    Tensor::from_vec((0..n).map(|i| 3.0 * (i as f64 * 0.37 + seed).sin()).collect(), shape).unwrap()
}

/// The plan's nodes that read or write a value of `numel` elements (passes
/// over the full-size data), and the number of such values it materialises.
fn passes(g: &Graph, numel: usize) -> (usize, usize, String) {
    let plan = anvil::cpu::compile(g).unwrap();
    let pg = plan.graph();
    let big = |v: anvil::core::ValueId| pg.ty(v).numel() == numel;
    let mut passes = 0;
    let mut written = 0;
    for (_, n) in pg.iter() {
        if n.inputs.is_empty() {
            continue; // a parameter or a constant
        }
        let writes = n.results().filter(|&v| big(v)).count();
        if writes > 0 || n.inputs.iter().any(|&i| big(i)) {
            passes += 1;
        }
        written += writes;
    }
    (passes, written, format!("{pg}"))
}

fn softmax_last(x: &Var) -> Var {
    x.softmax(-1)
}

fn log_softmax_last(x: &Var) -> Var {
    x.log_softmax(-1)
}

fn lse_last(x: &Var) -> Var {
    x.logsumexp(&[-1], false).sum_all()
}

fn lse_all(x: &Var) -> Var {
    x.logsumexp(&[0, 1], false)
}

/// `sum(tanh(x) * x + 1)` over the last axis: a chain and a sum.
fn chain_sum(x: &Var) -> Var {
    ((x.tanh() * x) + 1.0).sum(&[-1])
}

/// `sum(exp(x) * x)` over the first axis (a column reduction).
fn chain_sum_cols(x: &Var) -> Var {
    (x.exp() * x).sum(&[0])
}

#[test]
fn chain_ended_by_a_sum_is_one_pass_without_materialising_the_chain() {
    let x = input(&[5, 13], 0.1);
    for f in [chain_sum, chain_sum_cols] {
        let g = anvil::lower(&f, &x).unwrap();
        let (p, written, text) = passes(&g, 65);
        assert_eq!((p, written), (1, 0), "{text}");
        assert!(text.contains("fused_reduce"), "{text}");
    }
}

#[test]
fn softmax_family_runs_in_at_most_three_passes() {
    let x = input(&[7, 33], 0.2);
    let n = 7 * 33;
    let cases: Vec<(&str, Graph)> = vec![
        ("softmax", anvil::lower(&softmax_last, &x).unwrap()),
        ("log_softmax", anvil::lower(&log_softmax_last, &x).unwrap()),
        ("logsumexp", anvil::lower(&lse_last, &x).unwrap()),
        ("logsumexp value_and_grad", anvil::lower(&value_and_grad(lse_last), &x).unwrap()),
        ("logsumexp all value_and_grad", anvil::lower(&value_and_grad(lse_all), &x).unwrap()),
    ];
    for (name, g) in cases {
        let (p, _, text) = passes(&g, n);
        assert!(p <= 3, "{name}: {p} passes\n{text}");
    }
    // The value and gradient of a loss through softmax, `sum(softmax(x) *
    // x)`: the maximum; `Σ e` and `Σ e·x` in one fused node (sibling
    // reductions over one chain); the gradient. Four passes with the two
    // row sums in separate nodes, five before the sum's rewrite took `1 / s`
    // out of `Σ_j e_j x_j / s`.
    let sg = value_and_grad(|x: &Var| (softmax_last(x) * x).sum_all());
    let (p, _, text) = passes(&anvil::lower(&sg, &x).unwrap(), n);
    assert!(p <= 3, "{p} passes\n{text}");
    // logsumexp itself is two: the maximum, then exp-and-sum.
    let (p, _, text) = passes(&anvil::lower(&lse_last, &x).unwrap(), n);
    assert_eq!(p, 2, "{text}");
}

/// Reference values in plain loops over f64: softmax over the last axis
/// (shifted by the row's maximum, infinite or not, as `softmax` is).
/// With `finite_shift`, an infinite maximum shifts by 0 (as in the gradient
/// of `logsumexp`, whose shift is made finite).
fn ref_softmax(x: &[f64], cols: usize, finite_shift: bool) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|r| {
            let m =
                r.iter().fold(f64::NEG_INFINITY, |a, &b| if b > a || b.is_nan() { b } else { a });
            let m = if finite_shift && !m.is_finite() { 0.0 } else { m };
            let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
            r.iter().map(move |v| (v - m).exp() / s).collect::<Vec<_>>()
        })
        .collect()
}

/// The sum of the per-row logsumexp over the last axis.
fn ref_lse(x: &[f64], cols: usize) -> f64 {
    x.chunks(cols)
        .map(|r| {
            let m =
                r.iter().fold(f64::NEG_INFINITY, |a, &b| if b > a || b.is_nan() { b } else { a });
            let m = if m.is_finite() { m } else { 0.0 };
            r.iter().map(|v| (v - m).exp()).sum::<f64>().ln() + m
        })
        .sum()
}

/// `sum(tanh(x) * x + 1)` per row.
fn ref_chain_sum(x: &[f64], cols: usize) -> Vec<f64> {
    x.chunks(cols).map(|r| r.iter().map(|v| v.tanh() * v + 1.0).sum()).collect()
}

/// `sum(exp(x) * x)` per column.
fn ref_chain_cols(x: &[f64], cols: usize) -> Vec<f64> {
    (0..cols).map(|c| x.iter().skip(c).step_by(cols).map(|v| v.exp() * v).sum()).collect()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).to_vec::<f64>().unwrap()
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let ok = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * (1.0 + b.abs());
        assert!(ok, "{what}[{i}]: {a} vs {b}");
    }
}

/// Checks fused results of `x` (f64 or f32) against the loops on `x` in f64.
fn check_values(x: &Tensor, tol: f64) {
    let cols = *x.shape().last().unwrap();
    let xv = f64s(x);
    let what = format!("{:?} {:?}", x.shape(), x.dtype());
    close(&f64s(&jit(softmax_last).eval(x).unwrap()), &ref_softmax(&xv, cols, false), tol, &what);
    let (v, g) = jit(value_and_grad(lse_last)).eval(x).unwrap();
    close(&f64s(&v), &[ref_lse(&xv, cols)], tol, &what);
    close(&f64s(&g), &ref_softmax(&xv, cols, true), tol, &what);
    close(&f64s(&jit(chain_sum).eval(x).unwrap()), &ref_chain_sum(&xv, cols), tol, &what);
    close(&f64s(&jit(chain_sum_cols).eval(x).unwrap()), &ref_chain_cols(&xv, cols), tol, &what);
}

#[test]
fn values_match_unfused_evaluation_for_odd_sizes_and_both_floats() {
    // Rows shorter and longer than a block (512), and columns wider than one.
    for shape in [[1, 1], [3, 7], [5, 513], [2, 1100], [600, 9], [3, 600]] {
        let x = input(&shape, 0.3);
        check_values(&x, 1e-12);
        check_values(&x.cast(DType::F32), 2e-5);
    }
}

#[test]
fn nan_and_infinities_propagate() {
    let mut v = input(&[4, 9], 0.4).to_vec::<f64>().unwrap();
    v[3] = f64::NAN; // row 0
    v[9 + 2] = f64::INFINITY; // row 1
    v[18 + 5] = f64::NEG_INFINITY; // row 2
    let x = Tensor::from_vec(v, &[4, 9]).unwrap();
    for x in [x.clone(), x.cast(DType::F32)] {
        check_values(&x, 2e-5);
        let s = f64s(&jit(chain_sum).eval(&x).unwrap());
        assert!(s[0].is_nan() && s[1] == f64::INFINITY && s[2] == f64::INFINITY, "{s:?}");
        let m = f64s(&jit(|x: &Var| (x * 2.0).max(&[-1], false)).eval(&x).unwrap());
        assert!(m[0].is_nan() && m[1] == f64::INFINITY && m[2].is_finite(), "{m:?}");
    }
}

/// Any op that declares its [`anvil::core::ReductionMath`] ends a fused
/// chain, not only `sum`/`max`/`min`: a product over a chain is one pass,
/// with the value of the unfused product.
#[test]
fn any_declared_reduction_ends_a_chain() {
    let x = input(&[6, 11], 0.5);
    let f = |x: &Var| (x * 0.1).exp().prod(&[-1], false);
    let g = anvil::lower(&f, &x).unwrap();
    let (p, written, text) = passes(&g, 66);
    assert_eq!((p, written), (1, 0), "{text}");
    assert!(text.contains("fused_reduce") && text.contains("prod over"), "{text}");
    let xv = x.to_vec::<f64>().unwrap();
    let want: Vec<f64> =
        xv.chunks(11).map(|r| r.iter().fold(1.0, |a, v| a * (v * 0.1).exp())).collect();
    close(&f64s(&jit(f).eval(&x).unwrap()), &want, 1e-14, "prod");
}

/// A cheap op over values that are materialised anyway, read by a few
/// groups, is recomputed in each instead of written out and read back:
/// `x * y` read by `sin` and `cos` costs two passes (the two results), not
/// three, and the value of either is unchanged.
#[test]
fn a_cheap_shared_op_is_recomputed_not_materialised() {
    let x = input(&[4, 50], 0.6);
    let y = input(&[4, 50], 0.7);
    let f = |x: &Var, y: &Var| {
        let p = x * y;
        vec![p.sin(), p.cos()]
    };
    let g = anvil::lower(&f, (&x, &y)).unwrap();
    let (p, written, text) = passes(&g, 200);
    assert_eq!((p, written), (2, 2), "{text}");
    let out = jit(f).eval((&x, &y)).unwrap();
    let (xv, yv) = (x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
    let prod: Vec<f64> = xv.iter().zip(&yv).map(|(a, b)| a * b).collect();
    close(&f64s(&out[0]), &prod.iter().map(|v| v.sin()).collect::<Vec<_>>(), 1e-14, "sin");
    close(&f64s(&out[1]), &prod.iter().map(|v| v.cos()).collect::<Vec<_>>(), 1e-14, "cos");
    // A transcendental shared op is still written once (recomputing `exp`
    // costs about what reading it back does).
    let h = |x: &Var| {
        let e = x.exp();
        vec![e.sin(), e.cos()]
    };
    let (p, written, text) = passes(&anvil::lower(&h, &x).unwrap(), 200);
    assert_eq!((p, written), (3, 3), "{text}");
}

/// Reductions with too few rows to share among threads (a whole-array sum,
/// column sums) run the chain in parallel and then the reduction, with the
/// same values.
#[test]
fn large_reductions_with_few_rows_match_the_loops() {
    for shape in [[1, 300_001], [400, 700]] {
        let x = input(&shape, 0.8);
        check_values(&x, 1e-12);
    }
}
