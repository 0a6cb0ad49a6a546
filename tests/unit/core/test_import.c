// Unit tests of the ONNX loader, shape inference and folding: every initializer storage form,
// Constant nodes, opset checks, input shape binding, topological order and cycles, external-data
// path rules, folding of exporter-style shape chains and its work/memory bounds, Identity/dead-node
// removal, and the list of unsupported ops. Models are built in C (model_builder.h).
#include "../check.h"
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "../model_builder.h"
#include "onnx/load.h"
#include "interp/interp.h"
#include "ir/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static Graph *load(MB *b, const LoadOptions *opt, Err *e) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    Graph *g = NULL;
    onnx_load_memory(buf, len, "test.onnx", NULL, opt, &g, e);
    free(buf);
    return g;
}

static const int64_t D4[] = {4}, D2x3[] = {2, 3};

static void initializer_storage_forms(void) {
    MB *b = mb_new(17);
    float f[4] = {1.5f, -2, 3, 1e-8f};
    mb_init(b, mb_raw(b, "raw_f32", 1, 1, D4, f, sizeof f));
    Onnx__TensorProto *tf = mb_tensor(b, "typed_f32", 1, 1, D4);
    tf->n_float_data = 4;
    tf->float_data = f;
    mb_init(b, tf);
    int64_t i64[4] = {-1, 0, INT64_MAX, INT64_MIN};
    Onnx__TensorProto *ti = mb_tensor(b, "typed_i64", 7, 1, D4);
    ti->n_int64_data = 4;
    ti->int64_data = i64;
    mb_init(b, ti);
    int32_t i32s[4] = {1, 0, 1, 1}, u8s[4] = {0, 255, 7, 128}, h[4] = {0x3c00, 0xc000, 0x7c00, 0x0001};
    const int dts[] = {9, 2, 10};
    const char *names[] = {"typed_bool", "typed_u8", "typed_f16"};
    int32_t *vals[] = {i32s, u8s, h};
    for (int k = 0; k < 3; k++) {
        Onnx__TensorProto *t = mb_tensor(b, names[k], dts[k], 1, D4);
        t->n_int32_data = 4;
        t->int32_data = vals[k];
        mb_init(b, t);
    }
    double d[4] = {0.1, -0.2, 1e300, 0};
    Onnx__TensorProto *td = mb_tensor(b, "typed_f64", 11, 1, D4);
    td->n_double_data = 4;
    td->double_data = d;
    mb_init(b, td);
    uint64_t u64[4] = {1, 2, 4294967295u, 0};
    Onnx__TensorProto *tu = mb_tensor(b, "typed_u32", 12, 1, D4);
    tu->n_uint64_data = 4;
    tu->uint64_data = u64;
    mb_init(b, tu);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "Add", "add", "x,raw_f32", "y", NULL);
    mb_output(b, "y");
    Err e = {0};
    Graph *g = load(b, NULL, &e);
    CHECK_MSG(g, "%s", e.msg);
    if (g) {
        Tensor *t = graph_find_tensor(g, "raw_f32");
        CHECK(t && t->kind == TK_CONST && memcmp(t->data, f, sizeof f) == 0);
        t = graph_find_tensor(g, "typed_f32");
        CHECK(t && t->dtype == DT_FLOAT && memcmp(t->data, f, sizeof f) == 0);
        t = graph_find_tensor(g, "typed_i64");
        CHECK(t && ((int64_t *)t->data)[2] == INT64_MAX && ((int64_t *)t->data)[3] == INT64_MIN);
        t = graph_find_tensor(g, "typed_bool");
        CHECK(t && t->dtype == DT_BOOL && ((uint8_t *)t->data)[0] == 1 && ((uint8_t *)t->data)[1] == 0);
        t = graph_find_tensor(g, "typed_u8");
        CHECK(t && ((uint8_t *)t->data)[1] == 255 && ((uint8_t *)t->data)[3] == 128);
        t = graph_find_tensor(g, "typed_f16");
        CHECK(t && elem_get_f64(DT_FLOAT16, t->data, 0) == 1.0 &&
              elem_get_f64(DT_FLOAT16, t->data, 1) == -2.0 &&
              isinf(elem_get_f64(DT_FLOAT16, t->data, 2)) &&
              elem_get_f64(DT_FLOAT16, t->data, 3) == ldexp(1, -24));
        t = graph_find_tensor(g, "typed_f64");
        CHECK(t && ((double *)t->data)[2] == 1e300);
        t = graph_find_tensor(g, "typed_u32");
        CHECK(t && ((uint32_t *)t->data)[2] == 4294967295u);
        CHECK(g->n_inputs == 1 && g->n_nodes == 1);
    }
    graph_free(g);
    mb_free(b);
}

