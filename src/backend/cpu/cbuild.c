// Builds generated C with the system compiler and loads the shared objects (cbuild.h).
// Compiler processes are started with posix_spawn (no shell), their diagnostics go to a log
// file next to the source, and a failure reports the log's first lines.
#include "cbuild.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct CModule {
    void *handle;
    char *so_path;
    char *dir; // removed on free when the module made it (owns_dir)
    bool owns_dir;
};

const char *cbuild_compiler(void) {
    const char *cc = getenv("ORCH_CC");
    return cc && *cc ? cc : "cc";
}

const char *cbuild_compiler_version(void) {
    static char version[128];
    if (version[0])
        return version;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cbuild_compiler());
    FILE *p = popen(cmd, "r");
    char line[256] = "";
    if (p) {
        if (!fgets(line, sizeof line, p))
            line[0] = '\0';
        pclose(p);
    }
    line[strcspn(line, "\n")] = '\0';
    // "cc (Debian 12.2.0-14) 12.2.0" → "gcc 12.2.0"; "clang version 14.0.6" → "clang 14.0.6"
    const char *last = strrchr(line, ' ');
    if (strstr(line, "clang"))
        snprintf(version, sizeof version, "clang %.100s",
                 strstr(line, "version ") ? strstr(line, "version ") + 8 : line);
    else if (last && line[0])
        snprintf(version, sizeof version, "gcc %.100s", last + 1);
    else
        snprintf(version, sizeof version, "%.80s (unknown version)", cbuild_compiler());
    return version;
}

// ORCH_KEEP_SOURCES=DIR keeps the generated sources to read (docs/environment.md): this target's
// work directories (each kernel's .c, .so and compiler log) are made in DIR, created if missing,
// and left there; the CUDA target writes every program it hands to NVRTC to DIR too (nvrtc.c).
// One variable for both targets, and a variable rather than a compile option: it changes nothing
// in what is compiled (the artefact is the same either way), it is wanted in every process that
// generates code (orch compile and bench, the unit tests, programs using the library), and the
// sources are written here, at the bottom of the backends, far from any compile's options.
static const char *keep_dir(void) {
    const char *k = getenv("ORCH_KEEP_SOURCES");
    return k && *k ? k : NULL;
}

static bool keep_sources(void) {
    return keep_dir() != NULL;
}

// Work directories are named orch-build-HOST-PID-XXXXXX, so that a later process can tell one
// whose owner died without removing it (kill -9 in the middle of a compile) from one in use.
#define WORKDIR_PREFIX "orch-build-"

static void host_name(char *buf, size_t n) {
    if (gethostname(buf, n) != 0)
        snprintf(buf, n, "unknown");
    buf[n - 1] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '/')
            *p = '_';
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static const char *tmp_dir(void) {
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}

void cbuild_remove_stale_workdirs(void) {
    static bool done;
    if (__atomic_exchange_n(&done, true, __ATOMIC_RELAXED))
        return;
    const char *tmp = tmp_dir();
    char host[128];
    host_name(host, sizeof host);
    size_t hl = strlen(host), pl = strlen(WORKDIR_PREFIX);
    DIR *d = opendir(tmp);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name, *rest = name + pl + hl + 1;
        if (strncmp(name, WORKDIR_PREFIX, pl) != 0 || strncmp(name + pl, host, hl) != 0 ||
            name[pl + hl] != '-')
            continue;
        char *end;
        errno = 0;
        long pid = strtol(rest, &end, 10);
        if (end == rest || errno || pid <= 0 || pid > INT32_MAX || *end != '-' || strlen(end) != 7)
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; // alive (or another user's): in use
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", tmp, name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid())
            remove_tree(path);
    }
    closedir(d);
}

static int make_workdir(char **dir, Err *e) {
    const char *tmp = keep_dir();
    if (tmp) {
        mkdir(tmp, 0777); // an existing one is fine; another failure shows in mkdtemp's
    } else {
        tmp = tmp_dir();
        cbuild_remove_stale_workdirs(); // (kept sources stay where ORCH_KEEP_SOURCES put them)
    }
    char host[128], tmpl[4096];
    host_name(host, sizeof host);
    snprintf(tmpl, sizeof tmpl, "%s/" WORKDIR_PREFIX "%s-%d-XXXXXX", tmp, host, (int)getpid());
    if (!mkdtemp(tmpl))
        return err_set(e, ST_RUNTIME, "cannot create a build directory %s: %s", tmpl,
                       strerror(errno));
    *dir = xstrdup(tmpl);
    return ST_OK;
}

