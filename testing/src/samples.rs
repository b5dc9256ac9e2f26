//! [`standard_samples`]: sample instances of every standard op.

use super::{InputKind, OpSample};
use anvil::core::SubGraph;
use anvil::ops::cond::Cond;
use anvil::ops::constant::{Basis, Full, Iota};
use anvil::ops::control::{CustomJvpCall, CustomVjpCall, CustomVjpTangent, Map};
use anvil::ops::diagonal::Diagonals;
use anvil::ops::elementwise::*;
use anvil::ops::index::{ScatterAdd, Take};
use anvil::ops::matmul::{Matmul, MatmulT};
use anvil::ops::movement::{BroadcastTo, Concatenate, Pad, Permute, Reshape, Slice};
use anvil::ops::reduce::{ArgReduce, ReduceMax, ReduceMin, ReduceProd, ReduceSum};
use anvil::ops::scan::Scan;
use anvil::ops::sparse::{ColorSeed, Decompress, ScaledSeeds, Table, NEUTRAL};
use anvil::ops::while_loop::While;
use anvil::{trace, DType, Op, Scalar, SliceSpec, Tensor, TensorType, Var, VarExt};

fn uniform(lo: f64, hi: f64) -> InputKind {
    InputKind::Uniform { lo, hi }
}
fn away(lo: f64, hi: f64) -> InputKind {
    InputKind::AwayFromZero { lo, hi }
}
fn off_grid(lo: f64, hi: f64) -> InputKind {
    InputKind::OffGrid { lo, hi }
}
fn distinct(offset: f64) -> InputKind {
    InputKind::Distinct { offset }
}
fn int(lo: i64, hi: i64) -> InputKind {
    InputKind::Int { lo, hi }
}
fn index(size: usize, negative: bool) -> InputKind {
    InputKind::Index { size, negative }
}
const SYM: InputKind = InputKind::Uniform { lo: -1.0, hi: 1.0 };

fn indices(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).expect("index literal matches its shape")
}

/// A sample of a binary op on two inputs.
fn binary(op: &dyn Op, a: (InputKind, &[usize]), b: (InputKind, &[usize])) -> OpSample {
    OpSample::from_boxed(op.boxed()).input(a.0, a.1).input(b.0, b.1)
}

/// Sample instances of every standard op, for the conformance checks: small
/// shapes (at most 4 per axis), deterministic pseudo-random inputs away from
/// the points where the op is not smooth, and several samples per op where
/// its parameters or operand ranks matter: reductions over different axes
/// with and without `keepdims`, `take` with indices of rank 0, 1 and 2 and
/// negative indices, `scatter_add` with repeated indices, slices with
/// negative steps, `matmul` of vectors, matrices and stacks, broadcasting
/// binary ops, integer and boolean operands, and `map` over small traced
/// bodies.
///
/// Ops without operands (`full`, `iota`, captured constants) have a sample
/// too, so that [`missing_samples`](super::missing_samples) finds every op
/// covered; `vmap` has nothing to batch in them. The graph's structural
/// `Parameter` has none.
///
/// For the derivative checks, the `stop_gradient` samples are marked
/// [`zero_derivative`](OpSample::zero_derivative) and the `custom_vjp` call
/// [`reverse_only`](OpSample::reverse_only).
pub fn standard_samples() -> Vec<OpSample> {
    let mut s = Vec::new();
    unary_float_samples(&mut s);
    unary_other_samples(&mut s);
    cast_samples(&mut s);
    float_arithmetic_samples(&mut s);
    integer_arithmetic_samples(&mut s);
    comparison_samples(&mut s);
    select_samples(&mut s);
    reshape_samples(&mut s);
    permute_samples(&mut s);
    broadcast_samples(&mut s);
    pad_samples(&mut s);
    slice_samples(&mut s);
    concatenate_samples(&mut s);
    reduce_samples(&mut s);
    arg_reduce_samples(&mut s);
    matmul_samples(&mut s);
    matmul_t_samples(&mut s);
    super::linalg_samples::linalg_samples(&mut s);
    take_samples(&mut s);
    scatter_add_samples(&mut s);
    constant_samples(&mut s);
    sparse_samples(&mut s);
    map_samples(&mut s);
    cond_samples(&mut s);
    scan_samples(&mut s);
    while_samples(&mut s);
    custom_jvp_samples(&mut s);
    custom_vjp_samples(&mut s);
    super::lax_samples::lax_samples(&mut s);
    super::subscript_samples::subscript_samples(&mut s);
    super::numpy_samples::numpy_samples(&mut s);
    super::nn_samples::nn_samples(&mut s);
    super::matfun_samples::matfun_samples(&mut s);
    s
}

