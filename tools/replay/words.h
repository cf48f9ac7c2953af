// SPDX-License-Identifier: Apache-2.0
/*
 * words.h -- the text of `wsel replay --prompt words|chat`: a prompt whose
 * token positions are the trace's, written as words. Position p of a
 * request holds the word replay_words[mix64(H * trace_block + p % trace_block)
 * mod REPLAY_WORDS], H the id of the trace block p falls in, and the words
 * are joined by single spaces. Every word is one token alone and after a
 * space for the checked models (words_gen.py; tests/tools/test_replay_words.c),
 * and words never merge, so the text of n positions is n tokens and the
 * tokens of a concatenation are the concatenation of the tokens.
 *
 * A model adds tokens around the words (a BOS, a chat template's header
 * and tail): with the model's tokenizer (replay_wordmap_open) those are
 * measured, and the words start at position `num_prefix` and end
 * `num_suffix` positions before the prompt's end, so the engine's token
 * positions are the trace's and its KV blocks line up with the trace's.
 * Not thread-safe.
 */
#ifndef WSEL_TOOLS_REPLAY_WORDS_H
#define WSEL_TOOLS_REPLAY_WORDS_H

#include <stddef.h>
#include <stdint.h>

#define REPLAY_WORDS 2048
extern const char *const replay_words[REPLAY_WORDS];

#define REPLAY_WORDMAP_MAX_AROUND 512

/* A model's ids for the words and for what it adds around them. */
typedef struct replay_wordmap {
    uint32_t first[REPLAY_WORDS]; /* a word as the text's first */
    uint32_t next[REPLAY_WORDS];  /* a word after a space */
    uint32_t prefix[REPLAY_WORDMAP_MAX_AROUND], num_prefix; /* BOS, chat header */
    uint32_t suffix[REPLAY_WORDMAP_MAX_AROUND], num_suffix; /* chat tail */
} replay_wordmap;

/* Fill m from the model folder `dir` (wsel_tokenizer_open), for a
 * /v1/completions prompt (chat 0) or a chat request of one user message
 * (chat 1). -1 with a message in err if the folder does not open, a word
 * is not one token, or the words do not tokenize as the concatenation of
 * their tokens; or if wsel was built without libwsel-tokenizer. */
int replay_wordmap_open(replay_wordmap *m, const char *dir, int chat, char *err,
                        size_t err_size);

/* The text of n words (indexes into replay_words) joined by spaces into
 * out (NUL-terminated); returns its length. NULL out: the length only. */
size_t replay_words_text(char *out, const uint32_t *words, uint32_t n);

/* The chat request's body prefix and suffix around the words (JSON). */
#define REPLAY_CHAT_OPEN  "\"messages\":[{\"role\":\"user\",\"content\":\""
#define REPLAY_CHAT_CLOSE "\"}]"

#endif
