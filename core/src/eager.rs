//! Eager operations on [`Tensor`]s: `&a + &b`, `a.matmul(&b)?`,
//! `a.sum(&[0])?` on concrete values, outside any traced function.
//!
//! There is one implementation of every op, the compiled one. An eager
//! operation is a small traced function over `Var`s (`|v| &v[0] + &v[1]`),
//! compiled by a backend and run on the tensors: the same shape rules,
//! broadcasting, weak-scalar promotion and kernels as a call of a traced
//! function, so an eager result equals the compiled result bit for bit.
//! Compiled plans are kept in a process-wide cache keyed by the operation
//! (a name and its integer parameters: axes, `keepdims`) and the operands'
//! dtypes and shapes, so a repeated eager call costs a cache lookup and the
//! kernel, never a retrace; scalar operands are rank-0 inputs of the plan,
//! so `&a * 2.0` and `&a * 3.0` share one plan. The cache holds at most
//! [`MAX_PLANS`] plans and is emptied when full (a program cycling through
//! more shapes than that recompiles).
//!
//! `core` knows no backend, so the backend registers itself: a crate that
//! can run graphs submits an [`EagerBackend`] through `inventory` (the CPU
//! backend, `anvil-cpu`, does; the `anvil` facade links it). With no
//! backend linked, an eager operation is an [`Error::MissingRule`] naming
//! the operation and telling which crate to link, never a panic in a
//! fallible method. With several, the first registered is used.
//!
//! The named methods (`Tensor::add`, and every method of the ops crate's
//! `TensorExt`: `a.matmul(&b)?`) return `Err` on a shape mismatch, as a
//! call of a traced function does. The operators (`&a + &b`, `-&a`, `&a * 2.0`) cannot
//! return a `Result`: like `ndarray`'s and candle's operators they panic
//! on operands that do not broadcast, with the error's message. Use the
//! named methods where the shapes come from user input.

use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::shape::TensorType;
use crate::tensor::Tensor;
use crate::trace::{weak_promotion, Var};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A compiled eager operation, as a backend runs it.
pub trait EagerPlan: Send + Sync {
    /// Runs the plan on `args` (the operands, in the order of the graph's
    /// inputs).
    ///
    /// # Errors
    /// A run-time error of a kernel.
    fn run(&self, args: &[Tensor]) -> Result<Vec<Tensor>>;
}

/// A backend that runs eager operations: compiles a graph into an
/// [`EagerPlan`]. Registered with `inventory::submit!` by the backend's
/// crate.
#[derive(Debug)]
pub struct EagerBackend {
    /// The backend's name, for messages.
    pub name: &'static str,
    /// Compiles a graph.
    pub compile: fn(&Graph) -> Result<Box<dyn EagerPlan>>,
}

inventory::collect!(EagerBackend);

/// The most plans the eager cache holds before it is emptied.
pub const MAX_PLANS: usize = 1024;

/// An eager operation and its operands' types.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    op: &'static str,
    params: Vec<i64>,
    types: Vec<TensorType>,
}

type Plans = Mutex<HashMap<Key, Arc<dyn EagerPlan>>>;

fn plans() -> &'static Plans {
    static PLANS: OnceLock<Plans> = OnceLock::new();
    PLANS.get_or_init(Plans::default)
}

/// The number of compiled eager plans cached in this process.
pub fn cached_plans() -> usize {
    plans().lock().map_or(0, |p| p.len())
}

fn backend(op: &str) -> Result<&'static EagerBackend> {
    inventory::iter::<EagerBackend>.into_iter().next().ok_or_else(|| Error::MissingRule {
        op: op.into(),
        what: "backend for eager Tensor operations".into(),
        hint: " (link one: depend on the `anvil` facade, or `use anvil_cpu as _;`)".into(),
    })
}

