//! The functions of `anvil::numpy` against the values JAX computes for
//! `jax.numpy` on the same inputs: each case's value and the gradient of a
//! weighted sum of its outputs (`Σ_k out[k] cos(k)`, which catches
//! transposes a plain sum cannot) with respect to every float input. The
//! values are recorded by `tests/jax/numpy_expected.py` (its docstring
//! says how to rerun it); the block between the markers below is its
//! output, verbatim. Errors for malformed arguments are checked at the end.

// The recorded block holds JAX's values (some near π or √2), and the case
// table passes each case's inputs as a fresh slice.
#![allow(clippy::approx_constant, clippy::cloned_ref_to_slice_refs)]

use anvil::numpy::{self as jnp, ConvolveMode, Indexing, QuantileMethod, Side};
use anvil::prelude::*;

/// `sin(a (k + 1)) * 2` in row-major order (the script's `t`).
fn t(shape: &[usize], a: f64) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|k| (a * (k as f64 + 1.0)).sin() * 2.0).collect(), shape).unwrap()
}

fn v(values: &[f64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()]).unwrap()
}

fn iv(values: &[i64]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()]).unwrap()
}

/// The outputs raveled, as `f64`, and concatenated.
fn joined(outs: &[Var]) -> Var {
    let flat: Vec<Var> = outs.iter().map(|o| o.cast(DType::F64).flatten()).collect();
    concatenate(&flat.iter().collect::<Vec<_>>(), 0)
}

/// `Σ_k out[k] cos(k)` over the joined outputs.
fn wsum(outs: &[Var]) -> Var {
    let all = joined(outs);
    let n = all.shape()[0];
    (&all * &iota(&[n], 0).cos()).sum_all()
}

type Case = fn(&[Var], &[Var]) -> Vec<Var>;
type Unary = fn(&Var) -> Var;

/// Whether `a` and `b` agree to `tol` relative to `1 + |b|` (NaN with NaN
/// and infinities exactly).
fn agrees(a: f64, b: f64, tol: f64) -> bool {
    if b.is_nan() || a.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if b.is_infinite() || a.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= tol * (1.0 + b.abs())
}

fn close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} values, JAX has {}\n{got:?}",
        got.len(),
        want.len()
    );
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            agrees(a, b, 1e-12),
            "{what}[{i}]: anvil {a}, JAX {b}\nanvil {got:?}\nJAX   {want:?}"
        );
    }
}

/// Runs case `f` on `floats` and `ints` and compares its value, and with
/// `want_grad` the gradient of its weighted sum in `floats`, with JAX's.
fn case(
    name: &str,
    floats: &[Tensor],
    ints: &[Tensor],
    f: Case,
    want: &[f64],
    want_grad: Option<&[f64]>,
) {
    let (fl, it) = (floats.to_vec(), ints.to_vec());
    let value = (move |a: &Vec<Var>, b: &Vec<Var>| joined(&f(a, b))).eval((&fl, &it));
    let value = value.unwrap_or_else(|e| panic!("{name}: {e}"));
    close(name, &value.to_f64_vec(), want);
    if let Some(want_grad) = want_grad {
        let g = grad(move |a: &Vec<Var>, b: &Vec<Var>| wsum(&f(a, b))).eval((&fl, &it));
        let g = g.unwrap_or_else(|e| panic!("{name} (gradient): {e}"));
        let g: Vec<f64> = g.iter().flat_map(|t| t.to_f64_vec()).collect();
        close(&format!("{name} (gradient)"), &g, want_grad);
    }
}

// ------------------------------------------------------------ manipulation

#[test]
fn rolls_tiles_repeats_and_splits() {
    let (x34, x23, x7) = (t(&[3, 4], 0.7), t(&[2, 3], 1.3), t(&[7], 0.9));
    case(
        "roll_axis",
        &[x34.clone()],
        &[],
        |x, _| vec![jnp::roll(&x[0], 2, Some(1))],
        &ROLL_AXIS,
        Some(&ROLL_AXIS_GRAD),
    );
    case(
        "roll_flat",
        &[x34.clone()],
        &[],
        |x, _| vec![jnp::roll(&x[0], -5, None)],
        &ROLL_FLAT,
        Some(&ROLL_FLAT_GRAD),
    );
    case(
        "roll_axes",
        &[x34],
        &[],
        |x, _| vec![jnp::roll_axes(&x[0], &[1, -1, 3], &[0, 1, 1])],
        &ROLL_AXES,
        Some(&ROLL_AXES_GRAD),
    );
    case(
        "tile",
        &[x23.clone()],
        &[],
        |x, _| vec![jnp::tile(&x[0], &[2, 1, 2])],
        &TILE,
        Some(&TILE_GRAD),
    );
    case(
        "repeat_axis",
        &[x23.clone()],
        &[],
        |x, _| vec![jnp::repeat(&x[0], 2, Some(1))],
        &REPEAT_AXIS,
        Some(&REPEAT_AXIS_GRAD),
    );
    case(
        "repeat_flat",
        &[x23.clone()],
        &[],
        |x, _| vec![jnp::repeat(&x[0], 3, None)],
        &REPEAT_FLAT,
        Some(&REPEAT_FLAT_GRAD),
    );
    case(
        "repeat_each",
        &[x23],
        &[],
        |x, _| vec![jnp::repeat_each(&x[0], &[1, 0, 2], Some(1))],
        &REPEAT_EACH,
        Some(&REPEAT_EACH_GRAD),
    );
    case(
        "split",
        &[t(&[2, 6], 0.3)],
        &[],
        |x, _| jnp::split(&x[0], 3, 1),
        &SPLIT,
        Some(&SPLIT_GRAD),
    );
    case(
        "array_split",
        &[x7.clone()],
        &[],
        |x, _| jnp::array_split(&x[0], 3, 0),
        &ARRAY_SPLIT,
        Some(&ARRAY_SPLIT_GRAD),
    );
    case(
        "split_at",
        &[x7.clone()],
        &[],
        |x, _| jnp::split_at(&x[0], &[2, 5, 6], 0),
        &SPLIT_AT,
        Some(&SPLIT_AT_GRAD),
    );
    // NumPy's negative index (JAX rejects it): -1 is 6 here.
    case(
        "split_at",
        &[x7],
        &[],
        |x, _| jnp::split_at(&x[0], &[2, 5, -1], 0),
        &SPLIT_AT,
        Some(&SPLIT_AT_GRAD),
    );
    case(
        "diff",
        &[t(&[3, 5], 0.8)],
        &[],
        |x, _| vec![jnp::diff(&x[0], 2, 1)],
        &DIFF,
        Some(&DIFF_GRAD),
    );
}

#[test]
fn grids_axes_rotations_and_diagonals() {
    let (a, b, c) = (t(&[3], 0.5), t(&[2], 0.6), t(&[2], 0.2));
    case(
        "meshgrid_xy",
        &[a.clone(), b.clone()],
        &[],
        |x, _| jnp::meshgrid(&[&x[0], &x[1]], Indexing::Xy),
        &MESHGRID_XY,
        Some(&MESHGRID_XY_GRAD),
    );
    case(
        "meshgrid_ij",
        &[a, b, c],
        &[],
        |x, _| jnp::meshgrid(&[&x[0], &x[1], &x[2]], Indexing::Ij),
        &MESHGRID_IJ,
        Some(&MESHGRID_IJ_GRAD),
    );
    let x234 = t(&[2, 3, 4], 0.45);
    case(
        "moveaxis",
        &[x234.clone()],
        &[],
        |x, _| vec![jnp::moveaxis(&x[0], 0, -1)],
        &MOVEAXIS,
        Some(&MOVEAXIS_GRAD),
    );
    case(
        "rot90_1",
        &[x234.clone()],
        &[],
        |x, _| vec![jnp::rot90(&x[0], 1, (0, 2))],
        &ROT90_1,
        Some(&ROT90_1_GRAD),
    );
    case(
        "rot90_3",
        &[x234.clone()],
        &[],
        |x, _| vec![jnp::rot90(&x[0], 3, (0, 1))],
        &ROT90_3,
        Some(&ROT90_3_GRAD),
    );
    case(
        "rot90_neg",
        &[x234],
        &[],
        |x, _| vec![jnp::rot90(&x[0], -1, (2, 1))],
        &ROT90_NEG,
        Some(&ROT90_NEG_GRAD),
    );
    let v3 = t(&[3], 0.4);
    case(
        "diag_embed",
        &[v3.clone()],
        &[],
        |x, _| vec![jnp::diag(&x[0], 1)],
        &DIAG_EMBED,
        Some(&DIAG_EMBED_GRAD),
    );
    case(
        "diag_embed_neg",
        &[v3.clone()],
        &[],
        |x, _| vec![jnp::diag(&x[0], -2)],
        &DIAG_EMBED_NEG,
        Some(&DIAG_EMBED_NEG_GRAD),
    );
    case(
        "diag_read",
        &[t(&[3, 4], 0.7)],
        &[],
        |x, _| vec![jnp::diag(&x[0], 1)],
        &DIAG_READ,
        Some(&DIAG_READ_GRAD),
    );
    let stacks: Case = |x, _| {
        vec![
            jnp::hstack(&[&x[0], &x[1]]),
            jnp::vstack(&[&x[0], &x[1]]),
            jnp::column_stack(&[&x[0], &x[1]]),
        ]
    };
    case("stacks", &[v3, t(&[3], 0.9)], &[], stacks, &STACKS, Some(&STACKS_GRAD));
}

// ---------------------------------------------------------------- products

#[test]
fn einsum_as_in_jax() {
    let (a, b, s) = (t(&[2, 3], 0.3), t(&[3, 4], 0.5), t(&[3, 3], 0.7));
    let one = |spec: &'static str| -> Case {
        match spec {
            "ii->i" => |x, _| vec![jnp::einsum("ii->i", &[&x[0]])],
            "ii" => |x, _| vec![jnp::einsum("ii", &[&x[0]])],
            "ij->" => |x, _| vec![jnp::einsum("ij->", &[&x[0]])],
            "ij->ji" => |x, _| vec![jnp::einsum("ij->ji", &[&x[0]])],
            "iij->ji" => |x, _| vec![jnp::einsum("iij->ji", &[&x[0]])],
            _ => |x, _| vec![jnp::einsum("...i->i", &[&x[0]])],
        }
    };
    case(
        "einsum_matmul",
        &[a.clone(), b.clone()],
        &[],
        |x, _| vec![jnp::einsum("ij,jk->ik", &[&x[0], &x[1]])],
        &EINSUM_MATMUL,
        Some(&EINSUM_MATMUL_GRAD),
    );
    case(
        "einsum_implicit",
        &[a.clone(), b],
        &[],
        |x, _| vec![jnp::einsum("ij,jk", &[&x[0], &x[1]])],
        &EINSUM_IMPLICIT,
        Some(&EINSUM_IMPLICIT_GRAD),
    );
    case("einsum_diag", &[s.clone()], &[], one("ii->i"), &EINSUM_DIAG, Some(&EINSUM_DIAG_GRAD));
    case("einsum_trace", &[s], &[], one("ii"), &EINSUM_TRACE, Some(&EINSUM_TRACE_GRAD));
    case("einsum_sum", &[a.clone()], &[], one("ij->"), &EINSUM_SUM, Some(&EINSUM_SUM_GRAD));
    case(
        "einsum_transpose",
        &[a.clone()],
        &[],
        one("ij->ji"),
        &EINSUM_TRANSPOSE,
        Some(&EINSUM_TRANSPOSE_GRAD),
    );
    case(
        "einsum_batched",
        &[t(&[2, 2, 3], 0.3), t(&[2, 3, 2], 0.6)],
        &[],
        |x, _| vec![jnp::einsum("bij,bjk->bik", &[&x[0], &x[1]])],
        &EINSUM_BATCHED,
        Some(&EINSUM_BATCHED_GRAD),
    );
    case(
        "einsum_outer",
        &[t(&[3], 0.3), t(&[4], 0.6)],
        &[],
        |x, _| vec![jnp::einsum("i,j->ij", &[&x[0], &x[1]])],
        &EINSUM_OUTER,
        Some(&EINSUM_OUTER_GRAD),
    );
    case(
        "einsum_ellipsis",
        &[t(&[2, 2, 3], 0.3), t(&[3, 2], 0.6)],
        &[],
        |x, _| vec![jnp::einsum("...ij,...jk->...ik", &[&x[0], &x[1]])],
        &EINSUM_ELLIPSIS,
        Some(&EINSUM_ELLIPSIS_GRAD),
    );
    case(
        "einsum_chain",
        &[t(&[2, 3, 4], 0.3), t(&[2, 4, 2], 0.6), t(&[2, 3], 0.2)],
        &[],
        |x, _| vec![jnp::einsum("ijk,ikl,lm->jm", &[&x[0], &x[1], &x[2]])],
        &EINSUM_CHAIN,
        Some(&EINSUM_CHAIN_GRAD),
    );
    case(
        "einsum_rowdot",
        &[a, t(&[2, 3], 0.8)],
        &[],
        |x, _| vec![jnp::einsum("ij,ij->i", &[&x[0], &x[1]])],
        &EINSUM_ROWDOT,
        Some(&EINSUM_ROWDOT_GRAD),
    );
    case(
        "einsum_repeated",
        &[t(&[3, 3, 2], 0.35)],
        &[],
        one("iij->ji"),
        &EINSUM_REPEATED,
        Some(&EINSUM_REPEATED_GRAD),
    );
    case(
        "einsum_broadcast",
        &[t(&[2, 3], 0.3), t(&[1, 3], 0.6)],
        &[],
        |x, _| vec![jnp::einsum("ij,kj->ikj", &[&x[0], &x[1]])],
        &EINSUM_BROADCAST,
        Some(&EINSUM_BROADCAST_GRAD),
    );
    case(
        "einsum_sum_ellipsis",
        &[t(&[2, 2, 3], 0.3)],
        &[],
        one("...i->i"),
        &EINSUM_SUM_ELLIPSIS,
        Some(&EINSUM_SUM_ELLIPSIS_GRAD),
    );
}

