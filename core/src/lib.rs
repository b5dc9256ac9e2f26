//! anvil's core: dtypes, shapes, host tensors, the graph IR, tracing, the
//! `Op` trait and the registries.
//!
//! This crate knows no concrete op (beyond the two the IR itself needs,
//! [`Parameter`] and [`Constant`]), no transform and no backend. The standard
//! ops live in `anvil-ops`, the transforms in `anvil-transforms`, the CPU
//! backend in `anvil-cpu`; they all meet through the types defined here: an
//! op is a `Box<dyn Op>` (with its facts and, for elementwise ops, its block
//! math), a value under construction is a [`Var`], a finished computation
//! is a [`Graph`] of nodes with one or several results, whatever is
//! registered per op (kernels, vmap/jvp/transpose/rewrite/sparsity rules) goes
//! through a [`RuleTable`], a backend plugs into the compile pipeline
//! through [`Evaluator`] and [`Backend`], and the rules of higher-order ops
//! reach the graph interpreters through [`interp`].
//!
//! ```
//! use anvil_core::{Tensor, DType};
//! let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3])?;
//! assert_eq!((x.dtype(), x.shape()), (DType::F64, &[3][..]));
//! # Ok::<(), anvil_core::Error>(())
//! ```
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod dtype;
pub mod eager;
pub mod error;
pub mod eval;
pub mod function;
pub mod graph;
pub mod interop;
pub mod interp;
pub mod op;
pub mod registry;
pub mod replay;
pub mod rules;
pub mod shape;
pub mod sparsity;
pub mod stats;
pub mod tensor;
pub mod trace;
pub mod tree;

pub use dtype::{promote_types, DType, Element, Scalar};
pub use error::{Error, Result};
pub use eval::{Backend, Evaluator};
pub use function::{
    trace, trace_capturing, trace_fn, trace_fn_for, trace_lifted, trace_types, trace_with, Apply,
    Args, Function, IntoFunction, IntoOutput, LiftedTrace, PlanCache, ToVar, TracedFn,
};
pub use graph::{
    Constant, DimSize, Graph, Mapped, Node, NodeId, Parameter, Rebuilt, SubGraph, ValueId,
};
pub use op::{
    Arith, Block, BlockAt, BlockMut, Compare, ElementwiseMath, Movement, Op, ReductionMath,
};
pub use registry::{GraphPassFn, Registered, RuleTable};
pub use rules::{
    jvp_rules, rewrite_rules, transpose_rules, vmap_rules, Batched, JvpFn, JvpManyFn, JvpRule,
    LinearArg, RewriteFn, RewriteManyFn, RewriteRule, RuleFn, TransposeFn, TransposeManyFn,
    TransposeRule, VmapFn, VmapManyFn, VmapRule,
};
pub use shape::{SliceSpec, TensorType};
pub use sparsity::{
    sparsity_rules, Detector, IndexSets, SparsityArg, SparsityFn, SparsityManyFn, SparsityRule,
};
pub use tensor::{Storage, Tensor};
pub use trace::{Operand, OperatorImpl, Producer, Tracer, Var};
pub use tree::{Dyn, Flatten, Traced, Tree, TreeDef};

#[doc(hidden)]
pub use inventory;
