//! Every construct the reference documents list as supported by `vmap`,
//! checked against an independent computation.
//!
//! Tests named `s<section>_...` follow `references/tinygrad-vmapin-vmapout.md`
//! (sections 2, 3, 5 and 6.1–6.9); tests named `vd_...` follow
//! `references/vmap-design.md`. Each computes with anvil's `vmap` and compares
//! with either a loop of the *unbatched* function over slices ([`looped`],
//! which never calls `vmap`, or `anvil_testing::check_vmap`) or values worked
//! out by hand in plain Rust `f64` arithmetic.

use anvil::prelude::*;
use anvil_testing::{check_vmap, run};

/// A function of one element, for tables of cases.
type F1 = fn(&Var) -> Var;

/// `in_axes` of one level.
type Axes = Vec<Option<i64>>;

/// Deterministic inputs, uniform in [-1, 1).
use anvil_testing::random_tensor as rand;

/// Values in [0.5, 1.5): safe for `log`, `sqrt`, `recip` and `pow`.
fn rand_pos(shape: &[usize], seed: u64) -> Tensor {
    let v = rand(shape, seed).to_vec::<f64>().unwrap().iter().map(|v| v * 0.5 + 1.0).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// Small integers in -2..=2 stored as `f64`, so that comparisons for
/// equality are sometimes true.
fn rand_int(shape: &[usize], seed: u64) -> Tensor {
    let v = rand(shape, seed).to_vec::<f64>().unwrap().iter().map(|v| (v * 2.4).round()).collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn idx(v: Vec<i64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// A batched shape: `b` inserted at `axis` of an element shape.
fn batched(shape: &[usize], axis: usize, b: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s.insert(axis, b);
    s
}

/// One level of `vmap`, for the loop reference: the mapped axis of each
/// argument (`None`: shared), where the batch goes in the outputs (one entry
/// for all, or one per output), and the batch size when nothing is mapped.
#[derive(Clone)]
struct Level {
    in_axes: Vec<Option<usize>>,
    out_axes: Vec<usize>,
    size: Option<usize>,
}

fn lvl(in_axes: &[Option<usize>]) -> Level {
    Level { in_axes: in_axes.to_vec(), out_axes: vec![0], size: None }
}

fn lvl_out(in_axes: &[Option<usize>], out_axes: &[usize]) -> Level {
    Level { in_axes: in_axes.to_vec(), out_axes: out_axes.to_vec(), size: None }
}

/// The reference for (nested) `vmap`: for `levels = [outer, ..., inner]`,
/// slices the arguments along each level's axes, runs the *unbatched* `f` on
/// every slice and stacks the results at each level's `out_axes`. Never
/// calls `vmap`.
fn looped<M, F: IntoFunction<M>>(f: &F, args: &[Tensor], levels: &[Level]) -> Vec<Tensor> {
    let Some((lv, rest)) = levels.split_first() else {
        return run(f, args).unwrap_or_else(|e| panic!("unbatched run failed: {e}"));
    };
    let size = lv
        .size
        .or_else(|| args.iter().zip(&lv.in_axes).find_map(|(a, ax)| ax.map(|k| a.shape()[k])))
        .expect("a mapped argument or a size");
    let per: Vec<Vec<Tensor>> = (0..size)
        .map(|i| {
            let sliced: Vec<Tensor> = args
                .iter()
                .zip(&lv.in_axes)
                .map(|(a, ax)| match ax {
                    Some(k) => a.select_axis(*k, i).unwrap(),
                    None => a.clone(),
                })
                .collect();
            looped(f, &sliced, rest)
        })
        .collect();
    (0..per[0].len())
        .map(|o| {
            let parts: Vec<Tensor> = per.iter().map(|p| p[o].clone()).collect();
            let axis = if lv.out_axes.len() == 1 { lv.out_axes[0] } else { lv.out_axes[o] };
            Tensor::stack(&parts, axis).unwrap()
        })
        .collect()
}

/// Runs a (vmapped) function on tensors, panicking with the error's message.
#[track_caller]
fn go<M, F: IntoFunction<M>>(f: &F, args: &[Tensor]) -> Vec<Tensor> {
    run(f, args).unwrap_or_else(|e| panic!("run failed: {e}"))
}

/// Same number of outputs, and each with the same dtype, shape and values.
#[track_caller]
fn same(what: &str, got: &[Tensor], want: &[Tensor], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: number of outputs");
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.dtype(), w.dtype(), "{what}: dtype of output {o}");
        assert_eq!(g.shape(), w.shape(), "{what}: shape of output {o}\n got:\n{g}\n want:\n{w}");
        assert!(
            g.allclose(w, tol, tol),
            "{what}: output {o} differs (max |diff| {:?})\n got:\n{g}\n want:\n{w}",
            g.max_abs_diff(w)
        );
    }
}

/// `vmap(f)` with `in_axes` against [`looped`] (batch in front of every output).
#[track_caller]
fn check<M, F: IntoFunction<M> + Clone>(
    what: &str,
    f: &F,
    args: &[Tensor],
    in_axes: &[Option<usize>],
) {
    let axes: Vec<Option<i64>> = in_axes.iter().map(|a| a.map(|k| k as i64)).collect();
    let got = go(&vmap(f.clone()).in_axes(axes), args);
    same(what, &got, &looped(f, args, &[lvl(in_axes)]), 1e-12);
}

#[track_caller]
fn ok(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

// ------------------------------------------------ tinygrad §2–§3: VMAPIN / VMAPOUT

/// §2.1–2.2: "input shape (3, 6), varg = (RANGE(3), CONST(0)) → Output shape:
/// (6,) — axis 0 is 'consumed' by the RANGE" and "result shape (6,), varg =
/// (RANGE(3), CONST(0)) → Output shape: (3, 6) — axis 0 is re-inserted with
/// size 3". The mapped axis may be any axis (`(CONST(0), RANGE(3))`), and
/// VMAPOUT may re-insert it anywhere (anvil: `in_axes`, `out_axes`).
#[test]
fn s2_vmapin_drops_the_mapped_axis_and_vmapout_reinserts_it() {
    let f = |x: &Var| {
        assert_eq!(x.shape(), &[6], "the function sees one element, without the mapped axis");
        x * 2.0 + 1.0
    };
    let x = rand(&[3, 6], 1);
    let got = vmap(f).eval(&x).unwrap();
    assert_eq!(got.shape(), &[3, 6]);
    let want: Vec<f64> = vals(&x).iter().map(|v| v * 2.0 + 1.0).collect();
    assert_eq!(vals(&got), want);
    // varg (CONST(0), RANGE(3)) on both sides: axis 1 consumed, re-inserted at 1.
    let xt = rand(&[6, 3], 2);
    let got = vmap(f).in_axes(1).out_axes([1]).eval(&xt).unwrap();
    assert_eq!(got.shape(), &[6, 3]);
    let want: Vec<f64> = vals(&xt).iter().map(|v| v * 2.0 + 1.0).collect();
    assert_eq!(vals(&got), want);
    // Consumed at axis 1, re-inserted at axis 0: the transpose of the element-wise result.
    let got = vmap(f).in_axes(1).eval(&xt).unwrap();
    assert_eq!(got.shape(), &[3, 6]);
    for b in 0..3 {
        for i in 0..6 {
            let want = vals(&xt)[i * 3 + b] * 2.0 + 1.0;
            assert_eq!(vals(&got)[b * 6 + i], want, "element ({b}, {i})");
        }
    }
}

/// §3: `_vmap_simple(fn, x, in_axis)` — "varg_out = (varg_in[in_axis],) +
/// CONST(0) for _ in range(result.ndim)": whatever the mapped input axis and
/// whatever the rank of `fn`'s result (lower, equal or higher than its
/// input's), the batch axis comes out in front.
#[test]
fn s3_vmap_simple_puts_the_batch_in_front_for_any_in_axis_and_result_rank() {
    let fs: Vec<(&str, F1)> = vec![
        ("rank 0 result", |x| x.sum_all()),
        ("same rank", |x| x.exp() - x),
        ("higher rank (outer product with a row)", |x| x.unsqueeze(-1) * x.index_axis(0, 0)),
    ];
    for (name, f) in fs {
        for in_axis in 0..3 {
            let x = rand(&batched(&[4, 5], in_axis, 3), in_axis as u64 + 10);
            check(&format!("{name}, in_axis {in_axis}"), &f, &[x], &[Some(in_axis)]);
        }
    }
}

// ------------------------------------------------ tinygrad §5: intermediate realization

/// §5.1, the concrete example of the intermediate-realization bug, made a
/// test: "x = X.vmapin((CONST(0), RANGE(3))) # shape (4,); z =
/// Tensor.stack(x[:2].sum(), x[2:].sum()) # shape (2,); z_reindexed =
/// z[[0, 1]] # triggers multi-consumer realization; result =
/// z_reindexed.vmapout((RANGE(3), CONST(0)))". The bug wrote "all 3 batch
/// iterations to the same 2 positions — only the last iteration survives";
/// here every batch element must keep its own sums (values by hand).
#[test]
fn s5_stack_of_reductions_reindexed_by_a_list_keeps_every_batch_element() {
    // X[i][b] = 3 i + b: column b is (b, 3 + b, 6 + b, 9 + b).
    let xx = Tensor::from_vec((0..12).map(f64::from).collect(), &[4, 3]).unwrap();
    let f = |x: &Var| {
        let z = stack(
            &[
                &x.slice_axis(0, None, Some(2), 1).sum(&[0]),
                &x.slice_axis(0, Some(2), None, 1).sum(&[0]),
            ],
            0,
        );
        z.index(0, &[0, 1])
    };
    let got = vmap(f).in_axes(1).eval(&xx).unwrap();
    assert_eq!(got.shape(), &[3, 2]);
    // Row b: (b + 3 + b, 6 + b + 9 + b).
    assert_eq!(vals(&got), vec![3.0, 15.0, 5.0, 17.0, 7.0, 19.0]);

    // The intermediate `z` with several consumers (re-indexed twice and used
    // directly): [a, c] -> [a*a + c, c*c + a] per batch element.
    let g = |x: &Var| {
        let z = stack(
            &[
                &x.slice_axis(0, None, Some(2), 1).sum(&[0]),
                &x.slice_axis(0, Some(2), None, 1).sum(&[0]),
            ],
            0,
        );
        z.index(0, &[0, 1]) * &z + z.index(0, &[1, 0])
    };
    let got = vmap(g).in_axes(1).eval(&xx).unwrap();
    let want: Vec<f64> = (0..3)
        .flat_map(|b| {
            let (a, c) = (f64::from(3 + 2 * b), f64::from(15 + 2 * b));
            [a * a + c, c * c + a]
        })
        .collect();
    assert_eq!(vals(&got), want);
}

// ------------------------------------------------ tinygrad §6.1: basic operations

/// §6.1 "Elementwise ops: `x * w`, `x + y`, `2 * x`", with each operand
/// batched or shared (values by hand).
#[test]
fn s6_1_elementwise_binary_and_scalar_ops() {
    let (b, n) = (3, 4);
    let x = rand(&[b, n], 1);
    let y = rand(&[b, n], 2);
    let w = rand(&[n], 3); // shared
    let (xv, yv, wv) = (vals(&x), vals(&y), vals(&w));
    let f = |x: &Var, w: &Var, y: &Var| vec![x * w, x + y, 2.0 * x];
    let outs = go(&vmap(f).in_axes((Some(0), None, Some(0))), &[x, w, y]);
    let mul: Vec<f64> = (0..b * n).map(|k| xv[k] * wv[k % n]).collect();
    let add: Vec<f64> = (0..b * n).map(|k| xv[k] + yv[k]).collect();
    let dbl: Vec<f64> = xv.iter().map(|v| 2.0 * v).collect();
    for (o, want) in [mul, add, dbl].into_iter().enumerate() {
        assert_eq!(outs[o].shape(), &[b, n]);
        assert_eq!(vals(&outs[o]), want, "output {o}");
    }
}

/// §6.1 "Unary ops: `x.exp2()`, `x.sqrt()`, etc." anvil has no `exp2` or
/// `log2` op; the faithful equivalents `2^x` (`pow` with base 2) and
/// `log(x) / ln 2` are used. Values by hand.
#[test]
fn s6_1_unary_ops() {
    type H = fn(f64) -> f64;
    let fs: Vec<(&str, F1, H)> = vec![
        ("exp2", |x| x.full_like(2.0).pow(x), |v| v.exp2()),
        ("log2", |x| x.log() / std::f64::consts::LN_2, |v| v.log2()),
        ("sqrt", |x| x.sqrt(), |v| v.sqrt()),
        ("exp", |x| x.exp(), |v| v.exp()),
        ("sin", |x| x.sin(), |v| v.sin()),
        ("neg", |x| -x, |v| -v),
        ("recip", |x| x.recip(), |v| 1.0 / v),
        ("tanh", |x| x.tanh(), |v| v.tanh()),
    ];
    let x = rand_pos(&[3, 2, 4], 4);
    for (name, f, h) in fs {
        for axis in [0i64, 1, 2] {
            let got = vmap(f).in_axes(axis).eval(&x).unwrap();
            // The element-wise result with the batch axis moved to the front.
            let hx =
                Tensor::from_vec(vals(&x).iter().map(|&v| h(v)).collect(), &[3, 2, 4]).unwrap();
            let want = looped(&|t: &Var| t.clone(), &[hx], &[lvl(&[Some(axis as usize)])]);
            assert!(
                got.allclose(&want[0], 1e-14, 1e-14),
                "{name}, axis {axis}:\n{got}\n{}",
                want[0]
            );
        }
    }
}

/// §6.1 "Ternary ops: `cond.where(a, b)`", with every operand batched or shared.
#[test]
fn s6_1_ternary_where() {
    let f = |c: &Var, a: &Var, b: &Var| where_(&c.gt(&c.scalar_like(0.0)), a, b);
    let shapes = [vec![4], vec![2, 4], vec![4]]; // a broadcasts against c and b
    for mask in 1..8u32 {
        let in_axes: Vec<Option<usize>> =
            (0..3).map(|i| (mask >> i & 1 == 1).then_some(i % 2)).collect();
        let args: Vec<Tensor> = (0..3)
            .map(|i| match in_axes[i] {
                Some(k) => rand(&batched(&shapes[i], k, 3), i as u64 + 20),
                None => rand(&shapes[i], i as u64 + 20),
            })
            .collect();
        check(&format!("where, in_axes {in_axes:?}"), &f, &args, &in_axes);
    }
}

/// §6.1 "Casting: `x.cast(dtypes.float16)`". anvil has no `f16`; `f32` is the
/// closest narrowing cast, plus casts to `i64` and from `bool`. The result
/// keeps the cast dtype; values by hand.
#[test]
fn s6_1_cast() {
    let x = rand(&[3, 5], 5);
    let xv = vals(&x);
    let got = vmap(|x: &Var| x.cast(DType::F32)).eval(&x).unwrap();
    assert_eq!(got.dtype(), DType::F32);
    assert_eq!(got.to_vec::<f32>().unwrap(), xv.iter().map(|&v| v as f32).collect::<Vec<_>>());
    let got = vmap(|x: &Var| (x * 10.0).cast(DType::I64)).in_axes(1).eval(&x).unwrap();
    assert_eq!(got.dtype(), DType::I64);
    assert_eq!(got.shape(), &[5, 3]);
    let want: Vec<i64> = (0..15).map(|k| (xv[(k % 3) * 5 + k / 3] * 10.0) as i64).collect(); // transposed
    assert_eq!(got.to_vec::<i64>().unwrap(), want);
    let got = vmap(|x: &Var| x.gt(&x.scalar_like(0.0)).cast(DType::F64)).eval(&x).unwrap();
    assert_eq!(vals(&got), xv.iter().map(|&v| f64::from(u8::from(v > 0.0))).collect::<Vec<_>>());
}

// ------------------------------------------------ tinygrad §6.2: reductions

/// §6.2 "Sum: `x.sum()`, `x.sum(axis=0)`" with the batch axis at the front,
/// middle and back.
#[test]
fn s6_2_sum_all_and_along_an_axis() {
    let x = Tensor::from_vec((0..6).map(f64::from).collect(), &[2, 3]).unwrap();
    // Hand: rows (0,1,2), (3,4,5).
    assert_eq!(vals(&vmap(|x: &Var| x.sum_all()).eval(&x).unwrap()), vec![3.0, 12.0]);
    assert_eq!(
        vals(&vmap(|x: &Var| x.sum(&[0])).in_axes(1).eval(&x).unwrap()),
        vec![3.0, 5.0, 7.0]
    );
    let f1 = |x: &Var| x.sum_all();
    let f2 = |x: &Var| x.sum(&[0]);
    for axis in 0..3 {
        let x = rand(&batched(&[4, 5], axis, 3), 30 + axis as u64);
        check(&format!("sum(), batch axis {axis}"), &f1, std::slice::from_ref(&x), &[Some(axis)]);
        check(&format!("sum(0), batch axis {axis}"), &f2, &[x], &[Some(axis)]);
    }
}

/// §6.2 "Mean: `x.mean()`" and "Max: `x.max()`".
#[test]
fn s6_2_mean_and_max() {
    let x = rand(&[3, 4, 5], 31);
    let got = vmap(|x: &Var| vec![x.mean(), x.max(&[0, 1], false)]).eval(&x).unwrap();
    for b in 0..3 {
        let e = vals(&x.select_axis(0, b).unwrap());
        let mean = e.iter().sum::<f64>() / 20.0;
        let max = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!((vals(&got[0])[b] - mean).abs() < 1e-14, "mean of element {b}");
        assert_eq!(vals(&got[1])[b], max, "max of element {b}");
    }
    let f = |x: &Var| vec![x.mean(), x.max(&[0, 1], false), x.max(&[-1], false)];
    for axis in 0..3 {
        let x = rand(&batched(&[4, 5], axis, 3), 32 + axis as u64);
        check(&format!("mean/max, batch axis {axis}"), &f, &[x], &[Some(axis)]);
    }
}

/// §6.2 "Matmul / dot product: `x @ M`, `row @ matrix`", with the matrix
/// shared or batched; one case by hand.
#[test]
fn s6_2_matmul_and_row_times_matrix() {
    let mm = |x: &Var, m: &Var| x.matmul(m);
    // row @ matrix by hand: rows (1, 2) and (3, 4) times [[1, 0, 2], [0, 1, 3]].
    let rows = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let m = Tensor::from_vec(vec![1.0, 0.0, 2.0, 0.0, 1.0, 3.0], &[2, 3]).unwrap();
    let got = vmap(mm).in_axes([Some(0), None]).eval((&rows, &m)).unwrap();
    assert_eq!(vals(&got), vec![1.0, 2.0, 8.0, 3.0, 4.0, 18.0]);
    for (sx, sm) in [(vec![2, 3], vec![3, 4]), (vec![3], vec![3, 4]), (vec![2, 3], vec![3])] {
        for axes in
            [[Some(0), None], [None, Some(0)], [Some(0), Some(0)], [Some(sx.len()), Some(1)]]
        {
            let x = axes[0].map_or_else(|| rand(&sx, 1), |k| rand(&batched(&sx, k, 3), 1));
            let m = axes[1].map_or_else(|| rand(&sm, 2), |k| rand(&batched(&sm, k, 3), 2));
            check(&format!("{sx:?} @ {sm:?}, in_axes {axes:?}"), &mm, &[x, m], &axes);
        }
    }
}

// ------------------------------------------------ tinygrad §6.3: movement

/// §6.3 movement ops, each with the batch axis at every position: "Reshape
/// `x.reshape((2, 3))`", "Flatten", "Permute / Transpose", "Expand
/// `x.expand((3,))`", "Shrink / Slice `x[:2]`, `x[1:3, 2:4]`", "Pad
/// `x.pad(((1,0), (0,1)))`", "Flip `x.flip(0)`", "Unsqueeze / Squeeze
/// `x.unsqueeze(0)`".
#[test]
fn s6_3_movement_ops() {
    let cases: Vec<(&str, F1, Vec<usize>)> = vec![
        ("reshape((2, 3))", |x| x.reshape(&[2, 3]), vec![6]),
        ("reshape(-1, 2)", |x| x.reshape(&[-1, 2]), vec![2, 3, 2]),
        ("flatten", |x| x.flatten(), vec![2, 3, 2]),
        ("transpose", |x| x.transpose(), vec![3, 4]),
        ("permute", |x| x.permute(&[2, 0, 1]), vec![2, 3, 4]),
        ("expand((3,)) of ()", |x| x.expand(&[3]), vec![]),
        ("expand((3,)) of (1,)", |x| x.expand(&[3]), vec![1]),
        ("expand inner", |x| x.expand(&[2, 4, 3]), vec![2, 1, 3]),
        ("x[:2]", |x| x.slice_axis(0, None, Some(2), 1), vec![4, 5]),
        ("x[1:3, 2:4]", |x| x.slice(&[SliceSpec::range(1, 3), SliceSpec::range(2, 4)]), vec![4, 5]),
        (
            "x[::-2, 1:]",
            |x| x.slice(&[SliceSpec { start: None, stop: None, step: -2 }, SliceSpec::range(1, 5)]),
            vec![4, 5],
        ),
        ("pad(((1,0), (0,1)))", |x| x.pad(&[(1, 0), (0, 1)], 0.0), vec![4, 5]),
        ("flip(0)", |x| x.flip(&[0]), vec![4, 5]),
        ("unsqueeze(0)", |x| x.unsqueeze(0), vec![4, 5]),
        ("unsqueeze(-1)", |x| x.unsqueeze(-1), vec![4, 5]),
        ("squeeze", |x| x.squeeze(&[1]), vec![4, 1, 5]),
    ];
    for (name, f, shape) in cases {
        for axis in 0..=shape.len() {
            let x = rand(&batched(&shape, axis, 3), axis as u64 + 40);
            check(&format!("{name}, batch axis {axis}"), &f, &[x], &[Some(axis)]);
        }
    }
    // x[1:3, 2:4] by hand, batch at axis 1: x[i][b][j] = 100 i + 10 b + j.
    let v: Vec<f64> = (0..4)
        .flat_map(|i| {
            (0..2).flat_map(move |b| (0..5).map(move |j| f64::from(100 * i + 10 * b + j)))
        })
        .collect();
    let x = Tensor::from_vec(v, &[4, 2, 5]).unwrap();
    let got = vmap(|x: &Var| x.slice(&[SliceSpec::range(1, 3), SliceSpec::range(2, 4)]))
        .in_axes(1)
        .eval(&x)
        .unwrap();
    assert_eq!(got.shape(), &[2, 2, 2]);
    assert_eq!(vals(&got), vec![102.0, 103.0, 202.0, 203.0, 112.0, 113.0, 212.0, 213.0]);
}

// ------------------------------------------------ tinygrad §6.4: stack and cat

/// §6.4 "Stack: `Tensor.stack(a, b, c)`" and "Stack of reduces:
/// `Tensor.stack(x[:2].sum(), x[2:].sum())`", at every batch axis and stacking axis.
#[test]
fn s6_4_stack_of_values_and_of_reduces() {
    let cases: Vec<(&str, F1)> = vec![
        ("stack(a, b, c)", |x| stack(&[&x.sin(), x, &(x * 3.0)], 0)),
        ("stack(a, b, c) at -1", |x| stack(&[&x.sin(), x, &(x * 3.0)], -1)),
        ("stack(a, b, c) at 1", |x| stack(&[&x.sin(), x, &(x * 3.0)], 1)),
        ("stack of reduces", |x| {
            stack(
                &[
                    &x.slice_axis(0, None, Some(2), 1).sum(&[0]),
                    &x.slice_axis(0, Some(2), None, 1).sum(&[0]),
                ],
                0,
            )
        }),
        ("stack of full reduces", |x| {
            stack(
                &[
                    &x.slice_axis(0, None, Some(2), 1).sum_all(),
                    &x.slice_axis(0, Some(2), None, 1).max(&[0, 1], false),
                ],
                0,
            )
        }),
    ];
    for (name, f) in cases {
        for axis in 0..3 {
            let x = rand(&batched(&[4, 3], axis, 3), axis as u64 + 50);
            check(&format!("{name}, batch axis {axis}"), &f, &[x], &[Some(axis)]);
        }
    }
}

/// §6.4 "Cat: `Tensor.cat(vmapped, other, dim=0)`": a batched value
/// concatenated with a value that does not depend on the batch.
#[test]
fn s6_4_cat_with_an_unbatched_operand() {
    let f = |x: &Var, other: &Var| concatenate(&[&x.exp(), other], 0);
    let g = |x: &Var, other: &Var| concatenate(&[other, x, other], -1);
    for axis in 0..3 {
        let x = rand(&batched(&[2, 3], axis, 4), axis as u64 + 60);
        check(
            &format!("cat dim 0, batch axis {axis}"),
            &f,
            &[x.clone(), rand(&[5, 3], 61)],
            &[Some(axis), None],
        );
        check(
            &format!("cat dim -1, batch axis {axis}"),
            &g,
            &[x, rand(&[2, 1], 62)],
            &[Some(axis), None],
        );
    }
    // By hand: [x0, x1] ++ [7].
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let got = vmap(|x: &Var, o: &Var| concatenate(&[x, o], 0))
        .in_axes([Some(0), None])
        .eval((&x, &Tensor::vector(&[7.0])))
        .unwrap();
    assert_eq!(vals(&got), vec![1.0, 2.0, 7.0, 3.0, 4.0, 7.0]);
}

// ------------------------------------------------ tinygrad §6.5: indexing

/// §6.5 "Scalar index: `flat[0]`" and "Slice: `x[:3]`" (by hand and by loop).
#[test]
fn s6_5_scalar_index_and_slice() {
    let x = Tensor::from_vec((0..12).map(f64::from).collect(), &[3, 2, 2]).unwrap();
    let got = vmap(|x: &Var| x.flatten().index_axis(0, 0)).eval(&x).unwrap();
    assert_eq!(vals(&got), vec![0.0, 4.0, 8.0]);
    let got = vmap(|x: &Var| x.flatten().index_axis(0, -1)).eval(&x).unwrap();
    assert_eq!(vals(&got), vec![3.0, 7.0, 11.0]);
    let got = vmap(|x: &Var| x.flatten().slice_axis(0, None, Some(3), 1)).eval(&x).unwrap();
    assert_eq!(vals(&got), vec![0.0, 1.0, 2.0, 4.0, 5.0, 6.0, 8.0, 9.0, 10.0]);
    let cases: Vec<(&str, F1)> = vec![
        ("flat[0]", |x| x.flatten().index_axis(0, 0)),
        ("x[1]", |x| x.index_axis(0, 1)),
        ("x[:, -1]", |x| x.index_axis(1, -1)),
        ("x[:3]", |x| x.slice_axis(0, None, Some(3), 1)),
    ];
    for (name, f) in cases {
        for axis in 0..3 {
            let x = rand(&batched(&[4, 5], axis, 3), axis as u64 + 70);
            check(&format!("{name}, batch axis {axis}"), &f, &[x], &[Some(axis)]);
        }
    }
}

/// §6.5 "Fancy index (list): `z[[0, 1]]`", on any axis, with repeated and
/// negative entries.
#[test]
fn s6_5_fancy_index_by_a_list() {
    let x = Tensor::from_vec((0..6).map(f64::from).collect(), &[2, 3]).unwrap();
    let got = vmap(|z: &Var| z.index(0, &[2, 0, -1, 0])).eval(&x).unwrap();
    assert_eq!(vals(&got), vec![2.0, 0.0, 2.0, 0.0, 5.0, 3.0, 5.0, 3.0]);
    let cases: Vec<(&str, F1)> = vec![
        ("z[[0, 1]]", |z| z.index(0, &[0, 1])),
        ("z[:, [3, -1, 3]]", |z| z.index(1, &[3, -1, 3])),
        ("z[..., [2, 0]] (axis -1)", |z| z.index(-1, &[2, 0])),
    ];
    for (name, f) in cases {
        for axis in 0..3 {
            let x = rand(&batched(&[4, 5], axis, 3), axis as u64 + 80);
            check(&format!("{name}, batch axis {axis}"), &f, &[x], &[Some(axis)]);
        }
    }
}

/// §6.5 "Fancy index (Tensor): `z[Tensor([0, 1])]`": `take` with the index
/// tensor shared, batched (one index tensor per element) or both batched,
/// at every indexed axis (including negative) and several batch positions.
#[test]
fn s6_5_fancy_index_by_a_tensor_batched_shared_or_both() {
    // By hand: element b of z indexed by its own indices.
    let z = Tensor::from_vec((0..8).map(f64::from).collect(), &[2, 4]).unwrap();
    let i = idx(vec![3, 0, 1, -1], &[2, 2]);
    let got = vmap(|z: &Var, i: &Var| z.take(i, 0)).eval((&z, &i)).unwrap();
    assert_eq!(vals(&got), vec![3.0, 0.0, 5.0, 7.0]);
    // Shared operand, batched indices: a lookup table.
    let got =
        vmap(|z: &Var, i: &Var| z.take(i, 1)).in_axes([None, Some(0)]).eval((&z, &i)).unwrap();
    assert_eq!(got.shape(), &[2, 2, 2]);
    assert_eq!(vals(&got), vec![3.0, 0.0, 7.0, 4.0, 1.0, 3.0, 5.0, 7.0]);

    let ix = idx(vec![0, -1, 2, 2, 1, 0, 3, -4, 1, 1, 0, 2], &[3, 2, 2]); // element [2, 2]
    for axis in [0i64, 1, -1] {
        let f = move |z: &Var, i: &Var| z.take(i, axis);
        for (xa, ia) in [
            (Some(0), None),
            (None, Some(0)),
            (Some(0), Some(0)),
            (Some(1), Some(2)),
            (Some(2), Some(1)),
            (Some(2), None),
            (None, Some(2)),
        ] {
            let zt = xa.map_or_else(|| rand(&[4, 5], 90), |k| rand(&batched(&[4, 5], k, 3), 90));
            let it = match ia {
                None => ix.select_axis(0, 1).unwrap(),
                Some(0) => ix.clone(),
                Some(k) => {
                    // the same indices with the batch axis moved to k
                    let parts: Vec<Tensor> =
                        (0..3).map(|b| ix.select_axis(0, b).unwrap()).collect();
                    Tensor::stack(&parts, k).unwrap()
                }
            };
            check(&format!("take axis {axis}, in_axes {xa:?} {ia:?}"), &f, &[zt, it], &[xa, ia]);
        }
    }
}

/// §6.5 "Multi-scalar stack: `Tensor.stack(flat[0], flat[4], flat[8])`".
#[test]
fn s6_5_multi_scalar_stack() {
    let f = |x: &Var| {
        let flat = x.flatten();
        stack(&[&flat.index_axis(0, 0), &flat.index_axis(0, 4), &flat.index_axis(0, 8)], 0)
    };
    let x = Tensor::from_vec((0..27).map(f64::from).collect(), &[3, 3, 3]).unwrap();
    assert_eq!(
        vals(&vmap(f).eval(&x).unwrap()),
        vec![0.0, 4.0, 8.0, 9.0, 13.0, 17.0, 18.0, 22.0, 26.0]
    );
    for axis in 0..3 {
        let x = rand(&batched(&[3, 3], axis, 4), axis as u64 + 100);
        check(&format!("batch axis {axis}"), &f, &[x], &[Some(axis)]);
    }
}

/// §6.5 "Index after reduce+stack: `Tensor.stack(x[:2].sum(),
/// x[2:].sum())[[0,1]]` ✅ (fixed)", at every batch axis, re-indexed by a
/// list, by a shared index tensor and by a batched one.
#[test]
fn s6_5_index_after_reduce_and_stack() {
    fn z(x: &Var) -> Var {
        stack(
            &[
                &x.slice_axis(0, None, Some(2), 1).sum(&[0]),
                &x.slice_axis(0, Some(2), None, 1).sum(&[0]),
            ],
            0,
        )
    }
    let by_list = |x: &Var| z(x).index(0, &[0, 1]);
    let by_list_rev = |x: &Var| z(x).index(0, &[1, 0, 1]);
    let by_tensor = |x: &Var, i: &Var| z(x).take(i, 0);
    for axis in 0..3 {
        let x = rand(&batched(&[4, 3], axis, 3), axis as u64 + 110);
        check(
            &format!("[[0, 1]], batch axis {axis}"),
            &by_list,
            std::slice::from_ref(&x),
            &[Some(axis)],
        );
        check(
            &format!("[[1, 0, 1]], batch axis {axis}"),
            &by_list_rev,
            std::slice::from_ref(&x),
            &[Some(axis)],
        );
        let shared = idx(vec![1, 0], &[2]);
        check(
            &format!("[Tensor], batch axis {axis}"),
            &by_tensor,
            &[x.clone(), shared],
            &[Some(axis), None],
        );
        let per_elem = idx(vec![1, 1, 0, 1, 0, 0], &[3, 2]);
        check(
            &format!("[batched Tensor], batch axis {axis}"),
            &by_tensor,
            &[x, per_elem],
            &[Some(axis), Some(0)],
        );
    }
}

// ------------------------------------------------ tinygrad §6.6: after vmap

/// §6.6 "All standard tensor operations work on the output of a VMAPOUT":
/// reshape(9, 2) / flatten, transpose, pad / flip, `vmap_result[2, 4]`,
/// `vmap_result[1:3]`, `sum()`, `sum(0)`, `== 0.0`, `> 1.0`, `@ weights`,
/// cat with a non-vmap value. The vmap is called inside a traced function;
/// the reference applies the same post-op to the stacked loop result.
#[test]
fn s6_6_operations_on_the_result_of_vmap() {
    type Post = fn(&Var, &Var) -> Var;
    let posts: Vec<(&str, Post)> = vec![
        ("reshape(9, 2)", |v, _| v.reshape(&[9, 2])),
        ("flatten", |v, _| v.flatten()),
        ("transpose", |v, _| v.transpose()),
        ("pad", |v, _| v.pad(&[(1, 0), (0, 2)], -1.0)),
        ("flip", |v, _| v.flip(&[0])),
        ("[2, 4]", |v, _| v.index_axis(0, 2).index_axis(0, 4)),
        ("[1:3]", |v, _| v.slice_axis(0, Some(1), Some(3), 1)),
        ("sum()", |v, _| v.sum_all()),
        ("sum(0)", |v, _| v.sum(&[0])),
        ("== 0.0", |v, _| v.equal(&v.scalar_like(0.0))),
        ("> 1.0", |v, _| v.gt(&v.scalar_like(1.0))),
        ("@ weights", |v, w| v.matmul(&w.reshape(&[6, 2]))),
        ("cat with non-vmap", |v, w| concatenate(&[v, &w.reshape(&[2, 6])], 0)),
    ];
    let f = |x: &Var| (x * 2.0).relu(); // zeros and values above 1 both occur
    let x = rand(&[3, 6], 120);
    let w = rand(&[12], 121);
    let stacked = looped(&f, std::slice::from_ref(&x), &[lvl(&[Some(0)])]).remove(0);
    assert!(vals(&stacked).contains(&0.0) && vals(&stacked).iter().any(|&v| v > 1.0));
    for (name, post) in posts {
        let whole = move |x: &Var, w: &Var| {
            let v = vmap(f).invoke(x);
            post(&v, w)
        };
        let got = go(&whole, &[x.clone(), w.clone()]);
        let want = go(&post, &[stacked.clone(), w.clone()]);
        same(name, &got, &want, 0.0);
    }
}

// ------------------------------------------------ tinygrad §6.7: nested vmap

/// Runs `f` on one element by hand: `sum(sin(x) * x)` of a vector.
fn sin_dot(v: &[f64]) -> f64 {
    v.iter().map(|a| a.sin() * a).sum()
}

/// §6.7 "`vmap(vmap(fn))` ✅", "`vmap(vmap(vmap(fn)))` ✅" — values by hand.
#[test]
fn s6_7_nested_two_and_three_levels() {
    let f = |x: &Var| (x.sin() * x).sum(&[0]);
    let x = rand(&[2, 3, 4], 130);
    let got = vmap(vmap(f)).eval(&x).unwrap();
    assert_eq!(got.shape(), &[2, 3]);
    let xv = vals(&x);
    let want: Vec<f64> = xv.chunks(4).map(sin_dot).collect();
    assert!(got.allclose(&Tensor::from_vec(want, &[2, 3]).unwrap(), 1e-14, 1e-14));
    let x = rand(&[2, 3, 2, 4], 131);
    let got = vmap(vmap(vmap(f))).eval(&x).unwrap();
    assert_eq!(got.shape(), &[2, 3, 2]);
    let want: Vec<f64> = vals(&x).chunks(4).map(sin_dot).collect();
    assert!(got.allclose(&Tensor::from_vec(want, &[2, 3, 2]).unwrap(), 1e-14, 1e-14));
}

/// §6.7 "`vmap(vmap(vmap(vmap(fn))))` ⚠️ Known issues" in tinygrad, "with the
/// pad+reduce pattern": anvil must get four levels right, here with a
/// function that pads and reduces, mapping a different axis at each level.
#[test]
fn s6_7_nested_four_levels_with_pad_and_reduce() {
    let f = |x: &Var| x.pad(&[(1, 2)], 0.5).sum(&[0]) * x.max(&[0], false);
    let v = vmap(vmap(vmap(vmap(f).in_axes(1)).in_axes(0)).in_axes(2)).in_axes(1);
    let x = rand(&[3, 2, 4, 3, 2], 132); // level sizes: 2, 4 (axis 2 of [3,4,3,2]), 3, 2
    let got = go(&v, std::slice::from_ref(&x));
    let levels = [lvl(&[Some(1)]), lvl(&[Some(2)]), lvl(&[Some(0)]), lvl(&[Some(1)])];
    same("depth 4", &got, &looped(&f, &[x], &levels), 1e-13);
}

/// §6.7 "Nested with different in_axes ✅": several arguments, each level
/// mapping different axes, some arguments shared at one level only.
#[test]
fn s6_7_nested_with_different_in_axes() {
    let f = |x: &Var, y: &Var| (x * y).sum(&[-1]) + x.index_axis(0, 0);
    // outer: x axis 2, y shared; inner: x axis 0, y axis 1.
    let v = vmap(vmap(f).in_axes([Some(0), Some(1)])).in_axes([Some(2), None]);
    let x = rand(&[4, 3, 2], 133); // element [3] after both levels
    let y = rand(&[3, 4], 134);
    let got = go(&v, &[x.clone(), y.clone()]);
    let levels = [lvl(&[Some(2), None]), lvl(&[Some(0), Some(1)])];
    same("x:(2, 0), y:(-, 1)", &got, &looped(&f, &[x, y], &levels), 1e-13);
    // Negative in_axes at both levels, and out_axes at both levels.
    let v = vmap(vmap(f).in_axes([Some(-1), None]).out_axes([0]))
        .in_axes([Some(0), Some(-1)])
        .out_axes([1]);
    let x = rand(&[2, 3, 5], 135); // outer maps axis 0 (2), inner axis -1 (5), element [3]
    let y = rand(&[3, 2], 136);
    let got = go(&v, &[x.clone(), y.clone()]);
    let levels = [lvl_out(&[Some(0), Some(1)], &[1]), lvl(&[Some(1), None])];
    same("negative axes", &got, &looped(&f, &[x, y], &levels), 1e-13);
}

/// §6.7 "Nested with reductions ✅" and "Nested with matmul ✅", the matrix
/// shared at both levels, at one level, or batched at both.
#[test]
fn s6_7_nested_with_reductions_and_matmul() {
    let red = |x: &Var| vec![x.sum(&[0]), x.max(&[1], true), x.prod(&[0, 1], false), x.mean()];
    let x = rand(&[2, 3, 4, 5], 137);
    let v = vmap(vmap(red).in_axes(1)).in_axes(2);
    let levels = [lvl(&[Some(2)]), lvl(&[Some(1)])];
    same("reductions", &go(&v, std::slice::from_ref(&x)), &looped(&red, &[x], &levels), 1e-13);

    let mm = |x: &Var, w: &Var| x.matmul(w).tanh();
    let x = rand(&[2, 3, 4], 138); // inner element [4]
    let w = rand(&[4, 5], 139);
    let ws = rand(&[2, 4, 5], 140);
    let cases: Vec<(&str, Axes, Axes, Tensor)> = vec![
        ("w shared at both", vec![Some(1), None], vec![Some(0), None], w.clone()),
        ("w batched at the outer level", vec![Some(0), Some(0)], vec![Some(0), None], ws.clone()),
        (
            "w batched at the inner level",
            vec![Some(0), None],
            vec![Some(0), Some(0)],
            rand(&[3, 4, 5], 141),
        ),
        (
            "w batched at both",
            vec![Some(0), Some(0)],
            vec![Some(0), Some(2)],
            rand(&[2, 4, 5, 3], 142),
        ),
    ];
    for (name, outer, inner, w) in cases {
        let v = vmap(vmap(mm).in_axes(inner.clone())).in_axes(outer.clone());
        let u = |a: &[Option<i64>]| -> Vec<Option<usize>> {
            a.iter().map(|k| k.map(|k| k as usize)).collect()
        };
        let levels = [lvl(&u(&outer)), lvl(&u(&inner))];
        let got = go(&v, &[x.clone(), w.clone()]);
        same(name, &got, &looped(&mm, &[x.clone(), w], &levels), 1e-13);
    }
}

// ------------------------------------------------ tinygrad §6.8: several inputs

/// §6.8 multi-input vmap: "Same axis for all inputs", "Different axes per
/// input", "Broadcasting (unmapped) inputs", "Mixed mapped/broadcast inputs".
#[test]
fn s6_8_several_inputs() {
    let f =
        |x: &Var, y: &Var, z: &Var| (x * y).sum(&[0]) + z.matmul(&y.index_axis(0, 0).unsqueeze(0));
    // element shapes: x [2, 3], y [2, 3], z [4, 1]
    let shapes = [vec![2, 3], vec![2, 3], vec![4, 1]];
    let make = |axes: &[Option<usize>]| -> Vec<Tensor> {
        (0..3)
            .map(|i| match axes[i] {
                Some(k) => rand(&batched(&shapes[i], k, 5), 150 + i as u64),
                None => rand(&shapes[i], 150 + i as u64),
            })
            .collect()
    };
    // Same axis for all (an integer in_axes applies to every input).
    for a in 0..3usize {
        let args = make(&[Some(a); 3]);
        let got = go(&vmap(f).in_axes(a as i64), &args);
        same(&format!("all at axis {a}"), &got, &looped(&f, &args, &[lvl(&[Some(a); 3])]), 1e-13);
    }
    for axes in [
        [Some(0), Some(2), Some(1)], // different axes per input
        [Some(2), Some(1), Some(0)], // different axes per input
        [Some(1), None, None],       // broadcasting inputs
        [None, None, Some(2)],       // broadcasting inputs
        [None, Some(1), Some(0)],    // mixed
        [Some(0), None, Some(1)],    // mixed
    ] {
        check(&format!("in_axes {axes:?}"), &f, &make(&axes), &axes);
    }
}

// ------------------------------------------------ tinygrad §6.9: spjacobian

/// The three pieces of `f(x) = [Σx², Σx³; x[0:2]·x[2:4]; Σsin x, x0·Σx]`,
/// each with reductions.
fn f0(x: &Var) -> Var {
    stack(&[&x.square().sum(&[0]), &(x * x * x).sum(&[0])], 0)
}
fn f1(x: &Var) -> Var {
    x.slice_axis(0, None, Some(2), 1) * x.slice_axis(0, Some(2), None, 1)
}
fn f2(x: &Var) -> Var {
    stack(&[&x.sin().sum(&[0]), &(x.index_axis(0, 0) * x.sum(&[0]))], 0)
}

/// Steps 2–4 of the pattern: stack the JVPs, flatten, re-index element by element.
fn stack_flatten_pick(jvps: [&Var; 3]) -> Var {
    let flat = stack(&jvps, 0).flatten();
    let picks: Vec<Var> = SPJAC_PICKS.iter().map(|&i| flat.index_axis(0, i)).collect();
    let refs: Vec<&Var> = picks.iter().collect();
    stack(&refs, 0)
}

/// The pattern with anvil's `jvp` transform (called inside the trace).
fn spjac(x: &Var, v: &Var) -> Var {
    let t = |j: (Var, Var)| j.1; // (primal, tangent)
    let jvp0 = t(jvp(f0).apply((x, v)).unwrap());
    let jvp1 = t(jvp(f1).apply((x, v)).unwrap());
    let jvp2 = t(jvp(f2).apply((x, v)).unwrap());
    stack_flatten_pick([&jvp0, &jvp1, &jvp2])
}

/// The pattern with the JVPs written out by hand as traced expressions
/// (vmap alone, no differentiation transform involved).
fn spjac_by_hand(x: &Var, v: &Var) -> Var {
    let jvp0 = stack(&[&(x * v * 2.0).sum(&[0]), &(x * x * v * 3.0).sum(&[0])], 0);
    let (x01, x23) = (x.slice_axis(0, None, Some(2), 1), x.slice_axis(0, Some(2), None, 1));
    let (v01, v23) = (v.slice_axis(0, None, Some(2), 1), v.slice_axis(0, Some(2), None, 1));
    let jvp1 = &v01 * &x23 + &x01 * &v23;
    let jvp2 = stack(
        &[
            &(x.cos() * v).sum(&[0]),
            &(v.index_axis(0, 0) * x.sum(&[0]) + x.index_axis(0, 0) * v.sum(&[0])),
        ],
        0,
    );
    stack_flatten_pick([&jvp0, &jvp1, &jvp2])
}

const SPJAC_PICKS: [i64; 6] = [5, 0, 3, 2, 2, 4];

/// The Jacobian of `f = [f0; f1; f2]` by hand (6 × 4).
fn spjac_jacobian(x: &[f64]) -> Vec<[f64; 4]> {
    let s: f64 = x.iter().sum();
    vec![
        [2.0 * x[0], 2.0 * x[1], 2.0 * x[2], 2.0 * x[3]],
        [3.0 * x[0] * x[0], 3.0 * x[1] * x[1], 3.0 * x[2] * x[2], 3.0 * x[3] * x[3]],
        [x[2], 0.0, x[0], 0.0],
        [0.0, x[3], 0.0, x[1]],
        [x[0].cos(), x[1].cos(), x[2].cos(), x[3].cos()],
        [s + x[0], x[0], x[0], x[0]],
    ]
}

/// `(J(x) · seed)[picks]` by hand.
fn spjac_want(x: &[f64], seed: &[f64]) -> Vec<f64> {
    let j = spjac_jacobian(x);
    SPJAC_PICKS.iter().map(|&r| j[r as usize].iter().zip(seed).map(|(a, b)| a * b).sum()).collect()
}

/// §6.9 "The spjacobian pattern: 1. Compute multiple JVPs (each may contain
/// reduces) 2. Stack them: `Tensor.stack(jvp0, jvp1, jvp2)` 3. Flatten:
/// `.flatten()` 4. Re-index specific elements: `Tensor.stack(*[flat[i] for i
/// in indices])`", vmapped over the seed vectors (the point shared), over
/// points and seeds together, and nested (points outside, seeds inside).
/// The JVPs come from anvil's `jvp` called inside the trace, and, in a
/// second variant, are written out by hand as traced expressions (so a
/// failure of the first alone points at `jvp`, not `vmap`); the values are
/// checked against the Jacobian worked out by hand.
#[test]
fn s6_9_spjacobian_stack_flatten_reindex() {
    type F2 = fn(&Var, &Var) -> Var;
    let variants: [(&str, F2); 2] = [("anvil jvp", spjac), ("jvp by hand", spjac_by_hand)];
    // Compressed seeds of a column colouring, as a sparse Jacobian uses them.
    let seeds =
        Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0], &[3, 4])
            .unwrap();
    let x = rand(&[4], 160);
    let xs = rand(&[3, 4], 161);
    let seeds_t = rand(&[4, 3], 162);
    let pts = rand(&[2, 4], 163);
    for (name, f) in variants {
        // Seeds batched, the point shared.
        let got = vmap(f).in_axes([None, Some(0)]).eval((&x, &seeds)).unwrap();
        let want: Vec<f64> =
            (0..3).flat_map(|b| spjac_want(&vals(&x), &vals(&seeds)[b * 4..b * 4 + 4])).collect();
        assert!(
            got.allclose(&Tensor::from_vec(want, &[3, 6]).unwrap(), 1e-14, 1e-14),
            "{name}: {got}"
        );

        // One point per seed (both batched, the seeds along axis 1).
        let got = vmap(f).in_axes([Some(0), Some(1)]).eval((&xs, &seeds_t)).unwrap();
        let want: Vec<f64> = (0..3)
            .flat_map(|b| {
                let seed: Vec<f64> = (0..4).map(|i| vals(&seeds_t)[i * 3 + b]).collect();
                spjac_want(&vals(&xs)[b * 4..b * 4 + 4], &seed)
            })
            .collect();
        assert!(
            got.allclose(&Tensor::from_vec(want, &[3, 6]).unwrap(), 1e-14, 1e-14),
            "{name}: {got}"
        );

        // Nested: every point (outer) against every seed (inner), out_axes 1 inside.
        let v = vmap(vmap(f).in_axes([None, Some(0)]).out_axes([1])).in_axes([Some(0), None]);
        let got = v.eval((&pts, &seeds)).unwrap();
        let mut want = vec![0.0; 2 * 6 * 3];
        for p in 0..2 {
            for s in 0..3 {
                let col =
                    spjac_want(&vals(&pts)[p * 4..p * 4 + 4], &vals(&seeds)[s * 4..s * 4 + 4]);
                for (r, c) in col.iter().enumerate() {
                    want[p * 18 + r * 3 + s] = *c;
                }
            }
        }
        assert!(
            got.allclose(&Tensor::from_vec(want, &[2, 6, 3]).unwrap(), 1e-14, 1e-14),
            "{name}: {got}"
        );
    }
}

