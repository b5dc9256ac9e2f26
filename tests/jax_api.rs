//! Programs from JAX's own test suite (`api_test.py`, `batching_test.py`,
//! `custom_api_test.py`, or written in their style), ported to anvil as a
//! JAX user would write them, checked against the values JAX computes on
//! the same inputs. The values are recorded by `tests/jax/api_expected.py`
//! (its docstring says how to rerun it); the block between the markers
//! below is its output, verbatim.
//!
//! One test per feature of the calling convention: closures in each
//! nesting order, a struct of parameters with `has_aux`, per-example
//! gradients of a struct, Jacobians of maps, tree `in_axes`, `out_axes`
//! with `None`, `hessian` over several arguments of different shapes, a
//! pullback called twice, `jvp` with a missing tangent and of trees.

use anvil::prelude::*;
use std::collections::BTreeMap;

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn arange(shape: &[usize], scale: f64, shift: f64) -> Tensor {
    let n: usize = shape.iter().product();
    t(&(0..n).map(|i| i as f64 * scale + shift).collect::<Vec<_>>(), shape)
}

/// `got` equals JAX's `want` to a few ulps of the values' scale.
fn close(what: &str, got: &Tensor, want: &[f64]) {
    let g = got.to_vec::<f64>().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: {} values, JAX has {}", g.len(), want.len());
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= 1e-13 * (1.0 + b.abs()), "{what}[{i}]: anvil {a}, JAX {b}\n{got}");
    }
}

fn x3() -> Tensor {
    t(&[0.3, -0.7, 1.1], &[3])
}
fn x4() -> Tensor {
    t(&[0.3, -0.7, 1.1, 2.0], &[4])
}
fn w3() -> Tensor {
    t(&[0.5, -0.2, 0.9], &[3])
}

// ----------------------------------------------------------------- closures

#[test]
fn vmap_inside_grad_closes_over_the_differentiated_value() {
    let ys = arange(&[4, 3], 0.1, 0.0);
    let f = move |z: &Var| -> anvil::Result<Var> {
        let per_row = vmap(|y: &Var| (y * z).sin().sum_all()).apply(&ys)?;
        Ok(per_row.sum_all())
    };
    let (v, g) = value_and_grad(f).eval(Tensor::scalar(0.7)).unwrap();
    close("value", &v, &VMAP_IN_GRAD_VALUE);
    close("grad", &g, &VMAP_IN_GRAD_GRAD);
}

#[test]
fn the_issues_closure_program_runs() {
    // value_and_grad(|z| vmap(|y| y.sum_all() * z)(ones).sum_all()): 12 z.
    let ones = Tensor::ones(&[4, 3]).unwrap();
    let f = |z: &Var| vmap(|y: &Var| y.sum_all() * z).invoke(&ones).sum_all();
    let (v, g) = value_and_grad(f).eval(Tensor::scalar(2.0)).unwrap();
    assert_eq!((v.item().unwrap(), g.item().unwrap()), (24.0, 12.0));
}

#[test]
fn grad_inside_vmap_closes_over_the_batched_value() {
    let f = |x: &Var| grad(|y: &Var| (x * y).sin() * y).invoke(x);
    close("grad in vmap", &vmap(f).eval(x4()).unwrap(), &GRAD_IN_VMAP);
}

#[test]
fn jacfwd_inside_jacrev() {
    let inner = |x: &Var| jacfwd(|y: &Var| (x * y).tanh()).invoke(w3()).sum(&[0]);
    close("jacfwd in jacrev", &jacrev(inner).eval(x3()).unwrap(), &JACFWD_IN_JACREV);
}

#[test]
fn vmap_inside_vmap_closes_over_the_outer_element() {
    let f = |x: &Var| vmap(|y: &Var| (x * y).sin()).invoke(w3());
    close("vmap in vmap", &vmap(f).eval(x4()).unwrap(), &VMAP_IN_VMAP);
}

#[test]
fn grad_of_grad_through_a_closure() {
    let f = |x: &Var| grad(|y: &Var| x * &y.powf(3.0)).invoke(x);
    close("grad of grad", &grad(f).eval(Tensor::scalar(1.3)).unwrap(), &GRAD_OF_GRAD);
}

#[test]
fn a_captured_tensor_is_a_constant_of_the_trace() {
    let c = t(&[2.0, -1.0, 0.5], &[3]);
    let f = move |x: &Var| (x * &c).sin().sum_all();
    close("captured", &grad(f).eval(x3()).unwrap(), &CAPTURED_ARRAY);
}

/// custom_api_test.test_closed_over_vmap_tracer: a custom_jvp function
/// defined inside a vmapped function closes over its batched argument.
fn closed_custom_jvp(x: &Var) -> impl Function<Args = (Var,), Output = Var> + '_ {
    custom_jvp(
        move |y: &Var| (x * y).sin(),
        move |(y,): &(Var,), (t,): &(Var,)| ((x * y).sin(), x * &(x * y).cos() * t),
    )
}

#[test]
fn custom_jvp_closing_over_a_vmapped_value() {
    let f = |x: &Var, y: &Var| closed_custom_jvp(x).invoke(y);
    let got = vmap(f).in_axes([Some(0), None]).eval((&x4(), &Tensor::scalar(0.5))).unwrap();
    close("vmap", &got, &CUSTOM_JVP_CLOSED_OVER_VMAP);
    let g = grad(f).argnum::<1>().eval((&Tensor::scalar(1.7), &Tensor::scalar(0.5))).unwrap();
    close("grad", &g, &CUSTOM_JVP_CLOSED_GRAD);
    // Differentiating with respect to the closed-over value is an error,
    // as in JAX: the rule does not say how.
    let e = grad(f).eval((&Tensor::scalar(1.7), &Tensor::scalar(0.5))).unwrap_err().to_string();
    assert!(e.contains("closed-over value"), "{e}");
}

