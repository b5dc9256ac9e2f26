//! Higher-order ops: ops whose computation is a sub-graph.
//!
//! [`Map`] applies its body graph to every slice of its mapped inputs along
//! axis 0 and stacks the results, like `jax.lax.map`. It is how `vmap`
//! batches an op that has no batching rule (a loop instead of a batched
//! kernel), and users call it directly through `anvil::transforms::map`.
//! The CPU backend runs it as a parallel loop.

use anvil_core::{Error, Graph, Op, Result, TensorType};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Runs `body` on slice `i` (along axis 0) of every mapped input, for `i` in
/// `0..size`, with the unmapped inputs passed whole; the result stacks the
/// body's single output along a new axis 0.
///
/// Two `Map` nodes are equal when they share the same body graph (by
/// identity), which is what common-subexpression elimination needs.
#[derive(Clone, Debug)]
pub struct Map {
    /// The per-element computation: one input per operand, one output.
    pub body: Arc<Graph>,
    /// Which operands are sliced along axis 0 (the others are shared).
    pub mapped: Vec<bool>,
    /// The number of iterations (the mapped operands' leading size).
    pub size: usize,
}

impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        Arc::ptr_eq(&self.body, &other.body)
            && self.mapped == other.mapped
            && self.size == other.size
    }
}
impl Eq for Map {}
impl Hash for Map {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.body), state);
        self.mapped.hash(state);
        self.size.hash(state);
    }
}

impl Op for Map {
    fn name(&self) -> &'static str {
        "map"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let body_in = self.body.input_types();
        anvil_core::op::expect_arity(self, inputs, body_in.len())?;
        anvil_core::op::expect_arity(self, &self.mapped, body_in.len())?;
        if self.body.outputs().len() != 1 {
            return Err(Error::invalid(
                "map",
                "body",
                format!("must have exactly one output, has {}", self.body.outputs().len()),
            ));
        }
        for (i, ((t, b), &m)) in inputs.iter().zip(&body_in).zip(&self.mapped).enumerate() {
            let fits = if m {
                t.shape.first() == Some(&self.size) && t.shape[1..] == b.shape[..]
            } else {
                t.shape == b.shape
            };
            if !fits || t.dtype != b.dtype {
                let what =
                    if m { format!("[{}] ++ {b} (mapped)", self.size) } else { b.to_string() };
                return Err(Error::shape(
                    "map",
                    &[&t.shape, &b.shape],
                    format!("argument {i} is {t}, the body expects {what}"),
                ));
            }
        }
        let out = &self.body.output_types()[0];
        let mut shape = vec![self.size];
        shape.extend_from_slice(&out.shape);
        Ok(TensorType::new(out.dtype, shape))
    }

    fn params(&self) -> String {
        let mapped: Vec<&str> = self.mapped.iter().map(|&m| if m { "0" } else { "-" }).collect();
        format!(
            "size={}, in_axes=[{}], body={} nodes",
            self.size,
            mapped.join(","),
            self.body.len()
        )
    }

    fn subgraphs(&self) -> Vec<&Graph> {
        vec![&self.body]
    }
}

/// Eq and Hash by body identity, for ops that hold sub-graphs.
macro_rules! by_identity {
    ($name:ident { $($g:ident),* }) => {
        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                true $(&& Arc::ptr_eq(&self.$g, &other.$g))*
            }
        }
        impl Eq for $name {}
        impl Hash for $name {
            fn hash<H: Hasher>(&self, state: &mut H) {
                $( std::ptr::hash(Arc::as_ptr(&self.$g), state); )*
            }
        }
    };
}

/// The output type of a body with exactly one output, checked against the
/// operands' types.
fn call_type(op: &str, body: &Graph, inputs: &[TensorType]) -> Result<TensorType> {
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
        if t != w {
            return Err(Error::shape(
                op,
                &[&t.shape, &w.shape],
                format!("argument {i} is {t}, the function was traced for {w}"),
            ));
        }
    }
    match body.output_types().as_slice() {
        [t] => Ok(t.clone()),
        ts => Err(Error::invalid(
            op,
            "body",
            format!("must have exactly one output, has {}", ts.len()),
        )),
    }
}

/// A function with a user-given forward-mode derivative
/// (`jax.custom_jvp`): computes `primal`; differentiation uses `jvp`, a
/// graph of `(primals..., tangents...)` whose outputs are the primal output
/// and its tangent. Reverse mode transposes that tangent computation, so it
/// must be linear in the tangents.
#[derive(Clone, Debug)]
pub struct CustomJvpCall {
    /// The function.
    pub primal: Arc<Graph>,
    /// Its jvp: `(primals..., tangents...) -> (out, tangent_out)`.
    pub jvp: Arc<Graph>,
}
by_identity!(CustomJvpCall { primal, jvp });

impl Op for CustomJvpCall {
    fn name(&self) -> &'static str {
        "custom_jvp_call"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        call_type("custom_jvp_call", &self.primal, inputs)
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![&self.primal, &self.jvp]
    }
}

/// A function with a user-given reverse-mode derivative
/// (`jax.custom_vjp`): computes `primal`; reverse mode runs `fwd`
/// (`primals -> (out, residuals...)`) and `bwd` (`(residuals..., ct) ->
/// one cotangent per primal`). Forward mode is not available, as in JAX.
#[derive(Clone, Debug)]
pub struct CustomVjpCall {
    /// The function.
    pub primal: Arc<Graph>,
    /// `primals -> (out, residuals...)`.
    pub fwd: Arc<Graph>,
    /// `(residuals..., ct) -> cotangents of the primals`.
    pub bwd: Arc<Graph>,
}
by_identity!(CustomVjpCall { primal, fwd, bwd });

impl Op for CustomVjpCall {
    fn name(&self) -> &'static str {
        "custom_vjp_call"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        call_type("custom_vjp_call", &self.primal, inputs)
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![&self.primal, &self.fwd, &self.bwd]
    }
}

/// The tangent of a [`CustomVjpCall`]'s output, linear in the tangents of
/// its primals; it exists only to be transposed (by running `bwd`). Its
/// operands are the residuals, then one tangent per primal.
#[derive(Clone, Debug)]
pub struct CustomVjpTangent {
    /// `(residuals..., ct) -> cotangents of the primals`.
    pub bwd: Arc<Graph>,
    /// How many operands are residuals.
    pub residuals: usize,
    /// The output's type.
    pub out: TensorType,
}
by_identity!(CustomVjpTangent { bwd });

impl Op for CustomVjpTangent {
    fn name(&self) -> &'static str {
        "custom_vjp_tangent"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let primals = self.bwd.outputs().len();
        anvil_core::op::expect_arity(self, inputs, self.residuals + primals)?;
        Ok(self.out.clone())
    }
    fn params(&self) -> String {
        format!("residuals={}", self.residuals)
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        vec![&self.bwd]
    }
}
