//! Per-example gradients (`vmap(grad(loss))`) lower to whole-batch
//! products: the optimised, compiled graph has no per-example transpose (a
//! permute that moves only size-1 axes is a reshape) and every matrix
//! product is one GEMM over the batch or a batched outer or
//! matrix-vector product, which the CPU kernel runs as one loop over the
//! batch (large per-example matrix-vector products as one faer call per
//! example, each at memory speed), never a GEMM call per tiny product. Values match a loop of `grad` over
//! the examples.

use anvil::prelude::*;
use anvil::Graph;

/// Deterministic inputs of `shape`.
fn input(shape: &[usize], seed: f64) -> Tensor {
    let n = shape.iter().product::<usize>();
    Tensor::from_vec((0..n).map(|i| (i as f64 * 0.37 + seed).sin()).collect(), shape).unwrap()
}

/// Example `i` of a batch (its leading axis dropped).
fn example(t: &Tensor, i: usize) -> Tensor {
    let per = t.shape()[1..].iter().product::<usize>();
    let v = t.to_vec::<f64>().unwrap();
    Tensor::from_vec(v[i * per..(i + 1) * per].to_vec(), &t.shape()[1..]).unwrap()
}

/// Stacks per-example results along a new leading axis.
fn stack(ts: &[Tensor]) -> Tensor {
    let mut shape = vec![ts.len()];
    shape.extend_from_slice(ts[0].shape());
    Tensor::from_vec(ts.iter().flat_map(|t| t.to_vec::<f64>().unwrap()).collect(), &shape).unwrap()
}

/// How the CPU kernel runs a `matmul` of operands of these shapes, if it is
/// one pass over the batch (see backends/cpu/src/kernels/matmul.rs): a
/// right operand without batch axes folds the batch into one GEMM's rows; a
/// shared matrix against stacked vectors is one GEMM; otherwise outer
/// products (inner size 1) and matrix-vector products (one side a vector)
/// are one loop (or a faer call per example when large). `None`: a GEMM
/// per batch element.
fn matmul_kind(a: &[usize], b: &[usize]) -> Option<&'static str> {
    let m = if a.len() == 1 { 1 } else { a[a.len() - 2] };
    let k = a[a.len() - 1];
    let n = if b.len() == 1 { 1 } else { b[b.len() - 1] };
    match () {
        _ if b.len() <= 2 => Some("one GEMM, batch in the rows"),
        _ if a.len() <= 2 && n == 1 => Some("one GEMM, V Aᵀ"),
        _ if k == 1 => Some("batched outer products"),
        _ if m == 1 || n == 1 => Some("batched matrix-vector products"),
        _ => None,
    }
}

/// Asserts the plan of `g` has no permute and no GEMM-per-example product;
/// returns its graph as text, for messages, and how each `matmul` runs.
fn assert_whole_batch_products(g: &Graph) -> (String, Vec<&'static str>) {
    let plan = anvil::cpu::compile(g).unwrap();
    let pg = plan.graph();
    let mut kinds = Vec::new();
    for (_, n) in pg.iter() {
        assert_ne!(n.op.name(), "permute", "a per-example transpose is left:\n{pg}");
        if n.op.name() == "matmul" {
            let (a, b) = (pg.ty(n.inputs[0]).shape(), pg.ty(n.inputs[1]).shape());
            let kind = matmul_kind(a, b);
            assert!(kind.is_some(), "a GEMM per example, {a:?} @ {b:?}:\n{pg}");
            kinds.extend(kind);
        }
    }
    (format!("{pg}"), kinds)
}

fn count(g: &Graph, name: &str) -> usize {
    g.iter().filter(|(_, n)| n.op.name() == name).count()
}

/// `sum((W x - y)^2)`.
fn linear_loss(w: &Var, x: &Var, y: &Var) -> Var {
    (w.matmul(x) - y).square().sum_all()
}

#[test]
fn linear_model_per_example_gradients_are_one_pass_outer_products() {
    let (batch, din, dout) = (7, 5, 3);
    let (w, xs, ys) =
        (input(&[dout, din], 0.1), input(&[batch, din], 0.2), input(&[batch, dout], 0.3));
    let f = vmap(grad(linear_loss)).in_axes([None, Some(0), Some(0)]);
    let g = anvil::lower(&f, (&w, &xs, &ys)).unwrap();
    // Before the size-1 relayout became a reshape, x's per-example
    // transpose was a permute[0, 2, 1] of [B, din, 1].
    let (text, kinds) = assert_whole_batch_products(&g);
    assert_eq!(count(&g, "matmul") + count(&g, "matmul_t"), 2, "{text}");
    assert_eq!(kinds, ["batched outer products"], "{text}");
    let got = jit(f).eval((&w, &xs, &ys)).unwrap();
    let want: Vec<Tensor> = (0..batch)
        .map(|i| grad(linear_loss).eval((&w, &example(&xs, i), &example(&ys, i))).unwrap())
        .collect();
    got.assert_allclose(&stack(&want), 1e-13, 1e-13);
}

/// W5's loss: `mean((W2 tanh(W1 x + b1) + b2 - y)^2)`.
fn mlp_loss([w1, b1, w2, b2]: &[Var; 4], x: &Var, y: &Var) -> Var {
    let pred = w2.matmul(&(w1.matmul(x) + b1).tanh()) + b2;
    (pred - y).square().mean()
}

