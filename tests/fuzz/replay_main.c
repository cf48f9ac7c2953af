// SPDX-License-Identifier: Apache-2.0
/*
 * replay_main.c -- run a fuzz harness over saved inputs, without libFuzzer.
 *
 * Linked into fuzz_<name>_replay in ordinary builds (gcc, sanitizers), so
 * the committed corpus and every crash reproducer stay regression tests
 * where libFuzzer is not available. Arguments are files or folders (each
 * regular file in a folder is one input). Exit status 0 when every input
 * ran; a breach aborts inside the harness.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Run one input file; 0 or -1 with a message naming the path. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    long size;
    int rc = -1;

    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto out_close_file;
    data = malloc(size > 0 ? (size_t)size : 1);
    if (!data)
        goto out_close_file;
    if (size > 0 && fread(data, 1, (size_t)size, f) != (size_t)size)
        goto out_free_data;
    LLVMFuzzerTestOneInput(data, (size_t)size);
    rc = 0;

out_free_data:
    free(data);
out_close_file:
    fclose(f);
    if (rc != 0)
        fprintf(stderr, "replay: cannot read %s\n", path);
    return rc;
}

/* Run every regular file in `dir`; number run, or -1. */
static int replay_dir(const char *dir)
{
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, alphasort);
    int run = 0;

    if (n < 0) {
        fprintf(stderr, "replay: cannot list %s\n", dir);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name) <
                (int)sizeof path &&
            stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) != 0)
                run = -1;
            else if (run >= 0)
                run++;
        }
        free(entries[i]);
    }
    free(entries);
    return run;
}

int main(int argc, char **argv)
{
    int total = 0;

    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int run;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such input %s\n", argv[i]);
            return 1;
        }
        run = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : (replay_file(argv[i]) ? -1 : 1);
        if (run < 0)
            return 1;
        total += run;
    }
    printf("replay: %d inputs ran\n", total);
    return 0;
}
