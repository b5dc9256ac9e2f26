//! The kernels of the higher-order ops. Each compiles its body into a plan
//! once, when the enclosing plan is built ([`crate::Kernel::Prepare`]), and
//! runs it on every call.
//!
//! `map` runs its body on every slice, in parallel across the batch when
//! there is enough work. Each iteration runs its body sequentially, so the
//! two levels of parallelism never oversubscribe the pool.

use crate::contraction::{Background, Chunk, Collector, Sums};
use crate::fusion::in_place;
use crate::kernels::lanes::LaneLoop;
use crate::lane_prelude::LaneWhile;
use crate::micro::{Body, Buf, Micro, State};
use crate::placement::{place, Contraction, Place, PlacedScan};
use crate::{compile, register_kernel, Parallelism, Plan, Prepared};
use anvil_core::{Block, Error, Op, Result, Tensor, TensorType};
use anvil_ops::cond::Cond;
use anvil_ops::control::{CustomJvpCall, CustomVjpCall, CustomVjpTangent, Map};
use anvil_ops::scan::Scan;
use anvil_ops::while_loop::While;
use rayon::prelude::*;

/// A [`Map`] with its body compiled.
#[derive(Debug)]
struct MapPlan {
    body: Plan,
    mapped: Vec<bool>,
    size: usize,
}

fn prepare_map(op: &dyn Op, _: &[TensorType], _: &[TensorType]) -> Result<Box<dyn Prepared>> {
    let m = op.try_downcast::<Map>()?;
    Ok(Box::new(MapPlan { body: compile(&m.body)?, mapped: m.mapped.clone(), size: m.size }))
}

impl Prepared for MapPlan {
    fn run(
        &self,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        if inputs.len() != self.mapped.len() {
            return Err(Error::Arity {
                what: "map".into(),
                kind: "inputs".into(),
                expected: self.mapped.len(),
                got: inputs.len(),
            });
        }
        let inner = Parallelism::sequential();
        let run_one = |i: usize| -> Result<Vec<Tensor>> {
            let args = inputs
                .iter()
                .zip(&self.mapped)
                .map(|(t, &mapped)| if mapped { t.select_axis(0, i) } else { Ok((*t).clone()) })
                .collect::<Result<Vec<Tensor>>>()?;
            self.body.run(&args, &inner)
        };
        // A rough count of the work: every body node touches about an
        // output's worth of elements per iteration.
        let per_iter: usize = outs.iter().map(TensorType::numel).sum();
        let work = per_iter.max(1).saturating_mul(self.body.graph().len());
        let parts: Vec<Vec<Tensor>> = if self.size > 1 && ctx.parallel(work) {
            (0..self.size).into_par_iter().map(run_one).collect::<Result<_>>()?
        } else {
            (0..self.size).map(run_one).collect::<Result<_>>()?
        };
        outs.iter()
            .enumerate()
            .map(|(k, ty)| {
                if parts.is_empty() {
                    return Tensor::zeros_of(ty.shape(), ty.dtype());
                }
                let column: Vec<Tensor> = parts.iter().map(|p| p[k].clone()).collect();
                Tensor::stack(&column, 0)
            })
            .collect()
    }
}

register_kernel!(Map, prepare: prepare_map);

/// A custom-derivative call: its primal function, compiled.
#[derive(Debug)]
struct CallPlan(Plan);

fn prepare_custom_call(
    op: &dyn Op,
    _: &[TensorType],
    _: &[TensorType],
) -> Result<Box<dyn Prepared>> {
    let primal = match op.downcast_ref::<CustomJvpCall>() {
        Some(c) => &c.primal,
        None => &op.try_downcast::<CustomVjpCall>()?.primal,
    };
    Ok(Box::new(CallPlan(compile(primal)?)))
}

impl Prepared for CallPlan {
    fn run(&self, inputs: &[&Tensor], _: &[TensorType], ctx: &Parallelism) -> Result<Vec<Tensor>> {
        let args: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        self.0.run(&args, ctx)
    }
}

