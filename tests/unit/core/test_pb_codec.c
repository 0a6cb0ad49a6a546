// Tests orch's protobuf codec (src/onnx/pb_codec.c), which stands in for libprotobuf-c under the
// generated ONNX parser. Without arguments: every scalar type, proto3 fields, defaults and
// required fields through a descriptor written here, with wire bytes worked out by hand; malformed
// input refused; every prefix of a model refused unless it ends between two top-level fields
// (then it packs back to itself); every byte flip of a model refused or decoded into a message
// whose bytes round-trip; the nesting limit; every allocation failure cleaned up. With a folder
// from gen_pb_fixtures.py: messages written by Google's protobuf decode to what it decodes (each
// field compared) and pack to the bytes it serialises.
#include "../check.h"
#include "../model_builder.h"
#include "base/common.h"
#include "base/strbuf.h"
#include "onnx/load.h"
#include "onnx/onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The codec's nesting limit (PB_MAX_DEPTH in pb_codec.c): messages nest this many levels below
// the outermost, so a chain of MAX_DEPTH + 1 messages is the longest read (as by Google's
// protobuf: the onnx package reads 101 nested TypeProto levels and refuses 102).
#define MAX_DEPTH 100

// ---- bytes ----

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Bytes;

static void b_put(Bytes *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 16;
        b->p = xrealloc(b->p, b->cap);
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void b_varint(Bytes *b, uint64_t v) {
    uint8_t c;
    for (; v >= 0x80; v >>= 7) {
        c = (uint8_t)(v | 0x80);
        b_put(b, &c, 1);
    }
    c = (uint8_t)v;
    b_put(b, &c, 1);
}

// A length-delimited field: its key, the length of payload and payload.
static void b_ld(Bytes *b, uint32_t field, const Bytes *payload) {
    b_varint(b, (uint64_t)field << 3 | 2);
    b_varint(b, payload->n);
    b_put(b, payload->p, payload->n);
}

static uint8_t *pack_msg(const ProtobufCMessage *m, size_t *len) {
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = xmalloc(*len + 1);
    size_t n = protobuf_c_message_pack(m, buf);
    ORCH_ASSERT(n == *len);
    return buf;
}

// pack_to_buffer's output, collected.
typedef struct {
    ProtobufCBuffer base;
    Bytes b;
} Collect;

static void collect_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data) {
    b_put(&((Collect *)buf)->b, data, len);
}

// Whether all three ways of packing m give exactly want[0..n).
static bool packs_to(const ProtobufCMessage *m, const uint8_t *want, size_t n) {
    size_t len;
    uint8_t *got = pack_msg(m, &len);
    bool ok = len == n && (n == 0 || memcmp(got, want, n) == 0);
    free(got);
    Collect c = {{collect_append}, {0}};
    ok = ok && protobuf_c_message_pack_to_buffer(m, &c.base) == n && c.b.n == n &&
         (n == 0 || memcmp(c.b.p, want, n) == 0);
    free(c.b.p);
    return ok;
}

// ---- a descriptor with the types and labels ONNX does not use ----

typedef struct AllTypes AllTypes;
struct AllTypes {
    ProtobufCMessage base;
    protobuf_c_boolean has_i32, has_s32, has_sf32, has_s64, has_sf64, has_u32, has_fx32, has_fx64,
        has_b, has_dint;
    int32_t i32, s32, sf32, req, dint;
    int64_t s64, sf64;
    uint32_t u32, fx32;
    uint64_t fx64, none_u64;
    protobuf_c_boolean b;
    char *none_str, *dstr;
    size_t n_rs32, n_rb, n_rfx64;
    int32_t *rs32;
    protobuf_c_boolean *rb;
    uint64_t *rfx64;
    AllTypes *child;
};

static const char all_dstr_default[] = "dflt";
static const int32_t all_dint_default = 42;
extern const ProtobufCMessageDescriptor all_types_descriptor;

static void all_types_init(ProtobufCMessage *m) {
    AllTypes *a = (AllTypes *)m;
    memset(a, 0, sizeof *a);
    a->base.descriptor = &all_types_descriptor;
    a->dstr = (char *)all_dstr_default;
    a->dint = all_dint_default;
}

