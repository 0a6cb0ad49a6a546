// cuDNN library calls (cudnn.h): the loader, the heuristic query that makes configs of an
// analysed call, and the call itself; what a session needs (the candidate analysis, which sits on
// the linear emitter's, is cudnn_analysis.c).
// The declarations below are cuDNN 9's (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h of 9.19): the
// legacy convolution API, deprecated but shipped by every cuDNN 9, with values unchanged since
// cuDNN 8 (status codes aside, which only SUCCESS = 0 matters for here).
#define _GNU_SOURCE
#include "cudnn.h"

#include "cuda_libs.h"
#include "cugen_lin_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- cuDNN 9, the part used here ----

typedef int cudnnStatus_t; // CUDNN_STATUS_SUCCESS = 0
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cudnnTensorStruct *cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct *cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct *cudnnConvolutionDescriptor_t;
typedef struct cudnnActivationStruct *cudnnActivationDescriptor_t;
typedef struct {
    int algo;   // cudnnConvolutionFwdAlgo_t
    int status; // cudnnStatus_t
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;

enum {
    CUDNN_DATA_FLOAT = 0,
    CUDNN_TENSOR_NCHW = 0,
    CUDNN_TENSOR_NHWC = 1,
    CUDNN_CROSS_CORRELATION = 1
};
enum { CUDNN_ACTIVATION_RELU = 1, CUDNN_ACTIVATION_IDENTITY = 5, CUDNN_NOT_PROPAGATE_NAN = 0 };

typedef struct Lib {
    void *dl;
    size_t (*get_version)(void);
    const char *(*status_name)(cudnnStatus_t);
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*set_stream)(cudnnHandle_t, CUstream);
    cudnnStatus_t (*tensor_create)(cudnnTensorDescriptor_t *);
    cudnnStatus_t (*tensor_set4d)(cudnnTensorDescriptor_t, int format, int dtype, int n, int c,
                                  int h, int w);
    cudnnStatus_t (*tensor_destroy)(cudnnTensorDescriptor_t);
    cudnnStatus_t (*filter_create)(cudnnFilterDescriptor_t *);
    cudnnStatus_t (*filter_set4d)(cudnnFilterDescriptor_t, int dtype, int format, int k, int c,
                                  int h, int w);
    cudnnStatus_t (*filter_destroy)(cudnnFilterDescriptor_t);
    cudnnStatus_t (*conv_create)(cudnnConvolutionDescriptor_t *);
    cudnnStatus_t (*conv_set2d)(cudnnConvolutionDescriptor_t, int pad_h, int pad_w, int u, int v,
                                int dil_h, int dil_w, int mode, int compute_type);
    cudnnStatus_t (*conv_groups)(cudnnConvolutionDescriptor_t, int groups);
    cudnnStatus_t (*conv_math)(cudnnConvolutionDescriptor_t, int math);
    cudnnStatus_t (*conv_destroy)(cudnnConvolutionDescriptor_t);
    cudnnStatus_t (*conv_out_dim)(cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t,
                                  cudnnFilterDescriptor_t, int *n, int *c, int *h, int *w);
    cudnnStatus_t (*act_create)(cudnnActivationDescriptor_t *);
    cudnnStatus_t (*act_set)(cudnnActivationDescriptor_t, int mode, int nan, double coef);
    cudnnStatus_t (*act_destroy)(cudnnActivationDescriptor_t);
    cudnnStatus_t (*heuristic)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                               cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int, int *,
                               cudnnConvolutionFwdAlgoPerf_t *);
    cudnnStatus_t (*ws_size)(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
                             cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, int algo,
                             size_t *);
    cudnnStatus_t (*forward)(cudnnHandle_t, const void *alpha, cudnnTensorDescriptor_t,
                             const void *x, cudnnFilterDescriptor_t, const void *w,
                             cudnnConvolutionDescriptor_t, int algo, void *ws, size_t ws_bytes,
                             const void *beta, cudnnTensorDescriptor_t, void *y);
    cudnnStatus_t (*forward_bias_act)(cudnnHandle_t, const void *alpha1, cudnnTensorDescriptor_t,
                                      const void *x, cudnnFilterDescriptor_t, const void *w,
                                      cudnnConvolutionDescriptor_t, int algo, void *ws,
                                      size_t ws_bytes, const void *alpha2, cudnnTensorDescriptor_t,
                                      const void *z, cudnnTensorDescriptor_t, const void *bias,
                                      cudnnActivationDescriptor_t, cudnnTensorDescriptor_t,
                                      void *y);
    cudnnStatus_t (*add_tensor)(cudnnHandle_t, const void *alpha, cudnnTensorDescriptor_t,
                                const void *a, const void *beta, cudnnTensorDescriptor_t, void *c);
    uint64_t version;
    char where[512]; // the file opened, or why none was
} Lib;

