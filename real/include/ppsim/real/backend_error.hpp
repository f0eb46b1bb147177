#pragma once
// Errors of the GPU backends that the non-GPU code must name: a backend that cannot run on this
// machine (no driver, no device, too few GPUs; `ppsim real` exits 4), and a failed call of a GPU
// library (CUDA, cuBLAS, NCCL) with where it was made and the library's own message.
#include <stdexcept>
#include <string>

namespace ppsim::real {

// The backend or compute asked for cannot run here; what() says why and what to do instead.
class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "file.cpp:42: CUDA error 2 (cudaErrorMemoryAllocation: out of memory) in cudaMalloc(&p, n)".
// `file` is reduced to its base name.
std::string format_library_error(const std::string& library, const char* file, int line,
                                 const std::string& call, long long code, const std::string& name,
                                 const std::string& message);

class LibraryError : public std::runtime_error {
 public:
  LibraryError(const std::string& library, const char* file, int line, const std::string& call,
               long long code, const std::string& name, const std::string& message)
      : std::runtime_error(format_library_error(library, file, line, call, code, name, message)),
        code_(code) {}
  long long code() const { return code_; }

 private:
  long long code_;
};

}  // namespace ppsim::real
