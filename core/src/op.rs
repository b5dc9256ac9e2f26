//! The `Op` trait: what every node of a graph computes.
//!
//! An op is a typed struct holding its parameters (`Reshape { shape }`,
//! `Sum { axes, keepdims }`), boxed as `Box<dyn Op>`. It knows its display
//! name and its shape/dtype rule; everything else about it — its CPU kernel,
//! its vmap, jvp and transpose rules — is registered separately, keyed by the
//! op's `TypeId`, so a crate that did not define an op can still add a rule
//! for it. Equality and hashing of ops compare the type and the parameters,
//! which is what common-subexpression elimination needs.
//!
//! Implementors derive `Debug, Clone, PartialEq, Eq, Hash` and implement
//! [`Op`]; [`OpBase`] (downcasting, dynamic equality and hashing) comes from a
//! blanket impl.

use crate::error::Result;
use crate::graph::Graph;
use crate::shape::TensorType;
use std::any::{Any, TypeId};
use std::fmt;
use std::hash::{Hash, Hasher};

/// Object-safe equality, hashing and downcasting for ops. Implemented for
/// every `Clone + Eq + Hash + Debug + Send + Sync + 'static` type; never
/// implement it by hand.
pub trait OpBase: Any {
    /// `self` as `&dyn Any`, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is the same op type with equal parameters.
    fn dyn_eq(&self, other: &dyn Any) -> bool;
    /// Hashes the parameters (the caller hashes the type).
    fn dyn_hash(&self, state: &mut dyn Hasher);
}

impl<T: Any + Eq + Hash> OpBase for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn dyn_eq(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
    fn dyn_hash(&self, mut state: &mut dyn Hasher) {
        self.hash(&mut state);
    }
}

/// A graph operation: a typed struct with its parameters, a name, a shape
/// rule, and the facts about it that passes use.
///
/// ```
/// use anvil_core::{Op, Result, TensorType};
///
/// /// `x * 2`, elementwise.
/// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// struct Double;
///
/// impl Op for Double {
///     fn name(&self) -> &'static str { "myplugin.double" }
///     fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
///         anvil_core::op::expect_arity(self, inputs, 1)?;
///         Ok(inputs[0].clone())
///     }
/// }
///
/// let x = TensorType::new(anvil_core::DType::F64, &[3]);
/// assert_eq!(Double.infer(&[x.clone()])?, x);
/// # Ok::<(), anvil_core::Error>(())
/// ```
pub trait Op: OpBase + dyn_clone::DynClone + fmt::Debug + Send + Sync {
    /// The display name, used in printed graphs and errors: `"sin"`,
    /// `"myplugin.bessel_j0"`.
    fn name(&self) -> &'static str;

