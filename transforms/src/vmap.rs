//! `vmap`: the batching transform.
//!
//! `vmap(f)` traces `f` at the shapes of one batch element, then walks that
//! graph in order, keeping for every node its batched value and where its
//! batch axis is. A node whose inputs are all unbatched is copied as it is —
//! work that does not depend on the batch is done once — and any other node
//! goes through its op's registered batching rule. The walk emits straight
//! into the caller's trace, so a `vmap` inside a traced function (or another
//! `vmap`) inlines, and nesting to any depth is graph-to-graph.
//!
//! An op without a batching rule is run as a loop over the batch (a
//! [`Map`](anvil_ops::control::Map) node whose body is the op), with a
//! one-time warning naming the op; see [`crate::map`](mod@crate::map).

pub use crate::axes::InAxes;
use anvil_core::function::check_arity;
use anvil_core::replay::{bind, bound_inputs, outputs, value};
use anvil_core::shape::normalize_axis;
use anvil_core::{
    trace_fn_for, vmap_rules, Batched, Dyn, Error, Function, Graph, IntoFunction, PlanCache,
    Result, TensorType, TreeDef, Var,
};
use anvil_ops::batching::{at_front, move_axis};
use anvil_ops::{concatenate, VarExt};

/// Runs `graph` batched: `args[i]` is the batched value of input `i`.
/// Emits into the trace of the arguments (or the current trace) and returns
/// the batched outputs.
///
/// # Errors
/// An op without a batching rule; a rule's error.
pub fn vmap_graph(graph: &Graph, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    anvil_core::stats::count_transform();
    vmap_graph_sharing(graph, args, size, &mut vec![None; graph.num_values()])
}

/// [`vmap_graph`] that reuses, and fills, `shared`: the values of nodes that
/// do not depend on the batch. Chunks of one batch share them, so work
/// independent of the batch is done once, not once per chunk.
fn vmap_graph_sharing(
    graph: &Graph,
    args: &[Batched],
    size: usize,
    shared: &mut [Option<Var>],
) -> Result<Vec<Batched>> {
    check_arity("vmap", Some(graph.inputs().len()), args.len())?;
    let mut env = bound_inputs(graph, args);
    for (id, node) in graph.iter() {
        if node.op.parameter_index().is_some() {
            continue;
        }
        let ins: Vec<Batched> =
            node.inputs.iter().map(|&i| value(&env, i)).collect::<Result<_>>()?;
        let outs = if ins.iter().all(|b| b.axis.is_none()) {
            if shared[node.out().index()].is_none() {
                let vars: Vec<Var> = ins.into_iter().map(|b| b.var).collect();
                let refs: Vec<&Var> = vars.iter().collect();
                let outs = Var::apply_op_n(node.op.boxed(), &refs, node.num_results());
                bind(shared, node, outs);
            }
            node.results()
                .map(|v| value(shared, v).map(|x| Batched::new(x, None)))
                .collect::<Result<Vec<_>>>()?
        } else {
            let outs = match vmap_rules().lookup(node.op.as_ref())? {
                Some(rule) => rule.apply(node.op.as_ref(), &ins, size)?,
                None => crate::map::map_fallback(node.op.as_ref(), &ins, size)?,
            };
            anvil_core::op::expect_arity(node.op.as_ref(), &outs, node.num_results()).map_err(
                |_| {
                    rule_error(
                        id.index(),
                        node.op.name(),
                        "results",
                        node.num_results(),
                        outs.len(),
                    )
                },
            )?;
            for (out, v) in outs.iter().zip(node.results()) {
                check_rule_output(id.index(), node.op.name(), out, graph.ty(v), size)?;
            }
            outs
        };
        bind(&mut env, node, outs);
    }
    outputs(graph, &env)
}

fn rule_error(node: usize, op: &str, what: &str, expected: usize, got: usize) -> Error {
    Error::InvalidGraph {
        node,
        msg: format!("the vmap rule of {op} returned {got} {what}; the op has {expected}"),
    }
}

