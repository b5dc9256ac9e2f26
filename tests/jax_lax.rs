//! Programs from JAX's own test suite (`lax_test.py`,
//! `lax_autodiff_test.py`, `lax_numpy_test.py`, `api_test.py`, or written
//! in their style), one or more per op group of `anvil::lax` — elementwise
//! math, cumulative reductions, sorting, dynamic indexing / gather /
//! scatter / pad — and the API transformations `linear_transpose` and
//! `eval_shape`, checked against the values JAX computes on the same
//! inputs. The values are recorded by `tests/jax/lax_expected.py` (its
//! docstring says how to rerun it); the block between the markers below is
//! its output, verbatim.

use anvil::lax::{
    dynamic_slice, dynamic_update_slice, gather, pad, scatter, scatter_add,
    GatherDimensionNumbers, GatherMode, ScatterDimensionNumbers,
};
use anvil::prelude::*;

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn arange(shape: &[usize], scale: f64, shift: f64) -> Tensor {
    let n: usize = shape.iter().product();
    t(&(0..n).map(|i| i as f64 * scale + shift).collect::<Vec<_>>(), shape)
}

/// `got` (any dtype) equals JAX's `want` to a few ulps of the values' scale.
fn close(what: &str, got: &Tensor, want: &[f64]) {
    let g = got.cast(DType::F64).to_vec::<f64>().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: {} values, JAX has {}", g.len(), want.len());
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * (1.0 + b.abs());
        assert!(same, "{what}[{i}]: anvil {a}, JAX {b}\n{got}");
    }
}

// -------------------------------------------------------------- elementwise

type Unary = fn(&Var) -> Var;

#[test]
fn unary_ops_values_and_two_derivatives() {
    let x = t(&[-0.9, -0.35, 0.0, 0.2, 0.55, 0.8], &[6]);
    let p = t(&[0.3, 0.7, 1.0, 1.6, 2.5, 4.0], &[6]);
    let p1 = t(&[1.3, 1.7, 2.0, 2.6, 3.5, 5.0], &[6]);
    let x5 = t(&[-0.95, -0.4, -0.05, 0.15, 0.5, 0.75], &[6]);
    let cases: Vec<(&str, Unary, &Tensor, [&[f64]; 3])> = vec![
        ("sinh", |x| x.sinh(), &x, [&SINH_VALUE, &SINH_GRAD, &SINH_GRAD2]),
        ("cosh", |x| x.cosh(), &x, [&COSH_VALUE, &COSH_GRAD, &COSH_GRAD2]),
        ("asin", |x| x.asin(), &x, [&ASIN_VALUE, &ASIN_GRAD, &ASIN_GRAD2]),
        ("acos", |x| x.acos(), &x, [&ACOS_VALUE, &ACOS_GRAD, &ACOS_GRAD2]),
        ("atan", |x| x.atan(), &x, [&ATAN_VALUE, &ATAN_GRAD, &ATAN_GRAD2]),
        ("asinh", |x| x.asinh(), &x, [&ASINH_VALUE, &ASINH_GRAD, &ASINH_GRAD2]),
        ("acosh", |x| x.acosh(), &p1, [&ACOSH_VALUE, &ACOSH_GRAD, &ACOSH_GRAD2]),
        ("atanh", |x| x.atanh(), &x, [&ATANH_VALUE, &ATANH_GRAD, &ATANH_GRAD2]),
        ("exp2", |x| x.exp2(), &x, [&EXP2_VALUE, &EXP2_GRAD, &EXP2_GRAD2]),
        ("log2", |x| x.log2(), &p, [&LOG2_VALUE, &LOG2_GRAD, &LOG2_GRAD2]),
        ("log10", |x| x.log10(), &p, [&LOG10_VALUE, &LOG10_GRAD, &LOG10_GRAD2]),
        ("erfc", |x| x.erfc(), &x, [&ERFC_VALUE, &ERFC_GRAD, &ERFC_GRAD2]),
        ("erf_inv", |x| x.erf_inv(), &x, [&ERF_INV_VALUE, &ERF_INV_GRAD, &ERF_INV_GRAD2]),
        ("cbrt", |x| x.cbrt(), &x5, [&CBRT_VALUE, &CBRT_GRAD, &CBRT_GRAD2]),
    ];
    for (name, f, x, [value, d1, d2]) in cases {
        close(name, &f.eval(x).unwrap(), value);
        let sum = move |x: &Var| f(x).sum_all();
        close(&format!("grad {name}"), &grad(sum).eval(x).unwrap(), d1);
        let g2 = move |x: &Var| grad(sum).invoke(x).sum_all();
        close(&format!("grad of grad {name}"), &grad(g2).eval(x).unwrap(), d2);
    }
}

#[test]
fn rem_nextafter_is_finite() {
    let (a, b) = (t(&[5.5, -5.5, 7.25, -0.75, 3.0], &[5]), t(&[2.0, 2.0, -3.0, 0.5, 1.5], &[5]));
    close("rem", &(|a: &Var, b: &Var| a.rem(b)).eval((&a, &b)).unwrap(), &REM_VALUE);
    let w = arange(&[5], 1.0, 1.0);
    let f = move |a: &Var, b: &Var| (a.rem(b) * &w).sum_all();
    let g = grad(f).argnums(&[0, 1]).eval((&a, &b)).unwrap();
    close("d rem / da", &g.part::<Tensor>(0).unwrap(), &REM_GRAD_A);
    close("d rem / db", &g.part::<Tensor>(1).unwrap(), &REM_GRAD_B);
    let (ia, ib) = (Tensor::from_vec(vec![7i64, -7, 7, -7], &[4]).unwrap(), Tensor::from_vec(vec![3i64, 3, -3, -3], &[4]).unwrap());
    close("integer rem", &(|a: &Var, b: &Var| a.rem(b)).eval((&ia, &ib)).unwrap(), &REM_INT);
    let (x, y) = (t(&[1.0, 1.0, 0.0, -2.0], &[4]), t(&[2.0, 0.0, -1.0, -2.0], &[4]));
    close("nextafter", &(|x: &Var, y: &Var| x.nextafter(y)).eval((&x, &y)).unwrap(), &NEXTAFTER);
    let e = t(&[1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0], &[5]);
    close("is_finite", &(|x: &Var| x.is_finite()).eval(&e).unwrap(), &IS_FINITE);
}

#[test]
fn clamp_passes_no_tangent_at_its_bounds() {
    let (lo, x, hi) = (t(&[-1.0; 5], &[5]), t(&[-2.0, -1.0, 0.5, 1.0, 2.0], &[5]), t(&[1.0; 5], &[5]));
    let f = |lo: &Var, x: &Var, hi: &Var| anvil::lax::clamp(lo, x, hi);
    close("clamp", &f.eval((&lo, &x, &hi)).unwrap(), &CLAMP_VALUE);
    let g = grad(move |lo: &Var, x: &Var, hi: &Var| f(lo, x, hi).sum_all())
        .argnums(&[0, 1, 2])
        .eval((&lo, &x, &hi))
        .unwrap();
    close("d clamp / d lo", &g.part::<Tensor>(0).unwrap(), &CLAMP_GRAD_LO);
    close("d clamp / d x", &g.part::<Tensor>(1).unwrap(), &CLAMP_GRAD_X);
    close("d clamp / d hi", &g.part::<Tensor>(2).unwrap(), &CLAMP_GRAD_HI);
}

