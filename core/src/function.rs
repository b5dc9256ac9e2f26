//! Functions that can be traced: closures over trees of `Var`s and
//! transformed functions.
//!
//! [`Function`] is the one trait every traceable thing implements: its
//! arguments are a tuple of trees ([`Function::Args`], e.g. `(Var,
//! Mlp<Var>)`), its result a tree ([`Function::Output`]), and it inlines
//! itself into a trace on flat leaves plus their structure. Every
//! transform's result (`vmap(f)`, `grad(f)`) is a `Function`, so a generic
//! helper over "any transformed function" is one bound: `F: Function`.
//!
//! Closures become functions through [`IntoFunction`]: any `Fn(&A, &B, ..)
//! -> R` with up to eight arguments, each a tree of `Var`s ([`Traced`]),
//! returning a tree (or a `Result` of one), and `Fn(&[Var]) -> R` for any
//! number of arguments. Transforms accept `impl IntoFunction<M>` (the marker
//! `M` tells the closure forms apart and is always inferred) and store the
//! converted function, so `vmap(|x: &Var| x.sin())` needs no annotation
//! beyond the closure's argument types.
//!
//! A closure traced inside another trace may use that trace's values (see
//! [`Tracer::child`]): [`trace_fn`] returns them as the traced graph's
//! captures.
//!
//! Running a function on tensors needs a backend, so `eval` lives in the
//! facade crate; [`Apply::apply`] inlines a function into the current trace.

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::shape::TensorType;
use crate::tensor::Tensor;
use crate::trace::{Tracer, Var};
use crate::tree::{unflatten_all, Dyn, Flatten, Traced, TreeDef};
use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// Something that can be traced into a graph.
///
/// Implemented by closures (through [`IntoFunction`]) and by every
/// transform. A function of your own type implements `inline`.
pub trait Function {
    /// The arguments: a tuple of trees of `Var`s (`(Var,)`, `(Var,
    /// Mlp<Var>)`), or `Vec<Var>` for any number of arguments.
    type Args: Args;
    /// The result: a tree of `Var`s.
    type Output: Traced;

    /// Inlines the function into the trace of `args` (the leaves of
    /// arguments of structure `def`, values of the current trace, or of a
    /// trace around it), returning its outputs' leaves and structure in the
    /// same trace.
    ///
    /// # Errors
    /// Errors of the function's own ops are recorded in the trace; this
    /// returns errors it detects itself (arguments of the wrong structure,
    /// a transform's checks).
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>>;

    /// The cache of compiled plans, for functions that own one (`jit(f)` and
    /// every transform). A bare closure has none and is traced on every call.
    fn cache(&self) -> Option<&PlanCache> {
        None
    }

    /// A name for error messages.
    fn name(&self) -> String {
        "function".into()
    }
}

impl<F: Function + ?Sized> Function for &F {
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        (**self).inline(def, args)
    }
    fn cache(&self) -> Option<&PlanCache> {
        (**self).cache()
    }
    fn name(&self) -> String {
        (**self).name()
    }
}

impl<F: Function + ?Sized> Function for Arc<F> {
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        (**self).inline(def, args)
    }
    fn cache(&self) -> Option<&PlanCache> {
        (**self).cache()
    }
    fn name(&self) -> String {
        (**self).name()
    }
}

/// The arguments of a function: a tuple of trees, or `Vec<Var>` for a
/// function of any number of arguments.
pub trait Args: Traced {
    /// The number of arguments, `None` for any number.
    const ARITY: Option<usize>;
}

impl Args for () {
    const ARITY: Option<usize> = Some(0);
}

impl Args for Vec<Var> {
    const ARITY: Option<usize> = None;
}

macro_rules! args_tuple {
    ($n:literal: $($t:ident),+) => {
        impl<$($t: Traced),+> Args for ($($t,)+) {
            const ARITY: Option<usize> = Some($n);
        }
    };
}
args_tuple!(1: A);
args_tuple!(2: A, B);
args_tuple!(3: A, B, C);
args_tuple!(4: A, B, C, D);
args_tuple!(5: A, B, C, D, E);
args_tuple!(6: A, B, C, D, E, G);
args_tuple!(7: A, B, C, D, E, G, H);
args_tuple!(8: A, B, C, D, E, G, H, I);