#[test]
fn contractions_and_products_as_in_jax() {
    let (x234, a) = (t(&[2, 3, 4], 0.3), t(&[2, 3], 0.3));
    case(
        "dot_general",
        &[x234.clone(), t(&[2, 4], 0.6)],
        &[],
        |x, _| vec![jnp::dot_general(&x[0], &x[1], (&[2], &[1]), (&[0], &[0]))],
        &DOT_GENERAL,
        Some(&DOT_GENERAL_GRAD),
    );
    case(
        "dot_general_perm",
        &[x234.clone(), t(&[4, 5, 2], 0.6)],
        &[],
        |x, _| vec![jnp::dot_general(&x[0], &x[1], (&[0, 2], &[2, 0]), (&[], &[]))],
        &DOT_GENERAL_PERM,
        Some(&DOT_GENERAL_PERM_GRAD),
    );
    case(
        "tensordot",
        &[x234.clone(), t(&[3, 4, 5], 0.6)],
        &[],
        |x, _| vec![jnp::tensordot(&x[0], &x[1], 2)],
        &TENSORDOT,
        Some(&TENSORDOT_GRAD),
    );
    case(
        "tensordot_axes",
        &[x234.clone(), t(&[4, 5, 2], 0.6)],
        &[],
        |x, _| vec![jnp::tensordot_axes(&x[0], &x[1], &[0, 2], &[2, 0])],
        &TENSORDOT_AXES,
        Some(&TENSORDOT_AXES_GRAD),
    );
    case(
        "outer",
        &[a.clone(), t(&[3], 0.6)],
        &[],
        |x, _| vec![jnp::outer(&x[0], &x[1])],
        &OUTER,
        Some(&OUTER_GRAD),
    );
    case(
        "inner",
        &[a.clone(), t(&[4, 3], 0.6)],
        &[],
        |x, _| vec![jnp::inner(&x[0], &x[1])],
        &INNER,
        Some(&INNER_GRAD),
    );
    case(
        "dot_nd",
        &[x234.clone(), t(&[5, 4, 2], 0.6)],
        &[],
        |x, _| vec![jnp::dot(&x[0], &x[1])],
        &DOT_ND,
        Some(&DOT_ND_GRAD),
    );
    case(
        "dot_vec",
        &[x234, t(&[4], 0.6)],
        &[],
        |x, _| vec![jnp::dot(&x[0], &x[1])],
        &DOT_VEC,
        Some(&DOT_VEC_GRAD),
    );
    case(
        "vdot",
        &[a.clone(), t(&[3, 2], 0.6)],
        &[],
        |x, _| vec![jnp::vdot(&x[0], &x[1])],
        &VDOT,
        Some(&VDOT_GRAD),
    );
    case(
        "kron",
        &[a, t(&[2, 2], 0.6)],
        &[],
        |x, _| vec![jnp::kron(&x[0], &x[1])],
        &KRON,
        Some(&KRON_GRAD),
    );
    case(
        "kron_ranks",
        &[t(&[3], 0.3), t(&[2, 2], 0.6)],
        &[],
        |x, _| vec![jnp::kron(&x[0], &x[1])],
        &KRON_RANKS,
        Some(&KRON_RANKS_GRAD),
    );
    case(
        "cross3",
        &[t(&[4, 3], 0.3), t(&[3], 0.6)],
        &[],
        |x, _| vec![jnp::cross(&x[0], &x[1], -1)],
        &CROSS3,
        Some(&CROSS3_GRAD),
    );
    case(
        "cross2",
        &[t(&[4, 2], 0.3), t(&[4, 2], 0.6)],
        &[],
        |x, _| vec![jnp::cross(&x[0], &x[1], -1)],
        &CROSS2,
        Some(&CROSS2_GRAD),
    );
    case(
        "cross_axis0",
        &[t(&[3, 2], 0.3), t(&[3, 2], 0.6)],
        &[],
        |x, _| vec![jnp::cross(&x[0], &x[1], 0)],
        &CROSS_AXIS0,
        Some(&CROSS_AXIS0_GRAD),
    );
}

// ------------------------------------------------------------- elementwise

#[test]
fn elementwise_functions_as_in_jax() {
    let inf = f64::INFINITY;
    let p = [0.0, 0.0, 3.0, -4.0, 1e-200, 1e200, inf, 2.0, -inf, 0.5];
    let q = [0.0, 2.0, 4.0, 3.0, 1e-200, 1e200, 1.0, -inf, 7.0, 0.5];
    let pick = |a: &[f64]| v(&[1, 2, 3, 7, 9].map(|i| a[i]));
    let two: Case = |x, _| vec![jnp::hypot(&x[0], &x[1])];
    case("hypot", &[pick(&p), pick(&q)], &[], two, &HYPOT, Some(&HYPOT_GRAD));
    case("hypot_special", &[v(&p), v(&q)], &[], two, &HYPOT_SPECIAL, None);
    // At equal tiny and huge values the gradient is 1/sqrt(2) in each (JAX
    // gives inf and 0.98 of it: its division's derivative under- and
    // overflows there).
    for s in [1e-200, 1e200] {
        let g = grad(|a: &Var, b: &Var| jnp::hypot(a, b))
            .argnums(&[0, 1])
            .eval((&Tensor::scalar(s), &Tensor::scalar(s)));
        let g = g.unwrap();
        let g = [g[0].item().unwrap(), g[1].item().unwrap()];
        close("hypot gradient at equal extremes", &g, &[std::f64::consts::FRAC_1_SQRT_2; 2]);
    }
    let (l1, l2) = (
        v(&[0.0, 1.0, -3.0, 800.0, -800.0, 2.0, 30.0]),
        v(&[0.0, -2.0, -3.0, 799.0, -801.0, 2.0, -40.0]),
    );
    case(
        "logaddexp",
        &[l1.clone(), l2.clone()],
        &[],
        |x, _| vec![jnp::logaddexp(&x[0], &x[1])],
        &LOGADDEXP,
        Some(&LOGADDEXP_GRAD),
    );
    case(
        "logaddexp_inf",
        &[v(&[-inf, inf, -inf, 1.0]), v(&[-inf, inf, 2.0, inf])],
        &[],
        |x, _| vec![jnp::logaddexp(&x[0], &x[1])],
        &LOGADDEXP_INF,
        None,
    );
    case(
        "logaddexp2",
        &[l1, l2],
        &[],
        |x, _| vec![jnp::logaddexp2(&x[0], &x[1])],
        &LOGADDEXP2,
        Some(&LOGADDEXP2_GRAD),
    );
    let specials = v(&[f64::NAN, inf, -inf, 2.5]);
    case(
        "nan_to_num",
        &[specials.clone()],
        &[],
        |x, _| vec![jnp::nan_to_num(&x[0], -1.0, Some(9.0), None)],
        &NAN_TO_NUM,
        None,
    );
    case(
        "nan_to_num_default",
        &[specials],
        &[],
        |x, _| vec![jnp::nan_to_num(&x[0], 0.0, None, None)],
        &NAN_TO_NUM_DEFAULT,
        None,
    );
    case(
        "sinc",
        &[v(&[0.0, 0.5, -1.5, 1e-3, 2.0])],
        &[],
        |x, _| vec![jnp::sinc(&x[0])],
        &SINC,
        Some(&SINC_GRAD),
    );
    let second = grad(grad(|x: &Var| jnp::sinc(x))).eval(Tensor::scalar(0.0)).unwrap();
    close("sinc'' at 0", &second.to_f64_vec(), &SINC_SECOND_AT_ZERO);
    case(
        "heaviside",
        &[v(&[-1.0, 0.0, 2.0]), v(&[0.5, 0.5, 0.5])],
        &[],
        |x, _| vec![jnp::heaviside(&x[0], &x[1])],
        &HEAVISIDE,
        None,
    );
    let (fa, fb) = ([7.0, -7.0, 7.0, -7.0, 6.5, -0.5], [2.0, 2.0, -2.0, -2.0, 2.0, 3.0]);
    let (ia, ib) = (iv(&[7, -7, 7, -7]), iv(&[2, 2, -2, -2]));
    case(
        "floor_divide",
        &[v(&fa), v(&fb)],
        &[],
        |x, _| vec![jnp::floor_divide(&x[0], &x[1])],
        &FLOOR_DIVIDE,
        None,
    );
    case(
        "floor_divide_int",
        &[],
        &[ia.clone(), ib.clone()],
        |_, i| vec![jnp::floor_divide(&i[0], &i[1])],
        &FLOOR_DIVIDE_INT,
        None,
    );
    case(
        "remainder",
        &[v(&fa), v(&fb)],
        &[],
        |x, _| vec![jnp::remainder(&x[0], &x[1])],
        &REMAINDER,
        None,
    );
    case(
        "remainder_int",
        &[],
        &[ia, ib],
        |_, i| vec![jnp::remainder(&i[0], &i[1])],
        &REMAINDER_INT,
        None,
    );
    let fd = jit(|a: &Var, b: &Var| jnp::floor_divide(a, b));
    let g = Tensor::from_vec(vec![7.0f32, -7.0], &[2]).unwrap();
    let q = fd.eval((&g, &iv(&[2, 2]))).unwrap();
    assert_eq!((q.dtype(), q.to_f64_vec()), (DType::F32, vec![3.0, -4.0]));
    case("fmod", &[v(&fa), v(&fb)], &[], |x, _| vec![jnp::fmod(&x[0], &x[1])], &FMOD, None);
    let (ca, cb) = (v(&[1.0, 1.0, f64::NAN, inf, 0.0]), v(&[1.0 + 1e-6, 1.1, f64::NAN, inf, 1e-9]));
    case(
        "isclose",
        &[ca, cb],
        &[],
        |x, _| vec![jnp::isclose(&x[0], &x[1], 1e-5, 1e-8)],
        &ISCLOSE,
        None,
    );
}

// -------------------------------------------------------------- statistics

#[test]
fn statistics_as_in_jax() {
    let x35 = t(&[3, 5], 0.8);
    case(
        "var_ddof",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::var(&x[0], Some(&[1]), 1.0, false)],
        &VAR_DDOF,
        Some(&VAR_DDOF_GRAD),
    );
    case(
        "var_all",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::var(&x[0], None, 1.0, false)],
        &VAR_ALL,
        Some(&VAR_ALL_GRAD),
    );
    case(
        "std_ddof",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::std(&x[0], Some(&[0]), 1.0, true)],
        &STD_DDOF,
        Some(&STD_DDOF_GRAD),
    );
    let qs = [0.0, 0.3, 0.5, 0.625, 0.75, 1.0];
    let methods: [(&str, Case, &[f64], &[f64]); 5] = [
        (
            "linear",
            |x, _| {
                vec![jnp::quantiles(
                    &x[0],
                    &[0.0, 0.3, 0.5, 0.625, 0.75, 1.0],
                    Some(1),
                    QuantileMethod::Linear,
                    false,
                )]
            },
            &QUANTILE_LINEAR,
            &QUANTILE_LINEAR_GRAD,
        ),
        (
            "lower",
            |x, _| {
                vec![jnp::quantiles(
                    &x[0],
                    &[0.0, 0.3, 0.5, 0.625, 0.75, 1.0],
                    Some(1),
                    QuantileMethod::Lower,
                    false,
                )]
            },
            &QUANTILE_LOWER,
            &QUANTILE_LOWER_GRAD,
        ),
        (
            "higher",
            |x, _| {
                vec![jnp::quantiles(
                    &x[0],
                    &[0.0, 0.3, 0.5, 0.625, 0.75, 1.0],
                    Some(1),
                    QuantileMethod::Higher,
                    false,
                )]
            },
            &QUANTILE_HIGHER,
            &QUANTILE_HIGHER_GRAD,
        ),
        (
            "midpoint",
            |x, _| {
                vec![jnp::quantiles(
                    &x[0],
                    &[0.0, 0.3, 0.5, 0.625, 0.75, 1.0],
                    Some(1),
                    QuantileMethod::Midpoint,
                    false,
                )]
            },
            &QUANTILE_MIDPOINT,
            &QUANTILE_MIDPOINT_GRAD,
        ),
        (
            "nearest",
            |x, _| {
                vec![jnp::quantiles(
                    &x[0],
                    &[0.0, 0.3, 0.5, 0.625, 0.75, 1.0],
                    Some(1),
                    QuantileMethod::Nearest,
                    false,
                )]
            },
            &QUANTILE_NEAREST,
            &QUANTILE_NEAREST_GRAD,
        ),
    ];
    assert_eq!(qs.len(), 6);
    for (m, f, want, want_grad) in methods {
        case(&format!("quantile_{m}"), &[x35.clone()], &[], f, want, Some(want_grad));
    }
    case(
        "quantile_keepdims",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::quantile(&x[0], 0.4, Some(0), QuantileMethod::Linear, true)],
        &QUANTILE_KEEPDIMS,
        Some(&QUANTILE_KEEPDIMS_GRAD),
    );
    case(
        "median_all",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::median(&x[0], None, false)],
        &MEDIAN_ALL,
        Some(&MEDIAN_ALL_GRAD),
    );
    case(
        "median_axis",
        &[t(&[3, 4], 0.8)],
        &[],
        |x, _| vec![jnp::median(&x[0], Some(1), false)],
        &MEDIAN_AXIS,
        Some(&MEDIAN_AXIS_GRAD),
    );
    case(
        "percentile",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::percentile(&x[0], 90.0, Some(1), QuantileMethod::Linear, false)],
        &PERCENTILE,
        Some(&PERCENTILE_GRAD),
    );
    let nan = f64::NAN;
    let with_nan = Tensor::from_vec(vec![1.0, nan, 3.0, 1.0, 2.0, 3.0], &[2, 3]).unwrap();
    case(
        "median_nan",
        &[with_nan],
        &[],
        |x, _| vec![jnp::median(&x[0], Some(1), false)],
        &MEDIAN_NAN,
        None,
    );
    let nans = Tensor::from_vec(vec![1.0, nan, 3.0, nan, 2.0, 5.0], &[2, 3]).unwrap();
    case(
        "nansum",
        &[nans.clone()],
        &[],
        |x, _| vec![jnp::nansum(&x[0], Some(&[1]), false)],
        &NANSUM,
        None,
    );
    case("nanmean", &[nans], &[], |x, _| vec![jnp::nanmean(&x[0], None, false)], &NANMEAN, None);
    let shifted = |shape: &[usize]| {
        let w = t(shape, 0.2);
        Tensor::from_vec(w.to_f64_vec().iter().map(|w| w + 3.0).collect(), shape).unwrap()
    };
    case(
        "average",
        &[x35.clone(), shifted(&[5])],
        &[],
        |x, _| vec![jnp::average(&x[0], &x[1], Some(1))],
        &AVERAGE,
        Some(&AVERAGE_GRAD),
    );
    case(
        "average_all",
        &[x35.clone(), shifted(&[3, 5])],
        &[],
        |x, _| vec![jnp::average(&x[0], &x[1], None)],
        &AVERAGE_ALL,
        Some(&AVERAGE_ALL_GRAD),
    );
    case(
        "cov",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::cov(&x[0], true, 1.0)],
        &COV,
        Some(&COV_GRAD),
    );
    case(
        "cov_cols",
        &[t(&[5, 3], 0.8)],
        &[],
        |x, _| vec![jnp::cov(&x[0], false, 0.0)],
        &COV_COLS,
        Some(&COV_COLS_GRAD),
    );
    case(
        "cov_vec",
        &[t(&[6], 0.8)],
        &[],
        |x, _| vec![jnp::cov(&x[0], true, 1.0)],
        &COV_VEC,
        Some(&COV_VEC_GRAD),
    );
    case(
        "corrcoef",
        &[x35],
        &[],
        |x, _| vec![jnp::corrcoef(&x[0], true)],
        &CORRCOEF,
        Some(&CORRCOEF_GRAD),
    );
    let nz = Tensor::from_vec(vec![0.0, 1.0, 2.0, 0.0, 0.0, -1.0], &[2, 3]).unwrap();
    case(
        "count_nonzero",
        &[nz],
        &[],
        |x, _| vec![jnp::count_nonzero(&x[0], Some(&[1]), false)],
        &COUNT_NONZERO,
        None,
    );
    case(
        "bincount",
        &[],
        &[iv(&[-1, -1, 1, 3, 10, 4])],
        |_, i| vec![jnp::bincount(&i[0], None, 5)],
        &BINCOUNT,
        None,
    );
    case(
        "bincount_weights",
        &[t(&[5], 0.6)],
        &[iv(&[0, 2, 2, 7, 1])],
        |x, i| vec![jnp::bincount(&i[0], Some(&x[0]), 4)],
        &BINCOUNT_WEIGHTS,
        Some(&BINCOUNT_WEIGHTS_GRAD),
    );
}

// --------------------------------------------------------------- searching

#[test]
fn searchsorted_and_interp_as_in_jax() {
    let nan = f64::NAN;
    let sorted = v(&[-1.0, 0.0, 0.0, 2.0, 3.5, 3.5, 3.5, 9.0, nan]);
    let query = v(&[-5.0, -1.0, 0.0, 1.0, 3.5, 9.0, 10.0, nan]);
    case(
        "searchsorted_left",
        &[sorted.clone(), query.clone()],
        &[],
        |x, _| vec![jnp::searchsorted(&x[0], &x[1], Side::Left)],
        &SEARCHSORTED_LEFT,
        None,
    );
    case(
        "searchsorted_right",
        &[sorted, query],
        &[],
        |x, _| vec![jnp::searchsorted(&x[0], &x[1], Side::Right)],
        &SEARCHSORTED_RIGHT,
        None,
    );
    let grid = v(&(0..10).map(f64::from).collect::<Vec<_>>());
    let q2 = Tensor::from_vec(vec![2.5, -1.0, 9.0, 100.0], &[2, 2]).unwrap();
    case(
        "searchsorted_2d",
        &[grid, q2],
        &[],
        |x, _| vec![jnp::searchsorted(&x[0], &x[1], Side::Left)],
        &SEARCHSORTED_2D,
        None,
    );
    let xp = v(&[0.0, 1.0, 1.5, 3.0, 4.0]);
    let fp = v(&[1.0, -1.0, 2.0, 0.5, 0.0]);
    let xi = v(&[-1.0, 0.25, 1.0, 1.2, 2.0, 3.9, 5.0]);
    case(
        "interp",
        &[xi.clone(), xp.clone(), fp.clone()],
        &[],
        |x, _| vec![jnp::interp(&x[0], &x[1], &x[2], None, None)],
        &INTERP,
        Some(&INTERP_GRAD),
    );
    case(
        "interp_lr",
        &[xi, xp, fp],
        &[],
        |x, _| vec![jnp::interp(&x[0], &x[1], &x[2], Some(-7.0), Some(7.0))],
        &INTERP_LR,
        Some(&INTERP_LR_GRAD),
    );
}

