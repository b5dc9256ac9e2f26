//! The kernel of `map`: the body compiled once per call and run on every
//! slice, in parallel across the batch when there is enough work. Each
//! iteration runs its body sequentially, so the two levels of parallelism
//! never oversubscribe the pool.

use super::arity;
use crate::{compile, register_kernel, Ctx};
use anvil_core::{Result, Tensor, TensorType};
use anvil_ops::control::Map;
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
