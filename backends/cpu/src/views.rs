//! Movement ops read as views by fused programs.
//!
//! A `reshape` of a row-major buffer is the same buffer with another shape;
//! a `slice` (with any steps, a flip is a step of −1) and a `broadcast_to`
//! are the same buffer read with an offset and other strides. When a fused
//! elementwise program reads the result of a chain of such ops, it reads
//! the chain's source instead, through the composed offset and strides:
//! the movement ops become no step of the plan and no copy
//! ([`leaf_view`]), and those no step reads any more are dropped
//! ([`drop_unread_views`]). A reshape of a value that is itself a
//! non-contiguous view (a flipped or strided slice) cannot be composed
//! into strides in general: the chain stops there, and the reshape's
//! source is materialised as before.

use crate::strided::{contiguous_strides, Strides};
use anvil_core::shape::SliceSpec;
use anvil_core::{Graph, Movement, Op, Rebuilt, Result, TensorType, ValueId};

/// How a fused program's leaf reads its source buffer: element `i` of the
/// leaf (row-major index `(i_0, …)` in the leaf's own shape) is element
/// `offset + Σ i_k strides[k]` of the source.
#[derive(Clone, Debug)]
pub struct View {
    /// The source's element at the leaf's first index.
    pub offset: isize,
    /// Per axis of the leaf's shape.
    pub strides: Strides,
}

/// The longest chain of movement ops followed back from a leaf.
const MAX_DEPTH: usize = 16;

/// Whether `strides` are the row-major strides of `shape` (axes of one
/// element may have any stride: they are never stepped along).
pub fn is_contiguous(shape: &[usize], strides: &[isize]) -> bool {
    let own = contiguous_strides(shape);
    shape.iter().zip(strides.iter().zip(own.iter())).all(|(&d, (&s, &o))| d <= 1 || s == o)
}

/// The source and view through which a fused program of shape `out`
/// reads the value `v` (the view's strides are over `out`, 0 on the axes
/// `v` is broadcast along): `Some` when `v` is the result of a chain of
/// `reshape`, `slice` and `broadcast_to` ops of concrete types (each
/// reshape of a contiguous view) whose source holds at most as many
/// elements as `out` (so reading through the view keeps no buffer alive
/// that is larger than the program's own result).
pub fn leaf_view(g: &Graph, v: ValueId, out: &[usize]) -> Option<(ValueId, View)> {
    // The chain, from `v` back to its source.
    let mut chain: Vec<ValueId> = vec![v];
    let mut at = v;
    for _ in 0..MAX_DEPTH {
        let n = g.producer_node(at);
        let op = n.op.as_ref();
        if !is_view_op(op) || n.inputs.len() != 1 || g.ty(n.inputs[0]).is_symbolic() {
            break;
        }
        at = n.inputs[0];
        chain.push(at);
    }
    if chain.len() < 2 || g.ty(v).is_symbolic() {
        return None;
    }
    // Forward from the source, composing the views; the first reshape of a
    // non-contiguous view ends the chain (its operand becomes the source).
    let mut source = chain.len() - 1;
    let mut view = identity(g.ty(chain[source]));
    for k in (0..chain.len() - 1).rev() {
        let (value, operand) = (chain[k], g.ty(chain[k + 1]));
        let ty = g.ty(value);
        let movement = g.producer_node(value).op.movement();
        let reshape = movement == Some(Movement::Reshape);
        let next = match movement {
            Some(Movement::Reshape) => reshaped(operand.shape(), ty.shape(), &view),
            Some(Movement::Slice(specs)) => sliced(specs, operand.shape(), &view),
            Some(Movement::BroadcastTo) => Some(broadcast(operand.shape(), ty.shape(), &view)),
            _ => None,
        };
        match next {
            Some(next) => view = next,
            // A reshape of its materialised operand; another op's own result.
            None if reshape => {
                source = k + 1;
                view = identity(ty);
            }
            None => {
                source = k;
                view = identity(ty);
            }
        }
    }
    let base = chain[source];
    let numel: usize = out.iter().product();
    let fits = source > 0 && g.ty(base).numel() <= numel && g.ty(v).rank() <= out.len();
    fits.then(|| (base, broadcast(g.ty(v).shape(), out, &view)))
}

