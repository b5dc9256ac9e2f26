//! Matrix–vector products in `f64` with AVX-512 or AVX2, for the products
//! a loop repeats against one cached matrix.
//!
//! A loop body such as an RK4 step (`tanh(A x + b)`, four times a step) or
//! its reverse (`gᵀ A`) multiplies the same matrix by a new vector on every
//! step, each product depending on the one before. The matrix then lives in
//! L2 (128 KiB at 128 × 128), and the product's time is the time to stream it
//! into the core. In a chain of dependent products on one thread at
//! 128 × 128, faer's kernels (AVX2 through `pulp` on stable) took 1.1–1.3 µs
//! for `A x` and 1.5–1.8 µs for `xᵀ A` on an AMD EPYC Zen 5, these
//! 0.87–0.92 and 0.69–0.70 µs with AVX-512; from 32 × 32 to 512 × 512 they
//! took 0.24–0.91 of faer's time (`BENCHMARKS.md`, session 16). On a Zen 3
//! without AVX-512, W9's loop at d = 128 spent 61% of its time in faer's
//! two kernels and ran in 5.55 ms; with the AVX2 kernels 5.11 ms, and with
//! the matrix packed in panels ([`pack_panels`]) 4.24 ms (`BENCHMARKS.md`,
//! session 24). The micro interpreter runs a loop's `A x` against a fixed
//! `A` as `xᵀ Aᵀ`, `Aᵀ` packed once per loop, since [`gevm`] is the faster
//! of the two.
//!
//! - [`gemv`] (`y = A x`, `A` row-major): eight rows at a time, each row's
//!   sum one FMA chain over the row's chunks (8 lanes with AVX-512, 4 with
//!   AVX2), then a fixed reduction tree. Successive calls on a thread walk
//!   the rows in alternate directions, so the rows the last call read last
//!   are read first, from L1; rows are independent, so the direction never
//!   changes a bit.
//! - [`gevm`] (`y = xᵀ A`): the result of one panel of columns (128 with
//!   AVX-512 in sixteen registers, 48 with AVX2 in twelve) stays in
//!   registers while the panel's rows stream past once, each output a
//!   chain over the rows in order — the same chain, so the same bits, at
//!   either width.
//!
//! Both give the same bits on every call, on every thread and for every
//! direction; they differ from faer's in the last bits (another order of
//! the same sums), and `gemv`'s AVX-512 and AVX2 sums differ from each
//! other in the last bits. They return `false`, writing nothing, on a CPU
//! with neither AVX-512 nor AVX2 and FMA (the AVX-512 kernels also need a
//! compiler of 1.89 or later, where their intrinsics are stable), and
//! callers use faer there.

/// `y = A x` for `A` of `y.len()` rows and `x.len()` columns, row-major
/// with row stride `lda`; `false` (and `y` untouched) when this CPU has
/// no kernel or the slices do not hold the shapes.
pub(crate) fn gemv(a: &[f64], lda: usize, x: &[f64], y: &mut [f64]) -> bool {
    let (m, k) = (y.len(), x.len());
    if !fits(a.len(), m, k, lda) || !imp::available() {
        return false;
    }
    if m == 0 {
        return true;
    }
    if k == 0 {
        // A sum of no terms (the kernel needs a chunk).
        y.fill(0.0);
        return true;
    }
    let reverse = FLIP.with(|f| {
        let r = f.get();
        f.set(!r);
        r
    });
    // SAFETY: `available` checked the CPU's features; `fits` checked that
    // every row `i < m` spans `a[i·lda .. i·lda + k]` within `a`, and the
    // kernel reads only those, `x[..k]` and writes `y[..m]`.
    unsafe { imp::gemv(a.as_ptr(), lda, m, k, x.as_ptr(), y.as_mut_ptr(), reverse) };
    true
}

/// `y = xᵀ A` for `A` of `x.len()` rows and `y.len()` columns, row-major
/// with row stride `lda`; `false` (and `y` untouched) when this CPU has
/// no kernel, the slices do not hold the shapes, or [`gevm_takes`]
/// refuses the shape.
pub(crate) fn gevm(x: &[f64], a: &[f64], lda: usize, y: &mut [f64]) -> bool {
    let (m, n) = (x.len(), y.len());
    if !fits(a.len(), m, n, lda) || !gevm_takes(m, n) {
        return false;
    }
    // SAFETY: as in `gemv`: rows `i < m` of `n` elements at stride `lda` lie
    // within `a`; the kernel reads them and `x[..m]` and writes `y[..n]`.
    unsafe { imp::gevm(x.as_ptr(), a.as_ptr(), lda, m, n, y.as_mut_ptr()) };
    true
}

/// Whether [`gevm`] runs `xᵀ A` for `A` of `rows × cols` on this CPU: at
/// least 8 columns (a narrower result is one FMA chain over all the rows,
/// eight times the latency of [`gemv`]'s chains, so faer takes it), and
/// not both wider than a panel and larger than [`GEVM_PANELLED`].
pub(crate) fn gevm_takes(rows: usize, cols: usize) -> bool {
    imp::available() && cols >= 8 && (cols <= 128 || rows.saturating_mul(cols) <= GEVM_PANELLED)
}

/// The columns of one panel of [`gevm`] on this CPU (128 with AVX-512, 48
/// with AVX2; 0 where no kernel runs), for [`pack_panels`].
pub(crate) fn panel_width() -> usize {
    imp::panel_width()
}

