#pragma once
// Where a config's Program comes from, chosen by `schedule.kind`: a generator (then lowered with
// comm.style), hand-written op lists (`custom`), later other formats. Each source is one file under
// config/src/sources that registers itself.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/base/registry.hpp"
#include "ppsim/config/reader.hpp"
#include "ppsim/schedules/lowering.hpp"
#include "ppsim/schedules/op_location.hpp"
#include "ppsim/schedules/program.hpp"

namespace ppsim::config {

// What a source read from the `schedule` section.
class ProgramSpec {
 public:
  virtual ~ProgramSpec() = default;
  // The program, lowered when the source needs it. Throws ConfigError naming the key.
  virtual schedules::Program build(const schedules::LoweringOptions& lowering,
                                   const std::string& source) const = 0;
  // The comm style shown in reports: the lowering style, or "custom" for written-out comm.
  virtual std::string comm_style(const schedules::LoweringOptions& lowering) const = 0;
  // Whether `compare --schedules/--microbatches/--chunks` may rewrite this schedule section.
  virtual bool sweepable() const = 0;
  // Programs that come from a system that runs on NCCL (PyTorch's CSV) default to
  // comm.semantics "nccl"; all others to "mpi".
  virtual bool nccl_by_default() const { return false; }
  // The lowering a config that sets no comm.style gets, its style and the parameters that differ
  // from the style's defaults: the generator's (schedules::Generator::default_comm) for these
  // schedule parameters; plain async for the others.
  virtual schedules::LoweringOptions default_comm() const { return {}; }
  // Where op `position` of `rank` in `built` (what build() returned) was written, for sources
  // read from text; nothing for generated programs and ops the lowering added.
  virtual std::optional<schedules::OpLocation> locate(const schedules::Program& /*built*/,
                                                      int /*rank*/, int /*position*/) const {
    return std::nullopt;
  }
};

struct ProgramSource {
  std::string name;
  std::string summary;
  std::function<bool(std::string_view kind)> handles;
  // Reads the schedule section (its kind already read); must read every key it accepts.
  std::function<std::shared_ptr<const ProgramSpec>(Reader& schedule, const std::string& kind)> read;
};

// The sources, one file each under config/src/sources/.
using SourceRegistry = base::Registry<ProgramSource>;
void register_builtins(SourceRegistry& registry);
// The source that handles `kind`, first by name; nullptr when none does.
const ProgramSource* source_for_kind(std::string_view kind);

}  // namespace ppsim::config
