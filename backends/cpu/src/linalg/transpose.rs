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
    // Within each tile, 4 × 4 blocks: four source rows are sliced once per
    // block row, so the inner copies need no per-element index arithmetic
    // or bounds checks (the element-wise loop cost about 20 instructions
    // per element, as much as the rest of a 200 × 200 LU's bookkeeping).
    const B: usize = 4;
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols, "transpose: buffers too short");
    for i0 in (0..rows).step_by(TILE) {
        let i1 = (i0 + TILE).min(rows);
        for j0 in (0..cols).step_by(TILE) {
            let j1 = (j0 + TILE).min(cols);
            let mut i = i0;
            while i + B <= i1 {
                let r: [&[T]; B] =
                    std::array::from_fn(|k| &src[(i + k) * cols + j0..(i + k) * cols + j1]);
                for (jj, j) in (j0..j1).enumerate() {
                    let d = &mut dst[j * rows + i..j * rows + i + B];
                    d[0] = r[0][jj];
                    d[1] = r[1][jj];
                    d[2] = r[2][jj];
                    d[3] = r[3][jj];
                }
                i += B;
            }
            for i in i..i1 {
                let row = &src[i * cols + j0..i * cols + j1];
                for (j, &x) in (j0..j1).zip(row) {
                    dst[j * rows + i] = x;
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

#[cfg(test)]
mod tests {
    #[test]
    fn blocked_transpose_matches_the_definition_at_every_edge_shape() {
        for (rows, cols) in
            [(0, 3), (3, 0), (1, 1), (1, 7), (7, 1), (4, 4), (5, 9), (33, 70), (70, 37)]
        {
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
}
