//! NumPy subscripts on traced values: the [`ix!`](crate::ix) macro builds
//! an [`IndexExpr`] — ranges with steps, integers (negative from the end),
//! new axes, an ellipsis, traced integer arrays, fixed lists — that
//! [`VarExt::i`] reads (`x[1:, None, -1]` is
//! `x.i(ix![1.., NewAxis, -1])`) and [`VarExt::at`]
//! updates functionally, as JAX's `.at[]` (`x.at(ix![0]).set(&v)`).
//!
//! Design: a subscript is not an op. Reading is at most one strided
//! `slice`, one `reshape` (integers drop their axis, new axes insert one)
//! and, when arrays index, one `permute`, one `reshape` and one `take` of a
//! flat index computed from the arrays — NumPy's advanced indexing, with
//! its placement rule: the broadcast axes of the arrays (integers count as
//! arrays once an array is present) replace the indexed axes where those
//! are adjacent, and go first otherwise. An update reads the *positions* of
//! the indexed elements the same way, from an `iota` over the operand
//! (an index out of range reads one extra position past the end), sums
//! the updates there with one `scatter_add` and a second of ones (which
//! elements are hit), and combines with a `select`. `mul`, `min` and `max`
//! at traced positions first combine the updates that share a position
//! (a stable sort by position and a segmented
//! [`associative_scan`](lax::associative_scan)). Every transform handles
//! all of it through the rules of those ops; nothing here has a rule of
//! its own.
//!
//! Bounds, as JAX: a *static* integer (or an entry of a fixed list) out
//! of range is an error naming the axis, the index and the size (found
//! when the trace is built). *Traced*
//! array indices are data: a negative one counts from the end once, then
//! a read clamps it into the axis and an update drops it (JAX's defaults
//! for `x[idx]` and `x.at[idx].set/add/...`). Slice bounds are clamped, as
//! in Python. Several updates landing on one element: `add` sums them,
//! `mul` multiplies, `min`/`max` take the extreme (JAX's scatter-add,
//! -mul, -min, -max); `set` writes the last of them, as NumPy's
//! `x[idx] = v` and JAX on CPU do (JAX leaves the choice to the
//! implementation).
//!
//! The macro is `ix!`, not `s!`, so that `use ndarray::prelude::*` and
//! `use anvil::prelude::*` can be used together. Its grammar is
//! `ndarray::s!`'s with an ellipsis, traced arrays and NumPy's negative
//! steps: `a..b;-1` starts at `a` and walks down to `b` (exclusive), as
//! `x[a:b:-1]` does, where `ndarray` would reverse `a..b`.

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

use anvil_core::shape::{
    broadcast_shapes, dim_add, dim_mul, dim_numel, dim_sub, is_symbolic, require_at_least,
};
use anvil_core::{DType, Error, Result, Scalar, SliceSpec, Tensor, Var};

use crate::api::{fail, VarExt};
use crate::constant::{Full, Iota};
use crate::lax::indexing::{bound, int as dim_int};
use crate::lax::{self, LaxExt};

/// One entry of a subscript ([`IndexExpr`]); built by [`ix!`](crate::ix)
/// from ranges, integers, [`NewAxis`], `...` and traced arrays.
#[derive(Clone, Debug)]
pub enum IndexItem {
    /// A strided range of one axis, kept (Python's slice semantics:
    /// negative bounds from the end, bounds clamped).
    Slice(SliceSpec),
    /// One position of one axis, which is dropped; negative counts from
    /// the end; out of range is an error.
    Int(i64),
    /// A new axis of size 1 (`numpy.newaxis`, `None`).
    NewAxis,
    /// As many whole axes as the other entries leave (`...`); at most one.
    Ellipsis,
    /// A traced `i64` array indexing one axis (NumPy's advanced indexing):
    /// the axis is replaced by the array's axes (a rank-0 array drops it).
    Array(Var),
    /// A fixed list of positions of one axis (NumPy's `x[[0, 2]]`): an
    /// array index whose entries are checked like integers (out of range:
    /// an error), replaced by one axis of the list's length.
    List(Vec<i64>),
}

impl From<Vec<i64>> for IndexItem {
    fn from(v: Vec<i64>) -> Self {
        IndexItem::List(v)
    }
}

impl From<&[i64]> for IndexItem {
    fn from(v: &[i64]) -> Self {
        IndexItem::List(v.to_vec())
    }
}

