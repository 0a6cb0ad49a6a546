// orch export for the CUDA target: one plan of an artefact written as a CUDA source tree that
// builds with the CUDA toolkit (nvcc, NVRTC, cuBLASLt / cuDNN where the plan calls them) and runs
// with no orch (docs/export.md). kernels.cu is the artefact's kernel source verbatim (the NVRTC
// program the compile built the module's cubin from), compiled at build time by nvrtc_build.c
// with orch's NVRTC options for the artefact's architecture, so the tree's kernels are the
// artefact's machine code; model.cu (nvcc) is the plan as the session runs it: one device arena
// at the plan's offsets, the constants read from weights.bin and uploaded, each kernel launched
// with the launch table's grid, block and dynamic shared memory, each library call made with the
// descriptors, algorithm and workspace the session makes it with, copies into outputs, the whole
// captured once as a CUDA graph and replayed by model_run (host buffers) and model_run_device
// (device buffers, after a caller's stream).
// Needs: a one-plan view of a CUDA artefact that carries its kernel source (compiled by this
// orch). Guarantees: the tree computes what the artefact's session computes, launch for launch
// (the same cubin where the toolkit's NVRTC is the compile's, which nvrtc_build checks; the same
// geometry; the same library calls and library versions, which model_init checks); a plan the
// tree cannot run (an interpreted launch, a launch the module's table lacks or has impossible
// operands for) is refused naming the launch, op and ONNX nodes, and nothing is written.
#include "export_cuda.h"

#include "../export_tree.h"
#include "cuda_api.h"
#include "session_cuda.h"

#include <stdlib.h>
#include <string.h>

// What model.cu needs beyond the plan: each launch's entry of the module's launch table, the
// operator kernels' status words and the library calls' indices.
typedef struct CudaTree {
    const ExportPlan *x;
    CudaLaunchTable t;
    const CudaLaunch **geo; // per launch: its table entry (NULL: not a generated kernel)
    int *flag;              // per launch: its status word (an operator kernel), else -1
    int *call;              // per launch: its index among the cuBLASLt or cuDNN calls, else -1
    int *kern;              // per launch: its kernel's index in model.cu's table, else -1
    int n_flags, n_blas, n_dnn, n_kern;
    uint64_t workspace;         // the largest library call's
    uint64_t blas_ver, dnn_ver; // the libraries' versions the calls were chosen with
    char arch[16];              // "sm_90a"
    char nvrtc[16];             // the compile's NVRTC version, "13.0"
} CudaTree;

static void tree_free(CudaTree *c) {
    cuda_launch_table_free(&c->t);
    free(c->geo);
    free(c->flag);
    free(c->call);
    free(c->kern);
}

static const Prim *sink_of(const ExportPlan *x, const PlanLaunch *L) {
    return L->sink >= 0 ? x->pg->prims[L->sink] : NULL;
}

static int refuse(const ExportPlan *x, int i, const char *why, Err *e) {
    const PlanLaunch *L = &x->P->launches[i];
    const Prim *p = sink_of(x, L);
    char *nodes = export_nodes_text(L);
    err_set(e, ST_UNSUPPORTED, "%s: launch %d (%s, %s, ONNX nodes '%s'): %s", x->path, i,
            L->symbol ? L->symbol : "?",
            p ? (p->kind == PRIM_OPAQUE && p->node ? p->node->op : prim_kind_name(p->kind))
              : "copy",
            nodes, why);
    free(nodes);
    return e->code;
}

// The architecture the fingerprint names ("...|sm_90|..."), as the compile named it to NVRTC.
static int arch_of(const ArtifactContents *a, const char *path, char *arch, size_t n, Err *e) {
    const char *s = strstr(a->h.fingerprint, "|sm_");
    int cc = s ? atoi(s + 4) : 0;
    if (cc < 10)
        return err_set(e, ST_INVALID,
                       "%s: the artefact's device fingerprint '%s' names no GPU architecture: it "
                       "is damaged; recompile with orch compile -t cuda",
                       path, a->h.fingerprint);
    cuda_arch_name(cc / 10, cc % 10, arch, n);
    return ST_OK;
}

// A library call's operand positions among the launch's inputs (-1: none): cuBLASLt's A, B,
// bias, residual; cuDNN's x, w, bias, z (the order lt_run and dnn_run take them in).
static void call_operands(const CudaLaunch *g, int pos[4]) {
    bool lt = g->lib == CUDA_LIB_BLASLT;
    pos[0] = lt ? g->blas.in_a : g->dnn.in_x;
    pos[1] = lt ? g->blas.in_b : g->dnn.in_w;
    pos[2] = lt ? g->blas.in_bias : g->dnn.in_bias;
    pos[3] = lt ? g->blas.in_res : g->dnn.in_z;
}

// Launch i's library call: its operands checked, numbered among its library's calls; every call
// of one library must have been chosen with one version (the tree links one).
static int take_call(CudaTree *c, int i, Err *e) {
    const PlanLaunch *L = &c->x->P->launches[i];
    const CudaLaunch *g = c->geo[i];
    bool lt = g->lib == CUDA_LIB_BLASLT;
    const char *lib = lt ? "cuBLASLt" : "cuDNN";
    uint64_t version = lt ? g->blas.version : g->dnn.version;
    uint64_t *ver = lt ? &c->blas_ver : &c->dnn_ver;
    int *count = lt ? &c->n_blas : &c->n_dnn;
    int pos[4];
    call_operands(g, pos);
    char why[200];
    for (int k = 0; k < 4; k++)
        if (pos[k] >= L->n_in) {
            snprintf(why, sizeof why,
                     "its %s call reads an input the launch does not have: the artefact is "
                     "damaged; recompile",
                     lib);
            return refuse(c->x, i, why, e);
        }
    if (*count && version != *ver) {
        snprintf(why, sizeof why,
                 "its %s call was chosen with another %s version than the plan's other calls; "
                 "recompile",
                 lib, lib);
        return refuse(c->x, i, why, e);
    }
    *ver = version;
    c->call[i] = (*count)++;
    c->workspace = ORCH_MAX(c->workspace, lt ? g->blas.workspace : g->dnn.workspace);
    return ST_OK;
}

// Reads the launch table and checks every launch against it as the session does.
static int tree_analyse(const ArtifactContents *a, const ExportPlan *x, CudaTree *c, Err *e) {
    memset(c, 0, sizeof *c);
    c->x = x;
    const Plan *P = x->P;
    c->geo = xcalloc((size_t)P->n_launches + 1, sizeof *c->geo);
    c->flag = xcalloc((size_t)P->n_launches + 1, sizeof(int));
    c->call = xcalloc((size_t)P->n_launches + 1, sizeof(int));
    c->kern = xcalloc((size_t)P->n_launches + 1, sizeof(int));
    int rc = arch_of(a, x->path, c->arch, sizeof c->arch, e);
    const char *nv = strstr(a->h.fingerprint, "|nvrtc=");
    snprintf(c->nvrtc, sizeof c->nvrtc, "%.*s", nv ? (int)strcspn(nv + 7, "|") : 0,
             nv ? nv + 7 : "");
    const uint8_t *cubin = NULL;
    size_t cubin_size = 0;
    if (rc == ST_OK && x->generated)
        rc = cuda_module_unpack(a->so, a->so_size, x->path, &cubin, &cubin_size, &c->t, e);
    char *src = NULL;
    if (rc == ST_OK && x->generated) {
        src = xmalloc(a->src_size + 1);
        memcpy(src, a->src, a->src_size);
        src[a->src_size] = '\0';
    }
    for (int i = 0; rc == ST_OK && i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        c->flag[i] = c->call[i] = c->kern[i] = -1;
        if (L->kind != PLAN_GENERATED)
            continue;
        const CudaLaunch *g = cuda_launch_table_find(&c->t, L->symbol);
        const Prim *p = sink_of(x, L);
        bool op = p && ckernel_op_abi(p);
        if (!g) {
            rc = refuse(x, i,
                        "the module's launch table has no entry for it: the artefact is "
                        "damaged; recompile with orch compile -t cuda",
                        e);
            break;
        }
        if (L->n_in + (op ? ORCH_CUDA_OP_SLOTS : 0) > ORCH_CUDA_MAX_IN || (op && L->n_out > 2) ||
            (op && g->lib)) {
            rc = refuse(x, i,
                        "its operands do not fit the CUDA kernel ABI: the artefact is "
                        "damaged; recompile with orch compile -t cuda",
                        e);
            break;
        }
        c->geo[i] = g;
        bool empty = export_launch_empty(x->pg, L);
        if (g->lib) {
            rc = take_call(c, i, e);
            if (rc)
                break;
        } else if (!strstr(src, L->symbol)) {
            rc = refuse(x, i,
                        "the artefact's kernel source lacks this kernel: it is damaged; "
                        "recompile with orch compile -t cuda",
                        e);
            break;
        } else {
            for (int k = 0; k < i && c->kern[i] < 0; k++)
                if (c->kern[k] >= 0 && strcmp(P->launches[k].symbol, L->symbol) == 0)
                    c->kern[i] = c->kern[k];
            if (c->kern[i] < 0)
                c->kern[i] = c->n_kern++;
            if (op && !empty)
                c->flag[i] = c->n_flags++;
        }
    }
    free(src);
    return rc;
}

