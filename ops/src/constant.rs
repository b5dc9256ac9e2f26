//! Ops with no operands that make values: `full` and `iota`. (`eye` is a
//! composite: `iota == iota^T`.) A captured tensor is a `Constant` node,
//! which lives in `anvil-core` because tracing itself creates it.

use anvil_core::{op::expect_arity, DType, Error, Op, Result, Scalar, TensorType};

/// A tensor of `shape` filled with `value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Full {
    /// The shape.
    pub shape: Vec<usize>,
    /// The value; its dtype is the result's.
    pub value: Scalar,
}

impl Op for Full {
    fn name(&self) -> &'static str {
        "full"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 0)?;
        Ok(TensorType::new(self.value.dtype(), self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, value={}", self.shape, self.value)
    }
}

/// `0, 1, 2, ...` along `axis` of `shape`, constant along the other axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Iota {
    /// The shape.
    pub shape: Vec<usize>,
    /// The counting axis.
    pub axis: usize,
    /// The result dtype (not bool).
    pub dtype: DType,
}

impl Op for Iota {
    fn name(&self) -> &'static str {
        "iota"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 0)?;
        if self.axis >= self.shape.len() {
            return Err(Error::AxisOutOfRange {
                op: "iota".into(),
                axis: self.axis as i64,
                shape: self.shape.clone(),
                arg: "axis".into(),
            });
        }
        crate::elementwise::Domain::Numeric.check("iota", 0, self.dtype)?;
        Ok(TensorType::new(self.dtype, self.shape.clone()))
    }
    fn params(&self) -> String {
        format!("shape={:?}, axis={}, dtype={}", self.shape, self.axis, self.dtype)
    }
}
