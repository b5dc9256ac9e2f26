//! Control flow inside traced functions, with JAX's names and semantics:
//! [`cond`], [`switch`], [`scan`], [`fori_loop`], [`while_loop`] (and
//! [`while_loop_bounded`], whose reverse-mode derivative exists).
//!
//! Each traces its functions once into sub-graphs of one op (`cond`,
//! `scan`, `while`), which every transform goes through: `vmap`, `jvp`,
//! `grad`, `jacfwd`, `jacrev`, `hessian` and their compositions. The
//! functions may close over values of the function they are called in
//! (the parameters being differentiated, say): those are passed to the op
//! as extra operands. Carries and operands are trees (tuples, structs,
//! `Vec`s...) of `Var`s; an argument given as a concrete tensor is a
//! constant.
//!
//! ```
//! use anvil::prelude::*;
//! // Euler steps of dx/dt = -k x, differentiated with respect to k.
//! let f = |k: &Var, x0: &Var| -> anvil::Result<Var> {
//!     let step = |x: &Var, _: &()| (x - &(x * k * 0.1), ());
//!     let (x, ()) = scan_n(step, x0, 10)?;
//!     Ok(x)
//! };
//! let (k, x0) = (Tensor::scalar(0.5), Tensor::scalar(1.0));
//! let x = jit(f).eval((&k, &x0))?;
//! assert!((x.item()? - 0.95f64.powi(10)).abs() < 1e-15);
//! let dk = grad(f).eval((&k, &x0))?;
//! assert!((dk.item()? - (-10.0 * 0.1 * 0.95f64.powi(9))).abs() < 1e-14);
//! # Ok::<(), anvil::Error>(())
//! ```

use crate::captures::{around_consts, has_types, joined_types, retyped, types, union};
use anvil_core::function::{fit_args, Args, ToVar};
use anvil_core::trace::{raise, type_of};
use anvil_core::tree::{unflatten_all, Flatten, TreeDef};
use anvil_core::{
    trace_fn_for, DType, Error, Function, IntoFunction, Result, Scalar, Traced, TracedFn, Var,
};
use anvil_ops::cond::Cond;
use anvil_ops::scan::{check_carries, emit_scan, Scan};
use anvil_ops::while_loop::{emit_while, While};
use anvil_ops::{full_scalar, iota_dtype, VarExt};

/// The leaves of `tree` as values of the current trace.
fn leaves_of<L: ToVar>(tree: &impl Flatten<L>) -> Vec<Var> {
    let mut out = Vec::new();
    tree.for_each_leaf(&mut |l| out.push(l.to_var()));
    out
}

// ------------------------------------------------------------- cond

/// `true_fn(operands)` if `pred` holds, else `false_fn(operands)`
/// (`jax.lax.cond`). `pred` is a `bool` scalar; the branches take the
/// operands (one as itself, several as a tuple) and return the same
/// types.
///
/// Only the branch taken runs. Under `vmap` with a batched `pred`, both run
/// and the result is selected per element: a branch not taken may then
/// produce NaN or infinity that reaches a gradient through the select as
/// `0 * NaN`. Guard the operands of the unsafe branch too (the "double
/// where" pattern): `cond(x > 0, |x| x.sqrt(), ..)` becomes
/// `cond(x > 0, |x| where_(x > 0, x, 1).sqrt(), ..)`.
///
/// ```
/// use anvil::prelude::*;
/// let f = |x: &Var| cond(&x.sum_all().gt(&x.sum_all().full_like(0.0)), |x: &Var| x.sin(), |x: &Var| -x, x);
/// let y = jit(f).eval(&Tensor::from_vec(vec![1.0, -3.0], &[2])?)?;
/// assert_eq!(y.to_vec::<f64>()?, vec![-1.0, 3.0]); // the sum is negative
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// A `pred` that is not a `bool` scalar; branches whose results differ in
/// structure or types (naming the output, its shapes and dtypes).
pub fn cond<MT, MF, T, F, L>(
    pred: &Var,
    true_fn: T,
    false_fn: F,
    operands: impl Flatten<L>,
) -> Result<T::Output>
where
    T: IntoFunction<MT>,
    F: IntoFunction<MF, Args = T::Args, Output = T::Output>,
    L: ToVar,
{
    scalar_of("cond", "pred", pred, pred.dtype() == DType::Bool, "a bool scalar")?;
    let index = pred.cast(DType::I64);
    let (f, t) = (false_fn.into_function(), true_fn.into_function());
    let names = Names { op: "cond", of: &|b| ["false_fn", "true_fn"][b.min(1)].to_string() };
    branch(&index, &[&f, &t], operands.def(), &leaves_of(&operands), names)
}

