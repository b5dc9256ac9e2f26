//! The differentiation transforms users call: [`jvp`], [`grad`],
//! [`value_and_grad`], [`jacfwd`], [`jacrev`] and [`hessian`]. Each wraps a
//! function and is itself a [`Function`], so they compose with each other
//! and with `vmap`: `vmap(grad(loss))` is per-example gradients,
//! `jacfwd(jacrev(f))` a Hessian, `jvp(grad(f))` a Hessian-vector product.
//! (`vjp`, which returns a pullback to call on cotangents, and `linearize`
//! run the primal computation once, so they live in the facade.)
//!
//! Arguments and results are trees. A derivative is taken with respect to
//! the first argument, or those chosen with [`Grad::argnum`] (one, typed:
//! the gradient has that argument's type) or [`Grad::argnums`] (several: a
//! [`Dyn`] tuple with one entry per chosen argument). Gradients come back
//! in their argument's structure: `grad` of a loss of a struct of
//! parameters is that struct. With `has_aux`, the function returns a pair
//! `(value, aux)` and `aux` is passed through, not differentiated.
//!
//! `jacfwd` is `vmap` of `jvp` over the standard basis of each input leaf,
//! and `jacrev` is `vmap` of `vjp` over the basis of each output leaf; the
//! primal computation does not depend on the basis, so `vmap` leaves it
//! unbatched and it runs once. A Jacobian has the outputs' structure with
//! every leaf replaced by the chosen arguments' structure, as in JAX.

use crate::ad::{jvp_graph, vjp_graph_wrt};
use crate::vmap::{finish_chunks, looped_chunks, vmap_graph, vmap_graph_by_chunks};
use anvil_core::function::{Apply, Args, ToVar};
use anvil_core::replay::inline_graph;
use anvil_core::shape::{dim_numel, fmt_dim, is_symbolic};
use anvil_core::tree::Flatten;
use anvil_core::tree::Nth;
use anvil_core::{
    trace_fn_for, trace_with, Batched, DType, Dyn, Error, Function, Graph, IntoFunction, PlanCache,
    Result, TensorType, Traced, TreeDef, Var,
};
use anvil_ops::ad::dense;
use anvil_ops::batching::at_front;
use anvil_ops::constant::Basis;
use anvil_ops::VarExt;
use std::fmt::Debug;
use std::marker::PhantomData;

pub(crate) fn types_of(args: &[Var]) -> Vec<TensorType> {
    args.iter().map(|a| a.ty().clone()).collect()
}

/// The arguments followed by the values the traced function captured
/// from the trace it was called in (passed through, never differentiated).
pub(crate) fn with_captures(args: &[Var], captures: &[Var]) -> Vec<Var> {
    args.iter().chain(captures).cloned().collect()
}

// ------------------------------------------------------------- selectors

/// Differentiates with respect to argument `N` (the default is `0`): the
/// derivative has that argument's type. See [`Grad::argnum`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Argnum<const N: usize>;

/// Differentiates with respect to several arguments: the derivative is a
/// [`Dyn`] tuple with one entry per argument, in the order given. See
/// [`Grad::argnums`].
#[derive(Clone, Debug)]
pub struct Argnums(Vec<usize>);

impl Argnums {
    pub(crate) fn new(argnums: &[usize]) -> Argnums {
        Argnums(argnums.to_vec())
    }
}

/// The arguments a derivative is taken with respect to, and the type the
/// derivative has: [`Argnum`] or [`Argnums`].
pub trait Selector<A: Args>: Clone + Debug {
    /// The derivative's type (per output leaf).
    type Out: Traced;
    /// The chosen arguments.
    fn indices(&self) -> &[usize];
    /// Whether the derivative is one argument's (not a tuple of them).
    fn single(&self) -> bool;
}

impl<A: Args + Nth<N>, const N: usize> Selector<A> for Argnum<N> {
    type Out = <A as Nth<N>>::Out;
    fn indices(&self) -> &[usize] {
        &[N]
    }
    fn single(&self) -> bool {
        true
    }
}

impl<A: Args> Selector<A> for Argnums {
    type Out = Dyn<Var>;
    fn indices(&self) -> &[usize] {
        &self.0
    }
    fn single(&self) -> bool {
        false
    }
}

/// The chosen arguments' structure and their leaves' indices among all
/// leaves.
pub(crate) struct Selected {
    pub(crate) def: TreeDef,
    pub(crate) leaves: Vec<usize>,
}

