//! Samples of `anvil::nn`, as the bodies of one-step `map`s (see
//! `subscript_samples`), so the kit checks them under every transform:
//! vmap against a loop, jvp against finite differences, the transpose dot
//! test. One sample per structure, the functions of a structure stacked
//! into one result: the smooth ones; the double-`where` exponentials with a
//! kink at 0 (inputs away from it); the piecewise ones with kinks at
//! multiples of 1/2 (inputs off that grid); `log1mexp` across its switch at
//! `log 2`; `glu`, `logmeanexp` and `standardize` along axes; `one_hot`.

use super::subscript_samples::{one_step, stepped};
use super::{InputKind, OpSample};
use anvil::{nn, stack, DType, Var};

const F: DType = DType::F64;

/// The results of `fs` at `x`, stacked along a new leading axis.
fn stacked(x: &Var, fs: &[fn(&Var) -> Var]) -> Var {
    let ys: Vec<Var> = fs.iter().map(|f| f(x)).collect();
    stack(&ys.iter().collect::<Vec<_>>(), 0)
}

/// Every sample of `anvil::nn`.
pub(super) fn nn_samples(s: &mut Vec<OpSample>) {
    elementwise_samples(s);
    axis_samples(s);
}

fn elementwise_samples(s: &mut Vec<OpSample>) {
    let shape: &[usize] = &[3, 4];
    let smooth = one_step(
        &|v| {
            stacked(
                &v[0],
                &[
                    nn::softplus,
                    nn::log_sigmoid,
                    nn::silu,
                    nn::mish,
                    |x| nn::gelu(x, true),
                    |x| nn::gelu(x, false),
                    |x| nn::squareplus(x, 0.5),
                ],
            )
        },
        &[(shape, F)],
    );
    s.push(OpSample::new(smooth).input(InputKind::Uniform { lo: -3.0, hi: 3.0 }, &stepped(shape)));
    // Kinks at 0 (of the derivative, or of the second for `soft_sign`).
    let at_zero = one_step(
        &|v| {
            stacked(
                &v[0],
                &[
                    nn::relu,
                    |x| nn::elu(x, 0.7),
                    |x| nn::celu(x, 1.3),
                    nn::selu,
                    |x| nn::leaky_relu(x, 0.2),
                    nn::soft_sign,
                ],
            )
        },
        &[(shape, F)],
    );
    let away = InputKind::AwayFromZero { lo: 0.1, hi: 3.0 };
    s.push(OpSample::new(at_zero).input(away, &stepped(shape)));
    // Kinks at -3, -1, 0, 1, 3 and 6.
    let piecewise = one_step(
        &|v| {
            stacked(
                &v[0],
                &[
                    nn::relu6,
                    nn::hard_tanh,
                    nn::hard_sigmoid,
                    nn::hard_silu,
                    nn::sparse_plus,
                    nn::sparse_sigmoid,
                ],
            )
        },
        &[(shape, F)],
    );
    let off_grid = InputKind::OffGrid { lo: -5.0, hi: 8.0 };
    s.push(OpSample::new(piecewise).input(off_grid, &stepped(shape)));
    let log1mexp = one_step(&|v| nn::log1mexp(&v[0]), &[(shape, F)]);
    let positive = InputKind::Uniform { lo: 0.2, hi: 2.0 };
    s.push(OpSample::new(log1mexp).input(positive, &stepped(shape)));
}

fn axis_samples(s: &mut Vec<OpSample>) {
    let sym = InputKind::Uniform { lo: -2.0, hi: 2.0 };
    let glu = one_step(&|v| nn::glu(&v[0], 0), &[(&[4, 3], F)]);
    s.push(OpSample::new(glu).input(sym.clone(), &stepped(&[4, 3])));
    let lme = one_step(&|v| nn::logmeanexp(&v[0], &[-1], true), &[(&[3, 4], F)]);
    s.push(OpSample::new(lme).input(sym.clone(), &stepped(&[3, 4])));
    let standardize = one_step(&|v| nn::standardize(&v[0], &[0, 1], 1e-5), &[(&[3, 4], F)]);
    s.push(OpSample::new(standardize).input(sym, &stepped(&[3, 4])));
    // Ids in and out of `0..5`: rows of zeros for -2, -1, 5 and 6.
    let one_hot = one_step(&|v| nn::one_hot(&v[0], 5, F), &[(&[3, 4], DType::I64)]);
    s.push(OpSample::new(one_hot).input(InputKind::Int { lo: -2, hi: 7 }, &[1, 3, 4]));
}
