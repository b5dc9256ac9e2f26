//! `scan`: a loop over the leading axis of its scanned operands, threading
//! carries from one step to the next (`jax.lax.scan`).
//!
//! [`Scan`]'s operands are `consts` (passed whole to every step), the
//! initial `carries`, and the scanned `xs` (each `[length, ...]`); its body
//! maps `(consts, carries, x slices)` to `(new carries, y slices)`, and its
//! results are the final carries and the `ys`, stacked along a new leading
//! axis (`ys[t]` is the step that read `xs[t]`, in either direction).
//!
//! Its rules, as JAX's:
//!
//! - **vmap**: which carries the batch reaches is a fixpoint over the body
//!   (a carry is batched when its initial value is, or when the body's new
//!   value depends on a batched input); only those carry a batch axis.
//! - **jvp**: one scan of the body's jvp, carrying tangents only where a
//!   fixpoint over the body says they can be non-zero.
//! - **transpose**: a scan forward over the known part storing each step's
//!   residuals (the known values the linear part reads that change from
//!   step to step; loop-invariant values are `consts`, saved once, never
//!   per step), then a scan in the other direction over the transpose of
//!   the body's linear part on those residuals (nothing of the known part
//!   is recomputed), carrying the cotangents of the linear carries and
//!   accumulating those of the linear consts (a closed-over parameter's
//!   gradient is a sum over steps in the reverse carry; when that sum is of
//!   outer products, the compile pipeline's loop passes turn it into one
//!   matrix product after the loop). With `checkpoint`, only every k-th
//!   step's carries are stored and the rest recomputed.
//! - **rewrite**: a stacked result that is a scanned operand's slice
//!   returned unchanged (`ys[t] = xs[t]`; the transpose of a scan returns
//!   the residuals it reads so that the products of a closed-over matrix's
//!   cotangent run after the loop) is the operand itself, not a copy the
//!   loop writes step by step; consts and scanned operands the body does
//!   not read stop being operands ([`narrowed`]).
//! - **sparsity**: the carries' sets are a fixpoint over the steps (what
//!   the body's new carries depend on, given the carries so far and any
//!   step's slices, until nothing grows or `length` steps are covered);
//!   `ys[t]` composes the body with those carries and slice `t` only.

use crate::batching::{at_front, move_axis};
use crate::bodies::{
    batch_body, dependent_outputs, groups, jvp_body, marked, reorder, transpose_body,
};
use anvil_core::replay::{replay, value};
use anvil_core::sparsity::{BodyPattern, Builder, Detector, IndexSets, SparsityArg, Union};
use anvil_core::{
    register_rule, trace_with, Batched, Error, Graph, LinearArg, Op, Result, SubGraph, TensorType,
    ValueId, Var,
};
use std::sync::Arc;

/// A loop of `length` steps over the leading axis of the scanned operands;
/// see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scan {
    /// `(consts, carries, x slices) -> (new carries, y slices)`.
    pub body: SubGraph,
    /// How many operands are consts (first).
    pub consts: usize,
    /// How many operands are carries (after the consts); the body's first
    /// outputs are their new values.
    pub carries: usize,
    /// The number of steps.
    pub length: usize,
    /// Whether the steps run from the last slice to the first.
    pub reverse: bool,
    /// Reverse mode keeps the carries of every `k`-th step only and
    /// recomputes the others (`None`: every step's).
    pub checkpoint: Option<usize>,
}

impl Scan {
    /// The number of scanned operands.
    pub fn xs(&self) -> usize {
        self.body.inputs().len().saturating_sub(self.consts + self.carries)
    }

    /// The number of stacked results.
    pub fn ys(&self) -> usize {
        self.body.outputs().len().saturating_sub(self.carries)
    }
}

