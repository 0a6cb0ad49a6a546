// cuBLASLt library calls (cublaslt.h): the loader, the heuristic query that makes configs of an
// analysed call, and the call itself; what a session needs (the candidate analysis, which sits on
// the linear emitter's, is cublaslt_analysis.c).
// The declarations below are cublasLt.h's (CUDA 13.0, /usr/local/cuda-13.0/include/cublasLt.h):
// the values are ABI, unchanged since cuBLASLt 11.
#define _GNU_SOURCE
#include "cublaslt.h"

#include "../../plan/plan.h"
#include "cuda_libs.h"
#include "cugen_lin_internal.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- cublasLt.h, the part used here ----

typedef int cublasStatus_t; // CUBLAS_STATUS_SUCCESS = 0
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_st *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_st *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_st *cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

enum { // cublasLtMatmulDescAttributes_t
    DESC_TRANSA = 3,
    DESC_TRANSB = 4,
    DESC_EPILOGUE = 7,
    DESC_BIAS_POINTER = 8,
};
enum { // cublasLtMatrixLayoutAttribute_t
    LAYOUT_BATCH_COUNT = 5,
    LAYOUT_STRIDED_BATCH_OFFSET = 6,
};
enum { // cublasLtMatmulPreferenceAttributes_t
    PREF_MAX_WORKSPACE_BYTES = 1,
    PREF_MIN_ALIGNMENT_A_BYTES = 5,
    PREF_MIN_ALIGNMENT_B_BYTES = 6,
    PREF_MIN_ALIGNMENT_C_BYTES = 7,
    PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
enum {                    // cublasLtMatmulAlgoConfigAttributes_t
    ALGO_ID = 0,          // int32
    ALGO_TILE_ID = 1,     // uint32
    ALGO_SPLITK_NUM = 2,  // int32
    ALGO_REDUCTION = 3,   // uint32
    ALGO_SWIZZLING = 4,   // uint32
    ALGO_CUSTOM = 5,      // uint32
    ALGO_STAGES_ID = 6,   // uint32
    ALGO_INNER_SHAPE = 7, // uint16
    ALGO_CLUSTER = 8,     // uint16
};

typedef struct Lib {
    void *dl;
    cublasStatus_t (*create)(cublasLtHandle_t *);
    const char *(*status_name)(cublasStatus_t);
    size_t (*get_version)(void);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, int compute, int scale_type);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, int attr, const void *buf, size_t n);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, int type, uint64_t rows,
                                    uint64_t cols, int64_t ld);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*layout_set)(cublasLtMatrixLayout_t, int attr, const void *buf, size_t n);
    cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, int attr, const void *buf, size_t n);
    cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                cublasLtMatmulHeuristicResult_t *, int *);
    cublasStatus_t (*algo_get)(const cublasLtMatmulAlgo_t *, int attr, void *buf, size_t n,
                               size_t *written);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *alpha,
                             const void *A, cublasLtMatrixLayout_t, const void *B,
                             cublasLtMatrixLayout_t, const void *beta, const void *C,
                             cublasLtMatrixLayout_t, void *D, cublasLtMatrixLayout_t,
                             const cublasLtMatmulAlgo_t *, void *ws, size_t ws_bytes,
                             CUstream stream);
    uint64_t version;
    char where[512]; // the file opened, or why none was
} Lib;

static Lib lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

// The library by its sonames (cuda_libs.h: ORCH_CUDA_LIB_DIR, the loader path, the toolkit).
static void load_once(void) {
    static const char *const sonames[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                          "libcublasLt.so"};
    Lib l = {0};
    const CudaLibSym syms[] = {
        {(void **)&l.create, "cublasLtCreate"},
        {(void **)&l.status_name, "cublasLtGetStatusName"},
        {(void **)&l.get_version, "cublasLtGetVersion"},
        {(void **)&l.desc_create, "cublasLtMatmulDescCreate"},
        {(void **)&l.desc_destroy, "cublasLtMatmulDescDestroy"},
        {(void **)&l.desc_set, "cublasLtMatmulDescSetAttribute"},
        {(void **)&l.layout_create, "cublasLtMatrixLayoutCreate"},
        {(void **)&l.layout_destroy, "cublasLtMatrixLayoutDestroy"},
        {(void **)&l.layout_set, "cublasLtMatrixLayoutSetAttribute"},
        {(void **)&l.pref_create, "cublasLtMatmulPreferenceCreate"},
        {(void **)&l.pref_destroy, "cublasLtMatmulPreferenceDestroy"},
        {(void **)&l.pref_set, "cublasLtMatmulPreferenceSetAttribute"},
        {(void **)&l.heuristic, "cublasLtMatmulAlgoGetHeuristic"},
        {(void **)&l.algo_get, "cublasLtMatmulAlgoConfigGetAttribute"},
        {(void **)&l.matmul, "cublasLtMatmul"},
    };
    l.dl = cuda_lib_open(sonames, ORCH_COUNT(sonames), syms, ORCH_COUNT(syms), NULL, NULL, l.where,
                         sizeof l.where);
    if (l.dl)
        l.version = (uint64_t)l.get_version();
    lib = l;
}

