// GPT-2 tokenizer: ids against an independent Python reference
// (tokenizer_reference.py), a few ids checked by hand in encoder.json, exact
// round trips on the corpus and on arbitrary bytes, and errors for broken files.
#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "data_test_support.h"
#include "tokenizer.h"

using namespace std::string_literals;
namespace fs = std::filesystem;
using llmc::Tokenizer;
using llmc::testing::DataTempDir;
using llmc::testing::readFileBytes;
using llmc::testing::sharedDataDir;
using llmc::testing::writeFile;

namespace {

// Loaded once: every test case reads the same files.
Tokenizer& gpt2() {
  static Tokenizer tokenizer(sharedDataDir() / "gpt2-bpe");
  return tokenizer;
}

struct Case {
  std::string text;
  std::vector<int> ids;
};

// Printed by `python3 tests/unit/tokenizer_reference.py` (and the same from
// npm's gpt-3-encoder for every valid UTF-8 string here).
const std::vector<Case> kReferenceCases = {
    {"Hello world"s, {15496, 995}},
    {"Hello, world!"s, {15496, 11, 995, 0}},
    {" leading space"s, {3756, 2272}},
    {"double  space"s, {23352, 220, 2272}},
    {"line one\nline two"s, {1370, 530, 198, 1370, 734}},
    {"paragraph\n\nnext"s, {20360, 198, 198, 19545}},
    {"don't"s, {9099, 470}},
    {"I'll"s, {40, 1183}},
    {"we've"s, {732, 1053}},
    {"They're here, she's gone, I'm sure, he'd know."s, {2990, 821, 994, 11, 673, 338, 3750, 11, 314, 1101, 1654, 11, 339, 1549, 760, 13}},
    {"'S and DON'T: contractions are lowercase only"s, {6, 50, 290, 23917, 6, 51, 25, 2775, 507, 389, 2793, 7442, 691}},
    {"1234 56"s, {1065, 2682, 7265}},
    {"3.14159 and 1,000,000 and x2"s, {18, 13, 1415, 19707, 290, 352, 11, 830, 11, 830, 290, 2124, 17}},
    {"punctuation!!! ?? ... --- (parens) [brackets] {braces}"s, {79, 16260, 2288, 10185, 19153, 2644, 11420, 357, 11730, 82, 8, 685, 1671, 25180, 60, 1391, 1671, 2114, 92}},
    {"caf\xc3\xa9"s, {66, 1878, 2634}},
    {"na\xc3\xafve"s, {2616, 38776}},
    {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"s, {33768, 98, 17312, 105, 45739, 252}},
    {"emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd"s, {368, 31370, 30325, 222, 41840, 235, 8582, 237, 121}},
    {"\xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac \xd0\xb8 \xd1\x80\xd1\x83\xd1\x81\xd1\x81\xd0\xba\xd0\xb8\xd0\xb9"s, {138, 243, 39377, 39377, 138, 115, 26180, 29945, 43000, 138, 105, 12466, 116, 220, 21169, 35072, 21727, 21727, 31583, 18849, 140, 117}},
    {"\xc2\xb2\xc2\xb3 \xc2\xbd \xe2\x85\xab"s, {31185, 126, 111, 25208, 2343, 227, 104}},
    {"non\xc2\xa0""breaking and ideographic\xe3\x80\x80space"s, {13159, 1849, 13395, 290, 1405, 6826, 5099, 222, 13200}},
    {"trailing whitespace   "s, {9535, 4386, 13216, 10223, 220, 220, 220}},
    {"trailing newline\n"s, {9535, 4386, 649, 1370, 198}},
    {"tabs\tand\ttabs"s, {8658, 82, 197, 392, 197, 8658, 82}},
    {"  \n\n  indented"s, {220, 220, 628, 220, 773, 4714}},
    {"<|endoftext|>"s, {27, 91, 437, 1659, 5239, 91, 29}},
    {""s, {}},
    {"bad \xff\xfe bytes \xe6\x97 truncated"s, {14774, 220, 187, 186, 9881, 10545, 245, 40122, 515}},
};

}  // namespace

TEST_CASE("tokenizer: ids match the independent Python reference", "[tokenizer]") {
  Tokenizer& tokenizer = gpt2();
  for (const Case& c : kReferenceCases) {
    CAPTURE(c.text);
    CHECK(tokenizer.encode(c.text) == c.ids);
    CHECK(tokenizer.decode(c.ids) == c.text);
  }
}

TEST_CASE("tokenizer: ids looked up by hand in encoder.json", "[tokenizer]") {
  Tokenizer& tokenizer = gpt2();
  // "Hello" 15496, "Ġworld" 995 (Ġ is the byte-level symbol of the space).
  CHECK(tokenizer.encode("Hello world") == std::vector<int>{15496, 995});
  // "don" 9099, "'t" 470; "I" 40, "'ll" 1183; "we" 732, "'ve" 1053.
  CHECK(tokenizer.encode("don't") == std::vector<int>{9099, 470});
  CHECK(tokenizer.encode("I'll") == std::vector<int>{40, 1183});
  CHECK(tokenizer.encode("we've") == std::vector<int>{732, 1053});
  // "Ċ" (newline) 198, "ĊĊ" 628, "Ġ" 220, "!" 0.
  CHECK(tokenizer.decode(std::vector<int>{198, 628, 220, 0}) == "\n\n\n !");
  CHECK(tokenizer.vocabSize() == 50257);
  CHECK(tokenizer.eotToken() == 50256);
  CHECK(tokenizer.tokenBytes(50256) == "<|endoftext|>");
  CHECK(tokenizer.encode("<|endoftext|>") != std::vector<int>{50256});
}

TEST_CASE("tokenizer: round trip on the whole corpus", "[tokenizer]") {
  Tokenizer& tokenizer = gpt2();
  const fs::path textDir = sharedDataDir() / "text";
  REQUIRE(fs::is_directory(textDir));
  int64_t files = 0;
  int64_t tokens = 0;
  for (const auto& entry : fs::recursive_directory_iterator(textDir)) {
    if (entry.path().extension() != ".txt") continue;
    const std::string text = readFileBytes(entry.path());
    const std::vector<int> ids = tokenizer.encode(text);
    CAPTURE(entry.path().string());
    REQUIRE(tokenizer.decode(ids) == text);
    ++files;
    tokens += static_cast<int64_t>(ids.size());
  }
  CHECK(files == 234);  // moby-dick.txt and 233 State of the Union addresses
  // The Python reference gives the same total (and the same ids) for these files.
  CHECK(tokens == 2392035);
}

TEST_CASE("tokenizer: any bytes round trip, invalid UTF-8 included", "[tokenizer]") {
  Tokenizer& tokenizer = gpt2();
  for (int byte = 0; byte < 256; ++byte) {
    const std::string text(1, static_cast<char>(byte));
    CAPTURE(byte);
    CHECK(tokenizer.decode(tokenizer.encode(text)) == text);
  }
  // Random bytes drawn mostly from ASCII, with lead and continuation bytes
  // thrown in so that both valid and broken sequences occur.
  std::mt19937 rng(20240520);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) {
      const unsigned r = rng() % 8;
      c = static_cast<char>(r < 5 ? 0x20 + rng() % 0x60 : r == 5 ? "\n \t'"[rng() % 4] : 0x80 + rng() % 0x80);
    }
    CAPTURE(text);
    CHECK(tokenizer.decode(tokenizer.encode(text)) == text);
  }
}

