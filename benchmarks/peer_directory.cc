// peer_directory: what the placement exchange costs one rank, for N
// simulated ranks (default: ImageNet-22k, 1024 ranks, 90 epochs), side by
// side in one run:
//
//   allgather   (before issue 13) every rank receives every rank's whole
//               placement (8 bytes per cached sample) and keeps a dense
//               directory (4 bytes per dataset sample);
//   directory   PeerDirectory (cache/peer_directory.h): a rank sends offers
//               of what it caches and queries for what it reads to the
//               samples' home ranks, and receives the offers and queries
//               homed at it and the answers to its own queries.
//
// Every rank's placement is planned as the job plans it (PlanPlacement with
// first_epoch_first and keep_read_samples), one rank after the other, and
// its messages are counted per destination: nothing of size ranks x samples
// is ever held, so the per-rank numbers are exact for every rank. For a few
// sampled ranks the real exchange code also runs on their actual inboxes
// (collected during the pass), timed, and their directory's size is
// measured.
//
// Build: cmake -S . -B build/bench -G Ninja -DHDMLP_BUILD_BENCHMARKS=ON -DHDMLP_BUILD_PYTHON=OFF
//        cmake --build build/bench --target peer_directory
// Run:   build/bench/peer_directory [--ranks 1024] [--samples 14197122] [--epochs 90] [--sampled 4]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hdmlp/cache/peer_directory.h"
#include "hdmlp/plan/access_plan.h"
#include "hdmlp/plan/placement.h"
#include "hdmlp/util/random.h"

#include "lab/machine_load.h"

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Stats {
  double max = 0, sum = 0;
  int n = 0;
  void Add(double v) {
    max = std::max(max, v);
    sum += v;
    ++n;
  }
  double mean() const { return n ? sum / n : 0; }
};

