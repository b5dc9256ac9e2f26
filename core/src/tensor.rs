//! Host tensors: dense, row-major, immutable, cheap to clone.
//!
//! A [`Tensor`] is a shape plus a reference-counted buffer of one dtype. It is
//! what users pass to and get back from a call; inside a trace the same
//! values are [`Var`](crate::Var)s. Tensors are immutable: clones share the
//! buffer, and the CPU backend writes in place only into buffers it owns
//! alone (`Arc::get_mut`), which is what lets it reuse memory without copies
//! that anyone could observe.

use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result};
use crate::shape::{numel, strides, TensorType};
use std::fmt;
use std::sync::Arc;

/// The buffer of a tensor: one variant per dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    /// `f64` elements.
    F64(Arc<Vec<f64>>),
    /// `f32` elements.
    F32(Arc<Vec<f32>>),
    /// `i64` elements.
    I64(Arc<Vec<i64>>),
    /// `bool` elements.
    Bool(Arc<Vec<bool>>),
}

/// Calls `$body` with `$v` bound to the typed `Arc<Vec<T>>` inside a storage.
#[macro_export]
macro_rules! with_storage {
    ($storage:expr, $v:ident => $body:expr) => {
        match $storage {
            $crate::Storage::F64($v) => $body,
            $crate::Storage::F32($v) => $body,
            $crate::Storage::I64($v) => $body,
            $crate::Storage::Bool($v) => $body,
        }
    };
}

impl Storage {
    /// How many tensors share this buffer (1: the holder is the only one).
    pub fn ref_count(&self) -> usize {
        match self {
            Storage::F64(a) => Arc::strong_count(a),
            Storage::F32(a) => Arc::strong_count(a),
            Storage::I64(a) => Arc::strong_count(a),
            Storage::Bool(a) => Arc::strong_count(a),
        }
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::F64(_) => DType::F64,
            Storage::F32(_) => DType::F32,
            Storage::I64(_) => DType::I64,
            Storage::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_storage!(self, v => v.len())
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A buffer of `len` copies of `value`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] naming `what` and the bytes when the system
    /// cannot provide them (the allocation is tried, never aborting).
    pub fn full(what: &str, value: Scalar, len: usize) -> Result<Storage> {
        Ok(match value {
            Scalar::F64(v) => Storage::F64(Arc::new(try_filled(what, len, v)?)),
            Scalar::F32(v) => Storage::F32(Arc::new(try_filled(what, len, v)?)),
            Scalar::I64(v) => Storage::I64(Arc::new(try_filled(what, len, v)?)),
            Scalar::Bool(v) => Storage::Bool(Arc::new(try_filled(what, len, v)?)),
        })
    }

    /// Element `i` as a scalar.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        with_storage!(self, v => v.get(i).map(|x| x.to_scalar()))
    }

    /// Converts every element to another dtype (`as`-cast semantics).
    pub fn cast(&self, dtype: DType) -> Storage {
        fn conv<S: Element, T: Element>(v: &[S]) -> Vec<T> {
            v.iter().map(|&x| T::from_scalar(x.to_scalar())).collect()
        }
        if self.dtype() == dtype {
            return self.clone();
        }
        with_storage!(self, v => match dtype {
            DType::F64 => f64::into_storage(conv(v)),
            DType::F32 => f32::into_storage(conv(v)),
            DType::I64 => i64::into_storage(conv(v)),
            DType::Bool => bool::into_storage(conv(v)),
        })
    }
}

/// A tensor's shape, stored inline up to rank [`Dims::INLINE`] (no
/// allocation for the shapes of nearly every tensor: a kernel's output costs
/// its buffer, not also a `Vec` for its shape).
#[derive(Clone)]
enum Dims {
    Inline { len: u8, dims: [usize; Dims::INLINE] },
    Heap(Vec<usize>),
}

impl Dims {
    const INLINE: usize = 6;

