// dblock::postgresql::LockTable: the caller's libpqxx transaction as a Connection, under the
// locks written once in sql/in_transaction.cpp. Statements go through transaction_base::exec
// with the parameters quoted in: exec_params and exec_prepared on a transaction that an error
// closed run the statement outside it in libpqxx 6.4 (autocommit), where exec refuses. With
// LockTableOptions::prepared_statements, that text is `EXECUTE name(literals)` of the
// statement prepared once on the caller's connection (libpqxx's prepare, then prepare_now:
// a Parse that runs nothing).
#include <cctype>
#include <pqxx/pqxx>

#include "backends/postgresql/pg_connection.hpp"
#include "backends/postgresql/pg_dialect.hpp"
#include "core/fnv1a.hpp"
#include "dblock/postgresql.hpp"
#include "sql/lock_table_impl.hpp"

namespace dblock {
namespace detail::sqldb {

namespace {

class PgCallerTransaction final : public CallerConnection {
 public:
  PgCallerTransaction(pqxx::transaction_base& tx, bool prepared) : tx_(tx), prepared_(prepared) {}
  Result run(const std::string& sql, const std::vector<Value>& params) override {
    try {
      return to_result(tx_.exec(prepared_ ? execute(prepare(sql), params) : bind(sql, params)));
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
  std::string literal(const Value& v) {
    return std::holds_alternative<std::string>(v) ? tx_.quote(std::get<std::string>(v)) : as_text(v);
  }
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
      out += literal(params.at(n - 1));
    }
    return out;
  }
  // The statement's name on the caller's connection, prepared there unless it is already:
  // dblock_ and the FNV-1a hash of the text, so one name per table and statement.
  std::string prepare(const std::string& sql) {
    const auto name = "dblock_" + fnv1a64_hex(sql);
    auto& conn = tx_.conn();
    conn.prepare(name, sql);  // known to libpqxx already: nothing
    conn.prepare_now(name);   // on the server already: nothing
    return name;
  }
  // EXECUTE name(p1, p2, ...) with the parameters as literals.
  std::string execute(const std::string& name, const std::vector<Value>& params) {
    std::string out = "EXECUTE " + name;
    for (std::size_t i = 0; i < params.size(); ++i) out += (i == 0 ? "(" : ", ") + literal(params[i]);
    return params.empty() ? out : out + ")";
  }
  pqxx::transaction_base& tx_;
  bool prepared_;
};

}  // namespace

template <>
struct CallerTransaction<pqxx::transaction_base> {
  static const Dialect& dialect() { return postgresql_dialect(); }
  static std::unique_ptr<Connection> adapt(pqxx::transaction_base& tx, const LockTableOptions& options) {
    // Each statement of a nontransaction commits on its own: a lock would end with it.
    if (dynamic_cast<pqxx::nontransaction*>(&tx))
      throw UsageError("postgresql: a lock in the caller's transaction needs a transaction (pqxx::work), "
                       "not a pqxx::nontransaction");
    return std::make_unique<PgCallerTransaction>(tx, options.prepared_statements);
  }
};

}  // namespace detail::sqldb

// Exported by the extern declaration in the public header (an attribute here is ignored).
template class LockTable<pqxx::transaction_base>;

}  // namespace dblock
