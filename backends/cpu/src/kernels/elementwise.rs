//! The kernel of every elementwise op, whatever its family: the op's block
//! math ([`anvil_core::ElementwiseMath`]) run by the fused-program kernel
//! ([`crate::fusion`]). Compiled plans put every elementwise node inside a
//! `Fused` node; [`elementwise`] is the same thing for one op, for callers
//! that run an op directly.

use crate::fusion::{fused, Fused, Instr};
use crate::Parallelism;
use anvil_core::{Error, Op, Result, Tensor, TensorType};

/// Runs one elementwise op (an op with block math) on tensors: operands
/// broadcast to `out`, blocks fused as in any plan.
///
/// # Errors
/// An op without block math; the op's block math rejecting the dtypes.
pub fn elementwise(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    if op.elementwise_math().is_none() {
        return Err(Error::MissingRule {
            op: op.name().into(),
            what: "elementwise block math".into(),
            hint: " (declare the op with anvil_ops::unary_elementwise_op! or implement Op::elementwise_math)".into(),
        });
    }
    let program =
        vec![Instr { op: op.boxed(), args: (0..inputs.len()).collect(), dtype: out.dtype() }];
    let leaves: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    fused(&Fused::new(program, &leaves, out.clone()), inputs, out, ctx)
}

/// The kernel of a unary op declared with `anvil_ops::unary_elementwise_op!`
/// (kept for plugin crates that register it; such ops need no kernel).
///
/// # Errors
/// As [`elementwise`].
pub fn unary<O: Op>(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    elementwise(op, inputs, out, ctx)
}

/// The kernel of a binary op declared with `anvil_ops::binary_elementwise_op!`
/// (kept for plugin crates that register it; such ops need no kernel).
///
/// # Errors
/// As [`elementwise`].
pub fn binary<O: Op>(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    elementwise(op, inputs, out, ctx)
}

/// Formerly registered an op's block math for fusion. Every op with
/// [`anvil_core::Op::elementwise_math`] is fused now, so this does nothing;
/// it is kept so that plugin crates written for earlier versions compile.
#[macro_export]
macro_rules! register_fusable {
    ($kind:ident: $($op:ty),*) => {};
}