static Lib lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

// The legacy convolution API this file declares is cuDNN 8's and 9's: another version's file is
// passed over.
static bool accept_version(void *ctx, const char *path, char *why, size_t n) {
    const Lib *l = ctx;
    uint64_t v = (uint64_t)l->get_version();
    if (v >= 80000 && v < 100000)
        return true;
    snprintf(why, n, "%.400s is cuDNN %llu, not 8 or 9", path, (unsigned long long)v);
    return false;
}

// The library by its sonames (cuda_libs.h: ORCH_CUDA_LIB_DIR, the loader path, the toolkit).
static void load_once(void) {
    static const char *const sonames[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
    Lib l = {0};
    const CudaLibSym syms[] = {
        {(void **)&l.get_version, "cudnnGetVersion"},
        {(void **)&l.status_name, "cudnnGetErrorString"},
        {(void **)&l.create, "cudnnCreate"},
        {(void **)&l.set_stream, "cudnnSetStream"},
        {(void **)&l.tensor_create, "cudnnCreateTensorDescriptor"},
        {(void **)&l.tensor_set4d, "cudnnSetTensor4dDescriptor"},
        {(void **)&l.tensor_destroy, "cudnnDestroyTensorDescriptor"},
        {(void **)&l.filter_create, "cudnnCreateFilterDescriptor"},
        {(void **)&l.filter_set4d, "cudnnSetFilter4dDescriptor"},
        {(void **)&l.filter_destroy, "cudnnDestroyFilterDescriptor"},
        {(void **)&l.conv_create, "cudnnCreateConvolutionDescriptor"},
        {(void **)&l.conv_set2d, "cudnnSetConvolution2dDescriptor"},
        {(void **)&l.conv_groups, "cudnnSetConvolutionGroupCount"},
        {(void **)&l.conv_math, "cudnnSetConvolutionMathType"},
        {(void **)&l.conv_destroy, "cudnnDestroyConvolutionDescriptor"},
        {(void **)&l.conv_out_dim, "cudnnGetConvolution2dForwardOutputDim"},
        {(void **)&l.act_create, "cudnnCreateActivationDescriptor"},
        {(void **)&l.act_set, "cudnnSetActivationDescriptor"},
        {(void **)&l.act_destroy, "cudnnDestroyActivationDescriptor"},
        {(void **)&l.heuristic, "cudnnGetConvolutionForwardAlgorithm_v7"},
        {(void **)&l.ws_size, "cudnnGetConvolutionForwardWorkspaceSize"},
        {(void **)&l.forward, "cudnnConvolutionForward"},
        {(void **)&l.forward_bias_act, "cudnnConvolutionBiasActivationForward"},
        {(void **)&l.add_tensor, "cudnnAddTensor"},
    };
    l.dl = cuda_lib_open(sonames, ORCH_COUNT(sonames), syms, ORCH_COUNT(syms), accept_version, &l,
                         l.where, sizeof l.where);
    if (l.dl)
        l.version = (uint64_t)l.get_version();
    lib = l;
}

static const Lib *lib_get(void) {
    pthread_once(&lib_once, load_once);
    return lib.dl ? &lib : NULL;
}

bool dnn_available(void) {
    return lib_get() != NULL;
}

uint64_t dnn_version(void) {
    const Lib *l = lib_get();
    return l ? l->version : 0;
}

const char *dnn_describe_load(void) {
    lib_get();
    return lib.where;
}

static int dnn_check(const Lib *l, cudnnStatus_t st, const char *call, Err *e) {
    if (st == 0)
        return ST_OK;
    const char *name = l && l->status_name ? l->status_name(st) : NULL;
    return err_set(e, ST_RUNTIME, "cuDNN %s failed: %s (%d)", call, name ? name : "?", st);
}
#define DNN_TRY(l, e, fn, ...) dnn_check((l), (l)->fn(__VA_ARGS__), #fn, (e))

// The process's handles, one per GPU (a handle serves the GPU it was created on), each created
// once with its GPU's primary context current (cuDNN's runtime then uses that context). NULL and
// e set when there is no GPU. A handle's stream is set per call, so calls hold call_mu from
// cudnnSetStream to their last library call.
#define DNN_MAX_GPUS 64
static cudnnHandle_t handles[DNN_MAX_GPUS];
static CudaDevice handle_devs[DNN_MAX_GPUS];
static bool handle_failed[DNN_MAX_GPUS];
static Err handle_errs[DNN_MAX_GPUS];
static pthread_mutex_t handle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t call_mu = PTHREAD_MUTEX_INITIALIZER;

static cudnnHandle_t get_handle(int ordinal, Err *e) {
    const Lib *l = lib_get();
    if (!l) {
        err_set(e, ST_UNSUPPORTED, "cuDNN: %s", lib.where);
        return NULL;
    }
    if (ordinal < 0 || ordinal >= DNN_MAX_GPUS) {
        err_set(e, ST_UNSUPPORTED, "cuDNN: GPU %d is past the %d orch calls it on", ordinal,
                DNN_MAX_GPUS);
        return NULL;
    }
    pthread_mutex_lock(&handle_mu);
    // A failed creation is not retried: cuDNN loads its engine libraries on the way, which is
    // slow, and a machine without a usable GPU stays one.
    Err *he = &handle_errs[ordinal];
    if (!handles[ordinal] && !handle_failed[ordinal]) {
        const CudaApi *api = cuda_api_load(he);
        cudnnHandle_t h = NULL;
        if (api && cuda_device_open(api, ordinal, &handle_devs[ordinal], he) == ST_OK) {
            if (DNN_TRY(l, he, create, &h) != ST_OK) {
                h = NULL;
                cuda_device_close(&handle_devs[ordinal]);
            }
        }
        handles[ordinal] = h;
        handle_failed[ordinal] = h == NULL;
    }
    cudnnHandle_t h = handles[ordinal];
    if (!h)
        err_set(e, he->code ? he->code : ST_RUNTIME, "%s", he->msg);
    pthread_mutex_unlock(&handle_mu);
    return h;
}

int dnn_init(int ordinal, Err *e) {
    return get_handle(ordinal, e) ? ST_OK : e->code;
}

// The math type a heuristic result runs with under opt's precision, -1 when not allowed.
// Float32: FMA only (the default math may pick TF32 tensor cores); TF32 and BF16 allow tensor
// ops on TF32-rounded operands; FP16 also the conversion to half. Half tensors: any math on
// their own values but a conversion of bfloat16 data to float16 (which has less range).
static int allowed_math(const TargetOptions *opt, int m, int dtype) {
    if (dtype != DNN_DATA_FLOAT)
        return m >= 0 && m <= DNN_MATH_FMA &&
                       (m != DNN_MATH_TENSOR_OP_CONVERT || dtype == DNN_DATA_HALF)
                   ? m
                   : -1;
    switch (cugen_prec_of(opt, DT_FLOAT)) {
    case PREC_FP32: return m == DNN_MATH_FMA || m == DNN_MATH_DEFAULT ? DNN_MATH_FMA : -1;
    case PREC_FP16: return m >= 0 && m <= DNN_MATH_FMA ? m : -1;
    default: return m >= 0 && m <= DNN_MATH_FMA && m != DNN_MATH_TENSOR_OP_CONVERT ? m : -1;
    }
}

// Winograd's transforms lose more than float32 rounding: 2.5x the fp32 check's bound on a 4x3
// dilated kernel (H100, cuDNN 9.14); they stay offered where the precision is reduced anyway.
static bool algo_exact_enough(const TargetOptions *opt, int algo, int dtype) {
    return cugen_prec_of(opt, DT_FLOAT) != PREC_FP32 || dtype != DNN_DATA_FLOAT ||
           (algo != DNN_ALGO_WINOGRAD && algo != DNN_ALGO_WINOGRAD_NONFUSED);
}

// The FFT algorithms are not offered: a session replays every call inside a CUDA graph, and
// capturing one took up to 35 s (fft_tiling on a Segformer-B0 convolution, cuDNN 9.14, H200),
// 50 s of that model's 153 s cold compile, where capturing any other algorithm takes
// milliseconds; none was the fastest config of its convolution.
static bool algo_captures_quickly(int algo) {
    return algo != DNN_ALGO_FFT && algo != DNN_ALGO_FFT_TILING;
}

// ---- descriptors, heuristics, the call ----

static const char *algo_name(int a) {
    static const char *const names[DNN_ALGO_COUNT] = {
        "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
        "winograd",      "winograd_nonfused"};
    return a >= 0 && a < DNN_ALGO_COUNT ? names[a] : "?";
}

static const char *math_name(int m) {
    static const char *const names[] = {"default", "tensor_op", "tensor_op_convert", "fma"};
    return m >= 0 && m <= DNN_MATH_FMA ? names[m] : "?";
}

// "" for float32 (descriptions as they always were), " data=half" / " data=bf16".
static const char *data_suffix(int dtype) {
    return dtype == DNN_DATA_HALF ? " data=half" : dtype == DNN_DATA_BFLOAT16 ? " data=bf16" : "";
}

void dnn_config_pack(const CuDnnConfig *dc, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_CUDNN);
    k->p[DNP_ALGO] = dc->algo;
    k->p[DNP_MATH] = dc->math;
    k->p[DNP_WORKSPACE] = dc->workspace;
    k->p[DNP_RANK] = dc->rank;
    snprintf(k->desc, sizeof k->desc, "cls=cudnn algo=%s math=%s%s", algo_name((int)dc->algo),
             math_name((int)dc->math), data_suffix(dc->data));
}

