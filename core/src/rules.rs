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
