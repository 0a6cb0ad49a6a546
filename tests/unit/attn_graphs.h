// Attention primitive graphs for the fused attention tests (test_attention.c on the C target,
// test_attention_cuda.c on the CUDA target): scaled-dot-product attention as fission and its
// clean-up passes leave it (candidates/attention.h), with the variations exported models show —
// head split by reshape + transpose of [B, S, H*D] projections or plain [B, H, S, D] inputs, a
// scale by MUL or DIV, an additive mask input broadcast along heads (and queries), or a causal
// WHERE on a constant boolean mask — and the shapes of the tests (any M, N >= 1, head
// dims up to 256, Dv != D) — in float32, or stored in float16 / bfloat16 as the half-storage
// pass leaves them (every tensor and instruction of the attention in the half type; optionally
// O cast to a float32 output). Header-only (static functions); needs fission/build.h.
#ifndef ORCH_TEST_ATTN_GRAPHS_H
#define ORCH_TEST_ATTN_GRAPHS_H

#include "prim/prim_build.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ATTN_MASK_NONE, ATTN_MASK_KEYS, ATTN_MASK_FULL, ATTN_MASK_CAUSAL, ATTN_MASK_COUNT };
enum { ATTN_SCALE_NONE, ATTN_SCALE_MUL, ATTN_SCALE_DIV, ATTN_SCALE_COUNT };

typedef struct AttnCase {
    char name[96];
    int64_t B, H;      // batch, heads (the rank-4 batch dims)
    int64_t M, N;      // queries, keys
    int64_t D, Dv;     // head dims of Q/K and of V
    int mask;          // ATTN_MASK_*
    int scale;         // ATTN_SCALE_*
    bool split;        // Q, K, V from [B, M|N, H*D] inputs by reshape + transpose (as exported)
    bool nan_guard;    // P = WHERE(ISNAN(E / l), 0, E / l) as PyTorch exports SDPA; the mask input
                       // ("mask_inf") then holds -inf, whole rows of it in every 5th row
    bool kt_dim_major; // (not split) K^T read dim-major, unit stride along the keys, as a model's
                       // materialised K^T is: input "kt" [B, D, H, N] transposed to [B, H, D, N]
    DType dt;          // of every tensor and instruction: DT_FLOAT16, DT_BFLOAT16; 0: float32
    bool cast_out;     // (half) the output is O cast to float32, as at a model output
    bool out_merge;    // the output is O's heads merged back, [B, M, H * Dv] (permute + view)
    bool packed;       // (M == N, D == Dv) Q, K, V from one packed projection "qkv" [M, B, 3*H*D]
                       // as torch's MultiheadAttention exports it (ViT): unflattened to
                       // [M, B, 3, H*D], moved to [3, M, B, H*D], each picked by a Gather of a
                       // scalar index and split into heads; the clean-up composes the shared
                       // layout into each of the three, so the kernel reads qkv in place
    int64_t Hkv;       // grouped-query attention (not packed): K and V have Hkv heads, each read
                       // by H / Hkv consecutive query heads through HF's repeat_kv ([B, Hkv, N, d]
                       // -> [B, Hkv, 1, N, d] -> Expand to [B, Hkv, H / Hkv, N, d] -> [B, H, N,
                       // d]); 0: H (no grouping)
    bool rope;         // (not packed, D even) rotary embeddings on Q and K as transformers' Llama
                       // applies them before repeat_kv: x * cos + cat(-x2, x1) * sin, cos and
                       // sin constants [1, 1, S, D] of positions N - M + i (queries) and j (keys)
} AttnCase;

static inline DType attn_dt(const AttnCase *k) {
    return k->dt ? k->dt : DT_FLOAT;
}

