#include "samples/data/tiny_image_set.h"

namespace xlens::samples {
namespace {

// SplitMix64: the same numbers on every platform, unlike std::uniform_int_distribution.
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

ImageSet Generate(int64_t count, SplitMix64& rng) {
  constexpr int64_t kSide = 28, kBlock = 7, kBlocksPerRow = kSide / kBlock;  // 16 blocks
  ImageSet set;
  set.count = count;
  set.rows = set.cols = kSide;
  set.pixels.assign(count * kSide * kSide, 0);
  set.labels.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % kMnistClasses);
    set.labels[i] = static_cast<uint8_t>(label);
    uint8_t* image = &set.pixels[i * kSide * kSide];
    // Class k lights blocks k and k + 6 (of 16), so classes share some blocks with others.
    for (int block : {label, label + 6}) {
      const int64_t r0 = (block / kBlocksPerRow) * kBlock, c0 = (block % kBlocksPerRow) * kBlock;
      for (int64_t r = r0; r < r0 + kBlock; ++r) {
        for (int64_t c = c0; c < c0 + kBlock; ++c) {
          // Most of a block's pixels lit, at varying intensity.
          if (rng.Next() % 4 != 0) image[r * kSide + c] = static_cast<uint8_t>(128 + rng.Next() % 128);
        }
      }
    }
    // Noise: about 8% of all pixels lit at random.
    for (int64_t p = 0; p < kSide * kSide; ++p) {
      if (rng.Next() % 12 == 0) image[p] = static_cast<uint8_t>(64 + rng.Next() % 192);
    }
  }
  return set;
}

}  // namespace

MnistDataSets GenerateTinyImageSets(int64_t train_count, int64_t test_count, uint64_t seed) {
  SplitMix64 rng{seed};
  MnistDataSets sets;
  sets.train = Generate(train_count, rng);
  sets.test = Generate(test_count, rng);
  sets.source = "generated";
  return sets;
}

}  // namespace xlens::samples
