//! Elementwise ops: unary math, binary arithmetic with NumPy broadcasting,
//! comparisons, `select` and `cast` — each op's definition, shape rule,
//! scalar math, batching, jvp, transpose and rewrite rules side by side.
//!
//! Every unary op is declared with [`unary_elementwise_op!`](crate::unary_elementwise_op) and every
//! binary one with [`binary_elementwise_op!`](crate::binary_elementwise_op), the same public macros a
//! plugin crate uses, so the plugin path is exercised by the whole standard
//! library. A declaration gives the op struct, its shape rule, its scalar
//! math per dtype ([`UnaryMath`], [`BinaryMath`]) and the block math every
//! backend runs it with ([`ElementwiseMath`], through [`unary_block`] and
//! [`binary_block`]), the facts passes rely on (elementwise, linear in
//! which operands), and its batching and jvp rules. Transpose and rewrite
//! rules are registered beside the op with `register_rule!`.
//!
//! Binary ops broadcast inside the op (NumPy rules): a `[3, 1] + [4]` node
//! has type `[3, 4]` and no broadcast node is materialised before it. The
//! ops take one dtype, as in `jax.lax`; the operators and `VarExt`'s
//! binary methods promote their operands first (`anvil_core::promote_types`,
//! JAX's lattice), and `x * 2.0` works because the scalar is weakly typed.

use anvil_core::shape::broadcast_shapes;
use anvil_core::{
    op::expect_arity, register_rule, Arith, Block, BlockAt, BlockMut, Compare, DType,
    ElementwiseMath, Error, LinearArg, Op, Result, TensorType, Var,
};

use crate::ad::{add_tangents, dense, scale, unbroadcast};
use crate::api::VarExt;

/// Which dtypes an elementwise op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// `f64` and `f32` only.
    Float,
    /// `f64`, `f32` and `i64`.
    Numeric,
}

impl Domain {
    /// `Numeric` when integers are admitted, else `Float`.
    pub fn admitting_int(int: bool) -> Domain {
        if int {
            Domain::Numeric
        } else {
            Domain::Float
        }
    }

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
    domain.check(op.name(), 0, inputs[0].dtype())?;
    Ok(inputs[0].clone())
}

/// The shape rule of every binary elementwise op: equal dtypes, broadcast
/// shapes. The output dtype is `out` if given (comparisons give `Bool`).
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
    domain.check(op.name(), 0, a.dtype())?;
    if a.dtype() != b.dtype() {
        return Err(Error::dtype(
            op.name(),
            "1",
            b.dtype(),
            format!("the dtype of argument 0 ({})", a.dtype()),
        ));
    }
    let shape = broadcast_shapes(op.name(), a.shape(), b.shape(), "1")?;
    Ok(TensorType::new(out.unwrap_or(a.dtype()), shape))
}

// ------------------------------------------------------------------- math

/// Scalar math of a unary elementwise op, per dtype. [`unary_block`] maps
/// it over blocks; an op may override the block forms with vectorised code.
pub trait UnaryMath: Op {
    /// The op on one `f64`.
    fn f64(&self, x: f64) -> f64;
    /// The op on one `f32`.
    fn f32(&self, x: f32) -> f32;
    /// The op on one `i64` (only called when the shape rule admits `i64`).
    fn i64(&self, x: i64) -> i64 {
        x
    }
    /// The op on a block of `f64`s (`out.len() == x.len()`).
    fn f64_block(&self, x: &[f64], out: &mut [f64]) {
        map1(x, out, |v| self.f64(v));
    }
    /// The op on a block of `f32`s.
    fn f32_block(&self, x: &[f32], out: &mut [f32]) {
        map1(x, out, |v| self.f32(v));
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

/// `$f::<C>` for the op type `C` of the comparison `$c` (a
/// [`Compare`](anvil_core::Compare)): the one map from the comparison fact
/// to the ops' math, for loops generic over [`CompareMath`] that need the
/// comparison inside their own element loop.
///
/// ```
/// use anvil_core::Compare;
/// use anvil_ops::by_comparison;
/// use anvil_ops::elementwise::CompareMath;
///
/// fn holds<C: CompareMath + Default>(a: f64, b: f64) -> bool {
///     C::default().compare(a, b)
/// }
/// assert!(by_comparison!(Compare::Le, holds)(2.0, 2.0));
/// assert!(!by_comparison!(Compare::Lt, holds)(2.0, 2.0));
/// ```
#[macro_export]
macro_rules! by_comparison {
    ($c:expr, $f:ident) => {
        match $c {
            $crate::anvil_core::Compare::Lt => $f::<$crate::elementwise::Lt>,
            $crate::anvil_core::Compare::Le => $f::<$crate::elementwise::Le>,
            $crate::anvil_core::Compare::Gt => $f::<$crate::elementwise::Gt>,
            $crate::anvil_core::Compare::Ge => $f::<$crate::elementwise::Ge>,
            $crate::anvil_core::Compare::Eq => $f::<$crate::elementwise::Eq>,
            $crate::anvil_core::Compare::Ne => $f::<$crate::elementwise::Ne>,
        }
    };
}

// ------------------------------------------------------------ wide loops

/// The vector instructions the block loops run with. Each loop over a block
/// (`map1`, `map2`, `select`'s `map3`) is compiled for baseline x86-64 (SSE2,
/// two `f64` lanes), for AVX2 and for AVX-512, and runs the widest the CPU
/// has ([`Width::detect`]). The loops apply the same scalar function to
/// each element, in order and without contraction into fused
/// multiply-adds, so every width gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Width {
    /// Baseline instructions (any CPU).
    Base,
    /// AVX2 (x86-64): four `f64` lanes.
    Avx2,
    /// AVX-512 F, BW, VL, DQ (x86-64): eight `f64` lanes.
    Avx512,
}

impl Width {
    /// The widest this CPU has (found once).
    ///
    /// ```
    /// use anvil_ops::elementwise::Width;
    /// assert!(Width::available().contains(&Width::detect()));
    /// ```
    pub fn detect() -> Width {
        static WIDTH: std::sync::OnceLock<Width> = std::sync::OnceLock::new();
        *WIDTH.get_or_init(|| *Width::available().last().unwrap_or(&Width::Base))
    }

