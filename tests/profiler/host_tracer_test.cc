#include "profiler/host_tracer.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

const TraceEvent* Find(const Trace& trace, const std::string& name) {
  for (const TraceEvent& e : trace.events) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST(HostTracer, DisabledSpansRecordNothing) {
  { TraceSpan span("before", "test"); EXPECT_FALSE(span.active()); }
  ASSERT_TRUE(TracerSession::Start());
  Trace trace = TracerSession::Stop();
  EXPECT_EQ(Find(trace, "before"), nullptr);
}

TEST(HostTracer, NestedSpansWithArgumentsOnOneThread) {
  SetCurrentThreadName("main");
  ASSERT_TRUE(TracerSession::Start());
  {
    TraceSpan outer("outer", "execute");
    outer.AddArg("run", int64_t{3});
    {
      TraceSpan inner("inner", "cpu_kernel");
      inner.AddArg("hlo_op", "fusion.3");
      inner.AddArg("gbps", 12.5);
      EXPECT_TRUE(inner.active());
    }
    outer.AddArg("after_child", true);
  }
  Trace trace = TracerSession::Stop();
  const TraceEvent* outer = Find(trace, "outer");
  const TraceEvent* inner = Find(trace, "inner");
  ASSERT_NE(outer, nullptr);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(outer->category, "execute");
  EXPECT_EQ(outer->tid, inner->tid);
  // The child lies inside its parent.
  EXPECT_LE(outer->start_ns, inner->start_ns);
  EXPECT_GE(outer->start_ns + outer->duration_ns, inner->start_ns + inner->duration_ns);
  EXPECT_LT(outer - trace.events.data(), inner - trace.events.data()) << "parents sort first";
  ASSERT_NE(FindArg(*outer, "run"), nullptr);
  EXPECT_EQ(std::get<int64_t>(FindArg(*outer, "run")->value), 3);
  EXPECT_EQ(std::get<int64_t>(FindArg(*outer, "after_child")->value), 1);
  EXPECT_EQ(std::get<std::string>(FindArg(*inner, "hlo_op")->value), "fusion.3");
  EXPECT_DOUBLE_EQ(std::get<double>(FindArg(*inner, "gbps")->value), 12.5);
  bool named = false;
  for (const TraceThread& t : trace.threads) named |= t.tid == outer->tid && t.name == "main";
  EXPECT_TRUE(named);
  ASSERT_EQ(trace.processes.size(), 1u);
  EXPECT_GE(outer->start_ns, trace.base_ns);
}

TEST(HostTracer, EachThreadHasItsTrackAndExitedThreadsAreKept) {
  ASSERT_TRUE(TracerSession::Start());
  { TraceSpan span("on main", "test"); }
  std::thread worker([] {
    SetCurrentThreadName("worker");
    TraceSpan span("on worker", "test");
  });
  worker.join();
  Trace trace = TracerSession::Stop();
  const TraceEvent* main_span = Find(trace, "on main");
  const TraceEvent* worker_span = Find(trace, "on worker");
  ASSERT_NE(main_span, nullptr);
  ASSERT_NE(worker_span, nullptr);
  EXPECT_NE(main_span->tid, worker_span->tid);
  bool named = false;
  for (const TraceThread& t : trace.threads) named |= t.tid == worker_span->tid && t.name == "worker";
  EXPECT_TRUE(named);
}

TEST(HostTracer, SessionsDoNotLeakIntoEachOther) {
  ASSERT_TRUE(TracerSession::Start());
  EXPECT_FALSE(TracerSession::Start()) << "one session at a time";
  { TraceSpan span("first session", "test"); }
  TracerSession::Stop();
  ASSERT_TRUE(TracerSession::Start());
  { TraceSpan span("second session", "test"); }
  Trace trace = TracerSession::Stop();
  EXPECT_EQ(Find(trace, "first session"), nullptr);
  EXPECT_NE(Find(trace, "second session"), nullptr);
}

TEST(HostTracer, SpanOpenAtStopEndsThere) {
  ASSERT_TRUE(TracerSession::Start());
  TraceSpan open("still open", "test");
  Trace trace = TracerSession::Stop();
  const TraceEvent* event = Find(trace, "still open");
  ASSERT_NE(event, nullptr);
  EXPECT_GE(event->duration_ns, 0);
}

TEST(HostTracer, RecordSpanKeepsGivenTimesAndArgs) {
  ASSERT_TRUE(TracerSession::Start());
  int64_t now = NowNs();
  SpanArgs span = RecordSpan("algebraic-simplifier", "pass", now, now + 500,
                             {{"pipeline", std::string("simplification")}, {"changed", int64_t{1}}});
  span.AddArg("step", int64_t{4});
  Trace trace = TracerSession::Stop();
  const TraceEvent* event = Find(trace, "algebraic-simplifier");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->start_ns, now);
  EXPECT_EQ(event->duration_ns, 500);
  EXPECT_EQ(std::get<std::string>(FindArg(*event, "pipeline")->value), "simplification");
  EXPECT_EQ(std::get<int64_t>(FindArg(*event, "step")->value), 4);
}

