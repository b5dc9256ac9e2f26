//! The `matmul` kernel: faer GEMMs on row-major views, no operand copied.
//!
//! 1-D operands are viewed as a row (left) or a column (right). When the
//! right operand has no batch axes, every batch of the left operand is
//! folded into the rows of one large GEMM (`[B*m, k] @ [k, n]`), which is
//! what makes a batched product against shared weights — the Jacobian of an
//! MLP — a single call into faer. Otherwise each broadcast batch pair is one
//! GEMM, the batch split across threads when the products are small — except
//! a shared matrix against a stack of column vectors, which is again one
//! GEMM (`V @ Aᵀ`, on a transposed view of `A`), and batched outer
//! products and small matrix-vector products, which run as one loop of
//! multiplies, dot products or row updates over the batch, never a GEMM
//! call per tiny product. A single `f64` matrix–vector product on one
//! thread runs through the crate's `matvec` kernels (AVX-512 or AVX2) where
//! the CPU has them.

use super::{arity, unsupported};
use crate::strided::broadcast_strides;
use crate::{register_kernel, Parallelism};
use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_ops::matmul::{Matmul, MatmulT};
use faer::linalg::matmul::matmul as faer_matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

/// Operands as stacks of matrices: batch shape, rows, inner, columns.
struct Layout {
    batch_a: Vec<usize>,
    batch_b: Vec<usize>,
    batch: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
}

impl Layout {
    /// For batch `i` of the result, the offsets (in elements) of its
    /// matrices in `a` and `b`, broadcast batch axes repeating theirs.
    fn offsets(&self) -> impl Fn(usize) -> (usize, usize) + Sync + '_ {
        let sa = broadcast_strides(&self.batch_a, &self.batch);
        let sb = broadcast_strides(&self.batch_b, &self.batch);
        move |i| {
            let (mut oa, mut ob, mut rem) = (0isize, 0isize, i);
            for d in (0..self.batch.len()).rev() {
                let idx = (rem % self.batch[d]) as isize;
                rem /= self.batch[d];
                oa += idx * sa[d];
                ob += idx * sb[d];
            }
            (oa as usize * self.m * self.k, ob as usize * self.k * self.n)
        }
    }
}

fn layout(a: &[usize], b: &[usize]) -> Layout {
    let (m, k) = if a.len() == 1 { (1, a[0]) } else { (a[a.len() - 2], a[a.len() - 1]) };
    let n = if b.len() == 1 { 1 } else { b[b.len() - 1] };
    let batch_a = if a.len() > 2 { a[..a.len() - 2].to_vec() } else { vec![] };
    let batch_b = if b.len() > 2 { b[..b.len() - 2].to_vec() } else { vec![] };
    let batch =
        anvil_core::shape::broadcast_shapes("matmul", &batch_a, &batch_b, "1").unwrap_or_default();
    Layout { batch_a, batch_b, batch, m, k, n }
}

/// The smallest GEMM (multiply-adds) below rayon's threshold
/// ([`Parallelism::min_parallel_flops`]) that shares its rows with the
/// pair helper thread ([`crate::pair`]): from about 25 µs of work, where
/// a handoff of ~0.1 µs (and, after a long pause, the helper's wake-up,
/// which this thread does not wait for) is small. Rayon's fork-join from
/// outside its pool wakes its workers, tens of µs on a VM, which is why
/// the fixed threshold for it is 200³.
const PAIR_GEMM_MIN: usize = 1 << 20;

/// Whether a GEMM of `m × k × n` that rayon would run on one thread is
/// shared with the pair helper: several threads allowed, large enough,
/// at least two row blocks (the helper is never leased from a rayon
/// worker, see `pair::lease`).
fn pairs(ctx: &Parallelism, m: usize, k: usize, n: usize) -> bool {
    ctx.pairs() && m >= 2 * PAIR_ROWS && m.saturating_mul(k).saturating_mul(n) >= PAIR_GEMM_MIN
}

/// Rows of a paired GEMM are split at a multiple of this (faer's row
/// blocks do not straddle the cut).
const PAIR_ROWS: usize = 16;

