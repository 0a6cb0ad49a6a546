// Writing and validating compiled artefacts (see artifact.h for the layout). The reader checks,
// in this order, so each failure gets the message that explains it: empty, magic, format version,
// header size, truncation, header checksum, header fields, section table, truncation against the
// sections, trailing bytes, section checksums, model hash, distinct shape sets.
#include "artifact.h"

#include "../base/file.h"
#include "plan.h"

#include <stdatomic.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t MAGIC[8] = {0x89, 'O', 'R', 'C', 'H', 'A', 'R', 'T'};
enum {
    SEC_ONNX = 1,
    SEC_PLAN = 2,
    SEC_SO = 3,
    SEC_SRC = 4,
    SEC_WEIGHTS = 5,
    MAX_SECTIONS = 2 + 3 * ARTIFACT_MAX_PLANS
};
static const char *const SEC_NAMES[] = {"",       "ONNX model", "plan",
                                        "shared object", "source", "weights"};
// Sections per plan: plan and shared object, and from format 6 on the source.
static int per_plan(uint32_t version) {
    return version >= 6 ? 3 : 2;
}
// Sections before the first plan's: the ONNX model, and from format 7 on the weights.
static uint32_t model_sections(uint32_t version) {
    return version >= 7 ? 2 : 1;
}
// The kind of section s in a file of this version.
static uint32_t sec_kind(uint32_t version, uint32_t s) {
    if (s == 0)
        return SEC_ONNX;
    if (s == 1 && version >= 7)
        return SEC_WEIGHTS;
    return SEC_PLAN + (s - model_sections(version)) % (uint32_t)per_plan(version);
}
// Each plan's strings are bounded (ARTIFACT_MAX_SHAPES + ARTIFACT_MAX_WIDE), so is the header.
#define HEADER_MAX (1024 * 1024)
#define SECTION_ALIGN 64
#define ARTIFACT_WEIGHTS_ALIGN 4096

uint64_t artifact_hash(const void *data, size_t n) {
    return plan_content_hash(data, n);
}

// The model hash from the ONNX section's hash and the weights section's (its checksum).
static uint64_t model_hash_of(uint64_t h, uint64_t w) {
    uint8_t both[16];
    for (int i = 0; i < 8; i++) {
        both[i] = (uint8_t)(h >> (8 * i));
        both[8 + i] = (uint8_t)(w >> (8 * i));
    }
    return artifact_hash(both, sizeof both);
}

uint64_t artifact_model_hash(const void *onnx, size_t onnx_size, const void *weights,
                             size_t weights_size) {
    uint64_t h = artifact_hash(onnx_size ? onnx : "", onnx_size);
    return weights_size ? model_hash_of(h, artifact_hash(weights, weights_size)) : h;
}

static void release_pages(const void *p, size_t n);

// ---- little-endian encoding ----

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct Out {
    uint8_t buf[HEADER_MAX];
    size_t n;
} Out;

static void o_bytes(Out *o, const void *d, size_t n) {
    ORCH_ASSERT(o->n + n <= sizeof o->buf); // bounded: strings are bounded by the header struct
    memcpy(o->buf + o->n, d, n);
    o->n += n;
}
static void o_u32(Out *o, uint32_t v) {
    uint8_t b[4];
    put_u32(b, v);
    o_bytes(o, b, 4);
}
static void o_u64(Out *o, uint64_t v) {
    uint8_t b[8];
    put_u64(b, v);
    o_bytes(o, b, 8);
}
static void o_str(Out *o, const char *s, size_t cap) {
    size_t n = strnlen(s, cap - 1);
    o_u32(o, (uint32_t)n);
    o_bytes(o, s, n);
}

static uint64_t align_sec(uint64_t n) {
    return (n + SECTION_ALIGN - 1) / SECTION_ALIGN * SECTION_ALIGN;
}

