#include "tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "atomic_file.h"
#include "pretokenizer.h"
#include "utf8.h"

namespace llmc {
namespace {

constexpr std::string_view kEndOfText = "<|endoftext|>";
// Enough for the distinct words of a large corpus; cleared when full so that
// memory stays bounded on endless streams of new words.
constexpr size_t kMaxCacheEntries = 1 << 20;

// llm.c's tokenizer file (train_gpt2.py's write_tokenizer, llmc/tokenizer.h):
// 256 little-endian uint32 header words, then per token a length byte and the
// token's bytes.
constexpr uint32_t kLlmcTokenizerMagic = 20240328;
constexpr size_t kLlmcTokenizerHeaderBytes = 256 * sizeof(uint32_t);
// Version 1 has no <|endoftext|> id in the header: llm.c takes GPT-2's.
constexpr uint32_t kGpt2EndOfText = 50256;

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
  // Read from llm.c's file, which has no merges: encode() is refused, naming it.
  std::optional<std::string> decodeOnlySource;

  void loadEncoder(const std::filesystem::path& path);
  void loadMerges(const std::filesystem::path& path);
  void loadLlmcFile(const std::filesystem::path& path);
};

namespace {

uint32_t littleEndianWord(std::string_view bytes, size_t word) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[word * 4 + i]);
  return value;
}

void appendLittleEndianWord(std::string& bytes, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

void Tokenizer::Vocabulary::loadLlmcFile(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::string bytes = readFile(path);
  if (bytes.size() < kLlmcTokenizerHeaderBytes) {
    throw std::runtime_error(fmt::format("{}: {} bytes, shorter than the {}-byte header of an llm.c tokenizer file",
                                         name, bytes.size(), kLlmcTokenizerHeaderBytes));
  }
  const uint32_t magic = littleEndianWord(bytes, 0);
  if (magic != kLlmcTokenizerMagic) {
    throw std::runtime_error(fmt::format("{}: not an llm.c tokenizer file: header[0] (magic) is {}, expected {}", name,
                                         magic, kLlmcTokenizerMagic));
  }
  const uint32_t version = littleEndianWord(bytes, 1);
  const uint32_t count = littleEndianWord(bytes, 2);
  if (version != 1 && version != 2) {
    throw std::runtime_error(fmt::format("{}: header[1] (version) is {}, expected 1 or 2", name, version));
  }
  // Each token takes at least 2 bytes: a count past that is a damaged header,
  // refused before it sizes an allocation.
  if (count == 0 || count > (bytes.size() - kLlmcTokenizerHeaderBytes) / 2) {
    throw std::runtime_error(fmt::format("{}: header[2] (vocabulary size) is {}, which a file of {} bytes cannot hold",
                                         name, count, bytes.size()));
  }
  const uint32_t eotId = version == 1 ? kGpt2EndOfText : littleEndianWord(bytes, 3);
  if (eotId >= count) {
    throw std::runtime_error(fmt::format("{}: the <|endoftext|> id {}{} is outside the vocabulary of {} tokens", name,
                                         eotId, version == 1 ? " (version 1: GPT-2's)" : " in header[3]", count));
  }

  tokenBytes.assign(count, std::string());
  size_t offset = kLlmcTokenizerHeaderBytes;
  for (uint32_t id = 0; id < count; ++id) {
    const size_t length = offset < bytes.size() ? static_cast<unsigned char>(bytes[offset]) : 0;
    if (offset >= bytes.size() || offset + 1 + length > bytes.size()) {
      throw std::runtime_error(
          fmt::format("{}: truncated: token {} of the {} in header[2] is cut at byte {}", name, id, count, bytes.size()));
    }
    if (length == 0) throw std::runtime_error(fmt::format("{}: token {} (at byte {}) is empty", name, id, offset));
    tokenBytes[id].assign(bytes, offset + 1, length);
    offset += 1 + length;
  }
  if (offset != bytes.size()) {
    throw std::runtime_error(fmt::format("{}: {} bytes follow the last of the {} tokens in header[2]", name,
                                         bytes.size() - offset, count));
  }
  eot = static_cast<int>(eotId);
  byteToken.fill(-1);
  for (uint32_t id = 0; id < count; ++id)
    if (tokenBytes[id].size() == 1) byteToken[static_cast<unsigned char>(tokenBytes[id][0])] = static_cast<int>(id);
  decodeOnlySource = name;
}

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

Tokenizer::Tokenizer(const std::filesystem::path& source) {
  namespace fs = std::filesystem;
  auto vocabulary = std::make_shared<Vocabulary>();
  const bool folder = fs::is_directory(source);
  if (folder && !fs::exists(source / "encoder.json") && fs::exists(source / kLlmcTokenizerFileName)) {
    vocabulary->loadLlmcFile(source / kLlmcTokenizerFileName);
  } else if (!folder && (fs::exists(source) || source.extension() == ".bin")) {
    vocabulary->loadLlmcFile(source);  // a missing .bin: its error names it, not encoder.json below it
  } else {
    vocabulary->loadEncoder(source / "encoder.json");
    vocabulary->loadMerges(source / "vocab.bpe");
  }
  vocabulary_ = std::move(vocabulary);
}

bool Tokenizer::canEncode() const { return !vocabulary_->decodeOnlySource; }

void Tokenizer::writeLlmcFile(const std::filesystem::path& path) const {
  const Vocabulary& vocabulary = *vocabulary_;
  std::string bytes;
  for (uint32_t word : {kLlmcTokenizerMagic, 2u, static_cast<uint32_t>(vocabSize()), static_cast<uint32_t>(eotToken())})
    appendLittleEndianWord(bytes, word);
  bytes.resize(kLlmcTokenizerHeaderBytes, '\0');
  for (int id = 0; id < vocabSize(); ++id) {
    const std::string& token = vocabulary.tokenBytes[id];
    if (token.empty() || token.size() > 255) {
      throw std::runtime_error(fmt::format("{}: token {} has {} bytes; llm.c's tokenizer file holds 1 to 255",
                                           path.string(), id, token.size()));
    }
    bytes.push_back(static_cast<char>(token.size()));
    bytes += token;
  }
  writeFileAtomically(path, bytes);
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
  if (vocabulary_->decodeOnlySource) {
    throw std::runtime_error(fmt::format(
        "{}: llm.c's tokenizer file holds no merges, so it cannot encode text; give the folder with encoder.json and "
        "vocab.bpe",
        *vocabulary_->decodeOnlySource));
  }
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