/// `view` (of a value of shape `from`) reshaped to `to`: any view when
/// the reshape only inserts or removes axes of one element (the other axes
/// keep their strides), else only a contiguous one.
fn reshaped(from: &[usize], to: &[usize], view: &View) -> Option<View> {
    let kept = |shape: &[usize]| shape.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    if kept(from) == kept(to) {
        let mut strides = contiguous_strides(to);
        let mut old = from.iter().zip(view.strides.iter()).filter(|(&d, _)| d != 1);
        for (s, _) in strides.iter_mut().zip(to).filter(|(_, &d)| d != 1) {
            *s = *old.next()?.1;
        }
        return Some(View { offset: view.offset, strides });
    }
    is_contiguous(from, &view.strides)
        .then(|| View { offset: view.offset, strides: contiguous_strides(to) })
}

/// A value read as itself.
fn identity(ty: &TensorType) -> View {
    View { offset: 0, strides: contiguous_strides(ty.shape()) }
}

/// `view` (of a value of shape `shape`) sliced by `specs`.
fn sliced(specs: &[SliceSpec], shape: &[usize], view: &View) -> Option<View> {
    if specs.len() != shape.len() {
        return None;
    }
    let r: Vec<(i64, i64, usize)> =
        specs.iter().zip(shape).map(|(s, &d)| s.resolve("slice", d)).collect::<Result<_>>().ok()?;
    if r.len() != view.strides.len() || r.iter().any(|&(_, _, len)| len == 0) {
        return None;
    }
    let mut out = view.clone();
    for (k, &(first, step, _)) in r.iter().enumerate() {
        out.offset += first as isize * view.strides[k];
        out.strides[k] = view.strides[k] * step as isize;
    }
    Some(out)
}

/// `view` (of a value of shape `from`) broadcast to `to`.
fn broadcast(from: &[usize], to: &[usize], view: &View) -> View {
    let mut strides = crate::strided::broadcast_strides(from, to);
    let lead = to.len() - from.len();
    for (i, s) in strides.iter_mut().enumerate().skip(lead) {
        if from[i - lead] != 1 {
            *s = view.strides[i - lead];
        }
    }
    View { offset: view.offset, strides }
}

/// Whether a node is a movement op read as a view: one that declares
/// itself a reshape, a slice or a broadcast ([`Op::movement`]; a plugin's
/// op too).
fn is_view_op(op: &dyn Op) -> bool {
    matches!(op.movement(), Some(Movement::Reshape | Movement::Slice(_) | Movement::BroadcastTo))
}

/// Per value of `g`: whether it depends on an argument of the graph
/// (values that do not are computed once, when a plan is built, if small:
/// see [`crate::plan::PRECOMPUTE_BELOW_BYTES`]).
pub(crate) fn reads_arguments(g: &Graph) -> Vec<bool> {
    let mut live = vec![false; g.num_values()];
    for (_, n) in g.iter() {
        let reads = n.op.parameter_index().is_some() || n.inputs.iter().any(|i| live[i.index()]);
        for v in n.results() {
            live[v.index()] = reads;
        }
    }
    live
}

/// Outputs of at most this many elements read a smaller value through
/// a broadcast by computing it again at every position (see
/// [`sink_views`] and the fusion of groups): a plan step costs more than
/// recomputing a few dozen elements.
pub const SMALL_BROADCAST_ELEMS: usize = 64;

/// The longest chain of pointwise ops a movement op is moved through.
const MAX_SINK: usize = 16;