#[test]
fn integer_pow_is_one_at_zero_power_and_zero_safe() {
    let x = t(&[-1.5, 0.0, 0.5, 2.0], &[4]);
    let shifted = t(&[1.5, 3.0, 3.5, 5.0], &[4]);
    let cases: [(i32, &Tensor, [&[f64]; 3]); 5] = [
        (0, &x, [&INTEGER_POW_0, &INTEGER_POW_0_GRAD, &INTEGER_POW_0_HESS]),
        (1, &x, [&INTEGER_POW_1, &INTEGER_POW_1_GRAD, &INTEGER_POW_1_HESS]),
        (2, &x, [&INTEGER_POW_2, &INTEGER_POW_2_GRAD, &INTEGER_POW_2_HESS]),
        (3, &x, [&INTEGER_POW_3, &INTEGER_POW_3_GRAD, &INTEGER_POW_3_HESS]),
        (-2, &shifted, [&INTEGER_POW_M2, &INTEGER_POW_M2_GRAD, &INTEGER_POW_M2_HESS]),
    ];
    for (y, x, [value, d1, h]) in cases {
        close(&format!("x^{y}"), &(move |x: &Var| x.integer_pow(y)).eval(x).unwrap(), value);
        let sum = move |x: &Var| x.integer_pow(y).sum_all();
        close(&format!("grad x^{y}"), &grad(sum).eval(x).unwrap(), d1);
        close(&format!("hessian x^{y}"), &hessian(sum).eval(x).unwrap(), h);
    }
}

#[test]
fn any_and_all_reduce_truth_values() {
    let b = t(&[0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0, -1.0, 3.0], &[3, 3]);
    close("any rows", &(|x: &Var| x.any(&[1], false)).eval(&b).unwrap(), &ANY_ROWS);
    close("all rows", &(|x: &Var| x.all(&[1], false)).eval(&b).unwrap(), &ALL_ROWS);
    close("any cols", &(|x: &Var| x.any(&[0], false)).eval(&b).unwrap(), &ANY_COLS);
}

// ------------------------------------------------------------- cumulative

type Cum = fn(&Var, i64, bool) -> Var;

#[test]
fn cumulative_reductions_and_their_gradients() {
    let c = t(&[0.3, -1.2, 0.8, 2.0, 1.5, 0.4, -0.6, 0.9, -0.2, 1.1, 0.7, -1.4], &[3, 4]);
    let w = arange(&[3, 4], 0.25, -1.0);
    let ops: [(&str, Cum, [&[f64]; 8]); 5] = [
        ("cumsum", |x, a, r| x.cumsum(a, r), [&CUMSUM_0_F, &CUMSUM_0_F_GRAD, &CUMSUM_0_R, &CUMSUM_0_R_GRAD, &CUMSUM_1_F, &CUMSUM_1_F_GRAD, &CUMSUM_1_R, &CUMSUM_1_R_GRAD]),
        ("cumprod", |x, a, r| x.cumprod(a, r), [&CUMPROD_0_F, &CUMPROD_0_F_GRAD, &CUMPROD_0_R, &CUMPROD_0_R_GRAD, &CUMPROD_1_F, &CUMPROD_1_F_GRAD, &CUMPROD_1_R, &CUMPROD_1_R_GRAD]),
        ("cummax", |x, a, r| x.cummax(a, r), [&CUMMAX_0_F, &CUMMAX_0_F_GRAD, &CUMMAX_0_R, &CUMMAX_0_R_GRAD, &CUMMAX_1_F, &CUMMAX_1_F_GRAD, &CUMMAX_1_R, &CUMMAX_1_R_GRAD]),
        ("cummin", |x, a, r| x.cummin(a, r), [&CUMMIN_0_F, &CUMMIN_0_F_GRAD, &CUMMIN_0_R, &CUMMIN_0_R_GRAD, &CUMMIN_1_F, &CUMMIN_1_F_GRAD, &CUMMIN_1_R, &CUMMIN_1_R_GRAD]),
        ("cumlogsumexp", |x, a, r| x.cumlogsumexp(a, r), [&CUMLOGSUMEXP_0_F, &CUMLOGSUMEXP_0_F_GRAD, &CUMLOGSUMEXP_0_R, &CUMLOGSUMEXP_0_R_GRAD, &CUMLOGSUMEXP_1_F, &CUMLOGSUMEXP_1_F_GRAD, &CUMLOGSUMEXP_1_R, &CUMLOGSUMEXP_1_R_GRAD]),
    ];
    for (name, f, want) in ops {
        for (k, (axis, rev)) in [(0, false), (0, true), (1, false), (1, true)].into_iter().enumerate() {
            let what = format!("{name} axis {axis} reverse {rev}");
            close(&what, &(move |x: &Var| f(x, axis, rev)).eval(&c).unwrap(), want[2 * k]);
            let w = w.clone();
            let loss = move |x: &Var| (f(x, axis, rev) * &w).sum_all();
            close(&format!("grad {what}"), &grad(loss).eval(&c).unwrap(), want[2 * k + 1]);
        }
    }
}

#[test]
fn cummax_and_cummin_split_ties_as_jax() {
    let x = t(&[1.0, 3.0, 3.0, 2.0, 3.0, 3.0, 0.5], &[7]);
    let want: [(&str, Cum, bool, &[f64]); 4] = [
        ("cummax", |x, a, r| x.cummax(a, r), false, &CUMMAX_TIES_F_JAC),
        ("cummax", |x, a, r| x.cummax(a, r), true, &CUMMAX_TIES_R_JAC),
        ("cummin", |x, a, r| x.cummin(a, r), false, &CUMMIN_TIES_F_JAC),
        ("cummin", |x, a, r| x.cummin(a, r), true, &CUMMIN_TIES_R_JAC),
    ];
    for (name, f, rev, jac) in want {
        let g = move |x: &Var| f(x, 0, rev);
        close(&format!("jacrev {name} reverse {rev}"), &jacrev(g).eval(&x).unwrap(), jac);
        close(&format!("jacfwd {name} reverse {rev}"), &jacfwd(g).eval(&x).unwrap(), jac);
    }
}

