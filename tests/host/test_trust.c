// SPDX-License-Identifier: Apache-2.0
/*
 * test_trust.c -- wsel_trust_open: the StrictModes rules, each refusal
 * built in a private mkdtemp folder and checked by its message.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "testutil.h"

typedef struct fixture {
    char *dir;
    char path[PATH_MAX];
    char err[1024];
} fixture;

/* A copy of the fx_good plugin as DIR/SUB/NAME with `mode`, its path into
 * f->path (the trust rules read the ELF headers too). */
static void make_file(fixture *f, const char *sub, const char *name, mode_t mode)
{
    char folder[PATH_MAX];
    snprintf(folder, sizeof(folder), "%s%s%s", f->dir, sub[0] ? "/" : "", sub);
    char *path = tu_install_fixture(folder, "fx_good", name);
    snprintf(f->path, sizeof(f->path), "%s", path);
    free(path);
    assert_int_equal(chmod(f->path, mode), 0);
}

static void make_dir(fixture *f, const char *sub, mode_t mode)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", f->dir, sub);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chmod(p, mode), 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_temp_dir();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tu_remove_tree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Expect a refusal `code` whose message contains `needle`. */
static void expect_refusal(fixture *f, const wsel_trust_options *opts, int32_t code,
                           const char *needle)
{
    int32_t rc = wsel_trust_open(f->path, opts, f->err, sizeof(f->err));
    if (rc >= 0)
        close(rc);
    assert_int_equal(rc, code);
    if (strstr(f->err, needle) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", f->err, needle);
}

static void expect_accepted(fixture *f, const wsel_trust_options *opts)
{
    int32_t rc = wsel_trust_open(f->path, opts, f->err, sizeof(f->err));
    if (rc < 0)
        fail_msg("refused: %s", f->err);
    close(rc);
}

static void test_accepts_a_private_file_in_a_private_folder(void **state)
{
    fixture *f = *state;
    make_file(f, "", "p.so", 0644);
    expect_accepted(f, NULL);
}

static void test_returns_an_open_read_only_descriptor(void **state)
{
    fixture *f = *state;
    make_file(f, "", "p.so", 0644);
    int32_t fd = wsel_trust_open(f->path, NULL, f->err, sizeof(f->err));
    assert_true(fd >= 0);
    char c;
    assert_int_equal(read(fd, &c, 1), 1);
    assert_int_equal(c, 0x7f); /* ELF magic */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
}

static void test_refuses_group_writable_file(void **state)
{
    fixture *f = *state;
    make_file(f, "", "p.so", 0664);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof(want),
             "%s: refused: group-writable (mode 0664); plugins must not be writable by "
             "others",
             f->path);
    expect_refusal(f, NULL, WSEL_EPERM, want);
}

static void test_refuses_world_writable_file(void **state)
{
    fixture *f = *state;
    make_file(f, "", "p.so", 0646);
    expect_refusal(f, NULL, WSEL_EPERM, "refused: world-writable (mode 0646)");
}

static void test_refuses_world_writable_folder_without_sticky_bit(void **state)
{
    fixture *f = *state;
    make_dir(f, "open", 0777);
    make_file(f, "open", "p.so", 0644);
    expect_refusal(f, NULL, WSEL_EPERM,
                   "/open is world-writable without the sticky bit (mode 0777)");
}

static void test_refuses_group_writable_folder(void **state)
{
    fixture *f = *state;
    make_dir(f, "team", 0775);
    make_file(f, "team", "p.so", 0644);
    expect_refusal(f, NULL, WSEL_EPERM, "/team is group-writable without the sticky bit");
}

static void test_accepts_sticky_world_writable_folder(void **state)
{
    fixture *f = *state;
    make_dir(f, "tmp", 01777);
    make_file(f, "tmp", "p.so", 0644);
    expect_accepted(f, NULL);
}

static void test_refuses_a_writable_folder_higher_up(void **state)
{
    fixture *f = *state;
    make_dir(f, "open", 0777);
    make_dir(f, "open/inner", 0755);
    make_file(f, "open/inner", "p.so", 0644);
    expect_refusal(f, NULL, WSEL_EPERM, "/open is world-writable");
}

