//! LU with partial pivoting of one row-major `f64` matrix, in panels of
//! [`PANEL`] columns, with AVX-512 or AVX2: the path of matrices too large
//! for the unblocked loop and small enough to sit in L2 (up to
//! [`MAX_DIM`]).
//!
//! faer's recursive LU spends most of its time at these sizes in the
//! panel work of its base case and in products too small for its GEMM
//! packing to pay (n = 200 with AVX-512: 115–127 µs, 42–46 GFlop/s, with
//! the transposed copy it needs; here 76–85 µs). Here, per panel:
//!
//! 1. the panel (rows `k0..m`, `PANEL` columns) is copied column-major and
//!    factored left-looking: each column takes the steps before it at once
//!    (a product down contiguous columns, accumulated in registers), then
//!    its pivot is searched and its multipliers scaled; rows are swapped in
//!    the panel and, outside it, in the matrix (contiguous row segments);
//! 2. the panel's rows right of it become `U`'s (a unit lower triangular
//!    solve of `PANEL` rows, per vector of columns in registers);
//! 3. the trailing block takes the rank-`PANEL` update `A₂₂ -= L₂₁ U₁₂`
//!    from packed operands, in blocks held in registers (AVX-512: 4 rows ×
//!    32 columns; AVX2: 6 rows × 8 columns), each element a chain of fused
//!    multiply-adds over the panel's columns in order.
//!
//! Both instruction set levels run the same operations in the same order,
//! so they give the same bits. On the AVX2 host (a Zen 3, one thread, as
//! `cargo bench -p anvil-ad-cpu --bench linalg -- lu/`) this path takes
//! 26, 115, 226, 472 and 807 µs at n = 64, 128, 200, 256 and 320, against
//! faer's 29, 130, 249, 514 and 811 µs; the trailing update runs at about
//! 40 GFlop/s (faer's GEMM: 47), the panels take about a third of the time.
//!
//! The pivot rule is the unblocked loop's: the first entry of largest
//! magnitude in its column (NaN never replaces). The values agree with
//! its to rounding (fused multiply-adds, updates grouped by panel), so
//! where two candidates tie to within rounding (exact ties of small
//! integers, rank-deficient matrices) the pivot chosen may differ, as it
//! did with faer. Every call gives the same bits. A zero or non-finite
//! pivot returns `false` (the caller refactors with the unblocked loop,
//! whose handling of singular matrices is the reference). One thread: a
//! single matrix of these sizes is 6 µs to 0.25 ms of work, and a batch
//! runs its matrices in parallel. (Sharing a matrix's trailing updates
//! with a second thread, by columns, measured no faster at n = 200 and
//! 256: the row swaps and the packed operands cross between the cores
//! every panel.)

/// Columns per panel: the trailing block is read and written once per
/// panel, so wider panels halve that traffic (from L2) while the panel's
/// own work grows; 16 measured best at n = 200 (with AVX2 too: 8 and 24
/// were 5–10% slower at n = 128, 200 and 256).
pub(super) const PANEL: usize = 16;

/// The largest dimension this path takes. Measured against faer (one
/// thread, with the transposed copy each path makes; AVX-512): n = 64 6.5 against
/// 10 µs, 128 31 against 46, 200 76–85 against 115, 256 230 against 327;
/// at 384 both take 0.60–0.64 ms and at 512 2.4–2.6 ms (the trailing block
/// no longer sits in L2, where faer's cache blocking starts to pay). With
/// AVX2 the two are level at 320 (see the module documentation).
pub(super) const MAX_DIM: usize = 320;

/// Whether [`factor_copy`] runs an `m × n` matrix on this CPU (the caller keeps
/// the matrices of the unblocked loop).
pub(super) fn takes(m: usize, n: usize) -> bool {
    imp::available() && m <= MAX_DIM && n <= MAX_DIM && m.min(n) > PANEL
}

/// [`factor_copy`] of `a` in place: the tests' reference (the callers
/// factor a copy of their input).
#[cfg(test)]
pub(super) fn factor(
    a: &mut [f64],
    m: usize,
    n: usize,
    piv: &mut [i64],
    perm: &mut [i64],
    panel: &mut [f64],
) -> bool {
    factor_with(None, a, m, n, piv, perm, panel)
}

/// Factors the row-major `m × n` matrix `src` into `a` (see the module
/// documentation): `L` strictly below the diagonal, `U` on and above it;
/// `piv[j]` the row swapped with row `j` at step `j`, `perm[i]` the row of
/// the input that row `i` of `L·U` is. `panel` is scratch of at least
/// [`panel_len`] elements. `false` when a pivot is zero or not finite, or
/// when the shape is not one [`takes`] accepts (or `panel` or `src` is
/// shorter); `a`, `piv` and `perm` are then partly written.
///
/// `a`'s contents are ignored and `src` is not copied into it first: the
/// first panel is read from `src`, its row swaps are not made in `a`, and
/// the first trailing update reads each row from the row of `src` it
/// became (AVX2; the other levels copy those rows, then update in place).
/// The same steps as factoring a copy in place, so the same bits.
pub(super) fn factor_copy(
    src: &[f64],
    a: &mut [f64],
    m: usize,
    n: usize,
    piv: &mut [i64],
    perm: &mut [i64],
    panel: &mut [f64],
) -> bool {
    factor_with(Some(src), a, m, n, piv, perm, panel)
}

/// The factorisation in place in `a`, or of `src` into `a` when given
/// (see [`factor_copy`]).
fn factor_with(
    src: Option<&[f64]>,
    a: &mut [f64],
    m: usize,
    n: usize,
    piv: &mut [i64],
    perm: &mut [i64],
    panel: &mut [f64],
) -> bool {
    let k = m.min(n);
    let fits =
        a.len() == m * n && piv.len() == k && perm.len() == m && panel.len() >= panel_len(m, n);
    if !takes(m, n) || !fits || src.is_some_and(|s| s.len() != m * n) {
        return false;
    }
    for (i, p) in perm.iter_mut().enumerate() {
        *p = i as i64;
    }
    let mut k0 = 0;
    while k0 < k {
        let w = PANEL.min(k - k0);
        let from = if k0 == 0 { src } else { None };
        if !factor_panel(from, a, m, n, k0, w, piv, perm, panel) {
            return false;
        }
        // Columns `w..n` of row `i` from the row of `src` it became.
        let rows_from = |src: &[f64], a: &mut [f64], rows: std::ops::Range<usize>| {
            for i in rows {
                let p = perm[i] as usize;
                a[i * n + w..(i + 1) * n].copy_from_slice(&src[p * n + w..(p + 1) * n]);
            }
        };
        if let Some(src) = from {
            // The panel's own rows, for `U₁₂`.
            rows_from(src, a, 0..w);
        }
        upper_rows(a, n, k0, w);
        let (ap, up) = (a.as_mut_ptr(), panel.as_mut_ptr());
        // SAFETY: `takes` checked the CPU; the block spans rows `k0 + w..m`
        // and columns `k0 + w..n` of `a` (`m × n`, stride `n`), its `L₂₁`
        // columns `k0..k0 + w` of those rows and its `U₁₂` rows `k0..k0 + w`.
        // `panel` is free again: it takes them packed. `src` is `m × n`
        // and `perm` holds rows below `m` (a permutation of `0..m`).
        unsafe {
            imp::pack(ap, m, n, k0, w, up);
            let fused = match from {
                Some(src) => imp::update_from(src.as_ptr(), perm.as_ptr(), ap, m, n, w, up),
                None => false,
            };
            if !fused {
                if let Some(src) = from {
                    rows_from(src, a, w..m);
                }
                imp::update(a.as_mut_ptr(), m, n, k0, w, panel.as_ptr());
            }
        }
        k0 += w;
    }
    true
}

