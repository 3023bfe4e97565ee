// deploy/slurm/framemill.sbatch on a real Slurm (issue 41): Debian's slurm-wlm and munge,
// one controller and one node on this machine, started and stopped by the test. A 4-task
// array runs framemill against a real PostgreSQL server over real photos; a running task is
// killed mid-run (scancel -s KILL, as a preemption that gives no warning); a resubmission
// finishes what its leases held; every job is done, each exactly once.
// Where the daemons cannot start, the test fails with their logs: it never skips.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/model_test_support.h"
#include "tests/support/pg_server.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

std::string ShortHostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

// munged, slurmctld and slurmd in `dir`, on free ports; stopped (SIGTERM, then SIGKILL)
// with the test.
class SlurmCluster {
 public:
  explicit SlurmCluster(std::string dir) : dir_(std::move(dir)) {}
  ~SlurmCluster() {
    for (pid_t pid : pids_) kill(pid, SIGTERM);
    WaitUntilGone(pids_, 10);
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) WaitProcess(pid);
  }

  bool Start(std::string* why) {
    fs::create_directories(dir_ + "/state");
    fs::create_directories(dir_ + "/spool");
    std::string key(1024, '\0');
    std::mt19937 rng(std::random_device{}());
    for (char& c : key) c = static_cast<char>(rng());
    WriteFile(dir_ + "/munge.key", key);
    fs::permissions(dir_ + "/munge.key", fs::perms::owner_read | fs::perms::owner_write);
    // munged refuses a socket directory others cannot search; -f: run as root all the same.
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    Daemon({"/usr/sbin/munged", "-F", "-f", "-S", dir_ + "/munge.socket", "--key-file=" + dir_ + "/munge.key",
            "--log-file=" + dir_ + "/munged.log", "--pid-file=" + dir_ + "/munged.pid",
            "--seed-file=" + dir_ + "/munged.seed"}, "munged.out");
    if (!WaitUntil([&] { return fs::exists(dir_ + "/munge.socket"); }, 20))
      return Fail("munged did not start", {"munged.out"}, why);
    WriteFile(conf(), Config());
    Daemon({"/usr/sbin/slurmctld", "-D", "-i", "-f", conf()}, "slurmctld.out");
    Daemon({"/usr/sbin/slurmd", "-D", "-f", conf(), "-N", host_}, "slurmd.out");
    if (!WaitUntil([&] { return Sinfo().find("idle") != std::string::npos; }, 60))
      return Fail("the node did not come up idle: sinfo says '" + Sinfo() + "'",
                  {"slurmctld.out", "slurmctld.log", "slurmd.out", "slurmd.log"}, why);
    return true;
  }

  std::string conf() const { return dir_ + "/slurm.conf"; }
  std::map<std::string, std::string> Env() const { return {{"SLURM_CONF", conf()}}; }

  std::string Sinfo() const {
    return RunProcess({"/usr/bin/sinfo", "-h", "-o", "%T"}, Env()).out;
  }

 private:
  std::string Config() {
    std::ostringstream c;
    c << "ClusterName=fmtest\nSlurmctldHost=" << host_ << "(127.0.0.1)\n"
      << "SlurmctldPort=" << FreePort() << "\nSlurmdPort=" << FreePort() << "\n"
      << "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
      << "AuthInfo=socket=" << dir_ << "/munge.socket\n"
      << "StateSaveLocation=" << dir_ << "/state\nSlurmdSpoolDir=" << dir_ << "/spool\n"
      << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\nSlurmdPidFile=" << dir_ << "/slurmd.pid\n"
      << "SlurmctldLogFile=" << dir_ << "/slurmctld.log\nSlurmdLogFile=" << dir_ << "/slurmd.log\n"
      // No cgroups in a container: processes are tracked by parentage.
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
      << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
      << "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      // 4 one-CPU tasks on a machine of 2 cores: the node is told it has 4.
      << "SlurmdParameters=config_overrides\nReturnToService=2\nMpiDefault=none\nKillWait=5\n"
      << "NodeName=" << host_ << " NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n"
      << "PartitionName=debug Nodes=" << host_ << " Default=YES MaxTime=INFINITE State=UP\n";
    return c.str();
  }

  void Daemon(const std::vector<std::string>& argv, const std::string& log) {
    pids_.push_back(StartProcess(argv, {{"SLURM_CONF", conf()}}, dir_, dir_ + "/" + log));
  }

  bool Fail(const std::string& what, const std::vector<std::string>& logs, std::string* why) {
    *why = what;
    for (const auto& l : logs)
      if (fs::exists(dir_ + "/" + l)) *why += "\n--- " + l + ":\n" + ReadFile(dir_ + "/" + l);
    return false;
  }

  std::string dir_;
  std::string host_ = ShortHostname();
  std::vector<pid_t> pids_;
};