/// Every unary op on a float matrix, on inputs where it is smooth.
fn unary_float_samples(s: &mut Vec<OpSample>) {
    let unary: Vec<(Box<dyn Op>, InputKind)> = vec![
        (Box::new(Neg), SYM),
        (Box::new(Sin), uniform(-3.0, 3.0)),
        (Box::new(Cos), uniform(-3.0, 3.0)),
        (Box::new(Tan), uniform(-1.2, 1.2)),
        (Box::new(Exp), uniform(-2.0, 2.0)),
        (Box::new(Log), uniform(0.5, 3.0)),
        (Box::new(Log1p), uniform(-0.5, 2.0)),
        (Box::new(Expm1), SYM),
        (Box::new(Sqrt), uniform(0.3, 3.0)),
        (Box::new(Rsqrt), uniform(0.3, 3.0)),
        (Box::new(Recip), away(0.5, 2.0)),
        (Box::new(Tanh), uniform(-2.0, 2.0)),
        (Box::new(Logistic), uniform(-3.0, 3.0)),
        (Box::new(Abs), away(0.2, 2.0)),
        (Box::new(Sign), away(0.2, 2.0)),
        (Box::new(Floor), off_grid(-2.0, 2.0)),
        (Box::new(Ceil), off_grid(-2.0, 2.0)),
        (Box::new(Round), off_grid(-2.0, 2.0)),
        (Box::new(Erf), uniform(-2.0, 2.0)),
        (Box::new(StopGradient), SYM),
    ];
    for (op, kind) in unary {
        let sample = OpSample::from_boxed(op).input(kind, &[2, 3]);
        // stop_gradient is the identity with a zero derivative by definition.
        let zero = sample.op.is::<StopGradient>();
        s.push(if zero { sample.zero_derivative() } else { sample });
    }
}

/// Unary ops on other ranks and dtypes.
fn unary_other_samples(s: &mut Vec<OpSample>) {
    s.push(OpSample::new(Sin).input(SYM, &[]));
    s.push(OpSample::new(Exp).input(SYM, &[2, 3, 4]));
    s.push(OpSample::new(Tanh).input_dtype(SYM, &[4], DType::F32).tol(1e-6, 1e-6));
    s.push(OpSample::new(Neg).input(int(-5, 6), &[2, 3]));
    s.push(OpSample::new(Abs).input(int(-5, 6), &[3]));
    s.push(OpSample::new(Sign).input(int(-5, 6), &[2, 2]));
    s.push(OpSample::new(StopGradient).input(int(-5, 6), &[3]).zero_derivative());
}

/// Casts between every pair of dtype families.
fn cast_samples(s: &mut Vec<OpSample>) {
    s.push(OpSample::new(Cast { dtype: DType::F32 }).input(SYM, &[2, 3]));
    s.push(OpSample::new(Cast { dtype: DType::F64 }).input_dtype(SYM, &[3], DType::F32));
    s.push(OpSample::new(Cast { dtype: DType::I64 }).input(off_grid(-3.0, 3.0), &[2, 3]));
    s.push(OpSample::new(Cast { dtype: DType::F64 }).input(int(-5, 6), &[3]));
    s.push(OpSample::new(Cast { dtype: DType::F64 }).input(InputKind::Bool, &[2, 2]));
    s.push(OpSample::new(Cast { dtype: DType::Bool }).input(away(0.2, 1.0), &[3]));
}

