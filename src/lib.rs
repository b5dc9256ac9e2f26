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
//! let y = f.eval(&x)?;
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

pub mod sparse;
pub mod testing;

mod shapes;
/// Collectives as ops, `shard_map`, sharded Jacobians and data-parallel
/// gradients over MPI processes (feature `mpi`): see the `anvil-mpi` crate.
#[cfg(feature = "mpi")]
pub use anvil_mpi as mpi;
/// The rest of `jax.lax` and `jax.numpy` (elementwise math, cumulative
/// reductions, sorting, dynamic indexing, gathers, scatters, `pad`): see
/// [`anvil_ops::lax`]; the methods are [`LaxExt`]'s.
pub use anvil_ops::lax::{self, LaxExt};
pub use shapes::{eval_shape, linear_transpose};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The custom-op guide's code, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/custom-ops.md")]
struct CustomOpsGuideDoctests;

use std::sync::Arc;

pub use anvil_core::function::{Apply, Func, Identity, IntoFunction, IntoOutput, ToVar};
pub use anvil_core::tree::{Dyn, Flatten, Traced, Tree, TreeDef};
pub use anvil_core::{
    self as core, trace, DType, Element, Error, Function, Graph, NodeId, Op, PlanCache, Result,
    Scalar, SliceSpec, Tensor, TensorType, Var,
};
pub use anvil_cpu::{self as cpu, Parallelism};
/// `#[derive(Tree)]`: a struct of tensors as a tree (see [`trait@Tree`] and
/// the `anvil-macros` crate).
pub use anvil_macros::Tree;
/// Linear algebra with derivatives and batching, under JAX's names
/// (`jnp.linalg`, `jax.scipy.linalg`): see [`anvil_ops::linalg`].
pub use anvil_ops::linalg;
pub use anvil_ops::{
    self as ops, concatenate, eye, full, full_scalar, iota, iota_dtype, stack, where_, VarExt,
};
pub use anvil_transforms::{
    self as transforms, cond, custom_jvp, custom_vjp, fori_loop, grad, hessian, jacfwd, jacrev,
    jvp, map, scan, scan_n, scan_with, switch, value_and_grad, vmap, while_loop,
    while_loop_bounded, InAxes, ScanOptions,
};

use anvil_core::function::{fit_args, fit_args_named, Args};
use anvil_core::tree::unflatten_all;

/// Everything a program needs: `use anvil::prelude::*;`.
pub mod prelude {
    pub use crate::LaxExt;
    pub use crate::{
        concatenate, cond, custom_jvp, custom_vjp, eye, fori_loop, full, grad, hessian, iota,
        jacfwd, jacrev, jit, jvp, linearize, map, scan, scan_n, scan_with, stack, switch, trace,
        value_and_grad, vjp, vmap, where_, while_loop, while_loop_bounded, Apply, DType, Dyn,
        Error, Eval, Function, InAxes, IntoFunction, Result, ScanOptions, SliceSpec, Tensor, Tree,
        Var, VarExt,
    };
}

/// What a call of a function returns: its result's structure with tensors.
pub type Concrete<F> = <<F as Function>::Output as Traced>::Concrete;

/// Running a traceable function on tensors: implemented for closures and
/// every transformed function.
pub trait Eval<M>: IntoFunction<M> {
    /// Traces (or finds in the cache), compiles and runs the function on
    /// `args`, returning its result with tensors for leaves.
    ///
    /// `args` is one argument as itself (`&x`, `&params`), or several as a
    /// tuple (`(&x, &w)`); an argument is a tensor or any tree of tensors
    /// (a tuple, `Vec`, map or `#[derive(Tree)]` struct).
    ///
    /// # Errors
    /// Arguments that do not fit the function (their number, their
    /// structure); any error recorded while tracing (shape mismatches, axes
    /// out of range, dtypes an op does not accept); an op without a CPU
    /// kernel; a run-time error of a kernel (an index out of bounds).
    fn eval(&self, args: impl Flatten<Tensor>) -> Result<<Self::Output as Traced>::Concrete> {
        self.eval_with(args, &Parallelism::default())
    }

    /// Like [`Eval::eval`] with an explicit parallelism policy.
    ///
    /// # Errors
    /// As [`Eval::eval`].
    fn eval_with(
        &self,
        args: impl Flatten<Tensor>,
        par: &Parallelism,
    ) -> Result<<Self::Output as Traced>::Concrete> {
        run(&self.as_function(), args, par)
    }
}

impl<M, F: IntoFunction<M>> Eval<M> for F {}

/// A compiled plan and the structure of its outputs.
struct Compiled {
    plan: cpu::Plan,
    output: TreeDef,
}

