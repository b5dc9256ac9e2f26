//! Higher-order ops: ops whose computation is a sub-graph.
//!
//! [`Map`] applies its body to every slice of its mapped inputs along axis 0
//! and stacks each of the body's results, like `jax.lax.map`. It is how
//! `vmap` batches an op that has no batching rule (a loop instead of a
//! batched kernel), and users call it directly through
//! `anvil::transforms::map`. The CPU backend runs it as a parallel loop.
//!
//! [`CustomJvpCall`] and [`CustomVjpCall`] are functions with user-given
//! derivatives (made by `anvil_transforms::custom_jvp` and `custom_vjp`).
//!
//! Each op's rules sit beside it. They transform the op's bodies with the
//! graph interpreters, which they reach through [`anvil_core::interp`]
//! (registered by `anvil-transforms`).
//!
//! Bodies are [`SubGraph`]s: equal bodies (by structure) make equal ops, so
//! CSE merges two identical loops and plan caches share their entries.

use crate::ad::dense;
use crate::api::VarExt;
use crate::batching::{at_front, move_axis};
use anvil_core::replay::{drop_unused_inputs, inline_graph, outputs, replay, value};
use anvil_core::{
    register_rule, trace_with, Batched, Error, Graph, LinearArg, NodeId, Op, Parameter, Result,
    SubGraph, TensorType, ValueId, Var,
};

/// Checks operand types against a body's input types, naming `op` and the
/// argument; `mapped[i]` operands carry a leading axis of `size` the body
/// does not see.
fn check_operands(
    op: &str,
    body: &Graph,
    inputs: &[TensorType],
    mapped: Option<(&[bool], usize)>,
) -> Result<()> {
    let want = body.input_types();
    if want.len() != inputs.len() {
        return Err(Error::Arity {
            what: op.into(),
            kind: "inputs".into(),
            expected: want.len(),
            got: inputs.len(),
        });
    }
    for (i, (t, w)) in inputs.iter().zip(&want).enumerate() {
        let is_mapped = mapped.is_some_and(|(m, _)| m[i]);
        let size = mapped.map_or(0, |(_, s)| s);
        let fits = if is_mapped {
            t.shape().first() == Some(&size) && t.shape()[1..] == *w.shape()
        } else {
            t.shape() == w.shape()
        };
        if !fits || t.dtype() != w.dtype() {
            let what = if is_mapped { format!("[{size}] ++ {w} (mapped)") } else { w.to_string() };
            return Err(Error::shape(
                op,
                &[t.shape(), w.shape()],
                format!("argument {i} is {t}, the body expects {what}"),
            ));
        }
    }
    Ok(())
}

/// Runs `body` on slice `i` (along axis 0) of every mapped input, for `i` in
/// `0..size`, with the unmapped inputs passed whole; result `k` stacks the
/// body's output `k` along a new axis 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Map {
    /// The per-element computation: one input per operand.
    pub body: SubGraph,
    /// Which operands are sliced along axis 0 (the others are shared).
    pub mapped: Vec<bool>,
    /// The number of iterations (the mapped operands' leading size).
    pub size: usize,
}

impl Op for Map {
    fn name(&self) -> &'static str {
        "map"
    }

    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        anvil_core::op::expect_arity(self, &self.mapped, self.body.inputs().len())?;
        check_operands("map", &self.body, inputs, Some((&self.mapped, self.size)))?;
        Ok(self
            .body
            .output_types()
            .iter()
            .map(|t| {
                let mut shape = vec![self.size];
                shape.extend_from_slice(t.shape());
                t.with_shape(shape)
            })
            .collect())
    }

    fn params(&self) -> String {
        let mapped: Vec<&str> = self.mapped.iter().map(|&m| if m { "0" } else { "-" }).collect();
        format!("size={}, in_axes=[{}]", self.size, mapped.join(","))
    }

    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.body.graph()]
    }

    fn with_subgraphs(&self, mut bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let body = bodies.pop().filter(|_| bodies.is_empty())?;
        Some(Box::new(Map { body: body.into(), ..self.clone() }))
    }
}

/// A function with a user-given forward-mode derivative
/// (`jax.custom_jvp`): computes `primal`; differentiation uses `jvp`, a
/// graph of `(primals..., tangents...)` whose outputs are the primal outputs
/// and then their tangents. Reverse mode transposes that tangent
/// computation, so it must be linear in the tangents.
///
/// The last `consts` operands are values the user's functions closed over:
/// they have no tangent in `jvp`'s inputs, and differentiating with
/// respect to them is an error (the rule does not say how), as in JAX.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomJvpCall {
    /// The function: `(primals..., consts...) -> outs`.
    pub primal: SubGraph,
    /// Its jvp: `(primals..., consts..., tangents of the primals...) ->
    /// (outs..., tangent outs...)`.
    pub jvp: SubGraph,
    /// How many trailing operands are closed-over values.
    pub consts: usize,
}

