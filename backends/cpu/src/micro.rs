//! Small programs without per-op overhead: the step of a loop.
//!
//! A loop body of small values (an ODE step on a vector of 8, a Newton
//! update) costs little arithmetic per op; run through a [`crate::Plan`],
//! every op pays for a slot table, a kernel call through the registry,
//! tensors allocated for its result and fused kernels set up for blocks of
//! 512 elements. [`Micro`] compiles such a graph once into straight-line
//! code over buffers it allocates once ([`State`]): each value has its own
//! buffer for the whole loop, and each op is a few loops over slices:
//!
//! - elementwise ops run their block math (the backend's vectorised math
//!   where registered, as in the fused kernel) over the whole value;
//!   operands that broadcast are gathered first through an index map;
//! - ops that only move elements (reshape, permute, broadcast, slice, pad,
//!   concatenate) are index maps computed once, by running the op's own
//!   kernel on the indices of its operand: no movement semantics is
//!   written twice;
//! - matrix products (any batch, transposed reads, vectors) and reductions
//!   are direct loops over precomputed offsets;
//! - constants and generators are computed once;
//! - any other op runs its registered kernel on tensors (nested loops,
//!   linear algebra), so every graph compiles.
//!
//! A loop (`scan`, `while`) keeps its carries in their input buffers and
//! swaps in the new ones after each step: nothing is allocated per step.
//!
//! The per-step code is then reordered so that elementwise `f64`
//! instructions of one length run back to back, and each such run becomes
//! one instruction over registers (`runs`): one dispatch per run rather than
//! per op, intermediates kept out of the buffers, the same bits.

use crate::fusion::Instr;
use crate::{compile, Kernel, Parallelism, Plan};
use anvil_core::{
    Arith, Block, BlockAt, BlockMut, DType, Error, Graph, Movement, Op, Result, Scalar, Storage,
    Tensor, TensorType,
};
use anvil_ops::movement::{Concatenate, Pad, Permute, Reshape};

mod runs;

/// The largest value (in elements) a micro program holds: beyond, the
/// blocked, parallel kernels of a plan are faster.
pub const MAX_ELEMENTS: usize = 4096;

/// One value's buffer.
#[derive(Clone, Debug)]
pub enum Buf {
    /// `f64` elements.
    F64(Vec<f64>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `bool` elements.
    Bool(Vec<bool>),
}

impl Default for Buf {
    fn default() -> Buf {
        Buf::F64(Vec::new())
    }
}

macro_rules! with_buf {
    ($b:expr, $v:ident => $e:expr) => {
        match $b {
            Buf::F64($v) => $e,
            Buf::F32($v) => $e,
            Buf::I64($v) => $e,
            Buf::Bool($v) => $e,
        }
    };
}

impl Buf {
    /// A buffer of `len` zeros (false for bools) of `dtype`.
    pub(crate) fn zeros(dtype: DType, len: usize) -> Buf {
        match dtype {
            DType::F64 => Buf::F64(vec![0.0; len]),
            DType::F32 => Buf::F32(vec![0.0; len]),
            DType::I64 => Buf::I64(vec![0; len]),
            DType::Bool => Buf::Bool(vec![false; len]),
        }
    }

    pub(crate) fn len(&self) -> usize {
        with_buf!(self, v => v.len())
    }

    /// The buffer's elements as a block.
    pub fn block(&self) -> Block<'_> {
        self.prefix(self.len())
    }

    fn block_mut(&mut self) -> BlockMut<'_> {
        let n = self.len();
        self.prefix_mut(n)
    }

    /// The buffer's first `len` elements as a block.
    pub(crate) fn prefix(&self, len: usize) -> Block<'_> {
        match self {
            Buf::F64(v) => Block::F64(&v[..len]),
            Buf::F32(v) => Block::F32(&v[..len]),
            Buf::I64(v) => Block::I64(&v[..len]),
            Buf::Bool(v) => Block::Bool(&v[..len]),
        }
    }

    /// The buffer's first `len` elements, to write.
    pub(crate) fn prefix_mut(&mut self, len: usize) -> BlockMut<'_> {
        match self {
            Buf::F64(v) => BlockMut::F64(&mut v[..len]),
            Buf::F32(v) => BlockMut::F32(&mut v[..len]),
            Buf::I64(v) => BlockMut::I64(&mut v[..len]),
            Buf::Bool(v) => BlockMut::Bool(&mut v[..len]),
        }
    }

    /// Copies `src[at..at + len]` (same dtype) into this buffer.
    fn copy_from(&mut self, src: &Storage, at: usize) -> Result<()> {
        let n = self.len();
        let bad = || Error::invalid("micro", "copy", "a buffer of another dtype or size");
        match (self, src) {
            (Buf::F64(d), Storage::F64(s)) => copy(d, s.get(at..at + n).ok_or_else(bad)?),
            (Buf::F32(d), Storage::F32(s)) => copy(d, s.get(at..at + n).ok_or_else(bad)?),
            (Buf::I64(d), Storage::I64(s)) => copy(d, s.get(at..at + n).ok_or_else(bad)?),
            (Buf::Bool(d), Storage::Bool(s)) => copy(d, s.get(at..at + n).ok_or_else(bad)?),
            _ => return Err(bad()),
        }
        Ok(())
    }

    /// Copies this buffer into `dst[at..at + len]` (same dtype).
    pub fn copy_into(&self, dst: &mut Buf, at: usize) -> Result<()> {
        let n = self.len();
        let bad = || Error::invalid("micro", "copy", "a buffer of another dtype or size");
        match (self, dst) {
            (Buf::F64(s), Buf::F64(d)) => copy(d.get_mut(at..at + n).ok_or_else(bad)?, s),
            (Buf::F32(s), Buf::F32(d)) => copy(d.get_mut(at..at + n).ok_or_else(bad)?, s),
            (Buf::I64(s), Buf::I64(d)) => copy(d.get_mut(at..at + n).ok_or_else(bad)?, s),
            (Buf::Bool(s), Buf::Bool(d)) => copy(d.get_mut(at..at + n).ok_or_else(bad)?, s),
            _ => return Err(bad()),
        }
        Ok(())
    }

    /// Copies a block's elements into `dst[at..]` (same dtype).
    ///
    /// # Errors
    /// Another dtype; too little room.
    pub fn copy_block_into(src: Block<'_>, dst: &mut Buf, at: usize) -> Result<()> {
        let bad = || Error::invalid("micro", "copy", "a buffer of another dtype or size");
        match (src, dst) {
            (Block::F64(s), Buf::F64(d)) => copy(d.get_mut(at..at + s.len()).ok_or_else(bad)?, s),
            (Block::F32(s), Buf::F32(d)) => copy(d.get_mut(at..at + s.len()).ok_or_else(bad)?, s),
            (Block::I64(s), Buf::I64(d)) => copy(d.get_mut(at..at + s.len()).ok_or_else(bad)?, s),
            (Block::Bool(s), Buf::Bool(d)) => copy(d.get_mut(at..at + s.len()).ok_or_else(bad)?, s),
            _ => return Err(bad()),
        }
        Ok(())
    }

    /// The buffer as a tensor of `shape`, without a copy.
    pub fn into_tensor(self, shape: &[usize]) -> Result<Tensor> {
        let storage = match self {
            Buf::F64(v) => Storage::F64(v.into()),
            Buf::F32(v) => Storage::F32(v.into()),
            Buf::I64(v) => Storage::I64(v.into()),
            Buf::Bool(v) => Storage::Bool(v.into()),
        };
        Tensor::from_storage(storage, shape)
    }

    /// A tensor of `shape` holding a copy of the buffer.
    pub fn to_tensor(&self, shape: &[usize]) -> Result<Tensor> {
        let storage = match self {
            Buf::F64(v) => Storage::F64(v.clone().into()),
            Buf::F32(v) => Storage::F32(v.clone().into()),
            Buf::I64(v) => Storage::I64(v.clone().into()),
            Buf::Bool(v) => Storage::Bool(v.clone().into()),
        };
        Tensor::from_storage(storage, shape)
    }

    /// A buffer of `len` elements of `dtype` to stack steps into, or to
    /// carry through: from the running plan's pool when it has one
    /// ([`crate::buffers::take`]), so the contents are unspecified and the
    /// caller writes every element before reading it.
    pub fn stacked(dtype: DType, len: usize) -> Buf {
        use crate::buffers::take;
        match dtype {
            DType::F64 => Buf::F64(take(len)),
            DType::F32 => Buf::F32(take(len)),
            DType::I64 => Buf::I64(take(len)),
            DType::Bool => Buf::Bool(take(len)),
        }
    }

    /// [`Buf::zeros`], from the running plan's pool where it has a buffer
    /// of this dtype and length.
    pub(crate) fn pooled_zeros(dtype: DType, len: usize) -> Buf {
        let mut b = Buf::stacked(dtype, len);
        match &mut b {
            Buf::F64(v) => v.fill(0.0),
            Buf::F32(v) => v.fill(0.0),
            Buf::I64(v) => v.fill(0),
            Buf::Bool(v) => v.fill(false),
        }
        b
    }

    /// Gives a buffer that does not become a result back to the running
    /// plan's pool ([`crate::buffers::give_back`]).
    pub fn give_back(self) {
        use crate::buffers::give_back;
        match self {
            Buf::F64(v) => give_back(v),
            Buf::F32(v) => give_back(v),
            Buf::I64(v) => give_back(v),
            Buf::Bool(v) => give_back(v),
        }
    }
}

/// The buffers of one run of a [`Micro`] program.
#[derive(Debug)]
pub struct State {
    bufs: Vec<Buf>,
    /// The registers of fused runs.
    regs: runs::Registers,
    /// A helper thread for the matrix–vector products, when the loop
    /// holds one ([`State::pair_products`]).
    lease: Option<crate::pair::Lease>,
}

impl State {
    /// Shares the program's matrix–vector products against packed panels
    /// with a helper thread (the CPU backend's `pair` module) when `on` and the helper
    /// is free, until the state is given back or this is called with
    /// `false`; whether it is shared.
    pub fn pair_products(&mut self, on: bool) -> bool {
        self.lease = if on { crate::pair::lease() } else { None };
        self.lease.is_some()
    }

