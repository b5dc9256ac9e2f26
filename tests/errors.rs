//! User mistakes come back as typed errors that name the op, the shapes and
//! the argument — never as panics.

use anvil::prelude::*;
use anvil::{Error, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape).unwrap()
}

/// Asserts that the message names every one of `parts`.
#[track_caller]
fn names(e: &Error, parts: &[&str]) {
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "error message {msg:?} does not name {p:?}");
    }
}

#[test]
fn mismatched_broadcast_shapes() {
    let e = jit(|a: &Var, b: &Var| a * b).eval((&t(&[2, 3]), &t(&[4, 3]))).unwrap_err();
    assert!(matches!(e, Error::Broadcast { .. }), "{e:?}");
    names(&e, &["mul", "[2, 3]", "[4, 3]", "argument 1"]);
}

#[test]
fn broadcast_error_inside_a_longer_chain_is_the_first_one() {
    // The failing add poisons everything after it; the first error is reported.
    let f = jit(|a: &Var, b: &Var| ((a + b).sin() * 2.0).sum(&[0]));
    let e = f.eval((&t(&[3]), &t(&[5]))).unwrap_err();
    names(&e, &["add", "[3]", "[5]"]);
}

#[test]
fn axis_out_of_range() {
    let e = jit(|x: &Var| x.sum(&[2])).eval(t(&[2, 3])).unwrap_err();
    assert!(matches!(e, Error::AxisOutOfRange { axis: 2, .. }), "{e:?}");
    names(&e, &["sum", "axis 2", "[2, 3]", "argument 0"]);
    let e = jit(|x: &Var| x.softmax(-3)).eval(t(&[2, 3])).unwrap_err();
    names(&e, &["axis -3", "[2, 3]"]);
    let e = jit(|x: &Var| x.unsqueeze(4)).eval(t(&[2, 3])).unwrap_err();
    names(&e, &["unsqueeze", "axis 4"]);
    let e = jit(|x: &Var| x.argmax(5, false)).eval(t(&[2])).unwrap_err();
    names(&e, &["argmax", "axis 5"]);
}

#[test]
fn reshape_to_a_different_size() {
    let e = jit(|x: &Var| x.reshape(&[4, 2])).eval(t(&[2, 3])).unwrap_err();
    names(&e, &["reshape", "[2, 3]", "[4, 2]", "argument 0"]);
    let e = jit(|x: &Var| x.reshape(&[-1, -1])).eval(t(&[2, 3])).unwrap_err();
    names(&e, &["reshape", "more than one -1"]);
}

#[test]
fn matmul_with_mismatched_inner_dimensions() {
    let e = jit(|a: &Var, b: &Var| a.matmul(b)).eval((&t(&[2, 3]), &t(&[4, 5]))).unwrap_err();
    names(&e, &["matmul", "[2, 3]", "[4, 5]", "argument 0 has 3", "argument 1 has 4"]);
    let e = jit(|a: &Var, b: &Var| a.matmul(b)).eval((&t(&[2, 2, 3]), &t(&[3, 3, 1]))).unwrap_err();
    names(&e, &["matmul", "batch"]);
}

#[test]
fn gather_index_out_of_bounds() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let idx = Tensor::from_vec(vec![0i64, 3], &[2]).unwrap();
    let e = jit(|x: &Var, i: &Var| x.take(i, 0)).eval((&x, &idx)).unwrap_err();
    assert!(matches!(e, Error::IndexOutOfBounds { index: 3, size: 3, .. }), "{e:?}");
    names(&e, &["take", "index 3", "axis 0", "size 3", "indices", "[3]"]);
    let e = jit(|x: &Var| x.index(0, &[-4])).eval(&x).unwrap_err();
    names(&e, &["take", "index -4"]);
    let e = jit(|x: &Var, i: &Var| x.take(i, 0)).eval((&x, &x)).unwrap_err();
    names(&e, &["take", "indices", "f64", "i64"]);
}

