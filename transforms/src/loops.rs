//! Loop passes: rewrites of the nodes of one op type that the per-node
//! rewrite rules cannot express, since they look at a node's siblings or
//! into its bodies. Each is registered for its op type ([`LoopPass`]);
//! [`optimize_loops`] runs those of the op types a graph holds. The passes
//! of [`Scan`] are registered here, not beside the op in `anvil-ops`,
//! because they use this crate's CSE and DCE:
//!
//! - **Sibling scans merge.** Two scans over the same operands, with the
//!   same length, direction and carries, whose bodies compute the same new
//!   carries (found by common-subexpression elimination over the two bodies
//!   side by side), become one scan returning both sets of stacked results.
//!   Reverse mode creates such pairs: `value_and_grad` through a scan runs
//!   the primal scan (for the value) and the scan that stores each step's
//!   carries for the reverse pass; merged, the forward loop runs once.
//! - **Outer products accumulated in a carry become one product.** A carry
//!   whose only use in the body is `carry + Σ_r u_r v_rᵀ` (vectors `u_r`,
//!   `v_r`; the shape the transpose of a matrix-vector product gives a
//!   loop-invariant matrix's cotangent) is dropped from the loop: the body
//!   returns its `u_r` and `v_r` as stacked results instead, and after the
//!   loop the carry is `init + Σ_r U_rᵀ V_r` over all steps at once, one
//!   matrix product per term `r` (`jax#3186`'s "one product over stacked
//!   residuals"), each reading the stacked results where the loop wrote them. Each step
//!   then handles vectors only (no `n × m` update per step), and the sum
//!   over steps is the matrix product's, not a running one: values agree
//!   to rounding, not bit for bit. The `+` and the products are found by
//!   their declared facts ([`Op::arith`](anvil_core::Op::arith),
//!   [`Op::matmul_transposes`](anvil_core::Op::matmul_transposes)), so a
//!   plugin's sum or product is taken out of a loop too.
//!
//! - **Stacked results nobody reads are dropped**, with the body's work
//!   that only they needed and the operands only that work read (JAX's
//!   scan DCE; the per-node rewrite drops operands the whole body does not
//!   read). Carries stay (a carry's value is a result).
//!
//! The pass of [`While`](anvil_ops::while_loop::While) (module `carried`):
//!
//! - **A value the step before computed is carried.** When the body
//!   computes a value from its carries that it also computed, one step
//!   earlier, from its new carries (a masked loop's predicate reads the
//!   residual `f(x)` of the new `x`, and the next step computes `f(x)`
//!   again), the value becomes a carry: computed once before the loop,
//!   then passed from each step to the next. Found by value numbering, bit
//!   for bit the same results.

mod carried;

use crate::passes::{cse, dce};
use anvil_core::replay::{inline_graph, replay, rewrite_nodes, rewrite_nodes_partly, value};
use anvil_core::{trace_with, Arith, Graph, GraphPassFn, NodeId, Result, TensorType, ValueId, Var};
use anvil_ops::scan::{emit_scan, Scan};
use anvil_ops::VarExt;
use std::collections::HashMap;

anvil_core::registry_entry! {
    /// A registered loop pass (see the module docs): register one for an
    /// op type with `anvil_core::register_entry!(LoopPass, MyOp, pass: my_pass);`.
    pub struct LoopPass { pass: GraphPassFn }, "loop pass", loop_passes
}

anvil_core::register_entry!(LoopPass, Scan, pass: scan_passes);
anvil_core::register_entry!(LoopPass, anvil_ops::while_loop::While, pass: carried::while_passes);

/// Applies the loop passes registered for the op types of `g`'s own nodes
/// (not of nodes inside bodies, which the caller's recursion reaches), in
/// the order the types first appear; `None` when nothing changed.
///
/// # Errors
/// An invalid graph; a pass registered twice for one op type.
pub fn optimize_loops(g: &Graph) -> Result<Option<Graph>> {
    loop_passes().run_graph_passes(g, |e| e.pass)
}

