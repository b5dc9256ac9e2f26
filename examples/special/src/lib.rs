//! An example anvil plugin: ops defined outside anvil, with every rule.
//!
//! - [`BesselJ0`] and [`BesselJ1`]: the Bessel functions of the first kind,
//!   nonlinear elementwise ops declared with
//!   [`anvil_ops::unary_elementwise_op!`] from their scalar functions
//!   (`libm`) and derivatives (`J0' = -J1`, `J1' = J0 - J1 / x`). One
//!   declaration each gives the op, its batching rule and its jvp rule;
//!   reverse mode follows by transposition.
//! - [`CumSum`]: a cumulative sum along an axis, a linear op with a batching
//!   rule, a jvp rule (itself, on the tangent), a transpose rule (the
//!   reversed cumulative sum), a rewrite rule of its own (a cumulative
//!   sum along an axis of length 1 is its operand) and a sparsity rule (a
//!   triangular pattern per line, for sparse Jacobians).
//! - [`SinCos`]: `(sin x, cos x)` in one op with two results, each its own
//!   value, with its batching and jvp rules in the several-result form.
//!
//! The CPU kernels are in `anvil-special-cpu`; link it (`use
//! anvil_special_cpu as _;`) to run these ops. Without it, running one is an
//! `Err` naming the op and the missing kernel.
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

use anvil_core::op::expect_arity;
use anvil_core::shape::normalize_axis;
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use anvil_core::{register_rule, Batched, Error, LinearArg, Op, Result, TensorType, Var};
use anvil_ops::batching::physical_axis;
use anvil_ops::unary_elementwise_op;
use anvil_ops::VarExt;
use std::sync::Arc;

unary_elementwise_op! {
    /// The Bessel function of the first kind of order 0.
    pub struct BesselJ0 = "special.j0";
    f64: |x| libm::j0(x);
    f32: |x| libm::j0f(x);
    derivative: |x, _y| -x.apply(BesselJ1, &[]);
}

unary_elementwise_op! {
    /// The Bessel function of the first kind of order 1.
    pub struct BesselJ1 = "special.j1";
    f64: |x| libm::j1(x);
    f32: |x| libm::j1f(x);
    // J1' = J0 - J1 / x, with its limit 1/2 at x = 0.
    derivative: |x, y| {
        let at_zero = x.equal(&x.zeros_like());
        let safe_x = at_zero.select(&x.ones_like(), x);
        let general = x.apply(BesselJ0, &[]) - y / &safe_x;
        at_zero.select(&x.full_like(0.5), &general)
    };
}

/// The cumulative sum along `axis` (`numpy.cumsum`), or from the end when
/// `reverse` is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CumSum {
    /// The axis (non-negative).
    pub axis: usize,
    /// Sum from the last element backwards.
    pub reverse: bool,
}

impl Op for CumSum {
    fn name(&self) -> &'static str {
        "special.cumsum"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        anvil_ops::elementwise::Domain::Numeric.check(self.name(), 0, inputs[0].dtype())?;
        if self.axis >= inputs[0].rank() {
            return Err(Error::AxisOutOfRange {
                op: self.name().into(),
                axis: self.axis as i64,
                shape: inputs[0].shape().to_vec(),
                arg: "0".into(),
            });
        }
        Ok(inputs[0].clone())
    }
    fn params(&self) -> String {
        format!("axis={}, reverse={}", self.axis, self.reverse)
    }
}

/// Batching: the same sum along the same axis, shifted past the batch axis.
fn vmap_cumsum(op: &dyn Op, args: &[Batched], _size: usize) -> Result<Batched> {
    let c = op.try_downcast::<CumSum>()?;
    let k = args[0].axis.unwrap_or(0);
    let op = CumSum { axis: physical_axis(c.axis, k), reverse: c.reverse };
    Ok(Batched::new(args[0].var.apply(op, &[]), args[0].axis))
}

/// The transpose of a cumulative sum is the cumulative sum the other way.
fn transpose_cumsum(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<CumSum>()?;
    let op = CumSum { axis: c.axis, reverse: !c.reverse };
    Ok(vec![args[0].is_linear().then(|| ct.apply(op, &[]))])
}

