#include "compiler/graph/philox_random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace xlens::graph {
namespace {

// Philox4x32 constants: the Weyl increments of the key and the round multipliers.
constexpr uint32_t kPhiloxW32A = 0x9E3779B9;
constexpr uint32_t kPhiloxW32B = 0xBB67AE85;
constexpr uint32_t kPhiloxM4x32A = 0xD2511F53;
constexpr uint32_t kPhiloxM4x32B = 0xCD9E8D57;
constexpr int kPhiloxRounds = 10;

PhiloxRandom::ResultType SingleRound(const PhiloxRandom::ResultType& c,
                                     const PhiloxRandom::Key& k) {
  const uint64_t p0 = uint64_t{kPhiloxM4x32A} * c[0];
  const uint64_t p1 = uint64_t{kPhiloxM4x32B} * c[2];
  const auto lo0 = static_cast<uint32_t>(p0), hi0 = static_cast<uint32_t>(p0 >> 32);
  const auto lo1 = static_cast<uint32_t>(p1), hi1 = static_cast<uint32_t>(p1 >> 32);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

// --- words to values (TensorFlow's random_distributions_utils.h) ---

// 23 random mantissa bits under the exponent of 1.0, minus 1: [0, 1) in steps of 2^-23.
float Uint32ToFloat(uint32_t x) {
  const uint32_t bits = (uint32_t{127} << 23) | (x & 0x7fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f - 1.0f;
}

// 52 mantissa bits: the low 20 bits of x0 on top, all of x1 below.
double Uint64ToDouble(uint32_t x0, uint32_t x1) {
  const uint64_t bits =
      (uint64_t{1023} << 52) | (uint64_t{x0 & 0xfffffu} << 32) | uint64_t{x1};
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d - 1.0;
}

constexpr double kPi = 3.14159265358979323846;

void BoxMullerFloat(uint32_t x0, uint32_t x1, float* f0, float* f1) {
  const float epsilon = 1.0e-7f;
  float u1 = Uint32ToFloat(x0);
  if (u1 < epsilon) u1 = epsilon;
  // TensorFlow writes 2.0f * M_PI * u: the product is taken in double, then rounded to float.
  const float v1 = static_cast<float>(2.0 * kPi * static_cast<double>(Uint32ToFloat(x1)));
  const float u2 = std::sqrt(-2.0f * std::log(u1));  // float overloads: sqrtf, logf
  ::sincosf(v1, f0, f1);
  *f0 *= u2;
  *f1 *= u2;
}

void BoxMullerDouble(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double* d0, double* d1) {
  const double epsilon = 1.0e-7;
  double u1 = Uint64ToDouble(x0, x1);
  if (u1 < epsilon) u1 = epsilon;
  const double v1 = 2 * kPi * Uint64ToDouble(x2, x3);
  const double u2 = std::sqrt(-2.0 * std::log(u1));
  ::sincos(v1, d0, d1);
  *d0 *= u2;
  *d1 *= u2;
}

// lo + offset without signed overflow; the same value as TensorFlow's SignedAdd.
template <typename Int, typename UInt>
Int AddOffset(Int lo, UInt offset) {
  return static_cast<Int>(static_cast<UInt>(lo) + offset);
}

// --- FillPhiloxRandom (TensorFlow's random_op_cpu.h) ---

// A distribution that takes one generator call per group of kGroupSize outputs: group g is the
// g-th call.
template <int kGroupSize, typename T, typename Dist>
void FillFixed(PhiloxRandom gen, T* out, int64_t n, Dist dist) {
  const int64_t full_groups = n / kGroupSize;
  std::array<T, kGroupSize> samples;
  for (int64_t g = 0; g < full_groups; ++g) {
    dist(gen(), &samples);
    std::copy(samples.begin(), samples.end(), out + g * kGroupSize);
  }
  const int64_t rest = n - full_groups * kGroupSize;
  if (rest > 0) {
    dist(gen(), &samples);
    std::copy(samples.begin(), samples.begin() + rest, out + full_groups * kGroupSize);
  }
}

// TensorFlow's SingleSampleAdapter<PhiloxRandom>: hands out one word at a time, drawing four
// at a time.
class SingleSampleAdapter {
 public:
  explicit SingleSampleAdapter(PhiloxRandom* gen) : gen_(gen) {}
  uint32_t operator()() {
    if (used_ == PhiloxRandom::kResultElementCount) {
      unused_ = (*gen_)();
      used_ = 0;
    }
    return unused_[used_++];
  }

 private:
  PhiloxRandom* gen_;
  PhiloxRandom::ResultType unused_{};
  int used_ = PhiloxRandom::kResultElementCount;
};

// A distribution whose samples per output vary (rejection): group g starts from the base
// generator skipped by the calls 256 samples per output would take, whatever the groups before
// it used.
template <int kGroupSize, typename T, typename Dist>
void FillVariable(const PhiloxRandom& base, T* out, int64_t n, Dist dist) {
  constexpr int64_t kSkipPerGroup =
      kGroupSize * GuardedPhilox::kReservedSamplesPerOutput / PhiloxRandom::kResultElementCount;
  const int64_t groups = (n + kGroupSize - 1) / kGroupSize;
  std::array<T, kGroupSize> samples;
  for (int64_t g = 0; g < groups; ++g) {
    PhiloxRandom gen = base;
    gen.Skip(static_cast<uint64_t>(g) * kSkipPerGroup);
    SingleSampleAdapter single(&gen);
    dist(single, &samples);
    const int64_t count = std::min<int64_t>(kGroupSize, n - g * kGroupSize);
    std::copy(samples.begin(), samples.begin() + count, out + g * kGroupSize);
  }
}

uint64_t NondeterministicSeed() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

}  // namespace

PhiloxRandom::PhiloxRandom(uint64_t seed) {
  key_ = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

PhiloxRandom::PhiloxRandom(uint64_t seed_lo, uint64_t seed_hi) : PhiloxRandom(seed_lo) {
  counter_[2] = static_cast<uint32_t>(seed_hi);
  counter_[3] = static_cast<uint32_t>(seed_hi >> 32);
}

void PhiloxRandom::Skip(uint64_t count) {
  // Add count to the low 64 bits of the counter and carry into the high 64 bits.
  const auto count_lo = static_cast<uint32_t>(count);
  auto count_hi = static_cast<uint32_t>(count >> 32);
  counter_[0] += count_lo;
  if (counter_[0] < count_lo) ++count_hi;
  counter_[1] += count_hi;
  if (counter_[1] < count_hi) {
    if (++counter_[2] == 0) ++counter_[3];
  }
}

PhiloxRandom::ResultType PhiloxRandom::operator()() {
  ResultType c = counter_;
  Key k = key_;
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      k[0] += kPhiloxW32A;
      k[1] += kPhiloxW32B;
    }
    c = SingleRound(c, k);
  }
  // Move the 128-bit counter on by one.
  for (uint32_t& word : counter_) {
    if (++word != 0) break;
  }
  return c;
}

void GuardedPhilox::Init(int64_t seed, int64_t seed2) {
  if (seed == 0 && seed2 == 0) {
    seed = static_cast<int64_t>(NondeterministicSeed());
    seed2 = static_cast<int64_t>(NondeterministicSeed());
  }
  generator_ = PhiloxRandom(static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2));
  initialized_ = true;
}