/// Elements of slack a buffer of packed panels carries beyond its `k · n`
/// so that the panels can start on a 64-byte boundary ([`aligned`]).
///
/// A heap buffer of 128 KiB or more comes from `mmap` through glibc's
/// `malloc`, 16 bytes past a page boundary: every 64-byte load of a panel
/// read from there straddles two cache lines. On an Intel Xeon (Sapphire
/// Rapids, AVX-512) a dependent chain of 128 × 128 products took 2.2 µs a
/// product at that offset and 1.6 µs from a 64-byte boundary
/// (`BENCHMARKS.md`, session 31).
pub(crate) const PANEL_PAD: usize = 7;

/// `buf` from its first element on a 64-byte boundary (at most
/// [`PANEL_PAD`] elements in): where [`pack_panels`] writes and
/// [`gevm_panels`] reads the panels of a buffer of `k · n + PANEL_PAD`
/// elements. The offset depends only on the buffer's address, so packing
/// and reading the same buffer agree.
pub(crate) fn aligned(buf: &[f64]) -> &[f64] {
    &buf[aligned_offset(buf.as_ptr(), buf.len())..]
}

/// [`aligned`] for writing.
pub(crate) fn aligned_mut(buf: &mut [f64]) -> &mut [f64] {
    let off = aligned_offset(buf.as_ptr(), buf.len());
    &mut buf[off..]
}

/// Elements from `p` to the first 64-byte boundary, within `len` and
/// [`PANEL_PAD`].
fn aligned_offset(p: *const f64, len: usize) -> usize {
    p.align_offset(64).min(PANEL_PAD).min(len)
}

/// Copies the `k × n` matrix `M` (`src` if `!transposed`, else `srcᵀ`,
/// `src` stored row-major) into `out` panel by panel: the columns
/// `j0 .. j0 + w` of each panel of `width` columns (the last may be
/// narrower) as a row-major `k × w` block at `out[j0 · k ..]`. [`gevm`]
/// then streams each panel as one contiguous block rather than `k` rows at
/// a stride, which its prefetch follows better (AVX2, 128 × 128: 1.33 µs
/// a product against 1.65 µs at a stride, in a dependent chain); `false`
/// (nothing written) when the slices do not hold the shapes.
pub(crate) fn pack_panels(
    src: &[f64],
    (k, n): (usize, usize),
    transposed: bool,
    width: usize,
    out: &mut [f64],
) -> bool {
    if width == 0 || src.len() < k * n || out.len() < k * n {
        return false;
    }
    for j0 in (0..n).step_by(width) {
        let w = width.min(n - j0);
        let panel = &mut out[j0 * k..(j0 + w) * k];
        for (i, row) in panel.chunks_exact_mut(w).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                // M[i, j0 + j]: src[i, j0 + j], or src[j0 + j, i] read transposed.
                *v = if transposed { src[(j0 + j) * k + i] } else { src[i * n + j0 + j] };
            }
        }
    }
    true
}

/// `y = xᵀ M` for `M` of `x.len()` rows and `y.len()` columns packed by
/// [`pack_panels`] with `width`: [`gevm`] on each panel, so the same
/// bits as [`gevm`] on `M` unpacked; `false` (nothing written) where
/// [`gevm_takes`] refuses the shape or the slice is short.
pub(crate) fn gevm_panels(x: &[f64], panels: &[f64], width: usize, y: &mut [f64]) -> bool {
    gevm_takes(x.len(), y.len()) && gevm_panel_columns(x, panels, width, y.len(), 0, y)
}

/// `y = xᵀ M[:, j0 .. j0 + y.len()]` for `M` of `x.len()` rows and `n`
/// columns packed by [`pack_panels`] with `width`: each column the same
/// chain over the rows as in [`gevm_panels`], so its bits, whatever the
/// columns asked for; `false` (nothing written) on a CPU without a kernel
/// or where the columns or the slice do not fit.
pub(crate) fn gevm_panel_columns(
    x: &[f64],
    panels: &[f64],
    width: usize,
    n: usize,
    j0: usize,
    y: &mut [f64],
) -> bool {
    let k = x.len();
    let j1 = j0 + y.len();
    if width == 0 || j1 > n || panels.len() < k * n || !imp::available() {
        return false;
    }
    if k == 0 {
        y.fill(0.0);
        return true;
    }
    let mut j = j0;
    while j < j1 {
        // The panel holding column `j`: columns `p0 .. p0 + w`, a row-major
        // `k × w` block at `p0 · k`; this call's columns of it end at `end`.
        let p0 = j / width * width;
        let w = width.min(n - p0);
        let end = (p0 + w).min(j1);
        // SAFETY: the block's rows `i < k` span `w` elements from
        // `p0 · k + i · w`, within `panels` (`(p0 + w) · k ≤ n · k`); the
        // columns `j - p0 .. end - p0` lie in a row; `x` has `k` and the
        // `end - j` outputs from `j - j0` lie in `y`.
        unsafe {
            imp::gevm(
                x.as_ptr(),
                panels.as_ptr().add(p0 * k + (j - p0)),
                w,
                k,
                end - j,
                y.as_mut_ptr().add(j - j0),
            )
        };
        j = end;
    }
    true
}

/// The largest matrix (elements) that [`gevm`] takes in several panels of
/// 128 columns: each panel walks every row again, at a stride, which from
/// L2 still beat faer (0.65 of its time at 256 × 256, 0.91 at 512 × 512)
/// but from memory did not (1.42 at 2048 × 2048).
const GEVM_PANELLED: usize = 1 << 18;

/// A product hook of the matmul paths: [`product`] for `f64`,
/// [`no_product`] for `f32`.
pub(crate) type ProductFn<T> =
    fn(&[T], (usize, usize, bool), &[T], (usize, usize, bool), &mut [T]) -> bool;

/// `f32` has no kernel here: every product goes to faer.
pub(crate) fn no_product(
    _: &[f32],
    _: (usize, usize, bool),
    _: &[f32],
    _: (usize, usize, bool),
    _: &mut [f32],
) -> bool {
    false
}

