//! Runs of elementwise instructions fused into one dispatch.
//!
//! A loop body on small vectors (an ODE step on 8 elements) is mostly
//! elementwise arithmetic between a few matrix products. Run one by one,
//! each instruction pays a dispatch (the match, three buffers borrowed, a
//! loop set up over the value) larger than its arithmetic. [`fuse`] reorders
//! the per-step code, keeping every dependency, so that the elementwise
//! instructions over values of one length run back to back, and turns each
//! run of two or more into one [`Run`]: per chunk of lanes it evaluates
//! every instruction on registers (fixed-size arrays; operands from outside
//! the run are read in their buffers for whole chunks of 32 or more lanes,
//! copied into registers otherwise), and stores only the values read outside the
//! run (by later code, or as the program's outputs). Intermediates read
//! only inside the run never reach a buffer.
//!
//! **Same bits.** Each instruction computes the same IEEE operation on the
//! same operands, element by element, as the unfused code: only where the
//! intermediates live changes, never an evaluation order within an element.
//! Ops other than the four arithmetic ones (`tanh`, `exp`, ...) run their
//! block math on a chunk of lanes, which gives the same bits at any offset
//! and length (see [`crate::vmath`]); ops whose math depends on the position
//! get it through [`BlockAt`], as in the fused kernels of a plan.

use super::{reads_writes, Buf, Code};
use crate::fusion::Instr;
use anvil_core::{Arith, Block, BlockAt, BlockMut, DType, Error, Result, TensorType};
use anvil_ops::elementwise::Width;
use std::collections::{BTreeMap, BTreeSet};

/// One instruction of a run, on registers: its result register is `out`.
#[derive(Debug)]
enum Lane {
    /// `f64` arithmetic.
    Arith { op: Arithmetic, out: usize },
    /// Block math over a chunk (`shape`: the value's shape, for its position).
    Math { instr: Instr, args: Vec<usize>, out: usize, shape: Vec<usize> },
}

/// The arithmetic of a [`Lane`], on registers `a` and `b` or with a
/// constant `k` (a scalar broadcast, not loaded).
#[derive(Debug)]
enum Arithmetic {
    /// `a + b`.
    Add { a: usize, b: usize },
    /// `a - b`.
    Sub { a: usize, b: usize },
    /// `a * b`.
    Mul { a: usize, b: usize },
    /// `a / b`.
    Div { a: usize, b: usize },
    /// `-a`.
    Neg { a: usize },
    /// `a + k`.
    AddK { a: usize, k: f64 },
    /// `k + a`.
    KAdd { a: usize, k: f64 },
    /// `a - k`.
    SubK { a: usize, k: f64 },
    /// `k - a`.
    KSub { a: usize, k: f64 },
    /// `a * k`.
    MulK { a: usize, k: f64 },
    /// `k * a`.
    KMul { a: usize, k: f64 },
    /// `a / k`.
    DivK { a: usize, k: f64 },
    /// `k / a`.
    KDiv { a: usize, k: f64 },
}

/// Evaluates an [`Arithmetic`] through `$two!(a, b, f)` (two registers) or
/// `$one!(a, f)` (one register), `f` the operation on one lane (holding the
/// constant, if any): the one table of the run's arithmetic, for both ways
/// a chunk computes (by value, in place).
macro_rules! arithmetic {
    ($op:expr, $two:ident, $one:ident) => {
        match *$op {
            Arithmetic::Add { a, b } => $two!(a, b, |p: f64, q: f64| p + q),
            Arithmetic::Sub { a, b } => $two!(a, b, |p: f64, q: f64| p - q),
            Arithmetic::Mul { a, b } => $two!(a, b, |p: f64, q: f64| p * q),
            Arithmetic::Div { a, b } => $two!(a, b, |p: f64, q: f64| p / q),
            Arithmetic::Neg { a } => $one!(a, |p: f64| -p),
            Arithmetic::AddK { a, k } => $one!(a, |p: f64| p + k),
            Arithmetic::KAdd { a, k } => $one!(a, |p: f64| k + p),
            Arithmetic::SubK { a, k } => $one!(a, |p: f64| p - k),
            Arithmetic::KSub { a, k } => $one!(a, |p: f64| k - p),
            Arithmetic::MulK { a, k } => $one!(a, |p: f64| p * k),
            Arithmetic::KMul { a, k } => $one!(a, |p: f64| k * p),
            Arithmetic::DivK { a, k } => $one!(a, |p: f64| p / k),
            Arithmetic::KDiv { a, k } => $one!(a, |p: f64| k / p),
        }
    };
}