/// The leaves of arguments `indices` of arguments of structure `def`,
/// checked to be float.
pub(crate) fn select(
    what: &str,
    indices: &[usize],
    single: bool,
    def: &TreeDef,
    args: &[Var],
) -> Result<Selected> {
    let dtypes: Vec<DType> = args.iter().map(Var::dtype).collect();
    select_dtypes(what, indices, single, def, &dtypes)
}

/// [`select`] given the leaves' dtypes.
pub(crate) fn select_dtypes(
    what: &str,
    indices: &[usize],
    single: bool,
    def: &TreeDef,
    args: &[DType],
) -> Result<Selected> {
    if indices.is_empty() {
        return Err(Error::invalid(what, "argnums", "must name at least one argument"));
    }
    let children = def.children();
    let mut starts = Vec::with_capacity(children.len() + 1);
    starts.push(0);
    for c in &children {
        starts.push(starts.last().copied().unwrap_or(0) + c.num_leaves());
    }
    let mut defs = Vec::new();
    let mut leaves = Vec::new();
    for &a in indices {
        let child = children.get(a).ok_or_else(|| {
            Error::invalid(
                what,
                "argnums",
                format!("argument {a} does not exist (the function takes {})", children.len()),
            )
        })?;
        for leaf in starts[a]..starts[a + 1] {
            let x = args.get(leaf).copied().unwrap_or(DType::Bool);
            if !x.is_float() {
                return Err(Error::dtype(
                    what,
                    format!("{a} (argnums)"),
                    x,
                    "a float type: only float inputs can be differentiated",
                ));
            }
            leaves.push(leaf);
        }
        defs.push((*child).clone());
    }
    let def = if single && defs.len() == 1 { defs.swap_remove(0) } else { TreeDef::Tuple(defs) };
    Ok(Selected { def, leaves })
}

/// A mask of `n` entries, true at `leaves`.
pub(crate) fn chosen(leaves: &[usize], n: usize) -> Vec<bool> {
    let mut mask = vec![false; n];
    leaves.iter().for_each(|&i| mask[i] = true);
    mask
}

// ----------------------------------------------------------------- kinds

/// A derivative alone (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;
/// The value with the derivative (`value_and_grad`).
#[derive(Clone, Copy, Debug, Default)]
pub struct WithValue;
/// The function returns `(value, aux)`; `aux` comes back with the derivative.
#[derive(Clone, Copy, Debug, Default)]
pub struct HasAux;
/// `value_and_grad` with `has_aux`: `((value, aux), gradient)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ValueAux;

/// What a gradient transform returns, for a function returning `O` and a
/// gradient of type `G`.
pub trait GradKind<O: Traced, G: Traced>: Copy + Debug + Default {
    /// The result.
    type Out: Traced;
    /// Whether the value comes back too.
    const VALUE: bool;
    /// Whether the function returns `(value, aux)`.
    const AUX: bool;
}

impl<O: Traced, G: Traced> GradKind<O, G> for Plain {
    type Out = G;
    const VALUE: bool = false;
    const AUX: bool = false;
}
impl<O: Traced, G: Traced> GradKind<O, G> for WithValue {
    type Out = (O, G);
    const VALUE: bool = true;
    const AUX: bool = false;
}
impl<V: Traced, X: Traced, G: Traced> GradKind<(V, X), G> for HasAux {
    type Out = (G, X);
    const VALUE: bool = false;
    const AUX: bool = true;
}
impl<V: Traced, X: Traced, G: Traced> GradKind<(V, X), G> for ValueAux {
    type Out = ((V, X), G);
    const VALUE: bool = true;
    const AUX: bool = true;
}

/// What a Jacobian transform returns, for a function returning `O` and
/// arguments chosen of type `G`.
pub trait JacobianKind<O: Traced, G: Traced>: Copy + Debug + Default {
    /// The result.
    type Out: Traced;
    /// Whether the function returns `(value, aux)`.
    const AUX: bool;
}

impl<O: Traced, G: Traced> JacobianKind<O, G> for Plain {
    type Out = O::Nest<G>;
    const AUX: bool = false;
}
impl<Y: Traced, X: Traced, G: Traced> JacobianKind<(Y, X), G> for HasAux {
    type Out = (Y::Nest<G>, X);
    const AUX: bool = true;
}

