// The CUDA runtime session (see session_cuda.h). Creation resolves and allocates everything and
// captures the device segments of the launch list as CUDA graphs; a run only issues copies,
// graph launches and, for host launches, the interpreter between two copies.
#include "session_cuda.h"

#include "../../interp/prim_interp.h"
#include "../../plan/artifact_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

// ---- the launch table and the CUDA module blob ----

void cuda_launch_table_set(CudaLaunchTable *t, const char *symbol, const CudaLaunch *l) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->symbols[i], symbol) == 0) {
            t->launches[i] = *l;
            return;
        }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->symbols = xrealloc(t->symbols, sizeof(char *) * (size_t)t->cap);
        t->launches = xrealloc(t->launches, sizeof(CudaLaunch) * (size_t)t->cap);
    }
    t->symbols[t->n] = xstrdup(symbol);
    t->launches[t->n++] = *l;
}

const CudaLaunch *cuda_launch_table_find(const CudaLaunchTable *t, const char *symbol) {
    for (int i = 0; t && symbol && i < t->n; i++)
        if (strcmp(t->symbols[i], symbol) == 0)
            return &t->launches[i];
    return NULL;
}

void cuda_launch_table_free(CudaLaunchTable *t) {
    for (int i = 0; i < t->n; i++)
        free(t->symbols[i]);
    free(t->symbols);
    free(t->launches);
    memset(t, 0, sizeof *t);
}

#define CUMOD_MAGIC "ORCHCUMD"
// Format 1: kernels only (no kind per entry); 2: each entry says kernel, cuBLASLt call or cuDNN
// call (a reader that predates a kind refuses such an entry by its kind). Kind 3 is a cuBLASLt
// call with a residual C: kind 1's fields and then in_res, so a module without such calls reads
// as before and an older orch names the kind it cannot run.
#define CUMOD_FORMAT 2u
enum { CUMOD_KERNEL = 0, CUMOD_BLASLT = 1, CUMOD_CUDNN = 2, CUMOD_BLASLT_RES = 3 };
#define CUMOD_MAX_SYMBOL 4096

typedef struct Wr {
    uint8_t *p;
    size_t n, cap;
} Wr;

static void w_bytes(Wr *w, const void *d, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = ORCH_MAX(2 * w->cap, w->n + n + 256);
        w->p = xrealloc(w->p, w->cap);
    }
    if (n)
        memcpy(w->p + w->n, d, n);
    w->n += n;
}

static void w_u32(Wr *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_bytes(w, b, 4);
}

static void w_u64(Wr *w, uint64_t v) {
    w_u32(w, (uint32_t)v);
    w_u32(w, (uint32_t)(v >> 32));
}

static void w_pad64(Wr *w) {
    static const uint8_t zeros[64];
    w_bytes(w, zeros, (64 - w->n % 64) % 64);
}

static void w_blaslt(Wr *w, const BlasLtCall *c) {
    w_u32(w, (uint32_t)c->m);
    w_u32(w, (uint32_t)c->n);
    w_u32(w, (uint32_t)c->k);
    w_u32(w, (uint32_t)c->trans_a);
    w_u32(w, (uint32_t)c->trans_b);
    w_u64(w, (uint64_t)c->lda);
    w_u64(w, (uint64_t)c->ldb);
    w_u64(w, (uint64_t)c->ldc);
    w_u32(w, (uint32_t)c->batch);
    w_u64(w, (uint64_t)c->stride_a);
    w_u64(w, (uint64_t)c->stride_b);
    w_u64(w, (uint64_t)c->stride_c);
    w_u32(w, (uint32_t)c->epilogue);
    w_u32(w, (uint32_t)c->compute);
    uint32_t alpha;
    memcpy(&alpha, &c->alpha, 4);
    w_u32(w, alpha);
    w_u32(w, (uint32_t)c->in_a);
    w_u32(w, (uint32_t)c->in_b);
    w_u32(w, (uint32_t)c->in_bias);
    w_u32(w, c->align_a);
    w_u32(w, c->align_b);
    w_u32(w, c->align_c);
    for (int i = 0; i < 8; i++)
        w_u64(w, c->algo[i]);
    w_u64(w, c->workspace);
    w_u64(w, c->version);
    if (c->in_res >= 0)
        w_u32(w, (uint32_t)c->in_res);
}

static void w_dnn(Wr *w, const DnnCall *c) {
    const int32_t f[] = {c->n,      c->c,      c->h,      c->w,       c->k,         c->r,
                         c->s,      c->groups, c->pad[0], c->pad[1],  c->stride[0], c->stride[1],
                         c->dil[0], c->dil[1], c->p,      c->q,       c->epilogue,  c->math,
                         c->algo,   c->in_x,   c->in_w,   c->in_bias, c->in_z};
    for (size_t i = 0; i < ORCH_COUNT(f); i++)
        w_u32(w, (uint32_t)f[i]);
    uint32_t alpha;
    memcpy(&alpha, &c->alpha, 4);
    w_u32(w, alpha);
    w_u64(w, c->workspace);
    w_u64(w, c->version);
}

int cuda_module_pack(const void *cubin, size_t cubin_size, const CudaLaunchTable *t, uint8_t **buf,
                     size_t *len, Err *e) {
    *buf = NULL;
    *len = 0;
    Wr w = {0};
    w_bytes(&w, CUMOD_MAGIC, 8);
    w_u32(&w, CUMOD_FORMAT);
    w_u32(&w, (uint32_t)t->n);
    for (int i = 0; i < t->n; i++) {
        size_t sl = strlen(t->symbols[i]);
        if (sl == 0 || sl > CUMOD_MAX_SYMBOL) {
            free(w.p);
            return err_set(e, ST_INVALID, "CUDA launch table: symbol %d has %zu bytes", i, sl);
        }
        w_u32(&w, (uint32_t)sl);
        w_bytes(&w, t->symbols[i], sl);
        const CudaLaunch *l = &t->launches[i];
        w_u32(&w, l->lib == CUDA_LIB_CUDNN ? CUMOD_CUDNN
                  : l->lib == CUDA_LIB_BLASLT
                      ? (l->blas.in_res >= 0 ? CUMOD_BLASLT_RES : CUMOD_BLASLT)
                      : CUMOD_KERNEL);
        if (l->lib == CUDA_LIB_BLASLT) {
            w_blaslt(&w, &l->blas);
            continue;
        }
        if (l->lib == CUDA_LIB_CUDNN) {
            w_dnn(&w, &l->dnn);
            continue;
        }
        for (int d = 0; d < 3; d++)
            w_u32(&w, l->grid[d]);
        for (int d = 0; d < 3; d++)
            w_u32(&w, l->block[d]);
        w_u32(&w, l->smem);
    }
    w_pad64(&w);
    w_u64(&w, (uint64_t)cubin_size);
    w_pad64(&w);
    w_bytes(&w, cubin, cubin_size);
    w_u64(&w, plan_hash64(w.p, w.n, 0));
    *buf = w.p;
    *len = w.n;
    return ST_OK;
}

typedef struct Rd {
    const uint8_t *p;
    size_t n, at;
    bool bad;
} Rd;

static const uint8_t *r_bytes(Rd *r, size_t n) {
    if (r->bad || n > r->n - r->at) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->at;
    r->at += n;
    return q;
}

static uint32_t r_u32(Rd *r) {
    const uint8_t *b = r_bytes(r, 4);
    return b ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24
             : 0;
}

static uint64_t r_u64(Rd *r) {
    uint64_t lo = r_u32(r);
    return lo | (uint64_t)r_u32(r) << 32;
}

static void r_pad64(Rd *r) {
    r_bytes(r, (64 - r->at % 64) % 64);
}

