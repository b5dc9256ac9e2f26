//! Loops as the CPU runs them.
//!
//! - A warm loop allocates nothing per step: the cached call of a `scan`,
//!   of its gradient (a forward scan and a reverse one) and of a
//!   `while_loop` costs no more heap allocations at 1,000 steps than at
//!   10. Counted on the calling thread by a
//!   counting allocator (this binary only).
//! - The loop passes of the compile pipeline: the gradient of a scan runs
//!   one forward loop (the primal scan and the scan storing the residuals
//!   merged) and one reverse loop whose steps handle vectors only (the
//!   matrix's cotangent one product after the loop), and its values agree
//!   with the same function unrolled.

use anvil::prelude::*;
#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations_of;

/// An RK2 step of `dx/dt = tanh(A x + b) - x / 2` (W9's ODE, smaller).
fn ode(a: &Var, b: &Var, x0: &Var, steps: usize) -> anvil::Result<Var> {
    let rhs = |x: &Var| (a.matmul(x) + b).tanh() - x * 0.5;
    let step = |x: &Var, _: &()| {
        let k1 = rhs(x);
        let k2 = rhs(&(x + &(&k1 * 0.05)));
        (x + &((k1 + k2) * 0.05), x.sum_all())
    };
    let (x, ys) = scan_n(step, x0, steps)?;
    Ok(x.square().sum_all() + ys.sum_all())
}

/// [`ode`] at a number of steps (one closure type for every length).
fn ode_at(steps: usize) -> impl Fn(&Var, &Var, &Var) -> anvil::Result<Var> + Clone {
    move |a: &Var, b: &Var, x: &Var| ode(a, b, x, steps)
}

fn inputs() -> (Tensor, Tensor, Tensor) {
    let d = 6;
    let a = (0..d * d).map(|k| ((k as f64) * 0.37).sin() / 3.0).collect();
    let b = (0..d).map(|i| 0.2 * (i as f64).cos()).collect();
    let x = (0..d).map(|i| (0.7 * (i as f64 + 1.0)).sin()).collect();
    (
        Tensor::from_vec(a, &[d, d]).unwrap(),
        Tensor::from_vec(b, &[d]).unwrap(),
        Tensor::from_vec(x, &[d]).unwrap(),
    )
}

/// The allocations of a warm call of `short` and of `long`.
fn warm_calls(short: impl Fn() -> usize, long: impl Fn() -> usize) -> (usize, usize) {
    short();
    long();
    (
        allocations_of(|| {
            short();
        }),
        allocations_of(|| {
            long();
        }),
    )
}

#[test]
fn a_warm_scan_allocates_nothing_per_step() {
    let (a, b, x) = inputs();
    let (f10, f1000) = (jit(ode_at(10)), jit(ode_at(1000)));
    let c10 = || f10.eval((&a, &b, &x)).unwrap().item().unwrap();
    let c1000 = || f1000.eval((&a, &b, &x)).unwrap().item().unwrap();
    assert!(c10().is_finite() && c1000().is_finite());
    let (short, long) = warm_calls(|| c10() as usize, || c1000() as usize);
    assert!(short > 0, "the counter does not count");
    // No more at 1,000 steps than at 10 (a few fewer can happen: the
    // longer loop's stacked results are large enough to come from the pool).
    assert!(long <= short, "990 more steps cost {} more allocations", long as i64 - short as i64);
}

#[test]
fn a_warm_scan_gradient_allocates_nothing_per_step() {
    let (a, b, x) = inputs();
    let g10 = jit(value_and_grad(ode_at(10)).argnums(&[0, 1]));
    let g1000 = jit(value_and_grad(ode_at(1000)).argnums(&[0, 1]));
    let c10 = || {
        let (v, d) = g10.eval((&a, &b, &x)).unwrap();
        assert!(d[0].to_f64_vec().iter().all(|v| v.is_finite()));
        v.item().unwrap()
    };
    let c1000 = || {
        let (v, d) = g1000.eval((&a, &b, &x)).unwrap();
        assert!(d[0].to_f64_vec().iter().all(|v| v.is_finite()));
        v.item().unwrap()
    };
    let (short, long) = warm_calls(|| c10() as usize, || c1000() as usize);
    assert!(short > 0, "the counter does not count");
    // No more at 1,000 steps than at 10 (a few fewer can happen: the
    // longer loop's stacked results are large enough to come from the pool).
    assert!(long <= short, "990 more steps cost {} more allocations", long as i64 - short as i64);
}

