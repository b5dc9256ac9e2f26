//! Sparsity detection against the dense Jacobian, over every standard
//! sample: the detected pattern holds every nonzero of the dense Jacobian,
//! and equals its nonzeros for the ops whose rules are exact.

use anvil::prelude::*;
use anvil::sparse::jacobian_sparsity;
use anvil_testing::{standard_samples, Derivative, OpSample};

/// Ops whose rule may give a strict superset of the nonzeros at a generic
/// point, with the reason. Every other sample must match exactly.
const INEXACT: &[(&str, &str)] = &[
    // Elementwise by the fact; the derivative vanishes for some values.
    ("clamp", "x's derivative is 0 where x is clamped, lo's and hi's where it is not"),
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
    // Linear algebra and lax ops whose result depends on the values' order.
    ("lu", "pivoting: which row lands where depends on the values (the union over orders)"),
    ("lu_transposed", "as lu"),
    ("cummax", "the running maximum's position depends on the values"),
    ("cummin", "as cummax"),
    ("sort", "the permutation depends on the values: each output covers its lane"),
    ("cumprod", "a zero factor (the samples have one) zeroes the other partials"),
    // Bounds rather than exact patterns.
    ("cholesky_cotangent", "its dependence on L is bounded by L's whole lower triangle"),
    ("eigh_tangent", "dense within each matrix: a bound (ẇ does not depend on w)"),
    ("eigh_cotangent", "dense within each matrix: a bound"),
    ("lu_adjugate", "dense within each matrix; cofactors leave some factor entries out"),
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

/// The magnitude below which an entry of the dense Jacobian `d` counts as
/// zero: `rel` of its largest. A zero the factorisations compute through
/// a cancellation (`L L⁻¹ = I` off the diagonal) comes out as rounding
/// noise (1e-19 next to entries of order 1), not as 0.
fn rounding_noise(d: &[f64], rel: f64) -> f64 {
    d.iter().fold(0.0f64, |m, v| m.max(v.abs())) * rel
}

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
        let single = s.inputs.iter().any(|t| t.dtype() == DType::F32)
            || s.output_types().is_ok_and(|ts| ts.iter().any(|t| t.dtype() == DType::F32));
        let noise = rounding_noise(&d, if single { 1e-5 } else { 1e-12 });
        let nonzero = |i: usize, j: usize| d[i * n + j].abs() > noise;
        let missed: Vec<(usize, usize)> = (0..m)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|&(i, j)| nonzero(i, j) && !p.contains(i, j))
            .collect();
        if !missed.is_empty() {
            failures.push(format!("{}: nonzeros outside the pattern at {missed:?}", s.describe()));
        }
        let extra = p.entries().filter(|&(i, j)| !nonzero(i, j)).count();
        let zero_by_definition = s.derivative == Derivative::Zero;
        let allowed = INEXACT.iter().any(|(name, _)| *name == s.op.name());
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
fn fori_loops_with_static_and_traced_bounds_are_scans_and_whiles() {
    // Static bounds: a scan of two steps, exact.
    let fixed = |u: &Var| fori_loop(0, 2, |_: &Var, c: &Var| shift_add(c), u);
    assert_eq!(show(fixed, 4), "x...\nxx..\nxxx.\n.xxx\n");
    // A bound computed from the values: a while loop, the fixpoint.
    let traced = |u: &Var| {
        let n = u.sum_all().gt(&u.sum_all().zeros_like()).cast(DType::I64) * 2i64;
        fori_loop(0, &n, |_: &Var, c: &Var| shift_add(c), u)
    };
    assert_eq!(show(traced, 4), "x...\nxx..\nxxx.\nxxxx\n");
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
        if needs && !ruled && !missing.contains(&op.name()) {
            missing.push(op.name());
        }
    }
    assert!(missing.is_empty(), "standard ops without a sparsity rule: {missing:?}");
}

// ---------------------------------------------- linear algebra and lax ops

