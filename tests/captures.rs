//! Tensors a closure captures, used directly in traced arithmetic and
//! methods (`&x * &w`, `x.matmul(&w)`): the same results as passing them as
//! arguments, under `vmap`, `grad`, `jacfwd`, `jit` and inside control
//! flow; large ones become implicit parameters of the compiled call
//! rather than constants of its graph.

use anvil::core::trace::LIFT_MIN_ELEMS;
use anvil::core::{trace_lifted, Constant};
use anvil::prelude::*;
use anvil::TreeDef;

fn rand(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let v = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// An MLP's weights: `w1` large enough to be lifted, `b1` and `w2` small.
struct Weights {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

fn weights() -> Weights {
    let w = Weights { w1: rand(&[16, 8], 1), b1: rand(&[8], 2), w2: rand(&[8], 3) };
    assert!(w.w1.numel() >= LIFT_MIN_ELEMS && w.b1.numel() < LIFT_MIN_ELEMS);
    w
}

/// The loss with every weight an argument.
fn loss_explicit(x: &Var, w1: &Var, b1: &Var, w2: &Var) -> Var {
    ((x.matmul(w1) + b1).tanh() * w2).sum_all().square()
}

#[test]
fn grad_with_captured_weights_equals_grad_with_weight_arguments() {
    let Weights { w1, b1, w2 } = weights();
    let x = rand(&[5, 16], 4);
    // As a user writes it: the weights are just used.
    let loss = |x: &Var| ((x.matmul(&w1) + &b1).tanh() * &w2).sum_all().square();
    let explicit = |x: &Var, w1: &Var, b1: &Var, w2: &Var| loss_explicit(x, w1, b1, w2);
    let args = (&x, &w1, &b1, &w2);
    assert_eq!(loss.eval(&x).unwrap(), explicit.eval(args).unwrap());
    let g = grad(loss).eval(&x).unwrap();
    let g_explicit = grad(explicit).eval(args).unwrap();
    assert!(g.allclose(&g_explicit, 1e-14, 1e-14));
    // jit: the second call runs the cached plan with the captured tensors.
    let jitted = jit(grad(loss));
    assert!(jitted.eval(&x).unwrap().allclose(&g_explicit, 1e-14, 1e-14));
    let x2 = rand(&[5, 16], 5);
    let g2 = jitted.eval(&x2).unwrap();
    assert_eq!(jitted.cache_len(), 1);
    assert!(g2.allclose(&grad(explicit).eval((&x2, &w1, &b1, &w2)).unwrap(), 1e-14, 1e-14));
}

#[test]
fn vmap_and_jacfwd_treat_captured_tensors_as_shared_constants() {
    let Weights { w1, b1, .. } = weights();
    let xs = rand(&[6, 16], 6);
    let layer = |x: &Var| (x.matmul(&w1) + &b1).tanh();
    let layer_explicit = |x: &Var, w1: &Var, b1: &Var| (x.matmul(w1) + b1).tanh();
    // vmap: the capture is unbatched.
    let batched = vmap(layer).eval(&xs).unwrap();
    let expected =
        vmap(layer_explicit).in_axes((Some(0), None, None)).eval((&xs, &w1, &b1)).unwrap();
    assert!(batched.allclose(&expected, 1e-15, 1e-15));
    // jacfwd = vmap(jvp): the capture has no tangent.
    let x = xs.select_axis(0, 0).unwrap();
    let j = jacfwd(layer).eval(&x).unwrap();
    let j_explicit = jacfwd(layer_explicit).eval((&x, &w1, &b1)).unwrap();
    assert_eq!(j.shape(), &[8, 16]);
    assert!(j.allclose(&j_explicit, 1e-14, 1e-14));
    // Per-example gradients: vmap of grad with the weights captured.
    let per_example = vmap(grad(|x: &Var| layer(x).sum_all())).eval(&xs).unwrap();
    let explicit = vmap(grad(|x: &Var, w1: &Var, b1: &Var| layer_explicit(x, w1, b1).sum_all()))
        .in_axes((Some(0), None, None))
        .eval((&xs, &w1, &b1))
        .unwrap();
    assert!(per_example.allclose(&explicit, 1e-14, 1e-14));
}

#[test]
fn tensors_work_on_either_side_of_every_operator_and_in_methods() {
    let w = rand(&[4, 4], 7);
    let x = rand(&[4, 4], 8);
    let f = |x: &Var| {
        let a = x * &w;
        let b = &w + x;
        let c = x - &w;
        let d = &w / (x * x + 1.0);
        let e = x.matmul(&w) + w.clone();
        let m = x.ge(&w).select(&w, x);
        (a, b, c, d, e, m)
    };
    let (a, b, c, d, e, m) = f.eval(&x).unwrap();
    // The eager operators compute the same thing on tensors.
    assert_eq!(a, &x * &w);
    assert_eq!(b, &w + &x);
    assert_eq!(c, &x - &w);
    assert!(d.allclose(&(&w / &(&(&x * &x) + 1.0)), 1e-15, 0.0));
    assert!(e.allclose(&(&x.matmul(&w).unwrap() + &w), 1e-15, 1e-15));
    assert_eq!(m, x.minimum(&w).unwrap()); // where x >= w take w, else x
}

#[test]
fn large_captures_are_inputs_of_the_compiled_call_small_ones_constants() {
    let Weights { w1, b1, .. } = weights();
    let x = rand(&[3, 16], 9);
    // w1 used twice (and through a clone): one input.
    let w1_again = w1.clone();
    let f = jit(|x: &Var| (x.matmul(&w1) + &b1).tanh().sum_all() + x.matmul(&w1_again).sum_all());
    let def = TreeDef::Tuple(vec![TreeDef::Leaf]);
    let traced = trace_lifted(&f, &def, &[x.ty()]).unwrap();
    assert_eq!(traced.lifted.len(), 1);
    assert!(traced.lifted[0].same_buffer(&w1));
    assert_eq!(traced.graph.inputs().len(), 2);
    let constants: Vec<usize> = traced
        .graph
        .nodes()
        .iter()
        .filter_map(|n| n.op.downcast_ref::<Constant>().map(|c| c.value.numel()))
        .collect();
    assert!(constants.iter().all(|&n| n < LIFT_MIN_ELEMS), "{constants:?}");
    assert!(constants.contains(&b1.numel()), "the small bias stays a constant: {constants:?}");
    // The compiled call passes it in: results equal the explicit form.
    let explicit =
        |x: &Var, w: &Var, b: &Var| (x.matmul(w) + b).tanh().sum_all() + x.matmul(w).sum_all();
    assert!(f.eval(&x).unwrap().allclose(&explicit.eval((&x, &w1, &b1)).unwrap(), 1e-14, 1e-14));
    // `trace` (printing, analysis) keeps constants: a graph on its own.
    assert_eq!(trace(&f, &x).unwrap().inputs().len(), 1);
}

#[test]
fn captured_tensors_reach_control_flow_bodies() {
    let Weights { w1, .. } = weights();
    let w = w1.reshape(&[8, 16]).unwrap().matmul(&w1).unwrap(); // [8, 8], 64 elements: lifted
    let x = rand(&[8], 10);
    let f = |x: &Var| {
        let pred = x.sum_all().gt(&x.sum_all().zeros_like());
        let y = cond(&pred, |u: &Var| u.matmul(&w).sin(), |u: &Var| -u.matmul(&w), x)?;
        let (_, z) = scan(|c: &Var, _: &Var| (c.matmul(&w).tanh(), c.sum_all()), &y, x)?;
        Ok((y * &w.sum(&[0]).unwrap()).sum_all() + z.sum_all())
    };
    let f_explicit = |x: &Var, w: &Var| {
        let pred = x.sum_all().gt(&x.sum_all().zeros_like());
        let wc = w.clone();
        let y = cond(&pred, |u: &Var| u.matmul(w).sin(), move |u: &Var| -u.matmul(&wc), x)?;
        let (_, z) = scan(|c: &Var, _: &Var| (c.matmul(w).tanh(), c.sum_all()), &y, x)?;
        Ok((y * w.sum(&[0])).sum_all() + z.sum_all())
    };
    let g = grad(f).eval(&x).unwrap();
    let g_explicit = grad(f_explicit).eval((&x, &w)).unwrap();
    assert!(g.allclose(&g_explicit, 1e-13, 1e-13));
}

#[test]
fn sparse_jacobians_of_functions_with_captured_tensors() {
    use anvil::sparse::sparse_jacfwd;
    let w = rand(&[100], 11);
    let x = rand(&[100], 12);
    let f = |x: &Var| (x * &w).sin();
    let j = sparse_jacfwd(f).eval(&x).unwrap();
    assert_eq!(j.pattern().nnz(), 100); // diagonal: w is a constant, not a variable
    let dense = jacfwd(f).eval(&x).unwrap();
    assert!(j.to_dense().unwrap().allclose(&dense, 1e-14, 1e-14));
}
