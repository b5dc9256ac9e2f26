//! Functions that can be traced: closures over `Var`s and transformed functions.
//!
//! [`Function`] is the one trait every traceable thing implements: a closure
//! `Fn(&Var) -> Var`, `Fn(&Var, &Var) -> Var`, `Fn(&Var, &Var, &Var) -> Var`,
//! the same three returning `Vec<Var>`, or `Fn(&[Var]) -> Vec<Var>`, and later every
//! transform's result (`vmap(f)`, `grad(f)`), so transforms compose. The
//! marker parameter `M` only tells the closure forms apart; inference picks it.
//!
//! Running a function on concrete tensors needs a backend, so `call` lives in
//! the facade crate; here are the pieces it is built from: [`Args`] (the
//! accepted argument forms), [`Outputs`] (the result forms) and [`trace`].

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::shape::TensorType;
use crate::tensor::Tensor;
use crate::trace::{Tracer, Var};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Something that can be traced into a graph.
pub trait Function<M> {
    /// What a call on tensors returns: `Tensor`, `Vec<Tensor>`...
    type Output: Outputs;

    /// The number of arguments it takes, `None` for any number.
    fn arity(&self) -> Option<usize>;

    /// Inlines the function into the trace of `args` (values of the current
    /// trace), returning its outputs in the same trace.
    ///
    /// # Errors
    /// Errors of the function's own ops are recorded in the trace; this
    /// returns errors it detects itself (a wrong number of arguments).
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>>;

    /// The cache of compiled plans, for functions that own one (`jit(f)` and
    /// every transform). A bare closure has none and is traced on every call.
    fn cache(&self) -> Option<&PlanCache> {
        None
    }

    /// A name for error messages.
    fn name(&self) -> String {
        "function".into()
    }

    /// Calls the function on traced values inside another traced function
    /// and returns its first output, like an op: an error is recorded in
    /// the trace (the call that runs the trace returns it) and the result is
    /// poisoned. `vmap(f).invoke(&[&x])`, `softplus.invoke(&[&x])`.
    fn invoke(&self, args: &[&Var]) -> Var {
        let owned: Vec<Var> = args.iter().map(|&v| v.clone()).collect();
        let tracer = args
            .first()
            .map(|a| a.tracer().clone())
            .unwrap_or_else(crate::trace::current_or_detached);
        match self.inline(&owned) {
            Ok(mut outs) if !outs.is_empty() => outs.swap_remove(0),
            Ok(_) => {
                tracer.record(Error::invalid(
                    self.name(),
                    "outputs",
                    "the function returned no output",
                ));
                tracer.poisoned()
            }
            Err(e) => {
                tracer.record(e);
                tracer.poisoned()
            }
        }
    }
}

/// Checks the number of arguments given to a function.
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

/// Marker for `Fn(&Var) -> Var`.
#[derive(Debug)]
pub enum Fn1 {}
/// Marker for `Fn(&Var, &Var) -> Var`.
#[derive(Debug)]
pub enum Fn2 {}
/// Marker for `Fn(&Var, &Var, &Var) -> Var`.
#[derive(Debug)]
pub enum Fn3 {}
/// Marker for `Fn(&Var) -> Vec<Var>`.
#[derive(Debug)]
pub enum Fn1N {}
/// Marker for `Fn(&Var, &Var) -> Vec<Var>`.
#[derive(Debug)]
pub enum Fn2N {}
/// Marker for `Fn(&Var, &Var, &Var) -> Vec<Var>`.
#[derive(Debug)]
pub enum Fn3N {}
/// Marker for `Fn(&[Var]) -> Vec<Var>`.
#[derive(Debug)]
pub enum FnN {}

impl<F: Fn(&Var) -> Var> Function<Fn1> for F {
    type Output = Tensor;
    fn arity(&self) -> Option<usize> {
        Some(1)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity("function", Some(1), args.len())?;
        Ok(vec![self(&args[0])])
    }
}

impl<F: Fn(&Var, &Var) -> Var> Function<Fn2> for F {
    type Output = Tensor;
    fn arity(&self) -> Option<usize> {
        Some(2)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity("function", Some(2), args.len())?;
        Ok(vec![self(&args[0], &args[1])])
    }
}

impl<F: Fn(&Var, &Var, &Var) -> Var> Function<Fn3> for F {
    type Output = Tensor;
    fn arity(&self) -> Option<usize> {
        Some(3)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity("function", Some(3), args.len())?;
        Ok(vec![self(&args[0], &args[1], &args[2])])
    }
}

impl<F: Fn(&Var) -> Vec<Var>> Function<Fn1N> for F {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        Some(1)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity("function", Some(1), args.len())?;
        Ok(self(&args[0]))
    }
}

impl<F: Fn(&Var, &Var) -> Vec<Var>> Function<Fn2N> for F {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        Some(2)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity("function", Some(2), args.len())?;
        Ok(self(&args[0], &args[1]))
    }
}

impl<F: Fn(&Var, &Var, &Var) -> Vec<Var>> Function<Fn3N> for F {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        Some(3)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity("function", Some(3), args.len())?;
        Ok(self(&args[0], &args[1], &args[2]))
    }
}

impl<F: Fn(&[Var]) -> Vec<Var>> Function<FnN> for F {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        None
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        Ok(self(args))
    }
}

