//! Golden tests of transformed graphs: what `vmap` and `map` emit, printed
//! with `Display` and compared with the exact text. Each expected graph was
//! read and checked by hand: work that does not depend on the batch runs
//! once at its unbatched shape, batch axes sit where the rules say, and
//! there is no transpose the output layout does not require (the one
//! exception, a known inefficiency, is marked where it occurs).

use anvil::prelude::*;
use anvil::Graph;

#[track_caller]
fn golden(g: &Graph, want: &str) {
    g.verify().unwrap();
    let got = format!("{g}");
    assert_eq!(got, want, "\n--- got:\n{got}\n--- want:\n{want}\n");
}

fn zeros(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape).unwrap()
}

fn zeros_i64(shape: &[usize]) -> Tensor {
    Tensor::zeros_of(shape, DType::I64).unwrap()
}

/// `exp(w)` does not depend on the batch: computed once on the shared
/// `[3, 4]` matrix. The batch of 8 rows folds into the rows of a single
/// matmul (one GEMM, no loop, no broadcast of `w`).
#[test]
fn matmul_against_a_shared_matrix() {
    let f = vmap(|x: &Var, w: &Var| x.matmul(&w.exp())).in_axes([Some(0), None]);
    let g = trace(&f, (&zeros(&[8, 3]), &zeros(&[3, 4]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[8,3], %1: f64[3,4]) {
  %2: f64[3,4] = exp %1
  %3: f64[8,4] = matmul %0, %2
  return %3
}"#,
    );
}

/// A reduction of a `[2, 3]` element batched along axis 1 of `[2, 5, 3]`:
/// element axis 1 is physical axis 2, the result `[2, 5]` keeps the batch
/// at axis 1, and the one permute puts it in front for `out_axes` 0 (the
/// output layout `[5, 2]` requires it).
#[test]
fn reduction_with_the_batch_axis_in_the_middle() {
    let f = vmap(|x: &Var| x.sum(&[1])).in_axes(1);
    let g = trace(&f, zeros(&[2, 5, 3])).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[2,5,3]) {
  %1: f64[2,5] = sum[axes=[2], keepdims=false] %0
  %2: f64[5,2] = permute[perm=[1, 0]] %1
  return %2
}"#,
    );
    // Reducing the element axis in front of the batch: the batch axis moves
    // from 1 to 0 by itself and elementwise ops follow it, no permute.
    let f = vmap(|x: &Var| x.sin().sum(&[0]).exp()).in_axes(1);
    let g = trace(&f, zeros(&[2, 5, 3])).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[2,5,3]) {
  %1: f64[2,5,3] = sin %0
  %2: f64[5,3] = sum[axes=[0], keepdims=false] %1
  %3: f64[5,3] = exp %2
  return %3
}"#,
    );
}

/// `out_axes` 1 where the rule already left the batch at axis 1: no
/// transpose at all (the batch axis moves once, from where it is to where
/// it goes, and here not at all).
#[test]
fn reduction_with_out_axes_at_the_batch_position() {
    let f = vmap(|x: &Var| x.sum(&[1])).in_axes(1).out_axes([1]);
    let g = trace(&f, zeros(&[2, 5, 3])).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[2,5,3]) {
  %1: f64[2,5] = sum[axes=[2], keepdims=false] %0
  return %1
}"#,
    );
}

