//! The rule types of the built-in transforms, and their registries.
//!
//! They live here, not in `anvil-transforms`, because `anvil-ops` registers
//! the rules beside each op and may not depend on the transforms that read
//! them. Each rule type pairs an op type with a function written against the
//! `Var` API, so a rule emits graph nodes like any user program: shape
//! checks come for free and a rule's output can itself be transformed.
//!
//! Register a rule with [`register_rule!`](crate::register_rule):
//! `register_rule!(VmapRule, Sin, vmap_elementwise);` for an op with one
//! result, `register_rule!(JvpRule, Eigh, many: jvp_eigh);` for an op with
//! several. Each kind has both signatures ([`RuleFn`]): the one-result form
//! is what most ops (and plugin crates written before multi-result ops
//! existed) use; the transforms call every rule through the several-result
//! form.
//!
//! - [`VmapRule`]: the batched results of an op on batched arguments.
//! - [`JvpRule`]: the tangents of an op's results from its inputs' primal
//!   values and tangents (forward mode). Every differentiable op has one.
//! - [`TransposeRule`]: for an op that is linear in some of its inputs, the
//!   cotangents of those inputs from the results' cotangents. Reverse mode
//!   is the jvp's linear part, transposed, so these are needed only for the
//!   ops that jvp rules emit on tangents.
//! - [`RewriteRule`]: a simplification of the op given its operands (whose
//!   producers it may inspect, see [`Var::producer`]); the rewrite driver
//!   in `anvil-transforms` applies them to a fixpoint.
//! - [`SparsityRule`] (defined in [`crate::sparsity`], re-exported here so
//!   `register_rule!` finds it): which inputs each element of the op's
//!   results depends on, from its operands'.

use crate::error::Result;
use crate::op::Op;
use crate::shape::TensorType;
use crate::trace::Var;

pub use crate::sparsity::SparsityRule;

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
    /// A poisoned value (rank 0 after an earlier error) has rank 0.
    pub fn logical_rank(&self) -> usize {
        self.var.rank().saturating_sub(usize::from(self.axis.is_some()))
    }

    /// The type of one element of the batch.
    pub fn logical_type(&self) -> TensorType {
        TensorType::new(self.var.dtype(), self.logical_shape())
    }

    /// The shape of one element of the batch.
    pub fn logical_shape(&self) -> Vec<usize> {
        let mut s = self.var.shape().to_vec();
        if let Some(a) = self.axis.filter(|&a| a < s.len()) {
            s.remove(a);
        }
        s
    }
}

/// A rule in one of its two signatures: for an op with one result (`One`)
/// or with any number of results (`Many`).
#[derive(Clone, Copy, Debug)]
pub enum RuleFn<One, Many> {
    /// The one-result form.
    One(One),
    /// The several-result form.
    Many(Many),
}

