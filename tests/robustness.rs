//! Regression tests for the defects a generator of malformed programs found
//! (issue 18): each once panicked, aborted the process, hung or returned a
//! wrong value. Each must now give `Err` or the right result.

use anvil::prelude::*;
use anvil::{Error, Parallelism};

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape).unwrap()
}

/// Runs `f` on a thread with a 2 MiB stack (the default of spawned threads)
/// and returns its result; a stack overflow would abort the test binary.
fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).unwrap().join().unwrap()
}

/// `n` alternating elementwise ops: one long fusible chain.
fn chain(x: &Var, n: usize) -> Var {
    let mut y = x.clone();
    for i in 0..n {
        y = if i % 2 == 0 { y.sin() } else { &y * 1.0001 };
    }
    y
}

#[test]
fn a_100k_op_chain_compiles_and_runs_on_a_2_mib_stack() {
    let out = on_small_stack(|| {
        let x = Tensor::full(&[4], 0.5).unwrap();
        jit(|x: &Var| chain(x, 100_000)).eval(&x).map(|t| t.to_vec::<f64>().unwrap())
    })
    .unwrap();
    // sin(sin(...)) converges slowly to 0; the reference is the same loop.
    let mut want = 0.5f64;
    for i in 0..100_000 {
        want = if i % 2 == 0 { want.sin() } else { want * 1.0001 };
    }
    assert!(out.iter().all(|&v| (v - want).abs() < 1e-12), "{out:?} vs {want}");
}

#[test]
fn long_chains_differentiate_and_vectorise_on_a_2_mib_stack() {
    let (g, v, j) = on_small_stack(|| {
        let x = Tensor::full(&[3], 0.5).unwrap();
        let f = |x: &Var| chain(x, 10_000).sum_all();
        let g = grad(f).eval(&x).unwrap().to_vec::<f64>().unwrap();
        let v = vmap(|x: &Var| chain(x, 10_000)).eval(&x).unwrap().to_vec::<f64>().unwrap();
        let j = jacfwd(f).eval(&x).unwrap().to_vec::<f64>().unwrap();
        (g, v, j)
    });
    // d/dx of the chain by the chain rule, step by step.
    let (mut y, mut d) = (0.5f64, 1.0f64);
    for i in 0..10_000 {
        if i % 2 == 0 {
            d *= y.cos();
            y = y.sin();
        } else {
            d *= 1.0001;
            y *= 1.0001;
        }
    }
    for k in 0..3 {
        assert!((g[k] - d).abs() < 1e-12 * d.abs().max(1.0), "{g:?} vs {d}");
        assert!((j[k] - d).abs() < 1e-12 * d.abs().max(1.0), "{j:?} vs {d}");
        assert!((v[k] - y).abs() < 1e-12, "{v:?} vs {y}");
    }
}

#[test]
fn shape_arithmetic_that_overflows_is_an_error() {
    let huge = usize::MAX / 2 + 1;
    let cases: Vec<(&str, Result<Tensor>)> = vec![
        ("broadcast_to", jit(|x: &Var| x.broadcast_to(&[usize::MAX, 2])).eval(t(&[2]))),
        ("broadcast_to", jit(|x: &Var| x.broadcast_to(&[huge, 4, 1])).eval(t(&[1]))),
        ("pad", jit(|x: &Var| x.pad(&[(usize::MAX, 1)], 0.0)).eval(t(&[2]))),
        ("pad", jit(|x: &Var| x.pad(&[(huge, huge)], 0.0)).eval(t(&[2]))),
        (
            "concatenate",
            jit(|x: &Var| {
                // Eight addressable bool values of 2^61 elements: joined, 2^64.
                let b = x.lt(x).broadcast_to(&[1 << 61, 1]);
                anvil::concatenate(&[&b, &b, &b, &b, &b, &b, &b, &b], 0)
            })
            .eval(t(&[1])),
        ),
        ("reshape", jit(|x: &Var| x.reshape(&[i64::MAX, 4])).eval(t(&[4]))),
        (
            "matmul",
            jit(|x: &Var| {
                // Batch axes [2^40, 1] and [1, 2^30] broadcast to 2^70.
                let a = x.broadcast_to(&[1 << 40, 1, 1, 2]);
                let b = x.broadcast_to(&[1, 1 << 30, 2, 1]);
                a.matmul(&b)
            })
            .eval(t(&[1])),
        ),
    ];
    for (op, r) in cases {
        let e = r.expect_err(op);
        assert!(e.to_string().contains(op), "{op}: {e}");
        assert!(matches!(e, Error::Shape { .. } | Error::InvalidArgument { .. }), "{op}: {e:?}");
    }
}

