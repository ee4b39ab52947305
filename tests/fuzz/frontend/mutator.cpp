#include "mutator.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace llmc::fuzz {

namespace fs = std::filesystem;

namespace {

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Relative imports made absolute: the mutated copy lives in a scratch folder.
std::string absoluteImports(const std::string& text, const fs::path& dir) {
  static const std::regex import(R"re(import\s+"([^"/][^"]*)")re");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), import);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    out += text.substr(last, static_cast<size_t>(it->position()) - last);
    out += "import \"" + (dir / (*it)[1].str()).lexically_normal().string() + "\"";
    last = static_cast<size_t>(it->position() + it->length());
  }
  return out + text.substr(last);
}

// The --set of the first RUN line that has one, and whether one says --grad.
void runLineOptions(Seed& seed) {
  static const std::regex set(R"(--set\s+([A-Za-z_0-9=,]+))");
  std::istringstream lines(seed.text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("RUN:") == std::string::npos) continue;
    std::smatch m;
    if (seed.sizes.empty() && std::regex_search(line, m, set)) seed.sizes = m[1].str();
    seed.grad = seed.grad || line.find("--grad") != std::string::npos;
  }
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string joinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

class Mutator {
 public:
  Mutator(const std::vector<Seed>& corpus, std::mt19937_64& rng) : corpus_(corpus), rng_(rng) {}

  Input run() {
    const Seed& base = pick(corpus_);
    Input in{base.text, base.sizes, base.grad, {"base " + base.path}};
    const int count = 1 + static_cast<int>(below(4));
    for (int i = 0; i < count; ++i) mutateOnce(in);
    return in;
  }