/// The structure of the arguments given to a function of `arity`
/// arguments, as its `Args` tuple: one argument of a one-argument function
/// is wrapped in a 1-tuple (`f.eval(&x)`, and `f.eval((&x,))` too), several
/// come as a tuple (`f.eval((&x, &w))`) or a slice of tensors (`&[x, w]`),
/// and a function of any number of
/// arguments takes a list (a tuple, a slice or a `Vec` of leaves).
///
/// # Errors
/// A number of arguments that differs from the arity.
pub fn fit_args(what: &str, def: TreeDef, arity: Option<usize>) -> Result<TreeDef> {
    fit_args_named(|| what.into(), def, arity)
}

/// [`fit_args`], the function's name computed only for an error (the
/// per-call path of a cached function allocates nothing for it).
///
/// # Errors
/// As [`fit_args`].
pub fn fit_args_named(
    what: impl FnOnce() -> String,
    def: TreeDef,
    arity: Option<usize>,
) -> Result<TreeDef> {
    match (arity, def) {
        (Some(1), TreeDef::Tuple(c)) if c.len() == 1 => Ok(TreeDef::Tuple(c)),
        (Some(1), d) => Ok(TreeDef::Tuple(vec![d])),
        (Some(n), TreeDef::Tuple(c) | TreeDef::List(c)) if c.len() == n => Ok(TreeDef::Tuple(c)),
        (Some(n), d) => Err(Error::Arity {
            what: what(),
            kind: "arguments".into(),
            expected: n,
            got: match &d {
                TreeDef::Tuple(c) => c.len(),
                _ => 1,
            },
        }),
        (None, TreeDef::Tuple(c) | TreeDef::List(c)) => Ok(TreeDef::List(c)),
        (None, d) => Ok(TreeDef::List(vec![d])),
    }
}

/// Checks a number of arguments.
///
/// # Errors
/// [`Error::Arity`].
pub fn check_arity(what: &str, expected: Option<usize>, got: usize) -> Result<()> {
    match expected {
        Some(n) if n != got => {
            Err(Error::Arity { what: what.into(), kind: "arguments".into(), expected: n, got })
        }
        _ => Ok(()),
    }
}

/// What a traced closure may return: a tree of `Var`s, or a `Result` of
/// one (so a closure can use `?` on [`Apply::apply`]).
pub trait IntoOutput {
    /// The tree.
    type Tree: Traced;
    /// The tree, or the closure's error.
    ///
    /// # Errors
    /// The closure's error.
    fn into_output(self) -> Result<Self::Tree>;
}

impl<T: Traced> IntoOutput for T {
    type Tree = T;
    fn into_output(self) -> Result<T> {
        Ok(self)
    }
}

impl<T: Traced> IntoOutput for Result<T> {
    type Tree = T;
    fn into_output(self) -> Result<T> {
        self
    }
}

/// Something that converts into a [`Function`]: a closure over trees of
/// `Var`s, or a function already. `M` tells the forms apart (a closure's
/// signature, or [`Identity`]) and is inferred.
pub trait IntoFunction<M>: Sized {
    /// The arguments (see [`Function::Args`]).
    type Args: Args;
    /// The result (see [`Function::Output`]).
    type Output: Traced;
    /// The function it becomes.
    type Func: Function<Args = Self::Args, Output = Self::Output>;

    /// The function, owning `self`.
    fn into_function(self) -> Self::Func;

    /// The function, borrowing `self` (for a call).
    fn as_function(&self) -> impl Function<Args = Self::Args, Output = Self::Output> + '_;
}

/// The marker of [`IntoFunction`] for what is a [`Function`] already.
#[derive(Debug)]
pub enum Identity {}

impl<F: Function> IntoFunction<Identity> for F {
    type Args = F::Args;
    type Output = F::Output;
    type Func = F;
    fn into_function(self) -> F {
        self
    }
    fn as_function(&self) -> impl Function<Args = F::Args, Output = F::Output> + '_ {
        self
    }
}

/// A closure as a [`Function`]; `M` is its signature.
pub struct Func<F, M> {
    f: F,
    _marker: PhantomData<fn() -> M>,
}

