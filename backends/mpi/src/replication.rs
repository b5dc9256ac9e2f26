//! Replication types: which values of a sharded function are the same on
//! every rank (replicated) and which may differ (varying), inferred when the
//! function is traced, and the rewrite that uses them so that the
//! cotangent of a replicated value costs no communication.
//!
//! This is JAX `shard_map`'s convention (`check_vma`, formerly
//! `check_rep`, with `pvary`): a value is **replicated** or **varying**
//! over the mesh, and
//!
//! - a replicated value's cotangent is itself replicated (every rank holds
//!   the whole cotangent), so the transpose of `all_reduce_sum` (varying →
//!   replicated) is the identity ([`Pvary`]), with no communication, and a
//!   replicated result's cotangent enters the per-rank computation as it is;
//! - where a replicated value meets varying ones (`w` used with each rank's
//!   examples), the rewrite inserts [`Pvary`] (the identity, replicated →
//!   varying), whose transpose is the one all-reduce of the backward pass:
//!   the ranks' cotangent contributions summed ([`PsumReplicated`]);
//! - `all_reduce_sum` of a replicated value is `x * p` and `all_gather` of
//!   one is `p` copies side by side: both local, with local transposes;
//! - `all_gather` of a varying value is replicated ([`GatherReplicated`]),
//!   its transpose each rank's own block ([`TakeShard`]), local again; a
//!   sharded argument of `shard_map` is that block of a replicated value.
//!
//! The inner products behind the transposes (the dot-product test) count a
//! replicated value once and sum a varying one over the ranks.
//!
//! The rules, value by value (`R` replicated, `V` varying):
//!
//! | value | type |
//! |---|---|
//! | a replicated argument of `shard_map` (`in_axes` `None`), a tensor it captures, a constant | `R` |
//! | a sharded argument of `shard_map`; every argument, capture and constant of `spmd` | `V` |
//! | `all_reduce_sum`, `all_gather` (of anything), `all_reduce_max`/`broadcast` of `R` | `R` |
//! | `all_reduce_max`/`broadcast` of `V`, `reduce_scatter`, `axis_index` | `V` |
//! | any other op | `R` when all its operands are `R`, else `V` (the `R` operands through `Pvary`) |
//! | an op whose bodies contain a collective (a `map` or `scan` over `all_reduce_sum`) | `V` (its `R` operands through `Pvary`) |
//!
//! The types are sound by construction (`R` only where every rank computes
//! the same value from the same replicated inputs), and conservative: a
//! value that is the same on every rank for a reason the rules do not see
//! (`pmax`'s result, say) is `V`, which costs communication in its
//! transpose, never a wrong result. A `shard_map` result with `out_axes`
//! `None` that is `V` is taken as the program's promise that the ranks hold
//! the same value ([`Replicated`]): its cotangent is split evenly between
//! them (a local division).
//!
//! The inference runs on the graph of the function a sharded function
//! traces, so it applies to the transforms taken *of* the sharded function
//! (`grad(shard_map(f))`, `hessian(data_parallel(loss))`). A transform
//! taken *inside* it (`grad` within `f`) differentiates before the types
//! are known and sees every value as per rank: there the collectives'
//! transposes are their adjoints on the ranks' stacked values
//! (`all_reduce_sumᵀ = all_reduce_sum`), so `grad` inside `f` of a
//! replicated result counts each rank's copy, `p` times JAX's.
//!
//! [`Pvary`]: crate::collectives::Pvary
//! [`PsumReplicated`]: crate::collectives::PsumReplicated
//! [`GatherReplicated`]: crate::collectives::GatherReplicated
//! [`TakeShard`]: crate::collectives::TakeShard
//! [`Replicated`]: crate::collectives::Replicated

use crate::axis::{Axis, AxisKind};
use crate::collectives::{
    AllGather, AllReduce, Broadcast, GatherReplicated, PsumReplicated, Pvary, ReduceScatter,
    SumToRoot, TakeShard,
};
use crate::comm::Reduce;
use anvil_core::function::trace_with;
use anvil_core::replay::{bind, emit, value};
use anvil_core::{Constant, Error, Graph, Op, Parameter, Result, Var};
use anvil_ops::concatenate;
use std::cell::RefCell;

/// Whether a value is the same on every rank of the mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rep {
    /// The same on every rank.
    Replicated,
    /// Possibly different on each rank.
    Varying,
}

use Rep::{Replicated as R, Varying as V};

/// Whether `op`'s bodies (recursively) contain an op with effects (a
/// collective).
fn bodies_communicate(op: &dyn Op) -> bool {
    op.subgraphs()
        .iter()
        .any(|g| g.iter().any(|(_, n)| n.op.has_effects() || bodies_communicate(n.op.as_ref())))
}

fn is_mesh(axis: &Axis) -> bool {
    axis.kind == AxisKind::Mesh
}

