// libFuzzer target for the model loader: bytes → onnx_load_memory → graph_infer_and_fold and,
// when that succeeds on a small graph, one run on the reference interpreter with fixed-pattern
// inputs, then fission + clean-up + one run on the primitive interpreter. Any crash, sanitizer
// report, leak or assertion is a bug; a returned error is not.
// Built by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined.
#include "fission/fission.h"
#include "passes/passes.h"
#include "ops/fold.h"
#include "ir/stats.h"
#include "onnx/load.h"
#include "interp/interp.h"
#include "interp/prim_interp.h"

#include <stdint.h>
#include <stdlib.h>

// Graphs whose tensors add up to more than this, or whose work (graph_flops) exceeds
// RUN_MAX_FLOPS, are loaded and folded but not run: the fuzzer looks for bugs in the code, not
// for the memory or time limit (a 64 KiB model can ask for a 4096^3 MatMul).
#define RUN_MAX_BYTES ((size_t)1 << 20)
#define RUN_MAX_FLOPS ((int64_t)1 << 24)
// The primitive graph can hold far more than the operator graph: a pool's window becomes a layout
// primitive k times the size of its input (AveragePool 61x2 over 400 KB: a 50 MB window tensor).
// The primitive interpreter computes each element of a layout through its index map (about
// 1 us under ASan), so it runs only graphs whose computed tensors hold at most this many elements.
#define RUN_MAX_PRIM_ELEMENTS ((int64_t)1 << 21)
// Folding, likewise, is bounded far below the product's defaults (FOLD_LIMITS_DEFAULT): under
// ASan at -O1 the interpreter does about 10^7 FLOP/s, and libFuzzer's timeout is 10 s.
#define FUZZ_FOLD_LIMITS ((FoldLimits){(size_t)16 << 20, (size_t)64 << 20, 16777216.0, 33554432.0})

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t total_bytes(const Graph *g) {
    size_t sum = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const Tensor *t = g->tensors[i];
        if (t->rank >= 0)
            sum += tensor_nbytes(t);
        if (sum >= RUN_MAX_BYTES)
            break;
    }
    return sum;
}

// Small values that cycle through negatives, zero and positives; valid as indices into any
// non-empty axis of size >= 3 and, for bool, both truth values.
static void fill_pattern(const Tensor *t, void *p) {
    int64_t n = tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dtype_is_float(t->dtype))
            elem_set_f64(t->dtype, p, i, (double)(i % 7 - 3) * 0.375);
        else if (t->dtype == DT_BOOL)
            elem_set_i64(t->dtype, p, i, i & 1);
        else
            elem_set_i64(t->dtype, p, i, i % 3);
    }
}

// Elements of the primitive graph's computed (non-constant) tensors.
static int64_t prim_elements(const PrimGraph *pg) {
    int64_t sum = 0;
    for (int i = 0; i < pg->n_tensors && sum <= RUN_MAX_PRIM_ELEMENTS; i++)
        if (!pg_is_const(pg, i) && pg->tensors[i]->rank >= 0)
            sum += tensor_numel(pg->tensors[i]);
    return sum;
}

static void run_once(const Graph *g) {
    void **in = xcalloc((size_t)g->n_inputs + 1, sizeof(void *));
    void **out = xcalloc((size_t)g->n_outputs + 1, sizeof(void *));
    for (int i = 0; i < g->n_inputs; i++) {
        const Tensor *t = g->tensors[g->inputs[i]];
        in[i] = xmalloc(tensor_nbytes(t) + 1);
        fill_pattern(t, in[i]);
    }
    Err e = {0};
    if (interp_run(g, (const void *const *)in, out, NULL, &e) == ST_OK)
        for (int i = 0; i < g->n_outputs; i++)
            free(out[i]);
    PrimGraph *pg = NULL;
    Err fe = {0};
    if (fission_run(g, NULL, &pg, NULL, &fe) == ST_OK && fission_cleanup(pg, NULL, &fe) == ST_OK &&
        prim_elements(pg) <= RUN_MAX_PRIM_ELEMENTS &&
        prim_interp_run(pg, (const void *const *)in, out, &fe) == ST_OK)
        for (int i = 0; i < g->n_outputs; i++)
            free(out[i]);
    prim_graph_free(pg);
    for (int i = 0; i < g->n_inputs; i++)
        free(in[i]);
    free(in);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool limits_set = false;
    if (!limits_set) {
        FoldLimits lim = FUZZ_FOLD_LIMITS;
        fold_set_limits(&lim);
        limits_set = true;
    }
    Err e = {0};
    Graph *g = NULL;
    if (onnx_load_memory(data, size, "fuzz.onnx", NULL, NULL, &g, &e) != ST_OK)
        return 0;
    if (graph_infer_and_fold(g, NULL, &e) == ST_OK && total_bytes(g) < RUN_MAX_BYTES &&
        graph_flops(g) <= RUN_MAX_FLOPS)
        run_once(g);
    graph_free(g);
    return 0;
}