// ------------------------------------------------- polynomials and signals

#[test]
fn polynomials_convolutions_and_integrals_as_in_jax() {
    case(
        "polyval",
        &[v(&[2.0, -1.0, 0.5, 3.0]), t(&[2, 3], 0.5)],
        &[],
        |x, _| vec![jnp::polyval(&x[0], &x[1])],
        &POLYVAL,
        Some(&POLYVAL_GRAD),
    );
    let (sig, ker) = (t(&[7], 0.5), t(&[3], 0.9));
    let (short, long) = (t(&[4], 0.3), t(&[6], 0.7));
    let k4 = t(&[4], 0.9);
    let conv: [(ConvolveMode, Case, Case, Case); 3] = [
        (
            ConvolveMode::Full,
            |x, _| vec![jnp::convolve(&x[0], &x[1], ConvolveMode::Full)],
            |x, _| vec![jnp::convolve(&x[0], &x[1], ConvolveMode::Full)],
            |x, _| vec![jnp::correlate(&x[0], &x[1], ConvolveMode::Full)],
        ),
        (
            ConvolveMode::Same,
            |x, _| vec![jnp::convolve(&x[0], &x[1], ConvolveMode::Same)],
            |x, _| vec![jnp::convolve(&x[0], &x[1], ConvolveMode::Same)],
            |x, _| vec![jnp::correlate(&x[0], &x[1], ConvolveMode::Same)],
        ),
        (
            ConvolveMode::Valid,
            |x, _| vec![jnp::convolve(&x[0], &x[1], ConvolveMode::Valid)],
            |x, _| vec![jnp::convolve(&x[0], &x[1], ConvolveMode::Valid)],
            |x, _| vec![jnp::correlate(&x[0], &x[1], ConvolveMode::Valid)],
        ),
    ];
    let want: [[(&[f64], &[f64]); 3]; 3] = [
        [
            (&CONVOLVE_FULL, &CONVOLVE_FULL_GRAD),
            (&CONVOLVE_SHORT_FULL, &CONVOLVE_SHORT_FULL_GRAD),
            (&CORRELATE_FULL, &CORRELATE_FULL_GRAD),
        ],
        [
            (&CONVOLVE_SAME, &CONVOLVE_SAME_GRAD),
            (&CONVOLVE_SHORT_SAME, &CONVOLVE_SHORT_SAME_GRAD),
            (&CORRELATE_SAME, &CORRELATE_SAME_GRAD),
        ],
        [
            (&CONVOLVE_VALID, &CONVOLVE_VALID_GRAD),
            (&CONVOLVE_SHORT_VALID, &CONVOLVE_SHORT_VALID_GRAD),
            (&CORRELATE_VALID, &CORRELATE_VALID_GRAD),
        ],
    ];
    for ((mode, c, cs, cr), w) in conv.into_iter().zip(want) {
        case(
            &format!("convolve {mode:?}"),
            &[sig.clone(), ker.clone()],
            &[],
            c,
            w[0].0,
            Some(w[0].1),
        );
        case(
            &format!("convolve short {mode:?}"),
            &[short.clone(), long.clone()],
            &[],
            cs,
            w[1].0,
            Some(w[1].1),
        );
        case(
            &format!("correlate {mode:?}"),
            &[sig.clone(), k4.clone()],
            &[],
            cr,
            w[2].0,
            Some(w[2].1),
        );
    }
    let x35 = t(&[3, 5], 0.8);
    case(
        "trapezoid_dx",
        &[x35.clone()],
        &[],
        |x, _| vec![jnp::trapezoid(&x[0], None, 0.5, 1)],
        &TRAPEZOID_DX,
        Some(&TRAPEZOID_DX_GRAD),
    );
    let abs: Vec<f64> = t(&[5], 0.3).to_f64_vec().iter().map(|a| a.abs()).collect();
    let cum: Vec<f64> = abs
        .iter()
        .scan(0.0, |s, a| {
            *s += a;
            Some(*s)
        })
        .collect();
    case(
        "trapezoid_x",
        &[x35, v(&cum)],
        &[],
        |x, _| vec![jnp::trapezoid(&x[0], Some(&x[1]), 1.0, 1)],
        &TRAPEZOID_X,
        Some(&TRAPEZOID_X_GRAD),
    );
}

// ------------------------------------------------ selections of static size

#[test]
fn selections_of_static_size_as_in_jax() {
    let nz = Tensor::from_vec(vec![0.0, 2.0, 0.0, 3.0, 4.0, 0.0], &[2, 3]).unwrap();
    case("nonzero", &[nz.clone()], &[], |x, _| jnp::nonzero(&x[0], 4, -1), &NONZERO, None);
    case(
        "nonzero_short",
        &[nz.clone()],
        &[],
        |x, _| jnp::nonzero(&x[0], 2, 0),
        &NONZERO_SHORT,
        None,
    );
    case(
        "flatnonzero",
        &[nz.clone()],
        &[],
        |x, _| vec![jnp::flatnonzero(&x[0], 5, 9)],
        &FLATNONZERO,
        None,
    );
    case("argwhere", &[nz], &[], |x, _| vec![jnp::argwhere(&x[0], 4, 0)], &ARGWHERE, None);
    let nan = f64::NAN;
    case(
        "unique",
        &[v(&[3.0, 1.0, nan, 3.0, 2.0, 1.0, nan])],
        &[],
        |x, _| vec![jnp::unique(&x[0], 6, None)],
        &UNIQUE,
        None,
    );
    let sq = Tensor::from_vec(vec![2.0, 2.0, 5.0, 2.0], &[2, 2]).unwrap();
    case(
        "unique_fill",
        &[sq],
        &[],
        |x, _| vec![jnp::unique(&x[0], 3, Some(-1.0))],
        &UNIQUE_FILL,
        None,
    );
    case(
        "unique_grad",
        &[v(&[0.3, -1.2, 0.3, 2.5])],
        &[],
        |x, _| vec![jnp::unique(&x[0], 4, Some(0.0))],
        &UNIQUE_GRAD,
        Some(&UNIQUE_GRAD_GRAD),
    );
    case(
        "unique_int",
        &[],
        &[iv(&[4, -2, 4, 7, 7])],
        |_, i| vec![jnp::unique(&i[0], 4, None)],
        &UNIQUE_INT,
        None,
    );
    let hx = t(&[40], 0.37);
    let hist: Case = |x, _| {
        let (c, e) = jnp::histogram(&x[0], 5, None, None);
        vec![c, e]
    };
    case("histogram", &[hx.clone()], &[], hist, &HISTOGRAM, None);
    let ranged: Case = |x, _| {
        let (c, e) = jnp::histogram(&x[0], 4, Some((-1.0, 1.5)), Some(&x[1]));
        vec![c, e]
    };
    case(
        "histogram_range",
        &[hx, t(&[40], 0.11)],
        &[],
        ranged,
        &HISTOGRAM_RANGE,
        Some(&HISTOGRAM_RANGE_GRAD),
    );
    let constant: Case = |x, _| {
        let (c, e) = jnp::histogram(&x[0], 2, None, None);
        vec![c, e]
    };
    case("histogram_constant", &[v(&[1.0, 1.0, 1.0])], &[], constant, &HISTOGRAM_CONSTANT, None);
    let (dx, bins) = (v(&[-1.0, 0.0, 0.5, 1.0, 2.5, 3.0, 4.0, 5.0]), v(&[0.0, 1.0, 2.5, 4.0]));
    case(
        "digitize",
        &[dx.clone(), bins.clone()],
        &[],
        |x, _| vec![jnp::digitize(&x[0], &x[1], false)],
        &DIGITIZE,
        None,
    );
    case(
        "digitize_right",
        &[dx.clone(), bins],
        &[],
        |x, _| vec![jnp::digitize(&x[0], &x[1], true)],
        &DIGITIZE_RIGHT,
        None,
    );
    case(
        "digitize_decreasing",
        &[dx, v(&[4.0, 2.5, 1.0, 0.0])],
        &[],
        |x, _| vec![jnp::digitize(&x[0], &x[1], false)],
        &DIGITIZE_DECREASING,
        None,
    );
    let x34 = t(&[3, 4], 0.7);
    let select: Case = |x, _| {
        let (lo, hi) = (x[0].lt(&x[0].full_like(-0.5)), x[0].gt(&x[0].full_like(0.5)));
        vec![jnp::select(&[&lo, &hi], &[&(&x[0] * 2.0), &x[0].sin()], 7.0)]
    };
    case("select", &[x34.clone()], &[], select, &SELECT, Some(&SELECT_GRAD));
    case(
        "clip",
        &[x34.clone()],
        &[],
        |x, _| vec![jnp::clip(&x[0], Some(-0.5), Some(1.0))],
        &CLIP,
        Some(&CLIP_GRAD),
    );
    case(
        "clip_ties",
        &[v(&[-0.5, 1.0, 0.0])],
        &[],
        |x, _| vec![jnp::clip(&x[0], Some(-0.5), Some(1.0))],
        &CLIP_TIES,
        Some(&CLIP_TIES_GRAD),
    );
    let a = t(&[4], 0.3);
    let b = Tensor::from_vec(a.to_f64_vec().iter().map(|a| a + 1e-9).collect(), &[4]).unwrap();
    let close_eq: Case = |x, _| {
        vec![
            jnp::allclose(&x[0], &x[1], 1e-5, 1e-8),
            jnp::allclose(&x[0], &x[0], 1e-5, 1e-8),
            jnp::array_equal(&x[0], &x[0]),
            jnp::array_equal(&x[0], &x[1]),
        ]
    };
    case("allclose", &[a, b], &[], close_eq, &ALLCLOSE, None);
    let idx = Tensor::from_vec(vec![0i64, -1, 2, 1, 3, 3], &[3, 2]).unwrap();
    case(
        "take_along_axis",
        &[x34.clone()],
        &[idx],
        |x, i| vec![jnp::take_along_axis(&x[0], &i[0], 1)],
        &TAKE_ALONG_AXIS,
        Some(&TAKE_ALONG_AXIS_GRAD),
    );
    let idx = Tensor::from_vec(vec![2i64, 0], &[2, 1]).unwrap();
    case(
        "take_along_axis_bcast",
        &[x34],
        &[idx],
        |x, i| vec![jnp::take_along_axis(&x[0], &i[0], 0)],
        &TAKE_ALONG_AXIS_BCAST,
        Some(&TAKE_ALONG_AXIS_BCAST_GRAD),
    );
}

