// ONNX ModelProto → Graph (see load.h). Every field read from the file is treated as hostile:
// sizes are checked before use, names before lookup, paths of external data before opening.
#include "load.h"

#include "../base/file.h"
#include "onnx/onnx.pb-c.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Protobuf's own limit for one message; larger models must use external data.
#define MAX_MODEL_BYTES ((int64_t)2 << 30)
#define MAX_TENSOR_BYTES ((int64_t)64 << 30)
// How deep messages may nest below the ModelProto (a subgraph costs three levels: attribute,
// graph, node). Google's protobuf parsers, and so ONNX Runtime and the onnx package, stop at the
// same depth, so no model they read is refused; it keeps protobuf-c's recursive unpacking (about
// 1 KB of stack a level) far inside any thread's stack.
#define MAX_MESSAGE_DEPTH 100

typedef struct Loader {
    Graph *g;
    const char *base_dir; // folder of the model file, for external data; NULL: not allowed
    Err *e;
    LoadSymbols *symbols; // non-NULL: unbound symbolic input dimensions become 1, listed here
    const Onnx__ModelProto *mp; // the model, for the opsets of other domains
    const uint8_t *weights;     // an artefact's weights (LoadOptions.weights); NULL: none
    size_t weights_size;
} Loader;

static SubGraph *load_subgraph(Loader *L, const Onnx__GraphProto *gp, const Node *owner,
                               const char *attr, int *rc);

// Checks a dims list from the file and computes the element count.
static int check_dims(const char *what, const char *name, const int64_t *dims, size_t n_dims,
                      DType dt, int64_t *numel, Err *e) {
    if (n_dims > ORCH_MAX_RANK)
        return err_set(e, ST_UNSUPPORTED, "%s '%s' has rank %zu; orch supports up to %d", what,
                       name, n_dims, ORCH_MAX_RANK);
    int64_t count = 1;
    for (size_t i = 0; i < n_dims; i++) {
        if (dims[i] < 0)
            return err_set(e, ST_INVALID, "%s '%s' has a negative dimension %lld", what, name,
                           (long long)dims[i]);
        if (mul_overflows_i64(count, dims[i], &count))
            return err_set(e, ST_INVALID, "%s '%s' has dimensions whose product overflows", what,
                           name);
    }
    int64_t bytes;
    if (mul_overflows_i64(count, (int64_t)dtype_size(dt), &bytes) || bytes > MAX_TENSOR_BYTES)
        return err_set(e, ST_INVALID, "%s '%s' is too large (%lld elements)", what, name,
                       (long long)count);
    *numel = count;
    return ST_OK;
}

static bool storable(DType t) { return t != DT_STRING && dtype_size(t) != 0; }

// Rejects absolute paths and any '..' component; the file must also resolve inside base_dir.
static int external_path(const Loader *L, const char *tname, const char *loc, char *out,
                         size_t n) {
    Err *e = L->e;
    if (!L->base_dir)
        return err_set(e, ST_INVALID, "tensor '%s' uses external data, but the model was not "
                                      "loaded from a file", tname);
    if (!*loc || loc[0] == '/' || loc[0] == '\\' || strchr(loc, ':'))
        return err_set(e, ST_INVALID,
                       "tensor '%s': external data location '%s' must be a relative path inside "
                       "the model's folder", tname, loc);
    for (const char *p = loc; *p;) {
        const char *q = p;
        while (*q && *q != '/' && *q != '\\')
            q++;
        if (q - p == 2 && p[0] == '.' && p[1] == '.')
            return err_set(e, ST_INVALID,
                           "tensor '%s': external data location '%s' leaves the model's folder",
                           tname, loc);
        p = *q ? q + 1 : q;
    }
    if ((size_t)snprintf(out, n, "%s/%s", L->base_dir, loc) >= n)
        return err_set(e, ST_INVALID, "tensor '%s': external data path too long", tname);
    char real_base[PATH_MAX], real_file[PATH_MAX];
    if (!realpath(L->base_dir, real_base) || !realpath(out, real_file))
        return err_set(e, ST_INVALID, "tensor '%s': external data file '%s' not found", tname,
                       out);
    size_t bl = strlen(real_base);
    if (strncmp(real_file, real_base, bl) != 0 || real_file[bl] != '/')
        return err_set(e, ST_INVALID,
                       "tensor '%s': external data file '%s' resolves outside the model's folder",
                       tname, loc);
    return ST_OK;
}

static int parse_i64(const char *s, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < 0)
        return -1;
    *v = x;
    return 0;
}

// Reads external data into a new buffer (*dst), allocated only once the file is known to hold
// the bytes: a small model must not make orch allocate what its header merely claims.
static int load_external(const Loader *L, const Onnx__TensorProto *tp, const char *tname,
                         uint8_t **dst, size_t nbytes) {
    Err *e = L->e;
    const char *loc = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (!kv->key || !kv->value)
            continue;
        if (strcmp(kv->key, "location") == 0)
            loc = kv->value;
        else if (strcmp(kv->key, "offset") == 0 && parse_i64(kv->value, &offset))
            return err_set(e, ST_INVALID, "tensor '%s': bad external data offset '%s'", tname,
                           kv->value);
        else if (strcmp(kv->key, "length") == 0 && parse_i64(kv->value, &length))
            return err_set(e, ST_INVALID, "tensor '%s': bad external data length '%s'", tname,
                           kv->value);
    }
    if (!loc)
        return err_set(e, ST_INVALID, "tensor '%s': external data without a location", tname);
    char path[PATH_MAX];
    int rc = external_path(L, tname, loc, path, sizeof path);
    if (rc)
        return rc;
    if (length >= 0 && (size_t)length != nbytes)
        return err_set(e, ST_INVALID, "tensor '%s': external data length %lld, expected %zu",
                       tname, (long long)length, nbytes);
    Err oe = {0};
    FILE *f = file_open_regular(path, &oe); // never blocks on a FIFO
    if (!f)
        return err_set(e, ST_INVALID, "tensor '%s': external data: %s", tname, oe.msg);
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || offset > st.st_size ||
        (int64_t)nbytes > st.st_size - offset) {
        fclose(f);
        return err_set(e, ST_INVALID,
                       "tensor '%s': external data file '%s' is too short for %zu bytes at "
                       "offset %lld",
                       tname, loc, nbytes, (long long)offset);
    }
    *dst = malloc(nbytes ? nbytes : 1);
    if (!*dst) {
        fclose(f);
        return err_set(e, ST_RUNTIME, "tensor '%s': out of memory (%zu bytes)", tname, nbytes);
    }
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || (nbytes && fread(*dst, 1, nbytes, f) != nbytes)) {
        fclose(f);
        free(*dst);
        *dst = NULL;
        return err_set(e, ST_INVALID, "tensor '%s': read error in '%s'", tname, loc);
    }
    fclose(f);
    return ST_OK;
}

// Whether tp's external data lies in an artefact's weights section (location
// ONNX_WEIGHTS_LOCATION) rather than in a file.
static bool weights_ref(const Onnx__TensorProto *tp) {
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (kv->key && kv->value && strcmp(kv->key, "location") == 0)
            return strcmp(kv->value, ONNX_WEIGHTS_LOCATION) == 0;
    }
    return false;
}

