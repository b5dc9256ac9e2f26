//! The graph IR: an arena of nodes in topological order, each with one or
//! several results.
//!
//! A [`Graph`] holds its nodes in a `Vec` indexed by [`NodeId`] and its
//! values in another indexed by [`ValueId`] (both `u32` newtypes, as in
//! cranelift and egg). A value is result `k` of one node, as a jaxpr
//! equation has several outvars and a cranelift instruction several
//! results: `eigh` gives `(w, V)`, a `scan` its carries and its stacked
//! outputs. Nothing packs several results into one array. Every value has a
//! static [`TensorType`]; a node's operands are values defined earlier, so
//! evaluation is a forward loop and reverse mode a backward one. Function
//! inputs are [`Parameter`] nodes, captured tensors [`Constant`] nodes — the
//! two structural ops the IR itself needs; every other op lives outside
//! `core`.
//!
//! Higher-order ops hold their bodies as [`SubGraph`]s, which compare and
//! hash by structure (with a cached content hash), so two identical bodies
//! share CSE and plan-cache entries whatever `Arc` holds them.
//!
//! [`Graph::verify`] checks the invariants; [`Graph::rebuild`] is the one
//! loop that copies a graph node by node (every pass that edits a graph
//! goes through it); the graph prints as text (`Display`, one line per node
//! like a jaxpr) and as Graphviz DOT, bodies included.

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::shape::TensorType;
use crate::tensor::{Storage, Tensor};
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $name {
            /// The index into the graph's arena.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// An id from an index.
            ///
            /// # Errors
            /// [`Error::GraphTooLarge`] past `u32::MAX`.
            pub fn from_index(i: usize) -> Result<$name> {
                u32::try_from(i)
                    .map($name)
                    .map_err(|_| Error::GraphTooLarge { max: u64::from(u32::MAX) })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// The index of a node (an operation) in its graph.
    NodeId,
    "#"
);
id_type!(
    /// The index of a value (one result of a node) in its graph. Values are
    /// numbered in definition order, so an operand's id is smaller than the
    /// ids of its users' results.
    ValueId,
    "%"
);

/// One operation applied to earlier values, with its results.
#[derive(Clone, Debug)]
pub struct Node {
    /// What the node computes.
    pub op: Box<dyn Op>,
    /// Its operands, all defined earlier in the graph.
    pub inputs: Vec<ValueId>,
    first: u32,
    count: u32,
}

impl Node {
    /// The values this node defines, in result order.
    pub fn results(&self) -> impl ExactSizeIterator<Item = ValueId> + Clone {
        (self.first..self.first + self.count).map(ValueId)
    }

    /// Result `k`, if the node has one.
    pub fn result(&self, k: usize) -> Option<ValueId> {
        let k = u32::try_from(k).ok()?;
        (k < self.count).then_some(ValueId(self.first + k))
    }

    /// The number of results.
    pub fn num_results(&self) -> usize {
        self.count as usize
    }

    /// The first result (nodes of single-result ops have just this one).
    pub fn out(&self) -> ValueId {
        ValueId(self.first)
    }
}

#[derive(Clone, Debug)]
struct ValueInfo {
    node: NodeId,
    index: u32,
    ty: TensorType,
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
    fn parameter_index(&self) -> Option<usize> {
        Some(self.index)
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
                (Storage::F64(x), Storage::F64(y)) => Arc::ptr_eq(x, y) || bits_eq(x, y),
                (Storage::F32(x), Storage::F32(y)) => Arc::ptr_eq(x, y) || bits_eq(x, y),
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
    fn constant_value(&self) -> Option<&Tensor> {
        Some(&self.value)
    }
}

/// The size of a dimension as a scalar value (rank 0, of `dtype`): a
/// symbolic dimension used as a number (`mean` over a symbolic axis divides
/// by it). A plan evaluates it from the binding of its call (see
/// [`crate::shape::Binding`]); it has no operands, so every transform
/// passes it through unchanged (no tangent, never batched).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DimSize {
    /// The dimension (a size or a symbolic dimension).
    pub dim: usize,
    /// The value's dtype.
    pub dtype: crate::DType,
}

impl Op for DimSize {
    fn name(&self) -> &'static str {
        "dim_size"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        crate::op::expect_arity(self, inputs, 0)?;
        if !crate::shape::is_valid_dim(self.dim) {
            return Err(Error::invalid("dim_size", "dim", "not a dimension"));
        }
        Ok(TensorType::scalar(self.dtype))
    }
    fn params(&self) -> String {
        format!("dim={}", crate::shape::fmt_dim(self.dim))
    }
    fn bind_dims(&self, binding: &crate::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        Ok(Some(Box::new(Constant { value: self.evaluate(binding)? })))
    }
}

