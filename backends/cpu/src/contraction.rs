//! Products over a loop's steps, summed while the loop runs.
//!
//! The reverse pass of a loop whose body multiplies by a parameter matrix
//! (an RNN cell, an ODE right-hand side `tanh(A x + b)`) gives that
//! parameter's cotangent as a product over the steps: `dA = Σ_t g_t z_tᵀ`,
//! which the transforms write as `matmul_t[ta](G, Z)` of the stacked
//! per-step cotangents `G` (`[length, m]`, a result of the reverse scan)
//! and the stacked inputs `Z` (`[length, n]`, saved by the forward scan).
//! Run literally, the loop first stacks `G`, and the product runs after
//! the last step, on one core, while the loop's own dependent chain of
//! steps had left the other core idle.
//!
//! The plan rewrite of [`Scan`] (with the placement of
//! [`crate::placement`]) turns a stacked result read only by such a
//! product into a [`Contraction`] of a [`PlacedScan`]: the loop sums the
//! product chunk by chunk, [`chunk_rows`] steps at a time, while it runs.
//! With more than one thread (and the loop not already inside the pool)
//! a rayon worker sums each chunk as soon as its steps are done, so the
//! products overlap the remaining steps; on one thread the loop sums each
//! chunk itself. The chunks, and the order they are summed in (the order
//! the loop finishes them), depend only on the loop's length and
//! direction, so both ways give the same bits. Only the chunk being
//! written, a few finished ones waiting for a worker and the ones being
//! summed are held, never the stacked `G`.
//!
//! Values change by rounding only: the product is summed in another order
//! than one GEMM over all the steps would.

use crate::placement::{only_reader, readers, Contraction, PlacedScan};
use anvil_core::{DType, Error, Graph, NodeId, Rebuilt, Result, Tensor, TensorType, ValueId};
use anvil_ops::matmul::MatmulT;
use anvil_ops::scan::Scan;
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The smallest product (`length · m · n` multiply-adds) the rewrite sums
/// as the loop runs. Smaller products cost less than the chunked calls and
/// the hand-off (W9 at `d = 8`: 12,800 multiply-adds).
pub const MIN_CONTRACTION: usize = 1 << 18;

/// The steps of one chunk for a loop of `length` steps: about an eighth of
/// the loop, at least 16 (a product call per chunk) and at most 64 (the
/// last chunk is summed after the last step).
///
/// ```
/// use anvil_cpu::contraction::chunk_rows;
/// assert_eq!(chunk_rows(200), 25);
/// assert_eq!(chunk_rows(10), 16);
/// assert_eq!(chunk_rows(10_000), 64);
/// ```
pub fn chunk_rows(length: usize) -> usize {
    length.div_ceil(8).clamp(16, 64)
}

// ------------------------------------------------------------- rewrite

/// What a scan's stacked result is contracted with, as matched.
struct Found {
    /// The product's node.
    matmul: NodeId,
    /// `Z`.
    with: ValueId,
    y_first: bool,
    ty: TensorType,
}

/// The product of stacked result `y` of scan `scan_id`, if `y` is read
/// only by a `matmul_t[ta=true, tb=false]` with an `f64` array of as many
/// rows computed before the loop, and the product is large enough.
fn found(g: &Graph, rd: &[Vec<(NodeId, usize)>], scan_id: NodeId, y: ValueId) -> Option<Found> {
    let ty = g.ty(y);
    let &[length, m] = ty.shape() else { return None };
    if ty.dtype() != DType::F64 {
        return None;
    }
    let (r, pos) = only_reader(g, rd, y)?;
    let node = g.node(r);
    let t = node.op.downcast_ref::<MatmulT>()?;
    if !t.ta || t.tb {
        return None;
    }
    let with = node.inputs[1 - pos];
    let zt = g.ty(with);
    let &[zl, n] = zt.shape() else { return None };
    if zt.is_symbolic() || g.ty(node.out()).is_symbolic() {
        return None;
    }
    let before = g.producer(with).0 < scan_id;
    let big = length.saturating_mul(m).saturating_mul(n) >= MIN_CONTRACTION;
    (zl == length && zt.dtype() == DType::F64 && before && big).then(|| Found {
        matmul: r,
        with,
        y_first: pos == 0,
        ty: g.ty(node.out()).clone(),
    })
}

