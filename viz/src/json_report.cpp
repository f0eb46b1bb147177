#include "ppsim/viz/json_report.hpp"

namespace ppsim::viz {

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

using nlohmann::json;

namespace {
json blocked(const record::BlockedOp& b) {
  json j = {{"rank", b.rank}, {"position", b.position}, {"op", b.op}, {"peer", b.peer}};
  if (!b.waiting_for.empty()) j["waiting_for"] = b.waiting_for;
  return j;
}
}  // namespace

json to_json(const record::Deadlock& d) {
  json cycles = json::array();
  for (const auto& c : d.cycles) {
    json one = json::array();
    for (const auto& b : c) one.push_back(blocked(b));
    cycles.push_back(one);
  }
  json unmatched = json::array(), waiting = json::array();
  for (const auto& b : d.unmatched) unmatched.push_back(blocked(b));
  for (const auto& b : d.blocked) waiting.push_back(blocked(b));
  json j = {{"cycles", cycles},
            {"unmatched", unmatched},
            {"blocked", waiting},
            {"message", d.describe()}};
  if (d.cut()) j["cycles_total"] = d.cycle_count();  // only when cut: reports stay as they were
  return j;
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

// Ranks over their memory (hardware.memory_bytes), only when there are any.
void add_out_of_memory(json& j, const record::RunRecord& a) {
  if (a.out_of_memory.empty()) return;
  json list = json::array();
  for (const auto& o : a.out_of_memory)
    list.push_back({{"rank", o.rank},
                    {"peak_memory_bytes", o.peak},
                    {"limit_bytes", o.limit},
                    {"static_bytes", o.static_bytes},
                    {"activation_bytes", o.activation_bytes},
                    {"buffer_bytes", o.buffer_bytes}});
  j["out_of_memory"] = list;
}

json to_json(const record::StepTiming& step, const std::string& schedule) {
  const record::StepSummary& s = step.summary;
  const record::StepBreakdown& b = s.breakdown;
  return {{"schedule", schedule},
          {"time", s.time},
          {"breakdown",
           {{"compute", b.compute},
            {"tp_comm", b.tp_comm},
            {"cp_comm", b.cp_comm},
            {"ep_comm", b.ep_comm},
            {"pp_bubble", b.pp_bubble},
            {"dp_exposed", b.dp_exposed},
            {"optimizer", b.optimizer}}},
          {"critical_rank", step.critical_rank},
          {"global_batch", s.global_batch},
          {"gpus", s.gpus},
          {"tokens_per_second", s.tokens_per_second},
          {"tflops_per_gpu", s.tflops_per_gpu},
          {"mfu", s.mfu}};
}

json to_json(const record::RunRecord& a) {
  const auto& info = a.info;
  const auto& p = *a.program;
  json j;
  j["name"] = info.name;
  j["schedule"] = info.schedule;
  j["ranks"] = p.ranks();
  j["stages"] = p.stages();
  j["chunks"] = p.chunks();
  j["microbatches"] = p.microbatches();
  j["comm_style"] = info.comm_style;
  j["matching"] = info.matching;
  j["semantics"] = info.semantics;
  j["time_unit"] = info.time_unit;
  j["ops"] = p.total_ops();
  json errors = json::array();
  for (const auto& d : a.diagnostics) errors.push_back(to_json(d));
  j["errors"] = errors;
  j["ok"] = a.ok();
  if (!a.metrics) {
    j["simulated"] = false;
    j["deadlock"] = nullptr;
    return j;
  }
  const record::RunMetrics& r = *a.metrics;
  j["simulated"] = true;
  j["makespan"] = r.makespan;
  if (a.step) j["step"] = to_json(*a.step, a.info.schedule);
  j["bubble_fraction"] = r.bubble_fraction;
  j["bubble_vs_ideal"] = r.bubble_vs_ideal;
  j["comm_bytes"] = r.comm_bytes;
  json per = json::array();
  for (const auto& m : r.per_rank) {
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
  j["peak_memory_bytes"] = r.peak_memory_bytes;
  j["peak_inflight"] = r.peak_inflight;
  j["deadlock"] = a.deadlock ? to_json(*a.deadlock) : json(nullptr);
  add_out_of_memory(j, a);
  j["per_rank"] = per;
  return j;
}

json check_json(const record::RunRecord& a, const std::string& config_path,
                const schedules::OpLocator& locate) {
  auto place = [&](json& entry) {
    if (!locate || !entry.contains("position")) return;
    const auto at = locate(entry["rank"].get<int>(), entry["position"].get<int>());
    if (!at) return;
    entry["location"] = at->where;
    if (at->line > 0) entry["line"] = at->line;
    if (at->column > 0) entry["column"] = at->column;
  };
  json j = {{"config", config_path},
            {"name", a.info.name},
            {"ok", a.ok()},
            {"verdict", a.verdict().text()}};
  json errors = json::array();
  for (const auto& d : a.diagnostics) {
    errors.push_back(to_json(d));
    place(errors.back());
  }
  j["errors"] = errors;
  j["deadlock"] = a.deadlock ? to_json(*a.deadlock) : json(nullptr);
  if (a.deadlock) {
    for (auto& cycle : j["deadlock"]["cycles"])
      for (auto& b : cycle) place(b);
    for (const char* list : {"unmatched", "blocked"})
      for (auto& b : j["deadlock"][list]) place(b);
  }
  add_out_of_memory(j, a);
  return j;
}

}  // namespace ppsim::viz
