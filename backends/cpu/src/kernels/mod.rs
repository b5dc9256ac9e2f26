//! The kernels of the standard ops, one module per op family (mirroring
//! `anvil-ops`), each ending with the block that registers its kernels.
//!
//! Family kernels are generic over the op's math trait (`UnaryMath`,
//! `BinaryMath`, `CompareMath`, `ReduceMath`), so one function serves every
//! op of the family, and a plugin op that implements the trait can register
//! the same function for itself (`register_kernel!(MyOp, unary::<MyOp>)`).

pub mod constant;
pub mod control;
pub mod elementwise;
pub mod index;
pub(crate) mod lanes;
pub mod lax;
pub mod linalg;
pub mod matmul;
pub mod movement;
pub mod reduce;
pub mod sparse;

use anvil_core::{DType, Error, Op};

pub(crate) use anvil_core::op::expect_arity as arity;

/// The error for a dtype a kernel does not handle (the shape rule should
/// have rejected it; this keeps a bad plugin rule from panicking).
pub(crate) fn unsupported(op: &dyn Op, arg: usize, dtype: DType) -> Error {
    Error::dtype(op.name(), arg.to_string(), dtype, "a dtype this kernel supports")
}
