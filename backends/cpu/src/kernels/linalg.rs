//! The kernel of `solve`: faer's partially pivoted LU per matrix of the
//! batch, then a solve in place on a copy of the right-hand side.

use super::{arity, unsupported};
use crate::{register_kernel, Ctx};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::linalg::Solve;
use faer::linalg::solvers::Solve as _;

fn solve_typed<T: faer::traits::RealField + Copy + Element>(
    a: &[T],
    b: &[T],
    batch: usize,
    n: usize,
    k: usize,
) -> Vec<T> {
    let mut out = Vec::with_capacity(batch * n * k);
    for i in 0..batch {
        let am = faer::MatRef::from_row_major_slice(&a[i * n * n..(i + 1) * n * n], n, n);
        let bm = faer::MatRef::from_row_major_slice(&b[i * n * k..(i + 1) * n * k], n, k);
        let x = am.partial_piv_lu().solve(bm);
        for r in 0..n {
            for c in 0..k {
                out.push(x[(r, c)]);
            }
        }
    }
    out
}

/// The kernel of [`Solve`].
pub fn solve(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, _ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    let r = a.rank();
    let n = a.shape()[r - 1];
    let batch: usize = a.shape()[..r - 2].iter().product();
    let k = if Solve::vector_rhs(&a.ty(), &b.ty()) { 1 } else { b.shape()[r - 1] };
    let storage = match (a.storage(), b.storage()) {
        (Storage::F64(a), Storage::F64(b)) => f64::into_storage(solve_typed(a, b, batch, n, k)),
        (Storage::F32(a), Storage::F32(b)) => f32::into_storage(solve_typed(a, b, batch, n, k)),
        _ => return Err(unsupported(op, 0, a.dtype())),
    };
    Tensor::from_storage(storage, &out.shape)
}

register_kernel!(Solve, solve);
