//! The differentiation transforms users call: [`jvp`], [`vjp`], [`grad`],
//! [`value_and_grad`], [`jacfwd`], [`jacrev`] and [`hessian`]. Each wraps a
//! function and is itself a [`Function`], so they compose with each other
//! and with `vmap`: `vmap(grad(loss))` is per-example gradients,
//! `jacfwd(jacrev(f))` a Hessian, `jvp(grad(f))` a Hessian-vector product.
//!
//! `jacfwd` is `vmap` of `jvp` over the standard basis of the input, and
//! `jacrev` is `vmap` of `vjp` over the basis of the output; the primal
//! computation does not depend on the basis, so `vmap` leaves it unbatched
//! and it runs once.

use crate::ad::{jvp_graph, vjp_graph};
use crate::vmap::{vmap_graph, vmap_graph_by_chunks};
use anvil_core::function::{check_arity, trace_types};
use anvil_core::{
    trace_with, Batched, DType, Error, Function, Graph, PlanCache, Result, Tensor, TensorType, Var,
};
use anvil_ops::ad::dense;
use anvil_ops::batching::at_front;
use anvil_ops::constant::Basis;
use anvil_ops::VarExt;
use std::marker::PhantomData;

fn types_of(args: &[Var]) -> Vec<TensorType> {
    args.iter().map(|a| a.ty().clone()).collect()
}

/// The function's arity, required by transforms that split their arguments.
fn fixed_arity<M, F: Function<M>>(f: &F, what: &str) -> Result<usize> {
    f.arity().ok_or_else(|| {
        Error::invalid(
            what,
            "function",
            "needs a function of a fixed number of arguments (not `&[Var]`)",
        )
    })
}

/// Normalizes `argnums` against `n` arguments, checking they are float.
fn check_argnums(what: &str, argnums: &[usize], args: &[Var]) -> Result<()> {
    if argnums.is_empty() {
        return Err(Error::invalid(what, "argnums", "must name at least one argument"));
    }
    for &a in argnums {
        let x = args.get(a).ok_or_else(|| {
            Error::invalid(
                what,
                "argnums",
                format!("argument {a} does not exist (the function takes {})", args.len()),
            )
        })?;
        if !x.dtype().is_float() {
            return Err(Error::dtype(
                what,
                format!("{a} (argnums)"),
                x.dtype(),
                "a float type: only float inputs can be differentiated",
            ));
        }
    }
    Ok(())
}

macro_rules! transform_boilerplate {
    ($name:ident { $($field:ident),* }) => {
        impl<F: Clone, M, O> Clone for $name<F, M, O> {
            fn clone(&self) -> Self {
                $name { f: self.f.clone(), $($field: self.$field.clone(),)* cache: PlanCache::new(), _marker: PhantomData }
            }
        }
        impl<F, M, O> std::fmt::Debug for $name<F, M, O> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))$(.field(stringify!($field), &self.$field))*.finish_non_exhaustive()
            }
        }
    };
}

// ------------------------------------------------------------------- jvp

/// Forward mode; see [`jvp`].
pub struct Jvp<F, M, O = ()> {
    f: F,
    cache: PlanCache,
    _marker: PhantomData<fn() -> (M, O)>,
}
transform_boilerplate!(Jvp {});

/// Forward-mode derivative: `jvp(f)` takes `f`'s arguments followed by one
/// tangent per argument, and returns `f`'s outputs followed by their
/// tangents (the directional derivative of each output along the tangents).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::jvp;
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let v = Tensor::from_vec(vec![1.0, 1.0], &[2])?;
/// let out = jvp(|x: &Var| x.sin()).call((&x, &v))?;
/// assert_eq!(out[1].to_vec::<f64>()?, vec![1.0, 1f64.cos()]); // cos(x) * v
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jvp<M, F: Function<M>>(f: F) -> Jvp<F, M> {
    Jvp { f, cache: PlanCache::new(), _marker: PhantomData }
}