static void test_refuses_symbolic_link(void **state)
{
    fixture *f = *state;
    make_file(f, "", "real.so", 0644);
    char real[PATH_MAX];
    snprintf(real, sizeof(real), "%s", f->path);
    snprintf(f->path, sizeof(f->path), "%s/link.so", f->dir);
    assert_int_equal(symlink(real, f->path), 0);
    expect_refusal(f, NULL, WSEL_EPERM, "link.so: refused: is a symbolic link");
}

static void test_refuses_directory(void **state)
{
    fixture *f = *state;
    make_dir(f, "d.so", 0755);
    snprintf(f->path, sizeof(f->path), "%s/d.so", f->dir);
    expect_refusal(f, NULL, WSEL_EPERM, "d.so: refused: a directory");
}

static void test_refuses_fifo_without_blocking(void **state)
{
    fixture *f = *state;
    snprintf(f->path, sizeof(f->path), "%s/fifo.so", f->dir);
    assert_int_equal(mkfifo(f->path, 0644), 0);
    expect_refusal(f, NULL, WSEL_EPERM, "fifo.so: refused: a fifo");
}

static void test_refuses_file_owned_by_another_user(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0)
        skip(); /* only root can give a file away */
    make_file(f, "", "p.so", 0644);
    assert_int_equal(chown(f->path, 12345, (gid_t)-1), 0);
    expect_refusal(f, NULL, WSEL_EPERM, "p.so: refused: owned by uid 12345");
}

static void test_refuses_folder_owned_by_another_user(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0)
        skip();
    make_dir(f, "theirs", 0755);
    make_file(f, "theirs", "p.so", 0644);
    char sub[PATH_MAX];
    snprintf(sub, sizeof(sub), "%s/theirs", f->dir);
    assert_int_equal(chown(sub, 12345, (gid_t)-1), 0);
    expect_refusal(f, NULL, WSEL_EPERM, "/theirs owned by uid 12345");
}

static void test_reports_missing_file(void **state)
{
    fixture *f = *state;
    snprintf(f->path, sizeof(f->path), "%s/absent.so", f->dir);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof(want), "%s: no such file", f->path);
    expect_refusal(f, NULL, WSEL_ENOENT, want);
}

static void test_rejects_empty_path(void **state)
{
    fixture *f = *state;
    f->path[0] = '\0';
    expect_refusal(f, NULL, WSEL_EINVAL, "empty");
}

static void test_accepts_relative_path(void **state)
{
    fixture *f = *state;
    make_file(f, "", "p.so", 0644);
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(f->dir), 0);
    int32_t rc = wsel_trust_open("p.so", NULL, f->err, sizeof(f->err));
    assert_int_equal(chdir(cwd), 0);
    assert_true(rc >= 0);
    close(rc);
}

static void test_allow_list_accepts_folder_inside(void **state)
{
    fixture *f = *state;
    make_dir(f, "plugins", 0755);
    make_dir(f, "plugins/sub", 0755);
    make_file(f, "plugins/sub", "p.so", 0644);
    char allowed[PATH_MAX];
    snprintf(allowed, sizeof(allowed), "%s/plugins", f->dir);
    const char *const dirs[] = {"/nonexistent", allowed, NULL};
    wsel_trust_options opts = {sizeof(opts), 0, dirs};
    expect_accepted(f, &opts);
}

static void test_allow_list_resolves_symlinked_folders(void **state)
{
    fixture *f = *state;
    make_dir(f, "plugins", 0755);
    make_file(f, "plugins", "p.so", 0644);
    char real[PATH_MAX], link[PATH_MAX];
    snprintf(real, sizeof(real), "%s/plugins", f->dir);
    snprintf(link, sizeof(link), "%s/alias", f->dir);
    assert_int_equal(symlink(real, link), 0);
    const char *const dirs[] = {link, NULL};
    wsel_trust_options opts = {sizeof(opts), 0, dirs};
    expect_accepted(f, &opts);
}