// The header for n_sec sections of the given sizes and checksums into o (plans: the per-plan
// fields); offsets receives where each section starts.
static void make_header(Out *o, const ArtifactHeader *h, const ArtifactPlan *plans, int n_plans,
                        int n_sec, const size_t *sizes, const uint64_t *sums, uint64_t *offsets) {
    o->n = 0;
    o_bytes(o, MAGIC, 8);
    o_u32(o, ARTIFACT_FORMAT_VERSION);
    o_u32(o, 0); // header bytes, patched below
    o_str(o, h->orch_version, sizeof h->orch_version);
    o_str(o, h->target, sizeof h->target);
    o_str(o, h->precision[0] ? h->precision : "fp32", sizeof h->precision);
    o_str(o, h->fingerprint, sizeof h->fingerprint);
    o_u64(o, h->model_hash);
    o_u32(o, h->compile_flags);
    o_u32(o, (uint32_t)h->threads);
    o_u32(o, (uint32_t)n_plans);
    for (int k = 0; k < n_plans; k++) {
        const ArtifactPlan *p = &plans[k];
        o_str(o, p->input_shapes, sizeof p->input_shapes);
        o_str(o, p->wide_tensors, sizeof p->wide_tensors);
        o_u32(o, p->load_flags);
        o_u32(o, (uint32_t)p->kernels);
        uint64_t pred;
        memcpy(&pred, &p->predicted_seconds, 8);
        o_u64(o, pred);
    }
    o_u32(o, (uint32_t)n_sec);
    size_t table = o->n;
    size_t header_bytes = table + (size_t)n_sec * 28 + 8;
    uint64_t at = align_sec(header_bytes);
    for (int s = 0; s < n_sec; s++) {
        if (sec_kind(ARTIFACT_FORMAT_VERSION, (uint32_t)s) == SEC_WEIGHTS && sizes[s])
            at = (at + ARTIFACT_WEIGHTS_ALIGN - 1) / ARTIFACT_WEIGHTS_ALIGN * ARTIFACT_WEIGHTS_ALIGN;
        offsets[s] = at;
        o_u32(o, sec_kind(ARTIFACT_FORMAT_VERSION, (uint32_t)s));
        o_u64(o, at);
        o_u64(o, sizes[s]);
        o_u64(o, sums[s]);
        at = align_sec(at + sizes[s]);
    }
    put_u32(o->buf + 12, (uint32_t)(o->n + 8));
    o_u64(o, artifact_hash(o->buf, o->n));
    ORCH_ASSERT(o->n == header_bytes);
}

static int write_all(FILE *f, const void *d, size_t n) {
    return n && fwrite(d, 1, n, f) != n;
}

int artifact_write(const char *path, const ArtifactHeader *h, const void *onnx, size_t onnx_size,
                   const void *plan, size_t plan_size, const void *so, size_t so_size, Err *e) {
    ArtifactPlan *p = xcalloc(1, sizeof *p);
    snprintf(p->input_shapes, sizeof p->input_shapes, "%s", h->input_shapes);
    snprintf(p->wide_tensors, sizeof p->wide_tensors, "%s", h->wide_tensors);
    p->load_flags = h->load_flags;
    p->kernels = h->kernels;
    p->predicted_seconds = h->predicted_seconds;
    p->plan = plan;
    p->plan_size = plan_size;
    p->so = so;
    p->so_size = so_size;
    int rc = artifact_write_plans(path, h, onnx, onnx_size, NULL, 0, p, 1, e);
    free(p);
    return rc;
}

int artifact_write_plans(const char *path, const ArtifactHeader *h, const void *onnx,
                         size_t onnx_size, const void *weights, size_t weights_size,
                         const ArtifactPlan *plans, int n_plans, Err *e) {
    ORCH_ASSERT(n_plans >= 1 && n_plans <= ARTIFACT_MAX_PLANS);
    int n_sec = 2 + 3 * n_plans;
    const void *data[MAX_SECTIONS] = {onnx, weights};
    size_t sizes[MAX_SECTIONS] = {onnx_size, weights_size};
    for (int k = 0; k < n_plans; k++) {
        data[2 + 3 * k] = plans[k].plan;
        sizes[2 + 3 * k] = plans[k].plan_size;
        data[3 + 3 * k] = plans[k].so;
        sizes[3 + 3 * k] = plans[k].so_size;
        data[4 + 3 * k] = plans[k].src;
        sizes[4 + 3 * k] = plans[k].src_size;
    }
    uint64_t sums[MAX_SECTIONS], offsets[MAX_SECTIONS];
    for (int s = 0; s < n_sec; s++)
        sums[s] = artifact_hash(sizes[s] ? data[s] : "", sizes[s]);
    // Written to a temporary file renamed over path: never through or over anything but a
    // regular file.
    // (The compile checked it before tuning, as a usage error; failing now is a runtime one.)
    if (file_check_output(path, NULL, 0, e)) {
        e->code = ST_RUNTIME;
        return ST_RUNTIME;
    }
    Out *o = xmalloc(sizeof *o);
    make_header(o, h, plans, n_plans, n_sec, sizes, sums, offsets);
    size_t plen = strlen(path);
    char *tmp = xmalloc(plen + 16);
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int rc = err_set(e, ST_RUNTIME, "%s: cannot create a temporary file next to it: %s", path,
                         strerror(errno));
        free(tmp);
        free(o);
        return rc;
    }
    fchmod(fd, 0644);
    FILE *f = fdopen(fd, "wb");
    static const uint8_t zeros[ARTIFACT_WEIGHTS_ALIGN]; // padding is shorter than an alignment
    bool bad = !f || write_all(f, o->buf, o->n);
    uint64_t at = o->n;
    for (int s = 0; s < n_sec && !bad; s++) {
        bad = write_all(f, zeros, (size_t)(offsets[s] - at)) || write_all(f, data[s], sizes[s]);
        at = offsets[s] + sizes[s];
    }
    bad = bad || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int saved = bad ? errno : 0;
    if (!f)
        close(fd);
    else if (fclose(f) != 0 && !bad) {
        bad = true;
        saved = errno;
    }
    int rc = ST_OK;
    if (bad)
        rc = err_set(e, ST_RUNTIME, "%s: cannot write the artefact: %s", path,
                     strerror(saved ? saved : EIO));
    else if (rename(tmp, path) != 0)
        rc = err_set(e, ST_RUNTIME, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (rc)
        unlink(tmp);
    free(tmp);
    free(o);
    return rc;
}

