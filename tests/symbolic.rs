//! Symbolic dimensions (issue 17): a function traced, transformed and
//! compiled once at shapes with dimension variables, run for every length
//! with one plan, agreeing with the concrete-shape path.

use anvil::core::stats;
use anvil::prelude::*;
use anvil::{dim, Op, TensorType};

fn vector(len: usize, seed: f64) -> Tensor {
    Tensor::from_vec((0..len).map(|i| ((i as f64 + seed) * 0.37).sin()).collect(), &[len]).unwrap()
}

fn matrix(rows: usize, cols: usize, seed: f64) -> Tensor {
    let v = (0..rows * cols).map(|i| ((i as f64 + seed) * 0.71).cos()).collect();
    Tensor::from_vec(v, &[rows, cols]).unwrap()
}

fn f64_of(shape: impl Into<Vec<usize>>) -> TensorType {
    TensorType::new(DType::F64, shape)
}

fn close(a: &Tensor, b: &Tensor) {
    assert_eq!(a.shape(), b.shape());
    assert!(a.allclose(b, 1e-13, 1e-14), "{a} vs {b}");
}

/// The constructs of the symbolic-mean document: the sum and the mean of a
/// vector of symbolic length, and of a matrix with a symbolic axis,
/// compiled once and run for lengths 4..=8.
#[test]
fn sum_and_mean_of_a_symbolic_length() {
    let n = dim("n", 4..=8).unwrap();
    let sum = jit(|x: &Var| x.sum_all()).symbolic(f64_of([n])).unwrap();
    let mean = jit(|x: &Var| x.mean()).symbolic(f64_of([n])).unwrap();
    let by_hand = jit(|x: &Var| x.sum(&[0]) / x.dim_size(0)).symbolic(f64_of([n])).unwrap();
    for len in 4..=8 {
        let x = vector(len, 1.0);
        let v = x.to_vec::<f64>().unwrap();
        let s: f64 = v.iter().sum();
        assert!((sum.eval(&x).unwrap().item().unwrap() - s).abs() < 1e-14);
        assert!((mean.eval(&x).unwrap().item().unwrap() - s / len as f64).abs() < 1e-14);
        assert!((by_hand.eval(&x).unwrap().item().unwrap() - s / len as f64).abs() < 1e-14);
    }
    // A matrix with a symbolic axis: means along it and across it, var, std.
    let m = jit(|x: &Var| {
        vec![x.mean_axes(&[0], false), x.mean_axes(&[1], false), x.var(&[0], false), x.std_all()]
    })
    .symbolic(f64_of([n, 3]))
    .unwrap();
    let concrete = |x: &Var| {
        vec![x.mean_axes(&[0], false), x.mean_axes(&[1], false), x.var(&[0], false), x.std_all()]
    };
    for len in 4..=8 {
        let x = matrix(len, 3, 0.5);
        let got = m.eval(&x).unwrap();
        let want = concrete.eval(&x).unwrap();
        assert_eq!(got[1].shape(), &[len]);
        for (g, w) in got.iter().zip(&want) {
            close(g, w);
        }
    }
}

/// One hundred lengths: traced, transformed, optimised and planned once
/// (counted), the same plan for every length, equal to the concrete path
/// (which compiles once per length).
#[test]
fn one_hundred_lengths_compile_once() {
    let n = dim("len", 1..=100).unwrap();
    let f = |x: &Var| (x.sin() * x).mean_axes(&[0], false).sum_all();
    let before = stats::snapshot();
    let g = jit(grad(f)).symbolic(f64_of([n, 2])).unwrap();
    let built = stats::snapshot().since(&before);
    assert_eq!((built.traces >= 1, built.optimizations, built.plans), (true, 1, 1), "{built:?}");
    assert!(built.transforms >= 2, "grad is a jvp and a transpose: {built:?}");
    assert!(g.plan().is_symbolic());
    let plan: *const anvil::cpu::Plan = g.plan();

    // The jit's cache keys on the symbolic signature: asking again compiles nothing.
    let j = jit(grad(f));
    let (a, b) = (j.symbolic(f64_of([n, 2])).unwrap(), j.symbolic(f64_of([n, 2])).unwrap());
    assert!(std::ptr::eq(a.plan(), b.plan()) && j.cache_len() == 1);

    let concrete = jit(grad(f));
    let mut results = Vec::new();
    let start = stats::snapshot();
    for len in 1..=100 {
        results.push(g.eval(matrix(len, 2, len as f64)).unwrap());
        assert!(std::ptr::eq(g.plan(), plan));
    }
    let calls = stats::snapshot().since(&start);
    assert_eq!(calls, stats::Stats::default(), "100 lengths retraced or recompiled: {calls:?}");

    let start = stats::snapshot();
    for (len, got) in (1..=100).zip(&results) {
        let want = concrete.eval(matrix(len, 2, len as f64)).unwrap();
        close(got, &want);
    }
    let concrete_calls = stats::snapshot().since(&start);
    assert_eq!(concrete_calls.plans, 100);
    assert_eq!(concrete.cache_len(), 100);
}

