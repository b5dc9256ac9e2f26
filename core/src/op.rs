//! The `Op` trait: what every node of a graph computes.
//!
//! An op is a typed struct holding its parameters (`Reshape { shape }`,
//! `Sum { axes, keepdims }`), boxed as `Box<dyn Op>`. It knows its display
//! name and its shape/dtype rule; everything else about it — its CPU kernel,
//! its vmap, jvp and transpose rules — is registered separately, keyed by the
//! op's `TypeId`, so a crate that did not define an op can still add a rule
//! for it. Equality and hashing of ops compare the type and the parameters,
//! which is what common-subexpression elimination needs.
//!
//! Implementors derive `Debug, Clone, PartialEq, Eq, Hash` and implement
//! [`Op`]; [`OpBase`] (downcasting, dynamic equality and hashing) comes from a
//! blanket impl.

use crate::error::Result;
use crate::graph::Graph;
use crate::shape::TensorType;
use std::any::{Any, TypeId};
use std::fmt;
use std::hash::{Hash, Hasher};

/// Object-safe equality, hashing and downcasting for ops. Implemented for
/// every `Clone + Eq + Hash + Debug + Send + Sync + 'static` type; never
/// implement it by hand.
pub trait OpBase: Any {
    /// `self` as `&dyn Any`, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is the same op type with equal parameters.
    fn dyn_eq(&self, other: &dyn Any) -> bool;
    /// Hashes the parameters (the caller hashes the type).
    fn dyn_hash(&self, state: &mut dyn Hasher);
}

impl<T: Any + Eq + Hash> OpBase for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn dyn_eq(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
    fn dyn_hash(&self, mut state: &mut dyn Hasher) {
        self.hash(&mut state);
    }
}

/// A graph operation: a typed struct with its parameters, a name and a shape rule.
///
/// ```
/// use anvil_core::{Op, Result, TensorType};
///
/// /// `x * 2`, elementwise.
/// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// struct Double;
///
/// impl Op for Double {
///     fn name(&self) -> &'static str { "myplugin.double" }
///     fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
///         anvil_core::op::expect_arity(self, inputs, 1)?;
///         Ok(inputs[0].clone())
///     }
/// }
/// ```
pub trait Op: OpBase + dyn_clone::DynClone + fmt::Debug + Send + Sync {
    /// The display name, used in printed graphs and errors: `"sin"`,
    /// `"myplugin.bessel_j0"`.
    fn name(&self) -> &'static str;

    /// The shape and dtype rule: the output type for these input types.
    ///
    /// # Errors
    /// When the inputs do not fit, with an error naming the op, the shapes
    /// and the argument.
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType>;

    /// The parameters as printed after the name (`axes=[0], keepdims=false`).
    fn params(&self) -> String {
        String::new()
    }

    /// The sub-graphs of a higher-order op (`map`, `cond`...), if any.
    fn subgraphs(&self) -> Vec<&Graph> {
        Vec::new()
    }
}

dyn_clone::clone_trait_object!(Op);

impl dyn Op {
    /// The op as a concrete type, if it is one.
    pub fn downcast_ref<T: Op>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }

    /// The op as `T`, or an error naming the op and the type expected (for a
    /// rule or kernel registered for `T`, a mismatch is a registry bug, not
    /// something to panic over).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the op is another type.
    pub fn try_downcast<T: Op>(&self) -> Result<&T> {
        self.downcast_ref::<T>().ok_or_else(|| {
            crate::Error::invalid(
                self.name(),
                "op",
                format!("expected an op of type {}", std::any::type_name::<T>()),
            )
        })
    }

    /// Whether the op is of type `T`.
    pub fn is<T: Op>(&self) -> bool {
        self.as_any().is::<T>()
    }

    /// A boxed copy of the op.
    pub fn boxed(&self) -> Box<dyn Op> {
        dyn_clone::clone_box(self)
    }

    /// The `TypeId` of the concrete op, the key of every rule registry.
    pub fn op_type(&self) -> TypeId {
        self.as_any().type_id()
    }

    /// The name followed by the parameters in brackets, as printed in graphs.
    pub fn display(&self) -> String {
        match self.params() {
            p if p.is_empty() => self.name().to_string(),
            p => format!("{}[{p}]", self.name()),
        }
    }
}

impl PartialEq for dyn Op {
    fn eq(&self, other: &dyn Op) -> bool {
        self.dyn_eq(other.as_any())
    }
}
impl Eq for dyn Op {}
impl Hash for dyn Op {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.op_type().hash(state);
        self.dyn_hash(state);
    }
}

/// Checks the number of inputs of an op (their types in a shape rule, their
/// values in a kernel).
///
/// # Errors
/// [`Error::Arity`](crate::Error::Arity) naming the op.
pub fn expect_arity<T>(op: &dyn Op, inputs: &[T], n: usize) -> Result<()> {
    if inputs.len() == n {
        Ok(())
    } else {
        Err(crate::Error::Arity {
            what: op.name().into(),
            kind: "inputs".into(),
            expected: n,
            got: inputs.len(),
        })
    }
}