// ---- the weights section ----
//
// Layout (little-endian): tensors u32 | 0 u32 | payload offset u64 (from the section's start, a
// multiple of ARTIFACT_WEIGHTS_ALIGN) | per tensor: offset u64 (in the payload, a multiple of
// ONNX_WEIGHTS_ALIGN, ascending), length u64, checksum u64 (artifact_hash of its bytes), name
// (u32 length + bytes) | zeros to the payload | the payload (each tensor's bytes at its offset,
// zeros between). The index names the tensors so that damage is reported by tensor; the section
// checksum covers it all.

typedef struct WEntry {
    uint64_t offset, length, sum;
    char name[256]; // cut where longer: for messages only
} WEntry;

int artifact_weights_section(const uint8_t *payload, size_t payload_size,
                             const OnnxWeightRef *refs, int n, uint8_t **out, size_t *out_size) {
    size_t index = 16;
    for (int i = 0; i < n; i++)
        index += 28 + strlen(refs[i].name);
    size_t at = (index + ARTIFACT_WEIGHTS_ALIGN - 1) / ARTIFACT_WEIGHTS_ALIGN * ARTIFACT_WEIGHTS_ALIGN;
    uint8_t *b = calloc(1, at + payload_size);
    if (!b)
        return ST_RUNTIME;
    put_u32(b, (uint32_t)n);
    put_u64(b + 8, at);
    uint8_t *q = b + 16;
    for (int i = 0; i < n; i++) {
        size_t ln = strlen(refs[i].name);
        put_u64(q, refs[i].offset);
        put_u64(q + 8, refs[i].length);
        put_u64(q + 16, artifact_hash(payload + refs[i].offset, (size_t)refs[i].length));
        put_u32(q + 24, (uint32_t)ln);
        memcpy(q + 28, refs[i].name, ln);
        q += 28 + ln;
    }
    memcpy(b + at, payload, payload_size);
    *out = b;
    *out_size = at + payload_size;
    return ST_OK;
}

// Reads the index of a weights section of len bytes at sec, of which avail are in the file: the
// payload's offset and, one by one through next, the entries. A bad index is corruption.
typedef struct WIndex {
    const uint8_t *sec;
    uint64_t len, avail, payload, n, i, pos, end; // end: where the previous entry ended
} WIndex;

static bool windex_open(WIndex *w, const uint8_t *sec, uint64_t len, uint64_t avail) {
    memset(w, 0, sizeof *w);
    w->sec = sec;
    w->len = len;
    w->avail = avail;
    if (len < 16 || avail < 16)
        return false;
    w->n = get_u32(sec);
    w->payload = get_u64(sec + 8);
    w->pos = 16;
    return get_u32(sec + 4) == 0 && w->payload % ARTIFACT_WEIGHTS_ALIGN == 0 &&
           w->payload <= len && w->payload >= 16 && w->n <= (w->payload - 16) / 28;
}

// The next entry into *en; false at the end (w->i == w->n) or where the index is bad.
static bool windex_next(WIndex *w, WEntry *en) {
    if (w->i >= w->n || w->pos + 28 > w->payload || w->pos + 28 > w->avail)
        return false;
    const uint8_t *q = w->sec + w->pos;
    en->offset = get_u64(q);
    en->length = get_u64(q + 8);
    en->sum = get_u64(q + 16);
    uint32_t ln = get_u32(q + 24);
    if (ln > w->payload - w->pos - 28 || w->pos + 28 + ln > w->avail)
        return false;
    size_t keep = ORCH_MIN((size_t)ln, sizeof en->name - 1);
    memcpy(en->name, q + 28, keep);
    en->name[keep] = 0;
    for (size_t k = 0; k < keep; k++)
        if (en->name[k] < 0x20 || en->name[k] == 0x7f)
            en->name[k] = '?';
    uint64_t room = w->len - w->payload;
    if (en->offset % ONNX_WEIGHTS_ALIGN || en->offset < w->end || en->offset > room ||
        en->length > room - en->offset)
        return false;
    w->end = en->offset + en->length;
    w->pos += 28 + ln;
    w->i++;
    return true;
}

