//! The kernels of the higher-order ops. Each compiles its body into a plan
//! once, when the enclosing plan is built ([`crate::Kernel::Prepare`]), and
//! runs it on every call.
//!
//! `map` runs its body on every slice, in parallel across the batch when
//! there is enough work. Each iteration runs its body sequentially, so the
//! two levels of parallelism never oversubscribe the pool.

use crate::{compile, register_kernel, Parallelism, Plan, Prepared};
use anvil_core::{Error, Op, Result, Tensor, TensorType};
use anvil_ops::control::{CustomJvpCall, CustomVjpCall, CustomVjpTangent, Map};
use rayon::prelude::*;

/// A [`Map`] with its body compiled.
#[derive(Debug)]
struct MapPlan {
    body: Plan,
    mapped: Vec<bool>,
    size: usize,
}

fn prepare_map(op: &dyn Op, _: &[TensorType], _: &[TensorType]) -> Result<Box<dyn Prepared>> {
    let m = op.try_downcast::<Map>()?;
    Ok(Box::new(MapPlan { body: compile(&m.body)?, mapped: m.mapped.clone(), size: m.size }))
}

impl Prepared for MapPlan {
    fn run(
        &self,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        if inputs.len() != self.mapped.len() {
            return Err(Error::Arity {
                what: "map".into(),
                kind: "inputs".into(),
                expected: self.mapped.len(),
                got: inputs.len(),
            });
        }
        let inner = Parallelism::sequential();
        let run_one = |i: usize| -> Result<Vec<Tensor>> {
            let args = inputs
                .iter()
                .zip(&self.mapped)
                .map(|(t, &mapped)| if mapped { t.select_axis(0, i) } else { Ok((*t).clone()) })
                .collect::<Result<Vec<Tensor>>>()?;
            self.body.run(&args, &inner)
        };
        // A rough count of the work: every body node touches about an
        // output's worth of elements per iteration.
        let per_iter: usize = outs.iter().map(TensorType::numel).sum();
        let work = per_iter.max(1).saturating_mul(self.body.graph().len());
        let parts: Vec<Vec<Tensor>> = if self.size > 1 && ctx.parallel(work) {
            (0..self.size).into_par_iter().map(run_one).collect::<Result<_>>()?
        } else {
            (0..self.size).map(run_one).collect::<Result<_>>()?
        };
        outs.iter()
            .enumerate()
            .map(|(k, ty)| {
                if parts.is_empty() {
                    return Ok(Tensor::zeros_of(ty.shape(), ty.dtype()));
                }
                let column: Vec<Tensor> = parts.iter().map(|p| p[k].clone()).collect();
                Tensor::stack(&column, 0)
            })
            .collect()
    }
}

register_kernel!(Map, prepare: prepare_map);

/// A custom-derivative call: its primal function, compiled.
#[derive(Debug)]
struct CallPlan(Plan);

fn prepare_custom_call(
    op: &dyn Op,
    _: &[TensorType],
    _: &[TensorType],
) -> Result<Box<dyn Prepared>> {
    let primal = match op.downcast_ref::<CustomJvpCall>() {
        Some(c) => &c.primal,
        None => &op.try_downcast::<CustomVjpCall>()?.primal,
    };
    Ok(Box::new(CallPlan(compile(primal)?)))
}

impl Prepared for CallPlan {
    fn run(&self, inputs: &[&Tensor], _: &[TensorType], ctx: &Parallelism) -> Result<Vec<Tensor>> {
        let args: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        self.0.run(&args, ctx)
    }
}

/// A [`CustomVjpTangent`] has no forward evaluation: the function only has
/// a reverse-mode derivative.
pub fn custom_vjp_tangent(
    op: &dyn Op,
    _: &[&Tensor],
    _: &[TensorType],
    _: &Parallelism,
) -> Result<Vec<Tensor>> {
    Err(Error::MissingRule {
        op: op.name().into(),
        what: "forward-mode derivative".into(),
        hint:
            " (a custom_vjp function supports reverse mode only; use custom_jvp for forward mode)"
                .into(),
    })
}

register_kernel!(CustomJvpCall, prepare: prepare_custom_call);
register_kernel!(CustomVjpCall, prepare: prepare_custom_call);
register_kernel!(CustomVjpTangent, many: custom_vjp_tangent);
