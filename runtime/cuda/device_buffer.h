// An allocation of device memory (cuMemAlloc), freed when the buffer goes.
// Copies are synchronous; they need the owning context current.
#pragma once

#include <cstddef>
#include <span>

#include "cuda_driver.h"

namespace llmc::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr address() const { return address_; }
  size_t bytes() const { return bytes_; }

  // Copy `bytes` from the host to the start of the buffer, or back.
  void copyFromHost(const void* source, size_t bytes);
  void copyToHost(void* destination, size_t bytes) const;
  // Sets every byte to `value`: 0xFF poisons floats with NaN before a kernel
  // that should overwrite them.
  void fillBytes(unsigned char value);
  // Sets `count` bytes from byte `first` on to `value`, past the end refused.
  void fillBytes(size_t first, size_t count, unsigned char value);

  template <typename T>
  void upload(std::span<const T> values) {
    copyFromHost(values.data(), values.size_bytes());
  }
  template <typename T>
  void download(std::span<T> values) const {
    copyToHost(values.data(), values.size_bytes());
  }

 private:
  void release() noexcept;

  CUdeviceptr address_ = 0;
  size_t bytes_ = 0;
};

}  // namespace llmc::cuda
