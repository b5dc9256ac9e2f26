//! `solve`: values, batching, derivatives, errors.

use anvil::prelude::*;
use anvil_testing::check_vmap;

fn well_conditioned(n: usize, seed: u64) -> Tensor {
    let v: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            let noise = ((k as u64 * 2654435761 + seed * 97) % 1000) as f64 / 1000.0 - 0.5;
            if i == j {
                n as f64 + noise
            } else {
                noise
            }
        })
        .collect();
    Tensor::from_vec(v, &[n, n]).unwrap()
}

fn vec_of(n: usize, seed: u64) -> Tensor {
    Tensor::from_vec((0..n).map(|i| ((i as f64 + 1.0) * (seed as f64 + 0.7)).sin()).collect(), &[n])
        .unwrap()
}

#[test]
fn solve_inverts_matmul_for_vectors_matrices_and_batches() {
    let a = well_conditioned(4, 1);
    let x = vec_of(4, 2);
    let b = jit(|a: &Var, x: &Var| a.matmul(x)).eval((&a, &x)).unwrap();
    jit(|a: &Var, b: &Var| a.solve(b)).eval((&a, &b)).unwrap().assert_allclose(&x, 1e-13, 1e-13);
    let xs = Tensor::stack(&[vec_of(4, 3), vec_of(4, 4)], 1).unwrap(); // [4, 2]
    let bs = jit(|a: &Var, x: &Var| a.matmul(x)).eval((&a, &xs)).unwrap();
    jit(|a: &Var, b: &Var| a.solve(b)).eval((&a, &bs)).unwrap().assert_allclose(&xs, 1e-13, 1e-13);
    // vmap: every combination of batched operands, at the front and the back
    let a3 =
        Tensor::stack(&[well_conditioned(4, 5), well_conditioned(4, 6), well_conditioned(4, 7)], 0)
            .unwrap();
    let b3 = Tensor::stack(&[vec_of(4, 8), vec_of(4, 9), vec_of(4, 10)], 0).unwrap();
    let f = |a: &Var, b: &Var| a.solve(b);
    for (args, axes) in [
        ([a3.clone(), b3.clone()], [Some(0), Some(0)]),
        ([a3.clone(), x.clone()], [Some(0), None]),
        ([a.clone(), b3.clone()], [None, Some(0)]),
        ([a.clone(), Tensor::stack(&[vec_of(4, 8), vec_of(4, 9)], 1).unwrap()], [None, Some(1)]),
    ] {
        if let Err(e) = check_vmap(&f, &args, &axes, 1e-13, 1e-13) {
            panic!("{e}");
        }
    }
}

/// jvp against central differences and the dot-product test of the vjp,
/// in both operands.
#[test]
fn solve_derivatives() {
    let f = |a: &Var, b: &Var| a.solve(b).sin();
    let (a, b) = (well_conditioned(3, 11), vec_of(3, 12));
    let (da, db) = (well_conditioned(3, 13), vec_of(3, 14));
    let out = jvp(f).eval(((&a, &b), (&da, &db))).unwrap();
    let h = 1e-6;
    let shift = |t: &Tensor, d: &Tensor, s: f64| {
        let v: Vec<f64> = t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .zip(d.to_vec::<f64>().unwrap())
            .map(|(x, y)| x + s * y)
            .collect();
        Tensor::from_vec(v, t.shape()).unwrap()
    };
    let fp =
        jit(f).eval((&shift(&a, &da, h), &shift(&b, &db, h))).unwrap().to_vec::<f64>().unwrap();
    let fm =
        jit(f).eval((&shift(&a, &da, -h), &shift(&b, &db, -h))).unwrap().to_vec::<f64>().unwrap();
    for (i, t) in out.1.to_vec::<f64>().unwrap().iter().enumerate() {
        assert!((t - (fp[i] - fm[i]) / (2.0 * h)).abs() < 1e-7, "{i}");
    }
    let u = vec_of(3, 15);
    let (_, pullback) = vjp(&f, (&a, &b)).unwrap();
    let cts = pullback.eval(&u).unwrap();
    let dot = |x: &Tensor, y: &Tensor| -> f64 {
        x.to_vec::<f64>().unwrap().iter().zip(y.to_vec::<f64>().unwrap()).map(|(p, q)| p * q).sum()
    };
    let lhs = dot(&u, &out.1);
    let rhs = dot(&cts.0, &da) + dot(&cts.1, &db);
    assert!((lhs - rhs).abs() < 1e-12, "{lhs} vs {rhs}");
    // Second order: hessian in b of sum(solve(A, b)^2) = 2 A^-T A^-1.
    let hb = hessian(|b: &Var, a: &Var| a.solve(b).square().sum_all()).eval((&b, &a)).unwrap();
    let ainv = jit(|a: &Var| a.solve(&eye(3))).eval(&a).unwrap();
    let want = jit(|m: &Var| m.transpose().matmul(m) * 2.0).eval(&ainv).unwrap();
    hb.assert_allclose(&want, 1e-12, 1e-12);
}