// The device address of tensor t as model.cu spells it (the session's dev_addr).
static void dev_expr(StrBuf *b, const Plan *P, int t) {
    if (t < 0) {
        sb_puts(b, "NULL");
        return;
    }
    const PlanTensor *T = &P->tensors[t];
    switch (T->place) {
    case PLACE_INPUT: sb_printf(b, "m->d_in[%d]", T->index); return;
    case PLACE_OUTPUT: sb_printf(b, "m->d_out[%d]", T->index); return;
    case PLACE_CONST:
    case PLACE_ARENA:
        if (T->bytes == 0)
            sb_puts(b, "m->dummy");
        else
            sb_printf(b, "m->%s + %lld", T->place == PLACE_CONST ? "consts" : "arena",
                      (long long)T->offset);
        return;
    default: ORCH_ASSERT(!"a launch operand with no place");
    }
}

// An operand of a library call: input position j of launch L, or NULL (j < 0).
static void call_operand(StrBuf *b, const Plan *P, const PlanLaunch *L, int j) {
    if (j < 0)
        sb_puts(b, "NULL");
    else
        dev_expr(b, P, L->in[j]);
}

// The table types of the library calls in model.cu: what the session's calls are made of.
static const char LT_SPEC[] =
    "// The cuBLASLt calls, made as the session makes them (orch's cublaslt.c): cuBLASLt's\n"
    "// column-major problem, types, epilogue, alpha, and the algorithm and workspace the "
    "compile chose.\n"
    "typedef struct LtSpec {\n"
    "    int compute, type_ab, type_cd, trans_a, trans_b, epilogue;\n"
    "    long long m, n, k, lda, ldb, ldc;\n"
    "    int batch;\n"
    "    long long stride_a, stride_b, stride_c;\n"
    "    float alpha;\n"
    "    int has_bias, has_res;\n"
    "    unsigned long long algo[8], workspace;\n"
    "} LtSpec;\n";
static const char DNN_SPEC[] =
    "// The cuDNN convolutions, made as the session makes them (orch's cudnn.c): shapes, "
    "padding,\n// strides, dilations, epilogue (bias, ReLU, z), layouts, math and data type, "
    "alpha, and the\n// algorithm and workspace the compile chose.\n"
    "typedef struct DnnSpec {\n"
    "    int n, c, h, w, k, r, s, groups, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, p, q;\n"
    "    int bias, relu, z, nhwc, krsc, math, dtype, algo;\n"
    "    float alpha;\n"
    "    unsigned long long workspace;\n"
    "} DnnSpec;\n";

// One row of lt_spec / dnn_spec: the call's fields as the session's op_create reads them.
static void call_row(StrBuf *b, const CudaLaunch *g) {
    if (g->lib == CUDA_LIB_BLASLT) {
        const BlasLtCall *l = &g->blas;
        sb_printf(b,
                  "    {%d, %d, %d, %d, %d, %d, %d, %d, %d, %lld, %lld, %lld, %d, %lld, %lld, "
                  "%lld, %af, %d, %d,\n     {",
                  BLASLT_COMPUTE_TYPE(l->compute), BLASLT_TYPE_AB(l->compute),
                  BLASLT_TYPE_CD(l->compute), l->trans_a, l->trans_b, l->epilogue, l->m, l->n, l->k,
                  (long long)l->lda, (long long)l->ldb, (long long)l->ldc, l->batch,
                  (long long)l->stride_a, (long long)l->stride_b, (long long)l->stride_c,
                  (double)l->alpha, l->in_bias >= 0, l->in_res >= 0);
        for (int k = 0; k < 8; k++)
            sb_printf(b, "%s0x%016llxull", k ? ", " : "", (unsigned long long)l->algo[k]);
        sb_printf(b, "}, %lluull},\n", (unsigned long long)l->workspace);
        return;
    }
    const DnnCall *l = &g->dnn;
    sb_printf(b,
              "    {%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, "
              "%d, %d, %d, %d, %d, %af, %lluull},\n",
              l->n, l->c, l->h, l->w, l->k, l->r, l->s, l->groups, l->pad[0], l->pad[1],
              l->stride[0], l->stride[1], l->dil[0], l->dil[1], l->p, l->q,
              !!(l->epilogue & DNN_EPI_BIAS), !!(l->epilogue & DNN_EPI_RELU),
              !!(l->epilogue & DNN_EPI_Z), !!(l->epilogue & DNN_LAYOUT_NHWC),
              !!(l->epilogue & DNN_FILTER_KRSC), DNN_MATH_TYPE(l->math), DNN_DATA_TYPE(l->math),
              l->algo, (double)l->alpha, (unsigned long long)l->workspace);
}

// The library calls' descriptions in tables, a row per call with the call's text above it.
static void lib_tables(StrBuf *b, const CudaTree *c) {
    const Plan *P = c->x->P;
    for (int lib = CUDA_LIB_BLASLT; lib <= CUDA_LIB_CUDNN; lib++) {
        bool lt = lib == CUDA_LIB_BLASLT;
        if (!(lt ? c->n_blas : c->n_dnn))
            continue;
        sb_puts(b, lt ? LT_SPEC : DNN_SPEC);
        sb_printf(b, "#define %s_CALLS %d\n#define %s_VERSION %lluull\n", lt ? "LT" : "DNN",
                  lt ? c->n_blas : c->n_dnn, lt ? "LT" : "DNN",
                  (unsigned long long)(lt ? c->blas_ver : c->dnn_ver));
        sb_printf(b, "static const %s %s[%s_CALLS] = {\n", lt ? "LtSpec" : "DnnSpec",
                  lt ? "lt_spec" : "dnn_spec", lt ? "LT" : "DNN");
        for (int i = 0; i < P->n_launches; i++) {
            if (c->call[i] < 0 || c->geo[i]->lib != lib)
                continue;
            char d[512];
            if (lt)
                blaslt_call_str(&c->geo[i]->blas, d, sizeof d);
            else
                dnn_call_str(&c->geo[i]->dnn, d, sizeof d);
            sb_printf(b, "    // launch %d: ", i);
            export_c_comment(b, d);
            sb_puts(b, "\n");
            call_row(b, c->geo[i]);
        }
        sb_puts(b, "};\n\n");
    }
}