/// `graph` typed and rewritten for the mesh `mesh` (see the module docs):
/// `inputs` are its inputs' types, `constants` the type of its constants.
/// Returns the new graph (same signature) and its outputs' types.
///
/// # Errors
/// A graph the rewrite cannot type (a sharded block taken of a varying
/// value); an op's error while re-emitting.
pub fn rewrite(
    graph: &Graph,
    mesh: &Axis,
    inputs: &[Rep],
    constants: Rep,
) -> Result<(Graph, Vec<Rep>)> {
    let out_reps = RefCell::new(Vec::new());
    let g = trace_with(&graph.input_types(), |args| {
        let mut env: Vec<Option<Var>> = vec![None; graph.num_values()];
        let mut reps: Vec<Rep> = vec![V; graph.num_values()];
        // One `Pvary` per replicated value used in varying work.
        let mut varied: Vec<Option<Var>> = vec![None; graph.num_values()];
        for ((&id, a), &r) in graph.inputs().iter().zip(args).zip(inputs) {
            env[id.index()] = Some(a.clone());
            reps[id.index()] = r;
        }
        let pvary = |x: &Var| Var::apply_op(Box::new(Pvary { axis: mesh.clone() }), &[x]);
        let p = mesh.size;
        for (_, node) in graph.iter() {
            let op = node.op.as_ref();
            if op.is::<Parameter>() {
                continue;
            }
            let in_reps: Vec<Rep> = node.inputs.iter().map(|i| reps[i.index()]).collect();
            let x = || value(&env, node.inputs[0]);
            let all_r = in_reps.iter().all(|&r| r == R);
            // Each case: the results and their type.
            let (outs, rep): (Vec<Var>, Rep) = if op.is::<Constant>() {
                (emit(node, &env)?, constants)
            } else if let Some(c) = op.downcast_ref::<AllReduce>().filter(|c| is_mesh(&c.axis)) {
                match (c.reduce, in_reps[0]) {
                    (Reduce::Sum, R) => {
                        let x = x()?;
                        (vec![&x * &x.scalar_like(p as f64)], R)
                    }
                    (Reduce::Sum, V) => {
                        let op = PsumReplicated { axis: c.axis.clone() };
                        (vec![Var::apply_op(Box::new(op), &[&x()?])], R)
                    }
                    (Reduce::Max, R) => (vec![x()?], R),
                    (Reduce::Max, V) => (emit(node, &env)?, V),
                }
            } else if let Some(c) = op.downcast_ref::<PsumReplicated>() {
                match in_reps[0] {
                    R => {
                        let x = x()?;
                        (vec![&x * &x.scalar_like(c.axis.size as f64)], R)
                    }
                    V => (emit(node, &env)?, R),
                }
            } else if let Some(c) = op.downcast_ref::<AllGather>().filter(|c| is_mesh(&c.axis)) {
                match in_reps[0] {
                    R => (vec![tile(&x()?, c.dim, p)], R),
                    V => {
                        let op = GatherReplicated { axis: c.axis.clone(), dim: c.dim };
                        (vec![Var::apply_op(Box::new(op), &[&x()?])], R)
                    }
                }
            } else if let Some(c) = op.downcast_ref::<GatherReplicated>() {
                match in_reps[0] {
                    R => (vec![tile(&x()?, c.dim, c.axis.size)], R),
                    V => (emit(node, &env)?, R),
                }
            } else if op.downcast_ref::<Broadcast>().is_some_and(|c| is_mesh(&c.axis)) {
                match in_reps[0] {
                    R => (vec![x()?], R),
                    V => (emit(node, &env)?, V),
                }
            } else if op.is::<Pvary>() {
                match in_reps[0] {
                    R => (emit(node, &env)?, V),
                    V => (vec![x()?], V),
                }
            } else if op.is::<TakeShard>() {
                if in_reps[0] == V {
                    return Err(Error::invalid(
                        op.name(),
                        "operand",
                        "takes this rank's block of a replicated value, but the value varies \
                         across the ranks (a shard_map nested in a sharded function over the same \
                         processes?)",
                    ));
                }
                (emit(node, &env)?, V)
            } else if (op.downcast_ref::<ReduceScatter>().is_some_and(|c| is_mesh(&c.axis))
                || op.downcast_ref::<SumToRoot>().is_some_and(|c| is_mesh(&c.axis))
                || bodies_communicate(op))
                || !all_r
            {
                // Varying work: its replicated operands go through Pvary.
                let mut ins = Vec::with_capacity(node.inputs.len());
                for (&i, &r) in node.inputs.iter().zip(&in_reps) {
                    let v = value(&env, i)?;
                    ins.push(match r {
                        V => v,
                        R => varied[i.index()].get_or_insert_with(|| pvary(&v)).clone(),
                    });
                }
                let refs: Vec<&Var> = ins.iter().collect();
                (Var::apply_op_n(op.boxed(), &refs, node.num_results()), V)
            } else {
                // Every operand replicated (or none): the same on every rank.
                (emit(node, &env)?, R)
            };
            for v in node.results() {
                reps[v.index()] = rep;
            }
            bind(&mut env, node, outs);
        }
        *out_reps.borrow_mut() = graph.outputs().iter().map(|o| reps[o.index()]).collect();
        graph.outputs().iter().map(|&o| value(&env, o)).collect()
    })?;
    Ok((g, out_reps.into_inner()))
}

/// `p` copies of `x` side by side along `dim` (an all-gather of a value
/// every rank holds).
pub(crate) fn tile(x: &Var, dim: usize, p: usize) -> Var {
    if p == 1 {
        return x.clone();
    }
    let copies = vec![x; p];
    concatenate(&copies, dim as i64)
}