impl Op for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }

    fn bind_dims(&self, binding: &anvil_core::shape::Binding) -> Result<Option<Box<dyn Op>>> {
        if !anvil_core::shape::is_symbolic(self.length) {
            return Ok(None);
        }
        Ok(Some(Box::new(Scan { length: binding.eval(self.length)?, ..self.clone() })))
    }

    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let want = self.body.input_types();
        anvil_core::op::expect_arity(self, inputs, want.len())?;
        let (nc, nk) = (self.consts, self.carries);
        if nc + nk > want.len() || nk > self.body.outputs().len() {
            return Err(Error::invalid(
                "scan",
                "body",
                format!(
                    "takes {} inputs and returns {}: too few for {nc} consts and {nk} carries",
                    want.len(),
                    self.body.outputs().len()
                ),
            ));
        }
        for (i, (t, w)) in inputs.iter().zip(&want).enumerate() {
            let fits = if i < nc + nk {
                t == w
            } else {
                t.dtype() == w.dtype()
                    && t.shape().first() == Some(&self.length)
                    && t.shape()[1..] == *w.shape()
            };
            if !fits {
                let what =
                    if i < nc + nk { w.to_string() } else { format!("[{}] ++ {w}", self.length) };
                return Err(Error::shape(
                    "scan",
                    &[t.shape(), w.shape()],
                    format!("operand {i} is {t}; the body expects {what}"),
                ));
            }
        }
        let outs = self.body.output_types();
        check_carries("scan", &want[nc..nc + nk], &outs[..nk])?;
        let mut results = outs[..nk].to_vec();
        results.extend(outs[nk..].iter().map(|t| {
            let mut shape = vec![self.length];
            shape.extend_from_slice(t.shape());
            t.with_shape(shape)
        }));
        Ok(results)
    }

    fn params(&self) -> String {
        let dir = if self.reverse { ", reverse" } else { "" };
        let ck = self.checkpoint.map_or(String::new(), |k| format!(", checkpoint={k}"));
        format!("length={}, consts={}, carries={}{dir}{ck}", self.length, self.consts, self.carries)
    }

    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.body.graph()]
    }

    fn with_subgraphs(&self, mut bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let body = bodies.pop().filter(|_| bodies.is_empty())?;
        Some(Box::new(Scan { body: body.into(), ..self.clone() }))
    }
}

/// A loop body returns carries of the types it takes: an error names the
/// loop (`op`: `scan`, `while_loop`, ...), the carry and both types.
pub fn check_carries(op: &str, inputs: &[TensorType], outputs: &[TensorType]) -> Result<()> {
    for (k, (i, o)) in inputs.iter().zip(outputs).enumerate() {
        if i != o {
            return Err(Error::shape(
                op,
                &[i.shape(), o.shape()],
                format!(
                    "carry {k} enters the body as {i} and leaves it as {o}: a carry keeps its type"
                ),
            ));
        }
    }
    Ok(())
}

/// Emits a `Scan`.
pub fn emit_scan(scan: Scan, operands: &[Var]) -> Vec<Var> {
    let n = scan.body.outputs().len();
    let refs: Vec<&Var> = operands.iter().collect();
    Var::apply_op_n(Box::new(scan), &refs, n)
}

/// The fixpoint of a loop's carry flags: starting from `init`, a carry is
/// set when the body's new value depends on a set input (`consts`, carries,
/// then `xs` flags as given). Returns the carry flags and every output's.
pub fn carry_fixpoint(
    body: &Graph,
    consts: &[bool],
    init: &[bool],
    xs: &[bool],
) -> (Vec<bool>, Vec<bool>) {
    let mut carry = init.to_vec();
    loop {
        let ins: Vec<bool> = consts.iter().chain(&carry).chain(xs).copied().collect();
        let out = dependent_outputs(body, &ins);
        let next: Vec<bool> = carry.iter().zip(&out).map(|(&c, &o)| c || o).collect();
        if next == carry {
            return (carry, out);
        }
        carry = next;
    }
}

// ------------------------------------------------------------------ vmap

fn vmap_scan(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let s = op.try_downcast::<Scan>()?;
    let g = groups(&[s.consts, s.carries, s.xs()]);
    let b: Vec<bool> = args.iter().map(|a| a.axis.is_some()).collect();
    let (carry_b, out_b) =
        carry_fixpoint(&s.body, &b[g[0].clone()], &b[g[1].clone()], &b[g[2].clone()]);
    let ys_b = out_b[s.carries..].to_vec();
    let mut in_b = b[g[0].clone()].to_vec();
    in_b.extend(&carry_b);
    in_b.extend(&b[g[2].clone()]);
    let out_batched: Vec<bool> = carry_b.iter().chain(&ys_b).copied().collect();
    let body = batch_body(&s.body, &in_b, size, &out_batched)?;
    let mut operands = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        operands.push(if g[2].contains(&i) {
            // A scanned operand keeps the loop axis first; the batch goes second.
            match a.axis {
                Some(k) => move_axis(&a.var, k, 1),
                None => a.var.clone(),
            }
        } else if in_b[i] {
            at_front(a, size)
        } else {
            a.var.clone()
        });
    }
    let results = emit_scan(Scan { body: body.into(), ..s.clone() }, &operands);
    Ok(results
        .into_iter()
        .enumerate()
        .map(|(k, v)| {
            let axis = if k < s.carries {
                carry_b[k].then_some(0)
            } else {
                ys_b[k - s.carries].then_some(1)
            };
            Batched::new(v, axis)
        })
        .collect())
}

