// Labelled images of the MNIST family: Fashion-MNIST read from its IDX files (Debian's
// dataset-fashion-mnist package installs them under /usr/share/datasets/fashion-mnist), with
// the checks that make the pair of files one data set (same count, labels within the classes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::samples {

inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kMnistClasses = 10;

struct ImageSet {
  int64_t count = 0;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols, 0..255
  std::vector<uint8_t> labels;  // count, 0..kMnistClasses-1
  int64_t pixels_per_image() const { return rows * cols; }
};

struct MnistDataSets {
  ImageSet train, test;
  std::string source;  // the directory read, or "generated" for the tiny set
};

// Reads train-{images-idx3,labels-idx1}-ubyte and t10k-... from `dir`, each either plain or
// `.gz`. When a file is missing the message says which, and how to get the data set (Debian's
// package, --data DIR, or --tiny).
StatusOr<MnistDataSets> LoadFashionMnist(const std::string& dir);
// Reads one images file and its labels file as one set.
StatusOr<ImageSet> LoadImageSet(const std::string& images_path, const std::string& labels_path);

}  // namespace xlens::samples
