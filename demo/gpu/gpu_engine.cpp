// The demo server's GPU engine (gpu_engine.h): weights, buffers, the paged KV
// cache, the forward pass with cuBLAS GEMMs and our kernels, and one CUDA
// graph per decode batch size.
//
// Memory: the server's share is memory_fraction x the GPU's memory (as vLLM's
// --gpu-memory-utilization); what the weights, activation buffers and cuBLAS
// take from the free memory is measured, a reserve is kept for the graphs,
// and the rest becomes KV-cache blocks.
//
// Per step: the batcher's metadata (token ids, positions, cache slots, token
// -> sequence, block tables, sample seeds) goes into pinned host buffers and
// is copied into fixed device buffers (one copy per array), so a decode graph
// captured once reads each step's inputs. Decode rows past the batch are
// padding: slot -1 (the cache kernel skips them), sequence -1 (attention
// writes zeros), sample index -1 (no token).
#include "gpu/gpu_engine.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/kv_budget.h"
#include "gpu/kernels.h"

namespace twinscope::demo {
namespace {

constexpr size_t kCublasWorkspace = 32u << 20;

#define DEMO_CUDA(call)                                                                                        \
  do {                                                                                                         \
    cudaError_t err_ = (call);                                                                                 \
    if (err_ != cudaSuccess) {                                                                                 \
      return Status::Error(std::string(#call) + " failed: " + cudaGetErrorName(err_) + ": " +                  \
                           cudaGetErrorString(err_) + " (" + __FILE__ + ":" + std::to_string(__LINE__) + ")"); \
    }                                                                                                          \
  } while (0)

#define DEMO_CUBLAS(call)                                                                                        \
  do {                                                                                                           \
    cublasStatus_t st_ = (call);                                                                                 \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                          \
      return Status::Error(std::string(#call) + " failed: " + cublasGetStatusName(st_) + ": " +                  \
                           cublasGetStatusString(st_) + " (" + __FILE__ + ":" + std::to_string(__LINE__) + ")"); \
    }                                                                                                            \
  } while (0)

#define DEMO_OK(expr)        \
  do {                       \
    Status s_ = (expr);      \
    if (!s_.ok()) return s_; \
  } while (0)

struct NvtxRange {
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
};

double MiB(size_t b) { return static_cast<double>(b) / (1 << 20); }

struct LayerWeights {
  void* qkv = nullptr;      // [(heads + 2 kv_heads) * head_dim][hidden]
  void* o = nullptr;        // [hidden][heads * head_dim]
  void* gate_up = nullptr;  // [2 intermediate][hidden]
  void* down = nullptr;     // [hidden][intermediate]
  void* norm_in = nullptr;
  void* norm_post = nullptr;
};

class GpuEngine : public Engine {
 public:
  explicit GpuEngine(GpuEngineOptions o) : opt_(std::move(o)) {}
  ~GpuEngine() override;

  Status Init();
  const EngineInfo& info() const override { return info_; }
  Status Run(const EngineStep& step, std::vector<int32_t>* tokens) override;

 private:
  template <typename T>
  Status Alloc(T** p, size_t count) {
    void* raw = nullptr;
    DEMO_CUDA(cudaMalloc(&raw, count * sizeof(T)));
    allocations_.push_back(raw);
    own_bytes_ += count * sizeof(T);
    *p = static_cast<T*>(raw);
    return Status::Ok();
  }
  Status AllocBf16(void** p, size_t count) {
    DEMO_CUDA(cudaMalloc(p, count * 2));
    allocations_.push_back(*p);
    own_bytes_ += count * 2;
    return Status::Ok();
  }
  template <typename T>
  Status AllocHost(T** p, size_t count) {
    void* raw = nullptr;
    DEMO_CUDA(cudaMallocHost(&raw, count * sizeof(T)));
    host_allocations_.push_back(raw);
    *p = static_cast<T*>(raw);
    return Status::Ok();
  }
  Status InitWeight(void* w, int64_t n, float scale, float offset = 0.f);
  Status InitWeights();
  // y[T][n] = x[T][k] @ w[n][k]^T
  Status Gemm(const void* w, const void* x, void* y, int tokens, int n, int k);
  // The whole forward pass and sampling for `tokens` token rows and `rows`
  // sequence rows, launched on stream_ (also while capturing).
  Status Forward(int tokens, int rows, bool prefill);
  Status CaptureGraph(int batch);
  Status Upload(int tokens, int rows);

  GpuEngineOptions opt_;
  EngineInfo info_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<void*> allocations_, host_allocations_;
  size_t own_bytes_ = 0;  // device bytes this server allocated (weights, buffers, workspace)
  int max_tokens_ = 0, max_rows_ = 0, max_blocks_per_seq_ = 0;

  // Weights.
  void* embed_ = nullptr;  // [vocab][hidden], tied to the LM head
  void* norm_final_ = nullptr;
  std::vector<LayerWeights> layers_;
  // KV cache: per layer, K then V, each [num_blocks][block_size][kv_heads][head_dim].
  void* kv_cache_ = nullptr;
  size_t kv_layer_elems_ = 0;  // elements of one layer's K (or V)
  // Activations.
  void *x_ = nullptr, *h_ = nullptr, *d_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *gu_ = nullptr, *act_ = nullptr;
  void *last_h_ = nullptr, *logits_ = nullptr;
  void* workspace_ = nullptr;
  // Step metadata, device and pinned host.
  int32_t *d_ids_ = nullptr, *d_pos_ = nullptr, *d_tok_seq_ = nullptr, *d_last_ = nullptr, *d_tables_ = nullptr,
          *d_sample_idx_ = nullptr, *d_out_ = nullptr;
  int64_t* d_slots_ = nullptr;
  uint64_t* d_seeds_ = nullptr;
  float* d_logprobs_ = nullptr;
  int32_t *h_ids_ = nullptr, *h_pos_ = nullptr, *h_tok_seq_ = nullptr, *h_last_ = nullptr, *h_tables_ = nullptr,
          *h_sample_idx_ = nullptr, *h_out_ = nullptr;
  int64_t* h_slots_ = nullptr;
  uint64_t* h_seeds_ = nullptr;
  std::map<int, cudaGraphExec_t> graphs_;  // by padded batch size
  std::vector<cudaGraph_t> graph_defs_;
};

GpuEngine::~GpuEngine() {
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& [b, exec] : graphs_) cudaGraphExecDestroy(exec);
  for (auto g : graph_defs_) cudaGraphDestroy(g);
  if (cublas_) cublasDestroy(cublas_);
  for (void* p : allocations_) cudaFree(p);
  for (void* p : host_allocations_) cudaFreeHost(p);
  if (stream_) cudaStreamDestroy(stream_);
}

Status GpuEngine::InitWeight(void* w, int64_t n, float scale, float offset) {
  DEMO_CUDA(gpu::LaunchInitWeights(w, n, opt_.weight_seed + static_cast<uint64_t>(allocations_.size()) * 7919, scale,
                                   offset, stream_));
  return Status::Ok();
}

Status GpuEngine::InitWeights() {
  // Uniform, scaled by 1/sqrt(fan-in) so that activations stay finite; norms at 1.
  const ModelShape& m = opt_.model;
  const int64_t H = m.hidden, Q = m.qkv_width(), A = int64_t(m.heads) * m.head_dim, I = m.intermediate;
  NvtxRange range("init weights");
  DEMO_OK(AllocBf16(&embed_, size_t(m.vocab) * H));
  DEMO_OK(InitWeight(embed_, int64_t(m.vocab) * H, 1.0f));
  DEMO_OK(AllocBf16(&norm_final_, H));
  DEMO_OK(InitWeight(norm_final_, H, 0.f, 1.f));
  layers_.resize(m.layers);
  for (auto& l : layers_) {
    DEMO_OK(AllocBf16(&l.qkv, size_t(Q) * H));
    DEMO_OK(InitWeight(l.qkv, Q * H, 1.f / std::sqrt(float(H))));
    DEMO_OK(AllocBf16(&l.o, size_t(H) * A));
    DEMO_OK(InitWeight(l.o, H * A, 1.f / std::sqrt(float(A))));
    DEMO_OK(AllocBf16(&l.gate_up, size_t(2 * I) * H));
    DEMO_OK(InitWeight(l.gate_up, 2 * I * H, 1.f / std::sqrt(float(H))));
    DEMO_OK(AllocBf16(&l.down, size_t(H) * I));
    DEMO_OK(InitWeight(l.down, H * I, 1.f / std::sqrt(float(I))));
    DEMO_OK(AllocBf16(&l.norm_in, H));
    DEMO_OK(InitWeight(l.norm_in, H, 0.f, 1.f));
    DEMO_OK(AllocBf16(&l.norm_post, H));
    DEMO_OK(InitWeight(l.norm_post, H, 0.f, 1.f));
  }
  return Status::Ok();
}

Status GpuEngine::Init() {
  const ModelShape& m = opt_.model;
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    return Status::Error(std::string("no CUDA device: ") +
                         (err != cudaSuccess ? cudaGetErrorString(err) : "none found") +
                         " (without a GPU, run with --engine cpu)");
  }
  if (opt_.device < 0 || opt_.device >= devices) {
    return Status::Error("--device " + std::to_string(opt_.device) + ": this machine has " + std::to_string(devices) +
                         " CUDA device(s)");
  }
  DEMO_CUDA(cudaSetDevice(opt_.device));
  DEMO_CUDA(cudaFree(nullptr));  // creates the context
  cudaDeviceProp prop{};
  DEMO_CUDA(cudaGetDeviceProperties(&prop, opt_.device));
  size_t free0 = 0, total = 0;
  DEMO_CUDA(cudaMemGetInfo(&free0, &total));
  DEMO_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DEMO_CUBLAS(cublasCreate(&cublas_));
  DEMO_CUBLAS(cublasSetStream(cublas_, stream_));