/// Elementwise `f64` instructions over values of one length, evaluated
/// chunk by chunk on registers.
#[derive(Debug)]
pub(super) struct Run {
    /// Elements of every value of the run.
    len: usize,
    /// Per operand read from outside the run: its slot and register.
    loads: Vec<(usize, usize)>,
    /// Per register, the slot it is loaded from, if it is an operand read
    /// from outside the run.
    sources: Vec<Option<usize>>,
    /// The instructions, in an order that respects their dependencies.
    lanes: Vec<Lane>,
    /// Per value read outside the run: its register and slot.
    stores: Vec<(usize, usize)>,
    /// Registers used.
    regs: usize,
}

/// The most registers a run may use to take chunks of 128 lanes (24 KiB).
const WIDER_REGS: usize = 24;

/// Register files of the lane widths a run uses, grown once to the largest
/// run (no allocation per step).
#[derive(Debug, Default)]
pub(super) struct Registers {
    one: Vec<[f64; 1]>,
    four: Vec<[f64; 4]>,
    eight: Vec<[f64; 8]>,
    wide: Vec<[f64; 32]>,
    wider: Vec<[f64; 128]>,
}

impl Lane {
    /// The register the instruction writes.
    fn out(&self) -> usize {
        match *self {
            Lane::Arith { out, .. } | Lane::Math { out, .. } => out,
        }
    }
}

impl Run {
    /// The slots the run reads and writes.
    pub(super) fn reads_writes(&self) -> (Vec<usize>, Vec<usize>) {
        (self.loads.iter().map(|l| l.0).collect(), self.stores.iter().map(|s| s.1).collect())
    }

    /// Instructions fused, and how many of them take a constant operand
    /// as an immediate.
    #[cfg(test)]
    pub(super) fn size(&self) -> (usize, usize) {
        let immediate = self
            .lanes
            .iter()
            .filter(|l| {
                matches!(
                    l,
                    Lane::Arith {
                        op: Arithmetic::AddK { .. }
                            | Arithmetic::KAdd { .. }
                            | Arithmetic::SubK { .. }
                            | Arithmetic::KSub { .. }
                            | Arithmetic::MulK { .. }
                            | Arithmetic::KMul { .. }
                            | Arithmetic::DivK { .. }
                            | Arithmetic::KDiv { .. },
                        ..
                    }
                )
            })
            .count();
        (self.lanes.len(), immediate)
    }

    /// Runs the instructions over every element, in chunks of a lane width
    /// that suits the length (one chunk for a vector of up to 16 elements,
    /// chunks of 32 or 128 beyond),
    /// compiled for AVX2 when the CPU has it ([`lanes_width`]).
    ///
    /// # Errors
    /// A buffer of another dtype or length than compiled for; an op's
    /// block-math error.
    pub(super) fn exec(&self, bufs: &mut [Buf], regs: &mut Registers) -> Result<()> {
        anvil_ops::at_width!(
            lanes_width(),
            fn(run: &Run = self, bufs: &mut [Buf] = bufs, regs: &mut Registers = regs) -> Result<()> {
                run.exec_any(bufs, regs)
            }
        )
    }

    #[inline(always)]
    fn exec_any(&self, bufs: &mut [Buf], regs: &mut Registers) -> Result<()> {
        match self.len {
            1 => self.lanes_of(bufs, &mut regs.one),
            2..=4 => self.lanes_of(bufs, &mut regs.four),
            5..=16 => self.lanes_of(bufs, &mut regs.eight),
            // Long values in chunks of 128 when the registers fit in half
            // of L1 (each is 1 KiB): a quarter of the dispatches and of the
            // block-math calls of 32-lane chunks (W9 at d = 128, values of
            // 128: 2.07–2.15 ms a call against 2.20–2.22 ms, runner A/B).
            97.. if self.regs <= WIDER_REGS => self.lanes_of(bufs, &mut regs.wider),
            _ => self.lanes_of(bufs, &mut regs.wide),
        }
    }