use anvil::linalg::{self, Cholesky, CholeskyCotangent, CholeskyTangent, OnFailure};

/// Reproducible values in (-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// `batch` matrices `n × n`: random plus `shift` on the diagonal, or
/// `M Mᵀ + shift·I` with `spd`.
fn matrices(batch: usize, n: usize, shift: f64, spd: bool, seed: u64) -> Vec<f64> {
    let r = values(batch * n * n, seed);
    let mut out = vec![0.0; batch * n * n];
    for b in 0..batch {
        let m = |i: usize, j: usize| r[(b * n + i) * n + j];
        for i in 0..n {
            for j in 0..n {
                let v = if spd { (0..n).map(|k| m(i, k) * m(j, k)).sum() } else { m(i, j) };
                out[(b * n + i) * n + j] = v + if i == j { shift } else { 0.0 };
            }
        }
    }
    out
}

/// `x[at..at + numel(shape)]` reshaped.
fn part(x: &Var, at: usize, shape: &[usize]) -> Var {
    let n: usize = shape.iter().product();
    let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    x.slice_axis(0, Some(at as i64), Some((at + n) as i64), 1).reshape(&s)
}

/// The detected pattern of `f` at `x` against the nonzeros of its dense
/// Jacobian there: `(entries beyond the nonzeros, nonzeros missed)`.
fn against_dense(f: impl Fn(&Var) -> Var + Clone + 'static, x: &[f64]) -> (usize, usize) {
    let x = Tensor::from_vec(x.to_vec(), &[x.len()]).unwrap();
    let flat = move |v: &Var| f(v).flatten();
    let p = jacobian_sparsity(&flat, &x).unwrap();
    let d = jacfwd(flat).eval(&x).unwrap();
    let (m, n) = (d.shape()[0], d.shape()[1]);
    let d = d.to_f64_vec();
    let noise = rounding_noise(&d, 1e-12);
    let missed = (0..m * n).filter(|&e| d[e].abs() > noise && !p.contains(e / n, e % n)).count();
    let extra = p.entries().filter(|&(i, j)| d[i * n + j].abs() <= noise).count();
    (extra, missed)
}

#[test]
fn triangular_solve_patterns_are_exact_for_every_option() {
    use linalg::TriangularSolve;
    let (batch, s, k) = (2, 4, 3);
    for bits in 0..16u8 {
        let ts = TriangularSolve {
            left_side: bits & 1 != 0,
            lower: bits & 2 != 0,
            transpose_a: bits & 4 != 0,
            unit_diagonal: bits & 8 != 0,
        };
        let b_shape = if ts.left_side { [batch, s, k] } else { [batch, k, s] };
        let mut x = matrices(batch, s, 3.0, false, u64::from(bits));
        x.extend(values(batch * s * k, 99));
        let f = move |x: &Var| {
            let a = part(x, 0, &[batch, s, s]);
            linalg::triangular_solve(&a, &part(x, batch * s * s, &b_shape), ts)
        };
        assert_eq!(against_dense(f, &x), (0, 0), "{ts:?}");
    }
}

#[test]
fn cholesky_and_its_tangent_pair_patterns_hold_the_nonzeros() {
    let (batch, n) = (2, 4);
    let a = matrices(batch, n, 1.0, true, 1);
    for symmetrize_input in [true, false] {
        let c = Cholesky { symmetrize_input, on_failure: OnFailure::Error };
        let f = move |x: &Var| part(x, 0, &[batch, n, n]).apply(c, &[]);
        assert_eq!(against_dense(f, &a), (0, 0), "symmetrize_input = {symmetrize_input}");
    }
    // A lower factor with a positive diagonal, and a second operand.
    let mut x: Vec<f64> = matrices(batch, n, 2.0, false, 2)
        .iter()
        .enumerate()
        .map(|(e, &v)| if e % n <= e / n % n { v } else { 0.0 })
        .collect();
    x.extend(values(batch * n * n, 3));
    let pair = |x: &Var| (part(x, 0, &[2, 4, 4]), part(x, 32, &[2, 4, 4]));
    let tangent = move |x: &Var| {
        let (l, s) = pair(x);
        l.apply(CholeskyTangent::default(), &[&s])
    };
    assert_eq!(against_dense(tangent, &x), (0, 0));
    let cotangent = move |x: &Var| {
        let (l, y) = pair(x);
        l.apply(CholeskyCotangent::default(), &[&y])
    };
    assert_eq!(against_dense(cotangent, &x).1, 0);
}