#[test]
fn cumprod_differentiates_through_zeros() {
    let z = t(&[2.0, 0.0, 3.0, 0.0, 0.5], &[5]);
    let f = |x: &Var| x.cumprod(0, false);
    close("jacfwd", &jacfwd(f).eval(&z).unwrap(), &CUMPROD_ZEROS_JACFWD);
    close("jacrev", &jacrev(f).eval(&z).unwrap(), &CUMPROD_ZEROS_JACREV);
    close("hessian", &hessian(|x: &Var| f(x).sum_all()).eval(&z).unwrap(), &CUMPROD_ZEROS_HESS);
    let i = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    close("integer cumsum", &(|x: &Var| x.cumsum(1, false)).eval(&i).unwrap(), &CUMSUM_INT);
}

// ---------------------------------------------------------------- sorting

#[test]
fn sort_and_argsort_are_stable_in_both_directions() {
    let s = t(&[3.0, 1.0, 2.0, 1.0, 3.0, 0.5, 0.0, -1.0, 4.0, -1.0, 2.0, 2.0], &[2, 6]);
    let want: [[&[f64]; 4]; 2] = [
        [&SORT_0, &ARGSORT_0, &SORT_DESC_0, &ARGSORT_DESC_0],
        [&SORT_1, &ARGSORT_1, &SORT_DESC_1, &ARGSORT_DESC_1],
    ];
    for (axis, [sorted, idx, desc, desc_idx]) in want.into_iter().enumerate() {
        let a = axis as i64;
        close("sort", &(move |x: &Var| x.sort(a, false)).eval(&s).unwrap(), sorted);
        close("argsort", &(move |x: &Var| x.argsort(a, false)).eval(&s).unwrap(), idx);
        close("sort descending", &(move |x: &Var| x.sort(a, true)).eval(&s).unwrap(), desc);
        close("argsort descending", &(move |x: &Var| x.argsort(a, true)).eval(&s).unwrap(), desc_idx);
    }
    let n = t(&[2.0, f64::NAN, -1.0, 0.0, -0.0, f64::INFINITY], &[6]);
    close("sort with NaN", &(|x: &Var| x.sort(0, false)).eval(&n).unwrap(), &SORT_NAN);
    close("argsort with NaN", &(|x: &Var| x.argsort(0, false)).eval(&n).unwrap(), &ARGSORT_NAN);
    let (v, i) = (|x: &Var| x.top_k(3)).eval(&s).unwrap();
    close("top_k values", &v, &TOP_K_VALUES);
    close("top_k indices", &i, &TOP_K_INDICES);
}

#[test]
fn the_derivative_of_sort_is_a_gather() {
    let s = t(&[0.3, -1.2, 0.8, 2.0, 1.1, 1.5, 0.4, -0.6, 0.9, -2.0], &[2, 5]);
    let w = arange(&[2, 5], 0.5, -1.0);
    let (wa, wb) = (w.clone(), t(&[-1.0, -0.5, 1.5, 2.0], &[2, 2]));
    close("grad sort", &grad(move |x: &Var| (x.sort(1, false) * &wa).sum_all()).eval(&s).unwrap(), &SORT_GRAD);
    close("grad top_k", &grad(move |x: &Var| (x.top_k(2).0 * &wb).sum_all()).eval(&s).unwrap(), &TOP_K_GRAD);
    let median = |x: &Var| x.sort(1, false).at(1, 2).sum_all();
    close("grad median", &grad(median).eval(&s).unwrap(), &MEDIAN_GRAD);
}

// ------------------------------------------------------- dynamic indexing

fn i(v: i64) -> Tensor {
    Tensor::scalar(v)
}

#[test]
fn dynamic_slices_clamp_their_start_indices() {
    let d = arange(&[5, 4], 1.0, 0.0);
    let f = |x: &Var, a: &Var, b: &Var| dynamic_slice(x, &[a, b], &[2, 3]);
    for ((a, b), want) in [((1, 2), &DYNAMIC_SLICE_1_2[..]), ((-3, 1), &DYNAMIC_SLICE_M3_1), ((4, 7), &DYNAMIC_SLICE_4_7)] {
        close(&format!("dynamic_slice at ({a}, {b})"), &f.eval((&d, &i(a), &i(b))).unwrap(), want);
    }
    let u = arange(&[2, 3], -1.0, -1.0);
    let g = |x: &Var, u: &Var, a: &Var, b: &Var| dynamic_update_slice(x, u, &[a, b]);
    for ((a, b), want) in [((1, 0), &DYNAMIC_UPDATE_SLICE_1_0[..]), ((9, -2), &DYNAMIC_UPDATE_SLICE_9_M2)] {
        close(&format!("dynamic_update_slice at ({a}, {b})"), &g.eval((&d, &u, &i(a), &i(b))).unwrap(), want);
    }
    let loss = |x: &Var, u: &Var, a: &Var, b: &Var| dynamic_update_slice(x, u, &[a, b]).sin().sum_all();
    let gr = grad(loss).argnums(&[0, 1]).eval((&d, &u, &i(3), &i(2))).unwrap();
    close("grad dus operand", &gr.part::<Tensor>(0).unwrap(), &DUS_GRAD_OPERAND);
    close("grad dus update", &gr.part::<Tensor>(1).unwrap(), &DUS_GRAD_UPDATE);
    let sq = |x: &Var, a: &Var, b: &Var| dynamic_slice(x, &[a, b], &[3, 2]).square().sum_all();
    close("grad dynamic_slice", &grad(sq).eval((&d, &i(2), &i(1))).unwrap(), &DS_GRAD);
    // vmap over the traced start index.
    let starts = Tensor::from_vec(vec![0i64, 2, 4, -1], &[4]).unwrap();
    let dd = d.clone();
    let per = move |s: &Var| dynamic_slice(&s.constant_like(dd.clone()), &[s, s], &[2, 2]);
    close("vmap dynamic_slice", &vmap(per).eval(&starts).unwrap(), &DS_VMAP);
}

/// `d[idx, 1:3]` as `jnp` lowers it: a gather with axis 0 collapsed and
/// the slice `1:3` as an offset axis.
fn rows(d: &Var, idx: &Var) -> Var {
    let dn = GatherDimensionNumbers {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0, 1],
        ..Default::default()
    };
    let starts = anvil::concatenate(&[&idx.unsqueeze(1), &idx.unsqueeze(1).full_like(1.0)], 1);
    gather(d, &starts, &dn, &[1, 2], GatherMode::Clip, None)
}

/// `d.at[idx, 1:3].add(u)`: the scatter that transposes [`rows`].
fn add_rows(d: &Var, idx: &Var, u: &Var) -> Var {
    let dn = ScatterDimensionNumbers {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0, 1],
        ..Default::default()
    };
    let starts = anvil::concatenate(&[&idx.unsqueeze(1), &idx.unsqueeze(1).full_like(1.0)], 1);
    scatter_add(d, &starts, u, &dn, GatherMode::FillOrDrop)
}

