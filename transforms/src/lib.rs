//! anvil's graph-to-graph transforms and graph passes.
//!
//! Transforms are interpreters: a walk over a graph in topological order
//! that looks each node's rule up in a registry and calls it, building a new
//! graph through the same `Var` API users write programs with. They hold no
//! per-op knowledge. This crate holds the transforms ([`vmap`](fn@vmap), [`jvp`],
//! [`grad`], [`jacfwd`], [`jacrev`], [`hessian`], [`map`](fn@map), custom
//! derivatives), the graph passes ([`dce`], [`cse`], [`fold_constants`],
//! the rewrite engine [`rewrite`](mod@rewrite)) and the compile pipeline
//! ([`optimize`], [`compile`]) that a backend plugs into through the
//! `anvil_core::Backend` trait: constant folding runs kernels, so the backend is an
//! argument of the pipeline, never a dependency of this crate.
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod ad;
pub mod axes;
pub mod captures;
pub mod control_flow;
pub mod custom;
pub mod diff;
pub mod loops;
pub mod map;
pub mod passes;
pub mod pipeline;
pub mod rewrite;
pub mod sparse;
pub mod vmap;

pub use ad::{
    jvp_graph, linearize_graph, transpose_graph, vjp_graph, vjp_graph_wrt, Linearization,
};
pub use control_flow::{
    cond, fori_loop, scan, scan_n, scan_with, switch, while_loop, while_loop_bounded, Bound,
    Branches, ScanOptions,
};
pub use custom::{custom_jvp, custom_vjp, CustomJvp, CustomVjp};
pub use diff::{
    grad, hessian, jacfwd, jacrev, jvp, jvp_at, value_and_grad, Argnum, Argnums, Grad, Hessian,
    Jacobian, Jvp,
};
pub use map::{map, map_fallback, map_fallbacks, MapFn};

anvil_core::inventory::submit! {
    anvil_core::interp::Interpreters {
        vmap: vmap::vmap_graph,
        jvp: ad::jvp_graph,
        transpose: ad::transpose_graph,
    }
}
pub use anvil_core::replay::inline_graph;
pub use passes::{cse, dce, fold_constants, map_bodies};
pub use pipeline::{compile, optimize, Compiled};
pub use rewrite::{rewrite, rewrite_top};
pub use vmap::{vmap, vmap_graph, vmap_graph_by_chunks, vmap_graph_chunked, InAxes, Vmap};
