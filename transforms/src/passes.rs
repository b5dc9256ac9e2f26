//! Graph passes: dead-code elimination and common-subexpression elimination.
//!
//! Both copy the graph into a fresh arena (ids stay dense and in topological
//! order) and keep every input in its position, so a pass never changes a
//! graph's signature. CSE relies on ops comparing and hashing by type and
//! parameters (`dyn Op: Eq + Hash`).

use anvil_core::{Error, Graph, Node, NodeId, Op, Parameter, Result};
use std::collections::HashMap;

type Key = (Box<dyn Op>, Vec<NodeId>);

/// Copies the nodes `keep` selects into a new graph. With `merge`, a node
/// equal to an earlier one (same op, same new inputs) is mapped onto it.
fn rebuild(g: &Graph, keep: &[bool], merge: bool) -> Result<Graph> {
    g.verify()?;
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    let mut seen: HashMap<Key, NodeId> = HashMap::new();
    let lookup = |map: &[Option<NodeId>], i: NodeId| {
        map[i.index()].ok_or_else(|| Error::InvalidGraph {
            node: i.index(),
            msg: "a kept node uses a dropped one".into(),
        })
    };
    for (id, n) in g.iter() {
        let new = if n.op.is::<Parameter>() {
            out.add_input(n.ty.clone())?
        } else if !keep[id.index()] {
            continue;
        } else {
            let inputs = n.inputs.iter().map(|&i| lookup(&map, i)).collect::<Result<Vec<_>>>()?;
            let key = (n.op.clone(), inputs.clone());
            match seen.get(&key) {
                Some(&existing) if merge => existing,
                _ => {
                    let new = out.push_node(Node { op: n.op.clone(), inputs, ty: n.ty.clone() })?;
                    if merge {
                        seen.insert(key, new);
                    }
                    new
                }
            }
        };
        map[id.index()] = Some(new);
    }
    let outputs = g.outputs().iter().map(|&o| lookup(&map, o)).collect::<Result<Vec<_>>>()?;
    out.set_outputs(outputs);
    Ok(out)
}

/// Removes nodes that no output depends on.
///
/// # Errors
/// An invalid input graph.
pub fn dce(g: &Graph) -> Result<Graph> {
    let mut live = vec![false; g.len()];
    for o in g.outputs() {
        live[o.index()] = true;
    }
    for (id, n) in g.iter().collect::<Vec<_>>().into_iter().rev() {
        if live[id.index()] {
            for i in &n.inputs {
                live[i.index()] = true;
            }
        }
    }
    rebuild(g, &live, false)
}

/// Merges nodes that apply equal ops to the same inputs.
///
/// # Errors
/// An invalid input graph.
pub fn cse(g: &Graph) -> Result<Graph> {
    rebuild(g, &vec![true; g.len()], true)
}