    /// Every width this CPU runs, narrowest first (`Base` always).
    ///
    /// ```
    /// use anvil_ops::elementwise::Width;
    /// assert_eq!(Width::available()[0], Width::Base);
    /// ```
    pub fn available() -> Vec<Width> {
        let mut w = vec![Width::Base];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                w.push(Width::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512dq")
            {
                w.push(Width::Avx512);
            }
        }
        w
    }
}

/// Runs a body compiled once per vector width and picks the copy for a
/// [`Width`](crate::elementwise::Width) at run time. It is the one width
/// dispatch of anvil's autovectorised loops (the block loops here, the CPU
/// backend's lane chains and micro interpreter); kernels written with
/// intrinsics (vectorised math, blocked transposes) check their own
/// features.
///
/// `at_width!(w, fn[generics](arg: Type = value, ...) -> Ret { body })`
/// declares `body` as an `#[inline(always)]` function of the listed
/// arguments, a copy of it compiled with `target_feature` for each width,
/// and calls the copy for `w` with the values (the baseline copy when the
/// CPU lacks `w`, so tests can run every width
/// [`Width::available`](crate::elementwise::Width::available) lists and
/// compare). The body sees only its arguments (it is a nested function);
/// `fn[...]`'s generic parameters, optional, must be inferable from the
/// argument types. Loops that use no intrinsics and are not contracted
/// into fused multiply-adds (Rust never contracts `a * b + c`) give the
/// same bits at every width.
///
/// ```
/// use anvil_ops::{at_width, elementwise::Width};
///
/// fn scale(w: Width, x: &[f64], k: f64, out: &mut [f64]) {
///     at_width!(w, fn(x: &[f64] = x, k: f64 = k, out: &mut [f64] = out) {
///         for (d, &v) in out.iter_mut().zip(x) {
///             *d = v * k;
///         }
///     })
/// }
///
/// let x: Vec<f64> = (0..37).map(|i| i as f64 / 7.0).collect();
/// let mut want = vec![0.0; 37];
/// scale(Width::Base, &x, 3.0, &mut want);
/// for w in Width::available() {
///     let mut got = vec![0.0; 37];
///     scale(w, &x, 3.0, &mut got);
///     assert_eq!(got, want);
/// }
///
/// // Generic bodies, and a result:
/// fn total<T: Copy + std::iter::Sum<T>>(w: Width, x: &[T]) -> T {
///     at_width!(w, fn[T: Copy + std::iter::Sum<T>](x: &[T] = x) -> T { x.iter().copied().sum() })
/// }
/// assert_eq!(total(Width::detect(), &[1_i64, 2, 3]), 6);
/// ```
#[macro_export]
macro_rules! at_width {
    (
        $w:expr,
        fn $([$($gen:tt)*])? ($($arg:ident: $ty:ty = $val:expr),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {{
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        fn base $(<$($gen)*>)? ($($arg: $ty),*) $(-> $ret)? $body

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        #[allow(clippy::too_many_arguments)]
        fn avx2 $(<$($gen)*>)? ($($arg: $ty),*) $(-> $ret)? {
            base($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
        #[allow(clippy::too_many_arguments)]
        fn avx512 $(<$($gen)*>)? ($($arg: $ty),*) $(-> $ret)? {
            base($($arg),*)
        }

        let w: $crate::elementwise::Width = $w;
        $(let $arg: $ty = $val;)*
        #[cfg(target_arch = "x86_64")]
        let result = match w {
            // SAFETY: `detect` is the widest width `available` lists,
            // which it does only when the CPU has every feature of that
            // copy and of the narrower ones; calling a `target_feature`
            // function needs nothing else.
            $crate::elementwise::Width::Avx512 if w <= $crate::elementwise::Width::detect() => unsafe {
                avx512($($arg),*)
            },
            // SAFETY: as above (a CPU with AVX-512 has AVX2).
            $crate::elementwise::Width::Avx2 if w <= $crate::elementwise::Width::detect() => unsafe {
                avx2($($arg),*)
            },
            _ => base($($arg),*),
        };
        #[cfg(not(target_arch = "x86_64"))]
        let result = {
            let _ = w;
            base($($arg),*)
        };
        result
    }};
}

/// Declares a block loop `$name` (the widest width the CPU has) and
/// `$name_at` (a given width; the baseline loop for a width the CPU lacks).
macro_rules! wide_loop {
    (
        $(#[$doc:meta])*
        fn $name:ident, $at:ident <$($g:ident $(: $bound:path)?),*> ($($arg:ident: $ty:ty),*) by $f:ident
        where F: [$($fty:tt)+]
        $body:block
    ) => {
        $(#[$doc])*
        fn $name<$($g $(: $bound)?,)* F: $($fty)+>($($arg: $ty,)* $f: F) {
            $at(Width::detect(), $($arg,)* $f)
        }

        /// The loop of the same name at width `w` (for tests comparing the
        /// widths); the baseline loop when the CPU lacks `w`.
        fn $at<$($g $(: $bound)?,)* F: $($fty)+>(w: Width, $($arg: $ty,)* $f: F) {
            $crate::at_width!(
                w,
                fn[$($g $(: $bound)?,)* F: $($fty)+]($($arg: $ty = $arg,)* $f: F = $f) $body
            )
        }
    };
}

wide_loop! {
    /// `out[i] = f(x[i])` over a block.
    fn map1, map1_at<T: Copy, U>(x: &[T], out: &mut [U]) by f where F: [Fn(T) -> U]
    {
        for (d, &v) in out.iter_mut().zip(x) {
            *d = f(v);
        }
    }
}

wide_loop! {
    /// `out[i] = f(a[i], b[i])` over a block.
    fn map2, map2_at<T: Copy, U>(a: &[T], b: &[T], out: &mut [U]) by f where F: [Fn(T, T) -> U]
    {
        for ((d, &p), &q) in out.iter_mut().zip(a).zip(b) {
            *d = f(p, q);
        }
    }
}

wide_loop! {
    /// `out[i] = f(c[i], t[i], e[i])` over a block (`select`'s loop).
    fn map3, map3_at<C: Copy, T: Copy, U>(c: &[C], t: &[T], e: &[T], out: &mut [U]) by f
    where F: [Fn(C, T, T) -> U]
    {
        for (((d, &c), &t), &e) in out.iter_mut().zip(c).zip(t).zip(e) {
            *d = f(c, t, e);
        }
    }
}

/// A block loop `out[i] = f(a[i], b[i])` over `f64` slices of one length.
pub type F64BinaryLoop = fn(&[f64], &[f64], &mut [f64]);

/// The block loop of binary `f64` arithmetic, `out[i] = a[i] ∘ b[i]`, at
/// the widest width the CPU has, for callers that run many small blocks
/// and resolve the loop once (a lane-group loop). The same bits as the
/// block math of every op declaring that [`Arith`] (one IEEE operation per
/// element). `None` for [`Arith::Neg`] (one operand).
///
/// # Panics
/// When an operand's length differs from the result's (a caller's bug: the
/// loop would otherwise leave the rest of the result unwritten).
///
/// ```
/// use anvil_core::Arith;
/// use anvil_ops::elementwise::f64_arith_loop;
/// let div = f64_arith_loop(Arith::Div).unwrap();
/// let mut out = [0.0; 3];
/// div(&[1.0, 2.0, 3.0], &[2.0, 4.0, 8.0], &mut out);
/// assert_eq!(out, [0.5, 0.5, 0.375]);
/// assert!(f64_arith_loop(Arith::Neg).is_none());
/// ```
pub fn f64_arith_loop(arith: Arith) -> Option<F64BinaryLoop> {
    // The arithmetic each op's own math does (written once, in its
    // `binary_elementwise_op!`).
    fn by<B: BinaryMath + Default>(a: &[f64], b: &[f64], out: &mut [f64]) {
        same_lengths("f64_arith_loop", &[a.len(), b.len()], out.len());
        let op = B::default();
        map2(a, b, out, |p, q| op.f64(p, q));
    }
    match arith {
        Arith::Add => Some(by::<Add>),
        Arith::Sub => Some(by::<Sub>),
        Arith::Mul => Some(by::<Mul>),
        Arith::Div => Some(by::<Div>),
        Arith::Neg => None,
    }
}

/// A block loop `out[i] = a[i] ⋈ b[i]` comparing `f64` slices of one length.
pub type F64CompareLoop = fn(&[f64], &[f64], &mut [bool]);

/// The block loop of an `f64` comparison at the widest width the CPU has,
/// for callers that resolve the loop once (see [`f64_arith_loop`]): the
/// same results as the block math of every op declaring that [`Compare`].
///
/// # Panics
/// When an operand's length differs from the result's (a caller's bug: the
/// loop would otherwise leave the rest of the result unwritten).
///
/// ```
/// use anvil_core::Compare;
/// use anvil_ops::elementwise::f64_compare_loop;
/// let mut out = [false; 3];
/// f64_compare_loop(Compare::Ge)(&[1.0, 2.0, f64::NAN], &[2.0, 2.0, 0.0], &mut out);
/// assert_eq!(out, [false, true, false]);
/// ```
pub fn f64_compare_loop(c: Compare) -> F64CompareLoop {
    // The comparison each op's own math makes (written once, in
    // `compare_ops!`).
    fn by<C: CompareMath + Default>(a: &[f64], b: &[f64], out: &mut [bool]) {
        same_lengths("f64_compare_loop", &[a.len(), b.len()], out.len());
        let op = C::default();
        map2(a, b, out, |p, q| op.compare(p, q));
    }
    crate::by_comparison!(c, by)
}

/// `out[i] = if c[i] { t[i] } else { f[i] }` over `f64` blocks of one
/// length, at the widest width the CPU has: the bits of the picked
/// operand, as the block math of [`Select`] (and of every op declaring
/// [`Op::is_select`]).
///
/// # Panics
/// When an operand's length differs from the result's (a caller's bug: the
/// loop would otherwise leave the rest of the result unwritten).
///
/// ```
/// use anvil_ops::elementwise::select_f64;
/// let mut out = [0.0; 2];
/// select_f64(&[true, false], &[1.0, 2.0], &[-1.0, f64::NAN], &mut out);
/// assert_eq!(out[0], 1.0);
/// assert!(out[1].is_nan());
/// ```
pub fn select_f64(c: &[bool], t: &[f64], f: &[f64], out: &mut [f64]) {
    same_lengths("select_f64", &[c.len(), t.len(), f.len()], out.len());
    pick(c, t, f, out);
}

/// `out[i] = if c[i] { t[i] } else { f[i] }` over `bool` blocks of one
/// length (see [`select_f64`]).
///
/// # Panics
/// When an operand's length differs from the result's (a caller's bug: the
/// loop would otherwise leave the rest of the result unwritten).
///
/// ```
/// use anvil_ops::elementwise::select_bool;
/// let mut out = [false; 2];
/// select_bool(&[true, false], &[true, true], &[false, false], &mut out);
/// assert_eq!(out, [true, false]);
/// ```
pub fn select_bool(c: &[bool], t: &[bool], f: &[bool], out: &mut [bool]) {
    same_lengths("select_bool", &[c.len(), t.len(), f.len()], out.len());
    pick(c, t, f, out);
}

/// The precondition of the public block loops: every operand has the
/// result's length.
#[inline(always)]
#[track_caller]
fn same_lengths(loop_name: &str, operands: &[usize], out: usize) {
    assert!(
        operands.iter().all(|&n| n == out),
        "{loop_name}: operands of {operands:?} elements for a result of {out}"
    );
}

/// The error for operand blocks an op's block math does not handle.
pub fn block_error(op: &dyn Op, args: &[Block<'_>], out: &BlockMut<'_>) -> Error {
    let ins: Vec<String> = args.iter().map(|b| b.dtype().to_string()).collect();
    Error::invalid(
        op.name(),
        "dtypes",
        format!("no block math for ({}) -> {}", ins.join(", "), out.dtype()),
    )
}

/// The block math of every [`UnaryMath`] op.
///
/// # Errors
/// Blocks of a dtype the op does not handle.
pub fn unary_block<O: UnaryMath>(o: &O, args: &[Block<'_>], out: BlockMut<'_>) -> Result<()> {
    match (args, out) {
        ([Block::F64(x)], BlockMut::F64(y)) => o.f64_block(x, y),
        ([Block::F32(x)], BlockMut::F32(y)) => o.f32_block(x, y),
        ([Block::I64(x)], BlockMut::I64(y)) => map1(x, y, |v| o.i64(v)),
        (args, out) => return Err(block_error(o, args, &out)),
    }
    Ok(())
}

/// The block math of every [`BinaryMath`] op.
///
/// # Errors
/// Blocks of a dtype the op does not handle.
pub fn binary_block<O: BinaryMath>(o: &O, args: &[Block<'_>], out: BlockMut<'_>) -> Result<()> {
    match (args, out) {
        ([Block::F64(a), Block::F64(b)], BlockMut::F64(y)) => map2(a, b, y, |p, q| o.f64(p, q)),
        ([Block::F32(a), Block::F32(b)], BlockMut::F32(y)) => map2(a, b, y, |p, q| o.f32(p, q)),
        ([Block::I64(a), Block::I64(b)], BlockMut::I64(y)) => map2(a, b, y, |p, q| o.i64(p, q)),
        (args, out) => return Err(block_error(o, args, &out)),
    }
    Ok(())
}

/// The block math of every [`CompareMath`] op.
///
/// # Errors
/// Blocks of a dtype the op does not handle.
pub fn compare_block<O: CompareMath>(o: &O, args: &[Block<'_>], out: BlockMut<'_>) -> Result<()> {
    let cmp = |p, q| o.compare(p, q);
    match (args, out) {
        ([Block::F64(a), Block::F64(b)], BlockMut::Bool(y)) => map2(a, b, y, cmp),
        ([Block::F32(a), Block::F32(b)], BlockMut::Bool(y)) => {
            map2(a, b, y, |p, q| o.compare(p, q))
        }
        ([Block::I64(a), Block::I64(b)], BlockMut::Bool(y)) => {
            map2(a, b, y, |p, q| o.compare(p, q))
        }
        ([Block::Bool(a), Block::Bool(b)], BlockMut::Bool(y)) => {
            map2(a, b, y, |p, q| o.compare(p, q))
        }
        (args, out) => return Err(block_error(o, args, &out)),
    }
    Ok(())
}

// ------------------------------------------------------------ derivatives

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

// ----------------------------------------------------------------- macros

/// Declares a unary elementwise op from its scalar function and its
/// derivative, with every rule: the op struct and its shape rule, its
/// [`UnaryMath`] and block math (so every backend runs and fuses it with no
/// kernel of its own), its batching rule and its jvp rule (reverse mode
/// follows by transposition). Every built-in unary op is declared with it.
///
/// `float: |x| ...;` gives one body for `f64` and `f32`, or give `f64:` and
/// `f32:` separately; an `i64:` body admits integers too. The derivative is
/// `derivative: |x, y| dy/dx;` (`y` is the op's result) or `derivative:
/// zero;` for a piecewise-constant op.
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
        float: |$x:ident| $f:expr;
        $(i64: |$xi:ident| $i64:expr;)?
        derivative: $($d:tt)+
    ) => {
        $crate::unary_elementwise_op! {
            $(#[$doc])* $vis struct $name = $s;
            f64: |$x| $f;
            f32: |$x| $f;
            $(i64: |$xi| $i64;)?
            derivative: $($d)+
        }
    };
    (
        $(#[$doc:meta])* $vis:vis struct $name:ident = $s:literal;
        f64: |$x:ident| $f64:expr;
        f32: |$x32:ident| $f32:expr;
        $(i64: |$xi:ident| $i64:expr;)?
        derivative: $($d:tt)+
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
                let domain = $crate::elementwise::Domain::admitting_int(
                    false $(|| { let _ = stringify!($xi); true })?,
                );
                $crate::elementwise::unary_rule(self, domain, inputs)
            }
            fn is_elementwise(&self) -> bool {
                true
            }
            fn elementwise_math(&self) -> Option<&dyn $crate::anvil_core::ElementwiseMath> {
                Some(self)
            }
            fn f64_map(&self) -> Option<$crate::anvil_core::op::F64Map> {
                fn map(x: &[f64], out: &mut [f64]) {
                    $crate::elementwise::UnaryMath::f64_block(&$name, x, out)
                }
                Some(map)
            }
        }

        impl $crate::elementwise::UnaryMath for $name {
            fn f64(&self, $x: f64) -> f64 {
                $f64
            }
            fn f32(&self, $x32: f32) -> f32 {
                $f32
            }
            $(
                fn i64(&self, $xi: i64) -> i64 {
                    $i64
                }
            )?
        }

        impl $crate::anvil_core::ElementwiseMath for $name {
            fn eval_block(
                &self,
                args: &[$crate::anvil_core::Block<'_>],
                out: $crate::anvil_core::BlockMut<'_>,
                _at: $crate::anvil_core::BlockAt<'_>,
            ) -> $crate::anvil_core::Result<()> {
                $crate::elementwise::unary_block(self, args, out)
            }
        }

        $crate::__unary_derivative!($name, $($d)+);

        $crate::anvil_core::register_rule!(VmapRule, $name, $crate::batching::vmap_elementwise);
        $crate::anvil_core::register_rule!(JvpRule, $name, $crate::elementwise::jvp_unary::<$name>);
    };
}

/// The [`UnaryDerivative`] of a [`unary_elementwise_op!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __unary_derivative {
    ($name:ident, zero;) => {
        impl $crate::elementwise::UnaryDerivative for $name {
            fn derivative(
                &self,
                _: &$crate::anvil_core::Var,
                _: &$crate::anvil_core::Var,
            ) -> Option<$crate::anvil_core::Var> {
                None
            }
        }
    };
    ($name:ident, |$dx:ident, $dy:ident| $d:expr;) => {
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
    };
}

/// Declares a binary elementwise op (NumPy broadcasting, both operands of
/// one dtype) from its scalar function and its jvp rule: the op struct and
/// its shape rule, its [`BinaryMath`] and block math, the fact of which
/// operands it is linear in, its batching rule and its jvp rule. Register
/// a transpose rule (for an op linear in some operand) and rewrite rules
/// beside it with `register_rule!`. An op that computes one of the field
/// operations says which after its `linear_in` line (`arith: Add;`, see
/// [`Arith`](anvil_core::Arith)), and backends and loop passes treat it as
/// they treat `+`.
///
/// ```
/// use anvil_core::{Op, Result, Var};
/// use anvil_ops::{binary_elementwise_op, ad::{add_tangents, scale}};
///
/// // d hypot(a, b) = (a da + b db) / hypot(a, b)
/// fn jvp_hypot(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
///     let da = scale(&t[0], || &p[0] / out);
///     let db = scale(&t[1], || &p[1] / out);
///     Ok(add_tangents(da, db, out.shape()))
/// }
///
/// binary_elementwise_op! {
///     /// `sqrt(a² + b²)`, a plugin op.
///     pub struct Hypot = "myplugin.hypot";
///     domain: Float;
///     float: |a, b| a.hypot(b);
///     jvp: jvp_hypot;
/// }
/// ```
#[macro_export]
macro_rules! binary_elementwise_op {
    (
        $(#[$doc:meta])* $vis:vis struct $name:ident = $s:literal;
        domain: $domain:ident;
        float: |$a:ident, $b:ident| $f:expr;
        $(i64: |$ai:ident, $bi:ident| $i64:expr;)?
        $(linear_in: [$($k:literal),*];)?
        $(arith: $arith:ident;)?
        jvp: $jvp:expr;
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
                $crate::elementwise::binary_rule(self, $crate::elementwise::Domain::$domain, None, inputs)
            }
            fn is_elementwise(&self) -> bool {
                true
            }
            fn linear_in(&self, k: usize) -> bool {
                let _ = k;
                false $($(|| k == $k)*)?
            }
            fn elementwise_math(&self) -> Option<&dyn $crate::anvil_core::ElementwiseMath> {
                Some(self)
            }
            fn arith(&self) -> Option<$crate::anvil_core::Arith> {
                None $(.or(Some($crate::anvil_core::Arith::$arith)))?
            }
        }

        impl $crate::elementwise::BinaryMath for $name {
            fn f64(&self, $a: f64, $b: f64) -> f64 {
                $f
            }
            fn f32(&self, $a: f32, $b: f32) -> f32 {
                $f
            }
            $(
                fn i64(&self, $ai: i64, $bi: i64) -> i64 {
                    $i64
                }
            )?
        }

        impl $crate::anvil_core::ElementwiseMath for $name {
            fn eval_block(
                &self,
                args: &[$crate::anvil_core::Block<'_>],
                out: $crate::anvil_core::BlockMut<'_>,
                _at: $crate::anvil_core::BlockAt<'_>,
            ) -> $crate::anvil_core::Result<()> {
                $crate::elementwise::binary_block(self, args, out)
            }
        }

        $crate::anvil_core::register_rule!(VmapRule, $name, $crate::batching::vmap_elementwise);
        $crate::anvil_core::register_rule!(JvpRule, $name, $jvp);
    };
}

// ------------------------------------------------------------ unary ops

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

unary_elementwise_op! {
    /// `sin(x)`. `d sin(x) = cos(x) dx`.
    pub struct Sin = "sin";
    float: |x| x.sin();
    derivative: |x, y| x.cos();
}
unary_elementwise_op! {
    /// `cos(x)`. `d cos(x) = -sin(x) dx`.
    pub struct Cos = "cos";
    float: |x| x.cos();
    derivative: |x, y| -x.sin();
}
unary_elementwise_op! {
    /// `tan(x)`. `d tan(x) = (1 + tan²(x)) dx`.
    pub struct Tan = "tan";
    float: |x| x.tan();
    derivative: |x, y| y.square() + 1.0;
}
unary_elementwise_op! {
    /// `e^x`. `d e^x = e^x dx`.
    pub struct Exp = "exp";
    float: |x| x.exp();
    derivative: |x, y| y.clone();
}
unary_elementwise_op! {
    /// Natural logarithm. `d log(x) = dx / x`.
    pub struct Log = "log";
    float: |x| x.ln();
    derivative: |x, y| x.recip();
}
unary_elementwise_op! {
    /// `log(1 + x)`, accurate near 0. `d = dx / (1 + x)`.
    pub struct Log1p = "log1p";
    float: |x| x.ln_1p();
    derivative: |x, y| (x + 1.0).recip();
}
unary_elementwise_op! {
    /// `e^x - 1`, accurate near 0. `d = e^x dx`.
    pub struct Expm1 = "expm1";
    float: |x| x.exp_m1();
    derivative: |x, y| y + 1.0;
}
unary_elementwise_op! {
    /// Square root. `d sqrt(x) = dx / (2 sqrt(x))`.
    pub struct Sqrt = "sqrt";
    float: |x| x.sqrt();
    derivative: |x, y| y.recip() * 0.5;
}
unary_elementwise_op! {
    /// `1 / sqrt(x)`. `d = -y / (2x) dx`.
    pub struct Rsqrt = "rsqrt";
    float: |x| x.sqrt().recip();
    derivative: |x, y| y / x * -0.5;
}
unary_elementwise_op! {
    /// `1 / x`. `d = -y² dx`.
    pub struct Recip = "recip";
    float: |x| x.recip();
    derivative: |x, y| -y.square();
}
unary_elementwise_op! {
    /// Hyperbolic tangent. `d tanh(x) = (1 - tanh²(x)) dx`.
    pub struct Tanh = "tanh";
    float: |x| x.tanh();
    derivative: |x, y| 1.0 - y.square();
}
unary_elementwise_op! {
    /// The logistic sigmoid `1 / (1 + e^-x)`, computed without overflow.
    /// `d = y (1 - y) dx`.
    pub struct Logistic = "logistic";
    float: |x| if x >= 0.0 { (1.0 + (-x).exp()).recip() } else { x.exp() / (1.0 + x.exp()) };
    derivative: |x, y| y * &(1.0 - y);
}
unary_elementwise_op! {
    /// `|x|`. `d |x| = dx` where `x >= 0`, `-dx` elsewhere: JAX's rule, so
    /// the derivative at `±0` is 1 (`torch.abs` gives 0) and at NaN -1.
    pub struct Abs = "abs";
    float: |x| x.abs();
    i64: |x| x.wrapping_abs();
    derivative: |x, y| {
        let one = x.ones_like();
        x.ge(&x.zeros_like()).select(&one, &-&one)
    };
}
unary_elementwise_op! {
    /// `-1`, `0` or `1` by the sign of `x` (`sign(±0) = ±0`, NaN stays NaN).
    pub struct Sign = "sign";
    float: |x| if x > 0.0 { 1.0 } else if x < 0.0 { -1.0 } else { x };
    i64: |x| x.signum();
    derivative: zero;
}
unary_elementwise_op! {
    /// Round toward negative infinity.
    pub struct Floor = "floor";
    float: |x| x.floor();
    derivative: zero;
}
unary_elementwise_op! {
    /// Round toward positive infinity.
    pub struct Ceil = "ceil";
    float: |x| x.ceil();
    derivative: zero;
}
unary_elementwise_op! {
    /// Round to nearest, ties to even (as `numpy.round`).
    pub struct Round = "round";
    float: |x| x.round_ties_even();
    derivative: zero;
}
unary_elementwise_op! {
    /// The error function. `d erf(x) = 2/sqrt(π) e^(-x²) dx`.
    pub struct Erf = "erf";
    float: |x| Special::erf(x);
    derivative: |x, y| (-x.square()).exp() * std::f64::consts::FRAC_2_SQRT_PI;
}
unary_elementwise_op! {
    /// The identity, whose derivative is zero: differentiation treats its
    /// result as a constant (`jax.lax.stop_gradient`).
    pub struct StopGradient = "stop_gradient";
    float: |x| x;
    i64: |x| x;
    derivative: zero;
}

/// `-x`: linear, so written by hand (its jvp is `-t`, and it has a
/// transpose rule), with the same block math as the macro-declared ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Neg;

impl Op for Neg {
    fn name(&self) -> &'static str {
        "neg"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        unary_rule(self, Domain::Numeric, inputs)
    }
    fn is_elementwise(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
    fn arith(&self) -> Option<anvil_core::Arith> {
        Some(anvil_core::Arith::Neg)
    }
}

impl UnaryMath for Neg {
    fn f64(&self, x: f64) -> f64 {
        -x
    }
    fn f32(&self, x: f32) -> f32 {
        -x
    }
    fn i64(&self, x: i64) -> i64 {
        x.wrapping_neg()
    }
}

impl ElementwiseMath for Neg {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        unary_block(self, args, out)
    }
}

/// `d(-x) = -dx`.
fn jvp_neg(_: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| -t))
}

fn transpose_neg(_: &dyn Op, ct: &Var, _: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    Ok(vec![Some(-ct)])
}

/// `-(-x) = x`; `-(M * a) = M * (-a)` for a 0/1 mask `M` of the result's
/// shape and a smaller `a` (a `jacfwd` seed times a derivative): exact for
/// `M` in {0, 1}, NaN and infinities included, and the negation moves onto
/// the small operand. Cost: one large pass fewer.
fn rewrite_neg(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    if let Some(d) = crate::diagonal::negate(&args[0], out) {
        return Ok(Some(d));
    }
    if let Some(d) = crate::sparse::negate(&args[0], out) {
        return Ok(Some(d));
    }
    let Some(p) = args[0].producer() else { return Ok(None) };
    if p.op_as::<Neg>().is_some() && p.inputs[0].ty() == out {
        return Ok(Some(p.inputs[0].clone()));
    }
    if p.op_as::<Mul>().is_none() || args[0].ty() != out {
        return Ok(None);
    }
    let small = |v: &Var| v.numel() < out.numel();
    let full_mask = |m: &Var| m.shape() == out.shape() && crate::constant::is_zero_one(m);
    let (m, a) = (&p.inputs[0], &p.inputs[1]);
    let found = if full_mask(m) && small(a) {
        Some((m, a))
    } else if full_mask(a) && small(m) {
        Some((a, m))
    } else {
        None
    };
    Ok(found.map(|(m, a)| m * &(-a)).filter(|v| v.ty() == out))
}

register_rule!(VmapRule, Neg, crate::batching::vmap_elementwise);
register_rule!(JvpRule, Neg, jvp_neg);
register_rule!(TransposeRule, Neg, transpose_neg);
register_rule!(RewriteRule, Neg, rewrite_neg);

// ----------------------------------------------------------- binary ops

binary_elementwise_op! {
    /// `a + b`. `d(a + b) = da + db`.
    pub struct Add = "add";
    domain: Numeric;
    float: |a, b| a + b;
    i64: |a, b| a.wrapping_add(b);
    linear_in: [0, 1];
    arith: Add;
    jvp: jvp_add;
}
binary_elementwise_op! {
    /// `a - b`. `d(a - b) = da - db`.
    pub struct Sub = "sub";
    domain: Numeric;
    float: |a, b| a - b;
    i64: |a, b| a.wrapping_sub(b);
    linear_in: [0, 1];
    arith: Sub;
    jvp: jvp_sub;
}
binary_elementwise_op! {
    /// `a * b`. `d(a b) = b da + a db`.
    pub struct Mul = "mul";
    domain: Numeric;
    float: |a, b| a * b;
    i64: |a, b| a.wrapping_mul(b);
    linear_in: [0, 1];
    arith: Mul;
    jvp: jvp_mul;
}
binary_elementwise_op! {
    /// `a / b`; integer division rounds toward zero, and as XLA's (so
    /// `lax.div` in JAX) gives -1 for a zero divisor and wraps
    /// `i64::MIN / -1` to `i64::MIN`. `d(a / b) = da / b - (a / b) db / b`.
    pub struct Div = "div";
    domain: Numeric;
    float: |a, b| a / b;
    i64: |a, b| if b == 0 { -1 } else { a.wrapping_div(b) };
    linear_in: [0];
    arith: Div;
    jvp: jvp_div;
}
binary_elementwise_op! {
    /// `a ^ b`.
    pub struct Pow = "pow";
    domain: Float;
    float: |a, b| a.powf(b);
    jvp: jvp_pow;
}
binary_elementwise_op! {
    /// Elementwise maximum; NaN if either is NaN (as `numpy.maximum`).
    pub struct Max = "max";
    domain: Numeric;
    float: |a, b| if a.is_nan() || b.is_nan() { a + b } else { a.max(b) };
    i64: |a, b| a.max(b);
    jvp: jvp_max;
}
binary_elementwise_op! {
    /// Elementwise minimum; NaN if either is NaN.
    pub struct Min = "min";
    domain: Numeric;
    float: |a, b| if a.is_nan() || b.is_nan() { a + b } else { a.min(b) };
    i64: |a, b| a.min(b);
    jvp: jvp_min;
}
binary_elementwise_op! {
    /// `atan2(a, b)`, the angle of the point `(b, a)`.
    pub struct Atan2 = "atan2";
    domain: Float;
    float: |a, b| a.atan2(b);
    jvp: jvp_atan2;
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
        (LinearArg::Linear(a), Some(b)) => Ok(vec![Some(unbroadcast(&(ct / b), a.shape())), None]),
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
    // b a^(b-1), and 0 where b = 0 (x^0 is constant; 0 * 0^-1 would be NaN
    // at a = 0), as JAX's rule.
    let da = scale(&t[0], || {
        let d = b * &a.pow(&(b - 1.0));
        b.equal(&b.zeros_like()).select(&d.zeros_like(), &d)
    });
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

/// `d atan2(a, b) = (b da - a db) / (a² + b²)`.
fn jvp_atan2(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let (a, b) = (&p[0], &p[1]);
    let r2 = || a.square() + b.square();
    let da = scale(&t[0], || b / &r2());
    let db = scale(&t[1], || -(a / &r2()));
    Ok(add_tangents(da, db, out.shape()))
}

// ------------------------------------------------------- binary rewrites

use crate::constant::is_filled_with;

/// `x` itself when it already has the result's type (the op would only
/// broadcast or copy it).
fn keeps(x: &Var, out: &TensorType) -> Option<Var> {
    (x.ty() == out).then(|| x.clone())
}

/// `x * 1`, `1 * x` → `x` (exact; one node fewer); a seed's diagonals
/// times a vector → diagonals (see [`crate::diagonal`]; one generator
/// instead of a product over the large shape).
fn rewrite_mul(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let (a, b) = (&args[0], &args[1]);
    Ok(if is_filled_with(b, 1.0) {
        keeps(a, out)
    } else if is_filled_with(a, 1.0) {
        keeps(b, out)
    } else {
        crate::diagonal::product(a, b, false, out)
            .or_else(|| crate::sparse::product(a, b, false, out))
    })
}

/// `x / 1` → `x` (exact; one node fewer); diagonals divided by a vector →
/// diagonals.
fn rewrite_div(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    Ok(if is_filled_with(&args[1], 1.0) {
        keeps(&args[0], out)
    } else {
        crate::diagonal::product(&args[0], &args[1], true, out)
            .or_else(|| crate::sparse::product(&args[0], &args[1], true, out))
    })
}

/// `x ^ 1` → `x`, `x ^ 2` → `x * x` (one multiply, correctly rounded, as
/// the correctly rounded `pow` of glibc and of Rust's `powf` gives; XLA
/// rewrites small integer powers the same way): the `3 u²` of `d u³`
/// costs a multiply, not a call to `pow`.
fn rewrite_pow(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let (x, p) = (&args[0], &args[1]);
    Ok(if is_filled_with(p, 1.0) {
        keeps(x, out)
    } else if is_filled_with(p, 2.0) && x.ty() == out {
        Some(x * x)
    } else {
        None
    })
}

/// Rewrites of a sum or a difference (the Jacobians of `jacfwd` are sums
/// of `seed * derivative` terms):
///
/// - `x + 0`, `0 + x`, `x - 0` → `x` (exact up to the sign of a zero);
/// - diagonals ± diagonals → one diagonals node (see [`crate::diagonal`]);
/// - `a + (-b)` → `a - b`, `(-a) + b` → `b - a`, `a - (-b)` → `a + b`;
/// - `c*x ± c*y` → `c * (x ± y)`, and `(a + c*x) ± c*y` → `a + c * (x ± y)`:
///   with `c` a large seed and `x`, `y` small derivatives, one product over
///   the large shape instead of two.
///
/// Cost: each removes a node or a pass over the result's shape.
fn rewrite_add_sub(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let is_add = op.is::<Add>();
    let (a, b) = (&args[0], &args[1]);
    if is_filled_with(b, 0.0) {
        return Ok(keeps(a, out));
    }
    if let Some(d) = crate::diagonal::combine(a, b, !is_add, out)
        .or_else(|| crate::sparse::combine(a, b, !is_add, out))
    {
        return Ok(Some(d));
    }
    if is_add && is_filled_with(a, 0.0) {
        return Ok(keeps(b, out));
    }
    let negated = |v: &Var| v.producer().filter(|p| p.op_as::<Neg>().is_some());
    let product = |v: &Var| v.producer().filter(|p| p.op_as::<Mul>().is_some());
    let checked = |v: Var| Some(v).filter(|v| v.ty() == out);
    if let Some(nb) = negated(b) {
        let x = &nb.inputs[0];
        return Ok(checked(if is_add { a - x } else { a + x }));
    }
    if let (true, Some(na)) = (is_add, negated(a)) {
        return Ok(checked(b - &na.inputs[0]));
    }
    let combine = |x: &Var, y: &Var| if is_add { x + y } else { x - y };
    // The common factor of two products, and their other factors.
    let common = |p: &[Var], q: &[Var]| {
        let same = |u: &Var, v: &Var| u.id().is_some() && u.id() == v.id();
        if same(&p[0], &q[0]) {
            Some((p[0].clone(), p[1].clone(), q[1].clone()))
        } else if same(&p[1], &q[1]) {
            Some((p[1].clone(), p[0].clone(), q[0].clone()))
        } else {
            None
        }
    };
    let Some(q) = product(b) else { return Ok(None) };
    if let Some(p) = product(a) {
        if let Some((c, x, y)) = common(&p.inputs, &q.inputs) {
            return Ok(checked(&c * &combine(&x, &y)));
        }
    }
    // (a0 + c*x) ± c*y
    if let Some(left) = a.producer().filter(|p| p.op_as::<Add>().is_some()) {
        let (a0, a1) = (&left.inputs[0], &left.inputs[1]);
        if let Some(p) = product(a1) {
            if let Some((c, x, y)) = common(&p.inputs, &q.inputs) {
                return Ok(checked(a0 + &(&c * &combine(&x, &y))));
            }
        }
    }
    Ok(None)
}

register_rule!(TransposeRule, Add, transpose_add);
register_rule!(RewriteRule, Add, rewrite_add_sub);
register_rule!(TransposeRule, Sub, transpose_sub);
register_rule!(RewriteRule, Sub, rewrite_add_sub);
register_rule!(TransposeRule, Mul, transpose_mul);
register_rule!(RewriteRule, Mul, rewrite_mul);
register_rule!(TransposeRule, Div, transpose_div);
register_rule!(RewriteRule, Div, rewrite_div);
register_rule!(RewriteRule, Pow, rewrite_pow);

// ------------------------------------------------------------ comparisons

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
                compare_rule(self, inputs)
            }
            fn is_elementwise(&self) -> bool {
                true
            }
            fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
                Some(self)
            }
            fn comparison(&self) -> Option<anvil_core::Compare> {
                Some(anvil_core::Compare::$name)
            }
        }

        impl CompareMath for $name {
            fn compare<T: PartialOrd>(&self, $a: T, $b: T) -> bool {
                $body
            }
        }

        impl ElementwiseMath for $name {
            fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
                compare_block(self, args, out)
            }
        }

        register_rule!(VmapRule, $name, crate::batching::vmap_elementwise);
        register_rule!(JvpRule, $name, jvp_zero);
    )*};
}