static int write_file(const char *path, const char *text, Err *e) {
    FILE *f = fopen(path, "w");
    if (!f)
        return err_set(e, ST_RUNTIME, "cannot write %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return err_set(e, ST_RUNTIME, "cannot write %s: %s", path, strerror(errno));
    return ST_OK;
}

// The compiler's code-generation flags (spawn_cc's argv after the compiler; cbuild_identity).
#define CC_FLAGS "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu11", "-fno-math-errno"

static char identity[512];

static void identity_once(void) {
    static const char *const flags[] = {CC_FLAGS};
    size_t n = (size_t)snprintf(identity, sizeof identity, "%s (%s)", cbuild_compiler_version(),
                                cbuild_compiler());
    for (size_t i = 0; i < ORCH_COUNT(flags) && n < sizeof identity; i++)
        n += (size_t)snprintf(identity + n, sizeof identity - n, " %s", flags[i]);
}

const char *cbuild_identity(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, identity_once);
    return identity;
}

// Starts `cc ... -o so_path -x c - < c_path` with stdout and stderr sent to log_path. The source
// comes on standard input so that the shared object names no file of this build (the compiler
// records its source's name in the symbol table): an artefact's bytes depend on its kernels alone,
// not on the process or the order that built them.
static int spawn_cc(const char *c_path, const char *so_path, const char *log_path, pid_t *pid,
                    Err *e) {
    // (-x none: what follows is for the linker again.)
    const char *argv[] = {cbuild_compiler(),
                          CC_FLAGS,
                          "-w",
                          "-o",
                          so_path,
                          "-x",
                          "c",
                          "-",
                          "-x",
                          "none",
                          "-lm",
                          NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, c_path, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawnp(pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return err_set(e, ST_RUNTIME,
                       "cannot start the C compiler '%s': %s (install gcc, or set ORCH_CC)", argv[0],
                       strerror(rc));
    return ST_OK;
}

static bool log_empty(const char *log_path) {
    struct stat st;
    return stat(log_path, &st) != 0 || st.st_size == 0;
}

// The first lines of the compiler's log, for an error message.
static char *log_head(const char *log_path) {
    FILE *f = fopen(log_path, "r");
    char buf[1200] = "";
    size_t n = 0;
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return xstrdup(buf[0] ? buf : "(no diagnostics)");
}

static int load_so(const char *so_path, char *dir, bool owns_dir, CModule **out, char **msg) {
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *d = dlerror();
        *msg = xstrdup(d ? d : "dlopen failed");
        return ST_RUNTIME;
    }
    CModule *m = xcalloc(1, sizeof *m);
    m->handle = h;
    m->so_path = xstrdup(so_path);
    m->dir = dir;
    m->owns_dir = owns_dir;
    *out = m;
    return ST_OK;
}

int cbuild_modules(const char *const *sources, int n, const char *workdir, int jobs, CModule **out,
                   int *status, char **msgs, Err *e) {
    char *dir = NULL;
    bool own = !workdir;
    int rc = own ? make_workdir(&dir, e) : ST_OK;
    if (rc)
        return rc;
    if (!own) {
        mkdir(workdir, 0700);
        dir = xstrdup(workdir);
    }
    if (jobs <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = c > 0 ? (int)c : 1;
    }
    static int serial; // distinct file names across calls sharing a work directory
    int base = __atomic_fetch_add(&serial, n, __ATOMIC_RELAXED);
    pid_t *pids = xcalloc((size_t)(n > 0 ? n : 1), sizeof *pids);
    char(*paths)[3][4200] = xcalloc((size_t)(n > 0 ? n : 1), sizeof *paths);
    bool *retried = xcalloc((size_t)(n > 0 ? n : 1), sizeof *retried);
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        status[i] = ST_OK;
        msgs[i] = NULL;
        snprintf(paths[i][0], sizeof paths[i][0], "%s/k%d_%d.c", dir, (int)getpid(), base + i);
        snprintf(paths[i][1], sizeof paths[i][1], "%s/k%d_%d.so", dir, (int)getpid(), base + i);
        snprintf(paths[i][2], sizeof paths[i][2], "%s/k%d_%d.log", dir, (int)getpid(), base + i);
    }
    // Keep `jobs` compilers running; reap in any order.
    int next = 0, running = 0, done = 0;
    while (done < n) {
        while (running < jobs && next < n) {
            Err le = {0};
            int i = next++;
            if (write_file(paths[i][0], sources[i], &le) ||
                spawn_cc(paths[i][0], paths[i][1], paths[i][2], &pids[i], &le)) {
                status[i] = le.code;
                msgs[i] = xstrdup(le.msg);
                pids[i] = 0;
                done++;
                continue;
            }
            running++;
        }
        if (!running)
            continue;
        // Only our own compilers are waited for (never waitpid(-1): the host program may have
        // children of its own), polling them every millisecond.
        int ws = 0;
        pid_t p = 0;
        for (int i = 0; i < n && p == 0; i++) {
            if (pids[i] <= 0)
                continue;
            pid_t r = waitpid(pids[i], &ws, WNOHANG);
            if (r == pids[i] || (r < 0 && errno != EINTR)) {
                p = pids[i];
                if (r < 0) // lost (reaped elsewhere): counts as a failure
                    ws = 0x7f00;
            }
        }
        if (p == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (pids[i] != p)
                continue;
            pids[i] = 0;
            running--;
            bool failed = !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
            if (failed && !retried[i] && (WIFSIGNALED(ws) || log_empty(paths[i][2]))) {
                // A compiler killed from outside (memory pressure, a stray signal) or failing
                // without a word is tried once more before its kernels are given up; a real
                // compile error always says something.
                retried[i] = true;
                Err le = {0};
                if (spawn_cc(paths[i][0], paths[i][1], paths[i][2], &pids[i], &le) == ST_OK) {
                    running++;
                    break;
                }
            }
            done++;
            if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
                status[i] = ST_RUNTIME;
                char *head = log_head(paths[i][2]);
                size_t len = strlen(head) + strlen(paths[i][0]) + 96;
                msgs[i] = xmalloc(len);
                if (WIFSIGNALED(ws))
                    snprintf(msgs[i], len, "the C compiler was killed by signal %d on %s:\n%s",
                             WTERMSIG(ws), paths[i][0], head);
                else
                    snprintf(msgs[i], len, "the C compiler failed on %s:\n%s", paths[i][0], head);
                free(head);
            } else {
                status[i] = load_so(paths[i][1], NULL, false, &out[i], &msgs[i]);
            }
            break;
        }
    }
    free(pids);
    free(paths);
    free(retried);
    // The modules keep the directory alive; the last one to be freed removes it (owns_dir on the
    // first module that loaded), unless sources are kept for inspection.
    bool handed = false;
    for (int i = 0; i < n && own && !keep_sources(); i++) {
        if (out[i] && !handed) {
            out[i]->dir = dir;
            out[i]->owns_dir = true;
            handed = true;
        }
    }
    if (!handed) {
        if (own && !keep_sources()) {
            bool any = false;
            for (int i = 0; i < n; i++)
                any |= out[i] != NULL;
            if (!any)
                remove_tree(dir);
        }
        free(dir);
    }
    return ST_OK;
}

int cbuild_module(const char *source, const char *workdir, const char *tag, CModule **out, Err *e) {
    int st = ST_OK;
    char *msg = NULL;
    *out = NULL;
    int rc = cbuild_modules(&source, 1, workdir, 1, out, &st, &msg, e);
    if (rc)
        return rc;
    if (st) {
        err_set(e, st, "%s: %s", tag ? tag : "kernel", msg ? msg : "build failed");
        free(msg);
        return st;
    }
    free(msg);
    return ST_OK;
}

void *cmodule_sym(CModule *m, const char *name) { return m ? dlsym(m->handle, name) : NULL; }

const char *cmodule_path(const CModule *m) { return m ? m->so_path : NULL; }

void cmodule_free(CModule *m) {
    if (!m)
        return;
    dlclose(m->handle);
    if (m->owns_dir && m->dir && !keep_sources()) {
        unlink(m->so_path);
        remove_tree(m->dir);
    }
    free(m->dir);
    free(m->so_path);
    free(m);
}
