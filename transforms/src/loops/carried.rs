//! The loop pass of [`While`]: a value the body computes from the carries
//! that the step before computed from its new carries is carried instead.
//!
//! A loop that `vmap` made masked evaluates its predicate at the end of
//! each step, on the new carries; a Newton iteration's predicate reads the
//! residual `f(x)`, and the next step starts by computing `f(x)` again from
//! the same `x`. Value numbering finds such pairs: a value `v` computed
//! from the body's inputs, and a value `w` whose expression is `v`'s with
//! each carry replaced by the carry's new value. Then `v` becomes a carry
//! of its own: its first value is computed once before the loop, and each
//! step returns `w` as its next value, so the body no longer computes `v`.
//! A step computes the same operations on the same values as before, so
//! the results are the same, bit for bit.
//!
//! A pair is carried when the nodes the body no longer needs outnumber the
//! values it newly has to keep: `w` read once and carried no longer fuses
//! with its reader. A masked loop only carries values of its lanes' shape,
//! so that a backend that runs its lanes group by group still can. The
//! first values are computed even when the loop runs no step, so only
//! values that cannot fail at run time are carried (elementwise math,
//! movement, reductions, matrix products; not a factorisation or a
//! gather), and nothing that reads an op with effects (a collective), in
//! the body or in a nested body, is ever matched.

use anvil_core::replay::{
    bound_inputs, inline_graph, needed_nodes, outputs, replay, rewrite_nodes, value,
};
use anvil_core::{trace_with, Graph, NodeId, Op, Result, ValueId, Var};
use anvil_ops::while_loop::{emit_while, While};
use std::collections::HashMap;

/// The loop pass of [`While`] on the loops `ids` of `g`.
///
/// # Errors
/// An invalid graph.
pub(super) fn while_passes(g: &Graph, ids: &[NodeId]) -> Result<Option<Graph>> {
    let mut plans: HashMap<NodeId, Carried> = HashMap::new();
    for &id in ids {
        let w = g.node(id).op.try_downcast::<While>()?;
        if let Some(c) = Carried::find(w)? {
            plans.insert(id, c);
        }
    }
    if plans.is_empty() {
        return Ok(None);
    }
    let (out, _) = rewrite_nodes(g, |id, _, ins| plans.get(&id).map(|c| c.emit(ins)).transpose())?;
    Ok(Some(out))
}

/// A loop rewritten to carry some of its body's values.
struct Carried {
    /// The loop with the carried values as its first carries.
    looped: While,
    /// `(consts, carries) -> carried values`: their values before the loop.
    first: Graph,
}

impl Carried {
    /// The rewritten loop, when some value is worth carrying.
    fn find(w: &While) -> Result<Option<Carried>> {
        let body = w.body.graph();
        let pairs: Vec<(ValueId, ValueId)> =
            matched_pairs(w).into_iter().filter(|&(v, _)| cannot_fail(body, v)).collect();
        let pairs = chosen(w, &pairs);
        if pairs.is_empty() {
            return Ok(None);
        }
        let (nc, carried) = (w.consts, pairs.len());
        let old_types = body.input_types();
        let mut types = old_types[..nc].to_vec();
        types.extend(pairs.iter().map(|&(v, _)| body.ty(v).clone()));
        types.extend_from_slice(&old_types[nc..]);
        // The operands in the old order, from the new.
        let old_args = |vars: &[Var]| -> Vec<Var> {
            vars[..nc].iter().chain(&vars[nc + carried..]).cloned().collect()
        };
        let new_body = trace_with(&types, |vars| {
            let mut env = bound_inputs(body, &old_args(vars));
            for (k, &(v, _)) in pairs.iter().enumerate() {
                env[v.index()] = Some(vars[nc + k].clone());
            }
            replay(body, &mut env, |_| true)?;
            let mut outs: Vec<Var> =
                pairs.iter().map(|&(_, w)| value(&env, w)).collect::<Result<_>>()?;
            outs.extend(outputs(body, &env)?);
            Ok(outs)
        })?;
        let cond = trace_with(&types, |vars| inline_graph(w.cond.graph(), &old_args(vars)))?;
        let first = crate::passes::dce(&trace_with(&old_types, |vars| {
            let mut env = bound_inputs(body, vars);
            replay(body, &mut env, |_| true)?;
            pairs.iter().map(|&(v, _)| value(&env, v)).collect()
        })?)?;
        let looped = While { cond: cond.into(), body: new_body.into(), consts: nc, ..w.clone() };
        Ok(Some(Carried { looped, first }))
    }