register_rule!(VmapRule, Scan, many: vmap_scan);

// --------------------------------------------------------------- rewrite

/// Forwards each stacked result whose slice is a scanned operand's slice,
/// unchanged (`ys[t] = xs[t]` in either direction): the result is that
/// operand, and the body no longer returns it. Then drops the consts and
/// scanned operands the body does not read ([`narrowed`]). `None` when
/// neither applies.
fn rewrite_scan(op: &dyn Op, args: &[Var], outs: &[TensorType]) -> Result<Option<Vec<Var>>> {
    let s = op.try_downcast::<Scan>()?;
    let body = s.body.graph();
    if args.len() != body.inputs().len() {
        return Ok(None);
    }
    let first_x = s.consts + s.carries;
    let xs_in = body.inputs().get(first_x..).unwrap_or(&[]);
    let forwarded: Vec<Option<usize>> = (0..s.carries)
        .map(|_| None)
        .chain(
            body.outputs()
                .iter()
                .skip(s.carries)
                .map(|o| xs_in.iter().position(|i| i == o).map(|p| first_x + p)),
        )
        .collect();
    let keep: Vec<bool> = forwarded.iter().map(Option::is_none).collect();
    let Some(results) = narrowed(s, args, &keep)? else { return Ok(None) };
    let out: Vec<Var> = results
        .into_iter()
        .zip(&forwarded)
        .map(|(r, f)| r.or_else(|| f.map(|i| args[i].clone())))
        .collect::<Option<_>>()
        .ok_or_else(|| Error::invalid("scan", "rewrite", "a result neither kept nor forwarded"))?;
    let same = out.len() == outs.len() && out.iter().zip(outs).all(|(v, t)| v.ty() == t);
    Ok(same.then_some(out))
}

/// `s` on `args` returning only the results `keep` marks (carries always
/// stay: a carry is read by the next step) and reading only the consts and
/// scanned operands that the body computing those needs (JAX's scan DCE):
/// per result, its value, `None` for one not kept. `None` when nothing
/// would change, when no result would be left (a loop needs one), or when
/// the body has effects. (A scan of symbolic length left with no operand
/// or result of symbolic shape is still bound per call: the CPU plan binds
/// every op whose parameters need the call's sizes.)
///
/// Reverse mode passes the backward scan every residual the forward one
/// stored; its body reads only some (W9: the stage inputs go to the
/// products that sum `dA` after the loop), and a step would copy its
/// slice of every one.
///
/// # Errors
/// An invalid body.
pub fn narrowed(s: &Scan, args: &[Var], keep: &[bool]) -> Result<Option<Vec<Option<Var>>>> {
    let body = s.body.graph();
    let (nc, nk) = (s.consts, s.carries);
    let outs = body.outputs();
    if args.len() != body.inputs().len() || keep.len() != outs.len() {
        return Ok(None);
    }
    // A body with effects (a collective) runs them every step whatever
    // reads their results.
    if body.nodes().iter().any(|n| n.op.has_effects()) {
        return Ok(None);
    }
    let kept_out: Vec<usize> = (0..outs.len()).filter(|&j| j < nk || keep[j]).collect();
    let needed =
        anvil_core::replay::needed_nodes(body, kept_out.iter().map(|&j| outs[j]), |_| false);
    let kept_in: Vec<usize> = (0..body.inputs().len())
        .filter(|&i| {
            (nc..nc + nk).contains(&i) || needed[body.producer(body.inputs()[i]).0.index()]
        })
        .collect();
    let same = kept_out.len() == outs.len() && kept_in.len() == body.inputs().len();
    if same || kept_out.is_empty() {
        return Ok(None);
    }
    let types: Vec<TensorType> =
        kept_in.iter().map(|&i| body.ty(body.inputs()[i]).clone()).collect();
    let new_body = trace_with(&types, |v| {
        let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
        for (x, &i) in v.iter().zip(&kept_in) {
            env[body.inputs()[i].index()] = Some(x.clone());
        }
        replay(body, &mut env, |id| needed[id.index()])?;
        kept_out.iter().map(|&j| value(&env, outs[j])).collect()
    })?;
    let consts = kept_in.iter().filter(|&&i| i < nc).count();
    let scan = Scan { body: new_body.into(), consts, ..s.clone() };
    let operands: Vec<Var> = kept_in.iter().map(|&i| args[i].clone()).collect();
    let mut results = emit_scan(scan, &operands).into_iter();
    let mut all: Vec<Option<Var>> = vec![None; outs.len()];
    for &j in &kept_out {
        all[j] = results.next();
    }
    Ok(Some(all))
}

