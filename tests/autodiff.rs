//! Forward and reverse mode against finite differences, closed forms and
//! each other; composed programs (per-example gradients, Hessians,
//! Hessian-vector products, higher derivatives); graph structure; errors.

use anvil::prelude::*;
use anvil::{Op, TensorType};

/// Deterministic inputs, uniform in [-1, 1).
use anvil_testing::random_tensor as rand;

fn axpy(a: f64, x: &Tensor, y: &Tensor) -> Tensor {
    let v: Vec<f64> = x
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(y.to_vec::<f64>().unwrap())
        .map(|(x, y)| a * x + y)
        .collect();
    Tensor::from_vec(v, x.shape()).unwrap()
}

fn dot(a: &Tensor, b: &Tensor) -> f64 {
    a.to_vec::<f64>().unwrap().iter().zip(b.to_vec::<f64>().unwrap()).map(|(x, y)| x * y).sum()
}

/// A nonlinear function touching many ops: elementwise, broadcasting,
/// reductions, movement, matmul, indexing, select.
fn many_ops(x: &Var) -> Var {
    // x: [3, 4]
    let w = x.constant_like(
        Tensor::from_vec((0..8).map(|i| (i as f64 * 0.37).sin()).collect(), &[4, 2]).unwrap(),
    );
    let h = x.matmul(&w).tanh(); // [3, 2]
    let s = x.softmax(-1) * x.exp().log1p(); // [3, 4]
    let g = s.index(1, &[0, 3, 3]).sum(&[1]); // [3]
    let m = x.max(&[0], false) + x.min(&[1], true).sum_all(); // [4]
    let p = x.slice_axis(1, Some(3), None, -2).pad(&[(1, 0), (0, 1)], 0.0); // [4, 3]
    let c = concatenate(&[&p.transpose(), &h.transpose().pad(&[(0, 1), (0, 0)], 0.0)], 1); // [3, 7]
    let sel = where_(&x.gt(&x.zeros_like()), &x.sin(), &x.square()); // [3, 4]
    let z = x.atan2(&(x.square() + 1.0)) + x.abs().sqrt() * x.cos();
    let q = (x.square() + 0.5).powf(1.5).prod(&[1], false); // [3]
    let e = x.erf().sum(&[0]) * x.logistic().mean_axes(&[0], false); // [4]
    let sc = x.reshape(&[12]).scatter_add(
        &x.constant_like(
            Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2], &[12]).unwrap(),
        ),
        0,
        3,
    );
    concatenate(
        &[
            &(g + q).reshape(&[3]),
            &(m * e),
            &c.sum(&[0]),
            &sel.sum(&[1]),
            &z.logsumexp(&[0], false),
            &sc,
            &stack(&[&x.norm(), &x.var(&[0, 1], false)], 0),
        ],
        0,
    )
}

/// jvp against central differences, at several random directions.
#[test]
fn jvp_matches_finite_differences() {
    let x = rand(&[3, 4], 1);
    for seed in 0..3 {
        let v = rand(&[3, 4], 10 + seed);
        let out = jvp(many_ops).eval((&x, &v)).unwrap();
        let out = [out.0, out.1];
        let h = 1e-6;
        let plus = jit(many_ops).eval(axpy(h, &v, &x)).unwrap();
        let minus = jit(many_ops).eval(axpy(-h, &v, &x)).unwrap();
        let fd = axpy(-1.0, &minus, &plus)
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|d| d / (2.0 * h))
            .collect::<Vec<_>>();
        let fd = Tensor::from_vec(fd, out[1].shape()).unwrap();
        out[1].assert_allclose(&fd, 1e-6, 1e-7);
        out[0].assert_allclose(&jit(many_ops).eval(&x).unwrap(), 0.0, 0.0);
    }
}

/// Transposition by the dot-product test: <u, J v> = <J^T u, v>.
#[test]
fn vjp_is_the_transpose_of_jvp() {
    let x = rand(&[3, 4], 2);
    let y = jit(many_ops).eval(&x).unwrap();
    for seed in 0..3 {
        let v = rand(&[3, 4], 20 + seed);
        let u = rand(y.shape(), 30 + seed);
        let jv = jvp(many_ops).eval((&x, &v)).unwrap().1;
        let (primal, pullback) = vjp(&many_ops, &x).unwrap();
        primal.assert_allclose(&y, 0.0, 0.0);
        let (jtu,) = pullback.eval(&u).unwrap();
        let lhs = dot(&u, &jv);
        let rhs = dot(&jtu, &v);
        assert!(
            (lhs - rhs).abs() <= 1e-12 * (1.0 + lhs.abs()),
            "<u, Jv> = {lhs}, <J^T u, v> = {rhs}"
        );
    }
}

