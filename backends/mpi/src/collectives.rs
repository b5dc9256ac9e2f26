//! Collectives as ops: each op's struct, shape rule, vmap rule, jvp rule
//! and transpose rule side by side, then one block registering them.
//!
//! **Convention for transposes.** As written by a program, a collective is
//! a linear map on the ranks' stacked values (rank `r` holds `x_r`), and
//! its transpose rule is its exact adjoint there, the inner products summed
//! over the ranks: `all_reduce_sumᵀ = all_reduce_sum`, `all_gatherᵀ =
//! reduce_scatter` (and back), `broadcastᵀ` = the sum onto the root. This
//! is the view of `spmd`-style code with no types, and of a collective
//! traced outside any typing.
//!
//! A sharded function ([`shard_map`](crate::shard_map), [`spmd`](crate::spmd))
//! types its values as replicated or varying over the ranks while they are
//! traced, and traces its collectives as the typed ops below ([`Pvary`],
//! [`PsumReplicated`], [`GatherReplicated`], [`TakeShard`], [`Replicated`]),
//! JAX `shard_map`'s convention: a replicated value's cotangent is
//! replicated, so `all_reduce_sum`'s transpose is the identity (no
//! communication), a replicated result's cotangent needs no collective, and
//! the backward pass communicates only where a replicated value met varying
//! ones. See [`replication`](crate::replication) for the rules; with them,
//! `grad` of a sharded function is the single-process gradient.

use crate::axis::{is_resolving, witness, Axis, AxisKind};
use crate::comm::Reduce;
use anvil_core::op::expect_arity;
use anvil_core::{register_rule, Batched, Error, LinearArg, Op, Result, TensorType, Var};
use anvil_ops::batching::{move_axis, physical_axis};
use anvil_ops::VarExt;

/// Checks the operand of a collective: one numeric operand.
fn one_numeric(op: &dyn Op, inputs: &[TensorType]) -> Result<TensorType> {
    expect_arity(op, inputs, 1)?;
    anvil_ops::elementwise::Domain::Numeric.check(op.name(), 0, inputs[0].dtype())?;
    Ok(inputs[0].clone())
}

/// Checks that `dim` is an axis of the operand.
fn check_dim(op: &dyn Op, t: &TensorType, dim: usize) -> Result<()> {
    if dim < t.rank() {
        return Ok(());
    }
    Err(Error::AxisOutOfRange {
        op: op.name().into(),
        axis: dim as i64,
        shape: t.shape().to_vec(),
        arg: "0".into(),
    })
}

fn apply(op: impl Op, x: &Var) -> Var {
    Var::apply_op(Box::new(op), &[x])
}

/// The same op on the batched value, the batch axis kept (a collective
/// over another axis acts on every batch element alike).
fn same_op(op: Box<dyn Op>, b: &Batched) -> Batched {
    Batched::new(Var::apply_op(op, &[&b.var]), b.axis)
}

// ------------------------------------------------------------ all_reduce

/// The sum or maximum of a value over the members of a mapped axis; every
/// member gets the result (`MPI_Allreduce`, JAX's `psum`/`pmax`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AllReduce {
    /// The axis reduced over.
    pub axis: Axis,
    /// Sum or maximum.
    pub reduce: Reduce,
}

impl Op for AllReduce {
    fn name(&self) -> &'static str {
        match self.reduce {
            Reduce::Sum => "mpi.all_reduce_sum",
            Reduce::Max => "mpi.all_reduce_max",
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        one_numeric(self, inputs)
    }
    fn params(&self) -> String {
        format!("axis={}", self.axis.name)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0 && self.reduce == Reduce::Sum
    }
}

/// Batching: over the vmapped axis it names, a reduction of the batch axis
/// (the result is the same for every element); over another axis, the
/// same collective on every element.
fn vmap_all_reduce(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<AllReduce>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    if !is_resolving(&c.axis) {
        return Ok(same_op(op.boxed(), b));
    }
    let k = k as i64;
    Ok(Batched::new(
        match c.reduce {
            Reduce::Sum => b.var.sum(&[k]),
            Reduce::Max => b.var.max(&[k], false),
        },
        None,
    ))
}

