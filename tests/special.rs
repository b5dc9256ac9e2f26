//! `anvil::special` against `jax.scipy.special`: values, first and second
//! derivatives at fixed points (including the reflection region below 1/2,
//! large arguments, the poles) and the gradients of the two-argument
//! functions. The values are recorded by `tests/jax/special_expected.py`
//! (its docstring says how to rerun it); the block between the markers is
//! its output, verbatim.
//!
//! Tolerances: 1e-13 relative (plus 1e-15 absolute, for the zeros of
//! `gammaln` at 1 and 2, where both are sums that cancel) for values and
//! first derivatives; second derivatives 1e-11 (anvil differentiates its
//! Lanczos sum and series, JAX applies polygamma).

use anvil::prelude::*;
use anvil::special;

const X: [f64; 19] = [
    0.1, 0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 3.7, 9.5, 10.0, 12.25, 33.0, 170.5, 1e6, -0.3, -0.5, -1.5,
    -2.7, -10.2,
];

fn v(x: &[f64]) -> Tensor {
    Tensor::from_vec(x.to_vec(), &[x.len()]).unwrap()
}

fn close(what: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= rtol * b.abs() + 1e-15
        };
        assert!(
            ok,
            "{what}[{i}] at {}: anvil {a}, JAX {b}\nanvil {got:?}\nJAX   {want:?}",
            X.get(i).unwrap_or(&f64::NAN)
        );
    }
}

/// `f`, its derivative and its second derivative, elementwise at `x`.
fn three(f: fn(&Var) -> Var, x: &[f64]) -> [Vec<f64>; 3] {
    let x = v(x);
    let d1 = vmap(grad(f));
    let d2 = vmap(grad(grad(f)));
    [
        f.eval(&x).unwrap().to_f64_vec(),
        d1.eval(&x).unwrap().to_f64_vec(),
        d2.eval(&x).unwrap().to_f64_vec(),
    ]
}

#[test]
fn gammaln_and_digamma_as_in_jax() {
    let [g, g1, g2] = three(special::gammaln, &X);
    close("gammaln", &g, &GAMMALN, 1e-13);
    close("gammaln'", &g1, &GAMMALN_D1, 1e-13);
    close("gammaln''", &g2[..18], &GAMMALN_D2[..18], 1e-11);
    // At -10.2 JAX's polygamma gives 2.6e22; the reflection formula gives
    // ψ'(11.2) + π² / sin²(10.2π) (ψ' = this test's value at 11.2).
    let at = three(special::gammaln, &[11.2])[1].clone();
    let psi1 = three(special::digamma, &[11.2])[1][0];
    let s = (10.2 * std::f64::consts::PI).sin();
    let want = std::f64::consts::PI.powi(2) / (s * s) - psi1;
    assert!((g2[18] - want).abs() < 1e-11 * want, "{} against {want} ({at:?})", g2[18]);
    let [d, d1, d2] = three(special::digamma, &X);
    close("digamma", &d, &DIGAMMA, 1e-13);
    // (JAX's polygamma fails at -10.2; anvil's ψ' there is gammaln''s.)
    close("digamma'", &d1[..18], &DIGAMMA_D1[..18], 1e-11);
    assert!((d1[18] - g2[18]).abs() < 1e-11 * g2[18]);
    close("digamma''", &d2[..18], &DIGAMMA_D2[..18], 1e-9);
    let poles = v(&[0.0, -1.0, -4.0]);
    let p = (|x: &Var| vec![special::gammaln(x), special::digamma(x)]).eval(&poles).unwrap();
    let p: Vec<f64> = p.iter().flat_map(Tensor::to_f64_vec).collect();
    close("poles", &p, &POLES, 0.0);
}