TEST_CASE("tokenizer: decode rejects ids outside the vocabulary", "[tokenizer]") {
  Tokenizer& tokenizer = gpt2();
  CHECK_THROWS_AS(tokenizer.decode(std::vector<int>{50257}), std::out_of_range);
  CHECK_THROWS_WITH(tokenizer.decode(std::vector<int>{-1}), "token id -1 is outside the vocabulary [0, 50257)");
}

namespace {

// A copy of GPT-2's tokenizer files in a fresh folder, to break one of them.
struct BrokenTokenizer {
  DataTempDir dir{"broken_tokenizer"};
  nlohmann::json encoder = nlohmann::json::parse(readFileBytes(sharedDataDir() / "gpt2-bpe/encoder.json"));
  std::string merges = readFileBytes(sharedDataDir() / "gpt2-bpe/vocab.bpe");

  fs::path encoderPath() const { return dir.path / "encoder.json"; }
  fs::path mergesPath() const { return dir.path / "vocab.bpe"; }
  // Writes the files and loads them, expecting an error with this message.
  void expectError(const std::string& message) const {
    writeFile(encoderPath(), encoder.dump());
    writeFile(mergesPath(), merges);
    CHECK_THROWS_WITH(Tokenizer(dir.path), message);
  }
};

}  // namespace

