/*
 * bench_torch.c — PyTorch timed beside the kernels: Meta's LLaMA reference
 * code (bench/seed_torch.py, torch 1.13) and PyTorch 2's own functions
 * (bench/torch2.py), each run in a child process, its JSON read from a pipe.
 *
 * Nothing here fails the bench.  The child gets /dev/null for stdin and
 * stderr, its own process group (so that a timeout kills whatever it
 * started), and opt->timeout_s to finish; past that the group is killed.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/timer.h"
#include "bench.h"

extern char **environ;

/* Most bytes of JSON the script may print. */
#define MAX_OUTPUT (64 * 1024)

/* What each column times, for the notes; its script; the cases it times. */
static const char *const column_what[] = {"Meta's LLaMA reference code in PyTorch",
                                          "PyTorch 2 (scaled_dot_product_attention, "
                                          "transformers' apply_rotary_pos_emb)"};
static const char *const column_script[] = {"seed_torch.py", "torch2.py"};

static int times_case(const bench_case *c, bench_torch_column column)
{
    return column == BENCH_TORCH2 ? c->has_torch2 : c->has_torch;
}

/* bench/NAME beside the build folder of this program (build/ropeattn ->
 * bench/NAME), beside the program itself, or under the current folder; 0
 * if found. */
static int find_script(const char *name, char *path, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    const char *const candidates[] = {"%s/../bench/%s", "%s/%s", "bench/%s"};
    for (int i = slash ? 0 : 2; i < 3; i++) {
        int n_chars = i < 2 ? snprintf(path, len, candidates[i], exe, name)
                            : snprintf(path, len, candidates[i], name);
        if (n_chars >= (int)len) continue;
        char resolved[PATH_MAX];
        if (access(path, R_OK) != 0) continue;
        if (realpath(path, resolved) && strlen(resolved) < len) strcpy(path, resolved);
        return 0;
    }
    return -1;
}

/* Runs argv with stdout into out[0..*len) (what passes cap is dropped);
 * waits at most timeout_s.  Returns NULL, or why it failed ("exit status
 * 1"). */
