// The CUDA libraries' search (cuda_libs.h): folders in order, sonames in order within each.
#define _GNU_SOURCE
#include "cuda_libs.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DIRS 64

typedef struct Dirs {
    char *d[MAX_DIRS]; // "" for the loader's own search (a bare soname)
    int n;
} Dirs;

static void add_dir(Dirs *ds, const char *dir, size_t len) {
    if (ds->n < MAX_DIRS && len > 0 && len < 4096) {
        ds->d[ds->n] = xmalloc(len + 1);
        memcpy(ds->d[ds->n], dir, len);
        ds->d[ds->n++][len] = 0;
    }
}

// /usr/local/cuda-X.Y: the newer first.
static int cmp_toolkit(const void *a, const void *b) {
    const char *x = strrchr(*(const char *const *)a, '-'), *y = strrchr(*(const char *const *)b, '-');
    char *end;
    long xm = strtol(x + 1, &end, 10), xn = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    long ym = strtol(y + 1, &end, 10), yn = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
    return xm != ym ? (ym > xm) - (ym < xm) : (yn > xn) - (yn < xn);
}

static void search_dirs(Dirs *ds) {
    ds->n = 0;
    // The one override: folders to look in first (docs/environment.md).
    const char *over = getenv("ORCH_CUDA_LIB_DIR");
    for (const char *p = over; p && *p;) {
        size_t len = strcspn(p, ":");
        add_dir(ds, p, len);
        p += len + (p[len] == ':');
    }
    ds->d[ds->n++] = xstrdup("");
    const char *home = getenv("CUDA_HOME"); // the toolkit NVRTC comes from too (nvrtc.c)
    char buf[4200];
    static const char *const sub[] = {"lib64", "lib"};
    for (size_t s = 0; home && *home && s < ORCH_COUNT(sub); s++) {
        snprintf(buf, sizeof buf, "%s/%s", home, sub[s]);
        add_dir(ds, buf, strlen(buf));
    }
    add_dir(ds, "/usr/local/cuda/lib64", strlen("/usr/local/cuda/lib64"));
    add_dir(ds, "/usr/local/cuda/lib", strlen("/usr/local/cuda/lib"));
    glob_t g;
    if (glob("/usr/local/cuda-[0-9]*", GLOB_ONLYDIR, NULL, &g) == 0) {
        qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_toolkit);
        for (size_t i = 0; i < g.gl_pathc; i++)
            for (size_t s = 0; s < ORCH_COUNT(sub); s++) {
                snprintf(buf, sizeof buf, "%s/%s", g.gl_pathv[i], sub[s]);
                add_dir(ds, buf, strlen(buf));
            }
        globfree(&g);
    }
}

void *cuda_lib_open(const char *const *sonames, int n_sonames,
                    const CudaLibSym *syms, int n_syms, CudaLibAccept accept, void *ctx,
                    char *where, size_t where_size) {
    ORCH_ASSERT(n_sonames > 0 && where_size > 0);
    Dirs ds;
    search_dirs(&ds);
    bool refused = false; // a file was found but not taken: where says why
    void *found = NULL;
    char path[4200];
    for (int di = 0; di < ds.n && !found; di++) {
        for (int si = 0; si < n_sonames && !found; si++) {
            if (ds.d[di][0])
                snprintf(path, sizeof path, "%s/%s", ds.d[di], sonames[si]);
            else
                snprintf(path, sizeof path, "%s", sonames[si]);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                // A file that is there but does not open (a missing dependency, another
                // architecture) is worth naming; a name that is not there is not.
                if (ds.d[di][0] && access(path, F_OK) == 0) {
                    const char *why = dlerror();
                    snprintf(where, where_size, "%.600s does not open: %.400s", path,
                             why ? why : "?");
                    refused = true;
                }
                continue;
            }
            const char *missing = NULL;
            for (int i = 0; i < n_syms && !missing; i++)
                if (!(*syms[i].slot = dlsym(h, syms[i].name)))
                    missing = syms[i].name;
            if (missing)
                snprintf(where, where_size, "%.600s lacks %s", path, missing);
            else if (accept && !accept(ctx, path, where, where_size))
                missing = "(refused)";
            if (missing) {
                dlclose(h);
                refused = true;
                continue;
            }
            snprintf(where, where_size, "%s", path);
            found = h;
        }
    }
    if (!found && !refused) {
        int n = snprintf(where, where_size, "%s", sonames[0]);
        for (int si = 1; si < n_sonames && n > 0 && (size_t)n < where_size; si++) {
            const char *ext = strstr(sonames[si], ".so");
            n += snprintf(where + n, where_size - (size_t)n, "/%s", ext ? ext : sonames[si]);
        }
        if (n > 0 && (size_t)n < where_size)
            snprintf(where + n, where_size - (size_t)n,
                     " not found (in ORCH_CUDA_LIB_DIR, the loader's path, $CUDA_HOME, "
                     "/usr/local/cuda*; ORCH_CUDA_LIB_DIR=FOLDER names another)");
    }
    for (int di = 0; di < ds.n; di++)
        free(ds.d[di]);
    return found;
}
