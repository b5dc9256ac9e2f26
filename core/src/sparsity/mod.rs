//! Sparsity detection: which inputs each element of each value of a graph
//! depends on, propagated node by node by rules registered per op.
//!
//! This is the transform behind sparse Jacobians and Hessians: the index
//! sets of a function's outputs, with its inputs' elements numbered as
//! columns, are its Jacobian's pattern, `(out, in)` oriented (row = output
//! element, column = input element, both row-major over the leaves, leaves
//! concatenated). Input indices are [`Index`] = `u32` (see [`sets`]). The
//! pattern is *global*: it holds for every value of the inputs (it is what
//! the graph's structure allows; `max(a, b)` depends on both), so it is
//! computed once per input signature and cached with the compiled plan.
//!
//! A rule ([`SparsityRule`], registered with
//! `register_rule!(SparsityRule, MyOp, my_rule)` beside the op, like its
//! vmap and jvp rules) maps its operands' index sets ([`SparsityArg`]) to
//! its results'. It also sees operands whose values are known when the
//! graph is traced — captured constants and integer values computed from
//! them ([`Detector::evaluator`]) — so a `take` by constant indices is
//! exact. The interpreter ([`Detector::propagate`]) looks rules up in this
//! order:
//!
//! 1. an op whose results are not float (comparisons, `argmax`, integer
//!    arithmetic) has no derivative: empty sets;
//! 2. an op none of whose operands depends on an input (constants,
//!    generators, seeds) neither does: empty sets;
//! 3. the registered rule;
//! 4. an elementwise op ([`Op::is_elementwise`]): the union of its
//!    broadcast operands (the fact-based rule, as rewriting has one), so an
//!    elementwise plugin op needs no rule;
//! 5. otherwise the op is taken as dense — every result element depends on
//!    every element of every operand — and a warning naming it is printed
//!    once per process ([`dense_fallbacks`] lists them). Never a silent
//!    zero.
//!
//! Rules of higher-order ops run the interpreter on their bodies
//! ([`Detector::compose_body`]): `map` composes its body's pattern with
//! each iteration's slices. Loops (`scan`, `while`) compose their body
//! with the carry until the carry's sets stop growing (a fixpoint: sets
//! only grow and are bounded by the inputs), and a conditional takes the
//! union over its branches; their rules belong beside those ops.
//!
//! Second order: a Hessian's pattern is the pattern of the Jacobian of the
//! gradient, found by running this interpreter on the gradient's graph
//! (`anvil_transforms::sparse`), so the same first-order rules serve both.

pub mod sets;

pub use sets::{
    broadcast_positions, strided_positions, strides_i64, Builder, Index, IndexSets, Union,
    NO_SOURCE,
};

use crate::error::{Error, Result};
use crate::eval::Evaluator;
use crate::graph::{Constant, Graph, Parameter};
use crate::op::Op;
use crate::rules::RuleFn;
use crate::shape::TensorType;
use crate::tensor::Tensor;
use std::any::TypeId;
use std::sync::{Arc, Mutex};

/// The node after which each value is not read any more (`None` for the
/// outputs and values nobody reads).
fn last_uses(graph: &Graph) -> Vec<Option<crate::graph::NodeId>> {
    let mut last = vec![None; graph.num_values()];
    for (id, n) in graph.iter() {
        for i in &n.inputs {
            last[i.index()] = Some(id);
        }
    }
    for o in graph.outputs() {
        last[o.index()] = None;
    }
    last
}

/// One operand as a sparsity rule sees it.
#[derive(Clone, Copy, Debug)]
pub struct SparsityArg<'a> {
    /// Which inputs each of its elements depends on.
    pub sets: &'a Arc<IndexSets>,
    /// Its type.
    pub ty: &'a TensorType,
    /// Its value, when known at trace time (a captured constant, integer
    /// values computed from constants).
    pub value: Option<&'a Tensor>,
}