#[test]
fn jacfwd_and_jacrev_agree_and_match_finite_differences() {
    let x = rand(&[3, 4], 3);
    let jf = jacfwd(many_ops).eval(&x).unwrap();
    let jr = jacrev(many_ops).eval(&x).unwrap();
    let out_n = jit(many_ops).eval(&x).unwrap().shape()[0];
    assert_eq!(jf.shape(), &[out_n, 3, 4]);
    jf.assert_allclose(&jr, 1e-12, 1e-12);
    // chunked: same numbers
    jacfwd(many_ops).chunk_size(5).eval(&x).unwrap().assert_allclose(&jf, 1e-14, 1e-14);
    jacrev(many_ops).chunk_size(7).eval(&x).unwrap().assert_allclose(&jf, 1e-14, 1e-14);
    // column j of the Jacobian by central differences
    for j in [0, 5, 11] {
        let mut e = vec![0.0; 12];
        e[j] = 1.0;
        let e = Tensor::from_vec(e, &[3, 4]).unwrap();
        let h = 1e-6;
        let d = axpy(
            -1.0,
            &jit(many_ops).eval(axpy(-h, &e, &x)).unwrap(),
            &jit(many_ops).eval(axpy(h, &e, &x)).unwrap(),
        );
        let col: Vec<f64> = (0..out_n).map(|i| jf.to_vec::<f64>().unwrap()[i * 12 + j]).collect();
        for (a, b) in col.iter().zip(d.to_vec::<f64>().unwrap()) {
            assert!((a - b / (2.0 * h)).abs() < 1e-6, "column {j}: {a} vs {}", b / (2.0 * h));
        }
    }
}

/// hessian(logsumexp(A x)) = A^T (diag(p) - p p^T) A with p = softmax(A x).
#[test]
fn hessian_of_logsumexp_matches_closed_form() {
    let (m, n) = (5, 3);
    let a = rand(&[m, n], 4);
    let x = rand(&[n], 5);
    let f = |x: &Var, a: &Var| a.matmul(x).logsumexp(&[0], false);
    let h = hessian(f).eval((&x, &a)).unwrap();
    assert_eq!(h.shape(), &[n, n]);
    let av = a.to_vec::<f64>().unwrap();
    let xv = x.to_vec::<f64>().unwrap();
    let z: Vec<f64> = (0..m).map(|i| (0..n).map(|j| av[i * n + j] * xv[j]).sum()).collect();
    let zmax = z.iter().cloned().fold(f64::MIN, f64::max);
    let e: Vec<f64> = z.iter().map(|z| (z - zmax).exp()).collect();
    let s: f64 = e.iter().sum();
    let p: Vec<f64> = e.iter().map(|e| e / s).collect();
    let mut want = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let mut acc = 0.0;
            for k in 0..m {
                acc += av[k * n + i] * p[k] * av[k * n + j];
                for l in 0..m {
                    acc -= av[k * n + i] * p[k] * p[l] * av[l * n + j];
                }
            }
            want[i * n + j] = acc;
        }
    }
    h.assert_allclose(&Tensor::from_vec(want, &[n, n]).unwrap(), 1e-12, 1e-13);
    // The gradient is A^T p.
    let g = grad(f).eval((&x, &a)).unwrap();
    let want_g: Vec<f64> = (0..n).map(|j| (0..m).map(|k| av[k * n + j] * p[k]).sum()).collect();
    g.assert_allclose(&Tensor::from_vec(want_g, &[n]).unwrap(), 1e-13, 1e-14);
}

