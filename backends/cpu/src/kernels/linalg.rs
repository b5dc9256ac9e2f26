//! The kernel of `solve`: faer's partially pivoted LU per matrix of the
//! batch, then a solve in place on a copy of the right-hand side, with the
//! parallelism chosen by size (faer's own default would use every thread).

use super::{arity, unsupported};
use crate::{register_kernel, Parallelism};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::linalg::Solve;

fn solve_typed<T: faer::traits::RealField + Copy + Element>(
    a: &[T],
    b: &[T],
    batch: usize,
    n: usize,
    k: usize,
    ctx: &Parallelism,
) -> Vec<T> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::lu::partial_pivoting::{factor, solve};
    // LU costs about n³/3 multiply-adds: one thread below the GEMM
    // threshold, where a second one costs more than it brings.
    let par = ctx.gemm_par(n * n * n / 3);
    let mut out = Vec::with_capacity(batch * n * k);
    let mut perm = vec![0usize; n];
    let mut perm_inv = vec![0usize; n];
    let mut lu_mem =
        MemBuffer::new(factor::lu_in_place_scratch::<usize, T>(n, n, par, Default::default()));
    let mut solve_mem = MemBuffer::new(solve::solve_in_place_scratch::<usize, T>(n, k, par));
    for i in 0..batch {
        let am = &a[i * n * n..(i + 1) * n * n];
        let bm = &b[i * n * k..(i + 1) * n * k];
        let mut lu = faer::Mat::from_fn(n, n, |r, c| am[r * n + c]);
        let mut x = faer::Mat::from_fn(n, k, |r, c| bm[r * k + c]);
        let (_, p) = factor::lu_in_place(
            lu.as_mut(),
            &mut perm,
            &mut perm_inv,
            par,
            MemStack::new(&mut lu_mem),
            Default::default(),
        );
        solve::solve_in_place(
            lu.as_ref(),
            lu.as_ref(),
            p,
            x.as_mut(),
            par,
            MemStack::new(&mut solve_mem),
        );
        for r in 0..n {
            for c in 0..k {
                out.push(x[(r, c)]);
            }
        }
    }
    out
}

/// The kernel of [`Solve`].
pub fn solve(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    let r = a.rank();
    let n = a.shape()[r - 1];
    let batch: usize = a.shape()[..r - 2].iter().product();
    let k = if Solve::vector_rhs(&a.ty(), &b.ty()) { 1 } else { b.shape()[r - 1] };
    let storage = match (a.storage(), b.storage()) {
        (Storage::F64(a), Storage::F64(b)) => {
            f64::into_storage(solve_typed(a, b, batch, n, k, ctx))
        }
        (Storage::F32(a), Storage::F32(b)) => {
            f32::into_storage(solve_typed(a, b, batch, n, k, ctx))
        }
        _ => return Err(unsupported(op, 0, a.dtype())),
    };
    Tensor::from_storage(storage, out.shape())
}

register_kernel!(Solve, solve);
