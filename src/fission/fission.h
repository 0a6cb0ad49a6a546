// Operator fission: rewrites every ONNX node of a folded operator graph into primitives.
// Needs: graph_infer_and_fold() done. Guarantees: a verified primitive graph computing the same
// outputs; nodes without a rule become OPAQUE primitives run by their reference op.
#ifndef ORCH_FISSION_H
#define ORCH_FISSION_H

#include "../prim/prim_build.h"

typedef struct FissionOptions {
    // Attention (MatMul → Softmax → MatMul): move the softmax's normalising division after the
    // second MatMul, so the exp can join the MatMul's prologue. Off: the plain softmax form.
    bool attention_rewrite;
} FissionOptions;

typedef struct FissionStats {
    int nodes, ruled, opaque; // ONNX nodes in, nodes with a fission rule, nodes left opaque
    int attention_rewrites;   // softmax divisions moved after the following MatMul
} FissionStats;

int fission_run(const Graph *g, const FissionOptions *opt, PrimGraph **out, FissionStats *stats,
                Err *e);

// Why fission left node n of g opaque, in words for reports ("no fission rule", ...).
const char *fission_opaque_reason(const Graph *g, const Node *n);

// ---- for the rule files ----

typedef struct FissionCtx {
    PrimGraph *pg;
    const Graph *g;
    const Node *n;
    const FissionOptions *opt;
    int *map; // operator-graph tensor id -> primitive-graph tensor id
    PB b;     // builder stamping the node's name as provenance
} FissionCtx;

// Rules return ST_OK after setting every present output with fc_set_out, or ST_UNSUPPORTED to
// leave the node opaque (e.g. a dtype or attribute combination the rule does not cover; any
// primitives already built are discarded as dead code).
typedef int (*FissionRule)(FissionCtx *fc);

typedef struct FissionRuleDef {
    const char *op;
    FissionRule rule;
} FissionRuleDef;

// Rule tables, one per family, each ended by {NULL, NULL}.
extern const FissionRuleDef fission_rules_elementwise[];
extern const FissionRuleDef fission_rules_linear[];
extern const FissionRuleDef fission_rules_reduce[];
extern const FissionRuleDef fission_rules_layout[];
extern const FissionRuleDef fission_rules_rnn[]; // LSTM, GRU, RNN (rules_rnn.c)

int fc_in(const FissionCtx *fc, int i);                // primitive tensor of input i, -1 absent
const Tensor *fc_in_t(const FissionCtx *fc, int i);    // the operator graph's tensor (NULL absent)
const Tensor *fc_out_t(const FissionCtx *fc, int i);   // the operator graph's output tensor
void fc_set_out(FissionCtx *fc, int i, int t);
// The node's ONNX output shape, for rules that build through reshapes.
int fc_out_rank(const FissionCtx *fc, int i);

// Resize (rules_layout.c) of primitive tensor x by plan p (src/ops/resize.h; its in/out dims
// those of x and the result): a table for nearest, per-axis taps and weighted sums for linear
// and cubic. The resulting tensor, or -1 for what the rule leaves opaque (a half-precision
// input, windows wider than 16 taps, a non-finite extrapolation value).
struct ResizePlan;
int fission_resize(FissionCtx *fc, const struct ResizePlan *p, int x);

#endif
