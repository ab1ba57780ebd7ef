// Loading the TensorFlow-generated function test cases of testdata/functions (generate.py): the
// GraphDef, and per recorded run its feeds and TensorFlow's fetched results.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/tensor.h"
#include "compiler/hlo/npy.h"
#include "compiler/support/file_io.h"

namespace xlens::graph::testing {

inline std::string FunctionsDir() { return std::string(XLENS_TESTDATA_DIR) + "/functions/"; }

inline StatusOr<Tensor> LoadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(Literal literal, ReadNpy(path));
  return Tensor::FromLiteral(std::move(literal));
}

struct RecordedRun {
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> fetch_names;
  std::vector<Tensor> expected;
};

inline StatusOr<std::vector<RecordedRun>> LoadRuns(const std::string& dir, const std::string& name) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(dir + name + ".json"));
  nlohmann::json j = nlohmann::json::parse(text);
  std::vector<RecordedRun> runs;
  for (const auto& r : j["runs"]) {
    RecordedRun run;
    for (const auto& [feed, file] : r["feeds"].items()) {
      ASSIGN_OR_RETURN(Tensor t, LoadNpy(dir + file.get<std::string>()));
      run.feeds.emplace_back(feed, std::move(t));
    }
    for (const auto& [fetch, file] : r["fetches"].items()) {
      ASSIGN_OR_RETURN(Tensor t, LoadNpy(dir + file.get<std::string>()));
      run.fetch_names.push_back(fetch);
      run.expected.push_back(std::move(t));
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

// Units in the last place between two floats (0 for identical bits).
inline int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return ia > ib ? int64_t{ia} - ib : int64_t{ib} - ia;
}

// Same dtype and dims; floats within `max_ulps`, everything else exactly equal.
inline ::testing::AssertionResult TensorsClose(const Tensor& got, const Tensor& want,
                                               int64_t max_ulps) {
  if (got.dtype() != want.dtype() || got.dims() != want.dims()) {
    return ::testing::AssertionFailure() << "got " << got.DebugString() << ", want "
                                         << want.DebugString();
  }
  if (got.dtype() != DT_FLOAT) {
    if (got.Identical(want)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got.DebugString() << ", want "
                                         << want.DebugString();
  }
  auto g = got.flat<float>();
  auto w = want.flat<float>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (UlpDistance(g[i], w[i]) > max_ulps) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g[i] << ", want " << w[i] << " ("
             << UlpDistance(g[i], w[i]) << " ulp)";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace xlens::graph::testing