/// The shape rule of comparisons: two operands of one dtype (bool too), to bool.
fn compare_rule(op: &dyn Op, inputs: &[TensorType]) -> Result<TensorType> {
    expect_arity(op, inputs, 2)?;
    if inputs[0].dtype() != DType::Bool {
        return binary_rule(op, Domain::Numeric, Some(DType::Bool), inputs);
    }
    if inputs[1].dtype() != DType::Bool {
        return Err(Error::dtype(
            op.name(),
            "1",
            inputs[1].dtype(),
            "bool, the dtype of argument 0",
        ));
    }
    let shape = broadcast_shapes(op.name(), inputs[0].shape(), inputs[1].shape(), "1")?;
    Ok(TensorType::new(DType::Bool, shape))
}

/// Comparisons, and other ops with a boolean or integer result, carry no tangent.
fn jvp_zero(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(None)
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

// ----------------------------------------------------------------- select

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
        if c.dtype() != DType::Bool {
            return Err(Error::dtype("select", "0 (cond)", c.dtype(), "bool"));
        }
        if t.dtype() != f.dtype() {
            return Err(Error::dtype(
                "select",
                "2 (on_false)",
                f.dtype(),
                format!("the dtype of on_true ({})", t.dtype()),
            ));
        }
        let s = broadcast_shapes("select", t.shape(), f.shape(), "2 (on_false)")?;
        let s = broadcast_shapes("select", c.shape(), &s, "0 (cond)")?;
        Ok(TensorType::new(t.dtype(), s))
    }
    fn is_elementwise(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 1 || k == 2
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
    fn is_select(&self) -> bool {
        true
    }
}

