//! Kernels of `take` and `scatter_add`. Both view the operand as
//! `[outer, axis, inner]` and move contiguous `inner` blocks; indices are
//! checked first, so an out-of-bounds index is an error before any work.

use super::{arity, unsupported};
use crate::{register_kernel, Ctx};
use anvil_core::{Element, Error, Op, Result, Scalar, Storage, Tensor, TensorType};
use anvil_ops::index::{ScatterAdd, Take};

/// Resolves negative indices against `size`, or reports the first bad one.
fn resolve(op: &str, idx: &[i64], size: usize, axis: usize, shape: &[usize]) -> Result<Vec<usize>> {
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
                    arg: "1 (indices)".into(),
                    shape: shape.to_vec(),
                })
            }
        })
        .collect()
}

fn outer_inner(shape: &[usize], axis: usize) -> (usize, usize) {
    (shape[..axis].iter().product(), shape[axis + 1..].iter().product())
}

fn take_typed<T: Copy>(x: &[T], idx: &[usize], outer: usize, dim: usize, inner: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx {
            let at = (o * dim + i) * inner;
            out.extend_from_slice(&x[at..at + inner]);
        }
    }
    out
}

/// The kernel of `take`.
pub fn take(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, _ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let t = op.try_downcast::<Take>()?;
    let (x, idx) = (inputs[0], inputs[1]);
    let dim = x.shape()[t.axis];
    let idx = resolve("take", idx.as_slice::<i64>()?, dim, t.axis, x.shape())?;
    let (outer, inner) = outer_inner(x.shape(), t.axis);
    let storage = anvil_core::with_storage!(x.storage(), v => Element::into_storage(take_typed(v, &idx, outer, dim, inner)));
    Tensor::from_storage(storage, &out.shape)
}

fn scatter_typed<T: Element + std::ops::Add<Output = T>>(
    u: &[T],
    idx: &[usize],
    outer: usize,
    size: usize,
    inner: usize,
) -> Vec<T> {
    let mut out = vec![T::from_scalar(Scalar::I64(0)); outer * size * inner];
    for o in 0..outer {
        for (j, &i) in idx.iter().enumerate() {
            let src = &u[(o * idx.len() + j) * inner..][..inner];
            let dst = &mut out[(o * size + i) * inner..][..inner];
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = *d + s;
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
    _ctx: &Ctx,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let s = op.try_downcast::<ScatterAdd>()?;
    let (u, idx) = (inputs[0], inputs[1]);
    let idx = resolve("scatter_add", idx.as_slice::<i64>()?, s.size, s.axis, &out.shape)?;
    let (outer, inner) = outer_inner(&out.shape, s.axis);
    let storage = match u.storage() {
        Storage::F64(v) => f64::into_storage(scatter_typed(v, &idx, outer, s.size, inner)),
        Storage::F32(v) => f32::into_storage(scatter_typed(v, &idx, outer, s.size, inner)),
        Storage::I64(v) => i64::into_storage(scatter_typed(v, &idx, outer, s.size, inner)),
        Storage::Bool(_) => return Err(unsupported(op, 0, u.dtype())),
    };
    Tensor::from_storage(storage, &out.shape)
}

register_kernel!(Take, take);
register_kernel!(ScatterAdd, scatter_add);