#[test]
fn huge_sizes_are_errors_not_capacity_panics() {
    assert!(Tensor::zeros(&[usize::MAX, 2]).is_err());
    assert!(Tensor::ones(&[1 << 62]).is_err());
    assert!(Tensor::linspace(0.0, 1.0, usize::MAX).is_err());
    assert!(Tensor::arange(0.0, 1e300, 1e-300).is_err());
    assert!(Tensor::eye(1 << 32).is_err());
    let e = vmap(|x: &Var| x * 2.0).in_axes(None).axis_size(usize::MAX).eval(t(&[2])).unwrap_err();
    assert!(e.to_string().contains("axis_size"), "{e}");
    let e = jit(|x: &Var| x + eye(1 << 32).sum_all()).eval(t(&[1])).unwrap_err();
    assert!(e.to_string().contains("eye"), "{e}");
}

#[test]
fn an_impossible_allocation_is_an_error_naming_the_bytes() {
    // 2^40 f64s: 8 TiB. Refused before anything runs.
    let e = jit(|x: &Var| x.broadcast_to(&[1 << 20, 1 << 20])).eval(t(&[1])).unwrap_err();
    match &e {
        Error::OutOfMemory { bytes, .. } => assert_eq!(*bytes, 8 << 40, "{e}"),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert!(e.to_string().contains("memory budget"), "{e}");
    // The same for a generator folded at compile time.
    let e = jit(|x: &Var| x + full(&[1 << 20, 1 << 20], 1.0).sum_all()).eval(t(&[1])).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e:?}");
    // A constructor asks the allocator and reports its refusal.
    let e = Tensor::zeros_of(&[1 << 40, 1 << 20], DType::Bool).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { bytes, .. } if bytes == 1 << 60), "{e:?}");
}

#[test]
fn the_memory_budget_is_configurable_and_checked_against_the_plans_peak() {
    // The result is a full-size value (a chain ended by a sum would
    // materialise nothing: it is one pass).
    let f = jit(|x: &Var| x.exp() + x.sin());
    let x = t(&[1 << 16]); // 512 KiB per value
    let small = Parallelism::default().memory_budget(100 << 10);
    let e = f.eval_with(&x, &small).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("memory budget of 102400 bytes"), "{msg}");
    assert!(f.eval_with(&x, &Parallelism::default().memory_budget(16 << 20)).is_ok());
    // The peak is what the plan holds at once, not the sum of its values.
    let g = anvil::lower(&|x: &Var| x.exp().sin().cos().tanh(), &x).unwrap();
    let plan = anvil::cpu::compile(&g).unwrap();
    assert!(plan.peak_bytes() <= 2 * (1 << 16) * 8, "{}", plan.peak_bytes());
}

#[test]
fn thread_settings_are_validated() {
    let x = Tensor::full(&[1 << 16], 1.0).unwrap();
    for threads in [0, 1, usize::MAX, 1 << 62] {
        let p = Parallelism::default().threads(threads).min_parallel_elems(0);
        assert!(p.thread_count() >= 1 && p.thread_count() <= 1024);
        let s = jit(|x: &Var| x.sum_all()).eval_with(&x, &p).unwrap();
        assert_eq!(s.item().unwrap(), (1 << 16) as f64);
        let m = jit(|a: &Var| a.matmul(a)).eval_with(Tensor::ones(&[64, 64]).unwrap(), &p).unwrap();
        assert_eq!(m.get(&[0, 0]).unwrap().to_f64(), 64.0);
    }
}