// Checks the index of a complete weights section; on success the payload's offset.
static bool weights_index_valid(const uint8_t *sec, uint64_t len, uint64_t *payload) {
    WIndex w;
    WEntry en;
    if (!windex_open(&w, sec, len, len))
        return false;
    while (windex_next(&w, &en))
        ;
    *payload = w.payload;
    return w.i == w.n;
}

// ---- reading ----

typedef struct In {
    const uint8_t *p;
    size_t n, pos;
    bool bad;
} In;

static const uint8_t *i_take(In *in, size_t n) {
    if (in->bad || n > in->n - in->pos) {
        in->bad = true;
        return NULL;
    }
    in->pos += n;
    return in->p + in->pos - n;
}
static uint32_t i_u32(In *in) {
    const uint8_t *q = i_take(in, 4);
    return q ? get_u32(q) : 0;
}
static uint64_t i_u64(In *in) {
    const uint8_t *q = i_take(in, 8);
    return q ? get_u64(q) : 0;
}
// A string into a fixed field: too long or holding a NUL is corruption.
static void i_str(In *in, char *dst, size_t cap) {
    uint32_t n = i_u32(in);
    const uint8_t *q = n < cap ? i_take(in, n) : NULL;
    if (!q || memchr(q, 0, n)) {
        in->bad = true;
        dst[0] = 0;
        return;
    }
    memcpy(dst, q, n);
    dst[n] = 0;
}

// Compile flags that orch compile can write: known bits, one layout at most, a layout only under
// half storage and never beside channels-last layouts it refused.
static bool compile_flags_valid(uint32_t c, uint32_t load) {
    bool nchw = c & ARTIFACT_COMPILE_LAYOUT_NCHW, nhwc = c & ARTIFACT_COMPILE_LAYOUT_NHWC;
    bool half = load & (ARTIFACT_STORE_F16 | ARTIFACT_STORE_BF16);
    return !(c & ~(uint32_t)ARTIFACT_COMPILE_KNOWN_FLAGS) && !(nchw && nhwc) &&
           (half || !(nchw || nhwc)) && !(nchw && (load & ARTIFACT_LAYOUT_NHWC));
}

void artifact_compile_flags_text(uint32_t c, char *buf, size_t n) {
    static const struct {
        uint32_t bit;
        const char *option;
    } opts[] = {
        {ARTIFACT_COMPILE_NO_MLP_CHAINS, "--no-mlp-chains"},
        {ARTIFACT_COMPILE_NO_ATTENTION, "--no-attention"},
        {ARTIFACT_COMPILE_LAYOUT_NCHW, "--layout nchw"},
        {ARTIFACT_COMPILE_LAYOUT_NHWC, "--layout nhwc"},
        {ARTIFACT_COMPILE_STRICT, "--strict"},
    };
    size_t used = 0;
    if (n)
        buf[0] = 0;
    for (size_t i = 0; i < ORCH_COUNT(opts) && n; i++)
        if (c & opts[i].bit) {
            int w = snprintf(buf + used, n - used, "%s%s", used ? " " : "", opts[i].option);
            used = w > 0 && (size_t)w < n - used ? used + (size_t)w : n - 1;
        }
}

// The message for a weights section whose checksum does not match: the first tensor whose own
// checksum does not, else the index.
static int weights_damage(const char *path, const uint8_t *sec, uint64_t len, Err *e) {
    WIndex w;
    WEntry en;
    bool open = windex_open(&w, sec, len, len);
    while (open && windex_next(&w, &en))
        if (artifact_hash(sec + w.payload + en.offset, (size_t)en.length) != en.sum)
            return err_set(e, ST_INVALID,
                           "%s: corrupted: the weights section's checksum does not match (the "
                           "bytes of tensor '%s' are damaged)",
                           path, en.name);
    return err_set(e, ST_INVALID,
                   "%s: corrupted: the weights section's checksum does not match (its index is "
                   "damaged)",
                   path);
}

