// The plan on a roofline, as inline SVG for the HTML report (html_report.h):
// log-log axes, x the kernel's arithmetic intensity (floating-point
// operations per byte crossing one memory level), y the rate it achieves
// (its operations over its measured time where one is given, else over its
// predicted time). The roof is the target's: a line a byte rate for GMEM and
// L2 (FLOP/s = bandwidth x intensity), a level a compute unit (the tensor
// cores the plan uses, and the fp32 lanes), from compiler/targets/*.json.
// One dot a kernel, coloured by its engine, its <title> naming it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planning/partition.h"

namespace llmc {

// A kernel's floating-point operations as the cost model counts them
// (cost_model.h, nodeWork): its work on the tensor cores and on the fp32
// lanes (2 a multiply-add in a contraction, 1 an elementwise operation);
// the special functions (sfu: exp, rsqrt) and int32 work are left out, as
// a profiler's FLOP count leaves them.
double kernelFlops(const KernelCost& cost);

// A colour ("#rrggbb") for each engine of the plan, the same in the
// roofline's dots and the report's table.
std::map<std::string, std::string> engineColours(const std::vector<PlannedKernel>& kernels);

// The roofline with x the operations per byte crossing `level`: "GMEM"
// (between device memory and L2) or "L2" (between L2 and the SMs). A kernel
// with no floating-point work sits on the bottom edge, one that moves no
// bytes across the level on the right edge, drawn hollow (off the scale).
// Each dot carries data-kernel (its name) and data-row (its plan index).
std::string rooflineSvg(const std::vector<PlannedKernel>& kernels, const Target& target,
                        const std::map<int, double>* measured, const std::string& level);

}  // namespace llmc
