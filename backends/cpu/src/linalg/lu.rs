//! Batched LU factorisation with partial pivoting, and what is computed from
//! it: solves, determinants, inverses.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::transpose::transpose;
use super::triangular::{solve_one, ABatch, TriangularSolve};
use super::{lu_blocked, small, FailMode, LinalgError, Real, SMALL_DIM};
use crate::buffers::{scratch, Scratch as Pooled};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
use faer::{MatMut, Par};

/// How a packed LU factor `[m, n]` is stored: row-major (as [`lu`] returns
/// it, and as `jax.lax.linalg.lu` does), or column-major (as LAPACK and faer
/// factor, and as [`lu_with_layout`] returns it on request: the row-major
/// `[n, m]` transpose).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FactorLayout {
    /// `f[i * n + j]` is the factor's `(i, j)`.
    #[default]
    RowMajor,
    /// `f[j * m + i]` is the factor's `(i, j)`.
    ColumnMajor,
}

impl FactorLayout {
    /// The layout an `m × n` factorisation is computed in, so the one a
    /// caller free to choose (scratch factors) writes without a copy: the
    /// unblocked loop of small matrices and the panelled one of `f64`
    /// matrices up to [`lu_blocked::MAX_DIM`] work row-major, faer
    /// column-major.
    fn native<T: Real>(m: usize, n: usize) -> Self {
        if (m <= SMALL_DIM && n <= SMALL_DIM) || panelled::<T>(m, n) {
            FactorLayout::RowMajor
        } else {
            FactorLayout::ColumnMajor
        }
    }

    /// The options of a left triangular solve with the packed factor's `L`
    /// (`lower`, unit diagonal) or `U`, transposed with `transpose_a`, for a
    /// factor stored in this layout ([`solve_one`] reads row-major: the
    /// column-major factor read so is its transpose).
    fn solve_with(self, lower: bool, transpose_a: bool) -> TriangularSolve {
        let t = self == FactorLayout::ColumnMajor;
        TriangularSolve {
            left_side: true,
            lower: lower ^ t,
            transpose_a: transpose_a ^ t,
            unit_diagonal: lower,
        }
    }
}

/// Whether an `m × n` matrix of `T` takes the panelled loop
/// ([`lu_blocked`]): `f64` only.
fn panelled<T: Real>(m: usize, n: usize) -> bool {
    T::as_f64_pair(&[], &mut []).is_some() && lu_blocked::takes(m, n)
}

/// Whether [`lu`] factors an `m × n` matrix of `dtype` with this crate's
/// own row-major loops (matrices up to [`SMALL_DIM`] of either float type;
/// `f64` ones the panelled loop takes): then a factor asked for in
/// [`FactorLayout::ColumnMajor`] costs a transpose of the whole factor,
/// which [`FactorLayout::RowMajor`] does not.
pub fn factors_row_major(dtype: anvil_core::DType, m: usize, n: usize) -> bool {
    match dtype {
        anvil_core::DType::F64 => (m <= SMALL_DIM && n <= SMALL_DIM) || panelled::<f64>(m, n),
        anvil_core::DType::F32 => m <= SMALL_DIM && n <= SMALL_DIM,
        _ => false,
    }
}

/// Per-chunk scratch of the LU path: the column-major copy and faer's
/// permutation arrays (faer path), the factor itself (for [`det`] and
/// friends, whose outputs do not hold it).
struct Scratch<T: Real> {
    col_major: Pooled<T>,
    perm: Vec<usize>,
    perm_inv: Vec<usize>,
    position: Vec<usize>,
    row_at: Vec<usize>,
    mem: MemBuffer,
    lu: Pooled<T>,
    piv: Vec<i64>,
    perm_out: Vec<i64>,
    /// The column-major panel of [`lu_blocked::factor`].
    panel: Pooled<f64>,
}

