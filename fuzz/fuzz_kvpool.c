/*
 * fuzz_kvpool.c — the paged KV pool on fuzzed operation sequences: a pool
 * of fuzzed pages, page size, group (pages a group: 1 to 5, or the
 * pool's choice), heads, dtype (fp8 with fuzzed scales) and sequence
 * count, then up to 16 operations: add (a window or none), fork,
 * free, append (some ids, fuzzed lengths and positions, invalid and
 * repeated ids too) and decode (some ids, ragged n_query, masks, the
 * calling thread or two).
 *
 * A model keeps each live sequence's rotated k and v rows.  After every
 * operation the pool's books must balance (each page's holds are the live
 * tables holding it, the free stack is the pages nobody holds, each
 * group counts its free pages and the wholly free ones are on their stack,
 * each table spans its sequence's kept pages).  A successful append must advance the
 * lengths and rotate k as it said; a refused one (a documented status)
 * must change no length and no page, and an append whose pages are
 * certainly there must not be refused.  A decode must give the bits of
 * ra_attention_decode on a contiguous cache holding the model's rows, and
 * be refused only for a window sequence's masks.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "kvpool_internal.h"

enum { MAX_SEQS = 4, MAX_LEN = 96, MAX_S = 6, MAX_OPS = 16, MAX_HKV = 2, MAX_D = 12,
       MAX_H = MAX_HKV * 3 };

static ra_context *two_threads;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    FUZZ_CHECK(ra_context_create(&two_threads, 2) == RA_OK, "context");
    return 0;
}

typedef struct model {
    ra_kv_pool *pool;
    ra_dtype dtype;
    int64_t hkv, rep, d, ps;
    float k_scales[MAX_HKV], v_scales[MAX_HKV];
    int live[MAX_SEQS];
    int64_t given[MAX_SEQS]; /* the id the pool last gave in each slot (the slot at first) */
    int64_t length[MAX_SEQS], window[MAX_SEQS];
    float rows[MAX_SEQS][2][MAX_LEN * MAX_HKV * MAX_D]; /* rotated k, v [len, Hkv, D] */
} model;

/* The pool's books: holds, the free stack and the tables' spans. */
static void check_books(const model *m)
{
    const ra_kv_pool *p = m->pool;
    int32_t holds[4096] = {0};
    FUZZ_CHECK(p->n_pages <= 4096, "pages");
    for (int64_t id = 0; id < p->max_sequences; id++) {
        const ra_kv_sequence *s = &p->seqs[id];
        FUZZ_CHECK(!!s->in_use == !!m->live[id], "sequence %lld live", (long long)id);
        if (!s->in_use) continue;
        FUZZ_CHECK(s->length == m->length[id], "length of %lld", (long long)id);
        FUZZ_CHECK(s->n_table == ra_kv_pool_pages_of(p, s->length) - s->first_page,
                   "table of %lld spans %lld pages", (long long)id, (long long)s->n_table);
        for (int64_t t = 0; t < s->n_table; t++) holds[s->table[t]]++;
    }
    int64_t free_count = 0;
    for (int64_t i = 0; i < p->n_pages; i++) {
        FUZZ_CHECK(holds[i] == p->refs[i], "page %lld: %d holds, refs %d", (long long)i,
                   holds[i], p->refs[i]);
        free_count += holds[i] == 0;
    }
    FUZZ_CHECK(free_count == p->n_free, "%lld free pages, the stack says %lld",
               (long long)free_count, (long long)p->n_free);
    for (int64_t i = 0; i < p->n_free; i++)
        FUZZ_CHECK(p->refs[p->free_pages[i]] == 0 && p->free_at[p->free_pages[i]] == i,
                   "a held page on the free stack, or its index wrong");
    /* the groups: each one's free pages, the wholly free ones' stack */
    int64_t whole = 0;
    for (int64_t g = 0; g * p->group < p->n_pages; g++) {
        const int64_t end = (g + 1) * p->group < p->n_pages ? (g + 1) * p->group : p->n_pages;
        int64_t n = 0;
        for (int64_t i = g * p->group; i < end; i++) n += holds[i] == 0;
        FUZZ_CHECK(p->group_free[g] == n, "group %lld: %lld free, its count %d", (long long)g,
                   (long long)n, p->group_free[g]);
        if (n < end - g * p->group) continue;
        whole++;
        const int32_t at = p->free_group_at[g];
        FUZZ_CHECK(at >= 0 && at < p->n_free_groups && p->free_groups[at] == g,
                   "wholly free group %lld not on its stack", (long long)g);
    }
    FUZZ_CHECK(whole == p->n_free_groups, "%lld wholly free groups, the stack says %lld",
               (long long)whole, (long long)p->n_free_groups);
}

