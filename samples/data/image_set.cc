#include "samples/data/image_set.h"

#include "compiler/support/file_io.h"
#include "samples/data/idx_file.h"

namespace xlens::samples {
namespace {

// The file `stem` in `dir`, plain or gzipped; empty when neither is a regular file.
std::string FindIdx(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem + ".gz", stem}) {
    if (GetPathKind(dir + "/" + name) == PathKind::kRegular) return dir + "/" + name;
  }
  return "";
}

}  // namespace

StatusOr<ImageSet> LoadImageSet(const std::string& images_path, const std::string& labels_path) {
  ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3) {
    return Error(images_path + ": rank " + std::to_string(images.dims.size()) +
                 " (expected 3: images x rows x columns)");
  }
  if (labels.dims.size() != 1) {
    return Error(labels_path + ": rank " + std::to_string(labels.dims.size()) +
                 " (expected 1: one label per image)");
  }
  if (images.dims[0] != labels.dims[0]) {
    return Error(labels_path + ": " + std::to_string(labels.dims[0]) + " labels for the " +
                 std::to_string(images.dims[0]) + " images of " + images_path +
                 " (expected one label per image)");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kMnistClasses) {
      return Error(labels_path + ": at byte " + std::to_string(9 + i) + ": label " +
                   std::to_string(labels.data[i]) + " (expected 0 to " +
                   std::to_string(kMnistClasses - 1) + ")");
    }
  }
  ImageSet set;
  set.count = images.dims[0];
  set.rows = images.dims[1];
  set.cols = images.dims[2];
  set.pixels = std::move(images.data);
  set.labels = std::move(labels.data);
  return set;
}

StatusOr<MnistDataSets> LoadFashionMnist(const std::string& dir) {
  const PathKind kind = GetPathKind(dir);
  const std::string how =
      " (install Debian's dataset-fashion-mnist package: apt-get install dataset-fashion-mnist, "
      "which puts it in " + std::string(kDebianFashionMnistDir) +
      "; or pass --data DIR; or --tiny for the small generated set)";
  if (kind != PathKind::kDirectory) {
    return Error("no Fashion-MNIST at " + dir + ": " +
                 (kind == PathKind::kMissing ? "no such directory" : "not a directory") + how);
  }
  MnistDataSets sets;
  sets.source = dir;
  struct Part {
    const char* prefix;
    ImageSet* set;
  };
  for (const Part& part : {Part{"train", &sets.train}, Part{"t10k", &sets.test}}) {
    const std::string images_stem = std::string(part.prefix) + "-images-idx3-ubyte";
    const std::string labels_stem = std::string(part.prefix) + "-labels-idx1-ubyte";
    std::string images = FindIdx(dir, images_stem), labels = FindIdx(dir, labels_stem);
    for (const auto& [path, stem] : {std::pair{images, images_stem}, std::pair{labels, labels_stem}}) {
      if (path.empty()) {
        return Error("no Fashion-MNIST in " + dir + ": " + stem + ".gz (or " + stem +
                     ") is missing" + how);
      }
    }
    ASSIGN_OR_RETURN(*part.set, LoadImageSet(images, labels));
  }
  if (sets.train.rows != sets.test.rows || sets.train.cols != sets.test.cols) {
    return Error(dir + ": training images are " + std::to_string(sets.train.rows) + "x" +
                 std::to_string(sets.train.cols) + ", test images " + std::to_string(sets.test.rows) +
                 "x" + std::to_string(sets.test.cols) + " (expected the same size)");
  }
  return sets;
}

}  // namespace xlens::samples
