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
use crate::registry::{Registered, RuleTable};
use crate::trace::Var;
use std::any::TypeId;
use std::sync::OnceLock;

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

macro_rules! rule_type {
    ($(#[$doc:meta])* $name:ident, $f:ty, $what:literal, $table:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            /// The op type (`TypeId::of::<MyOp>`).
            pub op_type: fn() -> TypeId,
            /// The op type's name as written at the registration.
            pub op_name: &'static str,
            /// `file:line` of the registration.
            pub location: &'static str,
            /// The rule.
            pub rule: $f,
        }

        inventory::collect!($name);

        impl Registered for $name {
            const WHAT: &'static str = $what;
            fn op_type(&self) -> TypeId {
                (self.op_type)()
            }
            fn op_name(&self) -> &'static str {
                self.op_name
            }
            fn location(&self) -> &'static str {
                self.location
            }
        }

        /// The table of every rule of this kind linked into the program.
        pub fn $table() -> &'static RuleTable<$name> {
            static TABLE: OnceLock<RuleTable<$name>> = OnceLock::new();
            TABLE.get_or_init(|| RuleTable::build(inventory::iter::<$name>))
        }
    };
}

rule_type!(
    /// A registered batching rule.
    VmapRule, VmapFn, "vmap rule", vmap_rules
);

/// Registers a rule of a built-in kind for an op type:
/// `register_rule!(VmapRule, MyOp, my_rule);`.
#[macro_export]
macro_rules! register_rule {
    ($kind:ident, $op:ty, $rule:expr) => {
        $crate::inventory::submit! {
            $crate::rules::$kind {
                op_type: ::std::any::TypeId::of::<$op>,
                op_name: stringify!($op),
                location: concat!(file!(), ":", line!()),
                rule: $rule,
            }
        }
    };
}
