//! `ndarray` arrays (feature `ndarray`).

use super::take_buffer;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use ndarray::{Array, ArrayD, ArrayView, ArrayViewD, Dimension, IxDyn};

impl Tensor {
    /// An `ndarray` view of the tensor, sharing its buffer (no copy).
    ///
    /// ```
    /// # use anvil_core::Tensor;
    /// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let a = t.ndarray_view::<f64>()?;
    /// assert_eq!(a[[1, 2]], 6.0);
    /// assert!(std::ptr::eq(a.as_ptr(), t.as_slice::<f64>()?.as_ptr()));
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// A tensor of another dtype than `T`.
    pub fn ndarray_view<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        let data = self.slice_for::<T>("Tensor::ndarray_view")?;
        ArrayView::from_shape(IxDyn(self.shape()), data)
            .map_err(|e| Error::shape("Tensor::ndarray_view", &[self.shape()], e.to_string()))
    }

    /// The tensor as an owned `ndarray` array: its buffer is moved, not
    /// copied, when no other tensor shares it (otherwise it is copied).
    ///
    /// # Errors
    /// A tensor of another dtype than `T`.
    pub fn into_ndarray<T: Element>(self) -> Result<ArrayD<T>> {
        let shape = self.shape().to_vec();
        let data = take_buffer::<T>(self, "Tensor::into_ndarray")?;
        Array::from_shape_vec(IxDyn(&shape), data)
            .map_err(|e| Error::shape("Tensor::into_ndarray", &[&shape], e.to_string()))
    }
}

impl<T: Element, D: Dimension> From<Array<T, D>> for Tensor {
    /// Takes the array's buffer without copying when it is in standard (C)
    /// layout and starts at the buffer's start; copies it otherwise
    /// (transposed, sliced or Fortran-order arrays).
    fn from(a: Array<T, D>) -> Tensor {
        let shape = a.shape().to_vec();
        let data = if a.is_standard_layout() {
            match a.into_raw_vec_and_offset() {
                (v, None | Some(0)) if v.len() == shape.iter().product::<usize>() => v,
                (v, offset) => {
                    let o = offset.unwrap_or(0);
                    v[o..o + shape.iter().product::<usize>()].to_vec()
                }
            }
        } else {
            a.iter().copied().collect()
        };
        Tensor::from_vec(data, &shape).expect("an array's elements fill its shape")
    }
}

impl<T: Element, D: Dimension> From<ArrayView<'_, T, D>> for Tensor {
    /// Copies the viewed elements into a new tensor (row-major).
    fn from(a: ArrayView<'_, T, D>) -> Tensor {
        let shape = a.shape().to_vec();
        let data = match a.as_slice() {
            Some(s) => s.to_vec(),
            None => a.iter().copied().collect(),
        };
        Tensor::from_vec(data, &shape).expect("an array's elements fill its shape")
    }
}

impl<T: Element> TryFrom<Tensor> for ArrayD<T> {
    type Error = Error;
    /// [`Tensor::into_ndarray`].
    fn try_from(t: Tensor) -> Result<ArrayD<T>> {
        t.into_ndarray()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{s, Array2, Ix2};

    #[test]
    fn zero_copy_both_ways_when_the_layout_allows() {
        let a = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f64);
        let p = a.as_ptr();
        let t = Tensor::from(a);
        assert_eq!(t.shape(), &[3, 4]);
        assert!(std::ptr::eq(t.as_slice::<f64>().unwrap().as_ptr(), p));
        assert!(std::ptr::eq(t.ndarray_view::<f64>().unwrap().as_ptr(), p));
        let back = t.into_ndarray::<f64>().unwrap().into_dimensionality::<Ix2>().unwrap();
        assert!(std::ptr::eq(back.as_ptr(), p));
        assert_eq!(back[[2, 3]], 11.0);
    }

    #[test]
    fn other_layouts_are_copied_in_logical_order() {
        let a = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as i64);
        let t = Tensor::from(a.t().to_owned());
        assert_eq!(t.shape(), &[4, 3]);
        assert_eq!(t.to_vec::<i64>().unwrap()[..4], [0, 4, 8, 1]);
        let f = Array2::from_shape_vec((2, 2).f(), vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(Tensor::from(f).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
        let sliced = Tensor::from(a.slice(s![1.., ..;2]));
        assert_eq!(sliced.to_vec::<i64>().unwrap(), vec![4, 6, 8, 10]);
        // A shared buffer is copied, never taken from the other holder.
        let t = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        let keep = t.clone();
        let arr = t.into_ndarray::<bool>().unwrap();
        assert!(!std::ptr::eq(arr.as_ptr(), keep.as_slice::<bool>().unwrap().as_ptr()));
        assert!(keep.ndarray_view::<f64>().is_err());
    }

    use ndarray::ShapeBuilder;
}