/// The kind with `has_aux` added.
pub trait AddAux {
    /// `Plain` → `HasAux`, `WithValue` → `ValueAux`.
    type Aux: Copy + Debug + Default;
}
impl AddAux for Plain {
    type Aux = HasAux;
}
impl AddAux for WithValue {
    type Aux = ValueAux;
}

/// The part of the output that is differentiated: its structure and
/// number of leaves (the leading ones), and the auxiliary part's structure.
fn split_aux(what: &str, out: &TreeDef, aux: bool) -> Result<(TreeDef, usize, Option<TreeDef>)> {
    if !aux {
        return Ok((out.clone(), out.num_leaves(), None));
    }
    match out {
        TreeDef::Tuple(c) if c.len() == 2 => {
            Ok((c[0].clone(), c[0].num_leaves(), Some(c[1].clone())))
        }
        d => Err(Error::invalid(
            what,
            "has_aux",
            format!("the function must return a pair (value, aux); it returns {}", d.describe()),
        )),
    }
}

macro_rules! transform_boilerplate {
    ($name:ident { $($field:ident),* }) => {
        impl<F: Clone, S: Clone, K: Copy> Clone for $name<F, S, K> {
            fn clone(&self) -> Self {
                $name { f: self.f.clone(), sel: self.sel.clone(), $($field: self.$field.clone(),)* cache: PlanCache::new(), kind: PhantomData }
            }
        }
        impl<F, S: Debug, K> Debug for $name<F, S, K> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).field("argnums", &self.sel)$(.field(stringify!($field), &self.$field))*.finish_non_exhaustive()
            }
        }
        impl<F, S, K> $name<F, S, K> {
            /// Differentiates with respect to argument `N` (default `0`):
            /// the derivative has that argument's type.
            pub fn argnum<const N: usize>(self) -> $name<F, Argnum<N>, K> {
                $name { f: self.f, sel: Argnum::<N>, $($field: self.$field,)* cache: PlanCache::new(), kind: PhantomData }
            }

            /// Differentiates with respect to these arguments: the
            /// derivative is a [`Dyn`] tuple with one entry per argument
            /// (take it apart with [`Dyn::part`]).
            pub fn argnums(self, argnums: &[usize]) -> $name<F, Argnums, K> {
                $name { f: self.f, sel: Argnums(argnums.to_vec()), $($field: self.$field,)* cache: PlanCache::new(), kind: PhantomData }
            }

            /// The function returns a pair `(value, aux)`: the value is
            /// differentiated, `aux` comes back beside the derivative as it
            /// is (`has_aux=True` in JAX).
            pub fn has_aux(self) -> $name<F, S, K::Aux>
            where
                K: AddAux,
            {
                $name { f: self.f, sel: self.sel, $($field: self.$field,)* cache: PlanCache::new(), kind: PhantomData }
            }
        }
    };
}

// ------------------------------------------------------------------- jvp

/// Forward mode; see [`jvp`].
pub struct Jvp<F> {
    f: F,
    cache: PlanCache,
}

impl<F: Clone> Clone for Jvp<F> {
    fn clone(&self) -> Self {
        Jvp { f: self.f.clone(), cache: PlanCache::new() }
    }
}

impl<F> Debug for Jvp<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Jvp")
    }
}

/// Forward-mode derivative (`jax.jvp`): `jvp(f)` takes a pair `(primals,
/// tangents)` — `f`'s arguments as a tuple, and a tuple of the same
/// structure with a tangent, or `None` (no tangent: a symbolic zero), per
/// leaf; for a function of one argument, the argument and its tangent as
/// they are — and returns `(outputs, output tangents)`: the directional
/// derivative of each output along the tangents.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![0.0, 1.0], &[2])?;
/// let v = Tensor::from_vec(vec![1.0, 1.0], &[2])?;
/// let (y, ty) = jvp(|x: &Var| x.sin()).eval((&x, &v))?; // or ((&x,), (&v,))
/// assert_eq!(ty.to_vec::<f64>()?, vec![1.0, 1f64.cos()]); // cos(x) * v
/// // No tangent for the second argument: the derivative along x alone.
/// let w = Tensor::scalar(3.0);
/// let (_, t) = jvp(|x: &Var, w: &Var| x * w).eval(((&x, &w), (Some(&v), None::<&Tensor>)))?;
/// assert_eq!(t.to_vec::<f64>()?, vec![3.0, 3.0]);
/// # let _ = y;
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jvp<M, F: IntoFunction<M>>(f: F) -> Jvp<F::Func> {
    Jvp { f: f.into_function(), cache: PlanCache::new() }
}

