#include "backends/postgresql/pg_session.hpp"

#include <pqxx/pqxx>

namespace dblock::detail::sql {

// Every libpqxx error becomes a dblock error here, and nowhere else.
void throw_pg_error(const std::exception& e, const std::string& where, bool* usable) {
  auto gone = [&] {
    if (usable) *usable = false;
  };
  std::string msg = e.what();
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  for (auto& c : msg)
    if (c == '\n') c = ' ';
  if (dynamic_cast<const pqxx::broken_connection*>(&e) || dynamic_cast<const pqxx::in_doubt_error*>(&e)) {
    gone();
    throw UnavailableError("postgresql at " + where + ": " + msg);
  }
  if (auto* se = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const std::string& state = se->sqlstate();
    auto cls = state.substr(0, 2);
    if (state == "42P01" || state == "3F000")
      throw SchemaError("postgresql at " + where + ": " + msg + " (run `dblock migrate` with the same --table)");
    if (state == "57014" || state == "55P03" || cls == "40")
      throw TimeoutError("postgresql at " + where + ": " + msg);
    if (cls == "08" || cls == "28" || cls == "53" || cls == "57") {
      gone();
      throw UnavailableError("postgresql at " + where + ": " + msg);
    }
    if (state == "42501") throw UnavailableError("postgresql at " + where + ": " + msg);
    throw InternalError("postgresql at " + where + ": " + msg + " [SQLSTATE " + state + "]");
  }
  throw InternalError("postgresql at " + where + ": " + msg);
}

struct PgSession::Connection {
  explicit Connection(const std::string& conninfo) : c(conninfo) {}
  pqxx::connection c;
};

PgSession::PgSession(const std::string& conninfo, const std::string& where, std::chrono::milliseconds statement_timeout)
    : where_(where) {
  try {
    owned_ = std::make_unique<Connection>(conninfo);
    conn_ = &owned_->c;
    pqxx::nontransaction tx(*conn_);
    // No statement may hang on a dead or stuck server (the contract's bounded waits).
    tx.exec("SET statement_timeout = " + std::to_string(statement_timeout.count()));
  } catch (const std::exception& e) {
    throw_pg_error(e, where_, &usable_);
  }
}

PgSession::~PgSession() {
  tx_.reset();
}

void PgSession::fail(const std::exception& e) { throw_pg_error(e, where_, &usable_); }

bool PgSession::usable() const noexcept { return usable_ && conn_ && conn_->is_open(); }

bool PgSession::still_connected() noexcept {
  if (!usable()) return false;
  try {
    conn_->get_notifs();  // PQconsumeInput: reads what is there (EOF too) without blocking
  } catch (...) {
    usable_ = false;
  }
  return usable();
}

pqxx::connection_base& PgSession::connection() { return *conn_; }

Result PgSession::run(const std::string& sql, const std::vector<Value>& params) {
  try {
    auto& name = prepared_[sql];
    if (name.empty()) {
      name = "dblock_" + std::to_string(prepared_.size());
      conn_->prepare(name, sql);
    }
    std::vector<std::string> text;  // libpq takes parameters as text; dblock binds no NULLs
    text.reserve(params.size());
    for (const auto& v : params) text.push_back(as_text(v));
    auto exec = [&](pqxx::transaction_base& tx) {
      return tx.exec_prepared(name, pqxx::prepare::make_dynamic_params(text));
    };
    pqxx::result r;
    if (tx_) r = exec(*tx_);
    else {
      pqxx::nontransaction tx(*conn_);
      r = exec(tx);
    }
    Result out;
    out.affected = static_cast<std::int64_t>(r.affected_rows());
    constexpr pqxx::oid int8 = 20, int2 = 21, int4 = 23;
    for (const auto& row : r) {
      Row values;
      for (pqxx::row::size_type c = 0; c < row.size(); ++c) {
        const auto& f = row[c];
        auto type = r.column_type(c);
        if (f.is_null()) values.emplace_back(nullptr);
        else if (type == int8 || type == int2 || type == int4) values.emplace_back(f.as<std::int64_t>());
        else values.emplace_back(f.as<std::string>());
      }
      out.rows.push_back(std::move(values));
    }
    return out;
  } catch (const std::exception& e) {
    fail(e);
  }
}

void PgSession::run_script(const std::string& sql) {
  try {
    if (tx_) tx_->exec(sql);
    else pqxx::nontransaction(*conn_).exec(sql);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void PgSession::begin() {
  try {
    tx_ = std::make_unique<pqxx::work>(*conn_);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void PgSession::commit() {
  try {
    tx_->commit();
    tx_.reset();
  } catch (const std::exception& e) {
    tx_.reset();
    fail(e);
  }
}

void PgSession::rollback() noexcept {
  try {
    if (tx_) tx_->abort();
  } catch (...) {
  }
  tx_.reset();
}

}  // namespace dblock::detail::sql
