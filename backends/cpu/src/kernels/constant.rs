//! The kernels of captured constants and of dimension sizes. (`full`,
//! `iota` and the `jacfwd` seed are generators: they run, and fuse, as
//! elementwise ops.)

use super::arity;
use crate::{register_kernel, Parallelism};
use anvil_core::{Constant, DimSize, Op, Result, Tensor, TensorType};

/// A captured constant: its tensor, shared, not copied.
pub fn constant(
    op: &dyn Op,
    inputs: &[&Tensor],
    _out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 0)?;
    Ok(op.try_downcast::<Constant>()?.value.clone())
}

/// A dimension's size. A plan over symbolic shapes binds the op to each
/// call's sizes before running it, which makes it a [`Constant`]
/// ([`DimSize`]'s `bind_dims`); unbound, the dimension must be a size.
///
/// # Errors
/// A symbolic dimension the plan did not bind.
pub fn dim_size(
    op: &dyn Op,
    inputs: &[&Tensor],
    _out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 0)?;
    if let Some(value) = op.constant_value() {
        return Ok(value.clone());
    }
    op.try_downcast::<DimSize>()?.evaluate(&anvil_core::shape::Binding::new())
}

register_kernel!(Constant, constant);
register_kernel!(DimSize, dim_size);