    /// Gives every buffer back to the running plan's pool (after the run's
    /// results are copied out).
    pub fn give_back(self) {
        self.bufs.into_iter().for_each(Buf::give_back);
    }

    /// Copies `src` into the buffer of slot `s`.
    ///
    /// # Errors
    /// A buffer of another dtype or size.
    pub fn load(&mut self, s: usize, src: &Buf) -> Result<()> {
        src.copy_into(&mut self.bufs[s], 0)
    }

    /// The buffer of slot `s`.
    pub fn buf(&self, s: usize) -> &Buf {
        &self.bufs[s]
    }

    /// Swaps the buffer of slot `s` with `other` (a loop's new carry).
    pub fn swap(&mut self, s: usize, other: &mut Buf) {
        std::mem::swap(&mut self.bufs[s], other);
    }

    /// Exchanges the buffers of slots `a` and `b` (no copy).
    pub fn swap_slots(&mut self, a: usize, b: usize) {
        self.bufs.swap(a, b);
    }
}

/// `d.copy_from_slice(s)`, with a scalar (a loop's typical carry or scanned
/// element) moved without a call to `memcpy`.
#[inline]
fn copy<T: Copy>(d: &mut [T], s: &[T]) {
    if let ([x], [y]) = (&mut *d, s) {
        *x = *y;
    } else {
        d.copy_from_slice(s);
    }
}

/// How a reduction combines, per dtype.
#[derive(Debug)]
enum Fold {
    F64(f64, fn(f64, f64) -> f64),
    /// An `f32` fold in `f64` accumulators (rounded once).
    F32(f64, fn(f64, f64) -> f64),
    I64(i64, fn(i64, i64) -> i64),
    Bool(crate::kernels::reduce::BoolFold),
}

/// `out = a op b` in `f64` (`b` ignored by [`Arith::Neg`]): the arithmetic
/// a micro program runs without the block-math dispatch, a loop over
/// slices per instruction (the bulk of a loop body's instructions on small
/// vectors, where the dispatch cost more than the arithmetic). Any op that
/// declares its [`Op::arith`] runs here.
#[inline]
fn run_arith(f: Arith, a: &[f64], b: &[f64], out: &mut [f64]) {
    fn zip2(a: &[f64], b: &[f64], out: &mut [f64], f: impl Fn(f64, f64) -> f64) {
        for ((d, &p), &q) in out.iter_mut().zip(a).zip(b) {
            *d = f(p, q);
        }
    }
    match f {
        Arith::Add => zip2(a, b, out, |p, q| p + q),
        Arith::Sub => zip2(a, b, out, |p, q| p - q),
        Arith::Mul => zip2(a, b, out, |p, q| p * q),
        Arith::Div => zip2(a, b, out, |p, q| p / q),
        Arith::Neg => out.iter_mut().zip(a).for_each(|(d, &p)| *d = -p),
    }
}

#[derive(Debug)]
enum Code {
    /// Block math over whole values of one shape.
    Elementwise { instr: Instr, args: Vec<usize>, out: usize, shape: Vec<usize> },
    /// `f64` arithmetic over whole values of one shape (`b == a` for the
    /// unary ones).
    Arith { f: Arith, a: usize, b: usize, out: usize },
    /// `out[i] = src[map[i]]`.
    Gather { src: usize, map: Vec<u32>, out: usize },
    /// `out = srcᵀ` for an `f64` matrix stored `rows × cols`.
    Transpose { src: usize, rows: usize, cols: usize, out: usize },
    /// `out` = the `k × n` `f64` matrix `src` (or `srcᵀ`, `src` stored
    /// `n × k`, when `transposed`) in panels of `width` columns
    /// ([`crate::matvec::pack_panels`]), from the first element of `out`
    /// on a 64-byte boundary (`out` has [`crate::matvec::PANEL_PAD`]
    /// elements of slack; [`crate::matvec::aligned`]).
    Panels { src: usize, k: usize, n: usize, transposed: bool, width: usize, out: usize },
    /// `out = xᵀ M` for the `k × n` matrix packed in `panels` by a
    /// [`Code::Panels`] of `width` ([`crate::matvec::gevm_panels`]).
    Gevm { x: usize, panels: usize, out: usize, k: usize, n: usize, width: usize },
    /// `out[i] = srcs[map[i].0][map[i].1]`, or the fill where `None`.
    Assemble { srcs: Vec<usize>, map: Vec<Option<(u32, u32)>>, fill: Scalar, out: usize },
    /// A value computed once.
    Const { value: Tensor, out: usize },
    /// Matrix products: per batch, `m × n` dot products of length `k`.
    Matmul { a: usize, b: usize, out: usize, mm: MatmulShape },
    /// `out[i] = fold(src[groups[i * per .. (i + 1) * per]])`.
    Reduce { src: usize, out: usize, groups: Vec<u32>, per: usize, fold: Fold },
    /// Elementwise `f64` instructions of one length fused into one
    /// dispatch, on registers (see [`runs`]).
    Run(Box<runs::Run>),
    /// Any other op, through its registered kernel on tensors.
    Kernel {
        op: Box<dyn Op>,
        kernel: Box<KernelRun>,
        args: Vec<usize>,
        outs: Vec<(usize, TensorType)>,
    },
}

impl Code {
    /// The slots this instruction writes.
    fn outs(&self) -> Vec<usize> {
        match self {
            Code::Elementwise { out, .. }
            | Code::Arith { out, .. }
            | Code::Gather { out, .. }
            | Code::Transpose { out, .. }
            | Code::Panels { out, .. }
            | Code::Gevm { out, .. }
            | Code::Assemble { out, .. }
            | Code::Const { out, .. }
            | Code::Matmul { out, .. }
            | Code::Reduce { out, .. } => vec![*out],
            Code::Run(r) => r.reads_writes().1,
            Code::Kernel { outs, .. } => outs.iter().map(|(s, _)| *s).collect(),
        }
    }
}

/// A registered kernel, as a micro program calls it.
enum KernelRun {
    One(crate::KernelFn),
    Many(crate::KernelManyFn),
    Prepared(Box<dyn crate::Prepared>),
}

impl std::fmt::Debug for KernelRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KernelRun")
    }
}

/// The offsets of a matrix product.
#[derive(Debug)]
struct MatmulShape {
    /// Per output matrix: the offsets of its operands' matrices.
    batches: Vec<(usize, usize)>,
    m: usize,
    k: usize,
    n: usize,
    /// Strides of `a` along (row, inner) and of `b` along (inner, column).
    a_strides: (usize, usize),
    b_strides: (usize, usize),
    /// The stored matrices' shapes, and whether each is read transposed.
    a_mat: (usize, usize, bool),
    b_mat: (usize, usize, bool),
}

/// A graph compiled into straight-line code over preallocated buffers.
#[derive(Debug)]
pub struct Micro {
    types: Vec<TensorType>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    /// Code that reads only constants and invariant inputs: run once per
    /// state, after those inputs are set ([`Micro::run_invariant`]).
    invariant: Vec<Code>,
    /// The rest: run per step.
    code: Vec<Code>,
    /// Per slot: written, in full, by the per-step code.
    per_step: Vec<bool>,
}

impl Micro {
    /// Compiles `graph` when every value holds at most [`MAX_ELEMENTS`]
    /// elements (inputs excepted: a loop's large constant matrix is only
    /// read); `None` otherwise (run it as a [`Plan`]).
    ///
    /// # Errors
    /// An invalid graph; an op without a CPU kernel.
    pub fn compile(graph: &Graph) -> Result<Option<Micro>> {
        Micro::compile_invariant(graph, &[])
    }

    /// [`Micro::compile`] with the inputs marked in `invariant` set once
    /// per state (a loop's consts): the code that depends on nothing else
    /// runs once, in [`Micro::run_invariant`].
    ///
    /// # Errors
    /// As [`Micro::compile`].
    pub fn compile_invariant(graph: &Graph, invariant: &[bool]) -> Result<Option<Micro>> {
        Micro::compile_fused(graph, invariant, true)
    }

    /// [`Micro::compile_invariant`], the per-step elementwise runs fused
    /// into one dispatch each when `fuse` (see [`runs`]).
    fn compile_fused(graph: &Graph, invariant: &[bool], fuse: bool) -> Result<Option<Micro>> {
        graph.verify()?;
        let small = graph
            .iter()
            .filter(|(_, n)| n.op.parameter_index().is_none())
            .flat_map(|(_, n)| n.results())
            .all(|v| graph.ty(v).numel() <= MAX_ELEMENTS);
        if !small {
            return Ok(None);
        }
        let mut b = Builder {
            types: (0..graph.num_values())
                .filter_map(|v| anvil_core::ValueId::from_index(v).ok())
                .map(|v| graph.ty(v).clone())
                .collect(),
            code: Vec::new(),
        };
        let mut inputs = vec![0; graph.inputs().len()];
        for (_, node) in graph.iter() {
            if let Some(k) = node.op.parameter_index() {
                if let Some(slot) = inputs.get_mut(k) {
                    *slot = node.out().index();
                }
                continue;
            }
            let args: Vec<usize> = node.inputs.iter().map(|i| i.index()).collect();
            let outs: Vec<usize> = node.results().map(|v| v.index()).collect();
            b.node(node.op.as_ref(), &args, &outs)?;
        }
        let outputs: Vec<usize> = graph.outputs().iter().map(|o| o.index()).collect();
        let (mut invariant, mut code, fixed) =
            split_invariant(b.code, &inputs, invariant, b.types.len());
        pack_fixed_matrices(&mut invariant, &mut code, &mut b.types, &fixed);
        transpose_fixed_matrices(&mut invariant, &mut code, &mut b.types, &fixed);
        if fuse {
            let known = known_scalars(&invariant, b.types.len());
            code = runs::fuse(code, &b.types, &outputs, &known);
        }
        let mut per_step = vec![false; b.types.len()];
        for c in &code {
            for s in c.outs() {
                per_step[s] = true;
            }
        }
        Ok(Some(Micro { types: b.types, inputs, outputs, invariant, code, per_step }))
    }

    /// Zeroed buffers for a run (taken once per loop, not per step), from
    /// the running plan's pool where it has them: a loop run on every call
    /// does not fault in fresh pages for its state each time (give them back
    /// with [`State::give_back`]).
    pub fn state(&self) -> State {
        State {
            bufs: self.types.iter().map(|t| Buf::pooled_zeros(t.dtype(), t.numel())).collect(),
            regs: runs::Registers::default(),
            lease: None,
        }
    }

