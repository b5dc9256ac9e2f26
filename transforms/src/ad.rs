//! Automatic differentiation over graphs: forward mode ([`jvp_graph`]) and
//! reverse mode as the transpose of forward mode's linear part
//! ([`vjp_graph`]), as in JAX.
//!
//! **Forward mode** walks the graph in order with a primal value and an
//! optional tangent per node. `None` is a symbolic zero: a node whose inputs
//! carry no tangent is copied as it is and costs nothing more, and an input
//! without a tangent adds no node to the tangent computation. A node with
//! tangents goes through its op's registered [`JvpRule`](anvil_core::JvpRule).
//! Nodes with non-float results (comparisons, `argmax`, integer casts) never
//! carry a tangent.
//!
//! **Reverse mode** traces the jvp of the function with fresh tangent inputs
//! into a separate graph, whose nodes split into *known* ones (they depend
//! only on the primals) and *linear* ones (they depend on the tangents, and
//! linearly, since jvp rules are linear in tangents). The known nodes are
//! evaluated once; the linear ones are walked backwards, each through its
//! op's [`TransposeRule`](anvil_core::TransposeRule), accumulating
//! cotangents ([`transpose_graph`]). No op needs a hand-written vjp rule:
//! only the ops jvp rules emit on tangents (add, mul by a known value,
//! movement ops, sums, matmul, take/scatter_add, select, cast...) need a
//! transpose rule.

use anvil_core::replay::{bind, bound_inputs, outputs, replay, value};
use anvil_core::{
    jvp_rules, trace_with, transpose_rules, Error, Graph, LinearArg, Op, Result, TensorType,
    ValueId, Var,
};
use anvil_ops::ad::dense;

/// A rule's result must have the value's type; anything else is a bug in
/// the rule, reported with the op's name and the transform.
fn check_type(what: &str, op: &dyn Op, v: &Var, ty: &TensorType) -> Result<()> {
    if v.is_poisoned() || v.ty() == ty {
        Ok(())
    } else {
        Err(Error::invalid(op.name(), what, format!("returned {}; expected {ty}", v.ty())))
    }
}

/// A rule must give one entry per result (or per argument).
fn check_count<T>(what: &str, op: &dyn Op, got: &[T], expected: usize) -> Result<()> {
    if got.len() == expected {
        Ok(())
    } else {
        Err(Error::invalid(
            op.name(),
            what,
            format!("returned {} entries; expected {expected}", got.len()),
        ))
    }
}

/// Forward mode: emits `graph` on `primals` into their trace, with the
/// tangents of its outputs given tangents of its inputs (`None`: zero).
///
/// # Errors
/// An op without a jvp rule on the path of a tangent (naming the op); a
/// rule's error; a tangent whose type differs from its primal's.
pub fn jvp_graph(
    graph: &Graph,
    primals: &[Var],
    tangents: &[Option<Var>],
) -> Result<(Vec<Var>, Vec<Option<Var>>)> {
    anvil_core::stats::count_transform();
    anvil_core::function::check_arity("jvp", Some(graph.inputs().len()), primals.len())?;
    anvil_core::function::check_arity("jvp tangents", Some(primals.len()), tangents.len())?;
    let mut env = bound_inputs(graph, primals);
    let mut tan: Vec<Option<Var>> = vec![None; graph.num_values()];
    for (i, ((&input, p), t)) in graph.inputs().iter().zip(primals).zip(tangents).enumerate() {
        if let Some(t) = t {
            if t.ty() != p.ty() {
                return Err(Error::shape(
                    "jvp",
                    &[p.shape(), t.shape()],
                    format!("the tangent of argument {i} is {}, its primal is {}", t.ty(), p.ty()),
                ));
            }
        }
        tan[input.index()] = t.clone().filter(|_| p.dtype().is_float());
    }
    for (_, node) in graph.iter() {
        if node.op.parameter_index().is_some() {
            continue;
        }
        let ins: Vec<Var> = node.inputs.iter().map(|&i| value(&env, i)).collect::<Result<_>>()?;
        let refs: Vec<&Var> = ins.iter().collect();
        let outs = Var::apply_op_n(node.op.boxed(), &refs, node.num_results());
        let ts: Vec<Option<Var>> = node.inputs.iter().map(|i| tan[i.index()].clone()).collect();
        let any_float = node.results().any(|v| graph.ty(v).dtype().is_float());
        if ts.iter().any(Option::is_some) && any_float {
            let hint =
                " (register one with register_rule!(JvpRule, ...), or stop_gradient the input)";
            let rule = jvp_rules().get(node.op.as_ref(), hint)?;
            let touts = rule.apply(node.op.as_ref(), &ins, &ts, &outs)?;
            check_count("jvp rule", node.op.as_ref(), &touts, node.num_results())?;
            for (v, t) in node.results().zip(touts) {
                if let Some(t) = &t {
                    check_type("jvp rule", node.op.as_ref(), t, graph.ty(v))?;
                }
                tan[v.index()] = t.filter(|_| graph.ty(v).dtype().is_float());
            }
        }
        bind(&mut env, node, outs);
    }
    let touts = graph.outputs().iter().map(|o| tan[o.index()].clone()).collect();
    Ok((outputs(graph, &env)?, touts))
}

