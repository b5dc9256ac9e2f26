//! The matrix functions of `anvil::linalg` (`matrix_power`, `expm`,
//! `multi_dot`, `matrix_rank`, `cond`) against the values JAX computes on
//! the same inputs: values, gradients, a `vmap` of a gradient, a jvp and a
//! Hessian of `expm`. The values are recorded by
//! `tests/jax/matfun_expected.py` (its docstring says how to rerun it); the
//! block between the markers below is its output, verbatim.
//!
//! Tolerances are relative to the largest entry of each result (an entry
//! much smaller than the others carries the rounding of the larger ones
//! through the cancellations of the products): 1e-12 in `f64` (the largest
//! difference seen is 1.1e-14, after four squarings; most are below
//! 1e-15), 1e-6 in `f32` (1.9e-7 seen: a few ulps, products associated
//! differently from XLA's).

use anvil::linalg;
use anvil::prelude::*;

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn arange(shape: &[usize], scale: f64, shift: f64) -> Tensor {
    let n: usize = shape.iter().product();
    t(&(0..n).map(|i| i as f64 * scale + shift).collect::<Vec<_>>(), shape)
}

/// `got` equals JAX's `want` within `rtol` of `want`'s largest magnitude
/// (infinities and NaNs where JAX has them).
fn close_to(what: &str, got: &Tensor, want: &[f64], rtol: f64) {
    let g = got.to_vec::<f64>().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: {} values, JAX has {}", g.len(), want.len());
    let scale = want.iter().filter(|w| w.is_finite()).fold(0f64, |m, w| m.max(w.abs()));
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        let ok = if b.is_finite() {
            (a - b).abs() <= rtol * scale
        } else {
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
        };
        assert!(ok, "{what}[{i}]: anvil {a}, JAX {b}\n{got}");
    }
}

fn close(what: &str, got: &Tensor, want: &[f64]) {
    close_to(what, got, want, 1e-12);
}

fn ints(what: &str, got: &Tensor, want: &[i64]) {
    assert_eq!(got.dtype(), DType::I64, "{what}");
    assert_eq!(got.to_vec::<i64>().unwrap(), want, "{what}");
}

fn a3() -> Tensor {
    t(&[0.3, -0.7, 1.1, 0.5, 0.2, -0.4, -0.6, 0.9, 0.1], &[3, 3])
}
fn b4() -> Tensor {
    t(
        &[1.5, -2.0, 3.25, 0.5, 4.0, 0.75, -1.0, 2.5, -3.5, 6.0, 2.0, -1.25, 2.0, -1.5, 4.5, 3.0],
        &[4, 4],
    )
}
fn c4() -> Tensor {
    b4().mul(15.0).unwrap()
}
fn nil() -> Tensor {
    t(&[0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0], &[3, 3])
}
fn w3() -> Tensor {
    arange(&[3, 3], 0.3, -1.1)
}
fn w4() -> Tensor {
    arange(&[4, 4], 0.15, -0.9)
}
fn wc() -> Tensor {
    t(&[2.5, 0.3, -0.4, 0.1, 3.0, 0.6, -0.5, 0.2, 2.8], &[3, 3])
}
fn scaled(a: &Tensor, s: f64) -> Tensor {
    a.mul(s).unwrap()
}

fn expm(a: &Tensor) -> Tensor {
    jit(|a: &Var| linalg::expm(a)).eval(a).unwrap()
}

/// `sum(expm(A) ∘ W)`, whose gradient JAX records.
fn weighted(w: Tensor) -> impl Fn(&Var) -> Var {
    move |a: &Var| (linalg::expm(a) * &w).sum_all()
}

// -------------------------------------------------------------------- expm

#[test]
fn expm_takes_each_pade_order() {
    close("order 3", &expm(&scaled(&a3(), 0.005)), &EXPM_PADE3);
    close("order 5", &expm(&scaled(&a3(), 0.1)), &EXPM_PADE5);
    close("order 7", &expm(&scaled(&a3(), 0.4)), &EXPM_PADE7);
    close("order 9", &expm(&a3()), &EXPM_A3);
    // The nilpotent matrix: order 13 unscaled, e^N = I + N + N²/2 exactly.
    close("nilpotent", &expm(&nil()), &EXPM_NIL);
}

