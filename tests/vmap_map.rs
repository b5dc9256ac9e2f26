//! Indexing under `vmap`, the `map` op (direct, chunked, nested in `vmap`),
//! the loop fallback for ops without a batching rule, and `chunk_size`.

use anvil::prelude::*;
use anvil::transforms::map_fallbacks;
use anvil::{Op, TensorType};
use anvil_testing::{check_vmap, run};

/// Deterministic inputs, uniform in [-1, 1).
use anvil_testing::random_tensor as rand;

fn idx(v: Vec<i64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape).unwrap()
}

#[track_caller]
fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// take with the operand, the indices, or both batched, at every axis.
#[test]
fn take_batched_every_way() {
    let x = rand(&[3, 4, 5], 1); // element [4, 5] batched at 0
    let i = idx(vec![0, -1, 2, 2, 1, 0, 3, -4, 1, 1, 0, 2], &[3, 2, 2]); // element [2, 2]
    for axis in [0i64, 1, -1] {
        let f = move |x: &Var, i: &Var| x.take(i, axis);
        for axes in [[Some(0), None], [None, Some(0)], [Some(0), Some(0)]] {
            let args = [
                x.clone(),
                if axes[1].is_some() { i.clone() } else { i.select_axis(0, 0).unwrap() },
            ];
            let args = if axes[0].is_none() {
                [args[0].select_axis(0, 0).unwrap(), args[1].clone()]
            } else {
                args
            };
            ok(check_vmap(&f, &args, &axes, 0.0, 0.0));
        }
    }
    // Batch axes in the middle and at the back.
    let xm = rand(&[4, 3, 5], 2);
    let im = idx(vec![0, 1, 2, 3, 3, 2], &[2, 3]);
    let f = |x: &Var, i: &Var| x.take(i, 1);
    ok(check_vmap(&f, &[xm.clone(), im.clone()], &[Some(1), Some(1)], 0.0, 0.0));
    ok(check_vmap(&f, &[xm.clone(), idx(vec![1, 0], &[2])], &[Some(1), None], 0.0, 0.0));
    ok(check_vmap(&f, &[rand(&[4, 5], 3), im], &[None, Some(1)], 0.0, 0.0));
    ok(check_vmap(&f, &[rand(&[4, 5, 3], 4), idx(vec![4, 0], &[2])], &[Some(2), None], 0.0, 0.0));
}

#[test]
fn scatter_add_batched_every_way() {
    let f = |u: &Var, i: &Var| u.scatter_add(i, 1, 4);
    let u = rand(&[3, 2, 5, 6], 5); // element [2, 5, 6]: indices of shape [5] at axis 1
    let i = idx(vec![0, 3, 3, -1, 2, 1, 1, 1, 0, 0, 2, 2, 3, 0, 1], &[3, 5]);
    ok(check_vmap(&f, &[u.clone(), i.select_axis(0, 1).unwrap()], &[Some(0), None], 1e-14, 1e-14));
    ok(check_vmap(&f, &[u.select_axis(0, 0).unwrap(), i.clone()], &[None, Some(0)], 1e-14, 1e-14));
    ok(check_vmap(&f, &[u.clone(), i.clone()], &[Some(0), Some(0)], 1e-14, 1e-14));
    let ub = rand(&[2, 5, 6, 3], 6);
    ok(check_vmap(&f, &[ub.clone(), i.select_axis(0, 2).unwrap()], &[Some(3), None], 1e-14, 1e-14));
    ok(check_vmap(&f, &[ub, i.clone()], &[Some(3), Some(0)], 1e-14, 1e-14));
}

