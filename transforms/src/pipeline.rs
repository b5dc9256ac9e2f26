//! The compile pipeline: trace → transforms → rewrites → CSE/DCE →
//! constant folding → plan, in one place below the facade.
//!
//! Transforms run while tracing (every transform is a function that emits
//! into the trace), so a traced function is already transformed. What this
//! module adds is the optimisation of the traced graph and the hand-off to
//! a backend: [`optimize`] needs the backend only to fold constants (an
//! [`Evaluator`]), and [`compile`] asks a [`Backend`] for its plan. The
//! facade wires the CPU backend in; nothing here knows it.

//!
//! The durations of the stages (trace with its transforms, optimise, plan)
//! are logged at `debug` level through the `log` crate.

use crate::passes::{cse, dce, fold_constants, map_bodies};
use crate::rewrite::rewrite_top;
use anvil_core::function::trace_lifted;
use anvil_core::{Backend, Evaluator, Function, Graph, Result, Tensor, TensorType, TreeDef};
use std::time::Instant;

/// The graph a call runs: `graph` rewritten to a fixpoint (see
/// [`rewrite`](crate::rewrite::rewrite)), the loop passes applied (see
/// [`loops`](crate::loops)), constants folded with `eval`, rewritten again, common
/// subexpressions merged and dead nodes dropped — in bodies too.
///
/// # Errors
/// An invalid graph; a rewrite rule's error.
pub fn optimize(graph: &Graph, eval: &dyn Evaluator) -> Result<Graph> {
    anvil_core::stats::count_optimization();
    let g = map_bodies(graph, &|body| optimize(body, eval))?;
    let g = dce(&cse(&rewrite_top(&g)?)?)?;
    // Loop passes (sibling scans merged, accumulated outer products taken
    // out of loops); their new bodies are optimised like the others.
    let g = match crate::loops::optimize_loops(&g)? {
        Some(l) => dce(&cse(&rewrite_top(&map_bodies(&l, &|b| optimize(b, eval))?)?)?)?,
        None => g,
    };
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

/// A compiled call: the plan, the structure of its outputs, and the
/// captured tensors it takes after the arguments.
#[derive(Debug)]
pub struct Compiled<P> {
    /// The backend's plan. Its inputs are the arguments' leaves, then
    /// `lifted`.
    pub plan: P,
    /// The structure of the outputs.
    pub output: TreeDef,
    /// The large tensors the function captured, passed to the plan after
    /// the arguments on every run (implicit parameters, see
    /// [`Tracer::capture`](anvil_core::Tracer::capture)): the plan holds
    /// them, sharing their buffers, rather than copies folded into the graph.
    pub lifted: Vec<Tensor>,
}

/// Traces `f` at arguments of structure `def` and leaf types `types`
/// (large captured tensors becoming inputs, see [`trace_lifted`]),
/// optimises the graph and compiles it with `backend`.
///
/// # Errors
/// As [`trace_lifted`], [`optimize`] and [`Backend::plan`].
pub fn compile<F: Function + ?Sized, B: Backend>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
    backend: &B,
) -> Result<Compiled<B::Plan>> {
    let start = Instant::now();
    let traced = trace_lifted(f, def, types)?;
    let traced_at = Instant::now();
    let graph = optimize(&traced.graph, backend)?;
    let optimized_at = Instant::now();
    let plan = backend.plan(&graph)?;
    anvil_core::stats::count_plan();
    log::debug!(
        "compiled `{}` ({} nodes traced, {} after optimisation, {} captured tensors as inputs): \
         trace and transforms {:?}, optimise {:?}, plan {:?}",
        f.name(),
        traced.graph.len(),
        graph.len(),
        traced.lifted.len(),
        traced_at - start,
        optimized_at - traced_at,
        optimized_at.elapsed()
    );
    Ok(Compiled { plan, output: traced.output, lifted: traced.lifted })
}
