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
    let inner = While {
        cond: inner_cond.into(),
        body: inner_body.into(),
        consts: kc,
        // At most `seg` steps (`limit` is at most `seg`): bounded, so that
        // the forward pass can itself be differentiated in reverse mode
        // (`jacrev(grad(f))`).
        max_steps: Some(seg),
        masked: false,
    };
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
    let scan = Scan {
        body: outer.into(),
        consts: kc,
        carries: kk + 1,
        length: segments,
        reverse: false,
        checkpoint: None,
    };
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
    let scan = Scan {
        body: body.into(),
        consts: kc,
        carries: lk + lc,
        length: segments,
        reverse: true,
        checkpoint: None,
    };
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
            checkpoint: None,
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
            checkpoint: None,
        };
        Ok(emit_scan(bk, &operands))
    })
}

// ------------------------------------------------------ checkpointed scan

/// The transpose of a scan (see `crate::scan`) keeping the known carries
/// of every `k`-th step only: a forward pass over segments of `k` steps
/// stores each segment's first carries; the reverse pass recomputes one
/// segment's carries from its checkpoint, then runs the body's transpose
/// over them backwards. The steps are padded to whole segments; padded
/// steps keep their carries and give zero cotangents. A reverse scan is
/// handled in its iteration order (its scanned values flipped).
///
/// # Errors
/// A body without a transpose; known operands missing.
pub(crate) fn transpose_scan_checkpointed(
    s: &Scan,
    split: &crate::scan::Split,
    k: usize,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let seg = Segments::new(s, split, k)?;
    let known = seg.known_operands(cts, args)?;
    let starts = seg.forward(&known)?;
    let results = seg.backward(&known, starts, cts)?;
    Ok(seg.cotangents(&results, args))
}

/// What a checkpointed scan transpose is built from: the scan split into
/// its known and linear parts, the known part's step and the body's
/// transpose, and the counts that locate each group of operands.
///
/// Counts: `kc`/`kk`/`kx` known consts, carries and scanned inputs; `lc`/
/// `lk`/`ly` linear consts, carries and scanned outputs. The graphs built
/// here take their operands in these layouts (`base` is the index of a
/// segment's first step, `j` a step's index within its segment):
///
/// - a masked step: `(consts, base; K; x, j) -> (K', [K])`;
/// - a masked transposed step: `(consts, base; ct k, acc; K, x, ct y, j)
///   -> (ct k, acc + ct c; ct x)`;
/// - a segment of the reverse pass: `(consts; ct k, acc; start K, x segs,
///   ct y segs, s)`.
struct Segments<'a> {
    s: &'a Scan,
    split: &'a crate::scan::Split,
    k: usize,
    segments: usize,
    padded: usize,
    known_k: Vec<usize>,
    kc: usize,
    kk: usize,
    kx: usize,
    lc: usize,
    lk: usize,
    ly: usize,
    /// The known part of one step.
    step: Graph,
    /// The body's transpose.
    tb: Graph,
}

/// The known operands in iteration order, segmented, and the cotangents of
/// the scanned outputs.
struct Known {
    consts: Vec<Var>,
    init: Vec<Var>,
    /// `[segments, k, ...]` each.
    xs: Vec<Var>,
    /// `[segments, k, ...]` each.
    ct_ys: Vec<Var>,
    /// A value of the trace the transpose is built in (for zeros).
    like: Var,
}

fn count(m: &[bool], value: bool) -> usize {
    m.iter().filter(|&&b| b == value).count()
}

/// `t` with a leading axis of `n`.
fn stacked(t: &TensorType, n: usize) -> TensorType {
    let mut sh = vec![n];
    sh.extend_from_slice(t.shape());
    t.with_shape(sh)
}