static void bad_initializers(void) {
    struct {
        int dtype;
        int64_t dim;
        size_t raw;
        int code;
        const char *needle;
    } cases[] = {
        {1, 4, 12, ST_INVALID, "raw data"},          // size mismatch
        {1, -1, 0, ST_INVALID, "negative"},          // negative dim
        {8, 1, 1, ST_UNSUPPORTED, "string"},         // string tensor
        {0, 1, 4, ST_INVALID, "no data type"},       // undefined dtype
    };
    for (size_t k = 0; k < ORCH_COUNT(cases); k++) {
        MB *b = mb_new(17);
        uint8_t zeros[64] = {1};
        int64_t dim = cases[k].dim;
        Onnx__TensorProto *t = mb_raw(b, "w", cases[k].dtype, 1, &dim, zeros, cases[k].raw);
        if (cases[k].dtype == 0)
            t->has_data_type = 0;
        mb_init(b, t);
        mb_input(b, "x", 1, 1, D4);
        mb_node(b, "Add", "add", "x,w", "y", NULL);
        mb_output(b, "y");
        Err e = {0};
        Graph *g = load(b, NULL, &e);
        CHECK_MSG(!g && e.code == cases[k].code && strstr(e.msg, cases[k].needle) &&
                      strstr(e.msg, "test.onnx") && strstr(e.msg, "'w'"),
                  "case %zu: code %d msg %s", k, e.code, e.msg);
        graph_free(g);
        mb_free(b);
    }
    // Typed field with the wrong count.
    MB *b = mb_new(17);
    Onnx__TensorProto *t = mb_tensor(b, "w", 1, 1, D4);
    float f[3] = {1, 2, 3};
    t->n_float_data = 3;
    t->float_data = f;
    mb_init(b, t);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "Add", "add", "x,w", "y", NULL);
    mb_output(b, "y");
    Err e = {0};
    Graph *g = load(b, NULL, &e);
    CHECK_MSG(!g && e.code == ST_INVALID && strstr(e.msg, "holds 3 values"), "%s", e.msg);
    mb_free(b);
}

static void constant_nodes(void) {
    MB *b = mb_new(17);
    float f[6] = {1, 2, 3, 4, 5, 6};
    mb_node(b, "Constant", "c1", "", "c_t",
            mb_attr_t(b, "value", mb_raw(b, "v", 1, 2, D2x3, f, sizeof f)), NULL);
    mb_node(b, "Constant", "c2", "", "c_f", mb_attr_f(b, "value_float", 2.5f), NULL);
    int64_t iv[3] = {3, 1, 2};
    mb_node(b, "Constant", "c3", "", "c_i", mb_attr_ints(b, "value_ints", 3, iv), NULL);
    mb_input(b, "x", 1, 2, D2x3);
    mb_node(b, "Add", "add", "x,c_t", "y", NULL);
    mb_output(b, "y");
    mb_output(b, "c_f");
    mb_output(b, "c_i");
    Err e = {0};
    Graph *g = load(b, NULL, &e);
    CHECK_MSG(g, "%s", e.msg);
    if (g) {
        Tensor *t = graph_find_tensor(g, "c_t");
        CHECK(t && t->kind == TK_CONST && t->rank == 2 && ((float *)t->data)[5] == 6);
        t = graph_find_tensor(g, "c_f");
        CHECK(t && t->rank == 0 && t->dtype == DT_FLOAT && *(float *)t->data == 2.5f);
        t = graph_find_tensor(g, "c_i");
        CHECK(t && t->rank == 1 && t->dims[0] == 3 && ((int64_t *)t->data)[0] == 3);
        CHECK(g->n_nodes == 1); // the Constant nodes became tensors
    }
    graph_free(g);
    mb_free(b);
}