// ------------------------------------------------ vmap-design.md

/// vmap-design, Interface: "in_axes: Which axis of each input to map over.
/// None means broadcast (don't map). An int applies to all inputs." —
/// including negative axes.
#[test]
fn vd_in_axes_int_applies_to_all_and_none_broadcasts() {
    let f = |x: &Var, y: &Var| x.matmul(y) + y.sum(&[0]);
    // Elements x [2, 4], y [4, 4]; the batch of 3 at axis 1 of both.
    let (x, y) = (rand(&[2, 3, 4], 170), rand(&[4, 3, 4], 171));
    let want = looped(&f, &[x.clone(), y.clone()], &[lvl(&[Some(1), Some(1)])]);
    same("int 1", &go(&vmap(f).in_axes(1), &[x.clone(), y.clone()]), &want, 1e-13);
    same("int -2", &go(&vmap(f).in_axes(-2), &[x, y]), &want, 1e-13);
    // The batch at the back of x (axis -1), w shared.
    let (x, w) = (rand(&[2, 4, 3], 172), rand(&[4, 4], 173));
    let got = go(&vmap(f).in_axes([Some(-1), None]), &[x.clone(), w.clone()]);
    same("(-1, None)", &got, &looped(&f, &[x, w.clone()], &[lvl(&[Some(2), None])]), 1e-13);
    ok(check_vmap(&f, &[rand(&[3, 2, 4], 174), w], &[Some(0), None], 1e-13, 1e-13));
}