    #[inline(always)]
    fn lanes_of<const W: usize>(&self, bufs: &mut [Buf], file: &mut Vec<[f64; W]>) -> Result<()> {
        if file.len() < self.regs {
            file.resize(self.regs, [0.0; W]);
        }
        let regs = &mut file[..self.regs];
        let bad = || Error::invalid("micro", "fused run", "a buffer of another dtype or length");
        let mut c = 0;
        while c < self.len {
            // The last chunk may be partial: lanes past `w` hold stale
            // values, computed on but never stored.
            let w = W.min(self.len - c);
            // Operands of a whole chunk of 32 or more lanes are read where
            // they are; shorter or partial chunks copy them into registers
            // (for 8 lanes the copy costs less than finding the buffer at
            // every read: W9 at d = 8 took 20% longer reading in place).
            let direct = w == W && W >= DIRECT;
            for &(slot, r) in &self.loads {
                let Buf::F64(v) = &bufs[slot] else { return Err(bad()) };
                let src = v.get(c..c + w).ok_or_else(bad)?;
                if !direct {
                    copy(&mut regs[r], src);
                }
            }
            for lane in &self.lanes {
                // Each register is written by one instruction and never
                // read by it (`fuse` gives every slot its own register), so
                // from 32 lanes on the output is borrowed apart from the
                // operands and written in place: a loop over a fixed number
                // of lanes that compiles to a few vector instructions, with
                // no whole-register copies. Shorter chunks go by value.
                if let (Lane::Arith { op, out }, true) = (lane, W < DIRECT) {
                    by_value(regs, op, *out);
                    continue;
                }
                let (out, rest) = split(regs, lane.out());
                let rest =
                    Operands { regs: rest, bufs, sources: &self.sources, at: direct.then_some(c) };
                match lane {
                    Lane::Arith { op, .. } => {
                        macro_rules! two {
                            ($a:expr, $b:expr, $f:expr) => {
                                zip(out, rest.get($a), rest.get($b), $f)
                            };
                        }
                        macro_rules! one {
                            ($a:expr, $f:expr) => {
                                map(out, rest.get($a), $f)
                            };
                        }
                        arithmetic!(op, two, one)
                    }
                    Lane::Math { instr, args, shape, .. } => {
                        let at = BlockAt { start: c, shape };
                        let r = |k: usize| Block::F64(&rest.get(args[k])[..w]);
                        let o = BlockMut::F64(&mut out[..w]);
                        match args.len() {
                            1 => instr.eval(&[r(0)], o, at)?,
                            2 => instr.eval(&[r(0), r(1)], o, at)?,
                            3 => instr.eval(&[r(0), r(1), r(2)], o, at)?,
                            _ => {
                                let blocks: Vec<Block<'_>> = (0..args.len()).map(r).collect();
                                instr.eval(&blocks, o, at)?
                            }
                        }
                    }
                }
            }
            for &(r, slot) in &self.stores {
                let Buf::F64(v) = &mut bufs[slot] else { return Err(bad()) };
                store(&regs[r], v.get_mut(c..c + w).ok_or_else(bad)?);
            }
            c += W;
        }
        Ok(())
    }
}

/// The vector width the lane loops ([`Run::exec`]) and the small matrix
/// products (`micro::matmul_f64`) run at: AVX2 when the CPU has it, never
/// wider. The crate is built for baseline x86-64 (SSE2); AVX2 runs a
/// register of 8 lanes in half the instructions, and AVX-512 was not
/// faster on these short loops. Without FMA contraction (Rust never
/// contracts `a * b + c`), every width gives the same bits.
#[inline]
pub(super) fn lanes_width() -> Width {
    #[cfg(test)]
    if GENERIC.with(std::cell::Cell::get) {
        return Width::Base;
    }
    Width::detect().min(Width::Avx2)
}

