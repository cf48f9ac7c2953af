// SPDX-License-Identifier: Apache-2.0
/*
 * tokens.c -- the engine's fixed prompt and output rules (engine.h,
 * docs/real-time.md): text to token ids, generated token ids, block hashes.
 */
#include "engine.h"

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static uint32_t word_id(const char *w, size_t n, uint32_t vocab)
{
    uint64_t value = 0;
    int digits = n <= 9;
    for (size_t i = 0; digits && i < n; i++) {
        if (w[i] < '0' || w[i] > '9')
            digits = 0;
        else
            value = value * 10 + (uint64_t)(w[i] - '0');
    }
    if (digits && value < vocab)
        return (uint32_t)value;
    uint32_t h = 2166136261u; /* FNV-1a, 32 bits */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)w[i];
        h *= 16777619u;
    }
    return h % vocab;
}

uint32_t eng_tokenize(const char *text, size_t len, uint32_t vocab, uint32_t *out,
                      uint32_t max)
{
    uint32_t n = 0;
    size_t i = 0;
    while (i < len && n < max) {
        while (i < len && is_space(text[i]))
            i++;
        size_t start = i;
        while (i < len && !is_space(text[i]))
            i++;
        if (i > start)
            out[n++] = word_id(text + start, i - start, vocab);
    }
    return n;
}

uint32_t eng_count_words(const char *text, size_t len)
{
    uint32_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += !is_space(text[i]) && (i == 0 || is_space(text[i - 1]));
    return n;
}

uint32_t eng_output_token(uint64_t request_id, uint32_t k, uint32_t vocab)
{
    return (uint32_t)(sim_mix64(request_id * 0x100000001b3ull + k) % vocab);
}

void eng_block_hashes(const uint32_t *tokens, uint32_t n, uint32_t block_size,
                      uint64_t *out)
{
    uint64_t h = 0x7773656c2d6b76ull; /* the parent of the first block */
    for (uint32_t b = 0; (uint64_t)(b + 1) * block_size <= n; b++) {
        for (uint32_t t = 0; t < block_size; t++)
            h = sim_mix64(h ^ tokens[(size_t)b * block_size + t]);
        out[b] = h;
    }
}
