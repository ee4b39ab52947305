// Data-parallel training's processes: one per GPU, on one node or several.
// Which of them this process is, on which GPU, and how they exchange the NCCL
// id that makes their communicator:
//
//  - `--gpus N`: llmc-train starts N copies of itself on this node, one per
//    GPU, and waits for them (launchLocalProcesses); they meet in a fresh
//    folder under /tmp.
//  - `-pi fs -pn N -pr R -pf DIR`: the processes are started by hand or by a
//    scheduler (one command per process, on any node); they meet in DIR, a
//    folder every node sees (as llm.c's "fs" method).
//  - `-pi mpi -pf DIR`: started by `mpirun`; the rank and the number of
//    processes come from the launcher's environment (OpenMPI's
//    OMPI_COMM_WORLD_*, MPICH's PMI_*), the id again through DIR. No MPI
//    library is linked.
//
// Rank 0 makes the id and writes it atomically to DIR/llmc-nccl-id; the
// others wait for the file. Rank 0 removes it once every rank has joined.
// The id travels as bytes: nothing here needs CUDA or NCCL (the GPU path,
// gpu_path.cpp, asks NCCL for it), so the CPU build has all of this.
#pragma once

#include <array>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace llmc {

enum class ProcessInit { Fs, Mpi };

// What the command line says (llm.c's -pn, -pr, -pg, -pf, -pi where they mean the same).
struct ProcessGroupOptions {
  int localProcesses = 0;   // --gpus N: start N processes on this node (0 or 1: this one alone)
  int processes = 1;        // -pn
  int rank = 0;             // -pr
  int gpusPerNode = 0;      // -pg: 0 = rank modulo the GPUs this node has (or the MPI local rank)
  std::string sharedDir;    // -pf: where the processes meet
  ProcessInit init = ProcessInit::Fs;  // -pi
};

// This process's place among the training's processes.
struct ProcessPlace {
  int rank = 0;
  int size = 1;
  int gpu = 0;                          // ordinal on this node
  std::filesystem::path rendezvousDir;  // where the NCCL id is exchanged (size > 1)
};

// With --gpus N (N > 1) in a process that is not one of the N: starts them
// (this program again, the same arguments, the rank in the environment;
// ranks above 0 print nothing to stdout), waits, and returns the exit status
// to end with: 0, or the first failure's (the others are then stopped).
// Returns nullopt when this process is to train itself.
std::optional<int> launchLocalProcesses(const ProcessGroupOptions& options, char** argv);

// Throws std::invalid_argument for a place that cannot be (a rank out of
// range, mpi without its launcher's environment, several processes and no
// folder to meet in).
ProcessPlace placeThisProcess(const ProcessGroupOptions& options, int gpusOnThisNode);

// NCCL's unique id (ncclUniqueId), as bytes.
using NcclIdBytes = std::array<char, 128>;

// Rank 0 makes the id with `makeId` and publishes it; the others wait for it
// (up to `timeoutSeconds`, then an error naming the file).
NcclIdBytes exchangeNcclId(const ProcessPlace& place, const std::function<NcclIdBytes()>& makeId,
                           double timeoutSeconds = 300);
// Rank 0, after the communicator is made: the id's file is no longer needed,
// and a later run must not read it.
void removeNcclIdFile(const ProcessPlace& place);

}  // namespace llmc
