//! **anvil**: composable function transformations for scientific computing
//! in Rust, over a traced graph IR, with CPU kernels from faer and rayon.
//!
//! Write a function over traced values ([`Var`]); call it on tensors. The
//! call traces the function at the arguments' shapes, compiles the graph for
//! the CPU and runs it.
//!
//! ```
//! use anvil::prelude::*;
//!
//! let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3])?;
//! let f = |x: &Var| (x.sin() * x).sum(&[0]);
//! let y = f.call(&x)?;
//! let expected: f64 = [0.1f64, 0.2, 0.3].iter().map(|v| v.sin() * v).sum();
//! assert!((y.item()? - expected).abs() < 1e-15);
//!
//! // The graph that was run, printed like a jaxpr:
//! println!("{}", trace(&f, &x)?);
//! # Ok::<(), anvil::Error>(())
//! ```
//!
//! A bare closure is traced and compiled on every call; [`jit`] wraps it with
//! a cache of compiled plans keyed by the arguments' shapes and dtypes, so
//! repeated calls cost only the kernels.
//!
//! The crates behind the facade: `anvil-core` (tensors, IR, tracing, the
//! `Op` trait, registries), `anvil-ops` (the standard ops), `anvil-cpu` (the
//! CPU backend) and `anvil-transforms` (graph-to-graph transforms).
#![warn(missing_docs)]

pub mod testing;

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The custom-op guide's code, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/custom-ops.md")]
struct CustomOpsGuideDoctests;

use std::marker::PhantomData;
use std::sync::Arc;

pub use anvil_core::{
    self as core, trace, trace_types, Args, DType, Element, Error, Function, Graph, NodeId, Op,
    Outputs, PlanCache, Result, Scalar, SliceSpec, Tensor, TensorType, Var,
};
pub use anvil_cpu::{self as cpu, Parallelism};
pub use anvil_ops::{
    self as ops, concatenate, eye, full, full_scalar, iota, iota_dtype, stack, where_, VarExt,
};
pub use anvil_transforms::{
    self as transforms, grad, hessian, jacfwd, jacrev, jvp, map, value_and_grad, vjp, vmap,
};

/// Everything a program needs: `use anvil::prelude::*;`.
pub mod prelude {
    pub use crate::{
        concatenate, eye, full, grad, hessian, iota, jacfwd, jacrev, jit, jvp, linearize, map,
        stack, trace, value_and_grad, vjp, vmap, where_, Call, DType, Error, Function, Result,
        SliceSpec, Tensor, Var, VarExt,
    };
}

/// Running a traceable function on tensors: implemented for every [`Function`].
pub trait Call<M>: Function<M> {
    /// Traces (or finds in the cache), compiles and runs the function on `args`.
    ///
    /// `args` is a `&Tensor`, a tuple of `&Tensor`s, a `&[Tensor]` or a `Vec<Tensor>`.
    ///
    /// # Errors
    /// A wrong number of arguments; any error recorded while tracing (shape
    /// mismatches, axes out of range, dtypes an op does not accept); an op
    /// without a CPU kernel; a run-time error of a kernel (an index out of bounds).
    fn call(&self, args: impl Args) -> Result<Self::Output>;

    /// Like [`Call::call`] with an explicit parallelism policy.
    ///
    /// # Errors
    /// As [`Call::call`].
    fn call_with(&self, args: impl Args, ctx: &Parallelism) -> Result<Self::Output>;
}

impl<M, F: Function<M> + ?Sized> Call<M> for F {
    fn call(&self, args: impl Args) -> Result<Self::Output> {
        self.call_with(args, &Parallelism::default())
    }

    fn call_with(&self, args: impl Args, ctx: &Parallelism) -> Result<Self::Output> {
        let args = args.into_tensors();
        if self.arity().is_some_and(|n| n != args.len()) {
            anvil_core::function::check_arity(&self.name(), self.arity(), args.len())?;
        }
        let plan = match self.cache() {
            Some(cache) => {
                let any = match cache.get_for(&args) {
                    Some(hit) => hit,
                    None => {
                        let types: Vec<TensorType> = args.iter().map(Tensor::ty).collect();
                        cache.get_or_try_insert(&types, || Ok(Arc::new(compile(self, &types)?)))?
                    }
                };
                any.downcast::<cpu::Plan>().map_err(|_| {
                    Error::invalid(self.name(), "cache", "holds a plan of another backend")
                })?
            }
            None => {
                let types: Vec<TensorType> = args.iter().map(Tensor::ty).collect();
                Arc::new(compile(self, &types)?)
            }
        };
        Self::Output::from_tensors(plan.run(&args, ctx)?)
    }
}

/// Traces, optimises (the pipeline of [`transforms::pipeline`]) and
/// compiles for the CPU.
fn compile<M, F: Function<M> + ?Sized>(f: &F, types: &[TensorType]) -> Result<cpu::Plan> {
    transforms::compile(f, types, &cpu::Cpu)
}