#[test]
fn two_argument_functions_as_in_jax() {
    let weights = |n: usize| iota(&[n], 0).cos();
    let (a, b) = (v(&[0.5, 1.0, 2.5, 7.0]), v(&[0.5, 3.0, 1.5, 0.25]));
    close("betaln", &special::betaln.eval((&a, &b)).unwrap().to_f64_vec(), &BETALN, 1e-13);
    // log B(30, 12) = log(29! 11! / 41!) = -25.274864968419808 (JAX's
    // betaln gives -25.27486494323808).
    let big = special::betaln.eval((&Tensor::scalar(30.0), &Tensor::scalar(12.0))).unwrap();
    assert!((big.item().unwrap() + 25.27486496841981).abs() < 1e-13);
    let g = grad(move |a: &Var, b: &Var| (special::betaln(a, b) * weights(4)).sum_all())
        .argnums(&[0, 1]);
    let g = g.eval((&a, &b)).unwrap();
    let g = [g[0].to_f64_vec(), g[1].to_f64_vec()].concat();
    close("betaln'", &g, &BETALN_GRAD, 1e-12);
    let m = (|a: &Var| special::multigammaln(a, 3)).eval(v(&[1.5, 2.0, 7.25])).unwrap();
    close("multigammaln", &m.to_f64_vec(), &MULTIGAMMALN, 1e-13);
    let (x, y) = (v(&[0.0, 0.0, 2.0, -1.5, 0.5]), v(&[0.0, 3.0, 0.5, 4.0, -0.5]));
    type Two = fn(&Var, &Var) -> Var;
    for (name, f, want, want_grad) in [
        ("xlogy", special::xlogy as Two, &XLOGY, &XLOGY_GRAD),
        ("xlog1py", special::xlog1py as Two, &XLOG1PY, &XLOG1PY_GRAD),
    ] {
        close(name, &f.eval((&x, &y)).unwrap().to_f64_vec(), want, 1e-14);
        let g = grad(move |x: &Var, y: &Var| (f(x, y) * weights(5)).sum_all()).argnums(&[0, 1]);
        let g = g.eval((&x, &y)).unwrap();
        let mut g = [g[0].to_f64_vec(), g[1].to_f64_vec()].concat();
        // At (0, 0) both derivatives are 0 here; JAX's rule gives -inf
        // (log y) and NaN (0 / 0) for xlogy. Elsewhere they agree.
        let mut want_grad = want_grad.to_vec();
        if name == "xlogy" {
            assert_eq!((g[0], g[5]), (0.0, 0.0));
            (g[0], g[5], want_grad[0], want_grad[5]) = (0.0, 0.0, 0.0, 0.0);
        }
        close(&format!("{name}'"), &g, &want_grad, 1e-14);
    }
    let e = special::entr.eval(v(&[0.0, 0.3, 1.0, 2.5, -1.0])).unwrap();
    close("entr", &e.to_f64_vec(), &ENTR, 1e-14);
}

#[test]
fn logit_ndtr_and_expit_as_in_jax() {
    let p = [1e-12, 0.1, 0.5, 0.75, 0.999];
    let [l, l1, l2] = three(special::logit, &p);
    close("logit", &l, &LOGIT, 1e-13);
    close("logit'", &l1, &LOGIT_D1, 1e-13);
    close("logit''", &l2, &LOGIT_D2, 1e-12);
    let z = [-40.0, -8.0, -1.0, -0.3, 0.0, 0.5, 2.0, 9.0];
    let [n, n1, n2] = three(special::ndtr, &z);
    close("ndtr", &n, &NDTR, 1e-13);
    close("ndtr'", &n1, &NDTR_D1, 1e-13);
    close("ndtr''", &n2, &NDTR_D2, 1e-12);
    let [e, e1, e2] = three(special::expit, &z);
    close("expit", &e, &EXPIT, 1e-13);
    close("expit'", &e1, &EXPIT_D1, 1e-13);
    close("expit''", &e2, &EXPIT_D2, 1e-12);
}

