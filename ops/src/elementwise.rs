//! Elementwise ops: unary math, binary arithmetic with NumPy broadcasting,
//! comparisons, `select` and `cast`.
//!
//! Every op here is a unit struct (or a struct of plain parameters) whose
//! scalar math per dtype sits beside it, in the traits [`UnaryMath`],
//! [`BinaryMath`] and [`CompareMath`]; the CPU backend turns any op that
//! implements one of these into a kernel with one generic function, and a
//! plugin op gets the same treatment by implementing the trait. The ops are
//! declared by two macros (the `defvectorized` / `defbroadcasting` of this
//! crate), so every op of a family has the same shape rule by construction.
//!
//! Binary ops broadcast inside the op (NumPy rules): a `[3, 1] + [4]` node
//! has type `[3, 4]` and no broadcast node is materialised before it. There
//! is no implicit dtype promotion: both operands must have the same dtype, as
//! in `jax.lax`; `x * 2.0` works because the scalar takes `x`'s dtype.

use anvil_core::shape::broadcast_shapes;
use anvil_core::{op::expect_arity, DType, Error, Op, Result, TensorType};

/// Which dtypes an elementwise op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// `f64` and `f32` only.
    Float,
    /// `f64`, `f32` and `i64`.
    Numeric,
}

impl Domain {
    /// Checks `dtype` against the domain, naming the op and the argument.
    ///
    /// # Errors
    /// [`Error::DType`].
    pub fn check(self, op: &str, arg: usize, dtype: DType) -> Result<()> {
        let ok = match self {
            Domain::Float => dtype.is_float(),
            Domain::Numeric => dtype != DType::Bool,
        };
        let expected = if self == Domain::Float {
            "a float type (f64, f32)"
        } else {
            "a numeric type (f64, f32, i64)"
        };
        if ok {
            Ok(())
        } else {
            Err(Error::dtype(op, arg.to_string(), dtype, expected))
        }
    }
}

/// The shape rule of every unary elementwise op: same type out as in.
///
/// # Errors
/// A wrong number of inputs or a dtype outside `domain`.
pub fn unary_rule(op: &dyn Op, domain: Domain, inputs: &[TensorType]) -> Result<TensorType> {
    expect_arity(op, inputs, 1)?;
    domain.check(op.name(), 0, inputs[0].dtype)?;
    Ok(inputs[0].clone())
}

/// The shape rule of every binary elementwise op: equal dtypes, broadcast shapes.
/// The output dtype is `out` if given (comparisons give `Bool`).
///
/// # Errors
/// A wrong number of inputs, mismatched dtypes, shapes that do not broadcast.
pub fn binary_rule(
    op: &dyn Op,
    domain: Domain,
    out: Option<DType>,
    inputs: &[TensorType],
) -> Result<TensorType> {
    expect_arity(op, inputs, 2)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    domain.check(op.name(), 0, a.dtype)?;
    if a.dtype != b.dtype {
        return Err(Error::dtype(
            op.name(),
            "1",
            b.dtype,
            format!("the dtype of argument 0 ({})", a.dtype),
        ));
    }
    let shape = broadcast_shapes(op.name(), &a.shape, &b.shape, "1")?;
    Ok(TensorType::new(out.unwrap_or(a.dtype), shape))
}

/// Scalar math of a unary elementwise op, per dtype. The CPU backend maps it
/// over tensors; implement it for a plugin op to get a kernel for free.
pub trait UnaryMath: Op {
    /// The op on one `f64`.
    fn f64(&self, x: f64) -> f64;
    /// The op on one `f32`.
    fn f32(&self, x: f32) -> f32;
    /// The op on one `i64` (only called when the shape rule admits `i64`).
    fn i64(&self, x: i64) -> i64 {
        x
    }
}

/// Scalar math of a binary elementwise op, per dtype.
pub trait BinaryMath: Op {
    /// The op on two `f64`s.
    fn f64(&self, a: f64, b: f64) -> f64;
    /// The op on two `f32`s.
    fn f32(&self, a: f32, b: f32) -> f32;
    /// The op on two `i64`s (only called when the shape rule admits `i64`).
    fn i64(&self, a: i64, b: i64) -> i64 {
        let _ = b;
        a
    }
}