fn run<F: Function>(
    f: &F,
    args: impl Flatten<Tensor>,
    par: &Parallelism,
) -> Result<<F::Output as Traced>::Concrete> {
    // Plans are keyed by the structure as given (`&x` and `(&x,)` are two
    // keys for one signature): the per-call path builds no structure.
    let given = args.def();
    let leaves = args.leaves();
    let build = || -> Result<Compiled> {
        let def = fit_args_named(|| f.name(), given.clone(), <F::Args as Args>::ARITY)?;
        compile(f, &def, &leaves.iter().map(Tensor::ty).collect::<Vec<_>>())
    };
    let compiled = match f.cache() {
        Some(cache) => {
            let any = match cache.get_for(&given, &leaves) {
                Some(hit) => hit,
                None => {
                    let types: Vec<TensorType> = leaves.iter().map(Tensor::ty).collect();
                    cache.get_or_try_insert(&given, &types, || Ok(Arc::new(build()?)))?
                }
            };
            any.downcast::<Compiled>()
                .map_err(|_| Error::invalid(f.name(), "cache", "holds a plan of another backend"))?
        }
        None => Arc::new(build()?),
    };
    unflatten_all(&compiled.output, compiled.plan.run(&leaves, par)?)
}

/// Traces, optimises (the pipeline of [`transforms::pipeline`]) and
/// compiles for the CPU.
fn compile<F: Function + ?Sized>(f: &F, def: &TreeDef, types: &[TensorType]) -> Result<Compiled> {
    let (plan, output) = transforms::compile(f, def, types, &cpu::Cpu)?;
    Ok(Compiled { plan, output })
}

/// The graph a call of `f` on arguments like `args` runs: traced, then
/// rewritten to a fixpoint (see [`transforms::rewrite`](mod@transforms::rewrite)), constants
/// folded, common subexpressions merged and dead nodes dropped
/// (`jax.jit(f).lower(x)`). The CPU backend then fuses elementwise chains
/// (`cpu::compile(&g)?.graph()` shows that).
///
/// ```
/// use anvil::prelude::*;
/// // The transposes cancel: what runs is one sin.
/// let g = anvil::lower(&|x: &Var| x.transpose().transpose().sin(), &Tensor::zeros(&[2, 3])?)?;
/// assert_eq!(g.len(), 2);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`trace`](fn@trace).
pub fn lower<M, F: IntoFunction<M>>(f: &F, args: impl Flatten<Tensor>) -> Result<Graph> {
    transforms::optimize(&trace(f, args)?, &cpu::Cpu)
}

/// A function with a cache of compiled plans (see [`jit`]).
pub struct Jit<F> {
    f: F,
    cache: PlanCache,
}

/// A copy with an empty plan cache.
impl<F: Clone> Clone for Jit<F> {
    fn clone(&self) -> Self {
        Jit { f: self.f.clone(), cache: PlanCache::new() }
    }
}

impl<F> std::fmt::Debug for Jit<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jit({} cached plans)", self.cache.len())
    }
}

/// Wraps `f` so that calls reuse the compiled plan of an earlier call with
/// the same argument structure, shapes and dtypes.
///
/// ```
/// use anvil::prelude::*;
/// let f = jit(|x: &Var| x.exp() * 2.0);
/// let a = f.eval(&Tensor::zeros(&[2])?)?;
/// let b = f.eval(&Tensor::ones(&[2])?)?; // same signature: no tracing, no compiling
/// assert_eq!(a.to_vec::<f64>()?, vec![2.0, 2.0]);
/// assert!((b.to_vec::<f64>()?[0] - 2.0 * 1f64.exp()).abs() < 1e-15);
/// assert_eq!(f.cache_len(), 1);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jit<M, F: IntoFunction<M>>(f: F) -> Jit<F::Func> {
    Jit { f: f.into_function(), cache: PlanCache::new() }
}

impl<F> Jit<F> {
    /// Number of compiled plans held (one per argument signature seen).
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }
}

