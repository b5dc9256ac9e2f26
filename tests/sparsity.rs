//! Sparsity detection against the dense Jacobian, over every standard
//! sample: the detected pattern holds every nonzero of the dense Jacobian,
//! and equals its nonzeros for the ops whose rules are exact.

use anvil::prelude::*;
use anvil::sparse::jacobian_sparsity;
use anvil::testing::{standard_samples, Derivative, OpSample};

/// Ops whose rule may give a strict superset of the nonzeros at a generic
/// point, with the reason. Every other sample must match exactly.
const INEXACT: &[(&str, &str)] = &[
    // Elementwise by the fact, with derivatives that vanish identically for
    // some parameters or values.
    ("nextafter", "the derivative is da only: the pattern's db entries are zeros"),
    ("clamp", "x's derivative is 0 where x is clamped, lo's and hi's where it is not"),
    ("integer_pow", "x**0 has derivative 0 everywhere"),
    // The lax indexing samples are one-step maps whose indices are read at
    // run time: the rule cannot know the positions, so it covers all of them.
    ("map", "a body that indexes by run-time values (dynamic_slice, gather, scatter)"),
    // Depends on both operands; the derivative reaches one of them.
    ("max", "max(a, b): the pattern holds for every value, the derivative picks one"),
    ("min", "min(a, b): as max"),
    ("reduce_max", "the maximum's position depends on the values"),
    ("reduce_min", "as reduce_max"),
    ("select", "a condition not known at trace time: both sides"),
    ("cond", "the union over the branches (the index is not known at trace time)"),
    ("scan", "the carries' fixpoint: the union over the steps"),
    ("while", "the carries' fixpoint: the union over the steps"),
];

/// The sample as one function of the concatenated differentiable inputs,
/// returning its float results flattened and concatenated; `None` when
/// there is nothing to differentiate.
fn flat_sample(s: &OpSample) -> Option<(impl Fn(&Var) -> Var + Clone, Tensor)> {
    let diff = s.differentiable();
    let outs = s.output_types().ok()?;
    if !s.evaluable || !diff.iter().any(|&d| d) || !outs.iter().any(|t| t.dtype().is_float()) {
        return None;
    }
    let parts: Vec<Vec<f64>> =
        s.inputs.iter().zip(&diff).filter(|(_, &d)| d).map(|(t, _)| t.to_f64_vec()).collect();
    let x = Tensor::from_vec(parts.concat(), &[parts.iter().map(Vec::len).sum()]).ok()?;
    let (inputs, f, float_outs) = (
        s.inputs.clone(),
        s.function(),
        outs.iter().map(|t| t.dtype().is_float()).collect::<Vec<_>>(),
    );
    let flat = move |x: &Var| {
        let mut at = 0i64;
        let args: Vec<Var> = inputs
            .iter()
            .zip(&diff)
            .map(|(t, &d)| {
                if !d {
                    return x.constant_like(t.clone());
                }
                let n = t.numel() as i64;
                at += n;
                let shape: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
                x.slice_axis(0, Some(at - n), Some(at), 1).reshape(&shape).cast(t.dtype())
            })
            .collect();
        let ys: Vec<Var> = f(&args)
            .iter()
            .zip(&float_outs)
            .filter(|(_, &fl)| fl)
            .map(|(y, _)| y.flatten().cast(DType::F64))
            .collect();
        let refs: Vec<&Var> = ys.iter().collect();
        concatenate(&refs, 0)
    };
    Some((flat, x))
}

/// Standard ops added after the sparsity rules (the linear-algebra and lax
/// ops) whose rule is not written yet: detection treats them as dense in
/// their operands (correct, with a one-time warning naming them). Their
/// patterns are still checked to hold every nonzero; they are not required
/// to be exact. Each should leave this list with a rule of its own (issue 16).
const DENSE_FOR_NOW: &[&str] = &[
    "tril",
    "triu",
    "phi",
    "diagonal",
    "triangular_solve",
    "cholesky",
    "cho_solve",
    "cholesky_tangent",
    "cholesky_cotangent",
    "lu",
    "lu_solve",
    "lu_adjugate",
    "inv",
    "det",
    "slogdet",
    "qr",
    "eigh",
    "svd",
    "cumsum",
    "cumprod",
    "cummax",
    "cummin",
    "cumlogsumexp",
    "sort",
];

