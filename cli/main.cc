#include "cli/cli.h"

int main(int argc, char** argv) { return framemill::RunCli(argc, argv); }
