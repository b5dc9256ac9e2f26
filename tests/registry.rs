//! Ops are plugins: an op defined here, outside the workspace's op library,
//! with a kernel registered from here, runs like a standard op; an op with no
//! kernel is an error naming it; two kernels for one op are reported with
//! both places.

use anvil::cpu::{kernels, register_kernel, Ctx};
use anvil::prelude::*;
use anvil::{core::op::expect_arity, Error, Op, Tensor, TensorType};

/// `x * x * x`, a plugin op with a hand-written kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Cube;

impl Op for Cube {
    fn name(&self) -> &'static str {
        "test.cube"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
}

fn cube_kernel(_: &dyn Op, inputs: &[&Tensor], out: &TensorType, _: &Ctx) -> anvil::Result<Tensor> {
    let v: Vec<f64> = inputs[0].as_slice::<f64>()?.iter().map(|x| x * x * x).collect();
    Tensor::from_vec(v, &out.shape)
}

register_kernel!(Cube, cube_kernel);

/// An op that nobody gave a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct NoKernel;

impl Op for NoKernel {
    fn name(&self) -> &'static str {
        "test.no_kernel"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
}

/// An op registered twice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Twice;

impl Op for Twice {
    fn name(&self) -> &'static str {
        "test.twice"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
}

register_kernel!(Twice, cube_kernel);
register_kernel!(Twice, cube_kernel);

#[test]
fn a_plugin_op_runs_with_its_registered_kernel() {
    let f = jit(|x: &Var| x.apply(Cube, &[]) + 1.0);
    let x = Tensor::from_vec(vec![1.0, 2.0, -3.0], &[3]).unwrap();
    assert_eq!(f.call(&x).unwrap().to_vec::<f64>().unwrap(), vec![2.0, 9.0, -26.0]);
    let g = trace(&f, &x).unwrap();
    assert!(g.to_string().contains("= test.cube %0"), "{g}");
}

#[test]
fn an_op_without_a_kernel_is_an_error_naming_it() {
    let e = jit(|x: &Var| x.apply(NoKernel, &[])).call(&Tensor::zeros(&[2])).unwrap_err();
    assert!(matches!(e, Error::MissingRule { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("test.no_kernel") && msg.contains("CPU kernel"), "{msg}");
}

#[test]
fn a_duplicate_registration_names_both_places() {
    let e = jit(|x: &Var| x.apply(Twice, &[])).call(&Tensor::zeros(&[2])).unwrap_err();
    assert!(matches!(e, Error::DuplicateRegistration { .. }), "{e:?}");
    let msg = e.to_string();
    // Both registrations are on consecutive lines of this file.
    let lines: Vec<&str> = msg.matches("tests/registry.rs:").collect();
    assert_eq!(lines.len(), 2, "{msg}");
    assert!(msg.contains("CPU kernel") && msg.contains("Twice"), "{msg}");
    assert!(kernels().check().is_err());
}

#[test]
fn every_standard_op_has_exactly_one_kernel() {
    // The duplicates in this binary are the test's own `Twice`; nothing else.
    let table = kernels();
    for e in table.entries() {
        assert_ne!(e.op_name, "", "kernel registered without a name at {}", e.location);
    }
    assert!(table.entries().count() >= 50, "only {} kernels registered", table.entries().count());
}
