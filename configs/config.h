// Resolving framemill's settings, once at start-up: each module declares the rows that bind
// its settings to the fields of its own options struct (base/option_rows.h; the defaults
// are those fields' initial values), the CLI gathers them into one table (cli/settings.cc),
// and ResolveRows applies, in rising precedence, the YAML file < the environment < the
// command-line flags, recording where each value came from. Nothing outside configs/ reads
// the environment or YAML. Pure apart from reading the file; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/option_rows.h"
#include "base/status.h"

namespace framemill {

struct ConfigInputs {
  std::map<std::string, std::string> env;    // variable -> value (the process's environment)
  std::map<std::string, std::string> flags;  // setting key -> value, only flags the user gave
  std::string config_file_flag;              // --config, overrides FRAMEMILL_CONFIG
};

// Where an effective value came from: "default", "config FILE", "env VAR" or "flag --F".
struct Provenance {
  std::string key, value, source, env, flag;
};

struct Resolved {
  std::string config_file;  // empty: none
  std::vector<Provenance> provenance;  // one per row, in table order
};

// Sets every row's field from the file (--config, else FRAMEMILL_CONFIG), the environment
// and the flags. Errors are InvalidArgument and name the offending variable, key (with the
// file) or flag, and what is accepted; an unknown key in the file is one.
Result<Resolved> ResolveRows(const OptionRows& rows, const ConfigInputs& inputs);

// The process's environment as a map: the only place framemill reads it.
std::map<std::string, std::string> ProcessEnvironment();

// Models are large and the same for every dataset: fetched once per user, as the XDG base
// directory convention places caches ($XDG_CACHE_HOME/framemill/models, else
// ~/.cache/framemill/models).
std::string DefaultModelsDir(const std::map<std::string, std::string>& env);

}  // namespace framemill
