//! `anvil::linalg`: values against reconstructions, batching of shared
//! matrices, errors and the NaN mode, derivatives at special points
//! (singular matrices, repeated eigenvalues), second derivatives through
//! `cholesky` and `eigh`, and "factor once" in the compiled graphs.
//!
//! The per-op rules (vmap against a loop, jvp against finite differences,
//! the transpose dot test, nested vmap) are checked for every op by the
//! conformance kit (`tests/conformance_*.rs`, samples in
//! `src/testing/linalg_samples.rs`).

use anvil::linalg::{self, MatrixNorm, OnFailure, QrMode};
use anvil::prelude::*;

/// A deterministic pseudo-random tensor in `[-1, 1)`.
fn rand(shape: &[usize], seed: u64) -> Tensor {
    anvil_testing::random_tensor(shape, seed)
}

/// Symmetric positive definite matrices `M Mᵀ / n + I` of `shape`.
fn spd(shape: &[usize], seed: u64) -> Tensor {
    let n = shape[shape.len() - 1] as f64;
    let m = rand(shape, seed);
    jit(move |m: &Var| m.matmul(&m.transpose()) / n + eye(m.shape()[m.rank() - 1]))
        .eval(&m)
        .unwrap()
}

/// `rand` scaled by 0.1.
fn small(shape: &[usize], seed: u64) -> Tensor {
    let v = rand(shape, seed).to_vec::<f64>().unwrap();
    Tensor::from_vec(v.iter().map(|x| x * 0.1).collect::<Vec<f64>>(), shape).unwrap()
}

fn close(a: &Tensor, b: &Tensor, tol: f64) {
    a.assert_allclose(b, tol, tol);
}

#[test]
fn cholesky_and_solves_reconstruct() {
    let a = spd(&[3, 5, 5], 1);
    let b = rand(&[3, 5, 2], 2);
    let (l, llt, x, ax) = jit(|a: &Var, b: &Var| {
        let l = linalg::cholesky(a);
        let x = linalg::cho_solve(&l, b);
        (l.clone(), l.matmul(&l.transpose()), x.clone(), a.matmul(&x))
    })
    .eval((&a, &b))
    .unwrap();
    close(&llt, &a, 1e-13);
    close(&ax, &b, 1e-12);
    let upper = jit(|l: &Var| linalg::triu(l, 1)).eval(&l).unwrap();
    close(&upper, &Tensor::zeros(&[3, 5, 5]).unwrap(), 0.0);
    let _ = x;
    // triangular_solve's defaults are JAX's: x·a = b with a upper.
    let u = jit(|l: &Var| l.transpose()).eval(&l).unwrap();
    let bt = rand(&[3, 2, 5], 3);
    let xa = jit(|u: &Var, b: &Var| linalg::triangular_solve(u, b, Default::default()).matmul(u))
        .eval((&u, &bt))
        .unwrap();
    close(&xa, &bt, 1e-12);
    // SciPy's solve_triangular: a x = b.
    let lx = jit(|l: &Var, b: &Var| l.matmul(&linalg::solve_triangular(l, b, false, true, false)))
        .eval((&l, &b))
        .unwrap();
    close(&lx, &b, 1e-12);
}

#[test]
fn lu_qr_eigh_svd_reconstruct() {
    for shape in [[4, 4], [5, 3], [3, 5]] {
        let a = rand(&shape, 10);
        let (plu, qr, usv) = jit(|a: &Var| {
            let (p, l, u) = linalg::lu(a);
            let (q, r) = linalg::qr(a, QrMode::Reduced);
            let (u2, s, vt) = linalg::svd(a, false);
            (p.matmul(&l).matmul(&u), q.matmul(&r), (u2 * s.unsqueeze(-2)).matmul(&vt))
        })
        .eval(&a)
        .unwrap();
        close(&plu, &a, 1e-13);
        close(&qr, &a, 1e-13);
        close(&usv, &a, 1e-13);
    }
    let a = spd(&[2, 6, 6], 11);
    let (vwv, w) = jit(|a: &Var| {
        let (w, v) = linalg::eigh(a);
        ((&v * &w.unsqueeze(-2)).matmul(&v.transpose()), w)
    })
    .eval(&a)
    .unwrap();
    close(&vwv, &a, 1e-12);
    let w = w.to_vec::<f64>().unwrap();
    assert!(w[..6].windows(2).all(|p| p[0] <= p[1]), "ascending: {w:?}");
}

#[test]
fn det_slogdet_inv_pinv_lstsq_norms() {
    let a = spd(&[4, 4], 20);
    let (det, (sign, logabs), inv, pinv) =
        jit(|a: &Var| (linalg::det(a), linalg::slogdet(a), linalg::inv(a), linalg::pinv(a)))
            .eval(&a)
            .unwrap();
    assert_eq!(sign.item().unwrap(), 1.0);
    assert!((logabs.item().unwrap().exp() - det.item().unwrap()).abs() < 1e-12);
    close(&inv, &pinv, 1e-11);
    // lstsq of a tall full-rank system equals the normal equations' solution
    let (m, y) = (rand(&[6, 3], 21), rand(&[6], 22));
    let (x, want) = jit(|m: &Var, y: &Var| {
        let normal = m.transpose().matmul(m);
        (
            linalg::lstsq(m, y).0,
            linalg::solve(&normal, &m.transpose().matmul(&y.unsqueeze(-1))).squeeze(&[-1]),
        )
    })
    .eval((&m, &y))
    .unwrap();
    close(&x, &want, 1e-12);
    // Residuals keep the column axis, as JAX's: [1] for a vector, [k] for k columns.
    let res = |y: &Tensor| jit(|m: &Var, y: &Var| linalg::lstsq(m, y).1).eval((&m, y)).unwrap();
    assert_eq!(res(&y).shape(), &[1]);
    assert_eq!(res(&rand(&[6, 2], 23)).shape(), &[2]);
    // the 2-norm is the largest singular value, the nuclear norm their sum
    let (two, nuc, s) = jit(|m: &Var| {
        (
            linalg::matrix_norm(m, MatrixNorm::Two, false),
            linalg::matrix_norm(m, MatrixNorm::Nuc, false),
            linalg::svdvals(m),
        )
    })
    .eval(&m)
    .unwrap();
    let s = s.to_vec::<f64>().unwrap();
    assert!((two.item().unwrap() - s[0]).abs() < 1e-14);
    assert!((nuc.item().unwrap() - s.iter().sum::<f64>()).abs() < 1e-13);
}

