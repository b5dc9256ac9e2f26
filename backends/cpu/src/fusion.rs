//! Elementwise fusion: every op computed element by element (its op has
//! [`elementwise_math`](anvil_core::Op::elementwise_math): unary, binary,
//! comparisons, `select`, `cast`, generators such as `iota` and the
//! `jacfwd` seed, plugin ops declared with the same macros) runs inside a
//! [`Fused`] node: a small program over registers, evaluated block by block
//! in one pass over memory. A chain of such ops becomes one node; a lone one
//! is a program of one instruction, so one kernel runs every elementwise op.
//!
//! A node joins the group of its consumer when it has that consumer as its
//! only use and the consumer's shape (any dtype). Everything else a group
//! reads — smaller operands that broadcast, reductions, inputs — is a leaf,
//! read through broadcast strides. The kernel walks the output in blocks of
//! [`BLOCK`] elements: it reads each leaf of the output's shape in place and
//! gathers each broadcast leaf's block into a small buffer, runs the
//! instructions over typed registers of one block, and writes the last one
//! straight into the output, so intermediates never leave the cache and are
//! never allocated at full size. Generators compute their block from its
//! position: a seed `I * v` never materialises `I`.
//!
//! A leaf that is a `reshape`, `slice` (a flip included) or `broadcast_to`
//! of another value, or a chain of them, is read from that value through
//! the composed offset and strides (`views.rs`): such movement ops
//! are no step of the plan and no copy.
//!
//! The grouping is a loop with an explicit stack, not a recursion, so a
//! chain of a hundred thousand ops compiles on a small thread stack.

use crate::buffers::Pooled;
use crate::strided::{broadcast_strides, fill_in_tasks, for_each_run, Strides};
use crate::views::{is_contiguous, View};
use crate::{register_kernel, Parallelism};
use anvil_core::{
    op::expect_arity, Block, BlockAt, BlockMut, DType, Error, Graph, Node, Op, Rebuilt, Result,
    Storage, Tensor, TensorType, ValueId,
};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Elements per block of the fused kernel.
pub const BLOCK: usize = 512;

/// Operands read without an allocation per instruction.
const INLINE_ARGS: usize = 4;

/// One instruction of a fused program: an op applied to registers (the
/// leaves are registers `0..inputs`, instruction `j` writes `inputs + j`).
#[derive(Clone, Debug)]
pub struct Instr {
    /// The op (its block math and parameters).
    pub op: Box<dyn Op>,
    /// The registers it reads.
    pub args: Vec<usize>,
    /// The dtype of its result.
    pub dtype: DType,
    /// The backend's vectorised math for the op, if registered.
    fast: Option<crate::BlockMathFn>,
}

impl Instr {
    /// An instruction applying `op` to registers `args`, giving `dtype`.
    pub fn new(op: Box<dyn Op>, args: Vec<usize>, dtype: DType) -> Instr {
        let fast = crate::block_maths().lookup(op.as_ref()).ok().flatten().map(|e| e.math);
        Instr { op, args, dtype, fast }
    }

    /// Runs the instruction on one block: the backend's vectorised math for
    /// the op if it handles these dtypes, else the op's own.
    pub(crate) fn eval(
        &self,
        args: &[Block<'_>],
        mut out: BlockMut<'_>,
        at: BlockAt<'_>,
    ) -> Result<()> {
        if let Some(fast) = self.fast {
            if fast(self.op.as_ref(), args, reborrow(&mut out), at)? {
                return Ok(());
            }
        }
        let math = self.op.elementwise_math().ok_or_else(|| {
            Error::invalid(self.op.name(), "fused", "an instruction without block math")
        })?;
        math.eval_block(args, out, at)
    }
}

/// The same block, borrowed again.
fn reborrow<'b>(out: &'b mut BlockMut<'_>) -> BlockMut<'b> {
    match out {
        BlockMut::F64(v) => BlockMut::F64(v),
        BlockMut::F32(v) => BlockMut::F32(v),
        BlockMut::I64(v) => BlockMut::I64(v),
        BlockMut::Bool(v) => BlockMut::Bool(v),
    }
}

/// A group of fused elementwise ops; the last instruction is the result.
#[derive(Clone, Debug)]
pub struct Fused {
    /// The instructions, in order.
    pub program: Arc<Vec<Instr>>,
    /// The number of inputs (leaves).
    pub inputs: usize,
    /// The result type.
    pub out: TensorType,
    /// Where every register lives, worked out once from the static types.
    layout: Arc<Layout>,
}

/// The registers of a fused program laid out in scratch slots: gathered
/// leaves (those smaller than the output, read through broadcast strides),
/// then every instruction but the last.
#[derive(Debug)]
struct Layout {
    /// Per leaf: its broadcast strides and slot when it is gathered.
    leaves: Vec<Option<(Strides, Slot)>>,
    /// Per leaf: the offset of its first element (a leaf read through a
    /// [`View`]: a slice's start); 0 for the others.
    offsets: Vec<isize>,
    /// The leaves' types the layout was made for.
    types: Vec<TensorType>,
    /// Per instruction but the last: its slot.
    instrs: Vec<Slot>,
    /// Slots per dtype (f64, f32, i64, bool).
    counts: [usize; 4],
}

impl Fused {
    /// A fused program over leaves of types `leaves`, with result `out`.
    pub fn new(program: Vec<Instr>, leaves: &[TensorType], out: TensorType) -> Fused {
        Fused::with_views(program, leaves, &vec![None; leaves.len()], out)
    }

