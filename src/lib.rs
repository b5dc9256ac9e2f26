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
//! The transforms compose, and each returns a function that can be
//! evaluated, traced, or transformed again:
//!
//! ```
//! use anvil::prelude::*;
//!
//! let f = |x: &Var| (x.sin() * x).sum(&[0]);                 // R^3 -> R
//! let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3])?;
//! let g = grad(f).eval(&x)?;                                   // [3]: sin x + x cos x
//! let j = jacfwd(|x: &Var| x.sin() * x).eval(&x)?;             // [3, 3], diagonal
//! let h = hessian(f).eval(&x)?;                                // [3, 3] = jacfwd(jacrev(f))
//! let xs = Tensor::from_vec(vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[2, 3])?;
//! let per_row = vmap(grad(f)).eval(&xs)?;                      // [2, 3]: one gradient per row
//! assert!((g.to_vec::<f64>()?[0] - (0.1f64.sin() + 0.1 * 0.1f64.cos())).abs() < 1e-15);
//! assert_eq!(j.get(&[0, 1]), Some(anvil::Scalar::F64(0.0)));
//! assert!(h.allclose(&jacfwd(jacrev(f)).eval(&x)?, 1e-12, 0.0));
//! assert!(per_row.select_axis(0, 0)?.allclose(&g, 1e-15, 0.0));
//! # Ok::<(), anvil::Error>(())
//! ```
//!
//! A bare closure is traced and compiled on every call; [`jit`] wraps it with
//! a cache of compiled plans keyed by the arguments' shapes and dtypes, so
//! repeated calls cost only the kernels.
//!
//! A tensor the function captures is used directly (`x.matmul(&w)`, `x *
//! &w`; unbatched under `vmap`, without tangent under `grad`), and tensors
//! have eager operations of their own ([`TensorExt`], `&a + &b`), which run
//! the same kernels as compiled calls:
//!
//! ```
//! use anvil::prelude::*;
//!
//! let w = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
//! let f = jit(|x: &Var| x.matmul(&w).tanh().sum_all());
//! let x = Tensor::from_vec(vec![0.5, -0.5], &[2])?;
//! let g = grad(&f).eval(&x)?;
//! // The same gradient by hand, eagerly: W (1 - tanh²(x W)).
//! let h = x.matmul(&w)?.tanh()?;
//! let expected = w.matmul(&(1.0 - &h.square()?))?;
//! assert!(g.allclose(&expected, 1e-15, 1e-15));
//! # Ok::<(), anvil::Error>(())
//! ```
//!
//! The crates behind the facade (packages `anvil-ad-*` on crates.io, the
//! names in code unchanged): `anvil_core` (tensors, IR, tracing, the `Op`
//! trait, registries, conversions to ndarray/nalgebra/faer/.npy/serde behind
//! features), `anvil_ops` (the standard ops), `anvil_cpu` (the CPU backend),
//! `anvil_transforms` (graph-to-graph transforms), `anvil_sparse` (sparsity
//! patterns and colorings) and, optionally, `anvil_mpi` (feature `mpi`). The
//! conformance kit for plugin crates is the `anvil-ad-testing` crate
//! (`anvil_testing`), a dev-dependency.
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod sparse;
pub mod symbolic;
pub use symbolic::{dim, symbolic, Symbolic};

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
    self as core, trace, DType, Element, Error, Function, Graph, NodeId, Op, Operand, PlanCache,
    Result, Scalar, SliceSpec, Tensor, TensorType, Var,
};
pub use anvil_cpu::{self as cpu, Parallelism};
/// `#[derive(Tree)]`: a struct of tensors as a tree (see [`trait@Tree`] and
/// the `anvil-macros` crate).
pub use anvil_macros::Tree;
/// Linear algebra with derivatives and batching, under JAX's names
/// (`jnp.linalg`, `jax.scipy.linalg`): see [`anvil_ops::linalg`].
pub use anvil_ops::linalg;
/// `jax.nn`'s activation functions: see [`anvil_ops::nn`].
pub use anvil_ops::nn;
/// `jax.numpy`'s functions beyond the methods of `VarExt` and `LaxExt`
/// (`roll`, `einsum`, `median`, `interp`...): see [`anvil_ops::numpy`].
pub use anvil_ops::numpy;
/// `jax.scipy.special`'s functions (`gammaln`, `digamma`, `xlogy`...):
/// see [`anvil_ops::special`].
pub use anvil_ops::special;
pub use anvil_ops::{
    self as ops, concatenate, eye, full, full_scalar, iota, iota_dtype, stack, where_, TensorExt,
    VarExt,
};
/// NumPy subscripts: `x.i(ix![1.., -1])`, `x.at(ix![0]).set(&v)` (see
/// [`ix!`] and [`anvil_ops::subscript`]).
pub use anvil_ops::{ix, subscript, At, IndexExpr, IndexItem, NewAxis};
pub use anvil_transforms::{
    self as transforms, cond, custom_jvp, custom_vjp, fori_loop, grad, hessian, jacfwd, jacrev,
    jvp, jvp_at, map, scan, scan_n, scan_with, switch, value_and_grad, vmap, while_loop,
    while_loop_bounded, InAxes, ScanOptions,
};
/// The types the transforms return (what a user names in a signature or a
/// struct field holding a transformed function) and their selectors
/// (`argnum::<N>()`, `argnums(&[..])`).
pub use anvil_transforms::{
    Argnum, Argnums, Branches, CustomJvp, CustomVjp, Grad, Hessian, Jacobian, Jvp, Linearization,
    MapFn, Vmap,
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
        Error, Eval, Function, InAxes, IntoFunction, Result, ScanOptions, SliceSpec, Tensor,
        TensorExt, Tree, Var, VarExt,
    };
    pub use crate::{ix, jvp_at, NewAxis};
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