/// Algebraic simplification: rewrites that remove work transforms tend to
/// create, applied in one forward sweep.
///
/// - a matrix product with an identity constant (the `W @ I` of a `jacfwd`
///   seed) is the other operand;
/// - a permute of a permute is one permute, and the identity permute is
///   nothing;
/// - a reshape of a reshape is one reshape, and a reshape, broadcast or
///   cast to the operand's own type is nothing;
/// - a product with ones, a quotient by ones, a sum with zeros (constants)
///   is the other operand;
/// - a sum over exactly the axes a broadcast copied along is the operand
///   times the number of copies (rounded once, so it may differ from the sum
///   in the last bit);
/// - sums and products around a 0/1 constant (a `jacfwd` seed): see
///   `rewrite_sum` and `rewrite_masked` (a sum over the identity seed's
///   products reads their diagonal and leaves out the seed's zeros, so an
///   infinite derivative does not turn the other entries into NaN).
///
/// Values and types are unchanged, so the graph's signature is too.
///
/// # Errors
/// An invalid input graph.
pub fn simplify(g: &Graph) -> Result<Graph> {
    use anvil_ops::elementwise::Cast;
    use anvil_ops::matmul::Matmul;
    use anvil_ops::movement::{BroadcastTo, Permute, Reshape};
    g.verify()?;
    let mut out = Graph::new();
    let mut map: Vec<NodeId> = Vec::with_capacity(g.len());
    let mut masks = Masks::default();
    for (_, n) in g.iter() {
        let ins: Vec<NodeId> = n.inputs.iter().map(|i| map[i.index()]).collect();
        if n.op.is::<Parameter>() {
            map.push(out.add_input(n.ty.clone())?);
            continue;
        }
        let same_type = |i: NodeId, out: &Graph| *out.ty(i) == n.ty;
        let replaced = if n.op.is::<Matmul>() {
            let (a, b) = (ins[0], ins[1]);
            if masks.kind(&out, b).identity && same_type(a, &out) {
                Some(a)
            } else if masks.kind(&out, a).identity && same_type(b, &out) {
                Some(b)
            } else {
                None
            }
        } else if n.op.is::<Reshape>() || n.op.is::<BroadcastTo>() || n.op.is::<Cast>() {
            same_type(ins[0], &out).then_some(ins[0])
        } else {
            neutral_operand(&out, &mut masks, n.op.as_ref(), &ins, &n.ty)
        };
        if let Some(r) = replaced {
            map.push(r);
            continue;
        }
        if let Some(r) = rewrite_sum(&mut out, n.op.as_ref(), &ins, &n.ty)? {
            map.push(r);
            continue;
        }
        if let Some(r) = rewrite_masked(&mut out, &mut masks, n.op.as_ref(), &ins, &n.ty)? {
            map.push(r);
            continue;
        }
        if let Some(r) = sum_of_broadcast(&mut out, n.op.as_ref(), &ins, &n.ty)? {
            map.push(r);
            continue;
        }
        // An elementwise op broadcasts by itself: read a broadcast operand's
        // source instead, when the result's type stays the same.
        let ins = if broadcasts_itself(n.op.as_ref()) {
            unbroadcast_operands(&out, ins, &n.ty)
        } else {
            ins
        };
        // Fold a chain of two into one node.
        let inner = ins.first().map(|&i| out.node(i));
        let fused: Option<(Box<dyn Op>, NodeId)> = match (n.op.downcast_ref::<Permute>(), inner) {
            (Some(p), Some(node)) => node.op.downcast_ref::<Permute>().map(|q| {
                let perm: Vec<usize> = p.perm.iter().map(|&a| q.perm[a]).collect();
                (Box::new(Permute { perm }) as Box<dyn Op>, node.inputs[0])
            }),
            _ => None,
        }
        .or_else(|| match (n.op.downcast_ref::<Reshape>(), inner) {
            (Some(r), Some(node)) if node.op.is::<Reshape>() => {
                Some((Box::new(r.clone()) as Box<dyn Op>, node.inputs[0]))
            }
            _ => None,
        });
        let id = match fused {
            Some((op, src)) => {
                let identity = op
                    .downcast_ref::<Permute>()
                    .is_some_and(|p| p.perm.iter().enumerate().all(|(i, &a)| i == a));
                if (identity || op.is::<Reshape>()) && *out.ty(src) == n.ty {
                    src
                } else {
                    out.push_node(Node { op, inputs: vec![src], ty: n.ty.clone() })?
                }
            }
            None => {
                let identity =
                    n.op.downcast_ref::<Permute>()
                        .is_some_and(|p| p.perm.iter().enumerate().all(|(i, &a)| i == a));
                if identity {
                    ins[0]
                } else {
                    out.push_node(Node { op: n.op.clone(), inputs: ins, ty: n.ty.clone() })?
                }
            }
        };
        map.push(id);
    }
    out.set_outputs(g.outputs().iter().map(|o| map[o.index()]).collect());
    Ok(out)
}

