// The CPU target's sessions (session_cpu.h): the host executor of a plan. Creation does all the
// work that can fail or allocate:
// the shared object goes into an anonymous memory file (memfd_create, else a private temporary
// file unlinked once loaded) so nothing is left on disk; every launch gets its input and output
// pointer arrays in one slot table, with the slots that hold a caller's buffer listed as patches.
// A run then writes the caller's pointers into those slots and calls the launches in order.
// Constants the kernels read as stored are read in place from an artefact's weights section
// (the file's mapping, kept while the session lives); the others (reordered for a kernel, folded,
// small) sit in one blob, the weights pages they came from are given back and the import's own
// copies freed: each weight is resident once.
#define _GNU_SOURCE
#include "session_cpu.h"
#include "contention.h"

#include "../../interp/prim_interp.h"
#include "../../plan/artifact_model.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

// A slot that receives a caller's buffer at each run.
typedef struct Patch {
    int slot;
    bool output; // outputs[index], else inputs[index]
    int index;
} Patch;

typedef struct Launch {
    const PlanLaunch *pl;
    CKernelFn fn;   // PLAN_GENERATED
    COpKernelFn op; // PLAN_GENERATED with the operator ABI (target.h), instead of fn
    const Prim *p;  // the sink (NULL for PLAN_COPY)
    int in, out;    // first slot of the inputs / outputs
    bool empty;     // every output has zero elements: nothing to compute (as prim_interp_run)
    size_t bytes;   // PLAN_COPY
    char *name, *nodes;
} Launch;

// One run's mutable state: the slots (a launch's operand pointers: the caller's buffers are
// patched in, the arena's are fixed), the arena, and the staging of unaligned caller buffers. The
// session's own (the fields of CpuSession) serves the first run; runs that overlap it take a
// workspace from the pool, made on first need as a copy with its own arena, so threads sharing a
// session run in parallel, sharing the kernels and the constants.
typedef struct Work {
    void **slots;
    void *arena;
    const void **io_in;
    void **io_out;
    void **stage_in, **stage_out;
    bool busy;
} Work;

struct CpuSession {
    const PrimGraph *pg;
    const Plan *plan;
    // Owned when the session came from an artefact.
    Graph *g_owned;
    PrimGraph *pg_owned;
    Plan *plan_owned;
    void *dl;
    int memfd;
    char *path; // for messages
    // Run-time state, all allocated at creation.
    Launch *launches;
    int n_launches;
    void **slots;
    Patch *patches;
    int n_patches;
    void *arena, *consts;
    void **const_at;  // per plan tensor: a constant's bytes (in consts or the artefact's weights)
    int64_t in_place_bytes, blob_bytes; // constants read from the weights / held in consts
    ArtifactFile *file; // the artefact's bytes, which the graph's and the launches' constants borrow
    void **reordered; // private reordered copies of constants (prepack_constants)
    int n_reordered;
    const void **io_in; // per graph input: the buffer the launches read (caller's or staged)
    void **io_out;      // per graph output
    void **stage_in, **stage_out; // aligned copies for unaligned caller buffers
    double *times;
    bool profiling, timed;
    int threads;
    // Threads under contention (contention.h): the last probe of the cores' busy time and the
    // thread count it gave, re-probed at most every CONTENTION_PROBE_S by one run at a time.
    bool fixed_threads;
    pthread_mutex_t probe_mu;
    CpuBusySample probe;
    int threads_now;
    long runs_fewer; // runs that used fewer threads than asked
    // Concurrent runs (Work above): the session's own workspace and the pool's, guarded by mu.
    int n_slots;
    pthread_mutex_t mu;
    pthread_cond_t freed;
    bool own_busy;
    Work **pool;
    int n_pool;
};

static _Alignas(PLAN_ALIGN) uint8_t empty_buffer[PLAN_ALIGN]; // for zero-byte tensors