#[test]
fn a_warm_while_loop_allocates_nothing_per_step() {
    // Newton for x^3 + a x = b on a small batch under vmap (a batched
    // predicate: the masked loop), stopped after `n` steps at most.
    let newton = |n: f64| {
        move |a: &Var, b: &Var| {
            let f = |x: &Var| x * x * x + a * x - b;
            let (x, _) = while_loop(
                |(x, it): &(Var, Var)| {
                    let go = f(x).abs().ge(&x.full_like(0.0));
                    go.select(&it.lt(&it.full_like(n)), &go)
                },
                |(x, it): &(Var, Var)| (x - &(f(x) / (x * x * 3.0 + a) * 0.01), it + 1.0),
                (&a.zeros_like(), &a.zeros_like()),
            )
            .unwrap();
            x
        }
    };
    let (f10, f1000) = (jit(vmap(newton(10.0))), jit(vmap(newton(1000.0))));
    let a = Tensor::from_vec(vec![1.0, 1.5, 2.0, 0.5], &[4]).unwrap();
    let b = Tensor::from_vec(vec![3.0, -1.0, 0.5, 2.0], &[4]).unwrap();
    let c10 = || f10.eval((&a, &b)).unwrap().to_f64_vec()[0];
    let c1000 = || f1000.eval((&a, &b)).unwrap().to_f64_vec()[0];
    assert!(c10() != c1000(), "the loops ran the same number of steps");
    let (short, long) = warm_calls(|| c10() as usize, || c1000() as usize);
    assert!(short > 0, "the counter does not count");
    // No more at 1,000 steps than at 10 (a few fewer can happen: the
    // longer loop's stacked results are large enough to come from the pool).
    assert!(long <= short, "990 more steps cost {} more allocations", long as i64 - short as i64);
}

/// [`ode`] with a Rust loop instead of a scan (an unrolled graph).
fn ode_unrolled(a: &Var, b: &Var, x0: &Var, steps: usize) -> Var {
    let rhs = |x: &Var| (a.matmul(x) + b).tanh() - x * 0.5;
    let (mut x, mut total) = (x0.clone(), x0.sum_all() * 0.0);
    for _ in 0..steps {
        let k1 = rhs(&x);
        let k2 = rhs(&(&x + &(&k1 * 0.05)));
        total = total + x.sum_all();
        x = &x + &((k1 + k2) * 0.05);
    }
    x.square().sum_all() + total
}

#[test]
fn a_scan_gradient_runs_one_forward_loop_and_a_reverse_loop_of_vectors() {
    let (a, b, x) = inputs();
    let grad_fn = value_and_grad(ode_at(30)).argnums(&[0, 1]);
    let g = anvil::lower(&grad_fn, (&a, &b, &x)).unwrap();
    let scans: Vec<String> =
        g.iter().filter(|(_, n)| n.op.name() == "scan").map(|(_, n)| n.op.params()).collect();
    assert_eq!(scans.len(), 2, "one forward scan, one reverse scan:\n{g}");
    assert!(scans.iter().any(|p| p.contains("reverse")), "{scans:?}");
    // No carry of the matrix's shape: its cotangent is one product after the loop.
    for (_, n) in g.iter().filter(|(_, n)| n.op.name() == "scan") {
        for v in n.results() {
            assert!(g.ty(v).shape() != [6, 6], "a [6, 6] carry in\n{g}");
        }
    }
    assert!(g.iter().any(|(_, n)| n.op.name().starts_with("matmul")), "{g}");
    let (v, d) = jit(grad_fn).eval((&a, &b, &x)).unwrap();
    let unrolled = |a: &Var, b: &Var, x: &Var| ode_unrolled(a, b, x, 30);
    let (v0, d0) = jit(value_and_grad(unrolled).argnums(&[0, 1])).eval((&a, &b, &x)).unwrap();
    assert!(v.allclose(&v0, 1e-13, 1e-13), "{v} vs {v0}");
    for (k, (got, want)) in d.leaves.iter().zip(&d0.leaves).enumerate() {
        assert!(got.allclose(want, 1e-12, 1e-12), "gradient {k}: {got} vs {want}");
    }
}