// Parses and validates the bytes in a (a->data, a->size, a->path set).
static int parse(ArtifactContents *a, Err *e) {
    const uint8_t *d = a->data;
    size_t size = a->size;
    const char *path = a->path;
    if (size == 0)
        return err_set(e, ST_INVALID,
                       "%s: empty file, not an orch artefact (make one with orch "
                       "compile MODEL.onnx -t cpu -o MODEL.orch)",
                       path);
    size_t m = ORCH_MIN(size, sizeof MAGIC);
    if (memcmp(d, MAGIC, m) != 0)
        return err_set(e, ST_INVALID,
                       "%s: not an orch artefact (it does not start with orch's "
                       "magic bytes)%s",
                       path,
                       d[0] == 0x08 ? "; it may be an ONNX model: run it directly, or compile it "
                                      "with orch compile"
                                    : "");
    if (size < 16)
        return err_set(e, ST_INVALID, "%s: truncated: %zu bytes of at least 16 expected", path,
                       size);
    uint32_t version = get_u32(d + 8), header_bytes = get_u32(d + 12);
    if (version < ARTIFACT_OLDEST_VERSION || version > ARTIFACT_FORMAT_VERSION)
        return err_set(e, ST_INVALID,
                       "%s: format version %u, this orch reads %d to %d (it was written by %s "
                       "orch; recompile with orch compile)",
                       path, version, ARTIFACT_OLDEST_VERSION, ARTIFACT_FORMAT_VERSION,
                       version > ARTIFACT_FORMAT_VERSION ? "a newer" : "an older");
    if (header_bytes < 16 + 8 || header_bytes > HEADER_MAX)
        return err_set(e, ST_INVALID, "%s: corrupted: a header of %u bytes is impossible", path,
                       header_bytes);
    if (size < header_bytes)
        return err_set(e, ST_INVALID, "%s: truncated: %zu bytes of at least %u expected", path,
                       size, header_bytes);
    if (artifact_hash(d, header_bytes - 8) != get_u64(d + header_bytes - 8))
        return err_set(e, ST_INVALID, "%s: corrupted: the header's checksum does not match", path);
    In in = {d, header_bytes - 8, 16, false};
    ArtifactHeader *h = &a->h;
    memset(h, 0, sizeof *h);
    h->format_version = version;
    i_str(&in, h->orch_version, sizeof h->orch_version);
    i_str(&in, h->target, sizeof h->target);
    if (version >= 2)
        i_str(&in, h->precision, sizeof h->precision);
    else
        snprintf(h->precision, sizeof h->precision, "fp32"); // before precisions existed
    i_str(&in, h->fingerprint, sizeof h->fingerprint);
    uint32_t n_plans = 1;
    ArtifactPlan *plans = NULL;
    if (version >= 5) {
        h->model_hash = i_u64(&in);
        h->compile_flags = i_u32(&in);
        h->threads = (int)i_u32(&in);
        n_plans = i_u32(&in);
        if (in.bad || n_plans < 1 || n_plans > ARTIFACT_MAX_PLANS)
            return err_set(e, ST_INVALID, "%s: corrupted: the header's fields do not parse", path);
        plans = a->plans = xcalloc(n_plans, sizeof *plans);
        for (uint32_t k = 0; k < n_plans; k++) {
            ArtifactPlan *pl = &plans[k];
            i_str(&in, pl->input_shapes, sizeof pl->input_shapes);
            i_str(&in, pl->wide_tensors, sizeof pl->wide_tensors);
            pl->load_flags = i_u32(&in);
            pl->kernels = (int)i_u32(&in);
            uint64_t pred = i_u64(&in);
            memcpy(&pl->predicted_seconds, &pred, 8);
        }
    } else {
        plans = a->plans = xcalloc(1, sizeof *plans);
        i_str(&in, plans->input_shapes, sizeof plans->input_shapes);
        if (version >= 3)
            i_str(&in, plans->wide_tensors, sizeof plans->wide_tensors);
        h->model_hash = i_u64(&in);
        plans->load_flags = i_u32(&in);
        if (version >= 4)
            h->compile_flags = i_u32(&in);
        h->threads = (int)i_u32(&in);
        plans->kernels = (int)i_u32(&in);
        uint64_t pred = i_u64(&in);
        memcpy(&plans->predicted_seconds, &pred, 8);
    }
    a->n_plans = (int)n_plans;
    uint32_t n_sec = i_u32(&in), pp = (uint32_t)per_plan(version), mb = model_sections(version);
    if (in.bad || n_sec != mb + pp * n_plans)
        return err_set(e, ST_INVALID, "%s: corrupted: the header's fields do not parse", path);
    const uint8_t *sec[MAX_SECTIONS];
    uint64_t off[MAX_SECTIONS], len[MAX_SECTIONS], sum[MAX_SECTIONS], end = header_bytes;
    for (uint32_t s = 0; s < n_sec; s++) {
        uint32_t kind = i_u32(&in);
        off[s] = i_u64(&in);
        len[s] = i_u64(&in);
        sum[s] = i_u64(&in);
        uint32_t want = sec_kind(version, s);
        if (in.bad || kind != want || off[s] < end || off[s] % SECTION_ALIGN ||
            (want == SEC_WEIGHTS && len[s] && off[s] % ARTIFACT_WEIGHTS_ALIGN) ||
            len[s] > UINT64_MAX / 2 || off[s] > UINT64_MAX / 2)
            return err_set(e, ST_INVALID, "%s: corrupted: the section table is inconsistent", path);
        end = off[s] + len[s];
    }
    bool fields_ok = in.pos == in.n && compile_flags_valid(h->compile_flags, plans[0].load_flags) &&
                     h->threads >= 0;
    for (uint32_t k = 0; k < n_plans && fields_ok; k++) {
        const ArtifactPlan *pl = &plans[k];
        uint32_t lf = pl->load_flags;
        bool half = lf & (ARTIFACT_STORE_F16 | ARTIFACT_STORE_BF16);
        fields_ok = !(lf & ~(uint32_t)ARTIFACT_KNOWN_FLAGS) &&
                    !(lf & ARTIFACT_STORE_F16 && lf & ARTIFACT_STORE_BF16) &&
                    !((lf & ARTIFACT_LAYOUT_NHWC) && !half) && !(pl->wide_tensors[0] && !half) &&
                    compile_flags_valid(h->compile_flags, lf) && pl->kernels >= 0 &&
                    (lf & (ARTIFACT_ATTENTION_REWRITE | ARTIFACT_NO_CLEANUP | ARTIFACT_STORE_F16 |
                           ARTIFACT_STORE_BF16)) ==
                        (plans[0].load_flags & (ARTIFACT_ATTENTION_REWRITE | ARTIFACT_NO_CLEANUP |
                                                ARTIFACT_STORE_F16 | ARTIFACT_STORE_BF16));
    }
    if (!fields_ok)
        return err_set(e, ST_INVALID, "%s: corrupted: the header's fields do not parse", path);
    // Dispatch is by shape: two plans for one shape set would make it ambiguous.
    for (uint32_t k = 0; k < n_plans; k++)
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(plans[k].input_shapes, plans[j].input_shapes) == 0)
                return err_set(e, ST_INVALID,
                               "%s: corrupted: plans %u and %u are for the same shapes (%s)", path,
                               j + 1, k + 1, plans[k].input_shapes);
    static const char *const precs[] = {"fp32", "tf32", "fp16", "bf16"};
    bool known = false;
    for (size_t i = 0; i < ORCH_COUNT(precs); i++)
        known |= strcmp(h->precision, precs[i]) == 0;
    if (!known)
        return err_set(e, ST_INVALID,
                       "%s: precision '%s', which this orch does not know (written by a newer "
                       "orch? recompile with orch compile)",
                       path, h->precision);
    if (size < end) {
        // Cut in the weights: name the first tensor whose bytes are missing.
        WIndex w;
        WEntry en;
        if (mb == 2 && len[1] && size > off[1] &&
            windex_open(&w, d + off[1], len[1], (uint64_t)size - off[1]))
            while (windex_next(&w, &en))
                if (off[1] + w.payload + en.offset + en.length > size)
                    return err_set(e, ST_INVALID,
                                   "%s: truncated: %zu bytes of %llu expected; the weights "
                                   "section is cut in tensor '%s'",
                                   path, size, (unsigned long long)end, en.name);
        return err_set(e, ST_INVALID, "%s: truncated: %zu bytes of %llu expected", path, size,
                       (unsigned long long)end);
    }
    if (size > end)
        return err_set(e, ST_INVALID, "%s: corrupted: %llu unexpected bytes after the last section",
                       path, (unsigned long long)(size - end));
    for (uint32_t s = 0; s < n_sec; s++) {
        sec[s] = d + off[s];
        // The weights of a mapped file are given back as they are checked, a chunk at a time:
        // the check never holds them all, and each is read from the file again by its one reader
        // (a session's copy, a kernel reading it in place), if any.
        bool give_back = a->mapped && sec_kind(version, s) == SEC_WEIGHTS;
        uint64_t got = plan_hash64_chunked(len[s] ? sec[s] : (const uint8_t *)"", (size_t)len[s],
                                           PLAN_CONTENT_SEED, give_back ? release_pages : NULL);
        if (got != sum[s]) {
            if (sec_kind(version, s) == SEC_WEIGHTS)
                return weights_damage(path, sec[s], len[s], e);
            if (n_plans > 1 && s >= mb)
                return err_set(e, ST_INVALID,
                               "%s: corrupted: plan %u's %s section's checksum does not match",
                               path, (s - mb) / pp + 1, SEC_NAMES[sec_kind(version, s)]);
            return err_set(e, ST_INVALID, "%s: corrupted: the %s section's checksum does not match",
                           path, SEC_NAMES[sec_kind(version, s)]);
        }
    }
    uint64_t payload = 0;
    if (mb == 2 && len[1] && !weights_index_valid(sec[1], len[1], &payload))
        return err_set(e, ST_INVALID, "%s: corrupted: the weights section's index is inconsistent",
                       path);
    // The weights section's hash is its checksum, just checked: not read again.
    uint64_t model = artifact_hash(len[0] ? sec[0] : (const uint8_t *)"", (size_t)len[0]);
    if (mb == 2 && len[1])
        model = model_hash_of(model, sum[1]);
    if (model != h->model_hash)
        return err_set(e, ST_INVALID,
                       "%s: corrupted: the ONNX model section does not match the header's model "
                       "hash",
                       path);
    a->onnx = sec[0];
    a->onnx_size = (size_t)len[0];
    if (mb == 2 && len[1]) {
        a->weights_section = sec[1];
        a->weights_section_size = (size_t)len[1];
        a->weights = sec[1] + payload;
        a->weights_size = (size_t)(len[1] - payload);
    }
    for (uint32_t k = 0; k < n_plans; k++) {
        plans[k].plan = sec[mb + pp * k];
        plans[k].plan_size = (size_t)len[mb + pp * k];
        plans[k].so = sec[mb + 1 + pp * k];
        plans[k].so_size = (size_t)len[mb + 1 + pp * k];
        if (pp == 3) {
            plans[k].src = sec[mb + 2 + pp * k];
            plans[k].src_size = (size_t)len[mb + 2 + pp * k];
        }
    }
    // The header's per-plan fields and the sections: the first plan's.
    snprintf(h->input_shapes, sizeof h->input_shapes, "%s", plans[0].input_shapes);
    snprintf(h->wide_tensors, sizeof h->wide_tensors, "%s", plans[0].wide_tensors);
    h->load_flags = plans[0].load_flags;
    h->kernels = plans[0].kernels;
    h->predicted_seconds = plans[0].predicted_seconds;
    a->plan = plans[0].plan;
    a->plan_size = plans[0].plan_size;
    a->so = plans[0].so;
    a->so_size = plans[0].so_size;
    a->src = plans[0].src;
    a->src_size = plans[0].src_size;
    return ST_OK;
}