/// The graph a call of `f` on arguments like `args` runs: traced, then
/// rewritten to a fixpoint (see [`transforms::rewrite`]), constants
/// folded, common subexpressions merged and dead nodes dropped
/// (`jax.jit(f).lower(x)`). The CPU backend then fuses elementwise chains
/// (`cpu::compile(&g)?.graph()` shows that).
///
/// ```
/// use anvil::prelude::*;
/// // The transposes cancel: what runs is one sin.
/// let g = anvil::lower(&|x: &Var| x.transpose().transpose().sin(), &Tensor::zeros(&[2, 3]))?;
/// assert_eq!(g.len(), 2);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`trace`].
pub fn lower<M, F: Function<M> + ?Sized>(f: &F, args: impl Args) -> Result<Graph> {
    transforms::optimize(&trace(f, args)?, &cpu::Cpu)
}

/// A function with a cache of compiled plans (see [`jit`]).
pub struct Jit<F, M> {
    f: F,
    cache: PlanCache,
    _marker: PhantomData<fn() -> M>,
}

/// A copy with an empty plan cache.
impl<F: Clone, M> Clone for Jit<F, M> {
    fn clone(&self) -> Self {
        Jit { f: self.f.clone(), cache: PlanCache::new(), _marker: PhantomData }
    }
}

impl<F, M> std::fmt::Debug for Jit<F, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jit({} cached plans)", self.cache.len())
    }
}

/// Wraps `f` so that calls reuse the compiled plan of an earlier call with
/// the same argument shapes and dtypes.
///
/// ```
/// use anvil::prelude::*;
/// let f = jit(|x: &Var| x.exp() * 2.0);
/// let a = f.call(&Tensor::zeros(&[2]))?;
/// let b = f.call(&Tensor::ones(&[2]))?; // same signature: no tracing, no compiling
/// assert_eq!(a.to_vec::<f64>()?, vec![2.0, 2.0]);
/// assert!((b.to_vec::<f64>()?[0] - 2.0 * 1f64.exp()).abs() < 1e-15);
/// assert_eq!(f.cache_len(), 1);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jit<M, F: Function<M>>(f: F) -> Jit<F, M> {
    Jit { f, cache: PlanCache::new(), _marker: PhantomData }
}

impl<F, M> Jit<F, M> {
    /// Number of compiled plans held (one per argument signature seen).
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }
}

impl<M, F: Function<M>> Function<M> for Jit<F, M> {
    type Output = F::Output;
    fn arity(&self) -> Option<usize> {
        self.f.arity()
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        self.f.inline(args)
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        self.f.name()
    }
}

/// Compiles and runs a graph on tensors as it is, without the rewrites of
/// [`lower`] (for graphs built or transformed by hand, and to compare a
/// graph with its optimised form).
///
/// # Errors
/// As [`cpu::compile`] and [`cpu::Plan::run`].
pub fn run_graph(graph: &Graph, args: &[Tensor]) -> Result<Vec<Tensor>> {
    cpu::compile(graph)?.run(args, &Parallelism::default())
}

/// The marker of [`Linearized`] as a [`Function`].
#[derive(Debug)]
pub enum LinearizedFn {}

/// A function's linear part at a point: its jvp with the primal computation
/// already done (see [`linearize`]). Call it on tangents; `vmap` it over a
/// batch of tangents for a Jacobian.
pub struct Linearized {
    graph: Graph,
    residuals: Vec<Tensor>,
    cache: PlanCache,
}

impl std::fmt::Debug for Linearized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Linearized({} residuals, {} nodes)", self.residuals.len(), self.graph.len())
    }
}

impl Function<LinearizedFn> for Linearized {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        Some(self.graph.inputs().len() - self.residuals.len())
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        anvil_core::function::check_arity("linearized", self.arity(), args.len())?;
        let tracer = args
            .first()
            .map_or_else(anvil_core::trace::current_or_detached, |a| a.tracer().clone());
        let mut vars: Vec<Var> =
            self.residuals.iter().map(|r| tracer.constant(r.clone())).collect();
        vars.extend(args.iter().cloned());
        transforms::inline_graph(&self.graph, &vars)
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        "linearized".into()
    }
}

/// Evaluates `f` at `primals` and returns its outputs and its linearization
/// there (`jax.linearize`): a function of tangents (one per float argument)
/// returning the outputs' tangents, without recomputing `f`. The primal
/// part runs once, here; the values the linear part needs are kept.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let (y, f_jvp) = anvil::linearize(&|x: &Var| x.sin(), &[x.clone()])?;
/// assert_eq!(y[0].to_vec::<f64>()?, vec![0.0, 1f64.sin()]);
/// let t = f_jvp.call(&Tensor::from_vec(vec![2.0, 2.0], &[2])?)?;
/// assert_eq!(t[0].to_vec::<f64>()?, vec![2.0, 2.0 * 1f64.cos()]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`Call::call`], and an op without a jvp rule.
pub fn linearize<M, F: Function<M>>(
    f: &F,
    primals: &[Tensor],
) -> Result<(Vec<Tensor>, Linearized)> {
    let types: Vec<TensorType> = primals.iter().map(Tensor::ty).collect();
    let graph = trace_types(f, &types)?;
    let lin = transforms::linearize_graph(&graph, &types)?;
    let mut values = run_graph(&lin.primal, primals)?;
    let residuals = values.split_off(lin.outputs);
    Ok((values, Linearized { graph: lin.linear, residuals, cache: PlanCache::new() }))
}
