//! Loop results written in their final place.
//!
//! A chunked `vmap`, `jacfwd` or `jacrev` runs as a [`Scan`] over the full
//! chunks: its stacked result `[L, k, ...]` is merged into one batch axis
//! (`reshape` to `[L·k, ...]`), joined with the last, partial chunk
//! (`concatenate` along that axis) and, for `jacfwd` or an `out_axes` other
//! than 0, moved to another axis (`permute`). Run literally, the join and
//! the move each copy the whole result, so the peak memory of a chunked
//! Jacobian is two or three times the Jacobian.
//!
//! The plan rewrite of [`Scan`] turns such a chain into one [`PlacedScan`]: the
//! final result is allocated once, every step writes its chunk straight
//! into its place (a strided copy of one chunk), and the partial chunk is
//! copied in after the loop. Only the plan sees the new op (it is internal,
//! like [`crate::fusion::Fused`]); values are unchanged. The chain's ops
//! are recognised by their declared [`Op::movement`], so a plugin's
//! reshape, concatenation or permutation joins it too.

use crate::micro::Buf;
use anvil_core::{
    op::expect_arity, Block, Error, Graph, Mapped, Movement, NodeId, Op, Rebuilt, Result,
    TensorType, ValueId,
};
use anvil_ops::scan::Scan;
use std::collections::HashMap;

/// Where the chunks of one stacked result go in its final array: a step's
/// chunk (`[k, rest...]`, row-major) element `(j, r...)` of step `t` lands
/// at `t · per_step + j · strides[0] + Σ r_d · strides[d]`, and the partial
/// chunks after the loop at their own offsets with the same strides.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    /// The final array's type.
    pub ty: TensorType,
    /// Strides (in elements of the final array) of a chunk's axes.
    pub strides: Vec<usize>,
    /// The offset of step `t + 1`'s chunk from step `t`'s.
    pub per_step: usize,
    /// The partial chunks: operand index of the [`PlacedScan`] and offset.
    pub tails: Vec<(usize, usize)>,
}

/// A [`Scan`] whose stacked results are written into their final arrays
/// (see the module docs), or contracted over the steps as they come (see
/// [`crate::contraction`]). Operands: the scan's, then the partial chunks,
/// then the arrays contracted with. Results: the scan's carries, then per
/// stacked result its final array ([`Place::ty`]), its contraction
/// ([`Contraction::ty`]) or, where it is neither, the stacked array.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlacedScan {
    /// The loop.
    pub scan: Scan,
    /// Per stacked result, where it goes (`None`: stacked as by the scan).
    pub places: Vec<Option<Place>>,
    /// Per stacked result, the product it is summed into instead of being
    /// stacked (`None`, or an empty list: none).
    pub contractions: Vec<Option<Contraction>>,
    /// The number of operands (the scan's, the partial chunks and the
    /// arrays contracted with).
    pub operands: usize,
}

/// A stacked result `Y` (`[length, m]`) that is read only by its product
/// with another array `Z` (`[length, n]`, computed before the loop) over
/// the steps: `Yᵀ Z` (`[m, n]`) or `Zᵀ Y` (`[n, m]`), a `matmul_t` with
/// its left operand transposed. The loop sums it chunk by chunk while it
/// runs (see [`crate::contraction`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Contraction {
    /// The [`PlacedScan`] operand holding `Z`.
    pub with: usize,
    /// `Yᵀ Z` (`true`) or `Zᵀ Y` (`false`).
    pub y_first: bool,
    /// The product's type.
    pub ty: TensorType,
}

