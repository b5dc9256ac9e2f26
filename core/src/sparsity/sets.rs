//! Index sets: for every element of a value, the set of inputs it depends
//! on, compressed by element (CSR).
//!
//! Input indices are [`Index`] = `u32` (the columns of a Jacobian pattern:
//! up to `u32::MAX` inputs, the same index type as `anvil-sparse`'s
//! patterns), element positions are `usize` (row-major order of the
//! value). Every set is sorted and free of repeats, which makes a union a
//! merge. A value that depends on no input at all (a constant, an integer
//! value, a seed) stores no offsets, so the many such values of a program
//! cost nothing.
//!
//! The functions here are the building blocks of the sparsity rules: an
//! elementwise op is [`IndexSets::union_broadcast`] of its operands, a
//! relayout is [`IndexSets::gather`] through a map of source positions
//! (built by [`strided_positions`] for permutes, slices and broadcasts), a
//! reduction [`IndexSets::union_groups`].

use crate::error::{Error, Result};

/// The type of an input index in an index set (see the [module docs](self)).
pub type Index = u32;

/// A position map entry meaning "no source element" (padding).
pub const NO_SOURCE: usize = usize::MAX;

/// The index sets of one value: for element `e` (row-major), the sorted
/// inputs it depends on.
///
/// ```
/// use anvil_core::sparsity::IndexSets;
/// let x = IndexSets::identity(3, 10)?;          // x[i] depends on input 10 + i
/// assert_eq!(x.row(2), &[12]);
/// let shifted = x.gather(3, |e| (e > 0).then(|| e - 1)); // y[e] = x[e - 1], y[0] = 0
/// let sum = IndexSets::union_broadcast(&[(&x, &[3][..]), (&shifted, &[3][..])], &[3])?;
/// assert_eq!(sum.row(1), &[10, 11]);
/// assert_eq!(sum.row(0), &[10]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct IndexSets {
    len: usize,
    /// `len + 1` offsets into `idx`, or empty when no element has an entry.
    ptr: Vec<usize>,
    idx: Vec<Index>,
}

impl std::fmt::Debug for IndexSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.len <= 16 {
            let rows: Vec<&[Index]> = self.rows().collect();
            write!(f, "IndexSets{rows:?}")
        } else {
            write!(f, "IndexSets({} elements, {} entries)", self.len, self.nnz())
        }
    }
}

impl IndexSets {
    /// `len` elements that depend on nothing.
    pub fn empty(len: usize) -> IndexSets {
        IndexSets { len, ptr: Vec::new(), idx: Vec::new() }
    }

