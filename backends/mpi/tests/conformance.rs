//! The conformance kit on every collective op, in a group of one process
//! (the crate without its `mpi` feature): vmap against a loop over slices,
//! jvp against finite differences, the transpose by the dot-product test,
//! nested vmap, vmap of jvp. With one member every collective is the
//! identity (or a reshape), so this checks how the rules are wired (axes,
//! shapes, which op each rule emits), while `tests/collectives.rs` under
//! `mpirun` checks the communication itself.
#![cfg(not(feature = "mpi"))]

use anvil_mpi::{
    AllGather, AllReduce, Axis, AxisKind, Broadcast, GatherReplicated, PsumReplicated, Pvary,
    Reduce, ReduceScatter, Replicated, SumToRoot, TakeShard,
};
use anvil_testing::{check_op, InputKind, OpSample};
use std::sync::OnceLock;

/// One session for the whole test binary (tests run on several threads;
/// initialising is once per process).
fn session() {
    static S: OnceLock<()> = OnceLock::new();
    S.get_or_init(|| std::mem::forget(anvil_mpi::init().expect("a one-process group")));
}

fn mesh() -> Axis {
    Axis { name: "batch".into(), size: 1, kind: AxisKind::Mesh }
}

fn sample(op: impl anvil::Op) -> OpSample {
    OpSample::new(op).input(InputKind::Distinct { offset: 0.0 }, &[2, 3])
}

fn samples() -> Vec<OpSample> {
    let axis = mesh();
    vec![
        sample(AllReduce { axis: axis.clone(), reduce: Reduce::Sum }),
        sample(AllReduce { axis: axis.clone(), reduce: Reduce::Max }),
        sample(AllGather { axis: axis.clone(), dim: 0 }),
        sample(AllGather { axis: axis.clone(), dim: 1 }),
        sample(ReduceScatter { axis: axis.clone(), dim: 1 }),
        sample(Broadcast { axis: axis.clone(), root: 0 }),
        sample(SumToRoot { axis: axis.clone(), root: 0 }),
        sample(Pvary { axis: axis.clone() }),
        sample(PsumReplicated { axis: axis.clone() }),
        sample(GatherReplicated { axis: axis.clone(), dim: 1 }),
        sample(TakeShard { axis: axis.clone(), dim: 0 }),
        sample(Replicated { axis: axis.clone(), transposed: false }),
        sample(Replicated { axis: axis.clone(), transposed: true }),
    ]
}

#[test]
fn every_collective_passes_the_conformance_kit() {
    session();
    let failures: Vec<String> = samples().iter().flat_map(|s| check_op(s).failures()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn shape_rules_reject_bad_parameters() {
    session();
    let axis = Axis { size: 2, ..mesh() };
    let t = anvil::TensorType::new(anvil::DType::F64, vec![3, 4]);
    let rs = ReduceScatter { axis: axis.clone(), dim: 0 };
    let e = anvil::Op::infer(&rs, std::slice::from_ref(&t)).unwrap_err().to_string();
    assert!(e.contains("not divisible by the 2 members"), "{e}");
    let b = Broadcast { axis: axis.clone(), root: 2 };
    let e = anvil::Op::infer(&b, std::slice::from_ref(&t)).unwrap_err().to_string();
    assert!(e.contains("root"), "{e}");
    let g = AllGather { axis, dim: 2 };
    assert!(anvil::Op::infer(&g, &[t]).is_err());
}