/// `c = av · bv` (`c` row-major `m × n`), the top rows on this thread and
/// the bottom ones on the pair helper (both here when it is busy): faer
/// accumulates each element over `k` in the same order for any block of
/// rows, so the bits are those of one call
/// (`paired_gemm_gives_the_bits_of_one_call`).
fn paired_gemm<T: faer::traits::ComplexField + Copy>(
    c: &mut [T],
    av: MatRef<'_, T>,
    bv: MatRef<'_, T>,
    one: T,
) {
    let (m, n) = (av.nrows(), bv.ncols());
    let mid = (m / 2).div_ceil(PAIR_ROWS) * PAIR_ROWS;
    let (top, bottom) = c.split_at_mut(mid * n);
    let rows = m - mid;
    let bottom = crate::pair::SendPtr(bottom.as_mut_ptr());
    let theirs = move || {
        // SAFETY: `bottom` is `c[mid · n..]` (`rows · n` elements),
        // borrowed mutably for this call and written by this task alone,
        // which runs once.
        let c = unsafe { std::slice::from_raw_parts_mut(bottom.get(), rows * n) };
        let c = MatMut::from_row_major_slice_mut(c, rows, n);
        faer_matmul(c, Accum::Replace, av.subrows(mid, rows), bv, one, Par::Seq);
        true
    };
    let mine = || {
        let c = MatMut::from_row_major_slice_mut(top, mid, n);
        faer_matmul(c, Accum::Replace, av.subrows(0, mid), bv, one, Par::Seq);
    };
    crate::pair::join(mine, &theirs);
}