impl Op for PlacedScan {
    fn name(&self) -> &'static str {
        "placed_scan"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, self.operands)?;
        let n = self.scan.body.inputs().len();
        let mut types = self.scan.infer_results(&inputs[..n])?;
        let nk = self.scan.carries;
        for (ty, place) in types[nk..].iter_mut().zip(&self.places) {
            if let Some(p) = place {
                *ty = p.ty.clone();
            }
        }
        for (ty, c) in types[nk..].iter_mut().zip(&self.contractions) {
            if let Some(c) = c {
                *ty = c.ty.clone();
            }
        }
        Ok(types)
    }
    fn params(&self) -> String {
        let placed: Vec<String> = self
            .places
            .iter()
            .map(|p| match p {
                Some(p) => format!("{:?}", p.strides),
                None => "stacked".into(),
            })
            .collect();
        let contracted: Vec<String> = self
            .contractions
            .iter()
            .enumerate()
            .filter_map(|(j, c)| {
                let c = c.as_ref()?;
                let (y, z) = (format!("y{j}"), format!("%{}", c.with));
                Some(if c.y_first { format!("{y}ᵀ·{z}") } else { format!("{z}ᵀ·{y}") })
            })
            .collect();
        if contracted.is_empty() {
            format!("{}, placed=[{}]", self.scan.params(), placed.join(", "))
        } else {
            format!(
                "{}, placed=[{}], contracted=[{}]",
                self.scan.params(),
                placed.join(", "),
                contracted.join(", ")
            )
        }
    }
    fn subgraphs(&self) -> Vec<&Graph> {
        self.scan.subgraphs()
    }
}

/// Whether `op_type` is [`PlacedScan`] (an op only plans contain).
pub fn is_placed_scan(op_type: std::any::TypeId) -> bool {
    op_type == std::any::TypeId::of::<PlacedScan>()
}

/// The readers of every value: `(node, operand position)`.
pub(crate) fn readers(g: &Graph) -> Vec<Vec<(NodeId, usize)>> {
    let mut r = vec![Vec::new(); g.num_values()];
    for (id, n) in g.iter() {
        for (k, i) in n.inputs.iter().enumerate() {
            r[i.index()].push((id, k));
        }
    }
    r
}

/// A stacked result's chain to its final array, as matched.
struct Chain {
    /// The chain's nodes after the scan (reshape, then concatenate and/or
    /// permute), in order.
    nodes: Vec<NodeId>,
    /// The final value.
    last: ValueId,
    /// The partial chunks (values of the old graph) and their row offsets.
    tails: Vec<(ValueId, usize)>,
    strides: Vec<usize>,
    per_step: usize,
}

/// The one node reading `v`, if exactly one does (once) and `v` is not an
/// output.
pub(crate) fn only_reader(
    g: &Graph,
    rd: &[Vec<(NodeId, usize)>],
    v: ValueId,
) -> Option<(NodeId, usize)> {
    match rd[v.index()][..] {
        [one] if !g.outputs().contains(&v) => Some(one),
        _ => None,
    }
}

/// Row-major strides of `shape`.
fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Matches the chain from stacked result `y` (`[L, k, rest...]`): a reshape
/// merging `L` and `k`, then a concatenate along axis 0 with `y` first,
/// and/or a permute. `None` when there is nothing to gain.
fn chain(g: &Graph, rd: &[Vec<(NodeId, usize)>], y: ValueId) -> Option<Chain> {
    let shape = g.ty(y).shape().to_vec();
    let [l, k, rest @ ..] = &shape[..] else { return None };
    let (rs, _) = only_reader(g, rd, y)?;
    let rnode = g.node(rs);
    let merged: Vec<usize> = [l * k].into_iter().chain(rest.iter().copied()).collect();
    if rnode.op.movement()? != Movement::Reshape || g.ty(rnode.out()).shape() != merged {
        return None;
    }
    let mut nodes = vec![rs];
    let mut last = rnode.out();
    let mut tails: Vec<(ValueId, usize)> = Vec::new();
    if let Some((c, 0)) = only_reader(g, rd, last) {
        let cnode = g.node(c);
        if cnode.op.movement() == Some(Movement::Concatenate { axis: 0 }) {
            let mut row = l * k;
            for &t in &cnode.inputs[1..] {
                tails.push((t, row));
                row += g.ty(t).shape().first().copied().unwrap_or(0);
            }
            nodes.push(c);
            last = cnode.out();
        }
    }
    let mut perm: Vec<usize> = (0..shape.len() - 1).collect();
    if let Some((p, _)) = only_reader(g, rd, last) {
        // A permutation of the chain's axes (a plugin's declared one too).
        if let Some(Movement::Permute(q)) = g.node(p).op.movement() {
            let mut sorted = q.to_vec();
            sorted.sort_unstable();
            if sorted == perm {
                perm = q.to_vec();
                nodes.push(p);
                last = g.node(p).out();
            }
        }
    }
    if nodes.len() < 2 {
        return None; // a reshape alone is free
    }
    // The final array is row-major; its axis `i` is the chain's axis `perm[i]`.
    let final_strides = row_major(g.ty(last).shape());
    let mut strides = vec![0; perm.len()];
    for (i, &a) in perm.iter().enumerate() {
        strides[a] = final_strides[i];
    }
    let per_step = k * strides[0];
    Some(Chain { nodes, last, tails, strides, per_step })
}

