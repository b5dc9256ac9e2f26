//! The derivative of the Cholesky factorisation and its adjoint, by the
//! blocked algorithms of Murray (2016, "Differentiation of the Cholesky
//! decomposition", arXiv:1602.07527): forward mode follows the
//! factorisation's own recursion, reverse mode runs it backwards.
//!
//! Both work in place on a copy of the tangent (or cotangent) in the
//! output buffer. With blocks of `nb` columns, the work is that of the
//! factorisation's updates twice over, `n³/3` multiply-adds (the
//! factorisation: `n³/6`), almost all of it in general matrix products
//! (faer's GEMM, the fastest kernel there is), plus triangular solves with
//! the `nb × nb` diagonal blocks and unblocked loops inside those blocks.
//! The closed form `L·Φ(L⁻¹ Ṡ L⁻ᵀ)` costs `5n³/6` multiply-adds, in
//! triangular solves that run at a lower rate than GEMM.
//!
//! Matrices with `n ≤` [`UNBLOCKED`] only run the unblocked loops: no
//! allocation, no faer call.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::transpose::{symmetric_lower, symmetrize_lower_in_place};
use super::{LinalgError, Real};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, MatMut, MatRef, Par};

/// Diagonal blocks of at most this size use the unblocked loops.
const UNBLOCKED: usize = 32;

/// Products of fewer multiply-adds than this run on one thread (faer's
/// GEMM on two threads is slower than on one below `n ≈ 200`).
const MIN_PARALLEL_MADDS: usize = 1 << 22;

/// The column block for a matrix of size `n`: large blocks for large
/// matrices (their updates are the GEMMs), [`UNBLOCKED`] inside those.
fn block_size(n: usize) -> usize {
    if n > 256 {
        128
    } else {
        UNBLOCKED
    }
}

/// `par` for a product of `madds` multiply-adds.
pub(super) fn par_for(par: Par, madds: usize) -> Par {
    if madds >= MIN_PARALLEL_MADDS {
        par
    } else {
        Par::Seq
    }
}

/// The tangent of the Cholesky factor, `L̇ = L·Φ(L⁻¹ Ṡ L⁻ᵀ)`, for a batch
/// of factors.
///
/// `l`, `s` and `out` are `[batch, n, n]` row-major. Only the lower
/// triangle of `l` (the factor) is read. `Ṡ` is the symmetric matrix whose
/// lower triangle is `s`'s, or with `symmetrize` `(S + Sᵀ)/2` (the tangent
/// of [`cholesky_symmetrized`](super::cholesky_symmetrized); it is formed
/// in the copy the kernel makes anyway). `out` gets `L̇`, lower triangular
/// (its strict upper triangle is zeroed).
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer is not `batch·n·n` long.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::cholesky_tangent;
/// use faer::Par;
///
/// // A = L·Lᵀ = [[4]]: L = [[2]], dL = dA / (2 L) = 1 / 4 for dA = 1.
/// let mut out = [0.0_f64];
/// cholesky_tangent(&[2.0], &[1.0], &mut out, 1, 1, false, Par::Seq).unwrap();
/// assert_eq!(out, [0.25]);
/// ```
pub fn cholesky_tangent<T: Real>(
    l: &[T],
    s: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    symmetrize: bool,
    par: Par,
) -> Result<(), LinalgError> {
    each(l, s, out, batch, n, Pass::Tangent { symmetrize }, par)
}

/// The adjoint of [`cholesky_tangent`] in its tangent, for a batch of
/// factors: `S̄ = Φ(Z + Zᵀ)`, `Z = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹`, the gradient with
/// respect to the lower triangle of `Ṡ` of `⟨L̄, L̇⟩`; with `symmetrize`,
/// `(S̄ + S̄ᵀ)/2`, the adjoint of the tangent with `symmetrize`.
///
/// `l`, `lbar` and `out` are `[batch, n, n]` row-major. Only the lower
/// triangles of `l` and `lbar` are read; `out` gets `S̄`, lower triangular
/// (its strict upper triangle is zeroed), or with `symmetrize` the
/// symmetric `(S̄ + S̄ᵀ)/2`, written in place in one tiled pass.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer is not `batch·n·n` long.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::cholesky_cotangent;
/// use faer::Par;
///
/// // L = [[2]]: L̇ = Ṡ / 4, so S̄ = L̄ / 4.
/// let mut out = [0.0_f64];
/// cholesky_cotangent(&[2.0], &[1.0], &mut out, 1, 1, false, Par::Seq).unwrap();
/// assert_eq!(out, [0.25]);
/// ```
pub fn cholesky_cotangent<T: Real>(
    l: &[T],
    lbar: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    symmetrize: bool,
    par: Par,
) -> Result<(), LinalgError> {
    each(l, lbar, out, batch, n, Pass::Cotangent { symmetrize }, par)
}

