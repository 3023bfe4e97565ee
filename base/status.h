// Errors as values, after leveldb's Status. A Status is cheap to copy when OK
// (no allocation) and carries a code plus a message otherwise.
// Thread-safety: immutable values; safe to share read-only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace framemill {

class Status {
 public:
  // Persisted nowhere as integers; names are what the store records.
  enum class Code {
    kOk = 0,
    kNotFound,
    kBusy,
    kOutOfMemory,
    kInvalidArgument,
    kCorruption,
    kUnsupported,
    kIOError,
    kTooLarge,
    kAborted,  // lost a lease or was told to stop; the work is not ours to finish
    kInternal,
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status NotFound(std::string_view m) { return Status(Code::kNotFound, m); }
  static Status Busy(std::string_view m) { return Status(Code::kBusy, m); }
  static Status OutOfMemory(std::string_view m) { return Status(Code::kOutOfMemory, m); }
  static Status InvalidArgument(std::string_view m) { return Status(Code::kInvalidArgument, m); }
  static Status Corruption(std::string_view m) { return Status(Code::kCorruption, m); }
  static Status Unsupported(std::string_view m) { return Status(Code::kUnsupported, m); }
  static Status IOError(std::string_view m) { return Status(Code::kIOError, m); }
  static Status TooLarge(std::string_view m) { return Status(Code::kTooLarge, m); }
  static Status Aborted(std::string_view m) { return Status(Code::kAborted, m); }
  static Status Internal(std::string_view m) { return Status(Code::kInternal, m); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  bool IsOutOfMemory() const { return code_ == Code::kOutOfMemory; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsAborted() const { return code_ == Code::kAborted; }

  // Transient failures are worth another attempt after backoff (a lost worker,
  // Aborted, included); the rest (undecodable, unsupported, too large, missing)
  // would fail the same way again.
  bool IsTransient() const {
    return code_ == Code::kBusy || code_ == Code::kOutOfMemory || code_ == Code::kIOError ||
           code_ == Code::kInternal || code_ == Code::kAborted;
  }

  // Short stable name used as the error class in the store and in `status`.
  std::string_view CodeName() const;
  std::string ToString() const;

 private:
  Status(Code c, std::string_view m) : code_(c), message_(m) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}             // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}      // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace framemill

#define FM_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::framemill::Status _st = (expr);     \
    if (!_st.ok()) return _st;            \
  } while (0)