/// A sparsity rule for an op with one result: the index sets of the
/// result (of type `out`) from the operands'.
pub type SparsityFn = fn(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>>;

/// A sparsity rule for an op with several results: one set per result.
pub type SparsityManyFn = fn(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>>;

crate::registry_entry! {
    /// A registered sparsity rule.
    pub struct SparsityRule { rule: RuleFn<SparsityFn, SparsityManyFn> }, "sparsity rule", sparsity_rules
}

impl SparsityRule {
    /// The index sets of `op`'s results.
    ///
    /// # Errors
    /// The rule's error.
    pub fn apply(
        &self,
        op: &dyn Op,
        args: &[SparsityArg<'_>],
        outs: &[TensorType],
        cx: &Detector<'_>,
    ) -> Result<Vec<Arc<IndexSets>>> {
        match self.rule {
            RuleFn::One(f) => match outs {
                [out] => Ok(vec![f(op, args, out, cx)?]),
                _ => Err(Error::invalid(
                    op.name(),
                    "sparsity rule",
                    format!(
                        "registered in the one-result form, but the op has {} results",
                        outs.len()
                    ),
                )),
            },
            RuleFn::Many(f) => f(op, args, outs, cx),
        }
    }
}

static DENSE: Mutex<Vec<(TypeId, &'static str)>> = Mutex::new(Vec::new());

/// The ops sparsity detection has treated as dense because they have no
/// sparsity rule, in the order first met (each is warned about once per
/// process).
pub fn dense_fallbacks() -> Vec<&'static str> {
    DENSE.lock().map(|f| f.iter().map(|(_, n)| *n).collect()).unwrap_or_default()
}

fn warn_dense_once(op: &dyn Op) {
    if let Ok(mut seen) = DENSE.lock() {
        if !seen.iter().any(|(t, _)| *t == op.op_type()) {
            seen.push((op.op_type(), op.name()));
            log::warn!(
                "op `{}` has no sparsity rule; sparsity detection treats it as dense \
                 (every result element depends on every operand element). Register a SparsityRule for it.",
                op.name()
            );
        }
    }
}

/// The default limit on the entries of one value's index sets.
pub const DEFAULT_MAX_ENTRIES: usize = 1 << 28;

/// Integer values up to this many elements are computed at trace time
/// when their operands are known (indices built from `iota`).
const MAX_KNOWN: usize = 1 << 22;

/// The sparsity interpreter and its settings.
///
/// ```
/// use anvil_core::sparsity::{Detector, IndexSets};
/// use anvil_core::{trace_with, DType, TensorType};
/// // A graph that returns its input: the identity pattern.
/// let g = trace_with(&[TensorType::new(DType::F64, vec![3])], |x| Ok(x.to_vec()))?;
/// let x = std::sync::Arc::new(IndexSets::identity(3, 0)?);
/// let out = Detector::new().propagate(&g, &[x], &[None])?;
/// assert_eq!(out[0].row(1), &[1]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct Detector<'a> {
    evaluator: Option<&'a dyn Evaluator>,
    max_entries: usize,
}

impl std::fmt::Debug for Detector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector")
            .field("evaluator", &self.evaluator.is_some())
            .field("max_entries", &self.max_entries)
            .finish()
    }
}

impl Default for Detector<'_> {
    fn default() -> Self {
        Detector::new()
    }
}

