//! A masked `while` loop ([`While::masked`], what `vmap` makes of a loop
//! whose predicate depends on the batch) whose body is elementwise, run
//! lane group by lane group.
//!
//! Run as a plan, such a loop makes one pass over the whole batch per step
//! and per fused group of its body, and steps until the slowest lane is
//! done. Its lanes are independent, and a lane whose flag is clear keeps its
//! carries, so each group of [`LANES`] lanes can run the whole loop on its
//! own: its carries stay in registers of one block (in the cache) from the
//! first step to the last, every step is one pass of the body's block math
//! over them, and a group stops as soon as its own lanes are done. The
//! results are the same, lane for lane.
//!
//! The body qualifies when every value it computes is elementwise over one
//! shape (the carries' and the flag's), and every operand it reads is of
//! that shape or a single element (a scalar constant, a broadcast one).

use crate::fusion::{in_place, Instr};
use crate::Parallelism;
use anvil_core::{
    Arith, Block, BlockAt, BlockMut, Compare, DType, Error, Evaluator, Graph, Op, Result, Storage,
    Tensor, TensorType,
};
use anvil_ops::elementwise::{
    f64_arith_loop, f64_compare_loop, select_bool, select_f64, Abs, CompareMath, F64BinaryLoop,
    F64CompareLoop, Width,
};
use anvil_ops::while_loop::While;
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Lanes per group at most: the width of every register. Each instruction
/// is a pass over a group, so a wider group spreads its dispatch over more
/// lanes, as long as the group's registers stay in the core's L2 cache
/// (see [`GROUP_BYTES`]). W13's masked Newton loop (B = 10⁵, twenty
/// registers) on a Zen 3 VM: 1.66 ms a call with groups of 128, 1.32 ms
/// with 256, 1.25 ms with 512 (session 26); after session 28's fused
/// tests, 1.00 ms with 512, 0.94 ms with 1024, 1.24 ms with 2048.
pub const LANES: usize = 1024;

/// Bytes of registers and operand blocks a group may span (its lanes times
/// the bytes each lane has in them), within the L2 cache of a core (256
/// KiB and more on current x86 cores) with room for what streams through.
const GROUP_BYTES: usize = 160 * 1024;

/// Lanes of the narrowest group: a whole number of the widest vector
/// strips (128 lanes, AVX-512).
const MIN_GROUP: usize = 128;

/// Lanes per parallel task (several groups).
const TASK_LANES: usize = 4096;

/// Operands of one instruction read without an allocation.
const INLINE_ARGS: usize = 4;

/// Where an instruction's operand lives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Loc {
    /// A register (a carry, a computed value, a spread scalar).
    Reg(usize),
    /// A leaf of the lanes' shape (a loop operand or a constant), read in
    /// place: its group's block is found once per group, not per step.
    Leaf(usize),
}

/// A leaf of the lanes' shape.
#[derive(Debug)]
enum Leaf {
    /// The loop operand of this index.
    Input(usize),
    /// A constant of the body.
    Value(Tensor),
}

/// One instruction of the body: its kernel, its operands and its result
/// register (never one of its operands).
#[derive(Debug)]
struct Step {
    kernel: Kernel,
    args: Vec<Loc>,
    out: usize,
}

/// How an instruction runs on a group.
#[derive(Debug)]
enum Kernel {
    /// Binary `f64` arithmetic (the op's [`Arith`] fact): the loop is
    /// resolved once, so a step costs no dispatch through the op's block
    /// math (most of a small group's time otherwise).
    F64Binary(F64BinaryLoop, Arith),
    /// Consecutive `f64` arithmetic steps, each reading the one before it
    /// and read by nothing else, perhaps ending in the select of a carry
    /// update, run in one pass (see [`Chain`]). Operands: the chain's
    /// `f64` ones, then a pick's mask.
    F64Chain(Chain, Scalars),
    /// A comparison of two `f64` operands to `bool` (the op's
    /// [`Compare`] fact), by its resolved loop.
    F64Compare(F64CompareLoop, Compare),
    /// A unary `f64` op by the loop it declares ([`Op::f64_map`]).
    F64Map(anvil_core::op::F64Map),
    /// [`Abs`] by the loop it declares (a [`Test`] can take it in).
    Abs(anvil_core::op::F64Map),
    /// A comparison that took in the absolute value before it or the
    /// select after it (see [`Test`]). Operands: the comparison's two, then
    /// a pick's other branch and mask; the second comparison operand may be
    /// a spread scalar (bit 1).
    Test(Test, Scalars),
    /// A select ([`Op::is_select`]) of `f64` or of `bool` branches.
    Select,
    /// The op's block math.
    Block(Instr),
}

/// Which operands of a [`Chain`] or a [`Test`] are single elements spread
/// over a register (bit `k`: operand `k`): the AVX2 loops broadcast them
/// instead of loading a register's worth of copies (the other loops read
/// the register, which holds the same value in every element).
type Scalars = u16;

/// `f64` operands of a [`Chain`] at most (its first step's two, one per
/// link, and a pick's other branch; a pick's mask comes on top).
const CHAIN_ARGS: usize = 8;

/// Lanes a chain carries through all its links at once (a strip small
/// enough to stay in vector registers or the first cache lines).
const STRIP: usize = 32;

/// A chain of `f64` arithmetic: `acc = args[0] ∘ args[1]`, then per link
/// `k`, `acc = acc ∘ args[2 + k]` (or `args[2 + k] ∘ acc`); with a
/// [`pick`](Chain::pick), then `acc = if mask == keep { acc } else { other }`
/// (`other` the last operand). Run strip by
/// strip, it reads each operand once and writes only the last result, where
/// the steps one by one would write and read back every intermediate. Each
/// element sees the same operations in the same order: the same bits.
#[derive(Clone, Debug, PartialEq)]
struct Chain {
    first: Arith,
    /// Per link: its operation and whether the running value is its left
    /// operand.
    links: Vec<(Arith, bool)>,
    /// A select that ends the chain, as a masked loop's carry update
    /// (`select(flag, new, old)`) is: the running value is kept where the
    /// mask is `keep`, and the chain's last operand is taken elsewhere.
    pick: Option<bool>,
}

impl Chain {
    /// How many `f64` operands the chain reads.
    fn operands(&self) -> usize {
        2 + self.links.len() + usize::from(self.pick.is_some())
    }

    /// Runs the chain on `args` ([`operands`](Chain::operands) slices of
    /// `out`'s length) and, with a pick, `mask` (of `out`'s length; empty
    /// otherwise) at the widest width the CPU has.
    /// Operands named by `scalars` hold one value in every element.
    fn run(&self, args: &[&[f64]], mask: &[bool], out: &mut [f64], scalars: Scalars) {
        self.run_at(Width::detect(), args, mask, out, scalars);
    }

    /// Runs the chain with the vector instructions of `w` (the baseline
    /// loop when the CPU lacks them).
    fn run_at(&self, w: Width, args: &[&[f64]], mask: &[bool], out: &mut [f64], scalars: Scalars) {
        let mut from = 0;
        #[cfg(target_arch = "x86_64")]
        if w == Width::Avx512
            && w <= Width::detect()
            && args.len() == self.operands()
            && args.iter().all(|a| a.len() >= out.len())
            && (self.pick.is_none() || mask.len() >= out.len())
        {
            // SAFETY: `detect` lists AVX-512 only when the CPU has it (F,
            // BW, VL, DQ); the chain's operands are all there, each of at
            // least `out.len()` elements, and so is the mask of a pick
            // (checked just above).
            from = unsafe { wide::chain(self, args, mask, out) };
        }
        #[cfg(target_arch = "x86_64")]
        if w == Width::Avx2
            && w <= Width::detect()
            && args.len() == self.operands()
            && args.iter().all(|a| a.len() >= out.len())
            && (self.pick.is_none() || mask.len() >= out.len())
        {
            // SAFETY: `detect` lists AVX2 only when the CPU has it; the
            // operands and the mask are checked as for AVX-512 above (a
            // scalar operand is at least one element: every operand is as
            // long as `out`, which has a strip).
            from = unsafe { wide2::chain(self, args, mask, out, scalars) };
        }
        if from == out.len() {
            // Whole strips only (a group of `LANES` lanes): no remainder to
            // dispatch.
            return;
        }
        anvil_ops::at_width!(
            w,
            fn(chain: &Chain = self, args: &[&[f64]] = args, mask: &[bool] = mask, out: &mut [f64] = out, from: usize = from) {
                chain.strips(args, mask, out, from)
            }
        )
    }

    /// The chain over `out[from..]`, strip by strip.
    #[inline(always)]
    fn strips(&self, args: &[&[f64]], mask: &[bool], out: &mut [f64], from: usize) {
        let mut start = from;
        while start + STRIP <= out.len() {
            // Strips of a constant length: the running values stay in
            // vector registers.
            let mut acc = [0.0f64; STRIP];
            self.strip(args, mask, start, &mut acc);
            out[start..start + STRIP].copy_from_slice(&acc);
            start += STRIP;
        }
        let m = out.len() - start;
        let mut acc = [0.0f64; STRIP];
        self.strip(args, mask, start, &mut acc[..m]);
        out[start..].copy_from_slice(&acc[..m]);
    }

    /// The chain on the `acc.len()` lanes from `start`.
    #[inline(always)]
    fn strip(&self, args: &[&[f64]], mask: &[bool], start: usize, acc: &mut [f64]) {
        let end = start + acc.len();
        for (a, &x) in acc.iter_mut().zip(&args[0][start..end]) {
            *a = x;
        }
        apply(self.first, true, acc, &args[1][start..end]);
        for (k, &(op, left)) in self.links.iter().enumerate() {
            apply(op, left, acc, &args[2 + k][start..end]);
        }
        if let Some(keep) = self.pick {
            let other = &args[2 + self.links.len()][start..end];
            for ((a, &o), &m) in acc.iter_mut().zip(other).zip(&mask[start..end]) {
                if m != keep {
                    *a = o;
                }
            }
        }
    }
}

/// Chains in strips of 128 lanes held in sixteen AVX-512
/// registers: a quarter of the dispatches per link of [`STRIP`]-lane strips
/// (an array that long in generic code lives on the stack; these registers
/// do not).
#[cfg(target_arch = "x86_64")]
#[rustversion::since(1.89)]
mod wide {
    use super::{Arith, Chain};
    use std::arch::x86_64::*;

    /// Registers of a strip.
    const V: usize = 16;
    /// Lanes of a strip.
    pub(super) const LANES: usize = 8 * V;

    /// `acc[v] = acc[v] ∘ x[v]` (`true`) or `x[v] ∘ acc[v]` (`false`) for
    /// every register `v` of a strip, by the intrinsic `$f`: the same IEEE
    /// operation, operands in the same order, as the generic links. A
    /// macro, so that the whole strip is one function whose registers the
    /// compiler keeps out of memory.
    macro_rules! each {
        ($acc:ident, $x:ident, $f:ident, true) => {
            for (v, r) in $acc.iter_mut().enumerate() {
                // SAFETY: `$x` covers the strip's `LANES` elements.
                *r = $f(*r, unsafe { _mm512_loadu_pd($x.add(8 * v)) });
            }
        };
        ($acc:ident, $x:ident, $f:ident, false) => {
            for (v, r) in $acc.iter_mut().enumerate() {
                // SAFETY: as above.
                *r = $f(unsafe { _mm512_loadu_pd($x.add(8 * v)) }, *r);
            }
        };
    }