/// The scratch [`factor_copy`] needs for an `m × n` matrix: the column-major
/// panel (`m` rows), then for the trailing update the panel's `U` rows
/// packed (rows of [`packed_stride`]) and its `L` rows packed in groups of
/// [`L_GROUP`] (AVX2).
pub(super) fn panel_len(m: usize, n: usize) -> usize {
    PANEL * m.max(packed_stride(n) + m.next_multiple_of(L_GROUP))
}

/// Rows per block of the AVX2 trailing update, whose `L` entries are
/// packed `L_GROUP` at a time per column.
const L_GROUP: usize = 6;

/// The row stride of the packed `U` rows of a trailing update of up to
/// `cols` columns: a whole number of registers plus one, so that no two
/// rows lie a power of two apart. Read in place, `U`'s rows are `n`
/// elements apart: at n = 256, 2 KiB, and sixteen of them with the
/// block's own rows fall in a few L1 sets (269–272 µs a factorisation,
/// against 164–176 µs at n = 255 and 257).
fn packed_stride(cols: usize) -> usize {
    cols.div_ceil(8) * 8 + 8
}

/// Steps `k0..k0 + w` of the factorisation on the panel of those columns
/// (rows `k0..m`), copied column-major into `pc`: pivots found and rows
/// swapped (the rest of each swapped row swapped in `a` too), multipliers
/// and the panel's own updates, then the panel copied back. `false` on a
/// zero or non-finite pivot. With `src` (the first panel, `k0 = 0`, of
/// [`factor_copy`]) the panel is read from `src` and the rest of the rows
/// is left to the caller, which reads them from the rows of `src` that
/// `perm` names.
#[allow(clippy::too_many_arguments)]
fn factor_panel(
    src: Option<&[f64]>,
    a: &mut [f64],
    m: usize,
    n: usize,
    k0: usize,
    w: usize,
    piv: &mut [i64],
    perm: &mut [i64],
    pc: &mut [f64],
) -> bool {
    let r = m - k0;
    let pc = &mut pc[..r * w];
    // Copied in from `src` (only read: the copy goes into the panel).
    let from = src.map_or(a.as_mut_ptr(), |s| s.as_ptr().cast_mut());
    // SAFETY: `takes` checked the CPU; rows `k0..m`, columns `k0..k0 + w`
    // of `a` or `src` (`m × n`) and `w` columns of `r` rows of `pc`.
    unsafe { imp::panel_copy(from, n, k0, w, r, pc.as_mut_ptr(), true) };
    for j in 0..w {
        // Left-looking: column j takes the steps before it at once, its
        // `U` part by forward substitution, the rest by a product with the
        // multipliers so far (read down contiguous columns).
        let (done, rest) = pc.split_at_mut(j * r);
        // SAFETY: `takes` checked the CPU (the caller's precondition); the
        // first `j` columns of `done` have `r` rows, as `col`.
        let p = unsafe { imp::left_update(&mut rest[..r], done, r, j) };
        piv[k0 + j] = (k0 + p) as i64;
        if p != j {
            for c in 0..w {
                pc.swap(c * r + j, c * r + p);
            }
            perm.swap(k0 + j, k0 + p);
            if src.is_none() {
                let (top, bottom) = a.split_at_mut((k0 + p) * n);
                let (upper, lower) = (&mut top[(k0 + j) * n..(k0 + j + 1) * n], &mut bottom[..n]);
                // SAFETY: `takes` checked the CPU (the caller's precondition).
                unsafe {
                    imp::swap(&mut upper[..k0], &mut lower[..k0]);
                    imp::swap(&mut upper[k0 + w..], &mut lower[k0 + w..]);
                }
            }
        }
        let pivot = pc[j * r + j];
        if pivot == 0.0 || !pivot.is_finite() {
            return false;
        }
        // SAFETY: as above.
        unsafe { imp::scale(&mut pc[j * r + j + 1..(j + 1) * r], pivot) };
    }
    // SAFETY: as the copy in.
    unsafe { imp::panel_copy(a.as_mut_ptr(), n, k0, w, r, pc.as_mut_ptr(), false) };
    true
}

/// The panel's rows right of it become `U`'s: row `k0 + i` minus
/// `Σ_{p<i} L[i][p] · row k0 + p`, in order of `p`.
fn upper_rows(a: &mut [f64], n: usize, k0: usize, w: usize) {
    let c0 = k0 + w;
    if c0 >= n {
        return;
    }
    if w == PANEL {
        // SAFETY: `takes` checked the CPU (the caller's precondition);
        // rows `k0..k0 + PANEL` of `a` (`n` columns) exist.
        unsafe { imp::upper_panel(a.as_mut_ptr(), n, k0) };
        return;
    }
    for i in 1..w {
        let (above, row) = a.split_at_mut((k0 + i) * n);
        let row = &mut row[..n];
        for p in 0..i {
            let l = row[k0 + p];
            let src = &above[(k0 + p) * n + c0..(k0 + p + 1) * n];
            // SAFETY: `takes` checked the CPU (the caller's precondition).
            unsafe { imp::axpy(&mut row[c0..], src, l) };
        }
    }
}

/// The panel copy of both levels: rows `k0..k0 + r`, columns `k0..k0 + w`
/// of the row-major `a` (stride `n`) into the column-major `pc` (`w · r`),
/// or back (`to_panel` false); blocks of `B × B` through `block(src,
/// src_stride, dst, dst_stride)`, which writes the transpose of the block
/// at `src` to `dst`, the rest element by element. Inlined into each
/// level's kernel, `block` with it.
///
/// # Safety
/// Both regions lie in `a` and `pc`; `block` copies exactly one block.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn panel_copy_in_blocks<const B: usize>(
    a: *mut f64,
    n: usize,
    k0: usize,
    w: usize,
    r: usize,
    pc: *mut f64,
    to_panel: bool,
    block: impl Fn(*const f64, usize, *mut f64, usize),
) {
    // SAFETY: every access is to row `k0 + i < k0 + r`, column
    // `k0 + c < k0 + w` of `a`, or element `c·r + i` of `pc`.
    unsafe {
        let at = |i: usize, c: usize| a.add((k0 + i) * n + k0 + c);
        let (full_c, full_r) = (w / B * B, r / B * B);
        for c in (0..full_c).step_by(B) {
            for i in (0..full_r).step_by(B) {
                if to_panel {
                    block(at(i, c), n, pc.add(c * r + i), r);
                } else {
                    block(pc.add(c * r + i), r, at(i, c), n);
                }
            }
        }
        for c in 0..w {
            let rows = if c < full_c { full_r..r } else { 0..r };
            for i in rows {
                if to_panel {
                    *pc.add(c * r + i) = *at(i, c);
                } else {
                    *at(i, c) = *pc.add(c * r + i);
                }
            }
        }
    }
}