register_rule!(RewriteRule, Scan, many: rewrite_scan);

// ------------------------------------------------------------------- jvp

/// One scan of the body's jvp: consts, carries and xs each followed by
/// their tangents (non-zero ones only), the outputs likewise.
fn jvp_scan(
    op: &dyn Op,
    primals: &[Var],
    tangents: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<Scan>()?;
    let (nc, nk, nx, ny) = (s.consts, s.carries, s.xs(), s.ys());
    let g = groups(&[nc, nk, nx]);
    let t: Vec<bool> = tangents.iter().map(Option::is_some).collect();
    let (carry_t, out_t) =
        carry_fixpoint(&s.body, &t[g[0].clone()], &t[g[1].clone()], &t[g[2].clone()]);
    let ys_t = out_t[nk..].to_vec();
    if !carry_t.iter().chain(&ys_t).any(|&x| x) {
        return Ok(vec![None; outs.len()]);
    }
    let consts_t = t[g[0].clone()].to_vec();
    let xs_t = t[g[2].clone()].to_vec();
    let tangent_in: Vec<bool> = consts_t.iter().chain(&carry_t).chain(&xs_t).copied().collect();
    let tangent_out: Vec<bool> = carry_t.iter().chain(&ys_t).copied().collect();
    let jb = jvp_body(&s.body, &tangent_in, &tangent_out)?;
    // jvp_body's layout: inputs (c, k, x, tc, tk, tx), outputs (k', y, tk', ty);
    // a scan's: inputs (c, tc, k, tk, x, tx), outputs (k', tk', y, ty).
    let (tc, tk, tx) = (marked(&consts_t).len(), marked(&carry_t).len(), marked(&xs_t).len());
    let n = nc + nk + nx;
    let order = [
        (0..nc).collect::<Vec<_>>(),
        (n..n + tc).collect(),
        (nc..nc + nk).collect(),
        (n + tc..n + tc + tk).collect(),
        (nc + nk..n).collect(),
        (n + tc + tk..n + tc + tk + tx).collect(),
    ]
    .concat();
    let (tko, tyo) = (marked(&carry_t).len(), marked(&ys_t).len());
    let m = nk + ny;
    let out_order = [
        (0..nk).collect::<Vec<_>>(),
        (m..m + tko).collect(),
        (nk..m).collect(),
        (m + tko..m + tko + tyo).collect(),
    ]
    .concat();
    let body = reorder(&jb, &order, &out_order)?;
    let mut operands: Vec<Var> = primals[g[0].clone()].to_vec();
    operands.extend(tangents[g[0].clone()].iter().flatten().cloned());
    operands.extend(primals[g[1].clone()].iter().cloned());
    for (i, &c) in carry_t.iter().enumerate() {
        if c {
            let p = &primals[nc + i];
            operands.push(tangents[nc + i].clone().unwrap_or_else(|| crate::ad::zeros(p, p.ty())));
        }
    }
    operands.extend(primals[g[2].clone()].iter().cloned());
    operands.extend(tangents[g[2].clone()].iter().flatten().cloned());
    let scan = Scan { body: body.into(), consts: nc + tc, carries: nk + tk, ..s.clone() };
    let results = emit_scan(scan, &operands);
    let mut tk_out = results[nk..nk + tk].iter().cloned();
    let mut ty_out = results[nk + tk + ny..].iter().cloned();
    let mut out: Vec<Option<Var>> =
        carry_t.iter().map(|&c| if c { tk_out.next() } else { None }).collect();
    out.extend(ys_t.iter().map(|&y| if y { ty_out.next() } else { None }));
    Ok(out)
}

