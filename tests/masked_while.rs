//! `vmap` of a `while_loop` whose predicate depends on the batch: the masked
//! loop. The CPU runs one with an elementwise body group of lanes by group
//! of lanes (each group until its own lanes are done); every lane's result
//! must equal running it alone, bit for bit, whatever the batch size (one
//! partial group, several groups, several parallel tasks), with or without
//! a bound on the steps, and for bodies that do not qualify.

use anvil::prelude::*;

/// The predicate of every loop here: the residual `r` is not yet below
/// `tol` and fewer than `limit` steps (counted by `it`) have run.
fn running(r: &Var, it: &Var, tol: f64, limit: f64) -> Var {
    let go = r.abs().ge(&r.full_like(tol));
    go.select(&it.lt(&it.full_like(limit)), &go)
}

/// Newton on `x^3 + a x - b` from 0 until `|f| < tol` or `limit` steps;
/// returns the root and the steps taken.
fn newton(limit: f64, tol: f64) -> impl Fn(&Var, &Var) -> (Var, Var) + Clone {
    move |a: &Var, b: &Var| {
        let f = |x: &Var| x * x * x + a * x - b;
        while_loop(
            |(x, it): &(Var, Var)| running(&f(x), it, tol, limit),
            |(x, it): &(Var, Var)| (x - &(f(x) / (x * x * 3.0 + a)), it + 1.0),
            (&a.zeros_like(), &a.zeros_like()),
        )
        .unwrap()
    }
}

fn inputs(n: usize) -> (Vec<f64>, Vec<f64>) {
    let a = (0..n).map(|k| 1.25 + 0.75 * (0.7 * (k as f64 + 1.0)).sin()).collect();
    let b = (0..n).map(|k| 3.0 * (1.3 * (k as f64 + 1.0)).cos()).collect();
    (a, b)
}

/// The batched loop against each lane run alone, bit for bit.
fn check_lanes<F>(f: F, n: usize)
where
    F: Fn(&Var, &Var) -> (Var, Var) + Clone + Send + Sync + 'static,
{
    let (av, bv) = inputs(n);
    let (a, b) =
        (Tensor::from_vec(av.clone(), &[n]).unwrap(), Tensor::from_vec(bv.clone(), &[n]).unwrap());
    let batched = jit(vmap(f.clone()));
    let (x, it) = batched.eval((&a, &b)).unwrap();
    let (x, it) = (x.to_f64_vec(), it.to_f64_vec());
    let alone = jit(f);
    // Every lane of a small batch; a sample of a large one.
    let step = (n / 500).max(1);
    for k in (0..n).step_by(step).chain([n - 1]) {
        let (xa, ia) = alone.eval((&Tensor::scalar(av[k]), &Tensor::scalar(bv[k]))).unwrap();
        assert_eq!(x[k].to_bits(), xa.item().unwrap().to_bits(), "root of lane {k} of {n}");
        assert_eq!(it[k], ia.item().unwrap(), "steps of lane {k} of {n}");
    }
}

#[test]
fn a_masked_loop_gives_each_lane_its_own_result() {
    for n in [1, 7, 256, 257, 1000, 10_037] {
        check_lanes(newton(50.0, 1e-12), n);
    }
}

#[test]
fn a_masked_loop_with_transcendental_functions_gives_each_lane_its_own_result() {
    // Newton on exp(x) + a x - b (increasing: a > 0): the lanes compute exp
    // as a plan does, and the residual carried from step to step has the
    // bits it has when recomputed.
    let f = |a: &Var, b: &Var| {
        let f = |x: &Var| x.exp() + a * x - b;
        while_loop(
            |(x, it): &(Var, Var)| running(&f(x), it, 1e-12, 50.0),
            |(x, it): &(Var, Var)| (x - &(f(x) / (x.exp() + a)), it + 1.0),
            (&a.zeros_like(), &a.zeros_like()),
        )
        .unwrap()
    };
    for n in [5, 3000] {
        check_lanes(f, n);
    }
}

#[test]
fn a_masked_loop_stops_each_lane_at_its_bound() {
    // The bound cuts most lanes short; lanes differ in their steps.
    check_lanes(newton(3.0, 1e-12), 3000);
    // A tolerance no lane reaches: every lane runs to the bound.
    check_lanes(newton(7.0, 0.0), 600);
}

#[test]
fn vmap_of_a_batched_predicate_makes_a_masked_loop() {
    let (av, bv) = inputs(8);
    let (a, b) = (Tensor::from_vec(av, &[8]).unwrap(), Tensor::from_vec(bv, &[8]).unwrap());
    let g = anvil::lower(&vmap(newton(50.0, 1e-12)), (&a, &b)).unwrap();
    assert!(g.to_string().contains("masked"), "{g}");
}