/// For each primal leaf of `primal`, the index of its tangent among the
/// leaves of `tangent` (a tree of the same structure with `None` for no
/// tangent; a leaf may stand for `Some(leaf)`).
fn tangent_slots(
    primal: &TreeDef,
    tangent: &TreeDef,
    next: &mut usize,
    out: &mut Vec<Option<usize>>,
) -> Result<()> {
    match (primal, tangent) {
        (_, TreeDef::None) => out.extend(std::iter::repeat_n(None, primal.num_leaves())),
        (TreeDef::Leaf, TreeDef::Leaf) => {
            out.push(Some(*next));
            *next += 1;
        }
        (TreeDef::Leaf, TreeDef::Some(t)) => tangent_slots(primal, t, next, out)?,
        (p, TreeDef::Some(t)) if !matches!(p, TreeDef::Some(_)) => tangent_slots(p, t, next, out)?,
        (p, t) if !matches!(p, TreeDef::Leaf) && p.children().len() == t.children().len() => {
            for (p, t) in p.children().into_iter().zip(t.children()) {
                tangent_slots(p, t, next, out)?;
            }
        }
        (p, t) => {
            return Err(Error::invalid(
                "jvp",
                "tangents",
                format!("have the structure {}; the primals have {}", t.describe(), p.describe()),
            ))
        }
    }
    Ok(())
}

impl<F: Function> Function for Jvp<F> {
    type Args = (F::Args, <F::Args as Traced>::Nest<Option<Var>>);
    type Output = (F::Output, F::Output);
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let (pdef, tdef) = match def {
            TreeDef::Tuple(c) if c.len() == 2 => (&c[0], &c[1]),
            d => {
                return Err(Error::invalid(
                    "jvp",
                    "arguments",
                    format!("expected a pair (primals, tangents), got {}", d.describe()),
                ))
            }
        };
        // One argument may be given as itself, as to `eval`: `(&x, &v)`.
        let arity = <F::Args as anvil_core::function::Args>::ARITY;
        let pdef = &anvil_core::function::fit_args("jvp primals", pdef.clone(), arity)?;
        let tdef = &anvil_core::function::fit_args("jvp tangents", tdef.clone(), arity)?;
        let n = pdef.num_leaves();
        let mut slots = Vec::with_capacity(n);
        tangent_slots(pdef, tdef, &mut 0, &mut slots)?;
        let (primals, tangents) = args.split_at(n.min(args.len()));
        let mut ts: Vec<Option<Var>> = Vec::with_capacity(n);
        for (i, (p, slot)) in primals.iter().zip(&slots).enumerate() {
            let t = slot.map(|k| tangents[k].clone());
            if let Some(t) = &t {
                if t.ty() != p.ty() {
                    return Err(Error::invalid(
                        "jvp",
                        format!("tangent of leaf {i}"),
                        format!("has type {}; the primal is {}", t.ty(), p.ty()),
                    ));
                }
            }
            // An integer primal has no tangent: one given (of its type) is ignored.
            ts.push(t.filter(|_| p.dtype().is_float()));
        }
        let t = trace_fn_for(&self.f, pdef, &types_of(primals), primals)?;
        ts.extend(t.captures.iter().map(|_| None));
        let (outs, touts) = jvp_graph(&t.graph, &with_captures(primals, &t.captures), &ts)?;
        let touts: Vec<Var> = touts.iter().zip(&outs).map(|(t, o)| dense(t, o)).collect();
        let def = TreeDef::Tuple(vec![t.output.clone(), t.output]);
        Ok(Dyn { def, leaves: outs.into_iter().chain(touts).collect() })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("jvp({})", self.f.name())
    }
}