impl<T: Real> Scratch<T> {
    /// Scratch for `m × n` matrices; `own_factor`: also room for the factor
    /// and its pivots.
    fn new(m: usize, n: usize, own_factor: bool) -> Self {
        let faer_path = m > SMALL_DIM || n > SMALL_DIM;
        let big = |len: usize| if faer_path { len } else { 0 };
        let own = |len: usize| if own_factor { len } else { 0 };
        Scratch {
            // Also the row-major work buffer of the unblocked loop when it
            // writes a column-major factor.
            col_major: scratch(m * n + ALIGN_PAD),
            perm: vec![0; big(m)],
            perm_inv: vec![0; big(m)],
            position: vec![0; big(m)],
            row_at: vec![0; big(m)],
            mem: MemBuffer::new(if faer_path {
                lu_in_place_scratch::<usize, T>(m, n, Par::Seq, Default::default())
            } else {
                faer::dyn_stack::StackReq::EMPTY
            }),
            lu: scratch(own(m * n)),
            piv: vec![0; own(m.min(n))],
            perm_out: vec![0; own(m)],
            panel: scratch(if panelled::<T>(m, n) { lu_blocked::panel_len(m, n) } else { 0 }),
        }
    }
}

/// LU factorisation with partial pivoting of a batch of `m × n` matrices:
/// `A[perm[i], :] = (L·U)[i, :]`, i.e. `P·A = L·U`, with `L` unit lower
/// triangular `m × k`, `U` upper triangular `k × n`, `k = min(m, n)`.
///
/// * `a`, `lu_out`: `[batch, m, n]`. `lu_out` gets `L` (strictly below the
///   diagonal, its unit diagonal implied) and `U` packed, as LAPACK's
///   `getrf` and `jax.lax.linalg.lu`.
/// * `pivots`: `[batch, k]`, LAPACK-style row swaps, 0-based: at step `i`
///   rows `i` and `pivots[i] ≥ i` were swapped.
/// * `perm`: `[batch, m]`, the permutation those swaps compose to: row `i`
///   of `L·U` is row `perm[i]` of `A`.
///
/// Never fails on any input: singular and rank-deficient matrices are
/// factored too; a column without a nonzero pivot candidate leaves a zero
/// on `U`'s diagonal and zero multipliers (as `getrf` does). The pivot is
/// the first entry of largest magnitude in its column.
///
/// Matrices up to [`SMALL_DIM`] use an unblocked in-place
/// loop; `f64` matrices up to 320 rows and columns a panelled one of our
/// own on a CPU with AVX-512 (one thread per matrix; 1.4–1.5 times faer's
/// speed from 64 to 256). Larger ones are transposed into column-major scratch and factored
/// by faer (twice as fast as on a row-major view); faer takes the
/// reciprocal of a zero pivot, so when its result is not finite for a
/// finite input and has a zero or non-finite entry on `U`'s diagonal (what
/// a zero pivot leaves) the matrix is refactored by the unblocked loop.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::lu;
/// use faer::Par;
///
/// let a = [1.0, 2.0, 3.0, 4.0_f64];
/// let (mut f, mut piv, mut perm) = ([0.0; 4], [0i64; 2], [0i64; 2]);
/// lu(&a, &mut f, &mut piv, &mut perm, 1, 2, 2, Par::Seq).unwrap();
/// assert_eq!(piv, [1, 1]); // row 1 (|3| > |1|) swapped up first
/// assert_eq!(perm, [1, 0]);
/// assert_eq!(f, [3.0, 4.0, 1.0 / 3.0, 2.0 - 4.0 / 3.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn lu<T: Real>(
    a: &[T],
    lu_out: &mut [T],
    pivots: &mut [i64],
    perm: &mut [i64],
    batch: usize,
    m: usize,
    n: usize,
    par: Par,
) -> Result<(), LinalgError> {
    lu_with_layout(a, lu_out, pivots, perm, batch, m, n, par, FactorLayout::RowMajor)
}