/// `d psum(x) = psum(dx)`; `d pmax(x)` is the mean of the tangents of the
/// members that hold the maximum (a subgradient, as `max`'s rule).
fn jvp_all_reduce(op: &dyn Op, x: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let c = op.try_downcast::<AllReduce>()?;
    let Some(t) = &t[0] else { return Ok(None) };
    let sum = |v: &Var| apply(AllReduce { axis: c.axis.clone(), reduce: Reduce::Sum }, v);
    Ok(Some(match c.reduce {
        Reduce::Sum => sum(t),
        Reduce::Max => {
            let at_max = x[0].equal(out);
            let ties = sum(&at_max.select(&out.ones_like(), &out.zeros_like()));
            sum(&at_max.select(t, &t.zeros_like())) / ties
        }
    }))
}

/// `psumᵀ = psum`: the cotangent of every member's input is the sum of
/// every member's output cotangent.
fn transpose_all_reduce(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<AllReduce>()?;
    if c.reduce != Reduce::Sum {
        return Err(Error::invalid(c.name(), "transpose", "the maximum is not linear"));
    }
    Ok(vec![args[0].is_linear().then(|| apply(c.clone(), ct))])
}

// ------------------------------------------------------------ all_gather

/// The members' values concatenated along axis `dim` in member order
/// (`MPI_Allgather`, JAX's `all_gather(..., tiled=True)`): `dim` grows
/// `size` times.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AllGather {
    /// The axis gathered over.
    pub axis: Axis,
    /// The operand's axis along which the values are concatenated.
    pub dim: usize,
}

impl Op for AllGather {
    fn name(&self) -> &'static str {
        "mpi.all_gather"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let t = one_numeric(self, inputs)?;
        check_dim(self, &t, self.dim)?;
        let mut shape = t.shape().to_vec();
        shape[self.dim] *= self.axis.size;
        Ok(TensorType::new(t.dtype(), shape))
    }
    fn params(&self) -> String {
        format!("axis={}, dim={}", self.axis.name, self.dim)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Batching: over its own vmapped axis, the batch axis moved next to `dim`
/// and merged into it; over another axis, the same gather along `dim`
/// shifted past the batch axis.
fn vmap_all_gather(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<AllGather>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    if !is_resolving(&c.axis) {
        let op = AllGather { axis: c.axis.clone(), dim: physical_axis(c.dim, k) };
        return Ok(Batched::new(apply(op, &b.var), Some(k)));
    }
    let elem = b.logical_shape();
    let moved = move_axis(&b.var, k, c.dim);
    let mut shape: Vec<i64> = elem.iter().map(|&d| d as i64).collect();
    shape[c.dim] *= c.axis.size as i64;
    Ok(Batched::new(moved.reshape(&shape), None))
}

/// `all_gatherᵀ = reduce_scatter` along the same `dim`.
fn transpose_all_gather(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<AllGather>()?;
    let rs = ReduceScatter { axis: c.axis.clone(), dim: c.dim };
    Ok(vec![args[0].is_linear().then(|| apply(rs, ct))])
}

// -------------------------------------------------------- reduce_scatter

/// The sum over the members, split along `dim` into `size` equal blocks,
/// member `r` keeping block `r` (`MPI_Reduce_scatter_block`, JAX's
/// `psum_scatter(..., tiled=True)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReduceScatter {
    /// The axis reduced over.
    pub axis: Axis,
    /// The operand's axis that is split.
    pub dim: usize,
}

impl Op for ReduceScatter {
    fn name(&self) -> &'static str {
        "mpi.reduce_scatter"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let t = one_numeric(self, inputs)?;
        check_dim(self, &t, self.dim)?;
        let mut shape = t.shape().to_vec();
        if shape[self.dim] % self.axis.size.max(1) != 0 {
            return Err(Error::shape(
                self.name(),
                &[t.shape()],
                format!(
                    "axis {} has length {}, not divisible by the {} members of axis '{}'",
                    self.dim, shape[self.dim], self.axis.size, self.axis.name
                ),
            ));
        }
        shape[self.dim] /= self.axis.size.max(1);
        Ok(TensorType::new(t.dtype(), shape))
    }
    fn params(&self) -> String {
        format!("axis={}, dim={}", self.axis.name, self.dim)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Batching: over its own vmapped axis, the sum over the batch split into
/// blocks along `dim`, the blocks becoming the batch; over another axis,
/// the same op along `dim` shifted past the batch axis.
fn vmap_reduce_scatter(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<ReduceScatter>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    if !is_resolving(&c.axis) {
        let op = ReduceScatter { axis: c.axis.clone(), dim: physical_axis(c.dim, k) };
        return Ok(Batched::new(apply(op, &b.var), Some(k)));
    }
    let total = b.var.sum(&[k as i64]);
    let n = c.axis.size as i64;
    let mut shape: Vec<i64> = total.shape().iter().map(|&d| d as i64).collect();
    let d = shape[c.dim];
    shape.splice(c.dim..=c.dim, [n, d / n.max(1)]);
    Ok(Batched::new(total.reshape(&shape), Some(c.dim)))
}

/// `reduce_scatterᵀ = all_gather` along the same `dim`.
fn transpose_reduce_scatter(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<ReduceScatter>()?;
    let ag = AllGather { axis: c.axis.clone(), dim: c.dim };
    Ok(vec![args[0].is_linear().then(|| apply(ag, ct))])
}

// ------------------------------------------------- broadcast, sum to root

/// The root member's value, on every member (`MPI_Bcast`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Broadcast {
    /// The axis broadcast over.
    pub axis: Axis,
    /// The member whose value everyone gets.
    pub root: usize,
}

