//! The values a traced function closed over (its captures), shared by the
//! functions one op holds: a custom rule and its function, the branches of
//! a `cond`, a loop's predicate and body. Each is traced on its own (with
//! captures of its own); the op takes the union of their captures as extra
//! operands, and every graph is rewritten to read the operands it needs
//! from that union.

use anvil_core::replay::inline_graph;
use anvil_core::{trace_with, Graph, Result, TensorType, TracedFn, Var};

/// The values captured by any of `traced`, each once, in order of first use.
pub fn union(traced: &[&TracedFn]) -> Vec<Var> {
    let mut all: Vec<Var> = Vec::new();
    for c in traced.iter().flat_map(|t| &t.captures) {
        if !all.iter().any(|a| a.is_same(c)) {
            all.push(c.clone());
        }
    }
    all
}

/// Where each of `t`'s captures is in `all`.
pub fn slots(t: &TracedFn, all: &[Var]) -> Vec<usize> {
    t.captures.iter().map(|c| all.iter().position(|a| a.is_same(c)).unwrap_or(0)).collect()
}

/// The types of `vars`.
pub fn types(vars: &[Var]) -> Vec<TensorType> {
    vars.iter().map(|v| v.ty().clone()).collect()
}

/// `graph` with its inputs rearranged: new inputs of types `types`, old
/// input `i` reading new input `from[i]` (inputs not read are unused).
///
/// # Errors
/// An invalid graph.
pub fn with_inputs(graph: &Graph, types: &[TensorType], from: &[usize]) -> Result<Graph> {
    trace_with(types, |vars| {
        inline_graph(graph, &from.iter().map(|&i| vars[i].clone()).collect::<Vec<_>>())
    })
}

/// `t`'s graph over `(leading, consts, trailing)` inputs: its own inputs
/// are `leading + trailing` values (in that order), then its captures,
/// which are among `consts`. `types` are the new inputs' types.
///
/// # Errors
/// An invalid graph.
pub fn around_consts(
    t: &TracedFn,
    consts: &[Var],
    leading: usize,
    trailing: usize,
    types: &[TensorType],
) -> Result<Graph> {
    let nc = consts.len();
    let from: Vec<usize> = (0..leading)
        .chain((0..trailing).map(|i| leading + nc + i))
        .chain(slots(t, consts).iter().map(|&k| leading + k))
        .collect();
    with_inputs(&t.graph, types, &from)
}
