//! The kernel of every elementwise op, whatever its family: the op's block
//! math ([`anvil_core::ElementwiseMath`]) run by the fused-program kernel
//! ([`crate::fusion`]). Compiled plans put every elementwise node inside a
//! `Fused` node; [`elementwise`] is the same thing for one op, for callers
//! that run an op directly.

use crate::fusion::{fused, Fused, Instr};
use crate::Parallelism;
use anvil_core::{Block, BlockAt, BlockMut, Error, Op, Result, Tensor, TensorType};

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
    let program = vec![Instr::new(op.boxed(), (0..inputs.len()).collect(), out.dtype())];
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

// ------------------------------------------------------ vectorised math

/// Vectorised block math ([`crate::vmath`]) for the transcendental
/// elementwise ops, `f64` and `f32`: the same functions as the ops' own
/// scalar math, to a few ulp, several times faster.
macro_rules! vectorised {
    ($($op:ident => $f64:ident, $f32:ident;)*) => {$(
        #[allow(non_snake_case)]
        fn $op(_: &dyn Op, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<bool> {
            match (args, out) {
                ([Block::F64(x)], BlockMut::F64(y)) => crate::vmath::$f64(x, y),
                ([Block::F32(x)], BlockMut::F32(y)) => crate::vmath::$f32(x, y),
                _ => return Ok(false),
            }
            Ok(true)
        }
        crate::register_block_math!(anvil_ops::elementwise::$op, $op);
    )*};
}

vectorised! {
    Exp => exp_f64, exp_f32;
    Expm1 => expm1_f64, expm1_f32;
    Log => ln_f64, ln_f32;
    Log1p => ln_1p_f64, ln_1p_f32;
    Tanh => tanh_f64, tanh_f32;
    Logistic => logistic_f64, logistic_f32;
    Sin => sin_f64, sin_f32;
    Cos => cos_f64, cos_f32;
    Erf => erf_f64, erf_f32;
}
