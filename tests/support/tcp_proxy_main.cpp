// dblock_tcp_proxy: the test suites' TCP fault proxy (tcp_proxy.hpp) as a process, for the
// torture harness, the CLI scripts or a person at a shell.
//   dblock_tcp_proxy HOST:PORT
// prints "port N" (where it listens, on 127.0.0.1) once it is ready, then reads one mode per
// line on stdin (pass, stall, drop) and answers "ok MODE" once it applies, or "error ...";
// it stops at the end of stdin.
#include <iostream>
#include <string>

#include "support/tcp_proxy.hpp"

int main(int argc, char** argv) {
  std::string target = argc == 2 ? argv[1] : "";
  auto colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    std::cerr << "usage: dblock_tcp_proxy HOST:PORT (then pass, stall or drop on stdin)\n";
    return 64;
  }
  try {
    dblock::test::TcpProxy proxy(target.substr(0, colon), std::stoi(target.substr(colon + 1)));
    std::cout << "port " << proxy.port() << std::endl;
    for (std::string line; std::getline(std::cin, line);) {
      try {
        proxy.set_mode(dblock::test::parse_proxy_mode(line));
        std::cout << "ok " << line << std::endl;
      } catch (const std::exception& e) {
        std::cout << "error " << e.what() << std::endl;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "dblock_tcp_proxy: " << e.what() << "\n";
    return 69;
  }
  return 0;
}
