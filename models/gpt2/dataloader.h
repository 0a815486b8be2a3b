/* SPDX-License-Identifier: MIT */
/* Training data for the GPT-2 trainer: llm.c's token shards (a 256 x int32 header with magic
 * 20240520, version 1 and the token count, then uint16 tokens) or plain text read as bytes
 * (a byte-level tokenizer: token = byte). Batches are deterministic and rank-aware. */
#ifndef ZT_GPT2_DATALOADER_H
#define ZT_GPT2_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1

typedef struct token_data {
    uint16_t *tokens;
    int64_t n;
    int max_token; /* largest token id present */
} token_data;

/* Each returns 0 on success; on failure -1 with a message in err that names the file and the
 * problem ("bad magic number", "bad version", "truncated", "trailing data", ...). *out owns
 * its tokens until tokens_free (also safe after a failure).
 * tokens_load_shard: an llm.c shard; its size must match the header's token count exactly.
 * tokens_load_text: the byte-level tokenizer: token = byte (0..255), so V = 256 suffices.
 * tokens_write_shard: writes t as a version-1 shard (text -> shard: load_text, then this). */
int tokens_load_shard(const char *path, token_data *out, char *err, size_t err_len);
int tokens_load_text(const char *path, token_data *out, char *err, size_t err_len);
int tokens_write_shard(const char *path, const token_data *t, char *err, size_t err_len);
void tokens_free(token_data *t);

/* Rows [row0, row0 + rows) of global batch `step` (batch sequences of T + 1 tokens), so rank
 * r of n takes row0 = r * batch / n; inputs and targets hold rows * T ints, targets are the
 * inputs shifted by one. Sequence i of step s starts at token ((s * batch + i) * T) mod
 * (n - T - 1): deterministic, and independent of how the batch is split, for any step >= 0
 * (the position is computed without overflow). Needs n >= T + 2. Returns 0, or -1 for a
 * negative step (nothing written). */
int tokens_batch(const token_data *t, int64_t step, int batch, int T, int row0, int rows,
                 int *inputs, int *targets);

#endif
