//! The collectives, `shard_map`, the sharded Jacobians and the
//! data-parallel gradient, against single-process references.
//!
//! One test binary for every process count: `cargo test -p anvil-ad-mpi`
//! runs it as a group of one process (no MPI needed); with MPI,
//!
//! ```text
//! cargo test -p anvil-ad-mpi --features mpi --test collectives --no-run
//! mpirun --allow-run-as-root --oversubscribe -n 2 target/debug/deps/collectives-<hash>
//! ```
//!
//! runs it on 2 (or 4) processes. Every rank runs every test in the same
//! order (the tests issue collectives), so the harness is this file's own
//! `main`, sequential, which finalises MPI before exiting. Each rank's
//! inputs are a function of its rank, so every rank can compute the
//! reference of the whole group by itself.
use anvil::prelude::*;
use anvil_mpi::{
    all_gather, all_reduce_max, all_reduce_sum, broadcast, data_parallel, jacfwd_sharded,
    jacrev_sharded, reduce_scatter, shard_map, spmd, vmap_named,
};

type Check = std::result::Result<(), String>;
type Test = fn(&Group) -> Check;

/// Deterministic, distinct values for rank `r` (`salt` tells inputs apart).
fn data(r: usize, salt: usize, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| ((1 + i + 7 * r + 31 * salt) as f64 * 0.731).sin()).collect();
    Tensor::from_vec(v, shape).expect("a valid shape")
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("f64")
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        if (a - b).abs() > tol * (1.0 + b.abs()) {
            return Err(format!("{what}: element {i} is {a}, expected {b}"));
        }
    }
    Ok(())
}

fn ok<T>(what: &str, r: anvil::Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

struct Group {
    rank: usize,
    size: usize,
}

fn all_reduce_matches_reference(g: &Group) -> Check {
    let x = data(g.rank, 0, &[3, 4]);
    let sum = ok("sum", spmd(|x: &Var| all_reduce_sum(x, "r"), "r").eval(&x))?;
    let max = ok("max", spmd(|x: &Var| all_reduce_max(x, "r"), "r").eval(&x))?;
    let each: Vec<Vec<f64>> = (0..g.size).map(|r| vals(&data(r, 0, &[3, 4]))).collect();
    let want_sum: Vec<f64> = (0..12).map(|i| each.iter().map(|v| v[i]).sum()).collect();
    let want_max: Vec<f64> =
        (0..12).map(|i| each.iter().map(|v| v[i]).fold(f64::MIN, f64::max)).collect();
    close("all_reduce_sum", &vals(&sum), &want_sum, 1e-14)?;
    close("all_reduce_max", &vals(&max), &want_max, 0.0)
}

fn all_gather_and_reduce_scatter_match_reference(g: &Group) -> Check {
    let p = g.size;
    // all_gather along dim 1 of [2, 3]: out[i, r*3 + j] = x_r[i, j].
    let x = data(g.rank, 1, &[2, 3]);
    let got = ok("all_gather", spmd(|x: &Var| all_gather(x, "r", 1), "r").eval(&x))?;
    let each: Vec<Vec<f64>> = (0..p).map(|r| vals(&data(r, 1, &[2, 3]))).collect();
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..3 * p).map(move |c| (i, c)))
        .map(|(i, c)| each[c / 3][i * 3 + c % 3])
        .collect();
    close("all_gather", &vals(&got), &want, 0.0)?;
    // reduce_scatter along dim 1 of [2, 2p]: out[i, j] = sum_s x_s[i, rank*2 + j].
    let y = data(g.rank, 2, &[2, 2 * p]);
    let got = ok("reduce_scatter", spmd(|y: &Var| reduce_scatter(y, "r", 1), "r").eval(&y))?;
    let each: Vec<Vec<f64>> = (0..p).map(|r| vals(&data(r, 2, &[2, 2 * p]))).collect();
    let want: Vec<f64> = (0..2)
        .flat_map(|i| (0..2).map(move |j| (i, j)))
        .map(|(i, j)| each.iter().map(|v| v[i * 2 * p + g.rank * 2 + j]).sum())
        .collect();
    close("reduce_scatter", &vals(&got), &want, 1e-14)
}

