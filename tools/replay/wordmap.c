// SPDX-License-Identifier: Apache-2.0
/*
 * wordmap.c -- a model's ids for `wsel replay`'s words (words.h), measured
 * with libwsel-tokenizer: each word alone and after a space, then two
 * probes that give what the model adds around the words, then one long
 * text that must tokenize as the concatenation of its words' tokens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "words.h"

size_t replay_words_text(char *out, const uint32_t *words, uint32_t n)
{
    size_t len = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *w = replay_words[words[i] % REPLAY_WORDS];
        size_t k = strlen(w);
        if (out) {
            if (i)
                out[len] = ' ';
            memcpy(out + len + (i > 0), w, k);
        }
        len += k + (i > 0);
    }
    if (out)
        out[len] = '\0';
    return len;
}

#ifdef WSEL_REPLAY_TOKENIZER
#include "wsel_tokenizer.h"

#define PROBE_WORDS 300
#define MAX_IDS     (2 * REPLAY_WORDMAP_MAX_AROUND + PROBE_WORDS)

typedef struct probe {
    const wsel_tokenizer *tok;
    int chat;
    char text[PROBE_WORDS * 16 + 64];
    uint32_t ids[MAX_IDS];
    size_t n;
} probe;

/* The ids of n words as the replay sends them: a completions prompt (with
 * the special tokens, as vLLM adds them) or one user message. */
static int32_t probe_run(probe *p, const uint32_t *words, uint32_t n, char *err,
                         size_t err_size)
{
    size_t off = 0;
    if (p->chat)
        off = (size_t)snprintf(p->text, sizeof(p->text), "{" REPLAY_CHAT_OPEN);
    off += replay_words_text(p->text + off, words, n);
    if (p->chat)
        off += (size_t)snprintf(p->text + off, sizeof(p->text) - off, REPLAY_CHAT_CLOSE "}");
    if (p->chat)
        return wsel_tokenizer_encode_chat(p->tok, p->text, off, p->ids, MAX_IDS, &p->n, err,
                                          err_size);
    return wsel_tokenizer_encode(p->tok, p->text, off, WSEL_TOKENIZER_ADD_SPECIAL, p->ids,
                                 MAX_IDS, &p->n);
}

/* first[] and next[]: every word one token alone and after a word. */
static int map_words(replay_wordmap *m, const wsel_tokenizer *tok, char *err,
                     size_t err_size)
{
    for (uint32_t w = 0; w < REPLAY_WORDS; w++) {
        char text[64];
        uint32_t ids[4];
        size_t n1 = 0, n2 = 0;
        int len = snprintf(text, sizeof(text), "%s %s", replay_words[0], replay_words[w]);
        size_t first_len = strlen(replay_words[0]) + 1;
        int32_t rc = wsel_tokenizer_encode(tok, text + first_len, (size_t)len - first_len, 0,
                                           ids, 4, &n1);
        if (rc == 0 && n1 == 1)
            m->first[w] = ids[0];
        if (rc == 0 && n1 == 1)
            rc = wsel_tokenizer_encode(tok, text, (size_t)len, 0, ids, 4, &n2);
        if (rc != 0 || n1 != 1 || n2 != 2 || ids[0] != m->first[0]) {
            snprintf(err, err_size, "the word '%s' is not one token for this model%s%s",
                     replay_words[w], rc ? ": " : "", rc ? wsel_tokenizer_strerror(rc) : "");
            return -1;
        }
        m->next[w] = ids[1];
    }
    return 0;
}

static size_t common_prefix(const uint32_t *a, const uint32_t *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* prefix[] and suffix[]: two probes of two different words each. */
static int map_around(replay_wordmap *m, probe *a, probe *b, char *err, size_t err_size)
{
    const uint32_t wa[2] = {0, 1}, wb[2] = {2, 3};
    int32_t rc = probe_run(a, wa, 2, err, err_size);
    if (rc == 0)
        rc = probe_run(b, wb, 2, err, err_size);
    if (rc != 0) {
        if (!err[0])
            snprintf(err, err_size, "%s", wsel_tokenizer_strerror(rc));
        return -1;
    }
    size_t n = a->n < b->n ? a->n : b->n, pre = common_prefix(a->ids, b->ids, n), suf = 0;
    while (suf < n - pre && a->ids[a->n - 1 - suf] == b->ids[b->n - 1 - suf])
        suf++;
    if (a->n != b->n || a->n != pre + suf + 2 || pre > REPLAY_WORDMAP_MAX_AROUND ||
        suf > REPLAY_WORDMAP_MAX_AROUND || a->ids[pre] != m->first[0] ||
        a->ids[pre + 1] != m->next[1]) {
        snprintf(err, err_size, "two words do not tokenize as their own tokens");
        return -1;
    }
    memcpy(m->prefix, a->ids, pre * sizeof(uint32_t));
    memcpy(m->suffix, a->ids + a->n - suf, suf * sizeof(uint32_t));
    m->num_prefix = (uint32_t)pre;
    m->num_suffix = (uint32_t)suf;
    return 0;
}

/* PROBE_WORDS words: the concatenation of their tokens, exactly. */
static int check_long(const replay_wordmap *m, probe *p, char *err, size_t err_size)
{
    uint32_t words[PROBE_WORDS];
    for (uint32_t i = 0; i < PROBE_WORDS; i++)
        words[i] = (i * 2654435761u) % REPLAY_WORDS;
    if (probe_run(p, words, PROBE_WORDS, err, err_size) != 0 ||
        p->n != m->num_prefix + PROBE_WORDS + m->num_suffix)
        goto out_differ;
    for (uint32_t i = 0; i < PROBE_WORDS; i++)
        if (p->ids[m->num_prefix + i] != (i ? m->next : m->first)[words[i]])
            goto out_differ;
    return 0;
out_differ:
    snprintf(err, err_size, "%u words do not tokenize as the concatenation of their tokens",
             PROBE_WORDS);
    return -1;
}

int replay_wordmap_open(replay_wordmap *m, const char *dir, int chat, char *err,
                        size_t err_size)
{
    wsel_tokenizer *tok;
    char why[256] = "";
    int32_t rc = wsel_tokenizer_open(dir, &tok, why, sizeof(why));
    if (rc != 0) {
        snprintf(err, err_size, "%s: %s%s%s", dir, wsel_tokenizer_strerror(rc),
                 why[0] ? ": " : "", why);
        return -1;
    }
    probe *p = calloc(2, sizeof(*p));
    int ok = p != NULL;
    if (ok) {
        p[0].tok = p[1].tok = tok;
        p[0].chat = p[1].chat = chat;
        err[0] = '\0';
        ok = map_words(m, tok, err, err_size) == 0 &&
             map_around(m, &p[0], &p[1], err, err_size) == 0 &&
             check_long(m, &p[0], err, err_size) == 0;
    } else {
        snprintf(err, err_size, "out of memory");
    }
    free(p);
    wsel_tokenizer_close(tok);
    if (!ok) {
        char copy[512];
        snprintf(copy, sizeof(copy), "%s", err);
        snprintf(err, err_size, "%s: %s", dir, copy);
    }
    return ok ? 0 : -1;
}

#else

int replay_wordmap_open(replay_wordmap *m, const char *dir, int chat, char *err,
                        size_t err_size)
{
    (void)m;
    (void)chat;
    snprintf(err, err_size, "%s: wsel was built without libwsel-tokenizer (WSEL_TOKENIZER=OFF)",
             dir);
    return -1;
}

#endif