impl<F, M> Func<F, M> {
    fn new(f: F) -> Self {
        Func { f, _marker: PhantomData }
    }
}

impl<F: Clone, M> Clone for Func<F, M> {
    fn clone(&self) -> Self {
        Func::new(self.f.clone())
    }
}

impl<F, M> std::fmt::Debug for Func<F, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Func")
    }
}

macro_rules! closure {
    ($($a:ident $i:tt),*) => {
        impl<F, R, $($a),*> IntoFunction<fn($(&$a),*) -> R> for F
        where
            F: Fn($(&$a),*) -> R,
            R: IntoOutput + 'static,
            $($a: Traced,)*
        {
            type Args = ($($a,)*);
            type Output = R::Tree;
            type Func = Func<F, fn($(&$a),*) -> R>;
            fn into_function(self) -> Self::Func {
                Func::new(self)
            }
            fn as_function(&self) -> impl Function<Args = Self::Args, Output = Self::Output> + '_ {
                Func::<&F, fn($(&$a),*) -> R>::new(self)
            }
        }

        impl<F, R, $($a),*> Function for Func<F, fn($(&$a),*) -> R>
        where
            F: Fn($(&$a),*) -> R,
            R: IntoOutput + 'static,
            $($a: Traced,)*
        {
            type Args = ($($a,)*);
            type Output = R::Tree;
            #[allow(unused_variables, clippy::unused_unit)]
            fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
                let t: ($($a,)*) = unflatten_all(def, args.to_vec())?;
                let out = (self.f)($(&t.$i),*).into_output()?;
                Ok(Dyn::of(&out))
            }
        }
    };
}
closure!();
closure!(A 0);
closure!(A 0, B 1);
closure!(A 0, B 1, C 2);
closure!(A 0, B 1, C 2, D 3);
closure!(A 0, B 1, C 2, D 3, E 4);
closure!(A 0, B 1, C 2, D 3, E 4, G 5);
closure!(A 0, B 1, C 2, D 3, E 4, G 5, H 6);
closure!(A 0, B 1, C 2, D 3, E 4, G 5, H 6, I 7);

impl<F, R> IntoFunction<fn(&[Var]) -> R> for F
where
    F: Fn(&[Var]) -> R,
    R: IntoOutput + 'static,
{
    type Args = Vec<Var>;
    type Output = R::Tree;
    type Func = Func<F, fn(&[Var]) -> R>;
    fn into_function(self) -> Self::Func {
        Func::new(self)
    }
    fn as_function(&self) -> impl Function<Args = Vec<Var>, Output = R::Tree> + '_ {
        Func::<&F, fn(&[Var]) -> R>::new(self)
    }
}

impl<F, R> Function for Func<F, fn(&[Var]) -> R>
where
    F: Fn(&[Var]) -> R,
    R: IntoOutput + 'static,
{
    type Args = Vec<Var>;
    type Output = R::Tree;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        if def.num_leaves() != args.len() {
            return Err(Error::invalid("function", "arguments", "structure and leaves differ"));
        }
        Ok(Dyn::of(&(self.f)(args).into_output()?))
    }
}

/// A leaf of the arguments of [`Apply::apply`]: a traced value, or a
/// concrete tensor, which becomes a value of the current trace as any
/// captured tensor does ([`Tracer::capture`]: a constant, or an implicit
/// parameter of the compiled call when large), as a NumPy array passed to a
/// transformed function does in JAX.
pub trait ToVar {
    /// The value in the current trace.
    fn to_var(&self) -> Var;
}

impl ToVar for Var {
    fn to_var(&self) -> Var {
        self.clone()
    }
}

impl ToVar for Tensor {
    fn to_var(&self) -> Var {
        crate::trace::current_or_detached().capture(self.clone())
    }
}

fn to_vars<L: ToVar>(args: &impl Flatten<L>) -> Vec<Var> {
    let mut out = Vec::new();
    args.for_each_leaf(&mut |l| out.push(l.to_var()));
    out
}

