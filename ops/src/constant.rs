//! Ops that make values from nothing but their parameters: `full`, `iota`,
//! and `basis`, the seed of `jacfwd`/`jacrev`/`hessian`. All three are
//! generators: each element is a function of its position, computed block
//! by block (and fused into the elementwise chains that read it), so a
//! large one is never a folded constant. (`eye` is a composite: `iota ==
//! iota^T`.) A captured tensor is a `Constant` node, which lives in
//! `anvil-core` because tracing itself creates it.
//!
//! Also here: the value facts rewrite rules ask about operands ("is this a
//! 0/1 mask?", "is every element 1?"), answered from the producers.

use anvil_core::{
    op::expect_arity, register_rule, Block, BlockAt, BlockMut, Constant, DType, ElementwiseMath,
    Error, Op, Result, Scalar, TensorType, Var,
};

/// A tensor of `shape` filled with `value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Full {
    /// The shape.
    pub shape: Vec<usize>,
    /// The value; its dtype is the result's.
    pub value: Scalar,
}

impl Op for Full {
    fn name(&self) -> &'static str {
        "full"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic_shape(&self.shape) {
            return Ok(None);
        }
        Ok(Some(Box::new(Full { shape: binding.shape(&self.shape)?, ..self.clone() })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 0)?;
        Ok(TensorType::new(self.value.dtype(), self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, value={}", self.shape, self.value)
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ElementwiseMath for Full {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, _: BlockAt<'_>) -> Result<()> {
        expect_arity(self, args, 0)?;
        match (out, self.value) {
            (BlockMut::F64(y), Scalar::F64(v)) => y.fill(v),
            (BlockMut::F32(y), Scalar::F32(v)) => y.fill(v),
            (BlockMut::I64(y), Scalar::I64(v)) => y.fill(v),
            (BlockMut::Bool(y), Scalar::Bool(v)) => y.fill(v),
            (out, _) => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// `0, 1, 2, ...` along `axis` of `shape`, constant along the other axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Iota {
    /// The shape.
    pub shape: Vec<usize>,
    /// The counting axis.
    pub axis: usize,
    /// The result dtype (not bool).
    pub dtype: DType,
}

impl Op for Iota {
    fn name(&self) -> &'static str {
        "iota"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic_shape(&self.shape) {
            return Ok(None);
        }
        Ok(Some(Box::new(Iota { shape: binding.shape(&self.shape)?, ..self.clone() })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 0)?;
        if self.axis >= self.shape.len() {
            return Err(Error::AxisOutOfRange {
                op: "iota".into(),
                axis: self.axis as i64,
                shape: self.shape.clone(),
                arg: "axis".into(),
            });
        }
        crate::elementwise::Domain::Numeric.check("iota", 0, self.dtype)?;
        Ok(TensorType::new(self.dtype, self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, axis={}, dtype={}", self.shape, self.axis, self.dtype)
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ElementwiseMath for Iota {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()> {
        expect_arity(self, args, 0)?;
        let inner: usize = at.shape[self.axis + 1..].iter().product::<usize>().max(1);
        let dim = at.shape[self.axis].max(1);
        // The coordinate changes every `inner` elements: counters, not divisions.
        let mut c = (at.start / inner) % dim;
        let mut left = inner - at.start % inner;
        let mut next = || {
            let v = c;
            left -= 1;
            if left == 0 {
                left = inner;
                c = if c + 1 == dim { 0 } else { c + 1 };
            }
            v
        };
        match out {
            BlockMut::F64(y) => y.iter_mut().for_each(|d| *d = next() as f64),
            BlockMut::F32(y) => y.iter_mut().for_each(|d| *d = next() as f32),
            BlockMut::I64(y) => y.iter_mut().for_each(|d| *d = next() as i64),
            out => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// The standard basis as a tensor: the seed of `jacfwd`, `jacrev` and
/// `hessian`, or a chunk of it.
///
/// The element at index `i` is 1 when the row-major position of `i`'s
/// indices along every axis but `axis` equals `i[axis] + offset (+ start)`,
/// and 0 otherwise: with `shape = s ++ [k]` and `axis` last, column `j` is
/// the basis vector `e_{j + offset}` of the space of shape `s`. The optional
/// operand `start` (an `i64` scalar) adds to `offset` at run time, so a loop
/// body can build the chunk of its iteration.
///
/// It is an op, never a folded constant: a product with the identity is
/// rewritten away (`A @ I = A`), relayouts of a seed are seeds again, and
/// the CPU backend computes it block by block inside the fused elementwise
/// pass that reads it (`I * v` never materialises `I`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Basis {
    /// The result's shape.
    pub shape: Vec<usize>,
    /// The axis that enumerates the basis vectors.
    pub axis: usize,
    /// The index of the first basis vector (may be negative: vectors before
    /// the first are all zero).
    pub offset: i64,
    /// The result dtype (a float type).
    pub dtype: DType,
}

impl Basis {
    /// Rows `offset..offset + len` of the identity of the space of `ty`,
    /// as tangents with the basis axis last (`ty.shape ++ [len]`), or first
    /// with `front`.
    pub fn seed(ty: &TensorType, offset: usize, len: usize, front: bool) -> Basis {
        let mut shape = ty.shape().to_vec();
        let axis = if front { 0 } else { shape.len() };
        shape.insert(axis, len);
        Basis { shape, axis, offset: offset as i64, dtype: ty.dtype() }
    }

    /// The number of elements of the space the vectors live in.
    pub fn space(&self) -> usize {
        self.shape.iter().enumerate().filter(|&(i, _)| i != self.axis).map(|(_, &d)| d).product()
    }

    /// The number of basis vectors.
    pub fn len(&self) -> usize {
        self.shape.get(self.axis).copied().unwrap_or(0)
    }

    /// Whether there are no basis vectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this is the whole identity, `I` of a square matrix `[n, n]`
    /// (either axis), statically.
    pub fn is_identity(&self) -> bool {
        self.offset == 0 && self.shape.len() == 2 && self.shape[0] == self.shape[1]
    }

    /// Whether every basis vector is a real one (`0 <= offset` and
    /// `offset + len <= space`): then padding the space with zeros keeps it
    /// a basis.
    pub fn in_range(&self) -> bool {
        self.offset >= 0 && self.offset as usize + self.len() <= self.space()
    }

    /// The seed this one becomes after a reshape to `shape`, if the basis
    /// axis survives as an axis with everything before it and after it
    /// kept in order.
    pub fn reshaped(&self, shape: &[usize]) -> Option<Basis> {
        let before: usize = self.shape[..self.axis].iter().product();
        let after: usize = self.shape[self.axis + 1..].iter().product();
        let mut prefix = 1usize;
        for (j, &d) in shape.iter().enumerate() {
            let rest: usize = shape[j + 1..].iter().product();
            if prefix == before && d == self.len() && rest == after {
                return Some(Basis { shape: shape.to_vec(), axis: j, ..self.clone() });
            }
            prefix = prefix.checked_mul(d)?;
        }
        None
    }

    /// The seed this one becomes after a permute, if the axes other than
    /// the basis axis (size-1 axes aside) keep their order.
    pub fn permuted(&self, perm: &[usize]) -> Option<Basis> {
        let order: Vec<usize> =
            perm.iter().copied().filter(|&a| a != self.axis && self.shape[a] != 1).collect();
        if order.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        let axis = perm.iter().position(|&a| a == self.axis)?;
        let shape = perm.iter().map(|&a| self.shape[a]).collect();
        Some(Basis { shape, axis, ..self.clone() })
    }

    /// The one axis of the space longer than 1, if the space is one-dimensional.
    fn space_axis(&self) -> Option<usize> {
        let mut long = (0..self.shape.len()).filter(|&i| i != self.axis && self.shape[i] != 1);
        let a = long.next();
        if long.next().is_some() {
            return None;
        }
        a.or_else(|| (0..self.shape.len()).find(|&i| i != self.axis))
    }

    /// The seed this one becomes after a unit-step slice `starts[i]..`
    /// (lengths given by `shape`), for a one-dimensional space.
    pub fn sliced(&self, starts: &[usize], shape: &[usize]) -> Option<Basis> {
        let s = self.space_axis()?;
        let shift = starts[self.axis] as i64 - starts[s] as i64;
        Some(Basis { shape: shape.to_vec(), offset: self.offset + shift, ..self.clone() })
    }

    /// The seed this one becomes after zero padding `(before, after)` per
    /// axis, for a one-dimensional space padded along its axis only, when
    /// every basis vector is real (so the padding holds zeros only).
    pub fn padded(&self, widths: &[(usize, usize)], shape: &[usize]) -> Option<Basis> {
        let s = self.space_axis()?;
        let only_space = widths.iter().enumerate().all(|(i, &w)| i == s || w == (0, 0));
        if !only_space || !self.in_range() {
            return None;
        }
        let offset = self.offset + widths[s].0 as i64;
        Some(Basis { shape: shape.to_vec(), offset, ..self.clone() })
    }
}

/// The body of [`basis_ones`] in the integer type `I` (`i64` or `i128`).
fn basis_ones_in<I: Wide>(
    inner: usize,
    k: usize,
    offset: i64,
    start: usize,
    len: usize,
    mut set_one: impl FnMut(usize),
) {
    let row = inner * k; // elements per index of the axes before the basis axis
    let first_outer = start / row;
    let last_outer = (start + len - 1) / row;
    let (one, zero) = (I::of(1), I::of(0));
    let (inner, k, end, start) = (I::of(inner), I::of(k), I::of(start + len), I::of(start));
    for outer in first_outer..=last_outer {
        let outer = I::of(outer);
        // Ones at i with b = outer * inner + i - offset in 0..k, i in
        // 0..inner, at p = c + i * (inner + 1) (b grows with i).
        let base = outer * inner - I::from(offset);
        let c = outer * (inner * k) + base * inner;
        let lo = (zero - base).max(zero).max(div_ceil(start - c, inner + one));
        let hi = (k - base).min(inner).min(div_ceil(end - c, inner + one));
        let mut i = lo;
        while i < hi {
            set_one((c + i * (inner + one) - start).index());
            i = i + one;
        }
    }
}

/// Calls `set_one(j)` for every position `start + j` (`j < len`) of the
/// block where the seed of `shape` with basis axis `axis` (of `k` vectors)
/// and offset `offset` is 1: where the row-major position over the other
/// axes equals the basis index plus the offset. Computed per row of the
/// block, with no division per element: the ones of a row lie on a line
/// `p = c + i (inner + 1)`.
pub(crate) fn basis_ones(
    shape: &[usize],
    axis: usize,
    k: usize,
    offset: i64,
    start: usize,
    len: usize,
    set_one: impl FnMut(usize),
) {
    if k == 0 || len == 0 {
        return;
    }
    let inner: usize = shape[axis + 1..].iter().product::<usize>().max(1);
    // In i64 when every intermediate fits with room (each magnitude below
    // 2^62: always, for blocks and seeds that fit in memory); a 128-bit
    // product or division is a slow library call, and this runs on every
    // block of a small Jacobian's seed.
    const SMALL: u64 = 1 << 30;
    let small = offset.unsigned_abs() < SMALL
        && ((start + len) as u64) < SMALL
        && (inner as u64) < SMALL
        && (inner.saturating_mul(k) as u64) < SMALL;
    if small {
        basis_ones_in::<i64>(inner, k, offset, start, len, set_one);
    } else {
        basis_ones_in::<i128>(inner, k, offset, start, len, set_one);
    }
}

/// `a / b` rounded up, for `b > 0` (neither division overflows).
fn div_ceil<I: Wide>(a: I, b: I) -> I {
    let q = a.div_euclid_(b);
    if a.rem_euclid_(b) == I::of(0) {
        q
    } else {
        q + I::of(1)
    }
}

/// The signed integer types [`basis_ones`] computes in.
trait Wide:
    Copy
    + Ord
    + From<i64>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
{
    /// `u` in this type (in `i64` only for values [`basis_ones`] has
    /// checked to be below 2^30; every `usize` fits in `i128`).
    fn of(u: usize) -> Self;
    /// A non-negative value as an index.
    fn index(self) -> usize;
    fn div_euclid_(self, b: Self) -> Self;
    fn rem_euclid_(self, b: Self) -> Self;
}

macro_rules! wide {
    ($($i:ty),*) => {$(
        impl Wide for $i {
            fn of(u: usize) -> $i {
                u as $i
            }
            fn index(self) -> usize {
                self as usize
            }
            fn div_euclid_(self, b: $i) -> $i {
                self.div_euclid(b)
            }
            fn rem_euclid_(self, b: $i) -> $i {
                self.rem_euclid(b)
            }
        }
    )*};
}
wide!(i64, i128);

impl Op for Basis {
    fn name(&self) -> &'static str {
        "basis"
    }
    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic_shape(&self.shape) {
            return Ok(None);
        }
        Ok(Some(Box::new(Basis { shape: binding.shape(&self.shape)?, ..self.clone() })))
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        if inputs.len() > 1 {
            expect_arity(self, inputs, 1)?;
        }
        if let Some(s) = inputs.first() {
            if s.dtype() != DType::I64 || s.rank() != 0 {
                return Err(Error::shape(
                    "basis",
                    &[s.shape()],
                    format!("the start (argument 0) must be an i64 scalar, not {s}"),
                ));
            }
        }
        if self.axis >= self.shape.len() {
            return Err(Error::AxisOutOfRange {
                op: "basis".into(),
                axis: self.axis as i64,
                shape: self.shape.clone(),
                arg: "axis".into(),
            });
        }
        crate::elementwise::Domain::Float.check("basis", 0, self.dtype)?;
        Ok(TensorType::new(self.dtype, self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, axis={}, offset={}", self.shape, self.axis, self.offset)
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ElementwiseMath for Basis {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()> {
        // The start is a scalar, broadcast over the block.
        let extra = match args {
            [] => 0,
            [Block::I64(s)] => s.first().copied().unwrap_or(0),
            _ => return Err(crate::elementwise::block_error(self, args, &out)),
        };
        let shift = self.offset.saturating_add(extra);
        // The shape of this call's output (the op's own may be symbolic).
        let k = at.shape.get(self.axis).copied().unwrap_or(0);
        match out {
            BlockMut::F64(y) => {
                y.fill(0.0);
                let len = y.len();
                basis_ones(at.shape, self.axis, k, shift, at.start, len, |j| y[j] = 1.0);
            }
            BlockMut::F32(y) => {
                y.fill(0.0);
                let len = y.len();
                basis_ones(at.shape, self.axis, k, shift, at.start, len, |j| y[j] = 1.0);
            }
            out => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// A seed has no derivative (its only operand is an integer).
fn jvp_generator(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(None)
}

/// Batching a seed whose start is batched: one seed per start, written as
/// the comparison it is (`position == basis index + offset + start`) over
/// `iota`s, with the batch axis in front.
fn vmap_basis(
    op: &dyn Op,
    args: &[anvil_core::Batched],
    size: usize,
) -> Result<anvil_core::Batched> {
    use crate::api::{iota_dtype, VarExt};
    let b = op.try_downcast::<Basis>()?;
    let start = crate::batching::at_front(&args[0], size);
    let mut shape = vec![size];
    shape.extend_from_slice(&b.shape);
    // The row-major position over every axis but the basis axis.
    let mut position: Option<Var> = None;
    let mut stride = 1usize;
    for a in (0..b.shape.len()).rev().filter(|&a| a != b.axis) {
        let term = iota_dtype(&shape, a + 1, DType::I64) * stride as i64;
        position = Some(match position {
            Some(p) => p + term,
            None => term,
        });
        stride = stride.saturating_mul(b.shape[a]);
    }
    let index = iota_dtype(&shape, b.axis + 1, DType::I64) + b.offset;
    let mut lead = vec![size as i64];
    lead.extend(std::iter::repeat_n(1, b.shape.len()));
    let index = index + start.reshape(&lead);
    let position = position.unwrap_or_else(|| index.zeros_like());
    Ok(anvil_core::Batched::new(position.equal(&index).cast(b.dtype), Some(0)))
}

register_rule!(JvpRule, Basis, jvp_generator);
register_rule!(VmapRule, Basis, vmap_basis);

// ------------------------------------------------------------ value facts

/// The element count up to which a constant's contents are inspected by
/// rewrite rules (larger captured constants are taken as unknown).
const INSPECTED: usize = 1 << 16;

/// Whether every element of `v` is 0 or 1 (a seed, a relayout of one, or
/// such a constant).
pub fn is_zero_one(v: &Var) -> bool {
    let Some(p) = v.producer() else { return false };
    if p.op_as::<Basis>().is_some() {
        return true;
    }
    if let Some(c) = p.op_as::<Constant>() {
        return c.value.dtype().is_float()
            && c.value.numel() <= INSPECTED
            && c.value.to_f64_vec().iter().all(|&x| x == 0.0 || x == 1.0);
    }
    if let Some(f) = p.op_as::<Full>() {
        let x = f.value.to_f64();
        return x == 0.0 || x == 1.0;
    }
    p.op.is_relayout() && p.inputs.first().is_some_and(is_zero_one)
}

/// Whether `pred` holds for every element of `v`, known because `v` is a
/// `full`, a constant (of at most [`INSPECTED`] elements), or a broadcast
/// or relayout of one.
fn every_element(v: &Var, pred: &dyn Fn(f64) -> bool) -> bool {
    let Some(p) = v.producer() else { return false };
    if let Some(f) = p.op_as::<Full>() {
        return pred(f.value.to_f64());
    }
    if let Some(c) = p.op_as::<Constant>() {
        return c.value.numel() <= INSPECTED && c.value.to_f64_vec().into_iter().all(pred);
    }
    p.op.is_relayout() && p.inputs.first().is_some_and(|x| every_element(x, pred))
}

/// Whether every element of `v` equals `value` (a `full`, a constant, or a
/// broadcast or relayout of one).
pub fn is_filled_with(v: &Var, value: f64) -> bool {
    v.dtype().is_float() && every_element(v, &|x| x == value)
}

/// The value of every element of the boolean `v`, when they are all the
/// same and known (a `full`, a constant, or a broadcast or relayout of
/// one).
pub fn uniform_bool(v: &Var) -> Option<bool> {
    if v.dtype() != DType::Bool {
        None
    } else if every_element(v, &|x| x != 0.0) {
        Some(true)
    } else if every_element(v, &|x| x == 0.0) {
        Some(false)
    } else {
        None
    }
}

/// The seed `v` is, when its producer is a [`Basis`] without a run-time start.
pub fn as_basis(v: &Var) -> Option<Basis> {
    let p = v.producer()?;
    if !p.inputs.is_empty() {
        return None;
    }
    p.op_as::<Basis>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element at flat position `p`, from the definition.
    fn naive(b: &Basis, p: usize, extra: i64) -> f64 {
        let mut idx = vec![0usize; b.shape.len()];
        let mut rem = p;
        for d in (0..b.shape.len()).rev() {
            idx[d] = rem % b.shape[d];
            rem /= b.shape[d];
        }
        let mut other = 0usize;
        for d in (0..b.shape.len()).filter(|&d| d != b.axis) {
            other = other * b.shape[d] + idx[d];
        }
        f64::from(u8::from(other as i64 == idx[b.axis] as i64 + b.offset + extra))
    }

    #[test]
    fn blocks_of_a_seed_match_its_definition_for_every_layout() {
        let shapes: [&[usize]; 5] = [&[5, 5], &[3, 4, 2], &[1, 6, 1, 3], &[7], &[2, 3, 4]];
        for shape in shapes {
            for axis in 0..shape.len() {
                for offset in [-3i64, -1, 0, 1, 2, 9] {
                    for extra in [0i64, 2] {
                        let b = Basis { shape: shape.to_vec(), axis, offset, dtype: DType::F64 };
                        let n: usize = shape.iter().product();
                        let want: Vec<f64> = (0..n).map(|p| naive(&b, p, extra)).collect();
                        for block in [1usize, 2, 3, 7, n.max(1)] {
                            let mut got = vec![f64::NAN; n];
                            let mut start = 0;
                            while start < n {
                                let len = block.min(n - start);
                                let s = [extra];
                                let args: &[Block<'_>] =
                                    if extra == 0 { &[] } else { &[Block::I64(&s)] };
                                let at = BlockAt { start, shape };
                                b.eval_block(args, BlockMut::F64(&mut got[start..start + len]), at)
                                    .unwrap();
                                start += len;
                            }
                            assert_eq!(got, want, "{b:?} extra {extra} block {block}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn div_ceil_in_both_widths() {
        let big = i128::from(i64::MAX) * 4;
        for (a, b, want) in [
            (7, 2, 4),
            (6, 2, 3),
            (-7, 2, -3),
            (-6, 3, -2),
            (0, 5, 0),
            (big + 1, 4, i128::from(i64::MAX) + 1),
            (-big, 4, -i128::from(i64::MAX)),
            (5, big, 1),
        ] {
            assert_eq!(div_ceil(a, b), want, "{a} / {b}");
        }
    }

    #[test]
    fn basis_ones_are_the_same_in_64_and_128_bits() {
        // The i64 path (every small seed) against the i128 one on the same
        // blocks, and both against the definition.
        for (shape, axis) in [(vec![3usize, 3], 1usize), (vec![2, 4, 3], 1), (vec![5, 2], 0)] {
            let k = shape[axis];
            let inner: usize = shape[axis + 1..].iter().product::<usize>().max(1);
            let numel: usize = shape.iter().product();
            for offset in [-3i64, -1, 0, 1, 2, 7] {
                let want: Vec<usize> = (0..numel)
                    .filter(|&p| {
                        let (outer, i) = (p / (inner * k), p % inner);
                        let b = (outer * inner + i) as i64 - offset;
                        (0..k as i64).contains(&b) && (p / inner) % k == b as usize
                    })
                    .collect();
                for (start, len) in [(0, numel), (1, numel - 1), (numel / 2, numel - numel / 2)] {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    basis_ones_in::<i64>(inner, k, offset, start, len, |j| a.push(start + j));
                    basis_ones_in::<i128>(inner, k, offset, start, len, |j| b.push(start + j));
                    let mut c = Vec::new();
                    basis_ones(&shape, axis, k, offset, start, len, |j| c.push(start + j));
                    let want: Vec<usize> = want.iter().copied().filter(|&p| p >= start).collect();
                    assert_eq!(a, want, "{shape:?} axis {axis} offset {offset} at {start}");
                    assert_eq!(b, want);
                    assert_eq!(c, want);
                }
            }
        }
    }

    #[test]
    fn blocks_of_an_iota_match_its_definition() {
        let shape = [3usize, 4, 5];
        for axis in 0..3 {
            let io = Iota { shape: shape.to_vec(), axis, dtype: DType::I64 };
            let want: Vec<i64> = (0..60)
                .map(|p: usize| {
                    let inner: usize = shape[axis + 1..].iter().product();
                    ((p / inner) % shape[axis]) as i64
                })
                .collect();
            for block in [1usize, 7, 60] {
                let mut got = vec![-1i64; 60];
                let mut start = 0;
                while start < 60 {
                    let len = block.min(60 - start);
                    let at = BlockAt { start, shape: &shape };
                    io.eval_block(&[], BlockMut::I64(&mut got[start..start + len]), at).unwrap();
                    start += len;
                }
                assert_eq!(got, want, "axis {axis} block {block}");
            }
        }
    }
}