/// [`lu`] with the packed factor stored in `layout`. With
/// [`FactorLayout::ColumnMajor`], `lu_out` (`[batch, n, m]`) gets the
/// transpose of [`lu`]'s factor, bit for bit (the pivots and the
/// permutation are [`lu`]'s): the layout faer factors in, so the factor is
/// written without the transposed copy [`lu`] makes; [`lu_solve_with_layout`]
/// and the determinants read it as it is.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{lu_with_layout, FactorLayout};
/// use faer::Par;
///
/// let a = [1.0, 2.0, 3.0, 4.0_f64];
/// let (mut f, mut piv, mut perm) = ([0.0; 4], [0i64; 2], [0i64; 2]);
/// let col = FactorLayout::ColumnMajor;
/// lu_with_layout(&a, &mut f, &mut piv, &mut perm, 1, 2, 2, Par::Seq, col).unwrap();
/// assert_eq!(perm, [1, 0]);
/// // lu's [3, 4, 1/3, 2 - 4/3], column by column.
/// assert_eq!(f, [3.0, 1.0 / 3.0, 4.0, 2.0 - 4.0 / 3.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn lu_with_layout<T: Real>(
    a: &[T],
    lu_out: &mut [T],
    pivots: &mut [i64],
    perm: &mut [i64],
    batch: usize,
    m: usize,
    n: usize,
    par: Par,
    layout: FactorLayout,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, m, n])?;
    check_len("lu_out", lu_out.len(), &[batch, m, n])?;
    let k = m.min(n);
    check_len("pivots", pivots.len(), &[batch, k])?;
    check_len("perm", perm.len(), &[batch, m])?;
    let plan = plan(par, batch, m.max(n), (m * n * k) as f64);
    let parts = (Per(lu_out, per), Per(pivots, k), Per(perm, m));
    run(
        batch,
        plan,
        parts,
        || Scratch::new(m, n, false),
        |i, (Per(f, _), Per(pv, _), Per(pm, _)), s| {
            factor_one(&a[i * per..(i + 1) * per], f, pv, pm, m, n, plan.inner, s, layout);
            Ok(())
        },
    )
}

/// Elements of slack in the column-major scratch, so that faer's copy can
/// start on a 64-byte boundary (see [`aligned`]).
const ALIGN_PAD: usize = 16;

/// The first `len` elements of `buf` from its first 64-byte boundary
/// (`buf` has [`ALIGN_PAD`] elements of slack), as faer aligns its own
/// matrices; the allocator aligns large buffers to 16 bytes only. With
/// the aligned start, W8's Newton steps (n = 200, faer's LU about half of
/// their time) ran 2–4% faster in side-by-side runs, near the noise.
fn aligned<T: Real>(buf: &mut [T], len: usize) -> &mut [T] {
    let skip = buf.as_ptr().align_offset(64).min(ALIGN_PAD);
    &mut buf[skip..skip + len]
}

/// Factors one matrix into `f`, stored in `layout`: see [`lu`].
#[allow(clippy::too_many_arguments)]
fn factor_one<T: Real>(
    a: &[T],
    f: &mut [T],
    piv: &mut [i64],
    perm: &mut [i64],
    m: usize,
    n: usize,
    par: Par,
    s: &mut Scratch<T>,
    layout: FactorLayout,
) {
    if m <= SMALL_DIM && n <= SMALL_DIM {
        unblocked(a, f, piv, perm, m, n, &mut s.col_major, layout);
        return;
    }
    if panelled::<T>(m, n) {
        // f64 only: the panelled loop factors a row-major copy in place
        // (the output itself, or the work buffer a column-major output is
        // transposed from), copied as its first panel's update reads it.
        let factored = match layout {
            FactorLayout::RowMajor => T::as_f64_pair(a, f)
                .map(|(src, dst)| lu_blocked::factor_copy(src, dst, m, n, piv, perm, &mut s.panel)),
            FactorLayout::ColumnMajor => {
                let work = &mut s.col_major[..m * n];
                let done = T::as_f64_pair(a, work).map(|(src, dst)| {
                    lu_blocked::factor_copy(src, dst, m, n, piv, perm, &mut s.panel)
                });
                if done == Some(true) {
                    transpose(work, m, n, f);
                }
                done
            }
        };
        match factored {
            Some(true) => return,
            // A zero or non-finite pivot: the unblocked loop is the reference.
            Some(false) => return unblocked(a, f, piv, perm, m, n, &mut s.col_major, layout),
            None => {}
        }
    }
    // faer factors column-major: into the aligned scratch, or straight
    // into a column-major output.
    let Scratch { col_major, perm: fp, perm_inv, mem, .. } = s;
    let factored = match layout {
        FactorLayout::RowMajor => {
            let col_major = aligned(col_major, m * n);
            let ok = faer_factor(a, col_major, m, n, par, fp, perm_inv, mem);
            if ok {
                transpose(col_major, n, m, f);
            }
            ok
        }
        FactorLayout::ColumnMajor => faer_factor(a, f, m, n, par, fp, perm_inv, mem),
    };
    if !factored {
        unblocked(a, f, piv, perm, m, n, &mut s.col_major, layout);
        return;
    }
    for (p, &q) in perm.iter_mut().zip(&s.perm) {
        *p = q as i64;
    }
    swaps_from_perm(&s.perm, piv, &mut s.position, &mut s.row_at);
}