/// Calling a function on traced values inside another traced function:
/// implemented for every [`IntoFunction`].
pub trait Apply<M>: IntoFunction<M> {
    /// Inlines the function into the trace of `args` and returns its
    /// result, as a tree: `vmap(f).apply((&xs, &w))?`, `softplus.apply(&x)?`.
    /// The arguments are given as to `eval`: one argument as itself,
    /// several as a tuple; their leaves are traced values, or tensors
    /// (constants).
    ///
    /// # Errors
    /// Arguments that do not fit the function; the function's own errors
    /// (a transform's checks; errors of its ops are recorded in the trace).
    fn apply<L: ToVar>(&self, args: impl Flatten<L>) -> Result<Self::Output> {
        apply_leaves(&self.as_function(), args.def(), &to_vars(&args))
    }

    /// [`Apply::apply`] for a function whose result is one value, used like
    /// an op: an error is recorded in the trace (the call that runs the
    /// trace returns it) and the result is poisoned. `jacfwd(f).invoke((u,
    /// lam))` in a Newton step.
    fn invoke<L: ToVar>(&self, args: impl Flatten<L>) -> Var
    where
        Self: IntoFunction<M, Output = Var>,
    {
        let leaves = to_vars(&args);
        let tracer = leaves
            .first()
            .map(|a| a.tracer().clone())
            .unwrap_or_else(crate::trace::current_or_detached);
        match apply_leaves(&self.as_function(), args.def(), &leaves) {
            Ok(v) => v,
            Err(e) => {
                tracer.record(e);
                tracer.poisoned()
            }
        }
    }
}

impl<M, F: IntoFunction<M>> Apply<M> for F {}

fn apply_leaves<F: Function>(f: &F, def: TreeDef, leaves: &[Var]) -> Result<F::Output> {
    let def = fit_args(&f.name(), def, <F::Args as Args>::ARITY)?;
    f.inline(&def, leaves)?.into_tree()
}

/// A function traced into a graph: the graph (whose inputs are the
/// arguments' leaves, then the captures), the structure of its outputs,
/// and the values of enclosing traces it used.
#[derive(Debug)]
pub struct TracedFn {
    /// The graph.
    pub graph: Graph,
    /// The structure of the outputs.
    pub output: TreeDef,
    /// Values of the traces around this one that the function used, in
    /// the order of the inputs that stand for them (after the arguments).
    pub captures: Vec<Var>,
    /// The trace-time types of the outputs (see
    /// [`TraceTypes`](crate::trace::TraceTypes)), `None` where untyped (as
    /// every output is when no typing is installed).
    pub types: Vec<Option<crate::trace::TypeBits>>,
}

/// Traces `f` on arguments of structure `def` and leaf types `types`, in a
/// trace inside the current one (so `f` may use the current trace's values:
/// they come back as captures).
///
/// # Errors
/// The first error recorded while tracing; `f`'s own errors; arguments
/// that do not fit `f`.
pub fn trace_fn<F: Function + ?Sized>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
) -> Result<TracedFn> {
    trace_fn_for(f, def, types, &[])
}

/// [`trace_fn`] whose inputs stand for the values `outer` (the arguments a
/// transform was called with, see [`Tracer::stand_for`]), so that facts
/// known about them while tracing carry into the function (a sharded
/// function's replication types).
///
/// # Errors
/// As [`trace_fn`].
pub fn trace_fn_for<F: Function + ?Sized>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
    outer: &[Var],
) -> Result<TracedFn> {
    crate::stats::count_trace();
    let mut output = TreeDef::Leaf;
    let mut out_types = Vec::new();
    let (graph, captures) = trace_capturing(types, |vars| {
        if let Some(v) = vars.first() {
            v.tracer().stand_for(vars, outer);
        }
        let out = f.inline(def, vars)?;
        output = out.def;
        out_types = out.leaves.iter().map(crate::trace::type_of).collect();
        Ok(out.leaves)
    })?;
    Ok(TracedFn { graph, output, captures, types: out_types })
}

/// Traces `f` on fresh inputs of the given types in a trace inside the
/// current one: the graph (inputs: those, then one per captured value)
/// and the captured values of the traces around it.
///
/// # Errors
/// `f`'s error; any error recorded while tracing; an invalid graph.
pub fn trace_capturing(
    inputs: &[TensorType],
    f: impl FnOnce(&[Var]) -> Result<Vec<Var>>,
) -> Result<(Graph, Vec<Var>)> {
    let tracer = Tracer::child();
    let g = trace_in(&tracer, inputs, f)?;
    Ok((g, tracer.captures()))
}

