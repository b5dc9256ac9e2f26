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

/// A `grad` (and a Hessian) taken *inside* a sharded function's body has
/// JAX's answer: the values are typed while they are traced, so `psum`'s
/// transpose is the identity and a replicated parameter used with each
/// rank's examples has its cotangent summed over the ranks (pvaryᵀ = psum).
/// The references are single-process computations over all ranks' data.
fn grad_inside_the_body_matches_jax(g: &Group) -> Check {
    fn local(w: &Var, x: &Var) -> Var {
        (x.matmul(w).tanh() - 0.25).square().sum(&[0])
    }
    let p = g.size;
    let w = data(0, 40, &[3]);
    let xs = data(0, 41, &[2 * p, 3]);
    let full_w = ok("grad w", grad(local).eval((&w, &xs)))?;
    let full_x = ok("grad x", grad(|x: &Var, w: &Var| local(w, x)).eval((&xs, &w)))?;
    let shard = |f: fn(&Var, &Var) -> Var, out: Option<i64>| {
        shard_map(f, "b").in_axes((None, Some(0))).out_axes(out)
    };
    // grad of psum(loss) w.r.t. the replicated w: the full gradient, on
    // every rank (p× it, or each rank's own part, before the typing).
    let f = shard(|w, x| grad(|w: &Var| all_reduce_sum(&local(w, x), "b")).invoke(w), None);
    close("grad of psum(loss), w", &vals(&ok("f", f.eval((&w, &xs)))?), &vals(&full_w), 1e-12)?;
    // grad of the rank's own loss w.r.t. the replicated w: w is used with
    // each rank's examples, so its cotangent is summed over the ranks.
    let f = shard(|w, x| grad(|w: &Var| local(w, x)).invoke(w), None);
    close("grad of local loss, w", &vals(&ok("f", f.eval((&w, &xs)))?), &vals(&full_w), 1e-12)?;
    // grad of psum(loss) w.r.t. the sharded x: each rank's own block
    // (psumᵀ is the identity), gathered.
    let f = shard(|w, x| grad(|x: &Var| all_reduce_sum(&local(w, x), "b")).invoke(x), Some(0));
    close("grad of psum(loss), x", &vals(&ok("f", f.eval((&w, &xs)))?), &vals(&full_x), 1e-12)?;
    // A replicated parameter's use alone: no communication, no factor p;
    // psum of a replicated value is p times it, and so is its derivative.
    let f = shard(|w, _| grad(|w: &Var| (w * w).sum(&[0])).invoke(w), None);
    let want: Vec<f64> = vals(&w).iter().map(|v| 2.0 * v).collect();
    close("grad of a replicated use", &vals(&ok("f", f.eval((&w, &xs)))?), &want, 1e-14)?;
    let f = shard(|w, _| grad(|w: &Var| all_reduce_sum(&(w * w).sum(&[0]), "b")).invoke(w), None);
    let want: Vec<f64> = vals(&w).iter().map(|v| 2.0 * p as f64 * v).collect();
    close("grad of psum of a replicated value", &vals(&ok("f", f.eval((&w, &xs)))?), &want, 1e-14)?;
    // Forward over reverse inside the body: the full Hessian.
    let f = shard(|w, x| hessian(|w: &Var| all_reduce_sum(&local(w, x), "b")).invoke(w), None);
    let want = ok("hessian", hessian(local).eval((&w, &xs)))?;
    close("hessian of psum(loss), w", &vals(&ok("f", f.eval((&w, &xs)))?), &vals(&want), 1e-12)?;
    // And a grad of the sharded function around the grad inside: the
    // second derivative along w, as one process computes it.
    let outer = |w: &Var, x: &Var| {
        let g = shard(|w, x| grad(|w: &Var| all_reduce_sum(&local(w, x), "b")).invoke(w), None);
        g.invoke((w, x)).sum(&[0])
    };
    let single = |w: &Var, x: &Var| grad(local).invoke((w, x)).sum(&[0]);
    let got = ok("grad of grad inside", grad(outer).eval((&w, &xs)))?;
    let want = ok("grad of grad", grad(single).eval((&w, &xs)))?;
    close("grad of (shard_map of grad)", &vals(&got), &vals(&want), 1e-12)
}