/// [`vmap_graph`], evaluated in chunks of `chunk` elements when given (see
/// [`Vmap::chunk_size`]).
///
/// # Errors
/// As [`vmap_graph`]; a chunk size of zero.
pub fn vmap_graph_chunked(
    graph: &Graph,
    args: &[Batched],
    size: usize,
    chunk: Option<usize>,
) -> Result<Vec<Batched>> {
    match chunk {
        Some(0) => Err(Error::invalid("vmap", "chunk_size", "must be at least 1")),
        Some(_) if anvil_core::shape::is_symbolic(size) => Err(Error::invalid(
            "vmap",
            "chunk_size",
            format!("chunks of a symbolic batch {}", anvil_core::shape::fmt_dim(size)),
        )),
        Some(k) if k < size => vmap_chunked(graph, args, size, k),
        _ => vmap_graph(graph, args, size),
    }
}

/// `graph` vmapped over chunks of `k` elements: the outputs have their
/// batch axis in front. With two chunks or more, a loop over the chunks
/// (see [`looped_chunks`]).
fn vmap_chunked(graph: &Graph, args: &[Batched], size: usize, k: usize) -> Result<Vec<Batched>> {
    let slice = |start: usize, n: usize| -> Vec<Batched> {
        args.iter()
            .map(|b| match b.axis {
                Some(a) => {
                    let (from, to) = (Some(start as i64), Some((start + n) as i64));
                    Batched::new(b.var.slice_axis(a as i64, from, to, 1), Some(a))
                }
                None => b.clone(),
            })
            .collect()
    };
    let full = size / k;
    if full < 2 {
        return vmap_graph_by_chunks(graph, size, k, |start, n| Ok(slice(start, n)));
    }
    // Scanned: the batched arguments' first full * k elements, [full, k, ...].
    let consts: Vec<Var> =
        args.iter().filter(|b| b.axis.is_none()).map(|b| b.var.clone()).collect();
    let xs: Vec<Var> = args
        .iter()
        .filter(|b| b.axis.is_some())
        .map(|b| {
            let front = at_front(b, size).slice_axis(0, Some(0), Some((full * k) as i64), 1);
            let mut shape = vec![full as i64, k as i64];
            shape.extend(b.logical_shape().iter().map(|&d| d as i64));
            front.reshape(&shape)
        })
        .collect();
    let batched: Vec<bool> = args.iter().map(|b| b.axis.is_some()).collect();
    let chunk_args = |c: &[Var], x: &[Var]| -> Vec<Batched> {
        let (mut c, mut x) = (c.iter(), x.iter());
        batched
            .iter()
            .filter_map(|&b| match b {
                true => x.next().map(|v| Batched::new(v.clone(), Some(0))),
                false => c.next().map(|v| Batched::new(v.clone(), None)),
            })
            .collect()
    };
    let outs = looped_chunks(graph, k, full, &consts, &xs, chunk_args)?;
    finish_chunks(graph, outs, size, full * k, |start, n| Ok(slice(start, n)))
}

/// The outputs of the looped chunks (`[full * k, ...]` each), with the
/// last partial chunk (from `done` to `size`) vmapped after the loop and
/// concatenated.
pub(crate) fn finish_chunks(
    graph: &Graph,
    looped: Vec<Var>,
    size: usize,
    done: usize,
    chunk: impl Fn(usize, usize) -> Result<Vec<Batched>>,
) -> Result<Vec<Batched>> {
    if done == size {
        return Ok(looped.into_iter().map(|v| Batched::new(v, Some(0))).collect());
    }
    let rest = size - done;
    let tail = vmap_graph(graph, &chunk(done, rest)?, rest)?;
    Ok(looped
        .iter()
        .zip(&tail)
        .map(|(l, t)| Batched::new(concatenate(&[l, &at_front(t, rest)], 0), Some(0)))
        .collect())
}

