// Fission rules for elementwise ONNX ops: each becomes ELEMWISE primitives (one instruction per
// primitive; the clean-up passes merge chains into programs).
#include "fission.h"

#include <string.h>

typedef struct BinaryMap {
    const char *op;
    EwOp ew;
} BinaryMap;

static const BinaryMap binaries[] = {
    {"Add", EW_ADD}, {"Sub", EW_SUB}, {"Mul", EW_MUL}, {"Div", EW_DIV},
};

static int rule_binary(FissionCtx *fc) {
    for (size_t i = 0; i < ORCH_COUNT(binaries); i++)
        if (strcmp(fc->n->op, binaries[i].op) == 0) {
            fc_set_out(fc, 0, pb_ew2(&fc->b, binaries[i].ew, fc_in(fc, 0), fc_in(fc, 1)));
            return ST_OK;
        }
    return ST_UNSUPPORTED;
}

static int rule_relu(FissionCtx *fc) {
    fc_set_out(fc, 0, pb_ew1(&fc->b, EW_RELU, fc_in(fc, 0)));
    return ST_OK;
}

const FissionRuleDef fission_rules_elementwise[] = {
    {"Add", rule_binary}, {"Sub", rule_binary}, {"Mul", rule_binary}, {"Div", rule_binary},
    {"Relu", rule_relu},  {NULL, NULL},
};
