#include "engine/cuda/cuda_status.h"

#include <string>

namespace framemill {

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

Status FromCuda(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::OK();
  // Reset the last-error slot (a no-op for sticky errors, which stay).
  (void)cudaGetLastError();
  std::string msg(what);
  msg += ": ";
  msg += cudaGetErrorName(err);
  msg += ": ";
  msg += cudaGetErrorString(err);
  switch (err) {
    case cudaErrorMemoryAllocation:
      return Status::OutOfMemory(msg);
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNotSupported:
      return Status::Unsupported(msg);
    default:
      break;
  }
  if (IsStickyCudaError(err)) msg += " (sticky: the CUDA context is unusable until the process exits)";
  return Status::Internal(msg);
}

}  // namespace framemill
