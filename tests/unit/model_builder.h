// Builds ONNX ModelProto bytes in C with the generated protobuf-c types, so loader tests need no
// Python: every test model is written here explicitly. All allocations go into one Arena.
#ifndef ORCH_TEST_MODEL_BUILDER_H
#define ORCH_TEST_MODEL_BUILDER_H

#include "base/arena.h"
#include "onnx/onnx.pb-c.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct MB {
    Arena *a;
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
} MB;

#define MB_GROW(a, arr, n)                                                                         \
    do {                                                                                           \
        void *grown_ = arena_alloc((a), sizeof(*(arr)) * ((n) + 1));                               \
        if (n)                                                                                     \
            memcpy(grown_, (arr), sizeof(*(arr)) * (n));                                           \
        (arr) = grown_;                                                                            \
    } while (0)

static inline MB *mb_new(int64_t opset) {
    MB *b = calloc(1, sizeof(MB));
    b->a = arena_create();
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    onnx__operator_set_id_proto__init(&b->opset);
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->opset.domain = "";
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->m.n_opset_import = opset > 0 ? 1 : 0;
    b->m.opset_import = b->opsets;
    b->m.graph = &b->g;
    b->g.name = "test";
    return b;
}

static inline void mb_free(MB *b) {
    arena_free(b->a);
    free(b);
}

