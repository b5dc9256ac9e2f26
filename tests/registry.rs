//! Ops are plugins: an op defined here, outside the workspace's op library,
//! with a kernel registered from here, runs like a standard op; an op with no
//! kernel is an error naming it; two kernels for one op are reported with
//! both places.

use anvil::cpu::{kernels, register_kernel, Ctx};
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

fn cube_kernel(_: &dyn Op, inputs: &[&Tensor], out: &TensorType, _: &Ctx) -> anvil::Result<Tensor> {
    let v: Vec<f64> = inputs[0].as_slice::<f64>()?.iter().map(|x| x * x * x).collect();
    Tensor::from_vec(v, &out.shape)
}

register_kernel!(Cube, cube_kernel);
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

/// One instance of every standard op type.
fn standard_ops() -> Vec<Box<dyn Op>> {
    use anvil::ops::{constant::*, elementwise::*, index::*, matmul::*, movement::*, reduce::*};
    use anvil::{Scalar, SliceSpec};
    let axes = || vec![0];
    vec![
        Box::new(Neg),
        Box::new(Sin),
        Box::new(Cos),
        Box::new(Tan),
        Box::new(Exp),
        Box::new(Log),
        Box::new(Log1p),
        Box::new(Expm1),
        Box::new(Sqrt),
        Box::new(Rsqrt),
        Box::new(Recip),
        Box::new(Tanh),
        Box::new(Logistic),
        Box::new(Abs),
        Box::new(Sign),
        Box::new(Floor),
        Box::new(Ceil),
        Box::new(Round),
        Box::new(Erf),
        Box::new(StopGradient),
        Box::new(Add),
        Box::new(Sub),
        Box::new(Mul),
        Box::new(Div),
        Box::new(Pow),
        Box::new(Max),
        Box::new(Min),
        Box::new(Atan2),
        Box::new(Lt),
        Box::new(Le),
        Box::new(Gt),
        Box::new(Ge),
        Box::new(Eq),
        Box::new(Ne),
        Box::new(Select),
        Box::new(Cast { dtype: DType::F32 }),
        Box::new(Reshape { shape: vec![1] }),
        Box::new(Permute { perm: vec![0] }),
        Box::new(BroadcastTo { shape: vec![1] }),
        Box::new(Pad { widths: vec![(0, 0)], value: Scalar::F64(0.0) }),
        Box::new(Slice { specs: vec![SliceSpec::FULL] }),
        Box::new(Concatenate { axis: 0 }),
        Box::new(ReduceSum { axes: axes(), keepdims: false }),
        Box::new(ReduceMax { axes: axes(), keepdims: false }),
        Box::new(ReduceMin { axes: axes(), keepdims: false }),
        Box::new(ReduceProd { axes: axes(), keepdims: false }),
        Box::new(ArgReduce { axis: 0, keepdims: false, max: true }),
        Box::new(Matmul),
        Box::new(anvil::ops::linalg::Solve),
        Box::new(Take::new(0)),
        Box::new(ScatterAdd::new(0, 1)),
        Box::new(Full { shape: vec![], value: Scalar::F64(0.0) }),
        Box::new(Iota { shape: vec![1], axis: 0, dtype: DType::F64 }),
        Box::new(anvil::core::Constant { value: Tensor::scalar(0.0) }),
        Box::new(anvil::ops::control::Map { body: body(), mapped: vec![true], size: 3 }),
        Box::new(anvil::ops::control::CustomJvpCall { primal: body(), jvp: body() }),
        Box::new(anvil::ops::control::CustomVjpCall { primal: body(), fwd: body(), bwd: body() }),
        Box::new(anvil::ops::control::CustomVjpTangent {
            bwd: body(),
            residuals: 0,
            out: Tensor::zeros(&[2]).ty(),
        }),
    ]
}

/// A small traced graph, for the ops that hold sub-graphs.
fn body() -> std::sync::Arc<anvil::Graph> {
    std::sync::Arc::new(trace(&|x: &Var| x.sin(), &Tensor::zeros(&[2])).unwrap())
}

#[test]
fn every_standard_op_has_exactly_one_kernel() {
    let table = kernels();
    let ops = standard_ops();
    for op in &ops {
        match table.lookup(op.as_ref()) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("{} has no CPU kernel", op.name()),
            Err(e) => panic!("{e}"),
        }
    }
    // The list above is complete: every kernel the backend registers is for one of these ops.
    // (`Fused` is the backend's own: the compiler builds it, no user graph holds it.)
    let backend = table
        .entries()
        .filter(|e| e.location.starts_with("backends/cpu/") && !e.location.contains("fusion"))
        .count();
    assert_eq!(
        backend,
        ops.len(),
        "the CPU backend registers kernels for ops missing from standard_ops()"
    );
}

#[test]
fn every_standard_op_with_operands_has_a_vmap_rule() {
    for op in standard_ops() {
        // Ops without operands (constants, full, iota) are never batched.
        let takes_operands = op.infer(&[]).is_err();
        if takes_operands {
            let rule = anvil::core::vmap_rules().lookup(op.as_ref()).unwrap();
            assert!(rule.is_some(), "{} has no vmap rule", op.name());
        }
    }
}
