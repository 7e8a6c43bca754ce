/*
 * test_hf_folder.c — ra_hf_checkpoint_find: a checkpoint's files as
 * transformers' from_pretrained finds them in a folder (model.safetensors
 * first, then model.safetensors.index.json) and the config.json beside
 * the weights; nothing is opened, so the files here are empty.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ropeattn_hf.h"

static char root[] = "/tmp/ropeattn-folder-XXXXXX";

/* root/name, in a buffer per call site's turn (two at a time). */
static const char *at(const char *name)
{
    static char paths[2][512];
    static int turn;
    turn ^= 1;
    snprintf(paths[turn], sizeof paths[turn], "%s/%s", root, name);
    return paths[turn];
}

static void touch(const char *name)
{
    FILE *f = fopen(at(name), "w");
    if (f) fclose(f);
}

/* The folders and files the cases find in (each folder before what it holds). */
static const char *const folders[] = {"single", "both", "sharded", "empty", "odd",
                                      "odd/model.safetensors", "odd/config.json"};
static const char *const files[] = {"single/model.safetensors", "single/config.json",
                                    "both/model.safetensors", "both/model.safetensors.index.json",
                                    "both/config.json", "sharded/model.safetensors.index.json",
                                    "sharded/model-00001-of-00001.safetensors",
                                    "odd/model.safetensors.index.json"};
enum { N_FOLDERS = sizeof folders / sizeof folders[0], N_FILES = sizeof files / sizeof files[0] };

static void make_folders(void)
{
    for (int i = 0; i < N_FOLDERS; i++) mkdir(at(folders[i]), 0700);
    for (int i = 0; i < N_FILES; i++) touch(files[i]);
}

static void remove_folders(void)
{
    for (int i = 0; i < N_FILES; i++) unlink(at(files[i]));
    for (int i = N_FOLDERS - 1; i >= 0; i--) rmdir(at(folders[i]));
    rmdir(root);
}

/* find(path) must give weights and config (both root-relative; "" for none). */
static void expect_found(const char *path, const char *weights, const char *config)
{
    char w[512], c[512], want_w[512], want_c[512];
    snprintf(want_w, sizeof want_w, "%s/%s", root, weights);
    snprintf(want_c, sizeof want_c, "%s%s%s", config[0] ? root : "", config[0] ? "/" : "",
             config);
    ra_status status = ra_hf_checkpoint_find(path, w, c, sizeof w);
    CHECK(status == RA_OK, "%s: status %d (%s)", path, (int)status, ra_hf_last_error());
    CHECK(strcmp(w, want_w) == 0, "%s: weights '%s', want '%s'", path, w, want_w);
    CHECK(strcmp(c, want_c) == 0, "%s: config '%s', want '%s'", path, c, want_c);
}

static void test_folders(void)
{
    /* transformers' order: the single file before the sharded index */
    expect_found(at("single"), "single/model.safetensors", "single/config.json");
    expect_found(at("both"), "both/model.safetensors", "both/config.json");
    expect_found(at("both/"), "both/model.safetensors", "both/config.json");
    expect_found(at("sharded"), "sharded/model.safetensors.index.json", "");
    /* a folder named like the files is not one of them (os.path.isfile) */
    expect_found(at("odd"), "odd/model.safetensors.index.json", "");
}

static void test_files(void)
{
    /* a file is the weights as given, with the config.json of its folder */
    expect_found(at("single/model.safetensors"), "single/model.safetensors",
                 "single/config.json");
    expect_found(at("both/model.safetensors.index.json"), "both/model.safetensors.index.json",
                 "both/config.json");
    expect_found(at("sharded/model-00001-of-00001.safetensors"),
                 "sharded/model-00001-of-00001.safetensors", "");
    /* not there: for ra_hf_checkpoint_open to refuse, naming it */
    expect_found(at("single/absent.safetensors"), "single/absent.safetensors",
                 "single/config.json");
    /* a bare name: the current folder's config.json */
    char w[64], c[64];
    CHECK(chdir(at("single")) == 0, "chdir");
    CHECK(ra_hf_checkpoint_find("model.safetensors", w, c, sizeof w) == RA_OK &&
              strcmp(w, "model.safetensors") == 0 && strcmp(c, "config.json") == 0,
          "bare name: '%s', '%s'", w, c);
    CHECK(chdir("/") == 0, "chdir /");
}

static void expect_failure(ra_status got, ra_status want, const char *needle, const char *w,
                           const char *c, const char *what)
{
    CHECK(got == want, "%s: status %d (%s), want %d", what, (int)got, ra_hf_last_error(),
          (int)want);
    CHECK(strstr(ra_hf_last_error(), needle) != NULL, "%s: \"%s\" does not name \"%s\"", what,
          ra_hf_last_error(), needle);
    CHECK(!w[0] && !c[0], "%s: left '%s', '%s'", what, w, c);
}

static void test_failures(void)
{
    char w[512] = "x", c[512] = "x";
    expect_failure(ra_hf_checkpoint_find(at("empty"), w, c, sizeof w), RA_ERR_NOT_FOUND,
                   "empty: a folder with neither model.safetensors nor "
                   "model.safetensors.index.json", w, c, "empty folder");
    expect_failure(ra_hf_checkpoint_find("", w, c, sizeof w), RA_ERR_ARGUMENT, "path is empty",
                   w, c, "empty path");
    expect_failure(ra_hf_checkpoint_find(at("single"), w, c, 8), RA_ERR_SIZE,
                   "does not fit in 8 bytes", w, c, "small buffers");
    CHECK(ra_hf_checkpoint_find(NULL, w, c, sizeof w) == RA_ERR_NULL &&
              strstr(ra_hf_last_error(), "path is NULL"), "NULL path: %s", ra_hf_last_error());
    CHECK(ra_hf_checkpoint_find(at("single"), NULL, c, sizeof c) == RA_ERR_NULL &&
              strstr(ra_hf_last_error(), "weights is NULL"), "NULL weights");
    CHECK(ra_hf_checkpoint_find(at("single"), w, NULL, sizeof w) == RA_ERR_NULL &&
              strstr(ra_hf_last_error(), "config is NULL"), "NULL config");
    CHECK(ra_hf_checkpoint_find(at("single"), w, c, 0) == RA_ERR_SIZE, "size 0");
    CHECK(ra_hf_checkpoint_find(at("single"), w, c, sizeof w) == RA_OK &&
              ra_hf_last_error()[0] == '\0', "a success leaves no message");
}

int main(void)
{
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    make_folders();
    RUN(test_folders);
    RUN(test_files);
    RUN(test_failures);
    remove_folders();
    return ra_test_summary("hf_folder");
}
