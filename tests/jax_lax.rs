//! Programs from JAX's own test suite (`lax_test.py`,
//! `lax_autodiff_test.py`, `lax_numpy_test.py`, `api_test.py`, or written
//! in their style), one or more per op group of `anvil::lax` — elementwise
//! math, cumulative reductions, sorting, dynamic indexing / gather /
//! scatter / pad — and the API transformations `linear_transpose` and
//! `eval_shape`, checked against the values JAX computes on the same
//! inputs. The values are recorded by `tests/jax/lax_expected.py` (its
//! docstring says how to rerun it) into `tests/jax/lax_expected.rs`, which
//! this file includes.
#![allow(clippy::approx_constant)] // JAX's printed values, not hand-typed constants

use anvil::lax::{
    dynamic_slice, dynamic_update_slice, gather, pad, scatter, scatter_add, GatherDimensionNumbers,
    GatherMode, ScatterDimensionNumbers,
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
    let (ia, ib) = (
        Tensor::from_vec(vec![7i64, -7, 7, -7], &[4]).unwrap(),
        Tensor::from_vec(vec![3i64, 3, -3, -3], &[4]).unwrap(),
    );
    close("integer rem", &(|a: &Var, b: &Var| a.rem(b)).eval((&ia, &ib)).unwrap(), &REM_INT);
    let (x, y) = (t(&[1.0, 1.0, 0.0, -2.0], &[4]), t(&[2.0, 0.0, -1.0, -2.0], &[4]));
    close("nextafter", &(|x: &Var, y: &Var| x.nextafter(y)).eval((&x, &y)).unwrap(), &NEXTAFTER);
    let e = t(&[1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0], &[5]);
    close("is_finite", &(|x: &Var| x.is_finite()).eval(&e).unwrap(), &IS_FINITE);
}

