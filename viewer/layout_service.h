// Lays graphs out off the UI thread. One worker thread runs every layout, each in a child process
// (layout_process.h) under a time and a memory limit; the UI thread asks for a layout by DOT
// text, gets a ticket, and is told by layoutReady when it is done. Layouts are cached by a hash of
// the DOT text, so going back to a stage already seen is instant. A layout nobody waits for any
// more, and the one running when the service is destroyed, is stopped by killing its process.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "viewer/graph_layout.h"
#include "viewer/layout_process.h"

namespace xlens::viewer {

class LayoutService : public QObject {
  Q_OBJECT
 public:
  explicit LayoutService(QObject* parent = nullptr);
  ~LayoutService() override;

  // The application's service (made on first use, owned by the application object).
  static LayoutService& Instance();

  // Asks for a layout of `dot`; layoutReady(ticket, ...) follows, from the event loop, also on a
  // cache hit (never from inside this call). Call from the UI thread.
  uint64_t Request(std::string dot);
  // Drops interest in a ticket: layoutReady is not sent for it, and a layout not yet started for
  // no other ticket is not started. One already running for no other ticket is stopped.
  void Cancel(uint64_t ticket);
  // The cached layout of `dot`, or nullptr (also for one that failed).
  std::shared_ptr<const GraphLayout> Cached(const std::string& dot) const;
  // How many layouts the cache keeps (least recently used go first); default 32.
  void SetCacheCapacity(size_t capacity);
  // The thread that runs every layout.
  QThread* worker() const { return worker_; }
  // The limits layouts run under from now on.
  void SetLimits(const LayoutLimits& limits);
  // How many layouts the worker has run (cache hits and cancelled jobs not counted).
  uint64_t layouts_run() const;

 signals:
  // A layout for `ticket` is ready; `layout` is null and `error` says why when it failed.
  void layoutReady(quint64 ticket, std::shared_ptr<const xlens::viewer::GraphLayout> layout, QString error);

 private:
  struct Job {
    uint64_t key;
    std::string dot;
  };
  struct Result {
    std::shared_ptr<const GraphLayout> layout;
    QString error;
  };
  class Worker;
  static uint64_t KeyOf(const std::string& dot);
  void Deliver(uint64_t key, Result result);
  void Remember(uint64_t key, Result result);

  // UI thread only.
  uint64_t next_ticket_ = 1;
  std::unordered_map<uint64_t, std::vector<uint64_t>> waiting_;  // key -> tickets
  std::list<std::pair<uint64_t, Result>> cache_;                  // most recent first
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, Result>>::iterator> cache_index_;
  size_t cache_capacity_ = 32;

  // Shared with the worker, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  uint64_t layouts_run_ = 0;
  uint64_t running_key_ = 0;     // the layout in progress, 0 when none
  bool abort_running_ = false;   // nobody waits for it any more: stop it
  LayoutLimits limits_;

  QThread* worker_ = nullptr;
};

}  // namespace xlens::viewer

Q_DECLARE_METATYPE(std::shared_ptr<const xlens::viewer::GraphLayout>)
