//! `matmul` with `numpy.matmul` semantics: 1-D operands are promoted (a
//! vector on the left is a row, on the right a column) and the added axis is
//! removed from the result; leading batch axes broadcast.
//!
//! One primitive covers matrix-vector, matrix-matrix and batched products, so
//! transforms see a single op; the CPU kernel maps each case to faer GEMMs.

use anvil_core::shape::matmul_shape;
use anvil_core::{op::expect_arity, Error, Op, Result, TensorType};

/// Matrix product with `numpy.matmul` semantics, of `f64`, `f32` or `i64`
/// operands (one dtype; integer products wrap, as XLA's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Matmul;

impl Op for Matmul {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        crate::elementwise::Domain::Numeric.check("matmul", 0, a.dtype())?;
        if a.dtype() != b.dtype() {
            return Err(Error::dtype(
                "matmul",
                "1",
                b.dtype(),
                format!("the dtype of argument 0 ({})", a.dtype()),
            ));
        }
        Ok(a.with_shape(matmul_shape("matmul", a.shape(), b.shape())?))
    }
    fn linear_in(&self, k: usize) -> bool {
        k < 2
    }
    fn matmul_transposes(&self) -> Option<(bool, bool)> {
        Some((false, false))
    }
}

// ---------------------------------------------------------------- rules

use crate::api::VarExt;
use crate::batching::{move_axis, pad_after_batch};
use anvil_core::{register_rule, Batched, Var};

/// Batching `matmul`. A batched operand against an unbatched matrix stays one
/// product with the batch folded into the rows (`[B, m, k] @ [k, n]`, one
/// GEMM in the CPU kernel); a batched vector on the right of an unbatched
/// matrix becomes the rows of a product with the transposed matrix, again one
/// GEMM. Otherwise batched vectors are made matrices, batch axes go first,
/// and the operand with fewer batch axes gets size-1 axes behind the batch
/// axis so that NumPy's right-aligned broadcasting pairs the right axes.
fn vmap_matmul(_op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let (a, b) = (&args[0], &args[1]);
    let (ra, rb) = (a.logical_rank(), b.logical_rank());
    let front = |x: &Batched| x.axis.map_or_else(|| x.var.clone(), |k| move_axis(&x.var, k, 0));
    match (a.axis, b.axis, ra, rb) {
        // Batched vectors against an unbatched matrix or vector: [B, K] @ [K, N].
        (Some(_), None, 1, 1..=2) => return Ok(Batched::new(front(a).matmul(&b.var), Some(0))),
        // An unbatched matrix or vector against vectors batched along their
        // last axis ([K, B], as a jacfwd seed is): one product, [M, K] @ [K, B].
        (None, Some(1), 1..=2, 1) => {
            let axis = if ra == 2 { 1 } else { 0 };
            return Ok(Batched::new(a.var.matmul(&b.var), Some(axis)));
        }
        // An unbatched matrix against batched vectors: [B, K] @ [K, M].
        (None, Some(_), 1..=2, 1) => {
            return Ok(Batched::new(front(b).matmul(&a.var.transpose()), Some(0)))
        }
        _ => {}
    }
    let a_vec = a.axis.is_some() && ra == 1;
    let b_vec = b.axis.is_some() && rb == 1;
    let mut av = if a_vec { front(a).unsqueeze(1) } else { front(a) };
    let mut bv = if b_vec { front(b).unsqueeze(2) } else { front(b) };
    let (ra2, rb2) = (ra.max(usize::from(a_vec) * 2), rb.max(usize::from(b_vec) * 2));
    if a.axis.is_some() {
        av = pad_after_batch(&av, rb2.saturating_sub(ra2));
    }
    if b.axis.is_some() {
        bv = pad_after_batch(&bv, ra2.saturating_sub(rb2));
    }
    let mut out = av.matmul(&bv);
    if b_vec {
        out = out.squeeze(&[-1]);
    }
    if a_vec {
        out = out.squeeze(&[if rb >= 2 { -2 } else { -1 }]);
    }
    Ok(Batched::new(out, Some(0)))
}