static void test_allow_list_refuses_folder_outside(void **state)
{
    fixture *f = *state;
    make_dir(f, "plugins", 0755);
    make_dir(f, "plugins2", 0755);
    make_file(f, "plugins2", "p.so", 0644);
    char allowed[PATH_MAX];
    snprintf(allowed, sizeof(allowed), "%s/plugins", f->dir);
    const char *const dirs[] = {allowed, NULL};
    wsel_trust_options opts = {sizeof(opts), 0, dirs};
    /* ".../plugins2" starts with ".../plugins" but is not inside it. */
    expect_refusal(f, &opts, WSEL_EPERM, "is not in the allowed plugin folders");
}

/* Issue 13 item 9: a symbolic link inside a world-writable, non-sticky
 * folder can be replaced by anyone, so the walk refuses that folder even
 * though the link points to a good one. */
static void test_refuses_symlink_inside_world_writable_folder(void **state)
{
    fixture *f = *state;
    make_dir(f, "good", 0755);
    make_dir(f, "open", 0777);
    make_file(f, "good", "p.so", 0644);
    char target[1024], link[1024];
    snprintf(target, sizeof(target), "%s/good", f->dir);
    snprintf(link, sizeof(link), "%s/open/link", f->dir);
    assert_int_equal(symlink(target, link), 0);
    snprintf(f->path, sizeof(f->path), "%s/p.so", link);
    expect_refusal(f, NULL, WSEL_EPERM,
                   "/open is world-writable without the sticky bit (mode 0777)");
}

/* In a sticky folder others may add entries: a link they own is refused. */
static void test_refuses_symlink_owned_by_another_user_in_sticky_folder(void **state)
{
    fixture *f = *state;
    if (geteuid() != 0)
        skip(); /* only root can give a link away */
    make_dir(f, "good", 0755);
    make_dir(f, "tmp", 01777);
    make_file(f, "good", "p.so", 0644);
    char target[1024], link[1024];
    snprintf(target, sizeof(target), "%s/good", f->dir);
    snprintf(link, sizeof(link), "%s/tmp/link", f->dir);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(lchown(link, 12345, (gid_t)-1), 0);
    snprintf(f->path, sizeof(f->path), "%s/p.so", link);
    expect_refusal(f, NULL, WSEL_EPERM, "/tmp/link owned by uid 12345");
}

static void test_follows_symlinks_in_trusted_folders(void **state)
{
    fixture *f = *state;
    make_dir(f, "good", 0755);
    make_file(f, "good", "p.so", 0644);
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "%s/alias", f->dir);
    assert_int_equal(symlink("./good/../good", link), 0);
    snprintf(f->path, sizeof(f->path), "%s/alias/./p.so", f->dir);
    expect_accepted(f, NULL);
}

/* The swap race: a thread flips the folder link `cur` between a good
 * folder and a world-writable one while the host opens cur/p.so. */
typedef struct flipper {
    const char *dir;
    atomic_int stop;
    atomic_ulong flips;
} flipper;

static void *flip(void *arg)
{
    flipper *fl = arg;
    char cur[PATH_MAX], tmp[PATH_MAX], good[PATH_MAX], open_dir[PATH_MAX];
    snprintf(cur, sizeof(cur), "%s/cur", fl->dir);
    snprintf(tmp, sizeof(tmp), "%s/cur.tmp", fl->dir);
    snprintf(good, sizeof(good), "%s/good", fl->dir);
    snprintf(open_dir, sizeof(open_dir), "%s/open", fl->dir);
    while (!atomic_load(&fl->stop)) {
        const char *to = (atomic_load(&fl->flips) & 1u) ? good : open_dir;
        unlink(tmp);
        if (symlink(to, tmp) == 0 && rename(tmp, cur) == 0)
            atomic_fetch_add(&fl->flips, 1);
    }
    return NULL;
}

#define RACE_ITERATIONS 2000

