#include "dump/compare_report.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <new>
#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"

namespace xlens {
namespace {

using Json = nlohmann::json;

// Reads fields while remembering the first thing that was wrong, with where it was: the checks
// read as a list of fields, and the caller asks once whether they all held.
class Fields {
 public:
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  bool Fail(const std::string& where, const std::string& expected) {
    if (error_.empty()) error_ = fmt::format("{}: expected {}", where, expected);
    return false;
  }

  const Json* Member(const Json& object, const std::string& where, const char* key, bool required = true) {
    if (!object.is_object()) {
      Fail(where, "an object");
      return nullptr;
    }
    auto it = object.find(key);
    if (it == object.end()) {
      if (required) Fail(Join(where, key), "a field that is missing");
      return nullptr;
    }
    return &*it;
  }

  bool String(const Json& object, const std::string& where, const char* key, std::string* out) {
    const Json* value = Member(object, where, key);
    if (value == nullptr) return false;
    if (!value->is_string()) return Fail(Join(where, key), "a string");
    *out = value->get<std::string>();
    return true;
  }

  bool Integer(const Json& object, const std::string& where, const char* key, int64_t* out) {
    const Json* value = Member(object, where, key);
    if (value == nullptr) return false;
    if (!value->is_number_integer()) return Fail(Join(where, key), "an integer");
    if (value->is_number_unsigned() && value->get<uint64_t>() > uint64_t{INT64_MAX}) {
      return Fail(Join(where, key), "an integer below 2^63");
    }
    *out = value->get<int64_t>();
    return true;
  }

  bool Number(const Json& value, const std::string& where, double* out) {
    if (!value.is_number()) return Fail(where, "a number");
    *out = value.get<double>();
    if (!std::isfinite(*out)) return Fail(where, "a finite number");
    return true;
  }

  bool Strings(const Json& object, const std::string& where, const char* key, std::vector<std::string>* out) {
    const Json* value = Member(object, where, key);
    if (value == nullptr) return false;
    if (!value->is_array()) return Fail(Join(where, key), "an array of strings");
    for (size_t i = 0; i < value->size(); ++i) {
      if (!(*value)[i].is_string()) return Fail(fmt::format("{}[{}]", Join(where, key), i), "a string");
      out->push_back((*value)[i].get<std::string>());
    }
    return true;
  }

  static std::string Join(const std::string& where, const char* key) {
    return where.empty() ? std::string(key) : where + "." + key;
  }

 private:
  std::string error_;
};

bool ReadKernel(Fields& f, const Json& j, const std::string& where, CompareKernel* k) {
  if (!j.is_object()) return f.Fail(where, "a kernel object");
  if (!f.String(j, where, "name", &k->name) || !f.String(j, where, "kind", &k->kind) ||
      !f.Strings(j, where, "op_names", &k->op_names) || !f.Strings(j, where, "instructions", &k->instructions)) {
    return false;
  }
  if (const Json* source = f.Member(j, where, "source", false); source != nullptr && !source->is_null()) {
    const std::string at = where + ".source";
    CompareSource s;
    if (!f.String(*source, at, "file", &s.file) || !f.Integer(*source, at, "line", &s.line) ||
        !f.String(*source, at, "function", &s.function)) {
      return false;
    }
    k->source = std::move(s);
  }
  const Json* matched = f.Member(j, where, "matched");
  if (matched == nullptr) return false;
  if (matched->is_string()) {
    k->matched = matched->get<std::string>();
  } else if (matched->is_null()) {
    if (!f.String(j, where, "reason", &k->reason)) return false;
  } else {
    return f.Fail(where + ".matched", "a kernel name or null");
  }
  if (const Json* trace = f.Member(j, where, "trace", false); trace != nullptr) {
    const std::string at = where + ".trace";
    CompareKernelTime t;
    const Json* total = f.Member(*trace, at, "total_us");
    if (!f.Integer(*trace, at, "events", &t.events) || total == nullptr || !f.Number(*total, at + ".total_us", &t.total_us)) {
      return false;
    }
    if (t.events < 0 || t.total_us < 0) return f.Fail(at, "events and total_us >= 0");
    k->time = t;
  }
  return true;
}

bool ReadSide(Fields& f, const Json& module, const std::string& where, const char* key, std::vector<CompareKernel>* out) {
  const Json* side = f.Member(module, where, key);
  if (side == nullptr) return false;
  const std::string at = Fields::Join(where, key);
  int64_t count = 0;
  if (!f.Integer(*side, at, "kernel_count", &count)) return false;
  const Json* kernels = f.Member(*side, at, "kernels");
  if (kernels == nullptr) return false;
  if (!kernels->is_array()) return f.Fail(at + ".kernels", "an array of kernels");
  if (count < 0 || static_cast<uint64_t>(count) != kernels->size()) {
    return f.Fail(at + ".kernel_count", fmt::format("the number of kernels ({})", kernels->size()));
  }
  for (size_t i = 0; i < kernels->size(); ++i) {
    CompareKernel kernel;
    if (!ReadKernel(f, (*kernels)[i], fmt::format("{}.kernels[{}]", at, i), &kernel)) return false;
    out->push_back(std::move(kernel));
  }
  return true;
}

std::map<std::string, size_t> IndexByName(const std::vector<CompareKernel>& kernels) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < kernels.size(); ++i) index.emplace(kernels[i].name, i);
  return index;
}