#[test]
fn transforms_on_symbolic_shapes() {
    let n = dim("b", 1..).unwrap();
    // jvp: the tangent of sum(sin(x) * x) along v.
    let f = |x: &Var| (x.sin() * x).sum_all();
    let jv = jit(jvp(f)).symbolic((&f64_of([n]), &f64_of([n]))).unwrap();
    // vmap over a symbolic batch of rows of 3.
    let row = |x: &Var| (x.exp() * x).sum_all() + x.max_all();
    let vm = jit(vmap(row)).symbolic(f64_of([n, 3])).unwrap();
    // vmap of grad: per-example gradients for a batch of any size.
    let per_example = jit(vmap(grad(row))).symbolic(f64_of([n, 3])).unwrap();
    for len in [1usize, 2, 5, 17] {
        let (x, v) = (vector(len, 0.3), vector(len, 2.0));
        let (p, t) = jv.eval((&x, &v)).unwrap();
        let (p0, t0) = jvp(f).eval((&x, &v)).unwrap();
        close(&p, &p0);
        close(&t, &t0);
        let xs = matrix(len, 3, 0.1);
        close(&vm.eval(&xs).unwrap(), &vmap(row).eval(&xs).unwrap());
        close(&per_example.eval(&xs).unwrap(), &vmap(grad(row)).eval(&xs).unwrap());
    }
}

/// Shapes as expressions: `2n` after a concatenation, `3n` after a
/// reshape, `floordiv(n + 1, 2)` after a strided slice, `n + 2` after a pad.
#[test]
fn shapes_are_expressions() {
    let n = dim("k", 1..=64).unwrap();
    let f = |x: &Var| {
        let doubled = concatenate(&[x, &(x * 2.0)], 0); // [2k]
        let flat = x.broadcast_to(&[3, x.shape()[0]]).reshape(&[-1]); // [3k]
        let strided = x.slice(&[SliceSpec { start: None, stop: None, step: 2 }]); // [ceil(k/2)]
        let padded = x.pad(&[(1, 1)], 0.5); // [k + 2]
        vec![doubled, flat, strided.exp(), padded.cumsum(0, false)]
    };
    let s = jit(f).symbolic(f64_of([n])).unwrap();
    let types = anvil::eval_shape(&f, f64_of([n])).unwrap();
    let shown: Vec<String> = types.leaves.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["f64[2*k]", "f64[3*k]", "f64[floordiv(k + 1, 2)]", "f64[k + 2]"]);
    for len in [1usize, 2, 7, 10] {
        let x = vector(len, 0.9);
        for (g, w) in s.eval(&x).unwrap().iter().zip(&f.eval(&x).unwrap()) {
            close(g, w);
        }
    }
}

