//! Samples of the ops of [`anvil::lax`], and of its composites (dynamic
//! slices, gathers, scatters, `pad`) as the bodies of one-step `map`s, so
//! that the kit checks what they are built from under every transform:
//! vmap against a loop (nested too), jvp against finite differences, the
//! transpose dot test. Edge values: out-of-range start indices (clamped or
//! dropped), ties of `sort` and `cummax` (integer samples, where the
//! derivative checks do not apply: at a tie finite differences see a kink),
//! zeros in `cumprod`, `integer_pow` with exponent 0 and negative ones,
//! infinities and NaN for `is_finite`.

use super::{InputKind, OpSample};
use anvil::core::SubGraph;
use anvil::lax::*;
use anvil::ops::control::Map;
use anvil::{trace, DType, Op, Tensor, Var};

fn uniform(lo: f64, hi: f64) -> InputKind {
    InputKind::Uniform { lo, hi }
}
fn int(lo: i64, hi: i64) -> InputKind {
    InputKind::Int { lo, hi }
}
const SYM: InputKind = InputKind::Uniform { lo: -1.0, hi: 1.0 };

/// Every sample of the ops and composites of [`anvil::lax`].
pub(super) fn lax_samples(s: &mut Vec<OpSample>) {
    unary_samples(s);
    binary_samples(s);
    power_and_predicate_samples(s);
    cumulative_samples(s);
    sort_samples(s);
    indexing_samples(s);
}

fn unary_samples(s: &mut Vec<OpSample>) {
    let unary: Vec<(Box<dyn Op>, InputKind)> = vec![
        (Box::new(Sinh), uniform(-2.0, 2.0)),
        (Box::new(Cosh), uniform(-2.0, 2.0)),
        (Box::new(Asin), uniform(-0.9, 0.9)),
        (Box::new(Acos), uniform(-0.9, 0.9)),
        (Box::new(Atan), uniform(-3.0, 3.0)),
        (Box::new(Asinh), uniform(-3.0, 3.0)),
        (Box::new(Acosh), uniform(1.2, 3.0)),
        (Box::new(Atanh), uniform(-0.9, 0.9)),
        (Box::new(Exp2), uniform(-2.0, 2.0)),
        (Box::new(Log2), uniform(0.5, 3.0)),
        (Box::new(Log10), uniform(0.5, 3.0)),
        (Box::new(Erfc), uniform(-2.0, 2.0)),
        (Box::new(ErfInv), uniform(-0.9, 0.9)),
        (Box::new(Cbrt), InputKind::AwayFromZero { lo: 0.3, hi: 2.0 }),
    ];
    for (op, kind) in unary {
        s.push(OpSample::from_boxed(op).input(kind, &[2, 3]));
    }
    s.push(
        OpSample::new(ErfInv).input_dtype(uniform(-0.99, 0.99), &[4], DType::F32).tol(1e-6, 1e-6),
    );
    s.push(OpSample::new(Sinh).input_dtype(SYM, &[3], DType::F32).tol(1e-6, 1e-6));
}

fn binary_samples(s: &mut Vec<OpSample>) {
    // a / b in (2.1, 2.8): away from the jumps of rem at integer quotients.
    let rem = OpSample::new(Rem).input(uniform(1.1, 1.4), &[2, 3]).input(uniform(0.5, 0.52), &[3]);
    s.push(rem);
    s.push(OpSample::new(Rem).input(int(-9, 10), &[2, 3]).input(int(1, 4), &[3]));
    s.push(OpSample::new(Nextafter).input(SYM, &[2, 3]).input(SYM, &[2, 3]));
    // x on the grid 0.1 k, the bounds between grid points: no ties.
    let clamp = OpSample::new(Clamp)
        .input(uniform(-0.57, -0.53), &[])
        .input(InputKind::Distinct { offset: 0.0 }, &[2, 3])
        .input(uniform(0.53, 0.57), &[3]);
    s.push(clamp);
    s.push(
        OpSample::new(Clamp)
            .input(int(-3, 0), &[3])
            .input(int(-6, 6), &[2, 3])
            .input(int(0, 3), &[]),
    );
}

fn power_and_predicate_samples(s: &mut Vec<OpSample>) {
    for y in [0, 1, 2, 3] {
        s.push(OpSample::new(IntegerPow { y }).input(SYM, &[2, 3]));
    }
    s.push(
        OpSample::new(IntegerPow { y: -2 })
            .input(InputKind::AwayFromZero { lo: 0.5, hi: 2.0 }, &[3]),
    );
    s.push(OpSample::new(IntegerPow { y: 3 }).input(int(-4, 5), &[2, 2]));
    let edges = Tensor::from_vec(
        vec![0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -2.5, 1e308],
        &[2, 3],
    )
    .expect("literal matches its shape");
    s.push(OpSample::new(IsFinite).given(edges, SYM));
    s.push(OpSample::new(IsFinite).input_dtype(SYM, &[3], DType::F32));
}