// Helpers of model.cu that make and run the library calls (the session's blaslt_op_create /
// blaslt_op_run and dnn_op_create / dnn_op_run, call for call).
static const char LT_CODE[] =
    "static cublasStatus_t lt_layout(cublasLtMatrixLayout_t *l, int type, long long rows, long "
    "long cols,\n"
    "                                long long ld, int batch, long long stride) {\n"
    "    cublasStatus_t st = cublasLtMatrixLayoutCreate(l, (cudaDataType_t)type, (uint64_t)rows,\n"
    "                                                   (uint64_t)cols, ld);\n"
    "    int32_t count = batch;\n"
    "    int64_t offset = stride;\n"
    "    if (st == CUBLAS_STATUS_SUCCESS && batch > 1)\n"
    "        st = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, "
    "&count,\n"
    "                                              sizeof count);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS && batch > 1)\n"
    "        st = cublasLtMatrixLayoutSetAttribute(*l, "
    "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,\n"
    "                                              &offset, sizeof offset);\n"
    "    return st;\n"
    "}\n\n"
    "static cublasStatus_t lt_make(Model *m, int q) {\n"
    "    const LtSpec *c = &lt_spec[q];\n"
    "    int32_t ta = c->trans_a, tb = c->trans_b;\n"
    "    uint32_t epi = (uint32_t)c->epilogue;\n"
    "    cublasStatus_t st =\n"
    "        cublasLtMatmulDescCreate(&m->lt_desc[q], (cublasComputeType_t)c->compute, "
    "CUDA_R_32F);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulDescSetAttribute(m->lt_desc[q], CUBLASLT_MATMUL_DESC_TRANSA, &ta, "
    "sizeof ta);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulDescSetAttribute(m->lt_desc[q], CUBLASLT_MATMUL_DESC_TRANSB, &tb, "
    "sizeof tb);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmulDescSetAttribute(m->lt_desc[q], CUBLASLT_MATMUL_DESC_EPILOGUE, "
    "&epi,\n"
    "                                            sizeof epi);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = lt_layout(&m->lt_a[q], c->type_ab, c->trans_a ? c->k : c->m, c->trans_a ? c->m : "
    "c->k,\n"
    "                       c->lda, c->batch, c->stride_a);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = lt_layout(&m->lt_b[q], c->type_ab, c->trans_b ? c->n : c->k, c->trans_b ? c->k : "
    "c->n,\n"
    "                       c->ldb, c->batch, c->stride_b);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS) // the bias has D's type\n"
    "        st = lt_layout(&m->lt_c[q], c->type_cd, c->m, c->n, c->ldc, c->batch, c->stride_c);\n"
    "    return st;\n"
    "}\n\n"
    "// D = alpha A B (+ C, a residual, with beta 1) (+ bias) (then the epilogue's activation).\n"
    "static int lt_run(Model *m, int q, const void *a, const void *b, const void *bias, const "
    "void *res,\n"
    "                  void *d) {\n"
    "    const LtSpec *c = &lt_spec[q];\n"
    "    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;\n"
    "    if (c->has_bias)\n"
    "        st = cublasLtMatmulDescSetAttribute(m->lt_desc[q], CUBLASLT_MATMUL_DESC_BIAS_POINTER, "
    "&bias,\n"
    "                                            sizeof bias);\n"
    "    float alpha = c->alpha, beta = c->has_res ? 1.0f : 0.0f;\n"
    "    cublasLtMatmulAlgo_t algo;\n"
    "    memcpy(algo.data, c->algo, sizeof algo.data);\n"
    "    if (st == CUBLAS_STATUS_SUCCESS)\n"
    "        st = cublasLtMatmul(m->lt, m->lt_desc[q], &alpha, a, m->lt_a[q], b, m->lt_b[q], "
    "&beta,\n"
    "                            c->has_res ? res : d, m->lt_c[q], d, m->lt_c[q], &algo,\n"
    "                            c->workspace ? m->ws : NULL, (size_t)c->workspace, m->stream);\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        fprintf(stderr, \"cuBLASLt: %s\\n\", cublasLtGetStatusString(st));\n"
    "    return (int)st;\n"
    "}\n\n";

static const char DNN_CODE[] =
    "static cudnnStatus_t dnn_make(Model *m, int q) {\n"
    "    const DnnSpec *c = &dnn_spec[q];\n"
    "    cudnnTensorFormat_t fmt = c->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;\n"
    "    cudnnTensorFormat_t wfmt = c->krsc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;\n"
    "    cudnnDataType_t dt = (cudnnDataType_t)c->dtype;\n"
    "    cudnnStatus_t st = cudnnCreateTensorDescriptor(&m->dnn_x[q]);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnSetTensor4dDescriptor(m->dnn_x[q], fmt, dt, c->n, c->c, c->h, c->w);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnCreateTensorDescriptor(&m->dnn_y[q]);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnSetTensor4dDescriptor(m->dnn_y[q], fmt, dt, c->n, c->k, c->p, c->q);\n"
    "    if (st == CUDNN_STATUS_SUCCESS && c->bias)\n"
    "        st = cudnnCreateTensorDescriptor(&m->dnn_b[q]);\n"
    "    if (st == CUDNN_STATUS_SUCCESS && c->bias)\n"
    "        st = cudnnSetTensor4dDescriptor(m->dnn_b[q], fmt, dt, 1, c->k, 1, 1);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnCreateFilterDescriptor(&m->dnn_w[q]);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnSetFilter4dDescriptor(m->dnn_w[q], dt, wfmt, c->k, c->c / c->groups, c->r, "
    "c->s);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnCreateConvolutionDescriptor(&m->dnn_conv[q]);\n"
    "    // The convolution computes in float32 whatever the tensors' type.\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnSetConvolution2dDescriptor(m->dnn_conv[q], c->pad_h, c->pad_w, "
    "c->stride_h,\n"
    "                                             c->stride_w, c->dil_h, c->dil_w,\n"
    "                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnSetConvolutionGroupCount(m->dnn_conv[q], c->groups);\n"
    "    if (st == CUDNN_STATUS_SUCCESS)\n"
    "        st = cudnnSetConvolutionMathType(m->dnn_conv[q], (cudnnMathType_t)c->math);\n"
    "    if (st == CUDNN_STATUS_SUCCESS && c->bias)\n"
    "        st = cudnnCreateActivationDescriptor(&m->dnn_act[q]);\n"
    "    if (st == CUDNN_STATUS_SUCCESS && c->bias)\n"
    "        st = cudnnSetActivationDescriptor(\n"
    "            m->dnn_act[q], c->relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,\n"
    "            CUDNN_NOT_PROPAGATE_NAN, 0.0);\n"
    "    return st;\n"
    "}\n\n"
    "// y = act(alpha conv(x, w) + z + bias): the fused call where cuDNN offers it (a ReLU, or\n"
    "// IMPLICIT_PRECOMP_GEMM's identity), else the convolution, then z and the bias added in "
    "place.\n"
    "static int dnn_run(Model *m, int q, const void *x, const void *w, const void *bias, const "
    "void *z,\n"
    "                   void *y) {\n"
    "    const DnnSpec *c = &dnn_spec[q];\n"
    "    void *ws = c->workspace ? m->ws : NULL;\n"
    "    size_t wsb = (size_t)c->workspace;\n"
    "    float alpha = c->alpha, zero = 0.0f, one = 1.0f;\n"
    "    cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)c->algo;\n"
    "    cudnnStatus_t st;\n"
    "    if (c->bias && (c->relu || algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)) {\n"
    "        st = cudnnConvolutionBiasActivationForward(\n"
    "            m->dnn, &alpha, m->dnn_x[q], x, m->dnn_w[q], w, m->dnn_conv[q], algo, ws, wsb,\n"
    "            c->z ? &one : &zero, m->dnn_y[q], c->z ? z : y, m->dnn_b[q], bias, "
    "m->dnn_act[q],\n"
    "            m->dnn_y[q], y);\n"
    "    } else {\n"
    "        st = cudnnConvolutionForward(m->dnn, &alpha, m->dnn_x[q], x, m->dnn_w[q], w,\n"
    "                                     m->dnn_conv[q], algo, ws, wsb, &zero, m->dnn_y[q], y);\n"
    "        if (st == CUDNN_STATUS_SUCCESS && c->z)\n"
    "            st = cudnnAddTensor(m->dnn, &one, m->dnn_y[q], z, &one, m->dnn_y[q], y);\n"
    "        if (st == CUDNN_STATUS_SUCCESS && c->bias)\n"
    "            st = cudnnAddTensor(m->dnn, &one, m->dnn_b[q], bias, &one, m->dnn_y[q], y);\n"
    "    }\n"
    "    if (st != CUDNN_STATUS_SUCCESS)\n"
    "        fprintf(stderr, \"cuDNN: %s\\n\", cudnnGetErrorString(st));\n"
    "    return (int)st;\n"
    "}\n\n";

