// The protobuf-c run-time calls that the generated ONNX parser (onnx.pb-c.c) makes: unpack,
// free_unpacked, get_packed_size, pack, pack_to_buffer, driven by the generated descriptors.
// Needs only the types of <protobuf-c/protobuf-c.h>: nothing links libprotobuf-c, whose Debian
// archive cannot go into a shared library. Gives protobuf-c's results and bytes, except that
// messages nest at most PB_MAX_DEPTH levels deep, so hostile input cannot exhaust the stack.
//
// Unpacking reads each message twice. The first pass checks the framing (every varint at most
// ten bytes, every length inside its parent, wire types 0, 1, 2 and 5 only: protobuf-c refuses
// groups too), checks each known field's wire type against its type and counts the values of
// repeated fields, so each array is allocated once at its size; the second pass stores the
// values. A repeated scalar field takes both the packed and the unpacked encoding. A non-repeated
// field seen twice keeps the last value, except a sub-message, which is parsed into the one
// already there: protobuf's merge (protobuf-c merges the same way, but replaces a oneof's
// sub-message instead, drops the unknown fields of all but the last occurrence, and takes only 0
// and 1 as packed bools). Unknown fields are kept and packed again after the known ones, as
// protobuf-c does. Any failure frees what was allocated and returns NULL.
#include "../base/common.h"

#include <protobuf-c/protobuf-c.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Messages nest at most this many levels below the outermost one (level 0), the default of
// Google's protobuf parsers, so every model ONNX Runtime and the onnx package read is read here.
// ONNX spends three levels per subgraph (attribute → graph → node) and two per nested type
// (TypeProto → Sequence): the deepest of the test suites' 2865 models (an If with optional types)
// nests 13; a level takes about 0.5 KB of stack (1.1 KB under ASan, -O0), far from 8 MB.
#define PB_MAX_DEPTH 100

// Messages of up to this many fields count their repeated values in a stack array.
#define PB_STACK_FIELDS 32

#define MEMBER(m, off) ((void *)((char *)(m) + (off)))
#define CMEMBER(m, off) ((const void *)((const char *)(m) + (off)))

enum { WIRE_VARINT = 0, WIRE_64BIT = 1, WIRE_LEN = 2, WIRE_32BIT = 5 };

static void *pb_alloc(ProtobufCAllocator *a, size_t n) {
    return a ? a->alloc(a->allocator_data, n) : malloc(n);
}

static void pb_free(ProtobufCAllocator *a, void *p) {
    if (!p)
        return;
    if (a)
        a->free(a->allocator_data, p);
    else
        free(p);
}

// The size of one element of a repeated field's array (and of a non-repeated member).
static size_t elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4; // the 32-bit integers, float and enum
    }
}

// The wire type a field of type t is written with (unpacked).
static int wire_of(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return WIRE_32BIT;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return WIRE_64BIT;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return WIRE_LEN;
    default: return WIRE_VARINT;
    }
}