/// Float arithmetic on same shapes, broadcasting both ways, and a scalar operand.
fn float_arithmetic_samples(s: &mut Vec<OpSample>) {
    let ops: Vec<(Box<dyn Op>, InputKind, InputKind)> = vec![
        (Box::new(Add), SYM, SYM),
        (Box::new(Sub), SYM, SYM),
        (Box::new(Mul), SYM, SYM),
        (Box::new(Div), SYM, away(0.5, 2.0)),
        (Box::new(Pow), uniform(0.5, 2.0), uniform(-1.5, 1.5)),
        (Box::new(Max), distinct(0.0), distinct(0.5)),
        (Box::new(Min), distinct(0.0), distinct(0.5)),
        (Box::new(Atan2), away(0.2, 1.0), away(0.2, 1.0)),
    ];
    let shapes: [(&[usize], &[usize]); 3] = [(&[2, 3], &[2, 3]), (&[2, 1], &[3]), (&[], &[2, 3])];
    for (op, ka, kb) in &ops {
        for (sa, sb) in shapes {
            s.push(binary(op.as_ref(), (ka.clone(), sa), (kb.clone(), sb)));
        }
    }
}

/// Integer arithmetic, broadcasting.
fn integer_arithmetic_samples(s: &mut Vec<OpSample>) {
    let ints: Vec<(Box<dyn Op>, InputKind)> = vec![
        (Box::new(Add), int(-5, 6)),
        (Box::new(Sub), int(-5, 6)),
        (Box::new(Mul), int(-5, 6)),
        (Box::new(Div), int(1, 4)),
        (Box::new(Max), int(-5, 6)),
        (Box::new(Min), int(-5, 6)),
    ];
    for (op, kb) in ints {
        s.push(binary(op.as_ref(), (int(-9, 10), &[3]), (kb, &[2, 3])));
    }
}

/// Comparisons of floats (no ties), of integers (ties likely) and of booleans.
fn comparison_samples(s: &mut Vec<OpSample>) {
    let cmps: Vec<Box<dyn Op>> =
        vec![Box::new(Lt), Box::new(Le), Box::new(Gt), Box::new(Ge), Box::new(Eq), Box::new(Ne)];
    for op in &cmps {
        s.push(binary(op.as_ref(), (distinct(0.0), &[2, 3]), (distinct(0.5), &[3])));
        s.push(binary(op.as_ref(), (int(0, 3), &[2, 3]), (int(0, 3), &[2, 3])));
    }
    s.push(binary(&Eq, (InputKind::Bool, &[2, 3]), (InputKind::Bool, &[3])));
    s.push(binary(&Ne, (InputKind::Bool, &[2]), (InputKind::Bool, &[2])));
    let f32_lt = OpSample::new(Lt).input_dtype(distinct(0.0), &[3], DType::F32);
    s.push(f32_lt.input_dtype(distinct(0.5), &[3], DType::F32));
}

/// `select`: three operands that broadcast together.
fn select_samples(s: &mut Vec<OpSample>) {
    let bool_ = InputKind::Bool;
    s.push(
        OpSample::new(Select).input(bool_.clone(), &[2, 3]).input(SYM, &[2, 3]).input(SYM, &[2, 3]),
    );
    s.push(OpSample::new(Select).input(bool_.clone(), &[2, 1]).input(SYM, &[3]).input(SYM, &[]));
    s.push(OpSample::new(Select).input(bool_.clone(), &[]).input(SYM, &[2]).input(SYM, &[2]));
    s.push(
        OpSample::new(Select).input(bool_, &[3]).input(int(-5, 6), &[3]).input(int(-5, 6), &[1]),
    );
}

