//! `map`: a loop over a batch as one op, and the fallback of `vmap` for ops
//! without a batching rule.
//!
//! [`map(f)`](map) applies `f` to every slice of its mapped arguments and
//! stacks the results, like `jax.lax.map`: the result equals `vmap(f)`'s,
//! but `f` is not batched — its graph becomes the body of one
//! [`Map`] node, run as a (parallel) loop by the backend. With
//! [`MapFn::batch_size`], `f` is vmapped over chunks of that many elements and
//! the loop runs over chunks, trading memory for vectorization.
//!
//! `Map` has a batching rule (registered here), so `vmap(map(f))` and
//! `map` inside `vmap` compose: the body is vmapped and the loop stays a loop.
//! `vmap` itself turns an op without a batching rule into a one-node `Map`
//! ([`map_fallback`]), printing a one-time warning naming the op.

use crate::passes::dce;
use crate::replay::{drop_unused_inputs, outputs, replay, value};
use crate::vmap::{axes_for, batch_args, vmap_graph, InAxes};
use anvil_core::function::trace_types;
use anvil_core::{
    register_rule, trace_with, Batched, Error, Function, Graph, NodeId, Op, Parameter, PlanCache,
    Result, TensorType, ValueId, Var,
};
use anvil_ops::ad::dense;
use anvil_ops::batching::{at_front, move_axis};
use anvil_ops::control::Map;
use anvil_ops::{concatenate, VarExt};
use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::Mutex;

/// Emits one `Map` node over `args` whose batch axis is 0 (mapped) or
/// absent (shared), returning one stacked value per output of `body`.
///
/// Work in the body that depends only on shared operands (loop-invariant)
/// is hoisted out and done once, before the loop: the values the loop needs
/// from it become extra shared operands. Operands the body does not read
/// are dropped.
pub(crate) fn emit_map(body: &Graph, args: &[Batched], size: usize) -> Result<Vec<Var>> {
    let (body, args) = hoist_invariants(body, args)?;
    let (body, kept) = drop_unused_inputs(&dce(&body)?)?;
    let mapped = kept.iter().map(|&k| args[k].axis.is_some()).collect();
    let refs: Vec<&Var> = kept.iter().map(|&k| &args[k].var).collect();
    let n = body.outputs().len();
    let op = Map { body: body.into(), mapped, size };
    Ok(Var::apply_op_n(Box::new(op), &refs, n))
}

/// Splits off the loop-invariant part of `body`: nodes with operands that
/// depend on no mapped operand. Those read by the loop (or returned) are
/// computed here, in the caller's trace, and passed to a new body as shared
/// operands. Nodes without operands (constants) stay in the body.
fn hoist_invariants(body: &Graph, args: &[Batched]) -> Result<(Graph, Vec<Batched>)> {
    let mut variant = vec![false; body.num_values()];
    for (&input, a) in body.inputs().iter().zip(args) {
        variant[input.index()] = a.axis.is_some();
    }
    for (_, node) in body.iter() {
        if node.inputs.iter().any(|i| variant[i.index()]) {
            node.results().for_each(|v| variant[v.index()] = true);
        }
    }
    let varies = |id: NodeId| body.node(id).results().any(|v| variant[v.index()]);
    let hoistable = |v: ValueId| {
        let node = body.producer_node(v);
        !variant[v.index()] && !node.inputs.is_empty() && !node.op.is::<Parameter>()
    };
    let mut frontier: Vec<ValueId> = Vec::new();
    for (id, node) in body.iter() {
        if varies(id) {
            for &i in &node.inputs {
                if hoistable(i) && !frontier.contains(&i) {
                    frontier.push(i);
                }
            }
        }
    }
    for &o in body.outputs() {
        if hoistable(o) && !frontier.contains(&o) {
            frontier.push(o);
        }
    }
    if frontier.is_empty() {
        return Ok((body.clone(), args.to_vec()));
    }
    // The invariant values, once, from the shared operands.
    let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
    for (&input, a) in body.inputs().iter().zip(args) {
        if a.axis.is_none() {
            env[input.index()] = Some(a.var.clone());
        }
    }
    replay(body, &mut env, |id| !varies(id))?;
    let hoisted: Vec<Var> = frontier.iter().map(|&f| value(&env, f)).collect::<Result<_>>()?;
    // The new body reads the hoisted values as inputs.
    let mut types = body.input_types();
    types.extend(hoisted.iter().map(|h| h.ty().clone()));
    let n = body.inputs().len();
    let new_body = trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
        for (k, &input) in body.inputs().iter().enumerate() {
            env[input.index()] = Some(vars[k].clone());
        }
        for (k, f) in frontier.iter().enumerate() {
            env[f.index()] = Some(vars[n + k].clone());
        }
        replay(body, &mut env, |id| body.node(id).results().all(|v| !hoistable(v)))?;
        outputs(body, &env)
    })?;
    let mut new_args = args.to_vec();
    new_args.extend(hoisted.into_iter().map(|h| Batched::new(h, None)));
    Ok((new_body, new_args))
}