/// vmap-design, Interface: "out_axis: Where to place the batch dimension in
/// the output" and Output axis handling: "if out_axis != 0, move the batch
/// axis from 0 to out_axis". Also one entry per output, and negative axes.
#[test]
fn vd_out_axis_places_the_batch_dimension() {
    let f = |x: &Var| x.exp().reshape(&[2, 3]);
    let x = rand(&[4, 6], 173);
    for (out, pos) in [(0i64, 0usize), (1, 1), (2, 2), (-1, 2), (-3, 0)] {
        let got = go(&vmap(f).out_axes([out]), std::slice::from_ref(&x));
        let want = looped(&f, std::slice::from_ref(&x), &[lvl_out(&[Some(0)], &[pos])]);
        same(&format!("out_axes {out}"), &got, &want, 1e-14);
    }
    // Several outputs: one entry each (negative counts from the end of
    // each output's batched rank), or one entry for all.
    let g = |x: &Var| vec![x.reshape(&[2, 3]), x.exp().reshape(&[3, 2]), x.index_axis(0, 1)];
    let xt = rand(&[6, 4], 174); // batch along axis 1, elements [6]
    let got = go(&vmap(g).in_axes(1).out_axes([1, -1, 0]), std::slice::from_ref(&xt));
    let want = looped(&g, std::slice::from_ref(&xt), &[lvl_out(&[Some(1)], &[1, 2, 0])]);
    same("one entry per output", &got, &want, 1e-14);
    let h = |x: &Var| vec![x.reshape(&[2, 3]), x.exp().reshape(&[3, 2])];
    let got = go(&vmap(h).in_axes(1).out_axes([-2]), std::slice::from_ref(&xt));
    let want = looped(&h, std::slice::from_ref(&xt), &[lvl_out(&[Some(1)], &[1])]);
    same("one entry for all", &got, &want, 1e-14);
}

