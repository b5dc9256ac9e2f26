//! Cumulative reductions along one axis — `cumsum`, `cumprod`, `cummax`,
//! `cummin`, `cumlogsumexp`, each with a `reverse` option — and the
//! parallel prefix scan [`associative_scan`] their derivatives are built on.
//!
//! Design, as JAX's `lax` does it: the primal is one primitive,
//! [`Cumulative`], whose CPU kernel runs a sequential scan per lane
//! (independent lanes in parallel); its derivative is the jvp of
//! [`associative_scan`] over the same combining function, built from
//! strided slices, elementwise math and interleaves, so it is exact
//! (`cumprod` through zeros), differentiable again, and gives ties of
//! `cummax`/`cummin` the same split as JAX (the scan's tree is JAX's, and
//! `max` shares a tie half and half at every node). `cumsum` is linear: its
//! tangent is the cumsum of the tangent, and its transpose the cumsum the
//! other way. Along a symbolic axis, where the recursion cannot halve the
//! length, [`associative_scan`] is a sequential [`Scan`] instead.

use anvil_core::{
    op::expect_arity, register_rule, Batched, Error, LinearArg, Op, Result, TensorType, Var,
};

use crate::api::VarExt;
use crate::batching::{move_axis, physical_axis, single_batched};
use crate::elementwise::Domain;
use crate::scan::Scan;
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// Which cumulative reduction a [`Cumulative`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CumulativeKind {
    /// Running sum.
    Sum,
    /// Running product.
    Prod,
    /// Running maximum (NaN propagates).
    Max,
    /// Running minimum (NaN propagates).
    Min,
    /// Running `log(sum(exp(x)))`, computed stably (floats only).
    LogSumExp,
}

/// A cumulative reduction along `axis`: element `i` combines elements
/// `0..=i` (`i..` when `reverse`). The result has the operand's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cumulative {
    /// The reduction.
    pub kind: CumulativeKind,
    /// The scanned axis (non-negative).
    pub axis: usize,
    /// Scan from the end of the axis.
    pub reverse: bool,
}

impl Op for Cumulative {
    fn name(&self) -> &'static str {
        match self.kind {
            CumulativeKind::Sum => "cumsum",
            CumulativeKind::Prod => "cumprod",
            CumulativeKind::Max => "cummax",
            CumulativeKind::Min => "cummin",
            CumulativeKind::LogSumExp => "cumlogsumexp",
        }
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let t = &inputs[0];
        let domain =
            if self.kind == CumulativeKind::LogSumExp { Domain::Float } else { Domain::Numeric };
        domain.check(self.name(), 0, t.dtype())?;
        if self.axis >= t.rank() {
            return Err(Error::AxisOutOfRange {
                op: self.name().into(),
                axis: self.axis as i64,
                shape: t.shape().to_vec(),
                arg: "0".into(),
            });
        }
        Ok(t.clone())
    }
    fn params(&self) -> String {
        format!("axis={}, reverse={}", self.axis, self.reverse)
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 0 && self.kind == CumulativeKind::Sum
    }
}

/// The same axis, shifted past the batch axis.
fn vmap_cumulative(op: &dyn Op, args: &[Batched], _: usize) -> Result<Batched> {
    let c = op.try_downcast::<Cumulative>()?;
    let (x, k) = single_batched(op, args)?;
    let op = Cumulative { axis: physical_axis(c.axis, k), ..*c };
    Ok(Batched::new(Var::apply_op(Box::new(op), &[&x]), Some(k)))
}

/// `cumsum` is linear: `d cumsum(x) = cumsum(dx)`. The others: the tangent
/// of [`associative_scan`] over (value, tangent) pairs, as JAX.
fn jvp_cumulative(op: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    let c = op.try_downcast::<Cumulative>()?;
    let Some(t) = &t[0] else { return Ok(None) };
    if !p[0].dtype().is_float() {
        return Ok(None);
    }
    if c.kind == CumulativeKind::Sum {
        return Ok(Some(Var::apply_op(Box::new(*c), &[t])));
    }
    let kind = c.kind;
    let combine = move |a: &[Var], b: &[Var]| combine_jvp(kind, a, b);
    let mut out = associative_scan(&combine, &[p[0].clone(), t.clone()], c.reverse, c.axis);
    Ok(out.pop())
}