static const Lib *lib_get(void) {
    pthread_once(&lib_once, load_once);
    return lib.dl ? &lib : NULL;
}

bool blaslt_available(void) {
    return lib_get() != NULL;
}

uint64_t blaslt_version(void) {
    const Lib *l = lib_get();
    return l ? l->version : 0;
}

const char *blaslt_describe_load(void) {
    lib_get();
    return lib.where;
}

static int lt_check(const Lib *l, cublasStatus_t st, const char *call, Err *e) {
    if (st == 0)
        return ST_OK;
    const char *name = l && l->status_name ? l->status_name(st) : NULL;
    return err_set(e, ST_RUNTIME, "cuBLASLt %s failed: %s (%d)", call, name ? name : "?", st);
}
#define LT_TRY(l, e, fn, ...) lt_check((l), (l)->fn(__VA_ARGS__), #fn, (e))

// The process's handles, one per GPU (a handle serves the GPU it was created on), each created
// once with its GPU's primary context current (cuBLASLt's runtime then uses that context). NULL
// and e set when there is no GPU.
#define LT_MAX_GPUS 64
static cublasLtHandle_t handles[LT_MAX_GPUS];
static CudaDevice handle_devs[LT_MAX_GPUS];
static pthread_mutex_t handle_mu = PTHREAD_MUTEX_INITIALIZER;

static cublasLtHandle_t get_handle(int ordinal, Err *e) {
    const Lib *l = lib_get();
    if (!l) {
        err_set(e, ST_UNSUPPORTED, "cuBLASLt: %s", lib.where);
        return NULL;
    }
    if (ordinal < 0 || ordinal >= LT_MAX_GPUS) {
        err_set(e, ST_UNSUPPORTED, "cuBLASLt: GPU %d is past the %d orch calls it on", ordinal,
                LT_MAX_GPUS);
        return NULL;
    }
    pthread_mutex_lock(&handle_mu);
    if (!handles[ordinal]) {
        const CudaApi *api = cuda_api_load(e);
        cublasLtHandle_t h = NULL;
        if (api && cuda_device_open(api, ordinal, &handle_devs[ordinal], e) == ST_OK) {
            if (LT_TRY(l, e, create, &h) != ST_OK) {
                h = NULL;
                cuda_device_close(&handle_devs[ordinal]);
            }
        }
        handles[ordinal] = h;
    }
    cublasLtHandle_t h = handles[ordinal];
    pthread_mutex_unlock(&handle_mu);
    return h;
}

// The handle of the GPU current on this thread (the caller bound the one it runs on).
static cublasLtHandle_t current_handle(Err *e) {
    Err ae = {0};
    return get_handle(cuda_current_ordinal(cuda_api_load(&ae)), e);
}

int blaslt_init(int ordinal, Err *e) {
    return get_handle(ordinal, e) ? ST_OK : e->code;
}

bool blaslt_ready(void) {
    Err e = {0};
    return get_handle(0, &e) != NULL;
}

// ---- descriptors, heuristics, the call ----

// Whether compute is one blaslt_analyse makes for half operands: CUBLAS_COMPUTE_32F, A/B of a
// half type, C/D of that type or float32.
static bool half_types_valid(int32_t compute) {
    int ab = BLASLT_TYPE_AB(compute), cd = BLASLT_TYPE_CD(compute);
    return compute == BLASLT_COMPUTE(BLASLT_COMPUTE_32F, ab, cd) &&
           (ab == BLASLT_R_16F || ab == BLASLT_R_16BF) && (cd == ab || cd == BLASLT_R_32F);
}

