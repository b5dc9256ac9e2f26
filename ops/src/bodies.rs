//! Bodies of the higher-order ops, transformed: the graph-to-graph building
//! blocks the rules of `map`, `cond`, `scan` and `while` share.
//!
//! A rule of a higher-order op rarely transforms its body as a whole: a
//! `scan` under `vmap` batches only the carries that the batch reaches (a
//! fixpoint over the body, as in JAX), its jvp carries tangents only where
//! they can be non-zero, and its transpose needs the body's transpose with
//! respect to some inputs given the others. The functions here build those
//! bodies: [`batch_body`], [`jvp_body`] and [`transpose_body`], with
//! [`dependent_outputs`] for the fixpoints and [`reorder`] to lay inputs and
//! outputs out as each op wants them.

use crate::ad::{dense, zeros};
use crate::batching::at_front;
use anvil_core::replay::inline_graph;
use anvil_core::{trace_with, Batched, Error, Graph, Result, TensorType, Var};

/// Which outputs of `body` depend on an input marked in `inputs` (a
/// conservative answer: through any op, differentiable or not).
pub fn dependent_outputs(body: &Graph, inputs: &[bool]) -> Vec<bool> {
    let varies = crate::control::varying_values(body, inputs);
    body.outputs().iter().map(|o| varies[o.index()]).collect()
}

/// `types` with a leading axis of `size` where `marked`.
pub fn with_batch(types: &[TensorType], marked: &[bool], size: usize) -> Vec<TensorType> {
    types
        .iter()
        .zip(marked)
        .map(|(t, &m)| {
            if m {
                let mut shape = vec![size];
                shape.extend_from_slice(t.shape());
                t.with_shape(shape)
            } else {
                t.clone()
            }
        })
        .collect()
}

/// `body` vmapped over the inputs marked `batched` (a leading batch axis of
/// `size`): its outputs have the batch axis in front where `out_batched`,
/// and none elsewhere.
///
/// # Errors
/// An output marked unbatched that depends on a batched input (a fixpoint
/// that was not reached); a rule's error.
pub fn batch_body(
    body: &Graph,
    batched: &[bool],
    size: usize,
    out_batched: &[bool],
) -> Result<Graph> {
    let types = with_batch(&body.input_types(), batched, size);
    trace_with(&types, |vars| {
        let args: Vec<Batched> = vars
            .iter()
            .zip(batched)
            .map(|(v, &b)| Batched::new(v.clone(), b.then_some(0)))
            .collect();
        let outs = anvil_core::interp::vmap_graph(body, &args, size)?;
        outs.iter()
            .zip(out_batched)
            .enumerate()
            .map(|(k, (o, &b))| match (o.axis, b) {
                (_, true) => Ok(at_front(o, size)),
                (None, false) => Ok(o.var.clone()),
                (Some(_), false) => Err(Error::InvalidGraph {
                    node: k,
                    msg: "a body output marked unbatched depends on the batch".into(),
                }),
            })
            .collect()
    })
}

/// The jvp of `body` as a graph: inputs are `body`'s inputs, then a tangent
/// for each input marked in `tangent_in`; outputs are `body`'s outputs, then
/// a tangent for each output marked in `tangent_out` (zeros where the
/// tangent is symbolically zero; an integer output's tangent is zeros of
/// its type).
///
/// # Errors
/// An op without a jvp rule; a rule's error.
pub fn jvp_body(body: &Graph, tangent_in: &[bool], tangent_out: &[bool]) -> Result<Graph> {
    let body_in = body.input_types();
    let n = body_in.len();
    let mut types = body_in.clone();
    types.extend(body_in.iter().zip(tangent_in).filter(|(_, &t)| t).map(|(t, _)| t.clone()));
    trace_with(&types, |vars| {
        let mut next = n;
        let ts: Vec<Option<Var>> = tangent_in
            .iter()
            .map(|&t| {
                t.then(|| {
                    next += 1;
                    vars[next - 1].clone()
                })
            })
            .collect();
        let (outs, touts) = anvil_core::interp::jvp_graph(body, &vars[..n], &ts)?;
        let marked: Vec<Var> = touts
            .iter()
            .zip(&outs)
            .zip(tangent_out)
            .filter(|(_, &m)| m)
            .map(|((t, o), _)| dense(t, o))
            .collect();
        Ok(outs.into_iter().chain(marked).collect())
    })
}