#[test]
fn wrong_number_of_arguments() {
    let f = jit(|a: &Var, b: &Var| a + b);
    let e = f.eval(t(&[2])).unwrap_err();
    assert!(matches!(e, Error::Arity { expected: 2, got: 1, .. }), "{e:?}");
    names(&e, &["expected 2 arguments, got 1"]);
    let e = f.eval((&t(&[2]), &t(&[2]), &t(&[2]))).unwrap_err();
    names(&e, &["expected 2 arguments, got 3"]);
}

#[test]
fn wrong_dtype_of_arguments() {
    let x = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    // (`x.sin()` computes an integer's sine in f64, as JAX; the op itself
    // takes floats only.)
    let e = jit(|x: &Var| x.apply(anvil::ops::elementwise::Sin, &[])).eval(&x).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e:?}");
    names(&e, &["sin", "argument 0", "i64", "float"]);
    // (Operands of two dtypes promote, as in JAX; an op applied directly
    // to two dtypes is an error naming both.)
    let y = Tensor::zeros(&[2]).unwrap().cast(DType::F32);
    let add = |a: &Var, b: &Var| a.apply(anvil::ops::elementwise::Add, &[b]);
    let e = jit(add).eval((&Tensor::zeros(&[2]).unwrap(), &y)).unwrap_err();
    names(&e, &["add", "argument 1", "f32", "f64"]);
}

#[test]
fn a_compiled_plan_rejects_arguments_of_another_signature() {
    let g = anvil::trace(&|x: &Var| x.exp(), t(&[2])).unwrap();
    let plan = anvil::cpu::compile(&g).unwrap();
    let ctx = anvil::Parallelism::default();
    let e = plan.run(&[t(&[3])], &ctx).unwrap_err();
    names(&e, &["argument 0", "[3]", "[2]"]);
    let e = plan.run(&[t(&[2]).cast(DType::F32)], &ctx).unwrap_err();
    names(&e, &["argument 0", "f32", "f64"]);
    let e = plan.run(&[], &ctx).unwrap_err();
    names(&e, &["expected 1 arguments, got 0"]);
}

#[test]
fn other_invalid_arguments() {
    let e = jit(|x: &Var| x.slice_axis(0, None, None, 0)).eval(t(&[3])).unwrap_err();
    names(&e, &["slice", "step"]);
    let e = jit(|x: &Var| x.permute(&[0, 0])).eval(t(&[2, 2])).unwrap_err();
    names(&e, &["permute", "not a permutation"]);
    let e = jit(|x: &Var| x.squeeze(&[0])).eval(t(&[2, 1])).unwrap_err();
    names(&e, &["squeeze", "axis 0", "size 2"]);
    let e = jit(|x: &Var| x.broadcast_to(&[3, 2])).eval(t(&[3])).unwrap_err();
    names(&e, &["broadcast_to", "[3]", "[3, 2]"]);
    let e = jit(|xs: &[Var]| vec![anvil::concatenate(&[&xs[0], &xs[1]], 0)])
        .eval(vec![t(&[2, 3]), t(&[2, 4])])
        .unwrap_err();
    names(&e, &["concatenate", "[2, 3]", "[2, 4]", "argument 1"]);
    let e = jit(|c: &Var, a: &Var| c.select(a, a)).eval((&t(&[2]), &t(&[2]))).unwrap_err();
    names(&e, &["select", "cond", "bool"]);
    let e = jit(|x: &Var| x.pad(&[(usize::MAX, 1)], 0.0)).eval(t(&[2])).unwrap_err();
    names(&e, &["pad", "widths", "[2]"]);
    assert!(Tensor::from_vec(vec![1.0, 2.0], &[3]).is_err());
}

#[test]
fn a_var_from_another_trace_is_an_error() {
    use std::cell::RefCell;
    let stash: RefCell<Option<Var>> = RefCell::new(None);
    let keep = jit(|x: &Var| {
        *stash.borrow_mut() = Some(x.clone());
        x.clone()
    });
    keep.eval(t(&[2])).unwrap();
    let leak = jit(|x: &Var| x + stash.borrow().as_ref().unwrap());
    let e = leak.eval(t(&[2])).unwrap_err();
    assert!(matches!(e, Error::ForeignVar { .. }), "{e:?}");
    names(&e, &["add", "another trace"]);
}

