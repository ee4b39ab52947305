#include "npy_file.h"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string_view>

#include "checked_math.h"

namespace llmc {

static_assert(std::endian::native == std::endian::little, "the .npy reader takes little-endian data as it lies");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

struct Element {
  const char* descr;  // as NumPy writes it in the header
  const char* name;
  size_t bytes;
};
constexpr Element kElements[] = {
    {"<f4", "float32", 4}, {"<f8", "float64", 8}, {"<i4", "int32", 4}, {"<i8", "int64", 8}};

// The header's dictionary, as NumPy writes it:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Only what follows each of the three keys is read; spacing may vary.
class HeaderDict {
 public:
  HeaderDict(std::string text, std::string path) : text_(std::move(text)), path_(std::move(path)) {}

  // The text after `key` and its colon; throws where the key is missing.
  size_t valueAt(const std::string& key) const {
    for (const char quote : {'\'', '"'}) {
      const size_t at = text_.find(quote + key + quote);
      if (at == std::string::npos) continue;
      size_t i = text_.find_first_not_of(' ', at + key.size() + 2);
      if (i != std::string::npos && text_[i] == ':') return text_.find_first_not_of(' ', i + 1);
    }
    throw NpyError(fmt::format("{}: the .npy header has no '{}': {}", path_, key, text_));
  }

  std::string quoted(const std::string& key) const {
    const size_t at = valueAt(key);
    if (at == std::string::npos || (text_[at] != '\'' && text_[at] != '"'))
      throw NpyError(fmt::format("{}: the .npy header's '{}' is not a string: {}", path_, key, text_));
    const size_t end = text_.find(text_[at], at + 1);
    if (end == std::string::npos) throw NpyError(fmt::format("{}: the .npy header is cut short: {}", path_, text_));
    return text_.substr(at + 1, end - at - 1);
  }

  bool boolean(const std::string& key) const {
    const size_t at = valueAt(key);
    if (at != std::string::npos && text_.compare(at, 4, "True") == 0) return true;
    if (at != std::string::npos && text_.compare(at, 5, "False") == 0) return false;
    throw NpyError(fmt::format("{}: the .npy header's '{}' is neither True nor False: {}", path_, key, text_));
  }

  std::vector<int64_t> shape() const {
    const size_t at = valueAt("shape");
    const size_t end = at == std::string::npos ? std::string::npos : text_.find(')', at);
    if (at == std::string::npos || text_[at] != '(' || end == std::string::npos)
      throw NpyError(fmt::format("{}: the .npy header's 'shape' is not a tuple: {}", path_, text_));
    std::vector<int64_t> shape;
    for (size_t i = at + 1; i < end;) {
      if (text_[i] == ' ' || text_[i] == ',') {
        ++i;
        continue;
      }
      int64_t n = 0;
      const size_t first = i;
      for (; i < end && std::isdigit(static_cast<unsigned char>(text_[i])); ++i) {
        const std::optional<int64_t> next = checkedMul<int64_t>(n, 10);
        const std::optional<int64_t> sum = next ? checkedAdd<int64_t>(*next, text_[i] - '0') : std::nullopt;
        if (!sum) throw NpyError(fmt::format("{}: the .npy header's shape has an extent too large: {}", path_, text_));
        n = *sum;
      }
      if (i == first || (i < end && text_[i] != ',' && text_[i] != ' ' && text_[i] != 'L'))
        throw NpyError(fmt::format("{}: the .npy header's 'shape' is not a tuple of whole numbers: {}", path_, text_));
      if (i < end && text_[i] == 'L') ++i;  // Python 2's long integers
      shape.push_back(n);
    }
    return shape;
  }

 private:
  std::string text_, path_;
};

uint32_t littleEndian(const std::string& bytes, size_t at, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i) value |= uint32_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
  return value;
}

template <typename T>
T readAs(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

const Element& elementOf(const std::string& descr, const std::string& path) {
  for (const Element& e : kElements)
    if (descr == e.descr) return e;
  std::string why;
  if (!descr.empty() && descr[0] == '>') why = " (big-endian: save it as little-endian, array.astype('<" + descr.substr(1) + "'))";
  throw NpyError(fmt::format("{}: element type '{}' is not taken{}: give float32, float64, int32 or int64, "
                             "little-endian ('<f4', '<f8', '<i4', '<i8')",
                             path, descr, why));
}

// One element as it lies in the file (little-endian, as this host: see the static_assert).
double elementValue(const char* p, const Element& e) {
  if (e.name == std::string_view("float32")) return readAs<float>(p);
  if (e.name == std::string_view("float64")) return readAs<double>(p);
  if (e.name == std::string_view("int32")) return static_cast<double>(readAs<int32_t>(p));
  return static_cast<double>(readAs<int64_t>(p));
}

}  // namespace

std::string NpyArray::shapeText() const {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

NpyArray readNpy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw NpyError(fmt::format("{}: a folder, not a .npy file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError(fmt::format("{}: cannot open the file: {}", path, std::strerror(errno)));
  std::string bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {  // libstdc++ throws where a read fails (a device, a folder)
    in.setstate(std::ios::badbit);
  }
  if (in.bad()) throw NpyError(fmt::format("{}: cannot read the file", path));
  if (bytes.size() < kMagicBytes + 2 || bytes.compare(0, kMagicBytes, kMagic, kMagicBytes) != 0)
    throw NpyError(fmt::format("{}: not a .npy file (it does not start with \\x93NUMPY; numpy.save writes one)", path));
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw NpyError(fmt::format("{}: .npy format version {}.{} is not taken (1.0, 2.0 and 3.0 are)", path, major, minor));
  const size_t lengthBytes = major == 1 ? 2 : 4, headerAt = kMagicBytes + 2 + lengthBytes;
  if (bytes.size() < headerAt) throw NpyError(fmt::format("{}: the .npy header is cut short", path));
  const size_t headerBytes = littleEndian(bytes, kMagicBytes + 2, lengthBytes);
  if (bytes.size() < headerAt + headerBytes)
    throw NpyError(fmt::format("{}: the .npy header is cut short ({} bytes of its {})", path, bytes.size() - headerAt,
                               headerBytes));
  const HeaderDict header(bytes.substr(headerAt, headerBytes), path);

  NpyArray array;
  const Element& element = elementOf(header.quoted("descr"), path);
  array.dtype = element.name;
  if (header.boolean("fortran_order"))
    throw NpyError(fmt::format("{}: the array is in Fortran order: save a C-order one (numpy.ascontiguousarray)", path));
  array.shape = header.shape();
  std::optional<int64_t> elements = 1;
  for (int64_t extent : array.shape) elements = elements ? checkedMul<int64_t>(*elements, extent) : std::nullopt;
  const std::optional<int64_t> needed = elements ? checkedMul<int64_t>(*elements, element.bytes) : std::nullopt;
  if (!needed) throw NpyError(fmt::format("{}: shape {} holds too many elements", path, array.shapeText()));
  const size_t dataAt = headerAt + headerBytes, present = bytes.size() - dataAt;
  if (present != static_cast<size_t>(*needed))
    throw NpyError(fmt::format("{}: shape {} of {} needs {} bytes of data, the file has {} after its header ({})", path,
                               array.shapeText(), array.dtype, *needed, present,
                               present < static_cast<size_t>(*needed) ? "cut short" : "bytes left over"));
  array.values.resize(static_cast<size_t>(*elements));
  for (size_t i = 0; i < array.values.size(); ++i) array.values[i] = elementValue(&bytes[dataAt + i * element.bytes], element);
  return array;
}

}  // namespace llmc
