// The certificate and key files a URL names (ssl-ca, ssl-cert, ssl-key): read when the
// client opens, so that a wrong path is a usage error then, not a handshake failure later.
#pragma once

#include <string>

namespace dblock::detail {

// The file's text; UsageError naming the backend, the parameter and the path if it cannot be
// read or holds no PEM block.
std::string read_pem_file(const std::string& backend, const std::string& parameter, const std::string& path);

}  // namespace dblock::detail