bool ReadFusedMore(Fields& f, const Json& module, const std::string& where, const char* key, const char* others_key,
                   const std::map<std::string, size_t>& side, const std::map<std::string, size_t>& other,
                   const char* side_name, const char* other_name, std::vector<CompareFusedMore>* out) {
  const Json* notes = f.Member(module, where, key);
  if (notes == nullptr) return false;
  const std::string at = Fields::Join(where, key);
  if (!notes->is_array()) return f.Fail(at, "an array");
  for (size_t i = 0; i < notes->size(); ++i) {
    const std::string item = fmt::format("{}[{}]", at, i);
    CompareFusedMore note;
    if (!f.String((*notes)[i], item, "kernel", &note.kernel) || !f.Strings((*notes)[i], item, others_key, &note.others)) {
      return false;
    }
    auto it = side.find(note.kernel);
    if (it == side.end()) return f.Fail(item + ".kernel", fmt::format("one of the module's {} kernels", side_name));
    note.index = it->second;
    for (const std::string& name : note.others) {
      if (!other.contains(name)) return f.Fail(Fields::Join(item, others_key), fmt::format("{} kernels of the module", other_name));
    }
    out->push_back(std::move(note));
  }
  return true;
}

bool ReadModule(Fields& f, const Json& j, const std::string& where, CompareModule* m) {
  if (!j.is_object()) return f.Fail(where, "a module object");
  if (!f.Integer(j, where, "id", &m->id) || !f.String(j, where, "name", &m->name) ||
      !f.String(j, where, "before", &m->before) || !f.String(j, where, "after", &m->after) ||
      !f.String(j, where, "backend", &m->backend) || !ReadSide(f, j, where, "xla", &m->xla) ||
      !ReadSide(f, j, where, "xlens", &m->xlens)) {
    return false;
  }
  const std::map<std::string, size_t> xla = IndexByName(m->xla), xlens = IndexByName(m->xlens);
  const Json* pairs = f.Member(j, where, "pairs");
  if (pairs == nullptr) return false;
  if (!pairs->is_array()) return f.Fail(where + ".pairs", "an array of pairs");
  for (size_t i = 0; i < pairs->size(); ++i) {
    const Json& p = (*pairs)[i];
    const std::string at = fmt::format("{}.pairs[{}]", where, i);
    ComparePair pair;
    const Json* jaccard = f.Member(p, at, "jaccard");
    const Json* exact = f.Member(p, at, "exact", false);
    if (!f.String(p, at, "xla", &pair.xla) || !f.String(p, at, "xlens", &pair.xlens) || jaccard == nullptr ||
        !f.Number(*jaccard, at + ".jaccard", &pair.jaccard) || !f.Integer(p, at, "shared_atoms", &pair.shared_atoms) ||
        !f.String(p, at, "by", &pair.by)) {
      return false;
    }
    if (pair.jaccard < 0 || pair.jaccard > 1) return f.Fail(at + ".jaccard", "an overlap between 0 and 1");
    if (exact == nullptr || !exact->is_boolean()) return f.Fail(at + ".exact", "true or false");
    pair.exact = exact->get<bool>();
    auto a = xla.find(pair.xla);
    if (a == xla.end()) return f.Fail(at + ".xla", "one of the module's XLA kernels");
    auto b = xlens.find(pair.xlens);
    if (b == xlens.end()) return f.Fail(at + ".xlens", "one of the module's xlens kernels");
    pair.xla_index = a->second;
    pair.xlens_index = b->second;
    // A kernel is in one pair at most; the table would show it twice otherwise.
    if (m->xla[a->second].pair >= 0 || m->xlens[b->second].pair >= 0) {
      return f.Fail(at, "kernels that are in no other pair");
    }
    m->xla[a->second].pair = static_cast<int>(i);
    m->xlens[b->second].pair = static_cast<int>(i);
    m->pairs.push_back(std::move(pair));
  }
  if (!ReadFusedMore(f, j, where, "xla_fused_more", "xlens_kernels", xla, xlens, "XLA", "xlens", &m->xla_fused_more) ||
      !ReadFusedMore(f, j, where, "xlens_fused_more", "xla_kernels", xlens, xla, "xlens", "XLA", &m->xlens_fused_more)) {
    return false;
  }
  if (f.Member(j, where, "xlens_run_problem", false) != nullptr &&
      !f.String(j, where, "xlens_run_problem", &m->xlens_run_problem)) {
    return false;
  }
  return true;
}

