//! The rewrite engine: one driver that applies the rewrite rules registered
//! per op type ([`RewriteRule`](anvil_core::RewriteRule), beside each op in
//! `anvil-ops` or in a plugin crate) until none applies.
//!
//! A round replays the graph into a fresh trace; each node whose op has a
//! rule is offered to it with its operands (whose producers the rule may
//! inspect), and a rule that returns values of the node's types replaces
//! the node. One rewrite needs no rule of its own because it follows from
//! facts the ops declare: an elementwise op reads a broadcast operand's
//! source directly (it broadcasts by itself). After each round, CSE and DCE
//! clean up; the driver stops at the first round where nothing fired.
//!
//! Termination: every rule removes a node or a pass over a large value, so
//! rounds settle; a capped number of rounds that does not settle is an
//! error naming the rules still firing. Bodies of higher-order ops are
//! rewritten too ([`crate::passes::map_bodies`]).

use crate::passes::{cse, dce, map_bodies};
use anvil_core::replay::rewrite_nodes;
use anvil_core::shape::broadcast_shapes;
use anvil_core::{rewrite_rules, Graph, Result, TensorType, Var};

/// Rounds after which rewriting that still changes the graph is an error.
pub const MAX_ROUNDS: usize = 32;

/// Applies every registered rewrite rule (and the fact-based ones) to a
/// fixpoint, in `g` and in every body. Values and types are unchanged,
/// bit for bit, except where a rule documents otherwise.
///
/// ```
/// use anvil::prelude::*;
/// // x * 1 + 0 is x.
/// let g = trace(&|x: &Var| &(x * 1.0) + 0.0, &Tensor::zeros(&[3])?)?;
/// let r = anvil::transforms::rewrite(&g)?;
/// assert_eq!(r.outputs(), r.inputs());
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// A rule's error; rules that do not settle within [`MAX_ROUNDS`] rounds
/// (an error naming them).
pub fn rewrite(g: &Graph) -> Result<Graph> {
    rewrite_top(&map_bodies(g, &rewrite)?)
}

/// [`rewrite`] of `g`'s own nodes, leaving bodies as they are (for a
/// caller that has handled them).
///
/// # Errors
/// As [`rewrite`].
pub fn rewrite_top(g: &Graph) -> Result<Graph> {
    let mut g = g.clone();
    let mut fired = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let (next, now) = round(&g)?;
        if now.is_empty() {
            return Ok(g);
        }
        g = dce(&cse(&next)?)?;
        fired = now;
    }
    fired.sort_unstable();
    fired.dedup();
    Err(anvil_core::Error::invalid(
        "rewrite",
        "rules",
        format!(
            "did not settle after {MAX_ROUNDS} rounds; still firing: {} (a rule that does not reduce its cost cycles)",
            fired.join(", ")
        ),
    ))
}

/// One pass over `g`: the rewritten graph and the names of the rules that fired.
fn round(g: &Graph) -> Result<(Graph, Vec<String>)> {
    let mut fired = Vec::new();
    let (out, _) = rewrite_nodes(g, |_, node, ins| {
        let types: Vec<TensorType> = node.results().map(|v| g.ty(v).clone()).collect();
        let op = node.op.as_ref();
        // Rules reason about sizes (counts, products, size-1 axes); on
        // symbolic shapes the node stays as traced.
        if types.iter().any(TensorType::is_symbolic) || ins.iter().any(|v| v.ty().is_symbolic()) {
            return Ok(None);
        }
        if let Some(rule) = rewrite_rules().lookup(op)? {
            let outs = rule.apply(op, ins, &types)?.filter(|vals| same_types(vals, &types));
            if outs.is_some() {
                fired.push(op.name().to_string());
                return Ok(outs);
            }
        }
        if op.is_elementwise() {
            if let Some(fewer) = unbroadcast_operands(ins, &types) {
                let refs: Vec<&Var> = fewer.iter().collect();
                fired.push(format!("{} (reads a broadcast's source)", op.name()));
                return Ok(Some(Var::apply_op_n(op.boxed(), &refs, types.len())));
            }
        }
        Ok(None)
    })?;
    Ok((out, fired))
}

fn same_types(vals: &[Var], types: &[TensorType]) -> bool {
    vals.len() == types.len()
        && vals.iter().zip(types).all(|(v, t)| !v.is_poisoned() && v.ty() == t)
}

/// The operands with every `broadcast` replaced by its source, one at a
/// time, as long as they still broadcast to the result's shape; `None` when
/// nothing changes.
fn unbroadcast_operands(ins: &[Var], types: &[TensorType]) -> Option<Vec<Var>> {
    let [ty] = types else { return None };
    let mut ins = ins.to_vec();
    let mut changed = false;
    for k in 0..ins.len() {
        let Some(p) = ins[k].producer().filter(|p| p.op.is_broadcast()) else { continue };
        let mut trial = ins.clone();
        trial[k] = p.inputs[0].clone();
        let shape = trial.iter().try_fold(Vec::new(), |acc: Vec<usize>, v| {
            broadcast_shapes("rewrite", &acc, v.shape(), "").ok()
        });
        if shape.as_deref() == Some(ty.shape()) {
            ins = trial;
            changed = true;
        }
    }
    changed.then_some(ins)
}