/// faer's factorisation of `a` into `col_major` (`m × n`, column-major);
/// false if it met a zero pivot (see [`zero_pivot_in_faer`]), when the
/// factor is to be redone by the unblocked loop.
#[allow(clippy::too_many_arguments)]
fn faer_factor<T: Real>(
    a: &[T],
    col_major: &mut [T],
    m: usize,
    n: usize,
    par: Par,
    perm: &mut [usize],
    perm_inv: &mut [usize],
    mem: &mut MemBuffer,
) -> bool {
    transpose(a, m, n, col_major);
    let view = MatMut::from_column_major_slice_mut(col_major, m, n);
    lu_in_place(view, perm, perm_inv, par, MemStack::new(mem), Default::default());
    !zero_pivot_in_faer(col_major, a, m, n)
}

/// The unblocked loop's factorisation of `a` into `f`, stored in `layout`
/// (`work`: at least `m·n` elements, the row-major factor when `f` is
/// column-major).
#[allow(clippy::too_many_arguments)]
fn unblocked<T: Real>(
    a: &[T],
    f: &mut [T],
    piv: &mut [i64],
    perm: &mut [i64],
    m: usize,
    n: usize,
    work: &mut [T],
    layout: FactorLayout,
) {
    match layout {
        FactorLayout::RowMajor => {
            f.copy_from_slice(a);
            small::lu_in_place(f, m, n, piv, perm);
        }
        FactorLayout::ColumnMajor => {
            let w = &mut work[..m * n];
            w.copy_from_slice(a);
            small::lu_in_place(w, m, n, piv, perm);
            transpose(w, m, n, f);
        }
    }
}

/// Whether faer's factor `col_major` (`m × n`, column-major) of the finite
/// matrix `a` went non-finite: a zero pivot, whose reciprocal made its
/// multipliers NaN (see [`lu`]).
///
/// `U`'s diagonal is read first (`min(m, n)` numbers): a zero pivot at
/// step `j` leaves a 0 at `U[j][j]` and NaN multipliers in column `j` of
/// `L`, and those spread through the update of the trailing block to every
/// later diagonal entry. So unless the diagonal has a zero or a non-finite
/// entry the factor is left as it is without reading it all; otherwise the
/// full test runs (a factor that is non-finite, of a finite input).
fn zero_pivot_in_faer<T: Real>(col_major: &[T], a: &[T], m: usize, n: usize) -> bool {
    let suspect = (0..m.min(n)).any(|j| {
        let d = col_major[j * m + j];
        d == T::ZERO || !d.is_finite_()
    });
    let finite = |x: &T| x.is_finite_();
    suspect && !col_major.iter().all(finite) && a.iter().all(finite)
}

/// The LAPACK-style swaps of a permutation made by swaps `(i, j ≥ i)` in
/// order: replays them, tracking where each original row is.
fn swaps_from_perm(perm: &[usize], piv: &mut [i64], position: &mut [usize], row_at: &mut [usize]) {
    for (r, (p, a)) in position.iter_mut().zip(row_at.iter_mut()).enumerate() {
        *p = r;
        *a = r;
    }
    for (i, pv) in piv.iter_mut().enumerate() {
        let r = perm[i];
        let j = position[r];
        *pv = j as i64;
        let moved = row_at[i];
        row_at.swap(i, j);
        position[moved] = j;
        position[r] = i;
    }
}