// One launch's code in issue() (dnn_only: the cuDNN calls alone, for their run before capture).
static void launch_code(StrBuf *b, const CudaTree *c, int i, bool dnn_only) {
    const ExportPlan *x = c->x;
    const Plan *P = x->P;
    const PlanLaunch *L = &P->launches[i];
    const CudaLaunch *g = c->geo[i];
    if (dnn_only && !(g && g->lib == CUDA_LIB_CUDNN && !export_launch_empty(x->pg, L)))
        return;
    char *nodes = export_nodes_text(L);
    sb_printf(b, "    // launch %d: ", i);
    if (L->kind == PLAN_COPY) {
        sb_puts(b, "copy into output ");
        export_c_comment(b, x->pg->tensors[x->pg->outputs[L->copy_to]]->name);
        sb_puts(b, "\n");
        int64_t bytes = P->tensors[L->in[0]].bytes;
        if (bytes) {
            sb_printf(b, "    if ((const void *)m->d_out[%d] != (const void *)(", L->copy_to);
            dev_expr(b, P, L->in[0]);
            sb_printf(b, ") &&\n        (err = cudaMemcpyAsync(m->d_out[%d], ", L->copy_to);
            dev_expr(b, P, L->in[0]);
            sb_printf(b,
                      ", %lld, cudaMemcpyDeviceToDevice, m->stream)) != cudaSuccess)\n"
                      "        return launch_fail(%d, \"copy\", \"\", cudaGetErrorString(err));\n",
                      (long long)bytes, i);
        }
        free(nodes);
        return;
    }
    sb_printf(b, "%s%s, ONNX nodes ",
              g->lib == CUDA_LIB_BLASLT  ? "cublaslt:"
              : g->lib == CUDA_LIB_CUDNN ? "cudnn:"
                                         : "",
              L->symbol);
    export_c_comment(b, nodes);
    sb_puts(b, "\n");
    if (export_launch_empty(x->pg, L)) {
        sb_puts(b, "    // (every output is empty: nothing to compute)\n");
        free(nodes);
        return;
    }
    if (g->lib) {
        bool lt = g->lib == CUDA_LIB_BLASLT;
        int pos[4];
        call_operands(g, pos);
        sb_printf(b, "    if ((st = %s(m, %d", lt ? "lt_run" : "dnn_run", c->call[i]);
        for (int k = 0; k < 4; k++) {
            sb_puts(b, ", ");
            call_operand(b, P, L, pos[k]);
        }
        sb_puts(b, ", ");
        dev_expr(b, P, L->out[0]);
        sb_printf(b, ")) != 0)\n        return launch_fail(%d, \"%s\", ", i, L->symbol);
        export_c_string(b, nodes);
        sb_printf(b, ", \"the %s call failed\");\n", lt ? "cuBLASLt" : "cuDNN");
        free(nodes);
        return;
    }
    const Prim *p = sink_of(x, L);
    bool op = p && ckernel_op_abi(p);
    sb_puts(b, "    {\n        OrchArgs a = {{");
    for (int j = 0; j < L->n_in; j++) {
        sb_puts(b, j ? ", " : "");
        dev_expr(b, P, L->in[j]);
    }
    if (op) {
        sb_puts(b, L->n_in ? ", " : "");
        dev_expr(b, P, L->n_out > 1 ? L->out[1] : -1);
        sb_printf(b, ", m->flags + %d", c->flag[i]);
    }
    sb_puts(b, L->n_in || op ? "}, " : "NULL}, ");
    dev_expr(b, P, L->out[0]);
    sb_printf(
        b,
        "};\n        void *args[1] = {&a};\n"
        "        CUresult r = cuLaunchKernel(m->fn[%d], %u, %u, %u, %u, %u, %u, %u, m->stream, "
        "args, NULL);\n"
        "        if (r != CUDA_SUCCESS)\n"
        "            return launch_fail(%d, \"%s\", ",
        c->kern[i], g->grid[0], g->grid[1], g->grid[2], g->block[0], g->block[1], g->block[2],
        g->smem, i, L->symbol);
    export_c_string(b, nodes);
    sb_puts(b, ", cu_error(r));\n    }\n");
    free(nodes);
}