/// Nested vmap is graph to graph: the outer level maps axis 0, the inner
/// axis 1 of what is left, so the element is axis 1 of `[2, 5, 3]` and the
/// whole thing is three ops on the full array, no permute.
#[test]
fn nested_vmap_of_vmap() {
    let f = vmap(vmap(|x: &Var| (x.sin() * x).sum(&[0])).in_axes(1));
    let g = trace(&f, zeros(&[2, 5, 3])).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[2,5,3]) {
  %1: f64[2,5,3] = sin %0
  %2: f64[2,5,3] = mul %1, %0
  %3: f64[2,3] = sum[axes=[1], keepdims=false] %2
  return %3
}"#,
    );
    // Two levels against a shared matrix: exp once, one matmul over both
    // batches. The outer batch (axis 1 of x) must come first in the result,
    // so x is transposed once, before the product (the smaller operand).
    let f = vmap(vmap(|x: &Var, w: &Var| x.matmul(&w.exp())).in_axes([Some(0), None]))
        .in_axes([Some(1), None]);
    let g = trace(&f, (&zeros(&[2, 5, 3]), &zeros(&[3, 4]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[2,5,3], %1: f64[3,4]) {
  %2: f64[3,4] = exp %1
  %3: f64[5,2,3] = permute[perm=[1, 0, 2]] %0
  %4: f64[5,2,4] = matmul %3, %2
  return %4
}"#,
    );
}

