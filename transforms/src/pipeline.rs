//! The compile pipeline: trace → transforms → rewrites → CSE/DCE →
//! constant folding → plan, in one place below the facade.
//!
//! Transforms run while tracing (every transform is a function that emits
//! into the trace), so a traced function is already transformed. What this
//! module adds is the optimisation of the traced graph and the hand-off to
//! a backend: [`optimize`] needs the backend only to fold constants (an
//! [`Evaluator`]), and [`compile`] asks a [`Backend`] for its plan. The
//! facade wires the CPU backend in; nothing here knows it.

use crate::passes::{cse, dce, fold_constants, map_bodies};
use crate::rewrite::rewrite_top;
use anvil_core::function::trace_types;
use anvil_core::{Backend, Evaluator, Function, Graph, Result, TensorType, TreeDef};

/// The graph a call runs: `graph` rewritten to a fixpoint (see
/// [`rewrite`](crate::rewrite::rewrite)), constants folded with `eval`, rewritten again, common
/// subexpressions merged and dead nodes dropped — in bodies too.
///
/// # Errors
/// An invalid graph; a rewrite rule's error.
pub fn optimize(graph: &Graph, eval: &dyn Evaluator) -> Result<Graph> {
    let g = map_bodies(graph, &|body| optimize(body, eval))?;
    let g = dce(&cse(&rewrite_top(&g)?)?)?;
    let folded = fold_constants(&g, eval)?;
    let g = if folded.len() == g.len() && folded.same_structure(&g) {
        g
    } else {
        rewrite_top(&dce(&cse(&folded)?)?)?
    };
    let g = dce(&cse(&g)?)?;
    debug_assert!(g.verify().is_ok(), "optimize built an invalid graph: {:?}", g.verify());
    Ok(g)
}

/// Traces `f` at arguments of structure `def` and leaf types `types`,
/// optimises the graph and compiles it with `backend`; returns the plan
/// and the structure of the outputs.
///
/// # Errors
/// As [`trace_types`], [`optimize`] and [`Backend::plan`].
pub fn compile<F: Function + ?Sized, B: Backend>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
    backend: &B,
) -> Result<(B::Plan, TreeDef)> {
    let (graph, output) = trace_types(f, def, types)?;
    Ok((backend.plan(&optimize(&graph, backend)?)?, output))
}
