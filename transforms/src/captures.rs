//! The values a traced function closed over (its captures), shared by the
//! functions one op holds: a custom rule and its function, the branches of
//! a `cond`, a loop's predicate and body. Each is traced on its own (with
//! captures of its own); the op takes the union of their captures as extra
//! operands, and every graph is rewritten to read the operands it needs
//! from that union.

use anvil_core::replay::inline_graph;
use anvil_core::trace::{raise, type_of, TypeBits};
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

/// The types the results of an op holding the functions `traced` take,
/// output by output: the join of every function's (and of `floor`, the
/// type of a predicate choosing between them); `None` when nothing is
/// typed (no typing is installed).
pub fn joined_types(traced: &[&TracedFn], floor: Option<TypeBits>) -> Option<Vec<TypeBits>> {
    let n = traced.first()?.types.len();
    let typed = floor.is_some() || traced.iter().any(|t| t.types.iter().any(Option::is_some));
    typed.then(|| {
        (0..n)
            .map(|k| {
                let each = traced.iter().filter_map(|t| t.types.get(k).copied().flatten());
                each.fold(floor.unwrap_or(0), |a, b| a | b)
            })
            .collect()
    })
}

/// Whether `t`'s outputs all have the types `want` (or are untyped).
pub fn has_types(t: &TracedFn, want: &[TypeBits]) -> bool {
    t.types.iter().zip(want).all(|(got, &w)| got.is_none_or(|g| g == w))
}

/// `t` typed again with its arguments standing for `args`, its captures
/// raised to the trace-time type `to` and each output `k` to `outs[k]`
/// (see [`anvil_core::trace::raise`]), its graph replayed so every op is
/// typed by the new inputs. For the branches of a `cond`: when the index
/// varies over the ranks, every operand enters varying, raised outside
/// the branches (so that a branch taken on some ranks only holds no
/// collective in its transpose); a result less general than another
/// branch's is raised as the branch returns it.
///
/// # Errors
/// An op's error while replaying.
pub fn retyped(
    t: &TracedFn,
    args: &[Var],
    to: TypeBits,
    outs: Option<&[TypeBits]>,
) -> Result<TracedFn> {
    let captures: Vec<Var> = t.captures.iter().map(|c| raise(c, to)).collect();
    let outer: Vec<Var> = args.iter().chain(&captures).cloned().collect();
    let mut out_types = Vec::new();
    let (graph, inner) = anvil_core::trace_capturing(&t.graph.input_types(), |vars| {
        if let Some(v) = vars.first() {
            v.tracer().stand_for(vars, &outer);
        }
        let mut results = inline_graph(&t.graph, vars)?;
        if let Some(outs) = outs {
            for (r, &o) in results.iter_mut().zip(outs) {
                *r = raise(r, o);
            }
        }
        out_types = results.iter().map(type_of).collect();
        Ok(results)
    })?;
    debug_assert!(inner.is_empty(), "a replayed graph reads only its inputs");
    Ok(TracedFn { graph, output: t.output.clone(), captures, types: out_types })
}