bool dnn_config_unpack(const KernelConfig *k, CuDnnConfig *dc) {
    *dc = (CuDnnConfig){.algo = k->p[DNP_ALGO],
                        .math = k->p[DNP_MATH],
                        .workspace = k->p[DNP_WORKSPACE],
                        .rank = k->p[DNP_RANK],
                        .data = strstr(k->desc, " data=half")   ? DNN_DATA_HALF
                                : strstr(k->desc, " data=bf16") ? DNN_DATA_BFLOAT16
                                                                : DNN_DATA_FLOAT};
    return k->cls == CUCLS_CUDNN;
}

static bool epilogue_valid(int flags) {
    if (flags & ~(DNN_EPI_MASK | DNN_LAYOUT_NHWC | DNN_FILTER_KRSC))
        return false;
    int epi = flags & DNN_EPI_MASK;
    return epi == 0 || epi == DNN_EPI_BIAS || epi == (DNN_EPI_BIAS | DNN_EPI_RELU) ||
           epi == (DNN_EPI_BIAS | DNN_EPI_Z) || epi == (DNN_EPI_BIAS | DNN_EPI_Z | DNN_EPI_RELU);
}

bool dnn_call_valid(const DnnCall *c, char *why, size_t n) {
    const char *bad = NULL;
    bool sizes = c->n > 0 && c->c > 0 && c->h > 0 && c->w > 0 && c->k > 0 && c->r > 0 && c->s > 0 &&
                 c->groups > 0 && c->p > 0 && c->q > 0;
    for (int d = 0; d < 2; d++)
        sizes = sizes && c->pad[d] >= 0 && c->stride[d] > 0 && c->dil[d] > 0;
    if (!sizes) {
        bad = "non-positive sizes";
    } else if (c->c % c->groups || c->k % c->groups) {
        bad = "channels not divisible by the groups";
    } else {
        int64_t in[2] = {c->h, c->w}, ks[2] = {c->r, c->s}, out[2] = {c->p, c->q};
        for (int d = 0; d < 2 && !bad; d++) {
            int64_t span = (int64_t)c->dil[d] * (ks[d] - 1) + 1, padded = in[d] + 2 * c->pad[d];
            if (padded < span || (padded - span) / c->stride[d] + 1 != out[d])
                bad = "an output size the geometry does not give";
        }
        if (!bad && ((int64_t)c->n * c->c * c->h * c->w > INT32_MAX ||
                     (int64_t)c->k * (c->c / c->groups) * c->r * c->s > INT32_MAX ||
                     (int64_t)c->n * c->k * c->p * c->q > INT32_MAX))
            bad = "tensors of 2^31 elements or more";
    }
    if (bad) {
    } else if (!epilogue_valid(c->epilogue)) {
        bad = "an unknown epilogue";
    } else if (DNN_MATH_TYPE(c->math) > DNN_MATH_FMA ||
               c->math != DNN_MATH(DNN_MATH_TYPE(c->math), DNN_DATA_TYPE(c->math)) ||
               (DNN_DATA_TYPE(c->math) != DNN_DATA_FLOAT &&
                DNN_DATA_TYPE(c->math) != DNN_DATA_HALF &&
                DNN_DATA_TYPE(c->math) != DNN_DATA_BFLOAT16)) {
        bad = "an unknown math or data type";
    } else if (c->algo < 0 || c->algo >= DNN_ALGO_COUNT) {
        bad = "an unknown algorithm";
    } else if (c->in_x < 0 || c->in_w < 0 || c->in_x >= 32 || c->in_w >= 32 || c->in_bias >= 32 ||
               c->in_z >= 32 || c->in_bias < -1 || c->in_z < -1 ||
               (c->in_bias >= 0) != ((c->epilogue & DNN_EPI_BIAS) != 0) ||
               (c->in_z >= 0) != ((c->epilogue & DNN_EPI_Z) != 0)) {
        bad = "impossible operand positions";
    } else if (c->workspace > DNN_MAX_WORKSPACE) {
        bad = "an oversized workspace";
    } else if (!c->version) {
        bad = "no library version";
    }
    if (bad && why)
        snprintf(why, n, "%s", bad);
    return bad == NULL;
}