/// Rewrites of sums and differences that save passes over large arrays
/// (the Jacobians of `jacfwd` are sums of `seed * derivative` terms):
///
/// - `a + (-b)` → `a - b`, `(-a) + b` → `b - a`, `a - (-b)` → `a + b`;
/// - `c*x ± c*y` → `c * (x ± y)`, and `(a + c*x) ± c*y` → `a + c * (x ± y)`:
///   with `c` a large seed and `x`, `y` small derivatives, one product over
///   the large shape instead of two.
///
/// Returns the node that replaces the sum, if any; only when its type is
/// the original's.
fn rewrite_sum(
    out: &mut Graph,
    op: &dyn Op,
    ins: &[NodeId],
    ty: &anvil_core::TensorType,
) -> Result<Option<NodeId>> {
    use anvil_ops::elementwise::{Add, Mul, Neg, Sub};
    let (is_add, is_sub) = (op.is::<Add>(), op.is::<Sub>());
    if !(is_add || is_sub) || ins.len() != 2 {
        return Ok(None);
    }
    let (a, b) = (ins[0], ins[1]);
    let neg_of = |out: &Graph, i: NodeId| out.node(i).op.is::<Neg>().then(|| out.node(i).inputs[0]);
    let mul_of = |out: &Graph, i: NodeId| {
        let node = out.node(i);
        node.op.is::<Mul>().then(|| (node.inputs[0], node.inputs[1]))
    };
    let checked =
        |out: &mut Graph, id: NodeId| -> Option<NodeId> { (*out.ty(id) == *ty).then_some(id) };
    let push = |out: &mut Graph, op: Box<dyn Op>, xs: &[NodeId]| out.push(op, xs);
    // Signs.
    if is_add {
        if let Some(nb) = neg_of(out, b) {
            let id = push(out, Box::new(Sub), &[a, nb])?;
            return Ok(checked(out, id));
        }
        if let Some(na) = neg_of(out, a) {
            let id = push(out, Box::new(Sub), &[b, na])?;
            return Ok(checked(out, id));
        }
    } else if let Some(nb) = neg_of(out, b) {
        let id = push(out, Box::new(Add), &[a, nb])?;
        return Ok(checked(out, id));
    }
    let combine: Box<dyn Op> = if is_add { Box::new(Add) } else { Box::new(Sub) };
    // The common factor of two products, and their other factors.
    let common = |p: (NodeId, NodeId), q: (NodeId, NodeId)| {
        if p.0 == q.0 {
            Some((p.0, p.1, q.1))
        } else if p.1 == q.1 {
            Some((p.1, p.0, q.0))
        } else {
            None
        }
    };
    let Some(q) = mul_of(out, b) else { return Ok(None) };
    if let Some(p) = mul_of(out, a) {
        if let Some((c, x, y)) = common(p, q) {
            let inner = push(out, combine, &[x, y])?;
            let id = push(out, Box::new(Mul), &[c, inner])?;
            return Ok(checked(out, id));
        }
    }
    // (a0 + c*x) ± c*y
    let left = out.node(a);
    if left.op.is::<Add>() {
        let (a0, a1) = (left.inputs[0], left.inputs[1]);
        if let Some(p) = mul_of(out, a1) {
            if let Some((c, x, y)) = common(p, q) {
                let inner = push(out, combine, &[x, y])?;
                let scaled = push(out, Box::new(Mul), &[c, inner])?;
                let id = push(out, Box::new(Add), &[a0, scaled])?;
                return Ok(checked(out, id));
            }
        }
    }
    Ok(None)
}

/// Ops that broadcast their operands themselves (NumPy rules).
fn broadcasts_itself(op: &dyn Op) -> bool {
    use anvil_ops::elementwise::{Add, Atan2, Div, Max, Min, Mul, Pow, Select, Sub};
    op.is::<Add>()
        || op.is::<Sub>()
        || op.is::<Mul>()
        || op.is::<Div>()
        || op.is::<Pow>()
        || op.is::<Max>()
        || op.is::<Min>()
        || op.is::<Atan2>()
        || op.is::<Select>()
}

