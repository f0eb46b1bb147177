// What this machine charges for memory a process touches for the first time: the kernel clears
// each fresh page, and in a VM the host may first have to back it. A process that touches its
// ~400 MiB once (as `ppsim run` at P=256 does) pays this on top of its own work.
//
// Maps MIB MiB (2 MiB-aligned, advised MADV_HUGEPAGE or MADV_NOHUGEPAGE), writes one byte per
// 4 KiB page, unmaps; twice: first after a pause, then again at once (the same physical memory,
// just freed, is usually handed back). The pause of PAUSE seconds lets a VM with free page
// reporting (a virtio balloon) return memory freed before to the host, so the first touch is as for
// a new process. Then a memset of the touched memory, for the speed of writing memory that is
// already there. Then, with 4 KiB pages: the same memory faulted in by one MADV_POPULATE_WRITE call
// (as base::prefault does) instead of a fault per page. Last, with 2 MiB pages after a pause:
// the same memory faulted in by base::populate (MADV_POPULATE_WRITE on ppsim's threads, as its
// large tables are) against one thread doing the same, for what the second core buys.
//
//   ppsim_bench_first_touch [--mib MIB] [--pause SECONDS]
#include <fmt/format.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "ppsim/base/huge_pages.hpp"
#include "ppsim/base/jobs.hpp"

namespace {

constexpr std::size_t kHuge = ppsim::base::kHugePageBytes;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

enum class Fault { write, populate_one, populate_all };

// Seconds to touch `bytes` of fresh memory (a write per page, or MADV_POPULATE_WRITE on one
// thread or through base::populate); with `then_memset`, also the seconds of a memset of it
// once touched.
std::pair<double, double> touch(std::size_t bytes, bool huge, bool then_memset,
                                Fault how = Fault::write) {
  void* raw =
      mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    fmt::print(stderr, "ppsim_bench_first_touch: mmap of {} bytes failed\n", bytes);
    std::exit(1);
  }
  auto* p =
      reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  const auto t0 = std::chrono::steady_clock::now();
  if (how == Fault::populate_all) {
    ppsim::base::populate(p, bytes);
  } else if (how == Fault::populate_one) {
#ifdef MADV_POPULATE_WRITE
    madvise(p, bytes, MADV_POPULATE_WRITE);
#endif
  } else {
    for (std::size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
  }
  const double first = seconds_since(t0);
  double again = 0;
  if (then_memset) {
    const auto t1 = std::chrono::steady_clock::now();
    std::memset(p, 2, bytes);
    again = seconds_since(t1);
  }
  munmap(raw, bytes + kHuge);
  return {first, again};
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  double pause = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--mib" && i + 1 < argc)
      mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--pause" && i + 1 < argc)
      pause = std::strtod(argv[++i], nullptr);
    else {
      fmt::print(stderr, "usage: ppsim_bench_first_touch [--mib MIB] [--pause SECONDS]\n");
      return 2;
    }
  }
  if (mib == 0 || mib > (std::size_t{1} << 20) || !(pause >= 0)) {
    fmt::print(stderr, "ppsim_bench_first_touch: --mib must be in [1, 2^20], --pause >= 0\n");
    return 2;
  }
  const std::size_t bytes = mib << 20;
  fmt::print("first touch of {} MiB, one byte per 4 KiB page; GB/s = the MiB over the seconds\n\n",
             mib);
  fmt::print("{:<10} {:<34} {:>9} {:>8} {:>9}\n", "pages", "when", "seconds", "GB/s", "us/4 KiB");
  auto print_row = [&](const char* kind, const std::string& when, double s) {
    fmt::print("{:<10} {:<34} {:>9.3f} {:>8.2f} {:>9.2f}\n", kind, when, s,
               static_cast<double>(bytes) / s / 1e9, s * 1e6 / static_cast<double>(bytes / 4096));
  };
  for (const bool huge : {true, false}) {
    const char* kind = huge ? "2 MiB" : "4 KiB";
    auto row = [&](const char* when, double s) { print_row(kind, when, s); };
    std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    row(fmt::format("after a pause of {:g} s", pause).c_str(), touch(bytes, huge, false).first);
    const auto [warm, memset_s] = touch(bytes, huge, true);
    row("again at once (memory just freed)", warm);
    row("memset of that memory, once touched", memset_s);
  }
#ifdef MADV_POPULATE_WRITE
  std::this_thread::sleep_for(std::chrono::duration<double>(pause));
  print_row("4 KiB", "populate, 1 thread, after a pause",
            touch(bytes, false, false, Fault::populate_one).first);
  print_row("4 KiB", "populate, 1 thread, again at once",
            touch(bytes, false, false, Fault::populate_one).first);
  // populate() leaves small ranges, and everything on one thread, to the first write.
  const unsigned jobs = ppsim::base::jobs_here();
  if (bytes < ppsim::base::kPopulateMinBytes || jobs < 2) return 0;
  auto row = [&](const std::string& when, double s) { print_row("2 MiB", when, s); };
  std::this_thread::sleep_for(std::chrono::duration<double>(pause));
  row("populate, 1 thread, after a pause", touch(bytes, true, false, Fault::populate_one).first);
  std::this_thread::sleep_for(std::chrono::duration<double>(pause));
  row(fmt::format("populate, {} threads, after a pause", jobs),
      touch(bytes, true, false, Fault::populate_all).first);
#endif
  return 0;
}