/// vmap-design, Interface: "Assert all batched dimensions have the same size
/// (checked at runtime)". The error names the arguments and their sizes;
/// `axis_size` must agree with the mapped arguments too.
#[test]
fn vd_batch_sizes_must_agree() {
    let f = |a: &Var, b: &Var| a * b;
    let e = vmap(f)
        .in_axes([Some(0), Some(1)])
        .eval((&Tensor::zeros(&[3, 2]).unwrap(), &Tensor::zeros(&[2, 4]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("inconsistent batch sizes") && e.contains('3') && e.contains('4'), "{e}");
    let e = vmap(f)
        .axis_size(5)
        .eval((&Tensor::zeros(&[3, 2]).unwrap(), &Tensor::zeros(&[3, 2]).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis_size") && e.contains('5') && e.contains('3'), "{e}");
    // Agreeing sizes at different axes are fine.
    let got = vmap(f)
        .in_axes([Some(0), Some(1)])
        .eval((&Tensor::ones(&[2, 3]).unwrap(), &Tensor::full(&[3, 2], 2.0).unwrap()))
        .unwrap();
    assert_eq!(vals(&got), vec![2.0; 6]);
}

/// vmap-design, Inputs: "Non-batched inputs: (original_uop, False)" — with
/// every input unmapped the batch size comes from `axis_size` (JAX's
/// `axis_size`; the Python design has no equivalent) and the output is the
/// unbatched result, broadcast.
#[test]
fn vd_all_inputs_unmapped_with_axis_size() {
    let f = |x: &Var, y: &Var| x.matmul(y).sin();
    let (x, y) = (rand(&[2, 3], 175), rand(&[3], 176));
    let got = go(&vmap(f).in_axes(None).axis_size(4), &[x.clone(), y.clone()]);
    let levels = [Level { in_axes: vec![None, None], out_axes: vec![0], size: Some(4) }];
    same("axis_size 4", &got, &looped(&f, &[x.clone(), y.clone()], &levels), 0.0);
    let got = go(&vmap(f).in_axes(None).axis_size(4).out_axes([1]), &[x.clone(), y.clone()]);
    let levels = [Level { in_axes: vec![None, None], out_axes: vec![1], size: Some(4) }];
    same("axis_size 4, out_axes 1", &got, &looped(&f, &[x, y], &levels), 0.0);
}

/// vmap-design, "Unary elementwise (SIN, EXP2, LOG2, SQRT, NEG, RECIPROCAL,
/// CAST): Same batch status as source." anvil has no `exp2`/`log2` ops: `2^x`
/// and `log(x)/ln 2` stand in. BITCAST (in the supported-ops table) has no
/// anvil equivalent and is not tested. Batched at every axis, and applied
/// to a shared input next to a batched one (the unary op stays unbatched).
#[test]
fn vd_unary_elementwise_rules() {
    let fs: Vec<(&str, F1)> = vec![
        ("NEG", |x| -x),
        ("SIN", |x| x.sin()),
        ("LOG2", |x| x.log() / std::f64::consts::LN_2),
        ("EXP2", |x| x.full_like(2.0).pow(x)),
        ("SQRT", |x| x.sqrt()),
        ("RECIPROCAL", |x| x.recip()),
        ("CAST", |x| x.cast(DType::F32).cast(DType::F64)),
    ];
    for (name, f) in fs {
        for axis in 0..3 {
            let x = rand_pos(&batched(&[2, 3], axis, 4), axis as u64 + 180);
            check(&format!("{name}, batch axis {axis}"), &f, &[x], &[Some(axis)]);
        }
        let g = move |x: &Var, c: &Var| f(c) * x;
        check(
            &format!("{name} of a shared input"),
            &g,
            &[rand(&[4, 3], 183), rand_pos(&[3], 184)],
            &[Some(0), None],
        );
    }
}

/// vmap-design, "Binary/ternary elementwise (ADD, SUB, MUL, MAX, POW, WHERE,
/// CMP*): If mixing batched and unbatched: broadcast the unbatched one ...
/// Result is batched if any input is batched." Every mix of batched and
/// shared operands, with NumPy broadcasting inside the element as well.
/// (WHERE: see `s6_1_ternary_where`.)
#[test]
fn vd_binary_elementwise_rules_mixing_batched_and_unbatched() {
    type F2 = fn(&Var, &Var) -> Var;
    let fs: Vec<(&str, F2)> = vec![
        ("ADD", |a, b| a + b),
        ("SUB", |a, b| a - b),
        ("MUL", |a, b| a * b),
        ("MAX", |a, b| a.maximum(b)),
        ("POW", |a, b| (a.abs() + 0.5).pow(b)),
        ("CMPLT", |a, b| a.lt(b)),
        ("CMPNE", |a, b| a.not_equal(b)),
        ("CMPEQ", |a, b| a.equal(b)),
    ];
    let (sa, sb) = (vec![2, 3], vec![3]);
    for (name, f) in fs {
        for (ia, ib) in [
            (Some(0), None),
            (None, Some(0)),
            (Some(0), Some(0)),
            (Some(2), Some(1)),
            (Some(1), Some(0)),
        ] {
            let a = ia.map_or_else(|| rand_int(&sa, 1), |k| rand_int(&batched(&sa, k, 4), 1));
            let b = ib.map_or_else(|| rand_int(&sb, 2), |k| rand_int(&batched(&sb, k, 4), 2));
            check(
                &format!("{name}, in_axes {ia:?} {ib:?}"),
                &f,
                &[a.clone(), b.clone()],
                &[ia, ib],
            );
            // and with the operands swapped (the broadcast one first)
            let g = move |b: &Var, a: &Var| f(b, a);
            check(&format!("{name} swapped, in_axes {ib:?} {ia:?}"), &g, &[b, a], &[ib, ia]);
        }
    }
    // By hand: equality actually happens in the data.
    let a = Tensor::from_vec(vec![1.0, 2.0, 2.0, 1.0], &[2, 2]).unwrap();
    let b = Tensor::vector(&[1.0, 2.0]);
    let got = vmap(|a: &Var, b: &Var| a.equal(b)).in_axes([Some(0), None]).eval((&a, &b)).unwrap();
    assert_eq!(got.to_vec::<bool>().unwrap(), vec![true, true, false, false]);
}

/// vmap-design, "Movement ops (RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP)
/// — Unbatched: apply as-is. Batched: adjust for batch dim": each op on a
/// batched value and on a shared value in the same function.
#[test]
fn vd_movement_rules_batched_and_unbatched() {
    let ops: Vec<(&str, F1)> = vec![
        ("RESHAPE", |x| x.reshape(&[3, 2, 2])),
        ("PERMUTE", |x| x.permute(&[1, 2, 0]).reshape(&[3, 2, 2])),
        ("EXPAND", |x| x.sum_keepdims(&[0]).expand(&[3, 4]).reshape(&[3, 2, 2])),
        ("PAD", |x| {
            x.pad(&[(1, 0), (0, 1)], 2.0)
                .slice(&[SliceSpec::range(0, 3), SliceSpec::range(1, 5)])
                .reshape(&[3, 2, 2])
        }),
        ("SHRINK", |x| {
            x.slice(&[SliceSpec::range(0, 3), SliceSpec::range(0, 4)]).reshape(&[3, 2, 2])
        }),
        ("FLIP", |x| x.flip(&[0, 1]).reshape(&[3, 2, 2])),
    ];
    // element [3, 4] for all ops (PERMUTE views it as [3, 2, 2] first)
    for (name, op) in ops {
        let f = move |x: &Var, c: &Var| {
            let (x, c) = if name == "PERMUTE" {
                (x.reshape(&[3, 2, 2]), c.reshape(&[3, 2, 2]))
            } else {
                (x.clone(), c.clone())
            };
            op(&x) * op(&c).exp()
        };
        for axes in
            [[Some(0), None], [Some(1), None], [Some(2), None], [None, Some(1)], [Some(2), Some(0)]]
        {
            let x =
                axes[0].map_or_else(|| rand(&[3, 4], 190), |k| rand(&batched(&[3, 4], k, 2), 190));
            let c =
                axes[1].map_or_else(|| rand(&[3, 4], 191), |k| rand(&batched(&[3, 4], k, 2), 191));
            check(&format!("{name}, in_axes {axes:?}"), &f, &[x, c], &axes);
        }
    }
}

/// vmap-design, "REDUCE_AXIS (ADD, MAX, MUL) — Unbatched: apply as-is.
/// Batched: shift reduction axes by +1 (skip batch dim)": sum, max and prod
/// over every subset of axes, with and without keepdims, at every batch axis.
#[test]
fn vd_reduce_axis_add_max_mul() {
    let subsets: [&[i64]; 6] = [&[0], &[1], &[2], &[0, 2], &[-1, -2], &[0, 1, 2]];
    for axes in subsets {
        for keep in [false, true] {
            let f = move |x: &Var| {
                let s = if keep { x.sum_keepdims(axes) } else { x.sum(axes) };
                vec![s, x.max(axes, keep), x.prod(axes, keep)]
            };
            for b in 0..4 {
                let x = rand(&batched(&[2, 3, 2], b, 3), b as u64 + 200);
                check(
                    &format!("axes {axes:?}, keepdims {keep}, batch axis {b}"),
                    &f,
                    &[x],
                    &[Some(b)],
                );
            }
        }
    }
    // By hand, batch in the middle: x[i][b][j] = i + 10 b + 100 j, reduce element axis 0.
    let v: Vec<f64> = (0..2)
        .flat_map(|i| {
            (0..2).flat_map(move |b| (0..2).map(move |j| f64::from(i + 10 * b + 100 * j)))
        })
        .collect();
    let x = Tensor::from_vec(v, &[2, 2, 2]).unwrap();
    let got = vmap(|x: &Var| vec![x.sum(&[0]), x.max(&[0], false), x.prod(&[0], false)])
        .in_axes(1)
        .eval(&x)
        .unwrap();
    assert_eq!(vals(&got[0]), vec![1.0, 201.0, 21.0, 221.0]);
    assert_eq!(vals(&got[1]), vec![1.0, 101.0, 11.0, 111.0]);
    assert_eq!(vals(&got[2]), vec![0.0, 100.0 * 101.0, 10.0 * 11.0, 110.0 * 111.0]);
}

/// vmap-design, Output axis handling: "if the output is unbatched
/// (has_batch=False), broadcast it to add the batch dimension ... This
/// matches JAX semantics where vmap always produces a batched output, even
/// if the result is constant w.r.t. all batched inputs." Outputs that
/// depend only on a shared input, or on nothing, next to a batched one,
/// with `out_axes` (values by hand).
#[test]
fn vd_unbatched_outputs_are_broadcast() {
    let f = |x: &Var, c: &Var| vec![x + c, c.exp(), full(&[2], 7.0), c.clone()];
    let x = rand(&[3, 2], 210);
    let c = rand(&[2], 211);
    let outs =
        go(&vmap(f).in_axes([Some(0), None]).out_axes([0, 1, 0, 0]), &[x.clone(), c.clone()]);
    let cv = vals(&c);
    assert_eq!(outs[1].shape(), &[2, 3]);
    let exp_c: Vec<f64> = (0..6).map(|k| cv[k / 3].exp()).collect();
    assert_eq!(vals(&outs[1]), exp_c);
    assert_eq!(outs[2].shape(), &[3, 2]);
    assert_eq!(vals(&outs[2]), vec![7.0; 6]);
    assert_eq!(vals(&outs[3]), [cv.clone(), cv.clone(), cv].concat());
    let want = looped(&f, &[x, c], &[lvl_out(&[Some(0), None], &[0, 1, 0, 0])]);
    same("against the loop", &outs, &want, 0.0);
    // Nested: an output independent of the inner batch only.
    let g = |x: &Var, y: &Var| vec![x.sin(), x.sum(&[0]) * y];
    let v = vmap(vmap(g).in_axes([None, Some(0)])).in_axes([Some(0), None]);
    let (x, y) = (rand(&[2, 3], 212), rand(&[4], 213));
    let levels = [lvl(&[Some(0), None]), lvl(&[None, Some(0)])];
    same("nested", &go(&v, &[x.clone(), y.clone()]), &looped(&g, &[x, y], &levels), 1e-14);
}

/// vmap-design, Progress: "Integration with JVP (vmap over jvp for
/// Jacobians)": `vmap(jvp(g))` over the identity basis of tangents (the
/// point shared) gives the Jacobian of `g(x) = sin(x) · Σx²` (with
/// `out_axes` 1 on the tangent output: column j from seed e_j, and the
/// unbatched primal output broadcast), and vmapping that over points gives
/// one Jacobian per point. The same with the JVP written by hand,
/// `cos(x)·v·Σx² + sin(x)·Σ2xv`, as a traced function. Compared with the
/// Jacobian by hand.
#[test]
fn vd_vmap_over_a_jvp_builds_jacobians() {
    let g = |x: &Var| x.sin() * x.square().sum(&[0]);
    let by_hand = |x: &Var, v: &Var| {
        vec![g(x), x.cos() * v * x.square().sum(&[0]) + x.sin() * (x * v * 2.0).sum(&[0])]
    };
    let jac = |x: &[f64]| -> Vec<f64> {
        let s: f64 = x.iter().map(|a| a * a).sum();
        let n = x.len();
        (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                let diag = if i == j { x[i].cos() * s } else { 0.0 };
                diag + x[i].sin() * 2.0 * x[j]
            })
            .collect()
    };
    let g_of = |x: &[f64]| -> Vec<f64> {
        let s: f64 = x.iter().map(|a| a * a).sum();
        x.iter().map(|a| a.sin() * s).collect()
    };
    let eye = Tensor::eye(3).unwrap();
    let x = rand(&[3], 220);
    let pts = rand(&[4, 3], 221);
    let want_jacs: Vec<f64> = vals(&pts).chunks(3).flat_map(jac).collect();
    let check_both = |name: &str, one: Vec<Tensor>, many: Tensor| {
        let j = Tensor::from_vec(jac(&vals(&x)), &[3, 3]).unwrap();
        assert!(one[1].allclose(&j, 1e-14, 1e-14), "{name}: jacobian\n{}\n{j}", one[1]);
        // The primal does not depend on the seed: broadcast along the batch.
        let p: Vec<f64> = (0..3).flat_map(|_| g_of(&vals(&x))).collect();
        assert!(
            one[0].allclose(&Tensor::from_vec(p, &[3, 3]).unwrap(), 1e-14, 1e-14),
            "{name}: primal"
        );
        let want = Tensor::from_vec(want_jacs.clone(), &[4, 3, 3]).unwrap();
        assert!(many.allclose(&want, 1e-14, 1e-14), "{name}: jacobians\n{many}\n{want}");
    };
    let one =
        go(&vmap(jvp(g)).in_axes([None, Some(0)]).out_axes([0, 1]), &[x.clone(), eye.clone()]);
    let inner = vmap(jvp(g)).in_axes([None, Some(0)]).out_axes([0, 1]);
    let many = go(&vmap(inner).in_axes([Some(0), None]), &[pts.clone(), eye.clone()]).remove(1);
    check_both("anvil jvp", one, many);
    let one =
        go(&vmap(by_hand).in_axes([None, Some(0)]).out_axes([0, 1]), &[x.clone(), eye.clone()]);
    let inner = vmap(by_hand).in_axes([None, Some(0)]).out_axes([0, 1]);
    let many = go(&vmap(inner).in_axes([Some(0), None]), &[pts, eye]).remove(1);
    check_both("jvp by hand", one, many);
}

/// vmap-design, "Not yet supported (add as needed): Indexing ops
/// (tensor-based indexing, gather/scatter)" — anvil supports them: `take`
/// and `scatter_add` with the operand, the indices or both batched, nested
/// with batched indices at both levels, and scatter with repeated indices
/// (by hand).
#[test]
fn vd_gather_and_scatter() {
    // scatter_add by hand: element b adds u[b] into zeros(4) at its own indices.
    let u = Tensor::from_vec(vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0], &[2, 3]).unwrap();
    let i = idx(vec![0, 3, 0, 2, 2, -1], &[2, 3]);
    let sc = |u: &Var, i: &Var| u.scatter_add(i, 0, 4);
    let got = vmap(sc).eval((&u, &i)).unwrap();
    assert_eq!(vals(&got), vec![4.0, 0.0, 0.0, 2.0, 0.0, 0.0, 30.0, 30.0]);
    let got = vmap(sc).in_axes([Some(0), None]).eval((&u, &i.select_axis(0, 0).unwrap())).unwrap();
    assert_eq!(vals(&got), vec![4.0, 0.0, 0.0, 2.0, 40.0, 0.0, 0.0, 20.0]);
    let got = vmap(sc).in_axes([None, Some(0)]).eval((&u.select_axis(0, 1).unwrap(), &i)).unwrap();
    assert_eq!(vals(&got), vec![40.0, 0.0, 0.0, 20.0, 0.0, 0.0, 30.0, 30.0]);

    // scatter_add into an inner axis, every batching, several batch positions.
    let sc1 = |u: &Var, i: &Var| u.scatter_add(i, 1, 4);
    let ui = idx(vec![0, 3, 3, -1, 2, 1, 1, 1, 0, 0, 2, 2, 3, 0, 1], &[3, 5]);
    for (ua, ia) in
        [(Some(0), None), (None, Some(0)), (Some(0), Some(0)), (Some(3), Some(1)), (Some(1), None)]
    {
        let ut =
            ua.map_or_else(|| rand(&[2, 5, 6], 230), |k| rand(&batched(&[2, 5, 6], k, 3), 230));
        let it = match ia {
            None => ui.select_axis(0, 2).unwrap(),
            Some(0) => ui.clone(),
            Some(_) => {
                Tensor::stack(&(0..3).map(|b| ui.select_axis(0, b).unwrap()).collect::<Vec<_>>(), 1)
                    .unwrap()
            }
        };
        check(&format!("scatter_add, in_axes {ua:?} {ia:?}"), &sc1, &[ut, it], &[ua, ia]);
    }

    // Gather then scatter back (a permutation's inverse), nested, with
    // batched indices at both levels and a shared operand at the inner one.
    let round_trip = |x: &Var, i: &Var| x.take(i, 0).scatter_add(i, 0, 4) + x.take(i, -1).sum(&[0]);
    let x = rand(&[2, 4, 4], 231);
    let perm = idx(
        vec![2, 0, 3, 1, 1, 2, 0, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 0, 1, 2, 2, 3, 1, 0],
        &[2, 3, 4],
    );
    let v = vmap(vmap(round_trip).in_axes([None, Some(0)])).in_axes([Some(0), Some(0)]);
    let levels = [lvl(&[Some(0), Some(0)]), lvl(&[None, Some(0)])];
    same(
        "nested gather/scatter",
        &go(&v, &[x.clone(), perm.clone()]),
        &looped(&round_trip, &[x, perm], &levels),
        1e-13,
    );
}