// Points *dst at tp's bytes in the artefact's weights section, in place: the graph borrows them
// (the section outlives it). Offset and length are checked against the section, the shape and
// the alignment the writer keeps, so a damaged reference is an error naming the tensor.
static int load_weights_ref(const Loader *L, const Onnx__TensorProto *tp, const char *tname,
                            uint8_t **dst, size_t nbytes) {
    Err *e = L->e;
    if (!L->weights)
        return err_set(e, ST_INVALID,
                       "tensor '%s' refers to an orch artefact's weights section (location '%s'), "
                       "which only an artefact carries",
                       tname, ONNX_WEIGHTS_LOCATION);
    int64_t offset = -1, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (!kv->key || !kv->value)
            continue;
        if (strcmp(kv->key, "offset") == 0 && parse_i64(kv->value, &offset))
            offset = -2;
        else if (strcmp(kv->key, "length") == 0 && parse_i64(kv->value, &length))
            length = -2;
    }
    if (offset < 0 || length < 0)
        return err_set(e, ST_INVALID,
                       "tensor '%s': corrupted: its reference into the weights section has no "
                       "valid offset and length",
                       tname);
    if ((size_t)length != nbytes)
        return err_set(e, ST_INVALID,
                       "tensor '%s': corrupted: the weights section holds %lld bytes for it, its "
                       "shape needs %zu",
                       tname, (long long)length, nbytes);
    if ((uint64_t)offset % ONNX_WEIGHTS_ALIGN || (uint64_t)offset > L->weights_size ||
        (uint64_t)length > L->weights_size - (uint64_t)offset)
        return err_set(e, ST_INVALID,
                       "tensor '%s': corrupted: %lld bytes at offset %lld do not lie %s in the "
                       "weights section (%zu bytes)",
                       tname, (long long)length, (long long)offset,
                       (uint64_t)offset % ONNX_WEIGHTS_ALIGN ? "aligned" : "", L->weights_size);
    *dst = (uint8_t *)L->weights + offset;
    return ST_OK;
}

// Converts a TensorProto's payload into dense little-endian storage of its dtype.
static int tensor_from_proto(const Loader *L, const Onnx__TensorProto *tp, const char *what,
                             Tensor *t) {
    Err *e = L->e;
    const char *tname = tp->name && *tp->name ? tp->name : t->name;
    DType dt = (DType)tp->data_type;
    if (!tp->has_data_type || dt == DT_UNDEFINED)
        return err_set(e, ST_INVALID, "%s '%s' has no data type", what, tname);
    if (!storable(dt))
        return err_set(e, ST_UNSUPPORTED, "%s '%s' has data type %s, which orch does not support",
                       what, tname, dtype_name(dt));
    int64_t numel;
    int rc = check_dims(what, tname, tp->dims, tp->n_dims, dt, &numel, e);
    if (rc)
        return rc;
    if (tp->segment)
        return err_set(e, ST_UNSUPPORTED, "%s '%s' is segmented, which orch does not support",
                       what, tname);
    size_t es = dtype_size(dt), nbytes = (size_t)numel * es;
    uint8_t *data = NULL;
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL &&
        weights_ref(tp)) {
        if ((rc = load_weights_ref(L, tp, tname, &data, nbytes)))
            return rc;
    } else if (tp->has_data_location &&
               tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if ((rc = load_external(L, tp, tname, &data, nbytes)))
            return rc;
    } else {
        // The payload's size is checked against the shape before anything is allocated.
        int64_t n;
        if (tp->has_raw_data) {
            if (tp->raw_data.len != nbytes)
                return err_set(e, ST_INVALID,
                               "%s '%s' has %zu bytes of raw data, expected %zu for %s %lld "
                               "elements",
                               what, tname, tp->raw_data.len, nbytes, dtype_name(dt),
                               (long long)numel);
            n = numel;
        } else {
            switch (dt) {
            case DT_FLOAT: n = (int64_t)tp->n_float_data; break;
            case DT_DOUBLE: n = (int64_t)tp->n_double_data; break;
            case DT_INT64: n = (int64_t)tp->n_int64_data; break;
            case DT_UINT32: case DT_UINT64: n = (int64_t)tp->n_uint64_data; break;
            // int32, int16, int8, uint16, uint8, bool, float16, bfloat16 live in int32_data
            default: n = (int64_t)tp->n_int32_data; break;
            }
            if (n != numel)
                return err_set(e, ST_INVALID, "%s '%s' holds %lld values, but its shape needs %lld",
                               what, tname, (long long)n, (long long)numel);
        }
        if (tp->has_raw_data && nbytes && tp->raw_data.data) {
            // The raw payload moves into the tensor instead of being copied: the loader owns
            // the unpacked message (it frees it right after loading, and protobuf-c allocated
            // the payload with malloc, as graph tensors are), so the peak stays at one copy of
            // the weights beside the message. The message is no longer read past this point.
            Onnx__TensorProto *own = (Onnx__TensorProto *)tp;
            data = own->raw_data.data;
            own->raw_data.data = NULL;
            own->raw_data.len = 0;
        } else if (!(data = calloc(1, nbytes ? nbytes : 1))) {
            return err_set(e, ST_RUNTIME, "%s '%s': out of memory (%zu bytes)", what, tname,
                           nbytes);
        } else if (!tp->has_raw_data) {
            for (int64_t i = 0; i < n; i++) {
                switch (dt) {
                case DT_FLOAT: ((float *)data)[i] = tp->float_data[i]; break;
                case DT_DOUBLE: ((double *)data)[i] = tp->double_data[i]; break;
                case DT_INT64: ((int64_t *)data)[i] = tp->int64_data[i]; break;
                case DT_UINT32: ((uint32_t *)data)[i] = (uint32_t)tp->uint64_data[i]; break;
                case DT_UINT64: ((uint64_t *)data)[i] = tp->uint64_data[i]; break;
                default: {
                    int32_t v = tp->int32_data[i];
                    if (es == 1)
                        ((uint8_t *)data)[i] = (uint8_t)v;
                    else if (es == 2)
                        ((uint16_t *)data)[i] = (uint16_t)v;
                    else
                        ((int32_t *)data)[i] = v;
                }
                }
            }
        }
    }
    t->kind = TK_CONST;
    t->dtype = dt;
    t->rank = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++)
        t->dims[i] = tp->dims[i];
    if (t->data && graph_owns_data(L->g, t->data))
        free(t->data);
    t->data = data;
    return ST_OK;
}

static const char *str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