/// Not positive definite: an error naming the op and the batch element,
/// through vmap too; with the NaN mode only that element is NaN.
#[test]
fn cholesky_errors_name_the_batch_element() {
    let mut a = spd(&[2, 3, 3, 3], 30).to_vec::<f64>().unwrap();
    let bad = (3 + 2) * 9; // element [1, 2] of the [2, 3] batch
    a[bad] = -5.0;
    let a = Tensor::from_vec(a, &[2, 3, 3, 3]).unwrap();
    let e = jit(|a: &Var| linalg::cholesky(a)).eval(&a).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "cholesky: matrix [1, 2] of the batch (batch shape [2, 3]) is not positive definite"
        ),
        "{e}"
    );
    let e = vmap(|a: &Var| linalg::cholesky(a)).eval(&a).unwrap_err().to_string();
    assert!(e.contains("cholesky") && e.contains("[1, 2]"), "{e}");
    let l = jit(|a: &Var| linalg::cholesky_with(a, OnFailure::Nan)).eval(&a).unwrap();
    let v = l.to_vec::<f64>().unwrap();
    for (k, m) in v.chunks(9).enumerate() {
        assert_eq!(m.iter().all(|x| x.is_nan()), k == 5, "element {k}: {m:?}");
    }
}

/// Singular matrices: `solve`, `inv`, `lu_solve` and `cho_solve` fail
/// naming themselves (also in a gradient, where `solve` runs as `lu` and
/// `lu_solve`); `lu` and `det` never fail.
#[test]
fn singular_matrices() {
    let s = Tensor::from_vec(vec![1.0, 2.0, 2.0, 4.0], &[2, 2]).unwrap();
    let ok = Tensor::eye(2).unwrap();
    let both = Tensor::stack(&[ok.clone(), s.clone()], 0).unwrap();
    let b = Tensor::from_vec(vec![1.0, 1.0, 1.0, 1.0], &[2, 2]).unwrap();
    let e = jit(|a: &Var, b: &Var| linalg::solve(a, b)).eval((&both, &b)).unwrap_err().to_string();
    assert!(e.starts_with("solve: matrix [1] of the batch (batch shape [2]) is singular"), "{e}");
    let e = grad(|a: &Var, b: &Var| linalg::solve(a, b).sum_all())
        .eval((&both, &b))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("solve: matrix [1]"), "{e}");
    let e = jit(|a: &Var| linalg::inv(a)).eval(&both).unwrap_err().to_string();
    assert!(e.starts_with("inv: matrix [1] of the batch"), "{e}");
    let e = jit(|a: &Var, b: &Var| {
        let (lu, piv) = linalg::lu_factor(a);
        linalg::lu_solve(&lu, &piv, b, false)
    })
    .eval((&s, &b.select_axis(0, 0).unwrap()))
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("lu_solve: the matrix is singular"), "{e}");
    let zero_diag = Tensor::from_vec(vec![1.0, 0.0, 3.0, 0.0], &[2, 2]).unwrap();
    let e = jit(|l: &Var, b: &Var| linalg::cho_solve(l, b))
        .eval((&zero_diag, &b))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cho_solve: the matrix is singular"), "{e}");
    // NaN mode: the good element is solved (`b`, one 2 × 2 right-hand
    // side, is shared by both matrices, as in `jnp.linalg.solve`).
    let x =
        jit(|a: &Var, b: &Var| linalg::solve_with(a, b, OnFailure::Nan)).eval((&both, &b)).unwrap();
    assert_eq!(x.shape(), [2, 2, 2]);
    let x = x.to_vec::<f64>().unwrap();
    assert_eq!(x[..4], [1.0; 4]);
    assert!(x[4..].iter().all(|v| v.is_nan()));
    // det is 0 with the adjugate as gradient; slogdet is (0, -inf).
    let (d, (sign, logabs)) = jit(|a: &Var| (linalg::det(a), linalg::slogdet(a))).eval(&s).unwrap();
    assert_eq!((d.item().unwrap(), sign.item().unwrap()), (0.0, 0.0));
    assert_eq!(logabs.item().unwrap(), f64::NEG_INFINITY);
    let g = grad(|a: &Var| linalg::det(a)).eval(&s).unwrap();
    close(&g, &Tensor::from_vec(vec![4.0, -2.0, -2.0, 1.0], &[2, 2]).unwrap(), 1e-15);
    // rank n - 2: the adjugate is zero; a zero first column (two zero pivots, rank n - 1)
    let z = Tensor::from_vec(vec![0.0, 1.0, 0.0, 0.0], &[2, 2]).unwrap();
    let g = grad(|a: &Var| linalg::det(a)).eval(&z).unwrap();
    close(&g, &Tensor::from_vec(vec![0.0, 0.0, -1.0, 0.0], &[2, 2]).unwrap(), 1e-15);
    let g = grad(|a: &Var| linalg::det(a)).eval(Tensor::zeros(&[3, 3]).unwrap()).unwrap();
    close(&g, &Tensor::zeros(&[3, 3]).unwrap(), 0.0);
}

/// `det` of a small matrix by cofactor expansion (exact for small integers).
fn det_by_cofactors(a: &[f64], n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    (0..n)
        .map(|j| {
            let minor: Vec<f64> = (1..n)
                .flat_map(|r| (0..n).filter(move |&c| c != j).map(move |c| a[r * n + c]))
                .collect();
            let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
            sign * a[j] * det_by_cofactors(&minor, n - 1)
        })
        .sum()
}

