// GPT-2's byte-level BPE tokenizer, loaded from the encoder.json (token ->
// id) and vocab.bpe (merges, in priority order) that GPT-2 shipped, or from
// llm.c's gpt2_tokenizer.bin (docs/formats.md), which holds each token's bytes
// and the <|endoftext|> id but no merges: enough to decode, not to encode.
//
// encode: text -> pre-tokens (pretokenizer.h) -> each pre-token's bytes as
// byte-level symbols -> BPE merges, lowest rank first -> ids. Any byte string
// can be encoded, and decode(encode(x)) == x exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llmc {

// llm.c's name for its tokenizer file, as llmc-data writes it beside the shards.
inline constexpr const char* kLlmcTokenizerFileName = "gpt2_tokenizer.bin";

class Tokenizer {
 public:
  // Reads `source`: a folder with encoder.json and vocab.bpe, or an llm.c
  // tokenizer file (a file, or a folder holding gpt2_tokenizer.bin and no
  // encoder.json). Throws std::runtime_error naming the file and what is wrong
  // with it.
  explicit Tokenizer(const std::filesystem::path& source);

  // Whether encode() works: false for a tokenizer read from llm.c's file.
  bool canEncode() const;
  // Writes llm.c's tokenizer file (version 2: with the <|endoftext|> id), whole
  // or not at all (common/atomic_file.h). Throws std::runtime_error naming the
  // file, or a token longer than the format's 255 bytes.
  void writeLlmcFile(const std::filesystem::path& path) const;

  // The ids of text. The text "<|endoftext|>" is encoded as ordinary text,
  // never as eotToken(): documents are separated by adding that id.
  // Throws std::runtime_error where !canEncode().
  // Not thread-safe (it fills a cache); copies share the vocabulary, so give
  // each thread its own copy.
  std::vector<int> encode(std::string_view text);

  // The bytes of the tokens, concatenated. Throws std::out_of_range for an id
  // outside [0, vocabSize()).
  std::string decode(std::span<const int> ids) const;
  // The bytes of one token (possibly an incomplete UTF-8 sequence).
  const std::string& tokenBytes(int id) const;

  int vocabSize() const;
  // <|endoftext|>: 50256 in GPT-2.
  int eotToken() const;

 private:
  struct Vocabulary;
  std::vector<int> bytePairEncode(std::string_view piece) const;

  std::shared_ptr<const Vocabulary> vocabulary_;

  // Pre-token -> ids. Text repeats its words, so most pre-tokens are found here.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::vector<int>, StringHash, std::equal_to<>> cache_;
};

}  // namespace llmc