/// The sum over the members on the root member, zeros on the others
/// (`MPI_Reduce` to the root): the transpose of [`Broadcast`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SumToRoot {
    /// The axis reduced over.
    pub axis: Axis,
    /// The member that gets the sum.
    pub root: usize,
}

fn check_root(op: &dyn Op, axis: &Axis, root: usize, inputs: &[TensorType]) -> Result<TensorType> {
    let t = one_numeric(op, inputs)?;
    if root >= axis.size {
        return Err(Error::invalid(
            op.name(),
            "root",
            format!("is {root}, but axis '{}' has {} members", axis.name, axis.size),
        ));
    }
    Ok(t)
}

impl Op for Broadcast {
    fn name(&self) -> &'static str {
        "mpi.broadcast"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        check_root(self, &self.axis, self.root, inputs)
    }
    fn params(&self) -> String {
        format!("axis={}, root={}", self.axis.name, self.root)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

impl Op for SumToRoot {
    fn name(&self) -> &'static str {
        "mpi.sum_to_root"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        check_root(self, &self.axis, self.root, inputs)
    }
    fn params(&self) -> String {
        format!("axis={}, root={}", self.axis.name, self.root)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Batching: over its own vmapped axis, the root's element (the same for
/// every element); over another axis, the same broadcast.
fn vmap_broadcast(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<Broadcast>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    if !is_resolving(&c.axis) {
        return Ok(same_op(op.boxed(), b));
    }
    Ok(Batched::new(b.var.index_axis(k as i64, c.root as i64), None))
}

/// Batching: over its own vmapped axis, the sum over the batch at the
/// root's position and zeros elsewhere; over another axis, the same op.
fn vmap_sum_to_root(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<SumToRoot>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    if !is_resolving(&c.axis) {
        return Ok(same_op(op.boxed(), b));
    }
    let total = b.var.sum(&[k as i64]).unsqueeze(0);
    let mut widths = vec![(0usize, 0usize); total.rank()];
    widths[0] = (c.root, c.axis.size - 1 - c.root);
    Ok(Batched::new(total.pad(&widths, 0.0), Some(0)))
}

/// `broadcastᵀ` = the sum onto the root.
fn transpose_broadcast(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Broadcast>()?;
    let op = SumToRoot { axis: c.axis.clone(), root: c.root };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

/// `(sum to root)ᵀ = broadcast` from the root.
fn transpose_sum_to_root(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<SumToRoot>()?;
    let op = Broadcast { axis: c.axis.clone(), root: c.root };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

// ------------------------------------------------- replication types

/// A replicated value entering varying work (JAX's `pvary`): the identity,
/// whose transpose sums the ranks' cotangents ([`PsumReplicated`]). The
/// [replication rewrite](crate::replication) inserts it where a replicated
/// value meets varying ones; it is the one place a replicated value's
/// cotangent costs communication.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pvary {
    /// The mesh axis.
    pub axis: Axis,
}

/// The sum over the ranks of a varying value, replicated (JAX's `psum` of
/// a varying value): the all-reduce of [`AllReduce`], with the transpose
/// the replication types give it: [`Pvary`], no communication.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PsumReplicated {
    /// The mesh axis.
    pub axis: Axis,
}

/// The ranks' values concatenated along `dim`, replicated (JAX's
/// `all_gather_invariant`): the all-gather of [`AllGather`], whose
/// transpose is each rank's own block of the (replicated) cotangent,
/// [`TakeShard`], no communication.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GatherReplicated {
    /// The mesh axis.
    pub axis: Axis,
    /// The operand's axis along which the values are concatenated.
    pub dim: usize,
}

/// This rank's block of a replicated value split along `dim` into one block
/// per rank (a sharded argument of [`shard_map`](crate::shard_map)): a local
/// slice, varying, whose transpose gathers the blocks' cotangents
/// ([`GatherReplicated`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TakeShard {
    /// The mesh axis.
    pub axis: Axis,
    /// The operand's axis that is split.
    pub dim: usize,
}

