//! Transformations of the API that need no values: [`eval_shape`] (a
//! function's result types, by tracing only) and [`linear_transpose`] (the
//! transpose of a linear function, by transposing its traced graph).

use crate::core::function::{fit_args, Args};
use crate::core::tree::{Dyn, Flatten, Traced};
use crate::{
    transforms, Bound, Error, Function, IntoFunction, PlanCache, Pullback, Result, TensorType,
};

/// The types of `f`'s results for arguments of types `args` (a tree of
/// [`TensorType`]s with the arguments' structure), found by tracing `f`
/// without compiling or running anything (`jax.eval_shape`). The result
/// has `f`'s output structure with types for leaves: read it with
/// [`Dyn::into_tree`].
///
/// ```
/// use anvil::prelude::*;
/// use anvil::TensorType;
/// let x = TensorType::new(DType::F64, vec![4, 3]);
/// let w = TensorType::new(DType::F64, vec![3, 2]);
/// let out = anvil::eval_shape(&|x: &Var, w: &Var| (x.matmul(w), x.argmax(1, false)), (&x, &w))?;
/// let (y, i): (TensorType, TensorType) = out.into_tree()?;
/// assert_eq!((y.shape(), i.dtype()), (&[4usize, 2][..], DType::I64));
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// Arguments that do not fit `f`; any error recorded while tracing (shape
/// mismatches, axes out of range, dtypes an op does not accept).
pub fn eval_shape<M, F: IntoFunction<M>>(
    f: &F,
    args: impl Flatten<TensorType>,
) -> Result<Dyn<TensorType>> {
    let f = f.as_function();
    let def = fit_args(&f.name(), args.def(), <F::Args as Args>::ARITY)?;
    let (graph, output) = crate::core::trace_types(&f, &def, &args.leaves())?;
    Ok(Dyn { def: output, leaves: graph.output_types() })
}

/// The transpose of a linear function `f` (`jax.linear_transpose`): a
/// function from cotangents of `f`'s outputs (with their structure) to
/// cotangents of its arguments (a tuple with their structure), `ctᵀ f`.
/// `primals` only give the arguments' structure, shapes and dtypes (float
/// only); their values are not read. The transpose is built once, from
/// `f`'s traced graph, with the transpose rules of its ops; calling it
/// runs no forward computation.
///
/// ```
/// use anvil::prelude::*;
/// let x = Tensor::zeros(&[3])?;
/// // f(x) = cumsum(2 x); its transpose is 2 × the reverse cumsum.
/// let ft = anvil::linear_transpose(&|x: &Var| (x * 2.0).cumsum(0, false), &x)?;
/// let (ct,) = ft.eval(&Tensor::from_vec(vec![1.0, 0.0, 1.0], &[3])?)?;
/// assert_eq!(ct.to_vec::<f64>()?, vec![4.0, 2.0, 2.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// Arguments that do not fit `f`, or that are not floats; an error while
/// tracing; `f` not linear in its arguments (an op on the path from them
/// without a transpose rule, like `sin`, or used non-linearly, like the
/// product of two arguments), naming the op.
#[allow(clippy::type_complexity)]
pub fn linear_transpose<M, F: IntoFunction<M>>(
    f: &F,
    primals: impl Flatten<crate::Tensor>,
) -> Result<Pullback<F::Args, F::Output>>
where
    F::Output: Traced,
{
    let f = f.as_function();
    let args = fit_args(&f.name(), primals.def(), <F::Args as Args>::ARITY)?;
    let mut types = Vec::new();
    primals.for_each_leaf(&mut |t| types.push(t.ty()));
    if let Some((i, t)) = types.iter().enumerate().find(|(_, t)| !t.dtype().is_float()) {
        let msg = format!("argument leaf {i} is {t}: a linear function takes float arguments");
        return Err(Error::invalid("linear_transpose", "primals", msg));
    }
    let (graph, output) = crate::core::trace_types(&f, &args, &types)?;
    let graph = transforms::ad::transpose_linear(&graph, 0, &types)?;
    let bound = Bound { graph, residuals: Vec::new(), cache: PlanCache::new() };
    Ok(Pullback { bound, args, output, _types: Default::default() })
}
