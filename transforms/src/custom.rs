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

use anvil_core::function::trace_types;
use anvil_core::{Error, Function, Graph, PlanCache, Result, TensorType, Var};
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
pub struct CustomJvp<F, J, M, MJ> {
    f: F,
    jvp: J,
    cache: PlanCache,
    _marker: PhantomData<fn() -> (M, MJ)>,
}

impl<F: Clone, J: Clone, M, MJ> Clone for CustomJvp<F, J, M, MJ> {
    fn clone(&self) -> Self {
        CustomJvp {
            f: self.f.clone(),
            jvp: self.jvp.clone(),
            cache: PlanCache::new(),
            _marker: PhantomData,
        }
    }
}

impl<F, J, M, MJ> std::fmt::Debug for CustomJvp<F, J, M, MJ> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CustomJvp")
    }
}

/// `f` with the forward-mode derivative `jvp` (`jax.custom_jvp`).
///
/// `jvp` takes `f`'s arguments followed by one tangent per argument and
/// returns `f`'s outputs followed by their tangents (`[f(x), tangent]` for
/// one output); it must be linear in the tangents, because reverse mode
/// transposes it.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::{custom_jvp, grad};
/// // softplus(x) = log(1 + e^x), whose naive derivative overflows for large x.
/// let softplus = custom_jvp(
///     |x: &Var| x.exp().log1p(),
///     |x: &Var, t: &Var| vec![x.exp().log1p(), t * &x.logistic()],
/// );
/// let g = grad(move |x: &Var| softplus.invoke(&[x]).sum_all())
///     .call(&Tensor::from_vec(vec![0.0, 1000.0], &[2])?)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![0.5, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn custom_jvp<M, MJ, F: Function<M>, J: Function<MJ>>(f: F, jvp: J) -> CustomJvp<F, J, M, MJ> {
    CustomJvp { f, jvp, cache: PlanCache::new(), _marker: PhantomData }
}

impl<M, MJ, F: Function<M>, J: Function<MJ>> Function<M> for CustomJvp<F, J, M, MJ> {
    type Output = F::Output;
    fn arity(&self) -> Option<usize> {
        self.f.arity()
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let types = types_of(args);
        let primal = trace_types(&self.f, &types)?;
        let outs = some_output("custom_jvp", &primal)?;
        let jvp = trace_types(&self.jvp, &[types.clone(), types].concat())?;
        expect_outputs("custom_jvp rule", &jvp, &[outs.clone(), outs.clone()].concat())?;
        let op = CustomJvpCall { primal: primal.into(), jvp: jvp.into() };
        let refs: Vec<&Var> = args.iter().collect();
        Ok(Var::apply_op_n(Box::new(op), &refs, outs.len()))
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("custom_jvp({})", self.f.name())
    }
}

// ------------------------------------------------------------ custom_vjp

/// The marker of a [`CustomVjp`]: the three functions' markers.
type Markers<M, MF, MB> = PhantomData<fn() -> (M, MF, MB)>;

/// A function with a custom vjp; see [`custom_vjp`].
pub struct CustomVjp<F, Fw, B, M, MF, MB> {
    f: F,
    fwd: Fw,
    bwd: B,
    cache: PlanCache,
    _marker: Markers<M, MF, MB>,
}

impl<F: Clone, Fw: Clone, B: Clone, M, MF, MB> Clone for CustomVjp<F, Fw, B, M, MF, MB> {
    fn clone(&self) -> Self {
        CustomVjp {
            f: self.f.clone(),
            fwd: self.fwd.clone(),
            bwd: self.bwd.clone(),
            cache: PlanCache::new(),
            _marker: PhantomData,
        }
    }
}

impl<F, Fw, B, M, MF, MB> std::fmt::Debug for CustomVjp<F, Fw, B, M, MF, MB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CustomVjp")
    }
}

/// `f` with the reverse-mode derivative given by `fwd` and `bwd`
/// (`jax.custom_vjp`).
///
/// `fwd` takes `f`'s arguments and returns `[f(x)..., residuals...]` (the
/// function's outputs first); `bwd` takes the residuals and one cotangent
/// per output and returns one cotangent per argument of `f`. Reverse mode (`grad`, `vjp`, `jacrev`, and `vmap` of
/// them) uses them; forward mode (`jvp`, `jacfwd`) is an error, as in JAX.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::{custom_vjp, grad};
/// // The identity, with its gradient clipped to [-1, 1].
/// let clip = custom_vjp(
///     |x: &Var| x.clone(),
///     |x: &Var| vec![x.clone()],
///     |ct: &Var| vec![ct.maximum(&ct.full_like(-1.0)).minimum(&ct.full_like(1.0))],
/// );
/// let f = move |x: &Var| (clip.invoke(&[x]) * 10.0).sum_all();
/// let g = grad(f).call(&Tensor::from_vec(vec![1.0, 2.0], &[2])?)?;
/// assert_eq!(g.to_vec::<f64>()?, vec![1.0, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn custom_vjp<M, MF, MB, F: Function<M>, Fw: Function<MF>, B: Function<MB>>(
    f: F,
    fwd: Fw,
    bwd: B,
) -> CustomVjp<F, Fw, B, M, MF, MB> {
    CustomVjp { f, fwd, bwd, cache: PlanCache::new(), _marker: PhantomData }
}

impl<M, MF, MB, F: Function<M>, Fw: Function<MF>, B: Function<MB>> Function<M>
    for CustomVjp<F, Fw, B, M, MF, MB>
{
    type Output = F::Output;
    fn arity(&self) -> Option<usize> {
        self.f.arity()
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        let types = types_of(args);
        let primal = trace_types(&self.f, &types)?;
        let outs = some_output("custom_vjp", &primal)?;
        let fwd = trace_types(&self.fwd, &types)?;
        let fwd_out = fwd.output_types();
        if !fwd_out.starts_with(&outs) {
            let show: Vec<String> = outs.iter().map(ToString::to_string).collect();
            return Err(Error::invalid(
                "custom_vjp fwd",
                "outputs",
                format!("must start with the function's outputs ({})", show.join(", ")),
            ));
        }
        let mut bwd_in = fwd_out[outs.len()..].to_vec();
        bwd_in.extend(outs.iter().cloned());
        let bwd = trace_types(&self.bwd, &bwd_in)?;
        expect_outputs("custom_vjp bwd", &bwd, &types)?;
        let op = CustomVjpCall { primal: primal.into(), fwd: fwd.into(), bwd: bwd.into() };
        let refs: Vec<&Var> = args.iter().collect();
        Ok(Var::apply_op_n(Box::new(op), &refs, outs.len()))
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("custom_vjp({})", self.f.name())
    }
}
