//! Moving data between [`Tensor`](crate::Tensor)s and the array types of the Rust ecosystem:
//! `faer` matrices, `ndarray` arrays, `nalgebra` matrices, `.npy` files and
//! `serde`, each behind a cargo feature of the same name (`faer`,
//! `ndarray`, `nalgebra`, `npy`, `serde`; the facade `anvil` forwards them).
//!
//! A tensor is a shape and a reference-counted, row-major (C-order),
//! contiguous buffer. A conversion shares that buffer instead of copying it
//! wherever the other type can describe the same memory:
//!
//! | from → to | copies? |
//! |---|---|
//! | `Tensor` → `ArrayViewD` (`Tensor::ndarray_view`) | never |
//! | `Array<T, D>` → `Tensor` (`From`) | no, when the array is in standard (C) layout and starts at its buffer's start; else one copy |
//! | `Tensor` → `ArrayD` (`Tensor::into_ndarray`) | no, when no other tensor shares the buffer; else one copy |
//! | `Tensor` → `faer::MatRef` (`Tensor::faer_view`) | never (a row-major view: row stride = columns) |
//! | `faer::Mat` ↔ `Tensor` (`From`, `TryFrom`) | one copy (faer stores columns, with padding) |
//! | `Tensor` → `nalgebra` matrix view (`Tensor::nalgebra_view`, a `RowMajorView`) | never (row stride = columns, column stride 1) |
//! | `DVector` ↔ `Tensor` of rank 1 | no, when the buffer is not shared |
//! | `DMatrix` ↔ `Tensor` | one copy (nalgebra stores columns) |
//! | `.npy` ↔ `Tensor` (`Tensor::read_npy`, `Tensor::write_npy`) | one read or write (Fortran-order files are transposed on read) |
//!
//! The views borrow the tensor, so the borrow checker keeps the buffer alive
//! and immutable for as long as the view exists.

#[cfg(feature = "approx")]
mod approx;
#[cfg(feature = "faer")]
mod faer;
#[cfg(feature = "nalgebra")]
mod nalgebra;
#[cfg(feature = "nalgebra")]
pub use nalgebra::RowMajorView;
#[cfg(feature = "ndarray")]
mod ndarray;
#[cfg(feature = "npy")]
mod npy;
#[cfg(feature = "serde")]
mod serde;

#[cfg(any(feature = "ndarray", feature = "nalgebra"))]
use crate::{dtype::Element, error::Result, tensor::Tensor};

/// The tensor's buffer as an owned vector: moved out when this tensor holds
/// the only reference to it, copied otherwise.
#[cfg(any(feature = "ndarray", feature = "nalgebra"))]
fn take_buffer<T: Element>(t: Tensor, what: &str) -> Result<Vec<T>> {
    let dtype = t.dtype();
    let storage = t.into_storage();
    let Some(buffer) = T::buffer(&storage) else {
        return Err(crate::Error::dtype(what, "tensor", dtype, T::DTYPE.to_string()));
    };
    let buffer = buffer.clone();
    drop(storage);
    Ok(std::sync::Arc::try_unwrap(buffer).unwrap_or_else(|shared| shared.as_ref().clone()))
}
