// What the two halves of the public API share (orch.c: models and compiles; orch_session.c:
// contexts and sessions, also in liborch-runtime).
#ifndef ORCH_API_INTERNAL_H
#define ORCH_API_INTERNAL_H

#include "orch.h"

#include "../ir/graph.h"

struct orch_ctx {
    Err err;
};

// info describing tensor t (its name borrowed from t).
void api_fill_info(const Tensor *t, orch_tensor *info);
// The caller's tensor for graph tensor t among arr[0..n): by name, else at position pos when
// that one has no name; NULL when neither.
const orch_tensor *api_match(const orch_tensor *arr, int n, const Tensor *t, int pos);
// Checks the caller's tensor u against t (dtype, shape, a buffer of t's size); `what` names the
// side ("input", "output") in the message.
int api_check_tensor(Err *e, const char *what, const orch_tensor *u, const Tensor *t);

#endif
