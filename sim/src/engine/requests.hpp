#pragma once
// A rank's requests (internal to sim/): the outstanding ones (posted, their WAIT not passed) map
// to their endpoints, the waited ones are remembered (a later WAIT on one returns at once, as
// MPI's on a null request). Memory follows the requests in flight, not the rank's length: a table
// of every id was 4 bytes per async op (32 MiB at 16.8 M ops), most of it touched once; a waited
// id now costs one bit.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace ppsim::sim::engine {

// Lowering numbers a rank's requests 0..n-1 in posting order, and the outstanding ones lie in a
// window that slides along (a forward send lives until its backward, some thousand ids later at
// P=256): a ring indexed by id modulo its size holds them with neither collisions nor hashing,
// and consecutive ids share cache lines as in a table of all ids. Where two outstanding ids would
// take one slot the ring doubles, while it stays within half the rank's ids (so never more memory
// than such a table) or a few times the outstanding ids; an id that would take it past both goes
// to a hash map.
class RequestMap {
 public:
  // Ids in [0, dense) are remembered as waited in the bits at `retired` (dense / 64 words, zero),
  // the others in a set. Call once, before the rest.
  void setup(std::int32_t dense, std::uint64_t* retired) {
    cold_ = std::make_unique<Cold>();
    cold_->dense = dense;
    cold_->retired = retired;
    while (cold_->limit < (std::uint32_t{1} << 30) &&
           4 * std::size_t{cold_->limit} <= static_cast<std::size_t>(dense))
      cold_->limit *= 2;
  }

  // The endpoint of outstanding request `id`, or `absent`.
  std::int32_t find(std::int32_t id, std::int32_t absent) const {
    if (ring_) {
      const Slot& s = ring_[slot(id)];
      if (s.ep != kEmpty && s.id == id) return s.ep;
    }
    if (!cold_ || cold_->spill.empty()) return absent;
    const auto it = cold_->spill.find(id);
    return it == cold_->spill.end() ? absent : it->second;
  }

  // Whether `id` was outstanding once and has been waited since.
  bool waited(std::int32_t id) const {
    if (id >= 0 && id < cold_->dense) return (cold_->retired[id / 64] >> (id % 64)) & 1;
    return cold_->retired_sparse.count(id) > 0;
  }

  // Makes `id` outstanding with endpoint `ep` (>= 0), replacing what it mapped to.
  void insert(std::int32_t id, std::int32_t ep) {
    if (!cold_->spill.empty())
      if (const auto it = cold_->spill.find(id); it != cold_->spill.end()) {
        it->second = ep;
        return;
      }
    while (true) {
      if (ring_) {
        Slot& s = ring_[slot(id)];
        if (s.ep == kEmpty || s.id == id) {
          live_ += s.ep == kEmpty;
          s = {id, ep};
          return;
        }
      }
      if (!grow()) break;
    }
    cold_->spill[id] = ep;
  }

  // The WAIT on `id` has passed: returns its endpoint and remembers it as waited, or returns
  // `absent` when it was not outstanding.
  std::int32_t retire(std::int32_t id, std::int32_t absent) {
    std::int32_t ep = absent;
    if (Slot* s = ring_ ? &ring_[slot(id)] : nullptr; s && s->ep != kEmpty && s->id == id) {
      ep = s->ep;
      s->ep = kEmpty;
      --live_;
    } else if (const auto it = cold_->spill.find(id); it != cold_->spill.end()) {
      ep = it->second;
      cold_->spill.erase(it);
    } else {
      return absent;
    }
    if (id >= 0 && id < cold_->dense)
      cold_->retired[id / 64] |= std::uint64_t{1} << (id % 64);
    else
      cold_->retired_sparse.insert(id);
    return ep;
  }

  std::size_t outstanding() const { return live_ + (cold_ ? cold_->spill.size() : 0); }

 private:
  static constexpr std::int32_t kEmpty = -1;
  static constexpr std::uint32_t kMinRing = 64;  // slots: a 512-byte ring costs nothing
  static constexpr std::uint32_t kSlack = 8;     // the ring may be this many times the live ids
  struct Slot {
    std::int32_t id = 0;
    std::int32_t ep = kEmpty;
  };
  // What only setup, growth, waits and odd ids need: off the rank's hot cache lines.
  struct Cold {
    std::uint32_t limit = kMinRing;  // slots the ring may grow to whatever the live ids
    std::int32_t dense = 0;
    std::uint64_t* retired = nullptr;
    std::unordered_map<std::int32_t, std::int32_t> spill;
    std::unordered_set<std::int32_t> retired_sparse;
  };
  std::uint32_t slot(std::int32_t id) const { return static_cast<std::uint32_t>(id) & mask_; }
  std::uint32_t capacity() const { return ring_ ? mask_ + 1 : 0; }

  // Doubles the ring (ids distinct modulo n stay distinct modulo 2n), unless that would take it
  // past both limits; false then.
  bool grow() {
    const std::uint32_t old = capacity();
    const std::uint32_t cap = old == 0 ? kMinRing : 2 * old;
    if (old != 0 && cap > cold_->limit &&
        (cap > (std::uint32_t{1} << 30) || cap > kSlack * (live_ + 1)))
      return false;
    std::unique_ptr<Slot[]> previous = std::move(ring_);
    ring_ = std::make_unique<Slot[]>(cap);
    mask_ = cap - 1;
    for (std::uint32_t k = 0; k < old; ++k)
      if (previous[k].ep != kEmpty) ring_[slot(previous[k].id)] = previous[k];
    return true;
  }

  std::unique_ptr<Slot[]> ring_;
  std::uint32_t mask_ = 0;
  std::uint32_t live_ = 0;  // ids in the ring
  std::unique_ptr<Cold> cold_;
};

}  // namespace ppsim::sim::engine