  max_rows_ = opt_.max_batch;
  max_tokens_ = std::max(opt_.max_step_tokens, opt_.max_batch);
  max_blocks_per_seq_ = (opt_.max_model_len + opt_.block_size - 1) / opt_.block_size + 1;
  const int64_t H = m.hidden, Q = m.qkv_width(), A = int64_t(m.heads) * m.head_dim, I = m.intermediate;

  Status weights = InitWeights();
  if (!weights.ok()) return weights;
  // Activations and metadata.
  const size_t T = max_tokens_, R = max_rows_;
  DEMO_OK(AllocBf16(&x_, T * H));
  DEMO_OK(AllocBf16(&h_, T * H));
  DEMO_OK(AllocBf16(&d_, T * H));
  DEMO_OK(AllocBf16(&qkv_, T * Q));
  DEMO_OK(AllocBf16(&attn_, T * A));
  DEMO_OK(AllocBf16(&gu_, T * 2 * I));
  DEMO_OK(AllocBf16(&act_, T * I));
  DEMO_OK(AllocBf16(&last_h_, R * H));
  DEMO_OK(AllocBf16(&logits_, R * m.vocab));
  DEMO_CUDA(cudaMalloc(&workspace_, kCublasWorkspace));
  allocations_.push_back(workspace_);
  own_bytes_ += kCublasWorkspace;
  DEMO_CUBLAS(cublasSetWorkspace(cublas_, workspace_, kCublasWorkspace));
  DEMO_OK(Alloc(&d_ids_, T));
  DEMO_OK(Alloc(&d_pos_, T));
  DEMO_OK(Alloc(&d_slots_, T));
  DEMO_OK(Alloc(&d_tok_seq_, T));
  DEMO_OK(Alloc(&d_last_, R));
  DEMO_OK(Alloc(&d_tables_, R * max_blocks_per_seq_));
  DEMO_OK(Alloc(&d_seeds_, R));
  DEMO_OK(Alloc(&d_sample_idx_, R));
  DEMO_OK(Alloc(&d_out_, R));
  DEMO_OK(Alloc(&d_logprobs_, R));
  DEMO_OK(AllocHost(&h_ids_, T));
  DEMO_OK(AllocHost(&h_pos_, T));
  DEMO_OK(AllocHost(&h_slots_, T));
  DEMO_OK(AllocHost(&h_tok_seq_, T));
  DEMO_OK(AllocHost(&h_last_, R));
  DEMO_OK(AllocHost(&h_tables_, R * max_blocks_per_seq_));
  DEMO_OK(AllocHost(&h_seeds_, R));
  DEMO_OK(AllocHost(&h_sample_idx_, R));
  DEMO_OK(AllocHost(&h_out_, R));
  DEMO_CUDA(cudaMemsetAsync(d_tables_, 0, R * max_blocks_per_seq_ * sizeof(int32_t), stream_));
  DEMO_CUDA(cudaStreamSynchronize(stream_));