    /// A fused program whose leaf `k` is read through `views[k]` when it is
    /// `Some` (strides over `out`'s shape; see [`crate::views`]): `leaves`
    /// are then the types of the views' sources.
    pub(crate) fn with_views(
        program: Vec<Instr>,
        leaves: &[TensorType],
        views: &[Option<View>],
        out: TensorType,
    ) -> Fused {
        let layout = Layout::new(&program, leaves, views, &out);
        Fused { inputs: leaves.len(), program: Arc::new(program), out, layout: Arc::new(layout) }
    }

    /// The same program laid out for other types of the same ranks (a
    /// program of symbolic shapes, run with one binding's sizes).
    fn for_types(&self, leaves: &[TensorType], out: &TensorType) -> Fused {
        Fused {
            inputs: self.inputs,
            program: self.program.clone(),
            out: out.clone(),
            layout: Arc::new(Layout::new(&self.program, leaves, &vec![None; leaves.len()], out)),
        }
    }
}

impl Layout {
    fn new(
        program: &[Instr],
        leaves: &[TensorType],
        views: &[Option<View>],
        out: &TensorType,
    ) -> Layout {
        let mut counts = [0usize; 4];
        let mut slot = |dtype: DType| {
            let k = dtype_index(dtype);
            counts[k] += 1;
            Slot { dtype, index: counts[k] - 1 }
        };
        // Symbolic shapes have no strides: such a layout only records the
        // types; every call lays the program out for its sizes.
        let symbolic = out.is_symbolic() || leaves.iter().any(TensorType::is_symbolic);
        let leaf_slots = leaves
            .iter()
            .zip(views)
            .map(|(t, view)| match view {
                // A view of the output's order from the first element is read in place.
                Some(v)
                    if symbolic || (v.offset == 0 && is_contiguous(out.shape(), &v.strides)) =>
                {
                    None
                }
                Some(v) => Some((v.strides.clone(), slot(t.dtype()))),
                None => (t.shape() != out.shape() && !symbolic)
                    .then(|| (broadcast_strides(t.shape(), out.shape()), slot(t.dtype()))),
            })
            .collect();
        let offsets = views.iter().map(|v| v.as_ref().map_or(0, |v| v.offset)).collect();
        let last = program.len().saturating_sub(1);
        let instrs = program[..last].iter().map(|i| slot(i.dtype)).collect();
        Layout { leaves: leaf_slots, offsets, types: leaves.to_vec(), instrs, counts }
    }
}

impl PartialEq for Fused {
    fn eq(&self, other: &Fused) -> bool {
        Arc::ptr_eq(&self.program, &other.program)
    }
}
impl Eq for Fused {}
impl Hash for Fused {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.program), state);
    }
}

impl Op for Fused {
    fn name(&self) -> &'static str {
        "fused"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, self.inputs)?;
        Ok(self.out.clone())
    }
    fn params(&self) -> String {
        let ops: Vec<String> = self
            .program
            .iter()
            .map(|i| {
                let args: Vec<String> = i.args.iter().map(|a| format!("r{a}")).collect();
                format!("{}({})", i.op.display(), args.join(","))
            })
            .collect();
        ops.join("; ")
    }
}

/// Whether a node is computed element by element.
fn is_elementwise(n: &Node) -> bool {
    n.num_results() == 1 && n.op.elementwise_math().is_some()
}

/// Replaces every elementwise node by a [`Fused`] node, merging chains of
/// them (see the module docs). Values, types and the signature are
/// unchanged.
///
/// # Errors
/// An invalid graph.
pub fn fuse(g: &Graph) -> Result<Graph> {
    let fused = fuse_groups(g)?;
    // The movement ops now read as views by every reader are dropped.
    Ok(crate::views::drop_unread_views(&fused)?.unwrap_or(fused))
}

/// [`fuse`] before the movement ops read as views are dropped.
fn fuse_groups(g: &Graph) -> Result<Graph> {
    let elem: Vec<bool> = g.nodes().iter().map(is_elementwise).collect();
    let absorbed = absorbed(g, &elem);
    let ends = chain_ends(g, &elem, &absorbed);
    // The reductions computed with their chain: their result in the new graph.
    let mut reduced: std::collections::HashMap<usize, ValueId> = Default::default();
    g.rebuild(|out, map, id, n, _| {
        if let Some(&v) = reduced.get(&id.index()) {
            return Ok(Rebuilt::Replace(vec![v]));
        }
        if !elem[id.index()] {
            return Ok(Rebuilt::Copy);
        }
        if absorbed[id.index()] {
            return Ok(Rebuilt::Drop);
        }
        let (mut leaves, program) = group(g, n, &absorbed);
        let ty = g.ty(n.out()).clone();
        // Leaves that are movement ops of other values are read through
        // views of those (a chain ending in a reduction reads its leaves
        // as they are).
        let mut views = vec![None; leaves.len()];
        if ends[id.index()].is_none() && !ty.is_symbolic() {
            for (leaf, view) in leaves.iter_mut().zip(&mut views) {
                if let Some((source, v)) = crate::views::leaf_view(g, *leaf, ty.shape()) {
                    (*leaf, *view) = (source, Some(v));
                }
            }
        }
        let inputs = leaves.iter().map(|&l| map.get(l)).collect::<Result<Vec<_>>>()?;
        let leaf_types: Vec<TensorType> = leaves.iter().map(|&l| g.ty(l).clone()).collect();
        let op = Fused::with_views(program, &leaf_types, &views, ty.clone());
        if let Some(end) = &ends[id.index()] {
            // The chain ends with a reduction: one node computes both (the
            // reduction is emitted here, before any other reader of the chain).
            let red_ty = g.ty(g.nodes()[end.reduce].out()).clone();
            let mut types = vec![red_ty.clone()];
            if end.keep_chain {
                types.push(ty);
            }
            let fr = FusedReduce {
                chain: op,
                reduce: end.op.clone(),
                dims: end.dims,
                out: red_ty,
                keep_chain: end.keep_chain,
            };
            let node = out.push_node(Box::new(fr), inputs, types)?;
            let results: Vec<ValueId> = out.node(node).results().collect();
            reduced.insert(end.reduce, results[0]);
            return Ok(match results.get(1) {
                Some(&chain) => Rebuilt::Replace(vec![chain]),
                None => Rebuilt::Drop,
            });
        }
        let node = out.push_node(Box::new(op), inputs, vec![ty])?;
        Ok(Rebuilt::Replace(vec![out.node(node).out()]))
    })
}