/// Both batched, nested: batch_dims grows by one per level and each
/// element's out-of-bounds check stays exact.
#[test]
fn nested_take_with_batched_indices_and_bounds() {
    let x = rand(&[2, 3, 4], 7);
    let i = idx((0..2 * 3 * 5).map(|k| (k * 7 % 4) as i64).collect(), &[2, 3, 5]);
    let f = |x: &Var, i: &Var| x.take(i, 0);
    let vv = vmap(vmap(f));
    let got = run(&vv, &[x.clone(), i.clone()]).unwrap().remove(0);
    for a in 0..2 {
        for b in 0..3 {
            let xe = x.select_axis(0, a).unwrap().select_axis(0, b).unwrap();
            let ie = i.select_axis(0, a).unwrap().select_axis(0, b).unwrap();
            let want = run(&f, &[xe, ie]).unwrap().remove(0);
            let g = got.select_axis(0, a).unwrap().select_axis(0, b).unwrap();
            assert_eq!(g.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
        }
    }
    // Index 4 is out of bounds for every element (size 4), even though the
    // batch flattened would have room for it.
    let bad = idx(vec![4; 2 * 3 * 5], &[2, 3, 5]);
    let e = run(&vv, &[x, bad]).unwrap_err().to_string();
    assert!(e.contains("take") && e.contains('4'), "{e}");
}

#[test]
fn map_equals_vmap_with_shared_args_and_batch_sizes() {
    let xs = rand(&[7, 3], 8);
    let w = rand(&[3, 2], 9);
    let f = |x: &Var, w: &Var| x.matmul(w).tanh().sum(&[0]) + x.sin().sum_all();
    let want = vmap(f).in_axes([Some(0), None]).eval((&xs, &w)).unwrap();
    for k in [None, Some(1), Some(2), Some(3), Some(7), Some(100)] {
        let m = map(f).in_axes([Some(0), None]);
        let m = match k {
            Some(k) => m.batch_size(k),
            None => m,
        };
        let got = m.eval((&xs, &w)).unwrap();
        got.assert_allclose(&want, 1e-14, 1e-14);
    }
    // The loop is one map node (no batching of f) without batch_size.
    let g = trace(&map(f).in_axes([Some(0), None]), (&xs, &w)).unwrap();
    assert_eq!(g.count::<anvil::ops::control::Map>(), 1, "{g}");
    assert!(matches!(
        map(f).in_axes([Some(0), None]).batch_size(0).eval((&xs, &w)),
        Err(Error::InvalidArgument { .. })
    ));
    let e = map(f).in_axes([None, None]).eval((&xs, &w)).unwrap_err().to_string();
    assert!(e.contains("map") && e.contains("in_axes"), "{e}");
}

#[test]
fn map_with_several_outputs_and_parallel_ctx() {
    let xs = rand(&[40, 6], 10);
    let f = |x: &Var| vec![x.exp().sum(&[0]), x * 2.0];
    let got = anvil_testing::run(&map(f), std::slice::from_ref(&xs)).unwrap();
    let want = anvil_testing::run(&vmap(f), std::slice::from_ref(&xs)).unwrap();
    for (g, w) in got.iter().zip(&want) {
        g.assert_allclose(w, 1e-14, 1e-14);
    }
    let par = anvil::Parallelism::default().threads(2).min_parallel_elems(1);
    let got = jit(map(|x: &Var| x.exp().sum(&[0]))).eval_with(&xs, &par).unwrap();
    got.assert_allclose(&want[0], 1e-14, 1e-14);
}

/// vmap of map vmaps the body and keeps the loop; map of vmap too.
#[test]
fn map_composes_with_vmap() {
    let f = |x: &Var, w: &Var| x.matmul(w).sin();
    let m = map(f).in_axes([Some(0), None]);
    let xs = rand(&[4, 3, 5], 11); // vmapped over 4, mapped over 3
    let w = rand(&[5, 2], 12);
    ok(check_vmap(&m, &[xs.clone(), w.clone()], &[Some(0), None], 1e-14, 1e-14));
    ok(check_vmap(&m, &[rand(&[3, 5, 4], 30), w.clone()], &[Some(2), None], 1e-14, 1e-14)); // batch at the back
    let ws = rand(&[4, 5, 2], 13);
    ok(check_vmap(&m, &[xs.clone(), ws.clone()], &[Some(0), Some(0)], 1e-14, 1e-14));
    ok(check_vmap(&m, &[xs.select_axis(0, 0).unwrap(), ws], &[None, Some(0)], 1e-14, 1e-14));
    let g = trace(&vmap(m.clone()).in_axes([Some(0), None]), (&xs, &w)).unwrap();
    assert_eq!(g.count::<anvil::ops::control::Map>(), 1, "{g}");
    let mv = map(vmap(f).in_axes([Some(0), None])).in_axes([Some(0), None]);
    let got = mv.eval((&xs, &w)).unwrap();
    got.assert_allclose(
        &vmap(vmap(f).in_axes([Some(0), None])).in_axes([Some(0), None]).eval((&xs, &w)).unwrap(),
        1e-14,
        1e-14,
    );
}

/// A plugin op with a kernel but no batching rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Cubic;

impl Op for Cubic {
    fn name(&self) -> &'static str {
        "test.cubic_plus_row_sum"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        anvil::core::op::expect_arity(self, inputs, 2)?;
        Ok(inputs[0].clone())
    }
}