// ------------------------------------------------------------------ pytrees

#[derive(Clone, Debug, Tree)]
struct Params<T> {
    w: T,
    b: T,
}

fn mlp_loss(p: &Params<Var>, x: &Var, y: &Var) -> (Var, Var) {
    let pred = (p.w.matmul(x) + &p.b).tanh();
    ((&pred - y).square().mean(), pred)
}

fn params() -> Params<Tensor> {
    Params { w: arange(&[2, 3], 0.2, -0.5), b: t(&[0.1, -0.3], &[2]) }
}

#[test]
fn value_and_grad_of_a_struct_with_aux() {
    let (x, y) = (t(&[1.0, -2.0, 0.5], &[3]), t(&[0.2, -0.4], &[2]));
    let ((loss, pred), g) = value_and_grad(mlp_loss).has_aux().eval((&params(), &x, &y)).unwrap();
    close("loss", &loss, &AUX_LOSS);
    close("aux", &pred, &AUX_PRED);
    // The gradient comes back as the struct.
    close("grad w", &g.w, &AUX_GRAD_W);
    close("grad b", &g.b, &AUX_GRAD_B);
    // grad with has_aux: (gradient, aux).
    let (g2, pred2) = grad(mlp_loss).has_aux().eval((&params(), &x, &y)).unwrap();
    close("grad w", &g2.w, &AUX_GRAD_W);
    close("aux", &pred2, &AUX_PRED);
    // has_aux on a function that does not return a pair does not compile;
    // one returning a pair whose first part is not a scalar is an error.
    let not_scalar = |p: &Params<Var>| (p.w.clone(), p.b.clone());
    let e = grad(not_scalar).has_aux().eval(params()).unwrap_err().to_string();
    assert!(e.contains("scalar"), "{e}");
}

#[test]
fn per_example_gradients_of_a_struct() {
    let (xs, ys) = (arange(&[5, 3], 0.3, -1.0), arange(&[5, 2], -0.2, 0.5));
    let loss = |p: &Params<Var>, x: &Var, y: &Var| mlp_loss(p, x, y).0;
    let per_example = vmap(grad(loss)).in_axes([None, Some(0), Some(0)]);
    let g = per_example.eval((&params(), &xs, &ys)).unwrap();
    assert_eq!((g.w.shape(), g.b.shape()), (&[5, 2, 3][..], &[5, 2][..]));
    close("per-example w", &g.w, &PER_EXAMPLE_W);
    close("per-example b", &g.b, &PER_EXAMPLE_B);
}

#[test]
fn jacrev_of_a_map_to_a_map() {
    let f = |d: &BTreeMap<&'static str, Var>| {
        let (a, b) = (&d["a"], &d["b"]);
        BTreeMap::from([("s", a.sin() * b.index_axis(0, 0)), ("t", a.square().sum_all() * b)])
    };
    let d = BTreeMap::from([("a", x3()), ("b", t(&[1.5, -0.5], &[2]))]);
    let j = jacrev(f).eval(&d).unwrap();
    close("s/a", &j["s"]["a"], &DICT_JAC_S_A);
    close("s/b", &j["s"]["b"], &DICT_JAC_S_B);
    close("t/a", &j["t"]["a"], &DICT_JAC_T_A);
    close("t/b", &j["t"]["b"], &DICT_JAC_T_B);
    let jf = jacfwd(f).eval(&d).unwrap();
    for (k, inner) in &j {
        for (a, block) in inner {
            block.assert_allclose(&jf[k][a], 1e-14, 1e-15);
        }
    }
}

#[test]
fn in_axes_as_a_tree_prefix() {
    let d = BTreeMap::from([("a", arange(&[4, 3], 0.1, 0.0)), ("b", w3())]);
    let axes = InAxes::tree(&(BTreeMap::from([("a", Some(0)), ("b", None)]),));
    let f = |d: &BTreeMap<&'static str, Var>| (&d["a"] * &d["b"]).sum_all();
    close("dict in_axes", &vmap(f).in_axes(axes).eval(&d).unwrap(), &DICT_IN_AXES);
}

#[test]
fn out_axes_none_returns_an_unbatched_result_once() {
    let f = |x: &Var, w: &Var| (x * w, w.square().sum_all());
    let v = vmap(f).in_axes([Some(0), None]).out_axes((Some(0), None));
    let (batched, once) = v.eval((&arange(&[4, 3], 0.1, 0.0), &w3())).unwrap();
    close("batched", &batched, &OUT_AXES_BATCHED);
    assert_eq!(once.shape(), &[] as &[usize]);
    close("unbatched", &once, &OUT_AXES_NONE);
    // None for a result that depends on the batch is an error.
    let bad = vmap(f).in_axes([Some(0), None]).out_axes((None, None));
    let e = bad.eval((&arange(&[4, 3], 0.1, 0.0), &w3())).unwrap_err().to_string();
    assert!(e.contains("out_axes") && e.contains("depends on the batch"), "{e}");
}

// ------------------------------------------------------------------ hessian

#[test]
fn hessian_with_respect_to_the_second_argument_is_not_a_mixed_partial() {
    // The issue's program: d2f/du2 = diag(6u); a mixed partial would be I.
    let f = |x: &Var, u: &Var| (u * u * u).sum_all() + (x * u).sum_all();
    let (x, u) = (t(&[0.4, -1.2], &[2]), t(&[0.7, 1.5], &[2]));
    close("d2f/du2", &hessian(f).argnum::<1>().eval((&x, &u)).unwrap(), &HESSIAN_U);
    let h = hessian(f).argnums(&[1]).eval((&x, &u)).unwrap();
    close(
        "argnums(&[1])",
        &h.part::<Dyn<Tensor>>(0).unwrap().part::<Tensor>(0).unwrap(),
        &HESSIAN_U,
    );
}