impl<const N: usize> From<[i64; N]> for IndexItem {
    fn from(v: [i64; N]) -> Self {
        IndexItem::List(v.to_vec())
    }
}

impl From<&Tensor> for IndexItem {
    /// An `i64` tensor: an array index, a constant of the current trace.
    fn from(t: &Tensor) -> Self {
        IndexItem::Array(anvil_core::trace::current_or_detached().constant(t.clone()))
    }
}

/// `numpy.newaxis` in [`ix!`](crate::ix): inserts an axis of size 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewAxis;

/// `...` in an [`IndexExpr`] built without the macro (the macro takes `...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ellipsis;

impl From<NewAxis> for IndexItem {
    fn from(_: NewAxis) -> Self {
        IndexItem::NewAxis
    }
}

impl From<Ellipsis> for IndexItem {
    fn from(_: Ellipsis) -> Self {
        IndexItem::Ellipsis
    }
}

impl From<&Var> for IndexItem {
    fn from(v: &Var) -> Self {
        IndexItem::Array(v.clone())
    }
}

impl From<Var> for IndexItem {
    fn from(v: Var) -> Self {
        IndexItem::Array(v)
    }
}

impl From<SliceSpec> for IndexItem {
    fn from(s: SliceSpec) -> Self {
        IndexItem::Slice(s)
    }
}

impl From<RangeFull> for IndexItem {
    fn from(_: RangeFull) -> Self {
        IndexItem::Slice(SliceSpec::FULL)
    }
}

/// A range that takes a step in [`ix!`](crate::ix) (`a..b;step`).
pub trait StepRange {
    /// The range as a slice with step 1.
    fn spec(self) -> SliceSpec;
}

impl StepRange for RangeFull {
    fn spec(self) -> SliceSpec {
        SliceSpec::FULL
    }
}

/// An integer of any width as an `i64` (a `usize` past `i64::MAX` saturates,
/// which no axis reaches, so it is reported as out of range).
fn int64<T: TryInto<i64>>(v: T) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// The exclusive end of an inclusive range ending at `end` (`-1`: the end).
fn after(end: i64) -> Option<i64> {
    if end == -1 {
        None
    } else {
        Some(end.saturating_add(1))
    }
}

macro_rules! int_items {
    ($($t:ty),*) => {$(
        impl From<$t> for IndexItem {
            fn from(v: $t) -> Self {
                IndexItem::Int(int64(v))
            }
        }
        impl From<Range<$t>> for IndexItem {
            fn from(r: Range<$t>) -> Self {
                IndexItem::Slice(r.spec())
            }
        }
        impl From<RangeFrom<$t>> for IndexItem {
            fn from(r: RangeFrom<$t>) -> Self {
                IndexItem::Slice(r.spec())
            }
        }
        impl From<RangeTo<$t>> for IndexItem {
            fn from(r: RangeTo<$t>) -> Self {
                IndexItem::Slice(r.spec())
            }
        }
        impl From<RangeInclusive<$t>> for IndexItem {
            fn from(r: RangeInclusive<$t>) -> Self {
                IndexItem::Slice(r.spec())
            }
        }
        impl From<RangeToInclusive<$t>> for IndexItem {
            fn from(r: RangeToInclusive<$t>) -> Self {
                IndexItem::Slice(r.spec())
            }
        }
        impl StepRange for Range<$t> {
            fn spec(self) -> SliceSpec {
                SliceSpec { start: Some(int64(self.start)), stop: Some(int64(self.end)), step: 1 }
            }
        }
        impl StepRange for RangeFrom<$t> {
            fn spec(self) -> SliceSpec {
                SliceSpec { start: Some(int64(self.start)), stop: None, step: 1 }
            }
        }
        impl StepRange for RangeTo<$t> {
            fn spec(self) -> SliceSpec {
                SliceSpec { start: None, stop: Some(int64(self.end)), step: 1 }
            }
        }
        impl StepRange for RangeInclusive<$t> {
            fn spec(self) -> SliceSpec {
                let (a, b) = self.into_inner();
                SliceSpec { start: Some(int64(a)), stop: after(int64(b)), step: 1 }
            }
        }
        impl StepRange for RangeToInclusive<$t> {
            fn spec(self) -> SliceSpec {
                SliceSpec { start: None, stop: after(int64(self.end)), step: 1 }
            }
        }
    )*};
}
int_items!(i32, i64, isize, usize, u32);