// ------------------------------------------- errors name what the user wrote

#[test]
fn composite_functions_report_themselves() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let e = jit(|x: &Var| x.logsumexp(&[2], false)).eval(&x).unwrap_err();
    names(&e, &["logsumexp", "axis 2", "[3]"]);
    let e = jit(|x: &Var| x.softmax(1)).eval(&x).unwrap_err();
    names(&e, &["softmax", "axis 1"]);
    let e = jit(|x: &Var| x.mean_axes(&[4], false)).eval(&x).unwrap_err();
    names(&e, &["mean", "axis 4"]);
    let e = jit(|x: &Var| x.std(&[1], false)).eval(&x).unwrap_err();
    names(&e, &["std", "axis 1"]);
    let e = jit(|x: &Var, y: &Var| stack(&[x, y], 3)).eval((&x, &x)).unwrap_err();
    names(&e, &["stack", "axis 3", "[3]"]);
    let e = jit(|x: &Var, y: &Var| stack(&[x, y], 0)).eval((&x, &t(&[2]))).unwrap_err();
    names(&e, &["stack", "argument 1 has shape [2]", "[3]", "one shape"]);
    let e = jit(|x: &Var| x + eye(1 << 32).sum_all()).eval(&x).unwrap_err();
    names(&e, &["eye", "[4294967296, 4294967296]", "more elements than memory can address"]);
}

#[test]
fn a_bad_index_under_grad_names_take() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let idx = Tensor::from_vec(vec![0i64, 3], &[2]).unwrap();
    // The gradient does not need the take's values, only its transpose (a
    // scatter-add): the error still names the take the user wrote.
    let e = grad(|x: &Var, i: &Var| x.take(i, 0).sum_all()).eval((&x, &idx)).unwrap_err();
    assert!(matches!(e, Error::IndexOutOfBounds { index: 3, size: 3, .. }), "{e:?}");
    names(&e, &["take", "index 3", "size 3", "transpose of take"]);
    let e = jacrev(|x: &Var, i: &Var| x.take(i, 0)).eval((&x, &idx)).unwrap_err();
    names(&e, &["take", "index 3"]);
}

#[test]
fn tangents_and_cotangents_of_the_wrong_shape_name_the_argument() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let (_, lin) = anvil::linearize(&|x: &Var| x.sin(), &x).unwrap();
    let e = lin.eval(t(&[4])).unwrap_err();
    names(&e, &["linearized", "tangent for argument 0", "f64[4]", "f64[3]"]);
    let (_, pullback) = vjp(&|x: &Var| x.sin().sum(&[0]), &x).unwrap();
    let e = pullback.eval(t(&[2])).unwrap_err();
    names(&e, &["pullback", "cotangent", "f64[2]", "f64[]"]);
}

#[test]
fn vmap_settings_are_checked() {
    let e = vmap(|x: &Var| x * 2.0).chunk_size(0).eval(t(&[4])).unwrap_err();
    names(&e, &["vmap", "chunk_size", "at least 1"]);
    let e = vmap(|x: &Var| x * 2.0).in_axes(None).axis_size(usize::MAX).eval(t(&[2])).unwrap_err();
    names(&e, &["vmap", "axis_size", "more elements than memory can address"]);
    let e = vmap(|x: &Var| x * 2.0).in_axes(None).eval(t(&[2])).unwrap_err();
    names(&e, &["vmap", "axis_size must be given"]);
}

/// A plugin op whose CPU kernel panics (a bug in the plugin).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PanickingKernel;

impl anvil::core::Op for PanickingKernel {
    fn name(&self) -> &'static str {
        "plug.panics"
    }
    fn infer(&self, inputs: &[anvil::core::TensorType]) -> anvil::Result<anvil::core::TensorType> {
        anvil::core::op::expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
}

fn panicking_kernel(
    _: &dyn anvil::core::Op,
    inputs: &[&Tensor],
    _: &anvil::core::TensorType,
    _: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    let v = inputs[0].to_vec::<f64>()?;
    // An out-of-range index: the kind of bug that panics.
    let k = v.len() + 2;
    Tensor::from_vec(vec![v[k]], &[1])
}
anvil::cpu::register_kernel!(PanickingKernel, panicking_kernel);

