//! The ops of `anvil::lax` beyond the conformance kit: every one's
//! derivative checks really run (not skipped or trivially passed), kernels
//! against naive references on sizes that straddle lanes and the parallel
//! threshold, sort stability on long lanes, and the errors of bad calls.

use anvil::lax::{dynamic_slice, gather, GatherDimensionNumbers, GatherMode};
use anvil::prelude::*;
use anvil::Parallelism;
use anvil_testing::{check_op, random_tensor, standard_samples, CheckOutcome};

const LAX_OPS: &[&str] = &[
    "sinh",
    "cosh",
    "asin",
    "acos",
    "atan",
    "asinh",
    "acosh",
    "atanh",
    "exp2",
    "log2",
    "log10",
    "erfc",
    "erf_inv",
    "cbrt",
    "rem",
    "nextafter",
    "clamp",
    "integer_pow",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "cumlogsumexp",
    "sort",
];

#[test]
fn every_lax_op_is_checked_for_real() {
    let samples = standard_samples();
    for name in LAX_OPS {
        let mine: Vec<_> = samples.iter().filter(|s| s.op.name() == *name).collect();
        assert!(!mine.is_empty(), "{name}: no sample");
        let mut jvp_ran = false;
        for s in mine {
            let report = check_op(s);
            assert!(report.is_ok(), "{report}");
            assert_eq!(report.outcome("vmap"), Some(&CheckOutcome::Passed), "{}", s.describe());
            jvp_ran |= report.outcome("jvp") == Some(&CheckOutcome::Passed);
        }
        assert!(jvp_ran, "{name}: no sample ran the jvp check against finite differences");
    }
}

/// The parallelism policy with the parallel paths taken from small sizes.
fn eager() -> Parallelism {
    Parallelism::default().min_parallel_elems(1)
}

fn naive_cumsum(x: &[f64], outer: usize, n: usize, inner: usize, reverse: bool) -> Vec<f64> {
    let mut out = x.to_vec();
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = 0.0;
            let order: Vec<usize> = if reverse { (0..n).rev().collect() } else { (0..n).collect() };
            for j in order {
                let at = (o * n + j) * inner + i;
                acc += x[at];
                out[at] = acc;
            }
        }
    }
    out
}

#[test]
fn cumsum_matches_a_naive_scan_on_every_axis_in_parallel() {
    for shape in [[3usize, 65, 2], [64, 3, 63], [1, 129, 1]] {
        let x = random_tensor(&shape, 7);
        let v = x.to_vec::<f64>().unwrap();
        for axis in 0..3 {
            for reverse in [false, true] {
                let outer: usize = shape[..axis].iter().product();
                let inner: usize = shape[axis + 1..].iter().product();
                let want = naive_cumsum(&v, outer, shape[axis], inner, reverse);
                for par in [Parallelism::sequential(), eager()] {
                    let f = move |x: &Var| x.cumsum(axis as i64, reverse);
                    let got = f.eval_with(&x, &par).unwrap().to_vec::<f64>().unwrap();
                    let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                    assert!(err < 1e-12, "{shape:?} axis {axis} reverse {reverse}: {err}");
                }
            }
        }
    }
}

#[test]
fn sort_is_stable_on_long_lanes_in_parallel() {
    // Values with many ties, on lanes of 129 along the middle axis.
    let x = random_tensor(&[3, 129, 2], 3);
    let rounded: Vec<f64> = x.to_vec::<f64>().unwrap().iter().map(|v| (v * 4.0).round()).collect();
    let x = Tensor::from_vec(rounded.clone(), &[3, 129, 2]).unwrap();
    for descending in [false, true] {
        let f = move |x: &Var| x.sort_with_indices(1, descending);
        let (s, idx) = f.eval_with(&x, &eager()).unwrap();
        let (s, idx) = (s.to_vec::<f64>().unwrap(), idx.to_vec::<i64>().unwrap());
        for o in 0..3 {
            for i in 0..2 {
                let at = |j: usize| (o * 129 + j) * 2 + i;
                for j in 1..129 {
                    let (a, b) = (s[at(j - 1)], s[at(j)]);
                    assert!(if descending { a >= b } else { a <= b }, "not sorted");
                    if a == b {
                        assert!(idx[at(j - 1)] < idx[at(j)], "ties out of order");
                    }
                    assert_eq!(rounded[(o * 129 + idx[at(j)] as usize) * 2 + i], b);
                }
            }
        }
    }
}

