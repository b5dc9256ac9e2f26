//! `cond`: one of several sub-graphs, chosen at run time by an index
//! (`jax.lax.switch`; `jax.lax.cond` is the two-branch case).
//!
//! [`Cond`]'s first operand is the index (an `i64` scalar, clamped to the
//! branches, as in JAX); the others are passed to the branch taken, and
//! every branch returns the same types. Its rules:
//!
//! - **vmap**: an unbatched index keeps a real branch (every branch
//!   batched alike); a batched index evaluates every branch and selects per
//!   element, so a NaN in a branch not taken reaches a gradient through the
//!   select's other side as zero times NaN: guard both sides (the
//!   "double where" pattern, see `anvil::control::cond`).
//! - **jvp**: a `cond` of the branches' jvps.
//! - **transpose**: a `cond` of the branches' transposes: the transpose of
//!   the branch taken.
//! - **sparsity**: the union over the branches (the pattern holds for any
//!   index), or the branch taken when the index is a trace-time constant.

use crate::batching::at_front;
use crate::bodies::{dependent_outputs, jvp_body, transpose_body};
use crate::VarExt;
use anvil_core::sparsity::{Detector, IndexSets, SparsityArg};
use anvil_core::{
    register_rule, Batched, DType, Error, Graph, LinearArg, Op, Result, SubGraph, TensorType, Var,
};
use std::sync::Arc;

/// Runs branch `clamp(index, 0, n - 1)` on the operands after the index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cond {
    /// The branches: each takes the operands after the index and returns
    /// values of the same types as the others.
    pub branches: Vec<SubGraph>,
}

impl Op for Cond {
    fn name(&self) -> &'static str {
        "cond"
    }

    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let (index, operands) = inputs
            .split_first()
            .ok_or_else(|| Error::invalid("cond", "index", "missing (the first operand)"))?;
        if index.dtype() != DType::I64 || index.rank() != 0 {
            return Err(Error::dtype("cond", "0 (index)", index.dtype(), "an i64 scalar"));
        }
        let first = self
            .branches
            .first()
            .ok_or_else(|| Error::invalid("cond", "branches", "needs at least one branch"))?;
        for (b, branch) in self.branches.iter().enumerate() {
            if branch.input_types() != operands {
                return Err(Error::invalid(
                    "cond",
                    format!("branch {b}"),
                    "takes other types than the operands",
                ));
            }
        }
        let outs = first.output_types();
        check_branch_outputs(&self.branches, &outs)?;
        Ok(outs)
    }

    fn params(&self) -> String {
        format!("branches={}", self.branches.len())
    }

    fn subgraphs(&self) -> Vec<&Graph> {
        self.branches.iter().map(SubGraph::graph).collect()
    }

    fn subgraph_label(&self, k: usize) -> String {
        // `cond`'s predicate is the index: branch 0 is `false_fn`.
        format!("branch {k}")
    }

    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        (bodies.len() == self.branches.len())
            .then(|| Box::new(Cond { branches: bodies.into_iter().map(Into::into).collect() }) as _)
    }
}

/// Every branch returns `outs`: an error names the branch, the output
/// index and both types.
pub fn check_branch_outputs(branches: &[SubGraph], outs: &[TensorType]) -> Result<()> {
    for (b, branch) in branches.iter().enumerate().skip(1) {
        let got = branch.output_types();
        if got.len() != outs.len() {
            return Err(Error::invalid(
                "cond",
                format!("branch {b}"),
                format!("returns {} values; branch 0 returns {}", got.len(), outs.len()),
            ));
        }
        for (k, (g, w)) in got.iter().zip(outs).enumerate() {
            if g != w {
                return Err(Error::shape(
                    "cond",
                    &[g.shape(), w.shape()],
                    format!("output {k} of branch {b} is {g}; branch 0 returns {w}"),
                ));
            }
        }
    }
    Ok(())
}

/// Emits a `Cond` on `index` and `operands`.
fn emit(branches: Vec<Graph>, index: &Var, operands: &[Var]) -> Vec<Var> {
    let n = branches.first().map_or(0, |b| b.outputs().len());
    let mut refs: Vec<&Var> = vec![index];
    refs.extend(operands);
    let op = Cond { branches: branches.into_iter().map(Into::into).collect() };
    Var::apply_op_n(Box::new(op), &refs, n)
}

// ------------------------------------------------------------------ vmap

fn vmap_cond(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let c = op.try_downcast::<Cond>()?;
    let (index, operands) = args
        .split_first()
        .ok_or_else(|| Error::invalid("cond", "index", "missing (the first operand)"))?;
    if index.axis.is_some() {
        return select_branches(c, index, operands, size);
    }
    // A real branch: every branch batched alike; an output is batched when
    // it is in any branch.
    let batched: Vec<bool> = operands.iter().map(|b| b.axis.is_some()).collect();
    let mut out_batched = vec![false; c.branches.first().map_or(0, |b| b.outputs().len())];
    for b in &c.branches {
        for (o, d) in out_batched.iter_mut().zip(dependent_outputs(b, &batched)) {
            *o |= d;
        }
    }
    let branches = c
        .branches
        .iter()
        .map(|b| crate::bodies::batch_body(b, &batched, size, &out_batched))
        .collect::<Result<Vec<_>>>()?;
    let vars: Vec<Var> = operands
        .iter()
        .map(|b| if b.axis.is_some() { at_front(b, size) } else { b.var.clone() })
        .collect();
    Ok(emit(branches, &index.var, &vars)
        .into_iter()
        .zip(out_batched)
        .map(|(v, b)| Batched::new(v, b.then_some(0)))
        .collect())
}