static void opset_checks(void) {
    struct {
        int64_t opset;
        int code;
        const char *needle;
    } cases[] = {
        {10, ST_UNSUPPORTED, "older"},
        {22, ST_UNSUPPORTED, "newer"},
        {0, ST_INVALID, "no opset"},
        {11, ST_OK, NULL},
        {21, ST_OK, NULL},
    };
    for (size_t k = 0; k < ORCH_COUNT(cases); k++) {
        MB *b = mb_new(cases[k].opset);
        mb_input(b, "x", 1, 1, D4);
        mb_node(b, "Relu", "r", "x", "y", NULL);
        mb_output(b, "y");
        Err e = {0};
        Graph *g = load(b, NULL, &e);
        CHECK_MSG(e.code == cases[k].code && (!cases[k].needle || strstr(e.msg, cases[k].needle)),
                  "opset %lld: %d %s", (long long)cases[k].opset, e.code, e.msg);
        CHECK(!g == (cases[k].code != ST_OK));
        graph_free(g);
        mb_free(b);
    }
}

static void input_shape_binding(void) {
    const int64_t sym[] = {-1, 3, -2};
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 3, sym);
    mb_node(b, "Relu", "r", "x", "y", NULL);
    mb_output(b, "y");
    Err e = {0};
    Graph *g = load(b, NULL, &e);
    CHECK_MSG(!g && e.code == ST_INVALID && strstr(e.msg, "'x'") && strstr(e.msg, "d1") &&
                  strstr(e.msg, "--input-shapes"),
              "%s", e.msg);
    char spec[] = "x:2x3x5";
    InputShape shapes[4];
    LoadOptions lo = {.shapes = shapes};
    Err pe = {0};
    CHECK(parse_input_shapes(spec, shapes, 4, &lo.n_shapes, &pe) == ST_OK && lo.n_shapes == 1);
    Err e2 = {0};
    g = load(b, &lo, &e2);
    CHECK_MSG(g, "%s", e2.msg);
    if (g) {
        Tensor *x = graph_find_tensor(g, "x");
        CHECK(x->rank == 3 && x->dims[0] == 2 && x->dims[1] == 3 && x->dims[2] == 5);
        Err e3 = {0};
        CHECK(graph_infer_and_fold(g, NULL, &e3) == ST_OK);
        CHECK(graph_find_tensor(g, "y")->dims[2] == 5);
    }
    graph_free(g);
    // A fixed dimension cannot be overridden; an unknown name is a usage error.
    char spec2[] = "x:2x4x5";
    lo.n_shapes = 0;
    parse_input_shapes(spec2, shapes, 4, &lo.n_shapes, &pe);
    Err e4 = {0};
    g = load(b, &lo, &e4);
    CHECK_MSG(!g && e4.code == ST_INVALID && strstr(e4.msg, "fixes it to 3"), "%s", e4.msg);
    char spec3[] = "nope:1";
    lo.n_shapes = 0;
    parse_input_shapes(spec3, shapes, 4, &lo.n_shapes, &pe);
    Err e5 = {0};
    g = load(b, &lo, &e5);
    CHECK_MSG(!g && e5.code == ST_USAGE && strstr(e5.msg, "nope"), "%s", e5.msg);
    char bad[] = "x:2xqx5";
    int cnt = 0;
    Err e6 = {0};
    CHECK(parse_input_shapes(bad, shapes, 4, &cnt, &e6) == ST_USAGE);
    mb_free(b);
}

