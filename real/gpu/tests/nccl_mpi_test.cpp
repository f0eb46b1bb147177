// Several processes, one GPU each, started by mpirun: rank 0 makes the NCCL unique id, MPI_Bcast
// shares it, every process joins the communicator (ncclCommInitRank) and sends a stamped buffer
// to the next rank round a ring with ncclSend / ncclRecv in one group; each checks what it got.
// Exit 0 when every rank got its predecessor's stamp, 77 when there are too few GPUs.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <vector>

#include "ppsim/real/gpu/checks.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int code = 0;
  try {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    int least = devices;
    MPI_Allreduce(&devices, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (size < 2 || least < 1) {
      if (rank == 0)
        std::printf("SKIP: needs >= 2 processes with a GPU each (%d processes, %d GPUs)\n", size,
                    least);
      MPI_Finalize();
      return 77;
    }
    CUDA_CHECK(cudaSetDevice(rank % devices));
    ncclUniqueId id{};
    if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm = nullptr;
    NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
    constexpr std::size_t kBytes = 1 << 20;
    void *send = nullptr, *recv = nullptr;
    CUDA_CHECK(cudaMalloc(&send, kBytes));
    CUDA_CHECK(cudaMalloc(&recv, kBytes));
    CUDA_CHECK(cudaMemset(send, rank + 1, kBytes));
    CUDA_CHECK(cudaMemset(recv, 0, kBytes));
    cudaStream_t stream = nullptr;
    CUDA_CHECK(cudaStreamCreate(&stream));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, kBytes, ncclUint8, (rank + 1) % size, comm, stream));
    NCCL_CHECK(ncclRecv(recv, kBytes, ncclUint8, (rank + size - 1) % size, comm, stream));
    NCCL_CHECK(ncclGroupEnd());
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<unsigned char> got(kBytes);
    CUDA_CHECK(cudaMemcpy(got.data(), recv, kBytes, cudaMemcpyDeviceToHost));
    const auto want = static_cast<unsigned char>((rank + size - 1) % size + 1);
    std::size_t bad = 0;
    for (unsigned char b : got) bad += b != want;
    std::printf("rank %d of %d (GPU %d): %s\n", rank, size, rank % devices,
                bad ? fmt::format("{} bytes wrong", bad).c_str() : "got its predecessor's bytes");
    code = bad ? 1 : 0;
    NCCL_CHECK(ncclCommDestroy(comm));
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    code = 1;
  }
  int worst = code;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