#[test]
fn hessian_blocks_over_arguments_of_different_shapes() {
    let f = |x: &Var, u: &Var| {
        let outer = x.unsqueeze(1) * u.unsqueeze(0);
        u.powf(3.0).sum_all() + outer.square().sum_all() + x.sin().sum_all()
    };
    let (x, u) = (t(&[0.4, -1.2], &[2]), t(&[0.7, 1.5, -0.3], &[3]));
    let h = hessian(f).argnums(&[0, 1]).eval((&x, &u)).unwrap();
    let block = |i: usize, j: usize| h.part::<Dyn<Tensor>>(i).unwrap().part::<Tensor>(j).unwrap();
    assert_eq!(block(0, 1).shape(), &[2, 3]);
    assert_eq!(block(1, 0).shape(), &[3, 2]);
    close("H[0][0]", &block(0, 0), &HESSIAN_XX);
    close("H[0][1]", &block(0, 1), &HESSIAN_XU);
    close("H[1][0]", &block(1, 0), &HESSIAN_UX);
    close("H[1][1]", &block(1, 1), &HESSIAN_UU);
    // Each block equals the composition of the primitives it stands for.
    let d_dx = |x: &Var, u: &Var| grad(f).argnum::<0>().invoke((x, u));
    let mixed = jacfwd(d_dx).argnum::<1>().eval((&x, &u)).unwrap();
    mixed.assert_allclose(&block(0, 1), 1e-14, 1e-15);
    let second = jacrev(|x: &Var, u: &Var| grad(f).argnum::<1>().invoke((x, u)))
        .argnum::<1>()
        .eval((&x, &u))
        .unwrap();
    second.assert_allclose(&block(1, 1), 1e-14, 1e-15);
}

#[test]
fn argnums_of_every_derived_transform_match_the_primitives() {
    // value_and_grad, jacfwd and jacrev with one and several argnums, on
    // arguments of different shapes, against jvp/vjp of the primitives.
    let f = |x: &Var, u: &Var| (x.unsqueeze(1) * u.sin().unsqueeze(0)).tanh().sum_all();
    let (x, u) = (t(&[0.4, -1.2], &[2]), t(&[0.7, 1.5, -0.3], &[3]));
    let (_, pullback) = vjp(&f, (&x, &u)).unwrap();
    let (gx, gu) = pullback.eval(Tensor::scalar(1.0)).unwrap();
    let (_, g1) = value_and_grad(f).argnum::<1>().eval((&x, &u)).unwrap();
    g1.assert_allclose(&gu, 1e-15, 1e-15);
    let both = grad(f).argnums(&[1, 0]).eval((&x, &u)).unwrap();
    both[0].assert_allclose(&gu, 1e-15, 1e-15);
    both[1].assert_allclose(&gx, 1e-15, 1e-15);
    let jf = jacfwd(f).argnum::<1>().eval((&x, &u)).unwrap();
    let jr = jacrev(f).argnum::<1>().eval((&x, &u)).unwrap();
    jf.assert_allclose(&gu, 1e-14, 1e-15);
    jr.assert_allclose(&gu, 1e-15, 1e-15);
    // jvp along u alone equals <grad_u, v>.
    let v = t(&[1.0, -2.0, 0.5], &[3]);
    let (_, tv) = jvp(f).eval(((&x, &u), (None::<&Tensor>, Some(&v)))).unwrap();
    let want: f64 = gu
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(v.to_vec::<f64>().unwrap())
        .map(|(a, b)| a * b)
        .sum();
    assert!((tv.item().unwrap() - want).abs() < 1e-14);
}

// -------------------------------------------------------------- vjp and jvp

#[test]
fn a_pullback_is_a_function_called_as_often_as_needed() {
    let f = |x: &Var, w: &Var| (x.sin() * w, (x * w).sum_all());
    let (out, pullback) = vjp(&f, (&x3(), &w3())).unwrap();
    close("outputs", &out.0, &PULLBACK_OUT);
    let (cx, cw) = pullback.eval((&t(&[1.0, 0.0, 2.0], &[3]), &Tensor::scalar(0.5))).unwrap();
    close("first x", &cx, &PULLBACK_1_X);
    close("first w", &cw, &PULLBACK_1_W);
    let (cx, cw) = pullback.eval((&t(&[0.0, -1.0, 0.0], &[3]), &Tensor::scalar(2.0))).unwrap();
    close("second x", &cx, &PULLBACK_2_X);
    close("second w", &cw, &PULLBACK_2_W);
    // It holds the residuals of one forward pass, no more than a few vectors.
    assert!(pullback.residual_bytes() <= 8 * 3 * 8, "{}", pullback.residual_bytes());
    // And it batches: vmap over a stack of output cotangents.
    let cts = (arange(&[2, 3], 1.0, 0.0), t(&[0.5, 2.0], &[2]));
    let (bx, _) = vmap(&pullback).eval(&cts).unwrap();
    assert_eq!(bx.shape(), &[2, 3]);
}

#[test]
fn jvp_with_no_tangent_for_an_argument() {
    let f = |x: &Var, w: &Var| (x * w).sin();
    let v = t(&[1.0, 2.0, -1.0], &[3]);
    let (p, tan) = jvp(f).eval(((&x3(), &w3()), (Some(&v), None::<&Tensor>))).unwrap();
    close("primal", &p, &JVP_PARTIAL_PRIMAL);
    close("tangent", &tan, &JVP_PARTIAL_TANGENT);
    // The same as a zero tangent.
    let (_, zero) = jvp(f).eval(((&x3(), &w3()), (&v, &Tensor::zeros(&[3]).unwrap()))).unwrap();
    zero.assert_allclose(&tan, 0.0, 0.0);
    // A tangent of another shape names the argument.
    let e =
        jvp(f).eval(((&x3(), &w3()), (&Tensor::zeros(&[2]).unwrap(), &v))).unwrap_err().to_string();
    assert!(e.contains("tangent") && e.contains("f64[2]"), "{e}");
}

