#pragma once
// Large tables on transparent huge pages: the simulator's engine and validation walk tables of
// hundreds of MiB at P=256, and with 4 KiB pages that is TLB-bound and page-fault-bound (the
// engine ran 40% slower at P=256).
#include <cstddef>
#include <cstdint>
#include <vector>

#include <sys/mman.h>

namespace ppsim::base {

// A transparent huge page on x86-64: what the tables below are aligned and faulted in by.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Below this, populate() leaves the memory to be faulted in where it is first written.
inline constexpr std::size_t kPopulateMinBytes = std::size_t{16} << 20;

// Faults [p, p + bytes) in, writable, on jobs_here() threads when it is at least
// kPopulateMinBytes. Memory touched for the first time costs 0.4-1 GB/s per thread in a VM whose
// host must back it again, and two threads fault it in 1.2 to 2.4 times as fast as one
// (ppsim_bench_first_touch, bench/first_touch.cpp). The contents are unchanged: other threads may
// be writing there. Advice only: a kernel without MADV_POPULATE_WRITE (before 5.14) changes
// nothing.
void populate(void* p, std::size_t bytes);

// Faults in every page that [p, p + bytes) touches, as populate() does for a large range and with
// one MADV_POPULATE_WRITE on this thread for a smaller one (or a large one where ppsim has one
// thread), for memory about to be written in full: what is faulted in is resident from then on. In
// a VM each page-fault exception costs ~12 us per 4 KiB page, and faulting the same pages in by one
// call ~0.6 us each (ppsim_bench_first_touch): a P=64 run took 1,140 exceptions, 320 since
// . The contents are unchanged. Advice only, as for populate().
void prefault(void* p, std::size_t bytes);

// Room for n elements in vector `v`, the new room faulted in (prefault), for a vector about to be
// filled to n: what is reserved is resident from then on.
template <typename V>
void reserve_prefaulted(V& v, std::size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  prefault(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(*v.data()));
}

// Sizes `v` to n copies of `value`, asking the kernel for transparent huge pages before the memory
// is first touched (advice only: where the kernel declines, nothing changes), and faulting the
// table in first (prefault: on several threads when it is large).
template <typename T>
void assign_huge(std::vector<T>& v, std::size_t n, const T& value) {
  v.clear();
  v.shrink_to_fit();
  v.reserve(n);
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHuge = kHugePageBytes;
  std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(v.data());
  std::uintptr_t end = begin + n * sizeof(T);
  begin = (begin + kHuge - 1) & ~(kHuge - 1);
  end &= ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
  prefault(v.data(), n * sizeof(T));
  v.assign(n, value);
}

// The same, as a new vector.
template <typename T>
std::vector<T> huge_vector(std::size_t n, const T& value) {
  std::vector<T> v;
  assign_huge(v, n, value);
  return v;
}

}  // namespace ppsim::base
