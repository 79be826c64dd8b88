/*
 * test/test_rand.c: prints the output of a fixed script of llmc/rand.h calls, for
 * test/test_rand.py to replay in PyTorch and compare.
 *
 *   ./test_rand [OUT.txt]      (stdout when no path is given)
 *
 * Output: text, one record per line.
 *   "normal N MEAN STD" then N lines "%.9g": one torch_normal_ call on one TorchGenerator seeded
 *                       42, in this order: n = 3, 5, 1, 16, 17, 40, 7 (mean 0, std 1), then
 *                       n = 100 with mean 0.5, std 0.02.
 *   "u32 N" then N lines "%u": mt_u32 from a fresh Mt19937 seeded 1337.
 *   "f32 N" then N lines "%.9g": mt_uniform_f32, continuing the same Mt19937.
 * %.9g round-trips a float exactly. The small calls (n < 16) leave a cached normal in the
 * generator: n = 3 leaves one for n = 5; n = 1 leaves one that must survive the large calls
 * (16, 17, 40) and be consumed by n = 7.
 *
 * Build (the Python side compiles nothing):
 *   gcc -O2 -march=native -fopenmp -Wall -Wextra -std=c11 -D_GNU_SOURCE test/test_rand.c \
 *       -o /tmp/test_rand -lm
 */
#include <stdio.h>
#include <stdlib.h>

#include "../llmc/rand.h"

int main(int argc, char **argv) {
    FILE *out = stdout;
    if (argc > 1) {
        out = fopen(argv[1], "w");
        if (!out) {
            perror(argv[1]);
            return 2;
        }
    }
    static const struct { int n; float mean, std; } calls[] = {
        {3, 0.0f, 1.0f},  {5, 0.0f, 1.0f},  {1, 0.0f, 1.0f}, {16, 0.0f, 1.0f},
        {17, 0.0f, 1.0f}, {40, 0.0f, 1.0f}, {7, 0.0f, 1.0f}, {100, 0.5f, 0.02f},
    };
    TorchGenerator g;
    torch_generator_seed(&g, 42);
    float buf[128];
    for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
        torch_normal_(buf, (size_t)calls[c].n, calls[c].mean, calls[c].std, &g);
        fprintf(out, "normal %d %.9g %.9g\n", calls[c].n, calls[c].mean, calls[c].std);
        for (int i = 0; i < calls[c].n; i++) fprintf(out, "%.9g\n", buf[i]);
    }
    Mt19937 mt;
    mt_seed(&mt, 1337);
    fprintf(out, "u32 5\n");
    for (int i = 0; i < 5; i++) fprintf(out, "%u\n", mt_u32(&mt));
    fprintf(out, "f32 3\n");
    for (int i = 0; i < 3; i++) fprintf(out, "%.9g\n", mt_uniform_f32(&mt));
    if (out != stdout && fclose(out) != 0) {
        perror(argv[1]);
        return 2;
    }
    return 0;
}
