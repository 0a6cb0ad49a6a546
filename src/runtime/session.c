// The session front end (session.h): checks an artefact against this machine, then forwards
// every call to the session slots of the target that built it (target.h), so that this file
// knows no particular backend.
#include "session.h"

#include "../backend/cpu/session_cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// orch.h promises orch_session_run is thread-safe. A backend whose runs each take their own
// workspace (concurrent_runs: the CPU's) is called directly; the others hold one run's state (a
// CUDA stream and its graphs), so their runs take turns on this lock.
struct Session {
    const TargetSessionOps *ops;
    TargetSession *impl;
    pthread_mutex_t mu;
};

int session_create(const ArtifactContents *a, const HwInfo *hw_now, const SessionOptions *opt,
                   Session **out, Err *e) {
    *out = NULL;
    SessionOptions defaults = {0};
    if (!opt)
        opt = &defaults;
    const ArtifactHeader *h = &a->h;
    const char *path = a->path ? a->path : "<artefact>";
    const TargetRuntime *t = target_runtime_find(h->target);
    if (!t)
        return err_set(e, ST_INVALID,
                       "%s was built for the '%s' target, which this build of orch does not have",
                       path, h->target);
    if (!hw_now && !opt->allow_foreign_device)
        return err_set(e, ST_USAGE,
                       "%s: no description of this machine to check the artefact against", path);
    if (hw_now && strcmp(h->target, hw_now->target) != 0 && !opt->allow_foreign_device)
        return err_set(e, ST_INVALID,
                       "%s was built by orch %s for the '%s' target; this machine runs '%s'; "
                       "recompile with orch compile",
                       path, h->orch_version, h->target, hw_now->target);
    if (hw_now && !t->same_machine(h->fingerprint, hw_now) && !opt->allow_foreign_device)
        return err_set(e, ST_INVALID,
                       "%s was built by orch %s for a different %s: '%s'; this machine is '%s'; "
                       "recompile with orch compile",
                       path, h->orch_version, strcmp(h->target, "cpu") == 0 ? "CPU" : "device",
                       h->fingerprint, hw_now->fingerprint);
    TargetSession *impl = NULL;
    int rc = t->session->create(a, hw_now, opt, &impl, e);
    if (rc)
        return rc;
    Session *s = xcalloc(1, sizeof *s);
    s->ops = t->session;
    s->impl = impl;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return ST_OK;
}

int session_create_from_plan(const PrimGraph *pg, const Plan *plan, SessionResolveFn resolve,
                             void *ctx, const SessionOptions *opt, Session **out, Err *e) {
    *out = NULL;
    CpuSession *cs = NULL;
    int rc = cpu_session_create_from_plan(pg, plan, resolve, ctx, opt, &cs, e);
    if (rc)
        return rc;
    Session *s = xcalloc(1, sizeof *s);
    s->ops = &cpu_session_ops;
    s->impl = (TargetSession *)cs;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return ST_OK;
}

void session_free(Session *s) {
    if (!s)
        return;
    s->ops->free(s->impl);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int session_run(Session *s, const void *const *inputs, void *const *outputs, Err *e) {
    if (s->ops->concurrent_runs)
        return s->ops->run(s->impl, inputs, outputs, e);
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->run(s->impl, inputs, outputs, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int session_run_device(Session *s, const void *const *inputs, void *const *outputs, void *stream,
                       Err *e) {
    if (s->ops->concurrent_runs)
        return s->ops->run_device(s->impl, inputs, outputs, stream, e);
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->run_device(s->impl, inputs, outputs, stream, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int session_time_device(Session *s, int runs, double *seconds, Err *e) {
    if (!s)
        return err_set(e, ST_USAGE, "no session");
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->time_device(s->impl, runs, seconds, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void session_set_profiling(Session *s, int on) {
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->ops->set_profiling(s->impl, on);
    pthread_mutex_unlock(&s->mu);
}

const double *session_kernel_times(const Session *s) {
    return s ? s->ops->kernel_times(s->impl) : NULL;
}
int session_num_launches(const Session *s) {
    return s ? s->ops->num_launches(s->impl) : 0;
}
int session_num_kernels(const Session *s) {
    return s ? s->ops->num_kernels(s->impl) : 0;
}
const char *session_launch_name(const Session *s, int i) {
    return s ? s->ops->launch_name(s->impl, i) : NULL;
}
const char *session_launch_nodes(const Session *s, int i) {
    return s ? s->ops->launch_nodes(s->impl, i) : NULL;
}
const PrimGraph *session_graph(const Session *s) {
    return s ? s->ops->graph(s->impl) : NULL;
}
const Plan *session_plan(const Session *s) {
    return s ? s->ops->plan(s->impl) : NULL;
}
int session_threads(const Session *s) {
    return s ? s->ops->threads(s->impl) : 0;
}