#define OPT(id, name, type, member)                                                                \
    {                                                                                              \
        name, id, PROTOBUF_C_LABEL_OPTIONAL, type, offsetof(AllTypes, has_##member),               \
            offsetof(AllTypes, member), NULL, NULL, 0, 0, NULL, NULL                               \
    }
#define REP(id, name, type, member, flags)                                                         \
    {                                                                                              \
        name, id, PROTOBUF_C_LABEL_REPEATED, type, offsetof(AllTypes, n_##member),                 \
            offsetof(AllTypes, member), NULL, NULL, flags, 0, NULL, NULL                           \
    }
#define PLAIN(id, name, label, type, member, desc, def)                                            \
    { name, id, label, type, 0, offsetof(AllTypes, member), desc, def, 0, 0, NULL, NULL }

static const ProtobufCFieldDescriptor all_types_fields[] = {
    OPT(1, "i32", PROTOBUF_C_TYPE_INT32, i32),
    OPT(2, "s32", PROTOBUF_C_TYPE_SINT32, s32),
    OPT(3, "sf32", PROTOBUF_C_TYPE_SFIXED32, sf32),
    OPT(4, "s64", PROTOBUF_C_TYPE_SINT64, s64),
    OPT(5, "sf64", PROTOBUF_C_TYPE_SFIXED64, sf64),
    OPT(6, "u32", PROTOBUF_C_TYPE_UINT32, u32),
    OPT(7, "fx32", PROTOBUF_C_TYPE_FIXED32, fx32),
    OPT(8, "fx64", PROTOBUF_C_TYPE_FIXED64, fx64),
    OPT(9, "b", PROTOBUF_C_TYPE_BOOL, b),
    PLAIN(10, "req", PROTOBUF_C_LABEL_REQUIRED, PROTOBUF_C_TYPE_INT32, req, NULL, NULL),
    PLAIN(11, "none_u64", PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_UINT64, none_u64, NULL, NULL),
    PLAIN(12, "none_str", PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_STRING, none_str, NULL, NULL),
    REP(13, "rs32", PROTOBUF_C_TYPE_SINT32, rs32, PROTOBUF_C_FIELD_FLAG_PACKED),
    REP(14, "rb", PROTOBUF_C_TYPE_BOOL, rb, 0),
    REP(15, "rfx64", PROTOBUF_C_TYPE_FIXED64, rfx64, PROTOBUF_C_FIELD_FLAG_PACKED),
    PLAIN(16, "dstr", PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_STRING, dstr, NULL,
          all_dstr_default),
    {"dint", 17, PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_INT32, offsetof(AllTypes, has_dint),
     offsetof(AllTypes, dint), NULL, &all_dint_default, 0, 0, NULL, NULL},
    PLAIN(18, "child", PROTOBUF_C_LABEL_OPTIONAL, PROTOBUF_C_TYPE_MESSAGE, child,
          &all_types_descriptor, NULL),
};

const ProtobufCMessageDescriptor all_types_descriptor = {PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
                                                         "test.AllTypes",
                                                         "AllTypes",
                                                         "AllTypes",
                                                         "test",
                                                         sizeof(AllTypes),
                                                         sizeof all_types_fields /
                                                             sizeof all_types_fields[0],
                                                         all_types_fields,
                                                         NULL,
                                                         0,
                                                         NULL,
                                                         all_types_init,
                                                         NULL,
                                                         NULL,
                                                         NULL};

static AllTypes *all_unpack(const uint8_t *p, size_t n) {
    return (AllTypes *)protobuf_c_message_unpack(&all_types_descriptor, NULL, n, p);
}

// Every field set, in field order, as protobuf-c writes it (worked out by hand).
static const uint8_t ALL_BYTES[] = {
    0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // 1: int32 -2, ten bytes
    0x10, 0x05,                                                       // 2: sint32 -3 → 5
    0x1d, 0xfe, 0xff, 0xff, 0xff,                                     // 3: sfixed32 -2
    0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // 4: sint64 INT64_MIN
    0x29, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,             // 5: sfixed64 -1
    0x30, 0xff, 0xff, 0xff, 0xff, 0x0f,                               // 6: uint32 2^32-1
    0x3d, 0x04, 0x03, 0x02, 0x01,                                     // 7: fixed32
    0x41, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,             // 8: fixed64
    0x48, 0x01,                                                       // 9: bool
    0x50, 0x07,                                                       // 10: required int32 7
    0x58, 0xac, 0x02,                                                 // 11: uint64 300
    0x62, 0x02, 'h',  'i',                                            // 12: string "hi"
    0x6a, 0x04, 0x02, 0x01, 0x80, 0x01,                               // 13: packed 1, -1, 64
    0x70, 0x01, 0x70, 0x00,                                           // 14: bools 1, 0
    0x7a, 0x08, 0x05, 0,    0,    0,    0,    0,    0,    0,          // 15: packed fixed64 5
    0x82, 0x01, 0x01, 'x',                                            // 16: string "x"
    0x88, 0x01, 0x2a,                                                 // 17: int32 42, set
    0x92, 0x01, 0x02, 0x50, 0x01,                                     // 18: child, req 1
};

static void all_types_values(void) {
    AllTypes *a = all_unpack(ALL_BYTES, sizeof ALL_BYTES);
    CHECK(a);
    if (!a)
        return;
    CHECK(a->has_i32 && a->i32 == -2);
    CHECK(a->has_s32 && a->s32 == -3);
    CHECK(a->has_sf32 && a->sf32 == -2);
    CHECK(a->has_s64 && a->s64 == INT64_MIN);
    CHECK(a->has_sf64 && a->sf64 == -1);
    CHECK(a->has_u32 && a->u32 == UINT32_MAX);
    CHECK(a->has_fx32 && a->fx32 == 0x01020304u);
    CHECK(a->has_fx64 && a->fx64 == 0x0102030405060708ull);
    CHECK(a->has_b && a->b == 1);
    CHECK(a->req == 7);
    CHECK(a->none_u64 == 300);
    CHECK(a->none_str && strcmp(a->none_str, "hi") == 0);
    CHECK(a->n_rs32 == 3 && a->rs32[0] == 1 && a->rs32[1] == -1 && a->rs32[2] == 64);
    CHECK(a->n_rb == 2 && a->rb[0] == 1 && a->rb[1] == 0);
    CHECK(a->n_rfx64 == 1 && a->rfx64[0] == 5);
    CHECK(a->dstr && strcmp(a->dstr, "x") == 0);
    CHECK(a->has_dint && a->dint == 42);
    CHECK(a->child && a->child->req == 1 && !a->child->child);
    CHECK(packs_to(&a->base, ALL_BYTES, sizeof ALL_BYTES));
    protobuf_c_message_free_unpacked(&a->base, NULL);
}

// Defaults come from the descriptor; proto3 zeros and unset optionals are not written.
static void all_types_defaults(void) {
    static const uint8_t req_only[] = {0x50, 0x00};
    AllTypes *a = all_unpack(req_only, sizeof req_only);
    CHECK(a);
    if (!a)
        return;
    CHECK(a->dstr == all_dstr_default && a->dint == 42 && !a->has_dint && !a->has_i32);
    CHECK(packs_to(&a->base, req_only, sizeof req_only));
    a->none_str = "";
    CHECK(packs_to(&a->base, req_only, sizeof req_only)); // an empty proto3 string is zero
    a->none_str = NULL;
    protobuf_c_message_free_unpacked(&a->base, NULL); // must not free the static default
    static const uint8_t no_req[] = {0x08, 0x01};
    CHECK(!all_unpack(no_req, sizeof no_req)); // the required field is missing
    static const uint8_t child_no_req[] = {0x50, 0x00, 0x92, 0x01, 0x00};
    CHECK(!all_unpack(child_no_req, sizeof child_no_req));
}

// Encodings other than the canonical one, which decode to the same values.
static void all_types_other_encodings(void) {
    static const uint8_t in[] = {
        0x50, 0x80, 0x80, 0x00,                         // req 0 in three bytes
        0x10, 0x85, 0x80, 0x80, 0x00,                   // sint32 -3, padded
        0x48, 0x02,                                     // bool from 2
        0x08, 0xff, 0xff, 0xff, 0xff, 0x7f,             // int32: the low 32 bits of 2^35-1
        0x68, 0x03,                                     // rs32 unpacked: -2
        0x6a, 0x01, 0x04,                               // rs32 packed: 2
        0x72, 0x02, 0x01, 0x00,                         // rb packed: 1, 0
        0x79, 9,    0,    0,    0,    0,    0,    0, 0, // rfx64 unpacked: 9
        0x50, 0x03,                                     // req again: the last wins
        0x92, 0x01, 0x02, 0x50, 0x01,                   // child req 1 ...
        0x92, 0x01, 0x04, 0x08, 0x05, 0x50, 0x02,       // ... merged with child i32 5, req 2
    };
    AllTypes *a = all_unpack(in, sizeof in);
    CHECK(a);
    if (!a)
        return;
    CHECK(a->req == 3 && a->s32 == -3 && a->b == 1 && a->i32 == -1);
    CHECK(a->n_rs32 == 2 && a->rs32[0] == -2 && a->rs32[1] == 2);
    CHECK(a->n_rb == 2 && a->rb[0] == 1 && a->rb[1] == 0);
    CHECK(a->n_rfx64 == 1 && a->rfx64[0] == 9);
    CHECK(a->child && a->child->req == 2 && a->child->has_i32 && a->child->i32 == 5);
    protobuf_c_message_free_unpacked(&a->base, NULL);
    static const struct {
        const char *what;
        uint8_t b[12];
        size_t n;
    } wrong[] = {
        // each after req 0, which makes the message complete
        {"int32 as fixed32", {0x50, 0x00, 0x0d, 1, 0, 0, 0}, 7},
        {"sfixed32 as varint", {0x50, 0x00, 0x18, 0x01}, 4},
        {"string as fixed64", {0x50, 0x00, 0x61, 1, 2, 3, 4, 5, 6, 7, 8}, 11},
        {"string as varint", {0x50, 0x00, 0x60, 0x01}, 4},
        {"int32 length-delimited", {0x50, 0x00, 0x0a, 0x00}, 4},
        {"bool as fixed32", {0x50, 0x00, 0x4d, 1, 0, 0, 0}, 7},
        {"repeated sint32 as fixed32", {0x50, 0x00, 0x6d, 1, 0, 0, 0}, 7},
        {"message as varint", {0x50, 0x00, 0x90, 0x01, 0x01}, 5},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        AllTypes *w = all_unpack(wrong[i].b, wrong[i].n);
        CHECK_MSG(!w, "%s: decoded", wrong[i].what);
        if (w)
            protobuf_c_message_free_unpacked(&w->base, NULL);
    }
}

// ---- ONNX messages by hand ----

static Onnx__ModelProto *model_unpack(const void *p, size_t n) {
    return onnx__model_proto__unpack(NULL, n, p);
}

// The lookup by field number that protobuf-c offers beside the codec.
static void field_lookup(void) {
    const ProtobufCMessageDescriptor *d = &onnx__model_proto__descriptor;
    for (unsigned i = 0; i < d->n_fields; i++)
        CHECK(protobuf_c_message_descriptor_get_field(d, d->fields[i].id) == &d->fields[i]);
    CHECK(!protobuf_c_message_descriptor_get_field(d, 0));
    CHECK(!protobuf_c_message_descriptor_get_field(d, 13)); // between fields
    CHECK(!protobuf_c_message_descriptor_get_field(d, 1u << 29));
    CHECK(protobuf_c_message_descriptor_get_field(&all_types_descriptor, 18) ==
          &all_types_fields[17]);
}

static void malformed_refused(void) {
    static const struct {
        const char *what;
        uint8_t b[24];
        size_t n;
    } cases[] = {
        {"truncated varint", {0x08}, 1},
        {"truncated key", {0x88}, 1},
        {"eleven-byte varint",
         {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
         12},
        {"length past the end", {0x12, 0x05, 'a', 'b'}, 4},
        {"length over 64 bits",
         {0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
         11},
        {"group start", {0xb3, 0x03}, 2}, // field 54, wire type 3
        {"group end", {0xb4, 0x03}, 2},
        {"wire type 6", {0xb6, 0x03, 0x00}, 3},
        {"wire type 7", {0xb7, 0x03, 0x00}, 3},
        {"field number 0", {0x00, 0x00}, 2},
        {"key over 32 bits", {0xf8, 0xff, 0xff, 0xff, 0x7f, 0x00}, 6},
        {"ir_version length-delimited", {0x0a, 0x00}, 2},
        {"graph as varint", {0x38, 0x01}, 2},
        {"unknown fixed64 truncated", {0x99, 0x06, 1, 2, 3, 4, 5, 6, 7}, 9},
        {"unknown fixed32 truncated", {0x9d, 0x06, 1, 2, 3}, 5},
        {"sub-message malformed", {0x3a, 0x02, 0x08, 0x80}, 4},
        {"packed floats of 5 bytes", {0x3a, 0x09, 0x2a, 0x07, 0x22, 0x05, 0, 0, 0, 0, 0}, 11},
        {"packed varints cut", {0x3a, 0x06, 0x2a, 0x04, 0x3a, 0x02, 0x01, 0x80}, 8},
        {"packed varint of 11 bytes",
         {0x3a, 0x10, 0x2a, 0x0e, 0x3a, 0x0c, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
          0x80, 0x80, 0x01},
         18},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Onnx__ModelProto *m = model_unpack(cases[i].b, cases[i].n);
        CHECK_MSG(!m, "%s: decoded", cases[i].what);
        onnx__model_proto__free_unpacked(m, NULL);
    }
    // The longest legal varint and the largest field number are accepted.
    static const uint8_t ok1[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    Onnx__ModelProto *m = model_unpack(ok1, sizeof ok1);
    CHECK(m && m->has_ir_version && m->ir_version == -1);
    onnx__model_proto__free_unpacked(m, NULL);
    static const uint8_t ok2[] = {0xf8, 0xff, 0xff, 0xff, 0x0f, 0x00}; // field 2^29-1, unknown
    m = model_unpack(ok2, sizeof ok2);
    CHECK(m && m->base.n_unknown_fields == 1 && packs_to(&m->base, ok2, sizeof ok2));
    onnx__model_proto__free_unpacked(m, NULL);
    CHECK(!onnx__model_proto__unpack(NULL, 3, NULL));
    m = onnx__model_proto__unpack(NULL, 0, NULL); // the empty message
    CHECK(m && !m->graph && packs_to(&m->base, NULL, 0));
    onnx__model_proto__free_unpacked(m, NULL);
    onnx__model_proto__free_unpacked(NULL, NULL);
}

// A model with a bit of everything: nodes with attributes, initializers stored raw and as
// float_data (packed), shapes with dims and names.
static uint8_t *small_model(size_t *len) {
    MB *b = mb_new(17);
    static const int64_t d2x3[] = {2, 3}, dsym[] = {-1, 3}, perm[] = {1, 0};
    mb_input(b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dsym);
    float w[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
    mb_init(b, mb_raw(b, "w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2x3, w, sizeof w));
    Onnx__TensorProto *fd = mb_tensor(b, "w2", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d2x3);
    fd->n_float_data = 6;
    fd->float_data = w;
    mb_init(b, fd);
    mb_node(b, "Add", "add", "x,w", "y", NULL);
    mb_node(b, "Transpose", "tr", "w2", "w2t", mb_attr_ints(b, "perm", 2, perm), NULL);
    mb_node(b, "Softmax", "sm", "y", "z", mb_attr_i(b, "axis", -1), mb_attr_f(b, "eps", 0.5f),
            mb_attr_s(b, "mode", "exact"), NULL);
    mb_output(b, "z");
    uint8_t *buf = mb_pack(b, len);
    mb_free(b);
    return buf;
}

// The offsets at which the top-level fields of a well-formed message start, and its end.
static size_t field_boundaries(const uint8_t *p, size_t n, size_t *out) {
    size_t k = 0, at = 0;
    out[k++] = 0;
    while (at < n) {
        uint64_t key = 0, v = 0;
        for (int s = 0;; s += 7) {
            key |= (uint64_t)(p[at] & 0x7f) << s;
            if (!(p[at++] & 0x80))
                break;
        }
        int wire = (int)(key & 7);
        if (wire == 0) {
            while (p[at++] & 0x80) {
            }
        } else if (wire == 1 || wire == 5) {
            at += wire == 1 ? 8 : 4;
        } else {
            for (int s = 0;; s += 7) {
                v |= (uint64_t)(p[at] & 0x7f) << s;
                if (!(p[at++] & 0x80))
                    break;
            }
            at += v;
        }
        out[k++] = at;
    }
    return k;
}

// Every prefix of the message of type d at full[0..len) is refused, except those that end
// between two top-level fields, which decode and pack back to themselves.
static void truncations_of(const ProtobufCMessageDescriptor *d, const uint8_t *full, size_t len) {
    size_t *bounds = xmalloc((len + 2) * sizeof *bounds);
    size_t nb = field_boundaries(full, len, bounds), ib = 0, n_ok = 0;
    CHECK(nb >= 4 && bounds[nb - 1] == len);
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *prefix = xmalloc(cut + 1); // its own buffer, so ASan sees any read past the cut
        memcpy(prefix, full, cut);
        ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, cut, prefix);
        bool boundary = ib < nb && bounds[ib] == cut;
        ib += boundary;
        CHECK_MSG(!m == !boundary, "%s: prefix of %zu bytes (of %zu) %s", d->short_name, cut, len,
                  m ? "decoded" : "refused");
        if (m) {
            n_ok++;
            CHECK_MSG(packs_to(m, prefix, cut), "prefix of %zu bytes packs differently", cut);
        }
        protobuf_c_message_free_unpacked(m, NULL);
        free(prefix);
    }
    printf("  %s: %zu prefixes, %zu of them whole messages\n", d->short_name, len + 1, n_ok);
    free(bounds);
}

static void truncations(void) {
    size_t len, glen;
    uint8_t *full = small_model(&len);
    truncations_of(&onnx__model_proto__descriptor, full, len);
    Onnx__ModelProto *m = model_unpack(full, len);
    CHECK(m && m->graph);
    if (m && m->graph) { // the graph has many more top-level fields
        uint8_t *g = pack_msg(&m->graph->base, &glen);
        truncations_of(&onnx__graph_proto__descriptor, g, glen);
        free(g);
    }
    onnx__model_proto__free_unpacked(m, NULL);
    free(full);
}

// Unpacks b; when it decodes, its packed bytes must decode and pack again to the same bytes.
static bool decodes_consistently(const uint8_t *b, size_t n, bool *decoded) {
    Onnx__ModelProto *m = model_unpack(b, n);
    *decoded = m != NULL;
    if (!m)
        return true;
    size_t n1, n2;
    uint8_t *p1 = pack_msg(&m->base, &n1);
    onnx__model_proto__free_unpacked(m, NULL);
    Onnx__ModelProto *m2 = model_unpack(p1, n1);
    bool ok = m2 != NULL;
    if (m2) {
        uint8_t *p2 = pack_msg(&m2->base, &n2);
        ok = n1 == n2 && memcmp(p1, p2, n1) == 0;
        free(p2);
    }
    onnx__model_proto__free_unpacked(m2, NULL);
    free(p1);
    return ok;
}

static void byte_flips(void) {
    size_t len, n_dec = 0, n = 0;
    uint8_t *full = small_model(&len);
    static const uint8_t flips[] = {0x01, 0x02, 0x08, 0x40, 0x80, 0xff};
    uint8_t *b = xmalloc(len);
    for (size_t at = 0; at < len; at++)
        for (size_t f = 0; f < sizeof flips; f++) {
            memcpy(b, full, len);
            b[at] ^= flips[f];
            bool decoded;
            CHECK_MSG(decodes_consistently(b, len, &decoded), "byte %zu ^ 0x%02x", at, flips[f]);
            n_dec += decoded;
            n++;
        }
    printf("  %zu flipped models, %zu decoded\n", n, n_dec);
    CHECK(n_dec > 0 && n_dec < n);
    free(b);
    free(full);
}

// A TypeProto nesting exactly `levels` (at least 2) messages: Sequence types around a tensor
// type (TypeProto → Tensor: two levels) or, for an odd count, a tensor type with an empty shape
// (three levels).
static Bytes nested_types(int levels) {
    Bytes inner = {0}, w = {0};
    if (levels % 2) {
        b_ld(&inner, 2, &(Bytes){0}); // Tensor.shape, empty
    } else {
        b_varint(&inner, 0x08); // Tensor.elem_type = FLOAT
        b_varint(&inner, 1);
    }
    b_ld(&w, 1, &inner); // TypeProto.tensor_type
    free(inner.p);
    for (int have = 2 + levels % 2; have < levels; have += 2) {
        Bytes seq = {0}, tp = {0};
        b_ld(&seq, 1, &w);  // Sequence.elem_type
        b_ld(&tp, 4, &seq); // TypeProto.sequence_type
        free(w.p);
        free(seq.p);
        w = tp;
    }
    return w;
}

static void nesting_limit(void) {
    for (int levels = MAX_DEPTH; levels <= MAX_DEPTH + 3; levels++) {
        Bytes b = nested_types(levels);
        Onnx__TypeProto *m = onnx__type_proto__unpack(NULL, b.n, b.p);
        CHECK_MSG(!m == (levels > MAX_DEPTH + 1), "%d levels %s", levels,
                  m ? "decoded" : "refused");
        if (m) {
            int depth = 1; // the TypeProto levels, then the tensor type and its shape
            const Onnx__TypeProto *t = m;
            for (; t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
                 t = t->sequence_type->elem_type)
                depth += 2;
            depth += 1 + (t->tensor_type->shape != NULL);
            CHECK(depth == levels);
            CHECK(packs_to(&m->base, b.p, b.n));
        }
        onnx__type_proto__free_unpacked(m, NULL);
        free(b.p);
    }

    // A model whose graphs nest through attributes (model → graph → node → attribute → graph
    // ...) thousands deep, as a hostile file would: refused at once, with the loader's message.
    Bytes g = {0};
    int levels = 0;
    for (; levels < 3000; levels++) {
        Bytes attr = {0}, node = {0}, graph = {0};
        b_ld(&attr, 6, &g);     // AttributeProto.g
        b_ld(&node, 5, &attr);  // NodeProto.attribute
        b_ld(&graph, 1, &node); // GraphProto.node
        free(g.p);
        free(attr.p);
        free(node.p);
        g = graph;
    }
    Bytes model = {0};
    b_ld(&model, 7, &g);
    double t0 = check_now();
    Onnx__ModelProto *mm = model_unpack(model.p, model.n);
    double secs = check_now() - t0;
    CHECK(!mm);
    CHECK_MSG(secs < 1.0, "%.2f s to refuse", secs);
    printf("  %d-level model of %zu bytes refused in %.4f s\n", 3 * levels + 1, model.n, secs);
    Graph *graph = NULL;
    Err e = {0};
    CHECK(onnx_load_memory(model.p, model.n, "deep.onnx", NULL, NULL, &graph, &e) != ST_OK);
    // The loader's walk of the wire format refuses it before the codec is asked (the codec's own
    // limit, above, guards every other caller).
    CHECK_MSG(strstr(e.msg, "more than 100 levels deep") && strstr(e.msg, "deep.onnx"),
              "message: %s", e.msg);
    CHECK(!graph);
    free(model.p);
    free(g.p);
}

// ---- allocation failures ----

typedef struct {
    long count, fail_at; // allocations so far; the one to fail (-1: none)
    long live;
} Counter;

static void *counted_alloc(void *data, size_t size) {
    Counter *c = data;
    if (c->count++ == c->fail_at)
        return NULL;
    c->live++;
    return malloc(size);
}

static void counted_free(void *data, void *p) {
    Counter *c = data;
    c->live--;
    free(p);
}

static void allocation_failures(void) {
    size_t len;
    uint8_t *full = small_model(&len);
    Counter c = {0, -1, 0};
    ProtobufCAllocator a = {counted_alloc, counted_free, &c};
    Onnx__ModelProto *m = onnx__model_proto__unpack(&a, len, full);
    CHECK(m && packs_to(&m->base, full, len));
    long total = c.count;
    onnx__model_proto__free_unpacked(m, &a);
    CHECK(c.live == 0);
    for (long k = 0; k < total; k++) {
        c = (Counter){0, k, 0};
        m = onnx__model_proto__unpack(&a, len, full);
        CHECK_MSG(!m && c.live == 0, "allocation %ld failing: %s, %ld left", k,
                  m ? "decoded" : "refused", c.live);
        onnx__model_proto__free_unpacked(m, &a);
    }
    printf("  each of %ld allocations failed in turn\n", total);
    free(full);
}

// ---- fixtures from Google's protobuf ----

static void hex(StrBuf *sb, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        sb_printf(sb, "%02x", p[i]);
}

// One line per set field, as gen_pb_fixtures.py's dump() writes them.
static void dump(StrBuf *sb, const ProtobufCMessage *m, const char *path) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        const void *member = base + f->offset;
        size_t count = 1;
        bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
        bool by_ptr = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;
        if (repeated) {
            count = *(const size_t *)(base + f->quantifier_offset);
            member = *(const void *const *)member;
        } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            count = *(const uint32_t *)(base + f->quantifier_offset) == f->id;
        } else if (by_ptr) {
            count = *(const void *const *)member != NULL;
        } else {
            count = *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
        }
        size_t es = f->type == PROTOBUF_C_TYPE_BYTES ? sizeof(ProtobufCBinaryData)
                    : by_ptr                         ? sizeof(void *)
                    : f->type == PROTOBUF_C_TYPE_INT64 || f->type == PROTOBUF_C_TYPE_UINT64 ||
                            f->type == PROTOBUF_C_TYPE_DOUBLE
                        ? 8
                        : 4;
        for (size_t j = 0; j < count; j++) {
            char p[4096];
            if (repeated)
                snprintf(p, sizeof p, "%s.%s[%zu]", path, f->name, j);
            else
                snprintf(p, sizeof p, "%s.%s", path, f->name);
            const void *v = (const char *)member + j * es;
            switch (f->type) {
            case PROTOBUF_C_TYPE_MESSAGE:
                sb_printf(sb, "%s {}\n", p);
                dump(sb, *(const ProtobufCMessage *const *)v, p);
                continue;
            case PROTOBUF_C_TYPE_STRING: {
                const char *s = *(const char *const *)v;
                sb_printf(sb, "%s = s:", p);
                hex(sb, (const uint8_t *)s, strlen(s));
                break;
            }
            case PROTOBUF_C_TYPE_BYTES: {
                const ProtobufCBinaryData *bd = v;
                sb_printf(sb, "%s = b:", p);
                hex(sb, bd->data, bd->len);
                break;
            }
            case PROTOBUF_C_TYPE_FLOAT:
                sb_printf(sb, "%s = f:%08x", p, *(const uint32_t *)v);
                break;
            case PROTOBUF_C_TYPE_DOUBLE:
                sb_printf(sb, "%s = d:%016llx", p, (unsigned long long)*(const uint64_t *)v);
                break;
            case PROTOBUF_C_TYPE_INT64:
                sb_printf(sb, "%s = %lld", p, (long long)*(const int64_t *)v);
                break;
            case PROTOBUF_C_TYPE_UINT64:
                sb_printf(sb, "%s = %llu", p, (unsigned long long)*(const uint64_t *)v);
                break;
            case PROTOBUF_C_TYPE_UINT32: sb_printf(sb, "%s = %u", p, *(const uint32_t *)v); break;
            default: sb_printf(sb, "%s = %d", p, *(const int32_t *)v); break; // int32, enum
            }
            sb_puts(sb, "\n");
        }
    }
}

static uint8_t *read_file(const char *dir, const char *name, const char *ext, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    Bytes b = {0};
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        b_put(&b, buf, n);
    fclose(f);
    b_put(&b, "", 1); // a NUL after the bytes, for the text files
    *len = b.n - 1;
    return b.p;
}

static const ProtobufCMessageDescriptor *descriptor_named(const char *name) {
    static const struct {
        const char *name;
        const ProtobufCMessageDescriptor *d;
    } all[] = {
        {"ModelProto", &onnx__model_proto__descriptor},
        {"GraphProto", &onnx__graph_proto__descriptor},
        {"NodeProto", &onnx__node_proto__descriptor},
        {"TensorProto", &onnx__tensor_proto__descriptor},
        {"TypeProto", &onnx__type_proto__descriptor},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i].name, name) == 0)
            return all[i].d;
    return NULL;
}

static const char *fixture_dir;

static void fixtures(void) {
    size_t len;
    char *list = (char *)read_file(fixture_dir, "cases", ".txt", &len);
    CHECK_MSG(list, "no %s/cases.txt", fixture_dir);
    if (!list)
        return;
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[256], type[64];
        if (sscanf(line, "%255s %63s", name, type) != 2)
            continue;
        n++;
        const ProtobufCMessageDescriptor *d = descriptor_named(type);
        size_t n_in, n_dump, n_out;
        uint8_t *in = read_file(fixture_dir, name, ".bin", &n_in);
        char *want = (char *)read_file(fixture_dir, name, ".dump", &n_dump);
        uint8_t *out = read_file(fixture_dir, name, ".out", &n_out);
        CHECK_MSG(d && in && want && out, "%s: fixture incomplete", name);
        ProtobufCMessage *m = d && in ? protobuf_c_message_unpack(d, NULL, n_in, in) : NULL;
        CHECK_MSG(m, "%s: not decoded", name);
        if (m && want && out) {
            StrBuf got;
            sb_init(&got);
            dump(&got, m, "");
            if (strcmp(got.s, want) != 0) {
                size_t at = 0;
                while (got.s[at] && got.s[at] == want[at])
                    at++;
                while (at > 0 && got.s[at - 1] != '\n')
                    at--;
                CHECK_MSG(false,
                          "%s: decoded differently from line\n  got:  %.120s\n  want: %.120s", name,
                          got.s + at, want + at);
            }
            CHECK_MSG(packs_to(m, out, n_out), "%s: packs differently from protobuf", name);
            sb_free(&got);
        }
        protobuf_c_message_free_unpacked(m, NULL);
        // Through a counting allocator: everything allocated is freed (oneof members replaced
        // and merged sub-messages included), also without a leak checker.
        Counter c = {0, -1, 0};
        ProtobufCAllocator a = {counted_alloc, counted_free, &c};
        m = d && in ? protobuf_c_message_unpack(d, &a, n_in, in) : NULL;
        CHECK_MSG(m, "%s: not decoded through an allocator", name);
        protobuf_c_message_free_unpacked(m, &a);
        CHECK_MSG(c.live == 0, "%s: %ld allocations left", name, c.live);
        free(in);
        free(want);
        free(out);
    }
    printf("  %d fixtures\n", n);
    CHECK(n >= 10);
    free(list);
}

int main(int argc, char **argv) {
    RUN(all_types_values);
    RUN(all_types_defaults);
    RUN(all_types_other_encodings);
    RUN(field_lookup);
    RUN(malformed_refused);
    RUN(truncations);
    RUN(byte_flips);
    RUN(nesting_limit);
    RUN(allocation_failures);
    if (argc > 1) {
        fixture_dir = argv[1];
        RUN(fixtures);
    }
    return CHECK_DONE();
}