#[test]
fn cumulative_and_sort_compose_under_vmap_of_grad() {
    // Per-row gradients of a soft ranking loss: vmap(grad) against a loop.
    let x = random_tensor(&[4, 6], 11);
    let loss = |r: &Var| (r.sort(0, true).cumlogsumexp(0, false) * r.cummax(0, true)).sum_all();
    let batched = vmap(grad(loss)).eval(&x).unwrap();
    for row in 0..4 {
        let one = grad(loss).eval(x.select_axis(0, row).unwrap()).unwrap();
        assert!(batched.select_axis(0, row).unwrap().allclose(&one, 1e-12, 1e-12), "row {row}");
    }
}

#[test]
fn bad_calls_are_errors_that_name_the_op() {
    let x = Tensor::zeros(&[3, 4]).unwrap();
    let msg = |r: anvil::Result<Tensor>| r.unwrap_err().to_string();
    assert!(msg((|x: &Var| x.cumsum(2, false)).eval(&x)).contains("cumulative"));
    assert!(msg((|x: &Var| x.sort(-3, false)).eval(&x)).contains("sort"));
    assert!(msg((|x: &Var| x.top_k(5).0).eval(&x)).contains("top_k"));
    let i = Tensor::scalar(1i64);
    let wrong_count = |x: &Var, i: &Var| dynamic_slice(x, &[i], &[2, 2]);
    assert!(msg(wrong_count.eval((&x, &i))).contains("dynamic_slice"));
    let too_big = |x: &Var, i: &Var| dynamic_slice(x, &[i, i], &[2, 5]);
    assert!(msg(too_big.eval((&x, &i))).contains("dynamic_slice"));
    let f_idx = Tensor::zeros(&[2, 1]).unwrap();
    let dn = GatherDimensionNumbers {
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        offset_dims: vec![1],
        ..Default::default()
    };
    let bad_dtype = |x: &Var, i: &Var| gather(x, i, &dn, &[1, 4], GatherMode::Clip, None);
    assert!(msg(bad_dtype.eval((&x, &f_idx))).contains("gather"));
    let ints = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert!(msg((|x: &Var| x.integer_pow(-1)).eval(&ints)).contains("integer_pow"));
    let bad_combine = |x: &Var| {
        let both = |a: &[Var], b: &[Var]| vec![&a[0] + &b[0], a[0].clone()];
        anvil::lax::associative_scan(&both, std::slice::from_ref(x), false, 1).remove(0)
    };
    assert!(msg(bad_combine.eval(&x)).contains("associative_scan"));
    let bad_axis = |x: &Var| {
        anvil::lax::associative_scan(&|a, _| a.to_vec(), std::slice::from_ref(x), false, 2)
            .remove(0)
    };
    assert!(msg(bad_axis.eval(&x)).contains("associative_scan"));
    let e = anvil::linear_transpose(&|x: &Var| x.sin(), &x).unwrap_err().to_string();
    assert!(e.contains("sin"), "{e}");
    let e = anvil::linear_transpose(&|x: &Var| x * x, &x).unwrap_err().to_string();
    assert!(e.contains("mul"), "{e}");
}

#[test]
fn lax_ops_run_inside_loop_bodies_and_differentiate_through_them() {
    // Each step: sort, a running sum, a dynamic slice at the step index.
    let body = |i: &Var, x: &Var| {
        let window = dynamic_slice(&x.sort(0, false).cumsum(0, false), &[i], &[2]);
        x.cumprod(0, true) * 0.5 + window.sum_all().sinh() * 0.1
    };
    let looped = |x: &Var| fori_loop(0, 3, body, x);
    let unrolled = |x: &Var| {
        let mut x = x.clone();
        for i in 0..3 {
            x = body(&x.scalar_like(0.0).cast(DType::I64).full_like(i as f64), &x);
        }
        x
    };
    let x = Tensor::from_vec(vec![0.3, -0.8, 0.5, 0.1], &[4]).unwrap();
    let want = jit(unrolled).eval(&x).unwrap();
    assert!(jit(looped).eval(&x).unwrap().allclose(&want, 1e-13, 1e-13));
    let lu = |x: &Var| Ok::<_, anvil::Error>(looped(x)?.square().sum_all());
    let gl = grad(lu).eval(&x).unwrap();
    let gu = grad(|x: &Var| unrolled(x).square().sum_all()).eval(&x).unwrap();
    assert!(gl.allclose(&gu, 1e-12, 1e-12), "{gl}\n{gu}");
}