// --- recorded by tests/jax/numpy_expected.py (JAX 0.10.2, x64)
#[rustfmt::skip]
mod recorded {
    pub const ROLL_AXIS: [f64; 12] = [1.7264187332977479, 0.6699763003118102, 1.288435374475382, 1.9708994599769203, -1.9649052252486652, -1.2625332757446432, -0.7015664553792397, -1.7431515448271755, 1.9763364677540005, 1.7091978161765629, 0.033627800968699426, 1.3139731974375781];
    pub const ROLL_AXIS_GRAD: [f64; 12] = [-0.4161468365471424, -0.9899924966004454, 1.0, 0.5403023058681398, 0.960170286650366, 0.7539022543433046, -0.6536436208636119, 0.28366218546322625, -0.8390715290764524, 0.004425697988050785, -0.14550003380861354, -0.9111302618846769];
    pub const ROLL_FLAT: [f64; 12] = [-1.7431515448271755, -1.9649052252486652, -1.2625332757446432, 0.033627800968699426, 1.3139731974375781, 1.9763364677540005, 1.7091978161765629, 1.288435374475382, 1.9708994599769203, 1.7264187332977479, 0.6699763003118102, -0.7015664553792397];
    pub const ROLL_FLAT_GRAD: [f64; 12] = [0.7539022543433046, -0.14550003380861354, -0.9111302618846769, -0.8390715290764524, 0.004425697988050785, 1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, -0.6536436208636119, 0.28366218546322625, 0.960170286650366];
    pub const ROLL_AXES: [f64; 12] = [1.9763364677540005, 1.7091978161765629, 0.033627800968699426, 1.3139731974375781, 1.7264187332977479, 0.6699763003118102, 1.288435374475382, 1.9708994599769203, -1.9649052252486652, -1.2625332757446432, -0.7015664553792397, -1.7431515448271755];
    pub const ROLL_AXES_GRAD: [f64; 12] = [0.960170286650366, 0.7539022543433046, -0.6536436208636119, 0.28366218546322625, -0.8390715290764524, 0.004425697988050785, -0.14550003380861354, -0.9111302618846769, -0.4161468365471424, -0.9899924966004454, 1.0, 0.5403023058681398];
    pub const TILE: [f64; 24] = [1.927116370834386, 1.0310027436429283, -1.3755323183679482, 1.927116370834386, 1.0310027436429283, -1.3755323183679482, -1.7669093114403063, 0.43023997617563103, 1.99708669074921, -1.7669093114403063, 0.43023997617563103, 1.99708669074921, 1.927116370834386, 1.0310027436429283, -1.3755323183679482, 1.927116370834386, 1.0310027436429283, -1.3755323183679482, -1.7669093114403063, 0.43023997617563103, 1.99708669074921, -1.7669093114403063, 0.43023997617563103, 1.99708669074921];
    pub const TILE_GRAD: [f64; 6] = [0.09417354927322541, -0.16355401386866064, -0.27091077092767946, 0.16162747278550083, -0.09642548294111575, -0.26582529434056834];
    pub const REPEAT_AXIS: [f64; 12] = [1.927116370834386, 1.927116370834386, 1.0310027436429283, 1.0310027436429283, -1.3755323183679482, -1.3755323183679482, -1.7669093114403063, -1.7669093114403063, 0.43023997617563103, 0.43023997617563103, 1.99708669074921, 1.99708669074921];
    pub const REPEAT_AXIS_GRAD: [f64; 6] = [1.5403023058681398, -1.4061393331475878, -0.3699814354003857, 1.7140725409936706, -1.0566302956932905, -0.8346458310884016];
    pub const REPEAT_FLAT: [f64; 18] = [1.927116370834386, 1.927116370834386, 1.927116370834386, 1.0310027436429283, 1.0310027436429283, 1.0310027436429283, -1.3755323183679482, -1.3755323183679482, -1.3755323183679482, -1.7669093114403063, -1.7669093114403063, -1.7669093114403063, 0.43023997617563103, 0.43023997617563103, 0.43023997617563103, 1.99708669074921, 1.99708669074921, 1.99708669074921];
    pub const REPEAT_FLAT_GRAD: [f64; 6] = [1.1241554693209974, -1.3599739320008313, 1.5685725071850571, -1.7457760929730786, 1.888037958390522, -1.992510731233803];
    pub const REPEAT_EACH: [f64; 6] = [1.927116370834386, -1.3755323183679482, -1.3755323183679482, -1.7669093114403063, 1.99708669074921, 1.99708669074921];
    pub const REPEAT_EACH_GRAD: [f64; 6] = [1.0, 0.0, 0.12415546932099736, -0.9899924966004454, 0.0, -0.3699814354003857];
    pub const SPLIT: [f64; 12] = [0.5910404133226791, 1.1292849467900707, 1.7264187332977474, 1.350926361102302, 1.5666538192549666, 1.8640781719344526, 0.8547597604676603, 0.2822400161197344, 1.994989973208109, 1.9476952617563905, -0.3154913882864964, -0.8850408865897041];
    pub const SPLIT_GRAD: [f64; 12] = [1.0, 0.5403023058681398, -0.6536436208636119, 0.28366218546322625, -0.14550003380861354, -0.9111302618846769, -0.4161468365471424, -0.9899924966004454, 0.960170286650366, 0.7539022543433046, -0.8390715290764524, 0.004425697988050785];
    pub const ARRAY_SPLIT: [f64; 7] = [1.5666538192549668, 1.9476952617563903, 0.8547597604676596, -0.8850408865897049, -1.955060235330194, -1.5455289751119743, 0.033627800968699426];
    pub const ARRAY_SPLIT_GRAD: [f64; 7] = [1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, -0.6536436208636119, 0.28366218546322625, 0.960170286650366];
    pub const SPLIT_AT: [f64; 7] = [1.5666538192549668, 1.9476952617563903, 0.8547597604676596, -0.8850408865897049, -1.955060235330194, -1.5455289751119743, 0.033627800968699426];
    pub const SPLIT_AT_GRAD: [f64; 7] = [1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, -0.6536436208636119, 0.28366218546322625, 0.960170286650366];
    pub const DIFF: [f64; 9] = [-1.2126558692646736, -0.8194538029767524, 0.07081794419676513, 0.7658357435185896, -0.14139436744831002, -0.9628565524488617, 0.21148857250414155, 1.0042968555940182, 1.1879121424330905];
    pub const DIFF_GRAD: [f64; 15] = [1.0, -1.4596976941318602, -0.4967514482834219, 1.3725959789624245, -0.4161468365471424, -0.9899924966004454, 1.326341372337279, 0.6009569305900048, -1.2209679917900644, 0.28366218546322625, 0.960170286650366, -1.1664383189574274, -0.6931342558448568, 1.0449023219605316, -0.14550003380861354];
    pub const MESHGRID_XY: [f64; 12] = [0.958851077208406, 1.682941969615793, 1.994989973208109, 0.958851077208406, 1.682941969615793, 1.994989973208109, 1.1292849467900707, 1.1292849467900707, 1.1292849467900707, 1.8640781719344526, 1.8640781719344526, 1.8640781719344526];
    pub const MESHGRID_XY_GRAD: [f64; 5] = [0.010007503399554585, -0.11334131499547218, -0.13248465108391616, 1.5685725071850571, -1.7457760929730786];
    pub const MESHGRID_IJ: [f64; 36] = [0.958851077208406, 0.958851077208406, 0.958851077208406, 0.958851077208406, 1.682941969615793, 1.682941969615793, 1.682941969615793, 1.682941969615793, 1.994989973208109, 1.994989973208109, 1.994989973208109, 1.994989973208109, 1.1292849467900707, 1.1292849467900707, 1.8640781719344526, 1.8640781719344526, 1.1292849467900707, 1.1292849467900707, 1.8640781719344526, 1.8640781719344526, 1.1292849467900707, 1.1292849467900707, 1.8640781719344526, 1.8640781719344526, 0.39733866159012243, 0.778836684617301, 0.39733866159012243, 0.778836684617301, 0.39733866159012243, 0.778836684617301, 0.39733866159012243, 0.778836684617301, 0.39733866159012243, 0.778836684617301, 0.39733866159012243, 0.778836684617301];
    pub const MESHGRID_IJ_GRAD: [f64; 7] = [0.134162972720552, 1.344091105593285, -1.8912761267816922, 0.3788307233968303, -0.506723214948273, 0.24839699896155987, -0.051220121069397884];
    pub const MOVEAXIS: [f64; 24] = [0.8699310682224605, -0.8395280356797178, 1.5666538192549668, 0.033627800968699426, 1.9514467156533182, 0.9000881475612352, 1.9476952617563903, 1.5873357276983062, 1.5561463937758424, 1.9585355653724, 0.8547597604676596, 1.9397796216901726, -0.016814494734297237, 1.5348023137349747, -0.8850408865897049, 0.8242369704835132, -1.57705050885239, -0.050438730287320994, -1.955060235330194, -0.9150717875506427, -1.9438061388036416, -1.5975087488020008, -1.5455289751119743, -1.961872460132983];
    pub const MOVEAXIS_GRAD: [f64; 24] = [1.0, -0.4161468365471424, -0.6536436208636119, 0.960170286650366, -0.14550003380861354, -0.8390715290764524, 0.8438539587324921, 0.1367372182078336, -0.9576594803233847, 0.6603167082440802, 0.40808206181339196, -0.9999608263946371, 0.5403023058681398, -0.9899924966004454, 0.28366218546322625, 0.7539022543433046, -0.9111302618846769, 0.004425697988050785, 0.9074467814501962, -0.7596879128588213, -0.27516333805159693, 0.9887046181866692, -0.5477292602242684, -0.5328330203333975];
    pub const ROT90_1: [f64; 24] = [1.9476952617563903, 1.5873357276983062, -0.8850408865897049, 0.8242369704835132, -1.5455289751119743, -1.961872460132983, 1.9514467156533182, 0.9000881475612352, -0.016814494734297237, 1.5348023137349747, -1.9438061388036416, -1.5975087488020008, 1.5666538192549668, 0.033627800968699426, 0.8547597604676596, 1.9397796216901726, -1.955060235330194, -0.9150717875506427, 0.8699310682224605, -0.8395280356797178, 1.5561463937758424, 1.9585355653724, -1.57705050885239, -0.050438730287320994];
    pub const ROT90_1_GRAD: [f64; 24] = [0.6603167082440802, 0.8438539587324921, 0.960170286650366, 1.0, 0.40808206181339196, 0.1367372182078336, -0.14550003380861354, -0.4161468365471424, -0.9999608263946371, -0.9576594803233847, -0.8390715290764524, -0.6536436208636119, 0.9887046181866692, 0.9074467814501962, 0.7539022543433046, 0.5403023058681398, -0.5477292602242684, -0.7596879128588213, -0.9111302618846769, -0.9899924966004454, -0.5328330203333975, -0.27516333805159693, 0.004425697988050785, 0.28366218546322625];
    pub const ROT90_3: [f64; 24] = [-0.8395280356797178, 0.033627800968699426, 0.9000881475612352, 1.5873357276983062, 0.8699310682224605, 1.5666538192549668, 1.9514467156533182, 1.9476952617563903, 1.9585355653724, 1.9397796216901726, 1.5348023137349747, 0.8242369704835132, 1.5561463937758424, 0.8547597604676596, -0.016814494734297237, -0.8850408865897049, -0.050438730287320994, -0.9150717875506427, -1.5975087488020008, -1.961872460132983, -1.57705050885239, -1.955060235330194, -1.9438061388036416, -1.5455289751119743];
    pub const ROT90_3_GRAD: [f64; 24] = [-0.6536436208636119, 0.28366218546322625, 0.960170286650366, 0.7539022543433046, 0.8438539587324921, 0.9074467814501962, 0.1367372182078336, -0.7596879128588213, 0.40808206181339196, -0.5477292602242684, -0.9999608263946371, -0.5328330203333975, 1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, -0.14550003380861354, -0.9111302618846769, -0.8390715290764524, 0.004425697988050785, -0.9576594803233847, -0.27516333805159693, 0.6603167082440802, 0.9887046181866692];
    pub const ROT90_NEG: [f64; 24] = [1.9476952617563903, -0.8850408865897049, -1.5455289751119743, 1.9514467156533182, -0.016814494734297237, -1.9438061388036416, 1.5666538192549668, 0.8547597604676596, -1.955060235330194, 0.8699310682224605, 1.5561463937758424, -1.57705050885239, 1.5873357276983062, 0.8242369704835132, -1.961872460132983, 0.9000881475612352, 1.5348023137349747, -1.5975087488020008, 0.033627800968699426, 1.9397796216901726, -0.9150717875506427, -0.8395280356797178, 1.9585355653724, -0.050438730287320994];
    pub const ROT90_NEG_GRAD: [f64; 24] = [-0.9111302618846769, 0.960170286650366, -0.9899924966004454, 1.0, -0.8390715290764524, 0.7539022543433046, -0.6536436208636119, 0.5403023058681398, 0.004425697988050785, -0.14550003380861354, 0.28366218546322625, -0.4161468365471424, -0.5477292602242684, 0.6603167082440802, -0.7596879128588213, 0.8438539587324921, -0.9999608263946371, 0.9887046181866692, -0.9576594803233847, 0.9074467814501962, -0.5328330203333975, 0.40808206181339196, -0.27516333805159693, 0.1367372182078336];
    pub const DIAG_EMBED: [f64; 16] = [0.0, 0.778836684617301, 0.0, 0.0, 0.0, 0.0, 1.4347121817990456, 0.0, 0.0, 0.0, 0.0, 1.8640781719344528, 0.0, 0.0, 0.0, 0.0];
    pub const DIAG_EMBED_GRAD: [f64; 3] = [0.5403023058681398, 0.960170286650366, 0.004425697988050785];
    pub const DIAG_EMBED_NEG: [f64; 25] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.778836684617301, 0.0, 0.0, 0.0, 0.0, 0.0, 1.4347121817990456, 0.0, 0.0, 0.0, 0.0, 0.0, 1.8640781719344528, 0.0, 0.0];
    pub const DIAG_EMBED_NEG_GRAD: [f64; 3] = [-0.8390715290764524, -0.9576594803233847, -0.9999608263946371];
    pub const DIAG_READ: [f64; 3] = [1.9708994599769203, -1.9649052252486652, 1.7091978161765629];
    pub const DIAG_READ_GRAD: [f64; 12] = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5403023058681398, 0.0, 0.0, 0.0, 0.0, -0.4161468365471424];
    pub const STACKS: [f64; 18] = [0.778836684617301, 1.4347121817990456, 1.8640781719344528, 1.5666538192549668, 1.9476952617563903, 0.8547597604676596, 0.778836684617301, 1.4347121817990456, 1.8640781719344528, 1.5666538192549668, 1.9476952617563903, 0.8547597604676596, 0.778836684617301, 1.5666538192549668, 1.4347121817990456, 1.9476952617563903, 1.8640781719344528, 0.8547597604676596];
    pub const STACKS_GRAD: [f64; 6] = [2.804024245382858, 1.430941778419278, -1.5193063506791404, -0.9936759770349262, -2.252403062798886, 0.012924545399680076];
    pub const EINSUM_MATMUL: [f64; 8] = [-1.1444916807458576, -1.6911886356490038, -1.8238236302796162, -1.509922992144967, 0.36740365982257667, -0.035183139899016946, -0.4291558799184301, -0.7180562931992488];
    pub const EINSUM_MATMUL_GRAD: [f64; 18] = [-0.7624555217307701, 3.1398514642860147, -1.8508229864503056, 3.137212961478256, -2.5170476578948753, -1.0422901209355635, -0.627402392553379, 0.8481089863047243, 1.5438728744092451, 0.8202071617164517, -0.17472752288427773, 1.1760584765102902, 1.4455817362728398, 0.3860438143478789, 0.2935552360216191, 1.3989541656067745, 1.21816108694074, -0.0826036772209317];
    pub const EINSUM_IMPLICIT: [f64; 8] = [-1.1444916807458576, -1.6911886356490038, -1.8238236302796162, -1.509922992144967, 0.36740365982257667, -0.035183139899016946, -0.4291558799184301, -0.7180562931992488];
    pub const EINSUM_IMPLICIT_GRAD: [f64; 18] = [-0.7624555217307701, 3.1398514642860147, -1.8508229864503056, 3.137212961478256, -2.5170476578948753, -1.0422901209355635, -0.627402392553379, 0.8481089863047243, 1.5438728744092451, 0.8202071617164517, -0.17472752288427773, 1.1760584765102902, 1.4455817362728398, 0.3860438143478789, 0.2935552360216191, 1.3989541656067745, 1.21816108694074, -0.0826036772209317];
    pub const EINSUM_DIAG: [f64; 3] = [1.288435374475382, -0.7015664553792397, 0.033627800968699426];
    pub const EINSUM_DIAG_GRAD: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 0.5403023058681398, 0.0, 0.0, 0.0, -0.4161468365471424];
    pub const EINSUM_TRACE: [f64; 1] = [0.6204967200648418];
    pub const EINSUM_TRACE_GRAD: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    pub const EINSUM_SUM: [f64; 1] = [9.093742586266668];
    pub const EINSUM_SUM_GRAD: [f64; 6] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    pub const EINSUM_TRANSPOSE: [f64; 6] = [0.5910404133226791, 1.8640781719344526, 1.1292849467900707, 1.994989973208109, 1.5666538192549666, 1.9476952617563905];
    pub const EINSUM_TRANSPOSE_GRAD: [f64; 6] = [1.0, -0.4161468365471424, -0.6536436208636119, 0.5403023058681398, -0.9899924966004454, 0.28366218546322625];
    pub const EINSUM_BATCHED: [f64; 8] = [3.309128380946287, 1.240773651848078, 6.540425479348927, 4.446082034752658, -4.56471927378781, -2.837743302330597, -0.5558397272625697, -1.7908656833980103];
    pub const EINSUM_BATCHED_GRAD: [f64; 24] = [2.1364506814047224, 2.6776038897180197, -0.1959496156922655, -2.315371761458779, -2.147934182688803, 0.7587305470531709, 0.5742514274278454, 0.8517059336990117, 0.04299307179141975, -3.1757438070684514, -1.9052749470409673, 1.7949615041275941, -0.18468982100442358, -1.526082905112281, 0.29907618049624785, -1.3648698435362967, 0.7561265975171862, -1.0817370237624808, -0.8574641147776206, 0.7025010953304521, -1.1859498549177792, 0.14535705513507405, -1.4084982265747255, -0.4247712978856946];
    pub const EINSUM_OUTER: [f64; 12] = [0.6674530417098831, 1.101745533205923, 1.1511666125351208, 0.7984520748344074, 1.275284491046653, 2.1050754192055305, 2.1995029400358383, 1.525580803814717, 1.7691985749158061, 2.920365187450926, 3.051364220575451, 2.1164339431531354];
    pub const EINSUM_OUTER_GRAD: [f64; 7] = [-0.011483501284080821, 2.679204133393605, -3.491005880284222, -0.3750576719519453, -0.7877497704237105, -0.4761883628621119, 0.27317842945976367];
    pub const EINSUM_ELLIPSIS: [f64; 8] = [3.309128380946287, 1.240773651848078, 6.540425479348927, 4.446082034752658, 4.8220589684431765, 4.286684173254664, -0.5455456346024539, 0.8832091910937245];
    pub const EINSUM_ELLIPSIS_GRAD: [f64; 18] = [2.1364506814047224, 2.6776038897180197, -0.1959496156922655, -2.315371761458779, -2.147934182688803, 0.7587305470531709, -0.20938141348141076, -0.8898918592431849, -0.43553701820345425, 2.4896385871628954, 2.8885855468750155, -0.39623584240408566, -1.0421539357820442, -0.8235818097818288, -0.8868736744215313, -1.2195127884012227, -0.6523716290575391, -1.5065083216481754];
    pub const EINSUM_CHAIN: [f64; 9] = [-11.979702911722537, -15.443209844616996, -18.29104473487337, -0.041796011649029324, 1.019781162623545, 2.0407028800478706, 11.949412693868085, 16.182261068908748, 19.769973761209815];
    pub const EINSUM_CHAIN_GRAD: [f64; 46] = [3.316609612158947, 2.7968126861110583, -1.2897160828967926, -3.731489933532925, -4.369920529222903, -3.824315533500348, 1.5983797509640063, 4.982686128220953, 5.335767457182896, 4.7752746794846885, -1.8750518374481167, -6.13415382617481, -1.414552543437812, 2.706341767074138, 3.375880394564647, -0.2597888887615934, 2.0126501624044235, -3.5240873414289924, -4.566610913644184, 0.21459358895543804, -2.5704645746862815, 4.27129828368449, 5.665940684238245, -0.1651031970072943, -0.26795993165697296, -1.0162100073163003, -0.5135306996848329, -1.4377007670514164, -0.7132292997332745, -1.7307659990998792, -0.8492172506125695, -1.8692270591046847, 0.6259413173063416, 1.6104117993762073, 0.7938925458050112, 1.824268593282144, 0.8909277175983552, 1.875168906880335, 0.9083789697851937, 1.7585659667509774, -1.1823356493667867, 0.5832645053399866, 1.812613963699256, 0.003438670351407624, 1.6251302869193782, 1.7526846123659754];
    pub const EINSUM_ROWDOT: [f64; 2] = [5.222013670329695, -7.117704889931783];
    pub const EINSUM_ROWDOT_GRAD: [f64; 12] = [1.4347121817990456, 1.9991472060830102, 1.3509263611023012, -0.06307936859399807, -0.8178042666032712, -1.0764600703564762, 0.5910404133226791, 1.1292849467900707, 1.5666538192549666, 1.0071657346146514, 1.0778976827081597, 1.0523442410554278];
    pub const EINSUM_REPEATED: [f64; 6] = [0.6857956149109027, -0.016814494734297237, -0.654109629739483, 1.288435374475382, -0.7015664553792397, 0.033627800968699426];
    pub const EINSUM_REPEATED_GRAD: [f64; 18] = [1.0, -0.9899924966004454, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5403023058681398, -0.6536436208636119, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4161468365471424, 0.28366218546322625];
    pub const EINSUM_BROADCAST: [f64; 6] = [0.6674530417098831, 2.1050754192055305, 3.051364220575451, 2.1050754192055305, 3.718817262285334, 3.7935168326682946];
    pub const EINSUM_BROADCAST_GRAD: [f64; 9] = [1.1292849467900707, 1.0071657346146514, -0.8105272217377804, -1.1179836238460032, -1.2184428058760581, 0.5524874945661883, -1.254382989969104, -0.6938572089414937, -0.09947053628126473];
    pub const EINSUM_SUM_ELLIPSIS: [f64; 3] = [4.463777334674614, 4.159709892813985, 3.484067954889313];
    pub const EINSUM_SUM_ELLIPSIS_GRAD: [f64; 12] = [1.0, 0.5403023058681398, -0.4161468365471424, 1.0, 0.5403023058681398, -0.4161468365471424, 1.0, 0.5403023058681398, -0.4161468365471424, 1.0, 0.5403023058681398, -0.4161468365471424];
    pub const DOT_GENERAL: [f64; 6] = [8.342125023112505, 11.07110798853389, -0.3187213625246983, 8.531872106018936, 3.878484463105193, -5.721074264372003];
    pub const DOT_GENERAL_GRAD: [f64; 32] = [1.1292849467900707, 1.8640781719344526, 1.9476952617563905, 1.350926361102302, 0.6101552607328548, 1.0071657346146514, 1.0523442410554278, 0.7299086279616289, -0.469948358166996, -0.7757302343271026, -0.8105272217377804, -0.5621837315808655, -0.27941549819892586, 0.8761838369084128, 1.7257069498163795, 1.9723909762528, -0.18448438608910742, 0.5785013297228355, 1.1393998874748343, 1.3022732837912852, 0.08006081979770008, -0.25105263211434686, -0.49446617679927585, -0.5651484600469889, 1.3132325257044286, 2.064175897990257, 2.6307325849429843, 2.962293765065265, 2.581611331941574, 2.9126771133309943, 2.983562122870699, 2.7879344137718736];
    pub const DOT_GENERAL_PERM: [f64; 15] = [-8.45845207958867, -3.200466830344856, 6.139024131746977, 7.649512828460764, -0.5953035490238948, -4.677454710109984, 4.844647869618135, 8.188446156640028, 1.089646054328334, -7.398762761798472, 5.068628108745079, 6.711458276874908, -0.2047302078005187, -6.859829433619194, -4.766694571517958];
    pub const DOT_GENERAL_PERM_GRAD: [f64; 64] = [4.8001080032484555, 3.946677494338917, 2.7788569188634398, 1.3896741943520028, 4.065042766773968, 4.594602080662839, 4.758158026894845, 4.5426818325598886, -2.4939101727992874, -1.3400477592695017, -0.07943790948667027, 1.1874999186240607, 5.299961057254377, 5.299604270803093, 4.877084046406646, 4.066058102909295, 1.9577053205487485, 3.091765527843817, 3.9795374657022893, 4.5503017305146605, -4.189307117814689, -3.5455703376670082, -2.6193954570988445, -1.4845610361195167, 0.43973904989149254, -1.9289856809922872, 2.238653501171506, -2.5209339547507335, 1.9793602475540057, -0.7951471763939324, -0.09974768937718412, 1.661694248930369, -2.0871480607050286, 2.590781645083742, 1.4449528794641107, -2.704370648111645, 2.4815234875925363, -2.4230422222360537, 1.23659284536028, 0.08602004833164299, -1.14525555605613, 2.5159958831650044, -2.474161280851131, 2.6327767061259544, 2.321093371746864, -3.2381822395303494, 2.5027263714672596, -2.108707344437461, 0.3833642871746613, 0.9595033583290666, -2.0884611547713288, 3.145551098424298, -2.6401650424526353, 2.4395936650803494, 2.989897505930617, -3.4827366556119888, 2.3003681623266616, -1.6060079198204757, -0.5041090610291166, 1.7472770909689939, -2.8451107384927705, 3.4941236023027207, -2.570330723886583, 2.0284889876559085];
    pub const TENSORDOT: [f64; 10] = [-0.7782930163049603, -0.16933244821648735, 0.4987808157591365, 0.99265559077592, 1.1397672090540103, 0.7809895400485933, -0.384598736002895, -1.415835608593479, -1.952480369256136, -1.8070675637246962];
    pub const TENSORDOT_GRAD: [f64; 84] = [-0.1959678873731881, 0.8975702201328198, -1.5812076788338134, 2.2331972550921457, -2.840489373106058, 3.390929077004454, -3.8734993123713126, 4.278541432664711, -4.597948517093056, 4.825327630689827, -4.956127778950415, 4.987730996018056, 3.124822506299263, -2.6927540889545645, 2.2067901802111103, -1.676657351006525, 1.1129662135217673, -0.5269990497061946, -0.06951600367237386, 0.6646396937647919, -1.2464606158675497, 1.8033336202689014, -2.3241128899995047, 2.7983750244348764, 0.20085390971912878, -1.0014047622446927, -1.2829765140154163, -0.3849855755497013, 0.8669593256244631, 0.6348187699907949, -1.0635670577388834, -1.7841142374742183, -0.8643550151401121, 0.8500882219364312, 1.0120771601889544, -1.030724075535138, -2.125882349639838, -1.2665141954944281, 0.7572812691590947, 1.2989297118874636, -0.9058095814190662, -2.277751722923816, -1.555539434762665, 0.5968286359816344, 1.4697527409620545, -0.699981815123313, -2.2261563185158386, -1.7056129691107595, 0.38306307825754327, 1.5092871349793873, -0.43162675800428396, -1.9757050002275958, -1.7033291766720828, 0.13507963661078304, 1.4140014042652505, -0.12471576808564606, -1.548769838414832, -1.5488920618234736, -0.12497006667332804, 1.192407139359495, 0.193335709961194, -0.9834876795621211, -1.256097032081834, -0.3738565660937624, 0.864298695982764, 0.4941170848395133, -0.3303534953674996, -0.8510985954368329, -0.589347571903812, 0.4589850241925308, 0.7507604521339252, 0.35229018269260304, -0.3700740560468819, -0.7521939143408141, 0.012671587163884222, 0.9403406241924406, 1.0034648279414387, 0.14400809659623015, -0.8478490146321888, -0.43477376500694226, 1.0459229688624492, 1.5650029486806059, 0.6452264348626893, -0.8677682875538256];
    pub const TENSORDOT_AXES: [f64; 15] = [-8.45845207958867, -3.200466830344856, 6.139024131746977, 7.649512828460764, -0.5953035490238948, -4.677454710109984, 4.844647869618135, 8.188446156640028, 1.089646054328334, -7.398762761798472, 5.068628108745079, 6.711458276874908, -0.2047302078005187, -6.859829433619194, -4.766694571517958];
    pub const TENSORDOT_AXES_GRAD: [f64; 64] = [4.8001080032484555, 3.946677494338917, 2.7788569188634398, 1.3896741943520028, 4.065042766773968, 4.594602080662839, 4.758158026894845, 4.5426818325598886, -2.4939101727992874, -1.3400477592695017, -0.07943790948667027, 1.1874999186240607, 5.299961057254377, 5.299604270803093, 4.877084046406646, 4.066058102909295, 1.9577053205487485, 3.091765527843817, 3.9795374657022893, 4.5503017305146605, -4.189307117814689, -3.5455703376670082, -2.6193954570988445, -1.4845610361195167, 0.43973904989149254, -1.9289856809922872, 2.238653501171506, -2.5209339547507335, 1.9793602475540057, -0.7951471763939324, -0.09974768937718412, 1.661694248930369, -2.0871480607050286, 2.590781645083742, 1.4449528794641107, -2.704370648111645, 2.4815234875925363, -2.4230422222360537, 1.23659284536028, 0.08602004833164299, -1.14525555605613, 2.5159958831650044, -2.474161280851131, 2.6327767061259544, 2.321093371746864, -3.2381822395303494, 2.5027263714672596, -2.108707344437461, 0.3833642871746613, 0.9595033583290666, -2.0884611547713288, 3.145551098424298, -2.6401650424526353, 2.4395936650803494, 2.989897505930617, -3.4827366556119888, 2.3003681623266616, -1.6060079198204757, -0.5041090610291166, 1.7472770909689939, -2.8451107384927705, 3.4941236023027207, -2.570330723886583, 2.0284889876559085];
    pub const OUTER: [f64; 18] = [0.6674530417098831, 1.101745533205923, 1.1511666125351208, 1.275284491046653, 2.1050754192055305, 2.1995029400358383, 1.7691985749158061, 2.920365187450926, 3.051364220575451, 2.1050754192055305, 3.4747874310824907, 3.6306562230202477, 2.252912145741044, 3.718817262285334, 3.885632518068942, 2.1995029400358383, 3.6306562230202477, 3.7935168326682946];
    pub const OUTER_GRAD: [f64; 9] = [1.3259234596669416, -1.7839389351558732, 2.206248860728464, -2.5844007003530485, 2.910825742388445, -3.178990587398914, -0.5172671585409766, -0.8566820813471752, -0.4084674493546152];
    pub const INNER: [f64; 8] = [5.8238926814908645, -0.2693712087523514, -5.701489275733779, 2.860151821386123, 9.617409514159158, 1.3575084025471646, -10.234267019403525, 3.2929854063665482];
    pub const INNER_GRAD: [f64; 18] = [3.1378390690554174, 2.2288273802288874, 0.5412221637220563, -2.4499694440694646, -2.5816138295642306, -1.8114262308959839, -0.627402392553379, -0.17472752288427773, 0.2935552360216191, 0.8481089863047243, 1.1760584765102902, 1.3989541656067745, 1.5438728744092451, 1.4455817362728398, 1.21816108694074, 0.8202071617164517, 0.3860438143478789, -0.0826036772209317];
    pub const DOT_ND: [f64; 60] = [0.0597576358601269, -2.473083754120948, 4.455353496609074, 3.490066430955807, 0.7199201677732269, 3.08383828381049, -4.329368930933656, -2.9504010011056794, -1.4775509285552604, -3.6001524604814312, 4.1788240562214725, 2.1305689082961767, 2.691551792611586, 4.456569881481351, -3.7078079647652045, -1.3506782397832298, -3.3404106480228704, -4.692935827350981, 3.1232428928206026, 0.5294240113036985, 2.968700966870908, 4.0171400848569885, -2.504744169352275, -0.2603211211118921, -3.4070261040593155, -4.062695751787205, 1.9085215280385812, -0.45064237549838393, 3.741013491210667, 3.9838342522855137, -2.027360424085329, 0.7807148128378482, -4.506778738101649, -4.645228635259262, 1.2386833077445176, -1.593620379695835, 4.72354579856377, 4.3663483088357244, -0.4120723965365251, 2.3577224564271755, -4.4379605084437825, -3.4513439519237923, -0.7613882775711847, -3.1061481134946862, 4.304719107863401, 2.907774347237513, 1.5147053694320056, 3.615002712403853, -4.0396487477922625, -2.275156222305159, -1.188898384506362, -3.281957301529354, 3.954988845010533, 2.3941549243034794, 1.8810133914119052, 3.700929545675554, -3.6258153258414842, -1.7464997782482339, -2.5155237017124943, -4.0065634560234304];
    pub const DOT_ND_GRAD: [f64; 64] = [3.0438677087831403, -1.4394181678447806, -4.087036378889462, -1.5225204815929487, 0.29515792932588414, 4.153873984828568, 2.715218969717219, -2.186112687270165, -3.539184938940158, -5.531376624237227, -0.4694894865065724, 5.191130312075369, 5.644100707475855, 5.1285672991643825, -1.9273484470604436, -6.525346609906237, -5.932423482826347, -3.075092987125475, 3.7038559035828373, 5.759334803380376, 4.311354578252459, 0.03187865035491233, -4.288251625935748, -3.1396411099649653, 0.3211071818514524, 0.454878526638824, 0.9733485032838189, 0.8580344248776568, 1.538643501794201, 1.1845446633842336, 1.9664960587561824, 1.4052430549822768, 0.17043665181426493, -0.2707038946794386, -0.04615254673253656, -0.9079070797202101, -0.25861907573359977, -1.4640096293049352, -0.4479839329319559, -1.8893365588923046, -0.4629605288198382, -0.22957338781514564, -0.9349360306411402, -0.1023891066690178, -1.3233964813196342, 0.033941288435373466, -1.5936418657290208, 0.16723980932951593, 0.21488246721487095, 0.4617763728688048, 0.8242938897830419, 0.9931248853946092, 1.3600735941311701, 1.4357605096835053, 1.7743619749563915, 1.7501439236978535, 0.2841152108980113, -0.15476016570798823, 0.24888144140443652, -0.7241824520374025, 0.19141583398165674, -1.228915676723581, 0.11685162019373613, -1.6238735240276463];
    pub const DOT_VEC: [f64; 6] = [8.342125023112505, 11.07110798853389, -0.3187213625246983, -11.302090302990283, -7.872078763643593, 5.597072735275477];
    pub const DOT_VEC_GRAD: [f64; 28] = [1.1292849467900707, 1.8640781719344526, 1.9476952617563905, 1.350926361102302, 0.6101552607328548, 1.0071657346146514, 1.0523442410554278, 0.7299086279616289, -0.469948358166996, -0.7757302343271026, -0.8105272217377804, -0.5621837315808655, -1.1179836238460032, -1.8454234032917831, -1.9282036948030672, -1.3374069609510226, -0.7381499016066332, -1.2184428058760581, -1.2730985832333475, -0.883024398191012, 0.3203354360171946, 0.5287684881252225, 0.5524874945661883, 0.38320672399016253, 3.8948438576460025, 4.976853011321252, 5.614294707813684, 5.750228178837139];
    pub const VDOT: [f64; 1] = [7.181401084038028];
    pub const VDOT_GRAD: [f64; 12] = [1.1292849467900707, 1.8640781719344526, 1.9476952617563905, 1.350926361102302, 0.2822400161197344, -0.8850408865897041, 0.5910404133226791, 1.1292849467900707, 1.5666538192549666, 1.8640781719344526, 1.994989973208109, 1.9476952617563905];
    pub const KRON: [f64; 24] = [0.6674530417098831, 1.101745533205923, 1.275284491046653, 2.1050754192055305, 1.7691985749158061, 2.920365187450926, 1.1511666125351208, 0.7984520748344074, 2.1995029400358383, 1.525580803814717, 3.051364220575451, 2.1164339431531354, 2.1050754192055305, 3.4747874310824907, 2.252912145741044, 3.718817262285334, 2.1995029400358383, 3.6306562230202477, 3.6306562230202477, 2.518232341621641, 3.885632518068942, 2.695084544941609, 3.7935168326682946, 2.631192872500756];
    pub const KRON_GRAD: [f64; 10] = [5.025036228279738, -3.829631377071264, -1.8376582628599714, 5.266266166336827, -1.2068247718368204, -4.261833544203588, -0.9223709280411712, -0.7141950405917541, -0.8139635500568857, -0.8638934865817037];
    pub const KRON_RANKS: [f64; 12] = [0.6674530417098831, 1.101745533205923, 1.275284491046653, 2.1050754192055305, 1.7691985749158061, 2.920365187450926, 1.1511666125351208, 0.7984520748344074, 2.1995029400358383, 1.525580803814717, 3.051364220575451, 2.1164339431531354];
    pub const KRON_RANKS_GRAD: [f64; 7] = [5.025036228279738, -3.829631377071264, -1.8376582628599714, -0.9029412199019399, -0.35424267943232735, -0.9113461705112551, -0.5764054526434456];
    pub const CROSS3: [f64; 12] = [-0.7208622474150879, 0.6180319623806854, -0.17353895784073006, 0.25497629504869446, -1.4311532829844094, 1.2218752853414465, 1.0378538607650691, -2.397270256033477, 1.6925986725443414, 1.0353043158708282, -1.549180892593945, 0.8823971289290666];
    pub const CROSS3_GRAD: [f64; 15] = [-1.8280744753825304, 2.4176436199233864, -1.253922911201598, 1.8018670713585698, -2.248539130820262, 1.10727350168515, -1.7395952856502768, 2.0344301157257068, -0.9384620055040004, 1.6425054884719956, -1.7796019680325894, 0.7508671859019826, 1.062387251357033, -1.2326885685961384, 0.5732038397509084];
    pub const CROSS2: [f64; 4] = [-0.17353895784073006, -1.5142222798671123, -2.3153652367001287, -1.0847251109816027];
    pub const CROSS2_GRAD: [f64; 16] = [1.8640781719344526, -1.1292849467900707, 0.7299086279616289, -1.0523442410554278, 0.3683069651691836, 0.11745328985524196, 1.9723909762528, -1.7257069498163795, -1.1292849467900707, 0.5910404133226791, -1.0071657346146514, 0.8464666710405864, 0.8105272217377804, -0.8302087662938229, 1.3374069609510226, -1.7091415919552155];
    pub const CROSS_AXIS0: [f64; 6] = [-3.443460118868377, -4.280978270462139, 2.0860968899574366, 4.630119573539739, -0.6180319623806855, -1.9492066272677737];
    pub const CROSS_AXIS0_GRAD: [f64; 12] = [-1.1556452933781056, -0.4929771129182503, 1.0203899177263676, -1.0069581199372224, -2.4176436199233864, -2.575332031253412, 0.1938245087638002, -2.45697218292829, -2.3813197690490706, -0.7320088050382332, 1.8126134175307151, 2.125149358460655];
    pub const HYPOT: [f64; 5] = [2.0, 5.0, 5.0, f64::INFINITY, 0.7071067811865476];
    pub const HYPOT_GRAD: [f64; 10] = [0.0, 0.3241813835208839, 0.3329174692377139, f64::NAN, -0.4621958367919887, 1.0, 0.43224184469451177, -0.24968810192828544, f64::NAN, -0.4621958367919887];
    pub const HYPOT_SPECIAL: [f64; 10] = [0.0, 2.0, 5.0, 5.0, 1.414213562373095e-200, 1.414213562373095e+200, f64::INFINITY, f64::INFINITY, f64::INFINITY, 0.7071067811865476];
    pub const LOGADDEXP: [f64; 7] = [0.6931471805599453, 1.048587351573742, -2.3068528194400546, 800.3132616875182, -799.6867383124818, 2.6931471805599454, 30.0];
    pub const LOGADDEXP_GRAD: [f64; 14] = [0.5, 0.5146779972324905, -0.20807341827357118, -0.7237425074191033, -0.47785177639912974, 0.1418310927316131, 0.960170286650366, 0.5, 0.025624308635649292, -0.20807341827357118, -0.26624998918135817, -0.17579184446449284, 0.1418310927316131, 3.817108712491527e-31];
    pub const LOGADDEXP_INF: [f64; 4] = [f64::NEG_INFINITY, f64::INFINITY, 2.0, f64::INFINITY];
    pub const LOGADDEXP2: [f64; 7] = [1.0, 1.1699250014423124, -2.0, 800.5849625007212, -799.4150374992788, 3.0, 30.0];
    pub const LOGADDEXP2_GRAD: [f64; 14] = [0.5, 0.48026871632723533, -0.2080734182735712, -0.6599949977336149, -0.4357624139090645, 0.14183109273161312, 0.960170286650366, 0.5, 0.06003358954090443, -0.2080734182735712, -0.32999749886680746, -0.21788120695453225, 0.14183109273161312, 8.132958677674694e-22];
    pub const NAN_TO_NUM: [f64; 4] = [-1.0, 9.0, -1.7976931348623157e+308, 2.5];
    pub const NAN_TO_NUM_DEFAULT: [f64; 4] = [0.0, 1.7976931348623157e+308, -1.7976931348623157e+308, 2.5];
    pub const SINC: [f64; 5] = [1.0, 0.6366197723675814, -0.2122065907891938, 0.999998355066745, -3.8981718325193755e-17];
    pub const SINC_GRAD: [f64; 5] = [0.0, -0.6879342619429089, 0.05887273430091791, 0.0032569415527289964, -0.32682181043180597];
    pub const SINC_SECOND_AT_ZERO: [f64; 1] = [-3.2898681336964524];
    pub const HEAVISIDE: [f64; 3] = [0.0, 0.5, 1.0];
    pub const FLOOR_DIVIDE: [f64; 6] = [3.0, -4.0, -4.0, 3.0, 3.0, -1.0];
    pub const FLOOR_DIVIDE_INT: [f64; 4] = [3.0, -4.0, -4.0, 3.0];
    pub const REMAINDER: [f64; 6] = [1.0, 1.0, -1.0, -1.0, 0.5, 2.5];
    pub const REMAINDER_INT: [f64; 4] = [1.0, 1.0, -1.0, -1.0];
    pub const FMOD: [f64; 6] = [1.0, -1.0, 1.0, -1.0, 0.5, -0.5];
    pub const ISCLOSE: [f64; 5] = [1.0, 0.0, 0.0, 1.0, 1.0];
    pub const VAR_DDOF: [f64; 3] = [2.048633003986619, 2.998351152591089, 1.557226613700381];
    pub const VAR_DDOF_GRAD: [f64; 15] = [0.4019128437481887, 0.684130355890171, 0.3600199333998165, -0.37381739057891417, -1.0722457424592622, -0.5676380487384282, -0.3704828336202329, 0.03356379056762989, 0.39941256337094827, 0.505144528420083, -0.40429269990272515, -0.08833572190739433, 0.18361610588120175, 0.24660045396495134, 0.06241186196396641];
    pub const VAR_ALL: [f64; 1] = [2.2466762157091185];
    pub const VAR_ALL_GRAD: [f64; 15] = [0.20655176692742722, 0.28718534182513644, 0.19458236397074946, -0.015085442880316454, -0.2146364005604159, -0.28302557585410515, -0.17876901272167095, 0.034892656627704605, 0.2283551306273216, 0.2842666685628155, 0.1687120817823526, -0.048214767964716826, -0.2349289644969089, -0.278172181658527, -0.1517136641868464];
    pub const STD_DDOF: [f64; 5] = [1.9067446803179637, 1.6825528295133152, 1.5196732140959368, 1.7732900349852614, 1.9019366134816968];
    pub const STD_DDOF_GRAD: [f64; 15] = [0.3227070054349205, 0.3002199595290425, -0.18823773142806216, -0.012796073094627278, 0.22526486585436964, -0.5759558923420495, -0.2234763709589386, -0.03518490353559699, -0.488474150200248, -0.3748428463981852, 0.25324888690712893, -0.07674358857010391, 0.2234226349636592, 0.5012702232948753, 0.14957798054381563];
    pub const QUANTILE_LINEAR: [f64; 18] = [-1.5136049906158564, -1.9923292176716811, -1.958355458302634, 0.17678664273633204, -0.963406938655516, -1.53915151773722, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.3928192714506733, 0.9102170686996467, -0.7108996992234163, 1.4347121817990456, 1.5873357276983062, -0.3486535624459628, 1.9991472060830102, 1.9787164932467636, 1.1698343857835234];
    pub const QUANTILE_LINEAR_GRAD: [f64; 15] = [0.38828882779015367, -0.7596879128588213, 0.3066066563879385, -0.7919939972803564, 1.0, 0.5403023058681398, -0.5229148966908895, 0.20363776563235603, 0.48791101691197, -0.9576594803233847, -0.27516333805159693, 0.13895006720185898, 0.226929748370581, -0.4161468365471424, -0.08655474772194292];
    pub const QUANTILE_LOWER: [f64; 18] = [-1.5136049906158564, -1.9923292176716811, -1.958355458302634, -0.11674828685516017, -1.2625332757446417, -1.6556529381713074, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.4347121817990456, 1.5873357276983062, -0.3486535624459628, 1.9991472060830102, 1.9787164932467636, 1.1698343857835234];
    pub const QUANTILE_LOWER_GRAD: [f64; 15] = [0.8438539587324921, -0.7596879128588213, 0.04904002476568903, -0.9899924966004454, 1.0, 0.5403023058681398, -0.6536436208636119, -0.08516927473314784, 0.9074467814501962, -0.9576594803233847, -0.27516333805159693, 0.1367372182078336, 0.28366218546322625, -0.4161468365471424, -0.14107433582056275];
    pub const QUANTILE_HIGHER: [f64; 18] = [-1.5136049906158564, -1.9923292176716811, -1.958355458302634, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.4347121817990456, 1.5873357276983062, -0.3486535624459628, 1.4347121817990456, 1.5873357276983062, -0.3486535624459628, 1.9991472060830102, 1.9787164932467636, 1.1698343857835234];
    pub const QUANTILE_HIGHER_GRAD: [f64; 15] = [-0.0672763031521848, -0.7596879128588213, -0.029822209950079448, 0.0, 1.0, 0.5403023058681398, 0.0, 0.10025863347969266, 0.06837525237374376, -0.9576594803233847, -0.27516333805159693, 0.1411629161958844, 0.0, -0.4161468365471424, 0.1381621516546127];
    pub const QUANTILE_MIDPOINT: [f64; 18] = [-1.5136049906158564, -1.9923292176716811, -1.958355458302634, 0.6170890371235705, -0.5147174330218272, -1.3643993870860887, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.3928192714506733, 0.9102170686996467, -0.7108996992234163, 1.4347121817990456, 1.5873357276983062, -0.3486535624459628, 1.9991472060830102, 1.9787164932467636, 1.1698343857835234];
    pub const QUANTILE_MIDPOINT_GRAD: [f64; 15] = [0.38828882779015367, -0.7596879128588213, 0.00960890740780479, -0.4949962483002227, 1.0, 0.5403023058681398, -0.32682181043180597, 0.0075446793732724116, 0.48791101691197, -0.9576594803233847, -0.27516333805159693, 0.13895006720185898, 0.14183109273161312, -0.4161468365471424, -0.0014560920829750218];
    pub const QUANTILE_NEAREST: [f64; 18] = [-1.5136049906158564, -1.9923292176716811, -1.958355458302634, -0.11674828685516017, -1.2625332757446417, -1.6556529381713074, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.3509263611023012, 0.23309840970098727, -1.0731458360008699, 1.4347121817990456, 1.5873357276983062, -0.3486535624459628, 1.9991472060830102, 1.9787164932467636, 1.1698343857835234];
    pub const QUANTILE_NEAREST_GRAD: [f64; 15] = [0.8438539587324921, -0.7596879128588213, 0.04904002476568903, -0.9899924966004454, 1.0, 0.5403023058681398, -0.6536436208636119, -0.08516927473314784, 0.9074467814501962, -0.9576594803233847, -0.27516333805159693, 0.1367372182078336, 0.28366218546322625, -0.4161468365471424, -0.14107433582056275];
    pub const QUANTILE_KEEPDIMS: [f64; 5] = [0.5374016650924827, -0.5314295051056985, -0.1446518598734716, -0.48506972114465485, -1.161237666923867];
    pub const QUANTILE_KEEPDIMS_GRAD: [f64; 15] = [0.0, 0.0, 0.0, -0.7919939972803564, -0.13072872417272235, 0.19999999999999996, 0.10806046117362793, -0.3329174692377139, 0.0, 0.0, 0.8, 0.4322418446945118, -0.08322936730942847, -0.19799849932008903, -0.5229148966908895];
    pub const MEDIAN_ALL: [f64; 1] = [-0.11674828685516017];
    pub const MEDIAN_ALL_GRAD: [f64; 15] = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    pub const MEDIAN_AXIS: [f64; 3] = [1.3928192714506733, -1.388069133180249, 1.3785850567409148];
    pub const MEDIAN_AXIS_GRAD: [f64; 12] = [0.5, 0.0, 0.5, 0.0, 0.2701511529340699, 0.0, 0.2701511529340699, 0.0, -0.2080734182735712, 0.0, -0.2080734182735712, 0.0];
    pub const PERCENTILE: [f64; 3] = [1.7733731963694246, 1.8221641870273806, 0.5624392064917291];
    pub const PERCENTILE_GRAD: [f64; 15] = [0.3999999999999999, 0.6000000000000001, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.21612092234725586, 0.3241813835208839, -0.24968810192828547, -0.16645873461885694, 0.0, 0.0, 0.0];
    pub const MEDIAN_NAN: [f64; 2] = [f64::NAN, 2.0];
    pub const NANSUM: [f64; 2] = [4.0, 7.0];
    pub const NANMEAN: [f64; 1] = [2.75];
    pub const AVERAGE: [f64; 3] = [0.5092829741180117, 0.2804957703473863, -0.8759715160515995];
    pub const AVERAGE_GRAD: [f64; 20] = [0.16634772677972326, 0.18502744500122864, 0.2021868387424046, 0.21714181712438876, 0.22929617235225472, 0.08987806035500778, 0.09997075518305425, 0.10924201518871093, 0.11732222449270516, 0.12388925064866163, -0.0692250802661902, -0.07699858591166167, -0.08413941333411888, -0.0903628802784125, -0.09542087675675914, -0.056501618867159, 0.021383632906779595, 0.05584341429260828, 0.025974884306956603, -0.05010410755755312];
    pub const AVERAGE_ALL: [f64; 1] = [-0.007868876441596015];
    pub const AVERAGE_ALL_GRAD: [f64; 30] = [0.05228712643999266, 0.05815861508260355, 0.06355222885507532, 0.06825294139683202, 0.07207335013279005, 0.07486114742264366, 0.0765051925858495, 0.07693994272983501, 0.07614806573829298, 0.07416113124796381, 0.07105835206684252, 0.06696342620949455, 0.06203960544756658, 0.05648318697682169, 0.050515687667396086, 0.022202207582349944, 0.030889208915352934, 0.020912692395012474, -0.0016757209292585745, -0.023174202641971217, -0.030542062217748647, -0.01931005490497978, 0.0037086343792826233, 0.024551177595960396, 0.030574767709533317, 0.01812557578582253, -0.005244885406150093, -0.02536040770840901, -0.0300191852164491, -0.016395266008604574];
    pub const COV: [f64; 9] = [2.048633003986619, -2.1478020009989343, 0.7591611496754885, -2.1478020009989343, 2.998351152591089, -1.7719042070015116, 0.7591611496754885, -1.7719042070015116, 1.557226613700381];
    pub const COV_GRAD: [f64; 15] = [0.9023969662876209, 0.8960456962154024, 0.2260329718355015, -0.7012204789391804, -1.3232551553993448, 1.100350023611291, 0.4044992948539247, -0.3504551402440694, -0.7065680518550476, -0.4478261263660988, -0.577059579536745, -0.20052050390189685, 0.19435545061380524, 0.3680418287208692, 0.21518280410396734];
    pub const COV_COLS: [f64; 9] = [2.058774704755753, 1.6626069142238458, 0.25792407953772806, 1.6626069142238458, 2.30892328473054, 1.55467777345548, 0.25792407953772806, 1.55467777345548, 1.9083847917409635];
    pub const COV_COLS_GRAD: [f64; 15] = [0.5198914049883072, -0.34848875621015396, 0.48145303468021555, -0.1485246283159017, 0.015713160276998716, -0.22171697382341346, -0.3744493661611944, 0.404900810999807, -0.19225683558819645, 0.627157630887859, -0.5332701611058662, 0.4674657313281818, -0.6240750413990701, 0.4611449460392144, -0.5349449565967874];
    pub const COV_VEC: [f64; 1] = [2.785783181780811];
    pub const COV_VEC_GRAD: [f64; 6] = [0.4964113224635076, 0.7221853321770935, 0.46289699418481, -0.12417286499817465, -0.6829155465024531, -0.8744052373247831];
    pub const CORRCOEF: [f64; 9] = [1.0, -0.8666044466951325, 0.42503626211108725, -0.8666044466951326, 0.9999999999999998, -0.8200174298032066, 0.4250362621110872, -0.8200174298032066, 1.0];
    pub const CORRCOEF_GRAD: [f64; 15] = [0.18235697918352112, -0.00914411312848975, -0.12739207944668243, -0.10065929013575686, 0.05483850352740791, 0.11599994633914858, -0.0638286594623802, -0.13381798341507603, -0.05151344077457856, 0.1331601373128862, 0.002248758911196795, -0.01820886655301724, -0.01803564235088851, 0.0026633560410141005, 0.031332393951694855];
    pub const COUNT_NONZERO: [f64; 2] = [2.0, 1.0];
    pub const BINCOUNT: [f64; 5] = [2.0, 1.0, 0.0, 1.0, 1.0];
    pub const BINCOUNT_WEIGHTS: [f64; 4] = [1.1292849467900707, 0.2822400161197344, 3.811773433690843, 0.0];
    pub const BINCOUNT_WEIGHTS_GRAD: [f64; 5] = [1.0, -0.4161468365471424, -0.4161468365471424, 0.0, 0.5403023058681398];
    pub const SEARCHSORTED_LEFT: [f64; 8] = [0.0, 0.0, 1.0, 3.0, 4.0, 7.0, 8.0, 8.0];
    pub const SEARCHSORTED_RIGHT: [f64; 8] = [0.0, 1.0, 3.0, 3.0, 7.0, 8.0, 8.0, 9.0];
    pub const SEARCHSORTED_2D: [f64; 4] = [3.0, 0.0, 9.0, 10.0];
    pub const INTERP: [f64; 7] = [1.0, 0.5, -1.0, 0.19999999999999973, 1.5, 0.050000000000000044, 0.0];
    pub const INTERP_GRAD: [f64; 17] = [-0.0, -1.0806046117362795, -2.4968810192828546, -5.939954979602673, 0.6536436208636119, -0.14183109273161312, -0.0, 0.8104534588022096, 6.331005159978528, 1.9402195779319942, -0.20369809768137598, 0.1276479834584518, 1.4052267294011047, -0.8750667580403747, -0.8317594125492527, -0.18951498840821465, 1.2154662535672696];
    pub const INTERP_LR: [f64; 7] = [-7.0, 0.5, -1.0, 0.19999999999999973, 1.5, 0.050000000000000044, 7.0];
    pub const INTERP_LR_GRAD: [f64; 17] = [-0.0, -1.0806046117362795, -2.4968810192828546, -5.939954979602673, 0.6536436208636119, -0.14183109273161312, -0.0, 0.8104534588022096, 6.331005159978528, 1.9402195779319942, -0.20369809768137598, 0.1276479834584518, 0.4052267294011048, -0.8750667580403747, -0.8317594125492527, -0.18951498840821465, 0.2552959669169036];
    pub const POLYVAL: [f64; 6] = [4.3231566671747, 10.542349097168902, 15.897570303312206, 12.631241299802342, 5.595462337178932, 3.10642673711198];
    pub const POLYVAL_GRAD: [f64; 10] = [-6.91619408957608, -3.3946204457461047, -1.464769700449309, -0.23581846267983386, 4.098670175165512, 7.633325114094219, -8.48520487223983, -16.539343049832162, -4.380827527663449, 0.11728765555778511];
    pub const CONVOLVE_FULL: [f64; 9] = [1.5021877022052883, 4.5041371640918815, 7.222904078012309, 8.173252166049044, 7.122503071702408, 4.327916819424251, 0.47370558837512794, -1.1251902523764785, -0.5996707753521039];
    pub const CONVOLVE_FULL_GRAD: [f64; 10] = [2.263292489983985, -0.8102662999561708, -3.1388699904511146, -2.5816110873659146, 0.34916914373399593, 2.9589248743608785, 2.8482587212815607, -2.1383929650150746, -3.2644057804713156, -1.3891389759407973];
    pub const CONVOLVE_SHORT_FULL: [f64; 9] = [0.7615173762694906, 2.6198919047490805, 5.264622533769993, 7.835063180670366, 6.720551187462174, 2.4452589592815053, -1.8187383692035943, -4.038689740877556, -3.2493707450861584];
    pub const CONVOLVE_SHORT_FULL_GRAD: [f64; 10] = [0.9357099540800424, -4.143836490866873, -5.4135587763918664, -1.7060800888075878, -1.2961857600837021, -2.9200261916963997, -1.8592080090541523, 0.9109574429354562, 2.843592822985695, 2.161842075483071];
    pub const CORRELATE_FULL: [f64; 10] = [-0.8486224074800213, -0.6698851357889712, 1.5404130800129134, 4.875752152248603, 7.017337049812743, 7.4408330993971905, 6.042553698122594, 1.8252441072786951, -0.9242652617488057, -1.099111766781055];
    pub const CORRELATE_FULL_GRAD: [f64; 11] = [-2.7847149646163576, -3.7861321719991, -1.3065969210889663, 2.3742175133899392, 3.8721873153231767, 1.8100859570550079, -1.916200082490458, 1.763295796727077, -1.3891389759407973, -3.2644057804713156, -2.1383929650150746];
    pub const CONVOLVE_SAME: [f64; 7] = [4.5041371640918815, 7.222904078012309, 8.173252166049044, 7.122503071702408, 4.327916819424251, 0.47370558837512794, -1.1251902523764785];
    pub const CONVOLVE_SAME_GRAD: [f64; 10] = [2.4095239313003654, 2.263292489983985, -0.8102662999561708, -3.1388699904511146, -2.5816110873659146, 0.34916914373399593, 2.314519564022367, 0.4355790327717575, -2.138392965015075, -2.7354932481892655];
    pub const CONVOLVE_SHORT_SAME: [f64; 6] = [2.6198919047490805, 5.264622533769993, 7.835063180670366, 6.720551187462174, 2.4452589592815053, -1.8187383692035943];
    pub const CONVOLVE_SHORT_SAME_GRAD: [f64; 10] = [4.458824378702181, 0.9357099540800423, -2.470114172395136, -3.4257696325188793, 1.2000213835035545, -1.2961857600837021, -2.9200261916963997, -1.8592080090541523, -0.8788750297495372, -0.06599435982376708];
    pub const CORRELATE_SAME: [f64; 7] = [-0.6698851357889712, 1.5404130800129134, 4.875752152248603, 7.017337049812743, 7.4408330993971905, 6.042553698122594, 1.8252441072786951];
    pub const CORRELATE_SAME_GRAD: [f64; 11] = [1.2551459706756343, -2.7847149646163576, -3.7861321719991, -1.3065969210889663, 2.3742175133899392, 2.6910834692113093, 0.5696622921110838, -1.7039983033360246, -2.7354932481892655, -2.138392965015075, 0.4355790327717575];
    pub const CONVOLVE_VALID: [f64; 5] = [7.222904078012309, 8.173252166049044, 7.122503071702408, 4.327916819424251, 0.47370558837512794];
    pub const CONVOLVE_VALID_GRAD: [f64; 10] = [0.8547597604676596, 2.4095239313003654, 2.263292489983985, -0.8102662999561708, -3.1388699904511146, -2.8240741090661947, -1.024033275057623, 2.6586353269865888, 0.6345869067523217, -1.5448305202470092];
    pub const CONVOLVE_SHORT_VALID: [f64; 3] = [7.835063180670366, 6.720551187462174, 2.4452589592815053];
    pub const CONVOLVE_SHORT_VALID_GRAD: [f64; 10] = [1.016325327752763, 2.380363134266887, 2.6248789645353283, 1.634873202917601, 1.8640781719344526, 2.573819553869618, 1.2000213835035545, 0.5492376432080809, -0.15060785998749407, -0.24595959827574843];
    pub const CORRELATE_VALID: [f64; 4] = [4.875752152248603, 7.017337049812743, 7.4408330993971905, 6.042553698122594];
    pub const CORRELATE_VALID_GRAD: [f64; 11] = [1.5666538192549668, 2.794161932796977, 1.2551459706756343, -2.7847149646163576, -2.762098896941477, -0.4778987840897931, 0.8761838369084136, -0.7624555217307701, 0.8190712928414291, 2.200060888816053, 3.042398849402575];
    pub const TRAPEZOID_DX: [f64; 3] = [1.5969394379608726, 0.27554724972109645, -1.9571588420142887];
    pub const TRAPEZOID_DX_GRAD: [f64; 15] = [0.25, 0.5, 0.5, 0.5, 0.25, 0.13507557646703494, 0.2701511529340699, 0.2701511529340699, 0.2701511529340699, 0.13507557646703494, -0.1040367091367856, -0.2080734182735712, -0.2080734182735712, -0.2080734182735712, -0.1040367091367856];
    pub const TRAPEZOID_X: [f64; 3] = [4.0871386160437435, 2.6096173407220533, -7.498658071359811];
    pub const TRAPEZOID_X_GRAD: [f64; 20] = [0.5646424733950353, 1.3479693830225186, 1.7153659955947098, 1.929534072571281, 0.9974949866040546, 0.3050776303664273, 0.7283109658867205, 0.926816202827619, 1.0425317086614057, 0.5389488413540798, -0.23497417908349794, -0.5609531945072244, -0.713844132587278, -0.8029695003104629, -0.4151043831469115, -0.6667589377701949, -1.1472177347416128, -0.046883826394441774, 1.0818891819238612, 0.7789713169823883];
    pub const NONZERO: [f64; 8] = [0.0, 1.0, 1.0, -1.0, 1.0, 0.0, 1.0, -1.0];
    pub const NONZERO_SHORT: [f64; 4] = [0.0, 1.0, 1.0, 0.0];
    pub const FLATNONZERO: [f64; 5] = [1.0, 3.0, 4.0, 9.0, 9.0];
    pub const ARGWHERE: [f64; 8] = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    pub const UNIQUE: [f64; 6] = [1.0, 2.0, 3.0, f64::NAN, 1.0, 1.0];
    pub const UNIQUE_FILL: [f64; 3] = [2.0, 5.0, -1.0];
    pub const UNIQUE_GRAD: [f64; 4] = [-1.2, 0.3, 2.5, 0.0];
    pub const UNIQUE_GRAD_GRAD: [f64; 4] = [0.5403023058681398, 1.0, 0.0, -0.4161468365471424];
    pub const UNIQUE_INT: [f64; 4] = [-2.0, 4.0, 7.0, -2.0];
    pub const HISTOGRAM: [f64; 11] = [10.0, 4.0, 6.0, 5.0, 15.0, -1.9904796515383254, -1.1935740777278603, -0.39666850391739494, 0.4002370698930704, 1.1971426437035355, 1.9940482175140004];
    pub const HISTOGRAM_RANGE: [f64; 9] = [1.5816404033309563, 2.4565404227061887, 3.0579819800102364, 3.0666873986063754, -1.0, -0.375, 0.25, 0.875, 1.5];
    pub const HISTOGRAM_RANGE_GRAD: [f64; 80] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.4161468365471424, -0.9899924966004454, 0.0, 0.0, 0.0, 0.0, -0.9899924966004454, -0.4161468365471424, 0.5403023058681398, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, 0.0, 0.0, 0.0, 0.0, -0.9899924966004454, -0.4161468365471424, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454, 0.0, 0.0, 0.0, 0.0];
    pub const HISTOGRAM_CONSTANT: [f64; 5] = [0.0, 3.0, 0.5, 1.0, 1.5];
    pub const DIGITIZE: [f64; 8] = [0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 4.0];
    pub const DIGITIZE_RIGHT: [f64; 8] = [0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0];
    pub const DIGITIZE_DECREASING: [f64; 8] = [4.0, 3.0, 3.0, 2.0, 1.0, 1.0, 0.0, 0.0];
    pub const SELECT: [f64; 12] = [0.9604002979011071, 0.9210208271517645, 0.9879152522299185, 0.6209674105330875, -1.4031329107584793, -3.486303089654351, -3.9298104504973304, -2.5250665514892865, 7.0, 0.9672018117740996, 0.9188894374298964, 0.990437792150507];
    pub const SELECT_GRAD: [f64; 12] = [0.27862388230635354, -0.2104549515478922, 0.06450068481928695, -0.7759921375690686, -1.3072872417272239, 0.5673243709264525, 1.920340573300732, 1.5078045086866092, 0.0, -0.23143543594590268, 0.3310264282404296, -0.0006105695876391879];
    pub const CLIP: [f64; 12] = [1.0, 1.0, 1.0, 0.6699763003118102, -0.5, -0.5, -0.5, -0.5, 0.033627800968699426, 1.0, 1.0, 1.0];
    pub const CLIP_GRAD: [f64; 12] = [0.0, 0.0, -0.0, -0.9899924966004454, -0.0, 0.0, 0.0, 0.0, -0.14550003380861354, -0.0, -0.0, 0.0];
    pub const CLIP_TIES: [f64; 3] = [-0.5, 1.0, 0.0];
    pub const CLIP_TIES_GRAD: [f64; 3] = [0.5, 0.2701511529340699, -0.4161468365471424];
    pub const ALLCLOSE: [f64; 4] = [1.0, 1.0, 1.0, 0.0];
    pub const TAKE_ALONG_AXIS: [f64; 6] = [1.288435374475382, 0.6699763003118102, -1.9649052252486652, -1.7431515448271755, 1.7091978161765629, 1.7091978161765629];
    pub const TAKE_ALONG_AXIS_GRAD: [f64; 12] = [1.0, 0.0, 0.0, 0.5403023058681398, 0.0, -0.9899924966004454, -0.4161468365471424, 0.0, 0.0, 0.0, 0.0, -0.3699814354003857];
    pub const TAKE_ALONG_AXIS_BCAST: [f64; 8] = [0.033627800968699426, 1.3139731974375781, 1.9763364677540005, 1.7091978161765629, 1.288435374475382, 1.9708994599769203, 1.7264187332977479, 0.6699763003118102];
    pub const TAKE_ALONG_AXIS_BCAST_GRAD: [f64; 12] = [-0.6536436208636119, 0.28366218546322625, 0.960170286650366, 0.7539022543433046, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5403023058681398, -0.4161468365471424, -0.9899924966004454];
}
use recorded::*;
// --- end of recorded block