    /// The rewritten loop on the old loop's operands, with the old loop's
    /// results.
    fn emit(&self, ins: &[Var]) -> Result<Vec<Var>> {
        let nc = self.looped.consts;
        let firsts = inline_graph(&self.first, ins)?;
        let carried = firsts.len();
        let operands: Vec<Var> =
            ins[..nc].iter().chain(&firsts).chain(&ins[nc..]).cloned().collect();
        Ok(emit_while(self.looped.clone(), &operands).split_off(carried))
    }
}

/// An expression as value numbering compares it: an op, its operands'
/// numbers, and which of its results.
type Expr = (Box<dyn Op>, Vec<usize>, usize);

/// Every pair `(v, w)` of the body: `v` computed from the body's inputs
/// (not from a new carry), `w` computed from the new carries by the same
/// operations, with each carry replaced by its new value. The latest `v`
/// first.
fn matched_pairs(w: &While) -> Vec<(ValueId, ValueId)> {
    let body = w.body.graph();
    let nv = body.num_values();
    let nc = w.consts;
    // Which carry each new carry is, when it is computed by a node (not an
    // input passed on) and is no other carry's too.
    let mut new_carry: HashMap<ValueId, Option<usize>> = HashMap::new();
    for (k, &o) in body.outputs().iter().enumerate() {
        new_carry.entry(o).and_modify(|c| *c = None).or_insert(Some(k));
    }
    let inputs: Vec<ValueId> = body.inputs().to_vec();
    new_carry.retain(|o, c| c.is_some() && !inputs.contains(o));
    // Value numbers: equal numbers, equal values. `shifted` numbers each
    // value with the new carries read as the carries (the value's
    // expression one step later).
    let mut table: HashMap<Expr, usize> = HashMap::new();
    let mut count = inputs.len();
    // A number no other value has when `unique` (an op with effects, an
    // expression nothing matches).
    let mut number = |op: &dyn Op, ins: Vec<usize>, k: usize, unique: bool| -> usize {
        let mut fresh = || {
            count += 1;
            count - 1
        };
        if unique || has_effects(op) {
            return fresh();
        }
        *table.entry((op.boxed(), ins, k)).or_insert_with(fresh)
    };
    let mut plain = vec![usize::MAX; nv];
    let mut shifted = vec![usize::MAX; nv];
    // Whether a value reads a new carry, directly or not.
    let mut later = vec![false; nv];
    // Whether a value reads a carry (changes from step to step).
    let mut varies = vec![false; nv];
    for (k, &i) in inputs.iter().enumerate() {
        plain[i.index()] = k;
        shifted[i.index()] = k;
        varies[i.index()] = k >= nc;
    }
    for (_, n) in body.iter() {
        if n.op.parameter_index().is_some() {
            continue;
        }
        let ins: Vec<usize> = n.inputs.iter().map(|i| plain[i.index()]).collect();
        let moved: Vec<usize> = n
            .inputs
            .iter()
            .map(|i| match new_carry.get(i) {
                Some(Some(k)) => nc + k,
                _ => shifted[i.index()],
            })
            .collect();
        let is_later = |i: &ValueId| new_carry.contains_key(i) || later[i.index()];
        let reads_new = n.inputs.iter().any(is_later);
        // One step later, a value computed from this step's carries is
        // another value: an expression mixing it with new carries is
        // nothing the next step computes.
        let mixed = reads_new && n.inputs.iter().any(|i| !is_later(i) && varies[i.index()]);
        // An op with effects (or a loop whose body has some) is this step's
        // own: nothing that reads it is the next step's value.
        let reads_carry = n.inputs.iter().any(|i| varies[i.index()]) || has_effects(n.op.as_ref());
        for (k, r) in n.results().enumerate() {
            plain[r.index()] = number(n.op.as_ref(), ins.clone(), k, false);
            shifted[r.index()] = if reads_new {
                number(n.op.as_ref(), moved.clone(), k, mixed)
            } else {
                plain[r.index()]
            };
            later[r.index()] = reads_new;
            varies[r.index()] = reads_carry;
        }
    }
    // The values computed from the inputs, by number (the first of equal ones).
    let mut before: HashMap<usize, ValueId> = HashMap::new();
    for (_, n) in body.iter() {
        if n.op.parameter_index().is_some() || n.num_results() != 1 {
            continue;
        }
        let r = n.out();
        if !later[r.index()] {
            before.entry(plain[r.index()]).or_insert(r);
        }
    }
    let lanes = w.masked.then(|| body.output_types().last().map(|t| t.shape().to_vec()));
    let mut pairs: Vec<(ValueId, ValueId)> = Vec::new();
    for (_, n) in body.iter() {
        for r in n.results() {
            if !later[r.index()] {
                continue;
            }
            let Some(&v) = before.get(&shifted[r.index()]) else { continue };
            let fits = match &lanes {
                Some(Some(shape)) => body.ty(v).shape() == shape.as_slice(),
                Some(None) => false,
                None => true,
            };
            if fits && body.ty(v) == body.ty(r) && !pairs.iter().any(|p| p.0 == v) {
                pairs.push((v, r));
            }
        }
    }
    pairs.sort_by_key(|p| std::cmp::Reverse(p.0.index()));
    pairs
}

