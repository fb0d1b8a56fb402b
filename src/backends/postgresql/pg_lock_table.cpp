// dblock::postgresql::LockTable: the caller's libpqxx transaction as a Connection, under the
// locks written once in sql/in_transaction.cpp. Statements go through transaction_base::exec
// with the parameters quoted in: exec_params on a transaction that an error closed runs the
// statement outside it in libpqxx 6.4 (autocommit), where exec refuses; and a prepared
// statement would leave its name in the caller's connection.
#include <cctype>
#include <pqxx/pqxx>

#include "backends/postgresql/pg_connection.hpp"
#include "backends/postgresql/pg_dialect.hpp"
#include "dblock/postgresql.hpp"
#include "sql/in_transaction.hpp"

namespace dblock::postgresql {

namespace {

class CallerTransaction final : public detail::sqldb::Connection {
 public:
  explicit CallerTransaction(pqxx::transaction_base& tx) : tx_(tx) {}
  detail::sqldb::Result run(const std::string& sql, const std::vector<detail::sqldb::Value>& params) override {
    try {
      return detail::sqldb::to_result(tx_.exec(bind(sql, params)));
    } catch (const Error&) {
      throw;
    } catch (const pqxx::usage_error& e) {
      throw UsageError(std::string("postgresql: the caller's transaction cannot run statements (failed or "
                                   "closed: roll it back and begin another): ") + e.what());
    } catch (const std::exception& e) {
      detail::sqldb::throw_pg_error(e, "the caller's transaction");
    }
  }
  // The transaction is the caller's to begin and end.
  void run_script(const std::string&) override { refuse(); }
  void begin() override { refuse(); }
  void commit() override { refuse(); }
  void rollback() noexcept override {}
  bool usable() const noexcept override { return true; }

 private:
  // sql with each $N replaced by parameter N as a literal, in one pass over the statement
  // text (ours: no $ in it but the markers).
  std::string bind(const std::string& sql, const std::vector<detail::sqldb::Value>& params) {
    std::string out;
    for (std::size_t i = 0; i < sql.size(); ++i) {
      if (sql[i] != '$' || i + 1 >= sql.size() || !std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
        out += sql[i];
        continue;
      }
      std::size_t n = 0;
      while (i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) n = n * 10 + (sql[++i] - '0');
      const auto& v = params.at(n - 1);
      out += std::holds_alternative<std::string>(v) ? tx_.quote(std::get<std::string>(v)) : detail::sqldb::as_text(v);
    }
    return out;
  }
  [[noreturn]] static void refuse() { throw InternalError("a caller's transaction is not dblock's to run or end"); }
  pqxx::transaction_base& tx_;
};

}  // namespace

LockTable::LockTable(const std::string& table)
    : table_(std::make_shared<detail::sqldb::InTransaction>(detail::sqldb::postgresql_dialect(), table)) {}

std::uint64_t LockTable::lock_in(pqxx::transaction_base& tx, const std::string& name) const {
  CallerTransaction c(tx);
  return *table_->lock(c, name, std::nullopt);
}

std::optional<std::uint64_t> LockTable::try_lock_in(pqxx::transaction_base& tx, const std::string& name,
                                                    std::chrono::milliseconds wait) const {
  CallerTransaction c(tx);
  return table_->lock(c, name, detail::Clock::now() + std::max(wait, std::chrono::milliseconds{0}));
}

void LockTable::check_in(pqxx::transaction_base& tx, const std::string& name, std::uint64_t fence) const {
  CallerTransaction c(tx);
  table_->check(c, name, fence);
}

void LockTable::check_in(pqxx::transaction_base& tx, const Lease& lease) const {
  if (!lease.held()) throw UsageError("check_in of a lease that was released (or moved from)");
  check_in(tx, lease.name(), lease.fence());
}

}  // namespace dblock::postgresql