// model.cu: the plan as the session runs it.
static void model_cu(StrBuf *b, const ArtifactContents *a, const CudaTree *c) {
    const ExportPlan *x = c->x;
    const PrimGraph *pg = x->pg;
    const Plan *P = x->P;
    int ni = pg->n_inputs, no = pg->n_outputs;
    bool work = false;
    for (int i = 0; i < P->n_launches; i++)
        work = work || (c->geo[i] ? !export_launch_empty(pg, &P->launches[i])
                                  : P->launches[i].kind == PLAN_COPY &&
                                        P->tensors[P->launches[i].in[0]].bytes);
    export_model_intro(b, a,
                       "as the orch session runs it, written by orch export: one device arena, "
                       "each kernel of\nkernels.cu launched with the session's geometry, each "
                       "library call made as the session makes\nit, captured once as a CUDA "
                       "graph; the constants in weights.bin.\n");
    sb_puts(b, "#include \"model.h\"\n\n#include <cuda.h>\n#include <cuda_runtime.h>\n");
    if (c->n_blas)
        sb_puts(b, "#include <cublasLt.h>\n");
    if (c->n_dnn)
        sb_puts(b, "#include <cudnn.h>\n");
    sb_puts(b, "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include "
               "<string.h>\n\n"
               "// The kernels' one parameter (kernels.cu's prelude): operand addresses, inputs "
               "first.\nstruct OrchArgs {\n    const void *in[32];\n    void *out;\n};\n\n"
               "// kernels.cu's cubin (kernels_cubin.c, made by nvrtc_build at build time).\n"
               "extern const unsigned char model_cubin[];\n\n");
    sb_printf(b,
              "#define N_KERNELS %d\n// Each kernel's name and dynamic shared memory.\n"
              "static const char *const kernel_names[N_KERNELS + 1] = {",
              c->n_kern);
    for (int k = 0; k < c->n_kern; k++)
        for (int i = 0; i < P->n_launches; i++)
            if (c->kern[i] == k) {
                sb_printf(b, "\n    \"%s\",", P->launches[i].symbol);
                break;
            }
    sb_puts(b, "\n    NULL};\nstatic const unsigned kernel_smem[N_KERNELS + 1] = {");
    for (int k = 0; k < c->n_kern; k++)
        for (int i = 0; i < P->n_launches; i++)
            if (c->kern[i] == k) {
                sb_printf(b, "%u, ", c->geo[i]->smem);
                break;
            }
    sb_puts(b, "0};\n");
    export_tensor_tables(b, pg);
    sb_printf(b, "#define ARCH \"%s\"\n", c->arch);
    sb_printf(b,
              "#define ARENA_BYTES %lldull\n#define WORKSPACE_BYTES %lluull\n#define N_FLAGS %d\n",
              (long long)P->arena_bytes, (unsigned long long)c->workspace, c->n_flags);
    export_read_weights(b, x);
    lib_tables(b, c);
    if (c->n_flags) {
        // Which launch each status word belongs to, for model_run's message.
        StrBuf l, k, n;
        sb_init(&l);
        sb_init(&k);
        sb_init(&n);
        for (int i = 0; i < P->n_launches; i++) {
            if (c->flag[i] < 0)
                continue;
            char *nodes = export_nodes_text(&P->launches[i]);
            sb_printf(&l, "%d, ", i);
            sb_printf(&k, "\"%s\", ", P->launches[i].symbol);
            export_c_string(&n, nodes);
            sb_puts(&n, ", ");
            free(nodes);
        }
        sb_printf(b,
                  "// The launch, kernel and ONNX nodes of each operator kernel's status word.\n"
                  "static const int flag_launch[N_FLAGS] = {%s};\n"
                  "static const char *const flag_kernel[N_FLAGS] = {%s};\n"
                  "static const char *const flag_nodes[N_FLAGS] = {%s};\n\n",
                  l.s, k.s, n.s);
        sb_free(&l);
        sb_free(&k);
        sb_free(&n);
    }
    sb_printf(b,
              "struct Model {\n"
              "    uint8_t *arena, *consts, *dummy, *ws; // dummy: what empty tensors point to\n"
              "    int *flags;                           // the operator kernels' status words\n"
              "    int h_flags[%d];\n"
              "    uint8_t *d_in[%d], *d_out[%d];\n"
              "    cudaStream_t stream;\n"
              "    cudaEvent_t after;\n"
              "    cudaGraphExec_t graph;\n"
              "    CUmodule mod;\n"
              "    CUfunction fn[N_KERNELS + 1];\n",
              c->n_flags + 1, ni + 1, no + 1);
    if (c->n_blas)
        sb_puts(b, "    cublasLtHandle_t lt;\n    cublasLtMatmulDesc_t lt_desc[LT_CALLS];\n"
                   "    cublasLtMatrixLayout_t lt_a[LT_CALLS], lt_b[LT_CALLS], lt_c[LT_CALLS];\n");
    if (c->n_dnn)
        sb_puts(b, "    cudnnHandle_t dnn;\n"
                   "    cudnnTensorDescriptor_t dnn_x[DNN_CALLS], dnn_y[DNN_CALLS], "
                   "dnn_b[DNN_CALLS];\n"
                   "    cudnnFilterDescriptor_t dnn_w[DNN_CALLS];\n"
                   "    cudnnConvolutionDescriptor_t dnn_conv[DNN_CALLS];\n"
                   "    cudnnActivationDescriptor_t dnn_act[DNN_CALLS];\n");
    sb_puts(b, "};\n\n");
    if (c->n_blas)
        sb_puts(b, LT_CODE);
    if (c->n_dnn)
        sb_puts(b, DNN_CODE);
    sb_puts(b, "static const char *cu_error(CUresult r) {\n"
               "    const char *s = NULL;\n"
               "    cuGetErrorString(r, &s);\n"
               "    return s ? s : \"an unknown CUDA driver error\";\n"
               "}\n\n");
    sb_puts(b, "static int launch_fail(int launch, const char *kernel, const char *nodes, const "
               "char *why) {\n"
               "    fprintf(stderr, \"model: launch %d (%s, ONNX nodes %s): %s\\n\", launch, "
               "kernel, nodes, why);\n"
               "    return 1;\n"
               "}\n\n");
    for (int pass = 0; pass < 2; pass++) {
        bool dnn_only = pass == 1;
        if (dnn_only && !c->n_dnn)
            continue;
        sb_puts(b, dnn_only ? "// The cuDNN calls alone, each waited for: run once before the "
                              "capture, as the session\n// does (a call may set itself up on "
                              "its first run, which need not be capturable).\n"
                              "static int warm_dnn(Model *m) {\n"
                            : "// The plan's launches in order, queued on m->stream (captured "
                              "once by model_init).\nstatic int issue(Model *m) {\n");
        sb_puts(b, "    cudaError_t err = cudaSuccess;\n    int st = 0;\n    (void)err;\n"
                   "    (void)st;\n");
        for (int i = 0; i < P->n_launches; i++) {
            size_t before = b->len;
            launch_code(b, c, i, dnn_only);
            if (dnn_only && b->len != before)
                sb_printf(b,
                          "    if ((err = cudaStreamSynchronize(m->stream)) != cudaSuccess)\n"
                          "        return launch_fail(%d, \"%s\", \"\", "
                          "cudaGetErrorString(err));\n",
                          i, P->launches[i].symbol);
        }
        sb_puts(b, "    return 0;\n}\n\n");
    }
    // Teardown and set-up.
    sb_puts(b, "void model_free(Model *m) {\n"
               "    if (!m)\n"
               "        return;\n"
               "    if (m->stream)\n"
               "        cudaStreamSynchronize(m->stream);\n"
               "    if (m->graph)\n"
               "        cudaGraphExecDestroy(m->graph);\n"
               "    if (m->after)\n"
               "        cudaEventDestroy(m->after);\n"
               "    if (m->mod)\n"
               "        cuModuleUnload(m->mod);\n");
    if (c->n_blas)
        sb_puts(b, "    for (int q = 0; q < LT_CALLS; q++) {\n"
                   "        if (m->lt_desc[q])\n"
                   "            cublasLtMatmulDescDestroy(m->lt_desc[q]);\n"
                   "        if (m->lt_a[q])\n"
                   "            cublasLtMatrixLayoutDestroy(m->lt_a[q]);\n"
                   "        if (m->lt_b[q])\n"
                   "            cublasLtMatrixLayoutDestroy(m->lt_b[q]);\n"
                   "        if (m->lt_c[q])\n"
                   "            cublasLtMatrixLayoutDestroy(m->lt_c[q]);\n"
                   "    }\n"
                   "    if (m->lt)\n"
                   "        cublasLtDestroy(m->lt);\n");
    if (c->n_dnn)
        sb_puts(b, "    for (int q = 0; q < DNN_CALLS; q++) {\n"
                   "        if (m->dnn_x[q])\n"
                   "            cudnnDestroyTensorDescriptor(m->dnn_x[q]);\n"
                   "        if (m->dnn_y[q])\n"
                   "            cudnnDestroyTensorDescriptor(m->dnn_y[q]);\n"
                   "        if (m->dnn_b[q])\n"
                   "            cudnnDestroyTensorDescriptor(m->dnn_b[q]);\n"
                   "        if (m->dnn_w[q])\n"
                   "            cudnnDestroyFilterDescriptor(m->dnn_w[q]);\n"
                   "        if (m->dnn_conv[q])\n"
                   "            cudnnDestroyConvolutionDescriptor(m->dnn_conv[q]);\n"
                   "        if (m->dnn_act[q])\n"
                   "            cudnnDestroyActivationDescriptor(m->dnn_act[q]);\n"
                   "    }\n"
                   "    if (m->dnn)\n"
                   "        cudnnDestroy(m->dnn);\n");
    sb_puts(b,
            "    for (int i = 0; i < model_num_inputs; i++)\n"
            "        if (m->d_in[i] != m->dummy)\n"
            "            cudaFree(m->d_in[i]);\n"
            "    for (int i = 0; i < model_num_outputs; i++)\n"
            "        if (m->d_out[i] != m->dummy)\n"
            "            cudaFree(m->d_out[i]);\n"
            "    cudaFree(m->arena);\n"
            "    cudaFree(m->consts);\n"
            "    cudaFree(m->dummy);\n"
            "    cudaFree(m->ws);\n"
            "    cudaFree(m->flags);\n"
            "    if (m->stream)\n"
            "        cudaStreamDestroy(m->stream);\n"
            "    free(m);\n"
            "}\n\n"
            "static Model *init_fail(Model *m, const char *path, const char *what, const char "
            "*why) {\n"
            "    fprintf(stderr, \"model_init: %s: %s%s%s\\n\", path, what, why ? \": \" : \"\", "
            "why ? why : \"\");\n"
            "    model_free(m);\n"
            "    return NULL;\n"
            "}\n\n"
            "// A device buffer of n bytes (at least 256), zeroed.\n"
            "static cudaError_t dev_buf(uint8_t **p, size_t n) {\n"
            "    cudaError_t err = cudaMalloc((void **)p, n ? n : 256);\n"
            "    return err == cudaSuccess ? cudaMemset(*p, 0, n ? n : 256) : err;\n"
            "}\n\n"
            "#define INIT_CUDA(call, what)                                                    "
            "      \\\n"
            "    do {                                                                         "
            "      \\\n"
            "        cudaError_t err_ = (call);                                               "
            "      \\\n"
            "        if (err_ != cudaSuccess)                                                 "
            "      \\\n"
            "            return init_fail(m, weights_path, what, cudaGetErrorString(err_));   "
            "      \\\n"
            "    } while (0)\n\n"
            "Model *model_init(const char *weights_path) {\n"
            "    Model *m = (Model *)calloc(1, sizeof *m);\n"
            "    if (!m)\n"
            "        return init_fail(m, weights_path, \"out of memory\", NULL);\n");
    if (c->n_blas)
        sb_puts(b, "    // Another cuBLASLt may run the chosen algorithm differently, or not at "
                   "all.\n"
                   "    if (cublasLtGetVersion() != LT_VERSION) {\n"
                   "        fprintf(stderr, \"model_init: built for cuBLASLt %llu, this "
                   "process loaded %llu\\n\",\n"
                   "                LT_VERSION, (unsigned long long)cublasLtGetVersion());\n"
                   "        return init_fail(m, weights_path, \"another cuBLASLt than the "
                   "compile's\", NULL);\n"
                   "    }\n");
    if (c->n_dnn)
        sb_puts(b, "    if (cudnnGetVersion() != DNN_VERSION) {\n"
                   "        fprintf(stderr, \"model_init: built for cuDNN %llu, this process "
                   "loaded %llu\\n\", DNN_VERSION,\n"
                   "                (unsigned long long)cudnnGetVersion());\n"
                   "        return init_fail(m, weights_path, \"another cuDNN than the "
                   "compile's\", NULL);\n"
                   "    }\n");
    sb_puts(b,
            "    INIT_CUDA(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking), \"a "
            "stream\");\n"
            "    INIT_CUDA(cudaEventCreateWithFlags(&m->after, cudaEventDisableTiming), \"an "
            "event\");\n"
            "    INIT_CUDA(dev_buf(&m->dummy, 256), \"device memory\");\n"
            "    if (ARENA_BYTES)\n"
            "        INIT_CUDA(dev_buf(&m->arena, ARENA_BYTES), \"device memory for the "
            "arena\");\n"
            "    if (WEIGHTS_BYTES)\n"
            "        INIT_CUDA(dev_buf(&m->consts, WEIGHTS_BYTES), \"device memory for the "
            "weights\");\n"
            "    if (WORKSPACE_BYTES)\n"
            "        INIT_CUDA(dev_buf(&m->ws, WORKSPACE_BYTES), \"device memory for the "
            "library calls\");\n"
            "    if (N_FLAGS)\n"
            "        INIT_CUDA(dev_buf((uint8_t **)&m->flags, sizeof(int) * N_FLAGS), \"device "
            "memory\");\n"
            "    for (int i = 0; i < model_num_inputs; i++) {\n"
            "        m->d_in[i] = m->dummy;\n"
            "        if (model_inputs[i].bytes)\n"
            "            INIT_CUDA(dev_buf(&m->d_in[i], model_inputs[i].bytes), \"device memory "
            "for an input\");\n"
            "    }\n"
            "    for (int i = 0; i < model_num_outputs; i++) {\n"
            "        m->d_out[i] = m->dummy;\n"
            "        if (model_outputs[i].bytes)\n"
            "            INIT_CUDA(dev_buf(&m->d_out[i], model_outputs[i].bytes), \"device "
            "memory for an output\");\n"
            "    }\n"
            "    uint8_t *w = (uint8_t *)malloc(WEIGHTS_BYTES + 1);\n"
            "    if (!w)\n"
            "        return init_fail(m, weights_path, \"out of memory reading the weights\", "
            "NULL);\n"
            "    const char *bad = read_weights(weights_path, w);\n"
            "    cudaError_t err =\n"
            "        bad || !WEIGHTS_BYTES ? cudaSuccess\n"
            "                              : cudaMemcpy(m->consts, w, WEIGHTS_BYTES, "
            "cudaMemcpyHostToDevice);\n"
            "    free(w);\n"
            "    if (bad)\n"
            "        return init_fail(m, weights_path, bad, NULL);\n"
            "    INIT_CUDA(err, \"copying the weights to the GPU\");\n"
            "    // The zeroing and the copy (the legacy stream's) done before the model's stream, "
            "which does\n    // not wait for that stream, queues anything.\n"
            "    INIT_CUDA(cudaDeviceSynchronize(), \"setting up the buffers\");\n");
    // The kernels, from the cubin in the primary context the runtime made current.
    sb_puts(b, "    CUresult r = cuModuleLoadData(&m->mod, model_cubin);\n"
               "    if (r != CUDA_SUCCESS)\n"
               "        return init_fail(m, weights_path, \"loading the kernels' cubin (built "
               "for \" ARCH \")\",\n"
               "                         cu_error(r));\n"
               "    for (int k = 0; k < N_KERNELS; k++) {\n"
               "        r = cuModuleGetFunction(&m->fn[k], m->mod, kernel_names[k]);\n"
               "        if (r == CUDA_SUCCESS && kernel_smem[k] > 48 * 1024)\n"
               "            r = cuFuncSetAttribute(m->fn[k], "
               "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,\n"
               "                                   (int)kernel_smem[k]);\n"
               "        if (r != CUDA_SUCCESS)\n"
               "            return init_fail(m, weights_path, kernel_names[k], cu_error(r));\n"
               "    }\n");
    if (c->n_blas)
        sb_puts(b, "    if (cublasLtCreate(&m->lt) != CUBLAS_STATUS_SUCCESS)\n"
                   "        return init_fail(m, weights_path, \"cannot create a cuBLASLt "
                   "handle\", NULL);\n"
                   "    for (int q = 0; q < LT_CALLS; q++) {\n"
                   "        cublasStatus_t st = lt_make(m, q);\n"
                   "        if (st != CUBLAS_STATUS_SUCCESS)\n"
                   "            return init_fail(m, weights_path, \"cuBLASLt descriptors\", "
                   "cublasLtGetStatusString(st));\n"
                   "    }\n");
    if (c->n_dnn)
        sb_puts(b, "    cudnnStatus_t dst = cudnnCreate(&m->dnn);\n"
                   "    if (dst == CUDNN_STATUS_SUCCESS)\n"
                   "        dst = cudnnSetStream(m->dnn, m->stream);\n"
                   "    for (int q = 0; q < DNN_CALLS && dst == CUDNN_STATUS_SUCCESS; q++)\n"
                   "        dst = dnn_make(m, q);\n"
                   "    if (dst != CUDNN_STATUS_SUCCESS)\n"
                   "        return init_fail(m, weights_path, \"cuDNN descriptors\", "
                   "cudnnGetErrorString(dst));\n"
                   "    if (warm_dnn(m))\n"
                   "        return init_fail(m, weights_path, \"a cuDNN call failed\", NULL);\n");
    if (work)
        sb_puts(b, "    // The launches as one CUDA graph, replayed by every run.\n"
                   "    INIT_CUDA(cudaStreamBeginCapture(m->stream, "
                   "cudaStreamCaptureModeThreadLocal),\n"
                   "              \"capturing the plan\");\n"
                   "    int failed = issue(m);\n"
                   "    cudaGraph_t graph = NULL;\n"
                   "    err = cudaStreamEndCapture(m->stream, &graph);\n"
                   "    if (!failed && err == cudaSuccess)\n"
                   "        err = cudaGraphInstantiate(&m->graph, graph, 0);\n"
                   "    if (graph)\n"
                   "        cudaGraphDestroy(graph);\n"
                   "    if (failed)\n"
                   "        return init_fail(m, weights_path, \"capturing the plan\", NULL);\n"
                   "    INIT_CUDA(err, \"capturing the plan\");\n");
    else
        sb_puts(b, "    (void)issue;\n");
    sb_puts(b, "    return m;\n}\n\n");
    // The runs.
    sb_puts(b,
            "static int run_fail(const char *what, cudaError_t err) {\n"
            "    fprintf(stderr, \"model_run: %s: %s\\n\", what, cudaGetErrorString(err));\n"
            "    return 1;\n"
            "}\n\n"
            "// Inputs in, the graph, outputs and status words out, all on m->stream, then the "
            "first\n// operator kernel whose status word is set (an index out of range) "
            "reported.\n"
            "static int run(Model *m, const void *const *inputs, void *const *outputs, "
            "cudaMemcpyKind in,\n"
            "               cudaMemcpyKind out) {\n"
            "    for (int i = 0; i < model_num_inputs; i++)\n"
            "        if (model_inputs[i].bytes && !inputs[i]) {\n"
            "            fprintf(stderr, \"model_run: input '%s' has no buffer\\n\", "
            "model_inputs[i].name);\n"
            "            return 1;\n"
            "        }\n"
            "    for (int i = 0; i < model_num_outputs; i++)\n"
            "        if (model_outputs[i].bytes && !outputs[i]) {\n"
            "            fprintf(stderr, \"model_run: output '%s' has no buffer\\n\", "
            "model_outputs[i].name);\n"
            "            return 1;\n"
            "        }\n"
            "    cudaError_t err = cudaSuccess;\n"
            "    for (int i = 0; i < model_num_inputs && err == cudaSuccess; i++)\n"
            "        if (model_inputs[i].bytes)\n"
            "            err = cudaMemcpyAsync(m->d_in[i], inputs[i], model_inputs[i].bytes, in, "
            "m->stream);\n"
            "    int rc = err != cudaSuccess ? run_fail(\"copying the inputs in\", err) : 0;\n"
            "    if (!rc && N_FLAGS && (err = cudaMemsetAsync(m->flags, 0, sizeof(int) * "
            "N_FLAGS,\n"
            "                                                m->stream)) != cudaSuccess)\n"
            "        rc = run_fail(\"clearing the status words\", err);\n"
            "    if (!rc && m->graph && (err = cudaGraphLaunch(m->graph, m->stream)) != "
            "cudaSuccess)\n"
            "        rc = run_fail(\"launching the plan's CUDA graph\", err);\n"
            "    for (int i = 0; i < model_num_outputs && !rc; i++)\n"
            "        if (model_outputs[i].bytes &&\n"
            "            (err = cudaMemcpyAsync(outputs[i], m->d_out[i], "
            "model_outputs[i].bytes, out,\n"
            "                                   m->stream)) != cudaSuccess)\n"
            "            rc = run_fail(\"copying the outputs out\", err);\n"
            "    if (!rc && N_FLAGS &&\n"
            "        (err = cudaMemcpyAsync(m->h_flags, m->flags, sizeof(int) * N_FLAGS,\n"
            "                               cudaMemcpyDeviceToHost, m->stream)) != "
            "cudaSuccess)\n"
            "        rc = run_fail(\"reading the status words\", err);\n"
            "    // Nothing stays in flight on the caller's buffers, whatever happened.\n"
            "    err = cudaStreamSynchronize(m->stream);\n"
            "    if (!rc && err != cudaSuccess)\n"
            "        rc = run_fail(\"running the plan\", err);\n");
    if (c->n_flags)
        sb_puts(b, "    for (int f = 0; f < N_FLAGS && !rc; f++)\n"
                   "        if (m->h_flags[f]) {\n"
                   "            fprintf(stderr, \"model_run: launch %d (%s, ONNX nodes %s): an "
                   "index operand is out of range\\n\",\n"
                   "                    flag_launch[f], flag_kernel[f], flag_nodes[f]);\n"
                   "            rc = m->h_flags[f];\n"
                   "        }\n");
    sb_puts(b, "    return rc;\n"
               "}\n\n"
               "int model_run(Model *m, const void *const *inputs, void *const *outputs) {\n"
               "    return run(m, inputs, outputs, cudaMemcpyHostToDevice, "
               "cudaMemcpyDeviceToHost);\n"
               "}\n\n"
               "int model_run_device(Model *m, const void *const *inputs, void *const *outputs, "
               "void *stream) {\n"
               "    cudaError_t err = cudaEventRecord(m->after, (cudaStream_t)stream);\n"
               "    if (err == cudaSuccess)\n"
               "        err = cudaStreamWaitEvent(m->stream, m->after, 0);\n"
               "    if (err != cudaSuccess)\n"
               "        return run_fail(\"ordering the run after the caller's stream\", err);\n"
               "    return run(m, inputs, outputs, cudaMemcpyDeviceToDevice, "
               "cudaMemcpyDeviceToDevice);\n"
               "}\n");
}

