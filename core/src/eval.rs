//! What the compile pipeline needs from a backend: evaluating one op on
//! concrete tensors ([`Evaluator`]) and compiling a graph ([`Backend`]).
//!
//! Constant folding runs an op whose operands are all constants at compile
//! time, with the same kernel the compiled plan would use. The passes live
//! in `anvil-transforms`, the kernels in a backend that depends on them, so
//! the passes reach the kernels through this trait, which a backend
//! implements (the CPU backend's `anvil_cpu::Cpu`), and the compile
//! pipeline (`anvil_transforms::pipeline`) takes it as an argument: no
//! registry, no global, and no dependency between the transforms and any
//! backend.

use crate::error::Result;
use crate::op::Op;
use crate::shape::TensorType;
use crate::tensor::Tensor;

/// Runs single ops on concrete tensors.
pub trait Evaluator: Sync {
    /// `op` applied to `inputs`, with results of types `outs`; `None` when
    /// this evaluator cannot run the op (no kernel, or an op that must not
    /// run at compile time).
    fn evaluate(
        &self,
        op: &dyn Op,
        inputs: &[&Tensor],
        outs: &[TensorType],
    ) -> Option<Result<Vec<Tensor>>>;
}

/// A backend: evaluates single ops (for constant folding) and compiles a
/// graph into something it can run.
pub trait Backend: Evaluator {
    /// What a compiled graph becomes.
    type Plan;

    /// Compiles an optimised graph.
    ///
    /// # Errors
    /// An op the backend cannot run (no kernel), an invalid graph.
    fn plan(&self, graph: &crate::Graph) -> Result<Self::Plan>;
}