#[test]
fn advanced_indexing_lowers_to_gather_and_scatter() {
    let d = arange(&[5, 4], 1.0, 0.0);
    let idx = Tensor::from_vec(vec![3i64, 0, 3, 1], &[4]).unwrap();
    close("d[idx, 1:3]", &rows.eval((&d, &idx)).unwrap(), &TAKE_ROWS);
    let sq = |d: &Var, idx: &Var| rows(d, idx).square().sum_all();
    close("grad d[idx, 1:3]", &grad(sq).eval((&d, &idx)).unwrap(), &TAKE_ROWS_GRAD);
    let up = arange(&[4, 2], 1.0, 0.0);
    close("d.at[idx, 1:3].add(u)", &add_rows.eval((&d, &idx, &up)).unwrap(), &AT_ADD);
    let loss = |d: &Var, idx: &Var, u: &Var| add_rows(d, idx, u).cos().sum_all();
    let g = grad(loss).argnums(&[0, 2]).eval((&d, &idx, &up)).unwrap();
    close("grad at.add operand", &g.part::<Tensor>(0).unwrap(), &AT_ADD_GRAD_OPERAND);
    close("grad at.add updates", &g.part::<Tensor>(1).unwrap(), &AT_ADD_GRAD_UPDATES);
    // d.at[[4, 0, 2], 0].set([-1, -2, -3])
    let set = |d: &Var, idx: &Var, u: &Var| {
        let dn = ScatterDimensionNumbers {
            inserted_window_dims: vec![0, 1],
            scatter_dims_to_operand_dims: vec![0, 1],
            ..Default::default()
        };
        let starts = anvil::concatenate(&[&idx.unsqueeze(1), &idx.unsqueeze(1).zeros_like()], 1);
        scatter(d, &starts, u, &dn, GatherMode::FillOrDrop)
    };
    let (si, su) = (Tensor::from_vec(vec![4i64, 0, 2], &[3]).unwrap(), t(&[-1.0, -2.0, -3.0], &[3]));
    close("d.at[idx, 0].set(u)", &set.eval((&d, &si, &su)).unwrap(), &AT_SET);
    // A raw gather with out-of-range starts, clipped or filled.
    let gi = Tensor::from_vec(vec![0i64, 0, 4, 3, -2, 1, 2, 9], &[4, 2]).unwrap();
    let raw = |mode: GatherMode| {
        move |d: &Var, gi: &Var| {
            let dn = GatherDimensionNumbers {
                offset_dims: vec![1],
                collapsed_slice_dims: vec![0],
                start_index_map: vec![0, 1],
                ..Default::default()
            };
            gather(d, gi, &dn, &[1, 2], mode, Some(-7.0))
        }
    };
    close("gather clip", &raw(GatherMode::Clip).eval((&d, &gi)).unwrap(), &GATHER_CLIP);
    close("gather fill", &raw(GatherMode::FillOrDrop).eval((&d, &gi)).unwrap(), &GATHER_FILL);
}

#[test]
fn pad_with_interior_and_negative_widths() {
    let x = arange(&[3, 4], 1.0, 1.0);
    let configs: [([(i64, i64, usize); 2], &[f64]); 3] = [
        ([(1, 2, 1), (0, 1, 0)], &PAD_0),
        ([(-1, 0, 0), (-2, 0, 1)], &PAD_1),
        ([(0, 0, 2), (2, -3, 1)], &PAD_2),
    ];
    for (cfg, want) in configs {
        let f = move |x: &Var| pad(x, &x.full_like(-1.0).sum_all().full_like(-1.0), &cfg);
        close(&format!("pad {cfg:?}"), &f.eval(&x).unwrap(), want);
    }
    let cfg = [(1, -1, 1), (-1, 2, 2)];
    let loss = move |x: &Var, v: &Var| pad(x, v, &cfg).square().sum_all();
    let g = grad(loss).argnums(&[0, 1]).eval((&x, &Tensor::scalar(0.5))).unwrap();
    close("grad pad operand", &g.part::<Tensor>(0).unwrap(), &PAD_GRAD);
    close("grad pad value", &g.part::<Tensor>(1).unwrap(), &PAD_GRAD_VALUE);
}

// --------------------------------------------------- API transformations

#[test]
fn linear_transpose_of_a_linear_program() {
    let x = t(&[1.0, -2.0, 0.5, 3.0], &[4]);
    let f = |x: &Var| (x.flip(&[0]) * 2.0).cumsum(0, false) + x.sum_all();
    let ft = anvil::linear_transpose(&f, &x).unwrap();
    let (ct,) = ft.eval(&t(&[0.5, 1.0, -1.0, 2.0], &[4])).unwrap();
    close("linear_transpose", &ct, &LINEAR_TRANSPOSE);
}

#[test]
fn eval_shape_traces_without_running() {
    let x = anvil::TensorType::new(DType::F64, vec![5, 4]);
    let f = |x: &Var| (x.sort(0, false), x.top_k(2), x.cumsum(1, true).any(&[0], false));
    let (s, (v, i), a): (anvil::TensorType, (anvil::TensorType, anvil::TensorType), anvil::TensorType) =
        anvil::eval_shape(&f, &x).unwrap().into_tree().unwrap();
    assert_eq!(s, x);
    assert_eq!((v.shape(), i.shape(), i.dtype()), (&[5usize, 2][..], &[5usize, 2][..], DType::I64));
    assert_eq!((a.shape(), a.dtype()), (&[4usize][..], DType::Bool));
}

