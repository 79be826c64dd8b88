/*
 * llmc/attention/cudnn.cpp: cuDNN flash attention through the cuDNN C++ frontend (graph API).
 *
 * Compiled with -DENABLE_CUDNN (USE_CUDNN=1 builds) against the header-only frontend (1.13.0 or
 * newer; 1.32.0 tested); the same file without it gives stubs that only ever report "not built"
 * (attn_select_paths never routes a layer here then). Host code only, so it is compiled once, not per GPU architecture.
 *
 * Why the frontend and not the backend C API (doc/gpu.md): on cuDNN 9.19 a causal training
 * attention is not a single backend operation. The unified SDPA_FWD/SDPA_BWD descriptors have no
 * causal attribute before 9.21, so causal attention is the composite graph (Q K^T, scale, causal
 * mask from generated row/column indices, softmax with stats, P V; and its larger backward) that
 * the frontend's sdpa()/sdpa_backward() assemble and, on newer backends, replace by the unified
 * operation (doc/gpu.md "cuDNN version and build facts"). Writing that graph by hand in the backend API would pin it to one
 * backend version.
 *
 * Graph per (B, h, T, d, kind), kind = forward (always with the stats: training and evaluation run
 * the same graph, so they score alike) or backward; built
 * once, cached here (no static caches: the cache belongs to the CudnnAtt object). The attention
 * scale 1/sqrt(d_l) is a graph constant: d is part of the key. The backward is requested
 * deterministic, which bit-exact resume needs.
 */
#include "cudnn.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef ENABLE_CUDNN

/* The oldest frontend this code compiles with is 1.13.0: it added SDPA's set_generate_stats (the
 * older set_is_inference is deprecated) and the handle-free check_support()/build_plans() used
 * below. 1.32.0 is the one tested on a GPU (doc/gpu.md "cuDNN version and build facts"). */
#include <cudnn_frontend_version.h>
#if !defined(CUDNN_FRONTEND_VERSION) || CUDNN_FRONTEND_VERSION < 11300
#error "cudnn_frontend is older than 1.13.0: pip install nvidia-cudnn-frontend==1.32.0, or point CUDNN_FRONTEND_PATH at a newer include directory"
#endif
#include <cudnn_frontend.h>

#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

namespace fe = cudnn_frontend;

enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };
enum GraphKind { FWD = 0, BWD = 1 };
static const char *const KIND_NAMES[2] = {"forward", "backward"};

struct GraphKey {
    int B, h, T, d, kind;
    bool operator<(const GraphKey &o) const {
        return std::tie(B, h, T, d, kind) < std::tie(o.B, o.h, o.T, o.d, o.kind);
    }
};

struct CudnnAtt {
    cudnnHandle_t handle = nullptr;
    cudaStream_t stream = nullptr;
    std::map<GraphKey, std::shared_ptr<fe::graph::Graph>> graphs;
    void *workspace = nullptr;
    size_t workspace_size = 0;
    bool warned_nondeterministic = false;
};

[[noreturn]] static void die_cudnn(const GraphKey &k, const char *step, const std::string &msg) {
    fflush(stdout);
    fprintf(stderr, "error: cuDNN attention (B %d, heads %d, T %d, head size %d, %s): %s: %s\n", k.B,
            k.h, k.T, k.d, KIND_NAMES[k.kind], step, msg.c_str());
    exit(EXIT_FAILURE);
}

static void fe_check(fe::error_t st, const GraphKey &k, const char *step) {
    if (!st.is_good()) die_cudnn(k, step, st.get_message());
}

static void cuda_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fflush(stdout);
        fprintf(stderr, "error: llmc/attention/cudnn.cpp: %s: %s\n", what, cudaGetErrorString(e));
        exit(EXIT_FAILURE);
    }
}

int cudnn_att_built(void) { return 1; }
long cudnn_att_version(void) { return (long)cudnnGetVersion(); }

