//! Sparse Jacobians and Hessians: detection, coloring and compressed
//! evaluation against the dense transforms.

use anvil::prelude::*;
use anvil::sparse::{sparse_hessian, sparse_jacfwd, sparse_jacrev};

/// `(u[i-1] - 2u[i] + u[i+1]) n^2 + u[i]^3 - sin(u[i])`, zero boundaries (W4).
fn pde_residual(u: &Var) -> Var {
    let n = u.shape()[0];
    let up = u.pad(&[(1, 1)], 0.0);
    let left = up.slice_axis(0, None, Some(-2), 1);
    let right = up.slice_axis(0, Some(2), None, 1);
    (left - u * 2.0 + right) * (n as f64).powi(2) + u.powf(3.0) - u.sin()
}

fn random(n: usize, seed: u64) -> Tensor {
    anvil_testing::random_tensor(&[n], seed)
}

#[test]
fn the_pde_residual_jacobian_is_tridiagonal_with_three_colors() {
    let u = random(50, 1);
    let jac = sparse_jacfwd(pde_residual);
    let j = jac.eval(&u).unwrap();
    let plan = jac.plan(&u).unwrap();
    assert_eq!((j.nnz(), plan.num_colors()), (3 * 50 - 2, 3));
    let dense = jacfwd(pde_residual).eval(&u).unwrap();
    assert!(j.to_dense().unwrap().allclose(&dense, 1e-12, 1e-9));
    let r = sparse_jacrev(pde_residual).eval(&u).unwrap();
    assert!(r.to_dense().unwrap().allclose(&dense, 1e-12, 1e-9));
}

#[test]
fn a_sparse_hessian_matches_the_dense_one() {
    let f = |x: &Var| {
        (x.slice_axis(0, Some(1), None, 1) - x.slice_axis(0, None, Some(-1), 1).square())
            .square()
            .sum_all()
    };
    let x = random(20, 2);
    let h = sparse_hessian(f).eval(&x).unwrap();
    let dense = hessian(f).eval(&x).unwrap();
    assert!(h.to_dense().unwrap().allclose(&dense, 1e-12, 1e-12));
}

/// The 2-D Bratu residual on an `N × N` grid, zero Dirichlet boundaries:
/// `Δ_h u + λ e^u` with the 5-point Laplacian, `h = 1/(N+1)`.
fn bratu(u: &Var) -> Var {
    let n = u.shape()[0];
    let up = u.pad(&[(1, 1), (1, 1)], 0.0);
    let at = |di: i64, dj: i64| {
        up.slice_axis(0, Some(1 + di), Some(n as i64 + 1 + di), 1).slice_axis(
            1,
            Some(1 + dj),
            Some(n as i64 + 1 + dj),
            1,
        )
    };
    let lap = (at(-1, 0) + at(1, 0) + at(0, -1) + at(0, 1) - u * 4.0) * ((n + 1) as f64).powi(2);
    lap + u.exp() * 6.0
}

#[test]
fn detected_patterns_of_w4_w12_and_bratu_color_to_3_3_and_5() {
    // W4 and W12 differentiate the same residual (W4 densely): 3 colors,
    // at the benchmark's size too.
    for n in [7, 2000] {
        let plan = sparse_jacfwd(pde_residual).plan(random(n, 3)).unwrap();
        assert_eq!((plan.pattern().nnz(), plan.num_colors()), (3 * n - 2, 3), "n = {n}");
    }
    // Bratu: the 5-point stencil, 5 colors, and the values of the dense Jacobian.
    for n in [4, 9, 30] {
        let u = anvil_testing::random_tensor(&[n, n], 4);
        let jac = sparse_jacfwd(bratu);
        let plan = jac.plan(&u).unwrap();
        assert_eq!((plan.pattern().nnz(), plan.num_colors()), (5 * n * n - 4 * n, 5), "N = {n}");
        if n <= 9 {
            let dense = jacfwd(bratu).eval(&u).unwrap().reshape(&[(n * n) as i64, -1]).unwrap();
            assert!(jac.eval(&u).unwrap().to_dense().unwrap().allclose(&dense, 1e-12, 1e-9));
        }
    }
}