    /// One link over a strip: the operation resolved once, then applied to
    /// every register.
    macro_rules! link {
        ($acc:ident, $o:expr, $left:expr, $x:ident) => {
            match ($o, $left) {
                (Arith::Add, true) => each!($acc, $x, _mm512_add_pd, true),
                (Arith::Add, false) => each!($acc, $x, _mm512_add_pd, false),
                (Arith::Sub, true) => each!($acc, $x, _mm512_sub_pd, true),
                (Arith::Sub, false) => each!($acc, $x, _mm512_sub_pd, false),
                (Arith::Mul, true) => each!($acc, $x, _mm512_mul_pd, true),
                (Arith::Mul, false) => each!($acc, $x, _mm512_mul_pd, false),
                (Arith::Div, true) => each!($acc, $x, _mm512_div_pd, true),
                (Arith::Div, false) => each!($acc, $x, _mm512_div_pd, false),
                // Flips the sign bit, as `-p` does.
                (Arith::Neg, _) => {
                    let sign = _mm512_set1_epi64(i64::MIN);
                    for r in $acc.iter_mut() {
                        *r = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(*r), sign));
                    }
                }
            }
        };
    }

    /// Stores a strip through a chain's pick: each register keeps its
    /// lanes whose flag is `$keep` and takes `$other`'s elsewhere. Sixteen
    /// flags (bytes of 0 or 1) make the masks of two registers.
    macro_rules! store_picked {
        ($acc:ident, $other:ident, $flags:ident, $dst:ident, $keep:literal) => {
            for p in 0..V / 2 {
                // SAFETY: `$flags`, `$other` and `$dst` cover the strip's
                // `LANES` elements.
                let bytes = unsafe { _mm_loadu_si128($flags.add(16 * p).cast()) };
                let set = _mm_test_epi8_mask(bytes, bytes);
                for (h, k) in [(0, set as u8), (1, (set >> 8) as u8)] {
                    let v = 2 * p + h;
                    let o = unsafe { _mm512_loadu_pd($other.add(8 * v)) };
                    // `blend(k, a, b)` takes `b` where `k` is set.
                    let r = if $keep {
                        _mm512_mask_blend_pd(k, o, $acc[v])
                    } else {
                        _mm512_mask_blend_pd(k, $acc[v], o)
                    };
                    unsafe { _mm512_storeu_pd($dst.add(8 * v), r) };
                }
            }
        };
    }

    /// Runs `chain` over the whole strips at the start of `out`; returns
    /// how many lanes it wrote (a multiple of [`LANES`]).
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VL; `args` has the chain's operands
    /// ([`Chain::operands`]), each of at least `out.len()` elements, and
    /// `mask` as many when the chain has a pick.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn chain(
        chain: &Chain,
        args: &[&[f64]],
        mask: &[bool],
        out: &mut [f64],
    ) -> usize {
        let done = out.len() / LANES * LANES;
        let mut start = 0;
        while start < done {
            // SAFETY (every pointer below): `start + LANES <= done`, which
            // is at most every operand's length and `out`'s.
            let mut acc = [_mm512_setzero_pd(); V];
            let first = unsafe { args[0].as_ptr().add(start) };
            for (v, r) in acc.iter_mut().enumerate() {
                *r = unsafe { _mm512_loadu_pd(first.add(8 * v)) };
            }
            let second = unsafe { args[1].as_ptr().add(start) };
            link!(acc, chain.first, true, second);
            for (k, &(o, left)) in chain.links.iter().enumerate() {
                let x = unsafe { args[2 + k].as_ptr().add(start) };
                link!(acc, o, left, x);
            }
            let dst = unsafe { out.as_mut_ptr().add(start) };
            match chain.pick {
                Some(keep) => {
                    let other = unsafe { args[2 + chain.links.len()].as_ptr().add(start) };
                    let flags = unsafe { mask.as_ptr().add(start) };
                    if keep {
                        store_picked!(acc, other, flags, dst, true);
                    } else {
                        store_picked!(acc, other, flags, dst, false);
                    }
                }
                None => {
                    for (v, r) in acc.iter().enumerate() {
                        unsafe { _mm512_storeu_pd(dst.add(8 * v), *r) };
                    }
                }
            }
            start += LANES;
        }
        done
    }
}

/// Compilers before 1.89 (the AVX-512 intrinsics are not stable there):
/// every strip is a generic one.
#[cfg(target_arch = "x86_64")]
#[rustversion::before(1.89)]
mod wide {
    /// # Safety
    /// None needed: writes nothing.
    pub(super) unsafe fn chain(_: &super::Chain, _: &[&[f64]], _: &[bool], _: &mut [f64]) -> usize {
        0
    }
}

/// Chains in strips of 32 lanes held in eight AVX2 registers, for CPUs
/// without AVX-512: as [`wide`], four lanes a register (on a Zen 3 VM,
/// W13's masked Newton loop went from 2.45–2.65 ms with the generic strips
/// to the figure in `BENCHMARKS.md`, session 24). The other eight of the
/// sixteen registers hold the loads and the pick's masks: a strip of 64
/// lanes in all sixteen spilled to the stack, and W13's loop took about 4 %
/// longer (session 28).
#[cfg(target_arch = "x86_64")]
mod wide2 {
    use super::{Arith, Chain};
    use std::arch::x86_64::*;

    /// Registers of a strip.
    const V: usize = 8;
    /// Lanes of a strip.
    pub(super) const LANES: usize = 4 * V;

    /// `acc[v] = acc[v] ∘ x` (`true`) or `x ∘ acc[v]` (`false`) for every
    /// register `v` of a strip, by the intrinsic `$f`, where `x` is
    /// `$x(v, acc[v])`: a load of the operand's four lanes, a broadcast
    /// scalar, or the register itself (`x ∘ x`). As `wide`'s `each!`, the
    /// same IEEE operation, operands in the same order, as the generic
    /// links.
    macro_rules! each {
        ($acc:ident, $x:expr, $f:ident, true) => {
            for (v, r) in $acc.iter_mut().enumerate() {
                *r = $f(*r, $x(v, *r));
            }
        };
        ($acc:ident, $x:expr, $f:ident, false) => {
            for (v, r) in $acc.iter_mut().enumerate() {
                *r = $f($x(v, *r), *r);
            }
        };
    }

    /// As `wide`'s `link!`, with each register's operand given by `$x`
    /// (see [`each!`]).
    macro_rules! link {
        ($acc:ident, $o:expr, $left:expr, $x:expr) => {
            match ($o, $left) {
                (Arith::Add, true) => each!($acc, $x, _mm256_add_pd, true),
                (Arith::Add, false) => each!($acc, $x, _mm256_add_pd, false),
                (Arith::Sub, true) => each!($acc, $x, _mm256_sub_pd, true),
                (Arith::Sub, false) => each!($acc, $x, _mm256_sub_pd, false),
                (Arith::Mul, true) => each!($acc, $x, _mm256_mul_pd, true),
                (Arith::Mul, false) => each!($acc, $x, _mm256_mul_pd, false),
                (Arith::Div, true) => each!($acc, $x, _mm256_div_pd, true),
                (Arith::Div, false) => each!($acc, $x, _mm256_div_pd, false),
                // Flips the sign bit, as `-p` does.
                (Arith::Neg, _) => {
                    let sign = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MIN));
                    for r in $acc.iter_mut() {
                        *r = _mm256_xor_pd(*r, sign);
                    }
                }
            }
        };
    }

    /// Runs `chain` over the whole strips at the start of `out`; returns
    /// how many lanes it wrote (a multiple of [`LANES`]). Operands named
    /// by `scalars` are broadcast from their first element; a first step
    /// whose operands are one slice (`x * x`) loads it once.
    ///
    /// # Safety
    /// The CPU has AVX2; `args` has the chain's operands
    /// ([`Chain::operands`]), each of at least `out.len()` elements, and
    /// `mask` as many when the chain has a pick.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn chain(
        chain: &Chain,
        args: &[&[f64]],
        mask: &[bool],
        out: &mut [f64],
        scalars: super::Scalars,
    ) -> usize {
        let done = out.len() / LANES * LANES;
        let mut start = 0;
        while start < done {
            // SAFETY (every pointer below): `start + LANES <= done`, which
            // is at most every operand's length and `out`'s.
            let mut acc = [_mm256_setzero_pd(); V];
            let first = unsafe { args[0].as_ptr().add(start) };
            for (v, r) in acc.iter_mut().enumerate() {
                *r = unsafe { _mm256_loadu_pd(first.add(4 * v)) };
            }
            let scalar = |k: usize| scalars & (1 << k) != 0;
            // SAFETY (the loads): `x` covers the strip's `LANES` elements.
            if std::ptr::eq(args[1], args[0]) {
                link!(acc, chain.first, true, |_, r| r);
            } else if scalar(1) {
                let s = unsafe { _mm256_broadcast_sd(args[1].get_unchecked(0)) };
                link!(acc, chain.first, true, |_, _| s);
            } else {
                let x = unsafe { args[1].as_ptr().add(start) };
                link!(acc, chain.first, true, |v, _| unsafe { _mm256_loadu_pd(x.add(4 * v)) });
            }
            for (k, &(o, left)) in chain.links.iter().enumerate() {
                if scalar(2 + k) {
                    let s = unsafe { _mm256_broadcast_sd(args[2 + k].get_unchecked(0)) };
                    link!(acc, o, left, |_, _| s);
                } else {
                    let x = unsafe { args[2 + k].as_ptr().add(start) };
                    link!(acc, o, left, |v, _| unsafe { _mm256_loadu_pd(x.add(4 * v)) });
                }
            }
            let dst = unsafe { out.as_mut_ptr().add(start) };
            match chain.pick {
                Some(keep) => {
                    let other = unsafe { args[2 + chain.links.len()].as_ptr().add(start) };
                    let flags = unsafe { mask.as_ptr().add(start) };
                    for (v, r) in acc.iter().enumerate() {
                        // Four flags (bytes of 0 or 1) widened to four
                        // lanes, all ones where set.
                        let bytes = unsafe { flags.add(4 * v).cast::<i32>().read_unaligned() };
                        let wide = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(bytes));
                        let set =
                            _mm256_castsi256_pd(_mm256_cmpgt_epi64(wide, _mm256_setzero_si256()));
                        let o = unsafe { _mm256_loadu_pd(other.add(4 * v)) };
                        // `blendv(a, b, m)` takes `b` where `m` is set.
                        let picked = if keep {
                            _mm256_blendv_pd(o, *r, set)
                        } else {
                            _mm256_blendv_pd(*r, o, set)
                        };
                        unsafe { _mm256_storeu_pd(dst.add(4 * v), picked) };
                    }
                }
                None => {
                    for (v, r) in acc.iter().enumerate() {
                        unsafe { _mm256_storeu_pd(dst.add(4 * v), *r) };
                    }
                }
            }
            start += LANES;
        }
        done
    }
}

/// `acc = acc ∘ x` (`left`) or `x ∘ acc`, elementwise. (`Neg` takes no
/// operand: `acc = -acc`; chains are built of binary steps only.)
#[inline(always)]
fn apply(op: Arith, left: bool, acc: &mut [f64], x: &[f64]) {
    match (op, left) {
        (Arith::Add, true) => link(acc, x, |p, q| p + q),
        (Arith::Add, false) => link(acc, x, |p, q| q + p),
        (Arith::Sub, true) => link(acc, x, |p, q| p - q),
        (Arith::Sub, false) => link(acc, x, |p, q| q - p),
        (Arith::Mul, true) => link(acc, x, |p, q| p * q),
        (Arith::Mul, false) => link(acc, x, |p, q| q * p),
        (Arith::Div, true) => link(acc, x, |p, q| p / q),
        (Arith::Div, false) => link(acc, x, |p, q| q / p),
        (Arith::Neg, _) => link(acc, x, |p, _| -p),
    }
}

/// `acc[i] = f(acc[i], x[i])`.
#[inline(always)]
fn link(acc: &mut [f64], x: &[f64], f: impl Fn(f64, f64) -> f64) {
    for (a, &y) in acc.iter_mut().zip(x) {
        *a = f(*a, y);
    }
}

/// One register: a block of [`LANES`] elements of one dtype (the
/// micro-interpreter's value buffer).
use crate::micro::Buf as Reg;

impl Reg {
    /// Copies `src` (of the register's dtype) into the register's start.
    fn load(&mut self, src: Block<'_>) -> Result<()> {
        copy_block(src, self.prefix_mut(src.len()))
    }

    /// Spreads the single element of `src` over the whole register,
    /// unless the register already holds it (a set kept from a run with
    /// the same scalar, compared bit for bit).
    fn spread(&mut self, src: &Storage) -> Result<()> {
        fn refill<T: Copy>(d: &mut [T], s: &[T], same: impl Fn(&T, &T) -> bool) {
            if let (Some(held), Some(&v)) = (d.first(), s.first()) {
                if !same(held, &v) {
                    d.fill(v);
                }
            }
        }
        match (self, src) {
            (Reg::F64(d), Storage::F64(s)) => refill(d, s, |a, b| a.to_bits() == b.to_bits()),
            (Reg::F32(d), Storage::F32(s)) => refill(d, s, |a, b| a.to_bits() == b.to_bits()),
            (Reg::I64(d), Storage::I64(s)) => refill(d, s, PartialEq::eq),
            (Reg::Bool(d), Storage::Bool(s)) => refill(d, s, PartialEq::eq),
            _ => return Err(Error::invalid("while", "masked", "a scalar of another dtype")),
        }
        Ok(())
    }
}

/// Copies a block into one of the same dtype and length.
fn copy_block(src: Block<'_>, dst: BlockMut<'_>) -> Result<()> {
    match (src, dst) {
        (Block::F64(s), BlockMut::F64(d)) => d.copy_from_slice(s),
        (Block::F32(s), BlockMut::F32(d)) => d.copy_from_slice(s),
        (Block::I64(s), BlockMut::I64(d)) => d.copy_from_slice(s),
        (Block::Bool(s), BlockMut::Bool(d)) => d.copy_from_slice(s),
        _ => return Err(Error::invalid("while", "masked", "a carry of another dtype")),
    }
    Ok(())
}

/// A scalar (one element) spread over a register once per task.
#[derive(Debug)]
struct Spread {
    /// The loop operand, or the constant.
    from: Result<usize, Tensor>,
    reg: usize,
}

/// A masked loop compiled to run lane group by lane group (see the module
/// documentation).
#[derive(Debug)]
pub(crate) struct LaneLoop {
    /// The lanes' shape (every carry's).
    shape: Vec<usize>,
    /// How many operands the loop's node has (the prelude's inputs when it
    /// has one, else the loop's consts and initial carries).
    operands: usize,
    max_steps: Option<usize>,
    /// Per register, its dtype.
    regs: Vec<DType>,
    /// Scalars spread over registers.
    spreads: Vec<Spread>,
    /// Operands and constants of the lanes' shape.
    leaves: Vec<Leaf>,
    /// The prelude's instructions, run once per group before its first
    /// step: they compute the loop's operands from the node's (see
    /// [`LaneLoop::with_prelude`]). Empty without a prelude.
    prelude: Vec<Step>,
    /// The body's instructions.
    code: Vec<Step>,
    /// Per carry: its register.
    carries: Vec<usize>,
    /// Per carry: where its initial value is, once the prelude has run.
    init: Vec<Loc>,
    /// Per carry: how its register takes its initial value.
    start: Vec<Start>,
    /// Per carry: where the body's new value is.
    next: Vec<Loc>,
    /// Whether each carry's new value is a register of its own, computed
    /// by the body and read by no other carry (swapped in, not copied).
    swap: Vec<bool>,
    /// Whether the plan reads each result (see [`LaneLoop::results_read`]).
    read: Vec<bool>,
    /// Register sets of earlier runs, kept for the next ones (see
    /// [`Lease`]).
    kept: Mutex<Vec<Vec<Reg>>>,
}