/// Block `r` of `p` equal blocks of rows of `xs`.
fn block(xs: &Tensor, r: usize, p: usize) -> Tensor {
    let v = vals(xs);
    let rows = xs.shape()[0] / p;
    let cols: usize = xs.shape()[1..].iter().product();
    let mut shape = xs.shape().to_vec();
    shape[0] = rows;
    Tensor::from_vec(v[r * rows * cols..(r + 1) * rows * cols].to_vec(), &shape).expect("a block")
}

/// `f(w, x)` on every rank inside `shard_map` (`w` replicated, `x` sharded
/// by rows, the result replicated) against the sum over the ranks of
/// `reference(w, x_r)` computed on one process: what JAX gives for a
/// gradient of `psum` of each rank's loss.
fn against_sum_over_ranks<M, F, R>(g: &Group, what: &str, f: F, reference: R, salt: usize) -> Check
where
    F: IntoFunction<M, Args = (Var, Var), Output = Var>,
    F::Func: 'static,
    R: Fn(&Tensor, &Tensor) -> anvil::Result<Tensor>,
{
    let p = g.size;
    let w = data(0, salt, &[3]);
    let xs = data(0, salt + 1, &[2 * p, 3]);
    let sharded = shard_map(f, "b").in_axes((None, Some(0))).out_axes(None);
    let got = ok(what, sharded.eval((&w, &xs)))?;
    let mut want = vec![0.0; 3];
    for r in 0..p {
        let part = ok("reference", reference(&w, &block(&xs, r, p)))?;
        for (a, b) in want.iter_mut().zip(vals(&part)) {
            *a += b;
        }
    }
    close(what, &vals(&got), &want, 1e-12)
}

/// A loss through a `scan` whose body closes over the replicated `w` and
/// whose carry starts replicated (a constant) and becomes varying in the
/// body (the loop's fixpoint types it varying on entry).
fn scan_loss(w: &Var, x: &Var) -> anvil::Result<Var> {
    let c0 = w.sum_all().zeros_like();
    let step = |c: &Var, row: &Var| {
        let h = (row * w).sum_all().tanh();
        (c * 0.5 + &(&h * &w.sum_all()), h.square())
    };
    let (c, ys) = scan(step, &c0, x)?;
    Ok(c + ys.sum_all())
}

/// A loss through a `cond` whose predicate varies (each rank's data picks
/// its branch) and through one whose predicate is replicated.
fn cond_loss(w: &Var, x: &Var) -> anvil::Result<Var> {
    let zero = x.sum_all().zeros_like();
    let first = cond(
        &x.sum_all().gt(&zero),
        |x: &Var| x.matmul(w).tanh().sum_all(),
        |x: &Var| (x.matmul(w) * w.sum_all()).square().sum_all(),
        x,
    )?;
    let second = cond(
        &w.sum_all().lt(&zero),
        |w: &Var, x: &Var| x.matmul(&w.sin()).sum_all(),
        |w: &Var, x: &Var| (x.matmul(w) * 2.0).cos().sum_all(),
        (w, x),
    )?;
    Ok(first + second)
}

/// A loss through a bounded `while_loop` (a replicated counter, a carry
/// that starts replicated and becomes varying) and a `fori_loop`.
fn loop_loss(w: &Var, x: &Var) -> anvil::Result<Var> {
    let s = w.sum_all();
    let init = (s.zeros_like().cast(DType::I64), s.zeros_like());
    let (_, h) = while_loop_bounded(
        |(i, _): &(Var, Var)| i.lt(&i.full_like(3.0)),
        |(i, h): &(Var, Var)| (i + &i.ones_like(), (h + &x.matmul(w).sum_all()).tanh()),
        &init,
        5,
    )?;
    let step = |_: &Var, c: &Var| c * 0.5 + &(x.matmul(&c.sin()).tanh().sum_all() * w);
    let f = fori_loop(0, 3, step, w)?;
    Ok(h + f.square().sum_all())
}