    /// The shape and dtype rule of an op with one result: its type for these
    /// operand types. Ops with several results implement
    /// [`Op::infer_results`] instead (and may leave this one out).
    ///
    /// # Errors
    /// When the inputs do not fit, with an error naming the op, the shapes
    /// and the argument.
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let _ = inputs;
        Err(crate::Error::invalid(
            self.name(),
            "results",
            "the op has several results (or implements neither infer nor infer_results)",
        ))
    }

    /// The shape and dtype rule: the type of every result, in order. The
    /// default is the one result of [`Op::infer`].
    ///
    /// # Errors
    /// As [`Op::infer`].
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![self.infer(inputs)?])
    }

    /// The parameters as printed after the name (`axes=[0], keepdims=false`).
    fn params(&self) -> String {
        String::new()
    }

    /// The sub-graphs (bodies) of a higher-order op (`map`, `cond`...), if any.
    fn subgraphs(&self) -> Vec<&Graph> {
        Vec::new()
    }

    /// What the `k`-th of [`Op::subgraphs`] is, for printed graphs and DOT
    /// (`"cond"` and `"body"` of a while loop, `"branch 1"` of a `cond`).
    fn subgraph_label(&self, k: usize) -> String {
        format!("body {k}")
    }

    /// The same op with its bodies replaced (same count, same order as
    /// [`Op::subgraphs`], same signatures): how passes rewrite inside bodies.
    /// `None` (the default) leaves the bodies of this op as they are.
    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let _ = bodies;
        None
    }

    /// A copy of the op with the symbolic dimensions its parameters hold (a
    /// reshape's target, a generator's shape, a scan's length) evaluated
    /// under `binding`; `None` (the default) when its parameters hold none.
    /// A backend calls it to specialise a loop body for one binding (see
    /// [`crate::Graph::bind_dims`]); bodies are bound by the caller.
    ///
    /// # Errors
    /// A dimension the binding does not determine.
    fn bind_dims(&self, binding: &crate::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        let _ = binding;
        Ok(None)
    }

    // Facts the passes rely on. A plugin op declares them like a built-in
    // one, and every pass treats it the same way.

    /// Whether the op is elementwise with NumPy broadcasting: every result
    /// element depends only on the operands' elements at the same
    /// (broadcast) position, and operands smaller than the result are
    /// broadcast by the op itself.
    fn is_elementwise(&self) -> bool {
        false
    }

    /// Whether the result is operand 0 broadcast (NumPy rules) to the
    /// result's shape, and nothing else.
    fn is_broadcast(&self) -> bool {
        false
    }

    /// Whether the op only moves elements: every result element is a copy of
    /// one element of operand 0 (reshape, permute, broadcast, slice).
    fn is_relayout(&self) -> bool {
        false
    }

    /// Whether the op is linear in operand `k` when the other operands are
    /// held fixed (`mul` in each operand, `add` in both, a reshape in its
    /// one).
    fn linear_in(&self, k: usize) -> bool {
        let _ = k;
        false
    }

    /// Whether running the op does more than compute its results from its
    /// operands (a collective communicates with other processes): such an
    /// op is never evaluated at compile time (constant folding leaves it to
    /// the plan), so it runs exactly where and when the plan runs it.
    fn has_effects(&self) -> bool {
        false
    }

    /// The op's math on blocks of elements, for ops computed element by
    /// element: elementwise ops (operands broadcast to the result) and
    /// generators (no operands, each element a function of its position,
    /// like `iota`). A backend runs every such op, and fuses chains of them,
    /// through this one interface.
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        None
    }

    /// The op's math when it is a reduction of operand 0 over some axes by
    /// an associative combining function (`sum`, `reduce_max`, ...). A
    /// backend fuses such a reduction into the elementwise chain that
    /// produces its operand, and loop interpreters run it, through this one
    /// interface; a plugin reduction declaring it is treated the same way.
    fn reduction_math(&self) -> Option<&dyn ReductionMath> {
        None
    }

    /// `Some(k)` when the node is the graph's `k`-th input (the core
    /// [`Parameter`](crate::Parameter)): passes that replay a graph bind it
    /// to argument `k` rather than running it, and a plan reads it from the
    /// call's arguments. No other op should return `Some`.
    fn parameter_index(&self) -> Option<usize> {
        None
    }

    /// The op's value when it has no operands and always produces this one
    /// tensor (a captured [`Constant`](crate::Constant)): constant folding
    /// evaluates the ops that read only such values, and a backend holds
    /// the tensor rather than running the op.
    fn constant_value(&self) -> Option<&crate::Tensor> {
        None
    }

    /// The field operation the op computes, when it is one of them, with
    /// NumPy broadcasting of its operands (see [`Arith`]): a backend may
    /// run it as a plain loop, and loop passes recognise sums and products.
    fn arith(&self) -> Option<Arith> {
        None
    }

    /// The comparison the op computes, when it is one of [`Compare`]: two
    /// operands of one dtype to `bool`, with NumPy broadcasting. A backend
    /// may run it as a plain loop.
    fn comparison(&self) -> Option<Compare> {
        None
    }

    /// Whether the op is `select(cond, on_true, on_false)`: operand 0 a
    /// `bool` condition, 1 and 2 of the result's dtype, NumPy broadcasting,
    /// each result element the bits of the branch its condition picks
    /// (`anvil_ops::Select`'s semantics). A backend may run it as a plain
    /// loop, or join it to the arithmetic around it.
    fn is_select(&self) -> bool {
        false
    }

    /// The op's loop over a block of `f64`s, when it is a unary elementwise
    /// op (`out[i]` a function of `x[i]` alone, `out.len() == x.len()`)
    /// giving the same bits as its block math: a backend running many
    /// small blocks may resolve it once rather than dispatch per block. A
    /// backend that registers math of its own for the op (the CPU's
    /// vectorised `exp`) runs that instead, everywhere, so that every
    /// path gives one op the same bits.
    ///
    /// ```
    /// use anvil_core::Op;
    /// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    /// struct Twice;
    /// impl Op for Twice {
    ///     fn name(&self) -> &'static str { "doc.twice" }
    ///     fn f64_map(&self) -> Option<anvil_core::op::F64Map> {
    ///         fn twice(x: &[f64], out: &mut [f64]) {
    ///             for (o, v) in out.iter_mut().zip(x) {
    ///                 *o = 2.0 * v;
    ///             }
    ///         }
    ///         Some(twice)
    ///     }
    /// }
    /// let mut out = [0.0; 2];
    /// (Twice.f64_map().unwrap())(&[1.0, 2.5], &mut out);
    /// assert_eq!(out, [2.0, 5.0]);
    /// ```
    fn f64_map(&self) -> Option<F64Map> {
        None
    }

    /// `Some((ta, tb))` when the op is the matrix product of operands 0 and
    /// 1 with the semantics of `anvil_ops::matmul` (batched, a vector
    /// operand promoted and its axis dropped), each operand read transposed
    /// (its two axes swapped, a matrix) where its flag is set.
    fn matmul_transposes(&self) -> Option<(bool, bool)> {
        None
    }

    /// How the op moves elements, when it is one of the movements of
    /// [`Movement`] (a reshape, a permutation, a concatenation, a pad):
    /// passes that place results in memory, or compute index maps, read
    /// the layout from it rather than from the op's type.
    fn movement(&self) -> Option<Movement<'_>> {
        None
    }
}