/// A cumulative sum along an axis of length 1 adds nothing: it is the
/// operand (one node fewer).
fn rewrite_cumsum(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let c = op.try_downcast::<CumSum>()?;
    Ok((args[0].shape().get(c.axis) == Some(&1) && args[0].ty() == out).then(|| args[0].clone()))
}

/// Sparsity: element `k` along the axis depends on the operand's elements
/// `0..=k` of its line (`k..` when reversed), a triangular pattern per
/// line (exact: every coefficient is 1).
fn sparsity_cumsum(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let c = op.try_downcast::<CumSum>()?;
    expect_arity(c, args, 1)?;
    let shape = out.shape();
    let len = shape[c.axis];
    let inner: usize = shape[c.axis + 1..].iter().product();
    let x = &args[0].sets;
    let mut b = Builder::new(out.numel(), x.nnz() * len.max(1));
    let mut u = Union::default();
    for e in 0..out.numel() {
        let (outer, k, i) = (e / (len * inner), e / inner % len, e % inner);
        let line = |q: usize| x.row((outer * len + q) * inner + i);
        let range = if c.reverse { k..len } else { 0..k + 1 };
        b.push_union(&mut u, range.map(line));
    }
    let sets = b.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(VmapRule, CumSum, vmap_cumsum);
register_rule!(JvpRule, CumSum, anvil_ops::movement::jvp_linear_unary);
register_rule!(TransposeRule, CumSum, transpose_cumsum);
register_rule!(RewriteRule, CumSum, rewrite_cumsum);
register_rule!(SparsityRule, CumSum, sparsity_cumsum);

/// `(sin x, cos x)`, elementwise: one op, two results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SinCos;

impl Op for SinCos {
    fn name(&self) -> &'static str {
        "special.sincos"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let t = anvil_ops::elementwise::unary_rule(
            self,
            anvil_ops::elementwise::Domain::Float,
            inputs,
        )?;
        Ok(vec![t.clone(), t])
    }
}

/// Batching: both results keep the operand's batch axis.
fn vmap_sincos(_: &dyn Op, args: &[Batched], _size: usize) -> Result<Vec<Batched>> {
    let outs = Var::apply_op_n(Box::new(SinCos), &[&args[0].var], 2);
    Ok(outs.into_iter().map(|v| Batched::new(v, args[0].axis)).collect())
}

/// `d sin x = cos x dx`, `d cos x = -sin x dx`, from the op's own results.
fn jvp_sincos(_: &dyn Op, _: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let Some(t) = &t[0] else { return Ok(vec![None, None]) };
    let (sin, cos) = (&outs[0], &outs[1]);
    Ok(vec![Some(t * cos), Some(-(t * sin))])
}

register_rule!(VmapRule, SinCos, many: vmap_sincos);
register_rule!(JvpRule, SinCos, many: jvp_sincos);

/// The plugin's ops as methods on traced values.
pub trait SpecialExt {
    /// `J0(x)`, elementwise.
    fn j0(&self) -> Var;
    /// `J1(x)`, elementwise.
    fn j1(&self) -> Var;
    /// The cumulative sum along `axis` (negative counts from the end), by
    /// this plugin's op (named apart from anvil's own `cumsum`, which the
    /// prelude brings in).
    fn special_cumsum(&self, axis: i64) -> Var;
    /// `(sin x, cos x)`, from one op.
    fn sincos(&self) -> (Var, Var);
}

impl SpecialExt for Var {
    fn j0(&self) -> Var {
        self.apply(BesselJ0, &[])
    }
    fn j1(&self) -> Var {
        self.apply(BesselJ1, &[])
    }
    fn special_cumsum(&self, axis: i64) -> Var {
        match normalize_axis("special.cumsum", axis, self.shape(), "0") {
            Ok(axis) => self.apply(CumSum { axis, reverse: false }, &[]),
            Err(e) => {
                self.tracer().record(e);
                self.tracer().poisoned()
            }
        }
    }
    fn sincos(&self) -> (Var, Var) {
        let mut outs = Var::apply_op_n(Box::new(SinCos), &[self], 2);
        let cos = outs.pop().unwrap_or_else(|| self.tracer().poisoned());
        let sin = outs.pop().unwrap_or_else(|| self.tracer().poisoned());
        (sin, cos)
    }
}
