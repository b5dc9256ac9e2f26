//! Ops are plugins: an op defined here, outside the workspace's op library,
//! with a kernel registered from here, runs like a standard op; an op with no
//! kernel is an error naming it; two kernels for one op are reported with
//! both places.

use anvil::cpu::{kernels, register_kernel, Parallelism};
use anvil::prelude::*;
#[macro_use]
mod common;

use anvil::{Error, Op, Tensor, TensorType};

same_type_op!(
    /// `x * x * x`, a plugin op with a hand-written kernel.
    Cube = "test.cube"
);
same_type_op!(
    /// An op that nobody gave a kernel.
    NoKernel = "test.no_kernel"
);
same_type_op!(
    /// An op registered twice.
    Twice = "test.twice"
);

fn cube_kernel(
    _: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> anvil::Result<Tensor> {
    let v: Vec<f64> = inputs[0].as_slice::<f64>()?.iter().map(|x| x * x * x).collect();
    Tensor::from_vec(v, out.shape())
}

register_kernel!(Cube, cube_kernel);
register_kernel!(Twice, cube_kernel);
register_kernel!(Twice, cube_kernel);

#[test]
fn a_plugin_op_runs_with_its_registered_kernel() {
    let f = jit(|x: &Var| x.apply(Cube, &[]) + 1.0);
    let x = Tensor::from_vec(vec![1.0, 2.0, -3.0], &[3]).unwrap();
    assert_eq!(f.eval(&x).unwrap().to_vec::<f64>().unwrap(), vec![2.0, 9.0, -26.0]);
    let g = trace(&f, &x).unwrap();
    assert!(g.to_string().contains("= test.cube %0"), "{g}");
}

#[test]
fn an_op_without_a_kernel_is_an_error_naming_it() {
    let e = jit(|x: &Var| x.apply(NoKernel, &[])).eval(Tensor::zeros(&[2]).unwrap()).unwrap_err();
    assert!(matches!(e, Error::MissingRule { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("test.no_kernel") && msg.contains("CPU kernel"), "{msg}");
}

#[test]
fn a_duplicate_registration_names_both_places() {
    let e = jit(|x: &Var| x.apply(Twice, &[])).eval(Tensor::zeros(&[2]).unwrap()).unwrap_err();
    assert!(matches!(e, Error::DuplicateRegistration { .. }), "{e:?}");
    let msg = e.to_string();
    // Both registrations are on consecutive lines of this file.
    let lines: Vec<&str> = msg.matches("tests/registry.rs:").collect();
    assert_eq!(lines.len(), 2, "{msg}");
    assert!(msg.contains("CPU kernel") && msg.contains("Twice"), "{msg}");
    assert!(kernels().check().is_err());
}

/// One instance of every standard op type: the conformance samples'.
fn standard_ops() -> Vec<Box<dyn Op>> {
    anvil_testing::standard_samples().into_iter().map(|s| s.op).collect()
}

#[test]
fn every_standard_op_runs_on_the_cpu() {
    let table = kernels();
    let ops = standard_ops();
    for op in &ops {
        match table.lookup(op.as_ref()) {
            Ok(Some(_)) => {}
            Ok(None) => assert!(
                op.elementwise_math().is_some(),
                "{} has neither a CPU kernel nor block math",
                op.name()
            ),
            Err(e) => panic!("{e}"),
        }
    }
    // Every kernel the backend registers is for an op of the samples (or
    // for an op the backend builds itself and no user graph holds).
    let known: std::collections::HashSet<_> = ops.iter().map(|o| o.op_type()).collect();
    for e in table.entries().filter(|e| e.location.starts_with("backends/cpu/")) {
        let t = (e.op_type)();
        assert!(
            known.contains(&t) || anvil::cpu::fusion::is_internal(t),
            "the CPU backend registers a kernel for {}, which no sample covers",
            e.op_name
        );
    }
}

#[test]
fn every_standard_op_with_operands_has_a_vmap_rule() {
    for s in anvil_testing::standard_samples() {
        // Ops without operands (constants, full, iota, seeds) are never batched.
        if !s.inputs.is_empty() {
            let rule = anvil::core::vmap_rules().lookup(s.op.as_ref()).unwrap();
            assert!(rule.is_some(), "{} has no vmap rule", s.op.name());
        }
    }
}