/// How a carry's register takes its initial value at the start of a group.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Start {
    /// Copied from where it is.
    Copy,
    /// Swapped in: a register the prelude computed for this carry alone,
    /// which the body writes before it reads.
    Swap,
}

/// Register sets at most kept between runs: one per rayon job running at
/// once, on the few cores anvil targets.
const KEPT_SETS: usize = 8;

/// A set of registers lent to one rayon job of a run, returned to its loop
/// when the job ends: allocating and zeroing them afresh (a dozen blocks of
/// 8 KiB per job) was about 3% of W13.
struct Lease<'a> {
    regs: Vec<Reg>,
    kept: &'a Mutex<Vec<Vec<Reg>>>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() < KEPT_SETS {
                kept.push(std::mem::take(&mut self.regs));
            }
        }
    }
}

impl LaneLoop {
    /// The lane form of `w`, if it is masked and its body qualifies.
    ///
    /// # Errors
    /// A constant of the body that cannot be evaluated.
    pub(crate) fn new(w: &While) -> Result<Option<LaneLoop>> {
        Self::compiled(w, None)
    }

    /// The lane form of `w` whose operands are the results of `prelude`,
    /// an elementwise graph of the lanes' shape computed group by group
    /// with the loop (its inputs are then the node's operands): a group's
    /// initial carries are computed in its registers, where the plan would
    /// write them whole to memory and the loop read them back.
    ///
    /// `None` when the loop or the prelude does not qualify.
    ///
    /// # Errors
    /// A constant that cannot be evaluated.
    pub(crate) fn with_prelude(w: &While, prelude: &Graph) -> Result<Option<LaneLoop>> {
        if prelude.output_types() != w.body.graph().input_types() {
            return Ok(None);
        }
        Self::compiled(w, Some(prelude))
    }

    fn compiled(w: &While, prelude: Option<&Graph>) -> Result<Option<LaneLoop>> {
        let body = w.body.graph();
        let types = body.input_types();
        let (nc, nk) = (w.consts, w.carries());
        if !w.masked || nk == 0 || types.len() != nc + nk {
            return Ok(None);
        }
        let shape = types[nc + nk - 1].shape().to_vec();
        if types[nc + nk - 1].dtype() != DType::Bool
            || types
                .iter()
                .chain(prelude.map(Graph::input_types).iter().flatten())
                .any(|t| t.is_symbolic())
            || types[nc..].iter().any(|t| t.shape() != shape)
            || types[..nc].iter().any(|t| t.shape() != shape && t.numel() != 1)
        {
            return Ok(None);
        }
        Ok(Compiler::new(shape, nc).compile(prelude, body)?.map(|mut l| {
            l.max_steps = w.max_steps;
            l
        }))
    }

    /// Runs the loop on its operands (consts, then initial carries).
    ///
    /// # Errors
    /// Operands of other types than the body's; an instruction's error.
    pub(crate) fn run(&self, inputs: &[&Tensor], ctx: &Parallelism) -> Result<Vec<Tensor>> {
        let n: usize = self.shape.iter().product();
        if inputs.len() != self.operands {
            return Err(Error::invalid(
                "while",
                "operands",
                format!("{} operands for a loop of {}", inputs.len(), self.operands),
            ));
        }
        for leaf in &self.leaves {
            if let Leaf::Input(k) = *leaf {
                let t = inputs[k];
                if t.shape() != self.shape {
                    return Err(Error::shape(
                        "while",
                        &[t.shape(), &self.shape],
                        format!("operand {k} is {}, not of the lanes' shape", t.ty()),
                    ));
                }
            }
        }
        for s in &self.spreads {
            if let Ok(k) = s.from {
                if inputs[k].numel() != 1 {
                    return Err(Error::shape(
                        "while",
                        &[inputs[k].shape()],
                        format!("operand {k} is {}, not a single element", inputs[k].ty()),
                    ));
                }
            }
        }
        // Every element of the results read is written: pooled buffers
        // need no zeroing and, call after call, no fresh pages.
        let mut results: Vec<Reg> =
            self.read_carries().map(|r| Reg::stacked(self.regs[r], n)).collect();
        let work = n * (self.prelude.len() + self.code.len()).max(1);
        let task = if ctx.parallel(work) { TASK_LANES } else { n.max(1) };
        let mut tasks: Vec<Vec<BlockMut<'_>>> = (0..n.div_ceil(task)).map(|_| Vec::new()).collect();
        for r in &mut results {
            for (t, chunk) in chunks(r, task).into_iter().enumerate() {
                tasks[t].push(chunk);
            }
        }
        // Registers per rayon job (a run of tasks on one worker), not per
        // task: a task is a few microseconds, and allocating and zeroing a
        // dozen registers was a twentieth of it.
        let width = self.group().min(n.max(1));
        if tasks.len() > 1 {
            tasks.into_par_iter().enumerate().try_for_each_init(
                || self.registers(inputs, width),
                |regs, (t, outs)| match regs {
                    Ok(lease) => self.run_task(&mut lease.regs, inputs, t * task, outs),
                    Err(e) => Err(e.clone()),
                },
            )?;
        } else if let Some(outs) = tasks.pop() {
            self.run_task(&mut self.registers(inputs, width)?.regs, inputs, 0, outs)?;
        }
        // A result nobody reads is its initial carry (of its type, at no cost).
        let mut results = results.into_iter();
        (0..self.carries.len())
            .map(|k| {
                if !self.read[k] {
                    if let Loc::Leaf(j) = self.init[k] {
                        if let Leaf::Input(i) = self.leaves[j] {
                            return Ok(inputs[i].clone());
                        }
                    }
                    // Computed by the prelude: a pooled buffer of
                    // unspecified contents, as nobody reads them.
                    return into_tensor(Reg::stacked(self.regs[self.carries[k]], n), &self.shape);
                }
                match results.next() {
                    Some(r) => into_tensor(r, &self.shape),
                    None => Err(Error::invalid("while", "masked", "a result missing")),
                }
            })
            .collect()
    }

    /// Lanes per group: [`LANES`], or fewer, a multiple of [`MIN_GROUP`],
    /// when a lane's registers and operands are more than [`GROUP_BYTES`]
    /// can hold as many times.
    fn group(&self) -> usize {
        let lane: usize = self.regs.iter().map(|d| d.size_of()).sum::<usize>()
            + self.leaves.len() * DType::F64.size_of();
        (GROUP_BYTES / lane.max(1) / MIN_GROUP * MIN_GROUP).clamp(MIN_GROUP, LANES)
    }

    /// Tells which results the plan reads: the others are not written
    /// (each is returned as its initial carry).
    pub(crate) fn results_read(&mut self, read: &[bool]) {
        if read.len() == self.read.len() {
            self.read = read.to_vec();
        }
    }

    /// The registers of the carries the plan reads, in order.
    fn read_carries(&self) -> impl Iterator<Item = usize> + '_ {
        self.carries.iter().zip(&self.read).filter(|(_, &read)| read).map(|(&r, _)| r)
    }

    /// Registers of `width` lanes for [`run_task`](Self::run_task), the
    /// spread scalars filled in: a set kept from an earlier run when one
    /// is of this width. Its other registers hold stale values, which no
    /// instruction reads: carries are loaded and every other register is
    /// written before it is read.
    fn registers(&self, inputs: &[&Tensor], width: usize) -> Result<Lease<'_>> {
        let kept = self.kept.lock().ok().and_then(|mut k| k.pop());
        let mut regs = match kept {
            Some(regs) if regs.first().is_some_and(|r| r.len() == width) => regs,
            _ => self.regs.iter().map(|&d| Reg::zeros(d, width)).collect(),
        };
        for s in &self.spreads {
            let storage = match &s.from {
                Ok(k) => inputs[*k].storage(),
                Err(t) => t.storage(),
            };
            regs[s.reg].spread(storage)?;
        }
        Ok(Lease { regs, kept: &self.kept })
    }

    /// Runs the lanes `start..start + outs[k].len()`, group by group, in
    /// `regs` (of [`group`](Self::group) lanes, or all when fewer), writing each carry's
    /// final values into `outs`.
    fn run_task(
        &self,
        regs: &mut [Reg],
        inputs: &[&Tensor],
        start: usize,
        mut outs: Vec<BlockMut<'_>>,
    ) -> Result<()> {
        let total = outs.first().map_or(0, BlockMut::len);
        let width = self.group().min(total);
        let flag = self.carries[self.carries.len() - 1];
        let mut leaves: Vec<Block<'_>> = Vec::with_capacity(self.leaves.len());
        let mut at = 0;
        while at < total {
            let len = width.min(total - at);
            let from = start + at;
            leaves.clear();
            leaves.extend(self.leaves.iter().map(|l| match l {
                Leaf::Input(k) => in_place(inputs[*k].storage(), from, len),
                Leaf::Value(t) => in_place(t.storage(), from, len),
            }));
            let at_block = BlockAt { start: from, shape: &self.shape };
            self.exec(&self.prelude, regs, &leaves, at_block, len)?;
            for ((&r, &init), &start) in self.carries.iter().zip(&self.init).zip(&self.start) {
                match (init, start) {
                    (Loc::Leaf(j), _) => regs[r].load(leaves[j])?,
                    (Loc::Reg(s), Start::Swap) => regs.swap(r, s),
                    (Loc::Reg(s), Start::Copy) => {
                        let (to, from) = two(regs, r, s)?;
                        to.load(from.prefix(len))?;
                    }
                }
            }
            let mut steps = 0usize;
            while self.max_steps.is_none_or(|m| steps < m) && any_set(&regs[flag], len) {
                self.exec(&self.code, regs, &leaves, at_block, len)?;
                self.advance(regs, &leaves, len)?;
                steps += 1;
            }
            for (out, r) in outs.iter_mut().zip(self.read_carries()) {
                copy_block(regs[r].prefix(len), sub_block(out, at, len))?;
            }
            at += len;
        }
        Ok(())
    }

    /// The instructions `code` (the prelude's or the body's) on a group of
    /// `len` lanes whose leaves' blocks are `leaves`.
    fn exec(
        &self,
        code: &[Step],
        regs: &mut [Reg],
        leaves: &[Block<'_>],
        at: BlockAt<'_>,
        len: usize,
    ) -> Result<()> {
        for Step { kernel, args, out } in code {
            // The result register apart from the others (the compiler never
            // gives an instruction its own operand's register).
            let (below, rest) = regs.split_at_mut(*out);
            let Some((dst, above)) = rest.split_first_mut() else {
                return Err(Error::invalid("while", "masked", "a register out of range"));
            };
            let read = |l: &Loc| -> Block<'_> {
                match *l {
                    Loc::Reg(r) if r < *out => below[r].prefix(len),
                    Loc::Reg(r) => above[r - *out - 1].prefix(len),
                    Loc::Leaf(j) => leaves[j],
                }
            };
            match kernel {
                Kernel::F64Binary(f, _) => match (read(&args[0]), read(&args[1]), dst) {
                    (Block::F64(a), Block::F64(b), Reg::F64(d)) => f(a, b, &mut d[..len]),
                    _ => return Err(Error::invalid("while", "masked", "f64 operands")),
                },
                Kernel::F64Chain(chain, scalars) => {
                    // The f64 operands, then a pick's mask.
                    let n = chain.operands();
                    let mut ops: [&[f64]; CHAIN_ARGS] = [&[]; CHAIN_ARGS];
                    for (slot, l) in ops.iter_mut().zip(&args[..n]) {
                        match read(l) {
                            Block::F64(v) => *slot = v,
                            _ => return Err(Error::invalid("while", "masked", "f64 operands")),
                        }
                    }
                    let mask = match (chain.pick, args.get(n).map(read)) {
                        (Some(_), Some(Block::Bool(m))) => m,
                        (None, None) => &[],
                        _ => return Err(Error::invalid("while", "masked", "a pick's bool mask")),
                    };
                    match dst {
                        Reg::F64(d) => chain.run(&ops[..n], mask, &mut d[..len], *scalars),
                        _ => return Err(Error::invalid("while", "masked", "an f64 result")),
                    }
                }
                Kernel::F64Compare(f, _) => match (read(&args[0]), read(&args[1]), dst) {
                    (Block::F64(a), Block::F64(b), Reg::Bool(d)) => f(a, b, &mut d[..len]),
                    _ => return Err(Error::invalid("while", "masked", "f64 operands")),
                },
                Kernel::Test(test, scalars) => {
                    let pick = |k: usize| match args.get(k).map(read) {
                        Some(Block::Bool(m)) => Ok(m),
                        None => Ok(&[][..]),
                        _ => Err(Error::invalid("while", "masked", "a pick's bool operands")),
                    };
                    let (other, mask) = (pick(2)?, pick(3)?);
                    if args.len() != test.operands() || other.len() != mask.len() {
                        return Err(Error::invalid("while", "masked", "a test's operands"));
                    }
                    match (read(&args[0]), read(&args[1]), dst) {
                        (Block::F64(a), Block::F64(b), Reg::Bool(d)) => {
                            test.run(a, b, other, mask, &mut d[..len], *scalars)
                        }
                        _ => return Err(Error::invalid("while", "masked", "f64 operands")),
                    }
                }
                Kernel::F64Map(f) | Kernel::Abs(f) => match (read(&args[0]), dst) {
                    (Block::F64(a), Reg::F64(d)) => f(a, &mut d[..len]),
                    _ => return Err(Error::invalid("while", "masked", "an f64 operand")),
                },
                Kernel::Select => match (read(&args[0]), read(&args[1]), read(&args[2]), dst) {
                    (Block::Bool(c), Block::F64(t), Block::F64(f), Reg::F64(d)) => {
                        select_f64(c, t, f, &mut d[..len])
                    }
                    (Block::Bool(c), Block::Bool(t), Block::Bool(f), Reg::Bool(d)) => {
                        select_bool(c, t, f, &mut d[..len])
                    }
                    _ => return Err(Error::invalid("while", "masked", "select operands")),
                },
                Kernel::Block(instr) => crate::gathered::<_, _, INLINE_ARGS>(
                    args.len(),
                    |k| Ok(read(&args[k])),
                    |operands| instr.eval(operands, dst.prefix_mut(len), at),
                )?,
            }
        }
        Ok(())
    }

    /// Puts the body's new carries in the carries' registers.
    fn advance(&self, regs: &mut [Reg], leaves: &[Block<'_>], len: usize) -> Result<()> {
        // The new carries: swapped in when they are registers of their own,
        // else copied (through fresh buffers, so carries may trade places).
        let mut copied: Vec<(usize, Reg)> = Vec::new();
        for (k, (&r, next)) in self.carries.iter().zip(&self.next).enumerate() {
            if !self.swap[k] {
                let mut fresh = Reg::zeros(self.regs[r], len);
                fresh.load(match *next {
                    Loc::Reg(s) => regs[s].prefix(len),
                    Loc::Leaf(j) => leaves[j],
                })?;
                copied.push((r, fresh));
            }
        }
        for (k, (&r, next)) in self.carries.iter().zip(&self.next).enumerate() {
            if let (true, Loc::Reg(s)) = (self.swap[k], next) {
                regs.swap(r, *s);
            }
        }
        for (r, fresh) in copied {
            copy_block(fresh.prefix(len), regs[r].prefix_mut(len))?;
        }
        Ok(())
    }
}