/// `branches[index](operands)` (`jax.lax.switch`); `index` (an integer
/// scalar) is clamped to the branches, as in JAX. `branches` is a tuple
/// of functions (closures) that take the same arguments and return the
/// same types.
///
/// ```
/// use anvil::prelude::*;
/// let f = |i: &Var, x: &Var| switch(i, (|x: &Var| x.sin(), |x: &Var| x.cos(), |x: &Var| x * 2.0), x);
/// let x = Tensor::scalar(0.5);
/// assert_eq!(jit(f).eval((&Tensor::scalar(2i64), &x))?.item()?, 1.0);
/// assert_eq!(jit(f).eval((&Tensor::scalar(7i64), &x))?.item()?, 1.0); // clamped to the last
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// An `index` that is not an integer scalar; branches whose results differ.
pub fn switch<'f, M, B: Branches<'f, M>, L: ToVar>(
    index: &Var,
    branches: B,
    operands: impl Flatten<L>,
) -> Result<B::Output> {
    scalar_of("switch", "index", index, is_integer(index.dtype()), "an integer scalar")?;
    let funcs = branches.into_functions();
    let refs: Vec<&dyn Function<Args = B::Args, Output = B::Output>> =
        funcs.iter().map(|f| f.as_ref()).collect();
    let names = Names { op: "switch", of: &|b| format!("branch {b}") };
    branch(index, &refs, operands.def(), &leaves_of(&operands), names)
}

/// Several functions of the same arguments and result: the branches of
/// [`switch`]. Implemented for tuples of up to eight closures (or
/// functions), which may borrow for `'f` (as `cond`'s branches may), and
/// for a `Vec` of boxed functions.
pub trait Branches<'f, M> {
    /// The arguments every branch takes.
    type Args: Args;
    /// The result every branch returns.
    type Output: Traced;
    /// The branches, in order.
    fn into_functions(
        self,
    ) -> Vec<Box<dyn Function<Args = Self::Args, Output = Self::Output> + 'f>>;
}

impl<'f, A: Args, O: Traced> Branches<'f, ()>
    for Vec<Box<dyn Function<Args = A, Output = O> + 'f>>
{
    type Args = A;
    type Output = O;
    fn into_functions(self) -> Vec<Box<dyn Function<Args = A, Output = O> + 'f>> {
        self
    }
}

macro_rules! branches {
    ($f0:ident $m0:ident $($f:ident $m:ident)*) => {
        impl<'f, $m0, $($m,)* $f0, $($f,)*> Branches<'f, ($m0, $($m,)*)> for ($f0, $($f,)*)
        where
            $f0: IntoFunction<$m0>,
            $f0::Func: 'f,
            $($f: IntoFunction<$m, Args = $f0::Args, Output = $f0::Output>, $f::Func: 'f,)*
        {
            type Args = $f0::Args;
            type Output = $f0::Output;
            #[allow(non_snake_case)]
            fn into_functions(
                self,
            ) -> Vec<Box<dyn Function<Args = Self::Args, Output = Self::Output> + 'f>> {
                let ($f0, $($f,)*) = self;
                vec![Box::new($f0.into_function()), $(Box::new($f.into_function()),)*]
            }
        }
    };
}
branches!(F0 M0);
branches!(F0 M0 F1 M1);
branches!(F0 M0 F1 M1 F2 M2);
branches!(F0 M0 F1 M1 F2 M2 F3 M3);
branches!(F0 M0 F1 M1 F2 M2 F3 M3 F4 M4);
branches!(F0 M0 F1 M1 F2 M2 F3 M3 F4 M4 F5 M5);
branches!(F0 M0 F1 M1 F2 M2 F3 M3 F4 M4 F5 M5 F6 M6);
branches!(F0 M0 F1 M1 F2 M2 F3 M3 F4 M4 F5 M5 F6 M6 F7 M7);

