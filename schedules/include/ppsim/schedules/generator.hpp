#pragma once
// Schedule generators: one file each under schedules/src/generators, registered by name.
// A generator emits compute ops only (F, B, I, W); lowering adds the communication.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

struct ScheduleParams {
  int ranks = 4;
  int microbatches = 8;
  int chunks = 1;
  int microbatch_group_size = 0;  // 0: the generator's default
};

struct ParamDoc {
  std::string name;
  std::string description;
};

struct Generator {
  std::string name;                  // canonical, e.g. "1f1b"
  std::vector<std::string> aliases;  // e.g. PyTorch class names; matched case-insensitively
  std::string summary;
  std::vector<ParamDoc> params;
  std::function<Program(const ScheduleParams&)> build;  // throws ParameterError
};

class Registry {
 public:
  static Registry& instance();
  void add(Generator generator);
  // Case-insensitive lookup by name or alias; nullptr when unknown.
  const Generator* find(std::string_view name) const;
  const std::vector<Generator>& all() const { return generators_; }

 private:
  std::vector<Generator> generators_;
};

// Look up and build; throws ParameterError (key "kind") for an unknown name.
Program generate(std::string_view kind, const ScheduleParams& params);

// Checks shared by generators: ranks >= 1, microbatches >= 1, chunks >= 1.
void check_common_params(const ScheduleParams& params);

}  // namespace ppsim::schedules
