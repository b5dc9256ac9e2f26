//! The graph IR: an arena of nodes in topological order.
//!
//! A [`Graph`] is a `Vec<Node>` indexed by [`NodeId`] (a `u32` newtype, as in
//! cranelift and egg). Every node holds its op, its input ids and its static
//! type; an input always precedes its users, so evaluation is a forward loop
//! and reverse mode a backward one. Function inputs are [`Parameter`] nodes,
//! captured tensors are [`Constant`] nodes — the two structural ops the IR
//! itself needs; every other op lives outside `core`.
//!
//! [`Graph::verify`] checks the invariants; the graph prints as text
//! (`Display`, one line per node like a jaxpr) and as Graphviz DOT.

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::shape::TensorType;
use crate::tensor::{Storage, Tensor};
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};

/// The index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    /// The index into the graph's node list.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// A node id from an index.
    ///
    /// # Errors
    /// [`Error::GraphTooLarge`] past `u32::MAX`.
    pub fn from_index(i: usize) -> Result<NodeId> {
        u32::try_from(i).map(NodeId).map_err(|_| Error::GraphTooLarge { max: u64::from(u32::MAX) })
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// One operation applied to earlier nodes.
#[derive(Clone, Debug)]
pub struct Node {
    /// What the node computes.
    pub op: Box<dyn Op>,
    /// Its arguments, all earlier in the graph.
    pub inputs: Vec<NodeId>,
    /// The type of its result.
    pub ty: TensorType,
}

/// A function input: the `index`-th argument of the graph.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Parameter {
    /// Position among the graph's inputs.
    pub index: usize,
    /// Its type.
    pub ty: TensorType,
}

impl Op for Parameter {
    fn name(&self) -> &'static str {
        "param"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        crate::op::expect_arity(self, inputs, 0)?;
        Ok(self.ty.clone())
    }
    fn params(&self) -> String {
        self.index.to_string()
    }
}

/// A tensor captured into the graph.
///
/// Equality compares contents (bit patterns, so NaN equals NaN); hashing
/// looks at the type and the first few elements only, so hashing a large
/// constant stays cheap.
#[derive(Clone, Debug)]
pub struct Constant {
    /// The value.
    pub value: Tensor,
}

impl PartialEq for Constant {
    fn eq(&self, other: &Self) -> bool {
        fn bits_eq<T: Element>(a: &[T], b: &[T]) -> bool {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_scalar() == y.to_scalar())
        }
        let (a, b) = (self.value.storage(), other.value.storage());
        self.value.shape() == other.value.shape()
            && match (a, b) {
                (Storage::F64(x), Storage::F64(y)) => std::sync::Arc::ptr_eq(x, y) || bits_eq(x, y),
                (Storage::F32(x), Storage::F32(y)) => std::sync::Arc::ptr_eq(x, y) || bits_eq(x, y),
                (Storage::I64(x), Storage::I64(y)) => x == y,
                (Storage::Bool(x), Storage::Bool(y)) => x == y,
                _ => false,
            }
    }
}
impl Eq for Constant {}
impl Hash for Constant {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.value.ty().hash(state);
        for i in 0..self.value.numel().min(4) {
            self.value.storage().get(i).hash(state);
        }
    }
}

impl Op for Constant {
    fn name(&self) -> &'static str {
        "const"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        crate::op::expect_arity(self, inputs, 0)?;
        Ok(self.value.ty())
    }
    fn params(&self) -> String {
        if self.value.numel() <= 8 {
            self.value.to_string().replace('\n', "")
        } else {
            String::new()
        }
    }
}