impl IndexItem {
    /// `range` with `step` (negative: walking down from the range's start,
    /// as NumPy's `x[a:b:-1]`); what `ix![a..b;step]` builds.
    pub fn stepped(range: impl StepRange, step: i64) -> IndexItem {
        IndexItem::Slice(SliceSpec { step, ..range.spec() })
    }
}

/// A subscript: the entries of `x[...]`, one per indexed axis (new axes
/// and the ellipsis aside). Built by [`ix!`](crate::ix), or from a `Vec`
/// of [`IndexItem`]s when the entries are computed.
///
/// ```
/// use anvil_ops::subscript::{IndexExpr, IndexItem};
/// // x[:, 2] with the axis chosen at run time.
/// let axis = 1;
/// let mut items = vec![IndexItem::from(..); axis];
/// items.push(IndexItem::from(2));
/// let e = IndexExpr::from(items);
/// assert_eq!(e.items().len(), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct IndexExpr {
    items: Vec<IndexItem>,
}

impl From<Vec<IndexItem>> for IndexExpr {
    fn from(items: Vec<IndexItem>) -> Self {
        IndexExpr { items }
    }
}

impl IndexExpr {
    /// The entries, in order.
    pub fn items(&self) -> &[IndexItem] {
        &self.items
    }
}

/// A subscript of traced values in NumPy's syntax, for
/// [`VarExt::i`] and [`VarExt::at`].
/// Entries, separated by commas:
///
/// | entry | NumPy | effect on its axis |
/// |---|---|---|
/// | `a..b`, `a..`, `..b`, `..`, `a..=b` | `a:b`, `a:`, `:b`, `:`, `a:b+1` | kept, sliced |
/// | `a..b;s` (also `..;-1`) | `a:b:s` | kept, strided (NumPy's negative steps) |
/// | `k` (any integer type, negative from the end) | `k` | dropped |
/// | `NewAxis` | `None` | a new axis of size 1 (consumes none) |
/// | `...` | `...` | as many whole axes as the others leave |
/// | `&idx` (an `i64` `Var` or `Tensor`) | `idx` | replaced by `idx`'s axes |
/// | `[0, 2]`, `vec![..]` (`i64`s, checked) | `[0, 2]` | replaced by one axis |
///
/// Axes past the entries are taken whole. The name is `ix!`, not `s!`, so
/// that it and `ndarray`'s `s!` can be imported together.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec((0..24).map(f64::from).collect(), &[2, 3, 4])?;
/// // x[-1, 1:, ::-2] = [[19, 17], [23, 21]]
/// let y = (|x: &Var| x.i(ix![-1, 1.., ..;-2])).eval(&x)?;
/// assert_eq!(y.shape(), &[2, 2]);
/// assert_eq!(y.to_vec::<f64>()?, vec![19.0, 17.0, 23.0, 21.0]);
/// // x[..., None, 0] has shape [2, 3, 1]: the ellipsis covers two axes.
/// let z = (|x: &Var| x.i(ix![..., NewAxis, 0])).eval(&x)?;
/// assert_eq!(z.shape(), &[2, 3, 1]);
/// # Ok::<(), anvil::Error>(())
/// ```
#[macro_export]
macro_rules! ix {
    (@go [$($acc:expr),*]) => {
        $crate::subscript::IndexExpr::from(::std::vec![$($acc),*])
    };
    (@go [$($acc:expr),*] ... $(, $($rest:tt)*)?) => {
        $crate::ix!(@go [$($acc,)* $crate::subscript::IndexItem::Ellipsis] $($($rest)*)?)
    };
    (@go [$($acc:expr),*] $r:expr ; $s:expr $(, $($rest:tt)*)?) => {
        $crate::ix!(@go [$($acc,)* {
            // `5..1;-1` is NumPy's `5:1:-1`, not an empty range.
            #[allow(clippy::reversed_empty_ranges)]
            let r = $r;
            $crate::subscript::IndexItem::stepped(r, $s)
        }] $($($rest)*)?)
    };
    (@go [$($acc:expr),*] $e:expr $(, $($rest:tt)*)?) => {
        $crate::ix!(@go [$($acc,)* $crate::subscript::IndexItem::from($e)] $($($rest)*)?)
    };
    ($($t:tt)*) => {
        $crate::ix!(@go [] $($t)*)
    };
}

