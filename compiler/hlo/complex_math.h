// Complex functions whose textbook formula loses precision near zero, written once for the
// reference evaluator and for the runtime functions compiled code calls, so both round alike.
#pragma once

#include <cmath>
#include <complex>

namespace xlens {

// exp(z) - 1: exp(x)cos(y) - 1 = expm1(x)cos(y) - 2sin^2(y/2), without cancellation near 0.
template <typename T>
T ComplexExpm1(T z) {
  using C = typename T::value_type;
  const C x = z.real(), y = z.imag();
  const C half_sin = std::sin(y / 2);
  return T(std::expm1(x) * std::cos(y) - 2 * half_sin * half_sin, std::exp(x) * std::sin(y));
}

// log(1 + z): log|1+z| = log1p(x(2+x) + y^2)/2, without cancellation near 0.
template <typename T>
T ComplexLog1p(T z) {
  using C = typename T::value_type;
  const C x = z.real(), y = z.imag();
  return T(std::log1p(x * (2 + x) + y * y) / 2, std::atan2(y, 1 + x));
}

}  // namespace xlens
