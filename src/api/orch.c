// The public API (include/orch.h) over the internal stages, its compile-time half: load →
// infer/fold → (fission → clean-up, for the primitive engine) → interpret, and compile. Contexts
// and sessions, which liborch-runtime also has, are orch_session.c.
#include "orch.h"

#include "../backend/target.h"
#include "../compile/compile.h"
#include "../fission/fission.h"
#include "../interp/interp.h"
#include "../interp/prim_interp.h"
#include "../onnx/load.h"
#include "../ops/fold.h"
#include "../passes/passes.h"
#include "../base/text.h"
#include "../plan/artifact.h"
#include "../runtime/session.h"
#include "api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct orch_model {
    Graph *g;
    PrimGraph *pg; // ORCH_ENGINE_PRIMS: the primitive graph run instead of g (which it reads)
};

// Fission into primitives, then the clean-up passes unless the options skip them.
static int build_prims(const Graph *g, const orch_load_options *opt, PrimGraph **pg, Err *e) {
    FissionOptions fo = {.attention_rewrite = opt->attention_rewrite != 0};
    int rc = fission_run(g, &fo, pg, NULL, e);
    if (rc == ST_OK && !opt->no_cleanup && (rc = fission_cleanup(*pg, NULL, e)))
        err_prefix(e, "%s: clean-up of the primitive graph: ", g->path);
    return rc;
}

static orch_status finish_load(orch_ctx *ctx, Graph *g, const orch_load_options *opt,
                               orch_model **out) {
    int rc = graph_infer_and_fold(g, NULL, &ctx->err);
    PrimGraph *pg = NULL;
    if (rc == ST_OK && opt && opt->engine == ORCH_ENGINE_PRIMS)
        rc = build_prims(g, opt, &pg, &ctx->err);
    orch_model *m = rc ? NULL : calloc(1, sizeof *m);
    if (rc == ST_OK && !m)
        rc = err_set(&ctx->err, ST_RUNTIME, "out of memory");
    if (rc) {
        prim_graph_free(pg);
        graph_free(g);
        return (orch_status)rc;
    }
    m->g = g;
    m->pg = pg;
    *out = m;
    return ORCH_OK;
}

static orch_status load_common(orch_ctx *ctx, const char *path, const void *data, size_t size,
                               const orch_load_options *opt, orch_model **out) {
    if (!ctx || !out)
        return ORCH_ERR_USAGE;
    *out = NULL;
    if (opt && opt->engine != ORCH_ENGINE_OPS && opt->engine != ORCH_ENGINE_PRIMS)
        return (orch_status)err_set(
            &ctx->err, ST_USAGE,
            "orch_load_options.engine is %d; use ORCH_ENGINE_OPS or ORCH_ENGINE_PRIMS",
            (int)opt->engine);
    InputShape shapes[64];
    LoadOptions lo = {.shapes = shapes};
    char *spec = opt && opt->input_shapes ? xstrdup(opt->input_shapes) : NULL;
    int rc = spec ? parse_input_shapes(spec, shapes, 64, &lo.n_shapes, &ctx->err) : ST_OK;
    Graph *g = NULL;
    if (rc == ST_OK)
        rc = path ? onnx_load_file(path, &lo, &g, &ctx->err)
                  : onnx_load_memory(data, size, "<memory>", NULL, &lo, &g, &ctx->err);
    orch_status st = rc ? (orch_status)rc : finish_load(ctx, g, opt, out);
    free(spec);
    return st;
}

orch_status orch_model_load(orch_ctx *ctx, const char *path, const orch_load_options *opt,
                            orch_model **out) {
    if (!path)
        return ctx ? (orch_status)err_set(&ctx->err, ST_USAGE, "no model path") : ORCH_ERR_USAGE;
    return load_common(ctx, path, NULL, 0, opt, out);
}

orch_status orch_model_load_memory(orch_ctx *ctx, const void *data, size_t size,
                                   const orch_load_options *opt, orch_model **out) {
    if (!data && size)
        return ctx ? (orch_status)err_set(&ctx->err, ST_USAGE, "no model data") : ORCH_ERR_USAGE;
    return load_common(ctx, NULL, data ? data : "", size, opt, out);
}

void orch_model_free(orch_model *m) {
    if (!m)
        return;
    prim_graph_free(m->pg);
    graph_free(m->g);
    free(m);
}

int orch_model_num_inputs(const orch_model *m) {
    return m ? m->g->n_inputs : 0;
}
int orch_model_num_outputs(const orch_model *m) {
    return m ? m->g->n_outputs : 0;
}

orch_status orch_model_input_info(const orch_model *m, int i, orch_tensor *info) {
    if (!m || !info || i < 0 || i >= m->g->n_inputs)
        return ORCH_ERR_USAGE;
    api_fill_info(m->g->tensors[m->g->inputs[i]], info);
    return ORCH_OK;
}

orch_status orch_model_output_info(const orch_model *m, int i, orch_tensor *info) {
    if (!m || !info || i < 0 || i >= m->g->n_outputs)
        return ORCH_ERR_USAGE;
    api_fill_info(m->g->tensors[m->g->outputs[i]], info);
    return ORCH_OK;
}