#[cfg(test)]
thread_local! {
    /// Tests: run the baseline copies on this thread.
    static GENERIC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Tests: whether this thread runs the baseline copies rather than the
/// AVX2 ones.
#[cfg(test)]
pub(super) fn force_generic(on: bool) {
    GENERIC.with(|g| g.set(on));
}

/// `reg[..src.len()] = src`: a whole register in a few moves (the partial
/// chunk apart, so that the compiler does not merge both into a call to
/// `memcpy` of a variable length).
#[inline(always)]
fn copy<const W: usize>(reg: &mut [f64; W], src: &[f64]) {
    match <&[f64; W]>::try_from(src) {
        Ok(full) => *reg = *full,
        Err(_) => copy_part(reg, src),
    }
}

/// `dst = reg[..dst.len()]`, as [`copy`].
#[inline(always)]
fn store<const W: usize>(reg: &[f64; W], dst: &mut [f64]) {
    match <&mut [f64; W]>::try_from(&mut *dst) {
        Ok(full) => *full = *reg,
        Err(_) => copy_part(dst, reg),
    }
}

/// The first elements of `src` into `dst` (a partial chunk).
#[cold]
#[inline(never)]
fn copy_part(dst: &mut [f64], src: &[f64]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// `regs[out] = op` on short registers (at most 8 lanes), by value: they
/// live in vector registers, and this is cheaper than borrowing the output
/// apart (see [`DIRECT`]).
#[inline(always)]
fn by_value<const W: usize>(regs: &mut [[f64; W]], op: &Arithmetic, out: usize) {
    macro_rules! two {
        ($a:expr, $b:expr, $f:expr) => {{
            let (x, y, f) = (regs[$a], regs[$b], $f);
            regs[out] = std::array::from_fn(|l| f(x[l], y[l]));
        }};
    }
    macro_rules! one {
        ($a:expr, $f:expr) => {
            regs[out] = regs[$a].map($f)
        };
    }
    arithmetic!(op, two, one)
}

/// `out = f(x, y)` lane by lane.
#[inline(always)]
fn zip<const W: usize>(
    out: &mut [f64; W],
    x: &[f64; W],
    y: &[f64; W],
    f: impl Fn(f64, f64) -> f64,
) {
    for l in 0..W {
        out[l] = f(x[l], y[l]);
    }
}

/// `out = f(x)` lane by lane.
#[inline(always)]
fn map<const W: usize>(out: &mut [f64; W], x: &[f64; W], f: impl Fn(f64) -> f64) {
    for l in 0..W {
        out[l] = f(x[l]);
    }
}

/// The registers other than one being written.
struct Others<'a, const W: usize> {
    below: &'a [[f64; W]],
    above: &'a [[f64; W]],
}

impl<const W: usize> Others<'_, W> {
    /// Register `r` (not the one written).
    #[inline(always)]
    fn get(&self, r: usize) -> &[f64; W] {
        let below = self.below.len();
        if r < below {
            &self.below[r]
        } else {
            &self.above[r - below - 1]
        }
    }
}

/// The fewest lanes of a chunk whose instructions write their results in
/// place and whose operands from outside the run are read in their buffers
/// (shorter chunks compute by value on copies).
const DIRECT: usize = 32;

/// The operands of an instruction: registers other than the one written,
/// and for a whole chunk, the buffers of the run's loaded operands.
struct Operands<'a, const W: usize> {
    regs: Others<'a, W>,
    bufs: &'a [Buf],
    sources: &'a [Option<usize>],
    /// The chunk's first element when the chunk is whole.
    at: Option<usize>,
}

impl<const W: usize> Operands<'_, W> {
    /// Register `r`'s lanes: in its operand's buffer when it is a loaded
    /// operand of a whole chunk (checked before the chunk runs), otherwise
    /// in the register.
    #[inline(always)]
    fn get(&self, r: usize) -> &[f64; W] {
        if W < DIRECT {
            return self.regs.get(r);
        }
        if let (Some(c), Some(Some(slot))) = (self.at, self.sources.get(r)) {
            if let Some(Buf::F64(v)) = self.bufs.get(*slot) {
                if let Some(lanes) = v.get(c..c + W).and_then(|x| <&[f64; W]>::try_from(x).ok()) {
                    return lanes;
                }
            }
        }
        self.regs.get(r)
    }
}

