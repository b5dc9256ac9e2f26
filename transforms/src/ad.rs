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

use crate::replay::{replay, value};
use anvil_core::{
    jvp_rules, trace_with, transpose_rules, Error, Graph, LinearArg, Op, Parameter, Result,
    TensorType, Var,
};
use anvil_ops::ad::dense;

fn missing(env: &[Option<Var>], id: anvil_core::NodeId) -> Result<Var> {
    env[id.index()]
        .clone()
        .ok_or_else(|| Error::InvalidGraph { node: id.index(), msg: "input not computed".into() })
}

/// A rule's result must have the node's type; anything else is a bug in the
/// rule, reported with the op's name and the transform.
fn check_type(what: &str, op: &dyn Op, v: &Var, ty: &TensorType) -> Result<()> {
    if v.is_poisoned() || (v.shape() == &ty.shape[..] && v.dtype() == ty.dtype) {
        Ok(())
    } else {
        Err(Error::invalid(op.name(), what, format!("returned {}; expected {ty}", v.ty())))
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
    anvil_core::function::check_arity("jvp", Some(graph.inputs().len()), primals.len())?;
    anvil_core::function::check_arity("jvp tangents", Some(primals.len()), tangents.len())?;
    let mut env: Vec<Option<Var>> = vec![None; graph.len()];
    let mut tan: Vec<Option<Var>> = vec![None; graph.len()];
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
        env[input.index()] = Some(p.clone());
        tan[input.index()] = t.clone().filter(|_| p.dtype().is_float());
    }
    for (id, node) in graph.iter() {
        if node.op.is::<Parameter>() {
            continue;
        }
        let ins: Vec<Var> = node.inputs.iter().map(|&i| missing(&env, i)).collect::<Result<_>>()?;
        let refs: Vec<&Var> = ins.iter().collect();
        let out = Var::apply_op(node.op.boxed(), &refs);
        let ts: Vec<Option<Var>> = node.inputs.iter().map(|i| tan[i.index()].clone()).collect();
        if ts.iter().any(Option::is_some) && node.ty.dtype.is_float() {
            let hint =
                " (register one with register_rule!(JvpRule, ...), or stop_gradient the input)";
            let rule = jvp_rules().get(node.op.as_ref(), hint)?;
            let t = (rule.rule)(node.op.as_ref(), &ins, &ts, &out)?;
            if let Some(t) = &t {
                check_type("jvp rule", node.op.as_ref(), t, &node.ty)?;
            }
            tan[id.index()] = t;
        }
        env[id.index()] = Some(out);
    }
    let outs = graph.outputs().iter().map(|&o| missing(&env, o)).collect::<Result<_>>()?;
    let touts = graph.outputs().iter().map(|o| tan[o.index()].clone()).collect();
    Ok((outs, touts))
}

/// The result of [`transpose_graph`]: the values of the outputs that are not
/// linear (`None` for linear ones), and the cotangent of every linear input
/// (`None`: zero, and for inputs that are not linear).
pub type Transposed = (Vec<Option<Var>>, Vec<Option<Var>>);

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
    let n = graph.inputs().len();
    anvil_core::function::check_arity("transpose", Some(n), linear.len())?;
    anvil_core::function::check_arity("transpose", Some(n), known.len())?;
    let mut is_linear = vec![false; graph.len()];
    let mut env: Vec<Option<Var>> = vec![None; graph.len()];
    for (i, &input) in graph.inputs().iter().enumerate() {
        if linear[i] {
            is_linear[input.index()] = true;
        } else {
            env[input.index()] = Some(known[i].clone().ok_or_else(|| {
                Error::invalid("transpose", i.to_string(), "a non-linear input needs its value")
            })?);
        }
    }
    // Forward: the known part.
    for (id, node) in graph.iter() {
        if node.op.is::<Parameter>() {
            continue;
        }
        if node.inputs.iter().any(|i| is_linear[i.index()]) {
            is_linear[id.index()] = true;
            continue;
        }
        let ins: Vec<Var> = node.inputs.iter().map(|&i| missing(&env, i)).collect::<Result<_>>()?;
        let refs: Vec<&Var> = ins.iter().collect();
        env[id.index()] = Some(Var::apply_op(node.op.boxed(), &refs));
    }
    // Backward: cotangents of the linear part.
    let mut ct_env: Vec<Option<Var>> = vec![None; graph.len()];
    let accumulate = |ct_env: &mut Vec<Option<Var>>, id: usize, c: Var| {
        ct_env[id] = Some(match ct_env[id].take() {
            Some(acc) => acc + c,
            None => c,
        });
    };
    for (&o, ct) in graph.outputs().iter().zip(cts) {
        if let (true, Some(ct)) = (is_linear[o.index()], ct) {
            if ct.ty() != graph.ty(o) && !ct.is_poisoned() {
                return Err(Error::shape(
                    "vjp",
                    &[ct.shape(), &graph.ty(o).shape],
                    format!("the cotangent {} does not match its output {}", ct.ty(), graph.ty(o)),
                ));
            }
            accumulate(&mut ct_env, o.index(), ct.clone());
        }
    }
    for (id, node) in graph.iter().collect::<Vec<_>>().into_iter().rev() {
        if !is_linear[id.index()] || node.op.is::<Parameter>() {
            continue;
        }
        let Some(ct) = ct_env[id.index()].take() else { continue };
        let args: Vec<LinearArg> = node
            .inputs
            .iter()
            .map(|&i| {
                if is_linear[i.index()] {
                    Ok(LinearArg::Linear(graph.ty(i).clone()))
                } else {
                    missing(&env, i).map(LinearArg::Known)
                }
            })
            .collect::<Result<_>>()?;
        let hint = " (register one with register_rule!(TransposeRule, ...))";
        let rule = transpose_rules().get(node.op.as_ref(), hint)?;
        let in_cts = (rule.rule)(node.op.as_ref(), &ct, &args)?;
        anvil_core::op::expect_arity(node.op.as_ref(), &in_cts, node.inputs.len())?;
        for (&i, c) in node.inputs.iter().zip(in_cts) {
            if let (true, Some(c)) = (is_linear[i.index()], c) {
                check_type("transpose rule", node.op.as_ref(), &c, graph.ty(i))?;
                accumulate(&mut ct_env, i.index(), c);
            }
        }
    }
    let outs = graph.outputs().iter().map(|o| env[o.index()].clone()).collect();
    let in_cts = graph
        .inputs()
        .iter()
        .zip(linear)
        .map(|(i, &l)| if l { ct_env[i.index()].clone() } else { None })
        .collect();
    Ok((outs, in_cts))
}

