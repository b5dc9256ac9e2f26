//! Loops over strided views of row-major buffers.
//!
//! Every movement op (permute, broadcast, slice, flip) is a gather through
//! strides — a broadcast axis has stride 0, a flipped one a negative stride —
//! and binary ops read their operands through the same strides, so a
//! broadcast operand is never materialised. [`for_each_run`] is the one loop
//! all of them use: it walks an index range of the output in runs along the
//! innermost axis, giving the offset of each operand at the start of the run
//! and its stride within it, so the hot inner loop is a plain strided loop.

use crate::buffers::{self, Pooled};
use crate::Parallelism;
use rayon::prelude::*;

/// Elements per parallel task (a task is the unit of work given to one
/// thread; a fused kernel walks its task in cache-sized blocks).
const TASK: usize = 1 << 14;

/// Strides in elements, one per axis: inline up to rank 8, so that a
/// kernel's stride computations do not allocate.
#[derive(Clone, Debug)]
pub struct Strides {
    len: usize,
    inline: [isize; 8],
    heap: Vec<isize>,
}

impl Strides {
    fn zeros(rank: usize) -> Strides {
        let heap = if rank > 8 { vec![0; rank] } else { Vec::new() };
        Strides { len: rank, inline: [0; 8], heap }
    }
}

impl std::ops::Deref for Strides {
    type Target = [isize];
    fn deref(&self) -> &[isize] {
        if self.len > 8 {
            &self.heap
        } else {
            &self.inline[..self.len]
        }
    }
}

impl std::ops::DerefMut for Strides {
    fn deref_mut(&mut self) -> &mut [isize] {
        if self.len > 8 {
            &mut self.heap
        } else {
            &mut self.inline[..self.len]
        }
    }
}

impl<'a> IntoIterator for &'a Strides {
    type Item = &'a isize;
    type IntoIter = std::slice::Iter<'a, isize>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Row-major strides of `shape`, in elements, as `isize`.
pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut s = Strides::zeros(shape.len());
    let mut step = 1isize;
    for (d, &n) in s.iter_mut().zip(shape).rev() {
        *d = step;
        step *= n as isize;
    }
    s
}

/// The strides with which an operand of shape `from` is read as the
/// broadcast shape `to` (0 on broadcast axes).
pub fn broadcast_strides(from: &[usize], to: &[usize]) -> Strides {
    let own = contiguous_strides(from);
    let lead = to.len() - from.len();
    let mut s = Strides::zeros(to.len());
    for (i, d) in s.iter_mut().enumerate().skip(lead) {
        if from[i - lead] != 1 {
            *d = own[i - lead];
        }
    }
    s
}

/// Calls `body(out_start, offsets, inner_strides, len)` for every run of
/// consecutive output elements in `start..end` along the innermost axis of
/// `shape`. Operand `k` has element `j` of the run at
/// `offsets[k] + j * inner_strides[k]`.
pub fn for_each_run<const K: usize>(
    shape: &[usize],
    strides: [&[isize]; K],
    base: [isize; K],
    start: usize,
    end: usize,
    mut body: impl FnMut(usize, [isize; K], [isize; K], usize),
) {
    if start >= end {
        return;
    }
    let Some(&inner) = shape.last() else {
        body(start, base, [0; K], 1);
        return;
    };
    let rank = shape.len();
    let inner_strides: [isize; K] = std::array::from_fn(|k| strides[k][rank - 1]);
    // Multi-index of `start` (on the stack up to rank 8).
    let (mut small, mut large) = ([0usize; 8], Vec::new());
    let idx: &mut [usize] = if rank <= small.len() {
        &mut small[..rank]
    } else {
        large.resize(rank, 0);
        &mut large
    };
    let mut rem = start;
    for d in (0..rank).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    let mut offs: [isize; K] = std::array::from_fn(|k| {
        base[k] + (0..rank).map(|d| idx[d] as isize * strides[k][d]).sum::<isize>()
    });
    let mut pos = start;
    while pos < end {
        let len = (inner - idx[rank - 1]).min(end - pos);
        body(pos, offs, inner_strides, len);
        pos += len;
        if pos >= end {
            break;
        }
        // Advance to the start of the next row.
        for k in 0..K {
            offs[k] += (len as isize) * inner_strides[k];
        }
        idx[rank - 1] += len;
        let mut d = rank - 1;
        while idx[d] == shape[d] && d > 0 {
            for k in 0..K {
                offs[k] -= shape[d] as isize * strides[k][d];
            }
            idx[d] = 0;
            d -= 1;
            idx[d] += 1;
            for k in 0..K {
                offs[k] += strides[k][d];
            }
        }
    }
}

/// Fills `out` (a row-major buffer) by `fill(task, task_start)`, split into
/// parallel tasks of `TASK` (16,384) elements when `ctx` says the size is worth
/// it, else as one task.
pub fn fill_in_tasks<T: Send>(
    out: &mut [T],
    ctx: &Parallelism,
    fill: impl Fn(&mut [T], usize) + Sync,
) {
    if ctx.parallel(out.len()) {
        out.par_chunks_mut(TASK).enumerate().for_each(|(i, c)| fill(c, i * TASK));
    } else {
        fill(out, 0);
    }
}