/// `jax.jvp(f, primals, tangents)` inside a traced function: the output
/// of `f` and its directional derivative along `tangents`, as two values
/// of the current trace — `let (y, dy) = jvp_at(f, x, v);` — with no pair
/// of tuples to build and no `Result` to unwrap: an error (tangents that
/// do not fit the primals, an op without a jvp rule) is recorded in the
/// trace, the call that runs it returns it, and both values are poisoned.
///
/// `primals` and `tangents` are given as to `eval`: one argument as itself
/// (`&x`, `&v`), several as tuples of the same structure (`(&x, &w)`,
/// `(&v, &u)`), `None` for no tangent (a symbolic zero:
/// `(Some(&v), None::<&Var>)`). Leaves are traced values or tensors
/// (constants). For a function with several outputs, use
/// `jvp(f).apply((primals, tangents))`, which returns a `Result` of the
/// two trees.
///
/// Because the result is traced, it composes: `grad` of a function that
/// calls `jvp_at`, or `jvp_at` of a `grad`, is a Hessian-vector product.
///
/// ```
/// use anvil::prelude::*;
/// let f = |x: &Var| x.sin().sum_all();
/// // Forward over reverse: H v = d/dε ∇f(x + ε v), here diag(-sin x) v.
/// let hvp = |x: &Var, v: &Var| jvp_at(grad(f), x, v).1;
/// let (x, v) = (Tensor::from_vec(vec![0.5, 1.0], &[2])?, Tensor::from_vec(vec![1.0, 2.0], &[2])?);
/// let hv = hvp.eval((&x, &v))?;
/// assert_eq!(hv.to_vec::<f64>()?, vec![-(0.5f64.sin()), -2.0 * 1f64.sin()]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jvp_at<M, F, L, P, T>(f: F, primals: P, tangents: T) -> (Var, Var)
where
    F: IntoFunction<M, Output = Var>,
    L: ToVar,
    P: Flatten<L>,
    T: Flatten<L>,
{
    let mut first: Option<Var> = None;
    primals.for_each_leaf(&mut |l| {
        if first.is_none() {
            first = Some(l.to_var());
        }
    });
    let tracer = first.map_or_else(anvil_core::trace::current_or_detached, |v| v.tracer().clone());
    match jvp(f).apply((primals, tangents)) {
        Ok(pair) => pair,
        Err(e) => {
            tracer.record(e);
            (tracer.poisoned(), tracer.poisoned())
        }
    }
}

// ------------------------------------------------------------------ grad

/// The gradient of a scalar function; see [`grad`].
pub struct Grad<F, S = Argnum<0>, K = Plain> {
    f: F,
    sel: S,
    cache: PlanCache,
    kind: PhantomData<fn() -> K>,
}
transform_boilerplate!(Grad {});

/// The gradient of a function with one scalar float output, with respect
/// to its first argument (see [`Grad::argnum`], [`Grad::argnums`] for
/// others, [`Grad::has_aux`] for a function that returns more). The
/// gradient has the argument's type: a tensor of its shape, or a struct of
/// parameters for a loss of one.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let g = grad(|x: &Var| (x * x).sum(&[0])).eval(&x)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![2.0, 4.0]);
/// // Third derivative of sin at 0.5: -cos(0.5).
/// let d3 = grad(grad(grad(|x: &Var| x.sin()))).eval(&Tensor::scalar(0.5))?;
/// assert!((d3.item()? + 0.5f64.cos()).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// Calling it on a function whose output is not a scalar, or with respect to
/// an integer argument, is an `Err` naming the shape or the argument.
pub fn grad<M, F: IntoFunction<M>>(f: F) -> Grad<F::Func> {
    Grad { f: f.into_function(), sel: Argnum, cache: PlanCache::new(), kind: PhantomData }
}

/// The value and the gradient of a scalar function: `(f(x), df/dx)`.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![3.0], &[1])?;
/// let (v, g) = value_and_grad(|x: &Var| x.square().sum_all()).eval(&x)?;
/// assert_eq!((v.item()?, g.to_vec::<f64>()?), (9.0, vec![6.0]));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn value_and_grad<M, F: IntoFunction<M>>(f: F) -> Grad<F::Func, Argnum<0>, WithValue> {
    Grad { f: f.into_function(), sel: Argnum, cache: PlanCache::new(), kind: PhantomData }
}

/// The one scalar float output a gradient needs, named in the error.
pub(crate) fn scalar_output<'a>(what: &str, types: &'a [TensorType]) -> Result<&'a TensorType> {
    match types {
        [t] if t.shape().is_empty() && t.dtype().is_float() => Ok(t),
        ts => {
            let shapes: Vec<&[usize]> = ts.iter().map(|t| t.shape()).collect();
            Err(Error::shape(
                what,
                &shapes,
                format!(
                    "needs a function with one scalar float output; it returns {}",
                    ts.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ),
            ))
        }
    }
}

