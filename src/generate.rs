//! Generated test matrices, addressed by specs such as `poisson2d:N`.