#[test]
fn expm_scales_and_squares() {
    // One squaring (‖B‖₁ = 11); four (‖15 B‖₁ = 165, entries about 10³³).
    close("one squaring", &expm(&b4()), &EXPM_B4);
    close("four squarings", &expm(&c4()), &EXPM_C4);
}

#[test]
fn expm_of_a_matrix_needing_more_than_16_squarings_is_nan() {
    let big = scaled(&a3(), 1e6);
    close("NaN", &expm(&big), &EXPM_NAN);
    close("zero gradient", &grad(weighted(w3())).eval(&big).unwrap(), &EXPM_NAN_GRAD);
}

#[test]
fn expm_of_a_batch_is_each_matrix_s() {
    let stack = Tensor::stack(&[a3(), scaled(&a3(), 0.1)], 0).unwrap();
    close("batch", &expm(&stack), &EXPM_BATCH);
    // Two batch axes; vmap over single matrices; an empty batch.
    let deep = jit(|a: &Var| linalg::expm(&a.reshape(&[1, 2, 3, 3]))).eval(&stack).unwrap();
    assert_eq!(deep.shape(), [1, 2, 3, 3]);
    close("two batch axes", &deep, &EXPM_BATCH);
    close("vmap", &vmap(|a: &Var| linalg::expm(a)).eval(&stack).unwrap(), &EXPM_BATCH);
    assert_eq!(expm(&Tensor::zeros(&[0, 3, 3]).unwrap()).shape(), [0, 3, 3]);
}

#[test]
fn expm_gradients() {
    close("grad A3", &grad(weighted(w3())).eval(a3()).unwrap(), &EXPM_GRAD_A3);
    close("grad B4", &grad(weighted(w4())).eval(b4()).unwrap(), &EXPM_GRAD_B4);
    close("grad 15 B4", &grad(weighted(w4())).eval(c4()).unwrap(), &EXPM_GRAD_C4);
    close("grad nilpotent", &grad(weighted(w3())).eval(nil()).unwrap(), &EXPM_GRAD_NIL);
    let (_, dt) = jvp(|a: &Var| linalg::expm(a)).eval((&b4(), &w4())).unwrap();
    close("jvp B4", &dt, &EXPM_JVP_B4);
}

#[test]
fn vmap_of_the_gradient_of_expm() {
    // The three take Padé orders 9, 3 and 13: a batched choice.
    let batch = Tensor::stack(&[a3(), scaled(&a3(), 0.005), scaled(&a3(), 3.0)], 0).unwrap();
    let g = vmap(grad(weighted(w3()))).eval(&batch).unwrap();
    close("vmap of grad", &g, &EXPM_VMAP_GRAD);
}

#[test]
fn hessian_of_expm() {
    let h = hessian(weighted(w3())).eval(a3()).unwrap();
    assert_eq!(h.shape(), [3, 3, 3, 3]);
    close("hessian", &h, &EXPM_HESSIAN_A3);
}

#[test]
fn expm_in_f32() {
    // f32: orders 3 (‖A‖₁ = 0.36), 7 (1.8) and 7 with two squarings (7.2).
    let a = a3().cast(DType::F32);
    let f = |s: f64| jit(move |a: &Var| linalg::expm(&(a * s))).eval(&a).unwrap();
    let got = Tensor::stack(&[f(0.2), f(1.0), f(4.0)], 0).unwrap().cast(DType::F64);
    assert_eq!(f(1.0).dtype(), DType::F32);
    close_to("f32", &got, &EXPM_F32, 1e-6);
}

// ------------------------------------------------------------ matrix_power

