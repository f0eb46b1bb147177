// OpArena and the Programs that keep their op lists in one: blocks never overlap, the top block
// gives its memory back, lists are exactly their size, copies leave the arena and moves keep it.
#include <sys/mman.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "helpers.hpp"
#include "ppsim/base/huge_pages.hpp"
#include "ppsim/base/jobs.hpp"
#include "ppsim/schedules/generator.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/op_arena.hpp"
#include "ppsim/schedules/program.hpp"

using ppsim::schedules::OpArena;
using ppsim::schedules::Program;

namespace {

// Whether every rank's op list of `p` is in an arena, and all in the same one.
bool all_in_one_arena(const Program& p) {
  const auto arena = p.ops(0).get_allocator().arena();
  if (!arena) return false;
  for (int r = 0; r < p.ranks(); ++r)
    if (p.ops(r).get_allocator().arena() != arena) return false;
  return true;
}

bool none_in_arena(const Program& p) {
  for (int r = 0; r < p.ranks(); ++r)
    if (p.ops(r).get_allocator().arena()) return false;
  return true;
}

}  // namespace

TEST_CASE("op_arena.aligned_blocks_never_overlap_even") {
  // OpArena: aligned blocks that never overlap even past the first mapping's size
  OpArena arena(1 << 20);  // rounds up to one 2 MiB mapping
  std::vector<std::pair<char*, std::size_t>> blocks;
  std::size_t total = 0;
  for (std::size_t i = 0; total < (std::size_t{9} << 20); ++i) {
    const std::size_t bytes = 1 + (i * 7919) % 300000;  // up to 293 KiB, odd sizes
    auto* p = static_cast<char*>(arena.allocate(bytes));
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    std::memset(p, static_cast<int>(i & 0xff), bytes);
    blocks.emplace_back(p, bytes);
    total += bytes;
  }
  const std::size_t big = std::size_t{5} << 20;  // larger than a mapping: a mapping of its own
  auto* p = static_cast<char*>(arena.allocate(big));
  std::memset(p, 0xab, big);
  blocks.emplace_back(p, big);
  // Each block still holds what was written into it: no later block overwrote it.
  for (std::size_t i = 0; i + 1 < blocks.size(); ++i) {
    const auto [q, n] = blocks[i];
    const auto want = static_cast<char>(i & 0xff);
    CHECK((q[0] == want && q[n - 1] == want && q[n / 2] == want));
  }
  CHECK(arena.used() >= total + big);
}

TEST_CASE("op_arena.freeing_last_block_gives_bytes") {
  // OpArena: freeing the last block gives its bytes back, an earlier one waits
  OpArena arena(0);
  void* a = arena.allocate(1000);
  void* b = arena.allocate(100);
  const std::size_t both = arena.used();
  CHECK(both == 1024 + 128);  // rounded to 64-byte lines
  arena.deallocate(a, 1000);  // not the top: kept until the arena goes
  CHECK(arena.used() == both);
  arena.deallocate(b, 100);
  CHECK(arena.used() == 1024);
  CHECK(arena.allocate(64) == b);  // the freed top is handed out again
}

TEST_CASE("op_arena.threads_allocate_once_get_disjoint", "[threads]") {
  // OpArena: threads that allocate at once get disjoint blocks
  OpArena arena(1 << 20);
  constexpr int kThreads = 4, kBlocks = 2000;
  std::vector<std::vector<std::pair<std::uintptr_t, std::size_t>>> got(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < kBlocks; ++i) {
        const std::size_t bytes = 16 * (1 + static_cast<std::size_t>(i * 31 + t) % 500);
        auto* p = static_cast<unsigned char*>(arena.allocate(bytes));
        std::memset(p, t + 1, bytes);
        got[static_cast<std::size_t>(t)].emplace_back(reinterpret_cast<std::uintptr_t>(p), bytes);
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<std::pair<std::uintptr_t, std::size_t>> all;
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& [p, n] : got[static_cast<std::size_t>(t)]) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(p);
      CHECK((bytes[0] == t + 1 && bytes[n - 1] == t + 1));
      all.emplace_back(p, n);
    }
  }
  std::sort(all.begin(), all.end());
  for (std::size_t i = 1; i < all.size(); ++i)
    CHECK(all[i - 1].first + all[i - 1].second <= all[i].first);
}

