//! Reverse mode through a bounded `while` loop, by checkpointing.
//!
//! The transpose of a loop needs the known (primal) carries of every step,
//! in reverse order. Storing them all costs `steps × carry`; a bounded loop
//! of at most `n` steps is instead cut into `S = ⌈n / k⌉` segments of
//! `k = ⌈√n⌉` steps:
//!
//! 1. a forward pass runs the loop segment by segment and keeps only each
//!    segment's first carries and its number of steps (`S` carries: the
//!    checkpoints; the loop stops when its predicate fails, as the loop
//!    itself does, so only the steps actually taken run);
//! 2. a reverse pass over the segments recomputes one segment's carries
//!    from its checkpoint (`k` carries, freed before the next segment) and
//!    runs the body's transpose over them backwards. Segments the loop
//!    never reached are skipped.
//!
//! Memory is about `2 √n` carries; time is about three forward passes over
//! the steps taken (one to checkpoint, one to recompute, the transposed
//! body). Everything is built from `scan`, `cond` and `while` nodes, so the
//! result is an ordinary graph (and differentiable, batchable) again.

use crate::bodies::{marked, transpose_body};
use crate::cond::Cond;
use crate::scan::{carry_fixpoint, emit_scan, Scan};
use crate::while_loop::{emit_while, While};
use crate::{full_scalar, iota_dtype, VarExt};
use anvil_core::replay::{inline_graph, replay, value};
use anvil_core::{trace_with, DType, Error, Graph, LinearArg, Result, Scalar, TensorType, Var};

/// The known and linear operands of a bounded loop.
struct Parts {
    /// Per const: linear.
    lin_c: Vec<bool>,
    /// Per carry: linear (a fixpoint over the body).
    lin_k: Vec<bool>,
}

impl Parts {
    fn body_linear(&self) -> Vec<bool> {
        self.lin_c.iter().chain(&self.lin_k).copied().collect()
    }
    fn known_count(&self) -> (usize, usize) {
        (self.lin_c.iter().filter(|&&l| !l).count(), self.lin_k.iter().filter(|&&l| !l).count())
    }
}

/// `graph` restricted to its inputs not marked `linear`: a graph of those
/// inputs returning the outputs at `outs` (which must not depend on a
/// linear input).
fn known_part(graph: &Graph, linear: &[bool], outs: &[usize]) -> Result<Graph> {
    let known_in = marked(&linear.iter().map(|l| !l).collect::<Vec<_>>());
    let varies = crate::control::varying_values(graph, linear);
    for &k in outs {
        if varies[graph.outputs()[k].index()] {
            return Err(Error::invalid(
                "while_loop",
                "reverse mode",
                "the loop's predicate or a known carry depends on a differentiated value",
            ));
        }
    }
    let types: Vec<TensorType> = known_in.iter().map(|&i| graph.input_types()[i].clone()).collect();
    trace_with(&types, |vars| {
        let mut env: Vec<Option<Var>> = vec![None; graph.num_values()];
        for (v, &i) in vars.iter().zip(&known_in) {
            env[graph.inputs()[i].index()] = Some(v.clone());
        }
        replay(graph, &mut env, |id| !graph.node(id).results().any(|v| varies[v.index()]))?;
        outs.iter().map(|&k| value(&env, graph.outputs()[k])).collect()
    })
}

fn i64_scalar(v: i64) -> Var {
    full_scalar(&[], Scalar::I64(v))
}