impl<M, F: Function<M>> Function<M> for Jvp<F, M> {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        self.f.arity().map(|n| 2 * n)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        if args.len() % 2 != 0 {
            return Err(Error::invalid(
                "jvp",
                "arguments",
                format!("expected primals then as many tangents, got {} values", args.len()),
            ));
        }
        let n = args.len() / 2;
        check_arity(&self.f.name(), self.f.arity(), n)?;
        let graph = trace_types(&self.f, &types_of(&args[..n]))?;
        let ts: Vec<Option<Var>> = args[n..].iter().cloned().map(Some).collect();
        let (outs, touts) = jvp_graph(&graph, &args[..n], &ts)?;
        let touts: Vec<Var> = touts.iter().zip(&outs).map(|(t, o)| dense(t, o)).collect();
        Ok(outs.into_iter().chain(touts).collect())
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("jvp({})", self.f.name())
    }
}

// ------------------------------------------------------------------- vjp

/// Reverse mode; see [`vjp`].
pub struct Vjp<F, M, O = ()> {
    f: F,
    cache: PlanCache,
    _marker: PhantomData<fn() -> (M, O)>,
}
transform_boilerplate!(Vjp {});

/// Reverse-mode derivative: `vjp(f)` takes `f`'s arguments followed by one
/// cotangent per output, and returns `f`'s outputs followed by the
/// cotangent of each argument (`ct^T J`). Integer arguments get zeros.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::vjp;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let ct = Tensor::scalar(1.0);
/// let out = vjp(|x: &Var| x.square().sum(&[0])).call((&x, &ct))?;
/// assert_eq!(out[1].to_vec::<f64>()?, vec![2.0, 4.0]); // 2x
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn vjp<M, F: Function<M>>(f: F) -> Vjp<F, M> {
    Vjp { f, cache: PlanCache::new(), _marker: PhantomData }
}

impl<M, F: Function<M>> Function<M> for Vjp<F, M> {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        None
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let n = fixed_arity(&self.f, "vjp")?;
        if args.len() < n {
            return Err(Error::Arity {
                what: "vjp".into(),
                kind: "primal arguments".into(),
                expected: n,
                got: args.len(),
            });
        }
        let graph = trace_types(&self.f, &types_of(&args[..n]))?;
        check_arity("vjp cotangents", Some(graph.outputs().len()), args.len() - n)?;
        let cts: Vec<Option<Var>> = args[n..].iter().cloned().map(Some).collect();
        let (outs, in_cts) = vjp_graph(&graph, &args[..n], &cts)?;
        let in_cts: Vec<Var> = in_cts.iter().zip(&args[..n]).map(|(c, x)| dense(c, x)).collect();
        Ok(outs.into_iter().chain(in_cts).collect())
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("vjp({})", self.f.name())
    }
}

// ------------------------------------------------------------------ grad

/// The gradient of a scalar function; see [`grad`].
pub struct Grad<F, M, O> {
    f: F,
    argnums: Vec<usize>,
    with_value: bool,
    cache: PlanCache,
    _marker: PhantomData<fn() -> (M, O)>,
}
transform_boilerplate!(Grad { argnums, with_value });

/// The gradient of a function with one scalar float output, with respect
/// to its first argument (see [`Grad::argnums`] for others). `grad(f)` takes
/// `f`'s arguments and returns a tensor of the argument's shape.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::grad;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let g = grad(|x: &Var| (x * x).sum(&[0])).call(&x)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![2.0, 4.0]);
/// // Third derivative of sin at 0.5: -cos(0.5).
/// let d3 = grad(grad(grad(|x: &Var| x.sin()))).call(&Tensor::scalar(0.5))?;
/// assert!((d3.item()? + 0.5f64.cos()).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// Calling it on a function whose output is not a scalar, or with respect to
/// an integer argument, is an `Err` naming the shape or the argument.
pub fn grad<M, F: Function<M>>(f: F) -> Grad<F, M, Tensor> {
    Grad { f, argnums: vec![0], with_value: false, cache: PlanCache::new(), _marker: PhantomData }
}