register_rule!(VmapRule, Matmul, vmap_matmul);

// ---------------------------------------------------------- derivatives

use crate::ad::{add_tangents, unbroadcast};
use anvil_core::LinearArg;

fn jvp_matmul(_: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let da = t[0].as_ref().map(|t| t.matmul(&p[1]));
    let db = t[1].as_ref().map(|t| p[0].matmul(t));
    Ok(add_tangents(da, db, out.shape()))
}

fn as_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// Promotes 1-D operands to matrices as `numpy.matmul` does (a row on the
/// left, a column on the right).
fn promoted(shape: &[usize], left: bool) -> Vec<usize> {
    match (shape, left) {
        ([k], true) => vec![1, *k],
        ([k], false) => vec![*k, 1],
        _ => shape.to_vec(),
    }
}

/// `a @ b` is linear in whichever operand is not known: the cotangent of `a`
/// is `ct @ b^T`, of `b` is `a^T @ ct`, on the operands promoted to
/// matrices, summed over broadcast batch axes and reshaped back.
fn transpose_matmul(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let (sa, sb) = (args[0].shape(), args[1].shape());
    // Matrix-vector products transpose to vector-matrix products, which stay
    // one GEMM when a batch of cotangents comes through vmap (jacrev).
    match (args[0].known(), args[1].known(), sa.len(), sb.len()) {
        (Some(a), None, 2, 1) => return Ok(vec![None, Some(ct.matmul(a))]),
        (None, Some(b), 1, 2) => return Ok(vec![Some(b.matmul(ct)), None]),
        _ => {}
    }
    let (pa, pb) = (promoted(sa, true), promoted(sb, false));
    let out = anvil_core::shape::matmul_shape("matmul", &pa, &pb)?;
    let ct = ct.reshape(&as_i64(&out));
    match (args[0].known(), args[1].known()) {
        (None, Some(b)) => {
            let b = b.reshape(&as_i64(&pb));
            let ca = unbroadcast(&ct.matmul(&b.swap_axes(-1, -2)), &pa);
            Ok(vec![Some(ca.reshape(&as_i64(sa))), None])
        }
        (Some(a), None) => {
            let a = a.reshape(&as_i64(&pa));
            let cb = unbroadcast(&a.swap_axes(-1, -2).matmul(&ct), &pb);
            Ok(vec![None, Some(cb.reshape(&as_i64(sb)))])
        }
        _ => Err(Error::invalid(
            op.name(),
            "transpose",
            "matmul is linear in exactly one operand; a jvp rule emitted it on two tangents",
        )),
    }
}

register_rule!(JvpRule, Matmul, jvp_matmul);
register_rule!(TransposeRule, Matmul, transpose_matmul);

// ------------------------------------------------------------- matmul_t

/// `op(a) @ op(b)` for matrices and vectors, where `op` transposes a
/// matrix operand whose flag is set: the product BLAS computes with its
/// transpose flags (XLA's `dot` with dimension numbers), so that a
/// transposed operand is read as a view, never copied. `matmul` of a
/// `permute[1, 0]` becomes one (a rewrite rule of [`Matmul`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulT {
    /// Read the left operand (a matrix) transposed.
    pub ta: bool,
    /// Read the right operand (a matrix) transposed.
    pub tb: bool,
}

fn transposed(t: &TensorType, yes: bool) -> TensorType {
    if yes {
        t.with_shape(t.shape().iter().rev().copied().collect::<Vec<_>>())
    } else {
        t.clone()
    }
}