/// The transpose of a loop of at most `max_steps` steps; see the module
/// documentation.
///
/// # Errors
/// A predicate that depends on a linear value; a body without a transpose.
pub fn transpose_bounded(
    w: &While,
    max_steps: usize,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let nc = w.consts;
    let lin: Vec<bool> = args.iter().map(LinearArg::is_linear).collect();
    let (lin_k, _) = carry_fixpoint(&w.body, &lin[..nc], &lin[nc..], &[]);
    let parts = Parts { lin_c: lin[..nc].to_vec(), lin_k };
    let body_linear = parts.body_linear();
    let known_k = marked(&parts.lin_k.iter().map(|l| !l).collect::<Vec<_>>());
    let step = known_part(&w.body, &body_linear, &known_k)?;
    let pred = known_part(&w.cond, &body_linear, &[0])?;
    let (kc, kk) = parts.known_count();
    let known_vals: Vec<Var> = args
        .iter()
        .zip(&body_linear)
        .filter(|(_, &l)| !l)
        .map(|(a, _)| {
            a.known()
                .cloned()
                .ok_or_else(|| Error::invalid("while", "transpose", "a known operand has no value"))
        })
        .collect::<Result<_>>()?;
    let seg = (max_steps as f64).sqrt().ceil().max(1.0) as usize;
    let segments = max_steps.div_ceil(seg).max(1);
    let (starts, counts) =
        checkpoints(&step, &pred, &known_vals, kc, kk, seg, segments, max_steps)?;
    let tb = transpose_body(&w.body, &body_linear, &parts.lin_k)?;
    reverse_pass(w, &parts, &tb, &step, &known_vals[..kc], &starts, &counts, seg, cts, &lin)
}

/// The forward pass: per segment, its first known carries (stacked,
/// `[segments, ...]`) and its number of steps (`i64[segments]`).
#[allow(clippy::too_many_arguments)]
fn checkpoints(
    step: &Graph,
    pred: &Graph,
    known: &[Var],
    kc: usize,
    kk: usize,
    seg: usize,
    segments: usize,
    max_steps: usize,
) -> Result<(Vec<Var>, Var)> {
    let types = step.input_types();
    // Inner loop over one segment: consts (known consts), carries (known
    // carries, j, limit) while j < limit and the predicate holds.
    let i64t = TensorType::new(DType::I64, vec![]);
    let mut inner_types = types.clone();
    inner_types.extend([i64t.clone(), i64t.clone()]);
    let inner_cond = trace_with(&inner_types, |v| {
        let (j, limit) = (&v[kc + kk], &v[kc + kk + 1]);
        let p = inline_graph(pred, &v[..kc + kk])?.swap_remove(0);
        Ok(vec![j.lt(limit).cast(DType::I64).minimum(&p.cast(DType::I64)).gt(&i64_scalar(0))])
    })?;
    let inner_body = trace_with(&inner_types, |v| {
        let mut next = inline_graph(step, &v[..kc + kk])?;
        next.push(&v[kc + kk] + &i64_scalar(1));
        next.push(v[kc + kk + 1].clone());
        Ok(next)
    })?;
    let inner =
        While { cond: inner_cond.into(), body: inner_body.into(), consts: kc, max_steps: None };
    // Outer scan over segments: carries (known carries, steps left); ys
    // (the segment's first carries, its steps).
    let mut outer_types = types.clone();
    outer_types.push(i64t);
    let outer = trace_with(&outer_types, |v| {
        let left = &v[kc + kk];
        let limit = left.minimum(&i64_scalar(seg as i64));
        let mut operands: Vec<Var> = v[..kc + kk].to_vec();
        operands.push(i64_scalar(0));
        operands.push(limit);
        let out = emit_while(inner.clone(), &operands);
        let taken = out[kk].clone();
        let mut r: Vec<Var> = out[..kk].to_vec();
        r.push(left - &taken);
        r.extend(v[kc..kc + kk].iter().cloned());
        r.push(taken);
        Ok(r)
    })?;
    let mut operands = known.to_vec();
    operands.push(i64_scalar(max_steps as i64));
    let scan =
        Scan { body: outer.into(), consts: kc, carries: kk + 1, length: segments, reverse: false };
    let mut results = emit_scan(scan, &operands);
    let counts =
        results.pop().ok_or_else(|| Error::invalid("while", "transpose", "no step counts"))?;
    Ok((results.split_off(kk + 1), counts))
}

