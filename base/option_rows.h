// Rows that bind a setting (its YAML key, environment variable and flag) to a field of the
// options struct of the module it configures, as RocksDB's OptionTypeInfo does. Each module
// declares the rows of its own struct next to it (Add*Rows), so a default is written once,
// in that struct; configs/ resolves a table of rows (flag > environment > YAML > default)
// and records where each value came from. A row holds pointers into the struct it was made
// for: the struct must outlive it. Parsing is strict: a bad value is InvalidArgument naming
// `where` (the variable, key or flag) and what is accepted.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace framemill {

struct OptionRow {
  std::string key;   // YAML path, dotted
  std::string env;   // environment variable, or ""
  std::string flag;  // command-line flag, or ""
  std::function<Status(const std::string& value, const std::string& where)> set;
  std::function<std::string()> get;  // the value as a user would write it
};
using OptionRows = std::vector<OptionRow>;

// An integer within [lo, hi], written to every field given (one setting can feed several
// modules' fields: media.max_image_pixels limits each stage that decodes images).
OptionRow IntRow(std::string key, std::string env, std::string flag,
                 std::initializer_list<int64_t*> fields, int64_t lo, int64_t hi);
OptionRow IntRow(std::string key, std::string env, std::string flag,
                 std::initializer_list<int*> fields, int64_t lo, int64_t hi);
OptionRow IntRow(std::string key, std::string env, std::string flag,
                 std::vector<int64_t*> fields, int64_t lo, int64_t hi);
OptionRow NumberRow(std::string key, std::string env, double* field, double lo, double hi);
// A number within [lo, hi], or `auto` (the field left empty): its consumer then chooses.
OptionRow AutoNumberRow(std::string key, std::string env, std::optional<double>* field, double lo,
                        double hi);
OptionRow BoolRow(std::string key, std::string env, bool* field);
// Non-empty text (trimmed).
OptionRow TextRow(std::string key, std::string env, std::string flag, std::string* field);
// Text that may be empty: the setting then does nothing.
OptionRow OptionalTextRow(std::string key, std::string env, std::string* field);
// A comma-separated list (YAML: a sequence), lower-cased, at least one entry.
OptionRow ListRow(std::string key, std::string env, std::string flag,
                  std::vector<std::string>* field, const std::string& expected);
// One of `names` (case-insensitive), stored as the value it maps to; `refused` names
// values that are understood but not supported, with the reason. A value several names
// map to prints as the first of them.
template <class T>
using Choices = std::vector<std::pair<std::string, T>>;
template <class T>
OptionRow ChoiceRow(std::string key, std::string env, std::string flag, T* field,
                    Choices<T> names, std::map<std::string, std::string> refused = {});
// Text that must be one of `allowed`, stored as written (lower-cased).
OptionRow TextChoiceRow(std::string key, std::string env, std::string flag, std::string* field,
                        const std::vector<std::string>& allowed,
                        std::map<std::string, std::string> refused = {});

// The parsers behind the rows, for settings that need a row of their own.
Result<int64_t> ParseIntSetting(const std::string& raw, int64_t lo, int64_t hi,
                                const std::string& where);
Result<std::string> ParseChoiceSetting(const std::string& raw,
                                       const std::vector<std::string>& allowed,
                                       const std::map<std::string, std::string>& refused,
                                       const std::string& where);

template <class T>
Result<T> ParseChoice(const std::string& raw, const Choices<T>& names,
                      const std::map<std::string, std::string>& refused, const std::string& where) {
  std::vector<std::string> allowed;
  for (const auto& n : names) allowed.push_back(n.first);
  auto name = ParseChoiceSetting(raw, allowed, refused, where);
  if (!name.ok()) return name.status();
  for (const auto& [n, value] : names)
    if (n == *name) return value;
  return Status::Internal("unreachable");
}

template <class T>
std::string ChoiceName(const T& value, const Choices<T>& names) {
  for (const auto& [n, v] : names)
    if (v == value) return n;
  return "?";
}

template <class T>
OptionRow ChoiceRow(std::string key, std::string env, std::string flag, T* field,
                    Choices<T> names, std::map<std::string, std::string> refused) {
  OptionRow r{std::move(key), std::move(env), std::move(flag), nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    auto value = ParseChoice(v, names, refused, where);
    if (!value.ok()) return value.status();
    *field = *value;
    return Status::OK();
  };
  r.get = [=] { return ChoiceName(*field, names); };
  return r;
}

}  // namespace framemill
