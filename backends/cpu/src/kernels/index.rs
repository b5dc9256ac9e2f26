//! Kernels of `take` and `scatter_add`. Both view the operand as
//! `[outer, axis, inner]` and move contiguous `inner` blocks; indices are
//! checked first, so an out-of-bounds index is an error before any work.

use super::{arity, unsupported};
use crate::{register_kernel, Parallelism};
use anvil_core::{Element, Error, Op, Result, Scalar, Storage, Tensor, TensorType};
use anvil_ops::index::{ScatterAdd, Take};

/// Resolves negative indices against `size`, or reports the first bad one.
fn resolve(
    (op, arg): (&str, &str),
    idx: &[i64],
    size: usize,
    axis: usize,
    shape: &[usize],
) -> Result<Vec<usize>> {
    idx.iter()
        .map(|&i| {
            let j = if i < 0 { i + size as i64 } else { i };
            if (0..size as i64).contains(&j) {
                Ok(j as usize)
            } else {
                Err(Error::IndexOutOfBounds {
                    op: op.into(),
                    index: i,
                    axis,
                    size,
                    arg: arg.into(),
                    shape: shape.to_vec(),
                })
            }
        })
        .collect()
}

/// The operand viewed as `[batch, outer, dim, inner]` around `axis`.
fn split(shape: &[usize], batch_dims: usize, axis: usize) -> (usize, usize, usize, usize) {
    let p = |s: &[usize]| s.iter().product::<usize>();
    (p(&shape[..batch_dims]), p(&shape[batch_dims..axis]), shape[axis], p(&shape[axis + 1..]))
}

fn take_typed<T: Copy>(x: &[T], idx: &[usize], dims: (usize, usize, usize, usize)) -> Vec<T> {
    let (batch, outer, dim, inner) = dims;
    let n = idx.len() / batch.max(1);
    let mut out = Vec::with_capacity(batch * outer * n * inner);
    for b in 0..batch {
        for o in 0..outer {
            for &i in &idx[b * n..(b + 1) * n] {
                let at = ((b * outer + o) * dim + i) * inner;
                out.extend_from_slice(&x[at..at + inner]);
            }
        }
    }
    out
}

/// The kernel of `take`.
pub fn take(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let t = op.try_downcast::<Take>()?;
    let (x, idx) = (inputs[0], inputs[1]);
    let dims = split(x.shape(), t.batch_dims, t.axis);
    let idx = resolve(("take", "1 (indices)"), idx.as_slice::<i64>()?, dims.2, t.axis, x.shape())?;
    let storage = anvil_core::with_storage!(x.storage(), v => Element::into_storage(take_typed(v, &idx, dims)));
    Tensor::from_storage(storage, out.shape())
}

/// `scatter_add` of one dtype, `add` its addition (wrapping for `i64`, as
/// XLA's integer adds).
fn scatter_typed<T: Element>(
    u: &[T],
    idx: &[usize],
    dims: (usize, usize, usize, usize),
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
    let (batch, outer, size, inner) = dims;
    let n = idx.len() / batch.max(1);
    let mut out = vec![T::from_scalar(Scalar::I64(0)); batch * outer * size * inner];
    for b in 0..batch {
        for o in 0..outer {
            for (j, &i) in idx[b * n..(b + 1) * n].iter().enumerate() {
                let src = &u[((b * outer + o) * n + j) * inner..][..inner];
                let dst = &mut out[((b * outer + o) * size + i) * inner..][..inner];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = add(*d, s);
                }
            }
        }
    }
    out
}

/// The kernel of `scatter_add`.
pub fn scatter_add(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let s = op.try_downcast::<ScatterAdd>()?;
    let (u, idx) = (inputs[0], inputs[1]);
    // The transpose of a take reports the take the user wrote.
    let named = if s.of_take {
        ("take", "1 (indices), met in the transpose of take (scatter_add)")
    } else {
        ("scatter_add", "1 (indices)")
    };
    let idx = resolve(named, idx.as_slice::<i64>()?, s.size, s.axis, out.shape())?;
    let dims = split(out.shape(), s.batch_dims, s.axis);
    let storage = match u.storage() {
        Storage::F64(v) => f64::into_storage(scatter_typed(v, &idx, dims, |a, b| a + b)),
        Storage::F32(v) => f32::into_storage(scatter_typed(v, &idx, dims, |a, b| a + b)),
        Storage::I64(v) => i64::into_storage(scatter_typed(v, &idx, dims, i64::wrapping_add)),
        Storage::Bool(_) => return Err(unsupported(op, 0, u.dtype())),
    };
    Tensor::from_storage(storage, out.shape())
}

register_kernel!(Take, take);
register_kernel!(ScatterAdd, scatter_add);