/// The gradient of `psum(loss)` (and of the rank's own loss) with respect
/// to the replicated `w` taken inside `shard_map`, where the loss goes
/// through a `scan`, a `cond` and loops: the values in their bodies are
/// typed, so it is the full gradient on every rank (JAX's answer), not
/// `p` times it.
fn grad_through_control_flow_matches_jax(g: &Group) -> Check {
    type L = fn(&Var, &Var) -> anvil::Result<Var>;
    for (name, loss, salt) in
        [("scan", scan_loss as L, 50), ("cond", cond_loss as L, 52), ("loops", loop_loss as L, 54)]
    {
        let reference = |w: &Tensor, x: &Tensor| grad(loss).eval((w, x));
        let psum_loss = move |w: &Var, x: &Var| {
            grad(move |w: &Var| Ok(all_reduce_sum(&loss(w, x)?, "b"))).invoke(w)
        };
        against_sum_over_ranks(
            g,
            &format!("grad of psum({name} loss)"),
            psum_loss,
            reference,
            salt,
        )?;
        let own_loss = move |w: &Var, x: &Var| grad(move |w: &Var| loss(w, x)).invoke(w);
        against_sum_over_ranks(g, &format!("grad of the {name} loss"), own_loss, reference, salt)?;
        // And of the sharded function around it: transforms *of* shard_map.
        let outer = move |w: &Var, x: &Var| {
            all_reduce_sum(
                &loss(w, x).unwrap_or_else(|e| {
                    w.tracer().record(e);
                    w.tracer().poisoned()
                }),
                "b",
            )
        };
        let p = g.size;
        let w = data(0, salt, &[3]);
        let xs = data(0, salt + 1, &[2 * p, 3]);
        let sharded = shard_map(outer, "b").in_axes((None, Some(0))).out_axes(None);
        let got = ok("grad of shard_map", grad(sharded).eval((&w, &xs)))?;
        let mut want = vec![0.0; 3];
        for r in 0..p {
            for (a, b) in
                want.iter_mut().zip(vals(&ok("reference", reference(&w, &block(&xs, r, p)))?))
            {
                *a += b;
            }
        }
        close(&format!("grad of shard_map({name} loss)"), &vals(&got), &want, 1e-12)?;
    }
    Ok(())
}

/// Gradients taken *inside* loop and branch bodies within `shard_map`:
/// data-parallel gradient descent as a `fori_loop` (the carry, the
/// parameters, stays replicated: its update is a `psum`), and a `grad` in
/// a `cond` branch; against one process with the whole batch.
fn grad_inside_control_flow_matches_jax(g: &Group) -> Check {
    fn local(w: &Var, x: &Var) -> Var {
        (x.matmul(w).tanh() - 0.25).square().sum_all()
    }
    let p = g.size;
    let w = data(0, 56, &[3]);
    let xs = data(0, 57, &[2 * p, 3]);
    let descend = |w: &Var, x: &Var| {
        fori_loop(
            0,
            3,
            |_: &Var, w: &Var| {
                w - &(grad(|w: &Var| all_reduce_sum(&local(w, x), "b")).invoke(w) * 0.1)
            },
            w,
        )
    };
    let sharded = shard_map(descend, "b").in_axes((None, Some(0))).out_axes(None);
    let got = ok("descent in shard_map", sharded.eval((&w, &xs)))?;
    let single = |w: &Var, x: &Var| {
        fori_loop(0, 3, |_: &Var, w: &Var| w - &(grad(local).invoke((w, x)) * 0.1), w)
    };
    let want = ok("descent", single.eval((&w, &xs)))?;
    close("gradient descent in a fori_loop", &vals(&got), &vals(&want), 1e-12)?;
    let branch = |w: &Var, x: &Var| {
        cond(
            &w.sum_all().gt(&w.sum_all().zeros_like()),
            |w: &Var| grad(|w: &Var| all_reduce_sum(&local(w, x), "b")).invoke(w),
            |w: &Var| grad(|w: &Var| all_reduce_sum(&local(w, x), "b")).invoke(w) * 2.0,
            w,
        )
    };
    let sharded = shard_map(branch, "b").in_axes((None, Some(0))).out_axes(None);
    let got = ok("grad in a cond branch", sharded.eval((&w, &xs)))?;
    let mut want = vals(&ok("grad", grad(local).eval((&w, &xs)))?);
    if vals(&w).iter().sum::<f64>() <= 0.0 {
        want.iter_mut().for_each(|v| *v *= 2.0);
    }
    close("grad in a cond branch", &vals(&got), &want, 1e-12)
}