/* The slot of an id the pool gave: its low 32 bits (ra_kv_pool_add_sequence). */
static int64_t slot_of(int64_t id)
{
    return id & 0xffffffff;
}

/* Whether id names a live sequence of the model, as the pool gave it (a
 * freed one's id names nothing, whoever holds its slot now). */
static int is_live(const model *m, int64_t id)
{
    return id >= 0 && slot_of(id) < MAX_SEQS && m->live[slot_of(id)] &&
           m->given[slot_of(id)] == id;
}

/* An id: mostly the one the pool last gave in a slot (live or freed),
 * sometimes a slot's own number (a freed one's where the slot was reused)
 * or out of range. */
static int64_t take_id(fuzz_input *in, const model *m)
{
    const int64_t slot = take_range(in, -1, MAX_SEQS);
    return slot >= 0 && slot < MAX_SEQS && take_byte(in) % 4 != 0 ? m->given[slot] : slot;
}

static void op_append(fuzz_input *in, model *m, ra_rope *rope)
{
    const int64_t n_ids = take_range(in, 1, 3), seq = take_range(in, 1, MAX_S);
    int64_t ids[3], n_new[3];
    int valid = 1, distinct = 1, room = 1;
    int64_t needed = 0;
    for (int64_t i = 0; i < n_ids; i++) {
        ids[i] = take_id(in, m);
        n_new[i] = take_range(in, 0, seq);
        if (!is_live(m, ids[i])) valid = 0;
        for (int64_t j = 0; j < i; j++) distinct &= ids[j] != ids[i];
    }
    const int64_t rows = n_ids * seq * m->hkv * m->d;
    float k[3 * MAX_S * MAX_HKV * MAX_D], v[3 * MAX_S * MAX_HKV * MAX_D];
    for (int64_t i = 0; i < rows; i++) {
        k[i] = (float)(take_range(in, -64, 64) / 16.0);
        v[i] = (float)(take_range(in, -64, 64) / 16.0);
    }
    ra_positions pos = ra_positions_start(take_range(in, 0, 40));
    const int64_t free_before = m->pool->n_free;
    int64_t length_before[MAX_SEQS];
    memcpy(length_before, m->length, sizeof length_before);
    if (valid && distinct)
        for (int64_t i = 0; i < n_ids; i++) {
            const ra_kv_sequence *s = &m->pool->seqs[slot_of(ids[i])];
            const int64_t L = s->length, n = n_new[i];
            if (L + n > MAX_LEN) room = 0; /* the model's room, not the pool's */
            needed += ra_kv_pool_pages_of(m->pool, L + n) - ra_kv_pool_pages_of(m->pool, L) +
                      (n > 0 && L % m->ps != 0); /* a copy at most */
        }
    if (!room) return;
    ra_tensor tk = ra_tensor_4d(k, RA_F32, n_ids, seq, m->hkv, m->d);
    ra_tensor tv = ra_tensor_4d(v, RA_F32, n_ids, seq, m->hkv, m->d);
    ra_status st = ra_kv_pool_append(take_byte(in) & 1 ? two_threads : NULL, m->pool, rope, ids,
                                     n_ids, NULL, &tk, &tv, &pos, n_new);
    if (st != RA_OK) {
        FUZZ_CHECK(st == RA_ERR_CACHE_FULL || ((!valid || !distinct) && st == RA_ERR_ARGUMENT),
                   "append refused with %s: %s", ra_status_string(st), ra_last_error());
        FUZZ_CHECK(!(valid && distinct && needed <= free_before),
                   "refused with %lld pages free for %lld", (long long)free_before,
                   (long long)needed);
        FUZZ_CHECK(m->pool->n_free == free_before, "a refused append moved pages");
        for (int64_t id = 0; id < MAX_SEQS; id++)
            FUZZ_CHECK(!m->live[id] || m->pool->seqs[id].length == length_before[id],
                       "a refused append changed a length");
        return;
    }
    FUZZ_CHECK(valid && distinct, "an append took a repeated or dead id");
    const int64_t row = m->hkv * m->d;
    for (int64_t i = 0; i < n_ids; i++) { /* k as rotated in place */
        const int64_t sl = slot_of(ids[i]);
        float *to[2] = {m->rows[sl][0], m->rows[sl][1]};
        memcpy(to[0] + m->length[sl] * row, k + i * seq * row, (size_t)(n_new[i] * row) * 4);
        memcpy(to[1] + m->length[sl] * row, v + i * seq * row, (size_t)(n_new[i] * row) * 4);
        m->length[sl] += n_new[i];
    }
}

