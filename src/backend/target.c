// The targets this build has, by name, opening a machine and the ranking of configs (target.h).
#include "target.h"

#include <stdio.h>
#include <string.h>

const Target *const target_all[TARGET_COUNT] = {&target_cpu, &target_cuda};

const Target *target_find(const char *name) {
    if (name && (strcmp(name, "cpu") == 0 || strcmp(name, "c") == 0))
        return &target_cpu;
    if (name && strcmp(name, "cuda") == 0)
        return &target_cuda;
    return NULL;
}

const char *target_names(void) {
    return "cpu, cuda";
}

int target_open(const Target *t, const TargetOptions *opt, TargetMachine *m, Err *e) {
    memset(m, 0, sizeof *m);
    m->target = t;
    if (opt)
        m->opt = *opt;
    int rc = t->check_options(&m->opt, e);
    if (rc == ST_OK)
        rc = t->open(m, e);
    if (rc)
        t->close(m);
    return rc;
}

void target_close(TargetMachine *m) {
    if (m && m->target)
        m->target->close(m);
}

int target_detect(const Target *t, int threads, HwInfo *hw, Err *e) {
    TargetOptions opt = {.threads = threads};
    TargetMachine m;
    int rc = target_open(t, &opt, &m, e);
    if (rc == ST_OK)
        *hw = m.hw;
    target_close(&m);
    return rc;
}

int cgen_sort_configs(KernelConfig *cand, int n, KernelConfig *out, int k) {
    // Insertion sort by score, dropping duplicates of the canonical text.
    for (int i = 1; i < n; i++) {
        KernelConfig t = cand[i];
        int j = i - 1;
        while (j >= 0 && cand[j].score > t.score) {
            cand[j + 1] = cand[j];
            j--;
        }
        cand[j + 1] = t;
    }
    int m = 0;
    for (int i = 0; i < n && m < k; i++) {
        bool dup = false;
        for (int j = 0; j < m && !dup; j++)
            dup = !strcmp(out[j].desc, cand[i].desc);
        if (!dup)
            out[m++] = cand[i];
    }
    return m;
}
