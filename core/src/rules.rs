//! The rule types of the built-in transforms, and their registries.
//!
//! They live here, not in `anvil-transforms`, because `anvil-ops` registers
//! the rules beside each op and may not depend on the transforms that read
//! them. Each rule type pairs an op type with a function written against the
//! `Var` API, so a rule emits graph nodes like any user program: shape
//! checks come for free and a rule's output can itself be transformed.
//!
//! Register a rule with [`register_rule!`](crate::register_rule):
//! `register_rule!(VmapRule, Sin, vmap_elementwise);`.
//!
//! - [`VmapRule`]: the batched result of an op on batched arguments.
//! - [`JvpRule`]: the tangent of an op's output from its inputs' primal
//!   values and tangents (forward mode). Every differentiable op has one.
//! - [`TransposeRule`]: for an op that is linear in some of its inputs, the
//!   cotangents of those inputs from the output's cotangent. Reverse mode is
//!   the jvp's linear part, transposed, so these are needed only for the ops
//!   that jvp rules emit on tangents.

use crate::error::Result;
use crate::op::Op;
use crate::trace::Var;

/// A value under `vmap`: its traced value and where its batch axis is
/// (`None`: not batched, the same for every element of the batch).
#[derive(Clone, Debug)]
pub struct Batched {
    /// The value, with the batch axis included when batched.
    pub var: Var,
    /// The position of the batch axis in `var`, if any.
    pub axis: Option<usize>,
}

impl Batched {
    /// A batched value.
    pub fn new(var: Var, axis: Option<usize>) -> Batched {
        Batched { var, axis }
    }

    /// The rank of one element of the batch (the op's view of the value).
    pub fn logical_rank(&self) -> usize {
        self.var.rank() - usize::from(self.axis.is_some())
    }

    /// The type of one element of the batch.
    pub fn logical_type(&self) -> crate::shape::TensorType {
        crate::shape::TensorType::new(self.var.dtype(), self.logical_shape())
    }

    /// The shape of one element of the batch.
    pub fn logical_shape(&self) -> Vec<usize> {
        let mut s = self.var.shape().to_vec();
        if let Some(a) = self.axis {
            s.remove(a);
        }
        s
    }
}

/// A batching rule: computes the batched result of `op` applied to batched
/// arguments (at least one of them batched), for a batch of `size`.
pub type VmapFn = fn(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched>;

crate::registry_entry! {
    /// A registered batching rule.
    pub struct VmapRule { rule: VmapFn }, "vmap rule", vmap_rules
}

/// Registers a rule of a built-in kind for an op type:
/// `register_rule!(VmapRule, MyOp, my_rule);`.
#[macro_export]
macro_rules! register_rule {
    ($kind:ident, $op:ty, $rule:expr) => {
        $crate::register_entry!($crate::rules::$kind, $op, rule: $rule);
    };
}

/// A forward-mode rule: the tangent of `op`'s output given the primal
/// inputs, their tangents (`None`: a symbolic zero, which costs nothing) and
/// the primal output (often useful: the tangent of `exp` is `t * out`). At
/// least one tangent is `Some`. Returning `None` means the output's tangent
/// is zero (comparisons, `floor`, integer results).
///
/// The tangent must be computed *linearly* from the tangents, with ops that
/// have a [`TransposeRule`], so that reverse mode can transpose it.
pub type JvpFn =
    fn(op: &dyn Op, primals: &[Var], tangents: &[Option<Var>], out: &Var) -> Result<Option<Var>>;

crate::registry_entry! {
    /// A registered forward-mode (jvp) rule.
    pub struct JvpRule { rule: JvpFn }, "jvp rule", jvp_rules
}

/// An argument of a linear op seen by its transpose rule: either one of the
/// linear inputs (its value is unknown; only its type is), or a known value
/// the op is linear *with respect to* (the `w` of `t * w`).
#[derive(Clone, Debug)]
pub enum LinearArg {
    /// A linear input, of this type; the rule returns its cotangent.
    Linear(crate::shape::TensorType),
    /// A value independent of the linear inputs.
    Known(Var),
}

impl LinearArg {
    /// Whether this is a linear input.
    pub fn is_linear(&self) -> bool {
        matches!(self, LinearArg::Linear(_))
    }

    /// The known value, if it is one.
    pub fn known(&self) -> Option<&Var> {
        match self {
            LinearArg::Known(v) => Some(v),
            LinearArg::Linear(_) => None,
        }
    }

    /// The argument's shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            LinearArg::Linear(t) => &t.shape,
            LinearArg::Known(v) => v.shape(),
        }
    }
}

/// A transpose rule: given the cotangent `ct` of the output of `op`, the
/// cotangent of every [`LinearArg::Linear`] argument (`None` for known
/// arguments, or for a linear one whose cotangent is zero). The result has
/// one entry per argument.
pub type TransposeFn = fn(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>>;

crate::registry_entry! {
    /// A registered transpose rule.
    pub struct TransposeRule { rule: TransposeFn }, "transpose rule", transpose_rules
}