/// A batched index: every branch on every element, then a select per
/// element by the clamped index.
fn select_branches(
    c: &Cond,
    index: &Batched,
    operands: &[Batched],
    size: usize,
) -> Result<Vec<Batched>> {
    let n = c.branches.len() as f64;
    let idx = at_front(index, size);
    let idx = idx.maximum(&idx.full_like(0.0)).minimum(&idx.full_like(n - 1.0));
    let mut results: Option<Vec<Var>> = None;
    for (k, branch) in c.branches.iter().enumerate().rev() {
        let outs = anvil_core::interp::vmap_graph(branch.graph(), operands, size)?;
        let outs: Vec<Var> = outs.iter().map(|o| at_front(o, size)).collect();
        results = Some(match results {
            None => outs,
            Some(acc) => outs
                .iter()
                .zip(&acc)
                .map(|(o, a)| {
                    let mut shape = vec![size as i64];
                    shape.extend(std::iter::repeat_n(1, o.rank() - 1));
                    let pick = idx.equal(&idx.full_like(k as f64)).reshape(&shape);
                    pick.select(o, a)
                })
                .collect(),
        });
    }
    Ok(results.unwrap_or_default().into_iter().map(|v| Batched::new(v, Some(0))).collect())
}

register_rule!(VmapRule, Cond, many: vmap_cond);

// ------------------------------------------------------------ derivatives

/// A `cond` of the branches' jvps; a tangent for every output that some
/// branch gives a non-zero one.
fn jvp_cond(
    op: &dyn Op,
    primals: &[Var],
    tangents: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Cond>()?;
    let with_t: Vec<bool> = tangents[1..].iter().map(Option::is_some).collect();
    let mut out_t = vec![false; outs.len()];
    for b in &c.branches {
        for (o, d) in out_t.iter_mut().zip(dependent_outputs(b, &with_t)) {
            *o |= d;
        }
    }
    if !out_t.iter().any(|&t| t) {
        return Ok(vec![None; outs.len()]);
    }
    let branches =
        c.branches.iter().map(|b| jvp_body(b, &with_t, &out_t)).collect::<Result<Vec<_>>>()?;
    let mut operands = primals[1..].to_vec();
    operands.extend(tangents[1..].iter().flatten().cloned());
    let results = emit(branches, &primals[0], &operands);
    let mut touts = results.into_iter().skip(outs.len());
    Ok(out_t.iter().map(|&t| if t { touts.next() } else { None }).collect())
}

/// A `cond` of the branches' transposes with respect to the linear
/// operands: the transpose of the branch taken.
fn transpose_cond(
    op: &dyn Op,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Cond>()?;
    let index = args[0]
        .known()
        .cloned()
        .ok_or_else(|| Error::invalid("cond", "transpose", "the index must be known"))?;
    let linear: Vec<bool> = args[1..].iter().map(LinearArg::is_linear).collect();
    let ct_for: Vec<bool> = cts.iter().map(Option::is_some).collect();
    let branches = c
        .branches
        .iter()
        .map(|b| transpose_body(b, &linear, &ct_for))
        .collect::<Result<Vec<_>>>()?;
    let mut operands: Vec<Var> = args[1..].iter().filter_map(|a| a.known().cloned()).collect();
    operands.extend(cts.iter().flatten().cloned());
    let mut in_cts = emit(branches, &index, &operands).into_iter();
    let mut out = vec![None];
    out.extend(linear.iter().map(|&l| if l { in_cts.next() } else { None }));
    Ok(out)
}

register_rule!(JvpRule, Cond, many: jvp_cond);
register_rule!(TransposeRule, Cond, many: transpose_cond);

// ------------------------------------------------------------------ sparsity

/// The branch taken when the index is known at trace time (a constant);
/// otherwise the union over every branch (the pattern holds for any index).
fn sparsity_cond(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let c = op.try_downcast::<Cond>()?;
    let (index, operands) = args
        .split_first()
        .ok_or_else(|| Error::invalid("cond", "index", "missing (the first operand)"))?;
    let last = c.branches.len().saturating_sub(1);
    let taken: Vec<&SubGraph> = match index.value.and_then(|v| v.to_f64_vec().first().copied()) {
        Some(i) => c.branches.get((i.max(0.0) as usize).min(last)).into_iter().collect(),
        None => c.branches.iter().collect(),
    };
    let mut union: Option<Vec<Arc<IndexSets>>> = None;
    for branch in taken {
        let sets = cx.compose_body(op, branch.graph(), operands, None)?;
        union = Some(match union {
            None => sets,
            Some(u) => u
                .iter()
                .zip(&sets)
                .map(|(a, b)| Ok(Arc::new(anvil_core::sparsity::merge(a, b)?)))
                .collect::<Result<_>>()?,
        });
    }
    let union = union.ok_or_else(|| Error::invalid("cond", "branches", "needs at least one"))?;
    if union.len() != outs.len() {
        return Err(Error::invalid("cond", "sparsity", "a branch returns other values"));
    }
    Ok(union)
}

register_rule!(SparsityRule, Cond, many: sparsity_cond);