/// Branches and loops whose choice or length depends on the rank (a
/// varying index or predicate, from `axis_index`), over replicated values
/// only: their results vary, so the replicated `w`'s cotangent is summed
/// over the ranks; and a `scan` and a `map` of replicated and varying
/// values. Against each rank's computation on one process, summed.
fn grad_through_per_rank_choices_matches_jax(g: &Group) -> Check {
    let p = g.size;
    let w = data(0, 60, &[3]);
    let xs = data(0, 61, &[2 * p, 3]);
    // The loss of rank `r` (a traced rank for the sharded run, a constant
    // for the reference).
    fn loss(w: &Var, x: &Var, rank: &Var) -> anvil::Result<Var> {
        let first = rank.lt(&rank.ones_like());
        let chosen =
            cond(&first, |w: &Var| (w * w).sum_all() * 2.0, |w: &Var| w.sin().sum_all(), w)?;
        let init = (rank.zeros_like(), w.clone());
        let bound = rank + 2i64;
        let (_, h) = while_loop_bounded(
            |(i, _): &(Var, Var)| i.lt(&bound),
            |(i, h): &(Var, Var)| (i + 1i64, h.sin() * w),
            &init,
            8,
        )?;
        let (r, ()) = scan_n(|c: &Var, _: &()| (c * &w.cos() + w, ()), w, 3)?;
        let mapped = map(|row: &Var, w: &Var| (row * w).sum_all().tanh())
            .in_axes([Some(0), None])
            .invoke((x, w));
        Ok(chosen + h.sum_all() + r.sum_all() + mapped.sum_all())
    }
    let f = |w: &Var, x: &Var| {
        grad(|w: &Var| Ok(all_reduce_sum(&loss(w, x, &anvil_mpi::axis_index(x, "b"))?, "b")))
            .invoke(w)
    };
    let sharded = shard_map(f, "b").in_axes((None, Some(0))).out_axes(None);
    let got = ok("per-rank choices in shard_map", sharded.eval((&w, &xs)))?;
    let mut want = vec![0.0; 3];
    for r in 0..p {
        let rank = Tensor::scalar(r as i64);
        let each = |w: &Var, x: &Var, rank: &Var| loss(w, x, rank);
        let part = ok("reference", grad(each).eval((&w, &block(&xs, r, p), &rank)))?;
        for (a, b) in want.iter_mut().zip(vals(&part)) {
            *a += b;
        }
    }
    close("grad through per-rank choices", &vals(&got), &want, 1e-12)
}

/// Custom-derivative functions within `shard_map`, with a `psum` inside
/// and a replicated argument: the rule's body is typed like the rest.
fn grad_through_custom_rules_matches_jax(g: &Group) -> Check {
    let p = g.size;
    let w = data(0, 58, &[3]);
    let xs = data(0, 59, &[2 * p, 3]);
    // psum(sum(softplus(x w))) with a custom jvp (psum inside the rule).
    let f = |w: &Var, x: &Var| {
        let softplus_total = custom_jvp(
            |w: &Var, x: &Var| all_reduce_sum(&x.matmul(w).exp().log1p().sum_all(), "b"),
            |(w, x): &(Var, Var), (tw, _): &(Var, Var)| {
                let z = x.matmul(w);
                let value = all_reduce_sum(&z.exp().log1p().sum_all(), "b");
                let tangent = all_reduce_sum(&(x.matmul(tw) * z.logistic()).sum_all(), "b");
                (value, tangent)
            },
        );
        grad(move |w: &Var| softplus_total.apply((w, x))).invoke(w)
    };
    let sharded = shard_map(f, "b").in_axes((None, Some(0))).out_axes(None);
    let got = ok("custom_jvp in shard_map", sharded.eval((&w, &xs)))?;
    let plain = |w: &Var, x: &Var| x.matmul(w).exp().log1p().sum_all();
    let want = ok("grad", grad(plain).eval((&w, &xs)))?;
    close("grad through a custom_jvp", &vals(&got), &vals(&want), 1e-12)?;
    // A custom vjp (the gradient of tanh, written out) of each rank's loss;
    // as in JAX, `bwd` gives the replicated `w` a replicated cotangent (its
    // psum over the ranks).
    let f = |w: &Var, x: &Var| {
        let tanh_sum = custom_vjp(
            |w: &Var, x: &Var| x.matmul(w).tanh().sum_all(),
            |w: &Var, x: &Var| (x.matmul(w).tanh().sum_all(), (x.clone(), x.matmul(w).tanh())),
            |(x, t): &(Var, Var), ct: &Var| {
                let dz = (t.square().neg() + 1.0) * ct;
                (all_reduce_sum(&dz.matmul(x), "b"), x.zeros_like())
            },
        );
        grad(move |w: &Var| Ok(all_reduce_sum(&tanh_sum.apply((w, x))?, "b"))).invoke(w)
    };
    let sharded = shard_map(f, "b").in_axes((None, Some(0))).out_axes(None);
    let got = ok("custom_vjp in shard_map", sharded.eval((&w, &xs)))?;
    let plain = |w: &Var, x: &Var| x.matmul(w).tanh().sum_all();
    let want = ok("grad", grad(plain).eval((&w, &xs)))?;
    close("grad through a custom_vjp", &vals(&got), &vals(&want), 1e-12)
}

