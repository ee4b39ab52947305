#!/usr/bin/env python3
"""Writes a .npy file as numpy.save would, without numpy, for llmc-run's tests:
good files and the bad ones llmc-run must refuse.

usage: make_npy.py OUT DESCR SHAPE [--value V] [--cut N] [--extra N] [--fortran] [--magic TEXT]
  DESCR   the element type as the header spells it: <f4, <f8, <i4, <i8, >f4, <f2, ...
  SHAPE   extents joined by commas ("3,4"; "" for a 0-d array)
  --value every element's value (default: 0, 1, 2, ... in order)
  --cut   leave the last N bytes of the data out (a truncated file)
  --extra append N zero bytes after the data
  --fortran  say fortran_order True in the header
  --magic    the file's first bytes instead of \\x93NUMPY
"""
import argparse
import math
import struct

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("descr")
parser.add_argument("shape")
parser.add_argument("--value", type=float)
parser.add_argument("--cut", type=int, default=0)
parser.add_argument("--extra", type=int, default=0)
parser.add_argument("--fortran", action="store_true")
parser.add_argument("--magic", default=None)
args = parser.parse_args()

shape = tuple(int(x) for x in args.shape.split(",") if x)
count = math.prod(shape)
shape_text = "(" + ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (args.descr, args.fortran, shape_text)
# Padded with spaces to a multiple of 64 bytes, ending in a newline (format 1.0).
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
magic = args.magic.encode() if args.magic is not None else b"\x93NUMPY"

order = {"<": "<", ">": ">", "|": "<", "=": "<"}[args.descr[0]]
code = {"f4": "f", "f8": "d", "i4": "i", "i8": "q", "f2": "e", "i1": "b", "u1": "B"}[args.descr[1:]]
values = [args.value if args.value is not None else i for i in range(count)]
if code in "iqbB":
    values = [int(v) for v in values]
data = struct.pack(order + code * count, *values)
data = data[: len(data) - args.cut] + b"\0" * args.extra

with open(args.out, "wb") as f:
    f.write(magic + b"\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
