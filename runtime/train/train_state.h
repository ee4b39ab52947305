// The training state besides the model: the optimizer's moments and step, and
// the data loader's position, in a file next to the llm.c model checkpoint.
//
// Layout (little-endian): 256 int32 header words — magic 20261129, version 1,
// optimizer step, parameter count (low, high 32 bits), size of the loader
// state in bytes, the rest 0 — then m and v as float32 (one per parameter),
// then the loader state. Written through a fresh temporary renamed into place
// (common/atomic_file.h), so it appears whole or not at all and a failure (a
// full disk) leaves nothing behind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "interpreter_trainer.h"

namespace llmc {

struct TrainState {
  OptimizerState optimizer;
  std::vector<uint8_t> loaderState;
};

void writeTrainState(const std::string& path, const TrainState& state);
// Throws std::runtime_error naming the file and the field that is wrong: a
// header whose counts do not match the file's size (checked arithmetic: no
// count wraps the check), a moment that is not finite or a negative second
// moment (the first such value named by its index).
TrainState readTrainState(const std::string& path);

// Checkpoint file names in an output directory: model_00000100.bin and
// state_00000100.bin after step 100.
std::string modelCheckpointPath(const std::string& dir, int64_t step);
std::string stateCheckpointPath(const std::string& dir, int64_t step);
// The newest step with both files present, or -1.
int64_t newestCheckpointStep(const std::string& dir);
// The steps of the model checkpoints in dir, ascending.
std::vector<int64_t> checkpointSteps(const std::string& dir);

// -nk and -nm: of the checkpoints `steps`, those to delete once the one of
// step `written` is on disk: all but the newest `keep` up to `written`, and
// but the major ones (steps that are multiples of majorEvery), as llm.c
// keeps them. keep 0: none. Checkpoints after `written` (of another run in
// the same folder) are neither counted nor deleted.
std::vector<int64_t> checkpointsToDelete(const std::vector<int64_t>& steps, int64_t written, int64_t keep,
                                         int64_t majorEvery);
// Removes model_STEP.bin and state_STEP.bin from dir (those that exist).
void deleteCheckpoint(const std::string& dir, int64_t step);

}  // namespace llmc