static void topological_order_and_cycles(void) {
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "Relu", "second", "a", "y", NULL); // uses 'a' before it is defined in the file
    mb_node(b, "Relu", "first", "x", "a", NULL);
    mb_output(b, "y");
    Err e = {0};
    Graph *g = load(b, NULL, &e);
    CHECK_MSG(g, "%s", e.msg);
    if (g)
        CHECK(strcmp(g->nodes[0]->name, "first") == 0 && strcmp(g->nodes[1]->name, "second") == 0);
    graph_free(g);
    mb_free(b);

    b = mb_new(17);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "Add", "n1", "x,b", "a", NULL);
    mb_node(b, "Relu", "n2", "a", "b", NULL);
    mb_node(b, "Relu", "n3", "a", "y", NULL);
    mb_output(b, "y");
    Err e2 = {0};
    g = load(b, NULL, &e2);
    CHECK_MSG(!g && e2.code == ST_INVALID && strstr(e2.msg, "cycle"), "%s", e2.msg);
    mb_free(b);

    b = mb_new(17);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "Add", "adder", "x,ghost", "y", NULL);
    mb_output(b, "y");
    Err e3 = {0};
    g = load(b, NULL, &e3);
    CHECK_MSG(!g && e3.code == ST_INVALID && strstr(e3.msg, "ghost") && strstr(e3.msg, "adder"),
              "%s", e3.msg);
    mb_free(b);

    b = mb_new(17);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "Relu", "r1", "x", "y", NULL);
    mb_node(b, "Relu", "r2", "x", "y", NULL);
    mb_output(b, "y");
    Err e4 = {0};
    g = load(b, NULL, &e4);
    CHECK_MSG(!g && e4.code == ST_INVALID && strstr(e4.msg, "twice"), "%s", e4.msg);
    mb_free(b);
}

static void external_data_paths(void) {
    char dir[] = "/tmp/orch_test_extXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/w.bin", dir);
    FILE *f = fopen(path, "wb");
    float w[4] = {1, 2, 3, 4};
    fwrite("pad!", 1, 4, f);
    fwrite(w, 4, 4, f);
    fclose(f);
    const char *locs[] = {"w.bin", "/etc/passwd", "../w.bin", "sub/../../w.bin", "missing.bin",
                          "w.bin"};
    const char *offsets[] = {"4", "0", "0", "0", "0", "8"};
    const char *needles[] = {NULL, "relative", "leaves", "leaves", "not found", "too short"};
    for (size_t k = 0; k < ORCH_COUNT(locs); k++) {
        MB *b = mb_new(17);
        Onnx__TensorProto *t = mb_tensor(b, "w", 1, 1, D4);
        t->has_data_location = 1;
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        Onnx__StringStringEntryProto **kv = arena_alloc(b->a, sizeof(void *) * 2);
        for (int j = 0; j < 2; j++) {
            kv[j] = arena_alloc(b->a, sizeof **kv);
            onnx__string_string_entry_proto__init(kv[j]);
        }
        kv[0]->key = "location";
        kv[0]->value = (char *)locs[k];
        kv[1]->key = "offset";
        kv[1]->value = (char *)offsets[k];
        t->n_external_data = 2;
        t->external_data = kv;
        mb_init(b, t);
        mb_input(b, "x", 1, 1, D4);
        mb_node(b, "Add", "add", "x,w", "y", NULL);
        mb_output(b, "y");
        size_t len;
        uint8_t *buf = mb_pack(b, &len);
        Graph *g = NULL;
        Err e = {0};
        onnx_load_memory(buf, len, "ext.onnx", dir, NULL, &g, &e);
        if (!needles[k]) {
            CHECK_MSG(g && memcmp(graph_find_tensor(g, "w")->data, w, sizeof w) == 0, "%s", e.msg);
        } else {
            CHECK_MSG(!g && e.code == ST_INVALID && strstr(e.msg, needles[k]), "case %zu: %s", k,
                      e.msg);
        }
        graph_free(g);
        free(buf);
        mb_free(b);
    }
    unlink(path);
    rmdir(dir);
}