/* Decodes some ids from the pool and from a contiguous cache of the
 * model's rows; the same status class and the same bits. */
static void op_decode(fuzz_input *in, model *m)
{
    const int64_t n_ids = take_range(in, 1, 3), T = take_range(in, 1, 3);
    int64_t ids[3], given[3], n_query[3], cap = 1; /* ids: the model's slots */
    int windowed = 0;
    for (int64_t i = 0; i < n_ids; i++) {
        ids[i] = take_range(in, 0, MAX_SEQS - 1);
        if (!m->live[ids[i]]) return;
        given[i] = m->given[ids[i]];
        n_query[i] = take_range(in, 0, T);
        cap = m->length[ids[i]] > cap ? m->length[ids[i]] : cap;
        windowed |= m->window[ids[i]] != 0;
    }
    ra_attention_options o = ra_attention_options_init();
    o.window = take_range(in, 0, 12);
    o.chunk = take_byte(in) % 4 == 0 ? take_range(in, 1, 12) : 0;
    o.softcap = take_byte(in) % 4 == 0 ? 2.5 : 0;
    float sinks[MAX_H];
    for (int i = 0; i < MAX_H; i++) sinks[i] = (float)(take_range(in, -8, 8) / 4.0);
    o.sinks = take_byte(in) % 4 == 0 ? sinks : NULL;
    const int64_t h = m->hkv * m->rep, n = n_ids * T * h * m->d;
    float q[3 * 3 * MAX_H * MAX_D], a[3 * 3 * MAX_H * MAX_D], b[3 * 3 * MAX_H * MAX_D];
    for (int64_t i = 0; i < n; i++) q[i] = (float)(take_range(in, -64, 64) / 16.0);
    memset(a, 0x7f, sizeof a);
    memset(b, 0x7f, sizeof b);
    ra_kv_cache *cache;
    FUZZ_CHECK(ra_kv_cache_create(&cache, n_ids, cap, m->hkv, m->d, m->dtype) == RA_OK, "cache");
    if (m->dtype == RA_F8E4M3)
        FUZZ_CHECK(ra_kv_cache_set_scales(cache, m->k_scales, m->v_scales, m->hkv) == RA_OK,
                   "scales");
    /* the model's rows at RoPE position 0 (the identity) */
    ra_rope_config rc = ra_rope_config_default(m->d);
    rc.table_size = 1;
    ra_rope *identity;
    FUZZ_CHECK(ra_rope_create(&identity, &rc) == RA_OK, "rope");
    const int64_t row = m->hkv * m->d;
    float *kt = calloc((size_t)(n_ids * cap * row), 4), *vt = calloc((size_t)(n_ids * cap * row), 4);
    int64_t *zeros = calloc((size_t)(n_ids * cap), 8), lens[3];
    for (int64_t i = 0; i < n_ids; i++) {
        lens[i] = m->length[ids[i]];
        memcpy(kt + i * cap * row, m->rows[ids[i]][0], (size_t)(lens[i] * row) * 4);
        memcpy(vt + i * cap * row, m->rows[ids[i]][1], (size_t)(lens[i] * row) * 4);
    }
    ra_tensor tk = ra_tensor_4d(kt, RA_F32, n_ids, cap, m->hkv, m->d);
    ra_tensor tv = ra_tensor_4d(vt, RA_F32, n_ids, cap, m->hkv, m->d);
    ra_positions at = ra_positions_start(0);
    at.ids = zeros;
    FUZZ_CHECK(ra_kv_cache_append(NULL, cache, identity, NULL, &tk, &tv, &at, lens) == RA_OK,
               "the twin's append: %s", ra_last_error());
    ra_tensor tq = ra_tensor_4d(q, RA_F32, n_ids, T, h, m->d);
    ra_tensor ta = ra_tensor_4d(a, RA_F32, n_ids, T, h, m->d);
    ra_tensor tb = ra_tensor_4d(b, RA_F32, n_ids, T, h, m->d);
    ra_context *ctx = take_byte(in) & 1 ? two_threads : NULL;
    const ra_status want = ra_attention_decode(NULL, cache, &ta, &tq, n_query, &o);
    const ra_status got = ra_attention_decode_paged(ctx, m->pool, given, n_ids, &tb, &tq, n_query, &o);
    if (got == RA_OK) {
        FUZZ_CHECK(want == RA_OK, "the pool decodes what the cache refuses (%s)",
                   ra_status_string(want));
        FUZZ_CHECK(memcmp(a, b, (size_t)n * 4) == 0, "not the contiguous cache's bits");
    } else if (want == RA_OK) {
        FUZZ_CHECK(windowed && (got == RA_ERR_ARGUMENT || got == RA_ERR_SIZE),
                   "refused (%s: %s) what the cache decodes", ra_status_string(got),
                   ra_last_error());
    }
    ra_rope_destroy(identity);
    ra_kv_cache_destroy(cache);
    free(kt), free(vt), free(zeros);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_input in = {data, size};
    static const ra_dtype dtypes[5] = {RA_F32, RA_F16, RA_BF16, RA_I8, RA_F8E4M3};
    static model m;
    memset(&m, 0, sizeof m);
    for (int64_t s = 0; s < MAX_SEQS; s++) m.given[s] = s;
    m.dtype = TAKE_ONE_OF(&in, dtypes);
    m.ps = take_range(&in, 1, 9);
    m.hkv = take_range(&in, 1, MAX_HKV);
    m.rep = take_range(&in, 1, 3);
    m.d = 2 * take_range(&in, 1, MAX_D / 2);
    const int64_t n_pages = take_range(&in, 1, 40), max_seqs = take_range(&in, 1, MAX_SEQS);
    const int64_t group = take_range(&in, 0, 5); /* pages a group; 0: the pool's choice */
    if (ra_kv_pool_create_grouped(&m.pool, n_pages, m.ps, max_seqs, m.hkv, m.d, m.dtype, group) !=
        RA_OK) {
        FUZZ_CHECK(0, "create: %s", ra_last_error());
    }
    for (int64_t g = 0; g < m.hkv; g++) {
        m.k_scales[g] = (float)take_range(&in, 1, 8) / 4.0f;
        m.v_scales[g] = (float)take_range(&in, 1, 8) / 4.0f;
    }
    if (m.dtype == RA_F8E4M3)
        FUZZ_CHECK(ra_kv_pool_set_scales(m.pool, m.k_scales, m.v_scales, m.hkv) == RA_OK,
                   "scales: %s", ra_last_error());
    ra_rope_config rc = ra_rope_config_default(m.d);
    ra_rope *rope;
    FUZZ_CHECK(ra_rope_create(&rope, &rc) == RA_OK, "rope");
    const int ops = (int)take_range(&in, 1, MAX_OPS);
    for (int op = 0; op < ops && in.n > 0; op++) {
        const int kind = take_byte(&in) % 5;
        if (kind == 0) {
            const int64_t window = take_byte(&in) % 3 == 0 ? take_range(&in, 1, 12) : 0;
            int64_t id = -1;
            const ra_status st = ra_kv_pool_add_sequence(m.pool, window, &id);
            FUZZ_CHECK(st == RA_OK || st == RA_ERR_CACHE_FULL, "add: %s", ra_last_error());
            if (st == RA_OK) {
                const int64_t sl = slot_of(id);
                FUZZ_CHECK(id >= 0 && sl < max_seqs && !m.live[sl], "add gave id %lld",
                           (long long)id);
                m.given[sl] = id, m.live[sl] = 1, m.length[sl] = 0, m.window[sl] = window;
            }
        } else if (kind == 1) {
            const int64_t parent = take_id(&in, &m);
            int64_t id = -1;
            const ra_status st = ra_kv_pool_fork(m.pool, parent, &id);
            const int parent_live = is_live(&m, parent);
            FUZZ_CHECK(st == (parent_live ? st : RA_ERR_ARGUMENT) &&
                           (st == RA_OK || st == RA_ERR_CACHE_FULL || st == RA_ERR_ARGUMENT),
                       "fork: %s", ra_last_error());
            if (st == RA_OK) {
                const int64_t sl = slot_of(id), from = slot_of(parent);
                FUZZ_CHECK(id >= 0 && sl < max_seqs && !m.live[sl], "fork gave id %lld",
                           (long long)id);
                m.given[sl] = id, m.live[sl] = 1;
                m.length[sl] = m.length[from], m.window[sl] = m.window[from];
                memcpy(m.rows[sl], m.rows[from], sizeof m.rows[sl]);
            }
        } else if (kind == 2) {
            const int64_t id = take_id(&in, &m);
            const ra_status st = ra_kv_pool_free_sequence(m.pool, id);
            const int live = is_live(&m, id);
            FUZZ_CHECK(st == (live ? RA_OK : RA_ERR_ARGUMENT), "free: %s", ra_last_error());
            if (live) m.live[slot_of(id)] = 0;
        } else if (kind == 3) {
            op_append(&in, &m, rope);
        } else {
            op_decode(&in, &m);
        }
        check_books(&m);
    }
    ra_rope_destroy(rope);
    ra_kv_pool_destroy(m.pool);
    return 0;
}
