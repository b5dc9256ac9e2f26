//! The communicator: MPI's world communicator (feature `mpi`), or a group
//! of this one process (without it).
//!
//! Everything that talks to MPI is here, so the ops, their rules and
//! `shard_map` never see rsmpi. The design decisions:
//!
//! - **Thread level**: MPI is initialised at `MPI_THREAD_SERIALIZED`.
//!   rayon's worker threads (the CPU backend's parallel loops) compute and
//!   never call MPI; collectives are called by the thread that runs a plan,
//!   and this module holds one lock around every MPI call, so two threads
//!   of one process never call MPI at once. A collective reached from a
//!   rayon worker (a collective inside the body of a parallel `map`) is an
//!   `Err`: the order of such calls would differ between ranks.
//! - **Checked collectives**: before each collective, every rank
//!   contributes a fixed-size header (what it is about to do: the
//!   collective, the dtype, the shape, its parameters) to one all-gather,
//!   and every rank compares them. Ranks that disagree (different shapes,
//!   different collectives in the same position) all return the same
//!   `Err` naming each rank's call, instead of hanging or reading garbage.
//!   The cost is one small all-gather per collective (latency only).
//! - Without the `mpi` feature the group has one member: every collective
//!   over it is the identity, so programs (and the crate's tests) run
//!   everywhere, unchanged.

use anvil_core::{Error, Result};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

const UNINIT: u8 = 0;
const ACTIVE: u8 = 1;
const FINALIZED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static RANK: AtomicUsize = AtomicUsize::new(0);
static SIZE: AtomicUsize = AtomicUsize::new(1);
/// Held around every MPI call (the promise of `MPI_THREAD_SERIALIZED`).
static LOCK: Mutex<()> = Mutex::new(());

/// An element type that collectives carry: `f64`, `f32`, `i64`.
#[cfg(feature = "mpi")]
pub trait Wire: Copy + Default + PartialOrd + mpi::datatype::Equivalence {}
/// An element type that collectives carry: `f64`, `f32`, `i64`.
#[cfg(not(feature = "mpi"))]
pub trait Wire: Copy + Default + PartialOrd {}

impl Wire for f64 {}
impl Wire for f32 {}
impl Wire for i64 {}

/// How an all-reduce combines the ranks' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduce {
    /// The sum over the ranks.
    Sum,
    /// The elementwise maximum over the ranks.
    Max,
}

/// MPI for this process, from [`init`] until it is dropped (which
/// finalises MPI). Keep it alive for as long as collectives run, and drop
/// it before the process exits: an MPI process that exits without
/// finalising is reported as failed by `mpirun`.
pub struct Session {
    #[cfg(feature = "mpi")]
    _universe: mpi::environment::Universe,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session(rank {} of {})", self.rank(), self.size())
    }
}

impl Session {
    /// This process's rank, `0..size`.
    pub fn rank(&self) -> usize {
        RANK.load(Ordering::SeqCst)
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        SIZE.load(Ordering::SeqCst)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The universe (dropped right after) finalises MPI.
        STATE.store(FINALIZED, Ordering::SeqCst);
    }
}

/// Initialises MPI (at `MPI_THREAD_SERIALIZED`) for the collectives of
/// this crate; without the `mpi` feature, a group of this one process.
///
/// ```
/// let mpi = anvil_mpi::init()?;
/// assert!(mpi.rank() < mpi.size());
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// # Errors
/// MPI was initialised before (by this function or another library), or
/// it cannot give the thread level.
pub fn init() -> Result<Session> {
    if STATE.load(Ordering::SeqCst) != UNINIT {
        return Err(Error::invalid(
            "anvil_mpi::init",
            "MPI",
            "is already initialised (or finalised) in this process: call init once",
        ));
    }
    let session = start()?;
    STATE.store(ACTIVE, Ordering::SeqCst);
    Ok(session)
}

