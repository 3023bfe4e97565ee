#include "cli/command.h"

#include <cstdio>

namespace framemill {

int CmdRetry(const Flags& f) {
  auto env = ResolveExisting(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (Status st = CheckStageFlag(*env, f.stage); !st.ok()) return UsageError(st.message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  auto n = (*store)->RetryFailed(f.stage, f.error_class);
  if (!n.ok()) return StoreError(n.status());
  std::printf("re-queued %lld failed job(s)%s%s\n", static_cast<long long>(*n),
              f.stage.empty() ? "" : (" of stage " + f.stage).c_str(),
              f.error_class.empty() ? "" : (" of class " + f.error_class).c_str());
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
