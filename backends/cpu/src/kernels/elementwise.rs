//! Kernels of the elementwise ops: generic over the op's scalar math, reading
//! broadcast operands through zero strides.

use super::{arity, unsupported};
use crate::buffers::{self, Pooled};
use crate::strided::{broadcast_strides, fill_chunks, for_each_run, Strides};
use crate::{register_kernel, Ctx};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::elementwise::*;

fn map1<A: Copy + Sync, T: Pooled>(x: &[A], ctx: &Ctx, f: impl Fn(A) -> T + Sync) -> Vec<T> {
    let mut out = buffers::take(x.len());
    fill_chunks(&mut out, ctx, |chunk, start| {
        for (d, &v) in chunk.iter_mut().zip(&x[start..]) {
            *d = f(v);
        }
    });
    out
}

/// The kernel of every [`UnaryMath`] op.
pub fn unary<O: UnaryMath>(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Ctx,
) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    let o = op.try_downcast::<O>()?;
    let storage = match inputs[0].storage() {
        Storage::F64(v) => f64::into_storage(map1(v, ctx, |a| o.f64(a))),
        Storage::F32(v) => f32::into_storage(map1(v, ctx, |a| o.f32(a))),
        Storage::I64(v) => i64::into_storage(map1(v, ctx, |a| o.i64(a))),
        Storage::Bool(_) => return Err(unsupported(op, 0, inputs[0].dtype())),
    };
    Tensor::from_storage(storage, &out.shape)
}

fn strides_pair(a: &Tensor, b: &Tensor, out: &[usize]) -> (Strides, Strides) {
    (broadcast_strides(a.shape(), out), broadcast_strides(b.shape(), out))
}

/// The kernel of every [`BinaryMath`] op.
pub fn binary<O: BinaryMath>(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Ctx,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let o = op.try_downcast::<O>()?;
    let (a, b) = (inputs[0], inputs[1]);
    let (sa, sb) = strides_pair(a, b, &out.shape);
    let s = &out.shape;
    let storage = match (a.storage(), b.storage()) {
        (Storage::F64(x), Storage::F64(y)) => {
            f64::into_storage(crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.f64(p, q)))
        }
        (Storage::F32(x), Storage::F32(y)) => {
            f32::into_storage(crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.f32(p, q)))
        }
        (Storage::I64(x), Storage::I64(y)) => {
            i64::into_storage(crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.i64(p, q)))
        }
        _ => return Err(unsupported(op, 0, a.dtype())),
    };
    Tensor::from_storage(storage, s)
}

/// The kernel of every [`CompareMath`] op.
pub fn compare<O: CompareMath>(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Ctx,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let o = op.try_downcast::<O>()?;
    let (a, b) = (inputs[0], inputs[1]);
    let (sa, sb) = strides_pair(a, b, &out.shape);
    let s = &out.shape;
    let v = match (a.storage(), b.storage()) {
        (Storage::F64(x), Storage::F64(y)) => {
            crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.compare(p, q))
        }
        (Storage::F32(x), Storage::F32(y)) => {
            crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.compare(p, q))
        }
        (Storage::I64(x), Storage::I64(y)) => {
            crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.compare(p, q))
        }
        (Storage::Bool(x), Storage::Bool(y)) => {
            crate::strided::map2((x, &sa), (y, &sb), s, ctx, |p, q| o.compare(p, q))
        }
        _ => return Err(unsupported(op, 1, b.dtype())),
    };
    Tensor::from_vec(v, s)
}

fn select_typed<T: Pooled>(
    c: &[bool],
    t: &[T],
    f: &[T],
    strides: [&[isize]; 3],
    shape: &[usize],
    ctx: &Ctx,
) -> Vec<T> {
    let mut out = buffers::take(anvil_core::shape::numel(shape));
    fill_chunks(&mut out, ctx, |chunk, start| {
        for_each_run(
            shape,
            strides,
            [0; 3],
            start,
            start + chunk.len(),
            |pos, [oc, ot, of], [sc, st, sf], len| {
                for (j, d) in chunk[pos - start..pos - start + len].iter_mut().enumerate() {
                    let j = j as isize;
                    let pick = c[(oc + j * sc) as usize];
                    *d = if pick { t[(ot + j * st) as usize] } else { f[(of + j * sf) as usize] };
                }
            },
        );
    });
    out
}

