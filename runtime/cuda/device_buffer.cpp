#include "device_buffer.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace llmc::cuda {

namespace {

void checkFits(size_t bytes, size_t capacity, const char* what) {
  if (bytes > capacity)
    throw std::out_of_range(fmt::format("{} of {} bytes does not fit a device buffer of {} bytes", what, bytes, capacity));
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check(driver().memAlloc(&address_, bytes), fmt::format("cuMemAlloc({} bytes)", bytes));
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    address_ = std::exchange(other.address_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  // A failure to free cannot be reported from a destructor; it only happens
  // when the context is already broken.
  if (address_) driver().memFree(address_);
  address_ = 0;
  bytes_ = 0;
}

void DeviceBuffer::copyFromHost(const void* source, size_t bytes) {
  checkFits(bytes, bytes_, "a copy to the device");
  if (bytes > 0) check(driver().memcpyHtoD(address_, source, bytes), fmt::format("cuMemcpyHtoD({} bytes)", bytes));
}

void DeviceBuffer::copyToHost(void* destination, size_t bytes) const {
  checkFits(bytes, bytes_, "a copy from the device");
  if (bytes > 0)
    check(driver().memcpyDtoH(destination, address_, bytes), fmt::format("cuMemcpyDtoH({} bytes)", bytes));
}

void DeviceBuffer::fillBytes(size_t first, size_t count, unsigned char value) {
  if (first > bytes_ || count > bytes_ - first)
    throw std::invalid_argument(fmt::format("a fill of bytes {}..{} of a buffer of {}", first, first + count, bytes_));
  if (count > 0)
    check(driver().memsetD8(address_ + first, value, count), fmt::format("cuMemsetD8(byte {}, {} bytes, {:#04x})", first, count, value));
}

void DeviceBuffer::fillBytes(unsigned char value) {
  if (bytes_ > 0)
    check(driver().memsetD8(address_, value, bytes_), fmt::format("cuMemsetD8({} bytes, {:#04x})", bytes_, value));
}

}  // namespace llmc::cuda