#[test]
fn jvp_of_a_tuple_function_of_a_tuple() {
    let f = |ab: &(Var, Var)| (&ab.0 * &ab.1, ab.0.sin());
    let ((_, _), (ta, tb)) = jvp(f).eval((&(x3(), w3()), &(w3(), x3()))).unwrap();
    close("ta", &ta, &JVP_TREE_TA);
    close("tb", &tb, &JVP_TREE_TB);
}

// --- recorded by tests/jax/api_expected.py with JAX 0.10.2
const VMAP_IN_GRAD_VALUE: [f64; 1] = [4.376269540806363];
const VMAP_IN_GRAD_GRAD: [f64; 1] = [5.570375240795764];
const GRAD_IN_VMAP: [f64; 4] =
    [0.1795142951690905, 0.9029689888901176, 1.3627694770287755, -3.3713769787623757];
const JACFWD_IN_JACREV: [f64; 9] =
    [0.934157826016292, 0.0, 0.0, 0.0, 0.9424608802511196, 0.0, 0.0, 0.0, -0.2130209581434646];
const VMAP_IN_VMAP: [f64; 12] = [
    0.14943813247359922,
    -0.059964006479444595,
    0.26673143668883115,
    -0.34289780745545134,
    0.13954311464423647,
    -0.5891447579422695,
    0.5226872289306592,
    -0.21822962308086935,
    0.8360259786005205,
    0.8414709848078965,
    -0.3894183423086505,
    0.9738476308781951,
];
const GRAD_OF_GRAD: [f64; 1] = [15.21];
const CAPTURED_ARRAY: [f64; 3] = [1.6506712298193567, -0.7648421872844885, 0.42626226102975284];
const CUSTOM_JVP_CLOSED_OVER_VMAP: [f64; 4] =
    [0.14943813247359922, -0.34289780745545134, 0.5226872289306592, 0.8414709848078965];
const CUSTOM_JVP_CLOSED_GRAD: [f64; 1] = [1.1219713480044697];
const AUX_LOSS: [f64; 1] = [0.0063585263227094145];
const AUX_PRED: [f64; 2] = [0.14888503362331798, -0.5005202111902353];
const AUX_GRAD_W: [f64; 6] = [
    -0.04998191353029172,
    0.09996382706058345,
    -0.02499095676514586,
    -0.07533783945122284,
    0.15067567890244568,
    -0.03766891972561142,
];
const AUX_GRAD_B: [f64; 2] = [-0.04998191353029172, -0.07533783945122284];
const PER_EXAMPLE_W: [f64; 30] = [
    -0.09981908331986904,
    -0.06987335832390833,
    -0.03992763332794762,
    0.5348733848728306,
    0.3744113694109814,
    0.21394935394913228,
    0.005992538792092155,
    -0.011985077584184297,
    -0.029962693960460748,
    -0.010000000000000018,
    0.020000000000000014,
    0.050000000000000044,
    -0.16138666398082235,
    -0.22190666297363082,
    -0.2824266619664392,
    0.516162529374051,
    0.7097234778893204,
    0.9032844264045895,
    -0.058036606948274554,
    -0.06827836111561714,
    -0.0785201152829597,
    0.44998716673966027,
    0.5293966667525416,
    0.6088061667654228,
    0.010016969939802011,
    0.01117277416362532,
    0.01232857838744863,
    0.1813300444035967,
    0.20225274183478095,
    0.2231754392659652,
];
const PER_EXAMPLE_B: [f64; 10] = [
    0.09981908331986904,
    -0.5348733848728306,
    -0.059925387920921495,
    0.10000000000000009,
    -0.201733329976028,
    0.645203161717564,
    -0.03413918055780857,
    0.2646983333762708,
    0.003852680746077697,
    0.06974232477061412,
];
const DICT_JAC_S_A: [f64; 9] =
    [1.433004733688409, 0.0, 0.0, 0.0, 1.1472632809267327, 0.0, 0.0, 0.0, 0.680394182138366];
const DICT_JAC_S_B: [f64; 6] =
    [0.29552020666133955, 0.0, -0.644217687237691, 0.0, 0.8912073600614354, 0.0];
const DICT_JAC_T_A: [f64; 6] =
    [0.8999999999999999, -2.0999999999999996, 3.3000000000000003, -0.3, 0.7, -1.1];
const DICT_JAC_T_B: [f64; 4] = [1.79, 0.0, 0.0, 1.79];
const DICT_IN_AXES: [f64; 4] = [0.16000000000000003, 0.52, 0.8800000000000001, 1.2400000000000002];
const OUT_AXES_BATCHED: [f64; 12] = [
    0.0,
    -0.020000000000000004,
    0.18000000000000002,
    0.15000000000000002,
    -0.08000000000000002,
    0.45,
    0.30000000000000004,
    -0.14,
    0.7200000000000001,
    0.45,
    -0.2,
    0.9900000000000001,
];
const OUT_AXES_NONE: [f64; 1] = [1.1];
const HESSIAN_U: [f64; 4] = [4.199999999999999, 0.0, 0.0, 9.0];
const HESSIAN_XX: [f64; 4] = [5.2705816576913485, 0.0, 0.0, 6.592039085967226];
const HESSIAN_XU: [f64; 6] =
    [1.1199999999999999, 2.4000000000000004, -0.48, -3.36, -7.199999999999999, 1.44];
const HESSIAN_UX: [f64; 6] =
    [1.1199999999999999, -3.36, 2.4000000000000004, -7.199999999999999, -0.48, 1.44];
const HESSIAN_UU: [f64; 9] =
    [7.3999999999999995, 0.0, 0.0, 0.0, 12.2, 0.0, 0.0, 0.0, 1.4000000000000004];