#[test]
fn a_known_pattern_replaces_detection() {
    let n = 40;
    let u = random(n, 5);
    let detected = sparse_jacfwd(pde_residual).eval(&u).unwrap();
    // A user's pattern with more entries than needed (pentadiagonal): the
    // extra entries come out zero, colored to 5.
    let penta = anvil::sparse::gallery::banded(n, n, 2, 2).unwrap();
    let jac = sparse_jacfwd(pde_residual).with_pattern(penta);
    let j = jac.eval(&u).unwrap();
    assert_eq!((j.nnz(), jac.plan(&u).unwrap().num_colors()), (5 * n - 6, 5));
    assert!(j.to_dense().unwrap().allclose(&detected.to_dense().unwrap(), 0.0, 0.0));
    assert_eq!(j.get(4, 2), Some(0.0));
    // Reverse mode with the exact pattern.
    let tri = anvil::sparse::gallery::tridiagonal(n).unwrap();
    let r = sparse_jacrev(pde_residual).with_pattern(tri).eval(&u).unwrap();
    assert!(r.to_dense().unwrap().allclose(&detected.to_dense().unwrap(), 1e-12, 1e-9));
    // A pattern of the wrong shape is an error, not a panic.
    let wrong = anvil::sparse::gallery::tridiagonal(n + 1).unwrap();
    let err = sparse_jacfwd(pde_residual).with_pattern(wrong).eval(&u).unwrap_err();
    assert!(err.to_string().contains("41"), "{err}");
}

#[test]
fn sparse_jacobians_compose_with_vmap_sharing_one_pattern() {
    use anvil::sparse::SparseBatch;
    let (b, n) = (3, 25);
    let us = anvil_testing::random_tensor(&[b, n], 6);
    let jac = sparse_jacfwd(pde_residual);
    let values = vmap(&jac).eval(&us).unwrap();
    assert_eq!(values.shape(), [b, 3 * n - 2]);
    let batch =
        SparseBatch::new(jac.pattern(us.select_axis(0, 0).unwrap()).unwrap(), values).unwrap();
    for k in 0..b {
        let u = us.select_axis(0, k).unwrap();
        let one = jac.eval(&u).unwrap();
        assert!(batch.get(k).unwrap().values().allclose(one.values(), 1e-14, 0.0), "batch {k}");
        assert_eq!(batch.as_faer::<f64>(k).unwrap().compute_nnz(), 3 * n - 2);
    }
    // Under jit too, and of a Hessian.
    let f = |x: &Var| {
        (x.slice_axis(0, Some(1), None, 1) * x.slice_axis(0, None, Some(-1), 1)).sin().sum_all()
    };
    let h = sparse_hessian(f);
    let xs = anvil_testing::random_tensor(&[2, 10], 7);
    let hv = jit(vmap(&h)).eval(&xs).unwrap();
    let dense = hessian(f).eval(xs.select_axis(0, 1).unwrap()).unwrap();
    let one = anvil::sparse::SparseMatrix::new(
        h.pattern(xs.select_axis(0, 1).unwrap()).unwrap(),
        hv.select_axis(0, 1).unwrap(),
    )
    .unwrap();
    assert!(one.to_dense().unwrap().allclose(&dense, 1e-12, 1e-12));
}

#[test]
fn argnums_pick_the_columns() {
    // F(u, v) = u * v[::-1] + sin(u): with respect to v, an anti-diagonal.
    let f = |u: &Var, v: &Var| u * v.slice_axis(0, None, None, -1) + u.sin();
    let (u, v) = (random(6, 8), random(6, 9));
    let jv = sparse_jacfwd(f).argnum::<1>().eval((&u, &v)).unwrap();
    assert_eq!(jv.nnz(), 6);
    assert_eq!(jv.get(0, 5), Some(u.to_f64_vec()[0]));
    let both = sparse_jacrev(f).argnums(&[0, 1]).eval((&u, &v)).unwrap();
    assert_eq!((both.nrows(), both.ncols(), both.nnz()), (6, 12, 12));
}

