// xlens.inspect, xlens.hlo_profile, xlens.read_trace: the readers of dump/ and profiler/ in
// process, their models handed to Python as plain dicts and lists (python/xlens/tools.py wraps
// them). The dump's model is the one `xlens inspect --json` writes (dump_directory_report.h), so
// both say the same of a folder.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <map>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/tools/dump_trace_links.h"
#include "dump/dump_directory_report.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/trace_hlo_profile.h"
#include "python/src/bindings.h"

namespace nb = nanobind;

namespace xlens::python {
namespace {

// Runs `read` with the GIL released (a large dump or trace takes a while: other threads run
// meanwhile) and returns its value, or raises its error once the GIL is back.
template <typename Read>
auto WithoutGil(Read read) {
  std::optional<decltype(read())> result;
  {
    nb::gil_scoped_release release;
    result.emplace(read());
  }
  return ValueOrThrow(std::move(*result));
}

nb::object FromJson(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object: {
      nb::dict dict;
      for (const auto& [key, item] : value.items()) dict[nb::str(key.c_str(), key.size())] = FromJson(item);
      return dict;
    }
    case nlohmann::json::value_t::array: {
      nb::list list;
      for (const nlohmann::json& item : value) list.append(FromJson(item));
      return list;
    }
    case nlohmann::json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      // Names from a dump are bytes: what is not UTF-8 is kept, escaped, rather than refused.
      return nb::steal(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape"));
    }
    case nlohmann::json::value_t::boolean: return nb::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer: return nb::int_(value.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return nb::int_(value.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return nb::float_(value.get<double>());
    default: return nb::none();
  }
}

// Paths come as bytes (os.fsencode): a Linux file name need not be UTF-8.
std::string Path(const nb::bytes& path) { return std::string(path.c_str(), path.size()); }

nb::str Text(const std::string& text) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape"));
}

// (the model as `xlens inspect --json` writes it, the text `xlens inspect` prints)
// With a trace, its kernel events linked to the dump's kernels, as `xlens inspect --trace`.
nb::tuple Inspect(nb::bytes directory_bytes, std::optional<nb::bytes> trace_bytes) {
  const std::string directory = Path(directory_bytes);
  const std::optional<std::string> trace_path =
      trace_bytes ? std::optional<std::string>(Path(*trace_bytes)) : std::nullopt;
  std::optional<DumpTraceLinks> trace;
  DumpDirectory dump = WithoutGil([&]() -> StatusOr<DumpDirectory> {
    ASSIGN_OR_RETURN(DumpDirectory read, ReadDumpDirectoryForInspect(directory));
    if (trace_path) {
      ASSIGN_OR_RETURN(DumpTraceLinks links, LinkTraceToDump(read, *trace_path));
      trace = std::move(links);
    }
    return read;
  });
  const DumpTraceLinks* linked = trace ? &*trace : nullptr;
  return nb::make_tuple(FromJson(DumpDirectoryJson(dump, linked)), Text(DumpDirectoryText(dump, linked)));
}

nb::dict HloProfile(nb::bytes path_bytes) {
  const std::string path = Path(path_bytes);
  profiler::TraceHloProfile profile = WithoutGil([&] { return profiler::TraceHloProfileOf(path); });
  nb::dict runs;
  for (const auto& [module, count] : profile.runs) runs[Text(module)] = count;
  nb::list rows;
  for (const profiler::TraceHloProfileRow& row : profile.rows) {
    nb::dict record;
    record["module"] = Text(row.module);
    record["instruction"] = Text(row.instruction);
    record["kernel"] = Text(row.kernel);
    record["category"] = Text(row.category);
    record["fusion_kind"] = Text(row.fusion_kind);
    record["count"] = row.count;
    record["total_ns"] = row.total_ns;
    record["min_ns"] = row.min_ns;
    record["max_ns"] = row.max_ns;
    record["bytes_accessed"] = row.bytes_accessed;
    record["flops"] = row.flops;
    record["transcendentals"] = row.transcendentals;
    record["op_names"] = Text(row.op_names);
    record["source"] = Text(row.source);
    rows.append(record);
  }
  nb::dict result;
  result["file"] = Text(profile.file);
  result["runs"] = runs;
  result["rows"] = rows;
  return result;
}

nb::object ArgValue(const profiler::TraceArgValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return nb::int_(*i);
  if (const auto* d = std::get_if<double>(&value)) return nb::float_(*d);
  if (const auto* s = std::get_if<std::string>(&value)) return Text(*s);
  nb::list list;
  for (int64_t item : std::get<std::vector<int64_t>>(value)) list.append(item);
  return list;
}

// Every span of the trace as a record; times in microseconds after the trace's base time.
nb::list ReadTrace(nb::bytes path_bytes) {
  const std::string path = Path(path_bytes);
  profiler::Trace trace = WithoutGil([&]() -> StatusOr<profiler::Trace> {
    ASSIGN_OR_RETURN(std::string file, profiler::FindTraceFile(path));
    return profiler::ReadChromeTrace(file);
  });
  std::map<std::pair<int32_t, int64_t>, std::string> thread_names;
  for (const profiler::TraceThread& thread : trace.threads) thread_names[{thread.pid, thread.tid}] = thread.name;
  std::map<int32_t, std::string> process_names;
  for (const profiler::TraceProcess& process : trace.processes) process_names[process.pid] = process.name;
  nb::list events;
  for (const profiler::TraceEvent& event : trace.events) {
    nb::dict record;
    record["name"] = Text(event.name);
    record["category"] = Text(event.category);
    record["pid"] = event.pid;
    record["tid"] = event.tid;
    auto process = process_names.find(event.pid);
    record["process"] = Text(process == process_names.end() ? "" : process->second);
    auto thread = thread_names.find({event.pid, event.tid});
    record["thread"] = Text(thread == thread_names.end() ? "" : thread->second);
    record["start_us"] = static_cast<double>(event.start_ns - trace.base_ns) / 1000.0;
    record["duration_us"] = static_cast<double>(event.duration_ns) / 1000.0;
    nb::dict args;
    for (const profiler::TraceArg& arg : event.args) args[Text(arg.key)] = ArgValue(arg.value);
    record["args"] = args;
    events.append(record);
  }
  return events;
}

}  // namespace

void RegisterTools(nb::module_& m) {
  m.def("_inspect", &Inspect, nb::arg("directory"), nb::arg("trace").none(),
        "(model, text): the dump directory as `xlens inspect --json` and `xlens inspect` say it");
  m.def("_hlo_profile", &HloProfile, nb::arg("path"),
        "The kernel events of a trace (a file or a folder holding one) grouped by HLO instruction");
  m.def("_read_trace", &ReadTrace, nb::arg("path"), "Every span of a trace, as records");
}

}  // namespace xlens::python
