#include "dump/kernel_choices.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

using json = nlohmann::json;

// Text of at most kMaxKernelChoiceTextBytes at `field` of `object`, or why not.
StatusOr<std::string> TextField(const json& object, const char* field, std::string_view where) {
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) {
    return Error(fmt::format("{}: \"{}\" is missing or not a string", where, field));
  }
  const std::string& text = it->get_ref<const std::string&>();
  if (text.empty() || text.size() > kMaxKernelChoiceTextBytes) {
    return Error(
        fmt::format("{}: \"{}\" is empty or longer than {} bytes", where, field, kMaxKernelChoiceTextBytes));
  }
  return text;
}

StatusOr<KernelChoiceRecord> RecordFrom(const json& object, int64_t version, std::string_view where) {
  if (!object.is_object()) return Error(fmt::format("{}: not an object", where));
  KernelChoiceRecord record;
  ASSIGN_OR_RETURN(record.machine, TextField(object, "machine", where));
  ASSIGN_OR_RETURN(record.key, TextField(object, "key", where));
  ASSIGN_OR_RETURN(std::string winner, TextField(object, "winner", where));
  auto candidates = object.find("candidates");
  if (candidates == object.end() || !candidates->is_array() || candidates->size() < 2 ||
      candidates->size() > 64) {
    return Error(fmt::format("{}: \"candidates\" is not an array of 2 to 64 names", where));
  }
  for (size_t i = 0; i < candidates->size(); ++i) {
    const json& name = (*candidates)[i];
    if (!name.is_string() || name.get_ref<const std::string&>().empty() ||
        name.get_ref<const std::string&>().size() > kMaxKernelChoiceTextBytes) {
      return Error(fmt::format("{}: candidate {} is not a name", where, i));
    }
    record.candidates.push_back(name.get<std::string>());
  }
  auto finite_time = [](const json& ms) {
    return ms.is_number() && std::isfinite(ms.get<double>()) && ms.get<double>() >= 0;
  };
  // Timed (a best run per candidate) or not (the estimate that kept the trial from running),
  // never both: a reader could not tell which the winner came from.
  auto times = object.find("best_ms");
  auto estimate = object.find("estimated_run_ms");
  if ((times == object.end()) == (estimate == object.end())) {
    return Error(fmt::format("{}: has {} \"best_ms\" (timed) {} \"estimated_run_ms\" (not timed)", where,
                             times == object.end() ? "neither" : "both", times == object.end() ? "nor" : "and"));
  }
  if (estimate != object.end()) {
    if (version < 2) return Error(fmt::format("{}: \"estimated_run_ms\" in a version 1 document", where));
    if (!finite_time(*estimate)) {
      return Error(fmt::format("{}: \"estimated_run_ms\" is not a finite time of 0 or more", where));
    }
    record.estimated_run_ms = estimate->get<double>();
  } else {
    if (!times->is_array() || times->size() != candidates->size()) {
      return Error(fmt::format("{}: \"best_ms\" is not an array of one time per candidate", where));
    }
    for (size_t i = 0; i < times->size(); ++i) {
      if (!finite_time((*times)[i])) {
        return Error(fmt::format("{}: best_ms[{}] is not a finite time of 0 or more", where, i));
      }
      record.best_ms.push_back((*times)[i].get<double>());
    }
  }
  auto found = std::find(record.candidates.begin(), record.candidates.end(), winner);
  if (found == record.candidates.end()) {
    return Error(fmt::format("{}: the winner {} is not one of its candidates", where, EscapeForTerminal(winner)));
  }
  record.winner = static_cast<int>(found - record.candidates.begin());
  return record;
}

// Times to 0.1 us: what a timing on a shared machine can say. A time the reader took but whose
// scaling overflows (past 1.7e304 ms) is written as it is, not as infinity, which JSON writes as
// null and the reader refuses.
double Rounded(double ms) {
  const double rounded = std::round(ms * 1e4) / 1e4;
  return std::isfinite(rounded) ? rounded : ms;
}

}  // namespace

std::string SerializeKernelChoices(const std::vector<KernelChoiceRecord>& records) {
  json choices = json::array();
  for (const KernelChoiceRecord& r : records) {
    json choice = {{"machine", r.machine},
                   {"key", r.key},
                   {"candidates", r.candidates},
                   {"winner", r.candidates.at(static_cast<size_t>(r.winner))}};
    if (r.timed()) {
      std::vector<double> best_ms;
      for (double ms : r.best_ms) best_ms.push_back(Rounded(ms));
      choice["best_ms"] = best_ms;
    } else {
      choice["estimated_run_ms"] = Rounded(r.estimated_run_ms);
    }
    choices.push_back(std::move(choice));
  }
  // Invalid UTF-8 in a name (it came from a library) is replaced, never thrown on.
  return json{{"format", kKernelChoiceFormat}, {"version", kKernelChoiceFormatVersion}, {"choices", choices}}.dump(
             1, ' ', false, json::error_handler_t::replace) +
         "\n";
}

StatusOr<std::vector<KernelChoiceRecord>> ParseKernelChoices(std::string_view text, std::string_view source) {
  json document;
  try {
    document = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // nlohmann's message says where (byte offset) and what it read, control characters escaped.
    std::string what = e.what();
    if (const size_t at = what.find("] "); what.starts_with("[json.exception") && at != std::string::npos) {
      what = what.substr(at + 2);
    }
    return Error(fmt::format("{}: not JSON ({})", source, EscapeForTerminal(TruncateUtf8(what, 200))));
  }
  auto format = document.is_object() ? document.find("format") : document.end();
  if (!document.is_object() || format == document.end() || !format->is_string() ||
      format->get_ref<const std::string&>() != kKernelChoiceFormat) {
    return Error(
        fmt::format("{}: not a kernel choices file (no \"format\": \"{}\")", source, kKernelChoiceFormat));
  }
  const json version = document.contains("version") ? document["version"] : json();
  if (!version.is_number_integer() || version.get<int64_t>() < 1 ||
      version.get<int64_t>() > kKernelChoiceFormatVersion) {
    return Error(fmt::format("{}: format version {}, expected 1 to {}", source, EscapeForTerminal(version.dump()),
                             kKernelChoiceFormatVersion));
  }
  auto choices = document.find("choices");
  if (choices == document.end() || !choices->is_array()) {
    return Error(fmt::format("{}: \"choices\" is missing or not an array", source));
  }
  std::vector<KernelChoiceRecord> records;
  for (size_t i = 0; i < choices->size(); ++i) {
    ASSIGN_OR_RETURN(KernelChoiceRecord record, RecordFrom((*choices)[i], version.get<int64_t>(),
                                                                   fmt::format("{}: choice {}", source, i)));
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace xlens