TEST_CASE("op_arena.large_lowered_program_keeps_lists", "[threads]") {
  // a large lowered program keeps its lists in one arena at exactly their size
  // 1F1B P=8 M=8192: 131,072 compute ops (2 MiB: on the heap), about 10 MiB lowered (arenas
  // start at 8 MiB).
  const Program compute = ppsim::schedules::generate(
      "1f1b", ppsim::schedules::ScheduleParams{{"ranks", 8}, {"microbatches", 8192}});
  CHECK(none_in_arena(compute));

  const Program lowered = ppsim::schedules::lower(compute, {"async", {{"prefetch", 1}}});
  REQUIRE(all_in_one_arena(lowered));
  for (int r = 0; r < lowered.ranks(); ++r) {
    CHECK(lowered.ops(r).capacity() == lowered.ops(r).size());
    // First rank: F, SEND_F, RECV_B, WAIT, B per microbatch; last: RECV_F, WAIT, F, B, SEND_B,
    // WAIT; between: both, and one closing WAIT for the last sends.
    const std::size_t M = 8192;
    CHECK(lowered.ops(r).size() == (r == 0 ? 5 * M : r == 7 ? 6 * M : 8 * M + 1));
  }
  // The same ops whether the ranks were lowered on one thread or several.
  ppsim::schedules::LoweringOptions one{"async", {{"prefetch", 1}}};
  one.threads = 1;
  const Program serial = ppsim::schedules::lower(compute, one);
  CHECK(serial.to_text() == lowered.to_text());

  // A copy owns heap lists with the same ops; it outlives the original and its arena.
  auto* original = new Program(lowered);
  Program copy(*original);
  CHECK(none_in_arena(copy));
  const std::string text = original->to_text();
  delete original;
  CHECK(copy.to_text() == text);

  // A move takes the arena along.
  Program source = ppsim::schedules::lower(compute, one);
  const auto arena = source.ops(3).get_allocator().arena();
  const Program moved(std::move(source));
  CHECK(moved.ops(3).get_allocator().arena() == arena);
  CHECK(moved.to_text() == text);
}

TEST_CASE("op_arena.generated_program_8_mib_packs") {
  // a generated program of 8 MiB packs its exactly reserved lists in one arena
  // 64 ranks x 2 x 4096 ops x 16 bytes = 8 MiB.
  const Program p = ppsim::schedules::generate(
      "1f1b", ppsim::schedules::ScheduleParams{{"ranks", 64}, {"microbatches", 4096}});
  REQUIRE(all_in_one_arena(p));
  for (int r = 0; r < p.ranks(); ++r) {
    CHECK(p.ops(r).size() == 2 * 4096);
    CHECK(p.ops(r).capacity() == p.ops(r).size());
  }
  const Program half = ppsim::schedules::generate(
      "1f1b", ppsim::schedules::ScheduleParams{{"ranks", 64}, {"microbatches", 2048}});
  CHECK(none_in_arena(half));
}

TEST_CASE("op_arena.small_program_stays_heap") {
  // a small program stays on the heap
  const Program p = ppsim::test::lowered("1f1b", 4, 8);
  CHECK(none_in_arena(p));
  const Program compute = ppsim::schedules::generate(
      "1f1b", ppsim::schedules::ScheduleParams{{"ranks", 4}, {"microbatches", 8}});
  CHECK(none_in_arena(compute));
}

TEST_CASE("op_arena.list_arena_still_grows_shrinks") {
  // a list in an arena still grows and shrinks like any vector
  const Program compute = ppsim::schedules::generate(
      "1f1b", ppsim::schedules::ScheduleParams{{"ranks", 8}, {"microbatches", 8192}});
  Program p = ppsim::schedules::lower(compute, {"async", {{"prefetch", 1}}});
  const std::string before = ppsim::test::rank_line(p, 2);
  auto& ops = p.ops(2);
  const std::size_t n = ops.size();
  const ppsim::schedules::Op extra = ops.front();
  for (int i = 0; i < 100000; ++i) ops.push_back(extra);  // moves it within the arena
  CHECK(ops.size() == n + 100000);
  ops.resize(n);
  CHECK(ppsim::test::rank_line(p, 2) == before);
  p.push_wait(2, std::vector<std::int32_t>{0, 1});
  CHECK(p.op_text(2, p.ops(2).back()) == "WAIT(0;1)");
}

