//! The kernel of `decompress`: a gather along the last axis by a fixed
//! `u32` table, into a pooled buffer, split across threads when large.

use super::{arity, unsupported};
use crate::buffers::Pooled;
use crate::{register_kernel, Parallelism};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::sparse::Decompress;

/// Rows of `len` entries of `x` gathered by `map` into rows of `map.len()`,
/// each row in parallel chunks when large.
fn gather_rows<T: Pooled + Copy + Send + Sync>(
    x: &[T],
    len: usize,
    map: &[u32],
    ctx: &Parallelism,
) -> Vec<T> {
    let nnz = map.len();
    let rows = x.len().checked_div(len).unwrap_or(0);
    let mut out = crate::buffers::take(rows * nnz);
    if nnz == 0 {
        return out;
    }
    let gather = |src: &[T], dst: &mut [T], map: &[u32]| {
        for (d, &m) in dst.iter_mut().zip(map) {
            *d = src[m as usize];
        }
    };
    for (r, dst) in out.chunks_mut(nnz).enumerate() {
        let src = &x[r * len..(r + 1) * len];
        if ctx.parallel(nnz) {
            use rayon::prelude::*;
            let step = nnz.div_ceil(ctx.thread_count() * 4).max(1);
            dst.par_chunks_mut(step)
                .zip(map.par_chunks(step))
                .for_each(|(dst, map)| gather(src, dst, map));
        } else {
            gather(src, dst, map);
        }
    }
    out
}

/// The kernel of `decompress`.
pub fn decompress(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let d = op.try_downcast::<Decompress>()?;
    let x = inputs[0];
    let map = d.map.as_slice();
    let storage = match x.storage() {
        Storage::F64(v) => Element::into_storage(gather_rows(v, d.len, map, ctx)),
        Storage::F32(v) => Element::into_storage(gather_rows(v, d.len, map, ctx)),
        _ => return Err(unsupported(op, 0, x.dtype())),
    };
    Tensor::from_storage(storage, out.shape())
}

register_kernel!(Decompress, decompress);