/// Whether `op` has effects, or is a loop or branch whose bodies have.
fn has_effects(op: &dyn Op) -> bool {
    op.has_effects()
        || op.subgraphs().iter().any(|g| g.nodes().iter().any(|n| has_effects(n.op.as_ref())))
}

/// Whether computing `v` (from the body's inputs) cannot fail at run time:
/// its first value is computed before the loop, even when the loop runs no
/// step, where a factorisation or a gather must not fail (or communicate)
/// when the loop would not have. Elementwise math, movement, reductions
/// and matrix products qualify.
fn cannot_fail(body: &Graph, v: ValueId) -> bool {
    let cone = needed_nodes(body, [v], |_| false);
    body.iter().filter(|(id, _)| cone[id.index()]).all(|(_, n)| {
        let op = n.op.as_ref();
        let harmless = op.parameter_index().is_some()
            || n.inputs.is_empty()
            || op.is_elementwise()
            || op.movement().is_some()
            || op.reduction_math().is_some()
            || op.matmul_transposes().is_some();
        harmless && !has_effects(op)
    })
}

/// The pairs worth carrying, chosen one by one: a pair is kept when the
/// nodes the body no longer needs outnumber the values it newly keeps.
fn chosen(w: &While, pairs: &[(ValueId, ValueId)]) -> Vec<(ValueId, ValueId)> {
    let body = w.body.graph();
    let mut reads = vec![0usize; body.num_values()];
    for (_, n) in body.iter() {
        for i in &n.inputs {
            reads[i.index()] += 1;
        }
    }
    // A value read once, by a node, is usually fused with its reader (an
    // output is kept anyway).
    let output = |v: ValueId| body.outputs().contains(&v);
    let kept = |set: &[(ValueId, ValueId)]| {
        set.iter().filter(|p| reads[p.1.index()] == 1 && !output(p.1)).count()
    };
    let mut set: Vec<(ValueId, ValueId)> = Vec::new();
    let mut needed = needed_count(body, &set);
    for &p in pairs {
        let mut trial = set.clone();
        trial.push(p);
        let now = needed_count(body, &trial);
        if needed.saturating_sub(now) > kept(&trial) - kept(&set) {
            set = trial;
            needed = now;
        }
    }
    set
}

