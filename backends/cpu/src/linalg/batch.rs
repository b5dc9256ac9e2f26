//! Running a per-matrix function over a batch: the split across threads and
//! the choice between batch parallelism and faer's own.

use super::{LinalgError, INNER_PARALLEL_DIM};
use faer::Par;
use rayon::prelude::*;

/// Below this many multiply-adds for the whole batch, splitting it across
/// threads costs more (task start-up, a few microseconds) than it brings.
const MIN_PARALLEL_FLOPS: f64 = 2e5;

/// A set of output buffers that can be cut between batch elements: one
/// [`Per`] or a tuple of them.
pub(crate) trait Parts: Send + Sized {
    /// The first `count` batch elements, and the rest.
    fn split(self, count: usize) -> (Self, Self);
}

/// One output buffer of a batch: its data and the number of elements per
/// matrix.
#[derive(Debug)]
pub(crate) struct Per<'a, X>(pub &'a mut [X], pub usize);

impl<X: Send> Parts for Per<'_, X> {
    fn split(self, count: usize) -> (Self, Self) {
        // The callers check every buffer's length against batch × stride
        // before running; the clamp serves callers that run over groups of
        // matrices, whose last group may be short.
        let (head, tail) = self.0.split_at_mut((count * self.1).min(self.0.len()));
        (Per(head, self.1), Per(tail, self.1))
    }
}

macro_rules! tuple_parts {
    ($($name:ident),+) => {
        impl<$($name: Parts),+> Parts for ($($name,)+) {
            #[allow(non_snake_case)]
            fn split(self, count: usize) -> (Self, Self) {
                let ($($name,)+) = self;
                $(let $name = $name.split(count);)+
                (($($name.0,)+), ($($name.1,)+))
            }
        }
    };
}
tuple_parts!(A);
tuple_parts!(A, B);
tuple_parts!(A, B, C);
tuple_parts!(A, B, C, D);

/// How a batch is run: in how many chunks, and with which parallelism inside
/// one matrix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// Contiguous chunks of the batch, one rayon task each (1: the calling
    /// thread).
    pub chunks: usize,
    /// faer's parallelism for one matrix.
    pub inner: Par,
}

/// The plan for `batch` matrices of largest dimension `dim`, each costing
/// about `flops` multiply-adds.
pub(crate) fn plan(par: Par, batch: usize, dim: usize, flops: f64) -> Plan {
    let threads = match par {
        Par::Seq => 1,
        Par::Rayon(t) => t.get(),
    };
    if threads > 1 && dim >= INNER_PARALLEL_DIM {
        return Plan { chunks: 1, inner: par };
    }
    let parallel = threads > 1 && batch >= 2 && batch as f64 * flops >= MIN_PARALLEL_FLOPS;
    Plan { chunks: if parallel { threads.min(batch) } else { 1 }, inner: Par::Seq }
}

/// Calls `f(i, parts_of_i, scratch)` for every batch element `i`, in order
/// within each chunk; each chunk makes its own scratch once with `scratch`.
///
/// Returns the error of the lowest failing batch element (each chunk stops
/// at its first error; later chunks may have run on).
pub(crate) fn run<P, S>(
    batch: usize,
    plan: Plan,
    parts: P,
    scratch: impl Fn() -> S + Sync,
    f: impl Fn(usize, P, &mut S) -> Result<(), LinalgError> + Sync,
) -> Result<(), LinalgError>
where
    P: Parts,
{
    let work = |start: usize, end: usize, mut parts: P| {
        let mut s = scratch();
        for i in start..end {
            let (one, rest) = parts.split(1);
            f(i, one, &mut s)?;
            parts = rest;
        }
        Ok(())
    };
    if plan.chunks <= 1 {
        return work(0, batch, parts);
    }
    let mut chunks = Vec::with_capacity(plan.chunks);
    let mut rest = parts;
    let mut start = 0;
    for c in 1..=plan.chunks {
        let end = batch * c / plan.chunks;
        let (head, tail) = rest.split(end - start);
        chunks.push((start, end, head));
        rest = tail;
        start = end;
    }
    let results: Vec<Result<(), LinalgError>> =
        chunks.into_par_iter().map(|(s, e, p)| work(s, e, p)).collect();
    results.into_iter().collect()
}
