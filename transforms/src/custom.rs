//! Functions with user-given derivatives: [`custom_jvp`] and [`custom_vjp`],
//! as in JAX.
//!
//! A custom-derivative function is one node (`CustomJvpCall` or
//! `CustomVjpCall`) holding the traced function and its derivative as
//! sub-graphs. The CPU runs the function; transforms use the derivative:
//!
//! - `custom_jvp`: jvp inlines the user's jvp; reverse mode transposes it
//!   (so it must be linear in the tangents, as in JAX); `vmap` batches the
//!   function and its jvp together.
//! - `custom_vjp`: reverse mode inlines `fwd` for the residuals and
//!   transposes a tangent node whose transpose is `bwd`; `vmap` runs the call
//!   as a loop (`map`), which composes with every transform; forward mode is
//!   an error naming the function, as in JAX.
//!
//! The functions may close over values of the trace they are called in
//! (parameters, say): those become trailing operands of the node, shared by
//! the function and its rules. Differentiating with respect to such a value
//! is an error, as in JAX: the rule only says how to differentiate with
//! respect to the arguments.

use crate::captures::{slots, union, with_inputs};
use anvil_core::{
    trace_fn, trace_fn_for, Dyn, Error, Function, Graph, IntoFunction, PlanCache, Result,
    TensorType, Traced, TracedFn, TreeDef, Var,
};
use anvil_ops::control::{CustomJvpCall, CustomVjpCall};
use std::marker::PhantomData;

fn types_of(args: &[Var]) -> Vec<TensorType> {
    args.iter().map(|a| a.ty().clone()).collect()
}

/// Checks that `g`'s outputs have the types `want`, naming `what`.
fn expect_outputs(what: &str, g: &Graph, want: &[TensorType]) -> Result<()> {
    let got = g.output_types();
    if got == want {
        return Ok(());
    }
    let show =
        |ts: &[TensorType]| ts.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    Err(Error::invalid(
        what,
        "outputs",
        format!("returns ({}); expected ({})", show(&got), show(want)),
    ))
}

fn some_output(what: &str, g: &Graph) -> Result<Vec<TensorType>> {
    match g.output_types() {
        ts if ts.is_empty() => Err(Error::invalid(what, "function", "has no output")),
        ts => Ok(ts),
    }
}

// ------------------------------------------------------------ custom_jvp

/// A function with a custom jvp; see [`custom_jvp`].
pub struct CustomJvp<F, J> {
    f: F,
    jvp: J,
    cache: PlanCache,
}

impl<F: Clone, J: Clone> Clone for CustomJvp<F, J> {
    fn clone(&self) -> Self {
        CustomJvp { f: self.f.clone(), jvp: self.jvp.clone(), cache: PlanCache::new() }
    }
}

impl<F, J> std::fmt::Debug for CustomJvp<F, J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CustomJvp")
    }
}

/// `f` with the forward-mode derivative `jvp` (`jax.custom_jvp`).
///
/// `jvp` takes `(primals, tangents)` — `f`'s arguments as a tuple and a
/// tuple of their tangents — and returns `(outputs, output tangents)`; it
/// must be linear in the tangents, because reverse mode transposes it.
/// Under every transform the primal outputs are `f`'s (the rule's
/// `outputs` only fix their types): where JAX's `jvp` returns the rule's
/// primal value, anvil returns `f`'s, so a rule that computes the value
/// differently (say, more stably) should put that formula in `f` too.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::custom_jvp;
/// // softplus(x) = log(1 + e^x), whose naive derivative overflows for large x.
/// let softplus = custom_jvp(
///     |x: &Var| x.exp().log1p(),
///     |(x,): &(Var,), (t,): &(Var,)| (x.exp().log1p(), t * &x.logistic()),
/// );
/// let g = grad(move |x: &Var| Ok(softplus.apply(x)?.sum_all()))
///     .eval(&Tensor::from_vec(vec![0.0, 1000.0], &[2])?)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![0.5, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn custom_jvp<M, MJ, F: IntoFunction<M>, J: IntoFunction<MJ>>(
    f: F,
    jvp: J,
) -> CustomJvp<F::Func, J::Func> {
    CustomJvp { f: f.into_function(), jvp: jvp.into_function(), cache: PlanCache::new() }
}

