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

/// `sum(w * softmax(x))`.
fn w_softmax(x: &Var, w: &Var) -> Var {
    (w * &softmax_last(x)).sum_all()
}

/// `sum(w * log_softmax(x))`.
fn w_log_softmax(x: &Var, w: &Var) -> Var {
    (w * &log_softmax_last(x)).sum_all()
}

/// `sum(softmax(x) * x)`.
fn x_softmax(x: &Var) -> Var {
    (softmax_last(x) * x).sum_all()
}

/// `sum(log_softmax(x) * x)`.
fn x_log_softmax(x: &Var) -> Var {
    (log_softmax_last(x) * x).sum_all()
}

/// `sum(log_softmax(x))`.
fn sum_log_softmax(x: &Var) -> Var {
    log_softmax_last(x).sum_all()
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
    // Losses through softmax and log-softmax, with weights `w` or `x`: the
    // maximum; the row sums (`Σ e`, `Σ w·e`, `Σ w·x`, `Σ w`) in one fused
    // node (sibling reductions computed in one pass); the gradient. Four
    // passes for softmax and five for log-softmax with each row sum in its
    // own node, and log-softmax's value `Σ w·(x − lse)` a pass of its own
    // before the sum's linearity rewrite made it `Σ w·x − lse·Σ w`.
    let w = input(&[7, 33], 0.9);
    let two: Vec<(&str, Graph)> = vec![
        ("weighted softmax vg", anvil::lower(&value_and_grad(w_softmax), (&x, &w)).unwrap()),
        (
            "weighted log_softmax vg",
            anvil::lower(&value_and_grad(w_log_softmax), (&x, &w)).unwrap(),
        ),
        ("softmax vg", anvil::lower(&value_and_grad(x_softmax), &x).unwrap()),
        ("log_softmax vg", anvil::lower(&value_and_grad(x_log_softmax), &x).unwrap()),
        ("log_softmax sum vg", anvil::lower(&value_and_grad(sum_log_softmax), &x).unwrap()),
    ];
    for (name, g) in two {
        let (p, _, text) = passes(&g, n);
        assert!(p <= 3, "{name}: {p} passes\n{text}");
    }
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

/// Per row of `x` (`cols` wide): the softmax, and the logsumexp.
fn rows(x: &[f64], cols: usize) -> Vec<(Vec<f64>, f64)> {
    x.chunks(cols)
        .map(|r| {
            let m = r.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
            let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
            (r.iter().map(|v| (v - m).exp() / s).collect(), m + s.ln())
        })
        .collect()
}

/// The values and gradients of the losses through softmax and log-softmax
/// (computed in three passes, with the sum's linearity rewrite) match plain
/// loops, in f64 and f32, for rows shorter and longer than a block.
#[test]
fn loss_values_and_gradients_match_the_loops() {
    for shape in [[1, 1], [3, 7], [5, 513], [2, 1100], [600, 9]] {
        let cols = shape[1];
        let (x, w) = (input(&shape, 0.3), input(&shape, 1.7));
        let (xv, wv) = (f64s(&x), f64s(&w));
        let r = rows(&xv, cols);
        // (value, gradient) per loss, from the loops.
        let mut want: Vec<(f64, Vec<f64>)> = vec![(0.0, Vec::new()); 5];
        for (i, (p, lse)) in r.iter().enumerate() {
            let xr = &xv[i * cols..(i + 1) * cols];
            let wr = &wv[i * cols..(i + 1) * cols];
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>();
            let (wp, xp) = (dot(wr, p), dot(xr, p));
            let (sw, sx) = (wr.iter().sum::<f64>(), xr.iter().sum::<f64>());
            want[0].0 += wp;
            want[0].1.extend(p.iter().zip(wr).map(|(p, w)| p * (w - wp)));
            want[1].0 += xr.iter().zip(wr).map(|(x, w)| w * (x - lse)).sum::<f64>();
            want[1].1.extend(p.iter().zip(wr).map(|(p, w)| w - p * sw));
            want[2].0 += xp;
            want[2].1.extend(p.iter().zip(xr).map(|(p, x)| p * (1.0 + x - xp)));
            want[3].0 += xr.iter().map(|x| x * (x - lse)).sum::<f64>();
            want[3].1.extend(p.iter().zip(xr).map(|(p, x)| 2.0 * x - lse - p * sx));
            want[4].0 += xr.iter().map(|x| x - lse).sum::<f64>();
            want[4].1.extend(p.iter().map(|p| 1.0 - p * cols as f64));
        }
        for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 2e-5)] {
            let (x, w) = (x.cast(dtype), w.cast(dtype));
            let got: Vec<(Tensor, Tensor)> = vec![
                jit(value_and_grad(w_softmax)).eval((&x, &w)).unwrap(),
                jit(value_and_grad(w_log_softmax)).eval((&x, &w)).unwrap(),
                jit(value_and_grad(x_softmax)).eval(&x).unwrap(),
                jit(value_and_grad(x_log_softmax)).eval(&x).unwrap(),
                jit(value_and_grad(sum_log_softmax)).eval(&x).unwrap(),
            ];
            for (k, ((v, g), (wv, wg))) in got.iter().zip(&want).enumerate() {
                let what = format!("loss {k} {shape:?} {dtype:?}");
                // The value is a sum of `numel` terms: its tolerance scales.
                let n = (shape[0] * shape[1]) as f64;
                close(&f64s(v), &[*wv], tol * n.sqrt().max(1.0), &what);
                close(&f64s(g), wg, tol, &what);
            }
        }
    }
}