/// Whether `d` is an integer dtype (not a float, not a bool).
fn is_integer(d: DType) -> bool {
    !d.is_float() && d != DType::Bool
}

/// `Ok` when `v` (argument `arg` of `op`) is a scalar of the right dtype
/// (`dtype_ok`), else an error saying which of dtype and shape is wrong.
fn scalar_of(op: &str, arg: &str, v: &Var, dtype_ok: bool, expected: &str) -> Result<()> {
    if !dtype_ok {
        Err(Error::dtype(op, arg, v.dtype(), expected))
    } else if v.rank() != 0 {
        Err(Error::shape(
            op,
            &[v.shape()],
            format!("argument {arg} must be {expected}; it is {}", v.ty()),
        ))
    } else {
        Ok(())
    }
}

/// How errors name a conditional and its branches (`cond`: `true_fn` and
/// `false_fn`; `switch`: by index).
struct Names<'a> {
    op: &'static str,
    of: &'a dyn Fn(usize) -> String,
}

/// One `Cond` node over `branches`, on operands of structure `def`.
fn branch<A: Args, O: Traced>(
    index: &Var,
    branches: &[&dyn Function<Args = A, Output = O>],
    def: TreeDef,
    operands: &[Var],
    names: Names<'_>,
) -> Result<O> {
    let def = fit_args(names.op, def, A::ARITY)?;
    let ty = types(operands);
    // The branches' inputs stand for the operands (their trace-time types
    // follow them).
    let mut traced: Vec<TracedFn> =
        branches.iter().map(|b| trace_fn_for(*b, &def, &ty, operands)).collect::<Result<_>>()?;
    // Where trace-time types are given (a sharded function's replicated and
    // varying values): an index that varies more than an operand or capture
    // lets every rank take its own branch, so they all enter varying (JAX's
    // cond rule), raised outside the branches, which are typed again; and
    // each result is as general as every branch's and as the index, a
    // branch returning a less general one raising it.
    let raised;
    let mut operands = operands;
    if let Some(t_index) = type_of(index) {
        let less = |v: &Var| type_of(v).is_some_and(|t| t | t_index != t);
        if operands.iter().chain(traced.iter().flat_map(|t| &t.captures)).any(less) {
            raised = operands.iter().map(|v| raise(v, t_index)).collect::<Vec<_>>();
            operands = &raised[..];
            for t in traced.iter_mut() {
                *t = retyped(t, operands, t_index, None)?;
            }
        }
    }
    let refs: Vec<&TracedFn> = traced.iter().collect();
    if let Some(want) = joined_types(&refs, type_of(index)) {
        for t in traced.iter_mut() {
            if !has_types(t, &want) {
                *t = retyped(t, operands, 0, Some(&want))?;
            }
        }
    }
    let first = traced.first().ok_or_else(|| Error::invalid(names.op, "branches", "none given"))?;
    for (b, t) in traced.iter().enumerate().skip(1) {
        if t.output != first.output {
            return Err(Error::invalid(
                names.op,
                (names.of)(b),
                format!(
                    "returns {}; {} returns {}",
                    t.output.describe(),
                    (names.of)(0),
                    first.output.describe()
                ),
            ));
        }
    }
    let refs: Vec<&TracedFn> = traced.iter().collect();
    let consts = union(&refs);
    let mut all_types = ty.clone();
    all_types.extend(types(&consts));
    let graphs: Vec<anvil_core::SubGraph> = traced
        .iter()
        .map(|t| around_consts(t, &consts, operands.len(), 0, &all_types).map(Into::into))
        .collect::<Result<_>>()?;
    let want = graphs[0].output_types();
    for (b, g) in graphs.iter().enumerate().skip(1) {
        for (k, (got, w)) in g.output_types().iter().zip(&want).enumerate() {
            if got != w {
                return Err(Error::shape(
                    names.op,
                    &[got.shape(), w.shape()],
                    format!(
                        "output {k} of {} is {got}; {} returns {w}",
                        (names.of)(b),
                        (names.of)(0)
                    ),
                ));
            }
        }
    }
    anvil_ops::cond::check_branch_outputs(&graphs, &want)?;
    let mut refs: Vec<&Var> = vec![index];
    refs.extend(operands);
    refs.extend(&consts);
    let n = first.graph.outputs().len();
    let results = Var::apply_op_n(Box::new(Cond { branches: graphs }), &refs, n);
    unflatten_all(&first.output, results)
}