void dnn_call_str(const DnnCall *c, char *buf, size_t n) {
    snprintf(buf, n,
             "cudnnConvolution x=%dx%dx%dx%d w=%dx%dx%dx%d groups=%d pad=%d,%d stride=%d,%d "
             "dil=%d,%d y=%dx%dx%dx%d%s%s%s%s%s alpha=%g algo=%s math=%s%s workspace=%llu "
             "cudnn=%llu",
             c->n, c->c, c->h, c->w, c->k, c->groups > 0 ? c->c / c->groups : 0, c->r, c->s,
             c->groups, c->pad[0], c->pad[1], c->stride[0], c->stride[1], c->dil[0], c->dil[1],
             c->n, c->k, c->p, c->q, c->epilogue & DNN_EPI_Z ? " +z" : "",
             c->epilogue & DNN_EPI_BIAS ? " +bias" : "", c->epilogue & DNN_EPI_RELU ? " relu" : "",
             c->epilogue & DNN_LAYOUT_NHWC ? " nhwc" : "",
             c->epilogue & DNN_FILTER_KRSC ? " w=krsc" : "", (double)c->alpha, algo_name(c->algo),
             math_name(DNN_MATH_TYPE(c->math)), data_suffix(DNN_DATA_TYPE(c->math)),
             (unsigned long long)c->workspace, (unsigned long long)c->version);
}

