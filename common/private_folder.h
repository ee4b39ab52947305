// Folders whose contents llmc trusts, and files read from them. A disk cache
// hands back compiled code and plans that run on the GPU as they are, so its
// folder must be one that no one but this user can write into: owned by the
// effective user and writable by no one else, below folders that no one else
// can rename it in (each owned by the user or root, and not writable by
// others unless sticky, like /tmp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace llmc {

// Why `folder` is not private to this user, or nothing when it is.
std::optional<std::string> whyNotPrivate(const std::filesystem::path& folder);

// Creates `folder` and its missing parents, each with mode 0700 (not
// 0777 less a umask that may leave it group-writable). Throws std::runtime_error.
void createPrivateFolder(const std::filesystem::path& folder);

// The bytes of the regular file `path`, opened without following a symlink:
// nothing when it does not exist. A symlink, a device, a FIFO, a file larger
// than `maxBytes` or a read error throws std::runtime_error saying which.
std::optional<std::string> readRegularFile(const std::filesystem::path& path, uint64_t maxBytes);

}  // namespace llmc