/// The Hessian of `det` at `a` (`n × n`, small integers): `det` has degree
/// one in each entry, so the mixed difference with unit steps is exact.
fn det_hessian(a: &[f64], n: usize) -> Tensor {
    let with = |steps: &[usize]| {
        let mut b = a.to_vec();
        for &e in steps {
            b[e] += 1.0;
        }
        det_by_cofactors(&b, n)
    };
    let nn = n * n;
    let h: Vec<f64> = (0..nn * nn)
        .map(|q| {
            let (e, f) = (q / nn, q % nn);
            if e == f {
                0.0
            } else {
                with(&[e, f]) - with(&[e]) - with(&[f]) + with(&[])
            }
        })
        .collect();
    Tensor::from_vec(h, &[n, n, n, n]).unwrap()
}

/// The second derivative of `det` at singular matrices (where the
/// adjugate's derivative through `A⁻¹` is NaN, or cancels when LU finds a
/// pivot of round-off size), at a 4 × 4 of rank 2 whose adjugate is 0 but
/// whose Hessian is not, and at an invertible one: every order of
/// `jacfwd`/`jacrev` and a `vmap` over the batch give the cofactors.
#[test]
fn second_derivatives_of_det_at_singular_matrices() {
    let cases: Vec<(Vec<f64>, usize)> = vec![
        ((1..=9).map(f64::from).collect(), 3), // numerically singular in LU
        (vec![1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0], 3), // diag(1, 2, 0)
        (vec![1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 3.0, 6.0, 9.0], 3), // rank 1
        (vec![1.0, 2.0, 2.0, 4.0], 2),
        (vec![1.0, 2.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 3.0, 1.0, 2.0, 2.0, 3.0, -1.0, 1.0], 4),
        (vec![2.0, -1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 2.0, 4.0], 3), // invertible
    ];
    let det = |a: &Var| linalg::det(a);
    for (a, n) in &cases {
        let want = det_hessian(a, *n);
        let x = Tensor::from_vec(a.clone(), &[*n, *n]).unwrap();
        for (name, h) in [
            ("hessian", hessian(det).eval(&x)),
            ("jacfwd(grad)", jacfwd(grad(det)).eval(&x)),
            ("jacrev(grad)", jacrev(grad(det)).eval(&x)),
        ] {
            let h = h.unwrap();
            assert!(h.allclose(&want, 1e-12, 1e-11), "{name} at {a:?}:\n{h}\nwant\n{want}");
        }
    }
    // The 4 × 4 has rank 2 (rows 2 and 3 are r0 + r1 and 2 r0 - r1): adj = 0,
    // the gradient, but the Hessian is not zero.
    let r2 = Tensor::from_vec(cases[4].0.clone(), &[4, 4]).unwrap();
    let g = grad(det).eval(&r2).unwrap().to_vec::<f64>().unwrap();
    assert!(g.iter().all(|&v| v.abs() < 1e-12), "{g:?}");
    assert!(det_hessian(&cases[4].0, 4).to_vec::<f64>().unwrap().iter().any(|&v| v != 0.0));
    // A batch of the 3 × 3 cases under vmap.
    let batch: Vec<f64> =
        cases.iter().filter(|(_, n)| *n == 3).flat_map(|(a, _)| a.clone()).collect();
    let x = Tensor::from_vec(batch, &[4, 3, 3]).unwrap();
    let hs = vmap(hessian(det)).eval(&x).unwrap().to_vec::<f64>().unwrap();
    for (k, (a, _)) in cases.iter().filter(|(_, n)| *n == 3).enumerate() {
        let want = det_hessian(a, 3).to_vec::<f64>().unwrap();
        for (g, w) in hs[k * 81..(k + 1) * 81].iter().zip(&want) {
            assert!((g - w).abs() < 1e-11, "vmap case {k}: {g} vs {w}");
        }
    }
}

/// `grad` by central differences of `f` at `x`, as a tensor of `x`'s shape.
fn fd_grad(f: &dyn Fn(&Tensor) -> f64, x: &Tensor, h: f64) -> Tensor {
    let v = x.to_vec::<f64>().unwrap();
    let g: Vec<f64> = (0..v.len())
        .map(|i| {
            let mut p = v.clone();
            p[i] += h;
            let fp = f(&Tensor::from_vec(p.clone(), x.shape()).unwrap());
            p[i] -= 2.0 * h;
            let fm = f(&Tensor::from_vec(p, x.shape()).unwrap());
            (fp - fm) / (2.0 * h)
        })
        .collect();
    Tensor::from_vec(g, x.shape()).unwrap()
}

/// Checks `hessian(f)` at `x` against central differences of `grad(f)`.
fn check_hessian<F: Fn(&Var) -> Var + Clone + 'static>(f: F, x: &Tensor, tol: f64) {
    let n = x.numel();
    let h = hessian(f.clone()).eval(x).unwrap().reshape(&[n as i64, n as i64]).unwrap();
    let g = grad(f);
    let eps = 1e-5;
    let v = x.to_vec::<f64>().unwrap();
    let mut cols = Vec::new();
    for i in 0..n {
        let mut p = v.clone();
        p[i] += eps;
        let gp = g
            .eval(Tensor::from_vec(p.clone(), x.shape()).unwrap())
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        p[i] -= 2.0 * eps;
        let gm = g.eval(Tensor::from_vec(p, x.shape()).unwrap()).unwrap().to_vec::<f64>().unwrap();
        cols.push(gp.iter().zip(&gm).map(|(a, b)| (a - b) / (2.0 * eps)).collect::<Vec<_>>());
    }
    // cols[i][j] = d²f/dx_i dx_j
    let want: Vec<f64> = (0..n).flat_map(|i| cols[i].clone()).collect();
    h.assert_allclose(&Tensor::from_vec(want, &[n, n]).unwrap(), tol, tol);
}