static inline void attn_case_name(AttnCase *k) {
    static const char *mask[] = {"nomask", "keymask", "fullmask", "causal"};
    static const char *scale[] = {"noscale", "mul", "div"};
    snprintf(k->name, sizeof k->name, "attn_b%lldh%lld_m%lld_n%lld_d%lld_dv%lld_%s_%s%s%s",
             (long long)k->B, (long long)k->H, (long long)k->M, (long long)k->N, (long long)k->D,
             (long long)k->Dv, mask[k->mask], scale[k->scale], k->split ? "_split" : "",
             k->nan_guard ? "_nanguard" : "");
    if (k->kt_dim_major && !k->split) {
        size_t n = strlen(k->name);
        snprintf(k->name + n, sizeof k->name - n, "_ktdim");
    }
    if (attn_dt(k) != DT_FLOAT) {
        size_t n = strlen(k->name);
        snprintf(k->name + n, sizeof k->name - n, "_%s%s", k->dt == DT_FLOAT16 ? "f16" : "bf16",
                 k->cast_out ? "_castout" : "");
    }
    if (k->out_merge) {
        size_t n = strlen(k->name);
        snprintf(k->name + n, sizeof k->name - n, "_merged");
    }
    if (k->packed) {
        size_t n = strlen(k->name);
        snprintf(k->name + n, sizeof k->name - n, "_packed");
    }
    if (k->Hkv && k->Hkv != k->H) {
        size_t n = strlen(k->name);
        snprintf(k->name + n, sizeof k->name - n, "_kv%lld", (long long)k->Hkv);
    }
    if (k->rope) {
        size_t n = strlen(k->name);
        snprintf(k->name + n, sizeof k->name - n, "_rope");
    }
}

// Rotary embeddings of x [B, h, S, D] at positions p0 .. p0 + S - 1 (transformers' Llama):
// x * cos + cat(-x[..., D/2:], x[..., :D/2]) * sin, as fission leaves Slice, Neg, Concat, Mul
// and Add.
static inline int attn_rope(PB *b, int x, const AttnCase *k, int64_t S, int64_t p0) {
    const Tensor *X = pb_t(b, x);
    const int64_t D = k->D, h2 = D / 2, cd[] = {1, 1, S, D};
    float *cs = xmalloc(sizeof(float) * (size_t)(2 * S * D));
    for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < D; j++) {
            double ang = (double)(p0 + i) * pow(10000.0, -2.0 * (double)(j % h2) / (double)D);
            cs[i * D + j] = (float)cos(ang);
            cs[S * D + i * D + j] = (float)sin(ang);
        }
    DType dt = X->dtype;
    int cosc = pb_const(b, DT_FLOAT, 4, cd, cs), sinc = pb_const(b, DT_FLOAT, 4, cd, cs + S * D);
    free(cs);
    if (dt != DT_FLOAT) {
        cosc = pb_cast(b, cosc, dt);
        sinc = pb_cast(b, sinc, dt);
    }
    const int64_t hd[] = {X->dims[0], X->dims[1], S, h2}, st1[] = {1, 1, 1, 1}, s0[] = {0, 0, 0, 0},
                  s1[] = {0, 0, 0, h2};
    int x1 = pb_slice(b, x, s0, st1, hd), x2 = pb_slice(b, x, s1, st1, hd);
    const int cat[] = {pb_ew1(b, EW_NEG, x2), x1};
    int rot = pb_concat(b, 2, cat, 3);
    return pb_ew2(b, EW_ADD, pb_ew2(b, EW_MUL, x, cosc), pb_ew2(b, EW_MUL, rot, sinc));
}

static inline int64_t attn_kv_heads(const AttnCase *k) {
    return k->Hkv ? k->Hkv : k->H;
}

// HF's repeat_kv of x [B, Hkv, S, Dh] to [B, H, S, Dh] (as fission leaves Unsqueeze, Expand,
// Reshape); x itself where Hkv == H.
static inline int attn_repeat_kv(PB *b, int x, const AttnCase *k, int64_t S, int64_t Dh) {
    const int64_t Hkv = attn_kv_heads(k);
    if (Hkv == k->H)
        return x;
    const int64_t u[] = {k->B, Hkv, 1, S, Dh}, e[] = {k->B, Hkv, k->H / Hkv, S, Dh},
                  o[] = {k->B, k->H, S, Dh};
    return pb_reshape(b, pb_broadcast(b, pb_reshape(b, x, 5, u), 5, e), 4, o);
}