#[test]
fn binding_errors_name_the_variable_and_the_sizes() {
    let n = dim("m", 2..=6).unwrap();
    let f = jit(|x: &Var, y: &Var| (x * y).sum_all()).symbolic((&f64_of([n]), &f64_of([n, 2])));
    let f = f.unwrap();
    let e = f.eval((&vector(7, 0.0), &matrix(7, 2, 0.0))).unwrap_err().to_string();
    assert!(e.contains("`m` = 7") && e.contains("2..=6"), "{e}");
    let e = f.eval((&vector(3, 0.0), &matrix(4, 2, 0.0))).unwrap_err().to_string();
    assert!(e.contains("[m, 2]") && e.contains("m = 3") && e.contains("[4, 2]"), "{e}");
    let e = f.eval((&vector(3, 0.0), &matrix(3, 5, 0.0))).unwrap_err().to_string();
    assert!(e.contains("[m, 2]") && e.contains("[3, 5]"), "{e}");
    assert!(f.eval((&vector(3, 0.0).cast(DType::F32), &matrix(3, 2, 0.0))).is_err());

    // An equality the rules could not decide is a constraint, checked when
    // a call binds the variables: never a silent broadcast.
    let (p, q) = (dim("p", 1..).unwrap(), dim("q", 1..).unwrap());
    let add = jit(|x: &Var, y: &Var| x + y).symbolic((&f64_of([p]), &f64_of([q]))).unwrap();
    assert_eq!(add.constraints().len(), 1);
    let ok = add.eval((&vector(3, 0.0), &vector(3, 1.0))).unwrap();
    close(&ok, &(|x: &Var, y: &Var| x + y).eval((&vector(3, 0.0), &vector(3, 1.0))).unwrap());
    let e = add.eval((&vector(3, 0.0), &vector(1, 1.0))).unwrap_err().to_string();
    assert!(e.contains("p = 3") && e.contains("q = 1"), "{e}");
    // Bound to 1, a symbolic dimension still does not broadcast.
    let r = dim("r", 1..).unwrap();
    let add3 = jit(|x: &Var, y: &Var| x + y).symbolic((&f64_of([r]), &f64_of([3]))).unwrap();
    assert!(add3.eval((&vector(3, 0.0), &vector(3, 1.0))).is_ok());
    let e = add3.eval((&vector(1, 0.0), &vector(3, 1.0))).unwrap_err().to_string();
    assert!(e.contains("r = 1"), "{e}");
}

/// A plugin op whose shape rule does its own arithmetic on a dimension is
/// refused on a symbolic input, naming the op.
#[test]
fn a_concrete_only_shape_rule_is_an_error_naming_the_op() {
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct Grow;
    impl Op for Grow {
        fn name(&self) -> &'static str {
            "myplugin.grow"
        }
        fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
            Ok(inputs[0].with_shape(vec![inputs[0].shape()[0] + 1]))
        }
    }
    let n = dim("g", 1..).unwrap();
    let f = |x: &Var| Var::apply_op(Box::new(Grow), &[x]).sum_all();
    let e = jit(f).symbolic(f64_of([n])).unwrap_err().to_string();
    assert!(e.contains("myplugin.grow") && e.contains("symbolic"), "{e}");
}

/// Jacobians of symbolic size `n × n`, Hessians and a matrix product with
/// a symbolic batch, against the concrete path at several lengths.
#[test]
fn jacobians_and_products_of_symbolic_size() {
    let n = dim("jn", 1..).unwrap();
    let f = |x: &Var| x.sin() * x.sum_all();
    let loss = |x: &Var| (x.sin() * x).sum_all() + x.square().mean();
    let w = matrix(3, 2, 4.0);
    let product = |x: &Var| x.matmul(&w).tanh();
    let jf = jit(jacfwd(f)).symbolic(f64_of([n])).unwrap();
    let jr = jit(jacrev(f)).symbolic(f64_of([n])).unwrap();
    let h = jit(hessian(loss)).symbolic(f64_of([n])).unwrap();
    let mm = jit(product).symbolic(f64_of([n, 3])).unwrap();
    for len in [1usize, 2, 3, 6, 11] {
        let x = vector(len, 0.2);
        let j = jf.eval(&x).unwrap();
        assert_eq!(j.shape(), &[len, len]);
        close(&j, &jacfwd(f).eval(&x).unwrap());
        close(&jr.eval(&x).unwrap(), &jacrev(f).eval(&x).unwrap());
        close(&h.eval(&x).unwrap(), &hessian(loss).eval(&x).unwrap());
        let xs = matrix(len, 3, 0.3);
        close(&mm.eval(&xs).unwrap(), &product.eval(&xs).unwrap());
    }
}

/// `iota`, `eye` and `full` of a symbolic size.
#[test]
fn generators_of_symbolic_size() {
    let n = dim("e", 1..).unwrap();
    let f = |x: &Var| {
        let k = x.shape()[0];
        vec![x + &iota(&[k], 0), eye(k).matmul(x) * 2.0, full(&[k, 2], 1.5) * x.sum_all()]
    };
    let s = jit(f).symbolic(f64_of([n])).unwrap();
    for len in [1usize, 4, 9] {
        let x = vector(len, 0.4);
        for (g, w) in s.eval(&x).unwrap().iter().zip(&f.eval(&x).unwrap()) {
            close(g, w);
        }
    }
}