impl DimSize {
    /// The value under `binding`, as a rank-0 tensor of the op's dtype.
    ///
    /// # Errors
    /// An unbound variable.
    pub fn evaluate(&self, binding: &crate::shape::Binding) -> Result<Tensor> {
        let n = binding.eval(self.dim)?;
        Ok(match self.dtype {
            crate::DType::I64 => Tensor::scalar(i64::try_from(n).unwrap_or(i64::MAX)),
            d => Tensor::scalar(n as f64).cast(d),
        })
    }
}

/// `op` with its parameters and bodies bound (see [`Graph::bind_dims`]).
///
/// # Errors
/// As [`Graph::bind_dims`].
pub fn bind_op(op: &dyn Op, binding: &crate::shape::Binding) -> Result<Box<dyn Op>> {
    let op = op.bind_dims(binding)?.unwrap_or_else(|| op.boxed());
    let bodies = op.subgraphs();
    if bodies.is_empty() {
        return Ok(op);
    }
    let bound = bodies.iter().map(|g| g.bind_dims(binding)).collect::<Result<Vec<_>>>()?;
    op.with_subgraphs(bound).ok_or_else(|| {
        Error::invalid(op.name(), "bodies", "cannot be specialised for a binding of its dimensions")
    })
}

/// A computation: nodes in topological order, the input values and the
/// output values.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    values: Vec<ValueInfo>,
    inputs: Vec<ValueId>,
    outputs: Vec<ValueId>,
}

/// The values of the old graph that [`Graph::rebuild`] has mapped into the
/// new one so far.
#[derive(Debug)]
pub struct Mapped<'a>(&'a [Option<ValueId>]);

impl Mapped<'_> {
    /// The new value standing for old value `v`.
    ///
    /// # Errors
    /// [`Error::InvalidGraph`] when `v` has not been mapped (dropped, or
    /// not defined yet).
    pub fn get(&self, v: ValueId) -> Result<ValueId> {
        self.0.get(v.index()).copied().flatten().ok_or_else(|| Error::InvalidGraph {
            node: v.index(),
            msg: format!("value {v} was not copied by the pass"),
        })
    }
}

/// What [`Graph::rebuild`] does with one node of the old graph.
#[derive(Debug)]
pub enum Rebuilt {
    /// Copy it as it is (its operands mapped into the new graph).
    Copy,
    /// Leave it out (the pass drops or replaces every node that reads its
    /// results; an output that needs one is an error).
    Drop,
    /// Its results are these values of the new graph (one per result).
    Replace(Vec<ValueId>),
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// Adds an input of type `ty`; inputs are numbered in the order added.
    ///
    /// # Errors
    /// [`Error::GraphTooLarge`]; a type too large to address.
    pub fn add_input(&mut self, ty: TensorType) -> Result<ValueId> {
        let op = Parameter { index: self.inputs.len(), ty: ty.clone() };
        let node = self.push_node(Box::new(op), vec![], vec![ty])?;
        let v = self.nodes[node.index()].out();
        self.inputs.push(v);
        Ok(v)
    }

