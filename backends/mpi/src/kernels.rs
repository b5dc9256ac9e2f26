//! The CPU kernels of the collectives: each checks the ranks agree on the
//! call (see [`crate::comm`]), rearranges blocks where MPI's layout (rank
//! blocks outermost) differs from the op's (blocks along `dim`), and calls
//! the communicator.

use crate::axis::{Axis, AxisKind};
use crate::collectives::{
    AllGather, AllReduce, Broadcast, GatherReplicated, PsumReplicated, Pvary, ReduceScatter,
    Replicated, SumToRoot, TakeShard,
};
use crate::comm::{self, Reduce, Wire, HEADER};
use anvil_core::{DType, Element, Error, Op, Result, Storage, Tensor, TensorType};
use anvil_cpu::{register_kernel, Parallelism};

/// Tags a header so that a header never pairs with a data message unnoticed.
const MAGIC: i64 = 0x616e_7669_6c00;

/// What a rank is about to do, as the numbers its header carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    AllReduceSum = 1,
    AllReduceMax = 2,
    AllGather = 3,
    ReduceScatter = 4,
    Broadcast = 5,
    SumToRoot = 6,
    /// The agreement at the start of a `shard_map` or sharded Jacobian.
    Enter = 8,
}

impl Kind {
    fn name(code: i64) -> &'static str {
        match code {
            1 => "all_reduce_sum",
            2 => "all_reduce_max",
            3 => "all_gather",
            4 => "reduce_scatter",
            5 => "broadcast",
            6 => "sum_to_root",
            8 => "the start of a sharded function",
            _ => "an unknown message",
        }
    }
}

fn dtype_code(d: DType) -> i64 {
    match d {
        DType::F64 => 1,
        DType::F32 => 2,
        DType::I64 => 3,
        DType::Bool => 4,
    }
}

fn dtype_name(code: i64) -> &'static str {
    match code {
        1 => "f64",
        2 => "f32",
        3 => "i64",
        4 => "bool",
        _ => "?",
    }
}

/// A header: kind, dtype, a parameter, the shape (up to 10 axes kept
/// exactly; more are folded into the last slot's product).
pub(crate) fn header(kind: Kind, dtype: DType, param: i64, shape: &[usize]) -> [i64; HEADER] {
    let mut h = [0i64; HEADER];
    h[0] = MAGIC;
    h[1] = kind as i64;
    h[2] = dtype_code(dtype);
    h[3] = param;
    h[4] = shape.len() as i64;
    let slots = HEADER - 5;
    for (i, &d) in shape.iter().enumerate() {
        let at = 5 + i.min(slots - 1);
        h[at] = if i < slots { d as i64 } else { h[at].wrapping_mul(d as i64) };
    }
    h
}

fn describe(h: &[i64; HEADER]) -> String {
    if h[0] != MAGIC {
        return "a message that is not a collective's header (another MPI call?)".into();
    }
    let ndim = h[4].clamp(0, (HEADER - 5) as i64) as usize;
    let dims: Vec<String> = h[5..5 + ndim].iter().map(|d| d.to_string()).collect();
    format!(
        "{} of {}[{}] (parameter {})",
        Kind::name(h[1]),
        dtype_name(h[2]),
        dims.join(", "),
        h[3]
    )
}

/// Exchanges `mine` with every rank; an `Err` (the same on every rank)
/// when they differ.
pub(crate) fn agree(what: &str, mine: [i64; HEADER]) -> Result<()> {
    let all = comm::exchange_headers(what, &mine)?;
    if all.iter().all(|h| *h == mine) {
        return Ok(());
    }
    let calls: Vec<String> =
        all.iter().enumerate().map(|(r, h)| format!("rank {r} calls {}", describe(h))).collect();
    Err(Error::invalid(
        what,
        "ranks",
        format!(
            "disagree: {}. Every rank must issue the same collectives, in the same order, on \
             values of the same shape and dtype",
            calls.join("; ")
        ),
    ))
}

/// The one operand of a collective kernel over `axis`, after the checks
/// every collective makes (arity, the axis is the mesh); `None` for a group
/// of one member, where every collective is the identity (the caller
/// returns its operand, no copy).
fn operand<'a>(op: &dyn Op, inputs: &[&'a Tensor], axis: &Axis) -> Result<Option<&'a Tensor>> {
    anvil_core::op::expect_arity(op, inputs, 1)?;
    check_mesh(op, axis)?;
    Ok((axis.size != 1).then(|| inputs[0]))
}