// The field with number id, by binary search (descriptors list fields by number), or NULL.
static const ProtobufCFieldDescriptor *field_by_id(const ProtobufCMessageDescriptor *d,
                                                   uint32_t id) {
    unsigned lo = 0, hi = d->n_fields;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (d->fields[mid].id == id)
            return &d->fields[mid];
        if (d->fields[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

// ---- unpacking ----

// Reads a varint of at most ten bytes; bits past the 64th are dropped, as protobuf-c does.
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    const uint8_t *q = *p;
    for (int i = 0; i < 10 && q < end; i++) {
        uint8_t b = *q++;
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            *p = q;
            return true;
        }
    }
    return false; // truncated, or over ten bytes
}

static uint64_t read_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

// One field as it lies on the wire.
typedef struct {
    uint32_t id;
    int wire;
    const uint8_t *after_tag; // where the bytes kept for an unknown field start
    const uint8_t *val;       // the varint, the fixed bytes, or a length-delimited payload
    size_t len;
} WireField;

// Reads the field at *p (before end) and moves past it; false when it is malformed.
static bool next_field(const uint8_t **p, const uint8_t *end, WireField *w) {
    uint64_t key, n;
    if (!read_varint(p, end, &key) || key >> 3 == 0 || key > UINT32_MAX)
        return false;
    w->id = (uint32_t)(key >> 3);
    w->wire = (int)(key & 7);
    w->after_tag = w->val = *p;
    switch (w->wire) {
    case WIRE_VARINT:
        if (!read_varint(p, end, &n))
            return false;
        w->len = (size_t)(*p - w->val);
        return true;
    case WIRE_64BIT:
    case WIRE_32BIT:
        w->len = w->wire == WIRE_64BIT ? 8 : 4;
        if ((size_t)(end - *p) < w->len)
            return false;
        *p += w->len;
        return true;
    case WIRE_LEN:
        if (!read_varint(p, end, &n) || n > (uint64_t)(end - *p))
            return false;
        w->val = *p;
        w->len = (size_t)n;
        *p += n;
        return true;
    default: return false; // groups (3, 4) and the unassigned 6 and 7
    }
}

// The number of values in a packed payload of type t, or false when its length cannot hold
// whole values. Varints are counted by their last bytes; the second pass checks each.
static bool packed_count(ProtobufCType t, const uint8_t *p, size_t len, size_t *n) {
    switch (wire_of(t)) {
    case WIRE_32BIT: *n = len / 4; return len % 4 == 0;
    case WIRE_64BIT: *n = len / 8; return len % 8 == 0;
    default: {
        size_t c = 0;
        for (size_t i = 0; i < len; i++)
            c += !(p[i] & 0x80);
        *n = c;
        return len == 0 || !(p[len - 1] & 0x80);
    }
    }
}

// Reads one scalar of type t written with the given wire type into dst.
static bool read_scalar(ProtobufCType t, int wire, const uint8_t **p, const uint8_t *end,
                        void *dst) {
    if (wire == WIRE_32BIT || wire == WIRE_64BIT) {
        size_t n = wire == WIRE_32BIT ? 4 : 8;
        if ((size_t)(end - *p) < n)
            return false;
        uint64_t v = read_le(*p, (int)n);
        *p += n;
        if (n == 4) {
            uint32_t u = (uint32_t)v;
            memcpy(dst, &u, 4);
        } else {
            memcpy(dst, &v, 8);
        }
        return true;
    }
    uint64_t v;
    if (!read_varint(p, end, &v))
        return false;
    switch (t) {
    case PROTOBUF_C_TYPE_SINT32: {
        uint32_t u = (uint32_t)v;
        u = (u >> 1) ^ (0u - (u & 1));
        memcpy(dst, &u, 4);
        return true;
    }
    case PROTOBUF_C_TYPE_SINT64:
        v = (v >> 1) ^ (0 - (v & 1));
        memcpy(dst, &v, 8);
        return true;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64: memcpy(dst, &v, 8); return true;
    case PROTOBUF_C_TYPE_BOOL: {
        protobuf_c_boolean b = v != 0;
        memcpy(dst, &b, sizeof b);
        return true;
    }
    default: { // int32 (sign-extended on the wire), uint32, enum: the low 32 bits
        uint32_t u = (uint32_t)v;
        memcpy(dst, &u, 4);
        return true;
    }
    }
}

static void free_message(ProtobufCMessage *m, ProtobufCAllocator *a, int depth);
static bool parse_into(ProtobufCMessage *m, const uint8_t *data, size_t len, ProtobufCAllocator *a,
                       int depth);

static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d, ProtobufCAllocator *a) {
    ProtobufCMessage *m = pb_alloc(a, d->sizeof_message);
    if (m)
        d->message_init(m); // the descriptor and proto2 defaults
    return m;
}

// Frees what the value of f at v owns (an element of a repeated field, or a member that is not
// its field's static default); depth is the level of the message holding it.
static void free_value(const ProtobufCFieldDescriptor *f, void *v, ProtobufCAllocator *a, int depth,
                       bool may_be_default) {
    const void *def = may_be_default ? f->default_value : NULL;
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        char *s = *(char **)v;
        if (s != def)
            pb_free(a, s);
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        uint8_t *b = ((ProtobufCBinaryData *)v)->data;
        if (!def || b != ((const ProtobufCBinaryData *)def)->data)
            pb_free(a, b);
    } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        ProtobufCMessage *sub = *(ProtobufCMessage **)v;
        if (sub != def)
            free_message(sub, a, depth + 1);
    }
}