/// `fn((a, ta), (b, tb))` for the jvp: the combined value and its tangent,
/// linear in `ta`, `tb`.
fn combine_jvp(kind: CumulativeKind, a: &[Var], b: &[Var]) -> Vec<Var> {
    let ((a, ta), (b, tb)) = ((&a[0], &a[1]), (&b[0], &b[1]));
    match kind {
        CumulativeKind::Sum => vec![a + b, ta + tb],
        CumulativeKind::Prod => vec![a * b, ta * b + a * tb],
        CumulativeKind::Max | CumulativeKind::Min => {
            let z = if kind == CumulativeKind::Max { a.maximum(b) } else { a.minimum(b) };
            let t = ta * &balanced_eq(a, &z, b) + tb * &balanced_eq(b, &z, a);
            vec![z, t]
        }
        CumulativeKind::LogSumExp => {
            let z = logaddexp(a, b);
            let w = |x: &Var| (replace_inf(x) - replace_inf(&z)).exp();
            let t = ta * &w(a) + tb * &w(b);
            vec![z, t]
        }
    }
}

/// JAX's share of `x` in `z = max(x, y)` (or `min`): 1 where it is the
/// result, halved where `y` is too.
fn balanced_eq(x: &Var, z: &Var, y: &Var) -> Var {
    let one = z.ones_like();
    let num = x.equal(z).select(&one, &z.zeros_like());
    let den = y.equal(z).select(&z.full_like(2.0), &one);
    num / den
}

/// `log(e^a + e^b)` as `jnp.logaddexp`: `max + log1p(e^-|a - b|)`, `a + b`
/// where `a - b` is NaN (both infinite of one sign, or a NaN).
fn logaddexp(a: &Var, b: &Var) -> Var {
    let delta = a - b;
    let stable = a.maximum(b) + (-delta.abs()).exp().log1p();
    delta.not_equal(&delta).select(&(a + b), &stable)
}

/// `+inf` replaced by 0 (JAX's `_replace_inf` in the jvp of `logaddexp`).
fn replace_inf(x: &Var) -> Var {
    x.equal(&x.full_like(f64::INFINITY)).select(&x.zeros_like(), x)
}

/// `cumsum` transposes to the cumsum the other way.
fn transpose_cumulative(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let c = op.try_downcast::<Cumulative>()?;
    if c.kind != CumulativeKind::Sum {
        return Err(Error::invalid(c.name(), "transpose", "only cumsum is linear"));
    }
    let back = Cumulative { reverse: !c.reverse, ..*c };
    Ok(vec![args[0].is_linear().then(|| Var::apply_op(Box::new(back), &[ct]))])
}

register_rule!(VmapRule, Cumulative, vmap_cumulative);
register_rule!(JvpRule, Cumulative, jvp_cumulative);
register_rule!(TransposeRule, Cumulative, transpose_cumulative);
register_rule!(SparsityRule, Cumulative, sparsity_cumulative);