#[test]
fn hessian_through_cholesky() {
    // A Gaussian-process-like objective: log det + a quadratic form.
    let a0 = spd(&[3, 3], 40);
    let y = rand(&[3, 1], 41);
    let f = move |x: &Var| {
        let a = x + &x.constant_like(a0.clone());
        let l = linalg::cholesky(&a);
        let alpha = linalg::cho_solve(&l, &x.constant_like(y.clone()));
        linalg::diagonal(&l, 0).log().sum_all() * 2.0
            + (alpha * x.constant_like(y.clone())).sum_all()
    };
    check_hessian(f, &small(&[3, 3], 42), 1e-6);
}

#[test]
fn hessian_through_eigh() {
    let a0 = Tensor::from_vec(vec![2.0, 0.3, 0.1, 0.3, -1.0, 0.2, 0.1, 0.2, 4.0], &[3, 3]).unwrap();
    let c = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    let f = move |x: &Var| {
        let (w, v) = linalg::eigh(&(x + &x.constant_like(a0.clone())));
        // sign-invariant in V: V ∘ V
        (w.powf(3.0) * x.constant_like(c.clone())).sum_all()
            + (&v * &v).matmul(&x.constant_like(c.clone())).sum_all()
    };
    check_hessian(f, &small(&[3, 3], 43), 1e-6);
}

/// Sign-invariant functions of the vectors of `eigh`, `qr` and `svd`:
/// their gradients match finite differences.
#[test]
fn sign_invariant_gradients() {
    let a = rand(&[4, 3], 50);
    type Objective = Box<dyn Fn(&Var) -> Var>;
    let fs: Vec<Objective> = vec![
        Box::new(|a: &Var| {
            let s = a.matmul(&a.transpose()); // eigenvalues 0 < ... (rank 3), separated
            let (_, v) = linalg::eigh(&s);
            (&v * &v).slice_axis(1, Some(2), Some(4), 1).sin().sum_all()
        }),
        Box::new(|a: &Var| {
            let (q, r) = linalg::qr(a, QrMode::Reduced);
            q.matmul(&q.transpose()).sin().sum_all() + r.square().sum_all()
        }),
        Box::new(|a: &Var| {
            let (u, s, vt) = linalg::svd(a, false);
            (u.matmul(&vt) * 1.5).sin().sum_all() + s.sum_all()
        }),
    ];
    for f in fs {
        let f: std::rc::Rc<dyn Fn(&Var) -> Var> = f.into();
        let f2 = f.clone();
        let g = grad(move |a: &Var| f2(a)).eval(&a).unwrap();
        let value = jit(move |a: &Var| f(a));
        let want = fd_grad(&|x| value.eval(x).unwrap().item().unwrap(), &a, 1e-6);
        g.assert_allclose(&want, 1e-6, 1e-6);
    }
}

/// Repeated eigenvalues: derivatives stay finite, and the functions
/// symmetric in the repeated eigenvalues differentiate exactly.
#[test]
fn degenerate_eigenvalues() {
    let a = Tensor::from_vec(vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0], &[3, 3]).unwrap();
    // d trace(f(A)) = f'(A): sum of w³ has gradient 3 A².
    let g = grad(|a: &Var| linalg::eigvalsh(a).powf(3.0).sum_all()).eval(&a).unwrap();
    let want =
        Tensor::from_vec(vec![3.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 12.0], &[3, 3]).unwrap();
    close(&g, &want, 1e-14);
    // The full Jacobian of the vectors is finite (zero inside the eigenspace).
    let j = jacfwd(|a: &Var| linalg::eigh(a).1).eval(&a).unwrap();
    assert!(j.to_vec::<f64>().unwrap().iter().all(|x| x.is_finite()));
    let j = jacrev(|a: &Var| linalg::svd(a, false).0).eval(Tensor::eye(3).unwrap()).unwrap();
    assert!(j.to_vec::<f64>().unwrap().iter().all(|x| x.is_finite()));
}

/// A matrix shared across a vmapped batch is factored once, and the
/// derivatives of `solve` and `det` reuse one `lu` of `A`.
#[test]
fn factor_once() {
    let count = |g: &anvil::Graph, op: &str| format!("{g}").matches(&format!("= {op} ")).count();
    let (a, bs) = (spd(&[4, 4], 60), rand(&[7, 4], 61));
    let f = vmap(|a: &Var, b: &Var| linalg::cho_solve(&linalg::cholesky(a), b))
        .in_axes([None, Some(0)]);
    let g = anvil::lower(&f, (&a, &bs)).unwrap();
    assert_eq!(count(&g, "cholesky"), 1, "{g}");
    assert!(format!("{g}").contains("f64[4,4] = cholesky"), "{g}");
    let g = anvil::lower(
        &grad(|a: &Var, b: &Var| {
            linalg::solve(a, b).sum_all() + linalg::det(a) + linalg::slogdet(a).1
        }),
        (&a, &bs.select_axis(0, 0).unwrap()),
    )
    .unwrap();
    // `lu` is rewritten into its transposed-factor form, which the solves
    // and determinants read as stored: one factorisation.
    assert_eq!(count(&g, "lu_transposed"), 1, "{g}");
    assert_eq!(count(&g, "lu"), 0, "{g}");
    assert_eq!(count(&g, "solve"), 0, "{g}");
    let text = format!("{g}");
    assert_eq!(text.matches("= lu_solve[").count(), 3, "{g}");
    assert_eq!(text.matches("factor_transposed=true").count(), 3, "{g}");
}

/// f32 works end to end.
#[test]
fn single_precision() {
    let a = spd(&[3, 3], 70).cast(DType::F32);
    let g = grad(|a: &Var| linalg::slogdet(a).1).eval(&a).unwrap();
    assert_eq!(g.dtype(), DType::F32);
    let want = jit(|a: &Var| linalg::inv(a).transpose()).eval(&a).unwrap();
    g.assert_allclose(&want, 1e-5, 1e-5);
}