/// A comparison: two operands of one dtype to `Bool`.
pub trait CompareMath: Op {
    /// The comparison.
    fn compare<T: PartialOrd>(&self, a: T, b: T) -> bool;
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident = $s:literal, $domain:ident, |$x:ident| $body:expr, int: |$xi:ident| $ibody:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl Op for $name {
            fn name(&self) -> &'static str {
                $s
            }
            fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
                unary_rule(self, Domain::$domain, inputs)
            }
        }

        impl UnaryMath for $name {
            fn f64(&self, $x: f64) -> f64 {
                $body
            }
            fn f32(&self, $x: f32) -> f32 {
                $body
            }
            #[allow(unused_variables)]
            fn i64(&self, $xi: i64) -> i64 {
                $ibody
            }
        }
    )*};
}

/// Float helpers shared by the `f64` and `f32` instantiations of the unary bodies.
trait Special: Copy {
    fn erf(self) -> Self;
}
impl Special for f64 {
    fn erf(self) -> Self {
        libm::erf(self)
    }
}
impl Special for f32 {
    fn erf(self) -> Self {
        libm::erff(self)
    }
}

unary_ops! {
    /// `-x`.
    Neg = "neg", Numeric, |x| -x, int: |x| x.wrapping_neg();
    /// `sin(x)`.
    Sin = "sin", Float, |x| x.sin(), int: |x| x;
    /// `cos(x)`.
    Cos = "cos", Float, |x| x.cos(), int: |x| x;
    /// `tan(x)`.
    Tan = "tan", Float, |x| x.tan(), int: |x| x;
    /// `e^x`.
    Exp = "exp", Float, |x| x.exp(), int: |x| x;
    /// Natural logarithm.
    Log = "log", Float, |x| x.ln(), int: |x| x;
    /// `log(1 + x)`, accurate near 0.
    Log1p = "log1p", Float, |x| x.ln_1p(), int: |x| x;
    /// `e^x - 1`, accurate near 0.
    Expm1 = "expm1", Float, |x| x.exp_m1(), int: |x| x;
    /// Square root.
    Sqrt = "sqrt", Float, |x| x.sqrt(), int: |x| x;
    /// `1 / sqrt(x)`.
    Rsqrt = "rsqrt", Float, |x| x.sqrt().recip(), int: |x| x;
    /// `1 / x`.
    Recip = "recip", Float, |x| x.recip(), int: |x| x;
    /// Hyperbolic tangent.
    Tanh = "tanh", Float, |x| x.tanh(), int: |x| x;
    /// The logistic sigmoid `1 / (1 + e^-x)`, computed without overflow.
    Logistic = "logistic", Float, |x| if x >= 0.0 { (1.0 + (-x).exp()).recip() } else { x.exp() / (1.0 + x.exp()) }, int: |x| x;
    /// `|x|`.
    Abs = "abs", Numeric, |x| x.abs(), int: |x| x.wrapping_abs();
    /// `-1`, `0` or `1` by the sign of `x` (`sign(±0) = ±0`, NaN stays NaN).
    Sign = "sign", Numeric, |x| if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x }, int: |x| x.signum();
    /// Round toward negative infinity.
    Floor = "floor", Float, |x| x.floor(), int: |x| x;
    /// Round toward positive infinity.
    Ceil = "ceil", Float, |x| x.ceil(), int: |x| x;
    /// Round to nearest, ties to even (as `numpy.round`).
    Round = "round", Float, |x| x.round_ties_even(), int: |x| x;
    /// The error function.
    Erf = "erf", Float, |x| Special::erf(x), int: |x| x;
    /// The identity, whose derivative is zero: differentiation treats its
    /// result as a constant (`jax.lax.stop_gradient`).
    StopGradient = "stop_gradient", Numeric, |x| x, int: |x| x;
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident = $s:literal, $domain:ident, |$a:ident, $b:ident| $body:expr, int: |$ai:ident, $bi:ident| $ibody:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl Op for $name {
            fn name(&self) -> &'static str {
                $s
            }
            fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
                binary_rule(self, Domain::$domain, None, inputs)
            }
        }

        impl BinaryMath for $name {
            fn f64(&self, $a: f64, $b: f64) -> f64 {
                $body
            }
            fn f32(&self, $a: f32, $b: f32) -> f32 {
                $body
            }
            #[allow(unused_variables)]
            fn i64(&self, $ai: i64, $bi: i64) -> i64 {
                $ibody
            }
        }
    )*};
}

