//! The kernel of `map`: the body compiled once per call and run on every
//! slice, in parallel across the batch when there is enough work. Each
//! iteration runs its body sequentially, so the two levels of parallelism
//! never oversubscribe the pool.

use super::arity;
use crate::{compile, register_kernel, Ctx};
use anvil_core::{Result, Tensor, TensorType};
use anvil_ops::control::{CustomJvpCall, CustomVjpCall, CustomVjpTangent, Map};
use rayon::prelude::*;

/// The kernel of [`Map`].
pub fn map(
    op: &dyn anvil_core::Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Ctx,
) -> Result<Tensor> {
    let m = op.try_downcast::<Map>()?;
    arity(op, inputs, m.mapped.len())?;
    let plan = compile(&m.body)?;
    let inner = Ctx::sequential();
    let run_one = |i: usize| -> Result<Tensor> {
        let args = inputs
            .iter()
            .zip(&m.mapped)
            .map(|(t, &mapped)| if mapped { t.select_axis(0, i) } else { Ok((*t).clone()) })
            .collect::<Result<Vec<Tensor>>>()?;
        let mut outs = plan.run(&args, &inner)?;
        Ok(outs.swap_remove(0))
    };
    // A rough count of the work: every body node touches about an output's
    // worth of elements per iteration.
    let work = out.numel().max(1).saturating_mul(m.body.len());
    let parts: Vec<Tensor> = if m.size > 1 && ctx.parallel(work) {
        (0..m.size).into_par_iter().map(run_one).collect::<Result<_>>()?
    } else {
        (0..m.size).map(run_one).collect::<Result<_>>()?
    };
    if parts.is_empty() {
        return Ok(Tensor::zeros_of(&out.shape, out.dtype));
    }
    Tensor::stack(&parts, 0)
}

register_kernel!(Map, map);

/// Runs a one-output body on the operands (sequentially inside: the caller
/// may already be one iteration of a parallel loop).
fn run_body(body: &anvil_core::Graph, inputs: &[&Tensor], ctx: &Ctx) -> Result<Tensor> {
    let args: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
    Ok(compile(body)?.run(&args, ctx)?.swap_remove(0))
}

/// The kernel of [`CustomJvpCall`] and [`CustomVjpCall`]: the primal function.
pub fn custom_call(
    op: &dyn anvil_core::Op,
    inputs: &[&Tensor],
    _: &TensorType,
    ctx: &Ctx,
) -> Result<Tensor> {
    let primal = match op.downcast_ref::<CustomJvpCall>() {
        Some(c) => &c.primal,
        None => &op.try_downcast::<CustomVjpCall>()?.primal,
    };
    run_body(primal, inputs, ctx)
}

/// A [`CustomVjpTangent`] has no forward evaluation: the function only has
/// a reverse-mode derivative.
pub fn custom_vjp_tangent(
    op: &dyn anvil_core::Op,
    _: &[&Tensor],
    _: &TensorType,
    _: &Ctx,
) -> Result<Tensor> {
    Err(anvil_core::Error::MissingRule {
        op: op.name().into(),
        what: "forward-mode derivative".into(),
        hint:
            " (a custom_vjp function supports reverse mode only; use custom_jvp for forward mode)"
                .into(),
    })
}

register_kernel!(CustomJvpCall, custom_call);
register_kernel!(CustomVjpCall, custom_call);
register_kernel!(CustomVjpTangent, custom_vjp_tangent);