bool blaslt_call_valid(const BlasLtCall *c, char *why, size_t n) {
    const char *bad = NULL;
    int64_t rows_a = c->trans_a ? c->k : c->m, rows_b = c->trans_b ? c->n : c->k;
    if (c->m <= 0 || c->n <= 0 || c->k <= 0 || c->batch <= 0)
        bad = "non-positive sizes";
    else if ((c->trans_a != 0 && c->trans_a != 1) || (c->trans_b != 0 && c->trans_b != 1))
        bad = "an unknown transposition";
    else if (c->lda < rows_a || c->ldb < rows_b || c->ldc < c->m)
        bad = "a leading dimension below its rows";
    else if (c->stride_a < 0 || c->stride_b < 0 || c->stride_c < 0 ||
             (c->batch > 1 && c->stride_c < (int64_t)c->ldc * c->n))
        bad = "impossible batch strides";
    else if (c->epilogue != BLASLT_EPI_NONE && c->epilogue != BLASLT_EPI_RELU &&
             c->epilogue != BLASLT_EPI_BIAS && c->epilogue != BLASLT_EPI_RELU_BIAS &&
             c->epilogue != BLASLT_EPI_GELU && c->epilogue != BLASLT_EPI_GELU_BIAS)
        bad = "an unknown epilogue";
    else if (c->compute != BLASLT_COMPUTE_32F && c->compute != BLASLT_COMPUTE_32F_FAST_16F &&
             c->compute != BLASLT_COMPUTE_32F_FAST_16BF &&
             c->compute != BLASLT_COMPUTE_32F_FAST_TF32 && !half_types_valid(c->compute))
        bad = "an unknown compute type";
    else if (c->in_a < 0 || c->in_b < 0 || c->in_a >= 32 || c->in_b >= 32 || c->in_bias >= 32 ||
             c->in_res < -1 || c->in_res >= 32 ||
             (c->in_bias < 0) != !(c->epilogue & BLASLT_EPI_BIAS))
        bad = "impossible operand positions";
    else if (c->workspace > BLASLT_MAX_WORKSPACE)
        bad = "an oversized workspace";
    else if (!c->version)
        bad = "no library version";
    if (bad && why)
        snprintf(why, n, "%s", bad);
    return bad == NULL;
}

// "32f", "16f", "16bf" for a cudaDataType_t of lt_type's.
static const char *type_name(int type) {
    return type == BLASLT_R_16F ? "16f" : type == BLASLT_R_16BF ? "16bf" : "32f";
}

void blaslt_call_str(const BlasLtCall *c, char *buf, size_t n) {
    static const char *const epi[] = {"?", "none", "relu", "?", "bias", "?", "relu+bias"};
    char res[32] = "";
    if (c->in_res >= 0)
        snprintf(res, sizeof res, " residual=in%d beta=1", c->in_res);
    char types[32] = "";
    if (BLASLT_TYPE_AB(c->compute) || BLASLT_TYPE_CD(c->compute))
        snprintf(types, sizeof types, " types=%s/%s", type_name(BLASLT_TYPE_AB(c->compute)),
                 type_name(BLASLT_TYPE_CD(c->compute)));
    snprintf(buf, n,
             "cublasLtMatmul m=%d n=%d k=%d op=%c%c ld=%lld/%lld/%lld batch=%d strides=%lld/%lld/"
             "%lld epilogue=%s%s alpha=%g compute=%d%s workspace=%llu cublasLt=%llu",
             c->m, c->n, c->k, c->trans_a ? 'T' : 'N', c->trans_b ? 'T' : 'N', (long long)c->lda,
             (long long)c->ldb, (long long)c->ldc, c->batch, (long long)c->stride_a,
             (long long)c->stride_b, (long long)c->stride_c,
             c->epilogue >= 0 && c->epilogue <= 6  ? epi[c->epilogue]
             : c->epilogue == BLASLT_EPI_GELU      ? "gelu"
             : c->epilogue == BLASLT_EPI_GELU_BIAS ? "gelu+bias"
                                                   : "?",
             res, (double)c->alpha, BLASLT_COMPUTE_TYPE(c->compute), types,
             (unsigned long long)c->workspace, (unsigned long long)c->version);
}

void blaslt_op_destroy(BlasLtOp *op) {
    const Lib *l = lib.dl ? &lib : NULL;
    if (l) {
        if (op->desc)
            l->desc_destroy(op->desc);
        if (op->la)
            l->layout_destroy(op->la);
        if (op->lb)
            l->layout_destroy(op->lb);
        if (op->lc)
            l->layout_destroy(op->lc);
    }
    memset(op, 0, sizeof *op);
}