/// One entry resolved against the operand: the ellipsis expanded, the
/// axis it indexes known, integers normalised and checked.
#[derive(Clone, Debug)]
enum Entry {
    Slice(usize, SliceSpec),
    Int(usize, i64),
    New,
    /// The axis, the index, and whether its entries are known to be in range.
    Array(usize, Var, bool),
}

/// `expr` resolved against `shape`.
struct Resolved {
    entries: Vec<Entry>,
    /// Whether an array indexes (integers then index as arrays too).
    advanced: bool,
}

/// Resolves `expr` against `shape`: expands the ellipsis, checks integers
/// and the arrays' dtypes. An update (`updates`) may index an empty axis
/// with an array: every index is out of range, and its updates are
/// dropped (JAX's default mode); a read of it is an error.
fn resolve(op: &str, expr: &IndexExpr, x: &Var, updates: bool) -> Result<Resolved> {
    let shape = x.shape();
    let consumes = |it: &IndexItem| !matches!(it, IndexItem::NewAxis | IndexItem::Ellipsis);
    let used = expr.items.iter().filter(|it| consumes(it)).count();
    let ellipses = expr.items.iter().filter(|it| matches!(it, IndexItem::Ellipsis)).count();
    if ellipses > 1 {
        return Err(Error::invalid(op, "index", "an index can hold one ellipsis (...)"));
    }
    if used > shape.len() {
        let msg = format!("{used} indices for an operand of rank {}", shape.len());
        return Err(Error::shape(op, &[shape], msg));
    }
    let mut entries = Vec::with_capacity(expr.items.len() + 1);
    let mut axis = 0;
    for it in &expr.items {
        match it {
            IndexItem::Ellipsis => {
                let n = shape.len() - used;
                entries.extend((axis..axis + n).map(|a| Entry::Slice(a, SliceSpec::FULL)));
                axis += n;
            }
            IndexItem::NewAxis => entries.push(Entry::New),
            IndexItem::Slice(s) => {
                s.resolve(op, shape[axis])?;
                entries.push(Entry::Slice(axis, *s));
                axis += 1;
            }
            IndexItem::Int(k) => {
                entries.push(Entry::Int(axis, checked_int(op, *k, axis, shape)?));
                axis += 1;
            }
            IndexItem::Array(v) => {
                check_array(op, v, axis, shape, updates)?;
                entries.push(Entry::Array(axis, v.clone(), false));
                axis += 1;
            }
            IndexItem::List(ks) => {
                let ks: Vec<i64> =
                    ks.iter().map(|&k| checked_int(op, k, axis, shape)).collect::<Result<_>>()?;
                let n = ks.len();
                // Negative entries are left on a symbolic axis: wrapped when traced.
                let wrap = ks.iter().any(|&k| k < 0);
                let t = Tensor::from_vec(ks, &[n])?;
                entries.push(Entry::Array(axis, x.constant_like(t), !wrap));
                axis += 1;
            }
        }
    }
    entries.extend((axis..shape.len()).map(|a| Entry::Slice(a, SliceSpec::FULL)));
    let advanced = entries.iter().any(|e| matches!(e, Entry::Array(..)));
    Ok(Resolved { entries, advanced })
}

/// A static integer index, normalised, or the error naming it. On a
/// symbolic axis a negative index stays as written (counted from the end
/// when the axis is bound) and the axis must be long enough to hold it: a
/// constraint checked at the call.
fn checked_int(op: &str, k: i64, axis: usize, shape: &[usize]) -> Result<i64> {
    let out_of_bounds = || Error::IndexOutOfBounds {
        op: op.into(),
        index: k,
        axis,
        size: shape[axis],
        arg: "index".into(),
        shape: shape.to_vec(),
    };
    if is_symbolic(shape[axis]) {
        let need = if k < 0 { Some(k.unsigned_abs()) } else { (k as u64).checked_add(1) };
        let need = need.and_then(|d| usize::try_from(d).ok()).filter(|&d| !is_symbolic(d));
        return match need {
            Some(d) if require_at_least(op, shape[axis], d, "index").is_ok() => Ok(k),
            _ => Err(out_of_bounds()),
        };
    }
    let n = shape[axis] as i64;
    let j = if k < 0 { k + n } else { k };
    if (0..n).contains(&j) {
        Ok(j)
    } else {
        Err(out_of_bounds())
    }
}