bool ReadTraceFile(Fields& f, const Json& root, const char* key, std::string* out) {
  const Json* trace = f.Member(root, "", key, false);
  if (trace == nullptr) return true;
  return f.String(*trace, key, "file", out);
}

}  // namespace

const CompareModule* CompareReport::FindModule(int64_t id) const {
  for (const CompareModule& module : modules) {
    if (module.id == id) return &module;
  }
  return nullptr;
}

StatusOr<CompareReport> ParseCompareReport(std::string_view text) {
  Json root;
  // Every nlohmann exception stops here (as the manifest's reader does): a parse error, a number
  // past a double's range, bytes that are not UTF-8 in a string.
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    std::string message = e.what();
    if (message.starts_with("[json.exception.")) {
      if (size_t close = message.find("] "); close != std::string::npos) message = message.substr(close + 2);
    }
    return Error("not an `xlens compare --json` report: not valid JSON: " + message);
  } catch (const std::bad_alloc&) {
    return Error(fmt::format("not readable: out of memory parsing {} of JSON", FormatBytes(text.size())));
  }
  if (!root.is_object() || !root.contains("modules")) {
    return Error("not an `xlens compare --json` report: expected an object with \"modules\"");
  }
  Fields f;
  CompareReport report;
  const Json* modules = f.Member(root, "", "modules");
  if (f.String(root, "", "directory", &report.directory) && modules != nullptr) {
    if (!modules->is_array()) {
      f.Fail("modules", "an array of modules");
    } else {
      for (size_t i = 0; i < modules->size() && f.ok(); ++i) {
        CompareModule module;
        if (ReadModule(f, (*modules)[i], fmt::format("modules[{}]", i), &module)) {
          if (report.FindModule(module.id) != nullptr) {
            f.Fail(fmt::format("modules[{}].id", i), "ids that are unique in the report");
          }
          report.modules.push_back(std::move(module));
        }
      }
    }
  }
  if (f.ok()) {
    if (const Json* skipped = f.Member(root, "", "skipped"); skipped != nullptr) {
      if (!skipped->is_array()) f.Fail("skipped", "an array");
      for (size_t i = 0; f.ok() && skipped->is_array() && i < skipped->size(); ++i) {
        const std::string at = fmt::format("skipped[{}]", i);
        CompareSkipped s;
        if (f.Integer((*skipped)[i], at, "id", &s.id) && f.String((*skipped)[i], at, "name", &s.name) &&
            f.String((*skipped)[i], at, "reason", &s.reason)) {
          report.skipped.push_back(std::move(s));
        }
      }
    }
  }
  if (f.ok()) ReadTraceFile(f, root, "trace", &report.xla_trace);
  if (f.ok()) ReadTraceFile(f, root, "xlens_trace", &report.xlens_trace);
  if (!f.ok()) return Error("not an `xlens compare --json` report: " + f.error());
  return report;
}

StatusOr<CompareReport> ReadCompareReport(const std::string& path) {
  // The limit is the report's own, not the input limit that flags raise: say so, not how to raise it.
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    const uintmax_t size = std::filesystem::file_size(path, error);
    if (!error && size > static_cast<uintmax_t>(kMaxCompareReportBytes)) {
      return Error(fmt::format("{}: {} is more than an `xlens compare --json` report can be ({})", path,
                               FormatBytes(static_cast<int64_t>(size)), FormatBytes(kMaxCompareReportBytes)));
    }
  }
  StatusOr<std::string> text = ReadFile(path, kMaxCompareReportBytes);
  if (!text.ok()) return text.status();
  StatusOr<CompareReport> report = ParseCompareReport(*text);
  if (!report.ok()) return report.status().WithContext(path);
  return report;
}

}  // namespace xlens
