#include "jobs/failure.h"

#include <exception>
#include <new>
#include <string>

namespace framemill {

Status ThrownStatus(std::string_view where) {
  const std::string at(where);
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(at + ": out of host memory");
  } catch (const std::exception& e) {
    return Status::Internal(at + ": " + e.what());
  } catch (...) {
    return Status::Internal(at + ": an exception that is not a std::exception");
  }
}

Outcome FailedByThrow(std::string_view where) { return Outcome::Failed(ThrownStatus(where)); }

}  // namespace framemill