// Attributes: every field is copied into the graph's arena, so the protobuf can be freed.
static int load_attr(Loader *L, const Node *n, const Onnx__AttributeProto *ap, Attr *a) {
    Graph *g = L->g;
    Err *e = L->e;
    if (!ap->name || !*ap->name)
        return err_set(e, ST_INVALID, "node '%s' (%s) has an attribute without a name", n->name,
                       n->op);
    a->name = arena_strdup(g->arena, ap->name);
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return err_set(e, ST_INVALID,
                       "node '%s' (%s): attribute '%s' refers to a function attribute outside a "
                       "function",
                       n->name, n->op, a->name);
    AttrType type = ap->has_type ? (AttrType)ap->type : AT_UNDEFINED;
    if (type == AT_UNDEFINED) { // IR v1 files: infer the type from the field set
        if (ap->n_ints) type = AT_INTS;
        else if (ap->n_floats) type = AT_FLOATS;
        else if (ap->n_strings) type = AT_STRINGS;
        else if (ap->t) type = AT_TENSOR;
        else if (ap->g) type = AT_GRAPH;
        else if (ap->has_s) type = AT_STRING;
        else if (ap->has_f) type = AT_FLOAT;
        else if (ap->has_i) type = AT_INT;
    }
    a->type = type;
    switch (type) {
    case AT_FLOAT: a->f = ap->f; break;
    case AT_INT: a->i = ap->i; break;
    case AT_STRING: a->s = arena_strndup(g->arena, (const char *)ap->s.data, ap->s.len); break;
    case AT_FLOATS:
        if (ap->n_floats > INT32_MAX)
            return err_set(e, ST_INVALID, "node '%s': attribute '%s' too long", n->name, a->name);
        a->n = (int)ap->n_floats;
        a->floats = arena_memdup(g->arena, ap->floats, sizeof(float) * ap->n_floats);
        break;
    case AT_INTS:
        if (ap->n_ints > INT32_MAX)
            return err_set(e, ST_INVALID, "node '%s': attribute '%s' too long", n->name, a->name);
        a->n = (int)ap->n_ints;
        a->ints = arena_memdup(g->arena, ap->ints, sizeof(int64_t) * ap->n_ints);
        break;
    case AT_STRINGS:
        if (ap->n_strings > INT32_MAX)
            return err_set(e, ST_INVALID, "node '%s': attribute '%s' too long", n->name, a->name);
        a->n = (int)ap->n_strings;
        a->strings = arena_alloc(g->arena, sizeof(char *) * (ap->n_strings + 1));
        for (size_t i = 0; i < ap->n_strings; i++)
            a->strings[i] = arena_strndup(g->arena, (const char *)ap->strings[i].data,
                                          ap->strings[i].len);
        break;
    case AT_TENSOR: {
        if (!ap->t)
            return err_set(e, ST_INVALID, "node '%s': tensor attribute '%s' is empty", n->name,
                           a->name);
        a->t = graph_detached_tensor(g, str_or(ap->t->name, a->name));
        int rc = tensor_from_proto(L, ap->t, "attribute tensor", a->t);
        if (rc) {
            err_prefix(e, "node '%s' (%s): ", n->name, n->op);
            return rc;
        }
        break;
    }
    case AT_GRAPH: {
        if (!ap->g)
            return err_set(e, ST_INVALID, "node '%s' (%s): graph attribute '%s' is empty", n->name,
                           n->op, a->name);
        int rc = ST_OK;
        a->g = load_subgraph(L, ap->g, n, a->name, &rc);
        if (rc)
            return rc;
        break;
    }
    default:
        // Lists of graphs, sparse tensors, type protos: kept as a type tag only. No supported op
        // uses them, so a node that has them fails the support check with its op name.
        break;
    }
    return ST_OK;
}

static int check_constant(const Onnx__NodeProto *np, const char *node_name, Err *e) {
    if (np->n_output != 1 || !np->output[0] || !*np->output[0])
        return err_set(e, ST_INVALID, "Constant node '%s' must have exactly one output", node_name);
    if (np->n_attribute != 1 || !np->attribute[0]->name)
        return err_set(e, ST_INVALID, "Constant node '%s' must have exactly one attribute",
                       node_name);
    return ST_OK;
}

// The value of a Constant node (checked by check_constant) into t.
static int constant_value(Loader *L, const Onnx__NodeProto *np, const char *node_name,
                          Tensor *t) {
    Err *e = L->e;
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = ap->name;
    int rc = ST_OK;
    if (strcmp(an, "value") == 0 && ap->t) {
        rc = tensor_from_proto(L, ap->t, "Constant", t);
    } else if (strcmp(an, "value_float") == 0 || strcmp(an, "value_int") == 0) {
        bool is_f = an[6] == 'f';
        t->kind = TK_CONST;
        t->dtype = is_f ? DT_FLOAT : DT_INT64;
        t->rank = 0;
        t->data = xmalloc(8);
        if (is_f)
            *(float *)t->data = ap->f;
        else
            *(int64_t *)t->data = ap->i;
    } else if (strcmp(an, "value_floats") == 0 || strcmp(an, "value_ints") == 0) {
        bool is_f = an[6] == 'f';
        size_t cnt = is_f ? ap->n_floats : ap->n_ints;
        t->kind = TK_CONST;
        t->dtype = is_f ? DT_FLOAT : DT_INT64;
        t->rank = 1;
        t->dims[0] = (int64_t)cnt;
        t->data = xmalloc(cnt * 8 + 1);
        if (cnt)
            memcpy(t->data, is_f ? (void *)ap->floats : (void *)ap->ints, cnt * (is_f ? 4 : 8));
    } else {
        rc = err_set(e, ST_UNSUPPORTED, "Constant node '%s': attribute '%s' is not supported",
                     node_name, an);
    }
    if (rc)
        err_prefix(e, "node '%s' (Constant): ", node_name);
    return rc;
}

// A Constant node becomes a constant tensor; no node remains.
static int load_constant(Loader *L, const Onnx__NodeProto *np, const char *node_name) {
    int rc = check_constant(np, node_name, L->e);
    if (rc)
        return rc;
    const char *name = np->output[0];
    if (graph_find_tensor(L->g, name))
        return err_set(L->e, ST_INVALID, "Constant node '%s' redefines tensor '%s'", node_name,
                       name);
    return constant_value(L, np, node_name, graph_add_tensor(L->g, name));
}