static int make_layout(const Lib *l, cublasLtMatrixLayout_t *out, int type, int64_t rows,
                       int64_t cols, int64_t ld, int32_t batch, int64_t stride, Err *e) {
    if (LT_TRY(l, e, layout_create, out, type, (uint64_t)rows, (uint64_t)cols, ld)) {
        *out = NULL;
        return e->code;
    }
    if (batch > 1 &&
        (LT_TRY(l, e, layout_set, *out, LAYOUT_BATCH_COUNT, &batch, sizeof batch) ||
         LT_TRY(l, e, layout_set, *out, LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride)))
        return e->code;
    return ST_OK;
}

int blaslt_op_create(const BlasLtCall *call, BlasLtOp *op, Err *e) {
    memset(op, 0, sizeof *op);
    op->call = *call;
    const Lib *l = lib_get();
    if (!l)
        return err_set(e, ST_UNSUPPORTED, "cuBLASLt: %s", lib.where);
    const BlasLtCall *c = call;
    int32_t ta = c->trans_a, tb = c->trans_b;
    uint32_t epi = (uint32_t)c->epilogue;
    // alpha and beta are float32 for every type here (the scale type of CUBLAS_COMPUTE_32F*).
    int ab = BLASLT_TYPE_AB(c->compute), cd = BLASLT_TYPE_CD(c->compute);
    int rc = LT_TRY(l, e, desc_create, (cublasLtMatmulDesc_t *)&op->desc,
                    BLASLT_COMPUTE_TYPE(c->compute), BLASLT_R_32F);
    if (rc)
        op->desc = NULL;
    if (rc == ST_OK)
        rc = LT_TRY(l, e, desc_set, op->desc, DESC_TRANSA, &ta, sizeof ta);
    if (rc == ST_OK)
        rc = LT_TRY(l, e, desc_set, op->desc, DESC_TRANSB, &tb, sizeof tb);
    if (rc == ST_OK)
        rc = LT_TRY(l, e, desc_set, op->desc, DESC_EPILOGUE, &epi, sizeof epi);
    if (rc == ST_OK)
        rc = make_layout(l, (cublasLtMatrixLayout_t *)&op->la, ab, c->trans_a ? c->k : c->m,
                         c->trans_a ? c->m : c->k, c->lda, c->batch, c->stride_a, e);
    if (rc == ST_OK)
        rc = make_layout(l, (cublasLtMatrixLayout_t *)&op->lb, ab, c->trans_b ? c->n : c->k,
                         c->trans_b ? c->k : c->n, c->ldb, c->batch, c->stride_b, e);
    // The bias has D's type: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default.
    if (rc == ST_OK)
        rc = make_layout(l, (cublasLtMatrixLayout_t *)&op->lc, cd, c->m, c->n, c->ldc, c->batch,
                         c->stride_c, e);
    if (rc) {
        err_prefix(e, "cuBLASLt descriptors: ");
        blaslt_op_destroy(op);
    }
    return rc;
}

int blaslt_check_version(const BlasLtCall *call, Err *e) {
    uint64_t now = blaslt_version();
    if (!now)
        return err_set(e, ST_UNSUPPORTED,
                       "compiled with cuBLASLt %llu, this machine has none (%s): recompile, or "
                       "set ORCH_CUDA_LIB_DIR to the library's folder",
                       (unsigned long long)call->version, blaslt_describe_load());
    if (now != call->version)
        return err_set(
            e, ST_INVALID, "compiled with cuBLASLt %llu, this machine has %llu (%s): recompile",
            (unsigned long long)call->version, (unsigned long long)now, blaslt_describe_load());
    return ST_OK;
}

