// Data-parallel processes (runtime/train/process_group.h) and the options
// that ask for them: where each process finds its rank and GPU, how the NCCL
// id reaches the ranks above 0, what a bad combination says. No GPU or NCCL
// needed: the id is made by a function given (NCCL's in the GPU test
// train_data_parallel).
#include "process_group.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "train_options.h"

using namespace llmc;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Sets environment variables for one test and removes them after.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(std::vector<std::pair<std::string, std::string>> values) : values_(std::move(values)) {
    for (const auto& [name, value] : values_) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : values_) unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

TrainOptions parse(std::vector<std::string> words) {
  words.insert(words.begin(), "llmc-train");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parseTrainOptions(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("one process by default, on GPU 0", "[process_group]") {
  const ProcessPlace place = placeThisProcess(ProcessGroupOptions{}, 8);
  CHECK(place.rank == 0);
  CHECK(place.size == 1);
  CHECK(place.gpu == 0);
}

TEST_CASE("processes started by hand: -pn, -pr, -pf and the GPU from the rank", "[process_group]") {
  const TrainOptions o = parse({"-i", "x", "-pn", "4", "-pr", "3", "-pf", "/shared/run"});
  ProcessPlace place = placeThisProcess(o.processes, 2);
  CHECK(place.rank == 3);
  CHECK(place.size == 4);
  CHECK(place.gpu == 1);  // rank 3 on a node of 2 GPUs
  CHECK(place.rendezvousDir == fs::path("/shared/run"));
  place = placeThisProcess(parse({"-i", "x", "-pn", "4", "-pr", "3", "-pg", "4", "-pf", "/d"}).processes, 8);
  CHECK(place.gpu == 3);
}

TEST_CASE("a rank out of range, or several processes with nowhere to meet, are refused", "[process_group]") {
  CHECK_THROWS_WITH(placeThisProcess(parse({"-i", "x", "-pn", "2", "-pr", "2", "-pf", "/d"}).processes, 2),
                    Contains("process rank 2 of 2"));
  CHECK_THROWS_WITH(placeThisProcess(parse({"-i", "x", "-pn", "2", "-pr", "1"}).processes, 2),
                    Contains("give -pf DIR"));
}

TEST_CASE("under mpirun the rank, the size and the GPU come from its environment", "[process_group]") {
  const TrainOptions o = parse({"-i", "x", "-pi", "mpi"});
  {
    ScopedEnvironment env({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
    const ProcessPlace place = placeThisProcess(o.processes, 4);
    CHECK(place.rank == 5);
    CHECK(place.size == 8);
    CHECK(place.gpu == 1);
    CHECK(place.rendezvousDir == fs::path("/tmp"));  // no -pf: one node
  }
  {
    ScopedEnvironment env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});  // MPICH
    const ProcessPlace place = placeThisProcess(o.processes, 2);
    CHECK(place.rank == 1);
    CHECK(place.gpu == 1);
  }
  CHECK_THROWS_WITH(placeThisProcess(o.processes, 2), Contains("start llmc-train with mpirun"));
  ScopedEnvironment bad({{"OMPI_COMM_WORLD_RANK", "one"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  CHECK_THROWS_WITH(placeThisProcess(o.processes, 2), Contains("$OMPI_COMM_WORLD_RANK=one is not a whole number"));
}

TEST_CASE("a process --gpus started takes its place from the launcher, not the flags", "[process_group]") {
  ScopedEnvironment env({{"LLMC_PROCESS_RANK", "1"}, {"LLMC_PROCESSES", "2"}, {"LLMC_RENDEZVOUS_DIR", "/tmp/meet"}});
  const TrainOptions o = parse({"-i", "x", "--gpus", "2"});
  CHECK(o.processes.localProcesses == 2);
  // Already one of the two: nothing more to start.
  char* argv[] = {nullptr};
  CHECK_FALSE(launchLocalProcesses(o.processes, argv).has_value());
  const ProcessPlace place = placeThisProcess(o.processes, 2);
  CHECK(place.rank == 1);
  CHECK(place.size == 2);
  CHECK(place.gpu == 1);
  CHECK(place.rendezvousDir == fs::path("/tmp/meet"));
}

TEST_CASE("ranks above 0 read the id rank 0 published, and say where they waited when it does not come",
          "[process_group]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("llmc-process-group-test-{}", ::getpid());
  fs::create_directories(dir);
  ProcessPlace place;
  place.rank = 1;
  place.size = 2;
  place.rendezvousDir = dir;
  int made = 0;
  NcclIdBytes published{};
  for (size_t i = 0; i < published.size(); ++i) published[i] = static_cast<char>(i * 7 + 1);
  const auto makeId = [&] {
    ++made;
    return published;
  };
  CHECK_THROWS_WITH(exchangeNcclId(place, makeId, 0.05), Contains((dir / "llmc-nccl-id").string()));
  std::ofstream(dir / "llmc-nccl-id", std::ios::binary).write(published.data(), published.size());
  CHECK(exchangeNcclId(place, makeId, 1.0) == published);
  CHECK(made == 0);  // only rank 0 makes the id
  removeNcclIdFile(place);  // rank 1: not its file to remove
  CHECK(fs::exists(dir / "llmc-nccl-id"));
  place.rank = 0;
  removeNcclIdFile(place);
  CHECK_FALSE(fs::exists(dir / "llmc-nccl-id"));
  fs::remove_all(dir);
}

TEST_CASE("rank 0 makes the id once and publishes it whole, readable by its owner only", "[process_group]") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("llmc-process-group-rank0-{}", ::getpid());
  fs::create_directories(dir);
  ProcessPlace place;
  place.size = 2;
  place.rendezvousDir = dir;
  NcclIdBytes id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(255 - i);
  int made = 0;
  CHECK(exchangeNcclId(place, [&] { return ++made, id; }) == id);
  CHECK(made == 1);
  NcclIdBytes written{};
  std::ifstream in(dir / "llmc-nccl-id", std::ios::binary);
  REQUIRE(in.read(written.data(), written.size()));
  CHECK(in.peek() == std::ifstream::traits_type::eof());
  CHECK(written == id);
  CHECK((fs::status(dir / "llmc-nccl-id").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  place.rank = 1;  // a rank above 0 reads what rank 0 wrote
  CHECK(exchangeNcclId(place, [&] { return ++made, NcclIdBytes{}; }, 1.0) == id);
  CHECK(made == 1);
  fs::remove_all(dir);
}

TEST_CASE("the options of several processes: the batch over all of them, and what does not go together",
          "[process_group]") {
  TrainOptions o = parse({"-i", "x", "-b", "4", "-t", "64", "--gpus", "2", "-z", "1"});
  CHECK(o.zeroStage == 1);
  CHECK(o.overlap);
  CHECK(resolveTotalBatch(o, 2) == 4 * 64 * 2);
  o = parse({"-i", "x", "-b", "4", "-t", "64", "-d", "1024", "--overlap", "0"});
  CHECK_FALSE(o.overlap);
  CHECK(resolveTotalBatch(o, 2) == 1024);  // two micro-batches on each of two processes
  CHECK_THROWS_WITH(resolveTotalBatch(parse({"-i", "x", "-b", "4", "-t", "64", "-d", "768"}), 2),
                    Contains("-d 768 is not a multiple of B*T*processes = 4*64*2 = 512"));
  CHECK_THROWS_WITH(parse({"-i", "x", "--gpus", "2", "-pn", "2"}), Contains("give it or -pn, not both"));
  CHECK_THROWS_WITH(parse({"-i", "x", "--gpus", "2", "--device", "cpu"}), Contains("train on GPUs only"));
  CHECK_THROWS_WITH(parse({"-i", "x", "-z", "2"}), Contains("-z expects 0 or 1"));
  CHECK_THROWS_WITH(parse({"-i", "x", "-pi", "tcp"}), Contains("-pi expects fs or mpi"));
}

// B*T overflowed 64 bits to 0 (4294967296 * 4294967296) and '-d % 0' died of
// SIGFPE; B, T and their product (and B*T*processes) are bounded first.
TEST_CASE("huge batch sizes are refused before they multiply", "[process_group]") {
  CHECK_THROWS_WITH(parse({"-i", "x", "-b", "4294967296", "-t", "4294967296"}),
                    Contains("-b 4294967296 is too large (at most 2147483647)"));
  CHECK_THROWS_WITH(parse({"-i", "x", "-b", "4", "-t", "4294967296"}), Contains("-t 4294967296 is too large"));
  CHECK_THROWS_WITH(parse({"-i", "x", "-b", "65536", "-t", "65536"}),
                    Contains("B*T = 65536*65536 = 4294967296 tokens per micro-batch is too many"));
  const TrainOptions o = parse({"-i", "x", "-b", "65536", "-t", "32767"});
  // The largest B*T on the most processes an int counts still fits in 64 bits.
  CHECK(resolveTotalBatch(o, 2147483647) == int64_t{65536} * 32767 * 2147483647);
}
