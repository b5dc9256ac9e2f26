//! `vmap` against loops over slices, nesting, graph structure and errors.

use anvil::prelude::*;
use anvil::Tensor;
use anvil_testing::check_vmap;

/// Deterministic inputs, uniform in [-1, 1).
use anvil_testing::random_tensor as rand;

/// Inserts a batch axis of size `b` at `axis` into an element shape.
fn batched(shape: &[usize], axis: usize, b: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s.insert(axis, b);
    s
}

#[track_caller]
fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

const B: usize = 3;

/// Unary functions of one `[4, 5]` element, batched at the front, middle and back.
#[test]
fn unary_programs_match_loops() {
    type F1 = fn(&Var) -> Var;
    let fs: Vec<(&str, F1)> = vec![
        ("sin*exp", |x| x.sin() * x.exp()),
        ("sum axis 1", |x| x.sum(&[1])),
        ("sum keepdims", |x| x.sum_keepdims(&[0])),
        ("max -1", |x| x.max(&[-1], false)),
        ("argmax 0", |x| x.argmax(0, false).cast(DType::F64)),
        ("argmin keepdims", |x| x.argmin(1, true).cast(DType::F64)),
        ("reshape", |x| x.reshape(&[2, -1])),
        ("transpose", |x| x.transpose()),
        ("broadcast", |x| x.broadcast_to(&[2, 4, 5])),
        ("pad", |x| x.pad(&[(1, 0), (0, 2)], 0.5)),
        ("slice", |x| x.slice_axis(1, Some(-1), None, -2)),
        ("flip", |x| x.flip(&[0, 1])),
        ("squeeze/unsqueeze", |x| x.unsqueeze(1).squeeze(&[1])),
        ("softmax", |x| x.softmax(-1)),
        ("logsumexp", |x| x.logsumexp(&[0], false)),
        ("var", |x| x.var(&[0, 1], true)),
        ("self matmul", |x| x.matmul(&x.transpose())),
        ("vector matmul", |x| x.sum(&[0]).matmul(&x.transpose())),
        ("concat self", |x| anvil::concatenate(&[x, &x.exp()], 1)),
        ("stack", |x| anvil::stack(&[x, x], -1)),
        ("select", |x| x.gt(&x.scalar_like(0.0)).select(x, &x.zeros_like())),
    ];
    for (name, f) in fs {
        for axis in 0..3 {
            let x = rand(&batched(&[4, 5], axis, B), axis as u64);
            if let Err(e) = check_vmap(&f, &[x], &[Some(axis)], 1e-12, 1e-12) {
                panic!("{name}, batch axis {axis}: {e}");
            }
        }
    }
}

/// Binary functions with every combination of batched and unbatched operands.
#[test]
fn binary_programs_match_loops_for_every_batching_combination() {
    type F2 = fn(&Var, &Var) -> Var;
    let cases: Vec<(&str, F2, Vec<usize>, Vec<usize>)> = vec![
        ("add broadcast", |a, b| a + b, vec![4, 1], vec![5]),
        ("mul scalar", |a, b| a * b, vec![], vec![2, 3]),
        ("atan2", |a, b| a.atan2(b), vec![2, 3], vec![2, 3]),
        ("where", |a, b| a.lt(b).select(a, b), vec![3], vec![2, 3]),
        ("matmul mm", |a, b| a.matmul(b), vec![2, 3], vec![3, 4]),
        ("matmul mv", |a, b| a.matmul(b), vec![2, 3], vec![3]),
        ("matmul vm", |a, b| a.matmul(b), vec![3], vec![3, 4]),
        ("matmul vv", |a, b| a.matmul(b), vec![3], vec![3]),
        ("matmul batched", |a, b| a.matmul(b), vec![2, 2, 3], vec![3, 4]),
        ("matmul bcast", |a, b| a.matmul(b), vec![2, 3], vec![5, 3, 4]),
        ("matmul v-batch", |a, b| a.matmul(b), vec![3], vec![5, 3, 4]),
        ("concat", |a, b| anvil::concatenate(&[a, b], 0), vec![2, 3], vec![1, 3]),
    ];
    for (name, f, sa, sb) in cases {
        for (ia, ib) in [
            (Some(0), None),
            (None, Some(0)),
            (Some(0), Some(0)),
            (Some(sa.len()), Some(0)),
            (Some(0), Some(sb.len())),
        ] {
            let a = ia.map_or_else(|| rand(&sa, 1), |k| rand(&batched(&sa, k, B), 1));
            let b = ib.map_or_else(|| rand(&sb, 2), |k| rand(&batched(&sb, k, B), 2));
            if let Err(e) = check_vmap(&f, &[a, b], &[ia, ib], 1e-12, 1e-12) {
                panic!("{name}, in_axes {ia:?} {ib:?}: {e}");
            }
        }
    }
}