impl<F, J> Function for CustomJvp<F, J>
where
    F: Function,
    J: Function<Args = (F::Args, F::Args), Output = (F::Output, F::Output)>,
{
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let types = types_of(args);
        let n = args.len();
        // The functions' inputs stand for the arguments (a tangent for its
        // primal), so their values have the arguments' trace-time types.
        let primal = trace_fn_for(&self.f, def, &types, args)?;
        let outs = some_output("custom_jvp", &primal.graph)?;
        let pair = TreeDef::Tuple(vec![def.clone(), def.clone()]);
        let both = [types.clone(), types.clone()].concat();
        let jvp = trace_fn_for(&self.jvp, &pair, &both, &[args, args].concat())?;
        expect_outputs("custom_jvp rule", &jvp.graph, &[outs.clone(), outs.clone()].concat())?;
        let consts = union(&[&primal, &jvp]);
        let mut all_types = types.clone();
        all_types.extend(consts.iter().map(|c| c.ty().clone()));
        let nc = consts.len();
        // primal: (args, its captures) -> (args, consts).
        let from: Vec<usize> =
            (0..n).chain(slots(&primal, &consts).iter().map(|&k| n + k)).collect();
        let primal_graph = with_inputs(&primal.graph, &all_types, &from)?;
        // jvp: (args, tangents, its captures) -> (args, consts, tangents).
        let mut jvp_types = all_types.clone();
        jvp_types.extend(types);
        let from: Vec<usize> = (0..n)
            .chain((0..n).map(|i| n + nc + i))
            .chain(slots(&jvp, &consts).iter().map(|&k| n + k))
            .collect();
        let jvp_graph = with_inputs(&jvp.graph, &jvp_types, &from)?;
        let op = CustomJvpCall { primal: primal_graph.into(), jvp: jvp_graph.into(), consts: nc };
        let operands: Vec<&Var> = args.iter().chain(&consts).collect();
        Ok(Dyn { def: primal.output, leaves: Var::apply_op_n(Box::new(op), &operands, outs.len()) })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("custom_jvp({})", self.f.name())
    }
}

// ------------------------------------------------------------ custom_vjp

/// A function with a custom vjp; see [`custom_vjp`].
pub struct CustomVjp<F, Fw, B, R> {
    f: F,
    fwd: Fw,
    bwd: B,
    cache: PlanCache,
    _residuals: PhantomData<fn() -> R>,
}

impl<F: Clone, Fw: Clone, B: Clone, R> Clone for CustomVjp<F, Fw, B, R> {
    fn clone(&self) -> Self {
        CustomVjp {
            f: self.f.clone(),
            fwd: self.fwd.clone(),
            bwd: self.bwd.clone(),
            cache: PlanCache::new(),
            _residuals: PhantomData,
        }
    }
}

impl<F, Fw, B, R> std::fmt::Debug for CustomVjp<F, Fw, B, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CustomVjp")
    }
}