/// A loop `out[i] = f(x[i])` over `f64` slices of one length (see
/// [`Op::f64_map`]).
pub type F64Map = fn(&[f64], &mut [f64]);

/// A comparison of elements (see [`Op::comparison`]), in the dtype's order:
/// IEEE for floats (a NaN operand makes every comparison false but
/// [`Compare::Ne`]), `false < true` for `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compare {
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
}

/// A field operation on elements, applied with NumPy broadcasting (see
/// [`Op::arith`]): what `a + b`, `a - b`, `a * b`, `a / b` and `-a`
/// compute, in the IEEE arithmetic of the dtype (wrapping for `i64`, a
/// zero divisor giving 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arith {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `-a` (one operand).
    Neg,
}

impl Arith {
    /// The number of operands: 1 for [`Arith::Neg`], 2 for the others.
    pub fn arity(self) -> usize {
        if self == Arith::Neg {
            1
        } else {
            2
        }
    }
}

/// A movement of elements (see [`Op::movement`]): which element of which
/// operand each result element copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Movement<'a> {
    /// Operand 0's elements in their row-major order, in the result's shape.
    Reshape,
    /// Operand 0's axes reordered: the result's axis `i` is operand axis
    /// `perm[i]`.
    Permute(&'a [usize]),
    /// The operands joined along `axis`, in order.
    Concatenate {
        /// The axis.
        axis: usize,
    },
    /// Operand 0 with `widths[i] = (before, after)` elements of `value`
    /// added on each side of axis `i`.
    Pad {
        /// `(before, after)` per axis.
        widths: &'a [(usize, usize)],
        /// The value of the added elements (of the operand's dtype).
        value: crate::Scalar,
    },
    /// A strided slice of operand 0, one spec per axis (Python semantics,
    /// [`crate::shape::SliceSpec::resolve`]).
    Slice(&'a [crate::shape::SliceSpec]),
    /// Operand 0 broadcast to the result's shape (NumPy's rules).
    BroadcastTo,
}

/// A run of elements of one dtype: an operand's block, already broadcast
/// to the block of the result it is computed for.
#[derive(Clone, Copy, Debug)]
pub enum Block<'a> {
    /// `f64` elements.
    F64(&'a [f64]),
    /// `f32` elements.
    F32(&'a [f32]),
    /// `i64` elements.
    I64(&'a [i64]),
    /// `bool` elements.
    Bool(&'a [bool]),
}

/// A block of the result, to be written entirely.
#[derive(Debug)]
pub enum BlockMut<'a> {
    /// `f64` elements.
    F64(&'a mut [f64]),
    /// `f32` elements.
    F32(&'a mut [f32]),
    /// `i64` elements.
    I64(&'a mut [i64]),
    /// `bool` elements.
    Bool(&'a mut [bool]),
}

impl Block<'_> {
    /// The element type.
    pub fn dtype(&self) -> crate::DType {
        match self {
            Block::F64(_) => crate::DType::F64,
            Block::F32(_) => crate::DType::F32,
            Block::I64(_) => crate::DType::I64,
            Block::Bool(_) => crate::DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Block::F64(v) => v.len(),
            Block::F32(v) => v.len(),
            Block::I64(v) => v.len(),
            Block::Bool(v) => v.len(),
        }
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl BlockMut<'_> {
    /// The element type.
    pub fn dtype(&self) -> crate::DType {
        match self {
            BlockMut::F64(_) => crate::DType::F64,
            BlockMut::F32(_) => crate::DType::F32,
            BlockMut::I64(_) => crate::DType::I64,
            BlockMut::Bool(_) => crate::DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            BlockMut::F64(v) => v.len(),
            BlockMut::F32(v) => v.len(),
            BlockMut::I64(v) => v.len(),
            BlockMut::Bool(v) => v.len(),
        }
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a block lies in the result: the row-major index of its first
/// element and the result's shape (what a generator needs).
#[derive(Clone, Copy, Debug)]
pub struct BlockAt<'a> {
    /// Flat index of the block's first element in the result.
    pub start: usize,
    /// The result's shape.
    pub shape: &'a [usize],
}

/// The math of an op computed element by element (see
/// [`Op::elementwise_math`]).
pub trait ElementwiseMath: Send + Sync {
    /// Computes `out` from `args`, one block per operand, each as long as
    /// `out` and of the operand's dtype; `out` has the result's dtype.
    ///
    /// # Errors
    /// A dtype the op does not handle (its shape rule should have rejected
    /// it: this keeps a bad rule from panicking).
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()>;
}

/// A reduction's identity and combining function for elements of type `T`.
pub type Combine<T> = (T, fn(T, T) -> T);

/// The math of a reduction (see [`Op::reduction_math`]): the reduced axes of
/// operand 0 and, per dtype, the combining function with its identity. The
/// elements of each output are combined in increasing order of the reduced
/// index, starting from the identity.
///
/// ```
/// use anvil_core::Op;
/// fn is_sum_like(op: &dyn Op) -> bool {
///     op.reduction_math().is_some_and(|r| r.f64().0 == 0.0)
/// }
/// # let _ = is_sum_like;
/// ```
pub trait ReductionMath: Send + Sync {
    /// The reduced axes of operand 0 (sorted, non-negative).
    fn axes(&self) -> &[usize];
    /// Whether the reduced axes are kept with size 1.
    fn keepdims(&self) -> bool;
    /// Identity and combining function for `f64`.
    fn f64(&self) -> (f64, fn(f64, f64) -> f64);
    /// Identity and combining function for `f32`.
    fn f32(&self) -> (f32, fn(f32, f32) -> f32);
    /// Identity and combining function for `i64`.
    fn i64(&self) -> (i64, fn(i64, i64) -> i64);
    /// Identity and combining function for `bool`, if the reduction takes
    /// booleans (`reduce_max` is `any`, `reduce_min` is `all`).
    fn bool(&self) -> Option<Combine<bool>> {
        None
    }
    /// Whether the combining function is addition (`+` for floats,
    /// wrapping `+` for `i64`) from 0: a backend may then write the `+`
    /// into its loops, where they inline and vectorise it, rather than
    /// call the function.
    fn is_sum(&self) -> bool {
        false
    }
}

dyn_clone::clone_trait_object!(Op);

impl dyn Op {
    /// The op as a concrete type, if it is one.
    pub fn downcast_ref<T: Op>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }

    /// The op as `T`, or an error naming the op and the type expected (for a
    /// rule or kernel registered for `T`, a mismatch is a registry bug, not
    /// something to panic over).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the op is another type.
    pub fn try_downcast<T: Op>(&self) -> Result<&T> {
        self.downcast_ref::<T>().ok_or_else(|| {
            crate::Error::invalid(
                self.name(),
                "op",
                format!("expected an op of type {}", std::any::type_name::<T>()),
            )
        })
    }

    /// Whether the op is of type `T`.
    pub fn is<T: Op>(&self) -> bool {
        self.as_any().is::<T>()
    }

    /// A boxed copy of the op.
    pub fn boxed(&self) -> Box<dyn Op> {
        dyn_clone::clone_box(self)
    }

    /// The `TypeId` of the concrete op, the key of every rule registry.
    pub fn op_type(&self) -> TypeId {
        self.as_any().type_id()
    }

    /// The name followed by the parameters in brackets, as printed in graphs.
    pub fn display(&self) -> String {
        match self.params() {
            p if p.is_empty() => self.name().to_string(),
            p => format!("{}[{p}]", self.name()),
        }
    }
}

impl PartialEq for dyn Op {
    fn eq(&self, other: &dyn Op) -> bool {
        self.dyn_eq(other.as_any())
    }
}
impl Eq for dyn Op {}
impl Hash for dyn Op {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.op_type().hash(state);
        self.dyn_hash(state);
    }
}

/// Checks the number of inputs of an op (their types in a shape rule, their
/// values in a kernel).
///
/// # Errors
/// [`Error::Arity`](crate::Error::Arity) naming the op.
pub fn expect_arity<T>(op: &dyn Op, inputs: &[T], n: usize) -> Result<()> {
    if inputs.len() == n {
        Ok(())
    } else {
        Err(crate::Error::Arity {
            what: op.name().into(),
            kind: "inputs".into(),
            expected: n,
            got: inputs.len(),
        })
    }
}