/// Which of the pair [`each`] runs, and whether the tangent is read
/// symmetrised (for the tangent) or the result written symmetrised (for
/// the cotangent).
#[derive(Clone, Copy)]
enum Pass {
    Tangent { symmetrize: bool },
    Cotangent { symmetrize: bool },
}

/// Copies the lower triangle of each `x` (or of `(X + Xᵀ)/2`) into `out`
/// (the strict upper triangle zeroed) and runs [`forward`] or [`reverse`]
/// in place on it with that matrix's factor (then, for a symmetrised
/// cotangent, mirrors the result): one matrix with `par` inside it, or the
/// batch split across threads.
fn each<T: Real>(
    l: &[T],
    x: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    pass: Pass,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("l", l.len(), &[batch, n, n])?;
    check_len("x", x.len(), &[batch, n, n])?;
    check_len("out", out.len(), &[batch, n, n])?;
    let madds = (n * n * n) as f64 / 3.0;
    let (plan, inner) = if batch == 1 {
        (plan(Par::Seq, 1, n, madds), par)
    } else {
        let p = plan(par, batch, n, madds);
        (p, p.inner)
    };
    run(
        batch,
        plan,
        Per(out, per),
        || (),
        |i, Per(o, _), _| {
            let xi = &x[i * per..(i + 1) * per];
            let li = &l[i * per..(i + 1) * per];
            if let Pass::Tangent { symmetrize: true } = pass {
                symmetric_lower(xi, n, o);
            } else {
                for r in 0..n {
                    o[r * n..r * n + r + 1].copy_from_slice(&xi[r * n..r * n + r + 1]);
                }
            }
            for r in 0..n {
                o[r * n + r + 1..(r + 1) * n].fill(T::ZERO);
            }
            match pass {
                Pass::Tangent { .. } => forward(li, n, o, n, n, inner),
                Pass::Cotangent { symmetrize } => {
                    reverse(li, n, o, n, n, inner);
                    if symmetrize {
                        symmetrize_lower_in_place(o, n);
                    }
                }
            }
            Ok(())
        },
    )
}

/// The `n × n` matrix at the start of `x`, rows `ld` apart.
pub(super) fn view<T: Real>(x: &[T], ld: usize, n: usize) -> MatRef<'_, T> {
    let len = if n == 0 { 0 } else { (n - 1) * ld + n };
    MatRef::from_row_major_slice_with_stride(&x[..len], n, n, ld)
}

/// As [`view`], mutable. (faer 0.24's `from_row_major_slice_with_stride_mut`
/// gives a column-major view; the transpose of a column-major one does not.)
pub(super) fn view_mut<T: Real>(x: &mut [T], ld: usize, n: usize) -> MatMut<'_, T> {
    let len = if n == 0 { 0 } else { (n - 1) * ld + n };
    MatMut::from_column_major_slice_with_stride_mut(&mut x[..len], n, n, ld).transpose_mut()
}

const LOWER: BlockStructure = BlockStructure::TriangularLower;
const UPPER: BlockStructure = BlockStructure::TriangularUpper;
const RECT: BlockStructure = BlockStructure::Rectangular;