#[cfg(feature = "mpi")]
fn start() -> Result<Session> {
    use mpi::topology::Communicator;
    let want = mpi::Threading::Serialized;
    let (universe, got) = mpi::initialize_with_threading(want).ok_or_else(|| {
        Error::invalid("anvil_mpi::init", "MPI", "was already initialised by another library")
    })?;
    if got < want {
        return Err(Error::invalid(
            "anvil_mpi::init",
            "MPI",
            format!("gives thread level {got:?}; anvil needs {want:?}"),
        ));
    }
    let world = universe.world();
    RANK.store(world.rank() as usize, Ordering::SeqCst);
    SIZE.store(world.size() as usize, Ordering::SeqCst);
    Ok(Session { _universe: universe })
}

#[cfg(not(feature = "mpi"))]
fn start() -> Result<Session> {
    RANK.store(0, Ordering::SeqCst);
    SIZE.store(1, Ordering::SeqCst);
    Ok(Session {})
}

/// `(rank, size)` of the active session.
///
/// # Errors
/// No session is active (never initialised, or finalised).
pub fn rank_size(what: &str) -> Result<(usize, usize)> {
    match STATE.load(Ordering::SeqCst) {
        ACTIVE => Ok((RANK.load(Ordering::SeqCst), SIZE.load(Ordering::SeqCst))),
        FINALIZED => Err(Error::invalid(what, "MPI", "was finalised (its Session was dropped)")),
        _ => Err(Error::invalid(what, "MPI", "is not initialised: call anvil_mpi::init() first")),
    }
}

/// Checks that a collective may be issued from here: a session is active
/// and this is not one of rayon's worker threads.
fn ready(what: &str) -> Result<(usize, usize)> {
    let rs = rank_size(what)?;
    if rayon::current_thread_index().is_some() {
        return Err(Error::invalid(
            what,
            "thread",
            "a collective was reached from a rayon worker thread (inside a parallel loop body); \
             collectives run only on the thread that runs the plan, so that every rank issues them \
             in the same order",
        ));
    }
    Ok(rs)
}

/// The length of a collective's header.
pub(crate) const HEADER: usize = 16;

/// Every rank's header, gathered: the check before each collective.
///
/// # Errors
/// As [`ready`].
pub(crate) fn exchange_headers(what: &str, header: &[i64; HEADER]) -> Result<Vec<[i64; HEADER]>> {
    let (_, size) = ready(what)?;
    let flat = all_gather_raw(header.as_slice(), size)?;
    Ok(flat
        .chunks_exact(HEADER)
        .map(|c| {
            let mut h = [0i64; HEADER];
            h.copy_from_slice(c);
            h
        })
        .collect())
}

/// The concatenation of every rank's `send`, in rank order.
///
/// # Errors
/// As [`ready`].
pub(crate) fn all_gather<T: Wire>(what: &str, send: &[T]) -> Result<Vec<T>> {
    let (_, size) = ready(what)?;
    all_gather_raw(send, size)
}

/// The elementwise sum or maximum of every rank's `send`.
///
/// # Errors
/// As [`ready`].
pub(crate) fn all_reduce<T: Wire>(what: &str, send: &[T], how: Reduce) -> Result<Vec<T>> {
    ready(what)?;
    imp::all_reduce(send, how)
}

/// Block `rank` (of `size` equal blocks) of the sum of every rank's `send`.
///
/// # Errors
/// As [`ready`].
pub(crate) fn reduce_scatter<T: Wire>(what: &str, send: &[T]) -> Result<Vec<T>> {
    let (_, size) = ready(what)?;
    imp::reduce_scatter(send, size)
}

/// `buf` replaced, on every rank, by the root's.
///
/// # Errors
/// As [`ready`].
pub(crate) fn broadcast<T: Wire>(what: &str, buf: &mut [T], root: usize) -> Result<()> {
    ready(what)?;
    imp::broadcast(buf, root)
}

