// The CUDA libraries' search (backend/cuda/cuda_libs.h) on stand-in libraries built here with the
// C compiler (libfakecuda.so.N: no GPU, no CUDA needed): ORCH_CUDA_LIB_DIR's folders are searched
// first and in order, each for every soname; a file without every symbol, one the caller's check
// refuses or one that does not open is passed over and named in the answer; nothing found says
// which sonames were looked for and where. Then the real cuBLASLt / cuDNN loaders' answers are
// printed (a path or a reason, never a crash).
#include "backend/cpu/cbuild.h"
#include "backend/cuda/cublaslt.h"
#include "backend/cuda/cuda_libs.h"
#include "backend/cuda/cudnn.h"
#include "../check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_root[256];
static bool g_built; // the stand-ins compiled (else the cases say so and fail)

// DIR/NAME from C source text, with the C compiler.
static bool build_lib(const char *dir, const char *name, const char *src) {
    char path[512], cmd[1400];
    snprintf(path, sizeof path, "%s/%s.c", g_root, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/%s && %s -shared -fPIC -o %s/%s/%s %s", g_root, dir,
             cbuild_compiler(), g_root, dir, name, path);
    return system(cmd) == 0;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/%s", g_root, dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static const char *const SONAMES[] = {"libfakecuda.so.3", "libfakecuda.so.2"};

typedef struct Fake {
    int (*version)(void);
    int (*add)(int, int);
} Fake;

// Searches with ORCH_CUDA_LIB_DIR = the given folders under g_root (NULL: unset).
static void *search(const char *dirs, Fake *f, bool want_add, CudaLibAccept accept, char *where,
                    size_t n) {
    char env[1024] = "";
    for (const char *p = dirs; p && *p;) {
        size_t len = strcspn(p, ":");
        size_t at = strlen(env);
        snprintf(env + at, sizeof env - at, "%s%s/%.*s", at ? ":" : "", g_root, (int)len, p);
        p += len + (p[len] == ':');
    }
    if (dirs)
        setenv("ORCH_CUDA_LIB_DIR", env, 1);
    else
        unsetenv("ORCH_CUDA_LIB_DIR");
    memset(f, 0, sizeof *f);
    const CudaLibSym syms[] = {{(void **)&f->version, "fake_version"},
                               {(void **)&f->add, "fake_add"}};
    void *h = cuda_lib_open(SONAMES, 2, syms, want_add ? 2 : 1, accept, f, where, n);
    unsetenv("ORCH_CUDA_LIB_DIR");
    return h;
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static bool refuse_7(void *ctx, const char *path, char *why, size_t n) {
    const Fake *f = ctx;
    if (f->version() != 7)
        return true;
    snprintf(why, n, "%s is version 7", path);
    return false;
}

static void test_not_found(void) {
    char where[1024];
    Fake f;
    void *h = search(NULL, &f, true, NULL, where, sizeof where);
    CHECK_MSG(!h, "found %s", where);
    CHECK_MSG(strstr(where, "libfakecuda.so.3/.so.2 not found") && strstr(where,
                                                                          "ORCH_CUDA_LIB_DIR"),
              "%s", where);
    // A folder without them: the same answer.
    h = search("empty", &f, true, NULL, where, sizeof where);
    CHECK_MSG(!h && strstr(where, "not found"), "%s", where);
}

static void test_override_folder(void) {
    CHECK_MSG(g_built, "the stand-in libraries did not build (%s)", cbuild_compiler());
    char where[1024];
    Fake f;
    void *h = search("a", &f, true, NULL, where, sizeof where);
    CHECK_MSG(h && ends_with(where, "/a/libfakecuda.so.2"), "%s", where);
    if (h) {
        CHECK(f.version && f.version() == 7 && f.add && f.add(2, 3) == 5);
        dlclose(h);
    }
}

// A file without every symbol is passed over (the next folder's is taken); alone, it is the
// answer's reason.
static void test_missing_symbol(void) {
    CHECK_MSG(g_built, "the stand-in libraries did not build");
    char where[1024];
    Fake f;
    void *h = search("b:a", &f, true, NULL, where, sizeof where);
    CHECK_MSG(h && ends_with(where, "/a/libfakecuda.so.2"), "%s", where);
    if (h)
        dlclose(h);
    h = search("b", &f, true, NULL, where, sizeof where);
    CHECK_MSG(!h && strstr(where, "/b/libfakecuda.so.3 lacks fake_add"), "%s", where);
    // Without asking for fake_add, b's file is taken.
    h = search("b:a", &f, false, NULL, where, sizeof where);
    CHECK_MSG(h && ends_with(where, "/b/libfakecuda.so.3") && f.version() == 9, "%s", where);
    if (h)
        dlclose(h);
}

// Folders come first, sonames second: a's older soname before b's newer one.
static void test_folder_order(void) {
    CHECK_MSG(g_built, "the stand-in libraries did not build");
    char where[1024];
    Fake f;
    void *h = search("a:b", &f, false, NULL, where, sizeof where);
    CHECK_MSG(h && ends_with(where, "/a/libfakecuda.so.2") && f.version() == 7, "%s", where);
    if (h)
        dlclose(h);
}

// The caller's check refuses a file (a version it does not declare): the next is taken; alone,
// the check's reason is the answer.
static void test_accept(void) {
    CHECK_MSG(g_built, "the stand-in libraries did not build");
    char where[1024];
    Fake f;
    void *h = search("a:b", &f, false, refuse_7, where, sizeof where);
    CHECK_MSG(h && ends_with(where, "/b/libfakecuda.so.3") && f.version() == 9, "%s", where);
    if (h)
        dlclose(h);
    h = search("a", &f, false, refuse_7, where, sizeof where);
    CHECK_MSG(!h && strstr(where, "/a/libfakecuda.so.2 is version 7"), "%s", where);
}

// A file of that name that is no shared object is named with dlopen's reason.
static void test_not_a_library(void) {
    write_text("bad", "libfakecuda.so.3", "not a library\n");
    char where[1024];
    Fake f;
    void *h = search("bad", &f, true, NULL, where, sizeof where);
    CHECK_MSG(!h && strstr(where, "/bad/libfakecuda.so.3 does not open: "), "%s", where);
    if (g_built) {
        h = search("bad:a", &f, true, NULL, where, sizeof where);
        CHECK_MSG(h && ends_with(where, "/a/libfakecuda.so.2"), "%s", where);
        if (h)
            dlclose(h);
    }
}

// The real libraries: found or not, the answer is a path or a reason.
static void test_real_libraries(void) {
    const char *lt = blaslt_describe_load(), *dnn = dnn_describe_load();
    printf("  cuBLASLt: %s\n  cuDNN: %s\n", lt, dnn);
    CHECK(lt[0] && dnn[0]);
    CHECK(blaslt_available() == (blaslt_version() > 0));
    CHECK(dnn_available() == (dnn_version() > 0));
}

int main(void) {
    snprintf(g_root, sizeof g_root, "%s/orch-cuda-libs-XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_root)) {
        printf("cannot create %s\n0 passed, 1 failed\n", g_root);
        return 1;
    }
    g_built = build_lib("a", "libfakecuda.so.2",
                        "int fake_version(void) { return 7; }\n"
                        "int fake_add(int a, int b) { return a + b; }\n") &&
              build_lib("b", "libfakecuda.so.3", "int fake_version(void) { return 9; }\n");
    RUN(test_not_found);
    RUN(test_override_folder);
    RUN(test_missing_symbol);
    RUN(test_folder_order);
    RUN(test_accept);
    RUN(test_not_a_library);
    RUN(test_real_libraries);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_root);
    if (system(cmd) != 0)
        printf("  (could not remove %s)\n", g_root);
    return CHECK_DONE();
}