static void r_blaslt(Rd *r, BlasLtCall *c, bool res) {
    memset(c, 0, sizeof *c);
    c->m = (int32_t)r_u32(r);
    c->n = (int32_t)r_u32(r);
    c->k = (int32_t)r_u32(r);
    c->trans_a = (int32_t)r_u32(r);
    c->trans_b = (int32_t)r_u32(r);
    c->lda = (int64_t)r_u64(r);
    c->ldb = (int64_t)r_u64(r);
    c->ldc = (int64_t)r_u64(r);
    c->batch = (int32_t)r_u32(r);
    c->stride_a = (int64_t)r_u64(r);
    c->stride_b = (int64_t)r_u64(r);
    c->stride_c = (int64_t)r_u64(r);
    c->epilogue = (int32_t)r_u32(r);
    c->compute = (int32_t)r_u32(r);
    uint32_t alpha = r_u32(r);
    memcpy(&c->alpha, &alpha, 4);
    c->in_a = (int32_t)r_u32(r);
    c->in_b = (int32_t)r_u32(r);
    c->in_bias = (int32_t)r_u32(r);
    c->align_a = r_u32(r);
    c->align_b = r_u32(r);
    c->align_c = r_u32(r);
    for (int i = 0; i < 8; i++)
        c->algo[i] = r_u64(r);
    c->workspace = r_u64(r);
    c->version = r_u64(r);
    c->in_res = res ? (int32_t)r_u32(r) : -1;
}

static void r_dnn(Rd *r, DnnCall *c) {
    memset(c, 0, sizeof *c);
    int32_t *f[] = {&c->n,      &c->c,      &c->h,      &c->w,       &c->k,         &c->r,
                    &c->s,      &c->groups, &c->pad[0], &c->pad[1],  &c->stride[0], &c->stride[1],
                    &c->dil[0], &c->dil[1], &c->p,      &c->q,       &c->epilogue,  &c->math,
                    &c->algo,   &c->in_x,   &c->in_w,   &c->in_bias, &c->in_z};
    for (size_t i = 0; i < ORCH_COUNT(f); i++)
        *f[i] = (int32_t)r_u32(r);
    uint32_t alpha = r_u32(r);
    memcpy(&c->alpha, &alpha, 4);
    c->workspace = r_u64(r);
    c->version = r_u64(r);
}

int cuda_module_unpack(const uint8_t *buf, size_t len, const char *what, const uint8_t **cubin,
                       size_t *cubin_size, CudaLaunchTable *t, Err *e) {
    *cubin = NULL;
    *cubin_size = 0;
    memset(t, 0, sizeof *t);
    if (len < 8 + 4 + 4 + 8 + 8 || memcmp(buf, CUMOD_MAGIC, 8) != 0)
        return err_set(e, ST_INVALID, "%s: not a CUDA module (no %s header)", what, CUMOD_MAGIC);
    Rd sum = {buf, len, len - 8, false};
    if (r_u64(&sum) != plan_hash64(buf, len - 8, 0))
        return err_set(e, ST_INVALID, "%s: the CUDA module is corrupted (checksum mismatch)", what);
    Rd r = {buf, len - 8, 8, false};
    uint32_t fmt = r_u32(&r), n = r_u32(&r);
    if (fmt != 1 && fmt != CUMOD_FORMAT)
        return err_set(e, ST_INVALID,
                       "%s: CUDA module format %u, this orch reads formats 1 and %u; recompile "
                       "with orch compile",
                       what, fmt, CUMOD_FORMAT);
    // Each entry takes at least 4 + 1 + 28 bytes: a count beyond that is corruption.
    if ((size_t)n > len / 33)
        return err_set(e, ST_INVALID, "%s: the CUDA module claims %u kernels", what, n);
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        uint32_t sl = r_u32(&r);
        if (sl == 0 || sl > CUMOD_MAX_SYMBOL) {
            cuda_launch_table_free(t);
            return err_set(e, ST_INVALID, "%s: CUDA module entry %u has a %u-byte symbol", what, i,
                           sl);
        }
        const uint8_t *sym = r_bytes(&r, sl);
        CudaLaunch l;
        memset(&l, 0, sizeof l);
        uint32_t kind = fmt == 1 ? CUMOD_KERNEL : r_u32(&r);
        if (!r.bad && kind != CUMOD_KERNEL && kind != CUMOD_BLASLT && kind != CUMOD_CUDNN &&
            kind != CUMOD_BLASLT_RES) {
            cuda_launch_table_free(t);
            return err_set(e, ST_INVALID, "%s: CUDA module entry %u has unknown kind %u", what, i,
                           kind);
        }
        if (kind == CUMOD_BLASLT || kind == CUMOD_CUDNN || kind == CUMOD_BLASLT_RES) {
            bool dnn = kind == CUMOD_CUDNN;
            l.lib = dnn ? CUDA_LIB_CUDNN : CUDA_LIB_BLASLT;
            if (dnn)
                r_dnn(&r, &l.dnn);
            else
                r_blaslt(&r, &l.blas, kind == CUMOD_BLASLT_RES);
            char why[128];
            if (r.bad)
                break;
            bool valid = dnn ? dnn_call_valid(&l.dnn, why, sizeof why)
                             : blaslt_call_valid(&l.blas, why, sizeof why);
            if (!valid || memchr(sym, 0, sl)) {
                cuda_launch_table_free(t);
                return err_set(e, ST_INVALID,
                               "%s: CUDA module entry %u: an impossible %s call (%s)", what, i,
                               dnn ? "cuDNN" : "cuBLASLt", memchr(sym, 0, sl) ? "symbol" : why);
            }
            char *lname = xmalloc(sl + 1);
            memcpy(lname, sym, sl);
            lname[sl] = '\0';
            cuda_launch_table_set(t, lname, &l);
            free(lname);
            continue;
        }
        for (int d = 0; d < 3; d++)
            l.grid[d] = r_u32(&r);
        for (int d = 0; d < 3; d++)
            l.block[d] = r_u32(&r);
        l.smem = r_u32(&r);
        if (r.bad)
            break;
        uint64_t threads = (uint64_t)l.block[0] * l.block[1] * l.block[2];
        if (!l.grid[0] || !l.grid[1] || !l.grid[2] || !threads || threads > 1024 ||
            memchr(sym, 0, sl)) {
            cuda_launch_table_free(t);
            return err_set(e, ST_INVALID,
                           "%s: CUDA module entry %u has an impossible launch (grid %ux%ux%u, "
                           "block %ux%ux%u)",
                           what, i, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                           l.block[2]);
        }
        char *name = xmalloc(sl + 1);
        memcpy(name, sym, sl);
        name[sl] = '\0';
        cuda_launch_table_set(t, name, &l);
        free(name);
    }
    r_pad64(&r);
    uint64_t cs = r_u64(&r);
    r_pad64(&r);
    const uint8_t *img = r.bad || cs != r.n - r.at ? NULL : r_bytes(&r, (size_t)cs);
    if (!img) {
        cuda_launch_table_free(t);
        return err_set(e, ST_INVALID, "%s: the CUDA module is truncated or its sizes disagree",
                       what);
    }
    *cubin = img;
    *cubin_size = (size_t)cs;
    return ST_OK;
}

// ---- the session ----

// The kernel parameter as the device sees it (cugen.h: struct OrchArgs): 64-bit pointers.
typedef struct DevArgs {
    CUdeviceptr in[ORCH_CUDA_MAX_IN];
    CUdeviceptr out;
} DevArgs;
_Static_assert(sizeof(DevArgs) == 8 * (ORCH_CUDA_MAX_IN + 1), "OrchArgs layout");

typedef struct CLaunch {
    const PlanLaunch *pl;
    bool empty;  // nothing to compute (every output has zero elements, or a zero-byte copy)
    bool device; // PLAN_GENERATED or PLAN_COPY: issued on the stream (and captured)
    CUfunction fn;
    CudaLaunch geo; // geo.lib: a cuBLASLt call (op) or a cuDNN call (dnn), not a kernel
    BlasLtOp op;
    DnnOp dnn;
    DevArgs args;
    CUdeviceptr copy_src, copy_dst;
    size_t copy_bytes;
    const Prim *p;     // host launches and operator kernels: the sink
    int flag;          // an operator kernel's status word (its index in CudaSession.flags), or -1
    const void **h_in; // host launches: the interpreter's operands (host buffers)
    void **h_out;
    char *name, *nodes;
} CLaunch;