binary_ops! {
    /// `a + b`.
    Add = "add", Numeric, |a, b| a + b, int: |a, b| a.wrapping_add(b);
    /// `a - b`.
    Sub = "sub", Numeric, |a, b| a - b, int: |a, b| a.wrapping_sub(b);
    /// `a * b`.
    Mul = "mul", Numeric, |a, b| a * b, int: |a, b| a.wrapping_mul(b);
    /// `a / b`; integer division rounds toward zero and gives 0 for a zero divisor.
    Div = "div", Numeric, |a, b| a / b, int: |a, b| a.checked_div(b).unwrap_or(0);
    /// `a ^ b`.
    Pow = "pow", Float, |a, b| a.powf(b), int: |a, b| a;
    /// Elementwise maximum; NaN if either is NaN (as `numpy.maximum`).
    Max = "max", Numeric, |a, b| if a.is_nan() || b.is_nan() { a + b } else { a.max(b) }, int: |a, b| a.max(b);
    /// Elementwise minimum; NaN if either is NaN.
    Min = "min", Numeric, |a, b| if a.is_nan() || b.is_nan() { a + b } else { a.min(b) }, int: |a, b| a.min(b);
    /// `atan2(a, b)`, the angle of the point `(b, a)`.
    Atan2 = "atan2", Float, |a, b| a.atan2(b), int: |a, b| a;
}

macro_rules! compare_ops {
    ($($(#[$doc:meta])* $name:ident = $s:literal, |$a:ident, $b:ident| $body:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl Op for $name {
            fn name(&self) -> &'static str {
                $s
            }
            fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
                expect_arity(self, inputs, 2)?;
                let domain = if inputs[0].dtype == DType::Bool { None } else { Some(Domain::Numeric) };
                match domain {
                    Some(d) => binary_rule(self, d, Some(DType::Bool), inputs),
                    None => bool_compare_rule(self, inputs),
                }
            }
        }

        impl CompareMath for $name {
            fn compare<T: PartialOrd>(&self, $a: T, $b: T) -> bool {
                $body
            }
        }
    )*};
}

fn bool_compare_rule(op: &dyn Op, inputs: &[TensorType]) -> Result<TensorType> {
    if inputs[1].dtype != DType::Bool {
        return Err(Error::dtype(op.name(), "1", inputs[1].dtype, "bool, the dtype of argument 0"));
    }
    let shape = broadcast_shapes(op.name(), &inputs[0].shape, &inputs[1].shape, "1")?;
    Ok(TensorType::new(DType::Bool, shape))
}

compare_ops! {
    /// `a < b`.
    Lt = "lt", |a, b| a < b;
    /// `a <= b`.
    Le = "le", |a, b| a <= b;
    /// `a > b`.
    Gt = "gt", |a, b| a > b;
    /// `a >= b`.
    Ge = "ge", |a, b| a >= b;
    /// `a == b`.
    Eq = "eq", |a, b| a == b;
    /// `a != b`.
    Ne = "ne", |a, b| a != b;
}

/// `where(cond, on_true, on_false)`: picks elementwise; all three broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Select;

impl Op for Select {
    fn name(&self) -> &'static str {
        "select"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 3)?;
        let (c, t, f) = (&inputs[0], &inputs[1], &inputs[2]);
        if c.dtype != DType::Bool {
            return Err(Error::dtype("select", "0 (cond)", c.dtype, "bool"));
        }
        if t.dtype != f.dtype {
            return Err(Error::dtype(
                "select",
                "2 (on_false)",
                f.dtype,
                format!("the dtype of on_true ({})", t.dtype),
            ));
        }
        let s = broadcast_shapes("select", &t.shape, &f.shape, "2 (on_false)")?;
        let s = broadcast_shapes("select", &c.shape, &s, "0 (cond)")?;
        Ok(TensorType::new(t.dtype, s))
    }
}

/// Conversion to another dtype, with `as`-cast semantics (float to int truncates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cast {
    /// The target dtype.
    pub dtype: DType,
}