void dnn_op_destroy(DnnOp *op) {
    const Lib *l = lib.dl ? &lib : NULL;
    if (l) {
        if (op->x)
            l->tensor_destroy(op->x);
        if (op->y)
            l->tensor_destroy(op->y);
        if (op->bias)
            l->tensor_destroy(op->bias);
        if (op->w)
            l->filter_destroy(op->w);
        if (op->conv)
            l->conv_destroy(op->conv);
        if (op->act)
            l->act_destroy(op->act);
    }
    memset(op, 0, sizeof *op);
}

static int make_tensor(const Lib *l, void **out, int format, int dtype, int n, int c, int h, int w,
                       Err *e) {
    cudnnTensorDescriptor_t t = NULL;
    if (DNN_TRY(l, e, tensor_create, &t))
        return e->code;
    *out = t;
    return DNN_TRY(l, e, tensor_set4d, t, format, dtype, n, c, h, w);
}

int dnn_op_create(const DnnCall *call, DnnOp *op, Err *e) {
    memset(op, 0, sizeof *op);
    op->call = *call;
    const Lib *l = lib_get();
    if (!l)
        return err_set(e, ST_UNSUPPORTED, "cuDNN: %s", lib.where);
    const DnnCall *c = call;
    cudnnFilterDescriptor_t w = NULL;
    cudnnConvolutionDescriptor_t conv = NULL;
    // Every tensor of the call's type; the convolution computes in float32 whatever the type
    // (with half tensors: the PSEUDO_HALF / PSEUDO_BFLOAT16 configurations).
    int dt = DNN_DATA_TYPE(c->math);
    int fmt = c->epilogue & DNN_LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    int wfmt = c->epilogue & DNN_FILTER_KRSC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    int rc = make_tensor(l, &op->x, fmt, dt, c->n, c->c, c->h, c->w, e);
    if (rc == ST_OK)
        rc = make_tensor(l, &op->y, fmt, dt, c->n, c->k, c->p, c->q, e);
    if (rc == ST_OK && (c->epilogue & DNN_EPI_BIAS))
        rc = make_tensor(l, &op->bias, fmt, dt, 1, c->k, 1, 1, e);
    if (rc == ST_OK && (rc = DNN_TRY(l, e, filter_create, &w)) == ST_OK) {
        op->w = w;
        rc = DNN_TRY(l, e, filter_set4d, w, dt, wfmt, c->k, c->c / c->groups, c->r, c->s);
    }
    if (rc == ST_OK && (rc = DNN_TRY(l, e, conv_create, &conv)) == ST_OK) {
        op->conv = conv;
        rc = DNN_TRY(l, e, conv_set2d, conv, c->pad[0], c->pad[1], c->stride[0], c->stride[1],
                     c->dil[0], c->dil[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    }
    if (rc == ST_OK)
        rc = DNN_TRY(l, e, conv_groups, conv, c->groups);
    if (rc == ST_OK)
        rc = DNN_TRY(l, e, conv_math, conv, DNN_MATH_TYPE(c->math));
    // The geometry as cuDNN computes it must be ours.
    int yn = 0, yc = 0, yh = 0, yw = 0;
    if (rc == ST_OK &&
        (rc = DNN_TRY(l, e, conv_out_dim, conv, op->x, w, &yn, &yc, &yh, &yw)) == ST_OK &&
        (yn != c->n || yc != c->k || yh != c->p || yw != c->q))
        rc = err_set(e, ST_INVALID, "cuDNN computes a %dx%dx%dx%d output, the call has %dx%dx%dx%d",
                     yn, yc, yh, yw, c->n, c->k, c->p, c->q);
    if (rc == ST_OK && (c->epilogue & DNN_EPI_BIAS)) {
        cudnnActivationDescriptor_t act = NULL;
        if ((rc = DNN_TRY(l, e, act_create, &act)) == ST_OK) {
            op->act = act;
            int mode =
                c->epilogue & DNN_EPI_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
            rc = DNN_TRY(l, e, act_set, act, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0);
        }
    }
    if (rc) {
        err_prefix(e, "cuDNN descriptors: ");
        dnn_op_destroy(op);
    }
    return rc;
}

int dnn_check_version(const DnnCall *call, Err *e) {
    uint64_t now = dnn_version();
    if (!now)
        return err_set(e, ST_UNSUPPORTED,
                       "compiled with cuDNN %llu, this machine has none (%s): recompile, or set "
                       "ORCH_CUDA_LIB_DIR to the library's folder",
                       (unsigned long long)call->version, dnn_describe_load());
    if (now != call->version)
        return err_set(
            e, ST_INVALID, "compiled with cuDNN %llu, this machine has %llu (%s): recompile",
            (unsigned long long)call->version, (unsigned long long)now, dnn_describe_load());
    return ST_OK;
}

int dnn_op_run(const DnnOp *op, CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr z,
               CUdeviceptr y, CUdeviceptr ws, uint64_t ws_bytes, CUstream stream, Err *e) {
    const Lib *l = lib_get();
    const DnnCall *c = &op->call;
    if (!l || !op->conv)
        return err_set(e, ST_UNSUPPORTED, "cuDNN: %s", lib.where);
    // The handle of the GPU current on this thread (the caller bound the one it runs on).
    Err ae = {0};
    cudnnHandle_t h = get_handle(cuda_current_ordinal(cuda_api_load(&ae)), e);
    if (!h)
        return e->code;
    if (c->workspace > ws_bytes)
        return err_set(e, ST_INVALID, "cuDNN call needs %llu bytes of workspace, has %llu",
                       (unsigned long long)c->workspace, (unsigned long long)ws_bytes);
    const void *xp = (const void *)(uintptr_t)x, *wp = (const void *)(uintptr_t)w;
    const void *bp = (const void *)(uintptr_t)bias, *zp = (const void *)(uintptr_t)z;
    void *yp = (void *)(uintptr_t)y, *wsp = c->workspace ? (void *)(uintptr_t)ws : NULL;
    size_t wsb = (size_t)c->workspace;
    float alpha = c->alpha, zero = 0.0f, one = 1.0f;
    bool has_z = c->epilogue & DNN_EPI_Z;
    pthread_mutex_lock(&call_mu);
    int rc = DNN_TRY(l, e, set_stream, h, stream);
    if (rc == ST_OK && (c->epilogue & DNN_EPI_BIAS) &&
        ((c->epilogue & DNN_EPI_RELU) || c->algo == DNN_ALGO_IMPLICIT_PRECOMP_GEMM)) {
        // y = act(alpha * conv(x) + alpha2 * z + bias); without a z, y stands in for z with a
        // factor 0 (cuDNN then does not read it).
        rc = DNN_TRY(l, e, forward_bias_act, h, &alpha, op->x, xp, op->w, wp, op->conv, c->algo,
                     wsp, wsb, has_z ? &one : &zero, op->y, has_z ? zp : yp, op->bias, bp, op->act,
                     op->y, yp);
    } else if (rc == ST_OK) {
        // The fused call's identity activation is IMPLICIT_PRECOMP_GEMM's only: the others
        // convolve, then add z and the bias in place.
        rc = DNN_TRY(l, e, forward, h, &alpha, op->x, xp, op->w, wp, op->conv, c->algo, wsp, wsb,
                     &zero, op->y, yp);
        if (rc == ST_OK && has_z)
            rc = DNN_TRY(l, e, add_tensor, h, &one, op->y, zp, &one, op->y, yp);
        if (rc == ST_OK && (c->epilogue & DNN_EPI_BIAS))
            rc = DNN_TRY(l, e, add_tensor, h, &one, op->bias, bp, &one, op->y, yp);
    }
    pthread_mutex_unlock(&call_mu);
    return rc;
}

int dnn_configs_of_call(DnnCall call, int ordinal, const TargetOptions *opt, KernelConfig *out,
                        int k) {
    if (k <= 0 || !dnn_available())
        return 0;
    Err e = {0};
    cudnnHandle_t h = get_handle(ordinal, &e);
    if (!h)
        return 0;
    const Lib *l = &lib;
    call.algo = 0; // any valid value: the descriptors do not depend on it
    DnnOp op;
    if (dnn_op_create(&call, &op, &e))
        return 0;
    cudnnConvolutionFwdAlgoPerf_t res[2 * DNN_ALGO_COUNT];
    int got = 0, n = 0;
    // The descriptors and the heuristic belong to the handle's device.
    bool ok = cuda_device_bind(&handle_devs[ordinal], &e) == ST_OK &&
              DNN_TRY(l, &e, heuristic, h, op.x, op.w, op.conv, op.y, (int)ORCH_COUNT(res), &got,
                      res) == ST_OK;
    int dt = DNN_DATA_TYPE(call.math);
    for (int i = 0; ok && i < got && n < k; i++) {
        int math = allowed_math(opt, res[i].mathType, dt);
        if (res[i].status != 0 || math < 0 || res[i].algo < 0 || res[i].algo >= DNN_ALGO_COUNT ||
            !algo_exact_enough(opt, res[i].algo, dt) || !algo_captures_quickly(res[i].algo))
            continue;
        // The workspace with the math type the call will run with.
        size_t ws = 0;
        if (DNN_TRY(l, &e, conv_math, op.conv, math) ||
            DNN_TRY(l, &e, ws_size, h, op.x, op.w, op.conv, op.y, res[i].algo, &ws))
            continue;
        ws = ORCH_MAX(ws, res[i].memory);
        if (ws > DNN_MAX_WORKSPACE)
            continue;
        KernelConfig *kc = &out[n];
        CuDnnConfig dc = {
            .algo = res[i].algo, .math = math, .workspace = (int64_t)ws, .rank = i, .data = dt};
        dnn_config_pack(&dc, kc);
        // The heuristics' order; the lab decides.
        kc->score = 1e-6 * (i + 1);
        bool dup = false;
        for (int j = 0; j < n && !dup; j++)
            dup = strcmp(out[j].desc, kc->desc) == 0;
        if (!dup)
            n++;
    }
    dnn_op_destroy(&op);
    return n;
}