pub use anvil_core::interp::Transposed;

/// Which values of `graph` depend on an input marked `linear`.
fn linear_values(graph: &Graph, linear: &[bool]) -> Vec<bool> {
    let mut is_linear = vec![false; graph.num_values()];
    for (&input, &l) in graph.inputs().iter().zip(linear) {
        is_linear[input.index()] = l;
    }
    for (_, node) in graph.iter() {
        if node.inputs.iter().any(|i| is_linear[i.index()]) {
            for v in node.results() {
                is_linear[v.index()] = true;
            }
        }
    }
    is_linear
}

/// Transposes the part of `graph` that is linear in the inputs marked
/// `linear`, emitting into the trace of `known`.
///
/// `known[i]` is the value of input `i` when it is not linear (ignored
/// otherwise). Nodes that do not depend on a linear input are evaluated
/// from the known values; `cts[k]` is the cotangent of output `k` (`None`:
/// zero; ignored for an output that is not linear). Returns the values of
/// the outputs that are not linear (`None` for linear ones) and the
/// cotangent of every linear input (`None`: zero).
///
/// # Errors
/// An op on the linear path without a transpose rule (naming the op); a
/// rule's error, including an op that is not linear where it is used.
pub fn transpose_graph(
    graph: &Graph,
    linear: &[bool],
    known: &[Option<Var>],
    cts: &[Option<Var>],
) -> Result<Transposed> {
    anvil_core::stats::count_transform();
    let n = graph.inputs().len();
    anvil_core::function::check_arity("transpose", Some(n), linear.len())?;
    anvil_core::function::check_arity("transpose", Some(n), known.len())?;
    let is_linear = linear_values(graph, linear);
    let env = known_part(graph, linear, known, &is_linear)?;
    let mut acc = Cotangents(vec![None; graph.num_values()]);
    for (&o, ct) in graph.outputs().iter().zip(cts) {
        if let (true, Some(ct)) = (is_linear[o.index()], ct) {
            if ct.ty() != graph.ty(o) && !ct.is_poisoned() {
                return Err(Error::shape(
                    "vjp",
                    &[ct.shape(), graph.ty(o).shape()],
                    format!("the cotangent {} does not match its output {}", ct.ty(), graph.ty(o)),
                ));
            }
            acc.add(o, ct.clone());
        }
    }
    for (_, node) in graph.iter().rev() {
        if node.op.parameter_index().is_none() && node.results().any(|v| is_linear[v.index()]) {
            transpose_node(graph, node, &is_linear, &env, &mut acc)?;
        }
    }
    let outs = graph.outputs().iter().map(|o| env[o.index()].clone()).collect();
    let in_cts = graph
        .inputs()
        .iter()
        .zip(linear)
        .map(|(i, &l)| if l { acc.0[i.index()].clone() } else { None })
        .collect();
    Ok((outs, in_cts))
}

