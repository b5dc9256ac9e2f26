//! Samples of `anvil::numpy`, as the bodies of one-step `map`s (see
//! `subscript_samples`), so the kit checks them under every transform:
//! one per structure they are built from — slices and a concatenation
//! (`roll`), broadcasts and reshapes (`tile`, `repeat`, `kron`), diagonals
//! and batched products (`einsum`), a sort (`quantile`), a binary search
//! and gathers (`interp`), a gather of windows and a product (`convolve`),
//! `where` around branches that overflow (`logaddexp`, `hypot`); and one
//! of `anvil::special` (Lanczos' sum, the digamma series and reflection).

use super::subscript_samples::{one_step, stepped};
use super::{InputKind, OpSample};
use anvil::numpy as jnp;
use anvil::special;
use anvil::{DType, Tensor, VarExt};

const SYM: InputKind = InputKind::Uniform { lo: -1.0, hi: 1.0 };

/// Every sample of `anvil::numpy`.
pub(super) fn numpy_samples(s: &mut Vec<OpSample>) {
    let f = DType::F64;
    let roll = one_step(&|v| jnp::roll_axes(&v[0], &[1, -2], &[0, 1]), &[(&[3, 4], f)]);
    s.push(OpSample::new(roll).input(SYM, &stepped(&[3, 4])));
    let tile = one_step(
        &|v| jnp::kron(&jnp::tile(&v[0], &[2, 1]), &jnp::repeat(&v[1], 2, Some(0))),
        &[(&[2, 3], f), (&[2], f)],
    );
    s.push(OpSample::new(tile).input(SYM, &stepped(&[2, 3])).input(SYM, &stepped(&[2])));
    // A diagonal, a batch label, a contraction and a sum over a label only
    // one operand has.
    let einsum = one_step(
        &|v| jnp::einsum("iij,jkl,lk->ji", &[&v[0], &v[1], &v[2]]),
        &[(&[2, 2, 3], f), (&[3, 2, 2], f), (&[2, 2], f)],
    );
    s.push(
        OpSample::new(einsum)
            .input(SYM, &stepped(&[2, 2, 3]))
            .input(SYM, &stepped(&[3, 2, 2]))
            .input(SYM, &stepped(&[2, 2])),
    );
    let cross = one_step(&|v| jnp::cross(&v[0], &v[1], 0), &[(&[3, 2], f), (&[3, 1], f)]);
    s.push(OpSample::new(cross).input(SYM, &stepped(&[3, 2])).input(SYM, &stepped(&[3, 1])));
    // Order statistics: distinct values, so the sort has no ties.
    let quantile = one_step(
        &|v| jnp::quantiles(&v[0], &[0.3, 0.5], Some(1), jnp::QuantileMethod::Linear, false),
        &[(&[2, 5], f)],
    );
    s.push(OpSample::new(quantile).input(InputKind::Distinct { offset: 0.0 }, &stepped(&[2, 5])));
    // Points between the knots 0, 0.5 and 1 (no knot within a step of them).
    let interp = one_step(
        &|v| jnp::interp(&v[0], &v[1], &v[2], None, None),
        &[(&[4], f), (&[3], f), (&[3], f)],
    );
    let knots = Tensor::from_vec(vec![0.0, 0.5, 1.0], &[1, 3]).expect("literal");
    s.push(
        OpSample::new(interp)
            .input(InputKind::Uniform { lo: 0.55, hi: 0.95 }, &stepped(&[4]))
            .given(knots, InputKind::Fixed)
            .input(SYM, &stepped(&[3])),
    );
    let convolve = one_step(
        &|v| jnp::convolve(&v[0], &v[1], jnp::ConvolveMode::Same),
        &[(&[5], f), (&[3], f)],
    );
    s.push(OpSample::new(convolve).input(SYM, &stepped(&[5])).input(SYM, &stepped(&[3])));
    // Both sides of 1/2 (Lanczos' sum, the reflection), away from poles.
    let gamma = one_step(
        &|v| special::gammaln(&v[0]) * special::digamma(&v[0]) + special::xlogy(&v[1], &v[0].abs()),
        &[(&[2, 3], f), (&[2, 3], f)],
    );
    s.push(
        OpSample::new(gamma)
            .input(InputKind::Uniform { lo: -0.9, hi: 3.0 }, &stepped(&[2, 3]))
            .input(SYM, &stepped(&[2, 3])),
    );
    // ndtri's central and tail approximations; log_ndtr's asymptotic
    // series (below -20) and its log(ndtr(x)) (above), away from the
    // seams between them.
    let normal = one_step(
        &|v| special::ndtri(&v[0]) + special::log_ndtr(&v[1]) * special::log_ndtr(&v[2]),
        &[(&[2, 3], f), (&[2, 3], f), (&[2, 3], f)],
    );
    s.push(
        OpSample::new(normal)
            .input(InputKind::Uniform { lo: 0.02, hi: 0.98 }, &stepped(&[2, 3]))
            .input(InputKind::Uniform { lo: -30.0, hi: -21.0 }, &stepped(&[2, 3]))
            .input(InputKind::Uniform { lo: -18.0, hi: 7.0 }, &stepped(&[2, 3])),
    );
    // polygamma's direct terms and its Euler–Maclaurin tail.
    let polygamma = one_step(&|v| special::polygamma(2, &v[0]), &[(&[2, 3], f)]);
    s.push(
        OpSample::new(polygamma).input(InputKind::Uniform { lo: 0.3, hi: 14.0 }, &stepped(&[2, 3])),
    );
    let smooth = one_step(
        &|v| jnp::logaddexp(&v[0], &v[1]) * jnp::hypot(&v[0], &v[1]),
        &[(&[2, 3], f), (&[2, 3], f)],
    );
    s.push(
        OpSample::new(smooth)
            .input(InputKind::Distinct { offset: 0.0 }, &stepped(&[2, 3]))
            .input(InputKind::Distinct { offset: 0.5 }, &stepped(&[2, 3])),
    );
}
