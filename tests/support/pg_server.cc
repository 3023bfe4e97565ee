#include "tests/support/pg_server.h"

#include "tests/support/test_support.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

namespace framemill::testing {
namespace fs = std::filesystem;

namespace {

// The newest installed server's programs (Debian: /usr/lib/postgresql/<major>/bin).
std::string FindBindir() {
  std::string best;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = e.path() / "bin";
    if (fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl") && bin.string() > best)
      best = bin.string();
  }
  return best;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

int PgServer::Pg(const std::string& program, const std::string& args, std::string* log) const {
  const std::string out = dir_ + "/cmd.log";
  std::string cmd = (as_postgres_ ? "runuser -u postgres -- " : "") + bindir_ + "/" + program +
                    " " + args + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (log != nullptr) *log = cmd + ":\n" + ReadFile(out);
  return rc;
}

PgServer* PgServer::Shared(std::string* why) {
  static std::unique_ptr<PgServer> server;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::unique_ptr<PgServer> s(new PgServer());
    std::string not_there;
    if (s->Attach(std::string(FRAMEMILL_TEST_SHARED_DIR) + "/pg", &not_there)) server = std::move(s);
    if (server == nullptr) server = Private(&error);
  }
  if (server == nullptr && why != nullptr) *why = error;
  return server.get();
}

std::unique_ptr<PgServer> PgServer::Private(std::string* why) {
  char tmpl[] = "/tmp/fm-pg-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    *why = "mkdtemp failed";
    return nullptr;
  }
  std::unique_ptr<PgServer> s(new PgServer());
  if (!s->Start(tmpl, why)) return nullptr;
  return s;
}

bool PgServer::StartDetached(const std::string& dir, std::string* why) {
  std::unique_ptr<PgServer> s(new PgServer());
  std::string stale;
  if (s->Attach(dir, &stale)) return true;  // already running (a previous run's, not stopped)
  StopDetached(dir, &stale);
  fs::create_directories(dir);
  if (!s->Start(dir, why)) return false;
  std::ofstream(dir + "/port") << s->port_ << "\n";
  s->owned_ = false;
  return true;
}

bool PgServer::StopDetached(const std::string& dir, std::string* why) {
  PgServer s;
  s.Place(dir);
  s.owned_ = false;
  std::string log;
  if (fs::exists(s.data_ + "/postmaster.pid") &&
      s.Pg("pg_ctl", "-D " + Quote(s.data_) + " -m immediate -w stop", &log) != 0) {
    if (why != nullptr) *why = log;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return !ec;
}

// A server that StartDetached left in `dir`, if it answers there.
bool PgServer::Attach(const std::string& dir, std::string* why) {
  std::ifstream in(dir + "/port");
  int port = 0;
  if (!(in >> port) || port <= 0) {
    *why = "no server in " + dir;
    return false;
  }
  Place(dir);
  port_ = port;
  owned_ = false;
  return Exec("postgres", "SELECT 1", why);
}

void PgServer::Place(const std::string& dir) {
  bindir_ = FindBindir();
  as_postgres_ = ::geteuid() == 0;
  dir_ = dir;
  data_ = dir + "/data";
}

bool PgServer::Start(const std::string& dir, std::string* why) {
  Place(dir);
  if (bindir_.empty()) {
    *why = "no PostgreSQL server installed (/usr/lib/postgresql/*/bin): apt-get install postgresql";
    return false;
  }
  if (as_postgres_ && std::system(("chown postgres " + Quote(dir_)).c_str()) != 0) {
    *why = "cannot chown " + dir_ + " to the postgres user";
    return false;
  }
  // One initdb per machine and server version; each server copies its result.
  const std::string version = fs::path(bindir_).parent_path().filename().string();
  const std::string shared = "/tmp/framemill-pg-template-" + version +
                             (as_postgres_ ? "-postgres" : "-" + std::to_string(::getuid()));
  {
    const int lock = ::open((shared + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    ::flock(lock, LOCK_EX);
    if (!fs::exists(shared + "/PG_VERSION")) {
      std::error_code ec;
      fs::remove_all(shared, ec);
      std::string log;
      const std::string init_dir = dir_ + "/template";
      if (Pg("initdb", "-D " + Quote(init_dir) +
                           " -U framemill --auth=trust -E SQL_ASCII --locale=C --no-sync",
             &log) != 0) {
        ::close(lock);
        *why = log;
        return false;
      }
      std::system(("cp -a " + Quote(init_dir) + " " + Quote(shared)).c_str());
      fs::remove_all(init_dir, ec);
    }
    const int rc = std::system(("cp -a " + Quote(shared) + " " + Quote(data_)).c_str());
    ::close(lock);
    if (rc != 0) {
      *why = "cannot copy " + shared;
      return false;
    }
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = FreePort();
    std::string log;
    // Durability is not what these tests check: no fsync, so a test costs milliseconds.
    const std::string opts = "-p " + std::to_string(port_) + " -k " + dir_ +
                             " -c listen_addresses=127.0.0.1 -c fsync=off"
                             " -c full_page_writes=off -c synchronous_commit=off"
                             " -c max_connections=200";
    if (Pg("pg_ctl", "-D " + Quote(data_) + " -l " + Quote(dir_ + "/server.log") +
                         " -w -t 60 -o " + Quote(opts) + " start",
           &log) == 0)
      return true;
    *why = log + "\n" + ReadFile(dir_ + "/server.log");
  }
  return false;
}

PgServer::~PgServer() {
  if (!owned_) {  // the run's server: leave it as this process found it
    for (const std::string& name : databases_)
      Exec("postgres", "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", nullptr);
    return;
  }
  Pg("pg_ctl", "-D " + Quote(data_) + " -m immediate -w stop", nullptr);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

bool PgServer::Restart(std::string* why) {
  if (!owned_) {
    if (why) *why = "the run's shared server is not restarted: use PgServer::Private()";
    return false;
  }
  std::string log;
  if (Pg("pg_ctl", "-D " + Quote(data_) + " -m fast -w -t 60 restart", &log) == 0) return true;
  if (why) *why = log + "\n" + ReadFile(dir_ + "/server.log");
  return false;
}

std::string PgServer::Uri(const std::string& database) const {
  return "postgresql://framemill@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

bool PgServer::Exec(const std::string& database, const std::string& sql, std::string* why) const {
  PGconn* c = PQconnectdb(("host=127.0.0.1 port=" + std::to_string(port_) +
                           " user=framemill dbname=" + database).c_str());
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (ok) {
    PGresult* r = PQexec(c, sql.c_str());
    ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
  }
  if (!ok && why != nullptr) *why = PQerrorMessage(c);
  PQfinish(c);
  return ok;
}

std::string PgServer::CreateDatabase() {
  // Unique on a server that many processes share over a run, pids reused or not.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string name = "fm_" + std::to_string(::getpid()) + "_" +
                           std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) +
                           "_" + std::to_string(databases_.size());
  std::string why;
  if (!Exec("postgres", "CREATE DATABASE " + name, &why))
    throw std::runtime_error("CREATE DATABASE " + name + ": " + why);
  databases_.push_back(name);
  return Uri(name);
}

}  // namespace framemill::testing
