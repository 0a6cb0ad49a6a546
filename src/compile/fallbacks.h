// The kernels a plan does not generate: which ONNX nodes an interpreter runs (the operator
// interpreter for an OPAQUE primitive, the primitive interpreter for a primitive no kernel of the
// target covers), why, and their share of the predicted time, grouped by op for the compile
// summary, `orch info` and `orch bench`; and, before any compile, whether each target generates
// every primitive of a model alone (`orch info MODEL.onnx`'s table per operator).
// Needs: a primitive graph whose source graph is alive (the nodes' op types), and a selection or
// plan of it. Guarantees: every non-generated kernel counted once, in one group.
#ifndef ORCH_FALLBACKS_H
#define ORCH_FALLBACKS_H

#include "../backend/target.h"
#include "../plan/plan.h"

#include <stdio.h>

// One kernel of a selection that an interpreter runs.
typedef struct FallbackKernel {
    PlanKind kind;  // PLAN_OPAQUE (the operator interpreter) or PLAN_INTERP (the primitive one)
    int prim;       // the primitive it runs (pg->prims index; such kernels are singletons)
    double seconds; // its predicted time
} FallbackKernel;

// Kernels of one op (the ops of a merged primitive: "Mul+Add") run the same way for one reason.
typedef struct FallbackGroup {
    char *ops; // ONNX op types, '+'-joined
    char *why; // "no generated kernel for TopK on cpu (no fission rule)"
    PlanKind kind;
    int kernels; // kernels in the group
    int n_nodes;
    char **nodes; // the ONNX nodes they run, each once, in plan order
    double seconds;
} FallbackGroup;

typedef struct Fallbacks {
    int kernels;           // kernels an interpreter runs
    double seconds, total; // their predicted time; the whole plan's
    int n_groups;
    FallbackGroup *groups; // slowest first
    int n_each;
    FallbackGroup *each; // one per kernel, in plan order (the --explain detail)
} Fallbacks;

// From n kernels of a selection for target (its name) whose predicted total is total seconds.
void fallbacks_collect(const PrimGraph *pg, const char *target, const FallbackKernel *k, int n,
                       double total, Fallbacks *out);
// From a plan's PLAN_INTERP and PLAN_OPAQUE launches.
void fallbacks_of_plan(const PrimGraph *pg, const Plan *plan, const char *target, Fallbacks *out);
void fallbacks_free(Fallbacks *f); // accepts a zeroed one

// "where" in words: "op interpreter" (PLAN_OPAQUE), "primitive interpreter" (PLAN_INTERP).
const char *fallback_where(PlanKind k);

// One line per group, each starting with indent: "TopK ×3 (nodes a, b, c): op interpreter,
// 41.0% of the predicted time; no generated kernel for TopK on cpu (no fission rule)" (each:
// one line per kernel with its predicted time instead). Long node lists are cut after a few names.
void fallbacks_format(const Fallbacks *f, bool each, const char *indent, StrBuf *b);
// The groups as a JSON array (for orch bench --json).
void fallbacks_json(const Fallbacks *f, FILE *out);

// Whether target t generates each primitive of pg alone (its singleton candidate), asked of the
// target's supports slot under default options (float32) without opening the machine: gen[p]
// for pg->prims[p].
void fallbacks_generated_alone(const Target *t, const PrimGraph *pg, bool *gen);

// `orch info`'s table: per ONNX op of pg's source graph (live nodes), its node count and, per
// target this orch has, "generated" where every primitive of its nodes is generated alone, else
// "interpreter" (the primitive interpreter runs one) or "op interpreter" (fission left the node
// OPAQUE), with "(k of n)" where only some of its nodes fall back.
void fallbacks_print_op_table(const PrimGraph *pg, FILE *f);

#endif