/// Forward mode in place: on entry the lower triangle of the `n × n`
/// matrix `x` (rows `lx` apart) holds `Ṡ`'s, on return `L̇`; `l` (rows `ll`
/// apart) is the factor. Entries above the diagonal are neither read nor
/// written.
///
/// Block `[j, k)` of columns, with `L = [[L₁₁, 0, 0], [R, D, 0], [B, C, ·]]`
/// (`R`, `D` its rows `[j, k)`; `B`, `C` the rows below) and the same names
/// dotted for the tangent, whose columns before `j` are final:
/// `Ḋ = chol_fwd(D, Ṡ_D − Ṙ Rᵀ − R Ṙᵀ)` and
/// `Ċ = (Ṡ_C − Ḃ Rᵀ − B Ṙᵀ − C Ḋᵀ) D⁻ᵀ`.
fn forward<T: Real>(l: &[T], ll: usize, x: &mut [T], lx: usize, n: usize, par: Par) {
    if n <= UNBLOCKED {
        forward_unblocked(l, ll, x, lx, n);
        return;
    }
    let nb = block_size(n);
    let one = T::ONE;
    for j in (0..n).step_by(nb) {
        let k = (j + nb).min(n);
        let m = k - j;
        if j > 0 {
            let lv = view(l, ll, n);
            let r = lv.submatrix(j, 0, m, j);
            let xv = view_mut(x, lx, n);
            let (xr, xd) = xv.submatrix_mut(j, 0, m, k).split_at_col_mut(j);
            let p = par_for(par, m * m * j);
            let mut xd = xd;
            tri_matmul(xd.rb_mut(), LOWER, Accum::Add, xr.rb(), RECT, r.transpose(), RECT, -one, p);
            tri_matmul(xd.rb_mut(), LOWER, Accum::Add, r, RECT, xr.rb().transpose(), RECT, -one, p);
        }
        forward(&l[j * ll + j..], ll, &mut x[j * lx + j..], lx, m, par);
        if k == n {
            break;
        }
        let lv = view(l, ll, n);
        let (d, c) = (lv.submatrix(j, j, m, m), lv.submatrix(k, j, n - k, m));
        let xv = view_mut(x, lx, n);
        let (top, bottom) = xv.split_at_row_mut(k);
        let top = top.submatrix(j, 0, m, k);
        let (xr, xd) = top.split_at_col(j);
        let (xb, rest) = bottom.split_at_col_mut(j);
        let mut xc = rest.submatrix_mut(0, 0, n - k, m);
        let p = par_for(par, (n - k) * m * j);
        if j > 0 {
            let (r, b) = (lv.submatrix(j, 0, m, j), lv.submatrix(k, 0, n - k, j));
            matmul(xc.rb_mut(), Accum::Add, xb.rb(), r.transpose(), -one, p);
            matmul(xc.rb_mut(), Accum::Add, b, xr.transpose(), -one, p);
        }
        let p = par_for(par, (n - k) * m * m);
        tri_matmul(xc.rb_mut(), RECT, Accum::Add, c, RECT, xd.transpose(), UPPER, -one, p);
        solve_lower_triangular_in_place(d, xc.transpose_mut(), p);
    }
}

/// Reverse mode in place: on entry the lower triangle of the `n × n`
/// matrix `a` (rows `la` apart) holds `L̄`'s, on return `S̄`'s; `l` (rows
/// `ll` apart) is the factor. Entries above the diagonal are not read;
/// they must be zero within the diagonal blocks (they are, in the copy
/// [`each`] makes), and are not written.
///
/// [`forward`]'s steps backwards, last block first: with `C̄ ← C̄ D⁻¹`,
/// `B̄ −= C̄ R`, `D̄ −= tril(C̄ᵀ C)`, `D̄ ← chol_rev(D, D̄)`,
/// `R̄ −= C̄ᵀ B + (D̄ + D̄ᵀ) R`.
fn reverse<T: Real>(l: &[T], ll: usize, a: &mut [T], la: usize, n: usize, par: Par) {
    if n <= UNBLOCKED {
        reverse_unblocked(l, ll, a, la, n);
        return;
    }
    let nb = block_size(n);
    let one = T::ONE;
    let last = (n - 1) / nb * nb;
    for j in (0..=last).rev().step_by(nb) {
        let k = (j + nb).min(n);
        let m = k - j;
        if k < n {
            let lv = view(l, ll, n);
            let (d, c) = (lv.submatrix(j, j, m, m), lv.submatrix(k, j, n - k, m));
            let av = view_mut(a, la, n);
            let (top, bottom) = av.split_at_row_mut(k);
            let (ar, ad) = top.submatrix_mut(j, 0, m, k).split_at_col_mut(j);
            let (ab, rest) = bottom.split_at_col_mut(j);
            let mut ac = rest.submatrix_mut(0, 0, n - k, m);
            let (mut ar, mut ad, mut ab) = (ar, ad, ab);
            let p = par_for(par, (n - k) * m * m);
            solve_upper_triangular_in_place(d.transpose(), ac.rb_mut().transpose_mut(), p);
            tri_matmul(ad.rb_mut(), LOWER, Accum::Add, ac.rb().transpose(), RECT, c, RECT, -one, p);
            if j > 0 {
                let (r, b) = (lv.submatrix(j, 0, m, j), lv.submatrix(k, 0, n - k, j));
                let p = par_for(par, (n - k) * m * j);
                matmul(ab.rb_mut(), Accum::Add, ac.rb(), r, -one, p);
                matmul(ar.rb_mut(), Accum::Add, ac.rb().transpose(), b, -one, p);
            }
        }
        reverse(&l[j * ll + j..], ll, &mut a[j * la + j..], la, m, par);
        if j > 0 {
            let lv = view(l, ll, n);
            let r = lv.submatrix(j, 0, m, j);
            let av = view_mut(a, la, n);
            let (ar, ad) = av.submatrix_mut(j, 0, m, k).split_at_col_mut(j);
            let (mut ar, ad) = (ar, ad.rb());
            let p = par_for(par, m * m * j);
            tri_matmul(ar.rb_mut(), RECT, Accum::Add, ad, LOWER, r, RECT, -one, p);
            tri_matmul(ar.rb_mut(), RECT, Accum::Add, ad.transpose(), UPPER, r, RECT, -one, p);
        }
    }
}

