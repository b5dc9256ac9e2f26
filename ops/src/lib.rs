//! anvil's standard op library.
//!
//! Each op family has one module: [`elementwise`] (unary math, binary
//! arithmetic with broadcasting, comparisons, `select`, `cast`),
//! [`movement`] (`reshape`, `permute`, `broadcast_to`, `pad`, `slice`,
//! `concatenate`), [`reduce`] (`sum`, `max`, `min`, `prod`, `argmax`,
//! `argmin`), [`matmul`], [`index`] (`take`, `scatter_add`) and [`constant`]
//! (`full`, `iota`). In each, an op is a typed struct with its parameters and
//! its shape rule, and its scalar math where it has any; the transformation
//! rules registered for it sit beside it as they are added.
//!
//! Users reach the ops through [`VarExt`] (`x.sin()`, `x.sum(&[0])`) and the
//! arithmetic operators on `Var`, which this crate implements by registering
//! an [`anvil_core::OperatorImpl`]. Composite functions (`mean`, `var`,
//! `softmax`, `logsumexp`, `norm`, `stack`, `flip`, `squeeze`...) are plain
//! functions over the primitives.
//!
//! This crate must be linked for the operators to work; the `anvil` facade
//! does that.
#![warn(missing_docs)]

pub mod ad;
pub mod api;
pub mod batching;
pub mod composite;
pub mod constant;
pub mod control;
pub mod diagonal;
pub mod elementwise;
pub mod index;
pub mod linalg;
pub mod matmul;
pub mod movement;
pub mod reduce;

pub use api::{concatenate, eye, full, full_scalar, iota, iota_dtype, stack, where_, VarExt};

use anvil_core::{OperatorImpl, Var};

inventory::submit! {
    OperatorImpl {
        add: |a: &Var, b: &Var| a.apply(elementwise::Add, &[b]),
        sub: |a: &Var, b: &Var| a.apply(elementwise::Sub, &[b]),
        mul: |a: &Var, b: &Var| a.apply(elementwise::Mul, &[b]),
        div: |a: &Var, b: &Var| a.apply(elementwise::Div, &[b]),
        neg: |a: &Var| a.apply(elementwise::Neg, &[]),
    }
}

#[doc(hidden)]
pub use anvil_core;