#[test]
fn matrix_power_of_an_integer_matrix_stays_integer() {
    let m = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
    let p = |n: i64| jit(move |m: &Var| linalg::matrix_power(m, n)).eval(&m).unwrap();
    ints("^0", &p(0), &POWER_INT_0);
    ints("^1", &p(1), &POWER_INT_1);
    ints("^2", &p(2), &POWER_INT_2);
    ints("^3", &p(3), &POWER_INT_3);
    ints("^5", &p(5), &POWER_INT_5);
    ints("^10", &p(10), &POWER_INT_10);
}

#[test]
fn matrix_power_negative_and_large() {
    let a = wc();
    let p = |n: i64| jit(move |a: &Var| linalg::matrix_power(a, n)).eval(&a).unwrap();
    close("^-3", &p(-3), &POWER_WC_M3);
    close("^-2", &p(-2), &POWER_WC_M2);
    close("^-1", &p(-1), &POWER_WC_M1);
    close("^4", &p(4), &POWER_WC_4);
    close("^7", &p(7), &POWER_WC_7);
    let a2 = a3().add(&Tensor::eye(3).unwrap().mul(2.0).unwrap()).unwrap();
    let stack = Tensor::stack(&[wc(), a2], 0).unwrap();
    let b = jit(|a: &Var| linalg::matrix_power(a, -2)).eval(&stack).unwrap();
    close("batch ^-2", &b, &POWER_BATCH_M2);
    // n = 0 of a batch: identities of the batch's shape.
    let e = jit(|a: &Var| linalg::matrix_power(a, 0)).eval(&stack).unwrap();
    assert_eq!(e.shape(), [2, 3, 3]);
}

#[test]
fn matrix_power_gradients() {
    let w = w3();
    let f = |n: i64| {
        let w = w.clone();
        move |a: &Var| (linalg::matrix_power(a, n) * &w).sum_all()
    };
    close("grad ^7", &grad(f(7)).eval(wc()).unwrap(), &POWER_GRAD_7);
    close("grad ^-2", &grad(f(-2)).eval(wc()).unwrap(), &POWER_GRAD_M2);
}

// --------------------------------------------------------------- multi_dot

fn chain() -> (Tensor, Tensor, Tensor, Tensor, Tensor) {
    (
        t(&[0.5, -1.0, 2.0, 0.25], &[4]),
        arange(&[4, 2], 0.2, -0.5),
        arange(&[2, 5], 0.1, -0.3),
        arange(&[5, 3], 0.07, 0.2),
        t(&[1.0, -2.0, 0.5], &[3]),
    )
}

#[test]
fn multi_dot_values_and_gradient() {
    let (v4, m42, m25, m53, v3) = chain();
    let vv = jit(|a: &Var, b: &Var, c: &Var, d: &Var, e: &Var| linalg::multi_dot(&[a, b, c, d, e]))
        .eval((&v4, &m42, &m25, &m53, &v3))
        .unwrap();
    assert_eq!(vv.shape(), [0usize; 0]);
    close("vector, matrices, vector", &vv, &MULTI_DOT_VV);
    let mm = jit(|a: &Var, b: &Var, c: &Var| linalg::multi_dot(&[a, b, c]))
        .eval((&m42, &m25, &m53))
        .unwrap();
    assert_eq!(mm.shape(), [4, 3]);
    close("matrices", &mm, &MULTI_DOT_MM);
    let vm = jit(|a: &Var, b: &Var, c: &Var| linalg::multi_dot(&[a, b, c]))
        .eval((&v4, &m42, &m25))
        .unwrap();
    assert_eq!(vm.shape(), [5]);
    close("vector, matrices", &vm, &MULTI_DOT_VM);
    let g = grad(|b: &Var| {
        let (v4, m42, _, m53, v3) = chain();
        let (v4, m42, m53, v3) =
            (b.capture_like(v4), b.capture_like(m42), b.capture_like(m53), b.capture_like(v3));
        linalg::multi_dot(&[&v4, &m42, b, &m53, &v3])
    })
    .eval(&m25)
    .unwrap();
    close("grad", &g, &MULTI_DOT_GRAD);
}