/// Which nodes are computed inside their consumer's group: an elementwise
/// node whose one value has one reader, an elementwise node of its shape,
/// and is not an output. A generator (an elementwise op without operands:
/// a seed, an iota) is cheap to recompute, so it is absorbed into every
/// group that reads it, however many there are; so is a cheap op over
/// materialised values read by at most [`MAX_RECOMPUTE`] such groups.
fn absorbed(g: &Graph, elem: &[bool]) -> Vec<bool> {
    // The one node reading each value, if exactly one does (an operand read
    // twice by the same node, as in `x * x`, still has one reader).
    let mut consumer: Vec<Option<usize>> = vec![None; g.num_values()];
    let mut shared = vec![false; g.num_values()];
    let mut same_shape_readers = vec![true; g.num_values()];
    for (id, n) in g.iter() {
        for &i in &n.inputs {
            match consumer[i.index()] {
                Some(c) if c != id.index() => shared[i.index()] = true,
                _ => consumer[i.index()] = Some(id.index()),
            }
            same_shape_readers[i.index()] &=
                elem[id.index()] && g.ty(n.out()).shape() == g.ty(i).shape();
        }
    }
    for o in g.outputs() {
        shared[o.index()] = true;
    }
    let readers = reader_counts(g);
    let single: Vec<bool> = g
        .iter()
        .map(|(id, n)| {
            if !elem[id.index()] {
                return false;
            }
            let v = n.out().index();
            if n.inputs.is_empty() && consumer[v].is_some() {
                !g.outputs().contains(&n.out()) && same_shape_readers[v]
            } else {
                !shared[v] && consumer[v].is_some_and(|c| elem[c] && same_shape_readers[v])
            }
        })
        .collect();
    // A cheap op over values that are materialised anyway (one instruction,
    // no vectorised transcendental math), read by a few elementwise groups
    // of its shape, is recomputed in each of them rather than written out
    // and read back when that reads and writes less: `p = e / s` read by
    // three groups costs three divisions, not a pass over memory.
    g.iter()
        .map(|(id, n)| {
            if single[id.index()] {
                return true;
            }
            let v = n.out();
            // Written once and read by each group, against each group
            // reading the operands of the value's size: recompute when the
            // latter moves fewer bytes.
            let k = readers[v.index()];
            let full = n.inputs.iter().filter(|&&i| g.ty(i).shape() == g.ty(v).shape()).count();
            elem[id.index()]
                && !n.inputs.is_empty()
                && (2..=MAX_RECOMPUTE).contains(&k)
                && k * full < 1 + k + full
                && same_shape_readers[v.index()]
                && !g.outputs().contains(&v)
                && n.inputs.iter().all(|&i| !single[g.producer(i).0.index()])
                && !matches!(crate::block_maths().lookup(n.op.as_ref()), Ok(Some(_)))
        })
        .collect()
}

/// How many nodes read each value (a node reading it twice counts once).
fn reader_counts(g: &Graph) -> Vec<usize> {
    let mut readers = vec![0usize; g.num_values()];
    for (_, n) in g.iter() {
        for (k, &i) in n.inputs.iter().enumerate() {
            if !n.inputs[..k].contains(&i) {
                readers[i.index()] += 1;
            }
        }
    }
    readers
}

/// The most groups a cheap shared op is recomputed in (see [`absorbed`]).
const MAX_RECOMPUTE: usize = 4;

/// The leaves and the program of the group whose result is `root`'s:
/// absorbed producers first (post-order, each once), with an explicit
/// stack.
fn group(g: &Graph, root: &Node, absorbed: &[bool]) -> (Vec<ValueId>, Vec<Instr>) {
    let mut leaves: Vec<ValueId> = Vec::new();
    // Registers of emitted instructions, by value; leaves are tagged until
    // their count is known.
    let mut reg: std::collections::HashMap<ValueId, usize> = std::collections::HashMap::new();
    let mut program: Vec<Instr> = Vec::new();
    let absorbed_value = |v: ValueId| absorbed[g.producer(v).0.index()];
    // (value, whether its operands are done)
    let mut stack: Vec<(ValueId, bool)> = vec![(root.out(), false)];
    while let Some((v, ready)) = stack.pop() {
        if reg.contains_key(&v) {
            continue;
        }
        let n = g.producer_node(v);
        if !ready {
            stack.push((v, true));
            for &i in n.inputs.iter().rev() {
                if absorbed_value(i) && !reg.contains_key(&i) {
                    stack.push((i, false));
                }
            }
            continue;
        }
        let args = n
            .inputs
            .iter()
            .map(|&i| match reg.get(&i) {
                Some(&r) => r,
                None => {
                    let k = leaves.iter().position(|&l| l == i).unwrap_or_else(|| {
                        leaves.push(i);
                        leaves.len() - 1
                    });
                    LEAF_TAG + k
                }
            })
            .collect();
        program.push(Instr::new(n.op.clone(), args, g.ty(v).dtype()));
        reg.insert(v, program.len() - 1);
    }
    // Registers: leaves first, then instructions.
    let shift = leaves.len();
    for instr in &mut program {
        for a in &mut instr.args {
            *a = if *a >= LEAF_TAG { *a - LEAF_TAG } else { *a + shift };
        }
    }
    (leaves, program)
}