/// Rewrites every scan of `scans` with a stacked result that is only
/// contracted with an array computed before it (see the module docs) into
/// a [`PlacedScan`] that sums the product as it runs; `None` when there is
/// none. Scans with symbolic shapes are left as they are.
///
/// # Errors
/// An invalid graph.
pub(crate) fn contract_scan_results(g: &Graph, scans: &[NodeId]) -> Result<Option<Graph>> {
    let rd = readers(g);
    let mut plans: HashMap<NodeId, Vec<Option<Found>>> = HashMap::new();
    // Each product's node, and the stacked result that now stands for it.
    let mut products: HashMap<NodeId, ValueId> = HashMap::new();
    for &id in scans {
        let n = g.node(id);
        let scan = n.op.try_downcast::<Scan>()?;
        if n.results().any(|v| g.ty(v).is_symbolic()) {
            continue;
        }
        let ys: Vec<ValueId> = n.results().skip(scan.carries).collect();
        let found: Vec<Option<Found>> = ys.iter().map(|&y| found(g, &rd, id, y)).collect();
        if found.iter().all(Option::is_none) {
            continue;
        }
        for (f, &y) in found.iter().zip(&ys) {
            if let Some(f) = f {
                products.insert(f.matmul, y);
            }
        }
        plans.insert(id, found);
    }
    if plans.is_empty() {
        return Ok(None);
    }
    let rebuilt = g.rebuild(|out, map, id, n, ins| {
        if let Some(&y) = products.get(&id) {
            // The scan's result in `y`'s place is the product.
            return Ok(Rebuilt::Replace(vec![map.get(y)?]));
        }
        let Some(found) = plans.get(&id) else { return Ok(Rebuilt::Copy) };
        let scan = n.op.try_downcast::<Scan>()?.clone();
        let nk = scan.carries;
        let mut inputs = ins.to_vec();
        if inputs.len() != n.inputs.len() {
            return Err(Error::invalid("placed_scan", "operands", "an operand was dropped"));
        }
        let mut types: Vec<TensorType> = n.results().map(|v| g.ty(v).clone()).collect();
        let mut contractions = Vec::with_capacity(found.len());
        for (j, f) in found.iter().enumerate() {
            contractions.push(match f {
                Some(f) => {
                    types[nk + j] = f.ty.clone();
                    inputs.push(map.get(f.with)?);
                    Some(Contraction {
                        with: inputs.len() - 1,
                        y_first: f.y_first,
                        ty: f.ty.clone(),
                    })
                }
                None => None,
            });
        }
        let op = PlacedScan {
            scan,
            places: vec![None; found.len()],
            contractions,
            operands: inputs.len(),
        };
        let new = out.push_node(Box::new(op), inputs, types)?;
        Ok(Rebuilt::Replace(out.node(new).results().collect()))
    })?;
    Ok(Some(rebuilt))
}

// ------------------------------------------------------------- running

/// Rows `rows` (in the loop's order of slices) of every contracted result.
pub(crate) struct Chunk {
    pub rows: Range<usize>,
    /// Per contraction, the rows written so far (`rows.len() · m`
    /// elements used), in the order of the scan's contracted results.
    pub ys: Vec<Vec<f64>>,
}

/// The contracted results of a running loop: where each step's row goes,
/// and when a chunk is complete.
pub(crate) struct Collector {
    /// Per stacked result, the contraction it feeds.
    of: Vec<Option<usize>>,
    /// Per contraction, the elements of one step's row.
    width: Vec<usize>,
    rows: usize,
    length: usize,
    reverse: bool,
    /// The chunk being written.
    open: Vec<Vec<f64>>,
    /// Chunks summed and handed back.
    spare: Vec<Vec<Vec<f64>>>,
}

impl Collector {
    /// The collector of `contractions` (per stacked result) whose rows have
    /// `width` elements (per stacked result), or `None` when there is no
    /// contraction. `spares` chunks are allocated up front (from the
    /// calling thread's pool).
    pub(crate) fn new(
        contractions: &[Option<Contraction>],
        width: &[usize],
        length: usize,
        reverse: bool,
        spares: usize,
    ) -> Option<Collector> {
        let mut of = Vec::with_capacity(width.len());
        let mut widths = Vec::new();
        for (j, &w) in width.iter().enumerate() {
            if let Some(Some(_)) = contractions.get(j) {
                of.push(Some(widths.len()));
                widths.push(w);
            } else {
                of.push(None);
            }
        }
        if widths.is_empty() {
            return None;
        }
        let rows = chunk_rows(length);
        let set = |w: &[usize]| w.iter().map(|&w| crate::buffers::take(rows * w)).collect();
        Some(Collector {
            open: set(&widths),
            spare: (0..spares).map(|_| set(&widths)).collect(),
            of,
            width: widths,
            rows,
            length,
            reverse,
        })
    }