/// `graph` vmapped over `full` chunks of `k` elements as one loop (a
/// `scan` with no carries): the chunk's arguments are built in the body by
/// `chunk_args` from the loop's consts and its slices of the scanned `xs`
/// (each `[full, ...]`); work that depends on the consts only is hoisted
/// out of the loop. The graph's size does not depend on the number of
/// chunks. Returns each output as `[full * k, ...]`.
///
/// # Errors
/// As [`vmap_graph`].
pub(crate) fn looped_chunks(
    graph: &Graph,
    k: usize,
    full: usize,
    consts: &[Var],
    xs: &[Var],
    chunk_args: impl Fn(&[Var], &[Var]) -> Vec<Batched>,
) -> Result<Vec<Var>> {
    let nc = consts.len();
    let mut types: Vec<TensorType> = consts.iter().map(|c| c.ty().clone()).collect();
    types.extend(xs.iter().map(|x| x.ty().with_shape(x.shape()[1..].to_vec())));
    let body = anvil_core::trace_with(&types, |v| {
        let outs = vmap_graph(graph, &chunk_args(&v[..nc], &v[nc..]), k)?;
        Ok(outs.iter().map(|o| at_front(o, k)).collect())
    })?;
    // Work that reads only the consts runs once, before the loop.
    let varying: Vec<bool> = (0..types.len()).map(|i| i >= nc).collect();
    let invariant: Vec<Option<Var>> =
        consts.iter().cloned().map(Some).chain(xs.iter().map(|_| None)).collect();
    let (body, mut consts) = match anvil_ops::control::hoist(&body, &varying, &invariant)? {
        Some((hoisted_body, hoisted)) => {
            // The hoisted values come last; a scan takes its consts first.
            let (nx, nh) = (xs.len(), hoisted.len());
            let order: Vec<usize> =
                (0..nc).chain(nc + nx..nc + nx + nh).chain(nc..nc + nx).collect();
            let outs: Vec<usize> = (0..hoisted_body.outputs().len()).collect();
            let body = anvil_ops::bodies::reorder(&hoisted_body, &order, &outs)?;
            let mut c = consts.to_vec();
            c.extend(hoisted);
            (body, c)
        }
        None => (body, consts.to_vec()),
    };
    let n_consts = consts.len();
    consts.extend(xs.iter().cloned());
    let scan = anvil_ops::scan::Scan {
        body: body.into(),
        consts: n_consts,
        carries: 0,
        length: full,
        reverse: false,
        checkpoint: None,
    };
    Ok(anvil_ops::scan::emit_scan(scan, &consts)
        .into_iter()
        .map(|y| {
            let mut shape = vec![(full * k) as i64];
            shape.extend(y.shape()[2..].iter().map(|&d| d as i64));
            y.reshape(&shape)
        })
        .collect())
}

/// `graph` vmapped over a batch of `size` in chunks of `k`, the arguments
/// of each chunk made by `chunk(start, len)` (so a caller can build them
/// per chunk — a slice of a `jacfwd` seed — instead of slicing a whole
/// one). Work that does not depend on the batch is done once for all
/// chunks; the outputs are concatenated with the batch axis in front.
///
/// # Errors
/// As [`vmap_graph`]; `chunk`'s error.
pub fn vmap_graph_by_chunks(
    graph: &Graph,
    size: usize,
    k: usize,
    mut chunk: impl FnMut(usize, usize) -> Result<Vec<Batched>>,
) -> Result<Vec<Batched>> {
    if k == 0 {
        return Err(Error::invalid("vmap", "chunk_size", "must be at least 1"));
    }
    let mut shared = vec![None; graph.num_values()];
    let mut parts: Vec<Vec<Var>> = vec![Vec::new(); graph.outputs().len()];
    for start in (0..size).step_by(k) {
        let n = k.min(size - start);
        let outs = vmap_graph_sharing(graph, &chunk(start, n)?, n, &mut shared)?;
        for (p, o) in parts.iter_mut().zip(&outs) {
            p.push(at_front(o, n));
        }
    }
    Ok(parts
        .iter()
        .map(|p| {
            let refs: Vec<&Var> = p.iter().collect();
            Batched::new(concatenate(&refs, 0), Some(0))
        })
        .collect())
}

/// A rule must give the element type the original node had, with a batch
/// axis of the batch size; anything else is a bug in the rule, reported
/// with the op's name rather than producing wrong numbers.
fn check_rule_output(
    node: usize,
    op: &str,
    out: &Batched,
    ty: &TensorType,
    size: usize,
) -> Result<()> {
    if out.var.is_poisoned() {
        return Ok(()); // The recorded error will be returned by the trace.
    }
    // A rule may leave a result the batch does not reach unbatched (the
    // carries of a loop outside the batch's reach, say).
    let axis_ok = match out.axis {
        Some(k) => k < out.var.rank() && out.var.shape()[k] == size,
        None => true,
    };
    let ok = axis_ok && out.logical_shape() == ty.shape() && out.var.dtype() == ty.dtype();
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidGraph {
            node,
            msg: format!("the vmap rule of {op} returned {} with batch axis {:?}; expected {ty} batched by {size}", out.var.ty(), out.axis),
        })
    }
}