fn broadcast_matches_reference(g: &Group) -> Check {
    let root = g.size - 1;
    let x = data(g.rank, 3, &[5]);
    let got = ok("broadcast", spmd(move |x: &Var| broadcast(x, "r", root), "r").eval(&x))?;
    close("broadcast", &vals(&got), &vals(&data(root, 3, &[5])), 0.0)?;
    let f = |x: &Var| x + anvil_mpi::axis_index(x, "r").cast(DType::F64);
    let got = ok("axis_index", spmd(f, "r").eval(&x))?;
    let want: Vec<f64> = vals(&x).iter().map(|v| v + g.rank as f64).collect();
    close("axis_index", &vals(&got), &want, 0.0)
}

/// `<u, L x>` and `<Lᵀ u, x>`, each summed over the ranks, for a linear
/// collective `L` (its transpose from `grad` of `<u, L x>`).
fn dot_product_test(
    g: &Group,
    what: &str,
    l: impl Fn(&Var) -> Var + Copy,
    in_shape: &[usize],
) -> Check {
    let x = data(g.rank, 4, in_shape);
    let y = ok(what, spmd(l, "r").eval(&x))?;
    let u = data(g.rank, 5, y.shape());
    let uv = u.clone();
    let lt_u = ok(what, grad(spmd(move |x: &Var| (l(x) * uv.to_var(x)).sum_all(), "r")).eval(&x))?;
    let dot = |a: &Tensor, b: &Tensor| vals(a).iter().zip(vals(b)).map(|(p, q)| p * q).sum::<f64>();
    let local =
        Tensor::from_vec(vec![dot(&u, &y), dot(&lt_u, &x)], &[2]).map_err(|e| e.to_string())?;
    let total = ok(what, spmd(|v: &Var| all_reduce_sum(v, "r"), "r").eval(&local))?;
    let t = vals(&total);
    close(&format!("{what}: <u, Lx> vs <Ltu, x>"), &t[..1], &t[1..], 1e-12)
}

trait AsConst {
    fn to_var(&self, like: &Var) -> Var;
}

impl AsConst for Tensor {
    fn to_var(&self, like: &Var) -> Var {
        like.tracer().constant(self.clone())
    }
}

fn transposes_pass_the_dot_product_test(g: &Group) -> Check {
    let p = g.size;
    dot_product_test(g, "all_reduce_sum", |x| all_reduce_sum(x, "r"), &[3, 2])?;
    dot_product_test(g, "all_gather", |x| all_gather(x, "r", 1), &[2, 3])?;
    dot_product_test(g, "reduce_scatter", |x| reduce_scatter(x, "r", 0), &[2 * p, 3])?;
    dot_product_test(g, "broadcast", |x| broadcast(x, "r", g_last(p)), &[4])
}

/// The last rank (a root other than 0 when there are several).
fn g_last(p: usize) -> usize {
    p - 1
}

fn pmax_jvp_follows_the_maximum(g: &Group) -> Check {
    let x = data(g.rank, 6, &[6]);
    let t = data(g.rank, 7, &[6]);
    let (_, tan) = ok("jvp pmax", jvp(spmd(|x: &Var| all_reduce_max(x, "r"), "r")).eval((&x, &t)))?;
    let xs: Vec<Vec<f64>> = (0..g.size).map(|r| vals(&data(r, 6, &[6]))).collect();
    let ts: Vec<Vec<f64>> = (0..g.size).map(|r| vals(&data(r, 7, &[6]))).collect();
    let want: Vec<f64> = (0..6)
        .map(|i| {
            let r = (0..g.size).max_by(|&a, &b| xs[a][i].total_cmp(&xs[b][i])).unwrap_or(0);
            ts[r][i]
        })
        .collect();
    close("jvp of all_reduce_max", &vals(&tan), &want, 1e-14)
}