/// The values of the nodes that depend on no linear input, from the known
/// inputs' values.
fn known_part(
    graph: &Graph,
    linear: &[bool],
    known: &[Option<Var>],
    is_linear: &[bool],
) -> Result<Vec<Option<Var>>> {
    let mut env: Vec<Option<Var>> = vec![None; graph.num_values()];
    for (i, &input) in graph.inputs().iter().enumerate() {
        if !linear[i] {
            env[input.index()] = Some(known[i].clone().ok_or_else(|| {
                Error::invalid("transpose", i.to_string(), "a non-linear input needs its value")
            })?);
        }
    }
    replay(graph, &mut env, |id| !graph.node(id).results().any(|v| is_linear[v.index()]))?;
    Ok(env)
}

/// The cotangents accumulated so far, one slot per value (`None`: zero).
struct Cotangents(Vec<Option<Var>>);

impl Cotangents {
    fn add(&mut self, v: ValueId, c: Var) {
        let slot = &mut self.0[v.index()];
        *slot = Some(match slot.take() {
            Some(acc) => acc + c,
            None => c,
        });
    }
}

/// Moves the cotangents of `node`'s results to its linear operands, through
/// the op's transpose rule.
fn transpose_node(
    graph: &Graph,
    node: &anvil_core::Node,
    is_linear: &[bool],
    env: &[Option<Var>],
    acc: &mut Cotangents,
) -> Result<()> {
    let node_cts: Vec<Option<Var>> = node.results().map(|v| acc.0[v.index()].take()).collect();
    if node_cts.iter().all(Option::is_none) {
        return Ok(());
    }
    let args: Vec<LinearArg> = node
        .inputs
        .iter()
        .map(|&i| {
            if is_linear[i.index()] {
                Ok(LinearArg::Linear(graph.ty(i).clone()))
            } else {
                value(env, i).map(LinearArg::Known)
            }
        })
        .collect::<Result<_>>()?;
    let op = node.op.as_ref();
    let rule =
        transpose_rules().get(op, " (register one with register_rule!(TransposeRule, ...))")?;
    let in_cts = rule.apply(op, &node_cts, &args)?;
    check_count("transpose rule", op, &in_cts, node.inputs.len())?;
    for (&i, c) in node.inputs.iter().zip(in_cts) {
        if let (true, Some(c)) = (is_linear[i.index()], c) {
            check_type("transpose rule", op, &c, graph.ty(i))?;
            acc.add(i, c);
        }
    }
    Ok(())
}

/// The jvp of `graph` as a graph of its own: inputs are the primals, then
/// one tangent per primal marked in `wrt` (those must be float); outputs
/// are the outputs, then their tangents (zeros where symbolic: those stay
/// known, not linear).
fn jvp_trace(graph: &Graph, primal_types: &[TensorType], wrt: &[bool]) -> Result<Graph> {
    let n = primal_types.len();
    let mut types = primal_types.to_vec();
    types.extend(primal_types.iter().zip(wrt).filter(|(_, &w)| w).map(|(t, _)| t.clone()));
    trace_with(&types, |vars| {
        let mut next = n;
        let ts: Vec<Option<Var>> = wrt
            .iter()
            .map(|&w| {
                w.then(|| {
                    next += 1;
                    vars[next - 1].clone()
                })
            })
            .collect();
        let (outs, touts) = jvp_graph(graph, &vars[..n], &ts)?;
        let touts: Vec<Var> = touts.iter().zip(&outs).map(|(t, o)| dense(t, o)).collect();
        Ok(outs.into_iter().chain(touts).collect())
    })
}

