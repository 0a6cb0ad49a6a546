// Plan construction, arena packing and serialisation (see plan.h). One builder serves both
// plan_build (from a selection) and plan_read (from the launches stored in an artefact): what a
// launch reads and writes, where tensors live and the arena offsets are all derived from the
// launches' primitive sets and kinds, so a stored plan is checked by rebuilding it and comparing
// every field. Untrusted input reaches the builder only through plan_read, so every index and
// kind is validated there (kdesc_check) before anything is derived from it.
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *plan_kind_name(PlanKind k) {
    static const char *names[] = {"generated", "interp", "opaque", "copy"};
    return (unsigned)k < PLAN_KIND_COUNT ? names[k] : "?";
}

// ---- hashing ----

static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

// Four independent lanes over 32-byte blocks (several GB/s, so hashing the weights of a large
// model at load costs little), then the tail byte by byte and the length. done (may be NULL) is
// told of each HASH_CHUNK bytes once hashed (a multiple of the block, so chunks do not change the
// value).
#define HASH_CHUNK ((size_t)1 << 20)

uint64_t plan_hash64_chunked(const void *data, size_t n, uint64_t seed,
                             void (*done)(const void *chunk, size_t bytes)) {
    const uint8_t *p = data;
    const uint64_t K = 0x9e3779b97f4a7c15ull;
    uint64_t h[4] = {seed ^ K, seed + K, ~seed, seed * 31 + 7};
    size_t i = 0, from = 0;
    for (; i + 32 <= n; i += 32) {
        for (int l = 0; l < 4; l++) {
            h[l] ^= rd64(p + i + 8 * (size_t)l) * 0x87c37b91114253d5ull;
            h[l] = (h[l] << 31 | h[l] >> 33) * K;
        }
        if (done && i + 32 - from == HASH_CHUNK) {
            done(p + from, HASH_CHUNK);
            from = i + 32;
        }
    }
    uint64_t r = mix64(h[0]) ^ mix64(h[1] + 1) ^ mix64(h[2] + 2) ^ mix64(h[3] + 3);
    for (; i < n; i++)
        r = (r ^ p[i]) * 0x100000001b3ull;
    if (done && n > from)
        done(p + from, n - from);
    return mix64(r ^ (uint64_t)n);
}

uint64_t plan_hash64(const void *data, size_t n, uint64_t seed) {
    return plan_hash64_chunked(data, n, seed, NULL);
}

uint64_t plan_content_hash(const void *data, size_t n) {
    return plan_hash64(n ? data : "", n, PLAN_CONTENT_SEED);
}