    /// The slot of input `k`.
    pub fn input(&self, k: usize) -> usize {
        self.inputs[k]
    }

    /// The slot of output `k`.
    pub fn output(&self, k: usize) -> usize {
        self.outputs[k]
    }

    /// Whether slot `s` is written in full by every step (so its buffer may
    /// be swapped into another slot after a step, rather than copied: the
    /// next step overwrites whatever it then holds).
    pub fn rewritten_each_step(&self, s: usize) -> bool {
        self.per_step.get(s).copied().unwrap_or(false)
    }

    /// Which of `outputs` (output indices) can be swapped, rather than
    /// copied, into their carry slots after a step: each is rewritten each
    /// step and no other carried output shares its slot.
    pub fn swappable(&self, outputs: std::ops::Range<usize>) -> Vec<bool> {
        let slots: Vec<usize> = outputs.map(|k| self.outputs[k]).collect();
        slots
            .iter()
            .map(|&s| self.rewritten_each_step(s) && slots.iter().filter(|&&t| t == s).count() == 1)
            .collect()
    }

    /// The type of slot `s`.
    pub fn ty(&self, s: usize) -> &TensorType {
        &self.types[s]
    }

    /// Sets input `k` to `x` (or to its slice starting at element `at`).
    ///
    /// # Errors
    /// A value of another dtype, or too short.
    pub fn set_input(&self, st: &mut State, k: usize, x: &Tensor, at: usize) -> Result<()> {
        st.bufs[self.inputs[k]].copy_from(x.storage(), at)
    }

    /// Runs the code that depends only on constants and the invariant
    /// inputs (set them first); once per state.
    ///
    /// # Errors
    /// A kernel's run-time error.
    pub fn run_invariant(&self, st: &mut State, ctx: &Parallelism) -> Result<()> {
        for c in &self.invariant {
            step(c, st, &self.types, ctx)?;
        }
        Ok(())
    }

    /// Whether the per-step code has a matrix–vector product that may be
    /// shared between threads (a matrix of at least 256 × 256 elements):
    /// the caller then runs the steps on a rayon worker, where the
    /// product's fork-join is cheap.
    pub fn splits_products(&self) -> bool {
        self.code.iter().any(|c| {
            matches!(c, Code::Matmul { mm, .. }
                if (mm.m == 1 || mm.n == 1)
                    && mm.m.saturating_mul(mm.k).saturating_mul(mm.n) >= crate::matvec::GEVM_SPLIT)
        })
    }

    /// Whether the per-step code has a matrix–vector product against
    /// packed panels large enough to share with a helper thread
    /// ([`State::pair_products`]), and every instruction gives the same
    /// bits on any number of threads (so that a plan may choose by
    /// measured cost whether the loop pairs its products).
    pub fn pairs_products(&self) -> bool {
        let pairs = self
            .code
            .iter()
            .any(|c| matches!(c, Code::Gevm { k, n, .. } if k * n >= crate::pair::PAIR_MIN));
        pairs && self.same_bits_on_any_threads()
    }

    /// Whether every instruction, the loop-invariant ones too, gives the
    /// same bits on any number of threads (ops whose kernels are declared
    /// so with `register_thread_invariant!`; the interpreter's own
    /// instructions always do).
    pub fn same_bits_on_any_threads(&self) -> bool {
        self.invariant.iter().chain(&self.code).all(|c| match c {
            Code::Kernel { op, .. } => crate::thread_invariant()
                .lookup(op.as_ref())
                .is_ok_and(|t| t.is_some_and(|t| t.same_bits)),
            _ => true,
        })
    }

    /// Runs the program on the inputs set in `st` (after
    /// [`Micro::run_invariant`]).
    ///
    /// # Errors
    /// A kernel's run-time error.
    pub fn run(&self, st: &mut State, ctx: &Parallelism) -> Result<()> {
        for c in &self.code {
            if let Code::Run(r) = c {
                r.exec(&mut st.bufs, &mut st.regs)?;
                continue;
            }
            // The commonest instruction, inline: a call of `step` (a large
            // function) costs more than its arithmetic on a small value.
            if let Code::Arith { f, a, b, out } = c {
                if let Some((Buf::F64(z), x, y)) = write_read2(&mut st.bufs, *out, *a, *b) {
                    if let (Buf::F64(x), Buf::F64(y)) = (x, y) {
                        run_arith(*f, x, y, z);
                        continue;
                    }
                }
            }
            step(c, st, &self.types, ctx)?;
        }
        Ok(())
    }
}

struct Builder {
    types: Vec<TensorType>,
    code: Vec<Code>,
}

impl Builder {
    /// A new slot of type `ty`.
    fn temp(&mut self, ty: TensorType) -> usize {
        self.types.push(ty);
        self.types.len() - 1
    }

    fn node(&mut self, op: &dyn Op, args: &[usize], outs: &[usize]) -> Result<()> {
        let in_types: Vec<TensorType> = args.iter().map(|&a| self.types[a].clone()).collect();
        let out_types: Vec<TensorType> = outs.iter().map(|&o| self.types[o].clone()).collect();
        if let Some(value) = op.constant_value() {
            self.code.push(Code::Const { value: value.clone(), out: outs[0] });
            return Ok(());
        }
        if args.is_empty() && outs.len() == 1 {
            // A generator: computed once.
            let value = evaluate(op, &[], &out_types)?.swap_remove(0);
            self.code.push(Code::Const { value, out: outs[0] });
            return Ok(());
        }
        if op.is_elementwise() && outs.len() == 1 && op.elementwise_math().is_some() {
            return self.elementwise(op, args, outs[0]);
        }
        if outs.len() == 1 && (op.is_relayout() || op.movement().is_some()) {
            return self.assemble(op, args, &in_types, outs[0]);
        }
        if let (Some((ta, tb)), 1) = (op.matmul_transposes(), outs.len()) {
            let out = &out_types[0];
            if matches!(out.dtype(), DType::F64 | DType::F32) {
                let mm = matmul_shape(in_types[0].shape(), in_types[1].shape(), ta, tb);
                self.code.push(Code::Matmul { a: args[0], b: args[1], out: outs[0], mm });
                return Ok(());
            }
        }
        if outs.len() == 1 {
            if let Some(r) = reduction(op, &in_types[0], &out_types[0]) {
                let (groups, per) = r;
                let fold = fold_of(op, in_types[0].dtype());
                if let Some(fold) = fold {
                    self.code.push(Code::Reduce { src: args[0], out: outs[0], groups, per, fold });
                    return Ok(());
                }
            }
        }
        // Block math that is not elementwise in the broadcasting sense (a
        // generator with operands: the diagonals of a seed) runs as the
        // fused kernel of one instruction, as in a plan.
        let fused;
        let op: &dyn Op = if op.elementwise_math().is_some() && outs.len() == 1 {
            let program =
                vec![Instr::new(op.boxed(), (0..args.len()).collect(), out_types[0].dtype())];
            fused = crate::fusion::Fused::new(program, &in_types, out_types[0].clone());
            &fused
        } else {
            op
        };
        let hint = " (link the crate that defines the op, or register one with anvil_cpu::register_kernel!)";
        let kernel = match crate::kernels().get(op, hint)?.kernel {
            Kernel::One(f) => KernelRun::One(f),
            Kernel::Many(f) => KernelRun::Many(f),
            Kernel::Prepare(f) => KernelRun::Prepared(f(op, &in_types, &out_types)?),
        };
        let outs = outs.iter().copied().zip(out_types).collect();
        self.code.push(Code::Kernel {
            op: op.boxed(),
            kernel: Box::new(kernel),
            args: args.to_vec(),
            outs,
        });
        Ok(())
    }

    /// An elementwise op: operands of another shape are broadcast first.
    fn elementwise(&mut self, op: &dyn Op, args: &[usize], out: usize) -> Result<()> {
        let shape = self.types[out].shape().to_vec();
        let mut ready = Vec::with_capacity(args.len());
        for &a in args {
            let t = self.types[a].clone();
            if t.shape() == shape.as_slice() {
                ready.push(a);
                continue;
            }
            let map = broadcast_map(t.shape(), &shape);
            let tmp = self.temp(t.with_shape(shape.clone()));
            self.code.push(Code::Gather { src: a, map, out: tmp });
            ready.push(tmp);
        }
        let all_f64 = ready.iter().chain([&out]).all(|&s| self.types[s].dtype() == DType::F64);
        let arith = op.arith().filter(|f| f.arity() == ready.len());
        if let (Some(f), true) = (arith, all_f64) {
            // An operand that is also the result (never made by the builder,
            // which gives every value its own slot) would alias.
            if ready.iter().all(|&a| a != out) {
                let (a, b) = (ready[0], *ready.last().unwrap_or(&ready[0]));
                self.code.push(Code::Arith { f, a, b, out });
                return Ok(());
            }
        }
        let instr = Instr::new(op.boxed(), (0..ready.len()).collect(), self.types[out].dtype());
        self.code.push(Code::Elementwise { instr, args: ready, out, shape });
        Ok(())
    }