void artifact_plan_view(const ArtifactContents *a, int k, ArtifactContents *view) {
    ORCH_ASSERT(k >= 0 && k < a->n_plans);
    const ArtifactPlan *p = &a->plans[k];
    *view = *a; // shares a's data and sections, its mapping included
    view->plans = NULL;
    view->n_plans = 1;
    snprintf(view->h.input_shapes, sizeof view->h.input_shapes, "%s", p->input_shapes);
    snprintf(view->h.wide_tensors, sizeof view->h.wide_tensors, "%s", p->wide_tensors);
    view->h.load_flags = p->load_flags;
    view->h.kernels = p->kernels;
    view->h.predicted_seconds = p->predicted_seconds;
    view->plan = p->plan;
    view->plan_size = p->plan_size;
    view->so = p->so;
    view->so_size = p->so_size;
    view->src = p->src;
    view->src_size = p->src_size;
}

// Files from this size on are mapped rather than read (artefacts with weights); smaller ones,
// and anything that is not a regular file, go through file_read_all and its messages.
static off_t map_min_bytes = (off_t)1 << 20;

void artifact_set_map_threshold(int64_t bytes) {
    map_min_bytes = bytes > 0 ? (off_t)bytes : (off_t)1 << 20;
}

// A private, writable (copy-on-write) mapping of the regular file at path of at least
// map_min_bytes; NULL where it is not one or cannot be mapped (the caller reads it instead).
static uint8_t *map_file(const char *path, size_t *size) {
    Err ignored = {0};
    FILE *f = file_open_regular(path, &ignored);
    if (!f)
        return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= map_min_bytes &&
        (uint64_t)st.st_size <= SIZE_MAX)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), 0);
    fclose(f);
    if (p == MAP_FAILED)
        return NULL;
    *size = (size_t)st.st_size;
    return p;
}