impl Op for CustomJvpCall {
    fn name(&self) -> &'static str {
        "custom_jvp_call"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        check_operands("custom_jvp_call", &self.primal, inputs, None)?;
        Ok(self.primal.output_types())
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.primal.graph(), self.jvp.graph()]
    }
    fn subgraph_label(&self, k: usize) -> String {
        if k == 0 { "function" } else { "jvp rule" }.into()
    }
    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let [primal, jvp]: [Graph; 2] = bodies.try_into().ok()?;
        Some(Box::new(CustomJvpCall {
            primal: primal.into(),
            jvp: jvp.into(),
            consts: self.consts,
        }))
    }
    fn params(&self) -> String {
        match self.consts {
            0 => String::new(),
            n => format!("consts={n}"),
        }
    }
}

/// A function with a user-given reverse-mode derivative
/// (`jax.custom_vjp`): computes `primal`; reverse mode runs `fwd`
/// (`primals -> (outs..., residuals...)`) and `bwd` (`(residuals...,
/// cotangents of the outs...) -> one cotangent per primal`). Forward mode
/// is not available, as in JAX.
///
/// The last `consts` operands are values the user's functions closed over:
/// `primal` and `fwd` take them after the primals, `bwd` before the
/// residuals; differentiating with respect to them is an error.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomVjpCall {
    /// The function: `(primals..., consts...) -> outs`.
    pub primal: SubGraph,
    /// `(primals..., consts...) -> (outs..., residuals...)`.
    pub fwd: SubGraph,
    /// `(consts..., residuals..., cts...) -> cotangents of the primals`.
    pub bwd: SubGraph,
    /// How many trailing operands are closed-over values.
    pub consts: usize,
}

impl Op for CustomVjpCall {
    fn name(&self) -> &'static str {
        "custom_vjp_call"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        check_operands("custom_vjp_call", &self.primal, inputs, None)?;
        Ok(self.primal.output_types())
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.primal.graph(), self.fwd.graph(), self.bwd.graph()]
    }
    fn subgraph_label(&self, k: usize) -> String {
        ["function", "fwd rule", "bwd rule"]
            .get(k)
            .map_or_else(|| format!("body {k}"), |s| s.to_string())
    }
    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let [primal, fwd, bwd]: [Graph; 3] = bodies.try_into().ok()?;
        let consts = self.consts;
        Some(Box::new(CustomVjpCall {
            primal: primal.into(),
            fwd: fwd.into(),
            bwd: bwd.into(),
            consts,
        }))
    }
    fn params(&self) -> String {
        match self.consts {
            0 => String::new(),
            n => format!("consts={n}"),
        }
    }
}

/// The tangents of a [`CustomVjpCall`]'s outputs, linear in the tangents of
/// its primals; it exists only to be transposed (by running `bwd`). Its
/// operands are the residuals, then one tangent per primal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomVjpTangent {
    /// `(residuals..., cts...) -> cotangents of the primals`.
    pub bwd: SubGraph,
    /// How many operands are residuals.
    pub residuals: usize,
    /// The results' types (those of the call's outputs).
    pub outs: Vec<TensorType>,
}

impl Op for CustomVjpTangent {
    fn name(&self) -> &'static str {
        "custom_vjp_tangent"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let primals = self.bwd.outputs().len();
        anvil_core::op::expect_arity(self, inputs, self.residuals + primals)?;
        Ok(self.outs.clone())
    }
    fn params(&self) -> String {
        format!("residuals={}", self.residuals)
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.bwd.graph()]
    }
    fn with_subgraphs(&self, mut bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let bwd = bodies.pop().filter(|_| bodies.is_empty())?;
        Some(Box::new(CustomVjpTangent { bwd: bwd.into(), ..self.clone() }))
    }
    fn linear_in(&self, k: usize) -> bool {
        k >= self.residuals
    }
}

// ------------------------------------------------------------------ map rules

