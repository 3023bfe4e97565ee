#include "models/user_network.h"

#include "engine/dnnl/dnnl_kernels.h"

namespace framemill::models {

UserNetwork::UserNetwork(std::unique_ptr<engine::Engine> e)
    : engine_(std::move(e)), inputs_(engine_->InputNames()) {}

Result<std::unique_ptr<UserNetwork>> UserNetwork::Open(const std::string& onnx_path) {
  auto e = engine::Engine::Load(onnx_path, engine::MakeDnnlKernels());
  if (!e.ok()) return e.status();
  return std::unique_ptr<UserNetwork>(new UserNetwork(std::move(e).value()));
}

Result<std::map<std::string, gpu::Tensor>> UserNetwork::Run(const std::map<std::string, gpu::Tensor>& inputs) {
  std::vector<const gpu::Tensor*> ordered;
  for (const std::string& name : inputs_) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      std::string names;
      for (const std::string& n : inputs_) names += (names.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("the network takes the inputs " + names + "; '" + name + "' is not given");
    }
    ordered.push_back(&it->second);
  }
  return engine_->Run(ordered);
}

}  // namespace framemill::models