CudnnAtt *cudnn_att_create(cudaStream_t stream) {
    CudnnAtt *ca = new CudnnAtt();
    const cudnnStatus_t st = cudnnCreate(&ca->handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        fflush(stdout);
        fprintf(stderr, "error: cuDNN: cudnnCreate failed: %s (is libcudnn for this GPU on "
                "LD_LIBRARY_PATH?)\n", cudnnGetErrorString(st));
        exit(EXIT_FAILURE);
    }
    const cudnnStatus_t ss = cudnnSetStream(ca->handle, stream);
    if (ss != CUDNN_STATUS_SUCCESS) {
        fflush(stdout);
        fprintf(stderr, "error: cuDNN: cudnnSetStream failed: %s\n", cudnnGetErrorString(ss));
        exit(EXIT_FAILURE);
    }
    ca->stream = stream;
    return ca;
}

void cudnn_att_destroy(CudnnAtt *ca) {
    if (ca == nullptr) return;
    if (ca->workspace) cudaFree(ca->workspace);
    ca->graphs.clear();
    cudnnDestroy(ca->handle);
    delete ca;
}

/* Q, K, V inside the (B, T, 3, h, d) buffer and O inside (B, T, h, d): logical (B, h, T, d). */
static std::vector<int64_t> qkv_strides(const GraphKey &k) {
    const int64_t A3 = 3 * (int64_t)k.h * k.d;
    return {(int64_t)k.T * A3, (int64_t)k.d, A3, 1};
}
static std::vector<int64_t> out_strides(const GraphKey &k) {
    const int64_t A = (int64_t)k.h * k.d;
    return {(int64_t)k.T * A, (int64_t)k.d, A, 1};
}

static std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph &g, const char *name,
                                                           int64_t uid, const GraphKey &k,
                                                           const std::vector<int64_t> &stride) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({k.B, k.h, k.T, k.d})
                        .set_stride(stride));
}

static std::shared_ptr<fe::graph::Graph> new_graph() {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

static std::shared_ptr<fe::graph::Graph> build_forward(const GraphKey &k) {
    auto g = new_graph();
    auto Q = input(*g, "Q", UID_Q, k, qkv_strides(k));
    auto K = input(*g, "K", UID_K, k, qkv_strides(k));
    auto V = input(*g, "V", UID_V, k, qkv_strides(k));
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("attention")
                    .set_generate_stats(true)
                    .set_causal_mask(true)
                    .set_attn_scale(1.0f / sqrtf((float)k.d));
    auto outs = g->sdpa(Q, K, V, opts);
    outs[0]->set_output(true).set_uid(UID_O).set_dim({k.B, k.h, k.T, k.d}).set_stride(out_strides(k));
    outs[1]->set_output(true).set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT)
        .set_dim({k.B, k.h, k.T, 1}).set_stride({(int64_t)k.h * k.T, (int64_t)k.T, 1, 1});
    return g;
}

static std::shared_ptr<fe::graph::Graph> build_backward(const GraphKey &k, bool deterministic) {
    auto g = new_graph();
    auto Q = input(*g, "Q", UID_Q, k, qkv_strides(k));
    auto K = input(*g, "K", UID_K, k, qkv_strides(k));
    auto V = input(*g, "V", UID_V, k, qkv_strides(k));
    auto O = input(*g, "O", UID_O, k, out_strides(k));
    auto dO = input(*g, "dO", UID_DO, k, out_strides(k));
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_uid(UID_STATS)
                               .set_dim({k.B, k.h, k.T, 1})
                               .set_stride({(int64_t)k.h * k.T, (int64_t)k.T, 1, 1})
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("attention_backward")
                    .set_causal_mask(true)
                    .set_attn_scale(1.0f / sqrtf((float)k.d))
                    .set_deterministic_algorithm(deterministic);
    auto grads = g->sdpa_backward(Q, K, V, O, dO, stats, opts);
    const int64_t uids[3] = {UID_DQ, UID_DK, UID_DV};
    for (int i = 0; i < 3; i++) {
        grads[i]->set_output(true).set_uid(uids[i]).set_dim({k.B, k.h, k.T, k.d}).set_stride(qkv_strides(k));
    }
    return g;
}