/// A loop over a large matrix (512 × 512, 2 MiB) shares each
/// step's matrix–vector products between threads: its value and gradient
/// are the same bits on one thread and on several, and agree with the
/// unrolled function.
#[test]
fn large_matrix_products_in_a_loop_give_the_same_bits_on_any_thread_count() {
    let d = 512;
    let a: Vec<f64> = (0..d * d).map(|k| ((k as f64) * 0.37).sin() / (d as f64).sqrt()).collect();
    let a = Tensor::from_vec(a, &[d, d]).unwrap();
    let b = Tensor::from_vec((0..d).map(|i| 0.2 * (i as f64).cos()).collect(), &[d]).unwrap();
    let x = Tensor::from_vec((0..d).map(|i| (0.7 * (i as f64 + 1.0)).sin()).collect(), &[d]);
    let x = x.unwrap();
    let f = jit(value_and_grad(ode_at(3)).argnums(&[0, 1]));
    let (v1, d1) = f.eval_with((&a, &b, &x), &anvil::Parallelism::sequential()).unwrap();
    let (v2, d2) = f.eval((&a, &b, &x)).unwrap();
    assert_eq!(v1.to_vec::<f64>().unwrap(), v2.to_vec::<f64>().unwrap());
    for (one, many) in d1.leaves.iter().zip(&d2.leaves) {
        assert_eq!(one.to_vec::<f64>().unwrap(), many.to_vec::<f64>().unwrap());
    }
    let unrolled = |a: &Var, b: &Var, x: &Var| ode_unrolled(a, b, x, 3);
    let (v0, d0) = jit(value_and_grad(unrolled).argnums(&[0, 1])).eval((&a, &b, &x)).unwrap();
    assert!(v2.allclose(&v0, 1e-12, 1e-12), "{v2} vs {v0}");
    for (got, want) in d2.leaves.iter().zip(&d0.leaves) {
        assert!(got.allclose(want, 1e-11, 1e-12));
    }
}

/// A stacked result that is a scanned slice returned unchanged is the
/// scanned operand itself (no copy written step by step), in both
/// directions and beside results the step computes; a const returned
/// unchanged stays a stacked result (every step's copy of it).
#[test]
fn a_scanned_slice_returned_unchanged_is_the_operand_itself() {
    for reverse in [false, true] {
        let f = move |c0: &Var, k: &Var, xs: &Var| {
            let step = |c: &Var, x: &Var| {
                let c = c * 0.5 + x;
                (c.clone(), (x.clone(), &c * 2.0, k.clone()))
            };
            let opts = ScanOptions { reverse, ..ScanOptions::default() };
            scan_with(step, c0, xs, opts)
        };
        let (c0, k, xs) = (
            Tensor::from_vec(vec![1.0, -2.0], &[2]).unwrap(),
            Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap(),
            Tensor::from_vec((0..10).map(|i| (i as f64 * 0.7).sin()).collect(), &[5, 2]).unwrap(),
        );
        let g = anvil::lower(&f, (&c0, &k, &xs)).unwrap();
        let (_, scan) = g.iter().find(|(_, n)| n.op.name() == "scan").expect("a scan");
        // The final carry and the two computed/broadcast results only.
        assert_eq!(scan.num_results(), 3, "reverse={reverse}:\n{g}");
        let (c, (ys_x, ys_c, ys_k)): (Tensor, (Tensor, Tensor, Tensor)) =
            jit(f).eval((&c0, &k, &xs)).unwrap();
        assert_eq!(ys_x.to_vec::<f64>().unwrap(), xs.to_vec::<f64>().unwrap());
        assert_eq!(ys_k.to_vec::<f64>().unwrap(), [3.0, 4.0].repeat(5));
        // The carries, step by step in the scan's direction.
        let (cv, want) = halving_steps(&c0, &xs, reverse);
        assert_eq!(ys_c.to_vec::<f64>().unwrap(), want, "reverse={reverse}");
        assert_eq!(c.to_vec::<f64>().unwrap(), cv);
    }
}