#[test]
fn nested_vmap_to_depth_five_with_different_axes() {
    // f on a [2] element; five levels of vmap with in_axes 0, 1, 0, 2, 1.
    let f = |x: &Var| (x.sin() * x).sum(&[0]);
    let v = vmap(vmap(vmap(vmap(vmap(f).in_axes(0)).in_axes(1)).in_axes(0)).in_axes(2)).in_axes(1);
    let x = rand(&[2, 2, 3, 2, 2, 2], 9); // axes chosen so every level maps a size-2 or size-3 axis
    let got = v.eval(&x).unwrap();
    // Independent loop: peel the same axes in the same order.
    fn reference(x: &Tensor, axes: &[usize]) -> Tensor {
        match axes.split_first() {
            None => {
                let v = x.to_vec::<f64>().unwrap();
                Tensor::scalar(v.iter().map(|a| a.sin() * a).sum::<f64>())
            }
            Some((&k, rest)) => {
                let parts: Vec<Tensor> = (0..x.shape()[k])
                    .map(|i| reference(&x.select_axis(k, i).unwrap(), rest))
                    .collect();
                Tensor::stack(&parts, 0).unwrap()
            }
        }
    }
    let want = reference(&x, &[1, 2, 0, 1, 0]);
    got.assert_allclose(&want, 1e-13, 1e-13);
}

#[test]
fn unbatched_work_is_computed_once_and_the_matmul_is_one_product() {
    let f = vmap(|x: &Var, w: &Var| x.matmul(&w.logistic())).in_axes([Some(0), None]);
    let (xs, w) = (rand(&[8, 3], 1), rand(&[3, 4], 2));
    let g = trace(&f, (&xs, &w)).unwrap();
    let text = g.to_string();
    assert_eq!(g.count::<anvil::ops::elementwise::Logistic>(), 1, "{text}");
    assert!(
        text.contains("f64[3,4] = logistic %1"),
        "logistic must run on the unbatched w:\n{text}"
    );
    assert_eq!(g.count::<anvil::ops::matmul::Matmul>(), 1, "{text}");
    assert!(
        text.contains("f64[8,4] = matmul %0,"),
        "the batch is folded into the rows of one product:\n{text}"
    );
    let got = f.eval((&xs, &w)).unwrap();
    ok(check_vmap(
        &|x: &Var, w: &Var| x.matmul(&w.logistic()),
        &[xs, w],
        &[Some(0), None],
        1e-13,
        1e-13,
    ));
    assert_eq!(got.shape(), &[8, 4]);
}

#[test]
fn out_axes_axis_size_and_unbatched_outputs() {
    let x = rand(&[3, 4], 3);
    let f = vmap(|x: &Var| x.exp()).out_axes([1]);
    let got = f.eval(&x).unwrap();
    got.assert_allclose(&jit(|x: &Var| x.exp().transpose()).eval(&x).unwrap(), 0.0, 0.0);
    // No mapped argument: axis_size gives the batch, the output is broadcast.
    let c = vmap(|x: &Var| x * 2.0).in_axes(None).axis_size(5);
    let got = c.eval(Tensor::ones(&[2]).unwrap()).unwrap();
    assert_eq!(got.shape(), &[5, 2]);
    assert!(got.to_vec::<f64>().unwrap().iter().all(|&v| v == 2.0));
    // Negative in_axes.
    ok(check_vmap(&|x: &Var| x.sum(&[0]), std::slice::from_ref(&x), &[Some(1)], 1e-13, 0.0));
    let neg = vmap(|x: &Var| x.sum(&[0])).in_axes(-1).eval(&x).unwrap();
    neg.assert_allclose(&jit(|x: &Var| x.sum(&[0])).eval(&x).unwrap(), 1e-13, 0.0);
}

#[test]
fn vmap_errors_name_the_argument_axis_and_sizes() {
    let f = |a: &Var, b: &Var| a + b;
    let e = vmap(f)
        .eval((&Tensor::zeros(&[3, 2]).unwrap(), &Tensor::zeros(&[4, 2]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("inconsistent batch sizes")
            && e.contains("argument 0 has 3")
            && e.contains("argument 1 has 4"),
        "{e}"
    );
    let e = vmap(f)
        .in_axes([Some(0)])
        .eval((&Tensor::zeros(&[3]).unwrap(), &Tensor::zeros(&[3]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("in_axes") && e.contains("expected 2") && e.contains("got 1"), "{e}");
    let e = vmap(f)
        .in_axes(2)
        .eval((&Tensor::zeros(&[3]).unwrap(), &Tensor::zeros(&[3]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 2") && e.contains("[3]") && e.contains("argument 0 (in_axes)"), "{e}");
    let e = vmap(f)
        .in_axes(None)
        .eval((&Tensor::zeros(&[3]).unwrap(), &Tensor::zeros(&[3]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis_size"), "{e}");
}
