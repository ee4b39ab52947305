// A scan launch (planning/scan_layout.h): a pass along the scanned axis in
// rounds, each line's aggregate carried from one round to the next.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

void CudaWriter::scanLines(WrittenKernel& out) {
  const ScanLayout& l = plan_.scan.value();
  const Node& scan = g_.node(l.scan);
  const Node& x = g_.node(scan.operands.at(0));
  const bool isSum = scan.reduce == ReduceOp::Sum;
  const bool exclusive = scan.lo != 0, reverse = scan.hi != 0;
  const std::string identity = isSum ? "0.0f" : "(-LLMC_INF)";
  auto combine = [&](const std::string& a, const std::string& b) {
    return isSum ? fmt::format("{} + {}", a, b) : fmt::format("fmaxf({}, {})", a, b);
  };
  out.grid = l.blocks;
  out.block = l.threads();
  const int S = l.slices, L = l.linesPerBlock, K = l.perSlice;
  const int64_t T = l.positions;
  // Which line and slice a thread takes: adjacent threads along the line's
  // positions where they are innermost, else across lines.
  const int sliceStride = l.positionsInnermost ? 1 : L;
  emit(0, l.positionsInnermost ? fmt::format("const int slice = threadIdx.x % {0}, lineInBlock = threadIdx.x / {0};", S)
                               : fmt::format("const int slice = threadIdx.x / {0}, lineInBlock = threadIdx.x % {0};", L));
  const char* itype = l.lineCount > INT_MAX ? "long long" : "int";
  emit(0, fmt::format("const {0} line = ({0})blockIdx.x * {1} + lineInBlock;", itype, L));
  emit(0, fmt::format("const bool live = line < {};", l.lineCount));
  // A thread past the last line reads the last (its loads stay inside the
  // arrays) and stores nothing; it still takes part in the barriers.
  emit(0, fmt::format("const {} lineAt = live ? line : {};", itype, l.lineCount - 1));
  Env env;
  bindDigits(l.lines, "lineAt", 0, env);
  if (S > 1) emit(0, fmt::format("__shared__ float totals[{}];", l.threads()));
  emit(0, fmt::format("float carry = {};", identity));
  // The K positions from `first` in scan order, along the axis, clamped
  // into it (past the end they are read at the last and count as the identity).
  auto positionsFrom = [&](int scope, const std::string& first) {
    std::vector<std::string> at;
    for (int k = 0; k < K; ++k) {
      const std::string clamped = fmt::format("min({} + {}, {})", first, k, T - 1);
      at.push_back(define(scope, "int", "at", reverse ? fmt::format("{} - {}", T - 1, clamped) : clamped));
    }
    return at;
  };
  // The operand at those positions, into the registers `into`.
  auto readInto = [&](int scope, const std::vector<std::string>& at, const std::vector<std::string>& into, bool declare) {
    for (int k = 0; k < K; ++k) {
      Env e = env;
      e[scan.axes[0]] = {at[static_cast<size_t>(k)], scope};
      const std::string read = value(x.id, e);
      emit(scope, fmt::format("{}{} = (float)({});", declare ? "float " : "", into[static_cast<size_t>(k)], read));
    }
  };
  // Each round's loads are issued one round ahead (into `next`), before the
  // barriers of the round before: their latency overlaps its scan.
  std::vector<std::string> next(static_cast<size_t>(K)), v(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) next[static_cast<size_t>(k)] = fresh("next");
  readInto(0, positionsFrom(0, fmt::format("slice * {}", K)), next, true);
  const int round = open(0, fmt::format("for (int round = 0; round < {}; ++round)", l.rounds));
  emit(round, fmt::format("const int first = round * {} + slice * {};", int64_t{S} * K, K));
  std::vector<std::string> inside(static_cast<size_t>(K));
  const std::vector<std::string> at = positionsFrom(round, "first");
  for (int k = 0; k < K; ++k) {
    inside[static_cast<size_t>(k)] = define(round, "bool", "inside", fmt::format("first + {} < {}", k, T));
    v[static_cast<size_t>(k)] = fresh("v");
    emit(round, fmt::format("float {} = live && {} ? {} : {};", v[static_cast<size_t>(k)], inside[static_cast<size_t>(k)],
                            next[static_cast<size_t>(k)], identity));
  }
  if (l.rounds > 1) {
    const int ahead = open(round, fmt::format("if (round + 1 < {})", l.rounds));
    readInto(ahead, positionsFrom(ahead, fmt::format("first + {}", int64_t{S} * K)), next, false);
    close(ahead);
  }
  // The thread's running aggregate over its K positions, in registers.
  for (int k = 1; k < K; ++k)
    emit(round, fmt::format("{} = {};", v[static_cast<size_t>(k)],
                            combine(v[static_cast<size_t>(k - 1)], v[static_cast<size_t>(k)])));
  const std::string& own = v.back();
  emit(round, fmt::format("float before = {}, total = {};", identity, own));
  if (S > 1) {
    // The slices' totals scanned across the line (Hillis-Steele, in place:
    // each step reads, waits, then writes).
    emit(round, fmt::format("totals[threadIdx.x] = {};", own));
    emit(round, "__syncthreads();");
    const int step = open(round, fmt::format("for (int d = 1; d < {}; d *= 2)", S));
    emit(step, fmt::format("const float other = slice >= d ? totals[threadIdx.x - d * {}] : {};", sliceStride, identity));
    emit(step, "__syncthreads();");
    emit(step, fmt::format("totals[threadIdx.x] = {};", combine("totals[threadIdx.x]", "other")));
    emit(step, "__syncthreads();");
    close(step);
    emit(round, fmt::format("if (slice > 0) before = totals[threadIdx.x - {}];", sliceStride));
    emit(round, fmt::format("total = totals[threadIdx.x + ({} - slice) * {}];", S - 1, sliceStride));
    emit(round, "__syncthreads();");  // every total read before the next round writes them
  }
  const StoredArray& arr = stored_.at(scan.id);
  for (int k = 0; k < K; ++k) {
    const std::string taken = exclusive ? (k == 0 ? "before" : combine("before", v[static_cast<size_t>(k - 1)]))
                                        : combine("before", v[static_cast<size_t>(k)]);
    const int guarded = open(round, fmt::format("if (live && {})", inside[static_cast<size_t>(k)]));
    Env e = env;
    e[scan.newAxes[0]] = {at[static_cast<size_t>(k)], round};
    emit(guarded, fmt::format("{}[{}] = {};", arr.param, offset(scan.id, e),
                              storeConversion(arr, combine("carry", "(" + taken + ")"))));
    close(guarded);
  }
  emit(round, fmt::format("carry = {};", combine("carry", "total")));
  close(round);
  out.streamNote = fmt::format("a pass along {} in {} rounds of {} slices x {} positions a line, the line's aggregate "
                               "carried", l.along, l.rounds, S, K);
}

}  // namespace llmc::cuda_writer