// ------------------------------------------------------------- scan

/// The options of [`scan_with`]: `length` (required when there are no
/// scanned inputs, checked against them otherwise), `reverse` (run from
/// the last slice to the first; `ys[t]` still belongs to `xs[t]`) and
/// `checkpoint`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// The number of steps.
    pub length: Option<usize>,
    /// Whether to run backwards.
    pub reverse: bool,
    /// The memory policy of reverse mode. By default the gradient keeps
    /// the carries of every step (loop-invariant values once) and
    /// recomputes each step's intermediates from them. `Some(k)` keeps the
    /// carries of every `k`-th step only and recomputes the others,
    /// segment by segment: memory about `(length / k + k)` carries instead
    /// of `length`, for about one more forward pass of time (`k ≈
    /// √length` minimises the memory).
    pub checkpoint: Option<usize>,
}

/// `jax.lax.scan`: `f(carry, x) -> (carry, y)` over the leading axis of
/// `xs`, returning the final carry and the `y`s stacked. The carry and the
/// `xs` are trees (a tuple, a struct...): every leaf of `xs` is scanned
/// along its axis 0.
///
/// ```
/// use anvil::prelude::*;
/// // Cumulative sum, and the final total.
/// let f = |xs: &Var| scan(|c: &Var, x: &Var| (c + x, c + x), &xs.index_axis(0, 0).zeros_like(), xs);
/// let (total, sums) = jit(f).eval(&Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?)?;
/// assert_eq!((total.item()?, sums.to_vec::<f64>()?), (6.0, vec![1.0, 3.0, 6.0]));
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`scan_with`].
pub fn scan<M, F, C, X, Y, L>(f: F, init: impl Flatten<L>, xs: impl Flatten<L>) -> Result<(C, Y)>
where
    F: IntoFunction<M, Args = (C, X), Output = (C, Y)>,
    C: Traced,
    X: Traced,
    Y: Traced,
    L: ToVar,
{
    scan_with(f, init, xs, ScanOptions::default())
}