// dims given as ints; a negative dim -k means symbolic "dk" (dim_param).
static inline Onnx__ValueInfoProto *mb_value_info(MB *b, const char *name, int elem, int rank,
                                                  const int64_t *dims) {
    Onnx__ValueInfoProto *vi = arena_alloc(b->a, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = arena_strdup(b->a, name);
    Onnx__TypeProto *tp = arena_alloc(b->a, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = arena_alloc(b->a, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sp = arena_alloc(b->a, sizeof *sp);
        onnx__tensor_shape_proto__init(sp);
        sp->n_dim = (size_t)rank;
        sp->dim = arena_alloc(b->a, sizeof(void *) * (size_t)(rank + 1));
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = arena_alloc(b->a, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            } else {
                char sym[16];
                snprintf(sym, sizeof sym, "d%lld", (long long)-dims[i]);
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = arena_strdup(b->a, sym);
            }
            sp->dim[i] = d;
        }
        tt->shape = sp;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

static inline void mb_input(MB *b, const char *name, int elem, int rank, const int64_t *dims) {
    MB_GROW(b->a, b->g.input, b->g.n_input);
    b->g.input[b->g.n_input++] = mb_value_info(b, name, elem, rank, dims);
}

static inline void mb_output(MB *b, const char *name) {
    MB_GROW(b->a, b->g.output, b->g.n_output);
    b->g.output[b->g.n_output++] = mb_value_info(b, name, 1, -1, NULL);
}

static inline Onnx__TensorProto *mb_tensor(MB *b, const char *name, int dtype, int rank,
                                           const int64_t *dims) {
    Onnx__TensorProto *t = arena_alloc(b->a, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = arena_strdup(b->a, name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = arena_memdup(b->a, dims, sizeof(int64_t) * (size_t)(rank ? rank : 1));
    return t;
}

static inline Onnx__TensorProto *mb_raw(MB *b, const char *name, int dtype, int rank,
                                        const int64_t *dims, const void *data, size_t nbytes) {
    Onnx__TensorProto *t = mb_tensor(b, name, dtype, rank, dims);
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    t->raw_data.data = arena_memdup(b->a, data, nbytes ? nbytes : 1);
    return t;
}

static inline void mb_init(MB *b, Onnx__TensorProto *t) {
    MB_GROW(b->a, b->g.initializer, b->g.n_initializer);
    b->g.initializer[b->g.n_initializer++] = t;
}

static inline Onnx__AttributeProto *mb_attr(MB *b, const char *name, int type) {
    Onnx__AttributeProto *a = arena_alloc(b->a, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = arena_strdup(b->a, name);
    a->has_type = 1;
    a->type = type;
    return a;
}

static inline Onnx__AttributeProto *mb_attr_i(MB *b, const char *name, int64_t v) {
    Onnx__AttributeProto *a = mb_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
    return a;
}

static inline Onnx__AttributeProto *mb_attr_f(MB *b, const char *name, float v) {
    Onnx__AttributeProto *a = mb_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
    return a;
}

static inline Onnx__AttributeProto *mb_attr_s(MB *b, const char *name, const char *v) {
    Onnx__AttributeProto *a = mb_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)arena_strdup(b->a, v);
    return a;
}

static inline Onnx__AttributeProto *mb_attr_ints(MB *b, const char *name, int n, const int64_t *v) {
    Onnx__AttributeProto *a = mb_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)n;
    a->ints = arena_memdup(b->a, v, sizeof(int64_t) * (size_t)(n ? n : 1));
    return a;
}

static inline Onnx__AttributeProto *mb_attr_t(MB *b, const char *name, Onnx__TensorProto *t) {
    Onnx__AttributeProto *a = mb_attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
    return a;
}

// Comma-separated tensor names ("" entries allowed for absent optional inputs); attributes
// follow as a NULL-terminated list.
static inline Onnx__NodeProto *mb_node(MB *b, const char *op, const char *name, const char *ins,
                                       const char *outs, ...) {
    Onnx__NodeProto *n = arena_alloc(b->a, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = arena_strdup(b->a, op);
    n->name = arena_strdup(b->a, name);
    const char *lists[2] = {ins, outs};
    for (int l = 0; l < 2; l++) {
        size_t cnt = 0;
        char **arr = arena_alloc(b->a, sizeof(char *) * 64);
        if (*lists[l]) {
            char *copy = arena_strdup(b->a, lists[l]);
            for (char *p = copy;;) {
                char *c = strchr(p, ',');
                if (c)
                    *c = 0;
                arr[cnt++] = p;
                if (!c)
                    break;
                p = c + 1;
            }
        }
        if (l == 0) {
            n->n_input = cnt;
            n->input = arr;
        } else {
            n->n_output = cnt;
            n->output = arr;
        }
    }
    va_list ap;
    va_start(ap, outs);
    for (Onnx__AttributeProto *a; (a = va_arg(ap, Onnx__AttributeProto *));) {
        MB_GROW(b->a, n->attribute, n->n_attribute);
        n->attribute[n->n_attribute++] = a;
    }
    va_end(ap);
    MB_GROW(b->a, b->g.node, b->g.n_node);
    b->g.node[b->g.n_node++] = n;
    return n;
}

// Serialises the model; the caller frees the buffer.
static inline uint8_t *mb_pack(MB *b, size_t *len) {
    *len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = malloc(*len ? *len : 1);
    onnx__model_proto__pack(&b->m, buf);
    return buf;
}

// Serialises the model to path and frees b. False when the file cannot be written.
static inline bool mb_write(MB *b, const char *path) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = false;
    free(buf);
    mb_free(b);
    return ok;
}

// A test's temporary folder ($TMPDIR or /tmp, "orch-TAG-XXXXXX" into dir) holding the model
// bytes as dir/m.onnx (into model), and the paths of its artefact dir/m.orch and profile
// database dir/p.db. Frees buf. False (nothing made) when the folder or file cannot be written.
typedef struct MbTemp {
    char dir[256], model[300], art[300], db[300];
} MbTemp;

static inline bool mb_temp(const char *tag, uint8_t *buf, size_t len, MbTemp *t) {
    const char *tmp = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/orch-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    bool ok = mkdtemp(t->dir) != NULL;
    snprintf(t->model, sizeof t->model, "%s/m.onnx", t->dir);
    snprintf(t->art, sizeof t->art, "%s/m.orch", t->dir);
    snprintf(t->db, sizeof t->db, "%s/p.db", t->dir);
    FILE *f = ok ? fopen(t->model, "wb") : NULL;
    ok = f && fwrite(buf, 1, len, f) == len;
    if (f)
        fclose(f);
    free(buf);
    return ok;
}

// Removes what mb_temp made and the artefact and database the test wrote there.
static inline void mb_temp_remove(const MbTemp *t) {
    unlink(t->model);
    unlink(t->art);
    unlink(t->db);
    rmdir(t->dir);
}

#endif