/// A compiled plan, the structure of its outputs and the captured tensors
/// it takes after the arguments.
type Compiled = transforms::Compiled<cpu::Plan>;

fn run<F: Function>(
    f: &F,
    args: impl Flatten<Tensor>,
    par: &Parallelism,
) -> Result<<F::Output as Traced>::Concrete> {
    // Plans are keyed by the structure as given (`&x` and `(&x,)` are two
    // keys for one signature): the per-call path builds no structure (it
    // is built on a miss only).
    let mut vecs = CallVecs::take();
    let leaves = &mut vecs.leaves;
    args.for_each_leaf(&mut |t| leaves.push(t.clone()));
    let leaves: &[Tensor] = leaves;
    let build = |given: TreeDef| -> Result<Compiled> {
        let def = fit_args_named(|| f.name(), given, <F::Args as Args>::ARITY)?;
        compile(f, &def, &leaves.iter().map(Tensor::ty).collect::<Vec<_>>())
    };
    let compiled = match f.cache() {
        Some(cache) => {
            let any = match cache.get_matching(|d| args.def_is(d), leaves) {
                Some(hit) => hit,
                None => {
                    let given = args.def();
                    let types: Vec<TensorType> = leaves.iter().map(Tensor::ty).collect();
                    cache
                        .get_or_try_insert(&given, &types, || Ok(Arc::new(build(given.clone())?)))?
                }
            };
            any.downcast::<Compiled>()
                .map_err(|_| Error::invalid(f.name(), "cache", "holds a plan of another backend"))?
        }
        None => Arc::new(build(args.def())?),
    };
    vecs.leaves.extend(compiled.lifted.iter().cloned());
    compiled.plan.run_into(&vecs.leaves, par, &mut vecs.outputs)?;
    // The leaves die here, not when the vectors are next used.
    vecs.leaves.clear();
    unflatten_all(&compiled.output, vecs.outputs.drain(..))
}

/// The argument and result vectors of a call, kept per thread for its next
/// call: a cached call allocates neither. A call made while another runs on
/// the same thread (from inside a kernel) finds them taken and allocates
/// its own. Both are empty whenever they are kept, so they hold no tensor
/// alive between calls.
#[derive(Default)]
struct CallVecs {
    leaves: Vec<Tensor>,
    outputs: Vec<Tensor>,
}

thread_local! {
    /// The vectors of the thread's last call (plain vectors: a kept
    /// [`CallVecs`] would be dropped, and kept again, on replacing it).
    static SPARE_CALL_VECS: std::cell::Cell<(Vec<Tensor>, Vec<Tensor>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// The most tensors a kept vector may have room for.
const MAX_SPARE_CALL_LEAVES: usize = 1024;

impl CallVecs {
    fn take() -> CallVecs {
        let (leaves, outputs) = SPARE_CALL_VECS.try_with(std::cell::Cell::take).unwrap_or_default();
        CallVecs { leaves, outputs }
    }
}

impl Drop for CallVecs {
    fn drop(&mut self) {
        let mut leaves = std::mem::take(&mut self.leaves);
        let mut outputs = std::mem::take(&mut self.outputs);
        leaves.clear();
        outputs.clear();
        if leaves.capacity().max(outputs.capacity()) <= MAX_SPARE_CALL_LEAVES {
            let _ = SPARE_CALL_VECS.try_with(|s| s.set((leaves, outputs)));
        }
    }
}

/// Traces, optimises (the pipeline of [`transforms::pipeline`]) and
/// compiles for the CPU.
fn compile<F: Function + ?Sized>(f: &F, def: &TreeDef, types: &[TensorType]) -> Result<Compiled> {
    transforms::compile(f, def, types, &cpu::Cpu)
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
/// **What a cached plan keeps.** `f` is traced once per signature; what it
/// captured is fixed at that trace, as in `jax.jit`. A captured tensor
/// of at least [`LIFT_MIN_ELEMS`](anvil_core::trace::LIFT_MIN_ELEMS)
/// elements (a weight matrix `w` in `|x| x.matmul(&w)`) is an implicit
/// parameter: the plan keeps the tensor itself — a clone sharing its
/// buffer, no copy — and passes it to the kernels as an input on every
/// run; nothing is folded into the graph from it. Smaller captured tensors
/// are constants of the graph. Either way a closure that would capture a
/// different tensor on a later trace still runs with the first one: build
/// a new `jit` (or pass the tensor as an argument) to change it.
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