// The file's bytes, shared by the contents and the sessions that use its weights in place.
struct ArtifactFile {
    uint8_t *data;
    size_t size;
    bool mapped;
    atomic_int refs;
};

static ArtifactFile *file_new(uint8_t *data, size_t size, bool mapped) {
    ArtifactFile *f = xcalloc(1, sizeof *f);
    f->data = data;
    f->size = size;
    f->mapped = mapped;
    atomic_init(&f->refs, 1);
    return f;
}

ArtifactFile *artifact_file_retain(const ArtifactContents *a) {
    if (!a || !a->file)
        return NULL;
    atomic_fetch_add(&a->file->refs, 1);
    return a->file;
}

void artifact_file_release(ArtifactFile *f) {
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    if (f->mapped)
        munmap(f->data, f->size);
    else
        free(f->data);
    free(f);
}

// The whole pages of [p, p + n) given back to the system (a mapping of the file only: they are
// read from the file again if touched).
static void release_pages(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t mask = (uintptr_t)(page > 0 ? page : 4096) - 1;
    uintptr_t lo = ((uintptr_t)p + mask) & ~mask;
    uintptr_t hi = ((uintptr_t)p + n) & ~mask;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void artifact_release_weights(const ArtifactContents *a, const void *p, size_t n) {
    const uint8_t *q = p;
    if (!a || !a->mapped || !a->weights || !q || q < a->weights ||
        n > (size_t)(a->weights + a->weights_size - q))
        return;
    release_pages(q, n);
}

int artifact_weights_hashes(const ArtifactContents *a, PlanKnownHash **out) {
    *out = NULL;
    WIndex w;
    WEntry en;
    if (!a || !a->weights_section ||
        !windex_open(&w, a->weights_section, a->weights_section_size, a->weights_section_size))
        return 0;
    PlanKnownHash *k = xmalloc(sizeof *k * ((size_t)w.n + 1));
    int n = 0;
    while (windex_next(&w, &en)) // ascending offsets: sorted by address
        if (en.length)
            k[n++] = (PlanKnownHash){a->weights + en.offset, en.length, en.sum};
    *out = k;
    return n;
}

bool artifact_in_weights(const ArtifactContents *a, const void *p) {
    const uint8_t *q = p;
    return a && a->weights && q && q >= a->weights && q < a->weights + a->weights_size;
}

int artifact_read(const char *path, ArtifactContents *out, Err *e) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return err_set(e, ST_INVALID, "%s: is a directory, not an orch artefact", path);
    uint8_t *data = NULL;
    size_t size = 0;
    int rc = ST_OK;
    if ((data = map_file(path, &size)))
        out->mapped = true;
    else if ((rc = file_read_all(path, (int64_t)1 << 40, &data, &size, e)))
        return rc;
    out->path = xstrdup(path);
    out->file = file_new(data, size, out->mapped);
    out->data = data;
    out->size = size;
    if ((rc = parse(out, e)))
        artifact_contents_free(out);
    else if (out->mapped && out->weights_section) {
        // Nothing writes the weights, which sessions use in place: a write would be a bug that
        // a later release of the pages would silently undo; read-only makes it fault instead.
        // (The checksum gave the pages back as it went: parse.)
        mprotect((void *)out->weights_section, out->weights_section_size, PROT_READ);
    }
    return rc;
}

