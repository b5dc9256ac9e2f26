//! Registry-driven conformance checks: every op's batching rule against a
//! loop, and every registered op covered by a sample.

use super::report::registrations;
use super::{all_passed, check_vmap, run, run_each, slice_args, stack_output, to_i64, OpSample};
use anvil::core::Parameter;
use anvil::{vmap, IntoFunction, Result, Tensor, TensorType};
use std::any::TypeId;
use std::collections::HashSet;

/// The batch size of the one-level checks.
const B: usize = 3;
/// The batch sizes of the nested checks (inner, outer): different, so that a
/// rule that confuses the two batch axes fails on shapes or values.
const B_INNER: usize = 3;
const B_OUTER: usize = 2;

/// The in_axes configurations tried for the inputs in `subset`: every
/// batched input at the front, in the middle, at the back, and alternating
/// front and back. Inputs outside `subset` are `None`.
fn axis_configs(ranks: &[usize], subset: &[bool]) -> Vec<Vec<Option<usize>>> {
    let pick = |f: &dyn Fn(usize, usize) -> usize| -> Vec<Option<usize>> {
        let mut n = 0;
        ranks
            .iter()
            .zip(subset)
            .map(|(&r, &b)| {
                b.then(|| {
                    n += 1;
                    f(r, n - 1)
                })
            })
            .collect()
    };
    let mut out = vec![
        pick(&|_, _| 0),
        pick(&|r, _| r.div_ceil(2)),
        pick(&|r, _| r),
        pick(&|r, n| if n % 2 == 0 { 0 } else { r }),
        pick(&|r, n| if n % 2 == 0 { r } else { 0 }),
    ];
    let mut seen = HashSet::new();
    out.retain(|c| seen.insert(c.clone()));
    out
}

/// The subsets of `n` inputs that are batched: all non-empty ones up to
/// [`MAX_ALL_SUBSETS`] inputs; beyond, each input alone, each input shared
/// with all the others batched, and all of them.
fn subsets(n: usize) -> Vec<Vec<bool>> {
    if n <= MAX_ALL_SUBSETS {
        return (1u32..1 << n).map(|m| (0..n).map(|i| m >> i & 1 == 1).collect()).collect();
    }
    let mut out: Vec<Vec<bool>> = (0..n).map(|j| (0..n).map(|i| i == j).collect()).collect();
    out.extend((0..n).map(|j| (0..n).map(|i| i != j).collect()));
    out.push(vec![true; n]);
    out
}

/// Ops with at most this many operands are checked with every subset batched.
const MAX_ALL_SUBSETS: usize = 6;

/// Checks that the op of `sample` batches correctly: `vmap` of the op
/// equals a loop over the batch that applies the op to each element and
/// stacks the results.
///
/// For every non-empty subset of the inputs being batched (the others shared,
/// `None` in `in_axes`; for ops of more than 6 operands, each one alone,
/// all but one, and all) and with the batch axis at the front, in the middle
/// and at the back of each batched input (and alternating between inputs),
/// each batched input is a stack of 3 different values of its
/// [`InputKind`](super::InputKind), and [`check_vmap`] compares. Then nested
/// `vmap(vmap(op))` with batch sizes 3 (inner) and 2 (outer), at different
/// axes at each level and with inputs batched at one level only, is compared
/// with a double loop. An op without operands (a constant) has nothing to
/// batch and passes; for an op that cannot be evaluated
/// ([`OpSample::evaluable`] is false) only the types of the batched results
/// are checked.
///
/// Generic over the op: a plugin crate calls it on its own samples.
///
/// ```
/// use anvil::ops::elementwise::Atan2;
/// use anvil_testing::{check_op_vmap, InputKind, OpSample};
///
/// let sample = OpSample::new(Atan2)
///     .input(InputKind::Uniform { lo: -1.0, hi: 1.0 }, &[2, 3])
///     .input(InputKind::AwayFromZero { lo: 0.2, hi: 1.0 }, &[3]);
/// check_op_vmap(&sample)?;
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// A message naming the op ([`OpSample::describe`]), the `in_axes` and the
/// mismatch (or the failure of either side), for every configuration that
/// failed.
pub fn check_op_vmap(sample: &OpSample) -> std::result::Result<(), String> {
    if sample.inputs.is_empty() {
        return Ok(());
    }
    sample.check_kinds()?;
    let outs = sample.output_types()?;
    if sample.evaluable {
        sample.run_all()?;
    }
    let f = sample.function();
    let ranks: Vec<usize> = sample.inputs.iter().map(Tensor::rank).collect();
    let mut failures = Vec::new();
    for subset in subsets(ranks.len()) {
        for axes in axis_configs(&ranks, &subset) {
            if let Err(e) = check_one_level(sample, &f, &axes, &outs) {
                failures.push(format!("{}: vmap with in_axes {axes:?}: {e}", sample.describe()));
            }
        }
    }
    for (outer, inner) in nested_configs(&ranks) {
        if let Err(e) = check_nested(sample, &f, &outer, &inner, &outs) {
            failures.push(format!(
                "{}: vmap(vmap(op, in_axes {inner:?}), in_axes {outer:?}): {e}",
                sample.describe()
            ));
        }
    }
    all_passed(failures)
}

