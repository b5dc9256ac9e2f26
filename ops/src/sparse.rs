//! The ops of sparse differentiation: [`ColorSeed`], the seed of colored
//! JVPs and VJPs, and [`Decompress`], which reads a sparse Jacobian's
//! nonzeros out of the compressed products.
//!
//! A sparse Jacobian `J` (`m × n`) with a column coloring of `k` colors is
//! `B = J S` (`m × k`) for the 0/1 seed `S[j, c] = [color(j) == c]`: `k`
//! JVPs under `vmap` instead of `n`. Like the dense transforms' `Basis`,
//! the seed is an op, never a folded `n × k` constant: a generator whose
//! element is a table lookup, computed block by block inside the fused
//! pass that reads it, and relayouts of it (the pads and slices of a
//! stencil's tangent) are rewritten into seeds again (see [`ColorSeed`]'s
//! methods, called from the movement ops' rewrite rules), so a stencil's
//! compressed Jacobian is one fused pass. Decompression is a gather by a
//! table fixed when the plan is built: entry `q` of the CSC values is
//! element `map[q]` of the compressed products.
//!
//! Both tables are `u32` ([`Table`]): compared by content, hashed once, so
//! CSE and plan caches treat two seeds of the same coloring as equal
//! without rehashing a million colors.
//!
//! Also here, until the control-flow ops that own them are reworked: the
//! sparsity rules of the custom-derivative calls of [`crate::control`]
//! (their primal body composed with the operands).

use crate::api::VarExt;
use crate::batching::move_axis;
use crate::elementwise::Domain;
use anvil_core::sparsity::{Detector, IndexSets, SparsityArg};
use anvil_core::{
    op::expect_arity, register_rule, Batched, Block, BlockAt, BlockMut, DType, ElementwiseMath,
    Error, LinearArg, Op, Result, Tensor, TensorType, Var,
};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A `u32` table shared by ops: equal by content, hashed once (with its
/// largest entry, so shape rules check bounds without a scan).
#[derive(Clone)]
pub struct Table(Arc<TableData>);

struct TableData {
    data: Vec<u32>,
    hash: u64,
    max: Option<u32>,
    /// The entries as bytes (NEUTRAL as 255) when they fit: a seed's
    /// block reads a quarter of the memory.
    narrow: Option<Vec<u8>>,
}

impl Table {
    /// Wraps `data`.
    pub fn new(data: Vec<u32>) -> Table {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        data.hash(&mut h);
        let hash = h.finish();
        let max = data.iter().copied().max();
        let fits = data.iter().all(|&c| c < 255 || c == NEUTRAL);
        let narrow = fits.then(|| data.iter().map(|&c| c.min(255) as u8).collect());
        Table(Arc::new(TableData { data, hash, max, narrow }))
    }

    /// The entries as bytes, when every one is below 255 or [`NEUTRAL`]
    /// (which becomes 255).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        self.0.narrow.as_deref()
    }

    /// The entries.
    pub fn as_slice(&self) -> &[u32] {
        &self.0.data
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.data.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.0.data.is_empty()
    }

    /// The largest entry, `None` when empty.
    pub fn max(&self) -> Option<u32> {
        self.0.max
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({} entries, hash {:016x})", self.len(), self.0.hash)
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.hash == other.0.hash && self.0.data == other.0.data)
    }
}
impl Eq for Table {}
impl Hash for Table {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash.hash(state);
    }
}

/// The color of a position that no seed vector touches.
pub const NEUTRAL: u32 = u32::MAX;

// ------------------------------------------------------------- color seed

/// The 0/1 seed of colored JVPs (or VJPs): element `i` is 1 when
/// `colors[p] == i[axis]`, `p` the row-major position of `i` over every
/// axis but `axis`. With `shape = s ++ [k]`, column `c` is the sum of the
/// basis vectors of the space `s` colored `c` (positions colored
/// [`NEUTRAL`] are in no column).
///
/// ```
/// use anvil_ops::sparse::{ColorSeed, Table};
/// use anvil_core::{DType, Op};
/// // Periodic colors 0, 1, 2, 0, 1 of 5 inputs, 3 seed vectors.
/// let s = ColorSeed { shape: vec![5, 3], axis: 1, colors: Table::new(vec![0, 1, 2, 0, 1]), dtype: DType::F64 };
/// assert_eq!(s.infer(&[])?.shape(), &[5, 3]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ColorSeed {
    /// The result's shape.
    pub shape: Vec<usize>,
    /// The axis that enumerates the colors (the seed vectors).
    pub axis: usize,
    /// One color per position of the space (the other axes, row-major).
    pub colors: Table,
    /// The result dtype (a float type).
    pub dtype: DType,
}