/// The values the rustdoc examples of `anvil::lax` state (they run at
/// trace level in the ops crate, which has no backend).
#[test]
fn the_documented_examples_compute_what_their_docs_say() {
    use anvil::lax::{associative_scan, clamp, dynamic_update_slice, pad, scatter};
    use anvil::lax::{GatherMode as M, ScatterDimensionNumbers};
    let v = |x: &[f64]| Tensor::from_vec(x.to_vec(), &[x.len()]).unwrap();
    let add = |a: &[Var], b: &[Var]| vec![&a[0] + &b[0]];
    let scan = move |x: &Var| associative_scan(&add, std::slice::from_ref(x), false, 0).remove(0);
    let got = scan.eval(v(&[1.0, 2.0, 3.0, 4.0, 5.0])).unwrap();
    assert_eq!(got.to_vec::<f64>().unwrap(), [1.0, 3.0, 6.0, 10.0, 15.0]);
    let ds = |x: &Var, i: &Var| dynamic_slice(x, &[i], &[2]);
    let x5 = v(&[0.0, 1.0, 2.0, 3.0, 4.0]);
    for i in [4i64, -1] {
        assert_eq!(
            ds.eval((&x5, &Tensor::scalar(i))).unwrap().to_vec::<f64>().unwrap(),
            [3.0, 4.0]
        );
    }
    let dus = |x: &Var, u: &Var, i: &Var| dynamic_update_slice(x, u, &[i]);
    let y =
        dus.eval((&Tensor::zeros(&[4]).unwrap(), &v(&[1.0, 2.0]), &Tensor::scalar(-7i64))).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), [1.0, 2.0, 0.0, 0.0]);
    let dn = GatherDimensionNumbers {
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        ..Default::default()
    };
    let g = |x: &Var, i: &Var| gather(x, i, &dn, &[1], M::Clip, None);
    let idx = Tensor::from_vec(vec![2i64, 0, 5], &[3, 1]).unwrap();
    let got = g.eval((&v(&[10.0, 11.0, 12.0]), &idx)).unwrap();
    assert_eq!(got.to_vec::<f64>().unwrap(), [12.0, 10.0, 12.0]);
    let sn = ScatterDimensionNumbers {
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        ..Default::default()
    };
    let s = |x: &Var, i: &Var, u: &Var| scatter(x, i, u, &sn, M::FillOrDrop);
    let idx = Tensor::from_vec(vec![3i64, 9], &[2, 1]).unwrap();
    let got = s.eval((&Tensor::zeros(&[4]).unwrap(), &idx, &v(&[5.0, 6.0]))).unwrap();
    assert_eq!(got.to_vec::<f64>().unwrap(), [0.0, 0.0, 0.0, 5.0]);
    // Of integers: i64, repeated indices their mean rounded toward zero.
    let ints = |x: &[i64]| Tensor::from_vec(x.to_vec(), &[x.len()]).unwrap();
    let idx = Tensor::from_vec(vec![1i64, 1, 3], &[3, 1]).unwrap();
    let got = s.eval((&ints(&[10, 20, 30, 40]), &idx, &ints(&[2, 5, 7]))).unwrap();
    assert_eq!(got.to_vec::<i64>().unwrap(), [10, 3, 30, 7]);
    let p = |x: &Var| pad(x, &x.full_like(0.0).sum_all(), &[(-1, 2, 1)]);
    let got = p.eval(v(&[1.0, 2.0, 3.0])).unwrap();
    assert_eq!(got.to_vec::<f64>().unwrap(), [0.0, 2.0, 0.0, 3.0, 0.0, 0.0]);
    let c = |x: &Var| clamp(&x.full_like(-1.0), x, &x.full_like(1.0));
    assert_eq!(c.eval(v(&[-2.0, 0.5, 3.0])).unwrap().to_vec::<f64>().unwrap(), [-1.0, 0.5, 1.0]);
    let f = |x: &Var| (x.cumsum(0, false), x.sort(0, false), x.argsort(0, false));
    let (cs, so, ix) = f.eval(v(&[3.0, 1.0, 2.0])).unwrap();
    assert_eq!(cs.to_vec::<f64>().unwrap(), [3.0, 4.0, 6.0]);
    assert_eq!(so.to_vec::<f64>().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(ix.to_vec::<i64>().unwrap(), [1, 2, 0]);
}
