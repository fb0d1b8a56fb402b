// Migration scripts: migrations/<dialect>/V<version>__<description>.sql, Flyway's naming, so
// teams can feed the same files to Flyway (with placeholders table and table_name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dblock::detail::sqldb {

struct MigrationFile {
  std::string dialect;  // folder name
  std::string script;   // file name, e.g. V1__create_dblock_locks.sql
  std::string text;
};

// Compiled in by cmake/EmbedMigrations.cmake.
const std::vector<MigrationFile>& embedded_migrations();

// Flyway's checksum: CRC-32 over the script's lines without their line endings.
std::int32_t flyway_checksum(const std::string& text);

}  // namespace dblock::detail::sqldb