/// Pairs each argument with its normalized batch axis and finds the batch
/// size: the size of every mapped axis, which must agree, or `axis_size`
/// when nothing is mapped.
///
/// # Errors
/// An axis out of range for an argument's rank; inconsistent batch sizes;
/// an `axis_size` that disagrees with the arguments, or none when needed.
pub(crate) fn batch_args(
    what: &str,
    def: &TreeDef,
    args: &[Var],
    axes: &[Option<i64>],
    axis_size: Option<usize>,
) -> Result<(Vec<Batched>, usize)> {
    let names = def.leaf_paths();
    let name = |i: usize| names.get(i).map_or_else(|| i.to_string(), Clone::clone);
    let mut batched = Vec::with_capacity(args.len());
    let mut size: Option<(usize, usize, usize)> = None; // (size, arg, axis)
    for (i, (x, a)) in args.iter().zip(axes).enumerate() {
        let axis = a
            .map(|a| normalize_axis(what, a, x.shape(), &format!("{} (in_axes)", name(i))))
            .transpose()?;
        if let Some(k) = axis {
            let n = x.shape()[k];
            match size {
                Some((m, j, kj)) if m != n => {
                    return Err(Error::shape(
                        what,
                        &[args[j].shape(), x.shape()],
                        format!(
                            "inconsistent batch sizes: argument {} has {m} along axis {kj}, argument {} has {n} along axis {k}",
                            name(j),
                            name(i)
                        ),
                    ))
                }
                None => size = Some((n, i, k)),
                _ => {}
            }
        }
        batched.push(Batched::new(x.clone(), axis));
    }
    let size = match (size, axis_size) {
        (Some((n, i, k)), Some(given)) if n != given => {
            return Err(Error::invalid(
                what,
                "axis_size",
                format!(
                    "{given} differs from argument {}'s batch size {n} along axis {k}",
                    name(i)
                ),
            ))
        }
        (Some((n, ..)), _) => n,
        (None, Some(n)) => n,
        (None, None) => {
            return Err(Error::invalid(
                what,
                "axis_size",
                "no argument is mapped (all in_axes are None), so axis_size must be given",
            ))
        }
    };
    Ok((batched, size))
}

/// `f` mapped over a batch axis of its arguments; see [`vmap`].
pub struct Vmap<F> {
    f: F,
    in_axes: InAxes,
    out_axes: InAxes,
    axis_size: Option<usize>,
    chunk_size: Option<usize>,
    cache: PlanCache,
}

/// A copy with the same settings and an empty plan cache.
impl<F: Clone> Clone for Vmap<F> {
    fn clone(&self) -> Self {
        Vmap {
            f: self.f.clone(),
            in_axes: self.in_axes.clone(),
            out_axes: self.out_axes.clone(),
            axis_size: self.axis_size,
            chunk_size: self.chunk_size,
            cache: PlanCache::new(),
        }
    }
}

impl<F> std::fmt::Debug for Vmap<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Vmap(in_axes {:?}, out_axes {:?}, axis_size {:?}, chunk_size {:?})",
            self.in_axes, self.out_axes, self.axis_size, self.chunk_size
        )
    }
}