typedef struct Segment {
    bool device;
    int first, last;  // launches [first, last]
    CUgraphExec exec; // device segments with at least one operation
} Segment;

struct CudaSession {
    const PrimGraph *pg;
    const Plan *plan;
    const CudaApi *api;
    CudaDevice dev;
    CUmodule mod;
    CUstream stream;
    CUdeviceptr arena, consts, dummy;
    CUdeviceptr ws;    // the library calls' workspace (one: the calls run one after another)
    CUdeviceptr flags; // the operator kernels' status words (cugen.h), one int each, cleared
    int *h_flags;      // at the start of every run and read back after it
    int n_flags, max_flags;
    uint64_t ws_bytes;
    CUdeviceptr *d_in, *d_out; // per graph input / output
    void **host_of;            // per tensor: host staging of the host launches' operands
    CLaunch *launches;
    int n_launches;
    Segment *segs;
    int n_segs, n_graphs;
    CUevent *ev;                            // two per launch, for profiling
    CUevent ev_after;                       // device runs: the caller's stream, recorded
    CUfunction spin;                        // CUDA_SPIN_SYMBOL when the cubin has it
    long long spin_cycles, spin_lib_cycles; // a kernel's and a library call's (see run_launches)
    double *times;
    bool profiling, timed;
    int threads;
    // Owned when the session came from an artefact.
    Graph *g_owned;
    PrimGraph *pg_owned;
    Plan *plan_owned;
    ArtifactFile *file; // the artefact's bytes, which g_owned's weights borrow
};

static char *join_nodes(const PlanLaunch *L) {
    size_t n = 1;
    for (int i = 0; i < L->n_nodes; i++)
        n += strlen(L->nodes[i]) + 2;
    char *s = xmalloc(n), *q = s;
    *q = 0;
    for (int i = 0; i < L->n_nodes; i++)
        q += sprintf(q, "%s%s", i ? ", " : "", L->nodes[i]);
    return s;
}

static char *launch_name(const PrimGraph *pg, const PlanLaunch *L) {
    char buf[512];
    const Prim *p = L->sink >= 0 ? pg->prims[L->sink] : NULL;
    switch (L->kind) {
    case PLAN_GENERATED: return xstrdup(L->symbol);
    case PLAN_INTERP:
        snprintf(buf, sizeof buf, "interp:%s#%d", prim_kind_name(p->kind), p->id);
        break;
    case PLAN_OPAQUE: snprintf(buf, sizeof buf, "opaque:%s", p->node ? p->node->op : "?"); break;
    default: snprintf(buf, sizeof buf, "copy:%.400s", pg->tensors[L->in[0]]->name); break;
    }
    return xstrdup(buf);
}

// The device address of tensor t (0 for an absent operand).
static CUdeviceptr dev_addr(const CudaSession *s, int t) {
    if (t < 0)
        return 0;
    const PlanTensor *T = &s->plan->tensors[t];
    switch (T->place) {
    case PLACE_INPUT: return s->d_in[T->index];
    case PLACE_OUTPUT: return s->d_out[T->index];
    case PLACE_CONST: return T->bytes ? s->consts + (CUdeviceptr)T->offset : s->dummy;
    case PLACE_ARENA: return T->bytes ? s->arena + (CUdeviceptr)T->offset : s->dummy;
    default: ORCH_ASSERT(!"a launch operand with no place"); return 0;
    }
}

static int dev_alloc(CudaSession *s, CUdeviceptr *p, size_t bytes, const char *what, Err *e) {
    if (CUDA_TRY(s->api, e, cuMemAlloc, p, bytes ? bytes : 256)) {
        *p = 0;
        err_prefix(e, "CUDA session: allocating %zu bytes for %s: ", bytes, what);
        return e->code;
    }
    return ST_OK;
}

