#include "site_packages.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

namespace llmc::cuda {

namespace fs = std::filesystem;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Environment prefixes, most specific first, absolute only.
std::vector<fs::path> prefixes() {
  std::vector<fs::path> out;
  for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const fs::path p = environment(variable); p.is_absolute()) out.push_back(p);
  std::istringstream path(environment("PATH"));
  for (std::string folder; std::getline(path, folder, ':');) {
    const fs::path bin = folder;
    if (!bin.is_absolute() || ::access((bin / "python3").c_str(), X_OK) != 0) continue;
    out.push_back(bin.parent_path());
    // pyenv's shims are scripts that pick one of its versions: each is a prefix.
    if (bin.filename() == "shims") {
      std::error_code error;
      std::vector<fs::path> versions;
      for (const auto& entry : fs::directory_iterator(bin.parent_path() / "versions", error))
        versions.push_back(entry.path());
      std::sort(versions.begin(), versions.end());
      out.insert(out.end(), versions.begin(), versions.end());
    }
  }
  out.push_back("/usr/local");
  out.push_back("/usr");
  if (const fs::path home = environment("HOME"); home.is_absolute()) out.push_back(home / ".local");
  return out;
}

// <prefix>/lib*/python3*/{site,dist}-packages, newest Python first.
std::vector<fs::path> sitePackagesOf(const fs::path& prefix) {
  std::vector<fs::path> out;
  for (const char* lib : {"lib", "lib64"}) {
    std::error_code error;
    std::vector<fs::path> pythons;
    for (const auto& entry : fs::directory_iterator(prefix / lib, error))
      if (entry.path().filename().string().starts_with("python3")) pythons.push_back(entry.path());
    // python3.12 before python3.9 before python3 (Debian's shared dist-packages).
    std::sort(pythons.begin(), pythons.end(), [](const fs::path& a, const fs::path& b) {
      const std::string x = a.filename().string(), y = b.filename().string();
      return x.size() != y.size() ? x.size() > y.size() : x > y;
    });
    for (const fs::path& python : pythons)
      for (const char* packages : {"site-packages", "dist-packages"})
        if (fs::is_directory(python / packages, error)) out.push_back(python / packages);
  }
  return out;
}

}  // namespace

std::vector<std::string> pythonSitePackages() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const fs::path& prefix : prefixes())
    for (const fs::path& folder : sitePackagesOf(prefix.lexically_normal()))
      if (seen.insert(folder.string()).second) out.push_back(folder.string());
  return out;
}

}  // namespace llmc::cuda
