// The run's PostgreSQL server for ctest (tests/support/pg_server.h): the fixture pg.start
// runs `framemill_test_pg start DIR`, pg.stop runs `framemill_test_pg stop DIR`. Every
// PostgreSQL test attaches to it instead of starting one of its own.
// Exit 0 even when the server cannot start: each test then starts its own server and
// fails, if it must, with the reason (no PostgreSQL installed: its own message).
#include <cstdio>
#include <string>

#include "tests/support/pg_server.h"

int main(int argc, char** argv) {
  const std::string verb = argc == 3 ? argv[1] : "";
  if (verb != "start" && verb != "stop") {
    std::fprintf(stderr, "usage: %s start|stop DIR\n", argv[0]);
    return 2;
  }
  std::string why;
  const bool ok = verb == "start" ? framemill::testing::PgServer::StartDetached(argv[2], &why)
                                  : framemill::testing::PgServer::StopDetached(argv[2], &why);
  std::printf("%s %s: %s\n", verb.c_str(), argv[2], ok ? "done" : why.c_str());
  return 0;
}