/// Gathers `src` read through `strides` from `offset` into a new row-major
/// buffer of `shape`.
pub fn gather<T: Pooled>(
    src: &[T],
    offset: isize,
    strides: &[isize],
    shape: &[usize],
    ctx: &Parallelism,
) -> Vec<T> {
    let mut out = buffers::take(anvil_core::shape::numel(shape));
    fill_in_tasks(&mut out, ctx, |chunk, start| {
        for_each_run(
            shape,
            [strides],
            [offset],
            start,
            start + chunk.len(),
            |pos, [o], [s], len| {
                let dst = &mut chunk[pos - start..pos - start + len];
                if s == 1 {
                    dst.copy_from_slice(&src[o as usize..o as usize + len]);
                } else if s == 0 {
                    // A broadcast run: one element, spread (a fill, not a
                    // bounds-checked read per element).
                    dst.fill(src[o as usize]);
                } else {
                    for (j, d) in dst.iter_mut().enumerate() {
                        *d = src[(o + j as isize * s) as usize];
                    }
                }
            },
        );
    });
    out
}

/// `out[i] = f(a[i'], b[i''])` over the broadcast shape `shape`, reading each
/// operand through its (possibly zero) strides.
pub fn map2<A: Copy + Sync, B: Copy + Sync, T: Pooled>(
    a: (&[A], &[isize]),
    b: (&[B], &[isize]),
    shape: &[usize],
    ctx: &Parallelism,
    f: impl Fn(A, B) -> T + Sync,
) -> Vec<T> {
    let mut out = buffers::take(anvil_core::shape::numel(shape));
    fill_in_tasks(&mut out, ctx, |chunk, start| {
        for_each_run(
            shape,
            [a.1, b.1],
            [0, 0],
            start,
            start + chunk.len(),
            |pos, [oa, ob], [sa, sb], len| {
                let dst = &mut chunk[pos - start..pos - start + len];
                match (sa, sb) {
                    (1, 1) => {
                        let (xa, xb) = (&a.0[oa as usize..][..len], &b.0[ob as usize..][..len]);
                        for ((d, &x), &y) in dst.iter_mut().zip(xa).zip(xb) {
                            *d = f(x, y);
                        }
                    }
                    (1, 0) => {
                        let y = b.0[ob as usize];
                        for (d, &x) in dst.iter_mut().zip(&a.0[oa as usize..][..len]) {
                            *d = f(x, y);
                        }
                    }
                    (0, 1) => {
                        let x = a.0[oa as usize];
                        for (d, &y) in dst.iter_mut().zip(&b.0[ob as usize..][..len]) {
                            *d = f(x, y);
                        }
                    }
                    _ => {
                        for (j, d) in dst.iter_mut().enumerate() {
                            let j = j as isize;
                            *d = f(a.0[(oa + j * sa) as usize], b.0[(ob + j * sb) as usize]);
                        }
                    }
                }
            },
        );
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_a_range_in_order() {
        let shape = [3, 4];
        let s = contiguous_strides(&shape);
        let mut seen = vec![];
        for_each_run(&shape, [&s], [0], 2, 11, |pos, [o], [st], len| {
            for j in 0..len {
                seen.push((pos + j, o + j as isize * st));
            }
        });
        assert_eq!(seen, (2..11).map(|i| (i, i as isize)).collect::<Vec<_>>());
    }

    #[test]
    fn gather_spreads_a_broadcast_axis() {
        // [[10, 11, 12]] spread over 4 rows, and a column spread over 3.
        let src: Vec<i64> = vec![10, 11, 12];
        let rows = gather(&src, 0, &[0, 1], &[4, 3], &Parallelism::sequential());
        assert_eq!(rows, [10, 11, 12].repeat(4));
        let cols = gather(&src, 1, &[1, 0], &[2, 3], &Parallelism::sequential());
        assert_eq!(cols, vec![11, 11, 11, 12, 12, 12]);
    }

    #[test]
    fn gather_transposes_and_flips() {
        let src: Vec<i64> = (0..6).collect(); // [[0,1,2],[3,4,5]]
        let t = gather(&src, 0, &[1, 3], &[3, 2], &Parallelism::sequential());
        assert_eq!(t, vec![0, 3, 1, 4, 2, 5]);
        let f = gather(&src, 2, &[3, -1], &[2, 3], &Parallelism::sequential());
        assert_eq!(f, vec![2, 1, 0, 5, 4, 3]);
    }

    #[test]
    fn strides_past_the_inline_rank_are_the_same() {
        // Rank 10 (heap) against rank 3 (inline) of the same layout.
        let big = [1, 2, 1, 1, 3, 1, 1, 1, 4, 1];
        assert_eq!(&contiguous_strides(&big)[..], &[24, 12, 12, 12, 4, 4, 4, 4, 1, 1]);
        assert_eq!(&contiguous_strides(&[2, 3, 4])[..], &[12, 4, 1]);
        let b = broadcast_strides(&[3, 1, 1, 1, 4, 1], &big);
        assert_eq!(&b[..], &[0, 0, 0, 0, 4, 0, 0, 0, 1, 0]);
        let data: Vec<i64> = (0..24).collect();
        let t = gather(&data, 0, &contiguous_strides(&big), &big, &Parallelism::sequential());
        assert_eq!(t, data);
    }
}