/// Leaf registers are tagged while the program is built (their final
/// numbers are known only at the end).
const LEAF_TAG: usize = usize::MAX / 2;

/// The scratch of one chunk: every register of the program (gathered
/// leaves first, then every instruction but the last) as a slot of `width`
/// elements in one buffer per dtype, so a chunk allocates at most four
/// times whatever the program's length.
#[derive(Default)]
struct Scratch {
    f64: Vec<f64>,
    f32: Vec<f32>,
    i64: Vec<i64>,
    bool: Vec<bool>,
    width: usize,
}

/// Where a register lives: its dtype's buffer and its slot there.
#[derive(Clone, Copy, Debug)]
struct Slot {
    dtype: DType,
    index: usize,
}

/// Read access to the slots before a point (see [`Scratch::split`]).
struct Readers<'a> {
    f64: &'a [f64],
    f32: &'a [f32],
    i64: &'a [i64],
    bool: &'a [bool],
    width: usize,
}

impl Readers<'_> {
    fn block(&self, s: Slot, len: usize) -> Block<'_> {
        let at = s.index * self.width;
        match s.dtype {
            DType::F64 => Block::F64(&self.f64[at..at + len]),
            DType::F32 => Block::F32(&self.f32[at..at + len]),
            DType::I64 => Block::I64(&self.i64[at..at + len]),
            DType::Bool => Block::Bool(&self.bool[at..at + len]),
        }
    }
}

/// Scratch kept for the thread's next fused call (at most this many
/// bytes): a small program's call then allocates only its result.
const SPARE_BYTES: usize = 256 * 1024;

thread_local! {
    static SPARE: std::cell::RefCell<Option<Scratch>> = const { std::cell::RefCell::new(None) };
}

impl Scratch {
    /// [`Scratch::new`], reusing the buffers the thread's previous call
    /// gave back ([`Scratch::give_back`]); their contents are unspecified
    /// (every slot is written before it is read).
    fn reuse(counts: [usize; 4], width: usize) -> Scratch {
        match SPARE.with(|s| s.borrow_mut().take()) {
            Some(mut s) => {
                s.f64.resize(counts[0] * width, 0.0);
                s.f32.resize(counts[1] * width, 0.0);
                s.i64.resize(counts[2] * width, 0);
                s.bool.resize(counts[3] * width, false);
                s.width = width;
                s
            }
            None => Scratch::new(counts, width),
        }
    }

    /// Keeps the buffers for the thread's next call, if they are small.
    fn give_back(self) {
        let bytes = self.f64.capacity() * 8
            + self.f32.capacity() * 4
            + self.i64.capacity() * 8
            + self.bool.capacity();
        if bytes <= SPARE_BYTES {
            SPARE.with(|s| *s.borrow_mut() = Some(self));
        }
    }

    /// Slots of `width` elements, `counts` of each dtype.
    fn new(counts: [usize; 4], width: usize) -> Scratch {
        Scratch {
            f64: crate::buffers::small(counts[0] * width, 0.0),
            f32: crate::buffers::small(counts[1] * width, 0.0),
            i64: crate::buffers::small(counts[2] * width, 0),
            bool: crate::buffers::small(counts[3] * width, false),
            width,
        }
    }

    /// The block of `len` elements of slot `s`, to write, and read access to
    /// every slot before it of its dtype (and to every slot of the others).
    fn split(&mut self, s: Slot, len: usize) -> (Readers<'_>, BlockMut<'_>) {
        let at = s.index * self.width;
        let w = self.width;
        match s.dtype {
            DType::F64 => {
                let (r, w_) = self.f64.split_at_mut(at);
                let rd =
                    Readers { f64: r, f32: &self.f32, i64: &self.i64, bool: &self.bool, width: w };
                (rd, BlockMut::F64(&mut w_[..len]))
            }
            DType::F32 => {
                let (r, w_) = self.f32.split_at_mut(at);
                let rd =
                    Readers { f64: &self.f64, f32: r, i64: &self.i64, bool: &self.bool, width: w };
                (rd, BlockMut::F32(&mut w_[..len]))
            }
            DType::I64 => {
                let (r, w_) = self.i64.split_at_mut(at);
                let rd =
                    Readers { f64: &self.f64, f32: &self.f32, i64: r, bool: &self.bool, width: w };
                (rd, BlockMut::I64(&mut w_[..len]))
            }
            DType::Bool => {
                let (r, w_) = self.bool.split_at_mut(at);
                let rd =
                    Readers { f64: &self.f64, f32: &self.f32, i64: &self.i64, bool: r, width: w };
                (rd, BlockMut::Bool(&mut w_[..len]))
            }
        }
    }