impl<F, S, K> Function for Grad<F, S, K>
where
    F: Function,
    S: Selector<F::Args>,
    K: GradKind<F::Output, S::Out>,
{
    type Args = F::Args;
    type Output = K::Out;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let what = if K::VALUE { "value_and_grad" } else { "grad" };
        let sel = select(what, self.sel.indices(), self.sel.single(), def, args)?;
        let t = trace_fn_for(&self.f, def, &types_of(args), args)?;
        let (_, ny, aux) = split_aux(what, &t.output, K::AUX)?;
        let types = t.graph.output_types();
        let out = scalar_output(what, &types[..ny])?;
        let all = with_captures(args, &t.captures);
        let mut cts = vec![None; types.len()];
        cts[0] = Some(args.first().unwrap_or(&all[0]).scalar_like(1.0).cast(out.dtype()));
        let wrt = chosen(&sel.leaves, all.len());
        let (outs, in_cts) = vjp_graph_wrt(&t.graph, &all, &cts, &wrt)?;
        let grads: Vec<Var> = sel.leaves.iter().map(|&a| dense(&in_cts[a], &args[a])).collect();
        Ok(match (K::VALUE, aux) {
            (false, None) => Dyn { def: sel.def, leaves: grads },
            (false, Some(aux)) => Dyn {
                def: TreeDef::Tuple(vec![sel.def, aux]),
                leaves: grads.into_iter().chain(outs.into_iter().skip(ny)).collect(),
            },
            (true, _) => Dyn {
                def: TreeDef::Tuple(vec![t.output, sel.def]),
                leaves: outs.into_iter().chain(grads).collect(),
            },
        })
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
pub struct Jacobian<F, S = Argnum<0>, K = Plain> {
    f: F,
    sel: S,
    forward: bool,
    chunk_size: Option<usize>,
    cache: PlanCache,
    kind: PhantomData<fn() -> K>,
}
transform_boilerplate!(Jacobian { forward, chunk_size });

/// The Jacobian by forward mode, `vmap` of `jvp` over the standard basis of
/// the input: for an output of shape `S` and an input of shape `T`, a
/// tensor of shape `S ++ T`. Best when inputs are fewer than outputs.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// // f(x) = [x0 * x1, sin(x0)]
/// let f = |x: &Var| stack(&[&(x.index_axis(0, 0) * x.index_axis(0, 1)), &x.index_axis(0, 0).sin()], 0);
/// let j = jacfwd(f).eval(&x)?;
/// assert_eq!(j.shape(), &[2, 2]);
/// assert_eq!(j.to_vec::<f64>()?, vec![2.0, 1.0, 1f64.cos(), 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// For trees of outputs and arguments, the result has the outputs'
/// structure with each leaf replaced by the chosen arguments' structure
/// (one block per pair of leaves), as in JAX.
pub fn jacfwd<M, F: IntoFunction<M>>(f: F) -> Jacobian<F::Func> {
    Jacobian {
        f: f.into_function(),
        sel: Argnum,
        forward: true,
        chunk_size: None,
        cache: PlanCache::new(),
        kind: PhantomData,
    }
}

/// The Jacobian by reverse mode, `vmap` of `vjp` over the standard basis of
/// the output; same result as [`jacfwd`]. Best when outputs are fewer than
/// inputs.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let j = jacrev(|x: &Var| x.square()).eval(&x)?;
/// assert_eq!(j.to_vec::<f64>()?, vec![2.0, 0.0, 0.0, 4.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jacrev<M, F: IntoFunction<M>>(f: F) -> Jacobian<F::Func> {
    Jacobian { forward: false, ..jacfwd(f) }
}

impl<F, S, K> Jacobian<F, S, K> {
    /// Evaluates the basis in chunks of `k` directions to bound memory
    /// (same results).
    pub fn chunk_size(mut self, k: usize) -> Self {
        self.chunk_size = Some(k);
        self
    }
}

