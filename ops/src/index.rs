//! Indexing by integer tensors: `take` (gather along one axis) and its
//! transpose `scatter_add`.
//!
//! `take(x, idx, axis)` follows `numpy.take`: the result has shape
//! `x.shape[..axis] ++ idx.shape ++ x.shape[axis+1..]`; negative indices count
//! from the end. Indexing by a list of integers and by a single integer are
//! `take` with a constant index of rank 1 and rank 0 (see
//! [`crate::VarExt::index`] and [`crate::VarExt::at`]). Indices are data, so an
//! index out of bounds is found when the kernel runs and reported as an error
//! naming the op, the index and the axis.

use anvil_core::{op::expect_arity, DType, Error, Op, Result, TensorType};

fn check_indices(op: &str, arg: &str, t: &TensorType) -> Result<()> {
    if t.dtype == DType::I64 {
        Ok(())
    } else {
        Err(Error::dtype(op, arg, t.dtype, "i64"))
    }
}

fn check_axis(op: &str, axis: usize, t: &TensorType) -> Result<()> {
    if axis < t.rank() {
        Ok(())
    } else {
        Err(Error::AxisOutOfRange {
            op: op.into(),
            axis: axis as i64,
            shape: t.shape.clone(),
            arg: "0".into(),
        })
    }
}

/// `numpy.take(x, indices, axis)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Take {
    /// The indexed axis of the operand (non-negative).
    pub axis: usize,
}

impl Op for Take {
    fn name(&self) -> &'static str {
        "take"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (x, idx) = (&inputs[0], &inputs[1]);
        check_axis("take", self.axis, x)?;
        check_indices("take", "1 (indices)", idx)?;
        let mut shape = x.shape[..self.axis].to_vec();
        shape.extend_from_slice(&idx.shape);
        shape.extend_from_slice(&x.shape[self.axis + 1..]);
        Ok(TensorType::new(x.dtype, shape))
    }
    fn params(&self) -> String {
        format!("axis={}", self.axis)
    }
}

/// The transpose of [`Take`]: a zero tensor whose `axis` has `size` entries,
/// into which `updates` are added at `indices` (repeated indices accumulate).
/// `updates` has the shape `take` would give: `out[..axis] ++ idx ++ out[axis+1..]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ScatterAdd {
    /// The scattered axis of the result.
    pub axis: usize,
    /// The size of that axis in the result.
    pub size: usize,
}

impl ScatterAdd {
    /// The result shape for `updates` scattered by indices of rank `idx_rank`.
    fn out_shape(&self, updates: &[usize], idx_rank: usize) -> Option<Vec<usize>> {
        if updates.len() < self.axis + idx_rank {
            return None;
        }
        let mut s = updates[..self.axis].to_vec();
        s.push(self.size);
        s.extend_from_slice(&updates[self.axis + idx_rank..]);
        Some(s)
    }
}

impl Op for ScatterAdd {
    fn name(&self) -> &'static str {
        "scatter_add"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (u, idx) = (&inputs[0], &inputs[1]);
        check_indices("scatter_add", "1 (indices)", idx)?;
        let fits = self.out_shape(&u.shape, idx.rank());
        let idx_matches = u.shape.len() >= self.axis + idx.rank()
            && u.shape[self.axis..self.axis + idx.rank()] == idx.shape[..];
        match fits {
            Some(s) if idx_matches => Ok(TensorType::new(u.dtype, s)),
            _ => Err(Error::shape(
                "scatter_add",
                &[&u.shape, &idx.shape],
                format!("updates (argument 0) must have the indices' shape at axis {}", self.axis),
            )),
        }
    }
    fn params(&self) -> String {
        format!("axis={}, size={}", self.axis, self.size)
    }
}