#[test]
fn multi_dot_takes_the_cheapest_order() {
    // [100, 1] · [1, 100] · [100, 100]: A(BC) costs 2·10⁴ multiply-adds,
    // (AB)C 2·10⁶; [100, 100] · [100, 1] · [1, 100] the other way round.
    let (col, row, square) = (&[100, 1][..], &[1, 100][..], &[100, 100][..]);
    let order = |shapes: [&[usize]; 3]| {
        let args: Vec<Tensor> = shapes.iter().map(|s| Tensor::ones(s).unwrap()).collect();
        let g = trace(&|v: &[Var]| linalg::multi_dot(&[&v[0], &v[1], &v[2]]), args).unwrap();
        g.to_string()
    };
    let text = order([col, row, square]);
    assert!(text.contains("matmul %1, %2") && text.contains("matmul %0, %3"), "{text}");
    let text = order([square, col, row]);
    assert!(text.contains("matmul %0, %1") && text.contains("matmul %3, %2"), "{text}");
}

#[test]
fn multi_dot_errors_name_the_arguments() {
    let m = Tensor::ones(&[2, 3]).unwrap();
    let e = jit(|a: &Var| linalg::multi_dot(&[a])).eval(&m).unwrap_err().to_string();
    assert!(e.contains("multi_dot") && e.contains("at least two"), "{e}");
    let e = jit(|a: &Var, b: &Var| linalg::multi_dot(&[a, b])).eval((&m, &m)).unwrap_err();
    let e = e.to_string();
    assert!(e.contains("multi_dot") && e.contains("argument 0 has 3 columns"), "{e}");
    let v = Tensor::ones(&[3]).unwrap();
    let e = jit(|a: &Var, b: &Var, c: &Var| linalg::multi_dot(&[a, b, c]))
        .eval((&m, &v, &m))
        .unwrap_err()
        .to_string();
    assert!(e.contains("argument 1 must be matrices"), "{e}");
}

// ---------------------------------------------------- matrix_rank and cond

fn r43() -> Tensor {
    t(&[1.0, 2.0, 3.0, 2.0, 4.1, 6.0, 0.0, 1.0, 0.0, 1.0, 3.0, 3.0], &[4, 3])
}
fn r33() -> Tensor {
    let (u, v) = ([1.0, -2.0, 0.5], [0.3, 1.0, -4.0]);
    t(&u.iter().flat_map(|a| v.iter().map(move |b| a * b)).collect::<Vec<_>>(), &[3, 3])
}

#[test]
fn matrix_rank_of_deficient_matrices() {
    let rank = |a: &Tensor| jit(|a: &Var| linalg::matrix_rank(a, None)).eval(a).unwrap();
    ints("4 x 3 of rank 2", &rank(&r43()), &RANK_R43);
    ints("outer product", &rank(&r33()), &RANK_R33);
    ints("zeros", &rank(&Tensor::zeros(&[2, 3]).unwrap()), &RANK_Z23);
    let batch = Tensor::stack(&[a3(), r33(), wc(), Tensor::zeros(&[3, 3]).unwrap()], 0).unwrap();
    ints("batch", &rank(&batch), &RANK_BATCH);
    let d = t(&[1.0, 0.0, 0.0, 0.0, 1e-3, 0.0, 0.0, 0.0, 1e-6], &[3, 3]);
    let tol = jit(|a: &Var| linalg::matrix_rank(a, Some(1e-4))).eval(&d).unwrap();
    ints("tol", &tol, &RANK_TOL);
}

#[test]
fn cond_values_and_gradient() {
    let c = |a: &Tensor| jit(|a: &Var| linalg::cond(a)).eval(a).unwrap();
    close("well conditioned", &c(&wc()), &COND_WC);
    close("4 x 2", &c(&arange(&[4, 2], 0.2, -0.5)), &COND_M42);
    close("batch", &c(&Tensor::stack(&[a3(), wc()], 0).unwrap()), &COND_BATCH);
    close("exactly singular", &c(&t(&[1.0, 0.0, 0.0, 0.0], &[2, 2])), &COND_SINGULAR);
    // Numerically singular: the smallest singular value is rounding, LAPACK's
    // and anvil's differ; both are past 1/ε.
    let r = c(&r43()).item().unwrap();
    assert!(r > 1e14 && COND_R43[0] > 1e14, "anvil {r}, JAX {}", COND_R43[0]);
    close("grad", &grad(|a: &Var| linalg::cond(a)).eval(wc()).unwrap(), &COND_GRAD);
}

