//! The kernel of captured constants. (`full`, `iota` and the `jacfwd`
//! seed are generators: they run, and fuse, as elementwise ops.)

use super::arity;
use crate::{register_kernel, Parallelism};
use anvil_core::{Constant, Op, Result, Tensor, TensorType};

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

register_kernel!(Constant, constant);