    /// The graph with every symbolic dimension evaluated under `binding`:
    /// its types, its ops' parameters ([`Op::bind_dims`]) and its bodies,
    /// recursively. A backend compiles such a copy of a loop's body for one
    /// binding.
    ///
    /// # Errors
    /// A dimension the binding does not determine; an op with bodies that
    /// cannot replace them.
    pub fn bind_dims(&self, binding: &crate::shape::Binding) -> Result<Graph> {
        let mut out = Graph::new();
        let mut map: Vec<Option<ValueId>> = vec![None; self.num_values()];
        let missing =
            |node: usize| Error::InvalidGraph { node, msg: "an operand is unmapped".into() };
        for (id, n) in self.iter() {
            if n.op.is::<Parameter>() {
                map[n.out().index()] = Some(out.add_input(self.ty(n.out()).bind(binding)?)?);
                continue;
            }
            let ins = n
                .inputs
                .iter()
                .map(|i| map[i.index()].ok_or_else(|| missing(id.index())))
                .collect::<Result<Vec<_>>>()?;
            let types = n.results().map(|v| self.ty(v).bind(binding)).collect::<Result<_>>()?;
            let new = out.push_node(bind_op(n.op.as_ref(), binding)?, ins, types)?;
            let results: Vec<ValueId> = out.node(new).results().collect();
            for (v, r) in n.results().zip(results) {
                map[v.index()] = Some(r);
            }
        }
        let outputs = self
            .outputs()
            .iter()
            .map(|o| map[o.index()].ok_or_else(|| missing(o.index())))
            .collect::<Result<Vec<_>>>()?;
        out.set_outputs(outputs);
        Ok(out)
    }

    /// Appends `op` applied to `inputs`, checking ids and inferring the
    /// result types; returns the new node.
    ///
    /// # Errors
    /// An operand that is not in the graph, the op's shape rule failing, a
    /// result too large to address.
    pub fn push(&mut self, op: Box<dyn Op>, inputs: &[ValueId]) -> Result<NodeId> {
        if let Some(bad) = inputs.iter().find(|i| i.index() >= self.values.len()) {
            return Err(Error::InvalidGraph {
                node: self.nodes.len(),
                msg: format!("{} uses {bad}, which is not in the graph", op.name()),
            });
        }
        let tys: Vec<TensorType> = inputs.iter().map(|&i| self.ty(i).clone()).collect();
        let out = op.infer_results(&tys)?;
        for t in &out {
            t.check_size(op.name())?;
        }
        self.push_node(op, inputs.to_vec(), out)
    }

    /// Like [`Graph::push`] for an op with exactly one result; returns it.
    ///
    /// # Errors
    /// As [`Graph::push`]; an op with several results.
    pub fn push_one(&mut self, op: Box<dyn Op>, inputs: &[ValueId]) -> Result<ValueId> {
        let name = op.name();
        let node = self.push(op, inputs)?;
        single(name, &self.nodes[node.index()])
    }

    /// Appends a node whose result types the caller has already computed
    /// (passes that copy nodes between graphs); [`Graph::verify`] re-checks
    /// them.
    ///
    /// # Errors
    /// [`Error::GraphTooLarge`].
    pub fn push_node(
        &mut self,
        op: Box<dyn Op>,
        inputs: Vec<ValueId>,
        types: Vec<TensorType>,
    ) -> Result<NodeId> {
        let id = NodeId::from_index(self.nodes.len())?;
        let first = ValueId::from_index(self.values.len())?;
        let count = u32::try_from(types.len())
            .ok()
            .filter(|c| first.0.checked_add(*c).is_some())
            .ok_or(Error::GraphTooLarge { max: u64::from(u32::MAX) })?;
        for (k, ty) in types.into_iter().enumerate() {
            self.values.push(ValueInfo { node: id, index: k as u32, ty });
        }
        self.nodes.push(Node { op, inputs, first: first.0, count });
        Ok(id)
    }

    /// Sets the outputs.
    pub fn set_outputs(&mut self, outputs: Vec<ValueId>) {
        self.outputs = outputs;
    }

    /// The node with this id.
    ///
    /// # Panics
    /// If `id` is not from this graph (an internal invariant, not user input).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The type of a value.
    ///
    /// # Panics
    /// If `v` is not from this graph.
    pub fn ty(&self, v: ValueId) -> &TensorType {
        &self.values[v.index()].ty
    }

