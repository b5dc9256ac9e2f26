//! Graph passes: dead-code elimination and common-subexpression elimination.
//!
//! Both copy the graph into a fresh arena (ids stay dense and in topological
//! order) and keep every input in its position, so a pass never changes a
//! graph's signature. CSE relies on ops comparing and hashing by type and
//! parameters (`dyn Op: Eq + Hash`).

use anvil_core::{Error, Graph, Node, NodeId, Op, Parameter, Result};
use std::collections::HashMap;

type Key = (Box<dyn Op>, Vec<NodeId>);

/// Copies the nodes `keep` selects into a new graph. With `merge`, a node
/// equal to an earlier one (same op, same new inputs) is mapped onto it.
fn rebuild(g: &Graph, keep: &[bool], merge: bool) -> Result<Graph> {
    g.verify()?;
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    let mut seen: HashMap<Key, NodeId> = HashMap::new();
    let lookup = |map: &[Option<NodeId>], i: NodeId| {
        map[i.index()].ok_or_else(|| Error::InvalidGraph {
            node: i.index(),
            msg: "a kept node uses a dropped one".into(),
        })
    };
    for (id, n) in g.iter() {
        let new = if n.op.is::<Parameter>() {
            out.add_input(n.ty.clone())?
        } else if !keep[id.index()] {
            continue;
        } else {
            let inputs = n.inputs.iter().map(|&i| lookup(&map, i)).collect::<Result<Vec<_>>>()?;
            let key = (n.op.clone(), inputs.clone());
            match seen.get(&key) {
                Some(&existing) if merge => existing,
                _ => {
                    let new = out.push_node(Node { op: n.op.clone(), inputs, ty: n.ty.clone() })?;
                    if merge {
                        seen.insert(key, new);
                    }
                    new
                }
            }
        };
        map[id.index()] = Some(new);
    }
    let outputs = g.outputs().iter().map(|&o| lookup(&map, o)).collect::<Result<Vec<_>>>()?;
    out.set_outputs(outputs);
    Ok(out)
}

/// Removes nodes that no output depends on.
///
/// # Errors
/// An invalid input graph.
pub fn dce(g: &Graph) -> Result<Graph> {
    let mut live = vec![false; g.len()];
    for o in g.outputs() {
        live[o.index()] = true;
    }
    for (id, n) in g.iter().collect::<Vec<_>>().into_iter().rev() {
        if live[id.index()] {
            for i in &n.inputs {
                live[i.index()] = true;
            }
        }
    }
    rebuild(g, &live, false)
}

/// Merges nodes that apply equal ops to the same inputs.
///
/// # Errors
/// An invalid input graph.
pub fn cse(g: &Graph) -> Result<Graph> {
    rebuild(g, &vec![true; g.len()], true)
}