fn reshape_samples(s: &mut Vec<OpSample>) {
    let reshape = |from: &[usize], to: &[usize]| {
        OpSample::new(Reshape { shape: to.to_vec() }).input(SYM, from)
    };
    s.push(reshape(&[2, 3], &[3, 2]));
    s.push(reshape(&[2, 3], &[6]));
    s.push(reshape(&[], &[1, 1]));
    s.push(reshape(&[2, 1, 3], &[3, 2]));
    s.push(reshape(&[4], &[2, 2]));
    s.push(OpSample::new(Reshape { shape: vec![4] }).input(int(-5, 6), &[2, 2]));
}

fn permute_samples(s: &mut Vec<OpSample>) {
    let permute = |from: &[usize], perm: &[usize]| {
        OpSample::new(Permute { perm: perm.to_vec() }).input(SYM, from)
    };
    s.push(permute(&[2, 3], &[1, 0]));
    s.push(permute(&[2, 3, 4], &[2, 0, 1]));
    s.push(permute(&[2, 3, 4], &[1, 2, 0]));
    s.push(permute(&[3], &[0]));
}

fn broadcast_samples(s: &mut Vec<OpSample>) {
    let bcast = |from: &[usize], to: &[usize]| {
        OpSample::new(BroadcastTo { shape: to.to_vec() }).input(SYM, from)
    };
    s.push(bcast(&[3], &[2, 3]));
    s.push(bcast(&[2, 1], &[2, 3]));
    s.push(bcast(&[], &[2]));
    s.push(bcast(&[1, 3], &[2, 2, 3]));
    s.push(bcast(&[2, 3], &[2, 3]));
}

fn pad_samples(s: &mut Vec<OpSample>) {
    let pad = |from: &[usize], widths: &[(usize, usize)], value: Scalar, kind: InputKind| {
        OpSample::new(Pad { widths: widths.to_vec(), value }).input(kind, from)
    };
    s.push(pad(&[2, 3], &[(1, 0), (0, 2)], Scalar::F64(0.5), SYM));
    s.push(pad(&[3], &[(2, 1)], Scalar::F64(-1.0), SYM));
    s.push(pad(&[2, 2], &[(0, 0), (1, 1)], Scalar::I64(7), int(-5, 6)));
    s.push(pad(&[], &[], Scalar::F64(0.0), SYM));
}

/// Slices with negative starts, stops and steps, and an empty result.
fn slice_samples(s: &mut Vec<OpSample>) {
    let spec = |start: Option<i64>, stop: Option<i64>, step: i64| SliceSpec { start, stop, step };
    let slice =
        |from: &[usize], specs: Vec<SliceSpec>| OpSample::new(Slice { specs }).input(SYM, from);
    s.push(slice(&[4, 3], vec![spec(Some(-1), None, -2), SliceSpec::FULL]));
    s.push(slice(&[4], vec![SliceSpec::range(1, 3)]));
    s.push(slice(&[3, 4], vec![spec(None, None, -1), spec(Some(1), Some(4), 2)]));
    s.push(slice(&[4], vec![spec(Some(3), Some(0), -1)]));
    s.push(slice(
        &[2, 3, 4],
        vec![spec(Some(1), None, 1), spec(None, Some(-1), 1), spec(None, None, -3)],
    ));
    s.push(slice(&[4], vec![spec(Some(2), Some(2), 1)])); // empty result
}

fn concatenate_samples(s: &mut Vec<OpSample>) {
    s.push(OpSample::new(Concatenate { axis: 0 }).input(SYM, &[2, 3]).input(SYM, &[1, 3]));
    s.push(
        OpSample::new(Concatenate { axis: 1 })
            .input(SYM, &[2, 1])
            .input(SYM, &[2, 3])
            .input(SYM, &[2, 2]),
    );
    s.push(OpSample::new(Concatenate { axis: 0 }).input(SYM, &[3]));
    s.push(OpSample::new(Concatenate { axis: 0 }).input(int(-5, 6), &[2]).input(int(-5, 6), &[3]));
}

