#include "cli/command.h"
#include "base/json_text.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

namespace framemill {
namespace {

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

int CmdExport(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (Status st = CheckStoreExists(*env); !st.ok()) return UsageError(st.message());
  if (f.format != "jsonl" && f.format != "csv")
    return UsageError("--format: expected jsonl or csv, got '" + f.format + "'");
  if (Status st = CheckStageFlag(*env, f.stage); !st.ok()) return UsageError(st.message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!f.output.empty() && f.output != "-") {
    std::error_code ec;
    auto parent = std::filesystem::path(f.output).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    file.open(f.output);
    if (!file) return UsageError("-o: cannot write " + f.output);
    out = &file;
  }
  if (f.format == "csv") *out << "item,stage,device,attempts,result,artifacts\n";
  int64_t n = 0;
  Status s = (*store)->ForEachResult(f.stage, [&](const ExportRow& r) {
    ++n;
    if (f.format == "csv") {
      *out << CsvField(r.source) << ',' << r.stage << ',' << r.device << ',' << r.attempts << ','
           << CsvField(r.result_json) << ',' << CsvField(r.artifacts_json) << '\n';
      return;
    }
    nlohmann::json j;
    SetBytesField(j, "item", r.source);
    j["stage"] = r.stage;
    j["device"] = r.device;
    j["attempts"] = r.attempts;
    j["result"] = nlohmann::json::parse(r.result_json, nullptr, false);
    j["artifacts"] = nlohmann::json::parse(r.artifacts_json, nullptr, false);
    *out << JsonDump(j) << '\n';
  });
  if (!s.ok()) return StoreError(s);
  out->flush();
  if (file.is_open())
    std::fprintf(stderr, "exported %lld result(s) to %s\n", static_cast<long long>(n),
                 f.output.c_str());
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
