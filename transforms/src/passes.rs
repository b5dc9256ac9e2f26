//! Graph passes that know no op: dead-code elimination, common-subexpression
//! elimination, constant folding, and the recursion into bodies.
//!
//! Every pass copies the graph with [`Graph::rebuild`] (ids stay dense and
//! in topological order) and keeps every input in its position, so a pass
//! never changes a graph's signature. CSE relies on ops comparing and
//! hashing by type and parameters (`dyn Op: Eq + Hash`), bodies included
//! (they compare by structure). Constant folding runs kernels through an
//! [`Evaluator`] the caller passes in — the backend — since this crate
//! sits below every backend.

use anvil_core::{Constant, Error, Evaluator, Graph, Op, Rebuilt, Result, Tensor, ValueId};
use std::collections::HashMap;

/// Removes nodes that no output depends on.
///
/// # Errors
/// An invalid input graph.
pub fn dce(g: &Graph) -> Result<Graph> {
    let keep = anvil_core::replay::live_nodes(g);
    g.rebuild(|_, _, id, _, _| Ok(if keep[id.index()] { Rebuilt::Copy } else { Rebuilt::Drop }))
}

/// A node as CSE compares it: its op (type and parameters) and its operands.
type NodeKey = (Box<dyn Op>, Vec<ValueId>);

/// Merges nodes that apply equal ops to the same operands.
///
/// # Errors
/// An invalid input graph.
pub fn cse(g: &Graph) -> Result<Graph> {
    let mut seen: HashMap<NodeKey, Vec<ValueId>> = HashMap::new();
    g.rebuild(|out, _, _, n, ins| {
        let key = (n.op.clone(), ins.to_vec());
        if let Some(vals) = seen.get(&key) {
            return Ok(Rebuilt::Replace(vals.clone()));
        }
        let types = n.results().map(|v| g.ty(v).clone()).collect();
        let new = out.push_node(n.op.clone(), ins.to_vec(), types)?;
        let vals: Vec<ValueId> = out.node(new).results().collect();
        seen.insert(key, vals.clone());
        Ok(Rebuilt::Replace(vals))
    })
}

/// Applies `pass` to the body of every higher-order op (that can rebuild
/// itself with new bodies, see [`Op::with_subgraphs`]), recursively.
///
/// # Errors
/// `pass`'s error; a pass that changed a body's signature.
pub fn map_bodies(g: &Graph, pass: &dyn Fn(&Graph) -> Result<Graph>) -> Result<Graph> {
    if g.nodes().iter().all(|n| n.op.subgraphs().is_empty()) {
        return Ok(g.clone());
    }
    g.rebuild(|out, _, _, n, ins| {
        let bodies = n.op.subgraphs();
        if bodies.is_empty() {
            return Ok(Rebuilt::Copy);
        }
        let new_bodies = bodies.into_iter().map(pass).collect::<Result<Vec<_>>>()?;
        let Some(op) = n.op.with_subgraphs(new_bodies) else { return Ok(Rebuilt::Copy) };
        let node = out.push(op, ins)?;
        Ok(Rebuilt::Replace(out.node(node).results().collect()))
    })
}

/// Evaluates, once at compile time, the nodes whose operands are all
/// constants, with `eval` (the backend's kernels), when the results are no
/// larger than the operands: folding never turns a small description (a
/// `full`, an `iota`, a seed) into a large constant that the plan would
/// carry and every pass would compare.
///
/// # Errors
/// An invalid graph. (A kernel's error leaves the node as it is: it will
/// be reported, with the arguments, when the plan runs.)
pub fn fold_constants(g: &Graph, eval: &dyn Evaluator) -> Result<Graph> {
    g.rebuild(|out, _, _, n, ins| {
        let values: Option<Vec<&Tensor>> =
            ins.iter().map(|&i| out.producer_node(i).op.constant_value()).collect();
        let Some(values) = values else { return Ok(Rebuilt::Copy) };
        let types: Vec<_> = n.results().map(|v| g.ty(v).clone()).collect();
        let in_size: usize = values.iter().map(|t| t.numel()).sum();
        let out_size: usize = types.iter().map(|t| t.numel()).sum();
        if out_size > in_size.max(1) || n.op.parameter_index().is_some() || n.op.has_effects() {
            return Ok(Rebuilt::Copy);
        }
        match eval.evaluate(n.op.as_ref(), &values, &types) {
            Some(Ok(results)) if results.len() == types.len() => {
                let vals = results
                    .into_iter()
                    .map(|value| out.push_one(Box::new(Constant { value }), &[]))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Rebuilt::Replace(vals))
            }
            Some(Ok(_)) => Err(Error::invalid(n.op.name(), "evaluate", "wrong number of results")),
            _ => Ok(Rebuilt::Copy),
        }
    })
}
