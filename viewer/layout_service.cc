#include "viewer/layout_service.h"

#include <QCoreApplication>
#include <QPointer>
#include <algorithm>

namespace xlens::viewer {

// The one thread that runs layouts: takes jobs in order, lays each out in a child process, and
// posts the result back to the service's thread.
class LayoutService::Worker : public QThread {
 public:
  explicit Worker(LayoutService* service) : service_(service) { setObjectName("graphviz-layout"); }

  void run() override {
    for (;;) {
      Job job;
      LayoutLimits limits;
      {
        std::unique_lock<std::mutex> lock(service_->mutex_);
        service_->wake_.wait(lock, [&] { return service_->stopping_ || !service_->queue_.empty(); });
        if (service_->stopping_) return;
        job = std::move(service_->queue_.front());
        service_->queue_.pop_front();
        ++service_->layouts_run_;
        service_->running_key_ = job.key;
        service_->abort_running_ = false;
        limits = service_->limits_;
      }
      LayoutService* self = service_;
      StatusOr<GraphLayout> layout = LayOutInChild(job.dot, limits, [self] {
        std::lock_guard<std::mutex> lock(self->mutex_);
        return self->stopping_ || self->abort_running_;
      });
      bool stopped = false;
      {
        std::lock_guard<std::mutex> lock(service_->mutex_);
        stopped = service_->stopping_ || service_->abort_running_;
        service_->running_key_ = 0;
        service_->abort_running_ = false;
      }
      if (stopped) continue;  // nobody waits for it; a stopped layout is not cached
      Result result;
      if (layout.ok()) {
        result.layout = std::make_shared<const GraphLayout>(std::move(layout).value());
      } else {
        result.error = QString::fromStdString(layout.status().message());
      }
      LayoutService* service = service_;
      uint64_t key = job.key;
      QMetaObject::invokeMethod(
          service, [service, key, result = std::move(result)]() mutable { service->Deliver(key, std::move(result)); },
          Qt::QueuedConnection);
    }
  }

 private:
  LayoutService* service_;
};

LayoutService::LayoutService(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<const GraphLayout>>();
  worker_ = new Worker(this);
  worker_->start();
}

LayoutService::~LayoutService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  // A layout in progress sees stopping_ within 50 ms and kills its process: quitting never waits
  // for Graphviz.
  worker_->wait();
  delete worker_;
}

LayoutService& LayoutService::Instance() {
  static QPointer<LayoutService> instance;
  if (instance.isNull()) instance = new LayoutService(QCoreApplication::instance());
  return *instance;
}

uint64_t LayoutService::KeyOf(const std::string& dot) {
  // FNV-1a over the text, mixed with its length.
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : dot) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash ^ (static_cast<uint64_t>(dot.size()) * 0x9e3779b97f4a7c15ull);
}

uint64_t LayoutService::Request(std::string dot) {
  uint64_t ticket = next_ticket_++;
  uint64_t key = KeyOf(dot);
  auto cached = cache_index_.find(key);
  if (cached != cache_index_.end()) {
    cache_.splice(cache_.begin(), cache_, cached->second);
    Result result = cached->second->second;
    QMetaObject::invokeMethod(
        this, [this, ticket, result] { emit layoutReady(ticket, result.layout, result.error); },
        Qt::QueuedConnection);
    return ticket;
  }
  std::vector<uint64_t>& tickets = waiting_[key];
  tickets.push_back(ticket);
  if (tickets.size() == 1) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(Job{key, std::move(dot)});
    }
    wake_.notify_one();
  }
  return ticket;
}

void LayoutService::Cancel(uint64_t ticket) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    std::vector<uint64_t>& tickets = it->second;
    auto found = std::find(tickets.begin(), tickets.end(), ticket);
    if (found == tickets.end()) continue;
    tickets.erase(found);
    if (tickets.empty()) {
      uint64_t key = it->first;
      waiting_.erase(it);
      std::lock_guard<std::mutex> lock(mutex_);
      if (running_key_ == key) abort_running_ = true;
      for (auto job = queue_.begin(); job != queue_.end(); ++job) {
        if (job->key == key) {
          queue_.erase(job);
          break;
        }
      }
    }
    return;
  }
}

std::shared_ptr<const GraphLayout> LayoutService::Cached(const std::string& dot) const {
  auto cached = cache_index_.find(KeyOf(dot));
  return cached == cache_index_.end() ? nullptr : cached->second->second.layout;
}

void LayoutService::SetCacheCapacity(size_t capacity) {
  cache_capacity_ = std::max<size_t>(capacity, 1);
  while (cache_.size() > cache_capacity_) {
    cache_index_.erase(cache_.back().first);
    cache_.pop_back();
  }
}

void LayoutService::SetLimits(const LayoutLimits& limits) {
  std::lock_guard<std::mutex> lock(mutex_);
  limits_ = limits;
}

uint64_t LayoutService::layouts_run() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return layouts_run_;
}

void LayoutService::Remember(uint64_t key, Result result) {
  auto existing = cache_index_.find(key);
  if (existing != cache_index_.end()) {
    cache_.erase(existing->second);
    cache_index_.erase(existing);
  }
  cache_.emplace_front(key, std::move(result));
  cache_index_[key] = cache_.begin();
  SetCacheCapacity(cache_capacity_);
}

void LayoutService::Deliver(uint64_t key, Result result) {
  Remember(key, result);
  auto waiting = waiting_.find(key);
  if (waiting == waiting_.end()) return;  // every ticket was cancelled
  std::vector<uint64_t> tickets = std::move(waiting->second);
  waiting_.erase(waiting);
  for (uint64_t ticket : tickets) emit layoutReady(ticket, result.layout, result.error);
}

}  // namespace xlens::viewer
