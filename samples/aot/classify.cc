// Classifies Fashion-MNIST test images with a classifier compiled ahead of time by `xlens aot`,
// as a tfcompile user would: the program includes only the generated header and links only the
// object it came with (g++ classify.cc model.o); no xlens, no TensorFlow.
//
//   classify IMAGES LABELS [N] [PREDICTIONS]
//
// IMAGES and LABELS: the test set's IDX files, uncompressed (t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte; Debian's dataset-fashion-mnist ships them gzipped: zcat them first).
// Classifies the first N images (default 1000, rounded down to whole batches) a batch at a time,
// prints the accuracy and the microseconds per image, and writes each image's predicted class
// (one byte each) to PREDICTIONS when given.
//
// The header and class: model.h and fashion::Classifier unless -DMODEL_HEADER='"x.h"' and
// -DMODEL_CLASS=ns::Name say otherwise. Its config: one feed "images" f32[batch, 784] (pixels
// scaled to [0, 1]) and one fetch "logits" f32[batch, 10].
#ifndef MODEL_HEADER
#define MODEL_HEADER "model.h"
#endif
#ifndef MODEL_CLASS
#define MODEL_CLASS fashion::Classifier
#endif
#include MODEL_HEADER

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// An IDX file's bytes after its header, checking the magic number and the dimensions.
bool ReadIdx(const char* path, int rank, std::vector<int>* dims, std::vector<unsigned char>* data) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "classify: cannot open %s\n", path);
    return false;
  }
  unsigned char header[4 + 4 * 3];
  const std::size_t header_bytes = 4 + 4 * static_cast<std::size_t>(rank);
  bool ok = std::fread(header, 1, header_bytes, f) == header_bytes && header[0] == 0 && header[1] == 0 &&
            header[2] == 0x08 && header[3] == rank;
  std::size_t count = 1;
  dims->clear();
  for (int i = 0; ok && i < rank; ++i) {
    const unsigned char* d = header + 4 + 4 * i;
    dims->push_back(d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3]);
    count *= static_cast<std::size_t>(dims->back());
  }
  if (ok) {
    data->resize(count);
    ok = std::fread(data->data(), 1, count, f) == count;
  }
  std::fclose(f);
  if (!ok) std::fprintf(stderr, "classify: %s: not an uncompressed IDX file of rank %d\n", path, rank);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s IMAGES LABELS [N] [PREDICTIONS]\n", argv[0]);
    return 2;
  }
  std::vector<int> image_dims, label_dims;
  std::vector<unsigned char> images, labels;
  if (!ReadIdx(argv[1], 3, &image_dims, &images) || !ReadIdx(argv[2], 1, &label_dims, &labels)) return 1;
  const int batch = MODEL_CLASS::kArg0Shapes[0];
  const int pixels = MODEL_CLASS::kArg0Shapes[1];
  const int classes = MODEL_CLASS::kResult0Shapes[1];
  if (image_dims[1] * image_dims[2] != pixels || label_dims[0] != image_dims[0]) {
    std::fprintf(stderr, "classify: expected %d-pixel images and one label each\n", pixels);
    return 1;
  }
  int n = argc > 3 ? std::atoi(argv[3]) : 1000;
  if (n > image_dims[0]) n = image_dims[0];
  n -= n % batch;
  if (n <= 0) {
    std::fprintf(stderr, "classify: N must be at least one batch (%d images)\n", batch);
    return 2;
  }

  MODEL_CLASS model;  // allocates the argument, result and temporary buffers
  std::vector<unsigned char> predicted(n);
  int correct = 0;
  double run_us = 0;
  for (int start = 0; start < n; start += batch) {
    float* in = model.arg_images_data();
    for (int i = 0; i < batch * pixels; ++i) in[i] = images[std::size_t(start) * pixels + i] / 255.0f;
    const auto t0 = std::chrono::steady_clock::now();
    if (!model.Run()) {
      std::fprintf(stderr, "classify: %s\n", model.error_msg().c_str());
      return 1;
    }
    run_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    const float* logits = model.result_logits_data();
    for (int i = 0; i < batch; ++i) {
      int best = 0;
      for (int c = 1; c < classes; ++c) {
        if (logits[i * classes + c] > logits[i * classes + best]) best = c;
      }
      predicted[start + i] = static_cast<unsigned char>(best);
      correct += best == labels[start + i];
    }
  }
  std::printf("%d images in batches of %d: accuracy %.4f, %.2f us per image\n", n, batch,
              double(correct) / n, run_us / n);
  if (argc > 4) {
    std::FILE* f = std::fopen(argv[4], "wb");
    if (f == nullptr || std::fwrite(predicted.data(), 1, n, f) != std::size_t(n) || std::fclose(f) != 0) {
      std::fprintf(stderr, "classify: cannot write %s\n", argv[4]);
      return 1;
    }
  }
  return 0;
}