/// The slice holding the one element at a checked index (see
/// [`checked_int`]: negative only on a symbolic axis).
fn int_spec(k: i64) -> SliceSpec {
    SliceSpec { start: Some(k), stop: k.checked_add(1).filter(|&e| e != 0), step: 1 }
}

fn check_array(op: &str, v: &Var, axis: usize, shape: &[usize], updates: bool) -> Result<()> {
    if v.dtype() != DType::I64 {
        let what = format!("index array for axis {axis}");
        let expected = "i64 (boolean masks select a data-dependent number of elements)";
        return Err(Error::dtype(op, what, v.dtype(), expected));
    }
    if shape[axis] == 0 && v.numel() > 0 && !updates {
        let msg = format!("axis {axis} has size 0: an array cannot index it");
        return Err(Error::shape(op, &[shape, v.shape()], msg));
    }
    Ok(())
}

/// An `i64` scalar in `like`'s trace.
fn int(like: &Var, v: i64) -> Var {
    like.tracer().apply(Box::new(Full { shape: vec![], value: Scalar::I64(v) }), &[])
}

/// A traced index counted from the end when negative (once), on an axis
/// of `n` elements (a size or a symbolic dimension).
fn wrapped(idx: &Var, n: usize) -> Var {
    idx.lt(&int(idx, 0)).select(&(idx + dim_int(idx, n)), idx)
}

/// Reads `r` from `x`, each array mapped by `fix(array, axis size)` into
/// the range `take` accepts.
fn read(x: &Var, r: &Resolved, fix: &dyn Fn(&Var, usize) -> Var) -> Var {
    let axis = |e: &Entry| match e {
        Entry::Slice(a, _) | Entry::Int(a, _) | Entry::Array(a, ..) => Some(*a),
        Entry::New => None,
    };
    if r.entries.iter().filter_map(axis).any(|a| a >= x.rank()) {
        // `x` is not of the shape the index was resolved against: an
        // earlier step failed (its error is recorded) and left a stand-in.
        x.tracer().record(Error::invalid(
            "index",
            "x",
            format!("an index resolved for another shape than {}", x.ty()),
        ));
        return x.tracer().poisoned();
    }
    let mut specs = vec![SliceSpec::FULL; x.rank()];
    let mut shape: Vec<i64> = Vec::with_capacity(r.entries.len());
    for e in &r.entries {
        match e {
            Entry::Slice(a, s) => {
                let n = x.shape()[*a];
                let resolved = s.resolve("index", n).unwrap_or((0, 1, 0));
                // A range that covers the axis in order (`0..n`) is no slice.
                if resolved != (0, 1, n) {
                    specs[*a] = *s;
                }
                shape.push(resolved.2 as i64);
            }
            Entry::Int(a, k) => {
                specs[*a] = int_spec(*k);
                if r.advanced {
                    shape.push(1);
                }
            }
            Entry::New => shape.push(1),
            Entry::Array(a, ..) => shape.push(x.shape()[*a] as i64),
        }
    }
    let mut y = x.clone();
    if specs.iter().any(|s| *s != SliceSpec::FULL) {
        y = y.slice(&specs);
    }
    if y.shape().iter().map(|&d| d as i64).ne(shape.iter().copied()) {
        y = y.reshape(&shape);
    }
    if r.advanced {
        y = advanced(&y, r, fix);
    }
    y
}