/// The value and the gradient of a scalar function: returns `[f(x),
/// df/dx_a for each a in argnums]`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::value_and_grad;
/// let x = Tensor::from_vec(vec![3.0], &[1])?;
/// let out = value_and_grad(|x: &Var| x.square().sum_all()).call(&x)?;
/// assert_eq!((out[0].item()?, out[1].to_vec::<f64>()?), (9.0, vec![6.0]));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn value_and_grad<M, F: Function<M>>(f: F) -> Grad<F, M, Vec<Tensor>> {
    Grad { f, argnums: vec![0], with_value: true, cache: PlanCache::new(), _marker: PhantomData }
}

impl<F, M, O> Grad<F, M, O> {
    /// Differentiates with respect to these arguments; the result lists one
    /// gradient per entry (after the value, for `value_and_grad`).
    pub fn argnums(self, argnums: &[usize]) -> Grad<F, M, Vec<Tensor>> {
        Grad {
            f: self.f,
            argnums: argnums.to_vec(),
            with_value: self.with_value,
            cache: PlanCache::new(),
            _marker: PhantomData,
        }
    }
}

impl<M, F: Function<M>, O: anvil_core::Outputs> Function<M> for Grad<F, M, O> {
    type Output = O;
    fn arity(&self) -> Option<usize> {
        self.f.arity()
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let what = if self.with_value { "value_and_grad" } else { "grad" };
        check_argnums(what, &self.argnums, args)?;
        let graph = trace_types(&self.f, &types_of(args))?;
        let out = match graph.output_types()[..] {
            [ref t] if t.shape().is_empty() && t.dtype().is_float() => t.clone(),
            ref ts => {
                let shapes: Vec<&[usize]> = ts.iter().map(|t| t.shape()).collect();
                return Err(Error::shape(
                    what,
                    &shapes,
                    format!(
                        "needs a function with one scalar float output; it returns {}",
                        ts.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        };
        let one = args[0].scalar_like(1.0).cast(out.dtype());
        let (outs, in_cts) = vjp_graph(&graph, args, &[Some(one)])?;
        let grads = self.argnums.iter().map(|&a| dense(&in_cts[a], &args[a]));
        Ok(if self.with_value { outs.into_iter().chain(grads).collect() } else { grads.collect() })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("grad({})", self.f.name())
    }
}

// ------------------------------------------------------------ Jacobians

/// A Jacobian by forward or reverse mode; see [`jacfwd`] and [`jacrev`].
pub struct Jacobian<F, M, O> {
    f: F,
    argnums: Vec<usize>,
    forward: bool,
    chunk_size: Option<usize>,
    cache: PlanCache,
    _marker: PhantomData<fn() -> (M, O)>,
}
transform_boilerplate!(Jacobian { argnums, forward, chunk_size });

/// The Jacobian by forward mode, `vmap` of `jvp` over the standard basis of
/// the input: for an output of shape `S` and an input of shape `T`, a
/// tensor of shape `S ++ T`. Best when inputs are fewer than outputs.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::jacfwd;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// // f(x) = [x0 * x1, sin(x0)]
/// let f = |x: &Var| stack(&[&(x.at(0, 0) * x.at(0, 1)), &x.at(0, 0).sin()], 0);
/// let j = jacfwd(f).call(&x)?;
/// assert_eq!(j.shape(), &[2, 2]);
/// assert_eq!(j.to_vec::<f64>()?, vec![2.0, 1.0, 1f64.cos(), 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// With several outputs or [`Jacobian::argnums`], the result lists one
/// Jacobian per (output, argument) pair, outputs first.
pub fn jacfwd<M, F: Function<M>>(f: F) -> Jacobian<F, M, F::Output> {
    Jacobian {
        f,
        argnums: vec![0],
        forward: true,
        chunk_size: None,
        cache: PlanCache::new(),
        _marker: PhantomData,
    }
}

/// The Jacobian by reverse mode, `vmap` of `vjp` over the standard basis of
/// the output; same result as [`jacfwd`]. Best when outputs are fewer than
/// inputs.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::jacrev;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let j = jacrev(|x: &Var| x.square()).call(&x)?;
/// assert_eq!(j.to_vec::<f64>()?, vec![2.0, 0.0, 0.0, 4.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jacrev<M, F: Function<M>>(f: F) -> Jacobian<F, M, F::Output> {
    Jacobian {
        f,
        argnums: vec![0],
        forward: false,
        chunk_size: None,
        cache: PlanCache::new(),
        _marker: PhantomData,
    }
}

/// The Hessian, `jacfwd(jacrev(f))`: for a scalar function of `x` of shape
/// `T`, a tensor of shape `T ++ T`.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::hessian;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// // f = x0^2 x1 -> H = [[2 x1, 2 x0], [2 x0, 0]]
/// let h = hessian(|x: &Var| x.at(0, 0).square() * x.at(0, 1)).call(&x)?;
/// assert_eq!(h.to_vec::<f64>()?, vec![4.0, 2.0, 2.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn hessian<M, F: Function<M>>(f: F) -> Jacobian<Jacobian<F, M, F::Output>, M, F::Output> {
    jacfwd(jacrev(f))
}

impl<F, M, O> Jacobian<F, M, O> {
    /// Differentiates with respect to these arguments (default: the first);
    /// the result lists one Jacobian per (output, argument) pair.
    pub fn argnums(self, argnums: &[usize]) -> Jacobian<F, M, Vec<Tensor>> {
        Jacobian {
            f: self.f,
            argnums: argnums.to_vec(),
            forward: self.forward,
            chunk_size: self.chunk_size,
            cache: PlanCache::new(),
            _marker: PhantomData,
        }
    }

    /// Evaluates the basis in chunks of `k` directions to bound memory
    /// (same results).
    pub fn chunk_size(mut self, k: usize) -> Self {
        self.chunk_size = Some(k);
        self
    }
}

/// Rows `start..start + len` of `eye(n)` as tangents of type `ty` (`n =
/// numel(ty)`), the basis axis last: `shape ++ [len]` (`[len] ++ shape`
/// with `front`). With the axis last, a chain of elementwise ops keeps it
/// last and the Jacobian `[out..., in...]` needs no transpose at the end.
/// A [`Basis`] op, built per chunk: never a dense constant.
fn basis(like: &Var, ty: &TensorType, start: usize, len: usize, front: bool) -> Var {
    like.tracer().apply(Box::new(Basis::seed(ty, start, len, front)), &[])
}

/// `graph` (whose last input is the seed) vmapped over the basis of `ty`,
/// in chunks of `chunk` directions, the seed of each chunk built for it.
fn over_basis(
    graph: &Graph,
    args: &[Var],
    ty: &TensorType,
    front: bool,
    chunk: Option<usize>,
) -> Result<Vec<Batched>> {
    let size = ty.numel();
    let seed_axis = if front { 0 } else { ty.rank() };
    let like = args.first().ok_or_else(|| Error::invalid("jacobian", "arguments", "none given"))?;
    let with_seed = |start: usize, len: usize| -> Result<Vec<Batched>> {
        let seed = Batched::new(basis(like, ty, start, len, front), Some(seed_axis));
        Ok(args.iter().map(|a| Batched::new(a.clone(), None)).chain([seed]).collect())
    };
    match chunk {
        // Chunks go through a batch-in-front concatenation; a single batch
        // keeps the seed's axis where the ops leave it.
        Some(k) if k < size => vmap_graph_by_chunks(graph, size, k, with_seed),
        Some(0) => Err(Error::invalid("jacobian", "chunk_size", "must be at least 1")),
        _ => vmap_graph(graph, &with_seed(0, size)?, size),
    }
}

/// A batched result over a basis of `basis_shape` → the Jacobian block
/// `[out..., in...]`: for `jacfwd` the basis axis (the input's) goes last,
/// for `jacrev` (the output's) first.
fn jacobian_block(b: &Batched, n: usize, basis_shape: &[usize], forward: bool) -> Var {
    let to_i64 = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let elem = b.logical_shape();
    let mut shape = if forward { to_i64(&elem) } else { to_i64(basis_shape) };
    shape.extend(if forward { to_i64(basis_shape) } else { to_i64(&elem) });
    let moved = match b.axis {
        Some(k) if forward => {
            anvil_ops::batching::move_axis(&b.var, k, b.var.rank().saturating_sub(1))
        }
        _ if forward => {
            let mut target = elem.clone();
            target.push(n);
            b.var.unsqueeze(-1).broadcast_to(&target)
        }
        _ => at_front(b, n),
    };
    moved.reshape(&shape)
}

impl<M, F: Function<M>, O: anvil_core::Outputs> Function<M> for Jacobian<F, M, O> {
    type Output = O;
    fn arity(&self) -> Option<usize> {
        self.f.arity()
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let what = if self.forward { "jacfwd" } else { "jacrev" };
        check_argnums(what, &self.argnums, args)?;
        let types = types_of(args);
        let graph = trace_types(&self.f, &types)?;
        let out_types = graph.output_types();
        let mut jac: Vec<Vec<Var>> = vec![Vec::new(); out_types.len()];
        if self.forward {
            for &a in &self.argnums {
                let tangent_fn = jvp_direction(&graph, &types, a)?;
                let size = types[a].numel();
                let outs = over_basis(&tangent_fn, args, &types[a], false, self.chunk_size)?;
                for (k, o) in outs.iter().enumerate() {
                    jac[k].push(jacobian_block(o, size, types[a].shape(), true));
                }
            }
        } else {
            for (k, out) in out_types.iter().enumerate() {
                if !out.dtype().is_float() {
                    return Err(Error::dtype(
                        what,
                        format!("output {k}"),
                        out.dtype(),
                        "a float type",
                    ));
                }
                let ct_fn = vjp_direction(&graph, &types, k, &self.argnums)?;
                let size = out.numel();
                let outs = over_basis(&ct_fn, args, out, true, self.chunk_size)?;
                for o in &outs {
                    jac[k].push(jacobian_block(o, size, out.shape(), false));
                }
            }
        }
        Ok(jac.into_iter().flatten().collect())
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("{}({})", if self.forward { "jacfwd" } else { "jacrev" }, self.f.name())
    }
}

/// A graph of `(args..., v)` returning every output's tangent along `v`,
/// a tangent of argument `a` (zeros where an output does not depend on it).
fn jvp_direction(graph: &Graph, types: &[TensorType], a: usize) -> Result<Graph> {
    let n = types.len();
    let mut all = types.to_vec();
    all.push(types[a].clone());
    trace_with(&all, |vars| {
        let ts: Vec<Option<Var>> = (0..n).map(|i| (i == a).then(|| vars[n].clone())).collect();
        let (outs, touts) = jvp_graph(graph, &vars[..n], &ts)?;
        Ok(touts.iter().zip(&outs).map(|(t, o)| dense_float(t, o)).collect())
    })
}

/// A graph of `(args..., u)` returning the cotangent of each argument in
/// `argnums` for cotangent `u` on output `k`.
fn vjp_direction(
    graph: &Graph,
    types: &[TensorType],
    k: usize,
    argnums: &[usize],
) -> Result<Graph> {
    let n = types.len();
    let mut all = types.to_vec();
    all.push(graph.output_types()[k].clone());
    trace_with(&all, |vars| {
        let cts: Vec<Option<Var>> =
            (0..graph.outputs().len()).map(|j| (j == k).then(|| vars[n].clone())).collect();
        let (_, in_cts) = vjp_graph(graph, &vars[..n], &cts)?;
        Ok(argnums.iter().map(|&a| dense(&in_cts[a], &vars[a])).collect())
    })
}

/// A tangent, or zeros; an integer output's "tangent" is a float zero, so
/// that its Jacobian block exists (and is zero).
fn dense_float(t: &Option<Var>, o: &Var) -> Var {
    match t {
        Some(t) => t.clone(),
        None if o.dtype().is_float() => o.zeros_like(),
        None => o.zeros_like().cast(DType::F64),
    }
}