/// `cond`, `fori_loop`, `while_loop` and `scan` over a symbolic length,
/// and the gradient of a scan, against the concrete path. (A loop's body
/// is specialised and compiled once per binding the plan meets; the
/// function is traced, transformed and planned once.)
#[test]
fn control_flow_over_symbolic_shapes() {
    let n = dim("cf", 1..).unwrap();
    let branch = |x: &Var| -> anvil::Result<Var> {
        cond(&x.sum_all().gt(&x.sum_all().zeros_like()), |x: &Var| x.sin(), |x: &Var| x * 2.0, x)
    };
    let fl = |x: &Var| -> anvil::Result<Var> {
        fori_loop(0i64, 3i64, |_i: &Var, c: &Var| c * 0.5 + c.sin(), x)
    };
    let wl = |x: &Var| -> anvil::Result<Var> {
        let big = |c: &Var| c.sum_all().abs().gt(&c.sum_all().full_like(0.1));
        while_loop(big, |c: &Var| c * 0.5, x)
    };
    let running = |x: &Var| -> anvil::Result<(Var, Var)> {
        scan(|c: &Var, xi: &Var| (c * 0.5 + xi, c * xi), x.sum_all(), x)
    };
    let scan_loss = |x: &Var| running(x).map(|(c, ys)| c + ys.sum_all());
    let s_branch = jit(branch).symbolic(f64_of([n])).unwrap();
    let s_fl = jit(fl).symbolic(f64_of([n])).unwrap();
    let s_wl = jit(wl).symbolic(f64_of([n])).unwrap();
    let s_scan = jit(running).symbolic(f64_of([n])).unwrap();
    let s_grad = jit(grad(scan_loss)).symbolic(f64_of([n])).unwrap();
    let start = stats::snapshot();
    let mut got = Vec::new();
    for len in [1usize, 4, 9] {
        let x = vector(len, 0.4);
        let (c, ys) = s_scan.eval(&x).unwrap();
        let outs =
            [s_branch.eval(&x).unwrap(), s_fl.eval(&x).unwrap(), s_wl.eval(&x).unwrap(), c, ys];
        let g = s_grad.eval(&x).unwrap();
        got.push((x, outs, g));
    }
    assert_eq!(stats::snapshot().since(&start), stats::Stats::default());
    for (x, [b, f, w, c, ys], g) in &got {
        close(b, &branch.eval(x).unwrap());
        close(f, &fl.eval(x).unwrap());
        close(w, &wl.eval(x).unwrap());
        let (c0, ys0) = running.eval(x).unwrap();
        close(c, &c0);
        close(ys, &ys0);
        close(g, &grad(scan_loss).eval(x).unwrap());
    }
}

/// Slices, pads and concatenations on a symbolic axis under `grad`: NumPy's
/// negative starts and steps (`x[-3:]`, `x[::-1]`, `x[::-2]`), and the
/// transposes (a pad, an interleave) built from sizes that are dimensions,
/// equal to the concrete path at every length.
#[test]
fn slices_pads_and_concatenations_differentiate_on_a_symbolic_axis() {
    let n = dim("n", 3..=12).unwrap();
    let f = |x: &Var| {
        let tail = x.i(ix![-3..]).square().sum_all();
        let rev = (x.i(ix![..; -1]) * x).sum_all();
        let every_other = x.i(ix![..; -2]).sin().sum_all();
        let from_front = x.i(ix![1..; 3]).exp().sum_all();
        let shifted = (x.i(ix![1..]) * x.i(ix![..-1])).sum_all();
        let padded = x.pad(&[(1, 2)], 0.0).cumsum(0, false).sum_all();
        let joined = concatenate(&[x, &x.sin(), &x.i(ix![..2])], 0).square().sum_all();
        tail + rev + every_other + from_front + shifted + padded + joined
    };
    let value = jit(f).symbolic(f64_of([n])).unwrap();
    let g = jit(grad(f)).symbolic(f64_of([n])).unwrap();
    for len in 3..=12 {
        let x = vector(len, 0.4);
        close(&value.eval(&x).unwrap(), &jit(f).eval(&x).unwrap());
        close(&g.eval(&x).unwrap(), &jit(grad(f)).eval(&x).unwrap());
    }
    // No clamping on a symbolic axis: `x[-3:]` needs n >= 3, checked at the call.
    let short =
        jit(|x: &Var| x.i(ix![-3..]).sum_all()).symbolic(f64_of([dim("m", 1..=8).unwrap()]));
    let e = short.unwrap().eval(vector(2, 0.0)).unwrap_err().to_string();
    assert!(e.contains("m = 2"), "{e}");
}