macro_rules! typed_matmul {
    ($name:ident, $t:ty, $matvec:path) => {
        fn $name(a: &[$t], b: &[$t], l: &Layout, ctx: &Parallelism) -> Vec<$t> {
            let (m, k, n) = (l.m, l.k, l.n);
            let nb = anvil_core::shape::numel(&l.batch);
            if nb * m * n == 0 || k == 0 {
                return vec![0.0 as $t; nb * m * n];
            }
            // Every path below writes every element.
            let mut out = crate::buffers::take(nb * m * n);
            let gemm = |c: &mut [$t], a: &[$t], b: &[$t], rows: usize, par: Par| {
                if par == Par::Seq && $matvec(a, (rows, k, false), b, (k, n, false), c) {
                    return;
                }
                let c = MatMut::from_row_major_slice_mut(c, rows, n);
                faer_matmul(
                    c,
                    Accum::Replace,
                    MatRef::from_row_major_slice(a, rows, k),
                    MatRef::from_row_major_slice(b, k, n),
                    1.0 as $t,
                    par,
                );
            };
            if l.batch_b.is_empty() {
                // Fold every batch of `a` into the rows of one GEMM.
                let rows = nb * m;
                let par = ctx.gemm_par(rows * k * n);
                if par == Par::Seq && n > 1 && pairs(ctx, rows, k, n) {
                    let av = MatRef::from_row_major_slice(a, rows, k);
                    paired_gemm(&mut out, av, MatRef::from_row_major_slice(b, k, n), 1.0 as $t);
                    return out;
                }
                gemm(&mut out, a, b, rows, par);
                return out;
            }
            if l.batch_a.is_empty() && n == 1 {
                // A shared matrix against a stack of column vectors (a
                // batched backward pass): out[b] = A v_b for every b is one
                // GEMM, V @ Aᵀ, on a transposed view of A (no copy).
                let rows = nb;
                let par = ctx.gemm_par(rows * k * m);
                if par == Par::Seq && $matvec(b, (rows, k, false), a, (m, k, true), &mut out) {
                    return out;
                }
                let c = MatMut::from_row_major_slice_mut(&mut out, rows, m);
                faer_matmul(
                    c,
                    Accum::Replace,
                    MatRef::from_row_major_slice(b, rows, k),
                    MatRef::from_row_major_slice(a, m, k).transpose(),
                    1.0 as $t,
                    par,
                );
                return out;
            }
            let offsets = l.offsets();
            if k == 1 {
                // Outer products (per-example gradients of a layer): a
                // multiply per element, no GEMM call per batch.
                let outer = |(i, c): (usize, &mut [$t])| {
                    let (oa, ob) = offsets(i);
                    let (col, row) = (&a[oa..][..m], &b[ob..][..n]);
                    for (r, &x) in c.chunks_mut(n).zip(col) {
                        for (d, &y) in r.iter_mut().zip(row) {
                            *d = x * y;
                        }
                    }
                };
                if ctx.parallel(out.len()) {
                    out.par_chunks_mut(m * n).enumerate().for_each(outer);
                } else {
                    out.chunks_mut(m * n).enumerate().for_each(outer);
                }
                return out;
            }
            if (m == 1 || n == 1) && m * k * n <= SMALL_MATVEC {
                // Small batched matrix-vector products, both operands
                // batched (a per-example vector against a per-example
                // matrix, as `vmap(grad)` makes them): one pass over each
                // matrix with dot products or row updates, not a GEMM call
                // per tiny product. Larger ones go to faer below, whose
                // run-time-dispatched SIMD beats this portable loop.
                let matvec = |(i, c): (usize, &mut [$t])| {
                    let (oa, ob) = offsets(i);
                    let (a, b) = (&a[oa..][..m * k], &b[ob..][..k * n]);
                    if n == 1 {
                        for (d, row) in c.iter_mut().zip(a.chunks_exact(k)) {
                            *d = dot(row, b);
                        }
                    } else {
                        c.fill(0.0 as $t);
                        for (&x, row) in a.iter().zip(b.chunks_exact(n)) {
                            for (d, &y) in c.iter_mut().zip(row) {
                                *d += x * y;
                            }
                        }
                    }
                };
                if ctx.parallel(nb * m * k * n) {
                    out.par_chunks_mut(m * n).enumerate().for_each(matvec);
                } else {
                    out.chunks_mut(m * n).enumerate().for_each(matvec);
                }
                return out;
            }
            let flops = m * k * n;
            let per_batch = |(i, c): (usize, &mut [$t])| {
                let (oa, ob) = offsets(i);
                gemm(c, &a[oa..oa + m * k], &b[ob..ob + k * n], m, Par::Seq);
            };
            if ctx.gemm_par(flops) == Par::Seq && ctx.parallel(nb * flops) {
                out.par_chunks_mut(m * n).enumerate().for_each(per_batch);
            } else if ctx.gemm_par(flops) == Par::Seq {
                out.chunks_mut(m * n).enumerate().for_each(per_batch);
            } else {
                for (i, c) in out.chunks_mut(m * n).enumerate() {
                    let (oa, ob) = offsets(i);
                    gemm(c, &a[oa..oa + m * k], &b[ob..ob + k * n], m, ctx.gemm_par(flops));
                }
            }
            out
        }
    };
}

/// The largest per-example matrix-vector product (multiply-adds) computed
/// by the kernel's own loop rather than a faer call: at 64 × 64 faer was
/// measured faster (per-example design matrices at batch 256: 0.79–0.81 ms
/// against 0.87–1.03 ms for the loop, builds running), below a few hundred
/// the call's fixed cost dominates.
const SMALL_MATVEC: usize = 512;

/// `Σ x_i y_i` in eight interleaved partial sums (so the loop vectorises;
/// the order is fixed, so the result is the same on every call).
fn dot<T>(x: &[T], y: &[T]) -> T
where
    T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    const LANES: usize = 8;
    let mut acc = [T::default(); LANES];
    let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let tail =
        xs.remainder().iter().zip(ys.remainder()).fold(T::default(), |s, (&a, &b)| s + a * b);
    for (a, b) in xs.zip(ys) {
        for l in 0..LANES {
            acc[l] = acc[l] + a[l] * b[l];
        }
    }
    let a = acc;
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])) + tail
}

typed_matmul!(matmul_f64, f64, crate::matvec::product);
typed_matmul!(matmul_f32, f32, crate::matvec::no_product);

