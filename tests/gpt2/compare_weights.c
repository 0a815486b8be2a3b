/* SPDX-License-Identifier: MIT */
/* compare_weights A B [tolerance]: two llm.c model files (magic 20240326) must have the same
 * header, and every tensor's relative L2 difference must be <= tolerance (0: bitwise).
 * Exit 0 when they match. Used by the trainer checks in run_trainer_checks.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, int32_t header[256], long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f || fread(header, sizeof(int32_t), 256, f) != 256 || header[0] != 20240326) {
        fprintf(stderr, "compare_weights: '%s' is not an llm.c model file\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    *n = (ftell(f) - 1024) / 4;
    fseek(f, 1024, SEEK_SET);
    float *w = malloc(sizeof(float) * (size_t)*n);
    if (!w || fread(w, sizeof(float), (size_t)*n, f) != (size_t)*n)
        exit(2);
    fclose(f);
    return w;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return fprintf(stderr, "usage: compare_weights A B [tolerance]\n"), 2;
    double tol = argc > 3 ? atof(argv[3]) : 0.0;
    int32_t ha[256], hb[256];
    long na, nb;
    float *a = load(argv[1], ha, &na), *b = load(argv[2], hb, &nb);
    if (memcmp(ha, hb, sizeof ha) != 0 || na != nb)
        return fprintf(stderr, "compare_weights: the models differ in shape\n"), 1;
    if (tol == 0.0) {
        int same = memcmp(a, b, sizeof(float) * (size_t)na) == 0;
        printf("compare_weights: %ld floats, %s\n", na, same ? "bitwise equal" : "DIFFERENT");
        return same ? 0 : 1;
    }
    double num = 0, den = 0;
    for (long i = 0; i < na; i++)
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    double rel = sqrt(num / (den > 0 ? den : 1e-30));
    printf("compare_weights: %ld floats, relative L2 difference %.3g (tolerance %g)\n", na, rel,
           tol);
    return rel <= tol ? 0 : 1;
}
