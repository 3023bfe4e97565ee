#include "base/status.h"

namespace framemill {

std::string_view Status::CodeName() const {
  switch (code_) {
    case Code::kOk: return "ok";
    case Code::kNotFound: return "not_found";
    case Code::kBusy: return "busy";
    case Code::kOutOfMemory: return "out_of_memory";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kCorruption: return "corrupt_input";
    case Code::kUnsupported: return "unsupported_media";
    case Code::kIOError: return "io_error";
    case Code::kTooLarge: return "too_large";
    case Code::kAborted: return "aborted";
    case Code::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(CodeName());
  s += ": ";
  s += message_;
  return s;
}

}  // namespace framemill