// ------------------------------------------- edge cases an outside user found

/// Cases a differential run against JAX 0.10.2 found wrong (values from
/// JAX; NumPy agrees).
#[test]
fn edge_cases_as_in_jax() {
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let run1 = |f: fn(&Var) -> Var, x: Tensor| f.eval(&x).unwrap().to_f64_vec();
    let run2 = |f: fn(&Var, &Var) -> Var, a: Tensor, b: Tensor| f.eval((&a, &b)).unwrap();
    // Infinities of opposite signs are not close; heaviside keeps NaN.
    let c = run2(|a, b| jnp::isclose(a, b, 1e-5, 1e-8), v(&[inf, inf]), v(&[-inf, inf]));
    assert_eq!(c.to_f64_vec(), [0.0, 1.0]);
    let h = run2(jnp::heaviside, v(&[nan, 0.0]), v(&[0.5, 0.5])).to_f64_vec();
    assert!(h[0].is_nan() && h[1] == 0.5);
    // Floor division of and by infinities (JAX's `_float_divmod`).
    let q = run2(jnp::floor_divide, v(&[inf, -inf, 5.0, -7.5]), v(&[2.0, 2.0, -inf, 2.0]));
    let q = q.to_f64_vec();
    assert!(q[0].is_nan() && q[1].is_nan());
    assert_eq!(q[2..], [-1.0, -4.0]);
    // ddof >= n: NaN.
    let x5 = v(&[0.0, 1.0, 2.0, 3.0, 4.0]);
    assert!(run1(|x| jnp::var(x, None, 5.0, false), x5.clone())[0].is_nan());
    assert!(run1(|x| jnp::var(x, None, 6.0, false), x5)[0].is_nan());
    // Histogram edges are JAX's linspace: 0.6 falls in the third bin, as
    // the edge 0.6000000000000001 says; an empty range is widened; no
    // overflow across the whole f64 range.
    let hist = |x: Tensor, bins: usize, range: Option<(f64, f64)>| {
        let f = move |x: &Var| {
            let (c, e) = jnp::histogram(x, bins, range, None);
            vec![c, e]
        };
        let out = f.eval(&x).unwrap();
        (out[0].to_f64_vec(), out[1].to_f64_vec())
    };
    let (c, e) = hist(v(&[0.0, 0.2, 0.6, 0.6000000000000001, 0.7, 1.0]), 5, Some((0.0, 1.0)));
    assert_eq!(c, [1.0, 1.0, 1.0, 2.0, 1.0]);
    assert_eq!(e, [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
    assert_eq!(
        hist(v(&[2.0, 2.0, 3.0]), 2, Some((2.0, 2.0))),
        (vec![0.0, 2.0], vec![1.5, 2.0, 2.5])
    );
    let (c, e) = hist(v(&[-1e308, 1e308]), 4, None);
    assert_eq!((c, e), (vec![1.0, 0.0, 0.0, 1.0], vec![-1e308, -5e307, 0.0, 5e307, 1e308]));
    // The edges differentiate through the range, as JAX's.
    let g = grad(|x: &Var| {
        let (_, e) = jnp::histogram(x, 3, None, None);
        (&e * &iota(&[4], 0)).sum_all()
    });
    let g = g.eval(v(&[0.5, -1.0, 2.0])).unwrap().to_f64_vec();
    close("histogram edges' gradient", &g, &[0.0, 1.3333333333333335, 4.666666666666666]);
    // One knot: fp[0] everywhere.
    let y = (|x: &Var, xp: &Var, fp: &Var| jnp::interp(x, xp, fp, None, None))
        .eval((&v(&[-1.0, 0.0, 3.0]), &v(&[1.0]), &v(&[5.0])))
        .unwrap();
    assert_eq!(y.to_f64_vec(), [5.0; 3]);
    // unique of bools; bincount of length 0.
    let b = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let u = (|x: &Var| jnp::unique(x, 3, None)).eval(&b).unwrap();
    assert_eq!(u.to_vec::<bool>().unwrap(), [false, true, false]);
    let e = (|x: &Var| jnp::bincount(x, None, 0)).eval(iv(&[1, 2])).unwrap();
    assert_eq!(e.shape(), &[0]);
    // A static size of 0 selects nothing, as in JAX (each result is empty),
    // and the gradient through it is zero.
    let x = v(&[0.3, -1.2, 0.0, 2.0]);
    let u = (|x: &Var| jnp::unique(x, 0, None)).eval(&x).unwrap();
    assert_eq!((u.shape(), u.dtype()), (&[0][..], DType::F64));
    let nz = (|x: &Var| jnp::nonzero(x, 0, 0)).eval(&x).unwrap();
    assert!(nz.len() == 1 && nz[0].shape() == [0] && nz[0].dtype() == DType::I64);
    let m = Tensor::from_vec(vec![1.0, 0.0, 2.0, 3.0], &[2, 2]).unwrap();
    let f = (|x: &Var| jnp::flatnonzero(x, 0, 0)).eval(&m).unwrap();
    assert_eq!(f.shape(), &[0]);
    let a = (|x: &Var| jnp::argwhere(x, 0, 0)).eval(&m).unwrap();
    assert_eq!(a.shape(), &[0, 2]);
    let g = grad(|x: &Var| jnp::unique(x, 0, None).sum_all()).eval(&x).unwrap();
    assert_eq!(g.to_f64_vec(), [0.0; 4]);
    // take_along_axis out of range: JAX's fill values.
    let row = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]).unwrap();
    let idx = Tensor::from_vec(vec![5i64, -4, -3, 2], &[1, 4]).unwrap();
    let t =
        (|x: &Var, i: &Var| jnp::take_along_axis(x, i, 1)).eval((&row, &idx)).unwrap().to_f64_vec();
    assert!(t[0].is_nan() && t[1].is_nan());
    assert_eq!(t[2..], [1.0, 3.0]);
    let irow = Tensor::from_vec(vec![1i64, 2, 3], &[1, 3]).unwrap();
    let idx = Tensor::from_vec(vec![5i64, -1], &[1, 2]).unwrap();
    let t = (|x: &Var, i: &Var| jnp::take_along_axis(x, i, 1)).eval((&irow, &idx)).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), [i64::MIN, 3]);
    // One variable: a 0-d covariance.
    let one = Tensor::from_vec(vec![1.0, 2.0, 4.0, 8.0], &[1, 4]).unwrap();
    let c = (|m: &Var| jnp::cov(m, true, 1.0)).eval(&one).unwrap();
    assert_eq!(c.shape(), &[] as &[usize]);
    close("cov of one row", &c.to_f64_vec(), &[9.583333333333332]);
    // Integer polynomials stay integer; bool + bool is `or`, bool * bool `and`.
    let p = run2(jnp::polyval, iv(&[2, -1, 3]), iv(&[4, 5]));
    assert_eq!(p.to_vec::<i64>().unwrap(), [31, 48]);
    let (t, f) = (
        Tensor::from_vec(vec![true, false], &[2]).unwrap(),
        Tensor::from_vec(vec![true, true], &[2]).unwrap(),
    );
    let s = (|a: &Var, b: &Var| vec![a + b, a * b]).eval((&t, &f)).unwrap();
    assert_eq!(s[0].to_vec::<bool>().unwrap(), [true, true]);
    assert_eq!(s[1].to_vec::<bool>().unwrap(), [true, false]);
    // Float bounds and defaults make integer arrays f64, as JAX's literals.
    let c = (|x: &Var| jnp::clip(x, Some(-1.5), Some(3.5))).eval(iv(&[-4, 0, 9])).unwrap();
    assert_eq!((c.dtype(), c.to_f64_vec()), (DType::F64, vec![-1.5, 0.0, 3.5]));
    let sel = |x: &Var| jnp::select(&[&x.gt(&x.zeros_like())], &[x], 0.5);
    let c = sel.eval(iv(&[-4, 2])).unwrap();
    assert_eq!((c.dtype(), c.to_f64_vec()), (DType::F64, vec![0.5, 2.0]));
    // Weights of another shape are errors.
    let w = (|x: &Var, w: &Var| jnp::average(x, w, None)).eval((&t_(&[3, 4]), &t_(&[4])));
    assert!(w.unwrap_err().to_string().contains("average"));
    let w = (|x: &Var, w: &Var| jnp::bincount(x, Some(w), 3)).eval((&iv(&[0, 1]), &v(&[1.0])));
    assert!(w.unwrap_err().to_string().contains("bincount"));
    let w = (|x: &Var, w: &Var| jnp::histogram(x, 2, None, Some(w)).0)
        .eval((&v(&[0.0, 1.0]), &v(&[1.0])));
    assert!(w.unwrap_err().to_string().contains("histogram"));
}