const PULLBACK_OUT: [f64; 3] = [0.14776010333066977, 0.1288435374475382, 0.8020866240552919];
const PULLBACK_1_X: [f64; 3] = [0.727668244562803, -0.1, 1.266473018566039];
const PULLBACK_1_W: [f64; 3] = [0.4455202066613395, -0.35, 2.3324147201228707];
const PULLBACK_2_X: [f64; 3] = [1.0, -0.24703156254310232, 1.8];
const PULLBACK_2_W: [f64; 3] = [0.6, -0.7557823127623089, 2.2];
const JVP_PARTIAL_PRIMAL: [f64; 3] = [0.14943813247359922, 0.13954311464423647, 0.8360259786005205];
const JVP_PARTIAL_TANGENT: [f64; 3] =
    [0.4943855389680211, -0.3960863984850549, -0.49382087452342877];
const JVP_TREE_TA: [f64; 3] = [0.33999999999999997, 0.5299999999999999, 2.02];
const JVP_TREE_TB: [f64; 3] = [0.477668244562803, -0.1529684374568977, 0.4082365092830196];
// --- end of the recorded block

// ---------------------------------------------------- generic helpers

/// A helper over any transformed function is one bound, no marker type.
fn twice<F: Function<Args = (Var,), Output = Var>>(f: &F, x: &Tensor) -> anvil::Result<Tensor> {
    let once = f.eval(x)?;
    f.eval(&once)
}

#[test]
fn a_generic_helper_takes_any_transformed_function() {
    let x = t(&[0.5, 1.0], &[2]);
    let g = grad(|x: &Var| x.square().sum_all());
    assert_eq!(twice(&g, &x).unwrap().to_vec::<f64>().unwrap(), vec![2.0, 4.0]);
    let v = vmap(|x: &Var| x * 3.0);
    assert_eq!(twice(&v, &x).unwrap().to_vec::<f64>().unwrap(), vec![4.5, 9.0]);
    // A closure becomes a function with `jit` (or any transform).
    let j = jit(|x: &Var| x.exp());
    twice(&j, &x).unwrap();
}

#[test]
fn closures_take_up_to_eight_arguments_of_any_structure() {
    let f = |a: &Var,
             b: &(Var, Var),
             c: &Vec<Var>,
             d: &Var,
             e: &Var,
             g: &Var,
             h: &Var,
             i: &[Var; 2]| { a + &b.0 + &b.1 + &c[0] + d + e + g + h + &i[0] + &i[1] };
    let one = Tensor::scalar(1.0);
    let args = (
        &one,
        &(one.clone(), one.clone()),
        &vec![one.clone()],
        &one,
        &one,
        &one,
        &one,
        &[one.clone(), one.clone()],
    );
    assert_eq!(jit(f).eval(args).unwrap().item().unwrap(), 10.0);
    let g = grad(f).argnum::<2>().eval(args).unwrap();
    assert_eq!(g.len(), 1);
    // Wrong numbers of arguments are errors naming the counts.
    let e = jit(f).eval((&one, &one)).unwrap_err().to_string();
    assert!(e.contains('8') && e.contains('2'), "{e}");
}

#[test]
fn a_value_captured_two_levels_down_and_differentiated_through() {
    // f(s) = sum_ij sin(x_i * w_j * s): the innermost function uses s from
    // two traces up; grad in s crosses both vmaps.
    let f = |s: &Var| {
        vmap(|a: &Var| vmap(|b: &Var| (a * b * s).sin()).invoke(w3())).invoke(x4()).sum_all()
    };
    let s = 0.8;
    let (v, g) = value_and_grad(f).eval(Tensor::scalar(s)).unwrap();
    let (xs, ws) = (x4().to_vec::<f64>().unwrap(), w3().to_vec::<f64>().unwrap());
    let pairs = || xs.iter().flat_map(|a| ws.iter().map(move |b| a * b));
    let want_v: f64 = pairs().map(|p| (p * s).sin()).sum();
    let want_g: f64 = pairs().map(|p| p * (p * s).cos()).sum();
    assert!((v.item().unwrap() - want_v).abs() < 1e-14);
    assert!((g.item().unwrap() - want_g).abs() < 1e-14);
}

#[test]
fn jacobians_with_aux_and_map_over_a_closure() {
    let f = |x: &Var| (x.sin(), x.sum_all());
    let (j, aux) = jacfwd(f).has_aux().eval(x3()).unwrap();
    let (jr, aux_r) = jacrev(f).has_aux().eval(x3()).unwrap();
    j.assert_allclose(&jr, 1e-15, 0.0);
    assert_eq!(aux.item().unwrap(), aux_r.item().unwrap());
    assert!((aux.item().unwrap() - 0.7).abs() < 1e-15);
    // map's body closes over a value of the enclosing function.
    let g = |w: &Var| {
        anvil::map(|x: &Var| (x * w).sum_all()).invoke(arange(&[4, 3], 0.1, 0.0)).sum_all()
    };
    let gw = grad(g).eval(w3()).unwrap();
    let want = arange(&[4, 3], 0.1, 0.0).to_vec::<f64>().unwrap();
    let col = |j: usize| (0..4).map(|i| want[i * 3 + j]).sum::<f64>();
    close("map closure", &gw, &[col(0), col(1), col(2)]);
}