impl Op for MatmulT {
    fn name(&self) -> &'static str {
        "matmul_t"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (transposed(&inputs[0], self.ta), transposed(&inputs[1], self.tb));
        let ok = a.rank() <= 2
            && b.rank() <= 2
            && (!self.ta || a.rank() == 2)
            && (!self.tb || b.rank() == 2);
        if !ok {
            return Err(Error::shape(
                "matmul_t",
                &[inputs[0].shape(), inputs[1].shape()],
                "matrices or vectors only (a transposed operand must be a matrix)",
            ));
        }
        Matmul.infer(&[a, b])
    }
    fn params(&self) -> String {
        format!("ta={}, tb={}", self.ta, self.tb)
    }
    fn matmul_transposes(&self) -> Option<(bool, bool)> {
        Some((self.ta, self.tb))
    }
    fn linear_in(&self, k: usize) -> bool {
        k < 2
    }
}

/// Batching: the equivalent `matmul` of the (transposed) operands, batched.
fn vmap_matmul_t(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let m = op.try_downcast::<MatmulT>()?;
    let flip = |b: &Batched, yes: bool| match (b.axis, yes) {
        (_, false) => b.clone(),
        (None, true) => Batched::new(b.var.transpose(), None),
        // The element's two axes swap; the batch axis keeps its place.
        (Some(k), true) => {
            let r = b.var.rank();
            let axes: Vec<usize> = (0..r).filter(|&i| i != k).collect();
            let (x, y) = (axes[axes.len() - 2], axes[axes.len() - 1]);
            Batched::new(b.var.swap_axes(x as i64, y as i64), Some(k))
        }
    };
    vmap_matmul(&Matmul, &[flip(&args[0], m.ta), flip(&args[1], m.tb)], size)
}

fn jvp_matmul_t(op: &dyn Op, p: &[Var], t: &[Option<Var>], out: &Var) -> Result<Option<Var>> {
    let m = *op.try_downcast::<MatmulT>()?;
    let apply = |a: &Var, b: &Var| Var::apply_op(Box::new(m), &[a, b]);
    let da = t[0].as_ref().map(|t| apply(t, &p[1]));
    let db = t[1].as_ref().map(|t| apply(&p[0], t));
    Ok(add_tangents(da, db, out.shape()))
}

/// Linear in whichever operand is not known: the cotangent of `op(x)` as
/// for `matmul`, transposed back where `op` transposes.
fn transpose_matmul_t(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let m = op.try_downcast::<MatmulT>()?;
    let t = |ty: &TensorType, yes: bool| transposed(ty, yes);
    let view = |a: &LinearArg, yes: bool| match a {
        LinearArg::Linear(ty) => LinearArg::Linear(t(ty, yes)),
        LinearArg::Known(v) => LinearArg::Known(if yes { v.transpose() } else { v.clone() }),
    };
    let cts = transpose_matmul(&Matmul, ct, &[view(&args[0], m.ta), view(&args[1], m.tb)])?;
    let back = |c: Option<Var>, yes: bool| c.map(|c| if yes { c.transpose() } else { c });
    let mut cts = cts.into_iter();
    Ok(vec![back(cts.next().flatten(), m.ta), back(cts.next().flatten(), m.tb)])
}

register_rule!(VmapRule, MatmulT, vmap_matmul_t);
register_rule!(JvpRule, MatmulT, jvp_matmul_t);
register_rule!(TransposeRule, MatmulT, transpose_matmul_t);

// ------------------------------------------------------------- rewrites