/// Sibling reductions of one shape and axes, whose chains read values
/// computed before the first chain — `Σ e` and `max e` of `e = exp(x/2)`,
/// `Σ w·e` (a leaf the first chain does not read), `Σ w` (a leaf reduced
/// as it is) — are one fused node, one pass that writes nothing of the
/// operand's size, and each result has the bits of its reduction computed
/// alone: along rows, along columns (reduced rows shorter and longer than
/// a block), with kept axes, in f64 and f32, and with too few rows to
/// share among threads.
#[test]
fn sibling_reductions_share_one_pass_with_the_bits_of_each_alone() {
    type F = fn(&Var, &Var, &[i64]) -> Var;
    let parts: [F; 4] = [
        |x, _, a| (x * 0.5).exp().sum(a),
        |x, _, a| (x * 0.5).exp().max(a, false),
        |x, w, a| (w * &(x * 0.5).exp()).sum_keepdims(a),
        |_, w, a| w.sum(a),
    ];
    for (shape, axis) in [([6, 37], 1), ([37, 6], 0), ([3, 600], 0), ([1, 300_001], 1)] {
        let all = move |x: &Var, w: &Var| {
            let e = (x * 0.5).exp();
            vec![
                e.sum(&[axis]),
                e.max(&[axis], false),
                (w * &e).sum_keepdims(&[axis]),
                w.sum(&[axis]),
            ]
        };
        for dtype in [DType::F64, DType::F32] {
            let x = input(&shape, 0.1).cast(dtype);
            let w = input(&shape, 2.3).cast(dtype);
            let g = anvil::lower(&all, (&x, &w)).unwrap();
            let numel = shape[0] * shape[1];
            let (p, written, text) = passes(&g, numel);
            assert_eq!((p, written), (1, 0), "{text}");
            assert_eq!(text.matches("fused_reduce[").count(), 1, "{text}");
            let got = jit(all).eval((&x, &w)).unwrap();
            for (k, part) in parts.iter().enumerate() {
                let alone =
                    jit(move |x: &Var, w: &Var| part(x, w, &[axis])).eval((&x, &w)).unwrap();
                assert_eq!(got[k].shape(), alone.shape(), "{k} {shape:?}");
                let (a, b) = (f64s(&got[k]), f64s(&alone));
                assert!(
                    a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "result {k} {shape:?} {dtype:?}: {a:?} vs {b:?}"
                );
            }
            // And the values of the loops (f64).
            if dtype == DType::F64 && axis == 1 {
                let (xv, wv) = (f64s(&x), f64s(&w));
                let cols = shape[1];
                let e: Vec<f64> = xv.iter().map(|v| (v * 0.5).exp()).collect();
                let sums: Vec<f64> = e.chunks(cols).map(|r| r.iter().sum()).collect();
                let we: Vec<f64> = e
                    .chunks(cols)
                    .zip(wv.chunks(cols))
                    .map(|(e, w)| e.iter().zip(w).map(|(e, w)| e * w).sum())
                    .collect();
                close(&f64s(&got[0]), &sums, 1e-12, "Σ e");
                close(&f64s(&got[2]), &we, 1e-12, "Σ w·e");
            }
        }
    }
}