/// [`scan`] with options: a `length` when there is nothing to scan (`()`
/// as `xs`), `reverse` and `checkpoint`. The leaves of `init` and `xs`
/// are both traced values or both tensors (constants).
///
/// # Errors
/// Scanned inputs of different lengths, or none and no `length`; a
/// `checkpoint` of `Some(0)`; a body
/// whose carry changes structure or type (naming the carry and both
/// types); the body's own errors.
pub fn scan_with<M, F, C, X, Y, L>(
    f: F,
    init: impl Flatten<L>,
    xs: impl Flatten<L>,
    options: ScanOptions,
) -> Result<(C, Y)>
where
    F: IntoFunction<M, Args = (C, X), Output = (C, Y)>,
    C: Traced,
    X: Traced,
    Y: Traced,
    L: ToVar,
{
    if options.checkpoint == Some(0) {
        return Err(Error::invalid(
            "scan",
            "checkpoint",
            "must keep every k-th carry for some k >= 1 (None keeps every step's)",
        ));
    }
    let (init_def, xs_def) = (init.def(), xs.def());
    let (carries, scanned) = (leaves_of(&init), leaves_of(&xs));
    let length = scan_length(&scanned, options.length)?;
    let mut slice_types = types(&carries);
    for x in &scanned {
        slice_types.push(x.ty().with_shape(x.shape()[1..].to_vec()));
    }
    let def = TreeDef::Tuple(vec![init_def.clone(), xs_def]);
    let (nk, nx) = (carries.len(), scanned.len());
    // The body's inputs stand for the carries and the scanned values;
    // a carry more general on exit than on entry (a replicated carry that
    // the body makes varying) enters as that, and the body is traced again.
    let mut carries = carries;
    let t = loop {
        let outer: Vec<Var> = carries.iter().chain(&scanned).cloned().collect();
        let t = trace_fn_for(&f.as_function(), &def, &slice_types, &outer)?;
        if !raise_carries(&mut carries, &t.types, None) {
            break t;
        }
    };
    let y_def = match &t.output {
        TreeDef::Tuple(c) if c.len() == 2 && c[0] == init_def => c[1].clone(),
        d => {
            return Err(Error::invalid(
                "scan",
                "body",
                format!(
                    "must return (carry, y) with the carry's structure {}; it returns {}",
                    init_def.describe(),
                    d.describe()
                ),
            ))
        }
    };
    check_carries("scan", &slice_types[..nk], &t.graph.output_types()[..nk])?;
    // Body inputs: (consts, carries, x slices).
    let consts = t.captures.clone();
    let mut body_types = types(&consts);
    body_types.extend(slice_types);
    let nc = consts.len();
    let from: Vec<usize> = (nc..nc + nk + nx).chain(0..nc).collect();
    let body = crate::captures::with_inputs(&t.graph, &body_types, &from)?;
    let mut operands = consts;
    operands.extend(carries);
    operands.extend(scanned);
    let scan = Scan {
        body: body.into(),
        consts: nc,
        carries: nk,
        length,
        reverse: options.reverse,
        checkpoint: options.checkpoint,
    };
    let mut results = emit_scan(scan, &operands);
    let ys = results.split_off(nk);
    Ok((unflatten_all(&init_def, results)?, unflatten_all(&y_def, ys)?))
}

/// [`scan`] with nothing scanned (`jax.lax.scan(f, init, None, length)`):
/// `f(carry, &()) -> (carry, y)`, `length` times.
///
/// # Errors
/// As [`scan_with`].
pub fn scan_n<M, F, C, Y, L>(f: F, init: impl Flatten<L>, length: usize) -> Result<(C, Y)>
where
    F: IntoFunction<M, Args = (C, ()), Output = (C, Y)>,
    C: Traced,
    Y: Traced,
    L: ToVar,
{
    let options = ScanOptions { length: Some(length), ..ScanOptions::default() };
    scan_with(f, init, (), options)
}

/// The common leading size of the scanned leaves, checked against `given`.
fn scan_length(xs: &[Var], given: Option<usize>) -> Result<usize> {
    let mut length = given;
    for (i, x) in xs.iter().enumerate() {
        let n = *x.shape().first().ok_or_else(|| {
            Error::shape(
                "scan",
                &[x.shape()],
                format!("scanned leaf {i} is a scalar: nothing to scan"),
            )
        })?;
        match length {
            Some(m) if m != n => {
                return Err(Error::shape(
                    "scan",
                    &[x.shape()],
                    format!(
                    "scanned leaf {i} has length {n}; expected {m} (the length or another leaf's)"
                ),
                ))
            }
            _ => length = Some(n),
        }
    }
    length.ok_or_else(|| {
        Error::invalid("scan", "length", "nothing is scanned, so the length must be given")
    })
}

// ------------------------------------------------------------ loops