impl ColorSeed {
    /// The seed of `colors` for a space of type `ty` and `k` colors, the
    /// color axis last (or first, with `front`).
    pub fn new(ty: &TensorType, colors: Table, k: usize, front: bool) -> ColorSeed {
        let mut shape = ty.shape().to_vec();
        let axis = if front { 0 } else { shape.len() };
        shape.insert(axis, k);
        ColorSeed { shape, axis, colors, dtype: ty.dtype() }
    }

    /// The number of colors.
    pub fn num_colors(&self) -> usize {
        self.shape.get(self.axis).copied().unwrap_or(0)
    }

    /// The shape of the space (every axis but the color axis).
    pub fn space(&self) -> Vec<usize> {
        let mut s = self.shape.clone();
        if self.axis < s.len() {
            s.remove(self.axis);
        }
        s
    }

    fn with(&self, shape: &[usize], axis: usize, colors: Table) -> ColorSeed {
        ColorSeed { shape: shape.to_vec(), axis, colors, dtype: self.dtype }
    }

    /// The seed this one becomes after a reshape to `shape` that keeps the
    /// color axis as an axis, with everything before and after it kept in
    /// order (the space's row-major order is unchanged).
    pub fn reshaped(&self, shape: &[usize]) -> Option<ColorSeed> {
        let before: usize = self.shape[..self.axis].iter().product();
        let after: usize = self.shape[self.axis + 1..].iter().product();
        let mut prefix = 1usize;
        for (j, &d) in shape.iter().enumerate() {
            let rest: usize = shape[j + 1..].iter().product();
            if prefix == before && d == self.num_colors() && rest == after {
                return Some(self.with(shape, j, self.colors.clone()));
            }
            prefix = prefix.checked_mul(d)?;
        }
        None
    }

    /// The seed this one becomes after a permute: the space's axes permuted
    /// (the colors regathered), the color axis moved.
    pub fn permuted(&self, perm: &[usize]) -> Option<ColorSeed> {
        let axis = perm.iter().position(|&a| a == self.axis)?;
        let shape: Vec<usize> = perm.iter().map(|&a| self.shape[a]).collect();
        // Old space axis of each new space axis.
        let old_space = |a: usize| if a > self.axis { a - 1 } else { a };
        let space_perm: Vec<usize> =
            perm.iter().filter(|&&a| a != self.axis).map(|&a| old_space(a)).collect();
        let strides = anvil_core::sparsity::strides_i64(&self.space());
        let walk: Vec<i64> = space_perm.iter().map(|&a| strides[a]).collect();
        let mut new_space = shape.clone();
        new_space.remove(axis);
        let at = anvil_core::sparsity::strided_positions(&new_space, 0, &walk).ok()?;
        let colors = self.colors.as_slice();
        Some(self.with(&shape, axis, Table::new(at.iter().map(|&p| colors[p]).collect())))
    }

    /// The seed this one becomes after a slice (`(first, step, len)` per
    /// axis, resolved) that keeps every color.
    pub fn sliced(&self, resolved: &[(i64, i64, usize)], shape: &[usize]) -> Option<ColorSeed> {
        let k = self.num_colors();
        let (first, step, len) = resolved[self.axis];
        if len != k || (k > 1 && (first != 0 || step != 1)) {
            return None;
        }
        let space = self.space();
        let strides = anvil_core::sparsity::strides_i64(&space);
        let dims: Vec<(i64, i64, usize)> =
            resolved.iter().enumerate().filter(|&(a, _)| a != self.axis).map(|(_, &r)| r).collect();
        let base =
            dims.iter().zip(&strides).map(|(&(f, _, l), &s)| if l > 0 { f * s } else { 0 }).sum();
        let walk: Vec<i64> = dims.iter().zip(&strides).map(|(&(_, st, _), &s)| st * s).collect();
        let new_space: Vec<usize> = dims.iter().map(|d| d.2).collect();
        let at = anvil_core::sparsity::strided_positions(&new_space, base, &walk).ok()?;
        let colors = self.colors.as_slice();
        Some(self.with(shape, self.axis, Table::new(at.iter().map(|&p| colors[p]).collect())))
    }