impl Op for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(TensorType::new(self.dtype, inputs[0].shape.clone()))
    }
    fn params(&self) -> String {
        self.dtype.to_string()
    }
}

// ---------------------------------------------------------------- rules

use crate::batching::vmap_elementwise;
use anvil_core::register_rule;

macro_rules! register_elementwise {
    ($($op:ident),*) => {
        $( register_rule!(VmapRule, $op, vmap_elementwise); )*
    };
}

register_elementwise!(
    Neg,
    Sin,
    Cos,
    Tan,
    Exp,
    Log,
    Log1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Recip,
    Tanh,
    Logistic,
    Abs,
    Sign,
    Floor,
    Ceil,
    Round,
    Erf,
    StopGradient,
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    Atan2,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Select,
    Cast
);

// ------------------------------------------------------------ derivatives

use crate::ad::{add_tangents, dense, scale, unbroadcast};
use crate::api::VarExt;
use anvil_core::{LinearArg, Var};

/// The derivative of a unary elementwise op: `dy/dx` at `x`, given `y =
/// op(x)`, as a traced value; `None` where it is zero everywhere (`floor`).
/// Implementing it gives an op its jvp rule through [`jvp_unary`], and
/// reverse mode follows (the tangent is `t * dy/dx`, which transposes).
pub trait UnaryDerivative: Op {
    /// `dy/dx`, elementwise.
    fn derivative(&self, x: &Var, y: &Var) -> Option<Var>;
}

/// The jvp rule of every unary op with a [`UnaryDerivative`]: `t * dy/dx`.
///
/// # Errors
/// An op of another type than `O` (a registration bug).
pub fn jvp_unary<O: UnaryDerivative>(
    op: &dyn Op,
    primals: &[Var],
    tangents: &[Option<Var>],
    out: &Var,
) -> Result<Option<Var>> {
    let o = op.try_downcast::<O>()?;
    expect_arity(op, primals, 1)?;
    Ok(match (&tangents[0], o.derivative(&primals[0], out)) {
        (Some(t), Some(d)) => Some(t * &d),
        _ => None,
    })
}

macro_rules! unary_derivatives {
    ($($op:ident => |$x:ident, $y:ident| $d:expr;)*) => {$(
        impl UnaryDerivative for $op {
            #[allow(unused_variables)]
            fn derivative(&self, $x: &Var, $y: &Var) -> Option<Var> {
                $d
            }
        }
        register_rule!(JvpRule, $op, jvp_unary::<$op>);
    )*};
}

unary_derivatives! {
    Sin => |x, y| Some(x.cos());
    Cos => |x, y| Some(-x.sin());
    Tan => |x, y| Some(y.square() + 1.0);
    Exp => |x, y| Some(y.clone());
    Log => |x, y| Some(x.recip());
    Log1p => |x, y| Some((x + 1.0).recip());
    Expm1 => |x, y| Some(y + 1.0);
    Sqrt => |x, y| Some(y.recip() * 0.5);
    Rsqrt => |x, y| Some(y / x * -0.5);
    Recip => |x, y| Some(-y.square());
    Tanh => |x, y| Some(1.0 - y.square());
    Logistic => |x, y| Some(y * &(1.0 - y));
    Abs => |x, y| Some(x.sign());
    Erf => |x, y| Some((-x.square()).exp() * std::f64::consts::FRAC_2_SQRT_PI);
    Sign => |x, y| None;
    Floor => |x, y| None;
    Ceil => |x, y| None;
    Round => |x, y| None;
    StopGradient => |x, y| None;
}

fn jvp_neg(_: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| -t))
}

fn transpose_neg(_: &dyn Op, ct: &Var, _: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(vec![Some(-ct)])
}

fn jvp_add(_: &dyn Op, _: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    Ok(add_tangents(t[0].clone(), t[1].clone(), out.shape()))
}

fn jvp_sub(_: &dyn Op, _: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    Ok(add_tangents(t[0].clone(), t[1].as_ref().map(|t| -t), out.shape()))
}