// ------------------------------------------------------------------ errors

#[test]
fn errors_name_the_function_and_the_shape() {
    let m = Tensor::ones(&[2, 3]).unwrap();
    let e = jit(|a: &Var| linalg::expm(a)).eval(&m).unwrap_err().to_string();
    assert!(e.contains("expm") && e.contains("square") && e.contains("[2, 3]"), "{e}");
    let e = jit(|a: &Var| linalg::matrix_power(a, 2)).eval(&m).unwrap_err().to_string();
    assert!(e.contains("matrix_power") && e.contains("square"), "{e}");
    let v = Tensor::ones(&[3]).unwrap();
    let e = jit(|a: &Var| linalg::cond(a)).eval(&v).unwrap_err().to_string();
    assert!(e.contains("cond") && e.contains("rank at least 2"), "{e}");
}

// --- recorded by tests/jax/matfun_expected.py with JAX 0.10.2
const EXPM_PADE3: [f64; 9] = [
    1.0014884919508333,
    -0.0034919704302818905,
    0.005508975054352623,
    0.002506115690410042,
    1.0009916231525926,
    -0.0019946073013233866,
    -0.0029973538767868097,
    0.00450860584834283,
    1.000487371996575,
];
const EXPM_PADE5: [f64; 9] = [
    1.025340861084412,
    -0.06656567143968603,
    0.11339615412603771,
    0.05237284354127416,
    1.0166394414804543,
    -0.03770997436252434,
    -0.05878139792415793,
    0.09329282921330197,
    1.0049318208088664,
];
const EXPM_PADE7: [f64; 9] = [
    1.0437182836319694,
    -0.21437831675739388,
    0.4837951718159219,
    0.2337603313032969,
    1.0265924460133862,
    -0.11702906980187115,
    -0.2125763905054021,
    0.40442309088823725,
    0.9592382322487547,
];
const EXPM_A3: [f64; 9] = [
    0.8340717528597524,
    -0.18075782757547973,
    1.2291916641195013,
    0.6478463759728629,
    0.8950960149032735,
    -0.06808202144003538,
    -0.34036495370766967,
    1.0609684217232398,
    0.6329875557672684,
];
const EXPM_B4: [f64; 16] = [
    12.925279114731426,
    24.379794129045962,
    25.45713343491634,
    15.147790200169872,
    26.02804623886661,
    60.253546228465126,
    61.37759617746891,
    37.73681053705039,
    22.28221879844659,
    50.42776390923536,
    54.33821315293965,
    32.329711068232456,
    36.70734255419636,
    85.00514246982247,
    89.35397043987538,
    57.42890697787053,
];
const EXPM_C4: [f64; 16] = [
    3.636852383032e+32,
    8.251381317055929e+32,
    8.643989993417586e+32,
    5.326392139476543e+32,
    8.824273060290406e+32,
    2.002073062024512e+33,
    2.0973336280628327e+33,
    1.292368612050754e+33,
    7.575074808759082e+32,
    1.7186518497125853e+33,
    1.8004269612866222e+33,
    1.1094159088107848e+33,
    1.2867795124658122e+33,
    2.9194774244531987e+33,
    3.0583889743185576e+33,
    1.8845670812526498e+33,
];
const EXPM_NIL: [f64; 9] = [
    0.9999999999999999,
    0.9999999999999999,
    3.4999999999999996,
    0.0,
    0.9999999999999999,
    2.9999999999999996,
    0.0,
    0.0,
    0.9999999999999999,
];
const EXPM_NAN: [f64; 9] =
    [f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN, f64::NAN];
