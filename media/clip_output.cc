#include "media/clip_output.h"

#include <cstring>

#include <unistd.h>

#include <filesystem>

#include "base/atomic_file.h"
#include "media/av_decoder.h"

namespace framemill {

namespace fs = std::filesystem;

Result<std::unique_ptr<ClipOutput>> ClipOutput::Open(const std::string& path) {
  std::unique_ptr<ClipOutput> out(new ClipOutput());
  out->path_ = path;
  // Two workers (a stale one and its rescuer) may write the same name: each its own temporary.
  out->temp_ = path + ".tmp" + std::to_string(getpid());
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  int rc = avformat_alloc_output_context2(&out->oc_, nullptr, "mp4", out->temp_.c_str());
  if (rc < 0 || out->oc_ == nullptr) return Status::Internal("mp4 muxer: " + AvError(rc));
  out->oc_->flags |= AVFMT_FLAG_BITEXACT;
  if ((rc = avio_open(&out->oc_->pb, out->temp_.c_str(), AVIO_FLAG_WRITE)) < 0)
    return Status::IOError("cannot write " + out->temp_ + ": " + AvError(rc));
  return out;
}

ClipOutput::~ClipOutput() {
  if (oc_ != nullptr) {
    if (oc_->pb != nullptr) avio_closep(&oc_->pb);
    avformat_free_context(oc_);
  }
  if (!renamed_) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

Result<int> ClipOutput::AddStream(const AVCodecParameters* par, AVRational time_base) {
  AVStream* st = avformat_new_stream(oc_, nullptr);
  if (st == nullptr) return Status::OutOfMemory("avformat_new_stream");
  if (avcodec_parameters_copy(st->codecpar, par) < 0) return Status::OutOfMemory("codec parameters");
  st->codecpar->codec_tag = 0;  // the MP4 muxer picks its own tag (an AVI's FourCC is not one)
  st->time_base = time_base;
  return st->index;
}

Result<int> ClipOutput::AddStream(const AVCodecContext* encoder) {
  AVStream* st = avformat_new_stream(oc_, nullptr);
  if (st == nullptr) return Status::OutOfMemory("avformat_new_stream");
  if (avcodec_parameters_from_context(st->codecpar, encoder) < 0)
    return Status::OutOfMemory("codec parameters");
  st->time_base = encoder->time_base;
  return st->index;
}

Status ClipOutput::CopyDisplayMatrix(int stream, const AVStream* source) {
  size_t size = 0;
  const uint8_t* m = av_stream_get_side_data(source, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (m == nullptr || size == 0) return Status::OK();
  uint8_t* out = av_stream_new_side_data(oc_->streams[stream], AV_PKT_DATA_DISPLAYMATRIX, size);
  if (out == nullptr) return Status::OutOfMemory("display matrix");
  std::memcpy(out, m, size);
  return Status::OK();
}

Status ClipOutput::Start() {
  AVDictionary* opts = nullptr;
  av_dict_set(&opts, "movflags", "+faststart", 0);  // the index first: plays while it loads
  const int rc = avformat_write_header(oc_, &opts);
  av_dict_free(&opts);
  if (rc < 0) return Status::Unsupported("the MP4 muxer refuses these streams: " + AvError(rc));
  started_ = true;
  return Status::OK();
}

Status ClipOutput::Write(AVPacket* packet, int stream, AVRational from) {
  packet->stream_index = stream;
  av_packet_rescale_ts(packet, from, oc_->streams[stream]->time_base);
  const int rc = av_interleaved_write_frame(oc_, packet);  // takes the packet's reference
  if (rc < 0) return Status::IOError("cannot write " + temp_ + ": " + AvError(rc));
  return Status::OK();
}

Result<int64_t> ClipOutput::Finish() {
  if (!started_) return Status::Internal("clip finished before it started");
  int rc = av_write_trailer(oc_);
  if (rc < 0) return Status::IOError("cannot finish " + temp_ + ": " + AvError(rc));
  if ((rc = avio_closep(&oc_->pb)) < 0) return Status::IOError("cannot close " + temp_ + ": " + AvError(rc));
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(fs::file_size(temp_, ec));
  if (ec) return Status::IOError("cannot read the size of " + temp_ + ": " + ec.message());
  FM_RETURN_IF_ERROR(RenameIntoPlace(temp_, path_));
  renamed_ = true;
  return bytes;
}

}  // namespace framemill
