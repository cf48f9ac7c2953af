// SPDX-License-Identifier: Apache-2.0
/*
 * wsel_tokenizer.h -- libwsel-tokenizer: a text prompt or a chat request
 * turned into the token ids the engine computes for it, from the model's
 * own files. HF `tokenizers` encodes; `minijinja` renders the chat template
 * as `transformers`' apply_chat_template does (both Rust crates, behind a
 * C ABI: tokenizer/shim/). docs/tokenize.md says which families are
 * checked identical and how.
 *
 *   text   wsel_tokenizer_encode: the ids of a /v1/completions string
 *          prompt; WSEL_TOKENIZER_ADD_SPECIAL adds what the tokenizer's
 *          post-processor adds (Llama's BOS), as vLLM does by default.
 *   chat   wsel_tokenizer_render_chat / _encode_chat: a /v1/chat/completions
 *          body (a JSON object): "messages", "tools", "documents",
 *          "add_generation_prompt" (default true) and the fields of
 *          "chat_template_kwargs" go to the template, with the special
 *          tokens of tokenizer_config.json (bos_token, eos_token, ...);
 *          other fields are ignored. The rendering is encoded without
 *          added special tokens (the template writes them), as vLLM does.
 *
 * Threads: open and close are [control thread]; every other call is
 * [any thread], concurrently on one tokenizer (it is read-only once open).
 *
 * Buffers: the caller owns every buffer. Outputs are written only on
 * success, except *n: on WSEL_TOKENIZER_ERANGE it says how many ids (or
 * bytes, without the NUL) the answer needs; call again with that much.
 *
 * Errors: 0 or a negative WSEL_TOKENIZER_E* below. `err`/`err_size`: the
 * caller's buffer for a NUL-terminated message (truncated to fit), or NULL.
 */
#ifndef WSEL_TOKENIZER_H
#define WSEL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, code, message): the one table of error codes. */
#define WSEL_TOKENIZER_ERRORS(X)                                              \
    X(EINVAL, -1, "invalid argument")                                         \
    X(ENOENT, -2, "tokenizer file missing or unreadable")                     \
    X(EFORMAT, -3, "malformed tokenizer file or request")                     \
    X(ENOTEMPLATE, -4, "the model's files carry no chat template")            \
    X(ETEMPLATE, -5, "chat template failed to compile or render")             \
    X(EUTF8, -6, "text is not valid UTF-8")                                   \
    X(ERANGE, -7, "output buffer too small")                                  \
    X(EENCODE, -8, "the tokenizer refused the text")                          \
    X(EINTERNAL, -9, "internal error in the tokenizer")

enum wsel_tokenizer_error {
#define WSEL_TOKENIZER_ENUM_(name, code, msg) WSEL_TOKENIZER_##name = (code),
    WSEL_TOKENIZER_ERRORS(WSEL_TOKENIZER_ENUM_)
#undef WSEL_TOKENIZER_ENUM_
};

/* The message of an error code; "unknown error" for any other value,
 * "success" for 0. Never NULL. [any thread] */
static inline const char *wsel_tokenizer_strerror(int32_t code)
{
    switch (code) {
    case 0: return "success";
#define WSEL_TOKENIZER_CASE_(name, c, msg) case (c): return (msg);
        WSEL_TOKENIZER_ERRORS(WSEL_TOKENIZER_CASE_)
#undef WSEL_TOKENIZER_CASE_
    default: return "unknown error";
    }
}

/* wsel_tokenizer_encode's flags. */
#define WSEL_TOKENIZER_ADD_SPECIAL 0x1u /* the post-processor's BOS/EOS */

typedef struct wsel_tokenizer wsel_tokenizer;

/* Open the model folder `dir`: `tokenizer.json` (required),
 * `tokenizer_config.json` (special tokens, `chat_template`: a string or a
 * list whose "default" entry is taken) and `chat_template.jinja` (if
 * present, it wins), the files a model hub ships. The template is compiled
 * here: a template minijinja cannot parse is refused (ETEMPLATE) with the
 * reason. On success *out is the caller's, freed by wsel_tokenizer_close.
 * ENOENT, EFORMAT, ETEMPLATE, EINVAL (NULL). [control thread] */
int32_t wsel_tokenizer_open(const char *dir, wsel_tokenizer **out, char *err,
                            size_t err_size);
/* Free it; NULL is a harmless no-op. No other call may be running on it.
 * [control thread] */
void wsel_tokenizer_close(wsel_tokenizer *tok);

/* 1 if the folder carried a chat template, 0 if not (or NULL). [any thread] */
int32_t wsel_tokenizer_has_chat_template(const wsel_tokenizer *tok);

/* The ids of `len` bytes of UTF-8 `text` (not NUL-terminated; NULL with
 * len 0 is the empty text) into ids[0..cap), their count in *n. EUTF8 if
 * the bytes are not UTF-8; ERANGE (with *n) if cap is too small; EINVAL
 * for NULL or an unknown flag. [any thread] */
int32_t wsel_tokenizer_encode(const wsel_tokenizer *tok, const char *text, size_t len,
                              uint32_t flags, uint32_t *ids, size_t cap, size_t *n);

/* Render a chat request (`len` bytes of JSON) with the chat template into
 * out[0..cap) as UTF-8 with a NUL, *n bytes without it. ENOTEMPLATE,
 * EFORMAT (not an object with a "messages" array), ETEMPLATE (the template
 * raised, e.g. raise_exception for roles it refuses), ERANGE (with *n:
 * cap must be at least *n + 1). [any thread] */
int32_t wsel_tokenizer_render_chat(const wsel_tokenizer *tok, const char *json,
                                   size_t len, char *out, size_t cap, size_t *n,
                                   char *err, size_t err_size);

/* The ids of that rendering (no special tokens added: the template writes
 * them), as wsel_tokenizer_encode's. The same errors. [any thread] */
int32_t wsel_tokenizer_encode_chat(const wsel_tokenizer *tok, const char *json,
                                   size_t len, uint32_t *ids, size_t cap, size_t *n,
                                   char *err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* WSEL_TOKENIZER_H */
