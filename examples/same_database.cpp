// Protecting rows in the same database as the lock: the lock and the write commit together.
// lock_in holds the lock for the rest of the service's own transaction and returns a fence the
// write stores; check_in asserts, inside the transaction, that a lease held across
// transactions is still the current holder (here: after it expired and another took it over,
// the late write is refused and rolled back). SQLite here; dblock/postgresql.hpp is the same on
// a pqxx::work.
//
//   same_database PATH      e.g. same_database /tmp/app.db
#include <SQLiteCpp/SQLiteCpp.h>
#include <dblock/dblock.hpp>
#include <dblock/sqlite.hpp>

#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: same_database PATH\n";
    return 64;
  }
  const std::string path = argv[1];
  auto client = dblock::Client::open("sqlite:" + path);  // creates the lock table (migrations)
  SQLite::Database db(path, SQLite::OPEN_READWRITE, 5000);
  db.exec("CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY, state TEXT, fence INTEGER)");
  db.exec("INSERT OR IGNORE INTO invoices VALUES (42, 'new', 0)");
  dblock::sqlite::LockTable locks;  // the table ClientOptions::table names: dblock_locks

  {  // lock, then write, in one transaction
    SQLite::Transaction tx(db);
    auto fence = locks.lock_in(db, "invoice-42");
    SQLite::Statement write(db, "UPDATE invoices SET state = 'sent', fence = ? WHERE id = 42");
    write.bind(1, static_cast<int64_t>(fence));
    write.exec();
    tx.commit();  // the lock ends here
    std::cout << "sent invoice 42 with fence " << fence << "\n";
  }

  // A lease held across transactions, which expires before its holder writes.
  dblock::LockOptions options;
  options.ttl = std::chrono::milliseconds(300);
  options.auto_renew = false;  // as if the holder were paused
  auto late = client->lock("invoice-42", options).acquire();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto other = dblock::Client::open("sqlite:" + path)->lock("invoice-42").try_acquire();
  try {
    SQLite::Transaction tx(db);
    locks.check_in(db, late);  // throws: the lease was taken over
    db.exec("UPDATE invoices SET state = 'stale write' WHERE id = 42");
    tx.commit();
    std::cout << "the stale write went through: a bug\n";
    return 1;
  } catch (const dblock::LockLostError& e) {
    std::cout << "refused a stale write: " << e.what() << "\n";  // the transaction rolled back
  }
  return other ? 0 : 1;
}