void GuardedPhilox::Init(const PhiloxRandom::ResultType& counter, const PhiloxRandom::Key& key) {
  generator_ = PhiloxRandom(counter, key);
  initialized_ = true;
}

PhiloxRandom GuardedPhilox::ReserveSamples128(int64_t samples) {
  PhiloxRandom local = generator_;
  generator_.Skip(static_cast<uint64_t>(samples));
  return local;
}

PhiloxRandom GuardedPhilox::ReserveRandomOutputs(int64_t output_count, int multiplier) {
  return ReserveSamples128(output_count * multiplier);
}

void FillUniform(const PhiloxRandom& gen, float* out, int64_t n) {
  FillFixed<4>(gen, out, n, [](const PhiloxRandom::ResultType& s, std::array<float, 4>* r) {
    for (int i = 0; i < 4; ++i) (*r)[i] = Uint32ToFloat(s[i]);
  });
}

void FillUniform(const PhiloxRandom& gen, double* out, int64_t n) {
  FillFixed<2>(gen, out, n, [](const PhiloxRandom::ResultType& s, std::array<double, 2>* r) {
    for (int i = 0; i < 2; ++i) (*r)[i] = Uint64ToDouble(s[2 * i], s[2 * i + 1]);
  });
}

void FillNormal(const PhiloxRandom& gen, float* out, int64_t n) {
  FillFixed<4>(gen, out, n, [](const PhiloxRandom::ResultType& s, std::array<float, 4>* r) {
    BoxMullerFloat(s[0], s[1], &(*r)[0], &(*r)[1]);
    BoxMullerFloat(s[2], s[3], &(*r)[2], &(*r)[3]);
  });
}

void FillNormal(const PhiloxRandom& gen, double* out, int64_t n) {
  FillFixed<2>(gen, out, n, [](const PhiloxRandom::ResultType& s, std::array<double, 2>* r) {
    BoxMullerDouble(s[0], s[1], s[2], s[3], &(*r)[0], &(*r)[1]);
  });
}

void FillTruncatedNormal(const PhiloxRandom& gen, float* out, int64_t n) {
  FillVariable<4>(gen, out, n, [](SingleSampleAdapter& single, std::array<float, 4>* r) {
    const float kTruncateValue = 2.0f;
    int index = 0;
    while (true) {
      const uint32_t x0 = single();
      const uint32_t x1 = single();
      float f[2];
      BoxMullerFloat(x0, x1, &f[0], &f[1]);
      for (float v : f) {
        if (std::fabs(v) < kTruncateValue) {
          (*r)[index++] = v;
          if (index == 4) return;
        }
      }
    }
  });
}

