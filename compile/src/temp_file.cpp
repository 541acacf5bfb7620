// Temporary files: mkstemps in $TMPDIR (else /tmp), unlinked when done.
#include "temp_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "ropejit/error.h"

namespace ropejit {

TempFile::TempFile(const std::string& tag, const std::string& suffix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp && *tmp ? tmp : "/tmp";
  std::string name = dir + "/ropejit-" + tag + "-XXXXXX" + suffix;
  const int fd = ::mkstemps(name.data(), static_cast<int>(suffix.size()));
  if (fd < 0)
    throw Error(Status::io_error, fmt::format("cannot create a temporary file in {}: {}", dir, std::strerror(errno)));
  ::close(fd);
  path = name;
}

TempFile::~TempFile() { ::unlink(path.c_str()); }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ropejit