    /// Read access to every slot.
    fn readers(&self) -> Readers<'_> {
        Readers {
            f64: &self.f64,
            f32: &self.f32,
            i64: &self.i64,
            bool: &self.bool,
            width: self.width,
        }
    }
}

fn dtype_index(d: DType) -> usize {
    match d {
        DType::F64 => 0,
        DType::F32 => 1,
        DType::I64 => 2,
        DType::Bool => 3,
    }
}

/// Copies `dst.len()` elements of `data` read from `o` with stride `s`.
fn copy_run<T: Copy>(data: &[T], o: isize, s: isize, dst: &mut [T]) {
    if s == 1 {
        dst.copy_from_slice(&data[o as usize..o as usize + dst.len()]);
    } else if s == 0 {
        dst.fill(data[o as usize]);
    } else {
        for (j, d) in dst.iter_mut().enumerate() {
            *d = data[(o + j as isize * s) as usize];
        }
    }
}

/// Gathers the block `from..from + len` of a broadcast leaf into `dst`.
fn gather_block(
    storage: &Storage,
    offset: isize,
    strides: &Strides,
    shape: &[usize],
    from: usize,
    dst: BlockMut<'_>,
) {
    let len = dst.len();
    macro_rules! run {
        ($data:expr, $buf:expr) => {
            for_each_run(shape, [strides], [offset], from, from + len, |pos, [o], [s], run| {
                copy_run($data, o, s, &mut $buf[pos - from..pos - from + run]);
            })
        };
    }
    match (storage, dst) {
        (Storage::F64(d), BlockMut::F64(b)) => run!(d, b),
        (Storage::F32(d), BlockMut::F32(b)) => run!(d, b),
        (Storage::I64(d), BlockMut::I64(b)) => run!(d, b),
        (Storage::Bool(d), BlockMut::Bool(b)) => run!(d, b),
        _ => {}
    }
}

/// A block of a leaf of the output's shape, read in place.
pub(crate) fn in_place(storage: &Storage, from: usize, len: usize) -> Block<'_> {
    match storage {
        Storage::F64(v) => Block::F64(&v[from..from + len]),
        Storage::F32(v) => Block::F32(&v[from..from + len]),
        Storage::I64(v) => Block::I64(&v[from..from + len]),
        Storage::Bool(v) => Block::Bool(&v[from..from + len]),
    }
}

/// The kernel of [`Fused`]: every elementwise op runs through it.
///
/// # Errors
/// Wrong operands (a bug in fusion), or an op's block math rejecting its
/// dtypes.
pub fn fused(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    let f = op.try_downcast::<Fused>()?;
    expect_arity(op, inputs, f.inputs)?;
    if f.program.is_empty() {
        return Err(Error::invalid("fused", "program", "a fused group without instructions"));
    }
    let storage = match out.dtype() {
        DType::F64 => run_program::<f64>(f, inputs, out, ctx)?,
        DType::F32 => run_program::<f32>(f, inputs, out, ctx)?,
        DType::I64 => run_program::<i64>(f, inputs, out, ctx)?,
        DType::Bool => run_program::<bool>(f, inputs, out, ctx)?,
    };
    Tensor::from_storage(storage, out.shape())
}