/// Traces `f` on fresh inputs of the given types in a new, closed trace:
/// how transforms build graphs from graphs (a `map` body, a derivative).
///
/// # Errors
/// `f`'s error; any error recorded while tracing (a value of another trace
/// among them); an invalid graph.
pub fn trace_with(
    inputs: &[TensorType],
    f: impl FnOnce(&[Var]) -> Result<Vec<Var>>,
) -> Result<Graph> {
    trace_in(&Tracer::new(), inputs, f)
}

fn trace_in(
    tracer: &std::rc::Rc<Tracer>,
    inputs: &[TensorType],
    f: impl FnOnce(&[Var]) -> Result<Vec<Var>>,
) -> Result<Graph> {
    let _active = tracer.activate();
    let args = inputs.iter().map(|t| tracer.input(t.clone())).collect::<Result<Vec<_>>>()?;
    let outs = f(&args)?;
    let g = tracer.finish(&outs)?;
    g.verify()?;
    Ok(g)
}

/// Traces `f` at arguments of structure `def` and types `types` into a
/// closed graph (the top level of a call).
///
/// # Errors
/// As [`trace_fn`]; a function that uses values of a trace around the call.
pub fn trace_types<F: Function + ?Sized>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
) -> Result<(Graph, TreeDef)> {
    let t = trace_fn(f, def, types)?;
    if !t.captures.is_empty() {
        return Err(Error::invalid(
            f.name(),
            "captures",
            "a function traced on its own uses values of an enclosing trace",
        ));
    }
    Ok((t.graph, t.output))
}

/// A function traced for a compiled call (see [`trace_lifted`]).
#[derive(Debug)]
pub struct LiftedTrace {
    /// The graph: its inputs are the arguments' leaves, then one per
    /// lifted tensor.
    pub graph: Graph,
    /// The structure of the outputs.
    pub output: TreeDef,
    /// The captured tensors that became inputs, in the order of those
    /// inputs: a call passes them after its arguments.
    pub lifted: Vec<Tensor>,
}

/// [`trace_types`] for a compiled call: large tensors the function captured
/// become inputs of the graph after the arguments (implicit parameters, see
/// [`Tracer::capture`]) instead of constants folded into it.
///
/// # Errors
/// As [`trace_types`] (a value of an enclosing trace is an error).
pub fn trace_lifted<F: Function + ?Sized>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
) -> Result<LiftedTrace> {
    let tracer = Tracer::lifting();
    let mut output = TreeDef::Leaf;
    let graph = trace_in(&tracer, types, |vars| {
        let out = f.inline(def, vars)?;
        output = out.def;
        Ok(out.leaves)
    })?;
    Ok(LiftedTrace { graph, output, lifted: tracer.lifted() })
}

/// Traces `f` at the shapes and dtypes of example arguments (given as to
/// `eval`: one argument as itself, several as a tuple).
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// let g = trace(&|x: &Var| x.clone(), &Tensor::zeros(&[3])?)?;
/// assert_eq!(g.inputs().len(), 1);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// # Errors
/// As [`trace_types`].
pub fn trace<M, F: IntoFunction<M>>(f: &F, args: impl Flatten<Tensor>) -> Result<Graph> {
    let f = f.as_function();
    let def = fit_args(&f.name(), args.def(), <F::Args as Args>::ARITY)?;
    let mut types = Vec::new();
    args.for_each_leaf(&mut |t| types.push(t.ty()));
    Ok(trace_types(&f, &def, &types)?.0)
}

/// The key of a compiled plan: the arguments' structure and leaf types.
type PlanKey = (TreeDef, Vec<TensorType>);

/// A thread-safe cache of compiled plans keyed by the arguments' structure
/// and leaf types.
///
/// The plan type belongs to the backend, so entries are type-erased; the
/// backend downcasts them.
#[derive(Debug, Default)]
pub struct PlanCache {
    plans: Mutex<HashMap<PlanKey, Arc<dyn Any + Send + Sync>>>,
}

impl PlanCache {
    /// An empty cache.
    pub fn new() -> PlanCache {
        PlanCache::default()
    }

