#include "profiler/collective_timeline.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

namespace xlens::profiler {
namespace {

const int64_t* IntArg(const TraceEvent& event, const char* key) {
  const TraceArg* arg = FindArg(event, key);
  return arg != nullptr ? std::get_if<int64_t>(&arg->value) : nullptr;
}

// "0,1,2,3" as ids; empty when it is not a list of integers.
std::vector<int64_t> ParseGroup(const std::string& text) {
  std::vector<int64_t> group;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    int64_t id = 0;
    auto [next, error] = std::from_chars(p, end, id);
    if (error != std::errc()) return {};
    group.push_back(id);
    p = next;
    if (p < end && *p++ != ',') return {};
  }
  return group;
}

struct Member {
  size_t event = 0;
  int64_t device = 0;
  int64_t arrival_ns = 0;
};

}  // namespace

CollectiveLinks LinkCollectives(Trace& trace) {
  CollectiveLinks links;
  // The collective spans of each device in time order.
  std::vector<size_t> spans;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i].category == category::kCollective) spans.push_back(i);
  }
  std::stable_sort(spans.begin(), spans.end(), [&](size_t a, size_t b) {
    return trace.events[a].start_ns < trace.events[b].start_ns;
  });
  // (instruction, group, k) -> its members; (device, instruction, group) -> the next k.
  using Key = std::tuple<std::string, std::string, int64_t>;
  std::map<Key, std::vector<Member>> meetings;
  std::map<std::tuple<int64_t, std::string, std::string>, int64_t> next;
  for (size_t i : spans) {
    const TraceEvent& event = trace.events[i];
    const int64_t* device = IntArg(event, "device");
    const TraceArg* group = FindArg(event, "group");
    const std::string* text = group != nullptr ? std::get_if<std::string>(&group->value) : nullptr;
    if (device == nullptr || text == nullptr || text->find(',') == std::string::npos) continue;
    const int64_t* arrived = IntArg(event, "arrived_ns");
    const int64_t k = next[{*device, event.name, *text}]++;
    meetings[{event.name, *text, k}].push_back(
        {i, *device, event.start_ns + (arrived != nullptr ? *arrived : 0)});
  }
  int64_t next_flow = kCollectiveFlowIdBase;
  for (auto& [key, members] : meetings) {
    const std::vector<int64_t> group = ParseGroup(std::get<1>(key));
    links.spans += static_cast<int64_t>(members.size());
    bool complete = members.size() == group.size();
    for (const Member& member : members) {
      complete = complete && std::count_if(members.begin(), members.end(), [&](const Member& m) {
                               return m.device == member.device;
                             }) == 1 &&
                 std::find(group.begin(), group.end(), member.device) != group.end();
    }
    if (!complete) {
      links.incomplete += static_cast<int64_t>(members.size());
      continue;
    }
    ++links.meetings;
    std::stable_sort(members.begin(), members.end(),
                     [](const Member& a, const Member& b) { return a.arrival_ns < b.arrival_ns; });
    const Member& last = members.back();
    TraceEvent* previous = nullptr;
    int64_t previous_arrival = 0;
    for (const Member& member : members) {
      TraceEvent& event = trace.events[member.event];
      for (TraceArg& arg : event.args) {
        if (arg.key == "group") arg.value = group;
      }
      event.args.push_back({"wait_ns", last.arrival_ns - member.arrival_ns});
      event.args.push_back({"last_arrival", last.device});
      event.args.push_back(
          {"waited_for", &member == &last ? std::string() : fmt::format("device {}", last.device)});
      if (previous != nullptr && previous->flow_out == 0 && event.flow_in == 0) {
        previous->flow_out = event.flow_in = next_flow++;
        previous->flow_out_at_ns = previous_arrival - previous->start_ns;
        event.flow_in_at_ns = member.arrival_ns - event.start_ns;
        ++links.flows;
      }
      previous = &event;
      previous_arrival = member.arrival_ns;
    }
  }
  return links;
}

}  // namespace xlens::profiler