/// NumPy's advanced indexing of `y` (one axis per entry of `r`, integers
/// kept with size 1): the index arrays broadcast together, their axes
/// where the indexed axes were if those are adjacent, else first.
fn advanced(y: &Var, r: &Resolved, fix: &dyn Fn(&Var, usize) -> Var) -> Var {
    // Integers kept their axis (size 1): one axis of `y` per entry.
    let kept: Vec<&Entry> = r.entries.iter().collect();
    let adv: Vec<usize> =
        (0..kept.len()).filter(|&j| matches!(kept[j], Entry::Int(..) | Entry::Array(..))).collect();
    let adjacent = adv.windows(2).all(|w| w[1] == w[0] + 1);
    let at = if adjacent { adv[0] } else { 0 };
    let mut perm: Vec<i64> = Vec::with_capacity(kept.len());
    if !adjacent {
        perm.extend(adv.iter().map(|&j| j as i64));
    }
    for j in 0..kept.len() {
        if adjacent && j == adv[0] {
            perm.extend(adv.iter().map(|&j| j as i64));
        }
        if !adv.contains(&j) {
            perm.push(j as i64);
        }
    }
    let moved = if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
        y.clone()
    } else {
        y.permute(&perm)
    };
    // One flat index into the indexed axes, merged into one.
    let mut flat = int(y, 0);
    let mut stride = 1usize;
    for &j in adv.iter().rev() {
        let n = y.shape()[j];
        let idx = match kept[j] {
            Entry::Array(_, v, false) => fix(v, n),
            Entry::Array(_, v, true) => v.clone(),
            _ => int(y, 0),
        };
        flat = flat + idx * dim_int(y, stride);
        stride = match dim_mul(stride, n) {
            Ok(s) => s,
            Err(e) => return fail(y, e),
        };
    }
    let mut merged: Vec<i64> = moved.shape().iter().map(|&d| bound(d)).collect();
    merged.drain(at..at + adv.len());
    merged.insert(at, bound(stride));
    moved.reshape(&merged).take(&flat, at as i64)
}

/// `x[expr]` with NumPy's semantics; see [`VarExt::i`].
pub fn index(x: &Var, expr: &IndexExpr) -> Var {
    match resolve("index", expr, x, false) {
        Ok(r) => read(x, &r, &|idx: &Var, n: usize| {
            let hi =
                if is_symbolic(n) { dim_int(idx, n) - int(idx, 1) } else { int(idx, n as i64 - 1) };
            wrapped(idx, n).maximum(&int(idx, 0)).minimum(&hi)
        }),
        Err(e) => fail(x, e),
    }
}

/// A value an update of [`At`] writes: a `Var` (broadcast to the indexed
/// shape, converted to the operand's dtype), a `Tensor` (a constant) or a
/// number.
pub trait UpdateValue {
    /// The value in `like`'s trace.
    fn update_var(&self, like: &Var) -> Var;
}

impl UpdateValue for Var {
    fn update_var(&self, _: &Var) -> Var {
        self.clone()
    }
}

impl UpdateValue for &Var {
    fn update_var(&self, _: &Var) -> Var {
        (*self).clone()
    }
}

impl UpdateValue for &Tensor {
    fn update_var(&self, like: &Var) -> Var {
        like.constant_like((*self).clone())
    }
}

impl UpdateValue for f64 {
    fn update_var(&self, like: &Var) -> Var {
        like.scalar_like(*self)
    }
}

impl UpdateValue for i64 {
    fn update_var(&self, like: &Var) -> Var {
        like.constant_like(Tensor::from_scalar(Scalar::I64(*self).cast(like.dtype())))
    }
}

/// Functional updates of the elements `x[expr]`, as JAX's `x.at[expr]`:
/// made by [`VarExt::at`]; each method returns a new
/// value, `x` is unchanged. The update broadcasts to the shape `x[expr]`
/// has and is converted to `x`'s dtype. Bounds and repeated indices: see
/// the [module](self) docs.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let f = |x: &Var| {
///     let idx = x.constant_like(Tensor::from_vec(vec![0i64, 0], &[2])?);
///     Ok(vec![
///         x.at(ix![.., -1]).set(0.0),       // [[1, 0], [3, 0]]
///         x.at(ix![&idx, 0]).add(10.0),     // repeated: [[21, 2], [3, 4]]
///         x.at(ix![1]).mul(x.i(ix![0])),    // [[1, 2], [3, 8]]
///     ])
/// };
/// let out = f.eval(&x)?;
/// assert_eq!(out[0].to_vec::<f64>()?, vec![1.0, 0.0, 3.0, 0.0]);
/// assert_eq!(out[1].to_vec::<f64>()?, vec![21.0, 2.0, 3.0, 4.0]);
/// assert_eq!(out[2].to_vec::<f64>()?, vec![1.0, 2.0, 3.0, 8.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct At {
    x: Var,
    expr: IndexExpr,
}

/// How [`At`] combines the updates with the operand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Combine {
    Set,
    Add,
    Mul,
    Min,
    Max,
}