/// A mask counts as JAX counts it: `jnp.sum(x > 0)` is an integer count,
/// `mean`/`var` are floats, `argmax` finds the first `True`, `sort`,
/// `cummax` stay `bool`; under `vmap` too.
#[test]
fn reductions_and_sorts_of_masks_count_as_jax_does() {
    let x = t(&[1.0, -2.0, 3.0, 0.5, -1.0, 2.0], &[2, 3]);
    let mask = |x: &Var| x.gt(&x.zeros_like());
    let run = |f: &dyn Fn(&Var) -> Var| (|x: &Var| f(&mask(x))).eval(&x).unwrap();
    let check = |what: &str, got: Tensor, dtype: DType, want: &[f64]| {
        assert_eq!(got.dtype(), dtype, "{what}");
        let got = got.to_f64_vec();
        let near = got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 1e-15);
        assert!(got.len() == want.len() && near, "{what}: {got:?} vs {want:?}");
    };
    check("sum", run(&|m| m.sum_all()), DType::I64, &[4.0]);
    check("sum axis 1", run(&|m| m.sum(&[1])), DType::I64, &[2.0, 2.0]);
    check("prod axis 0", run(&|m| m.prod(&[0], false)), DType::I64, &[1.0, 0.0, 1.0]);
    check("mean", run(&|m| m.mean()), DType::F64, &[4.0 / 6.0]);
    check("var", run(&|m| m.var_all()), DType::F64, &[2.0 / 9.0]);
    check("argmax", run(&|m| m.argmax(1, false)), DType::I64, &[0.0, 0.0]);
    check("argmin", run(&|m| m.argmin(1, false)), DType::I64, &[1.0, 1.0]);
    check("cumsum", run(&|m| m.cumsum(1, false)), DType::I64, &[1.0, 1.0, 2.0, 1.0, 1.0, 2.0]);
    check("sort", run(&|m| m.sort(1, false)), DType::Bool, &[0.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
    check("argsort", run(&|m| m.argsort(1, true)), DType::I64, &[0.0, 2.0, 1.0, 0.0, 2.0, 1.0]);
    check("cummax", run(&|m| m.cummax(1, true)), DType::Bool, &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
    let per_row = vmap(|r: &Var| r.gt(&r.zeros_like()).sum_all()).eval(&x).unwrap();
    check("vmap sum", per_row, DType::I64, &[2.0, 2.0]);
}

/// `clip` differentiates as `jnp.clip` (1/2 at a bound, in the operand and
/// in the bound), `lax::clamp` as `lax.clamp` (0 at a bound): the values
/// JAX gives at -1, 0, 0.5, 1, 2 with bounds [0, 1].
#[test]
fn clip_and_clamp_differentiate_as_in_jax() {
    use anvil::lax;
    let at = |f: &dyn Fn(&Var) -> Var| -> Vec<f64> {
        [-1.0, 0.0, 0.5, 1.0, 2.0]
            .iter()
            .map(|&v| grad(|x: &Var| f(x)).eval(Tensor::scalar(v)).unwrap().item().unwrap())
            .collect()
    };
    let clip = at(&|x| x.clip(&x.zeros_like(), &x.ones_like()));
    assert_eq!(clip, [0.0, 0.5, 1.0, 0.5, 0.0]);
    let clamp = at(&|x| lax::clamp(&x.zeros_like(), x, &x.ones_like()));
    assert_eq!(clamp, [0.0, 0.0, 1.0, 0.0, 0.0]);
    // d/dlo clip(v, lo, 1) at lo = 0.
    let by_lo: Vec<f64> = [-1.0, 0.0, 0.5, 1.0, 2.0]
        .iter()
        .map(|&v| {
            let f = move |lo: &Var| lo.full_like(v).clip(lo, &lo.ones_like());
            grad(f).eval(Tensor::scalar(0.0)).unwrap().item().unwrap()
        })
        .collect();
    assert_eq!(by_lo, [1.0, 0.5, 0.0, 0.0, 0.0]);
}

/// Integer division by zero as in XLA (`lax.div`, `lax.rem` on this
/// machine's JAX): the quotient is -1, the remainder the dividend;
/// `i64::MIN / -1` wraps.
#[test]
fn integer_division_by_zero_as_in_xla() {
    use anvil::lax::LaxExt;
    let a = Tensor::from_vec(vec![5i64, -5, 0, i64::MIN], &[4]).unwrap();
    let b = Tensor::from_vec(vec![0i64, 0, 0, -1], &[4]).unwrap();
    let q = (|a: &Var, b: &Var| anvil::lax::div(a, b)).eval((&a, &b)).unwrap();
    assert_eq!(q.to_vec::<i64>().unwrap(), [-1, -1, -1, i64::MIN]);
    // `/` divides integers as f64 (jnp's true division): ±inf and NaN.
    let q = (|a: &Var, b: &Var| a / b).eval((&a, &b)).unwrap();
    let q = q.to_vec::<f64>().unwrap();
    assert_eq!(q[..2], [f64::INFINITY, f64::NEG_INFINITY]);
    assert!(q[2].is_nan());
    assert_eq!(q[3], 9223372036854775808.0);
    let r = (|a: &Var, b: &Var| a.rem(b)).eval((&a, &b)).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [5, -5, 0, 0]);
}

/// `jnp.matmul` of integers, as XLA computes it (wrapping): vectors,
/// matrices, broadcast batches, under `vmap`, and the transposed products
/// the rewrites make of `a.T @ b`; bool operands stay an error.
#[test]
fn integer_matmul_as_in_xla() {
    let ints = |v: &[i64], shape: &[usize]| Tensor::from_vec(v.to_vec(), shape).unwrap();
    let a = ints(&[1, 2, 3, 4, 5, 6], &[2, 3]);
    let b = ints(&[7, 8, 9, 10, 11, 12], &[3, 2]);
    let mm = |a: &Var, b: &Var| a.matmul(b);
    let c = jit(mm).eval((&a, &b)).unwrap();
    assert_eq!(c.dtype(), DType::I64);
    assert_eq!(c.shape(), [2, 2]);
    assert_eq!(c.to_vec::<i64>().unwrap(), [58, 64, 139, 154]);
    // Vector @ matrix, matrix @ vector, vector @ vector.
    let v = ints(&[1, -1, 2], &[3]);
    assert_eq!(jit(mm).eval((&v, &b)).unwrap().to_vec::<i64>().unwrap(), [20, 22]);
    assert_eq!(jit(mm).eval((&a, &v)).unwrap().to_vec::<i64>().unwrap(), [5, 11]);
    assert_eq!(jit(mm).eval((&v, &v)).unwrap().to_vec::<i64>().unwrap(), [6]);
    // A batch against a shared matrix, and broadcast batches.
    let s = ints(&(0..12).collect::<Vec<_>>(), &[2, 2, 3]);
    let sb = jit(mm).eval((&s, &b)).unwrap();
    assert_eq!(sb.shape(), [2, 2, 2]);
    assert_eq!(sb.to_vec::<i64>().unwrap(), [31, 34, 112, 124, 193, 214, 274, 304]);
    let r = ints(&(0..12).collect::<Vec<_>>(), &[2, 3, 2]);
    let sr = jit(mm).eval((&ints(&[1, 0, 2, 0, 1, 0], &[1, 2, 3]), &r)).unwrap();
    assert_eq!(sr.to_vec::<i64>().unwrap(), [8, 11, 2, 3, 26, 29, 8, 9]);
    // Transposed operands (`a.T @ a`, `a @ b.T`) and vmap over rows.
    let ata = jit(|a: &Var| a.transpose().matmul(a)).eval((&a,)).unwrap();
    assert_eq!(ata.to_vec::<i64>().unwrap(), [17, 22, 27, 22, 29, 36, 27, 36, 45]);
    let abt = jit(|a: &Var| a.matmul(&a.transpose())).eval((&a,)).unwrap();
    assert_eq!(abt.to_vec::<i64>().unwrap(), [14, 32, 32, 77]);
    let rows =
        vmap(|r: &Var, b: &Var| r.matmul(b)).in_axes((Some(0), None)).eval((&a, &b)).unwrap();
    assert_eq!(rows.to_vec::<i64>().unwrap(), [58, 64, 139, 154]);
    // In a loop body: x <- M x three times (M = [[1, 1], [1, 0]]: Fibonacci).
    let fib = |m: &Var, x: &Var| fori_loop(0, 3, |_: &Var, x: &Var| m.matmul(x), x);
    let f = jit(fib).eval((&ints(&[1, 1, 1, 0], &[2, 2]), &ints(&[1, 0], &[2]))).unwrap();
    assert_eq!(f.to_vec::<i64>().unwrap(), [3, 2]);
    // Wrapping on overflow, as XLA's integer dot.
    let big = ints(&[i64::MAX, 2], &[2]);
    let w = jit(mm).eval((&big, &ints(&[2, 1], &[2]))).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(w, [i64::MAX.wrapping_mul(2).wrapping_add(2)]);
    let bools = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    let e = jit(mm).eval((&bools, &bools)).unwrap_err().to_string();
    assert!(e.contains("matmul") && e.contains("bool"), "{e}");
}

/// Integers given to float functions compute in `f64`, as JAX promotes
/// them; rounding an integer gives it back; the mean of large integers is
/// summed in `f64` (it wrapped in `i64`); an integer `linspace` floors.
/// Values from JAX (x64).
#[test]
fn integers_in_float_functions_as_in_jax() {
    use anvil::lax::LaxExt;
    let i = Tensor::from_vec(vec![1i64, 2, -3], &[3]).unwrap();
    let fs = |x: &Var| {
        vec![
            x.sinh(),
            x.cosh(),
            x.atan(),
            x.exp2(),
            x.cbrt(),
            x.erfc(),
            x.recip(),
            x.powf(0.5),
            x.atan2(x),
            x.is_finite(),
            x.floor(),
            x.round(),
        ]
    };
    let out = jit(fs).eval(&i).unwrap();
    let f64s: Vec<Vec<f64>> = out[..9].iter().map(|t| t.to_vec::<f64>().unwrap()).collect();
    let want = [
        [1.1752011936438014, 3.626860407847019, -10.017874927409903],
        [1.5430806348152437, 3.7621956910836314, 10.067661995777765],
        [std::f64::consts::FRAC_PI_4, 1.1071487177940904, -1.2490457723982544],
        [2.0, 4.0, 0.125],
        [1.0, 1.2599210498948732, -1.4422495703074083],
        [0.15729920705028513, 0.004677734981047266, 1.999977909503001],
        [1.0, 0.5, -1.0 / 3.0],
    ];
    for (got, want) in f64s.iter().zip(&want) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-15 * w.abs().max(1.0), "{got:?} vs {want:?}");
        }
    }
    assert_eq!(f64s[7][..2], [1.0, 2f64.sqrt()]);
    assert!(f64s[7][2].is_nan());
    assert_eq!(out[9].to_vec::<bool>().unwrap(), [true, true, true]);
    assert_eq!(out[10].to_vec::<i64>().unwrap(), [1, 2, -3]);
    assert_eq!(out[11].dtype(), DType::I64);
    let big = Tensor::from_vec(vec![1i64 << 62, 1 << 62, 1 << 62, -7], &[4]).unwrap();
    let m = jit(|x: &Var| x.mean_all()).eval(&big).unwrap().item().unwrap();
    assert_eq!(m, 3.458764513820541e18);
    // Integer matrices in det, slogdet, inv and solve: f64.
    let m = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
    let v = Tensor::from_vec(vec![5i64, 6], &[2]).unwrap();
    let la = |m: &Var, v: &Var| {
        use anvil::linalg;
        vec![linalg::det(m), linalg::slogdet(m).1, linalg::inv(m), linalg::solve(m, v)]
    };
    let r = jit(la).eval((&m, &v)).unwrap();
    assert!(r.iter().all(|t| t.dtype() == DType::F64));
    assert!((r[0].item().unwrap() + 2.0).abs() < 1e-14);
    assert!((r[1].item().unwrap() - 2f64.ln()).abs() < 1e-14);
    r[2].assert_allclose(
        &Tensor::from_vec(vec![-2.0, 1.0, 1.5, -0.5], &[2, 2]).unwrap(),
        1e-14,
        1e-14,
    );
    r[3].assert_allclose(&Tensor::from_vec(vec![-4.0, 4.5], &[2]).unwrap(), 1e-14, 1e-14);
    let l = Tensor::linspace_of(-5.0, 5.0, 4, DType::I64).unwrap();
    assert_eq!(l.to_vec::<i64>().unwrap(), [-5, -2, 1, 5]);
}

