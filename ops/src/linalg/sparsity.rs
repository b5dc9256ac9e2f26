//! What the linear-algebra ops' sparsity rules share: an operand seen as
//! a batch of matrices, unions of its entries, and the dependency pattern
//! of Cholesky's forward recursion.
//!
//! The rules themselves sit beside their ops. All of them keep batch
//! elements apart (matrix `b` of a result depends on matrix `b` of the
//! operands only). Within a matrix they follow what an algorithm for the
//! op reads: an entry that a correct algorithm computes without reading an
//! operand entry does not depend on it, so such a pattern is never too
//! small, and where the derivative is generically nonzero it is exact.
//! Factorisations whose every result entry mixes the whole matrix
//! (`inv`, `eigh`, `svd`) are dense within each matrix.

pub(crate) use anvil_core::sparsity::Index;
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg};
use anvil_core::{Error, Op, Result, TensorType};
use std::sync::Arc;

/// An operand `[..., m, n]` as `batch` matrices of `m × n` index sets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mats<'a> {
    pub sets: &'a IndexSets,
    pub batch: usize,
    pub m: usize,
    pub n: usize,
}

impl<'a> Mats<'a> {
    /// Operand `arg` of `op` as matrices.
    pub(crate) fn of(op: &dyn Op, arg: &SparsityArg<'a>) -> Result<Mats<'a>> {
        match *arg.ty.shape() {
            [ref batch @ .., m, n] => {
                Ok(Mats { sets: arg.sets, batch: batch.iter().product(), m, n })
            }
            _ => Err(Error::invalid(op.name(), "sparsity", "an operand of rank below 2")),
        }
    }

    /// The set of entry `(i, j)` of matrix `b`.
    pub(crate) fn at(&self, b: usize, i: usize, j: usize) -> &'a [Index] {
        self.sets.row((b * self.m + i) * self.n + j)
    }

    /// The union of the entries `(i, j)` of matrix `b` where `keep(i, j)`.
    pub(crate) fn union_where(&self, b: usize, keep: impl Fn(usize, usize) -> bool) -> Vec<Index> {
        let entries = (0..self.m).flat_map(|i| (0..self.n).map(move |j| (i, j)));
        union(entries.filter(|&(i, j)| keep(i, j)).map(|(i, j)| self.at(b, i, j)))
    }

    /// The union of column `j` of matrix `b`.
    pub(crate) fn column(&self, b: usize, j: usize) -> Vec<Index> {
        union((0..self.m).map(|i| self.at(b, i, j)))
    }
}

/// The sorted union of `parts`.
pub(crate) fn union<'a>(parts: impl IntoIterator<Item = &'a [Index]>) -> Vec<Index> {
    let mut v: Vec<Index> = parts.into_iter().flatten().copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The running unions of `parts`: element `t` is the union of
/// `parts[..=t]`, or of `parts[t..]` when `reverse`.
pub(crate) fn running(parts: &[Vec<Index>], reverse: bool) -> Vec<Vec<Index>> {
    let mut out = vec![Vec::new(); parts.len()];
    let mut acc: Vec<Index> = Vec::new();
    let order: Box<dyn Iterator<Item = usize>> =
        if reverse { Box::new((0..parts.len()).rev()) } else { Box::new(0..parts.len()) };
    for t in order {
        acc = union([&acc[..], &parts[t][..]]);
        out[t] = acc.clone();
    }
    out
}

/// Sets built for a result of type `out`, checked for size and the limit
/// of entries.
pub(crate) fn finish(
    op: &dyn Op,
    sets: Builder,
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let sets = sets.finish();
    if sets.len() != out.numel() {
        return Err(Error::invalid(
            op.name(),
            "sparsity",
            format!("{} index sets for a result of type {out}", sets.len()),
        ));
    }
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

/// Every element of result matrix `b` (of `out`'s batch of
/// `wholes.len()`) depends on `wholes[b]`: an op dense within each matrix.
pub(crate) fn per_matrix(
    op: &dyn Op,
    wholes: &[Vec<Index>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let per = if wholes.is_empty() { 0 } else { out.numel() / wholes.len() };
    cx.check_entries(op, wholes.iter().map(Vec::len).sum::<usize>().saturating_mul(per))?;
    let mut sets = Builder::new(out.numel(), 0);
    for whole in wholes {
        for _ in 0..per {
            sets.push(whole);
        }
    }
    finish(op, sets, out, cx)
}

/// The unions of the matrices of `a` restricted to `keep(i, j)`, one per
/// batch element.
pub(crate) fn wholes(a: &Mats<'_>, keep: impl Fn(usize, usize) -> bool + Copy) -> Vec<Vec<Index>> {
    (0..a.batch).map(|b| a.union_where(b, keep)).collect()
}

/// The pattern of Cholesky's forward recursion on `batch` matrices
/// `n × n` whose lower entry `(p, q)` (`q ≤ p`) depends on `entry(b, p,
/// q)`: result entry `(i, j)`, `j ≤ i`, depends on the leading lower
/// triangle `q ≤ p ≤ j` and on row `i` up to column `j`; the strict upper
/// triangle on nothing.
///
/// `L[i, j] = (S[i, j] − Σ_{k<j} L[i, k] L[j, k]) / L[j, j]` and `L[j, j]
/// = √(S[j, j] − Σ_{k<j} L[j, k]²)` read exactly these (by induction on
/// `j`), and so does the recursion for the tangent `L̇` given `L` and `Ṡ`.
pub(crate) fn cholesky_pattern(
    op: &dyn Op,
    batch: usize,
    n: usize,
    entry: impl Fn(usize, usize, usize) -> Vec<Index>,
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let mut sets = Builder::new(out.numel(), 0);
    for b in 0..batch {
        let rows: Vec<Vec<Vec<Index>>> =
            (0..n).map(|p| (0..=p).map(|q| entry(b, p, q)).collect()).collect();
        let per_row: Vec<Vec<Index>> =
            rows.iter().map(|r| union(r.iter().map(|s| &s[..]))).collect();
        let leading = running(&per_row, false);
        for (i, row) in rows.iter().enumerate() {
            let prefix = running(row, false);
            for j in 0..n {
                if j <= i {
                    sets.push_merge(&leading[j], &prefix[j]);
                } else {
                    sets.push(&[]);
                }
            }
        }
    }
    finish(op, sets, out, cx)
}

/// `X = F(A) B` with `F(A)` generically full: `X[i, c]` depends on
/// `factors[k]` (what matrix `k` of `F` depends on) and on column `c` of
/// `B`.
pub(crate) fn solve_columns(
    op: &dyn Op,
    factors: &[Vec<Index>],
    b: &Mats<'_>,
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    if b.sets.is_zero() {
        return per_matrix(op, factors, out, cx);
    }
    let mut sets = Builder::new(out.numel(), 0);
    for (k, whole) in factors.iter().enumerate() {
        let cols: Vec<_> = (0..b.n).map(|c| union([&whole[..], &b.column(k, c)[..]])).collect();
        for _ in 0..b.m {
            for col in &cols {
                sets.push(col);
            }
        }
    }
    finish(op, sets, out, cx)
}