/// The kernel of `select`.
pub fn select(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 3)?;
    let s = &out.shape;
    let st: Vec<Strides> = inputs.iter().map(|t| broadcast_strides(t.shape(), s)).collect();
    let strides = [&st[0][..], &st[1][..], &st[2][..]];
    let c = inputs[0].as_slice::<bool>()?;
    let storage = match (inputs[1].storage(), inputs[2].storage()) {
        (Storage::F64(t), Storage::F64(f)) => {
            f64::into_storage(select_typed(c, t, f, strides, s, ctx))
        }
        (Storage::F32(t), Storage::F32(f)) => {
            f32::into_storage(select_typed(c, t, f, strides, s, ctx))
        }
        (Storage::I64(t), Storage::I64(f)) => {
            i64::into_storage(select_typed(c, t, f, strides, s, ctx))
        }
        (Storage::Bool(t), Storage::Bool(f)) => {
            bool::into_storage(select_typed(c, t, f, strides, s, ctx))
        }
        _ => return Err(unsupported(op, 2, inputs[2].dtype())),
    };
    Tensor::from_storage(storage, s)
}

/// The kernel of `cast`.
pub fn cast(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, _ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 1)?;
    Ok(inputs[0].cast(out.dtype))
}

/// Block math of a unary op, for fusion.
pub fn chunk_unary<O: UnaryMath>(op: &dyn Op, a: &[f64], out: &mut [f64]) {
    if let Some(o) = op.downcast_ref::<O>() {
        for (d, &x) in out.iter_mut().zip(a) {
            *d = o.f64(x);
        }
    }
}

/// Block math of a binary op, for fusion.
pub fn chunk_binary<O: BinaryMath>(op: &dyn Op, a: &[f64], b: &[f64], out: &mut [f64]) {
    if let Some(o) = op.downcast_ref::<O>() {
        for ((d, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *d = o.f64(x, y);
        }
    }
}

/// Registers the block math of ops for fusion:
/// `register_fusable!(unary: MyOp);`.
#[macro_export]
macro_rules! register_fusable {
    (unary: $($op:ty),*) => {
        $( $crate::anvil_core::register_entry!($crate::fusion::FusableMath, $op,
            math: $crate::fusion::ChunkMath::Unary($crate::kernels::elementwise::chunk_unary::<$op>)); )*
    };
    (binary: $($op:ty),*) => {
        $( $crate::anvil_core::register_entry!($crate::fusion::FusableMath, $op,
            math: $crate::fusion::ChunkMath::Binary($crate::kernels::elementwise::chunk_binary::<$op>)); )*
    };
}

crate::register_fusable!(unary: Neg, Sin, Cos, Tan, Exp, Log, Log1p, Expm1, Sqrt, Rsqrt, Recip, Tanh, Logistic, Abs, Sign, Floor, Ceil, Round, Erf, StopGradient);
crate::register_fusable!(binary: Add, Sub, Mul, Div, Pow, Max, Min, Atan2);

macro_rules! register_family {
    ($kernel:ident: $($op:ident),*) => {
        $( register_kernel!($op, $kernel::<$op>); )*
    };
}

register_family!(unary: Neg, Sin, Cos, Tan, Exp, Log, Log1p, Expm1, Sqrt, Rsqrt, Recip, Tanh, Logistic, Abs, Sign, Floor, Ceil, Round, Erf, StopGradient);
register_family!(binary: Add, Sub, Mul, Div, Pow, Max, Min, Atan2);
register_family!(compare: Lt, Le, Gt, Ge, Eq, Ne);
register_kernel!(Select, select);
register_kernel!(Cast, cast);