impl<F, S, K> Function for Jacobian<F, S, K>
where
    F: Function,
    S: Selector<F::Args>,
    K: JacobianKind<F::Output, S::Out>,
{
    type Args = F::Args;
    type Output = K::Out;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let what = if self.forward { "jacfwd" } else { "jacrev" };
        let sel = select(what, self.sel.indices(), self.sel.single(), def, args)?;
        let t = trace_fn_for(&self.f, def, &types_of(args), args)?;
        let (y_def, ny, aux) = split_aux(what, &t.output, K::AUX)?;
        let all = with_captures(args, &t.captures);
        let types = types_of(&all);
        let blocks = if self.forward {
            self.forward_blocks(&t.graph, &all, &types, &sel.leaves, ny)?
        } else {
            self.reverse_blocks(&t.graph, &all, &types, &sel.leaves, ny)?
        };
        let mut leaves: Vec<Var> = blocks.into_iter().flatten().collect();
        let mut def = y_def.nest(&sel.def);
        if let Some(aux) = aux {
            leaves.extend(inline_graph(&t.graph, &all)?.into_iter().skip(ny));
            def = TreeDef::Tuple(vec![def, aux]);
        }
        Ok(Dyn { def, leaves })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("{}({})", if self.forward { "jacfwd" } else { "jacrev" }, self.f.name())
    }
}

impl<F, S, K> Jacobian<F, S, K> {
    /// Blocks `[k][j]`: output leaf `k` (of the first `ny`) by chosen input
    /// leaf `j`, one `jvp` over the basis of each input leaf.
    fn forward_blocks(
        &self,
        graph: &Graph,
        all: &[Var],
        types: &[TensorType],
        chosen: &[usize],
        ny: usize,
    ) -> Result<Vec<Vec<Var>>> {
        let mut jac: Vec<Vec<Var>> = vec![Vec::new(); ny];
        for &a in chosen {
            let tangent_fn = jvp_direction(graph, types, a)?;
            let size = dim_numel(types[a].shape())?;
            let outs = over_basis(&tangent_fn, all, &types[a], false, self.chunk_size)?;
            for (k, o) in outs.iter().take(ny).enumerate() {
                jac[k].push(jacobian_block(o, size, types[a].shape(), true));
            }
        }
        Ok(jac)
    }

    /// Blocks `[k][j]` by one `vjp` over the basis of each output leaf.
    fn reverse_blocks(
        &self,
        graph: &Graph,
        all: &[Var],
        types: &[TensorType],
        chosen: &[usize],
        ny: usize,
    ) -> Result<Vec<Vec<Var>>> {
        let mut jac: Vec<Vec<Var>> = vec![Vec::new(); ny];
        for (k, out) in graph.output_types().iter().take(ny).enumerate() {
            if !out.dtype().is_float() {
                return Err(Error::dtype(
                    "jacrev",
                    format!("output {k}"),
                    out.dtype(),
                    "a float type",
                ));
            }
            let ct_fn = vjp_direction(graph, types, k, chosen)?;
            let size = dim_numel(out.shape())?;
            let outs = over_basis(&ct_fn, all, out, true, self.chunk_size)?;
            for o in &outs {
                jac[k].push(jacobian_block(o, size, out.shape(), false));
            }
        }
        Ok(jac)
    }
}

// --------------------------------------------------------------- hessian

/// The Hessian, `jacfwd(jacrev(f))` with the same arguments chosen at both
/// levels; see [`hessian`].
pub struct Hessian<F, S = Argnum<0>> {
    inner: Jacobian<Jacobian<F, S>, S>,
}

impl<F: Clone, S: Clone> Clone for Hessian<F, S> {
    fn clone(&self) -> Self {
        Hessian { inner: self.inner.clone() }
    }
}

impl<F, S: Debug> Debug for Hessian<F, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hessian").field("argnums", &self.inner.sel).finish_non_exhaustive()
    }
}

/// The Hessian, `jacfwd(jacrev(f))`: for a scalar function of `x` of shape
/// `T`, a tensor of shape `T ++ T`. With several arguments chosen
/// ([`Hessian::argnums`]), the blocks `H[i][j]` = d²f / dx_i dx_j.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// // f = x0^2 x1 -> H = [[2 x1, 2 x0], [2 x0, 0]]
/// let h = hessian(|x: &Var| x.index_axis(0, 0).square() * x.index_axis(0, 1)).eval(&x)?;
/// assert_eq!(h.to_vec::<f64>()?, vec![4.0, 2.0, 2.0, 0.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn hessian<M, F: IntoFunction<M>>(f: F) -> Hessian<F::Func> {
    let inner = Jacobian { forward: false, ..jacfwd(f) };
    Hessian {
        inner: Jacobian {
            f: inner,
            sel: Argnum,
            forward: true,
            chunk_size: None,
            cache: PlanCache::new(),
            kind: PhantomData,
        },
    }
}