/// `g` with movement ops moved before the pointwise ops they read:
/// `reshape(sin(x))` becomes `sin(reshape(x))`, `slice(a * b)` becomes
/// `slice(a) * slice(b)`, so the movement ops read the operands as views
/// and the pointwise ops join the fused program of their reader (they
/// are no step of their own). A movement op is moved when it is a
/// reshape that only inserts or removes axes of one element (any view
/// composes with it), a slice (fewer elements to compute), or a
/// broadcast to at most [`SMALL_BROADCAST_ELEMS`] elements; and the op it
/// reads is pointwise ([`Op::is_elementwise`]: no position-dependent
/// generator), has one result, read only by the movement op and not an
/// output, with every operand of its own shape or of rank 0. Every
/// element is computed by the same op from the same operand elements, so
/// the values are the same bits. `None` when nothing moves.
///
/// # Errors
/// An invalid graph.
pub fn sink_views(g: &Graph) -> Result<Option<Graph>> {
    let mut readers = vec![0usize; g.num_values()];
    for (_, n) in g.iter() {
        for (k, i) in n.inputs.iter().enumerate() {
            if !n.inputs[..k].contains(i) {
                readers[i.index()] += 1;
            }
        }
    }
    for o in g.outputs() {
        readers[o.index()] += 1;
    }
    let live = reads_arguments(g);
    // Whether the pointwise producer of `v` can have a movement op of `v`
    // moved before it (one that reads no argument is left to be computed
    // once, when the plan is built).
    let sinkable = |v: ValueId| {
        let n = g.producer_node(v);
        let ty = g.ty(v);
        readers[v.index()] == 1
            && live[v.index()]
            && n.num_results() == 1
            && !n.inputs.is_empty()
            && n.op.is_elementwise()
            && n.op.elementwise_math().is_some()
            && !ty.is_symbolic()
            && n.inputs.iter().all(|&i| {
                let t = g.ty(i);
                !t.is_symbolic() && (t.shape() == ty.shape() || t.rank() == 0)
            })
    };
    let movable = |n: &anvil_core::Node| -> bool {
        if n.inputs.len() != 1 || n.num_results() != 1 {
            return false;
        }
        let (from, to) = (g.ty(n.inputs[0]), g.ty(n.out()));
        if from.is_symbolic() || to.is_symbolic() {
            return false;
        }
        match n.op.movement() {
            Some(Movement::Reshape) => {
                let kept = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
                kept(from.shape()) == kept(to.shape())
            }
            Some(Movement::Slice(_)) => true,
            Some(Movement::BroadcastTo) => to.numel() <= SMALL_BROADCAST_ELEMS,
            _ => false,
        }
    };
    // The pointwise nodes moved after a movement op (rebuilt at it).
    let mut moved = vec![false; g.len()];
    let mut any = false;
    for (_, n) in g.iter() {
        if !movable(n) || !sinkable(n.inputs[0]) {
            continue;
        }
        any = true;
        let mut stack = vec![(n.inputs[0], 0usize)];
        while let Some((v, depth)) = stack.pop() {
            let (p, pn) = (g.producer(v).0, g.producer_node(v));
            moved[p.index()] = true;
            if depth + 1 < MAX_SINK {
                for &i in &pn.inputs {
                    if g.ty(i).shape() == g.ty(v).shape() && sinkable(i) {
                        stack.push((i, depth + 1));
                    }
                }
            }
        }
    }
    if !any {
        return Ok(None);
    }
    let rebuilt = g.rebuild(|out, map, id, n, ins| {
        if moved[id.index()] {
            return Ok(Rebuilt::Drop);
        }
        if !(movable(n) && moved[g.producer(n.inputs[0]).0.index()]) {
            return Ok(Rebuilt::Copy);
        }
        let _ = ins;
        // Post-order over the moved pointwise nodes under this movement op.
        let mut done: std::collections::HashMap<ValueId, ValueId> = Default::default();
        let mut stack = vec![(n.inputs[0], false)];
        while let Some((v, ready)) = stack.pop() {
            if done.contains_key(&v) {
                continue;
            }
            let pn = g.producer_node(v);
            if !moved[g.producer(v).0.index()] {
                // A value computed anyway: the movement op reads it.
                let m = out.push(n.op.clone(), &[map.get(v)?])?;
                done.insert(v, out.node(m).out());
                continue;
            }
            if !ready {
                stack.push((v, true));
                for &i in pn.inputs.iter().rev() {
                    if g.ty(i).shape() == g.ty(v).shape() {
                        stack.push((i, false));
                    }
                }
                continue;
            }
            let args = pn
                .inputs
                .iter()
                .map(|&i| match done.get(&i) {
                    Some(&d) if g.ty(i).shape() == g.ty(v).shape() => Ok(d),
                    _ => map.get(i),
                })
                .collect::<Result<Vec<_>>>()?;
            let p = out.push(pn.op.clone(), &args)?;
            done.insert(v, out.node(p).out());
        }
        Ok(Rebuilt::Replace(vec![done[&n.inputs[0]]]))
    })?;
    Ok(Some(rebuilt))
}

/// `g` without the movement ops (reshapes, slices, broadcasts)
/// whose result is no output and is read only by other such dropped ops:
/// those whose readers now read their source through a view. `None` when
/// there is none.
///
/// # Errors
/// An invalid graph.
pub fn drop_unread_views(g: &Graph) -> Result<Option<Graph>> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.num_values()];
    for (id, n) in g.iter() {
        for i in &n.inputs {
            readers[i.index()].push(id.index());
        }
    }
    let mut is_output = vec![false; g.num_values()];
    for o in g.outputs() {
        is_output[o.index()] = true;
    }
    // Readers come after their operands: decide from the last node back.
    let mut drop = vec![false; g.len()];
    for (id, n) in g.iter().rev() {
        drop[id.index()] = is_view_op(n.op.as_ref())
            && n.results()
                .all(|v| !is_output[v.index()] && readers[v.index()].iter().all(|&r| drop[r]));
    }
    if !drop.contains(&true) {
        return Ok(None);
    }
    let rebuilt = g.rebuild(|_, _, id, _, _| {
        Ok(if drop[id.index()] { Rebuilt::Drop } else { Rebuilt::Copy })
    })?;
    Ok(Some(rebuilt))
}

