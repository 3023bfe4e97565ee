#include "base/option_rows.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace framemill {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

Status Bad(const std::string& where, const std::string& value, const std::string& expected) {
  return Status::InvalidArgument(where + ": invalid value '" + value + "', expected " + expected);
}

Result<double> ParseDouble(const std::string& raw, double lo, double hi, const std::string& where) {
  std::string v = Trim(raw);
  try {
    size_t used = 0;
    double d = std::stod(v, &used);
    if (used == v.size() && d >= lo && d <= hi) return d;
  } catch (...) {
  }
  return Bad(where, raw, "a number from " + std::to_string(lo) + " to " + std::to_string(hi));
}

Result<bool> ParseBool(const std::string& raw, const std::string& where) {
  std::string v = Lower(Trim(raw));
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return Bad(where, raw, "true/false/1/0/yes/no");
}

// 1.5 -> "1.5", 2.0 -> "2": as a user would write it in YAML.
std::string FormatNumber(double d) {
  std::string s = std::to_string(d);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

template <class Int>
OptionRow IntRowOf(std::string key, std::string env, std::string flag,
                   std::vector<Int*> fields, int64_t lo, int64_t hi) {
  OptionRow r{std::move(key), std::move(env), std::move(flag), nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    auto n = ParseIntSetting(v, lo, hi, where);
    if (!n.ok()) return n.status();
    for (Int* f : fields) *f = static_cast<Int>(*n);
    return Status::OK();
  };
  r.get = [f = fields.front()] { return std::to_string(*f); };
  return r;
}

}  // namespace

Result<int64_t> ParseIntSetting(const std::string& raw, int64_t lo, int64_t hi,
                                const std::string& where) {
  std::string v = Trim(raw);
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || out < lo || out > hi)
    return Bad(where, raw, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return out;
}

Result<std::string> ParseChoiceSetting(const std::string& raw,
                                       const std::vector<std::string>& allowed,
                                       const std::map<std::string, std::string>& refused,
                                       const std::string& where) {
  std::string l = Lower(Trim(raw));
  if (auto r = refused.find(l); r != refused.end())
    return Status::InvalidArgument(where + ": '" + raw + "' is not supported: " + r->second);
  if (std::find(allowed.begin(), allowed.end(), l) != allowed.end()) return l;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return Bad(where, raw, "one of " + list);
}

OptionRow IntRow(std::string key, std::string env, std::string flag,
                 std::initializer_list<int64_t*> fields, int64_t lo, int64_t hi) {
  return IntRowOf<int64_t>(std::move(key), std::move(env), std::move(flag), fields, lo, hi);
}

OptionRow IntRow(std::string key, std::string env, std::string flag,
                 std::initializer_list<int*> fields, int64_t lo, int64_t hi) {
  return IntRowOf<int>(std::move(key), std::move(env), std::move(flag), fields, lo, hi);
}

OptionRow IntRow(std::string key, std::string env, std::string flag,
                 std::vector<int64_t*> fields, int64_t lo, int64_t hi) {
  return IntRowOf<int64_t>(std::move(key), std::move(env), std::move(flag), std::move(fields), lo, hi);
}

OptionRow NumberRow(std::string key, std::string env, double* field, double lo, double hi) {
  OptionRow r{std::move(key), std::move(env), "", nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    auto d = ParseDouble(v, lo, hi, where);
    if (!d.ok()) return d.status();
    *field = *d;
    return Status::OK();
  };
  r.get = [=] { return FormatNumber(*field); };
  return r;
}

OptionRow AutoNumberRow(std::string key, std::string env, std::optional<double>* field, double lo,
                        double hi) {
  OptionRow r{std::move(key), std::move(env), "", nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    if (Lower(Trim(v)) == "auto") {
      field->reset();
      return Status::OK();
    }
    auto d = ParseDouble(v, lo, hi, where);
    if (!d.ok()) return Bad(where, v, "auto or a number from " + FormatNumber(lo) + " to " + FormatNumber(hi));
    *field = *d;
    return Status::OK();
  };
  r.get = [=] { return *field ? FormatNumber(**field) : std::string("auto"); };
  return r;
}

OptionRow BoolRow(std::string key, std::string env, bool* field) {
  OptionRow r{std::move(key), std::move(env), "", nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    auto b = ParseBool(v, where);
    if (!b.ok()) return b.status();
    *field = *b;
    return Status::OK();
  };
  r.get = [=] { return std::string(*field ? "true" : "false"); };
  return r;
}

OptionRow TextRow(std::string key, std::string env, std::string flag, std::string* field) {
  OptionRow r{std::move(key), std::move(env), std::move(flag), nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    if (Trim(v).empty()) return Bad(where, v, "a non-empty value");
    *field = Trim(v);
    return Status::OK();
  };
  r.get = [=] { return *field; };
  return r;
}

OptionRow OptionalTextRow(std::string key, std::string env, std::string* field) {
  OptionRow r{std::move(key), std::move(env), "", nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string&) -> Status {
    *field = Trim(v);
    return Status::OK();
  };
  r.get = [=] { return *field; };
  return r;
}

OptionRow ListRow(std::string key, std::string env, std::string flag,
                  std::vector<std::string>* field, const std::string& expected) {
  OptionRow r{std::move(key), std::move(env), std::move(flag), nullptr, nullptr};
  r.set = [=](const std::string& v, const std::string& where) -> Status {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : v + ",") {
      if (ch != ',') {
        cur += ch;
        continue;
      }
      if (!Trim(cur).empty()) out.push_back(Lower(Trim(cur)));
      cur.clear();
    }
    if (out.empty()) return Bad(where, v, expected);
    *field = std::move(out);
    return Status::OK();
  };
  r.get = [=] {
    std::string s;
    for (const auto& x : *field) s += (s.empty() ? "" : ",") + x;
    return s;
  };
  return r;
}

OptionRow TextChoiceRow(std::string key, std::string env, std::string flag, std::string* field,
                        const std::vector<std::string>& allowed,
                        std::map<std::string, std::string> refused) {
  Choices<std::string> names;
  for (const std::string& a : allowed) names.emplace_back(a, a);
  return ChoiceRow(std::move(key), std::move(env), std::move(flag), field, std::move(names),
                   std::move(refused));
}

}  // namespace framemill
