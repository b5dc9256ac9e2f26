//! Kernels of the ops without operands: captured constants, `full`, `iota`.

use super::arity;
use crate::{register_kernel, Ctx};
use anvil_core::{Constant, DType, Op, Result, Tensor, TensorType};
use anvil_ops::constant::{Full, Iota};

/// A captured constant: its tensor, shared, not copied.
pub fn constant(op: &dyn Op, inputs: &[&Tensor], _out: &TensorType, _ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 0)?;
    Ok(op.try_downcast::<Constant>()?.value.clone())
}

/// `full`.
pub fn full(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, _ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 0)?;
    Ok(Tensor::full_scalar(&out.shape, op.try_downcast::<Full>()?.value))
}

/// `iota`.
pub fn iota(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, _ctx: &Ctx) -> Result<Tensor> {
    arity(op, inputs, 0)?;
    let io = op.try_downcast::<Iota>()?;
    let inner: usize = out.shape[io.axis + 1..].iter().product();
    let dim = out.shape[io.axis];
    let n = out.numel();
    let v: Vec<i64> = (0..n).map(|i| ((i / inner.max(1)) % dim.max(1)) as i64).collect();
    let t = Tensor::from_vec(v, &out.shape)?;
    Ok(if io.dtype == DType::I64 { t } else { t.cast(io.dtype) })
}

register_kernel!(Constant, constant);
register_kernel!(Full, full);
register_kernel!(Iota, iota);
