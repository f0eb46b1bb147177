#include "ppsim/sim/report_json.hpp"

#include "ppsim/schedules/lowering.hpp"

namespace ppsim::sim {

using nlohmann::json;

namespace {
json blocked(const BlockedOp& b) {
  json j = {{"rank", b.rank}, {"position", b.position}, {"op", b.op}, {"peer", b.peer}};
  if (!b.waiting_for.empty()) j["waiting_for"] = b.waiting_for;
  return j;
}
}  // namespace

json to_json(const Deadlock& d) {
  json cycles = json::array();
  for (const auto& c : d.cycles) {
    json one = json::array();
    for (const auto& b : c) one.push_back(blocked(b));
    cycles.push_back(one);
  }
  json unmatched = json::array(), waiting = json::array();
  for (const auto& b : d.unmatched) unmatched.push_back(blocked(b));
  for (const auto& b : d.blocked) waiting.push_back(blocked(b));
  return {{"cycles", cycles},
          {"unmatched", unmatched},
          {"blocked", waiting},
          {"message", d.describe()}};
}

json to_json(const schedules::Diagnostic& d) {
  json j = {{"kind", d.kind}, {"message", d.message}};
  if (d.rank >= 0) j["rank"] = d.rank;
  if (d.position >= 0) {
    j["position"] = d.position;
    j["op"] = d.op;
  }
  return j;
}

json to_json(const Analysis& a) {
  const auto& c = a.config;
  const auto& p = a.run.program;
  json j;
  j["name"] = c.name;
  j["schedule"] = c.kind;
  j["ranks"] = p.ranks();
  j["stages"] = p.stages();
  j["chunks"] = p.chunks();
  j["microbatches"] = p.microbatches();
  j["comm_style"] =
      c.kind == "custom" ? "custom" : std::string(schedules::to_string(c.lowering.style));
  j["matching"] = std::string(to_string(c.network.matching));
  j["time_unit"] = c.time_unit;
  j["ops"] = p.total_ops();
  json errors = json::array();
  for (const auto& d : a.errors) errors.push_back(to_json(d));
  j["errors"] = errors;
  j["ok"] = a.ok();
  if (!a.result) {
    j["simulated"] = false;
    j["deadlock"] = nullptr;
    return j;
  }
  const SimResult& r = *a.result;
  j["simulated"] = true;
  j["makespan"] = r.makespan;
  j["bubble_fraction"] = r.bubble_fraction;
  j["bubble_vs_ideal"] = r.bubble_vs_ideal;
  j["comm_bytes"] = r.comm_bytes;
  std::int64_t peak_mem = 0;
  int peak_inflight = 0;
  json per = json::array();
  for (const auto& m : r.per_rank) {
    peak_mem = std::max(peak_mem, m.peak_memory_bytes);
    peak_inflight = std::max(peak_inflight, m.peak_inflight);
    per.push_back({{"rank", m.rank},
                   {"start", m.start},
                   {"end", m.end},
                   {"busy", m.busy},
                   {"idle", m.idle},
                   {"comm_exposed", m.comm_exposed},
                   {"peak_inflight", m.peak_inflight},
                   {"peak_memory_bytes", m.peak_memory_bytes},
                   {"sent_bytes", m.sent_bytes},
                   {"recv_bytes", m.recv_bytes},
                   {"ops_done", m.ops_done}});
  }
  j["peak_memory_bytes"] = peak_mem;
  j["peak_inflight"] = peak_inflight;
  j["deadlock"] = r.deadlock ? to_json(*r.deadlock) : json(nullptr);
  j["per_rank"] = per;
  return j;
}

}  // namespace ppsim::sim