/// The reverse pass over the segments; see the module documentation.
#[allow(clippy::too_many_arguments)]
fn reverse_pass(
    w: &While,
    parts: &Parts,
    tb: &Graph,
    step: &Graph,
    known_consts: &[Var],
    starts: &[Var],
    counts: &Var,
    seg: usize,
    cts: &[Option<Var>],
    lin: &[bool],
) -> Result<Vec<Option<Var>>> {
    let (kc, kk) = parts.known_count();
    let lk = parts.lin_k.iter().filter(|&&l| l).count();
    let lc = parts.lin_c.iter().filter(|&&l| l).count();
    let tb_in = tb.input_types();
    let tb_out = tb.output_types();
    let carry_types: Vec<TensorType> = tb_in[kc + kk..].to_vec(); // ct of linear carries
    let acc_types: Vec<TensorType> = tb_out[..lc].to_vec();
    let known_k_types: Vec<TensorType> = step.input_types()[kc..].to_vec();
    let i64t = TensorType::new(DType::I64, vec![]);
    // One segment, backwards: (known consts; ct k, acc; start carries, steps).
    let mut seg_types: Vec<TensorType> = step.input_types()[..kc].to_vec();
    seg_types.extend(carry_types.iter().cloned());
    seg_types.extend(acc_types.iter().cloned());
    seg_types.extend(known_k_types.iter().cloned());
    seg_types.push(i64t.clone());
    let active = segment_body(step, tb, kc, kk, lk, lc, seg, &seg_types)?;
    let idle = trace_with(&seg_types, |v| Ok(v[kc..kc + lk + lc].to_vec()))?;
    let body = trace_with(&seg_types, |v| {
        let steps = &v[kc + lk + lc + kk];
        let index = steps.gt(&i64_scalar(0)).cast(DType::I64);
        let cond = Cond { branches: vec![idle.clone().into(), active.clone().into()] };
        let mut refs: Vec<&Var> = vec![&index];
        refs.extend(v.iter());
        Ok(Var::apply_op_n(Box::new(cond), &refs, lk + lc))
    })?;
    let like = counts.clone();
    let zero = |t: &TensorType| crate::ad::zeros(&like, t);
    let mut operands: Vec<Var> = known_consts.to_vec();
    let mut lin_k_seen = 0;
    for (k, &l) in parts.lin_k.iter().enumerate() {
        if l {
            operands.push(cts[k].clone().unwrap_or_else(|| zero(&carry_types[lin_k_seen])));
            lin_k_seen += 1;
        }
    }
    operands.extend(acc_types.iter().map(zero));
    operands.extend(starts.iter().cloned());
    operands.push(counts.clone());
    let segments = counts.shape().first().copied().unwrap_or(1);
    let scan =
        Scan { body: body.into(), consts: kc, carries: lk + lc, length: segments, reverse: true };
    let results = emit_scan(scan, &operands);
    let (ct_k, ct_c) = results.split_at(lk);
    let (mut ck, mut cc) = (ct_k.iter().cloned(), ct_c.iter().cloned());
    let nc = w.consts;
    let mut out: Vec<Option<Var>> =
        parts.lin_c.iter().map(|&l| if l { cc.next() } else { None }).collect();
    for (k, &l) in parts.lin_k.iter().enumerate() {
        let ct = if l { ck.next() } else { None };
        out.push(ct.filter(|_| lin[nc + k]));
    }
    Ok(out)
}

