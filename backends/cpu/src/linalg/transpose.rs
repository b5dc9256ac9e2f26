//! Cache-blocked transposes between row-major and column-major storage.

use super::Real;

/// Columns of the source (rows of the destination) per pass of the full
/// transpose (LU's and QR's copies).
const TILE: usize = 64;

/// Source rows per strip of the full transpose: 8 f64 fill one 64-byte cache
/// line of a destination row, so each destination line is written whole in
/// one go and none has to stay cached between strips (with 4-row strips and
/// a power-of-two row length, e.g. n = 1024, the half-written lines of a
/// tile fell into one cache set and evicted each other).
const STRIP: usize = 8;

/// Tile edge of the triangle moves around Cholesky. Small on purpose: with
/// a power-of-two row length (n = 1024 f64 is 8 KiB) the rows of a tile map
/// to the same L1 cache set and more than 8 of them (the associativity)
/// evict each other; with 8 × 8 tiles Cholesky at n = 256 cost 1.3× faer
/// alone, against 2.2× for faer on a row-major view.
const TRI_TILE: usize = 8;

/// `dst = srcᵀ`: `src` is `rows × cols` row-major, `dst` gets `cols × rows`
/// row-major (equivalently, `src` in column-major order).
///
/// f64 on a CPU with AVX moves 4 × 4 blocks through registers
/// ([`avx::transpose_f64`]): 14 µs at 200 × 200 against 22 µs for the
/// portable loop ([`transpose_portable`]), which every other case takes.
/// Both only move the numbers: the result is the same bits.
pub(crate) fn transpose<T: Real>(src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols, "transpose: buffers too short");
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx") {
        if let Some((s, d)) = T::as_f64_pair(src, dst) {
            // SAFETY: the CPU supports AVX (checked just above), and both
            // buffers hold `rows · cols` elements (the assert above).
            unsafe { avx::transpose_f64(s, rows, cols, d) };
            return;
        }
    }
    transpose_portable(src, rows, cols, dst);
}

/// [`transpose`] in portable code.
fn transpose_portable<T: Real>(src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    // Strips of 8 source rows zipped together, so that the reads need no
    // bounds checks; one checked 8-element write per destination row. About
    // 3.6 instructions per element at 200 × 200 (callgrind), against 5.9 for
    // the 4 × 4 blocks within 32 × 32 tiles this replaced.
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols, "transpose: buffers too short");
    if rows == 0 {
        return;
    }
    for j0 in (0..cols).step_by(TILE) {
        let j1 = (j0 + TILE).min(cols);
        let tile = &mut dst[j0 * rows..j1 * rows];
        let row = |i: usize| &src[i * cols + j0..i * cols + j1];
        let mut i = 0;
        while i + STRIP <= rows {
            let strip = row(i).iter().zip(row(i + 1)).zip(row(i + 2)).zip(row(i + 3));
            let strip = strip.zip(row(i + 4)).zip(row(i + 5)).zip(row(i + 6)).zip(row(i + 7));
            for (d, (((((((a, b), c), e), f), g), h), k)) in tile.chunks_exact_mut(rows).zip(strip)
            {
                d[i..i + STRIP].copy_from_slice(&[*a, *b, *c, *e, *f, *g, *h, *k]);
            }
            i += STRIP;
        }
        for i in i..rows {
            for (d, &x) in tile.chunks_exact_mut(rows).zip(row(i)) {
                d[i] = x;
            }
        }
    }
}

