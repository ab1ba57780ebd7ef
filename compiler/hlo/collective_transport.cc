#include "compiler/hlo/collective_transport.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace xlens {
namespace {

template <typename T>
void FoldInto(TransportReduction op, const void* in, void* acc, int64_t count) {
  const T* from = static_cast<const T*>(in);
  T* to = static_cast<T*>(acc);
  for (int64_t i = 0; i < count; ++i) {
    switch (op) {
      case TransportReduction::kSum: to[i] = static_cast<T>(to[i] + from[i]); break;
      case TransportReduction::kProduct: to[i] = static_cast<T>(to[i] * from[i]); break;
      case TransportReduction::kMax: to[i] = std::max(to[i], from[i]); break;
      case TransportReduction::kMin: to[i] = std::min(to[i], from[i]); break;
    }
  }
}

// acc = acc op in, elementwise; false for a type the plain reductions do not take.
bool Fold(PrimitiveType type, TransportReduction op, const void* in, void* acc, int64_t count) {
  switch (type) {
    case PrimitiveType::F32: FoldInto<float>(op, in, acc, count); return true;
    case PrimitiveType::F64: FoldInto<double>(op, in, acc, count); return true;
    case PrimitiveType::S8: FoldInto<int8_t>(op, in, acc, count); return true;
    case PrimitiveType::S16: FoldInto<int16_t>(op, in, acc, count); return true;
    case PrimitiveType::S32: FoldInto<int32_t>(op, in, acc, count); return true;
    case PrimitiveType::S64: FoldInto<int64_t>(op, in, acc, count); return true;
    case PrimitiveType::U8: FoldInto<uint8_t>(op, in, acc, count); return true;
    case PrimitiveType::U16: FoldInto<uint16_t>(op, in, acc, count); return true;
    case PrimitiveType::U32: FoldInto<uint32_t>(op, in, acc, count); return true;
    case PrimitiveType::U64: FoldInto<uint64_t>(op, in, acc, count); return true;
    default: return false;
  }
}

}  // namespace

const std::vector<int>& CollectiveTransport::Members(int communicator) {
  if (communicators_.empty()) {
    std::vector<int> every(static_cast<size_t>(num_ranks()));
    std::iota(every.begin(), every.end(), 0);
    communicators_.push_back(std::move(every));
  }
  return communicators_.at(static_cast<size_t>(communicator));
}

int CollectiveTransport::Split(int color, int key, std::string_view what, double timeout_seconds) {
  Members(kEveryProcess);
  int mine[2] = {color, key};
  std::vector<std::string> all =
      AllGather(std::string_view(reinterpret_cast<const char*>(mine), sizeof(mine)), what,
                timeout_seconds);
  std::vector<std::pair<int, int>> members;  // (key, rank)
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    int theirs[2] = {0, 0};
    if (all[r].size() == sizeof(theirs)) std::memcpy(theirs, all[r].data(), sizeof(theirs));
    if (theirs[0] == color) members.emplace_back(theirs[1], r);
  }
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (const auto& [k, r] : members) ranks.push_back(r);
  communicators_.push_back(std::move(ranks));
  return static_cast<int>(communicators_.size()) - 1;
}

int CollectiveTransport::CommunicatorFor(const std::string& set, int color, int key,
                                         std::string_view what, double timeout_seconds) {
  auto it = kept_.find(set);
  if (it == kept_.end()) it = kept_.emplace(set, Split(color, key, what, timeout_seconds)).first;
  return it->second;
}

bool CollectiveTransport::CanReduce(PrimitiveType type) const {
  char scratch[8] = {0};
  return Fold(type, TransportReduction::kSum, scratch, scratch, 0);
}

void CollectiveTransport::AllReduce(int communicator, void* data, int64_t count, PrimitiveType type,
                                    TransportReduction op, std::string_view what,
                                    double timeout_seconds) {
  const int64_t bytes = count * ByteWidth(type);
  std::vector<std::string> all = AllGather(
      std::string_view(static_cast<const char*>(data), static_cast<size_t>(bytes)), what,
      timeout_seconds);
  const std::vector<int>& members = Members(communicator);
  std::string acc = all.at(static_cast<size_t>(members.front()));
  for (size_t m = 1; m < members.size(); ++m) {
    Fold(type, op, all.at(static_cast<size_t>(members[m])).data(), acc.data(), count);
  }
  std::memcpy(data, acc.data(), static_cast<size_t>(bytes));
}

