#include "ppsim/sim/step_summary.hpp"

#include <algorithm>

namespace ppsim::sim {

namespace {

using schedules::OpKind;

// Rank r's ops by what they spend their time on, from the derived per-op costs.
model::OpTime derived_work(const schedules::Program& p, const model::Derivation& d, int r) {
  model::OpTime sum;
  auto add = [&](const schedules::Op& op) {
    const model::PassTimes& t = d.stages[static_cast<std::size_t>(op.stage)].times;
    switch (op.kind) {
      case OpKind::F:
        sum += t.forward;
        break;
      case OpKind::I:
        sum += t.backward_input;
        break;
      case OpKind::W:
        sum += t.backward_weight;
        break;
      case OpKind::B:
        sum += t.backward_input;
        sum += t.backward_weight;
        break;
      default:
        break;
    }
  };
  for (const schedules::Op& op : p.ops(r)) {
    if (schedules::is_composite(op.kind)) {
      for (const schedules::Op& part : p.parts(r, op)) add(part);
    } else if (schedules::is_compute(op.kind)) {
      add(op);
    }
  }
  return sum;
}

}  // namespace

void summarize_step(const config::Prepared& prepared, record::RunRecord& rec) {
  if (!rec.step || !rec.metrics || !prepared.derivation || !prepared.config.model_section) return;
  record::StepTiming& st = *rec.step;
  const model::Derivation& d = *prepared.derivation;
  const auto& ms = *prepared.config.model_section;
  const schedules::Program& p = *prepared.program;
  const double unit = config::microseconds_per_unit(prepared.config.time_unit) * 1e-6;
  // The critical rank is the one the optimizer waited for: its pipeline, its reduction, then the
  // optimizer until the last rank's is done.
  const int r = st.critical_rank;
  const record::RankStep& rs = st.ranks[static_cast<std::size_t>(r)];
  const double busy = rec.metrics->per_rank[static_cast<std::size_t>(r)].busy;
  // Given costs (a calibration) replace the derived ones: their split follows the derived one.
  const model::OpTime work = derived_work(p, d, r);
  const double scale = work.total() > 0 ? busy * unit / work.total() : 0.0;
  record::StepSummary& s = st.summary;
  s.time = st.time * unit;
  s.breakdown.compute = work.compute * scale;
  s.breakdown.tp_comm = work.tp * scale;
  s.breakdown.cp_comm = work.cp * scale;
  s.breakdown.ep_comm = work.ep * scale;
  s.breakdown.pp_bubble = std::max(0.0, rs.pipeline_end - busy) * unit;
  s.breakdown.dp_exposed = (rs.optimizer_start - rs.pipeline_end) * unit;
  s.breakdown.optimizer = (st.time - rs.optimizer_start) * unit;
  const auto& l = ms.layout;
  s.global_batch = 1LL * p.microbatches() * ms.transformer.micro_batch_size * l.data_parallel;
  s.gpus = 1LL * l.tensor_parallel * l.context_parallel * l.data_parallel * p.ranks();
  if (s.time > 0) {
    s.tokens_per_second =
        static_cast<double>(s.global_batch) * ms.transformer.sequence_length / s.time;
    s.tflops_per_gpu = d.model_flops * static_cast<double>(s.global_batch) / s.time /
                       static_cast<double>(s.gpus) / 1e12;
    const double peak = prepared.config.hardware->hardware.gpu.peak_flops;
    s.mfu = peak > 0 ? s.tflops_per_gpu * 1e12 / peak : 0.0;
  }
}

}  // namespace ppsim::sim