/// Checks that the op's axis is this process group, of the size it was
/// traced for.
fn check_mesh(op: &dyn Op, axis: &Axis) -> Result<()> {
    if axis.kind == AxisKind::Vmap {
        return Err(Error::invalid(
            op.name(),
            "axis_name",
            format!(
                "'{}' is a vmapped axis, but the operand does not vary along it: a collective over \
                 a vmap_named axis needs an operand that depends on the batch",
                axis.name
            ),
        ));
    }
    let (_, size) = comm::rank_size(op.name())?;
    if size != axis.size {
        return Err(Error::invalid(
            op.name(),
            "axis_name",
            format!("'{}' was traced for {} processes; this run has {size}", axis.name, axis.size),
        ));
    }
    Ok(())
}

/// Runs `f` on the elements of `x` as their own type.
macro_rules! typed {
    ($op:expr, $x:expr, |$v:ident| $body:expr) => {
        match $x.storage() {
            Storage::F64($v) => f64::into_storage($body),
            Storage::F32($v) => f32::into_storage($body),
            Storage::I64($v) => i64::into_storage($body),
            Storage::Bool(_) => {
                return Err(Error::dtype($op.name(), "0", DType::Bool, "a numeric type"))
            }
        }
    };
}

/// `[outer, p, m, inner]` (blocks along the axis) → `[p, outer, m, inner]`
/// (rank blocks outermost), or back with `to_rank_major` false. With one
/// outer index (blocks along the first axis) the layouts are the same: no
/// copy.
fn regroup<T: Wire>(
    x: Vec<T>,
    outer: usize,
    p: usize,
    block: usize,
    to_rank_major: bool,
) -> Vec<T> {
    if outer == 1 {
        return x;
    }
    let mut out = vec![T::default(); x.len()];
    for o in 0..outer {
        for r in 0..p {
            let along = (o * p + r) * block;
            let rank_major = (r * outer + o) * block;
            let (from, to) = if to_rank_major { (along, rank_major) } else { (rank_major, along) };
            out[to..to + block].copy_from_slice(&x[from..from + block]);
        }
    }
    out
}

/// `(outer, block)` of a tensor split along `dim` into `p` blocks: the
/// product of the axes before `dim`, and the elements of one block of one
/// outer index.
fn split(shape: &[usize], dim: usize, p: usize) -> (usize, usize) {
    let outer: usize = shape[..dim].iter().product();
    let inner: usize = shape[dim + 1..].iter().product();
    (outer, shape[dim] / p.max(1) * inner)
}

fn all_reduce_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<AllReduce>()?;
    reduce(op, inputs, out, &c.axis, c.reduce)
}

/// The all-reduce of [`AllReduce`] and [`PsumReplicated`].
fn reduce(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    axis: &Axis,
    how: Reduce,
) -> Result<Tensor> {
    let Some(x) = operand(op, inputs, axis)? else {
        return Ok(inputs[0].clone());
    };
    let kind = if how == Reduce::Sum { Kind::AllReduceSum } else { Kind::AllReduceMax };
    agree(op.name(), header(kind, x.dtype(), 0, x.shape()))?;
    let s = typed!(op, x, |v| comm::all_reduce(op.name(), v, how)?);
    Tensor::from_storage(s, out.shape())
}

fn psum_replicated_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<PsumReplicated>()?;
    reduce(op, inputs, out, &c.axis, Reduce::Sum)
}

fn all_gather_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<AllGather>()?;
    gather(op, inputs, out, &c.axis, c.dim)
}

fn gather_replicated_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<GatherReplicated>()?;
    gather(op, inputs, out, &c.axis, c.dim)
}

/// The all-gather of [`AllGather`] and [`GatherReplicated`].
fn gather(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    axis: &Axis,
    dim: usize,
) -> Result<Tensor> {
    let Some(x) = operand(op, inputs, axis)? else {
        return Ok(inputs[0].clone());
    };
    agree(op.name(), header(Kind::AllGather, x.dtype(), dim as i64, x.shape()))?;
    let p = axis.size;
    let (outer, block) = split(out.shape(), dim, p);
    let s = typed!(op, x, |v| {
        let gathered = comm::all_gather(op.name(), v)?;
        regroup(gathered, outer, p, block, false)
    });
    Tensor::from_storage(s, out.shape())
}

