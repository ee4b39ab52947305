#!/usr/bin/env python3
"""An independent GPT-2 tokenizer in plain Python: the expected ids of
tokenizer_test.cpp come from here, not from the C++ code under test.

It follows OpenAI's gpt-2/src/encoder.py (string-based BPE over the byte-level
alphabet, the same files), with the pre-tokenisation regex

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

spelled out by hand with unicodedata (the standard library's `re` has no
\\p{L}). Bytes that are not UTF-8 are carried through as surrogate escapes,
which are neither letters, numbers nor spaces.

    python3 tests/unit/tokenizer_reference.py            # C++ literals for the test
    python3 tests/unit/tokenizer_reference.py --check-regex   # compare the split with the `regex` module
"""
import argparse
import json
import pathlib
import random
import unicodedata

DEFAULT_TOKENIZER = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "gpt2-bpe"

# PropList.txt White_Space: what \s means in a Unicode regex engine.
WHITE_SPACE = set(map(chr, [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                            0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]


def is_letter(c):
    return unicodedata.category(c).startswith("L")


def is_number(c):
    return unicodedata.category(c).startswith("N")


def is_space(c):
    return c in WHITE_SPACE


def is_other(c):
    return not (is_letter(c) or is_number(c) or is_space(c))


def match_at(text, i):
    """The end of the regex's match at i: its alternatives tried in order."""
    for contraction in CONTRACTIONS:
        if text.startswith(contraction, i):
            return i + len(contraction)
    for in_class in (is_letter, is_number, is_other):  # ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        for start in ((i + 1, i) if text[i] == " " else (i,)):  # ` ?` is greedy: with the space first
            end = start
            while end < len(text) and in_class(text[end]):
                end += 1
            if end > start:
                return end
    end = i  # `\s+(?!\S)`: backtrack from the longest run until no non-space follows
    while end < len(text) and is_space(text[end]):
        end += 1
    for stop in range(end, i, -1):
        if stop == len(text) or is_space(text[stop]):
            return stop
    return end  # `\s+`


def pretokenize(text):
    pieces, i = [], 0
    while i < len(text):
        end = match_at(text, i)
        pieces.append(text[i:end])
        i = end
    return pieces


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Encoder:
    def __init__(self, directory):
        directory = pathlib.Path(directory)
        self.encoder = json.loads((directory / "encoder.json").read_text(encoding="utf-8"))
        merges = (directory / "vocab.bpe").read_text(encoding="utf-8").split("\n")[1:-1]
        self.bpe_ranks = {tuple(m.split()): rank for rank, m in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()

    def bpe(self, token):
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
        return word

    def encode(self, data: bytes):
        ids = []
        for piece in pretokenize(data.decode("utf-8", "surrogateescape")):
            symbols = "".join(self.byte_encoder[b] for b in piece.encode("utf-8", "surrogateescape"))
            ids.extend(self.encoder[s] for s in self.bpe(symbols))
        return ids


# The strings of tokenizer_test.cpp, as bytes (so that invalid UTF-8 can be given).
TEST_STRINGS = [
    b"Hello world",
    b"Hello, world!",
    b" leading space",
    b"double  space",
    b"line one\nline two",
    b"paragraph\n\nnext",
    b"don't",
    b"I'll",
    b"we've",
    b"They're here, she's gone, I'm sure, he'd know.",
    b"'S and DON'T: contractions are lowercase only",
    b"1234 56",
    b"3.14159 and 1,000,000 and x2",
    b"punctuation!!! ?? ... --- (parens) [brackets] {braces}",
    "café".encode(),
    "naïve".encode(),
    "日本語".encode(),
    "emoji 😀👍🏽".encode(),
    "Ελληνικά и русский".encode(),
    "²³ ½ Ⅻ".encode(),
    "non\u00a0breaking and ideographic\u3000space".encode(),
    b"trailing whitespace   ",
    b"trailing newline\n",
    b"tabs\tand\ttabs",
    b"  \n\n  indented",
    b"<|endoftext|>",
    b"",
    b"bad \xff\xfe bytes \xe6\x97 truncated",
]


def cpp_literal(data: bytes):
    """A C++ string literal of exactly these bytes."""
    escapes = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\t"): "\\t"}
    out, after_hex_escape = [], False
    for b in data:
        piece = escapes.get(b) or (chr(b) if 32 <= b < 127 else f"\\x{b:02x}")
        if after_hex_escape and piece[0] in "0123456789abcdefABCDEF":
            out.append('""')  # a hex escape would swallow the next hex digit
        out.append(piece)
        after_hex_escape = piece.startswith("\\x")
    return '"' + "".join(out) + '"'


def print_cases(encoder):
    for data in TEST_STRINGS:
        ids = encoder.encode(data)
        print(f"    {{{cpp_literal(data)}s, {{{', '.join(map(str, ids))}}}}},")


def check_regex(corpus_dir):
    """Compares pretokenize with the `regex` module on a corpus and random strings."""
    try:
        import regex
    except ImportError:
        raise SystemExit("--check-regex needs the regex module: apt-get install python3-regex, then use /usr/bin/python3")
    pattern = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    texts = [p.read_text(encoding="utf-8") for p in sorted(pathlib.Path(corpus_dir).rglob("*.txt"))]
    alphabet = list(" \n\t'sdtmlrev.,!?-aZ09\u00a0\u3000\u2003é日😀²Ⅻ\x85\x1c") + ["\udcff"]
    rng = random.Random(1)
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40))) for _ in range(20000)]
    texts += [s.decode("utf-8", "surrogateescape") for s in TEST_STRINGS]
    for text in texts:
        expected = pattern.findall(text)
        if pretokenize(text) != expected:
            raise SystemExit(f"mismatch on {text[:80]!r}:\n  {pretokenize(text)[:20]}\n  {expected[:20]}")
    print(f"pretokenize agrees with the regex module on {len(texts)} texts (regex {regex.__version__})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, help="folder of encoder.json and vocab.bpe")
    parser.add_argument("--check-regex", metavar="CORPUS_DIR", nargs="?", const=DEFAULT_TOKENIZER.parent / "text",
                        help="compare the hand-written split with the regex module")
    args = parser.parse_args()
    if args.check_regex:
        check_regex(args.check_regex)
    else:
        print_cases(Encoder(args.tokenizer))


if __name__ == "__main__":
    main()
