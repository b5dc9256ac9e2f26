//! Samples of the matrix functions of `anvil::linalg` (`matrix_power`,
//! `expm`, `multi_dot`), as the bodies of one-step `map`s (see
//! `subscript_samples`), so that the kit checks what they are built from
//! under every transform: vmap against a loop, jvp against finite
//! differences, the transpose dot test. `expm` runs through its `cond`s:
//! the Padé order and the number of squarings chosen from the data.

use super::subscript_samples::{one_step, stepped};
use super::{InputKind, OpSample};
use anvil::{linalg, DType};

const SYM: InputKind = InputKind::Uniform { lo: -1.0, hi: 1.0 };

/// Every sample of the matrix functions.
pub(super) fn matfun_samples(s: &mut Vec<OpSample>) {
    let f = DType::F64;
    let m3: &[usize] = &[3, 3];
    // Binary exponentiation, and the inverse's square.
    let cube = one_step(&|v| linalg::matrix_power(&v[0], 3), &[(m3, f)]);
    s.push(OpSample::new(cube).input(InputKind::WellConditioned, &stepped(m3)));
    let inv2 = one_step(&|v| linalg::matrix_power(&v[0], -2), &[(m3, f)]);
    s.push(OpSample::new(inv2).input(InputKind::WellConditioned, &stepped(m3)));
    // expm of a moderate norm (‖A‖₁ < 3: Padé order 7, 9 or 13, unscaled),
    // and of 4·A for a diagonally dominant A (‖4A‖₁ ≈ 20: two squarings).
    let moderate = one_step(&|v| linalg::expm(&v[0]), &[(m3, f)]);
    s.push(OpSample::new(moderate).input(SYM, &stepped(m3)));
    let squared = one_step(&|v| linalg::expm(&(&v[0] * 4.0)), &[(m3, f)]);
    s.push(OpSample::new(squared).input(InputKind::WellConditioned, &stepped(m3)));
    // Three matrices, associated as (AB)C (cheaper here than A(BC)).
    let shapes: &[(&[usize], DType)] = &[(&[2, 4], f), (&[4, 3], f), (&[3, 3], f)];
    let chain = one_step(&|v| linalg::multi_dot(&[&v[0], &v[1], &v[2]]), shapes);
    s.push(
        OpSample::new(chain)
            .input(SYM, &stepped(&[2, 4]))
            .input(SYM, &stepped(&[4, 3]))
            .input(SYM, &stepped(&[3, 3])),
    );
}
