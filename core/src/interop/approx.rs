//! `approx` comparisons of tensors (feature `approx`): `assert_relative_eq!`,
//! `abs_diff_eq!` and `ulps_eq!` work on [`Tensor`]s.
//!
//! Two tensors are close when they have the same shape and every pair of
//! elements (compared as `f64`) is close by `approx`'s rule for `f64`; as in
//! [`Tensor::allclose`], NaNs compare equal to NaNs, so a computation that
//! should give NaN where the reference does is not reported. Dtypes may
//! differ (an `f32` result against an `f64` reference).
//!
//! ```
//! # use anvil_core::Tensor;
//! let a = Tensor::from_vec(vec![1.0, 2.0, f64::NAN], &[3])?;
//! let b = Tensor::from_vec(vec![1.0 + 1e-12, 2.0, f64::NAN], &[3])?;
//! approx::assert_relative_eq!(a, b, max_relative = 1e-10);
//! assert!(approx::relative_ne!(a, Tensor::zeros(&[3])?));
//! # Ok::<(), anvil_core::Error>(())
//! ```

use crate::tensor::Tensor;
use approx::{AbsDiffEq, RelativeEq, UlpsEq};

fn all(a: &Tensor, b: &Tensor, close: impl Fn(f64, f64) -> bool) -> bool {
    a.shape() == b.shape()
        && a.to_f64_vec()
            .into_iter()
            .zip(b.to_f64_vec())
            .all(|(x, y)| (x.is_nan() && y.is_nan()) || close(x, y))
}

impl AbsDiffEq for Tensor {
    type Epsilon = f64;
    fn default_epsilon() -> f64 {
        f64::default_epsilon()
    }
    fn abs_diff_eq(&self, other: &Tensor, epsilon: f64) -> bool {
        all(self, other, |x, y| x.abs_diff_eq(&y, epsilon))
    }
}

impl RelativeEq for Tensor {
    fn default_max_relative() -> f64 {
        f64::default_max_relative()
    }
    fn relative_eq(&self, other: &Tensor, epsilon: f64, max_relative: f64) -> bool {
        all(self, other, |x, y| x.relative_eq(&y, epsilon, max_relative))
    }
}

impl UlpsEq for Tensor {
    fn default_max_ulps() -> u32 {
        f64::default_max_ulps()
    }
    fn ulps_eq(&self, other: &Tensor, epsilon: f64, max_ulps: u32) -> bool {
        all(self, other, |x, y| x.ulps_eq(&y, epsilon, max_ulps))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_nans_and_tolerances() {
        let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
        let b = Tensor::from_vec(vec![1.0, 2.0], &[1, 2]).unwrap();
        assert!(approx::abs_diff_ne!(a, b), "different shapes are never close");
        let c = Tensor::from_vec(vec![1.0f32, 2.0001], &[2]).unwrap();
        assert!(approx::relative_eq!(a, c, max_relative = 1e-4));
        assert!(approx::relative_ne!(a, c, max_relative = 1e-6));
        assert!(approx::ulps_eq!(a, a.clone()));
        let n = Tensor::from_vec(vec![f64::NAN], &[1]).unwrap();
        assert!(approx::abs_diff_eq!(n, n.clone()));
    }
}