static void test_folder_swap_race_never_opens_the_untrusted_file(void **state)
{
    fixture *f = *state;
    make_dir(f, "good", 0755);
    make_dir(f, "open", 0777);
    make_file(f, "good", "p.so", 0644);
    make_file(f, "open", "p.so", 0644);
    struct stat untrusted;
    assert_int_equal(stat(f->path, &untrusted), 0);
    char cur[PATH_MAX];
    snprintf(cur, sizeof(cur), "%s/good", f->dir);
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "%s/cur", f->dir);
    assert_int_equal(symlink(cur, link), 0);
    snprintf(f->path, sizeof(f->path), "%s/cur/p.so", f->dir);

    flipper fl = {.dir = f->dir};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, flip, &fl), 0);
    unsigned accepted = 0, refused = 0, untrusted_opened = 0;
    for (int i = 0; i < RACE_ITERATIONS; i++) {
        /* Let the link change between opens (bounded: a busy machine may
         * starve the flipper; the rule holds either way). */
        unsigned long seen = atomic_load(&fl.flips);
        for (int spin = 0; spin < 1000 && atomic_load(&fl.flips) == seen; spin++)
            sched_yield();
        int32_t fd = wsel_trust_open(f->path, NULL, f->err, sizeof(f->err));
        if (fd < 0) {
            refused++;
            continue;
        }
        accepted++;
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        if (st.st_dev == untrusted.st_dev && st.st_ino == untrusted.st_ino)
            untrusted_opened++;
        close(fd);
    }
    atomic_store(&fl.stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    print_message("swap race: %d opens, %u accepted, %u refused, %u untrusted, %lu "
                  "flips\n",
                  RACE_ITERATIONS, accepted, refused, untrusted_opened,
                  atomic_load(&fl.flips));
    assert_int_equal(untrusted_opened, 0);
}

/* Issue 13 item 11: the isolated helper runs plugins with the router's
 * rights, so it passes the same rules before it is ever executed. */
static void expect_helper_refused(fixture *f, mode_t helper_mode, mode_t dir_mode,
                                  const char *needle)
{
    make_dir(f, "bin", dir_mode);
    char helper[1024], marker[1024];
    snprintf(helper, sizeof(helper), "%s/bin/helper.sh", f->dir);
    snprintf(marker, sizeof(marker), "%s/helper-ran", f->dir);
    FILE *script = fopen(helper, "w");
    assert_non_null(script);
    fprintf(script, "#!/bin/sh\ntouch '%s'\n", marker);
    fclose(script);
    assert_int_equal(chmod(helper, helper_mode), 0);
    make_file(f, "", "p.so", 0644);

    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.isolated = 1;
    opts.helper_path = helper;
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(&opts, &host), 0);
    int32_t rc = wsel_host_switch(host, f->path, NULL, f->err, sizeof(f->err));
    wsel_host_destroy(host);
    assert_int_equal(rc, WSEL_EPERM);
    if (strstr(f->err, needle) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", f->err, needle);
    assert_int_equal(access(marker, F_OK), -1);
}

static void test_refuses_world_writable_helper(void **state)
{
    expect_helper_refused(*state, 0777, 0755,
                          "/bin/helper.sh: refused: world-writable (mode 0777); "
                          "helper programs must not be writable by others");
}

static void test_refuses_helper_in_world_writable_folder(void **state)
{
    expect_helper_refused(*state, 0755, 0777,
                          "/bin is world-writable without the sticky bit (mode 0777); "
                          "others could replace the helper program");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_accepts_a_private_file_in_a_private_folder),
        T(test_returns_an_open_read_only_descriptor),
        T(test_refuses_group_writable_file),
        T(test_refuses_world_writable_file),
        T(test_refuses_world_writable_folder_without_sticky_bit),
        T(test_refuses_group_writable_folder),
        T(test_accepts_sticky_world_writable_folder),
        T(test_refuses_a_writable_folder_higher_up),
        T(test_refuses_symbolic_link),
        T(test_refuses_directory),
        T(test_refuses_fifo_without_blocking),
        T(test_refuses_file_owned_by_another_user),
        T(test_refuses_folder_owned_by_another_user),
        T(test_reports_missing_file),
        T(test_rejects_empty_path),
        T(test_accepts_relative_path),
        T(test_allow_list_accepts_folder_inside),
        T(test_allow_list_resolves_symlinked_folders),
        T(test_allow_list_refuses_folder_outside),
        T(test_refuses_symlink_inside_world_writable_folder),
        T(test_refuses_symlink_owned_by_another_user_in_sticky_folder),
        T(test_follows_symlinks_in_trusted_folders),
        T(test_folder_swap_race_never_opens_the_untrusted_file),
        T(test_refuses_world_writable_helper),
        T(test_refuses_helper_in_world_writable_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
