// A minimal test harness: TEST(name) cases, CHECK(cond) that records the first failure of a
// case with file:line, one line printed per case, and the closing "N passed, N failed".
#ifndef ORCH_TEST_CHECK_H
#define ORCH_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failed_case; // the current case has failed
static int check_n_pass, check_n_fail;

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
        fn();                                                                                      \
        printf("%s %s\n", check_failed_case ? "FAIL" : "ok  ", #fn);                               \
        if (check_failed_case)                                                                     \
            check_n_fail++;                                                                        \
        else                                                                                       \
            check_n_pass++;                                                                        \
    } while (0)

#define CHECK_DONE()                                                                               \
    (printf("%d passed, %d failed\n", check_n_pass, check_n_fail), check_n_fail ? 1 : 0)

#endif