// Stores the value of w into the member or array element at dst of a message at level depth.
// `old` says whether dst holds a value to replace (or, for a sub-message, to merge into);
// otherwise dst is treated as empty. On failure dst still holds something free_value accepts.
static bool set_value(const ProtobufCFieldDescriptor *f, const WireField *w, void *dst, bool old,
                      ProtobufCAllocator *a, int depth) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        char *s = pb_alloc(a, w->len + 1);
        if (!s)
            return false;
        if (w->len)
            memcpy(s, w->val, w->len);
        s[w->len] = 0;
        if (old)
            free_value(f, dst, a, depth, true);
        *(char **)dst = s;
        return true;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        uint8_t *b = NULL; // protobuf-c leaves empty bytes without a buffer
        if (w->len && !(b = pb_alloc(a, w->len)))
            return false;
        if (w->len)
            memcpy(b, w->val, w->len);
        if (old)
            free_value(f, dst, a, depth, true);
        ((ProtobufCBinaryData *)dst)->data = b;
        ((ProtobufCBinaryData *)dst)->len = w->len;
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage **pm = dst;
        if (old && *pm && *pm != f->default_value)
            return parse_into(*pm, w->val, w->len, a, depth + 1);
        if (depth >= PB_MAX_DEPTH)
            return false;
        ProtobufCMessage *sub = new_message(f->descriptor, a);
        if (!sub)
            return false;
        if (!parse_into(sub, w->val, w->len, a, depth + 1)) {
            free_message(sub, a, depth + 1);
            return false;
        }
        *pm = sub;
        return true;
    }
    default: {
        const uint8_t *p = w->val;
        return read_scalar(f->type, w->wire, &p, w->val + w->len, dst);
    }
    }
}

// Stores field w of a message (pass two); its framing and wire type were checked in pass one
// and its array has room.
static bool set_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, const WireField *w,
                      ProtobufCAllocator *a, int depth) {
    void *member = MEMBER(m, f->offset);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t *n = MEMBER(m, f->quantifier_offset);
        char *arr = *(char **)member;
        size_t es = elem_size(f->type);
        if (w->wire == WIRE_LEN && wire_of(f->type) != WIRE_LEN) { // packed
            const uint8_t *p = w->val, *end = w->val + w->len;
            while (p < end) {
                if (!read_scalar(f->type, wire_of(f->type), &p, end, arr + *n * es))
                    return false;
                ++*n;
            }
            return true;
        }
        memset(arr + *n * es, 0, es);
        if (!set_value(f, w, arr + *n * es, false, a, depth))
            return false;
        ++*n;
        return true;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = MEMBER(m, f->quantifier_offset);
        bool same = *which == f->id;
        if (!same && *which) { // another member of the oneof gives way
            const ProtobufCFieldDescriptor *prev = field_by_id(m->descriptor, *which);
            if (prev) {
                free_value(prev, member, a, depth, true);
                memset(member, 0, elem_size(prev->type));
            }
            *which = 0;
        }
        if (!set_value(f, w, member, same, a, depth))
            return false;
        *which = f->id;
        return true;
    }
    if (!set_value(f, w, member, true, a, depth))
        return false;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
        *(protobuf_c_boolean *)MEMBER(m, f->quantifier_offset) = 1;
    return true;
}

// Makes room for `more` elements after the n of the array at *arr.
static bool grow_array(void **arr, size_t n, size_t more, size_t es, ProtobufCAllocator *a) {
    if (more > SIZE_MAX / es - n)
        return false;
    void *grown = pb_alloc(a, (n + more) * es);
    if (!grown)
        return false;
    if (n)
        memcpy(grown, *arr, n * es);
    pb_free(a, *arr);
    *arr = grown;
    return true;
}