/// Rewrites of a matrix product:
///
/// - with the identity seed, the other operand (`W @ I = W`, the product
///   `jacfwd` of a linear layer creates; one GEMM fewer);
/// - of a transposed matrix (`permute[1, 0]`) with a matrix or vector, the
///   product reading the transpose as a view ([`MatmulT`]): no copy.
fn rewrite_matmul(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let identity = |v: &Var| {
        crate::constant::as_basis(v).is_some_and(|b| b.is_identity() && b.dtype == v.dtype())
    };
    let (a, b) = (&args[0], &args[1]);
    if identity(b) && a.ty() == out {
        return Ok(Some(a.clone()));
    }
    if identity(a) && b.ty() == out {
        return Ok(Some(b.clone()));
    }
    if a.rank() > 2 || b.rank() > 2 {
        return Ok(None);
    }
    if let Some(v) = rank_one(a, b, false, false, out) {
        return Ok(Some(v));
    }
    let source = |v: &Var| {
        v.producer()
            .filter(|p| p.op_as::<crate::movement::Permute>().is_some_and(|q| q.perm == [1, 0]))
            .map(|p| p.inputs[0].clone())
    };
    let (sa, sb) = (source(a), source(b));
    if sa.is_none() && sb.is_none() {
        return Ok(None);
    }
    let op = MatmulT { ta: sa.is_some(), tb: sb.is_some() };
    let (x, y) = (sa.unwrap_or_else(|| a.clone()), sb.unwrap_or_else(|| b.clone()));
    Ok(Some(Var::apply_op(Box::new(op), &[&x, &y])).filter(|v| v.ty() == out))
}

/// `matmul_t` without flags is `matmul` (the simpler op).
fn rewrite_matmul_t(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let m = op.try_downcast::<MatmulT>()?;
    if let Some(v) = rank_one(&args[0], &args[1], m.ta, m.tb, out) {
        return Ok(Some(v));
    }
    Ok((!m.ta && !m.tb).then(|| args[0].matmul(&args[1])).filter(|v| v.ty() == out))
}

/// A product of matrices whose inner dimension is 1 (an outer product,
/// as the transpose of a matrix-vector product makes) is a broadcast
/// multiply, `a[m, 1] * b[1, n]`: an elementwise op that fuses with what
/// reads it (`acc + u ⊗ x` in one pass, the product never stored). The
/// value is the same: one term, no sum.
fn rank_one(a: &Var, b: &Var, ta: bool, tb: bool, out: &TensorType) -> Option<Var> {
    if a.rank() != 2 || b.rank() != 2 {
        return None;
    }
    let (m, k) = if ta { (a.shape()[1], a.shape()[0]) } else { (a.shape()[0], a.shape()[1]) };
    let n = if tb { b.shape()[0] } else { b.shape()[1] };
    if k != 1 {
        return None;
    }
    let col = if ta { a.reshape(&[m as i64, 1]) } else { a.clone() };
    let row = if tb { b.reshape(&[1, n as i64]) } else { b.clone() };
    Some(col * row).filter(|v| v.ty() == out)
}

register_rule!(RewriteRule, Matmul, rewrite_matmul);
register_rule!(RewriteRule, MatmulT, rewrite_matmul_t);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{broadcast_positions, Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// One operand of a product as a batch of matrices: where entry `(r, c)`
/// of batch element `b` of the result's batch lies in the operand.
struct MatView<'a> {
    sets: &'a IndexSets,
    /// Nonzero-ness of the entries, when the operand's values are known.
    nonzero: Option<Vec<bool>>,
    /// The operand's batch element for each of the result's.
    batch: Vec<usize>,
    rows: usize,
    cols: usize,
    /// Strides of a batch element, a row and a column.
    strides: (usize, usize, usize),
}

impl MatView<'_> {
    fn at(&self, b: usize, r: usize, c: usize) -> usize {
        self.batch[b] * self.strides.0 + r * self.strides.1 + c * self.strides.2
    }
    /// Whether the entry may be nonzero.
    fn live(&self, p: usize) -> bool {
        self.nonzero.as_ref().is_none_or(|v| v[p])
    }
}