fn reduce_samples(s: &mut Vec<OpSample>) {
    // (shape, axes, keepdims)
    let cases: [(&[usize], &[usize], bool); 6] = [
        (&[2, 3], &[0], false),
        (&[2, 3], &[1], true),
        (&[2, 3, 4], &[0, 2], false),
        (&[2, 3, 4], &[1], true),
        (&[2, 3], &[0, 1], false),
        (&[3], &[], false),
    ];
    for (shape, axes, keepdims) in cases {
        let axes = axes.to_vec();
        let ops: Vec<(Box<dyn Op>, InputKind)> = vec![
            (Box::new(ReduceSum { axes: axes.clone(), keepdims }), SYM),
            (Box::new(ReduceMax { axes: axes.clone(), keepdims }), distinct(0.0)),
            (Box::new(ReduceMin { axes: axes.clone(), keepdims }), distinct(0.0)),
            (Box::new(ReduceProd { axes, keepdims }), uniform(0.5, 1.5)),
        ];
        for (op, kind) in ops {
            s.push(OpSample::from_boxed(op).input(kind, shape));
        }
    }
    s.push(OpSample::new(ReduceSum { axes: vec![1], keepdims: false }).input(int(-5, 6), &[2, 3]));
    s.push(OpSample::new(ReduceMax { axes: vec![0], keepdims: true }).input(int(-5, 6), &[3, 2]));
}

fn arg_reduce_samples(s: &mut Vec<OpSample>) {
    // (shape, axis, keepdims, max)
    let args: [(&[usize], usize, bool, bool); 5] = [
        (&[3, 4], 0, false, true),
        (&[3, 4], 1, true, false),
        (&[2, 3, 4], 1, false, true),
        (&[2, 3, 4], 2, true, true),
        (&[4], 0, false, false),
    ];
    for (shape, axis, keepdims, max) in args {
        s.push(OpSample::new(ArgReduce { axis, keepdims, max }).input(distinct(0.0), shape));
    }
}

/// `matmul` of vectors, matrices and stacks.
fn matmul_samples(s: &mut Vec<OpSample>) {
    let pairs: [(&[usize], &[usize]); 9] = [
        (&[2, 3], &[3, 4]),
        (&[3], &[3, 2]),
        (&[2, 3], &[3]),
        (&[3], &[3]),
        (&[2, 2, 3], &[3, 4]),
        (&[2, 3], &[2, 3, 2]),
        (&[3], &[2, 3, 2]),
        (&[2, 2, 3], &[2, 3, 2]),
        (&[2, 1, 2, 3], &[3, 3, 2]),
    ];
    for (a, b) in pairs {
        s.push(binary(&Matmul, (SYM, a), (SYM, b)));
    }
    s.push(
        OpSample::new(Matmul)
            .input_dtype(SYM, &[2, 3], DType::F32)
            .input_dtype(SYM, &[3, 2], DType::F32)
            .tol(1e-5, 1e-5),
    );
}

/// `matmul_t`: each operand read transposed, matrices and vectors.
fn matmul_t_samples(s: &mut Vec<OpSample>) {
    let t_pairs: [(bool, bool, &[usize], &[usize]); 5] = [
        (true, false, &[3, 2], &[3, 4]),
        (false, true, &[2, 3], &[4, 3]),
        (true, true, &[3, 2], &[4, 3]),
        (true, false, &[3, 2], &[3]),
        (false, true, &[3], &[4, 3]),
    ];
    for (ta, tb, a, b) in t_pairs {
        s.push(binary(&MatmulT { ta, tb }, (SYM, a), (SYM, b)));
    }
}