impl<F: Function> Function for Jit<F> {
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        self.f.inline(def, args)
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

/// A graph with values bound to its leading inputs (the residuals of a
/// primal computation that already ran): the linear part of [`linearize`]
/// and of [`vjp`].
struct Bound {
    graph: Graph,
    residuals: Vec<Tensor>,
    cache: PlanCache,
}

impl Bound {
    /// Checks that `args` have the types of the graph's inputs after the
    /// residuals: `what`'s `kind` (tangents, cotangents) `names[i]` must
    /// have the type of the value it stands for.
    fn check(&self, what: &str, kind: &str, names: &[String], args: &[Var]) -> Result<()> {
        let expected = &self.graph.inputs()[self.residuals.len()..];
        for (i, (a, &e)) in args.iter().zip(expected).enumerate() {
            let e = self.graph.ty(e);
            if a.shape() != e.shape() || a.dtype() != e.dtype() {
                let at = match names.get(i) {
                    Some(name) if !name.is_empty() => format!("for argument {name}"),
                    _ => i.to_string(),
                };
                return Err(Error::shape(
                    what,
                    &[a.shape(), e.shape()],
                    format!(
                        "the {kind} {at} is {}{:?}, but its value is {}{:?}: a {kind} has its value's shape and dtype",
                        a.dtype(),
                        a.shape(),
                        e.dtype(),
                        e.shape()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Inlines the graph, the residuals as constants, `args` after them.
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let tracer = args
            .first()
            .map_or_else(anvil_core::trace::current_or_detached, |a| a.tracer().clone());
        let mut vars: Vec<Var> =
            self.residuals.iter().map(|r| tracer.constant(r.clone())).collect();
        vars.extend(args.iter().cloned());
        transforms::inline_graph(&self.graph, &vars)
    }

    /// Bytes held by the residuals.
    fn residual_bytes(&self) -> usize {
        self.residuals.iter().map(|r| r.numel() * r.dtype().size_of()).sum()
    }
}

/// A function's linear part at a point: its jvp with the primal computation
/// already done (see [`linearize`]). Call it on tangents with the
/// arguments' structure; `vmap` it over a batch of tangents for a Jacobian.
pub struct Linearized<A, O> {
    bound: Bound,
    /// Per argument leaf: whether it is float (only those take tangents).
    float: Vec<bool>,
    args: TreeDef,
    output: TreeDef,
    _types: std::marker::PhantomData<fn() -> (A, O)>,
}

impl<A, O> std::fmt::Debug for Linearized<A, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = &self.bound;
        write!(f, "Linearized({} residuals, {} nodes)", b.residuals.len(), b.graph.len())
    }
}

impl<A, O> Linearized<A, O> {
    /// Bytes held by the residuals: the values of the primal computation
    /// the linear part reads.
    pub fn residual_bytes(&self) -> usize {
        self.bound.residual_bytes()
    }
}

impl<A: Args, O: Traced> Function for Linearized<A, O> {
    type Args = A;
    type Output = O;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        if def.num_leaves() != self.float.len() {
            return Err(Error::invalid(
                "linearized",
                "tangents",
                format!(
                    "have the structure {}; the primals have {}",
                    def.describe(),
                    self.args.describe()
                ),
            ));
        }
        let paths = self.args.leaf_paths();
        let (floats, names): (Vec<Var>, Vec<String>) = args
            .iter()
            .zip(&self.float)
            .zip(paths)
            .filter(|((_, &f), _)| f)
            .map(|((a, _), p)| (a.clone(), p))
            .unzip();
        self.bound.check("linearized", "tangent", &names, &floats)?;
        Ok(Dyn { def: self.output.clone(), leaves: self.bound.inline(&floats)? })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.bound.cache)
    }
    fn name(&self) -> String {
        "linearized".into()
    }
}

/// `f` traced and run at `primals`: the graph, the arguments' structure,
/// leaves and types.
struct AtPoint {
    graph: Graph,
    args: TreeDef,
    output: TreeDef,
    leaves: Vec<Tensor>,
    types: Vec<TensorType>,
}

fn at_point<F: Function>(f: &F, primals: impl Flatten<Tensor>) -> Result<AtPoint> {
    let args = fit_args(&f.name(), primals.def(), <F::Args as Args>::ARITY)?;
    let leaves = primals.leaves();
    let types: Vec<TensorType> = leaves.iter().map(Tensor::ty).collect();
    let (graph, output) = anvil_core::trace_types(f, &args, &types)?;
    Ok(AtPoint { graph, args, output, leaves, types })
}

/// Evaluates `f` at `primals` and returns its outputs and its linearization
/// there (`jax.linearize`): a function of tangents (with the arguments'
/// structure; integer leaves' tangents are ignored) returning the outputs'
/// tangents, without recomputing `f`. The primal part runs once, here; the
/// values the linear part needs are kept ([`Linearized::residual_bytes`]).
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let (y, f_jvp) = linearize(&|x: &Var| x.sin(), &x)?;
/// assert_eq!(y.to_vec::<f64>()?, vec![0.0, 1f64.sin()]);
/// let t = f_jvp.eval(&Tensor::from_vec(vec![2.0, 2.0], &[2])?)?;
/// assert_eq!(t.to_vec::<f64>()?, vec![2.0, 2.0 * 1f64.cos()]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`Eval::eval`], and an op without a jvp rule.
#[allow(clippy::type_complexity)]
pub fn linearize<M, F: IntoFunction<M>>(
    f: &F,
    primals: impl Flatten<Tensor>,
) -> Result<(<F::Output as Traced>::Concrete, Linearized<F::Args, F::Output>)> {
    let p = at_point(&f.as_function(), primals)?;
    let lin = transforms::linearize_graph(&p.graph, &p.types)?;
    let mut values = run_graph(&lin.primal, &p.leaves)?;
    let residuals = values.split_off(lin.outputs);
    let outputs = unflatten_all(&p.output, values)?;
    let float = p.types.iter().map(|t| t.dtype().is_float()).collect();
    let bound = Bound { graph: lin.linear, residuals, cache: PlanCache::new() };
    let l = Linearized { bound, float, args: p.args, output: p.output, _types: Default::default() };
    Ok((outputs, l))
}

/// The pullback of a function at a point (see [`vjp`]): call it on
/// cotangents of the outputs (with the outputs' structure) for the
/// cotangents of the arguments (a tuple with the arguments' structure).
/// It is a compiled function: call it as often as needed, `vmap` it over
/// a batch of cotangents.
pub struct Pullback<A, O> {
    bound: Bound,
    args: TreeDef,
    output: TreeDef,
    _types: std::marker::PhantomData<fn() -> (A, O)>,
}

impl<A, O> std::fmt::Debug for Pullback<A, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = &self.bound;
        write!(f, "Pullback({} residuals, {} nodes)", b.residuals.len(), b.graph.len())
    }
}

