// The loss curve of a training run as a picture: llmc-train's main.log read
// back and drawn as a self-contained SVG (OUTDIR/loss.svg).
//
// main.log has one line per training step, "s:STEP trl:LOSS norm:... lr:...
// ms:...", and one per validation, "s:STEP tel:LOSS" (docs/training.md,
// section 6). llm.c's own logs ("s:%d trl:%.4f lr:%.6f norm:%.2f") read the
// same way.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

// (step, loss) pairs sorted by step, one per step. Losses may be NaN or
// infinite (a diverged run logs "nan"); the plot skips them.
struct LossCurves {
  std::vector<std::pair<int64_t, double>> train, val;
};

// Reads a main.log. Each non-blank line is whitespace-separated key:value
// fields and needs an integer `s`; `trl` adds a point to the training curve,
// `tel` to the validation curve; other keys are ignored, and a line with
// neither trl nor tel (llm.c's "eval") adds nothing.
//
// A resumed run appends to the log and logs again the steps after its
// checkpoint. A point that does not move the log forward (a training step at
// or before the last one, or before the last validation; a validation at or
// before the last one, or before the last training step) starts the later
// run: what the earlier run logged from that point on, in both curves, is
// dropped. So a later line for a step replaces the earlier one, a shorter
// resumed run leaves no stale tail, and the curves stay functions of the step.
//
// Throws std::runtime_error "PATH:LINE: what is wrong (line: "...")" for a
// malformed line (a field that is not key:value or appears twice, no integer
// `s`, a loss that is not a number; "nan" and "inf" are numbers), or
// "PATH: cannot open".
LossCurves readTrainLog(const std::string& path);

// Writes an SVG of about 800x500: title, axes with round tick labels (x: step,
// y: loss), the training curve as a thin line (with a moving-average overlay
// once it has 20 points or more), validation as points joined by a line in
// another colour, and a legend. Empty curves give a frame that says so;
// non-finite losses are skipped and counted in a note under the plot. Written
// to a fresh temporary beside it and renamed (common/atomic_file.h), so the
// file appears whole or not at all.
// Throws std::runtime_error naming the file when it cannot be written.
void writeLossPlotSvg(const LossCurves& curves, const std::string& svgPath, const std::string& title);

// OUTDIR/main.log drawn into OUTDIR/loss.svg, titled with the folder's name.
// Throws as readTrainLog and writeLossPlotSvg do.
void writeLossPlot(const std::string& outputDir);

}  // namespace llmc