static void *host_buffer(size_t bytes) {
    size_t n = (bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    void *p = aligned_alloc(PLAN_ALIGN, n ? n : PLAN_ALIGN);
    if (p)
        memset(p, 0, n ? n : PLAN_ALIGN);
    return p;
}

// Resolves one launch: function and geometry, arguments, copy addresses, host operands.
static int prepare_launch(CudaSession *s, int k, const CudaLaunchTable *table, Err *e) {
    const PrimGraph *pg = s->pg;
    const PlanLaunch *L = &s->plan->launches[k];
    CLaunch *l = &s->launches[k];
    l->pl = L;
    l->name = launch_name(pg, L);
    l->nodes = join_nodes(L);
    l->p = L->sink >= 0 ? pg->prims[L->sink] : NULL;
    l->flag = -1;
    l->empty = L->kind != PLAN_COPY;
    for (int j = 0; j < L->n_out; j++)
        l->empty = l->empty && (L->out[j] < 0 || tensor_numel(pg->tensors[L->out[j]]) == 0);
    switch (L->kind) {
    case PLAN_GENERATED: {
        l->device = true;
        // An operator kernel takes its output 1 and its status word after the inputs (cugen.h).
        bool op = l->p && ckernel_op_abi(l->p);
        int slots = L->n_in + (op ? ORCH_CUDA_OP_SLOTS : 0);
        if (slots > ORCH_CUDA_MAX_IN || (op && L->n_out > 2))
            return err_set(e, ST_INVALID,
                           "CUDA session: launch %d (%s, nodes '%s') has %d inputs and %d "
                           "outputs; CUDA kernels take at most %d slots",
                           k, l->name, l->nodes, L->n_in, L->n_out, ORCH_CUDA_MAX_IN);
        const CudaLaunch *g = cuda_launch_table_find(table, L->symbol);
        if (!g)
            return err_set(e, ST_INVALID,
                           "CUDA session: the launch table has no geometry for kernel '%s' "
                           "(launch %d, nodes '%s'): the artefact is damaged or was built by "
                           "another orch build; recompile with orch compile",
                           L->symbol, k, l->nodes);
        l->geo = *g;
        for (int j = 0; j < L->n_in; j++)
            l->args.in[j] = dev_addr(s, L->in[j]);
        l->args.out = dev_addr(s, L->out[0]);
        if (op) {
            if (g->lib)
                return err_set(e, ST_INVALID,
                               "CUDA session: launch %d (%s, nodes '%s') is an operator kernel "
                               "but the launch table names a library call: the artefact is "
                               "damaged; recompile with orch compile",
                               k, l->name, l->nodes);
            ORCH_ASSERT(s->n_flags < s->max_flags); // prepare counted them: one word each
            l->flag = s->n_flags++;
            l->args.in[L->n_in] = L->n_out > 1 ? dev_addr(s, L->out[1]) : 0;
            l->args.in[L->n_in + 1] = s->flags + (CUdeviceptr)(sizeof(int) * (size_t)l->flag);
        }
        if (g->lib == CUDA_LIB_CUDNN) {
            const DnnCall *c = &g->dnn;
            int top = ORCH_MAX(ORCH_MAX(c->in_x, c->in_w), ORCH_MAX(c->in_bias, c->in_z));
            if (top >= L->n_in)
                return err_set(e, ST_INVALID,
                               "CUDA session: the cuDNN call of '%s' (launch %d, nodes '%s') "
                               "reads input %d of %d: the artefact is damaged; recompile",
                               L->symbol, k, l->nodes, top, L->n_in);
            // The handle now: creating it inside the graph capture would break the capture.
            if (dnn_check_version(c, e) || dnn_init(s->dev.ordinal, e) ||
                cuda_device_bind(&s->dev, e) || dnn_op_create(c, &l->dnn, e)) {
                err_prefix(e, "CUDA session: launch %d (%s, nodes '%s'): ", k, L->symbol, l->nodes);
                return e->code;
            }
            s->ws_bytes = ORCH_MAX(s->ws_bytes, c->workspace);
            free(l->name);
            l->name = xmalloc(strlen(L->symbol) + 10);
            sprintf(l->name, "cudnn:%s", L->symbol);
            return ST_OK;
        }
        if (g->lib) {
            const BlasLtCall *c = &g->blas;
            if (c->in_a >= L->n_in || c->in_b >= L->n_in || c->in_bias >= L->n_in ||
                c->in_res >= L->n_in)
                return err_set(e, ST_INVALID,
                               "CUDA session: the cuBLASLt call of '%s' (launch %d, nodes '%s') "
                               "reads input %d of %d: the artefact is damaged; recompile",
                               L->symbol, k, l->nodes, ORCH_MAX(c->in_a, c->in_b), L->n_in);
            // The handle now: creating it inside the graph capture would break the capture.
            if (blaslt_check_version(c, e) || blaslt_init(s->dev.ordinal, e) ||
                cuda_device_bind(&s->dev, e) || blaslt_op_create(c, &l->op, e)) {
                err_prefix(e, "CUDA session: launch %d (%s, nodes '%s'): ", k, L->symbol, l->nodes);
                return e->code;
            }
            s->ws_bytes = ORCH_MAX(s->ws_bytes, c->workspace);
            free(l->name);
            l->name = xmalloc(strlen(L->symbol) + 10);
            sprintf(l->name, "cublaslt:%s", L->symbol);
            return ST_OK;
        }
        CUresult r = s->api->cuModuleGetFunction(&l->fn, s->mod, L->symbol);
        if (r == CUDA_ERROR_NOT_FOUND)
            return err_set(e, ST_INVALID,
                           "CUDA session: the cubin has no kernel '%s' (launch %d, nodes '%s'): "
                           "the artefact is damaged or was built by another orch build; "
                           "recompile with orch compile",
                           L->symbol, k, l->nodes);
        if (cuda_check(s->api, r, "cuModuleGetFunction", e)) {
            err_prefix(e, "CUDA session: kernel '%s': ", L->symbol);
            return e->code;
        }
        if (l->geo.smem > 48 * 1024 &&
            CUDA_TRY(s->api, e, cuFuncSetAttribute, l->fn,
                     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->geo.smem)) {
            err_prefix(e,
                       "CUDA session: kernel '%s' asks for %u bytes of shared memory: ", L->symbol,
                       l->geo.smem);
            return e->code;
        }
        return ST_OK;
    }
    case PLAN_COPY:
        l->device = true;
        l->copy_src = dev_addr(s, L->in[0]);
        l->copy_dst = s->d_out[L->copy_to];
        l->copy_bytes = (size_t)s->plan->tensors[L->in[0]].bytes;
        l->empty = l->copy_bytes == 0 || l->copy_src == l->copy_dst;
        return ST_OK;
    default: break;
    }
    // PLAN_INTERP / PLAN_OPAQUE: host operands, one staging buffer per tensor.
    l->h_in = xcalloc((size_t)L->n_in + 1, sizeof(void *));
    l->h_out = xcalloc((size_t)L->n_out + 1, sizeof(void *));
    for (int j = 0; j < L->n_in + L->n_out; j++) {
        int t = j < L->n_in ? L->in[j] : L->out[j - L->n_in];
        if (t < 0)
            continue;
        if (!s->host_of[t] && !(s->host_of[t] = host_buffer(tensor_nbytes(pg->tensors[t]))))
            return err_set(e, ST_RUNTIME,
                           "CUDA session: out of host memory for the operands of launch %d (%s)", k,
                           l->name);
        if (j < L->n_in)
            l->h_in[j] = s->host_of[t];
        else
            l->h_out[j - L->n_in] = s->host_of[t];
    }
    return ST_OK;
}

// Issues one device launch on the stream (also while capturing).
static int issue(CudaSession *s, int k, Err *e) {
    CLaunch *l = &s->launches[k];
    if (l->empty)
        return ST_OK;
    int rc;
    if (l->pl->kind == PLAN_COPY) {
        if ((rc = CUDA_TRY(s->api, e, cuMemcpyDtoDAsync, l->copy_dst, l->copy_src, l->copy_bytes,
                           s->stream)))
            err_prefix(e, "launch %d (%s): ", k, l->name);
        return rc;
    }
    if (l->geo.lib == CUDA_LIB_CUDNN) {
        const DnnCall *c = &l->geo.dnn;
        if ((rc = dnn_op_run(&l->dnn, l->args.in[c->in_x], l->args.in[c->in_w],
                             c->in_bias >= 0 ? l->args.in[c->in_bias] : 0,
                             c->in_z >= 0 ? l->args.in[c->in_z] : 0, l->args.out, s->ws,
                             s->ws_bytes, s->stream, e)))
            err_prefix(e, "launch %d (%s, nodes '%s'): ", k, l->name, l->nodes);
        return rc;
    }
    if (l->geo.lib) {
        const BlasLtCall *c = &l->geo.blas;
        if ((rc = blaslt_op_run(&l->op, l->args.in[c->in_a], l->args.in[c->in_b],
                                c->in_bias >= 0 ? l->args.in[c->in_bias] : 0,
                                c->in_res >= 0 ? l->args.in[c->in_res] : 0, l->args.out, s->ws,
                                s->ws_bytes, s->stream, e)))
            err_prefix(e, "launch %d (%s, nodes '%s'): ", k, l->name, l->nodes);
        return rc;
    }
    void *params[1] = {&l->args};
    const CudaLaunch *g = &l->geo;
    if ((rc = CUDA_TRY(s->api, e, cuLaunchKernel, l->fn, g->grid[0], g->grid[1], g->grid[2],
                       g->block[0], g->block[1], g->block[2], g->smem, s->stream, params, NULL)))
        err_prefix(e, "launch %d (%s, grid %ux%ux%u, block %ux%ux%u, smem %u, nodes '%s'): ", k,
                   l->name, g->grid[0], g->grid[1], g->grid[2], g->block[0], g->block[1],
                   g->block[2], g->smem, l->nodes);
    return rc;
}

// Runs one host launch: operands down, the interpreter, results up.
static int run_host(CudaSession *s, int k, Err *e) {
    CLaunch *l = &s->launches[k];
    const PlanLaunch *L = l->pl;
    if (l->empty)
        return ST_OK;
    for (int j = 0; j < L->n_in; j++) {
        int t = L->in[j];
        size_t b = t >= 0 ? (size_t)s->plan->tensors[t].bytes : 0;
        if (b && CUDA_TRY(s->api, e, cuMemcpyDtoHAsync, (void *)l->h_in[j], dev_addr(s, t), b,
                          s->stream))
            return e->code;
    }
    if (CUDA_TRY(s->api, e, cuStreamSynchronize, s->stream)) {
        err_prefix(e, "before host launch %d (%s): ", k, l->name);
        return e->code;
    }
    int rc = L->kind == PLAN_OPAQUE ? prim_eval_opaque(s->pg, l->p, l->h_in, l->h_out, e)
                                    : prim_eval(s->pg, l->p, l->h_in, l->h_out[0], e);
    if (rc) {
        err_prefix(e, "launch %d (%s, nodes '%s'): ", k, l->name, l->nodes);
        return rc;
    }
    for (int j = 0; j < L->n_out; j++) {
        int t = L->out[j];
        if (t < 0 || s->plan->tensors[t].place == PLACE_NONE || !s->plan->tensors[t].bytes)
            continue;
        if (CUDA_TRY(s->api, e, cuMemcpyHtoDAsync, dev_addr(s, t), l->h_out[j],
                     (size_t)s->plan->tensors[t].bytes, s->stream))
            return e->code;
    }
    return ST_OK;
}

// Operator kernel k set its status word (an index out of range): the reference op on the same
// operands gives its own message ("index 9 (element 17 of 'i') is out of range ..."). Later
// launches may have reused the arena under its operands, so launches 0..k-1 run again one by one
// (computing the same operands again), then launch k's operands come to the
// host. Only this error path allocates.
static int op_kernel_error(CudaSession *s, int k, Err *e) {
    const CLaunch *l = &s->launches[k];
    const Prim *p = l->p;
    int rc = ST_OK;
    for (int i = 0; i < k && rc == ST_OK; i++)
        rc = s->launches[i].device ? issue(s, i, e) : run_host(s, i, e);
    const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
    void **y = xcalloc((size_t)p->n_out + 1, sizeof(void *));
    for (int j = 0; j < p->n_in && rc == ST_OK; j++) {
        int t = p->in[j];
        size_t b = t >= 0 ? tensor_nbytes(s->pg->tensors[t]) : 0;
        if (t < 0)
            continue;
        void *h = xmalloc(b + 1);
        x[j] = h;
        if (b)
            rc = CUDA_TRY(s->api, e, cuMemcpyDtoHAsync, h, dev_addr(s, t), b, s->stream);
    }
    for (int j = 0; j < p->n_out; j++)
        if (p->out[j] >= 0)
            y[j] = xmalloc(tensor_nbytes(s->pg->tensors[p->out[j]]) + 1);
    if (rc == ST_OK)
        rc = CUDA_TRY(s->api, e, cuStreamSynchronize, s->stream);
    if (rc == ST_OK) {
        rc = prim_eval_opaque(s->pg, p, x, y, e);
        if (rc == ST_OK)
            rc = err_set(e, ST_RUNTIME,
                         "the generated kernel set its error status, but the reference op "
                         "accepts the same operands (a bug in orch)");
    }
    err_prefix(e, "CUDA session: launch %d (%s, nodes '%s'): ", k, l->name, l->nodes);
    for (int j = 0; j < p->n_in; j++)
        free((void *)x[j]);
    for (int j = 0; j < p->n_out; j++)
        free(y[j]);
    free(x);
    free(y);
    return rc;
}

// After a finished run: the first operator kernel whose status word is set, reported.
static int check_flags(CudaSession *s, Err *e) {
    for (int k = 0; s->n_flags && k < s->n_launches; k++) {
        const CLaunch *l = &s->launches[k];
        if (l->flag >= 0 && !l->empty && s->h_flags[l->flag])
            return op_kernel_error(s, k, e);
    }
    return ST_OK;
}

// Splits the launches into segments and captures each device segment as a CUDA graph.
static int capture(CudaSession *s, Err *e) {
    s->segs = xcalloc((size_t)s->n_launches + 1, sizeof(Segment));
    for (int k = 0; k < s->n_launches; k++) {
        bool dev = s->launches[k].device;
        if (s->n_segs && s->segs[s->n_segs - 1].device && dev)
            s->segs[s->n_segs - 1].last = k;
        else
            s->segs[s->n_segs++] = (Segment){dev, k, k, NULL};
    }
    for (int i = 0; i < s->n_segs; i++) {
        Segment *g = &s->segs[i];
        bool any = false;
        for (int k = g->first; k <= g->last; k++)
            any = any || !s->launches[k].empty;
        if (!g->device || !any)
            continue;
        if (CUDA_TRY(s->api, e, cuStreamBeginCapture, s->stream,
                     CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
            return e->code;
        int rc = ST_OK;
        for (int k = g->first; k <= g->last && rc == ST_OK; k++)
            rc = issue(s, k, e);
        CUgraph graph = NULL;
        // Capture always ends, so the stream is usable again whatever happened.
        CUresult r = s->api->cuStreamEndCapture(s->stream, &graph);
        if (rc == ST_OK)
            rc = cuda_check(s->api, r, "cuStreamEndCapture", e);
        if (rc == ST_OK)
            rc = CUDA_TRY(s->api, e, cuGraphInstantiate, &g->exec, graph, 0);
        if (graph)
            s->api->cuGraphDestroy(graph);
        if (rc) {
            err_prefix(e, "CUDA session: capturing launches %d..%d as a CUDA graph: ", g->first,
                       g->last);
            return rc;
        }
        s->n_graphs++;
    }
    return ST_OK;
}

static int prepare(CudaSession *s, const void *cubin, size_t cubin_size,
                   const CudaLaunchTable *table, Err *e) {
    const PrimGraph *pg = s->pg;
    const Plan *P = s->plan;
    const CudaApi *api = s->api;
    if (P->n_tensors != pg->n_tensors)
        return err_set(e, ST_INVALID,
                       "CUDA session: the plan was made for another primitive graph");
    bool generated = false;
    for (int k = 0; k < P->n_launches; k++)
        generated = generated || P->launches[k].kind == PLAN_GENERATED;
    if (generated && (!cubin || !cubin_size))
        return err_set(e, ST_INVALID,
                       "CUDA session: the plan has generated kernels but there is no cubin");
    if (generated) {
        // The driver parses the ELF image in place: give it an 8-byte aligned copy if need be.
        void *copy = NULL;
        const void *img = cubin;
        if ((uintptr_t)cubin % 8) {
            copy = xmalloc(cubin_size);
            memcpy(copy, cubin, cubin_size);
            img = copy;
        }
        CUresult r = api->cuModuleLoadData(&s->mod, img);
        free(copy);
        if (r != CUDA_SUCCESS) {
            s->mod = NULL;
            cuda_check(api, r, "cuModuleLoadData", e);
            err_prefix(e, "CUDA session: loading the kernels' cubin (%zu bytes)%s: ", cubin_size,
                       r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE
                           ? " (compiled for another GPU? recompile with orch compile -t cuda)"
                           : "");
            return e->code;
        }
    }
    if (s->mod) {
        CUresult r = api->cuModuleGetFunction(&s->spin, s->mod, CUDA_SPIN_SYMBOL);
        int khz = 0;
        if (r != CUDA_SUCCESS || api->cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
                                                           s->dev.dev) != CUDA_SUCCESS)
            s->spin = NULL; // optional: profiled runs go without it
        s->spin_cycles = (long long)(20e-6 * (khz > 0 ? khz : 1500000) * 1e3); // 20 µs
        s->spin_lib_cycles = 25 * s->spin_cycles;
    }
    if (CUDA_TRY(api, e, cuStreamCreate, &s->stream, CU_STREAM_NON_BLOCKING))
        return e->code;
    int rc = dev_alloc(s, &s->dummy, 256, "zero-byte tensors", e);
    if (rc == ST_OK && P->arena_bytes)
        rc = dev_alloc(s, &s->arena, (size_t)P->arena_bytes, "the arena", e);
    if (rc == ST_OK && P->const_bytes) {
        // Each constant is uploaded from where it lies (an artefact's weights: the file's
        // mapping), with no host copy of the whole blob; constants without data, and the gaps,
        // are zeros (plan_pack_constants).
        rc = dev_alloc(s, &s->consts, (size_t)P->const_bytes, "the constants", e);
        if (rc == ST_OK && CUDA_TRY(api, e, cuMemsetD8, s->consts, 0, (size_t)P->const_bytes))
            rc = e->code;
        for (int t = 0; t < P->n_tensors && rc == ST_OK; t++) {
            const PlanTensor *T = &P->tensors[t];
            if (T->place == PLACE_CONST && T->bytes && pg->tensors[t]->data &&
                CUDA_TRY(api, e, cuMemcpyHtoD, s->consts + (CUdeviceptr)T->offset,
                         pg->tensors[t]->data, (size_t)T->bytes))
                rc = e->code;
        }
        // The copies may still be in flight on the legacy default stream, which the session's
        // non-blocking stream does not wait for: finish them before any launch.
        if (rc == ST_OK && CUDA_TRY(api, e, cuCtxSynchronize))
            rc = e->code;
    }
    int ni = pg->n_inputs, no = pg->n_outputs;
    s->d_in = xcalloc((size_t)ni + 1, sizeof(CUdeviceptr));
    s->d_out = xcalloc((size_t)no + 1, sizeof(CUdeviceptr));
    for (int i = 0; i < ni + no && rc == ST_OK; i++) {
        int t = i < ni ? pg->inputs[i] : pg->outputs[i - ni];
        size_t b = tensor_nbytes(pg->tensors[t]);
        CUdeviceptr *p = i < ni ? &s->d_in[i] : &s->d_out[i - ni];
        if (b == 0)
            *p = s->dummy;
        else
            rc = dev_alloc(s, p, b, pg->tensors[t]->name, e);
    }
    if (rc)
        return rc;
    s->n_launches = P->n_launches;
    s->launches = xcalloc((size_t)P->n_launches + 1, sizeof(CLaunch));
    s->host_of = xcalloc((size_t)pg->n_tensors + 1, sizeof(void *));
    s->times = xcalloc((size_t)P->n_launches + 1, sizeof(double));
    s->ev = xcalloc(2 * (size_t)P->n_launches + 1, sizeof(CUevent));
    int ops = 0;
    for (int k = 0; k < P->n_launches; k++)
        ops += P->launches[k].kind == PLAN_GENERATED && P->launches[k].sink >= 0 &&
               ckernel_op_abi(pg->prims[P->launches[k].sink]);
    s->max_flags = ops;
    if (ops) {
        s->h_flags = xcalloc((size_t)ops, sizeof(int));
        rc = dev_alloc(s, &s->flags, sizeof(int) * (size_t)ops, "the operator kernels' status", e);
    }
    for (int k = 0; k < P->n_launches && rc == ST_OK; k++)
        rc = prepare_launch(s, k, table, e);
    if (rc == ST_OK && s->ws_bytes)
        rc = dev_alloc(s, &s->ws, (size_t)s->ws_bytes, "the library calls' workspace", e);
    for (int k = 0; k < 2 * P->n_launches && rc == ST_OK; k++)
        rc = CUDA_TRY(api, e, cuEventCreate, &s->ev[k], CU_EVENT_DEFAULT);
    // cuDNN calls run once before the capture: a call may set itself up on its first run (plans,
    // run-time compiled engines), which need not be capturable; the lab measured them the same
    // way (cuda_lab.c). The outputs are written again by every run.
    for (int k = 0; k < P->n_launches && rc == ST_OK; k++)
        if (s->launches[k].device && s->launches[k].geo.lib == CUDA_LIB_CUDNN &&
            !s->launches[k].empty && (rc = issue(s, k, e)) == ST_OK &&
            (rc = CUDA_TRY(api, e, cuStreamSynchronize, s->stream)))
            err_prefix(e, "CUDA session: launch %d (%s) before the capture: ", k,
                       s->launches[k].name);
    if (rc == ST_OK)
        rc = capture(s, e);
    return rc;
}

int cuda_session_create(const PrimGraph *pg, const Plan *plan, const void *cubin, size_t cubin_size,
                        const CudaLaunchTable *launches, const SessionOptions *opt,
                        CudaSession **out, Err *e) {
    *out = NULL;
    const CudaApi *api = cuda_api_load(e);
    if (!api)
        return e->code;
    CudaSession *s = xcalloc(1, sizeof *s);
    s->pg = pg;
    s->plan = plan;
    s->api = api;
    s->threads = opt ? opt->threads : 0;
    int rc = cuda_device_open(api, 0, &s->dev, e);
    if (rc == ST_OK)
        rc = prepare(s, cubin, cubin_size, launches, e);
    if (rc) {
        cuda_session_free(s);
        return rc;
    }
    *out = s;
    return ST_OK;
}

void cuda_session_free(CudaSession *s) {
    if (!s)
        return;
    const CudaApi *api = s->api;
    bool bound = s->dev.ctx && cuda_device_bind(&s->dev, &(Err){0}) == ST_OK;
    // Teardown reports nothing: the first error of the session was already returned.
    if (bound) {
        if (s->stream)
            api->cuStreamSynchronize(s->stream);
        for (int i = 0; s->segs && i < s->n_segs; i++)
            if (s->segs[i].exec)
                api->cuGraphExecDestroy(s->segs[i].exec);
        for (int k = 0; s->ev && k < 2 * s->n_launches; k++)
            if (s->ev[k])
                api->cuEventDestroy(s->ev[k]);
        if (s->ev_after)
            api->cuEventDestroy(s->ev_after);
        for (int i = 0; s->d_in && i < s->pg->n_inputs; i++)
            if (s->d_in[i] && s->d_in[i] != s->dummy)
                api->cuMemFree(s->d_in[i]);
        for (int i = 0; s->d_out && i < s->pg->n_outputs; i++)
            if (s->d_out[i] && s->d_out[i] != s->dummy)
                api->cuMemFree(s->d_out[i]);
        if (s->arena)
            api->cuMemFree(s->arena);
        if (s->consts)
            api->cuMemFree(s->consts);
        if (s->dummy)
            api->cuMemFree(s->dummy);
        if (s->ws)
            api->cuMemFree(s->ws);
        if (s->flags)
            api->cuMemFree(s->flags);
        if (s->stream)
            api->cuStreamDestroy(s->stream);
        if (s->mod)
            api->cuModuleUnload(s->mod);
    }
    for (int k = 0; s->launches && k < s->n_launches; k++) {
        blaslt_op_destroy(&s->launches[k].op);
        dnn_op_destroy(&s->launches[k].dnn);
        free(s->launches[k].name);
        free(s->launches[k].nodes);
        free((void *)s->launches[k].h_in);
        free(s->launches[k].h_out);
    }
    for (int t = 0; s->host_of && t < s->pg->n_tensors; t++)
        free(s->host_of[t]);
    free(s->host_of);
    free(s->h_flags);
    free(s->launches);
    free(s->segs);
    free(s->ev);
    free(s->times);
    free(s->d_in);
    free(s->d_out);
    cuda_device_close(&s->dev);
    plan_free(s->plan_owned);
    prim_graph_free(s->pg_owned);
    graph_free(s->g_owned);
    artifact_file_release(s->file); // after the graph that borrows its bytes
    free(s);
}

// The model exactly as the compiler loaded it (same input shapes, same fission options) and the
// stored plan checked against it. The same steps as session_create (session.c).
int cuda_session_create_artifact(const ArtifactContents *a, const HwInfo *hw_now,
                                 const SessionOptions *opt, CudaSession **out, Err *e) {
    *out = NULL;
    SessionOptions defaults = {0};
    if (!opt)
        opt = &defaults;
    const ArtifactHeader *h = &a->h;
    const char *path = a->path ? a->path : "<artefact>";
    if (strcmp(h->target, "cuda") != 0)
        return err_set(e, ST_INVALID,
                       "%s was built by orch %s for the '%s' target, not 'cuda'; run it with "
                       "that target or recompile with orch compile -t cuda",
                       path, h->orch_version, h->target);
    if (!hw_now && !opt->allow_foreign_device)
        return err_set(e, ST_USAGE, "%s: no description of this GPU to check the artefact against",
                       path);
    if (hw_now && strcmp(h->fingerprint, hw_now->fingerprint) != 0 && !opt->allow_foreign_device)
        return err_set(e, ST_INVALID,
                       "%s was built by orch %s for a different GPU: '%s'; this machine is '%s'; "
                       "recompile with orch compile -t cuda",
                       path, h->orch_version, h->fingerprint, hw_now->fingerprint);
    Graph *g = NULL;
    PrimGraph *pg = NULL;
    Plan *plan = NULL;
    CudaLaunchTable t = {0};
    const uint8_t *cubin = NULL;
    size_t cubin_size = 0;
    ArtifactFile *file = artifact_file_retain(a); // the graph's weights borrow its bytes
    int rc = artifact_import_model(a, path, &g, &pg, &plan, e);
    artifact_release_model(a); // imported: the model section's pages are not read again
    if (rc == ST_OK && a->so_size)
        rc = cuda_module_unpack(a->so, a->so_size, path, &cubin, &cubin_size, &t, e);
    CudaSession *s = NULL;
    if (rc == ST_OK && (rc = cuda_session_create(pg, plan, cubin, cubin_size, &t, opt, &s, e)))
        err_prefix(e, "%s: ", path);
    if (rc == ST_OK) {
        s->g_owned = g;
        s->pg_owned = pg;
        s->plan_owned = plan;
        s->file = file;
        *out = s;
        // Uploaded: the weights' pages go back to the system (read from the file again where a
        // host-side launch reads a constant).
        artifact_release_weights(a, a->weights, a->weights_size);
    } else {
        plan_free(plan);
        prim_graph_free(pg);
        graph_free(g);
        artifact_file_release(file);
    }
    cuda_launch_table_free(&t);
    return rc;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The launches between the copies: graph replay, or one by one between events when profiling.
static int run_launches(CudaSession *s, Err *e) {
    const CudaApi *api = s->api;
#ifdef _OPENMP
    if (s->threads > 0)
        omp_set_num_threads(s->threads);
#endif
    int rc = ST_OK;
    if (s->n_flags && (rc = CUDA_TRY(api, e, cuMemsetD8Async, s->flags, 0,
                                     sizeof(int) * (size_t)s->n_flags, s->stream)))
        return rc;
    if (!s->profiling) {
        for (int i = 0; i < s->n_segs && rc == ST_OK; i++) {
            const Segment *g = &s->segs[i];
            if (g->device && g->exec) {
                if ((rc = CUDA_TRY(api, e, cuGraphLaunch, g->exec, s->stream)))
                    err_prefix(e, "CUDA graph of launches %d..%d: ", g->first, g->last);
            } else if (!g->device) {
                rc = run_host(s, g->first, e);
            }
        }
        return rc;
    }
    double *host_t = s->times;
    for (int k = 0; k < s->n_launches && rc == ST_OK; k++) {
        if (s->launches[k].device) {
            // A library call spends longer on the host before its kernels are queued (cuDNN's
            // legacy API about 70 µs on an H100, which a 20 µs spin left in its time).
            void *sp[1] = {s->launches[k].geo.lib ? &s->spin_lib_cycles : &s->spin_cycles};
            if (s->spin && !s->launches[k].empty)
                rc = CUDA_TRY(api, e, cuLaunchKernel, s->spin, 1, 1, 1, 1, 1, 1, 0, s->stream, sp,
                              NULL);
            if (rc == ST_OK)
                rc = CUDA_TRY(api, e, cuEventRecord, s->ev[2 * k], s->stream);
            if (rc == ST_OK)
                rc = issue(s, k, e);
            if (rc == ST_OK)
                rc = CUDA_TRY(api, e, cuEventRecord, s->ev[2 * k + 1], s->stream);
            // Waiting here names the launch that faults (a graph replay cannot).
            if (rc == ST_OK && (rc = CUDA_TRY(api, e, cuEventSynchronize, s->ev[2 * k + 1])))
                err_prefix(e, "launch %d (%s, nodes '%s'): ", k, s->launches[k].name,
                           s->launches[k].nodes);
        } else {
            double t0 = now_seconds();
            rc = run_host(s, k, e);
            if (rc == ST_OK)
                rc = CUDA_TRY(api, e, cuStreamSynchronize, s->stream);
            host_t[k] = now_seconds() - t0;
        }
    }
    if (rc == ST_OK)
        rc = CUDA_TRY(api, e, cuStreamSynchronize, s->stream);
    for (int k = 0; k < s->n_launches && rc == ST_OK; k++) {
        if (!s->launches[k].device)
            continue;
        float ms = 0;
        rc = CUDA_TRY(api, e, cuEventElapsedTime, &ms, s->ev[2 * k], s->ev[2 * k + 1]);
        if (rc)
            err_prefix(e, "timing launch %d (%s): ", k, s->launches[k].name);
        s->times[k] = 1e-3 * ms;
    }
    if (rc == ST_OK)
        s->timed = true;
    return rc;
}

// The copies out and the final synchronisation; a kernel fault surfaces here.
static int finish(CudaSession *s, Err *e) {
    int rc;
    if ((rc = CUDA_TRY(s->api, e, cuStreamSynchronize, s->stream)))
        err_prefix(e,
                   "CUDA session: running the plan (%d launches in %d graphs; after a "
                   "kernel fault this process cannot use the GPU any more: a profiled run in "
                   "a new process, e.g. orch bench, names the faulting launch): ",
                   s->n_launches, s->n_graphs);
    return rc;
}

int cuda_session_run(CudaSession *s, const void *const *inputs, void *const *outputs, Err *e) {
    const PrimGraph *pg = s->pg;
    const CudaApi *api = s->api;
    if (cuda_device_bind(&s->dev, e))
        return e->code;
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        size_t b = tensor_nbytes(t);
        if (!b)
            continue;
        if (!inputs || !inputs[i])
            return err_set(e, ST_USAGE, "CUDA session: input '%s' has no buffer", t->name);
        if (CUDA_TRY(api, e, cuMemcpyHtoDAsync, s->d_in[i], inputs[i], b, s->stream)) {
            err_prefix(e, "CUDA session: copying input '%s' (%zu bytes) in: ", t->name, b);
            return e->code;
        }
    }
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        if (tensor_nbytes(t) && (!outputs || !outputs[i]))
            return err_set(e, ST_USAGE, "CUDA session: output '%s' has no buffer", t->name);
    }
    int rc = run_launches(s, e);
    for (int i = 0; i < pg->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        size_t b = tensor_nbytes(t);
        if (b && CUDA_TRY(api, e, cuMemcpyDtoHAsync, outputs[i], s->d_out[i], b, s->stream)) {
            err_prefix(e, "CUDA session: copying output '%s' (%zu bytes) out: ", t->name, b);
            rc = e->code;
        }
    }
    if (rc == ST_OK && s->n_flags)
        rc = CUDA_TRY(api, e, cuMemcpyDtoHAsync, s->h_flags, s->flags,
                      sizeof(int) * (size_t)s->n_flags, s->stream);
    if (rc) {
        api->cuStreamSynchronize(s->stream); // leave nothing in flight on the caller's buffers
        return rc;
    }
    if ((rc = finish(s, e)))
        return rc;
    return check_flags(s, e);
}

// Whether p is memory of this session's GPU that its kernels may read and write: device memory
// (cudaMalloc, cuMemAlloc) or managed memory, on this device.
static bool on_this_device(const CudaSession *s, CUdeviceptr p) {
    int type = 0, ordinal = -1;
    if (s->api->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != 0)
        return false;
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
        return false;
    return s->api->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != 0 ||
           ordinal == s->dev.ordinal;
}

int cuda_session_run_device(CudaSession *s, const CUdeviceptr *inputs, const CUdeviceptr *outputs,
                            CUstream after, Err *e) {
    const PrimGraph *pg = s->pg;
    const CudaApi *api = s->api;
    if (cuda_device_bind(&s->dev, e))
        return e->code;
    for (int i = 0; i < pg->n_inputs + pg->n_outputs; i++) {
        bool in = i < pg->n_inputs;
        const Tensor *t = pg->tensors[in ? pg->inputs[i] : pg->outputs[i - pg->n_inputs]];
        if (!tensor_nbytes(t))
            continue;
        CUdeviceptr p = in ? (inputs ? inputs[i] : 0) : (outputs ? outputs[i - pg->n_inputs] : 0);
        if (!p)
            return err_set(e, ST_USAGE, "CUDA session: %s '%s' has no device buffer",
                           in ? "input" : "output", t->name);
        if (!on_this_device(s, p))
            return err_set(e, ST_USAGE,
                           "CUDA session: %s '%s' (0x%llx) is not device memory of GPU %d, "
                           "where the session runs",
                           in ? "input" : "output", t->name, (unsigned long long)p,
                           s->dev.ordinal);
    }
    // After the caller's queued work: its event, waited for on the session's stream.
    if (!s->ev_after && CUDA_TRY(api, e, cuEventCreate, &s->ev_after, CU_EVENT_DISABLE_TIMING))
        return e->code;
    if (CUDA_TRY(api, e, cuEventRecord, s->ev_after, after) ||
        CUDA_TRY(api, e, cuStreamWaitEvent, s->stream, s->ev_after, 0)) {
        err_prefix(e, "CUDA session: ordering the run after the caller's stream: ");
        return e->code;
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        size_t b = tensor_nbytes(pg->tensors[pg->inputs[i]]);
        if (b && CUDA_TRY(api, e, cuMemcpyDtoDAsync, s->d_in[i], inputs[i], b, s->stream))
            return e->code;
    }
    int rc = run_launches(s, e);
    for (int i = 0; i < pg->n_outputs && rc == ST_OK; i++) {
        size_t b = tensor_nbytes(pg->tensors[pg->outputs[i]]);
        if (b && CUDA_TRY(api, e, cuMemcpyDtoDAsync, outputs[i], s->d_out[i], b, s->stream))
            rc = e->code;
    }
    if (rc == ST_OK && s->n_flags)
        rc = CUDA_TRY(api, e, cuMemcpyDtoHAsync, s->h_flags, s->flags,
                      sizeof(int) * (size_t)s->n_flags, s->stream);
    if (rc) {
        api->cuStreamSynchronize(s->stream);
        return rc;
    }
    if ((rc = finish(s, e)))
        return rc;
    return check_flags(s, e);
}

void cuda_session_set_profiling(CudaSession *s, int on) {
    if (s)
        s->profiling = on != 0;
}

const double *cuda_session_kernel_times(const CudaSession *s) {
    return s && s->timed ? s->times : NULL;
}

int cuda_session_num_launches(const CudaSession *s) {
    return s ? s->n_launches : 0;
}

int cuda_session_num_kernels(const CudaSession *s) {
    return s ? s->plan->n_kernels : 0;
}

int cuda_session_num_graphs(const CudaSession *s) {
    return s ? s->n_graphs : 0;
}

const char *cuda_session_launch_name(const CudaSession *s, int i) {
    return s && i >= 0 && i < s->n_launches ? s->launches[i].name : NULL;
}

const char *cuda_session_launch_nodes(const CudaSession *s, int i) {
    return s && i >= 0 && i < s->n_launches ? s->launches[i].nodes : NULL;
}

const PrimGraph *cuda_session_graph(const CudaSession *s) {
    return s ? s->pg : NULL;
}

const Plan *cuda_session_plan(const CudaSession *s) {
    return s ? s->plan : NULL;
}

const CudaDevice *cuda_session_device(const CudaSession *s) {
    return s ? &s->dev : NULL;
}

// Back-to-back replays between events: the host queues every run before waiting, so a run's time
// is its span on the GPU timeline (launch gaps inside it included, the host's submission latency
// hidden once the queue is full): how PyTorch's CUDA-event timings are taken.
int cuda_session_time_replays(CudaSession *s, int runs, double *seconds, Err *e) {
    const CudaApi *api = s->api;
    if (cuda_device_bind(&s->dev, e))
        return e->code;
    if (s->profiling)
        return err_set(e, ST_USAGE, "CUDA session: replay timing while profiling is on");
    CUevent *ev = calloc((size_t)runs + 1, sizeof(CUevent));
    if (!ev)
        return err_set(e, ST_RUNTIME, "CUDA session: %d timing events", runs + 1);
    int rc = ST_OK, made = 0;
    for (; made <= runs && rc == ST_OK; made++)
        rc = CUDA_TRY(api, e, cuEventCreate, &ev[made], CU_EVENT_DEFAULT);
    if (rc)
        made--;
    if (rc == ST_OK)
        rc = CUDA_TRY(api, e, cuEventRecord, ev[0], s->stream);
    for (int r = 0; r < runs && rc == ST_OK; r++) {
        rc = run_launches(s, e);
        if (rc == ST_OK)
            rc = CUDA_TRY(api, e, cuEventRecord, ev[r + 1], s->stream);
    }
    if (rc == ST_OK)
        rc = finish(s, e);
    for (int r = 0; r < runs && rc == ST_OK; r++) {
        float ms = 0;
        rc = CUDA_TRY(api, e, cuEventElapsedTime, &ms, ev[r], ev[r + 1]);
        seconds[r] = 1e-3 * ms;
    }
    if (rc)
        api->cuStreamSynchronize(s->stream);
    for (int k = 0; k < made; k++)
        api->cuEventDestroy(ev[k]);
    free(ev);
    return rc;
}

int cuda_session_threads(const CudaSession *s) {
    return s->threads;
}

// The slots of target_cuda.session: the front end's opaque TargetSession is a CudaSession here.
#define CS(x) ((CudaSession *)(x))
#define CCS(x) ((const CudaSession *)(x))
static int ops_create(const ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                      TargetSession **out, Err *e) {
    return cuda_session_create_artifact(a, hw_now, opt, (CudaSession **)out, e);
}
static void ops_free(TargetSession *s) {
    cuda_session_free(CS(s));
}
static int ops_run(TargetSession *s, const void *const *in, void *const *out, Err *e) {
    return cuda_session_run(CS(s), in, out, e);
}
static int ops_run_device(TargetSession *s, const void *const *in, void *const *out, void *stream,
                          Err *e) {
    const PrimGraph *pg = cuda_session_graph(CCS(s));
    CUdeviceptr *p = xcalloc((size_t)(pg->n_inputs + pg->n_outputs) + 1, sizeof(CUdeviceptr));
    for (int i = 0; i < pg->n_inputs; i++)
        p[i] = in ? (CUdeviceptr)(uintptr_t)in[i] : 0;
    for (int i = 0; i < pg->n_outputs; i++)
        p[pg->n_inputs + i] = out ? (CUdeviceptr)(uintptr_t)out[i] : 0;
    int rc = cuda_session_run_device(CS(s), p, p + pg->n_inputs, (CUstream)stream, e);
    free(p);
    return rc;
}
static int ops_time(TargetSession *s, int runs, double *seconds, Err *e) {
    return cuda_session_time_replays(CS(s), runs, seconds, e);
}
static void ops_profiling(TargetSession *s, int on) {
    cuda_session_set_profiling(CS(s), on);
}
static const double *ops_times(const TargetSession *s) {
    return cuda_session_kernel_times(CCS(s));
}
static int ops_launches(const TargetSession *s) {
    return cuda_session_num_launches(CCS(s));
}
static int ops_kernels(const TargetSession *s) {
    return cuda_session_num_kernels(CCS(s));
}
static const char *ops_name(const TargetSession *s, int i) {
    return cuda_session_launch_name(CCS(s), i);
}
static const char *ops_nodes(const TargetSession *s, int i) {
    return cuda_session_launch_nodes(CCS(s), i);
}
static const PrimGraph *ops_graph(const TargetSession *s) {
    return cuda_session_graph(CCS(s));
}
static const Plan *ops_plan(const TargetSession *s) {
    return cuda_session_plan(CCS(s));
}
static int ops_threads(const TargetSession *s) {
    return cuda_session_threads(CCS(s));
}

const TargetSessionOps cuda_session_ops = {
    .create = ops_create,
    .free = ops_free,
    .run = ops_run,
    .run_device = ops_run_device,
    .concurrent_runs = false, // one stream, one set of CUDA graphs: runs take turns
    .time_device = ops_time,
    .set_profiling = ops_profiling,
    .kernel_times = ops_times,
    .num_launches = ops_launches,
    .num_kernels = ops_kernels,
    .launch_name = ops_name,
    .launch_nodes = ops_nodes,
    .graph = ops_graph,
    .plan = ops_plan,
    .threads = ops_threads,
};
