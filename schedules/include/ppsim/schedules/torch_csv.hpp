#pragma once
// PyTorch pipelining's schedule CSV (torch.distributed.pipelining): no header, row r is rank r,
// each cell one action string (`0F0`, `1SEND_F3`, `(0F7;7B3)OVERLAP_F_B`), a blank cell an idle
// time step. Two forms: compute_only (compute actions, lowered by PyTorch or by comm style
// `torch`) and compute_comms (SEND/RECV written out). docs/INTEROP.md has the details.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ppsim/schedules/program.hpp"

namespace ppsim::schedules {

enum class TorchCsvForm { compute_only, compute_comms };
std::string_view to_string(TorchCsvForm form);

// A CSV as read: its actions as a Program (blank cells dropped; SEND/RECV blocking, as written)
// and where each action stood, so that it can be written back cell for cell.
struct TorchCsv {
  TorchCsvForm form = TorchCsvForm::compute_only;
  Program program;
  std::vector<std::vector<std::int32_t>> steps;  // per rank: the cell (0-based) of each action
  std::vector<std::int32_t> cells;               // per rank: the cells of its row, blanks included
};

// The longest cell accepted (PyTorch's longest action, an OVERLAP_F_B of two ids below 10^9, is
// well under it).
inline constexpr std::size_t kMaxTorchCell = 256;

// Reads the CSV text (`\r\n` or `\n` line ends; a cell may be quoted as Python's csv module
// quotes). A file with any SEND/RECV, UNSHARD, RESHARD or REDUCE_GRAD cell is compute_comms, and
// then has no blank cell. Throws ParseError: line = row (1-based, rank + 1), column = cell
// (1-based), or line 0 for an error about the whole file.
TorchCsv parse_torch_csv(std::string_view text);

// Writes a program as PyTorch's csv.writer does: one row per rank, cells joined by ',', each row
// ended by `line_end` ("\r\n" as Python writes). compute_only keeps the compute ops (F, B, I, W,
// OVERLAP_F_B); compute_comms also the SEND/RECV and UNSHARD/RESHARD/REDUCE_GRAD ops. WAITs and
// request ids are left out: PyTorch's runtime decides its waits itself. `steps` (optional, as in
// TorchCsv, for exactly the ops written) puts blank cells back, `cells` pads rows to their length.
// Throws ParameterError (key "ranks") for a rank with no op to write: PyTorch cannot read one.
std::string write_torch_csv(const Program& program, TorchCsvForm form,
                            const std::vector<std::vector<std::int32_t>>& steps = {},
                            const std::vector<std::int32_t>& cells = {},
                            std::string_view line_end = "\r\n");

// PyTorch's runtime (_PipelineScheduleRuntime) for a compute_comms program: every SEND/RECV
// asynchronous with its own request, the WAIT of a receive right before the compute op that reads
// it, and one WAIT on all sends at the end of the rank's list.
Program torch_runtime(const Program& comms);

}  // namespace ppsim::schedules