static int name_index(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

// The opset a node of `domain` runs under: the model's import of that domain (0 if none).
static int domain_opset(const Loader *L, const char *domain) {
    if (!*domain)
        return L->g->opset;
    for (size_t i = 0; L->mp && i < L->mp->n_opset_import; i++)
        if (L->mp->opset_import[i]->domain && strcmp(L->mp->opset_import[i]->domain, domain) == 0)
            return (int)L->mp->opset_import[i]->version;
    return 0;
}

// How many outer-scope names the graph attributes of a node read, together.
static int attrs_outer(const Attr *attr, int n_attr) {
    int count = 0;
    for (int j = 0; j < n_attr; j++)
        if (attr[j].type == AT_GRAPH && attr[j].g)
            count += attr[j].g->n_outer;
    return count;
}

// A graph attribute's body: names stay names (control_flow.c resolves them when it inlines the
// body); what the body reads but does not define becomes its `outer` list.
static SubGraph *load_subgraph(Loader *L, const Onnx__GraphProto *gp, const Node *owner,
                               const char *attr, int *rc) {
    Graph *g = L->g;
    Err *e = L->e;
    Arena *a = g->arena;
    SubGraph *sg = arena_alloc(a, sizeof(SubGraph));
    memset(sg, 0, sizeof *sg);
    sg->name = arena_strdup(a, str_or(gp->name, attr));
    if (gp->n_sparse_initializer || gp->n_input > 4096 || gp->n_output > 4096 ||
        gp->n_node > (1u << 24) || gp->n_initializer > (1u << 24)) {
        *rc = err_set(e, ST_UNSUPPORTED,
                      "the body has sparse initializers or too many inputs, outputs or nodes");
        err_prefix(e, "in graph attribute '%s' of node '%s' (%s): ", attr, owner->name, owner->op);
        return NULL;
    }
    sg->n_in = (int)gp->n_input;
    sg->in = arena_alloc(a, sizeof(char *) * (gp->n_input + 1));
    for (size_t i = 0; i < gp->n_input; i++)
        sg->in[i] = arena_strdup(a, str_or(gp->input[i]->name, ""));
    sg->n_out = (int)gp->n_output;
    sg->out = arena_alloc(a, sizeof(char *) * (gp->n_output + 1));
    for (size_t i = 0; i < gp->n_output; i++)
        sg->out[i] = arena_strdup(a, str_or(gp->output[i]->name, ""));
    size_t n_const = gp->n_initializer;
    for (size_t k = 0; k < gp->n_node; k++)
        n_const += gp->node[k]->op_type && strcmp(gp->node[k]->op_type, "Constant") == 0;
    sg->consts = arena_alloc(a, sizeof(Tensor *) * (n_const + 1));
    sg->nodes = arena_alloc(a, sizeof(SubNode) * (gp->n_node + 1));
    for (size_t i = 0; i < gp->n_initializer && *rc == ST_OK; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        Tensor *t = graph_detached_tensor(g, str_or(tp->name, attr));
        *rc = tensor_from_proto(L, tp, "initializer", t);
        sg->consts[sg->n_consts++] = t;
    }
    for (size_t k = 0; k < gp->n_node && *rc == ST_OK; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        const char *op = str_or(np->op_type, "");
        const char *domain = str_or(np->domain, "");
        char fallback[64];
        snprintf(fallback, sizeof fallback, "%.40s_%zu", *op ? op : "node", k);
        const char *nname = str_or(np->name, fallback);
        if (!*op || np->n_input > 4096 || np->n_output > 4096 || np->n_attribute > 4096) {
            *rc = err_set(e, ST_INVALID,
                          "node '%s' has no op_type or too many inputs, outputs or attributes",
                          nname);
            break;
        }
        bool default_domain = !*domain || strcmp(domain, "ai.onnx") == 0;
        if (default_domain && strcmp(op, "Constant") == 0) {
            if ((*rc = check_constant(np, nname, e)))
                break;
            Tensor *t = graph_detached_tensor(g, np->output[0]);
            *rc = constant_value(L, np, nname, t);
            sg->consts[sg->n_consts++] = t;
            continue;
        }
        SubNode *sn = &sg->nodes[sg->n_nodes++];
        sn->name = arena_strdup(a, nname);
        sn->op = arena_strdup(a, op);
        sn->domain = arena_strdup(a, default_domain ? "" : domain);
        sn->opset = domain_opset(L, sn->domain);
        sn->n_attr = (int)np->n_attribute;
        sn->attr = arena_alloc(a, sizeof(Attr) * (np->n_attribute + 1));
        memset(sn->attr, 0, sizeof(Attr) * (np->n_attribute + 1));
        Node tmp = {.name = sn->name, .op = sn->op};
        for (size_t j = 0; j < np->n_attribute && *rc == ST_OK; j++)
            *rc = load_attr(L, &tmp, np->attribute[j], &sn->attr[j]);
        if (*rc)
            break;
        sn->n_implicit = attrs_outer(sn->attr, sn->n_attr);
        sn->n_in = (int)np->n_input + sn->n_implicit;
        sn->in = arena_alloc(a, sizeof(char *) * ((size_t)sn->n_in + 1));
        for (size_t j = 0; j < np->n_input; j++)
            sn->in[j] = arena_strdup(a, str_or(np->input[j], ""));
        int w = (int)np->n_input;
        for (int j = 0; j < sn->n_attr; j++)
            for (int o = 0; sn->attr[j].type == AT_GRAPH && o < sn->attr[j].g->n_outer; o++)
                sn->in[w++] = sn->attr[j].g->outer[o];
        sn->n_out = (int)np->n_output;
        sn->out = arena_alloc(a, sizeof(char *) * (np->n_output + 1));
        for (size_t j = 0; j < np->n_output; j++)
            sn->out[j] = arena_strdup(a, str_or(np->output[j], ""));
    }
    if (*rc) {
        err_prefix(e, "in graph attribute '%s' of node '%s' (%s): ", attr, owner->name, owner->op);
        return NULL;
    }
    // Every name the body reads (or returns) that it does not define is the enclosing scope's.
    int cap = 16, n_def = 0, def_cap = 16;
    sg->outer = arena_alloc(a, sizeof(char *) * (size_t)cap);
    const char **defined = xmalloc(sizeof(char *) * (size_t)def_cap);
#define DEFINE(nm)                                                                                 \
    do {                                                                                           \
        if (n_def == def_cap)                                                                      \
            defined = xrealloc(defined, sizeof(char *) * (size_t)(def_cap *= 2));                  \
        defined[n_def++] = (nm);                                                                   \
    } while (0)
    for (int i = 0; i < sg->n_in; i++)
        DEFINE(sg->in[i]);
    for (int i = 0; i < sg->n_consts; i++)
        DEFINE(sg->consts[i]->name);
    for (int k = 0; k < sg->n_nodes; k++)
        for (int j = 0; j < sg->nodes[k].n_out; j++)
            if (*sg->nodes[k].out[j])
                DEFINE(sg->nodes[k].out[j]);
#undef DEFINE
    for (int k = 0; k <= sg->n_nodes; k++) {
        int count = k < sg->n_nodes ? sg->nodes[k].n_in : sg->n_out;
        const char **names = k < sg->n_nodes ? sg->nodes[k].in : sg->out;
        for (int j = 0; j < count; j++) {
            const char *nm = names[j];
            if (!*nm || name_index(defined, n_def, nm) >= 0 ||
                name_index(sg->outer, sg->n_outer, nm) >= 0)
                continue;
            if (sg->n_outer == cap) {
                const char **grown = arena_alloc(a, sizeof(char *) * (size_t)(cap * 2));
                memcpy(grown, sg->outer, sizeof(char *) * (size_t)cap);
                sg->outer = grown;
                cap *= 2;
            }
            sg->outer[sg->n_outer++] = nm;
        }
    }
    free(defined);
    return sg;
}

static const InputShape *find_shape(const LoadOptions *opt, const char *name) {
    for (int i = 0; opt && i < opt->n_shapes; i++)
        if (strcmp(opt->shapes[i].name, name) == 0)
            return &opt->shapes[i];
    return NULL;
}

static int load_input(Loader *L, const Onnx__ValueInfoProto *vi, const LoadOptions *opt) {
    Graph *g = L->g;
    Err *e = L->e;
    if (!vi->name || !*vi->name)
        return err_set(e, ST_INVALID, "a graph input has no name");
    if (vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE)
        return err_set(e, ST_UNSUPPORTED,
                       "graph input '%s' is a sequence; orch resolves sequences at compile time, "
                       "so a sequence must be built inside the model (SequenceConstruct, "
                       "SplitToSequence), not passed in",
                       vi->name);
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type)
        return err_set(e, ST_UNSUPPORTED, "graph input '%s' is not a tensor (sequences, maps and "
                                          "optionals are not supported)", vi->name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    DType dt = (DType)tt->elem_type;
    if (!storable(dt))
        return err_set(e, ST_UNSUPPORTED, "graph input '%s' has data type %s, which orch does not "
                                          "support", vi->name, dtype_name(dt));
    if (graph_find_tensor(g, vi->name))
        return err_set(e, ST_INVALID, "graph input '%s' is declared twice", vi->name);
    const InputShape *bound = find_shape(opt, vi->name);
    if (!tt->shape && !bound)
        return err_set(e, ST_INVALID,
                       "graph input '%s' has no shape; give one with --input-shapes %s:DIMS",
                       vi->name, vi->name);
    int rank = tt->shape ? (int)tt->shape->n_dim : bound->rank;
    if (tt->shape && tt->shape->n_dim > ORCH_MAX_RANK)
        return err_set(e, ST_UNSUPPORTED, "graph input '%s' has rank %zu; orch supports up to %d",
                       vi->name, tt->shape->n_dim, ORCH_MAX_RANK);
    const char *source = bound ? str_or(bound->source, "--input-shapes") : NULL;
    if (bound && bound->rank != rank)
        return err_set(e, ST_INVALID, "%s gives '%s' rank %d, but the model declares rank %d",
                       source, vi->name, bound->rank, rank);
    int64_t dims[ORCH_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape ? tt->shape->dim[d] : NULL;
        bool fixed = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (fixed && dim->dim_value < 0)
            return err_set(e, ST_INVALID, "graph input '%s' has a negative dimension %lld",
                           vi->name, (long long)dim->dim_value);
        if (bound) {
            if (fixed && bound->dims[d] != dim->dim_value)
                return err_set(e, ST_INVALID,
                               "%s gives '%s' size %lld on axis %d, but the model fixes it to %lld",
                               source, vi->name, (long long)bound->dims[d], d,
                               (long long)dim->dim_value);
            dims[d] = bound->dims[d];
        } else if (fixed) {
            dims[d] = dim->dim_value;
        } else {
            const char *sym = dim && dim->value_case ==
                                         ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                  ? dim->dim_param
                                  : "?";
            LoadSymbols *ls = L->symbols;
            if (ls && ls->n < LOAD_MAX_SYMBOLS) {
                snprintf(ls->s[ls->n].input, sizeof ls->s[ls->n].input, "%s", vi->name);
                snprintf(ls->s[ls->n].name, sizeof ls->s[ls->n].name, "%s", sym && *sym ? sym : "?");
                ls->s[ls->n++].axis = d;
                dims[d] = 1;
                continue;
            }
            return err_set(e, ST_INVALID,
                           "graph input '%s' has a symbolic dimension '%s' on axis %d; bind it "
                           "with --input-shapes %s:DIMS (e.g. %s:1x3x224x224)",
                           vi->name, sym, d, vi->name, vi->name);
        }
    }
    int64_t numel;
    int rc = check_dims("graph input", vi->name, dims, (size_t)rank, dt, &numel, e);
    if (rc)
        return rc;
    Tensor *t = graph_add_tensor(g, vi->name);
    t->kind = TK_INPUT;
    tensor_set_shape(t, dt, rank, dims);
    g->inputs = xrealloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = t->id;
    return ST_OK;
}

static Tensor *tensor_ref(Graph *g, const char *name) {
    Tensor *t = graph_find_tensor(g, name);
    return t ? t : graph_add_tensor(g, name);
}

static int load_graph(Loader *L, const Onnx__ModelProto *mp, const LoadOptions *opt) {
    Graph *g = L->g;
    Err *e = L->e;
    const Onnx__GraphProto *gp = mp->graph;
    if (!gp)
        return err_set(e, ST_INVALID, "not an ONNX model: no graph (empty, truncated or another "
                                      "kind of file)");
    g->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    g->name = arena_strdup(g->arena, str_or(gp->name, ""));
    char prod[256];
    snprintf(prod, sizeof prod, "%s%s%s", str_or(mp->producer_name, "unknown"),
             mp->producer_version && *mp->producer_version ? " " : "",
             str_or(mp->producer_version, ""));
    g->producer = arena_strdup(g->arena, prod);

    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
        const char *d = str_or(os->domain, "");
        if ((!*d || strcmp(d, "ai.onnx") == 0) && os->has_version)
            opset = os->version;
    }
    if (opset < 0)
        return err_set(e, ST_INVALID, "model imports no opset of the default ONNX domain");
    if (opset > ORCH_MAX_OPSET)
        return err_set(e, ST_UNSUPPORTED,
                       "model uses opset %lld, newer than orch supports (%d to %d); re-export with "
                       "opset_version=%d",
                       (long long)opset, ORCH_MIN_OPSET, ORCH_MAX_OPSET, ORCH_MAX_OPSET);
    if (opset < ORCH_MIN_OPSET)
        return err_set(e, ST_UNSUPPORTED,
                       "model uses opset %lld, older than orch supports (%d to %d); convert it "
                       "with onnx.version_converter",
                       (long long)opset, ORCH_MIN_OPSET, ORCH_MAX_OPSET);
    g->opset = (int)opset;
    if (gp->n_sparse_initializer)
        return err_set(e, ST_UNSUPPORTED, "sparse initializers are not supported ('%s')",
                       str_or(gp->sparse_initializer[0]->values ? gp->sparse_initializer[0]->values->name : NULL, "?"));

    // Initializers first: an input that is also an initializer is a constant (older exporters).
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name)
            return err_set(e, ST_INVALID, "initializer #%zu has no name", i);
        if (graph_find_tensor(g, tp->name))
            return err_set(e, ST_INVALID, "initializer '%s' is defined twice", tp->name);
        Tensor *t = graph_add_tensor(g, tp->name);
        int rc = tensor_from_proto(L, tp, "initializer", t);
        if (rc)
            return rc;
    }
    // Bindings must name real inputs (checked first: a typo would otherwise surface as an
    // unbound symbolic dimension).
    for (int i = 0; opt && i < opt->n_shapes; i++) {
        bool found = false;
        for (size_t j = 0; j < gp->n_input && !found; j++)
            found = gp->input[j]->name && strcmp(gp->input[j]->name, opt->shapes[i].name) == 0;
        const Tensor *t = graph_find_tensor(g, opt->shapes[i].name);
        if (!found || (t && t->kind == TK_CONST))
            return err_set(e, ST_USAGE, "%s names '%s', which is not a graph input",
                           str_or(opt->shapes[i].source, "--input-shapes"), opt->shapes[i].name);
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (vi->name && graph_find_tensor(g, vi->name) &&
            graph_find_tensor(g, vi->name)->kind == TK_CONST)
            continue;
        int rc = load_input(L, vi, opt);
        if (rc)
            return rc;
    }

    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        const char *op = str_or(np->op_type, "");
        const char *domain = str_or(np->domain, "");
        char fallback[64];
        snprintf(fallback, sizeof fallback, "#%zu", k);
        const char *nname = str_or(np->name, NULL);
        if (!*op)
            return err_set(e, ST_INVALID, "node %s has no op_type", str_or(nname, fallback));
        if (np->n_input > 4096 || np->n_output > 4096 || np->n_attribute > 4096)
            return err_set(e, ST_INVALID, "node %s (%s) has too many inputs, outputs or attributes",
                           str_or(nname, fallback), op);
        bool default_domain = !*domain || strcmp(domain, "ai.onnx") == 0;
        if (default_domain && strcmp(op, "Constant") == 0) {
            char cname[128];
            snprintf(cname, sizeof cname, "%s", nname ? nname : fallback);
            int rc = load_constant(L, np, cname);
            if (rc)
                return rc;
            continue;
        }
        Node *n = graph_add_node(g, op, default_domain ? "" : domain, nname, (int)np->n_input,
                                 (int)np->n_output, (int)np->n_attribute);
        n->opset = domain_opset(L, n->domain);
        for (size_t j = 0; j < np->n_attribute; j++) {
            int rc = load_attr(L, n, np->attribute[j], &n->attr[j]);
            if (rc)
                return rc;
        }
        // What the node's bodies read from this scope are inputs too (Node.n_implicit).
        n->n_implicit = attrs_outer(n->attr, n->n_attr);
        if (n->n_implicit) {
            n->n_in += n->n_implicit;
            n->in = arena_alloc(g->arena, sizeof(int) * (size_t)n->n_in);
            for (int j = 0; j < n->n_in; j++)
                n->in[j] = -1;
            int w = (int)np->n_input;
            for (int j = 0; j < n->n_attr; j++)
                for (int o = 0; n->attr[j].type == AT_GRAPH && o < n->attr[j].g->n_outer; o++)
                    n->in[w++] = tensor_ref(g, n->attr[j].g->outer[o])->id;
        }
        for (size_t j = 0; j < np->n_input; j++)
            if (np->input[j] && *np->input[j])
                n->in[j] = tensor_ref(g, np->input[j])->id;
        for (size_t j = 0; j < np->n_output; j++)
            if (np->output[j] && *np->output[j])
                n->out[j] = tensor_ref(g, np->output[j])->id;
    }

    if (gp->n_output == 0)
        return err_set(e, ST_INVALID, "the graph declares no outputs");
    g->outputs = xmalloc(sizeof(int) * gp->n_output);
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        Tensor *t = name ? graph_find_tensor(g, name) : NULL;
        if (!t)
            return err_set(e, ST_INVALID, "graph output '%s' is not produced by any node",
                           str_or(name, "?"));
        t->is_output = true;
        g->outputs[g->n_outputs++] = t->id;
    }
    int rc = graph_toposort(g, e);
    if (rc)
        return rc;
    for (int i = 0; i < g->n_outputs; i++) {
        const Tensor *t = g->tensors[g->outputs[i]];
        if (t->kind == TK_VALUE && t->producer < 0)
            return err_set(e, ST_INVALID, "graph output '%s' is not produced by any node",
                           t->name);
        // Sequences are resolved at compile time into tensors (ops/sequence.c): none can leave.
        const Onnx__TypeProto *tp = gp->output[i]->type;
        int vc = tp ? (int)tp->value_case : ONNX__TYPE_PROTO__VALUE__NOT_SET;
        if (vc == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || vc == ONNX__TYPE_PROTO__VALUE__NOT_SET ||
            t->producer < 0)
            continue;
        const Node *n = g->nodes[t->producer];
        if (vc == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE)
            return err_set(e, ST_UNSUPPORTED,
                           "node '%s' (%s): its output '%s' is a sequence and a graph output; "
                           "orch compiles a graph of tensors, so a sequence must be consumed "
                           "inside the model (by ConcatFromSequence or SequenceAt, say)",
                           n->name, n->op, t->name);
        return err_set(e, ST_UNSUPPORTED,
                       "node '%s' (%s): its output '%s' is a graph output of %s type; orch "
                       "supports tensor outputs only",
                       n->name, n->op, t->name,
                       vc == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "optional"
                       : vc == ONNX__TYPE_PROTO__VALUE_MAP_TYPE    ? "map"
                                                                   : "sparse tensor");
    }
    return ST_OK;
}