/// JAX's rules at ties and zeros, values from JAX: `sort(descending)` is
/// the ascending sort reversed (ties' derivatives, NaN and `-0.0` order),
/// and `abs` has derivative 1 at `±0` (-1 at NaN).
#[test]
fn descending_sorts_and_abs_at_zero_as_in_jax() {
    use anvil::lax::LaxExt;
    let w = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let ones = Tensor::from_vec(vec![1.0; 3], &[3]).unwrap();
    let g = grad(|a: &Var, w: &Var| (a.sort(0, true) * w).sum_all()).eval((&ones, &w)).unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), [3.0, 2.0, 1.0]);
    let x = Tensor::from_vec(vec![1.0, 1.0, 0.0], &[3]).unwrap();
    let (_, t) = jvp(|a: &Var| a.sort(0, true)).eval((&x, &w)).unwrap();
    assert_eq!(t.to_vec::<f64>().unwrap(), [2.0, 1.0, 3.0]);
    let v = Tensor::from_vec(vec![1.0, f64::NAN, -0.0, 0.0, 2.0], &[5]).unwrap();
    let s = jit(|a: &Var| a.sort(0, true)).eval(&v).unwrap().to_vec::<f64>().unwrap();
    assert!(s[0].is_nan() && s[1..3] == [2.0, 1.0]);
    assert!(s[3] == 0.0 && s[3].is_sign_positive() && s[4].is_sign_negative(), "{s:?}");
    let z = Tensor::from_vec(vec![0.0, -0.0, f64::NAN, -2.0], &[4]).unwrap();
    let g = grad(|a: &Var| a.abs().sum_all()).eval(&z).unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), [1.0, 1.0, -1.0, -1.0]);
}