/// Runs the program into a fresh (pooled) buffer of the output's dtype `T`.
fn run_program<T: Pooled + Send>(
    f: &Fused,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Storage> {
    // The layout was made for these types; other ones would read out of bounds.
    let fits = out.shape() == f.out.shape()
        && inputs
            .iter()
            .zip(&f.layout.types)
            .all(|(t, ty)| t.dtype() == ty.dtype() && t.shape() == ty.shape());
    if !fits && (f.out.is_symbolic() || f.layout.types.iter().any(TensorType::is_symbolic)) {
        // Laid out for symbolic shapes: lay it out for this call's sizes.
        let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
        let bound = f.for_types(&types, out);
        if types.iter().zip(&f.layout.types).all(|(t, s)| t.rank() == s.rank())
            && out.rank() == f.out.rank()
        {
            return run_program::<T>(&bound, inputs, out, ctx);
        }
    }
    if !fits {
        return Err(Error::invalid(
            "fused",
            "inputs",
            "operands of other types than the program was built for",
        ));
    }
    let mut result: Vec<T> = crate::buffers::take(out.numel());
    if !ctx.parallel(result.len()) {
        // One task on this thread (every small call): no error slot to share.
        run_task(f, inputs, out.shape(), &mut result, 0)?;
        return Ok(T::into_storage(result));
    }
    let error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    fill_in_tasks(&mut result, ctx, |task, start| {
        if let Err(e) = run_task(f, inputs, out.shape(), task, start) {
            if let Ok(mut slot) = error.lock() {
                slot.get_or_insert(e);
            }
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(e);
    }
    Ok(T::into_storage(result))
}

/// Evaluates the program over `task` (which starts at flat index `start`),
/// block by block.
fn run_task<T: Pooled>(
    f: &Fused,
    inputs: &[&Tensor],
    shape: &[usize],
    task: &mut [T],
    start: usize,
) -> Result<()> {
    let width = BLOCK.min(task.len());
    let mut scratch = Scratch::reuse(f.layout.counts, width);
    // A leaf of one element (all strides 0) is the same in every block:
    // spread once per task.
    gather_leaves(f, inputs, shape, &mut scratch, start, width, true);
    let mut at = 0;
    while at < task.len() {
        let len = BLOCK.min(task.len() - at);
        gather_leaves(f, inputs, shape, &mut scratch, start + at, len, false);
        run_block(
            f,
            inputs,
            shape,
            &mut scratch,
            start + at,
            T::block_mut(&mut task[at..at + len]),
        )?;
        at += len;
    }
    scratch.give_back();
    Ok(())
}

/// Gathers the broadcast leaves of one dimension kind (`scalar`: of one
/// element) into their slots, for the block `from..from + len`.
fn gather_leaves(
    f: &Fused,
    inputs: &[&Tensor],
    shape: &[usize],
    scratch: &mut Scratch,
    from: usize,
    len: usize,
    scalar: bool,
) {
    for ((t, leaf), &offset) in inputs.iter().zip(&f.layout.leaves).zip(&f.layout.offsets) {
        if let Some((strides, slot)) = leaf {
            if strides.iter().all(|&s| s == 0) == scalar {
                let (_, dst) = scratch.split(*slot, len);
                gather_block(t.storage(), offset, strides, shape, from, dst);
            }
        }
    }
}

/// Runs every instruction on the block starting at `from`; the last one
/// writes `out`.
fn run_block(
    f: &Fused,
    inputs: &[&Tensor],
    shape: &[usize],
    scratch: &mut Scratch,
    from: usize,
    mut out: BlockMut<'_>,
) -> Result<()> {
    let (last, len, layout) = (f.program.len() - 1, out.len(), &f.layout);
    let place = BlockAt { start: from, shape };
    for (j, instr) in f.program.iter().enumerate() {
        let (readers, dst) = if j == last {
            (scratch.readers(), reborrow(&mut out))
        } else {
            scratch.split(layout.instrs[j], len)
        };
        let src = |a: usize| -> Block<'_> {
            match a.checked_sub(f.inputs) {
                Some(r) => readers.block(layout.instrs[r], len),
                None => match &layout.leaves[a] {
                    Some((_, slot)) => readers.block(*slot, len),
                    None => in_place(inputs[a].storage(), from, len),
                },
            }
        };
        let mut inline = [Block::F64(&[]); INLINE_ARGS];
        let heap: Vec<Block<'_>>;
        let args: &[Block<'_>] = if instr.args.len() <= INLINE_ARGS {
            for (slot, &a) in inline.iter_mut().zip(&instr.args) {
                *slot = src(a);
            }
            &inline[..instr.args.len()]
        } else {
            heap = instr.args.iter().map(|&a| src(a)).collect();
            &heap
        };
        instr.eval(args, dst, place)?;
    }
    Ok(())
}

register_kernel!(Fused, fused);
crate::register_thread_invariant!(Fused);

/// Whether an op type is one the CPU compiler makes itself ([`Fused`],
/// [`FusedReduce`], [`crate::placement::PlacedScan`]):
/// such ops never appear in a user's or a transform's graph, so they need
/// no rules and no conformance samples.
pub fn is_internal(op_type: std::any::TypeId) -> bool {
    op_type == std::any::TypeId::of::<Fused>()
        || op_type == std::any::TypeId::of::<FusedReduce>()
        || crate::placement::is_placed_scan(op_type)
}

/// A fused elementwise chain ended by a reduction over consecutive axes,
/// evaluated in one pass: the chain runs block by block as in [`Fused`] and
/// each block is folded into the result at once, so the chain's value is
/// never materialised — unless it is read elsewhere too, and then it is the
/// second result, written in the same pass.
///
/// The elements of each output are folded in the order of the unfused
/// `sum`/`reduce_max`/`reduce_min` kernels, so results are bit-identical to
/// the unfused graph's.
#[derive(Clone, Debug)]
pub struct FusedReduce {
    /// The chain (its result is the reduced value, of the operand's shape).
    pub chain: Fused,
    /// The reduction that ends the chain: its [`Op::reduction_math`]
    /// combines the chain's elements.
    pub reduce: Box<dyn Op>,
    /// The chain's shape as `[outer, reduced, inner]`.
    pub dims: (usize, usize, usize),
    /// The type of the reduction's result.
    pub out: TensorType,
    /// Whether the chain's value is a second result.
    pub keep_chain: bool,
}

impl PartialEq for FusedReduce {
    fn eq(&self, other: &FusedReduce) -> bool {
        self.chain == other.chain
            && self.keep_chain == other.keep_chain
            && self.dims == other.dims
            && self.out == other.out
            && self.reduce.dyn_eq(other.reduce.as_any())
    }
}
impl Eq for FusedReduce {}
impl Hash for FusedReduce {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.chain.hash(state);
        self.keep_chain.hash(state);
        self.dims.hash(state);
        self.reduce.dyn_hash(state);
    }
}

impl Op for FusedReduce {
    fn name(&self) -> &'static str {
        "fused_reduce"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, self.chain.inputs)?;
        let mut types = vec![self.out.clone()];
        if self.keep_chain {
            types.push(self.chain.out.clone());
        }
        Ok(types)
    }
    fn params(&self) -> String {
        let (o, r, i) = self.dims;
        format!(
            "{} over [{o}, {r}, {i}], keep_chain={}; {}",
            self.reduce.name(),
            self.keep_chain,
            self.chain.params()
        )
    }
}

/// The reductions that end a fused chain, by the chain's root node: the
/// reduction node, and its [`FusedReduce`] less the chain.
struct ChainEnd {
    reduce: usize,
    op: Box<dyn Op>,
    dims: (usize, usize, usize),
    keep_chain: bool,
}

