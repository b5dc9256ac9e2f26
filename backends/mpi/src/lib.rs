//! **anvil-mpi**: anvil beyond one process. A batch sharded across MPI
//! processes, collectives as graph ops with vmap, jvp and transpose rules,
//! Jacobians whose basis is split across the processes, and data-parallel
//! gradients — on MPI through rsmpi, never a network layer of anvil's own.
//!
//! ```
//! use anvil::prelude::*;
//! let mpi = anvil_mpi::init()?; // keep it alive; dropping it finalises MPI
//!
//! // A loss summed over examples, its gradient over the examples of all ranks.
//! let loss = |w: &Var, x: &Var| (x.matmul(w)).tanh().sum(&[0]);
//! let w = Tensor::from_vec(vec![0.3, -0.2], &[2])?;
//! let xs = Tensor::from_vec((0..8).map(|i| i as f64 / 8.0).collect(), &[4, 2])?;
//! let g = grad(anvil_mpi::data_parallel(loss, "batch")).eval((&w, &xs))?;
//! let full = grad(loss).eval((&w, &xs))?; // the single-process gradient
//! for (a, b) in g.to_vec::<f64>()?.iter().zip(full.to_vec::<f64>()?) {
//!     assert!((a - b).abs() < 1e-12);
//! }
//!
//! // The Jacobian with its basis split over the ranks.
//! let f = |x: &Var| x.sin() * x.sum(&[0]);
//! let x = Tensor::from_vec(vec![0.1, 0.2, 0.3, 0.4], &[4])?;
//! let jac = anvil_mpi::jacfwd_sharded(f, "basis");
//! assert_eq!(jac.eval(&x)?.shape(), &[4, 4]);
//! assert_eq!(jac.local_directions(), 4 / mpi.size());
//! # Ok::<(), anvil::Error>(())
//! ```
//!
//! Run it with `mpirun -n 2 ...` (the crate built with the `mpi` feature).
//! Without the feature (the default) the process group has one member, so
//! the same programs run, and are tested, on any machine.
//!
//! # Semantics
//!
//! - **Axis names.** A collective names the mapped axis it acts over, as
//!   JAX's `axis_name`: [`shard_map`] (and [`spmd`],
//!   [`jacfwd_sharded`]...) bind a name to the MPI processes,
//!   [`vmap_named`] binds one to its batch axis. Under a plain `vmap`
//!   inside a `shard_map`, `all_reduce_sum(x, "batch")` sums over the
//!   ranks for each batch element; under `vmap_named(.., "i")`,
//!   `all_reduce_sum(x, "i")` sums the batch. Names cannot be shadowed; a
//!   name that nothing binds is an error when the collective is traced.
//!   See [`axis`].
//! - **Replicated values and cotangents.** A sharded function types each
//!   of its values as *replicated* (the same on every rank: a replicated
//!   argument, a constant, a sum over the ranks) or *varying*, as JAX's
//!   `shard_map` does, and the transposes follow the types: a replicated
//!   value's cotangent is replicated, so the transpose of
//!   `all_reduce_sum` is the identity, the cotangent of a replicated
//!   result needs no collective, and `psum` of a replicated value is `x *
//!   p`, locally. The backward pass communicates only where a replicated
//!   value met per-rank ones (`w` with each rank's examples: one all-reduce
//!   of `w`'s gradient) and where sharded arguments' cotangents are
//!   gathered. `grad` of a sharded function is the single-process
//!   gradient. The values are typed while the body is traced, so a `grad`
//!   taken *inside* the body has JAX's answer too (the gradient of
//!   `psum(loss)` with respect to a replicated parameter is the sum of the
//!   ranks' gradients), also inside and through the bodies of `cond`,
//!   `switch`, `scan`, `fori_loop`, `while_loop`, `map` and custom-rule
//!   functions (a loop's carry has one type on entry and exit, found by a
//!   fixpoint). See [`replication`] for the rules.
//! - **Mesh.** The mesh is one-dimensional: a sharded function maps one
//!   named axis over all the MPI processes. There is no multi-dimensional
//!   mesh (a 2×2 grid of 4 ranks with named axes, collectives over one of
//!   them through sub-communicators); a sharded function nested in another
//!   maps the same processes again under another name.
//! - **Collective ordering.** Every rank must issue the same collectives
//!   in the same order: no branch on the rank around a collective. The
//!   plan runs its ops in one fixed order on every rank (the graphs are
//!   the same), and every collective first exchanges a small header, so
//!   ranks that disagree on a collective's kind, shape or dtype get the
//!   same `Err` instead of a hang; a rank that skips a collective entirely
//!   still hangs its peers, as in MPI.
//! - **Threads.** MPI is initialised at `MPI_THREAD_SERIALIZED`. rayon's
//!   workers (the CPU backend's parallel loops) never call MPI; the thread
//!   that runs a plan issues the collectives, one at a time under a lock,
//!   and a collective reached from a rayon worker (inside a parallel `map`
//!   body) is an `Err`. See [`comm`].
//! - **Errors.** Ranks whose argument shapes disagree, a batch (or basis)
//!   that does not split evenly over the ranks (pad it first), a
//!   collective outside a sharded function: each an `Err`, on every rank.
//!
//! Collectives never run at compile time: they declare themselves
//! effectful (`Op::has_effects`), so constant folding leaves them to the
//! plan.
#![warn(missing_docs)]

pub mod axis;
pub mod collectives;
pub mod comm;
mod kernels;
pub mod replication;
pub mod shard;

pub use axis::{Axis, AxisKind};
pub use collectives::{
    all_gather, all_reduce_max, all_reduce_sum, axis_index, broadcast, pvary, reduce_scatter,
    AllGather, AllReduce, Broadcast, GatherReplicated, PsumReplicated, Pvary, ReduceScatter,
    Replicated, SumToRoot, TakeShard,
};
pub use comm::{init, Reduce, Session};
pub use replication::Rep;
pub use shard::{
    data_parallel, jacfwd_sharded, jacrev_sharded, shard_map, spmd, vmap_named, ShardMap,
    ShardedJacobian, Spmd, SumOverRanks, VmapNamed,
};