/// `f` with the reverse-mode derivative given by `fwd` and `bwd`
/// (`jax.custom_vjp`).
///
/// `fwd` takes `f`'s arguments and returns `(f(x), residuals)`, the
/// residuals any tree; `bwd` takes `(residuals, output cotangents)` and
/// returns a tuple with one cotangent per argument of `f`. Reverse mode
/// (`grad`, `vjp`, `jacrev`, and `vmap` of them) uses them; forward mode
/// (`jvp`, `jacfwd`) is an error, as in JAX.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::custom_vjp;
/// // The identity, with its gradient clipped to [-1, 1].
/// let clip = custom_vjp(
///     |x: &Var| x.clone(),
///     |x: &Var| (x.clone(), ()),
///     |_: &(), ct: &Var| (ct.maximum(&ct.full_like(-1.0)).minimum(&ct.full_like(1.0)),),
/// );
/// let f = move |x: &Var| Ok((clip.apply(x)? * 10.0).sum_all());
/// let g = grad(f).eval(&Tensor::from_vec(vec![1.0, 2.0], &[2])?)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![1.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn custom_vjp<M, MF, MB, R, F, Fw, B>(
    f: F,
    fwd: Fw,
    bwd: B,
) -> CustomVjp<F::Func, Fw::Func, B::Func, R>
where
    F: IntoFunction<M>,
    Fw: IntoFunction<MF, Args = F::Args, Output = (F::Output, R)>,
    B: IntoFunction<MB, Args = (R, F::Output), Output = F::Args>,
    R: Traced,
{
    CustomVjp {
        f: f.into_function(),
        fwd: fwd.into_function(),
        bwd: bwd.into_function(),
        cache: PlanCache::new(),
        _residuals: PhantomData,
    }
}

impl<F, Fw, B, R> Function for CustomVjp<F, Fw, B, R>
where
    F: Function,
    Fw: Function<Args = F::Args, Output = (F::Output, R)>,
    B: Function<Args = (R, F::Output), Output = F::Args>,
    R: Traced,
{
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let types = types_of(args);
        let n = args.len();
        let primal = trace_fn_for(&self.f, def, &types, args)?;
        let outs = some_output("custom_vjp", &primal.graph)?;
        let fwd = trace_fn_for(&self.fwd, def, &types, args)?;
        let fwd_out = fwd.graph.output_types();
        let res_def = match &fwd.output {
            TreeDef::Tuple(c) if c.len() == 2 && fwd_out.starts_with(&outs) => c[1].clone(),
            _ => {
                let show: Vec<String> = outs.iter().map(ToString::to_string).collect();
                return Err(Error::invalid(
                    "custom_vjp fwd",
                    "outputs",
                    format!("must be (the function's outputs ({}), residuals)", show.join(", ")),
                ));
            }
        };
        let res_types = fwd_out[outs.len()..].to_vec();
        let nr = res_types.len();
        let bwd_def = TreeDef::Tuple(vec![res_def, primal.output.clone()]);
        let bwd = trace_fn(&self.bwd, &bwd_def, &[res_types.clone(), outs.clone()].concat())?;
        expect_outputs("custom_vjp bwd", &bwd.graph, &types)?;
        let consts = union(&[&primal, &fwd, &bwd]);
        let nc = consts.len();
        let const_types: Vec<TensorType> = consts.iter().map(|c| c.ty().clone()).collect();
        let all_types = [types.clone(), const_types.clone()].concat();
        let from = |t: &TracedFn| -> Vec<usize> {
            (0..n).chain(slots(t, &consts).iter().map(|&k| n + k)).collect()
        };
        let primal_graph = with_inputs(&primal.graph, &all_types, &from(&primal))?;
        let fwd_graph = with_inputs(&fwd.graph, &all_types, &from(&fwd))?;
        // bwd: (residuals, cts, its captures) -> (consts, residuals, cts).
        let bwd_types = [const_types, res_types, outs.clone()].concat();
        let from_bwd: Vec<usize> =
            (0..nr + outs.len()).map(|i| nc + i).chain(slots(&bwd, &consts)).collect();
        let bwd_graph = with_inputs(&bwd.graph, &bwd_types, &from_bwd)?;
        let op = CustomVjpCall {
            primal: primal_graph.into(),
            fwd: fwd_graph.into(),
            bwd: bwd_graph.into(),
            consts: nc,
        };
        let operands: Vec<&Var> = args.iter().chain(&consts).collect();
        Ok(Dyn { def: primal.output, leaves: Var::apply_op_n(Box::new(op), &operands, outs.len()) })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("custom_vjp({})", self.f.name())
    }
}