impl At {
    pub(crate) fn new(x: &Var, expr: IndexExpr) -> At {
        At { x: x.clone(), expr }
    }

    /// `x[expr]` (JAX's `.at[].get()`; the same as [`VarExt::i`]).
    pub fn get(&self) -> Var {
        index(&self.x, &self.expr)
    }

    /// `x` with `x[expr] = v`.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// // x[::2, None] = [[7], [8]] on a [3, 2] operand hits rows 0 and 2.
    /// let x = Tensor::zeros(&[3, 2])?;
    /// let v = Tensor::from_vec(vec![7.0, 8.0], &[2, 1, 1])?;
    /// let y = (|x: &Var| x.at(ix![..;2, NewAxis]).set(&v)).eval(&x)?;
    /// assert_eq!(y.to_vec::<f64>()?, vec![7.0, 7.0, 0.0, 0.0, 8.0, 8.0]);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    pub fn set(&self, v: impl UpdateValue) -> Var {
        self.update(Combine::Set, v)
    }

    /// `x` with `x[expr] += v` (repeated indices accumulate).
    pub fn add(&self, v: impl UpdateValue) -> Var {
        self.update(Combine::Add, v)
    }

    /// `x` with `x[expr] *= v` (repeated indices multiply).
    pub fn mul(&self, v: impl UpdateValue) -> Var {
        self.update(Combine::Mul, v)
    }

    /// `x` with `x[expr] = minimum(x[expr], v)` (repeated indices: the
    /// smallest of their updates).
    ///
    /// ```
    /// use anvil::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0, 5.0, 3.0], &[3])?;
    /// let i = Tensor::from_vec(vec![1i64, 1, -1], &[3])?;
    /// let u = Tensor::from_vec(vec![4.0, 2.0, 6.0], &[3])?;
    /// let f = |x: &Var, i: &Var, u: &Var| vec![x.at(ix![i]).min(u), x.at(ix![i]).max(u)];
    /// let out = f.eval((&x, &i, &u))?;
    /// assert_eq!(out[0].to_vec::<f64>()?, vec![1.0, 2.0, 3.0]);
    /// assert_eq!(out[1].to_vec::<f64>()?, vec![1.0, 5.0, 6.0]);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    pub fn min(&self, v: impl UpdateValue) -> Var {
        self.update(Combine::Min, v)
    }

    /// `x` with `x[expr] = maximum(x[expr], v)` (repeated indices: the
    /// largest of their updates; see [`At::min`] for an example).
    pub fn max(&self, v: impl UpdateValue) -> Var {
        self.update(Combine::Max, v)
    }

    fn update(&self, how: Combine, v: impl UpdateValue) -> Var {
        let x = &self.x;
        let r = match resolve("at", &self.expr, x, true) {
            Ok(r) => r,
            Err(e) => return fail(x, e),
        };
        if dim_numel(x.shape()).is_ok_and(|n| n == 0) {
            // Nothing to update: every update is dropped.
            return x.clone();
        }
        let (pos, unique) = match positions(x, &r) {
            Ok(p) => p,
            Err(e) => return fail(x, e),
        };
        let v = v.update_var(x).cast(x.dtype());
        if let Err(e) = broadcast_shapes("at", v.shape(), pos.shape(), "1 (update)") {
            return fail(x, e);
        }
        if pos.numel() == 0 {
            return x.clone();
        }
        let (n, m) = match (dim_numel(x.shape()), dim_numel(pos.shape())) {
            (Ok(n), Ok(m)) => (n, bound(m)),
            (Err(e), _) | (_, Err(e)) => return fail(x, e),
        };
        let u = v.broadcast_to(pos.shape()).reshape(&[m]);
        let (pos, u) = match how {
            Combine::Set | Combine::Mul | Combine::Min | Combine::Max if !unique => {
                combined(how, &pos.reshape(&[m]), &u, n)
            }
            _ => (pos.reshape(&[m]), u),
        };
        // Summed into the flat operand's positions; with traced indices one
        // more position takes the updates out of range, then is cut off.
        let spill = |w: &Var| {
            if unique {
                w.scatter_add(&pos, 0, n)
            } else {
                match dim_add(n, 1) {
                    Ok(n1) => w.scatter_add(&pos, 0, n1).slice_axis(0, None, Some(-1), 1),
                    Err(e) => fail(w, e),
                }
            }
        };
        let flat = x.flatten();
        let placed = spill(&u);
        let out = if how == Combine::Add {
            &flat + &placed
        } else {
            let count = spill(&u.ones_like());
            let hit = count.gt(&count.zeros_like());
            let new = match how {
                // One update per element left (the last, when repeated).
                Combine::Set => placed,
                Combine::Mul => &flat * &placed,
                Combine::Min => flat.minimum(&placed),
                _ => flat.maximum(&placed),
            };
            hit.select(&new, &flat)
        };
        let shape: Vec<i64> = x.shape().iter().map(|&d| bound(d)).collect();
        out.reshape(&shape)
    }
}

