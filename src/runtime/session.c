// The session front end (session.h): checks an artefact against this machine, then forwards
// every call to the session slots of the target that built it (target.h), so that this file
// knows no particular backend. An artefact with several plans gets one backend session per plan,
// all created up front (so that what each serves is known without a run, and runs never race to
// create one), under a front whose own calls go to the first.
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
    int n_plans; // several shape sets: their sessions (the front runs none itself); else 0
    Session **plans;
};

// The session the front's calls act on.
static Session *first(const Session *s) {
    return s->n_plans ? s->plans[0] : (Session *)s;
}

static int create_one(const ArtifactContents *a, const TargetRuntime *t, const HwInfo *hw_now,
                      const SessionOptions *opt, Session **out, Err *e) {
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
    if (a->n_plans <= 1)
        return create_one(a, t, hw_now, opt, out, e);
    Session *s = xcalloc(1, sizeof *s);
    s->plans = xcalloc((size_t)a->n_plans, sizeof *s->plans);
    pthread_mutex_init(&s->mu, NULL);
    int rc = ST_OK;
    for (int k = 0; k < a->n_plans && rc == ST_OK; k++) {
        ArtifactContents view;
        artifact_plan_view(a, k, &view);
        if ((rc = create_one(&view, t, hw_now, opt, &s->plans[k], e)) == ST_OK)
            s->n_plans++;
        else
            err_prefix(e, "shape set %d (%s): ", k + 1, a->plans[k].input_shapes);
    }
    if (rc) {
        session_free(s);
        return rc;
    }
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
    for (int k = 0; k < s->n_plans; k++)
        session_free(s->plans[k]);
    free(s->plans);
    if (s->ops)
        s->ops->free(s->impl);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int session_num_plans(const Session *s) {
    return s && s->n_plans ? s->n_plans : 1;
}

Session *session_for_plan(Session *s, int k) {
    ORCH_ASSERT(k >= 0 && k < session_num_plans(s));
    return s->n_plans ? s->plans[k] : s;
}

int session_find_plan(const Session *s, const int *ranks, const int64_t *const *dims) {
    for (int k = 0; k < session_num_plans(s); k++) {
        const PrimGraph *pg = session_graph(s->n_plans ? s->plans[k] : s);
        bool same = true;
        for (int i = 0; i < pg->n_inputs && same; i++) {
            const Tensor *t = pg->tensors[pg->inputs[i]];
            same =
                ranks[i] == t->rank &&
                (t->rank == 0 || memcmp(dims[i], t->dims, sizeof(int64_t) * (size_t)t->rank) == 0);
        }
        if (same)
            return k;
    }
    return -1;
}

void session_plan_shapes(const Session *s, int k, char *buf, size_t n) {
    const PrimGraph *pg = session_graph(s->n_plans ? s->plans[k] : s);
    size_t used = 0;
    if (n)
        buf[0] = 0;
    for (int i = 0; i < pg->n_inputs && used + 1 < n; i++) {
        const Tensor *t = pg->tensors[pg->inputs[i]];
        char dims[160];
        int w = snprintf(buf + used, n - used, "%s%s:%s", i ? "," : "", t->name,
                         t->rank ? tensor_shape_str(t, dims, sizeof dims) : "scalar");
        used = w > 0 && (size_t)w < n - used ? used + (size_t)w : n - 1;
    }
}

void session_served_shapes(const Session *s, char *buf, size_t n) {
    size_t used = 0;
    if (n)
        buf[0] = 0;
    for (int k = 0; k < session_num_plans(s) && used + 1 < n; k++) {
        if (k) {
            int w = snprintf(buf + used, n - used, " | ");
            used = w > 0 && (size_t)w < n - used ? used + (size_t)w : n - 1;
        }
        session_plan_shapes(s, k, buf + used, n - used);
        used += strlen(buf + used);
    }
}

int session_run(Session *s, const void *const *inputs, void *const *outputs, Err *e) {
    s = first(s);
    if (s->ops->concurrent_runs)
        return s->ops->run(s->impl, inputs, outputs, e);
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->run(s->impl, inputs, outputs, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int session_run_device(Session *s, const void *const *inputs, void *const *outputs, void *stream,
                       Err *e) {
    s = first(s);
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
    s = first(s);
    pthread_mutex_lock(&s->mu);
    int rc = s->ops->time_device(s->impl, runs, seconds, e);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void session_set_profiling(Session *s, int on) {
    if (!s)
        return;
    s = first(s);
    pthread_mutex_lock(&s->mu);
    s->ops->set_profiling(s->impl, on);
    pthread_mutex_unlock(&s->mu);
}

const double *session_kernel_times(const Session *s) {
    return s ? first(s)->ops->kernel_times(first(s)->impl) : NULL;
}
int session_num_launches(const Session *s) {
    return s ? first(s)->ops->num_launches(first(s)->impl) : 0;
}
int session_num_kernels(const Session *s) {
    return s ? first(s)->ops->num_kernels(first(s)->impl) : 0;
}
const char *session_launch_name(const Session *s, int i) {
    return s ? first(s)->ops->launch_name(first(s)->impl, i) : NULL;
}
const char *session_launch_nodes(const Session *s, int i) {
    return s ? first(s)->ops->launch_nodes(first(s)->impl, i) : NULL;
}
const PrimGraph *session_graph(const Session *s) {
    return s ? first(s)->ops->graph(first(s)->impl) : NULL;
}
const Plan *session_plan(const Session *s) {
    return s ? first(s)->ops->plan(first(s)->impl) : NULL;
}
int session_threads(const Session *s) {
    return s ? first(s)->ops->threads(first(s)->impl) : 0;
}