// nvrtc_build.c: kernels.cu compiled as the compile driver compiles the module (cuda_lab.c's
// cuda_lab_build_module: the same program name and options), so with the same NVRTC the cubin is
// the artefact's byte for byte. nvcc's front end makes other code of the same source (32-bit
// shared-memory addresses, other registers: 3 of the 11 kernels of the export test differ in
// PTX), so the kernels do not go through nvcc.
static const char NVRTC_BUILD[] =
    "// Compiles kernels.cu as orch compiled the artefact's kernels (NVRTC, the same program "
    "name and\n"
    "// options), writes the cubin and kernels_cubin.c, which holds it for libmodel.a.\n"
    "// usage: nvrtc_build kernels.cu ARCH NVRTC_VERSION kernels.cubin kernels_cubin.c\n"
    "#include <nvrtc.h>\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "\n"
    "static char *slurp(const char *path) {\n"
    "    FILE *f = fopen(path, \"rb\");\n"
    "    if (!f)\n"
    "        return NULL;\n"
    "    fseek(f, 0, SEEK_END);\n"
    "    long n = ftell(f);\n"
    "    fseek(f, 0, SEEK_SET);\n"
    "    char *s = malloc((size_t)n + 1);\n"
    "    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {\n"
    "        free(s);\n"
    "        s = NULL;\n"
    "    }\n"
    "    if (s)\n"
    "        s[n] = '\\0';\n"
    "    fclose(f);\n"
    "    return s;\n"
    "}\n"
    "\n"
    "static nvrtcResult compile(const char *src, const char **opts, int n, nvrtcProgram *prog) {\n"
    "    nvrtcResult r = nvrtcCreateProgram(prog, src, \"orch_kernels.cu\", 0, NULL, NULL);\n"
    "    return r == NVRTC_SUCCESS ? nvrtcCompileProgram(*prog, n, opts) : r;\n"
    "}\n"
    "\n"
    "int main(int argc, char **argv) {\n"
    "    if (argc != 6) {\n"
    "        fprintf(stderr, \"usage: %s kernels.cu ARCH NVRTC_VERSION kernels.cubin "
    "kernels_cubin.c\\n\", argv[0]);\n"
    "        return 2;\n"
    "    }\n"
    "    int major = 0, minor = 0;\n"
    "    char have[32];\n"
    "    nvrtcVersion(&major, &minor);\n"
    "    snprintf(have, sizeof have, \"%d.%d\", major, minor);\n"
    "    if (strcmp(have, argv[3]) != 0)\n"
    "        fprintf(stderr, \"nvrtc_build: warning: NVRTC %s, where orch compiled the kernels "
    "with NVRTC %s:\\n\"\n"
    "                \"  the machine code, and so the last bits of some results, may "
    "differ\\n\", have, argv[3]);\n"
    "    char *src = slurp(argv[1]);\n"
    "    if (!src) {\n"
    "        fprintf(stderr, \"nvrtc_build: cannot read %s\\n\", argv[1]);\n"
    "        return 1;\n"
    "    }\n"
    "    char arch[64];\n"
    "    snprintf(arch, sizeof arch, \"--gpu-architecture=%s\", argv[2]);\n"
    "    const char *opts[] = {arch, \"-default-device\", \"--std=c++17\", "
    "\"--split-compile=0\"};\n"
    "    nvrtcProgram prog = NULL;\n"
    "    nvrtcResult r = compile(src, opts, 4, &prog);\n"
    "    if (r == NVRTC_ERROR_INVALID_OPTION) { // an NVRTC without --split-compile\n"
    "        nvrtcDestroyProgram(&prog);\n"
    "        r = compile(src, opts, 3, &prog);\n"
    "    }\n"
    "    if (r != NVRTC_SUCCESS) {\n"
    "        size_t n = 0;\n"
    "        fprintf(stderr, \"nvrtc_build: %s: %s\\n\", argv[1], nvrtcGetErrorString(r));\n"
    "        if (prog && nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {\n"
    "            char *log = malloc(n);\n"
    "            if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)\n"
    "                fprintf(stderr, \"%s\\n\", log);\n"
    "            free(log);\n"
    "        }\n"
    "        return 1;\n"
    "    }\n"
    "    size_t n = 0;\n"
    "    unsigned char *bin = NULL;\n"
    "    if (nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || !n || !(bin = malloc(n)) ||\n"
    "        nvrtcGetCUBIN(prog, (char *)bin) != NVRTC_SUCCESS) {\n"
    "        fprintf(stderr, \"nvrtc_build: no cubin (ARCH must be a real architecture, "
    "sm_XY)\\n\");\n"
    "        return 1;\n"
    "    }\n"
    "    FILE *f = fopen(argv[4], \"wb\"), *c = fopen(argv[5], \"w\");\n"
    "    int ok = f && c && fwrite(bin, 1, n, f) == n;\n"
    "    if (ok) {\n"
    "        // Aligned: the driver reads the ELF image in place.\n"
    "        fprintf(c, \"// kernels.cu's cubin for %s, written by nvrtc_build.\\n\"\n"
    "                   \"_Alignas(64) const unsigned char model_cubin[%zu] = {\", argv[2], n);\n"
    "        for (size_t i = 0; i < n; i++)\n"
    "            fprintf(c, \"%s%u,\", i % 24 ? \"\" : \"\\n    \", bin[i]);\n"
    "        fprintf(c, \"\\n};\\n\");\n"
    "    }\n"
    "    ok = (!f || fclose(f) == 0) && (!c || fclose(c) == 0) && ok;\n"
    "    if (!ok)\n"
    "        fprintf(stderr, \"nvrtc_build: cannot write %s and %s\\n\", argv[4], argv[5]);\n"
    "    nvrtcDestroyProgram(&prog);\n"
    "    free(bin);\n"
    "    free(src);\n"
    "    return ok ? 0 : 1;\n"
    "}\n";