    /// Whether stacked result `j` is contracted.
    pub(crate) fn takes(&self, j: usize) -> bool {
        matches!(self.of.get(j), Some(Some(_)))
    }

    /// Writes row `t` of stacked result `j` (a contracted one).
    ///
    /// # Errors
    /// A row of another length or dtype (a bug in the plan).
    pub(crate) fn write(&mut self, j: usize, t: usize, src: anvil_core::Block<'_>) -> Result<()> {
        let bad = || Error::invalid("placed_scan", "contraction", "a row of another size or dtype");
        let (Some(Some(k)), anvil_core::Block::F64(src)) = (self.of.get(j), src) else {
            return Err(bad());
        };
        let w = self.width[*k];
        let at = (t % self.rows) * w;
        if src.len() != w {
            return Err(bad());
        }
        self.open[*k].get_mut(at..at + w).ok_or_else(bad)?.copy_from_slice(src);
        Ok(())
    }

    /// The chunk that row `t` completes (in the loop's order), if it does.
    pub(crate) fn done(&mut self, t: usize) -> Option<Chunk> {
        let start = t - t % self.rows;
        let end = (start + self.rows).min(self.length);
        let last = if self.reverse { t == start } else { t + 1 == end };
        if !last {
            return None;
        }
        let next = self.spare.pop().unwrap_or_else(|| {
            // Every spare chunk is still being summed: a new one (freed
            // with the others at the end).
            self.width.iter().map(|&w| vec![0.0; self.rows * w]).collect()
        });
        Some(Chunk { rows: start..end, ys: std::mem::replace(&mut self.open, next) })
    }

    /// A summed chunk's buffers, for the next chunk.
    pub(crate) fn recycle(&mut self, ys: Vec<Vec<f64>>) {
        self.spare.push(ys);
    }

    /// Gives every buffer back to the calling thread's pool.
    pub(crate) fn give_back(self) {
        for set in self.spare.into_iter().chain([self.open]) {
            set.into_iter().for_each(crate::buffers::give_back);
        }
    }
}

/// One product being summed: `Yᵀ Z` or `Zᵀ Y`, `Y` `[length, m]`.
struct Sum {
    z: Tensor,
    /// Elements of a row of `Y`, of `Z`.
    m: usize,
    n: usize,
    y_first: bool,
    out: Vec<f64>,
}

/// The products of a loop's contracted results, summed chunk by chunk.
pub(crate) struct Sums {
    sums: Vec<Sum>,
    started: bool,
    /// A chunk did not fit its product, or a product panicked (a bug):
    /// reported when the products are taken.
    misfit: bool,
}

impl Sums {
    /// The sums of `contractions` (per stacked result, rows of `width`
    /// elements), with `Z` read from `inputs`.
    ///
    /// # Errors
    /// A missing operand, or one of another dtype or shape.
    pub(crate) fn new(
        contractions: &[Option<Contraction>],
        width: &[usize],
        length: usize,
        inputs: &[&Tensor],
    ) -> Result<Sums> {
        let mut sums = Vec::new();
        for (c, &m) in contractions.iter().zip(width) {
            let Some(c) = c else { continue };
            let z = inputs.get(c.with).ok_or_else(|| {
                Error::invalid("placed_scan", "operands", "an array to contract with is missing")
            })?;
            let &[zl, n] = z.shape() else {
                return Err(Error::shape("placed_scan", &[z.shape()], "a matrix to contract with"));
            };
            if zl != length {
                return Err(Error::shape(
                    "placed_scan",
                    &[z.shape()],
                    "as many rows as the loop has steps",
                ));
            }
            z.as_slice::<f64>()?;
            let out = crate::buffers::take(m * n);
            sums.push(Sum { z: (*z).clone(), m, n, y_first: c.y_first, out });
        }
        Ok(Sums { sums, started: false, misfit: false })
    }

    /// Adds a chunk's products: the first chunk replaces, the others add.
    pub(crate) fn add(&mut self, chunk: &Chunk) {
        let (r0, rows) = (chunk.rows.start, chunk.rows.len());
        let acc = if self.started { Accum::Add } else { Accum::Replace };
        for (s, y) in self.sums.iter_mut().zip(&chunk.ys) {
            let z = s.z.as_slice::<f64>().ok().and_then(|z| z.get(r0 * s.n..(r0 + rows) * s.n));
            let (Some(z), Some(y)) = (z, y.get(..rows * s.m)) else {
                self.misfit = true;
                continue;
            };
            let yv = MatRef::from_row_major_slice(y, rows, s.m);
            let zv = MatRef::from_row_major_slice(z, rows, s.n);
            if s.y_first {
                let c = MatMut::from_row_major_slice_mut(&mut s.out, s.m, s.n);
                matmul(c, acc, yv.transpose(), zv, 1.0, Par::Seq);
            } else {
                let c = MatMut::from_row_major_slice_mut(&mut s.out, s.n, s.m);
                matmul(c, acc, zv.transpose(), yv, 1.0, Par::Seq);
            }
        }
        self.started = true;
    }

