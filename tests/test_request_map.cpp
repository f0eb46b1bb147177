// The engine's small maps (sim/src/engine/): RequestMap (a rank's outstanding and waited requests)
// and IntMap (tag matching's half-posted transfers), against std::unordered_map, for the ids
// lowering makes and for ids chosen to collide.
#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/int_map.hpp"
#include "engine/requests.hpp"

using ppsim::sim::engine::IntMap;
using ppsim::sim::engine::RequestMap;

namespace {

constexpr std::int32_t kAbsent = -7;

struct Ids {
  const char* name;
  std::vector<std::int32_t> ids;
};

std::vector<Ids> id_sets() {
  std::vector<std::int32_t> sequential, strided, random;
  for (std::int32_t i = 0; i < 3000; ++i) {
    sequential.push_back(i);
    strided.push_back(i * 1024);  // equal low bits: a ring doubles, a hash of them alone collides
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) random.push_back(static_cast<std::int32_t>(rng()));
  random.push_back(INT32_MIN);
  random.push_back(INT32_MAX);
  random.push_back(-1);
  return {{"sequential", sequential}, {"strided", strided}, {"random", random}};
}

// Posts a few ahead and waits the oldest (lowering's pattern), then random posts and waits, ids
// posted again after their wait and while outstanding (the later endpoint counts). `post`,
// `wait` and `check` act on the map under test and the reference alike.
template <typename Post, typename Wait, typename Check>
void drive(const std::vector<std::int32_t>& ids, Post post, Wait wait, Check check) {
  std::mt19937 rng(11);
  std::size_t next = 0;
  std::int32_t ep = 0;
  for (int step = 0; step < 20000; ++step) {
    const auto pick = rng() % 10;
    if (pick < 5 && next < ids.size())
      post(ids[next++], ep++);
    else if (pick < 8 && next > 0)
      wait(ids[rng() % next]);
    else if (next > 0)
      post(ids[rng() % next], ep++);
    if (step % 997 == 0) check();
  }
  check();
}

}  // namespace

TEST_CASE("RequestMap keeps outstanding requests and remembers waited ones, whatever the ids",
          "[engine][requests]") {
  for (const auto& [name, ids] : id_sets()) {
    INFO(name);
    // Bits for ids below 2000: the rest (and every strided id past 1999) go to its set.
    std::vector<std::uint64_t> bits(2000 / 64 + 1, 0);
    RequestMap map;
    map.setup(2000, bits.data());
    std::unordered_map<std::int32_t, std::int32_t> outstanding;
    std::unordered_set<std::int32_t> waited;
    CHECK(map.find(ids[0], kAbsent) == kAbsent);
    CHECK(map.retire(ids[0], kAbsent) == kAbsent);
    CHECK_FALSE(map.waited(ids[0]));
    auto check = [&] {
      REQUIRE(map.outstanding() == outstanding.size());
      for (const std::int32_t id : ids) {
        const auto it = outstanding.find(id);
        REQUIRE(map.find(id, kAbsent) == (it == outstanding.end() ? kAbsent : it->second));
        REQUIRE(map.waited(id) == (waited.count(id) > 0));
      }
    };
    drive(
        ids,
        [&](std::int32_t id, std::int32_t ep) {
          map.insert(id, ep);
          outstanding[id] = ep;
        },
        [&](std::int32_t id) {
          const auto it = outstanding.find(id);
          const std::int32_t want = it == outstanding.end() ? kAbsent : it->second;
          if (it != outstanding.end()) {
            outstanding.erase(it);
            waited.insert(id);
          }
          REQUIRE(map.retire(id, kAbsent) == want);
        },
        check);
    for (const std::int32_t id : ids) map.retire(id, kAbsent);
    CHECK(map.outstanding() == 0);
  }
}

TEST_CASE("IntMap finds, replaces, takes and erases as std::unordered_map does",
          "[engine][requests]") {
  for (const auto& [name, ids] : id_sets()) {
    INFO(name);
    IntMap map;
    std::unordered_map<std::int32_t, std::int32_t> ref;
    CHECK(map.find(ids[0], kAbsent) == kAbsent);
    CHECK(map.erase(ids[0], kAbsent) == kAbsent);
    auto check = [&] {
      REQUIRE(map.size() == ref.size());
      for (const std::int32_t id : ids) {
        const auto it = ref.find(id);
        REQUIRE(map.find(id, kAbsent) == (it == ref.end() ? kAbsent : it->second));
      }
    };
    bool take = false;
    drive(
        ids,
        [&](std::int32_t id, std::int32_t v) {
          // Alternately insert (replacing) and take_or_insert (a partner meets its pair).
          take = !take;
          if (!take) {
            map.insert(id, v);
            ref[id] = v;
            return;
          }
          const auto it = ref.find(id);
          if (it == ref.end()) {
            REQUIRE(map.take_or_insert(id, v, kAbsent) == kAbsent);
            ref[id] = v;
          } else {
            REQUIRE(map.take_or_insert(id, v, kAbsent) == it->second);
            ref.erase(it);
          }
        },
        [&](std::int32_t id) {
          const auto it = ref.find(id);
          const std::int32_t want = it == ref.end() ? kAbsent : it->second;
          if (it != ref.end()) ref.erase(it);
          REQUIRE(map.erase(id, kAbsent) == want);
        },
        check);
  }
}
