#include "global_batch.hpp"

#include <fmt/format.h>

#include "ppsim/config/error.hpp"
#include "ppsim/config/reader.hpp"

namespace ppsim::config {

using nlohmann::json;

json with_global_batch(const json& j, const std::string& source) {
  auto int_at = [](const json& o, const char* k, long long def) {
    const auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<long long>() : def;
  };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) return j;
  const json& m = j["model"];
  const long long gbs = int_at(m, "global_batch_size", 0);
  const long long b = int_at(m, "micro_batch_size", 1), d = int_at(m, "data_parallel", 1);
  if (gbs <= 0 || b <= 0 || d <= 0 || !j.contains("schedule") || !j["schedule"].is_object())
    return j;
  if (gbs % (b * d) != 0)
    throw ConfigError(source, "model.global_batch_size",
                      fmt::format("must be a multiple of micro_batch_size x data_parallel = {} x "
                                  "{} = {}, got {}",
                                  b, d, b * d, gbs));
  const long long M = gbs / (b * d);
  json out = j;
  json& sched = out["schedule"];
  if (sched.contains("microbatches") && !sched["microbatches"].is_null()) {
    if (!sched["microbatches"].is_number_integer() || sched["microbatches"].get<long long>() != M)
      throw ConfigError(source, "schedule.microbatches",
                        fmt::format("must agree with model.global_batch_size / (micro_batch_size "
                                    "x data_parallel) = {} / ({} x {}) = {}, got {}",
                                    gbs, b, d, M, Reader::describe(sched["microbatches"])));
  } else {
    sched["microbatches"] = M;
  }
  return out;
}

}  // namespace ppsim::config