crate::register_plan_rewrite!(Scan, rewrite_scans);

/// The plan rewrite of [`Scan`]: stacked results placed where their chains
/// put them, then, in the scans left, stacked results contracted as they
/// come ([`crate::contraction`]).
///
/// # Errors
/// An invalid graph.
fn rewrite_scans(g: &Graph, scans: &[NodeId]) -> Result<Option<Graph>> {
    let placed = place_scan_results(g, scans)?;
    let now = placed.as_ref().unwrap_or(g);
    let left: Vec<NodeId> =
        now.iter().filter(|(_, n)| n.op.is::<Scan>()).map(|(id, _)| id).collect();
    Ok(crate::contraction::contract_scan_results(now, &left)?.or(placed))
}

/// Rewrites every scan of `scans` whose stacked results are merged, joined
/// with a partial chunk or moved to another axis into a [`PlacedScan`] (see
/// the module docs); `None` when there is none. Scans with symbolic shapes
/// are left as they are. The plan rewrite of [`Scan`].
///
/// # Errors
/// An invalid graph.
fn place_scan_results(g: &Graph, scans: &[NodeId]) -> Result<Option<Graph>> {
    let rd = readers(g);
    // Per scan node: its chains (by stacked result) and where the new node
    // goes: the first chain's last node, once every operand exists.
    let mut plans: HashMap<NodeId, (Vec<Option<Chain>>, NodeId)> = HashMap::new();
    let mut role: HashMap<NodeId, NodeId> = HashMap::new(); // chain node -> scan
    for &id in scans {
        let Some((chains, at)) = placement_of(g, &rd, id)? else { continue };
        for c in chains.iter().flatten() {
            for &node in &c.nodes {
                role.insert(node, id);
            }
        }
        plans.insert(id, (chains, at));
    }
    if plans.is_empty() {
        return Ok(None);
    }
    // The new nodes' results, by old value.
    let mut placed: HashMap<ValueId, ValueId> = HashMap::new();
    let rebuilt = g.rebuild(|out, map, id, n, _| {
        if plans.contains_key(&id) {
            return Ok(Rebuilt::Drop); // emitted at its first chain's end
        }
        let Some(&scan_id) = role.get(&id) else {
            if !n.inputs.iter().any(|i| placed.contains_key(i)) {
                return Ok(Rebuilt::Copy);
            }
            // A reader of a carry or of a stacked result left in place.
            let ins = n
                .inputs
                .iter()
                .map(|i| placed.get(i).copied().map_or_else(|| map.get(*i), Ok))
                .collect::<Result<Vec<_>>>()?;
            let types = n.results().map(|v| g.ty(v).clone()).collect();
            let new = out.push_node(n.op.clone(), ins, types)?;
            return Ok(Rebuilt::Replace(out.node(new).results().collect()));
        };
        let (chains, at) = &plans[&scan_id];
        if id != *at {
            // A chain node before the end, or the end of a later chain,
            // whose value was mapped when the new node was emitted.
            return Ok(match placed.get(&n.out()) {
                Some(&v) => Rebuilt::Replace(vec![v]),
                None => Rebuilt::Drop,
            });
        }
        emit_placed_scan(g, out, map, scan_id, chains, &mut placed)?;
        let end = placed.get(&n.out()).copied().ok_or_else(|| {
            Error::invalid(
                "placed_scan",
                "chain",
                "the chain's end was not placed (a bug in the pass)",
            )
        })?;
        Ok(Rebuilt::Replace(vec![end]))
    })?;
    Ok(Some(rebuilt))
}