/// `reshape(-1, 2)` of a symbolic length: `floordiv(n, 2)` rows, with
/// `n mod 2 == 0` checked when a call binds `n`.
#[test]
fn an_inferred_axis_of_an_inexact_quotient_is_a_constraint() {
    let n = dim("n", 1..=20).unwrap();
    let s = jit(|x: &Var| x.reshape(&[-1, 2]).sum(&[1])).symbolic(f64_of([n])).unwrap();
    let x = vector(6, 0.0);
    close(&s.eval(&x).unwrap(), &jit(|x: &Var| x.reshape(&[-1, 2]).sum(&[1])).eval(&x).unwrap());
    let e = s.eval(vector(5, 0.0)).unwrap_err().to_string();
    assert!(e.contains("mod(n, 2)") && e.contains("n = 5"), "{e}");
    // The message of a bad concrete reshape shows -1 as written.
    let e = jit(|x: &Var| x.reshape(&[-1, 4])).eval(vector(6, 0.0)).unwrap_err().to_string();
    assert!(e.contains("[-1, 4]"), "{e}");
}

/// Square factorisations of a symbolic size differentiate (LU, QR, the
/// diagonal); sizes whose order is unknown (`m × n` with independent
/// variables) are refused with an error naming the op, never a wrong shape.
#[test]
fn factorisations_of_a_symbolic_size() {
    let n = dim("n", 2..=6).unwrap();
    let f = |a: &Var| {
        let (p, l, u) = anvil::linalg::lu(a);
        let (q, r) = anvil::linalg::qr(a, anvil::linalg::QrMode::Reduced);
        let d = anvil::linalg::diagonal(&a.matmul(&a.transpose()), 0)
            + anvil::linalg::diagonal(a, -1).sum_all();
        (p.matmul(&l).matmul(&u) - a).square().sum_all()
            + l.sin().sum_all()
            + u.sum_all()
            + (q.matmul(&r).sum_all() * r.abs().sum_all())
            + d.sqrt().sum_all()
    };
    let g = jit(grad(f)).symbolic(f64_of([n, n])).unwrap();
    for len in [2, 4, 6] {
        let a = matrix(len, len, 0.3);
        close(&g.eval(&a).unwrap(), &jit(grad(f)).eval(&a).unwrap());
    }
    let m = dim("m", 2..=6).unwrap();
    let e = jit(|a: &Var| anvil::linalg::svdvals(a)).symbolic(f64_of([m, n])).err().unwrap();
    assert!(e.to_string().contains("svd") && e.to_string().contains("min(m, n)"), "{e}");
}

/// A symbolic size converted to a number with `as` and used as a scalar in
/// the trace is an error that says what to use instead, not the handle's
/// value standing in for the size.
#[test]
fn a_symbolic_size_used_as_a_number_is_an_error() {
    let n = dim("n", 1..=8).unwrap();
    let by_as = |x: &Var| x.sum_all() / (x.shape()[0] as f64);
    let Err(e) = jit(by_as).symbolic(f64_of([n])) else { panic!("the handle's number was used") };
    let e = e.to_string();
    assert!(e.contains("symbolic dimension n") && e.contains("dim_size"), "{e}");
    let as_int = |x: &Var| x.sum_all() * (x.shape()[0] as i64);
    assert!(jit(as_int).symbolic(f64_of([n])).is_err());
    // Concrete shapes: the same function is fine.
    let x = vector(4, 0.0);
    let want = x.to_vec::<f64>().unwrap().iter().sum::<f64>() / 4.0;
    assert!((jit(by_as).eval(&x).unwrap().item().unwrap() - want).abs() < 1e-15);
    // Large ordinary numbers are not mistaken for dimensions.
    let big = jit(|x: &Var| x.sum_all() * 4.7e18 + 1e19).symbolic(f64_of([n])).unwrap();
    assert!(big.eval(&x).unwrap().item().unwrap().is_finite());
}