impl<'a> Segments<'a> {
    fn new(s: &'a Scan, split: &'a crate::scan::Split, k: usize) -> Result<Segments<'a>> {
        let body = s.body.graph();
        let segments = s.length.div_ceil(k);
        let not = |m: &[bool]| m.iter().map(|l| !l).collect::<Vec<_>>();
        let known_k = marked(&not(&split.lin_k));
        let body_linear = split.body_linear();
        let ct_for: Vec<bool> = split.lin_k.iter().chain(&split.lin_y).copied().collect();
        Ok(Segments {
            s,
            split,
            k,
            segments,
            padded: segments * k,
            kc: count(&split.lin_c, false),
            kk: known_k.len(),
            kx: count(&split.lin_x, false),
            lc: count(&split.lin_c, true),
            lk: count(&split.lin_k, true),
            ly: count(&split.lin_y, true),
            step: known_part(body, &body_linear, &known_k)?,
            tb: transpose_body(body, &body_linear, &ct_for)?,
            known_k,
        })
    }

    /// `v` (indexed by step) in iteration order.
    fn in_order(&self, v: &Var) -> Var {
        if self.s.reverse {
            v.flip(&[0])
        } else {
            v.clone()
        }
    }

    /// `v` in iteration order, padded to whole segments: `[segments, k, ...]`.
    fn segmented(&self, v: &Var) -> Var {
        let mut widths = vec![(0, 0); v.rank()];
        widths[0] = (0, self.padded - self.s.length);
        let mut shape = vec![self.segments as i64, self.k as i64];
        shape.extend(v.shape()[1..].iter().map(|&d| d as i64));
        self.in_order(v).pad(&widths, 0.0).reshape(&shape)
    }

    fn known_operands(&self, cts: &[Option<Var>], args: &[LinearArg]) -> Result<Known> {
        let (s, split) = (self.s, self.split);
        let (nc, nk) = (s.consts, s.carries);
        let known = |i: usize| crate::scan::known(args, i);
        let consts: Vec<Var> =
            (0..nc).filter(|&i| !split.lin_c[i]).map(known).collect::<Result<_>>()?;
        let init: Vec<Var> = self.known_k.iter().map(|&j| known(nc + j)).collect::<Result<_>>()?;
        let xs: Vec<Var> = (0..s.xs())
            .filter(|&j| !split.lin_x[j])
            .map(|j| known(nc + nk + j).map(|v| self.segmented(&v)))
            .collect::<Result<_>>()?;
        let like = consts.first().or(init.first()).cloned();
        let like = like.or_else(|| cts.iter().flatten().next().cloned());
        let like =
            like.ok_or_else(|| Error::invalid("scan", "transpose", "nothing to transpose"))?;
        let out_types = s.body.graph().output_types();
        let ct_ys = (0..s.ys())
            .filter(|&j| split.lin_y[j])
            .map(|j| {
                let ty = stacked(&out_types[nk + j], s.length);
                let ct = cts[nk + j].clone().unwrap_or_else(|| crate::ad::zeros(&like, &ty));
                self.segmented(&ct)
            })
            .collect();
        Ok(Known { consts, init, xs, ct_ys, like })
    }

    /// `index < length` for the step `base + j`.
    fn active(&self, base: &Var, j: &Var) -> Var {
        (base + j).lt(&i64_scalar(self.s.length as i64))
    }

    /// One step of the known part, frozen past the length: `(consts,
    /// base; K; x, j) -> (K', [K])` (the carries it started from, as
    /// scanned outputs, when `with_ys`).
    fn masked_step(&self, with_ys: bool) -> Result<Graph> {
        let (kc, kk, kx) = (self.kc, self.kk, self.kx);
        let step_types = self.step.input_types();
        let i64t = TensorType::scalar(DType::I64);
        let mut types: Vec<TensorType> = step_types[..kc].to_vec();
        types.push(i64t.clone());
        types.extend(step_types[kc..].iter().cloned());
        types.push(i64t);
        trace_with(&types, |v| {
            let (base, j) = (&v[kc], &v[kc + 1 + kk + kx]);
            let active = self.active(base, j);
            let mut ins: Vec<Var> = v[..kc].to_vec();
            ins.extend(v[kc + 1..kc + 1 + kk + kx].iter().cloned());
            let carries = &v[kc + 1..kc + 1 + kk];
            let next = inline_graph(&self.step, &ins)?;
            let mut out: Vec<Var> =
                next.iter().zip(carries).map(|(n, old)| active.select(n, old)).collect();
            if with_ys {
                out.extend(carries.iter().cloned());
            }
            Ok(out)
        })
    }

    /// A scan of `body` over the `k` steps of one segment starting at `base`.
    fn over_segment(
        &self,
        body: &Graph,
        (consts, base): (&[Var], &Var),
        carries: &[Var],
        xs: &[Var],
        reverse: bool,
    ) -> Vec<Var> {
        let mut operands: Vec<Var> = consts.to_vec();
        operands.push(base.clone());
        operands.extend(carries.iter().cloned());
        operands.extend(xs.iter().cloned());
        operands.push(iota_dtype(&[self.k], 0, DType::I64));
        let scan = Scan {
            body: body.clone().into(),
            consts: self.kc + 1,
            carries: carries.len(),
            length: self.k,
            reverse,
            checkpoint: None,
        };
        emit_scan(scan, &operands)
    }

    /// The forward pass: the known carries at the start of every segment.
    fn forward(&self, known: &Known) -> Result<Vec<Var>> {
        let (kc, kk, kx) = (self.kc, self.kk, self.kx);
        let advance = self.masked_step(false)?;
        let step_types = self.step.input_types();
        let mut types: Vec<TensorType> = step_types[..kc + kk].to_vec();
        types.extend(step_types[kc + kk..].iter().map(|t| stacked(t, self.k)));
        types.push(TensorType::scalar(DType::I64));
        let body = trace_with(&types, |v| {
            let base = &v[kc + kk + kx] * &i64_scalar(self.k as i64);
            let (carries, xs) = (&v[kc..kc + kk], &v[kc + kk..kc + kk + kx]);
            let mut out = self.over_segment(&advance, (&v[..kc], &base), carries, xs, false);
            out.extend(carries.iter().cloned());
            Ok(out)
        })?;
        let mut operands = known.consts.clone();
        operands.extend(known.init.iter().cloned());
        operands.extend(known.xs.iter().cloned());
        operands.push(iota_dtype(&[self.segments], 0, DType::I64));
        let scan = Scan {
            body: body.into(),
            consts: kc,
            carries: kk,
            length: self.segments,
            reverse: false,
            checkpoint: None,
        };
        Ok(emit_scan(scan, &operands).split_off(kk))
    }

    /// The body's transpose on one step, zero past the length: `(consts,
    /// base; ct k, acc; K, x, ct y, j) -> (ct k, acc + ct c; ct x)`.
    fn masked_transposed_step(&self) -> Result<Graph> {
        let (kc, kk, kx, lc, lk, ly) = (self.kc, self.kk, self.kx, self.lc, self.lk, self.ly);
        let (tb_in, tb_out) = (self.tb.input_types(), self.tb.output_types());
        let mut types: Vec<TensorType> = self.step.input_types()[..kc].to_vec();
        types.push(TensorType::scalar(DType::I64));
        types.extend(tb_in[kc + kk + kx..kc + kk + kx + lk].iter().cloned());
        types.extend(tb_out[..lc].iter().cloned());
        types.extend(tb_in[kc..kc + kk + kx].iter().cloned());
        types.extend(tb_in[kc + kk + kx + lk..].iter().cloned());
        types.push(TensorType::scalar(DType::I64));
        trace_with(&types, |v| {
            let mut at = kc + 1;
            let mut take = |n: usize| {
                at += n;
                &v[at - n..at]
            };
            let (ct_k, acc, known, ct_y) = (take(lk), take(lc), take(kk + kx), take(ly));
            let active = self.active(&v[kc], &v[at]);
            let mut ins: Vec<Var> = v[..kc].to_vec();
            ins.extend(known.iter().chain(ct_k).chain(ct_y).cloned());
            let outs = inline_graph(&self.tb, &ins)?;
            let (ct_c, rest) = outs.split_at(lc);
            let (ct_k_in, ct_x) = rest.split_at(lk);
            let zero_past = |c: &Var| active.select(c, &c.zeros_like());
            let mut r: Vec<Var> =
                ct_k_in.iter().zip(ct_k).map(|(n, old)| active.select(n, old)).collect();
            r.extend(acc.iter().zip(ct_c).map(|(a, c)| a + &zero_past(c)));
            r.extend(ct_x.iter().map(zero_past));
            Ok(r)
        })
    }

    /// The reverse pass over the segments; returns `(ct k at the start, ct
    /// consts, ct xs as [segments, k, ...])`.
    fn backward(&self, known: &Known, starts: Vec<Var>, cts: &[Option<Var>]) -> Result<Vec<Var>> {
        let (kc, kk, kx, lc, lk, ly) = (self.kc, self.kk, self.kx, self.lc, self.lk, self.ly);
        let (record, back) = (self.masked_step(true)?, self.masked_transposed_step()?);
        let (tb_in, tb_out) = (self.tb.input_types(), self.tb.output_types());
        let step_types = self.step.input_types();
        let acc_types: Vec<TensorType> = tb_out[..lc].to_vec();
        let mut types: Vec<TensorType> = step_types[..kc].to_vec();
        types.extend(tb_in[kc + kk + kx..kc + kk + kx + lk].iter().cloned());
        types.extend(acc_types.iter().cloned());
        types.extend(step_types[kc..kc + kk].iter().cloned());
        types.extend(step_types[kc + kk..].iter().map(|t| stacked(t, self.k)));
        types.extend(tb_in[kc + kk + kx + lk..].iter().map(|t| stacked(t, self.k)));
        types.push(TensorType::scalar(DType::I64));
        let segment = trace_with(&types, |v| {
            let mut at = 0;
            let mut take = |n: usize| {
                at += n;
                &v[at - n..at]
            };
            let (consts, carries, start, x_segs, ct_y_segs) =
                (take(kc), take(lk + lc), take(kk), take(kx), take(ly));
            let base = &v[at] * &i64_scalar(self.k as i64);
            let mut xs = self.over_segment(&record, (consts, &base), start, x_segs, false);
            let xs = xs.split_off(kk).into_iter().chain(x_segs.iter().chain(ct_y_segs).cloned());
            Ok(self.over_segment(&back, (consts, &base), carries, &xs.collect::<Vec<_>>(), true))
        })?;
        let out_types = self.s.body.graph().output_types();
        let zeros = |t: &TensorType| crate::ad::zeros(&known.like, t);
        let mut operands = known.consts.clone();
        for (j, _) in self.split.lin_k.iter().enumerate().filter(|(_, &l)| l) {
            operands.push(cts[j].clone().unwrap_or_else(|| zeros(&out_types[j])));
        }
        operands.extend(acc_types.iter().map(zeros));
        operands.extend(starts);
        operands.extend(known.xs.iter().cloned());
        operands.extend(known.ct_ys.iter().cloned());
        operands.push(iota_dtype(&[self.segments], 0, DType::I64));
        let scan = Scan {
            body: segment.into(),
            consts: kc,
            carries: lk + lc,
            length: self.segments,
            reverse: true,
            checkpoint: None,
        };
        Ok(emit_scan(scan, &operands))
    }

    /// The cotangent of every operand of the scan from the reverse pass's
    /// results (`None` for the known ones).
    fn cotangents(&self, results: &[Var], args: &[LinearArg]) -> Vec<Option<Var>> {
        let (ct_k0, rest) = results.split_at(self.lk);
        let (ct_c, ct_x) = rest.split_at(self.lc);
        // ct x: [segments, k, ...] -> [length, ...], back in index order.
        let mut ct_x = ct_x.iter().map(|c| {
            let mut shape = vec![self.padded as i64];
            shape.extend(c.shape()[2..].iter().map(|&d| d as i64));
            let v = c.reshape(&shape).slice_axis(0, Some(0), Some(self.s.length as i64), 1);
            self.in_order(&v)
        });
        let (mut ck, mut cc) = (ct_k0.iter().cloned(), ct_c.iter().cloned());
        let split = self.split;
        let mut out: Vec<Option<Var>> =
            split.lin_c.iter().map(|&l| if l { cc.next() } else { None }).collect();
        for (j, &l) in split.lin_k.iter().enumerate() {
            let ct = if l { ck.next() } else { None };
            out.push(ct.filter(|_| args[self.s.consts + j].is_linear()));
        }
        out.extend(split.lin_x.iter().map(|&l| if l { ct_x.next() } else { None }));
        out
    }
}