/// Builds the batched inputs, runs `vmap(f)` and compares it with a loop
/// (only its types, for an op that cannot be evaluated).
fn check_one_level<M, F: IntoFunction<M> + Clone>(
    sample: &OpSample,
    f: &F,
    axes: &[Option<usize>],
    outs: &[TensorType],
) -> std::result::Result<(), String> {
    let args: Vec<Tensor> = (0..axes.len())
        .map(|i| sample.batched(i, axes[i], B))
        .collect::<Result<_>>()
        .map_err(|e| format!("building the batched inputs: {e}"))?;
    if sample.evaluable {
        check_vmap(f, &args, axes, sample.rtol, sample.atol)
    } else {
        check_types(&vmap(f.clone()).in_axes(to_i64(axes)), &args, &[B], outs)
    }
}

/// One `Option<usize>` per input: its batch axis, if batched.
type InAxes = Vec<Option<usize>>;

/// `(outer in_axes, inner in_axes)` pairs for the nested check. Inner axes
/// index a value of rank `r + 1` (the outer axis removed), outer axes a value
/// of rank `r + 2` when the input is batched at both levels.
fn nested_configs(ranks: &[usize]) -> Vec<(InAxes, InAxes)> {
    let mut out = vec![
        // Inner at the front, outer at the back.
        (ranks.iter().map(|&r| Some(r + 1)).collect(), ranks.iter().map(|_| Some(0)).collect()),
        // Inner at the back, outer second.
        (ranks.iter().map(|_| Some(1)).collect(), ranks.iter().map(|&r| Some(r)).collect()),
    ];
    if ranks.len() >= 2 {
        // The first input batched at the outer level only, the others at the inner level only.
        out.push((
            ranks.iter().enumerate().map(|(i, _)| (i == 0).then_some(0)).collect(),
            ranks.iter().enumerate().map(|(i, &r)| (i != 0).then_some(r)).collect(),
        ));
        // The first input batched at the inner level only, the others at the outer level only.
        out.push((
            ranks.iter().enumerate().map(|(i, &r)| (i != 0).then_some(r)).collect(),
            ranks.iter().enumerate().map(|(i, _)| (i == 0).then_some(0)).collect(),
        ));
    }
    out
}

/// Builds the doubly batched inputs, runs `vmap(vmap(f))` and compares it
/// with a double loop (only its types, for an op that cannot be evaluated).
fn check_nested<M, F: IntoFunction<M> + Clone>(
    sample: &OpSample,
    f: &F,
    outer: &[Option<usize>],
    inner: &[Option<usize>],
    outs: &[TensorType],
) -> std::result::Result<(), String> {
    let args: Vec<Tensor> = (0..outer.len())
        .map(|i| doubly_batched(sample, i, outer[i], inner[i]))
        .collect::<Result<_>>()
        .map_err(|e| format!("building the batched inputs: {e}"))?;
    let vv = vmap(vmap(f.clone()).in_axes(to_i64(inner))).in_axes(to_i64(outer));
    if !sample.evaluable {
        return check_types(&vv, &args, &[B_OUTER, B_INNER], outs);
    }
    let got = run(&vv, &args).map_err(|e| format!("vmap failed: {e}"))?;
    let rows = double_loop(f, &args, outer, inner)?;
    for (o, got) in got.iter().enumerate() {
        let want = stack_rows(&rows, o).map_err(|e| e.to_string())?;
        if !approx::relative_eq!(*got, want, epsilon = sample.atol, max_relative = sample.rtol) {
            return Err(format!(
                "output {o} differs from the double loop (max |diff| {:?}):\n vmap:\n{got}\n loop:\n{want}",
                got.max_abs_diff(&want)
            ));
        }
    }
    Ok(())
}