fn cumulative_samples(s: &mut Vec<OpSample>) {
    let kinds = [
        (CumulativeKind::Sum, SYM),
        (CumulativeKind::Prod, uniform(-1.5, 1.5)),
        (CumulativeKind::Max, InputKind::Distinct { offset: 0.0 }),
        (CumulativeKind::Min, InputKind::Distinct { offset: 0.0 }),
        (CumulativeKind::LogSumExp, uniform(-3.0, 3.0)),
    ];
    for (kind, input) in kinds {
        for (axis, reverse) in [(0, false), (1, true), (1, false)] {
            s.push(OpSample::new(Cumulative { kind, axis, reverse }).input(input.clone(), &[3, 5]));
        }
    }
    // Exact zeros in a product; ties in integer maxima and minima.
    let zeros = Tensor::from_vec(vec![0.5, 0.0, 2.0, -1.5, 0.0, 3.0], &[6]).expect("literal");
    s.push(
        OpSample::new(Cumulative { kind: CumulativeKind::Prod, axis: 0, reverse: false })
            .given(zeros, SYM),
    );
    for kind in
        [CumulativeKind::Sum, CumulativeKind::Max, CumulativeKind::Min, CumulativeKind::Prod]
    {
        s.push(
            OpSample::new(Cumulative { kind, axis: 1, reverse: true }).input(int(0, 3), &[2, 5]),
        );
    }
}

fn sort_samples(s: &mut Vec<OpSample>) {
    let distinct = InputKind::Distinct { offset: 0.0 };
    s.push(OpSample::new(Sort { axis: 1, descending: false }).input(distinct.clone(), &[2, 5]));
    s.push(OpSample::new(Sort { axis: 0, descending: true }).input(distinct.clone(), &[4, 3]));
    s.push(OpSample::new(Sort { axis: 0, descending: false }).input(distinct, &[6]));
    // Ties: the sort must be stable in both directions.
    s.push(OpSample::new(Sort { axis: 1, descending: false }).input(int(0, 3), &[3, 6]));
    s.push(OpSample::new(Sort { axis: 1, descending: true }).input(int(0, 3), &[3, 6]));
}

/// `f` as the body of a `map` of one step over inputs of `shapes` (each
/// with the leading step axis of size 1 added by the sample).
fn one_step(f: &dyn Fn(&[Var]) -> Var, shapes: &[(&[usize], DType)]) -> Map {
    let args: Vec<Tensor> =
        shapes.iter().map(|(sh, d)| Tensor::zeros(sh).unwrap().cast(*d)).collect();
    let g = trace(&|xs: &[Var]| f(xs), args).expect("traceable body");
    Map { body: SubGraph::new(g), mapped: vec![true; shapes.len()], size: 1 }
}

fn indexing_samples(s: &mut Vec<OpSample>) {
    let (f, i) = (DType::F64, DType::I64);
    // Start indices from -2 to 5 on axes of 4 and 5: clamped at both ends.
    let starts = int(-2, 6);
    let ds = one_step(
        &|v| dynamic_slice(&v[0], &[&v[1], &v[2]], &[2, 3]),
        &[(&[4, 5], f), (&[], i), (&[], i)],
    );
    s.push(
        OpSample::new(ds)
            .input(SYM, &[1, 4, 5])
            .input(starts.clone(), &[1])
            .input(starts.clone(), &[1]),
    );
    let dus = one_step(
        &|v| dynamic_update_slice(&v[0], &v[1], &[&v[2], &v[3]]),
        &[(&[4, 5], f), (&[2, 3], f), (&[], i), (&[], i)],
    );
    s.push(
        OpSample::new(dus)
            .input(SYM, &[1, 4, 5])
            .input(SYM, &[1, 2, 3])
            .input(starts.clone(), &[1])
            .input(starts, &[1]),
    );
    // x[idx, 1:3] on a [5, 4] operand: a gather with one collapsed axis and
    // one offset axis; indices from -2 to 6, clipped or filled.
    let dn = GatherDimensionNumbers {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0, 1],
        ..Default::default()
    };
    for mode in [GatherMode::Clip, GatherMode::FillOrDrop] {
        let dn = dn.clone();
        let g = one_step(
            &move |v| gather(&v[0], &v[1], &dn, &[1, 2], mode, Some(0.0)),
            &[(&[5, 4], f), (&[3, 2], i)],
        );
        s.push(OpSample::new(g).input(SYM, &[1, 5, 4]).input(int(-2, 7), &[1, 3, 2]));
    }
    // Rows scattered into a [5, 3] operand, added and replaced.
    let sn = ScatterDimensionNumbers {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        ..Default::default()
    };
    let shapes: &[(&[usize], DType)] = &[(&[5, 3], f), (&[4, 1], i), (&[4, 3], f)];
    let sn2 = sn.clone();
    let add =
        one_step(&move |v| scatter_add(&v[0], &v[1], &v[2], &sn2, GatherMode::FillOrDrop), shapes);
    s.push(
        OpSample::new(add)
            .input(SYM, &[1, 5, 3])
            .input(int(-1, 7), &[1, 4, 1])
            .input(SYM, &[1, 4, 3]),
    );
    // Replacing needs unique in-range indices for a smooth result.
    let rep = one_step(&move |v| scatter(&v[0], &v[1], &v[2], &sn, GatherMode::Clip), shapes);
    let unique = Tensor::from_vec(vec![3i64, 0, 4, 1], &[1, 4, 1]).expect("literal");
    s.push(
        OpSample::new(rep)
            .input(SYM, &[1, 5, 3])
            .given(unique, InputKind::Fixed)
            .input(SYM, &[1, 4, 3]),
    );
    // lax.pad: interior, negative and positive widths; a traced padding value.
    let p = one_step(&|v| pad(&v[0], &v[1], &[(1, -1, 2), (-2, 1, 0)]), &[(&[3, 4], f), (&[], f)]);
    s.push(OpSample::new(p).input(SYM, &[1, 3, 4]).input(SYM, &[1]));
}