    /// A movement op, as an index map found by running its own kernel on
    /// the indices of its operands.
    fn assemble(
        &mut self,
        op: &dyn Op,
        args: &[usize],
        in_types: &[TensorType],
        out: usize,
    ) -> Result<()> {
        // Operand j's elements are numbered from base_j on; -1 is "no element".
        let mut bases = Vec::with_capacity(args.len());
        let mut index_inputs = Vec::with_capacity(args.len());
        let mut next = 0i64;
        for t in in_types {
            bases.push(next);
            let n = t.numel() as i64;
            index_inputs.push(Tensor::from_vec((next..next + n).collect::<Vec<i64>>(), t.shape())?);
            next += n;
        }
        // The movement's standard op on the indices (a pad filling with
        // -1: "no element"), or, for another relayout, the op itself.
        let (index_op, fill): (Box<dyn Op>, Scalar) = match op.movement() {
            Some(Movement::Pad { widths, value }) => {
                (Box::new(Pad { widths: widths.to_vec(), value: Scalar::I64(-1) }), value)
            }
            Some(Movement::Reshape) => {
                (Box::new(Reshape { shape: self.types[out].shape().to_vec() }), Scalar::F64(0.0))
            }
            Some(Movement::Permute(perm)) => {
                (Box::new(Permute { perm: perm.to_vec() }), Scalar::F64(0.0))
            }
            Some(Movement::Concatenate { axis }) => {
                (Box::new(Concatenate { axis }), Scalar::F64(0.0))
            }
            _ => (op.boxed(), Scalar::F64(0.0)),
        };
        let out_ty = self.types[out].with_dtype(DType::I64);
        let refs: Vec<&Tensor> = index_inputs.iter().collect();
        let indices = evaluate_refs(index_op.as_ref(), &refs, &[out_ty])?.swap_remove(0);
        let flat = indices.to_vec::<i64>()?;
        if args.len() == 1 && flat.iter().all(|&i| i >= 0) {
            let map = flat.iter().map(|&i| i as u32).collect();
            self.code.push(Code::Gather { src: args[0], map, out });
            return Ok(());
        }
        let map = flat
            .iter()
            .map(|&i| {
                (i >= 0).then(|| {
                    let j = bases.iter().rposition(|&b| b <= i).unwrap_or(0);
                    (j as u32, (i - bases[j]) as u32)
                })
            })
            .collect();
        let fill = fill.cast(self.types[out].dtype());
        self.code.push(Code::Assemble { srcs: args.to_vec(), map, fill, out });
        Ok(())
    }
}

/// The slots an instruction reads and writes.
fn reads_writes(c: &Code) -> (Vec<usize>, Vec<usize>) {
    match c {
        Code::Elementwise { args, out, .. } => (args.clone(), vec![*out]),
        Code::Arith { a, b, out, .. } => (vec![*a, *b], vec![*out]),
        Code::Gather { src, out, .. } => (vec![*src], vec![*out]),
        Code::Transpose { src, out, .. } => (vec![*src], vec![*out]),
        Code::Panels { src, out, .. } => (vec![*src], vec![*out]),
        Code::Gevm { x, panels, out, .. } => (vec![*x, *panels], vec![*out]),
        Code::Assemble { srcs, out, .. } => (srcs.clone(), vec![*out]),
        Code::Const { out, .. } => (vec![], vec![*out]),
        Code::Matmul { a, b, out, .. } => (vec![*a, *b], vec![*out]),
        Code::Reduce { src, out, .. } => (vec![*src], vec![*out]),
        Code::Run(r) => r.reads_writes(),
        Code::Kernel { args, outs, .. } => (args.clone(), outs.iter().map(|(s, _)| *s).collect()),
    }
}

/// Splits `code` into the instructions that read only constants and the
/// invariant inputs (transitively) and the rest, keeping the order; and
/// per slot, whether the first part (or an invariant input) sets it.
fn split_invariant(
    code: Vec<Code>,
    inputs: &[usize],
    invariant: &[bool],
    slots: usize,
) -> (Vec<Code>, Vec<Code>, Vec<bool>) {
    let mut fixed = vec![false; slots];
    for (k, &slot) in inputs.iter().enumerate() {
        fixed[slot] = invariant.get(k).copied().unwrap_or(false);
    }
    let (mut once, mut each) = (Vec::new(), Vec::new());
    for c in code {
        let (reads, writes) = reads_writes(&c);
        if reads.iter().all(|&r| fixed[r]) {
            writes.iter().for_each(|&w| fixed[w] = true);
            once.push(c);
        } else {
            each.push(c);
        }
    }
    (once, each, fixed)
}

/// The largest fixed matrix (elements) [`transpose_fixed_matrices`] copies:
/// 2 MiB, a few times L2's share of one matrix; larger ones are read in
/// place (the copy would cost more than the faster product saves on a
/// short loop).
const TRANSPOSED_FIXED: usize = 1 << 18;

/// A per-step product of a matrix fixed for the whole loop by a vector
/// (`A x`) that [`pack_fixed_matrices`] leaves (a matrix that
/// [`crate::matvec::gevm_split`] shares between threads) runs as the vector
/// times the matrix's transpose (`xᵀ Aᵀ`), the transpose formed once per
/// state by the code run before the steps: [`crate::matvec::gevm`] streams
/// a cached matrix faster than [`crate::matvec::gemv`] (about 0.69 against
/// 1.03 µs a product at 128 × 128, from their shares of a profile of W9's
/// loop), and the loop pays for
/// one copy of the matrix. The sums are the same terms in another order
/// (the last bits differ from the product run as `A x`; every step and
/// every call alike).
fn transpose_fixed_matrices(
    once: &mut Vec<Code>,
    each: &mut [Code],
    types: &mut Vec<TensorType>,
    fixed: &[bool],
) {
    // One transpose per fixed matrix, however many products read it.
    let mut transposed: std::collections::HashMap<usize, usize> = Default::default();
    for c in each.iter_mut() {
        let Code::Matmul { a, b, out, mm } = c else { continue };
        let (m, k, ta) = mm.a_mat;
        let vector = matches!(mm.b_mat, (r, 1, false) | (1, r, true) if r == k);
        let f64s = types[*a].dtype() == DType::F64 && types[*b].dtype() == DType::F64;
        if !fixed[*a]
            || fixed[*b]
            || ta
            || !vector
            || !f64s
            || mm.batches != [(0, 0)]
            || (direct(mm) && k * m < GEVM_FLOPS)
            || k.saturating_mul(m) > TRANSPOSED_FIXED
            || !crate::matvec::gevm_takes(k, m)
        {
            continue;
        }
        let slot = *transposed.entry(*a).or_insert_with(|| {
            let slot = types.len();
            types.push(TensorType::new(DType::F64, vec![k, m]));
            once.push(Code::Transpose { src: *a, rows: m, cols: k, out: slot });
            slot
        });
        *c = Code::Matmul {
            a: *b,
            b: slot,
            out: *out,
            mm: matmul_shape(&[k], &[k, m], false, false),
        };
    }
}

/// A per-step product of a vector by a matrix fixed for the whole loop,
/// either way round (`A x`, as every RK4 stage of `tanh(A x + b)` has, or
/// `gᵀ A`, as its reverse has), runs as `xᵀ M` against a copy of `M`
/// (`Aᵀ` or `A`) packed once per state, by the code run before the steps,
/// in the panels [`crate::matvec::gevm`] streams
/// ([`crate::matvec::pack_panels`]): each panel one contiguous block, read
/// faster than the rows of `A` at a stride (W9's loop at d = 128 on an
/// AVX2 host: see `BENCHMARKS.md`). Matrices that
/// [`crate::matvec::gevm_split`] shares between threads are left to
/// [`transpose_fixed_matrices`]. `A x` sums its terms in another order
/// than the product run as is (the last bits differ; every step and every
/// call alike); `gᵀ A` keeps its bits.
fn pack_fixed_matrices(
    once: &mut Vec<Code>,
    each: &mut [Code],
    types: &mut Vec<TensorType>,
    fixed: &[bool],
) {
    let width = crate::matvec::panel_width();
    if width == 0 {
        return;
    }
    // One packed copy per fixed matrix and reading, however many products read it.
    let mut packed: std::collections::HashMap<(usize, bool), usize> = Default::default();
    for c in each.iter_mut() {
        let Code::Matmul { a, b, out, mm } = c else { continue };
        let f64s = types[*a].dtype() == DType::F64 && types[*b].dtype() == DType::F64;
        if !f64s || mm.batches != [(0, 0)] {
            continue;
        }
        let k = mm.k;
        // (the vector, the fixed matrix, M's columns, whether M is the
        // stored matrix transposed).
        let found = if mm.n == 1
            && fixed[*a]
            && !fixed[*b]
            && matches!(mm.b_mat, (r, 1, false) | (1, r, true) if r == k)
        {
            // op(a) x = xᵀ op(a)ᵀ: M = aᵀ, or a when op reads it transposed.
            Some((*b, *a, mm.m, !mm.a_mat.2))
        } else if mm.m == 1
            && fixed[*b]
            && !fixed[*a]
            && matches!(mm.a_mat, (1, r, false) | (r, 1, true) if r == k)
        {
            Some((*a, *b, mm.n, mm.b_mat.2))
        } else {
            None
        };
        let Some((x, matrix, n, transposed)) = found else { continue };
        let size = k.saturating_mul(n);
        if (direct(mm) && size < GEVM_FLOPS)
            || size >= crate::matvec::GEVM_SPLIT
            || !crate::matvec::gevm_takes(k, n)
        {
            continue;
        }
        let slot = *packed.entry((matrix, transposed)).or_insert_with(|| {
            let slot = types.len();
            // Slack to start the panels on a 64-byte boundary.
            types.push(TensorType::new(DType::F64, vec![k * n + crate::matvec::PANEL_PAD]));
            once.push(Code::Panels { src: matrix, k, n, transposed, width, out: slot });
            slot
        });
        *c = Code::Gevm { x, panels: slot, out: *out, k, n, width };
    }
}

/// Per slot: the value of each of its elements when the code run once
/// before the steps sets it to a constant scalar, or to a broadcast of one.
fn known_scalars(invariant: &[Code], slots: usize) -> Vec<Option<f64>> {
    let mut known = vec![None; slots];
    for c in invariant {
        match c {
            Code::Const { value, out } if value.numel() == 1 => {
                if let Ok(v) = value.to_vec::<f64>() {
                    known[*out] = v.first().copied();
                }
            }
            Code::Gather { src, out, .. } => known[*out] = known[*src],
            _ => {}
        }
    }
    known
}

/// Runs `op` once on tensors, as the evaluator does (generators, index maps).
fn evaluate(op: &dyn Op, inputs: &[&Tensor], outs: &[TensorType]) -> Result<Vec<Tensor>> {
    evaluate_refs(op, inputs, outs)
}

fn evaluate_refs(op: &dyn Op, inputs: &[&Tensor], outs: &[TensorType]) -> Result<Vec<Tensor>> {
    anvil_core::Evaluator::evaluate(&crate::Cpu, op, inputs, outs)
        .unwrap_or_else(|| Err(Error::invalid(op.name(), "micro", "could not be evaluated once")))
}

