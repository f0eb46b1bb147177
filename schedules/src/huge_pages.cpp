#include "ppsim/schedules/huge_pages.hpp"

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "ppsim/schedules/jobs.hpp"

namespace ppsim::schedules {

namespace {
constexpr std::size_t kHuge = std::size_t{2} << 20;
}  // namespace

void populate(void* p, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  const unsigned jobs = jobs_here();
  if (jobs < 2 || bytes < kPopulateMinBytes) return;
  // Slices start on huge-page boundaries, so no huge page is faulted by two threads.
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(std::uintptr_t{kHuge} - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  const std::size_t pages = (end - begin + kHuge - 1) / kHuge;
  const std::size_t n = std::min<std::size_t>(jobs, pages);
  auto slice = [&](std::size_t k) {
    const std::uintptr_t a =
        std::max(reinterpret_cast<std::uintptr_t>(p), begin + pages * k / n * kHuge);
    const std::uintptr_t b = std::min(end, begin + pages * (k + 1) / n * kHuge);
    // Page-aligned inward at the ends: the partial pages are left to the first write.
    const std::uintptr_t page = 4096;
    const std::uintptr_t a4 = (a + page - 1) & ~(page - 1), b4 = b & ~(page - 1);
    if (b4 > a4) (void)madvise(reinterpret_cast<void*>(a4), b4 - a4, MADV_POPULATE_WRITE);
  };
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  std::size_t started = 1;
  for (std::size_t k = 1; k < n; ++k, ++started) {
    try {
      pool.emplace_back(slice, k);
    } catch (const std::system_error&) {
      break;
    }
  }
  for (std::size_t k = started; k < n; ++k) slice(k);
  slice(0);
  for (auto& t : pool) t.join();
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace ppsim::schedules
