//! The graph interpreters as rules reach them.
//!
//! The rules of a higher-order op (`map`, a loop, a conditional) transform
//! its body: batch it, differentiate it, transpose it. Those interpreters
//! live in `anvil-transforms`, which depends on the crate that defines the
//! ops, so the ops reach them through this table, registered by
//! `anvil-transforms` with `inventory` — the same way the arithmetic
//! operators on `Var` reach `anvil-ops` ([`crate::OperatorImpl`]). Without
//! `anvil-transforms` linked, a call is an error naming what to link.

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::rules::Batched;
use crate::trace::Var;

/// The values of a graph's outputs that are not linear (`None` for linear
/// ones), and the cotangent of every linear input (`None`: zero).
pub type Transposed = (Vec<Option<Var>>, Vec<Option<Var>>);

/// The outputs of a graph and their tangents (`None`: zero).
pub type Jvp = (Vec<Var>, Vec<Option<Var>>);

/// `vmap` of a graph: the batched outputs on batched arguments.
pub type VmapGraphFn = fn(&Graph, &[Batched], usize) -> Result<Vec<Batched>>;
/// `jvp` of a graph: the outputs and their tangents given the inputs'.
pub type JvpGraphFn = fn(&Graph, &[Var], &[Option<Var>]) -> Result<Jvp>;
/// The transpose of the part of a graph linear in the inputs marked linear,
/// with the known inputs' values and the outputs' cotangents.
pub type TransposeGraphFn =
    fn(&Graph, &[bool], &[Option<Var>], &[Option<Var>]) -> Result<Transposed>;

/// The interpreters, registered once by the transforms crate.
#[derive(Debug)]
pub struct Interpreters {
    /// `vmap`.
    pub vmap: VmapGraphFn,
    /// `jvp`.
    pub jvp: JvpGraphFn,
    /// Transpose.
    pub transpose: TransposeGraphFn,
}

inventory::collect!(Interpreters);

fn table() -> Result<&'static Interpreters> {
    inventory::iter::<Interpreters>.into_iter().next().ok_or_else(|| Error::MissingRule {
        op: "graph".into(),
        what: "interpreter (vmap, jvp, transpose)".into(),
        hint: " (link anvil-transforms: `use anvil_transforms as _;`)".into(),
    })
}

/// `graph` batched (see `anvil_transforms::vmap_graph`).
///
/// # Errors
/// The interpreter's error; `anvil-transforms` not linked.
pub fn vmap_graph(graph: &Graph, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    (table()?.vmap)(graph, args, size)
}

/// `graph`'s forward mode (see `anvil_transforms::jvp_graph`).
///
/// # Errors
/// The interpreter's error; `anvil-transforms` not linked.
pub fn jvp_graph(graph: &Graph, primals: &[Var], tangents: &[Option<Var>]) -> Result<Jvp> {
    (table()?.jvp)(graph, primals, tangents)
}

/// The transpose of `graph`'s linear part (see
/// `anvil_transforms::transpose_graph`).
///
/// # Errors
/// The interpreter's error; `anvil-transforms` not linked.
pub fn transpose_graph(
    graph: &Graph,
    linear: &[bool],
    known: &[Option<Var>],
    cts: &[Option<Var>],
) -> Result<Transposed> {
    (table()?.transpose)(graph, linear, known, cts)
}