/// The collectives the plan of `f` at `args` issues (after the passes that
/// drop dead work), by name: every op that communicates.
fn communication<M, F: IntoFunction<M>>(f: &F, args: impl anvil::Flatten<Tensor>) -> Vec<String> {
    const TALK: &[&str] = &[
        "mpi.all_reduce_sum",
        "mpi.all_reduce_max",
        "mpi.psum_replicated",
        "mpi.all_gather",
        "mpi.gather_replicated",
        "mpi.reduce_scatter",
        "mpi.broadcast",
        "mpi.sum_to_root",
    ];
    match anvil::lower(f, args) {
        Ok(g) => g
            .iter()
            .filter(|(_, n)| TALK.contains(&n.op.name()))
            .map(|(_, n)| format!("{}{:?}", n.op.name(), g.ty(n.out()).shape()))
            .collect(),
        Err(e) => vec![format!("error: {e}")],
    }
}

fn expect_talk(what: &str, got: Vec<String>, want: &[&str]) -> Check {
    if got.iter().map(String::as_str).eq(want.iter().copied()) {
        return Ok(());
    }
    Err(format!("{what}: the plan communicates {got:?}, expected {want:?}"))
}

/// shard_map's convention for replicated values: their cotangents are
/// replicated, so the transpose of a sum over the ranks, and the cotangent
/// of a replicated result, need no communication; the plans are counted.
fn replicated_cotangents_need_no_communication(g: &Group) -> Check {
    let p = g.size;
    // The data-parallel gradient: the one all-reduce is w's gradient (the
    // loss's cotangent reaches every rank's examples as it is).
    let loss = |w: &Var, x: &Var| (x.matmul(w).tanh() - 0.25).square().sum(&[0]);
    let w = data(0, 20, &[3]);
    let xs = data(0, 21, &[2 * p, 3]);
    let dp = grad(data_parallel(loss, "batch"));
    expect_talk("grad(data_parallel)", communication(&dp, (&w, &xs)), &["mpi.psum_replicated[3]"])?;
    close(
        "dp grad",
        &vals(&ok("dp", dp.eval((&w, &xs)))?),
        &vals(&ok("g", grad(loss).eval((&w, &xs)))?),
        1e-12,
    )?;
    // psum of a replicated value is x * p, with no communication either way.
    let f = shard_map(|w: &Var| all_reduce_sum(w, "b"), "b").in_axes(None).out_axes(None);
    expect_talk("psum of a replicated value", communication(&f, &w), &[])?;
    let want: Vec<f64> = vals(&w).iter().map(|v| v * p as f64).collect();
    close("psum of a replicated value", &vals(&ok("psum(w)", f.eval(&w))?), &want, 1e-15)?;
    let sum_f = |w: &Var| {
        shard_map(|w: &Var| all_reduce_sum(w, "b"), "b")
            .in_axes(None)
            .out_axes(None)
            .invoke(w)
            .sum_all()
    };
    expect_talk("its gradient", communication(&grad(sum_f), &w), &[])?;
    close(
        "its gradient",
        &vals(&ok("grad psum(w)", grad(sum_f).eval(&w))?),
        &[p as f64; 3],
        1e-15,
    )?;
    // A replicated result of sharded work: its cotangent goes back to every
    // rank's block as it is; the blocks' cotangents are gathered (the one
    // collective, all-gathering the sharded argument's gradient).
    let sq = |x: &Var| {
        shard_map(|x: &Var| all_reduce_sum(&x.square().sum_all(), "b"), "b")
            .out_axes(None)
            .invoke(x)
    };
    let x = data(0, 22, &[2 * p]);
    let gx = grad(sq);
    let shape = format!("mpi.gather_replicated[{}]", 2 * p);
    expect_talk("grad of a replicated result", communication(&gx, &x), &[&shape])?;
    let want: Vec<f64> = vals(&x).iter().map(|v| 2.0 * v).collect();
    close("grad of a replicated result", &vals(&ok("grad sq", gx.eval(&x))?), &want, 1e-14)?;
    // A gathered result: its cotangent's block is taken locally.
    let twice = |x: &Var| {
        (shard_map(|x: &Var| x * 2.0, "b").invoke(x) * x.tracer().constant(data(0, 23, &[2 * p])))
            .sum_all()
    };
    expect_talk("grad of a gathered result", communication(&grad(twice), &x), &[&shape])?;
    let u = vals(&data(0, 23, &[2 * p]));
    let want: Vec<f64> = u.iter().map(|v| 2.0 * v).collect();
    close(
        "grad of a gathered result",
        &vals(&ok("grad twice", grad(twice).eval(&x))?),
        &want,
        1e-14,
    )
}

