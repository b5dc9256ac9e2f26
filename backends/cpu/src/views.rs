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
}
