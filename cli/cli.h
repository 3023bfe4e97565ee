// The framemill command line: a table of subcommands (as ninja's kTools[]), each
// parsing its flags into the shared configuration and returning the exit code of
// the contract (../shared/CONTRACT.md).
#pragma once

namespace framemill {

int RunCli(int argc, char** argv);

}  // namespace framemill