#[test]
fn clamp_passes_no_tangent_at_its_bounds() {
    let (lo, x, hi) =
        (t(&[-1.0; 5], &[5]), t(&[-2.0, -1.0, 0.5, 1.0, 2.0], &[5]), t(&[1.0; 5], &[5]));
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
        (
            "cumsum",
            |x, a, r| x.cumsum(a, r),
            [
                &CUMSUM_0_F,
                &CUMSUM_0_F_GRAD,
                &CUMSUM_0_R,
                &CUMSUM_0_R_GRAD,
                &CUMSUM_1_F,
                &CUMSUM_1_F_GRAD,
                &CUMSUM_1_R,
                &CUMSUM_1_R_GRAD,
            ],
        ),
        (
            "cumprod",
            |x, a, r| x.cumprod(a, r),
            [
                &CUMPROD_0_F,
                &CUMPROD_0_F_GRAD,
                &CUMPROD_0_R,
                &CUMPROD_0_R_GRAD,
                &CUMPROD_1_F,
                &CUMPROD_1_F_GRAD,
                &CUMPROD_1_R,
                &CUMPROD_1_R_GRAD,
            ],
        ),
        (
            "cummax",
            |x, a, r| x.cummax(a, r),
            [
                &CUMMAX_0_F,
                &CUMMAX_0_F_GRAD,
                &CUMMAX_0_R,
                &CUMMAX_0_R_GRAD,
                &CUMMAX_1_F,
                &CUMMAX_1_F_GRAD,
                &CUMMAX_1_R,
                &CUMMAX_1_R_GRAD,
            ],
        ),
        (
            "cummin",
            |x, a, r| x.cummin(a, r),
            [
                &CUMMIN_0_F,
                &CUMMIN_0_F_GRAD,
                &CUMMIN_0_R,
                &CUMMIN_0_R_GRAD,
                &CUMMIN_1_F,
                &CUMMIN_1_F_GRAD,
                &CUMMIN_1_R,
                &CUMMIN_1_R_GRAD,
            ],
        ),
        (
            "cumlogsumexp",
            |x, a, r| x.cumlogsumexp(a, r),
            [
                &CUMLOGSUMEXP_0_F,
                &CUMLOGSUMEXP_0_F_GRAD,
                &CUMLOGSUMEXP_0_R,
                &CUMLOGSUMEXP_0_R_GRAD,
                &CUMLOGSUMEXP_1_F,
                &CUMLOGSUMEXP_1_F_GRAD,
                &CUMLOGSUMEXP_1_R,
                &CUMLOGSUMEXP_1_R_GRAD,
            ],
        ),
    ];
    for (name, f, want) in ops {
        for (k, (axis, rev)) in
            [(0, false), (0, true), (1, false), (1, true)].into_iter().enumerate()
        {
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
        close(
            "argsort descending",
            &(move |x: &Var| x.argsort(a, true)).eval(&s).unwrap(),
            desc_idx,
        );
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
    close(
        "grad sort",
        &grad(move |x: &Var| (x.sort(1, false) * &wa).sum_all()).eval(&s).unwrap(),
        &SORT_GRAD,
    );
    close(
        "grad top_k",
        &grad(move |x: &Var| (x.top_k(2).0 * &wb).sum_all()).eval(&s).unwrap(),
        &TOP_K_GRAD,
    );
    let median = |x: &Var| x.sort(1, false).index_axis(1, 2).sum_all();
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
    for ((a, b), want) in [
        ((1, 2), &DYNAMIC_SLICE_1_2[..]),
        ((-3, 1), &DYNAMIC_SLICE_M3_1),
        ((4, 7), &DYNAMIC_SLICE_4_7),
    ] {
        close(&format!("dynamic_slice at ({a}, {b})"), &f.eval((&d, &i(a), &i(b))).unwrap(), want);
    }
    let u = arange(&[2, 3], -1.0, -1.0);
    let g = |x: &Var, u: &Var, a: &Var, b: &Var| dynamic_update_slice(x, u, &[a, b]);
    for ((a, b), want) in
        [((1, 0), &DYNAMIC_UPDATE_SLICE_1_0[..]), ((9, -2), &DYNAMIC_UPDATE_SLICE_9_M2)]
    {
        close(
            &format!("dynamic_update_slice at ({a}, {b})"),
            &g.eval((&d, &u, &i(a), &i(b))).unwrap(),
            want,
        );
    }
    let loss =
        |x: &Var, u: &Var, a: &Var, b: &Var| dynamic_update_slice(x, u, &[a, b]).sin().sum_all();
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
    let (si, su) =
        (Tensor::from_vec(vec![4i64, 0, 2], &[3]).unwrap(), t(&[-1.0, -2.0, -3.0], &[3]));
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
    type Config = [(i64, i64, usize); 2];
    let configs: [(Config, &[f64]); 3] = [
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

#[test]
fn gather_and_scatter_with_batching_dims() {
    // Row b of the operand indexed by the indices of batch b.
    let d = arange(&[5, 4], 1.0, 0.0);
    let bi = Tensor::from_vec(vec![3i64, 0, 1, 1, 4, 7, 2, 0, 0, 3], &[5, 2, 1]).unwrap();
    let g = |d: &Var, i: &Var| {
        let dn = GatherDimensionNumbers {
            collapsed_slice_dims: vec![1],
            start_index_map: vec![1],
            operand_batching_dims: vec![0],
            start_indices_batching_dims: vec![0],
            ..Default::default()
        };
        gather(d, i, &dn, &[1, 1], GatherMode::Clip, None)
    };
    close("gather with batching dims", &g.eval((&d, &bi)).unwrap(), &GATHER_BATCHING);
    let s = |d: &Var, i: &Var, u: &Var| {
        let dn = ScatterDimensionNumbers {
            inserted_window_dims: vec![1],
            scatter_dims_to_operand_dims: vec![1],
            operand_batching_dims: vec![0],
            scatter_indices_batching_dims: vec![0],
            ..Default::default()
        };
        scatter_add(d, i, u, &dn, GatherMode::FillOrDrop)
    };
    let u = arange(&[5, 2], 1.0, 10.0);
    close("scatter_add with batching dims", &s.eval((&d, &bi, &u)).unwrap(), &SCATTER_ADD_BATCHING);
}

// --------------------------------------------------- API transformations

#[test]
fn linear_transpose_of_a_linear_program() {
    let x = t(&[1.0, -2.0, 0.5, 3.0], &[4]);
    let f = |x: &Var| (x.flip(&[0]) * 2.0).cumsum(0, false) + x.sum_all();
    let ft = anvil::linear_transpose(&f, &x).unwrap();
    let (ct,) = ft.eval(t(&[0.5, 1.0, -1.0, 2.0], &[4])).unwrap();
    close("linear_transpose", &ct, &LINEAR_TRANSPOSE);
}

#[test]
fn eval_shape_traces_without_running() {
    let x = anvil::TensorType::new(DType::F64, vec![5, 4]);
    let f = |x: &Var| (x.sort(0, false), x.top_k(2), x.cumsum(1, true).any(&[0], false));
    let (s, (v, i), a): (
        anvil::TensorType,
        (anvil::TensorType, anvil::TensorType),
        anvil::TensorType,
    ) = anvil::eval_shape(&f, &x).unwrap().into_tree().unwrap();
    assert_eq!(s, x);
    assert_eq!((v.shape(), i.shape(), i.dtype()), (&[5usize, 2][..], &[5usize, 2][..], DType::I64));
    assert_eq!((a.shape(), a.dtype()), (&[4usize][..], DType::Bool));
}

// JAX's values, as `tests/jax/lax_expected.py` prints them (kept verbatim
// in their own file, outside rustfmt's reach).
include!("jax/lax_expected.rs");
