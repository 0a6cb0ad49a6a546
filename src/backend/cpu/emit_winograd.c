// Winograd F(m x m, 3 x 3) convolution of the C target's linear emitter (cgen_linear.h; v=winograd,
// m = 2 or 4): a 2-D conv with a 3x3 kernel, stride 1, dilation 1, one group, W a constant that
// fn_prepack transforms once at load (G g G^T, into mr-row panels per transform point). Per
// task: the input rows copied zero-padded (or X's values through a fused prologue), the input
// transform B^T d B of every (m+2)x(m+2) tile into (m+2)^2 matrices C x tiles, one packed GEMM
// per transform point (the register-tile micro-kernel of the packed GEMM), the output transform
// A^T M A into the output and the epilogue over the finished rows.
// Needs: an analysed candidate (Emit) that lin_winograd_ok accepts. Guarantees: the kernel follows
// target.h's ABI (its NAME_prepack writes a larger copy of W: the size query of target.h) and
// computes the conv up to float rounding, which grows with m (docs/kernels/conv-cpu.md).
#define ORCH_CGEN_LINEAR_INTERNAL
#include "cgen_linear.h"

#include <math.h>
#include <stdio.h>

// The transforms (Lavin and Gray's; F(4x4) on the points 0, +-1, +-2, infinity). Row-major, a = m
// + 2 columns: input BT (a x a), weights G (a x 3), output AT (m x a).
static const double BT2[16] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double G2[12] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double AT2[8] = {1, 1, 1, 0, 0, 1, -1, -1};
static const double BT4[36] = {4, 0,  -5, 0, 1, 0, 0, -4, -4, 1,  1, 0, 0, 4, -4, -1, 1, 0,
                               0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1};
static const double G4[18] = {1.0 / 4,  0,         0,        -1.0 / 6, -1.0 / 6, -1.0 / 6,
                              -1.0 / 6, 1.0 / 6,   -1.0 / 6, 1.0 / 24, 1.0 / 12, 1.0 / 6,
                              1.0 / 24, -1.0 / 12, 1.0 / 6,  0,        0,        1};
static const double AT4[24] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0,
                               0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};

bool lin_winograd_ok(const Lin *L) {
    return L->conv && !L->convt && L->S == 2 && L->G == 1 && L->w_prepack_ok && L->k[0] == 3 &&
           L->k[1] == 3 && L->st[0] == 1 && L->st[1] == 1 && L->dil[0] == 1 && L->dil[1] == 1 &&
           L->Cg >= LIN_WINO_MIN_C && L->out[0] >= 2 && L->out[1] >= 2 &&
           L->C * (L->in[0] + 6) * (L->in[1] + 6) < ((int64_t)1 << 28);
}

// The geometry of a task of R tile rows. Its input is copied into strips: for each channel, a
// = m + 2 rows of R * Wp floats (+ 2 of slack), tile row rr's input row r at columns rr * Wp ..
// rr * Wp + Wp of strip row r, Wp = (TW + 1) * m. Then tile (rr, tx) reads columns j * m .. j * m
// + a of the strip rows, j = rr * (TW + 1) + tx: one flat loop over j runs every tile of the task
// as one vector loop (a tile row alone is 7 or 14 tiles of ResNet's layers: too short for 16
// lanes). The tile tx = TW of each row is a dummy, computed and dropped (its columns overhang
// into the next strip). The results go the same way: an output strip of m rows, copied out
// row by row. NCP: the GEMM's columns, R * (TW + 1) rounded up to nr.
typedef struct WinoGeo {
    int m, a, T;
    int64_t TH, TW, Wp, RL, NCP;
} WinoGeo;

static WinoGeo wino_geo(const Lin *L, int m, int64_t R, int nr) {
    WinoGeo g;
    g.m = m;
    g.a = m + 2;
    g.T = g.a * g.a;
    g.TH = (L->out[0] + m - 1) / m;
    g.TW = (L->out[1] + m - 1) / m;
    R = ORCH_MIN(R, g.TH);
    g.Wp = (g.TW + 1) * m;
    g.RL = R * g.Wp + 2;
    g.NCP = (R * (g.TW + 1) + nr - 1) / nr * nr;
    return g;
}

double lin_winograd_bytes(const Lin *L, int m, int64_t R, int nr, int mr) {
    WinoGeo g = wino_geo(L, m, R, nr);
    return 4.0 * (double)(L->C * g.a * g.RL + g.T * L->C * g.NCP + g.T * mr * g.NCP + m * g.RL);
}