const EXPM_NAN_GRAD: [f64; 9] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
const EXPM_BATCH: [f64; 18] = [
    0.8340717528597524,
    -0.18075782757547973,
    1.2291916641195013,
    0.6478463759728629,
    0.8950960149032735,
    -0.06808202144003538,
    -0.34036495370766967,
    1.0609684217232398,
    0.6329875557672684,
    1.025340861084412,
    -0.06656567143968603,
    0.11339615412603771,
    0.05237284354127416,
    1.0166394414804543,
    -0.03770997436252434,
    -0.05878139792415793,
    0.09329282921330197,
    1.0049318208088664,
];
const EXPM_GRAD_A3: [f64; 9] = [
    -1.5128539655472943,
    -1.3118626951392571,
    -0.8054525766113417,
    0.8238043490520568,
    0.7350395370534181,
    1.3196238083294116,
    0.4623854916526644,
    0.36458392461221556,
    0.9686502246938419,
];
const EXPM_GRAD_B4: [f64; 16] = [
    0.27291251721889154,
    -0.6605776083735115,
    0.2215450515267019,
    3.165990408071707,
    39.4875880759601,
    87.00471055986604,
    76.44336686066067,
    131.45673747434793,
    49.0875858599487,
    109.22404953043156,
    95.59854695850491,
    163.52841088840864,
    44.884430679343076,
    100.4704554823329,
    87.37258228277634,
    147.2026907196629,
];
const EXPM_GRAD_C4: [f64; 16] = [
    6.3560738860766624e+32,
    1.5321784755146138e+33,
    1.3170348956124335e+33,
    2.237887652822121e+33,
    1.5251864604293252e+33,
    3.677885414540721e+33,
    3.161217260026758e+33,
    5.37141324197219e+33,
    1.614735046818247e+33,
    3.8940791069709574e+33,
    3.346995467563778e+33,
    5.687063913788913e+33,
    1.0261487627455336e+33,
    2.4751100503717452e+33,
    2.1272979094298867e+33,
    3.614579381631414e+33,
];
const EXPM_GRAD_NIL: [f64; 9] = [
    -2.25,
    -1.5499999999999998,
    -0.49999999999999994,
    -0.46250000000000024,
    0.04999999999999964,
    0.14999999999999983,
    0.8124999999999991,
    1.812499999999999,
    1.1499999999999992,
];
const EXPM_VMAP_GRAD: [f64; 27] = [
    -1.5128539655472943,
    -1.3118626951392571,
    -0.8054525766113417,
    0.8238043490520568,
    0.7350395370534181,
    1.3196238083294116,
    0.4623854916526644,
    0.36458392461221556,
    0.9686502246938419,
    -1.1029220921425629,
    -0.8032479668045522,
    -0.5020984219222396,
    -0.19581841960274404,
    0.10310188424271484,
    0.40462752072941294,
    0.6996956855438337,
    0.998017617088464,
    1.300066093557768,
    -1.0012169495569716,
    -1.206397227906689,
    -0.47877644481426695,
    2.31782382442168,
    1.3424959713624278,
    1.7504148048649393,
    -0.5641186024921436,
    -0.9282184024956801,
    -0.4282442945060724,
];
const EXPM_HESSIAN_A3: [f64; 81] = [
    -1.4401874536901889,
    -0.7310010823870164,
    -0.2590701277248288,
    0.3453928585256293,
    0.11532024887589279,
    0.029548593422386363,
    0.019246809324865527,
    -0.1580683375499128,
    -0.1879867607329982,
    -0.731001082387016,
    -0.21473693622738307,
    0.024584002381419758,
    -0.443537850324336,
    -0.55178858392243,
    -0.4050623438285442,
    0.3681417786041976,
    0.12026958531357841,
    -0.02907302882981112,
    -0.2590701277248287,
    0.02458400238141975,
    0.11455643253614034,
    0.29693466449215355,
    -0.09901236151894333,
    -0.18976438319926275,
    -0.09499388153783553,
    -0.4403785138007765,
    -0.44737008736756956,
    0.34539285852562934,
    -0.4435378503243361,
    0.29693466449215355,
    -0.05387067526997151,
    0.19807544165561392,
    -0.02662200852374471,
    0.008120663305942716,
    0.3729728074576855,
    0.2803360488708134,
    0.11532024887589266,
    -0.5517885839224299,
    -0.09901236151894335,
    0.19807544165561392,
    0.5353900276497,
    0.5907868783979618,
    -0.06945426815133267,
    0.2880715101618941,
    0.0843292605278254,
    0.029548593422386346,
    -0.4050623438285441,
    -0.1897643831992627,
    -0.026622008523744634,
    0.5907868783979617,
    0.29374239861271856,
    0.1332227245132592,
    0.8291731181183795,
    0.6992883365090633,
    0.019246809324865444,
    0.36814177860419756,
    -0.09499388153783547,
    0.008120663305942702,
    -0.06945426815133272,
    0.13322272451325923,
    0.24986568063406633,
    0.12159079511519602,
    0.5125929504791317,
    -0.15806833754991276,
    0.12026958531357843,
    -0.44037851380077664,
    0.37297280745768546,
    0.288071510161894,
    0.8291731181183796,
    0.12159079511519602,
    -0.057797713214173305,
    0.23458075200023423,
    -0.18798676073299825,
    -0.029073028829811127,
    -0.44737008736756956,
    0.28033604887081337,
    0.0843292605278253,
    0.6992883365090634,
    0.5125929504791317,
    0.2345807520002343,
    1.0723077248990147,
];
const EXPM_JVP_B4: [f64; 16] = [
    -3.070371565206174,
    0.06309608461123695,
    3.1517267602631307,
    5.851695505770102,
    17.421836732067483,
    54.05932816140118,
    64.74356832111992,
    48.69163266589829,
    21.457953412177027,
    60.71683533506879,
    70.38286758222193,
    51.1329042935313,
    58.78987928628811,
    153.33217599728607,
    172.12559826226615,
    118.4423596862745,
];
const EXPM_F32: [f64; 27] = [
    1.041171908378601,
    -0.12534673511981964,
    0.2327352911233902,
    0.10916095227003098,
    1.026551365852356,
    -0.07029451429843903,
    -0.11445626616477966,
    0.1925109177827835,
    0.9997043609619141,
    0.8340717554092407,
    -0.18075785040855408,
    1.2291916608810425,
    0.6478464007377625,
    0.895095944404602,
    -0.06808198988437653,
    -0.3403649926185608,
    1.0609683990478516,
    0.6329875588417053,
    1.5007843971252441,
    3.82079815864563,
    0.8140343427658081,
    1.012937068939209,
    2.6731154918670654,
    2.43730092048645,
    1.9373040199279785,
    1.064711570739746,
    1.5144065618515015,
];
const POWER_INT_0: [i64; 4] = [1, 0, 0, 1];
const POWER_INT_1: [i64; 4] = [1, 2, 3, 4];
const POWER_INT_2: [i64; 4] = [7, 10, 15, 22];
const POWER_INT_3: [i64; 4] = [37, 54, 81, 118];
const POWER_INT_5: [i64; 4] = [1069, 1558, 2337, 3406];
const POWER_INT_10: [i64; 4] = [4783807, 6972050, 10458075, 15241882];
const POWER_WC_M3: [f64; 9] = [
    0.08013254119546664,
    -0.022903456826163213,
    0.037197191919893846,
    -0.01950532164721637,
    0.04427637384229938,
    -0.032777947268612086,
    0.037593362870995836,
    -0.016861400442118344,
    0.06200637204333202,
];
const POWER_WC_M2: [f64; 9] = [
    0.17944241134610336,
    -0.03723116973587088,
    0.058357046801818184,
    -0.027946693099504944,
    0.1204219355790108,
    -0.057410299387847655,
    0.06129408111161175,
    -0.026904918056389872,
    0.1484636563076603,
];
const POWER_WC_M1: [f64; 9] = [
    0.41570438799076215,
    -0.046189376443418015,
    0.06928406466512703,
    -0.02911938949693745,
    0.3413997389296114,
    -0.07731699969876495,
    0.07631288281956021,
    -0.032633798574154035,
    0.3750376543829702,
];
const POWER_WC_4: [f64; 9] = [
    47.4851,
    22.5797,
    -23.000799999999998,
    -5.139699999999999,
    87.58939999999998,
    59.06139999999999,
    -38.250699999999995,
    13.353999999999997,
    75.16219999999997,
];
const POWER_WC_7: [f64; 9] = [
    1061.4604249000001,
    845.5006142999998,
    -560.7548295999998,
    -728.1556894999998,
    2667.6991841999993,
    2799.525990599999,
    -1458.4354576999997,
    428.18071639999977,
    2313.4201185999987,
];
const POWER_BATCH_M2: [f64; 18] = [
    0.17944241134610336,
    -0.03723116973587088,
    0.058357046801818184,
    -0.027946693099504944,
    0.1204219355790108,
    -0.057410299387847655,
    0.06129408111161175,
    -0.026904918056389872,
    0.1484636563076603,
    0.09748595710175052,
    0.1501099223359825,
    -0.09542757853329294,
    -0.03013146396476189,
    0.13183668709627894,
    0.09100944525139443,
    0.10110862137512151,
    -0.06986391083399265,
    0.11816610114560655,
];
const POWER_GRAD_7: [f64; 9] = [
    -3614.4568479,
    -6561.9055312,
    -2693.839006299999,
    -1741.6402684000007,
    1669.2429596999984,
    2914.1524160999984,
    2392.2452716999983,
    10146.188864999995,
    6855.405160199996,
];
const POWER_GRAD_M2: [f64; 9] = [
    0.12823109693590867,
    0.03624059515493002,
    0.05182749727783259,
    0.0011265792895124138,
    -0.0017199002318199286,
    -0.025191073580392142,
    -0.07583460943327261,
    -0.028096829491090772,
    -0.12022746513630687,
];
const MULTI_DOT_VV: [f64; 1] = [-0.7902500000000001];
const MULTI_DOT_MM: [f64; 12] = [
    -0.3850000000000002,
    -0.40950000000000014,
    -0.43400000000000016,
    0.15500000000000017,
    0.17250000000000015,
    0.19000000000000017,
    0.6950000000000003,
    0.7545000000000002,
    0.8140000000000003,
    1.2350000000000005,
    1.3365000000000005,
    1.4380000000000006,
];
const MULTI_DOT_VM: [f64; 5] =
    [0.007499999999999956, 0.16750000000000007, 0.3275, 0.4875, 0.6475000000000001];
