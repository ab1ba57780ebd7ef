// The special functions behind Erfc, Erfinv, Ndtri, Lgamma and Digamma, in double (the kernels
// round once to the element type). Exposed for their unit tests.
#pragma once

namespace xlens::graph::special {

double Erfc(double x);
// The inverse of erf on [-1, 1]: +-inf at +-1, NaN outside.
double Erfinv(double y);
// The standard normal quantile on [0, 1]: -inf at 0, inf at 1, NaN outside.
double Ndtri(double p);
double Lgamma(double x);
// psi(x); NaN at the poles (0, -1, -2, ...) as TensorFlow's kernel gives.
double Digamma(double x);
// The Hurwitz zeta function sum_k (q + k)^-x (x > 1).
double Zeta(double x, double q);
// The n-th derivative of digamma (n a non-negative integer, else NaN).
double Polygamma(double n, double x);

}  // namespace xlens::graph::special