/// The jvp of `graph` as a graph of its own: inputs are the primals, then
/// one tangent per float primal; outputs are the outputs, then their
/// tangents (zeros where symbolic: those stay known, not linear). Also
/// returns which primals are float.
fn jvp_trace(graph: &Graph, primal_types: &[TensorType]) -> Result<(Graph, Vec<bool>)> {
    let n = primal_types.len();
    let float: Vec<bool> = primal_types.iter().map(|t| t.dtype.is_float()).collect();
    let mut types = primal_types.to_vec();
    types.extend(primal_types.iter().filter(|t| t.dtype.is_float()).cloned());
    let lin = trace_with(&types, |vars| {
        let mut next = n;
        let ts: Vec<Option<Var>> = float
            .iter()
            .map(|&f| {
                f.then(|| {
                    next += 1;
                    vars[next - 1].clone()
                })
            })
            .collect();
        let (outs, touts) = jvp_graph(graph, &vars[..n], &ts)?;
        let touts: Vec<Var> = touts.iter().zip(&outs).map(|(t, o)| dense(t, o)).collect();
        Ok(outs.into_iter().chain(touts).collect())
    })?;
    Ok((lin, float))
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
    let (lin, _) = jvp_trace(graph, primal_types)?;
    let m = graph.outputs().len();
    let mut is_linear = vec![false; lin.len()];
    for (k, &input) in lin.inputs().iter().enumerate() {
        is_linear[input.index()] = k >= n;
    }
    for (id, node) in lin.iter() {
        if node.inputs.iter().any(|i| is_linear[i.index()]) {
            is_linear[id.index()] = true;
        }
    }
    // Residuals: known values read by linear nodes, or returned as tangents.
    let mut residual: Vec<anvil_core::NodeId> = Vec::new();
    let mut note = |id: anvil_core::NodeId| {
        if !is_linear[id.index()] && !residual.contains(&id) {
            residual.push(id);
        }
    };
    for (id, node) in lin.iter() {
        if is_linear[id.index()] && !node.op.is::<Parameter>() {
            node.inputs.iter().for_each(|&i| note(i));
        }
    }
    lin.outputs()[m..].iter().for_each(|&o| note(o));
    let primal = trace_with(primal_types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; lin.len()];
        for (k, &input) in lin.inputs().iter().enumerate().take(n) {
            env[input.index()] = Some(vars[k].clone());
        }
        replay(&lin, &mut env, |id| !is_linear[id.index()])?;
        lin.outputs()[..m].iter().chain(&residual).map(|&o| value(&env, o)).collect()
    })?;
    let mut types: Vec<TensorType> = residual.iter().map(|&r| lin.ty(r).clone()).collect();
    types.extend(lin.input_types()[n..].iter().cloned());
    let linear = trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; lin.len()];
        for (k, &r) in residual.iter().enumerate() {
            env[r.index()] = Some(vars[k].clone());
        }
        for (k, &input) in lin.inputs().iter().enumerate().skip(n) {
            env[input.index()] = Some(vars[residual.len() + k - n].clone());
        }
        replay(&lin, &mut env, |id| is_linear[id.index()])?;
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
    let n = primals.len();
    anvil_core::function::check_arity("vjp", Some(graph.inputs().len()), n)?;
    anvil_core::function::check_arity("vjp cotangents", Some(graph.outputs().len()), cts.len())?;
    let primal_types: Vec<TensorType> = primals.iter().map(|p| p.ty().clone()).collect();
    let (lin, float) = jvp_trace(graph, &primal_types)?;
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
    let in_cts = float
        .iter()
        .map(|&f| if f { tangent_cts.next().cloned().flatten() } else { None })
        .collect();
    Ok((outs, in_cts))
}