/// `body` vmapped: a graph over inputs with a leading batch of `size` where
/// `axes[i]` is `Some(0)`, returning every output batched along axis 0.
pub(crate) fn vmapped_body(body: &Graph, axes: &[Option<usize>], size: usize) -> Result<Graph> {
    let types: Vec<TensorType> = body
        .input_types()
        .into_iter()
        .zip(axes)
        .map(|(t, a)| match a {
            Some(_) => {
                let mut shape = vec![size];
                shape.extend_from_slice(t.shape());
                t.with_shape(shape)
            }
            None => t,
        })
        .collect();
    trace_with(&types, |vars| {
        let args: Vec<Batched> =
            vars.iter().zip(axes).map(|(v, a)| Batched::new(v.clone(), *a)).collect();
        let outs = vmap_graph(body, &args, size)?;
        Ok(outs.iter().map(|o| at_front(o, size)).collect())
    })
}

/// The batching rule of `Map`: the body is vmapped, the loop stays a loop.
/// Mapped operands get the new batch axis right after the loop axis, shared
/// ones in front; the results' batch axis is 1.
fn vmap_map(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let m = op.try_downcast::<Map>()?;
    anvil_core::op::expect_arity(op, args, m.mapped.len())?;
    let mut operands = Vec::with_capacity(args.len());
    let mut axes = Vec::with_capacity(args.len());
    for (b, &mapped) in args.iter().zip(&m.mapped) {
        match b.axis {
            None => operands.push(b.var.clone()),
            Some(k) => operands.push(move_axis(&b.var, k, usize::from(mapped))),
        }
        axes.push(b.axis.map(|_| 0));
    }
    let body = vmapped_body(&m.body, &axes, size)?;
    let n = body.outputs().len();
    let op = Map { body: body.into(), mapped: m.mapped.clone(), size: m.size };
    let refs: Vec<&Var> = operands.iter().collect();
    Ok(Var::apply_op_n(Box::new(op), &refs, n)
        .into_iter()
        .map(|v| Batched::new(v, Some(1)))
        .collect())
}

register_rule!(VmapRule, Map, many: vmap_map);

static FALLBACKS: Mutex<Vec<(TypeId, &'static str)>> = Mutex::new(Vec::new());

/// The ops `vmap` has run as a `map` loop because they have no batching
/// rule, in the order first met (each is warned about once per process).
pub fn map_fallbacks() -> Vec<&'static str> {
    FALLBACKS.lock().map(|f| f.iter().map(|(_, n)| *n).collect()).unwrap_or_default()
}

/// Batches `op` by looping over the batch: a `Map` whose body is the op
/// alone. Used by `vmap` for ops without a batching rule; the first use for
/// each op type prints a warning naming the op.
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
            eprintln!(
                "anvil: warning: op `{}` has no batching rule; vmap runs it as a loop over the batch (map). \
                 Register a VmapRule for it to get a batched kernel.",
                op.name()
            );
        }
    }
}

/// A batching rule that loops: `op` alone as the body of a `Map` over the
/// batched operands (the rule of ops that are best run one element at a
/// time, and the fallback for ops without a rule). For ops with one result.
///
/// # Errors
/// The op's shape rule failing on the element types.
pub fn map_loop(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let mut outs = map_loop_many(op, args, size)?;
    match outs.len() {
        1 => Ok(outs.swap_remove(0)),
        n => Err(Error::invalid(
            op.name(),
            "results",
            format!("map_loop takes ops with one result; this one has {n} (use map_loop_many)"),
        )),
    }
}