/// The sum of every rank's `send` on the root, zeros elsewhere.
///
/// # Errors
/// As [`ready`].
pub(crate) fn reduce_to_root<T: Wire>(what: &str, send: &[T], root: usize) -> Result<Vec<T>> {
    let (rank, _) = ready(what)?;
    imp::reduce_to_root(send, root, rank)
}

fn all_gather_raw<T: Wire>(send: &[T], size: usize) -> Result<Vec<T>> {
    imp::all_gather(send, size)
}

fn locked() -> std::sync::MutexGuard<'static, ()> {
    // The lock guards no data: a panic while it was held leaves nothing broken.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(feature = "mpi")]
mod imp {
    //! The rsmpi calls, on the world communicator.
    use super::{locked, Reduce, Wire};
    use anvil_core::Result;
    use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
    use mpi::topology::{Communicator, SimpleCommunicator};

    fn op(how: Reduce) -> SystemOperation {
        match how {
            Reduce::Sum => SystemOperation::sum(),
            Reduce::Max => SystemOperation::max(),
        }
    }

    pub(super) fn all_gather<T: Wire>(send: &[T], size: usize) -> Result<Vec<T>> {
        let mut recv = vec![T::default(); send.len() * size];
        let _g = locked();
        SimpleCommunicator::world().all_gather_into(send, &mut recv[..]);
        Ok(recv)
    }

    pub(super) fn all_reduce<T: Wire>(send: &[T], how: Reduce) -> Result<Vec<T>> {
        let mut recv = vec![T::default(); send.len()];
        let _g = locked();
        SimpleCommunicator::world().all_reduce_into(send, &mut recv[..], op(how));
        Ok(recv)
    }

    pub(super) fn reduce_scatter<T: Wire>(send: &[T], size: usize) -> Result<Vec<T>> {
        let mut recv = vec![T::default(); send.len() / size];
        let _g = locked();
        SimpleCommunicator::world().reduce_scatter_block_into(send, &mut recv[..], op(Reduce::Sum));
        Ok(recv)
    }

    pub(super) fn broadcast<T: Wire>(buf: &mut [T], root: usize) -> Result<()> {
        let _g = locked();
        let world = SimpleCommunicator::world();
        world.process_at_rank(root as i32).broadcast_into(buf);
        Ok(())
    }

    pub(super) fn reduce_to_root<T: Wire>(send: &[T], root: usize, rank: usize) -> Result<Vec<T>> {
        let mut recv = vec![T::default(); send.len()];
        let _g = locked();
        let world = SimpleCommunicator::world();
        let at = world.process_at_rank(root as i32);
        if rank == root {
            at.reduce_into_root(send, &mut recv[..], op(Reduce::Sum));
        } else {
            at.reduce_into(send, op(Reduce::Sum));
        }
        Ok(recv)
    }
}

#[cfg(not(feature = "mpi"))]
mod imp {
    //! A group of one process: every collective is the identity.
    use super::{locked, Reduce, Wire};
    use anvil_core::Result;

    pub(super) fn all_gather<T: Wire>(send: &[T], _size: usize) -> Result<Vec<T>> {
        let _g = locked();
        Ok(send.to_vec())
    }

    pub(super) fn all_reduce<T: Wire>(send: &[T], _how: Reduce) -> Result<Vec<T>> {
        Ok(send.to_vec())
    }

    pub(super) fn reduce_scatter<T: Wire>(send: &[T], _size: usize) -> Result<Vec<T>> {
        Ok(send.to_vec())
    }

    pub(super) fn broadcast<T: Wire>(_buf: &mut [T], _root: usize) -> Result<()> {
        Ok(())
    }

    pub(super) fn reduce_to_root<T: Wire>(
        send: &[T],
        _root: usize,
        _rank: usize,
    ) -> Result<Vec<T>> {
        Ok(send.to_vec())
    }
}
