// The recurrent ONNX operators LSTM, GRU and RNN: their attributes and shapes read once into an
// RnnSpec, shared by the shape rule and reference op (rnn.c) and the fission rule
// (fission/rules_rnn.c), so both follow one reading of the attributes.
#ifndef ORCH_OPS_RNN_H
#define ORCH_OPS_RNN_H

#include "../ir/graph.h"

#include <stdbool.h>

typedef enum RnnCell { RNN_CELL_RNN, RNN_CELL_GRU, RNN_CELL_LSTM } RnnCell;

// The activation functions the ONNX recurrent operators name.
typedef enum RnnActKind {
    RNN_ACT_SIGMOID,
    RNN_ACT_TANH,
    RNN_ACT_RELU,
    RNN_ACT_AFFINE,          // alpha * x + beta
    RNN_ACT_LEAKYRELU,       // x >= 0 ? x : alpha * x
    RNN_ACT_THRESHOLDEDRELU, // x > alpha ? x : 0
    RNN_ACT_SCALEDTANH,      // alpha * tanh(beta * x)
    RNN_ACT_HARDSIGMOID,     // min(max(alpha * x + beta, 0), 1)
    RNN_ACT_ELU,             // x >= 0 ? x : alpha * (exp(x) - 1)
    RNN_ACT_SOFTSIGN,        // x / (1 + |x|)
    RNN_ACT_SOFTPLUS,        // log(1 + exp(x))
} RnnActKind;

typedef struct RnnAct {
    RnnActKind kind;
    double alpha, beta;
} RnnAct;

// Input slots: X, W, R, B, sequence_lens, initial_h, initial_c (LSTM), P (LSTM).
enum { RNN_IN_X, RNN_IN_W, RNN_IN_R, RNN_IN_B, RNN_IN_SEQ, RNN_IN_H0, RNN_IN_C0, RNN_IN_P };

typedef struct RnnSpec {
    RnnCell cell;
    int gates;          // blocks of H rows in W and R: 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c)
    int n_act;          // activations per direction: 1 (RNN: f), 2 (GRU: f g), 3 (LSTM: f g h)
    int dirs;           // 1, or 2 for bidirectional
    bool reverse;       // a single direction running from the last step to the first
    int64_t T, B, I, H; // sequence length, batch, input size, hidden size
    int layout;         // 0: X [T, B, I]; 1: X [B, T, I] (and Y, Y_h, Y_c batch first)
    bool has_clip;
    double clip;              // pre-activation values are clamped to [-clip, clip]
    bool linear_before_reset; // GRU: r multiplies (H R_h^T + Rb_h) instead of H
    RnnAct act[2][3];         // per direction, per activation slot
} RnnSpec;

// Reads and validates the node's attributes and input shapes (after their shapes are known).
// Errors name the node and the attribute or input; ST_UNSUPPORTED for valid ONNX orch refuses.
int rnn_spec(const Graph *g, const Node *n, RnnSpec *s, Err *e);

// The activation in double precision, as the reference op computes it.
double rnn_act_eval(const RnnAct *a, double x);

#endif