/// Indexing on a symbolic axis: integers counted from the end, traced
/// indices (wrapped and clamped against the bound size), lists, `lax`'s
/// dynamic slices and interior padding, and `.at[...]` updates — values
/// and gradients compiled once and equal to the concrete path at every
/// length.
#[test]
fn indexing_and_indexed_updates_on_a_symbolic_axis() {
    use anvil::lax;
    let n = dim("n", 2..=9).unwrap();
    type F = fn(&Var) -> Var;
    let cases: [(&str, F); 16] = [
        ("x[-1]", |x| x.i(ix![-1]) * x.i(ix![0])),
        ("x[[0, -2, 1]]", |x| x.i(ix![[0, -2, 1]]).sin()),
        ("x[argmax]", |x| x.i(ix![x.argmax(0, false)]) * 2.0),
        ("x[argmin - n]", |x| x.i(ix![&x.argmin(0, false) - x.dim_size(0).cast(DType::I64)])),
        ("x[idx] clamped", |x| {
            let idx = Tensor::from_vec(vec![-20i64, -1, 0, 3, 40], &[5]).unwrap();
            x.i(ix![&x.constant_like(idx)]).exp()
        }),
        ("dynamic_slice", |x| {
            lax::dynamic_slice(x, &[&(x.argmax(0, false) - 1i64)], &[2]).square()
        }),
        ("dynamic_update_slice", |x| {
            let u = x.i(ix![..2]).cos();
            lax::dynamic_update_slice(x, &u, &[&x.argmin(0, false)]) * x
        }),
        ("pad interior", |x| lax::pad(x, &(x.sum_all() * 0.5), &[(1, -1, 2)]).cumsum(0, false)),
        ("pad negative", |x| lax::pad(x, &x.i(ix![0]), &[(-1, 2, 0)]) * 3.0),
        ("at[0].set", |x| x.at(ix![0]).set(5.0) * x),
        ("at[-1].add", |x| x.at(ix![-1]).add(x.i(ix![0]))),
        ("at[1..].mul", |x| x.at(ix![1..]).mul(x.i(ix![..-1]))),
        ("at[::-2].set", |x| x.at(ix![..;-2]).set(x.i(ix![..;-2]).square())),
        ("at[[0, 0, -1]].add", |x| x.at(ix![[0, 0, -1]]).add(x.i(ix![..3]))),
        ("at[[-1, -1]].set", |x| x.at(ix![[-1, -1]]).set(2.0)),
        ("at[argmax].max", |x| x.at(ix![x.argmax(0, false)]).max(&(x.sum_all() * 0.0))),
    ];
    for (what, f) in cases {
        let loss = move |x: &Var| (f(x) * x.i(ix![..1]).sum_all()).sin().sum_all();
        let value = jit(f).symbolic(f64_of([n])).unwrap_or_else(|e| panic!("{what}: {e}"));
        let g = jit(grad(loss)).symbolic(f64_of([n])).unwrap_or_else(|e| panic!("{what}: {e}"));
        for len in [3, 4, 7, 9] {
            let x = vector(len, 0.3 * len as f64);
            let got = value.eval(&x).unwrap_or_else(|e| panic!("{what} at {len}: {e}"));
            assert_eq!(got.shape(), jit(f).eval(&x).unwrap().shape(), "{what} at {len}");
            assert!(
                got.allclose(&jit(f).eval(&x).unwrap(), 1e-13, 1e-14),
                "{what} at {len}: {got} vs {}",
                jit(f).eval(&x).unwrap()
            );
            let gg = g.eval(&x).unwrap_or_else(|e| panic!("{what}: grad at {len}: {e}"));
            assert!(gg.allclose(&jit(grad(loss)).eval(&x).unwrap(), 1e-12, 1e-13), "{what}");
        }
    }
    // An integer out of range for some lengths is a constraint checked at
    // the call, naming the variable; so is the interior pad's n >= 1.
    let m = dim("m", 1..=9).unwrap();
    let third = jit(|x: &Var| x.i(ix![-3])).symbolic(f64_of([m])).unwrap();
    assert_eq!(
        third.eval(vector(5, 0.0)).unwrap().item().unwrap(),
        vector(5, 0.0).to_vec::<f64>().unwrap()[2]
    );
    let e = third.eval(vector(2, 0.0)).unwrap_err().to_string();
    assert!(e.contains("needs m >= 3, which fails with m = 2"), "{e}");
    // Slice bounds beyond every size clamp as NumPy's do, on either kind of axis.
    let far = |x: &Var| {
        let all = x.slice_axis(0, Some(i64::MIN), Some(i64::MAX), 1).sum_all();
        let none = x.slice_axis(0, Some(i64::MAX), None, 1).sum_all();
        let back = x.slice_axis(0, Some(i64::MAX), Some(i64::MIN), -1).sum_all();
        let no_back = x.slice_axis(0, Some(i64::MIN), None, -1).sum_all();
        all + none * 10.0 + back * 2.0 + no_back * 100.0
    };
    let sym = jit(far).symbolic(f64_of([m])).unwrap();
    for len in [1, 4] {
        let x = vector(len, 0.0);
        let want = 3.0 * x.to_vec::<f64>().unwrap().iter().sum::<f64>();
        for got in [sym.eval(&x).unwrap(), jit(far).eval(&x).unwrap()] {
            assert!((got.item().unwrap() - want).abs() < 1e-13, "{got} vs {want}");
        }
    }
    // Repeated indices on an axis that may be empty: no update at n = 0.
    let rows = dim("rows", 0..=4).unwrap();
    let twice = |x: &Var| x.at(ix![.., [0, 0]]).set(1.0) + x.at(ix![.., [1, 1]]).add(0.5);
    let t = jit(twice).symbolic(f64_of([rows, 3])).unwrap();
    for len in [0, 2] {
        let x = Tensor::zeros(&[len, 3]).unwrap();
        let got = t.eval(&x).unwrap_or_else(|e| panic!("{len} rows: {e}"));
        assert_eq!(
            got.to_vec::<f64>().unwrap(),
            jit(twice).eval(&x).unwrap().to_vec::<f64>().unwrap()
        );
    }
    // argmax of an axis that may be empty: an error at the call, as for a concrete one.
    let q = dim("q", 0..=4).unwrap();
    let am = jit(|x: &Var| x.argmax(0, false)).symbolic(f64_of([q])).unwrap();
    assert_eq!(am.eval(vector(3, 1.0)).unwrap().shape(), &[] as &[usize]);
    let e = am.eval(Tensor::zeros(&[0]).unwrap()).unwrap_err().to_string();
    assert!(e.contains("argmax") && e.contains("q = 0"), "{e}");
    let e = jit(|x: &Var| x.i(ix![i64::MIN])).symbolic(f64_of([m])).unwrap_err().to_string();
    assert!(e.contains("out of bounds") || e.contains("out of range"), "{e}");
}