/// The tensor of `shape` holding register `r`'s elements (moved, not copied).
fn into_tensor(r: Reg, shape: &[usize]) -> Result<Tensor> {
    let storage = match r {
        Reg::F64(v) => Storage::F64(Arc::new(v)),
        Reg::F32(v) => Storage::F32(Arc::new(v)),
        Reg::I64(v) => Storage::I64(Arc::new(v)),
        Reg::Bool(v) => Storage::Bool(Arc::new(v)),
    };
    Tensor::from_storage(storage, shape)
}

/// Registers `to` (written) and `from` (read), which differ.
fn two(regs: &mut [Reg], to: usize, from: usize) -> Result<(&mut Reg, &Reg)> {
    let bad = || Error::invalid("while", "masked", "a carry's initial value in its own register");
    if to < from {
        let (lo, hi) = regs.split_at_mut(from);
        Ok((lo.get_mut(to).ok_or_else(bad)?, hi.first().ok_or_else(bad)?))
    } else if to > from {
        let (lo, hi) = regs.split_at_mut(to);
        Ok((hi.first_mut().ok_or_else(bad)?, lo.get(from).ok_or_else(bad)?))
    } else {
        Err(bad())
    }
}

/// Whether any of the first `len` flags in `r` is set: a byte-wise OR
/// (vectorised), where a search would test lane by lane until the first
/// set flag, which late in a loop lies far in.
fn any_set(r: &Reg, len: usize) -> bool {
    match r {
        Reg::Bool(v) => v[..len].iter().fold(0u8, |acc, &b| acc | u8::from(b)) != 0,
        _ => false,
    }
}

/// `len` elements of `b` from `at`.
fn sub_block<'a>(b: &'a mut BlockMut<'_>, at: usize, len: usize) -> BlockMut<'a> {
    match b {
        BlockMut::F64(v) => BlockMut::F64(&mut v[at..at + len]),
        BlockMut::F32(v) => BlockMut::F32(&mut v[at..at + len]),
        BlockMut::I64(v) => BlockMut::I64(&mut v[at..at + len]),
        BlockMut::Bool(v) => BlockMut::Bool(&mut v[at..at + len]),
    }
}

/// A register split into pieces of `size` elements.
fn chunks(r: &mut Reg, size: usize) -> Vec<BlockMut<'_>> {
    match r {
        Reg::F64(v) => v.chunks_mut(size).map(BlockMut::F64).collect(),
        Reg::F32(v) => v.chunks_mut(size).map(BlockMut::F32).collect(),
        Reg::I64(v) => v.chunks_mut(size).map(BlockMut::I64).collect(),
        Reg::Bool(v) => v.chunks_mut(size).map(BlockMut::Bool).collect(),
    }
}

/// A comparison of two `f64` operands to `bool`, of the first operand's
/// absolute value with `abs`, perhaps ending in a select of `bool`s that
/// reads it as one branch: `out = |a| ∘ b` (or `a ∘ b`), then with a
/// [`pick`](Test::pick) `out = if mask == keep { out } else { other }`.
/// A masked loop's flag is such a select, `select(c, r, c)` (`c && r`):
/// `|f(x)| >= tol` and `it < limit`, each read once, are one pass each
/// instead of two or three, and the same bools.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Test {
    /// Whether the first operand's absolute value is compared.
    abs: bool,
    /// The comparison.
    cmp: Compare,
    /// With a pick, the mask value (`keep`) at which the comparison's
    /// result is taken; the other branch elsewhere.
    pick: Option<bool>,
}

impl Test {
    /// How many operands the test reads (`f64` ones, then a pick's other
    /// branch and mask).
    fn operands(&self) -> usize {
        if self.pick.is_some() {
            4
        } else {
            2
        }
    }

    /// Runs the test on `a` and `b`, with a pick on `(other, mask)` (empty
    /// without one), all of `out`'s length, at the widest width the CPU has.
    /// With bit 1 of `scalars`, `b` holds one value in every element.
    fn run(
        &self,
        a: &[f64],
        b: &[f64],
        other: &[bool],
        mask: &[bool],
        out: &mut [bool],
        scalars: Scalars,
    ) {
        // The comparison each op's own math makes.
        fn by<C: CompareMath + Default>(
            t: &Test,
            a: &[f64],
            b: &[f64],
            other: &[bool],
            mask: &[bool],
            out: &mut [bool],
        ) {
            anvil_ops::at_width!(
                Width::detect(),
                fn[C: CompareMath](c: C = C::default(), abs: bool = t.abs, pick: Option<bool> = t.pick, a: &[f64] = a, b: &[f64] = b, other: &[bool] = other, mask: &[bool] = mask, out: &mut [bool] = out) {
                    let n = out.len();
                    let (a, b) = (&a[..n], &b[..n]);
                    match (abs, pick) {
                        (false, None) => {
                            for ((d, &p), &q) in out.iter_mut().zip(a).zip(b) {
                                *d = c.compare(p, q);
                            }
                        }
                        (true, None) => {
                            for ((d, &p), &q) in out.iter_mut().zip(a).zip(b) {
                                *d = c.compare(p.abs(), q);
                            }
                        }
                        (abs, Some(keep)) => {
                            let (other, mask) = (&other[..n], &mask[..n]);
                            for ((((d, &p), &q), &o), &m) in
                                out.iter_mut().zip(a).zip(b).zip(other).zip(mask)
                            {
                                let r = c.compare(if abs { p.abs() } else { p }, q);
                                *d = if m == keep { r } else { o };
                            }
                        }
                    }
                }
            )
        }
        let f = anvil_ops::by_comparison!(self.cmp, by);
        let n = out.len();
        let mut from = 0;
        #[cfg(target_arch = "x86_64")]
        if Width::Avx2 <= Width::detect()
            && a.len() >= n
            && b.len() >= n
            && (self.pick.is_none() || (other.len() >= n && mask.len() >= n))
        {
            // SAFETY: `detect` lists AVX2 only when the CPU has it; the
            // operands cover `out` (checked just above), and so do a
            // pick's.
            from = unsafe { tests2::run(self, a, b, other, mask, out, scalars & 0b10 != 0) };
        }
        if from < n {
            let (other, mask) = match self.pick {
                Some(_) => (&other[from..], &mask[from..]),
                None => (other, mask),
            };
            f(self, &a[from..], &b[from..], other, mask, &mut out[from..]);
        }
    }
}

/// [`Test`]s eight lanes at a time with AVX2: two comparisons give eight
/// bits, which one table lookup spreads into the eight bytes of the lanes'
/// `bool`s (packing the comparisons' 64-bit masks down to bytes took four
/// shuffles per four lanes); a pick blends those bytes with its operands'
/// as integers. The same predicates as the ops' math: ordered for `<`,
/// `<=`, `>`, `>=`, `==`, unordered for `!=` (true against a NaN).
#[cfg(target_arch = "x86_64")]
mod tests2 {
    use super::Test;
    use anvil_core::Compare;
    use std::arch::x86_64::*;

    /// Per eight bits, the eight bytes of `bool`s (0 or 1) they stand for,
    /// lane `k` in byte `k` (little-endian, as `bool`s lie in memory).
    const BYTES: [u64; 256] = {
        let mut t = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            let mut k = 0;
            while k < 8 {
                if (i >> k) & 1 == 1 {
                    t[i] |= 1 << (8 * k);
                }
                k += 1;
            }
            i += 1;
        }
        t
    };

    /// Every byte's lowest bit.
    const ONES: u64 = 0x0101_0101_0101_0101;

    /// Runs `test` over the whole groups of eight lanes at the start of
    /// `out`; returns how many lanes it wrote. With `scalar`, `b` holds one
    /// value in every element: it is broadcast, not loaded.
    ///
    /// # Safety
    /// The CPU has AVX2; `a` and `b` have at least `out.len()` elements,
    /// and so do `other` and `mask` when the test has a pick.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn run(
        test: &Test,
        a: &[f64],
        b: &[f64],
        other: &[bool],
        mask: &[bool],
        out: &mut [bool],
        scalar: bool,
    ) -> usize {
        // SAFETY: the caller's.
        unsafe {
            match test.cmp {
                Compare::Lt => by::<_CMP_LT_OQ>(test, a, b, other, mask, out, scalar),
                Compare::Le => by::<_CMP_LE_OQ>(test, a, b, other, mask, out, scalar),
                Compare::Gt => by::<_CMP_GT_OQ>(test, a, b, other, mask, out, scalar),
                Compare::Ge => by::<_CMP_GE_OQ>(test, a, b, other, mask, out, scalar),
                Compare::Eq => by::<_CMP_EQ_OQ>(test, a, b, other, mask, out, scalar),
                Compare::Ne => by::<_CMP_NEQ_UQ>(test, a, b, other, mask, out, scalar),
            }
        }
    }

    /// [`run`] with the comparison's predicate `P`.
    ///
    /// # Safety
    /// As [`run`].
    #[target_feature(enable = "avx2")]
    unsafe fn by<const P: i32>(
        test: &Test,
        a: &[f64],
        b: &[f64],
        other: &[bool],
        mask: &[bool],
        out: &mut [bool],
        scalar: bool,
    ) -> usize {
        let done = out.len() / 8 * 8;
        let magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
        let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr().cast::<u8>());
        let mut i = 0;
        while i < done {
            // SAFETY (every access below): `i + 8 <= done <= out.len()`,
            // which `a`, `b` (and a pick's `other` and `mask`) cover; a
            // `bool` is one byte, 0 or 1, and every byte written is.
            let (mut x, mut y) =
                unsafe { (_mm256_loadu_pd(pa.add(i)), _mm256_loadu_pd(pa.add(i + 4))) };
            if test.abs {
                x = _mm256_and_pd(x, magnitude);
                y = _mm256_and_pd(y, magnitude);
            }
            let (p, q) = if scalar {
                let s = unsafe { _mm256_broadcast_sd(&*pb) };
                (s, s)
            } else {
                unsafe { (_mm256_loadu_pd(pb.add(i)), _mm256_loadu_pd(pb.add(i + 4))) }
            };
            let low = _mm256_movemask_pd(_mm256_cmp_pd::<P>(x, p));
            let high = _mm256_movemask_pd(_mm256_cmp_pd::<P>(y, q));
            let mut r = BYTES[(low | (high << 4)) as usize];
            if let Some(keep) = test.pick {
                let read = |v: &[bool]| unsafe { v.as_ptr().add(i).cast::<u64>().read_unaligned() };
                let (o, m) = (read(other), read(mask));
                // Bytes where the mask is `keep`: the test's; elsewhere the
                // other branch's.
                let at = if keep { m } else { m ^ ONES };
                r = (r & at) | (o & (at ^ ONES));
            }
            unsafe { po.add(i).cast::<u64>().write_unaligned(r) };
            i += 8;
        }
        done
    }
}