/// [`map_loop`] for ops with any number of results.
///
/// # Errors
/// The op's shape rule failing on the element types.
pub fn map_loop_many(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let types: Vec<TensorType> = args.iter().map(Batched::logical_type).collect();
    let body = trace_with(&types, |vars| {
        let refs: Vec<&Var> = vars.iter().collect();
        let tracer = vars
            .first()
            .map_or_else(anvil_core::trace::current_or_detached, |v| v.tracer().clone());
        tracer.try_apply(op.boxed(), &refs)
    })?;
    let outs = emit_map(&body, &batch_in_front(args, size), size)?;
    Ok(outs.into_iter().map(|o| Batched::new(o, Some(0))).collect())
}

/// The operands of a loop: batched ones with their batch axis in front
/// (what `Map` slices), shared ones as they are.
fn batch_in_front(args: &[Batched], size: usize) -> Vec<Batched> {
    args.iter()
        .map(|b| match b.axis {
            Some(_) => Batched::new(at_front(b, size), Some(0)),
            None => b.clone(),
        })
        .collect()
}

/// `f` applied to each slice of its mapped arguments, as a loop; see [`map`].
pub struct MapFn<F, M> {
    f: F,
    in_axes: InAxes,
    batch_size: Option<usize>,
    cache: PlanCache,
    _marker: PhantomData<fn() -> M>,
}

/// A copy with the same settings and an empty plan cache.
impl<F: Clone, M> Clone for MapFn<F, M> {
    fn clone(&self) -> Self {
        MapFn {
            f: self.f.clone(),
            in_axes: self.in_axes.clone(),
            batch_size: self.batch_size,
            cache: PlanCache::new(),
            _marker: PhantomData,
        }
    }
}

impl<F, M> std::fmt::Debug for MapFn<F, M> {
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
/// assert_eq!(f.call((&xs, &w))?.to_vec::<f64>()?, vec![-1.0, -1.0, -1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn map<M, F: Function<M>>(f: F) -> MapFn<F, M> {
    MapFn {
        f,
        in_axes: InAxes::All(Some(0)),
        batch_size: None,
        cache: PlanCache::new(),
        _marker: PhantomData,
    }
}

impl<F, M> MapFn<F, M> {
    /// Which axis of each argument is looped over; `None` shares the
    /// argument. Default: axis 0 of every argument.
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

impl<M, F: Function<M>> Function<M> for MapFn<F, M> {
    type Output = F::Output;

    fn arity(&self) -> Option<usize> {
        self.f.arity()
    }

    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let axes = axes_for("map", &self.in_axes, args.len())?;
        if axes.iter().all(Option::is_none) {
            return Err(Error::invalid(
                "map",
                "in_axes",
                "no argument is mapped: map loops over at least one",
            ));
        }
        let (batched, size) = batch_args("map", args, &axes, None)?;
        let front = batch_in_front(&batched, size);
        let elem_types: Vec<TensorType> = front.iter().map(Batched::logical_type).collect();
        let graph = trace_types(&self.f, &elem_types)?;
        let k = match self.batch_size {
            Some(0) => return Err(Error::invalid("map", "batch_size", "must be at least 1")),
            Some(k) if k < size => k,
            _ => return emit_map(&graph, &front, size),
        };
        let (chunks, rest) = (size / k, size % k);
        let axes: Vec<Option<usize>> = front.iter().map(|b| b.axis).collect();
        let body = vmapped_body(&graph, &axes, k)?;
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
        let mut outs: Vec<Var> = emit_map(&body, &looped, chunks)?
            .into_iter()
            .map(|o| {
                let mut shape = vec![(chunks * k) as i64];
                // `[chunks, k, ...]` (a poisoned value, whose error is
                // recorded, has no axes to keep).
                shape.extend(o.shape().iter().skip(2).map(|&d| d as i64));
                o.reshape(&shape)
            })
            .collect();
        if rest > 0 {
            let tail: Vec<Batched> = front
                .iter()
                .map(|b| match b.axis {
                    Some(_) => Batched::new(rows(b, chunks * k, size), Some(0)),
                    None => b.clone(),
                })
                .collect();
            let tail_outs = vmap_graph(&graph, &tail, rest)?;
            outs = outs
                .iter()
                .zip(&tail_outs)
                .map(|(o, t)| concatenate(&[o, &at_front(t, rest)], 0))
                .collect();
        }
        Ok(outs)
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        format!("map({})", self.f.name())
    }
}

// ---------------------------------------------------------- derivatives