/// A [`CustomVjpTangent`] has no forward evaluation: the function only has
/// a reverse-mode derivative.
pub fn custom_vjp_tangent(
    op: &dyn Op,
    _: &[&Tensor],
    _: &[TensorType],
    _: &Parallelism,
) -> Result<Vec<Tensor>> {
    Err(Error::MissingRule {
        op: op.name().into(),
        what: "forward-mode derivative".into(),
        hint:
            " (a custom_vjp function supports reverse mode only; use custom_jvp for forward mode)"
                .into(),
    })
}

register_kernel!(CustomJvpCall, prepare: prepare_custom_call);
register_kernel!(CustomVjpCall, prepare: prepare_custom_call);
register_kernel!(CustomVjpTangent, many: custom_vjp_tangent);

// ------------------------------------------------------------- cond

/// A [`Cond`] with its branches compiled.
#[derive(Debug)]
struct CondPlan(Vec<Plan>);

fn prepare_cond(op: &dyn Op, _: &[TensorType], _: &[TensorType]) -> Result<Box<dyn Prepared>> {
    let c = op.try_downcast::<Cond>()?;
    Ok(Box::new(CondPlan(c.branches.iter().map(|b| compile(b)).collect::<Result<_>>()?)))
}

impl Prepared for CondPlan {
    fn run(&self, inputs: &[&Tensor], _: &[TensorType], ctx: &Parallelism) -> Result<Vec<Tensor>> {
        let (index, operands) = inputs
            .split_first()
            .ok_or_else(|| Error::invalid("cond", "index", "missing (the first operand)"))?;
        // Clamped to the branches, as in JAX.
        let last = self.0.len().saturating_sub(1);
        let k = (index.item()?.max(0.0) as usize).min(last);
        let args: Vec<Tensor> = operands.iter().map(|t| (*t).clone()).collect();
        self.0[k].run(&args, ctx)
    }
}

register_kernel!(Cond, prepare: prepare_cond);

// ------------------------------------------------------------- scan

/// A [`Scan`] with its body compiled (straight-line code when small).
#[derive(Debug)]
struct ScanPlan {
    body: Body,
    consts: usize,
    carries: usize,
    length: usize,
    reverse: bool,
    /// The scan's operands (a [`PlacedScan`] has the partial chunks after).
    operands: usize,
    /// Per stacked result, its place in a final array (see
    /// [`crate::placement`]); empty for a plain scan.
    places: Vec<Option<Place>>,
    /// Per stacked result, the product it is summed into (see
    /// [`crate::contraction`]); empty for a plain scan.
    contractions: Vec<Option<Contraction>>,
}

fn scan_plan(
    s: &Scan,
    places: Vec<Option<Place>>,
    contractions: Vec<Option<Contraction>>,
) -> Result<ScanPlan> {
    let consts: Vec<bool> = (0..s.body.inputs().len()).map(|i| i < s.consts).collect();
    Ok(ScanPlan {
        body: Body::compile_invariant(&s.body, &consts)?,
        consts: s.consts,
        carries: s.carries,
        length: s.length,
        reverse: s.reverse,
        operands: s.body.inputs().len(),
        places,
        contractions,
    })
}

fn prepare_scan(op: &dyn Op, _: &[TensorType], _: &[TensorType]) -> Result<Box<dyn Prepared>> {
    Ok(Box::new(scan_plan(op.try_downcast::<Scan>()?, Vec::new(), Vec::new())?))
}

fn prepare_placed_scan(
    op: &dyn Op,
    _: &[TensorType],
    _: &[TensorType],
) -> Result<Box<dyn Prepared>> {
    let p = op.try_downcast::<PlacedScan>()?;
    Ok(Box::new(scan_plan(&p.scan, p.places.clone(), p.contractions.clone())?))
}

/// Where each stacked result goes: its buffer, with its place if placed,
/// or its rows to a product over the steps.
struct Sinks<'a> {
    bufs: Vec<Buf>,
    places: Vec<Option<&'a Place>>,
    /// Elements of one step's result.
    step_len: Vec<usize>,
    /// The shape of one step's result.
    step_shape: Vec<Vec<usize>>,
    /// The rows of the contracted results (see [`crate::contraction`]).
    collect: Option<Collector>,
}

