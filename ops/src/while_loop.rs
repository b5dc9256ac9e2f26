//! `while`: a loop that runs its body while its predicate holds
//! (`jax.lax.while_loop`), optionally bounded by a number of steps.
//!
//! [`While`]'s operands are `consts` (passed whole to the predicate and the
//! body) and the initial carries; the predicate maps `(consts, carries)` to
//! a `bool` scalar, the body `(consts, carries)` to new carries; the results
//! are the carries when the predicate first fails (or after `max_steps`).
//!
//! Its rules:
//!
//! - **vmap**: which carries the batch reaches is a fixpoint over the body.
//!   A predicate that depends on the batch makes every carry batched: the
//!   loop runs until every element is done, and an element whose predicate
//!   fails keeps its carries from then on (its result equals running it
//!   alone).
//! - **jvp**: one loop over the carries and their (non-zero) tangents.
//! - **transpose** (reverse mode): only for a bounded loop; the known part
//!   is recomputed from checkpoints (see `transpose_while`), so the memory
//!   is about `√max_steps` carries, never `max_steps`. An unbounded loop is
//!   an error that says how to bound it (JAX refuses reverse mode here).
//! - **sparsity**: the carries' fixpoint over the steps (as `scan`'s,
//!   bounded by `max_steps` when given); the predicate adds nothing.

use crate::batching::at_front;
use crate::bodies::{batch_body, dependent_outputs, groups, jvp_body, marked, reorder, with_batch};
use crate::scan::{carry_fixpoint, check_carries};
use crate::VarExt;
use anvil_core::replay::inline_graph;
use anvil_core::sparsity::{Detector, IndexSets, SparsityArg};
use anvil_core::{
    register_rule, trace_with, Batched, DType, Error, Graph, LinearArg, Op, Result, SubGraph,
    TensorType, Var,
};
use std::sync::Arc;

/// Runs `body` on the carries while `cond` holds (and at most `max_steps`
/// times, when given); see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct While {
    /// `(consts, carries) -> bool[]`.
    pub cond: SubGraph,
    /// `(consts, carries) -> carries`.
    pub body: SubGraph,
    /// How many operands are consts (first).
    pub consts: usize,
    /// A bound on the number of steps (what reverse mode needs).
    pub max_steps: Option<usize>,
    /// The loop is a batch of independent lanes, as `vmap` makes it for a
    /// batched predicate: the last carry is a `bool` flag per lane, the
    /// predicate is whether any flag is set, and a lane whose flag is
    /// clear keeps every carry from then on. A backend may then run groups
    /// of lanes on their own, each group until its own flags are clear
    /// (the results are the same). `false` promises nothing.
    pub masked: bool,
}

impl While {
    /// The number of carries.
    pub fn carries(&self) -> usize {
        self.body.outputs().len()
    }
}