/// The flat index in `from` (broadcast to `to`, NumPy rules) of each
/// element of `to`.
fn broadcast_map(from: &[usize], to: &[usize]) -> Vec<u32> {
    let lead = to.len() - from.len();
    let mut strides = vec![0usize; to.len()];
    let mut s = 1;
    for (a, &d) in from.iter().enumerate().rev() {
        if d != 1 {
            strides[lead + a] = s;
        }
        s *= d;
    }
    let total: usize = to.iter().product();
    let mut map = Vec::with_capacity(total);
    let mut idx = vec![0usize; to.len()];
    for _ in 0..total {
        map.push(idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>() as u32);
        for a in (0..to.len()).rev() {
            idx[a] += 1;
            if idx[a] < to[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    map
}

/// The shape of a matrix product: `numpy.matmul` semantics, operands read
/// transposed (last two axes) where asked.
fn matmul_shape(a: &[usize], b: &[usize], ta: bool, tb: bool) -> MatmulShape {
    // A vector is a row (a) or a column (b) matrix.
    let (a_mat, a_batch): (Vec<usize>, &[usize]) = if a.len() == 1 {
        (vec![1, a[0]], &[])
    } else {
        (a[a.len() - 2..].to_vec(), &a[..a.len() - 2])
    };
    let (b_mat, b_batch): (Vec<usize>, &[usize]) = if b.len() == 1 {
        (vec![b[0], 1], &[])
    } else {
        (b[b.len() - 2..].to_vec(), &b[..b.len() - 2])
    };
    let (ar, ac) = (a_mat[0], a_mat[1]);
    let (br, bc) = (b_mat[0], b_mat[1]);
    // Strides of the stored matrices (row-major), then of the read ones.
    let a_strides = if ta { (1, ac) } else { (ac, 1) };
    let b_strides = if tb { (1, bc) } else { (bc, 1) };
    let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
    let n = if tb { br } else { bc };
    let rank = a_batch.len().max(b_batch.len());
    let out_batch: Vec<usize> = (0..rank)
        .map(|i| {
            let da = a_batch.len().checked_sub(rank - i).map_or(1, |j| a_batch[j]);
            let db = b_batch.len().checked_sub(rank - i).map_or(1, |j| b_batch[j]);
            da.max(db)
        })
        .collect();
    let a_map = broadcast_map(a_batch, &out_batch);
    let b_map = broadcast_map(b_batch, &out_batch);
    let batches = a_map
        .iter()
        .zip(&b_map)
        .map(|(&x, &y)| (x as usize * ar * ac, y as usize * br * bc))
        .collect();
    MatmulShape { batches, m, k, n, a_strides, b_strides, a_mat: (ar, ac, ta), b_mat: (br, bc, tb) }
}

/// A reduction over some axes of `input` into `out`: the input offsets of
/// each output element, and how many per element.
fn reduction(op: &dyn Op, input: &TensorType, out: &TensorType) -> Option<(Vec<u32>, usize)> {
    let axes = op.reduction_math()?.axes();
    let shape = input.shape();
    let per: usize = axes.iter().map(|&a| shape.get(a).copied().unwrap_or(1)).product();
    let n_out = out.numel();
    let mut groups = vec![0u32; n_out * per];
    let mut fill = vec![0usize; n_out];
    let mut idx = vec![0usize; shape.len()];
    for flat in 0..input.numel() {
        let mut o = 0usize;
        for (a, (&i, &d)) in idx.iter().zip(shape).enumerate() {
            if !axes.contains(&a) {
                o = o * d + i;
            }
        }
        groups[o * per + fill[o]] = flat as u32;
        fill[o] += 1;
        for a in (0..shape.len()).rev() {
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    Some((groups, per))
}

fn fold_of(op: &dyn Op, dtype: DType) -> Option<Fold> {
    let math = op.reduction_math()?;
    Some(match dtype {
        DType::F64 => {
            let (id, f) = math.f64();
            Fold::F64(id, f)
        }
        // In `f64` accumulators, as the plan's `f32` reductions.
        DType::F32 => {
            let (id, f) = math.f64();
            Fold::F32(id, f)
        }
        DType::I64 => {
            let (id, f) = math.i64();
            Fold::I64(id, f)
        }
        DType::Bool => Fold::Bool(crate::kernels::reduce::BoolFold::of(math.bool()?)),
    })
}

/// Runs one instruction.
fn step(c: &Code, st: &mut State, types: &[TensorType], ctx: &Parallelism) -> Result<()> {
    let bufs = &mut st.bufs;
    match c {
        Code::Run(r) => r.exec(bufs, &mut st.regs),
        Code::Elementwise { instr, args, out, shape } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            let at = BlockAt { start: 0, shape };
            let b = |k: usize| bufs[args[k]].block();
            // Operands on the stack: no allocation per instruction.
            let r = match args.len() {
                1 => instr.eval(&[b(0)], o.block_mut(), at),
                2 => instr.eval(&[b(0), b(1)], o.block_mut(), at),
                3 => instr.eval(&[b(0), b(1), b(2)], o.block_mut(), at),
                _ => {
                    let blocks: Vec<Block<'_>> = (0..args.len()).map(b).collect();
                    instr.eval(&blocks, o.block_mut(), at)
                }
            };
            bufs[*out] = o;
            r
        }
        Code::Arith { f, a, b, out } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            if let (Buf::F64(x), Buf::F64(y), Buf::F64(z)) = (&bufs[*a], &bufs[*b], &mut o) {
                run_arith(*f, x, y, z);
            }
            bufs[*out] = o;
            Ok(())
        }
        Code::Gather { src, map, out } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            gather(&bufs[*src], map, &mut o);
            bufs[*out] = o;
            Ok(())
        }
        Code::Transpose { src, rows, cols, out } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            let n = rows * cols;
            match (&bufs[*src], &mut o) {
                (Buf::F64(x), Buf::F64(z)) if x.len() >= n && z.len() >= n => {
                    crate::linalg::transpose::transpose(x, *rows, *cols, z)
                }
                _ => {
                    bufs[*out] = o;
                    return Err(Error::invalid(
                        "micro",
                        "transpose",
                        "a buffer of another dtype or length",
                    ));
                }
            }
            bufs[*out] = o;
            Ok(())
        }
        Code::Panels { src, k, n, transposed, width, out } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            let done = match (&bufs[*src], &mut o) {
                (Buf::F64(x), Buf::F64(z)) => crate::matvec::pack_panels(
                    x,
                    (*k, *n),
                    *transposed,
                    *width,
                    crate::matvec::aligned_mut(z),
                ),
                _ => false,
            };
            bufs[*out] = o;
            if done {
                Ok(())
            } else {
                Err(Error::invalid("micro", "panels", "a buffer of another dtype or length"))
            }
        }
        Code::Gevm { x, panels, out, k, n, width } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            let done = match (&bufs[*x], &bufs[*panels], &mut o) {
                (Buf::F64(x), Buf::F64(p), Buf::F64(z)) if x.len() >= *k && z.len() >= *n => {
                    // Where `Panels` packed them (the buffer is the same).
                    let p = crate::matvec::aligned(p);
                    match &mut st.lease {
                        Some(lease) => lease.gevm_panels(&x[..*k], p, *width, &mut z[..*n]),
                        None => crate::matvec::gevm_panels(&x[..*k], p, *width, &mut z[..*n]),
                    }
                }
                _ => false,
            };
            bufs[*out] = o;
            if done {
                Ok(())
            } else {
                Err(Error::invalid("micro", "gevm", "a buffer of another dtype or length"))
            }
        }
        Code::Assemble { srcs, map, fill, out } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            let parts: Vec<&Buf> = srcs.iter().map(|&s| &bufs[s]).collect();
            assemble(&parts, map, *fill, &mut o);
            bufs[*out] = o;
            Ok(())
        }
        Code::Const { value, out } => bufs[*out].copy_from(value.storage(), 0),
        Code::Matmul { a, b, out, mm } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            match (&bufs[*a], &bufs[*b], &mut o) {
                (Buf::F64(x), Buf::F64(y), Buf::F64(z)) if !direct_f64(mm) => {
                    // Shared only from a rayon worker, where the fork-join
                    // is cheap (from another thread each join wakes the
                    // pool: slower than one thread). The serial path takes
                    // the same blocks, so the bits are the same.
                    let workers = ctx.thread_count() > 1 && rayon::current_thread_index().is_some();
                    let shared = split_product(x, y, z, mm, workers);
                    if !shared {
                        gemm(x, y, z, mm, crate::matvec::product)
                    }
                }
                (Buf::F32(x), Buf::F32(y), Buf::F32(z)) if !direct(mm) => {
                    gemm(x, y, z, mm, crate::matvec::no_product)
                }
                (Buf::F64(x), Buf::F64(y), Buf::F64(z)) => matmul_f64(x, y, z, mm),
                (Buf::F32(x), Buf::F32(y), Buf::F32(z)) => matmul(x, y, z, mm),
                _ => {}
            }
            bufs[*out] = o;
            Ok(())
        }
        Code::Reduce { src, out, groups, per, fold } => {
            let mut o = std::mem::take(&mut bufs[*out]);
            reduce(&bufs[*src], groups, *per, fold, &mut o);
            bufs[*out] = o;
            Ok(())
        }
        Code::Kernel { op, kernel, args, outs } => {
            let tensors = args
                .iter()
                .map(|&a| bufs[a].to_tensor(types[a].shape()))
                .collect::<Result<Vec<Tensor>>>()?;
            let refs: Vec<&Tensor> = tensors.iter().collect();
            let out_types: Vec<TensorType> = outs.iter().map(|(_, t)| t.clone()).collect();
            let results = match kernel.as_ref() {
                KernelRun::One(f) => vec![f(op.as_ref(), &refs, &out_types[0], ctx)?],
                KernelRun::Many(f) => f(op.as_ref(), &refs, &out_types, ctx)?,
                KernelRun::Prepared(p) => p.run(&refs, &out_types, ctx)?,
            };
            for ((slot, _), t) in outs.iter().zip(&results) {
                bufs[*slot].copy_from(t.storage(), 0)?;
            }
            Ok(())
        }
    }
}