  // The KV cache: what is left of this server's share.
  size_t free1 = 0;
  DEMO_CUDA(cudaMemGetInfo(&free1, &total));
  KvBudgetInput kv;
  kv.memory_fraction = opt_.memory_fraction;
  kv.total = total;
  kv.free_before = free0;
  kv.free_after = free1;
  kv.own_bytes = own_bytes_;
  kv.block_bytes = size_t(2) * m.layers * opt_.block_size * m.kv_heads * m.head_dim * 2;
  kv.min_blocks = (opt_.max_model_len + opt_.block_size - 1) / opt_.block_size;
  kv.max_model_len = opt_.max_model_len;
  kv.gpu_name = prop.name;
  StatusOr<size_t> sized = KvCacheBytes(kv);
  if (!sized.ok()) return sized.status();
  const size_t kv_bytes = *sized, block_bytes = kv.block_bytes;
  DEMO_CUDA(cudaMalloc(&kv_cache_, kv_bytes));
  allocations_.push_back(kv_cache_);
  const int64_t num_blocks = static_cast<int64_t>(kv_bytes / block_bytes);
  kv_layer_elems_ = static_cast<size_t>(num_blocks) * opt_.block_size * m.kv_heads * m.head_dim;

  info_.model = m;
  info_.kind = "gpu";
  info_.device = std::string(prop.name) + " (device " + std::to_string(opt_.device) + ", " +
                 std::to_string(static_cast<int>(MiB(kv_bytes))) + " MiB KV cache)";
  info_.block_size = opt_.block_size;
  info_.num_blocks = num_blocks;
  info_.max_batch = opt_.max_batch;
  info_.max_step_tokens = max_tokens_;
  info_.max_model_len = opt_.max_model_len;