/// Reductions that cannot share the first chain's pass stay apart, with
/// the right values: a chain reading the first reduction's result (it
/// joins a later chain's pass), a chain whose value is read elsewhere too
/// (it hosts its own pass), a reduction over other axes.
#[test]
fn reductions_that_cannot_share_a_pass_stay_apart() {
    let (x, w) = (input(&[5, 21], 0.4), input(&[5, 21], 1.1));
    let f = |x: &Var, w: &Var| {
        let e = x.exp();
        let s = e.sum_keepdims(&[1]);
        let t = w * &e;
        vec![
            s.clone(),
            (x - &s).exp().sum(&[1]), // reads Σ e: a later pass
            t.sum(&[1]),
            t.sin(),            // `w·e` is read elsewhere: its own node
            (x * &e).sum(&[0]), // other axes
        ]
    };
    let g = anvil::lower(&f, (&x, &w)).unwrap();
    let text = anvil::cpu::compile(&g).unwrap().graph().to_string();
    // Σ e alone in the first node; `Σ exp(x - Σ e)` joins the pass of
    // `w·e` (after Σ e, and written out for `sin`), whose own sum is there;
    // the column sum is a node of its own.
    let nodes: Vec<&str> = text.lines().filter(|l| l.contains("fused_reduce[")).collect();
    assert_eq!(nodes.len(), 3, "{text}");
    assert_eq!(nodes[0].matches(" over ").count(), 1, "{text}");
    assert!(nodes[1].contains("kept=") && !nodes[1].contains("kept=none"), "{text}");
    let out = jit(f).eval((&x, &w)).unwrap();
    let (xv, wv) = (f64s(&x), f64s(&w));
    let e: Vec<f64> = xv.iter().map(|v| v.exp()).collect();
    let s: Vec<f64> = e.chunks(21).map(|r| r.iter().sum()).collect();
    let row = |f: &dyn Fn(usize) -> f64| -> Vec<f64> {
        (0..5).map(|i| (0..21).map(|j| f(i * 21 + j)).sum()).collect()
    };
    close(&f64s(&out[0]), &s, 1e-13, "Σ e");
    close(&f64s(&out[1]), &row(&|k| (xv[k] - s[k / 21]).exp()), 1e-13, "Σ exp(x - s)");
    close(&f64s(&out[2]), &row(&|k| wv[k] * e[k]), 1e-13, "Σ w·e");
    let t: Vec<f64> = wv.iter().zip(&e).map(|(w, e)| (w * e).sin()).collect();
    close(&f64s(&out[3]), &t, 1e-13, "sin(w·e)");
    let cols: Vec<f64> =
        (0..21).map(|j| (0..5).map(|i| xv[i * 21 + j] * e[i * 21 + j]).sum()).collect();
    close(&f64s(&out[4]), &cols, 1e-13, "Σ_i x·e");
}

/// `f32` reductions accumulate in `f64` and round once, whether alone,
/// fused with their chain, along rows or columns, inside a loop body, or
/// running (`cumsum`):
/// `2²⁴ + 1 + 1 + 1 + 1` is `2²⁴ + 4` (summed in `f32` it stays `2²⁴`), as
/// JAX's sums are.
#[test]
fn f32_sums_accumulate_in_f64() {
    let big = 16_777_216.0f32;
    let row = Tensor::from_vec(vec![big, 1.0, 1.0, 1.0, 1.0], &[1, 5]).unwrap();
    let want = 16_777_220.0f32;
    let sums: Vec<(&str, Tensor)> = vec![
        ("alone", jit(|x: &Var| x.sum_all()).eval(&row).unwrap()),
        ("rows", jit(|x: &Var| x.sum(&[1])).eval(&row).unwrap()),
        (
            "columns",
            jit(|x: &Var| x.transpose().broadcast_to(&[5, 9]).sum(&[0])).eval(&row).unwrap(),
        ),
        ("fused", jit(|x: &Var| (x * 1.0).abs().sum(&[1])).eval(&row).unwrap()),
        ("mean", jit(|x: &Var| x.mean() * 5.0).eval(&row).unwrap()),
        ("cumsum", jit(|x: &Var| x.cumsum(1, false).i(ix![.., -1])).eval(&row).unwrap()),
        (
            "scan body",
            jit(|x: &Var| {
                scan_n(|c: &Var, _: &()| (c + &x.sum_all(), ()), x.sum_all().zeros_like(), 1)
                    .map(|(c, ())| c)
            })
            .eval(&row)
            .unwrap(),
        ),
    ];
    for (what, s) in sums {
        assert_eq!(s.dtype(), DType::F32, "{what}");
        let v = s.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|&v| v == want), "{what}: {v:?}");
    }
}