fn pick<T: Copy + Blend>(c: &[bool], t: &[T], f: &[T], out: &mut [T]) {
    map3(c, t, f, out, T::blend);
}

/// `if c { t } else { f }` without a branch, so the loop over a block
/// vectorises (a select's condition is data, often unpredictable).
trait Blend: Copy {
    fn blend(c: bool, t: Self, f: Self) -> Self;
}

impl Blend for f64 {
    fn blend(c: bool, t: f64, f: f64) -> f64 {
        let mask = u64::from(c).wrapping_neg();
        f64::from_bits((t.to_bits() & mask) | (f.to_bits() & !mask))
    }
}
impl Blend for f32 {
    fn blend(c: bool, t: f32, f: f32) -> f32 {
        let mask = u32::from(c).wrapping_neg();
        f32::from_bits((t.to_bits() & mask) | (f.to_bits() & !mask))
    }
}
impl Blend for i64 {
    fn blend(c: bool, t: i64, f: i64) -> i64 {
        let mask = i64::from(c).wrapping_neg();
        (t & mask) | (f & !mask)
    }
}
impl Blend for bool {
    fn blend(c: bool, t: bool, f: bool) -> bool {
        (c & t) | (!c & f)
    }
}

impl ElementwiseMath for Select {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        match (args, out) {
            ([Block::Bool(c), Block::F64(t), Block::F64(f)], BlockMut::F64(y)) => pick(c, t, f, y),
            ([Block::Bool(c), Block::F32(t), Block::F32(f)], BlockMut::F32(y)) => pick(c, t, f, y),
            ([Block::Bool(c), Block::I64(t), Block::I64(f)], BlockMut::I64(y)) => pick(c, t, f, y),
            ([Block::Bool(c), Block::Bool(t), Block::Bool(f)], BlockMut::Bool(y)) => {
                pick(c, t, f, y)
            }
            (args, out) => return Err(block_error(self, args, &out)),
        }
        Ok(())
    }
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