  // Warm up (cuBLAS picks its kernels) and capture one graph per batch size.
  if (!opt_.enforce_eager) {
    for (int b : DefaultGraphSizes(opt_.max_batch)) DEMO_OK(CaptureGraph(b));
    for (auto& [b, exec] : graphs_) info_.graph_sizes.push_back(b);
  }
  return Status::Ok();
}

Status GpuEngine::Gemm(const void* w, const void* x, void* y, int tokens, int n, int k) {
  const float alpha = 1.f, beta = 0.f;
  DEMO_CUBLAS(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, tokens, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF,
                           k, &beta, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

Status GpuEngine::Forward(int tokens, int rows, bool prefill) {
  const ModelShape& m = opt_.model;
  const int H = m.hidden, Q = m.qkv_width(), A = m.heads * m.head_dim, I = m.intermediate;
  const int64_t kv_offset = int64_t(m.heads) * m.head_dim, v_offset = kv_offset + int64_t(m.kv_heads) * m.head_dim;
  DEMO_CUDA(gpu::LaunchEmbedding(x_, d_ids_, embed_, tokens, H, m.vocab, stream_));
  for (int li = 0; li < m.layers; ++li) {
    const LayerWeights& l = layers_[li];
    if (li == 0) {
      DEMO_CUDA(gpu::LaunchRmsNorm(h_, x_, l.norm_in, tokens, H, stream_));
    } else {
      DEMO_CUDA(gpu::LaunchFusedAddRmsNorm(x_, d_, l.norm_in, h_, tokens, H, stream_));
    }
    DEMO_OK(Gemm(l.qkv, h_, qkv_, tokens, Q, H));
    DEMO_CUDA(gpu::LaunchRotaryEmbedding(qkv_, d_pos_, tokens, Q, m.heads, m.kv_heads, m.head_dim, stream_));
    auto* k_cache = static_cast<char*>(kv_cache_) + size_t(2 * li) * kv_layer_elems_ * 2;
    auto* v_cache = k_cache + kv_layer_elems_ * 2;
    auto* qkv = static_cast<char*>(qkv_);
    DEMO_CUDA(gpu::LaunchReshapeAndCacheFlash(qkv + kv_offset * 2, qkv + v_offset * 2, k_cache, v_cache, d_slots_,
                                              tokens, Q, Q, m.kv_heads, m.head_dim, opt_.block_size, stream_));
    DEMO_CUDA(gpu::LaunchPagedAttention(attn_, qkv_, Q, k_cache, v_cache, d_tables_, max_blocks_per_seq_, d_tok_seq_,
                                        d_pos_, tokens, m.heads, m.kv_heads, m.head_dim, opt_.block_size, stream_));
    DEMO_OK(Gemm(l.o, attn_, d_, tokens, H, A));
    DEMO_CUDA(gpu::LaunchFusedAddRmsNorm(x_, d_, l.norm_post, h_, tokens, H, stream_));
    DEMO_OK(Gemm(l.gate_up, h_, gu_, tokens, 2 * I, H));
    DEMO_CUDA(gpu::LaunchSiluAndMul(act_, gu_, tokens, I, stream_));
    DEMO_OK(Gemm(l.down, act_, d_, tokens, H, I));
  }
  DEMO_CUDA(gpu::LaunchFusedAddRmsNorm(x_, d_, norm_final_, h_, tokens, H, stream_));
  const void* last = h_;
  if (prefill) {
    DEMO_CUDA(gpu::LaunchGatherRows(last_h_, h_, d_last_, rows, H, stream_));
    last = last_h_;
  }
  DEMO_OK(Gemm(embed_, last, logits_, rows, m.vocab, H));
  DEMO_CUDA(gpu::LaunchSampling(d_out_, d_logprobs_, logits_, d_seeds_, d_sample_idx_, rows, m.vocab, stream_));
  return Status::Ok();
}

Status GpuEngine::Upload(int tokens, int rows) {
  auto copy = [&](void* dst, const void* src, size_t bytes) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_);
  };
  DEMO_CUDA(copy(d_ids_, h_ids_, tokens * sizeof(int32_t)));
  DEMO_CUDA(copy(d_pos_, h_pos_, tokens * sizeof(int32_t)));
  DEMO_CUDA(copy(d_slots_, h_slots_, tokens * sizeof(int64_t)));
  DEMO_CUDA(copy(d_tok_seq_, h_tok_seq_, tokens * sizeof(int32_t)));
  DEMO_CUDA(copy(d_last_, h_last_, rows * sizeof(int32_t)));
  DEMO_CUDA(copy(d_tables_, h_tables_, size_t(rows) * max_blocks_per_seq_ * sizeof(int32_t)));
  DEMO_CUDA(copy(d_seeds_, h_seeds_, rows * sizeof(uint64_t)));
  DEMO_CUDA(copy(d_sample_idx_, h_sample_idx_, rows * sizeof(int32_t)));
  return Status::Ok();
}

Status GpuEngine::CaptureGraph(int batch) {
  // Inputs of an all-padding batch: the warm-up writes nothing and samples nothing.
  for (int i = 0; i < batch; ++i) {
    h_ids_[i] = 0;
    h_pos_[i] = 0;
    h_slots_[i] = -1;
    h_tok_seq_[i] = -1;
    h_last_[i] = i;
    h_seeds_[i] = 0;
    h_sample_idx_[i] = -1;
  }
  std::fill(h_tables_, h_tables_ + size_t(batch) * max_blocks_per_seq_, 0);
  {
    NvtxRange range("warmup decode batch " + std::to_string(batch));
    DEMO_OK(Upload(batch, batch));
    DEMO_OK(Forward(batch, batch, false));
    DEMO_CUDA(cudaStreamSynchronize(stream_));
  }
  NvtxRange range("capture decode batch " + std::to_string(batch));
  cudaGraph_t graph = nullptr;
  DEMO_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  Status s = Forward(batch, batch, false);
  cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!s.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return Status::Error("capturing the decode graph for batch " + std::to_string(batch) + ": " + s.message());
  }
  DEMO_CUDA(end);
  graph_defs_.push_back(graph);
  cudaGraphExec_t exec = nullptr;
  DEMO_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  graphs_[batch] = exec;
  return Status::Ok();
}