// The Makefile: the kernels by nvrtc_build for the artefact's architecture, model.cu by nvcc, the
// libraries by the sonames of the versions the calls were chosen with.
static void makefile(StrBuf *b, const CudaTree *c) {
    sb_printf(b,
              "# Builds the model orch export wrote: libmodel.a (model.cu, and kernels.cu's "
              "cubin) and ./model,\n"
              "# a runner. kernels.cu is compiled as orch compiled it, by NVRTC (nvrtc_build) for "
              "ARCH, the GPU\n"
              "# the artefact was compiled on. CUDA_HOME: the toolkit (from nvcc's folder). "
              "LIBDIRS / INCDIRS:\n"
              "# folders of the CUDA libraries and their headers where the compilers do not look "
              "(a pip wheel's\n"
              "# site-packages/nvidia/*/lib and include).\n"
              "NVCC ?= nvcc\n"
              "CC ?= cc\n"
              "CUDA_HOME ?= $(patsubst %%/bin/,%%,$(dir $(realpath $(shell command -v "
              "$(NVCC)))))\n"
              "ARCH ?= %s\n"
              "NVRTC_VERSION = %s\n"
              "CFLAGS ?= -O2\n"
              "LIBDIRS ?=\n"
              "INCDIRS ?=\n"
              "LIBS = -lcuda",
              c->arch, c->nvrtc[0] ? c->nvrtc : "unknown");
    if (c->n_blas)
        sb_printf(b, " -l:libcublasLt.so.%llu", (unsigned long long)(c->blas_ver / 10000));
    if (c->n_dnn)
        sb_printf(
            b, " -l:libcudnn.so.%llu",
            (unsigned long long)(c->dnn_ver >= 90000 ? c->dnn_ver / 10000 : c->dnn_ver / 1000));
    sb_puts(b, "\n\n"
               "all: model libmodel.a\n"
               "\n"
               "nvrtc_build: nvrtc_build.c\n"
               "\t$(CC) -O2 -std=gnu11 nvrtc_build.c -I$(CUDA_HOME)/include "
               "-L$(CUDA_HOME)/lib64 \\\n"
               "\t    -Wl,-rpath,$(CUDA_HOME)/lib64 -lnvrtc -o $@\n"
               "\n"
               "kernels_cubin.c: kernels.cu nvrtc_build\n"
               "\t./nvrtc_build kernels.cu $(ARCH) $(NVRTC_VERSION) kernels.cubin "
               "kernels_cubin.c\n"
               "\n"
               "kernels_cubin.o: kernels_cubin.c\n"
               "\t$(CC) $(CFLAGS) -std=gnu11 -fPIC -c kernels_cubin.c -o $@\n"
               "\n"
               "model.o: model.cu model.h\n"
               "\t$(NVCC) -std=c++17 -O2 $(INCDIRS:%=-I%) -Xcompiler -fPIC -c model.cu -o $@\n"
               "\n"
               "libmodel.a: model.o kernels_cubin.o\n"
               "\t$(AR) rcs $@ model.o kernels_cubin.o\n"
               "\n"
               "main.o: main.c model.h\n"
               "\t$(CC) $(CFLAGS) -std=gnu11 -c main.c -o $@\n"
               "\n"
               "# libcuda from the driver at run time (the toolkit's stub to link with where there "
               "is none);\n# the libraries from LIBDIRS, the loader's path or the toolkit.\n"
               "model: main.o libmodel.a\n"
               "\t$(NVCC) main.o libmodel.a $(LIBDIRS:%=-L%) $(LIBDIRS:%=-Xlinker -rpath=%) "
               "-L$(CUDA_HOME)/lib64/stubs \\\n"
               "\t    -Xlinker -rpath=$(CUDA_HOME)/lib64 \\\n"
               "\t    $(LIBS) -o $@\n"
               "\n"
               "clean:\n"
               "\trm -f model libmodel.a model.o kernels_cubin.o kernels_cubin.c kernels.cubin "
               "main.o nvrtc_build\n"
               "\n"
               ".PHONY: all clean\n");
}

