//! The derivative conformance checks, driven by the registries: every
//! standard sample's jvp matches finite differences, its jvp's linear part
//! transposes (the dot-product test) and batches like a loop; every
//! registered op with a float result has a jvp rule; and the checks catch
//! wrong jvp and transpose rules.

#[macro_use]
mod common;

use anvil::core::{register_rule, LinearArg, Parameter};
use anvil::cpu::{register_kernel, Parallelism};
use anvil::ops::control::CustomVjpCall;
use anvil::ops::elementwise::StopGradient;
use anvil::{trace, Op, Tensor, TensorType, Var, VarExt};
use anvil_testing::{
    check_op, check_op_jvp, check_op_transpose, check_op_vmap_of_jvp, rule_report,
    standard_samples, CheckOutcome, Derivative, InputKind, OpSample, RuleReportTable,
};
use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Samples excluded from `every_sample_differentiates_correctly` because of
/// a known bug in the library's jvp or transpose rule (by
/// `OpSample::describe()`), each with the reason. Remove an entry once its
/// rule is fixed. Empty: no known bug.
const KNOWN_AD_BUGS: &[(&str, &str)] = &[];

type Check = fn(&OpSample) -> Result<(), String>;

/// Every standard sample, every derivative check: no subset (the whole
/// test binary runs in about a second in debug).
#[test]
fn every_sample_differentiates_correctly() {
    let start = Instant::now();
    let samples = standard_samples();
    let checks: [(&str, Check); 3] = [
        ("jvp", check_op_jvp),
        ("transpose", check_op_transpose),
        ("vmap_of_jvp", check_op_vmap_of_jvp),
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for s in &samples {
        let name = s.describe();
        if KNOWN_AD_BUGS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        checked += 1;
        for (what, check) in checks {
            if let Err(e) = check(s) {
                failures.push(format!("{name} [{what}]:\n{e}"));
            }
        }
    }
    eprintln!(
        "{checked} of {} samples x {} checks in {:?}",
        samples.len(),
        checks.len(),
        start.elapsed()
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

/// `check_op` runs the four checks and says which ran, which passed
/// trivially and which were skipped, and why.
#[test]
fn check_op_reports_every_check() {
    let samples = standard_samples();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for s in &samples {
        let report = check_op(s);
        assert!(report.is_ok(), "{report}");
        let names: Vec<&str> = report.checks.iter().map(|(c, _)| *c).collect();
        assert_eq!(names, ["vmap", "jvp", "transpose", "vmap_of_jvp"]);
        for (check, outcome) in &report.checks {
            let kind = match outcome {
                CheckOutcome::Passed => "passed",
                CheckOutcome::Trivial(_) => "trivial",
                CheckOutcome::Skipped(_) => "skipped",
                CheckOutcome::Failed(_) => "failed",
            };
            *tally.entry(format!("{check} {kind}")).or_default() += 1;
        }
    }
    eprintln!("{tally:?}");
    // Most samples are differentiated for real.
    assert!(tally["jvp passed"] > 100, "{tally:?}");
    assert!(tally["transpose passed"] > 100, "{tally:?}");

    let find = |name: &str| {
        samples.iter().find(|s| s.describe().starts_with(name)).expect("a sample of the op")
    };
    let outcome = |name: &str, check: &str| check_op(find(name)).outcome(check).cloned();
    // Comparisons, argmax and integer ops have no derivative.
    let trivial = |o: Option<CheckOutcome>| matches!(o, Some(CheckOutcome::Trivial(w)) if w.starts_with("no derivative"));
    assert!(trivial(outcome("lt(f64", "jvp")));
    assert!(trivial(outcome("argmax", "transpose")));
    assert!(trivial(outcome("add(i64", "vmap_of_jvp")));
    assert!(trivial(outcome("full", "jvp")));
    // Zero derivatives with zero finite differences pass for real.
    assert_eq!(outcome("floor", "jvp"), Some(CheckOutcome::Passed));
    assert_eq!(outcome("sign(f64", "transpose"), Some(CheckOutcome::Passed));
    assert_eq!(outcome("stop_gradient(f64", "jvp"), Some(CheckOutcome::Passed));
    // custom_vjp: forward mode is unsupported by design; its vjp is
    // checked against finite differences instead.
    let skipped = |o: Option<CheckOutcome>, why: &str| matches!(o, Some(CheckOutcome::Skipped(w)) if w.contains(why));
    assert!(skipped(outcome("custom_vjp_call", "jvp"), "reverse mode only"));
    assert!(skipped(outcome("custom_vjp_call", "vmap_of_jvp"), "reverse mode only"));
    assert_eq!(outcome("custom_vjp_call", "transpose"), Some(CheckOutcome::Passed));
    // Its tangent node cannot be evaluated.
    assert!(skipped(outcome("custom_vjp_tangent", "jvp"), "cannot be evaluated"));
    assert!(skipped(outcome("custom_vjp_tangent", "transpose"), "cannot be evaluated"));

    let report = check_op(find("custom_vjp_call"));
    let shown = report.to_string();
    assert!(shown.starts_with("custom_vjp_call(f64[3], f64[3])\n"), "{shown}");
    assert!(shown.contains("jvp          skipped (reverse mode only"), "{shown}");
    assert!(shown.contains("transpose    passed"), "{shown}");
}

/// The annotations are what makes those two samples pass: without them the
/// checks fail, with a message that says why.
#[test]
fn derivative_annotations_are_needed() {
    let sym = InputKind::Uniform { lo: -1.0, hi: 1.0 };
    // stop_gradient is the identity, whose finite differences are not zero.
    let plain = OpSample::new(StopGradient).input(sym.clone(), &[3]);
    let e = check_op_jvp(&plain).expect_err("stop_gradient's zero jvp matches finite differences");
    assert!(e.contains("finite differences"), "{e}");
    assert_eq!(check_op_jvp(&plain.clone().zero_derivative()), Ok(()));
    // A zero-derivative op whose jvp is not zero fails.
    let sin = OpSample::new(anvil::ops::elementwise::Sin).input(sym, &[3]).zero_derivative();
    let e = check_op_jvp(&sin).expect_err("sin's jvp is not zero");
    assert!(e.contains("zero by definition"), "{e}");

    let mut vjp_only = standard_samples()
        .into_iter()
        .find(|s| s.op.is::<CustomVjpCall>())
        .expect("a custom_vjp sample");
    vjp_only.derivative = Derivative::FiniteDifferences;
    let e = check_op_jvp(&vjp_only).expect_err("custom_vjp has a forward mode");
    assert!(e.contains("custom_vjp_call") && e.contains("reverse mode only"), "{e}");
}

/// Every op type with a kernel is in the report, with its rules; and every
/// op with a kernel and a float result has a jvp rule, except the explicit
/// exemptions below.
#[test]
fn every_differentiable_op_has_a_jvp_rule() {
    let report = rule_report();
    eprintln!("{}", RuleReportTable(&report));
    let by_type: HashMap<TypeId, _> = report.iter().map(|r| (r.op_type, r)).collect();
    assert_eq!(by_type.len(), report.len(), "one row per op type");
    assert!(report.windows(2).all(|w| w[0].op <= w[1].op), "sorted by name");

    // Every standard op is listed, and runs on the CPU: with a kernel, or
    // (computed element by element) with its block math.
    let samples = standard_samples();
    for s in &samples {
        let row = by_type.get(&s.op.op_type());
        let runs = row.is_some_and(|r| r.kernel) || s.op.elementwise_math().is_some();
        assert!(runs, "{}: no kernel in {row:?}", s.describe());
    }
    // The test-local ops below are listed too (with their location).
    let wrong = report.iter().find(|r| r.op == "WrongCube").expect("test-local ops are listed");
    assert!(wrong.kernel && wrong.vmap && wrong.jvp && !wrong.transpose, "{wrong}");
    assert!(wrong.location.contains("conformance_ad.rs"), "{wrong}");

    // Float results and operands, by op type, from the samples.
    let mut float_out: HashMap<TypeId, bool> = HashMap::new();
    let mut runs: HashMap<TypeId, bool> = HashMap::new();
    for s in &samples {
        let tys = s.output_types().expect("a valid sample");
        *float_out.entry(s.op.op_type()).or_default() |= tys.iter().any(|t| t.dtype().is_float());
        *runs.entry(s.op.op_type()).or_default() |= s.op.elementwise_math().is_some();
    }
    // Ops with a kernel and a float result that need no jvp rule, and why.
    let exempt: &[(&str, &str)] = &[
        // Constants have no operands: a jvp rule would never be called.
        ("Constant", "no operands"),
        // The tangent node of custom_vjp: linear, it exists only to be
        // transposed (to `bwd`); forward mode of custom_vjp is unsupported
        // by design, as in JAX.
        ("CustomVjpTangent", "reverse mode only"),
    ];
    let mut missing = Vec::new();
    for r in &report {
        let test_local = r.location.starts_with("tests/") || r.location.contains("/tests/");
        let internal = anvil::cpu::fusion::is_internal(r.op_type);
        let on_cpu = r.kernel || runs.get(&r.op_type).copied().unwrap_or(false);
        if !on_cpu || r.jvp || test_local || internal || r.op_type == TypeId::of::<Parameter>() {
            continue;
        }
        let float = *float_out
            .get(&r.op_type)
            .unwrap_or_else(|| panic!("{}: no standard sample (see conformance_vmap)", r.op));
        if float && !exempt.iter().any(|(n, _)| *n == r.op) {
            missing.push(r.to_string());
        }
    }
    assert!(missing.is_empty(), "ops with a float result but no jvp rule: {missing:#?}");
    // Every exemption is still needed: an exempted op that gains a jvp
    // rule (or is renamed) must leave the list.
    for (n, why) in exempt {
        let r = report.iter().find(|r| r.op == *n);
        assert!(
            r.is_some_and(|r| (r.kernel || runs.get(&r.op_type) == Some(&true)) && !r.jvp),
            "{n} is exempted ({why}) but is {r:?}: remove the exemption"
        );
    }
}

// ------------------------------------------------ the checks catch bugs

/// A unary `f64` plugin op with a CPU kernel and an elementwise batching rule.
macro_rules! unary_op {
    ($name:ident = $s:literal, $kernel:ident) => {
        same_type_op!($name = $s);
        register_kernel!($name, $kernel);
        register_rule!(VmapRule, $name, common::keep_axis);
    };
}

fn map_f64(x: &Tensor, out: &TensorType, f: impl Fn(f64) -> f64) -> anvil::Result<Tensor> {
    Tensor::from_vec(x.as_slice::<f64>()?.iter().map(|&x| f(x)).collect::<Vec<_>>(), out.shape())
}

fn cube_kernel(
    _: &dyn Op,
    x: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> anvil::Result<Tensor> {
    map_f64(x[0], out, |x| x * x * x)
}

fn triple_kernel(
    _: &dyn Op,
    x: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> anvil::Result<Tensor> {
    map_f64(x[0], out, |x| 3.0 * x)
}

// x^3, with a right jvp, a wrong one, and none.
unary_op!(Cube = "test.cube", cube_kernel);
unary_op!(WrongCube = "test.wrong_cube", cube_kernel);
unary_op!(CubeWithoutJvp = "test.cube_without_jvp", cube_kernel);

/// Right: `3 x^2 t`.
fn jvp_cube(_: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> anvil::Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| t * &(p[0].square() * 3.0)))
}

/// Wrong: `3 x t`, the derivative of a square, not a cube.
fn jvp_wrong_cube(_: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> anvil::Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| t * &(&p[0] * 3.0)))
}

register_rule!(JvpRule, Cube, jvp_cube);
register_rule!(JvpRule, WrongCube, jvp_wrong_cube);

// 3 x, linear: its jvp is itself on the tangent, so reverse mode needs its
// transpose rule; a right one and a wrong one.
unary_op!(Triple = "test.triple", triple_kernel);
unary_op!(WrongTriple = "test.wrong_triple", triple_kernel);

/// The op itself on the tangent (for both: the jvp is right).
fn jvp_linear(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> anvil::Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}

/// Right: `3 x` is self-adjoint.
fn transpose_triple(op: &dyn Op, ct: &Var, _: &[LinearArg]) -> anvil::Result<Vec<Option<Var>>> {
    Ok(vec![Some(Var::apply_op(op.boxed(), &[ct]))])
}

/// Wrong: `2 ct`.
fn transpose_wrong_triple(
    _: &dyn Op,
    ct: &Var,
    _: &[LinearArg],
) -> anvil::Result<Vec<Option<Var>>> {
    Ok(vec![Some(ct * 2.0)])
}

register_rule!(JvpRule, Triple, jvp_linear);
register_rule!(JvpRule, WrongTriple, jvp_linear);
register_rule!(TransposeRule, Triple, transpose_triple);
register_rule!(TransposeRule, WrongTriple, transpose_wrong_triple);

fn sample(op: impl Op) -> OpSample {
    OpSample::new(op).input(InputKind::Uniform { lo: -2.0, hi: 2.0 }, &[2, 3])
}

#[test]
fn the_jvp_check_catches_a_wrong_jvp_rule() {
    let right = check_op(&sample(Cube));
    assert!(right.is_ok(), "a correct rule fails:\n{right}");
    assert_eq!(right.outcome("jvp"), Some(&CheckOutcome::Passed));

    let e = check_op_jvp(&sample(WrongCube)).expect_err("the wrong jvp rule passes");
    assert!(e.contains("test.wrong_cube(f64[2,3])"), "the error names the sample: {e}");
    assert!(e.contains("differs from central finite differences"), "{e}");
    // check_op reports it, among checks that pass: the wrong rule is
    // consistently wrong, so it transposes and batches fine.
    let report = check_op(&sample(WrongCube));
    assert!(!report.is_ok());
    assert!(matches!(report.outcome("jvp"), Some(CheckOutcome::Failed(_))), "{report}");
    assert_eq!(report.outcome("transpose"), Some(&CheckOutcome::Passed), "{report}");
    assert_eq!(report.outcome("vmap_of_jvp"), Some(&CheckOutcome::Passed), "{report}");
    assert!(report.to_string().contains("jvp          FAILED: test.wrong_cube"), "{report}");
    let e = report.into_result().expect_err("a failure");
    assert!(e.starts_with("[jvp] test.wrong_cube(f64[2,3]):"), "{e}");

    // No jvp rule at all.
    for check in [check_op_jvp, check_op_transpose, check_op_vmap_of_jvp] {
        let e = check(&sample(CubeWithoutJvp)).expect_err("an op without a jvp rule passes");
        assert!(e.contains("\"test.cube_without_jvp\"") && e.contains("no jvp rule"), "{e}");
    }
}

#[test]
fn the_transpose_check_catches_a_wrong_transpose_rule() {
    let right = check_op(&sample(Triple));
    assert!(right.is_ok(), "a correct rule fails:\n{right}");

    let wrong = sample(WrongTriple);
    // The jvp is right...
    assert_eq!(check_op_jvp(&wrong), Ok(()));
    assert_eq!(check_op_vmap_of_jvp(&wrong), Ok(()));
    // ...its transpose is not.
    let e = check_op_transpose(&wrong).expect_err("the wrong transpose rule passes");
    assert!(e.contains("test.wrong_triple(f64[2,3])"), "the error names the sample: {e}");
    assert!(e.contains("dot-product test fails"), "{e}");
}

/// For a reverse-mode-only op, the vjp (the user's `bwd`) is compared with
/// finite differences: a wrong `bwd` is caught.
#[test]
fn the_transpose_check_catches_a_wrong_custom_vjp() {
    let traced = |f: &dyn Fn(&[Var]) -> Vec<Var>, n: usize| {
        let args: Vec<Tensor> = (0..n).map(|_| Tensor::zeros(&[3]).unwrap()).collect();
        anvil::core::SubGraph::new(trace(&|xs: &[Var]| f(xs), args).expect("traceable"))
    };
    // sin(x * w), with residuals cos(x * w), x, w.
    let primal = traced(&|v| vec![(&v[0] * &v[1]).sin()], 2);
    let fwd = traced(
        &|v| {
            let xw = &v[0] * &v[1];
            vec![xw.sin(), xw.cos(), v[0].clone(), v[1].clone()]
        },
        2,
    );
    let bwd = |swap: bool| {
        traced(
            &move |v| {
                let (c, x, w, ct) = (&v[0], &v[1], &v[2], &v[3]);
                let g = ct * c;
                // Right: (g w, g x). Wrong: the two swapped.
                if swap {
                    vec![&g * x, &g * w]
                } else {
                    vec![&g * w, &g * x]
                }
            },
            4,
        )
    };
    let sym = InputKind::Uniform { lo: -1.0, hi: 1.0 };
    let call = |bwd| {
        OpSample::new(CustomVjpCall { primal: primal.clone(), fwd: fwd.clone(), bwd, consts: 0 })
            .input(sym.clone(), &[3])
            .input(sym.clone(), &[3])
            .reverse_only()
    };
    assert_eq!(check_op_transpose(&call(bwd(false))), Ok(()));
    let e = check_op_transpose(&call(bwd(true))).expect_err("a wrong bwd passes");
    assert!(e.contains("custom_vjp_call") && e.contains("J v by finite differences"), "{e}");
}

/// `prod` with zero factors (outside the standard samples, whose `prod`
/// inputs are in `[0.5, 1.5)`): a jvp that divided by `x` gave
/// `0 / 0 = NaN` here; the rule uses the product of the other factors.
#[test]
fn reduce_prod_differentiates_at_zero() {
    use anvil::ops::reduce::ReduceProd;
    let x = Tensor::from_vec(vec![0.0, 2.0, 3.0, 1.0, 0.0, -0.5], &[2, 3]).expect("a literal");
    let s = OpSample::new(ReduceProd { axes: vec![1], keepdims: false })
        .given(x, InputKind::Uniform { lo: -1.0, hi: 1.0 });
    let report = check_op(&s);
    assert!(report.is_ok(), "{report}");
}