/// A batching rule for an op with one result: the batched result of `op`
/// applied to batched arguments (at least one of them batched), for a batch
/// of `size`.
pub type VmapFn = fn(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched>;

/// A batching rule for an op with several results: one batched value per result.
pub type VmapManyFn = fn(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>>;

crate::registry_entry! {
    /// A registered batching rule.
    pub struct VmapRule { rule: RuleFn<VmapFn, VmapManyFn> }, "vmap rule", vmap_rules
}

impl VmapRule {
    /// The batched results of `op` on `args`.
    ///
    /// # Errors
    /// The rule's error; [`Error::Panicked`](crate::Error::Panicked) if the rule panics.
    pub fn apply(&self, op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
        unpoisoned(args.iter().map(|a| &a.var))?;
        caught(op, "vmap rule", || match self.rule {
            RuleFn::One(f) => Ok(vec![f(op, args, size)?]),
            RuleFn::Many(f) => f(op, args, size),
        })
    }
}

/// Registers a rule of a built-in kind for an op type:
/// `register_rule!(VmapRule, MyOp, my_rule);` for a rule of the one-result
/// signature, `register_rule!(VmapRule, MyOp, many: my_rule);` for the
/// several-result one.
#[macro_export]
macro_rules! register_rule {
    ($kind:ident, $op:ty, many: $rule:expr) => {
        $crate::register_entry!($crate::rules::$kind, $op, rule: $crate::rules::RuleFn::Many($rule));
    };
    ($kind:ident, $op:ty, $rule:expr) => {
        $crate::register_entry!($crate::rules::$kind, $op, rule: $crate::rules::RuleFn::One($rule));
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

/// A forward-mode rule for an op with several results: the tangent of each
/// result (`None`: zero) given the primal inputs, their tangents and the
/// primal results.
pub type JvpManyFn = fn(
    op: &dyn Op,
    primals: &[Var],
    tangents: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>>;

crate::registry_entry! {
    /// A registered forward-mode (jvp) rule.
    pub struct JvpRule { rule: RuleFn<JvpFn, JvpManyFn> }, "jvp rule", jvp_rules
}

impl JvpRule {
    /// The tangents of `op`'s results.
    ///
    /// # Errors
    /// The rule's error; [`Error::Panicked`](crate::Error::Panicked) if the rule panics.
    pub fn apply(
        &self,
        op: &dyn Op,
        primals: &[Var],
        tangents: &[Option<Var>],
        outs: &[Var],
    ) -> Result<Vec<Option<Var>>> {
        unpoisoned(primals.iter().chain(tangents.iter().flatten()).chain(outs))?;
        caught(op, "jvp rule", || match self.rule {
            RuleFn::One(f) => match outs {
                [out] => Ok(vec![f(op, primals, tangents, out)?]),
                _ => Err(one_result_rule(op, "jvp", outs.len())),
            },
            RuleFn::Many(f) => f(op, primals, tangents, outs),
        })
    }
}

/// Runs a registered rule through [`Error::catching`](crate::Error::catching):
/// a panic in it (a plugin's bug) is an error naming the op and the kind of
/// rule (the trace it was extending is abandoned with the error).
fn caught<R>(op: &dyn Op, what: &str, rule: impl FnOnce() -> Result<R>) -> Result<R> {
    crate::Error::catching(op.name(), what, rule)
}

/// The error a poisoned operand stands for (recorded in its trace when the
/// op that made it failed): rules are never run on such operands, whose
/// shapes are placeholders.
fn unpoisoned<'a>(vars: impl IntoIterator<Item = &'a Var>) -> Result<()> {
    match vars.into_iter().find(|v| v.is_poisoned()) {
        None => Ok(()),
        Some(v) => Err(v.tracer().error().unwrap_or_else(|| crate::Error::InvalidGraph {
            node: 0,
            msg: "an operand of a rule stands for a failed op".into(),
        })),
    }
}

fn one_result_rule(op: &dyn Op, kind: &str, n: usize) -> crate::Error {
    crate::Error::invalid(
        op.name(),
        format!("{kind} rule"),
        format!("registered in the one-result form, but the op has {n} results (register it with `many:`)"),
    )
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
            LinearArg::Linear(t) => t.shape(),
            LinearArg::Known(v) => v.shape(),
        }
    }

    /// The argument's type.
    pub fn ty(&self) -> &crate::shape::TensorType {
        match self {
            LinearArg::Linear(t) => t,
            LinearArg::Known(v) => v.ty(),
        }
    }
}

/// A transpose rule: given the cotangent `ct` of the output of `op`, the
/// cotangent of every [`LinearArg::Linear`] argument (`None` for known
/// arguments, or for a linear one whose cotangent is zero). The result has
/// one entry per argument.
pub type TransposeFn = fn(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>>;

/// A transpose rule for an op with several results: the cotangents of the
/// linear arguments given one cotangent per result (`None`: zero; at least
/// one is `Some`).
pub type TransposeManyFn =
    fn(op: &dyn Op, cts: &[Option<Var>], args: &[LinearArg]) -> Result<Vec<Option<Var>>>;

crate::registry_entry! {
    /// A registered transpose rule.
    pub struct TransposeRule { rule: RuleFn<TransposeFn, TransposeManyFn> }, "transpose rule", transpose_rules
}

impl TransposeRule {
    /// The cotangents of `op`'s arguments (one entry per argument).
    ///
    /// # Errors
    /// The rule's error; [`Error::Panicked`](crate::Error::Panicked) if the rule panics.
    pub fn apply(
        &self,
        op: &dyn Op,
        cts: &[Option<Var>],
        args: &[LinearArg],
    ) -> Result<Vec<Option<Var>>> {
        unpoisoned(cts.iter().flatten().chain(args.iter().filter_map(LinearArg::known)))?;
        caught(op, "transpose rule", || match self.rule {
            RuleFn::One(f) => match cts {
                [Some(ct)] => f(op, ct, args),
                [None] => Ok(vec![None; args.len()]),
                _ => Err(one_result_rule(op, "transpose", cts.len())),
            },
            RuleFn::Many(f) => f(op, cts, args),
        })
    }
}

/// A rewrite rule for an op with one result: a simpler value equal to
/// `op(args)` (of type `out`, bit for bit unless the rule documents
/// otherwise), built with the `Var` API in the trace of `args`, or `None`
/// when the rule does not apply. A rule may inspect its operands'
/// producers ([`Var::producer`], [`Var::constant_value`]).
///
/// Termination: each rule must reduce a cost (fewer nodes, or less work on
/// large values) so that rewriting reaches a fixpoint; the driver stops
/// with an error naming the rules that keep firing.
pub type RewriteFn = fn(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>>;

/// A rewrite rule for an op with several results: one value per result.
pub type RewriteManyFn =
    fn(op: &dyn Op, args: &[Var], outs: &[TensorType]) -> Result<Option<Vec<Var>>>;

crate::registry_entry! {
    /// A registered rewrite rule.
    pub struct RewriteRule { rule: RuleFn<RewriteFn, RewriteManyFn> }, "rewrite rule", rewrite_rules
}

impl RewriteRule {
    /// The rewritten results of `op` on `args`, if the rule applies.
    ///
    /// # Errors
    /// The rule's error; [`Error::Panicked`](crate::Error::Panicked) if the rule panics.
    pub fn apply(
        &self,
        op: &dyn Op,
        args: &[Var],
        outs: &[TensorType],
    ) -> Result<Option<Vec<Var>>> {
        unpoisoned(args)?;
        caught(op, "rewrite rule", || match self.rule {
            RuleFn::One(f) => match outs {
                [out] => Ok(f(op, args, out)?.map(|v| vec![v])),
                _ => Err(one_result_rule(op, "rewrite", outs.len())),
            },
            RuleFn::Many(f) => f(op, args, outs),
        })
    }
}
