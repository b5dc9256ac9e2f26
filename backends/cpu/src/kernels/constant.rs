//! The kernel of captured constants and of dimension sizes. (`full`,
//! `iota` and the `jacfwd` seed are generators: they run, and fuse, as
//! elementwise ops.)

use super::arity;
use crate::{register_kernel, Parallelism};
use anvil_core::{Constant, DimSize, Op, Result, Tensor, TensorType};

/// The kernel of the ops that are a value: a captured [`Constant`] (its
/// tensor, shared, not copied), and a dimension's size ([`DimSize`]): a
/// plan over symbolic shapes binds that op to each call's sizes before
/// running it, which makes it a constant (its `bind_dims`); unbound, its
/// dimension must be a size.
///
/// # Errors
/// A symbolic dimension the plan did not bind.
pub fn constant(
    op: &dyn Op,
    inputs: &[&Tensor],
    _out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 0)?;
    match op.constant_value() {
        Some(value) => Ok(value.clone()),
        None => op.try_downcast::<DimSize>()?.evaluate(&anvil_core::shape::Binding::new()),
    }
}

register_kernel!(Constant, constant);
register_kernel!(DimSize, constant);