/// `op(a) · op(b)` into `out` when it is a matrix–vector product (`m = 1`
/// or `n = 1`) that [`gemv`] or [`gevm`] runs, `false` (nothing written)
/// otherwise. `a` is stored `ar × ac` row-major and read transposed when
/// `ta`; likewise `b`. A vector operand is contiguous whichever way it is
/// stored, and a transposed matrix against a vector is the other kernel.
pub(crate) fn product(
    a: &[f64],
    (ar, ac, ta): (usize, usize, bool),
    b: &[f64],
    (br, bc, tb): (usize, usize, bool),
    out: &mut [f64],
) -> bool {
    let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
    let (kb, n) = if tb { (bc, br) } else { (br, bc) };
    if kb != k || out.len() != m * n || a.len() < ar * ac || b.len() < br * bc || k == 0 {
        return false;
    }
    let (a, b) = (&a[..ar * ac], &b[..br * bc]);
    if n == 1 {
        if ta {
            gevm(b, a, ac, out)
        } else {
            gemv(a, ac, b, out)
        }
    } else if m == 1 {
        if tb {
            gemv(b, bc, a, out)
        } else {
            gevm(a, b, bc, out)
        }
    } else {
        false
    }
}

/// The smallest matrix (elements) whose matrix–vector products
/// [`gevm_split`] and [`gemv_split`] share between threads: 512 KiB of
/// `f64` (256 × 256). From there a product takes 4 µs or more (from L2 at
/// 256 × 256, from L3 at 512 × 512 and up) and two cores each streaming
/// part of the matrix save more than the fork-join costs from a rayon
/// worker (about 1 µs); at 128 × 128 (0.7 µs a product) the fork-join
/// costs more than it saves (W9's program at d = 128: 2.0–2.2 ms on one
/// thread, 3.2–5.8 ms split; at d = 256: 9.6–9.8 ms, 7.1–7.9 ms split).
pub(crate) const GEVM_SPLIT: usize = 1 << 16;

/// `y = xᵀ A` as [`gevm`], the columns of `y` cut into blocks (multiples
/// of 8 columns, each small enough for [`gevm`]) computed in parallel with
/// rayon when `parallel`, one after another otherwise, when `A` has at
/// least [`GEVM_SPLIT`] elements; `false` (nothing written) otherwise.
/// Each output is the same chain over the rows as in [`gevm`], so the bits
/// depend neither on the blocks nor on the threads.
pub(crate) fn gevm_split(x: &[f64], a: &[f64], lda: usize, y: &mut [f64], parallel: bool) -> bool {
    use rayon::prelude::*;
    let (m, n) = (x.len(), y.len());
    if m.saturating_mul(n) < GEVM_SPLIT || n < 16 || !fits(a.len(), m, n, lda) {
        return false;
    }
    // At least two blocks, and each within what gevm takes.
    let mut w = (n / 2).div_ceil(8) * 8;
    while w > 8 && !gevm_takes(m, w) {
        w = (w / 2).div_ceil(8) * 8;
    }
    if (0..n).step_by(w).any(|c| !gevm_takes(m, w.min(n - c))) {
        return false;
    }
    let block = |(j, block): (usize, &mut [f64])| gevm(x, &a[j * w..], lda, block);
    let done: Vec<bool> = if parallel {
        y.par_chunks_mut(w).enumerate().map(block).collect()
    } else {
        y.chunks_mut(w).enumerate().map(block).collect()
    };
    done.iter().all(|&d| d)
}

/// `y = A x` as [`gemv`], the rows of `y` cut into two halves computed in
/// parallel with rayon, when `A` has at least [`GEVM_SPLIT`] elements;
/// `false` (nothing written) otherwise. Rows are independent, so the bits
/// do not depend on the split.
pub(crate) fn gemv_split(a: &[f64], lda: usize, x: &[f64], y: &mut [f64]) -> bool {
    let (m, k) = (y.len(), x.len());
    if m.saturating_mul(k) < GEVM_SPLIT || m < 16 || !fits(a.len(), m, k, lda) || !imp::available()
    {
        return false;
    }
    let half = m / 2;
    let (top, bottom) = y.split_at_mut(half);
    let (t, b) = rayon::join(|| gemv(a, lda, x, top), || gemv(&a[half * lda..], lda, x, bottom));
    t && b
}

/// Whether `rows` rows of `cols` elements at stride `lda` lie within `len`.
fn fits(len: usize, rows: usize, cols: usize, lda: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    lda >= cols
        && (rows - 1).checked_mul(lda).and_then(|s| s.checked_add(cols)).is_some_and(|e| e <= len)
}

