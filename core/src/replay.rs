//! Re-emitting a graph's nodes into a trace: the loop shared by everything
//! that copies part of a graph through the `Var` API (inlining a function,
//! hoisting loop-invariant work out of a body, splitting a linearization),
//! and the environments (one slot per value) the graph interpreters keep.

use crate::{Error, Graph, Node, NodeId, Parameter, Result, ValueId, Var};

/// Emits every node of `g` whose results `env` does not hold yet and that
/// `include` accepts, in order, reading operands from `env` and storing
/// results there. Parameters are never emitted: bind the inputs a caller
/// needs in `env` first.
///
/// # Errors
/// A node whose operand is neither bound nor emitted.
pub fn replay(g: &Graph, env: &mut [Option<Var>], include: impl Fn(NodeId) -> bool) -> Result<()> {
    for (id, node) in g.iter() {
        let done = node.num_results() > 0 && env[node.out().index()].is_some();
        if node.op.is::<Parameter>() || !include(id) || done {
            continue;
        }
        let outs = emit(node, env)?;
        bind(env, node, outs);
    }
    Ok(())
}

/// `node`'s op applied to its operands' values in `env`, in their trace.
pub fn emit(node: &Node, env: &[Option<Var>]) -> Result<Vec<Var>> {
    let ins: Vec<Var> = node.inputs.iter().map(|&i| value(env, i)).collect::<Result<_>>()?;
    let refs: Vec<&Var> = ins.iter().collect();
    Ok(Var::apply_op_n(node.op.boxed(), &refs, node.num_results()))
}

/// Stores `values` as the results of `node`.
pub fn bind<T>(env: &mut [Option<T>], node: &Node, values: impl IntoIterator<Item = T>) {
    for (v, x) in node.results().zip(values) {
        env[v.index()] = Some(x);
    }
}

/// The value bound to `id`.
///
/// # Errors
/// [`Error::InvalidGraph`] when it is not bound.
pub fn value<T: Clone>(env: &[Option<T>], id: ValueId) -> Result<T> {
    env[id.index()].clone().ok_or_else(|| Error::InvalidGraph {
        node: id.index(),
        msg: format!("value {id} not computed"),
    })
}

/// `g`'s outputs read from `env`.
///
/// # Errors
/// An output not computed.
pub fn outputs<T: Clone>(g: &Graph, env: &[Option<T>]) -> Result<Vec<T>> {
    g.outputs().iter().map(|&o| value(env, o)).collect()
}

/// An environment of `g`'s size with `args` bound to its inputs.
pub fn bound_inputs<T: Clone>(g: &Graph, args: &[T]) -> Vec<Option<T>> {
    let mut env = vec![None; g.num_values()];
    for (&input, a) in g.inputs().iter().zip(args) {
        env[input.index()] = Some(a.clone());
    }
    env
}

/// `g` traced again with some nodes replaced: `rewrite` gets each node
/// (parameters aside) with its operands' new values and returns the
/// node's results, or `None` to emit the node as it is. Returns the new
/// graph and whether `rewrite` replaced any node.
///
/// # Errors
/// `rewrite`'s errors; an invalid graph.
pub fn rewrite_nodes(
    g: &Graph,
    mut rewrite: impl FnMut(NodeId, &Node, &[Var]) -> Result<Option<Vec<Var>>>,
) -> Result<(Graph, bool)> {
    rewrite_nodes_partly(g, |id, node, ins| {
        Ok(rewrite(id, node, ins)?.map(|r| r.into_iter().map(Some).collect()))
    })
}