/// How many nodes the body needs when the `v` of each pair is an input
/// and its `w` an output.
fn needed_count(body: &Graph, pairs: &[(ValueId, ValueId)]) -> usize {
    let roots = body.outputs().iter().copied().chain(pairs.iter().map(|p| p.1));
    let needed = needed_nodes(body, roots, |r| pairs.iter().any(|p| p.0 == r));
    body.iter().filter(|(id, n)| needed[id.index()] && n.op.parameter_index().is_none()).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use anvil::prelude::*;
    use anvil_core::{DType, TensorType};

    /// Newton on `x^3 + a x - b` from 0, batched: a masked loop whose
    /// predicate reads the residual that the next step computes again.
    fn newton(a: &Var, b: &Var) -> (Var, Var) {
        let f = |x: &Var| x * x * x + a * x - b;
        while_loop(
            |(x, it): &(Var, Var)| {
                let go = f(x).abs().ge(&x.full_like(1e-12));
                go.select(&it.lt(&it.full_like(50.0)), &go)
            },
            |(x, it): &(Var, Var)| (x - &(f(x) / (x * x * 3.0 + a)), it + 1.0),
            (&a.zeros_like(), &a.zeros_like()),
        )
        .unwrap()
    }

    /// An unmasked loop over `consts` and `carries` vectors of 4, with
    /// `body`, running while the first carry sums to more than 1.
    fn vector_loop(consts: usize, carries: usize, body: impl Fn(&[Var]) -> Vec<Var>) -> While {
        let types = vec![TensorType::new(DType::F64, vec![4]); consts + carries];
        let body = anvil_core::trace_with(&types, |v| Ok(body(v))).unwrap();
        let cond = anvil_core::trace_with(&types, |v| {
            let s = v[consts].sum(&[0]);
            Ok(vec![s.gt(&s.full_like(1.0))])
        })
        .unwrap();
        While { cond: cond.into(), body: body.into(), consts, max_steps: None, masked: false }
    }

    /// The one loop of `g`.
    fn the_loop(g: &Graph) -> &While {
        g.nodes().iter().find_map(|n| n.op.downcast_ref::<While>()).expect("a while loop")
    }

    #[test]
    fn the_residual_the_predicate_reads_is_carried_to_the_next_step() {
        let n = 300;
        let (av, bv): (Vec<f64>, Vec<f64>) =
            (0..n).map(|k| (1.0 + (k % 7) as f64 * 0.2, (k as f64 * 0.37).sin() * 3.0)).unzip();
        let (a, b) = (
            Tensor::from_vec(av.clone(), &[n]).unwrap(),
            Tensor::from_vec(bv.clone(), &[n]).unwrap(),
        );
        let traced = anvil::trace(&vmap(newton), (&a, &b)).unwrap();
        let before = the_loop(&traced).clone();
        let pairs = matched_pairs(&before);
        let chosen = chosen(&before, &pairs);
        // The residual (and x * x, which costs as much to carry as to
        // recompute: it would no longer fuse with its reader).
        assert_eq!(chosen.len(), 1, "{pairs:?}");
        assert!(pairs.len() > chosen.len(), "{pairs:?}");
        let lowered = anvil::lower(&vmap(newton), (&a, &b)).unwrap();
        let after = the_loop(&lowered);
        assert_eq!(after.carries(), before.carries() + 1);
        assert!(after.masked);
        // The body computes the residual once a step, not twice.
        let subs = |w: &While| w.body.graph().count::<anvil::ops::elementwise::Sub>();
        assert_eq!((subs(&before), subs(after)), (3, 2));
        // Every lane as when run alone, bit for bit.
        let (x, it) = jit(vmap(newton)).eval((&a, &b)).unwrap();
        let alone = jit(newton);
        for k in 0..n {
            let (xa, ia) = alone.eval((&Tensor::scalar(av[k]), &Tensor::scalar(bv[k]))).unwrap();
            assert_eq!(x.to_f64_vec()[k].to_bits(), xa.item().unwrap().to_bits(), "lane {k}");
            assert_eq!(it.to_f64_vec()[k], ia.item().unwrap(), "lane {k}");
        }
    }

    #[test]
    fn a_value_that_mixes_new_and_old_carries_is_no_later_step_s() {
        // Body: y = 2x; v = x + y (= 3x); x' = x + 1; w = x' + y (= x' + 2x,
        // not 3x'); z' = v * w. w's expression is v's with x read as x',
        // but y is this step's, so w is not the next step's v.
        let w = vector_loop(0, 2, |v| {
            let y = &v[0] * 2.0;
            let old = &v[0] + &y;
            let next = &v[0] + 1.0;
            let new = &next + &y;
            vec![next, &old * &new]
        });
        assert_eq!(matched_pairs(&w), vec![]);
    }

    #[test]
    fn a_loop_that_returns_its_next_residual_computes_it_once_a_step() {
        // A fixed-point iteration x <- x - 0.1 g(x) that also returns g of
        // its new x (an unmasked loop): the next step's g(x) is carried.
        let g = |x: &Var| x.sin() * x;
        let f = move |x0: &Var| {
            let (x, r, _) = while_loop(
                |(_, _, it): &(Var, Var, Var)| it.lt(&it.full_like(20.0)),
                |(x, _, it): &(Var, Var, Var)| {
                    let next = x - &(g(x) * 0.1);
                    let r = g(&next);
                    (next, r, it + 1.0)
                },
                (x0, &x0.zeros_like(), &x0.sum(&[0]).zeros_like()),
            )
            .unwrap();
            (x, r)
        };
        let xs: Vec<f64> = (0..5).map(|k| 0.3 + 0.4 * k as f64).collect();
        let x0 = Tensor::from_vec(xs.clone(), &[5]).unwrap();
        let traced = anvil::trace(&f, &x0).unwrap();
        let lowered = anvil::lower(&f, &x0).unwrap();
        assert_eq!(the_loop(&lowered).carries(), the_loop(&traced).carries() + 1);
        let sines = |w: &While| w.body.graph().count::<anvil::ops::elementwise::Sin>();
        assert_eq!((sines(the_loop(&traced)), sines(the_loop(&lowered))), (2, 1));
        let (x, r) = jit(f).eval(&x0).unwrap();
        for (k, &start) in xs.iter().enumerate() {
            let mut y = start;
            for _ in 0..20 {
                y -= y.sin() * y * 0.1;
            }
            let close = |p: f64, q: f64| (p - q).abs() <= 1e-12 * q.abs();
            assert!(close(x.to_f64_vec()[k], y), "x of {start}: {x:?} against {y}");
            assert!(close(r.to_f64_vec()[k], y.sin() * y), "r of {start}: {r:?}");
        }
    }

    #[test]
    fn a_loop_that_may_run_no_step_carries_nothing_that_can_fail() {
        // As above, with g(x) = solve(A(x), 1): a factorisation, which can
        // fail at run time, is not computed before a loop that may not run.
        let g = |x: &Var| {
            let a = x.reshape(&[2, 2]) + anvil_ops::linalg::api::eye_of(2, x);
            a.solve(&x.reshape(&[2, 2]).sum(&[1])).reshape(&[2]).pad(&[(0, 2)], 0.0)
        };
        // `steps` steps (a scalar operand, so one program runs both).
        let f = move |x0: &Var, steps: &Var| {
            let (x, r, _) = while_loop(
                |(_, _, it): &(Var, Var, Var)| it.lt(steps),
                |(x, _, it): &(Var, Var, Var)| {
                    let next = x - &(g(x) * 0.1);
                    let r = g(&next);
                    (next, r, it + 1.0)
                },
                (x0, &x0.zeros_like(), &steps.zeros_like()),
            )
            .unwrap();
            (x, r)
        };
        let x0 = Tensor::from_vec(vec![0.5, 0.1, -0.2, 0.3], &[4]).unwrap();
        let three = Tensor::scalar(3.0);
        let traced = anvil::trace(&f, (&x0, &three)).unwrap();
        assert!(!matched_pairs(the_loop(&traced)).is_empty());
        let lowered = anvil::lower(&f, (&x0, &three)).unwrap();
        // A(x) and the sums may be carried; each step still solves twice.
        let solves = |g: &Graph| g.nodes().iter().filter(|n| n.op.name().contains("solve")).count();
        assert_eq!(solves(the_loop(&lowered).body.graph()), 2, "{lowered}");
        assert_eq!(solves(&lowered), 0, "{lowered}");
        // What a user sees: A(x0) = x0 + I is singular, and a loop that runs
        // no step returns x0 without solving anything.
        let singular = Tensor::from_vec(vec![-1.0, 0.0, 0.0, -1.0], &[4]).unwrap();
        let (x, _) = jit(f).eval((&singular, &Tensor::scalar(0.0))).unwrap();
        assert_eq!(x.to_f64_vec(), singular.to_f64_vec());
    }

    /// An identity that the program must run where it is written (as a
    /// collective must), for the tests.
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct Effect;

    impl Op for Effect {
        fn name(&self) -> &'static str {
            "test.effect"
        }
        fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
            Ok(inputs[0].clone())
        }
        fn has_effects(&self) -> bool {
            true
        }
    }

    #[test]
    fn nothing_that_reads_an_effect_is_carried() {
        // Body: e = effect(c) (c a const); v = x + e; x' = x * 0.5;
        // w = x' + e; z' = v * w. Carried, v would run the effect once
        // before the loop instead of once a step.
        let w = vector_loop(1, 2, |v| {
            let e = v[0].apply(Effect, &[]);
            let old = &v[1] + &e;
            let next = &v[1] * 0.5;
            let new = &next + &e;
            vec![next, &old * &new]
        });
        assert_eq!(matched_pairs(&w), vec![]);
    }

    #[test]
    fn a_masked_loop_carries_only_values_of_its_lanes_shape() {
        // Each lane a vector of 3 (carries [B, 3], flags [B]): the body and
        // the predicate both compute x * x ([B, 3]) and its sum ([B]). Only
        // the sum has the lanes' shape.
        let f = |x0: &Var| {
            let (x, _) = while_loop(
                |(x, it): &(Var, Var)| {
                    let go = (x * x).sum(&[0]).gt(&it.full_like(1e-3));
                    go.select(&it.lt(&it.full_like(50.0)), &go)
                },
                |(x, it): &(Var, Var)| (x - &(x * &(x * x).sum(&[0]) * 0.1), it + 1.0),
                (x0, &x0.sum(&[0]).zeros_like()),
            )
            .unwrap();
            x
        };
        let x0 = Tensor::from_vec((0..12).map(|k| 0.1 * k as f64).collect(), &[4, 3]).unwrap();
        let traced = anvil::trace(&vmap(f), &x0).unwrap();
        let w = the_loop(&traced);
        assert!(w.masked);
        let pairs = matched_pairs(w);
        let shapes: Vec<&[usize]> = pairs.iter().map(|p| w.body.graph().ty(p.0).shape()).collect();
        assert!(shapes.contains(&&[4][..]), "{shapes:?}");
        assert!(shapes.iter().all(|s| *s == [4]), "{shapes:?}");
    }
}