/// One segment backwards: its carries recomputed from the checkpoint, then
/// the body's transpose over them in reverse, steps past the segment's
/// count skipped.
#[allow(clippy::too_many_arguments)]
fn segment_body(
    step: &Graph,
    tb: &Graph,
    kc: usize,
    kk: usize,
    lk: usize,
    lc: usize,
    seg: usize,
    seg_types: &[TensorType],
) -> Result<Graph> {
    let i64t = TensorType::new(DType::I64, vec![]);
    // Recompute: consts (known consts, steps), carry K, x j -> K', y K.
    let mut rec_types: Vec<TensorType> = step.input_types()[..kc].to_vec();
    rec_types.push(i64t.clone());
    rec_types.extend(step.input_types()[kc..].iter().cloned());
    rec_types.push(i64t.clone());
    let advance = trace_with(&step.input_types(), |v| inline_graph(step, v))?;
    let hold = trace_with(&step.input_types(), |v| Ok(v[kc..].to_vec()))?;
    let recompute = trace_with(&rec_types, |v| {
        let (steps, j) = (&v[kc], &v[kc + 1 + kk]);
        let index = j.lt(steps).cast(DType::I64);
        let mut args: Vec<Var> = v[..kc].to_vec();
        args.extend(v[kc + 1..kc + 1 + kk].iter().cloned());
        let cond = Cond { branches: vec![hold.clone().into(), advance.clone().into()] };
        let mut refs: Vec<&Var> = vec![&index];
        refs.extend(args.iter());
        let mut out = Var::apply_op_n(Box::new(cond), &refs, kk);
        out.extend(v[kc + 1..kc + 1 + kk].iter().cloned());
        Ok(out)
    })?;
    // Backwards: consts (known consts, steps), carries (ct k, acc), xs (K_j, j).
    let tb_in = tb.input_types();
    let mut back_types: Vec<TensorType> = step.input_types()[..kc].to_vec();
    back_types.push(i64t.clone());
    back_types.extend(tb_in[kc + kk..].iter().cloned());
    back_types.extend(tb.output_types()[..lc].iter().cloned());
    back_types.extend(step.input_types()[kc..].iter().cloned());
    back_types.push(i64t);
    // Active step: (known consts, ct k, acc, K_j) -> (ct k, acc + ct c).
    let mut act_types: Vec<TensorType> = step.input_types()[..kc].to_vec();
    act_types.extend(back_types[kc + 1..kc + 1 + lk + lc + kk].iter().cloned());
    let act = trace_with(&act_types, |v| {
        let (ct_k, acc, kj) = (&v[kc..kc + lk], &v[kc + lk..kc + lk + lc], &v[kc + lk + lc..]);
        let mut ins: Vec<Var> = v[..kc].to_vec();
        ins.extend(kj.iter().cloned());
        ins.extend(ct_k.iter().cloned());
        let outs = inline_graph(tb, &ins)?;
        let (ct_c, ct_k_in) = outs.split_at(lc);
        let mut r: Vec<Var> = ct_k_in.to_vec();
        r.extend(acc.iter().zip(ct_c).map(|(a, c)| a + c));
        Ok(r)
    })?;
    let skip = trace_with(&act_types, |v| Ok(v[kc..kc + lk + lc].to_vec()))?;
    let back = trace_with(&back_types, |v| {
        let (steps, j) = (&v[kc], &v[kc + 1 + lk + lc + kk]);
        let index = j.lt(steps).cast(DType::I64);
        let mut args: Vec<Var> = v[..kc].to_vec();
        args.extend(v[kc + 1..kc + 1 + lk + lc + kk].iter().cloned());
        let cond = Cond { branches: vec![skip.clone().into(), act.clone().into()] };
        let mut refs: Vec<&Var> = vec![&index];
        refs.extend(args.iter());
        Ok(Var::apply_op_n(Box::new(cond), &refs, lk + lc))
    })?;
    // The segment: (known consts; ct k, acc; start K, steps) -> (ct k, acc).
    trace_with(seg_types, |v| {
        let consts = &v[..kc];
        let carries = &v[kc..kc + lk + lc];
        let start = &v[kc + lk + lc..kc + lk + lc + kk];
        let steps = &v[kc + lk + lc + kk];
        let js = iota_dtype(&[seg], 0, DType::I64);
        let mut operands: Vec<Var> = consts.to_vec();
        operands.push(steps.clone());
        operands.extend(start.iter().cloned());
        operands.push(js.clone());
        let rec = Scan {
            body: recompute.clone().into(),
            consts: kc + 1,
            carries: kk,
            length: seg,
            reverse: false,
        };
        let per_step = emit_scan(rec, &operands).split_off(kk);
        let mut operands: Vec<Var> = consts.to_vec();
        operands.push(steps.clone());
        operands.extend(carries.iter().cloned());
        operands.extend(per_step);
        operands.push(js);
        let bk = Scan {
            body: back.clone().into(),
            consts: kc + 1,
            carries: lk + lc,
            length: seg,
            reverse: true,
        };
        Ok(emit_scan(bk, &operands))
    })
}