// One linear combination sum_k row[k] * x_k, x_k named P<fixed>_<k> (fixed_first) or P<k>_<fixed>;
// the zero terms left out, +-1 as an add or a subtract.
static void comb(StrBuf *s, const double *row, int n, const char *P, int fixed, bool fixed_first) {
    bool any = false;
    for (int k = 0; k < n; k++) {
        double c = row[k];
        if (c == 0)
            continue;
        char x[32];
        snprintf(x, sizeof x, "%s%d_%d", P, fixed_first ? fixed : k, fixed_first ? k : fixed);
        if (c == 1)
            sb_printf(s, "%s%s", any ? " + " : "", x);
        else if (c == -1)
            sb_printf(s, "%s%s", any ? " - " : "-", x);
        else
            sb_printf(s, "%s%.9ef * %s", any ? " + " : "", c, x);
        any = true;
    }
    if (!any)
        sb_puts(s, "0.0f");
}

// The output transform of one tile, its values m<i>_<j> read before: t = A^T M, then y[u * RL +
// v] = (t A)[u][v] (y: the tile's place in the output strip).
static void emit_out_tile(StrBuf *s, const WinoGeo *g, const double *AT, int ind) {
    int a = g->a, m = g->m;
    for (int u = 0; u < m; u++)
        for (int j = 0; j < a; j++) {
            sb_line(s, ind, "const float t%d_%d = ", u, j);
            comb(s, AT + u * a, a, "m", j, false);
            sb_puts(s, ";\n");
        }
    for (int u = 0; u < m; u++)
        for (int v = 0; v < m; v++) {
            sb_line(s, ind, "y[%lld] = ", (long long)(u * g->RL + v));
            comb(s, AT + v * a, a, "t", u, true);
            sb_puts(s, ";\n");
        }
}

// fn_prepack: W (OC x C x 3 x 3) into U = G g G^T per (oc, c), stored per transform point xi as
// Mr x C panels (Mr = OC rounded up to mr, rows past OC zero), each panel of mr rows k-major (mr
// values per channel): the packed A the micro-kernel reads. Computed in double, rounded once.
static void emit_prepack_wino(Emit *E, const WinoGeo *g, const double *G, int mr) {
    const Lin *L = E->L;
    StrBuf *s = E->s;
    int a = g->a;
    int64_t Mr = (L->OC + mr - 1) / mr * mr, C = L->C;
    int64_t bytes = 4 * (int64_t)g->T * Mr * C;
    sb_printf(s, "int %s_prepack(int input, const void *src, void *dst) {\n", E->fn);
    sb_line(s, 1, "if (input != %d) return 0;\n", L->pb);
    sb_line(s, 1, "if (!src) {\n");
    sb_line(s, 2, "if (dst) *(int64_t *)dst = %lld;\n", (long long)bytes);
    sb_line(s, 2, "return 1;\n");
    sb_line(s, 1, "}\n");
    sb_line(s, 1, "if (!dst) return 1;\n");
    sb_line(s, 1, "static const double Gm[%d][3] = {", a);
    for (int i = 0; i < a; i++)
        sb_printf(s, "%s{%.17g, %.17g, %.17g}", i ? ", " : "", G[i * 3], G[i * 3 + 1],
                  G[i * 3 + 2]);
    sb_puts(s, "};\n");
    sb_line(s, 1, "const float *restrict w = (const float *)src;\n");
    sb_line(s, 1, "float *restrict d = (float *)dst;\n");
    sb_line(s, 1, "memset(d, 0, %lld);\n", (long long)bytes);
    sb_line(s, 1, "for (int64_t oc = 0; oc < %lld; oc++)\n", (long long)L->OC);
    sb_line(s, 2, "for (int64_t c = 0; c < %lld; c++) {\n", (long long)C);
    sb_line(s, 3, "const float *restrict k = w + (oc * %lld + c) * 9;\n", (long long)C);
    sb_line(s, 3, "double t[%d][3];\n", a);
    sb_line(s, 3, "for (int i = 0; i < %d; i++)\n", a);
    sb_line(s, 4, "for (int q = 0; q < 3; q++)\n");
    sb_line(s, 5, "t[i][q] = Gm[i][0] * k[q] + Gm[i][1] * k[3 + q] + Gm[i][2] * k[6 + q];\n");
    sb_line(s, 3, "for (int i = 0; i < %d; i++)\n", a);
    sb_line(s, 4, "for (int j = 0; j < %d; j++)\n", a);
    sb_line(s, 5,
            "d[((int64_t)(i * %d + j) * %lld + oc / %d * %d) * %lld + c * %d + oc %% %d] = "
            "(float)(t[i][0] * Gm[j][0] + t[i][1] * Gm[j][1] + t[i][2] * Gm[j][2]);\n",
            a, (long long)Mr, mr, mr, (long long)C, mr, mr);
    sb_line(s, 2, "}\n");
    sb_line(s, 1, "return 1;\n");
    sb_puts(s, "}\n\n");
}