/// The forms in which arguments can be passed to a call: `&Tensor`, tuples of
/// `&Tensor` up to four, `&[Tensor]`, `Vec<Tensor>`, `[&Tensor; N]`.
pub trait Args {
    /// The arguments as a list (cheap: tensors share their buffers).
    fn into_tensors(self) -> Vec<Tensor>;
}

impl Args for &Tensor {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.clone()]
    }
}
impl Args for (&Tensor, &Tensor) {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0.clone(), self.1.clone()]
    }
}
impl Args for (&Tensor, &Tensor, &Tensor) {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0.clone(), self.1.clone(), self.2.clone()]
    }
}
impl Args for (&Tensor, &Tensor, &Tensor, &Tensor) {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0.clone(), self.1.clone(), self.2.clone(), self.3.clone()]
    }
}
impl Args for &[Tensor] {
    fn into_tensors(self) -> Vec<Tensor> {
        self.to_vec()
    }
}
impl Args for &Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self.clone()
    }
}
impl Args for Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self
    }
}
impl<const N: usize> Args for [&Tensor; N] {
    fn into_tensors(self) -> Vec<Tensor> {
        self.iter().map(|t| (*t).clone()).collect()
    }
}

/// The forms a call's results come back in.
pub trait Outputs: Sized {
    /// Builds the result from the list of output tensors.
    ///
    /// # Errors
    /// A number of outputs that does not fit the form.
    fn from_tensors(outputs: Vec<Tensor>) -> Result<Self>;
}

impl Outputs for Tensor {
    fn from_tensors(outputs: Vec<Tensor>) -> Result<Self> {
        let n = outputs.len();
        let mut it = outputs.into_iter();
        match (it.next(), n) {
            (Some(t), 1) => Ok(t),
            _ => Err(Error::Arity {
                what: "call".into(),
                kind: "outputs".into(),
                expected: 1,
                got: n,
            }),
        }
    }
}

impl Outputs for Vec<Tensor> {
    fn from_tensors(outputs: Vec<Tensor>) -> Result<Self> {
        Ok(outputs)
    }
}

/// Traces `f` at the given input types into a verified graph.
///
/// # Errors
/// The first error recorded while tracing; a wrong number of arguments.
pub fn trace_types<M, F: Function<M> + ?Sized>(f: &F, inputs: &[TensorType]) -> Result<Graph> {
    check_arity(&f.name(), f.arity(), inputs.len())?;
    trace_with(inputs, |args| f.inline(args))
}

/// Traces `f` on fresh inputs of the given types in a new trace: how
/// transforms build the sub-graphs of the ops they emit (a `map` body).
///
/// # Errors
/// `f`'s error; any error recorded while tracing; an invalid graph.
pub fn trace_with(
    inputs: &[TensorType],
    f: impl FnOnce(&[Var]) -> Result<Vec<Var>>,
) -> Result<Graph> {
    let tracer = Tracer::new();
    let _active = tracer.activate();
    let args = inputs.iter().map(|t| tracer.input(t.clone())).collect::<Result<Vec<_>>>()?;
    let outs = f(&args)?;
    let g = tracer.finish(&outs)?;
    g.verify()?;
    Ok(g)
}

/// Traces `f` at the shapes and dtypes of example arguments.
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// let g = trace(&|x: &Var| x.clone(), &Tensor::zeros(&[3]))?;
/// assert_eq!(g.inputs().len(), 1);
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// # Errors
/// As [`trace_types`].
pub fn trace<M, F: Function<M> + ?Sized>(f: &F, args: impl Args) -> Result<Graph> {
    let types: Vec<TensorType> = args.into_tensors().iter().map(Tensor::ty).collect();
    trace_types(f, &types)
}

/// A thread-safe cache of compiled plans keyed by input signature.
///
/// The plan type belongs to the backend, so entries are type-erased; the
/// backend downcasts them.
#[derive(Debug, Default)]
pub struct PlanCache {
    plans: Mutex<HashMap<Vec<TensorType>, Arc<dyn Any + Send + Sync>>>,
}

impl PlanCache {
    /// An empty cache.
    pub fn new() -> PlanCache {
        PlanCache::default()
    }

    /// The entry for `key`, building it with `make` on a miss.
    ///
    /// # Errors
    /// Whatever `make` returns.
    pub fn get_or_try_insert(
        &self,
        key: &[TensorType],
        make: impl FnOnce() -> Result<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Arc<dyn Any + Send + Sync>> {
        if let Some(p) = self.lock().get(key) {
            return Ok(p.clone());
        }
        let plan = make()?;
        self.lock().insert(key.to_vec(), plan.clone());
        Ok(plan)
    }

    /// The entry whose signature is that of `args`, if any, found without
    /// building the signature (the per-call path of a cached function). A
    /// cache with many signatures answers `None` (use
    /// [`PlanCache::get_or_try_insert`]).
    pub fn get_for(&self, args: &[Tensor]) -> Option<Arc<dyn Any + Send + Sync>> {
        let plans = self.lock();
        if plans.len() > 8 {
            return None;
        }
        let matches = |key: &Vec<TensorType>| {
            key.len() == args.len()
                && key
                    .iter()
                    .zip(args)
                    .all(|(t, a)| t.dtype() == a.dtype() && t.shape() == a.shape())
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

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Vec<TensorType>, Arc<dyn Any + Send + Sync>>> {
        // A panic while holding the lock cannot leave the map half-updated
        // (insert is the only mutation), so a poisoned lock is still usable.
        self.plans.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
