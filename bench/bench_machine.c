/*
 * bench_machine.c — which machine a bench run is on, for every record: the
 * CPU's name, family and model, the library's kernels and their vector
 * width, and one core's level-2 cache (the in-cache decode cases size their
 * cache by it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "bench.h"

/* Copies src into dst (len bytes) without its leading and trailing spaces. */
static void trimmed(char *dst, size_t len, const char *src)
{
    while (*src == ' ' || *src == '\t') src++;
    size_t n = strlen(src);
    while (n > 0 && (src[n - 1] == ' ' || src[n - 1] == '\n' || src[n - 1] == '\t')) n--;
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

#if defined(__x86_64__) || defined(__i386__)
/* CPUID leaves 0x80000002..4 (the brand string) and 1 (family and model,
 * with their extended bits as Intel and AMD define them). */
static void identify(bench_machine *m)
{
    unsigned a, b, c, d;
    char brand[49] = {0};
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004)
        for (unsigned leaf = 0; leaf < 3; leaf++) {
            __get_cpuid(0x80000002 + leaf, &a, &b, &c, &d);
            memcpy(brand + 16 * leaf, (unsigned[]){a, b, c, d}, 16);
        }
    trimmed(m->cpu, sizeof m->cpu, brand[0] ? brand : "unknown x86");
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
        if (family == 0xf) family += (a >> 20) & 0xff;
        if (family == 0x6 || family >= 0xf) model |= ((a >> 16) & 0xf) << 4;
        m->family = (int)family;
        m->model = (int)model;
    }
}
#else
/* /proc/cpuinfo's "model name" (or "Hardware", or the CPU part). */
static void identify(bench_machine *m)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    trimmed(m->cpu, sizeof m->cpu, "unknown");
    const char *keys[] = {"model name", "Hardware", "CPU part"};
    int found = 3;
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        for (int k = 0; colon && k < found; k++)
            if (strncmp(line, keys[k], strlen(keys[k])) == 0) {
                trimmed(m->cpu, sizeof m->cpu, colon + 1);
                found = k;
            }
    }
    if (f) fclose(f);
}
#endif

/* The vector width of the library's kernels, from their name
 * (ra_simd_name's documented values). */
static int vector_bits(const char *simd)
{
    if (strncmp(simd, "avx512", 6) == 0 || strcmp(simd, "amx") == 0) return 512;
    if (strcmp(simd, "avx2") == 0) return 256;
    return 128; /* sse2, neon */
}

/* The size of cpu0's level-2 data or unified cache from sysfs ("2048K"),
 * else glibc's sysconf; 0 if neither tells. */
static int64_t l2_bytes(void)
{
    for (int index = 0; index < 8; index++) {
        char path[96], level[16] = "", type[32] = "", size[32] = "";
        const char *names[] = {"level", "type", "size"};
        char *values[] = {level, type, size};
        const int lens[] = {sizeof level, sizeof type, sizeof size};
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index,
                     names[i]);
            FILE *f = fopen(path, "r");
            if (f && !fgets(values[i], lens[i], f)) values[i][0] = '\0';
            if (f) fclose(f);
        }
        if (atoi(level) != 2 || strncmp(type, "Instruction", 11) == 0) continue;
        char *end = NULL;
        long long n = strtoll(size, &end, 10);
        if (end == size || n <= 0) continue;
        return n * (*end == 'M' ? 1 << 20 : *end == 'K' ? 1 << 10 : 1);
    }
#if defined(_SC_LEVEL2_CACHE_SIZE)
    long n = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (n > 0) return n;
#endif
    return 0;
}

const bench_machine *bench_machine_info(void)
{
    static bench_machine machine;
    static int known;
    if (!known) {
        machine.family = machine.model = -1;
        identify(&machine);
        machine.simd = ra_simd_name();
        machine.vector_bits = vector_bits(machine.simd);
        machine.l2_bytes = l2_bytes();
        known = 1;
    }
    return &machine;
}
