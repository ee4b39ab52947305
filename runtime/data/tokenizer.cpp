#include "tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "pretokenizer.h"
#include "utf8.h"

namespace llmc {
namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";
// Enough for the distinct words of a large corpus; cleared when full so that
// memory stays bounded on endless streams of new words.
constexpr size_t kMaxCacheEntries = 1 << 20;

// GPT-2's byte-level alphabet: each byte is written as one printable code
// point, so that merges and encoder.json keys never hold control characters or
// spaces. Printable Latin-1 bytes stand for themselves; the other 68 bytes map
// to U+0100.. in byte order (space 0x20 becomes U+0120 'Ġ').
std::array<char32_t, 256> byteToSymbolTable() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    table[byte] = printable ? static_cast<char32_t>(byte) : next++;
  }
  return table;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw std::runtime_error(fmt::format("{}: read error", path.string()));
  return std::move(content).str();
}

uint64_t pairKey(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

struct Tokenizer::Vocabulary {
  struct Merge {
    int rank;    // lower merges first
    int result;  // the id of the merged symbol
  };

  std::vector<std::string> tokenBytes;           // id -> the bytes it stands for
  std::unordered_map<std::string, int> idOfSymbols;  // encoder.json: byte-level symbols -> id
  std::array<int, 256> byteToken{};              // byte -> the id of its one-symbol token
  std::unordered_map<uint64_t, Merge> merges;    // pairKey(left id, right id) -> merge
  int eot = -1;

  void loadEncoder(const std::filesystem::path& path);
  void loadMerges(const std::filesystem::path& path);
};

void Tokenizer::Vocabulary::loadEncoder(const std::filesystem::path& path) {
  const std::string name = path.string();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(readFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
  if (!json.is_object() || json.empty()) {
    throw std::runtime_error(fmt::format("{}: expected a JSON object of token -> id", name));
  }

  const std::array<char32_t, 256> byteToSymbol = byteToSymbolTable();
  std::unordered_map<char32_t, unsigned char> symbolToByte;
  for (int byte = 0; byte < 256; ++byte) symbolToByte[byteToSymbol[byte]] = static_cast<unsigned char>(byte);

  const size_t count = json.size();
  tokenBytes.assign(count, std::string());
  std::vector<const std::string*> symbolsOfId(count, nullptr);
  for (const auto& [symbols, value] : json.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= static_cast<int64_t>(count)) {
      throw std::runtime_error(fmt::format("{}: the id of \"{}\" is {}, expected an integer in [0, {})", name, symbols,
                                           value.dump(), count));
    }
    const int id = value.get<int>();
    const auto it = idOfSymbols.emplace(symbols, id).first;
    if (symbolsOfId[id]) {
      throw std::runtime_error(
          fmt::format("{}: id {} is given to both \"{}\" and \"{}\"", name, id, *symbolsOfId[id], symbols));
    }
    symbolsOfId[id] = &it->first;

    std::string& bytes = tokenBytes[id];
    for (size_t offset = 0; offset < symbols.size();) {
      const Utf8Char c = decodeUtf8At(symbols, offset);  // valid: the JSON parser checked the UTF-8
      const auto byte = symbolToByte.find(c.codePoint);
      if (byte == symbolToByte.end()) {
        throw std::runtime_error(fmt::format("{}: token \"{}\" holds U+{:04X}, which is not in GPT-2's byte alphabet",
                                             name, symbols, static_cast<uint32_t>(c.codePoint)));
      }
      bytes.push_back(static_cast<char>(byte->second));
      offset += c.length;
    }
  }

  for (int byte = 0; byte < 256; ++byte) {
    std::string symbol;
    appendUtf8(symbol, byteToSymbol[byte]);
    const auto it = idOfSymbols.find(symbol);
    if (it == idOfSymbols.end()) {
      throw std::runtime_error(fmt::format("{}: no token for byte 0x{:02X} (symbol \"{}\")", name, byte, symbol));
    }
    byteToken[byte] = it->second;
  }
  const auto eotIt = idOfSymbols.find(std::string(kEndOfText));
  if (eotIt == idOfSymbols.end()) throw std::runtime_error(fmt::format("{}: no {} token", name, kEndOfText));
  eot = eotIt->second;
}

void Tokenizer::Vocabulary::loadMerges(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string text = readFile(path);
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
  if (lines.empty() || !lines[0].starts_with("#version")) {
    throw std::runtime_error(fmt::format("{}: line 1: expected the \"#version\" header of a BPE merges file", name));
  }

  const auto idOf = [&](std::string_view symbols, size_t lineNumber, std::string_view what) {
    const auto it = idOfSymbols.find(std::string(symbols));
    if (it == idOfSymbols.end()) {
      throw std::runtime_error(
          fmt::format("{}: line {}: {} \"{}\" is not in encoder.json", name, lineNumber, what, symbols));
    }
    return it->second;
  };
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t lineNumber = i + 1;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      throw std::runtime_error(
          fmt::format("{}: line {}: expected two symbols separated by one space, found \"{}\"", name, lineNumber, line));
    }
    const std::string_view left = line.substr(0, space);
    const std::string_view right = line.substr(space + 1);
    const int leftId = idOf(left, lineNumber, "symbol");
    const int rightId = idOf(right, lineNumber, "symbol");
    const int result = idOf(std::string(left) + std::string(right), lineNumber, "merge result");
    const int rank = static_cast<int>(i - 1);
    if (!merges.emplace(pairKey(leftId, rightId), Merge{rank, result}).second) {
      throw std::runtime_error(fmt::format("{}: line {}: the merge \"{}\" repeats line {}", name, lineNumber, line,
                                           merges.at(pairKey(leftId, rightId)).rank + 2));
    }
  }
}