/// A `select` whose condition is known to be all true (all false) is its
/// `on_true` (`on_false`) operand, broadcast to the result: such
/// conditions come from transforms (the boundary masks of a stencil's
/// seeds under `jvp`) and from constant folding.
fn rewrite_select(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let Some(c) = crate::constant::uniform_bool(&args[0]) else { return Ok(None) };
    let pick = if c { &args[1] } else { &args[2] };
    let v = if pick.shape() == out.shape() { pick.clone() } else { pick.broadcast_to(out.shape()) };
    Ok((v.ty() == out).then_some(v))
}

register_rule!(VmapRule, Select, crate::batching::vmap_elementwise);
register_rule!(JvpRule, Select, jvp_select);
register_rule!(TransposeRule, Select, transpose_select);
register_rule!(RewriteRule, Select, rewrite_select);

// ------------------------------------------------------------------- cast

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
        Ok(inputs[0].with_dtype(self.dtype))
    }
    fn params(&self) -> String {
        self.dtype.to_string()
    }
    fn is_elementwise(&self) -> bool {
        true
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0 && self.dtype.is_float()
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

/// Converts a block with `as` semantics, through [`anvil_core::Scalar`]'s
/// conversions (bool is 0 or 1; to bool is `!= 0`).
fn convert<S: anvil_core::Element, T: anvil_core::Element>(x: &[S], out: &mut [T]) {
    map1(x, out, |v| T::from_scalar(v.to_scalar()));
}

impl ElementwiseMath for Cast {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        macro_rules! to {
            ($x:expr, $out:expr) => {
                match $out {
                    BlockMut::F64(y) => convert($x, y),
                    BlockMut::F32(y) => convert($x, y),
                    BlockMut::I64(y) => convert($x, y),
                    BlockMut::Bool(y) => convert($x, y),
                }
            };
        }
        match args {
            [Block::F64(x)] => to!(*x, out),
            [Block::F32(x)] => to!(*x, out),
            [Block::I64(x)] => to!(*x, out),
            [Block::Bool(x)] => to!(*x, out),
            _ => return Err(block_error(self, args, &out)),
        }
        Ok(())
    }
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
        LinearArg::Linear(t) => Some(ct.cast(t.dtype())),
        LinearArg::Known(_) => None,
    }])
}