#[test]
fn bidirectional_coloring_takes_few_passes_on_an_arrowhead() {
    use anvil::sparse::sparse_jacobian;
    // y = x · x0 (a dense column), y0 += Σ sin(x) (a dense row).
    let f = |x: &Var| {
        let y = x * x.index_axis(0, 0);
        let head = y.slice_axis(0, None, Some(1), 1) + x.sin().sum(&[0]);
        concatenate(&[&head, &y.slice_axis(0, Some(1), None, 1)], 0)
    };
    let n = 60;
    let x = random(n, 10);
    let dense = jacfwd(f).eval(&x).unwrap();
    let both = sparse_jacobian(f);
    let plan = both.plan(&x).unwrap();
    assert!(plan.num_colors() <= 3, "{} passes", plan.num_colors());
    assert!(plan.num_row_colors() >= 1 && plan.num_row_colors() < plan.num_colors());
    assert_eq!(sparse_jacfwd(f).plan(&x).unwrap().num_colors(), n);
    assert_eq!(sparse_jacrev(f).plan(&x).unwrap().num_colors(), n);
    assert!(both.eval(&x).unwrap().to_dense().unwrap().allclose(&dense, 1e-13, 1e-13));
    // On a banded pattern it is no worse than forward mode; under vmap too.
    let plan = sparse_jacobian(pde_residual).plan(random(30, 11)).unwrap();
    assert_eq!(plan.num_colors(), 3);
    // Where forward passes alone take as few, there are no reverse ones:
    // an unbounded while_loop (no reverse mode) on a diagonal pattern.
    let iterate = |x: &Var| {
        let body = |c: &(Var, Var)| (c.0.sin(), &c.1 + 1.0);
        let stop = |c: &(Var, Var)| c.1.lt(&c.1.full_like(4.0));
        while_loop(stop, body, (x.clone(), x.sum_all().zeros_like())).map(|r| r.0)
    };
    let x5 = random(5, 14);
    let plan = sparse_jacobian(iterate).plan(&x5).unwrap();
    assert_eq!((plan.num_colors(), plan.num_row_colors()), (1, 0));
    let got = sparse_jacobian(iterate).eval(&x5).unwrap().to_dense().unwrap();
    assert!(got.allclose(&jacfwd(iterate).eval(&x5).unwrap(), 1e-14, 0.0));
    let xs = anvil_testing::random_tensor(&[2, n], 12);
    let values = vmap(&both).eval(&xs).unwrap();
    let second = both.eval(xs.select_axis(0, 1).unwrap()).unwrap();
    assert!(values.select_axis(0, 1).unwrap().allclose(second.values(), 1e-14, 0.0));
}