/// Finds every reduction (an op with [`Op::reduction_math`], of a float
/// dtype, over consecutive axes, static shapes) whose operand is the root
/// of a fused group with operands: that group ends with the reduction.
fn chain_ends(g: &Graph, elem: &[bool], absorbed: &[bool]) -> Vec<Option<ChainEnd>> {
    let mut readers = reader_counts(g);
    for o in g.outputs() {
        readers[o.index()] += 1;
    }
    let mut ends: Vec<Option<ChainEnd>> = (0..g.len()).map(|_| None).collect();
    for (id, n) in g.iter() {
        let Some(math) = n.op.reduction_math() else { continue };
        let [v] = n.inputs[..] else { continue };
        let p = g.producer(v).0.index();
        let root = g.producer_node(v);
        let ty = g.ty(v);
        let ok = elem[p]
            && !absorbed[p]
            && !root.inputs.is_empty()
            && matches!(ty.dtype(), DType::F64 | DType::F32)
            && !ty.is_symbolic()
            && !g.ty(n.out()).is_symbolic()
            && g.ty(n.out()).dtype() == ty.dtype()
            && ends[p].is_none();
        if !ok {
            continue;
        }
        let Some(dims) = consecutive(ty.shape(), math.axes()) else { continue };
        let keep_chain = readers[v.index()] > 1;
        ends[p] = Some(ChainEnd { reduce: id.index(), op: n.op.clone(), dims, keep_chain });
    }
    ends
}

/// `shape` as `[outer, reduced, inner]` when `axes` are consecutive.
fn consecutive(shape: &[usize], axes: &[usize]) -> Option<(usize, usize, usize)> {
    let (&first, &last) = (axes.first()?, axes.last()?);
    let ok = axes.windows(2).all(|w| w[1] == w[0] + 1) && last < shape.len();
    let p = |s: &[usize]| s.iter().product::<usize>();
    ok.then(|| (p(&shape[..first]), p(&shape[first..=last]), p(&shape[last + 1..])))
}

/// The kernel of [`FusedReduce`].
///
/// # Errors
/// Wrong operands (a bug in fusion), or an op's block math rejecting its
/// dtypes.
pub fn fused_reduce(
    op: &dyn Op,
    inputs: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let r = op.try_downcast::<FusedReduce>()?;
    expect_arity(op, inputs, r.chain.inputs)?;
    let fits = inputs
        .iter()
        .zip(&r.chain.layout.types)
        .all(|(t, ty)| t.dtype() == ty.dtype() && t.shape() == ty.shape());
    if !fits || r.chain.program.is_empty() || outs.is_empty() {
        return Err(Error::invalid(
            "fused_reduce",
            "inputs",
            "operands of other types than the program was built for",
        ));
    }
    let (outer, red, inner) = r.dims;
    if outer < 2 * ctx.thread_count() && ctx.thread_count() > 1 && ctx.parallel(outer * red * inner)
    {
        // Too few rows to share among the threads: the chain in parallel,
        // then the reduction's own kernel, as unfused (same values, same
        // order of the fold).
        return unfused(r, inputs, ctx);
    }
    let math = r.reduce.reduction_math().ok_or_else(|| {
        Error::invalid("fused_reduce", "reduce", format!("{} is not a reduction", r.reduce.name()))
    })?;
    // A sum's `+` written out, so that the loops inline and vectorise it,
    // as the unfused sum kernel does; other reductions call their function.
    let sum = math.is_sum();
    let (red, chain) = match r.chain.out.dtype() {
        DType::F64 if sum => typed_reduce::<f64>(r, inputs, ctx, 0.0, |a, b| a + b)?,
        DType::F32 if sum => typed_reduce::<f32>(r, inputs, ctx, 0.0, |a, b| a + b)?,
        DType::F64 => typed_reduce::<f64>(r, inputs, ctx, math.f64().0, math.f64().1)?,
        DType::F32 => typed_reduce::<f32>(r, inputs, ctx, math.f32().0, math.f32().1)?,
        d => return Err(Error::invalid("fused_reduce", "dtype", format!("{d:?} is not a float"))),
    };
    let mut results = vec![Tensor::from_storage(red, outs[0].shape())?];
    if let Some(c) = chain {
        results.push(Tensor::from_storage(c, r.chain.out.shape())?);
    }
    Ok(results)
}

/// A [`FusedReduce`] run as its two parts: the chain written out (the
/// [`Fused`] kernel, parallel over blocks), then the reduction's kernel.
fn unfused(r: &FusedReduce, inputs: &[&Tensor], ctx: &Parallelism) -> Result<Vec<Tensor>> {
    let chain = fused(&r.chain, inputs, &r.chain.out, ctx)?;
    let hint = " (the reduction ending a fused chain has no CPU kernel)";
    let red = match crate::kernels().get(r.reduce.as_ref(), hint)?.kernel {
        crate::Kernel::One(f) => f(r.reduce.as_ref(), &[&chain], &r.out, ctx)?,
        crate::Kernel::Many(f) => {
            let mut v = f(r.reduce.as_ref(), &[&chain], std::slice::from_ref(&r.out), ctx)?;
            if v.is_empty() {
                return Err(Error::invalid("fused_reduce", "reduce", "a kernel without result"));
            }
            v.swap_remove(0)
        }
        crate::Kernel::Prepare(f) => {
            let ty = [r.chain.out.clone()];
            let outs = [r.out.clone()];
            let mut v = f(r.reduce.as_ref(), &ty, &outs)?.run(&[&chain], &outs, ctx)?;
            if v.is_empty() {
                return Err(Error::invalid("fused_reduce", "reduce", "a kernel without result"));
            }
            v.swap_remove(0)
        }
    };
    let mut results = vec![red];
    if r.keep_chain {
        results.push(chain);
    }
    Ok(results)
}

