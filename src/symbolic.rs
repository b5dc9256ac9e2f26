//! Functions compiled once for symbolic shapes: trace, transform and build
//! the plan once, run it for every size.
//!
//! A dimension variable ([`dim`]) stands for a size given when the function
//! is called. [`Jit::symbolic`](crate::Jit::symbolic) traces a function at
//! argument types whose shapes use such variables, transforms and compiles
//! it once, and returns a [`Symbolic`] function: every call binds the
//! variables from its arguments' shapes, checks them (each variable's range,
//! the same size wherever a variable appears, the constraints the shape
//! rules recorded), and runs the same plan — no retrace, no recompile, a
//! cache that does not grow with the number of lengths seen.
//!
//! ```
//! use anvil::prelude::*;
//! use anvil::{dim, TensorType};
//!
//! let n = dim("n", 4..=8)?;
//! let mean = jit(|x: &Var| x.mean()).symbolic(&TensorType::new(DType::F64, [n]))?;
//! for len in 4..=8 {
//!     let x = Tensor::from_vec((0..len).map(|i| i as f64).collect(), &[len])?;
//!     assert_eq!(mean.eval(&x)?.item()?, (len - 1) as f64 / 2.0);
//! }
//! // Outside the declared range: an error naming the variable.
//! let e = mean.eval(&Tensor::zeros(&[9])?).unwrap_err();
//! assert!(e.to_string().contains("`n` = 9"));
//! # Ok::<(), anvil::Error>(())
//! ```
//!
//! Shapes are expressions: `2n` after a concatenation, `3n` after a
//! reshape, `n // 2` after a strided slice, evaluated when a call binds
//! `n` (see [`anvil_core::shape`]). Transforms work on symbolic shapes
//! (`grad`, `jvp`, `vmap` over a symbolic batch). A size used as a number
//! is [`VarExt::dim_size`](crate::VarExt::dim_size) or
//! [`ops::dim_value`](crate::ops::dim_value); `mean`, `var` and `std` over
//! a symbolic axis use it. `x.shape()[0] as f64` of a symbolic dimension
//! is the number of its handle, not its size: used as a scalar in the
//! traced function (`x.sum_all() / x.shape()[0] as f64`), it is an error
//! that says so. (The handle's number used in Rust code outside the trace
//! cannot be seen.)
//!
//! Indexing works on a symbolic axis as on a concrete one: integers
//! counted from the end (`x.i(ix![-1])`), traced indices (wrapped and
//! clamped against the bound size), `x.at(ix![..]).set(..)` and the other
//! updates, `lax::dynamic_slice`, `dynamic_update_slice`, `gather`,
//! `scatter`, and `lax::pad` with interior padding. Where NumPy would clamp
//! an index or a bound that depends on the size (`x[5]` or `x[-3:]` when
//! `n` may be 2), the axis must be long enough: a constraint checked at
//! the call, an error naming the variable and its size.
//!
//! Control flow (`cond`, `scan`, `fori_loop`, `while_loop`) works over
//! symbolic shapes and lengths: the plan specialises a loop's op and bodies
//! to a binding's sizes and compiles the bodies the first time it meets
//! that binding (it keeps the last binding's), so the first call at a new
//! length of a program with loops costs those body compilations — never a
//! retrace or a recompile of the function.
//!
//! What is not symbolic: shape rules that compute sizes outside
//! [`anvil_core::shape`]'s arithmetic (such an op's node is refused, naming
//! it), the rewrite rules (they leave nodes of symbolic shapes as traced,
//! so a symbolic plan may be less simplified than a concrete one),
//! and `chunk_size` of a Jacobian or `vmap` over a symbolic size (an
//! error). `associative_scan` along a symbolic axis (the derivatives of
//! `cumprod`, `cummax`, `cummin` and `cumlogsumexp` use it) runs as a
//! sequential `scan` there, since its parallel recursion halves a concrete
//! length: the axis must hold an element (a constraint checked at the
//! call), and ties of `cummax`/`cummin` split along the chain rather than
//! as JAX's tree splits them.

use crate::{cpu, transforms, Error, Flatten, Function, IntoFunction, Jit, Result, Tensor};
use anvil_core::function::{fit_args, Args};
use anvil_core::shape::{collect_constraints, dim_var, Binding, Constraint};
use anvil_core::tree::{unflatten_all, Traced, TreeDef};
use anvil_core::TensorType;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A dimension variable called `name` whose sizes lie in `range`
/// (`4..=8`, `1..`, `..`): a `usize` to use in shapes like any size
/// (`TensorType::new(DType::F64, [n, 3])`). The same name and range give
/// the same variable.
///
/// ```
/// let n = anvil::dim("n", 1..)?;
/// assert!(anvil::core::shape::is_symbolic(n));
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// An invalid name (letters, digits and `_`), an empty range.
pub fn dim(name: &str, range: impl RangeBounds<usize>) -> Result<usize> {
    let min = match range.start_bound() {
        Bound::Included(&m) => m,
        Bound::Excluded(&m) => m.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let max = match range.end_bound() {
        Bound::Included(&m) => Some(m),
        Bound::Excluded(&m) => Some(m.checked_sub(1).ok_or_else(|| {
            Error::invalid("dim", "range", format!("{name}: the range {min}..0 is empty"))
        })?),
        Bound::Unbounded => None,
    };
    dim_var(name, min, max)
}

/// A function traced, transformed and compiled once at symbolic argument
/// types, run with one plan for every binding of its dimension variables
/// (see the [module docs](self)).
pub struct Symbolic<F: Function> {
    name: String,
    /// The structure of the arguments it was compiled for.
    given: TreeDef,
    specs: Vec<TensorType>,
    entry: Arc<Entry>,
    _f: std::marker::PhantomData<fn() -> F::Output>,
}

/// What a [`Jit`]'s cache keeps for a symbolic signature.
struct Entry {
    compiled: transforms::Compiled<cpu::Plan>,
    constraints: Vec<Constraint>,
}

impl<F: Function> std::fmt::Debug for Symbolic<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let specs: Vec<String> = self.specs.iter().map(ToString::to_string).collect();
        write!(f, "Symbolic({}: {})", self.name, specs.join(", "))
    }
}

