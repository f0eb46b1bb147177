#include "ppsim/schedules/op_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>

#include "ppsim/base/huge_pages.hpp"

namespace ppsim::schedules {

namespace {
constexpr std::size_t kHuge = base::kHugePageBytes;
constexpr std::size_t kAlign = 64;  // a cache line: no two ranks' lists share one

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}
}  // namespace

OpArena::OpArena(std::size_t capacity_hint)
    : chunk_bytes_(round_up(std::max(capacity_hint, kHuge), kHuge)) {}

OpArena::~OpArena() {
  for (const Chunk& c : chunks_) munmap(c.base, c.size);
}

void OpArena::add_chunk(std::size_t min_bytes) {
  const std::size_t size = std::max(chunk_bytes_, round_up(min_bytes, kHuge));
  // One huge page more than asked, so the usable part can start on a huge-page boundary.
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto addr = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(addr, kHuge);
  if (aligned > addr) munmap(raw, aligned - addr);
  if (const std::uintptr_t end = aligned + size, raw_end = addr + size + kHuge; raw_end > end)
    munmap(reinterpret_cast<void*>(end), raw_end - end);
  char* base = reinterpret_cast<char*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(base, size, MADV_HUGEPAGE);  // advice: where the kernel declines, 4 KiB pages
#endif
  chunks_.push_back({base, size, 0});
}

void* OpArena::allocate(std::size_t bytes) {
  const std::size_t need = round_up(std::max<std::size_t>(bytes, 1), kAlign);
  std::unique_lock lock(mutex_);
  if (chunks_.empty() || chunks_.back().size - chunks_.back().top < need) add_chunk(need);
  Chunk& c = chunks_.back();
  void* p = c.base + c.top;
  c.top += need;
  char* ahead = nullptr;
  std::size_t ahead_bytes = 0;
  if (c.top > c.populated) {
    const std::size_t upto = std::min(c.size, round_up(c.top + base::kPopulateMinBytes, kHuge));
    ahead = c.base + c.populated;
    ahead_bytes = upto - c.populated;
    c.populated = upto;
  }
  lock.unlock();  // other threads allocate meanwhile; populate leaves contents as they are
  if (ahead_bytes > 0) base::populate(ahead, ahead_bytes);
  return p;
}

void OpArena::deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t need = round_up(std::max<std::size_t>(bytes, 1), kAlign);
  const std::lock_guard lock(mutex_);
  if (chunks_.empty()) return;
  Chunk& c = chunks_.back();
  if (static_cast<char*>(p) + need == c.base + c.top) c.top -= need;
}

std::size_t OpArena::used() const {
  const std::lock_guard lock(mutex_);
  std::size_t used = 0;
  for (const Chunk& c : chunks_) used += c.top;
  return used;
}

}  // namespace ppsim::schedules