/// The AVX transpose of f64 matrices.
#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{STRIP, TILE};
    use std::arch::x86_64::{
        _mm256_loadu_pd, _mm256_permute2f128_pd, _mm256_storeu_pd, _mm256_unpackhi_pd,
        _mm256_unpacklo_pd,
    };

    /// `dst = srcᵀ` as [`super::transpose`]: within tiles of [`TILE`]
    /// source columns, strips of [`STRIP`] source rows are moved as two
    /// 4 × 4 blocks per 4 columns (four loads, eight shuffles, four
    /// stores each), so each destination row gets 8 consecutive numbers (a
    /// cache line's worth) per strip; the ragged edges are copied one
    /// number at a time.
    ///
    /// # Safety
    /// The CPU must support AVX, and `src` and `dst` must hold at least
    /// `rows · cols` elements.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose_f64(src: &[f64], rows: usize, cols: usize, dst: &mut [f64]) {
        debug_assert!(src.len() >= rows * cols && dst.len() >= rows * cols);
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        for j0 in (0..cols).step_by(TILE) {
            let j1 = (j0 + TILE).min(cols);
            let mut i = 0;
            while i + STRIP <= rows {
                let mut j = j0;
                while j + 4 <= j1 {
                    for h in (0..STRIP).step_by(4) {
                        // SAFETY: rows i + h .. i + h + 4 < rows and columns
                        // j .. j + 4 ≤ cols of `src`, and rows j .. j + 4 and
                        // columns i + h .. i + h + 4 of `dst` (`cols × rows`),
                        // are in bounds: both hold rows · cols elements.
                        unsafe {
                            let p = s.add((i + h) * cols + j);
                            let r0 = _mm256_loadu_pd(p);
                            let r1 = _mm256_loadu_pd(p.add(cols));
                            let r2 = _mm256_loadu_pd(p.add(2 * cols));
                            let r3 = _mm256_loadu_pd(p.add(3 * cols));
                            // [a0 b0 a2 b2], [a1 b1 a3 b3], [c0 d0 c2 d2], [c1 d1 c3 d3]
                            let t0 = _mm256_unpacklo_pd(r0, r1);
                            let t1 = _mm256_unpackhi_pd(r0, r1);
                            let t2 = _mm256_unpacklo_pd(r2, r3);
                            let t3 = _mm256_unpackhi_pd(r2, r3);
                            let q = d.add(j * rows + i + h);
                            _mm256_storeu_pd(q, _mm256_permute2f128_pd::<0x20>(t0, t2));
                            _mm256_storeu_pd(q.add(rows), _mm256_permute2f128_pd::<0x20>(t1, t3));
                            _mm256_storeu_pd(
                                q.add(2 * rows),
                                _mm256_permute2f128_pd::<0x31>(t0, t2),
                            );
                            _mm256_storeu_pd(
                                q.add(3 * rows),
                                _mm256_permute2f128_pd::<0x31>(t1, t3),
                            );
                        }
                    }
                    j += 4;
                }
                for j in j..j1 {
                    for q in i..i + STRIP {
                        dst[j * rows + q] = src[q * cols + j];
                    }
                }
                i += STRIP;
            }
            for i in i..rows {
                for j in j0..j1 {
                    dst[j * rows + i] = src[i * cols + j];
                }
            }
        }
    }
}

/// Copies the lower triangle (with the diagonal) of the `n × n` row-major
/// `src` into the upper triangle of `dst`, transposed: `dst[j][i] =
/// src[i][j]` for `i ≥ j`. Read column-major, `dst`'s lower triangle is then
/// `src`'s lower triangle.
pub(crate) fn lower_to_upper_transposed<T: Real>(src: &[T], n: usize, dst: &mut [T]) {
    lower_tiles(n, false, |i, j| dst[j * n + i] = src[i * n + j]);
}

/// In place on the `n × n` row-major `buf`: moves the strict upper triangle
/// to the strict lower one, transposed, and zeroes the upper triangle.
pub(crate) fn upper_to_lower_in_place<T: Real>(buf: &mut [T], n: usize) {
    for i0 in (0..n).step_by(TRI_TILE) {
        for j0 in (0..=i0).step_by(TRI_TILE) {
            for i in i0..(i0 + TRI_TILE).min(n) {
                for j in j0..(j0 + TRI_TILE).min(i) {
                    buf[i * n + j] = buf[j * n + i];
                    buf[j * n + i] = T::ZERO;
                }
            }
        }
    }
}

/// Visits the lower triangle `(i, j)`, `j ≤ i` (`j < i` if `strict`), of
/// an `n × n` matrix in [`TRI_TILE`] tiles, so that a transposed access
/// `[j][i]` next to `[i][j]` stays in cache.
#[inline(always)]
fn lower_tiles(n: usize, strict: bool, mut f: impl FnMut(usize, usize)) {
    for i0 in (0..n).step_by(TRI_TILE) {
        for j0 in (0..=i0).step_by(TRI_TILE) {
            for i in i0..(i0 + TRI_TILE).min(n) {
                for j in j0..(j0 + TRI_TILE).min(if strict { i } else { i + 1 }) {
                    f(i, j);
                }
            }
        }
    }
}

/// `(a + b)/2` as the symmetrisation `(A + Aᵀ)·0.5` of the graph computes
/// it (the same bits).
#[inline(always)]
fn mean<T: Real>(a: T, b: T) -> T {
    (a + b) * (T::ONE / (T::ONE + T::ONE))
}

/// Writes the lower triangle (with the diagonal) of `(A + Aᵀ)/2`, `A` the
/// `n × n` row-major `src`, into the lower triangle of the row-major `dst`;
/// `dst`'s strict upper triangle is not written. One tiled pass over both
/// triangles of `src`.
pub(crate) fn symmetric_lower<T: Real>(src: &[T], n: usize, dst: &mut [T]) {
    assert!(src.len() >= n * n && dst.len() >= n * n, "symmetric_lower: buffers too short");
    lower_tiles(n, false, |i, j| dst[i * n + j] = mean(src[i * n + j], src[j * n + i]));
}

/// As [`lower_to_upper_transposed`], of `(A + Aᵀ)/2`: `dst[j][i] =
/// (src[i][j] + src[j][i])/2` for `i ≥ j`.
pub(crate) fn symmetric_lower_to_upper_transposed<T: Real>(src: &[T], n: usize, dst: &mut [T]) {
    assert!(src.len() >= n * n && dst.len() >= n * n, "symmetric_lower: buffers too short");
    lower_tiles(n, false, |i, j| dst[j * n + i] = mean(src[i * n + j], src[j * n + i]));
}