/// A Hessian-vector product by forward-over-reverse equals H v.
#[test]
fn hessian_vector_product_equals_hessian_times_v() {
    let f = |x: &Var| (x.sin() * x.roll_free()).sum_all() + x.square().sum_all().sqrt();
    let x = rand(&[4], 6);
    let v = rand(&[4], 7);
    let hvp = jvp(grad(f)).eval((&x, &v)).unwrap().1;
    let h = hessian(f).eval(&x).unwrap();
    let hv: Vec<f64> = (0..4)
        .map(|i| {
            (0..4)
                .map(|j| h.to_vec::<f64>().unwrap()[i * 4 + j] * v.to_vec::<f64>().unwrap()[j])
                .sum()
        })
        .collect();
    hvp.assert_allclose(&Tensor::from_vec(hv, &[4]).unwrap(), 1e-12, 1e-13);
    // H is symmetric, and jacrev(jacrev) agrees with jacfwd(jacrev).
    let hrr = jacrev(jacrev(f)).eval(&x).unwrap();
    h.assert_allclose(&hrr, 1e-12, 1e-13);
    let hff = jacfwd(jacfwd(f)).eval(&x).unwrap();
    h.assert_allclose(&hff, 1e-12, 1e-13);
}

trait RollFree {
    fn roll_free(&self) -> Var;
}
impl RollFree for Var {
    /// x shifted by one (a cyclic roll), from slices and concatenate.
    fn roll_free(&self) -> Var {
        concatenate(
            &[&self.slice_axis(0, Some(1), None, 1), &self.slice_axis(0, Some(0), Some(1), 1)],
            0,
        )
    }
}

#[test]
fn third_derivatives_of_sin() {
    let f = |x: &Var| x.sin();
    for x in [0.0f64, 0.3, -1.2, 2.5] {
        let t = Tensor::scalar(x);
        let d1 = grad(f).eval(&t).unwrap().item().unwrap();
        let d2 = grad(grad(f)).eval(&t).unwrap().item().unwrap();
        let d3 = grad(grad(grad(f))).eval(&t).unwrap().item().unwrap();
        assert!(
            (d1 - x.cos()).abs() < 1e-15
                && (d2 + x.sin()).abs() < 1e-15
                && (d3 + x.cos()).abs() < 1e-15,
            "{x}: {d1} {d2} {d3}"
        );
    }
}

fn mlp(x: &Var, w1: &Var, w2: &Var) -> Var {
    x.matmul(w1).tanh().matmul(w2)
}

/// Per-example gradients: vmap(grad(loss)) against a loop of grad.
#[test]
fn per_example_gradients_of_an_mlp() {
    let loss = |w1: &Var, x: &Var, y: &Var| {
        let w2 = w1.constant_like(Tensor::from_vec(vec![0.5, -1.0, 0.25], &[3, 1]).unwrap());
        (mlp(x, w1, &w2) - y).square().sum_all()
    };
    let w1 = rand(&[4, 3], 8);
    let xs = rand(&[6, 4], 9);
    let ys = rand(&[6, 1], 10);
    let per_ex = vmap(grad(loss)).in_axes([None, Some(0), Some(0)]).eval((&w1, &xs, &ys)).unwrap();
    assert_eq!(per_ex.shape(), &[6, 4, 3]);
    for i in 0..6 {
        let g = grad(loss)
            .eval((&w1, &xs.select_axis(0, i).unwrap(), &ys.select_axis(0, i).unwrap()))
            .unwrap();
        per_ex.select_axis(0, i).unwrap().assert_allclose(&g, 1e-14, 1e-14);
    }
}

/// jacfwd of an MLP against the hand-derived Jacobian W2^T diag(1 - h^2) W1^T.
#[test]
fn jacfwd_of_an_mlp_matches_the_hand_derived_jacobian() {
    let (w1, w2, x) = (rand(&[4, 5], 11), rand(&[5, 3], 12), rand(&[4], 13));
    let j = jacfwd(mlp).eval((&x, &w1, &w2)).unwrap();
    assert_eq!(j.shape(), &[3, 4]);
    let (a, b, xv) =
        (w1.to_vec::<f64>().unwrap(), w2.to_vec::<f64>().unwrap(), x.to_vec::<f64>().unwrap());
    let h: Vec<f64> =
        (0..5).map(|k| (0..4).map(|i| xv[i] * a[i * 5 + k]).sum::<f64>().tanh()).collect();
    let want: Vec<f64> = (0..3)
        .flat_map(|o| {
            let (a, b, h) = (&a, &b, &h);
            (0..4).map(move |i| {
                (0..5).map(|k| b[k * 3 + o] * (1.0 - h[k] * h[k]) * a[i * 5 + k]).sum()
            })
        })
        .collect();
    j.assert_allclose(&Tensor::from_vec(want, &[3, 4]).unwrap(), 1e-13, 1e-14);
    let jr = jacrev(mlp).eval((&x, &w1, &w2)).unwrap();
    j.assert_allclose(&jr, 1e-13, 1e-14);
    // Several arguments: one Jacobian per argument.
    let js = jacfwd(mlp).argnums(&[0, 2]).eval((&x, &w1, &w2)).unwrap();
    assert_eq!(js[1].shape(), &[3, 5, 3]);
    js[1].assert_allclose(
        &jacrev(mlp).argnums(&[0, 2]).eval((&x, &w1, &w2)).unwrap()[1],
        1e-13,
        1e-14,
    );
}