/// The bounds of a [`fori_loop`]: a number known when tracing (the loop is
/// a `scan`, differentiable in reverse mode), a symbolic dimension (also a
/// `scan`, of symbolic length) or a traced `i64` scalar (the loop is a
/// `while_loop`).
#[derive(Clone, Debug)]
pub enum Bound {
    /// Known when tracing.
    Static(i64),
    /// Computed by the program.
    Traced(Var),
    /// A symbolic dimension (`x.shape()[0]` of a function compiled with
    /// `jit(f).symbolic(..)`): the loop's length is known once a call binds it.
    Dim(usize),
}

impl From<i64> for Bound {
    fn from(v: i64) -> Bound {
        Bound::Static(v)
    }
}
impl From<usize> for Bound {
    fn from(v: usize) -> Bound {
        if anvil_core::shape::is_symbolic(v) {
            Bound::Dim(v)
        } else {
            Bound::Static(v as i64)
        }
    }
}
impl From<i32> for Bound {
    fn from(v: i32) -> Bound {
        Bound::Static(i64::from(v))
    }
}
impl From<&Var> for Bound {
    fn from(v: &Var) -> Bound {
        Bound::Traced(v.clone())
    }
}

impl Bound {
    fn var(&self) -> Var {
        match self {
            Bound::Static(v) => full_scalar(&[], Scalar::I64(*v)),
            Bound::Traced(v) => v.cast(DType::I64),
            Bound::Dim(d) => {
                Var::apply_op(Box::new(anvil_core::DimSize { dim: *d, dtype: DType::I64 }), &[])
            }
        }
    }

    /// The bound as a dimension when it is known when tracing: a size, or
    /// a symbolic dimension (checked: one changed by raw arithmetic, as
    /// `2 * n`, is an error); `None` for a traced bound.
    fn dim(&self, what: &str) -> Result<Option<Dim>> {
        // A symbolic dimension converted with `as i64` is one too.
        let handle =
            |v: i64| usize::try_from(v).ok().filter(|&d| anvil_core::shape::is_symbolic(d));
        match self {
            Bound::Static(v) if handle(*v).is_some() => Bound::Dim(*v as usize).dim(what),
            Bound::Static(v) => Ok(Some(Dim::Int(*v))),
            Bound::Traced(_) => Ok(None),
            Bound::Dim(d) if anvil_core::shape::is_valid_dim(*d) => Ok(Some(Dim::Symbolic(*d))),
            Bound::Dim(_) => Err(Error::invalid(
                "fori_loop",
                what,
                "is a symbolic dimension changed by arithmetic outside anvil_core::shape \
                 (`2 * n`, `n + 1` of a symbolic size): compute it with \
                 anvil::core::shape::{dim_add, dim_sub, dim_mul}, or pass x.dim_size(axis)",
            )),
        }
    }
}

/// A loop bound known when tracing.
#[derive(Clone, Copy)]
enum Dim {
    Int(i64),
    Symbolic(usize),
}

/// The trip count `hi - lo` of bounds known when tracing, at least 0 (for a
/// symbolic bound, `hi >= lo` is a constraint checked at each call).
fn trip_count(lo: Dim, hi: Dim) -> Result<usize> {
    use anvil_core::shape::{dim_add, dim_sub, require_at_least};
    let count = |d: i64| usize::try_from(d).unwrap_or(0);
    match (lo, hi) {
        (Dim::Int(lo), Dim::Int(hi)) => Ok(count(hi.saturating_sub(lo))),
        (Dim::Int(lo), Dim::Symbolic(hi)) if lo <= 0 => dim_add(hi, lo.unsigned_abs() as usize),
        (lo, hi) => {
            let as_dim = |d: Dim| match d {
                Dim::Int(v) => usize::try_from(v).unwrap_or(0),
                Dim::Symbolic(d) => d,
            };
            let (lo, hi) = (as_dim(lo), as_dim(hi));
            require_at_least("fori_loop", hi, lo, "upper")?;
            dim_sub(hi, lo)
        }
    }
}