/// `ins` with every `broadcast_to` operand replaced by its source, one at a
/// time, as long as the operands still broadcast to the result's shape.
fn unbroadcast_operands(
    out: &Graph,
    mut ins: Vec<NodeId>,
    ty: &anvil_core::TensorType,
) -> Vec<NodeId> {
    use anvil_ops::movement::BroadcastTo;
    for k in 0..ins.len() {
        let node = out.node(ins[k]);
        if !node.op.is::<BroadcastTo>() {
            continue;
        }
        let mut trial = ins.clone();
        trial[k] = node.inputs[0];
        let shape = trial.iter().try_fold(Vec::new(), |acc: Vec<usize>, &i| {
            anvil_core::shape::broadcast_shapes("simplify", &acc, &out.ty(i).shape, "").ok()
        });
        if shape.as_deref() == Some(&ty.shape[..]) {
            ins = trial;
        }
    }
    ins
}

/// What a constant is, for the rewrites around `jacfwd` seeds and neutral
/// elements (all false for a node that is not a floating-point constant).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mask {
    /// Every element is 0 or 1.
    zero_one: bool,
    /// Every element is 1.
    ones: bool,
    /// Every element is 0.
    zeros: bool,
    /// A square identity matrix.
    identity: bool,
}

/// The [`Mask`] of the nodes of a graph under construction, each constant
/// inspected once (seeds are large).
#[derive(Default)]
struct Masks(std::collections::HashMap<NodeId, Mask>);

impl Masks {
    fn kind(&mut self, g: &Graph, id: NodeId) -> Mask {
        *self.0.entry(id).or_insert_with(|| {
            let Some(c) = g.node(id).op.downcast_ref::<anvil_core::Constant>() else {
                return Mask::default();
            };
            let t = &c.value;
            if !t.dtype().is_float() {
                return Mask::default();
            }
            let v = t.to_f64_vec();
            let zero_one = v.iter().all(|&x| x == 0.0 || x == 1.0);
            let identity = zero_one
                && match t.shape() {
                    [r, k] if r == k => {
                        v.iter().enumerate().all(|(i, &x)| (x == 1.0) == (i / r == i % r))
                    }
                    _ => false,
                };
            Mask {
                zero_one,
                ones: zero_one && v.iter().all(|&x| x == 1.0),
                zeros: zero_one && v.iter().all(|&x| x == 0.0),
                identity,
            }
        })
    }
}

/// The operand of a binary op that the op leaves unchanged, when the other
/// is a constant neutral element and the result has the operand's type:
/// `x * 1`, `1 * x`, `x / 1`, `x + 0`, `0 + x`, `x - 0` (exact, up to the
/// sign of a zero for the sums).
fn neutral_operand(
    out: &Graph,
    masks: &mut Masks,
    op: &dyn Op,
    ins: &[NodeId],
    ty: &anvil_core::TensorType,
) -> Option<NodeId> {
    use anvil_ops::elementwise::{Add, Div, Mul, Sub};
    let [a, b] = ins[..] else { return None };
    let keeps = |x: NodeId| *out.ty(x) == *ty;
    let (ka, kb) = (masks.kind(out, a), masks.kind(out, b));
    if op.is::<Mul>() {
        (kb.ones && keeps(a)).then_some(a).or_else(|| (ka.ones && keeps(b)).then_some(b))
    } else if op.is::<Add>() {
        (kb.zeros && keeps(a)).then_some(a).or_else(|| (ka.zeros && keeps(b)).then_some(b))
    } else if op.is::<Div>() {
        (kb.ones && keeps(a)).then_some(a)
    } else if op.is::<Sub>() {
        (kb.zeros && keeps(a)).then_some(a)
    } else {
        None
    }
}