/// `take`: indices of rank 0, 1 and 2, negative ones, several axes, batch_dims.
fn take_samples(s: &mut Vec<OpSample>) {
    let take = |t: Take, x: (InputKind, &[usize]), idx: Tensor, kind: InputKind| {
        OpSample::new(t).input(x.0, x.1).given(idx, kind)
    };
    s.push(take(Take::new(0), (SYM, &[4, 3]), indices(&[-2], &[]), index(4, true)));
    s.push(take(Take::new(0), (SYM, &[4, 3]), indices(&[3, -4], &[2]), index(4, true)));
    s.push(take(Take::new(1), (SYM, &[3, 4]), indices(&[0, 3, 3, 1], &[2, 2]), index(4, false)));
    s.push(take(Take::new(2), (SYM, &[2, 3, 4]), indices(&[-1, 0, 2], &[3]), index(4, true)));
    s.push(take(Take::new(0), (int(-5, 6), &[3]), indices(&[2, 2, 0, 1], &[4]), index(3, false)));
    s.push(take(
        Take { axis: 1, batch_dims: 1 },
        (SYM, &[2, 3]),
        indices(&[0, 2, -1, 1], &[2, 2]),
        index(3, true),
    ));
    s.push(take(
        Take { axis: 2, batch_dims: 1 },
        (SYM, &[2, 3, 4]),
        indices(&[0, 3, 3, 1, 2, 0], &[2, 3]),
        index(4, false),
    ));
}

/// `scatter_add`: repeated and negative indices, ranks 0 to 2, batch_dims.
fn scatter_add_samples(s: &mut Vec<OpSample>) {
    let scatter = |op: ScatterAdd, u: (InputKind, &[usize]), idx: Tensor| {
        let kind = index(op.size, true);
        OpSample::new(op).input(u.0, u.1).given(idx, kind)
    };
    s.push(scatter(ScatterAdd::new(0, 3), (SYM, &[4, 2]), indices(&[1, 1, -1, 0], &[4])));
    s.push(scatter(ScatterAdd::new(1, 4), (SYM, &[2, 3]), indices(&[0, 3, 3], &[3])));
    s.push(scatter(ScatterAdd::new(0, 3), (SYM, &[2, 2, 3]), indices(&[2, 0, 2, -3], &[2, 2])));
    s.push(scatter(ScatterAdd::new(0, 4), (SYM, &[3]), indices(&[-1], &[])));
    s.push(scatter(
        ScatterAdd { axis: 1, size: 4, batch_dims: 1, of_take: false },
        (SYM, &[2, 3]),
        indices(&[1, 1, 3, 0, -1, 0], &[2, 3]),
    ));
    s.push(scatter(ScatterAdd::new(0, 2), (int(-5, 6), &[3]), indices(&[1, 0, 1], &[3])));
}

fn constant_samples(s: &mut Vec<OpSample>) {
    s.push(OpSample::new(Full { shape: vec![2, 3], value: Scalar::F64(1.5) }));
    // Seeds: a chunk of the identity, and one with a run-time start.
    let seed = Basis { shape: vec![2, 3, 4], axis: 2, offset: 1, dtype: DType::F64 };
    s.push(OpSample::new(seed.clone()));
    s.push(OpSample::new(seed).given(Tensor::scalar(2i64), InputKind::Fixed));
    // Scaled diagonals of a seed: basis axis last, and first.
    let diagonals = Diagonals { shape: vec![4, 3], axis: 1, offsets: vec![0, -1, 2] };
    let mut d = OpSample::new(diagonals);
    for _ in 0..3 {
        d = d.input(SYM, &[1, 3]);
    }
    s.push(d);
    let diagonals = Diagonals { shape: vec![2, 2, 3], axis: 0, offsets: vec![1] };
    s.push(OpSample::new(diagonals).input(SYM, &[2, 1, 1]));
    s.push(OpSample::new(Iota { shape: vec![2, 3], axis: 1, dtype: DType::I64 }));
    let value = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).expect("literal matches its shape");
    s.push(OpSample::new(anvil::core::Constant { value }));
    // A dimension's size as a number (here a size: no binding needed).
    s.push(OpSample::new(anvil::core::DimSize { dim: 3, dtype: DType::I64 }));
}