#[test]
fn a_batched_choleskys_pattern_is_block_diagonal() {
    // L[0,0] reads A[0,0]; L[1,0] also A[1,0] and A[0,1] (symmetrised);
    // L[1,1] everything; L[0,1] is zero. Matrices never mix.
    let f = |x: &Var| linalg::cholesky(&x.reshape(&[2, 2, 2])).flatten();
    let a = Tensor::from_vec(vec![4.0, 1.0, 1.0, 3.0, 5.0, 2.0, 2.0, 6.0], &[8]).unwrap();
    let p = jacobian_sparsity(&f, &a).unwrap();
    let block = ["x...", "....", "xxx.", "xxxx"];
    let want: String = (0..8)
        .map(|r| {
            let (b, row) = (r / 4, block[r % 4]);
            let pad = "....";
            if b == 0 {
                format!("{row}{pad}\n")
            } else {
                format!("{pad}{row}\n")
            }
        })
        .collect();
    assert_eq!(p.to_string(), want);
}

#[test]
fn factorisations_and_solves_keep_matrices_and_columns_apart() {
    let (batch, n, k) = (2, 3, 2);
    let mut x = matrices(batch, n, 1.0, true, 5);
    x.extend(values(batch * n * k, 6));
    let a = move |x: &Var| part(x, 0, &[batch, n, n]);
    let b = move |x: &Var| part(x, batch * n * n, &[batch, n, k]);
    type Case = (&'static str, Box<dyn Fn(&Var) -> Var>, bool);
    let cases: Vec<Case> = vec![
        ("solve", Box::new(move |x| linalg::solve(&a(x), &b(x))), true),
        ("cho_solve", Box::new(move |x| linalg::cho_solve(&linalg::cholesky(&a(x)), &b(x))), true),
        (
            "lu_solve",
            Box::new(move |x| {
                let (lu, piv) = linalg::lu_factor(&a(x));
                linalg::lu_solve(&lu, &piv, &b(x), false)
            }),
            // Through lu: the row order is fixed at this point.
            false,
        ),
        ("inv", Box::new(move |x| linalg::inv(&a(x))), true),
        ("det", Box::new(move |x| linalg::det(&a(x))), true),
        ("slogdet", Box::new(move |x| linalg::slogdet(&a(x)).1), true),
        ("eigh", Box::new(move |x| linalg::eigh(&a(x)).1), true),
        ("svd", Box::new(move |x| linalg::svd(&a(x), false).0), true),
        ("lu", Box::new(move |x| linalg::lu(&a(x)).2), false),
    ];
    for (name, f, exact) in cases {
        let f = std::rc::Rc::new(f);
        let g = move |x: &Var| f(x);
        let (extra, missed) = against_dense(g, &x);
        assert_eq!(missed, 0, "{name}");
        if exact {
            assert_eq!(extra, 0, "{name}");
        }
    }
}

#[test]
fn qr_patterns_follow_the_columns() {
    for (m, n) in [(4, 3), (3, 3), (3, 5)] {
        let x = values(2 * m * n, (m * n) as u64);
        let f = move |x: &Var| {
            let (q, r) = linalg::qr(&part(x, 0, &[2, m, n]), linalg::QrMode::Reduced);
            concatenate(&[&q.flatten(), &r.flatten()], 0)
        };
        assert_eq!(against_dense(f, &x), (0, 0), "{m} × {n}");
    }
    // Tall: Q's column 0 depends on A's column 0 alone, column 1 on both.
    let q = |x: &Var| linalg::qr(&x.reshape(&[3, 2]), linalg::QrMode::Reduced).0.flatten();
    let p = jacobian_sparsity(&q, Tensor::from_vec(values(6, 4), &[6]).unwrap()).unwrap();
    assert_eq!(p.to_string(), "x.x.x.\nxxxxxx\n".repeat(3));
    // Square: the last column is the unit normal of the others, so it too
    // depends on column 0 alone (column 1 only picks its sign).
    let q = |x: &Var| linalg::qr(&x.reshape(&[2, 2]), linalg::QrMode::Reduced).0.flatten();
    let p = jacobian_sparsity(&q, Tensor::from_vec(vec![3.0, 1.0, 4.0, 1.0], &[4]).unwrap());
    assert_eq!(p.unwrap().to_string(), "x.x.\n".repeat(4));
}

#[test]
fn vmapped_solves_are_block_diagonal() {
    let (batch, n) = (3, 2);
    let f = move |x: &Var| -> anvil::Result<Var> {
        let a = part(x, 0, &[batch, n, n]);
        let b = part(x, batch * n * n, &[batch, n]);
        Ok(vmap(|a: &Var, b: &Var| linalg::solve(a, b)).apply((&a, &b))?.flatten())
    };
    let mut x = matrices(batch, n, 2.0, false, 7);
    x.extend(values(batch * n, 8));
    let p = jacobian_sparsity(&f, Tensor::from_vec(x, &[batch * n * (n + 1)]).unwrap()).unwrap();
    for (i, j) in p.entries() {
        let owner = if j < batch * n * n { j / (n * n) } else { (j - batch * n * n) / n };
        assert_eq!(owner, i / n, "x[{i}] depends on input {j} of another batch element");
    }
    // Each solution depends on its whole matrix and right-hand side.
    assert_eq!(p.nnz(), batch * n * (n * n + n));
}

#[test]
fn triangles_and_diagonals_are_exact_selections() {
    let x = values(2 * 3 * 4, 11);
    for k in [-1, 0, 2] {
        let lower = move |x: &Var| linalg::tril(&part(x, 0, &[2, 3, 4]), k);
        let upper = move |x: &Var| linalg::triu(&part(x, 0, &[2, 3, 4]), k);
        let diag = move |x: &Var| linalg::diagonal(&part(x, 0, &[2, 3, 4]), k);
        assert_eq!(against_dense(lower, &x), (0, 0));
        assert_eq!(against_dense(upper, &x), (0, 0));
        assert_eq!(against_dense(diag, &x), (0, 0));
    }
    let f = |x: &Var| linalg::tril(&x.reshape(&[2, 2]), 0).flatten();
    let p = jacobian_sparsity(&f, Tensor::linspace(0.1, 0.9, 4).unwrap()).unwrap();
    assert_eq!(p.to_string(), "x...\n....\n..x.\n...x\n");
}

#[test]
fn cumulative_patterns_are_triangular_per_lane() {
    // Along the last axis: lane by lane, lower triangular (upper reversed).
    let f = |x: &Var| x.reshape(&[2, 3]).cumsum(1, false).flatten();
    let p = jacobian_sparsity(&f, Tensor::linspace(0.1, 0.9, 6).unwrap()).unwrap();
    assert_eq!(p.to_string(), "x.....\nxx....\nxxx...\n...x..\n...xx.\n...xxx\n");
    let r = |x: &Var| x.reshape(&[2, 3]).cumsum(1, true).flatten();
    let p = jacobian_sparsity(&r, Tensor::linspace(0.1, 0.9, 6).unwrap()).unwrap();
    assert_eq!(p.to_string(), "xxx...\n.xx...\n..x...\n...xxx\n....xx\n.....x\n");
    // Every kind, axis and direction against the dense Jacobian.
    let x = values(2 * 3 * 4, 12).iter().map(|v| v + 1.5).collect::<Vec<_>>();
    for axis in 0..3i64 {
        for reverse in [false, true] {
            let shaped = move |x: &Var| part(x, 0, &[2, 3, 4]);
            let sum = move |x: &Var| shaped(x).cumsum(axis, reverse);
            let prod = move |x: &Var| shaped(x).cumprod(axis, reverse);
            let lse = move |x: &Var| shaped(x).cumlogsumexp(axis, reverse);
            let max = move |x: &Var| shaped(x).cummax(axis, reverse);
            for (name, (extra, missed)) in [
                ("cumsum", against_dense(sum, &x)),
                ("cumprod", against_dense(prod, &x)),
                ("cumlogsumexp", against_dense(lse, &x)),
            ] {
                assert_eq!((extra, missed), (0, 0), "{name} axis {axis} reverse {reverse}");
            }
            assert_eq!(against_dense(max, &x).1, 0, "cummax");
        }
    }
}

#[test]
fn a_sorted_lane_depends_on_the_whole_lane_only() {
    let f = |x: &Var| x.reshape(&[2, 3]).sort(1, false).flatten();
    let p =
        jacobian_sparsity(&f, Tensor::from_vec(vec![3.0, 1.0, 2.0, 0.5, 9.0, 4.0], &[6]).unwrap());
    assert_eq!(p.unwrap().to_string(), "xxx...\nxxx...\nxxx...\n...xxx\n...xxx\n...xxx\n");
}

#[test]
fn no_linear_algebra_or_lax_op_falls_back_to_dense() {
    // One function through several of them; the list of ops warned about
    // is the process's (tests of one binary share it), so only these
    // ops' names are looked for.
    let x = matrices(1, 3, 1.0, true, 4);
    let f = |x: &Var| {
        let a = part(x, 0, &[3, 3]);
        let l = linalg::cholesky(&a);
        let (q, r) = linalg::qr(&a, linalg::QrMode::Reduced);
        let s = linalg::solve_triangular(&l, &q, false, true, false);
        (s + r + linalg::inv(&a) + linalg::tril(&a, 0)).cumsum(0, false).sort(1, false)
    };
    assert_eq!(against_dense(f, &x).1, 0);
    let ours = ["cholesky", "qr", "triangular_solve", "inv", "tril", "cumsum", "sort"];
    let fallbacks = anvil::core::sparsity::dense_fallbacks();
    assert!(!fallbacks.iter().any(|n| ours.contains(n)), "{fallbacks:?}");
}

#[test]
fn a_sparse_hessian_through_cholesky_is_block_diagonal_and_right() {
    use anvil::sparse::{hessian_sparsity, sparse_hessian};
    // Σ_b log det(A_b A_bᵀ + I) via Cholesky: reverse mode runs through
    // cholesky_cotangent and triangular solves, the Hessian's pattern
    // through their derivatives.
    let (batch, n) = (3, 3);
    let f = move |x: &Var| {
        let a = x.reshape(&[batch as i64, n as i64, n as i64]);
        let spd = a.matmul(&a.transpose()) + linalg::eye_of(n, &a);
        linalg::diagonal(&linalg::cholesky(&spd), 0).log().sum_all() * 2.0
    };
    let x = Tensor::from_vec(values(batch * n * n, 21), &[batch * n * n]).unwrap();
    let p = hessian_sparsity(&f, &x).unwrap();
    let per = n * n;
    assert!(p.entries().all(|(i, j)| i / per == j / per), "{p}");
    let h = sparse_hessian(f).eval(&x).unwrap().to_dense().unwrap();
    assert!(h.allclose(&hessian(f).eval(&x).unwrap(), 1e-9, 1e-9));
    let ours = ["cholesky", "cholesky_cotangent", "cholesky_tangent", "triangular_solve", "phi"];
    let fallbacks = anvil::core::sparsity::dense_fallbacks();
    assert!(!fallbacks.iter().any(|n| ours.contains(n)), "{fallbacks:?}");
}
