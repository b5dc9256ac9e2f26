//! `matmul` with `numpy.matmul` semantics: 1-D operands are promoted (a
//! vector on the left is a row, on the right a column) and the added axis is
//! removed from the result; leading batch axes broadcast.
//!
//! One primitive covers matrix-vector, matrix-matrix and batched products, so
//! transforms see a single op; the CPU kernel maps each case to faer GEMMs.

use anvil_core::shape::matmul_shape;
use anvil_core::{op::expect_arity, Error, Op, Result, TensorType};

/// Matrix product with `numpy.matmul` semantics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Matmul;

impl Op for Matmul {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        crate::elementwise::Domain::Float.check("matmul", 0, a.dtype)?;
        if a.dtype != b.dtype {
            return Err(Error::dtype(
                "matmul",
                "1",
                b.dtype,
                format!("the dtype of argument 0 ({})", a.dtype),
            ));
        }
        Ok(TensorType::new(a.dtype, matmul_shape("matmul", &a.shape, &b.shape)?))
    }
}