/// The comparison `b ∘ a` as `a ∘' b`.
fn flipped(c: Compare) -> Compare {
    match c {
        Compare::Lt => Compare::Gt,
        Compare::Le => Compare::Ge,
        Compare::Gt => Compare::Lt,
        Compare::Ge => Compare::Le,
        Compare::Eq | Compare::Ne => c,
    }
}

/// `next` joined to `prev`, whose value only `next` reads, as one [`Test`]:
/// an absolute value and the comparison reading it, or a comparison (or
/// such a test) and a `bool` select reading it as one branch.
fn tested(prev: &Step, next: &Step) -> Option<Step> {
    if prev.args.contains(&Loc::Reg(next.out)) {
        return None;
    }
    let r = Loc::Reg(prev.out);
    let (test, args) = match (&prev.kernel, &next.kernel, next.args.as_slice()) {
        (Kernel::Abs(_), Kernel::F64Compare(_, cmp), &[a, b]) => {
            let (cmp, other) = match (a == r, b == r) {
                (true, false) => (*cmp, b),
                (false, true) => (flipped(*cmp), a),
                _ => return None,
            };
            (Test { abs: true, cmp, pick: None }, vec![prev.args[0], other])
        }
        (Kernel::F64Compare(_, cmp), Kernel::Select, &[c, t, f]) => {
            (Test { abs: false, cmp: *cmp, pick: None }, picked(&prev.args, r, [c, t, f])?)
        }
        (Kernel::Test(test, _), Kernel::Select, &[c, t, f]) if test.pick.is_none() => {
            (*test, picked(&prev.args, r, [c, t, f])?)
        }
        _ => return None,
    };
    let pick = match next.kernel {
        Kernel::Select => Some(next.args[1] == r),
        _ => None,
    };
    Some(Step { kernel: Kernel::Test(Test { pick, ..test }, 0), args, out: next.out })
}

/// The operands of a test whose value `r` a select `[c, t, f]` reads as
/// one branch (not as its mask): the test's, the other branch, the mask.
fn picked(test_args: &[Loc], r: Loc, [c, t, f]: [Loc; 3]) -> Option<Vec<Loc>> {
    let other = match (c == r, t == r, f == r) {
        (false, true, false) => f,
        (false, false, true) => t,
        _ => return None,
    };
    let mut args = test_args.to_vec();
    args.extend([other, c]);
    Some(args)
}

/// `prev` and `next` as one chain, when `next` reads `prev`'s result once,
/// `prev` is arithmetic or a chain without a pick, `next`'s result register
/// is none of the chain's operands, and `next` is binary `f64` arithmetic
/// (a link) or an `f64` select with `prev`'s result as one branch (the
/// chain's pick; its mask and other branch become operands).
fn chained(prev: &Step, next: &Step) -> Option<Step> {
    let (first, mut links) = match &prev.kernel {
        Kernel::F64Binary(_, a) => (*a, Vec::new()),
        Kernel::F64Chain(c, _) if c.pick.is_none() => (c.first, c.links.clone()),
        _ => return None,
    };
    if prev.args.len() >= CHAIN_ARGS || prev.args.contains(&Loc::Reg(next.out)) {
        return None;
    }
    let r = Loc::Reg(prev.out);
    let mut args = prev.args.clone();
    let pick = match (&next.kernel, next.args.as_slice()) {
        (Kernel::F64Binary(_, op), &[a, b]) => {
            let (left, other) = match (a == r, b == r) {
                (true, false) => (true, b),
                (false, true) => (false, a),
                _ => return None,
            };
            links.push((*op, left));
            args.push(other);
            None
        }
        (Kernel::Select, &[c, t, f]) if c != r => {
            let (keep, other) = match (t == r, f == r) {
                (true, false) => (true, f),
                (false, true) => (false, t),
                _ => return None,
            };
            args.push(other);
            args.push(c);
            Some(keep)
        }
        _ => return None,
    };
    let chain = Chain { first, links, pick };
    Some(Step { kernel: Kernel::F64Chain(chain, 0), args, out: next.out })
}

/// The first element of `t` alone, when every element has its bits.
fn uniform(t: &Tensor) -> Result<Option<Tensor>> {
    fn first<T: Copy>(v: &[T], same: impl Fn(&T, &T) -> bool) -> Option<Vec<T>> {
        let x = *v.first()?;
        v.iter().all(|y| same(&x, y)).then(|| vec![x])
    }
    let one = match t.storage() {
        Storage::F64(v) => first(v.as_slice(), |a, b| a.to_bits() == b.to_bits())
            .map(|v| Storage::F64(Arc::new(v))),
        Storage::F32(v) => first(v.as_slice(), |a, b| a.to_bits() == b.to_bits())
            .map(|v| Storage::F32(Arc::new(v))),
        Storage::I64(v) => first(v.as_slice(), |a, b| a == b).map(|v| Storage::I64(Arc::new(v))),
        Storage::Bool(v) => first(v.as_slice(), |a, b| a == b).map(|v| Storage::Bool(Arc::new(v))),
    };
    one.map(|s| Tensor::from_storage(s, &[])).transpose()
}

/// The loop an instruction of `op` on operands of `dtypes` to `out` runs
/// by, found from the op's declared facts; `None` for the op's block math.
fn resolved(op: &dyn Op, dtypes: &[DType], out: DType) -> Option<Kernel> {
    use DType::{Bool, F64};
    match (dtypes, out) {
        ([F64, F64], F64) => {
            let a = op.arith()?;
            Some(Kernel::F64Binary(f64_arith_loop(a)?, a))
        }
        ([F64, F64], Bool) => {
            let c = op.comparison()?;
            Some(Kernel::F64Compare(f64_compare_loop(c), c))
        }
        ([F64], F64) if op.is::<Abs>() => op.f64_map().map(Kernel::Abs),
        // Not for an op with vectorised CPU math (`exp`, `sin`, ...): a plan
        // computes it with that, within an ulp or two of the op's own
        // scalar map, and a lane must get the bits it would get alone.
        ([F64], F64) if crate::registered_math(op).is_none() => op.f64_map().map(Kernel::F64Map),
        ([Bool, F64, F64], F64) | ([Bool, Bool, Bool], Bool) => {
            op.is_select().then_some(Kernel::Select)
        }
        _ => None,
    }
}

/// The nodes of `body` in an order that keeps every dependency and, where
/// it can, puts the only reader of a node's value right after that node,
/// so that the two can join one chain ([`chained`]). A masked loop's carry
/// update `select(flag, new, old)` then follows the arithmetic of `new`
/// even where the graph computes other carries' values in between.
fn schedule(body: &Graph, uses: &[usize]) -> Vec<usize> {
    let nodes = body.nodes();
    let mut producer = vec![usize::MAX; body.num_values()];
    for (i, n) in nodes.iter().enumerate() {
        n.results().for_each(|v| producer[v.index()] = i);
    }
    let mut waiting = vec![0usize; nodes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let mut deps: Vec<usize> = n.inputs.iter().map(|v| producer[v.index()]).collect();
        deps.sort_unstable();
        deps.dedup();
        waiting[i] = deps.len();
        deps.into_iter().for_each(|p| users[p].push(i));
    }
    let mut ready: BTreeSet<usize> = (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    let mut next: Option<usize> = None;
    while let Some(i) = next.filter(|j| ready.contains(j)).or_else(|| ready.first().copied()) {
        ready.remove(&i);
        order.push(i);
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.insert(u);
            }
        }
        let n = &nodes[i];
        next = (n.num_results() == 1 && uses[n.out().index()] == 1)
            .then(|| users[i].first().copied())
            .flatten();
    }
    order
}

/// Builds a [`LaneLoop`] from a body graph: every value gets a location;
/// registers of computed values are reused once their last reader has run.
struct Compiler {
    shape: Vec<usize>,
    consts: usize,
    regs: Vec<DType>,
    /// Registers free for reuse, per dtype.
    free: Vec<usize>,
    /// Whether each register holds computed values (it can be reused).
    computed: Vec<bool>,
    spreads: Vec<Spread>,
    leaves: Vec<Leaf>,
}

impl Compiler {
    fn new(shape: Vec<usize>, consts: usize) -> Compiler {
        Compiler {
            shape,
            consts,
            regs: Vec::new(),
            free: Vec::new(),
            computed: Vec::new(),
            spreads: Vec::new(),
            leaves: Vec::new(),
        }
    }

    fn fresh(&mut self, dtype: DType) -> usize {
        self.regs.push(dtype);
        self.computed.push(false);
        self.regs.len() - 1
    }

    /// A free register of `dtype` that none of `avoid` names, or a new one,
    /// for a computed value.
    fn reuse(&mut self, dtype: DType, avoid: &[Loc]) -> usize {
        let r = match self
            .free
            .iter()
            .position(|&r| self.regs[r] == dtype && !avoid.contains(&Loc::Reg(r)))
        {
            Some(i) => self.free.swap_remove(i),
            None => self.fresh(dtype),
        };
        self.computed[r] = true;
        r
    }

    /// Whether register `r` holds a spread scalar.
    fn spread(&self, r: usize) -> bool {
        self.spreads.iter().any(|s| s.reg == r)
    }

    /// Marks the operands of a chain or a test that are spread scalars.
    fn mark_scalars(&self, step: &mut Step) {
        let (operands, scalars) = match &mut step.kernel {
            Kernel::F64Chain(chain, scalars) => (chain.operands(), scalars),
            Kernel::Test(_, scalars) => (2, scalars),
            _ => return,
        };
        for (k, l) in step.args.iter().take(operands).enumerate() {
            if matches!(l, Loc::Reg(r) if self.spread(*r)) {
                *scalars |= 1 << k;
            }
        }
    }

    /// The location of a single-element or lane-shaped operand; `None` for
    /// any other shape.
    fn leaf(&mut self, from: Result<usize, Tensor>, ty: &TensorType) -> Option<Loc> {
        if ty.shape() == self.shape {
            self.leaves.push(match from {
                Ok(k) => Leaf::Input(k),
                Err(t) => Leaf::Value(t),
            });
            return Some(Loc::Leaf(self.leaves.len() - 1));
        }
        if ty.numel() != 1 {
            return None;
        }
        let reg = self.fresh(ty.dtype());
        self.spreads.push(Spread { from, reg });
        Some(Loc::Reg(reg))
    }

    /// The lane loop of `body`, whose operands are `prelude`'s results (or
    /// the node's operands themselves).
    fn compile(mut self, prelude: Option<&Graph>, body: &Graph) -> Result<Option<LaneLoop>> {
        let nc = self.consts;
        let types = body.input_types();
        // Where each of the loop's operands is, once the prelude has run.
        let (prelude_code, operands, inputs) = match prelude {
            Some(g) => {
                let found = self.code(g, &mut |c, k, ty| c.leaf(Ok(k), ty))?;
                let Some((code, outs)) = found else { return Ok(None) };
                (code, outs, g.inputs().len())
            }
            None => {
                let outs: Option<Vec<Loc>> =
                    types.iter().enumerate().map(|(k, ty)| self.leaf(Ok(k), ty)).collect();
                let Some(outs) = outs else { return Ok(None) };
                (Vec::new(), outs, types.len())
            }
        };
        // A register the prelude computed for a const is the body's to read
        // at every step: never reused. One it computed only for an initial
        // carry is free once the carries are loaded, before the first step.
        for &l in &operands[..nc] {
            if let Loc::Reg(r) = l {
                self.computed[r] = false;
            }
        }
        for &l in &operands[nc..] {
            if let Loc::Reg(r) = l {
                if self.computed[r] && !self.free.contains(&r) {
                    self.free.push(r);
                }
            }
        }
        let mut carries = vec![0usize; types.len() - nc];
        let found = self.code(body, &mut |c, k, ty| {
            if k < nc {
                return Some(operands[k]);
            }
            let r = c.fresh(ty.dtype());
            carries[k - nc] = r;
            Some(Loc::Reg(r))
        })?;
        let Some((mut code, next)) = found else { return Ok(None) };
        let mut prelude_code = prelude_code;
        for step in code.iter_mut().chain(&mut prelude_code) {
            self.mark_scalars(step);
        }
        let swap = next
            .iter()
            .map(|l| match l {
                Loc::Reg(r) => {
                    self.computed[*r]
                        && next.iter().filter(|m| matches!(m, Loc::Reg(s) if s == r)).count() == 1
                }
                _ => false,
            })
            .collect();
        let read = vec![true; carries.len()];
        let init = &operands[nc..];
        let start = init
            .iter()
            .map(|l| match *l {
                Loc::Reg(r)
                    if self.computed[r]
                        && !self.spread(r)
                        && init.iter().filter(|m| **m == Loc::Reg(r)).count() == 1 =>
                {
                    Start::Swap
                }
                _ => Start::Copy,
            })
            .collect();
        Ok(Some(LaneLoop {
            read,
            shape: self.shape,
            operands: inputs,
            max_steps: None,
            regs: self.regs,
            spreads: self.spreads,
            leaves: self.leaves,
            prelude: prelude_code,
            code,
            carries,
            init: init.to_vec(),
            start,
            next,
            swap,
            kept: Mutex::new(Vec::new()),
        }))
    }

