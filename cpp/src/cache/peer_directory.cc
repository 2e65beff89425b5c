#include "hdmlp/cache/peer_directory.h"

#include <algorithm>
#include <cstring>

#include "hdmlp/errors.h"

namespace hdmlp {
namespace {

template <typename T>
void Append(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
size_t Count(const std::string& message) {
  return message.size() / sizeof(T);
}

template <typename T>
T At(const std::string& message, size_t i) {
  T value;
  std::memcpy(&value, message.data() + i * sizeof(T), sizeof value);
  return value;
}

}  // namespace

int PeerDirectory::HomeOf(const AccessPlan& plan, int64_t sample) {
  const int reader = plan.FirstEpochReader(sample);
  return reader >= 0 ? reader : static_cast<int>(sample % plan.options().world_size);
}

RankMessages PeerDirectory::MakeOffers(const AccessPlan& plan, const std::vector<CachedSample>& cached) {
  RankMessages out(static_cast<size_t>(plan.options().world_size));
  for (const CachedSample& c : cached) {
    Append<int64_t>(&out[static_cast<size_t>(HomeOf(plan, c.sample))], c.sample << 8 | (c.storage_class & 0xff));
  }
  return out;
}

HomeTable PeerDirectory::AcceptOffers(const AccessPlan& plan, int rank, const RankMessages& offers) {
  struct Offer {
    int64_t sample;
    int32_t who;
  };
  std::vector<Offer> all;
  size_t total = 0;
  for (const auto& m : offers) total += Count<int64_t>(m);
  all.reserve(total);
  for (size_t r = 0; r < offers.size(); ++r) {
    for (size_t i = 0; i < Count<int64_t>(offers[r]); ++i) {
      const auto entry = At<int64_t>(offers[r], i);
      all.push_back({entry >> 8, static_cast<int32_t>(static_cast<int64_t>(r) << 8 | (entry & 0xff))});
    }
  }
  std::sort(all.begin(), all.end(), [](const Offer& a, const Offer& b) {
    return a.sample != b.sample ? a.sample < b.sample : a.who < b.who;
  });
  HomeTable table;
  for (size_t i = 0; i < all.size();) {
    // All offers of one sample, lowest rank first.
    size_t end = i;
    int32_t who = all[i].who;
    while (end < all.size() && all[end].sample == all[i].sample) {
      // This rank is the sample's home; it wins only as its first-epoch
      // reader (a home by sample mod N is just where the offers meet).
      if ((all[end].who >> 8) == rank && plan.FirstEpochReader(all[i].sample) == rank) who = all[end].who;
      ++end;
    }
    table.samples.push_back(all[i].sample);
    table.who.push_back(who);
    i = end;
  }
  return table;
}

RankMessages PeerDirectory::MakeQueries(const AccessPlan& plan, const std::vector<int64_t>& reads) {
  RankMessages out(static_cast<size_t>(plan.options().world_size));
  for (const int64_t sample : reads) Append<int64_t>(&out[static_cast<size_t>(HomeOf(plan, sample))], sample);
  return out;
}

RankMessages PeerDirectory::Answer(const HomeTable& home, const RankMessages& queries) {
  RankMessages out(queries.size());
  for (size_t r = 0; r < queries.size(); ++r) {
    const size_t n = Count<int64_t>(queries[r]);
    out[r].reserve(n * sizeof(int32_t));
    for (size_t i = 0; i < n; ++i) {
      const auto sample = At<int64_t>(queries[r], i);
      const auto it = std::lower_bound(home.samples.begin(), home.samples.end(), sample);
      const bool found = it != home.samples.end() && *it == sample;
      Append<int32_t>(&out[r], found ? home.who[static_cast<size_t>(it - home.samples.begin())] : -1);
    }
  }
  return out;
}

PeerDirectory PeerDirectory::FromAnswers(const RankMessages& queries, const RankMessages& answers) {
  if (queries.size() != answers.size()) throw InvalidArgumentError("peer directory: answers from the wrong ranks");
  std::vector<std::pair<int64_t, int32_t>> found;
  for (size_t r = 0; r < queries.size(); ++r) {
    const size_t n = Count<int64_t>(queries[r]);
    if (Count<int32_t>(answers[r]) != n) {
      throw IOError("peer directory: rank " + std::to_string(r) + " answered " +
                    std::to_string(Count<int32_t>(answers[r])) + " of " + std::to_string(n) + " queries");
    }
    for (size_t i = 0; i < n; ++i) {
      const auto who = At<int32_t>(answers[r], i);
      if (who >= 0) found.emplace_back(At<int64_t>(queries[r], i), who);
    }
  }
  std::sort(found.begin(), found.end());
  PeerDirectory directory;
  directory.samples_.reserve(found.size());
  directory.who_.reserve(found.size());
  for (const auto& [sample, who] : found) {
    directory.samples_.push_back(sample);
    directory.who_.push_back(who);
  }
  return directory;
}

PeerDirectory PeerDirectory::Exchange(const AccessPlan& plan, int rank, const std::vector<CachedSample>& cached,
                                      const std::vector<int64_t>& reads, const AllToAllFn& all_to_all) {
  const HomeTable home = AcceptOffers(plan, rank, all_to_all(MakeOffers(plan, cached)));
  const RankMessages queries = MakeQueries(plan, reads);
  const RankMessages answers = all_to_all(Answer(home, all_to_all(queries)));
  return FromAnswers(queries, answers);
}

bool PeerDirectory::Lookup(int64_t sample, int* rank, int* storage_class) const {
  const auto it = std::lower_bound(samples_.begin(), samples_.end(), sample);
  if (it == samples_.end() || *it != sample) return false;
  const int32_t who = who_[static_cast<size_t>(it - samples_.begin())];
  *rank = who >> 8;
  *storage_class = who & 0xff;
  return true;
}

}  // namespace hdmlp