static inline int attn_graph_input(PrimGraph *pg, const char *name, DType dt, int rank,
                                   const int64_t *dims) {
    Tensor *t = pg_add_tensor(pg, name, dt, rank, dims);
    t->kind = TK_INPUT;
    pg->inputs = xrealloc(pg->inputs, sizeof(int) * (size_t)(pg->n_inputs + 1));
    pg->inputs[pg->n_inputs++] = t->id;
    return t->id;
}

// [B, S, H*Dh] -> [B, H, S, Dh] (perm 0,2,1,3), or [B, H, Dh, S] when to_kt (perm 0,2,3,1).
static inline int attn_split_heads(PB *b, int x, int64_t B, int64_t S, int64_t H, int64_t Dh,
                                   bool to_kt) {
    const int64_t d4[] = {B, S, H, Dh};
    int r = pb_reshape(b, x, 4, d4);
    const int q[] = {0, 2, 1, 3}, k[] = {0, 2, 3, 1};
    return pb_transpose(b, r, to_kt ? k : q);
}

// E = exp(s - m) as the clean-up passes merge it: one ELEMWISE {SUB; EXP}.
static inline int attn_sub_exp(PB *b, int s, int m, DType dt) {
    EwInstr code[2];
    memset(code, 0, sizeof code);
    code[0].op = EW_SUB;
    code[0].dtype = dt;
    code[0].arg[0] = (EwArg){EWS_INPUT, 0, 0};
    code[0].arg[1] = (EwArg){EWS_INPUT, 1, 0};
    code[1].op = EW_EXP;
    code[1].dtype = dt;
    code[1].arg[0] = (EwArg){EWS_INSTR, 0, 0};
    EwProgram prog = {2, code};
    const int ins[] = {s, m};
    return pb_ew_program(b, 2, ins, &prog);
}