Tokenizer::Tokenizer(const std::filesystem::path& dir) {
  auto vocabulary = std::make_shared<Vocabulary>();
  vocabulary->loadEncoder(dir / "encoder.json");
  vocabulary->loadMerges(dir / "vocab.bpe");
  vocabulary_ = std::move(vocabulary);
}

std::vector<int> Tokenizer::bytePairEncode(std::string_view piece) const {
  const Vocabulary& vocabulary = *vocabulary_;
  std::vector<int> word;
  word.reserve(piece.size());
  for (char byte : piece) word.push_back(vocabulary.byteToken[static_cast<unsigned char>(byte)]);

  // GPT-2's rule: merge the adjacent pair of lowest rank, every occurrence of
  // it left to right, until no adjacent pair has a merge.
  while (word.size() > 1) {
    int bestRank = INT_MAX;
    size_t bestAt = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = vocabulary.merges.find(pairKey(word[i], word[i + 1]));
      if (it != vocabulary.merges.end() && it->second.rank < bestRank) {
        bestRank = it->second.rank;
        bestAt = i;
      }
    }
    if (bestRank == INT_MAX) break;
    const int left = word[bestAt];
    const int right = word[bestAt + 1];
    const int merged = vocabulary.merges.at(pairKey(left, right)).result;
    size_t out = bestAt;  // no occurrence starts before the first one found
    for (size_t i = bestAt; i < word.size();) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        word[out++] = merged;
        i += 2;
      } else {
        word[out++] = word[i++];
      }
    }
    word.resize(out);
  }
  return word;
}

std::vector<int> Tokenizer::encode(std::string_view text) {
  std::vector<int> ids;
  ids.reserve(text.size() / 3);
  for (std::string_view piece : splitPretokens(text)) {
    auto it = cache_.find(piece);
    if (it == cache_.end()) {
      if (cache_.size() >= kMaxCacheEntries) cache_.clear();
      it = cache_.emplace(std::string(piece), bytePairEncode(piece)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

const std::string& Tokenizer::tokenBytes(int id) const {
  if (id < 0 || id >= vocabSize()) {
    throw std::out_of_range(fmt::format("token id {} is outside the vocabulary [0, {})", id, vocabSize()));
  }
  return vocabulary_->tokenBytes[id];
}

std::string Tokenizer::decode(std::span<const int> ids) const {
  std::string text;
  for (int id : ids) text += tokenBytes(id);
  return text;
}

int Tokenizer::vocabSize() const { return static_cast<int>(vocabulary_->tokenBytes.size()); }

int Tokenizer::eotToken() const { return vocabulary_->eot; }

}  // namespace llmc