Status GpuEngine::Run(const EngineStep& step, std::vector<int32_t>* tokens) {
  const ModelShape& m = opt_.model;
  const int rows_used = static_cast<int>(step.seqs.size());
  const bool prefill = step.kind == StepKind::kPrefill;
  int token_rows = 0;
  for (const auto& q : step.seqs) token_rows += static_cast<int>(q.input_ids.size());
  const int padded = prefill ? token_rows : std::max(step.padded, rows_used);
  const int rows = prefill ? rows_used : padded;
  if (rows_used == 0 || rows > max_rows_ || padded > max_tokens_) {
    return Status::Error("step " + std::to_string(step.index) + ": " + std::to_string(rows) + " rows / " +
                         std::to_string(padded) + " tokens do not fit this engine (at most " +
                         std::to_string(max_rows_) + " / " + std::to_string(max_tokens_) +
                         "; start it with the primary's --max-batch and --max-prefill-tokens)");
  }
  if (!prefill && !opt_.enforce_eager && !graphs_.count(padded)) {
    // A follower running a padded size its primary captured and it did not.
    std::fprintf(stderr, "twinscope-demo-server: capturing a decode graph for batch %d (the schedule asks for it)\n",
                 padded);
    DEMO_OK(CaptureGraph(padded));
    info_.graph_sizes.push_back(padded);
    std::sort(info_.graph_sizes.begin(), info_.graph_sizes.end());
  }
  int t = 0;
  for (int s = 0; s < rows_used; ++s) {
    const EngineSeq& q = step.seqs[s];
    if (q.block_table.size() > static_cast<size_t>(max_blocks_per_seq_)) {
      return Status::Error("step " + std::to_string(step.index) + ": a block table longer than --max-model-len allows");
    }
    for (size_t i = 0; i < q.input_ids.size(); ++i, ++t) {
      h_ids_[t] = q.input_ids[i];
      h_pos_[t] = q.first_position + static_cast<int>(i);
      h_slots_[t] = q.slots[i];
      h_tok_seq_[t] = s;
    }
    h_last_[s] = t - 1;
    std::copy(q.block_table.begin(), q.block_table.end(), h_tables_ + size_t(s) * max_blocks_per_seq_);
    h_seeds_[s] = q.sample_seed;
    h_sample_idx_[s] = q.sample_index;
  }
  for (; t < padded; ++t) {  // decode padding
    h_ids_[t] = 0;
    h_pos_[t] = 0;
    h_slots_[t] = -1;
    h_tok_seq_[t] = -1;
  }
  for (int s = rows_used; s < rows; ++s) {
    h_last_[s] = s;
    h_seeds_[s] = 0;
    h_sample_idx_[s] = -1;
  }

  NvtxRange range(step.name);
  auto graph = graphs_.end();
  if (!prefill && !opt_.enforce_eager) graph = graphs_.find(padded);
  DEMO_OK(Upload(padded, rows));
  if (graph != graphs_.end()) {
    DEMO_CUDA(cudaGraphLaunch(graph->second, stream_));
  } else {
    DEMO_OK(Forward(padded, rows, prefill));
  }
  DEMO_CUDA(cudaMemcpyAsync(h_out_, d_out_, rows_used * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  DEMO_CUDA(cudaStreamSynchronize(stream_));
  tokens->assign(h_out_, h_out_ + rows_used);
  for (int32_t tok : *tokens) {
    if (tok < 0 || tok >= m.vocab) {
      return Status::Error("step " + std::to_string(step.index) + ": the sampler returned token " +
                           std::to_string(tok));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> CreateGpuEngine(const GpuEngineOptions& options) {
  Status s = ValidateModel(options.model);
  if (!s.ok()) return s;
  auto engine = std::make_unique<GpuEngine>(options);
  s = engine->Init();
  if (!s.ok()) return Status::Error("GPU engine: " + s.message());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace twinscope::demo
