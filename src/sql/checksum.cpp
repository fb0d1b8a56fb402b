#include <zlib.h>

#include "sql/migration_files.hpp"

namespace dblock::detail::sqldb {

std::int32_t flyway_checksum(const std::string& text) {
  uLong crc = crc32(0L, Z_NULL, 0);
  std::size_t start = 0;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;  // Flyway strips a UTF-8 BOM
  // Lines end at \n, \r\n or a lone \r, as Java's BufferedReader.readLine sees them.
  while (start < text.size()) {
    auto end = text.find_first_of("\r\n", start);
    auto line_end = end == std::string::npos ? text.size() : end;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(text.data() + start), static_cast<uInt>(line_end - start));
    if (end == std::string::npos) break;
    start = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(crc));
}

}  // namespace dblock::detail::sqldb