fn shard_map_with_vmap_inside(g: &Group) -> Check {
    let p = g.size;
    // Rows of each rank's slice, each summed over the ranks under a plain vmap.
    let xs = data(0, 8, &[2 * p, 3]);
    let f = shard_map(|x: &Var| vmap(|row: &Var| all_reduce_sum(row, "batch")).invoke(x), "batch");
    let got = ok("shard_map(vmap(psum))", f.eval(&xs))?;
    let v = vals(&xs);
    // Block r of the result is the sum of all ranks' blocks (2 rows x 3).
    let block: Vec<f64> = (0..6).map(|i| (0..p).map(|r| v[r * 6 + i]).sum()).collect();
    let want: Vec<f64> = (0..p).flat_map(|_| block.clone()).collect();
    close("shard_map(vmap(all_reduce_sum))", &vals(&got), &want, 1e-14)?;
    // A named vmap inside: a sum over the rows and over the ranks.
    let f = shard_map(
        |x: &Var| {
            vmap_named(|row: &Var| all_reduce_sum(&all_reduce_sum(row, "i"), "batch"), "i")
                .invoke(x)
        },
        "batch",
    );
    let got = ok("shard_map(vmap_named)", f.eval(&xs))?;
    let total: Vec<f64> = (0..3).map(|j| (0..2 * p).map(|i| v[i * 3 + j]).sum()).collect();
    let want: Vec<f64> = (0..2 * p).flat_map(|_| total.clone()).collect();
    close("shard_map(vmap_named(...))", &vals(&got), &want, 1e-13)
}

fn vmap_named_resolves_each_collective(_: &Group) -> Check {
    let x = data(0, 9, &[2, 4]);
    let v = vals(&x);
    let gathered = ok("all_gather", vmap_named(|r: &Var| all_gather(r, "i", 0), "i").eval(&x))?;
    // Every element gets the whole batch, concatenated.
    let want: Vec<f64> = (0..2).flat_map(|_| v.clone()).collect();
    close("vmap_named all_gather", &vals(&gathered), &want, 0.0)?;
    let scattered =
        ok("reduce_scatter", vmap_named(|r: &Var| reduce_scatter(r, "i", 0), "i").eval(&x))?;
    let sum: Vec<f64> = (0..4).map(|j| v[j] + v[4 + j]).collect();
    close("vmap_named reduce_scatter", &vals(&scattered), &sum, 1e-15)?;
    let bcast = ok("broadcast", vmap_named(|r: &Var| broadcast(r, "i", 1), "i").eval(&x))?;
    let want: Vec<f64> = (0..2).flat_map(|_| v[4..].to_vec()).collect();
    close("vmap_named broadcast", &vals(&bcast), &want, 0.0)?;
    let mx = ok("max", vmap_named(|r: &Var| all_reduce_max(r, "i"), "i").eval(&x))?;
    let want: Vec<f64> = (0..2).flat_map(|_| (0..4).map(|j| v[j].max(v[4 + j]))).collect();
    close("vmap_named all_reduce_max", &vals(&mx), &want, 0.0)?;
    // Their transposes under the named vmap: the gradient of <u, gather(x)>.
    let g = ok(
        "grad",
        grad(|x: &Var| {
            let y = vmap_named(|r: &Var| all_gather(r, "i", 0), "i").invoke(x);
            (y * x.tracer().constant(data(0, 10, &[2, 8]))).sum_all()
        })
        .eval(&x),
    )?;
    let u = vals(&data(0, 10, &[2, 8]));
    let want: Vec<f64> = (0..8).map(|k| u[k] + u[8 + k]).collect();
    close("grad through vmap_named all_gather", &vals(&g), &want, 1e-14)
}

fn sharded_jacobians_equal_single_process(g: &Group) -> Check {
    let n = 3 * g.size;
    let f = |x: &Var| x.sin() * x.sum(&[0]) + x.square().cumsum(0, false);
    let x = data(0, 11, &[n]);
    let want = ok("jacfwd", jacfwd(f).eval(&x))?;
    let fwd = jacfwd_sharded(f, "basis");
    let got = ok("jacfwd_sharded", fwd.eval(&x))?;
    close("jacfwd_sharded", &vals(&got), &vals(&want), 1e-12)?;
    if fwd.local_directions() != 3 {
        return Err(format!("rank {} ran {} directions, not 3", g.rank, fwd.local_directions()));
    }
    let rev = jacrev_sharded(f, "basis");
    let got = ok("jacrev_sharded", rev.eval(&x))?;
    close("jacrev_sharded", &vals(&got), &vals(&want), 1e-12)?;
    if got.shape() != [n, n] {
        return Err(format!("jacrev_sharded shape {:?}", got.shape()));
    }
    Ok(())
}