// The graph: inputs q, k, v (and the mask input), one output O [B, H, M, Dv] (out_merge: its
// heads merged back, [B, M, H * Dv]).
static inline PrimGraph *attn_graph(const AttnCase *k) {
    PrimGraph *pg = prim_graph_create(NULL);
    PB b = {pg, "attention"};
    const DType dt = attn_dt(k);
    int q, kt, v;
    if (k->rope) { // Llama: heads split, Q and K rotated, K and V repeated, K transposed
        const int64_t Hkv = attn_kv_heads(k);
        const int perm[] = {0, 1, 3, 2};
        int qi, ki, vi;
        if (k->split) {
            const int64_t qd[] = {k->B, k->M, k->H * k->D}, kd[] = {k->B, k->N, Hkv * k->D},
                          vd[] = {k->B, k->N, Hkv * k->Dv};
            qi = attn_split_heads(&b, attn_graph_input(pg, "q", dt, 3, qd), k->B, k->M, k->H, k->D,
                                  false);
            ki = attn_split_heads(&b, attn_graph_input(pg, "k", dt, 3, kd), k->B, k->N, Hkv, k->D,
                                  false);
            vi = attn_split_heads(&b, attn_graph_input(pg, "v", dt, 3, vd), k->B, k->N, Hkv, k->Dv,
                                  false);
        } else {
            const int64_t qd[] = {k->B, k->H, k->M, k->D}, kd[] = {k->B, Hkv, k->N, k->D},
                          vd[] = {k->B, Hkv, k->N, k->Dv};
            qi = attn_graph_input(pg, "q", dt, 4, qd);
            ki = attn_graph_input(pg, "k", dt, 4, kd);
            vi = attn_graph_input(pg, "v", dt, 4, vd);
        }
        q = attn_rope(&b, qi, k, k->M, k->N - k->M);
        kt = pb_transpose(&b, attn_repeat_kv(&b, attn_rope(&b, ki, k, k->N, 0), k, k->N, k->D),
                          perm);
        v = attn_repeat_kv(&b, vi, k, k->N, k->Dv);
    } else if (k->packed) {
        // qkv [M, B, 3E] -> [M, B, 3, E] -> [3, M, B, E]; each of Q, K, V: Gather(axis 0, i)
        // -> [M, B, E] -> [M, B*H, D] -> [B*H, M, D] -> [B, H, M, D] (K^T: then [B, H, D, M]).
        const int64_t E = k->H * k->D, pd[] = {k->M, k->B, 3 * E}, ud[] = {k->M, k->B, 3, E},
                      hd[] = {k->M, k->B * k->H, k->D}, od[] = {k->B, k->H, k->M, k->D};
        const int up[] = {2, 0, 1, 3}, hp[] = {1, 0, 2}, kp[] = {0, 1, 3, 2};
        int u = pb_transpose(&b, pb_reshape(&b, attn_graph_input(pg, "qkv", dt, 3, pd), 4, ud), up);
        int part[3];
        for (int i = 0; i < 3; i++) {
            const int64_t idx = i;
            int g = pb_gather(&b, u, 0, 0, NULL, &idx);
            part[i] = pb_reshape(&b, pb_transpose(&b, pb_reshape(&b, g, 3, hd), hp), 4, od);
        }
        q = part[0];
        kt = pb_transpose(&b, part[1], kp);
        v = part[2];
    } else if (k->split) {
        const int64_t Hkv = attn_kv_heads(k);
        const int64_t qd[] = {k->B, k->M, k->H * k->D}, kd[] = {k->B, k->N, Hkv * k->D},
                      vd[] = {k->B, k->N, Hkv * k->Dv};
        q = attn_split_heads(&b, attn_graph_input(pg, "q", dt, 3, qd), k->B, k->M, k->H, k->D,
                             false);
        if (Hkv == k->H) {
            kt = attn_split_heads(&b, attn_graph_input(pg, "k", dt, 3, kd), k->B, k->N, k->H, k->D,
                                  true);
        } else { // split, repeated, then transposed (HF: repeat_kv(k).transpose(2, 3))
            const int perm[] = {0, 1, 3, 2};
            int kk = attn_split_heads(&b, attn_graph_input(pg, "k", dt, 3, kd), k->B, k->N, Hkv,
                                      k->D, false);
            kt = pb_transpose(&b, attn_repeat_kv(&b, kk, k, k->N, k->D), perm);
        }
        v = attn_repeat_kv(&b,
                           attn_split_heads(&b, attn_graph_input(pg, "v", dt, 3, vd), k->B, k->N,
                                            Hkv, k->Dv, false),
                           k, k->N, k->Dv);
    } else if (attn_kv_heads(k) != k->H) {
        const int64_t Hkv = attn_kv_heads(k);
        const int64_t qd[] = {k->B, k->H, k->M, k->D}, kd[] = {k->B, Hkv, k->N, k->D},
                      vd[] = {k->B, Hkv, k->N, k->Dv};
        const int perm[] = {0, 1, 3, 2};
        q = attn_graph_input(pg, "q", dt, 4, qd);
        kt = pb_transpose(
            &b, attn_repeat_kv(&b, attn_graph_input(pg, "k", dt, 4, kd), k, k->N, k->D), perm);
        v = attn_repeat_kv(&b, attn_graph_input(pg, "v", dt, 4, vd), k, k->N, k->Dv);
    } else {
        const int64_t qd[] = {k->B, k->H, k->M, k->D}, kd[] = {k->B, k->H, k->N, k->D},
                      vd[] = {k->B, k->H, k->N, k->Dv};
        q = attn_graph_input(pg, "q", dt, 4, qd);
        if (k->kt_dim_major) {
            const int64_t ktd[] = {k->B, k->D, k->H, k->N};
            const int perm[] = {0, 2, 1, 3};
            kt = pb_transpose(&b, attn_graph_input(pg, "kt", dt, 4, ktd), perm);
        } else {
            int kk = attn_graph_input(pg, "k", dt, 4, kd);
            const int perm[] = {0, 1, 3, 2};
            kt = pb_transpose(&b, kk, perm);
        }
        v = attn_graph_input(pg, "v", dt, 4, vd);
    }
    int s = pb_matmul(&b, q, kt);
    if (k->scale == ATTN_SCALE_MUL)
        s = pb_ew2i(&b, EW_MUL, s, 1.0 / sqrt((double)k->D));
    else if (k->scale == ATTN_SCALE_DIV)
        s = pb_ew2i(&b, EW_DIV, s, sqrt((double)k->D));
    if (k->mask == ATTN_MASK_KEYS || k->mask == ATTN_MASK_FULL) {
        // An additive mask input of 0 / -10000 (BERT's extended attention mask).
        const int64_t md[] = {k->B, 1, k->mask == ATTN_MASK_KEYS ? 1 : k->M, k->N};
        s = pb_ew2(&b, EW_ADD, s,
                   attn_graph_input(pg, k->nan_guard ? "mask_inf" : "mask", dt, 4, md));
    } else if (k->mask == ATTN_MASK_CAUSAL) {
        // GPT-2's WHERE(causal, s, -FLT_MAX) on a constant lower-triangular mask (keys past the
        // query's position, with the query at the end of the key range).
        const int64_t md[] = {1, 1, k->M, k->N};
        uint8_t *m = xmalloc((size_t)(k->M * k->N) + 1);
        for (int64_t i = 0; i < k->M; i++)
            for (int64_t j = 0; j < k->N; j++)
                m[i * k->N + j] = j <= i + (k->N - k->M);
        int mc = pb_const(&b, DT_BOOL, 4, md, m);
        free(m);
        s = pb_where(&b, mc, s, pb_const_scalar(&b, dt, -FLT_MAX));
    }
    const uint32_t last = 1u << 3;
    int mx = pb_reduce(&b, RED_MAX, s, last, true, false);
    int e = attn_sub_exp(&b, s, mx, dt);
    int l = pb_reduce(&b, RED_SUM, e, last, true, false);
    int p;
    if (k->nan_guard) {
        EwInstr code[3];
        memset(code, 0, sizeof code);
        code[0].op = EW_DIV;
        code[0].dtype = dt;
        code[0].arg[0] = (EwArg){EWS_INPUT, 0, 0};
        code[0].arg[1] = (EwArg){EWS_INPUT, 1, 0};
        code[1].op = EW_ISNAN;
        code[1].dtype = DT_BOOL;
        code[1].arg[0] = (EwArg){EWS_INSTR, 0, 0};
        code[2].op = EW_WHERE;
        code[2].dtype = dt;
        code[2].arg[0] = (EwArg){EWS_INSTR, 1, 0};
        code[2].arg[1] = (EwArg){EWS_IMM, 0, 0.0};
        code[2].arg[2] = (EwArg){EWS_INSTR, 0, 0};
        EwProgram prog = {3, code};
        const int ins[] = {e, l};
        p = pb_ew_program(&b, 2, ins, &prog);
    } else {
        p = pb_ew2(&b, EW_DIV, e, l);
    }
    int o = pb_matmul(&b, p, v);
    if (k->cast_out && dt != DT_FLOAT)
        o = pb_cast(&b, o, DT_FLOAT);
    if (k->out_merge) { // ctx.permute(0, 2, 1, 3).reshape(B, M, H * Dv)
        const int perm[] = {0, 2, 1, 3};
        const int64_t md[] = {k->B, k->M, k->H * k->Dv};
        o = pb_reshape(&b, pb_transpose(&b, o, perm), 3, md);
    }
    pg->outputs = xrealloc(pg->outputs, sizeof(int) * (size_t)(pg->n_outputs + 1));
    pg->outputs[pg->n_outputs++] = o;
    return pg;
}

// Input values for the mask input named `name`: "mask": 0 or -10000, about a quarter masked,
// never a whole row; "mask_inf" (nan_guard): 0 or -inf likewise, and every 5th row all -inf.
static inline void attn_fill_mask(const char *name, float *m, int64_t rows, int64_t n) {
    bool inf = strcmp(name, "mask_inf") == 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++)
            m[r * n + j] = (inf && r % 5 == 3) || (j > 0 && rand() % 4 == 0)
                               ? (inf ? -INFINITY : -10000.0f)
                               : 0.0f;
}

#endif
