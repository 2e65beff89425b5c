// EventQueue: the simulator's pending events, earliest first (simulator.h).
//
// An event is a node's thread (or its consumer, or the PFS's next read end)
// due at a time. Events are totally ordered by (time, seq): events at one
// instant run in the order they were pushed, except that a barrier's release
// of a consumer (seq with kRelease set) runs after every other event at its
// time. So a node's events run in an order that depends on its own events
// and the barrier's time alone, never on how another node's events
// interleave with them: the decomposed loop relies on that to give the
// event-by-event loop's results exactly. Because the order is total, any
// correct priority queue pops the same sequence; this one is a 4-ary heap
// (half the depth of a binary heap, and a node's four children share a
// cache line or two), which matters with the tens of thousands of threads
// of a 1024-node job. It compares (time, seq) as one 128-bit number (the
// time's bits above the seq), exact for the simulator's times, which are
// never negative.
//
// Thread-safety: none; one queue per thread (the decomposed loop gives each
// node its own).
#ifndef HDMLP_SIM_EVENT_QUEUE_H_
#define HDMLP_SIM_EVENT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace hdmlp::sim {

constexpr uint64_t kRelease = uint64_t{1} << 63;  // in Event::seq: after every other event at its time
constexpr uint32_t kConsumer = 0xffffffffu;        // Event::thread of a node's consumer
constexpr uint32_t kPfsDone = 0xfffffffeu;         // Event::thread of a PFS read's end (Event::node: its group)

struct Event {
  double time;  // >= 0 (never -0.0 or NaN): the queue orders times by their bits
  uint64_t seq;
  uint32_t node;
  uint32_t thread;  // staging workers 0..p0-1, then prefetch threads; kConsumer; kPfsDone
  bool Before(const Event& o) const { return time != o.time ? time < o.time : seq < o.seq; }
};

class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }

  void push(const Event& e) {
    size_t i = heap_.size();
    heap_.push_back(e);
    const Key k = KeyOf(e);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!(k < KeyOf(heap_[parent]))) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  // Floyd's pop: the hole at the root moves down along the smallest
  // children to a leaf, then the last entry rises from there (it came from
  // the bottom, so it rarely rises far): one comparison fewer per level
  // than sifting it down from the root, and the smallest of four children
  // is picked without branches.
  void pop() {
    const Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      Key best_key = KeyOf(heap_[first]);
      if (first + 4 <= n) {
        for (size_t c = first + 1; c < first + 4; ++c) {
          const Key k = KeyOf(heap_[c]);
          const bool less = k < best_key;
          best = less ? c : best;
          best_key = less ? k : best_key;
        }
      } else {
        for (size_t c = first + 1; c < n; ++c) {
          const Key k = KeyOf(heap_[c]);
          if (k < best_key) {
            best = c;
            best_key = k;
          }
        }
      }
      heap_[i] = heap_[best];
      i = best;
    }
    const Key k = KeyOf(last);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!(k < KeyOf(heap_[parent]))) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = last;
  }

 private:
  // (time, seq) as one unsigned 128-bit number: for times >= 0 a double's
  // bits order as the double does, so comparing keys is Event::Before,
  // without its branch.
  using Key = unsigned __int128;
  static Key KeyOf(const Event& e) {
    uint64_t bits;
    std::memcpy(&bits, &e.time, sizeof bits);
    return (static_cast<Key>(bits) << 64) | e.seq;
  }

  std::vector<Event> heap_;
};

// An EventQueue whose kAhead smallest events sit aside in order, so that the
// event loop can see the events it will run next (ahead(k)) and ask for
// their memory early. The order of events is EventQueue's, ties included:
// the buffer holds the smallest min(kAhead, size()) events, sorted, and the
// heap the rest, none of them before the buffer's last.
//
// Thread-safety: none (one thread, as EventQueue).
class LookaheadQueue {
 public:
  static constexpr size_t kAhead = 4;

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_ + heap_.size(); }
  const Event& top() const { return buffer_[0]; }
  // The k-th event after top() (ahead(0) is top()), or nullptr.
  const Event* ahead(size_t k) const { return k < count_ ? &buffer_[k] : nullptr; }

  void push(const Event& e) {
    if (count_ == kAhead) {
      if (!e.Before(buffer_[kAhead - 1])) {
        heap_.push(e);
        return;
      }
      heap_.push(buffer_[kAhead - 1]);  // no longer among the smallest
      --count_;
    }
    size_t i = count_++;
    for (; i > 0 && e.Before(buffer_[i - 1]); --i) buffer_[i] = buffer_[i - 1];
    buffer_[i] = e;
  }

  void pop() {
    for (size_t i = 1; i < count_; ++i) buffer_[i - 1] = buffer_[i];
    --count_;
    if (!heap_.empty()) {
      buffer_[count_++] = heap_.top();
      heap_.pop();
    }
  }

 private:
  Event buffer_[kAhead];
  size_t count_ = 0;
  EventQueue heap_;
};

}  // namespace hdmlp::sim

#endif  // HDMLP_SIM_EVENT_QUEUE_H_