/// The cotangent of each linear operand of `a ± b`: `ct` (negated for the
/// subtrahend), summed down to the operand's shape.
fn transpose_add_sub(sign: f64, ct: &Var, args: &[LinearArg]) -> Vec<Option<Var>> {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            a.is_linear().then(|| {
                let c = unbroadcast(ct, a.shape());
                if i == 1 && sign < 0.0 {
                    -c
                } else {
                    c
                }
            })
        })
        .collect()
}

fn transpose_add(_: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(transpose_add_sub(1.0, ct, args))
}

fn transpose_sub(_: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(transpose_add_sub(-1.0, ct, args))
}

fn jvp_mul(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let da = scale(&t[0], || p[1].clone());
    let db = scale(&t[1], || p[0].clone());
    Ok(add_tangents(da, db, out.shape()))
}

/// `a * b` is linear in whichever operand is not known.
fn transpose_mul(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    match (args[0].known(), args[1].known()) {
        (None, Some(b)) => Ok(vec![Some(unbroadcast(&(ct * b), args[0].shape())), None]),
        (Some(a), None) => Ok(vec![None, Some(unbroadcast(&(ct * a), args[1].shape()))]),
        _ => Err(nonlinear(op, "exactly one operand")),
    }
}

fn jvp_div(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let da = t[0].as_ref().map(|t| t / &p[1]);
    let db = t[1].as_ref().map(|t| -(t * &(out / &p[1])));
    Ok(add_tangents(da, db, out.shape()))
}

/// `a / b` is linear in `a` for a known `b`.
fn transpose_div(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    match (&args[0], args[1].known()) {
        (LinearArg::Linear(a), Some(b)) => Ok(vec![Some(unbroadcast(&(ct / b), &a.shape)), None]),
        _ => Err(nonlinear(op, "the numerator only")),
    }
}

fn nonlinear(op: &dyn Op, which: &str) -> Error {
    Error::invalid(
        op.name(),
        "transpose",
        format!("the op is linear in {which}; a jvp rule emitted it on tangents otherwise"),
    )
}

fn jvp_pow(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let (a, b) = (&p[0], &p[1]);
    let da = scale(&t[0], || b * &a.pow(&(b - 1.0)));
    // log(a) where a != 0, so that 0^b with a tangent on b stays finite (as JAX).
    let db = scale(&t[1], || {
        let safe = a.equal(&a.zeros_like()).select(&a.ones_like(), a);
        out * &safe.log()
    });
    Ok(add_tangents(da, db, out.shape()))
}

/// The share of `a` in `max(a, b)` (`min` with `lt`): 1 where it wins, 1/2 at ties.
fn winner_share(a: &Var, b: &Var, wins: Var) -> Var {
    let dt = a.dtype();
    wins.cast(dt) + a.equal(b).cast(dt) * 0.5
}

fn jvp_max_min(p: &[Var], t: &[Option<Var>], out: &Var, is_max: bool) -> Option<Var> {
    let (a, b) = (&p[0], &p[1]);
    let wins = |x: &Var, y: &Var| if is_max { x.gt(y) } else { x.lt(y) };
    let da = scale(&t[0], || winner_share(a, b, wins(a, b)));
    let db = scale(&t[1], || winner_share(b, a, wins(b, a)));
    add_tangents(da, db, out.shape())
}

fn jvp_max(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    Ok(jvp_max_min(p, t, out, true))
}

fn jvp_min(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    Ok(jvp_max_min(p, t, out, false))
}

fn jvp_atan2(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let (a, b) = (&p[0], &p[1]);
    let r2 = || a.square() + b.square();
    let da = scale(&t[0], || b / &r2());
    let db = scale(&t[1], || -(a / &r2()));
    Ok(add_tangents(da, db, out.shape()))
}

fn jvp_select(_: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    if t[1].is_none() && t[2].is_none() {
        return Ok(None);
    }
    Ok(Some(p[0].select(&dense(&t[1], &p[1]), &dense(&t[2], &p[2]))))
}

/// `select(c, x, y)` is linear in its branches for a known condition.
fn transpose_select(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = args[0].known().ok_or_else(|| nonlinear(op, "its branches"))?;
    let zero = ct.zeros_like();
    let branch = |i: usize, on: &Var, off: &Var| {
        args[i].is_linear().then(|| unbroadcast(&c.select(on, off), args[i].shape()))
    };
    Ok(vec![None, branch(1, ct, &zero), branch(2, &zero, ct)])
}