/// In place on the `n × n` row-major `buf` whose strict upper triangle is
/// zero: `buf ← (buf + bufᵀ)/2`, i.e. the strict lower triangle halved and
/// mirrored into the upper one (the diagonal is kept: `(x + x)/2 = x`).
pub(crate) fn symmetrize_lower_in_place<T: Real>(buf: &mut [T], n: usize) {
    assert!(buf.len() >= n * n, "symmetrize_lower_in_place: buffer too short");
    lower_tiles(n, true, |i, j| {
        let v = mean(buf[i * n + j], buf[j * n + i]);
        buf[i * n + j] = v;
        buf[j * n + i] = v;
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn blocked_transpose_matches_the_definition_at_every_edge_shape() {
        for (rows, cols) in [
            (0, 3),
            (3, 0),
            (1, 1),
            (1, 7),
            (7, 1),
            (4, 4),
            (5, 9),
            (8, 8),
            (9, 130),
            (33, 70),
            (70, 37),
            (200, 200),
        ] {
            let src: Vec<f64> = (0..rows * cols).map(|k| k as f64).collect();
            let mut dst = vec![f64::NAN; rows * cols];
            super::transpose(&src, rows, cols, &mut dst);
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(dst[j * rows + i], src[i * cols + j], "{rows}x{cols} at ({i}, {j})");
                }
            }
        }
    }

    /// The AVX path (taken by `transpose` for f64 when the CPU has AVX)
    /// gives what the portable loop gives, on every edge shape and on
    /// slices starting at every offset within a cache line (unaligned
    /// loads and stores); f32 takes the portable loop.
    #[test]
    fn avx_transpose_matches_the_portable_loop() {
        for (rows, cols) in [
            (0, 5),
            (5, 0),
            (1, 1),
            (3, 5),
            (4, 4),
            (7, 9),
            (8, 4),
            (9, 13),
            (16, 67),
            (67, 16),
            (200, 200),
        ] {
            let n = rows * cols;
            for off in 0..8 {
                let src: Vec<f64> = (0..n + off).map(|k| k as f64 * 0.5 - 3.0).collect();
                let (mut fast, mut slow) = (vec![f64::NAN; n + off], vec![f64::NAN; n + off]);
                super::transpose(&src[off..], rows, cols, &mut fast[off..]);
                super::transpose_portable(&src[off..], rows, cols, &mut slow[off..]);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&fast), bits(&slow), "{rows}x{cols} at offset {off}");
            }
            let src: Vec<f32> = (0..n).map(|k| k as f32).collect();
            let mut dst = vec![f32::NAN; n];
            super::transpose(&src, rows, cols, &mut dst);
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(dst[j * rows + i], src[i * cols + j], "f32 {rows}x{cols}");
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx") {
            let src: Vec<f64> = (0..35).map(|k| k as f64).collect();
            let mut dst = vec![0.0; 35];
            // SAFETY: AVX is present; both buffers hold 5 · 7 elements.
            unsafe { super::avx::transpose_f64(&src, 5, 7, &mut dst) };
            // dst[j][i] = src[i][j] at (i, j) = (2, 1): dst is 7 × 5.
            assert_eq!(dst[5 + 2], src[2 * 7 + 1]);
        }
    }

    #[test]
    fn symmetric_triangle_moves_match_the_definition() {
        for n in [0, 1, 2, 7, 8, 9, 17, 33] {
            let a: Vec<f64> = (0..n * n).map(|k| ((k * 7 + 3) % 11) as f64 - 4.5).collect();
            let sym = |i: usize, j: usize| (a[i * n + j] + a[j * n + i]) * 0.5;
            let mut low = vec![f64::NAN; n * n];
            super::symmetric_lower(&a, n, &mut low);
            let mut up = vec![f64::NAN; n * n];
            super::symmetric_lower_to_upper_transposed(&a, n, &mut up);
            let mut tri = a.clone();
            for i in 0..n {
                tri[i * n + i + 1..(i + 1) * n].fill(0.0);
            }
            super::symmetrize_lower_in_place(&mut tri, n);
            for i in 0..n {
                for j in 0..n {
                    if j <= i {
                        assert_eq!(low[i * n + j], sym(i, j), "{n}: lower ({i}, {j})");
                        assert_eq!(up[j * n + i], sym(i, j), "{n}: upper ({j}, {i})");
                    } else {
                        assert!(low[i * n + j].is_nan(), "{n}: ({i}, {j}) written");
                    }
                    let (p, q) = (i.max(j), i.min(j));
                    let want = if p == q { a[p * n + p] } else { a[p * n + q] * 0.5 };
                    assert_eq!(tri[i * n + j], want, "{n}: in place ({i}, {j})");
                }
            }
        }
    }
}
