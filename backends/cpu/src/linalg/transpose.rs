//! Cache-blocked transposes between row-major and column-major storage.

use super::Real;

/// Tile edge of the full transpose (LU's and QR's copies): 32 × 32 f64 is
/// 8 KiB. Measured on LU (noisy machine): at n = 1024, 32 and 16 cost about
/// 40 % over faer alone and 8 about 90 %; at n = 256 the other way round
/// (32: 110 %, 8: 40 %), where 32 rows of a 2 KiB stride fall into two
/// cache sets. The transposes are most of LU's overhead over faer; a
/// register-blocked transpose is the known next step.
const TILE: usize = 32;

/// Tile edge of the triangle moves around Cholesky. Small on purpose: with
/// a power-of-two row length (n = 1024 f64 is 8 KiB) the rows of a tile map
/// to the same L1 cache set and more than 8 of them (the associativity)
/// evict each other; with 8 × 8 tiles Cholesky at n = 256 cost 1.3× faer
/// alone, against 2.2× for faer on a row-major view.
const TRI_TILE: usize = 8;

/// `dst = srcᵀ`: `src` is `rows × cols` row-major, `dst` gets `cols × rows`
/// row-major (equivalently, `src` in column-major order).
pub(crate) fn transpose<T: Real>(src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    for i0 in (0..rows).step_by(TILE) {
        for j0 in (0..cols).step_by(TILE) {
            for i in i0..(i0 + TILE).min(rows) {
                let row = &src[i * cols..(i + 1) * cols];
                for j in j0..(j0 + TILE).min(cols) {
                    dst[j * rows + i] = row[j];
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
    for i0 in (0..n).step_by(TRI_TILE) {
        for j0 in (0..=i0).step_by(TRI_TILE) {
            for i in i0..(i0 + TRI_TILE).min(n) {
                for j in j0..(j0 + TRI_TILE).min(i + 1) {
                    dst[j * n + i] = src[i * n + j];
                }
            }
        }
    }
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
