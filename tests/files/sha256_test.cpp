// SHA-256 (common/sha256.h) against the FIPS 180-4 example messages, and the
// same digest whatever pieces the bytes are added in.
#include "sha256.h"

#include <catch2/catch.hpp>
#include <string>

using llmc::Sha256;
using llmc::sha256Hex;
using llmc::toHex;

TEST_CASE("sha256: the standard's examples", "[sha256]") {
  CHECK(sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                  "mnopqrstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha256Hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: messages around the padding's block boundary", "[sha256]") {
  // 55 bytes pad within one block, 56 to 64 need a second one.
  CHECK(sha256Hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256Hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256Hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("sha256: the digest does not depend on how the bytes are split", "[sha256]") {
  std::string message;
  for (int i = 0; i < 1000; ++i) message += static_cast<char>(i * 7 + 3);
  const std::string whole = sha256Hex(message);
  for (size_t piece : {1, 3, 63, 64, 65, 200}) {
    INFO("pieces of " << piece);
    Sha256 hash;
    for (size_t at = 0; at < message.size(); at += piece) hash.add(std::string_view(message).substr(at, piece));
    CHECK(toHex(hash.finish()) == whole);
  }
}
