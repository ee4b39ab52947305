#!/usr/bin/env python3
"""Writes a multiple-choice eval file in llm.c's format, as its
dev/data/hellaswag.py does through write_evalfile (dev/data/data_common.py):
a header of 256 little-endian int32 (magic, version 1, the number of examples,
the longest example's bytes), then each example as uint16 words: 65535, the
example's bytes, its index, the label, the number of completions (4), the
context's length and tokens, each completion's length and tokens.

usage: write_eval_file.py OUT COUNT [--seed S] [--vocab V] [--magic M]
Random examples: contexts of 1-6 tokens, completions of 1-4, ids below V.
"""
import argparse
import random
import struct


def example_words(index, label, context, completions):
    words = [65535, 0, index, label, len(completions), len(context), *context]
    for completion in completions:
        words += [len(completion), *completion]
    words[1] = 2 * len(words)
    return words


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("count", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--magic", type=int, default=20240522)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    def tokens(low, high):
        return [rng.randrange(args.vocab) for _ in range(rng.randint(low, high))]

    words, longest = [], 0
    for index in range(args.count):
        example = example_words(index, rng.randrange(4), tokens(1, 6), [tokens(1, 4) for _ in range(4)])
        longest = max(longest, 2 * len(example))
        words += example
    header = [args.magic, 1, args.count, longest] + [0] * 252
    with open(args.out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(words)}H", *words))


if __name__ == "__main__":
    main()