    /// The entry for arguments of structure `def` and leaf types `types`,
    /// building it with `make` on a miss.
    ///
    /// # Errors
    /// Whatever `make` returns.
    pub fn get_or_try_insert(
        &self,
        def: &TreeDef,
        types: &[TensorType],
        make: impl FnOnce() -> Result<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        let key = (def.clone(), types.to_vec());
        if let Some(p) = self.lock().get(&key) {
            return Ok(p.clone());
        }
        let plan = make()?;
        self.lock().insert(key, plan.clone());
        Ok(plan)
    }

    /// The entry for arguments of structure `def` and leaves `args`, if any,
    /// found without building the key (the per-call path of a cached
    /// function). A cache with many entries answers `None` (use
    /// [`PlanCache::get_or_try_insert`]).
    pub fn get_for(&self, def: &TreeDef, args: &[Tensor]) -> Option<Arc<dyn Any + Send + Sync>> {
        self.get_matching(|d| d == def, args)
    }

    /// [`PlanCache::get_for`] with the structure tested by `is_def` (such
    /// as [`Flatten::def_is`] of the arguments, which builds no structure).
    pub fn get_matching(
        &self,
        is_def: impl Fn(&TreeDef) -> bool,
        args: &[Tensor],
    ) -> Option<Arc<dyn Any + Send + Sync>> {
        let plans = self.lock();
        if plans.len() > 8 {
            return None;
        }
        let matches = |(d, key): &PlanKey| {
            key.len() == args.len()
                && key
                    .iter()
                    .zip(args)
                    .all(|(t, a)| t.dtype() == a.dtype() && t.shape() == a.shape())
                && is_def(d)
        };
        plans.iter().find(|(k, _)| matches(k)).map(|(_, p)| p.clone())
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PlanKey, Arc<dyn Any + Send + Sync>>> {
        // A panic while holding the lock cannot leave the map half-updated
        // (insert is the only mutation), so a poisoned lock is still usable.
        self.plans.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert<M, F: IntoFunction<M>>(f: F) -> F::Func {
        f.into_function()
    }

    #[test]
    fn closures_of_trees_convert_without_annotations_beyond_their_arguments() {
        let f = convert(|x: &Var| x.clone());
        let g = convert(|x: &Var, p: &(Var, Vec<Var>)| (x.clone(), p.1.clone()));
        let h = convert(|xs: &[Var]| xs.to_vec());
        let again = convert(&f);
        let x = Tensor::zeros(&[2]).unwrap();
        let ones = Tensor::ones(&[3]).unwrap();
        assert_eq!(trace(&f, &x).unwrap().inputs().len(), 1);
        assert_eq!(trace(&again, (&x,)).unwrap().inputs().len(), 1);
        let p = (x.clone(), vec![ones.clone(), ones.clone()]);
        let graph = trace(&g, (&x, &p)).unwrap();
        assert_eq!((graph.inputs().len(), graph.outputs().len()), (4, 3));
        assert_eq!(trace(&h, (&x, &ones, &ones)).unwrap().inputs().len(), 3);
        assert!(matches!(trace(&g, &x), Err(Error::Arity { expected: 2, got: 1, .. })));
    }

    #[test]
    fn an_inner_trace_captures_the_outer_values_it_uses() {
        let inner = |y: &Var| -> Result<Var> { Ok(y.clone()) };
        let outer = Tracer::new();
        let _active = outer.activate();
        let z = outer.input(TensorType::scalar(crate::DType::F64)).unwrap();
        let zz = z.clone();
        let f = convert(move |_y: &Var| zz.clone());
        let t = trace_fn(&f, &TreeDef::Tuple(vec![TreeDef::Leaf]), &[z.ty().clone()]).unwrap();
        assert_eq!(t.graph.inputs().len(), 2);
        assert_eq!(t.captures.len(), 1);
        assert_eq!(t.graph.outputs(), &t.graph.inputs()[1..]);
        // A closed trace refuses the same value.
        let err = trace_with(&[], |_| Ok(vec![z.clone()])).unwrap_err();
        assert!(matches!(err, Error::ForeignVar { .. }), "{err}");
        let _ = inner;
    }
}
