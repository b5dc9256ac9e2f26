//! `map`: a loop over a batch as one op, and the fallback of `vmap` for ops
//! without a batching rule.
//!
//! [`map(f)`](map) applies `f` to every slice of its mapped arguments and
//! stacks the results, like `jax.lax.map`: the result equals `vmap(f)`'s,
//! but `f` is not batched — its graph becomes the body of one
//! [`Map`](anvil_ops::control::Map) node, run as a (parallel) loop by the backend. With
//! [`MapFn::batch_size`], `f` is vmapped over chunks of that many elements and
//! the loop runs over chunks, trading memory for vectorization.
//!
//! `Map` has a batching rule (registered here), so `vmap(map(f))` and
//! `map` inside `vmap` compose: the body is vmapped and the loop stays a loop.
//! `vmap` itself turns an op without a batching rule into a one-node `Map`
//! ([`map_fallback`]), logging a one-time warning naming the op (the `log`
//! crate, `warn` level: the application's logger decides where it goes).

use crate::axes::InAxes;
use crate::vmap::{batch_args, vmap_graph};
use anvil_core::{
    trace_fn_for, Batched, Dyn, Error, Function, Graph, IntoFunction, Op, PlanCache, Result,
    TensorType, TreeDef, Var,
};
use anvil_ops::batching::at_front;
use anvil_ops::control::{batch_in_front, emit_map, map_loop_many, vmapped_body};
use anvil_ops::{concatenate, VarExt};
use std::any::TypeId;
use std::sync::Mutex;

static FALLBACKS: Mutex<Vec<(TypeId, &'static str)>> = Mutex::new(Vec::new());

/// The ops `vmap` has run as a `map` loop because they have no batching
/// rule, in the order first met (each is warned about once per process).
pub fn map_fallbacks() -> Vec<&'static str> {
    FALLBACKS.lock().map(|f| f.iter().map(|(_, n)| *n).collect()).unwrap_or_default()
}

/// Batches `op` by looping over the batch: a `Map` whose body is the op
/// alone. Used by `vmap` for ops without a batching rule; the first use for
/// each op type logs a warning naming the op (`log::warn!`).
///
/// # Errors
/// The op's shape rule failing on the element types.
pub fn map_fallback(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    warn_once(op);
    map_loop_many(op, args, size)
}

fn warn_once(op: &dyn Op) {
    if let Ok(mut seen) = FALLBACKS.lock() {
        if !seen.iter().any(|(t, _)| *t == op.op_type()) {
            seen.push((op.op_type(), op.name()));
            log::warn!(
                "op `{}` has no batching rule; vmap runs it as a loop over the batch (map). \
                 Register a VmapRule for it to get a batched kernel.",
                op.name()
            );
        }
    }
}

/// `f` applied to each slice of its mapped arguments, as a loop; see [`map`].
pub struct MapFn<F> {
    f: F,
    in_axes: InAxes,
    batch_size: Option<usize>,
    cache: PlanCache,
}

/// A copy with the same settings and an empty plan cache.
impl<F: Clone> Clone for MapFn<F> {
    fn clone(&self) -> Self {
        MapFn {
            f: self.f.clone(),
            in_axes: self.in_axes.clone(),
            batch_size: self.batch_size,
            cache: PlanCache::new(),
        }
    }
}

impl<F> std::fmt::Debug for MapFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MapFn(in_axes {:?}, batch_size {:?})", self.in_axes, self.batch_size)
    }
}

/// Maps `f` over axis 0 of its arguments as a loop, like `jax.lax.map`: the
/// same result as [`vmap`](crate::vmap()), computed one element (or one chunk,
/// with [`MapFn::batch_size`]) at a time, in parallel on the CPU. Use it for
/// code that does not batch well, or to bound memory.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::map;
/// let xs = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])?;
/// let w = Tensor::from_vec(vec![1.0, -1.0], &[2])?;
/// let f = map(|x: &Var, w: &Var| (x * w).sum(&[0])).in_axes([Some(0), None]).batch_size(2);
/// assert_eq!(f.eval((&xs, &w))?.to_vec::<f64>()?, vec![-1.0, -1.0, -1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn map<M, F: IntoFunction<M>>(f: F) -> MapFn<F::Func> {
    MapFn {
        f: f.into_function(),
        in_axes: InAxes::all(Some(0)),
        batch_size: None,
        cache: PlanCache::new(),
    }
}

