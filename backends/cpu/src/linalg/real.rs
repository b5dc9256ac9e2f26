//! The element types: f32 and f64.

use faer::traits::RealField;
use std::fmt::Debug;
use std::ops::Neg;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A real floating-point element type the module computes in (f32 or f64):
/// faer's field trait plus the few operations the unblocked kernels need.
pub trait Real:
    RealField
    + Copy
    + Debug
    + Default
    + Send
    + Sync
    + Neg<Output = Self>
    + crate::buffers::Pooled
    + sealed::Sealed
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Not a number.
    const NAN: Self;
    /// −∞.
    const NEG_INFINITY: Self;
    /// Machine epsilon (the gap between 1 and the next number).
    const EPS: Self;
    /// The largest finite value.
    const MAX: Self;
    /// Square root.
    fn sqrt_(self) -> Self;
    /// Absolute value.
    fn abs_(self) -> Self;
    /// Natural logarithm.
    fn ln_(self) -> Self;
    /// Whether the value is NaN.
    fn is_nan_(self) -> bool;
    /// Whether the value is finite (not infinite, not NaN).
    fn is_finite_(self) -> bool;
    /// IEEE total order (NaN sorts last), for sorting without panics.
    fn total_cmp_(&self, other: &Self) -> std::cmp::Ordering;
    /// Conversion from a count (used for tolerances).
    fn from_usize(n: usize) -> Self;
    /// Powers of two `(s, 1/s)` such that `self · s` is near 1 (in
    /// `[1, 4)` for normal positive `self`; `(1, 1)` for zero, negative or
    /// non-finite input). Scaling by them is exact: it is how the small
    /// eigensolver avoids overflow and underflow in squares.
    fn pow2_normaliser(self) -> (Self, Self);
    /// Conversion from f64 (rounding for f32).
    fn from_f64_(x: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64_(self) -> f64;
    /// The two slices as f64 slices if `Self` is f64 (for the kernels with
    /// an f64-only SIMD path), else `None`.
    ///
    /// ```
    /// use anvil_cpu::linalg::Real;
    ///
    /// let (a, mut b) = ([1.0f64, 2.0], [0.0f64; 2]);
    /// assert!(f64::as_f64_pair(&a, &mut b).is_some());
    /// let (c, mut d) = ([1.0f32], [0.0f32]);
    /// assert!(f32::as_f64_pair(&c, &mut d).is_none());
    /// ```
    fn as_f64_pair<'a>(a: &'a [Self], b: &'a mut [Self]) -> Option<(&'a [f64], &'a mut [f64])>;
}

/// [`Real::as_f64_pair`] of f64: the slices themselves.
fn f64_pair<'a>(a: &'a [f64], b: &'a mut [f64]) -> Option<(&'a [f64], &'a mut [f64])> {
    Some((a, b))
}

/// [`Real::as_f64_pair`] of f32: not f64.
fn no_f64_pair<'a>(_: &'a [f32], _: &'a mut [f32]) -> Option<(&'a [f64], &'a mut [f64])> {
    None
}

macro_rules! impl_real {
    ($t:ty, $bits:ty, $mant:expr, $bias:expr, $pair:ident) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NAN: Self = <$t>::NAN;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            const EPS: Self = <$t>::EPSILON;
            const MAX: Self = <$t>::MAX;
            #[inline(always)]
            fn sqrt_(self) -> Self {
                self.sqrt()
            }
            #[inline(always)]
            fn abs_(self) -> Self {
                self.abs()
            }
            #[inline(always)]
            fn ln_(self) -> Self {
                self.ln()
            }
            #[inline(always)]
            fn is_nan_(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn is_finite_(self) -> bool {
                self.is_finite()
            }
            #[inline(always)]
            fn total_cmp_(&self, other: &Self) -> std::cmp::Ordering {
                self.total_cmp(other)
            }
            #[inline(always)]
            fn from_usize(n: usize) -> Self {
                n as $t
            }
            fn pow2_normaliser(self) -> (Self, Self) {
                if self.is_nan() || self <= 0.0 || self.is_infinite() {
                    return (1.0, 1.0);
                }
                // The biased exponent, 0 for subnormals (treated as the
                // smallest normal exponent: the product stays below 4).
                let biased = ((self.to_bits() >> $mant) as i32 & (2 * $bias + 1)).max(1);
                let e = (biased - $bias).clamp(1 - $bias, $bias - 1);
                let pow2 = |k: i32| <$t>::from_bits(((k + $bias) as $bits) << $mant);
                (pow2(-e), pow2(e))
            }
            #[inline(always)]
            fn from_f64_(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64_(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn as_f64_pair<'a>(
                a: &'a [Self],
                b: &'a mut [Self],
            ) -> Option<(&'a [f64], &'a mut [f64])> {
                $pair(a, b)
            }
        }
    };
}

impl_real!(f32, u32, 23, 127, no_f64_pair);
impl_real!(f64, u64, 52, 1023, f64_pair);
