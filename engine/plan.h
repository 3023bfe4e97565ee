// The plan of one graph at one batch size: shapes inferred, shape-only subgraphs folded
// to constants on the host, every remaining ONNX node lowered to a typed Step for the
// Kernels interface (Conv fused with a following activation and residual Add, MatMul
// with a bias Add), and every activation given an offset in one arena, reusing the
// space of buffers that are dead by then. DeviceBytes() is exact: what the engine
// allocates for this batch (weights + arena + scratch), known before anything runs.
// Thread-safety: a Plan is an immutable value once built.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "engine/graph.h"
#include "engine/kernels.h"

namespace framemill::engine {

// Device buffers are placed at multiples of this many bytes.
constexpr int64_t kPlanAlignment = 256;

struct Buffer {
  std::string name;            // the first value that lives in it
  std::vector<int64_t> shape;  // as produced
  int64_t elements = 0;
  bool weight = false;         // in the weights region (constant), else in the arena
  int64_t offset = 0;          // bytes from the start of its region
  int64_t bytes = 0;           // elements * storage size, unaligned
  int first_step = 0, last_step = 0;  // liveness (arena buffers); -1 = before step 0
  int host_const = -1;         // weights: index into Plan::constants
};

enum class StepKind {
  kConv2d, kConvTranspose2d, kPool2d, kBinary, kUnary, kResize, kPad, kConcat, kTranspose,
  kSlice, kReduce, kSoftmax, kMatMul, kArgMax, kCopy
};

struct CopyParams {
  int64_t elements = 0;
};

struct Step {
  StepKind kind = StepKind::kCopy;
  std::string node;                 // ONNX node name (and op), for messages and profiles
  std::vector<int> inputs;          // buffer ids; -1 = absent optional input (bias, residual)
  int output = -1;
  std::variant<Conv2dParams, ConvTranspose2dParams, Pool2dParams, BinaryParams, UnaryParams,
               ResizeParams, PadParams, ConcatParams, TransposeParams, SliceParams,
               ReduceParams, SoftmaxParams, MatMulParams, ArgMaxParams, CopyParams>
      params;
  std::vector<int64_t> concat_sizes;  // ConcatParams::axis_sizes points here once copied
  int64_t scratch_bytes = 0;
};

struct PlanOutput {
  std::string name;
  std::vector<int64_t> shape;
  int buffer = -1;
};

// A graph input the plan reads (in the graph's order; an input no output depends on is
// left out), at the plan's batch.
struct PlanInput {
  std::string name;
  std::vector<int64_t> shape;
  int buffer = -1;
};

struct Plan {
  int batch = 1;
  StorageType storage = StorageType::kFloat32;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<HostTensor> constants;  // host values of weight buffers (fp32)
  std::vector<PlanInput> inputs;      // the graph's inputs, in its order
  std::vector<PlanOutput> outputs;
  int64_t weight_bytes = 0;   // weights region
  int64_t arena_bytes = 0;    // activations region
  int64_t scratch_bytes = 0;  // largest step scratch, after the arena
  int64_t activation_bytes = 0;  // sum of all arena buffers, what no reuse would cost
  int fused = 0;                 // nodes absorbed into another step

  int64_t DeviceBytes() const { return weight_bytes + arena_bytes + scratch_bytes; }
  // Bytes the arena + scratch take (all that depends on the batch).
  int64_t BatchBytes() const { return arena_bytes + scratch_bytes; }
  int64_t ScratchOffset() const { return arena_bytes; }
};

// Builds the plan of `graph` for `batch` items. `kernels` (may be null: no scratch) is
// asked for each step's scratch bytes. Unsupported names the node and op it cannot run;
// InvalidArgument when shapes do not agree.
Result<Plan> BuildPlan(const Graph& graph, int batch, StorageType storage,
                       const Kernels* kernels = nullptr);

// The batch a graph is declared at: its first input's first dimension where fixed (a
// user's graph of fixed shapes, [3, 4]), else 1. At its natural batch a plan takes every
// declared dimension as it is; at another, the inputs whose first dimension is -1 or the
// natural batch take the plan's.
int NaturalBatch(const Graph& graph);

// DeviceBytes() of BuildPlan(graph, batch, storage, kernels); -1 when no plan can be built.
int64_t DeviceBytes(const Graph& graph, int batch, StorageType storage,
                    const Kernels* kernels = nullptr);

}  // namespace framemill::engine
