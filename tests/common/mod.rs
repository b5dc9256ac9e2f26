//! Pieces shared by the integration tests that define their own plugin ops.
// Each test binary uses a part of this module.
#![allow(dead_code, unused_macros)]

use anvil::core::Batched;
use anvil::{Op, Var};

/// Declares a test op whose result has its one input's type.
macro_rules! same_type_op {
    ($(#[$doc:meta])* $name:ident = $s:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        struct $name;

        impl anvil::Op for $name {
            fn name(&self) -> &'static str {
                $s
            }
            fn infer(&self, inputs: &[anvil::TensorType]) -> anvil::Result<anvil::TensorType> {
                anvil::core::op::expect_arity(self, inputs, 1)?;
                Ok(inputs[0].clone())
            }
        }
    };
}

/// The batching rule of an elementwise test op: the batch axis stays where it is.
pub fn keep_axis(op: &dyn Op, args: &[Batched], _size: usize) -> anvil::Result<Batched> {
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&args[0].var]), args[0].axis))
}
