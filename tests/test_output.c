/*
 * test_output.c — output files (src/io/atomic.c): what may be replaced, what
 * a replacement keeps, and that a failure leaves nothing behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "io/io.h"

static char temp_dir[256]; /* made by main under $TMPDIR or /tmp */

/* temp_dir/name in one of a few rotating buffers. */
static const char *tpath(const char *name)
{
    static char paths[4][768];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", temp_dir, name);
    return p;
}

static void write_text(const char *name, const char *text)
{
    FILE *f = fopen(tpath(name), "w");
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *name, const char *text)
{
    char buf[64] = "";
    FILE *f = fopen(tpath(name), "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

/* The number of ".ropeattn-" temporary files in temp_dir. */
static int temps_left(void)
{
    DIR *dir = opendir(temp_dir);
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        n += strncmp(e->d_name, ".ropeattn-", 10) == 0;
    if (dir) closedir(dir);
    return n;
}

static ra_status write_new(const char *path, const char *text)
{
    char msg[512];
    const void *parts[] = {text};
    const size_t sizes[] = {strlen(text)};
    return ra_write_file_atomic(path, parts, sizes, 1, msg, sizeof msg);
}

static void test_replaces_regular_files_only(void)
{
    char msg[512];
    mkfifo(tpath("fifo"), 0600);
    mkdir(tpath("folder"), 0700);
    symlink("/dev/null", tpath("null_link"));
    symlink("fifo", tpath("fifo_link"));
    symlink("missing", tpath("dangling"));
    const char *refused[] = {"/dev/null", tpath("fifo"), tpath("folder"), tpath("null_link"),
                             tpath("fifo_link"), tpath("dangling"), tpath("no/such/folder/f")};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ra_io_output out;
        ra_status status = ra_io_output_prepare(&out, refused[i], msg, sizeof msg);
        CHECK(status != RA_OK && strstr(msg, refused[i]), "%s: %d, '%s'", refused[i], status, msg);
        ra_io_output_discard(&out);
        CHECK(write_new(refused[i], "x") != RA_OK, "%s written", refused[i]);
    }
    struct stat st;
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is not a device now");
    CHECK(lstat(tpath("fifo"), &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    CHECK(temps_left() == 0, "temporary files left");
}

static void test_keeps_mode_and_links(void)
{
    write_text("kept", "old");
    chmod(tpath("kept"), 0640);
    symlink("kept", tpath("kept_link"));
    CHECK(write_new(tpath("kept"), "new") == RA_OK, "replacing a regular file");
    struct stat st;
    CHECK(stat(tpath("kept"), &st) == 0 && (st.st_mode & 07777) == 0640, "mode %o",
          (unsigned)(st.st_mode & 07777));
    CHECK(file_is("kept", "new"), "content not replaced");
    CHECK(write_new(tpath("kept_link"), "via link") == RA_OK, "through a link");
    CHECK(lstat(tpath("kept_link"), &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    CHECK(file_is("kept", "via link"), "the linked file was not replaced");
    CHECK(stat(tpath("kept"), &st) == 0 && (st.st_mode & 07777) == 0640, "mode lost via link");
    CHECK(temps_left() == 0, "temporary files left");
}

static void test_long_name(void)
{
    char name[256];
    memset(name, 'n', 255);
    name[255] = '\0';
    CHECK(write_new(tpath(name), "a") == RA_OK, "a name of 255 bytes");
    CHECK(write_new(tpath(name), "b") == RA_OK && file_is(name, "b"), "replacing it");
    unlink(tpath(name));
    CHECK(temps_left() == 0, "temporary files left");
}

static void test_same_output(void)
{
    char msg[512];
    write_text("a", "a");
    link(tpath("a"), tpath("a_hard"));
    ra_io_output x, y, z, w;
    CHECK(ra_io_output_prepare(&x, tpath("a"), msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(ra_io_output_prepare(&y, tpath("a_hard"), msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(ra_io_output_prepare(&z, tpath("new"), msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(ra_io_output_prepare(&w, tpath("./new"), msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(ra_io_output_same(&x, &y), "hard links are one file");
    CHECK(ra_io_output_same(&z, &w), "a new name through ./ is one file");
    CHECK(!ra_io_output_same(&x, &z) && !ra_io_output_same(&z, &x), "different files");
    ra_io_output unprepared = {.fd = -1};
    CHECK(!ra_io_output_same(&x, NULL) && !ra_io_output_same(&unprepared, &unprepared),
          "NULL or not prepared: not the same (ropeattn_io.h)");
    ra_io_output_discard(&x);
    ra_io_output_discard(&y);
    ra_io_output_discard(&z);
    ra_io_output_discard(&w);
}

/* A failed write or one never committed leaves the target and no temporary. */
static void test_failure_leaves_nothing(void)
{
    char msg[512];
    write_text("target", "old");
    ra_io_output out;
    CHECK(ra_io_output_prepare(&out, tpath("target"), msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(ra_io_output_create(&out, msg, sizeof msg) == RA_OK, "%s", msg);
    CHECK(temps_left() == 1, "no temporary file while writing");
    const void *parts[] = {NULL};
    const size_t sizes[] = {4};
    CHECK(ra_io_write_parts(out.fd, out.path, parts, sizes, 1, msg, sizeof msg) == RA_ERR_NULL,
          "a NULL part");
    CHECK(ra_io_output_commit(&out, msg, sizeof msg) != RA_OK, "committed while open");
    ra_io_output_discard(&out);
    CHECK(file_is("target", "old") && temps_left() == 0, "the target changed or a temporary is left");
    CHECK(ra_io_write_parts(-1, "x", parts, sizes, 0, msg, sizeof msg) == RA_ERR_ARGUMENT,
          "fd -1");
    ra_io_output_discard(NULL);
}

int main(void)
{
    umask(022);
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/ra_test_output.XXXXXX",
             tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(temp_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_replaces_regular_files_only);
    RUN(test_keeps_mode_and_links);
    RUN(test_long_name);
    RUN(test_same_output);
    RUN(test_failure_leaves_nothing);
    char command[512];
    snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
    return ra_test_summary("output");
}