// Keeps an unknown field (the bytes after its tag up to `end`) in m's list, which has room.
static bool keep_unknown(ProtobufCMessage *m, const WireField *w, const uint8_t *end,
                         ProtobufCAllocator *a) {
    size_t len = (size_t)(end - w->after_tag);
    uint8_t *copy = pb_alloc(a, len); // len >= 1: every value has a byte
    if (!copy)
        return false;
    memcpy(copy, w->after_tag, len);
    ProtobufCMessageUnknownField *u = &m->unknown_fields[m->n_unknown_fields++];
    u->tag = w->id;
    u->wire_type = (ProtobufCWireType)w->wire;
    u->len = len;
    u->data = copy;
    return true;
}

// Pass one: the framing and the wire types checked, counts[i] the number of values of field i
// (0 or more), *n_unknown the number of unknown fields.
static bool scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                 size_t *counts, size_t *n_unknown) {
    WireField w;
    while (p < end) {
        if (!next_field(&p, end, &w))
            return false;
        const ProtobufCFieldDescriptor *f = field_by_id(d, w.id);
        size_t n = 1;
        if (!f)
            ++*n_unknown;
        else if (f->label == PROTOBUF_C_LABEL_REPEATED && w.wire == WIRE_LEN &&
                 wire_of(f->type) != WIRE_LEN) {
            if (!packed_count(f->type, w.val, w.len, &n))
                return false;
        } else if (w.wire != wire_of(f->type)) {
            return false;
        }
        if (f)
            counts[f - d->fields] += n;
    }
    return true;
}

// Parses len bytes at data into m, a message at nesting level depth: fields already in m are
// overwritten, appended to or merged into as a repeated occurrence of m would be.
static bool parse_into(ProtobufCMessage *m, const uint8_t *data, size_t len, ProtobufCAllocator *a,
                       int depth) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const uint8_t *end = len ? data + len : data; // data may be NULL when len is 0
    size_t stack_counts[PB_STACK_FIELDS];
    size_t *counts = stack_counts;
    if (d->n_fields > PB_STACK_FIELDS && !(counts = pb_alloc(a, d->n_fields * sizeof *counts)))
        return false;
    memset(counts, 0, d->n_fields * sizeof *counts);
    size_t n_unknown = 0;
    bool ok = scan(d, data, end, counts, &n_unknown);
    for (unsigned i = 0; ok && i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REQUIRED && !counts[i] && !f->default_value)
            ok = false; // protobuf-c's rule: every occurrence of a message has its required fields
        else if (f->label == PROTOBUF_C_LABEL_REPEATED && counts[i])
            ok = grow_array(MEMBER(m, f->offset), *(size_t *)MEMBER(m, f->quantifier_offset),
                            counts[i], elem_size(f->type), a);
    }
    if (ok && n_unknown) {
        void *arr = m->unknown_fields;
        ok = n_unknown <= UINT_MAX - m->n_unknown_fields &&
             grow_array(&arr, m->n_unknown_fields, n_unknown, sizeof *m->unknown_fields, a);
        if (ok)
            m->unknown_fields = arr;
    }
    if (counts != stack_counts)
        pb_free(a, counts);
    WireField w;
    for (const uint8_t *p = data; ok && p < end;) {
        next_field(&p, end, &w); // checked by scan
        const ProtobufCFieldDescriptor *f = field_by_id(d, w.id);
        ok = f ? set_field(m, f, &w, a, depth) : keep_unknown(m, &w, p, a);
    }
    return ok;
}

ProtobufCMessage *protobuf_c_message_unpack(const ProtobufCMessageDescriptor *descriptor,
                                            ProtobufCAllocator *allocator, size_t len,
                                            const uint8_t *data) {
    if (len && !data)
        return NULL;
    ProtobufCMessage *m = new_message(descriptor, allocator);
    if (m && !parse_into(m, data, len, allocator, 0)) {
        free_message(m, allocator, 0);
        m = NULL;
    }
    return m;
}

// protobuf-c's lookup of a field by number, for callers that walk the wire format themselves.
const ProtobufCFieldDescriptor *
protobuf_c_message_descriptor_get_field(const ProtobufCMessageDescriptor *desc, unsigned value) {
    return field_by_id(desc, value);
}