/// `fori_loop` bounds from a symbolic shape: `x.shape()[0]` is the loop's
/// symbolic length (a scan, so reverse mode works), from any start; a
/// bound computed by raw arithmetic on the handle (`2 * n`) is an error
/// naming fori_loop, not a loop of some other length.
#[test]
fn fori_loop_bounds_from_a_symbolic_shape() {
    let n = dim("n", 2..=9).unwrap();
    let tail_sum = |x: &Var| -> anvil::Result<Var> {
        let zero = x.i(ix![0]).zeros_like();
        let s = fori_loop(1, x.shape()[0], |i: &Var, c: &Var| c + x.i(ix![i]).square(), &zero)?;
        let t = fori_loop(0, x.shape()[0], |i: &Var, c: &Var| c + x.i(ix![i]), &zero)?;
        Ok(s * t)
    };
    let value = jit(tail_sum).symbolic(f64_of([n])).unwrap();
    let g = jit(grad(tail_sum)).symbolic(f64_of([n])).unwrap();
    for len in [2, 5, 9] {
        let x = vector(len, 0.2);
        let xs = x.to_vec::<f64>().unwrap();
        let want = xs[1..].iter().map(|v| v * v).sum::<f64>() * xs.iter().sum::<f64>();
        assert!((value.eval(&x).unwrap().item().unwrap() - want).abs() < 1e-12);
        close(&g.eval(&x).unwrap(), &jit(grad(tail_sum)).eval(&x).unwrap());
    }
    let doubled = |x: &Var| fori_loop(0, 2 * x.shape()[0], |_: &Var, c: &Var| c * 2.0, x.sum_all());
    let e = jit(doubled).symbolic(f64_of([n])).unwrap_err().to_string();
    assert!(e.contains("fori_loop") && e.contains("dim_mul"), "{e}");
    // The same through `as i64`.
    let as_int = |x: &Var| {
        let n = x.shape()[0] as i64;
        fori_loop(1i64, n, |i: &Var, c: &Var| c + x.i(ix![i]), x.i(ix![0]))
    };
    let sym = jit(as_int).symbolic(f64_of([n])).unwrap();
    let x = vector(4, 0.2);
    close(&sym.eval(&x).unwrap(), &jit(as_int).eval(&x).unwrap());
    let doubled =
        |x: &Var| fori_loop(0i64, x.shape()[0] as i64 + 1, |_: &Var, c: &Var| c * 2.0, x.sum_all());
    let e = jit(doubled).symbolic(f64_of([n])).unwrap_err().to_string();
    assert!(e.contains("fori_loop") && e.contains("dim_mul"), "{e}");
}

