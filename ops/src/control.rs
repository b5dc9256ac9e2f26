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