/// Runs a [`FusedReduce`] of dtype `T`: its reduction and, if kept, the
/// chain's value.
fn typed_reduce<T: Pooled + Send + Sync>(
    r: &FusedReduce,
    inputs: &[&Tensor],
    ctx: &Parallelism,
    id: T,
    f: impl Fn(T, T) -> T + Copy + Sync,
) -> Result<(Storage, Option<Storage>)> {
    let (outer, red, inner) = r.dims;
    let total = outer * red * inner;
    let mut out: Vec<T> = crate::buffers::filled(outer * inner, id);
    let mut chain: Vec<T> = if r.keep_chain { crate::buffers::take(total) } else { Vec::new() };
    let error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    // Rows `o0..` of the output (`inner` each) and of the chain (`red * inner`).
    let task = |o0: usize, out: &mut [T], chain: &mut [T]| {
        let result = reduce_rows(r, inputs, o0, out, chain, id, f);
        if let Err(e) = result {
            if let Ok(mut slot) = error.lock() {
                slot.get_or_insert(e);
            }
        }
    };
    let (row_out, row_chain) = (inner.max(1), if r.keep_chain { (red * inner).max(1) } else { 0 });
    if ctx.parallel(total) && outer > 1 && total > 0 {
        use rayon::prelude::*;
        let rows = outer.div_ceil(4 * ctx.thread_count()).max(1);
        let outs = out.par_chunks_mut(rows * row_out);
        if r.keep_chain {
            outs.zip(chain.par_chunks_mut(rows * row_chain))
                .enumerate()
                .for_each(|(k, (o, c))| task(k * rows, o, c));
        } else {
            outs.enumerate().for_each(|(k, o)| task(k * rows, o, &mut []));
        }
    } else if total > 0 {
        task(0, &mut out, &mut chain);
    }
    if let Some(e) = error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(e);
    }
    Ok((T::into_storage(out), r.keep_chain.then(|| T::into_storage(chain))))
}

/// Folds the chain of outer rows `o0..o0 + out.len() / inner` into `out`,
/// writing the chain's value into `chain` when it is kept (else `chain` is
/// empty). Each output folds its elements in increasing order of the
/// reduced index, as the unfused kernels do.
fn reduce_rows<T: Pooled>(
    r: &FusedReduce,
    inputs: &[&Tensor],
    o0: usize,
    out: &mut [T],
    chain: &mut [T],
    id: T,
    f: impl Fn(T, T) -> T + Copy,
) -> Result<()> {
    let (_, red, inner) = r.dims;
    let c = &r.chain;
    let shape = c.out.shape();
    let keep = r.keep_chain;
    let width = BLOCK.min(red * inner).max(1);
    let mut scratch = Scratch::new(c.layout.counts, width);
    gather_leaves(c, inputs, shape, &mut scratch, 0, width, true);
    let mut buf: Vec<T> = if keep { Vec::new() } else { vec![id; width] };
    // Evaluates the chain at flat indices `from..from + len`, into the kept
    // chain at `at` or into `buf`, and hands the block to `fold`.
    let mut eval = |scratch: &mut Scratch,
                    chain: &mut [T],
                    at: usize,
                    from: usize,
                    len: usize,
                    fold: &mut dyn FnMut(&[T])|
     -> Result<()> {
        gather_leaves(c, inputs, shape, scratch, from, len, false);
        let dst = if keep { &mut chain[at..at + len] } else { &mut buf[..len] };
        run_block(c, inputs, shape, scratch, from, T::block_mut(dst))?;
        fold(dst);
        Ok(())
    };
    let row_len = red * inner;
    for (k, orow) in out.chunks_mut(inner.max(1)).enumerate() {
        let o = o0 + k;
        let base = o * row_len;
        let at0 = k * row_len;
        if inner == 1 {
            let mut acc = id;
            let mut b = 0;
            while b < red {
                let len = BLOCK.min(red - b);
                eval(&mut scratch, chain, at0 + b, base + b, len, &mut |blk| {
                    for &v in blk {
                        acc = f(acc, v);
                    }
                })?;
                b += len;
            }
            orow[0] = acc;
        } else if inner < BLOCK {
            // Blocks of whole reduced rows, folded row by row.
            let per = (BLOCK / inner).max(1);
            let mut rr = 0;
            while rr < red {
                let rows = per.min(red - rr);
                eval(
                    &mut scratch,
                    chain,
                    at0 + rr * inner,
                    base + rr * inner,
                    rows * inner,
                    &mut |blk| {
                        for row in blk.chunks(inner) {
                            for (d, &v) in orow.iter_mut().zip(row) {
                                *d = f(*d, v);
                            }
                        }
                    },
                )?;
                rr += rows;
            }
        } else {
            // Blocks of columns, each folded over the reduced rows.
            let mut c0 = 0;
            while c0 < inner {
                let w = BLOCK.min(inner - c0);
                for rr in 0..red {
                    let off = rr * inner + c0;
                    eval(&mut scratch, chain, at0 + off, base + off, w, &mut |blk| {
                        for (d, &v) in orow[c0..c0 + w].iter_mut().zip(blk) {
                            *d = f(*d, v);
                        }
                    })?;
                }
                c0 += w;
            }
        }
    }
    Ok(())
}

register_kernel!(FusedReduce, many: fused_reduce);
