// Checks a Chrome trace as xlens writes it against the contract in DESIGN.md (Trace): every
// event's fields and types, categories, kernel arguments (hlo_op, module, op_names, fusion_kind,
// bytes_accessed, flops on every kernel and library call), process and thread names for every
// track, paired flows and strictly nested spans per track. Shared by the writer's tests and the
// end-to-end tests of `xlens run --trace`.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace xlens::testing {

// Every problem found, one line each; empty when the trace keeps the contract.
inline std::vector<std::string> CheckTraceSchema(const nlohmann::json& doc) {
  std::vector<std::string> problems;
  auto fail = [&](const std::string& what) {
    if (problems.size() < 50) problems.push_back(what);
  };
  if (!doc.is_object()) return {"top level is not an object"};
  if (!doc.contains("baseTimeNanoseconds") || !doc["baseTimeNanoseconds"].is_number_integer()) {
    fail("baseTimeNanoseconds missing or not an integer");
  }
  // "ms" as PyTorch writes it; "ns" made older viewers read ts in nanoseconds.
  if (doc.value("displayTimeUnit", "") != "ms") fail("displayTimeUnit is not \"ms\"");
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    fail("traceEvents missing or not a list");
    return problems;
  }
  static const std::set<std::string> kCategories = {
      "compile", "pipeline", "pass", "codegen", "clustering", "execute", "thunk", "cpu_kernel",
      "library_call", "library_part", "memcpy", "kernel", "gpu_memcpy", "gpu_memset",
      "cuda_runtime", "cuda_driver", "cuda_sync", "overhead", "collective"};
  std::set<int64_t> named_pids;
  std::set<std::pair<int64_t, int64_t>> named_tracks;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> spans;
  std::map<int64_t, int> flow_starts, flow_ends;
  size_t index = 0;
  // ts and dur are microseconds printed to the nanosecond: at most three decimals.
  auto three_decimals = [](double us) {
    double ns = us * 1000.0;
    return std::fabs(ns - std::round(ns)) < 0.01;
  };
  for (const auto& e : doc["traceEvents"]) {
    std::string where = fmt::format("event {}", index++);
    if (!e.is_object()) {
      fail(where + ": not an object");
      continue;
    }
    std::string ph = e.value("ph", "");
    if (!e.contains("pid") || !e["pid"].is_number_integer()) fail(where + ": pid not an integer");
    if (!e.contains("tid") || !e["tid"].is_number_integer()) fail(where + ": tid not an integer");
    if (!e["pid"].is_number_integer() || !e["tid"].is_number_integer()) continue;
    int64_t pid = e["pid"], tid = e["tid"];
    if (ph == "M") {
      std::string name = e.value("name", "");
      const auto& args = e.contains("args") ? e["args"] : nlohmann::json();
      if (name == "process_name" || name == "thread_name") {
        if (!args.is_object() || !args.contains("name") || !args["name"].is_string()) {
          fail(where + ": " + name + " without a string args.name");
        }
        if (name == "process_name") named_pids.insert(pid);
        if (name == "thread_name") named_tracks.insert({pid, tid});
      } else if (name == "process_sort_index" || name == "thread_sort_index") {
        if (!args.is_object() || !args.contains("sort_index") || !args["sort_index"].is_number_integer()) {
          fail(where + ": " + name + " without an integer args.sort_index");
        }
      } else {
        fail(where + ": unknown metadata event " + name);
      }
    } else if (ph == "X") {
      where += fmt::format(" ({})", e.value("name", "?"));
      if (!e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty()) {
        fail(where + ": no name");
      }
      std::string cat = e.value("cat", "");
      if (!kCategories.count(cat)) fail(where + ": unknown category '" + cat + "'");
      if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number()) {
        fail(where + ": ts/dur missing or not numbers");
        continue;
      }
      double ts = e["ts"], dur = e["dur"];
      if (dur < 0) fail(where + ": negative dur");
      if (!three_decimals(ts) || !three_decimals(dur)) fail(where + ": ts/dur not at ns precision");
      if (std::fabs(ts) > 1e12) fail(where + ": ts is absolute, not relative to the base");
      if (e.contains("args") && !e["args"].is_object()) fail(where + ": args not an object");
      if (cat == "cpu_kernel" || cat == "kernel" || cat == "library_call") {
        const auto& args = e.contains("args") ? e["args"] : nlohmann::json::object();
        // The link from a kernel to its HLO: every key on every kernel, empty strings where there
        // is no fusion (fusion_kind) or no metadata (op_names, the op_names joined by ";").
        for (const char* key : {"hlo_op", "module", "op_names", "fusion_kind"}) {
          if (!args.contains(key) || !args[key].is_string()) fail(where + ": no string args." + key);
        }
        if (args.contains("hlo_op") && args["hlo_op"].is_string() &&
            args["hlo_op"].get<std::string>().empty()) {
          fail(where + ": empty args.hlo_op");
        }
        for (const char* key : {"bytes_accessed", "flops"}) {
          if (!args.contains(key) || !args[key].is_number_integer()) fail(where + ": no integer args." + key);
        }
        if (cat == "kernel") {
          for (const char* key : {"device", "stream", "correlation", "registers per thread", "shared memory"}) {
            if (!args.contains(key)) fail(where + ": GPU kernel without args." + key);
          }
          for (const char* key : {"grid", "block"}) {
            if (!args.contains(key) || !args[key].is_array() || args[key].size() != 3) {
              fail(where + ": GPU kernel without a 3-element args." + key);
            }
          }
        }
      }
      spans[{pid, tid}].push_back({ts, ts + dur});
    } else if (ph == "s" || ph == "f") {
      if (e.value("cat", "") != "ac2g") fail(where + ": flow category is not ac2g");
      if (!e.contains("id") || !e["id"].is_number_integer()) {
        fail(where + ": flow id not an integer");
        continue;
      }
      if (ph == "f" && e.value("bp", "") != "e") fail(where + ": flow end without \"bp\":\"e\"");
      (ph == "s" ? flow_starts : flow_ends)[e["id"].get<int64_t>()]++;
    } else {
      fail(where + ": unexpected phase '" + ph + "'");
    }
  }
  for (const auto& [id, n] : flow_starts) {
    if (!flow_ends.count(id)) fail(fmt::format("flow {} starts but never ends", id));
  }
  for (const auto& [id, n] : flow_ends) {
    if (!flow_starts.count(id)) fail(fmt::format("flow {} ends but never starts", id));
  }
  for (auto& [track, list] : spans) {
    if (!named_pids.count(track.first)) fail(fmt::format("process {} has no name", track.first));
    if (!named_tracks.count(track)) fail(fmt::format("track {}/{} has no name", track.first, track.second));
    // Strict nesting: sorted by start (longer first), each span ends inside every open parent.
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open_ends;
    for (const auto& [start, end] : list) {
      while (!open_ends.empty() && open_ends.back() <= start) open_ends.pop_back();
      if (!open_ends.empty() && end > open_ends.back() + 1e-3) {
        fail(fmt::format("track {}/{}: span [{}, {}] overlaps its parent ending at {}", track.first,
                         track.second, start, end, open_ends.back()));
      }
      open_ends.push_back(end);
    }
  }
  return problems;
}

}  // namespace xlens::testing