    fn new(shape: &[usize]) -> Dims {
        if shape.len() <= Dims::INLINE {
            let mut dims = [0; Dims::INLINE];
            dims[..shape.len()].copy_from_slice(shape);
            Dims::Inline { len: shape.len() as u8, dims }
        } else {
            Dims::Heap(shape.to_vec())
        }
    }
}

impl std::ops::Deref for Dims {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        match self {
            Dims::Inline { len, dims } => &dims[..*len as usize],
            Dims::Heap(v) => v,
        }
    }
}

impl std::fmt::Debug for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl PartialEq for Dims {
    fn eq(&self, other: &Dims) -> bool {
        **self == **other
    }
}

/// A dense, row-major, immutable n-dimensional array on the host.
///
/// ```
/// use anvil_core::Tensor;
/// let t = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// assert_eq!(t.shape(), &[2, 2]);
/// assert_eq!(t.to_vec::<f64>()?, vec![1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct Tensor {
    shape: Dims,
    storage: Storage,
}

/// A vector of `len` copies of `value`, allocated with `try_reserve`: a
/// request the system refuses is an [`Error::OutOfMemory`] naming `what`
/// and the bytes, not an abort.
///
/// # Errors
/// As described.
pub fn try_filled<T: Clone>(what: &str, len: usize, value: T) -> Result<Vec<T>> {
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|e| Error::OutOfMemory {
        what: what.into(),
        bytes,
        msg: e.to_string(),
    })?;
    v.resize(len, value);
    Ok(v)
}

/// Checks that `dtype` is numeric for the constructor `what` (a range of
/// `bool`s means nothing).
fn numeric(what: &str, dtype: DType) -> Result<()> {
    if dtype == DType::Bool {
        return Err(Error::dtype(what, "dtype", dtype, "a numeric dtype (f64, f32, i64)"));
    }
    Ok(())
}

/// The element count of a tensor of `shape` made by `what`, or an error
/// naming it when the count or the byte size cannot be addressed.
fn alloc_len(what: &str, shape: &[usize], dtype: DType) -> Result<usize> {
    TensorType::new(dtype, shape).check_size(what)?;
    Ok(numel(shape))
}

