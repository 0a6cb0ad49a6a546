// Unit tests of the primitive graph verifier (prim_graph_verify): a correct graph using every
// non-opaque kind passes; graphs broken on purpose, one defect each, are rejected with a message
// that names the primitive (kind, #id, origin) and the defect.
#include "../check.h"
#include "../graph_builder.h"
#include "prim/prim_build.h"

#include <stdlib.h>
#include <string.h>

// Expects a rejection whose message contains both `prim` (e.g. "reduce #1 (from 'r')") and `what`.
static void expect_reject(const PrimGraph *pg, const char *prim, const char *what) {
    Err e = {0};
    int rc = prim_graph_verify(pg, &e);
    CHECK_MSG(rc == ST_RUNTIME, "verify returned %d", rc);
    CHECK_MSG(strstr(e.msg, prim) != NULL, "'%s' not in: %s", prim, e.msg);
    CHECK_MSG(strstr(e.msg, what) != NULL, "'%s' not in: %s", what, e.msg);
}

static void accepts_correct_graph(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {2, 8, 4}, wd[] = {4, 5};
    int x = gb_input(pg, "x", 3, xd), w = gb_input(pg, "w", 2, wd);
    PB b = {pg, "ew"};
    int e = pb_ew2i(&b, EW_MUL, x, 0.5);
    b.origin = "red";
    int r = pb_reduce(&b, RED_MAX, e, 1u << 2, true, false);
    b.origin = "sub";
    int c = pb_ew2(&b, EW_SUB, e, r);
    b.origin = "lay";
    const int perm[] = {1, 0, 2};
    int t = pb_transpose(&b, c, perm); // 8x2x4
    const int64_t start[] = {1, 0, 0}, step[] = {2, 1, 1}, sd[] = {3, 2, 4};
    int s = pb_slice(&b, t, start, step, sd); // 3x2x4
    const int64_t rd[] = {6, 4};
    int v = pb_reshape(&b, s, 2, rd);
    b.origin = "mm";
    gb_output(pg, pb_matmul(&b, v, w)); // 6x5
    Err err = {0};
    CHECK_MSG(prim_graph_verify(pg, &err) == ST_OK, "%s", err.msg);
    prim_graph_free(pg);
}

static void rejects_use_before_define(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {4};
    int x = gb_input(pg, "x", 1, xd);
    PB b = {pg, "relu"};
    int a = pb_ew1(&b, EW_RELU, x);
    b.origin = "exp";
    gb_output(pg, pb_ew1(&b, EW_EXP, a));
    Prim *first = pg->prims[0]; // the exp now runs before the relu that defines its input
    pg->prims[0] = pg->prims[1];
    pg->prims[1] = first;
    expect_reject(pg, "elementwise #1 (from 'exp')", "used before it is defined");
    prim_graph_free(pg);
}

static void rejects_wrong_reduce_shape(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {2, 3};
    int x = gb_input(pg, "x", 2, xd);
    PB b = {pg, "r"};
    gb_output(pg, pb_reduce(&b, RED_SUM, x, 1u << 1, true, false)); // 2x1
    pg->prims[0]->red.keepdims = false; // says 2, the output tensor is 2x1
    expect_reject(pg, "reduce #0 (from 'r')", "reduce output shape wrong");
    prim_graph_free(pg);
}

static void rejects_mismatched_transpose(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {2, 3, 4};
    int x = gb_input(pg, "x", 3, xd);
    PB b = {pg, "t"};
    const int perm[] = {0, 2, 1};
    gb_output(pg, pb_transpose(&b, x, perm)); // 2x4x3
    LayoutStage *st = &pg->prims[0]->lay.stages[0];
    st->perm[0] = 1; // would make the output 3x2x4
    st->perm[1] = 0;
    st->perm[2] = 2;
    expect_reject(pg, "layout #0 (from 't')", "transpose perm does not match");
    prim_graph_free(pg);
}

static void rejects_slice_out_of_range(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {2, 8};
    int x = gb_input(pg, "x", 2, xd);
    PB b = {pg, "s"};
    const int64_t start[] = {0, 2}, step[] = {1, 2}, od[] = {2, 3}; // columns 2, 4, 6
    gb_output(pg, pb_slice(&b, x, start, step, od));
    pg->prims[0]->lay.stages[0].start[1] = 4; // columns 4, 6, 8: past the end
    expect_reject(pg, "layout #0 (from 's')", "slice reads outside its input");
    prim_graph_free(pg);
}

static void rejects_matmul_k_mismatch(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t ad[] = {2, 3}, bd[] = {3, 4}, cd[] = {5, 4};
    int a = gb_input(pg, "a", 2, ad), bb = gb_input(pg, "b", 2, bd);
    int c = gb_input(pg, "c", 2, cd);
    PB b = {pg, "mm"};
    gb_output(pg, pb_matmul(&b, a, bb));
    pg->prims[0]->in[1] = c; // K: 3 against 5
    expect_reject(pg, "linear #0 (from 'mm')", "matmul dims");
    prim_graph_free(pg);
}

static void rejects_output_never_computed(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {4};
    int x = gb_input(pg, "x", 1, xd);
    PB b = {pg, "relu"};
    gb_output(pg, pb_ew1(&b, EW_RELU, x));
    gb_output(pg, pg_add_tensor(pg, "ghost", DT_FLOAT, 1, xd)->id);
    expect_reject(pg, "graph output 'ghost'", "never computed");
    prim_graph_free(pg);
}

int main(void) {
    RUN(accepts_correct_graph);
    RUN(rejects_use_before_define);
    RUN(rejects_wrong_reduce_shape);
    RUN(rejects_mismatched_transpose);
    RUN(rejects_slice_out_of_range);
    RUN(rejects_matmul_k_mismatch);
    RUN(rejects_output_never_computed);
    return CHECK_DONE();
}