/// The loop passes of [`Scan`] on the scans `scans` of `g`.
fn scan_passes(g: &Graph, scans: &[NodeId]) -> Result<Option<Graph>> {
    let merges = sibling_merges(g, scans)?;
    // The later scan of a merged pair takes its results from the first's.
    let mut later: HashMap<NodeId, Vec<Var>> = HashMap::new();
    let (out, changed) = rewrite_nodes(g, |id, node, ins| {
        if let Some(results) = later.remove(&id) {
            return Ok(Some(results));
        }
        if !scans.contains(&id) {
            return Ok(None);
        }
        let s = node.op.try_downcast::<Scan>()?;
        Ok(match merges.get(&id) {
            Some(m) => {
                let (first, second) = run_merged(s, m, ins);
                later.insert(m.other, second);
                Some(first)
            }
            None => outer_product_carries(s, ins)?,
        })
    })?;
    let merged = changed.then_some(out);
    Ok(prune_scans(merged.as_ref().unwrap_or(g))?.or(merged))
}

// ------------------------------------------------------- unread operands

/// Every scan of `g` without the stacked results nobody reads (and the
/// operands its body then does not read, see
/// [`narrowed`](anvil_ops::scan::narrowed)); `None` when none changed.
fn prune_scans(g: &Graph) -> Result<Option<Graph>> {
    let mut read = vec![false; g.num_values()];
    for n in g.nodes() {
        n.inputs.iter().for_each(|i| read[i.index()] = true);
    }
    g.outputs().iter().for_each(|o| read[o.index()] = true);
    let (out, changed) =
        rewrite_nodes_partly(g, |_, node, ins| match node.op.downcast_ref::<Scan>() {
            Some(s) => {
                let used: Vec<bool> = node.results().map(|v| read[v.index()]).collect();
                anvil_ops::scan::narrowed(s, ins, &used)
            }
            None => Ok(None),
        })?;
    Ok(changed.then_some(out))
}

// ---------------------------------------------------------- sibling scans

/// A pair of scans to run as one.
struct Merge {
    /// The later scan of the pair.
    other: NodeId,
    /// `(operands) -> (carries, first's ys, other's ys)`.
    body: Graph,
    /// The number of ys of the first scan.
    first_ys: usize,
}

/// The pairs of the scans `ids` over the same operands whose bodies compute
/// the same carries, keyed by the first of each pair (a scan joins one pair
/// at most).
fn sibling_merges(g: &Graph, ids: &[NodeId]) -> Result<HashMap<NodeId, Merge>> {
    let scans: Vec<(NodeId, &Scan, &[ValueId])> = ids
        .iter()
        .map(|&id| {
            let n = g.node(id);
            Ok((id, n.op.try_downcast::<Scan>()?, n.inputs.as_slice()))
        })
        .collect::<Result<_>>()?;
    let mut merges = HashMap::new();
    let mut taken = vec![false; scans.len()];
    for i in 0..scans.len() {
        for j in i + 1..scans.len() {
            if taken[i] || taken[j] {
                continue;
            }
            let ((a, sa, ia), (b, sb, ib)) = (scans[i], scans[j]);
            let alike = ia == ib
                && sa.length == sb.length
                && sa.reverse == sb.reverse
                && sa.consts == sb.consts
                && sa.carries == sb.carries
                && sa.checkpoint == sb.checkpoint
                && sa.body.input_types() == sb.body.input_types();
            if !alike {
                continue;
            }
            if let Some(body) = merged_body(sa, sb)? {
                merges.insert(a, Merge { other: b, body, first_ys: sa.ys() });
                taken[i] = true;
                taken[j] = true;
            }
        }
    }
    Ok(merges)
}

/// The two bodies side by side on the same inputs, common subexpressions
/// merged: `(carries, a's ys, b's ys)` when both compute the same carries.
fn merged_body(a: &Scan, b: &Scan) -> Result<Option<Graph>> {
    let nk = a.carries;
    let both = trace_with(&a.body.input_types(), |v| {
        let mut outs = inline_graph(a.body.graph(), v)?;
        outs.extend(inline_graph(b.body.graph(), v)?);
        Ok(outs)
    })?;
    let both = cse(&both)?;
    let outs = both.outputs();
    let na = a.body.outputs().len();
    if (0..nk).any(|k| outs[k] != outs[na + k]) {
        return Ok(None);
    }
    let keep: Vec<usize> = (0..na).chain(na + nk..outs.len()).collect();
    let body = trace_with(&both.input_types(), |v| {
        let all = inline_graph(&both, v)?;
        Ok(keep.iter().map(|&k| all[k].clone()).collect())
    })?;
    Ok(Some(dce(&cse(&body)?)?))
}