/// The primal of jacfwd is computed once at its unbatched shape; only the
/// tangent computation is batched over the basis.
#[test]
fn jacfwd_does_not_batch_the_primal() {
    let f = |x: &Var| x.sin().exp().sum(&[0]);
    let x = rand(&[5], 14);
    let g = anvil::transforms::dce(&trace(&jacfwd(f), &x).unwrap()).unwrap();
    let sins: Vec<String> = g
        .iter()
        .filter(|(_, n)| n.op.name() == "sin")
        .map(|(_, n)| g.ty(n.out()).to_string())
        .collect();
    assert_eq!(sins, vec!["f64[5]"], "{g}");
    let exps: Vec<String> = g
        .iter()
        .filter(|(_, n)| n.op.name() == "exp")
        .map(|(_, n)| g.ty(n.out()).to_string())
        .collect();
    assert_eq!(exps, vec!["f64[5]"], "{g}");
}

/// An input without a tangent adds no node to the tangent computation.
#[test]
fn inputs_without_tangents_cost_nothing() {
    let f = |x: &Var, w: &Var| (x.sin() * w.exp().cos()).sum_all();
    let x = rand(&[3], 15);
    let w = rand(&[3], 16);
    // Tangent only for x: the graph of (x, w, tx) -> jvp.
    let with_one = anvil::core::trace_with(&[x.ty(), w.ty(), x.ty()], |v| {
        let g = trace(&f, (&x, &w))?;
        let (_, t) = anvil::transforms::jvp_graph(&g, &v[..2], &[Some(v[2].clone()), None])?;
        Ok(vec![t[0].clone().unwrap()])
    })
    .unwrap();
    let primal = trace(&f, (&x, &w)).unwrap();
    // The primal's nodes plus the tangent of x: cos(x), t * cos(x), times
    // cos(exp(w)) (a primal value), sum. Nothing differentiates w.
    let extra = with_one.len() - primal.len() - 1; // minus the tangent input
    assert_eq!(extra, 4, "{with_one}");
    assert_eq!(with_one.count::<anvil::ops::elementwise::Exp>(), 1, "{with_one}");
    // No op that differentiates w (sin of exp(w), the derivative of cos) appears.
    assert_eq!(with_one.count::<anvil::ops::elementwise::Sin>(), 1, "{with_one}");
}

#[test]
fn stop_gradient_blocks_derivatives() {
    let f = |x: &Var| (x.stop_gradient() * x).sum_all();
    let x = rand(&[3], 17);
    let g = grad(f).eval(&x).unwrap();
    g.assert_allclose(&x, 0.0, 0.0); // d/dx (c * x) with c = x held constant
}

#[test]
fn value_and_grad_and_argnums() {
    let f = |x: &Var, y: &Var| (x * y).sum_all() + y.square().sum_all();
    let (x, y) = (rand(&[2], 18), rand(&[2], 19));
    let (value, grads) = value_and_grad(f).argnums(&[0, 1]).eval((&x, &y)).unwrap();
    assert_eq!(grads.len(), 2);
    grads[0].assert_allclose(&y, 0.0, 0.0);
    grads[1].assert_allclose(&axpy(2.0, &y, &x), 1e-15, 1e-15);
    let v = jit(f).eval((&x, &y)).unwrap();
    value.assert_allclose(&v, 0.0, 0.0);
}