// Reads the varint at *pos (before end) into *v; false if it is truncated or over 10 bytes.
static bool wire_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70 && *pos < end; shift += 7) {
        uint8_t b = p[(*pos)++];
        if (shift < 64)
            *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

// Whether the message of `size` bytes at data, of type `root`, holds messages nested more than
// MAX_MESSAGE_DEPTH levels below it. protobuf-c unpacks (and frees) nested messages by recursion
// without a bound, and ONNX nests without end: graphs inside attributes of nodes inside graphs,
// types inside types. So the wire format is walked first, with an explicit stack of the
// enclosing messages, descending only into the fields the schema declares as messages (the
// generated descriptors say which). Malformed data stops the walk with false: it lies after
// everything walked so far, and the unpacker refuses it with its own message.
static bool nests_too_deep(const ProtobufCMessageDescriptor *root, const uint8_t *data,
                           size_t size) {
    struct {
        size_t end; // offset just past this message's bytes
        const ProtobufCMessageDescriptor *desc;
    } stack[MAX_MESSAGE_DEPTH + 1];
    int depth = 0;
    stack[0].end = size;
    stack[0].desc = root;
    size_t pos = 0;
    for (;;) {
        size_t end = stack[depth].end;
        if (pos == end) {
            if (depth == 0)
                return false;
            depth--;
            continue;
        }
        uint64_t key, len;
        if (!wire_varint(data, end, &pos, &key))
            return false;
        switch (key & 7) {
        case PROTOBUF_C_WIRE_TYPE_VARINT:
            if (!wire_varint(data, end, &pos, &len))
                return false;
            break;
        case PROTOBUF_C_WIRE_TYPE_64BIT:
        case PROTOBUF_C_WIRE_TYPE_32BIT: {
            size_t n = (key & 7) == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
            if (end - pos < n)
                return false;
            pos += n;
            break;
        }
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
            if (!wire_varint(data, end, &pos, &len) || len > end - pos)
                return false;
            uint64_t number = key >> 3;
            const ProtobufCFieldDescriptor *f =
                number <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(stack[depth].desc, (unsigned)number)
                    : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth == MAX_MESSAGE_DEPTH)
                    return true;
                depth++;
                stack[depth].end = pos + len;
                stack[depth].desc = f->descriptor;
            } else {
                pos += len; // a string, bytes, packed numbers or a field the schema lacks
            }
            break;
        }
        default: // groups (which protobuf-c refuses) and undefined wire types
            return false;
        }
    }
}