impl Op for While {
    fn name(&self) -> &'static str {
        "while"
    }

    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let want = self.body.input_types();
        anvil_core::op::expect_arity(self, inputs, want.len())?;
        if self.cond.input_types() != want {
            return Err(Error::invalid("while", "cond", "takes other types than the body"));
        }
        match &self.cond.output_types()[..] {
            [t] if t.dtype() == DType::Bool && t.rank() == 0 => {}
            ts => {
                let shapes: Vec<&[usize]> = ts.iter().map(|t| t.shape()).collect();
                return Err(Error::shape(
                    "while_loop",
                    &shapes,
                    format!(
                        "the predicate must return one bool scalar; it returns {}",
                        ts.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        for (i, (t, w)) in inputs.iter().zip(&want).enumerate() {
            if t != w {
                return Err(Error::shape(
                    "while",
                    &[t.shape(), w.shape()],
                    format!("operand {i} is {t}; the body expects {w}"),
                ));
            }
        }
        let outs = self.body.output_types();
        let nc = self.consts.min(want.len());
        if outs.len() != want.len() - nc {
            return Err(Error::invalid(
                "while_loop",
                "body",
                format!("returns {} carries; it takes {}", outs.len(), want.len() - nc),
            ));
        }
        check_carries("while_loop", &want[nc..], &outs)?;
        Ok(outs)
    }

    fn params(&self) -> String {
        let mut p = format!("consts={}", self.consts);
        if let Some(n) = self.max_steps {
            p += &format!(", max_steps={n}");
        }
        if self.masked {
            p += ", masked";
        }
        p
    }

    fn subgraphs(&self) -> Vec<&Graph> {
        vec![self.cond.graph(), self.body.graph()]
    }

    fn subgraph_label(&self, k: usize) -> String {
        if k == 0 { "cond_fun" } else { "body_fun" }.into()
    }

    fn with_subgraphs(&self, bodies: Vec<Graph>) -> Option<Box<dyn Op>> {
        let [cond, body]: [Graph; 2] = bodies.try_into().ok()?;
        Some(Box::new(While { cond: cond.into(), body: body.into(), ..self.clone() }))
    }
}

/// Emits a `While`.
pub fn emit_while(w: While, operands: &[Var]) -> Vec<Var> {
    let n = w.carries();
    let refs: Vec<&Var> = operands.iter().collect();
    Var::apply_op_n(Box::new(w), &refs, n)
}

/// Whether any element of a bool vector is true, as a bool scalar.
fn any(v: &Var) -> Var {
    v.max(&[0], false)
}

// ------------------------------------------------------------------ vmap

fn vmap_while(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let w = op.try_downcast::<While>()?;
    let nc = w.consts;
    let b: Vec<bool> = args.iter().map(|a| a.axis.is_some()).collect();
    let (mut carry_b, _) = carry_fixpoint(&w.body, &b[..nc], &b[nc..], &[]);
    let with_carries = |c: &[bool]| -> Vec<bool> { b[..nc].iter().chain(c).copied().collect() };
    let pred_b = dependent_outputs(&w.cond, &with_carries(&carry_b))[0];
    if pred_b {
        carry_b = vec![true; carry_b.len()];
    }
    let in_b = with_carries(&carry_b);
    let operands: Vec<Var> = args
        .iter()
        .zip(&in_b)
        .map(|(a, &bat)| if bat { at_front(a, size) } else { a.var.clone() })
        .collect();
    let results = if pred_b {
        masked_loop(w, &in_b, size, operands)?
    } else {
        let cond = batch_body(&w.cond, &in_b, size, &[false])?;
        let body = batch_body(&w.body, &in_b, size, &carry_b)?;
        // The batch axis is new to the lanes of a masked loop: promise nothing.
        let w = While { cond: cond.into(), body: body.into(), masked: false, ..w.clone() };
        emit_while(w, &operands)
    };
    Ok(results.into_iter().zip(carry_b).map(|(v, bat)| Batched::new(v, bat.then_some(0))).collect())
}

/// A loop over a batch whose predicate depends on the batch: it carries
/// each element's predicate (`active`, computed once per step) and runs
/// while any element is active; the body updates the active elements and
/// keeps the others. Returns the carries (without `active`).
fn masked_loop(w: &While, in_b: &[bool], size: usize, operands: Vec<Var>) -> Result<Vec<Var>> {
    let nc = w.consts;
    let nk = w.carries();
    let pred = batch_body(&w.cond, in_b, size, &[true])?;
    let step = batch_body(&w.body, in_b, size, &in_b[nc..])?;
    let mut types = with_batch(&w.body.input_types(), in_b, size);
    types.push(TensorType::new(DType::Bool, vec![size]));
    let n = types.len() - 1;
    let cond = trace_with(&types, |v| Ok(vec![any(&v[n])]))?;
    let body = trace_with(&types, |v| {
        let active = &v[n];
        let new = inline_graph(&step, &v[..n])?;
        let mut kept: Vec<Var> = v[..nc].to_vec();
        for (next, old) in new.iter().zip(&v[nc..n]) {
            let mut shape = vec![size as i64];
            shape.extend(std::iter::repeat_n(1, next.rank() - 1));
            kept.push(active.reshape(&shape).select(next, old));
        }
        let still = inline_graph(&pred, &kept)?.swap_remove(0);
        let mut out = kept.split_off(nc);
        out.push(still);
        Ok(out)
    })?;
    let mut operands = operands;
    let first = inline_graph(&pred, &operands)?.swap_remove(0);
    operands.push(first);
    let looped = While { cond: cond.into(), body: body.into(), masked: true, ..w.clone() };
    let mut results = emit_while(looped, &operands);
    results.truncate(nk);
    Ok(results)
}

register_rule!(VmapRule, While, many: vmap_while);

// ------------------------------------------------------------------- jvp

/// One loop over the carries and their non-zero tangents; the predicate
/// reads the primal carries only.
fn jvp_while(
    op: &dyn Op,
    primals: &[Var],
    tangents: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>> {
    let w = op.try_downcast::<While>()?;
    let (nc, nk) = (w.consts, w.carries());
    let t: Vec<bool> = tangents.iter().map(Option::is_some).collect();
    let (carry_t, _) = carry_fixpoint(&w.body, &t[..nc], &t[nc..], &[]);
    if !carry_t.iter().any(|&c| c) {
        return Ok(vec![None; outs.len()]);
    }
    let consts_t = t[..nc].to_vec();
    let tangent_in: Vec<bool> = consts_t.iter().chain(&carry_t).copied().collect();
    let jb = jvp_body(&w.body, &tangent_in, &carry_t)?;
    let (tc, tk) = (marked(&consts_t).len(), marked(&carry_t).len());
    let n = nc + nk;
    let g = groups(&[nc, nk, tc, tk]);
    // jvp_body: (c, k, tc, tk) -> (k', tk'); a loop's layout: (c, tc, k, tk).
    let order: Vec<usize> =
        [&g[0], &g[2], &g[1], &g[3]].into_iter().flat_map(|r| r.clone()).collect();
    let body = reorder(&jb, &order, &(0..nk + tk).collect::<Vec<_>>())?;
    let mut types = w.body.input_types()[..nc].to_vec();
    types.extend(body.input_types()[nc..].iter().cloned());
    let cond = trace_with(&types, |v| {
        let mut args: Vec<Var> = v[..nc].to_vec();
        args.extend(v[nc + tc..nc + tc + nk].iter().cloned());
        inline_graph(&w.cond, &args)
    })?;
    let mut operands: Vec<Var> = primals[..nc].to_vec();
    operands.extend(tangents[..nc].iter().flatten().cloned());
    operands.extend(primals[nc..n].iter().cloned());
    for (i, &c) in carry_t.iter().enumerate() {
        if c {
            let p = &primals[nc + i];
            operands.push(tangents[nc + i].clone().unwrap_or_else(|| crate::ad::zeros(p, p.ty())));
        }
    }
    let looped = While {
        cond: cond.into(),
        body: body.into(),
        consts: nc + tc,
        max_steps: w.max_steps,
        masked: false,
    };
    let results = emit_while(looped, &operands);
    let mut touts = results.into_iter().skip(nk);
    Ok(carry_t.iter().map(|&c| if c { touts.next() } else { None }).collect())
}

register_rule!(JvpRule, While, many: jvp_while);

// ------------------------------------------------------------- transpose

/// The transpose of a loop linear in some operands. An unbounded loop has
/// none (the number of steps is unknown until it runs, so the values of
/// its steps cannot be kept in bounded memory); a bounded one is
/// transposed by [`crate::checkpoint::transpose_bounded`].
fn transpose_while(
    op: &dyn Op,
    cts: &[Option<Var>],
    args: &[LinearArg],
) -> Result<Vec<Option<Var>>> {
    let w = op.try_downcast::<While>()?;
    match w.max_steps {
        None => Err(Error::invalid(
            "while_loop",
            "reverse mode",
            "a while_loop without a bound on its steps has no reverse-mode derivative; \
             bound it with `while_loop_bounded(cond, body, init, n)` (its gradient then keeps about sqrt(n) carries)",
        )),
        Some(n) => crate::checkpoint::transpose_bounded(w, n, cts, args),
    }
}

register_rule!(TransposeRule, While, many: transpose_while);

// ------------------------------------------------------------------ sparsity

/// The carries' fixpoint ([`crate::scan::carry_sets`]), bounded by
/// `max_steps` when given. The predicate adds nothing: it chooses how many
/// steps run, which no derivative sees.
fn sparsity_while(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let w = op.try_downcast::<While>()?;
    anvil_core::op::expect_arity(w, args, w.consts + w.carries())?;
    let known: Vec<Option<&anvil_core::Tensor>> =
        args.iter().enumerate().map(|(k, a)| if k < w.consts { a.value } else { None }).collect();
    let body = cx.body_pattern(op, &w.body, &known)?;
    let consts: Vec<&IndexSets> = args[..w.consts].iter().map(|a| a.sets.as_ref()).collect();
    let init: Vec<Arc<IndexSets>> = args[w.consts..].iter().map(|a| a.sets.clone()).collect();
    let carries = crate::scan::carry_sets(cx, op, &body, &consts, &init, &[], w.max_steps)?;
    if carries.len() != outs.len() {
        return Err(Error::invalid("while", "sparsity", "the body returns other values"));
    }
    Ok(carries)
}

register_rule!(SparsityRule, While, many: sparsity_while);