/// Which primals of these types are float (can be differentiated).
fn float_mask(types: &[TensorType]) -> Vec<bool> {
    types.iter().map(|t| t.dtype().is_float()).collect()
}

/// A function split into its primal part and its linear part, as
/// `jax.linearize` does; see [`linearize_graph`].
#[derive(Clone, Debug)]
pub struct Linearization {
    /// `primals -> (outputs..., residuals...)`.
    pub primal: Graph,
    /// `(residuals..., tangents of the float primals...) -> output tangents`,
    /// linear in the tangents.
    pub linear: Graph,
    /// The number of outputs of the function (the residuals follow them in
    /// `primal`'s outputs).
    pub outputs: usize,
}

/// Splits the jvp of `graph` at primals of types `primal_types` into the
/// part that depends only on the primals (run once) and the part that is
/// linear in the tangents; the values passed from the first to the second
/// are the residuals. Evaluating `primal` and then `linear` on any tangents
/// gives the jvp without recomputing the primal.
///
/// # Errors
/// As [`jvp_graph`].
pub fn linearize_graph(graph: &Graph, primal_types: &[TensorType]) -> Result<Linearization> {
    let n = primal_types.len();
    let lin = jvp_trace(graph, primal_types, &float_mask(primal_types))?;
    let m = graph.outputs().len();
    let marks: Vec<bool> = (0..lin.inputs().len()).map(|k| k >= n).collect();
    let is_linear = linear_values(&lin, &marks);
    let linear_node = |id: anvil_core::NodeId| lin.node(id).results().any(|v| is_linear[v.index()]);
    // Residuals: known values read by linear nodes, or returned as tangents.
    let mut residual: Vec<ValueId> = Vec::new();
    let mut note = |v: ValueId| {
        if !is_linear[v.index()] && !residual.contains(&v) {
            residual.push(v);
        }
    };
    for (id, node) in lin.iter() {
        if linear_node(id) && node.op.parameter_index().is_none() {
            node.inputs.iter().for_each(|&i| note(i));
        }
    }
    lin.outputs()[m..].iter().for_each(|&o| note(o));
    let primal = trace_with(primal_types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; lin.num_values()];
        for (k, &input) in lin.inputs().iter().enumerate().take(n) {
            env[input.index()] = Some(vars[k].clone());
        }
        replay(&lin, &mut env, |id| !linear_node(id))?;
        lin.outputs()[..m].iter().chain(&residual).map(|&o| value(&env, o)).collect()
    })?;
    let mut types: Vec<TensorType> = residual.iter().map(|&r| lin.ty(r).clone()).collect();
    types.extend(lin.input_types()[n..].iter().cloned());
    let linear = trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; lin.num_values()];
        for (k, &r) in residual.iter().enumerate() {
            env[r.index()] = Some(vars[k].clone());
        }
        for (k, &input) in lin.inputs().iter().enumerate().skip(n) {
            env[input.index()] = Some(vars[residual.len() + k - n].clone());
        }
        replay(&lin, &mut env, linear_node)?;
        lin.outputs()[m..].iter().map(|&o| value(&env, o)).collect()
    })?;
    Ok(Linearization { primal, linear, outputs: m })
}

/// Reverse mode: emits `graph` on `primals`, and the cotangent of every
/// input given cotangents of the outputs (`None`: zero). Returns the
/// outputs and the input cotangents (`None`: zero, or an input that is not
/// a float and so has no cotangent).
///
/// # Errors
/// As [`jvp_graph`] and [`transpose_graph`].
pub fn vjp_graph(
    graph: &Graph,
    primals: &[Var],
    cts: &[Option<Var>],
) -> Result<(Vec<Var>, Vec<Option<Var>>)> {
    let types: Vec<TensorType> = primals.iter().map(|p| p.ty().clone()).collect();
    vjp_graph_wrt(graph, primals, cts, &float_mask(&types))
}