/// Unpacks LU factorisations into `P`, `L`, `U` with `A = P·L·U` (as
/// `jax.scipy.linalg.lu` returns them).
///
/// `lu` is `[batch, m, n]` as [`lu`] returns it and `perm` its `[batch, m]`
/// permutation; `p_out` is `[batch, m, m]` with `P[perm[i]][i] = 1`,
/// `l_out` `[batch, m, k]` (unit diagonal written), `u_out` `[batch, k, n]`,
/// `k = min(m, n)`. Sequential (it only moves `O(m·n)` numbers).
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes,
/// [`LinalgError::InvalidPermutation`] for a `perm` entry outside `0..m`.
#[allow(clippy::too_many_arguments)]
pub fn lu_unpack<T: Real>(
    lu: &[T],
    perm: &[i64],
    p_out: &mut [T],
    l_out: &mut [T],
    u_out: &mut [T],
    batch: usize,
    m: usize,
    n: usize,
) -> Result<(), LinalgError> {
    let k = m.min(n);
    let per = check_len("lu", lu.len(), &[batch, m, n])?;
    check_len("perm", perm.len(), &[batch, m])?;
    check_len("p_out", p_out.len(), &[batch, m, m])?;
    check_len("l_out", l_out.len(), &[batch, m, k])?;
    check_len("u_out", u_out.len(), &[batch, k, n])?;
    for b in 0..batch {
        let pm = check_perm(&perm[b * m..(b + 1) * m], m, b)?;
        let p = &mut p_out[b * m * m..(b + 1) * m * m];
        p.fill(T::ZERO);
        for (i, &r) in pm.iter().enumerate() {
            p[r as usize * m + i] = T::ONE;
        }
        if k == 0 {
            continue;
        }
        let f = &lu[b * per..(b + 1) * per];
        for (i, row) in l_out[b * m * k..(b + 1) * m * k].chunks_exact_mut(k).enumerate() {
            for (j, x) in row.iter_mut().enumerate() {
                *x = match j.cmp(&i) {
                    std::cmp::Ordering::Less => f[i * n + j],
                    std::cmp::Ordering::Equal => T::ONE,
                    std::cmp::Ordering::Greater => T::ZERO,
                };
            }
        }
        for (i, row) in u_out[b * k * n..(b + 1) * k * n].chunks_exact_mut(n).enumerate() {
            for (j, x) in row.iter_mut().enumerate() {
                *x = if j >= i { f[i * n + j] } else { T::ZERO };
            }
        }
    }
    Ok(())
}

/// `perm` if every entry is in `0..m`.
fn check_perm(perm: &[i64], m: usize, batch_index: usize) -> Result<&[i64], LinalgError> {
    match perm.iter().find(|&&p| p < 0 || p as u64 >= m as u64) {
        Some(&value) => Err(LinalgError::InvalidPermutation { batch_index, value }),
        None => Ok(perm),
    }
}

/// Solves `A·X = B` (or `Aᵀ·X = B` when `transpose`) from the LU
/// factorisation of `A` made by [`lu`]: `A = Pᵀ·L·U`, so `X = U⁻¹·L⁻¹·P·B`
/// (transposed: `X = Pᵀ·L⁻ᵀ·U⁻ᵀ·B`), as `jax.lax.linalg.lu_solve` with
/// `trans` 0 or 1.
///
/// `lu` is `[batch, n, n]` and `perm` `[batch, n]` ([`ABatch::PerMatrix`]),
/// or `[n, n]` and `[n]` shared by every right-hand side
/// ([`ABatch::Shared`]: the factorisation is reused, the solves run per
/// batch element); `b` and `out` are `[batch, n, k]`. A zero pivot gives
/// infinities or NaN, not an error.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes,
/// [`LinalgError::InvalidPermutation`] for a `perm` entry outside `0..n`.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{lu, lu_solve, ABatch};
/// use faer::Par;
///
/// let a = [0.0, 2.0, 1.0, 1.0_f64];
/// let (mut f, mut piv, mut perm) = ([0.0; 4], [0i64; 2], [0i64; 2]);
/// lu(&a, &mut f, &mut piv, &mut perm, 1, 2, 2, Par::Seq).unwrap();
/// let mut x = [0.0; 2];
/// lu_solve(&f, &perm, &[4.0, 3.0], &mut x, 1, 2, 1, ABatch::PerMatrix, false, Par::Seq)
///     .unwrap();
/// assert_eq!(x, [1.0, 2.0]); // [0 2; 1 1]·[1, 2] = [4, 3]
/// ```
#[allow(clippy::too_many_arguments)]
pub fn lu_solve<T: Real>(
    lu: &[T],
    perm: &[i64],
    b: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    k: usize,
    a_batch: ABatch,
    transpose: bool,
    par: Par,
) -> Result<(), LinalgError> {
    let layout = FactorLayout::RowMajor;
    lu_solve_with_layout(lu, perm, b, out, batch, n, k, a_batch, transpose, layout, par)
}