impl Tensor {
    /// A tensor from row-major data and a shape.
    ///
    /// # Errors
    /// [`Error::DataLength`] when `data.len()` is not the product of `shape`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Tensor::from_storage(T::into_storage(data), shape)
    }

    /// A tensor from a storage and a shape.
    ///
    /// # Errors
    /// [`Error::DataLength`] when the storage length does not match the shape.
    pub fn from_storage(storage: Storage, shape: &[usize]) -> Result<Tensor> {
        if storage.len() != numel(shape) {
            return Err(Error::DataLength {
                what: "Tensor::from_vec".into(),
                len: storage.len(),
                shape: shape.to_vec(),
                numel: numel(shape),
            });
        }
        Ok(Tensor { shape: Dims::new(shape), storage })
    }

    /// A rank-1 tensor over a whole storage (its shape is its length, so
    /// unlike [`Tensor::from_storage`] this cannot fail).
    ///
    /// ```
    /// use anvil_core::{Storage, Tensor};
    /// use std::sync::Arc;
    /// let t = Tensor::from_flat_storage(Storage::F32(Arc::new(vec![1.0, 2.0])));
    /// assert_eq!(t.shape(), [2]);
    /// ```
    pub fn from_flat_storage(storage: Storage) -> Tensor {
        Tensor { shape: Dims::new(&[storage.len()]), storage }
    }

    /// A rank-0 tensor holding one value.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor { shape: Dims::new(&[]), storage: T::into_storage(vec![value]) }
    }

    /// A rank-0 tensor holding a typed scalar.
    pub fn from_scalar(value: Scalar) -> Tensor {
        match value {
            Scalar::F64(v) => Tensor::scalar(v),
            Scalar::F32(v) => Tensor::scalar(v),
            Scalar::I64(v) => Tensor::scalar(v),
            Scalar::Bool(v) => Tensor::scalar(v),
        }
    }

    /// A rank-1 `f64` tensor from a slice.
    pub fn vector(data: &[f64]) -> Tensor {
        Tensor { shape: Dims::new(&[data.len()]), storage: f64::into_storage(data.to_vec()) }
    }

    /// A tensor of `shape` filled with `value`, of `value`'s dtype.
    ///
    /// # Errors
    /// [`Error::Shape`] when the shape has more elements than memory can
    /// address; [`Error::OutOfMemory`] when the system refuses the bytes.
    pub fn full_scalar(shape: &[usize], value: Scalar) -> Result<Tensor> {
        let what = "Tensor::full";
        let len = alloc_len(what, shape, value.dtype())?;
        Ok(Tensor { shape: Dims::new(shape), storage: Storage::full(what, value, len)? })
    }

    /// An `f64` tensor of `shape` filled with `value`.
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`].
    pub fn full(shape: &[usize], value: f64) -> Result<Tensor> {
        Tensor::full_scalar(shape, Scalar::F64(value))
    }

    /// An `f64` tensor of zeros.
    ///
    /// ```
    /// let z = anvil_core::Tensor::zeros(&[2, 3])?;
    /// assert_eq!(z.shape(), &[2, 3]);
    /// assert!(anvil_core::Tensor::zeros(&[1 << 40, 1 << 40]).is_err());
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`].
    pub fn zeros(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 0.0)
    }

    /// An `f64` tensor of ones.
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`].
    pub fn ones(shape: &[usize]) -> Result<Tensor> {
        Tensor::full(shape, 1.0)
    }

    /// Zeros of any dtype (`false` for `bool`).
    ///
    /// ```
    /// use anvil_core::{DType, Tensor};
    /// assert_eq!(Tensor::zeros_of(&[2], DType::I64)?.to_vec::<i64>()?, vec![0, 0]);
    /// assert_eq!(Tensor::ones_of(&[2], DType::F32)?.to_vec::<f32>()?, vec![1.0, 1.0]);
    /// assert_eq!(Tensor::full_of(&[2], 7i64)?.to_vec::<i64>()?, vec![7, 7]);
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`].
    pub fn zeros_of(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full_scalar(shape, Scalar::I64(0).cast(dtype))
    }

    /// A tensor of `shape` filled with `value`, of `value`'s dtype:
    /// `Tensor::full_of(&[2], 3i64)`, `Tensor::full_of(&[2], true)`.
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`].
    pub fn full_of<T: Element>(shape: &[usize], value: T) -> Result<Tensor> {
        Tensor::full_scalar(shape, value.to_scalar())
    }

    /// Ones of any dtype (`true` for `bool`).
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`].
    pub fn ones_of(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full_scalar(shape, Scalar::I64(1).cast(dtype))
    }

    /// The `n × n` identity matrix in `f64`.
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`] for the shape `[n, n]`.
    pub fn eye(n: usize) -> Result<Tensor> {
        Tensor::eye_of(n, DType::F64)
    }

    /// The `n × n` identity matrix of any dtype (`true` on the diagonal for
    /// `bool`).
    ///
    /// ```
    /// use anvil_core::{DType, Tensor};
    /// let i = Tensor::eye_of(2, DType::I64)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 0, 0, 1]);
    /// assert_eq!(Tensor::eye_of(2, DType::Bool)?.to_vec::<bool>()?, vec![true, false, false, true]);
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::full_scalar`] for the shape `[n, n]`.
    pub fn eye_of(n: usize, dtype: DType) -> Result<Tensor> {
        fn set_diagonal<T: Element>(v: &mut [T], n: usize, one: T) {
            v.iter_mut().step_by(n + 1).for_each(|x| *x = one);
        }
        let mut t = Tensor::zeros_of(&[n, n], dtype)?;
        let shared = || Error::invalid("eye", "n", "shared buffer");
        match &mut t.storage {
            Storage::F64(v) => set_diagonal(Arc::get_mut(v).ok_or_else(shared)?, n, 1.0),
            Storage::F32(v) => set_diagonal(Arc::get_mut(v).ok_or_else(shared)?, n, 1.0),
            Storage::I64(v) => set_diagonal(Arc::get_mut(v).ok_or_else(shared)?, n, 1),
            Storage::Bool(v) => set_diagonal(Arc::get_mut(v).ok_or_else(shared)?, n, true),
        }
        Ok(t)
    }

    /// `start, start + step, ...` up to but excluding `stop`, in `f64` (as `numpy.arange`).
    ///
    /// # Errors
    /// A zero or non-finite step, a non-finite bound, or more values than
    /// memory can hold.
    pub fn arange(start: f64, stop: f64, step: f64) -> Result<Tensor> {
        Tensor::arange_of(start, stop, step, DType::F64)
    }

    /// [`Tensor::arange`] in another numeric dtype (as `numpy.arange(...,
    /// dtype=...)`): each value is computed in `f64` then converted, so
    /// `i64` values are exact up to 2⁵³.
    ///
    /// ```
    /// use anvil_core::{DType, Tensor};
    /// assert_eq!(Tensor::arange_of(0.0, 5.0, 2.0, DType::I64)?.to_vec::<i64>()?, vec![0, 2, 4]);
    /// assert!(Tensor::arange_of(0.0, 5.0, 1.0, DType::Bool).is_err());
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::arange`]; a `bool` dtype.
    pub fn arange_of(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        numeric("arange", dtype)?;
        if step == 0.0 || !step.is_finite() {
            return Err(Error::invalid("arange", "step", format!("{step} is not a usable step")));
        }
        if !start.is_finite() || !stop.is_finite() {
            return Err(Error::invalid(
                "arange",
                "start, stop",
                format!("the bounds {start} and {stop} must be finite"),
            ));
        }
        let count = ((stop - start) / step).ceil().max(0.0);
        if count >= isize::MAX as f64 {
            return Err(Error::invalid(
                "arange",
                "step",
                format!("arange({start}, {stop}, {step}) would have {count:e} values"),
            ));
        }
        let n = alloc_len("arange", &[count as usize], dtype)?;
        let mut v = try_filled("arange", n, 0.0)?;
        v.iter_mut().enumerate().for_each(|(i, x)| *x = start + i as f64 * step);
        Ok(Tensor { shape: Dims::new(&[n]), storage: f64::into_storage(v).cast(dtype) })
    }

    /// `num` evenly spaced values from `start` to `stop` inclusive, in `f64`.
    ///
    /// # Errors
    /// More values than memory can hold.
    pub fn linspace(start: f64, stop: f64, num: usize) -> Result<Tensor> {
        Tensor::linspace_of(start, stop, num, DType::F64)
    }

    /// [`Tensor::linspace`] in another numeric dtype: each value is computed
    /// in `f64` then converted (`i64` values are floored, as NumPy 2's and
    /// JAX's integer `linspace`).
    ///
    /// ```
    /// use anvil_core::{DType, Tensor};
    /// let t = Tensor::linspace_of(0.0, 1.0, 3, DType::F32)?;
    /// assert_eq!(t.to_vec::<f32>()?, vec![0.0, 0.5, 1.0]);
    /// let i = Tensor::linspace_of(-5.0, 5.0, 4, DType::I64)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![-5, -2, 1, 5]);
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::linspace`]; a `bool` dtype.
    pub fn linspace_of(start: f64, stop: f64, num: usize, dtype: DType) -> Result<Tensor> {
        numeric("linspace", dtype)?;
        let n = alloc_len("linspace", &[num], dtype)?;
        let step = if n > 1 { (stop - start) / (n - 1) as f64 } else { 0.0 };
        let mut v = try_filled("linspace", n, 0.0)?;
        v.iter_mut().enumerate().for_each(|(i, x)| *x = start + i as f64 * step);
        if let (Some(last), true) = (v.last_mut(), n > 1) {
            *last = stop;
        }
        if dtype == DType::I64 {
            // NumPy 2 and JAX floor an integer linspace (a cast truncates).
            v.iter_mut().for_each(|x| *x = x.floor());
        }
        Ok(Tensor { shape: Dims::new(&[n]), storage: f64::into_storage(v).cast(dtype) })
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The static type (dtype and shape) of this tensor.
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype(), self.shape.to_vec())
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// The buffer.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Whether `self` and `other` are the same buffer seen with the same
    /// shape (clones of one tensor): what lets one captured tensor used
    /// twice become one input.
    pub fn same_buffer(&self, other: &Tensor) -> bool {
        let ptr = |s: &Storage| with_storage!(s, v => Arc::as_ptr(v) as *const u8);
        self.shape == other.shape
            && self.dtype() == other.dtype()
            && std::ptr::eq(ptr(&self.storage), ptr(&other.storage))
    }

    /// Consumes the tensor into its buffer.
    pub fn into_storage(self) -> Storage {
        self.storage
    }

    /// Borrows the elements as a slice of `T`.
    ///
    /// # Errors
    /// [`Error::DType`] when `T` is not this tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.slice_for("Tensor::as_slice")
    }

    /// [`Tensor::as_slice`] for the function `op`, which its error names.
    pub(crate) fn slice_for<T: Element>(&self, op: &str) -> Result<&[T]> {
        T::slice(&self.storage)
            .ok_or_else(|| Error::dtype(op, "self", self.dtype(), T::DTYPE.name()))
    }

    /// Copies the elements out as a `Vec<T>` (same dtype required).
    ///
    /// # Errors
    /// [`Error::DType`] when `T` is not this tensor's dtype; use [`Tensor::cast`] first.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.as_slice::<T>().map(<[T]>::to_vec)
    }

    /// The elements converted to `f64`, whatever the dtype.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_storage!(&self.storage, v => v.iter().map(|&x| x.to_scalar().to_f64()).collect())
    }

    /// The single value of a one-element tensor, as `f64`.
    ///
    /// # Errors
    /// When the tensor does not have exactly one element.
    pub fn item(&self) -> Result<f64> {
        match (self.numel(), self.storage.get(0)) {
            (1, Some(s)) => Ok(s.to_f64()),
            _ => Err(Error::shape("Tensor::item", &[&self.shape], "expected exactly one element")),
        }
    }

    /// The element at a multi-index.
    pub fn get(&self, index: &[usize]) -> Option<Scalar> {
        if index.len() != self.rank() || index.iter().zip(self.shape.iter()).any(|(&i, &d)| i >= d)
        {
            return None;
        }
        let flat: usize = index.iter().zip(strides(&self.shape)).map(|(i, s)| i * s).sum();
        self.storage.get(flat)
    }

    /// Converts to another dtype (`as`-cast semantics).
    pub fn cast(&self, dtype: DType) -> Tensor {
        Tensor { shape: self.shape.clone(), storage: self.storage.cast(dtype) }
    }

    /// The same data with another shape of the same size; `-1` infers one dimension.
    ///
    /// # Errors
    /// A shape of a different size.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let to = crate::shape::reshape_target("Tensor::reshape", &self.shape, shape)?;
        Ok(Tensor { shape: Dims::new(&to), storage: self.storage.clone() })
    }

    /// The slice at `index` along `axis`, with that axis removed.
    ///
    /// # Errors
    /// An axis or index out of range.
    pub fn select_axis(&self, axis: usize, index: usize) -> Result<Tensor> {
        let shape = &self.shape;
        if axis >= shape.len() || index >= shape[axis] {
            return Err(Error::IndexOutOfBounds {
                op: "Tensor::select_axis".into(),
                index: index as i64,
                axis,
                size: shape.get(axis).copied().unwrap_or(0),
                arg: "self".into(),
                shape: shape.to_vec(),
            });
        }
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let mut out_shape = shape.to_vec();
        out_shape.remove(axis);
        let storage = with_storage!(&self.storage, v => {
            let mut out = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                let at = (o * shape[axis] + index) * inner;
                out.extend_from_slice(&v[at..at + inner]);
            }
            Element::into_storage(out)
        });
        Tensor::from_storage(storage, &out_shape)
    }

    /// Stacks tensors of one shape and dtype along a new axis `axis`.
    ///
    /// # Errors
    /// No tensors, differing shapes or dtypes, an axis past the new rank.
    pub fn stack(parts: &[Tensor], axis: usize) -> Result<Tensor> {
        let first = parts
            .first()
            .ok_or_else(|| Error::invalid("Tensor::stack", "parts", "needs at least one tensor"))?;
        if axis > first.rank() {
            return Err(Error::AxisOutOfRange {
                op: "Tensor::stack".into(),
                axis: axis as i64,
                shape: first.shape.to_vec(),
                arg: "0".into(),
            });
        }
        if let Some((i, p)) = parts
            .iter()
            .enumerate()
            .find(|(_, p)| p.shape != first.shape || p.dtype() != first.dtype())
        {
            return Err(Error::shape(
                "Tensor::stack",
                &[&first.shape, &p.shape],
                format!("part {i} differs from part 0 in shape or dtype"),
            ));
        }
        let outer: usize = first.shape[..axis].iter().product();
        let inner: usize = first.shape[axis..].iter().product();
        let mut out_shape = first.shape.to_vec();
        out_shape.insert(axis, parts.len());
        let storage = with_storage!(&first.storage, v0 => {
            let mut out = Vec::with_capacity(outer * inner * parts.len());
            for o in 0..outer {
                for p in parts {
                    let v = Element::slice(&p.storage).unwrap_or(&v0[..0]);
                    out.extend_from_slice(&v[o * inner..(o + 1) * inner]);
                }
            }
            Element::into_storage(out)
        });
        Tensor::from_storage(storage, &out_shape)
    }

    /// Whether `self` and `other` have the same shape and all elements satisfy
    /// `|a - b| <= atol + rtol * |b|` (as `numpy.allclose`; NaNs are equal to NaNs).
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64) -> bool {
        self.shape == other.shape
            && self
                .to_f64_vec()
                .iter()
                .zip(other.to_f64_vec())
                .all(|(&a, b)| close(a, b, rtol, atol))
    }

    /// The largest absolute elementwise difference, `None` if the shapes differ.
    pub fn max_abs_diff(&self, other: &Tensor) -> Option<f64> {
        (self.shape == other.shape).then(|| {
            self.to_f64_vec()
                .iter()
                .zip(other.to_f64_vec())
                .map(|(&a, b)| if a == b { 0.0 } else { (a - b).abs() })
                .fold(0.0, f64::max)
        })
    }

    /// Test helper: panics with both tensors printed unless [`Tensor::allclose`] holds.
    #[track_caller]
    pub fn assert_allclose(&self, expected: &Tensor, rtol: f64, atol: f64) {
        assert!(
            self.allclose(expected, rtol, atol),
            "tensors differ (rtol {rtol}, atol {atol}, max |diff| {:?})\n actual {:?}:\n{self}\n expected {:?}:\n{expected}",
            self.max_abs_diff(expected),
            self.shape,
            expected.shape
        );
    }
}

fn close(a: f64, b: f64, rtol: f64, atol: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol + rtol * b.abs()
}

impl<T: Element> From<T> for Tensor {
    fn from(v: T) -> Self {
        Tensor::scalar(v)
    }
}

// ---------------------------------------------------------------- printing

/// Above this many elements, `Display` shows only the first and last three
/// entries of each axis, as NumPy does.
const SUMMARY_THRESHOLD: usize = 1000;
const EDGE_ITEMS: usize = 3;

impl fmt::Display for Tensor {
    /// Prints like NumPy's `print(array)`: nested brackets, aligned columns,
    /// a dtype suffix for non-`f64` tensors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> =
            with_storage!(&self.storage, v => v.iter().map(|x| fmt_elem(x.to_scalar())).collect());
        let summarize = self.numel() > SUMMARY_THRESHOLD;
        let width = items.iter().map(String::len).max().unwrap_or(0);
        let mut out = String::new();
        write_axis(&mut out, &items, &self.shape, &strides(&self.shape), 0, 0, width, summarize);
        f.write_str(&out)?;
        if self.dtype() != DType::F64 {
            write!(f, " dtype={}", self.dtype())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}, {self})", self.ty())
    }
}

fn fmt_elem(s: Scalar) -> String {
    match s {
        Scalar::F64(v) => fmt_float(v),
        Scalar::F32(v) => fmt_float(f64::from(v)),
        other => other.to_string(),
    }
}

fn fmt_float(v: f64) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e16 {
        format!("{v:.0}.")
    } else if v.is_finite() && (v.abs() >= 1e16 || (v != 0.0 && v.abs() < 1e-4)) {
        format!("{v:e}")
    } else {
        let s = format!("{v:.8}");
        if s.contains('.') {
            s.trim_end_matches('0').to_string()
        } else {
            s
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn write_axis(
    out: &mut String,
    items: &[String],
    shape: &[usize],
    strides: &[usize],
    axis: usize,
    offset: usize,
    width: usize,
    summarize: bool,
) {
    if axis == shape.len() {
        out.push_str(&format!("{:>width$}", items[offset]));
        return;
    }
    out.push('[');
    let n = shape[axis];
    let sep = if axis + 1 == shape.len() {
        " ".to_string()
    } else {
        format!("{}\n{}", "\n".repeat(shape.len() - axis - 2), " ".repeat(axis + 1))
    };
    let mut first = true;
    let mut i = 0;
    while i < n {
        if summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS {
            out.push_str(&sep);
            out.push_str("...");
            i = n - EDGE_ITEMS;
            continue;
        }
        if !first {
            out.push_str(&sep);
        }
        first = false;
        write_axis(
            out,
            items,
            shape,
            strides,
            axis + 1,
            offset + i * strides[axis],
            width,
            summarize,
        );
        i += 1;
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_check_lengths() {
        assert!(Tensor::from_vec(vec![1.0, 2.0], &[3]).is_err());
        let t = Tensor::from_vec(Vec::<f64>::new(), &[0, 4]).unwrap();
        assert_eq!(t.numel(), 0);
        assert_eq!(
            Tensor::arange(0.0, 1.0, 0.25).unwrap().to_vec::<f64>().unwrap(),
            vec![0.0, 0.25, 0.5, 0.75]
        );
        assert_eq!(
            Tensor::linspace(0.0, 1.0, 3).unwrap().to_vec::<f64>().unwrap(),
            vec![0.0, 0.5, 1.0]
        );
        assert_eq!(Tensor::eye(2).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 0.0, 0.0, 1.0]);
        assert!(Tensor::arange(0.0, 1.0, 0.0).is_err());
        assert!(Tensor::eye(0).unwrap().numel() == 0);
    }

    #[test]
    fn constructors_of_every_dtype() {
        for dtype in [DType::F64, DType::F32, DType::I64, DType::Bool] {
            let z = Tensor::zeros_of(&[2, 3], dtype).unwrap();
            let o = Tensor::ones_of(&[2, 3], dtype).unwrap();
            let e = Tensor::eye_of(3, dtype).unwrap();
            assert_eq!((z.dtype(), o.dtype(), e.dtype()), (dtype, dtype, dtype));
            assert!(z.to_f64_vec().iter().all(|&v| v == 0.0));
            assert!(o.to_f64_vec().iter().all(|&v| v == 1.0));
            let diag: Vec<f64> = (0..9).map(|k| if k % 4 == 0 { 1.0 } else { 0.0 }).collect();
            assert_eq!(e.to_f64_vec(), diag, "{dtype}");
            let ranged = Tensor::arange_of(1.0, 4.0, 1.0, dtype);
            let spaced = Tensor::linspace_of(0.0, 4.0, 3, dtype);
            if dtype == DType::Bool {
                assert!(ranged.is_err() && spaced.is_err());
            } else {
                assert_eq!(ranged.unwrap().to_f64_vec(), vec![1.0, 2.0, 3.0]);
                let s = spaced.unwrap();
                assert_eq!((s.dtype(), s.to_f64_vec()), (dtype, vec![0.0, 2.0, 4.0]));
            }
        }
        assert_eq!(Tensor::full_of(&[2], 2.5f32).unwrap().to_vec::<f32>().unwrap(), vec![2.5; 2]);
        assert_eq!(Tensor::full_of(&[1], true).unwrap().dtype(), DType::Bool);
        assert!(Tensor::full_of(&[usize::MAX, 2], 1i64).is_err());
        assert!(Tensor::eye_of(1 << 32, DType::I64).is_err());
    }

    #[test]
    fn huge_constructors_are_errors_not_aborts() {
        let e = Tensor::zeros(&[usize::MAX, 2]).unwrap_err();
        assert!(e.to_string().contains("Tensor::full"), "{e}");
        assert!(Tensor::ones(&[1 << 62]).is_err());
        assert!(Tensor::eye(1 << 32).is_err());
        assert!(Tensor::linspace(0.0, 1.0, usize::MAX).is_err());
        assert!(Tensor::arange(0.0, 1e300, 1e-300).is_err());
        assert!(Tensor::arange(0.0, f64::INFINITY, 1.0).is_err());
        // Addressable but more than any machine has: the allocation is
        // refused with the bytes named, not an abort.
        let e = Tensor::zeros_of(&[1 << 40, 1 << 20], DType::Bool).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes, .. } if bytes == 1 << 60), "{e:?}");
    }

    #[test]
    fn prints_like_numpy() {
        let t = Tensor::from_vec(vec![1.0, 2.5, -3.0, 4.0], &[2, 2]).unwrap();
        assert_eq!(t.to_string(), "[[ 1. 2.5]\n [-3.  4.]]");
        let i = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
        assert_eq!(i.to_string(), "[1 2 3] dtype=i64");
        assert_eq!(Tensor::scalar(0.5).to_string(), "0.5");
        let big = Tensor::zeros(&[2000]).unwrap();
        assert!(big.to_string().contains("..."));
    }

    #[test]
    fn shapes_past_the_inline_rank_behave_the_same() {
        let shape = [2, 1, 3, 1, 1, 2, 1, 2]; // rank 8: stored on the heap
        let t = Tensor::from_vec((0..24).map(f64::from).collect(), &shape).unwrap();
        assert_eq!(t.shape(), &shape);
        assert_eq!(t.rank(), 8);
        assert_eq!(t.ty().shape(), shape);
        let r = t.reshape(&[4, 6]).unwrap();
        assert_eq!(r.shape(), &[4, 6]);
        assert_eq!(r.reshape(&[2, 1, 3, 1, 1, 2, 1, 2]).unwrap(), t);
        assert_ne!(t, Tensor::from_vec((0..24).map(f64::from).collect(), &[24]).unwrap());
        assert_eq!(t.get(&[1, 0, 2, 0, 0, 1, 0, 1]).unwrap(), Scalar::F64(23.0));
    }

    #[test]
    fn select_and_stack_are_inverse() {
        let t = Tensor::from_vec((0..24).map(|i| i as f64).collect(), &[2, 3, 4]).unwrap();
        for axis in 0..3 {
            let parts: Vec<Tensor> =
                (0..t.shape()[axis]).map(|i| t.select_axis(axis, i).unwrap()).collect();
            assert_eq!(Tensor::stack(&parts, axis).unwrap(), t);
        }
        assert_eq!(
            t.select_axis(1, 2).unwrap().to_vec::<f64>().unwrap(),
            vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]
        );
        assert!(t.select_axis(3, 0).is_err() && t.select_axis(0, 2).is_err());
    }

    #[test]
    fn wrong_dtype_access_is_an_error() {
        let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        let e = t.to_vec::<f64>().unwrap_err().to_string();
        assert!(e.contains("f32") && e.contains("f64"), "{e}");
    }
}