/// The jvp of `Map`: a map of the body's jvp, over the primals and the
/// tangents (a tangent is mapped exactly when its primal is); one tangent
/// per result.
fn jvp_map(
    op: &dyn Op,
    primals: &[Var],
    tangents: &[Option<Var>],
    _: &[Var],
) -> Result<Vec<Option<Var>>> {
    let m = op.try_downcast::<Map>()?;
    let body_in = m.body.input_types();
    let with_t: Vec<usize> = (0..primals.len()).filter(|&i| tangents[i].is_some()).collect();
    let mut types = body_in.clone();
    types.extend(with_t.iter().map(|&i| body_in[i].clone()));
    let n = primals.len();
    let body = trace_with(&types, |vars| {
        let mut ts: Vec<Option<Var>> = vec![None; n];
        for (k, &i) in with_t.iter().enumerate() {
            ts[i] = Some(vars[n + k].clone());
        }
        let (outs, touts) = crate::ad::jvp_graph(&m.body, &vars[..n], &ts)?;
        Ok(touts.iter().zip(&outs).map(|(t, o)| dense(t, o)).collect())
    })?;
    let mut args: Vec<Batched> = primals
        .iter()
        .zip(&m.mapped)
        .map(|(p, &mp)| Batched::new(p.clone(), mp.then_some(0)))
        .collect();
    args.extend(with_t.iter().map(|&i| {
        Batched::new(
            tangents[i].clone().unwrap_or_else(|| primals[i].clone()),
            m.mapped[i].then_some(0),
        )
    }));
    Ok(emit_map(&body, &args, m.size)?.into_iter().map(Some).collect())
}

/// The transpose of a `Map` linear in some operands: a map of the body's
/// transpose over the known operands and the cotangents (zeros where a
/// result has none); a shared (unmapped) linear operand's cotangent is
/// summed over the loop.
fn transpose_map(
    op: &dyn Op,
    cts: &[Option<Var>],
    args: &[anvil_core::LinearArg],
) -> Result<Vec<Option<Var>>> {
    let m = op.try_downcast::<Map>()?;
    let body_in = m.body.input_types();
    let body_out = m.body.output_types();
    let linear: Vec<bool> = args.iter().map(anvil_core::LinearArg::is_linear).collect();
    let known_idx: Vec<usize> = (0..args.len()).filter(|&i| !linear[i]).collect();
    let with_ct: Vec<usize> = (0..cts.len()).filter(|&k| cts[k].is_some()).collect();
    let mut types: Vec<TensorType> = known_idx.iter().map(|&i| body_in[i].clone()).collect();
    types.extend(with_ct.iter().map(|&k| body_out[k].clone()));
    let body = trace_with(&types, |vars| {
        let mut known: Vec<Option<Var>> = vec![None; args.len()];
        for (k, &i) in known_idx.iter().enumerate() {
            known[i] = Some(vars[k].clone());
        }
        let mut body_cts: Vec<Option<Var>> = vec![None; body_out.len()];
        for (j, &k) in with_ct.iter().enumerate() {
            body_cts[k] = Some(vars[known_idx.len() + j].clone());
        }
        let (_, in_cts) = crate::ad::transpose_graph(&m.body, &linear, &known, &body_cts)?;
        let like = &vars[known_idx.len()];
        // One output per linear operand, zeros where the cotangent is zero.
        Ok((0..args.len())
            .filter(|&i| linear[i])
            .map(|i| in_cts[i].clone().unwrap_or_else(|| anvil_ops::ad::zeros(like, &body_in[i])))
            .collect())
    })?;
    let mut operands: Vec<Batched> = known_idx
        .iter()
        .map(|&i| {
            let v = args[i].known().cloned().ok_or_else(|| {
                Error::invalid("map", "transpose", "a known operand has no value")
            })?;
            Ok(Batched::new(v, m.mapped[i].then_some(0)))
        })
        .collect::<Result<_>>()?;
    operands
        .extend(with_ct.iter().filter_map(|&k| cts[k].clone()).map(|c| Batched::new(c, Some(0))));
    let mut outs = emit_map(&body, &operands, m.size)?.into_iter();
    Ok((0..args.len())
        .map(|i| {
            if !linear[i] {
                return None;
            }
            let c = outs.next()?;
            Some(if m.mapped[i] { c } else { c.sum(&[0]) })
        })
        .collect())
}

register_rule!(JvpRule, Map, many: jvp_map);
register_rule!(TransposeRule, Map, many: transpose_map);