#[test]
fn grad_errors_name_the_problem() {
    let x = rand(&[3], 20);
    let e = grad(|x: &Var| x.sin()).eval(&x).unwrap_err().to_string();
    assert!(e.contains("grad") && e.contains("scalar") && e.contains("[3]"), "{e}");
    let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    let e = grad(|x: &Var| x.cast(DType::F64).sum_all()).eval(&i).unwrap_err().to_string();
    assert!(e.contains("grad") && e.contains("i64") && e.contains('0'), "{e}");
    let e = grad(|x: &Var| x.sum_all()).argnums(&[3]).eval(&x).unwrap_err().to_string();
    assert!(e.contains("argnums"), "{e}");
}

/// An op with a kernel but no jvp rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct NoJvp;
impl Op for NoJvp {
    fn name(&self) -> &'static str {
        "test.no_jvp"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        Ok(inputs[0].clone())
    }
}
fn identity(
    _: &dyn Op,
    inputs: &[&Tensor],
    _: &TensorType,
    _: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    Ok(inputs[0].clone())
}
anvil::cpu::register_kernel!(NoJvp, identity);

#[test]
fn differentiating_an_op_without_a_rule_is_an_error_naming_it() {
    let f = |x: &Var| x.apply(NoJvp, &[]).sum_all();
    let x = rand(&[3], 21);
    assert!(jit(f).eval(&x).is_ok());
    for e in [grad(f).eval(&x).unwrap_err(), jacfwd(f).eval(&x).unwrap_err()] {
        let e = e.to_string();
        assert!(e.contains("test.no_jvp") && e.contains("jvp rule"), "{e}");
    }
    // Under stop_gradient, it is fine.
    let g = |x: &Var| x.stop_gradient().apply(NoJvp, &[]).sum_all() + x.sum_all();
    assert_eq!(grad(g).eval(&x).unwrap().to_vec::<f64>().unwrap(), vec![1.0; 3]);
}

/// An op whose kernel returns another type than its shape rule says (one
/// element too many, or `f32` for `f64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct BadKernel {
    dtype: bool,
}
impl Op for BadKernel {
    fn name(&self) -> &'static str {
        "test.bad_kernel"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        Ok(inputs[0].clone())
    }
}
fn bad_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    _: &TensorType,
    _: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    let mut v = inputs[0].to_vec::<f64>()?;
    if op.try_downcast::<BadKernel>()?.dtype {
        return Ok(Tensor::from_vec(v, inputs[0].shape())?.cast(DType::F32));
    }
    v.push(99.0);
    let n = v.len();
    Tensor::from_vec(v, &[n])
}
anvil::cpu::register_kernel!(BadKernel, bad_kernel);

/// A plugin kernel's result of the wrong type is an error naming the op
/// and both types, in every build and whatever reads the result.
#[test]
fn a_kernel_returning_the_wrong_type_is_an_error_naming_its_op() {
    let x = rand(&[3], 5);
    let w = rand(&[3, 2], 6);
    for dtype in [false, true] {
        let op = BadKernel { dtype };
        let alone = jit(move |x: &Var| x.apply(op, &[])).eval(&x);
        let summed = jit(move |x: &Var| x.apply(op, &[]).sum_all()).eval(&x);
        let product = jit(move |x: &Var, w: &Var| x.apply(op, &[]).matmul(w)).eval((&x, &w));
        let shifted = jit(move |x: &Var| x.apply(op, &[]) + 1.0).eval(&x);
        for r in [alone, summed, product, shifted] {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("test.bad_kernel") && e.contains("f64[3]"), "{e}");
        }
    }
}

/// map composes with differentiation: grad through a map, jacfwd of a map.
#[test]
fn map_under_grad_and_jacobians() {
    let body = |x: &Var, w: &Var| x.matmul(w).sin().sum_all();
    let m = map(body).in_axes([Some(0), None]);
    let f = move |xs: &Var, w: &Var| Ok(m.apply((xs, w))?.square().sum_all());
    let v = |xs: &Var, w: &Var| {
        Ok(vmap(body).in_axes([Some(0), None]).apply((xs, w))?.square().sum_all())
    };
    let (xs, w) = (rand(&[4, 3], 22), rand(&[3, 2], 23));
    let gm = grad(f.clone()).argnums(&[0, 1]).eval((&xs, &w)).unwrap();
    let gv = grad(v).argnums(&[0, 1]).eval((&xs, &w)).unwrap();
    gm[0].assert_allclose(&gv[0], 1e-13, 1e-14);
    gm[1].assert_allclose(&gv[1], 1e-13, 1e-14);
    let hm = hessian(f).eval((&xs, &w)).unwrap();
    let hv = hessian(v).eval((&xs, &w)).unwrap();
    hm.assert_allclose(&hv, 1e-12, 1e-13);
}