/// Runs the operation `op` with integer parameters `params` on `args`:
/// `build` is the operation as a traced function of one `Var` per
/// argument. Its plan is compiled on the first call with these operand
/// types and cached (see the module docs): `build` must depend on nothing
/// but `op`, `params` and the operands' types.
///
/// ```
/// use anvil_core::{eager, Tensor};
/// # use anvil_core::Var;
/// let a = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let r = eager::run("twice_plus", &[], &[&a, &a], |v: &[Var]| vec![&(&v[0] + &v[1]) + &v[1]]);
/// // `anvil-core` alone links no backend: an error that says which to link.
/// assert!(r.unwrap_err().to_string().contains("anvil_cpu"));
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// # Errors
/// The operation's shape rule failing on these operands (a shape
/// mismatch, an axis out of range), as when tracing; no backend linked; a
/// kernel's run-time error.
pub fn run(
    op: &'static str,
    params: &[i64],
    args: &[&Tensor],
    build: impl FnOnce(&[Var]) -> Vec<Var>,
) -> Result<Vec<Tensor>> {
    let key = Key { op, params: params.to_vec(), types: args.iter().map(|t| t.ty()).collect() };
    let found = plans().lock().ok().and_then(|p| p.get(&key).cloned());
    let plan = match found {
        Some(plan) => plan,
        None => {
            let backend = backend(op)?;
            let graph = crate::function::trace_with(&key.types, |vars| Ok(build(vars)))?;
            let plan: Arc<dyn EagerPlan> = Arc::from((backend.compile)(&graph)?);
            if let Ok(mut p) = plans().lock() {
                if p.len() >= MAX_PLANS {
                    p.clear();
                }
                p.insert(key, plan.clone());
            }
            plan
        }
    };
    let args: Vec<Tensor> = args.iter().map(|t| (*t).clone()).collect();
    plan.run(&args)
}

/// [`run`] for an operation with one result.
///
/// # Errors
/// As [`run`].
pub fn run1(
    op: &'static str,
    params: &[i64],
    args: &[&Tensor],
    build: impl FnOnce(&[Var]) -> Var,
) -> Result<Tensor> {
    let mut out = run(op, params, args, |v| vec![build(v)])?;
    out.pop().ok_or_else(|| Error::invalid(op, "results", "an eager operation returned nothing"))
}

// ---------------------------------------------------------------- arithmetic

/// The right-hand side of an eager arithmetic method: a tensor, or a Rust
/// scalar, weakly typed as in traced arithmetic (`i64_tensor * 2.5` is
/// `f64`, `f32_tensor * 2.0` stays `f32`; see [`Var::with_weak_scalar`]).
#[derive(Clone, Copy, Debug)]
pub enum Rhs<'a> {
    /// A tensor, broadcast against the left-hand side.
    Tensor(&'a Tensor),
    /// A weakly typed scalar.
    Weak(Scalar),
}

/// What an eager arithmetic method takes on its right: `&Tensor`, `f64`
/// or `i64`.
pub trait IntoRhs {
    /// The operand.
    fn rhs(&self) -> Rhs<'_>;
}

impl IntoRhs for &Tensor {
    fn rhs(&self) -> Rhs<'_> {
        Rhs::Tensor(self)
    }
}

impl IntoRhs for f64 {
    fn rhs(&self) -> Rhs<'_> {
        Rhs::Weak(Scalar::F64(*self))
    }
}

impl IntoRhs for i64 {
    fn rhs(&self) -> Rhs<'_> {
        Rhs::Weak(Scalar::I64(*self))
    }
}

/// The traced form of a binary operator.
type BinaryFn = fn(&Var, &Var) -> Var;

/// `a op b` eagerly; `scalar_first` puts a weak scalar on the left
/// (`2.0 - &a`).
fn binary(
    op: &'static str,
    f: BinaryFn,
    a: &Tensor,
    b: Rhs<'_>,
    scalar_first: bool,
) -> Result<Tensor> {
    match b {
        Rhs::Tensor(b) => run1(op, &[0], &[a, b], |v| f(&v[0], &v[1])),
        Rhs::Weak(s) => {
            let target = weak_promotion(a.dtype(), s.dtype());
            let s = Tensor::from_scalar(s.cast(target));
            let side = if scalar_first { 2 } else { 1 };
            run1(op, &[side], &[a, &s], |v| {
                let x = cast_to(&v[0], target);
                if scalar_first {
                    f(&v[1], &x)
                } else {
                    f(&x, &v[1])
                }
            })
        }
    }
}

fn cast_to(v: &Var, dtype: DType) -> Var {
    if v.dtype() == dtype {
        v.clone()
    } else {
        crate::trace::cast(v, dtype)
    }
}