/// The flat positions in `x` of the elements `x[r]`, of the shape
/// `x[r]` has, an update out of range at position `x.numel()` (dropped by
/// the scatter); and whether positions are unique (no array indexes).
fn positions(x: &Var, r: &Resolved) -> Result<(Var, bool)> {
    let n = dim_numel(x.shape())?;
    let flat = x.tracer().apply(Box::new(Iota { shape: vec![n], axis: 0, dtype: DType::I64 }), &[]);
    let mut pos = flat.reshape(&x.shape().iter().map(|&d| bound(d)).collect::<Vec<_>>());
    if !r.advanced {
        return Ok((read(&pos, r, &|i: &Var, _: usize| i.clone()), true));
    }
    // Each array-indexed axis gets one more entry, holding `n`: an index
    // out of range reads it.
    let mut widths = vec![(0, 0); x.rank()];
    for e in &r.entries {
        if let Entry::Array(a, ..) = e {
            widths[*a] = (0, 1);
        }
    }
    pos = if is_symbolic(n) {
        // `n` is no constant of the pad: -1 marks the new entries.
        let marked = pos.pad(&widths, -1.0);
        marked.lt(&int(&marked, 0)).select(&dim_int(&marked, n), &marked)
    } else {
        pos.pad(&widths, n as f64)
    };
    let fix = |idx: &Var, padded: usize| -> Var {
        let (w, size) = match dim_sub(padded, 1) {
            Ok(s) => (wrapped(idx, s), dim_int(idx, s)),
            Err(e) => return fail(idx, e),
        };
        let inside = w.lt(&size);
        let ok = w.ge(&int(idx, 0)).select(&inside, &inside.full_like(0.0));
        ok.select(&w, &size)
    };
    Ok((read(&pos, r, &fix), false))
}

/// The updates `u` at positions `idx` (`[m]`) combined per position
/// (`how`'s product, minimum or maximum; for `set`, the last update), every
/// position once: a stable sort by position, a segmented scan, and the
/// segments' last elements kept (the others moved out of range, to `n`, so
/// the scatter drops them).
fn combined(how: Combine, idx: &Var, u: &Var, n: usize) -> (Var, Var) {
    let (sorted, perm) = idx.sort_with_indices(0, false);
    let us = u.take(&perm, 0);
    let zero = int(u, 0);
    let one = int(u, 1);
    // Where a segment starts (a position differs from the one before) and
    // ends (from the one after), against -1 (no position) past either end:
    // no slice that needs an update, for a count that may be 0 at a call.
    let m = bound(sorted.shape()[0]);
    let before = sorted.pad(&[(1, 0)], -1.0).slice_axis(0, None, Some(m), 1);
    let after = sorted.pad(&[(0, 1)], -1.0).slice_axis(0, Some(1), None, 1);
    let last = sorted.not_equal(&after).select(&sorted, &dim_int(u, n));
    if how == Combine::Set {
        // The sort is stable: a segment's last element is its last update.
        return (last, us);
    }
    let starts = sorted.not_equal(&before).select(&one, &zero);
    let op = move |a: &Var, b: &Var| match how {
        Combine::Mul => a * b,
        Combine::Min => a.minimum(b),
        _ => a.maximum(b),
    };
    // (value, starts here) pairs: a segment's start resets the fold.
    let seg = move |a: &[Var], b: &[Var]| {
        let fresh = b[1].gt(&int(&b[1], 0));
        vec![fresh.select(&b[0], &op(&a[0], &b[0])), a[1].maximum(&b[1])]
    };
    let scanned = lax::associative_scan(&seg, &[us, starts.clone()], false, 0).remove(0);
    (last, scanned)
}