thread_local! {
    /// The direction of this thread's next [`gemv`] (rows from the last).
    static FLIP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The instruction set level of this thread's kernels (shared with the
/// panelled LU): what the CPU has, or in tests a level forced per thread.
#[cfg(target_arch = "x86_64")]
pub(crate) use imp::{level, Level};

#[cfg(test)]
pub(crate) use imp::at_each_level;

/// The kernels this CPU runs, chosen once: AVX-512 where the CPU has it,
/// else AVX2 with FMA, else none (callers use faer).
#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{avx2, avx512};

    /// An instruction set the kernels are compiled for.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Level {
        /// 4-lane `f64` vectors with FMA.
        Avx2,
        /// 8-lane `f64` vectors with masks.
        Avx512,
    }

    /// The best level this CPU has (detected once).
    fn detected() -> Option<Level> {
        static LEVEL: std::sync::OnceLock<Option<Level>> = std::sync::OnceLock::new();
        *LEVEL.get_or_init(|| {
            if avx512::detected() {
                Some(Level::Avx512)
            } else if avx2::detected() {
                Some(Level::Avx2)
            } else {
                None
            }
        })
    }

    #[cfg(test)]
    thread_local! {
        /// A level the tests of this thread run instead of the detected one.
        static FORCED: std::cell::Cell<Option<Level>> = const { std::cell::Cell::new(None) };
    }

    /// The level the kernels run at on this thread.
    pub(crate) fn level() -> Option<Level> {
        #[cfg(test)]
        if let Some(l) = FORCED.with(|f| f.get()) {
            return Some(l);
        }
        detected()
    }

    /// Whether this thread runs at a level forced below the detected one
    /// (threads that `f` of [`at_each_level`] hands work to, such as rayon's,
    /// run at the detected level).
    #[cfg(test)]
    pub(crate) fn forced_below() -> bool {
        FORCED.with(|f| f.get()).is_some_and(|l| Some(l) != detected())
    }

    /// Every level this CPU runs, each with `f` run at it on this thread.
    #[cfg(test)]
    pub(crate) fn at_each_level(mut f: impl FnMut()) {
        let all = match detected() {
            Some(Level::Avx512) => vec![Level::Avx512, Level::Avx2],
            Some(Level::Avx2) => vec![Level::Avx2],
            None => vec![],
        };
        for l in all {
            FORCED.with(|c| c.set(Some(l)));
            f();
            FORCED.with(|c| c.set(None));
        }
    }

    /// Whether this CPU runs the kernels.
    pub(super) fn available() -> bool {
        level().is_some()
    }

    /// The columns of one `gevm` panel at this thread's level.
    pub(super) fn panel_width() -> usize {
        match level() {
            Some(Level::Avx512) => 128,
            Some(Level::Avx2) => avx2::PANEL,
            None => 0,
        }
    }

    /// # Safety
    /// As `avx512::gemv`, with the features of [`level`].
    pub(super) unsafe fn gemv(
        a: *const f64,
        lda: usize,
        m: usize,
        k: usize,
        x: *const f64,
        y: *mut f64,
        reverse: bool,
    ) {
        // SAFETY: `level` names features this CPU has; the caller upholds
        // the shapes.
        unsafe {
            match level() {
                Some(Level::Avx512) => avx512::gemv(a, lda, m, k, x, y, reverse),
                Some(Level::Avx2) => avx2::gemv(a, lda, m, k, x, y, reverse),
                None => {}
            }
        }
    }

    /// # Safety
    /// As `avx512::gevm`, with the features of [`level`].
    pub(super) unsafe fn gevm(
        x: *const f64,
        a: *const f64,
        lda: usize,
        m: usize,
        n: usize,
        y: *mut f64,
    ) {
        // SAFETY: as in `gemv`.
        unsafe {
            match level() {
                Some(Level::Avx512) => avx512::gevm(x, a, lda, m, n, y),
                Some(Level::Avx2) => avx2::gevm(x, a, lda, m, n, y),
                None => {}
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
mod avx512 {
    use std::arch::x86_64::*;

    /// Whether this CPU has the features the kernels need.
    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
    }

    /// The mask of the first `r` lanes of a chunk (all eight for `r = 0`:
    /// a full last chunk).
    fn tail_mask(cols: usize) -> __mmask8 {
        match cols % 8 {
            0 => 0xff,
            r => ((1u16 << r) - 1) as __mmask8,
        }
    }

    /// # Safety
    /// AVX-512 F/DQ, AVX2 and FMA; rows `i < m` of `a` span `k` readable
    /// elements at stride `lda`, `x` has `k` and `y` has `m`; `m, k > 0`.
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    pub(super) unsafe fn gemv(
        a: *const f64,
        lda: usize,
        m: usize,
        k: usize,
        x: *const f64,
        y: *mut f64,
        reverse: bool,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let chunks = k.div_ceil(8);
            let tail = tail_mask(k);
            // The vector, chunk by chunk, zero past its end (read from L1 by
            // every row; at most 128 elements are kept, longer ones are read
            // from `x` itself).
            let mut xs = [_mm512_setzero_pd(); 16];
            let held = chunks <= 16;
            if held {
                for (c, v) in xs.iter_mut().enumerate().take(chunks) {
                    *v = load(x.add(8 * c), c + 1 == chunks, tail);
                }
            }
            // Groups of eight rows, then single rows; backwards when `reverse`.
            let groups = m / 8;
            let steps = groups + (m - 8 * groups);
            for s in 0..steps {
                let s = if reverse { steps - 1 - s } else { s };
                if s < groups {
                    rows::<8>(a, lda, 8 * s, chunks, tail, &xs, held, x, y);
                } else {
                    rows::<1>(a, lda, 8 * groups + (s - groups), chunks, tail, &xs, held, x, y);
                }
            }
        }
    }

    /// A full chunk, or the masked last one (zero past the mask).
    ///
    /// # Safety
    /// AVX-512 F; the eight elements at `p` (the masked ones if `last`)
    /// are readable.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f64, last: bool, tail: __mmask8) -> __m512d {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            if last {
                _mm512_maskz_loadu_pd(tail, p)
            } else {
                _mm512_loadu_pd(p)
            }
        }
    }

    /// `y[i0 + r] = A[i0 + r, :] · x` for `r < R`: one FMA chain per row
    /// over the chunks in order (the last chunk's lanes past the row left
    /// as they are), then `_mm512_reduce_add_pd`; the same for `R = 1` and
    /// `R = 8`, so a row's bits do not depend on its group.
    ///
    /// # Safety
    /// As `gemv`, for rows `i0 .. i0 + R`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows<const R: usize>(
        a: *const f64,
        lda: usize,
        i0: usize,
        chunks: usize,
        tail: __mmask8,
        xs: &[__m512d; 16],
        held: bool,
        x: *const f64,
        y: *mut f64,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let mut acc = [_mm512_setzero_pd(); R];
            let base = a.add(i0 * lda);
            // `c` also offsets the row and `x`; `xs` is read only when held.
            #[allow(clippy::needless_range_loop)]
            for c in 0..chunks - 1 {
                let xv = if held { xs[c] } else { _mm512_loadu_pd(x.add(8 * c)) };
                for (r, s) in acc.iter_mut().enumerate() {
                    *s = _mm512_fmadd_pd(_mm512_loadu_pd(base.add(r * lda + 8 * c)), xv, *s);
                }
            }
            let c = chunks - 1;
            let xv = if held { xs[c] } else { _mm512_maskz_loadu_pd(tail, x.add(8 * c)) };
            for (r, s) in acc.iter_mut().enumerate() {
                let v = _mm512_maskz_loadu_pd(tail, base.add(r * lda + 8 * c));
                *s = _mm512_mask3_fmadd_pd(v, xv, *s, tail);
            }
            for (r, s) in acc.iter().enumerate() {
                *y.add(i0 + r) = _mm512_reduce_add_pd(*s);
            }
        }
    }

    /// # Safety
    /// AVX-512 F/DQ, AVX2 and FMA; rows `i < m` of `a` span `n` readable
    /// elements at stride `lda`, `x` has `m` and `y` has `n`.
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    pub(super) unsafe fn gevm(
        x: *const f64,
        a: *const f64,
        lda: usize,
        m: usize,
        n: usize,
        y: *mut f64,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            // Panels of 128 columns (sixteen registers); the last may be narrower.
            let mut j0 = 0;
            while j0 < n {
                let w = (n - j0).min(128);
                let chunks = w.div_ceil(8);
                macro_rules! panel {
                    ($($c:literal)*) => {
                        match chunks {
                            $($c => panel::<$c>(x, a.add(j0), lda, m, tail_mask(w), y.add(j0)),)*
                            _ => unreachable!("a panel has 1 to 16 chunks"),
                        }
                    };
                }
                panel!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
                j0 += w;
            }
        }
    }

    /// `y[j] = Σ_i x[i] A[i, j]` for the `C` chunks of one panel (the last
    /// masked by `tail`), the sum over `i` in order.
    ///
    /// # Safety
    /// As `gevm`, for this panel's columns.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    unsafe fn panel<const C: usize>(
        x: *const f64,
        a: *const f64,
        lda: usize,
        m: usize,
        tail: __mmask8,
        y: *mut f64,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let mut acc = [_mm512_setzero_pd(); C];
            for i in 0..m {
                let xv = _mm512_set1_pd(*x.add(i));
                let row = a.add(i * lda);
                for (c, s) in acc.iter_mut().enumerate().take(C - 1) {
                    *s = _mm512_fmadd_pd(_mm512_loadu_pd(row.add(8 * c)), xv, *s);
                }
                let v = _mm512_maskz_loadu_pd(tail, row.add(8 * (C - 1)));
                acc[C - 1] = _mm512_mask3_fmadd_pd(v, xv, acc[C - 1], tail);
            }
            for (c, s) in acc.iter().enumerate().take(C - 1) {
                _mm512_storeu_pd(y.add(8 * c), *s);
            }
            _mm512_mask_storeu_pd(y.add(8 * (C - 1)), tail, acc[C - 1]);
        }
    }
}