void CollectiveTransport::ReduceScatter(int communicator, const void* in, void* out,
                                        int64_t count_each, PrimitiveType type,
                                        TransportReduction op, std::string_view what,
                                        double timeout_seconds) {
  const std::vector<int>& members = Members(communicator);
  const int64_t width = ByteWidth(type);
  const int64_t bytes = count_each * width * static_cast<int64_t>(members.size());
  std::vector<std::string> all = AllGather(
      std::string_view(static_cast<const char*>(in), static_cast<size_t>(bytes)), what,
      timeout_seconds);
  const int64_t position =
      std::find(members.begin(), members.end(), rank()) - members.begin();
  const size_t offset = static_cast<size_t>(position * count_each * width);
  std::string acc = all.at(static_cast<size_t>(members.front())).substr(offset, count_each * width);
  for (size_t m = 1; m < members.size(); ++m) {
    Fold(type, op, all.at(static_cast<size_t>(members[m])).data() + offset, acc.data(), count_each);
  }
  std::memcpy(out, acc.data(), acc.size());
}

void CollectiveTransport::AllGatherBytes(int communicator, const void* in, void* out,
                                         int64_t bytes_each, std::string_view what,
                                         double timeout_seconds) {
  std::vector<std::string> all = AllGather(
      std::string_view(static_cast<const char*>(in), static_cast<size_t>(bytes_each)), what,
      timeout_seconds);
  char* to = static_cast<char*>(out);
  for (int r : Members(communicator)) {
    const std::string& theirs = all.at(static_cast<size_t>(r));
    std::memcpy(to, theirs.data(), std::min<size_t>(theirs.size(), static_cast<size_t>(bytes_each)));
    to += bytes_each;
  }
}

void CollectiveTransport::AllToAllBytes(int communicator, const void* in, void* out,
                                        int64_t bytes_each, std::string_view what,
                                        double timeout_seconds) {
  const std::vector<int>& members = Members(communicator);
  const size_t bytes = static_cast<size_t>(bytes_each);
  std::vector<std::string> all = AllGather(
      std::string_view(static_cast<const char*>(in), bytes * members.size()), what, timeout_seconds);
  const size_t position =
      static_cast<size_t>(std::find(members.begin(), members.end(), rank()) - members.begin());
  char* to = static_cast<char*>(out);
  for (int r : members) {
    const std::string& theirs = all.at(static_cast<size_t>(r));
    if (theirs.size() >= (position + 1) * bytes) std::memcpy(to, theirs.data() + position * bytes, bytes);
    to += bytes;
  }
}

void CollectiveTransport::Exchange(std::span<const TransportSend> sends,
                                   std::span<const TransportReceive> receives,
                                   std::string_view what, double timeout_seconds) {
  // Each process brings its sends (peer, tag, bytes, data) and takes those meant for it.
  std::string mine;
  for (const TransportSend& send : sends) {
    const int64_t header[3] = {send.peer, send.tag, send.bytes};
    mine.append(reinterpret_cast<const char*>(header), sizeof(header));
    mine.append(static_cast<const char*>(send.data), static_cast<size_t>(send.bytes));
  }
  std::vector<std::string> all = AllGather(mine, what, timeout_seconds);
  for (const TransportReceive& receive : receives) {
    std::string_view from = all.at(static_cast<size_t>(receive.peer));
    while (from.size() >= 3 * sizeof(int64_t)) {
      int64_t header[3];
      std::memcpy(header, from.data(), sizeof(header));
      from.remove_prefix(sizeof(header));
      const size_t bytes = static_cast<size_t>(header[2]);
      if (header[0] == rank() && header[1] == receive.tag) {
        std::memcpy(receive.data, from.data(), std::min<size_t>(bytes, receive.bytes));
      }
      from.remove_prefix(std::min(bytes, from.size()));
    }
  }
}

}  // namespace xlens