static const char *run_child(char *const *argv, double timeout_s, char *out, size_t cap,
                             size_t *len, char *why, size_t why_len)
{
    *len = 0;
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, why_len, "pipe: %s", strerror(errno));
        return why;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    pid_t pid;
    int err = posix_spawn(&pid, argv[0], &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(fds[1]);
    if (err != 0) {
        close(fds[0]);
        snprintf(why, why_len, "cannot run %s: %s", argv[0], strerror(err));
        return why;
    }

    /* Read until end of file or the deadline, then reap the child, killing
     * its process group (while the child, reaped or not, still holds the
     * group's id) if it is still running at the deadline. */
    double deadline = timer_seconds() + timeout_s;
    for (;;) {
        double left = deadline - timer_seconds();
        if (left <= 0) break;
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int ready = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (ready <= 0) continue; /* EINTR or a second gone by */
        char scratch[4096];
        char *into = *len < cap ? out + *len : scratch;
        size_t room = *len < cap ? cap - *len : sizeof scratch;
        ssize_t got = read(fds[0], into, room);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (into != scratch) *len += (size_t)got;
    }
    close(fds[0]);
    int status = 0, timed_out = 0;
    for (;;) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (done < 0 && errno != EINTR) {
            snprintf(why, why_len, "waitpid: %s", strerror(errno));
            return why;
        }
        if (timer_seconds() >= deadline) {
            kill(-pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            timed_out = 1;
            break;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    if (timed_out) {
        snprintf(why, why_len, "killed after %.0f s (RA_BENCH_TORCH_TIMEOUT)", timeout_s);
        return why;
    }
    if (WIFSIGNALED(status)) {
        snprintf(why, why_len, "killed by signal %d", WTERMSIG(status));
        return why;
    }
    if (WEXITSTATUS(status) != 0) {
        snprintf(why, why_len, "exit status %d", WEXITSTATUS(status));
        return why;
    }
    return NULL;
}

/* The selected cases' seconds (and compiled times) from the script's
 * "cases" object; returns how many it timed. */
static int read_cases(const cJSON *got, const bench_case *const *cases, const int *selected,
                      int n, double *seconds, double *compiled)
{
    int measured = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(got, cases[i]->name);
        const cJSON *median = cJSON_GetObjectItemCaseSensitive(item, "median_seconds");
        const cJSON *fused = cJSON_GetObjectItemCaseSensitive(item, "compiled_seconds");
        if (!selected[i] || !cJSON_IsNumber(median) || !(median->valuedouble > 0)) continue;
        seconds[i] = median->valuedouble;
        if (cJSON_IsNumber(fused) && fused->valuedouble > 0) compiled[i] = fused->valuedouble;
        measured++;
    }
    return measured;
}

void bench_torch(const bench_case *const *cases, const int *selected, int n,
                 const bench_torch_options *opt, double *seconds, double *compiled,
                 char *version, size_t version_len, FILE *notes)
{
    for (int i = 0; i < n; i++) seconds[i] = compiled[i] = NAN;
    version[0] = '\0';
    const char *what = column_what[opt->column], *name = column_script[opt->column];
    char only[1024] = "";
    for (int i = 0; i < n; i++)
        if (selected[i] && times_case(cases[i], opt->column))
            snprintf(only + strlen(only), sizeof only - strlen(only), "%s%s", only[0] ? "," : "",
                     cases[i]->name);
    if (!only[0]) return;

    char script[PATH_MAX];
    if (opt->script)
        snprintf(script, sizeof script, "%s", opt->script);
    else if (find_script(name, script, sizeof script) != 0) {
        fprintf(notes, "note: no comparison with %s: bench/%s is not beside this program "
                "(set RA_BENCH_%s_SCRIPT)\n", what, name,
                opt->column == BENCH_TORCH2 ? "TORCH2" : "TORCH");
        return;
    }
    char threads[32], repeats[32];
    snprintf(threads, sizeof threads, "%d", opt->threads);
    snprintf(repeats, sizeof repeats, "%d", opt->repeats);
    char *argv[] = {(char *)opt->python, script, "--threads", threads, "--repeats", repeats,
                    "--only", only, NULL};

    char *out = malloc(MAX_OUTPUT + 1), why[512];
    if (!out) return;
    size_t len = 0;
    fflush(NULL);
    double start = timer_seconds();
    const char *failed = run_child(argv, opt->timeout_s, out, MAX_OUTPUT, &len, why, sizeof why);
    double took = timer_seconds() - start;
    out[len] = '\0';
    cJSON *json = failed ? NULL : cJSON_Parse(out);
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(json, "error");
    const cJSON *got = cJSON_GetObjectItemCaseSensitive(json, "cases");
    const cJSON *torch_version = cJSON_GetObjectItemCaseSensitive(json, "torch_version");
    if (!failed && !json) failed = "its output is not JSON";
    if (!failed && cJSON_IsString(error)) {
        snprintf(why, sizeof why, "%s", error->valuestring);
        failed = why;
    }
    if (!failed && (!cJSON_IsObject(got) || !cJSON_IsString(torch_version)))
        failed = "its output lacks cases or torch_version";
    if (failed) {
        fprintf(notes, "note: no comparison with %s (%s %s): %s\n", what, opt->python, script,
                failed);
    } else {
        int measured = read_cases(got, cases, selected, n, seconds, compiled);
        snprintf(version, version_len, "torch %s, %d threads", torch_version->valuestring,
                 opt->threads);
        if (opt->column == BENCH_TORCH2)
            fprintf(notes, "note: vs torch2 = %s's median time / ours, for %d cases (%s; %s, "
                    "%.0f s; SDPA's GQA by enable_gqa or transformers' repeat_kv / pack_gqa, "
                    "whichever was faster)\n", what, measured, version, script, took);
        else
            fprintf(notes, "note: vs torch = %s's median time / ours, for %d cases (%s; %s, "
                    "%.0f s; its tensors are allocated afresh each call, as the seed does)\n",
                    what, measured, version, script, took);
    }
    cJSON_Delete(json);
    free(out);
}