#[cfg(test)]
mod tests {
    use crate::{compile, Parallelism};
    use anvil_core::{trace, trace_with, Graph, Tensor, Var};
    use anvil_ops::VarExt;

    fn run(g: &Graph, args: &[Tensor]) -> Vec<u64> {
        let out = compile(g).unwrap().run(args, &Parallelism::sequential()).unwrap();
        out[0].to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).collect()
    }

    /// `tail(x, chain(x))` compiled whole, against the same with
    /// `chain(x)` materialised by a plan of its own and passed in: the
    /// same bits. Returns the whole program's plan graph.
    fn same_bits_as_materialised(
        x: &Tensor,
        chain: impl Fn(&Var) -> Var,
        tail: impl Fn(&Var, &Var) -> Var,
    ) -> Graph {
        let whole = trace(&|v: &Var| tail(v, &chain(v)), x.clone()).unwrap();
        let chained = compile(&trace(&|v: &Var| chain(v), x.clone()).unwrap())
            .unwrap()
            .run(std::slice::from_ref(x), &Parallelism::sequential())
            .unwrap()
            .remove(0);
        let apart =
            trace_with(&[x.ty(), chained.ty()], |v: &[Var]| Ok(vec![tail(&v[0], &v[1])])).unwrap();
        let got = run(&whole, std::slice::from_ref(x));
        assert!(got == run(&apart, &[x.clone(), chained]), "{whole}");
        compile(&whole).unwrap().graph().clone()
    }

    fn names(g: &Graph) -> Vec<&'static str> {
        g.iter().map(|(_, n)| n.op.name()).collect()
    }

    fn arange(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec((0..n).map(|i| (i as f64 * 0.37).sin() + 0.1).collect(), shape).unwrap()
    }

    #[test]
    fn a_flip_and_reshapes_read_by_a_fused_program_are_views_not_steps() {
        // W7's pattern: cos(x)[None, :] * flip(x)[None, :], and x[:, None]
        // broadcast against it.
        let x = arange(&[5]);
        let g = same_bits_as_materialised(
            &x,
            |v| v.flip(&[0]).reshape(&[1, 5]),
            |v, y| v.cos().reshape(&[1, 5]) * y + v.reshape(&[5, 1]) * y.exp(),
        );
        let names = names(&g);
        assert!(!names.iter().any(|&n| n == "reshape" || n == "slice"), "{g}");
    }

    #[test]
    fn strided_slices_and_broadcasts_compose_into_one_view() {
        // x[1:10:3] (3 elements) broadcast to (4, 3), a slice of it, flipped.
        let x = arange(&[12]);
        let g = same_bits_as_materialised(
            &x,
            |v| {
                v.slice_axis(0, Some(1), Some(10), 3).broadcast_to(&[4, 3]).slice_axis(
                    0,
                    Some(3),
                    None,
                    -2,
                )
            },
            |_, y| y.broadcast_to(&[2, 2, 3]).sin() * 2.0 + y,
        );
        assert!(!names(&g).iter().any(|&n| n == "slice" || n == "broadcast_to"), "{g}");
        // 2-D: a flipped column block of a matrix.
        let m = arange(&[4, 6]);
        let g = same_bits_as_materialised(
            &m,
            |v| v.slice_axis(1, Some(4), Some(0), -2).flip(&[0]),
            |_, y| y.broadcast_to(&[3, 4, 2]).exp() - y,
        );
        assert!(!names(&g).contains(&"slice"), "{g}");
    }

    #[test]
    fn a_reshape_that_merges_axes_of_a_strided_slice_is_materialised() {
        // x[::2, ::-1] is not contiguous: its reshape to one axis cannot be
        // a view; the slice runs as a step (the reshape is then a view of it).
        let m = arange(&[4, 6]);
        let g = same_bits_as_materialised(
            &m,
            |v| v.slice_axis(0, None, None, 2).flip(&[1]).reshape(&[12]),
            |_, y| y.sin() * y,
        );
        assert!(names(&g).contains(&"slice"), "{g}");
        assert!(!names(&g).contains(&"reshape"), "{g}");
        // A contiguous row block merges fine: no step at all.
        let g = same_bits_as_materialised(
            &m,
            |v| v.slice_axis(0, Some(1), Some(3), 1).reshape(&[12]),
            |_, y| y.broadcast_to(&[2, 12]).sin() * y,
        );
        assert!(!names(&g).iter().any(|&n| n == "reshape" || n == "slice"), "{g}");
    }

    #[test]
    fn a_view_that_is_an_output_or_read_by_another_kernel_stays_a_step() {
        let x = arange(&[6]);
        let traced = trace(
            &|v: &Var| {
                let r = v.flip(&[0]);
                vec![r.exp(), r.clone()]
            },
            x.clone(),
        )
        .unwrap();
        let plan = compile(&traced).unwrap();
        assert!(names(plan.graph()).contains(&"slice"), "{}", plan.graph());
        let out = plan.run(std::slice::from_ref(&x), &Parallelism::sequential()).unwrap();
        let xs = x.to_vec::<f64>().unwrap();
        let flipped: Vec<f64> = xs.iter().rev().copied().collect();
        assert_eq!(out[1].to_vec::<f64>().unwrap(), flipped);
        // A source larger than the program's result is not kept alive for it.
        let big = arange(&[64]);
        let g =
            compile(&trace(&|v: &Var| v.slice_axis(0, Some(0), Some(4), 1).exp(), big).unwrap())
                .unwrap();
        assert!(names(g.graph()).contains(&"slice"), "{}", g.graph());
    }

    fn count(g: &Graph, name: &str) -> usize {
        names(g).iter().filter(|&&n| n == name).count()
    }

    #[test]
    fn pointwise_ops_under_small_broadcasts_join_their_readers_program() {
        // W7's pattern: sin(x)[:, None] * cos(x)[None, :] at n = 5 is one
        // fused step (sin and cos computed at each of the 25 positions),
        // with the bits of sin(x) materialised apart.
        let x = arange(&[5]);
        let g = same_bits_as_materialised(
            &x,
            |v| v.sin().reshape(&[5, 1]),
            |v, y| y * v.cos().reshape(&[1, 5]) + v.exp().reshape(&[1, 5]),
        );
        assert_eq!(count(&g, "fused"), 1, "{g}");
        assert!(!names(&g).contains(&"reshape"), "{g}");
        // A slice of a pointwise product: computed on the slice only.
        let g = same_bits_as_materialised(
            &x,
            |v| (v.exp() * v).slice_axis(0, Some(1), Some(5), 2),
            |_, y| y.sin() + 1.0,
        );
        assert_eq!(count(&g, "fused"), 1, "{g}");
        // A broadcast_to of a pointwise op, into a small program.
        let g = same_bits_as_materialised(
            &x,
            |v| v.tanh().broadcast_to(&[3, 5]),
            |v, y| y * v.reshape(&[1, 5]),
        );
        assert_eq!(count(&g, "fused"), 1, "{g}");
    }

    #[test]
    fn large_broadcasts_keep_the_pointwise_op_a_step_of_its_own() {
        // 40 × 40 outputs: sin is computed on 40 elements, not 1600 times.
        let x = arange(&[40]);
        let g = same_bits_as_materialised(
            &x,
            |v| v.sin().reshape(&[40, 1]),
            |v, y| y * v.cos().reshape(&[1, 40]),
        );
        assert!(count(&g, "fused") >= 2, "{g}");
        let sin_alone =
            g.iter().any(|(_, n)| n.op.params() == "sin(r0)" && g.ty(n.out()).numel() == 40);
        assert!(sin_alone, "{g}");
    }

    #[test]
    fn an_op_that_reads_its_position_is_not_recomputed_under_a_broadcast() {
        // tril reads each element's row and column: computed at the
        // (2, 3, 3) positions of its reader it would zero other elements.
        let m = arange(&[3, 3]);
        let g = same_bits_as_materialised(
            &m,
            |v| v.tril(0),
            |v, y| y.broadcast_to(&[2, 3, 3]) * 2.0 + v.broadcast_to(&[2, 3, 3]),
        );
        assert!(count(&g, "fused") >= 2, "{g}");
        let whole = trace(&|v: &Var| v.tril(0) * v.broadcast_to(&[2, 3, 3]), m.clone()).unwrap();
        let got = compile(&whole)
            .unwrap()
            .run(std::slice::from_ref(&m), &Parallelism::sequential())
            .unwrap();
        let (got, ms) = (got[0].to_vec::<f64>().unwrap(), m.to_vec::<f64>().unwrap());
        for (k, g) in got.iter().enumerate() {
            let (r, c) = ((k % 9) / 3, k % 3);
            let want = if c <= r { ms[k % 9] } else { 0.0 } * ms[k % 9];
            assert_eq!(g.to_bits(), want.to_bits(), "element {k}: {got:?}");
        }
    }
}