impl<F: Function> Jit<F> {
    /// Traces, transforms and compiles the function once at argument types
    /// `specs` whose shapes may hold dimension variables ([`dim`]), for
    /// every later call to bind (see [`Symbolic`]). The plan is kept in the
    /// `Jit`'s cache under the symbolic signature: asking for the same
    /// specs again returns the same plan.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// use anvil::{dim, TensorType};
    ///
    /// // The gradient of a loss over a batch of any size n, compiled once.
    /// let n = dim("n", 1..)?;
    /// let loss = |x: &Var| (x.sin() * x).mean_axes(&[0], false).sum_all();
    /// let g = jit(grad(loss)).symbolic(&TensorType::new(DType::F64, [n, 2]))?;
    /// let x = Tensor::from_vec(vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[3, 2])?;
    /// let expected = grad(loss).eval(&x)?;          // traced at [3, 2]
    /// assert!(g.eval(&x)?.allclose(&expected, 1e-15, 0.0));
    /// # Ok::<(), anvil::Error>(())
    /// ```
    ///
    /// # Errors
    /// Specs that do not fit the function's arguments; any error while
    /// tracing or transforming at the symbolic types (a shape rule that
    /// does not understand symbolic dimensions names its op); an op
    /// without a CPU kernel.
    pub fn symbolic(&self, specs: impl Flatten<TensorType>) -> Result<Symbolic<F>> {
        let name = self.name();
        let given = specs.def();
        let specs = specs.leaves();
        let def = fit_args(&name, given.clone(), <F::Args as Args>::ARITY)?;
        // Cached under the symbolic signature: asking again compiles nothing.
        let entry = self.cache.get_or_try_insert(&given, &specs, || {
            let (compiled, constraints) =
                collect_constraints(|| transforms::compile(&self.f, &def, &specs, &cpu::Cpu));
            Ok(Arc::new(Entry { compiled: compiled?, constraints }))
        })?;
        let entry = entry.downcast::<Entry>().map_err(|_| {
            Error::invalid(&name, "cache", "holds another kind of plan for this signature")
        })?;
        Ok(Symbolic { name, given, specs, entry, _f: std::marker::PhantomData })
    }
}

/// Traces, transforms and compiles `f` once for symbolic argument types:
/// `jit(f).symbolic(specs)`.
///
/// # Errors
/// As [`Jit::symbolic`].
pub fn symbolic<M, F: IntoFunction<M>>(
    f: F,
    specs: impl Flatten<TensorType>,
) -> Result<Symbolic<F::Func>> {
    crate::jit(f).symbolic(specs)
}

impl<F: Function> Symbolic<F> {
    /// Runs the compiled plan on `args`, binding the dimension variables
    /// from their shapes.
    ///
    /// # Errors
    /// Arguments of another structure or dtype; a shape that fits no
    /// binding (a fixed size that differs, a variable given two sizes, a
    /// size outside its range, a recorded constraint violated), each
    /// naming the variable and the sizes; a kernel's run-time error.
    pub fn eval(&self, args: impl Flatten<Tensor>) -> Result<<F::Output as Traced>::Concrete> {
        self.eval_with(args, &crate::Parallelism::default())
    }

    /// Like [`Symbolic::eval`] with an explicit parallelism policy.
    ///
    /// # Errors
    /// As [`Symbolic::eval`].
    pub fn eval_with(
        &self,
        args: impl Flatten<Tensor>,
        par: &crate::Parallelism,
    ) -> Result<<F::Output as Traced>::Concrete> {
        let def = args.def();
        if def != self.given {
            return Err(Error::invalid(
                &self.name,
                "arguments",
                format!("structure {def:?}, compiled for {:?}", self.given),
            ));
        }
        let mut leaves = args.leaves();
        let entry = &*self.entry;
        if !entry.constraints.is_empty() {
            self.binding(&leaves)?.check(&entry.constraints)?;
        }
        leaves.extend(entry.compiled.lifted.iter().cloned());
        unflatten_all(&entry.compiled.output, entry.compiled.plan.run(&leaves, par)?)
    }

    /// The sizes the dimension variables take for `args` (checked against
    /// their ranges, not against the recorded constraints).
    ///
    /// # Errors
    /// As [`Symbolic::eval`].
    pub fn bind(&self, args: impl Flatten<Tensor>) -> Result<Binding> {
        self.binding(&args.leaves())
    }

    fn binding(&self, leaves: &[Tensor]) -> Result<Binding> {
        let specs: Vec<&[usize]> = self.specs.iter().map(TensorType::shape).collect();
        let given: Vec<&[usize]> = leaves.iter().map(Tensor::shape).collect();
        Binding::from_shapes(&specs, &given)
    }

    /// The argument types it was compiled for.
    pub fn specs(&self) -> &[TensorType] {
        &self.specs
    }

    /// The constraints on the variables that the shape rules recorded
    /// (`n == m` where an `n`-vector meets an `m`-vector).
    pub fn constraints(&self) -> &[Constraint] {
        &self.entry.constraints
    }

    /// The one plan every call runs.
    pub fn plan(&self) -> &cpu::Plan {
        &self.entry.compiled.plan
    }
}
