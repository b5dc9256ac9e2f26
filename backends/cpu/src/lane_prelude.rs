//! A masked loop's operands computed with it, lane group by lane group.
//!
//! `vmap` of a `while_loop` whose predicate depends on the batch computes,
//! before the loop, the initial carries and flags of every lane: the
//! predicate on the initial values, the initial values themselves (often a
//! constant broadcast to the batch). Run as a plan, each of those values is
//! written whole to memory and read back by the loop, a pass over the batch
//! per value before the first step (at W13's 100,000 lanes, a fifth of the
//! call).
//!
//! The plan rewrite of [`While`] moves the elementwise nodes that only feed
//! a masked loop into a [`LaneWhile`]: their graph (the *prelude*) runs per
//! lane group, in the group's registers, just before the group's first step
//! (see the lane loop, `kernels::lanes`). Only the plan sees the new op (it is
//! internal, like [`crate::fusion::Fused`]); values are unchanged: each
//! lane's operands are computed by the same instructions as before.

use crate::kernels::lanes::LaneLoop;
use crate::plan::PRECOMPUTE_BELOW_BYTES;
use anvil_core::{
    Constant, Error, Graph, Movement, NodeId, Op, Rebuilt, Result, SubGraph, TensorType, ValueId,
};
use anvil_ops::while_loop::While;
use std::collections::HashMap;

/// A masked [`While`] whose operands are the results of `prelude`, an
/// elementwise graph of the lanes' shape run with the loop (see the module
/// docs). Operands: the prelude's inputs. Results: the loop's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LaneWhile {
    /// The loop.
    pub w: While,
    /// Its operands (consts, then initial carries) from the node's.
    pub prelude: SubGraph,
}

impl Op for LaneWhile {
    fn name(&self) -> &'static str {
        "lane_while"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let want = self.prelude.graph().input_types();
        if inputs != want.as_slice() {
            let have: Vec<&[usize]> = inputs.iter().map(TensorType::shape).collect();
            return Err(Error::shape(
                self.name(),
                &have,
                format!("operands {inputs:?} for a prelude of {want:?}"),
            ));
        }
        self.w.infer_results(&self.prelude.graph().output_types())
    }
    fn params(&self) -> String {
        format!("{}, prelude={} nodes", self.w.params(), self.prelude.graph().len())
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        let mut g = vec![self.prelude.graph()];
        g.extend(self.w.subgraphs());
        g
    }
}

crate::register_plan_rewrite!(While, absorb_preludes);

/// Whether node `n` of `g` may run in a prelude of lanes of `shape`: a
/// constant (the graph's, or a generated one the plan would hold anyway,
/// below [`PRECOMPUTE_BELOW_BYTES`]), elementwise math of that shape whose
/// operands are of that shape or single elements, or a single element
/// broadcast to it. Never an op with effects.
fn fits(g: &Graph, id: NodeId, shape: &[usize]) -> bool {
    let n = g.node(id);
    if n.num_results() != 1
        || n.op.parameter_index().is_some()
        || !n.op.subgraphs().is_empty()
        || n.op.has_effects()
    {
        return false;
    }
    let ty = g.ty(n.out());
    if ty.is_symbolic() {
        return false;
    }
    if n.inputs.is_empty() {
        // A larger generated value (an `iota` of the batch) is computed
        // by every call of the plan, not held: it stays out.
        return n.op.is::<Constant>() || ty.bytes().is_some_and(|b| b < PRECOMPUTE_BELOW_BYTES);
    }
    if ty.shape() != shape {
        return false;
    }
    let lanes_or_one = |v: &ValueId| g.ty(*v).shape() == shape || g.ty(*v).numel() == 1;
    match n.op.movement() {
        Some(Movement::BroadcastTo) => n.inputs.len() == 1 && g.ty(n.inputs[0]).numel() == 1,
        Some(_) => false,
        None => n.op.elementwise_math().is_some() && n.inputs.iter().all(lanes_or_one),
    }
}