/// `sum(broadcast_to(x), axes)` over exactly the axes the broadcast added or
/// stretched: `x` times the number of copies, reshaped (the transpose of a
/// broadcast meets the broadcast of a cotangent in reverse mode). The
/// product is rounded once, where the sum of copies rounds at every step:
/// the two can differ in the last bit (the product is the closer one).
fn sum_of_broadcast(
    out: &mut Graph,
    op: &dyn Op,
    ins: &[NodeId],
    ty: &anvil_core::TensorType,
) -> Result<Option<NodeId>> {
    use anvil_ops::elementwise::Mul;
    use anvil_ops::movement::{BroadcastTo, Reshape};
    use anvil_ops::reduce::ReduceSum;
    let Some(r) = op.downcast_ref::<ReduceSum>() else { return Ok(None) };
    let node = out.node(ins[0]);
    if !node.op.is::<BroadcastTo>() {
        return Ok(None);
    }
    let x = node.inputs[0];
    let (from, to) = (out.ty(x).shape.clone(), node.ty.shape.clone());
    let lead = to.len() - from.len();
    // The axes of `to` along which the broadcast copies.
    let copied: Vec<usize> =
        (0..to.len()).filter(|&d| d < lead || (from[d - lead] == 1 && to[d] != 1)).collect();
    let copies: usize = copied.iter().map(|&d| to[d]).product();
    // Reduced size-1 axes change nothing; every copied axis must be reduced.
    let reduced: Vec<usize> = r.axes.iter().copied().filter(|&d| to[d] != 1).collect();
    // A broadcast to an empty axis sums to zeros, not to `x * 0`.
    if reduced != copied || out.ty(x).numel() != ty.numel() || copies == 0 {
        return Ok(None);
    }
    let mut id = x;
    if copies != 1 {
        let k = out.push(
            Box::new(anvil_core::Constant {
                value: anvil_core::Tensor::scalar(copies as f64).cast(ty.dtype),
            }),
            &[],
        )?;
        id = out.push(Box::new(Mul), &[id, k])?;
    }
    if out.ty(id).shape != ty.shape {
        id = out.push(Box::new(Reshape { shape: ty.shape.clone() }), &[id])?;
    }
    Ok((*out.ty(id) == *ty).then_some(id))
}

/// Rewrites around a constant `M` of zeros and ones of the result's full
/// shape — the seed of `jacfwd`, whose products with small derivatives are
/// most of a Jacobian's work:
///
/// - `-(M * a)` becomes `M * (-a)` when `a` is smaller than the result (it
///   broadcasts): exact for `M` in {0, 1}, NaN and infinities included.
///   (`(M * a) * b → M * (a * b)` is not done: where `M` is 0 it turns the
///   exact 0 of `(0 * a) * b` into NaN when `a * b` overflows.)
/// - `sum(x, axis)` over one axis of an `n × n` chain `x = ((I * v) ∘ b) ∘ c …`
///   — the identity times broadcast operands, then products, quotients and
///   negations by broadcast operands — is the chain replayed on the
///   diagonal: `((v_j ∘ b_j) ∘ c_j) …`, the same operations on the same
///   values in the same order, so the diagonal entries are exact. The
///   off-diagonal entries of such a chain are zeros of the seed, `(0 · v) ∘
///   b …`; the sum leaves them out, so where a derivative is infinite or
///   NaN the rewritten sum is that entry's value, not the NaN the dense
///   product `0 · ∞` would spread (and a `-0` diagonal entry stays `-0`).
///
/// Returns the node that replaces the op, if any; only when its type is the
/// original's.
fn rewrite_masked(
    out: &mut Graph,
    masks: &mut Masks,
    op: &dyn Op,
    ins: &[NodeId],
    ty: &anvil_core::TensorType,
) -> Result<Option<NodeId>> {
    use anvil_ops::elementwise::{Mul, Neg};
    use anvil_ops::movement::Reshape;
    use anvil_ops::reduce::ReduceSum;
    let numel = ty.numel();
    let small = |out: &Graph, i: NodeId| out.ty(i).numel() < numel;
    if op.is::<Neg>() {
        let node = out.node(ins[0]);
        if node.op.is::<Mul>() && node.ty == *ty {
            let (p, q) = (node.inputs[0], node.inputs[1]);
            let full = |m: NodeId| out.ty(m).shape == ty.shape;
            let found = if full(p) && masks.kind(out, p).zero_one && small(out, q) {
                Some((p, q))
            } else if full(q) && masks.kind(out, q).zero_one && small(out, p) {
                Some((q, p))
            } else {
                None
            };
            if let Some((m, a)) = found {
                let na = out.push(Box::new(Neg), &[a])?;
                let id = out.push(Box::new(Mul), &[m, na])?;
                return Ok((*out.ty(id) == *ty).then_some(id));
            }
        }
    } else if let Some(r) = op.downcast_ref::<ReduceSum>() {
        let [n, k] = out.ty(ins[0]).shape[..] else { return Ok(None) };
        if r.axes.len() != 1 || n != k {
            return Ok(None);
        }
        if let Some(diag) = diagonal_of_chain(out, masks, ins[0], n)? {
            let id = out.push(Box::new(Reshape { shape: ty.shape.clone() }), &[diag])?;
            return Ok((*out.ty(id) == *ty).then_some(id));
        }
    }
    Ok(None)
}

