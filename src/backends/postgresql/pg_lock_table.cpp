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
#include "sql/lock_table_impl.hpp"

namespace dblock {
namespace detail::sqldb {

namespace {

class PgCallerTransaction final : public CallerConnection {
 public:
  explicit PgCallerTransaction(pqxx::transaction_base& tx) : tx_(tx) {}
  Result run(const std::string& sql, const std::vector<Value>& params) override {
    try {
      return to_result(tx_.exec(bind(sql, params)));
    } catch (const Error&) {
      throw;
    } catch (const pqxx::usage_error& e) {
      throw UsageError(std::string("postgresql: the caller's transaction cannot run statements (failed or "
                                   "closed: roll it back and begin another): ") + e.what());
    } catch (const std::exception& e) {
      throw_pg_error(e, "the caller's transaction");
    }
  }
 private:
  // sql with each $N replaced by parameter N as a literal, in one pass over the statement
  // text (ours: no $ in it but the markers).
  std::string bind(const std::string& sql, const std::vector<Value>& params) {
    std::string out;
    for (std::size_t i = 0; i < sql.size(); ++i) {
      if (sql[i] != '$' || i + 1 >= sql.size() || !std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
        out += sql[i];
        continue;
      }
      std::size_t n = 0;
      while (i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) n = n * 10 + (sql[++i] - '0');
      const auto& v = params.at(n - 1);
      out += std::holds_alternative<std::string>(v) ? tx_.quote(std::get<std::string>(v)) : as_text(v);
    }
    return out;
  }
  pqxx::transaction_base& tx_;
};

}  // namespace

template <>
struct CallerTransaction<pqxx::transaction_base> {
  static const Dialect& dialect() { return postgresql_dialect(); }
  static std::unique_ptr<Connection> adapt(pqxx::transaction_base& tx) {
    // Each statement of a nontransaction commits on its own: a lock would end with it.
    if (dynamic_cast<pqxx::nontransaction*>(&tx))
      throw UsageError("postgresql: a lock in the caller's transaction needs a transaction (pqxx::work), "
                       "not a pqxx::nontransaction");
    return std::make_unique<PgCallerTransaction>(tx);
  }
};

}  // namespace detail::sqldb

template class DBLOCK_EXPORT LockTable<pqxx::transaction_base>;

}  // namespace dblock