impl Tensor {
    /// `self + rhs` with broadcasting (the `+` operator, returning errors):
    /// `rhs` is a tensor or a weakly typed scalar (see [`Rhs`]). Runs the
    /// compiled `add` kernel (see [`crate::eager`]).
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
    /// let b = Tensor::from_vec(vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0], &[2, 3])?;
    /// assert_eq!(a.add(&b)?.to_vec::<f64>()?, vec![11.0, 22.0, 33.0, 41.0, 52.0, 63.0]);
    /// assert_eq!(a.add(1.0)?.to_vec::<f64>()?, vec![2.0, 3.0, 4.0]);
    /// // Shapes that do not broadcast: an error naming the op and the shapes.
    /// let e = a.add(&Tensor::zeros(&[2])?).unwrap_err();
    /// assert!(e.to_string().contains("add"), "{e}");
    /// # Ok::<(), anvil::Error>(())
    /// ```
    ///
    /// # Errors
    /// Shapes that do not broadcast, dtypes the op does not accept, no
    /// backend linked.
    pub fn add(&self, rhs: impl IntoRhs) -> Result<Tensor> {
        binary("add", |a, b| a + b, self, rhs.rhs(), false)
    }

    /// `self - rhs` (see [`Tensor::add`]).
    ///
    /// # Errors
    /// As [`Tensor::add`].
    pub fn sub(&self, rhs: impl IntoRhs) -> Result<Tensor> {
        binary("sub", |a, b| a - b, self, rhs.rhs(), false)
    }

    /// `self * rhs` (see [`Tensor::add`]).
    ///
    /// # Errors
    /// As [`Tensor::add`].
    pub fn mul(&self, rhs: impl IntoRhs) -> Result<Tensor> {
        binary("mul", |a, b| a * b, self, rhs.rhs(), false)
    }

    /// `self / rhs` (see [`Tensor::add`]).
    ///
    /// # Errors
    /// As [`Tensor::add`].
    pub fn div(&self, rhs: impl IntoRhs) -> Result<Tensor> {
        binary("div", |a, b| a / b, self, rhs.rhs(), false)
    }

    /// `-self` (the `-` operator, returning errors).
    ///
    /// # Errors
    /// A dtype the op does not accept (`bool`), no backend linked.
    pub fn neg(&self) -> Result<Tensor> {
        run1("neg", &[], &[self], |v| -&v[0])
    }
}

/// The operators panic where the named methods return `Err` (see the
/// module docs).
#[track_caller]
fn or_panic(r: Result<Tensor>) -> Tensor {
    r.unwrap_or_else(|e| panic!("{e}"))
}

macro_rules! tensor_operator {
    ($trait:ident, $method:ident, $f:expr) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Tensor;
            /// Panics on shapes that do not broadcast (see [`crate::eager`]).
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                or_panic(binary(stringify!($method), $f, self, Rhs::Tensor(rhs), false))
            }
        }
        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                std::ops::$trait::$method(&self, &rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                std::ops::$trait::$method(self, &rhs)
            }
        }
        tensor_operator!(@scalar $trait, $method, $f, f64);
        tensor_operator!(@scalar $trait, $method, $f, i64);
    };
    (@scalar $trait:ident, $method:ident, $f:expr, $t:ty) => {
        impl std::ops::$trait<$t> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $t) -> Tensor {
                or_panic(binary(stringify!($method), $f, self, rhs.rhs(), false))
            }
        }
        impl std::ops::$trait<$t> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $t) -> Tensor {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                or_panic(binary(stringify!($method), $f, rhs, self.rhs(), true))
            }
        }
        impl std::ops::$trait<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                std::ops::$trait::$method(self, &rhs)
            }
        }
    };
}

tensor_operator!(Add, add, |a, b| a + b);
tensor_operator!(Sub, sub, |a, b| a - b);
tensor_operator!(Mul, mul, |a, b| a * b);
tensor_operator!(Div, div, |a, b| a / b);

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    /// Panics on a dtype `neg` does not accept (see [`crate::eager`]).
    #[track_caller]
    fn neg(self) -> Tensor {
        or_panic(Tensor::neg(self))
    }
}

impl std::ops::Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        -&self
    }
}
