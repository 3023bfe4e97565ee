// A real PostgreSQL server for tests: Debian's postgresql (15), initialised once per
// machine into a template directory (initdb, ~1.5 s) that each test process copies,
// started with pg_ctl on a free loopback port and stopped when the process exits.
// PostgreSQL refuses to run as root, so as root (CI) its commands run as the `postgres`
// user the Debian package creates (runuser). Nothing is mocked.
// Thread-safety: use from the test's main thread.
#pragma once

#include <string>

namespace framemill::testing {

class PgServer {
 public:
  // The process's server, started on first use; nullptr when it cannot start, with the
  // reason in *why (no PostgreSQL installed, initdb or pg_ctl failed: their log).
  static PgServer* Shared(std::string* why);

  // A new empty database (UTF-8 not enforced: SQL_ASCII, as framemill's docs ask, since
  // file names need not be UTF-8). Returns its connection URI.
  std::string CreateDatabase();
  std::string Uri(const std::string& database) const;
  int port() const { return port_; }
  const std::string& data_dir() const { return data_; }

  // pg_ctl restart -m fast: every connection is cut, the server is back when it returns.
  bool Restart(std::string* why);
  // Runs `sql` in `database` as a superuser; false (with the message) on an error.
  bool Exec(const std::string& database, const std::string& sql, std::string* why) const;

  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

 private:
  PgServer() = default;
  bool Start(std::string* why);
  // Runs a PostgreSQL program from its bindir (as `postgres` when we are root).
  int Pg(const std::string& program, const std::string& args, std::string* log) const;

  std::string bindir_, dir_, data_;
  int port_ = 0;
  int next_db_ = 0;
  bool as_postgres_ = false;
};

}  // namespace framemill::testing