#[test]
fn floats_with_integer_arrays_promote_as_in_jax() {
    let i = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
    let check = |f: &dyn Fn(&Var) -> Var, dtype: DType, want: &[f64]| {
        let out = jit(|x: &Var| f(x)).eval(&i).unwrap();
        assert_eq!(out.dtype(), dtype);
        assert_eq!(out.to_f64_vec(), want);
    };
    check(&|x| x * 2.5, DType::F64, &[2.5, 5.0, 7.5]);
    check(&|x| x + 0.7, DType::F64, &[1.7, 2.7, 3.7]);
    check(&|x| x / 2.0, DType::F64, &[0.5, 1.0, 1.5]);
    check(&|x| 1.0 - x, DType::F64, &[0.0, -1.0, -2.0]);
    check(&|x| x.mean(), DType::F64, &[2.0]);
    check(&|x| x.var(&[0], false), DType::F64, &[2.0 / 3.0]);
    // Integer literals keep integer arrays integer; `/` is true division,
    // as JAX's and torch's (`lax::div` truncates, as `jax.lax.div`).
    check(&|x| x * 2 + 1, DType::I64, &[3.0, 5.0, 7.0]);
    check(&|x| x / 2, DType::F64, &[0.5, 1.0, 1.5]);
    check(&|x| anvil::lax::div(x, &x.full_like(2.0)), DType::I64, &[0.0, 1.0, 1.0]);
    check(&|x| x.pow(&x), DType::I64, &[1.0, 4.0, 27.0]);
    // Integer powers exactly, wrapping as XLA's (values from jnp.power).
    let a = Tensor::from_vec(vec![3i64, 3, 5, 0, 0, -2, 2, 1, -1, 7, 2], &[11]).unwrap();
    let b = Tensor::from_vec(vec![39i64, 40, 27, 0, 3, 5, -1, -3, -3, 1, 64], &[11]).unwrap();
    let p = jit(|a: &Var, b: &Var| a.pow(b)).eval((&a, &b)).unwrap();
    assert_eq!(
        p.to_vec::<i64>().unwrap(),
        [
            4052555153018976267,
            -6289078614652622815,
            7450580596923828125,
            1,
            0,
            -32,
            i64::MIN,
            1,
            -1,
            7,
            1
        ]
    );
    // A float literal never widens a float array.
    let f = Tensor::from_vec(vec![1f32, 2.0], &[2]).unwrap();
    assert_eq!(jit(|x: &Var| x * 2.5).eval(&f).unwrap().dtype(), DType::F32);
    // Arrays of different dtypes promote by JAX's lattice (bool < i64 < f32
    // < f64): i64 with f64 is f64, i64 with f32 is f32, f32 with f64 is f64.
    let sum = jit(|a: &Var, b: &Var| a + b);
    let y = sum.eval((&i, &t(&[3]))).unwrap();
    assert_eq!((y.dtype(), y.to_f64_vec()), (DType::F64, vec![1.0, 2.0, 3.0]));
    let g = Tensor::from_vec(vec![0.5f32, 1.5, 2.5], &[3]).unwrap();
    assert_eq!(sum.eval((&i, &g)).unwrap().dtype(), DType::F32);
    assert_eq!(sum.eval((&g, &t(&[3]))).unwrap().dtype(), DType::F64);
    let m =
        jit(|a: &Var, b: &Var| vec![a.maximum(b), a.lt(b), a.matmul(b), where_(&a.gt(b), a, b)]);
    let out = m.eval((&i, &g)).unwrap();
    assert_eq!(
        out.iter().map(Tensor::dtype).collect::<Vec<_>>(),
        [DType::F32, DType::Bool, DType::F32, DType::F32]
    );
}

/// The gradient of a function of a huge broadcast sums a chain that does
/// not vary along the broadcast axis: it is computed on one slice and
/// scaled (2^40 elements folded one by one took hours; 2^44 made the
/// parallel path allocate the chain and abort).
#[test]
fn reductions_over_a_huge_broadcast_are_computed_on_one_slice() {
    let x = Tensor::from_vec(vec![0.5, -2.0, 3.0], &[3]).unwrap();
    let n = 1usize << 40;
    let f = |x: &Var| x.broadcast_to(&[1 << 40, 3]).abs().sum_all();
    let g = grad(f).eval(&x).unwrap();
    assert_eq!(g.to_f64_vec(), [n as f64, -(n as f64), n as f64]);
    // Sums over broadcasts below and above the threshold (2^24 elements),
    // to the accuracy of a sequential fold of 2^23 terms.
    for rows in [1usize << 10, 1 << 23] {
        let s = jit(move |x: &Var| x.broadcast_to(&[rows, 3]).sin().sum(&[0])).eval(&x).unwrap();
        let want: Vec<f64> = x.to_f64_vec().iter().map(|v| v.sin()).collect();
        for (a, w) in s.to_f64_vec().iter().zip(&want) {
            assert!((a / rows as f64 - w).abs() < 1e-8, "{rows} rows: {a} against {w} x {rows}");
        }
    }
}