/// The transpose of `body` with respect to its inputs marked `linear`: a
/// graph of (the other inputs, in order; then a cotangent for each output
/// marked in `ct_for`) returning a cotangent for each linear input (zeros
/// where it gets none). The values the transpose needs that depend only on
/// the known inputs are recomputed inside.
///
/// # Errors
/// An op on the linear path without a transpose rule; a rule's error.
pub fn transpose_body(body: &Graph, linear: &[bool], ct_for: &[bool]) -> Result<Graph> {
    let body_in = body.input_types();
    let body_out = body.output_types();
    let known_idx: Vec<usize> = (0..linear.len()).filter(|&i| !linear[i]).collect();
    let ct_idx: Vec<usize> = (0..ct_for.len()).filter(|&k| ct_for[k]).collect();
    let mut types: Vec<TensorType> = known_idx.iter().map(|&i| body_in[i].clone()).collect();
    types.extend(ct_idx.iter().map(|&k| body_out[k].clone()));
    trace_with(&types, |vars| {
        let mut known: Vec<Option<Var>> = vec![None; linear.len()];
        for (k, &i) in known_idx.iter().enumerate() {
            known[i] = Some(vars[k].clone());
        }
        let mut cts: Vec<Option<Var>> = vec![None; body_out.len()];
        for (j, &k) in ct_idx.iter().enumerate() {
            cts[k] = Some(vars[known_idx.len() + j].clone());
        }
        let (_, in_cts) = anvil_core::interp::transpose_graph(body, linear, &known, &cts)?;
        let like = vars.first().cloned();
        (0..linear.len())
            .filter(|&i| linear[i])
            .map(|i| match (&in_cts[i], &like) {
                (Some(c), _) => Ok(c.clone()),
                (None, Some(l)) => Ok(zeros(l, &body_in[i])),
                (None, None) => Ok(crate::full_scalar(
                    body_in[i].shape(),
                    anvil_core::Scalar::F64(0.0).cast(body_in[i].dtype()),
                )),
            })
            .collect()
    })
}

/// `graph` with its inputs and outputs rearranged: new input `j` is old
/// input `inputs[j]` (a permutation), new output `j` is old output
/// `outputs[j]` (any selection).
///
/// # Errors
/// `inputs` that is not a permutation of the old inputs.
pub fn reorder(graph: &Graph, inputs: &[usize], outputs: &[usize]) -> Result<Graph> {
    let old = graph.input_types();
    let mut seen = vec![false; old.len()];
    for &i in inputs {
        if i >= old.len() || std::mem::replace(&mut seen[i], true) {
            return Err(Error::invalid("reorder", "inputs", "not a permutation of the inputs"));
        }
    }
    if seen.iter().any(|&s| !s) {
        return Err(Error::invalid("reorder", "inputs", "not a permutation of the inputs"));
    }
    let types: Vec<TensorType> = inputs.iter().map(|&i| old[i].clone()).collect();
    trace_with(&types, |vars| {
        let mut args: Vec<Option<Var>> = vec![None; old.len()];
        for (v, &i) in vars.iter().zip(inputs) {
            args[i] = Some(v.clone());
        }
        let args: Vec<Var> = args.into_iter().flatten().collect();
        let outs = inline_graph(graph, &args)?;
        Ok(outputs.iter().map(|&k| outs[k].clone()).collect())
    })
}

/// Positions `0..n` split into consecutive groups of the given sizes.
pub fn groups(sizes: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut start = 0;
    sizes
        .iter()
        .map(|&s| {
            let r = start..start + s;
            start += s;
            r
        })
        .collect()
}

/// The indices where `mask` is true.
pub fn marked(mask: &[bool]) -> Vec<usize> {
    (0..mask.len()).filter(|&i| mask[i]).collect()
}