    /// The node defining `v` and which of its results `v` is.
    ///
    /// # Panics
    /// If `v` is not from this graph.
    pub fn producer(&self, v: ValueId) -> (NodeId, usize) {
        let info = &self.values[v.index()];
        (info.node, info.index as usize)
    }

    /// The node defining `v`.
    pub fn producer_node(&self, v: ValueId) -> &Node {
        self.node(self.producer(v).0)
    }

    /// All nodes, in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Nodes with their ids.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (NodeId, &Node)> {
        self.nodes.iter().enumerate().map(|(i, n)| (NodeId(i as u32), n))
    }

    /// The input values, in argument order.
    pub fn inputs(&self) -> &[ValueId] {
        &self.inputs
    }

    /// The output values, in result order.
    pub fn outputs(&self) -> &[ValueId] {
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

    /// Number of values.
    pub fn num_values(&self) -> usize {
        self.values.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes apply an op of type `T` (a helper for tests of transforms).
    pub fn count<T: Op>(&self) -> usize {
        self.nodes.iter().filter(|n| n.op.is::<T>()).count()
    }

    /// Copies the graph node by node into a new one — the loop every pass
    /// that edits a graph is built on. Parameters are always copied, in
    /// order, so the signature is unchanged. For every other node, `visit`
    /// gets the new graph, the map of the values copied so far, the old node
    /// and its operands mapped into the new graph (empty when one of them
    /// was dropped: such a node can only be dropped or replaced), and says
    /// whether to copy it, drop it, or which new values replace its results.
    /// The outputs are mapped at the end.
    ///
    /// # Errors
    /// `visit`'s error; a copied node or an output that needs a dropped
    /// value; a replacement with the wrong number of values.
    pub fn rebuild(
        &self,
        mut visit: impl FnMut(&mut Graph, &Mapped<'_>, NodeId, &Node, &[ValueId]) -> Result<Rebuilt>,
    ) -> Result<Graph> {
        let mut out = Graph::new();
        let mut map: Vec<Option<ValueId>> = vec![None; self.values.len()];
        let mut ins = Vec::new();
        for (id, n) in self.iter() {
            if n.op.is::<Parameter>() {
                map[n.first as usize] = Some(out.add_input(self.ty(n.out()).clone())?);
                continue;
            }
            ins.clear();
            let complete = n.inputs.iter().all(|i| map[i.index()].is_some());
            if complete {
                ins.extend(n.inputs.iter().filter_map(|i| map[i.index()]));
            }
            let what = visit(&mut out, &Mapped(&map), id, n, &ins)?;
            let vals = match what {
                Rebuilt::Drop => continue,
                Rebuilt::Copy if complete => {
                    let types = n.results().map(|v| self.ty(v).clone()).collect();
                    let new = out.push_node(n.op.clone(), ins.clone(), types)?;
                    out.node(new).results().collect()
                }
                Rebuilt::Copy => {
                    return Err(rebuild_error(
                        id,
                        n,
                        "is copied but reads a value the pass dropped".into(),
                    ))
                }
                Rebuilt::Replace(vals) if vals.len() == n.num_results() => vals,
                Rebuilt::Replace(vals) => {
                    let msg = format!(
                        "has {} results, a pass replaced them with {} values",
                        n.num_results(),
                        vals.len()
                    );
                    return Err(rebuild_error(id, n, msg));
                }
            };
            for (v, w) in n.results().zip(vals) {
                map[v.index()] = Some(w);
            }
        }
        let outputs =
            self.outputs.iter().map(|&o| Mapped(&map).get(o)).collect::<Result<Vec<_>>>()?;
        out.set_outputs(outputs);
        Ok(out)
    }

    /// Checks the invariants: operands precede users, ids are in range,
    /// every node's result types are what its op's shape rule gives,
    /// parameters are the listed inputs in order, outputs exist. Sub-graphs
    /// are verified too.
    ///
    /// # Errors
    /// [`Error::InvalidGraph`] naming the node and what is wrong.
    pub fn verify(&self) -> Result<()> {
        let bad = |node: usize, msg: String| Err(Error::InvalidGraph { node, msg });
        let mut next_value = 0u32;
        for (i, n) in self.nodes.iter().enumerate() {
            if n.first != next_value {
                return bad(i, format!("{} defines values out of order", n.op.name()));
            }
            next_value += n.count;
            if let Some(x) = n.inputs.iter().find(|x| x.0 >= n.first) {
                return bad(i, format!("{} uses {x}, which does not precede it", n.op.name()));
            }
            let tys: Vec<TensorType> = n.inputs.iter().map(|&x| self.ty(x).clone()).collect();
            let stored: Vec<&TensorType> = n.results().map(|v| self.ty(v)).collect();
            match n.op.infer_results(&tys) {
                Ok(ts) if ts.iter().eq(stored.iter().copied()) => {}
                Ok(ts) => {
                    let show = |v: Vec<String>| v.join(", ");
                    return bad(
                        i,
                        format!(
                            "{} has types {}, its rule gives {}",
                            n.op.name(),
                            show(stored.iter().map(|t| t.to_string()).collect()),
                            show(ts.iter().map(ToString::to_string).collect())
                        ),
                    );
                }
                Err(e) => return bad(i, format!("shape rule fails: {e}")),
            }
            if let Some(p) = n.op.downcast_ref::<Parameter>() {
                if self.inputs.get(p.index) != Some(&n.out()) {
                    return bad(i, format!("parameter {} is not input {}", p.index, p.index));
                }
            }
            for g in n.op.subgraphs() {
                g.verify().map_err(|e| Error::InvalidGraph {
                    node: i,
                    msg: format!("in a body of {}: {e}", n.op.name()),
                })?;
            }
        }
        if next_value as usize != self.values.len() {
            return bad(self.nodes.len(), "values without a node".into());
        }
        if let Some(o) = self.outputs.iter().find(|o| o.index() >= self.values.len()) {
            return bad(self.nodes.len(), format!("output {o} is not in the graph"));
        }
        Ok(())
    }

    /// Whether two graphs are the same computation written the same way:
    /// equal ops (type and parameters) on the same operands, the same types,
    /// inputs and outputs. Bodies compare by structure too.
    pub fn same_structure(&self, other: &Graph) -> bool {
        self.nodes.len() == other.nodes.len()
            && self.inputs == other.inputs
            && self.outputs == other.outputs
            && self.values.iter().zip(&other.values).all(|(a, b)| a.ty == b.ty)
            && self.values.len() == other.values.len()
            && self
                .nodes
                .iter()
                .zip(&other.nodes)
                .all(|(a, b)| a.count == b.count && a.inputs == b.inputs && *a.op == *b.op)
    }

    /// A hash of the structure compared by [`Graph::same_structure`].
    pub fn structure_hash(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.nodes.len().hash(&mut h);
        for n in &self.nodes {
            n.op.hash(&mut h);
            n.inputs.hash(&mut h);
            n.count.hash(&mut h);
        }
        for v in &self.values {
            v.ty.hash(&mut h);
        }
        self.inputs.hash(&mut h);
        self.outputs.hash(&mut h);
        h.finish()
    }

    /// The graph in Graphviz DOT syntax (render with `dot -Tsvg`). The
    /// bodies of higher-order ops are nested clusters.
    pub fn to_dot(&self) -> String {
        let mut s = String::from(
            "digraph anvil {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
        );
        let mut next = 0;
        self.write_dot(&mut s, "g", 1, &mut next);
        for (k, o) in self.outputs.iter().enumerate() {
            let (node, _) = self.producer(*o);
            let _ = writeln!(
                s,
                "  out{k} [label=\"output {k}\", shape=ellipse];\n  g_{} -> out{k} [label=\"{o}\"];",
                node.index()
            );
        }
        s.push_str("}\n");
        s
    }

    fn write_dot(&self, s: &mut String, prefix: &str, depth: usize, next: &mut usize) {
        let pad = "  ".repeat(depth);
        for (id, n) in self.iter() {
            let results: Vec<String> =
                n.results().map(|v| format!("{v}: {}", self.ty(v))).collect();
            let label = format!("{}\\n{}", dot_escape(&n.op.display()), results.join("\\n"));
            let style =
                if n.op.is::<Parameter>() { ", style=filled, fillcolor=lightblue" } else { "" };
            let _ = writeln!(s, "{pad}{prefix}_{} [label=\"{label}\"{style}];", id.index());
            for x in &n.inputs {
                let (src, _) = self.producer(*x);
                let _ = writeln!(
                    s,
                    "{pad}{prefix}_{} -> {prefix}_{} [label=\"{x}\"];",
                    src.index(),
                    id.index()
                );
            }
            for (b, body) in n.op.subgraphs().into_iter().enumerate() {
                *next += 1;
                let inner = format!("{prefix}{}", *next);
                let _ = writeln!(s, "{pad}subgraph cluster_{inner} {{");
                let _ = writeln!(
                    s,
                    "{pad}  label=\"{}: {}\"; style=rounded; color=gray;",
                    dot_escape(n.op.name()),
                    dot_escape(&n.op.subgraph_label(b))
                );
                body.write_dot(s, &inner, depth + 1, next);
                let _ = writeln!(s, "{pad}}}");
                // The body belongs to its node: an invisible edge keeps them together.
                if let Some((last, _)) = body.iter().last() {
                    let _ = writeln!(
                        s,
                        "{pad}{inner}_{} -> {prefix}_{} [style=dashed, arrowhead=none];",
                        last.index(),
                        id.index()
                    );
                }
            }
        }
    }

    fn write_indented(&self, f: &mut fmt::Formatter<'_>, indent: usize) -> fmt::Result {
        let pad = " ".repeat(indent);
        let args: Vec<String> =
            self.inputs.iter().map(|&i| format!("{i}: {}", self.ty(i))).collect();
        writeln!(f, "{pad}graph({}) {{", args.join(", "))?;
        for n in &self.nodes {
            if n.op.is::<Parameter>() {
                continue;
            }
            let outs: Vec<String> = n.results().map(|v| format!("{v}: {}", self.ty(v))).collect();
            let ins: Vec<String> = n.inputs.iter().map(ToString::to_string).collect();
            write!(f, "{pad}  {} = {}", outs.join(", "), n.op.display())?;
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

fn rebuild_error(id: NodeId, n: &Node, msg: String) -> Error {
    Error::InvalidGraph { node: id.index(), msg: format!("{} {msg}", n.op.name()) }
}

/// The one result of `node`, or an error naming the op.
fn single(name: &str, node: &Node) -> Result<ValueId> {
    if node.count == 1 {
        Ok(node.out())
    } else {
        Err(Error::Arity {
            what: name.into(),
            kind: "results (this call takes an op with exactly one)".into(),
            expected: 1,
            got: node.num_results(),
        })
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
    ///
    /// A node with several results lists them: `%3: f64[3], %4: f64[3,3] = eigh %2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_indented(f, 0)
    }
}

/// The body of a higher-order op: a graph behind an `Arc`, compared and
/// hashed by structure (the hash is computed once), so identical bodies
/// built separately are equal ops for CSE and for plan caches.
#[derive(Clone)]
pub struct SubGraph(Arc<Body>);

struct Body {
    graph: Graph,
    hash: u64,
}

impl SubGraph {
    /// Wraps a (verified) graph as a body.
    pub fn new(graph: Graph) -> SubGraph {
        let hash = graph.structure_hash();
        SubGraph(Arc::new(Body { graph, hash }))
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.0.graph
    }
}

impl std::ops::Deref for SubGraph {
    type Target = Graph;
    fn deref(&self) -> &Graph {
        &self.0.graph
    }
}

impl fmt::Debug for SubGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SubGraph({} nodes, hash {:016x})", self.0.graph.len(), self.0.hash)
    }
}

impl PartialEq for SubGraph {
    fn eq(&self, other: &SubGraph) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.hash == other.0.hash && self.0.graph.same_structure(&other.0.graph))
    }
}
impl Eq for SubGraph {}
impl Hash for SubGraph {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash.hash(state);
    }
}

impl From<Graph> for SubGraph {
    fn from(g: Graph) -> SubGraph {
        SubGraph::new(g)
    }
}