/// [`vjp_graph`] with respect to the primals marked in `wrt` only (float
/// ones): the others are constants of the derivative, as the arguments not
/// in a `grad`'s `argnums` are in JAX, and get no cotangent (`None`).
///
/// # Errors
/// As [`vjp_graph`].
pub fn vjp_graph_wrt(
    graph: &Graph,
    primals: &[Var],
    cts: &[Option<Var>],
    wrt: &[bool],
) -> Result<(Vec<Var>, Vec<Option<Var>>)> {
    let n = primals.len();
    anvil_core::function::check_arity("vjp", Some(graph.inputs().len()), n)?;
    anvil_core::function::check_arity("vjp cotangents", Some(graph.outputs().len()), cts.len())?;
    let primal_types: Vec<TensorType> = primals.iter().map(|p| p.ty().clone()).collect();
    let wrt: Vec<bool> =
        wrt.iter().zip(&primal_types).map(|(&w, t)| w && t.dtype().is_float()).collect();
    let lin = jvp_trace(graph, &primal_types, &wrt)?;
    let m = graph.outputs().len();
    let types = lin.input_types();
    let linear: Vec<bool> = (0..types.len()).map(|i| i >= n).collect();
    let known: Vec<Option<Var>> =
        primals.iter().cloned().map(Some).chain((n..types.len()).map(|_| None)).collect();
    let mut all_cts: Vec<Option<Var>> = vec![None; m];
    all_cts.extend(cts.iter().cloned());
    let (outs, in_cts) = transpose_graph(&lin, &linear, &known, &all_cts)?;
    let outs: Vec<Var> = outs[..m]
        .iter()
        .enumerate()
        .map(|(k, o)| {
            o.clone().ok_or_else(|| Error::InvalidGraph {
                node: k,
                msg: "a primal output depends on a tangent".into(),
            })
        })
        .collect::<Result<_>>()?;
    let mut tangent_cts = in_cts[n..].iter();
    let in_cts =
        wrt.iter().map(|&w| if w { tangent_cts.next().cloned().flatten() } else { None }).collect();
    Ok((outs, in_cts))
}

/// The transpose of the linear part of a [`Linearization`]: a graph of
/// `(residuals..., output cotangents...)` returning the cotangent of every
/// primal of types `primal_types` (zeros for integer primals and where the
/// outputs do not depend on a primal). What a pullback runs.
///
/// # Errors
/// As [`transpose_graph`].
pub fn transpose_linear(
    linear: &Graph,
    residuals: usize,
    primal_types: &[TensorType],
) -> Result<Graph> {
    let n_in = linear.inputs().len();
    let mut types: Vec<TensorType> = linear.input_types()[..residuals].to_vec();
    types.extend(linear.output_types());
    trace_with(&types, |vars| {
        let (res, cts) = vars.split_at(residuals);
        let is_linear: Vec<bool> = (0..n_in).map(|k| k >= residuals).collect();
        let known: Vec<Option<Var>> = (0..n_in).map(|k| res.get(k).cloned()).collect();
        let cts: Vec<Option<Var>> = cts.iter().cloned().map(Some).collect();
        let (_, in_cts) = transpose_graph(linear, &is_linear, &known, &cts)?;
        let like = vars.first().cloned();
        let mut float_cts = in_cts[residuals..].iter();
        primal_types
            .iter()
            .map(|t| {
                let ct =
                    if t.dtype().is_float() { float_cts.next().cloned().flatten() } else { None };
                match (ct, &like) {
                    (Some(ct), _) => Ok(ct),
                    (None, Some(l)) => Ok(anvil_ops::ad::zeros(l, t)),
                    (None, None) => Ok(anvil_ops::full_scalar(
                        t.shape(),
                        anvil_core::Scalar::F64(0.0).cast(t.dtype()),
                    )),
                }
            })
            .collect()
    })
}
