#include "train_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>

namespace llmc {

const char* trainUsage() {
  return R"(usage: llmc-train [options]

Trains GPT-2 on llm.c token shards, with every kernel generated from the
diagrams in diagrams/gpt2. On a machine without a GPU (or with --device cpu)
the diagrams run in the reference interpreter: small models only.

data and model:
  -i, --train-data GLOB      training shards (llm.c format), e.g. "data/tiny_train_*.bin"
  -j, --val-data GLOB        validation shards; none: no validation
  -e, --model MODEL          dN (d2, d4, d12, d24, d36, d48) for a fresh model,
                             or an llm.c checkpoint file to start from (default d12)
      --channels C           width of a fresh dN model (default 64*N; GPT-2's for d12..d48)
      --heads H              heads of a fresh dN model
  -o, --output-dir DIR       write the log, checkpoints and samples here
  -y, --resume 0|1           1: continue from the newest checkpoint in -o (default 0)
  -n, --checkpoint-every N   write a checkpoint every N steps (default 0: at the end only)
  -nk, --checkpoints-keep N  keep the newest N checkpoints in -o, deleting older ones
                             as new ones are written (default 0: keep all)
  -nm, --major-checkpoint-every N
                             checkpoints at multiples of N steps are major: -nk never
                             deletes them (default 0: none)
      --checkpoint-bf16      write model checkpoints in bf16 (llm.c version 5)

batch and schedule:
  -b, --batch-size B         rows per micro-batch (default 4)
  -t, --seq-len T            tokens per row (default 1024)
  -d, --total-batch-size N   tokens per optimizer step over all processes, a multiple
                             of B*T*processes: gradient accumulation (default -1: B*T*processes)
  -x, --max-steps N          optimizer steps (default -1: one epoch of the training data)
  -k, --lr-schedule KIND     cosine (default), linear, constant or wsd (llm.c's): cosine and
                             linear decay from LR after the warmup to LR*F at the last step;
                             wsd holds LR until 80% of the steps, then decays as 1-sqrt to
                             LR*F; constant is LR at every step (warmup and -q unused)
  -l, --lr LR                peak learning rate (default 3e-4)
  -u, --warmup N             linear warmup steps (default 0)
  -q, --final-lr-fraction F  the decay ends at LR*F (default 1.0: no decay)
  -c, --weight-decay W       AdamW weight decay on the matrices (default 0)
      --grad-clip G          clip the gradient's global norm to G (default 1.0)
  -sl, --skip-loss-z Z       skip the update of a step whose loss is more than Z standard
                             deviations above the last 128 steps' mean (default 0: never)
  -sg, --skip-grad-z Z       the same for the gradient's norm (default 0: never); both
                             need 128 steps of history first, and the CPU path
      --shuffle 0|1          1 (default, as llm.c): each epoch visits the training shards
                             and the windows in each shard in a new order; 0: in file order
      --seed S               seed for initialisation, shuffling and sampling (default 1337)
  -a, --overfit-single-batch 0|1
                             1: train every step on the same first batch(es) of the val
                             data (of -i without -j), unshuffled: for debugging (default 0)

evaluation:
  -v, --val-every N          validation loss every N steps (default 20; 0: never)
  -m, --val-steps N          batches per validation (default 20; -1: all of the val data)
  -h, --hellaswag 0|1        1: HellaSwag accuracy at every validation after step 0 and
                             at the end, logged as "s:STEP eval:ACC". -h alone is --help
      --hellaswag-file FILE  llm.c's eval file (dev/data/hellaswag.py writes it)
                             (default dev/data/hellaswag/hellaswag_val.bin, as llm.c)
  -s, --sample-every N       print a sample every N steps (default 20; 0: never)
  -g, --gen-tokens N         tokens per sample (default 64)
      --tokenizer PATH       for printing samples: a folder with encoder.json and
                             vocab.bpe, or llm.c's gpt2_tokenizer.bin (the file, or
                             a folder holding it). Default: gpt2_tokenizer.bin in
                             the training shards' folder (llmc-data writes it there),
                             else ../shared/data/gpt2-bpe or data/gpt2-bpe

execution:
      --device cpu|cuda|auto where to run (default auto: a GPU if the GPU path can use one)
  -r, --recompute 0|1|2      GPU path: 1 (default) lets the cost model choose what the backward
                             recomputes (attention's scores, GELU); 0 stores all it reads.
                             llm.c's 2 (GELU and layernorm) is taken as 1: llmc has no
                             fixed levels, the cost model decides
      --hold-less 0|1        GPU path, with -r 1: 1 (default) remakes in the backward, for
                             the price of writing it again, what the step would hold from
                             the forward to the backward where that lowers its peak memory
                             (GPT-2's GELU output, beside its derivative); 0: time alone
                             decides
      --precision bf16|fp32  GPU path: bf16 activations and parameters with fp32 master
                             weights, gradients and optimizer state (default), or fp32 throughout
  -w, --master-weights 0|1   1 (default): fp32 master weights, as llmc always keeps; 0 (llm.c:
                             update the bf16 weights directly) is refused by the GPU path in
                             bf16, and means nothing where the weights are fp32 (CPU path,
                             --precision fp32)
      --cuda-graph 0|1       GPU path: replay the training step as a CUDA graph (default 1)
  -f, --tf32 0|1             accepted for llm.c's command lines; changes nothing: llmc never
                             uses TF32 (bf16 runs on bf16 tensor cores, fp32 on CUDA cores)
  -ge, --gelu-fusion 0|1|2   accepted for llm.c's command lines; changes nothing: the cost
                             model decides what fuses with the GELU
  -lg, --log-gpu-every N     accepted for llm.c's command lines; llmc prints no GPU
                             utilisation lines

data-parallel (several GPUs, NCCL; every process gets B rows of each batch):
      --gpus N               start N processes on this node, one per GPU (default 1)
  -z, --zero 0|1             ZeRO stage: 0 (default) every process keeps the whole
                             optimizer; 1 each keeps and updates a shard of the master
                             weights and moments
      --overlap 0|1          ZeRO-0: average the gradients in buckets beside the backward
                             (default 1) or after the step (0)
  -pn, --processes N         processes in all, started by hand or by a scheduler (with -pr)
  -pr, --process-rank R      this process's rank, 0..N-1
  -pg, --gpus-per-node G     GPU of this process: rank modulo G (default: the node's GPU count)
  -pf, --rendezvous-dir DIR  a folder every process sees, where they exchange NCCL's id
  -pi, --init-method fs|mpi  fs (default): -pn and -pr give the ranks; mpi: started by
                             mpirun, ranks from its environment (no MPI library needed)

  --quiet                    no start-up, step or checkpoint lines: only errors and
                             warnings, validation, HellaSwag, samples and the RESULT line
  --version                  print llmc-train's version
  -h, --help                 show this help (-h followed by a number is HellaSwag's switch)
)";
}

namespace {

int64_t parseInt(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(fmt::format("{} expects a whole number, got '{}'", flag, text));
  return v;
}

double parseFloat(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(fmt::format("{} expects a number, got '{}'", flag, text));
  return v;
}

bool isWholeNumber(const std::string& text) {
  size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
  return text.size() > start && text.find_first_not_of("0123456789", start) == std::string::npos;
}

int64_t positive(const std::string& flag, int64_t v) {
  if (v <= 0) throw std::invalid_argument(fmt::format("{} must be positive, got {}", flag, v));
  return v;
}

int64_t nonNegative(const std::string& flag, int64_t v) {
  if (v < 0) throw std::invalid_argument(fmt::format("{} must not be negative, got {}", flag, v));
  return v;
}

bool zeroOrOne(const std::string& flag, const std::string& v) {
  if (v != "0" && v != "1") throw std::invalid_argument(fmt::format("{} expects 0 or 1, got '{}'", flag, v));
  return v == "1";
}

double zScore(const std::string& flag, double v) {
  if (!(v >= 0)) throw std::invalid_argument(fmt::format("{} must be a z-score >= 0 (0: off), got {}", flag, v));
  return v;
}

// A flag that takes a value: its short (llm.c's) and long names, and what
// the value sets in the options.
struct Flag {
  std::string shortName, longName;
  std::function<void(const std::string& flag, const std::string& value)> set;
};

// Every flag with a value, setting `o`.
std::vector<Flag> valueFlags(TrainOptions& o) {
  return {
      {"-i", "--train-data", [&o](auto&, auto& v) { o.trainData = v; }},
      {"-j", "--val-data", [&o](auto&, auto& v) { o.valData = v; }},
      {"-e", "--model", [&o](auto&, auto& v) { o.model = v; }},
      {"", "--channels", [&o](auto& f, auto& v) { o.channels = positive(f, parseInt(f, v)); }},
      {"", "--heads", [&o](auto& f, auto& v) { o.heads = positive(f, parseInt(f, v)); }},
      {"-o", "--output-dir", [&o](auto&, auto& v) { o.outputDir = v; }},
      {"-y", "--resume",
       [&o](auto& f, auto& v) {
         int64_t r = parseInt(f, v);
         if (r != 0 && r != 1) throw std::invalid_argument(fmt::format("{} expects 0 or 1, got {}", f, v));
         o.resume = r == 1;
       }},
      {"-n", "--checkpoint-every", [&o](auto& f, auto& v) { o.checkpointEvery = nonNegative(f, parseInt(f, v)); }},
      {"-nk", "--checkpoints-keep", [&o](auto& f, auto& v) { o.checkpointsToKeep = nonNegative(f, parseInt(f, v)); }},
      {"-nm", "--major-checkpoint-every", [&o](auto& f, auto& v) { o.majorCheckpointEvery = nonNegative(f, parseInt(f, v)); }},
      {"-b", "--batch-size", [&o](auto& f, auto& v) { o.batchSize = positive(f, parseInt(f, v)); }},
      {"-t", "--seq-len", [&o](auto& f, auto& v) { o.seqLen = positive(f, parseInt(f, v)); }},
      {"-d", "--total-batch-size",
       [&o](auto& f, auto& v) {
         // -1 is llm.c's default: B*T*processes, as 0 is here.
         const int64_t d = parseInt(f, v);
         o.totalBatchTokens = d == -1 ? 0 : positive(f, d);
       }},
      {"-x", "--max-steps", [&o](auto& f, auto& v) { o.maxSteps = parseInt(f, v); }},
      {"-l", "--lr", [&o](auto& f, auto& v) { o.learningRate = parseFloat(f, v); }},
      {"-k", "--lr-schedule", [&o](auto&, auto& v) { o.lrSchedule = parseLrScheduleKind(v); }},
      {"-u", "--warmup", [&o](auto& f, auto& v) { o.warmupSteps = nonNegative(f, parseInt(f, v)); }},
      {"-q", "--final-lr-fraction", [&o](auto& f, auto& v) { o.finalLrFraction = parseFloat(f, v); }},
      {"-c", "--weight-decay", [&o](auto& f, auto& v) { o.weightDecay = parseFloat(f, v); }},
      {"", "--grad-clip", [&o](auto& f, auto& v) { o.maxGradNorm = parseFloat(f, v); }},
      {"-v", "--val-every", [&o](auto& f, auto& v) { o.valEvery = nonNegative(f, parseInt(f, v)); }},
      {"-m", "--val-steps",
       [&o](auto& f, auto& v) {
         const int64_t m = parseInt(f, v);
         o.valMaxSteps = m == -1 ? -1 : positive(f, m);  // -1: the whole val data, as llm.c
       }},
      {"", "--hellaswag", [&o](auto& f, auto& v) { o.hellaswag = zeroOrOne(f, v); }},
      {"", "--hellaswag-file", [&o](auto&, auto& v) { o.hellaswagFile = v; }},
      {"-a", "--overfit-single-batch", [&o](auto& f, auto& v) { o.overfitSingleBatch = zeroOrOne(f, v); }},
      {"-sl", "--skip-loss-z", [&o](auto& f, auto& v) { o.skipUpdateLossZ = zScore(f, parseFloat(f, v)); }},
      {"-sg", "--skip-grad-z", [&o](auto& f, auto& v) { o.skipUpdateGradZ = zScore(f, parseFloat(f, v)); }},
      {"-w", "--master-weights", [&o](auto& f, auto& v) { o.masterWeights = zeroOrOne(f, v); }},
      // Accepted so that llm.c's command lines run; llmc has nothing they
      // could switch (--help says why).
      {"-f", "--tf32", [](auto& f, auto& v) { zeroOrOne(f, v); }},
      {"-ge", "--gelu-fusion",
       [](auto& f, auto& v) {
         if (v != "0" && v != "1" && v != "2")
           throw std::invalid_argument(fmt::format("{} expects 0, 1 or 2, got '{}'", f, v));
       }},
      {"-lg", "--log-gpu-every", [](auto& f, auto& v) { parseInt(f, v); }},
      {"-s", "--sample-every", [&o](auto& f, auto& v) { o.sampleEvery = nonNegative(f, parseInt(f, v)); }},
      {"-g", "--gen-tokens", [&o](auto& f, auto& v) { o.genTokens = nonNegative(f, parseInt(f, v)); }},
      {"", "--tokenizer", [&o](auto&, auto& v) { o.tokenizerDir = v; }},
      {"", "--seed", [&o](auto& f, auto& v) { o.seed = static_cast<uint64_t>(nonNegative(f, parseInt(f, v))); }},
      {"-r", "--recompute",
       [&o](auto& f, auto& v) {
         if (v != "0" && v != "1" && v != "2")
           throw std::invalid_argument(fmt::format("{} expects 0, 1 or 2, got '{}'", f, v));
         o.recompute = std::stoi(v);
       }},
      {"", "--hold-less",
       [&o](auto& f, auto& v) {
         if (v != "0" && v != "1") throw std::invalid_argument(fmt::format("{} expects 0 or 1, got '{}'", f, v));
         o.holdLess = v == "1";
       }},
      {"", "--precision",
       [&o](auto& f, auto& v) {
         if (v == "bf16") o.bf16 = true;
         else if (v == "fp32") o.bf16 = false;
         else throw std::invalid_argument(fmt::format("{} expects bf16 or fp32, got '{}'", f, v));
       }},
      {"", "--cuda-graph",
       [&o](auto& f, auto& v) {
         if (v != "0" && v != "1") throw std::invalid_argument(fmt::format("{} expects 0 or 1, got '{}'", f, v));
         o.cudaGraph = v == "1";
       }},
      {"", "--gpus", [&o](auto& f, auto& v) { o.processes.localProcesses = static_cast<int>(positive(f, parseInt(f, v))); }},
      {"-z", "--zero",
       [&o](auto& f, auto& v) {
         if (v != "0" && v != "1") throw std::invalid_argument(fmt::format("{} expects 0 or 1, got '{}'", f, v));
         o.zeroStage = v == "1" ? 1 : 0;
       }},
      {"", "--overlap",
       [&o](auto& f, auto& v) {
         if (v != "0" && v != "1") throw std::invalid_argument(fmt::format("{} expects 0 or 1, got '{}'", f, v));
         o.overlap = v == "1";
       }},
      {"-pn", "--processes", [&o](auto& f, auto& v) { o.processes.processes = static_cast<int>(positive(f, parseInt(f, v))); }},
      {"-pr", "--process-rank", [&o](auto& f, auto& v) { o.processes.rank = static_cast<int>(nonNegative(f, parseInt(f, v))); }},
      {"-pg", "--gpus-per-node", [&o](auto& f, auto& v) { o.processes.gpusPerNode = static_cast<int>(positive(f, parseInt(f, v))); }},
      {"-pf", "--rendezvous-dir", [&o](auto&, auto& v) { o.processes.sharedDir = v; }},
      {"-pi", "--init-method",
       [&o](auto& f, auto& v) {
         if (v == "fs") o.processes.init = ProcessInit::Fs;
         else if (v == "mpi") o.processes.init = ProcessInit::Mpi;
         else throw std::invalid_argument(fmt::format("{} expects fs or mpi, got '{}'", f, v));
       }},
      {"", "--device",
       [&o](auto& f, auto& v) {
         if (v == "cpu") o.device = DeviceChoice::Cpu;
         else if (v == "cuda") o.device = DeviceChoice::Cuda;
         else if (v == "auto") o.device = DeviceChoice::Auto;
         else throw std::invalid_argument(fmt::format("{} expects cpu, cuda or auto, got '{}'", f, v));
       }},
  };
}

// What no single flag can check: the combinations, and B*T's bounds.
void checkTrainOptions(TrainOptions& o) {
  if (o.trainData.empty()) throw std::invalid_argument("no training data: give -i GLOB");
  // -d against B*T here; against B*T*processes once the processes are known
  // (under mpirun, from its environment): resolveTotalBatch.
  // B and T are bounded before they multiply (4294967296 * 4294967296 wrapped
  // to 0, and '-d % 0' killed the process): a micro-batch's tokens index
  // 32-bit buffers.
  if (o.batchSize > kMaxMicroBatchTokens)
    throw std::invalid_argument(fmt::format("-b {} is too large (at most {})", o.batchSize, kMaxMicroBatchTokens));
  if (o.seqLen > kMaxMicroBatchTokens)
    throw std::invalid_argument(fmt::format("-t {} is too large (at most {})", o.seqLen, kMaxMicroBatchTokens));
  const int64_t microTokens = o.batchSize * o.seqLen;
  if (microTokens > kMaxMicroBatchTokens)
    throw std::invalid_argument(fmt::format("B*T = {}*{} = {} tokens per micro-batch is too many (at most {})",
                                            o.batchSize, o.seqLen, microTokens, kMaxMicroBatchTokens));
  if (o.totalBatchTokens % microTokens != 0)
    throw std::invalid_argument(fmt::format("-d {} is not a multiple of B*T = {}*{} = {}", o.totalBatchTokens,
                                            o.batchSize, o.seqLen, microTokens));
  if (o.processes.localProcesses > 1 && o.processes.processes > 1)
    throw std::invalid_argument("--gpus N starts the processes itself: give it or -pn, not both");
  if (o.device == DeviceChoice::Cpu && (o.processes.localProcesses > 1 || o.processes.processes > 1))
    throw std::invalid_argument("several processes train on GPUs only (--device cpu is one process)");
  if (o.resume && o.outputDir.empty()) throw std::invalid_argument("-y 1 needs -o DIR to resume from");
  if (o.finalLrFraction < 0 || o.finalLrFraction > 1)
    throw std::invalid_argument(fmt::format("-q must be between 0 and 1, got {}", o.finalLrFraction));
  if (o.device == DeviceChoice::Cuda)
    if (std::vector<std::string> cpuOnly = cpuPathOnlyFlags(o); !cpuOnly.empty())
      throw std::invalid_argument(fmt::format("{} runs on the CPU path only (--device cpu); the GPU path cannot "
                                              "give it (llmc-train --help says why)",
                                              cpuOnly.front()));
  if (o.overfitSingleBatch) o.shuffle = false;  // llm.c: one batch, the first, in order
}

}  // namespace

TrainOptions parseTrainOptions(int argc, char** argv) {
  TrainOptions o;
  const std::vector<Flag> flags = valueFlags(o);
  const std::map<std::string, std::function<void()>> switches = {
      {"--checkpoint-bf16", [&] { o.checkpointBf16 = true; }},
      {"--quiet", [&] { o.quiet = true; }},
  };

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // -h N is llm.c's HellaSwag switch; -h without a number after it stays
    // help, as it always was here.
    if (arg == "-h" && i + 1 < argc && isWholeNumber(argv[i + 1])) {
      o.hellaswag = zeroOrOne(arg, argv[++i]);
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(trainUsage(), stdout);
      std::exit(0);
    }
    // --shuffle alone switches it on (as before it took a value); --shuffle 0|1.
    if (arg == "--shuffle") {
      if (i + 1 < argc && isWholeNumber(argv[i + 1])) o.shuffle = zeroOrOne(arg, argv[++i]);
      else o.shuffle = true;
      continue;
    }
    if (auto s = switches.find(arg); s != switches.end()) {
      s->second();
      continue;
    }
    // --flag=value is accepted as well as --flag value.
    std::string value;
    bool inlineValue = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      inlineValue = true;
    }
    if (arg == "--shuffle") {
      o.shuffle = zeroOrOne(arg, value);
      continue;
    }
    auto flag = std::find_if(flags.begin(), flags.end(),
                             [&](const Flag& f) { return arg == f.shortName || arg == f.longName; });
    if (flag == flags.end()) throw std::invalid_argument(fmt::format("unknown option '{}'", arg));
    if (!inlineValue) {
      if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", arg));
      value = argv[++i];
    }
    flag->set(arg, value);
  }

  checkTrainOptions(o);
  return o;
}

std::vector<std::string> cpuPathOnlyFlags(const TrainOptions& o) {
  std::vector<std::string> flags;
  if (o.skipUpdateLossZ > 0) flags.push_back("-sl");
  if (o.skipUpdateGradZ > 0) flags.push_back("-sg");
  if (!o.masterWeights && o.bf16) flags.push_back("-w 0");
  return flags;
}

int64_t resolveTotalBatch(const TrainOptions& o, int processes) {
  int64_t stepTokens = 0;
  if (__builtin_mul_overflow(o.batchSize * o.seqLen, static_cast<int64_t>(processes), &stepTokens) || stepTokens <= 0)
    throw std::invalid_argument(fmt::format("B*T*processes = {}*{}*{} is too large", o.batchSize, o.seqLen, processes));
  if (o.totalBatchTokens == 0) return stepTokens;
  if (o.totalBatchTokens % stepTokens != 0)
    throw std::invalid_argument(fmt::format("-d {} is not a multiple of B*T*processes = {}*{}*{} = {}",
                                            o.totalBatchTokens, o.batchSize, o.seqLen, processes, stepTokens));
  return o.totalBatchTokens;
}

}  // namespace llmc
