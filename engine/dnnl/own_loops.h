// The oneDNN backend's own loops (engine/dnnl/ only), for what oneDNN 2.6 lacks or pads on a
// channels-last tensor; each computes the reference's floats (engine/reference/), tested
// against it in DnnlKernelsTest. Built at -O3 with no contraction (CMakeLists.txt): at -O2
// GCC 12 left the PReLU loop scalar (a 16-channel loop over 9216 pixels 0.38 ms, 0.03 at -O3).
// OpenMP-parallel over rows or pixels; plain fp32 pointers, no layout bookkeeping (the caller
// tags what it wrote).
#pragma once

#include <cstdint>

#include "engine/kernels.h"

namespace framemill::engine::dnnl_detail {

// A transposed convolution whose kernel is its stride (no overlap, no padding) into fewer
// than 16 channels: each input pixel writes its own kh x kw block, one dot product of its
// channels per output. oneDNN pads the output channels to a block of 16: selfie's last layer
// (16 -> 1 channel at 2x, 1 M multiply-adds) took 1.5-1.9 ms there, 0.28 ms here.
bool Blockwise(const ConvTranspose2dParams& p);
// Row by row: the row's input channels gathered plain (from channels-last `x` where
// `x_channels_last`), then each output tap summed over the row's pixels at once (so that it
// vectorises). y is plain NCHW, before the activation.
void DeconvBlocks(const ConvTranspose2dParams& p, const float* x, bool x_channels_last, const float* w,
                  const float* bias, float* y);

// A convolution into fewer than 4 channels (groups 1) of a channels-last fp32 input: each
// output a dot product of the taps' channel vectors. oneDNN pads the output channels to a
// block of 16: isnet's last layer (64 -> 1 channel, 3x3 at 512x512) took 19.8 ms at 15
// GFLOPS (brgconv, AVX-512) and 37.9 at AVX2. y is plain NCHW, with the bias, before the
// activation. `w` is ONNX's [c_out][c_in][kh][kw].
bool FewOutputs(const Conv2dParams& p);
void ConvFewOutputs(const Conv2dParams& p, const float* x, const float* w, const float* bias, float* y);

// A channels-last [n, h_in, w_in, c] resized to [n, h_out, w_out, c], any mode: each output
// pixel blends its source pixels' channels with the reference's taps and arithmetic (the
// same floats; selfie's three resizes took 0.59 ms a forward turned back and resized on the
// reference, centernet's asymmetric linear up-sampling, which oneDNN lacks, 1.95 ms).
void ResizeChannelsLast(const ResizeParams& p, int64_t n, int64_t c, const float* x, float* y);

// PReLU of `pixels` channels-last pixels of `c` channels, one slope a channel (facemesh's 23
// were four steps each: Relu, Clip, Mul, Add), as the reference computes it.
void PReluChannelsLast(const float* x, const float* slopes, int64_t pixels, int64_t c, float* y);

// A constant pad of the channels alone on channels-last pixels (BlazeFace widens its
// residuals so: 0.54 ms a forward on the reference, with the reorders around it).
void PadChannelsLast(const float* x, int64_t pixels, int64_t c, int64_t before, int64_t after, float value,
                     float* y);

// memcpy on every thread of the team, in page-aligned parts: a convolution's residual copied
// into its output for the sum post-op (isnet's eleven, 216 MB a forward: 34 ms of copies and
// reorders a forward on one thread's memcpy, AVX-512 VM, 2 threads).
void ParallelCopy(void* dst, const void* src, size_t bytes);

}  // namespace framemill::engine::dnnl_detail