/// The reference of the two-lane scans above: `c = c / 2 + x[t]` over the
/// five slices of `xs` in the scan's direction; the final carry and each
/// step's `2c`, stacked in slice order.
fn halving_steps(c0: &Tensor, xs: &Tensor, reverse: bool) -> (Vec<f64>, Vec<f64>) {
    let (xv, mut cv) = (xs.to_vec::<f64>().unwrap(), c0.to_vec::<f64>().unwrap());
    let mut twice = vec![0.0; 10];
    let order: Vec<usize> = if reverse { (0..5).rev().collect() } else { (0..5).collect() };
    for t in order {
        for j in 0..2 {
            cv[j] = cv[j] * 0.5 + xv[2 * t + j];
            twice[2 * t + j] = cv[j] * 2.0;
        }
    }
    (cv, twice)
}

/// A scan whose only result is a scanned slice returned unchanged (no
/// carries) still gives the slices.
#[test]
fn a_scan_of_nothing_but_forwarded_slices_gives_the_slices() {
    let f = |xs: &Var| scan(|(): &(), x: &Var| ((), x.clone()), (), xs).map(|((), ys)| ys);
    let xs = Tensor::from_vec((0..6).map(|i| i as f64 - 2.5).collect(), &[3, 2]).unwrap();
    let ys: Tensor = jit(f).eval(&xs).unwrap();
    assert_eq!(ys.to_vec::<f64>().unwrap(), xs.to_vec::<f64>().unwrap());
}

/// Every operand of every scan in `g` is read by its body (a node or a
/// direct output).
fn every_scan_operand_is_read(g: &anvil::Graph) -> Result<(), String> {
    for (_, n) in g.iter().filter(|(_, n)| n.op.name() == "scan") {
        let body = n.op.subgraphs()[0].clone();
        for (i, &input) in body.inputs().iter().enumerate() {
            let read = body.nodes().iter().any(|m| m.inputs.contains(&input))
                || body.outputs().contains(&input);
            if !read {
                return Err(format!("operand {i} of a scan is never read:\n{g}"));
            }
        }
    }
    Ok(())
}

/// The reverse loop of a scan's gradient takes only the residuals its
/// body reads: the stage inputs that the matrix's cotangent needs go to
/// the product after the loop, not through every step.
#[test]
fn the_reverse_loop_of_a_gradient_takes_only_the_residuals_it_reads() {
    let (a, b, x) = inputs();
    let grad_fn = value_and_grad(ode_at(30)).argnums(&[0, 1]);
    let g = anvil::lower(&grad_fn, (&a, &b, &x)).unwrap();
    every_scan_operand_is_read(&g).unwrap();
    let reverse = g
        .iter()
        .find(|(_, n)| n.op.name() == "scan" && n.op.params().contains("reverse"))
        .map(|(_, n)| n)
        .expect("a reverse scan");
    // A, the two cotangent carries, the cotangent of the stacked sums and
    // the residuals it reads: the two stages' tanh derivatives, not their
    // inputs (nor b; before, all of them: 8).
    assert_eq!(reverse.inputs.len(), 6, "{g}");
}

/// Stacked results nobody reads are not computed, and the operands only
/// they read are dropped with them (in both directions); the results
/// that are read keep their values.
#[test]
fn stacked_results_nobody_reads_are_dropped_with_their_operands() {
    for reverse in [false, true] {
        // ys = (2c, k·x2): only the carry and the first are returned.
        let f = move |c0: &Var, k: &Var, x1: &Var, x2: &Var| {
            let step = |c: &Var, (x1, x2): &(Var, Var)| {
                let c = c * 0.5 + x1;
                (c.clone(), (&c * 2.0, k * x2))
            };
            let opts = ScanOptions { reverse, ..ScanOptions::default() };
            let (c, (twice, _)) = scan_with(step, c0, (x1, x2), opts)?;
            Ok::<_, anvil::Error>((c, twice))
        };
        let c0 = Tensor::from_vec(vec![1.0, -2.0], &[2]).unwrap();
        let k = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
        let x1 = Tensor::from_vec((0..10).map(|i| (i as f64 * 0.7).sin()).collect(), &[5, 2]);
        let x2 = Tensor::from_vec((0..10).map(|i| (i as f64 * 0.3).cos()).collect(), &[5, 2]);
        let (x1, x2) = (x1.unwrap(), x2.unwrap());
        let g = anvil::lower(&f, (&c0, &k, &x1, &x2)).unwrap();
        every_scan_operand_is_read(&g).unwrap();
        let (_, scan) = g.iter().find(|(_, n)| n.op.name() == "scan").expect("a scan");
        // The initial carry and x1; the final carry and 2c.
        assert_eq!((scan.inputs.len(), scan.num_results()), (2, 2), "reverse={reverse}:\n{g}");
        let (c, twice): (Tensor, Tensor) = jit(f).eval((&c0, &k, &x1, &x2)).unwrap();
        let (cv, want) = halving_steps(&c0, &x1, reverse);
        assert_eq!(twice.to_vec::<f64>().unwrap(), want, "reverse={reverse}");
        assert_eq!(c.to_vec::<f64>().unwrap(), cv);
    }
}