/// Emits one `Map` node over `args` whose batch axis is 0 (mapped) or
/// absent (shared), returning one stacked value per output of `body`.
///
/// Work in the body that depends only on shared operands (loop-invariant)
/// is hoisted out and done once, before the loop: the values the loop needs
/// from it become extra shared operands. Operands the body does not read
/// are dropped.
pub fn emit_map(body: &Graph, args: &[Batched], size: usize) -> Result<Vec<Var>> {
    let (body, args) = hoist_invariants(body, args)?;
    let (body, kept) = drop_unused_inputs(&body)?;
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
    let varying: Vec<bool> = args.iter().map(|a| a.axis.is_some()).collect();
    let invariant: Vec<Option<Var>> =
        args.iter().map(|a| a.axis.is_none().then(|| a.var.clone())).collect();
    let Some((new_body, hoisted)) = hoist(body, &varying, &invariant)? else {
        return Ok((body.clone(), args.to_vec()));
    };
    let mut new_args = args.to_vec();
    new_args.extend(hoisted.into_iter().map(|h| Batched::new(h, None)));
    Ok((new_body, new_args))
}

/// Which values of `body` depend on an input marked `varying`.
pub fn varying_values(body: &Graph, varying: &[bool]) -> Vec<bool> {
    let mut variant = vec![false; body.num_values()];
    for (&input, &v) in body.inputs().iter().zip(varying) {
        variant[input.index()] = v;
    }
    for (_, node) in body.iter() {
        if node.inputs.iter().any(|i| variant[i.index()]) {
            node.results().for_each(|v| variant[v.index()] = true);
        }
    }
    variant
}