/// `x^3 + sum(y)` elementwise, with `y` any shape.
fn cubic_kernel(
    _op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    let s: f64 = inputs[1].as_slice::<f64>()?.iter().sum();
    let v = inputs[0].as_slice::<f64>()?.iter().map(|x| x * x * x + s).collect();
    Tensor::from_vec(v, out.shape())
}

anvil::cpu::register_kernel!(Cubic, cubic_kernel);

#[test]
fn op_without_batching_rule_runs_through_the_map_fallback() {
    let f = |x: &Var, y: &Var| x.apply(Cubic, &[y]).sin();
    let x = rand(&[4, 3], 14);
    let y = rand(&[4, 2], 15);
    for axes in [[Some(0), Some(0)], [Some(1), None], [None, Some(0)]] {
        let x = if axes[0] == Some(1) {
            rand(&[3, 4], 16)
        } else if axes[0].is_none() {
            rand(&[3], 17)
        } else {
            x.clone()
        };
        let y = if axes[1].is_none() { rand(&[2], 18) } else { y.clone() };
        ok(check_vmap(&f, &[x, y], &axes, 1e-14, 1e-14));
    }
    assert!(map_fallbacks().contains(&"test.cubic_plus_row_sum"), "{:?}", map_fallbacks());
    // Nested: the fallback's map is itself batched by the map rule.
    let vv = vmap(vmap(f));
    let xs = rand(&[2, 4, 3], 19);
    let ys = rand(&[2, 4, 2], 20);
    let got = run(&vv, &[xs.clone(), ys.clone()]).unwrap().remove(0);
    for a in 0..2 {
        let want = run(&vmap(f), &[xs.select_axis(0, a).unwrap(), ys.select_axis(0, a).unwrap()])
            .unwrap()
            .remove(0);
        got.select_axis(0, a).unwrap().assert_allclose(&want, 1e-14, 1e-14);
    }
}

#[test]
fn chunk_size_gives_the_same_results_and_shares_unbatched_work() {
    let xs = rand(&[10, 4], 21);
    let w = rand(&[4, 4], 22);
    let f = |x: &Var, w: &Var| vec![x.matmul(&w.exp()).tanh(), x.sum(&[0])];
    let want = run(&vmap(f).in_axes([Some(0), None]), &[xs.clone(), w.clone()]).unwrap();
    for k in [1, 3, 4, 10, 11] {
        let v = vmap(f).in_axes([Some(0), None]).chunk_size(k);
        let got = run(&v, &[xs.clone(), w.clone()]).unwrap();
        // Chunks run as a loop whose small steps use direct matrix
        // products: equal to the last bit or two.
        for (g, w) in got.iter().zip(&want) {
            g.assert_allclose(w, 1e-15, 1e-15);
        }
        // exp(w) does not depend on the batch: computed once for all chunks
        // (hoisted out of the loop over chunks; the last partial chunk's
        // copy is merged with it).
        let g = anvil::lower(&v, (&xs, &w)).unwrap();
        assert_eq!(g.count::<anvil::ops::elementwise::Exp>(), 1, "{g}");
    }
    // out_axes and a batch axis at the back.
    let xt = rand(&[4, 10], 23);
    let v = vmap(f).in_axes([Some(1), None]).out_axes([1, 0]).chunk_size(3);
    let got = run(&v, &[xt.clone(), w.clone()]).unwrap();
    let want = run(&vmap(f).in_axes([Some(1), None]).out_axes([1, 0]), &[xt, w.clone()]).unwrap();
    got[0].assert_allclose(&want[0], 1e-15, 1e-15);
    assert!(run(&vmap(f).in_axes([Some(0), None]).chunk_size(0), &[xs, w]).is_err());
}