#[test]
fn solve_shape_errors() {
    let e = jit(|a: &Var, b: &Var| a.solve(b))
        .eval((&Tensor::zeros(&[3, 2]).unwrap(), &Tensor::zeros(&[3]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("solve") && e.contains("square"), "{e}");
    let e = jit(|a: &Var, b: &Var| a.solve(b))
        .eval((&Tensor::zeros(&[3, 3]).unwrap(), &Tensor::zeros(&[4]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("solve") && e.contains("[4]"), "{e}");
}

/// `jnp.linalg.solve`'s rule (JAX 0.5, NumPy 2): `b` is one vector only
/// when 1-D, otherwise `[..., n, k]`, batch axes broadcasting; each
/// result is checked by multiplying back, its shape against JAX's.
#[test]
fn solve_reads_b_as_jax_does_and_broadcasts_batches() {
    let stack = |ms: &[Tensor]| Tensor::stack(ms, 0).unwrap();
    let a3 = stack(&[well_conditioned(4, 1), well_conditioned(4, 2), well_conditioned(4, 3)]);
    let a = well_conditioned(4, 4);
    let m = |shape: &[usize], seed: u64| {
        let n: usize = shape.iter().product();
        let v = (0..n).map(|i| ((i as u64 * 7 + seed) as f64 * 0.3).cos()).collect();
        Tensor::from_vec(v, shape).unwrap()
    };
    let solve = |a: &Tensor, b: &Tensor| jit(|a: &Var, b: &Var| a.solve(b)).eval((a, b));
    let back = |a: &Tensor, x: &Tensor| jit(|a: &Var, x: &Var| a.matmul(x)).eval((a, x)).unwrap();
    // One 4 × 4 right-hand side for a batch of three matrices: [3, 4, 4].
    let b = m(&[4, 4], 1);
    let x = solve(&a3, &b).unwrap();
    assert_eq!(x.shape(), [3, 4, 4]);
    back(&a3, &x).assert_allclose(&stack(&[b.clone(), b.clone(), b.clone()]), 1e-12, 1e-12);
    // One matrix, a batch of right-hand sides: [2, 4, 3], factored once.
    let bs = m(&[2, 4, 3], 2);
    let x = solve(&a, &bs).unwrap();
    assert_eq!(x.shape(), [2, 4, 3]);
    back(&a, &x).assert_allclose(&bs, 1e-12, 1e-12);
    let g = anvil::lower(&jit(|a: &Var, b: &Var| a.solve(b)), (&a, &bs)).unwrap();
    assert_eq!(format!("{g}").matches("lu_transposed").count(), 1, "{g}");
    // Broadcast batch axes: [2, 1] against [3]: [2, 3, 4, 2].
    let a21 =
        Tensor::stack(&[stack(&[well_conditioned(4, 5)]), stack(&[well_conditioned(4, 6)])], 0);
    let b3 = m(&[3, 4, 2], 3);
    let x = solve(&a21.unwrap(), &b3).unwrap();
    assert_eq!(x.shape(), [2, 3, 4, 2]);
    // One vector for every matrix: [3, 4].
    let v = m(&[4], 4);
    let x = solve(&a3, &v).unwrap();
    assert_eq!(x.shape(), [3, 4]);
    let ax = jit(|a: &Var, x: &Var| a.matmul(&x.unsqueeze(-1)).squeeze(&[-1])).eval((&a3, &x));
    ax.unwrap().assert_allclose(&stack(&[v.clone(), v.clone(), v.clone()]), 1e-12, 1e-12);
    // [3, 4, 4] against [3, 4] was a batch of vectors before JAX 0.5: now
    // b is a 3 × 4 matrix, whose 3 rows do not match n = 4.
    let e = solve(&a3, &m(&[3, 4], 5)).unwrap_err().to_string();
    assert!(e.contains("solve") && e.contains("1-D") && e.contains("n = 3"), "{e}");
    // Under vmap a vector stays a vector (the op's batching rule).
    let b3v = m(&[3, 4], 6);
    let xs = vmap(|a: &Var, b: &Var| a.solve(b)).eval((&a3, &b3v)).unwrap();
    assert_eq!(xs.shape(), [3, 4]);
}

/// A shared matrix (or vector) against a stack of column vectors is one
/// GEMM in the kernel; it must equal the per-element products.
#[test]
fn shared_matrix_times_stacked_columns() {
    let a = well_conditioned(4, 20);
    let av = vec_of(4, 21);
    let cols = Tensor::stack(&(0..5).map(|i| vec_of(4, 30 + i)).collect::<Vec<_>>(), 0).unwrap();
    let cols = cols.reshape(&[5, 4, 1]).unwrap();
    for lhs in [a, av] {
        let got = jit(|a: &Var, b: &Var| a.matmul(b)).eval((&lhs, &cols)).unwrap();
        for i in 0..5 {
            let want = jit(|a: &Var, b: &Var| a.matmul(b))
                .eval((&lhs, &cols.select_axis(0, i).unwrap()))
                .unwrap();
            got.select_axis(0, i).unwrap().assert_allclose(&want, 1e-14, 1e-14);
        }
    }
}

/// Batched outer products (inner size 1) take the kernel's multiply path.
#[test]
fn batched_outer_products() {
    let seq = |n: usize, shape: &[usize]| {
        Tensor::from_vec((0..n).map(|i| (i as f64 * 0.7).cos()).collect(), shape).unwrap()
    };
    let f = |u: &Var, v: &Var| u.matmul(v);
    let g = |u: &Var, v: &Var| u * v;
    for (su, sv) in [
        (vec![2, 3, 1], vec![2, 1, 4]),
        (vec![2, 1, 3, 1], vec![1, 2, 1, 4]),
        (vec![3, 1], vec![2, 1, 4]),
    ] {
        let (u, v) = (seq(su.iter().product(), &su), seq(sv.iter().product(), &sv));
        let a = jit(f).eval((&u, &v)).unwrap();
        let b = jit(g).eval((&u, &v)).unwrap();
        assert_eq!(a.shape(), b.shape());
        a.assert_allclose(&b, 1e-15, 1e-15);
    }
}

/// The README's Newton example: steps `u - solve(jacfwd(F)(u), F(u))` on the
/// Bratu problem converge quadratically to a residual near rounding.
#[test]
fn newton_with_jacfwd_and_solve_converges_quadratically() {
    fn residual(u: &Var, lam: &Var) -> Var {
        let n = u.shape()[0];
        let h = 1.0 / (n as f64 + 1.0);
        let p = u.pad(&[(1, 1)], 0.0);
        let (l, r) =
            (p.slice_axis(0, Some(0), Some(n as i64), 1), p.slice_axis(0, Some(2), None, 1));
        (u * 2.0 - l - r) / (h * h) - lam * &u.exp()
    }
    let step =
        jit(|u: &Var, lam: &Var| u - &jacfwd(residual).invoke([u, lam]).solve(&residual(u, lam)));
    let norm = jit(|u: &Var, lam: &Var| residual(u, lam).norm());
    let lam = Tensor::scalar(1.0);
    let mut u = Tensor::zeros(&[16]).unwrap();
    let mut res = vec![norm.eval((&u, &lam)).unwrap().item().unwrap()];
    for _ in 0..4 {
        u = step.eval((&u, &lam)).unwrap();
        res.push(norm.eval((&u, &lam)).unwrap().item().unwrap());
    }
    assert!(res[3] < 1e-12, "{res:?}");
    // Quadratic: each error is at most a constant times the square of the last.
    for k in 1..3 {
        assert!(res[k + 1] <= 10.0 * res[k] * res[k], "{res:?}");
    }
}

/// The CPU plan factors an LU whose factor only feeds solves in the layout
/// of its own loops (`anvil::cpu::lu_layout`): where it applies, `solve`
/// gives the solutions of the transposed layout's path (the factor is
/// kept as an output there, which stops the rewrite) and the graph has an
/// `lu` whose solves read it row-major; elsewhere, and when another op
/// reads the factor, the graph is left as it is.
#[test]
fn solves_read_the_factor_in_the_layout_it_is_factored_in() {
    use anvil::cpu::lu_layout::row_major_factors;
    use anvil::linalg::{Lu, LuSolve, LuTransposed};
    let rewrite = |g: &anvil::Graph| {
        let ids: Vec<_> =
            g.iter().filter(|(_, n)| n.op.is::<LuTransposed>()).map(|(i, _)| i).collect();
        row_major_factors(g, &ids).unwrap()
    };
    let as_f32 = |t: &Tensor| t.cast(DType::F32);
    // 8: the small loop (either float type); 200: the panelled f64 loop
    // where the CPU has it; 400: faer, column-major (never rewritten).
    for (n, f32) in [(8, false), (8, true), (200, false), (400, false)] {
        let (mut a, mut b) =
            (well_conditioned(n, 3), Tensor::stack(&[vec_of(n, 1), vec_of(n, 2)], 1).unwrap());
        if f32 {
            (a, b) = (as_f32(&a), as_f32(&b));
        }
        let solve = |a: &Var, b: &Var| a.solve(b);
        let g = anvil::lower(&jit(solve), (&a, &b)).unwrap();
        let dtype = if f32 { DType::F32 } else { DType::F64 };
        let applies = anvil::cpu::linalg::factors_row_major(dtype, n, n);
        assert!(applies || n > 8, "the small loop takes n = 8");
        match rewrite(&g) {
            Some(r) => {
                assert!(applies, "n = {n}");
                r.verify().unwrap();
                assert_eq!((r.count::<Lu>(), r.count::<LuTransposed>()), (1, 0), "{r}");
                let transposed = r.iter().filter_map(|(_, n)| n.op.downcast_ref::<LuSolve>());
                assert!(transposed.map(|s| s.factor_transposed).eq([false]), "{r}");
            }
            None => assert!(!applies, "n = {n}: {g}"),
        }
        // Against the column-major factor's path, and A·x = b.
        let x = jit(solve).eval((&a, &b)).unwrap();
        let keep = |a: &Var, b: &Var| {
            let f = Var::apply_op_n(Box::new(LuTransposed), &[a], 3);
            let solve = LuSolve { factor_transposed: true, ..LuSolve::default() };
            (f[0].apply(solve, &[&f[2], b]), f[0].clone())
        };
        let (x_t, _) = jit(keep).eval((&a, &b)).unwrap();
        let tol = if f32 { 1e-5 } else { 1e-12 };
        x.assert_allclose(&x_t, tol, tol);
        let back = jit(|a: &Var, x: &Var| a.matmul(x)).eval((&a, &x)).unwrap();
        back.assert_allclose(&b, 10.0 * tol, 10.0 * tol);
    }
    // A determinant reads the same factor: left column-major.
    let a = well_conditioned(8, 4);
    let both = |a: &Var, b: &Var| (a.solve(b), a.det());
    let g = anvil::lower(&jit(both), (&a, &vec_of(8, 5))).unwrap();
    assert_eq!(g.count::<LuTransposed>(), 1, "{g}");
    assert!(rewrite(&g).is_none(), "{g}");
}