/// A varying value that the program promises is the same on every rank (a
/// `shard_map` result with `out_axes` `None` that the replication types
/// cannot prove replicated). Forward, the identity; as a linear map, the
/// mean over the ranks, so its transpose (`transposed`) divides the
/// cotangent by the number of ranks, locally.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Replicated {
    /// The mesh axis.
    pub axis: Axis,
    /// The transposed op (the division).
    pub transposed: bool,
}

impl Op for Pvary {
    fn name(&self) -> &'static str {
        "mpi.pvary"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
    fn params(&self) -> String {
        format!("axis={}", self.axis.name)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

impl Op for PsumReplicated {
    fn name(&self) -> &'static str {
        "mpi.psum_replicated"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        one_numeric(self, inputs)
    }
    fn params(&self) -> String {
        format!("axis={}", self.axis.name)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

impl Op for GatherReplicated {
    fn name(&self) -> &'static str {
        "mpi.gather_replicated"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        AllGather { axis: self.axis.clone(), dim: self.dim }.infer(inputs)
    }
    fn params(&self) -> String {
        format!("axis={}, dim={}", self.axis.name, self.dim)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

impl Op for TakeShard {
    fn name(&self) -> &'static str {
        "mpi.take_shard"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        ReduceScatter { axis: self.axis.clone(), dim: self.dim }.infer(inputs)
    }
    fn params(&self) -> String {
        format!("axis={}, dim={}", self.axis.name, self.dim)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

impl Op for Replicated {
    fn name(&self) -> &'static str {
        if self.transposed {
            "mpi.replicated_t"
        } else {
            "mpi.replicated"
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        if self.transposed && !inputs[0].dtype().is_float() {
            return Err(Error::dtype(self.name(), "0", inputs[0].dtype(), "a float type"));
        }
        Ok(inputs[0].clone())
    }
    fn params(&self) -> String {
        format!("axis={}", self.axis.name)
    }
    fn has_effects(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Batching of an op acting on each element alike: the same op, the batch
/// axis kept (these ops act over mesh axes, never over a vmapped one).
fn vmap_elementwise(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    Ok(same_op(op.boxed(), &args[0]))
}

/// Batching of an op along `dim`: the same op along `dim` shifted past the
/// batch axis.
fn vmap_gather_replicated(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<GatherReplicated>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    let op = GatherReplicated { axis: c.axis.clone(), dim: physical_axis(c.dim, k) };
    Ok(Batched::new(apply(op, &b.var), Some(k)))
}

/// As [`vmap_gather_replicated`].
fn vmap_take_shard(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<TakeShard>()?;
    let (b, Some(k)) = (&args[0], args[0].axis) else { return Ok(args[0].clone()) };
    let op = TakeShard { axis: c.axis.clone(), dim: physical_axis(c.dim, k) };
    Ok(Batched::new(apply(op, &b.var), Some(k)))
}

/// `pvaryᵀ` = the sum over the ranks, replicated.
fn transpose_pvary(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Pvary>()?;
    let op = PsumReplicated { axis: c.axis.clone() };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

/// `psumᵀ = pvary`: the replicated cotangent is every rank's cotangent.
fn transpose_psum_replicated(
    op: &dyn Op,
    ct: &Var,
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<PsumReplicated>()?;
    let op = Pvary { axis: c.axis.clone() };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

/// `gatherᵀ` = this rank's block of the replicated cotangent.
fn transpose_gather_replicated(
    op: &dyn Op,
    ct: &Var,
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<GatherReplicated>()?;
    let op = TakeShard { axis: c.axis.clone(), dim: c.dim };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

/// `take_shardᵀ` = the blocks' cotangents gathered, replicated.
fn transpose_take_shard(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<TakeShard>()?;
    let op = GatherReplicated { axis: c.axis.clone(), dim: c.dim };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

/// The promise transposed (the division by the number of ranks), and back.
fn transpose_replicated(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Replicated>()?;
    let op = Replicated { transposed: !c.transposed, ..c.clone() };
    Ok(vec![args[0].is_linear().then(|| apply(op, ct))])
}

register_rule!(VmapRule, AllReduce, vmap_all_reduce);
register_rule!(JvpRule, AllReduce, jvp_all_reduce);
register_rule!(TransposeRule, AllReduce, transpose_all_reduce);
register_rule!(VmapRule, AllGather, vmap_all_gather);
register_rule!(JvpRule, AllGather, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, AllGather, transpose_all_gather);
register_rule!(VmapRule, ReduceScatter, vmap_reduce_scatter);
register_rule!(JvpRule, ReduceScatter, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, ReduceScatter, transpose_reduce_scatter);
register_rule!(VmapRule, Broadcast, vmap_broadcast);
register_rule!(JvpRule, Broadcast, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, Broadcast, transpose_broadcast);
register_rule!(VmapRule, SumToRoot, vmap_sum_to_root);
register_rule!(JvpRule, SumToRoot, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, SumToRoot, transpose_sum_to_root);
register_rule!(VmapRule, Pvary, vmap_elementwise);
register_rule!(JvpRule, Pvary, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, Pvary, transpose_pvary);
register_rule!(VmapRule, PsumReplicated, vmap_elementwise);
register_rule!(JvpRule, PsumReplicated, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, PsumReplicated, transpose_psum_replicated);
register_rule!(VmapRule, GatherReplicated, vmap_gather_replicated);
register_rule!(JvpRule, GatherReplicated, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, GatherReplicated, transpose_gather_replicated);
register_rule!(VmapRule, TakeShard, vmap_take_shard);
register_rule!(JvpRule, TakeShard, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, TakeShard, transpose_take_shard);
register_rule!(VmapRule, Replicated, vmap_elementwise);
register_rule!(JvpRule, Replicated, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, Replicated, transpose_replicated);

// ------------------------------------------------------------ user API

/// Applies a collective over the axis named `axis_name`, or records the
/// error (an unbound name) in the trace.
fn collective(x: &Var, what: &str, axis_name: &str, make: impl FnOnce(Axis) -> Box<dyn Op>) -> Var {
    match crate::axis::bound(what, axis_name) {
        Ok(axis) if axis.kind == AxisKind::Vmap => {
            // An operand that does not depend on the batch is made to (a
            // zero that does added), so that the batching rule resolves the
            // collective: psum(c) = c * size, as in JAX.
            let x = match witness(&axis.name, x) {
                Some(zero) => x + &zero.cast(x.dtype()),
                None => x.clone(),
            };
            Var::apply_op(make(axis), &[&x])
        }
        Ok(axis) => Var::apply_op(make(axis), &[x]),
        Err(e) => {
            x.tracer().record(e);
            x.tracer().poisoned()
        }
    }
}

/// `x`, a value the same on every rank, marked as varying over the ranks
/// of the mesh axis `axis_name` (JAX's `pvary`): the identity, whose
/// transpose sums the ranks' cotangents. Inside a sharded function a
/// replicated value used with per-rank ones is marked so by itself; call
/// `pvary` where each rank must keep *its own* cotangent of a replicated
/// value: per-example gradients with respect to replicated parameters,
/// which JAX's convention (and anvil's) otherwise sums over the ranks.
/// Over a `vmap_named` axis it is the identity.
///
/// ```
/// use anvil::prelude::*;
/// let mpi = anvil_mpi::init()?;
/// let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let xs = Tensor::from_vec((0..4 * mpi.size()).map(|i| i as f64).collect(), &[2 * mpi.size(), 2])?;
/// let loss = |w: &Var, x: &Var| x.matmul(w).square().sum_all();
/// // Each rank's gradient of its own examples' loss, gathered: [p, 2].
/// let own = anvil_mpi::shard_map(
///     |w: &Var, x: &Var| grad(loss).invoke((&anvil_mpi::pvary(w, "b"), x)).unsqueeze(0),
///     "b",
/// )
/// .in_axes((None, Some(0)));
/// assert_eq!(own.eval((&w, &xs))?.shape(), &[mpi.size(), 2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn pvary(x: &Var, axis_name: &str) -> Var {
    match crate::axis::bound("mpi.pvary", axis_name) {
        Ok(axis) if axis.kind == AxisKind::Mesh => Var::apply_op(Box::new(Pvary { axis }), &[x]),
        Ok(_) => x.clone(),
        Err(e) => {
            x.tracer().record(e);
            x.tracer().poisoned()
        }
    }
}

/// The sum of `x` over the members of the mapped axis `axis_name` (JAX's
/// `psum`); every member gets it.
///
/// ```
/// use anvil::prelude::*;
/// let _mpi = anvil_mpi::init()?;
/// // Each rank's slice of the batch is summed locally, then over the ranks.
/// let total = anvil_mpi::shard_map(
///     |x: &Var| anvil_mpi::all_reduce_sum(&x.sum(&[0]), "batch"),
///     "batch",
/// )
/// .out_axes(None);
/// let xs = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
/// assert_eq!(total.eval(&xs)?.item()?, 10.0);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn all_reduce_sum(x: &Var, axis_name: &str) -> Var {
    collective(x, "mpi.all_reduce_sum", axis_name, |axis| {
        Box::new(AllReduce { axis, reduce: Reduce::Sum })
    })
}

/// The elementwise maximum of `x` over the members of `axis_name` (JAX's
/// `pmax`).
pub fn all_reduce_max(x: &Var, axis_name: &str) -> Var {
    collective(x, "mpi.all_reduce_max", axis_name, |axis| {
        Box::new(AllReduce { axis, reduce: Reduce::Max })
    })
}

/// The members' `x` concatenated along `dim` in member order (JAX's
/// `all_gather(x, axis_name, axis=dim, tiled=True)`). Negative `dim`s
/// count from the end.
pub fn all_gather(x: &Var, axis_name: &str, dim: i64) -> Var {
    with_dim(x, "mpi.all_gather", dim, |dim| {
        collective(x, "mpi.all_gather", axis_name, |axis| Box::new(AllGather { axis, dim }))
    })
}

/// The sum over the members of `axis_name`, split along `dim` into one
/// block per member, member `r` keeping block `r` (JAX's
/// `psum_scatter(x, axis_name, scatter_dimension=dim, tiled=True)`).
pub fn reduce_scatter(x: &Var, axis_name: &str, dim: i64) -> Var {
    with_dim(x, "mpi.reduce_scatter", dim, |dim| {
        collective(x, "mpi.reduce_scatter", axis_name, |axis| Box::new(ReduceScatter { axis, dim }))
    })
}

/// Member `root`'s `x`, on every member of `axis_name`.
pub fn broadcast(x: &Var, axis_name: &str, root: usize) -> Var {
    collective(x, "mpi.broadcast", axis_name, |axis| Box::new(Broadcast { axis, root }))
}

fn with_dim(x: &Var, what: &str, dim: i64, f: impl FnOnce(usize) -> Var) -> Var {
    match anvil_core::shape::normalize_axis(what, dim, x.shape(), "0") {
        Ok(d) => f(d),
        Err(e) => {
            x.tracer().record(e);
            x.tracer().poisoned()
        }
    }
}

/// This member's index along the mesh axis `axis_name` (JAX's
/// `axis_index`): the rank, as an `i64` scalar constant of this process's
/// trace. An unbound name, or the name of a `vmap_named` axis (not
/// supported), is an error recorded in the trace.
pub fn axis_index(like: &Var, axis_name: &str) -> Var {
    match crate::axis::bound("mpi.axis_index", axis_name) {
        Ok(axis @ Axis { kind: AxisKind::Mesh, .. }) => {
            match crate::comm::rank_size("mpi.axis_index") {
                Ok((rank, _)) => {
                    // Typed varying: the constant differs between the ranks.
                    let r = like.tracer().constant(anvil_core::Tensor::scalar(rank as i64));
                    Var::apply_op(Box::new(Pvary { axis }), &[&r])
                }
                Err(e) => {
                    like.tracer().record(e);
                    like.tracer().poisoned()
                }
            }
        }
        Ok(axis) => {
            let e = Error::invalid(
                "mpi.axis_index",
                "axis_name",
                format!("'{}' is a vmapped axis; axis_index supports mesh axes", axis.name),
            );
            like.tracer().record(e);
            like.tracer().poisoned()
        }
        Err(e) => {
            like.tracer().record(e);
            like.tracer().poisoned()
        }
    }
}