static int err_too_deep(Err *e, const char *name) {
    return err_set(e, ST_INVALID,
                   "%s: the model nests messages more than %d levels deep (graphs inside node "
                   "attributes, types inside types); protobuf parsers, orch's among them, read "
                   "at most %d",
                   name, MAX_MESSAGE_DEPTH, MAX_MESSAGE_DEPTH);
}

// The unpacked model of `size` bytes at data, or NULL with e set.
static Onnx__ModelProto *unpack_model(const void *data, size_t size, const char *name, Err *e) {
    if ((int64_t)size > MAX_MODEL_BYTES) {
        err_set(e, ST_INVALID, "%s: model is over the 2 GiB protobuf limit", name);
        return NULL;
    }
    if (nests_too_deep(&onnx__model_proto__descriptor, data, size)) {
        err_too_deep(e, name);
        return NULL;
    }
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    if (!mp)
        err_set(e, ST_INVALID,
                "%s: not a valid ONNX model (the protobuf does not parse: truncated, corrupt, "
                "nested too deeply or not an ONNX file)",
                name);
    return mp;
}

// Builds the graph from an unpacked model, which it frees (its raw tensor payloads move into
// the graph's constants).
static int load_unpacked(Onnx__ModelProto *mp, const char *name, const char *base_dir,
                         const LoadOptions *opt, LoadSymbols *symbols, Graph **out, Err *e) {
    Graph *g = graph_create(name);
    Loader L = {g, base_dir, e, symbols, mp, NULL, 0};
    if (opt && opt->weights) {
        L.weights = opt->weights;
        L.weights_size = opt->weights_size;
        graph_borrow(g, opt->weights, opt->weights_size);
        g->borrowed_mapped = opt->weights_mapped;
    }
    int rc = load_graph(&L, mp, opt);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (rc) {
        err_prefix(e, "%s: ", name);
        graph_free(g);
        return rc;
    }
    *out = g;
    return ST_OK;
}