/// A kernel that panics is an error naming its op, and the process (and the
/// same compiled function) goes on working.
#[test]
fn a_panicking_kernel_is_an_error_naming_its_op() {
    let f = jit(|x: &Var| Var::apply_op(Box::new(PanickingKernel), &[&x.sin()]) * 2.0);
    for _ in 0..2 {
        let e = f.eval(t(&[3])).unwrap_err();
        assert!(matches!(e, Error::Panicked { .. }), "{e:?}");
        assert_eq!(e.op(), Some("plug.panics"));
        names(&e, &["plug.panics", "CPU kernel", "panicked", "index out of bounds"]);
    }
    // Other functions go on running.
    let g = jit(|x: &Var| x.sin() * 2.0);
    assert_eq!(g.eval(t(&[3])).unwrap().to_vec::<f64>().unwrap(), vec![0.0; 3]);
}

/// A plugin op whose rules panic (bugs in the plugin): its shape rule on
/// a vector of 7, its batching and forward-mode rules always.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PanickingRules;

impl anvil::core::Op for PanickingRules {
    fn name(&self) -> &'static str {
        "plug.bad_rules"
    }
    fn infer(&self, inputs: &[anvil::core::TensorType]) -> anvil::Result<anvil::core::TensorType> {
        anvil::core::op::expect_arity(self, inputs, 1)?;
        let shape = inputs[0].shape();
        // An out-of-range index: the kind of bug that panics.
        let probe = [0usize; 3];
        let _ = probe[shape.iter().sum::<usize>().saturating_sub(4)];
        Ok(inputs[0].clone())
    }
}

fn panicking_vmap(
    _: &dyn anvil::core::Op,
    _: &[anvil::core::Batched],
    _: usize,
) -> anvil::Result<anvil::core::Batched> {
    panic!("the vmap rule's bug")
}

fn panicking_jvp(
    _: &dyn anvil::core::Op,
    _: &[Var],
    _: &[Option<Var>],
    _: &Var,
) -> anvil::Result<Option<Var>> {
    panic!("the jvp rule's bug")
}

fn identity_kernel(
    _: &dyn anvil::core::Op,
    inputs: &[&Tensor],
    _: &anvil::core::TensorType,
    _: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    Ok(inputs[0].clone())
}

anvil::core::register_rule!(VmapRule, PanickingRules, panicking_vmap);
anvil::core::register_rule!(JvpRule, PanickingRules, panicking_jvp);
anvil::cpu::register_kernel!(PanickingRules, identity_kernel);

/// A rule or a shape rule that panics is an error naming its op and the
/// kind of rule, returned by the transform (or the trace) that ran it; the
/// op, and other functions, go on working where its rules are not needed.
#[test]
fn a_panicking_rule_is_an_error_naming_its_op() {
    let f = |x: &Var| Var::apply_op(Box::new(PanickingRules), &[&x.sin()]).sum_all();
    let x = t(&[2, 3]);
    let cases = [
        (vmap(f).eval(&x).unwrap_err(), "vmap rule", "the vmap rule's bug"),
        (grad(f).eval(&x).unwrap_err(), "jvp rule", "the jvp rule's bug"),
        (jvp(f).eval((&x, &x)).unwrap_err(), "jvp rule", "the jvp rule's bug"),
        (jit(f).eval(t(&[7])).unwrap_err(), "shape rule", "index out of bounds"),
    ];
    for (e, what, msg) in cases {
        assert!(matches!(e, Error::Panicked { .. }), "{e:?}");
        assert_eq!(e.op(), Some("plug.bad_rules"), "{e}");
        names(&e, &["plug.bad_rules", what, "panicked", msg]);
    }
    assert_eq!(jit(f).eval(&x).unwrap().to_vec::<f64>().unwrap(), vec![0.0]);
    let g = vmap(|x: &Var| x.sin() * 2.0).eval(&x).unwrap();
    assert_eq!(g.shape(), [2, 3]);
}
