// SPDX-License-Identifier: Apache-2.0
/*
 * hf_tokens.c -- wsel-engine --tokenizer DIR: text and chat prompts
 * tokenized by libwsel-tokenizer with the model's own files, as vLLM does
 * (docs/tokenize.md), instead of the fixed word rule of tokens.c. Built
 * without the tokenizer (WSEL_ENGINE_TOKENIZER undefined), the option is
 * refused at start.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"
#ifdef WSEL_ENGINE_TOKENIZER
#include "wsel_tokenizer.h"
#endif

#ifdef WSEL_ENGINE_TOKENIZER
int eng_tokenizer_open(eng_options *o, char *err, size_t err_size)
{
    wsel_tokenizer *tok = NULL;
    if (!o->tokenizer_dir)
        return 0;
    char why[400] = "";
    int32_t rc = wsel_tokenizer_open(o->tokenizer_dir, &tok, why, sizeof(why));
    if (rc) {
        snprintf(err, err_size, "%s: %s", wsel_tokenizer_strerror(rc), why);
        return -1;
    }
    o->tokenizer = tok;
    return 0;
}

void eng_tokenizer_close(eng_options *o)
{
    wsel_tokenizer_close((wsel_tokenizer *)o->tokenizer);
    o->tokenizer = NULL;
}

int eng_tokenizer_encode(const eng_options *o, int chat, const char *s, size_t n,
                         uint32_t **ids, uint32_t *count, char *err, size_t err_size)
{
    size_t cap = n + 16, got = 0;
    char why[256] = "";
    int32_t rc;
    for (;;) {
        uint32_t *buf = realloc(*ids, (cap + 1) * sizeof(uint32_t));
        if (!buf)
            return snprintf(err, err_size, "out of memory"), -1;
        *ids = buf;
        rc = chat ? wsel_tokenizer_encode_chat(o->tokenizer, s, n, buf, cap, &got, why,
                                               sizeof(why))
                  : wsel_tokenizer_encode(o->tokenizer, s, n, WSEL_TOKENIZER_ADD_SPECIAL, buf,
                                          cap, &got);
        if (rc != WSEL_TOKENIZER_ERANGE)
            break;
        cap = got;
    }
    if (rc || got > UINT32_MAX) {
        snprintf(err, err_size, "the tokenizer refused the prompt: %s%s%s",
                 wsel_tokenizer_strerror(rc), why[0] ? ": " : "", why);
        return -1;
    }
    *count = (uint32_t)got;
    return 0;
}
#else
int eng_tokenizer_open(eng_options *o, char *err, size_t err_size)
{
    if (!o->tokenizer_dir)
        return 0;
    snprintf(err, err_size, "built without libwsel-tokenizer (WSEL_TOKENIZER=OFF)");
    return -1;
}

void eng_tokenizer_close(eng_options *o)
{
    (void)o;
}

int eng_tokenizer_encode(const eng_options *o, int chat, const char *s, size_t n,
                         uint32_t **ids, uint32_t *count, char *err, size_t err_size)
{
    (void)o, (void)chat, (void)s, (void)n, (void)ids, (void)count;
    snprintf(err, err_size, "no tokenizer");
    return -1;
}
#endif
