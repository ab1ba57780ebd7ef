// TensorFlow's CPU random number generation, reproduced bit for bit.
//
// TensorFlow draws every random tensor on the CPU from Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011): a counter-based generator whose 128-bit counter
// and 64-bit key give four 32-bit words per call. What a random op returns is fixed by three
// things, all mirrored here with TensorFlow's names:
//
//  * where the generator starts. Stateful ops (RandomUniform, RandomStandardNormal,
//    TruncatedNormal, RandomUniformInt) keep a GuardedPhiloxRandom per op node, seeded from the
//    attrs seed/seed2 as PhiloxRandom(seed, seed2); every execution reserves
//    256 * num_elements 128-bit samples from it, so the next execution of the same node starts
//    that far along. Stateless ops take the start from their inputs: a seed [2] is scrambled into
//    a key and a counter by GenerateKey (itself one Philox call); the V2 forms take key [1] and
//    counter [2] as uint64 directly.
//  * how outputs are grouped (FillPhiloxRandom): the output is cut into groups of a distribution's
//    kResultElementCount (4 for 32-bit types, 2 for 64-bit ones); group g of a fixed-cost
//    distribution uses the g-th generator call, and group g of a variable-cost one (the truncated
//    normal, which rejects) starts from the base generator skipped by
//    g * kResultElementCount * 256 / 4 calls and reads it one word at a time through a
//    SingleSampleAdapter. The last group is computed in full and cut short. So the result does
//    not depend on how TensorFlow shards the work across threads.
//  * how words become values (random_distributions.h): mantissa stuffing for uniform floats,
//    Box-Muller (float from 2 words, double from 4) for normals, rejection of |x| >= 2 for the
//    truncated normal, and `lo + word % (hi - lo)` for bounded integers.
//
// The normal distributions go through the C library's logf/sincosf and log/sincos, as
// TensorFlow's Linux build does; they match TensorFlow where both use the same libm.
#pragma once

#include <array>
#include <cstdint>

namespace xlens::graph {

// TensorFlow's random::PhiloxRandom: Philox4x32 with 10 rounds.
class PhiloxRandom {
 public:
  using ResultType = std::array<uint32_t, 4>;  // also the counter
  using Key = std::array<uint32_t, 2>;
  static constexpr int kResultElementCount = 4;

  PhiloxRandom() = default;
  // key = seed; counter = 0.
  explicit PhiloxRandom(uint64_t seed);
  // key = seed_lo; counter words 2 and 3 = seed_hi. This is how stateful ops seed from
  // (seed, seed2).
  PhiloxRandom(uint64_t seed_lo, uint64_t seed_hi);
  PhiloxRandom(const ResultType& counter, const Key& key) : counter_(counter), key_(key) {}

  const ResultType& counter() const { return counter_; }
  const Key& key() const { return key_; }

  // Advances the 128-bit counter by `count` calls.
  void Skip(uint64_t count);
  // Four words for the current counter, then the counter moves on by one.
  ResultType operator()();

 private:
  ResultType counter_{};
  Key key_{};
};

// The generator state one stateful random op node keeps across executions (TensorFlow's
// GuardedPhiloxRandom, without the mutex: callers that share one across threads lock it).
class GuardedPhilox {
 public:
  // What each output element reserves; the same constant as the variable-cost fill uses.
  static constexpr int kReservedSamplesPerOutput = 256;

  // Seeds from the op attrs. When both are 0, TensorFlow seeds from a nondeterministic source;
  // so does this (the values then match nothing).
  void Init(int64_t seed, int64_t seed2);
  void Init(const PhiloxRandom::ResultType& counter, const PhiloxRandom::Key& key);
  bool initialized() const { return initialized_; }

  // Returns the generator as it stands and moves the stored one on by `samples` 128-bit samples.
  PhiloxRandom ReserveSamples128(int64_t samples);
  // What a random op's Compute does before filling `output_count` elements:
  // ReserveSamples128(output_count * multiplier).
  PhiloxRandom ReserveRandomOutputs(int64_t output_count,
                                    int multiplier = kReservedSamplesPerOutput);

 private:
  PhiloxRandom generator_;
  bool initialized_ = false;
};

// FillPhiloxRandom on the CPU: fills out[0, n) from `gen` as TensorFlow's kernels do.
// RandomUniform / StatelessRandomUniform[V2]: [0, 1).
void FillUniform(const PhiloxRandom& gen, float* out, int64_t n);
void FillUniform(const PhiloxRandom& gen, double* out, int64_t n);
// RandomStandardNormal / StatelessRandomNormal[V2].
void FillNormal(const PhiloxRandom& gen, float* out, int64_t n);
void FillNormal(const PhiloxRandom& gen, double* out, int64_t n);
// TruncatedNormal / StatelessTruncatedNormal[V2]: standard normal, values with |x| >= 2 redrawn.
void FillTruncatedNormal(const PhiloxRandom& gen, float* out, int64_t n);
void FillTruncatedNormal(const PhiloxRandom& gen, double* out, int64_t n);
// RandomUniformInt / StatelessRandomUniformInt[V2]: [lo, hi). Requires lo < hi (the kernels
// reject anything else before drawing).
void FillUniformInt(const PhiloxRandom& gen, int32_t lo, int32_t hi, int32_t* out, int64_t n);
void FillUniformInt(const PhiloxRandom& gen, int64_t lo, int64_t hi, int64_t* out, int64_t n);
// StatelessRandomUniformFullInt[V2]: every bit pattern.
void FillUniformFullInt(const PhiloxRandom& gen, uint32_t* out, int64_t n);
void FillUniformFullInt(const PhiloxRandom& gen, uint64_t* out, int64_t n);

// Stateless ops. A seed tensor [2] of int32 or int64 is read as two uint64 (an int32 seed is
// sign-extended first: pass static_cast<int64_t>(value)).
struct KeyCounter {
  PhiloxRandom::Key key{};
  PhiloxRandom::ResultType counter{};
};
// TensorFlow's GenerateKey.
KeyCounter GenerateKey(uint64_t seed0, uint64_t seed1);
// The generator a V1 stateless op (StatelessRandomUniform etc.) fills from.
PhiloxRandom StatelessPhilox(uint64_t seed0, uint64_t seed1);

// The V2 ops' algorithm ids (TensorFlow's rng_alg.h). On the CPU, AUTO_SELECT means Philox.
constexpr int kRngAlgPhilox = 1;
constexpr int kRngAlgThreefry = 2;
constexpr int kRngAlgAutoSelect = 3;
constexpr int kRngKeySize = 1;         // uint64 words of a Philox key tensor
constexpr int kRngMaxCounterSize = 2;  // uint64 words of a Philox counter tensor
// The algorithm a V2 op on the CPU runs for `alg`: kRngAlgPhilox, or -1 when it has none
// (TensorFlow fails with "Unsupported algorithm id").
int ResolveRngAlg(int alg);

// The key [1] and counter [2] uint64 tensors of StatelessRandomGetKeyCounter(seed), low word
// first.
void GetKeyCounter(uint64_t seed0, uint64_t seed1, uint64_t key[kRngKeySize],
                   uint64_t counter[kRngMaxCounterSize]);
// The generator a V2 op fills from, given its key and counter inputs (only the first two counter
// words are used).
PhiloxRandom PhiloxFromKeyCounter(const uint64_t key[kRngKeySize],
                                  const uint64_t counter[kRngMaxCounterSize]);

}  // namespace xlens::graph
