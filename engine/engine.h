// Runs an fmg graph (engine/graph.h) on a Kernels implementation: weights uploaded
// once at Load, one arena per batch size (allocated on the first Run of that size and
// kept until a different size comes), outputs returned as fp32 host tensors.
// Thread-safety: one thread at a time (the Kernels it owns are single-threaded).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/graph.h"
#include "engine/kernels.h"
#include "engine/plan.h"
#include "engine/tensor.h"

namespace framemill::engine {

struct EngineOptions {
  StorageType storage = StorageType::kFloat32;
};

class Engine {
 public:
  // Loads the graph (an fmg json, or an ONNX file: engine/onnx_import.h), plans batch 1
  // (so an unsupported op fails here) and uploads the weights. Errors from the Kernels
  // (an allocation the device refuses) come back as the Kernels returned them.
  static Result<std::unique_ptr<Engine>> Load(const std::string& fmg_path,
                                               std::unique_ptr<Kernels> kernels,
                                               EngineOptions options = {});
  // The same for a graph already in memory (a user's graph with its integer inputs bound as
  // constants: `framemill infer --inputs`). It plans the graph's natural batch
  // (NaturalBatch, plan.h).
  static Result<std::unique_ptr<Engine>> FromGraph(Graph graph, std::unique_ptr<Kernels> kernels,
                                                   EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Device bytes a batch of `batch` needs: weights + arena + scratch, exactly what Run
  // allocates. -1 when the graph cannot be planned at that batch.
  int64_t PlanBytes(int batch);
  // The plan for `batch` (cached).
  Result<const Plan*> PlanFor(int batch);

  // input: NCHW, fp32 or fp16, batch = shape[0] (a scalar: the graph's natural batch).
  // Returns every graph output by name, fp32, in the shape the plan gives it. For a graph of
  // one input.
  Result<std::map<std::string, Tensor>> Run(const Tensor& input);
  // A graph of several inputs: one tensor per input of the plan, in the graph's order
  // (InputNames()), all of one batch.
  Result<std::map<std::string, Tensor>> Run(const std::vector<const Tensor*>& inputs);
  // The inputs Run takes, in order (those no output depends on are left out).
  std::vector<std::string> InputNames();

  // For benchmarks: while set, each Run adds every step's wall time in ms, after the
  // Kernels' Sync, to (*ms)[its index in the plan] (resized to the plan's steps).
  void ProfileSteps(std::vector<double>* ms) { step_ms_ = ms; }

  // What the kernels did beyond running a step as asked (Kernels::LastStepNote), gathered on
  // each plan's first run: the step ("node (op)") and its note, in the plan's order.
  const std::vector<std::pair<std::string, StepNote>>& Notes() const { return notes_; }

  const Graph& graph() const { return graph_; }
  Kernels& kernels() { return *kernels_; }
  StorageType storage() const { return options_.storage; }

 private:
  Engine() = default;
  Status UploadWeights(const Plan& plan);
  // The activation arena, sized for `plan`'s batch (kept while the batch stays).
  Status EnsureArena(const Plan& plan, int batch);
  // Where buffer b of `plan` lives on the device (null for -1).
  void* Where(const Plan& plan, int b) const;
  // An input, converted on the host to the storage type, into its buffer.
  Status UploadInput(const Plan& plan, const PlanInput& in, const Tensor& input);
  // One step: its kernel with its buffers.
  Status RunStep(const Plan& plan, const Step& s);
  // The graph's outputs, as float32 tensors.
  Result<std::map<std::string, Tensor>> DownloadOutputs(const Plan& plan);

  Graph graph_;
  std::unique_ptr<Kernels> kernels_;
  EngineOptions options_;
  std::map<int, std::unique_ptr<Plan>> plans_;
  void* weights_ = nullptr;
  int64_t weight_bytes_ = 0;
  void* arena_ = nullptr;
  int arena_batch_ = 0;
  bool weights_uploaded_ = false;  // then plans drop their host copy of the weights
  std::vector<double>* step_ms_ = nullptr;
  std::set<int> noted_batches_;  // plans whose first run gathered its notes
  std::vector<std::pair<std::string, StepNote>> notes_;
};

}  // namespace framemill::engine
