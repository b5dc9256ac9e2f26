//! anvil's graph-to-graph transforms and graph passes.
//!
//! Transforms are interpreters: a walk over a graph in topological order
//! that looks each node's rule up in a registry and calls it, building a new
//! graph through the same `Var` API users write programs with. They hold no
//! per-op knowledge. This crate holds [`vmap`] (the batching transform) and
//! the graph passes: dead-code elimination ([`dce`]) and
//! common-subexpression elimination ([`cse`]).
#![warn(missing_docs)]

pub mod ad;
pub mod custom;
pub mod diff;
pub mod map;
pub mod passes;
mod replay;
pub mod vmap;

pub use ad::{jvp_graph, linearize_graph, transpose_graph, vjp_graph, Linearization};
pub use custom::{custom_jvp, custom_vjp, inline_graph, CustomJvp, CustomVjp};
pub use diff::{grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, Grad, Jacobian, Jvp, Vjp};
pub use map::{map, map_fallback, map_fallbacks, MapFn};
pub use passes::{cse, dce, simplify};
pub use vmap::{vmap, vmap_graph, vmap_graph_by_chunks, vmap_graph_chunked, InAxes, Vmap};