const MULTI_DOT_GRAD: [f64; 10] = [
    -0.10625000000000002,
    -0.17187500000000006,
    -0.23750000000000004,
    -0.3031250000000002,
    -0.36875000000000013,
    -0.16574999999999998,
    -0.268125,
    -0.37049999999999994,
    -0.47287500000000016,
    -0.57525,
];
const RANK_R43: [i64; 1] = [2];
const RANK_R33: [i64; 1] = [1];
const RANK_Z23: [i64; 1] = [0];
const RANK_BATCH: [i64; 4] = [3, 1, 3, 0];
const RANK_TOL: [i64; 1] = [2];
const COND_WC: [f64; 1] = [1.6634285177016537];
const COND_M42: [f64; 1] = [5.405161599102374];
const COND_BATCH: [f64; 2] = [3.6942446444762984, 1.6634285177016537];
const COND_SINGULAR: [f64; 1] = [f64::INFINITY];
const COND_R43: [f64; 1] = [1.392034541596124e+16];
const COND_GRAD: [f64; 9] = [
    -0.39289409041037393,
    0.16553373819601502,
    -0.4091491029414289,
    0.14010723554357363,
    0.11938778255322662,
    0.4356551996068798,
    -0.42564477355861574,
    0.4168971978989497,
    -0.05744769783810818,
];
// --- end of the recorded block