/// A cast to the operand's own dtype is the operand. Cost: one node fewer.
fn rewrite_cast(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    Ok(keeps(&args[0], out))
}

register_rule!(VmapRule, Cast, crate::batching::vmap_elementwise);
register_rule!(JvpRule, Cast, jvp_cast);
register_rule!(TransposeRule, Cast, transpose_cast);
register_rule!(RewriteRule, Cast, rewrite_cast);

// -------------------------------------------------------------- sparsity
//
// Every elementwise op gets the union of its broadcast operands from its
// `is_elementwise` fact (see `anvil_core::sparsity`); registered here are
// the ops where that union is more than the truth.

use anvil_core::sparsity::{broadcast_positions, zero, Builder, Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// `select` with a known condition picks, element by element, the set of
/// the operand it picks (exact); otherwise the union of both branches.
fn sparsity_select(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let Some(cond) = args[0].value else {
        return anvil_core::sparsity::elementwise(op, &args[1..], out, cx);
    };
    let c = cond.as_slice::<bool>()?;
    let at = |a: &SparsityArg<'_>| broadcast_positions(a.ty.shape(), out.shape());
    let (pc, pt, pf) = (at(&args[0])?, at(&args[1])?, at(&args[2])?);
    let mut b = Builder::new(out.numel(), args[1].sets.nnz().max(args[2].sets.nnz()));
    for e in 0..out.numel() {
        let (sets, p) = if c[pc[e]] { (args[1].sets, pt[e]) } else { (args[2].sets, pf[e]) };
        b.push(sets.row(p));
    }
    Ok(Arc::new(b.finish()))
}

register_rule!(SparsityRule, Sign, zero);
register_rule!(SparsityRule, Floor, zero);
register_rule!(SparsityRule, Ceil, zero);
register_rule!(SparsityRule, Round, zero);
register_rule!(SparsityRule, StopGradient, zero);
register_rule!(SparsityRule, Select, sparsity_select);

#[cfg(test)]
mod wide_tests {
    use super::*;

    /// Every public block loop refuses operands shorter or longer than its
    /// result rather than leaving part of the result unwritten.
    #[test]
    fn public_loops_refuse_operands_of_another_length() {
        let refused = |f: &dyn Fn()| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .expect_err("a loop accepted mismatched lengths")
        };
        let message = |e: Box<dyn std::any::Any + Send>| -> String {
            e.downcast_ref::<String>().cloned().unwrap_or_default()
        };
        let (x3, x2) = ([1.0, 2.0, 3.0], [1.0, 2.0]);
        for arith in [Arith::Add, Arith::Sub, Arith::Mul, Arith::Div] {
            let run = f64_arith_loop(arith).unwrap();
            let e = refused(&|| run(&x3, &x2, &mut [0.0; 3]));
            assert!(message(e).contains("operands of [3, 2] elements for a result of 3"));
            refused(&|| run(&x3, &x3, &mut [0.0; 2]));
            run(&x3, &x3, &mut [0.0; 3]);
        }
        for c in [Compare::Lt, Compare::Le, Compare::Gt, Compare::Ge, Compare::Eq, Compare::Ne] {
            let run = f64_compare_loop(c);
            refused(&|| run(&x2, &x3, &mut [false; 3]));
            run(&x3, &x3, &mut [false; 3]);
        }
        refused(&|| select_f64(&[true; 2], &x3, &x3, &mut [0.0; 3]));
        refused(&|| select_f64(&[true; 3], &x3, &x2, &mut [0.0; 3]));
        refused(&|| select_bool(&[true; 3], &[true; 3], &[false; 3], &mut [false; 4]));
        select_bool(&[true; 3], &[true; 3], &[false; 3], &mut [false; 3]);
    }

    /// Values where loops could differ: signed zeros, infinities, NaNs,
    /// subnormals, and ordinary numbers.
    fn specials(n: usize, seed: u64) -> Vec<f64> {
        let fixed = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE / 8.0,
            -f64::MIN_POSITIVE,
            f64::MAX,
            1e-300,
            3.0,
        ];
        let mut state = seed;
        (0..n)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if i % 3 == 0 {
                    fixed[(state >> 33) as usize % fixed.len()]
                } else {
                    ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 1e3
                }
            })
            .collect()
    }

    /// An op and its scalar math.
    type Case<R> = (&'static dyn Op, fn(f64, f64) -> R);

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every op's block (at the width this CPU runs) equals its scalar
    /// math element by element, bit for bit, at lengths that leave
    /// remainders for every vector width.
    #[test]
    fn block_math_equals_the_scalar_math_bit_for_bit() {
        for n in [0, 1, 3, 7, 8, 17, 64, 513] {
            let (a, b) = (specials(n, 1), specials(n, 2));
            let binary: [Case<f64>; 6] = [
                (&Add, |p, q| Add.f64(p, q)),
                (&Sub, |p, q| Sub.f64(p, q)),
                (&Mul, |p, q| Mul.f64(p, q)),
                (&Div, |p, q| Div.f64(p, q)),
                (&Max, |p, q| Max.f64(p, q)),
                (&Min, |p, q| Min.f64(p, q)),
            ];
            for (op, f) in binary {
                let mut y = vec![0.0; n];
                let math = op.elementwise_math().unwrap();
                let at = BlockAt { start: 0, shape: &[n] };
                math.eval_block(&[Block::F64(&a), Block::F64(&b)], BlockMut::F64(&mut y), at)
                    .unwrap();
                let want: Vec<f64> = a.iter().zip(&b).map(|(&p, &q)| f(p, q)).collect();
                assert_eq!(bits(&y), bits(&want), "{} at n = {n}", op.name());
            }
            let compare: [Case<bool>; 3] =
                [(&Lt, |p, q| p < q), (&Ge, |p, q| p >= q), (&Eq, |p, q| p == q)];
            for (op, f) in compare {
                let mut y = vec![false; n];
                let at = BlockAt { start: 0, shape: &[n] };
                let math = op.elementwise_math().unwrap();
                math.eval_block(&[Block::F64(&a), Block::F64(&b)], BlockMut::Bool(&mut y), at)
                    .unwrap();
                let want: Vec<bool> = a.iter().zip(&b).map(|(&p, &q)| f(p, q)).collect();
                assert_eq!(y, want, "{} at n = {n}", op.name());
            }
            let c: Vec<bool> = a.iter().zip(&b).map(|(p, q)| p < q).collect();
            let mut y = vec![0.0; n];
            let at = BlockAt { start: 0, shape: &[n] };
            let args = [Block::Bool(&c), Block::F64(&a), Block::F64(&b)];
            Select.eval_block(&args, BlockMut::F64(&mut y), at).unwrap();
            let want: Vec<f64> = c
                .iter()
                .zip(a.iter().zip(&b))
                .map(|(&c, (&p, &q))| if c { p } else { q })
                .collect();
            assert_eq!(bits(&y), bits(&want), "select at n = {n}");
            let mut y = vec![0.0; n];
            Abs.eval_block(&[Block::F64(&a)], BlockMut::F64(&mut y), at).unwrap();
            assert_eq!(bits(&y), bits(&a.iter().map(|v| v.abs()).collect::<Vec<_>>()), "abs");
        }
    }

    /// Each width's loops give the baseline loops' bits (the widths this
    /// CPU lacks run the baseline loop, so they pass trivially).
    #[test]
    fn every_width_gives_the_baseline_bits() {
        let widths = Width::available();
        assert!(widths.contains(&Width::detect()));
        for n in [1, 5, 16, 33, 512] {
            let (a, b) = (specials(n, 3), specials(n, 4));
            let c: Vec<bool> = a.iter().map(|v| *v > 0.0).collect();
            let run = |w: Width| {
                let (mut s, mut m, mut q, mut l, mut p) =
                    (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![false; n], vec![0.0; n]);
                map2_at(w, &a, &b, &mut s, |x, y| x - y);
                map2_at(w, &a, &b, &mut m, |x, y| x * y);
                map1_at(w, &a, &mut q, |x: f64| x.sqrt());
                map2_at(w, &a, &b, &mut l, |x, y| x < y);
                map3_at(w, &c, &a, &b, &mut p, f64::blend);
                (bits(&s), bits(&m), bits(&q), l, bits(&p))
            };
            let base = run(Width::Base);
            for &w in &widths {
                assert_eq!(run(w), base, "{w:?} at n = {n}");
            }
        }
    }
}
