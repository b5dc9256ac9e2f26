//! Diagnostics go through the `log` facade: the one-time `map` fallback
//! and dense-sparsity warnings at `warn`, compile timings at `debug`. A
//! tiny logger records what it is given. (Its own test binary: the logger
//! is process-wide.)

use anvil::prelude::*;
use anvil::sparse::jacobian_sparsity;
use anvil::{Op, TensorType};
use std::sync::Mutex;

static RECORDS: Mutex<Vec<(log::Level, String, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        let entry = (r.level(), r.target().to_string(), r.args().to_string());
        RECORDS.lock().unwrap().push(entry);
    }
    fn flush(&self) {}
}

fn records_with(text: &str) -> Vec<(log::Level, String, String)> {
    RECORDS.lock().unwrap().iter().filter(|r| r.2.contains(text)).cloned().collect()
}

/// An op with a kernel and no batching or sparsity rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Cube;

impl Op for Cube {
    fn name(&self) -> &'static str {
        "test.logged_cube"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        anvil::core::op::expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
}

fn cube_kernel(
    _op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _ctx: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    let v = inputs[0].as_slice::<f64>()?.iter().map(|x| x * x * x).collect();
    Tensor::from_vec(v, out.shape())
}

anvil::cpu::register_kernel!(Cube, cube_kernel);

#[test]
fn warnings_and_timings_are_log_records() {
    log::set_logger(&Capture).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    let xs = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let f = |x: &Var| x.apply(Cube, &[]);

    // vmap of an op without a batching rule: one warning, however often.
    let y = vmap(f).eval(&xs).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![1.0, 8.0, 27.0, 64.0]);
    let _ = vmap(f).eval(&xs).unwrap();
    let warned = records_with("`test.logged_cube` has no batching rule");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].0, log::Level::Warn);
    assert!(warned[0].1.starts_with("anvil_transforms"), "{warned:?}");

    // Sparsity detection through an op without a sparsity rule.
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let p = jacobian_sparsity(&f, &x).unwrap();
    assert_eq!(p.nnz(), 9);
    let warned = records_with("`test.logged_cube` has no sparsity rule");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].0, log::Level::Warn);

    // Compile timings at debug level, naming the stages.
    let _ = jit(|x: &Var| x.sin() * 2.0).eval(&x).unwrap();
    let timings = records_with("trace and transforms");
    assert!(!timings.is_empty());
    let (level, target, text) = &timings[timings.len() - 1];
    assert_eq!((*level, target.as_str()), (log::Level::Debug, "anvil_transforms::pipeline"));
    assert!(text.contains("optimise") && text.contains("plan"), "{text}");
}
