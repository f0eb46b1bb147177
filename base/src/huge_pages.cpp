#include "ppsim/base/huge_pages.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "ppsim/base/blocks.hpp"
#include "ppsim/base/jobs.hpp"

namespace ppsim::base {

namespace {
// The base page size (4 KiB on x86-64; 16 or 64 KiB on some arm64 kernels, where a 4 KiB-aligned
// range would make madvise fail with EINVAL).
std::uintptr_t page_bytes() {
  static const std::uintptr_t bytes = [] {
    const long n = ::sysconf(_SC_PAGESIZE);
    return n > 0 ? static_cast<std::uintptr_t>(n) : std::uintptr_t{4096};
  }();
  return bytes;
}
}  // namespace

void populate(void* p, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const unsigned jobs = jobs_here();
  if (jobs < 2 || bytes < kPopulateMinBytes) return;
  // Slices start on huge-page boundaries, so no huge page is faulted by two threads.
  constexpr std::uintptr_t kHuge = kHugePageBytes;
  const std::uintptr_t kPage = page_bytes();
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = first & ~(kHuge - 1), end = first + bytes;
  const std::size_t pages = (end - begin + kHuge - 1) / kHuge;
  const auto n = static_cast<int>(std::min<std::size_t>(jobs, pages));
  // One slice per "rank" of for_each_rank: its threads, and its fallback when one cannot start.
  for_each_rank(n, jobs, [&](unsigned, int k) {
    const auto slice = static_cast<std::size_t>(k), slices = static_cast<std::size_t>(n);
    const std::uintptr_t a = std::max(first, begin + pages * slice / slices * kHuge);
    const std::uintptr_t b = std::min(end, begin + pages * (slice + 1) / slices * kHuge);
    // Page-aligned inward at the ends: the partial pages are left to the first write.
    const std::uintptr_t a4 = (a + kPage - 1) & ~(kPage - 1), b4 = b & ~(kPage - 1);
    if (b4 > a4) (void)madvise(reinterpret_cast<void*>(a4), b4 - a4, MADV_POPULATE_WRITE);
  });
#else
  (void)p;
  (void)bytes;
#endif
}

void prefault(void* p, std::size_t bytes) {
  if (bytes == 0) return;
  if (bytes >= kPopulateMinBytes && jobs_here() >= 2) return populate(p, bytes);
#ifdef MADV_POPULATE_WRITE
  // Outward to whole pages: the pages holding the range's ends belong to its mapping too.
  const std::uintptr_t kPage = page_bytes();
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = first & ~(kPage - 1),
                       end = (first + bytes + kPage - 1) & ~(kPage - 1);
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#endif
}

}  // namespace ppsim::base