register_rule!(JvpRule, Scan, many: jvp_scan);

// ------------------------------------------------------------- transpose

/// The known and linear parts of a scan's operands and outputs.
pub(crate) struct Split {
    pub(crate) lin_c: Vec<bool>,
    pub(crate) lin_k: Vec<bool>,
    pub(crate) lin_x: Vec<bool>,
    pub(crate) lin_y: Vec<bool>,
}

impl Split {
    pub(crate) fn of(s: &Scan, args: &[LinearArg]) -> Split {
        let lin: Vec<bool> = args.iter().map(LinearArg::is_linear).collect();
        let g = groups(&[s.consts, s.carries, s.xs()]);
        let (lin_k, out) =
            carry_fixpoint(&s.body, &lin[g[0].clone()], &lin[g[1].clone()], &lin[g[2].clone()]);
        Split {
            lin_c: lin[g[0].clone()].to_vec(),
            lin_k,
            lin_x: lin[g[2].clone()].to_vec(),
            lin_y: out[s.carries..].to_vec(),
        }
    }

    pub(crate) fn body_linear(&self) -> Vec<bool> {
        self.lin_c.iter().chain(&self.lin_k).chain(&self.lin_x).copied().collect()
    }
}

/// The known value of operand `i`.
pub(crate) fn known(args: &[LinearArg], i: usize) -> Result<Var> {
    args[i]
        .known()
        .cloned()
        .ok_or_else(|| Error::invalid("scan", "transpose", format!("operand {i} must be known")))
}

/// The residuals of a scan's transpose: the values of the body that do not
/// depend on a linear input but change from step to step (they read a
/// known carry or a known x) and that a linear node reads. A forward scan
/// over the known part stores them per step ([`residual_scan`]); the body's
/// transpose reads them instead of recomputing the known part. Known values
/// that depend on consts only are loop-invariant: the transposed body
/// computes them from the consts (once per loop, on the CPU).
struct Residuals {
    /// Per body value: linear (depends on a linear input).
    linear: Vec<bool>,
    /// Per body value: known and per-step.
    per_step: Vec<bool>,
    /// The residual values, in body order.
    values: Vec<ValueId>,
}

impl Residuals {
    fn of(s: &Scan, split: &Split) -> Residuals {
        let body = s.body.graph();
        let body_linear = split.body_linear();
        let linear = crate::control::varying_values(body, &body_linear);
        let stepping: Vec<bool> =
            body_linear.iter().enumerate().map(|(i, &l)| !l && i >= s.consts).collect();
        let varies = crate::control::varying_values(body, &stepping);
        let per_step: Vec<bool> = linear.iter().zip(&varies).map(|(&l, &v)| !l && v).collect();
        let mut values = Vec::new();
        for (_, node) in body.iter() {
            if node.op.is::<anvil_core::Parameter>() || !node.results().any(|v| linear[v.index()]) {
                continue;
            }
            for &i in &node.inputs {
                if per_step[i.index()] && !values.contains(&i) {
                    values.push(i);
                }
            }
        }
        Residuals { linear, per_step, values }
    }
}

/// A forward scan over the known part of `s`'s body, returning each step's
/// residuals stacked (`[length, ...]`, indexed like the xs).
fn residual_scan(s: &Scan, split: &Split, res: &Residuals, args: &[LinearArg]) -> Result<Vec<Var>> {
    if res.values.is_empty() {
        return Ok(Vec::new());
    }
    let known_k = marked(&split.lin_k.iter().map(|l| !l).collect::<Vec<_>>());
    let body_linear = split.body_linear();
    let known_in = marked(&body_linear.iter().map(|l| !l).collect::<Vec<_>>());
    let body = s.body.graph();
    let types: Vec<TensorType> = known_in.iter().map(|&i| body.input_types()[i].clone()).collect();
    // (known consts, known carries, known xs) -> (known carries', residuals).
    let known_body = trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
        for (v, &i) in vars.iter().zip(&known_in) {
            env[body.inputs()[i].index()] = Some(v.clone());
        }
        replay(body, &mut env, |id| !body.node(id).results().any(|v| res.linear[v.index()]))?;
        let mut outs: Vec<Var> =
            known_k.iter().map(|&k| value(&env, body.outputs()[k])).collect::<Result<_>>()?;
        for &r in &res.values {
            outs.push(value(&env, r)?);
        }
        Ok(outs)
    })?;
    let operands: Vec<Var> = known_in.iter().map(|&i| known(args, i)).collect::<Result<_>>()?;
    let scan = Scan {
        body: known_body.into(),
        consts: split.lin_c.iter().filter(|&&l| !l).count(),
        carries: known_k.len(),
        length: s.length,
        reverse: s.reverse,
        checkpoint: None,
    };
    Ok(emit_scan(scan, &operands).split_off(known_k.len()))
}