/// [`lu_solve`] from a factor stored in `layout` (see [`lu_with_layout`]): the triangular solves read the
/// stored factor, transposed where needed, with no copy. The solutions
/// agree with those from the row-major factor to rounding (faer's solves
/// may order their sums differently by layout).
///
/// # Errors
///
/// As [`lu_solve`].
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{lu_solve_with_layout, lu_with_layout, ABatch, FactorLayout};
/// use faer::Par;
///
/// let a = [0.0, 2.0, 1.0, 1.0_f64];
/// let (mut f, mut piv, mut perm) = ([0.0; 4], [0i64; 2], [0i64; 2]);
/// let col = FactorLayout::ColumnMajor;
/// lu_with_layout(&a, &mut f, &mut piv, &mut perm, 1, 2, 2, Par::Seq, col).unwrap();
/// let mut x = [0.0; 2];
/// lu_solve_with_layout(&f, &perm, &[4.0, 3.0], &mut x, 1, 2, 1, ABatch::PerMatrix, false, col, Par::Seq)
///     .unwrap();
/// assert_eq!(x, [1.0, 2.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn lu_solve_with_layout<T: Real>(
    lu: &[T],
    perm: &[i64],
    b: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    k: usize,
    a_batch: ABatch,
    transpose: bool,
    layout: FactorLayout,
    par: Par,
) -> Result<(), LinalgError> {
    let factors = if a_batch == ABatch::Shared { 1 } else { batch };
    let per_a = check_len("lu", lu.len(), &[factors, n, n])?;
    check_len("perm", perm.len(), &[factors, n])?;
    for f in 0..factors {
        check_perm(&perm[f * n..(f + 1) * n], n, f)?;
    }
    let per_b = check_len("b", b.len(), &[batch, n, k])?;
    check_len("out", out.len(), &[batch, n, k])?;
    let plan = plan(par, batch, n, (2 * n * n * k) as f64);
    run(
        batch,
        plan,
        Per(out, per_b),
        || scratch::<T>(n * k),
        |i, Per(x, _), tmp| {
            let f = if a_batch == ABatch::Shared { 0 } else { i };
            let (fi, pi) = (&lu[f * per_a..(f + 1) * per_a], &perm[f * n..(f + 1) * n]);
            x.copy_from_slice(&b[i * per_b..(i + 1) * per_b]);
            solve_factored(fi, pi, x, tmp, n, k, transpose, layout, plan.inner);
            Ok(())
        },
    )
}

/// One solve from a factorisation stored in `layout`, in place on `x`
/// (`n × k`, holding `B`); `tmp` is `n·k` scratch for the permutation.
#[allow(clippy::too_many_arguments)]
fn solve_factored<T: Real>(
    f: &[T],
    perm: &[i64],
    x: &mut [T],
    tmp: &mut [T],
    n: usize,
    k: usize,
    transpose: bool,
    layout: FactorLayout,
    par: Par,
) {
    let tri = |lower, transpose_a| layout.solve_with(lower, transpose_a);
    tmp.copy_from_slice(x);
    if !transpose {
        // P·B, then L⁻¹, then U⁻¹.
        for (row, &p) in x.chunks_exact_mut(k.max(1)).zip(perm) {
            let p = p as usize;
            row.copy_from_slice(&tmp[p * k..(p + 1) * k]);
        }
        solve_one(f, x, n, k, tri(true, false), par);
        solve_one(f, x, n, k, tri(false, false), par);
    } else {
        // Aᵀ = Uᵀ·Lᵀ·P: U⁻ᵀ, then L⁻ᵀ, then Pᵀ.
        solve_one(f, x, n, k, tri(false, true), par);
        solve_one(f, x, n, k, tri(true, true), par);
        tmp.copy_from_slice(x);
        for (row, &p) in tmp.chunks_exact(k.max(1)).zip(perm) {
            let p = p as usize;
            x[p * k..(p + 1) * k].copy_from_slice(row);
        }
    }
}