/// The dot-product test of sharded functions, whose arguments and results
/// are replicated (counted once): `<u, L x> = <Lᵀ u, x>` with `Lᵀ u` from
/// `grad`, each `L` through replicated, sharded and gathered values.
fn typed_transposes_pass_the_dot_product_test(g: &Group) -> Check {
    let p = g.size;
    let xs = data(0, 31, &[2 * p, 3]);
    let w = data(0, 32, &[3]);
    let (xc, wc) = (xs.clone(), w.clone());
    // Sharded in, summed over the ranks, replicated out.
    let l = |x: &Var| {
        shard_map(|x: &Var| all_reduce_sum(&x.sum(&[0]), "b"), "b").out_axes(None).invoke(x)
    };
    typed_dot("sharded -> psum", l, &xs)?;
    // Replicated in (w), with each rank's rows, summed: linear in w.
    let l = move |w: &Var| {
        let x = w.tracer().constant(xc.clone());
        shard_map(|w: &Var, x: &Var| all_reduce_sum(&x.matmul(w), "b"), "b")
            .in_axes((None, Some(0)))
            .out_axes(None)
            .invoke((w, &x))
    };
    typed_dot("replicated -> pvary -> psum", l, &w)?;
    // Sharded in, gathered out, mixed with a replicated w.
    let l = move |x: &Var| {
        let w = x.tracer().constant(wc.clone());
        shard_map(|x: &Var, w: &Var| x * w, "b").in_axes((Some(0), None)).invoke((x, &w))
    };
    typed_dot("sharded -> gathered", l, &xs)?;
    // Replicated in, gathered (p copies) out.
    let l = |w: &Var| {
        shard_map(|w: &Var| all_gather(&(w * 3.0), "b", 0), "b")
            .in_axes(None)
            .out_axes(None)
            .invoke(w)
    };
    typed_dot("replicated -> gathered", l, &w)
}

/// `<u, L x>` against `<Lᵀ u, x>` (`Lᵀ u` from `grad`), both replicated.
fn typed_dot<L: Fn(&Var) -> Var + Clone + 'static>(what: &str, l: L, x: &Tensor) -> Check {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let y = ok(what, l.clone().eval(x))?;
    let u = data(0, 30, y.shape());
    let uu = u.clone();
    let lt_u =
        ok(what, grad(move |x: &Var| (l(x) * x.tracer().constant(uu.clone())).sum_all()).eval(x))?;
    let (a, b) = (dot(&vals(&u), &vals(&y)), dot(&vals(&lt_u), &vals(x)));
    close(&format!("{what}: <u, Lx> vs <Ltu, x>"), &[a], &[b], 1e-12)
}