/// The kernels at this thread's instruction set level
/// ([`crate::matvec::level`]: AVX-512, else AVX2 with FMA; tests force each
/// level the CPU has in turn). Both levels run the same steps in the same
/// order, so they give the same bits.
#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{avx2, avx512, none};
    use crate::matvec::{level, Level};

    /// Whether this CPU runs the kernels.
    pub(super) fn available() -> bool {
        level().is_some()
    }

    macro_rules! at_level {
        ($($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) $(-> $r:ty)?;)*) => {$(
            $(#[$m])*
            #[allow(clippy::too_many_arguments)]
            /// The kernel of this name at this thread's level.
            ///
            /// # Safety
            /// As the level's kernel.
            pub(super) unsafe fn $name($($a: $t),*) $(-> $r)? {
                // SAFETY: `level` names features this CPU has (none: the
                // kernels that do nothing); the caller upholds the rest.
                unsafe {
                    match level() {
                        Some(Level::Avx512) => avx512::$name($($a),*),
                        Some(Level::Avx2) => avx2::$name($($a),*),
                        None => none::$name($($a),*),
                    }
                }
            }
        )*};
    }

    /// The kernels that the compiler vectorises from plain loops, in AVX2
    /// vectors at either level (a CPU with AVX-512 has AVX2).
    macro_rules! in_avx2 {
        ($(fn $name:ident($($a:ident: $t:ty),*);)*) => {$(
            /// The kernel of this name, compiled for AVX2.
            ///
            /// # Safety
            /// As the kernel's.
            pub(super) unsafe fn $name($($a: $t),*) {
                // SAFETY: either level implies AVX2 and FMA (none: the
                // kernels that do nothing).
                unsafe {
                    match level() {
                        Some(_) => avx2::$name($($a),*),
                        None => none::$name($($a),*),
                    }
                }
            }
        )*};
    }

    in_avx2! {
        fn swap(x: &mut [f64], y: &mut [f64]);
        fn scale(x: &mut [f64], d: f64);
        fn axpy(y: &mut [f64], x: &[f64], s: f64);
    }

    at_level! {
        fn left_update(col: &mut [f64], done: &[f64], r: usize, j: usize) -> usize;
        fn panel_copy(a: *mut f64, n: usize, k0: usize, w: usize, r: usize, pc: *mut f64, to_panel: bool);
        fn upper_panel(a: *mut f64, n: usize, k0: usize);
        #[cfg(test)]
        fn pivot(col: &[f64], j: usize) -> usize;
        fn pack(a: *mut f64, m: usize, n: usize, k0: usize, w: usize, u: *mut f64);
        fn update(a: *mut f64, m: usize, n: usize, k0: usize, w: usize, u: *const f64);
    }

    /// The first trailing update of [`super::factor_copy`] (the panel at
    /// column 0, `w` wide), row `i` read from row `perm[i]` of `src` and
    /// written to `a`, where this level fuses the two (AVX2); `false`,
    /// with nothing done, at the others (the caller copies the rows, then
    /// updates in place).
    ///
    /// # Safety
    /// As `avx2::update_from`.
    pub(super) unsafe fn update_from(
        src: *const f64,
        perm: *const i64,
        a: *mut f64,
        m: usize,
        n: usize,
        w: usize,
        u: *const f64,
    ) -> bool {
        match level() {
            // SAFETY: the level says the CPU has AVX2 and FMA; the caller
            // upholds the rest.
            Some(Level::Avx2) => unsafe {
                avx2::update_from(src, perm, a, m, n, w, u);
                true
            },
            _ => false,
        }
    }
}

/// The AVX-512 kernels (8 lanes, masked tails).
#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
mod avx512 {
    use std::arch::x86_64::*;