/// A scanned operand and a const the body never reads stop being operands
/// (the per-node rewrite, with every result read).
#[test]
fn operands_a_scan_body_never_reads_are_dropped() {
    let f = |c0: &Var, x1: &Var, x2: &Var| {
        // x2 is scanned but unused: the step ignores its slice.
        let step = |c: &Var, (x1, _x2): &(Var, Var)| {
            let c = c * 0.5 + x1;
            (c.clone(), c.sum_all())
        };
        scan(step, c0, (x1, x2))
    };
    let c0 = Tensor::from_vec(vec![1.0, -2.0, 0.5], &[3]).unwrap();
    let x1 = Tensor::from_vec((0..12).map(|i| (i as f64 * 0.9).sin()).collect(), &[4, 3]).unwrap();
    let x2 = Tensor::from_vec((0..8).map(|i| i as f64).collect(), &[4, 2]).unwrap();
    let g = anvil::lower(&f, (&c0, &x1, &x2)).unwrap();
    every_scan_operand_is_read(&g).unwrap();
    let (c, sums): (Tensor, Tensor) = jit(f).eval((&c0, &x1, &x2)).unwrap();
    let (xv, mut cv) = (x1.to_vec::<f64>().unwrap(), c0.to_vec::<f64>().unwrap());
    let mut want = Vec::new();
    for t in 0..4 {
        for j in 0..3 {
            cv[j] = cv[j] * 0.5 + xv[3 * t + j];
        }
        want.push(cv.iter().sum::<f64>());
    }
    assert_eq!(c.to_vec::<f64>().unwrap(), cv);
    let got = sums.to_vec::<f64>().unwrap();
    assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-15), "{got:?} vs {want:?}");
}

/// A scan of symbolic length whose carry does not read its scanned
/// operand and whose stacked results nobody reads stays as traced: its
/// length is bound at each call through its symbolic types (dropped, the
/// loop would run for the unbound symbol's count). A `scan_n` of symbolic
/// length, whose only symbolic size is the op's own length, is bound too.
#[test]
fn a_symbolic_scan_with_nothing_to_scan_left_keeps_its_length() {
    use anvil::TensorType;
    let n = anvil::dim("steps", 1..).unwrap();
    let running = |x: &Var| -> anvil::Result<Var> {
        let (c, _ys) = scan(|c: &Var, xi: &Var| ((c * 0.5).sin() + 1.0, c * xi), x.sum_all(), x)?;
        Ok(c)
    };
    let f = jit(running).symbolic(TensorType::new(DType::F64, [n])).unwrap();
    let by_count = |x: &Var| -> anvil::Result<Var> {
        let step = |c: &Var, _: &()| ((c * 0.5).sin() + 1.0, ());
        let (c, ()) = scan_n(step, x.sum_all(), x.shape()[0])?;
        Ok(c)
    };
    let g = jit(by_count).symbolic(TensorType::new(DType::F64, [n])).unwrap();
    for len in [1usize, 4, 9] {
        let x = Tensor::from_vec((0..len).map(|i| (i as f64 * 0.37).sin()).collect(), &[len]);
        let x = x.unwrap();
        let mut want: f64 = x.to_vec::<f64>().unwrap().iter().sum();
        for _ in 0..len {
            want = (want * 0.5).sin() + 1.0;
        }
        let got = f.eval(&x).unwrap().item().unwrap();
        assert!((got - want).abs() < 1e-15, "length {len}: {got} vs {want}");
        // The same loop by `scan_n` over the symbolic length: no scanned
        // operand at all, the length a parameter of the op only.
        let got = g.eval(&x).unwrap().item().unwrap();
        assert!((got - want).abs() < 1e-15, "scan_n, length {len}: {got} vs {want}");
    }
}