void FillTruncatedNormal(const PhiloxRandom& gen, double* out, int64_t n) {
  FillVariable<2>(gen, out, n, [](SingleSampleAdapter& single, std::array<double, 2>* r) {
    const double kTruncateValue = 2.0;
    int index = 0;
    while (true) {
      const uint32_t x0 = single();
      const uint32_t x1 = single();
      const uint32_t x2 = single();
      const uint32_t x3 = single();
      double d[2];
      BoxMullerDouble(x0, x1, x2, x3, &d[0], &d[1]);
      for (double v : d) {
        if (std::fabs(v) < kTruncateValue) {
          (*r)[index++] = v;
          if (index == 2) return;
        }
      }
    }
  });
}

void FillUniformInt(const PhiloxRandom& gen, int32_t lo, int32_t hi, int32_t* out, int64_t n) {
  const uint32_t range = static_cast<uint32_t>(hi) - static_cast<uint32_t>(lo);
  FillFixed<4>(gen, out, n,
               [lo, range](const PhiloxRandom::ResultType& s, std::array<int32_t, 4>* r) {
                 for (int i = 0; i < 4; ++i) (*r)[i] = AddOffset(lo, s[i] % range);
               });
}

void FillUniformInt(const PhiloxRandom& gen, int64_t lo, int64_t hi, int64_t* out, int64_t n) {
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  FillFixed<2>(gen, out, n,
               [lo, range](const PhiloxRandom::ResultType& s, std::array<int64_t, 2>* r) {
                 for (int i = 0; i < 2; ++i) {
                   const uint64_t bits = s[2 * i] | (uint64_t{s[2 * i + 1]} << 32);
                   (*r)[i] = AddOffset(lo, bits % range);
                 }
               });
}

void FillUniformFullInt(const PhiloxRandom& gen, uint32_t* out, int64_t n) {
  FillFixed<4>(gen, out, n, [](const PhiloxRandom::ResultType& s, std::array<uint32_t, 4>* r) {
    *r = s;
  });
}

void FillUniformFullInt(const PhiloxRandom& gen, uint64_t* out, int64_t n) {
  FillFixed<2>(gen, out, n, [](const PhiloxRandom::ResultType& s, std::array<uint64_t, 2>* r) {
    for (int i = 0; i < 2; ++i) (*r)[i] = s[2 * i] | (uint64_t{s[2 * i + 1]} << 32);
  });
}

KeyCounter GenerateKey(uint64_t seed0, uint64_t seed1) {
  // The seed becomes the counter of one Philox call under a fixed key; its output is the key and
  // the high half of the counter, so that weak seeds (small, or differing in one word) still give
  // unrelated streams.
  const PhiloxRandom::Key scramble_key = {0x3ec8f720, 0x02461e29};
  const PhiloxRandom::ResultType seed_counter = {
      static_cast<uint32_t>(seed0), static_cast<uint32_t>(seed0 >> 32),
      static_cast<uint32_t>(seed1), static_cast<uint32_t>(seed1 >> 32)};
  const PhiloxRandom::ResultType mix = PhiloxRandom(seed_counter, scramble_key)();
  KeyCounter out;
  out.key = {mix[0], mix[1]};
  out.counter = {0, 0, mix[2], mix[3]};
  return out;
}

PhiloxRandom StatelessPhilox(uint64_t seed0, uint64_t seed1) {
  const KeyCounter kc = GenerateKey(seed0, seed1);
  return PhiloxRandom(kc.counter, kc.key);
}

int ResolveRngAlg(int alg) {
  if (alg == kRngAlgPhilox || alg == kRngAlgAutoSelect) return kRngAlgPhilox;
  return -1;
}

void GetKeyCounter(uint64_t seed0, uint64_t seed1, uint64_t key[kRngKeySize],
                   uint64_t counter[kRngMaxCounterSize]) {
  const KeyCounter kc = GenerateKey(seed0, seed1);
  key[0] = kc.key[0] | (uint64_t{kc.key[1]} << 32);
  counter[0] = kc.counter[0] | (uint64_t{kc.counter[1]} << 32);
  counter[1] = kc.counter[2] | (uint64_t{kc.counter[3]} << 32);
}

PhiloxRandom PhiloxFromKeyCounter(const uint64_t key[kRngKeySize],
                                  const uint64_t counter[kRngMaxCounterSize]) {
  const PhiloxRandom::Key k = {static_cast<uint32_t>(key[0]),
                               static_cast<uint32_t>(key[0] >> 32)};
  const PhiloxRandom::ResultType c = {
      static_cast<uint32_t>(counter[0]), static_cast<uint32_t>(counter[0] >> 32),
      static_cast<uint32_t>(counter[1]), static_cast<uint32_t>(counter[1] >> 32)};
  return PhiloxRandom(c, k);
}

}  // namespace xlens::graph