/// Element `i` of a lane depends on elements `0..=i` of it (`i..` when
/// `reverse`). Exact for `cumsum`, `cumprod` and `cumlogsumexp` at generic
/// values; `cummax`/`cummin` pick one element per value, and the pattern
/// is the union over all values.
fn sparsity_cumulative(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let c = op.try_downcast::<Cumulative>()?;
    let shape = out.shape();
    let len = shape[c.axis];
    let inner: usize = shape[c.axis + 1..].iter().product();
    let x = args[0].sets;
    let mut sets = Builder::new(out.numel(), 0);
    let mut u = Union::default();
    for e in 0..out.numel() {
        let (lane, k) = (e / (len * inner), e % inner);
        let i = e / inner % len;
        let range = if c.reverse { i..len } else { 0..i + 1 };
        sets.push_union(&mut u, range.map(|t| x.row((lane * len + t) * inner + k)));
        // A long axis grows quadratically: stop at the limit, not after.
        cx.check_entries(op, sets.nnz())?;
    }
    let sets = sets.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

// ------------------------------------------------------ associative scan

/// A combining function of [`associative_scan`]: two tuples of values (one
/// per scanned array), each with the scanned axis, to their combination.
pub type Combine<'a> = dyn Fn(&[Var], &[Var]) -> Vec<Var> + 'a;

/// The inclusive scan of `elems` (a tuple of arrays with one length along
/// `axis`) under an associative `combine` (`jax.lax.associative_scan`):
/// element `k` of the result is `combine` folded over elements `0..=k`
/// (with `reverse`, over `k..`, as `combine(later, earlier)`).
///
/// The algorithm is JAX's (Blelloch's odd/even recursion): `2 log2(n)`
/// levels, each a few strided slices, one `combine` over half the
/// elements and an interleave, so the work is `O(n)` and every level is
/// one vectorised pass. Everything is built from differentiable,
/// batchable ops: the result can be transformed like any program. Along
/// a symbolic axis it is a [`Scan`] folding `combine` over the elements in
/// order (the axis must then be non-empty; `combine` may not use values
/// of the trace around it).
///
/// ```
/// use anvil_core::{trace, Tensor, Var};
/// use anvil_ops::lax::associative_scan;
/// // A running sum: [1, 2, 3, 4, 5] scans to [1, 3, 6, 10, 15].
/// let add = |a: &[Var], b: &[Var]| vec![&a[0] + &b[0]];
/// let f = |x: &Var| associative_scan(&add, &[x.clone()], false, 0).remove(0);
/// let g = trace(&f, &Tensor::zeros(&[5])?)?;
/// assert_eq!(g.output_types()[0].shape(), &[5]);
/// # Ok::<(), anvil_core::Error>(())
/// ```
pub fn associative_scan(
    combine: &Combine<'_>,
    elems: &[Var],
    reverse: bool,
    axis: usize,
) -> Vec<Var> {
    let n = elems.first().and_then(|e| e.shape().get(axis).copied());
    let fits = n.is_some() && elems.iter().all(|e| e.shape().get(axis).copied() == n);
    if !fits {
        let shapes: Vec<&[usize]> = elems.iter().map(|e| e.shape()).collect();
        let msg = format!("the arrays must all have axis {axis}, of one length");
        return poisoned(elems, Error::shape("associative_scan", &shapes, msg));
    }
    let rev = |xs: &[Var]| -> Vec<Var> { xs.iter().map(|x| x.flip(&[axis as i64])).collect() };
    let elems = if reverse { rev(elems) } else { elems.to_vec() };
    let out = scan_level(combine, &elems, axis);
    if reverse {
        rev(&out)
    } else {
        out
    }
}

/// One poisoned value per element of `like`, `e` recorded.
fn poisoned(like: &[Var], e: Error) -> Vec<Var> {
    let tracer =
        like.first().map_or_else(anvil_core::trace::current_or_detached, |v| v.tracer().clone());
    tracer.record(e);
    like.iter().map(|_| tracer.poisoned()).collect()
}

/// Elements `start, start + step, ...` before `stop` along `axis`.
fn strided(x: &Var, axis: usize, start: usize, stop: usize, step: i64) -> Var {
    x.slice_axis(axis as i64, Some(start as i64), Some(stop as i64), step)
}

fn scan_level(combine: &Combine<'_>, elems: &[Var], axis: usize) -> Vec<Var> {
    let Some(n) = elems.first().and_then(|e| e.shape().get(axis).copied()) else {
        return elems.to_vec();
    };
    if anvil_core::shape::is_symbolic(n) {
        // The recursion's depth and the odd/even split follow the size.
        return sequential(combine, elems, axis);
    }
    if n < 2 {
        return elems.to_vec();
    }
    let pick = |xs: &[Var], start: usize, stop: usize, step: i64| -> Vec<Var> {
        xs.iter().map(|x| strided(x, axis, start, stop, step)).collect()
    };
    // Adjacent pairs combined, then scanned by recursion: the odd results.
    let reduced = combine(&pick(elems, 0, n - 1, 2), &pick(elems, 1, n, 2));
    if reduced.len() != elems.len() || reduced.iter().any(|r| r.shape().get(axis) != Some(&(n / 2)))
    {
        let msg = format!("combine must return {} arrays of the halved axis {axis}", elems.len());
        return poisoned(elems, Error::invalid("associative_scan", "combine", msg));
    }
    let odd = scan_level(combine, &reduced, axis);
    let m = n / 2;
    let even = if n % 2 == 0 {
        combine(&pick(&odd, 0, m - 1, 1), &pick(elems, 2, n, 2))
    } else {
        combine(&odd, &pick(elems, 2, n, 2))
    };
    elems
        .iter()
        .zip(&even)
        .zip(&odd)
        .map(|((e, ev), o)| {
            let first = strided(e, axis, 0, 1, 1);
            interleave(&crate::api::concatenate(&[&first, ev], axis as i64), o, axis)
        })
        .collect()
}

/// The scan of a symbolic axis, as a loop: a [`Scan`] whose carry starts
/// at the first elements and takes `combine(carry, x)` for each later `x`
/// (each given to `combine` with the axis, of length 1). The axis must
/// hold an element (a constraint checked at the call). Ties of `cummax`
/// and `cummin` split along this chain, not JAX's tree.
fn sequential(combine: &Combine<'_>, elems: &[Var], axis: usize) -> Vec<Var> {
    let ax = axis as i64;
    let first: Vec<Var> = elems.iter().map(|e| e.index_axis(ax, 0)).collect();
    let rest: Vec<Var> =
        elems.iter().map(|e| move_axis(&e.slice_axis(ax, Some(1), None, 1), axis, 0)).collect();
    let Some(length) = rest.first().and_then(|r| r.shape().first().copied()) else {
        return elems.to_vec();
    };
    let k = elems.len();
    let mut types: Vec<TensorType> = first.iter().map(|f| f.ty().clone()).collect();
    types.extend(rest.iter().map(|r| r.ty().with_shape(r.shape()[1..].to_vec())));
    let body = anvil_core::trace_with(&types, |args| {
        let (carry, x) = args.split_at(k);
        let lift = |v: &[Var]| v.iter().map(|v| v.unsqueeze(ax)).collect::<Vec<_>>();
        let out = combine(&lift(carry), &lift(x));
        if out.len() != k {
            let msg = format!("combine must return {k} arrays");
            return Err(Error::invalid("associative_scan", "combine", msg));
        }
        let out: Vec<Var> = out.iter().map(|o| o.squeeze(&[ax])).collect();
        Ok(out.iter().chain(&out).cloned().collect())
    })
    .and_then(|body| {
        crate::scan::check_carries("associative_scan", &types[..k], &body.output_types()[..k])?;
        Ok(body)
    });
    let body = match body {
        Ok(body) => body,
        Err(e) => return poisoned(elems, e),
    };
    let scan =
        Scan { body: body.into(), consts: 0, carries: k, length, reverse: false, checkpoint: None };
    let operands: Vec<Var> = first.iter().chain(&rest).cloned().collect();
    let ys = crate::scan::emit_scan(scan, &operands).split_off(k);
    first
        .iter()
        .zip(&ys)
        .map(|(f, y)| crate::api::concatenate(&[&f.unsqueeze(ax), &move_axis(y, 0, axis)], ax))
        .collect()
}

/// `a0, b0, a1, b1, ...` along `axis`, with `a` as long as `b` or one longer.
fn interleave(a: &Var, b: &Var, axis: usize) -> Var {
    let (Some(&na), Some(&nb)) = (a.shape().get(axis), b.shape().get(axis)) else {
        return a.tracer().poisoned(); // an error is recorded already
    };
    let b = if nb < na {
        let mut widths = vec![(0, 0); b.rank()];
        widths[axis] = (0, na - nb);
        b.pad(&widths, 0.0)
    } else {
        b.clone()
    };
    let ax = axis as i64;
    let pairs = crate::api::concatenate(&[&a.unsqueeze(ax + 1), &b.unsqueeze(ax + 1)], ax + 1);
    let mut shape: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
    shape[axis] = 2 * na as i64;
    let merged = pairs.reshape(&shape);
    if nb < na {
        strided(&merged, axis, 0, na + nb, 1)
    } else {
        merged
    }
}