    /// `len` elements, element `i` depending on input `first + i` alone
    /// (a function input, numbered from `first`).
    ///
    /// # Errors
    /// More than `u32::MAX` inputs in all.
    pub fn identity(len: usize, first: usize) -> Result<IndexSets> {
        let end = first.checked_add(len).filter(|&e| e <= Index::MAX as usize + 1);
        if end.is_none() {
            return Err(too_many_inputs(first.saturating_add(len)));
        }
        Ok(IndexSets {
            len,
            ptr: (0..=len).collect(),
            idx: (first..first + len).map(|i| i as Index).collect(),
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total number of entries (dependencies) over all elements.
    pub fn nnz(&self) -> usize {
        self.idx.len()
    }

    /// Whether no element depends on any input.
    pub fn is_zero(&self) -> bool {
        self.idx.is_empty()
    }

    /// The inputs element `e` depends on, sorted.
    ///
    /// # Panics
    /// If `e >= len` (an internal invariant of the rules).
    #[inline]
    pub fn row(&self, e: usize) -> &[Index] {
        debug_assert!(e < self.len, "element {e} of {}", self.len);
        match self.ptr.get(e..e + 2) {
            Some(&[a, b]) => &self.idx[a..b],
            _ => &[],
        }
    }

    /// Every element's set, in order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[Index]> + '_ {
        (0..self.len).map(|e| self.row(e))
    }

    /// The CSR arrays: offsets (`len + 1`, or empty when there are no
    /// entries) and indices.
    pub fn as_csr(&self) -> (&[usize], &[Index]) {
        (&self.ptr, &self.idx)
    }

    /// The sets from CSR arrays, checked: offsets of length `len + 1`
    /// (or empty with no indices), non-decreasing, ending at the number of
    /// indices; each set strictly increasing.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first violation.
    pub fn from_csr(len: usize, ptr: Vec<usize>, idx: Vec<Index>) -> Result<IndexSets> {
        let bad = |msg: String| Err(Error::invalid("sparsity", "index sets", msg));
        if ptr.is_empty() && idx.is_empty() {
            return Ok(IndexSets::empty(len));
        }
        if ptr.len() != len + 1 || ptr[0] != 0 || ptr[len] != idx.len() {
            return bad(format!(
                "{} offsets for {len} elements and {} indices",
                ptr.len(),
                idx.len()
            ));
        }
        for (e, w) in ptr.windows(2).enumerate() {
            if w[0] > w[1] || idx[w[0]..w[1]].windows(2).any(|p| p[0] >= p[1]) {
                return bad(format!("the set of element {e} is not strictly increasing"));
            }
        }
        Ok(IndexSets { len, ptr, idx })
    }

    /// Element `e` of the result is element `src(e)` of `self` (no
    /// dependency for `None`): every relayout.
    pub fn gather(&self, len: usize, mut src: impl FnMut(usize) -> Option<usize>) -> IndexSets {
        if self.is_zero() {
            return IndexSets::empty(len);
        }
        let mut b = Builder::new(len, self.nnz());
        for e in 0..len {
            match src(e) {
                Some(s) if s < self.len => b.push(self.row(s)),
                _ => b.push(&[]),
            }
        }
        b.finish()
    }

    /// [`IndexSets::gather`] through a position map ([`NO_SOURCE`]: none).
    pub fn gather_map(&self, map: &[usize]) -> IndexSets {
        self.gather(map.len(), |e| Some(map[e]).filter(|&s| s != NO_SOURCE))
    }

    /// The union of operands broadcast (NumPy rules) to `shape`: what an
    /// elementwise op's result depends on. Each operand is given with its
    /// shape.
    ///
    /// # Errors
    /// A shape that does not broadcast to `shape`; a result beyond the
    /// size of an index.
    pub fn union_broadcast(args: &[(&IndexSets, &[usize])], shape: &[usize]) -> Result<IndexSets> {
        let len = crate::shape::numel(shape);
        let live: Vec<&(&IndexSets, &[usize])> =
            args.iter().filter(|(s, _)| !s.is_zero()).collect();
        let maps = live
            .iter()
            .map(|(s, from)| {
                if *from == shape {
                    Ok(None)
                } else if s.len == 1 {
                    Ok(Some(vec![0; len]))
                } else {
                    broadcast_positions(from, shape).map(Some)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        match live.len() {
            0 => Ok(IndexSets::empty(len)),
            1 => Ok(match &maps[0] {
                // The caller keeps a shared copy when it can (see
                // `sparsity::elementwise`); this is the owned one.
                None => live[0].0.clone(),
                Some(m) => live[0].0.gather_map(m),
            }),
            _ => {
                let at = |k: usize, e: usize| maps[k].as_ref().map_or(e, |m| m[e]);
                // The sum of the operands' entries bounds the result's: no regrowth.
                let bound =
                    live.iter().map(|(s, _)| s.nnz().saturating_mul(len / s.len.max(1))).sum();
                let mut b = Builder::new(len, bound);
                let mut u = Union::default();
                if let ([x, y], [None, None]) = (&live[..], &maps[..]) {
                    return Ok(merge(x.0, y.0));
                } else if live.len() == 2 {
                    for e in 0..len {
                        b.push_merge(live[0].0.row(at(0, e)), live[1].0.row(at(1, e)));
                    }
                } else {
                    for e in 0..len {
                        b.push_union(&mut u, (0..live.len()).map(|k| live[k].0.row(at(k, e))));
                    }
                }
                Ok(b.finish())
            }
        }
    }

    /// Element `g` of the result is the union of the elements `members[g]`
    /// lists (a reduction's groups, an unknown index's whole axis).
    pub fn union_groups<'a>(
        &self,
        groups: impl ExactSizeIterator<Item = &'a [usize]>,
    ) -> IndexSets {
        let len = groups.len();
        if self.is_zero() {
            return IndexSets::empty(len);
        }
        let mut b = Builder::new(len, self.nnz());
        let mut u = Union::default();
        for g in groups {
            b.push_union(&mut u, g.iter().map(|&e| self.row(e)));
        }
        b.finish()
    }

    /// Element `e` of the result is the union of all of `self` (an op
    /// treated as dense: every result element depends on every operand
    /// element).
    pub fn union_all(&self, len: usize) -> IndexSets {
        if self.is_zero() {
            return IndexSets::empty(len);
        }
        let mut u = Union::default();
        let mut all = Vec::new();
        u.union_into(self.rows(), &mut all);
        let mut b = Builder::new(len, all.len().saturating_mul(len));
        for _ in 0..len {
            b.push(&all);
        }
        b.finish()
    }
}

/// The element-by-element union of two index sets of the same length
/// (both with entries): one tight loop over their arrays.
fn merge(a: &IndexSets, b: &IndexSets) -> IndexSets {
    let len = a.len;
    let (mut ptr, mut idx) = pool::take(len + 1, a.nnz() + b.nnz());
    ptr.push(0);
    for (wa, wb) in a.ptr.windows(2).zip(b.ptr.windows(2)) {
        let (x, y) = (&a.idx[wa[0]..wa[1]], &b.idx[wb[0]..wb[1]]);
        let (mut i, mut j) = (0, 0);
        while i < x.len() && j < y.len() {
            let (p, q) = (x[i], y[j]);
            idx.push(p.min(q));
            i += usize::from(p <= q);
            j += usize::from(q <= p);
        }
        idx.extend(x[i..].iter().copied());
        idx.extend(y[j..].iter().copied());
        ptr.push(idx.len());
    }
    IndexSets { len, ptr, idx }
}

fn too_many_inputs(n: usize) -> Error {
    Error::invalid(
        "sparsity",
        "inputs",
        format!(
            "{n} input elements exceed the index type (u32: at most {})",
            u64::from(Index::MAX) + 1
        ),
    )
}

/// Builds index sets element by element.
#[derive(Debug)]
pub struct Builder {
    len: usize,
    ptr: Vec<usize>,
    idx: Vec<Index>,
}

impl Builder {
    /// A builder for `len` elements, reserving room for `nnz` entries.
    pub fn new(len: usize, nnz: usize) -> Builder {
        let (mut ptr, idx) = pool::take(len + 1, nnz);
        ptr.push(0);
        Builder { len, ptr, idx }
    }

    /// The number of entries pushed so far (for rules that check the limit
    /// of entries while they build).
    pub fn nnz(&self) -> usize {
        self.idx.len()
    }

    /// Appends the next element's set (sorted, without repeats).
    #[inline]
    pub fn push(&mut self, set: &[Index]) {
        debug_assert!(set.windows(2).all(|w| w[0] < w[1]));
        // Sets are short: a loop beats a call to memcpy.
        self.idx.extend(set.iter().copied());
        self.ptr.push(self.idx.len());
    }

    /// Appends the union of two sorted sets.
    pub fn push_merge(&mut self, a: &[Index], b: &[Index]) {
        match (a.is_empty(), b.is_empty()) {
            (true, _) => self.push(b),
            (_, true) => self.push(a),
            _ => {
                let (mut i, mut j) = (0, 0);
                while i < a.len() && j < b.len() {
                    let (x, y) = (a[i], b[j]);
                    self.idx.push(x.min(y));
                    i += usize::from(x <= y);
                    j += usize::from(y <= x);
                }
                self.idx.extend(a[i..].iter().copied());
                self.idx.extend(b[j..].iter().copied());
                self.ptr.push(self.idx.len());
            }
        }
    }

    /// Appends the union of any number of sorted sets.
    pub fn push_union<'a>(&mut self, u: &mut Union, sets: impl Iterator<Item = &'a [Index]>) {
        u.union_into(sets, &mut self.idx);
        self.ptr.push(self.idx.len());
    }

    /// The sets built (elements not pushed are empty).
    pub fn finish(mut self) -> IndexSets {
        if self.idx.is_empty() {
            return IndexSets::empty(self.len);
        }
        let last = self.idx.len();
        self.ptr.resize(self.len + 1, last);
        self.ptr.truncate(self.len + 1);
        IndexSets { len: self.len, ptr: self.ptr, idx: self.idx }
    }
}

/// Buffers of index sets that died during one propagation, reused by the
/// next sets built (a fresh multi-megabyte buffer costs a page fault per
/// 4 KiB; detection at 10^6 elements builds a dozen of them). Installed
/// for the calling thread while [`Detector::propagate`] runs, as the CPU
/// backend installs its buffer pool while a plan runs.
///
/// [`Detector::propagate`]: super::Detector::propagate
pub(crate) mod pool {
    use super::{Index, IndexSets};
    use std::cell::RefCell;

    type Bufs = (Vec<usize>, Vec<Index>);

    thread_local! {
        static POOL: RefCell<Option<Vec<Bufs>>> = const { RefCell::new(None) };
    }

    /// Installs a pool for this thread until the guard drops (nothing when
    /// one is installed already: nested propagations share it).
    pub(crate) fn install() -> Guard {
        let fresh = POOL.with(|p| {
            let mut p = p.borrow_mut();
            let fresh = p.is_none();
            if fresh {
                *p = Some(Vec::new());
            }
            fresh
        });
        Guard(fresh)
    }

    /// Uninstalls the pool it installed.
    pub(crate) struct Guard(bool);

    impl Drop for Guard {
        fn drop(&mut self) {
            if self.0 {
                POOL.with(|p| p.borrow_mut().take());
            }
        }
    }

    /// Empty buffers with room for `ptr` offsets and `idx` indices.
    pub(crate) fn take(ptr: usize, idx: usize) -> Bufs {
        let reused = POOL.with(|p| {
            let mut p = p.borrow_mut();
            let list = p.as_mut()?;
            // The buffer whose index capacity fits best.
            let k = (0..list.len()).min_by_key(|&k| list[k].1.capacity().abs_diff(idx))?;
            Some(list.swap_remove(k))
        });
        match reused {
            Some((mut p, mut i)) => {
                p.clear();
                i.clear();
                p.reserve(ptr);
                i.reserve(idx);
                (p, i)
            }
            None => (Vec::with_capacity(ptr), Vec::with_capacity(idx)),
        }
    }

    /// Keeps the buffers of sets nobody needs any more.
    pub(crate) fn recycle(s: IndexSets) {
        if s.ptr.capacity() == 0 {
            return;
        }
        POOL.with(|p| {
            if let Some(list) = p.borrow_mut().as_mut() {
                list.push((s.ptr, s.idx));
            }
        });
    }
}

/// Scratch space for unions of many sets.
#[derive(Debug, Default)]
pub struct Union {
    buf: Vec<Index>,
    bits: Vec<u64>,
}

impl Union {
    /// Appends the sorted union of `sets` to `out`: by sorting their
    /// entries when few, by a bitmap over their range when many.
    fn union_into<'a>(&mut self, sets: impl Iterator<Item = &'a [Index]>, out: &mut Vec<Index>) {
        self.buf.clear();
        let (mut lo, mut hi) = (Index::MAX, 0);
        let mut nonempty = 0usize;
        let mut only: &[Index] = &[];
        for s in sets {
            if let (Some(&a), Some(&b)) = (s.first(), s.last()) {
                lo = lo.min(a);
                hi = hi.max(b);
                nonempty += 1;
                only = s;
                self.buf.extend_from_slice(s);
            }
        }
        match nonempty {
            0 => {}
            1 => out.extend_from_slice(only),
            _ if self.buf.len() <= 64 || (hi - lo) as usize > 16 * self.buf.len() => {
                self.buf.sort_unstable();
                self.buf.dedup();
                out.extend_from_slice(&self.buf);
            }
            _ => {
                let words = (hi - lo) as usize / 64 + 1;
                self.bits.clear();
                self.bits.resize(words, 0);
                for &i in &self.buf {
                    let k = (i - lo) as usize;
                    self.bits[k / 64] |= 1 << (k % 64);
                }
                for (w, &word) in self.bits.iter().enumerate() {
                    let mut m = word;
                    while m != 0 {
                        let b = m.trailing_zeros() as usize;
                        out.push(lo + (w * 64 + b) as Index);
                        m &= m - 1;
                    }
                }
            }
        }
    }
}

/// For every element of `out_shape` in row-major order, the position
/// `base + Σ_d i_d · strides[d]` (a permute, slice, broadcast or flip of
/// another value seen from the result; also where each element of a
/// value lands in a larger one, for pads and concatenations).
///
/// # Errors
/// A position that is negative or does not fit (a rule bug, reported
/// instead of wrapping).
pub fn strided_positions(out_shape: &[usize], base: i64, strides: &[i64]) -> Result<Vec<usize>> {
    let len = crate::shape::numel(out_shape);
    let mut out = Vec::with_capacity(len);
    if len == 0 {
        return Ok(out);
    }
    let rank = out_shape.len();
    let mut idx = vec![0usize; rank];
    let mut pos = base;
    let bad = || Error::invalid("sparsity", "positions", "a strided position is out of range");
    loop {
        // The innermost axis in one run.
        let (n, s) = match rank {
            0 => (1, 0),
            _ => (out_shape[rank - 1], strides[rank - 1]),
        };
        for k in 0..n as i64 {
            let p = pos + k * s;
            out.push(usize::try_from(p).map_err(|_| bad())?);
        }
        // Carry into the outer axes.
        let mut d = rank.saturating_sub(1);
        loop {
            if d == 0 {
                return Ok(out);
            }
            d -= 1;
            idx[d] += 1;
            pos += strides[d];
            if idx[d] < out_shape[d] {
                break;
            }
            pos -= strides[d] * out_shape[d] as i64;
            idx[d] = 0;
        }
    }
}

/// Row-major strides of `shape`, as `i64`.
pub fn strides_i64(shape: &[usize]) -> Vec<i64> {
    crate::shape::strides(shape).iter().map(|&s| s as i64).collect()
}

/// For every element of `shape`, the element of a value of shape `from`
/// broadcast to it (NumPy rules: right-aligned, size-1 axes repeated).
///
/// # Errors
/// When `from` does not broadcast to `shape`.
pub fn broadcast_positions(from: &[usize], shape: &[usize]) -> Result<Vec<usize>> {
    if !crate::shape::broadcasts_to(from, shape) {
        return Err(Error::Broadcast {
            op: "sparsity".into(),
            lhs: from.to_vec(),
            rhs: shape.to_vec(),
            arg: "0".into(),
        });
    }
    let lead = shape.len() - from.len();
    let fs = strides_i64(from);
    let strides: Vec<i64> = (0..shape.len())
        .map(|d| if d < lead || from[d - lead] == 1 { 0 } else { fs[d - lead] })
        .collect();
    strided_positions(shape, 0, &strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_by_sorting_and_by_bitmap_agree_with_a_naive_union() {
        let mut u = Union::default();
        for (n, spread) in [(3usize, 5u32), (40, 3), (200, 2), (200, 100_000)] {
            let sets: Vec<Vec<Index>> = (0..n as u32)
                .map(|k| (0..3).map(|j| (k * 7 + j * 13) % (spread * n as u32)).collect())
                .map(|mut v: Vec<Index>| {
                    v.sort_unstable();
                    v.dedup();
                    v
                })
                .collect();
            let mut got = Vec::new();
            u.union_into(sets.iter().map(Vec::as_slice), &mut got);
            let mut want: Vec<Index> = sets.concat();
            want.sort_unstable();
            want.dedup();
            assert_eq!(got, want, "{n} sets, spread {spread}");
        }
    }

    #[test]
    fn strided_positions_walk_permutes_slices_and_broadcasts() {
        // [2, 3] transposed: positions of a [3, 2] result in the source.
        assert_eq!(strided_positions(&[3, 2], 0, &[1, 3]).unwrap(), [0, 3, 1, 4, 2, 5]);
        // A reversed slice of [5]: 4, 2, 0.
        assert_eq!(strided_positions(&[3], 4, &[-2]).unwrap(), [4, 2, 0]);
        assert_eq!(
            broadcast_positions(&[3, 1], &[2, 3, 2]).unwrap(),
            [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]
        );
        assert_eq!(strided_positions(&[], 7, &[]).unwrap(), [7]);
        assert!(strided_positions(&[2], 0, &[-1]).is_err());
    }

    #[test]
    fn merges_keep_sets_sorted_and_unique() {
        let mut b = Builder::new(3, 8);
        b.push_merge(&[1, 4, 9], &[2, 4, 10]);
        b.push_merge(&[], &[3]);
        b.push_merge(&[5], &[5]);
        let s = b.finish();
        assert_eq!(s.rows().collect::<Vec<_>>(), [&[1, 2, 4, 9, 10][..], &[3], &[5]]);
        assert!(IndexSets::from_csr(2, vec![0, 2, 1], vec![1, 2]).is_err());
        assert!(IndexSets::identity(2, u32::MAX as usize).is_err());
    }
}