impl<'a> Detector<'a> {
    /// A detector that knows only captured constants, with the default
    /// limit of [`DEFAULT_MAX_ENTRIES`] entries per value.
    pub fn new() -> Detector<'a> {
        Detector { evaluator: None, max_entries: DEFAULT_MAX_ENTRIES }
    }

    /// Computes integer and boolean values whose operands are known (up to
    /// 4M elements) with `eval` (a backend), so that indices computed from
    /// constants and `iota`s are known to the rules of `take` and
    /// `scatter_add`.
    pub fn evaluator(mut self, eval: &'a dyn Evaluator) -> Detector<'a> {
        self.evaluator = Some(eval);
        self
    }

    /// The largest number of entries one value's index sets may hold (a
    /// dense intermediate of a large function is an error, not an
    /// allocation of gigabytes).
    pub fn max_entries(mut self, n: usize) -> Detector<'a> {
        self.max_entries = n;
        self
    }

    /// The index sets of `graph`'s outputs given its inputs' (one per
    /// input, of the input's size) and their values where known.
    ///
    /// # Errors
    /// A rule's error; index sets of the wrong size; a value beyond the
    /// limit of entries.
    pub fn propagate(
        &self,
        graph: &Graph,
        inputs: &[Arc<IndexSets>],
        known: &[Option<Tensor>],
    ) -> Result<Vec<Arc<IndexSets>>> {
        crate::function::check_arity("sparsity", Some(graph.inputs().len()), inputs.len())?;
        let _pool = sets::pool::install();
        let last_use = last_uses(graph);
        let mut sets: Vec<Option<Arc<IndexSets>>> = vec![None; graph.num_values()];
        let mut values: Vec<Option<Tensor>> = vec![None; graph.num_values()];
        for (k, (&v, s)) in graph.inputs().iter().zip(inputs).enumerate() {
            if s.len() != graph.ty(v).numel() {
                return Err(Error::invalid(
                    "sparsity",
                    format!("input {k}"),
                    format!("{} index sets for a value of type {}", s.len(), graph.ty(v)),
                ));
            }
            sets[v.index()] = Some(s.clone());
            values[v.index()] = known.get(k).cloned().flatten();
        }
        for (id, node) in graph.iter() {
            if node.op.is::<Parameter>() {
                continue;
            }
            let outs: Vec<TensorType> = node.results().map(|v| graph.ty(v).clone()).collect();
            if let Some(c) = node.op.downcast_ref::<Constant>() {
                sets[node.out().index()] = Some(Arc::new(IndexSets::empty(c.value.numel())));
                values[node.out().index()] = Some(c.value.clone());
                continue;
            }
            let ins: Vec<(Arc<IndexSets>, TensorType, Option<Tensor>)> = node
                .inputs
                .iter()
                .map(|&i| {
                    let s = sets[i.index()].clone().ok_or_else(|| Error::InvalidGraph {
                        node: i.index(),
                        msg: format!("value {i} has no index sets"),
                    })?;
                    Ok((s, graph.ty(i).clone(), values[i.index()].clone()))
                })
                .collect::<Result<_>>()?;
            let args: Vec<SparsityArg<'_>> = ins
                .iter()
                .map(|(s, t, v)| SparsityArg { sets: s, ty: t, value: v.as_ref() })
                .collect();
            let results = self.node(node.op.as_ref(), &args, &outs)?;
            let computed = self.known_values(node.op.as_ref(), &args, &outs);
            for (k, (v, s)) in node.results().zip(results).enumerate() {
                sets[v.index()] = Some(s);
                values[v.index()] = computed.as_ref().and_then(|c| c.get(k).cloned());
            }
            drop(ins);
            for &i in &node.inputs {
                if last_use[i.index()] == Some(id) {
                    if let Some(Ok(dead)) = sets[i.index()].take().map(Arc::try_unwrap) {
                        sets::pool::recycle(dead);
                    }
                }
            }
        }
        graph
            .outputs()
            .iter()
            .map(|o| {
                sets[o.index()].clone().ok_or_else(|| Error::InvalidGraph {
                    node: o.index(),
                    msg: "an output has no index sets".into(),
                })
            })
            .collect()
    }

    /// One node's result sets, by the lookup order of the module docs,
    /// checked for size and the limit of entries.
    fn node(
        &self,
        op: &dyn Op,
        args: &[SparsityArg<'_>],
        outs: &[TensorType],
    ) -> Result<Vec<Arc<IndexSets>>> {
        let empty = || outs.iter().map(|t| Arc::new(IndexSets::empty(t.numel()))).collect();
        if outs.iter().all(|t| !t.dtype().is_float()) || args.iter().all(|a| a.sets.is_zero()) {
            return Ok(empty());
        }
        let results = match sparsity_rules().lookup(op)? {
            Some(rule) => rule.apply(op, args, outs, self)?,
            None if op.is_elementwise() && outs.len() == 1 => {
                vec![elementwise(op, args, &outs[0], self)?]
            }
            None => {
                warn_dense_once(op);
                dense(op, args, outs, self)?
            }
        };
        if results.len() != outs.len() {
            return Err(Error::invalid(
                op.name(),
                "sparsity rule",
                format!("gave {} results for {}", results.len(), outs.len()),
            ));
        }
        results
            .into_iter()
            .zip(outs)
            .map(|(s, t)| {
                if s.len() != t.numel() {
                    return Err(Error::invalid(
                        op.name(),
                        "sparsity rule",
                        format!("gave {} index sets for a result of type {t}", s.len()),
                    ));
                }
                self.check_size(op, &s)?;
                Ok(if t.dtype().is_float() { s } else { Arc::new(IndexSets::empty(t.numel())) })
            })
            .collect()
    }

    /// Errs when `sets` holds more entries than allowed.
    ///
    /// # Errors
    /// The limit exceeded, naming the op.
    pub fn check_size(&self, op: &dyn Op, sets: &IndexSets) -> Result<()> {
        self.check_entries(op, sets.nnz())
    }

    /// Errs when `n` entries are more than allowed.
    ///
    /// # Errors
    /// The limit exceeded, naming the op.
    pub fn check_entries(&self, op: &dyn Op, n: usize) -> Result<()> {
        if n > self.max_entries {
            return Err(Error::invalid(
                op.name(),
                "sparsity",
                format!(
                    "its result depends on {n} (element, input) pairs, more than the limit of {}: \
                     the function is too dense for sparse differentiation (use jacfwd/jacrev)",
                    self.max_entries
                ),
            ));
        }
        Ok(())
    }

    /// The values of integer results whose operands are all known.
    fn known_values(
        &self,
        op: &dyn Op,
        args: &[SparsityArg<'_>],
        outs: &[TensorType],
    ) -> Option<Vec<Tensor>> {
        let eval = self.evaluator?;
        let index_like = outs.iter().all(|t| !t.dtype().is_float() && t.numel() <= MAX_KNOWN);
        if !index_like || op.is::<Parameter>() {
            return None;
        }
        let inputs: Option<Vec<&Tensor>> = args.iter().map(|a| a.value).collect();
        match eval.evaluate(op, &inputs?, outs)? {
            Ok(v) if v.len() == outs.len() => Some(v),
            _ => None,
        }
    }

    /// The index sets of `body`'s outputs for an op that runs it `size`
    /// times (`Some(mapped)`, [`Map`]-like: operand `k` is sliced along
    /// axis 0 when `mapped[k]`, each iteration's results stacked along a new
    /// axis 0), or once (`None`: the operands are the body's inputs): the
    /// body's own pattern over its inputs' elements, composed with each
    /// iteration's operands.
    ///
    /// [`Map`]: https://docs.rs/anvil-ops (anvil_ops::control::Map)
    ///
    /// # Errors
    /// The body's detection failing; operands that do not fit the body.
    pub fn compose_body(
        &self,
        op: &dyn Op,
        body: &Graph,
        args: &[SparsityArg<'_>],
        mapped: Option<(&[bool], usize)>,
    ) -> Result<Vec<Arc<IndexSets>>> {
        let is_mapped = |k: usize| mapped.is_some_and(|(m, _)| m.get(k) == Some(&true));
        let known: Vec<Option<&Tensor>> = args
            .iter()
            .enumerate()
            .map(|(k, a)| if is_mapped(k) { None } else { a.value })
            .collect();
        let pattern = self.body_pattern(op, body, &known)?;
        let sets: Vec<&IndexSets> = args.iter().map(|a| a.sets.as_ref()).collect();
        pattern.compose(self, op, &sets, mapped, 0..body.outputs().len())
    }

    /// `body`'s pattern over its own inputs' elements (numbered locally),
    /// computed once, for rules that compose it with several operand sets
    /// (a loop's fixpoint). `known[k]`: input `k`'s value when it is the
    /// same in every run of the body.
    ///
    /// # Errors
    /// The body's detection failing; `known` of the wrong length.
    pub fn body_pattern(
        &self,
        op: &dyn Op,
        body: &Graph,
        known: &[Option<&Tensor>],
    ) -> Result<BodyPattern> {
        let types = body.input_types();
        if types.len() != known.len() {
            return Err(Error::Arity {
                what: op.name().into(),
                kind: "operands (for its body)".into(),
                expected: types.len(),
                got: known.len(),
            });
        }
        let mut local = Vec::with_capacity(types.len());
        let mut starts = Vec::with_capacity(types.len() + 1);
        let mut next = 0usize;
        for t in &types {
            starts.push(next);
            local.push(Arc::new(IndexSets::identity(t.numel(), next)?));
            next += t.numel();
        }
        starts.push(next);
        let known: Vec<Option<Tensor>> = known.iter().map(|v| v.cloned()).collect();
        let outputs = self.propagate(body, &local, &known)?;
        let sizes = types.iter().map(TensorType::numel).collect();
        Ok(BodyPattern { outputs, starts, sizes })
    }
}

/// A body's pattern over its own inputs (see [`Detector::body_pattern`]).
#[derive(Clone, Debug)]
pub struct BodyPattern {
    /// The index sets of each output over the body's inputs' elements,
    /// numbered input after input.
    pub outputs: Vec<Arc<IndexSets>>,
    starts: Vec<usize>,
    sizes: Vec<usize>,
}

impl BodyPattern {
    /// The sets of outputs `which` when the body's inputs have the sets
    /// `args` (one per input; operand `k` of `size` stacked slices when
    /// `mapped[k]`, the results then stacked along a new axis 0 likewise).
    ///
    /// # Errors
    /// Operands of the wrong number or size; the limit of entries.
    pub fn compose(
        &self,
        cx: &Detector<'_>,
        op: &dyn Op,
        args: &[&IndexSets],
        mapped: Option<(&[bool], usize)>,
        which: std::ops::Range<usize>,
    ) -> Result<Vec<Arc<IndexSets>>> {
        let is_mapped = |k: usize| mapped.is_some_and(|(m, _)| m.get(k) == Some(&true));
        let size = mapped.map_or(1, |(_, s)| s);
        if args.len() != self.sizes.len() {
            return Err(Error::Arity {
                what: op.name().into(),
                kind: "operands (for its body)".into(),
                expected: self.sizes.len(),
                got: args.len(),
            });
        }
        for (k, (a, &n)) in args.iter().zip(&self.sizes).enumerate() {
            let want = if is_mapped(k) { n * size } else { n };
            if a.len() != want {
                return Err(Error::invalid(
                    op.name(),
                    format!("operand {k}"),
                    format!("{} index sets for a body input of {n} elements", a.len()),
                ));
            }
        }
        let owner = |l: usize| self.starts.partition_point(|&s| s <= l) - 1;
        self.outputs[which]
            .iter()
            .map(|out| {
                let per = out.len();
                let mut b = Builder::new(per * size, out.nnz());
                let mut u = Union::default();
                for it in 0..size {
                    for e in 0..per {
                        let rows = out.row(e).iter().map(|&l| {
                            let k = owner(l as usize);
                            let off = l as usize - self.starts[k];
                            let at = if is_mapped(k) { it * self.sizes[k] + off } else { off };
                            args[k].row(at)
                        });
                        b.push_union(&mut u, rows);
                    }
                }
                let s = b.finish();
                cx.check_size(op, &s)?;
                Ok(Arc::new(s))
            })
            .collect()
    }
}

/// The elementwise union of two families of index sets of one length.
///
/// # Errors
/// Lengths that differ.
pub fn merge(a: &IndexSets, b: &IndexSets) -> Result<IndexSets> {
    if a.len() != b.len() {
        return Err(Error::invalid(
            "sparsity",
            "merge",
            format!("index sets of {} and {} elements", a.len(), b.len()),
        ));
    }
    let mut out = Builder::new(a.len(), a.nnz().max(b.nnz()));
    for (x, y) in a.rows().zip(b.rows()) {
        out.push_merge(x, y);
    }
    Ok(out.finish())
}

/// The rule of elementwise ops (registered or by the fact): the union of
/// the operands, broadcast to the result. Exact for any op whose every
/// partial derivative is generically nonzero.
///
/// # Errors
/// Operands that do not broadcast to the result.
pub fn elementwise(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    // One operand that depends on anything, of the result's shape: its sets.
    let mut live = args.iter().filter(|a| !a.sets.is_zero());
    if let (Some(a), None) = (live.next(), live.next()) {
        if a.ty.shape() == out.shape() {
            return Ok(a.sets.clone());
        }
    }
    let parts: Vec<(&IndexSets, &[usize])> =
        args.iter().map(|a| (&**a.sets, a.ty.shape())).collect();
    let s = IndexSets::union_broadcast(&parts, out.shape())?;
    cx.check_size(op, &s)?;
    Ok(Arc::new(s))
}

/// The rule of ops whose derivative is zero (`floor`, `sign`,
/// `stop_gradient`): no dependency.
///
/// # Errors
/// None; the signature is a rule's.
pub fn zero(
    _: &dyn Op,
    _: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    Ok(Arc::new(IndexSets::empty(out.numel())))
}

/// The rule of ops that keep operand 0's elements in order (`reshape`):
/// its sets as they are.
///
/// # Errors
/// None; the signature is a rule's.
pub fn same(
    _: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    match args.first() {
        Some(a) if a.sets.len() == out.numel() => Ok(a.sets.clone()),
        _ => {
            Err(Error::invalid("sparsity", "operands", "expected one operand of the result's size"))
        }
    }
}

/// The fallback for an op without a rule: every result element depends on
/// everything every operand depends on.
///
/// # Errors
/// The limit of entries exceeded.
pub fn dense(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let mut all = Builder::new(1, 0);
    let mut u = Union::default();
    all.push_union(&mut u, args.iter().flat_map(|a| a.sets.rows()));
    let all = all.finish();
    outs.iter()
        .map(|t| {
            cx.check_entries(op, all.nnz().saturating_mul(t.numel()))?;
            Ok(Arc::new(all.union_all(t.numel())))
        })
        .collect()
}