/// Slot `out` to write and slots `a`, `b` to read, borrowed at once;
/// `None` when `out` is one of them or out of range.
#[inline]
fn write_read2(bufs: &mut [Buf], out: usize, a: usize, b: usize) -> Option<(&mut Buf, &Buf, &Buf)> {
    if a == out || b == out || out >= bufs.len() {
        return None;
    }
    let (below, at) = bufs.split_at_mut(out);
    let (o, above) = at.split_first_mut()?;
    let read = |i: usize| if i < out { below.get(i) } else { above.get(i - out - 1) };
    Some((o, read(a)?, read(b)?))
}

fn gather(src: &Buf, map: &[u32], out: &mut Buf) {
    fn typed<T: Copy>(s: &[T], map: &[u32], o: &mut [T]) {
        for (d, &i) in o.iter_mut().zip(map) {
            *d = s[i as usize];
        }
    }
    match (src, out) {
        (Buf::F64(s), Buf::F64(o)) => typed(s, map, o),
        (Buf::F32(s), Buf::F32(o)) => typed(s, map, o),
        (Buf::I64(s), Buf::I64(o)) => typed(s, map, o),
        (Buf::Bool(s), Buf::Bool(o)) => typed(s, map, o),
        _ => {}
    }
}

fn assemble(parts: &[&Buf], map: &[Option<(u32, u32)>], fill: Scalar, out: &mut Buf) {
    macro_rules! typed {
        ($variant:ident, $o:ident, $fill:expr) => {{
            let srcs: Vec<&[_]> = parts
                .iter()
                .filter_map(|p| match p {
                    Buf::$variant(v) => Some(v.as_slice()),
                    _ => None,
                })
                .collect();
            for (d, m) in $o.iter_mut().zip(map) {
                *d = match m {
                    Some((j, i)) => srcs[*j as usize][*i as usize],
                    None => $fill,
                };
            }
        }};
    }
    match out {
        Buf::F64(o) => typed!(F64, o, fill.to_f64()),
        Buf::F32(o) => typed!(F32, o, fill.to_f64() as f32),
        Buf::I64(o) => typed!(I64, o, fill.to_f64() as i64),
        Buf::Bool(o) => typed!(Bool, o, fill.to_f64() != 0.0),
    }
}

/// [`matmul`] in `f64`, compiled for AVX2 when the CPU has it
/// ([`runs::lanes_width`]; same bits).
fn matmul_f64(a: &[f64], b: &[f64], out: &mut [f64], mm: &MatmulShape) {
    anvil_ops::at_width!(
        runs::lanes_width(),
        fn(a: &[f64] = a, b: &[f64] = b, out: &mut [f64] = out, mm: &MatmulShape = mm) {
            matmul(a, b, out, mm)
        }
    )
}

#[inline(always)]
fn matmul<T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    a: &[T],
    b: &[T],
    out: &mut [T],
    mm: &MatmulShape,
) {
    let (ars, acs) = mm.a_strides;
    let (brs, bcs) = mm.b_strides;
    let k = mm.k;
    let mut o = 0;
    if mm.m == 1 && bcs == 1 && !(acs == 1 && brs == 1) {
        // A row vector times a row-major matrix: the rows of b scaled and
        // summed into the result (contiguous runs, vectorised).
        // Four rows per pass over the result, added in the order of one
        // row per pass (same bits).
        let n = mm.n;
        for &(ao, bo) in &mm.batches {
            let row = &mut out[o..o + n];
            row.iter_mut().for_each(|d| *d = T::default());
            let brow = |p: usize| &b[bo + p * brs..bo + p * brs + n];
            let mut p = 0;
            while p + 4 <= k {
                let s: [T; 4] = std::array::from_fn(|q| a[ao + (p + q) * acs]);
                let (r0, r1, r2, r3) = (brow(p), brow(p + 1), brow(p + 2), brow(p + 3));
                for ((((d, &v0), &v1), &v2), &v3) in row.iter_mut().zip(r0).zip(r1).zip(r2).zip(r3)
                {
                    *d = *d + s[0] * v0 + s[1] * v1 + s[2] * v2 + s[3] * v3;
                }
                p += 4;
            }
            for p in p..k {
                let s = a[ao + p * acs];
                for (d, &v) in row.iter_mut().zip(brow(p)) {
                    *d = *d + s * v;
                }
            }
            o += n;
        }
        return;
    }
    if mm.n == 1 && acs == 1 && brs == 1 {
        // Matrix times vector: rows of a dotted with b, four rows at a time.
        for &(ao, bo) in &mm.batches {
            dots(&a[ao..], ars, &b[bo..bo + k], &mut out[o..o + mm.m]);
            o += mm.m;
        }
        return;
    }
    for &(ao, bo) in &mm.batches {
        for i in 0..mm.m {
            for j in 0..mm.n {
                let (a0, b0) = (ao + i * ars, bo + j * bcs);
                out[o] = if acs == 1 && brs == 1 {
                    // Both runs contiguous (a row times a column of a
                    // transposed-stored b, or a vector): four partial sums.
                    dot(&a[a0..a0 + k], &b[b0..b0 + k])
                } else {
                    let mut s = T::default();
                    for p in 0..k {
                        s = s + a[a0 + p * acs] * b[b0 + p * brs];
                    }
                    s
                };
                o += 1;
            }
        }
    }
}

/// Products at least this large (`m k n`) go to faer's kernels, whose
/// vectorised (runtime-dispatched SIMD), blocked loops beat the direct ones
/// beyond a few thousand multiply-adds, matrix-vector products included.
const GEMM_FLOPS: usize = 2048;

/// Whether the direct loops run this product.
fn direct(mm: &MatmulShape) -> bool {
    mm.m * mm.k * mm.n < GEMM_FLOPS
}

/// Vector–matrix products (`xᵀ B`) of at least this many multiply-adds go
/// to [`crate::matvec::gevm`] where it takes them, even below
/// [`GEMM_FLOPS`]: at 32 × 32 (W9's loop at d = 32) the direct loop took
/// about 0.1 µs a product, re-reading its result row once per four rows of
/// `B`, where `gevm` keeps the result in registers.
const GEVM_FLOPS: usize = 512;

/// Whether the direct loops run this `f64` product: as [`direct`], except
/// a single vector–matrix product from [`GEVM_FLOPS`] up that
/// [`crate::matvec::gevm`] takes.
fn direct_f64(mm: &MatmulShape) -> bool {
    let gevm = mm.m == 1
        && mm.batches.len() == 1
        && mm.k * mm.n >= GEVM_FLOPS
        && crate::matvec::gevm_takes(mm.k, mm.n);
    direct(mm) && !gevm
}

/// A single matrix–vector product shared between threads (when
/// `parallel`; the same blocks on this thread otherwise, for the same
/// bits) where
/// [`crate::matvec::gevm_split`] (`xᵀ B`, `B` stored row-major, as the
/// reverse pass's `gᵀ A` and the forward `A x` made `xᵀ Aᵀ` are) or
/// [`crate::matvec::gemv_split`] (`A x`, a matrix too large for the
/// transposed copy) takes it: a matrix of at least 256 × 256 (W9's loop
/// at d = 256 and up), whose product takes several µs.
fn split_product(x: &[f64], y: &[f64], z: &mut [f64], mm: &MatmulShape, parallel: bool) -> bool {
    if mm.batches != [(0, 0)] {
        return false;
    }
    match (mm.a_mat, mm.b_mat) {
        ((1, k, false) | (k, 1, true), (br, bc, false)) if mm.m == 1 && br == k => {
            x.len() >= k
                && y.len() >= br * bc
                && crate::matvec::gevm_split(&x[..k], &y[..br * bc], bc, z, parallel)
        }
        ((ar, ac, false), (k, 1, false) | (1, k, true)) if parallel && mm.n == 1 && ac == k => {
            x.len() >= ar * ac
                && y.len() >= k
                && crate::matvec::gemv_split(&x[..ar * ac], ac, &y[..k], z)
        }
        _ => false,
    }
}

/// The products, one matrix per batch, on this thread: a matrix–vector
/// product through `matvec` where it runs it ([`crate::matvec::product`]
/// for `f64`), the rest through faer.
fn gemm<T: faer::traits::ComplexField + Copy + num_one::One>(
    a: &[T],
    b: &[T],
    out: &mut [T],
    mm: &MatmulShape,
    matvec: crate::matvec::ProductFn<T>,
) {
    let (ar, ac, _) = mm.a_mat;
    let (br, bc, _) = mm.b_mat;
    for (c, &(ao, bo)) in out.chunks_mut(mm.m * mm.n).zip(&mm.batches) {
        let (a, b) = (&a[ao..ao + ar * ac], &b[bo..bo + br * bc]);
        if !matvec(a, mm.a_mat, b, mm.b_mat, c) {
            gemm_one(a, b, c, mm);
        }
    }
}

/// One product of [`gemm`]: `a` and `b` are the batch's stored matrices.
fn gemm_one<T: faer::traits::ComplexField + Copy + num_one::One>(
    a: &[T],
    b: &[T],
    c: &mut [T],
    mm: &MatmulShape,
) {
    use faer::linalg::matmul::matmul as faer_matmul;
    use faer::{Accum, MatMut, MatRef, Par};
    let (ar, ac, ta) = mm.a_mat;
    let (br, bc, tb) = mm.b_mat;
    let av = MatRef::from_row_major_slice(a, ar, ac);
    let bv = MatRef::from_row_major_slice(b, br, bc);
    let av = if ta { av.transpose() } else { av };
    let bv = if tb { bv.transpose() } else { bv };
    let cv = MatMut::from_row_major_slice_mut(c, mm.m, mm.n);
    faer_matmul(cv, Accum::Replace, av, bv, T::one(), Par::Seq);
}

/// The multiplicative identity, for the two float types.
mod num_one {
    pub trait One {
        fn one() -> Self;
    }
    impl One for f64 {
        fn one() -> f64 {
            1.0
        }
    }
    impl One for f32 {
        fn one() -> f32 {
            1.0
        }
    }
}