/// Compilers before 1.89 (the AVX-512 intrinsics are not stable there):
/// never detected.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
mod avx512 {
    pub(super) use super::none::*;
    pub(super) fn detected() -> bool {
        false
    }
}

/// The AVX2 kernels (4 lanes, FMA), for CPUs without AVX-512: the same
/// schemes with chunks of 4, the masked last chunk read with
/// `vmaskmovpd` (which reads nothing past the mask).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Whether this CPU has the features the kernels need.
    pub(super) fn detected() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    /// Lanes `< r` of the last chunk set (all four for `r = 0`: a full
    /// last chunk), as `vmaskmovpd` and `vblendvpd` read a mask.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn tail_mask(cols: usize) -> __m256i {
        let r = match cols % 4 {
            0 => 4,
            r => r as i64,
        };
        _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_setr_epi64x(0, 1, 2, 3))
    }

    /// # Safety
    /// AVX2 and FMA; rows `i < m` of `a` span `k` readable elements at
    /// stride `lda`, `x` has `k` and `y` has `m`; `m, k > 0`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gemv(
        a: *const f64,
        lda: usize,
        m: usize,
        k: usize,
        x: *const f64,
        y: *mut f64,
        reverse: bool,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let chunks = k.div_ceil(4);
            let tail = tail_mask(k);
            // Groups of eight rows (eight FMA chains hide the FMA latency),
            // then single rows; backwards when `reverse`.
            let groups = m / 8;
            let steps = groups + (m - 8 * groups);
            for s in 0..steps {
                let s = if reverse { steps - 1 - s } else { s };
                if s < groups {
                    rows::<8>(a, lda, 8 * s, chunks, tail, x, y);
                } else {
                    rows::<1>(a, lda, 8 * groups + (s - groups), chunks, tail, x, y);
                }
            }
        }
    }

    /// `y[i0 + r] = A[i0 + r, :] · x` for `r < R`: one FMA chain per row
    /// over the chunks in order (the last chunk's lanes past the row left
    /// as they are), then `(l0 + l2) + (l1 + l3)`; the same for `R = 1`
    /// and `R = 8`, so a row's bits do not depend on its group.
    ///
    /// # Safety
    /// As `gemv`, for rows `i0 .. i0 + R`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows<const R: usize>(
        a: *const f64,
        lda: usize,
        i0: usize,
        chunks: usize,
        tail: __m256i,
        x: *const f64,
        y: *mut f64,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let mut acc = [_mm256_setzero_pd(); R];
            let base = a.add(i0 * lda);
            for c in 0..chunks - 1 {
                let xv = _mm256_loadu_pd(x.add(4 * c));
                for (r, s) in acc.iter_mut().enumerate() {
                    *s = _mm256_fmadd_pd(_mm256_loadu_pd(base.add(r * lda + 4 * c)), xv, *s);
                }
            }
            let c = chunks - 1;
            let xv = _mm256_maskload_pd(x.add(4 * c), tail);
            let keep = _mm256_castsi256_pd(tail);
            for (r, s) in acc.iter_mut().enumerate() {
                let v = _mm256_maskload_pd(base.add(r * lda + 4 * c), tail);
                *s = _mm256_blendv_pd(*s, _mm256_fmadd_pd(v, xv, *s), keep);
            }
            for (r, s) in acc.iter().enumerate() {
                let half = _mm_add_pd(_mm256_castpd256_pd128(*s), _mm256_extractf128_pd(*s, 1));
                *y.add(i0 + r) = _mm_cvtsd_f64(_mm_add_sd(half, _mm_unpackhi_pd(half, half)));
            }
        }
    }

    /// The widest panel (columns): twelve accumulators, which with the
    /// broadcast `x[i]` and a loaded chunk fit the sixteen registers.
    pub(super) const PANEL: usize = 48;

    /// # Safety
    /// AVX2 and FMA; rows `i < m` of `a` span `n` readable elements at
    /// stride `lda`, `x` has `m` and `y` has `n`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gevm(
        x: *const f64,
        a: *const f64,
        lda: usize,
        m: usize,
        n: usize,
        y: *mut f64,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let mut j0 = 0;
            while j0 < n {
                let w = (n - j0).min(PANEL);
                let chunks = w.div_ceil(4);
                macro_rules! panel {
                    ($($c:literal)*) => {
                        match chunks {
                            $($c => panel::<$c>(x, a.add(j0), lda, m, tail_mask(w), y.add(j0)),)*
                            _ => unreachable!("a panel has 1 to 12 chunks"),
                        }
                    };
                }
                panel!(1 2 3 4 5 6 7 8 9 10 11 12);
                j0 += w;
            }
        }
    }

    /// `y[j] = Σ_i x[i] A[i, j]` for the `C` chunks of one panel (the last
    /// masked by `tail`), the sum over `i` in order: the same chain, and
    /// bits, as the AVX-512 kernel's.
    ///
    /// # Safety
    /// As `gevm`, for this panel's columns.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn panel<const C: usize>(
        x: *const f64,
        a: *const f64,
        lda: usize,
        m: usize,
        tail: __m256i,
        y: *mut f64,
    ) {
        // SAFETY: the caller upholds this function's `# Safety` contract,
        // which is what every read, write and intrinsic below needs.
        unsafe {
            let mut acc = [_mm256_setzero_pd(); C];
            for i in 0..m {
                let xv = _mm256_broadcast_sd(&*x.add(i));
                let row = a.add(i * lda);
                for (c, s) in acc.iter_mut().enumerate().take(C - 1) {
                    *s = _mm256_fmadd_pd(_mm256_loadu_pd(row.add(4 * c)), xv, *s);
                }
                // Lanes past the panel read zero and are never stored.
                let v = _mm256_maskload_pd(row.add(4 * (C - 1)), tail);
                acc[C - 1] = _mm256_fmadd_pd(v, xv, acc[C - 1]);
            }
            for (c, s) in acc.iter().enumerate().take(C - 1) {
                _mm256_storeu_pd(y.add(4 * c), *s);
            }
            _mm256_maskstore_pd(y.add(4 * (C - 1)), tail, acc[C - 1]);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    pub(super) use super::none::*;
}

#[allow(dead_code)]
mod none {
    pub(crate) fn available() -> bool {
        false
    }
    #[cfg(test)]
    pub(crate) fn at_each_level(_: impl FnMut()) {}
    pub(crate) fn panel_width() -> usize {
        0
    }
    /// # Safety
    /// None needed: does nothing.
    pub(crate) unsafe fn gemv(
        _: *const f64,
        _: usize,
        _: usize,
        _: usize,
        _: *const f64,
        _: *mut f64,
        _: bool,
    ) {
    }
    /// # Safety
    /// None needed: does nothing.
    pub(crate) unsafe fn gevm(
        _: *const f64,
        _: *const f64,
        _: usize,
        _: usize,
        _: usize,
        _: *mut f64,
    ) {
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic, sign-mixed test matrix of `rows × lda`.
    fn data(len: usize, seed: f64) -> Vec<f64> {
        (0..len).map(|i| ((i as f64 + 1.0) * seed).sin() * (1.0 + (i % 7) as f64)).collect()
    }

    /// `|got - Σ terms|` within a few ulps of `Σ |terms|`.
    fn close(got: f64, terms: impl Iterator<Item = f64> + Clone) -> bool {
        let exact: f64 = terms.clone().sum();
        let scale: f64 = terms.map(f64::abs).sum();
        (got - exact).abs() <= 1e-14 * scale.max(f64::MIN_POSITIVE)
    }

    const SIZES: [usize; 14] = [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 128, 129, 300];

    /// The products shared between threads give the bits of the whole
    /// ones (by gevm where it takes the matrix, else by its blocks on one
    /// thread), on both paths; below [`GEVM_SPLIT`] they decline.
    #[test]
    fn split_products_keep_the_bits() {
        imp::at_each_level(|| {
            for (m, n, pad) in [(512, 512, 0), (1024, 300, 3), (300, 1024, 0), (2048, 136, 1)] {
                let lda = n + pad;
                let a = data((m - 1) * lda + n, 0.41);
                let (x, v) = (data(m, 0.23), data(n, 0.61));
                let mut serial = vec![f64::NAN; n];
                assert!(gevm_split(&x, &a, lda, &mut serial, false), "gevm_split {m} × {n}");
                let mut parallel = vec![f64::NAN; n];
                assert!(gevm_split(&x, &a, lda, &mut parallel, true));
                assert_eq!(serial, parallel, "gevm_split {m} × {n}");
                let mut whole = vec![f64::NAN; n];
                if gevm(&x, &a, lda, &mut whole) {
                    assert_eq!(serial, whole, "gevm {m} × {n}");
                }
                for (j, &got) in serial.iter().enumerate() {
                    assert!(close(got, (0..m).map(|i| x[i] * a[i * lda + j])), "column {j}");
                }
                let (mut split, mut whole) = (vec![f64::NAN; m], vec![f64::NAN; m]);
                assert!(gemv_split(&a, lda, &v, &mut split));
                assert!(gemv(&a, lda, &v, &mut whole));
                // One half runs on a rayon thread, at the detected level: at
                // a level forced below it (AVX2 on an AVX-512 CPU), whose
                // `gemv` sums in another order, that half differs in the
                // last bits.
                if imp::forced_below() {
                    for (i, &got) in split.iter().enumerate() {
                        assert!(close(got, (0..n).map(|j| a[i * lda + j] * v[j])), "row {i}");
                    }
                } else {
                    assert_eq!(split, whole, "gemv {m} × {n}");
                }
            }
            let small = data(128 * 128, 0.3);
            let x = data(128, 0.2);
            assert!(!gevm_split(&x, &small, 128, &mut [0.0; 128], true));
            assert!(!gemv_split(&small, 128, &x, &mut [0.0; 128]));
        });
    }

    #[test]
    fn gemv_matches_the_sums_at_every_shape_and_stride() {
        imp::at_each_level(|| {
            for &m in &SIZES {
                for &k in &SIZES {
                    for pad in [0, 3] {
                        let lda = k + pad;
                        let a = data((m - 1) * lda + k, 0.37);
                        let x = data(k, 0.71);
                        let mut y = vec![f64::NAN; m];
                        assert!(gemv(&a, lda, &x, &mut y));
                        for (i, &v) in y.iter().enumerate() {
                            let terms = (0..k).map(|p| a[i * lda + p] * x[p]);
                            assert!(close(v, terms), "gemv m={m} k={k} lda={lda} row {i}: {v}");
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn gevm_matches_the_sums_at_every_shape_and_stride() {
        imp::at_each_level(|| {
            for &m in &SIZES {
                for &n in &SIZES {
                    for pad in [0, 5] {
                        let lda = n + pad;
                        let a = data((m - 1) * lda + n, 0.29);
                        let x = data(m, 0.53);
                        let mut y = vec![f64::NAN; n];
                        if n < 8 {
                            // Narrow results are left to faer.
                            assert!(!gevm(&x, &a, lda, &mut y));
                            continue;
                        }
                        assert!(gevm(&x, &a, lda, &mut y));
                        for (j, &v) in y.iter().enumerate() {
                            let terms = (0..m).map(|i| x[i] * a[i * lda + j]);
                            assert!(close(v, terms), "gevm m={m} n={n} lda={lda} column {j}: {v}");
                        }
                    }
                }
            }
        });
    }

    #[test]
    fn gemv_gives_the_same_bits_in_both_directions_and_in_any_group() {
        imp::at_each_level(|| {
            for (m, k) in [(9, 130), (128, 128), (21, 17)] {
                let a = data(m * k, 0.91);
                let x = data(k, 0.13);
                let (mut y0, mut y1) = (vec![0.0; m], vec![0.0; m]);
                // Two calls in a row run in opposite directions.
                assert!(gemv(&a, k, &x, &mut y0));
                assert!(gemv(&a, k, &x, &mut y1));
                assert_eq!(
                    y0.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    y1.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
                // Each row alone (a 1-row product, the single-row path) as in its group of eight.
                for (i, &v) in y0.iter().enumerate() {
                    let mut one = [0.0];
                    assert!(gemv(&a[i * k..(i + 1) * k], k, &x, &mut one));
                    assert_eq!(one[0].to_bits(), v.to_bits(), "row {i} of {m}x{k}");
                }
            }
        });
    }

    #[test]
    fn a_panel_split_does_not_change_a_column() {
        imp::at_each_level(|| {
            // 300 columns are panels of 128, 128 and 44; each window of 9
            // columns as its own product (two chunks, the second masked) gives
            // the same bits.
            let (m, n) = (37, 300);
            let a = data(m * n, 0.61);
            let x = data(m, 0.23);
            let mut y = vec![0.0; n];
            assert!(gevm(&x, &a, n, &mut y));
            for j in [0, 7, 44, 92, 120, 127, 128, 140, 200, 255, 256, 286, 291] {
                let mut nine = [0.0; 9];
                assert!(gevm(&x, &a[j..], n, &mut nine));
                for (d, v) in nine.iter().enumerate() {
                    assert_eq!(v.to_bits(), y[j + d].to_bits(), "column {}", j + d);
                }
            }
        });
    }

    /// A packed matrix, read as is or transposed, gives the bits of the
    /// product on the matrix in place, at every panel width.
    #[test]
    fn packed_panels_give_the_bits_of_the_matrix_in_place() {
        imp::at_each_level(|| {
            for (k, n) in [(1, 8), (7, 9), (128, 128), (37, 300), (64, 47), (200, 97)] {
                let m = data(k * n, 0.43); // k × n
                let mt: Vec<f64> = (0..n * k).map(|p| m[(p % k) * n + p / k]).collect(); // n × k
                let x = data(k, 0.19);
                let mut want = vec![f64::NAN; n];
                assert!(gevm(&x, &m, n, &mut want));
                for width in [panel_width(), 48, 128, 8] {
                    for (src, transposed) in [(&m, false), (&mt, true)] {
                        let mut packed = vec![f64::NAN; k * n];
                        assert!(pack_panels(src, (k, n), transposed, width, &mut packed));
                        let mut got = vec![f64::NAN; n];
                        assert!(gevm_panels(&x, &packed, width, &mut got));
                        assert_eq!(
                            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            "{k} × {n}, width {width}, transposed {transposed}"
                        );
                    }
                }
            }
            // Short slices and zero widths are refused.
            let mut y = [0.0; 8];
            assert!(!gevm_panels(&[1.0; 2], &[1.0; 15], 8, &mut y));
            assert!(!gevm_panels(&[1.0; 2], &[1.0; 16], 0, &mut y));
            assert!(!pack_panels(&[1.0; 15], (2, 8), false, 8, &mut [0.0; 16]));
        });
    }

    /// Wherever a buffer with [`PANEL_PAD`] of slack starts, its aligned
    /// window starts on a 64-byte boundary, holds the panels, and packing
    /// into it and reading from it give the bits of an unpadded buffer.
    #[test]
    fn padded_panels_start_on_a_cache_line() {
        let (k, n) = (37, 130);
        let m = data(k * n, 0.29);
        let x = data(k, 0.53);
        let width = panel_width().max(8);
        let mut plain = vec![f64::NAN; k * n];
        assert!(pack_panels(&m, (k, n), false, width, &mut plain));
        let mut want = vec![f64::NAN; n];
        let ran = gevm_panels(&x, &plain, width, &mut want);
        let mut offsets = std::collections::BTreeSet::new();
        for skew in 0..8 {
            let mut buf = vec![f64::NAN; skew + k * n + PANEL_PAD];
            let start = buf[skew..].as_ptr() as usize;
            let window = aligned_mut(&mut buf[skew..]);
            assert_eq!(window.as_ptr() as usize % 64, 0, "skew {skew}");
            assert!(window.len() >= k * n);
            offsets.insert(window.as_ptr() as usize - start);
            assert!(pack_panels(&m, (k, n), false, width, window));
            let mut got = vec![f64::NAN; n];
            assert_eq!(gevm_panels(&x, aligned(&buf[skew..]), width, &mut got), ran);
            if ran {
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "skew {skew}"
                );
            }
        }
        // Eight starting points, eight different offsets into the slack.
        assert_eq!(offsets.len(), 8);
        // A buffer shorter than the way to its boundary: the window is
        // empty, from its end; otherwise it starts on the boundary.
        let buf = [1.0f64; 16];
        for skew in 0..8 {
            let short = &buf[skew..skew + 2];
            let to_boundary = short.as_ptr().align_offset(64);
            let window = aligned(short);
            if to_boundary >= 2 {
                assert!(window.is_empty(), "skew {skew}");
                assert_eq!(window.as_ptr(), short.as_ptr_range().end);
            } else {
                assert_eq!(window.len(), 2 - to_boundary);
                assert_eq!(window.as_ptr() as usize % 64, 0);
            }
        }
    }

    #[test]
    fn special_values_propagate_and_tails_add_nothing() {
        imp::at_each_level(|| {
            let (m, k) = (3, 11);
            let mut a = data(m * k, 0.4);
            a[k + 10] = f64::INFINITY; // row 1, last (masked-chunk) column
            a[2 * k + 3] = f64::NAN;
            let x = data(k, 0.8);
            let mut y = vec![0.0; m];
            assert!(gemv(&a, k, &x, &mut y));
            assert!(y[0].is_finite());
            assert_eq!(y[1], f64::INFINITY * x[10].signum());
            assert!(y[2].is_nan());
            // An all-zero product is +0, with -0 terms too: no lane past the
            // end turns a sum into NaN or changes it.
            let z = vec![-0.0; 9];
            let mut out = [1.0; 9];
            assert!(gevm(&[1.0], &z, 9, &mut out));
            assert!(out.iter().all(|&v| v == 0.0));
        });
    }

    #[test]
    fn empty_sums_are_zero_and_mismatched_inner_sizes_are_refused() {
        imp::at_each_level(|| {
            // No columns: every row's sum is zero.
            let mut y = vec![f64::NAN; 3];
            assert!(gemv(&[], 0, &[], &mut y));
            assert_eq!(y, [0.0; 3]);
            // op(a) is 2 × 3, op(b) a vector of 0: not a product `product` runs.
            let mut out = vec![7.0; 2];
            assert!(!product(&[1.0; 6], (2, 3, false), &[], (0, 1, false), &mut out));
            assert!(!product(&[1.0; 6], (2, 3, false), &[1.0; 4], (4, 1, false), &mut out));
            assert_eq!(out, [7.0; 2]);
        });
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused() {
        let a = vec![1.0; 10];
        let mut y = vec![7.0; 3];
        assert!(!gemv(&a, 4, &[1.0; 4], &mut y)); // 3 rows of 4 at stride 4 need 12
        assert!(!gemv(&a, 2, &[1.0; 4], &mut y)); // stride below the row length
        assert_eq!(y, vec![7.0; 3]);
        assert!(!gevm(&[1.0; 3], &a, 4, &mut y[..]));
    }
}