fn reduce_scatter_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<ReduceScatter>()?;
    let Some(x) = operand(op, inputs, &c.axis)? else {
        return Ok(inputs[0].clone());
    };
    agree(op.name(), header(Kind::ReduceScatter, x.dtype(), c.dim as i64, x.shape()))?;
    let p = c.axis.size;
    let (outer, block) = split(x.shape(), c.dim, p);
    let s = typed!(op, x, |v| {
        if outer == 1 {
            comm::reduce_scatter(op.name(), v)?
        } else {
            comm::reduce_scatter(op.name(), &regroup(v.to_vec(), outer, p, block, true))?
        }
    });
    Tensor::from_storage(s, out.shape())
}

fn broadcast_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<Broadcast>()?;
    let Some(x) = operand(op, inputs, &c.axis)? else {
        return Ok(inputs[0].clone());
    };
    agree(op.name(), header(Kind::Broadcast, x.dtype(), c.root as i64, x.shape()))?;
    let s = typed!(op, x, |v| {
        let mut buf = v.to_vec();
        comm::broadcast(op.name(), &mut buf, c.root)?;
        buf
    });
    Tensor::from_storage(s, out.shape())
}

fn sum_to_root_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<SumToRoot>()?;
    let Some(x) = operand(op, inputs, &c.axis)? else {
        return Ok(inputs[0].clone());
    };
    agree(op.name(), header(Kind::SumToRoot, x.dtype(), c.root as i64, x.shape()))?;
    let s = typed!(op, x, |v| comm::reduce_to_root(op.name(), v, c.root)?);
    Tensor::from_storage(s, out.shape())
}

/// `Pvary`: the identity (no copy).
fn pvary_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    _: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<Pvary>()?;
    operand(op, inputs, &c.axis)?;
    Ok(inputs[0].clone())
}

/// `TakeShard`: this rank's block along `dim`, a local copy.
fn take_shard_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<TakeShard>()?;
    let Some(x) = operand(op, inputs, &c.axis)? else {
        return Ok(inputs[0].clone());
    };
    let (rank, p) = comm::rank_size(op.name())?;
    let (outer, block) = split(x.shape(), c.dim, p);
    let s = typed!(op, x, |v| {
        let mut mine = Vec::with_capacity(outer * block);
        for o in 0..outer {
            let at = (o * p + rank) * block;
            mine.extend_from_slice(&v[at..at + block]);
        }
        mine
    });
    Tensor::from_storage(s, out.shape())
}

/// `Replicated`: the identity (no copy), or transposed the division by the
/// number of ranks.
fn replicated_kernel(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &Parallelism,
) -> Result<Tensor> {
    let c = op.try_downcast::<Replicated>()?;
    let Some(x) = operand(op, inputs, &c.axis)? else {
        return Ok(inputs[0].clone());
    };
    if !c.transposed {
        return Ok(x.clone());
    }
    let p = c.axis.size;
    let s = match x.storage() {
        Storage::F64(v) => f64::into_storage(v.iter().map(|e| e / p as f64).collect()),
        Storage::F32(v) => f32::into_storage(v.iter().map(|e| e / p as f32).collect()),
        _ => return Err(Error::dtype(op.name(), "0", x.dtype(), "a float type")),
    };
    Tensor::from_storage(s, out.shape())
}

register_kernel!(AllReduce, all_reduce_kernel);
register_kernel!(AllGather, all_gather_kernel);
register_kernel!(ReduceScatter, reduce_scatter_kernel);
register_kernel!(Broadcast, broadcast_kernel);
register_kernel!(SumToRoot, sum_to_root_kernel);
register_kernel!(Pvary, pvary_kernel);
register_kernel!(PsumReplicated, psum_replicated_kernel);
register_kernel!(GatherReplicated, gather_replicated_kernel);
register_kernel!(TakeShard, take_shard_kernel);
register_kernel!(Replicated, replicated_kernel);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regroup_round_trips_and_moves_rank_blocks_outermost() {
        // outer 2, p 3, block 2: [o][r][b] -> [r][o][b]
        let x: Vec<i64> = (0..12).collect();
        let rm = regroup(x.clone(), 2, 3, 2, true);
        assert_eq!(rm, vec![0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11]);
        assert_eq!(regroup(rm, 2, 3, 2, false), x);
    }

    #[test]
    fn headers_differ_by_shape_and_describe_it() {
        let a = header(Kind::AllGather, DType::F64, 0, &[3, 4]);
        let b = header(Kind::AllGather, DType::F64, 0, &[3, 5]);
        assert_ne!(a, b);
        assert_eq!(describe(&a), "all_gather of f64[3, 4] (parameter 0)");
    }
}