#[test]
fn misuse_is_an_error_not_a_panic() {
    let x = random(5, 13);
    // A Hessian of a function that is not scalar.
    let err = sparse_hessian(|x: &Var| x.sin()).eval(&x).unwrap_err();
    assert!(!err.to_string().is_empty());
    // A function too dense for the limit of entries names the op.
    let dense = |x: &Var| x * x.sum_all();
    let err = sparse_jacfwd(dense).max_entries(10).eval(&x).unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    // An integer output has no derivative: an empty matrix, no passes.
    let int_out = |x: &Var| x.cast(DType::I64);
    assert_eq!(sparse_jacrev(int_out).eval(&x).unwrap().nnz(), 0);
    // Arguments of another arity than the function's.
    assert!(sparse_jacfwd(pde_residual).eval((&x, &x)).is_err());
    // A symbolic length has no pattern to detect: the error says so (the
    // symbolic dimension's handle is not counted as a size).
    let n = anvil::dim("n", 2..=20).unwrap();
    let ty = anvil::TensorType::new(DType::F64, [n]);
    let err = match jit(sparse_jacfwd(pde_residual).values().clone()).symbolic(&ty) {
        Ok(s) => s.eval(&x).unwrap_err(),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(msg.contains("symbolic dimension") && msg.contains("f64[n]"), "{msg}");
    // Batching over the symbolic axis works: each example is concrete.
    let values = sparse_jacfwd(pde_residual).values().clone();
    let by = jit(vmap(values.clone())).symbolic(anvil::TensorType::new(DType::F64, [n, 5]));
    let xs = Tensor::stack(&[random(5, 1), random(5, 2), random(5, 3)], 0).unwrap();
    let got = by.unwrap().eval(&xs).unwrap();
    let want = vmap(values).eval(&xs).unwrap();
    got.assert_allclose(&want, 1e-13, 0.0);
}

#[test]
fn f32_functions_give_f32_values() {
    let u = random(30, 14).cast(DType::F32);
    let j = sparse_jacfwd(pde_residual).eval(&u).unwrap();
    assert_eq!(j.values().dtype(), DType::F32);
    let dense = jacfwd(pde_residual).eval(&u).unwrap();
    assert!(j.to_dense().unwrap().allclose(&dense, 1e-5, 1e-3));
    assert_eq!(j.as_faer::<f32>().unwrap().compute_nnz(), 88);
}

/// `scaled_seeds` (the gathered compressed product) is 0 wherever its
/// seeds are, even for an infinite value: batched as one element at a time
/// (its vmap rule once multiplied by the seed, and `0 · inf` gave NaN).
#[test]
fn scaled_seeds_under_vmap_keeps_infinite_values_in_their_entries() {
    use anvil_ops::sparse::{ScaledSeeds, Table, NEUTRAL};
    let op = ScaledSeeds {
        shape: vec![3, 4],
        axis: 0,
        tables: vec![Table::new(vec![0, 1, 2, 0]), Table::new(vec![1, NEUTRAL, 0, 2])],
    };
    let f = |v: &Var, s: &Var| Var::apply_op(Box::new(op.clone()), &[v, s]);
    let b = 3;
    let mut v = anvil_testing::random_tensor(&[b, 1, 4], 9).to_f64_vec();
    v[4 + 2] = f64::INFINITY; // batch 1, column 2
    let v = Tensor::from_vec(v, &[b, 1, 4]).unwrap();
    let s = Tensor::from_vec(vec![0.5, f64::NEG_INFINITY, 2.0], &[b]).unwrap();
    for axes in [[Some(0), Some(0)], [Some(0), None], [None, Some(0)]] {
        // An unbatched operand is its batch-1 element (the infinite one).
        let arg = |t: &Tensor, a: Option<i64>| match a {
            Some(_) => t.clone(),
            None => t.select_axis(0, 1).unwrap(),
        };
        let (va, sa) = (arg(&v, axes[0]), arg(&s, axes[1]));
        let got = vmap(f).in_axes(axes).eval((&va, &sa)).unwrap();
        assert_eq!(got.shape(), [b, 3, 4]);
        let got = got.to_f64_vec();
        for k in 0..b {
            let vk = v.select_axis(0, if axes[0].is_some() { k } else { 1 }).unwrap();
            let sk = s.select_axis(0, if axes[1].is_some() { k } else { 1 }).unwrap();
            let want = anvil::jit(f).eval((&vk, &sk)).unwrap().to_f64_vec();
            assert!(want.iter().all(|w| !w.is_nan()), "{want:?}");
            assert_eq!(&got[k * 12..(k + 1) * 12], &want[..], "{axes:?} batch {k}");
        }
    }
}

/// `SparseMatrix::diagonals` against the dense matrix: random patterns
/// with gaps (diagonals partly or not at all covered), rectangular shapes,
/// offsets unsorted, repeated and out of range, f64 and f32, one chunk of
/// columns and many (from 2^16 entries the pass runs in parallel).
#[test]
fn diagonals_match_the_dense_matrix_on_patterns_with_gaps() {
    use anvil::sparse::{SparseMatrix, SparsityPattern};
    use std::sync::Arc;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Under Miri, for the uninitialised buffers of `diagonals`, the small
    // shapes only: `MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks"
    // cargo +nightly miri test --test sparse diagonals` (tree borrows:
    // under stacked borrows Miri stops in crossbeam-epoch, in rayon's
    // deque; rayon's threads outlive the test).
    let shapes: &[(usize, usize, u64)] = if cfg!(miri) {
        &[(7, 5, 400), (12, 9, 150), (9, 12, 30)]
    } else {
        &[(7, 5, 400), (40, 60, 150), (600, 500, 250), (500, 600, 3)]
    };
    for &(m, n, per_mille) in shapes {
        let entries: Vec<(usize, usize)> = (0..m)
            .flat_map(|r| (0..n).map(move |c| (r, c)))
            .filter(|_| next() % 1000 < per_mille)
            .collect();
        let p = Arc::new(SparsityPattern::from_entries(m, n, entries).unwrap());
        let values: Vec<f64> = (0..p.nnz()).map(|i| (i as f64 * 0.37).sin() + 2.0).collect();
        for dtype in [DType::F64, DType::F32] {
            let v = Tensor::from_vec(values.clone(), &[p.nnz()]).unwrap().cast(dtype);
            let a = SparseMatrix::new(p.clone(), v).unwrap();
            let dense = a.to_dense().unwrap().to_f64_vec();
            let offsets = [1, -3, 0, 1, n as i64 + 5, -(m as i64) - 3, n as i64 - 1, 2 - m as i64];
            let got = a.diagonals(&offsets).unwrap();
            for (d, &k) in got.iter().zip(&offsets) {
                assert_eq!(d.dtype(), dtype);
                let want: Vec<f64> = (0..m as i64)
                    .filter(|&r| (0..n as i64).contains(&(r + k)))
                    .map(|r| dense[r as usize * n + (r + k) as usize])
                    .collect();
                let d = d.to_f64_vec();
                assert_eq!(d, want, "{m}x{n} ({per_mille}‰) {dtype:?} offset {k}");
            }
            // The extreme offsets are empty diagonals, not an overflow.
            let far = a.diagonals(&[i64::MIN, 0, i64::MAX]).unwrap();
            assert_eq!(far.iter().map(|d| d.numel()).collect::<Vec<_>>(), [0, m.min(n), 0]);
        }
    }
}

/// A sparse derivative's matrix holds its call's compressed products:
/// `get`, `diagonals` (by maps made once per signature and set of
/// offsets) and the values gathered on request agree bit for bit with
/// the values that `SparseValues` computes as a function (the gather op
/// in the graph), in every mode, on a second call at other arguments
/// (the cached maps), and with an empty pattern.
#[test]
fn a_matrix_read_from_compressed_products_matches_the_gathered_values() {
    use anvil::sparse::{sparse_jacobian, SparseMatrix};
    // Rows 0..n-1 of a tridiagonal with a dense last row and column (an
    // arrowhead: bidirectional mode splits it into JVPs and VJPs).
    let arrow = |x: &Var| {
        let n = x.shape()[0] as i64;
        let head = x.slice_axis(0, None, Some(n - 1), 1);
        let last = x.slice_axis(0, Some(n - 1), None, 1);
        concatenate(
            &[
                &(pde_residual(&head) + last.sin() * head.cos()),
                &(x.square().sum_all().reshape(&[1])),
            ],
            0,
        )
    };
    let loss = |x: &Var| (pde_residual(x).square() * 0.5).sum_all();
    let (fwd, rev) = (sparse_jacfwd(pde_residual), sparse_jacrev(pde_residual));
    let (hess, both) = (sparse_hessian(loss), sparse_jacobian(arrow));
    // The second seed's calls reuse the first's compiled calls and maps.
    for seed in [3, 4] {
        let x = random(40, seed);
        let cases: Vec<(&str, SparseMatrix, Tensor)> = vec![
            ("jacfwd", fwd.eval(&x).unwrap(), fwd.values().eval(&x).unwrap()),
            ("jacrev", rev.eval(&x).unwrap(), rev.values().eval(&x).unwrap()),
            ("hessian", hess.eval(&x).unwrap(), hess.values().eval(&x).unwrap()),
            ("bidirectional", both.eval(&x).unwrap(), both.values().eval(&x).unwrap()),
        ];
        for (what, a, want) in cases {
            let want = want.to_f64_vec();
            let (m, n) = (a.nrows(), a.ncols());
            // Entries, read from the products.
            for (p, (i, j)) in a.pattern().entries().enumerate() {
                assert_eq!(
                    a.get(i, j).map(f64::to_bits),
                    Some(want[p].to_bits()),
                    "{what} ({i}, {j})"
                );
            }
            // Diagonals from the products, then from the gathered values.
            let offsets = [0, -1, 1, 3, -(m as i64), n as i64 - 1, 0];
            let from_products = a.diagonals(&offsets).unwrap();
            let again = a.diagonals(&offsets).unwrap();
            let gathered = a.clone();
            assert_eq!(gathered.values().to_f64_vec(), want, "{what} values");
            let from_values = gathered.diagonals(&offsets).unwrap();
            let plain = SparseMatrix::new(a.pattern().clone(), a.values().clone()).unwrap();
            let dense = plain.to_dense().unwrap().to_f64_vec();
            for (k, ((d, e), f)) in
                offsets.iter().zip(from_products.iter().zip(&again).zip(&from_values))
            {
                let want: Vec<f64> = (0..m as i64)
                    .filter(|&r| (0..n as i64).contains(&(r + k)))
                    .map(|r| dense[r as usize * n + (r + k) as usize])
                    .collect();
                assert_eq!(d.to_f64_vec(), want, "{what} diagonal {k}");
                assert_eq!(e.to_f64_vec(), want, "{what} diagonal {k}, again");
                assert_eq!(f.to_f64_vec(), want, "{what} diagonal {k}, from the values");
            }
        }
    }
    // No entries at all: a function that does not depend on its argument.
    let x = random(5, 1);
    let a = sparse_jacfwd(|x: &Var| x.zeros_like()).eval(&x).unwrap();
    assert_eq!((a.nnz(), a.values().numel()), (0, 0));
    assert_eq!(a.diagonal(0).unwrap().to_f64_vec(), vec![0.0; 5]);
    // Products that do not fit the plan are an error.
    let plan = sparse_jacfwd(pde_residual).plan(&x).unwrap();
    assert!(SparseMatrix::from_products(
        plan.clone(),
        Tensor::zeros(&[plan.products_len() + 1]).unwrap()
    )
    .is_err());
    let ok =
        SparseMatrix::from_products(plan.clone(), Tensor::zeros(&[plan.products_len()]).unwrap())
            .unwrap();
    assert_eq!(ok.values().numel(), plan.pattern().nnz());
}