/// Emits the merged scan; returns the results of the first scan and of the
/// other.
fn run_merged(s: &Scan, m: &Merge, ins: &[Var]) -> (Vec<Var>, Vec<Var>) {
    let merged = Scan { body: m.body.clone().into(), ..s.clone() };
    let results = emit_scan(merged, ins);
    let nk = s.carries;
    let first: Vec<Var> = results[..nk + m.first_ys].to_vec();
    let mut second: Vec<Var> = results[..nk].to_vec();
    second.extend(results[nk + m.first_ys..].iter().cloned());
    (first, second)
}

// ------------------------------------------------- outer-product carries

/// A carry updated as `carry + Σ_r u_r v_rᵀ`: per term, the values of
/// shape `[n, 1]` and `[1, m]` whose product it is.
struct OuterCarry {
    k: usize,
    terms: Vec<(ValueId, ValueId)>,
}

/// The carries of `s` that [`OuterCarry`] describes.
fn outer_carries(s: &Scan) -> Vec<OuterCarry> {
    let body = s.body.graph();
    let mut uses = vec![0usize; body.num_values()];
    for (_, n) in body.iter() {
        for i in &n.inputs {
            uses[i.index()] += 1;
        }
    }
    for o in body.outputs() {
        uses[o.index()] += 1;
    }
    let mut found = Vec::new();
    for k in 0..s.carries {
        let param = body.inputs()[s.consts + k];
        let out = body.outputs()[k];
        let ty = body.ty(param);
        if ty.rank() != 2 || !ty.dtype().is_float() || uses[param.index()] != 1 {
            continue;
        }
        if uses[out.index()] != 1 || body.inputs().contains(&out) {
            continue;
        }
        let node = body.producer_node(out);
        if node.op.arith() != Some(Arith::Add) || node.inputs.len() != 2 {
            continue;
        }
        let rest = match (node.inputs[0] == param, node.inputs[1] == param) {
            (true, false) => node.inputs[1],
            (false, true) => node.inputs[0],
            _ => continue,
        };
        if let Some(terms) = outer_terms(body, rest, ty) {
            found.push(OuterCarry { k, terms });
        }
    }
    found
}

/// `v` as a sum of outer products of the type `ty` (`[n, m]`): each term's
/// column (`[n, 1]`) and row (`[1, m]`); `None` for anything else.
fn outer_terms(body: &Graph, v: ValueId, ty: &TensorType) -> Option<Vec<(ValueId, ValueId)>> {
    let (n, m) = (ty.shape()[0], ty.shape()[1]);
    let mut terms = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        if body.ty(v) != ty || body.inputs().contains(&v) {
            return None;
        }
        let node = body.producer_node(v);
        let shapes: Vec<&[usize]> = node.inputs.iter().map(|&i| body.ty(i).shape()).collect();
        let mul = node.op.arith() == Some(Arith::Mul);
        if node.op.arith() == Some(Arith::Add) && shapes.iter().all(|s| *s == [n, m]) {
            stack.extend(node.inputs.iter().copied());
        } else if mul || node.op.matmul_transposes() == Some((false, false)) {
            let ok_dtype = node.inputs.iter().all(|&i| body.ty(i).dtype() == ty.dtype());
            match shapes[..] {
                [a, b] if ok_dtype && a == [n, 1] && b == [1, m] => {
                    terms.push((node.inputs[0], node.inputs[1]));
                }
                [a, b] if ok_dtype && mul && a == [1, m] && b == [n, 1] => {
                    terms.push((node.inputs[1], node.inputs[0]));
                }
                _ => return None,
            }
        } else {
            return None;
        }
    }
    (!terms.is_empty()).then_some(terms)
}