namespace {

// Whether this kernel faults memory in on request (MADV_POPULATE_WRITE, Linux 5.14); one thread
// suffices for prefault().
bool populate_one_works() {
#ifdef MADV_POPULATE_WRITE
  void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  const bool ok = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(probe, 4096);
  return ok;
#else
  return false;
#endif
}

// Whether ppsim may also use a second thread here: only then does populate() fault anything in.
bool populate_works() {
  return ppsim::base::jobs_here() >= 2 && populate_one_works();
}

// How many of the 4 KiB pages in [p, p + bytes) are resident.
std::size_t resident_pages(const void* p, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{4095};
  const std::size_t pages = (reinterpret_cast<std::uintptr_t>(p) + bytes - begin + 4095) / 4096;
  std::vector<unsigned char> in(pages);
  REQUIRE(mincore(reinterpret_cast<void*>(begin), pages * 4096, in.data()) == 0);
  return static_cast<std::size_t>(
      std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

}  // namespace

TEST_CASE("op_arena.populate_faults_fresh_memory_leaves", "[threads]") {
  // populate faults fresh memory in and leaves written memory as it was
  constexpr std::size_t kBytes = std::size_t{40} << 20;
  std::vector<unsigned char> written(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) written[i] = static_cast<unsigned char>(i * 31 + 7);
  ppsim::base::populate(written.data() + 5, kBytes - 5);
  bool same = true;
  for (std::size_t i = 0; i < kBytes; ++i)
    same = same && written[i] == static_cast<unsigned char>(i * 31 + 7);
  CHECK(same);

  void* fresh = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(fresh != MAP_FAILED);
  CHECK(resident_pages(fresh, kBytes) == 0);
  ppsim::base::populate(fresh, kBytes);
  if (populate_works()) CHECK(resident_pages(fresh, kBytes) == kBytes / 4096);
  const auto* bytes = static_cast<const unsigned char*>(fresh);
  CHECK(std::all_of(bytes, bytes + kBytes, [](unsigned char c) { return c == 0; }));
  // Small ranges are left to their first write.
  void* small = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(small != MAP_FAILED);
  ppsim::base::populate(small, 1 << 20);
  CHECK(resident_pages(small, 1 << 20) == 0);
  munmap(small, 1 << 20);
  munmap(fresh, kBytes);
}

TEST_CASE("op_arena.prefault_faults_page_small_range", "[threads]") {
  // prefault faults in every page a small range touches and leaves written memory as it was
  constexpr std::size_t kBytes = std::size_t{1} << 20;  // below kPopulateMinBytes: one thread
  void* fresh = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(fresh != MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(fresh);
  REQUIRE(resident_pages(fresh, kBytes) == 0);
  // From 5 bytes into the first page to 5 bytes into the last: both end pages are faulted in.
  ppsim::base::prefault(bytes + 5, kBytes - 4096);
  if (populate_one_works()) CHECK(resident_pages(fresh, kBytes) == kBytes / 4096);
  CHECK(std::all_of(bytes, bytes + kBytes, [](unsigned char c) { return c == 0; }));
  for (std::size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<unsigned char>(i * 13 + 1);
  ppsim::base::prefault(bytes, kBytes);
  bool same = true;
  for (std::size_t i = 0; i < kBytes; ++i)
    same = same && bytes[i] == static_cast<unsigned char>(i * 13 + 1);
  CHECK(same);
  ppsim::base::prefault(bytes, 0);  // nothing to do
  munmap(fresh, kBytes);
  // A large range goes through populate (several threads where there are cores).
  constexpr std::size_t kLarge = ppsim::base::kPopulateMinBytes;
  void* large = mmap(nullptr, kLarge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(large != MAP_FAILED);
  ppsim::base::prefault(large, kLarge);
  if (populate_one_works()) CHECK(resident_pages(large, kLarge) == kLarge / 4096);
  munmap(large, kLarge);
}

TEST_CASE("op_arena.memory_ahead_top_faulted_lists", "[threads]") {
  // OpArena: memory ahead of the top is faulted in, lists written meanwhile keep theirs
  constexpr std::size_t kBlock = 256 << 10;
  OpArena arena(std::size_t{96} << 20);
  auto* first = static_cast<unsigned char*>(arena.allocate(kBlock));
  // The next kPopulateMinBytes past the top are in before anything is written there.
  if (populate_works())
    CHECK(resident_pages(first + kBlock, ppsim::base::kPopulateMinBytes) ==
          ppsim::base::kPopulateMinBytes / 4096);
  std::memset(first, 0x5a, kBlock);
  // Two writers, each faulting the arena ahead as it allocates, while the other writes.
  std::vector<std::vector<unsigned char*>> got(2);
  std::vector<std::thread> pool;
  for (int t = 0; t < 2; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        auto* p = static_cast<unsigned char*>(arena.allocate(kBlock));
        std::memset(p, 0x10 + t, kBlock);
        got[static_cast<std::size_t>(t)].push_back(p);
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(std::all_of(first, first + kBlock, [](unsigned char c) { return c == 0x5a; }));
  for (int t = 0; t < 2; ++t)
    for (const unsigned char* p : got[static_cast<std::size_t>(t)])
      CHECK(std::all_of(p, p + kBlock, [t](unsigned char c) { return c == 0x10 + t; }));
}
