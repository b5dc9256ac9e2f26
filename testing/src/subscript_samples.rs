//! Samples of the NumPy subscripts ([`anvil::subscript`]: `x.i(ix![...])`
//! and `x.at(ix![...])`), as the bodies of one-step `map`s, so that the kit
//! checks what they are built from under every transform: vmap against a
//! loop (nested too), jvp against finite differences, the transpose dot
//! test. Covered: strided slices with negative steps, new axes, integers
//! dropping axes, the ellipsis; traced arrays (clamped reads, dropped
//! updates, repeated positions that accumulate), adjacent and separated
//! advanced indices; every update (`set`, `add`, `mul`, `min`, `max`).

use super::{InputKind, OpSample};
use anvil::core::SubGraph;
use anvil::ops::control::Map;
use anvil::{ix, trace, DType, NewAxis, Tensor, Var, VarExt};

const SYM: InputKind = InputKind::Uniform { lo: -1.0, hi: 1.0 };

fn int(lo: i64, hi: i64) -> InputKind {
    InputKind::Int { lo, hi }
}

/// `f` as the body of a `map` of one step over inputs of `shapes` (each
/// with the leading step axis of size 1 added by the sample).
pub(super) fn one_step(f: &dyn Fn(&[Var]) -> Var, shapes: &[(&[usize], DType)]) -> Map {
    let args: Vec<Tensor> =
        shapes.iter().map(|(sh, d)| Tensor::zeros(sh).unwrap().cast(*d)).collect();
    let g = trace(&|xs: &[Var]| f(xs), args).expect("traceable body");
    Map { body: SubGraph::new(g), mapped: vec![true; shapes.len()], size: 1 }
}

/// `shape` with the one-step axis in front.
pub(super) fn stepped(shape: &[usize]) -> Vec<usize> {
    std::iter::once(1).chain(shape.iter().copied()).collect()
}

/// Every sample of the subscripts.
pub(super) fn subscript_samples(s: &mut Vec<OpSample>) {
    read_samples(s);
    update_samples(s);
}

fn read_samples(s: &mut Vec<OpSample>) {
    let (f, i) = (DType::F64, DType::I64);
    // x[1:, None, ::-2, -1] and x[..., 1:3] (static: slice and reshape).
    let basic = one_step(&|v| v[0].i(ix![1.., NewAxis, ..;-2, -1]), &[(&[3, 4, 5], f)]);
    s.push(OpSample::new(basic).input(SYM, &stepped(&[3, 4, 5])));
    let ell = one_step(&|v| v[0].i(ix![..., 3..1;-1]), &[(&[2, 3, 4], f)]);
    s.push(OpSample::new(ell).input(SYM, &stepped(&[2, 3, 4])));
    // x[idx, :, 1]: an array and an integer, separated (their axes first);
    // indices from -6 to 6 on an axis of 4, clamped.
    let sep = one_step(&|v| v[0].i(ix![&v[1], .., 1]), &[(&[4, 3, 2], f), (&[2, 2], i)]);
    s.push(OpSample::new(sep).input(SYM, &stepped(&[4, 3, 2])).input(int(-6, 7), &[1, 2, 2]));
    // x[:, rows, cols]: adjacent arrays broadcast together ([3] with [2, 1]).
    let adj =
        one_step(&|v| v[0].i(ix![.., &v[1], &v[2]]), &[(&[2, 4, 3], f), (&[3], i), (&[2, 1], i)]);
    s.push(
        OpSample::new(adj)
            .input(SYM, &stepped(&[2, 4, 3]))
            .input(int(-4, 4), &[1, 3])
            .input(int(-3, 3), &[1, 2, 1]),
    );
}

fn update_samples(s: &mut Vec<OpSample>) {
    let (f, i) = (DType::F64, DType::I64);
    // Static: x[1::2, -1] = v, x[..., ::2] += v (v broadcast), x[0] *= v.
    let set = one_step(&|v| v[0].at(ix![1..;2, -1]).set(&v[1]), &[(&[4, 3], f), (&[2], f)]);
    s.push(OpSample::new(set).input(SYM, &stepped(&[4, 3])).input(SYM, &stepped(&[2])));
    let add = one_step(&|v| v[0].at(ix![..., ..;2]).add(&v[1]), &[(&[2, 3], f), (&[2, 1], f)]);
    s.push(OpSample::new(add).input(SYM, &stepped(&[2, 3])).input(SYM, &stepped(&[2, 1])));
    let mul = one_step(&|v| v[0].at(ix![0]).mul(&v[1]), &[(&[2, 3], f), (&[3], f)]);
    s.push(OpSample::new(mul).input(SYM, &stepped(&[2, 3])).input(SYM, &stepped(&[3])));
    // Traced rows: repeated and out of range (-6..6 on 4 rows: some dropped).
    let shapes: &[(&[usize], DType)] = &[(&[4, 2], f), (&[5], i), (&[5, 2], f)];
    let rows = int(-6, 7);
    let add = one_step(&|v| v[0].at(ix![&v[1]]).add(&v[2]), shapes);
    let mul = one_step(&|v| v[0].at(ix![&v[1]]).mul(&v[2]), shapes);
    for m in [add, mul] {
        s.push(
            OpSample::new(m)
                .input(SYM, &stepped(&[4, 2]))
                .input(rows.clone(), &[1, 5])
                .input(SYM, &stepped(&[5, 2])),
        );
    }
    // Minima and maxima: distinct values (no ties, where they have no
    // derivative), the operand and the updates on grids half a step apart.
    let min = one_step(&|v| v[0].at(ix![&v[1]]).min(&v[2]), shapes);
    let max = one_step(&|v| v[0].at(ix![&v[1]]).max(&v[2]), shapes);
    for m in [min, max] {
        s.push(
            OpSample::new(m)
                .input(InputKind::Distinct { offset: 0.0 }, &stepped(&[4, 2]))
                .input(rows.clone(), &[1, 5])
                .input(InputKind::Distinct { offset: 0.5 }, &stepped(&[5, 2])),
        );
    }
    // Replacing at traced positions: unique in range for a smooth result.
    let set =
        one_step(&|v| v[0].at(ix![.., &v[1]]).set(&v[2]), &[(&[2, 4], f), (&[3], i), (&[3], f)]);
    let unique = Tensor::from_vec(vec![3i64, 0, -3], &[1, 3]).expect("literal");
    s.push(
        OpSample::new(set)
            .input(SYM, &stepped(&[2, 4]))
            .given(unique, InputKind::Fixed)
            .input(SYM, &stepped(&[3])),
    );
}