int onnx_load_memory(const void *data, size_t size, const char *name, const char *base_dir,
                     const LoadOptions *opt, Graph **out, Err *e) {
    *out = NULL;
    Onnx__ModelProto *mp = unpack_model(data, size, name, e);
    return mp ? load_unpacked(mp, name, base_dir, opt, NULL, out, e) : e->code;
}

int onnx_load_file(const char *path, const LoadOptions *opt, Graph **out, Err *e) {
    return onnx_load_file_symbols(path, opt, NULL, out, e);
}

int onnx_load_file_symbols(const char *path, const LoadOptions *opt, LoadSymbols *symbols,
                           Graph **out, Err *e) {
    uint8_t *buf;
    size_t size;
    *out = NULL;
    int rc = file_read_all(path, MAX_MODEL_BYTES, &buf, &size, e);
    if (rc)
        return rc;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    if (!dir[0])
        snprintf(dir, sizeof dir, "/");
    // The file's bytes go as soon as they are unpacked: the peak is the file and the message,
    // not the file, the message and the graph.
    Onnx__ModelProto *mp = unpack_model(buf, size, path, e);
    free(buf);
    return mp ? load_unpacked(mp, path, dir, opt, symbols, out, e) : e->code;
}

int onnx_read_tensor_file(const char *path, DType *dtype, int *rank, int64_t *dims, void **data,
                          Err *e) {
    uint8_t *buf;
    size_t size;
    int rc = file_read_all(path, MAX_MODEL_BYTES, &buf, &size, e);
    if (rc)
        return rc;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, buf);
    free(buf);
    if (!tp)
        return err_set(e, ST_INVALID, "%s: not a valid ONNX TensorProto file", path);
    Graph *g = graph_create(path);
    Tensor *t = graph_detached_tensor(g, "tensor");
    Loader L = {g, NULL, e, NULL, NULL, NULL, 0};
    rc = tensor_from_proto(&L, tp, "tensor", t);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    if (rc == ST_OK) {
        *dtype = t->dtype;
        *rank = t->rank;
        memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
        *data = t->data;
        t->data = NULL;
    } else {
        err_prefix(e, "%s: ", path);
    }
    graph_free(g);
    return rc;
}

int parse_input_shapes(char *spec, InputShape *shapes, int max, int *count, Err *e) {
    // Entries separated by ',' or ';': NAME:D1xD2x... (NAME may itself contain ':'; the last one splits).
    char *save = NULL;
    for (char *tok = strtok_r(spec, ",;", &save); tok; tok = strtok_r(NULL, ",;", &save)) {
        if (*count >= max)
            return err_set(e, ST_USAGE, "--input-shapes: too many entries (max %d)", max);
        char *colon = strrchr(tok, ':');
        if (!colon || colon == tok)
            return err_set(e, ST_USAGE, "--input-shapes: '%s' is not NAME:DIMS (e.g. x:1x3x224x224)",
                           tok);
        *colon = 0;
        InputShape *s = &shapes[(*count)++];
        s->name = tok;
        s->rank = 0;
        s->source = NULL;
        char *p = colon + 1;
        if (strcmp(p, "scalar") == 0 || !*p)
            continue;
        for (;;) {
            char *end;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || errno || v < 0)
                return err_set(e, ST_USAGE, "--input-shapes: bad dimension in '%s:%s'", tok,
                               colon + 1);
            if (s->rank >= ORCH_MAX_RANK)
                return err_set(e, ST_USAGE, "--input-shapes: '%s' has more than %d dims", tok,
                               ORCH_MAX_RANK);
            s->dims[s->rank++] = v;
            if (!*end)
                break;
            if (*end != 'x' && *end != 'X')
                return err_set(e, ST_USAGE, "--input-shapes: bad dimension in '%s:%s'", tok,
                               colon + 1);
            p = end + 1;
        }
    }
    return ST_OK;
}

int onnx_inline_external_data(const void *data, size_t size, const char *name,
                              const char *base_dir, uint8_t **out, size_t *out_size, Err *e) {
    *out = NULL;
    *out_size = 0;
    if (nests_too_deep(&onnx__model_proto__descriptor, data, size))
        return err_too_deep(e, name);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    if (!mp)
        return err_set(e, ST_INVALID,
                       "%s: not a valid ONNX model (the protobuf does not parse: truncated, "
                       "corrupt, nested too deeply or not an ONNX file)",
                       name);
    Loader L = {NULL, base_dir, e, NULL, NULL, NULL, 0};
    Onnx__GraphProto *gp = mp->graph;
    size_t n = gp ? gp->n_initializer : 0;
    // What protobuf-c must free is put back before freeing: the external entries, no raw data.
    Onnx__StringStringEntryProto ***saved = calloc(n + 1, sizeof *saved);
    size_t *saved_n = calloc(n + 1, sizeof *saved_n);
    int rc = (saved && saved_n) ? ST_OK : err_set(e, ST_RUNTIME, "out of memory");
    bool any = false;
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->has_data_location ||
            tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
            continue;
        const char *tname = tp->name ? tp->name : "?";
        DType dt = (DType)tp->data_type;
        int64_t numel;
        if (!storable(dt)) {
            rc = err_set(e, ST_UNSUPPORTED, "initializer '%s' has data type %s", tname,
                         dtype_name(dt));
            break;
        }
        if ((rc = check_dims("initializer", tname, tp->dims, tp->n_dims, dt, &numel, e)))
            break;
        uint8_t *bytes = NULL;
        size_t nbytes = (size_t)numel * dtype_size(dt);
        if ((rc = load_external(&L, tp, tname, &bytes, nbytes)))
            break;
        saved[i] = tp->external_data;
        saved_n[i] = tp->n_external_data;
        tp->external_data = NULL;
        tp->n_external_data = 0;
        tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
        tp->has_raw_data = 1;
        tp->raw_data.data = bytes;
        tp->raw_data.len = nbytes;
        any = true;
    }
    if (rc == ST_OK && any) {
        size_t packed = onnx__model_proto__get_packed_size(mp);
        if ((int64_t)packed > MAX_MODEL_BYTES)
            rc = err_set(e, ST_UNSUPPORTED,
                         "%s: with its external data inlined the model is over the 2 GiB "
                         "protobuf limit",
                         name);
        else if (!(*out = malloc(packed ? packed : 1)))
            rc = err_set(e, ST_RUNTIME, "%s: out of memory inlining external data", name);
        else
            *out_size = onnx__model_proto__pack(mp, *out);
    }
    for (size_t i = 0; i < n; i++)
        if (saved && saved[i]) {
            Onnx__TensorProto *tp = gp->initializer[i];
            tp->external_data = saved[i];
            tp->n_external_data = saved_n[i];
        }
    free(saved);
    free(saved_n);
    onnx__model_proto__free_unpacked(mp, NULL); // frees the inlined raw data too (malloc'd)
    if (rc) {
        free(*out);
        *out = NULL;
        *out_size = 0;
        err_prefix(e, "%s: ", name);
    }
    return rc;
}