#[test]
fn size_zero_dimensions_work_through_ops_and_transforms() {
    let z = t(&[0, 3]);
    let z0 = t(&[0]);
    let shape = |r: Result<Tensor>| r.unwrap().shape().to_vec();
    let values = |r: Result<Tensor>| r.unwrap().to_f64_vec();
    assert_eq!(shape(jit(|x: &Var| x.sin()).eval(&z)), [0, 3]);
    assert_eq!(values(jit(|x: &Var| x.sum(&[0])).eval(&z)), [0.0; 3]);
    assert_eq!(values(jit(|x: &Var| x.prod(&[0], false)).eval(&z)), [1.0; 3]);
    // The identities of max and logsumexp; the mean of nothing is NaN (as NumPy's).
    assert_eq!(values(jit(|x: &Var| x.max(&[0], false)).eval(&z)), [f64::NEG_INFINITY; 3]);
    assert_eq!(values(jit(|x: &Var| x.logsumexp(&[0], false)).eval(&z)), [f64::NEG_INFINITY; 3]);
    assert!(values(jit(|x: &Var| x.mean()).eval(&z))[0].is_nan());
    // argmax of nothing has no answer.
    assert!(jit(|x: &Var| x.argmax(0, false)).eval(&z).is_err());
    let (a, b) = (Tensor::ones(&[2, 0]).unwrap(), Tensor::ones(&[0, 4]).unwrap());
    assert_eq!(values(jit(|x: &Var, y: &Var| x.matmul(y)).eval((&a, &b))), [0.0; 8]);
    assert_eq!(shape(jit(|x: &Var| anvil::concatenate(&[x, x], 1)).eval(&z)), [0, 6]);
    assert_eq!(shape(jit(|x: &Var| x.pad(&[(1, 1), (0, 0)], 0.0)).eval(&z)), [2, 3]);
    let none = Tensor::zeros_of(&[0], DType::I64).unwrap();
    assert_eq!(shape(jit(|x: &Var, i: &Var| x.take(i, 0)).eval((&t(&[3]), &none))), [0]);
    // Transforms over and into empty axes.
    assert_eq!(shape(vmap(|x: &Var| x.sin().sum_all()).eval(&z)), [0]);
    assert_eq!(shape(vmap(|x: &Var| x.sin()).chunk_size(2).eval(&z)), [0, 3]);
    assert_eq!(shape(grad(|x: &Var| x.sin().sum_all()).eval(&z)), [0, 3]);
    assert_eq!(shape(vmap(grad(|x: &Var| x.sin().sum_all())).eval(&z)), [0, 3]);
    assert_eq!(shape(jacfwd(|x: &Var| x.sin()).eval(&z0)), [0, 0]);
    assert_eq!(shape(jacrev(|x: &Var| x.sin()).eval(&z0)), [0, 0]);
    assert_eq!(shape(hessian(|x: &Var| x.sin().sum_all()).eval(&z0)), [0, 0]);
    let empty_out = jacfwd(|x: &Var| x.slice_axis(0, Some(0), Some(0), 1));
    assert_eq!(shape(empty_out.eval(t(&[3]))), [0, 3]);
    let scan_empty = jit(|c: &Var, xs: &Var| {
        scan(|c: &Var, x: &Var| (c + x, c * 2.0), c, xs).map(|(c, _): (Var, Var)| c)
    });
    assert_eq!(values(scan_empty.eval((&Tensor::ones(&[3]).unwrap(), &z))), [1.0; 3]);
    let fori_empty = jit(|x: &Var| fori_loop(0, 0, |_: &Var, c: &Var| c * 2.0, x));
    assert_eq!(shape(fori_empty.eval(&z0)), [0]);
}
