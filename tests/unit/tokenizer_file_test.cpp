// llm.c's gpt2_tokenizer.bin: written from GPT-2's BPE files, read back, the
// same tokens and <|endoftext|>; version 1 files; damaged files refused naming
// the file and the field.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "data_test_support.h"
#include "tokenizer.h"

namespace fs = std::filesystem;
using llmc::Tokenizer;
using llmc::testing::DataTempDir;
using llmc::testing::readFileBytes;
using llmc::testing::sharedDataDir;
using llmc::testing::writeFile;

namespace {

const Tokenizer& bpe() {
  static const Tokenizer tokenizer(sharedDataDir() / "gpt2-bpe");
  return tokenizer;
}

uint32_t word(const std::string& bytes, size_t index) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[index * 4 + i]);
  return value;
}

void setWord(std::string& bytes, size_t index, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[index * 4 + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

// GPT-2's tokenizer written as llm.c's file in a fresh folder.
struct WrittenFile {
  DataTempDir dir{"tokenizer_file"};
  fs::path path = dir.path / "gpt2_tokenizer.bin";
  WrittenFile() { bpe().writeLlmcFile(path); }
};

}  // namespace

TEST_CASE("tokenizer file: llm.c's layout, version 2", "[tokenizer]") {
  WrittenFile file;
  const std::string bytes = readFileBytes(file.path);
  CHECK(word(bytes, 0) == 20240328);
  CHECK(word(bytes, 1) == 2);
  CHECK(word(bytes, 2) == 50257);
  CHECK(word(bytes, 3) == 50256);
  for (size_t i = 4; i < 256; ++i) CHECK(word(bytes, i) == 0);
  // Token 0 is "!": one length byte, then the byte.
  CHECK(bytes[1024] == 1);
  CHECK(bytes[1025] == '!');
  size_t expected = 1024;
  for (int id = 0; id < bpe().vocabSize(); ++id) expected += 1 + bpe().tokenBytes(id).size();
  CHECK(bytes.size() == expected);
}

TEST_CASE("tokenizer file: read back, it decodes as the BPE files do", "[tokenizer]") {
  WrittenFile file;
  const Tokenizer read(file.path);
  REQUIRE(read.vocabSize() == bpe().vocabSize());
  CHECK(read.eotToken() == 50256);
  CHECK_FALSE(read.canEncode());
  CHECK(bpe().canEncode());
  for (int id = 0; id < read.vocabSize(); ++id) REQUIRE(read.tokenBytes(id) == bpe().tokenBytes(id));
  // "Hello, world!" and some multi-byte pieces (tokenizer_test.cpp's reference ids).
  const std::vector<int> ids = {15496, 11, 995, 0, 66, 1878, 2634, 368, 31370, 30325, 222, 50256};
  CHECK(read.decode(ids) == bpe().decode(ids));
  CHECK(read.decode(std::vector<int>{15496, 11, 995, 0}) == "Hello, world!");
  // A folder holding only the file reads it, as llmc-data's output folder does.
  const Tokenizer fromFolder(file.dir.path);
  CHECK(fromFolder.decode(ids) == bpe().decode(ids));
  // Encoding needs the merges, which the file does not hold.
  Tokenizer copy = read;
  CHECK_THROWS_WITH(copy.encode("hi"), Catch::StartsWith(file.path.string() + ": llm.c's tokenizer file holds no merges"));
}

TEST_CASE("tokenizer file: version 1 takes GPT-2's <|endoftext|>", "[tokenizer]") {
  WrittenFile file;
  std::string bytes = readFileBytes(file.path);
  setWord(bytes, 1, 1);
  setWord(bytes, 3, 0);
  writeFile(file.path, bytes);
  CHECK(Tokenizer(file.path).eotToken() == 50256);
}

TEST_CASE("tokenizer file: damaged files are refused naming the file and the field", "[tokenizer]") {
  WrittenFile file;
  const std::string good = readFileBytes(file.path);
  const std::string name = file.path.string();
  std::string bytes = good;
  SECTION("bad magic") {
    setWord(bytes, 0, 20240326);  // a model checkpoint's magic
    writeFile(file.path, bytes);
    CHECK_THROWS_WITH(Tokenizer(file.path),
                      name + ": not an llm.c tokenizer file: header[0] (magic) is 20240326, expected 20240328");
  }
  SECTION("unknown version") {
    setWord(bytes, 1, 3);
    writeFile(file.path, bytes);
    CHECK_THROWS_WITH(Tokenizer(file.path), name + ": header[1] (version) is 3, expected 1 or 2");
  }
  SECTION("end of text outside the vocabulary") {
    setWord(bytes, 3, 50257);
    writeFile(file.path, bytes);
    CHECK_THROWS_WITH(Tokenizer(file.path), name +
                                                ": the <|endoftext|> id 50257 in header[3] is outside the "
                                                "vocabulary of 50257 tokens");
  }
  SECTION("a vocabulary larger than the file") {
    setWord(bytes, 2, 4000000000u);
    writeFile(file.path, bytes);
    CHECK_THROWS_WITH(Tokenizer(file.path), Catch::StartsWith(name + ": header[2] (vocabulary size) is 4000000000"));
  }
  SECTION("truncated") {
    bytes.resize(bytes.size() - 3);
    writeFile(file.path, bytes);
    CHECK_THROWS_WITH(Tokenizer(file.path), Catch::StartsWith(name + ": truncated: token 50256 of the 50257"));
  }
  SECTION("shorter than the header") {
    writeFile(file.path, bytes.substr(0, 100));
    CHECK_THROWS_WITH(Tokenizer(file.path), Catch::StartsWith(name + ": 100 bytes, shorter than the 1024-byte header"));
  }
  SECTION("bytes after the last token") {
    writeFile(file.path, bytes + "xy");
    CHECK_THROWS_WITH(Tokenizer(file.path), name + ": 2 bytes follow the last of the 50257 tokens in header[2]");
  }
  SECTION("an empty token") {
    bytes[1024] = 0;
    writeFile(file.path, bytes);
    CHECK_THROWS_WITH(Tokenizer(file.path), name + ": token 0 (at byte 1024) is empty");
  }
  SECTION("missing") {
    CHECK_THROWS_WITH(Tokenizer(file.dir.path / "nosuch.bin"),
                      (file.dir.path / "nosuch.bin").string() + ": cannot open: No such file or directory");
  }
}
