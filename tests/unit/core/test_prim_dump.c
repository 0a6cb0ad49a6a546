// Unit tests of the primitive graph dumps (fission/dump.h): the text names each primitive's
// parameters as prim.h defines them (an elementwise program, a layout chain from the output
// towards the input, reduce axes), tensors and provenance; the dot text has the legend, kinds,
// shape-labelled edges and escaped labels.
#include "../check.h"
#include "prim/prim_build.h"
#include "inspect/dump.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// x [1,16,64] → layout (reshape, then transpose) → erf(0.5 x) → sum over the last axis.
static PrimGraph *sample(void) {
    PrimGraph *pg = prim_graph_create(NULL);
    const int64_t xd[] = {1, 16, 64}, yd[] = {1, 4, 16, 16};
    Tensor *x = pg_add_tensor(pg, "x", DT_FLOAT, 3, xd);
    x->kind = TK_INPUT;
    pg->inputs = xmalloc(sizeof(int));
    pg->inputs[pg->n_inputs++] = x->id;
    Prim *p = pg_add_prim(pg, PRIM_LAYOUT, 1, 1, "heads \"q\"");
    p->in[0] = x->id;
    p->lay.n_stages = 2;
    p->lay.stages = arena_alloc(pg->arena, 2 * sizeof(LayoutStage));
    LayoutStage *t = &p->lay.stages[0], *r = &p->lay.stages[1];
    *t = (LayoutStage){
        .kind = LS_TRANSPOSE, .in_rank = 4, .in_dims = {1, 16, 4, 16}, .perm = {0, 2, 1, 3}};
    *r = (LayoutStage){.kind = LS_RESHAPE, .in_rank = 3, .in_dims = {1, 16, 64}};
    Tensor *y = pg_add_tensor(pg, "y", DT_FLOAT, 4, yd);
    y->producer = p->id;
    p->out[0] = y->id;
    EwInstr code[2] = {{EW_MUL, DT_FLOAT, {{EWS_INPUT, 0, 0}, {EWS_IMM, 0, 0.5}}},
                       {EW_ERF, DT_FLOAT, {{EWS_INSTR, 0, 0}}}};
    EwProgram prog = {2, code};
    PB b = {pg, "gelu"};
    int g = pb_ew_program(&b, 1, &y->id, &prog);
    b.origin = "sum";
    int s = pb_reduce(&b, RED_SUM, g, 1u << 3, false, false);
    pg->outputs = xmalloc(sizeof(int));
    pg->outputs[pg->n_outputs++] = s;
    return pg;
}

// Runs a dump into a string (caller frees).
static char *capture(void (*dump)(FILE *, const PrimGraph *), const PrimGraph *pg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dump(f, pg);
    fclose(f);
    return buf;
}

#define HAS(text, s) CHECK_MSG(strstr(text, s) != NULL, "'%s' not in:\n%s", s, text)

static void text_dump(void) {
    PrimGraph *pg = sample();
    Err e = {0};
    CHECK_MSG(prim_graph_verify(pg, &e) == ST_OK, "%s", e.msg);
    char *text = capture(prim_graph_print, pg);
    HAS(text, "3 (elementwise 1, reduce 1, layout 1, linear 0, opaque 0)");
    HAS(text, "inputs:  x: float32 1x16x64");
    HAS(text, "#0 layout {transpose[0,2,1,3] <- reshape 1x16x4x16}  (x: float32 1x16x64) -> "
              "y: float32 1x4x16x16  [from heads \"q\"]");
    HAS(text, "#1 elementwise {%0 = MUL(in0, 0.5); %1 = ERF(%0)}");
    HAS(text, "#2 reduce {sum axes=[3] keepdims=0}");
    HAS(text, "[from sum]");
    free(text);
    prim_graph_free(pg);
}

static void dot_dump(void) {
    PrimGraph *pg = sample();
    char *dot = capture(prim_graph_dot, pg);
    HAS(dot, "digraph prims {");
    HAS(dot, "legend_reduce");
    HAS(dot, "p0 -> p1 [label=\"1x4x16x16\"]");
    HAS(dot, "from heads \\\"q\\\""); // quotes escaped inside the label
    HAS(dot, "p2 -> out0 [label=\"1x4x16\"]");
    size_t n = strlen(dot);
    CHECK(n > 2 && strcmp(dot + n - 2, "}\n") == 0);
    free(dot);
    prim_graph_free(pg);
}

int main(void) {
    RUN(text_dump);
    RUN(dot_dump);
    return CHECK_DONE();
}