/// [`rewrite_nodes`] where a replacement may leave results without a value
/// (`None`): results that nothing reads.
///
/// # Errors
/// `rewrite`'s errors; an invalid graph, or a result left without a value
/// that is read.
pub fn rewrite_nodes_partly(
    g: &Graph,
    mut rewrite: impl FnMut(NodeId, &Node, &[Var]) -> Result<Option<Vec<Option<Var>>>>,
) -> Result<(Graph, bool)> {
    let mut changed = false;
    let out = crate::trace_with(&g.input_types(), |vars| {
        let mut env = bound_inputs(g, vars);
        for (id, node) in g.iter() {
            if node.op.is::<Parameter>() {
                continue;
            }
            let ins: Vec<Var> =
                node.inputs.iter().map(|&i| value(&env, i)).collect::<Result<_>>()?;
            match rewrite(id, node, &ins)? {
                Some(results) => {
                    changed = true;
                    for (v, x) in node.results().zip(results) {
                        env[v.index()] = x;
                    }
                }
                None => {
                    let refs: Vec<&Var> = ins.iter().collect();
                    bind(
                        &mut env,
                        node,
                        Var::apply_op_n(node.op.boxed(), &refs, node.num_results()),
                    );
                }
            }
        }
        outputs(g, &env)
    })?;
    Ok((out, changed))
}

/// Emits `graph` on `args` into their trace and returns its outputs.
///
/// # Errors
/// A wrong number of arguments; an invalid graph.
pub fn inline_graph(graph: &Graph, args: &[Var]) -> Result<Vec<Var>> {
    crate::function::check_arity("inline", Some(graph.inputs().len()), args.len())?;
    let mut env = bound_inputs(graph, args);
    replay(graph, &mut env, |_| true)?;
    outputs(graph, &env)
}

/// Which nodes of `g` the outputs depend on.
pub fn live_nodes(g: &Graph) -> Vec<bool> {
    needed_nodes(g, g.outputs().iter().copied(), |_| false)
}

/// Which nodes of `g` computing `roots` needs, when the values `given`
/// accepts are available without their producers (their cone stops there).
///
/// ```
/// use anvil::prelude::*;
/// use anvil_core::replay::needed_nodes;
/// // y = sin(x); z = y * 2: z needs x's parameter node, the sine, the
/// // constant and the product; with y given, not the first two.
/// let g = anvil::trace(&|x: &Var| x.sin() * 2.0, &Tensor::zeros(&[3]).unwrap()).unwrap();
/// let z = g.outputs()[0];
/// let count = |keep: Vec<bool>| keep.iter().filter(|&&k| k).count();
/// let all = count(needed_nodes(&g, [z], |_| false));
/// let sin = g.producer_node(z).inputs[0];
/// assert_eq!(count(needed_nodes(&g, [z], |v| v == sin)), all - 2);
/// ```
pub fn needed_nodes(
    g: &Graph,
    roots: impl IntoIterator<Item = ValueId>,
    given: impl Fn(ValueId) -> bool,
) -> Vec<bool> {
    let mut live = vec![false; g.num_values()];
    for r in roots {
        live[r.index()] = true;
    }
    let mut keep = vec![false; g.len()];
    for (id, n) in g.iter().rev() {
        if n.results().any(|v| live[v.index()] && !given(v)) {
            keep[id.index()] = true;
            for i in &n.inputs {
                live[i.index()] = true;
            }
        }
    }
    keep
}

/// `g` without its dead nodes and the inputs nothing live reads, and the
/// positions of the inputs kept.
///
/// # Errors
/// An invalid graph.
pub fn drop_unused_inputs(g: &Graph) -> Result<(Graph, Vec<usize>)> {
    let live = live_nodes(g);
    let kept: Vec<usize> =
        (0..g.inputs().len()).filter(|&k| live[g.producer(g.inputs()[k]).0.index()]).collect();
    if kept.len() == g.inputs().len() && live.iter().all(|&l| l) {
        return Ok((g.clone(), kept));
    }
    let types: Vec<_> = kept.iter().map(|&k| g.ty(g.inputs()[k]).clone()).collect();
    let pruned = crate::trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; g.num_values()];
        for (v, &k) in vars.iter().zip(&kept) {
            env[g.inputs()[k].index()] = Some(v.clone());
        }
        replay(g, &mut env, |id| live[id.index()])?;
        outputs(g, &env)
    })?;
    Ok((pruned, kept))
}