// ---- freeing ----

static void free_message(ProtobufCMessage *m, ProtobufCAllocator *a, int depth) {
    if (!m)
        return;
    // Unpacking builds no deeper message; a deeper one was made by hand, a bug of the caller.
    ORCH_ASSERT(depth <= PB_MAX_DEPTH);
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        void *member = MEMBER(m, f->offset);
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(uint32_t *)MEMBER(m, f->quantifier_offset) != f->id)
            continue; // the union holds another member
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            char *arr = *(char **)member;
            size_t n = *(size_t *)MEMBER(m, f->quantifier_offset), es = elem_size(f->type);
            for (size_t j = 0; arr && j < n; j++)
                free_value(f, arr + j * es, a, depth, false);
            pb_free(a, arr);
        } else {
            free_value(f, member, a, depth, true);
        }
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        pb_free(a, m->unknown_fields[i].data);
    pb_free(a, m->unknown_fields);
    pb_free(a, m);
}

void protobuf_c_message_free_unpacked(ProtobufCMessage *message, ProtobufCAllocator *allocator) {
    free_message(message, allocator, 0);
}

// ---- packing ----

// Where packed bytes go: a flat buffer, a ProtobufCBuffer, or nowhere (only counted).
typedef struct {
    uint8_t *out;
    ProtobufCBuffer *buf;
    size_t n; // bytes so far
} Sink;

static void put(Sink *s, const void *p, size_t len) {
    if (len == 0)
        return;
    if (s->out)
        memcpy(s->out + s->n, p, len);
    else if (s->buf)
        s->buf->append(s->buf, len, p);
    s->n += len;
}

static void put_varint(Sink *s, uint64_t v) {
    uint8_t b[10];
    size_t k = 0;
    for (; v >= 0x80; v >>= 7)
        b[k++] = (uint8_t)(v | 0x80);
    b[k++] = (uint8_t)v;
    put(s, b, k);
}

static void put_le(Sink *s, uint64_t v, int bytes) {
    uint8_t b[8];
    for (int i = 0; i < bytes; i++, v >>= 8)
        b[i] = (uint8_t)v;
    put(s, b, (size_t)bytes);
}

static void put_tag(Sink *s, uint32_t id, int wire) {
    put_varint(s, (uint64_t)id << 3 | (unsigned)wire);
}

static void pack_message(Sink *s, const ProtobufCMessage *m, int depth);

// Writes the value of type t at v, without its tag; depth is the level of its message.
static void put_value(Sink *s, ProtobufCType t, const void *v, int depth) {
    uint32_t u32;
    uint64_t u64;
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_ENUM: { // negative values take ten bytes, sign-extended to 64 bits
        int32_t x;
        memcpy(&x, v, 4);
        put_varint(s, (uint64_t)(int64_t)x);
        return;
    }
    case PROTOBUF_C_TYPE_UINT32:
        memcpy(&u32, v, 4);
        put_varint(s, u32);
        return;
    case PROTOBUF_C_TYPE_SINT32:
        memcpy(&u32, v, 4);
        put_varint(s, (u32 << 1) ^ (0u - (u32 >> 31)));
        return;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
        memcpy(&u64, v, 8);
        put_varint(s, u64);
        return;
    case PROTOBUF_C_TYPE_SINT64:
        memcpy(&u64, v, 8);
        put_varint(s, (u64 << 1) ^ (0 - (u64 >> 63)));
        return;
    case PROTOBUF_C_TYPE_BOOL: {
        uint8_t b = *(const protobuf_c_boolean *)v != 0;
        put(s, &b, 1);
        return;
    }
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        memcpy(&u32, v, 4);
        put_le(s, u32, 4);
        return;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        memcpy(&u64, v, 8);
        put_le(s, u64, 8);
        return;
    case PROTOBUF_C_TYPE_STRING: { // a NULL string is written empty, as protobuf-c does
        const char *str = *(const char *const *)v;
        size_t len = str ? strlen(str) : 0;
        put_varint(s, len);
        put(s, str, len);
        return;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *bd = v;
        put_varint(s, bd->len);
        put(s, bd->data, bd->len);
        return;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)v;
        Sink count = {0};
        if (sub)
            pack_message(&count, sub, depth + 1);
        put_varint(s, count.n);
        if (!sub)
            return;
        if (s->out || s->buf)
            pack_message(s, sub, depth + 1);
        else
            s->n += count.n; // counting the size again would cost twice per level of nesting
        return;
    }
    }
}