impl<A, O> Pullback<A, O> {
    /// Bytes held by the residuals: the values of the forward computation
    /// the backward pass reads (what a tape would hold).
    pub fn residual_bytes(&self) -> usize {
        self.bound.residual_bytes()
    }
}

impl<A: Args, O: Traced> Function for Pullback<A, O> {
    type Args = (O,);
    type Output = A;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        if def.num_leaves() != self.output.num_leaves() {
            return Err(Error::invalid(
                "pullback",
                "cotangents",
                format!(
                    "have the structure {}; the outputs have {}",
                    def.describe(),
                    self.output.describe()
                ),
            ));
        }
        self.bound.check("pullback", "cotangent", &self.output.leaf_paths(), args)?;
        Ok(Dyn { def: self.args.clone(), leaves: self.bound.inline(args)? })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.bound.cache)
    }
    fn name(&self) -> String {
        "pullback".into()
    }
}

/// Evaluates `f` at `primals` and returns its outputs and its pullback
/// there (`jax.vjp`): the pullback maps cotangents of the outputs to
/// cotangents of the arguments (`ctᵀ J`), a tuple with the arguments'
/// structure (zeros for integer leaves). The forward computation runs once,
/// here; the pullback keeps the values its backward pass reads
/// ([`Pullback::residual_bytes`]) and can be called any number of times.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let (y, pullback) = vjp(&|x: &Var| x.square(), &x)?;
/// assert_eq!(y.to_vec::<f64>()?, vec![1.0, 4.0]);
/// let (ct,) = pullback.eval(&Tensor::from_vec(vec![1.0, 0.0], &[2])?)?;
/// assert_eq!(ct.to_vec::<f64>()?, vec![2.0, 0.0]); // 2x, first row
/// let (ct,) = pullback.eval(&Tensor::from_vec(vec![0.0, 1.0], &[2])?)?;
/// assert_eq!(ct.to_vec::<f64>()?, vec![0.0, 4.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`Eval::eval`]; an op without a jvp or transpose rule.
#[allow(clippy::type_complexity)]
pub fn vjp<M, F: IntoFunction<M>>(
    f: &F,
    primals: impl Flatten<Tensor>,
) -> Result<(<F::Output as Traced>::Concrete, Pullback<F::Args, F::Output>)> {
    let p = at_point(&f.as_function(), primals)?;
    let lin = transforms::linearize_graph(&p.graph, &p.types)?;
    let mut values = run_graph(&lin.primal, &p.leaves)?;
    let residuals = values.split_off(lin.outputs);
    let outputs = unflatten_all(&p.output, values)?;
    let graph = transforms::ad::transpose_linear(&lin.linear, residuals.len(), &p.types)?;
    let bound = Bound { graph, residuals, cache: PlanCache::new() };
    Ok((outputs, Pullback { bound, args: p.args, output: p.output, _types: Default::default() }))
}