/// Cholesky's tangent and cotangent kernels (blocked solves whose results
/// are triangular, in blocks of 128 columns) against the same formulas
/// written with triangular solves and products, at a size of two blocks.
#[test]
fn cholesky_tangent_pair_kernels_at_two_blocks() {
    use anvil::linalg::{CholeskyCotangent, CholeskyTangent, Triangle, TriangularSolve};
    let n = 150;
    let l = jit(|a: &Var| linalg::cholesky(a)).eval(spd(&[n, n], 80)).unwrap();
    let s = rand(&[n, n], 81);
    let solve = |left_side: bool, transpose_a: bool| TriangularSolve {
        left_side,
        lower: true,
        transpose_a,
        unit_diagonal: false,
    };
    let phi = |x: &Var| x.apply(Triangle::phi(), &[]);
    let (t, t_ref, c, c_ref) = jit(move |l: &Var, s: &Var| {
        let r = phi(s) + phi(s).transpose();
        let z = linalg::triangular_solve(
            l,
            &linalg::triangular_solve(l, &r, solve(true, false)),
            solve(false, true),
        );
        let t_ref = l.matmul(&phi(&z));
        let p = phi(&l.transpose().matmul(&linalg::tril(s, 0)));
        let z = linalg::triangular_solve(
            l,
            &linalg::triangular_solve(l, &p, solve(true, true)),
            solve(false, false),
        );
        let c_ref = phi(&(&z + &z.transpose()));
        let (t, c) = (CholeskyTangent::default(), CholeskyCotangent::default());
        (l.apply(t, &[s]), t_ref, l.apply(c, &[s]), c_ref)
    })
    .eval((&l, &s))
    .unwrap();
    close(&t, &t_ref, 1e-10);
    close(&c, &c_ref, 1e-10);
}