TEST_CASE("tokenizer: missing or broken files are reported with the file and the fault", "[tokenizer]") {
  BrokenTokenizer broken;
  const std::string encoderPath = broken.encoderPath().string();
  const std::string mergesPath = broken.mergesPath().string();

  SECTION("missing folder") {
    CHECK_THROWS_WITH(Tokenizer(broken.dir.path / "nowhere"),
                      (broken.dir.path / "nowhere/encoder.json").string() + ": cannot open: No such file or directory");
  }
  SECTION("encoder.json is not JSON") {
    writeFile(broken.encoderPath(), "{\"a\": 1,");
    CHECK_THROWS_WITH(Tokenizer(broken.dir.path), Catch::StartsWith(encoderPath + ": not valid JSON: "));
  }
  SECTION("encoder.json is not an object") {
    broken.encoder = nlohmann::json::array({1, 2});
    broken.expectError(encoderPath + ": expected a JSON object of token -> id");
  }
  SECTION("an id out of range") {
    broken.encoder["hello"] = 99999;
    broken.expectError(encoderPath + ": the id of \"hello\" is 99999, expected an integer in [0, 50257)");
  }
  SECTION("two tokens with one id") {
    broken.encoder["Hello"] = 995;
    broken.expectError(encoderPath + ": id 995 is given to both \"Hello\" and \"Ġworld\"");
  }
  SECTION("a byte without its token") {
    broken.encoder.erase("Ġ");
    broken.encoder["\u00ff\u00ff\u00ff"] = 220;  // keeps the ids dense
    broken.expectError(encoderPath + ": no token for byte 0x20 (symbol \"Ġ\")");
  }
  SECTION("a character outside the byte alphabet") {
    broken.encoder.erase("Ġ");
    broken.encoder[" "] = 220;  // the raw space is not a byte-level symbol
    broken.expectError(encoderPath + ": token \" \" holds U+0020, which is not in GPT-2's byte alphabet");
  }
  SECTION("no end-of-text token") {
    broken.encoder.erase("<|endoftext|>");
    broken.expectError(encoderPath + ": no <|endoftext|> token");
  }
  SECTION("vocab.bpe without its header") {
    broken.merges = broken.merges.substr(broken.merges.find('\n') + 1);
    broken.expectError(mergesPath + ": line 1: expected the \"#version\" header of a BPE merges file");
  }
  SECTION("a merge line that is not two symbols") {
    broken.merges.insert(broken.merges.find('\n') + 1, "Ġ t h\n");
    broken.expectError(mergesPath + ": line 2: expected two symbols separated by one space, found \"Ġ t h\"");
  }
  SECTION("a merge of an unknown symbol") {
    broken.merges += "Ġ qqqqqqqqq\n";
    broken.expectError(mergesPath + ": line 50002: symbol \"qqqqqqqqq\" is not in encoder.json");
  }
  SECTION("a merge whose result is not a token") {
    broken.merges += "Hello Ġworld\n";
    broken.expectError(mergesPath + ": line 50002: merge result \"HelloĠworld\" is not in encoder.json");
  }
  SECTION("a repeated merge") {
    broken.merges += "Ġ t\n";
    broken.expectError(mergesPath + ": line 50002: the merge \"Ġ t\" repeats line 2");
  }
}
