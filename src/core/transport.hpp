// What protects the traffic between a Client and its server (`dblock doctor`'s transport line).
#pragma once

#include <string>

namespace dblock::detail {

// TLS, and how far the server's certificate was checked: its chain to a trusted CA, its name too.
struct Transport {
  std::string tls;  // the protocol ("TLSv1.3"), "TLS" when the version is not known, "" for plaintext
  bool chain_verified = false;
  bool name_verified = false;
};

}  // namespace dblock::detail
