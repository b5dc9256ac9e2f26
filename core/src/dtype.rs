//! Element types and scalar values.
//!
//! `DType` is the runtime tag carried by every tensor and every graph node;
//! [`Element`] links it to the Rust types `f64`, `f32`, `i64` and `bool`, so
//! generic code can move between the two worlds. [`Scalar`] is a typed scalar
//! that can sit inside an op's parameters: it compares and hashes by bit
//! pattern, so ops holding one still derive `Eq` and `Hash` (CSE needs them).
//!
//! # Promotion
//!
//! Two arrays in one binary function (`+`, `-`, `*`, `/`, `maximum`,
//! comparisons, `where`, `matmul`, `pow`...) are first cast to the dtype
//! they combine to, by JAX's lattice with 64-bit types ([`promote_types`]):
//! `bool < i64 < f32 < f64`, the greater wins, so `i64` with `f64` is `f64`
//! and `i64` with `f32` is `f32`, as in JAX. (An op applied directly, with
//! `Var::apply`, takes one dtype, as in `jax.lax`: an `Err` naming the op
//! and both dtypes otherwise.) A Rust scalar next to an array is *weakly
//! typed*, as a Python scalar is in JAX:
//!
//! | array \ scalar | `f64` literal (`x * 2.5`) | `i64` literal (`x * 2`) |
//! |---|---|---|
//! | `f64` | `f64` | `f64` |
//! | `f32` | `f32` (the scalar rounded to `f32`) | `f32` |
//! | `i64` | `f64` (the array converted) | `i64` |
//! | `bool` | `f64` | `i64` |
//!
//! So `[1, 2, 3] * 2.5` is `[2.5, 5.0, 7.5]` in `f64`, never a silent
//! truncation. `mean`, `var` and `std` of an integer array are `f64`, and
//! so are the float functions of one (`sqrt`, `exp`, `sin`, `tanh`,
//! `softmax`, ...), as in JAX. `/` is true division, as `jnp`'s and
//! torch's: two integer arrays (or an integer array and an `i64` scalar)
//! divide as `f64`. `lax::div` is integer division truncating toward zero,
//! as `jax.lax.div`: a zero divisor gives -1, and `rem` by zero gives the
//! dividend, as in XLA.

use crate::tensor::Storage;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The element type of a tensor or a graph value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 64-bit IEEE float, the default.
    F64,
    /// 32-bit IEEE float.
    F32,
    /// 64-bit signed integer (indices, counts).
    I64,
    /// Boolean (comparison results, masks).
    Bool,
}

/// The dtype two arrays of dtypes `a` and `b` combine to, by JAX's
/// promotion lattice with 64-bit types enabled: `bool < i64 < f32 < f64`,
/// the result the greater (so `i64` with `f32` is `f32`, as in JAX, and
/// `f32` with `f64` is `f64`).
///
/// ```
/// use anvil_core::{promote_types, DType};
/// assert_eq!(promote_types(DType::I64, DType::F32), DType::F32);
/// assert_eq!(promote_types(DType::F64, DType::F32), DType::F64);
/// assert_eq!(promote_types(DType::Bool, DType::I64), DType::I64);
/// ```
pub fn promote_types(a: DType, b: DType) -> DType {
    let rank = |d: DType| match d {
        DType::Bool => 0,
        DType::I64 => 1,
        DType::F32 => 2,
        DType::F64 => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

impl DType {
    /// Whether values of this type are floating point (and so differentiable).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32)
    }

    /// The short name used in printed graphs: `f64`, `f32`, `i64`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// Size of one element in bytes.
    pub fn size_of(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 => 4,
            DType::Bool => 1,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be a tensor element.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static {
    /// The dtype tag of this type.
    const DTYPE: DType;
    /// Converts from a scalar, with `as`-cast semantics (float to int truncates).
    fn from_scalar(s: Scalar) -> Self;
    /// Wraps into a scalar.
    fn to_scalar(self) -> Scalar;
    /// Borrows the elements of a storage of this type, `None` for another dtype.
    fn slice(storage: &Storage) -> Option<&[Self]>;
    /// Wraps a vector of elements into a storage.
    fn into_storage(data: Vec<Self>) -> Storage;
    /// The shared buffer of a storage of this type, `None` for another dtype.
    fn buffer(storage: &Storage) -> Option<&Arc<Vec<Self>>>;
}

macro_rules! element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::F64(v) => v as $t,
                    Scalar::F32(v) => v as $t,
                    Scalar::I64(v) => v as $t,
                    Scalar::Bool(v) => (v as u8) as $t,
                }
            }
            fn to_scalar(self) -> Scalar {
                Scalar::$d(self)
            }
            fn slice(storage: &Storage) -> Option<&[Self]> {
                match storage {
                    Storage::$d(v) => Some(v),
                    _ => None,
                }
            }
            fn into_storage(data: Vec<Self>) -> Storage {
                Storage::$d(Arc::new(data))
            }
            fn buffer(storage: &Storage) -> Option<&Arc<Vec<Self>>> {
                match storage {
                    Storage::$d(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
element!(f64, F64);
element!(f32, F32);
element!(i64, I64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F64(v) => v != 0.0,
            Scalar::F32(v) => v != 0.0,
            Scalar::I64(v) => v != 0,
            Scalar::Bool(v) => v,
        }
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    fn slice(storage: &Storage) -> Option<&[Self]> {
        match storage {
            Storage::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn into_storage(data: Vec<Self>) -> Storage {
        Storage::Bool(Arc::new(data))
    }
    fn buffer(storage: &Storage) -> Option<&Arc<Vec<Self>>> {
        match storage {
            Storage::Bool(v) => Some(v),
            _ => None,
        }
    }
}

/// A single typed value, usable as an op parameter (fill values, pad values).
///
/// Equality and hashing use the bit pattern, so `NaN == NaN` here and
/// `0.0 != -0.0`: two ops are equal exactly when they compute the same thing.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// An `f64` value.
    F64(f64),
    /// An `f32` value.
    F32(f32),
    /// An `i64` value.
    I64(i64),
    /// A `bool` value.
    Bool(bool),
}

impl Scalar {
    /// The dtype of this scalar.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F64(_) => DType::F64,
            Scalar::F32(_) => DType::F32,
            Scalar::I64(_) => DType::I64,
            Scalar::Bool(_) => DType::Bool,
        }
    }

    /// Converts to another dtype with `as`-cast semantics.
    pub fn cast(self, dtype: DType) -> Scalar {
        match dtype {
            DType::F64 => Scalar::F64(f64::from_scalar(self)),
            DType::F32 => Scalar::F32(f32::from_scalar(self)),
            DType::I64 => Scalar::I64(i64::from_scalar(self)),
            DType::Bool => Scalar::Bool(bool::from_scalar(self)),
        }
    }

    /// The value as `f64`.
    pub fn to_f64(self) -> f64 {
        f64::from_scalar(self)
    }

    fn bits(self) -> u64 {
        match self {
            Scalar::F64(v) => v.to_bits(),
            Scalar::F32(v) => u64::from(v.to_bits()),
            Scalar::I64(v) => v as u64,
            Scalar::Bool(v) => u64::from(v),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype() && self.bits() == other.bits()
    }
}
impl Eq for Scalar {}
impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.bits().hash(state);
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::F64(v) => write!(f, "{v:?}"),
            Scalar::F32(v) => write!(f, "{v:?}"),
            Scalar::I64(v) => write!(f, "{v}"),
            Scalar::Bool(v) => write!(f, "{v}"),
        }
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::F64(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::F32(v)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::I64(v)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}
