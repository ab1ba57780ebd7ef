// Fashion-MNIST as one data set: the pair of files must agree, a missing data set says how to get
// it, the generated stand-in is deterministic and balanced, and the installed data set (Debian's
// dataset-fashion-mnist, when present) has the published sizes.
#include "samples/data/image_set.h"

#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "samples/data/idx_file.h"
#include "samples/data/mnist_batch.h"
#include "samples/data/tiny_image_set.h"

namespace xlens::samples {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("xlens_image_set_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

TEST(ImageSetTest, AMissingDataSetSaysHowToGetIt) {
  auto sets = LoadFashionMnist("/nonexistent/fashion-mnist");
  ASSERT_FALSE(sets.ok());
  EXPECT_THAT(sets.status().message(), HasSubstr("no Fashion-MNIST at /nonexistent/fashion-mnist"));
  EXPECT_THAT(sets.status().message(), HasSubstr("apt-get install dataset-fashion-mnist"));
  EXPECT_THAT(sets.status().message(), HasSubstr("--tiny"));
  TempDir dir;
  auto empty = LoadFashionMnist(dir.path.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("train-images-idx3-ubyte.gz (or train-images-idx3-ubyte) is missing"));
}

TEST(ImageSetTest, ImagesAndLabelsMustAgree) {
  TempDir dir;
  ASSERT_TRUE(WriteIdxFile(dir / "images", {{3, 2, 2}, std::vector<uint8_t>(12, 7)}).ok());
  ASSERT_TRUE(WriteIdxFile(dir / "two_labels", {{2}, {1, 2}}).ok());
  ASSERT_TRUE(WriteIdxFile(dir / "bad_label", {{3}, {1, 10, 2}}).ok());
  ASSERT_TRUE(WriteIdxFile(dir / "labels", {{3}, {1, 9, 2}}).ok());
  auto mismatch = LoadImageSet(dir / "images", dir / "two_labels");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(), HasSubstr("two_labels: 2 labels for the 3 images of"));
  auto bad = LoadImageSet(dir / "images", dir / "bad_label");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad_label: at byte 10: label 10 (expected 0 to 9)"));
  auto swapped = LoadImageSet(dir / "labels", dir / "images");
  ASSERT_FALSE(swapped.ok());
  EXPECT_THAT(swapped.status().message(), HasSubstr("rank 1 (expected 3: images x rows x columns)"));
  auto good = LoadImageSet(dir / "images", dir / "labels");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->count, 3);
  EXPECT_EQ(good->pixels_per_image(), 4);
  EXPECT_EQ(good->labels, (std::vector<uint8_t>{1, 9, 2}));
}

TEST(ImageSetTest, TheTinySetIsDeterministicBalancedAndReadsBackFromIdxFiles) {
  MnistDataSets a = GenerateTinyImageSets(), b = GenerateTinyImageSets();
  EXPECT_EQ(a.train.pixels, b.train.pixels);
  EXPECT_EQ(a.test.pixels, b.test.pixels);
  EXPECT_NE(a.train.pixels, GenerateTinyImageSets(600, 200, 2).train.pixels);
  ASSERT_EQ(a.train.count, 600);
  ASSERT_EQ(a.test.count, 200);
  std::vector<int> per_class(kMnistClasses);
  for (uint8_t l : a.train.labels) ++per_class[l];
  for (int c : per_class) EXPECT_EQ(c, 60);
  // Written as the data set's four files, it loads as Fashion-MNIST does.
  TempDir dir;
  auto write = [&](const std::string& prefix, const ImageSet& s) {
    ASSERT_TRUE(WriteIdxFile(dir / (prefix + "-images-idx3-ubyte"), {{s.count, 28, 28}, s.pixels}).ok());
    ASSERT_TRUE(WriteIdxFile(dir / (prefix + "-labels-idx1-ubyte"), {{s.count}, s.labels}).ok());
  };
  write("train", a.train);
  write("t10k", a.test);
  auto loaded = LoadFashionMnist(dir.path.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->train.pixels, a.train.pixels);
  EXPECT_EQ(loaded->test.labels, a.test.labels);
}

TEST(ImageSetTest, BatchesArePixelsOver255AndWrapAround) {
  MnistDataSets sets = GenerateTinyImageSets(30, 10);
  auto [x, y] = MakeBatch(sets.train, 25, 10);
  ASSERT_EQ(x.dims(), (std::vector<int64_t>{10, 784}));
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{10}));
  for (int64_t r = 0; r < 10; ++r) {
    const int64_t image = (25 + r) % 30;
    EXPECT_EQ(y.GetAsInt64(r), sets.train.labels[image]);
    for (int64_t c = 0; c < 784; c += 97) {
      EXPECT_FLOAT_EQ(x.flat<float>()[r * 784 + c], sets.train.pixels[image * 784 + c] / 255.0f);
    }
  }
}

TEST(ImageSetTest, TheInstalledFashionMnistHasThePublishedSizes) {
  if (!fs::exists(kDebianFashionMnistDir)) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << kDebianFashionMnistDir << ")";
  }
  auto sets = LoadFashionMnist(kDebianFashionMnistDir);
  ASSERT_TRUE(sets.ok()) << sets.status().message();
  EXPECT_EQ(sets->train.count, 60000);
  EXPECT_EQ(sets->test.count, 10000);
  EXPECT_EQ(sets->train.rows, 28);
  EXPECT_EQ(sets->train.cols, 28);
  std::vector<int> per_class(kMnistClasses);
  for (uint8_t l : sets->test.labels) ++per_class[l];
  for (int c : per_class) EXPECT_EQ(c, 1000);  // the test set is balanced, 1,000 per class
}

}  // namespace
}  // namespace xlens::samples
