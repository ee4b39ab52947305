// GPT-2's byte-level BPE tokenizer, loaded from the encoder.json (token ->
// id) and vocab.bpe (merges, in priority order) that GPT-2 shipped.
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

class Tokenizer {
 public:
  // Reads dir/encoder.json and dir/vocab.bpe. Throws std::runtime_error naming
  // the file and what is wrong with it.
  explicit Tokenizer(const std::filesystem::path& dir);

  // The ids of text. The text "<|endoftext|>" is encoded as ordinary text,
  // never as eotToken(): documents are separated by adding that id.
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