/// Input `i` batched at the `outer` and `inner` levels: `B_OUTER` rows of
/// `B_INNER` variants when batched at both, otherwise as
/// [`OpSample::batched`] at the one level (or none).
fn doubly_batched(
    sample: &OpSample,
    i: usize,
    outer: Option<usize>,
    inner: Option<usize>,
) -> Result<Tensor> {
    match (outer, inner) {
        (Some(o), Some(n)) => {
            let rows: Vec<Tensor> = (0..B_OUTER)
                .map(|j| sample.stacked(i, j * B_INNER, B_INNER, n))
                .collect::<Result<_>>()?;
            Tensor::stack(&rows, o)
        }
        (Some(_), None) => sample.batched(i, outer, B_OUTER),
        (None, _) => sample.batched(i, inner, B_INNER),
    }
}

/// `f` on every element of the doubly batched `args`: `[j][i]` holds the
/// outputs at outer index `j` and inner index `i`.
fn double_loop<M, F: IntoFunction<M>>(
    f: &F,
    args: &[Tensor],
    outer: &[Option<usize>],
    inner: &[Option<usize>],
) -> std::result::Result<Vec<Vec<Vec<Tensor>>>, String> {
    (0..B_OUTER)
        .map(|j| {
            let row = slice_args(args, outer, j).map_err(|e| e.to_string())?;
            run_each(f, &row, inner, B_INNER, |i| format!("element ({j}, {i})"))
        })
        .collect()
}

/// Output `o` of the double loop, stacked as `vmap(vmap(f))` gives it.
fn stack_rows(rows: &[Vec<Vec<Tensor>>], o: usize) -> Result<Tensor> {
    let per_row: Vec<Tensor> =
        rows.iter().map(|row| stack_output(row, o)).collect::<Result<_>>()?;
    Tensor::stack(&per_row, 0)
}

/// For an op that cannot be evaluated: `vf` (`f` vmapped once per batch
/// size of `sizes`, outermost first) traces on `args` and gives the
/// element types `outs` with the batch axes in front.
fn check_types<M, F: IntoFunction<M>>(
    vf: &F,
    args: &[Tensor],
    sizes: &[usize],
    outs: &[TensorType],
) -> std::result::Result<(), String> {
    let types: Vec<TensorType> = args.iter().map(Tensor::ty).collect();
    let graph = super::trace_leaves(vf, &types).map_err(|e| format!("tracing vmap failed: {e}"))?;
    let want: Vec<TensorType> = outs
        .iter()
        .map(|out| {
            let mut shape = sizes.to_vec();
            shape.extend_from_slice(out.shape());
            out.with_shape(shape)
        })
        .collect();
    let got = graph.output_types();
    if got == want {
        Ok(())
    } else {
        Err(format!("vmap gives {got:?}, expected {want:?} (types only: the op is not evaluable)"))
    }
}

/// Whether a registration is local to a test target (a `tests/` directory):
/// such ops are test fixtures, not part of the op set samples must cover.
fn is_test_local(location: &str) -> bool {
    location.starts_with("tests/")
        || location.starts_with("tests\\")
        || location.contains("/tests/")
        || location.contains("\\tests\\")
}

/// The op types registered anywhere (a CPU kernel, a vmap, jvp, transpose
/// or rewrite rule) for which `samples` has no sample (compared by
/// `TypeId`), by the name written at the registration, sorted. The graph's
/// structural `Parameter`, the CPU backend's internal ops (`Fused`,
/// `MatmulT`: built by the compiler, never seen by transforms) and ops
/// registered from a `tests/` directory (test fixtures) are not asked for.
///
/// ```
/// use anvil_testing::{missing_samples, standard_samples};
/// assert!(missing_samples(&[]).contains(&"Sin"));
/// assert!(!missing_samples(&standard_samples()).contains(&"Sin"));
/// ```
pub fn missing_samples(samples: &[OpSample]) -> Vec<&'static str> {
    let covered: HashSet<TypeId> = samples.iter().map(|s| s.op.op_type()).collect();
    let mut missing: Vec<&'static str> = registrations()
        .into_iter()
        .filter(|r| r.op_type != TypeId::of::<Parameter>())
        // Made by the CPU compiler after every transform has run.
        .filter(|r| !anvil::cpu::fusion::is_internal(r.op_type))
        .filter(|r| !is_test_local(r.location))
        .filter(|r| !covered.contains(&r.op_type))
        .map(|r| r.op)
        .collect();
    missing.sort_unstable();
    missing.dedup();
    missing
}
