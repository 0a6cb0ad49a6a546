// The public API (include/orch.h), its run-time half: contexts, errors, the version, and
// sessions that load and run artefacts (all liborch-runtime holds of the API; orch.c is the
// compile-time half).
#include "orch.h"

#include "../backend/target.h"
#include "../plan/artifact.h"
#include "../runtime/session.h"
#include "api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

orch_ctx *orch_ctx_create(void) {
    return calloc(1, sizeof(orch_ctx));
}
void orch_ctx_free(orch_ctx *ctx) {
    free(ctx);
}
const char *orch_last_error(const orch_ctx *ctx) {
    return ctx ? ctx->err.msg : "";
}
orch_status orch_last_status(const orch_ctx *ctx) {
    return ctx ? (orch_status)ctx->err.code : ORCH_OK;
}
void orch_clear_error(orch_ctx *ctx) {
    if (ctx)
        memset(&ctx->err, 0, sizeof ctx->err);
}

const char *orch_version(void) {
    return ORCH_VERSION;
}

void api_fill_info(const Tensor *t, orch_tensor *info) {
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = (orch_dtype)t->dtype;
    info->rank = t->rank;
    memcpy(info->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    info->nbytes = tensor_nbytes(t);
}

// Finds the caller's tensor for graph tensor t: by name, else by position.
const orch_tensor *api_match(const orch_tensor *arr, int n, const Tensor *t, int pos) {
    for (int i = 0; i < n; i++)
        if (arr[i].name && strcmp(arr[i].name, t->name) == 0)
            return &arr[i];
    return pos < n && !arr[pos].name ? &arr[pos] : NULL;
}

int api_check_tensor(Err *e, const char *what, const orch_tensor *u, const Tensor *t) {
    char want[128], got[128];
    if ((DType)u->dtype != t->dtype)
        return err_set(e, ST_INVALID, "%s '%s' is %s, the model expects %s", what, t->name,
                       dtype_name((DType)u->dtype), dtype_name(t->dtype));
    bool same = u->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = u->dims[d] == t->dims[d];
    if (!same || u->rank < 0 || u->rank > ORCH_MAX_DIMS)
        return err_set(e, ST_INVALID, "%s '%s' has shape %s, the model expects %s", what, t->name,
                       shape_str(u->dims, u->rank < 0 || u->rank > ORCH_MAX_DIMS ? 0 : u->rank, got,
                                 sizeof got),
                       tensor_shape_str(t, want, sizeof want));
    if (!u->data || u->nbytes < tensor_nbytes(t))
        return err_set(e, ST_USAGE, "%s '%s' needs a buffer of %zu bytes", what, t->name,
                       tensor_nbytes(t));
    return ST_OK;
}

struct orch_session {
    Session *s;
};

static orch_status session_common(orch_ctx *ctx, ArtifactContents *ac, int rc,
                                  const orch_session_options *opt, orch_session **out) {
    Err *e = &ctx->err;
    HwInfo hw;
    const TargetRuntime *t = rc ? NULL : target_runtime_find(ac->h.target);
    if (rc == ST_OK && !t)
        rc = err_set(e, ST_UNSUPPORTED, "%s was compiled for target '%s', which this orch lacks",
                     ac->path, ac->h.target);
    if (rc == ST_OK)
        rc = t->detect(ac->h.threads, &hw, e);
    SessionOptions so = {.threads = opt ? opt->threads : 0,
                         .allow_foreign_device = opt && opt->allow_foreign_device,
                         .fixed_threads = opt && opt->fixed_threads};
    Session *s = NULL;
    if (rc == ST_OK && so.threads < 0)
        rc = err_set(e, ST_USAGE, "orch_session_options.threads is negative");
    if (rc == ST_OK)
        rc = session_create(ac, &hw, &so, &s, e);
    artifact_contents_free(ac);
    if (rc)
        return (orch_status)rc;
    *out = xcalloc(1, sizeof **out);
    (*out)->s = s;
    return ORCH_OK;
}

orch_status orch_session_create(orch_ctx *ctx, const char *artifact_path,
                                const orch_session_options *opt, orch_session **out) {
    if (!ctx || !out)
        return ORCH_ERR_USAGE;
    *out = NULL;
    if (!artifact_path)
        return (orch_status)err_set(&ctx->err, ST_USAGE, "orch_session_create: no path");
    ArtifactContents ac = {0};
    int rc = artifact_read(artifact_path, &ac, &ctx->err);
    return session_common(ctx, &ac, rc, opt, out);
}

orch_status orch_session_create_from_memory(orch_ctx *ctx, const void *data, size_t size,
                                            const orch_session_options *opt, orch_session **out) {
    if (!ctx || !out)
        return ORCH_ERR_USAGE;
    *out = NULL;
    if (!data)
        return (orch_status)err_set(&ctx->err, ST_USAGE,
                                    "orch_session_create_from_memory: no data");
    ArtifactContents ac = {0};
    int rc = artifact_read_memory(data, size, "<memory>", &ac, &ctx->err);
    return session_common(ctx, &ac, rc, opt, out);
}

void orch_session_free(orch_session *s) {
    if (!s)
        return;
    session_free(s->s);
    free(s);
}

int orch_session_num_inputs(const orch_session *s) {
    return s ? session_graph(s->s)->n_inputs : 0;
}
int orch_session_num_outputs(const orch_session *s) {
    return s ? session_graph(s->s)->n_outputs : 0;
}

orch_status orch_session_input_info(const orch_session *s, int i, orch_tensor *info) {
    const PrimGraph *pg = s ? session_graph(s->s) : NULL;
    if (!pg || !info || i < 0 || i >= pg->n_inputs)
        return ORCH_ERR_USAGE;
    api_fill_info(pg->tensors[pg->inputs[i]], info);
    return ORCH_OK;
}

orch_status orch_session_output_info(const orch_session *s, int i, orch_tensor *info) {
    const PrimGraph *pg = s ? session_graph(s->s) : NULL;
    if (!pg || !info || i < 0 || i >= pg->n_outputs)
        return ORCH_ERR_USAGE;
    api_fill_info(pg->tensors[pg->outputs[i]], info);
    return ORCH_OK;
}

int orch_session_num_shape_sets(const orch_session *s) {
    return s ? session_num_plans(s->s) : 0;
}

orch_status orch_session_shape_set_input_info(const orch_session *s, int set, int i,
                                              orch_tensor *info) {
    if (!s || set < 0 || set >= session_num_plans(s->s))
        return ORCH_ERR_USAGE;
    const PrimGraph *pg = session_graph(session_for_plan(s->s, set));
    if (!info || i < 0 || i >= pg->n_inputs)
        return ORCH_ERR_USAGE;
    api_fill_info(pg->tensors[pg->inputs[i]], info);
    return ORCH_OK;
}

orch_status orch_session_shape_set_output_info(const orch_session *s, int set, int i,
                                               orch_tensor *info) {
    if (!s || set < 0 || set >= session_num_plans(s->s))
        return ORCH_ERR_USAGE;
    const PrimGraph *pg = session_graph(session_for_plan(s->s, set));
    if (!info || i < 0 || i >= pg->n_outputs)
        return ORCH_ERR_USAGE;
    api_fill_info(pg->tensors[pg->outputs[i]], info);
    return ORCH_OK;
}

// The plan whose input shapes the caller's inputs have (an artefact of several shape sets), or
// an error naming the shapes the artefact serves. Inputs not given are reported by the checks of
// the first plan's session.
static int pick_plan(Err *e, Session *s, const orch_tensor *inputs, int n_inputs, Session **out) {
    *out = s;
    if (session_num_plans(s) == 1)
        return ST_OK;
    const PrimGraph *pg = session_graph(s);
    int ranks_small[64];
    const int64_t *dims_small[64];
    int *ranks = pg->n_inputs <= 64 ? ranks_small : xcalloc((size_t)pg->n_inputs, sizeof(int));
    const int64_t **dims =
        pg->n_inputs <= 64 ? dims_small : xcalloc((size_t)pg->n_inputs, sizeof(int64_t *));
    bool all = true;
    for (int i = 0; i < pg->n_inputs && all; i++) {
        const orch_tensor *u = api_match(inputs, n_inputs, pg->tensors[pg->inputs[i]], i);
        all = u != NULL;
        if (u) {
            ranks[i] = u->rank;
            dims[i] = u->dims;
        }
    }
    int k = all ? session_find_plan(s, ranks, dims) : 0;
    int rc = ST_OK;
    if (k >= 0) {
        *out = session_for_plan(s, k);
    } else {
        char got[512] = "", served[2048];
        size_t used = 0;
        for (int i = 0; i < pg->n_inputs && used + 1 < sizeof got; i++) {
            char sh[160];
            int w =
                snprintf(got + used, sizeof got - used, "%s%s:%s", i ? "," : "",
                         pg->tensors[pg->inputs[i]]->name,
                         shape_str(dims[i], ranks[i] < 0 || ranks[i] > ORCH_MAX_DIMS ? 0 : ranks[i],
                                   sh, sizeof sh));
            used = w > 0 && (size_t)w < sizeof got - used ? used + (size_t)w : sizeof got - 1;
        }
        session_served_shapes(s, served, sizeof served);
        rc = err_set(e, ST_INVALID,
                     "inputs of shapes %s: the artefact serves only %s (compile it with "
                     "--input-shapes for these shapes too)",
                     got, served);
    }
    if (ranks != ranks_small)
        free(ranks);
    if (dims != dims_small)
        free(dims);
    return rc;
}

// orch_session_run and orch_session_run_device: device selects the latter, with stream.
static orch_status run_tensors(orch_ctx *ctx, orch_session *s, const orch_tensor *inputs,
                               int n_inputs, orch_tensor *outputs, int n_outputs, bool device,
                               void *stream) {
    const char *fn = device ? "orch_session_run_device" : "orch_session_run";
    if (!ctx)
        return ORCH_ERR_USAGE;
    if (!s || (n_inputs && !inputs) || (n_outputs && !outputs))
        return (orch_status)err_set(&ctx->err, ST_USAGE, "%s: NULL argument", fn);
    Err *e = &ctx->err;
    Session *run = NULL;
    int prc = pick_plan(e, s->s, inputs, n_inputs, &run);
    if (prc)
        return (orch_status)prc;
    const PrimGraph *pg = session_graph(run);
    // Small fixed arrays: the run allocates nothing for models with up to 64 inputs/outputs.
    const void *in_small[64];
    void *out_small[64];
    const void **in = pg->n_inputs <= 64 ? in_small : xcalloc((size_t)pg->n_inputs, sizeof(void *));
    void **out = pg->n_outputs <= 64 ? out_small : xcalloc((size_t)pg->n_outputs, sizeof(void *));
    int rc = ST_OK;
    for (int i = 0; i < pg->n_inputs && rc == ST_OK; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        const orch_tensor *u = api_match(inputs, n_inputs, t, i);
        if (!u)
            rc = err_set(e, ST_USAGE, "input '%s' is not given", t->name);
        else if ((rc = api_check_tensor(e, "input", u, t)) == ST_OK)
            in[i] = u->data;
    }
    for (int i = 0; i < pg->n_outputs && rc == ST_OK; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        orch_tensor *u = (orch_tensor *)api_match(outputs, n_outputs, t, i);
        if (!u)
            rc = err_set(e, ST_USAGE, "output '%s' has no buffer", t->name);
        else if ((rc = api_check_tensor(e, "output", u, t)) == ST_OK)
            out[i] = u->data;
    }
    if (rc == ST_OK)
        rc = device ? session_run_device(run, in, out, stream, e) : session_run(run, in, out, e);
    if (in != in_small)
        free(in);
    if (out != out_small)
        free(out);
    return (orch_status)rc;
}

orch_status orch_session_run(orch_ctx *ctx, orch_session *s, const orch_tensor *inputs,
                             int n_inputs, orch_tensor *outputs, int n_outputs) {
    return run_tensors(ctx, s, inputs, n_inputs, outputs, n_outputs, false, NULL);
}

orch_status orch_session_run_device(orch_ctx *ctx, orch_session *s, const orch_tensor *inputs,
                                    int n_inputs, orch_tensor *outputs, int n_outputs,
                                    void *stream) {
    return run_tensors(ctx, s, inputs, n_inputs, outputs, n_outputs, true, stream);
}
