/*
 * test/harness.h: the tiny assertion harness every C test uses.
 *
 * A test calls CHECK(cond, fmt, ...) for each assertion; each prints one PASS/FAIL line.
 * test_finish() prints the required summary line "N passed, N failed" and returns the exit
 * status (non-zero when anything failed), so `return test_finish();` ends main().
 * worst_err(e, d) is the running maximum for error measures: fmax(e, NaN) returns e, which would
 * silently drop a NaN error, so a NaN counts as +infinity and fails every `err <= tol`.
 * max_abs_diff(a, b, n) / max_abs(a, n): the error measure and scale the model tests use.
 */
#ifndef TEST_HARNESS_H
#define TEST_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int g_test_passed = 0;
static int g_test_failed = 0;

static inline void test_report(int ok, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    if (!ok) printf("   [%s:%d]", file, line);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (ok) g_test_passed++; else g_test_failed++;
}

#define CHECK(cond, ...) test_report((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

static inline double worst_err(double e, double d) { return isnan(d) ? INFINITY : fmax(e, d); }

/* max |a - b| over n floats (a NaN on either side counts as infinite), and max |a| */
static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double e = 0.0;
    for (size_t i = 0; i < n; i++) e = worst_err(e, fabs((double)a[i] - b[i]));
    return e;
}

static inline double max_abs(const float *a, size_t n) {
    double e = 0.0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i]));
    return e;
}

/* A control that cannot fail in some case (e.g. d = 1, where L = L^T; T = 1, one key) is reported
 * as n/a and not counted as a pass. */
static inline void not_applicable(const char *tag, const char *control, const char *why) {
    printf("n/a  %s: control %s (%s)\n", tag, control, why);
}

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", g_test_passed, g_test_failed);
    return g_test_failed == 0 ? 0 : 1;
}

#endif /* TEST_HARNESS_H */