#[test]
fn jvp_and_vjp_of_several_outputs() {
    let f = |x: &Var, y: &Var| vec![x * y, (x + y).sin().sum_all()];
    let (x, y) = (rand(&[3], 24), rand(&[3], 25));
    let (tx, ty) = (rand(&[3], 26), rand(&[3], 27));
    let (_, out) = jvp(f).eval(((&x, &y), (&tx, &ty))).unwrap();
    assert_eq!(out.len(), 2);
    let want = axpy(
        1.0,
        &Tensor::from_vec(
            tx.to_vec::<f64>()
                .unwrap()
                .iter()
                .zip(y.to_vec::<f64>().unwrap())
                .map(|(a, b)| a * b)
                .collect(),
            &[3],
        )
        .unwrap(),
        &Tensor::from_vec(
            ty.to_vec::<f64>()
                .unwrap()
                .iter()
                .zip(x.to_vec::<f64>().unwrap())
                .map(|(a, b)| a * b)
                .collect(),
            &[3],
        )
        .unwrap(),
    );
    out[0].assert_allclose(&want, 1e-15, 1e-15);
    let js = jacrev(f).argnums(&[0, 1]).eval((&x, &y)).unwrap();
    let jf = jacfwd(f).argnums(&[0, 1]).eval((&x, &y)).unwrap();
    // Outputs outside, arguments inside: js[k] is a tuple of two blocks.
    let (js, jf): (Vec<Tensor>, Vec<Tensor>) = (
        js.into_iter().flat_map(|d| d.leaves).collect(),
        jf.into_iter().flat_map(|d| d.leaves).collect(),
    );
    assert_eq!(js.len(), 4);
    for (a, b) in js.iter().zip(&jf) {
        a.assert_allclose(b, 1e-14, 1e-14);
    }
    let _ = rand(&[1], 0);
}

/// linearize: the primal once, then jvps at any tangents, and vmap over
/// tangents for a Jacobian.
#[test]
fn linearize_gives_the_jvp_without_the_primal() {
    let x = rand(&[3, 4], 40);
    let (y, lin) = anvil::linearize(&many_ops, &x).unwrap();
    y.assert_allclose(&jit(many_ops).eval(&x).unwrap(), 0.0, 0.0);
    for seed in 0..2 {
        let v = rand(&[3, 4], 41 + seed);
        let t = lin.eval(&v).unwrap();
        t.assert_allclose(&jvp(many_ops).eval((&x, &v)).unwrap().1, 1e-14, 1e-14);
    }
    // The linear graph holds no transcendental op: they ran in the primal part.
    let g = trace(&lin, &x).unwrap();
    for name in ["sin", "exp", "tanh", "erf", "log1p"] {
        assert!(g.iter().all(|(_, n)| n.op.name() != name), "{name} in the linear part:\n{g}");
    }
    // vmap over a basis of tangents is the Jacobian.
    let basis = Tensor::eye(12).unwrap().reshape(&[12, 3, 4]).unwrap();
    let cols = vmap(lin).eval(&basis).unwrap(); // [12, out]
    let jf = jacfwd(many_ops).eval(&x).unwrap(); // [out, 3, 4]
    let out_n = jf.shape()[0];
    let jt = jit(move |j: &Var| j.reshape(&[out_n as i64, 12]).transpose()).eval(&jf).unwrap();
    cols.assert_allclose(&jt, 1e-13, 1e-13);
}

