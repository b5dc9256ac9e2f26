//! anvil's standard op library.
//!
//! Each op family has one module: [`elementwise`] (unary math, binary
//! arithmetic with broadcasting, comparisons, `select`, `cast`),
//! [`movement`] (`reshape`, `permute`, `broadcast_to`, `pad`, `slice`,
//! `concatenate`), [`reduce`] (`sum`, `max`, `min`, `prod`, `argmax`,
//! `argmin`), [`matmul`] (`matmul`, `matmul_t`), [`index`] (`take`,
//! `scatter_add`), [`linalg`] (factorisations, solves, determinants,
//! decompositions, norms: `anvil::linalg`), [`constant`] (`full`, `iota`,
//! and `basis`, the seed of the Jacobian transforms), [`diagonal`] (scaled
//! diagonals of the seed, and the rewrites that produce them),
//! [`control`] (`map` and the custom-derivative calls) and [`sparse`]
//! (the colored seed and the decompression of sparse Jacobians). In each, an op is a
//! typed struct with its parameters, its shape rule, the facts passes use
//! (elementwise, linear, a relayout...), its block math where it is
//! computed element by element, and beside it every rule registered for
//! it: batching, jvp, transpose, rewrites and sparsity. The elementwise ops are
//! declared with [`unary_elementwise_op!`] and [`binary_elementwise_op!`],
//! the macros a plugin crate uses too.
//!
//! Users reach the ops through [`VarExt`] (`x.sin()`, `x.sum(&[0])`) and the
//! arithmetic operators on `Var`, which this crate implements by registering
//! an [`anvil_core::OperatorImpl`]; on concrete tensors, through
//! [`TensorExt`] ([`eager`]), which runs the same methods as one-op
//! compiled functions. Composite functions (`mean`, `var`,
//! `softmax`, `logsumexp`, `norm`, `stack`, `flip`, `squeeze`...) are plain
//! functions over the primitives.
//!
//! NumPy subscripts and JAX's functional updates (`x.i(ix![1.., -1])`,
//! `x.at(ix![0]).set(&v)`) are in [`subscript`], composites over `slice`,
//! `take` and the scatters of [`lax`].
//!
//! The rest of `jax.lax` and `jax.numpy` a ported program meets — more
//! elementwise math, cumulative reductions, sorting, dynamic indexing,
//! gathers and scatters — is in [`lax`], with its methods in
//! [`lax::LaxExt`].
//!
//! This crate must be linked for the operators to work; the `anvil` facade
//! does that.
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod ad;
pub mod api;
pub mod batching;
pub mod bodies;
pub mod checkpoint;
pub mod composite;
pub mod cond;
pub mod constant;
pub mod control;
pub mod diagonal;
pub mod eager;
pub mod elementwise;
pub mod index;
pub mod lax;
pub mod linalg;
pub mod matmul;
pub mod movement;
pub mod nn;
pub mod numpy;
pub mod reduce;
pub mod scan;
pub mod sparse;
pub mod special;
pub mod subscript;
pub mod while_loop;

pub use api::{
    concatenate, dim_value, eye, full, full_scalar, iota, iota_dtype, stack, where_, VarExt,
};
pub use eager::TensorExt;
pub use subscript::{At, IndexExpr, IndexItem, NewAxis};

use anvil_core::{OperatorImpl, Var};

inventory::submit! {
    OperatorImpl {
        add: |a: &Var, b: &Var| api::promoted_add(a, b),
        sub: |a: &Var, b: &Var| api::promoted_apply(a, elementwise::Sub, b),
        mul: |a: &Var, b: &Var| api::promoted_mul(a, b),
        div: |a: &Var, b: &Var| api::true_divide(a, b),
        neg: |a: &Var| a.apply(elementwise::Neg, &[]),
        cast: |a: &Var, dtype| api::VarExt::cast(a, dtype),
    }
}

#[doc(hidden)]
pub use anvil_core;
