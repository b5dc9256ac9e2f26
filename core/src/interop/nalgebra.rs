//! `nalgebra` matrices and vectors (feature `nalgebra`).

use super::take_buffer;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use nalgebra::{DMatrix, DVector, Dyn, MatrixView, U1};

/// A `nalgebra` view of a row-major matrix: row stride = number of columns
/// (dynamic), column stride 1.
pub type RowMajorView<'a, T> = MatrixView<'a, T, Dyn, Dyn, Dyn, U1>;

impl Tensor {
    /// A `nalgebra` view of a rank-2 tensor (rank 1: a column), sharing its
    /// buffer: nalgebra's view with row stride = number of columns and column
    /// stride 1 describes anvil's row-major layout exactly. No copy is made.
    ///
    /// ```
    /// # use anvil_core::Tensor;
    /// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let m = t.nalgebra_view::<f64>()?;
    /// assert_eq!((m.nrows(), m.ncols(), m[(1, 0)]), (2, 3, 4.0));
    /// assert_eq!(m.transpose() * nalgebra::DVector::from_element(2, 1.0),
    ///            nalgebra::DVector::from_vec(vec![5.0, 7.0, 9.0]));
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// A tensor of another dtype than `T`, or of rank other than 1 or 2.
    pub fn nalgebra_view<T: Element + nalgebra::Scalar>(&self) -> Result<RowMajorView<'_, T>> {
        let (r, c) = match self.shape() {
            [r, c] => (*r, *c),
            [r] => (*r, 1),
            s => {
                return Err(Error::shape(
                    "Tensor::nalgebra_view",
                    &[s],
                    "expected a tensor of rank 1 or 2",
                ))
            }
        };
        let data = self.slice_for::<T>("Tensor::nalgebra_view")?;
        // Strides in elements: moving down a row skips `c`, along a row 1.
        Ok(RowMajorView::from_slice_with_strides_generic(data, Dyn(r), Dyn(c), Dyn(c), U1))
    }

    /// The rank-1 tensor as a `nalgebra` column vector: its buffer is moved,
    /// not copied, when no other tensor shares it.
    ///
    /// # Errors
    /// A tensor of another dtype than `T`, or not of rank 1.
    pub fn into_dvector<T: Element + nalgebra::Scalar>(self) -> Result<DVector<T>> {
        if self.rank() != 1 {
            return Err(Error::shape(
                "Tensor::into_dvector",
                &[self.shape()],
                "expected a tensor of rank 1",
            ));
        }
        Ok(DVector::from_vec(take_buffer::<T>(self, "Tensor::into_dvector")?))
    }
}

impl<T: Element + nalgebra::Scalar> From<DVector<T>> for Tensor {
    /// A rank-1 tensor owning the vector's buffer (no copy).
    fn from(v: DVector<T>) -> Tensor {
        let n = v.len();
        let data: Vec<T> = v.data.into();
        Tensor::from_vec(data, &[n]).expect("a vector's elements fill its length")
    }
}

impl<T: Element + nalgebra::Scalar> From<&DMatrix<T>> for Tensor {
    /// Copies a (column-major) matrix into a rank-2 row-major tensor.
    fn from(m: &DMatrix<T>) -> Tensor {
        let (r, c) = m.shape();
        let data = m.transpose().data.into();
        Tensor::from_vec(data, &[r, c]).expect("r * c elements for an r x c matrix")
    }
}

impl<T: Element + nalgebra::Scalar> TryFrom<&Tensor> for DMatrix<T> {
    type Error = Error;
    /// Copies a rank-2 tensor (rank 1 becomes a column) into a matrix.
    fn try_from(t: &Tensor) -> Result<DMatrix<T>> {
        Ok(t.nalgebra_view::<T>()?.into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_views() {
        let m = DMatrix::from_fn(2, 3, |i, j| (10 * i + j) as f64);
        let t = Tensor::from(&m);
        assert_eq!(t.to_vec::<f64>().unwrap(), vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        assert_eq!(DMatrix::<f64>::try_from(&t).unwrap(), m);
        let view = t.nalgebra_view::<f64>().unwrap();
        assert_eq!(view, m);
        assert!(std::ptr::eq(view.as_ptr(), t.as_slice::<f64>().unwrap().as_ptr()));

        let v = DVector::from_vec(vec![1i64, 2, 3]);
        let p = v.as_ptr();
        let t = Tensor::from(v);
        assert!(std::ptr::eq(t.as_slice::<i64>().unwrap().as_ptr(), p));
        let back = t.into_dvector::<i64>().unwrap();
        assert!(std::ptr::eq(back.as_ptr(), p));

        let empty = Tensor::zeros(&[0, 3]).unwrap();
        assert_eq!(empty.nalgebra_view::<f64>().unwrap().shape(), (0, 3));
        assert!(Tensor::zeros(&[2, 2]).unwrap().into_dvector::<f64>().is_err());
    }
}