TEST(HostTracer, SharedSpanDescriptionsAndAchievedBandwidth) {
  auto info = std::make_shared<const SpanInfo>(SpanInfo{
      "fusion.7", "cpu_kernel", {{"hlo_op", std::string("fusion.7")}, {"bytes_accessed", int64_t{4000}}}});
  ASSERT_TRUE(TracerSession::Start());
  SpanArgs span = RecordSpan(info, 1000, 3000);
  span.AddArg("External id", int64_t{42});
  Trace trace = TracerSession::Stop();
  const TraceEvent* event = Find(trace, "fusion.7");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->category, "cpu_kernel");
  EXPECT_EQ(event->duration_ns, 2000);
  EXPECT_EQ(std::get<std::string>(FindArg(*event, "hlo_op")->value), "fusion.7");
  EXPECT_EQ(std::get<int64_t>(FindArg(*event, "External id")->value), 42);
  // 4000 bytes in 2000 ns: 2 GB/s, computed when the session stops.
  ASSERT_NE(FindArg(*event, "achieved GB/s"), nullptr);
  EXPECT_DOUBLE_EQ(std::get<double>(FindArg(*event, "achieved GB/s")->value), 2.0);
}

TEST(HostTracer, ASpanThatOutlivesItsSessionLeavesTheNextOneAlone) {
  ASSERT_TRUE(TracerSession::Start());
  auto stale = std::make_unique<TraceSpan>("stale", "test");
  TracerSession::Stop();
  ASSERT_TRUE(TracerSession::Start());
  int64_t now = NowNs();
  RecordSpan("fresh", "test", now, now + 100);  // takes the stale span's slot in the buffer
  stale->AddArg("late", int64_t{1});
  stale.reset();  // ends after its session: must not touch "fresh"
  Trace trace = TracerSession::Stop();
  const TraceEvent* fresh = Find(trace, "fresh");
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->duration_ns, 100);
  EXPECT_EQ(FindArg(*fresh, "late"), nullptr);
  EXPECT_EQ(Find(trace, "stale"), nullptr);
}

TEST(HostTracer, BandwidthIsDerivedForKernelsOnly) {
  auto launch = std::make_shared<const SpanInfo>(
      SpanInfo{"launch", "thunk", {{"bytes_accessed", int64_t{4000}}}});
  ASSERT_TRUE(TracerSession::Start());
  RecordSpan(launch, 0, 100);
  Trace trace = TracerSession::Stop();
  ASSERT_NE(Find(trace, "launch"), nullptr);
  EXPECT_EQ(FindArg(*Find(trace, "launch"), "achieved GB/s"), nullptr)
      << "a launch's time is not its kernel's";
}

TEST(HostTracer, RecordSpanWhileDisabledIsInactive) {
  SpanArgs span = RecordSpan("x", "y", 0, 1);
  EXPECT_FALSE(span.active());
}

TEST(HostTracer, ManySpansAreAllKept) {
  ASSERT_TRUE(TracerSession::Start());
  for (int i = 0; i < 100000; ++i) {
    TraceSpan span("k", "cpu_kernel");
    span.AddArg("i", int64_t{i});
  }
  Trace trace = TracerSession::Stop();
  int64_t count = 0;
  for (const TraceEvent& e : trace.events) count += e.name == "k";
  EXPECT_EQ(count, 100000);
}

// --timeout's last resort collects the trace from the watchdog's thread while the stopped work
// still records spans: what was recorded is there, the span still open ends at the stop, and the
// recording thread writes nothing more into the buffers it collected.
TEST(HostTracer, StopFromAnotherThreadWhileSpansAreRecorded) {
  ASSERT_TRUE(TracerSession::Start());
  std::atomic<bool> quit{false};
  std::atomic<int64_t> spans{0};
  std::thread worker([&] {
    SetCurrentThreadName("spinning");
    TraceSpan outer("execute spin", "execute");
    while (!quit.load()) {
      TraceSpan span("while.1", "thunk");
      span.AddArg("iteration", spans.load());
      spans.fetch_add(1);
    }
  });
  while (spans.load() < 1000) std::this_thread::yield();
  Trace trace = TracerSession::StopFromAnotherThread(std::chrono::milliseconds(20));
  const int64_t recorded_before_quit = spans.load();
  EXPECT_FALSE(TracerSession::running());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the worker keeps going
  quit = true;
  worker.join();
  const TraceEvent* outer = Find(trace, "execute spin");
  ASSERT_NE(outer, nullptr);
  EXPECT_GT(outer->duration_ns, 0);
  int64_t loops = 0;
  for (const TraceEvent& event : trace.events) loops += event.name == "while.1";
  EXPECT_GE(loops, 1000);
  EXPECT_LE(loops, recorded_before_quit);
  // Nothing of the session leaks into the next one.
  ASSERT_TRUE(TracerSession::Start());
  Trace next = TracerSession::Stop();
  EXPECT_EQ(Find(next, "while.1"), nullptr);
}

}  // namespace
}  // namespace xlens::profiler
