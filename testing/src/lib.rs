//! Generic checks for ops and transforms, usable from any crate's tests
//! (including a plugin crate's, for its own ops).
//!
//! - [`run`] and [`check_vmap`]: run any function; compare `vmap(f)` with a
//!   loop over slices.
//! - The conformance kit, driven by the op registries: an [`OpSample`] is
//!   one op with valid inputs and a description ([`InputKind`]) of how to
//!   draw more; [`standard_samples`] covers every standard op;
//!   [`check_op_vmap`] checks an op's batching rule in every batching
//!   configuration, nested too; [`missing_samples`] lists the registered ops
//!   no sample covers.
//! - The derivative checks: [`check_op_jvp`] compares an op's jvp rule with
//!   finite differences; [`check_op_transpose`] checks the transpose rules
//!   of what the jvp emits by the dot-product test `<u, J v> = <J^T u, v>`;
//!   [`check_op_vmap_of_jvp`] checks that the jvp batches (as `jacfwd`
//!   needs). [`check_op`] runs every check on a sample and reports each
//!   outcome (passed, trivial, skipped and why, failed and how).
//! - [`rule_report`]: every registered op type and which kernel and rules
//!   it has.
//!
//! A plugin crate checks its ops with the same functions:
//!
//! ```
//! use anvil_testing::{check_op, missing_samples, standard_samples};
//! # use anvil_testing::{InputKind, OpSample};
//! # use anvil::ops::elementwise::Sin;
//! let mine = vec![OpSample::new(Sin).input(InputKind::Uniform { lo: -1.0, hi: 1.0 }, &[3])];
//! for s in &mine {
//!     // vmap, jvp against finite differences, transpose, vmap of jvp.
//!     check_op(s).into_result()?;
//! }
//! // Every op registered with a kernel (the standard ones and the plugin's)
//! // needs a sample; a test asserts that this list is empty.
//! let mut all = standard_samples();
//! all.extend(mine);
//! let missing = missing_samples(&all);
//! assert!(!missing.contains(&"Sin"), "ops without a sample: {missing:?}");
//! # Ok::<(), String>(())
//! ```

mod ad;
mod conformance;
mod linalg_samples;
mod report;
mod sample;
mod samples;

// The samples of `anvil::lax`, which `standard_samples` includes.
mod lax_samples;
// The samples of the subscripts (`x.i(ix![..])`, `x.at(ix![..])`), included too.
mod subscript_samples;
// The samples of `anvil::numpy`, `anvil::nn` and the matrix functions of `anvil::linalg`.
mod matfun_samples;
mod nn_samples;
mod numpy_samples;

pub use ad::{
    check_op, check_op_jvp, check_op_transpose, check_op_vmap_of_jvp, CheckOutcome,
    ConformanceResult,
};
pub use conformance::{check_op_vmap, missing_samples};
pub use report::{rule_report, RuleReport, RuleReportTable};
pub use sample::{random_tensor, Derivative, InputKind, OpSample, TestRng};
pub use samples::standard_samples;

use anvil::core::function::{fit_args, Args};
use anvil::core::tree::TreeDef;
use anvil::{run_graph, vmap, Graph, IntoFunction, Result, Tensor, TensorType};

/// Runs a function of tensor arguments on tensors and returns the leaves of
/// its result, whatever the result's structure.
///
/// # Errors
/// As [`anvil::Eval::eval`].
pub fn run<M, F: IntoFunction<M>>(f: &F, args: &[Tensor]) -> Result<Vec<Tensor>> {
    let types: Vec<TensorType> = args.iter().map(Tensor::ty).collect();
    run_graph(&trace_leaves(f, &types)?, args)
}

/// `f` traced on tensor arguments of types `types` (one leaf each).
fn trace_leaves<M, F: IntoFunction<M>>(f: &F, types: &[TensorType]) -> Result<Graph> {
    let leaves = TreeDef::Tuple(vec![TreeDef::Leaf; types.len()]);
    let def = fit_args("function", leaves, <F::Args as Args>::ARITY)?;
    Ok(anvil::core::trace_types(&f.as_function(), &def, types)?.0)
}

/// Checks that `vmap(f)` with `in_axes` equals a loop over the batch that
/// slices every mapped argument, calls `f`, and stacks the results.
///
/// Returns a description of the first mismatch as an error message.
///
/// # Errors
/// `Err(message)` when the results differ or either side fails.
pub fn check_vmap<M, F: IntoFunction<M> + Clone>(
    f: &F,
    args: &[Tensor],
    in_axes: &[Option<usize>],
    rtol: f64,
    atol: f64,
) -> std::result::Result<(), String> {
    let size = args
        .iter()
        .zip(in_axes)
        .find_map(|(a, ax)| ax.map(|k| a.shape()[k]))
        .ok_or("no mapped argument")?;
    let axes = to_i64(in_axes);
    let batched = run(&vmap(f.clone()).in_axes(axes.clone()), args)
        .map_err(|e| format!("vmap failed: {e}"))?;
    let per_elem = run_each(f, args, in_axes, size, |i| format!("element {i}"))?;
    for (o, got) in batched.iter().enumerate() {
        let want = stack_output(&per_elem, o).map_err(|e| e.to_string())?;
        if !approx::relative_eq!(*got, want, epsilon = atol, max_relative = rtol) {
            return Err(format!("output {o} of vmap (in_axes {axes:?}) differs from the loop:\n vmap:\n{got}\n loop:\n{want}"));
        }
    }
    Ok(())
}

/// The loop side of a vmap check: `f` run on batch elements `0..size` of
/// `args` (see [`slice_args`]), every output of each; `element(i)` names
/// element `i` in the error.
fn run_each<M, F: IntoFunction<M>>(
    f: &F,
    args: &[Tensor],
    in_axes: &[Option<usize>],
    size: usize,
    element: impl Fn(usize) -> String,
) -> std::result::Result<Vec<Vec<Tensor>>, String> {
    (0..size)
        .map(|i| {
            let slice = slice_args(args, in_axes, i).map_err(|e| e.to_string())?;
            run(f, &slice).map_err(|e| format!("{} failed: {e}", element(i)))
        })
        .collect()
}

/// Batch element `i` of `args`: every mapped argument sliced at its axis,
/// the others shared.
fn slice_args(args: &[Tensor], in_axes: &[Option<usize>], i: usize) -> Result<Vec<Tensor>> {
    args.iter()
        .zip(in_axes)
        .map(|(a, ax)| ax.map_or_else(|| Ok(a.clone()), |k| a.select_axis(k, i)))
        .collect()
}

/// Output `o` of every element, stacked along a new axis 0.
fn stack_output(per_elem: &[Vec<Tensor>], o: usize) -> Result<Tensor> {
    let parts: Vec<Tensor> = per_elem.iter().map(|outs| outs[o].clone()).collect();
    Tensor::stack(&parts, 0)
}

/// `in_axes` as [`vmap()`] takes them.
fn to_i64(axes: &[Option<usize>]) -> Vec<Option<i64>> {
    axes.iter().map(|a| a.map(|k| k as i64)).collect()
}

/// `Ok(())` when nothing failed, otherwise every failure, one per line.
fn all_passed(failures: Vec<String>) -> std::result::Result<(), String> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}