// --- recorded by tests/jax/lax_expected.py with JAX 0.10.2
const SINH_VALUE: [f64; 6] = [-1.0265167257081753, -0.3571897294372719, 0.0, 0.20133600254109402, 0.5781516037434543, 0.8881059821876232];
const SINH_GRAD: [f64; 6] = [1.4330863854487745, 1.0618778191559852, 1.0, 1.020066755619076, 1.155101414123941, 1.3374349463048447];
const SINH_GRAD2: [f64; 6] = [-1.0265167257081753, -0.3571897294372719, 0.0, 0.20133600254109402, 0.5781516037434543, 0.8881059821876232];
const COSH_VALUE: [f64; 6] = [1.4330863854487745, 1.0618778191559852, 1.0, 1.020066755619076, 1.155101414123941, 1.3374349463048447];
const COSH_GRAD: [f64; 6] = [-1.0265167257081753, -0.3571897294372719, 0.0, 0.20133600254109402, 0.5781516037434543, 0.8881059821876232];
const COSH_GRAD2: [f64; 6] = [1.4330863854487745, 1.0618778191559852, 1.0, 1.020066755619076, 1.155101414123941, 1.3374349463048447];
const ASIN_VALUE: [f64; 6] = [-1.1197695149986342, -0.35757110364551026, 0.0, 0.2013579207903308, 0.5823642378687435, 0.9272952180016122];
const ASIN_GRAD: [f64; 6] = [2.294157338705618, 1.0675210253672476, 1.0, 1.0206207261596576, 1.1973686801784993, 1.666666666666667];
const ASIN_GRAD2: [f64; 6] = [-10.867061078079246, -0.4257918619698423, 0.0, 0.21262931794992868, 0.944161683294874, 3.703703703703706];
const ACOS_VALUE: [f64; 6] = [2.6905658417935308, 1.9283674304404068, 1.5707963267948966, 1.369438406004566, 0.9884320889261531, 0.6435011087932844];
const ACOS_GRAD: [f64; 6] = [-2.294157338705618, -1.0675210253672476, -1.0, -1.0206207261596576, -1.1973686801784993, -1.666666666666667];
const ACOS_GRAD2: [f64; 6] = [10.867061078079246, 0.4257918619698423, -0.0, -0.21262931794992868, -0.944161683294874, -3.703703703703706];
const ATAN_VALUE: [f64; 6] = [-0.7328151017865067, -0.3366748193867272, 0.0, 0.19739555984988075, 0.5028432109278609, 0.6747409422235526];
const ATAN_GRAD: [f64; 6] = [0.5524861878453039, 0.8908685968819599, 1.0, 0.9615384615384615, 0.7677543186180422, 0.6097560975609756];
const ATAN_GRAD2: [f64; 6] = [0.5494337779677055, 0.5555527998373023, -0.0, -0.3698224852071006, -0.6483913631323198, -0.594883997620464];
const ASINH_VALUE: [f64; 6] = [-0.8088669356527823, -0.34322155508594393, 0.0, 0.19869011034924142, 0.5254804479785135, 0.732668256045411];
const ASINH_GRAD: [f64; 6] = [0.7432941462471663, 0.9438583563660174, 1.0, 0.9805806756909202, 0.876215908676647, 0.7808688094430303];
const ASINH_GRAD2: [f64; 6] = [0.369593774377044, 0.29429881935688734, -0.0, -0.18857320686363852, -0.36999520136058034, -0.3809116143624538];
const ACOSH_VALUE: [f64; 6] = [0.7564329108569596, 1.123230982587296, 1.3169578969248166, 1.6094379124341003, 1.9248473002384139, 2.2924316695611777];
const ACOSH_GRAD: [f64; 6] = [1.203858530857692, 0.727392967453308, 0.5773502691896257, 0.41666666666666663, 0.29814239699997197, 0.2041241452319315];
const ACOSH_GRAD2: [f64; 6] = [-2.2681392610362305, -0.6542688067040338, -0.38490017945975047, -0.1880787037037037, -0.09275541239999127, -0.04252586358998573];
const ATANH_VALUE: [f64; 6] = [-1.4722194895832204, -0.3654437542713961, 0.0, 0.2027325540540822, 0.6183813135744636, 1.0986122886681098];
const ATANH_GRAD: [f64; 6] = [5.263157894736843, 1.1396011396011394, 1.0, 1.0416666666666667, 1.4336917562724016, 2.7777777777777786];
const ATANH_GRAD2: [f64; 6] = [-49.86149584487537, -0.9090835301661512, 0.0, 0.4340277777777777, 2.2610192572037877, 12.345679012345688];
const EXP2_VALUE: [f64; 6] = [0.5358867312681466, 0.7845840978967508, 1.0, 1.1486983549970349, 1.4640856959456254, 1.7411011265922482];
const EXP2_GRAD: [f64; 6] = [0.37144837687800086, 0.5438322553693009, 0.6931471805599453, 0.7962170260800419, 1.0148268722428555, 1.2068393369671613];
const EXP2_GRAD2: [f64; 6] = [0.2574683951565543, 0.37695579450678707, 0.4804530139182014, 0.5518955867412054, 0.7034243852516031, 0.8365172838076216];
const LOG2_VALUE: [f64; 6] = [-1.7369655941662063, -0.5145731728297583, 0.0, 0.6780719051126377, 1.3219280948873624, 2.0];
const LOG2_GRAD: [f64; 6] = [4.8089834696298785, 2.060992915555662, 1.4426950408889634, 0.9016844005556021, 0.5770780163555853, 0.36067376022224085];
const LOG2_GRAD2: [f64; 6] = [-16.02994489876626, -2.9442755936509464, -1.4426950408889634, -0.5635527503472513, -0.23083120654223416, -0.09016844005556021];
const LOG10_VALUE: [f64; 6] = [-0.5228787452803376, -0.1549019599857432, 0.0, 0.20411998265592482, 0.3979400086720376, 0.6020599913279624];
const LOG10_GRAD: [f64; 6] = [1.4476482730108395, 0.620420688433217, 0.4342944819032518, 0.27143405118953234, 0.17371779276130073, 0.10857362047581295];
const LOG10_GRAD2: [f64; 6] = [-4.825494243369464, -0.88631526919031, -0.4342944819032518, -0.16964628199345771, -0.0694871171045203, -0.02714340511895324];
const ERFC_VALUE: [f64; 6] = [1.796908212422832, 1.3793820535623103, 1.0, 0.7772974107895215, 0.43667663367489107, 0.2578990352923395];
const ERFC_GRAD: [f64; 6] = [-0.5019685742403627, -0.9982837121446096, -1.1283791670955126, -1.084134787104863, -0.8338366472914576, -0.5949857862574688];
const ERFC_GRAD2: [f64; 6] = [-0.9035434336326529, -0.6987985985012267, 0.0, 0.4336539148419452, 0.9172203120206034, 0.9519772580119501];
const ERF_INV_VALUE: [f64; 6] = [-1.163087153676674, -0.32085832171518147, 0.0, 0.17914345462129166, 0.5341590877497023, 0.9061938024368233];
const ERF_INV_GRAD: [f64; 6] = [3.4280428114518395, 0.9823258773447412, 0.8862269254527579, 0.9151293475072344, 1.1788550766013668, 2.014568381933589];
const ERF_INV_GRAD2: [f64; 6] = [-27.335985073827004, -0.6192335420858146, 0.0, 0.30005157222405143, 1.4846410117257098, 7.355549295923899];
const CBRT_VALUE: [f64; 6] = [-0.9830475724915584, -0.7368062997280774, -0.3684031498640386, 0.5313292845913055, 0.7937005259840998, 0.9085602964160697];
const CBRT_GRAD: [f64; 6] = [0.3449289728040557, 0.6140052497733975, 2.4560209990935915, 1.1807317435362348, 0.5291336839893996, 0.40380457618492005];
const CBRT_GRAD2: [f64; 6] = [0.2420554195116181, 1.0233420829556619, 32.74694665458124, -5.247696637938824, -0.7055115786525327, -0.35893740105326233];
const REM_VALUE: [f64; 5] = [1.5, -1.5, 1.25, -0.25, 0.0];
const REM_GRAD_A: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];
const REM_GRAD_B: [f64; 5] = [-2.0, 4.0, 6.0, 4.0, -10.0];
const REM_INT: [f64; 4] = [1.0, -1.0, 1.0, -1.0];
const NEXTAFTER: [f64; 4] = [1.0000000000000002, 0.9999999999999999, -5e-324, -2.0];
const IS_FINITE: [f64; 5] = [1.0, 0.0, 0.0, 0.0, 1.0];
const CLAMP_VALUE: [f64; 5] = [-1.0, -1.0, 0.5, 1.0, 1.0];
const CLAMP_GRAD_LO: [f64; 5] = [1.0, 0.0, 0.0, 0.0, 0.0];
const CLAMP_GRAD_X: [f64; 5] = [0.0, 0.0, 1.0, 0.0, 0.0];
const CLAMP_GRAD_HI: [f64; 5] = [0.0, 0.0, 0.0, 0.0, 1.0];
const INTEGER_POW_0: [f64; 4] = [1.0, 1.0, 1.0, 1.0];
const INTEGER_POW_0_GRAD: [f64; 4] = [0.0, 0.0, 0.0, 0.0];
const INTEGER_POW_0_HESS: [f64; 16] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const INTEGER_POW_1: [f64; 4] = [-1.5, 0.0, 0.5, 2.0];
const INTEGER_POW_1_GRAD: [f64; 4] = [1.0, 1.0, 1.0, 1.0];
const INTEGER_POW_1_HESS: [f64; 16] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const INTEGER_POW_2: [f64; 4] = [2.25, 0.0, 0.25, 4.0];
const INTEGER_POW_2_GRAD: [f64; 4] = [-3.0, 0.0, 1.0, 4.0];
const INTEGER_POW_2_HESS: [f64; 16] = [2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 2.0];
const INTEGER_POW_3: [f64; 4] = [-3.375, 0.0, 0.125, 8.0];
const INTEGER_POW_3_GRAD: [f64; 4] = [6.75, 0.0, 0.75, 12.0];
const INTEGER_POW_3_HESS: [f64; 16] = [-9.0, -0.0, -0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 12.0];
const INTEGER_POW_M2: [f64; 4] = [0.4444444444444444, 0.1111111111111111, 0.08163265306122448, 0.04];
const INTEGER_POW_M2_GRAD: [f64; 4] = [-0.5925925925925926, -0.07407407407407407, -0.04664723032069971, -0.016];
const INTEGER_POW_M2_HESS: [f64; 16] = [1.1851851851851851, 0.0, 0.0, 0.0, 0.0, 0.07407407407407407, 0.0, 0.0, 0.0, 0.0, 0.03998334027488547, 0.0, 0.0, 0.0, 0.0, 0.009600000000000001];
const ANY_ROWS: [f64; 3] = [1.0, 0.0, 1.0];
const ALL_ROWS: [f64; 3] = [0.0, 0.0, 1.0];
const ANY_COLS: [f64; 3] = [1.0, 1.0, 1.0];
const CUMSUM_0_F: [f64; 12] = [0.3, -1.2, 0.8, 2.0, 1.8, -0.7999999999999999, 0.20000000000000007, 2.9, 1.6, 0.30000000000000016, 0.9, 1.5];
const CUMSUM_0_F_GRAD: [f64; 12] = [0.0, 0.75, 1.5, 2.25, 1.0, 1.5, 2.0, 2.5, 1.0, 1.25, 1.5, 1.75];
const CUMSUM_0_R: [f64; 12] = [1.6, 0.30000000000000016, 0.9, 1.5, 1.3, 1.5, 0.09999999999999998, -0.4999999999999999, -0.2, 1.1, 0.7, -1.4];
const CUMSUM_0_R_GRAD: [f64; 12] = [-1.0, -0.75, -0.5, -0.25, -1.0, -0.5, 0.0, 0.5, 0.0, 0.75, 1.5, 2.25];
const CUMSUM_1_F: [f64; 12] = [0.3, -0.8999999999999999, -0.09999999999999987, 1.9000000000000001, 1.5, 1.9, 1.2999999999999998, 2.1999999999999997, -0.2, 0.9000000000000001, 1.6, 0.20000000000000018];
const CUMSUM_1_F_GRAD: [f64; 12] = [-2.5, -1.5, -0.75, -0.25, 1.5, 1.5, 1.25, 0.75, 5.5, 4.5, 3.25, 1.75];
const CUMSUM_1_R: [f64; 12] = [1.9000000000000001, 1.6, 2.8, 2.0, 2.1999999999999997, 0.7000000000000001, 0.30000000000000004, 0.9, 0.20000000000000018, 0.40000000000000013, -0.7, -1.4];
const CUMSUM_1_R_GRAD: [f64; 12] = [-1.0, -1.75, -2.25, -2.5, 0.0, 0.25, 0.75, 1.5, 1.0, 2.25, 3.75, 5.5];
const CUMPROD_0_F: [f64; 12] = [0.3, -1.2, 0.8, 2.0, 0.44999999999999996, -0.48, -0.48, 1.8, -0.09, -0.528, -0.33599999999999997, -2.52];
const CUMPROD_0_F_GRAD: [f64; 12] = [-1.3, -0.09999999999999998, -1.4299999999999997, -1.7799999999999998, -0.06, -1.95, 1.24, -3.3999999999999995, 0.44999999999999996, -0.6, -0.72, 3.15];
const CUMPROD_0_R: [f64; 12] = [-0.09, -0.528, -0.33599999999999997, -2.52, -0.30000000000000004, 0.44000000000000006, -0.42, -1.26, -0.2, 1.1, 0.7, -1.4];
const CUMPROD_0_R_GRAD: [f64; 12] = [0.30000000000000004, -0.33000000000000007, 0.21, 0.315, 0.06, 1.265, 0.06999999999999998, -0.35, 0.55, 1.71, 1.44, 1.975];
const CUMPROD_1_F: [f64; 12] = [0.3, -0.36, -0.288, -0.576, 1.5, 0.6000000000000001, -0.36000000000000004, -0.32400000000000007, -0.2, -0.22000000000000003, -0.154, 0.21559999999999999];
const CUMPROD_1_F_GRAD: [f64; 12] = [0.8599999999999997, -0.4649999999999999, 0.36, 0.072, -0.18200000000000002, -0.6825, 0.7050000000000001, -0.27, 1.6435, -0.11699999999999999, 0.20899999999999996, -0.2695];
const CUMPROD_1_R: [f64; 12] = [-0.576, -1.92, 1.6, 2.0, -0.32400000000000007, -0.216, -0.54, 0.9, 0.21559999999999999, -1.0779999999999998, -0.9799999999999999, -1.4];
const CUMPROD_1_R_GRAD: [f64; 12] = [1.92, -1.6800000000000002, 1.5199999999999998, 0.358, 0.0, -0.135, 0.54, 0.39, -1.0779999999999998, -1.029, -3.7169999999999996, 3.6085];
const CUMMAX_0_F: [f64; 12] = [0.3, -1.2, 0.8, 2.0, 1.5, 0.4, 0.8, 2.0, 1.5, 1.1, 0.8, 2.0];
const CUMMAX_0_F_GRAD: [f64; 12] = [-1.0, -0.75, 1.5, 2.25, 1.0, 0.25, 0.0, 0.0, 0.0, 1.25, 0.0, 0.0];
const CUMMAX_0_R: [f64; 12] = [1.5, 1.1, 0.8, 2.0, 1.5, 1.1, 0.7, 0.9, -0.2, 1.1, 0.7, -1.4];
const CUMMAX_0_R_GRAD: [f64; 12] = [0.0, 0.0, -0.5, -0.25, -1.0, 0.0, 0.0, 0.75, 1.0, 0.75, 2.0, 1.75];
const CUMMAX_1_F: [f64; 12] = [0.3, 0.3, 0.8, 2.0, 1.5, 1.5, 1.5, 1.5, -0.2, 1.1, 1.1, 1.1];
const CUMMAX_1_F_GRAD: [f64; 12] = [-1.75, 0.0, -0.5, -0.25, 1.5, 0.0, 0.0, 0.0, 1.0, 4.5, 0.0, 0.0];
const CUMMAX_1_R: [f64; 12] = [2.0, 2.0, 2.0, 2.0, 1.5, 0.9, 0.9, 0.9, 1.1, 1.1, 0.7, -1.4];
const CUMMAX_1_R_GRAD: [f64; 12] = [0.0, 0.0, 0.0, -2.5, 0.0, 0.0, 0.0, 1.5, 0.0, 2.25, 1.5, 1.75];
const CUMMIN_0_F: [f64; 12] = [0.3, -1.2, 0.8, 2.0, 0.3, -1.2, -0.6, 0.9, -0.2, -1.2, -0.6, -1.4];
const CUMMIN_0_F_GRAD: [f64; 12] = [-1.0, 0.75, -0.5, -0.25, 0.0, 0.0, 2.0, 0.75, 1.0, 0.0, 0.0, 1.75];
const CUMMIN_0_R: [f64; 12] = [-0.2, -1.2, -0.6, -1.4, -0.2, 0.4, -0.6, -1.4, -0.2, 1.1, 0.7, -1.4];
const CUMMIN_0_R_GRAD: [f64; 12] = [0.0, -0.75, 0.0, 0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 1.25, 1.5, 2.25];
const CUMMIN_1_F: [f64; 12] = [0.3, -1.2, -1.2, -1.2, 1.5, 0.4, -0.6, -0.6, -0.2, -0.2, -0.2, -1.4];
const CUMMIN_1_F_GRAD: [f64; 12] = [-1.0, -1.5, 0.0, 0.0, 0.0, 0.25, 1.25, 0.0, 3.75, 0.0, 0.0, 1.75];
const CUMMIN_1_R: [f64; 12] = [-1.2, -1.2, 0.8, 2.0, -0.6, -0.6, -0.6, 0.9, -1.4, -1.4, -1.4, -1.4];
const CUMMIN_1_R_GRAD: [f64; 12] = [0.0, -1.75, -0.5, -0.25, 0.0, 0.0, 0.75, 0.75, 0.0, 0.0, 0.0, 5.5];
const CUMLOGSUMEXP_0_F: [f64; 12] = [0.3, -1.2, 0.8, 2.0, 1.7632824673380312, 0.5839007408883389, 1.0204174099184509, 2.2873353251154307, 1.8946587531873083, 1.5680292736842438, 1.5661347740991722, 2.3120656277706337];
const CUMLOGSUMEXP_0_F_GRAD: [f64; 12] = [-0.7970222177932056, -0.6295225760759398, 0.5983012166444666, 1.5935786893016668, 0.6739099696443114, 0.5967285871034662, 0.270837745517898, 0.6136740361905308, 0.12311224814889421, 0.7827939889724734, 0.6308610378376356, 0.042747274507802184];
const CUMLOGSUMEXP_0_R: [f64; 12] = [1.8946587531873083, 1.5680292736842438, 1.5661347740991722, 2.3120656277706337, 1.6677860293862659, 1.5031860488854578, 0.9410084538329921, 0.995545464597963, -0.2, 1.1, 0.7, -1.4];
const CUMLOGSUMEXP_0_R_GRAD: [f64; 12] = [-0.2029777822067944, -0.047089212124524826, -0.2324030907883919, -0.1829833728721898, -0.6739099696443114, -0.15028133753403256, 0.04977261187965773, 0.6207479056121623, 0.8768877518511058, 0.9473705496585574, 1.682630478908734, 1.8122354672600274];
const CUMLOGSUMEXP_1_F: [f64; 12] = [0.3, 0.5014132779827524, 1.3549569196419906, 2.4217582772270005, 1.5, 1.7873353251154307, 1.8752309694180151, 2.195214615964349, -0.2, 1.3410084538329923, 1.7641569137923465, 1.8055385088096008];
const CUMLOGSUMEXP_1_F_GRAD: [f64; 12] = [-1.817239762353362, -0.18235083905357038, -0.33643625749242395, -0.16397314110064357, 0.9053558161579266, 0.3013667716568483, 0.08789809634679224, 0.20537931583843283, 1.7136460701583194, 2.61857914709149, 1.0968349169144531, 0.07093986583573741];
const CUMLOGSUMEXP_1_R: [f64; 12] = [2.4217582772270005, 2.2941285610404085, 2.263282467338031, 2.0, 2.195214615964349, 1.5041306053367283, 1.1014132779827523, 0.9, 1.8055385088096008, 1.6609891556681045, 0.815519523179755, -1.4];
const CUMLOGSUMEXP_1_R_GRAD: [f64; 12] = [-0.11982076506504746, -0.04951703178200255, -0.48162173394024005, -1.8490404692127098, 0.0, 0.08287474010602287, 0.12170067498061038, 1.2954245849133668, 0.13458779946165259, 1.2071479747134233, 2.1455302541883112, 2.012733971636613];
const CUMMAX_TIES_F_JAC: [f64; 49] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 0.25, 0.0, 0.5, 0.0, 0.0, 0.0, 0.25, 0.25, 0.0, 0.25, 0.25, 0.0, 0.0, 0.25, 0.25, 0.0, 0.25, 0.25, 0.0];
const CUMMAX_TIES_R_JAC: [f64; 49] = [0.0, 0.25, 0.25, 0.0, 0.25, 0.25, 0.0, 0.0, 0.25, 0.25, 0.0, 0.25, 0.25, 0.0, 0.0, 0.0, 0.5, 0.0, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
const CUMMIN_TIES_F_JAC: [f64; 49] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
const CUMMIN_TIES_R_JAC: [f64; 49] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
const CUMPROD_ZEROS_JACFWD: [f64; 25] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const CUMPROD_ZEROS_JACREV: [f64; 25] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const CUMPROD_ZEROS_HESS: [f64; 25] = [0.0, 4.0, 0.0, 0.0, 0.0, 4.0, 0.0, 2.0, 9.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const CUMSUM_INT: [f64; 6] = [1.0, 3.0, 6.0, 4.0, 9.0, 15.0];
const SORT_0: [f64; 12] = [0.0, -1.0, 2.0, -1.0, 2.0, 0.5, 3.0, 1.0, 4.0, 1.0, 3.0, 2.0];
const ARGSORT_0: [f64; 12] = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
const SORT_DESC_0: [f64; 12] = [3.0, 1.0, 4.0, 1.0, 3.0, 2.0, 0.0, -1.0, 2.0, -1.0, 2.0, 0.5];
const ARGSORT_DESC_0: [f64; 12] = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0];
const SORT_1: [f64; 12] = [0.5, 1.0, 1.0, 2.0, 3.0, 3.0, -1.0, -1.0, 0.0, 2.0, 2.0, 4.0];
const ARGSORT_1: [f64; 12] = [5.0, 1.0, 3.0, 2.0, 0.0, 4.0, 1.0, 3.0, 0.0, 4.0, 5.0, 2.0];
const SORT_DESC_1: [f64; 12] = [3.0, 3.0, 2.0, 1.0, 1.0, 0.5, 4.0, 2.0, 2.0, 0.0, -1.0, -1.0];
const ARGSORT_DESC_1: [f64; 12] = [0.0, 4.0, 2.0, 1.0, 3.0, 5.0, 2.0, 4.0, 5.0, 0.0, 1.0, 3.0];
const SORT_NAN: [f64; 6] = [-1.0, 0.0, -0.0, 2.0, f64::INFINITY, f64::NAN];
const ARGSORT_NAN: [f64; 6] = [2.0, 3.0, 4.0, 0.0, 5.0, 1.0];
const TOP_K_VALUES: [f64; 6] = [3.0, 3.0, 2.0, 4.0, 2.0, 2.0];
const TOP_K_INDICES: [f64; 6] = [0.0, 4.0, 2.0, 2.0, 4.0, 5.0];
const SORT_GRAD: [f64; 10] = [-0.5, -1.0, 0.0, 1.0, 0.5, 3.5, 2.5, 2.0, 3.0, 1.5];
const TOP_K_GRAD: [f64; 10] = [0.0, 0.0, 0.0, -1.0, -0.5, 1.5, 0.0, 0.0, 2.0, 0.0];
const MEDIAN_GRAD: [f64; 10] = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
const DYNAMIC_SLICE_1_2: [f64; 6] = [5.0, 6.0, 7.0, 9.0, 10.0, 11.0];
const DYNAMIC_SLICE_M3_1: [f64; 6] = [9.0, 10.0, 11.0, 13.0, 14.0, 15.0];
const DYNAMIC_SLICE_4_7: [f64; 6] = [13.0, 14.0, 15.0, 17.0, 18.0, 19.0];
const DYNAMIC_UPDATE_SLICE_1_0: [f64; 20] = [0.0, 1.0, 2.0, 3.0, -1.0, -2.0, -3.0, 7.0, -4.0, -5.0, -6.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0];
const DYNAMIC_UPDATE_SLICE_9_M2: [f64; 20] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, -1.0, -2.0, -3.0, 16.0, -4.0, -5.0, -6.0];
const DUS_GRAD_OPERAND: [f64; 20] = [1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, -0.6536436208636119, 0.28366218546322625, 0.960170286650366, 0.7539022543433046, -0.14550003380861354, -0.9111302618846769, -0.8390715290764524, 0.004425697988050785, 0.8438539587324921, 0.0, 0.0, 0.0, -0.9576594803233847, 0.0, 0.0, 0.0];
const DUS_GRAD_UPDATE: [f64; 6] = [0.5403023058681398, -0.4161468365471424, -0.9899924966004454, -0.6536436208636119, 0.28366218546322625, 0.960170286650366];
const DS_GRAD: [f64; 20] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 18.0, 20.0, 0.0, 0.0, 26.0, 28.0, 0.0, 0.0, 34.0, 36.0, 0.0];
const DS_VMAP: [f64; 16] = [0.0, 1.0, 4.0, 5.0, 10.0, 11.0, 14.0, 15.0, 14.0, 15.0, 18.0, 19.0, 14.0, 15.0, 18.0, 19.0];
const TAKE_ROWS: [f64; 8] = [13.0, 14.0, 1.0, 2.0, 13.0, 14.0, 5.0, 6.0];
const TAKE_ROWS_GRAD: [f64; 20] = [0.0, 2.0, 4.0, 0.0, 0.0, 10.0, 12.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 52.0, 56.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const AT_ADD: [f64; 20] = [0.0, 3.0, 5.0, 3.0, 4.0, 11.0, 13.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 17.0, 20.0, 15.0, 16.0, 17.0, 18.0, 19.0];
const AT_SET: [f64; 20] = [-2.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, -3.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, -1.0, 17.0, 18.0, 19.0];
const AT_ADD_GRAD_OPERAND: [f64; 20] = [-0.0, -0.1411200080598672, 0.9589242746631385, -0.1411200080598672, 0.7568024953079282, 0.9999902065507035, -0.4201670368266409, -0.6569865987187891, -0.9893582466233818, -0.4121184852417566, 0.5440211108893698, 0.9999902065507035, 0.5365729180004349, 0.9613974918795568, -0.9129452507276277, -0.6502878401571168, 0.2879033166650653, 0.9613974918795568, 0.750987246771676, -0.14987720966295234];
const AT_ADD_GRAD_UPDATES: [f64; 8] = [0.9613974918795568, -0.9129452507276277, -0.1411200080598672, 0.9589242746631385, 0.9613974918795568, -0.9129452507276277, 0.9999902065507035, -0.4201670368266409];
const GATHER_CLIP: [f64; 8] = [0.0, 1.0, 18.0, 19.0, 1.0, 2.0, 10.0, 11.0];
const GATHER_FILL: [f64; 8] = [0.0, 1.0, -7.0, -7.0, -7.0, -7.0, -7.0, -7.0];
const PAD_0: [f64; 40] = [-1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 2.0, 3.0, 4.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 5.0, 6.0, 7.0, 8.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 9.0, 10.0, 11.0, 12.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0];
const PAD_1: [f64; 10] = [6.0, -1.0, 7.0, -1.0, 8.0, 10.0, -1.0, 11.0, -1.0, 12.0];
const PAD_2: [f64; 42] = [-1.0, -1.0, 1.0, -1.0, 2.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 5.0, -1.0, 6.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 9.0, -1.0, 10.0, -1.0];
const PAD_GRAD: [f64; 12] = [0.0, 4.0, 6.0, 8.0, 0.0, 12.0, 14.0, 16.0, 0.0, 0.0, 0.0, 0.0];
const PAD_GRAD_VALUE: [f64; 1] = [49.0];
const LINEAR_TRANSPOSE: [f64; 4] = [6.5, 4.5, 6.5, 7.5];
// --- end of recorded values