    /// The products, in the order of the scan's contracted results (zero
    /// for a loop of no steps).
    ///
    /// # Errors
    /// A chunk that did not fit its product (a bug in the plan).
    pub(crate) fn into_products(self) -> Result<Vec<Vec<f64>>> {
        if self.misfit {
            return Err(Error::invalid("placed_scan", "contraction", "a chunk of another size"));
        }
        let started = self.started;
        Ok(self
            .sums
            .into_iter()
            .map(|mut s| {
                if !started {
                    s.out.fill(0.0);
                }
                s.out
            })
            .collect())
    }
}

/// Sums summed by rayon workers while the loop runs: the loop queues each
/// finished chunk, and a task (spawned when none is draining) holds the
/// sums while it drains the queue in order, so the chunks are summed in
/// the order the loop finished them whichever task runs. No task ever
/// waits for the loop. When more than [`MAX_QUEUED`] chunks wait (the
/// workers are busy elsewhere), the loop sums them itself, in the same
/// order; [`finish`] sums what is left.
///
/// [`finish`]: Background::finish
pub(crate) struct Background(Arc<Shared>);

/// The most finished chunks that wait for a worker before the loop sums
/// them itself (so that at most this many chunks, plus the one being
/// written and the ones being summed, are held).
const MAX_QUEUED: usize = 3;

struct Shared {
    /// Taken by [`Background::finish`] (or dropped with the
    /// [`Background`]); a task that comes later finds none.
    sums: Mutex<Option<Sums>>,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Chunk>,
    /// Buffers of summed chunks, for the loop's next chunks.
    back: Vec<Vec<Vec<f64>>>,
    /// Whether a task is spawned and has not yet found the queue empty.
    draining: bool,
}

/// A lock that a panic elsewhere (none is expected) does not make unusable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Background {
    pub(crate) fn new(sums: Sums) -> Background {
        Background(Arc::new(Shared { sums: Mutex::new(Some(sums)), queue: Mutex::default() }))
    }

    /// Queues a finished chunk (spawning a task to sum it if none is
    /// draining, or summing the queue here if it is too long); returns
    /// the buffers of chunks summed since the last call.
    pub(crate) fn send(&self, chunk: Chunk) -> Vec<Vec<Vec<f64>>> {
        let (spawn, behind) = {
            let mut q = lock(&self.0.queue);
            q.chunks.push_back(chunk);
            let spawn = !std::mem::replace(&mut q.draining, true);
            (spawn, q.chunks.len() > MAX_QUEUED)
        };
        if spawn {
            let shared = Arc::clone(&self.0);
            rayon::spawn(move || drain(&shared, true));
        }
        if behind {
            drain(&self.0, false);
        }
        std::mem::take(&mut lock(&self.0.queue).back)
    }

    /// The sums, every queued chunk added (waiting for a task that is
    /// adding one), and the buffers of every chunk summed.
    pub(crate) fn finish(self) -> (Option<Sums>, Vec<Vec<Vec<f64>>>) {
        drain(&self.0, false);
        let sums = lock(&self.0.sums).take();
        let back = std::mem::take(&mut lock(&self.0.queue).back);
        (sums, back)
    }
}

impl Drop for Background {
    /// A loop that stopped early (an error): the chunks still queued and
    /// the sums are dropped, so a task that comes later does nothing.
    fn drop(&mut self) {
        lock(&self.0.sums).take();
        lock(&self.0.queue).chunks.clear();
    }
}

/// Adds every queued chunk, in order, holding the sums throughout; a
/// `task` clears the queue's `draining` when it finds the queue empty.
fn drain(shared: &Shared, task: bool) {
    let mut sums = lock(&shared.sums);
    loop {
        let chunk = {
            let mut q = lock(&shared.queue);
            let chunk = q.chunks.pop_front();
            if chunk.is_none() && task {
                q.draining = false;
            }
            chunk
        };
        let Some(chunk) = chunk else { return };
        if let Some(s) = sums.as_mut() {
            // A panic in a product (none is expected: `add` checks every
            // slice) must not unwind out of a rayon task, which aborts.
            let added = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.add(&chunk)));
            if added.is_err() {
                s.misfit = true;
            }
        }
        lock(&shared.queue).back.push(chunk.ys);
    }
}