/// `take` with the operand and the indices both batched pairs them with
/// `batch_dims` (element b indexed only by indices of element b), one more
/// per level of nesting; no broadcast, no flattened offsets.
#[test]
fn take_with_batched_indices_uses_batch_dims() {
    let f = vmap(|x: &Var, i: &Var| x.take(i, 1));
    let g = trace(&f, (&zeros(&[3, 4, 5]), &zeros_i64(&[3, 2]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[3,4,5], %1: i64[3,2]) {
  %2: f64[3,4,2] = take[axis=2, batch_dims=1] %0, %1
  return %2
}"#,
    );
    let f = vmap(vmap(|x: &Var, i: &Var| x.take(i, 1)));
    let g = trace(&f, (&zeros(&[2, 3, 4, 5]), &zeros_i64(&[2, 3, 2, 2]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[2,3,4,5], %1: i64[2,3,2,2]) {
  %2: f64[2,3,4,2,2] = take[axis=3, batch_dims=2] %0, %1
  return %2
}"#,
    );
    // Only the indices batched: a plain take on the shared table; the batch
    // lands at axis 1 of the result and one permute brings it to the front.
    let f = vmap(|x: &Var, i: &Var| x.take(i, 1)).in_axes([None, Some(0)]);
    let g = trace(&f, (&zeros(&[4, 5]), &zeros_i64(&[3, 2]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[4,5], %1: i64[3,2]) {
  %2: f64[4,3,2] = take[axis=1] %0, %1
  %3: f64[3,4,2] = permute[perm=[1, 0, 2]] %2
  return %3
}"#,
    );
}

/// The example of tinygrad-vmapin-vmapout.md §5 (a stack of reductions
/// re-indexed by a list, batch along axis 1): the stacked intermediate
/// `%7` holds every batch element (`[3, 2]`, not `[2]`), and the constant
/// index buffer `[0 1]` stays unbatched (§5.2: "external constants (like
/// index buffers [0, 1] for gather operations) ... don't depend on the
/// batch"), so the gather is a plain `take` without `batch_dims`.
#[test]
fn stack_of_reductions_reindexed_by_a_list() {
    let f = vmap(|x: &Var| {
        let halves = [
            x.slice_axis(0, None, Some(2), 1).sum(&[0]),
            x.slice_axis(0, Some(2), None, 1).sum(&[0]),
        ];
        stack(&[&halves[0], &halves[1]], 0).index(0, &[0, 1])
    })
    .in_axes(1);
    let g = trace(&f, zeros(&[4, 3])).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[4,3]) {
  %1: f64[2,3] = slice[:2, :] %0
  %2: f64[3] = sum[axes=[0], keepdims=false] %1
  %3: f64[2,3] = slice[2:, :] %0
  %4: f64[3] = sum[axes=[0], keepdims=false] %3
  %5: f64[3,1] = reshape[shape=[3, 1]] %2
  %6: f64[3,1] = reshape[shape=[3, 1]] %4
  %7: f64[3,2] = concatenate[axis=1] %5, %6
  %8: i64[2] = const[[0 1] dtype=i64]
  %9: f64[3,2] = take[axis=1] %7, %8
  return %9
}"#,
    );
}

/// `map(f)` is one `map` node whose body is `f` traced at the element
/// shapes. `exp(w)` depends only on the shared `w`: it is hoisted out of the
/// loop and runs once, and the loop reads it as a shared operand
/// (`in_axes=[0,-]`); `w` itself is no longer an operand.
#[test]
fn map_prints_its_body() {
    let f = map(|x: &Var, w: &Var| x.matmul(&w.exp()).sin()).in_axes([Some(0), None]);
    let g = trace(&f, (&zeros(&[4, 3]), &zeros(&[3, 2]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[4,3], %1: f64[3,2]) {
  %2: f64[3,2] = exp %1
  %3: f64[4,2] = map[size=4, in_axes=[0,-]] %0, %2
    graph(%0: f64[3], %1: f64[3,2]) {
      %2: f64[2] = matmul %0, %1
      %3: f64[2] = sin %2
      return %3
    }
  return %3
}"#,
    );
}

/// `vmap(map(f))`: the loop stays a loop over its axis (4) and the body is
/// vmapped (one `[5, 3] @ [3, 2]` product per iteration, the shared `w`
/// still unbatched). With the vmap batch already right after the loop axis
/// (in_axes 1) no input permute is needed; the result `[4, 5, 2]` has the
/// batch at axis 1 and one permute puts it in front.
///
/// With the vmap batch in front (in_axes 0), the operand is transposed to
/// put the loop axis first, and the result back: `Map` only loops over axis
/// 0 of its operands and writes axis 0 of its result (KNOWN INEFFICIENCY:
/// a loop axis parameter on `Map` would avoid both copies). The body's
/// loop-invariant `exp(w)` is hoisted, as in `map_prints_its_body`.
#[test]
fn vmap_of_map_vmaps_the_body_and_keeps_the_loop() {
    let m = map(|x: &Var, w: &Var| x.matmul(&w.exp()).sin()).in_axes([Some(0), None]);
    let f = vmap(m.clone()).in_axes([Some(1), None]);
    let g = trace(&f, (&zeros(&[4, 5, 3]), &zeros(&[3, 2]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[4,5,3], %1: f64[3,2]) {
  %2: f64[3,2] = exp %1
  %3: f64[4,5,2] = map[size=4, in_axes=[0,-]] %0, %2
    graph(%0: f64[5,3], %1: f64[3,2]) {
      %2: f64[5,2] = matmul %0, %1
      %3: f64[5,2] = sin %2
      return %3
    }
  %4: f64[5,4,2] = permute[perm=[1, 0, 2]] %3
  return %4
}"#,
    );
    let f = vmap(m).in_axes([Some(0), None]);
    let g = trace(&f, (&zeros(&[5, 4, 3]), &zeros(&[3, 2]))).unwrap();
    golden(
        &g,
        r#"graph(%0: f64[5,4,3], %1: f64[3,2]) {
  %2: f64[3,2] = exp %1
  %3: f64[4,5,3] = permute[perm=[1, 0, 2]] %0
  %4: f64[4,5,2] = map[size=4, in_axes=[0,-]] %3, %2
    graph(%0: f64[5,3], %1: f64[3,2]) {
      %2: f64[5,2] = matmul %0, %1
      %3: f64[5,2] = sin %2
      return %3
    }
  %5: f64[5,4,2] = permute[perm=[1, 0, 2]] %4
  return %5
}"#,
    );
}

/// The exact printed text of a graph with a sub-graph: the body's closing
/// brace ends its line.
#[test]
fn subgraph_printing_ends_the_body_line() {
    let f = map(|x: &Var| x.sin()).in_axes(0);
    let g = trace(&f, zeros(&[4, 3])).unwrap();
    let want = r#"graph(%0: f64[4,3]) {
  %1: f64[4,3] = map[size=4, in_axes=[0]] %0
    graph(%0: f64[3]) {
      %1: f64[3] = sin %0
      return %1
    }
  return %1
}"#;
    assert_eq!(format!("{g}"), want);
}
