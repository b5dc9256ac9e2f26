//! The vmap conformance check, driven by the registries: every op with a
//! CPU kernel has a sample, every sample batches like a loop (one level and
//! nested), and the check catches a wrong batching rule.

#[macro_use]
mod common;

use anvil::core::{register_rule, Batched};
use anvil::cpu::{register_kernel, Parallelism};
use anvil::{Op, Tensor, TensorType, Var};
use anvil_testing::{check_op_vmap, missing_samples, standard_samples, InputKind, OpSample};
use std::time::Instant;

/// Samples excluded from `every_sample_batches_like_a_loop` because of a
/// known bug in the library's batching rule (by `OpSample::describe()`),
/// each with the reason. Remove an entry once its rule is fixed.
const KNOWN_VMAP_BUGS: &[(&str, &str)] = &[];

#[test]
fn every_registered_op_has_a_sample() {
    let missing = missing_samples(&standard_samples());
    assert!(
        missing.is_empty(),
        "ops with a registered CPU kernel but no sample in anvil_testing::standard_samples(): {missing:?}"
    );
    // The test-local ops registered below are fixtures, not asked for.
    assert!(
        !missing_samples(&[]).iter().any(|n| n.contains("Double")),
        "{:?}",
        missing_samples(&[])
    );
}

#[test]
fn every_sample_batches_like_a_loop() {
    let start = Instant::now();
    let samples = standard_samples();
    let mut failures = Vec::new();
    let mut checked = 0;
    for s in &samples {
        let name = s.describe();
        if KNOWN_VMAP_BUGS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        checked += 1;
        if let Err(e) = check_op_vmap(s) {
            failures.push(e);
        }
    }
    eprintln!("{checked} of {} samples checked in {:?}", samples.len(), start.elapsed());
    assert!(failures.is_empty(), "{} samples fail:\n{}", failures.len(), failures.join("\n\n"));
}

/// `2 * x`, elementwise: a plugin op, twice, with a correct and a wrong
/// batching rule.
macro_rules! double_op {
    ($name:ident = $s:literal) => {
        same_type_op!($name = $s);
        register_kernel!($name, double_kernel);
    };
}

double_op!(Double = "test.double");
double_op!(WrongDouble = "test.wrong_double");

fn double_kernel(
    _: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> anvil::Result<Tensor> {
    let v: Vec<f64> = inputs[0].as_slice::<f64>()?.iter().map(|x| 2.0 * x).collect();
    Tensor::from_vec(v, out.shape())
}

/// Right: elementwise, so the batch axis stays where it is.
use common::keep_axis;

/// Wrong: claims the batch axis is in front wherever it was. The shapes
/// still fit when the element's axes have the batch size, so only the
/// values tell.
fn claim_front(op: &dyn Op, args: &[Batched], _size: usize) -> anvil::Result<Batched> {
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&args[0].var]), Some(0)))
}

register_rule!(VmapRule, Double, keep_axis);
register_rule!(VmapRule, WrongDouble, claim_front);

#[test]
fn the_check_catches_a_wrong_batching_rule() {
    let kind = InputKind::Uniform { lo: -1.0, hi: 1.0 };
    // Element shape [3]: batched by 3 at the back, the result is [3, 3]
    // either way, and the wrong rule returns its transpose.
    let right = OpSample::new(Double).input(kind.clone(), &[3]);
    if let Err(e) = check_op_vmap(&right) {
        panic!("a correct rule fails the check:\n{e}");
    }
    let wrong = OpSample::new(WrongDouble).input(kind.clone(), &[3]);
    let e = check_op_vmap(&wrong).expect_err("the wrong rule passes the check");
    assert!(e.contains("test.wrong_double(f64[3])"), "the error names the op: {e}");
    assert!(e.contains("in_axes [Some(1)]"), "the error names the in_axes: {e}");
    assert!(e.contains("differs from the loop"), "the error is a value mismatch: {e}");
    assert!(!e.contains("in_axes [Some(0)]:"), "batching at the front is right: {e}");

    // For an op that cannot be evaluated only the types are compared; a
    // shape the wrong rule gets wrong is still caught.
    let right = OpSample::new(Double).input(kind.clone(), &[2]).not_evaluable();
    assert_eq!(check_op_vmap(&right), Ok(()));
    let wrong = OpSample::new(WrongDouble).input(kind, &[2]).not_evaluable();
    let e = check_op_vmap(&wrong).expect_err("the wrong rule passes the type check");
    assert!(e.contains("test.wrong_double(f64[2]): vmap with in_axes [Some(1)]"), "{e}");
}