#[test]
fn detected_patterns_hold_the_dense_jacobians_nonzeros() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for s in standard_samples() {
        let Some((f, x)) = flat_sample(&s) else { continue };
        let dense = match s.derivative {
            Derivative::ReverseOnly => jacrev(f.clone()).eval(&x),
            _ => jacfwd(f.clone()).eval(&x),
        };
        let dense = dense.unwrap_or_else(|e| panic!("{}: dense Jacobian: {e}", s.describe()));
        let p = jacobian_sparsity(&f, &x)
            .unwrap_or_else(|e| panic!("{}: detection: {e}", s.describe()));
        let (m, n) = (dense.shape()[0], dense.shape()[1]);
        assert_eq!((p.nrows(), p.ncols()), (m, n), "{}", s.describe());
        let d = dense.to_f64_vec();
        let nonzero = |i: usize, j: usize| d[i * n + j] != 0.0;
        let missed: Vec<(usize, usize)> = (0..m)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|&(i, j)| nonzero(i, j) && !p.contains(i, j))
            .collect();
        if !missed.is_empty() {
            failures.push(format!("{}: nonzeros outside the pattern at {missed:?}", s.describe()));
        }
        let extra = p.entries().filter(|&(i, j)| !nonzero(i, j)).count();
        let zero_by_definition = s.derivative == Derivative::Zero;
        let allowed = INEXACT.iter().any(|(name, _)| *name == s.op.name())
            || DENSE_FOR_NOW.contains(&s.op.name());
        if extra > 0 && !allowed && !zero_by_definition {
            failures.push(format!(
                "{}: {extra} entries beyond the nonzeros of an exact rule",
                s.describe()
            ));
        }
        checked += 1;
    }
    assert!(checked > 100, "only {checked} samples checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// ------------------------------------------------------------ control flow

/// `u[i] + u[i-1]`, zero at the left end.
fn shift_add(u: &Var) -> Var {
    u + u.pad(&[(1, 0)], 0.0).slice_axis(0, None, Some(-1), 1)
}

/// The pattern as rows of `x` and `.`.
fn show(f: impl Fn(&Var) -> anvil::Result<Var> + Clone, n: usize) -> String {
    jacobian_sparsity(&f, Tensor::linspace(0.1, 0.9, n).unwrap()).unwrap().to_string()
}

#[test]
fn a_scans_carry_pattern_is_the_fixpoint_over_its_steps() {
    // Two steps of a shift: u[i] depends on u[i-2..=i], as the dense Jacobian.
    let two = |u: &Var| Ok(scan_n(|c: &Var, _: &()| (shift_add(c), ()), u, 2)?.0);
    assert_eq!(show(two, 4), "x...\nxx..\nxxx.\n.xxx\n");
    // More steps than the pattern needs to fill: lower triangular, and the
    // fixpoint stops early (the step bound is not what ends it).
    let many = |u: &Var| Ok(scan_n(|c: &Var, _: &()| (shift_add(c), ()), u, 1000)?.0);
    assert_eq!(show(many, 3), "x..\nxx.\nxxx\n");
    // Zero steps: the initial carry.
    let none = |u: &Var| Ok(scan_n(|c: &Var, _: &()| (shift_add(c), ()), u, 0)?.0);
    assert_eq!(show(none, 2), "x.\n.x\n");
}

#[test]
fn a_scans_ys_keep_each_steps_slice() {
    // ys[t] = sin(xs[t]) * c with a carry c = u[0] that never changes: the
    // Jacobian of ys is block diagonal in t, plus column 0.
    let f = |u: &Var| -> anvil::Result<Var> {
        let xs = u.slice_axis(0, Some(1), None, 1).reshape(&[3, 2]);
        let c = u.index_axis(0, 0);
        let (_, ys) = scan(|c: &Var, x: &Var| (c.clone(), x.sin() * c), &c, &xs)?;
        Ok(ys.flatten())
    };
    let u = Tensor::linspace(0.1, 0.9, 7).unwrap();
    let p = jacobian_sparsity(&f, &u).unwrap();
    assert_eq!(p.to_string(), "xx.....\nx.x....\nx..x...\nx...x..\nx....x.\nx.....x\n");
    let dense = jacfwd(f).eval(&u).unwrap().to_f64_vec();
    assert!(p.entries().all(|(i, j)| dense[i * 7 + j] != 0.0));
}

#[test]
fn a_while_loops_pattern_is_the_fixpoint_and_a_cond_takes_the_union() {
    // A shift repeated while a counter is below 2: lower triangular (the
    // fixpoint holds for every number of steps), covering the dense one.
    let w = |u: &Var| -> anvil::Result<Var> {
        let (x, _) = while_loop(
            |(_, k): &(Var, Var)| k.lt(&k.full_like(2.0)),
            |(x, k): &(Var, Var)| (shift_add(x), k + 1.0),
            (u, &u.sum_all().zeros_like()),
        )?;
        Ok(x)
    };
    assert_eq!(show(w, 4), "x...\nxx..\nxxx.\nxxxx\n");
    // A branch on the values: the union of u[0] * u and u * u[3].
    let c = |u: &Var| {
        let pred = u.sum_all().gt(&u.sum_all().zeros_like());
        cond(&pred, |u: &Var| u * u.index_axis(0, 0), |u: &Var| u * u.index_axis(0, 3), u)
    };
    assert_eq!(show(c, 4), "x..x\nxx.x\nx.xx\nx..x\n");
    // A branch on a value known when tracing: only the branch taken.
    let k = |u: &Var| {
        let one = u.constant_like(Tensor::scalar(1i64));
        let pred = one.gt(&one.zeros_like());
        cond(&pred, |u: &Var| u * u.index_axis(0, 0), |u: &Var| u * u.index_axis(0, 3), u)
    };
    assert_eq!(show(k, 4), "x...\nxx..\nx.x.\nx..x\n");
}

#[test]
fn sparse_hessians_and_jacobians_go_through_loops_without_dense_fallbacks() {
    use anvil::sparse::{sparse_hessian, sparse_jacrev};
    // Three steps of a nonlinear shift: a banded Hessian (half-bandwidth 3).
    let f = |u: &Var| -> anvil::Result<Var> {
        Ok(scan_n(|c: &Var, _: &()| (shift_add(c).sin(), ()), u, 3)?.0.square().sum_all())
    };
    let x = Tensor::linspace(0.1, 0.9, 12).unwrap();
    let h = sparse_hessian(f);
    let got = h.eval(&x).unwrap().to_dense().unwrap();
    assert!(got.allclose(&hessian(f).eval(&x).unwrap(), 1e-12, 1e-12));
    assert!(h.plan(&x).unwrap().pattern().nnz() < 12 * 12);
    // Reverse mode through a while loop.
    let w = |u: &Var| -> anvil::Result<Var> {
        let (x, _) = while_loop(
            |(_, k): &(Var, Var)| k.lt(&k.full_like(2.0)),
            |(x, k): &(Var, Var)| (shift_add(x).sin(), k + 1.0),
            (u, &u.sum_all().zeros_like()),
        )?;
        Ok(x)
    };
    let j = sparse_jacfwd_of(w, &x);
    assert!(j.allclose(&jacfwd(w).eval(&x).unwrap(), 1e-12, 1e-12));
    let r = sparse_jacrev(w).eval(&x);
    // Reverse mode through an unbounded while loop is an error (as dense).
    assert!(r.is_err() == jacrev(w).eval(&x).is_err());
    let loops = ["scan", "while", "cond"];
    let fallbacks = anvil::core::sparsity::dense_fallbacks();
    assert!(!fallbacks.iter().any(|n| loops.contains(n)), "{fallbacks:?}");
}

fn sparse_jacfwd_of(
    f: impl Fn(&Var) -> anvil::Result<Var> + Clone + 'static,
    x: &Tensor,
) -> Tensor {
    anvil::sparse::sparse_jacfwd(f).eval(x).unwrap().to_dense().unwrap()
}

#[test]
fn every_standard_op_with_a_derivative_has_a_sparsity_rule() {
    // Detection never falls back to dense for a standard op: each has a
    // rule, is elementwise (the rule by the fact), or has no float result
    // or no float operand (no derivative: empty sets). Ops that only exist
    // inside a derivative's graph (not evaluable: a custom_vjp's tangent
    // node) are never in a graph detection runs on.
    let mut missing = Vec::new();
    for s in standard_samples() {
        let op = s.op.as_ref();
        let floats = s.output_types().is_ok_and(|ts| ts.iter().any(|t| t.dtype().is_float()));
        let by_fact = op.is_elementwise() && s.output_types().is_ok_and(|ts| ts.len() == 1);
        let ruled = anvil::core::sparsity_rules().lookup(op).unwrap().is_some();
        let float_in = s.inputs.iter().any(|t| t.dtype().is_float());
        let needs = s.evaluable && floats && float_in && !by_fact;
        let known_gap = DENSE_FOR_NOW.contains(&op.name());
        if needs && !ruled && !known_gap && !missing.contains(&op.name()) {
            missing.push(op.name());
        }
    }
    assert!(missing.is_empty(), "standard ops without a sparsity rule: {missing:?}");
}