/// `(sign of the determinant, log |det|)` of one factored matrix: the signs
/// and logarithms of `U`'s diagonal and the parity of the swaps. Any NaN on
/// the diagonal gives `(NaN, NaN)`, else a zero gives `(0, −∞)`.
fn slogdet_one<T: Real>(f: &[T], piv: &[i64], n: usize) -> (T, T) {
    let mut sign = T::ONE;
    let mut log = T::ZERO;
    let mut zero = false;
    for (i, &p) in piv.iter().enumerate() {
        let d = f[i * n + i];
        if d.is_nan_() {
            return (T::NAN, T::NAN);
        }
        zero |= d == T::ZERO;
        if d < T::ZERO {
            sign = -sign;
        }
        if p != i as i64 {
            sign = -sign;
        }
        log += d.abs_().ln_();
    }
    if zero {
        (T::ZERO, T::NEG_INFINITY)
    } else {
        (sign, log)
    }
}

/// The determinant of one factored matrix: the product of `U`'s diagonal
/// with the sign of the swaps.
fn det_one<T: Real>(f: &[T], piv: &[i64], n: usize) -> T {
    let mut det = T::ONE;
    for (i, &p) in piv.iter().enumerate() {
        det *= f[i * n + i];
        if p != i as i64 {
            det = -det;
        }
    }
    det
}

/// Determinants of a batch of `n × n` matrices from their LU factorisations
/// (`lu` `[batch, n, n]`, `pivots` `[batch, n]` as [`lu`] returns them):
/// `det = (−1)^(swaps) · Π U[i][i]`, exactly 0 for an exactly singular
/// factorisation. `out` is `[batch]`.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
pub fn det_from_lu<T: Real>(
    lu: &[T],
    pivots: &[i64],
    out: &mut [T],
    batch: usize,
    n: usize,
) -> Result<(), LinalgError> {
    let per = check_len("lu", lu.len(), &[batch, n, n])?;
    check_len("pivots", pivots.len(), &[batch, n])?;
    check_len("out", out.len(), &[batch])?;
    for (b, o) in out.iter_mut().enumerate() {
        *o = det_one(&lu[b * per..(b + 1) * per], &pivots[b * n..(b + 1) * n], n);
    }
    Ok(())
}

/// Signs and log-magnitudes of determinants from LU factorisations (as
/// [`det_from_lu`]): `det = sign · exp(logabs)`, with `sign` in `{−1, 1}`,
/// or `(0, −∞)` for an exactly singular factorisation, `(NaN, NaN)` if `U`'s
/// diagonal has a NaN. `sign` and `logabs` are `[batch]`.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
pub fn slogdet_from_lu<T: Real>(
    lu: &[T],
    pivots: &[i64],
    sign: &mut [T],
    logabs: &mut [T],
    batch: usize,
    n: usize,
) -> Result<(), LinalgError> {
    let per = check_len("lu", lu.len(), &[batch, n, n])?;
    check_len("pivots", pivots.len(), &[batch, n])?;
    check_len("sign", sign.len(), &[batch])?;
    check_len("logabs", logabs.len(), &[batch])?;
    for b in 0..batch {
        (sign[b], logabs[b]) =
            slogdet_one(&lu[b * per..(b + 1) * per], &pivots[b * n..(b + 1) * n], n);
    }
    Ok(())
}

/// Determinants of a batch of `n × n` matrices (`a` `[batch, n, n]`, `out`
/// `[batch]`), through an LU factorisation (see [`lu`] and
/// [`det_from_lu`]). An exactly singular matrix gives exactly 0.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
pub fn det<T: Real>(
    a: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("out", out.len(), &[batch])?;
    let plan = plan(par, batch, n, (n * n * n) as f64 / 3.0);
    run(
        batch,
        plan,
        Per(out, 1),
        || Scratch::new(n, n, true),
        |i, Per(o, _), s| {
            factor_into_scratch(&a[i * per..(i + 1) * per], n, plan.inner, s);
            o[0] = det_one(&s.lu, &s.piv, n);
            Ok(())
        },
    )
}

/// Signs and log-magnitudes of the determinants of a batch of `n × n`
/// matrices (see [`slogdet_from_lu`] for the conventions: an exactly
/// singular matrix gives `(0, −∞)`). `sign` and `logabs` are `[batch]`.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
pub fn slogdet<T: Real>(
    a: &[T],
    sign: &mut [T],
    logabs: &mut [T],
    batch: usize,
    n: usize,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("sign", sign.len(), &[batch])?;
    check_len("logabs", logabs.len(), &[batch])?;
    let plan = plan(par, batch, n, (n * n * n) as f64 / 3.0);
    let parts = (Per(sign, 1), Per(logabs, 1));
    run(
        batch,
        plan,
        parts,
        || Scratch::new(n, n, true),
        |i, (Per(sg, _), Per(lg, _)), s| {
            factor_into_scratch(&a[i * per..(i + 1) * per], n, plan.inner, s);
            (sg[0], lg[0]) = slogdet_one(&s.lu, &s.piv, n);
            Ok(())
        },
    )
}