    /// The instructions of `body` (a loop body or a prelude: its values
    /// elementwise of the lanes' shape, or single elements) and the
    /// locations of its results; its inputs are placed by `param` (given
    /// the input's index and type). `None` when `body` does not qualify.
    fn code(
        &mut self,
        body: &Graph,
        param: &mut dyn FnMut(&mut Compiler, usize, &TensorType) -> Option<Loc>,
    ) -> Result<Option<(Vec<Step>, Vec<Loc>)>> {
        let nv = body.num_values();
        // How many times each value is read (outputs count).
        let mut uses = vec![0usize; nv];
        for (_, n) in body.iter() {
            for i in &n.inputs {
                uses[i.index()] += 1;
            }
        }
        for o in body.outputs() {
            uses[o.index()] += 1;
        }
        let order = schedule(body, &uses);
        // The position of the last node reading each value (outputs live
        // to the step's end).
        let mut last = vec![0usize; nv];
        let nodes = body.nodes();
        for (at, &i) in order.iter().enumerate() {
            for i in &nodes[i].inputs {
                last[i.index()] = at;
            }
        }
        for o in body.outputs() {
            last[o.index()] = usize::MAX;
        }
        // The value of the last step in `code`.
        let mut previous: Option<usize> = None;
        let mut loc: Vec<Option<Loc>> = vec![None; nv];
        let mut code = Vec::new();
        for (at, &i) in order.iter().enumerate() {
            let n = &nodes[i];
            let ty = body.ty(n.out());
            if let Some(index) = n.op.parameter_index() {
                let Some(l) = param(self, index, ty) else { return Ok(None) };
                loc[n.out().index()] = Some(l);
                continue;
            }
            if n.num_results() != 1 {
                return Ok(None);
            }
            if n.inputs.is_empty() {
                // A constant or a generator (a `full`, an `iota`): evaluated
                // once, and spread from one element when all are the same.
                let value = crate::Cpu
                    .evaluate(n.op.as_ref(), &[], std::slice::from_ref(ty))
                    .unwrap_or_else(|| {
                        Err(Error::invalid(n.op.name(), "while", "could not be evaluated"))
                    })?
                    .swap_remove(0);
                let (value, ty) = match uniform(&value)? {
                    Some(one) => (one, &TensorType::new(ty.dtype(), vec![])),
                    None => (value, ty),
                };
                match self.leaf(Err(value), ty) {
                    Some(l) => loc[n.out().index()] = Some(l),
                    None => return Ok(None),
                }
                continue;
            }
            // A single element broadcast to the lanes' shape: its spread
            // register already is.
            if n.op.movement() == Some(anvil_core::Movement::BroadcastTo)
                && ty.shape() == self.shape
                && n.inputs.len() == 1
                && body.ty(n.inputs[0]).numel() == 1
            {
                if let Some(Loc::Reg(r)) = loc[n.inputs[0].index()] {
                    if !self.computed[r] {
                        loc[n.out().index()] = Some(Loc::Reg(r));
                        continue;
                    }
                }
                return Ok(None);
            }
            if n.op.elementwise_math().is_none() || ty.shape() != self.shape {
                return Ok(None);
            }
            let args: Option<Vec<Loc>> = n.inputs.iter().map(|i| loc[i.index()]).collect();
            let Some(args) = args else { return Ok(None) };
            // Not a register the step before reads (a chain cannot write
            // over its own operand).
            let avoid: Vec<Loc> = code.last().map(|s: &Step| s.args.clone()).unwrap_or_default();
            let out = self.reuse(ty.dtype(), &avoid);
            // Registers whose value is read for the last time here.
            for (k, i) in n.inputs.iter().enumerate() {
                if last[i.index()] == at && !n.inputs[..k].contains(i) {
                    if let Some(Loc::Reg(r)) = loc[i.index()] {
                        if self.computed[r] {
                            self.free.push(r);
                        }
                    }
                }
            }
            if args.contains(&Loc::Reg(out)) {
                return Ok(None);
            }
            let dtypes: Vec<DType> = n.inputs.iter().map(|i| body.ty(*i).dtype()).collect();
            let kernel = resolved(n.op.as_ref(), &dtypes, ty.dtype())
                .unwrap_or_else(|| Kernel::Block(Instr::new(n.op.clone(), Vec::new(), ty.dtype())));
            let step = Step { kernel, args, out };
            // Joined to the step before when it reads that step's value,
            // which nothing else reads.
            let joined = match (code.last(), previous) {
                (Some(prev), Some(v)) if uses[v] == 1 => {
                    chained(prev, &step).or_else(|| tested(prev, &step))
                }
                _ => None,
            };
            match (joined, code.last_mut()) {
                (Some(j), Some(last)) => *last = j,
                _ => code.push(step),
            }
            previous = Some(n.out().index());
            loc[n.out().index()] = Some(Loc::Reg(out));
        }
        let outs: Option<Vec<Loc>> = body.outputs().iter().map(|o| loc[o.index()]).collect();
        Ok(outs.map(|outs| (code, outs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anvil_core::{trace_with, Var};
    use anvil_ops::VarExt;

    /// A masked loop as `vmap` makes it: consts `a`, carries `x`, `it` and
    /// the flag; `x ← x/2 + a` on the lanes still running, which run while
    /// `x > 1` and for at most `limit` steps.
    fn masked(n: usize, limit: f64) -> While {
        masked_by(n, limit, |x, a| x * 0.5 + a)
    }

    /// The inputs of a masked body of three `f64` lane vectors and the
    /// flag, and its predicate (any flag set).
    fn three_and_a_flag(n: usize) -> ([TensorType; 4], Graph) {
        let f64n = TensorType::new(DType::F64, vec![n]);
        let types = [f64n.clone(), f64n.clone(), f64n, TensorType::new(DType::Bool, vec![n])];
        let cond = trace_with(&types, |v| Ok(vec![v[3].max(&[0], false)])).unwrap();
        (types, cond)
    }

    /// [`masked`] with the update `x ← update(x, a)`.
    fn masked_by(n: usize, limit: f64, update: impl Fn(&Var, &Var) -> Var) -> While {
        let (types, cond) = three_and_a_flag(n);
        let pred = |x: &Var, it: &Var| {
            x.gt(&x.full_like(1.0)).select(&it.lt(&it.full_like(limit)), &x.gt(&x.full_like(1.0)))
        };
        let body = trace_with(&types, |v| {
            let (a, x, it, on) = (&v[0], &v[1], &v[2], &v[3]);
            let x = on.select(&update(x, a), x);
            let it = on.select(&(it + 1.0), it);
            let go = pred(&x, &it);
            Ok(vec![x, it, go])
        })
        .unwrap();
        masked_loop(cond, body, 1)
    }

    /// The masked loop of `cond` and `body` whose first `consts` operands
    /// are loop-invariant, without a step limit.
    fn masked_loop(cond: Graph, body: Graph, consts: usize) -> While {
        While { cond: cond.into(), body: body.into(), consts, max_steps: None, masked: true }
    }

    /// Operands of [`masked_by`]'s loops: `a[k]`, `x[k]` for `k < n`, zero
    /// steps, and the flags `x > 1`.
    fn operands(n: usize, a: impl Fn(usize) -> f64, x: impl Fn(usize) -> f64) -> [Tensor; 4] {
        let x: Vec<f64> = (0..n).map(x).collect();
        let go: Vec<bool> = x.iter().map(|&v| v > 1.0).collect();
        [
            Tensor::from_vec((0..n).map(a).collect(), &[n]).unwrap(),
            Tensor::from_vec(x, &[n]).unwrap(),
            Tensor::zeros(&[n]).unwrap(),
            Tensor::from_vec(go, &[n]).unwrap(),
        ]
    }

    /// The chains of a lane loop's code, in order.
    fn chains_of(lanes: &LaneLoop) -> Vec<&Chain> {
        lanes
            .code
            .iter()
            .filter_map(|s| match &s.kernel {
                Kernel::F64Chain(c, _) => Some(c),
                _ => None,
            })
            .collect()
    }

    /// Asserts that the lane loop gives the plans' results on `args`.
    fn assert_as_plans(
        lanes: &LaneLoop,
        w: &While,
        args: &[Tensor],
        ctx: &Parallelism,
        what: &str,
    ) {
        let refs: Vec<&Tensor> = args.iter().collect();
        let got = lanes.run(&refs, ctx).unwrap();
        let want = by_plans(w, args);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.to_f64_vec(), w.to_f64_vec(), "{what}");
        }
    }

    /// The loop run as plans, a step at a time over the whole batch.
    fn by_plans(w: &While, args: &[Tensor]) -> Vec<Tensor> {
        let (cond, body) =
            (crate::compile(w.cond.graph()).unwrap(), crate::compile(w.body.graph()).unwrap());
        let ctx = Parallelism::default();
        let mut args = args.to_vec();
        let mut steps = 0;
        while w.max_steps.is_none_or(|m| steps < m)
            && cond.run(&args, &ctx).unwrap()[0].item().unwrap() == 1.0
        {
            let next = body.run(&args, &ctx).unwrap();
            for (slot, v) in args[w.consts..].iter_mut().zip(next) {
                *slot = v;
            }
            steps += 1;
        }
        args.split_off(w.consts)
    }

    #[test]
    fn lane_groups_give_the_plans_results() {
        for (n, limit, max_steps) in [
            (1, 50.0, None),
            (300, 50.0, None),
            (9000, 6.0, None),
            (20_000, 50.0, None),
            (700, 50.0, Some(4)),
        ] {
            let mut w = masked(n, limit);
            w.max_steps = max_steps;
            let lanes = LaneLoop::new(&w).unwrap().expect("an elementwise masked body");
            let args = operands(n, |k| (k % 13) as f64 * 0.3, |k| 1.0 + (k % 101) as f64 * 7.5);
            for ctx in [Parallelism::default(), Parallelism::default().threads(1)] {
                assert_as_plans(&lanes, &w, &args, &ctx, &format!("n = {n}, limit = {limit}"));
            }
        }
    }

    #[test]
    fn kept_registers_serve_later_runs_with_other_operands() {
        // A scalar operand spread over a register, and a carry started
        // from a register the prelude computes (swapped in): run after run
        // on kept register sets, with the scalar changed and changed back,
        // each run gives the plans' results.
        let n = 5000;
        let f64n = TensorType::new(DType::F64, vec![n]);
        let types = [
            TensorType::new(DType::F64, vec![]),
            f64n.clone(),
            f64n,
            TensorType::new(DType::Bool, vec![n]),
        ];
        let cond = trace_with(&types, |v| Ok(vec![v[3].max(&[0], false)])).unwrap();
        let body = trace_with(&types, |v| {
            let (a, x, it, on) = (&v[0], &v[1], &v[2], &v[3]);
            let x = on.select(&(x * 0.5 + a.broadcast_to(&[n])), x);
            let it = on.select(&(it + 1.0), it);
            let go = x
                .gt(&x.full_like(1.0))
                .select(&it.lt(&it.full_like(50.0)), &x.gt(&x.full_like(1.0)));
            Ok(vec![x, it, go])
        })
        .unwrap();
        let w = masked_loop(cond, body, 1);
        // The prelude: the initial x and flag from one input vector.
        let prelude = trace_with(&types[..2], |v| {
            let x = &v[1] * 2.0;
            let go = x.gt(&x.full_like(1.0));
            Ok(vec![v[0].clone(), x, v[1].zeros_like(), go])
        })
        .unwrap();
        let lanes = LaneLoop::with_prelude(&w, &prelude)
            .unwrap()
            .expect("a prelude of the loop's operands");
        assert!(lanes.start.contains(&Start::Swap), "{:?}", lanes.start);
        let x: Vec<f64> = (0..n).map(|k| 1.0 + (k % 101) as f64 * 7.5).collect();
        let x = Tensor::from_vec(x, &[n]).unwrap();
        for a in [0.25, 0.75, 0.25, -0.0, 0.0] {
            let a = Tensor::from_vec(vec![a], &[]).unwrap();
            let refs = [&a, &x];
            let want = by_plans(
                &w,
                &crate::compile(&prelude)
                    .unwrap()
                    .run(&[a.clone(), x.clone()], &Parallelism::default())
                    .unwrap(),
            );
            for ctx in [Parallelism::default(), Parallelism::default().threads(1)] {
                let got = lanes.run(&refs, &ctx).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.to_f64_vec(), w.to_f64_vec(), "a = {a:?}");
                }
            }
        }
    }

    #[test]
    fn groups_narrow_when_a_lane_has_many_registers() {
        // A small body's groups are the widest; one whose lanes have more
        // registers than GROUP_BYTES holds at that width gets narrower
        // groups, a whole number of the widest strips (extra registers
        // stand for a larger body), and the same results, over several
        // groups and a partial one.
        let n = 5000;
        let w = masked(n, 50.0);
        let mut lanes = LaneLoop::new(&w).unwrap().expect("an elementwise masked body");
        assert_eq!(lanes.group(), LANES);
        lanes.regs.extend([DType::F64; 60]);
        let g = lanes.group();
        assert!((MIN_GROUP..LANES).contains(&g) && g % MIN_GROUP == 0, "{g}");
        assert!(g * lanes.regs.len() * 8 <= GROUP_BYTES, "{g}");
        let args = operands(n, |k| (k % 13) as f64 * 0.3, |k| 1.0 + (k % 101) as f64 * 7.5);
        assert_as_plans(&lanes, &w, &args, &Parallelism::default(), "narrow groups");
        lanes.regs.extend([DType::F64; 5000]);
        assert_eq!(lanes.group(), MIN_GROUP);
        assert_as_plans(&lanes, &w, &args, &Parallelism::default(), "narrowest groups");
    }