// The content hash of n bytes at data: the known one for exactly these bytes, else computed.
static uint64_t const_content_hash(const void *data, size_t n, const PlanKnownHash *known,
                                   int n_known) {
    int lo = 0, hi = n_known - 1;
    while (data && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const char *k = known[mid].data;
        if (k == (const char *)data)
            return known[mid].bytes == n ? known[mid].hash : plan_content_hash(data, n);
        if (k < (const char *)data)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return plan_content_hash(data, data ? n : 0);
}

// ---- the builder ----

// One selected kernel as the builder sees it.
typedef struct KDesc {
    PlanKind kind;
    const char *symbol;
    const int *prims;
    int n_prims;
    double predicted;
} KDesc;

static int64_t align_up(int64_t n) {
    return (n + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN;
}

static bool is_identifier(const char *s) {
    if (!s || !*s || strlen(s) > 255 || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

static const char *first_origin(const PrimGraph *pg, const KDesc *k) {
    const char *o =
        k->n_prims > 0 && k->prims[k->n_prims - 1] >= 0 && k->prims[k->n_prims - 1] < pg->n_prims
            ? pg->prims[k->prims[k->n_prims - 1]]->origin
            : NULL;
    return o && *o ? o : "?";
}

// Whether kernel i's description is consistent with pg: indices, kind, sink, connectivity.
static int kdesc_check(const PrimGraph *pg, const KDesc *k, int i, const char *what, Err *e) {
    if ((unsigned)k->kind > PLAN_OPAQUE)
        return err_set(e, ST_INVALID, "%s: kernel %d has kind %d, not generated/interp/opaque",
                       what, i, (int)k->kind);
    if (k->n_prims < 1 || k->n_prims > pg->n_prims)
        return err_set(e, ST_INVALID, "%s: kernel %d has %d primitives (the graph has %d)", what, i,
                       k->n_prims, pg->n_prims);
    for (int j = 0; j < k->n_prims; j++)
        if (k->prims[j] < 0 || k->prims[j] >= pg->n_prims || (j && k->prims[j] <= k->prims[j - 1]))
            return err_set(e, ST_INVALID,
                           "%s: kernel %d: primitive index %d out of range or out of order (the "
                           "graph has %d)",
                           what, i, k->prims[j], pg->n_prims);
    const Prim *sink = pg->prims[k->prims[k->n_prims - 1]];
    const char *from = first_origin(pg, k);
    switch (k->kind) {
    case PLAN_GENERATED:
        if (!is_identifier(k->symbol))
            return err_set(e, ST_INVALID,
                           "%s: kernel %d (from '%s') is generated but its symbol '%s' is not a C "
                           "identifier",
                           what, i, from, k->symbol ? k->symbol : "(none)");
        // An operator kernel (the operator ABI, target.h) computes one OPAQUE primitive alone.
        for (int j = 0; j < k->n_prims; j++)
            if (pg->prims[k->prims[j]]->kind == PRIM_OPAQUE && k->n_prims != 1)
                return err_set(e, ST_INVALID,
                               "%s: kernel %d (from '%s') is generated and holds an opaque "
                               "primitive among others",
                               what, i, from);
        break;
    case PLAN_INTERP:
        if (k->n_prims != 1 || sink->kind == PRIM_OPAQUE)
            return err_set(e, ST_INVALID,
                           "%s: kernel %d (from '%s') runs on the interpreter, which takes one "
                           "non-opaque primitive (it has %d, the sink is %s)",
                           what, i, from, k->n_prims, prim_kind_name(sink->kind));
        break;
    default:
        if (k->n_prims != 1 || sink->kind != PRIM_OPAQUE)
            return err_set(e, ST_INVALID,
                           "%s: kernel %d (from '%s') is marked opaque but is not a single opaque "
                           "primitive",
                           what, i, from);
        break;
    }
    // Every member but the sink feeds a later member, so all of them lead to the sink.
    for (int j = 0; j + 1 < k->n_prims; j++) {
        const Prim *p = pg->prims[k->prims[j]];
        bool used = false;
        for (int m = j + 1; m < k->n_prims && !used; m++) {
            const Prim *q = pg->prims[k->prims[m]];
            for (int a = 0; a < q->n_in && !used; a++)
                used = q->in[a] >= 0 && q->in[a] == p->out[0];
        }
        if (!used)
            return err_set(e, ST_INVALID,
                           "%s: kernel %d (from '%s'): primitive #%d does not lead to the sink",
                           what, i, from, p->id);
    }
    for (int j = 0; j < sink->n_out; j++)
        if (sink->out[j] >= pg->n_tensors)
            return err_set(e, ST_INVALID, "%s: kernel %d: bad output tensor", what, i);
    if (sink->kind != PRIM_OPAQUE && (sink->n_out != 1 || sink->out[0] < 0))
        return err_set(e, ST_INVALID, "%s: kernel %d: the sink has no output", what, i);
    return ST_OK;
}

// The set's external inputs in the candidate's canonical order (the kernel ABI's order).
static int external_inputs(const PrimGraph *pg, const KDesc *k, int *buf) {
    return cand_canonical_inputs(pg, k->prims, k->n_prims, buf);
}

static void add_nodes(Arena *a, const PrimGraph *pg, PlanLaunch *L) {
    int cap = 0;
    for (int i = 0; i < L->n_prims; i++) {
        const char *o = pg->prims[L->prims[i]]->origin;
        cap += 1;
        for (; o && *o; o++)
            cap += *o == ',';
    }
    L->nodes = arena_alloc(a, sizeof(char *) * (size_t)(cap + 1));
    for (int i = 0; i < L->n_prims; i++) {
        const char *o = pg->prims[L->prims[i]]->origin;
        while (o && *o) {
            const char *end = strchr(o, ',');
            size_t len = end ? (size_t)(end - o) : strlen(o);
            bool seen = len == 0;
            for (int m = 0; m < L->n_nodes && !seen; m++)
                seen = strlen(L->nodes[m]) == len && memcmp(L->nodes[m], o, len) == 0;
            if (!seen)
                L->nodes[L->n_nodes++] = arena_strndup(a, o, len);
            o = end ? end + 1 : NULL;
        }
    }
}

// n ints into the arena, with room for one more so that an empty list is not a NULL pointer.
static int *dup_ints(Arena *a, const int *v, int n) {
    int *d = arena_alloc(a, sizeof(int) * (size_t)(n + 1));
    if (n)
        memcpy(d, v, sizeof(int) * (size_t)n);
    return d;
}

static void fill_launch(Arena *a, const PrimGraph *pg, const KDesc *k, int *scratch,
                        PlanLaunch *L) {
    const Prim *sink = pg->prims[k->prims[k->n_prims - 1]];
    L->kind = k->kind;
    L->symbol = k->kind == PLAN_GENERATED ? arena_strdup(a, k->symbol) : NULL;
    L->n_prims = k->n_prims;
    L->prims = dup_ints(a, k->prims, k->n_prims);
    L->sink = k->prims[k->n_prims - 1];
    L->signature = cand_signature(pg, k->prims, k->n_prims);
    L->predicted = k->predicted;
    L->copy_to = -1;
    if (k->kind == PLAN_GENERATED) {
        L->n_in = external_inputs(pg, k, scratch);
        L->in = dup_ints(a, scratch, L->n_in);
        L->n_out = sink->kind == PRIM_OPAQUE ? sink->n_out : 1;
        L->out = dup_ints(a, sink->out, L->n_out);
    } else {
        L->n_in = sink->n_in;
        L->in = dup_ints(a, sink->in, sink->n_in);
        L->n_out = k->kind == PLAN_OPAQUE ? sink->n_out : 1;
        L->out = dup_ints(a, sink->out, L->n_out);
    }
    add_nodes(a, pg, L);
}

// ---- arena packing ----

typedef struct Item {
    int t;
    int64_t size; // aligned
    int first, last;
    int64_t offset;
    int64_t key; // the current order's first criterion, descending
} Item;

// Placement orders tried; the packing with the least peak wins (ties: the first).
enum { ORDER_SIZE, ORDER_AREA, ORDER_FIRST, N_ORDERS };

static int cmp_i64_desc(int64_t a, int64_t b) {
    return (a < b) - (a > b);
}

static int cmp_item(const void *a, const void *b) {
    const Item *x = a, *y = b;
    int c = cmp_i64_desc(x->key, y->key);
    if (!c)
        c = cmp_i64_desc(x->size, y->size);
    if (!c)
        c = (x->first > y->first) - (x->first < y->first);
    return c ? c : (x->t > y->t) - (x->t < y->t);
}

static int cmp_item_offset(const void *a, const void *b) {
    const Item *const *x = a, *const *y = b;
    return ((*x)->offset > (*y)->offset) - ((*x)->offset < (*y)->offset);
}

// Greedy best fit in the given order: each tensor takes the smallest gap between the tensors
// already placed that are live at the same time, or goes on top of them.
static int64_t pack_order(Item *it, int n, int order, Item **live) {
    for (int i = 0; i < n; i++)
        it[i].key = order == ORDER_AREA    ? it[i].size * (it[i].last - it[i].first + 1)
                    : order == ORDER_FIRST ? -(int64_t)it[i].first
                                           : 0;
    qsort(it, (size_t)n, sizeof(Item), cmp_item);
    int64_t top = 0;
    for (int i = 0; i < n; i++) {
        int m = 0;
        for (int j = 0; j < i; j++)
            if (it[j].size > 0 && it[j].first <= it[i].last && it[i].first <= it[j].last)
                live[m++] = &it[j];
        qsort(live, (size_t)m, sizeof(Item *), cmp_item_offset);
        int64_t end = 0, best = -1, best_gap = INT64_MAX;
        for (int j = 0; j < m; j++) {
            int64_t gap = live[j]->offset - end;
            if (gap >= it[i].size && gap < best_gap) {
                best_gap = gap;
                best = end;
            }
            end = ORCH_MAX(end, live[j]->offset + live[j]->size);
        }
        it[i].offset = it[i].size == 0 ? 0 : best >= 0 ? best : end;
        top = ORCH_MAX(top, it[i].offset + it[i].size);
    }
    return top;
}

// Packs the items (offsets set, order changed); returns the arena's size.
static int64_t pack(Item *it, int n) {
    Item **live = xmalloc(sizeof(Item *) * (size_t)(n + 1));
    Item *best = xmalloc(sizeof(Item) * (size_t)(n + 1));
    int64_t best_top = -1;
    for (int order = 0; order < N_ORDERS; order++) {
        int64_t top = pack_order(it, n, order, live);
        if (best_top < 0 || top < best_top) {
            best_top = top;
            memcpy(best, it, sizeof(Item) * (size_t)n);
        }
    }
    memcpy(it, best, sizeof(Item) * (size_t)n);
    free(live);
    free(best);
    return best_top < 0 ? 0 : best_top;
}

// ---- the whole plan ----

static int build(const PrimGraph *pg, const KDesc *kd, int n_k, const char *what,
                 const PlanKnownHash *known, int n_known, Plan **out, Err *e) {
    *out = NULL;
    for (int i = 0; i < n_k; i++) {
        int rc = kdesc_check(pg, &kd[i], i, what, e);
        if (rc)
            return rc;
    }
    int nt = pg->n_tensors;
    Plan *p = xcalloc(1, sizeof *p);
    p->arena = arena_create();
    p->n_tensors = nt;
    p->tensors = arena_alloc(p->arena, sizeof(PlanTensor) * (size_t)(nt + 1));
    // Copies: one per graph output that is an input, a constant or a repeated listing.
    int n_copies = 0;
    for (int i = 0; i < pg->n_outputs; i++) {
        int t = pg->outputs[i];
        bool repeat = false;
        for (int j = 0; j < i && !repeat; j++)
            repeat = pg->outputs[j] == t;
        n_copies += repeat || pg->tensors[t]->kind != TK_VALUE;
    }
    p->n_kernels = n_k;
    p->n_launches = n_k + n_copies;
    p->launches = arena_alloc(p->arena, sizeof(PlanLaunch) * (size_t)(p->n_launches + 1));
    int *scratch = xmalloc(sizeof(int) * (size_t)(nt + 1));
    for (int i = 0; i < n_k; i++)
        fill_launch(p->arena, pg, &kd[i], scratch, &p->launches[i]);
    for (int t = 0; t < nt; t++) {
        PlanTensor *T = &p->tensors[t];
        T->index = T->first = T->last = -1;
        T->bytes = (int64_t)tensor_nbytes(pg->tensors[t]);
    }
    for (int i = 0; i < pg->n_inputs; i++) {
        PlanTensor *T = &p->tensors[pg->inputs[i]];
        T->place = PLACE_INPUT;
        T->index = i;
    }
    // Order and liveness: every value a launch reads was written before.
    int rc = ST_OK;
    for (int k = 0; k < n_k && rc == ST_OK; k++) {
        const PlanLaunch *L = &p->launches[k];
        for (int j = 0; j < L->n_in && rc == ST_OK; j++) {
            int t = L->in[j];
            if (t < 0)
                continue;
            const Tensor *tt = pg->tensors[t];
            PlanTensor *T = &p->tensors[t];
            if (tt->kind == TK_CONST) {
                T->place = PLACE_CONST;
            } else if (tt->kind == TK_VALUE) {
                if (T->first < 0)
                    rc = err_set(e, ST_INVALID,
                                 "%s: kernel %d (nodes '%s') reads '%s' before any kernel writes "
                                 "it (the selection is infeasible or out of order)",
                                 what, k, L->n_nodes ? L->nodes[0] : "?", tt->name);
                T->last = ORCH_MAX(T->last, k);
            }
        }
        for (int j = 0; j < L->n_out && rc == ST_OK; j++) {
            int t = L->out[j];
            if (t < 0)
                continue;
            PlanTensor *T = &p->tensors[t];
            if (pg->tensors[t]->kind != TK_VALUE) {
                rc = err_set(e, ST_INVALID, "%s: kernel %d writes '%s', which is not computed",
                             what, k, pg->tensors[t]->name);
                break;
            }
            T->place = PLACE_ARENA;
            if (T->first < 0)
                T->first = k;
            T->last = ORCH_MAX(T->last, k);
        }
    }
    int c = n_k;
    for (int i = 0; i < pg->n_outputs && rc == ST_OK; i++) {
        int t = pg->outputs[i];
        PlanTensor *T = &p->tensors[t];
        const Tensor *tt = pg->tensors[t];
        bool repeat = false;
        for (int j = 0; j < i && !repeat; j++)
            repeat = pg->outputs[j] == t;
        if (tt->kind == TK_VALUE && !repeat && T->first < 0) {
            rc = err_set(e, ST_INVALID, "%s: graph output '%s' is not written by any kernel", what,
                         tt->name);
        } else if (tt->kind == TK_VALUE && !repeat) {
            T->place = PLACE_OUTPUT;
            T->index = i;
            T->first = T->last = -1;
        } else {
            PlanLaunch *L = &p->launches[c++];
            L->kind = PLAN_COPY;
            L->sink = -1;
            L->copy_to = i;
            L->n_in = 1;
            L->prims = dup_ints(p->arena, NULL, 0);
            L->in = dup_ints(p->arena, &t, 1);
            L->out = dup_ints(p->arena, NULL, 0);
            if (tt->kind == TK_CONST)
                T->place = PLACE_CONST;
        }
    }
    free(scratch);
    if (rc) {
        plan_free(p);
        return rc;
    }
    // The arena.
    Item *it = xmalloc(sizeof(Item) * (size_t)(nt + 1));
    int n_items = 0;
    for (int t = 0; t < nt; t++)
        if (p->tensors[t].place == PLACE_ARENA)
            it[n_items++] = (Item){
                t, align_up(p->tensors[t].bytes), p->tensors[t].first, p->tensors[t].last, 0, 0};
    p->arena_bytes = pack(it, n_items);
    for (int i = 0; i < n_items; i++)
        p->tensors[it[i].t].offset = it[i].offset;
    free(it);
    // The constants, in tensor order, hashed with their offsets: per constant its content hash,
    // taken from known where it is there (a weights index: its bytes are not read here).
    uint64_t h = 0x6f72636863737473ull;
    for (int t = 0; t < nt; t++) {
        PlanTensor *T = &p->tensors[t];
        if (T->place != PLACE_CONST)
            continue;
        T->offset = p->const_bytes;
        p->const_bytes += align_up(T->bytes);
        uint64_t rec[3] = {
            (uint64_t)T->offset, (uint64_t)T->bytes,
            const_content_hash(pg->tensors[t]->data, (size_t)T->bytes, known, n_known)};
        h = plan_hash64(rec, sizeof rec, h);
    }
    p->const_hash = h;
    *out = p;
    return ST_OK;
}

int plan_build(const PrimGraph *pg, const CandidateSet *cs, const Selection *sel,
               const PlanKernelSpec *spec, Plan **out, Err *e) {
    *out = NULL;
    KDesc *kd = xcalloc((size_t)sel->n + 1, sizeof(KDesc));
    int rc = ST_OK;
    for (int i = 0; i < sel->n && rc == ST_OK; i++) {
        if (sel->kernels[i] < 0 || sel->kernels[i] >= cs->n) {
            rc = err_set(e, ST_INVALID, "plan: kernel %d is candidate %d of %d", i, sel->kernels[i],
                         cs->n);
            break;
        }
        const Candidate *c = &cs->c[sel->kernels[i]];
        kd[i] = (KDesc){spec[i].kind, spec[i].symbol, c->prims, c->n_prims, c->cost};
    }
    const char *what = pg->src && pg->src->path ? pg->src->path : "plan";
    if (rc == ST_OK)
        rc = build(pg, kd, sel->n, what, NULL, 0, out, e);
    // What the builder derived must be what the candidate set says (else one of them has a bug).
    for (int i = 0; i < sel->n && rc == ST_OK; i++) {
        const Candidate *c = &cs->c[sel->kernels[i]];
        const PlanLaunch *L = &(*out)->launches[i];
        int first_out = -1; // an opaque candidate's output is its first present one
        for (int j = 0; j < L->n_out && first_out < 0; j++)
            first_out = L->out[j];
        bool same = L->signature == c->signature && first_out == c->output;
        if (L->kind == PLAN_GENERATED)
            same = same && L->n_in == c->n_inputs &&
                   memcmp(L->in, c->inputs, sizeof(int) * (size_t)c->n_inputs) == 0;
        if (!same)
            rc = err_set(e, ST_RUNTIME,
                         "plan: kernel %d (candidate %d) disagrees with the candidate set about "
                         "its signature, inputs or output (a bug)",
                         i, c->id);
    }
    if (rc) {
        plan_free(*out);
        *out = NULL;
    }
    free(kd);
    return rc;
}

void plan_free(Plan *p) {
    if (!p)
        return;
    arena_free(p->arena);
    free(p);
}

void plan_stats(const Plan *p, PlanStats *st) {
    memset(st, 0, sizeof *st);
    st->launches = p->n_launches;
    for (int i = 0; i < p->n_launches; i++) {
        const PlanLaunch *L = &p->launches[i];
        st->generated += L->kind == PLAN_GENERATED;
        st->interp += L->kind == PLAN_INTERP;
        st->opaque += L->kind == PLAN_OPAQUE;
        st->copies += L->kind == PLAN_COPY;
        st->predicted += L->predicted;
    }
    st->arena_bytes = p->arena_bytes;
    st->const_bytes = p->const_bytes;
    for (int t = 0; t < p->n_tensors; t++) {
        const PlanTensor *T = &p->tensors[t];
        st->consts += T->place == PLACE_CONST;
        if (T->place != PLACE_ARENA)
            continue;
        st->intermediates++;
        st->intermediate_bytes += align_up(T->bytes);
    }
    for (int k = 0; k < p->n_kernels; k++) {
        int64_t live = 0;
        for (int t = 0; t < p->n_tensors; t++) {
            const PlanTensor *T = &p->tensors[t];
            if (T->place == PLACE_ARENA && T->first <= k && k <= T->last)
                live += align_up(T->bytes);
        }
        st->live_peak_bytes = ORCH_MAX(st->live_peak_bytes, live);
    }
}

void plan_pack_constants(const Plan *p, const PrimGraph *pg, void *blob) {
    if (p->const_bytes)
        memset(blob, 0, (size_t)p->const_bytes);
    for (int t = 0; t < p->n_tensors; t++) {
        const PlanTensor *T = &p->tensors[t];
        if (T->place == PLACE_CONST && T->bytes && pg->tensors[t]->data)
            memcpy((char *)blob + T->offset, pg->tensors[t]->data, (size_t)T->bytes);
    }
}

// ---- serialisation ----

#define PLAN_MAGIC 0x4e4c5050u // "PPLN"
#define PLAN_FORMAT 2

typedef struct Wr {
    uint8_t *p;
    size_t n, cap;
} Wr;

static void w_bytes(Wr *w, const void *d, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = ORCH_MAX(2 * w->cap, w->n + n + 256);
        w->p = xrealloc(w->p, w->cap);
    }
    memcpy(w->p + w->n, d, n);
    w->n += n;
}

// Little-endian regardless of the host.
static void w_u64(Wr *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    w_bytes(w, b, 8);
}
static void w_u32(Wr *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    w_bytes(w, b, 4);
}
static void w_i32(Wr *w, int v) {
    w_u32(w, (uint32_t)v);
}
static void w_f64(Wr *w, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    w_u64(w, u);
}
static void w_str(Wr *w, const char *s) {
    size_t n = s ? strlen(s) : 0;
    w_u32(w, (uint32_t)n);
    w_bytes(w, s ? s : "", n);
}
static void w_ints(Wr *w, const int *v, int n) {
    w_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++)
        w_i32(w, v[i]);
}

int plan_write(const Plan *p, uint8_t **buf, size_t *len, Err *e) {
    (void)e;
    Wr w = {0};
    w_u32(&w, PLAN_MAGIC);
    w_u32(&w, PLAN_FORMAT);
    w_u32(&w, (uint32_t)p->n_tensors);
    w_u64(&w, (uint64_t)p->arena_bytes);
    w_u64(&w, (uint64_t)p->const_bytes);
    w_u64(&w, p->const_hash);
    w_u32(&w, (uint32_t)p->n_launches);
    w_u32(&w, (uint32_t)p->n_kernels);
    for (int i = 0; i < p->n_launches; i++) {
        const PlanLaunch *L = &p->launches[i];
        w_u32(&w, (uint32_t)L->kind);
        w_str(&w, L->symbol);
        w_u64(&w, L->signature);
        w_i32(&w, L->sink);
        w_i32(&w, L->copy_to);
        w_f64(&w, L->predicted);
        w_ints(&w, L->prims, L->n_prims);
        w_ints(&w, L->in, L->n_in);
        w_ints(&w, L->out, L->n_out);
        w_u32(&w, (uint32_t)L->n_nodes);
        for (int j = 0; j < L->n_nodes; j++)
            w_str(&w, L->nodes[j]);
    }
    for (int t = 0; t < p->n_tensors; t++) {
        const PlanTensor *T = &p->tensors[t];
        w_u32(&w, (uint32_t)T->place);
        w_i32(&w, T->index);
        w_u64(&w, (uint64_t)T->offset);
        w_u64(&w, (uint64_t)T->bytes);
        w_i32(&w, T->first);
        w_i32(&w, T->last);
    }
    *buf = w.p ? w.p : xmalloc(1);
    *len = w.n;
    return ST_OK;
}

// A reader that never reads past its end: a short read marks it bad and yields zeros.
typedef struct Rd {
    const uint8_t *p;
    size_t n, pos;
    bool bad;
} Rd;

static const uint8_t *r_take(Rd *r, size_t n) {
    if (r->bad || n > r->n - r->pos) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->pos;
    r->pos += n;
    return q;
}
static uint64_t r_u64(Rd *r) {
    const uint8_t *q = r_take(r, 8);
    uint64_t v = 0;
    for (int i = 0; q && i < 8; i++)
        v |= (uint64_t)q[i] << (8 * i);
    return v;
}
static uint32_t r_u32(Rd *r) {
    const uint8_t *q = r_take(r, 4);
    uint32_t v = 0;
    for (int i = 0; q && i < 4; i++)
        v |= (uint32_t)q[i] << (8 * i);
    return v;
}
static int r_i32(Rd *r) {
    return (int)r_u32(r);
}
static double r_f64(Rd *r) {
    uint64_t u = r_u64(r);
    double v;
    memcpy(&v, &u, 8);
    return v;
}
// A count of items of at least `min_bytes` each: more than the bytes left is corruption.
static int r_count(Rd *r, size_t min_bytes) {
    uint32_t n = r_u32(r);
    if (r->bad || n > (r->n - r->pos) / min_bytes || n > (uint32_t)INT32_MAX / 2) {
        r->bad = true;
        return 0;
    }
    return (int)n;
}
static char *r_str(Rd *r, Arena *a) {
    int n = r_count(r, 1);
    const uint8_t *q = r_take(r, (size_t)n);
    if (!q)
        return NULL;
    if (memchr(q, 0, (size_t)n)) {
        r->bad = true;
        return NULL;
    }
    return arena_strndup(a, (const char *)q, (size_t)n);
}
static int *r_ints(Rd *r, Arena *a, int *n) {
    *n = r_count(r, 4);
    int *v = arena_alloc(a, sizeof(int) * (size_t)(*n + 1));
    for (int i = 0; i < *n; i++)
        v[i] = r_i32(r);
    return v;
}

static bool same_ints(const int *a, int na, const int *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, sizeof(int) * (size_t)na) == 0);
}