/// A tangent only flows through float-to-float casts.
fn jvp_cast(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    let c = op.try_downcast::<Cast>()?;
    Ok(t[0]
        .as_ref()
        .filter(|_| c.dtype.is_float() && p[0].dtype().is_float())
        .map(|t| t.cast(c.dtype)))
}

fn transpose_cast(_: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(vec![match &args[0] {
        LinearArg::Linear(t) => Some(ct.cast(t.dtype)),
        LinearArg::Known(_) => None,
    }])
}

fn jvp_zero(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(None)
}

register_rule!(JvpRule, Neg, jvp_neg);
register_rule!(TransposeRule, Neg, transpose_neg);
register_rule!(JvpRule, Add, jvp_add);
register_rule!(TransposeRule, Add, transpose_add);
register_rule!(JvpRule, Sub, jvp_sub);
register_rule!(TransposeRule, Sub, transpose_sub);
register_rule!(JvpRule, Mul, jvp_mul);
register_rule!(TransposeRule, Mul, transpose_mul);
register_rule!(JvpRule, Div, jvp_div);
register_rule!(TransposeRule, Div, transpose_div);
register_rule!(JvpRule, Pow, jvp_pow);
register_rule!(JvpRule, Max, jvp_max);
register_rule!(JvpRule, Min, jvp_min);
register_rule!(JvpRule, Atan2, jvp_atan2);
register_rule!(JvpRule, Select, jvp_select);
register_rule!(TransposeRule, Select, transpose_select);
register_rule!(JvpRule, Cast, jvp_cast);
register_rule!(TransposeRule, Cast, transpose_cast);
register_rule!(JvpRule, Lt, jvp_zero);
register_rule!(JvpRule, Le, jvp_zero);
register_rule!(JvpRule, Gt, jvp_zero);
register_rule!(JvpRule, Ge, jvp_zero);
register_rule!(JvpRule, Eq, jvp_zero);
register_rule!(JvpRule, Ne, jvp_zero);

/// Declares a float unary elementwise op from its scalar function and its
/// derivative, with every rule: the op struct and its shape rule, its
/// [`UnaryMath`] (so the CPU backend's generic `unary` kernel applies: one
/// `register_kernel!` line in a backend crate), its batching rule and its
/// jvp rule (reverse mode follows by transposition).
///
/// ```
/// use anvil_ops::{unary_elementwise_op, VarExt};
///
/// unary_elementwise_op! {
///     /// `x³`, a plugin op.
///     pub struct Cube = "myplugin.cube";
///     f64: |x| x * x * x;
///     f32: |x| x * x * x;
///     derivative: |x, _y| x.square() * 3.0;
/// }
/// ```
#[macro_export]
macro_rules! unary_elementwise_op {
    (
        $(#[$doc:meta])* $vis:vis struct $name:ident = $s:literal;
        f64: |$x:ident| $f64:expr;
        f32: |$x32:ident| $f32:expr;
        derivative: |$dx:ident, $dy:ident| $d:expr;
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        $vis struct $name;

        impl $crate::anvil_core::Op for $name {
            fn name(&self) -> &'static str {
                $s
            }
            fn infer(
                &self,
                inputs: &[$crate::anvil_core::TensorType],
            ) -> $crate::anvil_core::Result<$crate::anvil_core::TensorType> {
                $crate::elementwise::unary_rule(self, $crate::elementwise::Domain::Float, inputs)
            }
        }

        impl $crate::elementwise::UnaryMath for $name {
            fn f64(&self, $x: f64) -> f64 {
                $f64
            }
            fn f32(&self, $x32: f32) -> f32 {
                $f32
            }
        }

        impl $crate::elementwise::UnaryDerivative for $name {
            #[allow(unused_variables)]
            fn derivative(
                &self,
                $dx: &$crate::anvil_core::Var,
                $dy: &$crate::anvil_core::Var,
            ) -> Option<$crate::anvil_core::Var> {
                Some($d)
            }
        }

        $crate::anvil_core::register_rule!(VmapRule, $name, $crate::batching::vmap_elementwise);
        $crate::anvil_core::register_rule!(JvpRule, $name, $crate::elementwise::jvp_unary::<$name>);
    };
}