    #[test]
    fn a_single_element_broadcast_in_a_body_is_its_spread_register() {
        // x/2 + a + broadcast(0.25): the broadcast is no instruction, and
        // the loop gives the plans' results.
        let n = 700;
        let w = masked_by(n, 50.0, |x, a| x * 0.5 + a + x.scalar_like(0.25).broadcast_to(&[n]));
        let body = w.body.graph();
        let broadcast = |(_, node): (anvil_core::NodeId, &anvil_core::Node)| {
            node.op.movement() == Some(anvil_core::Movement::BroadcastTo)
        };
        assert!(body.iter().any(broadcast), "{body}");
        let lanes = LaneLoop::new(&w).unwrap().expect("a broadcast scalar qualifies");
        let args = operands(n, |k| (k % 13) as f64 * 0.3, |k| 1.0 + (k % 101) as f64 * 7.5);
        assert_as_plans(&lanes, &w, &args, &Parallelism::sequential(), "broadcast");
    }

    #[test]
    fn results_nobody_reads_are_not_written() {
        let n = 5000;
        let w = masked(n, 50.0);
        let mut lanes = LaneLoop::new(&w).unwrap().expect("an elementwise masked body");
        lanes.results_read(&[true, false, false]);
        let args = operands(n, |k| (k % 13) as f64 * 0.3, |k| 1.0 + (k % 101) as f64 * 7.5);
        let want = by_plans(&w, &args);
        for ctx in [Parallelism::default(), Parallelism::sequential()] {
            let got = lanes.run(&args.iter().collect::<Vec<_>>(), &ctx).unwrap();
            assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec());
            // The others: their initial carries, the same buffers.
            assert!(got[1].same_buffer(&args[2]) && got[2].same_buffer(&args[3]));
        }
    }

    #[test]
    fn a_transcendental_function_has_the_bits_of_the_plans() {
        // The plans compute exp with the CPU's vectorised math, not libm's.
        let n = 1000;
        let w = masked_by(n, 50.0, |x, a| x * 0.5 + (-x).exp() * a);
        let lanes = LaneLoop::new(&w).unwrap().expect("an elementwise masked body");
        let args = operands(n, |k| 0.3 + (k % 17) as f64 * 0.05, |k| 1.0 + (k % 101) as f64 * 0.37);
        assert_as_plans(&lanes, &w, &args, &Parallelism::sequential(), "exp");
    }

    #[test]
    fn f64_arithmetic_runs_by_loops_resolved_once() {
        // x * 0.5 + a: one chain (the sum reads the product, which nothing
        // else reads), ending in the select of the new x where the lane is
        // on; it + 1.0 and its select: a chain of one step and a pick;
        // comparisons by their resolved loops, found by the ops' facts, the
        // last joined by the flag's select that reads it (a test with a
        // pick); the constants `full` makes, spread once: no block math.
        let lanes = LaneLoop::new(&masked(10, 50.0)).unwrap().unwrap();
        let chains = chains_of(&lanes);
        assert_eq!(
            chains,
            [
                &Chain { first: Arith::Mul, links: vec![(Arith::Add, true)], pick: Some(true) },
                &Chain { first: Arith::Add, links: vec![], pick: Some(true) }
            ]
        );
        // 0.5 and 1.0, the second operands, are spread scalars (broadcast).
        let scalars: Vec<Scalars> = lanes
            .code
            .iter()
            .filter_map(|s| match s.kernel {
                Kernel::F64Chain(_, scalars) => Some(scalars),
                _ => None,
            })
            .collect();
        assert_eq!(scalars, [0b10, 0b10]);
        let count = |f: fn(&Kernel) -> bool| lanes.code.iter().filter(|s| f(&s.kernel)).count();
        assert_eq!(count(|k| matches!(k, Kernel::F64Binary(..))), 0);
        assert_eq!(count(|k| matches!(k, Kernel::F64Compare(..))), 2, "{:?}", lanes.code);
        let picked =
            |k: &Kernel| matches!(k, Kernel::Test(Test { abs: false, pick: Some(_), .. }, _));
        assert_eq!(count(picked), 1, "{:?}", lanes.code);
        assert_eq!(count(|k| matches!(k, Kernel::Select)), 0, "{:?}", lanes.code);
        assert_eq!(count(|k| matches!(k, Kernel::Block(_))), 0, "{:?}", lanes.code);
        assert!(lanes.code.iter().all(|s| !s.args.contains(&Loc::Reg(s.out))));
    }

    #[test]
    fn a_result_register_is_never_one_the_step_it_may_join_reads() {
        // Newton on x^3 + a x - b (W13's body): t = x * x is read twice, last
        // by t * 3, so its register is free when the sum after that product
        // is given one. Were the sum given it, the product's chain would
        // write over its own operand and could not take the sum: the
        // derivative t * 3 + a, the division, the update and the select of
        // the updated value where the lane is on are one chain.
        let n = 300;
        let (types, cond) = three_and_a_flag(n);
        let body = trace_with(&types, |v| {
            let (a, b, x, on) = (&v[0], &v[1], &v[2], &v[3]);
            let t = x * x;
            let f = x * &(&t + a) - b;
            let x = on.select(&(x - &(f / (&t * 3.0 + a))), x);
            let go = (&x * &(&x * &x + a) - b).abs().ge(&x.full_like(1e-12));
            Ok(vec![x, go])
        })
        .unwrap();
        let w = While { max_steps: Some(30), ..masked_loop(cond, body, 2) };
        let lanes = LaneLoop::new(&w).unwrap().expect("an elementwise masked body");
        let derivative = Chain {
            first: Arith::Mul,
            links: vec![(Arith::Add, true), (Arith::Div, false), (Arith::Sub, false)],
            pick: Some(true),
        };
        let chains = chains_of(&lanes);
        assert!(chains.contains(&&derivative), "{:?}", lanes.code);
        assert!(lanes.code.iter().all(|s| !s.args.contains(&Loc::Reg(s.out))));
        // |f| >= tol, the flag, is one test that takes in the abs (tol a
        // broadcast scalar).
        let flag = Test { abs: true, cmp: Compare::Ge, pick: None };
        assert!(
            lanes.code.iter().any(|s| matches!(s.kernel, Kernel::Test(t, 0b10) if t == flag)),
            "{:?}",
            lanes.code
        );
        let a: Vec<f64> = (0..n).map(|k| 1.25 + 0.75 * (0.7 * (k as f64 + 1.0)).sin()).collect();
        let b: Vec<f64> = (0..n).map(|k| 3.0 * (1.3 * (k as f64 + 1.0)).cos()).collect();
        let args = [
            Tensor::from_vec(a, &[n]).unwrap(),
            Tensor::from_vec(b, &[n]).unwrap(),
            Tensor::zeros(&[n]).unwrap(),
            Tensor::from_vec(vec![true; n], &[n]).unwrap(),
        ];
        assert_as_plans(&lanes, &w, &args, &Parallelism::default(), "Newton");
    }

    #[test]
    fn picks_of_both_senses_after_reordering_match_the_plans() {
        // Three carry updates computed before any of their selects (the
        // schedule moves each select next to its branch), picks of both
        // senses (`off` = not on), one chain at the operand limit.
        for n in [1, 37, 128, 256, 300, 700] {
            let f64n = TensorType::new(DType::F64, vec![n]);
            let types = [
                f64n.clone(),
                f64n.clone(),
                f64n.clone(),
                f64n,
                TensorType::new(DType::Bool, vec![n]),
            ];
            let cond = trace_with(&types, |v| Ok(vec![v[4].max(&[0], false)])).unwrap();
            let body = trace_with(&types, |v| {
                let (a, x, y, it, on) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
                let off = on.select(&on.full_like(0.0), &on.full_like(1.0));
                let nx = x * 0.5 + a;
                let ny = (((((y * 0.75) - a) / 3.0) + a) * 0.5) - a;
                let nit = it + 1.0;
                let x2 = off.select(x, &nx);
                let y2 = on.select(&ny, y);
                let it2 = off.select(it, &nit);
                let big = x2.gt(&x2.full_like(1.0));
                let go = big.select(&it2.lt(&it2.full_like(40.0)), &big);
                Ok(vec![x2, y2, it2, go])
            })
            .unwrap();
            let w = masked_loop(cond, body, 1);
            let lanes = LaneLoop::new(&w).unwrap().expect("qualifies");
            let chains = chains_of(&lanes);
            let want_x =
                Chain { first: Arith::Mul, links: vec![(Arith::Add, true)], pick: Some(false) };
            let want_y = Chain {
                first: Arith::Mul,
                links: vec![
                    (Arith::Sub, true),
                    (Arith::Div, true),
                    (Arith::Add, true),
                    (Arith::Mul, true),
                    (Arith::Sub, true),
                ],
                pick: Some(true),
            };
            let want_it = Chain { first: Arith::Add, links: vec![], pick: Some(false) };
            assert!(chains.contains(&&want_x), "{:?}", lanes.code);
            assert!(chains.contains(&&want_y), "{:?}", lanes.code);
            assert!(chains.contains(&&want_it), "{:?}", lanes.code);
            assert!(lanes.code.iter().all(|s| !s.args.contains(&Loc::Reg(s.out))));
            let xs: Vec<f64> = (0..n).map(|k| 1.0 + (k % 101) as f64 * 7.5).collect();
            let go: Vec<bool> = xs.iter().map(|&v| v > 1.0 && (v as i64) % 3 != 0).collect();
            let args = [
                Tensor::from_vec((0..n).map(|k| (k % 13) as f64 * 0.3).collect(), &[n]).unwrap(),
                Tensor::from_vec(xs, &[n]).unwrap(),
                Tensor::from_vec((0..n).map(|k| (k % 7) as f64 - 2.5).collect(), &[n]).unwrap(),
                Tensor::zeros(&[n]).unwrap(),
                Tensor::from_vec(go, &[n]).unwrap(),
            ];
            for ctx in [Parallelism::default(), Parallelism::sequential()] {
                assert_as_plans(&lanes, &w, &args, &ctx, &format!("picks, n = {n}"));
            }
        }
    }

    #[test]
    fn chains_keep_the_bits_of_their_steps_one_by_one() {
        // Every operation with the running value on either side, on
        // lengths around the strip (tails included) and special values.
        // Bits compared, except a NaN's sign and payload (which Rust leaves
        // unspecified: the compiler may commute an addition's operands).
        let canonical = |v: f64| if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() };
        let ops = [Arith::Add, Arith::Sub, Arith::Mul, Arith::Div];
        let links: Vec<(Arith, bool)> =
            ops.iter().flat_map(|&o| [(o, true), (o, false)]).take(CHAIN_ARGS - 2).collect();
        let specials = [0.0, -0.0, 1e-310, -3.5, f64::INFINITY, f64::NAN, 1e300, 7.25];
        for (first, pick) in
            ops.into_iter().flat_map(|o| [(o, None), (o, Some(true)), (o, Some(false))])
        {
            // A pick takes one more operand: one link fewer.
            let links = links[..links.len() - usize::from(pick.is_some())].to_vec();
            let chain = Chain { first, links, pick };
            // Lengths around the AVX-512 and AVX2 strips too (whole strips
            // of 128 or 64 lanes, then the generic strips for the rest).
            // Operands as they come; with every other one from the second
            // a spread scalar (broadcast by the vector loops); with the
            // first step's two operands one slice (`x ∘ x`).
            // Under Miri (which checks the vector loops' raw pointers),
            // lengths with a whole AVX2 strip and a tail only.
            let lengths: &[usize] = if cfg!(miri) {
                &[STRIP + 3, 2 * STRIP + 5]
            } else {
                &[1, 5, STRIP - 1, STRIP, STRIP + 3, 3 * STRIP + 7, 128, 129, 255, 256 + 37]
            };
            for (n, variant) in lengths.iter().flat_map(|&n| [(n, 0), (n, 1), (n, 2)]) {
                let mut args: Vec<Vec<f64>> = (0..chain.operands())
                    .map(|k| {
                        (0..n)
                            .map(|i| match (i * 7 + k * 3) % 11 {
                                j if j < specials.len() => specials[j],
                                j => (i as f64 + 1.0) * 0.37 - j as f64,
                            })
                            .collect()
                    })
                    .collect();
                let mut scalars: Scalars = 0;
                if variant == 1 {
                    for k in (1..chain.operands()).step_by(2) {
                        args[k] = vec![[2.5, -3.5, 7.25, 1e-310][k % 4]; n];
                        scalars |= 1 << k;
                    }
                }
                if variant == 2 {
                    args[1] = args[0].clone();
                }
                // Flags in runs of uneven lengths, across register bounds.
                let mask: Vec<bool> = (0..n).map(|i| (i * i / 5 + i / 3) % 3 == 0).collect();
                let mask = if pick.is_some() { mask } else { Vec::new() };
                let want: Vec<u64> = (0..n)
                    .map(|i| {
                        let mut acc = [args[0][i]];
                        apply(first, true, &mut acc, &[args[1][i]]);
                        for (k, &(op, left)) in chain.links.iter().enumerate() {
                            let x = args[2 + k][i];
                            acc[0] = match (op, left) {
                                (Arith::Add, true) => acc[0] + x,
                                (Arith::Add, false) => x + acc[0],
                                (Arith::Sub, true) => acc[0] - x,
                                (Arith::Sub, false) => x - acc[0],
                                (Arith::Mul, true) => acc[0] * x,
                                (Arith::Mul, false) => x * acc[0],
                                (Arith::Div, true) => acc[0] / x,
                                (Arith::Div, false) => x / acc[0],
                                (Arith::Neg, _) => -acc[0],
                            };
                        }
                        let other = args[args.len() - 1][i];
                        match pick {
                            Some(keep) if mask[i] != keep => other.to_bits(),
                            _ => canonical(acc[0]),
                        }
                    })
                    .collect();
                let mut refs: Vec<&[f64]> = args.iter().map(Vec::as_slice).collect();
                if variant == 2 {
                    refs[1] = refs[0];
                }
                for w in Width::available() {
                    let mut out = vec![0.0; n];
                    chain.run_at(w, &refs, &mask, &mut out, scalars);
                    let got: Vec<u64> = out
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| match pick {
                            Some(keep) if mask[i] != keep => v.to_bits(),
                            _ => canonical(v),
                        })
                        .collect();
                    assert_eq!(
                        got, want,
                        "{first:?}, pick {pick:?}, n = {n}, {w:?}, variant {variant}"
                    );
                }
            }
        }
    }

    #[test]
    fn resolved_kernels_keep_the_bits_of_the_block_math() {
        // Every comparison, selects of f64 and bool, and unary maps (those
        // without vectorised CPU math), found by their facts, against the
        // ops' block math: special values (NaN
        // in either branch of a select, NaN and infinities compared),
        // lengths around a vector and a register.
        use anvil_ops::elementwise::{Abs, Eq, Exp, Ge, Gt, Le, Lt, Ne, Select, Sin};
        let specials = [0.0, -0.0, f64::NAN, -f64::NAN, f64::INFINITY, -1e-310, 2.5, -7.0];
        let value = |i: usize, k: usize| specials[(i * 5 + k * 3) % specials.len()];
        let at = BlockAt { start: 0, shape: &[] };
        let block = |op: &dyn Op, args: &[Block<'_>], out: BlockMut<'_>| {
            op.elementwise_math().unwrap().eval_block(args, out, at).unwrap();
        };
        for n in [1, 3, 8, 31, 32, 35, 103, LANES] {
            let a: Vec<f64> = (0..n).map(|i| value(i, 0)).collect();
            let b: Vec<f64> = (0..n).map(|i| value(i, 1)).collect();
            let c: Vec<bool> = (0..n).map(|i| i % 3 != 1).collect();
            let d: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
            let ops: [&dyn Op; 6] = [&Lt, &Le, &Gt, &Ge, &Eq, &Ne];
            for op in ops {
                let Some(Kernel::F64Compare(f, _)) = resolved(op, &[DType::F64; 2], DType::Bool)
                else {
                    panic!("{} by a loop", op.name())
                };
                let (mut got, mut want) = (vec![false; n], vec![true; n]);
                f(&a, &b, &mut got);
                block(op, &[Block::F64(&a), Block::F64(&b)], BlockMut::Bool(&mut want));
                assert_eq!(got, want, "{}, n = {n}", op.name());
            }
            // Ops with vectorised CPU math run it, as in a plan.
            for op in [&Sin as &dyn Op, &Exp] {
                assert!(resolved(op, &[DType::F64], DType::F64).is_none(), "{}", op.name());
            }
            let ops: [&dyn Op; 3] =
                [&Abs, &anvil_ops::elementwise::Sqrt, &anvil_ops::elementwise::Tan];
            for op in ops {
                let (Some(Kernel::F64Map(f)) | Some(Kernel::Abs(f))) =
                    resolved(op, &[DType::F64], DType::F64)
                else {
                    panic!("{} by a loop", op.name())
                };
                let (mut got, mut want) = (vec![0.0; n], vec![1.0; n]);
                f(&a, &mut got);
                block(op, &[Block::F64(&a)], BlockMut::F64(&mut want));
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{}, n = {n}", op.name());
            }
            // Selects, through the step that runs them.
            let sel = resolved(&Select, &[DType::Bool, DType::F64, DType::F64], DType::F64);
            assert!(matches!(sel, Some(Kernel::Select)));
            let (mut got, mut want) = (vec![0.0; n], vec![1.0; n]);
            select_f64(&c, &a, &b, &mut got);
            block(
                &Select,
                &[Block::Bool(&c), Block::F64(&a), Block::F64(&b)],
                BlockMut::F64(&mut want),
            );
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "select, n = {n}");
            let picked: Vec<u64> =
                (0..n).map(|i| if c[i] { a[i] } else { b[i] }.to_bits()).collect();
            assert_eq!(bits(&got), picked, "select picks the bits, n = {n}");
            let sel = resolved(&Select, &[DType::Bool; 3], DType::Bool);
            assert!(matches!(sel, Some(Kernel::Select)));
            let (mut got, mut want) = (vec![false; n], vec![true; n]);
            select_bool(&c, &d, &c, &mut got);
            block(
                &Select,
                &[Block::Bool(&c), Block::Bool(&d), Block::Bool(&c)],
                BlockMut::Bool(&mut want),
            );
            assert_eq!(got, want, "bool select, n = {n}");
            let and: Vec<bool> = (0..n).map(|i| c[i] && d[i]).collect();
            assert_eq!(got, and, "select(c, d, c) is c && d, n = {n}");
        }
        // Other dtypes keep the block math.
        assert!(resolved(&Lt, &[DType::F32; 2], DType::Bool).is_none());
        assert!(resolved(&Select, &[DType::Bool, DType::I64, DType::I64], DType::I64).is_none());
    }

    #[test]
    fn tests_keep_the_bools_of_their_steps() {
        // Every comparison, of a value or its absolute value, alone or
        // picked with a bool select of either sense, against the ops' block
        // math step by step: NaN, signed zeros, infinities and subnormals,
        // lengths below, at and around the eight lanes of the AVX2 loop.
        use anvil_ops::elementwise::{Eq, Ge, Gt, Le, Lt, Ne, Select};
        let specials = [
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            -1e-310,
            1e-310,
            2.5,
            -2.5,
            1.0,
        ];
        let value = |i: usize, k: usize| specials[(i * 7 + k * 3 + i / 11) % specials.len()];
        let at = BlockAt { start: 0, shape: &[] };
        let block = |op: &dyn Op, args: &[Block<'_>], out: BlockMut<'_>| {
            op.elementwise_math().unwrap().eval_block(args, out, at).unwrap();
        };
        let ops: [(&dyn Op, Compare); 6] = [
            (&Lt, Compare::Lt),
            (&Le, Compare::Le),
            (&Gt, Compare::Gt),
            (&Ge, Compare::Ge),
            (&Eq, Compare::Eq),
            (&Ne, Compare::Ne),
        ];
        // The second operand also as a spread scalar (broadcast): each
        // special value in turn.
        // Under Miri (which checks the vector loop's raw pointers), two
        // lengths with whole eight-lane blocks and a tail, and three of the
        // broadcast bounds.
        let (lengths, bounds): (&[usize], Vec<usize>) = if cfg!(miri) {
            (&[9, 31], vec![2, 7, specials.len()])
        } else {
            (&[1, 7, 8, 9, 31, 64, 103, LANES], (0..=specials.len()).collect())
        };
        let cases = lengths.iter().flat_map(|&n| bounds.iter().map(move |&u| (n, u)));
        for (n, uniform) in cases {
            let a: Vec<f64> = (0..n).map(|i| value(i, 0)).collect();
            let (b, scalars): (Vec<f64>, Scalars) = match specials.get(uniform) {
                Some(&v) => (vec![v; n], 0b10),
                None => ((0..n).map(|i| value(i, 1)).collect(), 0),
            };
            let other: Vec<bool> = (0..n).map(|i| i % 3 != 1).collect();
            let mask: Vec<bool> = (0..n).map(|i| i % 5 < 2).collect();
            for (op, cmp) in ops {
                for abs in [false, true] {
                    let mut x = a.clone();
                    if abs {
                        block(&Abs, &[Block::F64(&a)], BlockMut::F64(&mut x));
                    }
                    let mut r = vec![false; n];
                    block(op, &[Block::F64(&x), Block::F64(&b)], BlockMut::Bool(&mut r));
                    for pick in [None, Some(true), Some(false)] {
                        let want = match pick {
                            None => r.clone(),
                            Some(keep) => {
                                let (t, f) = if keep { (&r, &other) } else { (&other, &r) };
                                let mut out = vec![false; n];
                                let args = [Block::Bool(&mask), Block::Bool(t), Block::Bool(f)];
                                block(&Select, &args, BlockMut::Bool(&mut out));
                                out
                            }
                        };
                        let test = Test { abs, cmp, pick };
                        let (o, m): (&[bool], &[bool]) =
                            if pick.is_some() { (&other, &mask) } else { (&[], &[]) };
                        let mut got = vec![!want[0]; n];
                        test.run(&a, &b, o, m, &mut got, scalars);
                        assert_eq!(got, want, "{test:?}, n = {n}, scalars {scalars:b}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_test_takes_in_the_abs_before_it_and_the_flags_select_after_it() {
        // The flag of a masked loop, `|x - a| <op> tol` (or `tol <op> |x -
        // a|`) while the step count is below a limit, each comparison:
        // one test with the abs, one with the pick, and the lanes the plans'.
        let n = 203;
        let (types, cond) = three_and_a_flag(n);
        type Cmp = fn(&Var, &Var) -> Var;
        let cmps: [(Cmp, Compare); 6] = [
            (|p, q| p.lt(q), Compare::Lt),
            (|p, q| p.le(q), Compare::Le),
            (|p, q| p.gt(q), Compare::Gt),
            (|p, q| p.ge(q), Compare::Ge),
            (|p, q| p.equal(q), Compare::Eq),
            (|p, q| p.not_equal(q), Compare::Ne),
        ];
        for (f, cmp) in cmps {
            for flip in [false, true] {
                let body = trace_with(&types, |v| {
                    let (a, x, it, on) = (&v[0], &v[1], &v[2], &v[3]);
                    let x = on.select(&(x * 0.5 + a * 0.5), x);
                    let it = on.select(&(it + 1.0), it);
                    let (d, tol) = ((&x - a).abs(), x.full_like(1e-3));
                    let near = if flip { f(&tol, &d) } else { f(&d, &tol) };
                    let go = near.select(&it.lt(&it.full_like(40.0)), &near);
                    Ok(vec![x, it, go])
                })
                .unwrap();
                let w = masked_loop(cond.clone(), body, 1);
                let lanes = LaneLoop::new(&w).unwrap().expect("an elementwise masked body");
                let cmp = if flip { flipped(cmp) } else { cmp };
                let abs = Test { abs: true, cmp, pick: None };
                assert!(
                    lanes.code.iter().any(|s| matches!(s.kernel, Kernel::Test(t, _) if t == abs)),
                    "{cmp:?}: {:?}",
                    lanes.code
                );
                let picked = Test { abs: false, cmp: Compare::Lt, pick: Some(true) };
                assert!(
                    lanes
                        .code
                        .iter()
                        .any(|s| matches!(s.kernel, Kernel::Test(t, _) if t == picked)),
                    "{:?}",
                    lanes.code
                );
                let a: Vec<f64> = (0..n).map(|k| (0.37 * k as f64).sin()).collect();
                let x: Vec<f64> =
                    (0..n).map(|k| if k % 17 == 0 { 1.0 } else { 2.0 + k as f64 }).collect();
                let args = [
                    Tensor::from_vec(a, &[n]).unwrap(),
                    Tensor::from_vec(x, &[n]).unwrap(),
                    Tensor::zeros(&[n]).unwrap(),
                    Tensor::from_vec((0..n).map(|k| k % 29 != 3).collect(), &[n]).unwrap(),
                ];
                assert_as_plans(&lanes, &w, &args, &Parallelism::default(), &format!("{cmp:?}"));
            }
        }
    }

    #[test]
    fn only_masked_elementwise_loops_run_by_lane_groups() {
        let mut w = masked(10, 50.0);
        assert!(LaneLoop::new(&w).unwrap().is_some());
        w.masked = false;
        assert!(LaneLoop::new(&w).unwrap().is_none(), "an unmasked loop promises nothing");
        // A body reading a sum over the lanes: not elementwise.
        let mut w = masked(10, 50.0);
        let types = w.body.input_types();
        let body = trace_with(&types, |v| {
            let (a, x, it, on) = (&v[0], &v[1], &v[2], &v[3]);
            let x = on.select(&(x * 0.5 + &a.sum_all()), x);
            Ok(vec![x.clone(), it + 1.0, x.gt(&x.full_like(1.0))])
        })
        .unwrap();
        w.body = body.into();
        assert!(LaneLoop::new(&w).unwrap().is_none(), "a body with a reduction");
    }
}
