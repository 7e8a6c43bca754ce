/*
 * bench_torch.c — Meta's LLaMA reference code in PyTorch timed beside the kernels:
 * bench/seed_torch.py run in a child process, its JSON read from a pipe.
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

/* bench/seed_torch.py beside the build folder of this program (build/ropeattn
 * -> bench/seed_torch.py), beside the program itself, or under the current
 * folder; 0 if found. */
static int find_script(char *path, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    const char *const candidates[] = {"%s/../bench/seed_torch.py", "%s/seed_torch.py",
                                      "bench/seed_torch.py"};
    for (int i = slash ? 0 : 2; i < 3; i++) {
        if (snprintf(path, len, candidates[i], exe) >= (int)len) continue;
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

void bench_torch(const bench_case *const *cases, const int *selected, int n,
                 const bench_torch_options *opt, double *seconds, char *version,
                 size_t version_len, FILE *notes)
{
    for (int i = 0; i < n; i++) seconds[i] = NAN;
    version[0] = '\0';
    char only[1024] = "";
    for (int i = 0; i < n; i++)
        if (selected[i] && cases[i]->has_torch)
            snprintf(only + strlen(only), sizeof only - strlen(only), "%s%s", only[0] ? "," : "",
                     cases[i]->name);
    if (!only[0]) return;

    char script[PATH_MAX];
    if (opt->script)
        snprintf(script, sizeof script, "%s", opt->script);
    else if (find_script(script, sizeof script) != 0) {
        fprintf(notes, "note: no comparison with Meta's LLaMA reference code in PyTorch: bench/seed_torch.py "
                "is not beside this program (set RA_BENCH_TORCH_SCRIPT)\n");
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
        fprintf(notes, "note: no comparison with Meta's LLaMA reference code in PyTorch (%s %s): %s\n",
                opt->python, script, failed);
    } else {
        int measured = 0;
        for (int i = 0; i < n; i++) {
            const cJSON *item = cJSON_GetObjectItemCaseSensitive(got, cases[i]->name);
            const cJSON *median = cJSON_GetObjectItemCaseSensitive(item, "median_seconds");
            if (selected[i] && cJSON_IsNumber(median) && median->valuedouble > 0) {
                seconds[i] = median->valuedouble;
                measured++;
            }
        }
        snprintf(version, version_len, "torch %s, %d threads", torch_version->valuestring,
                 opt->threads);
        fprintf(notes, "note: vs torch = Meta's LLaMA reference code in PyTorch's median time / ours, for %d "
                "cases (%s; %s, %.0f s; its tensors are allocated afresh each call, as the "
                "seed does)\n", measured, version, script, took);
    }
    cJSON_Delete(json);
    free(out);
}