#[test]
fn mlp_per_example_gradients_have_no_per_example_products() {
    // out = 1 is W5's shape (its backward pass is a broadcast multiply),
    // out = 3 has a real matrix-vector product through W2.
    for dout in [1, 3] {
        let (batch, din, hidden) = (6, 4, 9);
        let params = [
            input(&[hidden, din], 0.4),
            input(&[hidden], 0.5),
            input(&[dout, hidden], 0.6),
            input(&[dout], 0.7),
        ];
        let (xs, ys) = (input(&[batch, din], 0.8), input(&[batch, dout], 0.9));
        let f = vmap(grad(mlp_loss)).in_axes([None, Some(0), Some(0)]);
        let g = anvil::lower(&f, (&params, &xs, &ys)).unwrap();
        assert_whole_batch_products(&g);
        let got = jit(f).eval((&params, &xs, &ys)).unwrap();
        for i in 0..batch {
            let want = grad(mlp_loss).eval((&params, &example(&xs, i), &example(&ys, i))).unwrap();
            for (g, w) in got.iter().zip(&want) {
                example(g, i).assert_allclose(w, 1e-13, 1e-13);
            }
        }
    }
}

/// `sum((A w - y)^2)` with a per-example design matrix `A`: the gradient
/// `2 Aᵀ r` is a batched matrix-vector product, both operands batched.
fn design_loss(w: &Var, a: &Var, y: &Var) -> Var {
    (a.matmul(w) - y).square().sum_all()
}

#[test]
fn batched_matrix_vector_products_are_one_loop_and_exact() {
    // Sizes straddling the dot product's eight lanes.
    for (m, k) in [(3, 7), (9, 8), (5, 17)] {
        let batch = 4;
        let (w, a, y) = (input(&[k], 1.0), input(&[batch, m, k], 1.1), input(&[batch, m], 1.2));
        let f = vmap(grad(design_loss)).in_axes([None, Some(0), Some(0)]);
        let g = anvil::lower(&f, (&w, &a, &y)).unwrap();
        let (text, kinds) = assert_whole_batch_products(&g);
        assert!(kinds.contains(&"batched matrix-vector products"), "{text}");
        let got = jit(f).eval((&w, &a, &y)).unwrap();
        let want: Vec<Tensor> = (0..batch)
            .map(|i| grad(design_loss).eval((&w, &example(&a, i), &example(&y, i))).unwrap())
            .collect();
        got.assert_allclose(&stack(&want), 1e-13, 1e-13);
        // Per-example Jacobians of A w (a matrix against a batched vector
        // and its transpose), against the loop.
        let jf = vmap(|a: &Var, v: &Var| a.matmul(v)).in_axes([Some(0), Some(0)]);
        let v = input(&[batch, k], 1.3);
        let got = jit(jf).eval((&a, &v)).unwrap();
        let want: Vec<Tensor> = (0..batch)
            .map(|i| {
                jit(|a: &Var, v: &Var| a.matmul(v))
                    .eval((&example(&a, i), &example(&v, i)))
                    .unwrap()
            })
            .collect();
        got.assert_allclose(&stack(&want), 1e-14, 1e-14);
        let vt = input(&[batch, m], 1.4);
        let got = jit(vmap(|v: &Var, a: &Var| v.matmul(a))).eval((&vt, &a)).unwrap();
        let want: Vec<Tensor> = (0..batch)
            .map(|i| {
                jit(|v: &Var, a: &Var| v.matmul(a))
                    .eval((&example(&vt, i), &example(&a, i)))
                    .unwrap()
            })
            .collect();
        got.assert_allclose(&stack(&want), 1e-14, 1e-14);
    }
}

/// Cross-entropy of a linear classifier: `-Σ onehot · log_softmax(W x)`.
fn cross_entropy(w: &Var, x: &Var, onehot: &Var) -> Var {
    -(onehot * &w.matmul(x).log_softmax(-1)).sum_all()
}

#[test]
fn softmax_cross_entropy_per_example_gradients() {
    let (batch, din, classes) = (5, 6, 4);
    let (w, xs) = (input(&[classes, din], 2.0), input(&[batch, din], 2.1));
    let onehot: Vec<f64> = (0..batch * classes)
        .map(|i| f64::from(u8::from(i % classes == (i / classes) % classes)))
        .collect();
    let onehot = Tensor::from_vec(onehot, &[batch, classes]).unwrap();
    let f = vmap(grad(cross_entropy)).in_axes([None, Some(0), Some(0)]);
    let g = anvil::lower(&f, (&w, &xs, &onehot)).unwrap();
    assert_whole_batch_products(&g);
    let got = jit(f).eval((&w, &xs, &onehot)).unwrap();
    let want: Vec<Tensor> = (0..batch)
        .map(|i| grad(cross_entropy).eval((&w, &example(&xs, i), &example(&onehot, i))).unwrap())
        .collect();
    got.assert_allclose(&stack(&want), 1e-13, 1e-13);
}

/// A permute that moves only size-1 axes is computed by the kernel as a
/// shared buffer too (graphs built without the rewrites reach it).
#[test]
fn unit_axis_permutes_keep_their_values_unoptimised() {
    let x = input(&[4, 3, 1], 3.0);
    let f = |x: &Var| x.permute(&[2, 0, 1]).sin() + x.permute(&[0, 2, 1]).sum(&[1]).unsqueeze(0);
    let traced = trace(&f, &x).unwrap();
    assert!(count(&traced, "permute") == 2, "{traced}");
    let raw = anvil::run_graph(&traced, std::slice::from_ref(&x)).unwrap();
    let lowered = anvil::lower(&f, &x).unwrap();
    assert_eq!(count(&lowered, "permute"), 0, "{lowered}");
    let opt = anvil::run_graph(&lowered, std::slice::from_ref(&x)).unwrap();
    raw[0].assert_allclose(&opt[0], 0.0, 0.0);
}