/// Register `out`, mutable, and the others to read.
#[inline(always)]
fn split<const W: usize>(regs: &mut [[f64; W]], out: usize) -> (&mut [f64; W], Others<'_, W>) {
    let (below, rest) = regs.split_at_mut(out);
    let (out, above) = rest.split_first_mut().expect("a run's registers cover its instructions");
    (out, Others { below, above })
}

/// The length of the values an instruction computes element by element in
/// `f64`, if it can join a run.
fn lane_len(c: &Code, types: &[TensorType]) -> Option<usize> {
    match c {
        Code::Arith { out, .. } => Some(types[*out].numel()),
        Code::Elementwise { args, out, .. } => {
            let n = types[*out].numel();
            let f64_of_n = |s: usize| types[s].dtype() == DType::F64 && types[s].numel() == n;
            (f64_of_n(*out) && args.iter().all(|&a| f64_of_n(a))).then_some(n)
        }
        _ => None,
    }
}

/// Reorders `code` (per-step code in dependency order, every slot written
/// once) so that elementwise instructions of one length run back to back,
/// and fuses each such run of two or more into one [`Run`]. `outputs` are
/// the program's output slots (always stored); `known[s]` is the value of
/// every element of slot `s` when it is a constant set before the steps (a
/// scalar broadcast), which arithmetic then takes as an immediate rather
/// than loading it. Code with a slot written twice, or read before it is
/// written, is returned as it is.
pub(super) fn fuse(
    code: Vec<Code>,
    types: &[TensorType],
    outputs: &[usize],
    known: &[Option<f64>],
) -> Vec<Code> {
    let n = code.len();
    let rw: Vec<(Vec<usize>, Vec<usize>)> = code.iter().map(reads_writes).collect();
    let mut producer: Vec<Option<usize>> = vec![None; types.len()];
    for (i, (_, writes)) in rw.iter().enumerate() {
        for &s in writes {
            if producer[s].replace(i).is_some() {
                return code;
            }
        }
    }
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); types.len()];
    let mut waiting = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (reads, _)) in rw.iter().enumerate() {
        let mut deps = Vec::new();
        for &s in reads {
            readers[s].push(i);
            match producer[s] {
                Some(p) if p >= i => return code,
                Some(p) => deps.push(p),
                None => {}
            }
        }
        deps.sort_unstable();
        deps.dedup();
        waiting[i] = deps.len();
        for p in deps {
            users[p].push(i);
        }
    }
    // List scheduling: elementwise instructions of the open run's length
    // first, then any ready elementwise one (a new run), and only when none
    // is ready, every ready other instruction (so that independent
    // products do not split a run).
    let lens: Vec<Option<usize>> = code.iter().map(|c| lane_len(c, types)).collect();
    let mut ready = Ready::default();
    (0..n).filter(|&i| waiting[i] == 0).for_each(|i| ready.add(i, lens[i]));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut open: Option<usize> = None;
    let mut done = 0;
    while done < n {
        let same = open.and_then(|len| ready.lanes.get(&len)?.first().copied());
        let picked: Vec<usize> = if let Some(i) = same {
            groups.last_mut().into_iter().for_each(|g| g.push(i));
            vec![i]
        } else if let Some(i) = ready.lanes.values().filter_map(|s| s.first().copied()).min() {
            open = lens[i];
            groups.push(vec![i]);
            vec![i]
        } else {
            open = None;
            let all: Vec<usize> = std::mem::take(&mut ready.other).into_iter().collect();
            if all.is_empty() {
                // A cycle: cannot happen in dependency-ordered code.
                return code;
            }
            groups.extend(all.iter().map(|&i| vec![i]));
            all
        };
        for i in picked {
            ready.remove(i, lens[i]);
            done += 1;
            for &u in &users[i] {
                waiting[u] -= 1;
                if waiting[u] == 0 {
                    ready.add(u, lens[u]);
                }
            }
        }
    }
    let mut code: Vec<Option<Code>> = code.into_iter().map(Some).collect();
    let mut group_of = vec![usize::MAX; n];
    for (g, members) in groups.iter().enumerate() {
        members.iter().for_each(|&i| group_of[i] = g);
    }
    let mut out = Vec::with_capacity(groups.len());
    for (g, members) in groups.iter().enumerate() {
        if members.len() < 2 {
            out.extend(members.iter().filter_map(|&i| code[i].take()));
            continue;
        }
        let len = lens[members[0]].unwrap_or(0);
        let mut reg_of: BTreeMap<usize, usize> = BTreeMap::new();
        let (mut loads, mut lanes, mut stores) = (Vec::new(), Vec::new(), Vec::new());
        let mut reg = |s: usize, loads: &mut Vec<(usize, usize)>| {
            let next = reg_of.len();
            *reg_of.entry(s).or_insert_with(|| {
                loads.push((s, next));
                next
            })
        };
        for &i in members {
            let Some(c) = code[i].take() else { continue };
            let (lane, written) = match c {
                Code::Arith { f, a, b, out: slot } => {
                    let k = |s: usize| known.get(s).copied().flatten();
                    let (op, out) = match (f, k(a), k(b)) {
                        (Arith::Neg, _, _) => {
                            let a = reg(a, &mut loads);
                            (Arithmetic::Neg { a }, reg(slot, &mut Vec::new()))
                        }
                        (_, None, Some(k)) => {
                            let a = reg(a, &mut loads);
                            let out = reg(slot, &mut Vec::new());
                            let op = match f {
                                Arith::Add => Arithmetic::AddK { a, k },
                                Arith::Sub => Arithmetic::SubK { a, k },
                                Arith::Mul => Arithmetic::MulK { a, k },
                                _ => Arithmetic::DivK { a, k },
                            };
                            (op, out)
                        }
                        (_, Some(k), None) => {
                            let a = reg(b, &mut loads);
                            let out = reg(slot, &mut Vec::new());
                            let op = match f {
                                Arith::Add => Arithmetic::KAdd { a, k },
                                Arith::Sub => Arithmetic::KSub { a, k },
                                Arith::Mul => Arithmetic::KMul { a, k },
                                _ => Arithmetic::KDiv { a, k },
                            };
                            (op, out)
                        }
                        _ => {
                            let (a, b) = (reg(a, &mut loads), reg(b, &mut loads));
                            let out = reg(slot, &mut Vec::new());
                            let op = match f {
                                Arith::Add => Arithmetic::Add { a, b },
                                Arith::Sub => Arithmetic::Sub { a, b },
                                Arith::Mul => Arithmetic::Mul { a, b },
                                _ => Arithmetic::Div { a, b },
                            };
                            (op, out)
                        }
                    };
                    (Lane::Arith { op, out }, slot)
                }
                Code::Elementwise { instr, args, out, shape } => {
                    let args = args.iter().map(|&s| reg(s, &mut loads)).collect();
                    (Lane::Math { instr, args, out: reg(out, &mut Vec::new()), shape }, out)
                }
                other => {
                    // Only elementwise instructions are grouped (`lane_len`).
                    out.push(other);
                    continue;
                }
            };
            let outside = readers[written].iter().any(|&r| group_of[r] != g);
            if outside || outputs.contains(&written) {
                stores.push((reg(written, &mut Vec::new()), written));
            }
            lanes.push(lane);
        }
        let regs = reg_of.len();
        let mut sources = vec![None; regs];
        loads.iter().for_each(|&(slot, r)| sources[r] = Some(slot));
        out.push(Code::Run(Box::new(Run { len, loads, sources, lanes, stores, regs })));
    }
    out
}

/// The instructions whose operands are all computed, elementwise ones by
/// length.
#[derive(Default)]
struct Ready {
    lanes: BTreeMap<usize, BTreeSet<usize>>,
    other: BTreeSet<usize>,
}

impl Ready {
    fn add(&mut self, i: usize, len: Option<usize>) {
        match len {
            Some(len) => {
                self.lanes.entry(len).or_default().insert(i);
            }
            None => {
                self.other.insert(i);
            }
        }
    }

    fn remove(&mut self, i: usize, len: Option<usize>) {
        if let Some(len) = len {
            if let Some(set) = self.lanes.get_mut(&len) {
                set.remove(&i);
                if set.is_empty() {
                    self.lanes.remove(&len);
                }
            }
        }
    }
}