impl<F, S> Hessian<F, S> {
    fn choose<T: Clone>(self, sel: T) -> Hessian<F, T> {
        let Jacobian { f: jac, chunk_size, .. } = self.inner;
        let inner = Jacobian {
            f: jac.f,
            sel: sel.clone(),
            forward: false,
            chunk_size: jac.chunk_size,
            cache: PlanCache::new(),
            kind: PhantomData,
        };
        Hessian {
            inner: Jacobian {
                f: inner,
                sel,
                forward: true,
                chunk_size,
                cache: PlanCache::new(),
                kind: PhantomData,
            },
        }
    }

    /// The Hessian with respect to argument `N` (default `0`).
    pub fn argnum<const N: usize>(self) -> Hessian<F, Argnum<N>> {
        self.choose(Argnum::<N>)
    }

    /// The Hessian with respect to several arguments: blocks `H[i][j]`
    /// (a [`Dyn`] of [`Dyn`]s: `h.part::<Dyn<Tensor>>(i)?.part::<Tensor>(j)?`).
    pub fn argnums(self, argnums: &[usize]) -> Hessian<F, Argnums> {
        self.choose(Argnums(argnums.to_vec()))
    }

    /// Evaluates both Jacobians in chunks of `k` basis directions.
    pub fn chunk_size(mut self, k: usize) -> Self {
        self.inner.chunk_size = Some(k);
        self.inner.f.chunk_size = Some(k);
        self
    }
}

impl<F, S> Function for Hessian<F, S>
where
    F: Function,
    S: Selector<F::Args>,
    Jacobian<Jacobian<F, S>, S>: Function<Args = F::Args>,
{
    type Args = F::Args;
    type Output = <Jacobian<Jacobian<F, S>, S> as Function>::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        self.inner.inline(def, args)
    }
    fn cache(&self) -> Option<&PlanCache> {
        self.inner.cache()
    }
    fn name(&self) -> String {
        format!("hessian({})", self.inner.f.f.name())
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
    let size = dim_numel(ty.shape())?;
    let seed_axis = if front { 0 } else { ty.rank() };
    if is_symbolic(size) && chunk.is_some() {
        return Err(Error::invalid(
            "jacobian",
            "chunk_size",
            format!("chunks of a basis of symbolic size {}", fmt_dim(size)),
        ));
    }
    let like = args.first().ok_or_else(|| Error::invalid("jacobian", "arguments", "none given"))?;
    let with_seed = |start: usize, len: usize| -> Result<Vec<Batched>> {
        let seed = Batched::new(basis(like, ty, start, len, front), Some(seed_axis));
        Ok(args.iter().map(|a| Batched::new(a.clone(), None)).chain([seed]).collect())
    };
    match chunk {
        Some(0) => Err(Error::invalid("jacobian", "chunk_size", "must be at least 1")),
        // Two chunks or more: one loop over the chunks, each building its
        // seed from its start (a basis with a start operand), batch in front.
        Some(k) if size / k >= 2 => {
            let full = size / k;
            let starts = anvil_ops::iota_dtype(&[full], 0, DType::I64) * (k as i64);
            let chunk_args = |c: &[Var], x: &[Var]| -> Vec<Batched> {
                let op = Basis::seed(ty, 0, k, front);
                let seed = Var::apply_op(Box::new(op), &[&x[0]]);
                c.iter()
                    .map(|a| Batched::new(a.clone(), None))
                    .chain([Batched::new(seed, Some(seed_axis))])
                    .collect()
            };
            let looped = looped_chunks(graph, k, full, args, &[starts], chunk_args)?;
            finish_chunks(graph, looped, size, full * k, with_seed)
        }
        Some(k) if k < size => vmap_graph_by_chunks(graph, size, k, with_seed),
        // A single batch keeps the seed's axis where the ops leave it.
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
        let (_, in_cts) = vjp_graph_wrt(graph, &vars[..n], &cts, &chosen(argnums, n))?;
        Ok(argnums.iter().map(|&a| dense(&in_cts[a], &vars[a])).collect())
    })
}

/// A tangent, or zeros; an integer output's "tangent" is a float zero, so
/// that its Jacobian block exists (and is zero).
pub(crate) fn dense_float(t: &Option<Var>, o: &Var) -> Var {
    match t {
        Some(t) => t.clone(),
        None if o.dtype().is_float() => o.zeros_like(),
        None => o.zeros_like().cast(DType::F64),
    }
}