// Whether a proto3 field without presence holds its zero value, which is not written.
static bool zeroish(ProtobufCType t, const void *v) {
    switch (t) {
    case PROTOBUF_C_TYPE_BOOL: return *(const protobuf_c_boolean *)v == 0;
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)v == 0;
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)v == 0;
    case PROTOBUF_C_TYPE_STRING: {
        const char *str = *(const char *const *)v;
        return !str || !*str;
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)v)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(const void *const *)v == NULL;
    default: return elem_size(t) == 8 ? *(const uint64_t *)v == 0 : *(const uint32_t *)v == 0;
    }
}

// Whether non-repeated field f of m is written: protobuf-c's rules for oneofs, proto2 optional
// fields (a has_ flag, or for strings and messages a pointer other than NULL and the default),
// required fields (always) and proto3 fields without presence (when not zero).
static bool present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
    const void *v = CMEMBER(m, f->offset);
    bool by_pointer = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;
    const void *ptr = by_pointer ? *(const void *const *)v : NULL;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)CMEMBER(m, f->quantifier_offset) == f->id &&
               (!by_pointer || (ptr && ptr != f->default_value));
    switch (f->label) {
    case PROTOBUF_C_LABEL_REQUIRED: return true;
    case PROTOBUF_C_LABEL_OPTIONAL:
        if (by_pointer)
            return ptr && ptr != f->default_value;
        return *(const protobuf_c_boolean *)CMEMBER(m, f->quantifier_offset);
    case PROTOBUF_C_LABEL_NONE: return !zeroish(f->type, v);
    default: return false;
    }
}

// Writes m's fields in the descriptor's order (by number), then its unknown fields.
static void pack_message(Sink *s, const ProtobufCMessage *m, int depth) {
    // Unpacking builds no deeper message; a deeper one was made by hand, a bug of the caller.
    ORCH_ASSERT(depth <= PB_MAX_DEPTH);
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *v = CMEMBER(m, f->offset);
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            if (present(m, f)) {
                put_tag(s, f->id, wire_of(f->type));
                put_value(s, f->type, v, depth);
            }
            continue;
        }
        size_t n = *(const size_t *)CMEMBER(m, f->quantifier_offset), es = elem_size(f->type);
        const char *arr = *(const char *const *)v;
        if (n == 0)
            continue;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) {
            Sink count = {0};
            for (size_t j = 0; j < n; j++)
                put_value(&count, f->type, arr + j * es, depth);
            put_tag(s, f->id, WIRE_LEN);
            put_varint(s, count.n);
            if (!s->out && !s->buf)
                s->n += count.n;
            else
                for (size_t j = 0; j < n; j++)
                    put_value(s, f->type, arr + j * es, depth);
        } else {
            for (size_t j = 0; j < n; j++) {
                put_tag(s, f->id, wire_of(f->type));
                put_value(s, f->type, arr + j * es, depth);
            }
        }
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        put_tag(s, u->tag, (int)u->wire_type);
        put(s, u->data, u->len);
    }
}

size_t protobuf_c_message_get_packed_size(const ProtobufCMessage *message) {
    Sink s = {0};
    pack_message(&s, message, 0);
    return s.n;
}

size_t protobuf_c_message_pack(const ProtobufCMessage *message, uint8_t *out) {
    Sink s = {.out = out};
    pack_message(&s, message, 0);
    return s.n;
}

size_t protobuf_c_message_pack_to_buffer(const ProtobufCMessage *message, ProtobufCBuffer *buffer) {
    Sink s = {.buf = buffer};
    pack_message(&s, message, 0);
    return s.n;
}