impl<F> MapFn<F> {
    /// Which axis of each argument is looped over; `None` shares the
    /// argument (a tree, as `vmap`'s [`InAxes`]). Default: axis 0 of every
    /// leaf.
    pub fn in_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.in_axes = axes.into();
        self
    }

    /// Runs `f` vmapped over chunks of `k` elements, looping over the
    /// chunks (a last, smaller chunk is vmapped inline).
    pub fn batch_size(mut self, k: usize) -> Self {
        self.batch_size = Some(k);
        self
    }
}

impl<F: Function> Function for MapFn<F> {
    type Args = F::Args;
    type Output = F::Output;

    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let axes = self.in_axes.broadcast("map in_axes", def)?;
        if axes.iter().all(Option::is_none) {
            return Err(Error::invalid(
                "map",
                "in_axes",
                "no argument is mapped: map loops over at least one",
            ));
        }
        let (batched, size) = batch_args("map", def, args, &axes, None)?;
        let mut front = batch_in_front(&batched, size);
        let elem_types: Vec<TensorType> = front.iter().map(Batched::logical_type).collect();
        let t = trace_fn_for(&self.f, def, &elem_types, args)?;
        front.extend(t.captures.iter().map(|c| Batched::new(c.clone(), None)));
        let leaves = match self.batch_size {
            Some(0) => Err(Error::invalid("map", "batch_size", "must be at least 1")),
            Some(k) if k < size => map_in_batches(&t.graph, &front, size, k),
            _ => emit_map(&t.graph, &front, size),
        }?;
        Ok(Dyn { def: t.output, leaves })
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        format!("map({})", self.f.name())
    }
}

/// `graph` over `front` (batch axis 0 or shared) as a loop over batches of
/// `k` elements, each vmapped; a last, smaller batch is vmapped inline.
fn map_in_batches(graph: &Graph, front: &[Batched], size: usize, k: usize) -> Result<Vec<Var>> {
    let (chunks, rest) = (size / k, size % k);
    let axes: Vec<Option<usize>> = front.iter().map(|b| b.axis).collect();
    let body = vmapped_body(graph, &axes, k)?;
    let rows = |b: &Batched, start: usize, stop: usize| {
        b.var.slice_axis(0, Some(start as i64), Some(stop as i64), 1)
    };
    let looped: Vec<Batched> = front
        .iter()
        .map(|b| match b.axis {
            Some(_) => {
                let mut shape = vec![chunks as i64, k as i64];
                shape.extend(b.logical_shape().iter().map(|&d| d as i64));
                Batched::new(rows(b, 0, chunks * k).reshape(&shape), Some(0))
            }
            None => b.clone(),
        })
        .collect();
    // `[chunks, k, ...]` to `[chunks * k, ...]` (a poisoned value, whose
    // error is recorded, has no axes to keep).
    let outs = emit_map(&body, &looped, chunks)?.into_iter().map(|o| {
        let mut shape = vec![(chunks * k) as i64];
        shape.extend(o.shape().iter().skip(2).map(|&d| d as i64));
        o.reshape(&shape)
    });
    if rest == 0 {
        return Ok(outs.collect());
    }
    let tail: Vec<Batched> = front
        .iter()
        .map(|b| match b.axis {
            Some(_) => Batched::new(rows(b, chunks * k, size), Some(0)),
            None => b.clone(),
        })
        .collect();
    let tail_outs = vmap_graph(graph, &tail, rest)?;
    Ok(outs.zip(&tail_outs).map(|(o, t)| concatenate(&[&o, &at_front(t, rest)], 0)).collect())
}