// A staging buffer for an unaligned caller buffer: a run copies the input in whole or the
// launches write the output whole before it is read, so it is not zeroed (which would make a
// large model input's pages resident in every session, used or not).
static void *stage_buffer(int64_t bytes) {
    size_t n = (size_t)(bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    return aligned_alloc(PLAN_ALIGN, n ? n : PLAN_ALIGN);
}

// A zeroed buffer, whole PLAN_ALIGN blocks.
static void *aligned_buffer(int64_t bytes) {
    void *p = stage_buffer(bytes);
    if (p && bytes > 0)
        memset(p, 0, (size_t)(bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
    return p;
}

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

// The address of tensor t, or a patch for a caller's buffer.
static void *place_of(CpuSession *s, int t, int slot) {
    if (t < 0)
        return NULL;
    const PlanTensor *T = &s->plan->tensors[t];
    if (T->bytes == 0 && T->place != PLACE_INPUT && T->place != PLACE_OUTPUT)
        return empty_buffer;
    switch (T->place) {
    case PLACE_INPUT:
    case PLACE_OUTPUT:
        s->patches[s->n_patches++] = (Patch){slot, T->place == PLACE_OUTPUT, T->index};
        return NULL;
    case PLACE_CONST: return s->const_at[t];
    case PLACE_ARENA: return (char *)s->arena + T->offset;
    default: ORCH_ASSERT(!"a launch operand with no place"); return NULL;
    }
}

int cpu_prepack_readers(const Plan *P, const CPrepackFn *pf, const char *what, int *own_l,
                        int *own_j, bool *shared, Err *e) {
    for (int t = 0; t < P->n_tensors; t++)
        own_l[t] = -1;
    int rc = ST_OK;
    for (int i = 0; i < P->n_launches && rc == ST_OK; i++) {
        const PlanLaunch *L = &P->launches[i];
        for (int j = 0; j < L->n_in; j++) {
            int t = L->in[j];
            if (t < 0)
                continue;
            bool reorders = pf[i] && pf[i](j, NULL, NULL) == 1;
            if (reorders && P->tensors[t].place != PLACE_CONST) {
                rc = err_set(e, ST_INVALID,
                             "%s: kernel '%s' (launch %d) reorders its input %d, which is not a "
                             "constant: the artefact is damaged or was built by another orch "
                             "build; recompile with orch compile",
                             what, L->symbol, i, j);
                break;
            }
            if (!reorders) {
                shared[t] = true;
                continue;
            }
            // A copy larger than the constant (a transform) cannot replace it in the blob.
            if (ckernel_prepack_bytes(pf[i], j, P->tensors[t].bytes) != P->tensors[t].bytes)
                shared[t] = true;
            if (own_l[t] < 0)
                own_l[t] = i, own_j[t] = j;
            else if (own_j[t] != j || strcmp(P->launches[own_l[t]].symbol, L->symbol) != 0)
                shared[t] = true;
        }
    }
    return rc;
}

#define COPY_CHUNK ((size_t)1 << 20)

typedef struct Range {
    const uint8_t *p;
    size_t n;
} Range;

static int range_cmp(const void *x, const void *y) {
    const uint8_t *a = ((const Range *)x)->p, *b = ((const Range *)y)->p;
    return (a > b) - (a < b);
}

// Where each constant lives. Kernels that read a constant in their own order (target.h:
// NAME_prepack, a weight reordered into the GEMM's panels) get it reordered once, here: into the
// blob when every launch reading it is a launch of the same kernel reading it at the same position
// (all want the same order; the blob costs no extra memory); otherwise each such kernel gets a
// private reordered copy (prepack_shared) and the other readers the original. An original that
// lies in the artefact's weights (a: the artefact, NULL for a plan made in memory) and is read as
// stored is read there, in place; every other constant is copied (or reordered) into the blob
// from its source, and a source in the mapped weights is given back page by page as it is copied,
// so creation never holds a weight twice. The weights no launch reads in place are given back
// after the private copies (release_unread_weights).
static int place_constants(CpuSession *s, const ArtifactContents *a, const CPrepackFn *pf,
                           bool *shared, int *own_l, int *own_j, Err *e) {
    const Plan *P = s->plan;
    const PrimGraph *pg = s->pg;
    const char *what = s->path ? s->path : "session";
    int rc = cpu_prepack_readers(P, pf, what, own_l, own_j, shared, e);
    if (rc)
        return rc;
    int64_t *off = xmalloc(sizeof(int64_t) * ((size_t)P->n_tensors + 1));
    int64_t blob = 0;
    for (int t = 0; t < P->n_tensors; t++) {
        const PlanTensor *T = &P->tensors[t];
        off[t] = -1;
        if (T->place != PLACE_CONST || T->bytes == 0)
            continue;
        const uint8_t *src = pg->tensors[t]->data;
        bool reordered_here = own_l[t] >= 0 && !shared[t];
        if (!reordered_here && src && artifact_in_weights(a, src) &&
            artifact_in_weights(a, src + T->bytes - 1) && (uintptr_t)src % PLAN_ALIGN == 0) {
            s->const_at[t] = (void *)src; // read only: kernels take constants as const
            s->in_place_bytes += T->bytes;
            continue;
        }
        off[t] = blob;
        blob += (T->bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
    }
    s->blob_bytes = blob;
    // Not zeroed whole (that would make every page resident before the weights' pages go back):
    // each constant's bytes and its padding are written below.
    s->consts = aligned_alloc(PLAN_ALIGN, blob ? (size_t)blob : PLAN_ALIGN);
    if (!s->consts) {
        free(off);
        return err_set(e, ST_RUNTIME, "%s: out of memory for the constants (%lld bytes)", what,
                       (long long)blob);
    }
    for (int t = 0; t < P->n_tensors; t++) {
        if (off[t] < 0)
            continue;
        const PlanTensor *T = &P->tensors[t];
        const void *src = pg->tensors[t]->data;
        char *dst = (char *)s->consts + off[t];
        s->const_at[t] = dst;
        int64_t padded = (T->bytes + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
        memset(dst + T->bytes, 0, (size_t)(padded - T->bytes));
        if (!src) { // a constant without data is zeros (plan_pack_constants)
            memset(dst, 0, (size_t)T->bytes);
            continue;
        }
        if (own_l[t] >= 0 && !shared[t]) { // the one order every reader wants, from the source
            pf[own_l[t]](own_j[t], src, dst);
            own_l[t] = -1;
            artifact_release_weights(a, src, (size_t)T->bytes);
        } else {
            // Copied a chunk at a time, each given back once copied: a large weight is not held
            // twice either.
            for (size_t at = 0, n = (size_t)T->bytes; at < n; at += COPY_CHUNK) {
                size_t k = ORCH_MIN(COPY_CHUNK, n - at);
                memcpy(dst + at, (const char *)src + at, k);
                artifact_release_weights(a, (const char *)src + at, k);
            }
        }
        // A constant the session's own primitive graph made (a weight sliced, folded or
        // re-laid out at import) is read from the blob from now on: freed, not held twice.
        if (s->pg_owned && s->pg_owned->owns_data[t]) {
            free(s->pg_owned->tensors[t]->data);
            s->pg_owned->tensors[t]->data = NULL;
            s->pg_owned->owns_data[t] = false;
        }
    }
    free(off);
    return ST_OK;
}

// Gives back the weights no launch reads as stored (a: the artefact, NULL for a plan made in
// memory): constants folded, retyped, read by no launch, reordered into the blob or into private
// copies (a transform such as Winograd's reads the original once, at creation). The pages of
// the constants a launch reads in place stay.
static void release_unread_weights(CpuSession *s, const ArtifactContents *a) {
    const Plan *P = s->plan;
    if (!a || !a->mapped || !a->weights)
        return;
    int n_in = 0;
    for (int i = 0; i < P->n_launches; i++)
        n_in += P->launches[i].n_in;
    Range *r = xmalloc(sizeof(Range) * ((size_t)n_in + 1));
    int n = 0;
    for (int i = 0; i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        for (int j = 0; j < L->n_in; j++) {
            const uint8_t *p = s->slots[s->launches[i].in + j];
            if (L->in[j] >= 0 && P->tensors[L->in[j]].bytes && artifact_in_weights(a, p))
                r[n++] = (Range){p, (size_t)P->tensors[L->in[j]].bytes};
        }
    }
    qsort(r, (size_t)n, sizeof *r, range_cmp);
    const uint8_t *at = a->weights, *end = a->weights + a->weights_size;
    for (int i = 0; i <= n; i++) {
        const uint8_t *next = i < n ? r[i].p : end;
        if (next > at)
            artifact_release_weights(a, at, (size_t)(next - at));
        if (i < n && r[i].p + r[i].n > at)
            at = r[i].p + r[i].n;
    }
    free(r);
}

// The private reordered copies of constants whose readers want different orders (place_constants).
static int prepack_shared(CpuSession *s, const CPrepackFn *pf, const bool *shared, int *own_l,
                          Err *e) {
    const Plan *P = s->plan;
    const char *what = s->path ? s->path : "session";
    for (int i = 0; i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        for (int j = 0; j < L->n_in; j++) {
            int t = L->in[j];
            if (t < 0 || own_l[t] < 0 || !shared[t] || !(pf[i] && pf[i](j, NULL, NULL) == 1))
                continue;
            const PlanTensor *T = &P->tensors[t];
            int64_t nb = ckernel_prepack_bytes(pf[i], j, T->bytes);
            void *buf = aligned_buffer(nb);
            if (!buf)
                return err_set(e, ST_RUNTIME,
                               "%s: out of memory reordering a weight (%lld bytes)", what,
                               (long long)nb);
            pf[i](j, s->const_at[t], buf);
            s->reordered = xrealloc(s->reordered, sizeof(void *) * (size_t)(s->n_reordered + 1));
            s->reordered[s->n_reordered++] = buf;
            s->slots[s->launches[i].in + j] = buf;
        }
    }
    return ST_OK;
}

static int prepare(CpuSession *s, const ArtifactContents *a, CpuResolveFn resolve, void *ctx,
                   Err *e) {
    const PrimGraph *pg = s->pg;
    const Plan *P = s->plan;
    const char *what = s->path ? s->path : "session";
    if (P->n_tensors != pg->n_tensors)
        return err_set(e, ST_INVALID, "%s: the plan was made for another primitive graph", what);
    s->n_launches = P->n_launches;
    s->launches = xcalloc((size_t)P->n_launches + 1, sizeof(Launch));
    s->times = xcalloc((size_t)P->n_launches + 1, sizeof(double));
    int n_slots = 0;
    for (int i = 0; i < P->n_launches; i++)
        n_slots += P->launches[i].n_in + ORCH_MAX(P->launches[i].n_out, 1);
    s->slots = xcalloc((size_t)n_slots + 1, sizeof(void *));
    s->n_slots = n_slots;
    s->patches = xcalloc((size_t)n_slots + 1, sizeof(Patch));
    s->const_at = xcalloc((size_t)P->n_tensors + 1, sizeof(void *));
    s->arena = aligned_buffer(P->arena_bytes);
    if (!s->arena)
        return err_set(e, ST_RUNTIME, "%s: out of memory for the arena (%lld bytes)", what,
                       (long long)P->arena_bytes);
    CPrepackFn *pf = xcalloc((size_t)P->n_launches + 1, sizeof(CPrepackFn));
    for (int i = 0; i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        Launch *l = &s->launches[i];
        l->pl = L;
        l->name = launch_name(pg, L);
        l->nodes = join_nodes(L);
        if (L->kind == PLAN_GENERATED) {
            void *f = resolve ? resolve(ctx, L->symbol) : NULL;
            if (!f) {
                free(pf);
                return err_set(e, ST_INVALID,
                               "%s: the shared object has no kernel '%s' (launch %d, nodes '%s'): "
                               "the artefact is damaged or was built by another orch build; "
                               "recompile with orch compile",
                               what, L->symbol, i, l->nodes);
            }
            // The kernel ABI: POSIX guarantees object and function pointers convert.
            if (ckernel_op_abi(pg->prims[L->sink]))
                memcpy(&l->op, &f, sizeof f);
            else
                memcpy(&l->fn, &f, sizeof f);
            size_t pn = strlen(L->symbol) + 16;
            char *pname = xmalloc(pn);
            ckernel_prepack_name(L->symbol, pname, pn);
            void *pfp = resolve(ctx, pname);
            free(pname);
            if (pfp)
                memcpy(&pf[i], &pfp, sizeof pfp);
        }
        l->p = L->sink >= 0 ? pg->prims[L->sink] : NULL;
    }
    // Per tensor: the first reordering reader (launch, position), whether readers disagree or
    // one reads it row-major.
    int *own_l = xmalloc(sizeof(int) * ((size_t)P->n_tensors + 1));
    int *own_j = xmalloc(sizeof(int) * ((size_t)P->n_tensors + 1));
    bool *shared = xcalloc((size_t)P->n_tensors + 1, sizeof(bool));
    int rc = place_constants(s, a, pf, shared, own_l, own_j, e);
    int slot = 0;
    for (int i = 0; rc == ST_OK && i < P->n_launches; i++) {
        const PlanLaunch *L = &P->launches[i];
        Launch *l = &s->launches[i];
        l->in = slot;
        for (int j = 0; j < L->n_in; j++, slot++)
            s->slots[slot] = place_of(s, L->in[j], slot);
        l->out = slot;
        if (L->kind == PLAN_COPY) {
            s->patches[s->n_patches++] = (Patch){slot, true, L->copy_to};
            l->bytes = (size_t)P->tensors[L->in[0]].bytes;
            slot++;
        } else {
            for (int j = 0; j < L->n_out; j++, slot++)
                s->slots[slot] = place_of(s, L->out[j], slot);
        }
        l->empty = L->kind != PLAN_COPY;
        for (int j = 0; j < L->n_out; j++)
            l->empty = l->empty && (L->out[j] < 0 || tensor_numel(pg->tensors[L->out[j]]) == 0);
    }
    if (rc == ST_OK)
        rc = prepack_shared(s, pf, shared, own_l, e);
    if (rc == ST_OK)
        release_unread_weights(s, a);
    free(own_l);
    free(own_j);
    free(shared);
    free(pf);
    if (rc)
        return rc;
    int ni = pg->n_inputs, no = pg->n_outputs;
    s->io_in = xcalloc((size_t)ni + 1, sizeof(void *));
    s->io_out = xcalloc((size_t)no + 1, sizeof(void *));
    s->stage_in = xcalloc((size_t)ni + 1, sizeof(void *));
    s->stage_out = xcalloc((size_t)no + 1, sizeof(void *));
    for (int i = 0; i < ni + no; i++) {
        int t = i < ni ? pg->inputs[i] : pg->outputs[i - ni];
        void *b = stage_buffer((int64_t)tensor_nbytes(pg->tensors[t]));
        if (!b)
            return err_set(e, ST_RUNTIME, "%s: out of memory for the staging buffers", what);
        if (i < ni)
            s->stage_in[i] = b;
        else
            s->stage_out[i - ni] = b;
    }
    return ST_OK;
}

// The locks and the thread policy both constructors share; threads: the session's count (0:
// OpenMP's default, made explicit so that contention can lower it).
static void init_sync(CpuSession *s, int threads, const SessionOptions *opt) {
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->freed, NULL);
    pthread_mutex_init(&s->probe_mu, NULL);
#ifdef _OPENMP
    if (threads <= 0)
        threads = omp_get_max_threads();
#endif
    s->threads = threads;
    s->threads_now = threads;
    s->fixed_threads = opt && opt->fixed_threads;
    s->probe = cpu_busy_sample();
}

int cpu_session_create_from_plan(const PrimGraph *pg, const Plan *plan, CpuResolveFn resolve,
                                 void *ctx, const SessionOptions *opt, CpuSession **out, Err *e) {
    *out = NULL;
    CpuSession *s = xcalloc(1, sizeof *s);
    s->pg = pg;
    s->plan = plan;
    s->memfd = -1;
    init_sync(s, opt ? opt->threads : 0, opt);
    int rc = prepare(s, NULL, resolve, ctx, e);
    if (rc) {
        cpu_session_free(s);
        return rc;
    }
    *out = s;
    return ST_OK;
}

// Loads the shared object from memory: an anonymous file kept open while it is loaded (so its
// /proc/self/fd name cannot be reused by another session's object while this one is loaded:
// dlopen would return the loaded one for an equal name), else a private file unlinked at once.
int cpu_load_object(const uint8_t *so, size_t n, const char *path, void **dl, int *memfd, Err *e) {
    *dl = NULL;
    *memfd = -1;
    char name[4096];
    int fd = memfd_create("orch-kernels", MFD_CLOEXEC);
    bool mem = fd >= 0;
    if (mem) {
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    } else {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/orch-kernels-XXXXXX.so", dir && *dir ? dir : "/tmp");
        fd = mkstemps(name, 3);
        if (fd < 0)
            return err_set(e, ST_RUNTIME, "%s: cannot create a file for the kernels (%s): %s", path,
                           name, strerror(errno));
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, so + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int rc = err_set(e, ST_RUNTIME, "%s: cannot write the kernels' shared object: %s", path,
                             strerror(errno));
            if (!mem)
                unlink(name);
            close(fd);
            return rc;
        }
        done += (size_t)w;
    }
    *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    const char *why = *dl ? NULL : dlerror();
    if (!mem || !*dl) {
        if (!mem)
            unlink(name);
        close(fd);
    } else {
        *memfd = fd;
    }
    if (!*dl)
        return err_set(e, ST_INVALID, "%s: cannot load the kernels' shared object: %s", path,
                       why ? why : "unknown error");
    return ST_OK;
}

static int load_so(CpuSession *s, const uint8_t *so, size_t n, Err *e) {
    return cpu_load_object(so, n, s->path, &s->dl, &s->memfd, e);
}

static void *resolve_dl(void *ctx, const char *symbol) {
    return dlsym(ctx, symbol);
}

int cpu_session_create(const ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                       CpuSession **out, Err *e) {
    (void)hw_now; // the session front end checked the artefact against this machine
    *out = NULL;
    SessionOptions defaults = {0};
    if (!opt)
        opt = &defaults;
    const ArtifactHeader *h = &a->h;
    const char *path = a->path ? a->path : "<artefact>";
    CpuSession *s = xcalloc(1, sizeof *s);
    s->memfd = -1;
    s->path = xstrdup(path);
    init_sync(s, opt->threads > 0 ? opt->threads : h->threads, opt);
    // The graph's weights from the weights section point into the file's bytes: kept as long as
    // the session (which reads some of them in place).
    s->file = artifact_file_retain(a);
    int rc = artifact_import_model(a, path, &s->g_owned, &s->pg_owned, &s->plan_owned, e);
    artifact_release_model(a); // imported: the model section's pages are not read again
    // The import's passes read some weights (folded, sliced); given back, so that creation holds
    // only what it copies and what the launches read in place. On this kernel a fault maps a
    // whole large folio of the page cache (up to 2 MB) around the byte read, so a pass reading a
    // small bias maps its neighbours too.
    artifact_release_weights(a, a->weights, a->weights_size);
    bool generated = false;
    for (int i = 0; rc == ST_OK && i < s->plan_owned->n_launches; i++)
        generated = generated || s->plan_owned->launches[i].kind == PLAN_GENERATED;
    if (rc == ST_OK && generated && a->so_size == 0)
        rc = err_set(e, ST_INVALID,
                     "%s: the plan has generated kernels but the artefact holds no "
                     "shared object",
                     path);
    if (rc == ST_OK && generated)
        rc = load_so(s, a->so, a->so_size, e);
    if (rc == ST_OK) {
        s->pg = s->pg_owned;
        s->plan = s->plan_owned;
        rc = prepare(s, a, resolve_dl, s->dl, e);
    }
    if (rc) {
        cpu_session_free(s);
        return rc;
    }
    *out = s;
    return ST_OK;
}

static void work_free(const CpuSession *s, Work *w) {
    if (!w)
        return;
    for (int i = 0; w->stage_in && i < s->pg->n_inputs; i++)
        free(w->stage_in[i]);
    for (int i = 0; w->stage_out && i < s->pg->n_outputs; i++)
        free(w->stage_out[i]);
    free(w->stage_in);
    free(w->stage_out);
    free((void *)w->io_in);
    free(w->io_out);
    free(w->arena);
    free(w->slots);
    free(w);
}

// A workspace for a run beside the session's own: its slots as the session's, those into the
// arena moved to a new arena; NULL when memory runs out.
static Work *work_new(const CpuSession *s) {
    const PrimGraph *pg = s->pg;
    Work *w = xcalloc(1, sizeof *w);
    int64_t ab = s->plan->arena_bytes;
    w->arena = aligned_buffer(ab);
    w->slots = xmalloc(sizeof(void *) * ((size_t)s->n_slots + 1));
    w->io_in = xcalloc((size_t)pg->n_inputs + 1, sizeof(void *));
    w->io_out = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
    w->stage_in = xcalloc((size_t)pg->n_inputs + 1, sizeof(void *));
    w->stage_out = xcalloc((size_t)pg->n_outputs + 1, sizeof(void *));
    bool ok = w->arena != NULL;
    for (int i = 0; ok && i < pg->n_inputs + pg->n_outputs; i++) {
        int t = i < pg->n_inputs ? pg->inputs[i] : pg->outputs[i - pg->n_inputs];
        void *b = stage_buffer((int64_t)tensor_nbytes(pg->tensors[t]));
        ok = b != NULL;
        if (i < pg->n_inputs)
            w->stage_in[i] = b;
        else
            w->stage_out[i - pg->n_inputs] = b;
    }
    if (!ok) {
        work_free(s, w);
        return NULL;
    }
    const char *a0 = s->arena;
    for (int i = 0; i < s->n_slots; i++) {
        const char *p = s->slots[i];
        w->slots[i] = p && p >= a0 && p < a0 + ab ? (char *)w->arena + (p - a0) : s->slots[i];
    }
    return w;
}

// The workspace a run uses: the session's own when free, else a free one of the pool (made when
// none is); a profiled run waits for the session's own (the per-launch times are the session's).
// NULL (the session's own) or a pool entry, marked busy; *err on out of memory.
static Work *work_take(CpuSession *s, bool *own, bool *nomem) {
    *nomem = false;
    pthread_mutex_lock(&s->mu);
    while (s->own_busy && s->profiling)
        pthread_cond_wait(&s->freed, &s->mu);
    Work *w = NULL;
    if (!s->own_busy) {
        s->own_busy = true;
        *own = true;
    } else {
        *own = false;
        for (int i = 0; i < s->n_pool && !w; i++)
            if (!s->pool[i]->busy)
                w = s->pool[i];
        if (!w && (w = work_new(s)) != NULL) {
            s->pool = xrealloc(s->pool, sizeof(Work *) * (size_t)(s->n_pool + 1));
            s->pool[s->n_pool++] = w;
        }
        if (w)
            w->busy = true;
        else
            *nomem = true;
    }
    pthread_mutex_unlock(&s->mu);
    return w;
}

static void work_give(CpuSession *s, Work *w, bool own) {
    pthread_mutex_lock(&s->mu);
    if (own)
        s->own_busy = false;
    else
        w->busy = false;
    pthread_cond_broadcast(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

void cpu_session_free(CpuSession *s) {
    if (!s)
        return;
    for (int i = 0; s->launches && i < s->n_launches; i++) {
        free(s->launches[i].name);
        free(s->launches[i].nodes);
    }
    for (int w = 0; w < s->n_pool; w++)
        work_free(s, s->pool[w]);
    free(s->pool);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->probe_mu);
    free(s->launches);
    free(s->slots);
    free(s->patches);
    free(s->arena);
    free(s->consts);
    free(s->const_at);
    for (int i = 0; i < s->n_reordered; i++)
        free(s->reordered[i]);
    free(s->reordered);
    for (int i = 0; s->pg && s->stage_in && i < s->pg->n_inputs; i++)
        free(s->stage_in[i]);
    for (int i = 0; s->pg && s->stage_out && i < s->pg->n_outputs; i++)
        free(s->stage_out[i]);
    free(s->stage_in);
    free(s->stage_out);
    free((void *)s->io_in);
    free(s->io_out);
    free(s->times);
    if (s->dl)
        dlclose(s->dl);
    if (s->memfd >= 0)
        close(s->memfd);
    plan_free(s->plan_owned);
    prim_graph_free(s->pg_owned);
    graph_free(s->g_owned);
    artifact_file_release(s->file); // after everything that borrows its bytes
    free(s->path);
    free(s);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool aligned(const void *p) {
    return ((uintptr_t)p % PLAN_ALIGN) == 0;
}

// An operator kernel found an operand invalid (status st): the reference op on the same operands
// (in[] is in the kernel's canonical order; the op takes operand order) gives its own message.
// Only this error path allocates.
static int op_kernel_error(const PrimGraph *pg, const Launch *l, const void *const *in,
                           void *const *out, int st, Err *e) {
    if (st == CKERNEL_ERR_NOMEM)
        return err_set(e, ST_RUNTIME, "out of memory for the kernel's scratch buffers");
    const Prim *p = l->p;
    const void **x = xcalloc((size_t)p->n_in + 1, sizeof(void *));
    for (int j = 0; j < p->n_in; j++)
        for (int m = 0; m < l->pl->n_in && p->in[j] >= 0 && !x[j]; m++)
            if (l->pl->in[m] == p->in[j])
                x[j] = in[m];
    int rc = prim_eval_opaque(pg, p, x, out, e);
    free(x);
    if (rc == ST_OK)
        rc = err_set(e, ST_RUNTIME,
                     "the generated kernel returned status %d, but the reference op accepts "
                     "the same operands (a bug in orch)",
                     st);
    return rc;
}

// How often a run looks at how busy other processes keep the cores: often enough to follow a
// competing job within a few runs, rarely enough that reading /proc/stat (about 20 us) is lost
// in the runs between.
#define CONTENTION_PROBE_S 0.1

#ifdef _OPENMP
// The threads this run uses: the session's, less the cores other processes have kept busy since
// the last probe (contention.h). One run probes at a time; the others take the last answer.
// (A build without OpenMP runs every kernel on the calling thread: nothing to choose.)
static int threads_for_run(CpuSession *s) {
    if (s->fixed_threads || s->threads <= 1)
        return s->threads;
    if (pthread_mutex_trylock(&s->probe_mu) == 0) {
        if (now_seconds() - s->probe.t >= CONTENTION_PROBE_S) {
            CpuBusySample b = cpu_busy_sample();
            double others = cpu_busy_elsewhere(&s->probe, &b);
            int t = cpu_threads_under_contention(s->threads, b.cores, others);
            __atomic_store_n(&s->threads_now, t, __ATOMIC_RELAXED);
            s->probe = b;
        }
        pthread_mutex_unlock(&s->probe_mu);
    }
    int t = __atomic_load_n(&s->threads_now, __ATOMIC_RELAXED);
    if (t < s->threads)
        __atomic_add_fetch(&s->runs_fewer, 1, __ATOMIC_RELAXED);
    return t;
}
#endif

// One run on workspace w; `own`: the session's own workspace, the only one a profiled run uses
// (the per-launch times are the session's).
static int run_on(CpuSession *s, Work *w, bool own, const void *const *inputs, void *const *outputs,
                  Err *e) {
    const PrimGraph *pg = s->pg;
    bool profiling = own && s->profiling;
    const char *what = s->path ? s->path : "session";
#ifdef _OPENMP
    // Per calling thread (an OpenMP internal control variable), so set at every run.
    if (s->threads > 0)
        omp_set_num_threads(threads_for_run(s));
#endif
    for (int i = 0; i < pg->n_inputs; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        size_t bytes = tensor_nbytes(t);
        const void *b = inputs ? inputs[i] : NULL;
        if (!b && bytes)
            return err_set(e, ST_USAGE, "%s: input '%s' has no buffer", what, t->name);
        if (!bytes)
            b = empty_buffer;
        else if (!aligned(b)) {
            memcpy(w->stage_in[i], b, bytes);
            b = w->stage_in[i];
        }
        w->io_in[i] = b;
    }
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        size_t bytes = tensor_nbytes(t);
        void *b = outputs ? outputs[i] : NULL;
        if (!b && bytes)
            return err_set(e, ST_USAGE, "%s: output '%s' has no buffer", what, t->name);
        w->io_out[i] = !bytes ? empty_buffer : aligned(b) ? b : w->stage_out[i];
    }
    for (int i = 0; i < s->n_patches; i++) {
        const Patch *p = &s->patches[i];
        w->slots[p->slot] = p->output ? w->io_out[p->index] : (void *)w->io_in[p->index];
    }
    int rc = ST_OK;
    for (int k = 0; k < s->n_launches && rc == ST_OK; k++) {
        const Launch *l = &s->launches[k];
        double t0 = profiling ? now_seconds() : 0;
        const void *const *in = (const void *const *)&w->slots[l->in];
        void *const *out = &w->slots[l->out];
        if (!l->empty) {
            switch (l->pl->kind) {
            case PLAN_GENERATED: {
                int st = CKERNEL_OK;
                if (l->op)
                    st = l->op(in, out);
                else
                    l->fn(in, out[0]);
                if (st != CKERNEL_OK)
                    rc = op_kernel_error(pg, l, in, out, st, e);
                break;
            }
            case PLAN_INTERP: rc = prim_eval(pg, l->p, in, out[0], e); break;
            case PLAN_OPAQUE: rc = prim_eval_opaque(pg, l->p, in, out, e); break;
            default:
                if (l->bytes && out[0] != in[0])
                    memmove(out[0], in[0], l->bytes);
                break;
            }
        }
        if (profiling)
            s->times[k] = now_seconds() - t0;
        if (rc)
            err_prefix(e, "%s: launch %d (%s, nodes '%s'): ", what, k, l->name, l->nodes);
    }
    if (rc)
        return rc;
    if (profiling)
        s->timed = true;
    for (int i = 0; i < pg->n_outputs; i++)
        if (w->io_out[i] == w->stage_out[i])
            memcpy(outputs[i], w->stage_out[i], tensor_nbytes(pg->tensors[pg->outputs[i]]));
    return ST_OK;
}

int cpu_session_run(CpuSession *s, const void *const *inputs, void *const *outputs, Err *e) {
    bool own = false, nomem = false;
    Work *w = work_take(s, &own, &nomem);
    if (nomem)
        return err_set(e, ST_RUNTIME,
                       "%s: out of memory for a concurrent run's workspace (%lld bytes of arena)",
                       s->path ? s->path : "session", (long long)s->plan->arena_bytes);
    Work view = {s->slots, s->arena, s->io_in, s->io_out, s->stage_in, s->stage_out, true};
    int rc = run_on(s, own ? &view : w, own, inputs, outputs, e);
    work_give(s, w, own);
    return rc;
}

static int cpu_time_device(CpuSession *s, int runs, double *seconds, Err *e) {
    (void)s;
    (void)runs;
    (void)seconds;
    return err_set(e, ST_UNSUPPORTED,
                   "device timing needs a session on a device with a timeline "
                   "(the cuda target)");
}

void cpu_session_set_profiling(CpuSession *s, int on) {
    s->profiling = on != 0;
}
const double *cpu_session_kernel_times(const CpuSession *s) {
    return s->timed ? s->times : NULL;
}
int cpu_session_num_launches(const CpuSession *s) {
    return s->n_launches;
}
int cpu_session_num_kernels(const CpuSession *s) {
    return s->plan->n_kernels;
}
const char *cpu_session_launch_name(const CpuSession *s, int i) {
    return i >= 0 && i < s->n_launches ? s->launches[i].name : NULL;
}
const char *cpu_session_launch_nodes(const CpuSession *s, int i) {
    return i >= 0 && i < s->n_launches ? s->launches[i].nodes : NULL;
}
const PrimGraph *cpu_session_graph(const CpuSession *s) {
    return s->pg;
}
const Plan *cpu_session_plan(const CpuSession *s) {
    return s->plan;
}
int64_t cpu_session_in_place_bytes(const CpuSession *s) {
    return s->in_place_bytes;
}
int64_t cpu_session_blob_bytes(const CpuSession *s) {
    return s->blob_bytes;
}

int cpu_session_threads(const CpuSession *s) {
    return s->threads;
}

// The slots take the front end's opaque TargetSession, which is a CpuSession here.
#define CS(x) ((CpuSession *)(x))
#define CCS(x) ((const CpuSession *)(x))
static int ops_create(const ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                      TargetSession **out, Err *e) {
    return cpu_session_create(a, hw_now, opt, (CpuSession **)out, e);
}
static void ops_free(TargetSession *s) {
    cpu_session_free(CS(s));
}
static int ops_run(TargetSession *s, const void *const *in, void *const *out, Err *e) {
    return cpu_session_run(CS(s), in, out, e);
}
static int ops_run_device(TargetSession *s, const void *const *in, void *const *out, void *stream,
                          Err *e) {
    if (stream)
        return err_set(e, ST_USAGE,
                       "a CPU artefact runs on the host: its buffers are host memory and it "
                       "takes no stream");
    return cpu_session_run(CS(s), in, out, e);
}
static int ops_time(TargetSession *s, int runs, double *seconds, Err *e) {
    return cpu_time_device(CS(s), runs, seconds, e);
}
static void ops_profiling(TargetSession *s, int on) {
    cpu_session_set_profiling(CS(s), on);
}
static const double *ops_times(const TargetSession *s) {
    return cpu_session_kernel_times(CCS(s));
}
static int ops_launches(const TargetSession *s) {
    return cpu_session_num_launches(CCS(s));
}
static int ops_kernels(const TargetSession *s) {
    return cpu_session_num_kernels(CCS(s));
}
static const char *ops_name(const TargetSession *s, int i) {
    return cpu_session_launch_name(CCS(s), i);
}
static const char *ops_nodes(const TargetSession *s, int i) {
    return cpu_session_launch_nodes(CCS(s), i);
}
static const PrimGraph *ops_graph(const TargetSession *s) {
    return cpu_session_graph(CCS(s));
}
static const Plan *ops_plan(const TargetSession *s) {
    return cpu_session_plan(CCS(s));
}
static int ops_threads(const TargetSession *s) {
    return cpu_session_threads(CCS(s));
}

const TargetSessionOps cpu_session_ops = {
    .create = ops_create,
    .free = ops_free,
    .run = ops_run,
    .run_device = ops_run_device,
    .concurrent_runs = true,
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
