// NumPy's .npy files, read: the arrays llmc-run takes as a diagram's inputs
// (--input NAME=FILE.npy). Versions 1.0, 2.0 and 3.0 of the format; float32,
// float64, int32 and int64 elements, little-endian, in C order (what
// numpy.save writes for such an array on any common machine). Anything else
// is refused with a message that names the file and what to write instead.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmc {

// A .npy file that cannot be read or that llmc does not take; the message
// starts with the file's path.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NpyArray {
  std::string dtype;           // "float32", "float64", "int32" or "int64"
  std::vector<int64_t> shape;  // empty for a 0-d array (one element)
  std::vector<double> values;  // row-major (C order); int64 values beyond 2^53 rounded
  bool isInteger() const { return dtype == "int32" || dtype == "int64"; }
  // As NumPy prints a shape: "(3, 4)", "(5,)", "()".
  std::string shapeText() const;
};

// Reads `path`. Throws NpyError for a file that cannot be opened, is not a
// .npy file, has a header llmc cannot parse, an element type or order it does
// not take, or data that is shorter or longer than its shape.
NpyArray readNpy(const std::string& path);

}  // namespace llmc