/// A computation: nodes in topological order, the input nodes and the outputs.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    inputs: Vec<NodeId>,
    outputs: Vec<NodeId>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Adds an input of type `ty`; inputs are numbered in the order added.
    ///
    /// # Errors
    /// [`Error::GraphTooLarge`].
    pub fn add_input(&mut self, ty: TensorType) -> Result<NodeId> {
        let op = Parameter { index: self.inputs.len(), ty: ty.clone() };
        let id = self.push_node(Node { op: Box::new(op), inputs: vec![], ty })?;
        self.inputs.push(id);
        Ok(id)
    }

    /// Appends `op` applied to `inputs`, checking ids and inferring the type.
    ///
    /// # Errors
    /// An input id that is not in the graph, or the op's shape rule failing.
    pub fn push(&mut self, op: Box<dyn Op>, inputs: &[NodeId]) -> Result<NodeId> {
        if let Some(bad) = inputs.iter().find(|i| i.index() >= self.nodes.len()) {
            return Err(Error::InvalidGraph {
                node: self.nodes.len(),
                msg: format!("{} uses {bad}, which is not in the graph", op.name()),
            });
        }
        let tys: Vec<TensorType> = inputs.iter().map(|&i| self.ty(i).clone()).collect();
        let ty = op.infer(&tys)?;
        self.push_node(Node { op, inputs: inputs.to_vec(), ty })
    }

    /// Appends a node whose type the caller has already computed. Used by
    /// passes that copy nodes between graphs; [`Graph::verify`] re-checks it.
    ///
    /// # Errors
    /// [`Error::GraphTooLarge`].
    pub fn push_node(&mut self, node: Node) -> Result<NodeId> {
        let id = NodeId::from_index(self.nodes.len())?;
        self.nodes.push(node);
        Ok(id)
    }

    /// Sets the outputs.
    pub fn set_outputs(&mut self, outputs: Vec<NodeId>) {
        self.outputs = outputs;
    }

    /// The node with this id.
    ///
    /// # Panics
    /// If `id` is not from this graph (an internal invariant, not user input).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The type of a node.
    pub fn ty(&self, id: NodeId) -> &TensorType {
        &self.node(id).ty
    }

    /// All nodes, in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Nodes with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes.iter().enumerate().map(|(i, n)| (NodeId(i as u32), n))
    }

    /// The input (parameter) nodes, in argument order.
    pub fn inputs(&self) -> &[NodeId] {
        &self.inputs
    }

    /// The output nodes, in result order.
    pub fn outputs(&self) -> &[NodeId] {
        &self.outputs
    }

    /// The input types, in argument order.
    pub fn input_types(&self) -> Vec<TensorType> {
        self.inputs.iter().map(|&i| self.ty(i).clone()).collect()
    }

    /// The output types, in result order.
    pub fn output_types(&self) -> Vec<TensorType> {
        self.outputs.iter().map(|&i| self.ty(i).clone()).collect()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes apply an op of type `T` (a helper for tests of transforms).
    pub fn count<T: Op>(&self) -> usize {
        self.nodes.iter().filter(|n| n.op.is::<T>()).count()
    }

    /// Checks the invariants: inputs precede users, ids are in range, every
    /// node's type is what its op's shape rule gives, parameters are the
    /// listed inputs in order, outputs exist. Sub-graphs are verified too.
    ///
    /// # Errors
    /// [`Error::InvalidGraph`] naming the node and what is wrong.
    pub fn verify(&self) -> Result<()> {
        let bad = |node: usize, msg: String| Err(Error::InvalidGraph { node, msg });
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(x) = n.inputs.iter().find(|x| x.index() >= i) {
                return bad(i, format!("{} uses {x}, which does not precede it", n.op.name()));
            }
            let tys: Vec<TensorType> = n.inputs.iter().map(|&x| self.ty(x).clone()).collect();
            match n.op.infer(&tys) {
                Ok(ty) if ty == n.ty => {}
                Ok(ty) => {
                    return bad(
                        i,
                        format!("{} has type {}, its rule gives {ty}", n.op.name(), n.ty),
                    )
                }
                Err(e) => return bad(i, format!("shape rule fails: {e}")),
            }
            if let Some(p) = n.op.downcast_ref::<Parameter>() {
                if self.inputs.get(p.index).map(|x| x.index()) != Some(i) {
                    return bad(i, format!("parameter {} is not input {}", p.index, p.index));
                }
            }
            for g in n.op.subgraphs() {
                g.verify().map_err(|e| Error::InvalidGraph {
                    node: i,
                    msg: format!("in sub-graph: {e}"),
                })?;
            }
        }
        if let Some(o) = self.outputs.iter().find(|o| o.index() >= self.nodes.len()) {
            return bad(self.nodes.len(), format!("output {o} is not in the graph"));
        }
        Ok(())
    }

    /// The graph in Graphviz DOT syntax (render with `dot -Tsvg`).
    pub fn to_dot(&self) -> String {
        let mut s = String::from(
            "digraph anvil {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
        );
        for (id, n) in self.iter() {
            let label = format!("{id} = {}\\n{}", dot_escape(&n.op.display()), n.ty);
            let style =
                if n.op.is::<Parameter>() { ", style=filled, fillcolor=lightblue" } else { "" };
            let _ = writeln!(s, "  n{} [label=\"{label}\"{style}];", id.index());
            for x in &n.inputs {
                let _ = writeln!(s, "  n{} -> n{};", x.index(), id.index());
            }
        }
        for (k, o) in self.outputs.iter().enumerate() {
            let _ = writeln!(
                s,
                "  out{k} [label=\"output {k}\", shape=ellipse];\n  n{} -> out{k};",
                o.index()
            );
        }
        s.push_str("}\n");
        s
    }

    fn write_indented(&self, f: &mut fmt::Formatter<'_>, indent: usize) -> fmt::Result {
        let pad = " ".repeat(indent);
        let args: Vec<String> =
            self.inputs.iter().map(|&i| format!("{i}: {}", self.ty(i))).collect();
        writeln!(f, "{pad}graph({}) {{", args.join(", "))?;
        for (id, n) in self.iter() {
            if n.op.is::<Parameter>() {
                continue;
            }
            let ins: Vec<String> = n.inputs.iter().map(ToString::to_string).collect();
            write!(f, "{pad}  {id}: {} = {}", n.ty, n.op.display())?;
            if !ins.is_empty() {
                write!(f, " {}", ins.join(", "))?;
            }
            writeln!(f)?;
            for g in n.op.subgraphs() {
                g.write_indented(f, indent + 4)?;
                writeln!(f)?;
            }
        }
        let outs: Vec<String> = self.outputs.iter().map(ToString::to_string).collect();
        writeln!(f, "{pad}  return {}", outs.join(", "))?;
        write!(f, "{pad}}}")
    }
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

impl fmt::Display for Graph {
    /// One line per node, like a jaxpr:
    ///
    /// ```text
    /// graph(%0: f64[3]) {
    ///   %1: f64[3] = sin %0
    ///   %2: f64[3] = mul %1, %0
    ///   return %2
    /// }
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_indented(f, 0)
    }
}