int cuda_export_tree(const ArtifactContents *a, const char *dir, FILE *progress, Err *e) {
    ExportPlan x;
    CudaTree c;
    int rc = export_open(a, &x, e);
    if (rc == ST_OK)
        rc = tree_analyse(a, &x, &c, e);
    else
        memset(&c, 0, sizeof c);
    if (rc == ST_OK)
        rc = export_make_dir(dir, e);
    StrBuf mc, mh, mk;
    sb_init(&mc);
    sb_init(&mh);
    sb_init(&mk);
    if (rc == ST_OK) {
        model_cu(&mc, a, &c);
        export_model_h(&mh, "// The same from device buffers (cudaMalloc'd on this GPU), after the "
                            "work queued on stream\n// (a cudaStream_t; NULL: the legacy default "
                            "stream); finished on return.\n"
                            "int model_run_device(Model *m, const void *const *inputs, void "
                            "*const *outputs, void *stream);\n");
        makefile(&mk, &c);
        const ExportFile files[] = {
            {"kernels.cu", x.generated ? (const char *)a->src : "", x.generated ? a->src_size : 0},
            {"nvrtc_build.c", NVRTC_BUILD, strlen(NVRTC_BUILD)},
            {"weights.bin", x.blob, (size_t)x.P->const_bytes},
            {"model.cu", mc.s, strlen(mc.s)},
            {"model.h", mh.s, strlen(mh.s)},
            {"main.c", export_main_c, strlen(export_main_c)},
            {"Makefile", mk.s, strlen(mk.s)},
        };
        rc = export_write_files(dir, files, (int)ORCH_COUNT(files), e);
    }
    if (rc == ST_OK && progress)
        fprintf(progress,
                "exported %s to %s/: %d launches (%d kernels: %d cuBLASLt calls, %d cuDNN calls), "
                "kernels.cu %.1f KiB, weights.bin %.2f MiB, arena %.2f MiB; build with make -C "
                "%s (nvcc and NVRTC %s, %s)\n",
                x.path, dir, x.P->n_launches, x.P->n_kernels, c.n_blas, c.n_dnn,
                (double)a->src_size / 1024.0, (double)x.P->const_bytes / 1048576.0,
                (double)x.P->arena_bytes / 1048576.0, dir, c.nvrtc, c.arch);
    sb_free(&mc);
    sb_free(&mh);
    sb_free(&mk);
    tree_free(&c);
    export_close(&x);
    return rc;
}