/// [`forward`] for a small matrix: column by column,
/// `ḋ = (ṡ_jj/2 − r·ṙ)/d` and `ċ = (ṡ_c − Ḃ r − B ṙ − c ḋ)/d`, with `r`, `d`,
/// `B`, `c` row `j` left of the diagonal, the diagonal entry, the rows
/// below left of column `j` and column `j` below the diagonal.
fn forward_unblocked<T: Real>(l: &[T], ll: usize, x: &mut [T], lx: usize, n: usize) {
    let half = T::ONE / (T::ONE + T::ONE);
    for j in 0..n {
        let lr = &l[j * ll..j * ll + j + 1];
        let d = lr[j];
        let (head, tail) = x.split_at_mut(((j + 1) * lx).min(x.len()));
        let xr = &mut head[j * lx..j * lx + j + 1];
        let mut s = xr[j] * half;
        for q in 0..j {
            s -= lr[q] * xr[q];
        }
        let dd = s / d;
        xr[j] = dd;
        let xr = &xr[..j];
        for i in j + 1..n {
            let li = &l[i * ll..i * ll + j + 1];
            let xi = &mut tail[(i - j - 1) * lx..(i - j - 1) * lx + j + 1];
            let mut s = xi[j] - li[j] * dd;
            for q in 0..j {
                s -= xi[q] * lr[q] + li[q] * xr[q];
            }
            xi[j] = s / d;
        }
    }
}

/// [`reverse`] for a small matrix: [`forward_unblocked`]'s steps
/// backwards, last column first.
fn reverse_unblocked<T: Real>(l: &[T], ll: usize, a: &mut [T], la: usize, n: usize) {
    let half = T::ONE / (T::ONE + T::ONE);
    for j in (0..n).rev() {
        let lr = &l[j * ll..j * ll + j + 1];
        let d = lr[j];
        let (head, tail) = a.split_at_mut(((j + 1) * la).min(a.len()));
        let ar = &mut head[j * la..j * la + j + 1];
        // ċ = (… − c ḋ)/d: c̄ ← c̄/d, then ḋ̄ −= c·c̄.
        let mut db = ar[j];
        for i in j + 1..n {
            let ci = &mut tail[(i - j - 1) * la + j];
            *ci /= d;
            db -= l[i * ll + j] * *ci;
        }
        // ḋ = (ṡ/2 − r·ṙ)/d: ḋ̄ ← ḋ̄/d, ṙ̄ −= ḋ̄ r, ṡ̄ = ḋ̄/2.
        let db = db / d;
        for q in 0..j {
            ar[q] -= db * lr[q];
        }
        ar[j] = db * half;
        // ċ = (… − Ḃ r − B ṙ …)/d: Ḃ̄ −= c̄ rᵀ, ṙ̄ −= Bᵀ c̄.
        for i in j + 1..n {
            let li = &l[i * ll..i * ll + j];
            let ai = &mut tail[(i - j - 1) * la..(i - j - 1) * la + j + 1];
            let cb = ai[j];
            for q in 0..j {
                ar[q] -= cb * li[q];
                ai[q] -= cb * lr[q];
            }
        }
    }
}