// ---- splitting the weights out (an artefact's weights section) ----

typedef struct Splitter {
    size_t min_bytes;
    uint8_t *blob;
    size_t size, cap;
    OnnxWeightRef *refs;
    int n, cap_refs;
    bool oom;
} Splitter;

static Onnx__StringStringEntryProto *kv_new(const char *key, const char *value) {
    Onnx__StringStringEntryProto *kv = malloc(sizeof *kv);
    if (!kv)
        return NULL;
    onnx__string_string_entry_proto__init(kv);
    kv->key = strdup(key);
    kv->value = strdup(value);
    if (!kv->key || !kv->value) {
        free(kv->key);
        free(kv->value);
        free(kv);
        return NULL;
    }
    return kv;
}

// Moves tp's raw payload into the blob and makes tp refer to it; payloads stay in place where
// they are small, external already or not raw.
static void split_tensor(Splitter *S, Onnx__TensorProto *tp) {
    if (S->oom || !tp->has_raw_data || !tp->raw_data.data || tp->raw_data.len < S->min_bytes ||
        tp->raw_data.len == 0 ||
        (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return;
    size_t len = tp->raw_data.len;
    size_t at = (S->size + ONNX_WEIGHTS_ALIGN - 1) / ONNX_WEIGHTS_ALIGN * ONNX_WEIGHTS_ALIGN;
    if (at + len > S->cap) {
        size_t cap = ORCH_MAX(2 * S->cap, at + len);
        uint8_t *b = realloc(S->blob, cap);
        if (!b) {
            S->oom = true;
            return;
        }
        S->blob = b;
        S->cap = cap;
    }
    memset(S->blob + S->size, 0, at - S->size);
    memcpy(S->blob + at, tp->raw_data.data, len);
    S->size = at + len;
    if (S->n == S->cap_refs) {
        S->cap_refs = S->cap_refs ? 2 * S->cap_refs : 64;
        S->refs = xrealloc(S->refs, sizeof *S->refs * (size_t)S->cap_refs);
    }
    S->refs[S->n++] = (OnnxWeightRef){xstrdup(tp->name ? tp->name : ""), at, len};
    char off[32], n[32];
    snprintf(off, sizeof off, "%zu", at);
    snprintf(n, sizeof n, "%zu", len);
    Onnx__StringStringEntryProto **ext = malloc(3 * sizeof *ext);
    if (!ext) {
        S->oom = true;
        return;
    }
    ext[0] = kv_new("location", ONNX_WEIGHTS_LOCATION);
    ext[1] = kv_new("offset", off);
    ext[2] = kv_new("length", n);
    if (!ext[0] || !ext[1] || !ext[2]) {
        for (int i = 0; i < 3; i++)
            if (ext[i])
                onnx__string_string_entry_proto__free_unpacked(ext[i], NULL);
        free(ext);
        S->oom = true;
        return;
    }
    for (size_t i = 0; i < tp->n_external_data; i++) // none: the payload was inline
        onnx__string_string_entry_proto__free_unpacked(tp->external_data[i], NULL);
    free(tp->external_data);
    tp->external_data = ext;
    tp->n_external_data = 3;
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    free(tp->raw_data.data);
    tp->raw_data.data = NULL;
    tp->raw_data.len = 0;
    tp->has_raw_data = 0;
}

// The graph's initializers, then those of the bodies its nodes hold (If, Loop, Scan).
static void split_graph(Splitter *S, Onnx__GraphProto *gp, int depth) {
    if (!gp || depth > MAX_MESSAGE_DEPTH)
        return;
    for (size_t i = 0; i < gp->n_initializer; i++)
        split_tensor(S, gp->initializer[i]);
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t j = 0; j < gp->node[i]->n_attribute; j++) {
            Onnx__AttributeProto *ap = gp->node[i]->attribute[j];
            split_graph(S, ap->g, depth + 1);
            for (size_t k = 0; k < ap->n_graphs; k++)
                split_graph(S, ap->graphs[k], depth + 1);
        }
}

void onnx_weight_refs_free(OnnxWeightRef *refs, int n) {
    for (int i = 0; i < n; i++)
        free(refs[i].name);
    free(refs);
}

int onnx_split_weights(const void *data, size_t size, const char *name, size_t min_bytes,
                       uint8_t **out, size_t *out_size, uint8_t **weights, size_t *weights_size,
                       OnnxWeightRef **refs, int *n_refs, Err *e) {
    *out = NULL;
    *out_size = 0;
    *weights = NULL;
    *weights_size = 0;
    *refs = NULL;
    *n_refs = 0;
    Onnx__ModelProto *mp = unpack_model(data, size, name, e);
    if (!mp)
        return e->code;
    Splitter S = {.min_bytes = min_bytes ? min_bytes : 1};
    split_graph(&S, mp->graph, 0);
    int rc = ST_OK;
    if (S.oom)
        rc = err_set(e, ST_RUNTIME, "%s: out of memory moving the weights into their section", name);
    else if (S.n) {
        size_t packed = onnx__model_proto__get_packed_size(mp);
        if (!(*out = malloc(packed ? packed : 1)))
            rc = err_set(e, ST_RUNTIME, "%s: out of memory packing the model", name);
        else
            *out_size = onnx__model_proto__pack(mp, *out);
    }
    onnx__model_proto__free_unpacked(mp, NULL);
    if (rc || !S.n) {
        free(S.blob);
        onnx_weight_refs_free(S.refs, S.n);
        free(*out);
        *out = NULL;
        *out_size = 0;
        return rc;
    }
    *weights = S.blob;
    *weights_size = S.size;
    *refs = S.refs;
    *n_refs = S.n;
    return ST_OK;
}