/// The gradient of a product is exact with zeros among the factors.
#[test]
fn prod_gradient_with_zeros() {
    let f = |x: &Var| x.prod(&[0], false);
    let g = |v: Vec<f64>| {
        grad(f).eval(Tensor::from_vec(v, &[4]).unwrap()).unwrap().to_vec::<f64>().unwrap()
    };
    assert_eq!(g(vec![2.0, 3.0, 4.0, 5.0]), vec![60.0, 40.0, 30.0, 24.0]);
    assert_eq!(g(vec![2.0, 0.0, 4.0, 5.0]), vec![0.0, 40.0, 0.0, 0.0]);
    assert_eq!(g(vec![0.0, 0.0, 4.0, 5.0]), vec![0.0; 4]);
    // keepdims and several axes
    let x = Tensor::from_vec(vec![1.0, 2.0, 0.0, 3.0, 4.0, 5.0], &[2, 3]).unwrap();
    let j = jacrev(|x: &Var| x.prod(&[1], true)).eval(&x).unwrap();
    assert_eq!(j.shape(), &[2, 1, 2, 3]);
    assert_eq!(
        j.to_vec::<f64>().unwrap(),
        vec![0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 20.0, 15.0, 12.0]
    );
}

/// A linear op with a jvp rule but no transpose rule: forward mode works,
/// reverse mode is an error naming the op and the missing rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Twice;
impl Op for Twice {
    fn name(&self) -> &'static str {
        "test.twice"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        Ok(inputs[0].clone())
    }
}
fn twice(
    _: &dyn Op,
    inputs: &[&Tensor],
    _: &TensorType,
    _: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    let v = inputs[0].to_vec::<f64>()?.iter().map(|x| 2.0 * x).collect();
    Tensor::from_vec(v, inputs[0].shape())
}
fn twice_jvp(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> anvil::Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}
anvil::cpu::register_kernel!(Twice, twice);
anvil::core::register_rule!(JvpRule, Twice, twice_jvp);

#[test]
fn reverse_mode_through_a_linear_op_without_transpose_rule_is_an_error() {
    let f = |x: &Var| x.apply(Twice, &[]).sin().sum_all();
    let x = rand(&[3], 50);
    let v = Tensor::ones(&[3]).unwrap();
    assert!(jvp(f).eval((&x, &v)).is_ok());
    assert!(jacfwd(f).eval(&x).is_ok());
    for e in [grad(f).eval(&x).unwrap_err(), jacrev(f).eval(&x).unwrap_err()] {
        let e = e.to_string();
        assert!(e.contains("test.twice") && e.contains("transpose rule"), "{e}");
    }
}

/// The seed of a Jacobian is an op (`basis`), never a constant; with
/// `chunk_size`, each chunk builds its own slice of the basis.
#[test]
fn chunked_jacobians_build_the_seed_per_chunk() {
    use anvil::ops::constant::Basis;
    let x = rand(&[6], 60);
    let f = |x: &Var| x.sin() * x.sum_all();
    let biggest =
        |g: &anvil::Graph, constants: bool| {
            g.iter()
                .filter(|(_, n)| {
                    if constants {
                        n.op.is::<anvil::core::Constant>()
                    } else {
                        n.op.is::<Basis>()
                    }
                })
                .map(|(_, n)| g.ty(n.out()).numel())
                .max()
        };
    // Unchunked, the seed is the whole 6 x 6 identity, as an op.
    let whole = trace(&jacfwd(f), &x).unwrap();
    assert_eq!(biggest(&whole, false), Some(36), "{whole}");
    assert!(biggest(&whole, true).unwrap_or(0) <= 1, "{whole}");
    for j in [jacfwd(f).chunk_size(2), jacrev(f).chunk_size(2)] {
        // One loop over the chunks; its body builds a 2 x 6 seed per chunk.
        let g = trace(&j, &x).unwrap();
        let scans: Vec<_> = g.iter().filter(|(_, n)| n.op.is::<anvil::ops::scan::Scan>()).collect();
        assert_eq!(scans.len(), 1, "{g}");
        let body = &scans[0].1.op.subgraphs()[0].clone();
        assert_eq!(biggest(body, false), Some(12), "{g}");
        assert!(biggest(&g, true).unwrap_or(0) <= 1, "{g}");
        j.eval(&x).unwrap().assert_allclose(&jacfwd(f).eval(&x).unwrap(), 1e-15, 1e-15);
    }
    // The graph's size does not grow with the number of chunks; a last
    // partial chunk (10 = 3 x 3 + 1) is done after the loop.
    let x10 = rand(&[10], 61);
    let size = |k: usize| trace(&jacfwd(f).chunk_size(k), &x10).unwrap().len();
    assert_eq!(size(2), size(5), "5 chunks and 2 chunks: the same graph");
    let j = jacfwd(f).chunk_size(3).eval(&x10).unwrap();
    j.assert_allclose(&jacfwd(f).eval(&x10).unwrap(), 1e-15, 1e-15);
    let v = vmap(f).chunk_size(3).eval(rand(&[10, 4], 62)).unwrap();
    v.assert_allclose(&vmap(f).eval(rand(&[10, 4], 62)).unwrap(), 1e-15, 1e-15);
}

