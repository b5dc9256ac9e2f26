//! CPU kernels of the `anvil-special` example plugin. Link this crate
//! (`use anvil_special_cpu as _;`) to run its cumulative sum on the CPU.
//!
//! The Bessel functions need no kernel: they are declared with
//! `unary_elementwise_op!`, so the backend runs (and fuses) their block
//! math like any built-in elementwise op. `sincos`, an op with two results,
//! has a kernel of the several-result form.
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

use anvil_core::{Element, Op, Result, Storage, Tensor, TensorType};
use anvil_cpu::{register_kernel, Parallelism};
use anvil_special::{CumSum, SinCos};

fn cumsum_typed<T: Copy + std::ops::Add<Output = T>>(
    x: &[T],
    outer: usize,
    dim: usize,
    inner: usize,
    reverse: bool,
) -> Vec<T> {
    let mut out = x.to_vec();
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * dim + j) * inner + i;
            let order: Box<dyn Iterator<Item = usize>> =
                if reverse { Box::new((0..dim).rev()) } else { Box::new(0..dim) };
            let mut prev: Option<usize> = None;
            for j in order {
                if let Some(p) = prev {
                    out[at(j)] = out[at(j)] + out[at(p)];
                }
                prev = Some(j);
            }
        }
    }
    out
}

/// The kernel of [`CumSum`].
pub fn cumsum(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &Parallelism,
) -> Result<Tensor> {
    anvil_core::op::expect_arity(op, inputs, 1)?;
    let c = op.try_downcast::<CumSum>()?;
    let s = inputs[0].shape();
    let (outer, dim, inner) =
        (s[..c.axis].iter().product(), s[c.axis], s[c.axis + 1..].iter().product());
    let storage = match inputs[0].storage() {
        Storage::F64(v) => f64::into_storage(cumsum_typed(v, outer, dim, inner, c.reverse)),
        Storage::F32(v) => f32::into_storage(cumsum_typed(v, outer, dim, inner, c.reverse)),
        Storage::I64(v) => i64::into_storage(cumsum_typed(v, outer, dim, inner, c.reverse)),
        Storage::Bool(_) => {
            return Err(anvil_core::Error::dtype(
                op.name(),
                "0",
                inputs[0].dtype(),
                "a numeric type",
            ))
        }
    };
    Tensor::from_storage(storage, out.shape())
}

register_kernel!(CumSum, cumsum);

fn sincos_typed<T: Copy>(x: &[T], f: impl Fn(T) -> (T, T)) -> (Vec<T>, Vec<T>) {
    x.iter().map(|&v| f(v)).unzip()
}

/// The kernel of [`SinCos`]: both results in one pass.
pub fn sincos(
    op: &dyn Op,
    inputs: &[&Tensor],
    outs: &[TensorType],
    _ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    anvil_core::op::expect_arity(op, inputs, 1)?;
    let (s, c) = match inputs[0].storage() {
        Storage::F64(v) => {
            let (s, c) = sincos_typed(v, f64::sin_cos);
            (f64::into_storage(s), f64::into_storage(c))
        }
        Storage::F32(v) => {
            let (s, c) = sincos_typed(v, f32::sin_cos);
            (f32::into_storage(s), f32::into_storage(c))
        }
        _ => {
            return Err(anvil_core::Error::dtype(op.name(), "0", inputs[0].dtype(), "a float type"))
        }
    };
    Ok(vec![Tensor::from_storage(s, outs[0].shape())?, Tensor::from_storage(c, outs[1].shape())?])
}

register_kernel!(SinCos, many: sincos);