// The array's tasks still queued or running.
int TasksLeft(const SlurmCluster& slurm, const std::string& job) {
  auto q = RunProcess({"/usr/bin/squeue", "-h", "-r", "-j", job, "-o", "%i"}, slurm.Env());
  int n = 0;
  std::istringstream in(q.out);
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

TEST(SlurmTest, AnArrayOverPostgresLosesNothingWhenATaskIsKilledAndTheArrayIsResubmitted) {
  FM_REQUIRE_MODEL("centernet");
  std::string why;
  PgServer* pg = PgServer::Shared(&why);
  ASSERT_NE(pg, nullptr) << why;
  TempDir dir;
  SlurmCluster slurm(dir / "slurm");
  ASSERT_TRUE(slurm.Start(&why)) << why;

  const int kPhotos = 40;
  std::map<std::string, std::string> env = slurm.Env();
  env.insert({{"FRAMEMILL_DB", pg->CreateDatabase()}, {"FRAMEMILL_OUT", dir / "out"},
              {"FRAMEMILL_MODELS", ModelsDir()}, {"FRAMEMILL_BIN", FRAMEMILL_BIN},
              {"FRAMEMILL_STAGES", "lighting,categorize"}, {"FRAMEMILL_BATCH", "2"},
              // A killed task's leases come back after 3 s, not 30.
              {"FRAMEMILL_LEASE_MS", "3000"}});
  auto done = [&] {
    auto s = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
    if (s.exit_code != 0) {
      std::printf("[slurm] status: exit %d: %s\n", s.exit_code, s.err.c_str());
      return -1;
    }
    const nlohmann::json j = nlohmann::json::parse(s.out);  // not a temporary the loop outlives
    int n = 0;
    for (const auto& st : j["stages"]) n += st["done"].get<int>();
    return n;
  };
  const std::string script = std::string(FRAMEMILL_SOURCE_DIR) + "/deploy/slurm/framemill.sbatch";
  auto submit = [&](const std::string& array) {
    auto r = RunProcess({"/usr/bin/sbatch", "--parsable", "--array=" + array, "--cpus-per-task=1",
                         "--output=" + (dir / "task-%A_%a.log"), script}, env, dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find_first_of(";\n"));
  };
  // A running task dies without warning once work is under way. squeue's running task may
  // end before scancel reaches it (under ctest -j2 task 1, once task 3, had): then another.
  // On a loaded machine the whole array may end between two looks (once under ctest -j2,
  // its 80 jobs took 11 s): then 40 more photos and a new array, up to three times.
  std::string first, victim, refused;
  int at_kill = 0, photos = 0;
  for (int attempt = 0; attempt < 3 && victim.empty(); ++attempt) {
    const std::string media = dir / ("media-" + std::to_string(attempt));
    MakeRealImages(media, kPhotos, 640);
    ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
    const int before = 2 * photos;
    photos += kPhotos;
    first = submit("0-3");
    ASSERT_FALSE(first.empty());
    ASSERT_TRUE(WaitUntil([&] {
      if (TasksLeft(slurm, first) == 0) return true;  // ended with nobody killed: try again
      auto q = RunProcess({"/usr/bin/squeue", "-h", "-r", "-j", first, "-t", "RUNNING", "-o", "%i"}, slurm.Env());
      const std::string running = q.out.substr(0, q.out.find('\n'));
      if (running.empty() || (at_kill = done()) <= before) return false;
      auto cancel = RunProcess({"/usr/bin/scancel", "-s", "KILL", running}, slurm.Env());
      if (cancel.exit_code != 0) refused += running + ": " + cancel.err;
      if (cancel.exit_code == 0) victim = running;
      return cancel.exit_code == 0;
    }, 120)) << refused << ReadFile(dir / ("task-" + first + "_0.log"));
    ASSERT_TRUE(WaitUntil([&] { return TasksLeft(slurm, first) == 0; }, 300)) << "the array did not end";
    if (victim.empty()) std::printf("[slurm] array %s ended before a task could be killed\n", first.c_str());
  }
  ASSERT_FALSE(victim.empty()) << "three arrays ended before a task could be killed";
  const int after_first = done();
  std::printf("[slurm] array %s: %d of %d jobs done when task %s was killed, %d when the array ended\n",
              first.c_str(), at_kill, 2 * photos, victim.c_str(), after_first);
  EXPECT_LT(at_kill, 2 * photos) << "the kill came too late to matter";

  // Resume: the same submission again.
  const std::string second = submit("0-1");
  ASSERT_TRUE(WaitUntil([&] { return TasksLeft(slurm, second) == 0; }, 300)) << "the resubmission did not end";
  for (const char* t : {"_0", "_1"}) {
    const std::string log = ReadFile(dir / ("task-" + second + t + ".log"));
    EXPECT_NE(log.find("framemill task"), std::string::npos) << log;
  }
  EXPECT_EQ(done(), 2 * photos);
  // Each job once: one result per (item, stage), none failed.
  auto out = RunProcess({FRAMEMILL_BIN, "export", "--format", "jsonl"}, env, dir.path());
  ASSERT_EQ(out.exit_code, 0) << out.err;
  std::set<std::string> seen;
  int rows = 0;
  std::istringstream in(out.out);
  for (std::string line; std::getline(in, line); ++rows) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(seen.insert(j["item"].get<std::string>() + "|" + j["stage"].get<std::string>()).second) << line;
  }
  EXPECT_EQ(rows, 2 * photos);
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
  const nlohmann::json final_status = nlohmann::json::parse(status.out);
  for (const auto& st : final_status["stages"]) EXPECT_EQ(st["failed"], 0) << st;
}

}  // namespace
}  // namespace framemill::testing