    /// The seed this one becomes after zero padding of the space (the
    /// padding is in no color).
    pub fn padded(&self, widths: &[(usize, usize)], shape: &[usize]) -> Option<ColorSeed> {
        if widths.get(self.axis) != Some(&(0, 0)) {
            return None;
        }
        let space_widths: Vec<(usize, usize)> =
            widths.iter().enumerate().filter(|&(a, _)| a != self.axis).map(|(_, &w)| w).collect();
        let mut new_space = shape.to_vec();
        new_space.remove(self.axis);
        let os = anvil_core::sparsity::strides_i64(&new_space);
        let base = space_widths.iter().zip(&os).map(|(&(lo, _), &s)| lo as i64 * s).sum();
        let lands = anvil_core::sparsity::strided_positions(&self.space(), base, &os).ok()?;
        let mut colors = vec![NEUTRAL; anvil_core::shape::numel(&new_space)];
        for (&at, &c) in lands.iter().zip(self.colors.as_slice()) {
            colors[at] = c;
        }
        Some(self.with(shape, self.axis, Table::new(colors)))
    }
}

impl Op for ColorSeed {
    fn name(&self) -> &'static str {
        "color_seed"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 0)?;
        if self.axis >= self.shape.len() {
            return Err(Error::AxisOutOfRange {
                op: "color_seed".into(),
                axis: self.axis as i64,
                shape: self.shape.clone(),
                arg: "axis".into(),
            });
        }
        let space = anvil_core::shape::numel(&self.space());
        if self.colors.len() != space {
            return Err(Error::shape(
                "color_seed",
                &[&self.shape],
                format!("{} colors for a space of {space} positions", self.colors.len()),
            ));
        }
        Domain::Float.check("color_seed", 0, self.dtype)?;
        Ok(TensorType::new(self.dtype, self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, axis={}", self.shape, self.axis)
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ColorSeed {
    /// Writes the elements `start..start + y.len()`: walks the block in
    /// runs of the axes after the color axis (one color per run, no
    /// division per element), each element a comparison written without
    /// a branch; with the color axis last, one table read per position.
    fn fill<T: Copy>(&self, start: usize, y: &mut [T], zero: T, one: T) {
        match self.colors.as_bytes() {
            Some(bytes) => self.fill_from(bytes, start, y, zero, one),
            None => self.fill_from(self.colors.as_slice(), start, y, zero, one),
        }
    }

    fn fill_from<C: Copy + Into<u32>, T: Copy>(
        &self,
        colors: &[C],
        start: usize,
        y: &mut [T],
        zero: T,
        one: T,
    ) {
        let k = self.num_colors();
        let inner: usize = self.shape[self.axis + 1..].iter().product();
        let end = start + y.len();
        if k == 0 || inner == 0 || y.is_empty() {
            return;
        }
        if inner == 1 {
            // Element e = p k + c.
            for (j, d) in y.iter_mut().enumerate() {
                let e = start + j;
                *d = if colors[e / k].into() as usize == e % k { one } else { zero };
            }
            return;
        }
        let mut e = start;
        while e < end {
            // The run of `inner` elements of (outer, c) that holds e.
            let (run, i0) = (e / inner, e % inner);
            let (outer, c) = (run / k, (run % k) as u32);
            let n = (inner - i0).min(end - e);
            let base = outer * inner + i0;
            let dst = &mut y[e - start..e - start + n];
            for (d, &col) in dst.iter_mut().zip(&colors[base..base + n]) {
                *d = if col.into() == c { one } else { zero };
            }
            e += n;
        }
    }
}

impl ElementwiseMath for ColorSeed {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()> {
        expect_arity(self, args, 0)?;
        match out {
            BlockMut::F64(y) => self.fill(at.start, y, 0.0, 1.0),
            BlockMut::F32(y) => self.fill(at.start, y, 0.0, 1.0),
            out => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// A seed has no derivative.
fn jvp_seed(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(None)
}

register_rule!(JvpRule, ColorSeed, jvp_seed);

/// The seed `v` is, when its producer is a [`ColorSeed`].
pub fn as_color_seed(v: &Var) -> Option<ColorSeed> {
    v.producer()?.op_as::<ColorSeed>().cloned()
}

// ------------------------------------------------------------ scaled seeds

/// `Σ_d seed_d · values_d`: colored seeds of one shape and color axis
/// (`tables[d]` the colors of seed `d`), each scaled element by element
/// by its operand (broadcast to the result).
///
/// What the compressed JVPs of a stencil are: `(S_L - 2 S + S_R) n² + S ·
/// f'(u)`, three seeds (shifted by the stencil's pads and slices) times
/// small vectors. Rewrite rules on `mul`, `div`, `add`, `sub` and `neg`
/// (see [`product`], [`combine`], [`negate`]) gather such sums into one
/// node, computed in one pass over the result instead of one pass per
/// seed and per arithmetic op. (The colored counterpart of
/// [`crate::diagonal::Diagonals`].)
///
/// Values: those of the products and sums replaced, at every element a
/// seed covers; elsewhere 0 where `0 · v` would be NaN for an infinite or
/// NaN `v` (a derivative that is not finite shows in its own entries only).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScaledSeeds {
    /// The result's shape.
    pub shape: Vec<usize>,
    /// The color axis.
    pub axis: usize,
    /// One color table per seed (and per operand).
    pub tables: Vec<Table>,
}

impl ScaledSeeds {
    fn seed(&self, d: usize, dtype: DType) -> ColorSeed {
        ColorSeed {
            shape: self.shape.clone(),
            axis: self.axis,
            colors: self.tables[d].clone(),
            dtype,
        }
    }
}

impl Op for ScaledSeeds {
    fn name(&self) -> &'static str {
        "scaled_seeds"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, self.tables.len())?;
        let Some(first) = inputs.first() else {
            return Err(Error::invalid("scaled_seeds", "operands", "needs at least one seed"));
        };
        Domain::Float.check("scaled_seeds", 0, first.dtype())?;
        let seed = ColorSeed {
            shape: self.shape.clone(),
            axis: self.axis,
            colors: self.tables[0].clone(),
            dtype: first.dtype(),
        };
        for (d, (t, table)) in inputs.iter().zip(&self.tables).enumerate() {
            let fits = anvil_core::shape::broadcasts_to(t.shape(), &self.shape);
            if !fits || t.dtype() != first.dtype() || table.len() != self.tables[0].len() {
                return Err(Error::shape(
                    "scaled_seeds",
                    &[t.shape(), &self.shape],
                    format!(
                        "operand {d} is {t}: it must be {} and broadcast to the result",
                        first.dtype()
                    ),
                ));
            }
        }
        seed.infer(&[])
    }
    fn params(&self) -> String {
        format!("shape={:?}, axis={}, seeds={}", self.shape, self.axis, self.tables.len())
    }
    fn linear_in(&self, _: usize) -> bool {
        true
    }
    fn elementwise_math(&self) -> Option<&dyn ElementwiseMath> {
        Some(self)
    }
}

impl ScaledSeeds {
    /// `y[j] += v[j]` where seed `table` is 1 on the block at `start`, in
    /// runs of one color (see [`ColorSeed`]'s blocks).
    fn add_seed<C: Copy + Into<u32>, T: Copy + std::ops::AddAssign>(
        &self,
        colors: &[C],
        start: usize,
        y: &mut [T],
        v: &[T],
        zero: T,
    ) {
        let k = self.shape[self.axis];
        let inner: usize = self.shape[self.axis + 1..].iter().product();
        let end = start + y.len();
        if k == 0 || inner == 0 {
            return;
        }
        let mut e = start;
        while e < end {
            let (run, i0) = (e / inner, e % inner);
            let (outer, c) = (run / k, (run % k) as u32);
            let n = (inner - i0).min(end - e);
            let base = outer * inner + i0;
            let at = e - start..e - start + n;
            for ((d, &x), &col) in y[at.clone()].iter_mut().zip(&v[at]).zip(&colors[base..base + n])
            {
                *d += if col.into() == c { x } else { zero };
            }
            e += n;
        }
    }

    fn sum_blocks<T: Copy + std::ops::AddAssign>(
        &self,
        start: usize,
        y: &mut [T],
        vs: &[&[T]],
        zero: T,
    ) {
        y.fill(zero);
        for (table, v) in self.tables.iter().zip(vs) {
            match table.as_bytes() {
                Some(b) => self.add_seed(b, start, y, v, zero),
                None => self.add_seed(table.as_slice(), start, y, v, zero),
            }
        }
    }
}

impl ElementwiseMath for ScaledSeeds {
    fn eval_block(&self, args: &[Block<'_>], out: BlockMut<'_>, at: BlockAt<'_>) -> Result<()> {
        expect_arity(self, args, self.tables.len())?;
        macro_rules! run {
            ($y:expr, $variant:ident, $zero:expr) => {{
                let vs: Option<Vec<_>> = args
                    .iter()
                    .map(|a| match a {
                        Block::$variant(v) if v.len() == $y.len() => Some(*v),
                        _ => None,
                    })
                    .collect();
                match vs {
                    Some(vs) => self.sum_blocks(at.start, $y, &vs, $zero),
                    None => {
                        return Err(crate::elementwise::block_error(
                            self,
                            args,
                            &BlockMut::$variant(&mut []),
                        ))
                    }
                }
            }};
        }
        match out {
            BlockMut::F64(y) => run!(y, F64, 0.0),
            BlockMut::F32(y) => run!(y, F32, 0.0),
            out => return Err(crate::elementwise::block_error(self, args, &out)),
        }
        Ok(())
    }
}

/// Batching: the seeds do not depend on the batch, so the batched op is
/// the same sum over a result with the batch axis first, each color table
/// repeated once per batch element (a table has one entry per position of
/// the result's other axes, so it is smaller than the result). Batched
/// operands get their batch axis first and their element axes right-aligned
/// under the result's; unbatched ones broadcast as they are. Computed as
/// one `scaled_seeds`, not as `seed · v`, so an infinite or NaN value where
/// its seed is 0 still gives 0 (the op's documented values).
fn vmap_scaled_seeds(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let s = op.try_downcast::<ScaledSeeds>()?;
    let rank = s.shape.len();
    let values: Vec<Var> = args
        .iter()
        .map(|b| match b.axis {
            Some(k) => crate::batching::pad_after_batch(
                &crate::batching::move_axis(&b.var, k, 0),
                rank - b.logical_rank().min(rank),
            ),
            None => b.var.clone(),
        })
        .collect();
    let mut shape = vec![size];
    shape.extend_from_slice(&s.shape);
    let tables = s
        .tables
        .iter()
        .map(|t| {
            let one = t.as_slice();
            let mut data = Vec::with_capacity(one.len() * size);
            for _ in 0..size {
                data.extend_from_slice(one);
            }
            Table::new(data)
        })
        .collect();
    let batched = ScaledSeeds { shape, axis: s.axis + 1, tables };
    let refs: Vec<&Var> = values.iter().collect();
    Ok(Batched::new(Var::apply_op(Box::new(batched), &refs), Some(0)))
}

/// Linear in its values: the tangent is the same sum of the tangents.
fn jvp_scaled_seeds(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    if t.iter().all(Option::is_none) {
        return Ok(None);
    }
    let dense: Vec<Var> = p.iter().zip(t).map(|(p, t)| crate::ad::dense(t, p)).collect();
    let refs: Vec<&Var> = dense.iter().collect();
    Ok(Some(Var::apply_op(op.boxed(), &refs)))
}

/// The cotangent of values `d`: the cotangent where seed `d` is 1, summed
/// back to the operand's shape.
fn transpose_scaled_seeds(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<ScaledSeeds>()?;
    Ok(args
        .iter()
        .enumerate()
        .map(|(d, a)| {
            a.is_linear().then(|| {
                let seed = Var::apply_op(Box::new(s.seed(d, ct.dtype())), &[]);
                crate::ad::unbroadcast(&(ct * &seed), a.shape())
            })
        })
        .collect())
}

/// Each element depends on the values of the seeds that are 1 there.
fn sparsity_scaled_seeds(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let s = op.try_downcast::<ScaledSeeds>()?;
    let k = s.shape[s.axis];
    let inner: usize = s.shape[s.axis + 1..].iter().product();
    let at = args
        .iter()
        .map(|a| anvil_core::sparsity::broadcast_positions(a.ty.shape(), out.shape()))
        .collect::<Result<Vec<_>>>()?;
    let mut b =
        anvil_core::sparsity::Builder::new(out.numel(), args.iter().map(|a| a.sets.nnz()).sum());
    let mut u = anvil_core::sparsity::Union::default();
    for e in 0..out.numel() {
        let (run, i) = (e / inner.max(1), e % inner.max(1));
        let (outer, c) = (run / k.max(1), run % k.max(1));
        let p = outer * inner + i;
        let hits =
            s.tables.iter().zip(args).zip(&at).filter(|((t, _), _)| t.as_slice()[p] as usize == c);
        b.push_union(&mut u, hits.map(|((_, a), at)| a.sets.row(at[e])));
    }
    let sets = b.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(VmapRule, ScaledSeeds, vmap_scaled_seeds);
register_rule!(JvpRule, ScaledSeeds, jvp_scaled_seeds);
register_rule!(TransposeRule, ScaledSeeds, transpose_scaled_seeds);
register_rule!(SparsityRule, ScaledSeeds, sparsity_scaled_seeds);

/// A value seen as a sum of scaled seeds.
struct Terms {
    shape: Vec<usize>,
    axis: usize,
    tables: Vec<Table>,
    values: Vec<Var>,
}

impl Terms {
    fn of(v: &Var) -> Option<Terms> {
        let p = v.producer()?;
        if let Some(s) = p.op_as::<ColorSeed>() {
            let one = anvil_core::Scalar::F64(1.0).cast(s.dtype);
            let one = v
                .tracer()
                .apply(Box::new(crate::constant::Full { shape: vec![], value: one }), &[]);
            return Some(Terms {
                shape: s.shape.clone(),
                axis: s.axis,
                tables: vec![s.colors.clone()],
                values: vec![one],
            });
        }
        let s = p.op_as::<ScaledSeeds>()?;
        Some(Terms {
            shape: s.shape.clone(),
            axis: s.axis,
            tables: s.tables.clone(),
            values: p.inputs.clone(),
        })
    }

    fn build(self, out: &TensorType) -> Option<Var> {
        let fits = self.shape == out.shape()
            && self
                .values
                .iter()
                .all(|v| v.dtype() == out.dtype() && v.numel() < out.numel().max(2));
        if !fits {
            return None;
        }
        let op = ScaledSeeds { shape: self.shape, axis: self.axis, tables: self.tables };
        let refs: Vec<&Var> = self.values.iter().collect();
        Some(Var::apply_op(Box::new(op), &refs)).filter(|v| v.ty() == out)
    }
}

/// `seeds · v` (either order), or `seeds / v` with `quotient`, as scaled
/// seeds: each value times (divided by) `v`. `None` unless one operand is
/// a seed or scaled seeds (the numerator, for a quotient) and the other is
/// smaller than the result (not itself seeds).
pub fn product(a: &Var, b: &Var, quotient: bool, out: &TensorType) -> Option<Var> {
    let (mut t, v) = match (Terms::of(a), Terms::of(b)) {
        (Some(t), None) => (t, b),
        (None, Some(t)) if !quotient => (t, a),
        _ => return None,
    };
    if v.numel() >= out.numel().max(2) {
        return None;
    }
    for x in &mut t.values {
        *x = if quotient { &*x / v } else { &*x * v };
    }
    t.build(out)
}

/// `a ± b` of two sums of seeds of one layout: one sum, the values of
/// equal tables added.
pub fn combine(a: &Var, b: &Var, subtract: bool, out: &TensorType) -> Option<Var> {
    let (mut x, y) = (Terms::of(a)?, Terms::of(b)?);
    if x.shape != y.shape || x.axis != y.axis {
        return None;
    }
    for (table, v) in y.tables.into_iter().zip(y.values) {
        match x.tables.iter().position(|t| *t == table) {
            Some(i) => x.values[i] = if subtract { &x.values[i] - &v } else { &x.values[i] + &v },
            None => {
                x.tables.push(table);
                x.values.push(if subtract { -v } else { v });
            }
        }
    }
    x.build(out)
}

/// `-s` of scaled seeds: the values negated.
pub fn negate(a: &Var, out: &TensorType) -> Option<Var> {
    a.producer()?.op_as::<ScaledSeeds>()?;
    let mut t = Terms::of(a)?;
    t.values = t.values.iter().map(|v| -v).collect();
    t.build(out)
}

// ------------------------------------------------------------- decompress

/// Entry `q` of the last axis of the result is entry `map[q]` of the last
/// axis of the operand (`[..., len]` → `[..., map.len()]`, leading axes
/// kept): the values of a sparse matrix, in its pattern's order, read out
/// of its compressed products.
///
/// ```
/// use anvil_ops::sparse::{Decompress, Table};
/// use anvil_core::{DType, Op, TensorType};
/// let d = Decompress { map: Table::new(vec![2, 0, 0]), len: 3 };
/// let t = d.infer(&[TensorType::new(DType::F64, vec![4, 3])])?;
/// assert_eq!(t.shape(), &[4, 3]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Decompress {
    /// The source of each entry of the result, along the last axis.
    pub map: Table,
    /// The length of the operand's last axis (every entry of `map` is below it).
    pub len: usize,
}

impl Op for Decompress {
    fn name(&self) -> &'static str {
        "decompress"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let t = &inputs[0];
        if t.shape().last() != Some(&self.len) {
            return Err(Error::shape(
                "decompress",
                &[t.shape()],
                format!(
                    "argument 0 must end with an axis of {} (the compressed products)",
                    self.len
                ),
            ));
        }
        if let Some(bad) = self.map.max().filter(|&m| m as usize >= self.len) {
            return Err(Error::invalid(
                "decompress",
                "map",
                format!("entry {bad} is not below {}", self.len),
            ));
        }
        let mut shape = t.shape().to_vec();
        *shape.last_mut().unwrap_or(&mut 0) = self.map.len();
        Ok(t.with_shape(shape))
    }
    fn params(&self) -> String {
        format!("len={}, nnz={}", self.len, self.map.len())
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0
    }
}

/// Batching: the op reads the last axis only, so a batch axis elsewhere
/// stays where it is; one at the end moves to the front first.
fn vmap_decompress(op: &dyn Op, args: &[Batched], _: usize) -> Result<Batched> {
    let x = &args[0];
    let rank = x.var.rank();
    let (var, axis) = match x.axis {
        Some(a) if a + 1 == rank => (move_axis(&x.var, a, 0), Some(0)),
        a => (x.var.clone(), a),
    };
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&var]), axis))
}

