// The site-packages folders of the Python environments on this machine, found
// without running Python: importing a module to ask where it is would run
// whatever `nvidia/__init__.py` the current directory holds (Python puts the
// script's folder, or the current one, first on its path), and a planted one
// could name any folder to load a library from.
#pragma once

#include <string>
#include <vector>

namespace llmc::cuda {

// Existing site-packages and dist-packages folders, most specific first:
// those of $VIRTUAL_ENV and $CONDA_PREFIX, of each absolute $PATH folder that
// holds a python3 (its parent is an environment's prefix: /opt/venv/bin gives
// /opt/venv; pyenv's shims folder gives each of pyenv's versions), of
// /usr/local and /usr, and the user's own (~/.local). Only absolute paths: a
// relative $PATH entry such as "." is skipped. No duplicates.
std::vector<std::string> pythonSitePackages();

}  // namespace llmc::cuda
