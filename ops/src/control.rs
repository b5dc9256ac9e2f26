//! Higher-order ops: ops whose computation is a sub-graph.
//!
//! [`Map`] applies its body to every slice of its mapped inputs along axis 0
//! and stacks each of the body's results, like `jax.lax.map`. It is how
//! `vmap` batches an op that has no batching rule (a loop instead of a
//! batched kernel), and users call it directly through
//! `anvil::transforms::map`. The CPU backend runs it as a parallel loop.
//!
//! [`CustomJvpCall`] and [`CustomVjpCall`] are functions with user-given
//! derivatives (their rules live in `anvil-transforms`, which interprets
//! their bodies).
//!
//! Bodies are [`SubGraph`]s: equal bodies (by structure) make equal ops, so
//! CSE merges two identical loops and plan caches share their entries.

use anvil_core::{Error, Graph, Op, Result, SubGraph, TensorType};

/// Checks operand types against a body's input types, naming `op` and the
/// argument; `mapped[i]` operands carry a leading axis of `size` the body
/// does not see.
fn check_operands(
    op: &str,
    body: &Graph,
    inputs: &[TensorType],
    mapped: Option<(&[bool], usize)>,
) -> Result<()> {
    let want = body.input_types();
    if want.len() != inputs.len() {
        return Err(Error::Arity {
            what: op.into(),
            kind: "inputs".into(),
            expected: want.len(),
            got: inputs.len(),
        });
    }
    for (i, (t, w)) in inputs.iter().zip(&want).enumerate() {
        let is_mapped = mapped.is_some_and(|(m, _)| m[i]);
        let size = mapped.map_or(0, |(_, s)| s);
        let fits = if is_mapped {
            t.shape().first() == Some(&size) && t.shape()[1..] == *w.shape()
        } else {
            t.shape() == w.shape()
        };
        if !fits || t.dtype() != w.dtype() {
            let what = if is_mapped { format!("[{size}] ++ {w} (mapped)") } else { w.to_string() };
            return Err(Error::shape(
                op,
                &[t.shape(), w.shape()],
                format!("argument {i} is {t}, the body expects {what}"),
            ));
        }
    }
    Ok(())
}

/// Runs `body` on slice `i` (along axis 0) of every mapped input, for `i` in
/// `0..size`, with the unmapped inputs passed whole; result `k` stacks the
/// body's output `k` along a new axis 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Map {
    /// The per-element computation: one input per operand.
    pub body: SubGraph,
    /// Which operands are sliced along axis 0 (the others are shared).
    pub mapped: Vec<bool>,
    /// The number of iterations (the mapped operands' leading size).
    pub size: usize,
}

impl Op for Map {
    fn name(&self) -> &'static str {
        "map"
    }

    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        anvil_core::op::expect_arity(self, &self.mapped, self.body.inputs().len())?;
        check_operands("map", &self.body, inputs, Some((&self.mapped, self.size)))?;
        Ok(self
            .body
            .output_types()
            .iter()
            .map(|t| {
                let mut shape = vec![self.size];
                shape.extend_from_slice(t.shape());
                t.with_shape(shape)
            })
            .collect())
    }

    fn params(&self) -> String {
        let mapped: Vec<&str> = self.mapped.iter().map(|&m| if m { "0" } else { "-" }).collect();
        format!("size={}, in_axes=[{}]", self.size, mapped.join(","))
    }

    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.body.graph()]
    }

    fn with_subgraphs(&self, mut bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let body = bodies.pop().filter(|_| bodies.is_empty())?;
        Some(Box::new(Map { body: body.into(), ..self.clone() }))
    }
}

/// A function with a user-given forward-mode derivative
/// (`jax.custom_jvp`): computes `primal`; differentiation uses `jvp`, a
/// graph of `(primals..., tangents...)` whose outputs are the primal outputs
/// and then their tangents. Reverse mode transposes that tangent
/// computation, so it must be linear in the tangents.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomJvpCall {
    /// The function.
    pub primal: SubGraph,
    /// Its jvp: `(primals..., tangents...) -> (outs..., tangent outs...)`.
    pub jvp: SubGraph,
}

impl Op for CustomJvpCall {
    fn name(&self) -> &'static str {
        "custom_jvp_call"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        check_operands("custom_jvp_call", &self.primal, inputs, None)?;
        Ok(self.primal.output_types())
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.primal.graph(), self.jvp.graph()]
    }
    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let [primal, jvp]: [Graph; 2] = bodies.try_into().ok()?;
        Some(Box::new(CustomJvpCall { primal: primal.into(), jvp: jvp.into() }))
    }
}

/// A function with a user-given reverse-mode derivative
/// (`jax.custom_vjp`): computes `primal`; reverse mode runs `fwd`
/// (`primals -> (outs..., residuals...)`) and `bwd` (`(residuals...,
/// cotangents of the outs...) -> one cotangent per primal`). Forward mode
/// is not available, as in JAX.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomVjpCall {
    /// The function.
    pub primal: SubGraph,
    /// `primals -> (outs..., residuals...)`.
    pub fwd: SubGraph,
    /// `(residuals..., cts...) -> cotangents of the primals`.
    pub bwd: SubGraph,
}

impl Op for CustomVjpCall {
    fn name(&self) -> &'static str {
        "custom_vjp_call"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        check_operands("custom_vjp_call", &self.primal, inputs, None)?;
        Ok(self.primal.output_types())
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.primal.graph(), self.fwd.graph(), self.bwd.graph()]
    }
    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let [primal, fwd, bwd]: [Graph; 3] = bodies.try_into().ok()?;
        Some(Box::new(CustomVjpCall { primal: primal.into(), fwd: fwd.into(), bwd: bwd.into() }))
    }
}

/// The tangents of a [`CustomVjpCall`]'s outputs, linear in the tangents of
/// its primals; it exists only to be transposed (by running `bwd`). Its
/// operands are the residuals, then one tangent per primal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomVjpTangent {
    /// `(residuals..., cts...) -> cotangents of the primals`.
    pub bwd: SubGraph,
    /// How many operands are residuals.
    pub residuals: usize,
    /// The results' types (those of the call's outputs).
    pub outs: Vec<TensorType>,
}

impl Op for CustomVjpTangent {
    fn name(&self) -> &'static str {
        "custom_vjp_tangent"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let primals = self.bwd.outputs().len();
        anvil_core::op::expect_arity(self, inputs, self.residuals + primals)?;
        Ok(self.outs.clone())
    }
    fn params(&self) -> String {
        format!("residuals={}", self.residuals)
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.bwd.graph()]
    }
    fn with_subgraphs(&self, mut bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let bwd = bodies.pop().filter(|_| bodies.is_empty())?;
        Some(Box::new(CustomVjpTangent { bwd: bwd.into(), ..self.clone() }))
    }
    fn linear_in(&self, k: usize) -> bool {
        k >= self.residuals
    }
}
