//! A cache-blocked transpose between row-major and column-major storage.

use super::Real;

/// Tile edge: 32 × 32 f64 is 8 KiB, two tiles fit in L1.
const TILE: usize = 32;

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
