#include "configs/config.h"

#include <yaml-cpp/yaml.h>

extern char** environ;

namespace framemill {
namespace {

// Flattens a YAML mapping into dotted keys. Sequences become comma-joined lists.
Status Flatten(const YAML::Node& node, const std::string& prefix,
               std::map<std::string, std::string>* out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = prefix.empty() ? it->first.as<std::string>()
                                     : prefix + "." + it->first.as<std::string>();
    const YAML::Node& v = it->second;
    if (v.IsMap()) {
      FM_RETURN_IF_ERROR(Flatten(v, key, out));
    } else if (v.IsSequence()) {
      std::string joined;
      for (const auto& e : v) joined += (joined.empty() ? "" : ",") + e.as<std::string>();
      (*out)[key] = joined;
    } else if (!v.IsNull()) {  // "key:" with no value keeps the default
      (*out)[key] = v.as<std::string>();
    }
  }
  return Status::OK();
}

// The file's settings by dotted key; `file` is the one --config or FRAMEMILL_CONFIG names.
Result<std::map<std::string, std::string>> ReadFile(const std::string& file,
                                                    const std::string& named_by) {
  std::map<std::string, std::string> yaml;
  try {
    YAML::Node root = YAML::LoadFile(file);
    if (root.IsMap()) {
      FM_RETURN_IF_ERROR(Flatten(root, "", &yaml));
    } else if (!root.IsNull()) {
      return Status::InvalidArgument(file + " (" + named_by +
                                     "): the top level must be a mapping of settings");
    }
  } catch (const YAML::BadFile&) {
    return Status::InvalidArgument(file + " (" + named_by + "): cannot read the config file");
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(file + " (" + named_by + "): invalid YAML: " + e.what());
  }
  return yaml;
}

// One row's value, in rising precedence; its provenance.
Result<Provenance> ResolveRow(const OptionRow& row, const std::map<std::string, std::string>& yaml,
                              const std::string& file, const ConfigInputs& in) {
  std::string from = "default";
  if (auto y = yaml.find(row.key); y != yaml.end()) {
    FM_RETURN_IF_ERROR(row.set(y->second, "key " + row.key + " in " + file));
    from = "config " + file;
  }
  if (!row.env.empty()) {
    if (auto e = in.env.find(row.env); e != in.env.end()) {
      FM_RETURN_IF_ERROR(row.set(e->second, "environment variable " + row.env));
      from = "env " + row.env;
    }
  }
  if (auto f = in.flags.find(row.key); f != in.flags.end()) {
    FM_RETURN_IF_ERROR(row.set(f->second, "flag " + (row.flag.empty() ? row.key : row.flag)));
    from = "flag " + row.flag;
  }
  return Provenance{row.key, row.get(), from, row.env, row.flag};
}

}  // namespace

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string DefaultModelsDir(const std::map<std::string, std::string>& env) {
  auto xdg = env.find("XDG_CACHE_HOME");
  if (xdg != env.end() && !xdg->second.empty() && xdg->second[0] == '/')
    return xdg->second + "/framemill/models";
  auto home = env.find("HOME");
  if (home != env.end() && !home->second.empty()) return home->second + "/.cache/framemill/models";
  return "./framemill-models";
}

Result<Resolved> ResolveRows(const OptionRows& rows, const ConfigInputs& in) {
  Resolved out;
  // The file: --config beats FRAMEMILL_CONFIG.
  std::string file = in.config_file_flag;
  std::string named_by = "flag --config";
  if (auto it = in.env.find("FRAMEMILL_CONFIG"); file.empty() && it != in.env.end()) {
    file = it->second;
    named_by = "env FRAMEMILL_CONFIG";
  }
  std::map<std::string, std::string> yaml;
  if (!file.empty()) {
    out.config_file = file;
    auto read = ReadFile(file, named_by);
    if (!read.ok()) return read.status();
    yaml = std::move(read).value();
  }
  for (const auto& [key, value] : yaml) {
    bool known = false;
    for (const OptionRow& r : rows) known |= r.key == key;
    if (!known)
      return Status::InvalidArgument(file + ": unknown key '" + key +
                                     "' (see configs/default.yaml for every setting)");
  }
  for (const OptionRow& r : rows) {
    auto p = ResolveRow(r, yaml, file, in);
    if (!p.ok()) return p.status();
    out.provenance.push_back(std::move(p).value());
  }
  return out;
}

}  // namespace framemill