impl<'a> Sinks<'a> {
    /// The sinks of `plan`'s stacked results; `spares` chunks of the
    /// contracted ones are allocated up front.
    fn new(
        plan: &'a ScanPlan,
        outs: &[TensorType],
        step_types: Vec<TensorType>,
        spares: usize,
    ) -> Sinks<'a> {
        let ys = &outs[plan.carries..];
        let places: Vec<Option<&Place>> =
            (0..ys.len()).map(|j| plan.places.get(j).and_then(Option::as_ref)).collect();
        let step_len: Vec<usize> = step_types.iter().map(TensorType::numel).collect();
        let collect =
            Collector::new(&plan.contractions, &step_len, plan.length, plan.reverse, spares);
        let takes = |j: usize| collect.as_ref().is_some_and(|c| c.takes(j));
        Sinks {
            bufs: ys
                .iter()
                .enumerate()
                .map(|(j, t)| {
                    if takes(j) {
                        Buf::F64(Vec::new())
                    } else {
                        Buf::stacked(t.dtype(), t.numel())
                    }
                })
                .collect(),
            places,
            step_len,
            step_shape: step_types.iter().map(|t| t.shape().to_vec()).collect(),
            collect,
        }
    }

    /// Writes step `t`'s result `j`.
    fn write(&mut self, j: usize, t: usize, src: Block<'_>) -> Result<()> {
        if let Some(c) = self.collect.as_mut().filter(|c| c.takes(j)) {
            return c.write(j, t, src);
        }
        match self.places[j] {
            Some(p) => {
                place(src, &self.step_shape[j], &p.strides, &mut self.bufs[j], t * p.per_step)
            }
            None => Buf::copy_block_into(src, &mut self.bufs[j], t * self.step_len[j]),
        }
    }

    /// The chunk of contracted rows that row `t` completes, if it does.
    fn done(&mut self, t: usize) -> Option<Chunk> {
        self.collect.as_mut()?.done(t)
    }

    /// A summed chunk's buffers, for the next chunk.
    fn recycle(&mut self, ys: Vec<Vec<f64>>) {
        if let Some(c) = self.collect.as_mut() {
            c.recycle(ys);
        }
    }

    /// The results: the partial chunks copied into their places, the
    /// contracted results' `products` in theirs.
    fn finish(
        self,
        inputs: &[&Tensor],
        outs: &[TensorType],
        products: Vec<Vec<f64>>,
    ) -> Result<Vec<Tensor>> {
        let mut results = Vec::with_capacity(self.bufs.len());
        let mut products = products.into_iter();
        let takes = |j: usize| self.collect.as_ref().is_some_and(|c| c.takes(j));
        for (j, ((mut buf, p), ty)) in self.bufs.into_iter().zip(self.places).zip(outs).enumerate()
        {
            if takes(j) {
                let product = products.next().ok_or_else(|| {
                    Error::invalid("placed_scan", "contraction", "a product is missing")
                })?;
                results.push(Buf::F64(product).into_tensor(ty.shape())?);
                continue;
            }
            for &(k, offset) in p.map_or(&[][..], |p| &p.tails[..]) {
                let tail = inputs.get(k).ok_or_else(|| {
                    Error::invalid("placed_scan", "operands", "a partial chunk is missing")
                })?;
                let strides = p.map_or(&[][..], |p| &p.strides[..]);
                place(
                    in_place(tail.storage(), 0, tail.numel()),
                    tail.shape(),
                    strides,
                    &mut buf,
                    offset,
                )?;
            }
            results.push(buf.into_tensor(ty.shape())?);
        }
        if let Some(c) = self.collect {
            c.give_back();
        }
        Ok(results)
    }
}

/// Where a finished chunk of contracted rows goes: summed here, or queued
/// for the workers summing them as the loop runs.
enum Hand<'h> {
    Here(&'h mut Sums),
    Away(&'h Background),
}

impl Hand<'_> {
    /// Sums the chunk that row `t` completes, if it does, or queues it.
    fn after_row(&mut self, sinks: &mut Sinks<'_>, t: usize) {
        let Some(chunk) = sinks.done(t) else { return };
        match self {
            Hand::Here(sums) => {
                sums.add(&chunk);
                sinks.recycle(chunk.ys);
            }
            Hand::Away(workers) => {
                for ys in workers.send(chunk) {
                    sinks.recycle(ys);
                }
            }
        }
    }
}