fn t_(shape: &[usize]) -> Tensor {
    t(shape, 0.5)
}

// ------------------------------------------------------------------ errors

/// The error of running `f` on `x`, as text.
fn error_of(f: impl Fn(&Var) -> Var + Clone + 'static, x: &Tensor) -> String {
    match (move |x: &Var| f(x)).eval(x) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_arguments_are_errors_naming_the_function() {
    let x = t(&[3, 4], 0.7);
    let cases: Vec<(String, &[&str])> = vec![
        (error_of(|x| jnp::einsum("ij,jk->ik", &[x]), &x), &["einsum", "2 terms for 1 operands"]),
        (error_of(|x| jnp::einsum("ijk->i", &[x]), &x), &["einsum", "3 subscripts", "[3, 4]"]),
        (
            error_of(|x| jnp::einsum("ij,ij->i", &[x, &x.transpose()]), &x),
            &["einsum", "subscript i has size 4"],
        ),
        (error_of(|x| jnp::einsum("ij->k", &[x]), &x), &["einsum", "'k' is in no input"]),
        (error_of(|x| jnp::einsum("i1", &[x]), &x), &["einsum", "'1' is not a subscript letter"]),
        (error_of(|x| jnp::split(x, 3, 1)[0].clone(), &x), &["split", "3 sections", "size 4"]),
        (error_of(|x| jnp::roll(x, 1, Some(2)), &x), &["roll", "axis"]),
        (error_of(|x| jnp::cross(x, x, -1), &x), &["cross", "4 and 4 components"]),
        (error_of(|x| jnp::tensordot(x, x, 3), &x), &["tensordot", "3 axes"]),
        (error_of(|x| jnp::tensordot(x, x, 1), &x), &["tensordot", "has size 4", "has 3"]),
        (
            error_of(|x| jnp::quantile(x, 1.5, None, QuantileMethod::Linear, false), &x),
            &["quantile", "1.5"],
        ),
        (error_of(|x| jnp::searchsorted(x, x, Side::Left), &x), &["searchsorted", "1-D"]),
        (error_of(|x| jnp::interp(x, x, &x.flatten(), None, None), &x), &["interp", "1-D"]),
        (error_of(|x| jnp::meshgrid(&[x], Indexing::Ij)[0].clone(), &x), &["meshgrid", "1-D"]),
        (
            error_of(|x| jnp::repeat_each(x, &[1, 2], Some(1)), &x),
            &["repeat", "2 counts", "size 4"],
        ),
        (error_of(|x| jnp::convolve(x, x, ConvolveMode::Full), &x), &["convolve", "1-D"]),
        (error_of(|x| jnp::rot90(x, 1, (1, -1)), &x), &["rot90", "twice"]),
        (error_of(|x| jnp::cov(&x.unsqueeze(0), true, 1.0), &x), &["cov", "rank 3"]),
        (error_of(|x| jnp::bincount(x, None, 3), &x), &["bincount", "integer"]),
    ];
    for (e, wants) in cases {
        for w in wants {
            assert!(e.contains(w), "{e:?} should contain {w:?}");
        }
    }
}

#[test]
fn transforms_compose_with_the_numpy_functions() {
    // vmap of einsum equals einsum with a batch label; jacfwd equals jacrev.
    let a = t(&[4, 2, 3], 0.3);
    let b = t(&[3, 5], 0.5);
    let per = vmap(|a: &Var, b: &Var| jnp::einsum("ij,jk->ik", &[a, b])).in_axes((Some(0), None));
    let per = per.eval((&a, &b)).unwrap();
    let all = (|a: &Var, b: &Var| jnp::einsum("bij,jk->bik", &[a, b])).eval((&a, &b)).unwrap();
    per.assert_allclose(&all, 1e-14, 1e-14);
    let x = t(&[6], 0.9);
    let f = |x: &Var| {
        let q = jnp::quantile(x, 0.3, None, QuantileMethod::Linear, false);
        jnp::roll(&jnp::interp(x, &x.sort(0, false), &x.sin(), None, None), 2, None) * q
    };
    let jf = jacfwd(f).eval(&x).unwrap();
    let jr = jacrev(f).eval(&x).unwrap();
    jf.assert_allclose(&jr, 1e-13, 1e-13);
    // Per-example gradients through a median and a convolution.
    let xs = t(&[3, 7], 0.4);
    let k = t(&[3], 0.8);
    let loss =
        |x: &Var, k: &Var| jnp::median(&jnp::convolve(x, k, ConvolveMode::Same), None, false);
    let per = vmap(grad(loss)).in_axes((Some(0), None)).eval((&xs, &k)).unwrap();
    for r in 0..3 {
        let row = Tensor::from_vec(xs.to_f64_vec()[r * 7..(r + 1) * 7].to_vec(), &[7]).unwrap();
        let one = grad(loss).eval((&row, &k)).unwrap();
        assert_eq!(per.to_f64_vec()[r * 7..(r + 1) * 7], one.to_f64_vec()[..], "row {r}");
    }
}

#[test]
fn symbolic_lengths_equal_the_concrete_functions() {
    use anvil::{dim, TensorType};
    let n = dim("n", 1..).unwrap();
    let ty = TensorType::new(DType::F64, [n, 3]);
    let fs: Vec<(&str, Unary)> = vec![
        ("einsum", |x| jnp::einsum("ij,ik->jk", &[x, x])),
        ("roll", |x| jnp::roll(x, 2, Some(0))),
        ("roll flat", |x| jnp::roll(x, -4, None)),
        ("tile", |x| jnp::tile(x, &[2, 1])),
        ("repeat", |x| jnp::repeat(x, 2, Some(0))),
        ("diff", |x| jnp::diff(x, 1, 0)),
        ("median", |x| jnp::median(x, Some(0), false)),
        ("quantiles", |x| {
            let m = [QuantileMethod::Linear, QuantileMethod::Lower, QuantileMethod::Higher];
            let m2 = [QuantileMethod::Midpoint, QuantileMethod::Nearest];
            let qs = [0.0, 0.25, 0.3, 0.5, 0.9, 1.0];
            let all: Vec<Var> =
                m.iter().chain(&m2).map(|&m| jnp::quantiles(x, &qs, Some(0), m, false)).collect();
            concatenate(&all.iter().collect::<Vec<_>>(), 0)
        }),
        ("var", |x| jnp::var(x, Some(&[0]), 1.0, false)),
        ("cov", |x| jnp::cov(x, false, 1.0)),
        ("kron", |x| jnp::kron(x, x)),
        ("cross", |x| jnp::cross(x, &x.sin(), -1)),
        ("trapezoid", |x| jnp::trapezoid(x, None, 0.1, 0)),
    ];
    for (name, f) in fs {
        let value = jit(f).symbolic(ty.clone()).unwrap();
        let gradient = jit(grad(move |x: &Var| wsum(&[f(x)]))).symbolic(ty.clone()).unwrap();
        for len in [2usize, 5, 8] {
            let x = t(&[len, 3], 0.77);
            let want = f.eval(&x).unwrap();
            value.eval(&x).unwrap().assert_allclose(&want, 1e-14, 1e-14);
            let want = grad(move |x: &Var| wsum(&[f(x)])).eval(&x).unwrap();
            let got = gradient.eval(&x).unwrap_or_else(|e| panic!("{name} at {len}: {e}"));
            got.assert_allclose(&want, 1e-13, 1e-13);
        }
    }
}