int lin_emit_winograd(Emit *E, Err *e) {
    const Lin *L = E->L;
    CLinConfig t;
    cgen_lin_config_unpack(E->cfg, &t);
    StrBuf *s = E->s;
    int mr = t.mr, nr = t.nr, m = t.wm;
    int64_t mc = t.mc, R = t.rows;
    if (!lin_winograd_ok(L) || (m != 2 && m != 4) || mr < 1 || nr < 16 || nr % 16 || mc < mr ||
        mc % mr || R < 1)
        return err_set(e, ST_INVALID, "linear kernel %s: config '%s' does not fit", E->fn,
                       E->cfg->desc);
    WinoGeo g = wino_geo(L, m, R, nr);
    R = ORCH_MIN(R, g.TH);
    const double *BT = m == 2 ? BT2 : BT4, *G = m == 2 ? G2 : G4, *AT = m == 2 ? AT2 : AT4;
    int a = g.a, T = g.T;
    int64_t C = L->C, OC = L->OC, H = L->in[0], W = L->in[1], OH = L->out[0], OW = L->out[1];
    int64_t padT = L->pad[0], padL = L->pad[1];
    int64_t Mr = (OC + mr - 1) / mr * mr;
    mc = ORCH_MIN(mc, Mr);
    int64_t nrb = (g.TH + R - 1) / R, nob = (Mr + mc - 1) / mc;
    int64_t tasks = L->batch * nrb * nob;
    int64_t Wp = g.Wp, RL = g.RL, NCP = g.NCP, TW1 = g.TW + 1;
    lin_emit_uk(E, "ukp", mr, nr);
    emit_prepack_wino(E, &g, G, mr);
    if (L->epi) {
        int rc = lin_emit_epilogue(E, e);
        if (rc)
            return rc;
    }
    sb_printf(s, "void %s(const void *const *in, void *out) {\n", E->fn);
    sb_line(s, 1, "float *restrict o = (float *)out;\n");
    sb_line(s, 1, "#pragma omp parallel if (%d)\n", tasks > 1 && lin_worth_parallel(L));
    sb_line(s, 1, "{\n");
    sb_line(s, 2, "float *Xs = (float *)aligned_alloc(64, %lld);\n",
            (long long)((C * a * RL * 4 + 63) / 64 * 64));
    sb_line(s, 2, "float *V = (float *)aligned_alloc(64, %lld);\n",
            (long long)((T * C * NCP * 4 + 63) / 64 * 64));
    sb_line(s, 2, "float *Mb = (float *)aligned_alloc(64, %lld);\n",
            (long long)((T * mr * NCP * 4 + 63) / 64 * 64));
    sb_line(s, 2, "float *Ys = (float *)aligned_alloc(64, %lld);\n",
            (long long)((m * RL * 4 + 63) / 64 * 64));
    // Output-channel blocks fastest: a thread's consecutive tasks read the same input rows.
    sb_line(s, 2, "#pragma omp for schedule(static)\n");
    sb_line(s, 2, "for (int64_t t = 0; t < %lld; t++) {\n", (long long)tasks);
    sb_line(s, 3, "const int64_t b = t / %lld, r_ = t %% %lld;\n", (long long)(nrb * nob),
            (long long)(nrb * nob));
    sb_line(s, 3, "const int64_t ty0 = r_ / %lld * %lld, oc0 = r_ %% %lld * %lld;\n",
            (long long)nob, (long long)R, (long long)nob, (long long)mc);
    sb_line(s, 3, "const int64_t rows = %lld - ty0 < %lld ? %lld - ty0 : %lld;\n", (long long)g.TH,
            (long long)R, (long long)g.TH, (long long)R);
    sb_line(s, 3, "const int64_t mcnt = %lld - oc0 < %lld ? %lld - oc0 : %lld;\n", (long long)OC,
            (long long)mc, (long long)OC, (long long)mc);
    lin_emit_batch_coords(E, 3, false);
    if (L->pa >= 0)
        sb_line(s, 3, "const float *restrict X = (const float *)in[%d] + q_n * %lld;\n", L->pa,
                (long long)(C * H * W));
    // 1. The input strips, zero-padded: strip row r of tile row rr holds input row (ty0 + rr) *
    // m + r - padT, column x at input column x - padL.
    sb_line(s, 3, "for (int64_t c = 0; c < %lld; c++)\n", (long long)C);
    sb_line(s, 4, "for (int r = 0; r < %d; r++) {\n", a);
    sb_line(s, 5, "float *restrict xr = Xs + (c * %d + r) * %lld;\n", a, (long long)RL);
    sb_line(s, 5, "for (int64_t rr = 0; rr < rows; rr++) {\n");
    sb_line(s, 6, "float *restrict d = xr + rr * %lld;\n", (long long)Wp);
    sb_line(s, 6, "const int64_t ih = (ty0 + rr) * %d + r - %lld;\n", m, (long long)padT);
    sb_line(s, 6, "if (ih < 0 || ih >= %lld) { memset(d, 0, %lld); continue; }\n", (long long)H,
            (long long)(Wp * 4));
    if (L->pa < 0) {
        // X through a fused prologue (a pad, an activation): each value by the patch reader at
        // kernel offset 0 of the output position (ih + padT, x), i.e. input (ih, x - padL), 0
        // outside the input.
        sb_line(s, 6, "for (int64_t x = 0; x < %lld; x++) {\n", (long long)Wp);
        sb_line(s, 7, "const int64_t x_c = c, x_k0 = 0, x_k1 = 0, x_o0 = ih + %lld, x_o1 = x;\n",
                (long long)padT);
        sb_line(s, 7, "(void)x_k0; (void)x_k1;\n");
        int rc = lin_emit_patch_value(E, 7, "d[x]", e);
        if (rc)
            return rc;
        sb_line(s, 6, "}\n");
    } else {
        sb_line(s, 6, "const float *restrict sr = X + (c * %lld + ih) * %lld;\n", (long long)H,
                (long long)W);
        int64_t x_lo = ORCH_MIN(ORCH_MAX(padL, 0), Wp), x_hi = ORCH_MIN(W + padL, Wp);
        if (x_lo > 0)
            sb_line(s, 6, "memset(d, 0, %lld);\n", (long long)(x_lo * 4));
        if (x_hi > x_lo)
            sb_line(s, 6, "memcpy(d + %lld, sr + %lld, %lld);\n", (long long)x_lo,
                    (long long)(x_lo - padL), (long long)((x_hi - x_lo) * 4));
        if (ORCH_MAX(x_hi, x_lo) < Wp)
            sb_line(s, 6, "memset(d + %lld, 0, %lld);\n", (long long)ORCH_MAX(x_hi, x_lo),
                    (long long)((Wp - ORCH_MAX(x_hi, x_lo)) * 4));
    }
    sb_line(s, 5, "}\n");
    sb_line(s, 5, "xr[rows * %lld] = xr[rows * %lld + 1] = 0.0f; // the last dummy's overhang\n",
            (long long)Wp, (long long)Wp);
    sb_line(s, 4, "}\n");
    // 2. The input transform: V[xi][c][j] = (B^T d B)[xi] of tile j; columns past the task's
    // tiles zero (the GEMM runs whole panels).
    sb_line(s, 3, "const int64_t ncol = rows * %lld, ncp = (ncol + %d) / %d * %d;\n",
            (long long)TW1, nr - 1, nr, nr);
    sb_line(s, 3, "for (int64_t c = 0; c < %lld; c++) {\n", (long long)C);
    sb_line(s, 4, "const float *restrict xb = Xs + c * %lld;\n", (long long)(a * RL));
    sb_line(s, 4, "float *restrict vb = V + c * %lld;\n", (long long)NCP);
    sb_line(s, 4, "#pragma omp simd\n");
    sb_line(s, 4, "for (int64_t j = 0; j < ncol; j++) {\n");
    sb_line(s, 5, "const float *restrict q = xb + j * %d;\n", m);
    for (int r = 0; r < a; r++)
        for (int c = 0; c < a; c++)
            sb_line(s, 5, "const float d%d_%d = q[%lld];\n", r, c, (long long)(r * RL + c));
    // t[i][c] = sum_r BT[i][r] d[r][c]; V[i][j] = sum_c t[i][c] BT[j][c].
    for (int i = 0; i < a; i++)
        for (int c = 0; c < a; c++) {
            sb_line(s, 5, "const float t%d_%d = ", i, c);
            comb(s, BT + i * a, a, "d", c, false);
            sb_puts(s, ";\n");
        }
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
            sb_line(s, 5, "vb[j + %lld] = ", (long long)((i * a + j) * C * NCP));
            comb(s, BT + j * a, a, "t", i, true);
            sb_puts(s, ";\n");
        }
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "if (ncp > ncol)\n");
    sb_line(s, 5, "for (int xi = 0; xi < %d; xi++)\n", T);
    sb_line(s, 6, "memset(V + (xi * %lld + c) * %lld + ncol, 0, (ncp - ncol) * 4);\n", (long long)C,
            (long long)NCP);
    sb_line(s, 3, "}\n");
    // 3. Per mr output channels: the GEMM of every transform point into Mb[xi][mr][ncp] (A, the
    // transformed weights, panel by panel in fn_prepack's order), then per channel the output
    // transform into the output strip, its rows copied out, then the epilogue over them.
    sb_line(s, 3,
            "const int64_t oh0 = ty0 * %d, oh1 = (ty0 + rows) * %d < %lld ? (ty0 + rows) * %d : "
            "%lld;\n",
            m, m, (long long)OH, m, (long long)OH);
    sb_line(s, 3, "for (int64_t ir = 0; ir < mcnt; ir += %d) {\n", mr);
    sb_line(s, 4, "const int64_t mm = mcnt - ir < %d ? mcnt - ir : %d;\n", mr, mr);
    sb_line(s, 4, "for (int xi = 0; xi < %d; xi++) {\n", T);
    sb_line(s, 5, "const float *ap = (const float *)in[%d] + (xi * %lld + oc0 + ir) * %lld;\n",
            L->pb, (long long)Mr, (long long)C);
    sb_line(s, 5, "const float *bx = V + xi * %lld;\n", (long long)(C * NCP));
    sb_line(s, 5, "float *cx = Mb + xi * %lld;\n", (long long)(mr * NCP));
    sb_line(s, 5, "for (int64_t jr = 0; jr < ncp; jr += %d)\n", nr);
    sb_line(s, 6, "%s_ukp(%lld, ap, bx + jr, %lld, cx + jr, %lld, 0);\n", E->fn, (long long)C,
            (long long)NCP, (long long)NCP);
    sb_line(s, 4, "}\n");
    sb_line(s, 4, "for (int64_t i = 0; i < mm; i++) {\n");
    sb_line(s, 5, "const float *restrict mq = Mb + i * %lld;\n", (long long)NCP);
    sb_line(s, 5, "#pragma omp simd\n");
    sb_line(s, 5, "for (int64_t j = 0; j < ncol; j++) {\n");
    sb_line(s, 6, "float *restrict y = Ys + j * %d;\n", m);
    for (int xi = 0; xi < T; xi++)
        sb_line(s, 6, "const float m%d_%d = mq[%lld + j];\n", xi / a, xi % a,
                (long long)(xi * mr * NCP));
    emit_out_tile(s, &g, AT, 6);
    sb_line(s, 5, "}\n");
    sb_line(s, 5, "float *restrict ob = o + (b * %lld + oc0 + ir + i) * %lld;\n", (long long)L->M,
            (long long)L->N);
    sb_line(s, 5, "for (int64_t rr = 0; rr < rows; rr++)\n");
    sb_line(s, 6, "for (int u = 0; u < %d && (ty0 + rr) * %d + u < %lld; u++)\n", m, m,
            (long long)OH);
    sb_line(s, 7, "memcpy(ob + ((ty0 + rr) * %d + u) * %lld, Ys + u * %lld + rr * %lld, %lld);\n",
            m, (long long)OW, (long long)RL, (long long)Wp, (long long)(OW * 4));
    sb_line(s, 4, "}\n");
    if (L->epi)
        sb_line(s, 4, "%s_epi(o, in, b, oc0 + ir, mm, oh0 * %lld, (oh1 - oh0) * %lld);\n", E->fn,
                (long long)OW, (long long)OW);
    sb_line(s, 3, "}\n");
    sb_line(s, 2, "}\n");
    sb_line(s, 2, "free(Xs);\n");
    sb_line(s, 2, "free(V);\n");
    sb_line(s, 2, "free(Mb);\n");
    sb_line(s, 2, "free(Ys);\n");
    sb_line(s, 1, "}\n");
    sb_puts(s, "}\n\n");
    return ST_OK;
}