impl ScanPlan {
    /// Step `i` reads slice `t` of the xs and writes `ys[t]`.
    fn slice(&self, i: usize) -> usize {
        if self.reverse {
            self.length - 1 - i
        } else {
            i
        }
    }

    fn run_plan(
        &self,
        body: &Plan,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        let (nc, nk) = (self.consts, self.carries);
        let xs = &inputs[nc + nk..self.operands];
        let mut args: Vec<Tensor> = inputs[..nc + nk].iter().map(|t| (*t).clone()).collect();
        // Each step's ys are copied straight into their slot of the stacked
        // (or final) results: no list of steps, no second copy.
        let step_types: Vec<TensorType> =
            body.graph().outputs()[nk..].iter().map(|&o| body.graph().ty(o).clone()).collect();
        let mut sinks = Sinks::new(self, outs, step_types, 0);
        let mut sums = Sums::new(&self.contractions, &sinks.step_len, self.length, inputs)?;
        // A plan body may use the pool itself: its chunks are summed here.
        let mut hand = Hand::Here(&mut sums);
        for i in 0..self.length {
            let t = self.slice(i);
            args.truncate(nc + nk);
            for x in xs {
                args.push(x.select_axis(0, t)?);
            }
            let mut step = body.run(&args, ctx)?;
            for (j, out) in step.drain(nk..).enumerate() {
                sinks.write(j, t, in_place(out.storage(), 0, out.numel()))?;
            }
            hand.after_row(&mut sinks, t);
            for (slot, carry) in args[nc..nc + nk].iter_mut().zip(step) {
                *slot = carry;
            }
        }
        let mut results: Vec<Tensor> = args.drain(nc..nc + nk).collect();
        results.extend(sinks.finish(inputs, &outs[nk..], sums.into_products()?)?);
        Ok(results)
    }

    /// The loop over straight-line code: carries stay in the body's input
    /// buffers, the new ones swapped in after each step; xs slices are
    /// copied in and ys slices copied out; nothing is allocated per step.
    fn run_micro(
        &self,
        m: &Micro,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        let (nc, nk) = (self.consts, self.carries);
        let nx = self.operands - nc - nk;
        let ny = outs.len() - nk;
        let mut st = m.state();
        for (k, x) in inputs[..nc + nk].iter().enumerate() {
            m.set_input(&mut st, k, x, 0)?;
        }
        m.run_invariant(&mut st, ctx)?;
        let step_types: Vec<TensorType> = (0..ny).map(|j| m.ty(m.output(nk + j)).clone()).collect();
        // Products over the steps are summed by rayon workers while the
        // loop runs (see `crate::contraction`); the loop's own steps then
        // run on this thread alone (no products paired or split), leaving
        // the other cores to the sums. Not from inside the pool, whose
        // threads may all be busy already: the loop sums its chunks itself.
        let background = self.contractions.iter().any(Option::is_some)
            && ctx.thread_count() > 1
            && rayon::current_thread_index().is_none();
        // A helper thread for the products (never leased from a rayon
        // worker, see `pair::lease`).
        st.pair_products(!background && ctx.pairs() && m.pairs_products());
        let x_len: Vec<usize> = (0..nx).map(|j| m.ty(m.input(nc + nk + j)).numel()).collect();
        let mut sinks = Sinks::new(self, outs, step_types, if background { 2 } else { 0 });
        let mut sums = Sums::new(&self.contractions, &sinks.step_len, self.length, inputs)?;
        let swap = m.swappable(0..nk);
        let mut next: Vec<Buf> =
            (0..nk).map(|k| Buf::stacked(outs[k].dtype(), outs[k].numel())).collect();
        let mut steps = |hand: &mut Hand<'_>, ctx: &Parallelism| -> Result<()> {
            for i in 0..self.length {
                let t = self.slice(i);
                for j in 0..nx {
                    m.set_input(&mut st, nc + nk + j, inputs[nc + nk + j], t * x_len[j])?;
                }
                m.run(&mut st, ctx)?;
                for j in 0..ny {
                    sinks.write(j, t, st.buf(m.output(nk + j)).block())?;
                }
                hand.after_row(&mut sinks, t);
                carry(m, &mut st, nc, &swap, &mut next)?;
            }
            Ok(())
        };
        if background {
            let workers = Background::new(sums);
            let done = steps(&mut Hand::Away(&workers), &ctx.threads(1));
            let (done, back) = match done {
                Ok(()) => workers.finish(),
                // The queued chunks are dropped with the sums (see
                // `Background`'s `Drop`).
                Err(e) => return Err(e),
            };
            back.into_iter().for_each(|ys| sinks.recycle(ys));
            sums = done.ok_or_else(|| {
                Error::invalid("placed_scan", "contraction", "the sums were taken twice")
            })?;
        } else if ctx.thread_count() > 1
            && m.splits_products()
            && rayon::current_thread_index().is_none()
        {
            // Products shared between threads fork and join on every step,
            // which the micro interpreter does only on a rayon worker (the
            // other workers are awake and steal the half); from outside the
            // pool each join would wake it. The state was set up here, so
            // the buffers come from this thread's pool. (A while loop's
            // steps stay on the caller's thread: its products run the same
            // blocks serially.)
            rayon::scope(|_| steps(&mut Hand::Here(&mut sums), ctx))?;
        } else {
            steps(&mut Hand::Here(&mut sums), ctx)?;
        }
        next.into_iter().for_each(Buf::give_back);
        let mut results = Vec::with_capacity(outs.len());
        for (k, ty) in outs[..nk].iter().enumerate() {
            results.push(st.buf(m.input(nc + k)).to_tensor(ty.shape())?);
        }
        st.give_back();
        results.extend(sinks.finish(inputs, &outs[nk..], sums.into_products()?)?);
        Ok(results)
    }
}