/// Loop-invariant code motion: the values of `body` that depend on no
/// `varying` input (and are not constants or inputs themselves) but are
/// read by varying nodes or returned, computed once in the caller's trace
/// from the `invariant` inputs' values, and `body` rewritten to read them
/// as extra inputs after its own. `None` when there is nothing to hoist.
///
/// # Errors
/// An invalid body; a missing invariant input value.
pub fn hoist(
    body: &Graph,
    varying: &[bool],
    invariant: &[Option<Var>],
) -> Result<Option<(Graph, Vec<Var>)>> {
    let variant = varying_values(body, varying);
    let varies = |id: NodeId| body.node(id).results().any(|v| variant[v.index()]);
    let hoistable = |v: ValueId| {
        let node = body.producer_node(v);
        !variant[v.index()] && !node.inputs.is_empty() && !node.op.is::<Parameter>()
    };
    let read_by_loop = body.iter().filter(|(id, _)| varies(*id)).flat_map(|(_, n)| n.inputs.iter());
    let mut frontier: Vec<ValueId> = Vec::new();
    for &v in read_by_loop.chain(body.outputs()) {
        if hoistable(v) && !frontier.contains(&v) {
            frontier.push(v);
        }
    }
    if frontier.is_empty() {
        return Ok(None);
    }
    // The invariant values, once, from the invariant inputs.
    let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
    for (&input, a) in body.inputs().iter().zip(invariant) {
        env[input.index()] = a.clone();
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
    Ok(Some((new_body, hoisted)))
}

/// `body` vmapped: a graph over inputs with a leading batch of `size` where
/// `axes[i]` is `Some(0)`, returning every output batched along axis 0.
pub fn vmapped_body(body: &Graph, axes: &[Option<usize>], size: usize) -> Result<Graph> {
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
        let outs = anvil_core::interp::vmap_graph(body, &args, size)?;
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
pub fn batch_in_front(args: &[Batched], size: usize) -> Vec<Batched> {
    args.iter()
        .map(|b| match b.axis {
            Some(_) => Batched::new(at_front(b, size), Some(0)),
            None => b.clone(),
        })
        .collect()
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
        let (outs, touts) = anvil_core::interp::jvp_graph(&m.body, &vars[..n], &ts)?;
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
        let (_, in_cts) = anvil_core::interp::transpose_graph(&m.body, &linear, &known, &body_cts)?;
        let like = &vars[known_idx.len()];
        // One output per linear operand, zeros where the cotangent is zero.
        Ok((0..args.len())
            .filter(|&i| linear[i])
            .map(|i| in_cts[i].clone().unwrap_or_else(|| crate::ad::zeros(like, &body_in[i])))
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

// ---------------------------------------------------- custom derivative rules

/// The user's jvp, inlined.
fn jvp_custom_jvp(
    op: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<CustomJvpCall>()?;
    let n = no_tangent_on_consts(op, p, t, c.consts)?;
    let mut args = p.to_vec();
    args.extend(p[..n].iter().zip(t).map(|(p, t)| dense(t, p)));
    Ok(inline_graph(&c.jvp, &args)?.split_off(outs.len()).into_iter().map(Some).collect())
}

/// The number of operands that are primals (the rest are closed-over
/// values), checking that those have no tangent.
fn no_tangent_on_consts(op: &dyn Op, p: &[Var], t: &[Option<Var>], consts: usize) -> Result<usize> {
    let n = p.len().saturating_sub(consts);
    if t[n.min(t.len())..].iter().any(Option::is_some) {
        return Err(Error::invalid(
            op.name(),
            "closed-over value",
            "is differentiated, but the custom rule only says how to differentiate with \
             respect to the function's arguments: pass the value as an argument",
        ));
    }
    Ok(n)
}

/// The function and its jvp, both batched (tangents batched like their primals).
fn vmap_custom_jvp(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let c = op.try_downcast::<CustomJvpCall>()?;
    let axes: Vec<Option<usize>> = args.iter().map(|b| b.axis.map(|_| 0)).collect();
    let primal = vmapped_body(&c.primal, &axes, size)?;
    let n = axes.len() - c.consts;
    let jvp = vmapped_body(&c.jvp, &[&axes[..], &axes[..n]].concat(), size)?;
    let vars: Vec<Var> = args
        .iter()
        .map(|b| if b.axis.is_some() { at_front(b, size) } else { b.var.clone() })
        .collect();
    let refs: Vec<&Var> = vars.iter().collect();
    let n = primal.outputs().len();
    let op = CustomJvpCall { primal: primal.into(), jvp: jvp.into(), consts: c.consts };
    Ok(Var::apply_op_n(Box::new(op), &refs, n)
        .into_iter()
        .map(|v| Batched::new(v, Some(0)))
        .collect())
}

register_rule!(JvpRule, CustomJvpCall, many: jvp_custom_jvp);
register_rule!(VmapRule, CustomJvpCall, many: vmap_custom_jvp);

/// Residuals from `fwd`, then a tangent node that only reverse mode can use.
fn jvp_custom_vjp(
    op: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<CustomVjpCall>()?;
    if t.iter().all(Option::is_none) {
        return Ok(vec![None; outs.len()]);
    }
    let n = no_tangent_on_consts(op, p, t, c.consts)?;
    let mut operands: Vec<Var> = p[n..].to_vec();
    operands.extend(inline_graph(&c.fwd, p)?.split_off(outs.len()));
    let residuals = operands.len();
    operands.extend(p[..n].iter().zip(t).map(|(p, t)| dense(t, p)));
    let refs: Vec<&Var> = operands.iter().collect();
    let types = outs.iter().map(|o| o.ty().clone()).collect();
    let op = CustomVjpTangent { bwd: c.bwd.clone(), residuals, outs: types };
    Ok(Var::apply_op_n(Box::new(op), &refs, outs.len()).into_iter().map(Some).collect())
}

/// The transpose of the tangent node is the user's `bwd` (zero cotangents
/// where an output has none).
fn transpose_custom_vjp(
    op: &dyn Op,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<CustomVjpTangent>()?;
    let mut inputs = args[..c.residuals]
        .iter()
        .map(|a| {
            a.known()
                .cloned()
                .ok_or_else(|| Error::invalid(op.name(), "transpose", "residuals must be known"))
        })
        .collect::<Result<Vec<Var>>>()?;
    let like = inputs.first().or_else(|| cts.iter().flatten().next()).cloned();
    for (ct, ty) in cts.iter().zip(&c.outs) {
        inputs.push(match (ct, &like) {
            (Some(ct), _) => ct.clone(),
            (None, Some(l)) => crate::ad::zeros(l, ty),
            (None, None) => return Err(Error::invalid(op.name(), "transpose", "no cotangent")),
        });
    }
    let cts = inline_graph(&c.bwd, &inputs)?;
    let mut out: Vec<Option<Var>> = vec![None; c.residuals];
    out.extend(args[c.residuals..].iter().zip(cts).map(|(a, ct)| a.is_linear().then_some(ct)));
    Ok(out)
}

register_rule!(JvpRule, CustomVjpCall, many: jvp_custom_vjp);
register_rule!(VmapRule, CustomVjpCall, many: map_loop_many);
register_rule!(TransposeRule, CustomVjpTangent, many: transpose_custom_vjp);
register_rule!(VmapRule, CustomVjpTangent, many: map_loop_many);

// -------------------------------------------------------------- sparsity
//
// Loops and conditionals compose their bodies the same way: a loop's carry
// is composed with its body until its sets stop growing (a fixpoint), a
// conditional takes the union over its branches (see anvil_core::sparsity).

/// `map`: the body's own pattern over one slice, composed with every
/// iteration's slices of the mapped operands (and the shared ones whole).
fn sparsity_map(
    op: &dyn Op,
    args: &[anvil_core::SparsityArg<'_>],
    _: &[TensorType],
    cx: &anvil_core::Detector<'_>,
) -> Result<Vec<std::sync::Arc<anvil_core::IndexSets>>> {
    let m = op.try_downcast::<Map>()?;
    cx.compose_body(op, &m.body, args, Some((&m.mapped, m.size)))
}

register_rule!(SparsityRule, Map, many: sparsity_map);