/// Factors one `n × n` matrix into the scratch's own factor buffers, in
/// the layout that needs no copy ([`FactorLayout::native`]; the
/// determinants read only the diagonal, the same in both), which it
/// returns.
fn factor_into_scratch<T: Real>(a: &[T], n: usize, par: Par, s: &mut Scratch<T>) -> FactorLayout {
    let layout = FactorLayout::native::<T>(n, n);
    let (mut f, mut piv, mut perm) =
        (std::mem::take(&mut s.lu), std::mem::take(&mut s.piv), std::mem::take(&mut s.perm_out));
    factor_one(a, &mut f, &mut piv, &mut perm, n, n, par, s, layout);
    (s.lu, s.piv, s.perm_out) = (f, piv, perm);
    layout
}

/// Inverses of a batch of `n × n` matrices (`a`, `out` `[batch, n, n]`),
/// through an LU factorisation: `A⁻¹ = U⁻¹·L⁻¹·P`.
///
/// An exactly singular matrix (a zero pivot in its factorisation) is an
/// error with [`FailMode::Error`], or gets an all-NaN inverse with
/// [`FailMode::Nan`]. A nearly singular one is inverted, inaccurately, as
/// numpy and JAX do.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes;
/// [`LinalgError::Singular`] naming the lowest singular batch element and
/// its first zero pivot, in [`FailMode::Error`] (the outputs are then
/// unspecified).
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{inv, FailMode};
/// use faer::Par;
///
/// let mut x = [0.0; 4];
/// inv(&[2.0, 0.0, 0.0, 4.0_f64], &mut x, 1, 2, FailMode::Error, Par::Seq).unwrap();
/// assert_eq!(x, [0.5, 0.0, 0.0, 0.25]);
/// ```
pub fn inv<T: Real>(
    a: &[T],
    out: &mut [T],
    batch: usize,
    n: usize,
    mode: FailMode,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("out", out.len(), &[batch, n, n])?;
    let plan = plan(par, batch, n, (n * n * n) as f64);
    run(
        batch,
        plan,
        Per(out, per),
        || Scratch::new(n, n, true),
        |i, Per(o, _), s| {
            if n == 0 {
                return Ok(());
            }
            let layout = factor_into_scratch(&a[i * per..(i + 1) * per], n, plan.inner, s);
            if let Some(pivot) = (0..n).find(|&j| s.lu[j * n + j] == T::ZERO) {
                return match mode {
                    FailMode::Error => Err(LinalgError::Singular { batch_index: i, pivot }),
                    FailMode::Nan => {
                        o.fill(T::NAN);
                        Ok(())
                    }
                };
            }
            // P as the right-hand side (row i of P·I is e_perm[i]), then the
            // two triangular solves.
            o.fill(T::ZERO);
            for (row, &p) in o.chunks_exact_mut(n).zip(&s.perm_out) {
                row[p as usize] = T::ONE;
            }
            solve_one(&s.lu, o, n, n, layout.solve_with(true, false), plan.inner);
            solve_one(&s.lu, o, n, n, layout.solve_with(false, false), plan.inner);
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every start offset of the scratch gives a 64-byte aligned window of
    /// the requested length inside it.
    #[test]
    fn aligned_window_starts_on_a_cache_line() {
        let mut buf = vec![0.0f64; 100 + ALIGN_PAD];
        for start in 0..8 {
            let len = 100 - start;
            let w = aligned(&mut buf[start..start + len + ALIGN_PAD], len);
            assert_eq!(w.len(), len);
            assert_eq!(w.as_ptr() as usize % 64, 0, "start {start}");
        }
        let mut buf = vec![0.0f32; 50 + ALIGN_PAD];
        for start in 0..16 {
            let w = aligned(&mut buf[start..start + 34 + ALIGN_PAD], 34);
            assert_eq!((w.len(), w.as_ptr() as usize % 64), (34, 0), "start {start}");
        }
    }
}