/// Vectorizes `f` over a batch axis: `vmap(f)` called on arguments with a
/// leading batch axis returns `f` of each element, stacked.
///
/// Arguments and results may be trees (tuples, `Vec`s, maps, structs with
/// `#[derive(Tree)]`); `in_axes` and `out_axes` follow their structure (see
/// [`InAxes`]). `f` may use values of the function it is called in: they
/// are shared by every element.
///
/// ```
/// use anvil::prelude::*;
/// let xs = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let w = Tensor::from_vec(vec![1.0, 0.0, -1.0], &[3])?;
/// // One dot product per row of xs, with w shared.
/// let f = vmap(|x: &Var, w: &Var| (x * w).sum(&[0])).in_axes([Some(0), None]);
/// assert_eq!(f.eval((&xs, &w))?.to_vec::<f64>()?, vec![-2.0, -2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn vmap<M, F: IntoFunction<M>>(f: F) -> Vmap<F::Func> {
    Vmap {
        f: f.into_function(),
        in_axes: InAxes::all(Some(0)),
        out_axes: InAxes::all(Some(0)),
        axis_size: None,
        chunk_size: None,
        cache: PlanCache::new(),
    }
}

impl<F> Vmap<F> {
    /// Which axis of each argument is mapped; `None` shares the argument
    /// across the batch. Negative axes count from the end. A tree that is a
    /// prefix of the arguments' structure (see [`InAxes`]). Default: axis 0
    /// of every leaf.
    pub fn in_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.in_axes = axes.into();
        self
    }

    /// Where the batch axis goes in each result (default 0 for all), a
    /// tree that is a prefix of the result's structure (a one-entry list
    /// applies to every result); `None` returns a
    /// result that does not depend on the batch once, unbatched (an error
    /// for one that does).
    pub fn out_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.out_axes = axes.into();
        self
    }

    /// The batch size, required when no argument is mapped.
    pub fn axis_size(mut self, n: usize) -> Self {
        self.axis_size = Some(n);
        self
    }

    /// Evaluates the batch in chunks of `k` elements, one after another, to
    /// bound peak memory: intermediates of one chunk are freed before the
    /// next runs. Results are the same; work that does not depend on the
    /// batch is still done once.
    pub fn chunk_size(mut self, k: usize) -> Self {
        self.chunk_size = Some(k);
        self
    }
}

impl<F: Function> Function for Vmap<F> {
    type Args = F::Args;
    type Output = F::Output;

    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let axes = self.in_axes.broadcast("vmap in_axes", def)?;
        let (mut batched, size) = batch_args("vmap", def, args, &axes, self.axis_size)?;
        let elem_types: Vec<TensorType> = batched.iter().map(Batched::logical_type).collect();
        let t = trace_fn_for(&self.f, def, &elem_types, args)?;
        batched.extend(t.captures.iter().map(|c| Batched::new(c.clone(), None)));
        let outs = vmap_graph_chunked(&t.graph, &batched, size, self.chunk_size)?;
        let out_axes = self.out_axes.one_for_all().broadcast("vmap out_axes", &t.output)?;
        let leaves = outs
            .iter()
            .zip(out_axes)
            .enumerate()
            .map(|(i, (b, a))| place_batch_axis(b, a, size, i))
            .collect::<Result<_>>()?;
        Ok(Dyn { def: t.output, leaves })
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        format!("vmap({})", self.f.name())
    }
}

/// Result `i` with its batch axis moved to `axis` (`None`: no batch axis,
/// for a result that does not depend on the batch).
fn place_batch_axis(b: &Batched, axis: Option<i64>, size: usize, i: usize) -> Result<Var> {
    let Some(a) = axis else {
        return match b.axis {
            None => Ok(b.var.clone()),
            Some(_) => Err(Error::invalid(
                "vmap",
                format!("output {i} (out_axes)"),
                "is None, but the output depends on the batch",
            )),
        };
    };
    let rank = b.logical_rank() + 1;
    let to = anvil_core::shape::normalize_axis_rank(
        "vmap",
        a,
        rank,
        &b.logical_shape(),
        &format!("output {i} (out_axes)"),
    )?;
    if b.axis.is_none() {
        let mut shape = vec![size];
        shape.extend(b.logical_shape());
        TensorType::new(b.var.dtype(), shape).check_size("vmap").map_err(|_| {
            Error::invalid(
                "vmap",
                "axis_size",
                format!(
                    "{size}: output {i} of shape {:?} repeated {size} times has more elements than memory can address",
                    b.logical_shape()
                ),
            )
        })?;
    }
    // One move, from where the batch axis is to where it goes.
    Ok(match b.axis {
        Some(k) => move_axis(&b.var, k, to),
        None => move_axis(&at_front(b, size), 0, to),
    })
}