/// The linear part of `s`'s body on its residuals: `(known consts,
/// residuals, linear inputs) -> (the outputs marked in ct_for)`, with the
/// known values that depend on consts only recomputed inside. An output
/// marked that is not linear (a carry linear only by its initial value)
/// is zeros: its cotangent goes nowhere.
fn linear_body(s: &Scan, split: &Split, res: &Residuals, ct_for: &[bool]) -> Result<Graph> {
    let body = s.body.graph();
    let body_linear = split.body_linear();
    let body_in = body.input_types();
    let known_c: Vec<usize> = (0..s.consts).filter(|&i| !body_linear[i]).collect();
    let lin_in = marked(&body_linear);
    let mut types: Vec<TensorType> = known_c.iter().map(|&i| body_in[i].clone()).collect();
    types.extend(res.values.iter().map(|&r| body.ty(r).clone()));
    types.extend(lin_in.iter().map(|&i| body_in[i].clone()));
    trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
        let (kc, nr) = (known_c.len(), res.values.len());
        for (k, &i) in known_c.iter().enumerate() {
            env[body.inputs()[i].index()] = Some(vars[k].clone());
        }
        for (k, &r) in res.values.iter().enumerate() {
            env[r.index()] = Some(vars[kc + k].clone());
        }
        for (k, &i) in lin_in.iter().enumerate() {
            env[body.inputs()[i].index()] = Some(vars[kc + nr + k].clone());
        }
        replay(body, &mut env, |id| !body.node(id).results().any(|v| res.per_step[v.index()]))?;
        let outs = body.outputs();
        let body_out = body.output_types();
        (0..outs.len())
            .filter(|&k| ct_for[k])
            .map(|k| {
                if res.linear[outs[k].index()] {
                    value(&env, outs[k])
                } else {
                    let ty = &body_out[k];
                    Ok(crate::full_scalar(
                        ty.shape(),
                        anvil_core::Scalar::F64(0.0).cast(ty.dtype()),
                    ))
                }
            })
            .collect()
    })
}