#[test]
fn a_masked_loop_with_a_body_that_is_not_elementwise_is_right() {
    // Each lane is a vector of 3 whose norm the body reads (a reduction):
    // the body does not qualify for groups of lanes and runs as a plan.
    let f = |x0: &Var| {
        let (x, it) = while_loop(
            |(x, it): &(Var, Var)| x.square().sum_all().gt(&it.full_like(1e-6)),
            |(x, it): &(Var, Var)| (x * 0.5, it + 1.0),
            (x0, &x0.sum_all().zeros_like()),
        )
        .unwrap();
        (x, it)
    };
    let n = 50;
    let xs: Vec<f64> = (0..3 * n).map(|k| (0.37 * (k + 1) as f64).sin() * (k % 7) as f64).collect();
    let x0 = Tensor::from_vec(xs.clone(), &[n, 3]).unwrap();
    let (x, it) = jit(vmap(f)).eval(&x0).unwrap();
    let (x, it) = (x.to_f64_vec(), it.to_f64_vec());
    let alone = jit(f);
    for k in 0..n {
        let (xa, ia) =
            alone.eval(Tensor::from_vec(xs[3 * k..3 * k + 3].to_vec(), &[3]).unwrap()).unwrap();
        assert_eq!(&x[3 * k..3 * k + 3], &xa.to_f64_vec()[..], "lane {k}");
        assert_eq!(it[k], ia.item().unwrap(), "steps of lane {k}");
    }
}

/// The computing nodes of the plan `vmap(f)` compiles to (constants
/// aside): op name and number of operands.
fn plan_ops<F>(f: F, n: usize) -> Vec<(String, usize)>
where
    F: Fn(&Var, &Var) -> (Var, Var) + Clone + Send + Sync + 'static,
{
    let (av, bv) = inputs(n);
    let (a, b) = (Tensor::from_vec(av, &[n]).unwrap(), Tensor::from_vec(bv, &[n]).unwrap());
    let g = anvil::lower(&vmap(f), (&a, &b)).unwrap();
    let plan = anvil::cpu::compile(&g).unwrap();
    plan.graph()
        .iter()
        .filter(|(_, node)| node.op.parameter_index().is_none() && !node.inputs.is_empty())
        .map(|(_, node)| (node.op.name().to_string(), node.inputs.len()))
        .collect()
}

#[test]
fn a_masked_loops_operands_are_computed_with_it_group_by_group() {
    // The initial residual, flags and zeros that `vmap` computes before the
    // loop run in the loop's lane groups: the plan is the loop alone.
    assert_eq!(plan_ops(newton(50.0, 1e-12), 1000), [("lane_while".into(), 2)]);
}

#[test]
fn a_prelude_computes_consts_and_carries_and_leaves_values_read_elsewhere() {
    // The loop's const `c = a a + 1` and initial value `x0 = b / 2` are
    // computed elementwise before it; `x0` is also read after the loop, so
    // it stays in the plan (and the loop reads it), while `c` moves in.
    // Each lane's result equals running it alone, bit for bit, over one
    // partial group, several groups and several parallel tasks.
    let f = |a: &Var, b: &Var| {
        let c = a * a + 1.0;
        let x0 = b * 0.5;
        let g = |x: &Var| x * x * x + &c * x - b;
        let (x, it) = while_loop(
            |(x, it): &(Var, Var)| running(&g(x), it, 1e-12, 40.0),
            |(x, it): &(Var, Var)| (x - &(g(x) / (x * x * 3.0 + &c)), it + 1.0),
            (&x0, &a.zeros_like()),
        )
        .unwrap();
        (x - &x0, it)
    };
    // x0 before the loop, the difference after it; the loop reads a, b
    // and x0 (not c).
    let ops = plan_ops(f, 1000);
    let names: Vec<&str> = ops.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["fused", "lane_while", "fused"]);
    assert_eq!(ops[1].1, 3, "{ops:?}");
    for n in [3, 300, 10_037] {
        check_lanes(f, n);
    }
}

#[test]
fn a_value_that_is_two_carries_and_a_const_moves_in_once() {
    // x0 is both initial carries and, through c, a const of the body; y is
    // never read after the loop. Everything before the loop moves into it.
    let f = |a: &Var, b: &Var| {
        let x0 = b * 0.5 + a;
        let c = &x0 * 0.25;
        let (x, y, it) = while_loop(
            |(x, _y, it): &(Var, Var, Var)| running(x, it, 1e-3, 30.0),
            |(x, y, it): &(Var, Var, Var)| (x * 0.5 - &c * 0.01, y + &x0, it + 1.0),
            (&x0, &x0, &a.zeros_like()),
        )
        .unwrap();
        let _ = y;
        (x, it)
    };
    assert_eq!(plan_ops(f, 1000), [("lane_while".into(), 2)]);
    for n in [3, 300, 10_037] {
        check_lanes(f, n);
    }
}

#[test]
fn two_masked_loops_sharing_a_producer_leave_it_in_the_plan() {
    // x0 feeds both loops: it is computed once, before them; each loop
    // takes the rest of its own operands into its lane groups.
    let f = |a: &Var, b: &Var| {
        let x0 = b * 0.5 + a;
        let run = |x0: &Var, k: f64| {
            while_loop(
                |(x, it): &(Var, Var)| running(x, it, 1e-3, 30.0),
                move |(x, it): &(Var, Var)| (x * k, it + 1.0),
                (x0, &x0.zeros_like()),
            )
            .unwrap()
        };
        let (x1, i1) = run(&x0, 0.5);
        let (x2, i2) = run(&(&x0 * 2.0), 0.25);
        (x1 + x2, i1 + i2)
    };
    let ops = plan_ops(f, 1000);
    let loops = ops.iter().filter(|(name, _)| name == "lane_while").count();
    assert_eq!(loops, 2, "{ops:?}");
    assert_eq!(ops[0].0, "fused", "x0 first: {ops:?}");
    for n in [3, 300, 10_037] {
        check_lanes(f, n);
    }
}
