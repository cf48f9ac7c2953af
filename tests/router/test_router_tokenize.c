// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_tokenize.c -- routes whose prompt is text or a chat request,
 * tokenized by the model's tokenizer (wsel_router_set_tokenizer): their
 * blocks are those of the engine's token ids; what the tokenizer refuses
 * is hashed as text and counted. Uses Qwen 3's files as
 * scripts/install-deps.sh installs them; skipped without them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "wsel_router.h"
#include "wsel_tokenizer.h"

#define BS 4u

typedef struct fx {
    wsel_host *host;
    wsel_router *router;
    wsel_tokenizer *tok;
} fx;

static int setup(void **state)
{
    static fx f;
    memset(&f, 0, sizeof(f));
    *state = &f;
    if (access(WSEL_TEST_TOKENIZER_DIR "/tokenizer.json", R_OK) == 0) {
        char err[256];
        if (wsel_tokenizer_open(WSEL_TEST_TOKENIZER_DIR, &f.tok, err, sizeof(err)))
            return -1;
    }
    if (wsel_host_create(NULL, &f.host))
        return -1;
    wsel_router_options o = {.struct_size = sizeof(o), .block_size = BS, .host = f.host};
    if (wsel_router_create(&o, &f.router, NULL, 0))
        return -1;
    for (uint64_t id = 1; id <= 2; id++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%llu", (unsigned long long)(8000 + id));
        wsel_router_worker w = {.worker_id = id, .address = addr, .dp_size = 1};
        if (wsel_router_add_worker(f.router, &w, NULL, 0))
            return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    wsel_router_destroy(f->router);
    wsel_host_destroy(f->host);
    wsel_tokenizer_close(f->tok);
    return 0;
}

static fx *with_tokenizer(void **state)
{
    fx *f = *state;
    if (!f->tok)
        skip(); /* scripts/install-deps.sh installs the files */
    assert_int_equal(wsel_router_set_tokenizer(f->router, f->tok), 0);
    return f;
}

static int32_t route_text(fx *f, const char *text, size_t len, wsel_route_result *res)
{
    wsel_route_request q = {.struct_size = sizeof(q), .text = text, .text_len = len};
    return wsel_router_route(f->router, &q, res);
}

static int32_t route_chat(fx *f, const char *chat, wsel_route_result *res)
{
    wsel_route_request q = {.struct_size = sizeof(q), .chat = chat, .chat_len = strlen(chat)};
    return wsel_router_route(f->router, &q, res);
}

static void test_text_hashes_the_blocks_of_the_engines_token_ids(void **state)
{
    fx *f = with_tokenizer(state);
    const char *text = "The router sends each request where its prefix is cached. 数据 🙂";
    uint32_t ids[256];
    size_t n = 0;
    assert_int_equal(wsel_tokenizer_encode(f->tok, text, strlen(text),
                                           WSEL_TOKENIZER_ADD_SPECIAL, ids, 256, &n), 0);
    wsel_route_result by_text, by_ids;
    assert_int_equal(route_text(f, text, strlen(text), &by_text), 0);
    assert_int_equal(by_text.num_blocks, n / BS);
    assert_int_equal(wsel_router_finished(f->router, by_text.request_id), 0); /* idle ranks */
    /* History put the text's blocks on its rank: the same ids hit them all. */
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = ids, .num_tokens = (uint32_t)n};
    assert_int_equal(wsel_router_route(f->router, &q, &by_ids), 0);
    assert_int_equal(by_ids.worker_id, by_text.worker_id);
    assert_int_equal(by_ids.overlap_blocks, n / BS);
    wsel_router_tokenize_counters c;
    wsel_router_read_tokenize_counters(f->router, &c);
    assert_int_equal(c.text_tokenized, 1);
    assert_int_equal(c.tokens, n);
    assert_int_equal(c.fallbacks, 0);
}

static void test_repeated_conversation_lands_on_the_rank_holding_its_prefix(void **state)
{
    fx *f = with_tokenizer(state);
    const char *first = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
                        "{\"role\":\"user\",\"content\":\"Name three prime numbers.\"}]}";
    const char *second =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
        "{\"role\":\"user\",\"content\":\"Name three prime numbers.\"},"
        "{\"role\":\"assistant\",\"content\":\"2, 3, 5.\"},"
        "{\"role\":\"user\",\"content\":\"And three more?\"}],\"model\":\"m\"}";
    wsel_route_result a, b;
    assert_int_equal(route_chat(f, first, &a), 0);
    assert_true(a.num_blocks >= 3);
    assert_int_equal(wsel_router_finished(f->router, a.request_id), 0); /* idle ranks */
    assert_int_equal(route_chat(f, second, &b), 0);
    assert_int_equal(b.worker_id, a.worker_id);
    assert_true(b.overlap_blocks >= a.num_blocks - 1);
    assert_true(b.num_blocks > a.num_blocks);
    wsel_router_tokenize_counters c;
    wsel_router_read_tokenize_counters(f->router, &c);
    assert_int_equal(c.chat_tokenized, 2);
}

static void test_text_the_tokenizer_refuses_is_hashed_as_text(void **state)
{
    fx *f = with_tokenizer(state);
    static const char bad[] = "not UTF-8 \xff\xfe and more text to fill chunks";
    wsel_route_result res;
    assert_int_equal(route_text(f, bad, sizeof(bad) - 1, &res), 0);
    assert_int_equal(res.num_blocks, (sizeof(bad) - 1) / (4 * BS));
    wsel_router_tokenize_counters c;
    wsel_router_read_tokenize_counters(f->router, &c);
    assert_int_equal(c.fallbacks, 1);
}

static void test_chat_without_a_tokenizer_is_hashed_as_text(void **state)
{
    fx *f = *state;
    assert_int_equal(wsel_router_set_tokenizer(f->router, NULL), 0);
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}";
    wsel_route_result res;
    assert_int_equal(route_chat(f, chat, &res), 0);
    assert_int_equal(res.num_blocks, strlen(chat) / (4 * BS));
    assert_int_equal(wsel_router_set_tokenizer(NULL, NULL), WSEL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_text_hashes_the_blocks_of_the_engines_token_ids,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_repeated_conversation_lands_on_the_rank_holding_its_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_the_tokenizer_refuses_is_hashed_as_text,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_chat_without_a_tokenizer_is_hashed_as_text, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