/* validate, lower to the backend, pick an engine, compile; the failing step and its message in
 * `step`/`msg` */
static bool try_build(CudnnAtt *ca, fe::graph::Graph &g, const char **step, std::string *msg) {
    fe::error_t st = g.validate();
    *step = "validate";
    if (st.is_good()) { st = g.build_operation_graph(ca->handle); *step = "build_operation_graph"; }
    if (st.is_good()) { st = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}); *step = "create_execution_plans"; }
    if (st.is_good()) { st = g.check_support(); *step = "check_support"; }
    if (st.is_good()) { st = g.build_plans(); *step = "build_plans"; }
    if (!st.is_good()) *msg = st.get_message();
    return st.is_good();
}

/* Assembles and builds one graph; false with the failing step and message instead of throwing. The
 * frontend reports most problems as error codes, some as exceptions (e.g. "no suitable
 * implementation" while the graph is assembled): both come back the same way. */
static std::shared_ptr<fe::graph::Graph> try_graph(CudnnAtt *ca, const GraphKey &k, bool deterministic,
                                                   const char **step, std::string *msg) {
    *step = "assemble";
    try {
        auto g = k.kind == BWD ? build_backward(k, deterministic) : build_forward(k);
        if (try_build(ca, *g, step, msg)) return g;
    } catch (const std::exception &e) {
        *msg = e.what();
    }
    return nullptr;
}

/* A built graph of this key, or nullptr with the failing step and message. A backend without a
 * deterministic backward for this shape (an error code or an exception) gets the default one and a
 * warning: training works, but a resumed run is then not bit-identical. */
static std::shared_ptr<fe::graph::Graph> build_graph(CudnnAtt *ca, const GraphKey &k, const char **step,
                                                     std::string *msg) {
    auto g = try_graph(ca, k, true, step, msg);
    if (g || k.kind != BWD) return g;
    std::string msg2;
    g = try_graph(ca, k, false, step, &msg2);
    if (!g) {
        *step = "build (default engine, after no deterministic one)";
        *msg = msg2;
        return nullptr;
    }
    if (!ca->warned_nondeterministic) {
        fprintf(stderr, "warning: cuDNN attention backward (B %d, heads %d, T %d, head size %d): no "
                "deterministic engine (%s); using the default one, so resumed runs are not bit-exact "
                "(-attn own is)\n", k.B, k.h, k.T, k.d, msg->c_str());
        ca->warned_nondeterministic = true;
    }
    return g;
}

/* The cached graph of this key, built (and the workspace grown) the first time; nullptr with the
 * failing step and message when cuDNN cannot build it. */
static fe::graph::Graph *find_graph(CudnnAtt *ca, const GraphKey &k, const char **step, std::string *msg) {
    auto it = ca->graphs.find(k);
    if (it != ca->graphs.end()) return it->second.get();
    auto g = build_graph(ca, k, step, msg);
    if (!g) return nullptr;
    int64_t ws = 0;
    fe_check(g->get_workspace_size(ws), k, "get_workspace_size");
    if ((size_t)ws > ca->workspace_size) {
        /* only at start-up in the trainer; a later growth waits for queued work first */
        cuda_ok(cudaStreamSynchronize(ca->stream), "cudaStreamSynchronize");
        if (ca->workspace) cuda_ok(cudaFree(ca->workspace), "cudaFree");
        cuda_ok(cudaMalloc(&ca->workspace, (size_t)ws), "cudaMalloc(cuDNN workspace)");
        ca->workspace_size = (size_t)ws;
    }
    ca->graphs[k] = g;
    return g.get();
}

static fe::graph::Graph &get_graph(CudnnAtt *ca, const GraphKey &k) {
    const char *step = "assemble";
    std::string msg;
    fe::graph::Graph *g = find_graph(ca, k, &step, &msg);
    if (!g) die_cudnn(k, step, msg);
    return *g;
}