/// Rewrites every masked loop of `whiles` whose operands are computed by
/// elementwise nodes read by nothing else into a [`LaneWhile`] (see the
/// module docs); `None` when there is none. The plan rewrite of [`While`].
///
/// # Errors
/// An invalid graph. (A prelude whose constant does not evaluate is left
/// to the plan, which reports it where it runs.)
fn absorb_preludes(g: &Graph, whiles: &[NodeId]) -> Result<Option<Graph>> {
    let mut readers: Vec<Vec<NodeId>> = vec![Vec::new(); g.num_values()];
    for (id, n) in g.iter() {
        for i in &n.inputs {
            readers[i.index()].push(id);
        }
    }
    let mut is_output = vec![false; g.num_values()];
    for o in g.outputs() {
        is_output[o.index()] = true;
    }
    // The new node per loop, and the nodes it absorbs.
    let mut new_ops: HashMap<NodeId, (LaneWhile, Vec<ValueId>)> = HashMap::new();
    let mut absorbed = vec![false; g.len()];
    for &id in whiles {
        let w = g.node(id).op.try_downcast::<While>()?;
        let types = w.body.graph().input_types();
        let Some(flag) = types.last() else { continue };
        if !w.masked || types.iter().any(TensorType::is_symbolic) {
            continue;
        }
        let shape = flag.shape().to_vec();
        // Backwards from the loop: a node joins when the loop and the nodes
        // already in read all its results.
        let mut inside = vec![false; g.len()];
        for k in (0..id.index()).rev() {
            let m = NodeId::from_index(k)?;
            let v = g.node(m).out();
            let read = &readers[v.index()];
            inside[k] = !absorbed[k]
                && fits(g, m, &shape)
                && !is_output[v.index()]
                && !read.is_empty()
                && read.iter().all(|&r| r == id || inside[r.index()]);
        }
        if !inside.iter().any(|&b| b) {
            continue;
        }
        // The prelude: inputs are the values its nodes and the loop read
        // from outside, in order of first use.
        let mut prelude = Graph::new();
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        let mut outside: Vec<ValueId> = Vec::new();
        let nodes: Vec<NodeId> = (0..id.index())
            .filter(|&k| inside[k])
            .map(NodeId::from_index)
            .collect::<Result<_>>()?;
        let loop_inputs = g.node(id).inputs.clone();
        for v in nodes.iter().flat_map(|&m| g.node(m).inputs.iter()).chain(&loop_inputs) {
            if !inside[g.producer(*v).0.index()] && !map.contains_key(v) {
                map.insert(*v, prelude.add_input(g.ty(*v).clone())?);
                outside.push(*v);
            }
        }
        for &m in &nodes {
            let n = g.node(m);
            let ins: Vec<_> = n.inputs.iter().map(|v| map[v]).collect();
            let new = prelude.push_node(n.op.clone(), ins, vec![g.ty(n.out()).clone()])?;
            map.insert(n.out(), prelude.node(new).out());
        }
        prelude.set_outputs(loop_inputs.iter().map(|v| map[v]).collect());
        prelude.verify()?;
        // Not a lane loop with this prelude (or a constant of it that does
        // not evaluate: the plan then reports it where it runs).
        if !matches!(LaneLoop::with_prelude(w, &prelude), Ok(Some(_))) {
            continue;
        }
        for &m in &nodes {
            absorbed[m.index()] = true;
        }
        new_ops.insert(id, (LaneWhile { w: w.clone(), prelude: SubGraph::new(prelude) }, outside));
    }
    if new_ops.is_empty() {
        return Ok(None);
    }
    let rebuilt = g.rebuild(|out, map, id, n, _| {
        if absorbed[id.index()] {
            return Ok(Rebuilt::Drop);
        }
        let Some((op, outside)) = new_ops.remove(&id) else { return Ok(Rebuilt::Copy) };
        let ins = outside.iter().map(|&v| map.get(v)).collect::<Result<Vec<_>>>()?;
        let types = n.results().map(|v| g.ty(v).clone()).collect();
        let new = out.push_node(Box::new(op), ins, types)?;
        Ok(Rebuilt::Replace(out.node(new).results().collect()))
    })?;
    Ok(Some(rebuilt))
}