impl Prepared for ScanPlan {
    fn run(
        &self,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        match &self.body {
            Body::Micro(m) => self.run_micro(m, inputs, outs, ctx),
            Body::Plan(p) => self.run_plan(p, inputs, outs, ctx),
        }
    }

    /// A loop whose products pair with a helper thread (see
    /// [`crate::pair`]), or whose products over its steps are summed in
    /// the background (see [`crate::contraction`]), runs on one thread or
    /// two as its plan's recent call times say; the bits are the same
    /// (for the second, when every instruction of its body says so).
    fn thread_invariant(&self) -> bool {
        let sums = self.contractions.iter().any(Option::is_some);
        matches!(&self.body, Body::Micro(m)
            if m.pairs_products() || (sums && m.same_bits_on_any_threads()))
    }
}

register_kernel!(Scan, prepare: prepare_scan);
register_kernel!(PlacedScan, prepare: prepare_placed_scan);

/// Moves a step's carried outputs (outputs `0..`) into the carry inputs
/// (inputs `nc..`): a swap of buffers where `swap` allows, else a copy
/// through `next`. Every copy reads the step's state before any buffer
/// moves (an output may be another carry's input slot).
fn carry(m: &Micro, st: &mut State, nc: usize, swap: &[bool], next: &mut [Buf]) -> Result<()> {
    for (k, n) in next.iter_mut().enumerate() {
        if !swap[k] {
            st.buf(m.output(k)).copy_into(n, 0)?;
        }
    }
    for (k, n) in next.iter_mut().enumerate() {
        if swap[k] {
            st.swap_slots(m.input(nc + k), m.output(k));
        } else {
            st.swap(m.input(nc + k), n);
        }
    }
    Ok(())
}

// ------------------------------------------------------------ while

/// A [`While`] with its predicate and body compiled: a masked loop with an
/// elementwise body lane group by lane group (see [`crate::kernels::lanes`]);
/// else both as straight-line code when both are small, else both as plans.
#[derive(Debug)]
struct WhilePlan {
    bodies: WhileBodies,
    consts: usize,
    max_steps: Option<usize>,
}

#[derive(Debug)]
enum WhileBodies {
    Lanes(Box<LaneLoop>),
    Micro(Box<(Micro, Micro)>),
    Plans(Box<(Plan, Plan)>),
}

fn prepare_while(op: &dyn Op, _: &[TensorType], _: &[TensorType]) -> Result<Box<dyn Prepared>> {
    let w = op.try_downcast::<While>()?;
    if let Some(lanes) = LaneLoop::new(w)? {
        return Ok(WhilePlan::lanes(w, lanes));
    }
    let consts: Vec<bool> = (0..w.body.inputs().len()).map(|i| i < w.consts).collect();
    let bodies = match (
        Micro::compile_invariant(&w.cond, &consts)?,
        Micro::compile_invariant(&w.body, &consts)?,
    ) {
        (Some(c), Some(b)) => WhileBodies::Micro(Box::new((c, b))),
        _ => WhileBodies::Plans(Box::new((compile(&w.cond)?, compile(&w.body)?))),
    };
    Ok(Box::new(WhilePlan { bodies, consts: w.consts, max_steps: w.max_steps }))
}