int cudnn_att_try_prepare(CudnnAtt *ca, int B, int h, int T, int d, int backward, char *err, size_t cap) {
    for (int kind = FWD; kind <= (backward ? BWD : FWD); kind++) {
        const GraphKey k{B, h, T, d, kind};
        const char *step = "assemble";
        std::string msg;
        if (find_graph(ca, k, &step, &msg) == nullptr) {
            snprintf(err, cap, "cuDNN cannot build the %s graph (B %d, heads %d, T %d, head size %d): %s: %s",
                     KIND_NAMES[kind], B, h, T, d, step, msg.c_str());
            return 0;
        }
    }
    return 1;
}

size_t cudnn_att_workspace_bytes(const CudnnAtt *ca) { return ca->workspace_size; }

static void run(CudnnAtt *ca, const GraphKey &k, std::unordered_map<int64_t, void *> &pack) {
    fe::graph::Graph &g = get_graph(ca, k);
    try {
        fe_check(g.execute(ca->handle, pack, ca->workspace), k, "execute");
    } catch (const std::exception &e) {
        die_cudnn(k, "execute", e.what());
    }
}

void cudnn_att_forward(CudnnAtt *ca, void *out, float *stats, const void *qkv, int B, int h, int T,
                       int d) {
    const GraphKey k{B, h, T, d, FWD};
    const size_t A = (size_t)h * d;
    char *base = (char *)const_cast<void *>(qkv);
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, base}, {UID_K, base + 2 * A}, {UID_V, base + 4 * A}, {UID_O, out}, {UID_STATS, stats}};
    run(ca, k, pack);
}

void cudnn_att_backward(CudnnAtt *ca, void *dqkv, const void *dout, const void *qkv,
                        const void *out, const float *stats, int B, int h, int T, int d) {
    const GraphKey k{B, h, T, d, BWD};
    const size_t A = (size_t)h * d; /* bf16: 2 bytes per element */
    char *base = (char *)const_cast<void *>(qkv);
    char *dbase = (char *)dqkv;
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, base},
        {UID_K, base + 2 * A},
        {UID_V, base + 4 * A},
        {UID_O, const_cast<void *>(out)},
        {UID_DO, const_cast<void *>(dout)},
        {UID_STATS, const_cast<float *>(stats)},
        {UID_DQ, dbase},
        {UID_DK, dbase + 2 * A},
        {UID_DV, dbase + 4 * A}};
    run(ca, k, pack);
}

#else /* !ENABLE_CUDNN: the interface of a build without cuDNN */

struct CudnnAtt {
    int unused;
};

static void not_built(void) {
    fflush(stdout);
    fprintf(stderr, "error: cuDNN attention requested, but this binary was built without cuDNN "
            "(rebuild with make USE_CUDNN=1)\n");
    exit(EXIT_FAILURE);
}

int cudnn_att_built(void) { return 0; }
long cudnn_att_version(void) { return 0; }
CudnnAtt *cudnn_att_create(cudaStream_t stream) {
    (void)stream;
    return nullptr;
}
void cudnn_att_destroy(CudnnAtt *ca) { (void)ca; }
int cudnn_att_try_prepare(CudnnAtt *ca, int B, int h, int T, int d, int backward, char *err, size_t cap) {
    (void)ca; (void)B; (void)h; (void)T; (void)d; (void)backward; (void)err; (void)cap;
    not_built();
    return 0;
}
size_t cudnn_att_workspace_bytes(const CudnnAtt *ca) {
    (void)ca;
    return 0;
}
void cudnn_att_forward(CudnnAtt *ca, void *out, float *stats, const void *qkv, int B, int h, int T,
                       int d) {
    (void)ca; (void)out; (void)stats; (void)qkv; (void)B; (void)h; (void)T; (void)d;
    not_built();
}
void cudnn_att_backward(CudnnAtt *ca, void *dqkv, const void *dout, const void *qkv,
                        const void *out, const float *stats, int B, int h, int T, int d) {
    (void)ca; (void)dqkv; (void)dout; (void)qkv; (void)out; (void)stats; (void)B; (void)h; (void)T; (void)d;
    not_built();
}

#endif /* ENABLE_CUDNN */