/// The derivatives of `cumprod`, `cummax`, `cummin` and `cumlogsumexp` on
/// a symbolic axis (a sequential scan there: the parallel scan's recursion
/// halves a concrete length) equal the concrete ones, both ways, with
/// `reverse`, through exact zeros, and to second order; so does
/// `associative_scan` with a combine of its own.
#[test]
fn cumulative_derivatives_on_a_symbolic_axis() {
    use anvil::lax::{associative_scan, LaxExt};
    let n = dim("n", 1..=9).unwrap();
    let f = |x: &Var| {
        let w = x.full_like(1.0).cumsum(1, false); // 1, 2, 3, ... along the axis
        let terms = [
            x.cumprod(1, false),
            x.cumprod(1, true),
            x.cummax(1, false),
            x.cummin(1, true),
            x.cumlogsumexp(1, false),
            x.cumlogsumexp(1, true),
        ];
        terms.iter().map(|t| (t * &w).sum_all()).reduce(|a, b| a + b).unwrap()
    };
    let g = jit(grad(f)).symbolic(f64_of([2, n])).unwrap();
    let j = jit(jacfwd(f)).symbolic(f64_of([2, n])).unwrap();
    let h = jit(hessian(f)).symbolic(f64_of([2, n])).unwrap();
    for len in [1, 2, 5, 9] {
        // Distinct values (no ties, whose split differs), one exact zero.
        let mut v: Vec<f64> = (0..2 * len).map(|i| 0.3 + 0.37 * ((i * 7 % 11) as f64)).collect();
        v[len / 2] = 0.0;
        let x = Tensor::from_vec(v, &[2, len]).unwrap();
        close(&g.eval(&x).unwrap(), &jit(grad(f)).eval(&x).unwrap());
        close(&j.eval(&x).unwrap(), &jit(jacfwd(f)).eval(&x).unwrap());
        close(&h.eval(&x).unwrap(), &jit(hessian(f)).eval(&x).unwrap());
    }
    // Per-row gradients (vmap of grad) of a function of a vector.
    let row = |x: &Var| (x.cumprod(0, false) + x.cummax(0, true)).square().sum_all();
    let per_row = jit(vmap(grad(row))).symbolic(f64_of([3, n])).unwrap();
    let x = Tensor::from_vec((0..12).map(|i| 0.5 + 0.1 * (i * 5 % 7) as f64).collect(), &[3, 4]);
    let x = x.unwrap();
    close(&per_row.eval(&x).unwrap(), &jit(vmap(grad(row))).eval(&x).unwrap());
    let add = |a: &[Var], b: &[Var]| vec![&a[0] * 0.5 + &b[0]];
    let leaky = move |x: &Var| associative_scan(&add, std::slice::from_ref(x), false, 0).remove(0);
    let sym = jit(leaky).symbolic(f64_of([n])).unwrap();
    let x = Tensor::from_vec(vec![1.0, 2.0, 4.0, 8.0], &[4]).unwrap();
    assert_eq!(sym.eval(&x).unwrap().to_vec::<f64>().unwrap(), [1.0, 2.5, 5.25, 10.625]);
    // An empty axis has no first element: a constraint error at the call.
    let m = dim("m", 0..=4).unwrap();
    let empty = Tensor::zeros(&[2, 0]).unwrap();
    let e = jit(grad(f)).symbolic(f64_of([2, m])).and_then(|g0| g0.eval(&empty)).unwrap_err();
    assert!(e.to_string().contains("m >= 1, which fails with m = 0"), "{e}");
}
