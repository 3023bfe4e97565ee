// A real PostgreSQL server for tests: Debian's postgresql (15), initialised once per
// machine into a template directory (initdb, ~1.5 s) that each server copies, started
// with pg_ctl on a free loopback port.
// Under ctest one server serves the whole run: the fixture `pg.start` starts it in
// the build's test-shared/pg/ (tests/support/pg_server_main.cc), and `pg.stop` stops it; each test process
// attaches to it and makes its own databases. A test process started by hand, with no
// such server, starts its own and stops it when it exits. Measured on the 2-core VM
// (2026-11-28): a process's own server cost each of the 95 PostgreSQL tests about 1.7 s.
// PostgreSQL refuses to run as root, so as root (CI) its commands run as the `postgres`
// user the Debian package creates (runuser). Nothing is mocked.
// Thread-safety: use from the test's main thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace framemill::testing {

class PgServer {
 public:
  // The run's server (the build's test-shared/pg/) where ctest started one, else the process's own,
  // started on first use; nullptr when it cannot start, with the reason in *why (no
  // PostgreSQL installed, initdb or pg_ctl failed: their log). Never restarted.
  static PgServer* Shared(std::string* why);
  // A server of the caller's own, for a test that restarts it; stopped when destroyed.
  static std::unique_ptr<PgServer> Private(std::string* why);
  // StartDetached starts a server in `dir` and leaves it running; StopDetached stops it
  // and removes the folder (the fixtures pg.start and pg.stop).
  static bool StartDetached(const std::string& dir, std::string* why);
  static bool StopDetached(const std::string& dir, std::string* why);

  // A new empty database (UTF-8 not enforced: SQL_ASCII, as framemill's docs ask, since
  // file names need not be UTF-8). Returns its connection URI.
  std::string CreateDatabase();
  std::string Uri(const std::string& database) const;
  int port() const { return port_; }
  const std::string& data_dir() const { return data_; }

  // pg_ctl restart -m fast: every connection is cut, the server is back when it returns.
  // Refused on the run's shared server: other tests' connections are on it.
  bool Restart(std::string* why);
  // Runs `sql` in `database` as a superuser; false (with the message) on an error.
  bool Exec(const std::string& database, const std::string& sql, std::string* why) const;

  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

 private:
  PgServer() = default;
  // The server's programs and folders for `dir` (its data in dir/data).
  void Place(const std::string& dir);
  // Starts a server in the existing folder `dir`.
  bool Start(const std::string& dir, std::string* why);
  // The server StartDetached left in `dir`, where it answers; it is not stopped on
  // destruction (only this process's databases are dropped).
  bool Attach(const std::string& dir, std::string* why);
  // Runs a PostgreSQL program from its bindir (as `postgres` when we are root).
  int Pg(const std::string& program, const std::string& args, std::string* log) const;

  std::string bindir_, dir_, data_;
  int port_ = 0;
  std::vector<std::string> databases_;  // made by this process
  bool as_postgres_ = false;
  bool owned_ = true;  // stopped and removed on destruction
};

}  // namespace framemill::testing