fn sparse_samples(s: &mut Vec<OpSample>) {
    // Colored seeds (a neutral position too), color axis last and first.
    let colors = Table::new(vec![0, 1, NEUTRAL, 2, 0, 1]);
    let seed =
        ColorSeed { shape: vec![2, 3, 3], axis: 2, colors: colors.clone(), dtype: DType::F64 };
    s.push(OpSample::new(seed));
    s.push(OpSample::new(ColorSeed { shape: vec![3, 6], axis: 0, colors, dtype: DType::F64 }));
    // Two seeds of 3 colors over 4 positions, scaled by a row and a scalar.
    let tables = vec![Table::new(vec![0, 1, 2, 0]), Table::new(vec![1, NEUTRAL, 0, 2])];
    let scaled = ScaledSeeds { shape: vec![3, 4], axis: 0, tables };
    s.push(OpSample::new(scaled).input(SYM, &[1, 4]).input(SYM, &[]));
    // Entries of compressed products gathered (repeats allowed), in a batch.
    let map = Table::new(vec![4, 0, 2, 2, 5]);
    s.push(OpSample::new(Decompress { map, len: 6 }).input(SYM, &[2, 6]));
}

fn map_samples(s: &mut Vec<OpSample>) {
    let v3 = Tensor::zeros(&[3]).unwrap();
    let two = trace(&|x: &Var, w: &Var| (x * w).sin() + x, (&v3, &v3)).expect("traceable body");
    let two = SubGraph::new(two);
    let one = SubGraph::new(trace(&|x: &Var| x.sum(&[0]).exp(), &v3).expect("traceable body"));
    let map = |body: &SubGraph, mapped: &[bool], size: usize| Map {
        body: body.clone(),
        mapped: mapped.to_vec(),
        size,
    };
    s.push(OpSample::new(map(&two, &[true, false], 2)).input(SYM, &[2, 3]).input(SYM, &[3]));
    s.push(OpSample::new(map(&two, &[true, true], 2)).input(SYM, &[2, 3]).input(SYM, &[2, 3]));
    s.push(OpSample::new(map(&one, &[true], 4)).input(SYM, &[4, 3]));
}

/// `f` traced on zeros of `shapes`, as a body.
fn traced(f: &dyn Fn(&[Var]) -> Vec<Var>, shapes: &[&[usize]]) -> SubGraph {
    let args: Vec<Tensor> = shapes.iter().map(|sh| Tensor::zeros(sh).unwrap()).collect();
    SubGraph::new(trace(&|xs: &[Var]| f(xs), args).expect("traceable body"))
}

fn cond_samples(s: &mut Vec<OpSample>) {
    // Two branches of (x [2, 3], w [3]); indices from -1 to 2 are clamped.
    let shapes: &[&[usize]] = &[&[2, 3], &[3]];
    let a = traced(&|v| vec![(&v[0] * &v[1]).sin(), v[1].exp()], shapes);
    let b = traced(&|v| vec![&v[0] * &v[0] - &v[1], v[1].clone() * 3.0], shapes);
    let cond = Cond { branches: vec![a, b] };
    let index = InputKind::Int { lo: -1, hi: 3 };
    s.push(OpSample::new(cond).input(index, &[]).input(SYM, &[2, 3]).input(SYM, &[3]));
}

fn scan_samples(s: &mut Vec<OpSample>) {
    // consts c [3], carry k [3], x [3] -> (sin(k c) + x, k x), 4 steps, both directions.
    let body = traced(&|v| vec![(&v[1] * &v[0]).sin() + &v[2], &v[1] * &v[2]], &[&[3], &[3], &[3]]);
    // Reverse mode with checkpoints every 3 steps of 4 (a partial last segment).
    for (reverse, checkpoint) in [(false, None), (true, None), (false, Some(3)), (true, Some(3))] {
        let scan =
            Scan { body: body.clone(), consts: 1, carries: 1, length: 4, reverse, checkpoint };
        s.push(OpSample::new(scan).input(SYM, &[3]).input(SYM, &[3]).input(SYM, &[4, 3]));
    }
}