/// Linear: the same gather of the tangent.
fn jvp_decompress(op: &dyn Op, _: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|t| Var::apply_op(op.boxed(), &[t])))
}

/// The transpose of a gather: the cotangents added back where they were
/// read (`scatter_add` along the last axis).
fn transpose_decompress(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let d = op.try_downcast::<Decompress>()?;
    let idx: Vec<i64> = d.map.as_slice().iter().map(|&m| i64::from(m)).collect();
    let idx = ct.constant_like(Tensor::from_vec(idx, &[d.map.len()])?);
    Ok(vec![args[0].is_linear().then(|| ct.scatter_add(&idx, -1, d.len))])
}

/// Each entry depends on what its source does.
fn sparsity_decompress(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    _: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let d = op.try_downcast::<Decompress>()?;
    let (nnz, map) = (d.map.len(), d.map.as_slice());
    Ok(Arc::new(args[0].sets.gather(out.numel(), |e| {
        let (row, q) = (e / nnz.max(1), e % nnz.max(1));
        Some(row * d.len + map[q] as usize)
    })))
}

register_rule!(VmapRule, Decompress, vmap_decompress);
register_rule!(JvpRule, Decompress, jvp_decompress);
register_rule!(TransposeRule, Decompress, transpose_decompress);
register_rule!(SparsityRule, Decompress, sparsity_decompress);