 private:
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }
  size_t at(const std::string& s) { return below(s.size() + 1); }

  void mutateOnce(Input& in) {
    switch (below(11)) {
      case 0: flipByte(in); break;
      case 1: spliceToken(in); break;
      case 2: duplicateLine(in); break;
      case 3: deleteLine(in); break;
      case 4: mutateSize(in); break;
      case 5: mutateSetValue(in); break;
      case 6: nest(in); break;
      case 7: longName(in); break;
      case 8: importLine(in); break;
      case 9: swapLines(in); break;
      default: in.grad = !in.grad, in.mutations.push_back("toggle --grad"); break;
    }
  }

  void flipByte(Input& in) {
    if (in.text.empty()) return;
    const size_t i = below(in.text.size());
    const char bytes[] = {'(', ')', '[', ']', ':', ',', '=', '.', '-', '>', '*', '/', '\n', ' ', '#', '"', '\0', '\x7f'};
    in.text[i] = below(3) == 0 ? static_cast<char>(rng_()) : bytes[below(sizeof bytes)];
    in.mutations.push_back("byte at " + std::to_string(i));
  }

  // A run of characters from another corpus file, inserted or written over.
  void spliceToken(Input& in) {
    const std::string& other = pick(corpus_).text;
    if (other.empty()) return;
    const size_t from = below(other.size()), length = 1 + below(24);
    const std::string piece = other.substr(from, length);
    const size_t i = at(in.text);
    if (below(2)) in.text.insert(i, piece);
    else in.text.replace(i, std::min(piece.size(), in.text.size() - i), piece);
    in.mutations.push_back("splice '" + piece + "' at " + std::to_string(i));
  }

  void duplicateLine(Input& in) {
    auto lines = splitLines(in.text);
    if (lines.empty()) return;
    const size_t i = below(lines.size()), copies = below(4) == 0 ? 1 + below(200) : 1;
    lines.insert(lines.begin() + static_cast<long>(i), copies, lines[i]);
    in.text = joinLines(lines);
    in.mutations.push_back("line " + std::to_string(i + 1) + " x" + std::to_string(copies + 1));
  }

  void deleteLine(Input& in) {
    auto lines = splitLines(in.text);
    if (lines.empty()) return;
    const size_t i = below(lines.size());
    lines.erase(lines.begin() + static_cast<long>(i));
    in.text = joinLines(lines);
    in.mutations.push_back("delete line " + std::to_string(i + 1));
  }

  void swapLines(Input& in) {
    auto lines = splitLines(in.text);
    if (lines.size() < 2) return;
    const size_t i = below(lines.size()), j = below(lines.size());
    std::swap(lines[i], lines[j]);
    in.text = joinLines(lines);
    in.mutations.push_back("swap lines " + std::to_string(i + 1) + " " + std::to_string(j + 1));
  }

  std::string interestingNumber() {
    static const std::vector<std::string> numbers = {
        "0",          "1",          "2",          "3",           "7",           "255",        "256",
        "257",        "1023",       "1025",       "8193",        "65537",       "2147483647", "2147483648",
        "4294967296", "1099511627776", "1099511627777", "281474976710656", "4611686018427387904",
        "9223372036854775807", "9223372036854775808", "99999999999999999999", "1e308", "1e999", "0.5", "-1"};
    return pick(numbers);
  }

  // A number in the text (a size, a constant, a slice bound) replaced.
  void mutateSize(Input& in) {
    std::vector<std::pair<size_t, size_t>> spans;  // numbers: offset, length
    for (size_t i = 0; i < in.text.size();) {
      if (std::isdigit(static_cast<unsigned char>(in.text[i]))) {
        size_t j = i;
        while (j < in.text.size() && std::isdigit(static_cast<unsigned char>(in.text[j]))) ++j;
        spans.push_back({i, j - i});
        i = j;
      } else {
        ++i;
      }
    }
    if (spans.empty()) return;
    const auto [offset, length] = pick(spans);
    const std::string n = interestingNumber();
    in.text.replace(offset, length, n);
    in.mutations.push_back("number at " + std::to_string(offset) + " -> " + n);
  }

  // A --set value replaced, or a --set of a new name added.
  void mutateSetValue(Input& in) {
    static const std::regex item(R"(([A-Za-z_0-9]+)=([0-9]+))");
    std::vector<std::smatch> items;
    for (auto it = std::sregex_iterator(in.sizes.begin(), in.sizes.end(), item); it != std::sregex_iterator(); ++it)
      items.push_back(*it);
    std::string n = interestingNumber();
    if (n[0] == '-' || n == "0" || n.find_first_not_of("0123456789") != std::string::npos) n = "3";
    if (items.empty() || below(4) == 0) {
      in.sizes += (in.sizes.empty() ? "" : ",") + std::string("N=") + n;
    } else {
      const std::smatch& m = items[below(items.size())];
      in.sizes.replace(static_cast<size_t>(m.position(2)), static_cast<size_t>(m.length(2)), n);
    }
    in.mutations.push_back("--set " + in.sizes);
  }

  // Parentheses around a name, or 'for' loops around a line, many deep.
  void nest(Input& in) {
    const size_t depth = below(3) == 0 ? 1 + below(2000) : 1 + below(40);
    auto lines = splitLines(in.text);
    if (lines.empty()) return;
    const size_t i = below(lines.size());
    if (below(2)) {
      const size_t eq = lines[i].find('=');
      if (eq == std::string::npos) return;
      lines[i] = lines[i].substr(0, eq + 1) + std::string(depth, '(') + lines[i].substr(eq + 1) + std::string(depth, ')');
      in.mutations.push_back("parentheses x" + std::to_string(depth) + " on line " + std::to_string(i + 1));
    } else {
      std::vector<std::string> loops;
      for (size_t k = 0; k < depth; ++k) loops.push_back("for i" + std::to_string(k) + " in " + (below(2) ? "l" : "b"));
      std::vector<std::string> ends(depth, "end");
      lines.insert(lines.begin() + static_cast<long>(i) + 1, ends.begin(), ends.end());
      lines.insert(lines.begin() + static_cast<long>(i), loops.begin(), loops.end());
      in.mutations.push_back("for loops x" + std::to_string(depth) + " around line " + std::to_string(i + 1));
    }
    in.text = joinLines(lines);
  }

  // A name replaced by a long one (or made long), within and past the limit.
  // (Scanned by hand: std::regex recurses per character and overflows the
  // stack on the long texts the other mutations make.)
  void longName(Input& in) {
    auto starts = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
    auto continues = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    std::vector<std::pair<size_t, size_t>> names;  // offset, length
    for (size_t i = 0; i < in.text.size();) {
      if (!starts(in.text[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < in.text.size() && continues(in.text[j])) ++j;
      names.push_back({i, j - i});
      i = j;
    }
    if (names.empty()) return;
    const auto [offset, size] = pick(names);
    const size_t length = below(2) ? 250 + below(12) : 1 + below(100000);
    std::string longer = in.text.substr(offset, size);
    while (longer.size() < length) longer += below(8) == 0 ? 'x' : longer[below(longer.size())];
    in.text.replace(offset, size, longer);
    in.mutations.push_back("name of " + std::to_string(length) + " characters");
  }

  void importLine(Input& in) {
    std::vector<std::string> targets = {"/dev/zero", "/dev/null", "/dev/stdin", "/dev/urandom", "/etc/passwd",
                                        "/etc/passwd.dg", "/tmp", "/", "", "nowhere.dg", "input.dg",
                                        "/proc/self/fd/0", "fifo.dg", "zero.dg", "big.dg", "chain0.dg"};
    targets.push_back(pick(corpus_).path);
    const std::string target = pick(targets);
    const std::string line = "import \"" + target + "\"\n";
    if (below(2)) in.text = line + in.text;
    else in.text.insert(at(in.text), line);
    in.mutations.push_back("import " + target);
  }

  const std::vector<Seed>& corpus_;
  std::mt19937_64& rng_;
};

}  // namespace

std::vector<Seed> loadCorpus(const std::vector<std::string>& roots) {
  std::vector<Seed> corpus;
  for (const auto& root : roots) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (!it->is_regular_file() || it->path().extension() != ".dg" || it->file_size() > (64 << 10)) continue;
      Seed seed;
      seed.path = it->path().string();
      seed.text = absoluteImports(readFile(it->path()), fs::absolute(it->path()).parent_path());
      runLineOptions(seed);
      // Files without sizes of their own (GPT-2's) get GPT-2's, small.
      if (seed.sizes.empty()) seed.sizes = "B=2,T=8,maxT=16,L=2,C=16,H=4,V=90,Vp=128";
      corpus.push_back(std::move(seed));
    }
  }
  std::sort(corpus.begin(), corpus.end(), [](const Seed& a, const Seed& b) { return a.path < b.path; });
  return corpus;
}

Input mutate(const std::vector<Seed>& corpus, std::mt19937_64& rng) { return Mutator(corpus, rng).run(); }

}  // namespace llmc::fuzz
