/* SPDX-License-Identifier: MIT */
#include "tools/bench_common.h"
#include "tiers/host_tier.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *v, int n)
{
    double *tmp = malloc(sizeof(double) * (size_t)n);
    if (!tmp)
        return v[0];
    memcpy(tmp, v, sizeof(double) * (size_t)n);
    qsort(tmp, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
    free(tmp);
    return m;
}

int bench_int_arg(int argc, char **argv, const char *cmd, const char *name, long min, long max,
                  int *out)
{
    const char *v = bench_arg(argc, argv, name);
    if (!v)
        return 0;
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < min || x > max || x < INT_MIN || x > INT_MAX) {
        fprintf(stderr, "%s: --%s '%s': give an integer from %ld to %ld\n", cmd, name, v, min, max);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int bench_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mult = 1;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        return -1;
    }
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' ? 1 : 0, end += *end == 'B' ? 1 : 0;
    if (*end != '\0')
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

const char *bench_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4)
        v /= 1024.0, u++;
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

struct triad_chunk {
    double *a, *b, *c;
    size_t n;
    pthread_t thread;
};

struct bench_triad {
    double *a, *b, *c;
    zt_host_tier host; /* laid out as the runtime's host tier lays out shards */
    size_t n;
    int threads;
    struct triad_chunk *chunks;
};

static void *triad_worker(void *arg)
{
    struct triad_chunk *ch = arg;
    const double s = 3.0;
    for (size_t i = 0; i < ch->n; i++)
        ch->a[i] = ch->b[i] + s * ch->c[i];
    return NULL;
}

static void triad_run_threads(bench_triad *t)
{
    for (int i = 1; i < t->threads; i++)
        pthread_create(&t->chunks[i].thread, NULL, triad_worker, &t->chunks[i]);
    triad_worker(&t->chunks[0]);
    for (int i = 1; i < t->threads; i++)
        pthread_join(t->chunks[i].thread, NULL);
}

bench_triad *bench_triad_create(size_t n, int threads)
{
    if (threads < 1)
        threads = 1;
    bench_triad *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n = n;
    t->threads = threads;
    t->chunks = calloc((size_t)threads, sizeof *t->chunks);
    size_t bytes = n * sizeof(double);
    zt_error err = {0};
    if (!t->chunks ||
        zt_host_tier_alloc(&t->host, bytes, "triad a", (void **)&t->a, &err) != ZT_OK ||
        zt_host_tier_alloc(&t->host, bytes, "triad b", (void **)&t->b, &err) != ZT_OK ||
        zt_host_tier_alloc(&t->host, bytes, "triad c", (void **)&t->c, &err) != ZT_OK) {
        bench_triad_destroy(t);
        return NULL;
    }
    size_t per = (n + (size_t)threads - 1) / (size_t)threads;
    for (int i = 0; i < threads; i++) {
        size_t lo = (size_t)i * per, hi = lo + per > n ? n : lo + per;
        if (lo > n)
            lo = n;
        t->chunks[i] = (struct triad_chunk){t->a + lo, t->b + lo, t->c + lo, hi - lo, 0};
    }
    /* First touch by the same threads that run the triad, like STREAM. */
    for (int i = 0; i < threads; i++) {
        struct triad_chunk *ch = &t->chunks[i];
        for (size_t k = 0; k < ch->n; k++)
            ch->a[k] = 0.0, ch->b[k] = 1.0, ch->c[k] = 2.0;
    }
    triad_run_threads(t); /* warm-up */
    return t;
}

double bench_triad_run(bench_triad *t)
{
    double t0 = bench_now();
    triad_run_threads(t);
    double dt = bench_now() - t0;
    return (double)t->n * 24.0 / dt / 1e9;
}

void bench_triad_destroy(bench_triad *t)
{
    if (!t)
        return;
    size_t bytes = t->n * sizeof(double);
    zt_host_tier_free(&t->host, t->a, bytes);
    zt_host_tier_free(&t->host, t->b, bytes);
    zt_host_tier_free(&t->host, t->c, bytes);
    free(t->chunks);
    free(t);
}

static const char *match_opt(const char *arg, const char *name)
{
    if (strncmp(arg, "--", 2) != 0)
        return NULL;
    size_t len = strlen(name);
    if (strncmp(arg + 2, name, len) != 0)
        return NULL;
    if (arg[2 + len] == '\0')
        return arg + 2 + len;
    if (arg[2 + len] == '=')
        return arg + 3 + len;
    return NULL;
}

const char *bench_arg(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++) {
        const char *rest = match_opt(argv[i], name);
        if (!rest)
            continue;
        if (*rest)
            return rest;
        return i + 1 < argc ? argv[i + 1] : NULL;
    }
    return NULL;
}

int bench_flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++) {
        const char *rest = match_opt(argv[i], name);
        if (rest && *rest == '\0')
            return 1;
    }
    return 0;
}

static int in_list(const char *arg, const char *const *list, int *takes_value, int value)
{
    for (int k = 0; list && list[k]; k++) {
        const char *rest = match_opt(arg, list[k]);
        if (rest) {
            *takes_value = value && *rest == '\0';
            return 1;
        }
    }
    return 0;
}

int bench_check_args(int argc, char **argv, const char *const *known, const char *const *flags)
{
    for (int i = 0; i < argc; i++) {
        int takes_value = 0;
        if (in_list(argv[i], flags, &takes_value, 0))
            continue;
        if (in_list(argv[i], known, &takes_value, 1)) {
            if (takes_value) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "ztier: option %s needs a value\n", argv[i]);
                    return -1;
                }
                i++;
            }
            continue;
        }
        fprintf(stderr, "ztier: unknown option '%s' (see 'ztier help')\n", argv[i]);
        return -1;
    }
    return 0;
}

double bench_fresh_touch(size_t bytes)
{
    double t0 = bench_now();
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    memset(p, 1, bytes);
    munmap(p, bytes);
    return (double)bytes / (bench_now() - t0) / 1e9;
}