    /// Column `j` of a panel takes the steps before it: its `U` part by
    /// forward substitution (`col[p] -= Σ_{q<p} L[p][q] · col[q]`, `p < j`),
    /// then `col[i] -= Σ_{q<j} done[q·r + i] · col[q]` for rows `i` in
    /// `j..r`; each a chain of fused multiply-adds in order of `q`. Returns
    /// the pivot row of the updated column ([`pivot`]'s choice, found as
    /// the values are stored).
    ///
    /// # Safety
    /// AVX-512 F and FMA; `col` has `r` elements and `done` `j` columns of `r`.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn left_update(col: &mut [f64], done: &[f64], r: usize, j: usize) -> usize {
        if j == 0 || col.len() < r || done.len() < j * r {
            // SAFETY: the CPU as here.
            return unsafe { pivot(&col[..r.min(col.len())], j) };
        }
        for p in 1..j {
            let mut x = col[p];
            for q in 0..p {
                x = (-done[q * r + p]).mul_add(col[q], x);
            }
            col[p] = x;
        }
        let (cp, dp) = (col.as_mut_ptr(), done.as_ptr());
        let mut i = j;
        let mut top = Argmax::new(j);
        // SAFETY: every chunk is masked to rows `i..r` of `col` and of the
        // columns of `done`.
        unsafe {
            // Four chunks at a time: four independent chains (one chain
            // waits on each fused multiply-add's latency).
            while i < r {
                let k: [__mmask8; 4] = std::array::from_fn(|c| {
                    let at = i + 8 * c;
                    if at < r {
                        tail_mask((r - at).min(8))
                    } else {
                        0
                    }
                });
                // Chunks past `r` (mask 0) touch no memory; their
                // addresses are formed with `wrapping_add`, as they may
                // lie past the end of the buffer.
                let mut acc: [__m512d; 4] = std::array::from_fn(|c| {
                    _mm512_maskz_loadu_pd(k[c], cp.wrapping_add(i + 8 * c))
                });
                for q in 0..j {
                    let u = _mm512_set1_pd(*cp.add(q));
                    let d = dp.add(q * r + i);
                    for (c, v) in acc.iter_mut().enumerate() {
                        let x = _mm512_maskz_loadu_pd(k[c], d.wrapping_add(8 * c));
                        *v = _mm512_fnmadd_pd(x, u, *v);
                    }
                }
                for (c, v) in acc.iter().enumerate() {
                    _mm512_mask_storeu_pd(cp.wrapping_add(i + 8 * c), k[c], *v);
                    top.take(*v, k[c]);
                }
                i += 32;
            }
        }
        top.row(col[j].is_nan(), j)
    }

    /// Copies the panel (rows `k0..k0 + r`, columns `k0..k0 + w` of the
    /// row-major `a`) into the column-major `pc` (`to_panel`), or back:
    /// blocks of 8 × 8 transposed in registers, the rest element by element.
    ///
    /// # Safety
    /// AVX-512 F; both regions lie in `a` (stride `n`) and `pc` (`w · r`).
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn panel_copy(
        a: *mut f64,
        n: usize,
        k0: usize,
        w: usize,
        r: usize,
        pc: *mut f64,
        to_panel: bool,
    ) {
        // SAFETY: the caller's contract; each block is 8 rows of 8 at
        // `src` and `dst` with the strides given.
        unsafe {
            super::panel_copy_in_blocks::<8>(a, n, k0, w, r, pc, to_panel, |src, ss, dst, ds| {
                let v: [__m512d; 8] = std::array::from_fn(|q| _mm512_loadu_pd(src.add(q * ss)));
                for (q, t) in transpose8(v).iter().enumerate() {
                    _mm512_storeu_pd(dst.add(q * ds), *t);
                }
            })
        }
    }

    /// The transpose of the 8 × 8 block whose rows are `r`.
    #[inline]
    #[target_feature(enable = "avx512f,fma")]
    fn transpose8(r: [__m512d; 8]) -> [__m512d; 8] {
        let t: [__m512d; 8] = std::array::from_fn(|k| {
            let (x, y) = (r[k / 2 * 2], r[k / 2 * 2 + 1]);
            if k % 2 == 0 {
                _mm512_unpacklo_pd(x, y)
            } else {
                _mm512_unpackhi_pd(x, y)
            }
        });
        // u[0..4]: rows 0-3, elements (0,4), (1,5), (2,6), (3,7); u[4..8]: rows 4-7.
        let u = [
            _mm512_shuffle_f64x2::<0x88>(t[0], t[2]),
            _mm512_shuffle_f64x2::<0x88>(t[1], t[3]),
            _mm512_shuffle_f64x2::<0xDD>(t[0], t[2]),
            _mm512_shuffle_f64x2::<0xDD>(t[1], t[3]),
            _mm512_shuffle_f64x2::<0x88>(t[4], t[6]),
            _mm512_shuffle_f64x2::<0x88>(t[5], t[7]),
            _mm512_shuffle_f64x2::<0xDD>(t[4], t[6]),
            _mm512_shuffle_f64x2::<0xDD>(t[5], t[7]),
        ];
        [
            _mm512_shuffle_f64x2::<0x88>(u[0], u[4]),
            _mm512_shuffle_f64x2::<0x88>(u[1], u[5]),
            _mm512_shuffle_f64x2::<0x88>(u[2], u[6]),
            _mm512_shuffle_f64x2::<0x88>(u[3], u[7]),
            _mm512_shuffle_f64x2::<0xDD>(u[0], u[4]),
            _mm512_shuffle_f64x2::<0xDD>(u[1], u[5]),
            _mm512_shuffle_f64x2::<0xDD>(u[2], u[6]),
            _mm512_shuffle_f64x2::<0xDD>(u[3], u[7]),
        ]
    }

    /// The `U` rows of a full panel right of it (rows `k0..k0 + PANEL`,
    /// columns `k0 + PANEL..n`): per chunk of 8 columns, the panel's rows
    /// in sixteen registers, row `i` minus `L[i][p]` times row `p` for
    /// `p < i` in order.
    ///
    /// # Safety
    /// AVX-512 F and FMA; `a` holds rows `k0..k0 + PANEL` of `n` elements.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn upper_panel(a: *mut f64, n: usize, k0: usize) {
        const W: usize = super::PANEL;
        let c0 = k0 + W;
        let mut c = c0;
        // SAFETY: the chunks are masked to columns `c..n` of the panel's rows.
        unsafe {
            while c < n {
                let k = tail_mask((n - c).min(8));
                let mut v = [_mm512_setzero_pd(); W];
                for (i, x) in v.iter_mut().enumerate() {
                    *x = _mm512_maskz_loadu_pd(k, a.add((k0 + i) * n + c));
                }
                for i in 1..W {
                    for p in 0..i {
                        let l = _mm512_set1_pd(*a.add((k0 + i) * n + k0 + p));
                        v[i] = _mm512_fnmadd_pd(l, v[p], v[i]);
                    }
                }
                for (i, x) in v.iter().enumerate().skip(1) {
                    _mm512_mask_storeu_pd(a.add((k0 + i) * n + c), k, *x);
                }
                c += 8;
            }
        }
    }

    /// The pivot row of a column: the first of `col[j..]` of largest
    /// magnitude, `j` when `|col[j]|` is NaN or nothing beats it (NaN never
    /// does), as the unblocked loop's `if |x| > best` scan picks it.
    ///
    /// # Safety
    /// AVX-512 F.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn pivot(col: &[f64], j: usize) -> usize {
        let mut top = Argmax::new(j);
        let len = col.len();
        let mut i = j;
        // SAFETY: each chunk read is masked to `i..len`.
        unsafe {
            while i < len {
                let k = tail_mask((len - i).min(8));
                top.take(_mm512_maskz_loadu_pd(k, col.as_ptr().add(i)), k);
                i += 8;
            }
        }
        top.row(col.get(j).is_none_or(|x| x.is_nan()), j)
    }

    /// The first row of largest magnitude over chunks of a column from row
    /// `j`: per lane, the largest magnitude seen and its first row (strictly
    /// greater replaces; NaN compares false).
    struct Argmax {
        best: __m512d,
        at: __m512i,
        rows: __m512i,
    }

    impl Argmax {
        #[inline]
        #[target_feature(enable = "avx512f,fma")]
        fn new(j: usize) -> Argmax {
            let rows = _mm512_add_epi64(
                _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
                _mm512_set1_epi64(j as i64),
            );
            Argmax { best: _mm512_set1_pd(-1.0), at: _mm512_set1_epi64(i64::MAX), rows }
        }

        /// The next chunk of eight rows, lanes outside `k` ignored.
        #[inline]
        #[target_feature(enable = "avx512f,fma")]
        fn take(&mut self, v: __m512d, k: __mmask8) {
            let v = _mm512_abs_pd(v);
            let gt = _mm512_mask_cmp_pd_mask(k, v, self.best, _CMP_GT_OQ);
            self.best = _mm512_mask_blend_pd(gt, self.best, v);
            self.at = _mm512_mask_blend_epi64(gt, self.at, self.rows);
            self.rows = _mm512_add_epi64(self.rows, _mm512_set1_epi64(8));
        }

        /// The row: `j` when the first value is NaN (nothing replaces it in
        /// the unblocked loop's scan) or every value is.
        #[inline]
        #[target_feature(enable = "avx512f,fma")]
        fn row(&self, first_is_nan: bool, j: usize) -> usize {
            if first_is_nan {
                return j;
            }
            let (mut bests, mut ats) = ([0.0f64; 8], [0i64; 8]);
            // SAFETY: eight lanes into eight elements each.
            unsafe {
                _mm512_storeu_pd(bests.as_mut_ptr(), self.best);
                _mm512_storeu_si512(ats.as_mut_ptr().cast(), self.at);
            }
            let top = bests.iter().copied().fold(-1.0, f64::max);
            if top < 0.0 {
                return j;
            }
            let first = (0..8).filter(|&l| bests[l] == top).map(|l| ats[l]).min();
            first.map_or(j, |p| p as usize)
        }
    }

    /// The mask of the first `cols % 8` lanes (all eight when none is left).
    fn tail_mask(cols: usize) -> __mmask8 {
        match cols % 8 {
            0 => 0xff,
            r => ((1u16 << r) - 1) as __mmask8,
        }
    }

    /// `U₁₂` of the panel at column `k0` packed into `u` at
    /// [`super::packed_stride`], for [`update`].
    ///
    /// # Safety
    /// AVX-512 F; `a` holds `m × n` elements, `k0 + w ≤ min(m, n)`,
    /// `w ≤ PANEL`; `u` holds `super::panel_len(m, n)` elements.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn pack(a: *mut f64, m: usize, n: usize, k0: usize, w: usize, u: *mut f64) {
        let c0 = k0 + w;
        if c0 >= n || c0 >= m {
            return;
        }
        let us = super::packed_stride(n - c0);
        // SAFETY: rows `k0..c0` of `a`, columns `c0..n`, into `w` rows of
        // `us ≥ n - c0` elements of `u` (`w · us ≤ PANEL · packed_stride(n)`).
        unsafe {
            for p in 0..w {
                std::ptr::copy_nonoverlapping(a.add((k0 + p) * n + c0), u.add(p * us), n - c0);
            }
        }
    }

    /// The rank-`w` update `A₂₂ -= L₂₁ U₁₂` of the trailing block of the
    /// panel at column `k0` (see the module documentation), with `U₁₂`
    /// packed by [`pack`].
    ///
    /// # Safety
    /// As [`pack`], after it.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn update(
        a: *mut f64,
        m: usize,
        n: usize,
        k0: usize,
        w: usize,
        u: *const f64,
    ) {
        let c0 = k0 + w;
        if c0 >= n || c0 >= m {
            return;
        }
        let us = super::packed_stride(n - c0);
        // SAFETY: every block below lies in rows `c0..m`, columns `c0..n`
        // (the last chunk of a row masked to its end); `L₂₁` is read at
        // rows `c0..m`, columns `k0..c0` of `a`, the packed `U₁₂` at rows
        // `0..w`, columns `0..n - c0` of `u`.
        unsafe {
            let mut i = c0;
            while i < m {
                let rows = (m - i).min(4);
                let mut c = c0;
                while c < n {
                    let cols = (n - c).min(32);
                    let chunks = cols.div_ceil(8);
                    let tail = tail_mask(cols);
                    macro_rules! go {
                        ($r:literal, $q:literal) => {
                            block::<$r, $q>(a, n, i, c, k0, w, (u.add(c - c0), us), tail)
                        };
                    }
                    match (rows, chunks) {
                        (4, 4) => go!(4, 4),
                        (4, 3) => go!(4, 3),
                        (4, 2) => go!(4, 2),
                        (4, 1) => go!(4, 1),
                        (3, 4) => go!(3, 4),
                        (3, 3) => go!(3, 3),
                        (3, 2) => go!(3, 2),
                        (3, 1) => go!(3, 1),
                        (2, 4) => go!(2, 4),
                        (2, 3) => go!(2, 3),
                        (2, 2) => go!(2, 2),
                        (2, 1) => go!(2, 1),
                        (1, 4) => go!(1, 4),
                        (1, 3) => go!(1, 3),
                        (1, 2) => go!(1, 2),
                        _ => go!(1, 1),
                    }
                    c += cols;
                }
                i += rows;
            }
        }
    }

    /// Rows `i..i + R`, chunks of 8 columns from `c` (`Q` of them, the last
    /// masked by `tail`): `A[i][c] -= Σ_p L[i][k0 + p] · U[k0 + p][c]`,
    /// one fused multiply-add per `p` in order; `U`'s rows read from `u`
    /// (this block's first column) at stride `us`.
    ///
    /// # Safety
    /// As [`update`], for this block.
    #[inline]
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const R: usize, const Q: usize>(
        a: *mut f64,
        n: usize,
        i: usize,
        c: usize,
        k0: usize,
        w: usize,
        (u, us): (*const f64, usize),
        tail: __mmask8,
    ) {
        // SAFETY: the caller's contract: the block and its operands lie in
        // `a` and `u`.
        unsafe {
            let mask = |q: usize| if q + 1 == Q { tail } else { 0xff };
            let mut acc = [[_mm512_setzero_pd(); Q]; R];
            for (r, row) in acc.iter_mut().enumerate() {
                let at = a.add((i + r) * n + c);
                for (q, v) in row.iter_mut().enumerate() {
                    *v = _mm512_maskz_loadu_pd(mask(q), at.add(8 * q));
                }
            }
            for p in 0..w {
                let urow = u.add(p * us);
                let mut u = [_mm512_setzero_pd(); Q];
                for (q, v) in u.iter_mut().enumerate() {
                    *v = _mm512_maskz_loadu_pd(mask(q), urow.add(8 * q));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let l = _mm512_set1_pd(*a.add((i + r) * n + k0 + p));
                    for (v, &uq) in row.iter_mut().zip(&u) {
                        *v = _mm512_fnmadd_pd(l, uq, *v);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                let at = a.add((i + r) * n + c);
                for (q, v) in row.iter().enumerate() {
                    _mm512_mask_storeu_pd(at.add(8 * q), mask(q), *v);
                }
            }
        }
    }
}

/// Compilers before 1.89 (the AVX-512 intrinsics are not stable there):
/// the level is never AVX-512 ([`crate::matvec::level`]), so these are
/// never called.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
mod avx512 {
    pub(super) use super::none::*;
}

/// The AVX2 kernels (4 lanes with FMA), for CPUs without AVX-512: the same
/// steps in the same order as [`avx512`]'s (so the same bits), in chunks of
/// four; a last partial chunk is read and written with `vmaskmovpd`, which
/// touches no memory outside its mask. The trailing update works in blocks
/// of 6 rows × 8 columns (twelve accumulators, two `U` chunks and a
/// broadcast of the sixteen registers; at 4 × 12 the compiler spills one
/// accumulator, and the chain through the stack made the update 1.6× slower).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Lanes `< min(len, 4)` set, as `vmaskmovpd` and `vblendvpd` read a
    /// mask (no lane for `len = 0`).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn lanes(len: usize) -> __m256i {
        _mm256_cmpgt_epi64(_mm256_set1_epi64x(len.min(4) as i64), _mm256_setr_epi64x(0, 1, 2, 3))
    }

    /// Swaps `x` and `y` (equal lengths), compiled for AVX2 vectors.
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn swap(x: &mut [f64], y: &mut [f64]) {
        x.swap_with_slice(y);
    }

    /// `x[i] /= d`, compiled for AVX2 vectors (at either level: division
    /// is exact to the bit at any width).
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn scale(x: &mut [f64], d: f64) {
        for v in x {
            *v /= d;
        }
    }

    /// `y[i] = fma(-x[i], s, y[i])` over the shorter of the two, compiled
    /// for AVX2 vectors (at either level).
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn axpy(y: &mut [f64], x: &[f64], s: f64) {
        for (v, u) in y.iter_mut().zip(x) {
            *v = (-u).mul_add(s, *v);
        }
    }

    /// As [`avx512`]'s: column `j` of a panel takes the steps before it
    /// and its pivot row is found as the values are stored.
    ///
    /// # Safety
    /// AVX2 and FMA; `col` has `r` elements and `done` `j` columns of `r`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn left_update(col: &mut [f64], done: &[f64], r: usize, j: usize) -> usize {
        if j == 0 || col.len() < r || done.len() < j * r {
            // SAFETY: the CPU as here.
            return unsafe { pivot(&col[..r.min(col.len())], j) };
        }
        for p in 1..j {
            let mut x = col[p];
            for q in 0..p {
                x = (-done[q * r + p]).mul_add(col[q], x);
            }
            col[p] = x;
        }
        let (cp, dp) = (col.as_mut_ptr(), done.as_ptr());
        let mut i = j;
        let mut top = Argmax::new(j);
        // SAFETY: full strips read rows `i..i + 4·C ≤ r`; the last strip's
        // chunks are masked to rows below `r` (chunks past it, mask 0,
        // touch no memory; their addresses are formed with `wrapping_add`).
        unsafe {
            // `C` chunks at a time: `C` independent chains, enough to keep
            // both FMA pipes busy through each one's latency.
            const C: usize = 4;
            while i < r {
                let full = i + 4 * C <= r;
                let k: [__m256i; C] = std::array::from_fn(|c| lanes((r - i).saturating_sub(4 * c)));
                let load = |p: *const f64, c: usize| {
                    if full {
                        _mm256_loadu_pd(p)
                    } else {
                        _mm256_maskload_pd(p, k[c])
                    }
                };
                let mut acc: [__m256d; C] =
                    std::array::from_fn(|c| load(cp.wrapping_add(i + 4 * c), c));
                for q in 0..j {
                    let u = _mm256_set1_pd(*cp.add(q));
                    let d = dp.add(q * r + i);
                    for (c, v) in acc.iter_mut().enumerate() {
                        *v = _mm256_fnmadd_pd(load(d.wrapping_add(4 * c), c), u, *v);
                    }
                }
                for (c, v) in acc.iter().enumerate() {
                    // `vmaskmovpd` stores are slow on AMD (microcoded):
                    // only partial chunks take them.
                    if full {
                        _mm256_storeu_pd(cp.add(i + 4 * c), *v);
                    } else {
                        _mm256_maskstore_pd(cp.wrapping_add(i + 4 * c), k[c], *v);
                    }
                    top.take(*v, k[c]);
                }
                i += 4 * C;
            }
        }
        top.row(col[j].is_nan(), j)
    }

    /// As [`avx512`]'s, with blocks of 4 × 4 transposed in registers.
    ///
    /// # Safety
    /// AVX2; both regions lie in `a` (stride `n`) and `pc` (`w · r`).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel_copy(
        a: *mut f64,
        n: usize,
        k0: usize,
        w: usize,
        r: usize,
        pc: *mut f64,
        to_panel: bool,
    ) {
        // SAFETY: the caller's contract; each block is 4 rows of 4 at
        // `src` and `dst` with the strides given.
        unsafe {
            super::panel_copy_in_blocks::<4>(a, n, k0, w, r, pc, to_panel, |src, ss, dst, ds| {
                let v: [__m256d; 4] = std::array::from_fn(|q| _mm256_loadu_pd(src.add(q * ss)));
                for (q, t) in transpose4(v).iter().enumerate() {
                    _mm256_storeu_pd(dst.add(q * ds), *t);
                }
            })
        }
    }

    /// The transpose of the 4 × 4 block whose rows are `r`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn transpose4(r: [__m256d; 4]) -> [__m256d; 4] {
        // (r0[0], r1[0], r0[2], r1[2]), (r0[1], r1[1], r0[3], r1[3]), the same of r2, r3.
        let t0 = _mm256_unpacklo_pd(r[0], r[1]);
        let t1 = _mm256_unpackhi_pd(r[0], r[1]);
        let t2 = _mm256_unpacklo_pd(r[2], r[3]);
        let t3 = _mm256_unpackhi_pd(r[2], r[3]);
        [
            _mm256_permute2f128_pd::<0x20>(t0, t2),
            _mm256_permute2f128_pd::<0x20>(t1, t3),
            _mm256_permute2f128_pd::<0x31>(t0, t2),
            _mm256_permute2f128_pd::<0x31>(t1, t3),
        ]
    }

    /// As [`avx512`]'s, per chunk of 4 columns.
    ///
    /// # Safety
    /// AVX2 and FMA; `a` holds rows `k0..k0 + PANEL` of `n` elements.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn upper_panel(a: *mut f64, n: usize, k0: usize) {
        const W: usize = super::PANEL;
        let c0 = k0 + W;
        let mut c = c0;
        // SAFETY: the chunks are masked to columns `c..n` of the panel's rows.
        unsafe {
            while c < n {
                let (k, full) = (lanes(n - c), c + 4 <= n);
                let mut v = [_mm256_setzero_pd(); W];
                for (i, x) in v.iter_mut().enumerate() {
                    let at = a.add((k0 + i) * n + c);
                    *x = if full { _mm256_loadu_pd(at) } else { _mm256_maskload_pd(at, k) };
                }
                for i in 1..W {
                    for p in 0..i {
                        let l = _mm256_set1_pd(*a.add((k0 + i) * n + k0 + p));
                        v[i] = _mm256_fnmadd_pd(l, v[p], v[i]);
                    }
                }
                for (i, x) in v.iter().enumerate().skip(1) {
                    let at = a.add((k0 + i) * n + c);
                    if full {
                        _mm256_storeu_pd(at, *x);
                    } else {
                        _mm256_maskstore_pd(at, k, *x);
                    }
                }
                c += 4;
            }
        }
    }

    /// As [`avx512`]'s.
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pivot(col: &[f64], j: usize) -> usize {
        let mut top = Argmax::new(j);
        let len = col.len();
        let mut i = j;
        // SAFETY: each chunk read is masked to `i..len`.
        unsafe {
            while i < len {
                let k = lanes(len - i);
                top.take(_mm256_maskload_pd(col.as_ptr().add(i), k), k);
                i += 4;
            }
        }
        top.row(col.get(j).is_none_or(|x| x.is_nan()), j)
    }

    /// As [`avx512`]'s, over chunks of four.
    struct Argmax {
        best: __m256d,
        at: __m256d,
        rows: __m256i,
    }

    impl Argmax {
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        fn new(j: usize) -> Argmax {
            let rows =
                _mm256_add_epi64(_mm256_setr_epi64x(0, 1, 2, 3), _mm256_set1_epi64x(j as i64));
            let at = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
            Argmax { best: _mm256_set1_pd(-1.0), at, rows }
        }

        /// The next chunk of four rows, lanes outside `k` ignored.
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        fn take(&mut self, v: __m256d, k: __m256i) {
            let v = _mm256_andnot_pd(_mm256_set1_pd(-0.0), v);
            let gt =
                _mm256_and_pd(_mm256_cmp_pd::<_CMP_GT_OQ>(v, self.best), _mm256_castsi256_pd(k));
            self.best = _mm256_blendv_pd(self.best, v, gt);
            self.at = _mm256_blendv_pd(self.at, _mm256_castsi256_pd(self.rows), gt);
            self.rows = _mm256_add_epi64(self.rows, _mm256_set1_epi64x(4));
        }

        #[inline]
        #[target_feature(enable = "avx2,fma")]
        fn row(&self, first_is_nan: bool, j: usize) -> usize {
            if first_is_nan {
                return j;
            }
            let (mut bests, mut ats) = ([0.0f64; 4], [0i64; 4]);
            // SAFETY: four lanes into four elements each.
            unsafe {
                _mm256_storeu_pd(bests.as_mut_ptr(), self.best);
                _mm256_storeu_pd(ats.as_mut_ptr().cast(), self.at);
            }
            let top = bests.iter().copied().fold(-1.0, f64::max);
            if top < 0.0 {
                return j;
            }
            let first = (0..4).filter(|&l| bests[l] == top).map(|l| ats[l]).min();
            first.map_or(j, |p| p as usize)
        }
    }

    /// As [`avx512`]'s, and `L₂₁` packed as well as `U₁₂`: per group of
    /// [`super::L_GROUP`] rows, the group's entries of each column side by
    /// side, so that a block reads its broadcasts from one pointer (read
    /// in place, six row pointers and the `U` pointer do not fit the
    /// general registers and spill).
    ///
    /// # Safety
    /// AVX2; `a` holds `m × n` elements, `k0 + w ≤ min(m, n)`,
    /// `w ≤ PANEL`; `u` holds `super::panel_len(m, n)` elements.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pack(a: *mut f64, m: usize, n: usize, k0: usize, w: usize, u: *mut f64) {
        const G: usize = super::L_GROUP;
        let c0 = k0 + w;
        if c0 >= n || c0 >= m {
            return;
        }
        let us = super::packed_stride(n - c0);
        let l = u.wrapping_add(super::PANEL * super::packed_stride(n));
        // SAFETY: rows `k0..c0` of `a`, columns `c0..n`, into `w` rows of
        // `us ≥ n - c0` elements of `u`; rows `c0..m`, columns `k0..c0`
        // into `l` (after the largest `U`, `PANEL` rows of
        // `packed_stride(n)`): group `g` at `g·G·w`, entry `(p, r)` at
        // `p·G + r`, below `(m - c0).next_multiple_of(G) · w ≤
        // PANEL · m.next_multiple_of(G)` elements past `l` (within
        // `panel_len`).
        unsafe {
            for p in 0..w {
                std::ptr::copy_nonoverlapping(a.add((k0 + p) * n + c0), u.add(p * us), n - c0);
            }
            for x in 0..m - c0 {
                let (g, r) = (x / G, x % G);
                let src = a.add((c0 + x) * n + k0);
                let dst = l.add(g * G * w + r);
                for p in 0..w {
                    *dst.add(p * G) = *src.add(p);
                }
            }
        }
    }

    /// As [`avx512`]'s, in blocks of up to 6 rows × 8 columns, with the
    /// operands packed by [`pack`].
    ///
    /// # Safety
    /// As [`pack`], after it.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn update(
        a: *mut f64,
        m: usize,
        n: usize,
        k0: usize,
        w: usize,
        u: *const f64,
    ) {
        // SAFETY: the caller's contract.
        unsafe { update_rows(a, m, n, k0, w, u, None) }
    }

    /// [`update`] of the first panel (`k0 = 0`) whose trailing rows are
    /// read from `src`, row `i` from row `perm[i]`, and written to `a`:
    /// [`super::factor_copy`]'s update, which so needs no copy of `src`
    /// first.
    ///
    /// # Safety
    /// As [`update`] with `k0 = 0`; `src` holds `m × n` elements and
    /// `perm[c0..m]` (`c0 = w`) are rows below `m`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn update_from(
        src: *const f64,
        perm: *const i64,
        a: *mut f64,
        m: usize,
        n: usize,
        w: usize,
        u: *const f64,
    ) {
        // SAFETY: the caller's contract.
        unsafe { update_rows(a, m, n, 0, w, u, Some((src, perm))) }
    }

    /// [`update`], each block's rows loaded from `a` itself or, with
    /// `from = (src, perm)`, from row `perm[i]` of `src` for row `i`.
    ///
    /// # Safety
    /// As [`update`] (and [`update_from`] when `from` is given).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn update_rows(
        a: *mut f64,
        m: usize,
        n: usize,
        k0: usize,
        w: usize,
        u: *const f64,
        from: Option<(*const f64, *const i64)>,
    ) {
        const G: usize = super::L_GROUP;
        let c0 = k0 + w;
        if c0 >= n || c0 >= m {
            return;
        }
        let us = super::packed_stride(n - c0);
        let l = u.wrapping_add(super::PANEL * super::packed_stride(n));
        // SAFETY: every block lies in rows `c0..m`, columns `c0..n` of `a`
        // (its last chunk masked to the row's end); its `L` entries in its
        // group of `l`; the packed `U₁₂` at rows `0..w`, whole chunks from
        // column `c - c0`: a row's last chunk ends at most at `n - c0`
        // rounded up to 4, within its `us` elements.
        unsafe {
            let mut i = c0;
            while i < m {
                let rows = (m - i).min(G);
                let lg = l.add((i - c0) / G * G * w);
                let mut c = c0;
                while c < n {
                    let cols = (n - c).min(8);
                    let tail = (cols % 4 != 0).then(|| lanes(cols % 4));
                    // Row `r` of the block is loaded from here (and stored
                    // at `a`'s row `i + r`).
                    let load = |r: usize| match from {
                        Some((src, perm)) => src.add(*perm.add(i + r) as usize * n + c),
                        None => a.add((i + r) * n + c),
                    };
                    macro_rules! go {
                        ($r:literal, $q:literal) => {
                            block::<$r, $q>(
                                a.add(i * n + c),
                                n,
                                load,
                                lg,
                                w,
                                (u.add(c - c0), us),
                                tail,
                            )
                        };
                    }
                    match (rows, cols > 4) {
                        (6, true) => go!(6, 2),
                        (5, true) => go!(5, 2),
                        (4, true) => go!(4, 2),
                        (3, true) => go!(3, 2),
                        (2, true) => go!(2, 2),
                        (1, true) => go!(1, 2),
                        (6, false) => go!(6, 1),
                        (5, false) => go!(5, 1),
                        (4, false) => go!(4, 1),
                        (3, false) => go!(3, 1),
                        (2, false) => go!(2, 1),
                        _ => go!(1, 1),
                    }
                    c += cols;
                }
                i += rows;
            }
        }
    }

    /// The block of `R` rows at `at` (stride `n`), `Q` chunks of 4 columns
    /// (the last masked by `tail` if any; `vmaskmovpd` stores are slow on
    /// AMD, microcoded, so full chunks do without): `A[r][c] -= Σ_p L[r][p] · U[p][c]`, one
    /// fused multiply-add per `p` in order; `L[r][p]` at `l[p·L_GROUP + r]`,
    /// `U`'s rows read whole from `u` at stride `us` (lanes past the block
    /// are computed, not stored). Row `r` is loaded from `load(r)` (its
    /// own place in `a`, or the row of the source it is read from) and
    /// stored at `at + r·n`.
    ///
    /// # Safety
    /// As [`update`], for this block; `load(r)` points to the block's
    /// columns of a readable row.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block<const R: usize, const Q: usize>(
        at: *mut f64,
        n: usize,
        load: impl Fn(usize) -> *const f64,
        l: *const f64,
        w: usize,
        (u, us): (*const f64, usize),
        tail: Option<__m256i>,
    ) {
        const G: usize = super::L_GROUP;
        // SAFETY: the caller's contract: the block and its operands lie in
        // `a` (or, loaded, in the rows `load` gives), `l` and `u`.
        unsafe {
            let mut acc = [[_mm256_setzero_pd(); Q]; R];
            for (r, row) in acc.iter_mut().enumerate() {
                let at = load(r);
                for (q, v) in row.iter_mut().enumerate() {
                    *v = match tail {
                        Some(k) if q + 1 == Q => _mm256_maskload_pd(at.add(4 * q), k),
                        _ => _mm256_loadu_pd(at.add(4 * q)),
                    };
                }
            }
            for p in 0..w {
                let (urow, lp) = (u.add(p * us), l.add(p * G));
                let mut u = [_mm256_setzero_pd(); Q];
                for (q, v) in u.iter_mut().enumerate() {
                    *v = _mm256_loadu_pd(urow.add(4 * q));
                }
                for (r, row) in acc.iter_mut().enumerate() {
                    let l = _mm256_broadcast_sd(&*lp.add(r));
                    for (v, &uq) in row.iter_mut().zip(&u) {
                        *v = _mm256_fnmadd_pd(l, uq, *v);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                let at = at.add(r * n);
                for (q, v) in row.iter().enumerate() {
                    match tail {
                        Some(k) if q + 1 == Q => _mm256_maskstore_pd(at.add(4 * q), k, *v),
                        _ => _mm256_storeu_pd(at.add(4 * q), *v),
                    }
                }
            }
        }
    }
}

/// Other targets: never available, callers use faer.
#[cfg(not(target_arch = "x86_64"))]
mod imp {
    pub(super) use super::none::*;
}

/// The kernels where [`imp`] has none: never called (`available` is false).
#[allow(dead_code)]
mod none {
    pub(crate) fn available() -> bool {
        false
    }
    pub(crate) unsafe fn scale(_: &mut [f64], _: f64) {}
    pub(crate) unsafe fn swap(x: &mut [f64], y: &mut [f64]) {
        x.swap_with_slice(y);
    }
    pub(crate) unsafe fn axpy(_: &mut [f64], _: &[f64], _: f64) {}
    pub(crate) unsafe fn pivot(_: &[f64], j: usize) -> usize {
        j
    }
    pub(crate) unsafe fn left_update(_: &mut [f64], _: &[f64], _: usize, j: usize) -> usize {
        j
    }
    pub(crate) unsafe fn upper_panel(_: *mut f64, _: usize, _: usize) {}
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn panel_copy(
        _: *mut f64,
        _: usize,
        _: usize,
        _: usize,
        _: usize,
        _: *mut f64,
        _: bool,
    ) {
    }
    pub(crate) unsafe fn pack(_: *mut f64, _: usize, _: usize, _: usize, _: usize, _: *mut f64) {}
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn update_from(
        _: *const f64,
        _: *const i64,
        _: *mut f64,
        _: usize,
        _: usize,
        _: usize,
        _: *const f64,
    ) -> bool {
        false
    }
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn update(
        _: *mut f64,
        _: usize,
        _: usize,
        _: usize,
        _: usize,
        _: *const f64,
    ) {
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic matrix whose columns need pivoting (no diagonal
    /// dominance), entries in (-1, 1).
    fn data(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..m * n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// `max |A[perm[i]][j] - (L·U)[i][j]|` of a packed row-major factor.
    fn residual(a: &[f64], f: &[f64], perm: &[i64], m: usize, n: usize) -> f64 {
        let k = m.min(n);
        let mut worst = 0.0f64;
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..=i.min(j).min(k - 1) {
                    let l = if p == i { 1.0 } else { f[i * n + p] };
                    s += l * f[p * n + j];
                }
                worst = worst.max((s - a[perm[i] as usize * n + j]).abs());
            }
        }
        worst
    }

    const SHAPES: [(usize, usize); 12] = [
        (17, 17),
        (24, 40),
        (40, 24),
        (33, 33),
        (64, 64),
        (100, 100),
        (129, 77),
        (77, 129),
        (200, 200),
        (203, 190),
        (190, 203),
        (320, 320),
    ];

    #[test]
    fn the_panelled_factor_reconstructs_and_pivots_as_the_unblocked_loop() {
        let mut factors = vec![];
        crate::matvec::at_each_level(|| factors.push(factors_at_this_level()));
        // Every level gives the same bits.
        for f in factors.windows(2) {
            assert!(f[0].iter().zip(&f[1]).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }

    /// The checks of the test above at this thread's level; the factors.
    fn factors_at_this_level() -> Vec<f64> {
        assert!(imp::available());
        let mut all = vec![];
        // Under Miri (an interpreter; it checks the kernels' raw loads and
        // stores), two small shapes: two panels each, masked tails.
        let shapes: &[(usize, usize)] = if cfg!(miri) { &[(17, 17), (24, 19)] } else { &SHAPES };
        for (s, &(m, n)) in shapes.iter().enumerate() {
            let a = data(m, n, s as u64 + 3);
            let k = m.min(n);
            let (mut f, mut piv, mut perm, mut panel) =
                (a.clone(), vec![0; k], vec![0; m], vec![0.0; panel_len(m, n)]);
            assert!(factor(&mut f, m, n, &mut piv, &mut perm, &mut panel), "{m}x{n}");
            let r = residual(&a, &f, &perm, m, n);
            assert!(r < 1e-13 * m.max(n) as f64, "{m}x{n}: residual {r:e}");
            for i in 0..m {
                for p in 0..i.min(k) {
                    assert!(f[i * n + p].abs() <= 1.0, "{m}x{n}: |L[{i}][{p}]| > 1");
                }
            }
            // The same pivots as the unblocked loop, values to rounding.
            let (mut g, mut piv0, mut perm0) = (a.clone(), vec![0; k], vec![0; m]);
            super::super::small::lu_in_place(&mut g, m, n, &mut piv0, &mut perm0);
            assert_eq!(piv, piv0, "{m}x{n}");
            assert_eq!(perm, perm0, "{m}x{n}");
            let scale = f.iter().fold(0.0f64, |s, x| s.max(x.abs()));
            for (x, y) in f.iter().zip(&g) {
                assert!((x - y).abs() <= 1e-11 * scale, "{m}x{n}: {x} vs {y}");
            }
            // The same bits on a second call.
            let (mut f2, mut piv2, mut perm2) = (a.clone(), vec![0; k], vec![0; m]);
            assert!(factor(&mut f2, m, n, &mut piv2, &mut perm2, &mut panel));
            assert!(f.iter().zip(&f2).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{n}");
            // From the source into a buffer holding other values (its
            // first update reads the rows of `a`): the same bits.
            let (mut f3, mut piv3, mut perm3) = (vec![f64::NAN; m * n], vec![0; k], vec![0; m]);
            assert!(factor_copy(&a, &mut f3, m, n, &mut piv3, &mut perm3, &mut panel));
            assert!(f.iter().zip(&f3).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{n} copied");
            assert_eq!((&piv, &perm), (&piv3, &perm3), "{m}x{n} copied");
            all.extend(f);
        }
        all
    }

    #[test]
    fn ties_go_to_the_first_row_and_nan_never_wins() {
        crate::matvec::at_each_level(ties_and_nan_at_this_level);
    }

    fn ties_and_nan_at_this_level() {
        let (m, n) = (40, 40);
        let mut a = data(m, n, 5);
        // Column 0: a tie of magnitude 2 at rows 5, 9 and 30 (entries are
        // below 1 elsewhere): the first wins. NaN is checked on the search
        // alone (a NaN in the column makes the factor NaN).
        for (i, v) in [(9, -2.0), (5, 2.0), (30, 2.0)] {
            a[i * n] = v;
        }
        let (mut f, mut piv, mut perm) = (a.clone(), vec![0; n], vec![0; m]);
        assert!(factor(&mut f, m, n, &mut piv, &mut perm, &mut vec![0.0; panel_len(40, 40)]));
        assert_eq!(piv[0], 5);
        let mut col: Vec<f64> = (0..m).map(|i| a[i * n]).collect();
        col[12] = f64::NAN;
        col[33] = 7.0;
        col[34] = -7.0;
        // SAFETY: `available` checked above.
        assert_eq!(unsafe { imp::pivot(&col, 0) }, 33);
        assert_eq!(unsafe { imp::pivot(&col, 34) }, 34);
        col[20] = f64::NAN;
        assert_eq!(unsafe { imp::pivot(&col, 20) }, 20, "a NaN first stays");
        let nans = vec![f64::NAN; 11];
        assert_eq!(unsafe { imp::pivot(&nans, 3) }, 3);
    }

    #[test]
    fn zero_and_non_finite_pivots_are_left_to_the_unblocked_loop() {
        crate::matvec::at_each_level(zero_and_non_finite_at_this_level);
    }

    fn zero_and_non_finite_at_this_level() {
        let (m, n) = (40, 40);
        for (col, value) in [(0, 0.0), (21, 0.0), (39, 0.0), (5, f64::NAN), (30, f64::INFINITY)] {
            let mut a = data(m, n, 7);
            for i in 0..m {
                a[i * n + col] = if value == 0.0 || i == 3 { value } else { a[i * n + col] };
            }
            let (mut f, mut piv, mut perm) = (a.clone(), vec![0; n], vec![0; m]);
            let ok = factor(&mut f, m, n, &mut piv, &mut perm, &mut vec![0.0; panel_len(40, 40)]);
            assert!(!ok, "column {col} = {value}");
        }
        // Shapes it does not take.
        let (mut f, mut piv, mut perm) = (vec![1.0; 16 * 40], vec![0; 16], vec![0; 16]);
        assert!(!factor(&mut f, 16, 40, &mut piv, &mut perm, &mut vec![0.0; panel_len(40, 40)]));
        assert!(!takes(321, 100) && !takes(16, 300) && takes(17, 17) == imp::available());
    }
}
