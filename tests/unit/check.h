// A minimal test harness: TEST(name) cases, CHECK(cond) that records the first failure of a
// case with file:line, one line printed per case (with its seconds: the suites' time budget is
// read off these), and the closing "N passed, N failed".
#ifndef ORCH_TEST_CHECK_H
#define ORCH_TEST_CHECK_H

#include <stdio.h>
#include <string.h>
#include <time.h>

static int check_failed_case; // the current case has failed
static int check_n_pass, check_n_fail;

static inline double check_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!check_failed_case)                                                                \
                printf("  check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);                 \
            check_failed_case = 1;                                                                 \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!check_failed_case) {                                                              \
                printf("  check failed: %s (%s:%d): ", #cond, __FILE__, __LINE__);                 \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
            }                                                                                      \
            check_failed_case = 1;                                                                 \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        check_failed_case = 0;                                                                     \
        double check_t0 = check_now();                                                             \
        fn();                                                                                      \
        printf("%s %s (%.1f s)\n", check_failed_case ? "FAIL" : "ok  ", #fn,                       \
               check_now() - check_t0);                                                            \
        if (check_failed_case)                                                                     \
            check_n_fail++;                                                                        \
        else                                                                                       \
            check_n_pass++;                                                                        \
    } while (0)

#define CHECK_DONE()                                                                               \
    (printf("%d passed, %d failed\n", check_n_pass, check_n_fail), check_n_fail ? 1 : 0)

#endif