/// `body(i, carry)` for `i` in `lower..upper` (`jax.lax.fori_loop`). With
/// bounds known when tracing the loop is a `scan` (reverse mode works);
/// with traced bounds, a `while_loop`.
///
/// ```
/// use anvil::prelude::*;
/// // x <- x / 2 + 1/x, five times (Newton for sqrt(2)).
/// let f = |x: &Var| fori_loop(0, 5, |_: &Var, x: &Var| x * 0.5 + &x.recip(), x);
/// let r = jit(f).eval(&Tensor::scalar(1.0))?;
/// assert!((r.item()? - 2f64.sqrt()).abs() < 1e-15);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// Traced bounds that are not integer scalars; a body whose carry changes.
pub fn fori_loop<M, F, C, L>(
    lower: impl Into<Bound>,
    upper: impl Into<Bound>,
    body: F,
    init: impl Flatten<L>,
) -> Result<C>
where
    F: IntoFunction<M, Args = (Var, C), Output = C>,
    C: Traced,
    L: ToVar,
{
    let (lower, upper) = (lower.into(), upper.into());
    let f = body.into_function();
    if let (Some(lo), Some(hi)) = (lower.dim("lower")?, upper.dim("upper")?) {
        let n = trip_count(lo, hi)?;
        let step =
            |c: &C, i: &Var| -> Result<(C, ())> { Ok((anvil_core::Apply::apply(&f, (i, c))?, ())) };
        let leaves = leaves_of(&init);
        let init_def = init.def();
        let start: Var = lower.var();
        let is = iota_dtype(&[n], 0, DType::I64) + &start;
        let carry: anvil_core::Dyn<Var> = anvil_core::Dyn { def: init_def, leaves };
        let (c, ()) = scan_with(
            step,
            &carry,
            &is,
            ScanOptions { length: Some(n), ..ScanOptions::default() },
        )?;
        return Ok(c);
    }
    for (what, b) in [("lower", &lower), ("upper", &upper)] {
        if let Bound::Traced(v) = b {
            scalar_of("fori_loop", what, v, is_integer(v.dtype()), "an integer scalar")?;
        }
    }
    let (lo, hi) = (lower.var(), upper.var());
    let carry = (lo, anvil_core::Dyn { def: init.def(), leaves: leaves_of(&init) });
    let (_, c): (Var, C) = while_loop(
        move |(i, _): &(Var, C)| i.lt(&hi),
        |(i, c): &(Var, C)| -> Result<(Var, C)> {
            Ok((i + &i.ones_like(), anvil_core::Apply::apply(&f, (i, c))?))
        },
        &carry,
    )?;
    Ok(c)
}

/// `while cond_fn(carry): carry = body_fn(carry)` (`jax.lax.while_loop`),
/// for a carry that is any tree. Only the steps taken run. It has a
/// forward-mode derivative and batches (a batched predicate runs until
/// every element is done, each element keeping its carry once its
/// predicate fails); for reverse mode, bound it with
/// [`while_loop_bounded`].
///
/// ```
/// use anvil::prelude::*;
/// // Halve until below 1: 40 -> 20 -> 10 -> 5 -> 2.5 -> 1.25 -> 0.625.
/// let f = |x: &Var| while_loop(|x: &Var| x.ge(&x.ones_like()), |x: &Var| x * 0.5, x);
/// assert_eq!(jit(f).eval(&Tensor::scalar(40.0))?.item()?, 0.625);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// A predicate that does not return a `bool` scalar; a body whose carry
/// changes structure or type.
pub fn while_loop<MC, MB, P, B, C, L>(cond_fn: P, body_fn: B, init: impl Flatten<L>) -> Result<C>
where
    P: IntoFunction<MC, Args = (C,), Output = Var>,
    B: IntoFunction<MB, Args = (C,), Output = C>,
    C: Traced,
    L: ToVar,
{
    looped(cond_fn, body_fn, init.def(), &leaves_of(&init), None)
}