std::string Mb(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f", bytes / 1e6);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 1024, epochs = 90, sampled = 4;
  int64_t samples = 14197122;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--ranks")) ranks = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--samples")) samples = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--epochs")) epochs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--sampled")) sampled = std::atoi(argv[i + 1]);
  }
  hdmlp::PlanOptions o;
  o.num_samples = samples;
  o.batch_size = 32 * static_cast<int64_t>(ranks);
  o.epochs = epochs;
  o.world_size = ranks;
  o.seed = 42;
  const hdmlp::AccessPlan plan(o);
  // ImageNet-like sizes (40..180 KB) and plan_scaling's classes: 16 GiB of
  // RAM and 64 GiB of local disk per rank (every rank caches about 780K
  // samples: the ranks together hold the dataset about 56 times).
  hdmlp::Rng rng(7);
  std::vector<int64_t> sizes(static_cast<size_t>(samples));
  for (int64_t& s : sizes) s = rng.UniformInt(40000, 180000);
  const std::vector<int64_t> capacities = {int64_t{4} << 30, int64_t{16} << 30, int64_t{64} << 30};
  hdmlp::PlanningOptions planning;
  planning.first_epoch_first = ranks > 1;
  planning.keep_read_samples = true;

  std::vector<int> targets;
  for (int k = 0; k < sampled; ++k) targets.push_back(static_cast<int>(static_cast<int64_t>(ranks) * k / sampled));
  std::vector<hdmlp::RankMessages> target_offers(targets.size(), hdmlp::RankMessages(static_cast<size_t>(ranks)));
  std::vector<hdmlp::RankMessages> target_queries(targets.size(), hdmlp::RankMessages(static_cast<size_t>(ranks)));
  std::vector<std::vector<int64_t>> target_reads(targets.size());
  std::vector<std::vector<hdmlp::CachedSample>> target_cached(targets.size());

  std::vector<int64_t> offers_in(static_cast<size_t>(ranks), 0), queries_in(static_cast<size_t>(ranks), 0);
  std::vector<int64_t> cached_of(static_cast<size_t>(ranks)), reads_of(static_cast<size_t>(ranks));
  std::vector<bool> cached_anywhere(static_cast<size_t>(samples), false);
  int64_t total_cached = 0;
  const double start = Now(), load_start = hdmlp_bench::SampleLoad().load[0];
  std::fprintf(stderr, "planning %d ranks of %lld samples x %d epochs (load %.2f)\n", ranks,
               static_cast<long long>(samples), epochs, load_start);
  double plan_s = 0, messages_s = 0;
  for (int q = 0; q < ranks; ++q) {
    double t = Now();
    const hdmlp::Placement p = hdmlp::PlanPlacement(plan, q, sizes, capacities, planning);
    plan_s += Now() - t;
    t = Now();
    std::vector<hdmlp::CachedSample> cached;
    for (size_t j = 1; j < p.class_samples.size(); ++j) {
      for (int64_t s : p.class_samples[j]) cached.push_back({s, static_cast<int>(j)});
    }
    // What the exchange sends, by destination: the library's own messages.
    const hdmlp::RankMessages offers = hdmlp::PeerDirectory::MakeOffers(plan, cached);
    const hdmlp::RankMessages queries = hdmlp::PeerDirectory::MakeQueries(plan, p.read_samples);
    for (int h = 0; h < ranks; ++h) {
      offers_in[static_cast<size_t>(h)] += static_cast<int64_t>(offers[static_cast<size_t>(h)].size() / 8);
      queries_in[static_cast<size_t>(h)] += static_cast<int64_t>(queries[static_cast<size_t>(h)].size() / 8);
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      target_offers[k][static_cast<size_t>(q)] = offers[static_cast<size_t>(targets[k])];
      target_queries[k][static_cast<size_t>(q)] = queries[static_cast<size_t>(targets[k])];
      if (q == targets[k]) {
        target_reads[k] = p.read_samples;
        target_cached[k] = cached;
      }
    }
    for (const auto& c : cached) cached_anywhere[static_cast<size_t>(c.sample)] = true;
    cached_of[static_cast<size_t>(q)] = static_cast<int64_t>(cached.size());
    reads_of[static_cast<size_t>(q)] = static_cast<int64_t>(p.read_samples.size());
    total_cached += static_cast<int64_t>(cached.size());
    messages_s += Now() - t;
    if ((q + 1) % 64 == 0) std::fprintf(stderr, "  %d ranks planned, %.0f s\n", q + 1, Now() - start);
  }

  // Per rank, in bytes: offers and queries are 8 bytes an entry, answers 4.
  Stats old_traffic, old_memory, new_sent, new_received, new_memory;
  for (int r = 0; r < ranks; ++r) {
    const auto i = static_cast<size_t>(r);
    old_traffic.Add(8.0 * static_cast<double>(total_cached));
    old_memory.Add(8.0 * static_cast<double>(total_cached) + 4.0 * static_cast<double>(samples));
    new_sent.Add(8.0 * static_cast<double>(cached_of[i] + reads_of[i]) + 4.0 * static_cast<double>(queries_in[i]));
    new_received.Add(8.0 * static_cast<double>(offers_in[i] + queries_in[i]) + 4.0 * static_cast<double>(reads_of[i]));
    // Held at once at most: the home table (12 bytes an offered sample, at
    // most the offers received), the received queries and their answers,
    // this rank's queries and answers, and the directory (12 bytes an entry,
    // at most the reads).
    new_memory.Add(12.0 * static_cast<double>(offers_in[i]) + 12.0 * static_cast<double>(queries_in[i]) +
                   24.0 * static_cast<double>(reads_of[i]));
  }

  std::printf("# generated by: build/bench/peer_directory --ranks %d --samples %lld --epochs %d --sampled %d\n", ranks,
              static_cast<long long>(samples), epochs, sampled);
  std::printf("# machine: 2 cores, load average %.2f at start, %.2f at end; %.0f s (planning %.0f s, messages %.0f s)\n",
              load_start, hdmlp_bench::SampleLoad().load[0], Now() - start, plan_s, messages_s);
  std::printf("placement exchange per rank, %d ranks of %lld samples x %d epochs, %.1f cached copies per sample\n", ranks,
              static_cast<long long>(samples), epochs, static_cast<double>(total_cached) / static_cast<double>(samples));
  std::printf("  scheme                         max [MB]   mean [MB]\n");
  std::printf("  allgather: received             %8s    %8s\n", Mb(old_traffic.max).c_str(), Mb(old_traffic.mean()).c_str());
  std::printf("  allgather: held (+ dense dir.)  %8s    %8s\n", Mb(old_memory.max).c_str(), Mb(old_memory.mean()).c_str());
  std::printf("  directory: sent                 %8s    %8s\n", Mb(new_sent.max).c_str(), Mb(new_sent.mean()).c_str());
  std::printf("  directory: received             %8s    %8s\n", Mb(new_received.max).c_str(), Mb(new_received.mean()).c_str());
  std::printf("  directory: held at most         %8s    %8s\n", Mb(new_memory.max).c_str(), Mb(new_memory.mean()).c_str());
  std::printf("  ratio allgather / directory: traffic %.0fx (max rank), memory %.0fx (max rank)\n",
              old_traffic.max / (new_sent.max + new_received.max), old_memory.max / new_memory.max);
  std::printf("sampled ranks: the exchange's own code on their real inboxes\n");
  std::printf("  rank   caches    reads  offers in  queries in  entries  dir [MB]  exchange [s]\n");
  for (size_t k = 0; k < targets.size(); ++k) {
    const int r = targets[k];
    double t = Now();
    const hdmlp::HomeTable home = hdmlp::PeerDirectory::AcceptOffers(plan, r, target_offers[k]);
    const hdmlp::RankMessages answers_out = hdmlp::PeerDirectory::Answer(home, target_queries[k]);
    const hdmlp::RankMessages my_queries = hdmlp::PeerDirectory::MakeQueries(plan, target_reads[k]);
    double seconds = Now() - t;
    // The answers this rank gets back, as its queries' homes give them (the
    // rank named does not change the directory's size).
    hdmlp::RankMessages my_answers(static_cast<size_t>(ranks));
    for (int h = 0; h < ranks; ++h) {
      const std::string& qs = my_queries[static_cast<size_t>(h)];
      for (size_t i = 0; i + 8 <= qs.size(); i += 8) {
        int64_t s;
        std::memcpy(&s, qs.data() + i, 8);
        const int32_t who = cached_anywhere[static_cast<size_t>(s)] ? 1 << 8 | 1 : -1;  // who, as a home would answer
        my_answers[static_cast<size_t>(h)].append(reinterpret_cast<const char*>(&who), 4);
      }
    }
    t = Now();
    const hdmlp::PeerDirectory directory = hdmlp::PeerDirectory::FromAnswers(my_queries, my_answers);
    seconds += Now() - t;
    int64_t offers = 0, queries = 0;
    for (const auto& m : target_offers[k]) offers += static_cast<int64_t>(m.size() / 8);
    for (const auto& m : target_queries[k]) queries += static_cast<int64_t>(m.size() / 8);
    std::printf("  %4d  %7lld  %7lld  %9lld  %10lld  %7lld  %8s  %12.2f\n", r,
                static_cast<long long>(target_cached[k].size()), static_cast<long long>(target_reads[k].size()),
                static_cast<long long>(offers), static_cast<long long>(queries),
                static_cast<long long>(directory.entries()), Mb(static_cast<double>(directory.memory_bytes())).c_str(),
                seconds);
    (void)answers_out;
  }
  return 0;
}
