/* SPDX-License-Identifier: MIT */
#include "dataloader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t len, const char *fmt, const char *path, const char *what)
{
    snprintf(err, len, fmt, path, what);
    return -1;
}

static void scan_max(token_data *t)
{
    t->max_token = 0;
    for (int64_t i = 0; i < t->n; i++)
        if (t->tokens[i] > t->max_token)
            t->max_token = t->tokens[i];
}

/* The header's complaint, or NULL when the header is a valid version-1 shard header. */
static const char *header_problem(const int32_t *h)
{
    if (h[0] != SHARD_MAGIC)
        return "bad magic number (expected 20240520): not an llm.c token shard";
    if (h[1] != SHARD_VERSION)
        return "bad version (expected 1)";
    if (h[2] < 2)
        return "its header declares fewer than 2 tokens";
    return NULL;
}

int tokens_load_shard(const char *path, token_data *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, err_len, "cannot open token shard '%s': %s", path, strerror(errno));
    int32_t header[256];
    const char *problem = NULL;
    char buf[160];
    if (fread(header, sizeof header, 1, f) != 1)
        problem = "truncated: shorter than its 1024-byte header";
    else
        problem = header_problem(header);
    if (!problem) {
        fseek(f, 0, SEEK_END);
        long long bytes = ftell(f) - (long long)sizeof header, want = 2LL * header[2];
        fseek(f, (long)sizeof header, SEEK_SET);
        if (bytes != want) {
            snprintf(buf, sizeof buf,
                     "%s: the header declares %d tokens (%lld bytes) but %lld "
                     "bytes follow it",
                     bytes < want ? "truncated" : "trailing data", header[2], want, bytes);
            problem = buf;
        }
    }
    if (!problem) {
        out->n = header[2];
        out->tokens = malloc(sizeof(uint16_t) * (size_t)out->n);
        if (!out->tokens)
            problem = "out of memory for its tokens";
        else if (fread(out->tokens, sizeof(uint16_t), (size_t)out->n, f) != (size_t)out->n)
            problem = "read error";
    }
    fclose(f);
    if (problem) {
        tokens_free(out);
        return fail(err, err_len, "token shard '%s': %s", path, problem);
    }
    scan_max(out);
    return 0;
}

int tokens_load_text(const char *path, token_data *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, err_len, "cannot open text '%s': %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = n > 1 ? malloc((size_t)n) : NULL;
    int rc = 0;
    if (!bytes || fread(bytes, 1, (size_t)n, f) != (size_t)n)
        rc = fail(err, err_len, "cannot read text '%s' (%s)", path,
                  n > 1 ? "read error" : "it holds fewer than 2 bytes");
    fclose(f);
    if (rc == 0 && (out->tokens = malloc(sizeof(uint16_t) * (size_t)n))) {
        for (long i = 0; i < n; i++)
            out->tokens[i] = bytes[i];
        out->n = n;
        scan_max(out);
    } else if (rc == 0) {
        rc = fail(err, err_len, "out of memory reading '%s'%s", path, "");
    }
    free(bytes);
    return rc;
}

int tokens_write_shard(const char *path, const token_data *t, char *err, size_t err_len)
{
    if (t->n < 2 || t->n > INT32_MAX) /* header[2] is an int32 */
        return fail(err, err_len, "cannot write '%s': %s", path,
                    "a shard holds 2 to 2^31-1 tokens");
    FILE *f = fopen(path, "wb");
    if (!f)
        return fail(err, err_len, "cannot create '%s': %s", path, strerror(errno));
    int32_t header[256] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)t->n};
    int ok = fwrite(header, sizeof header, 1, f) == 1 &&
             fwrite(t->tokens, sizeof(uint16_t), (size_t)t->n, f) == (size_t)t->n;
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : fail(err, err_len, "writing '%s' failed: %s", path, strerror(errno));
}

void tokens_free(token_data *t)
{
    free(t->tokens);
    t->tokens = NULL;
    t->n = 0;
}

int tokens_batch(const token_data *t, int64_t step, int batch, int T, int row0, int rows,
                 int *inputs, int *targets)
{
    if (step < 0)
        return -1;
    uint64_t span = t->n - T - 1 > 0 ? (uint64_t)(t->n - T - 1) : 1;
    for (int r = 0; r < rows; r++) {
        /* ((step * batch + row) * T) mod span, in 128 bits: no step count overflows it */
        unsigned __int128 seq = (unsigned __int128)step * (unsigned)batch + (unsigned)(row0 + r);
        int64_t start = (int64_t)((seq % span) * (unsigned)T % span);
        for (int i = 0; i < T; i++) {
            inputs[r * T + i] = t->tokens[start + i];
            targets[r * T + i] = t->tokens[start + i + 1];
        }
    }
    return 0;
}
