#pragma once
// A small map from int32 keys to int32 values for what the engine keeps only while it is in flight
// (internal to sim/): open addressing with linear probing and backward-shift deletion, grown by
// doubling at half full. No allocation per entry, as std::unordered_map makes, and its slots stay
// in cache when few keys are live, however large the key space.
#include <cstdint>
#include <memory>

namespace ppsim::sim::engine {

class IntMap {
 public:
  // The value of `key`, or `absent`.
  std::int32_t find(std::int32_t key, std::int32_t absent) const {
    if (size_ == 0) return absent;
    for (std::uint32_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return absent;
      if (s.key == key) return s.value;
    }
  }

  // Maps `key` to `value`, replacing what it mapped to.
  void insert(std::int32_t key, std::int32_t value) {
    if (2 * (std::size_t{size_} + 1) > capacity()) grow();
    std::uint32_t i = home(key);
    for (; slots_[i].used; i = (i + 1) & mask_)
      if (slots_[i].key == key) {
        slots_[i].value = value;
        return;
      }
    slots_[i] = {key, value, true};
    ++size_;
  }

  // Removes `key`; returns its value, or `absent` when it was not there.
  std::int32_t erase(std::int32_t key, std::int32_t absent) {
    if (size_ == 0) return absent;
    std::uint32_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used) return absent;
      if (slots_[i].key == key) break;
    }
    return remove_at(i);
  }

  // One probe for a pair that meets: removes `key` and returns its value when it is there, else
  // maps it to `value` and returns `absent`.
  std::int32_t take_or_insert(std::int32_t key, std::int32_t value, std::int32_t absent) {
    if (2 * (std::size_t{size_} + 1) > capacity()) grow();
    std::uint32_t i = home(key);
    for (; slots_[i].used; i = (i + 1) & mask_)
      if (slots_[i].key == key) return remove_at(i);
    slots_[i] = {key, value, true};
    ++size_;
    return absent;
  }

  std::uint32_t size() const { return size_; }

 private:
  std::int32_t remove_at(std::uint32_t i) {
    const std::int32_t value = slots_[i].value;
    // Entries after the hole whose probe passed through it move into it, so that no probe
    // sequence is cut and no tombstones pile up.
    for (std::uint32_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const std::uint32_t h = home(slots_[j].key);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {  // h is not in the cyclic range (i, j]
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].used = false;
    --size_;
    return value;
  }

  struct Slot {
    std::int32_t key = 0;
    std::int32_t value = 0;
    bool used = false;
  };
  std::size_t capacity() const { return slots_ ? std::size_t{mask_} + 1 : 0; }
  // Fibonacci hashing: keys with equal low bits (a stride of tensors) still spread.
  std::uint32_t home(std::int32_t key) const {
    return static_cast<std::uint32_t>(
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(key)) * 0x9E3779B97F4A7C15ull) >>
        shift_);
  }
  void grow() {
    const std::size_t old = capacity();
    const std::size_t cap = old == 0 ? 16 : 2 * old;
    std::unique_ptr<Slot[]> previous = std::move(slots_);
    slots_ = std::make_unique<Slot[]>(cap);
    mask_ = static_cast<std::uint32_t>(cap - 1);
    shift_ = 64 - static_cast<std::uint32_t>(__builtin_ctzll(cap));
    size_ = 0;
    for (std::size_t k = 0; k < old; ++k)
      if (previous[k].used) insert(previous[k].key, previous[k].value);
  }

  std::unique_ptr<Slot[]> slots_;
  std::uint32_t mask_ = 0;
  std::uint32_t shift_ = 64;
  std::uint32_t size_ = 0;
};

}  // namespace ppsim::sim::engine