/// `s` on `ins` with its outer-product carries taken out of the loop (see
/// the module documentation); `None` when it has none.
fn outer_product_carries(s: &Scan, ins: &[Var]) -> Result<Option<Vec<Var>>> {
    let found = outer_carries(s);
    if found.is_empty() || s.length == 0 {
        return Ok(None);
    }
    let body = s.body.graph();
    let (nc, nk) = (s.consts, s.carries);
    let dropped: Vec<bool> = (0..nk).map(|k| found.iter().any(|f| f.k == k)).collect();
    let kept_input: Vec<usize> =
        (0..body.inputs().len()).filter(|&i| i < nc || i >= nc + nk || !dropped[i - nc]).collect();
    let types: Vec<TensorType> =
        kept_input.iter().map(|&i| body.ty(body.inputs()[i]).clone()).collect();
    let new_body = trace_with(&types, |v| {
        let mut env: Vec<Option<Var>> = vec![None; body.num_values()];
        for (x, &i) in v.iter().zip(&kept_input) {
            env[body.inputs()[i].index()] = Some(x.clone());
        }
        // The dropped carries are read by their update only, which is not
        // emitted: every value the other outputs and the terms need is.
        let needs_dropped = reads_dropped(body, nc, &dropped);
        replay(body, &mut env, |id| !needs_dropped[id.index()])?;
        let mut outs: Vec<Var> = Vec::new();
        for (k, &d) in dropped.iter().enumerate() {
            if !d {
                outs.push(value(&env, body.outputs()[k])?);
            }
        }
        for &o in &body.outputs()[nk..] {
            outs.push(value(&env, o)?);
        }
        for f in &found {
            for &(col, row) in &f.terms {
                let col = value(&env, col)?;
                let row = value(&env, row)?;
                outs.push(col.reshape(&[col.shape()[0] as i64]));
                outs.push(row.reshape(&[row.shape()[1] as i64]));
            }
        }
        Ok(outs)
    })?;
    let new_body = dce(&cse(&new_body)?)?;
    let operands: Vec<Var> = kept_input.iter().map(|&i| ins[i].clone()).collect();
    let kept_carries = dropped.iter().filter(|&&d| !d).count();
    let scan = Scan { body: new_body.into(), carries: kept_carries, ..s.clone() };
    let results = emit_scan(scan, &operands);
    let ny = s.ys();
    let mut extra = results[kept_carries + ny..].iter();
    let mut finals: HashMap<usize, Var> = HashMap::new();
    for f in &found {
        let (mut cols, mut rows) = (Vec::new(), Vec::new());
        for _ in &f.terms {
            cols.push(extra.next().cloned().ok_or_else(missing)?);
            rows.push(extra.next().cloned().ok_or_else(missing)?);
        }
        // Σ_t Σ_r u v^T = Σ_r U_r^T V_r, each over a term's stacked
        // [steps, n] and [steps, m]: one product per term, read where the
        // loop stored them (stacking the terms first copied them all).
        let mut sum = ins[nc + f.k].clone();
        for (u, v) in cols.iter().zip(&rows) {
            sum = &sum + &u.transpose().matmul(v);
        }
        finals.insert(f.k, sum);
    }
    let mut kept = results[..kept_carries].iter();
    let mut out = Vec::with_capacity(nk + ny);
    for k in 0..nk {
        out.push(match finals.remove(&k) {
            Some(v) => v,
            None => kept.next().cloned().ok_or_else(missing)?,
        });
    }
    out.extend(results[kept_carries..kept_carries + ny].iter().cloned());
    Ok(Some(out))
}

fn missing() -> anvil_core::Error {
    anvil_core::Error::invalid("scan", "loop pass", "the rewritten scan returned too few results")
}

/// Per node of `body`: whether it reads a dropped carry, directly or not.
fn reads_dropped(body: &Graph, nc: usize, dropped: &[bool]) -> Vec<bool> {
    let mut bad = vec![false; body.num_values()];
    for (k, &d) in dropped.iter().enumerate() {
        bad[body.inputs()[nc + k].index()] = d;
    }
    let mut nodes = vec![false; body.len()];
    for (id, n) in body.iter() {
        if n.inputs.iter().any(|i| bad[i.index()]) {
            nodes[id.index()] = true;
            for r in n.results() {
                bad[r.index()] = true;
            }
        }
    }
    nodes
}