// --- recorded by tests/jax/special_expected.py (JAX 0.10.2, x64)
#[rustfmt::skip]
mod recorded {
    pub const GAMMALN: [f64; 19] = [2.252712651734206, 0.5723649429247004, 0.06637623973474316, 0.0, -0.12078223763524498, 0.0, 0.2846828704729196, 1.4280723266653907, 11.68933342079727, 12.801827480081473, 18.115669505710894, 81.55795945611503, 704.0044277342046, 12815504.569147611, 1.4648400508576027, 1.2655121234846451, 0.8600470153764805, -0.07140708531564832, -13.900530963695152];
    pub const GAMMALN_D1: [f64; 19] = [-10.423754940411078, -1.9635100260214255, -0.7549269499470511, -0.5772156649015334, 0.03648997397857712, 0.42278433509846747, 0.7031566406452437, 1.167153539361512, 2.1977378764029494, 2.2517525890667214, 2.464154655185369, 3.4812795305349864, 5.135799878794703, 13.81551005796419, 2.113309779635399, 0.03648997397857731, 0.703156640645244, -1.115347129140689, 6.694638450417517];
    pub const GAMMALN_D2: [f64; 19] = [101.43329915079275, 4.93480220054468, 1.922539959477204, 1.6449340668482264, 0.9348022005446794, 0.6449340668482265, 0.4903577561002349, 0.31003785767003833, 0.11099728846909904, 0.10516633568168574, 0.0850551429881632, 0.030766804020302095, 0.005882335979579863, 1.000000500000167e-06, 13.945160267805722, 8.934802200544677, 9.379246644989122, 14.769375845132314, 2.572936155935958e+22];
    pub const DIGAMMA: [f64; 19] = [-10.423754940411078, -1.9635100260214255, -0.7549269499470511, -0.5772156649015334, 0.03648997397857712, 0.42278433509846747, 0.7031566406452437, 1.167153539361512, 2.1977378764029494, 2.2517525890667214, 2.464154655185369, 3.4812795305349864, 5.135799878794703, 13.81551005796419, 2.113309779635399, 0.03648997397857731, 0.703156640645244, -1.115347129140689, 6.694638450417517];
    pub const DIGAMMA_D1: [f64; 19] = [101.43329915079275, 4.93480220054468, 1.922539959477204, 1.6449340668482264, 0.9348022005446794, 0.6449340668482265, 0.4903577561002349, 0.31003785767003833, 0.11099728846909904, 0.10516633568168574, 0.0850551429881632, 0.030766804020302095, 0.005882335979579863, 1.000000500000167e-06, 13.945160267805722, 8.934802200544677, 9.379246644989122, 14.769375845132314, 2.572936155935958e+22];
    pub const DIGAMMA_D2: [f64; 19] = [-2001.8614573783416, -16.828796644234295, -3.2017970437947163, -2.4041138063191854, -0.828796644234319, -0.40411380631918803, -0.2362040516417271, -0.09539530872855392, -0.01230784580770932, -0.011049834970802055, -0.007230035788993334, -0.0009465216039640895, -3.460177680469093e-05, -1.000001000000499e-12, 67.63908119988305, -0.828796644234319, -0.23620405164172797, -68.9329390232637, 3.216903338644142e+24];
    pub const POLES: [f64; 6] = [f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::NAN, f64::NAN, f64::NAN];
    pub const BETALN: [f64; 4] = [1.1447298858494008, -1.0986122886681116, -1.627858836390381, 0.8150882859696342];
    pub const BETALN_GRAD: [f64; 8] = [-1.3862943611198921, -0.9905542274249234, 0.23011298244723222, 0.03729221722041931, -1.3862943611198921, -0.18010076862271357, 0.5075442068119937, 6.0764819344883];
    pub const MULTIGAMMALN: [f64; 3] = [2.168677534063556, 1.5963125911388554, 20.10480015793442];
    pub const XLOGY: [f64; 5] = [0.0, 0.0, -1.3862943611198906, -2.0794415416798357, f64::NAN];
    pub const XLOGY_GRAD: [f64; 10] = [f64::NEG_INFINITY, 0.5935827528224541, 0.28845100645159216, -1.3724210155882, f64::NAN, f64::NAN, 0.0, -1.6645873461885696, 0.37124718622516706, 0.6536436208636119];
    pub const XLOG1PY: [f64; 5] = [0.0, 0.0, 0.8109302162163288, -2.4141568686511503, -0.34657359027997264];
    pub const XLOG1PY_GRAD: [f64; 10] = [0.0, 0.7490180399250765, -0.1687330220694577, -1.593331457054044, 0.4530712328926064, 0.0, 0.0, -0.5548624487295232, 0.29699774898013365, -0.6536436208636119];
    pub const ENTR: [f64; 5] = [-0.0, 0.3611918412977808, -0.0, -2.2907268296853878, f64::NEG_INFINITY];
    pub const LOGIT: [f64; 5] = [-27.63102111592755, -2.197224577336219, 0.0, 1.0986122886681098, 6.906754778648553];
    pub const LOGIT_D1: [f64; 5] = [1000000000001.0001, 11.111111111111109, 4.0, 5.333333333333333, 1001.0010010010001];
    pub const LOGIT_D2: [f64; 5] = [-1.0000000000000001e+24, -98.76543209876542, 0.0, 14.222222222222221, 999998.997996994];
    pub const NDTR: [f64; 8] = [0.0, 6.22096057427174e-16, 0.15865525393145707, 0.3820885778110474, 0.5, 0.6914624612740131, 0.9772498680518208, 1.0];
    pub const NDTR_D1: [f64; 8] = [0.0, 5.052271083536857e-15, 0.2419707245191433, 0.3813878154605241, 0.3989422804014327, 0.35206532676429947, 0.05399096651318804, 1.0279773571668841e-18];
    pub const NDTR_D2: [f64; 8] = [0.0, 4.041816866829486e-14, 0.24197072451914334, 0.11441634463815724, 0.0, -0.17603266338214976, -0.10798193302637608, -9.251796214501958e-18];
    pub const EXPIT: [f64; 8] = [4.24835425529159e-18, 0.0003353501304664781, 0.2689414213699951, 0.425557483188341, 0.5, 0.6224593312018546, 0.8807970779778823, 0.9998766054240137];
    pub const EXPIT_D1: [f64; 8] = [4.24835425529159e-18, 0.00033523767075647424, 0.19661193324148185, 0.24445831169074586, 0.25, 0.2350037122015945, 0.10499358540350662, 0.00012337934976493025];
    pub const EXPIT_D2: [f64; 8] = [4.24835425529159e-18, 0.0003350128267632233, 0.09085774767294842, 0.03639618395557622, 0.0, -0.05755679485232076, -0.07996250105615312, -0.00012334890107983083];
}
use recorded::*;
// --- end of recorded block
