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
    anvil::testing::random_tensor(&[n], seed)
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