bool artifact_probe(const char *path) {
    Err ignored = {0}; // a file that cannot be opened is reported by the reader that is chosen
    FILE *f = file_open_regular(path, &ignored);
    if (!f)
        return false;
    uint8_t head[sizeof MAGIC];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    size_t len = strlen(path);
    bool named = len >= 5 && strcmp(path + len - 5, ".orch") == 0;
    return n == sizeof head ? memcmp(head, MAGIC, n) == 0 : named && memcmp(head, MAGIC, n) == 0;
}

int artifact_read_memory(const void *data, size_t size, const char *name, ArtifactContents *out,
                         Err *e) {
    memset(out, 0, sizeof *out);
    out->path = xstrdup(name ? name : "<memory>");
    out->data = malloc(size ? size : 1);
    if (!out->data) {
        int rc = err_set(e, ST_RUNTIME, "%s: out of memory for %zu bytes", out->path, size);
        artifact_contents_free(out);
        return rc;
    }
    if (size)
        memcpy(out->data, data, size);
    out->file = file_new(out->data, size, false);
    out->size = size;
    int rc = parse(out, e);
    if (rc)
        artifact_contents_free(out);
    return rc;
}

void artifact_release_model(const ArtifactContents *a) {
    if (!a || !a->mapped || !a->onnx || a->onnx_size == 0)
        return;
    release_pages(a->onnx, a->onnx_size);
}

void artifact_contents_free(ArtifactContents *a) {
    if (!a)
        return;
    free(a->path);
    if (a->file)
        artifact_file_release(a->file);
    else if (a->data) // contents made without artifact_read (a test's)
        free(a->data);
    free(a->plans);
    memset(a, 0, sizeof *a);
}