/// Under `vmap_named`, a collective of an operand that does not vary along
/// the batch acts on a batch of equal elements (JAX: `psum(c) = c * size`).
fn vmap_named_unbatched_operands(_: &Group) -> Check {
    let x = data(0, 40, &[3, 2]);
    let c = data(0, 41, &[2]);
    let cv = vals(&c);
    let cc = c.clone();
    let f =
        vmap_named(move |r: &Var| r + all_reduce_sum(&r.tracer().constant(cc.clone()), "i"), "i");
    let want: Vec<f64> = vals(&x).iter().enumerate().map(|(i, v)| v + 3.0 * cv[i % 2]).collect();
    close("psum of a constant", &vals(&ok("psum c", f.eval(&x))?), &want, 1e-15)?;
    // An unmapped argument: gathered, summed, scattered, maximised, broadcast.
    let both = |h: fn(&Var) -> Var| {
        vmap_named(move |_r: &Var, c: &Var| h(c), "i").in_axes((Some(0), None))
    };
    let gathered = ok("gather c", both(|c| all_gather(c, "i", 0)).eval((&x, &c)))?;
    let want: Vec<f64> = (0..3).flat_map(|_| (0..3).flat_map(|_| cv.clone())).collect();
    close("all_gather of an unmapped argument", &vals(&gathered), &want, 0.0)?;
    let c6 = data(0, 42, &[6]);
    let c6v = vals(&c6);
    let scattered = ok("scatter c", both(|c| reduce_scatter(c, "i", 0)).eval((&x, &c6)))?;
    let want: Vec<f64> = c6v.iter().map(|v| 3.0 * v).collect();
    close("reduce_scatter of an unmapped argument", &vals(&scattered), &want, 1e-15)?;
    let mx = ok("max c", both(|c| all_reduce_max(c, "i")).eval((&x, &c)))?;
    let want: Vec<f64> = (0..3).flat_map(|_| cv.clone()).collect();
    close("all_reduce_max of an unmapped argument", &vals(&mx), &want, 0.0)?;
    let bc = ok("broadcast c", both(|c| broadcast(c, "i", 2)).eval((&x, &c)))?;
    close("broadcast of an unmapped argument", &vals(&bc), &want, 0.0)?;
    // Its gradient: d/dc sum_i psum(c) * x_i = 3 * sum_i x_i.
    let h = |c: &Var, x: &Var| {
        vmap_named(|r: &Var, c: &Var| all_reduce_sum(c, "i") * r, "i")
            .in_axes((Some(0), None))
            .invoke((x, c))
            .sum_all()
    };
    let gc = ok("grad c", grad(h).eval((&c, &x)))?;
    let xv = vals(&x);
    let want: Vec<f64> = (0..2).map(|j| 3.0 * (0..3).map(|i| xv[i * 2 + j]).sum::<f64>()).collect();
    close("grad through psum of an unmapped argument", &vals(&gc), &want, 1e-14)
}

/// The conformance kit's vmap, jvp and vmap-of-jvp checks on every
/// collective over the processes (each rank holds the same sample, so the
/// checks' per-rank comparisons hold; the transposes are checked across
/// ranks by the dot-product test above, and by the kit on one process in
/// `tests/conformance.rs`).
fn conformance_kit_on_the_mesh(g: &Group) -> Check {
    use anvil_mpi::{
        AllGather, AllReduce, Axis, AxisKind, Broadcast, GatherReplicated, PsumReplicated, Pvary,
        Reduce, ReduceScatter, Replicated, SumToRoot, TakeShard,
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
        sample(Box::new(Pvary { axis: axis.clone() }), &[2, 3]),
        sample(Box::new(PsumReplicated { axis: axis.clone() }), &[2, 3]),
        sample(Box::new(GatherReplicated { axis: axis.clone(), dim: 1 }), &[2, 3]),
        sample(Box::new(TakeShard { axis: axis.clone(), dim: 0 }), &[2 * p, 3]),
        sample(Box::new(Replicated { axis: axis.clone(), transposed: true }), &[2, 3]),
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
    // A Jacobian basis of p + 1 directions does not split either.
    let r = jacfwd_sharded(|x: &Var| x.sin(), "basis").eval(&xs);
    expect_err("indivisible basis", r, &["jacfwd_sharded", "not divisible"])?;
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
        ("grad_inside_the_body_matches_jax", grad_inside_the_body_matches_jax),
        ("grad_through_control_flow_matches_jax", grad_through_control_flow_matches_jax),
        ("grad_inside_control_flow_matches_jax", grad_inside_control_flow_matches_jax),
        ("grad_through_custom_rules_matches_jax", grad_through_custom_rules_matches_jax),
        ("grad_through_per_rank_choices_matches_jax", grad_through_per_rank_choices_matches_jax),
        ("conformance_kit_on_the_mesh", conformance_kit_on_the_mesh),
        (
            "replicated_cotangents_need_no_communication",
            replicated_cotangents_need_no_communication,
        ),
        ("typed_transposes_pass_the_dot_product_test", typed_transposes_pass_the_dot_product_test),
        ("vmap_named_unbatched_operands", vmap_named_unbatched_operands),
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