static bool same_str(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

// Compares the stored launch with the rebuilt one; returns the first differing field or NULL.
static const char *launch_diff(const PlanLaunch *s, const PlanLaunch *b) {
    if (s->kind != b->kind)
        return "kind";
    if (!same_str(s->symbol, b->symbol))
        return "symbol";
    if (s->signature != b->signature)
        return "signature";
    if (s->sink != b->sink)
        return "sink";
    if (s->copy_to != b->copy_to)
        return "copy target";
    if (!same_ints(s->prims, s->n_prims, b->prims, b->n_prims))
        return "primitives";
    if (!same_ints(s->in, s->n_in, b->in, b->n_in))
        return "inputs";
    if (!same_ints(s->out, s->n_out, b->out, b->n_out))
        return "outputs";
    if (s->n_nodes != b->n_nodes)
        return "ONNX nodes";
    for (int j = 0; j < s->n_nodes; j++)
        if (strcmp(s->nodes[j], b->nodes[j]) != 0)
            return "ONNX nodes";
    if (!isfinite(s->predicted) || s->predicted < 0)
        return "predicted time";
    return NULL;
}

int plan_read(const uint8_t *buf, size_t len, const PrimGraph *pg, const char *what,
              const PlanKnownHash *known, int n_known, Plan **out, Err *e) {
    *out = NULL;
    Rd r = {buf, len, 0, false};
    Arena *a = arena_create();
    Plan s = {0}; // as stored
    uint32_t magic = r_u32(&r), format = r_u32(&r);
    int rc = ST_OK;
    if (r.bad || magic != PLAN_MAGIC) {
        rc = err_set(e, ST_INVALID, "%s: the plan section does not start with a plan", what);
    } else if (format != PLAN_FORMAT) {
        rc = err_set(e, ST_INVALID,
                     "%s: plan format %u, this orch reads %d (it was written by %s orch; "
                     "recompile with orch compile)",
                     what, format, PLAN_FORMAT, format > PLAN_FORMAT ? "a newer" : "an older");
    }
    if (rc == ST_OK) {
        s.n_tensors = (int)r_u32(&r);
        s.arena_bytes = (int64_t)r_u64(&r);
        s.const_bytes = (int64_t)r_u64(&r);
        s.const_hash = r_u64(&r);
        s.n_launches = r_count(&r, 40);
        s.n_kernels = (int)r_u32(&r);
        if (!r.bad && s.n_tensors != pg->n_tensors)
            rc = err_set(e, ST_INVALID,
                         "%s: the plan was made for a primitive graph of %d tensors; this orch "
                         "makes %d from the model (the artefact was built by a different orch "
                         "build; recompile with orch compile)",
                         what, s.n_tensors, pg->n_tensors);
        else if (!r.bad && (s.n_kernels < 0 || s.n_kernels > s.n_launches))
            r.bad = true;
    }
    s.launches = arena_alloc(a, sizeof(PlanLaunch) * (size_t)(s.n_launches + 1));
    for (int i = 0; rc == ST_OK && !r.bad && i < s.n_launches; i++) {
        PlanLaunch *L = &s.launches[i];
        L->kind = (PlanKind)r_u32(&r);
        L->symbol = r_str(&r, a);
        if (L->symbol && !*L->symbol)
            L->symbol = NULL;
        L->signature = r_u64(&r);
        L->sink = r_i32(&r);
        L->copy_to = r_i32(&r);
        L->predicted = r_f64(&r);
        L->prims = r_ints(&r, a, &L->n_prims);
        L->in = r_ints(&r, a, &L->n_in);
        L->out = r_ints(&r, a, &L->n_out);
        L->n_nodes = r_count(&r, 4);
        L->nodes = arena_alloc(a, sizeof(char *) * (size_t)(L->n_nodes + 1));
        for (int j = 0; j < L->n_nodes && !r.bad; j++)
            L->nodes[j] = r_str(&r, a);
        if ((i < s.n_kernels) != (L->kind != PLAN_COPY))
            r.bad = true;
    }
    if (rc == ST_OK && !r.bad) {
        s.tensors = arena_alloc(a, sizeof(PlanTensor) * (size_t)(s.n_tensors + 1));
        for (int t = 0; t < s.n_tensors && !r.bad; t++) {
            PlanTensor *T = &s.tensors[t];
            T->place = (PlanPlace)r_u32(&r);
            T->index = r_i32(&r);
            T->offset = (int64_t)r_u64(&r);
            T->bytes = (int64_t)r_u64(&r);
            T->first = r_i32(&r);
            T->last = r_i32(&r);
        }
        if (!r.bad && r.pos != r.n)
            rc = err_set(e, ST_INVALID, "%s: %zu unexpected bytes after the plan", what,
                         r.n - r.pos);
    }
    if (rc == ST_OK && r.bad)
        rc = err_set(e, ST_INVALID, "%s: the plan section is truncated or malformed", what);
    // Rebuild from the kernels' primitive sets and kinds, then compare everything.
    Plan *p = NULL;
    if (rc == ST_OK) {
        KDesc *kd = xcalloc((size_t)s.n_kernels + 1, sizeof(KDesc));
        for (int i = 0; i < s.n_kernels; i++) {
            const PlanLaunch *L = &s.launches[i];
            kd[i] = (KDesc){L->kind, L->symbol, L->prims, L->n_prims, L->predicted};
        }
        rc = build(pg, kd, s.n_kernels, what, known, n_known, &p, e);
        free(kd);
    }
    if (rc == ST_OK && p->n_launches != s.n_launches)
        rc = err_set(e, ST_INVALID,
                     "%s: the plan has %d launches; rebuilt from its kernels it has %d (the "
                     "artefact was built by a different orch build; recompile with orch compile)",
                     what, s.n_launches, p->n_launches);
    for (int i = 0; rc == ST_OK && i < s.n_launches; i++) {
        const char *diff = launch_diff(&s.launches[i], &p->launches[i]);
        if (diff)
            rc = err_set(e, ST_INVALID,
                         "%s: launch %d (%s, nodes '%s'): its field '%s' differs from what "
                         "this orch derives from the model (the artefact was built by a "
                         "different orch build; recompile with orch compile)",
                         what, i, plan_kind_name(p->launches[i].kind),
                         p->launches[i].n_nodes ? p->launches[i].nodes[0] : "-", diff);
        else
            p->launches[i].predicted = s.launches[i].predicted;
    }
    for (int t = 0; rc == ST_OK && t < s.n_tensors; t++) {
        const PlanTensor *x = &s.tensors[t], *y = &p->tensors[t];
        if (x->place != y->place || x->index != y->index || x->offset != y->offset ||
            x->bytes != y->bytes || x->first != y->first || x->last != y->last)
            rc = err_set(e, ST_INVALID,
                         "%s: the placement of tensor '%s' differs from what this orch derives "
                         "(the artefact was built by a different orch build; recompile with orch "
                         "compile)",
                         what, pg->tensors[t]->name);
    }
    if (rc == ST_OK && (s.arena_bytes != p->arena_bytes || s.const_bytes != p->const_bytes))
        rc = err_set(e, ST_INVALID,
                     "%s: the plan's arena or constant size differs from what this orch derives "
                     "(recompile with orch compile)",
                     what);
    if (rc == ST_OK && s.const_hash != p->const_hash)
        rc = err_set(e, ST_INVALID,
                     "%s: the model's constants, as this orch computes them, differ from those "
                     "the plan was built with (a different orch build folded them; recompile "
                     "with orch compile)",
                     what);
    arena_free(a);
    if (rc) {
        plan_free(p);
        return rc;
    }
    *out = p;
    return ST_OK;
}