/// The transpose of a scan linear in some operands: see the module
/// documentation.
fn transpose_scan(
    op: &dyn Op,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<Scan>()?;
    let split = Split::of(s, args);
    if let Some(k) = s.checkpoint.filter(|&k| k > 0 && k < s.length) {
        return crate::checkpoint::transpose_scan_checkpointed(s, &split, k, cts, args);
    }
    let res = Residuals::of(s, &split);
    let residuals = residual_scan(s, &split, &res, args)?;
    let ct_for: Vec<bool> = split.lin_k.iter().chain(&split.lin_y).copied().collect();
    let lin = linear_body(s, &split, &res, &ct_for)?;
    let count = |m: &[bool], lin: bool| m.iter().filter(|&&l| l == lin).count();
    let kc = count(&split.lin_c, false);
    let nr = res.values.len();
    let (lc, lk) = (count(&split.lin_c, true), count(&split.lin_k, true));
    let lin_mask: Vec<bool> = (0..lin.inputs().len()).map(|i| i >= kc + nr).collect();
    let n_ct = lin.outputs().len();
    // The body's transpose: (known c, residuals, ct k', ct y) -> (ct c, ct k, ct x).
    let tb = transpose_body(&lin, &lin_mask, &vec![true; n_ct])?;
    // As a reverse scan: consts (known c), carries (ct k, acc c), xs
    // (residuals per step, ct y) -> carries (ct k, acc c + ct c), ys (ct x).
    let body_types = tb.input_types();
    let tb_out = tb.output_types();
    let mut types: Vec<TensorType> = body_types[..kc].to_vec();
    types.extend(body_types[kc + nr..kc + nr + lk].iter().cloned());
    types.extend(tb_out[..lc].iter().cloned());
    types.extend(body_types[kc..kc + nr].iter().cloned());
    types.extend(body_types[kc + nr + lk..].iter().cloned());
    let body = trace_with(&types, |v| {
        let consts = &v[..kc];
        let ct_k = &v[kc..kc + lk];
        let acc = &v[kc + lk..kc + lk + lc];
        let step_res = &v[kc + lk + lc..kc + lk + lc + nr];
        let ct_y = &v[kc + lk + lc + nr..];
        let mut ins: Vec<Var> = consts.to_vec();
        ins.extend(step_res.iter().cloned());
        ins.extend(ct_k.iter().cloned());
        ins.extend(ct_y.iter().cloned());
        let outs = anvil_core::replay::inline_graph(&tb, &ins)?;
        let (ct_c, rest) = outs.split_at(lc);
        let (ct_k_in, ct_x) = rest.split_at(lk);
        let mut r: Vec<Var> = ct_k_in.to_vec();
        r.extend(acc.iter().zip(ct_c).map(|(a, c)| a + c));
        r.extend(ct_x.iter().cloned());
        Ok(r)
    })?;
    let zero = |like: &Var, t: &TensorType| crate::ad::zeros(like, t);
    let like = residuals
        .first()
        .cloned()
        .or_else(|| cts.iter().flatten().next().cloned())
        .or_else(|| args.iter().find_map(|a| a.known().cloned()));
    let like = like.ok_or_else(|| Error::invalid("scan", "transpose", "nothing to transpose"))?;
    let g = groups(&[s.consts, s.carries, s.xs()]);
    let mut operands: Vec<Var> = Vec::new();
    for i in g[0].clone() {
        if !split.lin_c[i] {
            operands.push(known(args, i)?);
        }
    }
    let body_in = s.body.input_types();
    let body_out = s.body.output_types();
    for (k, &l) in split.lin_k.iter().enumerate() {
        if l {
            operands.push(cts[k].clone().unwrap_or_else(|| zero(&like, &body_out[k])));
        }
    }
    for (i, &l) in split.lin_c.iter().enumerate() {
        if l {
            operands.push(zero(&like, &body_in[i]));
        }
    }
    operands.extend(residuals.iter().cloned());
    for (j, &l) in split.lin_y.iter().enumerate() {
        if l {
            let k = s.carries + j;
            let ty = &op_result_type(s, k);
            operands.push(cts[k].clone().unwrap_or_else(|| zero(&like, ty)));
        }
    }
    let scan = Scan {
        body: body.into(),
        consts: kc,
        carries: lk + lc,
        length: s.length,
        reverse: !s.reverse,
        checkpoint: None,
    };
    let results = emit_scan(scan, &operands);
    let (ct_k0, rest) = results.split_at(lk);
    let (ct_c, ct_x) = rest.split_at(lc);
    let (mut ck, mut cc, mut cx) =
        (ct_k0.iter().cloned(), ct_c.iter().cloned(), ct_x.iter().cloned());
    let mut out = Vec::with_capacity(args.len());
    out.extend(split.lin_c.iter().map(|&l| if l { cc.next() } else { None }));
    for (&l, a) in split.lin_k.iter().zip(&args[g[1].clone()]) {
        // A carry that becomes linear from a known initial value (zeros)
        // has no cotangent to give back.
        let ct = if l { ck.next() } else { None };
        out.push(ct.filter(|_| a.is_linear()));
    }
    out.extend(split.lin_x.iter().map(|&l| if l { cx.next() } else { None }));
    Ok(out)
}

/// The type of result `k` of `s`.
fn op_result_type(s: &Scan, k: usize) -> TensorType {
    let outs = s.body.output_types();
    if k < s.carries {
        outs[k].clone()
    } else {
        let mut shape = vec![s.length];
        shape.extend_from_slice(outs[k].shape());
        outs[k].with_shape(shape)
    }
}

register_rule!(TransposeRule, Scan, many: transpose_scan);