/// The chains of scan `id` and the node where its [`PlacedScan`] goes (the
/// first chain's last node), or `None` when the scan is left as it is: no
/// chain, symbolic shapes, or an operand or reader on the wrong side of that
/// node.
fn placement_of(
    g: &Graph,
    rd: &[Vec<(NodeId, usize)>],
    id: NodeId,
) -> Result<Option<(Vec<Option<Chain>>, NodeId)>> {
    let n = g.node(id);
    let scan = n.op.try_downcast::<Scan>()?;
    if n.results().any(|v| g.ty(v).is_symbolic()) {
        return Ok(None);
    }
    let ys: Vec<ValueId> = n.results().skip(scan.carries).collect();
    let chains: Vec<Option<Chain>> = ys.iter().map(|&y| chain(g, rd, y)).collect();
    let Some(at) = chains.iter().flatten().map(|c| g.producer(c.last).0).min() else {
        return Ok(None);
    };
    let after = |v: &ValueId| rd[v.index()].iter().all(|&(r, _)| r > at);
    // Every operand (the partial chunks too) must come before `at`, and
    // every reader of a result of the new node after it.
    let tails_before =
        chains.iter().flatten().flat_map(|c| &c.tails).all(|&(t, _)| g.producer(t).0 < at);
    let carried_after =
        n.results().take(scan.carries).all(|v| after(&v) && !g.outputs().contains(&v));
    let unplaced_after = ys
        .iter()
        .zip(&chains)
        .filter(|(_, c)| c.is_none())
        .all(|(y, _)| after(y) && !g.outputs().contains(y));
    let placed_after = chains.iter().flatten().all(|c| after(&c.last));
    Ok((tails_before && carried_after && unplaced_after && placed_after).then_some((chains, at)))
}

/// Emits the [`PlacedScan`] replacing scan `scan_id` into `out`, and records
/// in `placed` which new value stands for each old one: a chain's end for a
/// placed result, the scan's own result otherwise.
fn emit_placed_scan(
    g: &Graph,
    out: &mut Graph,
    map: &Mapped<'_>,
    scan_id: NodeId,
    chains: &[Option<Chain>],
    placed: &mut HashMap<ValueId, ValueId>,
) -> Result<()> {
    let snode = g.node(scan_id);
    let scan = snode.op.try_downcast::<Scan>()?.clone();
    let nk = scan.carries;
    let mut inputs: Vec<ValueId> =
        snode.inputs.iter().map(|&v| map.get(v)).collect::<Result<_>>()?;
    let mut places = Vec::new();
    let mut types: Vec<TensorType> = snode.results().map(|v| g.ty(v).clone()).collect();
    for (j, c) in chains.iter().enumerate() {
        places.push(match c {
            Some(c) => {
                let mut tails = Vec::new();
                for &(t, row) in &c.tails {
                    tails.push((inputs.len(), row * c.strides[0]));
                    inputs.push(map.get(t)?);
                }
                types[nk + j] = g.ty(c.last).clone();
                Some(Place {
                    ty: g.ty(c.last).clone(),
                    strides: c.strides.clone(),
                    per_step: c.per_step,
                    tails,
                })
            }
            None => None,
        });
    }
    let operands = inputs.len();
    let op = PlacedScan { scan, places, contractions: Vec::new(), operands };
    let new = out.push_node(Box::new(op), inputs, types)?;
    let results: Vec<ValueId> = out.node(new).results().collect();
    for ((k, old), &r) in snode.results().enumerate().zip(&results) {
        let key = match k.checked_sub(nk).and_then(|j| chains[j].as_ref()) {
            Some(c) => c.last,
            None => old,
        };
        placed.insert(key, r);
    }
    Ok(())
}