impl WhilePlan {
    /// `w` run lane group by lane group.
    fn lanes(w: &While, lanes: LaneLoop) -> Box<dyn Prepared> {
        let bodies = WhileBodies::Lanes(Box::new(lanes));
        Box::new(WhilePlan { bodies, consts: w.consts, max_steps: w.max_steps })
    }

    fn more(&self, steps: usize) -> bool {
        self.max_steps.is_none_or(|m| steps < m)
    }

    fn run_plans(
        &self,
        cond: &Plan,
        body: &Plan,
        inputs: &[&Tensor],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        let nc = self.consts;
        let mut args: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        let mut steps = 0usize;
        while self.more(steps) {
            let go = cond.run(&args, ctx)?;
            if go.first().map(Tensor::item).transpose()? != Some(1.0) {
                break;
            }
            let next = body.run(&args, ctx)?;
            for (slot, carry) in args[nc..].iter_mut().zip(next) {
                *slot = carry;
            }
            steps += 1;
        }
        Ok(args.split_off(nc))
    }

    fn run_micro(
        &self,
        cond: &Micro,
        body: &Micro,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        let nc = self.consts;
        let nk = inputs.len() - nc;
        let (mut cs, mut bs) = (cond.state(), body.state());
        for (k, x) in inputs.iter().enumerate() {
            cond.set_input(&mut cs, k, x, 0)?;
            body.set_input(&mut bs, k, x, 0)?;
        }
        cond.run_invariant(&mut cs, ctx)?;
        body.run_invariant(&mut bs, ctx)?;
        let mut next: Vec<Buf> = outs.iter().map(|t| Buf::stacked(t.dtype(), t.numel())).collect();
        let swap = body.swappable(0..nk);
        let mut steps = 0usize;
        while self.more(steps) {
            if steps > 0 {
                for k in 0..nk {
                    cs.load(cond.input(nc + k), bs.buf(body.input(nc + k)))?;
                }
            }
            cond.run(&mut cs, ctx)?;
            if !matches!(cs.buf(cond.output(0)), Buf::Bool(v) if v.first() == Some(&true)) {
                break;
            }
            body.run(&mut bs, ctx)?;
            carry(body, &mut bs, nc, &swap, &mut next)?;
            steps += 1;
        }
        next.into_iter().for_each(Buf::give_back);
        let results = outs
            .iter()
            .enumerate()
            .map(|(k, ty)| bs.buf(body.input(nc + k)).to_tensor(ty.shape()))
            .collect();
        cs.give_back();
        bs.give_back();
        results
    }
}

impl Prepared for WhilePlan {
    fn run(
        &self,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>> {
        match &self.bodies {
            WhileBodies::Lanes(l) => l.run(inputs, ctx),
            WhileBodies::Micro(m) => self.run_micro(&m.0, &m.1, inputs, outs, ctx),
            WhileBodies::Plans(p) => self.run_plans(&p.0, &p.1, inputs, ctx),
        }
    }

    fn results_read(&mut self, read: &[bool]) {
        if let WhileBodies::Lanes(l) = &mut self.bodies {
            l.results_read(read);
        }
    }
}

register_kernel!(While, prepare: prepare_while);

fn prepare_lane_while(
    op: &dyn Op,
    _: &[TensorType],
    _: &[TensorType],
) -> Result<Box<dyn Prepared>> {
    let l = op.try_downcast::<LaneWhile>()?;
    match LaneLoop::with_prelude(&l.w, l.prelude.graph())? {
        Some(lanes) => Ok(WhilePlan::lanes(&l.w, lanes)),
        None => Err(Error::invalid(
            "lane_while",
            "prelude",
            "not a lane loop (the plan rewrite made it from one: a bug)",
        )),
    }
}

register_kernel!(LaneWhile, prepare: prepare_lane_while);