fn while_samples(s: &mut Vec<OpSample>) {
    // consts c [3]; carries n (i64), x [3]: while n < 3, x <- sin(x c) + x.
    // A random start n in [0, 3) makes the number of steps differ across a
    // batch (the predicate is batched). Bounded, so reverse mode works.
    let types = [
        TensorType::new(DType::F64, vec![3]),
        TensorType::new(DType::I64, vec![]),
        TensorType::new(DType::F64, vec![3]),
    ];
    let cond = anvil::core::trace_with(&types, |v| Ok(vec![v[1].lt(&v[1].full_like(3.0))]));
    let body = anvil::core::trace_with(&types, |v| {
        Ok(vec![&v[1] + &v[1].ones_like(), (&v[2] * &v[0]).sin() + &v[2]])
    });
    let (cond, body) = (cond.expect("traceable predicate"), body.expect("traceable body"));
    let w = While {
        cond: cond.into(),
        body: body.into(),
        consts: 1,
        max_steps: Some(5),
        masked: false,
    };
    s.push(
        OpSample::new(w)
            .input(SYM, &[3])
            .input(InputKind::Int { lo: 0, hi: 3 }, &[])
            .input(SYM, &[3]),
    );
}

fn custom_jvp_samples(s: &mut Vec<OpSample>) {
    // custom_jvp of x * y + sin(x), with broadcasting, and its true jvp.
    let primal = traced(&|v| vec![&v[0] * &v[1] + v[0].sin()], &[&[2, 3], &[3]]);
    let jvp = traced(
        &|v| {
            let (x, y, tx, ty) = (&v[0], &v[1], &v[2], &v[3]);
            vec![x * y + x.sin(), tx * y + x * ty + tx * &x.cos()]
        },
        &[&[2, 3], &[3], &[2, 3], &[3]],
    );
    s.push(
        OpSample::new(CustomJvpCall { primal, jvp, consts: 0 })
            .input(SYM, &[2, 3])
            .input(SYM, &[3]),
    );
}

fn custom_vjp_samples(s: &mut Vec<OpSample>) {
    // custom_vjp of sin(x * w): fwd keeps cos(x * w), x and w; bwd uses them.
    // Reverse mode only: its forward mode is unsupported by design, as in JAX.
    let primal = traced(&|v| vec![(&v[0] * &v[1]).sin()], &[&[3], &[3]]);
    let fwd = traced(
        &|v| {
            let xw = &v[0] * &v[1];
            vec![xw.sin(), xw.cos(), v[0].clone(), v[1].clone()]
        },
        &[&[3], &[3]],
    );
    let bwd = traced(
        &|v| {
            let (c, x, w, ct) = (&v[0], &v[1], &v[2], &v[3]);
            let g = ct * c;
            vec![&g * w, &g * x]
        },
        &[&[3], &[3], &[3], &[3]],
    );
    s.push(
        OpSample::new(CustomVjpCall { primal, fwd, bwd: bwd.clone(), consts: 0 })
            .input(SYM, &[3])
            .input(SYM, &[3])
            .reverse_only(),
    );
    // Its tangent node: residuals (c, x, w), then the tangents of x and w.
    // It has no forward evaluation (only a transpose), so only types are checked.
    let mut tangent = OpSample::new(CustomVjpTangent {
        bwd,
        residuals: 3,
        outs: vec![TensorType::new(DType::F64, vec![3])],
    });
    for _ in 0..5 {
        tangent = tangent.input(SYM, &[3]);
    }
    s.push(tangent.not_evaluable());
}