/// The diagonal, as an `[n]` vector, of an `n × n` node that is the identity
/// times a broadcast operand followed by products, quotients and negations
/// with broadcast operands (see [`rewrite_masked`]); the same operations
/// replayed on the diagonal values. `None` for any other node.
fn diagonal_of_chain(
    out: &mut Graph,
    masks: &mut Masks,
    id: NodeId,
    n: usize,
) -> Result<Option<NodeId>> {
    use anvil_ops::elementwise::{Div, Mul, Neg};
    use anvil_ops::movement::{BroadcastTo, Reshape};
    // The diagonal of a broadcast operand of at most `n` elements: itself
    // ([n], [1, n] or [n, 1]), or its one value everywhere.
    let diag_of_small = |out: &mut Graph, v: NodeId| -> Result<Option<NodeId>> {
        let ty = out.ty(v).clone();
        Ok(Some(match ty.numel() {
            1 => {
                let s = out.push(Box::new(Reshape { shape: vec![] }), &[v])?;
                out.push(Box::new(BroadcastTo { shape: vec![n] }), &[s])?
            }
            m if m == n && ty.shape.len() <= 2 && ty.shape.iter().all(|&d| d == 1 || d == n) => {
                out.push(Box::new(Reshape { shape: vec![n] }), &[v])?
            }
            _ => return Ok(None),
        }))
    };
    let node = out.node(id).clone();
    if node.ty.shape != [n, n] {
        return Ok(None);
    }
    let small = |out: &Graph, i: NodeId| out.ty(i).numel() <= n;
    if node.op.is::<Neg>() {
        return match diagonal_of_chain(out, masks, node.inputs[0], n)? {
            Some(d) => Ok(Some(out.push(Box::new(Neg), &[d])?)),
            None => Ok(None),
        };
    }
    let (is_mul, is_div) = (node.op.is::<Mul>(), node.op.is::<Div>());
    if !(is_mul || is_div) {
        return Ok(None);
    }
    let (p, q) = (node.inputs[0], node.inputs[1]);
    // The chain's start: I * v or v * I.
    if is_mul && masks.kind(out, p).identity && out.ty(p).shape == [n, n] && small(out, q) {
        return diag_of_small(out, q);
    }
    if is_mul && masks.kind(out, q).identity && out.ty(q).shape == [n, n] && small(out, p) {
        return diag_of_small(out, p);
    }
    // A link: chain ∘ small, or small * chain (in the original order).
    let (chain, other, chain_first) = if small(out, q) {
        (p, q, true)
    } else if is_mul && small(out, p) {
        (q, p, false)
    } else {
        return Ok(None);
    };
    let Some(d) = diagonal_of_chain(out, masks, chain, n)? else { return Ok(None) };
    let Some(o) = diag_of_small(out, other)? else { return Ok(None) };
    let args = if chain_first { [d, o] } else { [o, d] };
    Ok(Some(out.push(node.op.clone(), &args)?))
}