/// `a` as `[batch..., rows, cols]` for a product with result batch shape
/// `out_batch`: a vector is a row (`left`) or a column; `transposed` reads
/// a matrix transposed.
fn mat_view<'a>(
    a: &SparsityArg<'a>,
    left: bool,
    transposed: bool,
    out_batch: &[usize],
) -> Result<MatView<'a>> {
    let s = a.ty.shape();
    let r = s.len();
    let (rows, cols, batch_shape) = match r {
        1 if left => (1, s[0], &[][..]),
        1 => (s[0], 1, &[][..]),
        _ => (s[r - 2], s[r - 1], &s[..r - 2]),
    };
    let (rows, cols, strides) =
        if transposed { (cols, rows, (0, 1, cols)) } else { (rows, cols, (0, cols, 1)) };
    let batch = broadcast_positions(batch_shape, out_batch)?;
    let nonzero = a.value.map(|v| v.to_f64_vec().iter().map(|&x| x != 0.0).collect());
    Ok(MatView {
        sets: a.sets,
        nonzero,
        batch,
        rows,
        cols,
        strides: (rows * cols, strides.1, strides.2),
    })
}

/// A product: `C[i, j]` depends on `A[i, p]` where `B[p, j]` may be
/// nonzero and on `B[p, j]` where `A[i, p]` may be (exact; entries known
/// to be zero — captured constants — drop out), so with nothing known
/// `rows(A)[i] ∪ cols(B)[j]`.
fn product_sets(
    op: &dyn Op,
    a: &MatView<'_>,
    b: &MatView<'_>,
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let nb = a.batch.len();
    let mut sets = Builder::new(nb * m * n, a.sets.nnz() + b.sets.nnz());
    let mut u = Union::default();
    let known = a.nonzero.is_some() || b.nonzero.is_some();
    for bi in 0..nb {
        // With nothing known, the unions of A's rows and B's columns, once.
        let (ra, cb) = if known {
            (IndexSets::empty(0), IndexSets::empty(0))
        } else {
            let mut rows = Builder::new(m, a.sets.nnz());
            for i in 0..m {
                rows.push_union(&mut u, (0..k).map(|p| a.sets.row(a.at(bi, i, p))));
            }
            let mut cols = Builder::new(n, b.sets.nnz());
            for j in 0..n {
                cols.push_union(&mut u, (0..k).map(|p| b.sets.row(b.at(bi, p, j))));
            }
            (rows.finish(), cols.finish())
        };
        for i in 0..m {
            for j in 0..n {
                if !known {
                    sets.push_merge(ra.row(i), cb.row(j));
                    continue;
                }
                let terms = (0..k).flat_map(|p| {
                    let (pa, pb) = (a.at(bi, i, p), b.at(bi, p, j));
                    let from_a = b.live(pb).then(|| a.sets.row(pa));
                    let from_b = a.live(pa).then(|| b.sets.row(pb));
                    from_a.into_iter().chain(from_b)
                });
                sets.push_union(&mut u, terms);
            }
        }
    }
    let sets = sets.finish();
    if sets.len() != out.numel() {
        return Err(Error::invalid(op.name(), "sparsity", "product of unexpected shape"));
    }
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

/// The batch shape of a `numpy.matmul` result.
fn out_batch(a: &TensorType, b: &TensorType) -> Result<Vec<usize>> {
    let batch = |t: &TensorType| t.shape()[..t.rank().saturating_sub(2)].to_vec();
    anvil_core::shape::broadcast_shapes("matmul", &batch(a), &batch(b), "batch dimensions")
}

fn sparsity_matmul(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let batch = out_batch(args[0].ty, args[1].ty)?;
    let a = mat_view(&args[0], true, false, &batch)?;
    let b = mat_view(&args[1], false, false, &batch)?;
    product_sets(op, &a, &b, out, cx)
}

fn sparsity_matmul_t(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let m = op.try_downcast::<MatmulT>()?;
    let a = mat_view(&args[0], true, m.ta, &[])?;
    let b = mat_view(&args[1], false, m.tb, &[])?;
    product_sets(op, &a, &b, out, cx)
}

register_rule!(SparsityRule, Matmul, sparsity_matmul);
register_rule!(SparsityRule, MatmulT, sparsity_matmul_t);