/// `matmul` of `i64` operands, with XLA's wrapping arithmetic: a plain loop
/// (integer products are for indices and counts, not for speed), each
/// output the sum over the inner axis in order.
fn matmul_i64(a: &[i64], b: &[i64], l: &Layout) -> Vec<i64> {
    let (m, k, n) = (l.m, l.k, l.n);
    let mut out = vec![0i64; anvil_core::shape::numel(&l.batch) * m * n];
    if out.is_empty() || k == 0 {
        return out;
    }
    let offsets = l.offsets();
    for (i, c) in out.chunks_mut(m * n).enumerate() {
        let (oa, ob) = offsets(i);
        int_product(c, |r, p| a[oa + r * k + p], &b[ob..ob + k * n], k, n);
    }
    out
}

/// `c = A B` for `A` read through `a(row, inner)` and `B` row-major
/// `k × n`, wrapping on overflow.
fn int_product(c: &mut [i64], a: impl Fn(usize, usize) -> i64, b: &[i64], k: usize, n: usize) {
    for (r, row) in c.chunks_mut(n).enumerate() {
        for (p, brow) in b.chunks_exact(n).take(k).enumerate() {
            let x = a(r, p);
            for (d, &y) in row.iter_mut().zip(brow) {
                *d = d.wrapping_add(x.wrapping_mul(y));
            }
        }
    }
}