/// [`while_loop`] of at most `max_steps` steps, which has a reverse-mode
/// derivative: `grad` through it keeps about `2 √max_steps` carries
/// (checkpoints every `√max_steps` steps, recomputing between them), never
/// one per step. Forward, only the steps taken run.
///
/// # Errors
/// As [`while_loop`].
pub fn while_loop_bounded<MC, MB, P, B, C, L>(
    cond_fn: P,
    body_fn: B,
    init: impl Flatten<L>,
    max_steps: usize,
) -> Result<C>
where
    P: IntoFunction<MC, Args = (C,), Output = Var>,
    B: IntoFunction<MB, Args = (C,), Output = C>,
    C: Traced,
    L: ToVar,
{
    looped(cond_fn, body_fn, init.def(), &leaves_of(&init), Some(max_steps))
}

fn looped<MC, MB, P, B, C>(
    cond_fn: P,
    body_fn: B,
    init_def: TreeDef,
    carries: &[Var],
    max_steps: Option<usize>,
) -> Result<C>
where
    P: IntoFunction<MC, Args = (C,), Output = Var>,
    B: IntoFunction<MB, Args = (C,), Output = C>,
    C: Traced,
{
    let def = TreeDef::Tuple(vec![init_def.clone()]);
    let ty = types(carries);
    // The functions' inputs stand for the carries; a carry more general on
    // exit than on entry enters as that (and as general as the predicate:
    // a varying predicate runs each rank its own number of steps), and the
    // functions are traced again.
    let mut carries = carries.to_vec();
    let (p, b) = loop {
        let p = trace_fn_for(&cond_fn.as_function(), &def, &ty, &carries)?;
        let b = trace_fn_for(&body_fn.as_function(), &def, &ty, &carries)?;
        let pred = p.types.first().copied().flatten();
        if !raise_carries(&mut carries, &b.types, pred) {
            break (p, b);
        }
    };
    let carries = &carries[..];
    match &p.graph.output_types()[..] {
        [t] if t.dtype() == DType::Bool && t.rank() == 0 => {}
        [t] => {
            return Err(Error::shape(
                "while_loop",
                &[t.shape()],
                format!("cond_fn must return a bool scalar; it returns {t}"),
            ))
        }
        _ => return Err(Error::invalid("while_loop", "cond_fn", "must return one bool scalar")),
    }
    if b.output != init_def {
        return Err(Error::invalid(
            "while_loop",
            "body_fn",
            format!("returns {}; the carry is {}", b.output.describe(), init_def.describe()),
        ));
    }
    check_carries("while_loop", &ty, &b.graph.output_types())?;
    let consts = union(&[&p, &b]);
    let mut all_types = types(&consts);
    all_types.extend(ty);
    let nc = consts.len();
    let graph = |t: &TracedFn| -> Result<anvil_core::Graph> {
        let from: Vec<usize> =
            (nc..nc + carries.len()).chain(crate::captures::slots(t, &consts)).collect();
        crate::captures::with_inputs(&t.graph, &all_types, &from)
    };
    let w = While {
        cond: graph(&p)?.into(),
        body: graph(&b)?.into(),
        consts: nc,
        max_steps,
        masked: false,
    };
    let mut operands = consts;
    operands.extend(carries.iter().cloned());
    unflatten_all(&init_def, emit_while(w, &operands))
}

/// Raises each carry to its type on exit `exits[k]` joined with `floor`
/// (see [`anvil_core::trace::raise`]); whether any was raised.
fn raise_carries(
    carries: &mut [Var],
    exits: &[Option<anvil_core::trace::TypeBits>],
    floor: Option<anvil_core::trace::TypeBits>,
) -> bool {
    let mut raised = false;
    for (c, exit) in carries.iter_mut().zip(exits) {
        let want = exit.unwrap_or(0) | floor.unwrap_or(0);
        if let Some(t) = type_of(c).filter(|&t| t | want != t) {
            *c = raise(c, want);
            // (A typing that cannot raise leaves the carry as it is.)
            raised |= type_of(c) != Some(t);
        }
    }
    raised
}
