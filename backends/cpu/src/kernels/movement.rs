//! Kernels of the movement ops. `reshape` shares the buffer (tensors are
//! row-major and immutable, so no copy is ever needed); `permute`,
//! `broadcast_to` and `slice` are one strided gather each; `pad` and
//! `concatenate` copy blocks into a fresh buffer.

use super::arity;
use crate::buffers::Pooled;
use crate::strided::{broadcast_strides, contiguous_strides, for_each_run, gather};
use crate::{register_kernel, Parallelism};
use anvil_core::{with_storage, Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::movement::*;

/// `reshape`: the same buffer with a new shape.
pub fn reshape(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    Tensor::from_storage(inputs[0].storage().clone(), out.shape())
}

fn gather_tensor(
    x: &Tensor,
    offset: isize,
    strides: &[isize],
    shape: &[usize],
    ctx: &Parallelism,
) -> Result<Tensor> {
    let storage = with_storage!(x.storage(), v => Element::into_storage(gather(v, offset, strides, shape, ctx)));
    Tensor::from_storage(storage, shape)
}

/// Swaps the last two axes of `batch` row-major `r × c` matrices, in
/// 32 × 32 tiles so that both the reads and the writes stay in cache (a
/// plain strided gather reads one element per cache line).
fn transpose_last2<T: crate::buffers::Pooled>(
    x: &[T],
    batch: usize,
    r: usize,
    c: usize,
    ctx: &Parallelism,
) -> Vec<T> {
    const TILE: usize = 32;
    let mut out = crate::buffers::take(batch * r * c);
    let per_matrix = |(b, dst): (usize, &mut [T])| {
        let src = &x[b * r * c..(b + 1) * r * c];
        for i0 in (0..r).step_by(TILE) {
            for j0 in (0..c).step_by(TILE) {
                for j in j0..(j0 + TILE).min(c) {
                    for i in i0..(i0 + TILE).min(r) {
                        dst[j * r + i] = src[i * c + j];
                    }
                }
            }
        }
    };
    if r * c == 0 {
        return out;
    }
    if ctx.parallel(out.len()) && batch > 1 {
        use rayon::prelude::*;
        out.par_chunks_mut(r * c).enumerate().for_each(per_matrix);
    } else {
        out.chunks_mut(r * c).enumerate().for_each(per_matrix);
    }
    out
}

/// `permute`: a gather through permuted strides; a swap of the last two
/// axes (a transpose, possibly batched) is a tiled copy; a permute that
/// moves only size-1 axes shares the buffer, as a reshape does.
pub fn permute(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let p = op.try_downcast::<Permute>()?;
    if moves_only_unit_axes(&p.perm, inputs[0].shape()) {
        // The elements keep their row-major order: the buffer is shared.
        return Tensor::from_storage(inputs[0].storage().clone(), out.shape());
    }
    let rank = p.perm.len();
    let swaps_last_two = rank >= 2
        && p.perm[..rank - 2].iter().enumerate().all(|(i, &a)| i == a)
        && p.perm[rank - 2] == rank - 1
        && p.perm[rank - 1] == rank - 2;
    if swaps_last_two {
        let sh = inputs[0].shape();
        let (r, c) = (sh[rank - 2], sh[rank - 1]);
        let batch = sh[..rank - 2].iter().product();
        let storage = with_storage!(inputs[0].storage(), v => Element::into_storage(transpose_last2(v, batch, r, c, ctx)));
        return Tensor::from_storage(storage, out.shape());
    }
    let s = contiguous_strides(inputs[0].shape());
    let mut strides = s.clone();
    for (d, &a) in strides.iter_mut().zip(&p.perm) {
        *d = s[a];
    }
    gather_tensor(inputs[0], 0, &strides, out.shape(), ctx)
}

/// `broadcast_to`: a gather with zero strides on broadcast axes.
pub fn broadcast_to(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    gather_tensor(
        inputs[0],
        0,
        &broadcast_strides(inputs[0].shape(), out.shape()),
        out.shape(),
        ctx,
    )
}

/// `slice`: a gather from the first element with strides scaled by the steps.
pub fn slice(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let sl = op.try_downcast::<Slice>()?;
    let s = contiguous_strides(inputs[0].shape());
    let r = sl.resolve(inputs[0].shape())?;
    if out.numel() == 0 {
        return Tensor::zeros_of(out.shape(), out.dtype());
    }
    let offset: isize = r.iter().zip(&s).map(|(&(first, _, _), &st)| first as isize * st).sum();
    let mut strides = s;
    for (d, &(_, step, _)) in strides.iter_mut().zip(&r) {
        *d *= step as isize;
    }
    gather_tensor(inputs[0], offset, &strides, out.shape(), ctx)
}

/// Copies `src` (row-major, `shape`) into `dst` read as a larger buffer with
/// `dst_strides`, starting at `dst_offset`.
fn scatter_block<T: Copy>(
    src: &[T],
    shape: &[usize],
    dst: &mut [T],
    dst_offset: isize,
    dst_strides: &[isize],
) {
    let n = anvil_core::shape::numel(shape);
    let src_strides = contiguous_strides(shape);
    for_each_run(
        shape,
        [&src_strides, dst_strides],
        [0, dst_offset],
        0,
        n,
        |_, [os, od], [_, sd], len| {
            for j in 0..len {
                dst[(od + j as isize * sd) as usize] = src[os as usize + j];
            }
        },
    );
}

fn pad_typed<T: Pooled>(x: &[T], shape: &[usize], p: &Pad, out_shape: &[usize]) -> Vec<T> {
    let mut out =
        crate::buffers::filled(anvil_core::shape::numel(out_shape), T::from_scalar(p.value));
    let ds = contiguous_strides(out_shape);
    let offset: isize = p.widths.iter().zip(&ds).map(|(&(lo, _), &s)| lo as isize * s).sum();
    scatter_block(x, shape, &mut out, offset, &ds);
    out
}

/// `pad`: fill with the pad value, then copy the operand into the interior.
pub fn pad(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let p = op.try_downcast::<Pad>()?;
    let x = inputs[0];
    let storage = with_storage!(x.storage(), v => Element::into_storage(pad_typed(v, x.shape(), p, out.shape())));
    Tensor::from_storage(storage, out.shape())
}

fn concat_typed<T: Pooled>(parts: &[&Tensor], axis: usize, out_shape: &[usize]) -> Result<Vec<T>> {
    // The parts tile the output: every element is written.
    let mut out = crate::buffers::take(anvil_core::shape::numel(out_shape));
    let ds = contiguous_strides(out_shape);
    let mut at = 0isize;
    for p in parts {
        scatter_block(p.as_slice::<T>()?, p.shape(), &mut out, at * ds[axis], &ds);
        at += p.shape()[axis] as isize;
    }
    Ok(out)
}

/// `concatenate`: each operand copied into its block of the result.
pub fn concatenate(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<Concatenate>()?;
    let first = inputs
        .first()
        .ok_or_else(|| anvil_core::Error::invalid("concatenate", "operands", "none given"))?;
    let storage = match first.storage() {
        Storage::F64(_) => f64::into_storage(concat_typed(inputs, c.axis, out.shape())?),
        Storage::F32(_) => f32::into_storage(concat_typed(inputs, c.axis, out.shape())?),
        Storage::I64(_) => i64::into_storage(concat_typed(inputs, c.axis, out.shape())?),
        Storage::Bool(_) => bool::into_storage(concat_typed(inputs, c.axis, out.shape())?),
    };
    Tensor::from_storage(storage, out.shape())
}

register_kernel!(Reshape, reshape);
register_kernel!(Permute, permute);
register_kernel!(BroadcastTo, broadcast_to);
register_kernel!(Slice, slice);
register_kernel!(Pad, pad);
register_kernel!(Concatenate, concatenate);