/// Writes `src` (a chunk of `shape`, row-major) into `dst` at `base` with
/// the element strides `strides`, walking the destination in order.
fn scatter<T: Copy>(src: &[T], shape: &[usize], strides: &[usize], dst: &mut [T], base: usize) {
    let src_strides = row_major(shape);
    // Loop order: the destination's largest strides outside.
    let mut axes: Vec<usize> = (0..shape.len()).collect();
    axes.sort_by(|&a, &b| strides[b].cmp(&strides[a]));
    let Some((&inner, outer)) = axes.split_last() else {
        if let (Some(d), Some(&s)) = (dst.get_mut(base), src.first()) {
            *d = s;
        }
        return;
    };
    let (n, ds, ss) = (shape[inner], strides[inner], src_strides[inner]);
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; outer.len()];
    loop {
        let (mut so, mut d0) = (0usize, base);
        for (&a, &i) in outer.iter().zip(&idx) {
            so += i * src_strides[a];
            d0 += i * strides[a];
        }
        if ds == 1 && ss == 1 {
            dst[d0..d0 + n].copy_from_slice(&src[so..so + n]);
        } else {
            for e in 0..n {
                dst[d0 + e * ds] = src[so + e * ss];
            }
        }
        // Next outer index (the last outer axis fastest).
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[outer[d]] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Writes block `src` (a chunk of `shape`) into `dst` at `base` with
/// `strides` (see [`Place`]).
///
/// # Errors
/// Another dtype, or a chunk that does not fit (a bug in the pass).
pub(crate) fn place(
    src: Block<'_>,
    shape: &[usize],
    strides: &[usize],
    dst: &mut Buf,
    base: usize,
) -> Result<()> {
    let numel: usize = shape.iter().product();
    let reach =
        base + shape.iter().zip(strides).map(|(&n, &s)| n.saturating_sub(1) * s).sum::<usize>() + 1;
    let fits = |len: usize, n: usize| numel == n && (numel == 0 || reach <= len);
    let bad = || Error::invalid("placed_scan", "result", "a chunk that does not fit its place");
    match (src, dst) {
        (Block::F64(s), Buf::F64(d)) if fits(d.len(), s.len()) => {
            scatter(s, shape, strides, d, base)
        }
        (Block::F32(s), Buf::F32(d)) if fits(d.len(), s.len()) => {
            scatter(s, shape, strides, d, base)
        }
        (Block::I64(s), Buf::I64(d)) if fits(d.len(), s.len()) => {
            scatter(s, shape, strides, d, base)
        }
        (Block::Bool(s), Buf::Bool(d)) if fits(d.len(), s.len()) => {
            scatter(s, shape, strides, d, base)
        }
        _ => return Err(bad()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_transposes_a_chunk_into_its_columns() {
        // A [2, 3] chunk into columns 1..3 of a [3, 4] array (strides [1, 4]).
        let src = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut dst = [0.0; 12];
        scatter(&src, &[2, 3], &[1, 4], &mut dst, 1);
        assert_eq!(dst, [0.0, 1.0, 4.0, 0.0, 0.0, 2.0, 5.0, 0.0, 0.0, 3.0, 6.0, 0.0]);
    }

    #[test]
    fn a_chunk_that_does_not_fit_is_an_error() {
        let mut dst = Buf::F64(vec![0.0; 4]);
        let src = [1.0; 6];
        assert!(place(Block::F64(&src), &[2, 3], &[3, 1], &mut dst, 0).is_err());
    }
}
