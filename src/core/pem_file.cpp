#include "core/pem_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dblock/errors.hpp"

namespace dblock::detail {

std::string read_pem_file(const std::string& backend, const std::string& parameter, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(backend + ": cannot read " + parameter + " file '" + path + "': " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.find("-----BEGIN ") == std::string::npos)
    throw UsageError(backend + ": " + parameter + " file '" + path + "' holds no PEM block");
  return text;
}

}  // namespace dblock::detail