// ------------------------------------------- custom calls (see module doc)

/// A custom-derivative call's results depend on its operands as its
/// primal function's do.
fn sparsity_custom_jvp(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    _: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let c = op.try_downcast::<crate::control::CustomJvpCall>()?;
    cx.compose_body(op, &c.primal, args, None)
}

fn sparsity_custom_vjp(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    _: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let c = op.try_downcast::<crate::control::CustomVjpCall>()?;
    cx.compose_body(op, &c.primal, args, None)
}

register_rule!(SparsityRule, crate::control::CustomJvpCall, many: sparsity_custom_jvp);
register_rule!(SparsityRule, crate::control::CustomVjpCall, many: sparsity_custom_vjp);

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(s: &ColorSeed) -> Vec<f64> {
        let n = anvil_core::shape::numel(&s.shape);
        let mut y = vec![0.0; n];
        let at = BlockAt { start: 0, shape: &s.shape };
        s.eval_block(&[], BlockMut::F64(&mut y), at).unwrap();
        y
    }

    #[test]
    fn blocks_of_a_color_seed_match_its_definition() {
        let colors = Table::new(vec![0, 1, 2, 0, NEUTRAL, 1]);
        for (shape, axis) in
            [(vec![6, 3], 1), (vec![3, 6], 0), (vec![2, 3, 3], 2), (vec![2, 3, 3], 1)]
        {
            let s =
                ColorSeed { shape: shape.clone(), axis, colors: colors.clone(), dtype: DType::F64 };
            let want = dense(&s);
            let strides = anvil_core::shape::strides(&shape);
            for (e, &v) in want.iter().enumerate() {
                let idx: Vec<usize> = (0..shape.len()).map(|d| e / strides[d] % shape[d]).collect();
                let p =
                    (0..shape.len()).filter(|&d| d != axis).fold(0, |p, d| p * shape[d] + idx[d]);
                assert_eq!(v, f64::from(u8::from(colors.as_slice()[p] as usize == idx[axis])));
            }
            for block in [1, 4, 7] {
                let mut got = vec![f64::NAN; want.len()];
                for start in (0..want.len()).step_by(block) {
                    let end = (start + block).min(want.len());
                    let at = BlockAt { start, shape: &shape };
                    s.eval_block(&[], BlockMut::F64(&mut got[start..end]), at).unwrap();
                }
                assert_eq!(got, want, "{shape:?} axis {axis} block {block}");
            }
        }
    }

    #[test]
    fn scaled_seeds_sum_each_seed_times_its_values_in_any_blocks() {
        let tables =
            vec![Table::new(vec![0, 1, 2, 0, NEUTRAL]), Table::new(vec![1, NEUTRAL, 0, 2, 2])];
        let s = ScaledSeeds { shape: vec![3, 5], axis: 0, tables: tables.clone() };
        // Operand 0 broadcasts along the color axis, operand 1 is a scalar.
        let v0 = [1.0, 2.0, f64::INFINITY, 4.0, 5.0];
        let v1 = [10.0];
        let mut want = vec![0.0; 15];
        for (d, table) in tables.iter().enumerate() {
            let seed = dense(&s.seed(d, DType::F64));
            for (e, w) in want.iter_mut().enumerate() {
                if seed[e] != 0.0 {
                    *w += if d == 0 { v0[e % 5] } else { v1[0] };
                }
            }
            assert_eq!(table.len(), 5);
        }
        for block in [1, 4, 15] {
            let mut got = vec![f64::NAN; 15];
            for start in (0..15).step_by(block) {
                let end = (start + block).min(15);
                let b0: Vec<f64> = (start..end).map(|e| v0[e % 5]).collect();
                let b1 = vec![v1[0]; end - start];
                let at = BlockAt { start, shape: &s.shape };
                let args = [Block::F64(&b0), Block::F64(&b1)];
                s.eval_block(&args, BlockMut::F64(&mut got[start..end]), at).unwrap();
            }
            assert_eq!(got, want, "block {block}");
        }
        // The infinite value shows only where its seed is 1 (color 2 of column 2).
        assert_eq!(want.iter().filter(|v| v.is_infinite()).count(), 1);
    }

    #[test]
    fn relayouts_of_a_seed_are_seeds_with_regathered_colors() {
        let s = ColorSeed {
            shape: vec![4, 2],
            axis: 1,
            colors: Table::new(vec![0, 1, 0, 1]),
            dtype: DType::F64,
        };
        let p = s.padded(&[(1, 2), (0, 0)], &[7, 2]).unwrap();
        assert_eq!(p.colors.as_slice(), &[NEUTRAL, 0, 1, 0, 1, NEUTRAL, NEUTRAL]);
        let sl = p.sliced(&[(2, 1, 3), (0, 1, 2)], &[3, 2]).unwrap();
        assert_eq!(sl.colors.as_slice(), &[1, 0, 1]);
        let rev = s.sliced(&[(3, -1, 4), (0, 1, 2)], &[4, 2]).unwrap();
        assert_eq!(rev.colors.as_slice(), &[1, 0, 1, 0]);
        let t = ColorSeed {
            shape: vec![2, 2, 2],
            axis: 2,
            colors: Table::new(vec![0, 1, 1, 0]),
            dtype: DType::F64,
        };
        let q = t.permuted(&[1, 0, 2]).unwrap();
        assert_eq!(q.colors.as_slice(), &[0, 1, 1, 0]);
        let q = t.permuted(&[2, 1, 0]).unwrap();
        assert_eq!((q.axis, q.colors.as_slice()), (0, &[0, 1, 1, 0][..]));
        assert_eq!(dense(&t.permuted(&[1, 2, 0]).unwrap()).len(), 8);
        assert!(s.sliced(&[(0, 1, 4), (1, 1, 1)], &[4, 1]).is_none());
    }
}