int blaslt_op_run(const BlasLtOp *op, CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias,
                  CUdeviceptr res, CUdeviceptr d, CUdeviceptr ws, uint64_t ws_bytes,
                  CUstream stream, Err *e) {
    const Lib *l = lib_get();
    const BlasLtCall *c = &op->call;
    if (!l || !op->desc)
        return err_set(e, ST_UNSUPPORTED, "cuBLASLt: %s", lib.where);
    cublasLtHandle_t h = current_handle(e);
    if (!h)
        return e->code;
    if (c->workspace > ws_bytes)
        return err_set(e, ST_INVALID, "cuBLASLt call needs %llu bytes of workspace, has %llu",
                       (unsigned long long)c->workspace, (unsigned long long)ws_bytes);
    if (c->in_bias >= 0) {
        const void *bp = (const void *)(uintptr_t)bias;
        if (LT_TRY(l, e, desc_set, op->desc, DESC_BIAS_POINTER, &bp, sizeof bp))
            return e->code;
    }
    if (c->in_res >= 0 && !res)
        return err_set(e, ST_INVALID, "cuBLASLt call with a residual given none");
    // C is the residual (same layout as D) with beta = 1, else D itself with beta = 0.
    float alpha = c->alpha, beta = c->in_res >= 0 ? 1.0f : 0.0f;
    cublasLtMatmulAlgo_t algo;
    memcpy(algo.data, c->algo, sizeof algo.data);
    void *dp = (void *)(uintptr_t)d;
    const void *cp = c->in_res >= 0 ? (const void *)(uintptr_t)res : dp;
    return LT_TRY(l, e, matmul, h, op->desc, &alpha, (const void *)(uintptr_t)a, op->la,
                  (const void *)(uintptr_t)b, op->lb, &beta, cp, op->lc, dp, op->lc, &algo,
                  c->workspace ? (void *)(uintptr_t)ws : NULL, (size_t)c->workspace, stream);
}

static const char *ct_name(int ct) {
    switch (BLASLT_COMPUTE_TYPE(ct)) {
    case BLASLT_COMPUTE_32F_FAST_TF32: return "tf32";
    case BLASLT_COMPUTE_32F_FAST_16F: return "16f";
    case BLASLT_COMPUTE_32F_FAST_16BF: return "16bf";
    default: return "32f";
    }
}

// The attributes of algorithm a the desc names, into bc.
static void algo_attrs(const Lib *l, const cublasLtMatmulAlgo_t *a, CuBlasLtConfig *bc) {
    uint16_t inner = 0, cluster = 0;
    size_t w;
    l->algo_get(a, ALGO_ID, &bc->id, sizeof bc->id, &w);
    l->algo_get(a, ALGO_TILE_ID, &bc->tile, sizeof bc->tile, &w);
    l->algo_get(a, ALGO_SPLITK_NUM, &bc->splitk, sizeof bc->splitk, &w);
    l->algo_get(a, ALGO_REDUCTION, &bc->red, sizeof bc->red, &w);
    l->algo_get(a, ALGO_SWIZZLING, &bc->swz, sizeof bc->swz, &w);
    l->algo_get(a, ALGO_CUSTOM, &bc->cust, sizeof bc->cust, &w);
    l->algo_get(a, ALGO_STAGES_ID, &bc->stages, sizeof bc->stages, &w);
    l->algo_get(a, ALGO_INNER_SHAPE, &inner, sizeof inner, &w);
    l->algo_get(a, ALGO_CLUSTER, &cluster, sizeof cluster, &w);
    bc->inner = inner;
    bc->cluster = cluster;
}

void blaslt_config_pack(const CuBlasLtConfig *bc, KernelConfig *k) {
    cugen_config_clear(k, CUCLS_BLASLT);
    memcpy(&k->p[BLP_ALGO], bc->algo, sizeof bc->algo);
    k->p[BLP_WORKSPACE] = bc->workspace;
    k->p[BLP_RANK] = bc->rank;
    int ct = bc->compute;
    char types[32] = "";
    if (BLASLT_TYPE_AB(ct) || BLASLT_TYPE_CD(ct))
        snprintf(types, sizeof types, " ab=%s cd=%s", type_name(BLASLT_TYPE_AB(ct)),
                 type_name(BLASLT_TYPE_CD(ct)));
    snprintf(k->desc, sizeof k->desc,
             "cls=cublaslt algo=%d tile=%u stages=%u splitk=%d red=%u swz=%u cust=%u inner=%u "
             "cluster=%u ct=%s%s",
             bc->id, bc->tile, bc->stages, bc->splitk, bc->red, bc->swz, bc->cust, bc->inner,
             bc->cluster, ct_name(ct), types);
}

// The cudaDataType_t type_name names, and the compute type ct_name names (BLASLT_COMPUTE_32F for
// "32f").
static int type_of_name(const char *s) {
    return !strcmp(s, "16f") ? BLASLT_R_16F : !strcmp(s, "16bf") ? BLASLT_R_16BF : BLASLT_R_32F;
}