/// `out[i] = Σ a[i·stride + p] x[p]` (row `i` of a matrix with row stride
/// `stride`, `out.len()` rows), four rows at a time sharing each block of
/// `x`; each row's sum is formed as [`dot`] forms it (same bits).
#[inline(always)]
fn dots<T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    a: &[T],
    stride: usize,
    x: &[T],
    out: &mut [T],
) {
    let k = x.len();
    let full = k - k % 8;
    let row = |i: usize| &a[i * stride..i * stride + k];
    let quads = out.len() / 4 * 4;
    for (q, d4) in out[..quads].chunks_exact_mut(4).enumerate() {
        let r: [&[T]; 4] = std::array::from_fn(|j| row(4 * q + j));
        let mut acc = [[T::default(); 8]; 4];
        for p in (0..full).step_by(8) {
            let xb = &x[p..p + 8];
            for (accr, rj) in acc.iter_mut().zip(&r) {
                let rb = &rj[p..p + 8];
                for l in 0..8 {
                    accr[l] = accr[l] + rb[l] * xb[l];
                }
            }
        }
        for ((d, accr), rj) in d4.iter_mut().zip(&acc).zip(&r) {
            let mut s = ((accr[0] + accr[1]) + (accr[2] + accr[3]))
                + ((accr[4] + accr[5]) + (accr[6] + accr[7]));
            for p in full..k {
                s = s + rj[p] * x[p];
            }
            *d = s;
        }
    }
    for (i, d) in out.iter_mut().enumerate().skip(quads) {
        *d = dot(row(i), x);
    }
}

