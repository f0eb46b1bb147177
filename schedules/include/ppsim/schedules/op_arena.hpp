#pragma once
// Storage for a Program's op lists: one arena of transparent huge pages shared by all ranks.
// Writing a lowered program touches every page once; with 4 KiB pages that is one fault per 256
// ops, and in a VM a fault costs microseconds (a third of a P=64 run went to them). Lists packed
// into one arena fault once per 2 MiB instead. Ops are written exactly once into blocks of exactly
// their size (lower() builds each rank in a scratch list first), so packing wastes nothing.
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

namespace ppsim::schedules {

// A bump allocator over huge-page-advised anonymous mappings. Thread-safe. A freed block returns
// its memory only when it was the last one handed out; the rest comes back with the arena. Memory
// up to kPopulateMinBytes past the top is faulted in ahead on spare cores (populate): a generator
// writes its lists on one thread, and faults were most of its time.
class OpArena {
 public:
  // `capacity_hint`: bytes the first mapping reserves (address space: only touched pages cost).
  explicit OpArena(std::size_t capacity_hint);
  ~OpArena();
  OpArena(const OpArena&) = delete;
  OpArena& operator=(const OpArena&) = delete;

  void* allocate(std::size_t bytes);  // throws std::bad_alloc
  void deallocate(void* p, std::size_t bytes) noexcept;

  // Bytes handed out and not given back at the top (what the arena's lists may have touched).
  std::size_t used() const;

 private:
  struct Chunk {
    char* base;
    std::size_t size;
    std::size_t top;
    std::size_t populated = 0;  // the start faulted in ahead of `top` (populate)
  };
  void add_chunk(std::size_t min_bytes);

  mutable std::mutex mutex_;
  std::vector<Chunk> chunks_;
  std::size_t chunk_bytes_;
};

// std::vector's allocator for op lists: from an arena when given one, else from the heap. Copies of
// a container do not keep the arena (a copied Program owns plain heap lists); moves carry it.
template <typename T>
class ArenaAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;

  ArenaAllocator() noexcept = default;
  explicit ArenaAllocator(std::shared_ptr<OpArena> arena) noexcept : arena_(std::move(arena)) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& other) noexcept : arena_(other.arena()) {}

  T* allocate(std::size_t n) {
    if (!arena_) return std::allocator<T>{}.allocate(n);
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(arena_->allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (!arena_) return std::allocator<T>{}.deallocate(p, n);
    arena_->deallocate(p, n * sizeof(T));
  }
  ArenaAllocator select_on_container_copy_construction() const { return {}; }

  const std::shared_ptr<OpArena>& arena() const { return arena_; }
  template <typename U>
  bool operator==(const ArenaAllocator<U>& other) const noexcept {
    return arena_ == other.arena();
  }

 private:
  std::shared_ptr<OpArena> arena_;
};

}  // namespace ppsim::schedules