/// The kernel of `matmul`.
pub fn matmul(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    arity(op, inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    let l = layout(a.shape(), b.shape());
    let storage = match (a.storage(), b.storage()) {
        (Storage::F64(x), Storage::F64(y)) => f64::into_storage(matmul_f64(x, y, &l, ctx)),
        (Storage::F32(x), Storage::F32(y)) => f32::into_storage(matmul_f32(x, y, &l, ctx)),
        (Storage::I64(x), Storage::I64(y)) => i64::into_storage(matmul_i64(x, y, &l)),
        _ => return Err(unsupported(op, 1, b.dtype())),
    };
    Tensor::from_storage(storage, out.shape())
}

register_kernel!(Matmul, matmul);
crate::register_thread_invariant!(Matmul);

// ------------------------------------------------------------ matmul_t

macro_rules! typed_matmul_t {
    ($name:ident, $t:ty, $matvec:path) => {
        fn $name(
            a: &[$t],
            sa: &[usize],
            b: &[$t],
            sb: &[usize],
            op: MatmulT,
            ctx: &Parallelism,
        ) -> Vec<$t> {
            use faer::linalg::matmul::matmul;
            use faer::{Accum, MatMut, MatRef};
            // Views of op(a) as [m, k] and op(b) as [k, n].
            let av = match (sa, op.ta) {
                ([k], _) => MatRef::from_row_major_slice(a, 1, *k),
                ([r, c], false) => MatRef::from_row_major_slice(a, *r, *c),
                ([r, c], true) => MatRef::from_row_major_slice(a, *r, *c).transpose(),
                _ => return Vec::new(),
            };
            let bv = match (sb, op.tb) {
                ([k], _) => MatRef::from_row_major_slice(b, *k, 1),
                ([r, c], false) => MatRef::from_row_major_slice(b, *r, *c),
                ([r, c], true) => MatRef::from_row_major_slice(b, *r, *c).transpose(),
                _ => return Vec::new(),
            };
            let (m, k, n) = (av.nrows(), av.ncols(), bv.ncols());
            if m * n == 0 || k == 0 {
                return vec![0.0 as $t; m * n];
            }
            let mut out = crate::buffers::take(m * n);
            let par = ctx.gemm_par(m * k * n);
            // The stored matrices (a vector is a row on the left, a column
            // on the right) and whether each is read transposed.
            let stored = |s: &[usize], t: bool, left: bool| match s {
                [k] => {
                    if left {
                        (1, *k, false)
                    } else {
                        (*k, 1, false)
                    }
                }
                [r, c] => (*r, *c, t),
                _ => (0, 0, false),
            };
            let (ma, mb) = (stored(sa, op.ta, true), stored(sb, op.tb, false));
            if par == faer::Par::Seq && $matvec(a, ma, b, mb, &mut out) {
                return out;
            }
            if par == faer::Par::Seq && pairs(ctx, m, k, n) {
                paired_gemm(&mut out, av, bv, 1.0 as $t);
                return out;
            }
            {
                let c = MatMut::from_row_major_slice_mut(&mut out, m, n);
                matmul(c, Accum::Replace, av, bv, 1.0 as $t, par);
            }
            out
        }
    };
}

typed_matmul_t!(matmul_t_f64, f64, crate::matvec::product);
typed_matmul_t!(matmul_t_f32, f32, crate::matvec::no_product);

/// [`MatmulT`] of `i64` operands (vectors or matrices), wrapping as
/// [`matmul_i64`] does.
fn matmul_t_i64(a: &[i64], sa: &[usize], b: &[i64], sb: &[usize], op: MatmulT) -> Vec<i64> {
    // op(a) as `m × k` read at strides, op(b) copied row-major `k × n` (a
    // vector is a row on the left, a column on the right).
    // Element (i, p) of op(a) is a[i·row + p·col].
    let (m, k, row, col) = match (sa, op.ta) {
        ([k], _) => (1, *k, 0, 1),
        ([r, c], false) => (*r, *c, *c, 1),
        ([r, c], true) => (*c, *r, 1, *c),
        _ => return Vec::new(),
    };
    let (n, b_rows) = match (sb, op.tb) {
        ([_], _) => (1, b.to_vec()),
        ([_, c], false) => (*c, b.to_vec()),
        ([r, c], true) => (*r, (0..c * r).map(|q| b[(q % r) * c + q / r]).collect()),
        _ => return Vec::new(),
    };
    let mut out = vec![0i64; m * n];
    if k > 0 {
        int_product(&mut out, |i, p| a[i * row + p * col], &b_rows, k, n);
    }
    out
}

/// The kernel of [`MatmulT`].
pub fn matmul_t(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    let t = *op.try_downcast::<MatmulT>()?;
    arity(op, inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    let v = match (a.storage(), b.storage()) {
        (anvil_core::Storage::F64(x), anvil_core::Storage::F64(y)) => {
            anvil_core::Element::into_storage(matmul_t_f64(x, a.shape(), y, b.shape(), t, ctx))
        }
        (anvil_core::Storage::F32(x), anvil_core::Storage::F32(y)) => {
            anvil_core::Element::into_storage(matmul_t_f32(x, a.shape(), y, b.shape(), t, ctx))
        }
        (anvil_core::Storage::I64(x), anvil_core::Storage::I64(y)) => {
            anvil_core::Element::into_storage(matmul_t_i64(x, a.shape(), y, b.shape(), t))
        }
        _ => {
            return Err(anvil_core::Error::dtype(
                "matmul_t",
                "0",
                a.dtype(),
                "f64, f32 or i64 (both operands alike)",
            ))
        }
    };
    Tensor::from_storage(v, out.shape())
}

register_kernel!(MatmulT, matmul_t);
crate::register_thread_invariant!(MatmulT);

#[cfg(test)]
mod tests {
    use super::*;

    /// `op(a) · op(b)` of `i64` by the definition, for checking the kernels.
    fn by_definition(
        a: &[i64],
        (r, c, ta): (usize, usize, bool),
        b: &[i64],
        (br, bc, tb): (usize, usize, bool),
    ) -> Vec<i64> {
        let at = |i: usize, p: usize| if ta { a[p * c + i] } else { a[i * c + p] };
        let bt = |p: usize, j: usize| if tb { b[j * bc + p] } else { b[p * bc + j] };
        let (m, k) = if ta { (c, r) } else { (r, c) };
        let n = if tb { br } else { bc };
        (0..m * n).map(|q| (0..k).map(|p| at(q / n, p) * bt(p, q % n)).sum()).collect()
    }

    #[test]
    fn integer_products_with_transposed_operands_follow_the_definition() {
        let a: Vec<i64> = (0..12).map(|x| x * 3 - 7).collect();
        let b: Vec<i64> = (0..12).map(|x| 5 - x * x % 11).collect();
        // a stored 3×4 or 4×3, b stored 4×3 or 3×4: op(a) 3×4 (or 4×3)...
        for (sa, ta, sb, tb) in [
            ([3, 4], false, [4, 3], false),
            ([4, 3], true, [4, 3], false),
            ([3, 4], false, [3, 4], true),
            ([4, 3], true, [3, 4], true),
        ] {
            let got = matmul_t_i64(&a, &sa, &b, &sb, MatmulT { ta, tb });
            let want = by_definition(&a, (sa[0], sa[1], ta), &b, (sb[0], sb[1], tb));
            assert_eq!(got, want, "ta={ta} tb={tb}");
        }
        // Vectors: a row on the left, a column on the right.
        let got = matmul_t_i64(&a[..4], &[4], &b, &[4, 3], MatmulT { ta: false, tb: false });
        assert_eq!(got, by_definition(&a[..4], (1, 4, false), &b, (4, 3, false)));
        let got = matmul_t_i64(&a, &[4, 3], &b[..4], &[4], MatmulT { ta: true, tb: false });
        assert_eq!(got, by_definition(&a, (4, 3, true), &b[..4], (4, 1, false)));
    }
}

#[cfg(test)]
mod pair_tests {
    use super::*;

    /// A GEMM whose rows are split between this thread and the pair helper
    /// gives the bits of one call, for row-major and transposed operands,
    /// `f64` and `f32`, at sizes around the row blocks.
    #[test]
    fn paired_gemm_gives_the_bits_of_one_call() {
        for (m, k, n) in
            [(128, 200, 128), (33, 517, 129), (100, 64, 77), (47, 1000, 5), (256, 3, 256)]
        {
            let a: Vec<f64> = (0..m * k).map(|i| ((i * 37 % 101) as f64 * 0.173).sin()).collect();
            let b: Vec<f64> = (0..k * n).map(|i| ((i * 11 % 97) as f64 * 0.311).cos()).collect();
            let at: Vec<f64> = (0..k * m).map(|p| a[(p % m) * k + p / m]).collect(); // k × m
            let one = |av: MatRef<'_, f64>, bv: MatRef<'_, f64>| {
                let mut c = vec![0.0; m * n];
                faer_matmul(
                    MatMut::from_row_major_slice_mut(&mut c, m, n),
                    Accum::Replace,
                    av,
                    bv,
                    1.0,
                    Par::Seq,
                );
                c
            };
            let bv = MatRef::from_row_major_slice(&b, k, n);
            for av in [
                MatRef::from_row_major_slice(&a, m, k),
                MatRef::from_row_major_slice(&at, k, m).transpose(),
            ] {
                let want = one(av, bv);
                for _ in 0..3 {
                    let mut got = vec![f64::NAN; m * n];
                    paired_gemm(&mut got, av, bv, 1.0);
                    let same = want.iter().zip(&got).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{m}x{k}x{n} paired differs from one call");
                }
            }
            let (a32, b32): (Vec<f32>, Vec<f32>) =
                (a.iter().map(|&v| v as f32).collect(), b.iter().map(|&v| v as f32).collect());
            let (av, bv) = (
                MatRef::from_row_major_slice(&a32, m, k),
                MatRef::from_row_major_slice(&b32, k, n),
            );
            let mut want = vec![0.0f32; m * n];
            faer_matmul(
                MatMut::from_row_major_slice_mut(&mut want, m, n),
                Accum::Replace,
                av,
                bv,
                1.0,
                Par::Seq,
            );
            let mut got = vec![f32::NAN; m * n];
            paired_gemm(&mut got, av, bv, 1.0);
            assert!(
                want.iter().zip(&got).all(|(x, y)| x.to_bits() == y.to_bits()),
                "f32 {m}x{k}x{n}"
            );
        }
    }
}
