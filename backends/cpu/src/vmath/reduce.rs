//! Exact argument reduction for sin/cos of huge arguments (Payne-Hanek).
//!
//! For |x| >= 2^26 the fast Cody-Waite reduction in `kernels.rs` would need
//! more of pi/2 than three doubles hold. Here x = m 2^e (m a 53-bit integer)
//! is multiplied by a 192-bit window of the bits of 2/pi, chosen so that the
//! bits of 2/pi above the window only add multiples of 4 (which do not change
//! sin or cos) and the bits below it add less than 2^-138. The product, taken
//! mod 4, gives the quadrant and at least 66 correct bits of the fraction even
//! for the worst case (x closest to a multiple of pi/2, about 2^-61 away).
//! Scalar and integer-only; at about 50 ns it is only for the rare huge inputs.

use super::coeffs::{PIO2_1, PIO2_2, TWO_OVER_PI_BITS};

/// 192 bits of 2/pi starting at bit `j` (1-based from the top of word 0), as
/// three words, most significant first. Bits past the table read as 0.
fn window(j: usize) -> [u64; 3] {
    let w = (j - 1) / 64;
    let s = (j - 1) % 64;
    let word = |i: usize| TWO_OVER_PI_BITS.get(w + i).copied().unwrap_or(0);
    let at = |i: usize| {
        if s == 0 {
            word(i)
        } else {
            (word(i) << s) | (word(i + 1) >> (64 - s))
        }
    };
    [at(0), at(1), at(2)]
}

/// (k mod 4, rh, rl) with x = k pi/2 + rh + rl, |rh + rl| <= pi/4, for finite
/// |x| >= 2^26; NaN parts for non-finite x.
pub(super) fn rem_pio2_huge(x: f64) -> (u64, f64, f64) {
    if !x.is_finite() {
        return (0, f64::NAN, f64::NAN);
    }
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    // Below 2^-62 the window would start above the table; such inputs need
    // no reduction at all (the fast path handles them; kept for totality).
    if biased < 1023 - 10 {
        return (0, x, 0.0);
    }
    let m = (bits & 0x000f_ffff_ffff_ffff) | (1 << 52);
    let e = biased - 1075;
    // Bits of weight >= 2^(1-e) of 2/pi contribute multiples of 4 m; the window
    // starts right after them (bit j of the table has weight 2^(64 - j)).
    let [w2, w1, w0] = window((e + 63) as usize);
    // m * window mod 2^192: x (2/pi) mod 4 = value * 2^-190.
    let m = u128::from(m);
    let p0 = m * u128::from(w0);
    let p1 = m * u128::from(w1) + (p0 >> 64);
    let l2 = (m * u128::from(w2) + (p1 >> 64)) as u64;
    let (l1, l0) = (p1 as u64, p0 as u64);
    // Quadrant: the top two bits. Fraction: the next 128 bits, read as signed
    // so that a fraction >= 1/2 becomes f - 1 (and the quadrant moves up one).
    let frac = (u128::from((l2 << 2) | (l1 >> 62)) << 64) | u128::from((l1 << 2) | (l0 >> 62));
    let signed = frac as i128;
    let q = (l2 >> 62).wrapping_add((frac >> 127) as u64);
    let (rh, rl) = scaled_by_pio2(signed);
    if x < 0.0 {
        (q.wrapping_neg() & 3, -rh, -rl)
    } else {
        (q & 3, rh, rl)
    }
}

/// (f / 2^128) * pi/2 as a normalised double-double.
fn scaled_by_pio2(f: i128) -> (f64, f64) {
    const TWO_M128: f64 = 2.938735877055719e-39; // 2^-128, exact
    let hi = f as f64;
    // `hi as i128` saturates at 2^127 - 1, an error of 2^-128 at most.
    let lo = f.wrapping_sub(hi as i128) as f64;
    let (fh, fl) = (hi * TWO_M128, lo * TWO_M128);
    let rh = fh * PIO2_1;
    let rl = fh.mul_add(PIO2_1, -rh) + fh.mul_add(PIO2_2, fl * PIO2_1);
    let s = rh + rl;
    (s, rl - (s - rh))
}