fn data_parallel_grad_equals_full_batch_grad(g: &Group) -> Check {
    let loss = |w: &Var, x: &Var| (x.matmul(w).tanh() - 0.25).square().sum(&[0]);
    let w = data(0, 12, &[3]);
    let xs = data(0, 13, &[4 * g.size, 3]);
    let got = ok("dp grad", grad(data_parallel(loss, "batch")).eval((&w, &xs)))?;
    let want = ok("grad", grad(loss).eval((&w, &xs)))?;
    close("data-parallel grad", &vals(&got), &vals(&want), 1e-12)?;
    // Forward over reverse: jacfwd batches the collectives and boundaries
    // of the reverse pass.
    let h = ok("dp hessian", hessian(data_parallel(loss, "batch")).eval((&w, &xs)))?;
    let want = ok("hessian", hessian(loss).eval((&w, &xs)))?;
    close("data-parallel hessian", &vals(&h), &vals(&want), 1e-12)?;
    let value = ok("dp loss", data_parallel(loss, "batch").eval((&w, &xs)))?;
    let full = ok("loss", loss.eval((&w, &xs)))?;
    close("data-parallel loss", &vals(&value), &vals(&full), 1e-12)
}

/// The conformance kit's vmap, jvp and vmap-of-jvp checks on every
/// collective over the processes (each rank holds the same sample, so the
/// checks' per-rank comparisons hold; the transposes are checked across
/// ranks by the dot-product test above, and by the kit on one process in
/// `tests/conformance.rs`).
fn conformance_kit_on_the_mesh(g: &Group) -> Check {
    use anvil_mpi::{
        AllGather, AllReduce, Axis, AxisKind, Broadcast, Reduce, ReduceScatter, SumToRoot,
    };
    use anvil_testing::{check_op_jvp, check_op_vmap, check_op_vmap_of_jvp, InputKind, OpSample};
    let axis = Axis { name: "batch".into(), size: g.size, kind: AxisKind::Mesh };
    let sample = |op: Box<dyn anvil::Op>, shape: &[usize]| {
        OpSample::from_boxed(op).input(InputKind::Distinct { offset: 0.0 }, shape)
    };
    let p = g.size;
    let samples = [
        sample(Box::new(AllReduce { axis: axis.clone(), reduce: Reduce::Sum }), &[2, 3]),
        sample(Box::new(AllReduce { axis: axis.clone(), reduce: Reduce::Max }), &[2, 3]),
        sample(Box::new(AllGather { axis: axis.clone(), dim: 0 }), &[2, 3]),
        sample(Box::new(AllGather { axis: axis.clone(), dim: 1 }), &[2, 3]),
        sample(Box::new(ReduceScatter { axis: axis.clone(), dim: 1 }), &[2, 2 * p]),
        sample(Box::new(ReduceScatter { axis: axis.clone(), dim: 0 }), &[p, 3]),
        sample(Box::new(Broadcast { axis: axis.clone(), root: p - 1 }), &[2, 3]),
        sample(Box::new(SumToRoot { axis: axis.clone(), root: 0 }), &[2, 3]),
    ];
    for s in &samples {
        check_op_vmap(s).map_err(|e| format!("vmap of {}: {e}", s.describe()))?;
        check_op_jvp(s).map_err(|e| format!("jvp of {}: {e}", s.describe()))?;
        check_op_vmap_of_jvp(s).map_err(|e| format!("vmap of jvp of {}: {e}", s.describe()))?;
    }
    Ok(())
}

/// After an error, the ranks are still in step: a collective still works.
fn still_in_step(g: &Group) -> Check {
    let x = Tensor::scalar(1.0);
    let n = ok("after an error", spmd(|x: &Var| all_reduce_sum(x, "r"), "r").eval(&x))?;
    close("ranks in step", &vals(&n), &[g.size as f64], 0.0)
}