// The chain torch.flatten / view export: Shape → Gather → Unsqueeze → Concat → Reshape.
static void fold_shape_chain(void) {
    const int64_t xd[] = {-1, 3, 4, 4}, scalar[] = {0}, one[] = {1};
    MB *b = mb_new(13);
    mb_input(b, "x", 1, 4, xd);
    int64_t zero = 0, minus1 = -1;
    mb_init(b, mb_raw(b, "idx0", 7, 0, scalar, &zero, 8));
    mb_init(b, mb_raw(b, "minus1", 7, 1, one, &minus1, 8));
    mb_init(b, mb_raw(b, "axes0", 7, 1, one, &zero, 8));
    mb_node(b, "Shape", "shape", "x", "s", NULL);
    mb_node(b, "Gather", "gather", "s,idx0", "n", mb_attr_i(b, "axis", 0), NULL);
    mb_node(b, "Unsqueeze", "unsq", "n,axes0", "n1", NULL);
    mb_node(b, "Concat", "concat", "n1,minus1", "newshape", mb_attr_i(b, "axis", 0), NULL);
    mb_node(b, "Reshape", "reshape", "x,newshape", "flat", NULL);
    mb_node(b, "Identity", "ident", "flat", "flat2", NULL);
    mb_node(b, "Relu", "relu", "flat2", "y", NULL);
    mb_node(b, "Relu", "unused", "x", "dead", NULL);
    mb_output(b, "y");
    char spec[] = "x:2x3x4x4";
    InputShape shapes[1];
    LoadOptions lo = {.shapes = shapes};
    Err e = {0};
    parse_input_shapes(spec, shapes, 1, &lo.n_shapes, &e);
    Graph *g = load(b, &lo, &e);
    FoldStats st = {0};
    CHECK_MSG(g && graph_infer_and_fold(g, &st, &e) == ST_OK, "%s", e.msg);
    if (g && e.code == ST_OK) {
        CHECK_MSG(g->n_nodes == 2, "%d nodes left", g->n_nodes); // Reshape, Relu
        CHECK(strcmp(g->nodes[0]->op, "Reshape") == 0 && strcmp(g->nodes[1]->op, "Relu") == 0);
        Tensor *ns = graph_find_tensor(g, "newshape");
        CHECK(ns && ns->kind == TK_CONST && ((int64_t *)ns->data)[0] == 2 &&
              ((int64_t *)ns->data)[1] == -1);
        Tensor *y = graph_find_tensor(g, "y");
        CHECK(y->rank == 2 && y->dims[0] == 2 && y->dims[1] == 48);
        CHECK(st.folded == 4 && st.bypassed == 1 && st.dead == 1);
        // and it runs
        float x[96], *out[1] = {NULL};
        for (int i = 0; i < 96; i++)
            x[i] = (float)(i % 7) - 3;
        const void *ins[1] = {x};
        Err re = {0};
        CHECK(interp_run(g, ins, (void **)out, NULL, &re) == ST_OK);
        for (int i = 0; out[0] && i < 96; i++)
            CHECK(out[0][i] == (x[i] > 0 ? x[i] : 0));
        free(out[0]);
    }
    graph_free(g);
    mb_free(b);
}

// Folding is bounded by work and memory (FoldLimits): past a bound a node stays in the graph,
// computed at run time, and the model still gives the same outputs. Here, with lowered limits:
// 256x256 constants made by Expand, multiplied. The prim clean-up must not fold what import kept.
static Graph *fold_limits_model(MB *b, FoldStats *st, Err *e) {
    const int64_t xd[] = {256, 256}, one[] = {1, 1}, two[] = {2};
    float a = 1.0f, c = 2.0f;
    int64_t shape[] = {256, 256};
    mb_input(b, "x", 1, 2, xd);
    mb_init(b, mb_raw(b, "a", 1, 2, one, &a, 4));
    mb_init(b, mb_raw(b, "c", 1, 2, one, &c, 4));
    mb_init(b, mb_raw(b, "shape", 7, 1, two, shape, 16));
    mb_node(b, "Expand", "expand_a", "a,shape", "A", NULL);
    mb_node(b, "Expand", "expand_c", "c,shape", "C", NULL);
    mb_node(b, "MatMul", "matmul", "A,C", "P", NULL); // every element 2 * 256 = 512
    mb_node(b, "Add", "add", "x,P", "y", NULL);
    mb_output(b, "y");
    Graph *g = load(b, NULL, e);
    if (g && graph_infer_and_fold(g, st, e) != ST_OK) {
        graph_free(g);
        g = NULL;
    }
    return g;
}

