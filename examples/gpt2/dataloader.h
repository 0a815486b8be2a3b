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

/* 0 on success; on failure -1 with a message naming the file and the problem in err. */
int tokens_load_shard(const char *path, token_data *out, char *err, size_t err_len);
int tokens_load_text(const char *path, token_data *out, char *err, size_t err_len);
int tokens_write_shard(const char *path, const token_data *t, char *err, size_t err_len);
void tokens_free(token_data *t);

/* Rows [row0, row0 + rows) of global batch `step` (batch sequences of T + 1 tokens);
 * inputs and targets hold rows * T ints. Sequence i of step s starts at token
 * ((s * batch + i) * T) mod (n - T - 1). */
void tokens_batch(const token_data *t, int64_t step, int batch, int T, int row0, int rows,
                  int *inputs, int *targets);

#endif