/// Reverse mode through `cholesky` (input symmetrised) is one cotangent
/// kernel that writes the symmetrised cotangent itself: no transpose of an
/// `n × n` matrix is left in the lowered gradient (before, the transpose
/// of the symmetrisation was a scale, a `permute` and a sum), and the
/// values are those of the old graph (the factor of the explicit
/// `(A + Aᵀ)·0.5`, its plain cotangent, the symmetrisation's transpose by
/// ops): the same bits.
#[test]
fn cholesky_gradient_symmetrises_inside_its_cotangent() {
    use anvil::linalg::{Cholesky, OnFailure};
    let n = 6;
    let perturb = jit(|s: &Var, r: &Var| s + r * 0.05); // not symmetric
    let a = perturb.eval((&spd(&[n, n], 91), &rand(&[n, n], 92))).unwrap();
    let loss = |l: &Var| linalg::diagonal(l, 0).log().sum_all() + (l * l * 0.3).sum_all();
    let new = grad(move |a: &Var| loss(&linalg::cholesky(a)));
    let lower_only = Cholesky { symmetrize_input: false, on_failure: OnFailure::Error };
    let old = grad(move |a: &Var| loss(&((a + &a.transpose()) * 0.5).apply(lower_only, &[])));
    let low = anvil::lower(&new, &a).unwrap();
    let permutes = low.iter().filter(|(_, node)| node.op.name() == "permute").count();
    assert_eq!(permutes, 0, "{low}");
    let sym = low.iter().filter(|(_, node)| {
        node.op.name() == "cholesky_cotangent" && node.op.params().contains("symmetrize")
    });
    assert_eq!(sym.count(), 1, "{low}");
    let (got, want) = (new.eval(&a).unwrap(), old.eval(&a).unwrap());
    assert_eq!(got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    let t = got.to_vec::<f64>().unwrap();
    assert!((0..n * n).all(|k| t[k] == t[(k % n) * n + k / n]), "a symmetric gradient");
}

/// Empty matrices and empty batches run (no panic in a kernel).
#[test]
fn empty_matrices_and_batches() {
    for shape in [[2, 0, 0], [0, 3, 3]] {
        let a = Tensor::zeros(&shape).unwrap();
        let b = Tensor::zeros(&[shape[0], shape[1], 1]).unwrap();
        let outs = jit(|a: &Var, b: &Var| {
            let l = linalg::cholesky(&(a + &linalg::eye_of(a.shape()[1], a)));
            (
                linalg::cho_solve(&l, b),
                linalg::solve(&(a + &linalg::eye_of(a.shape()[1], a)), b),
                linalg::det(a),
                linalg::eigh(a).0,
                linalg::svdvals(a),
                linalg::qr(a, QrMode::Reduced).1,
            )
        })
        .eval((&a, &b))
        .unwrap();
        assert_eq!(outs.0.shape(), b.shape());
        assert_eq!(outs.2.shape(), &shape[..1]);
        if shape[1] == 0 {
            assert_eq!(outs.2.to_vec::<f64>().unwrap(), vec![1.0, 1.0]);
        }
    }
}

/// `eigh` and `cholesky` of a non-symmetric matrix are those of its
/// symmetric part (JAX's `symmetrize_input`), on the small-matrix path
/// and on faer's.
#[test]
fn symmetrize_input() {
    for n in [5, 20] {
        let a = jit(|m: &Var| m + &linalg::eye_of(m.shape()[0], m) * (m.shape()[0] as f64))
            .eval(rand(&[n, n], 90))
            .unwrap();
        let (w, v, l, ws, vs, ls) = jit(|a: &Var| {
            let s = (a + &a.transpose()) * 0.5;
            let (w, v) = linalg::eigh(a);
            let (ws, vs) = linalg::eigh_with(&s, false);
            (w, v, linalg::cholesky(a), ws, vs, linalg::cholesky(&s))
        })
        .eval(&a)
        .unwrap();
        close(&w, &ws, 1e-13);
        close(&v, &vs, 1e-11);
        close(&l, &ls, 1e-13);
    }
}

/// Derivatives of the decompositions of empty matrices give a result or an
/// error, never a panic (the fuzz suite found one in `jacfwd` of `qr` with
/// a zero dimension: a reshape with `-1` of an empty array in a batching
/// rule). The QR and LU ones give results.
#[test]
fn derivatives_of_empty_decompositions() {
    for shape in [[0, 3, 2], [2, 0, 2], [2, 3, 0], [2, 0, 0]] {
        let a = Tensor::zeros(&shape).unwrap();
        let q = jacfwd(|a: &Var| linalg::qr(a, QrMode::Reduced).0).eval(&a);
        let r = jacfwd(|a: &Var| linalg::qr(a, QrMode::Reduced).1).eval(&a);
        let s = jacfwd(|a: &Var| linalg::svd(a, false).0).eval(&a);
        let v = jacrev(|a: &Var| linalg::svdvals(a).sum_all()).eval(&a);
        assert!(q.is_ok() && r.is_ok(), "{shape:?}: {q:?} {r:?}");
        let _ = (s, v); // an empty max in the SVD's gap is an error
        let l = jacfwd(|a: &Var| linalg::lu(a).2).eval(&a);
        assert!(l.is_ok(), "{shape:?}: {l:?}");
    }
}

/// Every function of the table in f32: the values and the gradient of a
/// sign-invariant scalar of all of them agree with f64 to f32 precision,
/// and the results stay f32.
#[test]
fn every_function_in_single_precision() {
    let f = |a: &Var, b: &Var| -> Var {
        let l = linalg::cholesky(a);
        let opts = linalg::TriangularSolve { left_side: true, lower: true, ..Default::default() };
        let ts = linalg::triangular_solve(&l, b, opts);
        let st = linalg::solve_triangular(&l, b, true, true, false);
        let cs = linalg::cho_solve(&l, b);
        let (p, lo, up) = linalg::lu(a);
        let (lu, piv) = linalg::lu_factor(a);
        let ls = linalg::lu_solve(&lu, &piv, b, true);
        let (q, r) = linalg::qr(a, QrMode::Reduced);
        let (w, v) = linalg::eigh(a);
        let (u, s, vt) = linalg::svd(a, false);
        let (sign, logabs) = linalg::slogdet(a);
        let (x, _, _, sv) = linalg::lstsq(a, b);
        (ts.square().sum_all()
            + st.square().sum_all()
            + cs.square().sum_all()
            + p.matmul(&lo).matmul(&up).square().sum_all()
            + ls.square().sum_all()
            + linalg::solve(a, b).square().sum_all()
            + q.matmul(&r).square().sum_all()
            + (&v * &v).matmul(&w.unsqueeze(-1)).sum_all()
            + (&u.square().sum(&[-1]) * &s).sum_all()
            + vt.square().sum_all()
            + linalg::svdvals(a).sum_all()
            + linalg::eigvalsh(a).sum_all()
            + linalg::det(a)
            + sign * logabs
            + linalg::inv(a).sum_all()
            + linalg::pinv(a).sum_all()
            + x.square().sum_all()
            + sv.sum_all()
            + linalg::trace(a, 0)
            + linalg::diagonal(a, 1).sum_all()
            + linalg::tril(a, 0).sum_all()
            + linalg::triu(a, 1).sum_all()
            + linalg::matrix_norm(a, MatrixNorm::Fro, false)
            + linalg::vector_norm(b, 2.0, &[], false))
        .sum_all()
    };
    let (a, b) = (spd(&[2, 4, 4], 80), rand(&[2, 4, 2], 81));
    let (a32, b32) = (a.cast(DType::F32), b.cast(DType::F32));
    let (v64, g64) = jit(value_and_grad(f)).eval((&a, &b)).unwrap();
    let (v32, g32) = jit(value_and_grad(f)).eval((&a32, &b32)).unwrap();
    assert_eq!((v32.dtype(), g32.dtype()), (DType::F32, DType::F32));
    v32.cast(DType::F64).assert_allclose(&v64, 1e-4, 1e-4);
    g32.cast(DType::F64).assert_allclose(&g64, 1e-3, 1e-3);
}

/// The result types on the graph's lines that run `op`.
fn types_of(g: &anvil::Graph, op: &str) -> Vec<String> {
    let text = format!("{g}");
    let lines =
        text.lines().filter(|l| l.contains(&format!("= {op} ")) || l.contains(&format!("= {op}[")));
    lines
        .flat_map(|l| {
            let results = l.split(" = ").next().unwrap_or("");
            results
                .split(", %")
                .filter_map(|r| r.split(": ").nth(1))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Asserts that `g` has `factors` runs of the factorisation `factor`, on
/// an unbatched `[n, n]` matrix, and that every solve in `solves` runs
/// once per right-hand side block with no batch axis: the vmapped batch
/// became columns (or rows), the shared matrix was never broadcast.
fn assert_factored_once(g: &anvil::Graph, factor: Option<&str>, solves: &[&str], n: usize) {
    if let Some(factor) = factor {
        let t = types_of(g, factor);
        assert!(!t.is_empty(), "no {factor} in\n{g}");
        assert_eq!(t[0], format!("f64[{n},{n}]"), "{factor} of a batch of matrices in\n{g}");
        let runs = format!("{g}").matches(&format!("= {factor} ")).count();
        assert_eq!(runs, 1, "{factor} runs {runs} times in\n{g}");
    }
    let mut seen = 0;
    for op in solves {
        for t in types_of(g, op) {
            seen += 1;
            assert_eq!(t.matches(',').count(), 1, "{op} with a batch axis ({t}) in\n{g}");
        }
    }
    assert!(seen > 0, "none of {solves:?} in\n{g}");
}

/// The rows of `xs` through `f` one at a time, stacked: the loop that
/// `vmap` stands for.
fn looped(f: impl Fn(&Tensor) -> Tensor, xs: &Tensor) -> Tensor {
    let rows: Vec<Tensor> = (0..xs.shape()[0]).map(|i| f(&xs.select_axis(0, i).unwrap())).collect();
    Tensor::stack(&rows, 0).unwrap()
}

/// `vmap` of a solve with the matrix shared across the batch (an argument
/// with `in_axes` `None`, or closed over from the enclosing function)
/// factors the matrix once and solves the batch as the columns of one
/// right-hand side; so do the other solves with a shared matrix, and the
/// Jacobians of `solve` (their basis is a `vmap`). Values against a loop.
#[test]
fn vmap_with_a_shared_matrix_factors_it_once() {
    use linalg::TriangularSolve;
    let n = 4;
    let (a, bs, cs) = (spd(&[n, n], 62), rand(&[7, n], 63), rand(&[5, n, 3], 64));
    let solve1 = |b: &Tensor| jit(|a: &Var, b: &Var| linalg::solve(a, b)).eval((&a, b)).unwrap();

    // An argument with in_axes None, vectors and column blocks.
    let f = vmap(|a: &Var, b: &Var| linalg::solve(a, b)).in_axes([None, Some(0)]);
    assert_factored_once(
        &anvil::lower(&f, (&a, &bs)).unwrap(),
        Some("lu_transposed"),
        &["lu_solve"],
        n,
    );
    close(&f.eval((&a, &bs)).unwrap(), &looped(solve1, &bs), 1e-13);
    let f = vmap(|a: &Var, c: &Var| linalg::solve(a, c)).in_axes([None, Some(0)]);
    assert_factored_once(
        &anvil::lower(&f, (&a, &cs)).unwrap(),
        Some("lu_transposed"),
        &["lu_solve"],
        n,
    );
    close(&f.eval((&a, &cs)).unwrap(), &looped(solve1, &cs), 1e-13);
    // The batch axis of b last: in_axes 1.
    let bt = bs.transpose().unwrap();
    let f = vmap(|a: &Var, b: &Var| linalg::solve(a, b)).in_axes([None, Some(1)]);
    assert_factored_once(
        &anvil::lower(&f, (&a, &bt)).unwrap(),
        Some("lu_transposed"),
        &["lu_solve"],
        n,
    );
    close(&f.eval((&a, &bt)).unwrap(), &looped(solve1, &bs), 1e-13);

    // Closed over: the matrix is a traced value of the enclosing function.
    let f = |a: &Var, bs: &Var| vmap(|b: &Var| linalg::solve(a, b)).invoke([bs]);
    assert_factored_once(
        &anvil::lower(&f, (&a, &bs)).unwrap(),
        Some("lu_transposed"),
        &["lu_solve"],
        n,
    );
    close(&jit(f).eval((&a, &bs)).unwrap(), &looped(solve1, &bs), 1e-13);

    // cho_solve and lu_solve on shared factors.
    let l = jit(linalg::cholesky).eval(&a).unwrap();
    let f = vmap(|l: &Var, b: &Var| linalg::cho_solve(l, b)).in_axes([None, Some(0)]);
    assert_factored_once(&anvil::lower(&f, (&l, &bs)).unwrap(), None, &["cho_solve"], n);
    close(&f.eval((&l, &bs)).unwrap(), &looped(solve1, &bs), 1e-12);
    let f = |a: &Var, cs: &Var| {
        let (lu, piv) = linalg::lu_factor(a);
        vmap(|c: &Var| linalg::lu_solve(&lu, &piv, c, false)).invoke([cs])
    };
    assert_factored_once(
        &anvil::lower(&f, (&a, &cs)).unwrap(),
        Some("lu_transposed"),
        &["lu_solve"],
        n,
    );
    close(&jit(f).eval((&a, &cs)).unwrap(), &looped(solve1, &cs), 1e-13);

    // triangular_solve, both sides: the batch becomes columns of `b` (left)
    // or its rows (right, `x·a = b`).
    for left_side in [true, false] {
        let opts = TriangularSolve { left_side, lower: true, ..Default::default() };
        let one = move |l: &Var, c: &Var| linalg::triangular_solve(l, c, opts);
        let cs = if left_side { cs.clone() } else { rand(&[5, 3, n], 65) };
        let f = vmap(one).in_axes([None, Some(0)]);
        let g = anvil::lower(&f, (&l, &cs)).unwrap();
        assert_factored_once(&g, None, &["triangular_solve"], n);
        let expected = looped(|c| jit(one).eval((&l, c)).unwrap(), &cs);
        close(&f.eval((&l, &cs)).unwrap(), &expected, 1e-13);
    }

    // jacfwd and jacrev of solve: one lu for the value and every basis
    // direction; the Jacobian in b is A⁻¹, and both modes agree.
    let b = bs.select_axis(0, 0).unwrap();
    let inv = jit(linalg::inv).eval(&a).unwrap();
    let mut jacobians = Vec::new();
    for forward in [true, false] {
        let f = |a: &Var, b: &Var| linalg::solve(a, b);
        let g = if forward {
            anvil::lower(&jacfwd(f).argnums(&[0, 1]), (&a, &b))
        } else {
            anvil::lower(&jacrev(f).argnums(&[0, 1]), (&a, &b))
        };
        assert_factored_once(&g.unwrap(), Some("lu_transposed"), &["lu_solve"], n);
        let j = if forward {
            jacfwd(f).argnums(&[0, 1]).eval((&a, &b))
        } else {
            jacrev(f).argnums(&[0, 1]).eval((&a, &b))
        };
        let j = j.unwrap();
        close(&j[1], &inv, 1e-13);
        jacobians.push(j);
    }
    close(&jacobians[0][0], &jacobians[1][0], 1e-13);
}

/// `lu` is compiled as `lu_transposed` and a transpose of its factor: the
/// factor a user sees is the row-major one, bit for bit the unrewritten
/// graph's, on both kernel paths; a solve from `lu_factor`'s factor reads
/// the stored factor with no transpose left in the graph.
#[test]
fn transposed_factor_is_internal() {
    let count = |g: &anvil::Graph, op: &str| format!("{g}").matches(&format!("= {op}")).count();
    for (n, seed) in [(3, 90), (40, 91)] {
        let a = rand(&[2, n, n], seed);
        let f = |a: &Var| linalg::lu_factor(a);
        let g = anvil::lower(&f, &a).unwrap();
        assert_eq!((count(&g, "lu_transposed"), count(&g, "lu "), count(&g, "permute")), (1, 0, 1));
        let (lu, piv) = jit(f).eval(&a).unwrap();
        let raw =
            anvil::run_graph(&anvil::trace(&f, &a).unwrap(), std::slice::from_ref(&a)).unwrap();
        let bits =
            |t: &Tensor| t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&lu), bits(&raw[0]), "n = {n}");
        assert_eq!(piv.to_vec::<i64>().unwrap(), raw[1].to_vec::<i64>().unwrap());

        let b = rand(&[2, n, 2], seed + 10);
        let solve = |a: &Var, b: &Var| {
            let (lu, piv) = linalg::lu_factor(a);
            linalg::lu_solve(&lu, &piv, b, false)
        };
        let g = anvil::lower(&solve, (&a, &b)).unwrap();
        assert_eq!((count(&g, "lu_transposed"), count(&g, "permute")), (1, 0), "{g}");
        assert!(format!("{g}").contains("factor_transposed=true"), "{g}");
        let x = jit(solve).eval((&a, &b)).unwrap();
        let want =
            anvil::run_graph(&anvil::trace(&solve, (&a, &b)).unwrap(), &[a.clone(), b.clone()])
                .unwrap();
        close(&x, &want[0], 1e-12);
    }
}

#[test]
fn user_input_errors_name_the_function_and_shapes() {
    let err = |r: anvil::Result<Tensor>| r.unwrap_err().to_string();
    let a = t3();
    let b = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    // lu_solve with fewer pivots than rows: an error, not a wrong solve.
    let solve = |a: &Var, p: &Var, b: &Var| {
        let (lu, _) = linalg::lu_factor(a);
        linalg::lu_solve(&lu, p, b, false)
    };
    let short = Tensor::from_vec(vec![0i64], &[1]).unwrap();
    let e = err(jit(solve).eval((&a, &short, &b)));
    assert!(e.contains("lu_solve") && e.contains("pivots") && e.contains("[1]"), "{e}");
    // The factor's own pivots solve it.
    let with_own = jit(|a: &Var, b: &Var| {
        let (lu, piv) = linalg::lu_factor(a);
        linalg::lu_solve(&lu, &piv, b, false)
    })
    .eval((&a, &b))
    .unwrap();
    close(&jit(|a: &Var, x: &Var| a.matmul(x)).eval((&a, &with_own)).unwrap(), &b, 1e-12);
    // Functions of matrices given a vector name themselves, not an inner op.
    let v = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    for (name, e) in [
        ("pinv", err(jit(|v: &Var| linalg::pinv(v)).eval(&v))),
        ("lstsq", err(jit(|v: &Var| linalg::lstsq(v, v).0).eval(&v))),
        ("trace", err(jit(|v: &Var| linalg::trace(v, 0)).eval(&v))),
        ("lu", err(jit(|v: &Var| linalg::lu(v).2).eval(&v))),
        (
            "matrix_norm",
            err(jit(|v: &Var| linalg::matrix_norm(v, MatrixNorm::Fro, false)).eval(&v)),
        ),
    ] {
        assert!(e.contains(name) && e.contains("matrices") && e.contains("[2]"), "{e}");
    }
    // lstsq with a right-hand side of the wrong number of rows.
    let e = err(jit(|a: &Var, v: &Var| linalg::lstsq(a, v).0).eval((&a, &v)));
    assert!(e.contains("lstsq") && e.contains("3 rows"), "{e}");
}

#[test]
fn matrix_norms_over_given_axes() {
    use linalg::NormOrd;
    // x[i, b, j]: two 2 x 3 matrices stacked on the middle axis.
    let x = rand(&[2, 2, 3], 7);
    let over = |ord: MatrixNorm, axes: Vec<i64>, keepdims: bool| {
        jit(move |x: &Var| linalg::norm(x, NormOrd::Matrix(ord), &axes, keepdims)).eval(&x)
    };
    let moved = jit(|x: &Var| x.permute(&[1, 0, 2])).eval(&x).unwrap();
    for ord in [MatrixNorm::Fro, MatrixNorm::One, MatrixNorm::Inf, MatrixNorm::Two, MatrixNorm::Nuc]
    {
        let want = jit(move |m: &Var| linalg::matrix_norm(m, ord, false)).eval(&moved).unwrap();
        close(&over(ord, vec![0, 2], false).unwrap(), &want, 1e-12);
        close(&over(ord, vec![-3, -1], false).unwrap(), &want, 1e-12);
        let kept = over(ord, vec![0, 2], true).unwrap();
        assert_eq!(kept.shape(), &[1, 2, 1]);
        // Rows and columns swapped: the norm of the transposes.
        let swapped = jit(|m: &Var| m.transpose()).eval(&moved).unwrap();
        let want_t = jit(move |m: &Var| linalg::matrix_norm(m, ord, false)).eval(&swapped).unwrap();
        close(&over(ord, vec![2, 0], false).unwrap(), &want_t, 1e-12);
    }
    // No axes: the last two, as matrix_norm.
    let last = jit(|x: &Var| linalg::matrix_norm(x, MatrixNorm::Fro, false)).eval(&x).unwrap();
    close(&over(MatrixNorm::Fro, vec![], false).unwrap(), &last, 1e-12);
    // One axis, the same axis twice, an axis out of range: errors.
    for axes in [vec![0], vec![1, 1], vec![0, 3], vec![0, 1, 2]] {
        let e = over(MatrixNorm::Fro, axes.clone(), false).unwrap_err().to_string();
        assert!(e.contains("norm"), "{axes:?}: {e}");
    }
}

/// A non-symmetric 3 x 3 matrix whose LU needs a row exchange.
fn t3() -> Tensor {
    Tensor::from_vec(vec![0.0, 2.0, 1.0, 1.0, 3.0, 0.5, 2.0, 0.0, 4.0], &[3, 3]).unwrap()
}