// The recurrent operators' FLOPs are their products with W and R at every step (what orch info
// and the zoo's GFLOP/s report), not one per output element: an LSTM of 7 steps, batch 2, input
// 5, hidden 3, both directions: 2 * 14 rows * (2*12*5 + 2*12*3) = 5376; a GRU of the same shape,
// 3 gates: 4032.
static void flops_recurrent(void) {
    static const struct {
        const char *op;
        int gates;
    } cases[] = {{"LSTM", 4}, {"GRU", 3}, {"RNN", 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t G = cases[c].gates, xd[] = {7, 2, 5}, wd[] = {2, 3 * G, 5}, rd[] = {2, 3 * G, 3};
        float w[2 * 12 * 5] = {0}, r[2 * 12 * 3] = {0};
        MB *b = mb_new(14);
        mb_input(b, "x", 1, 3, xd);
        mb_init(b, mb_raw(b, "W", 1, 3, wd, w, sizeof(float) * (size_t)(2 * 3 * G * 5)));
        mb_init(b, mb_raw(b, "R", 1, 3, rd, r, sizeof(float) * (size_t)(2 * 3 * G * 3)));
        mb_node(b, cases[c].op, "rnn", "x,W,R", "y", mb_attr_i(b, "hidden_size", 3),
                mb_attr_s(b, "direction", "bidirectional"), NULL);
        mb_output(b, "y");
        Err e = {0};
        Graph *g = load(b, NULL, &e);
        FoldStats st = {0};
        if (g && graph_infer_and_fold(g, &st, &e) != ST_OK) {
            graph_free(g);
            g = NULL;
        }
        CHECK_MSG(g, "%s: %s", cases[c].op, e.msg);
        if (g) {
            int64_t want = 2 * 14 * (2 * 3 * G * 5 + 2 * 3 * G * 3);
            CHECK_MSG(graph_flops(g) == want, "%s: %lld FLOPs, want %lld", cases[c].op,
                      (long long)graph_flops(g), (long long)want);
        }
        graph_free(g);
        mb_free(b);
    }
}

static int count_ops(const Graph *g, const char *op) {
    int n = 0;
    for (int k = 0; k < g->n_nodes; k++)
        n += strcmp(g->nodes[k]->op, op) == 0;
    return n;
}

static void check_fold_limits_outputs(Graph *g) {
    static float x[256 * 256];
    for (int i = 0; i < 256 * 256; i++)
        x[i] = (float)(i % 11) - 5;
    const void *ins[1] = {x};
    float *out[1] = {NULL};
    Err re = {0};
    CHECK_MSG(interp_run(g, ins, (void **)out, NULL, &re) == ST_OK, "%s", re.msg);
    int bad = 0;
    for (int i = 0; out[0] && i < 256 * 256; i++)
        bad += out[0][i] != x[i] + 512.0f;
    CHECK_MSG(out[0] && bad == 0, "%d wrong outputs", bad);
    free(out[0]);
}

static void fold_bounded(void) {
    // Defaults: everything folds (the MatMul is 2^25 FLOPs, 256 KiB).
    MB *b = mb_new(13);
    FoldStats st = {0};
    Err e = {0};
    Graph *g = fold_limits_model(b, &st, &e);
    CHECK_MSG(g, "%s", e.msg);
    if (g) {
        CHECK_MSG(g->n_nodes == 1 && count_ops(g, "Add") == 1, "%d nodes", g->n_nodes);
        check_fold_limits_outputs(g);
    }
    graph_free(g);
    mb_free(b);

    // Work per node under the MatMul's: both Expands fold, the MatMul stays, and fission's own
    // constant folding leaves its LINEAR primitive too.
    FoldLimits lim = FOLD_LIMITS_DEFAULT;
    lim.node_flops = 1e6;
    fold_set_limits(&lim);
    b = mb_new(13);
    e = (Err){0};
    g = fold_limits_model(b, &st, &e);
    CHECK_MSG(g, "%s", e.msg);
    if (g) {
        CHECK_MSG(g->n_nodes == 2 && count_ops(g, "MatMul") == 1 && count_ops(g, "Expand") == 0,
                  "%d nodes", g->n_nodes);
        check_fold_limits_outputs(g);
        PrimGraph *pg = NULL;
        CHECK_MSG(fission_run(g, NULL, &pg, NULL, &e) == ST_OK &&
                      fission_cleanup(pg, NULL, &e) == ST_OK,
                  "%s", e.msg);
        int counts[PRIM_KIND_COUNT] = {0};
        if (pg)
            prim_graph_counts(pg, counts);
        CHECK_MSG(counts[PRIM_LINEAR] == 1, "%d linear primitives", counts[PRIM_LINEAR]);
        prim_graph_free(pg);
    }
    graph_free(g);
    mb_free(b);

    // Bytes in all: the first Expand (256 KiB) fits, the second does not, so neither it nor the
    // MatMul reading it folds.
    lim = FOLD_LIMITS_DEFAULT;
    lim.total_bytes = (size_t)300 << 10;
    fold_set_limits(&lim);
    b = mb_new(13);
    e = (Err){0};
    g = fold_limits_model(b, &st, &e);
    CHECK_MSG(g, "%s", e.msg);
    if (g) {
        CHECK_MSG(g->n_nodes == 3 && count_ops(g, "Expand") == 1 && count_ops(g, "MatMul") == 1,
                  "%d nodes", g->n_nodes);
        Tensor *A = graph_find_tensor(g, "A");
        CHECK(A && A->kind == TK_CONST);
        check_fold_limits_outputs(g);
    }
    graph_free(g);
    mb_free(b);
    fold_set_limits(NULL);
}

static void unsupported_ops_listed_together(void) {
    MB *b = mb_new(17);
    mb_input(b, "x", 1, 1, D4);
    mb_node(b, "FancyOp", "f1", "x", "a", NULL);
    mb_node(b, "Relu", "r", "a", "b", NULL);
    Onnx__NodeProto *n = mb_node(b, "MyCustom", "f2", "b", "y", NULL);
    n->domain = "com.example";
    mb_output(b, "y");
    Err e = {0};
    Graph *g = load(b, NULL, &e);
    CHECK_MSG(g, "%s", e.msg); // loading succeeds; the support check lists both
    if (g) {
        Err e2 = {0};
        CHECK(graph_infer_and_fold(g, NULL, &e2) == ST_UNSUPPORTED);
        CHECK_MSG(strstr(e2.msg, "2 nodes") && strstr(e2.msg, "FancyOp") &&
                      strstr(e2.msg, "'f1'") && strstr(e2.msg, "MyCustom") &&
                      strstr(e2.msg, "com.example"),
                  "%s", e2.msg);
    }
    graph_free(g);
    mb_free(b);
}

static void garbage_bytes(void) {
    const char *inputs[] = {"", "\x08\x07", "not an onnx model at all", "\xff\xff\xff\xff\xff"};
    for (size_t k = 0; k < ORCH_COUNT(inputs); k++) {
        Graph *g = NULL;
        Err e = {0};
        int rc = onnx_load_memory(inputs[k], strlen(inputs[k]), "junk.onnx", NULL, NULL, &g, &e);
        CHECK_MSG(rc == ST_INVALID && !g && strstr(e.msg, "junk.onnx"), "case %zu: %s", k, e.msg);
    }
}

static void float16_round_trip(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        if (f32_to_f16(f) != h)
            bad++;
    }
    CHECK_MSG(bad == 0, "%d half values do not round-trip", bad);
    CHECK(f32_to_f16(65519.0f) == 0x7bff && f32_to_f16(65520.0f) == 0x7c00);
    CHECK(f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00); // tie rounds to even
    CHECK(f32_to_bf16(1.0f) == 0x3f80 && bf16_to_f32(0x3f80) == 1.0f);
}

int main(void) {
    RUN(initializer_storage_forms);
    RUN(bad_initializers);
    RUN(constant_nodes);
    RUN(opset_checks);
    RUN(input_shape_binding);
    RUN(topological_order_and_cycles);
    RUN(external_data_paths);
    RUN(fold_shape_chain);
    RUN(fold_bounded);
    RUN(flops_recurrent);
    RUN(unsupported_ops_listed_together);
    RUN(garbage_bytes);
    RUN(float16_round_trip);
    return CHECK_DONE();
}