#[test]
fn derivatives_of_prod_at_exact_zeros() {
    // prod(x): H[i][j] = prod of the others but i and j (0 on the diagonal).
    let hess = |v: &[f64]| -> Vec<f64> {
        let n = v.len();
        let mut h = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    h[i * n + j] = (0..n).filter(|&k| k != i && k != j).map(|k| v[k]).product();
                }
            }
        }
        h
    };
    for v in
        [vec![0.0, 2.0, 3.0], vec![0.0, 0.0, 3.0], vec![2.0, 0.0, 0.0, 5.0], vec![1.5, -2.0, 3.0]]
    {
        let n = v.len();
        let x = Tensor::from_vec(v.clone(), &[n]).unwrap();
        let want = Tensor::from_vec(hess(&v), &[n, n]).unwrap();
        let prod = |x: &Var| x.prod_all();
        for (how, got) in [
            ("hessian", hessian(prod).eval(&x).unwrap()),
            ("jacrev(jacrev)", jacrev(jacrev(prod)).eval(&x).unwrap()),
            ("jacfwd(grad)", jacfwd(grad(prod)).eval(&x).unwrap()),
        ] {
            assert!(got.allclose(&want, 1e-12, 1e-12), "{how} at {v:?}:\n got {got}\nwant {want}");
        }
    }
    // Over two of three axes (kept axis in the middle), keepdims: the
    // gradient against prod of the others, each (i, k) fibre alone.
    let x = Tensor::from_vec(
        vec![0.0, 2.0, 3.0, 0.5, 1.0, -1.0, 0.0, 0.0, 2.0, 4.0, 1.5, 3.0],
        &[2, 3, 2],
    )
    .unwrap();
    let f = |x: &Var| x.prod(&[0, 2], true).sum_all();
    let g = grad(f).eval(&x).unwrap().to_vec::<f64>().unwrap();
    let v = x.to_vec::<f64>().unwrap();
    for j in 0..3 {
        let fibre: Vec<usize> =
            (0..2).flat_map(|i| (0..2).map(move |k| i * 6 + j * 2 + k)).collect();
        for &p in &fibre {
            let others: f64 = fibre.iter().filter(|&&q| q != p).map(|&q| v[q]).product();
            assert_eq!(g[p], others, "d/dx[{p}]");
        }
    }
    let h = hessian(f).eval(&x).unwrap();
    let hf = jacfwd(jacrev(f)).eval(&x).unwrap();
    h.assert_allclose(&hf, 1e-12, 1e-12);
}

#[test]
fn derivatives_of_powers_at_zero() {
    // d/dx x^0 = 0 everywhere, 0 at x = 0 too (not 0 * 0^-1 = NaN), as JAX.
    let at = |p: f64, v: f64| {
        grad(move |x: &Var| x.powf(p)).eval(Tensor::scalar(v)).unwrap().item().unwrap()
    };
    assert_eq!(at(0.0, 0.0), 0.0);
    assert_eq!(at(0.0, 2.0), 0.0);
    assert_eq!(at(2.0, 0.0), 0.0);
    assert_eq!(at(3.0, 2.0), 12.0);
    let h = hessian(|x: &Var| x.powf(0.0)).eval(Tensor::scalar(0.0)).unwrap().item().unwrap();
    assert_eq!(h, 0.0);
    // A traced exponent that is 0 in some elements.
    let x = Tensor::from_vec(vec![0.0, 0.0, 2.0], &[3]).unwrap();
    let p = Tensor::from_vec(vec![0.0, 1.0, 0.0], &[3]).unwrap();
    let g = grad(|x: &Var, p: &Var| x.pow(p).sum_all()).eval((&x, &p)).unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![0.0, 1.0, 0.0]);
}