/// A tensor given where a struct of parameters is expected: the error
/// says which argument (its key path) and both structures.
#[test]
fn a_structure_mismatch_names_the_argument() {
    let (x, y) = (t(&[1.0, -2.0, 0.5], &[3]), t(&[0.2, -0.4], &[2]));
    let f = |p: &Params<Var>, x: &Var, y: &Var| mlp_loss(p, x, y).0;
    let e = jit(f).eval((&x, &x, &y)).unwrap_err().to_string();
    assert!(e.contains("[0]") && e.contains("struct Params") && e.contains("leaf"), "{e}");
}

/// `jnp.logical_and/or/xor/not` (numbers true where non-zero, broadcasting)
/// and `jax.nn.relu`'s derivative at 0 (0, where `maximum(x, 0)` gives 1/2;
/// NaN stays NaN).
#[test]
fn logical_ops_and_relu_as_in_jax() {
    let a = Tensor::from_vec(vec![true, true, false, false], &[4]).unwrap();
    let b = Tensor::from_vec(vec![1.0, 0.0, 2.5, 0.0], &[4]).unwrap();
    let ops = |a: &Var, b: &Var| {
        vec![
            a.logical_and(b),
            a.logical_or(b),
            a.logical_xor(b),
            b.logical_not(),
            a.logical_and(&b.i(ix![0])),
        ]
    };
    let got = jit(ops).eval((&a, &b)).unwrap();
    let want: [[bool; 4]; 5] = [
        [true, false, false, false],
        [true, true, true, false],
        [false, true, true, false],
        [false, true, false, true],
        [true, true, false, false],
    ];
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.to_vec::<bool>().unwrap(), w, "{g}");
    }
    let x = Tensor::from_vec(vec![-1.0, 0.0, 2.0, f64::NAN, f64::NEG_INFINITY], &[5]).unwrap();
    let r = jit(|x: &Var| x.relu()).eval(&x).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(&r[..3], &[0.0, 0.0, 2.0]);
    assert!(r[3].is_nan() && r[4] == 0.0, "{r:?}");
    let g = vmap(grad(|x: &Var| x.relu())).eval(&x).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(&g[..3], &[0.0, 0.0, 1.0]);
}

/// Float functions of integers and `bool`s compute in `f64`, as JAX's:
/// `jnp.sqrt(jnp.array([4, 9]))` is `[2., 3.]`.
#[test]
fn float_functions_of_integers_are_f64() {
    let i = Tensor::from_vec(vec![4i64, 9, 0], &[3]).unwrap();
    let r = jit(|x: &Var| x.sqrt()).eval(&i).unwrap();
    assert_eq!((r.dtype(), r.to_vec::<f64>().unwrap()), (DType::F64, vec![2.0, 3.0, 0.0]));
    let s = jit(|x: &Var| x.softmax(0)).eval(&i).unwrap();
    let e: Vec<f64> = [4.0f64, 9.0, 0.0].iter().map(|v| (v - 9.0).exp()).collect();
    let total: f64 = e.iter().sum();
    for (g, w) in s.to_vec::<f64>().unwrap().iter().zip(&e) {
        assert!((g - w / total).abs() < 1e-15);
    }
    let b = jit(|x: &Var| x.gt(&x.zeros_like()).exp()).eval(&i).unwrap().to_vec::<f64>().unwrap();
    let want = [1f64.exp(), 1f64.exp(), 1.0];
    assert!(b.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-15), "{b:?}");
    // Integer functions stay integer.
    assert_eq!(jit(|x: &Var| x.abs()).eval(&i).unwrap().dtype(), DType::I64);
}