fn expect_err<T>(what: &str, r: anvil::Result<T>, needles: &[&str]) -> Check {
    match r {
        Ok(_) => Err(format!("{what}: expected an error")),
        Err(e) => {
            let msg = e.to_string();
            match needles.iter().find(|n| !msg.contains(*n)) {
                None => Ok(()),
                Some(n) => Err(format!("{what}: the error does not say '{n}': {msg}")),
            }
        }
    }
}

fn errors_are_errors_not_hangs(g: &Group) -> Check {
    let p = g.size;
    let outside = (|x: &Var| all_reduce_sum(x, "batch")).eval(Tensor::scalar(1.0));
    expect_err("outside a sharded function", outside, &["'batch' is not bound"])?;
    still_in_step(g)?;
    if p < 2 {
        return Ok(()); // one process: every batch divides, shapes always agree
    }
    // A batch of p + 1 does not split over p ranks.
    let xs = data(0, 14, &[p + 1]);
    let r = shard_map(|x: &Var| x.square(), "batch").eval(&xs);
    expect_err("indivisible batch", r, &["not divisible", &format!("{} ranks", p)])?;
    still_in_step(g)?;
    // Rank-dependent argument shapes: caught on entry, naming each rank's.
    let x = data(g.rank, 15, &[2 + g.rank]);
    let r = spmd(|x: &Var| all_reduce_sum(x, "r"), "r").eval(&x);
    expect_err("shapes disagree on entry", r, &["disagree", "rank 0", "rank 1"])?;
    still_in_step(g)?;
    // An axis that exists on rank 0's argument only: rank 1's error waits
    // for the agreement, so rank 0 is not left waiting.
    let x = if g.rank == 0 { data(0, 17, &[2, 2 * p]) } else { data(0, 17, &[2 * p]) };
    let r = shard_map(|x: &Var| x.square(), "batch").in_axes(1).eval(&x);
    expect_err("an axis on one rank only", r, &["disagree"])?;
    still_in_step(g)?;
    // A rank-dependent branch: the same arguments, different collectives.
    let rank = g.rank;
    let x = data(0, 16, &[3]);
    let f = move |x: &Var| {
        if rank == 0 {
            all_reduce_sum(x, "r")
        } else {
            all_reduce_sum(&x.sum(&[0]), "r")
        }
    };
    let r = spmd(f, "r").eval(&x);
    expect_err("shapes disagree at a collective", r, &["f64[3]", "f64[]", "rank 1"])?;
    still_in_step(g)
}

fn main() {
    let mpi = anvil_mpi::init().expect("MPI initialises");
    let g = Group { rank: mpi.rank(), size: mpi.size() };
    let tests: &[(&str, Test)] = &[
        ("all_reduce_matches_reference", all_reduce_matches_reference),
        (
            "all_gather_and_reduce_scatter_match_reference",
            all_gather_and_reduce_scatter_match_reference,
        ),
        ("broadcast_matches_reference", broadcast_matches_reference),
        ("transposes_pass_the_dot_product_test", transposes_pass_the_dot_product_test),
        ("pmax_jvp_follows_the_maximum", pmax_jvp_follows_the_maximum),
        ("shard_map_with_vmap_inside", shard_map_with_vmap_inside),
        ("vmap_named_resolves_each_collective", vmap_named_resolves_each_collective),
        ("sharded_jacobians_equal_single_process", sharded_jacobians_equal_single_process),
        ("data_parallel_grad_equals_full_batch_grad", data_parallel_grad_equals_full_batch_grad),
        ("conformance_kit_on_the_mesh", conformance_kit_on_the_mesh),
        ("errors_are_errors_not_hangs", errors_are_errors_not_hangs),
    ];
    let mut failed = 0;
    for (name, test) in tests {
        match test(&g) {
            Ok(()) => println!("rank {}/{}: test {name} ... ok", g.rank, g.size),
            Err(e) => {
                failed += 1;
                println!("rank {}/{}: test {name} ... FAILED: {e}", g.rank, g.size);
            }
        }
    }
    println!("mpi-rank-{}-of-{}: {} passed, {failed} failed", g.rank, g.size, tests.len() - failed);
    drop(mpi);
    if failed > 0 {
        std::process::exit(1);
    }
}
