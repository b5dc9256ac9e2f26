//! `faer` matrices (feature `faer`).

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Rows and columns of a tensor seen as a matrix: rank 2 as it is, rank 1 as
/// a column.
fn matrix_dims(t: &Tensor, what: &str) -> Result<(usize, usize)> {
    match t.shape() {
        [r, c] => Ok((*r, *c)),
        [r] => Ok((*r, 1)),
        s => Err(Error::shape(what, &[s], "expected a tensor of rank 1 or 2")),
    }
}

impl Tensor {
    /// A faer view of a rank-2 tensor (rank 1: a column), sharing its buffer:
    /// a row-major matrix view (row stride = number of columns, column
    /// stride 1). No copy is made; the view borrows the tensor.
    ///
    /// ```
    /// # use anvil_core::Tensor;
    /// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let m = t.faer_view::<f64>()?;
    /// assert_eq!((m.nrows(), m.ncols(), m[(1, 0)]), (2, 3, 4.0));
    /// assert!(std::ptr::eq(m.as_ptr(), t.as_slice::<f64>()?.as_ptr()));
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// A tensor of another dtype than `T`, or of rank other than 1 or 2.
    pub fn faer_view<T: Element>(&self) -> Result<faer::MatRef<'_, T>> {
        let (r, c) = matrix_dims(self, "Tensor::faer_view")?;
        Ok(faer::MatRef::from_row_major_slice(self.slice_for::<T>("Tensor::faer_view")?, r, c))
    }
}

macro_rules! faer_conv {
    ($t:ty) => {
        impl From<faer::MatRef<'_, $t>> for Tensor {
            /// Copies a faer matrix into a rank-2 row-major tensor.
            fn from(m: faer::MatRef<'_, $t>) -> Tensor {
                let (r, c) = (m.nrows(), m.ncols());
                let mut data = Vec::with_capacity(r * c);
                for i in 0..r {
                    data.extend(m.row(i).iter().copied());
                }
                Tensor::from_vec(data, &[r, c]).expect("r * c elements for an r x c matrix")
            }
        }
        impl From<&faer::Mat<$t>> for Tensor {
            /// Copies a faer matrix into a rank-2 row-major tensor.
            fn from(m: &faer::Mat<$t>) -> Tensor {
                Tensor::from(m.as_ref())
            }
        }
        impl TryFrom<&Tensor> for faer::Mat<$t> {
            type Error = Error;
            /// Copies a rank-2 tensor (rank 1 becomes a column) into a faer matrix.
            fn try_from(t: &Tensor) -> Result<faer::Mat<$t>> {
                Ok(t.faer_view::<$t>()?.to_owned())
            }
        }
    };
}
faer_conv!(f64);
faer_conv!(f32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faer_round_trip() {
        let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let m = faer::Mat::<f64>::try_from(&t).unwrap();
        assert_eq!(m[(1, 0)], 4.0);
        assert_eq!(Tensor::from(&m), t);
        let v = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        assert_eq!(v.faer_view::<f32>().unwrap().ncols(), 1);
        assert!(t.faer_view::<f32>().is_err());
        let cube = Tensor::zeros(&[2, 2, 2]).unwrap();
        assert!(cube.faer_view::<f64>().unwrap_err().to_string().contains("rank 1 or 2"));
    }
}