/// `Σ x[i] y[i]` in eight interleaved partial sums (they vectorise).
#[inline(always)]
fn dot<T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    x: &[T],
    y: &[T],
) -> T {
    let mut acc = [T::default(); 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            acc[l] = acc[l] + a[l] * b[l];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (a, b) in xr.iter().zip(yr) {
        s = s + *a * *b;
    }
    s
}

fn reduce(src: &Buf, groups: &[u32], per: usize, fold: &Fold, out: &mut Buf) {
    fn typed<T: Copy>(
        s: &[T],
        groups: &[u32],
        per: usize,
        id: T,
        f: impl Fn(T, T) -> T,
        o: &mut [T],
    ) {
        for (d, g) in o.iter_mut().zip(groups.chunks(per.max(1))) {
            *d = g.iter().fold(id, |acc, &i| f(acc, s[i as usize]));
        }
        if per == 0 {
            o.iter_mut().for_each(|d| *d = id);
        }
    }
    match (src, fold, out) {
        (Buf::F64(s), Fold::F64(id, f), Buf::F64(o)) => typed(s, groups, per, *id, f, o),
        (Buf::F32(s), Fold::F32(id, f), Buf::F32(o)) => {
            for (d, g) in o.iter_mut().zip(groups.chunks(per.max(1))) {
                *d = g.iter().fold(*id, |acc, &i| f(acc, f64::from(s[i as usize]))) as f32;
            }
            if per == 0 {
                o.iter_mut().for_each(|d| *d = *id as f32);
            }
        }
        (Buf::I64(s), Fold::I64(id, f), Buf::I64(o)) => typed(s, groups, per, *id, f, o),
        (Buf::Bool(s), Fold::Bool(b), Buf::Bool(o)) => {
            use crate::kernels::reduce::BoolFold;
            match *b {
                BoolFold::Or => typed(s, groups, per, false, |a, b| a | b, o),
                BoolFold::And => typed(s, groups, per, true, |a, b| a & b, o),
                BoolFold::Other(id, f) => typed(s, groups, per, id, f, o),
            }
        }
        _ => {}
    }
}

/// A body compiled both ways: straight-line code when its values are small,
/// a plan otherwise.
#[derive(Debug)]
pub enum Body {
    /// Small values.
    Micro(Micro),
    /// Anything else (boxed: a plan is much larger than straight-line code).
    Plan(Box<Plan>),
}

impl Body {
    /// Compiles `graph`.
    ///
    /// # Errors
    /// As [`compile`].
    pub fn compile(graph: &Graph) -> Result<Body> {
        Body::compile_invariant(graph, &[])
    }

    /// Compiles `graph`, the inputs marked `invariant` set once per run
    /// (see [`Micro::compile_invariant`]).
    ///
    /// # Errors
    /// As [`compile`].
    pub fn compile_invariant(graph: &Graph, invariant: &[bool]) -> Result<Body> {
        Ok(match Micro::compile_invariant(graph, invariant)? {
            Some(m) => Body::Micro(m),
            None => Body::Plan(Box::new(compile(graph)?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anvil_core::{trace_with, Var};
    use anvil_ops::{concatenate, iota, VarExt};

    /// The state of `m` after loading `args`, running its invariant part
    /// and then its step `times` times.
    fn ran(m: &Micro, args: &[Tensor], times: usize) -> State {
        let mut st = m.state();
        for (k, a) in args.iter().enumerate() {
            m.set_input(&mut st, k, a, 0).unwrap();
        }
        let ctx = Parallelism::sequential();
        m.run_invariant(&mut st, &ctx).unwrap();
        for _ in 0..times {
            m.run(&mut st, &ctx).unwrap();
        }
        st
    }

    /// Runs `graph` as a micro program and as a plan on `args`.
    fn both(graph: &Graph, args: &[Tensor]) -> (Vec<Tensor>, Vec<Tensor>) {
        let m = Micro::compile(graph).unwrap().expect("small enough");
        let st = ran(&m, args, 1);
        let ctx = Parallelism::sequential();
        let micro = graph
            .outputs()
            .iter()
            .enumerate()
            .map(|(k, o)| st.buf(m.output(k)).to_tensor(graph.ty(*o).shape()).unwrap())
            .collect();
        (micro, compile(graph).unwrap().run(args, &ctx).unwrap())
    }

    fn t(n: usize, shape: &[usize], scale: f64) -> Tensor {
        Tensor::from_vec((0..n).map(|i| ((i as f64) * scale).sin()).collect(), shape).unwrap()
    }

    /// Matrix-vector and vector-matrix products of every small size give
    /// the bits of the plain loops they replace: a [`dot`] per row, and one
    /// row of `b` added per pass.
    #[test]
    fn vector_products_keep_the_bits_of_the_plain_loops() {
        for generic in [true, false] {
            runs::force_generic(generic);
            vector_products_of_every_small_size();
        }
        runs::force_generic(false);
    }

    /// A product of a matrix fixed for the loop by a per-step vector, either
    /// way round, runs against a copy packed in panels once by the
    /// invariant code (where this CPU has the vector–matrix kernel): `A x`
    /// against `Aᵀ`'s panels (another order of the same sums), `gᵀ A`
    /// against `A`'s (the same bits as in place). Products of one matrix
    /// read the same way share a copy; a per-step matrix is left alone, and
    /// a matrix large enough to be shared between threads is transposed
    /// instead.
    #[test]
    fn a_fixed_matrix_times_a_vector_runs_against_packed_panels() {
        let gevms = |m: &Micro| m.code.iter().filter(|c| matches!(c, Code::Gevm { .. })).count();
        let panels = |m: &Micro, transposed: bool| {
            m.invariant
                .iter()
                .filter(|c| matches!(c, Code::Panels { transposed: t, .. } if *t == transposed))
                .count()
        };
        let (m, k) = (40, 70);
        let types = [TensorType::new(DType::F64, vec![m, k]), TensorType::new(DType::F64, vec![k])];
        let graph = trace_with(&types, |v| Ok(vec![v[0].matmul(&v[1]).tanh()])).unwrap();
        let micro = Micro::compile_invariant(&graph, &[true, false]).unwrap().expect("small");
        let runs = usize::from(crate::matvec::gevm_takes(k, m));
        assert_eq!((gevms(&micro), panels(&micro, true)), (runs, runs));
        // Two products `A x` and one `zᵀ A` of one square matrix (64 × 64:
        // not a direct loop): two copies, `Aᵀ` and `A`.
        let sq = [TensorType::new(DType::F64, vec![64, 64]), TensorType::new(DType::F64, vec![64])];
        let three = |v: &[Var]| {
            let y = v[0].matmul(&v[1]).tanh();
            let z = v[0].matmul(&y).sin();
            Ok(vec![z.matmul(&v[0]), y])
        };
        let square = trace_with(&sq, three).unwrap();
        let micro2 = Micro::compile_invariant(&square, &[true, false]).unwrap().expect("small");
        let runs = usize::from(crate::matvec::gevm_takes(64, 64));
        assert_eq!(
            (gevms(&micro2), panels(&micro2, true), panels(&micro2, false)),
            (3 * runs, runs, runs)
        );
        let (a, x) = (t(m * k, &[m, k], 0.37), t(k, &[k], 0.71));
        let (av, xv) = (a.to_vec::<f64>().unwrap(), x.to_vec::<f64>().unwrap());
        let got = bits_of(&micro, &graph, &[a.clone(), x.clone()]);
        for (i, &g) in got[0].iter().enumerate() {
            let want = (0..k).map(|p| av[i * k + p] * xv[p]).sum::<f64>().tanh();
            assert!((f64::from_bits(g) - want).abs() < 1e-13, "row {i}");
        }
        assert_eq!(got, bits_of(&micro, &graph, &[a.clone(), x.clone()]));
        // Without the matrix fixed, no copy; `A x` within rounding of the
        // packed product, `zᵀ A` bit for bit.
        let plain = Micro::compile_invariant(&graph, &[false, false]).unwrap().expect("small");
        assert_eq!((gevms(&plain), plain.invariant.len()), (0, 0));
        let again = bits_of(&plain, &graph, &[a, x]);
        for (g, p) in got[0].iter().zip(&again[0]) {
            assert!((f64::from_bits(*g) - f64::from_bits(*p)).abs() < 1e-13);
        }
        let (a, x) = (t(64 * 64, &[64, 64], 0.29), t(64, &[64], 0.53));
        let packed = bits_of(&micro2, &square, &[a.clone(), x.clone()]);
        let plain2 = Micro::compile_invariant(&square, &[false, false]).unwrap().expect("small");
        let unpacked = bits_of(&plain2, &square, &[a.clone(), x.clone()]);
        for (g, p) in packed[1].iter().zip(&unpacked[1]) {
            assert!((f64::from_bits(*g) - f64::from_bits(*p)).abs() < 1e-13, "A x");
        }
        // `xᵀ A` packed gives the bits of the product in place.
        let vm = trace_with(&sq, |v| Ok(vec![v[1].matmul(&v[0])])).unwrap();
        let fixed = Micro::compile_invariant(&vm, &[true, false]).unwrap().expect("small");
        let free = Micro::compile_invariant(&vm, &[false, false]).unwrap().expect("small");
        assert_eq!((gevms(&fixed), gevms(&free)), (runs, 0));
        assert_eq!(bits_of(&fixed, &vm, &[a.clone(), x.clone()]), bits_of(&free, &vm, &[a, x]));
        // A matrix shared between threads is transposed, not packed.
        let big =
            [TensorType::new(DType::F64, vec![256, 256]), TensorType::new(DType::F64, vec![256])];
        let graph = trace_with(&big, |v| Ok(vec![v[0].matmul(&v[1]).tanh()])).unwrap();
        let micro = Micro::compile_invariant(&graph, &[true, false]).unwrap().expect("small");
        let copies = micro.invariant.iter().filter(|c| matches!(c, Code::Transpose { .. })).count();
        assert_eq!((gevms(&micro), copies), (0, usize::from(crate::matvec::gevm_takes(256, 256))));
    }

    /// Both copies of the product loops ([`matmul_f64`]: baseline, AVX2).
    fn vector_products_of_every_small_size() {
        let f =
            |i: usize, s: f64| ((i as f64) * s).sin() * 1e3_f64.powf(((i * 7) % 5) as f64 - 2.0);
        for m in 1..=9 {
            for k in 1..=19 {
                let a: Vec<f64> = (0..m * k).map(|i| f(i, 0.37)).collect();
                let x: Vec<f64> = (0..k).map(|i| f(i, 0.71)).collect();
                // a (m×k) times x.
                let mm = matmul_shape(&[m, k], &[k], false, false);
                let mut got = vec![0.0; m];
                matmul_f64(&a, &x, &mut got, &mm);
                let want: Vec<f64> = (0..m).map(|i| dot(&a[i * k..i * k + k], &x)).collect();
                assert_eq!(got, want, "{m}x{k} times a vector");
                // x (k) times a read as k×m.
                let mm = matmul_shape(&[k], &[k, m], false, false);
                let mut got = vec![0.0; m];
                matmul_f64(&x, &a, &mut got, &mm);
                let mut want = vec![0.0; m];
                for p in 0..k {
                    for j in 0..m {
                        want[j] += x[p] * a[p * m + j];
                    }
                }
                if m == 1 {
                    want = vec![dot(&x, &a)]; // a dot product, both runs contiguous
                }
                assert_eq!(got, want, "a vector times {k}x{m}");
            }
        }
    }

    /// The inline arithmetic of [`Micro::run`] handles a value used twice
    /// (`x * x`) and matches the plan.
    #[test]
    fn inline_arithmetic_matches_the_plan() {
        let graph = trace_with(&[TensorType::new(DType::F64, vec![5])], |v| {
            let sq = &v[0] * &v[0];
            Ok(vec![&(&sq - &v[0]) / &(&sq + 1.0)])
        })
        .unwrap();
        let (micro, plan) = both(&graph, &[t(5, &[5], 0.9)]);
        assert_eq!(micro[0].to_vec::<f64>().unwrap(), plan[0].to_vec::<f64>().unwrap());
    }

    /// Runs a compiled program on `args`; its outputs' elements as bits.
    fn bits_of(m: &Micro, graph: &Graph, args: &[Tensor]) -> Vec<Vec<u64>> {
        // Twice: the registers of the second run hold the first one's values.
        let st = ran(m, args, 2);
        (0..graph.outputs().len())
            .map(|k| match st.buf(m.output(k)) {
                Buf::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
                other => panic!("f64 outputs expected, got {other:?}"),
            })
            .collect()
    }

    /// Fused elementwise runs give the bits of the instructions run one by
    /// one, at every lane width and with partial chunks: each instruction
    /// computes the same operation on the same operands. Sums of terms of
    /// very different magnitudes make any change of an evaluation order
    /// (a reassociated sum, an instruction reading an operand before it is
    /// computed) change the bits.
    #[test]
    fn fused_runs_keep_the_bits_of_the_instructions() {
        for n in [1, 3, 8, 13, 32, 40, 64, 70, 96, 128, 130, 256, 300] {
            let types = [
                TensorType::new(DType::F64, vec![n]),
                TensorType::new(DType::F64, vec![n, n]),
                TensorType::new(DType::F64, vec![n]),
            ];
            let graph = trace_with(&types, |v| {
                let (x, a, y) = (&v[0], &v[1], &v[2]);
                let m = a.matmul(x);
                let u = ((&m + y) * x - y / &(x * x + 3.0)).tanh();
                let w = &(&(&(&u + x) + y) + &m) * 0.25;
                let p = a.matmul(&w);
                let z = &(-(&p * &u) + &(w.exp() * 1e-3)) / &(&w * &w + 1.0);
                let q = &(&(&z * 1e8 + &w) - &z * 1e8) + &(x * 2.0);
                // Constants on the left of each operation.
                let k = |v: f64| x.scalar_like(v);
                let r = &(&(&k(1.0) - &u) * &(&k(2.0) / &(&w * &w + 1.0)))
                    + &(&(&k(0.5) + &z) * &(&k(3.0) * &u));
                Ok(vec![z, u, q, &p - &(x * 0.5), &r - &(x / 7.0)])
            })
            .unwrap();
            let f = |i: usize, s: f64| {
                ((i as f64) * s).sin() * 1e3_f64.powf(((i * 7) % 5) as f64 - 2.0)
            };
            let args = [
                Tensor::from_vec((0..n).map(|i| f(i, 0.37)).collect(), &[n]).unwrap(),
                Tensor::from_vec((0..n * n).map(|i| f(i, 0.71) * 1e-3).collect(), &[n, n]).unwrap(),
                Tensor::from_vec((0..n).map(|i| f(i + 3, 1.13)).collect(), &[n]).unwrap(),
            ];
            let fused = Micro::compile_fused(&graph, &[], true).unwrap().expect("small");
            let plain = Micro::compile_fused(&graph, &[], false).unwrap().expect("small");
            let runs: Vec<(usize, usize)> = fused
                .code
                .iter()
                .filter_map(|c| if let Code::Run(r) = c { Some(r.size()) } else { None })
                .collect();
            let fused_ops: usize = runs.iter().map(|r| r.0).sum();
            let immediates: usize = runs.iter().map(|r| r.1).sum();
            assert!(fused_ops >= 20 && immediates >= 8, "n = {n}: runs {runs:?}");
            assert!(fused.code.len() + 10 <= plain.code.len(), "n = {n}: nothing fused");
            runs::force_generic(true);
            let reference = bits_of(&plain, &graph, &args);
            let generic = bits_of(&fused, &graph, &args);
            runs::force_generic(false);
            assert_eq!(generic, reference, "n = {n}: fused (baseline) and unfused bits differ");
            let detected = bits_of(&fused, &graph, &args);
            assert_eq!(detected, reference, "n = {n}: fused (AVX2) and unfused bits differ");
        }
    }

    #[test]
    fn every_kind_of_instruction_matches_the_plan() {
        let types = [
            TensorType::new(DType::F64, vec![3, 4]),
            TensorType::new(DType::F64, vec![4]),
            TensorType::new(DType::F64, vec![2, 4, 3]),
        ];
        let graph = trace_with(&types, |v| {
            let (a, x, b) = (&v[0], &v[1], &v[2]);
            let mv = a.matmul(x); // matrix-vector
            let vm = x.matmul(&a.transpose()); // vector-matrix, read transposed
            let bm = b.matmul(a); // batched, a shared: [2, 4, 4]
            let outer = mv.reshape(&[3, 1]).matmul(&x.reshape(&[1, 4])); // rank one
            let moved = b.permute(&[2, 0, 1]).slice_axis(1, Some(1), None, 1).flip(&[0]);
            let padded = a.pad(&[(1, 0), (0, 2)], 7.0);
            let cat = concatenate(&[&mv, &vm.sum(&[0]).reshape(&[1]), x], 0);
            let reds = (b.max(&[1], false), b.sum(&[0, 2]), a.prod(&[1], true));
            let gen = iota(&[3, 4], 1) * a + 1.0;
            let sel = a.gt(&a.zeros_like()).select(a, &(a * -2.0));
            let any = a.gt(&a.full_like(0.5)).max(&[0, 1], false);
            let fallback = a.argmax(1, false);
            Ok(vec![
                mv, vm, bm, outer, moved, padded, cat, reds.0, reds.1, reds.2, gen, sel, any,
                fallback,
            ])
        })
        .unwrap();
        let args = [t(12, &[3, 4], 0.7), t(4, &[4], 1.3), t(24, &[2, 4, 3], 0.4)];
        let (micro, plan) = both(&graph, &args);
        for (k, (m, p)) in micro.iter().zip(&plan).enumerate() {
            assert_eq!(m.ty(), p.ty(), "output {k}");
            assert!(m.allclose(p, 1e-14, 1e-14), "output {k}:\n micro {m}\n plan  {p}");
        }
    }

    #[test]
    fn invariant_code_runs_once_and_large_inputs_are_allowed() {
        // A large constant input (a loop's matrix) with small values per step.
        let types =
            [TensorType::new(DType::F64, vec![100, 100]), TensorType::new(DType::F64, vec![100])];
        let graph =
            trace_with(&types, |v| Ok(vec![v[0].matmul(&v[1]).tanh(), v[0].sum(&[0]) * 2.0]))
                .unwrap();
        let m = Micro::compile_invariant(&graph, &[true, false])
            .unwrap()
            .expect("per-step values are small");
        // The column sums, the constant 2 (and its broadcast) and the
        // product's sum run once (and the matrix's transpose, where the
        // product runs against it).
        let transposed = usize::from(crate::matvec::gevm_takes(100, 100));
        assert_eq!(
            (m.invariant.len(), m.code.len()),
            (4 + transposed, 2),
            "matmul and tanh run per step"
        );
        let args = [t(10_000, &[100, 100], 0.01), t(100, &[100], 0.3)];
        let (micro, plan) = both(&graph, &args);
        assert!(micro[0].allclose(&plan[0], 1e-13, 1e-13));
        assert!(micro[1].allclose(&plan[1], 1e-13, 1e-13));
        // Too large per step: a plan.
        let big = trace_with(&types, |v| Ok(vec![v[0].exp()])).unwrap();
        assert!(Micro::compile(&big).unwrap().is_none());
        let _ = Var::is_poisoned;
    }
}
