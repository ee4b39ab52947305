#include "process_group.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "atomic_file.h"

namespace llmc {

namespace fs = std::filesystem;

namespace {

// The environment a launched process finds its place in.
constexpr const char* kRankVariable = "LLMC_PROCESS_RANK";
constexpr const char* kSizeVariable = "LLMC_PROCESSES";
constexpr const char* kRendezvousVariable = "LLMC_RENDEZVOUS_DIR";

std::optional<int> intFromEnvironment(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* text = std::getenv(name);
    if (!text || !*text) continue;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0') throw std::invalid_argument(fmt::format("${}={} is not a whole number", name, text));
    return static_cast<int>(value);
  }
  return std::nullopt;
}

fs::path idFile(const ProcessPlace& place) { return place.rendezvousDir / "llmc-nccl-id"; }

}  // namespace

std::optional<int> launchLocalProcesses(const ProcessGroupOptions& options, char** argv) {
  if (options.localProcesses <= 1 || std::getenv(kRankVariable)) return std::nullopt;
  char folder[] = "/tmp/llmc-rendezvous-XXXXXX";
  if (!mkdtemp(folder)) throw std::runtime_error(fmt::format("cannot make a folder under /tmp for the processes to meet: {}", std::strerror(errno)));
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);  // NVLink multicast stays off in every process
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> children;
  for (int rank = 0; rank < options.localProcesses; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork for rank {}: {}", rank, std::strerror(errno)));
    if (pid == 0) {
      setenv(kRankVariable, std::to_string(rank).c_str(), 1);
      setenv(kSizeVariable, std::to_string(options.localProcesses).c_str(), 1);
      setenv(kRendezvousVariable, folder, 1);
      if (rank > 0) {  // one log: rank 0's; errors from any rank still reach stderr
        const int devNull = open("/dev/null", O_WRONLY);
        if (devNull >= 0) dup2(devNull, STDOUT_FILENO);
      }
      execv("/proc/self/exe", argv);
      std::fprintf(stderr, "llmc-train: rank %d: cannot start %s: %s\n", rank, argv[0], std::strerror(errno));
      _exit(127);
    }
    children.push_back(pid);
  }
  // The first process to fail ends the run: the others would wait forever in
  // a collective for it.
  int status = 0;
  for (size_t left = children.size(); left > 0; --left) {
    int waitStatus = 0;
    const pid_t done = wait(&waitStatus);
    if (done < 0) break;
    const int code = WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : 128 + WTERMSIG(waitStatus);
    if (code != 0 && status == 0) {
      status = code;
      for (size_t r = 0; r < children.size(); ++r) {
        if (children[r] == done) {
          std::fprintf(stderr, "llmc-train: rank %zu exited with status %d; stopping the others\n", r, code);
          continue;
        }
        kill(children[r], SIGTERM);
      }
    }
  }
  std::error_code ignored;
  fs::remove_all(folder, ignored);
  return status;
}

ProcessPlace placeThisProcess(const ProcessGroupOptions& options, int gpusOnThisNode) {
  ProcessPlace place;
  std::optional<int> localRank;
  if (const std::optional<int> rank = intFromEnvironment({kRankVariable})) {
    // One of the processes --gpus started.
    place.rank = *rank;
    place.size = intFromEnvironment({kSizeVariable}).value_or(1);
    place.rendezvousDir = std::getenv(kRendezvousVariable) ? std::getenv(kRendezvousVariable) : "";
    localRank = place.rank;
  } else if (options.init == ProcessInit::Mpi) {
    const std::optional<int> rank = intFromEnvironment({"OMPI_COMM_WORLD_RANK", "PMI_RANK"});
    const std::optional<int> size = intFromEnvironment({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
    if (!rank || !size)
      throw std::invalid_argument("-pi mpi: no rank in the environment (OMPI_COMM_WORLD_RANK or PMI_RANK): start "
                                  "llmc-train with mpirun, or use -pi fs with -pn and -pr");
    place.rank = *rank;
    place.size = *size;
    localRank = intFromEnvironment({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"});
    place.rendezvousDir = options.sharedDir.empty() ? fs::path("/tmp") : fs::path(options.sharedDir);
  } else {
    place.rank = options.rank;
    place.size = options.processes;
    place.rendezvousDir = options.sharedDir;
  }
  if (place.size < 1 || place.rank < 0 || place.rank >= place.size)
    throw std::invalid_argument(fmt::format("process rank {} of {}: no such rank (-pr must be in [0, -pn))", place.rank,
                                            place.size));
  if (place.size > 1 && place.rendezvousDir.empty())
    throw std::invalid_argument(fmt::format(
        "{} processes need a folder they all see to meet in: give -pf DIR (or start them with --gpus N on one node)",
        place.size));
  if (options.gpusPerNode > 0) {
    place.gpu = place.rank % options.gpusPerNode;
  } else if (localRank) {
    place.gpu = *localRank;
  } else {
    place.gpu = gpusOnThisNode > 0 ? place.rank % gpusOnThisNode : 0;
  }
  return place;
}

NcclIdBytes exchangeNcclId(const ProcessPlace& place, const std::function<NcclIdBytes()>& makeId,
                           double timeoutSeconds) {
  const fs::path file = idFile(place);
  NcclIdBytes id{};
  if (place.rank == 0) {
    id = makeId();
    // Written whole, then renamed (common/atomic_file.h): a reader never sees
    // half an id, and the shared folder holds no fixed temporary name to plant.
    writeFileAtomically(file, std::string_view(id.data(), id.size()), {.mode = 0600});
    return id;
  }
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    std::ifstream in(file, std::ios::binary);
    if (in && in.read(id.data(), static_cast<std::streamsize>(id.size()))) return id;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeoutSeconds)
      throw std::runtime_error(fmt::format("rank {}: no NCCL id from rank 0 in {} after {:.0f} s (is rank 0 running, "
                                           "and does it see the same folder?)",
                                           place.rank, file.string(), waited));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void removeNcclIdFile(const ProcessPlace& place) {
  if (place.rank != 0) return;
  std::error_code ignored;
  fs::remove(idFile(place), ignored);
}

}  // namespace llmc