// ------------------------------------------------------------------ sparsity

/// The sets of each `[steps, ...]` operand's slices, united over the steps:
/// what one step may read, whichever it is.
pub fn union_of_slices(sets: &IndexSets, steps: usize) -> IndexSets {
    let per = sets.len().checked_div(steps).unwrap_or(0);
    let mut b = Builder::new(per, sets.nnz());
    let mut u = Union::default();
    for e in 0..per {
        b.push_union(&mut u, (0..steps).map(|t| sets.row(t * per + e)));
    }
    b.finish()
}

/// A loop's carries' sets: a fixpoint from the initial carries `init`,
/// adding what the body's new carries (its first outputs) depend on, given
/// the carries so far, `consts` and `xs` (the sets one step may read). The
/// sets only grow and are bounded by the inputs, so this ends; `max_steps`
/// bounds it further (after that many steps, every reachable carry is
/// covered). The result holds for every number of steps run.
///
/// # Errors
/// A body that does not fit; the limit of entries.
pub fn carry_sets(
    cx: &Detector<'_>,
    op: &dyn Op,
    body: &BodyPattern,
    consts: &[&IndexSets],
    init: &[Arc<IndexSets>],
    xs: &[&IndexSets],
    max_steps: Option<usize>,
) -> Result<Vec<Arc<IndexSets>>> {
    let mut carry: Vec<Arc<IndexSets>> = init.to_vec();
    let mut step = 0;
    while max_steps.is_none_or(|m| step < m) {
        step += 1;
        let ins: Vec<&IndexSets> = consts
            .iter()
            .copied()
            .chain(carry.iter().map(|c| c.as_ref()))
            .chain(xs.iter().copied())
            .collect();
        let new = body.compose(cx, op, &ins, None, 0..carry.len())?;
        let next: Vec<Arc<IndexSets>> = carry
            .iter()
            .zip(&new)
            .map(|(c, n)| Ok(Arc::new(anvil_core::sparsity::merge(c, n)?)))
            .collect::<Result<_>>()?;
        // The sets only grow: the same number of entries is the same sets.
        let grew = next.iter().zip(&carry).any(|(n, c)| n.nnz() != c.nnz());
        carry = next;
        if !grew {
            break;
        }
    }
    Ok(carry)
}

/// The carries by [`carry_sets`] over the slices' union; each step's `ys`
/// by the body composed with those carries and that step's slices (so a
/// `y` that reads only its `x` keeps its slice's pattern).
fn sparsity_scan(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let s = op.try_downcast::<Scan>()?;
    anvil_core::op::expect_arity(s, args, s.consts + s.carries + s.xs())?;
    let g = groups(&[s.consts, s.carries, s.xs()]);
    let known: Vec<Option<&anvil_core::Tensor>> =
        args.iter().enumerate().map(|(k, a)| if k < s.consts { a.value } else { None }).collect();
    let body = cx.body_pattern(op, &s.body, &known)?;
    let consts: Vec<&IndexSets> = args[g[0].clone()].iter().map(|a| a.sets.as_ref()).collect();
    let init: Vec<Arc<IndexSets>> = args[g[1].clone()].iter().map(|a| a.sets.clone()).collect();
    let xs: Vec<IndexSets> =
        args[g[2].clone()].iter().map(|a| union_of_slices(a.sets, s.length)).collect();
    let xs_refs: Vec<&IndexSets> = xs.iter().collect();
    let carries = carry_sets(cx, op, &body, &consts, &init, &xs_refs, Some(s.length))?;
    let ins: Vec<&IndexSets> = consts
        .iter()
        .copied()
        .chain(carries.iter().map(|c| c.as_ref()))
        .chain(args[g[2].clone()].iter().map(|a| a.sets.as_ref()))
        .collect();
    let mapped: Vec<bool> = (0..args.len()).map(|k| k >= s.consts + s.carries).collect();
    let ys =
        body.compose(cx, op, &ins, Some((&mapped, s.length)), s.carries..s.body.outputs().len())?;
    let all: Vec<Arc<IndexSets>> = carries.into_iter().chain(ys).collect();
    if all.len() != outs.len() {
        return Err(Error::invalid("scan", "sparsity", "the body returns other values"));
    }
    Ok(all)
}

register_rule!(SparsityRule, Scan, many: sparsity_scan);
