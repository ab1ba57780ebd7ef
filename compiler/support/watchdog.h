// Stops a command that runs past its --timeout.
//
// Two stages, because not all work can be asked to stop: when the time is up the watchdog sets
// its cancel flag, which the reference evaluator polls between instructions, so an evaluation
// ends with an error that says where it was; work that never polls (a compiled kernel spinning in
// a `while` that is always true, LLVM on a huge module) gets a grace period, after which the
// watchdog prints one line saying what was running and for how long, and ends the process with
// exit status 1. Its private directories are removed first (removed_on_signal.h); it leaves at
// most the temporaries of the outputs it was writing, which RemoveStaleTemporaries clears on the
// next run.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace xlens {

class Watchdog {
 public:
  // `seconds` <= 0: never fires. `command` names the command in messages ("eval", "run").
  // `grace` is how long cooperative work has to stop after the cancel flag is set.
  Watchdog(double seconds, std::string command,
           std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Polled by the evaluator (EvaluatorOptions::cancel).
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }
  bool fired() const { return cancel_.load(std::memory_order_relaxed); }

  // What the command is doing now, for the message: "compiling", "running the compiled module
  // (iteration 3 of 10)". Cheap enough to call per phase, not per element.
  void SetActivity(std::string activity);

  // "stopped by --timeout after 2 s, while evaluating the module" (the figure is the limit).
  std::string StopMessage() const;

  // Work to save before the process is ended in the second stage (the trace recorded so far):
  // called on the watchdog's thread with the stop message while the stopped work still runs;
  // what it returns is added to the stop line ("; the trace up to here is in t.json"). It must
  // not call back into the watchdog. Set it before the work starts.
  void SetFinalWork(std::function<std::string(const std::string& stop_message)> work);

 private:
  void Watch();

  const double seconds_;
  const std::string command_;
  const std::chrono::milliseconds grace_;
  std::atomic<bool> cancel_{false};
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::string activity_ = "starting";
  std::function<std::string(const std::string&)> final_work_;
  std::thread thread_;
};

}  // namespace xlens
