//! Re-emitting a graph's nodes into the current trace: the loop shared by
//! the transforms that copy part of a graph (inlining, hoisting, splitting
//! a linearization).

use anvil_core::{Error, Graph, NodeId, Parameter, Result, Var};

/// Emits every node of `g` that `env` does not hold yet and `include`
/// accepts, in order, reading operands from `env` and storing results
/// there. Parameters are never emitted: bind the inputs a caller needs in
/// `env` first.
///
/// # Errors
/// A node whose operand is neither bound nor emitted.
pub(crate) fn replay(
    g: &Graph,
    env: &mut [Option<Var>],
    include: impl Fn(NodeId) -> bool,
) -> Result<()> {
    for (id, node) in g.iter() {
        if env[id.index()].is_some() || node.op.is::<Parameter>() || !include(id) {
            continue;
        }
        let ins: Vec<Var> = node.inputs.iter().map(|i| value(env, *i)).collect::<Result<_>>()?;
        let refs: Vec<&Var> = ins.iter().collect();
        env[id.index()] = Some(Var::apply_op(node.op.boxed(), &refs));
    }
    Ok(())
}

/// The value bound to `id`.
///
/// # Errors
/// [`Error::InvalidGraph`] when it is not bound.
pub(crate) fn value(env: &[Option<Var>], id: NodeId) -> Result<Var> {
    env[id.index()]
        .clone()
        .ok_or_else(|| Error::InvalidGraph { node: id.index(), msg: "value not computed".into() })
}

/// `g` without the inputs nothing reads, and the positions of the inputs kept.
///
/// # Errors
/// An invalid graph.
pub(crate) fn drop_unused_inputs(g: &Graph) -> Result<(Graph, Vec<usize>)> {
    let mut used = vec![false; g.len()];
    for (_, node) in g.iter() {
        for i in &node.inputs {
            used[i.index()] = true;
        }
    }
    for o in g.outputs() {
        used[o.index()] = true;
    }
    let kept: Vec<usize> = (0..g.inputs().len()).filter(|&k| used[g.inputs()[k].index()]).collect();
    if kept.len() == g.inputs().len() {
        return Ok((g.clone(), kept));
    }
    let types: Vec<_> = kept.iter().map(|&k| g.ty(g.inputs()[k]).clone()).collect();
    let pruned = anvil_core::trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; g.len()];
        for (v, &k) in vars.iter().zip(&kept) {
            env[g.inputs()[k].index()] = Some(v.clone());
        }
        replay(g, &mut env, |_| true)?;
        g.outputs().iter().map(|&o| value(&env, o)).collect()
    })?;
    Ok((pruned, kept))
}