static int ct_of_name(const char *s) {
    return !strcmp(s, "tf32")   ? BLASLT_COMPUTE_32F_FAST_TF32
           : !strcmp(s, "16f")  ? BLASLT_COMPUTE_32F_FAST_16F
           : !strcmp(s, "16bf") ? BLASLT_COMPUTE_32F_FAST_16BF
                                : BLASLT_COMPUTE_32F;
}

bool blaslt_config_unpack(const KernelConfig *k, CuBlasLtConfig *bc) {
    memset(bc, 0, sizeof *bc);
    memcpy(bc->algo, &k->p[BLP_ALGO], sizeof bc->algo);
    bc->workspace = k->p[BLP_WORKSPACE];
    bc->rank = k->p[BLP_RANK];
    CuBlasLtConfig d = *bc;
    char ct[16] = "", ab[16] = "", cd[16] = "";
    int got = sscanf(k->desc,
                     "cls=cublaslt algo=%d tile=%u stages=%u splitk=%d red=%u swz=%u cust=%u "
                     "inner=%u cluster=%u ct=%15s ab=%15s cd=%15s",
                     &d.id, &d.tile, &d.stages, &d.splitk, &d.red, &d.swz, &d.cust, &d.inner,
                     &d.cluster, ct, ab, cd);
    if (got == 10 || got == 12) {
        d.compute = BLASLT_COMPUTE(ct_of_name(ct), got == 12 ? type_of_name(ab) : 0,
                                   got == 12 ? type_of_name(cd) : 0);
        *bc = d;
    }
    return k->cls == CUCLS_BLASLT;
}

int blaslt_configs_of_call(BlasLtCall call, int ordinal, KernelConfig *out, int k) {
    if (k <= 0 || !blaslt_available())
        return 0;
    Err e = {0};
    cublasLtHandle_t h = get_handle(ordinal, &e);
    if (!h)
        return 0;
    const Lib *l = &lib;
    BlasLtOp op;
    if (blaslt_op_create(&call, &op, &e))
        return 0;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = BLASLT_MAX_WORKSPACE;
    int got = 0;
    cublasLtMatmulHeuristicResult_t *res = xcalloc((size_t)k, sizeof *res);
    bool ok = LT_TRY(l, &e, pref_create, &pref) == ST_OK;
    ok = ok && LT_TRY(l, &e, pref_set, pref, PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == ST_OK &&
         LT_TRY(l, &e, pref_set, pref, PREF_MIN_ALIGNMENT_A_BYTES, &call.align_a,
                sizeof call.align_a) == ST_OK &&
         LT_TRY(l, &e, pref_set, pref, PREF_MIN_ALIGNMENT_B_BYTES, &call.align_b,
                sizeof call.align_b) == ST_OK &&
         LT_TRY(l, &e, pref_set, pref, PREF_MIN_ALIGNMENT_C_BYTES, &call.align_c,
                sizeof call.align_c) == ST_OK &&
         LT_TRY(l, &e, pref_set, pref, PREF_MIN_ALIGNMENT_D_BYTES, &call.align_c,
                sizeof call.align_c) == ST_OK;
    // The descriptors and the heuristic belong to the handle's device.
    ok = ok && cuda_device_bind(&handle_devs[ordinal], &e) == ST_OK;
    ok = ok && LT_TRY(l, &e, heuristic, h, op.desc, op.la, op.lb, op.lc, op.lc, pref, k, res,
                      &got) == ST_OK;
    int n = 0;
    for (int i = 0; ok && i < got && n < k; i++) {
        if (res[i].state != 0 || res[i].workspaceSize > BLASLT_MAX_WORKSPACE)
            continue;
        KernelConfig *kc = &out[n];
        CuBlasLtConfig bc = {
            .workspace = (int64_t)res[i].workspaceSize, .rank = i, .compute = call.compute};
        _Static_assert(sizeof bc.algo == sizeof res[i].algo.data, "an algorithm is 64 bytes");
        memcpy(bc.algo, res[i].algo.data, sizeof bc.algo);
        algo_attrs(l, &res[i].algo, &bc);
        blaslt_config_pack(&bc, kc);
        // The heuristics' order; the lab decides.
        kc->score = 1e-6 * (i + 1);
        bool dup = false;
        for (int j = 0; j < n && !dup; j++)
            dup = strcmp(out[j].desc, kc->desc) == 0;
        if (!dup)
            n++;
    }
    if (pref)
        l->pref_destroy(pref);
    free(res);
    blaslt_op_destroy(&op);
    return n;
}