orch_status orch_model_run_reference(orch_ctx *ctx, orch_model *m, const orch_tensor *inputs,
                                     int n_inputs, orch_tensor *outputs, int n_outputs) {
    if (!ctx || !m || (n_inputs && !inputs) || (n_outputs && !outputs))
        return ctx ? (orch_status)err_set(&ctx->err, ST_USAGE,
                                          "orch_model_run_reference: NULL argument")
                   : ORCH_ERR_USAGE;
    Graph *g = m->g;
    Err *e = &ctx->err;
    const void **in = xcalloc((size_t)g->n_inputs + 1, sizeof(void *));
    void **out = xcalloc((size_t)g->n_outputs + 1, sizeof(void *));
    int rc = ST_OK;
    for (int i = 0; i < g->n_inputs && rc == ST_OK; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        const orch_tensor *u = api_match(inputs, n_inputs, t, i);
        if (!u)
            rc = err_set(e, ST_USAGE, "input '%s' is not given", t->name);
        else if ((rc = api_check_tensor(e, "input", u, t)) == ST_OK)
            in[i] = u->data;
    }
    for (int i = 0; i < g->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = g->tensors[g->outputs[i]];
        orch_tensor *u = (orch_tensor *)api_match(outputs, n_outputs, t, i);
        if (u)
            rc = api_check_tensor(e, "output", u, t);
    }
    if (rc == ST_OK)
        rc = m->pg ? prim_interp_run(m->pg, in, out, e) : interp_run(g, in, out, NULL, e);
    for (int i = 0; i < g->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = g->tensors[g->outputs[i]];
        orch_tensor *u = (orch_tensor *)api_match(outputs, n_outputs, t, i);
        if (u)
            memcpy(u->data, out[i], tensor_nbytes(t));
    }
    for (int i = 0; i < g->n_outputs; i++)
        free(out[i]);
    free(in);
    free(out);
    return (orch_status)rc;
}

// ---- compile ----

orch_status orch_compile(orch_ctx *ctx, const char *onnx_path, const orch_compile_options *opt,
                         const char *out_path) {
    if (!ctx)
        return ORCH_ERR_USAGE;
    if (!onnx_path || !out_path)
        return (orch_status)err_set(&ctx->err, ST_USAGE, "orch_compile: no model or output path");
    orch_compile_options none = {0};
    if (!opt)
        opt = &none;
    CompileOptions co = {.target = opt->target,
                         .precision = opt->precision,
                         .db_path = opt->db_path,
                         .input_shapes = opt->input_shapes,
                         .attention_rewrite = opt->attention_rewrite != 0,
                         .threads = opt->threads,
                         .top_k = opt->top_k,
                         .jobs = opt->jobs,
                         .time_limit = opt->time_limit,
                         .seed = 1,
                         .half_storage = opt->half_storage != 0,
                         .no_mlp_chains = opt->no_mlp_chains != 0,
                         .no_attention = opt->no_attention != 0,
                         .explain = opt->explain,
                         .strict = opt->strict != 0};
    if (opt->n_shape_sets < 0 || (opt->n_shape_sets > 0 && !opt->shape_sets))
        return (orch_status)err_set(&ctx->err, ST_USAGE,
                                    "orch_compile_options: n_shape_sets %d without shape_sets",
                                    opt->n_shape_sets);
    if (opt->n_shape_sets > 0 && opt->input_shapes)
        return (orch_status)err_set(&ctx->err, ST_USAGE,
                                    "orch_compile_options: input_shapes and shape_sets both given "
                                    "(put every shape set in shape_sets)");
    co.shape_sets = opt->shape_sets;
    co.n_shape_sets = opt->n_shape_sets;
    co.gpus = opt->gpus;
    if (co.threads < 0 || co.top_k < 0 || co.jobs < 0 || co.time_limit < 0)
        return (orch_status)err_set(&ctx->err, ST_USAGE,
                                    "orch_compile_options: negative threads/top_k/jobs/time_limit");
    if (opt->layout && !compile_layout_parse(opt->layout, &co.layout))
        return (orch_status)err_set(&ctx->err, ST_USAGE,
                                    "orch_compile_options: layout '%s' (known: auto, nchw, nhwc)",
                                    opt->layout);
    if (opt->explain < 0 || opt->explain > 2)
        return (orch_status)err_set(&ctx->err, ST_USAGE,
                                    "orch_compile_options: explain %d (0, 1 or 2)", opt->explain);
    // Progress lines name the model's nodes: written through an escaping stream (text.h).
    FILE *progress = opt->verbose ? text_safe_stream(STDERR_FILENO, false, true) : NULL;
    co.progress = progress ? progress : opt->verbose ? stderr : NULL;
    CompileReport rep;
    int rc = compile_model(onnx_path, &co, out_path, &rep, &ctx->err);
    // With progress lines, the summary too: it names every kernel not generated.
    if (co.progress && (rc == ST_OK || rep.refused))
        compile_report_print(&rep, co.progress);
    if (progress)
        fclose(progress);
    return (orch_status)rc;
}
